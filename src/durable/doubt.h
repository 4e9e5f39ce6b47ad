/* doubt.h — outcomes in doubt, remembered across a crash and settled by one reconciler.
 *
 * Some answers are lost: a COMMIT whose reply never came (the journal cannot tell whether
 * MySQL committed), a script call whose reply never came (Redis may have run it). The client
 * got 503, but one store may hold what the other does not:
 *   push    the row may be committed (version 1, live) while the job never reached Redis;
 *   delete  the row may say 'deleted' (version v+1) while Redis still holds the job at v.
 * Each such outcome is written down here — appended to [instance] state_dir/in-doubt and
 * fsync'd before the client is answered, so a kill -9 forgets nothing — and settled later by
 * comparing the job's MySQL row with Redis and letting the newer one win:
 *   push    row live at version 1 and Redis lacks the job: the row is marked aborted (version
 *           2, a transition saying why); otherwise (Redis has it, or the row never committed,
 *           or it moved on) nothing is to be done;
 *   delete  row 'deleted' at v+1 and Redis holds the job still at v: delete.lua runs with
 *           that version as a guard (a job that moved on meanwhile is left to its newer
 *           state); otherwise nothing.
 * Settling waits DOUBT_GRACE_MS after an outcome was noted (a script whose reply timed out may
 * still be about to run), closes the MySQL connection that lost the answer for good (KILL, and
 * wait until the server no longer lists it: dbfence.h), so that nothing it still holds can commit
 * after the reading, then runs on the MySQL pool with a blocking Redis connection,
 * scheduled by the keeper every second while anything is in doubt, and first thing in every
 * /reStore (so a restore never revives a push that was answered 503). Entries settle in any
 * order; settled ones are dropped from the file.
 *
 * With no state_dir the outcomes are kept in memory only (a crash forgets them; logged at
 * start). Thread-safe. */
#ifndef HG_DOUBT_H
#define HG_DOUBT_H

#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

#define DOUBT_GRACE_MS 5000

/* Open (and lock) the state file, load what a previous run left in doubt. 0, or -1 with err
 * filled (another instance holds the file, or it cannot be written). */
int doubt_open(const struct config *cfg, const char *instance, const char *host, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void doubt_close(void);

/* Note an outcome in doubt (persisted before returning). `ver_before`: the job's version
 * before the delete. `ticket`: the connection that lost the answer (dbfence.h; NULL or not ok:
 * unknown), which settling closes for good before it reads the job's row. */
struct dbfence;
void doubt_push(uint64_t id, const struct dbfence *ticket);
void doubt_delete(uint64_t id, uint32_t ver_before, const struct dbfence *ticket);

/* Outcomes in doubt now (for /stats, /metrics and tests). */
long doubt_count(void);

/* Queue a settle pass on the MySQL pool unless one is queued or nothing is ripe. */
void doubt_schedule(const struct config *cfg);

/* Settle what is ripe now, on this pool thread's connection (restore calls it first). Returns
 * how many outcomes were settled, or -1 when MySQL or Redis failed, or a connection that lost
 * an answer could not be closed yet (those stay in doubt; the others may have settled).
 * `all`: ignore the grace period. */
long doubt_settle(MYSQL *db, const struct config *cfg, int all);

#endif
