/* rcluster.c — see rcluster.h.
 *
 * Nodes: every node we hold an rconn to — the masters of the map (rc->owners[i] for master i),
 * a node a MOVED named before the map did, and masters of an older map that are being let
 * go. A node that is no master of the map is closed by the housekeeping tick once no command
 * waits on it (inflight) and none chose it for timeout_ms (wanted_us), so a redirect's new
 * node is not closed under a command that is waiting for it to come up.
 *
 * Commands: each keeps a copy of its argv until the caller has its answer, because a
 * redirect or a retry sends it again, maybe on another connection. A command is always in
 * exactly one of two places — waiting for a reply on one node's rconn (c->node), or waiting
 * for its retry timer — and in rc->cmds, so rcluster_free can fail the ones on timers after
 * freeing the connections has failed the others.
 *
 * Where a re-send goes: the node a redirect named (c->target), else the map's owner of the
 * slot. A re-send whose node is not connected waits (bounded like TRYAGAIN) only if that node
 * never was up — a redirect's new node, or a promoted replica still connecting; a master that
 * was up and went down fails the command at once: its slots fail fast until the map moves on.
 *
 * The map is read on one node's connection at a time (rc->reading); with no node connected,
 * a throw-away rconn (the probe, loading no scripts, so a replica answers too) is opened to
 * the nodes of the last map and then the seeds in turn, one per timeout_ms. */
#include "redis/rcluster.h"
#include "base/clock.h"
#include "base/log.h"
#include "core/raddr.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TICK_MS 100

struct node {
    struct rcluster *rc;
    struct rconn *conn;
    char addr[CLUSTER_ADDR_MAX];
    int master;                     /* index into rc->map->masters, -1 when the map names it no master */
    int was_up;                     /* its connection has been up at least once */
    int inflight;                   /* our callbacks still due on conn (commands, ASKING, map reads) */
    int64_t wanted_us;              /* last time a command was routed to it */
    struct rcluster_node_status st; /* counters; the other fields are filled when read */
    struct node *next;
};

struct cmd {
    struct rcluster *rc;
    struct cmd *prev, *next;
    rconn_reply_fn fn;
    void *arg;
    int slot;   /* -1: keyless, any master */
    int script; /* script id for FCALL, -1 for a plain command */
    int argc;
    const char **argv; /* into this allocation */
    size_t *lens;
    int redirects, retries;
    int64_t started_us, sent_us;
    struct node *node;             /* waiting for its reply there, or NULL (retry timer) */
    char target[CLUSTER_ADDR_MAX]; /* the node a redirect named; "" = the map's owner */
    int asking;                    /* ASK: send ASKING before it */
    struct event *retry_timer;     /* made on the first retry */
};

struct each {
    struct node *node;
    rcluster_each_fn fn;
    void *arg;
};

struct rcluster {
    struct event_base *base;
    char name[24];
    char password[256];
    int timeout_ms;
    int load_scripts;
    char seeds[RADDR_SEEDS_MAX][CLUSTER_ADDR_MAX];
    int nseeds;

    struct cluster_map *map;
    struct node **owners; /* map master i -> its node (never NULL once applied) */
    struct node *nodes;
    struct cmd *cmds; /* not yet answered to the caller */
    int rr;           /* round robin: keyless commands, map reads */

    struct event *read_timer; /* a map read is due */
    struct event *tick;
    int reading;    /* a CLUSTER SLOTS in flight (or a probe trying) */
    int read_again; /* a read was asked for while one was in flight */
    int64_t last_read_us;
    struct node *probe; /* not in nodes */
    int probe_done;     /* answered (or failed): close it at the next tick */
    int64_t probe_since_us;
    int probe_next;

    int64_t last_log_us;
    int freeing;
    rcluster_ready_fn on_ready; /* told when rcluster_ready changes */
    void *ready_arg;
    int told_ready;
    struct rcluster_stats stats;
};

/* ---- pure parts ---- */

int rcluster_command_slot(int argc, const char **argv, const size_t *lens)
{
    static const char *const with_numkeys[] = {"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"};
    if (argc < 2 || argv == NULL || lens == NULL)
        return -1;
    for (size_t i = 0; i < sizeof with_numkeys / sizeof with_numkeys[0]; i++) {
        if (lens[0] != strlen(with_numkeys[i]) || strncasecmp(argv[0], with_numkeys[i], lens[0]) != 0)
            continue;
        if (argc < 4 || lens[2] == 0 || lens[2] > 9)
            return -1;
        int numkeys = 0;
        for (size_t k = 0; k < lens[2]; k++) {
            if (argv[2][k] < '0' || argv[2][k] > '9')
                return -1;
            numkeys = numkeys * 10 + (argv[2][k] - '0');
        }
        return numkeys > 0 ? cluster_keyslot(argv[3], lens[3]) : -1;
    }
    return cluster_keyslot(argv[1], lens[1]);
}

enum rcluster_step rcluster_next_step(enum cluster_error_kind kind, int redirects, int retries, int64_t elapsed_ms,
                                      int timeout_ms, int *delay_ms)
{
    switch (kind) {
    case CLUSTER_ERR_MOVED:
    case CLUSTER_ERR_ASK:
        /* Two nodes that each think the other owns the slot (a map changing under us) must
         * not bounce a command for ever. */
        return redirects < RCLUSTER_MAX_REDIRECTS ? RCLUSTER_FOLLOW : RCLUSTER_GIVE_UP;
    case CLUSTER_ERR_TRYAGAIN:
    case CLUSTER_ERR_NONLOCAL: /* a guarded script refused before it ran: cluster.h */
    case CLUSTER_ERR_DOWN: {
        int delay = RCLUSTER_RETRY_FIRST_MS << (retries < 5 ? (retries < 0 ? 0 : retries) : 5);
        if (delay > RCLUSTER_RETRY_MAX_MS)
            delay = RCLUSTER_RETRY_MAX_MS;
        /* Never past the caller's timeout: after it, an rconn command would have failed too. */
        if (elapsed_ms + delay > timeout_ms)
            return RCLUSTER_GIVE_UP;
        *delay_ms = delay;
        return RCLUSTER_RETRY;
    }
    case CLUSTER_ERR_OTHER:
        break;
    }
    return RCLUSTER_DELIVER;
}

/* ---- nodes ---- */

static void want_read(struct rcluster *rc);

/* Tell the owner when rcluster_ready changes (after a node's state or the map changed). */
static void tell_ready(struct rcluster *rc)
{
    if (rc->freeing || rc->on_ready == NULL)
        return;
    int ready = rcluster_ready(rc);
    if (ready != rc->told_ready) {
        rc->told_ready = ready;
        rc->on_ready(ready, rc->ready_arg);
    }
}

static int64_t elapsed_ms(const struct cmd *c)
{
    return (clock_mono_us() - c->started_us) / 1000;
}

static void log_limited(struct rcluster *rc, const char *what, const char *detail)
{
    int64_t now = clock_mono_us();
    if (now - rc->last_log_us > 1000000) {
        rc->last_log_us = now;
        log_warn("redis %s: %s: %s", rc->name, what, detail);
    }
}

static void on_node_state(struct rconn *conn, int up, void *arg)
{
    struct node *n = arg;
    (void)conn;
    if (up) {
        n->was_up = 1;
    } else if (n->master >= 0) {
        want_read(n->rc); /* killed, or demoted: the map will say who serves its slots now */
    }
    if (n->master >= 0)
        tell_ready(n->rc);
}

static void on_probe_state(struct rconn *conn, int up, void *arg);

/* A node and its connection: a master's (scripts loaded, cluster errors passed on), or the
 * probe's (no scripts, so that a replica serves it too). */
static struct node *node_open(struct rcluster *rc, const char *addr, int probe)
{
    struct node *n = calloc(1, sizeof *n);
    if (n == NULL)
        return NULL;
    n->rc = rc;
    n->master = -1;
    n->wanted_us = clock_mono_us();
    snprintf(n->addr, sizeof n->addr, "%s", addr);
    const char *colon = strrchr(addr, ':');
    char name[64];
    snprintf(name, sizeof name, "%s%s%s", rc->name, probe ? "@probe" : "@", colon && !probe ? colon + 1 : "");
    struct rconn_config cfg = {name, addr, rc->password, 0, rc->timeout_ms, probe ? 0 : rc->load_scripts};
    n->conn = rconn_new(rc->base, &cfg, probe ? on_probe_state : on_node_state, n);
    if (n->conn == NULL) {
        free(n);
        return NULL;
    }
    if (!probe)
        rconn_pass_cluster_errors(n->conn);
    return n;
}

static void node_close(struct node *n)
{
    rconn_free(n->conn); /* callbacks still due run now (NULL); they find n intact */
    free(n);
}

static struct node *node_find(struct rcluster *rc, const char *addr)
{
    for (struct node *n = rc->nodes; n; n = n->next)
        if (strcmp(n->addr, addr) == 0)
            return n;
    return NULL;
}

/* The node at addr, connecting to it if it is new. NULL on a bad address or memory. */
static struct node *node_get(struct rcluster *rc, const char *addr)
{
    struct node *n = node_find(rc, addr);
    if (n != NULL || rc->freeing)
        return n;
    if ((n = node_open(rc, addr, 0)) == NULL) {
        log_limited(rc, "cannot open a connection", addr);
        return NULL;
    }
    n->next = rc->nodes;
    rc->nodes = n;
    return n;
}

static int node_up(const struct node *n)
{
    return n != NULL && rconn_is_up(n->conn);
}

/* A connected master, taking turns; NULL when none is. */
static struct node *any_up_master(struct rcluster *rc)
{
    int n = rc->map ? rc->map->nmasters : 0;
    for (int k = 0; k < n; k++) {
        struct node *node = rc->owners[(rc->rr + k) % n];
        if (node_up(node)) {
            rc->rr = (rc->rr + k + 1) % n;
            return node;
        }
    }
    return NULL;
}

/* ---- commands ---- */

/* A copy of argv (from index `first`; the ones before are left NULL for rconn_eval). */
static struct cmd *cmd_new(struct rcluster *rc, int slot, int script, rconn_reply_fn fn, void *arg, int argc,
                           const char **argv, const size_t *lens, int first)
{
    size_t bytes = 0;
    for (int i = first; i < argc; i++)
        bytes += lens[i];
    size_t size = sizeof(struct cmd) + (size_t)argc * (sizeof(size_t) + sizeof(char *)) + bytes;
    struct cmd *c = calloc(1, size);
    if (c == NULL)
        return NULL;
    c->lens = (size_t *)(c + 1);
    c->argv = (const char **)(c->lens + argc);
    char *p = (char *)(c->argv + argc);
    for (int i = first; i < argc; i++) {
        memcpy(p, argv[i], lens[i]);
        c->argv[i] = p;
        c->lens[i] = lens[i];
        p += lens[i];
    }
    c->rc = rc;
    c->fn = fn;
    c->arg = arg;
    c->slot = slot;
    c->script = script;
    c->argc = argc;
    c->started_us = clock_mono_us();
    return c;
}

static void cmd_link(struct cmd *c)
{
    struct rcluster *rc = c->rc;
    c->next = rc->cmds;
    if (rc->cmds)
        rc->cmds->prev = c;
    rc->cmds = c;
}

static void cmd_free(struct cmd *c)
{
    if (c->retry_timer)
        event_free(c->retry_timer);
    free(c);
}

/* The caller's answer: exactly once per command. */
static void finish(struct cmd *c, redisReply *reply)
{
    struct rcluster *rc = c->rc;
    if (c->prev)
        c->prev->next = c->next;
    else
        rc->cmds = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->fn(reply, c->arg);
    cmd_free(c);
}

static void give_up(struct cmd *c, const char *why)
{
    c->rc->stats.gave_up++;
    log_limited(c->rc, "command failed", why);
    finish(c, NULL);
}

static void on_asking_reply(redisReply *reply, void *arg)
{
    struct node *n = arg;
    (void)reply;
    n->inflight--;
}

static void on_cmd_reply(redisReply *reply, void *arg);

/* Put c on n's connection (ASKING first when asked to). 0, or -1 when it is not up. */
static int send_to(struct cmd *c, struct node *n)
{
    if (!node_up(n))
        return -1;
    if (c->asking) {
        /* ASKING holds for the next command of the connection only; hiredis writes both in
         * this order before anything else can be queued on it (one thread). */
        const char *argv[] = {"ASKING"};
        const size_t lens[] = {6};
        if (rconn_command(n->conn, on_asking_reply, n, 1, argv, lens) != 0)
            return -1;
        n->inflight++;
    }
    int r = c->script >= 0 ? rconn_eval(n->conn, (enum script_id)c->script, c->argc, c->argv, c->lens, on_cmd_reply, c)
                           : rconn_command(n->conn, on_cmd_reply, c, c->argc, c->argv, c->lens);
    if (r != 0)
        return -1;
    n->inflight++;
    n->st.sent++;
    n->wanted_us = c->sent_us = clock_mono_us();
    c->node = n;
    return 0;
}

/* The node c goes to now, or NULL when none is known (no map, slot unserved, bad redirect). */
static struct node *route(struct rcluster *rc, const struct cmd *c)
{
    if (c->target[0])
        return node_get(rc, c->target);
    if (c->slot < 0)
        return any_up_master(rc);
    int i = rc->map ? cluster_map_lookup(rc->map, c->slot) : -1;
    return i >= 0 ? rc->owners[i] : NULL;
}

static void on_retry(evutil_socket_t fd, short what, void *arg);

static void wait_then_resend(struct cmd *c, int delay_ms)
{
    if (c->retry_timer == NULL && (c->retry_timer = evtimer_new(c->rc->base, on_retry, c)) == NULL) {
        give_up(c, "out of memory");
        return;
    }
    c->retries++;
    struct timeval tv = {delay_ms / 1000, (delay_ms % 1000) * 1000};
    evtimer_add(c->retry_timer, &tv);
}

/* Send c again a little later, as for TRYAGAIN, unless that would pass its timeout. */
static void retry_later(struct cmd *c, const char *why)
{
    int delay = 0;
    if (rcluster_next_step(CLUSTER_ERR_TRYAGAIN, c->redirects, c->retries, elapsed_ms(c), c->rc->timeout_ms, &delay) ==
        RCLUSTER_RETRY)
        wait_then_resend(c, delay);
    else
        give_up(c, why);
}

/* Send c again (after a redirect or a backoff). If its node is not connected: wait if that
 * node is still on its way up (new), fail at once if it went down. */
static void resend(struct cmd *c)
{
    struct node *n = route(c->rc, c);
    if (n != NULL && send_to(c, n) == 0)
        return;
    if (n != NULL && n->was_up)
        give_up(c, "the slot's master is down");
    else
        retry_later(c, n ? "the slot's new master did not come up in time" : "no master known for the slot");
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    resend(arg);
}

static void on_cmd_reply(redisReply *reply, void *arg)
{
    struct cmd *c = arg;
    struct rcluster *rc = c->rc;
    struct node *n = c->node;
    c->node = NULL;
    n->inflight--;
    if (reply != NULL) {
        n->st.answered++;
        n->st.latency_us += (uint64_t)(clock_mono_us() - c->sent_us);
    } else {
        n->st.failed++;
    }
    if (reply == NULL || rc->freeing) {
        finish(c, NULL);
        return;
    }
    enum cluster_error_kind kind =
        reply->type == REDIS_REPLY_ERROR ? cluster_error_kind(reply->str, reply->len) : CLUSTER_ERR_OTHER;
    int delay = 0;
    enum rcluster_step step = rcluster_next_step(kind, c->redirects, c->retries, elapsed_ms(c), rc->timeout_ms, &delay);
    switch (kind) {
    case CLUSTER_ERR_MOVED:
        n->st.moved++;
        want_read(rc);
        break;
    case CLUSTER_ERR_ASK:
        n->st.asked++;
        break;
    case CLUSTER_ERR_DOWN:
        want_read(rc);
        /* fall through */
    case CLUSTER_ERR_TRYAGAIN:
    case CLUSTER_ERR_NONLOCAL:
        n->st.retried++;
        break;
    case CLUSTER_ERR_OTHER:
        break;
    }
    if (step == RCLUSTER_DELIVER) {
        finish(c, reply);
    } else if (step == RCLUSTER_GIVE_UP) {
        give_up(c, reply->str);
    } else if (step == RCLUSTER_RETRY) {
        c->target[0] = '\0'; /* the map's owner again: it ASKs anew if the slot still moves */
        c->asking = 0;
        /* A fresh attempt: the redirect bound is for redirects in a row (a ping-pong between
         * two nodes); the retries themselves are bounded by the timeout. During a migration a
         * command may be ASKed, refused (TRYAGAIN, a guarded script) and ASKed again many
         * times, then MOVED once the slot is handed over. */
        c->redirects = 0;
        wait_then_resend(c, delay);
    } else {
        char host[CLUSTER_ADDR_MAX];
        int port, is_unix;
        struct cluster_redirect rd;
        if (raddr_parse(n->addr, host, sizeof host, &port, &is_unix) < 0 ||
            cluster_redirect_parse(reply->str, reply->len, host, &rd) == CLUSTER_NOT_REDIRECT) {
            give_up(c, reply->str);
            return;
        }
        c->redirects++;
        c->asking = kind == CLUSTER_ERR_ASK;
        snprintf(c->target, sizeof c->target, "%s", rd.addr);
        if (rd.addr[0] != '\0') {
            resend(c);
        } else {
            /* A node nobody can name ("?"): re-sent now it would only bounce off the old
             * owner again; the map read asked for will name the new one. */
            c->asking = 0;
            want_read(rc);
            retry_later(c, "redirected to a node that cannot be named");
        }
    }
}

static struct cmd *cmd_start(struct rcluster *rc, struct cmd *c)
{
    struct node *n = route(rc, c);
    if (n == NULL || send_to(c, n) < 0) {
        cmd_free(c);
        return NULL;
    }
    cmd_link(c);
    return c;
}

int rcluster_command(struct rcluster *rc, int slot, rconn_reply_fn fn, void *arg, int argc, const char **argv,
                     const size_t *lens)
{
    if (rc->freeing || argc < 1 || slot >= CLUSTER_SLOTS)
        return -1;
    if (slot < 0)
        slot = rcluster_command_slot(argc, argv, lens);
    struct cmd *c = cmd_new(rc, slot, -1, fn, arg, argc, argv, lens, 0);
    return c != NULL && cmd_start(rc, c) != NULL ? 0 : -1;
}

int rcluster_eval(struct rcluster *rc, enum script_id script, int argc, const char **argv, size_t *lens,
                  rconn_reply_fn fn, void *arg)
{
    if (rc->freeing || argc < 4)
        return -1;
    struct cmd *c = cmd_new(rc, cluster_keyslot(argv[3], lens[3]), (int)script, fn, arg, argc, argv, lens, 3);
    return c != NULL && cmd_start(rc, c) != NULL ? 0 : -1;
}

static void on_each_reply(redisReply *reply, void *arg)
{
    struct each *e = arg;
    e->node->inflight--;
    if (reply != NULL) {
        e->node->st.answered++;
    } else {
        e->node->st.failed++;
    }
    e->fn(e->node->addr, reply, e->arg);
    free(e);
}

int rcluster_command_all(struct rcluster *rc, rcluster_each_fn fn, void *arg, int argc, const char **argv,
                         const size_t *lens)
{
    if (rc->map == NULL || rc->freeing)
        return -1;
    int sent = 0;
    for (int i = 0; i < rc->map->nmasters; i++) {
        struct node *n = rc->owners[i];
        struct each *e = node_up(n) ? malloc(sizeof *e) : NULL;
        if (e == NULL)
            continue;
        *e = (struct each){n, fn, arg};
        if (rconn_command(n->conn, on_each_reply, e, argc, argv, lens) != 0) {
            free(e);
            continue;
        }
        n->inflight++;
        n->st.sent++;
        sent++;
    }
    return sent;
}

/* ---- the map ---- */

static int map_differs(const struct cluster_map *a, const struct cluster_map *b)
{
    if (a == NULL || a->nmasters != b->nmasters || memcmp(a->owner, b->owner, sizeof a->owner) != 0)
        return 1;
    for (int i = 0; i < a->nmasters; i++)
        if (strcmp(a->masters[i].node.addr, b->masters[i].node.addr) != 0)
            return 1;
    return 0;
}

/* Take m (ours now): a node per master, connected to if new; the others are let go (tick). */
static void apply_map(struct rcluster *rc, struct cluster_map *m)
{
    struct node **owners = calloc((size_t)m->nmasters, sizeof *owners);
    for (int i = 0; owners != NULL && i < m->nmasters; i++)
        if ((owners[i] = node_get(rc, m->masters[i].node.addr)) == NULL) {
            free(owners);
            owners = NULL;
        }
    if (owners == NULL) {
        rc->stats.map_errors++;
        log_limited(rc, "cluster map not applied", "out of memory or a bad address");
        cluster_map_free(m);
        return;
    }
    if (map_differs(rc->map, m)) {
        rc->stats.map_changes++;
        log_info("redis %s: cluster map: %d masters, %d of %d slots served", rc->name, m->nmasters, m->covered,
                 CLUSTER_SLOTS);
    }
    for (struct node *n = rc->nodes; n; n = n->next)
        n->master = -1;
    for (int i = 0; i < m->nmasters; i++)
        owners[i]->master = i;
    cluster_map_free(rc->map);
    free(rc->owners);
    rc->map = m;
    rc->owners = owners;
    rc->stats.nmasters = m->nmasters;
    rc->stats.covered = m->covered;
    tell_ready(rc);
}

static void on_map_reply(redisReply *reply, void *arg)
{
    struct node *n = arg;
    struct rcluster *rc = n->rc;
    n->inflight--;
    if (rc->freeing)
        return;
    rc->reading = 0;
    if (n == rc->probe)
        rc->probe_done = 1;
    char host[CLUSTER_ADDR_MAX], err[CLUSTER_ERR_MAX + CLUSTER_ADDR_MAX];
    int port, is_unix;
    struct cluster_map *m = NULL;
    if (reply == NULL) {
        snprintf(err, sizeof err, "no answer from %s", n->addr);
    } else if (raddr_parse(n->addr, host, sizeof host, &port, &is_unix) == 0) {
        m = cluster_map_parse(reply, host, err, sizeof err);
    } else {
        snprintf(err, sizeof err, "bad address %s", n->addr);
    }
    if (m != NULL) {
        apply_map(rc, m);
    } else {
        rc->stats.map_errors++;
        log_limited(rc, "cannot read the cluster map (keeping the old one)", err);
    }
    if (rc->read_again) {
        rc->read_again = 0;
        want_read(rc);
    }
}

static int send_map_read(struct node *n)
{
    const char *argv[] = {"CLUSTER", "SLOTS"};
    const size_t lens[] = {7, 5};
    if (rconn_command(n->conn, on_map_reply, n, 2, argv, lens) != 0)
        return -1;
    n->inflight++;
    n->rc->stats.map_reads++;
    return 0;
}

static void on_probe_state(struct rconn *conn, int up, void *arg)
{
    struct node *n = arg;
    (void)conn;
    if (up && n->inflight == 0 && send_map_read(n) < 0)
        n->rc->probe_done = 1;
}

/* The k-th address to probe: every node of the last map (masters, then replicas), then the
 * seeds. The nodes the cluster named come first: a seed that died for good (the one most
 * users configure) must not hold up the map's refresh while the cluster's other nodes
 * answer; the seeds are the way back when none of them does. */
static const char *probe_address(const struct rcluster *rc, int k)
{
    int total = rc->nseeds;
    for (int i = 0; rc->map && i < rc->map->nmasters; i++)
        total += 1 + rc->map->masters[i].nreplicas;
    k %= total;
    for (int i = 0; rc->map && i < rc->map->nmasters; i++) {
        const struct cluster_master *m = &rc->map->masters[i];
        if (k == 0)
            return m->node.addr;
        if (k <= m->nreplicas)
            return m->replicas[k - 1].addr;
        k -= 1 + m->nreplicas;
    }
    return rc->seeds[k < rc->nseeds ? k : 0];
}

static void start_probe(struct rcluster *rc)
{
    const char *addr = probe_address(rc, rc->probe_next++);
    rc->probe = node_open(rc, addr, 1);
    if (rc->probe == NULL) {
        log_limited(rc, "cannot open a connection", addr);
        rc->reading = 0; /* the tick asks again */
        return;
    }
    rc->probe_done = 0;
    rc->probe_since_us = clock_mono_us();
}

static void on_read_timer(evutil_socket_t fd, short what, void *arg)
{
    struct rcluster *rc = arg;
    (void)fd;
    (void)what;
    if (rc->reading)
        return;
    rc->last_read_us = clock_mono_us();
    rc->reading = 1;
    /* Any connected node knows the map, a master of the old one first. */
    struct node *n = any_up_master(rc);
    for (struct node *o = rc->nodes; n == NULL && o; o = o->next)
        if (node_up(o))
            n = o;
    if (n != NULL && send_map_read(n) == 0)
        return;
    if (rc->probe == NULL)
        start_probe(rc);
}

/* Read the map soon: at once, or RCLUSTER_REFRESH_MIN_MS after the last read. */
static void want_read(struct rcluster *rc)
{
    if (rc->freeing)
        return;
    if (rc->reading) {
        rc->read_again = 1;
        return;
    }
    if (evtimer_pending(rc->read_timer, NULL))
        return;
    int64_t wait_us = rc->last_read_us + RCLUSTER_REFRESH_MIN_MS * 1000 - clock_mono_us();
    if (wait_us < 0)
        wait_us = 0;
    struct timeval tv = {(time_t)(wait_us / 1000000), (suseconds_t)(wait_us % 1000000)};
    evtimer_add(rc->read_timer, &tv);
}

/* Housekeeping: close the probe and the nodes no longer needed; read the map when it is due. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct rcluster *rc = arg;
    (void)fd;
    (void)what;
    int64_t now = clock_mono_us();
    if (rc->probe && (rc->probe_done || now - rc->probe_since_us > (int64_t)rc->timeout_ms * 1000)) {
        if (!rc->probe_done) {
            rc->stats.map_errors++;
            log_limited(rc, "cannot read the cluster map", "no answer from any node tried so far");
            rc->reading = 0;
        }
        struct node *p = rc->probe;
        rc->probe = NULL;
        node_close(p); /* its map read, if still due, fails here: on_map_reply clears reading */
        rc->reading = 0;
    }
    for (struct node **pn = &rc->nodes; *pn;) {
        struct node *n = *pn;
        if (n->master < 0 && n->inflight == 0 && now - n->wanted_us > (int64_t)rc->timeout_ms * 1000) {
            log_info("redis %s: closing the connection to %s (no longer a master)", rc->name, n->addr);
            *pn = n->next;
            node_close(n);
        } else {
            pn = &n->next;
        }
    }
    int degraded = rc->map == NULL || rc->map->covered < CLUSTER_SLOTS;
    for (int i = 0; !degraded && i < rc->map->nmasters; i++)
        degraded = !node_up(rc->owners[i]);
    int64_t every_ms = degraded ? RCLUSTER_DOWN_REFRESH_MS : RCLUSTER_IDLE_REFRESH_MS;
    if (now - rc->last_read_us >= every_ms * 1000)
        want_read(rc);
}

/* ---- life ---- */

struct rcluster *rcluster_new(struct event_base *base, const struct rcluster_config *cfg)
{
    struct rcluster *rc = calloc(1, sizeof *rc);
    if (rc == NULL)
        return NULL;
    rc->base = base;
    snprintf(rc->name, sizeof rc->name, "%s", cfg->name ? cfg->name : "cluster");
    snprintf(rc->password, sizeof rc->password, "%s", cfg->password ? cfg->password : "");
    rc->timeout_ms = cfg->timeout_ms;
    rc->load_scripts = cfg->load_scripts;
    rc->read_timer = evtimer_new(base, on_read_timer, rc);
    rc->tick = event_new(base, -1, EV_PERSIST, on_tick, rc);
    char err[CLUSTER_ADDR_MAX + 64];
    rc->nseeds = raddr_seeds(cfg->seeds, rc->seeds, RADDR_SEEDS_MAX, err, sizeof err);
    if (rc->nseeds < 0)
        log_error("%s: %s", rc->name, err);
    if (rc->nseeds < 0 || rc->read_timer == NULL || rc->tick == NULL) {
        if (rc->read_timer)
            event_free(rc->read_timer);
        if (rc->tick)
            event_free(rc->tick);
        free(rc);
        return NULL;
    }
    struct timeval tv = {0, TICK_MS * 1000};
    event_add(rc->tick, &tv);
    want_read(rc);
    return rc;
}

void rcluster_free(struct rcluster *rc)
{
    if (rc == NULL)
        return;
    rc->freeing = 1;
    /* Commands on a connection fail as it closes; then the ones waiting for a retry. */
    while (rc->nodes) {
        struct node *n = rc->nodes;
        rc->nodes = n->next;
        node_close(n);
    }
    if (rc->probe)
        node_close(rc->probe);
    while (rc->cmds)
        finish(rc->cmds, NULL);
    event_free(rc->read_timer);
    event_free(rc->tick);
    cluster_map_free(rc->map);
    free(rc->owners);
    free(rc);
}

int rcluster_ready(const struct rcluster *rc)
{
    if (rc->map == NULL || rc->map->covered < CLUSTER_SLOTS)
        return 0;
    for (int i = 0; i < rc->map->nmasters; i++)
        if (!node_up(rc->owners[i]))
            return 0;
    return 1;
}

static void fill_status(const struct rcluster *rc, const struct node *n, struct rcluster_node_status *out)
{
    *out = n->st;
    snprintf(out->addr, sizeof out->addr, "%s", n->addr);
    out->up = node_up(n);
    out->master = n->master >= 0;
    out->nslots = n->master >= 0 ? rc->map->masters[n->master].nslots : 0;
    out->nreplicas = n->master >= 0 ? rc->map->masters[n->master].nreplicas : 0;
}

int rcluster_nodes(const struct rcluster *rc, struct rcluster_node_status *out, int max)
{
    int count = 0;
    for (int i = 0; rc->map && i < rc->map->nmasters; i++, count++)
        if (count < max)
            fill_status(rc, rc->owners[i], &out[count]);
    for (const struct node *n = rc->nodes; n; n = n->next)
        if (n->master < 0) {
            if (count < max)
                fill_status(rc, n, &out[count]);
            count++;
        }
    return count;
}

void rcluster_stats(const struct rcluster *rc, struct rcluster_stats *out)
{
    *out = rc->stats;
}

void rcluster_on_ready(struct rcluster *rc, rcluster_ready_fn fn, void *arg)
{
    rc->on_ready = fn;
    rc->ready_arg = arg;
    rc->told_ready = 0;
    tell_ready(rc);
}

int rcluster_any_up(const struct rcluster *rc)
{
    for (int i = 0; rc->map && i < rc->map->nmasters; i++)
        if (node_up(rc->owners[i]))
            return 1;
    return 0;
}

enum rcause rcluster_last_error(const struct rcluster *rc, struct rconn_error *out)
{
    struct rconn_error e;
    out->cause = RCAUSE_NONE;
    out->text[0] = '\0';
    out->age_ms = 0;
    for (const struct node *n = rc->nodes; n; n = n->next)
        if (rconn_last_error(n->conn, &e) != RCAUSE_NONE && (out->cause == RCAUSE_NONE || e.age_ms < out->age_ms))
            *out = e;
    if (out->cause == RCAUSE_NONE && !rcluster_any_up(rc)) {
        out->cause = RCAUSE_DOWN;
        snprintf(out->text, sizeof out->text, "%s",
                 rc->map ? "no master of the Redis Cluster is connected" : "no Redis Cluster map yet");
    }
    return out->cause;
}
