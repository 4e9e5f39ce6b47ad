/* main.c — hourglassd: command line, start-up checks, threads, signals, shutdown.
 *
 * Threads: N HTTP workers (worker.c), the keeper — mover, pub/sub, id lease, fleet and the
 * other housekeeping (keeper.c) —, the MySQL journal (journal.c), the outbox reader that
 * journals the transitions the Lua scripts logged (outbox.c) and a small pool for other
 * MySQL work (dbtask.c). This thread only handles signals. main wires the keeper's "jobs
 * are ready on topic T" to every worker's parked long-polls.
 *
 * Shutdown on SIGTERM/SIGINT: stop accepting, answer parked long-polls (204), let in-flight
 * requests finish (up to 6 s), stop the keeper, flush the outbox and the journal, exit 0. A
 * second signal exits at once. SIGHUP reopens the log file. */
#include "core/app.h"
#include "base/clock.h"
#include "core/config.h"
#include "mysql/db.h"
#include "mysql/dbtask.h"
#include "process/deliver.h"
#include "delivery/delivstats.h"
#include "durable/doubt.h"
#include "base/fault.h"
#include "durable/journal.h"
#include "base/log.h"
#include "durable/pager.h"
#include "durable/firing.h"
#include "process/keeper.h"
#include "redis/layout.h"
#include "durable/outbox.h"
#include "base/ratelimit.h"
#include "redis/rconn.h"
#include "redis/rblock.h"
#include "redis/scripts.h"
#include "base/sdnotify.h"
#include "core/shardtag.h"
#include "duties/topics.h"
#include "process/worker.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HOURGLASS_VERSION    "1.0.0"
#define DRAIN_DEADLINE_MS    6000
#define DELIVER_STOP_WAIT_MS 2000
#define JOURNAL_FLUSH_MS     1500

static void usage(FILE *out)
{
    fprintf(out, "usage: hourglassd [-c FILE] [-t] [-h] [-v]\n"
                 "  -c FILE   configuration file (default conf/hourglass.conf)\n"
                 "  -t        check the configuration and exit (0 = valid, 1 = not)\n"
                 "  -p        print the effective configuration (secrets masked) and exit\n"
                 "  -d        describe every configuration key (Markdown table) and exit\n"
                 "  -h        this help\n"
                 "  -v        version\n");
}

static int listen_socket(const struct addrinfo *ai, int reuseport)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if ((reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 4096) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* One listening socket per HTTP worker on the [http] listen address (SO_REUSEPORT: the kernel
 * spreads new connections evenly, where one shared socket lets a single busy worker win every
 * accept). A plain bind first proves the port is not in use — by another hourglassd too,
 * which SO_REUSEPORT alone would let share it. Exits with a message on failure (start-up). */
static void open_listeners(const char *listen_addr, int n, int *fds)
{
    char host[256];
    const char *colon = strrchr(listen_addr, ':');
    size_t hlen = (size_t)(colon - listen_addr);
    const char *h = listen_addr;
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof host)
        hlen = sizeof host - 1;
    memcpy(host, h, hlen);
    host[hlen] = '\0';

    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int rc = getaddrinfo(hlen ? host : NULL, colon + 1, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "hourglassd: [http] listen %s: %s\n", listen_addr, gai_strerror(rc));
        exit(1);
    }
    int probe = listen_socket(res, 0);
    if (probe < 0) {
        fprintf(stderr, "hourglassd: cannot listen on %s: %s (is another process using it? change [http] listen)\n",
                listen_addr, strerror(errno));
        exit(1);
    }
    /* port 0 asks for any free port: every worker's socket must get the same one */
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    getsockname(probe, (struct sockaddr *)&bound, &blen);
    close(probe);
    struct addrinfo ai = *res;
    ai.ai_addr = (struct sockaddr *)&bound;
    ai.ai_addrlen = blen;
    for (int i = 0; i < n; i++) {
        fds[i] = listen_socket(&ai, 1);
        if (fds[i] < 0) {
            fprintf(stderr, "hourglassd: cannot listen on %s: %s\n", listen_addr, strerror(errno));
            exit(1);
        }
    }
    freeaddrinfo(res);
}

/* The shard count and shard tags are part of the data layout (layout.h): refuse to run with others.
 * Redis unreachable is no reason not to start (requests get 503 until it is); a wrong
 * password or db is. */
static void check_redis_layout(struct app *app)
{
    const struct config *cfg = &app->cfg;
    char err[512];
    enum rblock_failure why;
    /* the record is a {w} key: in a cluster, on the master of {w}'s slot */
    redisContext *c = rblock_connect_key(cfg, "{w}", 3, 0, &why, err, sizeof err);
    if (c == NULL && why == RBLOCK_UNREACHABLE) {
        log_warn("Redis at %s is not reachable now (%s); starting anyway, requests get 503 until it is "
                 "(and the shard count is checked then)",
                 cfg->redis_address, err);
        return;
    }
    if (c == NULL) {
        fprintf(stderr, "hourglassd: Redis: %s\n", err);
        exit(1);
    }
    struct layout_record found;
    enum layout_verdict v = layout_check_blocking(c, cfg->redis_prefix, cfg->redis_shards, &found);
    redisFree(c);
    if (v == LAYOUT_DIFFERS) {
        layout_explain(&found, cfg->redis_prefix, cfg->redis_shards, err, sizeof err);
        if (found.shards != cfg->redis_shards)
            fprintf(stderr,
                    "hourglassd: %s.\n"
                    "  The shard count is fixed for the life of the data: set shards = %d (or use another prefix).\n",
                    err, found.shards);
        else
            fprintf(stderr,
                    "hourglassd: %s.\n"
                    "  Shard tags are fixed for the life of the data: set [redis] cluster to match it, or use another "
                    "prefix (and /reStore from MySQL into it).\n",
                    err);
        exit(1);
    }
    atomic_store(&app->layout, v);
}

static void check_mysql_schema(const struct config *cfg)
{
    char err[512];
    MYSQL *db = db_connect(cfg, err, sizeof err);
    if (db == NULL) {
        log_warn("MySQL is not reachable now (%s); starting anyway: pushes and deletes get 503 until it is", err);
        return;
    }
    int rc = db_check_schema(db, err, sizeof err);
    mysql_close(db);
    if (rc == -1) {
        fprintf(stderr, "hourglassd: %s\n  e.g.: mysql -h %s -P %d -u %s -p %s < sql/schema.sql\n", err,
                cfg->mysql_host, cfg->mysql_port, cfg->mysql_user, cfg->mysql_database);
        exit(1);
    }
    if (rc == -3) {
        fprintf(stderr, "hourglassd: %s\n", err);
        exit(1);
    }
    if (rc < 0)
        log_warn("MySQL schema check failed (%s); the journal checks again when it connects", err);
}

/* The shard tag table (shardtag.h), before any thread builds a key. HOURGLASS_TEST_SHARD_TAGS
 * = cluster lays the keys out with cluster tags on a single Redis, so that tests run the
 * scripts (guarded) on such keys without a cluster; never set it in production. */
static int init_shard_tags(const struct config *cfg)
{
    enum shardtag_scheme scheme = cfg->redis_cluster ? SHARDTAG_CLUSTER : SHARDTAG_PLAIN;
    const char *knob = getenv("HOURGLASS_TEST_SHARD_TAGS");
    if (knob && knob[0]) {
        if (shardtag_scheme_parse(knob, &scheme) < 0) {
            fprintf(stderr, "hourglassd: HOURGLASS_TEST_SHARD_TAGS=%s: must be plain or cluster\n", knob);
            return -1;
        }
        log_warn("HOURGLASS_TEST_SHARD_TAGS is set (%s): shard keys get %s tags whatever [redis] cluster says; "
                 "this is for tests only",
                 knob, shardtag_scheme_name(scheme));
    }
    char err[160];
    int64_t t0 = clock_mono_us();
    if (shardtag_init(cfg->redis_shards, scheme, err, sizeof err) < 0) {
        fprintf(stderr, "hourglassd: %s\n", err);
        return -1;
    }
    if (scheme == SHARDTAG_CLUSTER)
        log_info("shard tags: %d cluster tags computed in %lld us (shard 0: {%s})", cfg->redis_shards,
                 (long long)(clock_mono_us() - t0), shardtag(0, NULL));
    /* data laid out for a cluster: every script refuses whole while its slot migrates */
    scripts_guard(scheme == SHARDTAG_CLUSTER);
    log_info("scripts: Redis Functions library %s (another version's may be beside it: docs/operations.md)",
             script_library_name());
    return 0;
}

/* ---- signals ---- */

struct signals {
    struct app *app;
    struct event_base *base;
    int terms;
};

static void on_term(evutil_socket_t sig, short what, void *arg)
{
    struct signals *s = arg;
    if (s->terms++ > 0) {
        log_warn("second signal: exiting now");
        _exit(1);
    }
    log_info("signal %d: draining (a second one exits at once)", (int)sig);
    event_base_loopexit(s->base, NULL);
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
    log_reopen();
    log_info("SIGHUP: log file reopened");
}

/* The keeper's "jobs are ready on topic" goes to every worker's parked long-polls. */
struct workers {
    struct worker **w;
    int n;
    struct deliver *deliver; /* told too: topics with a delivery route */
    atomic_uint first;       /* the worker the next notification starts at */
};

/* A topic's notification starts at the workers in turn and goes round them until one has an
 * idle long-poll for it (worker_notify_ready); "look at everything" (len 0) goes to each. */
static void notify_workers(const char *topic, size_t len, void *arg)
{
    struct workers *ws = arg;
    if (len == 0) {
        for (int i = 0; i < ws->n; i++)
            worker_notify_ready(ws->w[i], topic, len);
    } else {
        worker_notify_ready(ws->w[atomic_fetch_add(&ws->first, 1) % (unsigned)ws->n], topic, len);
    }
    deliver_notify_ready(ws->deliver, topic, len);
}

/* The scheduler's pushes go to the HTTP workers in turn, as internal requests (dispatch.h). */
static int push_from_firing(const char *body, size_t len, firing_sink_fn sink, void *arg, void *ctx)
{
    const struct workers *ws = ctx;
    static atomic_uint next;
    struct worker *w = ws->w[atomic_fetch_add(&next, 1) % (unsigned)ws->n];
    return worker_internal(w, EP_PUSH, METHOD_POST, body, len, "scheduler", sink, arg);
}

static void shutdown_workers(struct app *app, const struct workers *ws, struct signals *sigs)
{
    atomic_store(&app->draining, 1);
    sdnotify_send("STOPPING=1");
    for (int i = 0; i < ws->n; i++)
        worker_drain(ws->w[i]);
    /* Wait for in-flight requests, still answering a second signal. */
    int64_t deadline = clock_mono_ms() + DRAIN_DEADLINE_MS;
    for (int i = 0; i < ws->n; i++) {
        struct timespec ts;
        for (;;) {
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50 * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            if (pthread_timedjoin_np(ws->w[i]->thread, NULL, &ts) == 0)
                break;
            event_base_loop(sigs->base, EVLOOP_NONBLOCK);
            if (clock_mono_ms() > deadline) {
                log_warn("%s: requests still in flight after %d ms; closing them", ws->w[i]->name, DRAIN_DEADLINE_MS);
                event_base_loopbreak(ws->w[i]->ctx.base);
                pthread_join(ws->w[i]->thread, NULL);
                break;
            }
        }
    }
}

/* The Redis side of the fault seam goes through rconn's hook (rconn.h). */
static enum rconn_fault redis_fault(const struct rconn *rc, enum rconn_fault_at at, int script, void *arg)
{
    if (at == RCONN_AT_SEND)
        return fault_at(FP_REDIS_SEND) == FA_FAIL ? RCONN_FAULT_FAIL : RCONN_FAULT_NONE;
    switch (fault_at(FP_REDIS_REPLY)) {
    case FA_LOST:
        return RCONN_FAULT_DROP;
    case FA_HANG:
        return RCONN_FAULT_HANG;
    default:
        return RCONN_FAULT_NONE;
    }
}

/* HOURGLASS_FAULTS (fault.h) arms the fault seam for tests; never set it in production. */
static int arm_fault_seam(void)
{
    const char *spec = getenv("HOURGLASS_FAULTS");
    if (spec == NULL || spec[0] == '\0')
        return 0;
    char err[256];
    if (fault_arm(spec, err, sizeof err) < 0) {
        fprintf(stderr, "hourglassd: %s\n", err);
        return -1;
    }
    if (fault_armed(FP_REDIS_SEND) || fault_armed(FP_REDIS_REPLY))
        rconn_set_fault_hook(redis_fault, NULL);
    log_warn("HOURGLASS_FAULTS is set (%s): faults will be injected; this is for tests only", spec);
    return 0;
}

int main(int argc, char **argv)
{
    const char *conf_path = "conf/hourglass.conf";
    int check_only = 0, print_only = 0;
    int opt;
    while ((opt = getopt(argc, argv, "c:tpdhv")) != -1) {
        switch (opt) {
        case 'c':
            conf_path = optarg;
            break;
        case 't':
            check_only = 1;
            break;
        case 'p':
            print_only = 1;
            break;
        case 'd':
            config_describe(stdout);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        case 'v':
            printf("hourglassd %s\n", HOURGLASS_VERSION);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 1;
    }

    static struct app app;
    char err[512];
    config_defaults(&app.cfg);
    if (config_load(&app.cfg, conf_path, err, sizeof err) < 0 || config_validate(&app.cfg, err, sizeof err) < 0) {
        fprintf(stderr, "hourglassd: %s\n", err);
        return 1;
    }
    if (check_only) {
        printf("hourglassd: %s: configuration OK\n", conf_path);
        return 0;
    }
    if (print_only) {
        config_print(&app.cfg, stdout);
        return 0;
    }

    struct config *cfg = &app.cfg;
    log_level_set((enum log_level)cfg->log_level);
    if (log_open(cfg->log_file) < 0) {
        fprintf(stderr, "hourglassd: cannot open [log] file %s: %s\n", cfg->log_file, strerror(errno));
        return 1;
    }
    if (scripts_init() < 0 || arm_fault_seam() < 0 || init_shard_tags(cfg) < 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    if (evthread_use_pthreads() < 0 || mysql_library_init(0, NULL, NULL) != 0) {
        fprintf(stderr, "hourglassd: cannot initialise libevent threads or the MySQL client library\n");
        return 1;
    }

    gethostname(app.hostname, sizeof app.hostname - 1);
    const char *port = strrchr(cfg->listen, ':') + 1;
    if (cfg->instance_id[0])
        snprintf(app.instance, sizeof app.instance, "%s", cfg->instance_id);
    else
        snprintf(app.instance, sizeof app.instance, "%.50s:%s", app.hostname, port);
    app.limits = (struct job_limits){cfg->max_delay,     cfg->default_ttr, cfg->max_ttr,
                                     cfg->default_tries, cfg->max_tries,   cfg->max_batch};
    app.started_unix_ms = clock_unix_ms();
    atomic_store(&app.worker_id, -1);
    idgen_init(&app.ids, cfg->redis_shards);

    if (cfg->rate_limit > 0 && (app.ratelimit = ratelimit_new(cfg->rate_limit, cfg->rate_burst)) == NULL) {
        fprintf(stderr, "hourglassd: out of memory\n");
        return 1;
    }
    check_mysql_schema(cfg);
    check_redis_layout(&app);
    int *listen_fds = calloc((size_t)cfg->http_threads, sizeof *listen_fds);
    if (listen_fds == NULL)
        return 1;
    open_listeners(cfg->listen, cfg->http_threads, listen_fds);

    if (doubt_open(cfg, app.instance, app.hostname, err, sizeof err) < 0) {
        fprintf(stderr, "hourglassd: %s\n", err);
        return 1;
    }
    if (journal_start(cfg, app.instance) < 0 || outbox_start(cfg, app.instance) < 0 || dbtask_start(cfg, 2) < 0 ||
        topics_init(cfg) < 0) {
        log_error("cannot start the MySQL threads");
        return 1;
    }
    app.nworkers = cfg->http_threads;
    app.keeper_stats_json = keeper_stats_json; /* its argument once the keeper runs (below) */
    struct workers ws = {calloc((size_t)app.nworkers, sizeof *ws.w), app.nworkers, NULL, 0};
    for (int i = 0; ws.w && i < ws.n; i++)
        if ((ws.w[i] = calloc(1, sizeof **ws.w)) == NULL) {
            log_error("cannot start HTTP worker %d", i);
            return 1;
        }
    for (int i = 0; ws.w && i < ws.n; i++) /* the ring notifications go round */
        ws.w[i]->next = ws.w[(i + 1) % ws.n];
    for (int i = 0; ws.w && i < ws.n; i++) {
        if (worker_start(ws.w[i], &app, i, listen_fds[i]) < 0) {
            log_error("cannot start HTTP worker %d", i);
            return 1;
        }
    }
    free(listen_fds); /* each worker owns its own now */
    if ((ws.deliver = deliver_start(&app)) == NULL)
        return 1;
    if (pager_start(&app) < 0) {
        log_error("cannot start the pager thread");
        return 1;
    }
    if (firing_start(&app, push_from_firing, &ws) < 0) {
        log_error("cannot start the scheduler thread");
        return 1;
    }
    struct keeper *keeper = keeper_start(&app, notify_workers, &ws);
    if (keeper == NULL)
        return 1;
    atomic_store(&app.keeper_stats_arg, keeper);

    struct signals sigs = {&app, event_base_new(), 0};
    struct event *ev_term = evsignal_new(sigs.base, SIGTERM, on_term, &sigs);
    struct event *ev_int = evsignal_new(sigs.base, SIGINT, on_term, &sigs);
    struct event *ev_hup = evsignal_new(sigs.base, SIGHUP, on_hup, &sigs);
    event_add(ev_term, NULL);
    event_add(ev_int, NULL);
    event_add(ev_hup, NULL);

    log_info("hourglassd %s listening on %s (%d HTTP threads, instance %s, Redis %s, MySQL %s:%d/%s)",
             HOURGLASS_VERSION, cfg->listen, app.nworkers, app.instance, cfg->redis_address,
             cfg->mysql_socket[0] ? cfg->mysql_socket : cfg->mysql_host, cfg->mysql_port, cfg->mysql_database);
    sdnotify_send("READY=1");
    event_base_dispatch(sigs.base);

    firing_stop(); /* no new fires while the workers drain; what it pushed is answered */
    shutdown_workers(&app, &ws, &sigs);
    /* Requests still waiting on Redis are answered now, while the journal and the reconciler
     * run: a push whose call went unanswered must be written down as in doubt. */
    for (int i = 0; i < ws.n; i++)
        worker_close_redis(ws.w[i]);
    atomic_store(&app.keeper_stats_arg, NULL); /* every worker has stopped: nothing asks for it any more */
    keeper_stop(keeper);                       /* no more ready notifications reach the delivery thread */
    pager_stop();                              /* a page step in progress ends; what it did not commit is paged again */
    /* deliveries in flight get a moment to finish and write their outcomes (the journal and
     * the outbox still run); what is left is delivered again after its lease */
    deliver_stop(ws.deliver, DELIVER_STOP_WAIT_MS);
    outbox_stop(JOURNAL_FLUSH_MS);
    journal_stop(JOURNAL_FLUSH_MS);
    dbtask_stop();
    topics_free(); /* after the pool: a refresh may have been running on it */
    delivstats_free();
    doubt_close();
    for (int i = 0; i < ws.n; i++) {
        worker_free(ws.w[i]);
        free(ws.w[i]);
    }
    free(ws.w);
    event_free(ev_term);
    event_free(ev_int);
    event_free(ev_hup);
    event_base_free(sigs.base);
    idgen_destroy(&app.ids);
    ratelimit_free(app.ratelimit);
    mysql_library_end();
    log_info("stopped");
    return 0;
}
