/* restore.h — rebuilding Redis from the MySQL journal (docs/architecture.md, "Restore"): the
 * engine behind GET /reStore, GET /reStore/{id} (api_restore.c) and [redis] auto_restore (the
 * keeper).
 *
 * Reads MySQL: the message rows in a live state (delayed, ready, reserved), a page at a time in
 * one consistent snapshot, and far_biz; and Redis: the jobs each shard holds with their
 * versions (jobscan.lua).
 * Writes Redis: what Redis lacks (restore.lua, insert-if-absent), what MySQL has newer
 * (align.lua), the bizKeys of far jobs (farbiz.lua), a dead job run again (requeue.lua); every
 * job it changes is journaled as a transition through the outbox. While it runs, each shard's
 * "restoring" flag (finish and delete then leave tombstones, dropped when it ends);
 * when it completes, "restored" in each shard's marks hash (lossmark.h). MySQL is written only
 * by settling the outcomes in doubt first (doubt.h).
 * Threads: the submit calls are made on an event loop (an HTTP worker, the keeper); the work
 * runs on a MySQL pool thread (dbtask.h) with blocking Redis connections (rblock.h); `done`
 * runs on reply_to's loop. One whole restore at a time per instance (/reStore and
 * restore_auto share it); one job's restore needs none.
 * Reports: counts of each outcome, or what it could not reach. */
#ifndef HG_RESTORE_H
#define HG_RESTORE_H

#include <stdint.h>

struct app;
struct loopq;

/* What a whole restore did. */
struct restore_report {
    int expire;              /* jobs whose runAt has passed were put back (1) or left in MySQL (0) */
    long scanned;            /* live message rows read */
    long restored;           /* put back into Redis */
    long present;            /* Redis held them already */
    long expired_skipped;    /* runAt passed and expire = 0: left in MySQL */
    long gone;               /* ended while the restore ran (a tombstone): not brought back */
    long biz_held;           /* another live job holds the bizKey */
    long misplaced;          /* written under another [redis] shards value: cannot be placed */
    long far_biz;            /* bizKeys of far jobs put back */
    long checked;            /* the other way: jobs Redis held, compared with MySQL */
    long aligned, removed;   /* of those, MySQL had newer: rewritten, removed */
    int64_t ms;              /* from submit to done */
    const char *unavailable; /* NULL when it finished; else what it could not reach ("MySQL",
                                "Redis", ...), static text */
};

/* What a restore of one job did. */
enum restore_job_outcome {
    RESTORE_JOB_DONE,        /* `state` is where the job is; `restored` whether this put it there */
    RESTORE_JOB_NOT_FOUND,   /* Redis lacks it and MySQL has no row: `message` */
    RESTORE_JOB_REFUSED,     /* it cannot be restored (bizKey held, far, ended without force...): `message` */
    RESTORE_JOB_UNAVAILABLE, /* `message` names what could not be reached ("MySQL", "Redis") */
};

struct restore_job_report {
    uint64_t id;
    enum restore_job_outcome outcome;
    int restored;      /* put back (or requeued) by this call */
    int state;         /* the job's state now (job.h), when DONE */
    char message[160]; /* why, for the other outcomes */
};

enum restore_submitted {
    RESTORE_SUBMITTED, /* `done` will be called */
    RESTORE_BUSY,      /* a whole restore runs on this instance already */
    RESTORE_NO_MEMORY,
    RESTORE_NO_QUEUE, /* the MySQL task queue is full or stopping */
};

/* `report` is the callee's, valid during the call only. */
typedef void (*restore_done_fn)(const struct restore_report *report, void *arg);
typedef void (*restore_job_done_fn)(const struct restore_job_report *report, void *arg);

/* Start the two-way restore: settle outcomes in doubt, raise the restoring flags, wait for the
 * outbox, then align what Redis holds that MySQL has newer and put back what Redis lacks
 * (expire: also jobs whose runAt has passed). `client` (the requester's address) goes into the
 * journal's actor and the log. Unless it answers RESTORE_SUBMITTED, `done` is never called. */
enum restore_submitted restore_submit(const struct app *app, int expire, const char *client, struct loopq *reply_to,
                                      restore_done_fn done, void *arg) __attribute__((warn_unused_result));

/* Restore job `id` alone: if Redis holds it dead, requeue it; if Redis lacks it, put it back
 * from its MySQL row (force: also one that ended, started over). Unless it answers
 * RESTORE_SUBMITTED, `done` is never called. */
enum restore_submitted restore_job_submit(const struct app *app, uint64_t id, int force, const char *client,
                                          struct loopq *reply_to, restore_job_done_fn done, void *arg)
    __attribute__((warn_unused_result));

/* The two-way restore without a request ([redis] auto_restore, after a loss lossmark.h saw),
 * expire=true, on the MySQL pool; one instance of the fleet at a time (a Redis lock), and a
 * no-op while a restore runs on this instance. Its outcome is logged. */
void restore_auto(const struct app *app);

/* A rolled-back shard's fence check: Redis came back older on `shard` (lossmark.h, mark.lua),
 * which then moves and delivers nothing. On the MySQL pool, every job the shard holds is
 * compared with its row, MySQL's newer state (or its end at the same version) wins as in the
 * two-way restore, and the fence is lifted (unfence.lua) unless the shard was rolled back
 * again meanwhile. Needs no [redis] auto_restore and no admin: a fenced shard would deliver
 * nothing until it runs. One at a time per instance; a no-op while one runs. Logged. Jobs
 * the shard lacks are /reStore's to put back (the loss stays named in /health until then). */
void restore_fence_check(const struct app *app, int shard);

#endif
