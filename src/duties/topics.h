/* topics.h — topic settings across the fleet: MySQL holds them, Redis carries what the scripts
 * need, and every instance keeps a copy for its own use (delivery routes, /topics).
 *
 *   MySQL   topic_setting (one row per configured topic, with `seq`, the number of its last
 *           change) and topic_change (every change: who, when, what). A PUT or DELETE is a
 *           transaction there first (topics_write); it is the authority.
 *   Redis   <prefix>:{shard}:topic on the topic's shard: "<paused> <rate> <backoff>
 *           <maxBackoff> <seq>" (topicset.lua), read by reserve/move/release in the same atomic
 *           step as the job they act on — so a pause holds on every instance the moment the PUT
 *           is answered. "~synced" says which change the shard holds all changes up to.
 *   memory  this instance's copy, refreshed twice a second from MySQL (`seq > last seen`, an
 *           index range): settings reach every instance within 1 s.
 * The refresh also repairs Redis: a shard whose "~synced" is behind (a write that failed, a
 * Redis that lost its data) gets every setting of its topics again, newest seq winning.
 * Thread-safe: the copy is read under a mutex by any thread. */
#ifndef HG_TOPICS_H
#define HG_TOPICS_H

#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/topicconf.h"

/* Start with an empty copy (the first refresh fills it). 0 or -1 (out of memory). */
int topics_init(const struct config *cfg) __attribute__((warn_unused_result));
void topics_free(void);

/* Refresh from MySQL (and repair Redis) on the MySQL pool, unless one is running. Called by the
 * keeper every half second. */
void topics_schedule(void);

/* Has the copy been filled from MySQL at least once? */
int topics_loaded(void);

/* A topic's settings: 1 and *out when it has some, 0 and the defaults when not. */
int topics_get(const char *topic, size_t len, struct topic_conf *out);

/* Every topic with settings whose name is > after (NULL: all) and starts with prefix (NULL: any),
 * in name order, at most `limit`: names into a new array the caller frees with
 * topics_names_free. Returns how many, or -1. */
int topics_names(const char *after, const char *prefix, int limit, char ***names);
void topics_names_free(char **names, int n);

/* Topics whose route is `route`, names into a new array (as topics_names). */
int topics_with_route(enum topic_route route, char ***names);

/* Who changed a topic, for topic_change. */
struct topics_actor {
    const char *actor, *host, *instance;
};

/* On a MySQL pool thread: apply a PUT (json, already checked by topicconf_merge_json on the
 * defaults: the caller answers a bad body before any MySQL work) or a DELETE (json NULL) to
 * `topic` in one transaction (row locked, merged, a topic_change row, the row rewritten with
 * the change's seq). 0 with *out and *seq; -1 when the body does not merge onto what is
 * stored (message in err: a 400); -2 MySQL failed (a 503). */
int topics_write(MYSQL *db, const char *topic, const char *json, size_t len, const struct topics_actor *who,
                 int64_t now, struct topic_conf *out, uint64_t *seq, char *err, size_t errlen);

/* Put what topics_write committed into this instance's copy at once (the others read it from
 * MySQL within 1 s). */
void topics_apply(const char *topic, const struct topic_conf *c, uint64_t seq);

#endif
