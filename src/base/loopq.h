/* loopq.h — run a function on another thread's event loop.
 *
 * Any thread may post; the functions run on the loop's thread, in posting order. This is
 * the only way threads talk to each other (journal completions, pub/sub wakes, shutdown):
 * nothing else is shared between event loops. */
#ifndef HG_LOOPQ_H
#define HG_LOOPQ_H

struct event_base;
struct loopq;

typedef void (*loopq_fn)(void *arg);

/* Attach a queue to `base` (call on the loop's thread, before it runs). NULL on failure. */
struct loopq *loopq_new(struct event_base *base);

/* The loop has ended: run what is still queued (on the calling thread, which must be the
 * loop's) and refuse later posts, so their senders keep ownership of what they meant to pass. */
void loopq_close(struct loopq *q);

/* Run fn(arg) on the loop after each batch of queued functions, once they have all run: a
 * burst of posts (say, every push a journal cycle committed) can be handled together. Set
 * it before the loop runs. */
void loopq_after_each_drain(struct loopq *q, loopq_fn fn, void *arg);

/* Free the queue; functions still queued are dropped without running. */
void loopq_free(struct loopq *q);

/* Queue fn(arg) to run on the loop. Thread-safe. 0, or -1 when out of memory or closed
 * (then the caller still owns arg). */
int loopq_post(struct loopq *q, loopq_fn fn, void *arg) __attribute__((warn_unused_result));

/* Queue fn(args[0]) .. fn(args[n-1]) at once: one lock and at most one wake for the lot, so
 * the loop runs them in one drain (a journal cycle's completions for one worker: posted one
 * by one, a loop that drains between two posts is woken once per push). Returns how many
 * were queued: all n, or 0 when closed; a node that could not be allocated ends the run early
 * (the caller still owns args[returned..n)). */
int loopq_post_many(struct loopq *q, loopq_fn fn, void *const *args, int n) __attribute__((warn_unused_result));

#endif
