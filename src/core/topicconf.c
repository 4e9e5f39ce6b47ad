/* topicconf.c — see topicconf.h. */
#include "core/topicconf.h"
#include "base/sbuf.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

void topicconf_defaults(struct topic_conf *c)
{
    memset(c, 0, sizeof *c);
    c->max_backoff = TOPICCONF_DEFAULT_MAX_BACKOFF;
    c->route = TOPIC_ROUTE_POLL;
    c->timeout = TOPICCONF_DEFAULT_TIMEOUT;
    c->concurrency = TOPICCONF_DEFAULT_CONCURRENCY;
}

int topicconf_is_default(const struct topic_conf *c)
{
    struct topic_conf d;
    topicconf_defaults(&d);
    return c->paused == d.paused && c->rate == d.rate && c->backoff == d.backoff && c->max_backoff == d.max_backoff &&
           c->group_concurrency == 0 && !c->group_fifo && c->group_rate == 0 && c->route == TOPIC_ROUTE_POLL;
}

/* A JSON integer in [lo, hi]; -1 with a message otherwise. */
static int get_int(json_t *v, const char *name, int64_t lo, int64_t hi, int64_t *out, char *err, size_t errlen)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        snprintf(err, errlen, "%s must be an integer from %lld to %lld", name, (long long)lo, (long long)hi);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

/* A JSON string of 0..max bytes of printable characters (an empty one only when allow_empty). */
static int get_str(json_t *v, const char *name, size_t max, int allow_empty, char *out, char *err, size_t errlen)
{
    if (!json_is_string(v)) {
        snprintf(err, errlen, "%s must be a string", name);
        return -1;
    }
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len > max || (len == 0 && !allow_empty)) {
        snprintf(err, errlen, "%s must be %d to %zu characters", name, allow_empty ? 0 : 1, max);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
            snprintf(err, errlen, "%s must not contain control characters", name);
            return -1;
        }
    }
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

static int merge_deliver(struct topic_conf *c, json_t *d, char *err, size_t errlen)
{
    if (json_is_null(d)) {
        c->route = TOPIC_ROUTE_POLL;
        c->url[0] = c->secret[0] = c->exchange[0] = c->routing_key[0] = '\0';
        c->timeout = TOPICCONF_DEFAULT_TIMEOUT;
        c->concurrency = TOPICCONF_DEFAULT_CONCURRENCY;
        return 0;
    }
    if (!json_is_object(d)) {
        snprintf(err, errlen, "deliver must be null, {\"webhook\":URL,...} or {\"amqp\":{...}}");
        return -1;
    }
    struct topic_conf n = *c;
    n.url[0] = n.secret[0] = n.exchange[0] = n.routing_key[0] = '\0';
    n.timeout = TOPICCONF_DEFAULT_TIMEOUT;
    n.concurrency = TOPICCONF_DEFAULT_CONCURRENCY;
    json_t *hook = json_object_get(d, "webhook"), *amqp = json_object_get(d, "amqp");
    if ((hook != NULL) == (amqp != NULL)) {
        snprintf(err, errlen, "deliver must name exactly one of webhook or amqp");
        return -1;
    }
    const char *key;
    json_t *v;
    int64_t num;
    int keep_secret = 0;
    if (hook) {
        n.route = TOPIC_ROUTE_WEBHOOK;
        json_object_foreach(d, key, v)
        {
            if (strcmp(key, "webhook") == 0) {
                /* the URL's form is checked by the caller (whclient_parse_url) */
                if (get_str(v, "deliver.webhook", TOPICCONF_URL_MAX, 0, n.url, err, errlen) < 0)
                    return -1;
            } else if (strcmp(key, "timeout") == 0) {
                if (get_int(v, "deliver.timeout", 1, TOPICCONF_TIMEOUT_MAX, &n.timeout, err, errlen) < 0)
                    return -1;
            } else if (strcmp(key, "concurrency") == 0) {
                if (get_int(v, "deliver.concurrency", 1, TOPICCONF_CONCURRENCY_MAX, &num, err, errlen) < 0)
                    return -1;
                n.concurrency = (int)num;
            } else if (strcmp(key, "secret") == 0) {
                if (!json_is_null(v) &&
                    get_str(v, "deliver.secret", TOPICCONF_SECRET_MAX, 1, n.secret, err, errlen) < 0)
                    return -1;
            } else if (strcmp(key, "signed") == 0) {
                /* GET's read-only stand-in for the secret: a settings object read and sent
                 * back keeps the secret it had, as long as none is given */
                if (!json_is_boolean(v)) {
                    snprintf(err, errlen, "deliver.signed must be true or false");
                    return -1;
                }
                keep_secret = json_is_true(v);
            } else {
                snprintf(err, errlen, "unknown field deliver.%s (webhook, timeout, concurrency, secret)", key);
                return -1;
            }
        }
        if (keep_secret && json_object_get(d, "secret") == NULL && c->route == TOPIC_ROUTE_WEBHOOK)
            memcpy(n.secret, c->secret, sizeof n.secret);
    } else {
        n.route = TOPIC_ROUTE_AMQP;
        json_object_foreach(d, key, v)
        {
            if (strcmp(key, "amqp") != 0) {
                snprintf(err, errlen, "unknown field deliver.%s next to amqp", key);
                return -1;
            }
        }
        if (!json_is_object(amqp)) {
            snprintf(err, errlen, "deliver.amqp must be an object {\"exchange\":X,\"routingKey\":K}");
            return -1;
        }
        json_object_foreach(amqp, key, v)
        {
            if (strcmp(key, "exchange") == 0) {
                if (get_str(v, "deliver.amqp.exchange", TOPICCONF_AMQP_NAME_MAX, 1, n.exchange, err, errlen) < 0)
                    return -1;
            } else if (strcmp(key, "routingKey") == 0) {
                if (get_str(v, "deliver.amqp.routingKey", TOPICCONF_AMQP_NAME_MAX, 1, n.routing_key, err, errlen) < 0)
                    return -1;
            } else {
                snprintf(err, errlen, "unknown field deliver.amqp.%s (exchange, routingKey)", key);
                return -1;
            }
        }
        if (json_object_get(amqp, "exchange") == NULL) {
            snprintf(err, errlen, "deliver.amqp.exchange is required (\"\" is the default exchange)");
            return -1;
        }
    }
    *c = n;
    return 0;
}

int topicconf_merge_json(struct topic_conf *c, const char *text, size_t len, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(err, errlen, "malformed JSON: %s", jerr.text);
        return -1;
    }
    int rc = -1;
    struct topic_conf n = *c;
    const char *key;
    json_t *v;
    if (!json_is_object(root)) {
        snprintf(err, errlen, "the body must be a JSON object of settings");
        goto out;
    }
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "paused") == 0) {
            if (!json_is_boolean(v)) {
                snprintf(err, errlen, "paused must be true or false");
                goto out;
            }
            n.paused = json_is_true(v);
        } else if (strcmp(key, "rate") == 0) {
            if (get_int(v, "rate", 0, TOPICCONF_RATE_MAX, &n.rate, err, errlen) < 0)
                goto out;
        } else if (strcmp(key, "backoff") == 0) {
            if (get_int(v, "backoff", 0, TOPICCONF_BACKOFF_MAX, &n.backoff, err, errlen) < 0)
                goto out;
        } else if (strcmp(key, "maxBackoff") == 0) {
            if (get_int(v, "maxBackoff", 0, TOPICCONF_BACKOFF_MAX, &n.max_backoff, err, errlen) < 0)
                goto out;
        } else if (strcmp(key, "groupConcurrency") == 0) {
            if (get_int(v, "groupConcurrency", 0, TOPICCONF_GROUP_CONC_MAX, &n.group_concurrency, err, errlen) < 0)
                goto out;
        } else if (strcmp(key, "groupOrder") == 0) {
            if (!json_is_string(v) ||
                (strcmp(json_string_value(v), "any") != 0 && strcmp(json_string_value(v), "fifo") != 0)) {
                snprintf(err, errlen, "groupOrder must be \"any\" or \"fifo\"");
                goto out;
            }
            n.group_fifo = strcmp(json_string_value(v), "fifo") == 0;
        } else if (strcmp(key, "groupRate") == 0) {
            if (get_int(v, "groupRate", 0, TOPICCONF_RATE_MAX, &n.group_rate, err, errlen) < 0)
                goto out;
        } else if (strcmp(key, "deliver") == 0) {
            if (merge_deliver(&n, v, err, errlen) < 0)
                goto out;
        } else if (strcmp(key, "topic") == 0 || strcmp(key, "counts") == 0 || strcmp(key, "signed") == 0) {
            /* what GET answers may be sent back as it is: read-only, ignored */
        } else {
            snprintf(err, errlen,
                     "unknown field %s (paused, rate, backoff, maxBackoff, groupConcurrency, groupOrder, groupRate, "
                     "deliver)",
                     key);
            goto out;
        }
    }
    if (n.group_fifo) {
        /* fifo is one at a time: a groupConcurrency above 1 in the same body contradicts it */
        json_t *gc = json_object_get(root, "groupConcurrency");
        if (gc && json_integer_value(gc) > 1) {
            snprintf(err, errlen,
                     "groupOrder \"fifo\" delivers one job of a group at a time: groupConcurrency "
                     "must be 0 or 1 with it");
            goto out;
        }
        n.group_concurrency = 1;
    }
    *c = n;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

void topicconf_json(const struct topic_conf *c, int with_secret, struct sbuf *sb)
{
    sb_printf(sb,
              "\"paused\":%s,\"rate\":%lld,\"backoff\":%lld,\"maxBackoff\":%lld,\"groupConcurrency\":%lld,"
              "\"groupOrder\":\"%s\",\"groupRate\":%lld,\"deliver\":",
              c->paused ? "true" : "false", (long long)c->rate, (long long)c->backoff, (long long)c->max_backoff,
              (long long)c->group_concurrency, c->group_fifo ? "fifo" : "any", (long long)c->group_rate);
    switch (c->route) {
    case TOPIC_ROUTE_POLL:
        sb_puts(sb, "null");
        break;
    case TOPIC_ROUTE_WEBHOOK:
        sb_puts(sb, "{\"webhook\":");
        sb_json_cstr(sb, c->url);
        sb_printf(sb, ",\"timeout\":%lld,\"concurrency\":%d", (long long)c->timeout, c->concurrency);
        if (with_secret && c->secret[0]) {
            sb_puts(sb, ",\"secret\":");
            sb_json_cstr(sb, c->secret);
        } else if (!with_secret) {
            sb_printf(sb, ",\"signed\":%s", c->secret[0] ? "true" : "false");
        }
        sb_putc(sb, '}');
        break;
    case TOPIC_ROUTE_AMQP:
        sb_puts(sb, "{\"amqp\":{\"exchange\":");
        sb_json_cstr(sb, c->exchange);
        sb_puts(sb, ",\"routingKey\":");
        sb_json_cstr(sb, c->routing_key);
        sb_puts(sb, "}}");
        break;
    }
}

size_t topicconf_script_value(const struct topic_conf *c, uint64_t seq, char *out, size_t cap)
{
    char groups[64] = "";
    if (c->group_concurrency > 0 || c->group_fifo || c->group_rate > 0)
        snprintf(groups, sizeof groups, "g%lld %d %lld ", (long long)c->group_concurrency, c->group_fifo ? 1 : 0,
                 (long long)c->group_rate);
    int n = snprintf(out, cap, "%d %lld %lld %lld %s%llu", c->paused ? 1 : 0, (long long)c->rate, (long long)c->backoff,
                     (long long)c->max_backoff, groups, (unsigned long long)seq);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}
