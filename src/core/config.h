/* config.h — the daemon's configuration, read from an INI file.
 *
 * One table (config.c) names every key with its type, default, bounds and the
 * field it fills; the parser, `hourglassd -t`, `hourglassd -p` (print the
 * effective config) and `hourglassd -d` (describe every key) all read that table. Unknown sections/keys and bad values
 * are errors naming the file, line and key. */
#ifndef HG_CONFIG_H
#define HG_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "base/netaddr.h"

#define CONFIG_STR_MAX         256
#define CONFIG_HOSTS_MAX       1024 /* [mysql] hosts: a list of host:port */
#define CONFIG_MYSQL_NODES_MAX 16   /* nodes [mysql] hosts may name */
#define JOURNAL_LANES_MAX      4    /* [mysql] journal_lanes */

struct config {
    /* [http] */
    char listen[CONFIG_STR_MAX];
    int http_threads; /* 0 = one per core */
    int64_t max_body; /* bytes */
    int longpoll_max; /* seconds */
    char token[CONFIG_STR_MAX];
    char admin_token[CONFIG_STR_MAX];
    int max_batch;       /* jobs per POST /push array */
    int max_connections; /* open HTTP connections per instance; 503 past it */
    int max_parked;      /* parked long-polls per instance; 503 past it */
    int max_header;      /* bytes of request line + headers; 413 past it */
    int idle_timeout;    /* seconds a keep-alive connection may sit idle */
    int drain_window_ms; /* after SIGTERM: serve open connections this long (Connection: close) */
    int request_timeout; /* seconds to receive a whole request once it started */
    int rate_limit;      /* requests per second per token (or per client address); 0 = off */
    int rate_burst;      /* bucket size for rate_limit */

    /* [redis] */
    char redis_address[CONFIG_STR_MAX]; /* host:port or unix:/path; cluster: host:port,host:port */
    int redis_cluster;                  /* a Redis Cluster: shard tags spread over its masters (shardtag.h) */
    char redis_password[CONFIG_STR_MAX];
    int redis_db;
    char redis_prefix[64];
    int redis_shards;
    int redis_timeout_ms;   /* connect and per-command timeout */
    int redis_auto_restore; /* run the two-way restore when a loss is noticed (lossmark.h) */

    /* [mysql] */
    char mysql_host[CONFIG_STR_MAX];
    int mysql_port;
    char mysql_hosts[CONFIG_HOSTS_MAX]; /* "" = host:port alone; else the cluster's nodes, in order */
    char mysql_socket[CONFIG_STR_MAX];
    char mysql_user[CONFIG_STR_MAX];
    char mysql_password[CONFIG_STR_MAX];
    char mysql_database[CONFIG_STR_MAX];
    int retention_days;
    int retention_interval; /* seconds between retention passes */
    int mysql_timeout;      /* seconds, connect/read/write */
    int journal_batch;      /* max records per MySQL transaction */
    int journal_backlog;    /* max queued transition records while MySQL is slow or down */
    int journal_lanes;      /* journal transactions in flight at once (journal.h) */
    int journal_bulk;       /* 1 = new jobs' rows through the bulk binary protocol (journal_bulk.h) */
    int journal_per_row;    /* 1 = one transaction per record (benchmark baseline only) */

    /* [queue] */
    int64_t default_ttr;
    int default_tries;
    int64_t max_delay;
    int64_t horizon; /* [queue] horizon: ms; 0 = no MySQL tier */
    int64_t max_ttr;
    int64_t schedule_grace; /* ms: older missed fires follow the schedule's catchUp policy */
    int max_tries;
    int mover_batch; /* jobs moved per script call */

    /* [webhook] */
    char webhook_ca_file[CONFIG_STR_MAX]; /* PEM CAs trusted besides the system's; "" = none */
    int webhook_max_per_origin;           /* connections per receiver (scheme, host, port) */

    /* [amqp] */
    char amqp_url[CONFIG_STR_MAX]; /* "" = no AMQP delivery */
    int amqp_timeout_ms;           /* a batch's publish and confirms; a delivery's lease (+1 s) */

    /* [instance] */
    char instance_id[64];           /* empty = hostname:port */
    char state_dir[CONFIG_STR_MAX]; /* empty = no local state (doubt.h) */
    int worker_id;                  /* -1 = lease one from Redis */

    /* [log] */
    int log_level;
    char log_file[CONFIG_STR_MAX];
};

/* Fill `cfg` with every default. */
void config_defaults(struct config *cfg);

/* Parse `path` over the defaults already in `cfg`. On error returns -1 and writes
 * "file:line: [section] key: problem" into err. */
int config_load(struct config *cfg, const char *path, char *err, size_t errlen) __attribute__((warn_unused_result));

/* Parse INI text (for tests); `name` is used in error messages. */
int config_load_string(struct config *cfg, const char *name, const char *text, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Cross-key checks and derived values (threads = cores, listen address parses...). */
int config_validate(struct config *cfg, char *err, size_t errlen) __attribute__((warn_unused_result));

/* [mysql] hosts: the MySQL nodes in the order they are tried. Each element is read by
 * netaddr_parse (base/netaddr.h; blanks around it ignored, a missing port is [mysql] port); out
 * (unless NULL: a check only) gets up to `max`. Returns how many: 0 when hosts is empty ([mysql]
 * host and port name the one server, as they always did), or -1 with err naming the bad element. */
int config_mysql_nodes(const struct config *cfg, struct netaddr *out, int max, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Write every key with its current value (secrets masked) as INI. */
void config_print(const struct config *cfg, FILE *out);

/* Describe every key with its default and bounds, as Markdown rows (for docs). */
void config_describe(FILE *out);

#endif
