/* purge.h — POST /topics/{topic}/purge?state=delayed|ready|dead|all (admin): delete a topic's
 * jobs in some states, in batches, journaled as `deleted` like a by-id delete; answers
 * {"deleted":N}. The handler is api_purge (handlers.h); what it promises:
 *
 *  - `delayed` covers both tiers: the jobs in Redis's delay zset and the far jobs MySQL alone
 *    holds; `all` = delayed + ready + dead. Reserved jobs are never purged (a consumer holds
 *    them; they come back to ready or dead when their lease ends, and a later purge takes them).
 *  - Nothing is half-deleted: each job goes in one atomic step (purge.lua deletes it as
 *    delete.lua does; a far job's row is deleted under the far delete's guards, JC_FAR_LEAVE's
 *    set-based twin, then fardelete.lua), and bizKeys are released as a delete releases them.
 *  - Redis is held for a fraction of a millisecond at a time: at most PURGE_BATCH jobs deleted
 *    and PURGE_SCAN index entries looked at per script call, then a wait until the journal has
 *    their transitions and a rest (purge.c pace), so a purge keeps about a fifth of what it
 *    shares with live traffic. Only the topic's own jobs are touched.
 *  - Jobs pushed after the purge began may or may not go (ids above the start time plus a
 *    second of clock skew are left, which is also what makes the purge end under a steady
 *    stream of pushes). States are walked in rounds until a round finds nothing, so a job
 *    that moved into a state already walked (delayed → ready) is not left behind.
 *  - It runs on a MySQL pool thread (dbtask.h) with its own blocking Redis connection, never on
 *    the worker's loop; it waits for the journal's back-pressure like every producer of
 *    transitions, and answers only once the outbox carried every `deleted` transition into
 *    MySQL (outbox_barrier), so a 200 is as durable as a by-id delete's. */
#ifndef HG_PURGE_H
#define HG_PURGE_H

#include <stddef.h>

/* A purge.lua call deletes a job in ~28 us: 10 jobs and 100 index entries hold Redis a fraction
 * of a millisecond (200 held it ~6 ms, and other topics' lateness p99 doubled: figure 14; purge.c
 * pace says how the rest after each call is chosen). */
#define PURGE_BATCH     10  /* jobs deleted per script call */
#define PURGE_SCAN      100 /* index entries looked at per script call */
#define PURGE_FAR_BATCH 200 /* far rows per MySQL transaction */

enum purge_states { PURGE_DELAYED = 1, PURGE_READY = 2, PURGE_DEAD = 4, PURGE_ALL = 7 };

/* The `state` parameter: its purge_states mask, or 0 when it names none of
 * "delayed", "ready", "dead", "all". */
unsigned purge_parse_state(const char *s, size_t len);

#endif
