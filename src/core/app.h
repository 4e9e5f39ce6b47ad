/* app.h — what every thread of one hourglassd process shares.
 *
 * Set up by main before any thread starts and read-only afterwards, except for the fields
 * marked atomic and the id generator (internally locked). Per-thread state lives in
 * struct worker (HTTP), the keeper, the journal and the background threads; this header
 * names none of them, so every layer may read it. */
#ifndef HG_APP_H
#define HG_APP_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/config.h"
#include "core/ids.h"
#include "core/job.h"
#include "base/sbuf.h"

struct ratelimit;

struct app {
    struct config cfg;
    struct job_limits limits;
    char instance[64]; /* [instance] id, or hostname:port */
    char hostname[64];
    struct idgen ids;
    int64_t started_unix_ms;

    int nworkers;                /* HTTP workers */
    struct ratelimit *ratelimit; /* NULL when [http] rate_limit = 0 */
    /* Appends the housekeeping thread's part of /stats (",\"mover\":{...}" ...); thread-safe.
     * Set by main (keeper.h), so the HTTP side needs no header of the thread above it: the
     * function before any worker starts, its argument (the keeper) once the keeper runs and
     * NULL again before it stops; with NULL it writes the same members, empty. */
    void (*keeper_stats_json)(void *arg, int shards, struct sbuf *sb);
    _Atomic(void *) keeper_stats_arg;

    atomic_int draining;        /* SIGTERM received: answer what is in flight, take nothing new */
    atomic_int worker_id;       /* id-generator worker number held, -1 when none */
    atomic_int layout;          /* [redis] shards and shard tags checked against the data: 1 ok, 0 not yet, -1 differ */
    atomic_int_fast64_t parked; /* parked long-polls across workers (for max_parked) */
    atomic_int redis_workers_up; /* HTTP workers whose own Redis connection is up (for /health) */
    /* Redis found holding older data than this instance wrote (lossmark.h): when (unix ms; 0 =
     * not, or repaired by a restore since), on which shard, and how (1 rolled back, 2 lost). */
    atomic_int_fast64_t redis_loss_at;
    atomic_int redis_loss_shard;
    atomic_int redis_loss_kind;
    atomic_int redis_fenced; /* shards seen fenced after a rollback (lossmark.h): they deliver nothing */
};

#endif
