/* config.c — the config table and a strict INI reader.
 *
 * The reader is deliberately small and exact: `[section]`, `key = value`, full-line
 * comments starting with # or ;. There are no inline comments, because passwords
 * and tokens may contain '#' or ';'. A value may be wrapped in double quotes to
 * keep leading or trailing spaces. */
#include "core/config.h"
#include "core/amqpurl.h"
#include "base/log.h"
#include "core/raddr.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum cfg_type { CT_STR, CT_INT, CT_INT64, CT_BOOL, CT_LEVEL, CT_WORKER_ID };

struct cfg_key {
    const char *section;
    const char *key;
    enum cfg_type type;
    const char *def;
    int64_t min, max; /* for numbers; for strings max is the length limit */
    size_t offset;
    int secret; /* masked by config_print */
    const char *help;
};

#define F(field) offsetof(struct config, field)
#define DAY_MS   INT64_C(86400000)

static const struct cfg_key keys[] = {
    {"http", "listen", CT_STR, "127.0.0.1:8080", 0, CONFIG_STR_MAX - 1, F(listen), 0,
     "address:port to listen on (IPv4, [IPv6] or a host name)"},
    {"http", "threads", CT_INT, "0", 0, 256, F(http_threads), 0, "HTTP worker threads; 0 = one per core"},
    {"http", "max_body", CT_INT64, "65536", 1024, 64 << 20, F(max_body), 0,
     "largest request body in bytes (413 past it)"},
    {"http", "longpoll_max", CT_INT, "60", 0, 3600, F(longpoll_max), 0, "largest GET /get timeout, seconds"},
    {"http", "token", CT_STR, "", 0, CONFIG_STR_MAX - 1, F(token), 1,
     "when set, every endpoint but /health needs Authorization: Bearer <token>"},
    {"http", "admin_token", CT_STR, "", 0, CONFIG_STR_MAX - 1, F(admin_token), 1,
     "token for the admin endpoints (docs/api.md, Authentication); when empty they answer loopback clients only"},
    {"http", "max_batch", CT_INT, "1000", 1, 100000, F(max_batch), 0, "jobs per POST /push array"},
    {"http", "max_connections", CT_INT, "10000", 1, 1000000, F(max_connections), 0,
     "open HTTP connections per instance (503 past it)"},
    {"http", "max_parked", CT_INT, "10000", 1, 1000000, F(max_parked), 0,
     "parked long-polls per instance (503 past it)"},
    {"http", "max_header", CT_INT, "8192", 1024, 1 << 20, F(max_header), 0,
     "bytes of request line plus headers (400 past it)"},
    {"http", "drain_window", CT_INT, "1000", 0, 5000, F(drain_window_ms), 0,
     "after SIGTERM, milliseconds open connections are still served (each answer with Connection: close) "
     "before those left idle are closed"},
    {"http", "idle_timeout", CT_INT, "60", 1, 3600, F(idle_timeout), 0,
     "seconds an idle keep-alive connection is kept"},
    {"http", "request_timeout", CT_INT, "10", 1, 600, F(request_timeout), 0,
     "seconds a client has to send a whole request once it started (slow clients are cut)"},
    {"http", "rate_limit", CT_INT, "0", 0, 10000000, F(rate_limit), 0,
     "requests per second per valid token, else per client address, per instance; /health and /metrics are not "
     "limited; 0 = off"},
    {"http", "rate_burst", CT_INT, "0", 0, 10000000, F(rate_burst), 0,
     "burst allowed above rate_limit; 0 = same as rate_limit"},

    {"redis", "address", CT_STR, "127.0.0.1:6379", 0, CONFIG_STR_MAX - 1, F(redis_address), 0,
     "host:port, or unix:/path/to/socket; with cluster = true, seed nodes host:port,host:port"},
    {"redis", "cluster", CT_BOOL, "false", 0, 1, F(redis_cluster), 0,
     "Redis Cluster: each shard's keys carry a hash tag that spreads the shards over the masters (fixed for "
     "the life of the data); every connection goes to the master serving its shard's slot"},
    {"redis", "password", CT_STR, "", 0, CONFIG_STR_MAX - 1, F(redis_password), 1, "AUTH password"},
    {"redis", "db", CT_INT, "0", 0, 1023, F(redis_db), 0, "database number"},
    {"redis", "prefix", CT_STR, "hg", 1, 63, F(redis_prefix), 0, "prefix of every key and channel"},
    {"redis", "shards", CT_INT, "8", 1, 256, F(redis_shards), 0,
     "hash-tagged key groups; fixed for the life of the data"},
    {"redis", "timeout", CT_INT, "2000", 50, 60000, F(redis_timeout_ms), 0,
     "milliseconds for a connect or a command before Redis counts as down"},
    {"redis", "auto_restore", CT_BOOL, "false", 0, 1, F(redis_auto_restore), 0,
     "when Redis is found holding older data than this instance wrote (a snapshot, a failover that lost writes, a "
     "flush), run the two-way /reStore?expire=true by itself, once across the fleet"},

    {"mysql", "host", CT_STR, "127.0.0.1", 0, CONFIG_STR_MAX - 1, F(mysql_host), 0, "server host"},
    {"mysql", "port", CT_INT, "3306", 1, 65535, F(mysql_port), 0, "server port"},
    {"mysql", "hosts", CT_STR, "", 0, CONFIG_HOSTS_MAX - 1, F(mysql_hosts), 0,
     "the nodes of one cluster (MariaDB Galera) or a primary and its standbys, host:port,host:port: when set it "
     "replaces host and port; tried in order, every connection of the instance uses one node at a time and "
     "moves to the next when it fails (a node without :port takes port)"},
    {"mysql", "socket", CT_STR, "", 0, CONFIG_STR_MAX - 1, F(mysql_socket), 0,
     "unix socket; when set, host and port are ignored"},
    {"mysql", "user", CT_STR, "hourglass", 0, CONFIG_STR_MAX - 1, F(mysql_user), 0, "user"},
    {"mysql", "password", CT_STR, "", 0, CONFIG_STR_MAX - 1, F(mysql_password), 1, "password"},
    {"mysql", "database", CT_STR, "hourglass", 1, 64, F(mysql_database), 0, "database (schema) name"},
    {"mysql", "retention_days", CT_INT, "7", 0, 36500, F(retention_days), 0,
     "days finished/deleted/dead messages are kept (dead jobs leave Redis at the same age); 0 = forever"},
    {"mysql", "retention_interval", CT_INT, "60", 1, 86400, F(retention_interval), 0,
     "seconds between retention passes"},
    {"mysql", "timeout", CT_INT, "3", 1, 300, F(mysql_timeout), 0,
     "seconds for a connect, read or write before MySQL counts as down"},
    {"mysql", "batch", CT_INT, "2000", 1, 100000, F(journal_batch), 0, "most records written in one MySQL transaction"},
    {"mysql", "backlog", CT_INT, "1000000", 1000, 100000000, F(journal_backlog), 0,
     "transitions waiting for MySQL (in the Redis outbox); past it consumption pauses (503)"},
    {"mysql", "journal_lanes", CT_INT, "1", 1, JOURNAL_LANES_MAX, F(journal_lanes), 0,
     "journal transactions in flight at once, each on its own connection (1 = one at a time)"},
    {"mysql", "bulk_inserts", CT_BOOL, "true", 0, 1, F(journal_bulk), 0,
     "write the journal's rows (new jobs, transitions, message updates) through MariaDB's bulk binary protocol (false: "
     "as SQL text)"},
    {"mysql", "per_row_commit", CT_BOOL, "false", 0, 1, F(journal_per_row), 0,
     "commit each record alone (slow; only for benchmarking group commit)"},

    {"queue", "default_ttr", CT_INT64, "30000", 0, 7 * DAY_MS, F(default_ttr), 0,
     "lease in ms after delivery; 0 = delivered at most once"},
    {"queue", "default_tries", CT_INT, "3", 1, 1000, F(default_tries), 0, "deliveries before a job is dead"},
    {"queue", "max_delay", CT_INT64, "31536000000", 0, 100 * 365 * DAY_MS, F(max_delay), 0,
     "largest delay (and runAt distance) in ms"},
    {"queue", "horizon", CT_INT64, "3600000", 0, 100 * 365 * DAY_MS, F(horizon), 0,
     "jobs due later than now + horizon (ms) are kept in MySQL only and paged into Redis before they are "
     "due; 0 = every pending job in Redis"},
    {"queue", "max_ttr", CT_INT64, "86400000", 1, 7 * DAY_MS, F(max_ttr), 0, "largest ttr in ms"},
    {"queue", "schedule_grace", CT_INT64, "60000", 1000, 7 * DAY_MS, F(schedule_grace), 0,
     "a schedule's fire more than this (ms) in the past when it is made (the daemon was down) follows the "
     "schedule's catchUp policy; later ones are made late"},
    {"queue", "max_tries", CT_INT, "1000", 1, 100000, F(max_tries), 0, "largest tries"},
    {"queue", "mover_batch", CT_INT, "500", 1, 10000, F(mover_batch), 0, "jobs moved per Redis script call"},

    {"webhook", "ca_file", CT_STR, "", 0, CONFIG_STR_MAX - 1, F(webhook_ca_file), 0,
     "PEM file of CA certificates trusted for https webhooks besides the system's (a private CA); empty = none"},
    {"webhook", "max_connections", CT_INT, "64", 1, 10000, F(webhook_max_per_origin), 0,
     "kept-alive connections per receiver (scheme, host, port), over all its topics"},

    {"amqp", "url", CT_STR, "", 0, CONFIG_STR_MAX - 1, F(amqp_url), 1,
     "amqp://user:pass@host:port/vhost of the RabbitMQ that topics with an amqp route publish to; empty = none"},
    {"amqp", "timeout", CT_INT, "10000", 100, 600000, F(amqp_timeout_ms), 0,
     "milliseconds for a batch's publish and confirms (a delivery's lease is this plus a second)"},

    {"instance", "id", CT_STR, "", 0, 63, F(instance_id), 0,
     "name in logs, metrics and job histories (MySQL); empty = hostname:port"},
    {"instance", "worker_id", CT_WORKER_ID, "auto", -1, 1023, F(worker_id), 0,
     "id-generator worker number 0..1023, or auto to lease one from Redis"},
    {"instance", "state_dir", CT_STR, "", 0, CONFIG_STR_MAX - 1, F(state_dir), 0,
     "directory for what must survive a crash (outcomes in doubt, doubt.h); one per instance; empty = memory only"},

    {"log", "level", CT_LEVEL, "info", 0, 3, F(log_level), 0, "error, warn, info or debug"},
    {"log", "file", CT_STR, "", 0, CONFIG_STR_MAX - 1, F(log_file), 0, "log file; empty = stderr"},
};

#define NKEYS (sizeof keys / sizeof keys[0])

static int parse_int64(const char *s, int64_t *out)
{
    if (*s == '\0')
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") || !strcmp(s, "1"))
        *out = 1;
    else if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off") || !strcmp(s, "0"))
        *out = 0;
    else
        return -1;
    return 0;
}

/* Store `value` into the field of `k`; on error fill `why`. */
static int set_value(struct config *cfg, const struct cfg_key *k, const char *value, char *why, size_t whylen)
{
    char *field = (char *)cfg + k->offset;
    int64_t v;
    int b;

    switch (k->type) {
    case CT_STR: {
        size_t len = strlen(value);
        if ((int64_t)len > k->max || (int64_t)len < k->min) {
            snprintf(why, whylen, "length must be %lld..%lld characters", (long long)k->min, (long long)k->max);
            return -1;
        }
        memcpy(field, value, len + 1);
        return 0;
    }
    case CT_INT:
    case CT_INT64:
        if (parse_int64(value, &v) < 0) {
            snprintf(why, whylen, "\"%s\" is not an integer", value);
            return -1;
        }
        if (v < k->min || v > k->max) {
            snprintf(why, whylen, "%lld is out of range %lld..%lld", (long long)v, (long long)k->min,
                     (long long)k->max);
            return -1;
        }
        if (k->type == CT_INT)
            *(int *)field = (int)v;
        else
            *(int64_t *)field = v;
        return 0;
    case CT_BOOL:
        if (parse_bool(value, &b) < 0) {
            snprintf(why, whylen, "\"%s\" is not true or false", value);
            return -1;
        }
        *(int *)field = b;
        return 0;
    case CT_LEVEL:
        if ((b = log_level_parse(value)) < 0) {
            snprintf(why, whylen, "\"%s\" is not one of error, warn, info, debug", value);
            return -1;
        }
        *(int *)field = b;
        return 0;
    case CT_WORKER_ID:
        if (!strcasecmp(value, "auto")) {
            *(int *)field = -1;
            return 0;
        }
        if (parse_int64(value, &v) < 0 || v < 0 || v > k->max) {
            snprintf(why, whylen, "\"%s\" is not auto or an integer 0..%lld", value, (long long)k->max);
            return -1;
        }
        *(int *)field = (int)v;
        return 0;
    }
    return -1;
}

void config_defaults(struct config *cfg)
{
    char why[128];
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NKEYS; i++)
        if (set_value(cfg, &keys[i], keys[i].def, why, sizeof why) < 0)
            abort(); /* a default outside its own bounds is a programming error */
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static const struct cfg_key *find_key(const char *section, const char *key)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section) && !strcmp(keys[i].key, key))
            return &keys[i];
    return NULL;
}

static int section_exists(const char *section)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section))
            return 1;
    return 0;
}

int config_load_string(struct config *cfg, const char *name, const char *text, char *err, size_t errlen)
{
    char section[64] = "";
    int lineno = 0;
    const char *p = text;

    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[4096];
        lineno++;
        if (len >= sizeof line) {
            snprintf(err, errlen, "%s:%d: line is longer than %zu characters", name, lineno, sizeof line - 1);
            return -1;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p = nl ? nl + 1 : p + len;
        if (len > 0 && line[len - 1] == '\r')
            line[len - 1] = '\0';

        char *s = trim(line);
        if (lineno == 1 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
            s = trim(s + 3);
        if (*s == '\0' || *s == '#' || *s == ';')
            continue;

        if (*s == '[') {
            char *close = strchr(s, ']');
            if (close == NULL || close[1] != '\0') {
                snprintf(err, errlen, "%s:%d: malformed section header", name, lineno);
                return -1;
            }
            *close = '\0';
            char *sec = trim(s + 1);
            if (!section_exists(sec)) {
                snprintf(err, errlen, "%s:%d: unknown section [%s]", name, lineno, sec);
                return -1;
            }
            snprintf(section, sizeof section, "%s", sec);
            continue;
        }

        char *eq = strchr(s, '=');
        if (eq == NULL) {
            snprintf(err, errlen, "%s:%d: expected key = value", name, lineno);
            return -1;
        }
        *eq = '\0';
        char *key = trim(s);
        char *value = trim(eq + 1);
        size_t vlen = strlen(value);
        if (vlen >= 2 && value[0] == '"' && value[vlen - 1] == '"') {
            value[vlen - 1] = '\0';
            value++;
        }
        if (section[0] == '\0') {
            snprintf(err, errlen, "%s:%d: key \"%s\" is outside any [section]", name, lineno, key);
            return -1;
        }
        const struct cfg_key *k = find_key(section, key);
        if (k == NULL) {
            snprintf(err, errlen, "%s:%d: [%s] unknown key \"%s\"", name, lineno, section, key);
            return -1;
        }
        char why[160];
        if (set_value(cfg, k, value, why, sizeof why) < 0) {
            snprintf(err, errlen, "%s:%d: [%s] %s: %s", name, lineno, section, key, why);
            return -1;
        }
    }
    return 0;
}

int config_load(struct config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char *text = NULL;
    size_t cap = 0, len = 0;
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *grown = realloc(text, cap);
            if (grown == NULL) {
                free(text);
                fclose(f);
                snprintf(err, errlen, "%s: out of memory", path);
                return -1;
            }
            text = grown;
        }
        memcpy(text + len, chunk, n);
        len += n;
    }
    int read_error = ferror(f);
    fclose(f);
    if (read_error) {
        free(text);
        snprintf(err, errlen, "%s: read error", path);
        return -1;
    }
    if (text == NULL)
        return 0; /* empty file: all defaults */
    text[len] = '\0';
    if (memchr(text, '\0', len) != NULL) {
        free(text);
        snprintf(err, errlen, "%s: contains a NUL byte; not a text file", path);
        return -1;
    }
    int rc = config_load_string(cfg, path, text, err, errlen);
    free(text);
    return rc;
}

/* [redis] address, read by the parser every connection uses (raddr.h): -t accepts what connects. */
static int check_redis_address(const struct config *cfg, char *err, size_t errlen)
{
    const char *a = cfg->redis_address;
    char why[CONFIG_STR_MAX + 96];
    if (cfg->redis_cluster && raddr_seeds(a, NULL, RADDR_SEEDS_MAX, why, sizeof why) < 0) {
        snprintf(err, errlen, "[redis] address: %s (cluster = true takes seed nodes host:port,host:port)", why);
        return -1;
    }
    if (!cfg->redis_cluster && raddr_check(a, why, sizeof why) < 0) {
        snprintf(err, errlen, "[redis] address: \"%s\" is not host:port, [IPv6]:port or unix:/path: %s%s", a, why,
                 strchr(a, ',') ? "; a list of seed nodes needs cluster = true" : "");
        return -1;
    }
    return 0;
}

int config_mysql_nodes(const struct config *cfg, struct netaddr *out, int max, char *err, size_t errlen)
{
    int n = 0;
    for (const char *p = cfg->mysql_hosts; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len > 0 && isspace((unsigned char)*p))
            p++, len--;
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        if (len > 0) {
            struct netaddr a;
            char why[160];
            if (netaddr_parse(p, len, cfg->mysql_port, &a, why, sizeof why) < 0) {
                snprintf(err, errlen, "\"%.*s\": %s", (int)(len > 80 ? 80 : len), p, why);
                return -1;
            }
            if (n == max) {
                snprintf(err, errlen, "more than %d nodes", max);
                return -1;
            }
            if (out)
                out[n] = a;
            n++;
        }
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    if (n == 0 && cfg->mysql_hosts[0]) {
        snprintf(err, errlen, "no node is named");
        return -1;
    }
    return n;
}

int config_validate(struct config *cfg, char *err, size_t errlen)
{
    if (cfg->http_threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        cfg->http_threads = cores > 0 ? (int)(cores > 64 ? 64 : cores) : 1;
    }
    if (cfg->rate_burst == 0)
        cfg->rate_burst = cfg->rate_limit;
    for (const char *c = cfg->redis_prefix; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-' && *c != '.') {
            snprintf(err, errlen, "[redis] prefix: only letters, digits, '_', '-' and '.' are allowed");
            return -1;
        }
    if (check_redis_address(cfg, err, errlen) < 0)
        return -1;
    char bad_node[300];
    if (cfg->mysql_hosts[0] && cfg->mysql_socket[0]) {
        snprintf(err, errlen, "[mysql] hosts and socket exclude each other: a socket is one local server");
        return -1;
    }
    if (config_mysql_nodes(cfg, NULL, CONFIG_MYSQL_NODES_MAX, bad_node, sizeof bad_node) < 0) {
        snprintf(err, errlen, "[mysql] hosts: %s (host:port,host:port)", bad_node);
        return -1;
    }
    /* The port must be a number getaddrinfo() takes as is: it silently reads "" as port 0 and
     * "99999" as 99999 mod 65536, and resolves service names. */
    const char *colon = strrchr(cfg->listen, ':');
    size_t port_len = colon ? strlen(colon + 1) : 0;
    if (colon == NULL || port_len == 0 || port_len > 5 || strspn(colon + 1, "0123456789") != port_len ||
        atol(colon + 1) > 65535) {
        snprintf(err, errlen, "[http] listen: \"%s\" is not address:port (port 0..65535)", cfg->listen);
        return -1;
    }
    if (cfg->token[0] && cfg->admin_token[0] && strcmp(cfg->token, cfg->admin_token) == 0) {
        snprintf(err, errlen, "[http] admin_token must differ from token");
        return -1;
    }
    if (cfg->default_ttr > cfg->max_ttr) {
        snprintf(err, errlen, "[queue] default_ttr is larger than max_ttr");
        return -1;
    }
    if (cfg->default_tries > cfg->max_tries) {
        snprintf(err, errlen, "[queue] default_tries is larger than max_tries");
        return -1;
    }
    if (cfg->amqp_url[0]) {
        struct amqpurl u;
        char why[200];
        if (amqpurl_parse(cfg->amqp_url, &u, why, sizeof why) < 0) {
            snprintf(err, errlen, "[amqp] url: %s", why);
            return -1;
        }
    }
    if (cfg->webhook_ca_file[0] && access(cfg->webhook_ca_file, R_OK) != 0) {
        snprintf(err, errlen, "[webhook] ca_file %s cannot be read: %s", cfg->webhook_ca_file, strerror(errno));
        return -1;
    }
    return 0;
}

static void print_value(const struct config *cfg, const struct cfg_key *k, FILE *out)
{
    const char *field = (const char *)cfg + k->offset;
    switch (k->type) {
    case CT_STR: {
        size_t len = strlen(field);
        /* Quote what the reader would otherwise change: surrounding spaces are trimmed and one
         * pair of surrounding quotes is removed, so such values are written inside quotes. */
        int quote = len > 0 && (isspace((unsigned char)field[0]) || isspace((unsigned char)field[len - 1]) ||
                                (len >= 2 && field[0] == '"' && field[len - 1] == '"'));
        if (k->secret && field[0])
            fputs("********", out);
        else if (quote)
            fprintf(out, "\"%s\"", field);
        else
            fputs(field, out);
        break;
    }
    case CT_INT:
        fprintf(out, "%d", *(const int *)field);
        break;
    case CT_INT64:
        fprintf(out, "%lld", (long long)*(const int64_t *)field);
        break;
    case CT_BOOL:
        fputs(*(const int *)field ? "true" : "false", out);
        break;
    case CT_LEVEL: {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        fputs(names[*(const int *)field], out);
        break;
    }
    case CT_WORKER_ID:
        if (*(const int *)field < 0)
            fputs("auto", out);
        else
            fprintf(out, "%d", *(const int *)field);
        break;
    }
}

void config_print(const struct config *cfg, FILE *out)
{
    const char *section = "";
    for (size_t i = 0; i < NKEYS; i++) {
        if (strcmp(section, keys[i].section) != 0) {
            section = keys[i].section;
            fprintf(out, "%s[%s]\n", i ? "\n" : "", section);
        }
        fprintf(out, "%s = ", keys[i].key);
        print_value(cfg, &keys[i], out);
        fputc('\n', out);
    }
}

void config_describe(FILE *out)
{
    fputs("| section | key | default | range | meaning |\n|---|---|---|---|---|\n", out);
    for (size_t i = 0; i < NKEYS; i++) {
        const struct cfg_key *k = &keys[i];
        char range[64] = "";
        if (k->type == CT_INT || k->type == CT_INT64 || k->type == CT_WORKER_ID)
            snprintf(range, sizeof range, "%lld..%lld", (long long)(k->min < 0 ? 0 : k->min), (long long)k->max);
        else if (k->type == CT_STR)
            snprintf(range, sizeof range, "≤ %lld chars", (long long)k->max);
        fprintf(out, "| %s | %s | %s | %s | %s |\n", k->section, k->key, k->def[0] ? k->def : "(empty)", range,
                k->help);
    }
}
