/* rcluster_drive — runs src/redis/rcluster.h against a real Redis Cluster for
 * tests/integration/test_rcluster_conn.py. One event loop, one rcluster, like a daemon thread.
 *
 *   rcluster_drive SEEDS check KEY...
 *       Once every master is up: SET, GET, EVALSHA of a small script loaded on every master
 *       (rcluster_command_all SCRIPT LOAD), and the daemon's inspect.lua (rcluster_eval, key
 *       "hg:{TAG}:jobs" with KEY's hash tag) for each KEY; INFO on every master. One JSON
 *       object on stdout.
 *   rcluster_drive SEEDS traffic KEY...
 *       Once every master is up, prints {"ready": ...}; then each KEY is a chain that every
 *       PACE_MS sends INCR KEY and inspect.lua on its tag, alternately, until stdin says "stop"
 *       or closes. Every REPORT_MS a JSON line with each key's successes and failures in that
 *       interval (INCR: ok/fail, script: eok/efail) and the slowest success and failure
 *       (max_ok_ms, max_fail_ms). At the end,
 *       GET of every key and the totals: {"final": {...}}.
 *
 * KEY must carry a hash tag ("c:{17}"). Exits 0, or 1 when the cluster never became ready,
 * 2 on bad usage. */
#include "core/cluster.h"
#include "base/clock.h"
#include "base/log.h"
#include "redis/rcluster.h"
#include "redis/scripts.h"

#include <event2/event.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEYS_MAX   256
#define PACE_MS    4
#define REPORT_MS  250
#define TIMEOUT_MS 2000 /* the daemon's default [redis] timeout */

static struct event_base *base;
static struct rcluster *rc;

static const char *const TEST_SCRIPT = "return redis.call('GET', KEYS[1])";

struct chain {
    const char *key;
    char jobs_key[64]; /* hg:{TAG}:jobs, in the key's slot */
    int busy, next_is_eval;
    int64_t sent_us;
    long ok, fail, eok, efail; /* this interval */
    long total_ok, total_fail, total_eok, total_efail;
    long long final;
    int final_done;
};

static struct chain chains[KEYS_MAX];
static int nchains;
static int stopping;
static int64_t max_ok_us, max_fail_us; /* the slowest answers of this interval */

static int ready_wait(int ms)
{
    int64_t until = clock_mono_ms() + ms;
    while (!rcluster_ready(rc) && clock_mono_ms() < until)
        event_base_loop(base, EVLOOP_ONCE);
    return rcluster_ready(rc);
}

static int tag_of(const char *key, char *out, size_t cap)
{
    const char *a = strchr(key, '{');
    const char *b = a ? strchr(a + 1, '}') : NULL;
    if (b == NULL || (size_t)(b - a) >= cap)
        return -1;
    memcpy(out, a + 1, (size_t)(b - a - 1));
    out[b - a - 1] = '\0';
    return 0;
}

static void print_nodes(void)
{
    struct rcluster_node_status st[16];
    int n = rcluster_nodes(rc, st, 16);
    printf("\"nodes\": [");
    for (int i = 0; i < n && i < 16; i++)
        printf("%s{\"addr\": \"%s\", \"up\": %d, \"master\": %d, \"nslots\": %d, \"sent\": %llu, "
               "\"answered\": %llu, "
               "\"failed\": %llu, \"moved\": %llu, \"asked\": %llu, \"retried\": %llu}",
               i ? ", " : "", st[i].addr, st[i].up, st[i].master, st[i].nslots, (unsigned long long)st[i].sent,
               (unsigned long long)st[i].answered, (unsigned long long)st[i].failed, (unsigned long long)st[i].moved,
               (unsigned long long)st[i].asked, (unsigned long long)st[i].retried);
    struct rcluster_stats s;
    rcluster_stats(rc, &s);
    printf("], \"stats\": {\"map_reads\": %llu, \"map_changes\": %llu, \"map_errors\": %llu, \"gave_up\": %llu, "
           "\"nmasters\": %d, \"covered\": %d}",
           (unsigned long long)s.map_reads, (unsigned long long)s.map_changes, (unsigned long long)s.map_errors,
           (unsigned long long)s.gave_up, s.nmasters, s.covered);
}

/* ---- check ---- */

struct answer {
    int done;
    char text[256]; /* the reply, as JSON */
};

static void describe(redisReply *reply, char *out, size_t cap)
{
    if (reply == NULL)
        snprintf(out, cap, "null");
    else if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)
        snprintf(out, cap, "\"%.*s\"", (int)(reply->len < 200 ? reply->len : 200), reply->str);
    else if (reply->type == REDIS_REPLY_INTEGER)
        snprintf(out, cap, "%lld", reply->integer);
    else if (reply->type == REDIS_REPLY_ARRAY)
        snprintf(out, cap, "\"array of %zu\"", reply->elements);
    else if (reply->type == REDIS_REPLY_ERROR)
        snprintf(out, cap, "\"error %.*s\"", (int)(reply->len < 200 ? reply->len : 200), reply->str);
    else
        snprintf(out, cap, "\"nil\"");
}

static void on_answer(redisReply *reply, void *arg)
{
    struct answer *a = arg;
    describe(reply, a->text, sizeof a->text);
    a->done = 1;
}

static const char *wait_answer(struct answer *a, int sent)
{
    if (sent != 0)
        return "\"not sent\"";
    int64_t until = clock_mono_ms() + 5000;
    while (!a->done && clock_mono_ms() < until)
        event_base_loop(base, EVLOOP_ONCE);
    return a->done ? a->text : "\"no callback\"";
}

static char loaded_sha[64];
static int each_done, each_ok;

static void on_each(const char *addr, redisReply *reply, void *arg)
{
    (void)addr;
    (void)arg;
    each_done++;
    if (reply && reply->type == REDIS_REPLY_STRING) {
        each_ok++;
        if (reply->len < sizeof loaded_sha)
            snprintf(loaded_sha, sizeof loaded_sha, "%s", reply->str);
    }
}

static int all_masters(int argc, const char **argv, const size_t *lens)
{
    each_done = each_ok = 0;
    int sent = rcluster_command_all(rc, on_each, NULL, argc, argv, lens);
    int64_t until = clock_mono_ms() + 5000;
    while (each_done < sent && clock_mono_ms() < until)
        event_base_loop(base, EVLOOP_ONCE);
    return sent;
}

static int cmd_check(int nkeys, char **keys)
{
    const char *load[] = {"SCRIPT", "LOAD", TEST_SCRIPT};
    const size_t load_lens[] = {6, 4, strlen(TEST_SCRIPT)};
    int loads_sent = all_masters(3, load, load_lens);
    int loads_ok = each_ok;
    const char *info[] = {"INFO", "server"};
    const size_t info_lens[] = {4, 6};
    int infos_sent = all_masters(2, info, info_lens);
    printf("{\"script_loads\": [%d, %d], \"infos\": [%d, %d], \"sha\": \"%s\", \"keys\": [", loads_sent, loads_ok,
           infos_sent, each_ok, loaded_sha);
    for (int i = 0; i < nkeys; i++) {
        const char *k = keys[i];
        char value[80], tag[CLUSTER_TAG_MAX + 16], jobs[64];
        snprintf(value, sizeof value, "value of %s", k);
        if (tag_of(k, tag, sizeof tag) < 0)
            return 2;
        snprintf(jobs, sizeof jobs, "hg:{%s}:jobs", tag);
        struct answer set = {0}, get = {0}, evalsha = {0}, inspect = {0};
        const char *sargv[] = {"SET", k, value};
        const size_t slens[] = {3, strlen(k), strlen(value)};
        int r = rcluster_command(rc, -1, on_answer, &set, 3, sargv, slens);
        printf("%s{\"key\": \"%s\", \"slot\": %d, \"set\": %s", i ? ", " : "", k, cluster_keyslot(k, strlen(k)),
               wait_answer(&set, r));
        const char *gargv[] = {"GET", k};
        const size_t glens[] = {3, strlen(k)};
        r = rcluster_command(rc, -1, on_answer, &get, 2, gargv, glens);
        printf(", \"get\": %s", wait_answer(&get, r));
        const char *eargv[] = {"EVALSHA", loaded_sha, "1", k};
        const size_t elens[] = {7, strlen(loaded_sha), 1, strlen(k)};
        r = rcluster_command(rc, -1, on_answer, &evalsha, 4, eargv, elens);
        printf(", \"evalsha\": %s", wait_answer(&evalsha, r));
        const char *iargv[5];
        size_t ilens[5];
        iargv[3] = jobs;
        ilens[3] = strlen(jobs);
        iargv[4] = "1";
        ilens[4] = 1;
        r = rcluster_eval(rc, SCRIPT_INSPECT, 5, iargv, ilens, on_answer, &inspect);
        printf(", \"inspect\": %s}", wait_answer(&inspect, r));
    }
    printf("], ");
    print_nodes();
    printf("}\n");
    return 0;
}

/* ---- traffic ---- */

static void on_chain_reply(redisReply *reply, void *arg)
{
    struct chain *c = arg;
    int64_t took = clock_mono_us() - c->sent_us;
    int ok = reply != NULL && reply->type != REDIS_REPLY_ERROR;
    int64_t *max = ok ? &max_ok_us : &max_fail_us;
    if (took > *max)
        *max = took;
    if (c->next_is_eval) { /* this was the INCR */
        ok ? c->ok++ : c->fail++;
    } else {
        ok ? c->eok++ : c->efail++;
    }
    c->busy = 0;
}

static void chain_send(struct chain *c)
{
    int r;
    c->sent_us = clock_mono_us();
    if (!c->next_is_eval) {
        const char *argv[] = {"INCR", c->key};
        const size_t lens[] = {4, strlen(c->key)};
        r = rcluster_command(rc, -1, on_chain_reply, c, 2, argv, lens);
        if (r != 0)
            c->fail++;
    } else {
        const char *argv[5];
        size_t lens[5];
        argv[3] = c->jobs_key;
        lens[3] = strlen(c->jobs_key);
        argv[4] = "1";
        lens[4] = 1;
        r = rcluster_eval(rc, SCRIPT_INSPECT, 5, argv, lens, on_chain_reply, c);
        if (r != 0)
            c->efail++;
    }
    c->next_is_eval = !c->next_is_eval;
    c->busy = r == 0;
}

static void on_pace(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    for (int i = 0; i < nchains && !stopping; i++)
        if (!chains[i].busy)
            chain_send(&chains[i]);
}

static int64_t t0_ms;

static void print_counts(const char *name, size_t field)
{
    printf(", \"%s\": [", name);
    for (int i = 0; i < nchains; i++) {
        long *v = (long *)((char *)&chains[i] + field);
        printf("%s%ld", i ? ", " : "", *v);
    }
    printf("]");
}

static void on_report(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    printf("{\"t\": %lld, \"max_ok_ms\": %lld, \"max_fail_ms\": %lld", (long long)(clock_mono_ms() - t0_ms),
           (long long)(max_ok_us / 1000), (long long)(max_fail_us / 1000));
    print_counts("ok", offsetof(struct chain, ok));
    print_counts("fail", offsetof(struct chain, fail));
    print_counts("eok", offsetof(struct chain, eok));
    print_counts("efail", offsetof(struct chain, efail));
    printf("}\n");
    fflush(stdout);
    for (int i = 0; i < nchains; i++) {
        struct chain *c = &chains[i];
        c->total_ok += c->ok;
        c->total_fail += c->fail;
        c->total_eok += c->eok;
        c->total_efail += c->efail;
        c->ok = c->fail = c->eok = c->efail = 0;
    }
    max_ok_us = max_fail_us = 0;
}

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    (void)arg;
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0 || memmem(buf, (size_t)n, "stop", 4) != NULL)
        stopping = 1;
}

static void on_final(redisReply *reply, void *arg)
{
    struct chain *c = arg;
    c->final = reply && reply->type == REDIS_REPLY_STRING ? atoll(reply->str)
               : reply && reply->type == REDIS_REPLY_NIL  ? 0
                                                          : -1;
    c->final_done = 1;
}

static int busy_chains(void)
{
    int busy = 0;
    for (int i = 0; i < nchains; i++)
        busy += chains[i].busy;
    return busy;
}

static int cmd_traffic(void)
{
    printf("{\"ready\": true, \"keys\": %d}\n", nchains);
    fflush(stdout);
    t0_ms = clock_mono_ms();
    struct event *pace = event_new(base, -1, EV_PERSIST, on_pace, NULL);
    struct event *report = event_new(base, -1, EV_PERSIST, on_report, NULL);
    struct event *input = event_new(base, 0, EV_READ | EV_PERSIST, on_stdin, NULL);
    struct timeval ptv = {0, PACE_MS * 1000}, rtv = {0, REPORT_MS * 1000};
    event_add(pace, &ptv);
    event_add(report, &rtv);
    event_add(input, NULL);
    while (!stopping)
        event_base_loop(base, EVLOOP_ONCE);
    event_del(pace);
    event_del(input);
    int64_t until = clock_mono_ms() + 5000;
    while (busy_chains() > 0 && clock_mono_ms() < until)
        event_base_loop(base, EVLOOP_ONCE);
    event_del(report);
    on_report(-1, 0, NULL); /* the last, partial interval */
    /* the counters as the cluster has them now, through the same routing */
    for (int i = 0; i < nchains; i++) {
        const char *argv[] = {"GET", chains[i].key};
        const size_t lens[] = {3, strlen(chains[i].key)};
        chains[i].final = -2;
        if (rcluster_command(rc, -1, on_final, &chains[i], 2, argv, lens) != 0)
            chains[i].final_done = 1;
    }
    until = clock_mono_ms() + 5000;
    for (int i = 0; i < nchains; i++)
        while (!chains[i].final_done && clock_mono_ms() < until)
            event_base_loop(base, EVLOOP_ONCE);
    printf("{\"final\": {\"values\": [");
    for (int i = 0; i < nchains; i++)
        printf("%s%lld", i ? ", " : "", chains[i].final);
    printf("]");
    print_counts("ok", offsetof(struct chain, total_ok));
    print_counts("fail", offsetof(struct chain, total_fail));
    print_counts("eok", offsetof(struct chain, total_eok));
    print_counts("efail", offsetof(struct chain, total_efail));
    printf("}, ");
    print_nodes();
    printf("}\n");
    event_free(pace);
    event_free(report);
    event_free(input);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[2], "check") != 0 && strcmp(argv[2], "traffic") != 0) || argc - 3 > KEYS_MAX) {
        fprintf(stderr, "usage: rcluster_drive SEEDS check|traffic KEY...\n");
        return 2;
    }
    log_level_set(getenv("RCLUSTER_DRIVE_LOG") ? LL_INFO : LL_ERROR);
    if (scripts_init() < 0)
        return 2;
    base = event_base_new();
    struct rcluster_config cfg = {"drive", argv[1], "", TIMEOUT_MS, 1};
    rc = rcluster_new(base, &cfg);
    if (rc == NULL) {
        fprintf(stderr, "rcluster_drive: bad seeds %s\n", argv[1]);
        return 2;
    }
    nchains = argc - 3;
    for (int i = 0; i < nchains; i++) {
        char tag[CLUSTER_TAG_MAX + 16];
        chains[i].key = argv[3 + i];
        if (tag_of(chains[i].key, tag, sizeof tag) < 0) {
            fprintf(stderr, "rcluster_drive: %s has no hash tag\n", chains[i].key);
            return 2;
        }
        snprintf(chains[i].jobs_key, sizeof chains[i].jobs_key, "hg:{%s}:jobs", tag);
    }
    int status = 1;
    if (!ready_wait(10000))
        fprintf(stderr, "rcluster_drive: the cluster never became ready\n");
    else
        status = strcmp(argv[2], "check") == 0 ? cmd_check(nchains, argv + 3) : cmd_traffic();
    fflush(stdout);
    rcluster_free(rc);
    event_base_free(base);
    return status;
}
