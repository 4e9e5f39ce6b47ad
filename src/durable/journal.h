/* journal.h — the MySQL journal: every job's message row and every state change, written
 * by one thread with group commit.
 *
 * The journal thread owns its MySQL connection; no other thread of the request path talks
 * to MySQL. Submitters hand over records and go on; the thread takes everything queued,
 * writes it as multi-row statements in ONE transaction and commits (architecture.md, "The journal").
 *
 * What it is given:
 *  - durable groups (journal_submit_sync): a push's message rows, a delete's transition.
 *    The submitter is told the outcome on its own event loop and answers its client only
 *    then. Refused at once (-1) while MySQL is down, so clients get a prompt 503.
 *  - outbox batches (journal_submit_outbox): the transitions the Lua scripts recorded in the
 *    Redis outbox streams (ready, reserved, finished, dead, released, rescheduled, replaced,
 *    restored...), carried here by the outbox thread (outbox.h). While MySQL is down they
 *    simply wait in Redis; producers check journal_accepting() before making more
 *    transitions, which is the back-pressure: consumption pauses instead of the streams
 *    growing without bound.
 *  - local records (journal_submit): the few changes made outside the scripts (a pushed row
 *    marked aborted), batched from an in-memory ring.
 *
 * Every update of a message row is ordered by the job's version (each script bumps it), so
 * records may arrive in any order and more than once. */
#ifndef HG_JOURNAL_H
#define HG_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/jobchange.h"

struct loopq;

/* Called on the submitter's loop with ok = 1 when committed, 0 when not. */
typedef void (*journal_done_fn)(int ok, void *arg);

/* Start the journal thread. Does not wait for MySQL: it connects (and reconnects) itself. */
int journal_start(const struct config *cfg, const char *instance) __attribute__((warn_unused_result));

/* Write what is queued (for at most `deadline_ms`), then stop the thread. */
void journal_stop(int deadline_ms);

/* Durable submission of recs[0..n) in one transaction; recs must stay valid until `done`
 * runs on `reply_to`. Returns -1 without queueing when MySQL is down or the queue is full. */
int journal_submit_sync(struct jobchange *recs, int n, struct loopq *reply_to, journal_done_fn done, void *arg)
    __attribute__((warn_unused_result));

/* Batched submission; records are copied. Always accepted (check journal_accepting first). */
void journal_submit(const struct jobchange *recs, int n);

/* The outbox thread's batch: like a durable submission, but `done` runs on the journal
 * thread itself, and if MySQL refuses the batch as a whole its records are written one by
 * one (records refused alone are dropped and logged) rather than failing together. */
int journal_submit_outbox(struct jobchange *recs, int n, journal_done_fn done, void *arg)
    __attribute__((warn_unused_result));

/* Is the backlog below [mysql] backlog? Producers of transitions pause when it is not. */
int journal_accepting(void);

/* Is the MySQL connection up? */
int journal_up(void);

/* The outbox streams hold n entries (measured by the keeper every second, so the figure stays
 * fresh even while this thread is stuck on a hung MySQL). */
void journal_note_outbox(long n);

/* Records waiting (local ring + outbox as last measured) and durable submissions waiting. */
long journal_backlog(void);
/* Records waiting in this process only (aborted pushes). */
long journal_local_backlog(void);
long journal_durable_waiting(void);

#endif
