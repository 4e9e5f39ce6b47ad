/* bgthread.h — the life of a background thread, or of a few that share one stop (a pool):
 * start, request a stop, wait for it up to a deadline, and cut loose a thread still blocked in
 * a call past it.
 *
 * The owner keeps the lock and the condition variable its threads sleep on: they guard the
 * owner's queue or state too, so a thread checks the stop request and its work in one critical
 * section and a stop cannot fall between a check and a wait. A bgthread points to them, and
 * holds the stop request, the connections its threads publish for a stop to cut, and the
 * threads.
 *
 * bgthread_stop(t, deadline_ms):
 *   1. under the lock: stop = 1, stop_deadline_us = now + deadline_ms; the condition broadcast;
 *   2. every thread joined. A thread reads `stop` under the lock wherever it may wait, finishes
 *      what it can by the deadline (bgthread_stop_due_locked) and returns;
 *   3. when the owner names a cut warning (its threads block in calls on sockets), a thread still
 *      running BGTHREAD_GRACE_MS past the deadline (a hung server answers only after its whole
 *      timeout) is cut loose: the warning is logged once and every published connection is cut
 *      (its cut function called under the lock), which makes the call blocked on it fail; then
 *      the threads are joined for as long as they take. So such a stop is bounded by the
 *      deadline, not by a timeout. A bgthread without a cut warning is joined however long it
 *      takes (its owner has nothing to cut).
 * `stop` stays set once the threads have ended (the owner may keep refusing work on it);
 * the next bgthread_start clears it.
 *
 * Published connections: a thread publishes each connection it may block on when it has made it
 * (bgthread_publish), and clears it before closing it, so a cut never shuts a socket whose
 * number may already belong to someone else.
 *
 * Threads: start and stop are called from one thread (main's); the rest from any. */
#ifndef HG_BGTHREAD_H
#define HG_BGTHREAD_H

#include <pthread.h>
#include <stdint.h>

#include "base/clock.h"

#define BGTHREAD_MAX       8   /* threads of one bgthread */
#define BGTHREAD_CONNS_MAX 8   /* connections published at once */
#define BGTHREAD_GRACE_MS  500 /* past the deadline before a thread blocked in a call is cut loose */

/* Make a call blocked on `conn` in another thread fail now (shut its socket). */
typedef void (*bgthread_cut_fn)(void *conn);

struct bgthread {
    pthread_mutex_t *lock;    /* the owner's */
    pthread_cond_t *cond;     /* the owner's: its threads sleep on it, a stop broadcasts it */
    const char *cut_warning;  /* logged when cutting loose; NULL: never cut loose */
    int stop;                 /* under *lock: a stop was requested */
    int64_t stop_deadline_us; /* under *lock: by then (monotonic), once stop is set */
    struct bgthread_conn {
        void *conn; /* NULL: a free slot */
        bgthread_cut_fn cut;
    } published[BGTHREAD_CONNS_MAX]; /* under *lock */
    int n;                           /* threads running (start/stop's thread) */
    pthread_t threads[BGTHREAD_MAX];
};

/* An initializer: the owner's lock and condition variable (`lock_` and `cond_` may be the
 * addresses of the owner's static fields), and its cut warning or NULL. */
#define BGTHREAD_INIT(lock_, cond_, cut_warning_)                                                                      \
    {                                                                                                                  \
        .lock = (lock_), .cond = (cond_), .cut_warning = (cut_warning_)                                                \
    }

/* Start one more thread running main(arg); the first one clears a stop left from before.
 * 0, or -1 when it could not be made (or BGTHREAD_MAX run already). */
int bgthread_start(struct bgthread *t, void *(*main_fn)(void *), void *arg) __attribute__((warn_unused_result));

/* Request a stop by `deadline_ms` from now, and return once every thread has ended (cutting
 * loose one that outlives the deadline, as above). Nothing to do when none runs. */
void bgthread_stop(struct bgthread *t, int deadline_ms);

/* Has a stop been requested? Takes the lock. */
int bgthread_stopping(struct bgthread *t);

/* With the lock held: a stop was requested, and `done` (nothing is left that is worth
 * finishing) or its deadline has passed. */
static inline int bgthread_stop_due_locked(const struct bgthread *t, int done)
{
    return t->stop && (done || clock_mono_us() > t->stop_deadline_us);
}

/* Is a thread running (started and not stopped)? For start/stop's thread, or under the lock. */
static inline int bgthread_running(const struct bgthread *t)
{
    return t->n > 0;
}

/* Publish `conn` in `slot` (0 <= slot < BGTHREAD_CONNS_MAX: the owner numbers its threads'
 * connections), or clear the slot (conn NULL) before closing what it held. Takes the lock. */
void bgthread_publish(struct bgthread *t, int slot, void *conn, bgthread_cut_fn cut);

#endif
