/* pubsub.h — what instances tell each other through Redis pub/sub, received on one
 * subscriber connection on the keeper's loop:
 *   <prefix>:wake   "<shard> <due>": a push, release or reschedule made a sooner entry in a
 *                   shard's delay zset (src/redis/lua/lib.lua) -> on_wake (the mover);
 *   <prefix>:ready  "<topic>": jobs became ready on a topic (move.lua, release...) ->
 *                   on_ready (main.c hands it to every HTTP worker's parked long-polls).
 * Messages sent while the subscriber was disconnected are lost, so on every (re)connect it
 * calls on_resync: look at everything once.
 *
 * In a Redis Cluster a PUBLISH reaches the subscribers of every node (scripts publish plainly),
 * so the subscriber listens on one node: the first seed, then, whenever its node has not been
 * usable for PUBSUB_MOVE_MS (killed, or never reachable), another node — a master of the map
 * `link` (the keeper's cluster link) has, up, taking turns, else the next seed. */
#ifndef HG_PUBSUB_H
#define HG_PUBSUB_H

#include <stddef.h>
#include <stdint.h>

struct app;
struct event_base;
struct pubsub;
struct rlink;

#define PUBSUB_MOVE_MS  1000 /* cluster: a subscriber's node down this long, go to another */
#define PUBSUB_CHECK_MS 250

struct pubsub_handlers {
    void (*on_wake)(int shard, int64_t due, void *arg);
    void (*on_ready)(const char *topic, size_t len, void *arg);
    void (*on_resync)(void *arg);
    void *arg;
};

/* Subscribe on `base` (the connection reconnects by itself; in cluster mode it moves, see
 * above: `link` is a cluster rlink on the same loop, read for its nodes, NULL for none). NULL
 * when out of memory or a bad address. */
struct pubsub *pubsub_start(struct app *app, struct event_base *base, const struct pubsub_handlers *h,
                            struct rlink *link);
void pubsub_free(struct pubsub *ps);

#endif
