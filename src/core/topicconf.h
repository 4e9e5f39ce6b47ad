/* topicconf.h — a topic's settings (docs/api.md "Topics"): the model, its JSON forms and the
 * compact form the Lua scripts read. Pure functions (jansson only), unit-tested.
 *
 * A PUT merges: every field is optional and a missing one keeps its current value; `deliver`
 * replaces the whole route (null = consumers long-poll, the default). A webhook URL is taken
 * as a string here; its form is the webhook client's to judge (whclient_parse_url). The JSON stored in MySQL
 * is the canonical form written by topicconf_json(..., with_secret = 1); answers to clients
 * never show a webhook secret (only "signed": true). */
#ifndef HG_TOPICCONF_H
#define HG_TOPICCONF_H

#include <stddef.h>
#include <stdint.h>

#include "core/job.h"

struct sbuf;

#define TOPICCONF_URL_MAX         2048
#define TOPICCONF_SECRET_MAX      256
#define TOPICCONF_AMQP_NAME_MAX   255 /* an AMQP shortstr */
#define TOPICCONF_RATE_MAX        1000000
#define TOPICCONF_BACKOFF_MAX     JOB_BACKOFF_MAX
#define TOPICCONF_TIMEOUT_MAX     600000
#define TOPICCONF_CONCURRENCY_MAX 1000
#define TOPICCONF_GROUP_CONC_MAX  1000000 /* groupConcurrency */

/* Defaults: the behaviour of a topic nobody configured (what the scripts assume when the
 * shard's topic hash has no field for it: lib.lua topic_conf). */
#define TOPICCONF_DEFAULT_MAX_BACKOFF 3600000
#define TOPICCONF_DEFAULT_TIMEOUT     10000
#define TOPICCONF_DEFAULT_CONCURRENCY 16

enum topic_route { TOPIC_ROUTE_POLL = 0, TOPIC_ROUTE_WEBHOOK = 1, TOPIC_ROUTE_AMQP = 2 };

struct topic_conf {
    int paused;
    int64_t rate;        /* deliveries per second across the fleet; 0 = no limit */
    int64_t backoff;     /* ms; 0 = redeliver at once (as before topics had settings) */
    int64_t max_backoff; /* ms */
    /* flow control by key (contract "Flow control by key"; src/redis/lua/lib.lua) */
    int64_t group_concurrency; /* jobs of one group reserved at once, fleet-wide; 0 = no limit */
    int group_fifo;            /* groupOrder "fifo": (runAt, id) order, one at a time (concurrency 1) */
    int64_t group_rate;        /* deliveries per second per group, fleet-wide; 0 = none */
    enum topic_route route;
    /* route = WEBHOOK */
    char url[TOPICCONF_URL_MAX + 1];
    int64_t timeout;                       /* ms: the request's deadline and the delivery's lease */
    int concurrency;                       /* requests in flight per instance */
    char secret[TOPICCONF_SECRET_MAX + 1]; /* "" = unsigned */
    /* route = AMQP */
    char exchange[TOPICCONF_AMQP_NAME_MAX + 1];
    char routing_key[TOPICCONF_AMQP_NAME_MAX + 1];
};

void topicconf_defaults(struct topic_conf *c);

/* Is `c` the defaults (a DELETE, or a PUT that set everything back)? */
int topicconf_is_default(const struct topic_conf *c);

/* Merge a PUT body (a JSON object) into *c. 0, or -1 with a message naming the field in err;
 * *c is unchanged on failure. Unknown fields are refused. `max_delay` bounds backoff. */
int topicconf_merge_json(struct topic_conf *c, const char *json, size_t len, char *err, size_t errlen);

/* Append the settings as JSON members, without braces:
 * "paused":..,"rate":..,"backoff":..,"maxBackoff":..,"groupConcurrency":..,"groupOrder":..,
 * "groupRate":..,"deliver":.. — with_secret = 1 for the
 * stored form (MySQL), 0 for answers. */
void topicconf_json(const struct topic_conf *c, int with_secret, struct sbuf *sb);

/* The value the scripts read from <prefix>:{shard}:topic (lib.lua topic_conf):
 * "<paused 0|1> <rate> <backoff> <maxBackoff> [g<groupConcurrency> <fifo 0|1> <groupRate> ]<seq>"
 * — the g part only for a topic with group settings, so the scripts tell such a topic by it;
 * seq orders writes, so an older one arriving late never overwrites a newer. Returns the
 * length written (out: at least 128). */
size_t topicconf_script_value(const struct topic_conf *c, uint64_t seq, char *out, size_t cap);

#endif
