/* expiry.h — dead jobs leave Redis when their MySQL rows do: retention deletes a dead
 * message [mysql] retention_days after it died, and this removes the job from Redis at the
 * same age (deadexpire.lua), so a queue that runs for years does not keep every job that ever
 * died in memory. Runs on the keeper's loop, once per [mysql] retention_interval, for the
 * shards this instance owns, one bounded script call at a time. retention_days = 0 keeps
 * dead jobs for ever, in both stores. */
#ifndef HG_EXPIRY_H
#define HG_EXPIRY_H

struct app;
struct mover;
struct store;
struct expiry;

struct expiry *expiry_new(struct app *app, struct store *store, const struct mover *mover);
void expiry_free(struct expiry *e);

/* Start a pass unless one is running (the keeper calls it on its retention schedule). */
void expiry_start(struct expiry *e);

#endif
