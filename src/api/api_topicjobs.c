/* api_topicjobs.c — GET /topics/{topic}/jobs?state=&after=&limit=&scan= (admin): a topic's
 * jobs in one state, a page at a time, in the order the state keeps them (topicjobs.lua).
 *
 * Paging is by position, not offset: `next` names the last index entry looked at
 * ("<score>:<id>"), and the following page starts after it even when that job has moved on
 * since, so every job that stays in its state is listed exactly once. Delayed and reserved
 * jobs share their shard's delay zset with every other topic of the shard, so a call looks
 * at no more than `scan` entries and may answer a short page with a `next`.
 *
 * GET /topics/{topic}/groups?after=&limit= (admin): the topic's groups that have jobs delayed,
 * ready or reserved (flow control by key; groups.lua), a page at a time: `next` is an opaque
 * position, null at the end. */
#include "api/handlers.h"
#include "api/api_util.h"
#include "redis/jobjson.h"
#include "core/ids.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_LIMIT_DEFAULT 100
#define PAGE_LIMIT_MAX     1000
#define PAGE_SCAN_DEFAULT  2000
#define PAGE_SCAN_MAX      10000

static const struct {
    const char *name;
    int state;
} states[] = {{"delayed", JS_DELAYED}, {"ready", JS_READY}, {"reserved", JS_RESERVED}, {"dead", JS_DEAD}};

/* "<score>:<id>": 1-16 digits, a colon, a job id. 0, or -1. */
static int parse_after(const char *s, int64_t *score, uint64_t *id)
{
    const char *colon = strchr(s, ':');
    size_t slen = colon ? (size_t)(colon - s) : 0;
    if (colon == NULL || slen == 0 || slen > 16)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < slen; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *score = v;
    return id_parse(colon + 1, strlen(colon + 1), id) < 0 || *id == 0 ? -1 : 0;
}

struct page_query {
    struct request *r;
    int state;
};

static void on_page(const struct job_page *page, void *arg)
{
    struct page_query *q = arg;
    struct request *r = q->r;
    if (page == NULL) {
        respond_unavailable(r, "Redis");
        return;
    }
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "{\"topic\":");
    sb_json_str(&sb, r->route.arg, r->route.arg_len);
    sb_printf(&sb, ",\"state\":\"%s\",\"jobs\":[", job_state_name(q->state));
    for (int i = 0; i < page->n; i++) {
        const struct listed_job *l = &page->jobs[i];
        struct jobjson j = {.id = l->id,
                            .topic = r->route.arg,
                            .topic_len = r->route.arg_len,
                            .state = job_state_name(q->state),
                            .body = l->body,
                            .body_len = l->body_len,
                            .biz = l->biz,
                            .biz_len = l->biz_len,
                            .priority = l->priority,
                            .ttr = l->ttr,
                            .tries = l->tries,
                            .attempt = l->attempts,
                            .run_at = l->run_at,
                            .lease_until = q->state == JS_RESERVED ? l->score : 0,
                            .died_at = q->state == JS_DEAD ? l->score : 0,
                            .trace = l->trace,
                            .group = l->group,
                            .group_len = l->group_len};
        if (i)
            sb_putc(&sb, ',');
        jobjson_open(&sb, &j);
        sb_putc(&sb, '}');
    }
    sb_printf(&sb, "],\"scanned\":%ld", page->scanned);
    if (page->more) {
        sb_printf(&sb, ",\"next\":\"%lld:", (long long)page->next_score);
        char id[INT_TEXT_MAX];
        snprintf(id, sizeof id, "%llu", (unsigned long long)page->next_id);
        sb_puts(&sb, id);
        sb_putc(&sb, '"');
    }
    sb_putc(&sb, '}');
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

static void on_groups(const struct group_count *groups, int n, const char *next, void *arg)
{
    struct request *r = arg;
    if (groups == NULL) {
        respond_unavailable(r, "Redis");
        return;
    }
    struct sbuf sb = SBUF_INIT;
    sb_puts(&sb, "{\"groups\":[");
    for (int i = 0; i < n; i++) {
        const struct group_count *g = &groups[i];
        if (i)
            sb_putc(&sb, ',');
        sb_puts(&sb, "{\"group\":");
        sb_json_str(&sb, g->group, g->group_len);
        sb_printf(&sb, ",\"delayed\":%lld,\"ready\":%lld,\"reserved\":%lld}", (long long)g->delayed,
                  (long long)g->ready, (long long)g->reserved);
    }
    sb_puts(&sb, "],\"next\":");
    if (next[0] == '\0')
        sb_puts(&sb, "null");
    else
        sb_json_cstr(&sb, next);
    sb_putc(&sb, '}');
    respond_json(r, 200, &sb);
    sb_free(&sb);
}

/* A position groups.lua gave: "" (the start), "h<HSCAN cursor>", "h<cursor>:<group>" (inside
 * the batch at that cursor, after that group) or "r<group>" (a group: job_group_valid). */
static int groups_position_valid(const char *s, size_t len)
{
    if (len == 0)
        return 1;
    if (s[0] == 'r')
        return len == 1 || job_group_valid(s + 1, len - 1);
    if (s[0] != 'h')
        return 0;
    size_t digits = 0;
    while (1 + digits < len && s[1 + digits] >= '0' && s[1 + digits] <= '9')
        digits++;
    if (digits == 0 || digits > 20)
        return 0;
    size_t rest = 1 + digits;
    return rest == len || (s[rest] == ':' && job_group_valid(s + rest + 1, len - rest - 1));
}

void api_topic_groups(struct request *r)
{
    static const char *const allowed[] = {"after", "limit", NULL};
    if (api_params_only(r, allowed) < 0)
        return;
    if (!job_topic_valid(r->route.arg, r->route.arg_len)) {
        respond_error(r, 400, "bad_request", "topic must be 1-%d characters of A-Z a-z 0-9 _ . : -", TOPIC_MAX);
        return;
    }
    const char *after = params_get(&r->params, "after");
    if (after == NULL)
        after = "";
    if (!groups_position_valid(after, strlen(after))) {
        respond_error(r, 400, "bad_request", "after must be a previous answer's next");
        return;
    }
    int64_t limit;
    char err[128];
    if (param_int(&r->params, "limit", 1, PAGE_LIMIT_MAX, PAGE_LIMIT_DEFAULT, &limit, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    if (api_require_redis(r) < 0)
        return;
    if (store_topic_groups(&r->ctx->store, r->route.arg, r->route.arg_len, after, (int)limit, on_groups, r) < 0)
        respond_unavailable(r, "Redis");
}

void api_topic_jobs(struct request *r)
{
    static const char *const allowed[] = {"state", "after", "limit", "scan", NULL};
    if (api_params_only(r, allowed) < 0)
        return;
    if (!job_topic_valid(r->route.arg, r->route.arg_len)) {
        respond_error(r, 400, "bad_request", "topic must be 1-%d characters of A-Z a-z 0-9 _ . : -", TOPIC_MAX);
        return;
    }
    const char *state_name = params_get(&r->params, "state");
    int state = 0;
    for (size_t i = 0; state_name && i < sizeof states / sizeof states[0]; i++)
        if (strcmp(state_name, states[i].name) == 0)
            state = states[i].state;
    if (state == 0) {
        respond_error(r, 400, "bad_request", "state must be one of delayed, ready, reserved, dead");
        return;
    }
    int64_t after_score = 0, limit, scan;
    uint64_t after_id = 0;
    const char *after = params_get(&r->params, "after");
    if (after && after[0] && parse_after(after, &after_score, &after_id) < 0) {
        respond_error(r, 400, "bad_request", "after must be a previous answer's next (\"<score>:<id>\")");
        return;
    }
    char err[128];
    if (param_int(&r->params, "limit", 1, PAGE_LIMIT_MAX, PAGE_LIMIT_DEFAULT, &limit, err, sizeof err) < 0 ||
        param_int(&r->params, "scan", 1, PAGE_SCAN_MAX, PAGE_SCAN_DEFAULT, &scan, err, sizeof err) < 0) {
        respond_error(r, 400, "bad_request", "%s", err);
        return;
    }
    if (api_require_redis(r) < 0)
        return;
    struct page_query *q = api_state_new(r, sizeof *q, NULL);
    if (q == NULL)
        return;
    q->r = r;
    q->state = state;
    if (store_topic_jobs(&r->ctx->store, r->route.arg, r->route.arg_len, state, after_score, after_id, (int)limit,
                         (int)scan, on_page, q) < 0)
        respond_unavailable(r, "Redis");
}
