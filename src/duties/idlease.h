/* idlease.h — holding an id-generator worker number (ids.h) for this instance.
 *
 * With [instance] worker_id = auto, the number is leased in Redis (10 s lease, renewed every
 * second), so two live instances never share one; an instance that loses its lease stops
 * issuing ids (pushes get 503) until it holds a number again. A number set in config is
 * leased too, under the instance's name (so a restart takes it back at once, while a second
 * instance configured with the same number is refused). Either way the number's high-water mark in Redis is kept 5 s
 * ahead of the ids issued, and a new holder starts above it: a restart, a lease moving to another instance or a clock
 * stepping back never repeats an id. Runs on the keeper's loop (keeper.h). */
#ifndef HG_IDLEASE_H
#define HG_IDLEASE_H

struct app;
struct rlink;
struct idlease;

struct idlease *idlease_new(struct app *app, struct rlink *rc);
void idlease_free(struct idlease *l);

/* Acquire or renew; call about once a second. */
void idlease_tick(struct idlease *l);

/* Give the number back (best effort, at shutdown). */
void idlease_release(struct idlease *l);

#endif
