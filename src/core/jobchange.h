/* jobchange.h — a journal record: one change of one job, as the journal writes it to MySQL (a
 * message row, a transition row, an update of the row). Made by the push and delete paths,
 * the outbox reader and the reconciler; turned into SQL by journal_sql.h. */
#ifndef HG_JOBCHANGE_H
#define HG_JOBCHANGE_H

#include <stdint.h>

#include "core/job.h"

enum jobchange_kind {
    JC_INSERT = 1,     /* new message row + its first transition; job borrowed (durable only) */
    JC_TRANSITION = 2, /* transition row + message state/attempts/run_at update */
    JC_REPLACE = 3,    /* like a transition, and the row takes the replacement's body/priority/ttr/tries */
    /* A far job (state 'far', MySQL only) changed outside Redis. Guarded in SQL on the row still
     * being 'far' (so a job the pager took meanwhile is left alone, and writing twice is
     * harmless); its version is the row's + 1, whatever `ver` says. */
    JC_FAR_LEAVE = 4, /* far -> `to` (deleted, aborted): its far key and far_biz row go, far_count - 1 */
    JC_FAR_MOVE = 5,  /* far -> far due at `run_at`: its far key (and far_biz row) re-keyed */
};

#define JOBCHANGE_ACTOR_MAX 96
#define JOBCHANGE_HOST_MAX  48

struct jobchange {
    uint8_t kind;
    uint8_t from, to; /* job states (job.h); from = JS_NONE for a new job */
    uint8_t force;    /* apply to the message row even if its version is not older (delete, abort) */
    uint16_t shard;   /* the job's shard (a far job's key, message.far_shard, is it) */
    uint32_t ver;     /* job version after this change */
    uint32_t attempts;
    uint64_t id;
    int64_t at;                      /* unix ms */
    int64_t run_at;                  /* the job's due time after this change */
    char actor[JOBCHANGE_ACTOR_MAX]; /* thread and Redis key that acted, e.g. "mover hg:{3}:delay" */
    char host[JOBCHANGE_HOST_MAX];   /* client address, or the instance's host name */
    char instance[64];               /* instance that made the change ("" = this one) */
    uint64_t biz_holder;             /* to JS_ABORTED: the job that held the push's bizKey (a duplicate,
                                        a replace, a conflict), 0 when none is known: biz_latest
                                        points back at it (journal_sql.h) */
    const struct job_spec *job;      /* JC_INSERT: borrowed until the durable submission completes */
    struct job_spec *replacement;    /* JC_REPLACE: owned by the journal once submitted */
};

#endif
