/* lateness.c — the load tool behind figures 2-13 (bench/run.sh builds it).
 *
 *   lateness steady HOST:PORT [options]   steady producers + long-polling consumers (figures 2, 4)
 *   lateness drain  HOST:PORT [options]   get + finish as fast as possible (figure 3)
 *   lateness fill   HOST:PORT [options]   array pushes, N jobs (backlogs for figures 3-6)
 *   lateness webhook HOST:PORT [options]  steady producers, jobs delivered by webhook (figure 7)
 *   lateness amqp   HOST:PORT [options]   steady producers, jobs delivered by amqp (figure 8)
 *   lateness whdrain HOST:PORT [options]  a ready backlog delivered by webhook, jobs/s (figure 7)
 *   lateness bucket HOST:PORT [options]   long-poll jobs loaded by someone else as they come due (figure 13)
 *
 * One thread, epoll, plain non-blocking sockets with HTTP/1.1 keep-alive and TCP_NODELAY:
 * each connection has at most one request in flight (no pipelining). It is written for
 * hourglassd's answers only (Content-Length bodies, no chunking) and fails loudly on
 * anything it does not expect rather than reporting a number it cannot vouch for.
 *
 * steady: producers push single jobs on an open-loop schedule (job k is due to be sent at
 * t0 + k/rate; a producer connection that is free takes the next job that is due), each job
 * with a delay spread uniformly over [delay-min, delay-max] ms, rotating over `topics`
 * topics. Consumers long-poll GET /get/<topic>?count=K and finish every job they receive
 * before asking again; consumer i asks for topic i mod T (--consumer-topics all: for every
 * topic, starting at that one — note that a get over topics on several shards costs one
 * reserve.lua call per shard each time it looks). Lateness = the consumer's wall clock when the answer is complete
 * minus the job's runAt (server-assigned, same host clock), in milliseconds.
 * Only jobs whose runAt falls in the steady window [t0 + delay-max, t0 + duration +
 * delay-min] are sampled: before it the due rate is still ramping up from 0, after it
 * it ramps down. Every pushed job must come back (the run fails otherwise).
 *
 * webhook, amqp: the same producers and steady window, but the topics get a delivery route
 * (PUT /topics/<topic>, from this tool, over a blocking connection of its own) and the jobs
 * come to this tool's own receiver on a thread of its own ("sink") instead of to long-polling
 * consumers. webhook: an HTTP/1.1 keep-alive server (epoll, TCP_NODELAY) on a free loopback
 * port, answering every POST 200 with Content-Length: 0; amqp: a librabbitmq consumer of a
 * durable queue (--amqp HOST:PORT, guest/guest, --queue Q; basic.qos --prefetch, an ack per
 * message) that the topics' route publishes to through the default exchange. Lateness = the
 * receiver's wall clock when a job's body is complete minus the runAt in that body; every job
 * counts once (by its id: a second delivery of an id is a duplicate, counted, not sampled).
 * Before t0, one probe job per topic (delay 0) must come through the route: that proves the
 * route is in force on the daemon (settings reach it within a second), so the measured jobs
 * never wait for it. The routes are removed (DELETE /topics/<topic>) at the end.
 *
 * whdrain: the topics hold --jobs ready jobs (a `fill` with delay 0 before it); the tool
 * starts its receiver, gives the topics a webhook route (--concurrency, --timeout) and waits
 * until every job has arrived. Jobs/s = distinct jobs received ÷ the time from the first to
 * the last arrival (also printed: from the route's PUT, which includes the up to ~1.25 s the
 * setting takes to reach the daemon's delivery thread).
 *
 * bucket: --jobs jobs that the tool did not push (figure 13 bulk-loads them into MySQL as far
 * jobs, due from --from-ms on) come due; --consumers connections long-poll them as in steady
 * (consumer i asks for topic i mod T, count=K) and, unless --finish 0 (jobs with ttr 0 are
 * deleted on delivery), finish each one. Every job is sampled once by its id (a second delivery
 * is counted as a duplicate, not sampled); the series' time is relative to --from-ms. The run
 * ends when every job has arrived, or fails --grace seconds after --until-ms (the last due time).
 *
 * Output: key=value lines on stdout (run.sh parses them); diagnostics on stderr; with
 * --samples FILE, the sampled latenesses sorted ascending as "lateness_ms fraction" lines
 * (the CDF), and with --series FILE as "t_s lateness_ms" in arrival order. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <amqp.h>
#include <amqp_tcp_socket.h>

#define BENCH_TOOL "lateness"
#include "benchutil.h"

enum role { PRODUCER, CONSUMER, FILLER };
enum req { R_NONE, R_PUSH, R_GET, R_FINISH };

struct conn {
    int fd;
    enum role role;
    int index;
    enum req req; /* what is in flight */
    char *out;    /* request bytes not yet written */
    size_t outlen, outoff;
    char *in;
    size_t inlen, incap;
    int want_out;     /* EPOLLOUT registered */
    double sent_mono; /* when the request went out */
    long long job;    /* producer: job number in flight; filler: jobs in the request */
    /* consumer: ids received in the last answer, finished one by one */
    char ids[100][24];
    int nids, nfin;
    double retry_at; /* bucket: a consumer whose get failed asks again at this mono() time */
    int had_empty;   /* consumer: has had a 204 (drain: its topic is empty) */
    int finishing;   /* consumer: its get in flight finishes the last job it held (--finish-next) */
};

static struct {
    /* options */
    const char *mode;
    struct sockaddr_in addr;
    double rate;
    double duration;
    int delay_min, delay_max;
    int producers, consumers, count, topics;
    int poll_timeout;
    int all_topics; /* consumers ask for every topic (rotated) instead of one each */
    const char *samples_file, *series_file, *topic_prefix;
    long long jobs; /* fill: jobs to push; drain: jobs to finish */
    int batch;
    long long delay;  /* fill: delay of every job */
    int body_bytes;   /* fill: size of each job's body (a JSON string) */
    long long groups; /* fill: jobs spread over this many groups per topic ("group":"g<n>"); 0 = none */
    int ttr;
    double max_seconds;
    int concurrency;    /* webhook, whdrain: the route's concurrency per topic */
    int route_timeout;  /* webhook, whdrain: the route's timeout (ms) */
    char amqp_host[64]; /* amqp: the broker */
    int amqp_port;
    const char *queue;        /* amqp: the queue the routes publish to */
    int prefetch;             /* amqp: basic.qos prefetch count */
    double grace;             /* steady: seconds past the last push's answer + delay-max for every job to arrive */
    int finish;               /* consumers finish what they get (bucket --finish 0: ttr 0 jobs, nothing to finish) */
    int finish_next;          /* drain: the last job of an answer is finished by the next get (?finish=) */
    int dedupe;               /* bucket: sample each id once, count the rest as duplicates */
    double from_ms, until_ms; /* bucket: first and last due time of the jobs (epoch ms) */
    /* state */
    int ep;
    struct conn *conns;
    int nconns;
    double t0_mono, t0_real;
    long long issued, pushed_ok, push_errors, received, finished, finish_errors, get_errors, redelivered;
    long long empty_gets, fill_sent, duplicates;
    int empty_consumers;          /* consumers that have had a 204 */
    double first_recv, last_recv; /* bucket: epoch ms of the first and last job received */
    double last_push_done, last_finish_done, first_push_sent;
    long long max_behind;
    struct dvec lat, push_lat, series_t, series_v;
    char *fill_body;
    size_t fill_body_len;
} G = {
    .rate = 1000,
    .duration = 10,
    .delay_min = 1000,
    .delay_max = 3000,
    .producers = 32,
    .consumers = 16,
    .count = 1,
    .topics = 4,
    .poll_timeout = 5,
    .topic_prefix = NULL,
    .jobs = 100000,
    .batch = 1000,
    .delay = 0,
    .body_bytes = 16,
    .ttr = 60000,
    .max_seconds = 600,
    .concurrency = 16,
    .route_timeout = 10000,
    .amqp_port = 5672,
    .queue = "hgbench",
    .prefetch = 1000,
    .grace = -1,
    .finish = 1,
};

/* ------------------------------------------------------------------ connections */

static void watch(struct conn *c, int out)
{
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(G.ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die("epoll_ctl: %s", strerror(errno));
    c->want_out = out;
}

static void conn_open(struct conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket: %s", strerror(errno));
    if (connect(c->fd, (struct sockaddr *)&G.addr, sizeof G.addr) < 0)
        die("connect: %s", strerror(errno));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(G.ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        die("epoll_ctl: %s", strerror(errno));
}

static void flush_out(struct conn *c)
{
    while (c->outoff < c->outlen) {
        ssize_t k = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!c->want_out)
                    watch(c, 1);
                return;
            }
            die("write: %s", strerror(errno));
        }
        c->outoff += (size_t)k;
    }
    free(c->out);
    c->out = NULL;
    c->outlen = c->outoff = 0;
    if (c->want_out)
        watch(c, 0);
}

static void send_request(struct conn *c, enum req kind, const char *method, const char *path, const char *body,
                         size_t body_len)
{
    if (c->req != R_NONE || c->out)
        die("internal: request while busy");
    size_t cap = strlen(path) + body_len + 256;
    c->out = malloc(cap);
    if (c->out == NULL)
        die("out of memory");
    int k = snprintf(c->out, cap, "%s %s HTTP/1.1\r\nHost: bench\r\n", method, path);
    if (body) {
        k += snprintf(c->out + k, cap - (size_t)k, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                      body_len);
        memcpy(c->out + k, body, body_len);
        k += (int)body_len;
    } else {
        k += snprintf(c->out + k, cap - (size_t)k, "\r\n");
    }
    c->outlen = (size_t)k;
    c->outoff = 0;
    c->req = kind;
    c->sent_mono = mono();
    flush_out(c);
}

/* ------------------------------------------------------------------ the workloads */

static void topic_name(char *buf, size_t cap, long long k)
{
    snprintf(buf, cap, "%s.%lld", G.topic_prefix, k % G.topics);
}

/* steady: a uniform, reproducible spread of delays (64-bit mix of the job number). */
static int delay_of(long long k)
{
    uint64_t x = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return G.delay_min + (int)(x % (uint64_t)(G.delay_max - G.delay_min + 1));
}

static void producer_send(struct conn *c)
{
    long long k = G.issued++;
    char topic[160], body[512];
    topic_name(topic, sizeof topic, k);
    int n = snprintf(body, sizeof body, "{\"topic\":\"%s\",\"body\":{\"k\":%lld},\"delay\":%d,\"ttr\":%d}", topic, k,
                     delay_of(k), G.ttr);
    c->job = k;
    send_request(c, R_PUSH, "POST", "/push", body, (size_t)n);
}

/* The next get; `finish` (NULL: none) names the job it finishes first (GET /get?finish=). */
static void consumer_get(struct conn *c, const char *finish)
{
    char path[2048];
    int off = snprintf(path, sizeof path, "/get/");
    for (int t = 0; t < (G.all_topics ? G.topics : 1); t++) {
        char topic[160];
        topic_name(topic, sizeof topic, (c->index + t) % G.topics); /* rotated: spread first choices */
        off += snprintf(path + off, sizeof path - (size_t)off, "%s%s", t ? "," : "", topic);
    }
    /* a get that finishes a job does not wait (a 204 is followed by a plain long-poll): the
     * drain counts a finish when its answer comes, which a long-poll would hold at the end */
    off +=
        snprintf(path + off, sizeof path - (size_t)off, "?timeout=%d&count=%d", finish ? 0 : G.poll_timeout, G.count);
    if (finish)
        snprintf(path + off, sizeof path - (size_t)off, "&finish=%s", finish);
    c->finishing = finish != NULL;
    send_request(c, R_GET, "GET", path, NULL, 0);
}

static void consumer_next(struct conn *c)
{
    if (G.finish && G.finish_next && c->nids > 0 && c->nfin == c->nids - 1) {
        char last[24];
        memcpy(last, c->ids[c->nfin], sizeof last);
        c->nids = c->nfin = 0;
        consumer_get(c, last);
    } else if (G.finish && c->nfin < c->nids) {
        char path[96];
        snprintf(path, sizeof path, "/finish?id=%s", c->ids[c->nfin]);
        send_request(c, R_FINISH, "GET", path, NULL, 0);
    } else {
        c->nids = c->nfin = 0;
        consumer_get(c, NULL);
    }
}

static void filler_send(struct conn *c)
{
    long long left = G.jobs - G.fill_sent;
    if (left <= 0)
        return;
    int n = left < G.batch ? (int)left : G.batch;
    char topic[160];
    topic_name(topic, sizeof topic, G.fill_sent / G.batch);
    size_t cap = (size_t)n * (G.fill_body_len + 240) + 16;
    char *body = malloc(cap);
    if (body == NULL)
        die("out of memory");
    size_t off = 0;
    body[off++] = '[';
    for (int i = 0; i < n; i++) {
        char group[48] = "";
        if (G.groups > 0) /* the batch's jobs over the groups of its topic, round and round */
            snprintf(group, sizeof group, ",\"group\":\"g%lld\"", (G.fill_sent + i) % G.groups);
        off += (size_t)snprintf(body + off, cap - off, "%s{\"topic\":\"%s\",\"body\":%s,\"delay\":%lld%s}",
                                i ? "," : "", topic, G.fill_body, G.delay, group);
    }
    body[off++] = ']';
    G.fill_sent += n;
    c->job = n;
    send_request(c, R_PUSH, "POST", "/push", body, off);
    free(body);
}

static int set_add(uint64_t id);

/* Parse the jobs of a /get answer: the i-th "id" goes with the i-th "runAt". The bench's
 * own bodies ({"k":N}) contain neither key. */
static void on_jobs(struct conn *c, const char *body, size_t len, double now_real)
{
    const char *p = body, *end = body + len;
    const char *q = body;
    double t_rel = now_real / 1e3 - G.t0_real / 1e3;
    double lo = G.t0_real + G.delay_max, hi = G.t0_real + G.duration * 1e3 + G.delay_min;
    while ((p = memmem(p, (size_t)(end - p), "\"id\":\"", 6)) != NULL) {
        p += 6;
        const char *e = memchr(p, '"', (size_t)(end - p));
        if (e == NULL || e - p >= 24)
            die("bad id in %.*s", (int)len, body);
        if (c->nids >= 100)
            die("more jobs than count");
        memcpy(c->ids[c->nids], p, (size_t)(e - p));
        c->ids[c->nids][e - p] = '\0';
        c->nids++;
        q = memmem(q, (size_t)(end - q), "\"runAt\":", 8);
        if (q == NULL)
            die("no runAt in %.*s", (int)len, body);
        q += 8;
        double run_at = strtod(q, NULL);
        const char *a = memmem(p, (size_t)(end - p), "\"attempt\":", 10);
        if (a && atoi(a + 10) > 1)
            G.redelivered++;
        if (G.dedupe && !set_add(strtoull(c->ids[c->nids - 1], NULL, 10))) {
            G.duplicates++;
            p = e;
            continue;
        }
        if (G.received == 0 || now_real < G.first_recv)
            G.first_recv = now_real;
        if (now_real > G.last_recv)
            G.last_recv = now_real;
        G.received++;
        double lateness = now_real - run_at;
        if (run_at >= lo && run_at <= hi) {
            dpush(&G.lat, lateness);
            if (G.series_file) {
                dpush(&G.series_t, t_rel);
                dpush(&G.series_v, lateness);
            }
        }
        p = e;
    }
}

static int status_of(const char *in)
{
    if (strncmp(in, "HTTP/1.", 7) != 0)
        die("not an HTTP answer: %.40s", in);
    return atoi(in + 9);
}

static void on_response(struct conn *c, int status, const char *body, size_t blen)
{
    double now = mono();
    enum req kind = c->req;
    c->req = R_NONE;
    switch (kind) {
    case R_PUSH:
        if (c->role == FILLER) {
            if (status != 200)
                die("fill: push answered %d: %.*s", status, (int)(blen > 300 ? 300 : blen), body);
            G.pushed_ok += c->job;
            G.last_push_done = now;
            filler_send(c);
            return;
        }
        if (status == 200) {
            G.pushed_ok++;
            dpush(&G.push_lat, (now - c->sent_mono) * 1e3);
        } else {
            if (G.push_errors++ < 5)
                fprintf(stderr, "lateness: push answered %d: %.*s\n", status, (int)(blen > 300 ? 300 : blen), body);
        }
        G.last_push_done = now;
        return; /* the main loop hands out the next job */
    case R_GET:
        if (c->finishing) { /* a 200 or a 204 says the finish held (a 4xx: refused, nothing taken) */
            c->finishing = 0;
            if (status == 200 || status == 204) {
                G.finished++;
                G.last_finish_done = now;
            } else if (G.finish_errors++ < 5) {
                fprintf(stderr, "lateness: get?finish= answered %d: %.*s\n", status, (int)(blen > 300 ? 300 : blen),
                        body);
            }
        }
        if (status == 200) {
            on_jobs(c, body, blen, real_ms());
        } else if (status == 204) {
            G.empty_gets++;
            if (!c->had_empty) {
                c->had_empty = 1;
                G.empty_consumers++;
            }
        } else {
            if (G.get_errors++ < 5)
                fprintf(stderr, "lateness: get answered %d: %.*s\n", status, (int)(blen > 300 ? 300 : blen), body);
            if (G.dedupe) {
                /* bucket: a refused get (503 while the journal's backlog is full) is asked again
                 * 100 ms later, as a client honouring Retry-After would, not in a tight loop */
                c->retry_at = now + 0.1;
                return;
            }
        }
        consumer_next(c);
        return;
    case R_FINISH:
        if (status == 200) {
            G.finished++;
            G.last_finish_done = now;
        } else if (G.finish_errors++ < 5) {
            fprintf(stderr, "lateness: finish answered %d: %.*s\n", status, (int)(blen > 300 ? 300 : blen), body);
        }
        c->nfin++;
        consumer_next(c);
        return;
    case R_NONE:
        die("an answer nobody asked for: %.*s", (int)(blen > 300 ? 300 : blen), body);
    }
}

static void on_readable(struct conn *c)
{
    for (;;) {
        if (c->incap - c->inlen < 65536) {
            c->incap = c->incap ? c->incap * 2 : 131072;
            c->in = realloc(c->in, c->incap);
            if (c->in == NULL)
                die("out of memory");
        }
        ssize_t k = read(c->fd, c->in + c->inlen, c->incap - c->inlen - 1);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            die("read: %s", strerror(errno));
        }
        if (k == 0)
            die("the server closed a connection (%s, request in flight: %d)",
                c->role == PRODUCER   ? "producer"
                : c->role == CONSUMER ? "consumer"
                                      : "filler",
                (int)c->req);
        c->inlen += (size_t)k;
    }
    for (;;) {
        c->in[c->inlen] = '\0';
        char *hend = memmem(c->in, c->inlen, "\r\n\r\n", 4);
        if (hend == NULL)
            return;
        size_t hlen = (size_t)(hend - c->in) + 4;
        size_t clen = 0;
        for (char *h = strstr(c->in, "\r\n"); h && h < hend; h = strstr(h + 2, "\r\n")) {
            if (strncasecmp(h + 2, "Content-Length:", 15) == 0)
                clen = strtoul(h + 17, NULL, 10);
            else if (strncasecmp(h + 2, "Transfer-Encoding:", 18) == 0)
                die("chunked answers are not supported");
        }
        if (c->inlen < hlen + clen)
            return;
        int status = status_of(c->in);
        char saved = c->in[hlen + clen];
        c->in[hlen + clen] = '\0';
        on_response(c, status, c->in + hlen, clen);
        c->in[hlen + clen] = saved;
        memmove(c->in, c->in + hlen + clen, c->inlen - hlen - clen);
        c->inlen -= hlen + clen;
        if (c->inlen == 0)
            return;
    }
}

static void poll_once(int timeout_ms)
{
    struct epoll_event evs[256];
    int n = epoll_wait(G.ep, evs, 256, timeout_ms);
    if (n < 0) {
        if (errno == EINTR)
            return;
        die("epoll_wait: %s", strerror(errno));
    }
    for (int i = 0; i < n; i++) {
        struct conn *c = evs[i].data.ptr;
        if (evs[i].events & EPOLLOUT)
            flush_out(c);
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
            on_readable(c);
    }
}

/* ------------------------------------------------------------------ admin calls (blocking) */

/* One request on a connection of its own (Connection: close), blocking, 10 s timeouts.
 * Returns the status; the answer's body (NUL-terminated, cut to cap) in resp. */
static int http_call(const char *method, const char *path, const char *body, char *resp, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket: %s", strerror(errno));
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&G.addr, sizeof G.addr) < 0)
        die("connect: %s", strerror(errno));
    size_t blen = body ? strlen(body) : 0;
    char *req = malloc(strlen(path) + blen + 256);
    if (req == NULL)
        die("out of memory");
    int k = sprintf(req, "%s %s HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n", method, path);
    if (body)
        k += sprintf(req + k, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", blen, body);
    else
        k += sprintf(req + k, "\r\n");
    for (int off = 0; off < k;) {
        ssize_t w = write(fd, req + off, (size_t)(k - off));
        if (w <= 0)
            die("%s %s: write: %s", method, path, w < 0 ? strerror(errno) : "closed");
        off += (int)w;
    }
    free(req);
    char buf[65536];
    size_t n = 0;
    for (;;) {
        if (n == sizeof buf - 1)
            break;
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r < 0)
            die("%s %s: read: %s", method, path, strerror(errno));
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    if (strncmp(buf, "HTTP/1.", 7) != 0)
        die("%s %s: not an HTTP answer: %.80s", method, path, buf);
    int status = atoi(buf + 9);
    const char *b = strstr(buf, "\r\n\r\n");
    snprintf(resp, cap, "%s", b ? b + 4 : "");
    return status;
}

/* ------------------------------------------------------------------ the sink: routed deliveries */

enum sink_kind { SINK_NONE, SINK_WEBHOOK, SINK_AMQP };

struct rec {
    uint64_t id;
    double run_at, recv; /* epoch ms */
};

struct sconn {
    int fd;
    char *in;
    size_t inlen, incap;
    char *out;
    size_t outlen, outoff;
    int want_out, closing;
};

/* Everything but the atomics belongs to the sink's thread until sink_stop() has joined it. */
static struct {
    enum sink_kind kind;
    pthread_t thread;
    atomic_int stop, ready;
    atomic_llong distinct, duplicates, redelivered, requests;
    struct rec *recs;
    size_t nrecs, caprecs;
    uint64_t *set; /* open addressing, 0 = empty */
    size_t setcap, setn;
    /* webhook */
    int lfd, ep, port, conns;
    long long maxconns;
} S;

static int set_add(uint64_t id) /* 1: new */
{
    if (S.setn * 2 >= S.setcap) {
        size_t ncap = S.setcap ? S.setcap * 2 : 65536;
        uint64_t *nset = calloc(ncap, sizeof *nset);
        if (nset == NULL)
            die("out of memory");
        for (size_t i = 0; i < S.setcap; i++) {
            if (S.set[i] == 0)
                continue;
            size_t h = (size_t)((S.set[i] * 0x9E3779B97F4A7C15ull) >> 20) & (ncap - 1);
            while (nset[h])
                h = (h + 1) & (ncap - 1);
            nset[h] = S.set[i];
        }
        free(S.set);
        S.set = nset;
        S.setcap = ncap;
    }
    size_t h = (size_t)((id * 0x9E3779B97F4A7C15ull) >> 20) & (S.setcap - 1);
    while (S.set[h]) {
        if (S.set[h] == id)
            return 0;
        h = (h + 1) & (S.setcap - 1);
    }
    S.set[h] = id;
    S.setn++;
    return 1;
}

/* One delivered job: its body is the job JSON ({"id":"N",...,"attempt":A,"runAt":T,...}). The
 * bench's own bodies ({"k":N}, {"probe":1}) hold none of these keys. */
static void on_delivery(const char *body, size_t len, double now_real)
{
    atomic_fetch_add(&S.requests, 1);
    const char *end = body + len;
    const char *p = memmem(body, len, "\"id\":\"", 6);
    const char *q = memmem(body, len, "\"runAt\":", 8);
    if (p == NULL || q == NULL)
        die("sink: a delivery without id or runAt: %.*s", (int)(len > 300 ? 300 : len), body);
    char *e;
    uint64_t id = strtoull(p + 6, &e, 10);
    if (id == 0 || e >= end || *e != '"')
        die("sink: bad id in %.*s", (int)(len > 300 ? 300 : len), body);
    double run_at = strtod(q + 8, NULL);
    const char *a = memmem(body, len, "\"attempt\":", 10);
    if (a && atoi(a + 10) > 1)
        atomic_fetch_add(&S.redelivered, 1);
    if (!set_add(id)) {
        atomic_fetch_add(&S.duplicates, 1);
        return;
    }
    if (S.nrecs == S.caprecs) {
        S.caprecs = S.caprecs ? S.caprecs * 2 : 65536;
        S.recs = realloc(S.recs, S.caprecs * sizeof *S.recs);
        if (S.recs == NULL)
            die("out of memory");
    }
    S.recs[S.nrecs++] = (struct rec){id, run_at, now_real};
    atomic_fetch_add(&S.distinct, 1);
}

/* ---- webhook: a minimal HTTP/1.1 server */

static void sconn_watch(struct sconn *c, int out)
{
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(S.ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die("sink: epoll_ctl: %s", strerror(errno));
    c->want_out = out;
}

static void sconn_close(struct sconn *c)
{
    epoll_ctl(S.ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
    S.conns--;
}

static int sconn_flush(struct sconn *c) /* -1: closed */
{
    while (c->outoff < c->outlen) {
        ssize_t k = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!c->want_out)
                    sconn_watch(c, 1);
                return 0;
            }
            die("sink: write: %s", strerror(errno)); /* the daemon reset a connection it asked on */
        }
        c->outoff += (size_t)k;
    }
    c->outlen = c->outoff = 0;
    if (c->want_out)
        sconn_watch(c, 0);
    if (c->closing) {
        sconn_close(c);
        return -1;
    }
    return 0;
}

static void sconn_answer(struct sconn *c)
{
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    char *nout = realloc(c->out, c->outlen + sizeof ok);
    if (nout == NULL)
        die("out of memory");
    c->out = nout;
    memcpy(c->out + c->outlen, ok, sizeof ok - 1);
    c->outlen += sizeof ok - 1;
}

static void sconn_readable(struct sconn *c)
{
    int eof = 0;
    for (;;) {
        if (c->incap - c->inlen < 16384) {
            c->incap = c->incap ? c->incap * 2 : 32768;
            c->in = realloc(c->in, c->incap);
            if (c->in == NULL)
                die("out of memory");
        }
        ssize_t k = read(c->fd, c->in + c->inlen, c->incap - c->inlen - 1);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == ECONNRESET) {
                eof = 1;
                break;
            }
            die("sink: read: %s", strerror(errno));
        }
        if (k == 0) {
            eof = 1;
            break;
        }
        c->inlen += (size_t)k;
    }
    double now = real_ms();
    size_t off = 0;
    for (;;) {
        c->in[c->inlen] = '\0';
        char *start = c->in + off;
        size_t avail = c->inlen - off;
        char *hend = memmem(start, avail, "\r\n\r\n", 4);
        if (hend == NULL)
            break;
        if (strncmp(start, "POST ", 5) != 0)
            die("sink: not a POST: %.60s", start);
        size_t hlen = (size_t)(hend - start) + 4;
        size_t clen = 0;
        int have_len = 0;
        for (char *h = memmem(start, hlen, "\r\n", 2); h && h < hend;
             h = memmem(h + 2, (size_t)(hend + 2 - (h + 2)), "\r\n", 2)) {
            if (strncasecmp(h + 2, "Content-Length:", 15) == 0) {
                clen = strtoul(h + 17, NULL, 10);
                have_len = 1;
            } else if (strncasecmp(h + 2, "Transfer-Encoding:", 18) == 0) {
                die("sink: chunked requests are not supported");
            } else if (strncasecmp(h + 2, "Connection:", 11) == 0) {
                const char *v = h + 13;
                while (*v == ' ')
                    v++;
                if (strncasecmp(v, "close", 5) == 0)
                    c->closing = 1;
            } else if (strncasecmp(h + 2, "Expect:", 7) == 0) {
                die("sink: Expect: is not supported");
            }
        }
        if (!have_len)
            die("sink: a POST without Content-Length");
        if (avail < hlen + clen)
            break;
        on_delivery(start + hlen, clen, now);
        sconn_answer(c);
        off += hlen + clen;
    }
    if (off > 0) {
        memmove(c->in, c->in + off, c->inlen - off);
        c->inlen -= off;
    }
    if (c->outlen > 0 && sconn_flush(c) < 0)
        return;
    if (eof) {
        if (c->inlen > 0)
            die("sink: the daemon closed a connection in the middle of a request (%zu bytes)", c->inlen);
        sconn_close(c);
    }
}

static void webhook_accept(void)
{
    for (;;) {
        int fd = accept4(S.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            die("sink: accept: %s", strerror(errno));
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct sconn *c = calloc(1, sizeof *c);
        if (c == NULL)
            die("out of memory");
        c->fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(S.ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("sink: epoll_ctl: %s", strerror(errno));
        if (++S.conns > S.maxconns)
            S.maxconns = S.conns;
    }
}

static void *webhook_main(void *arg)
{
    (void)arg;
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(S.ep, EPOLL_CTL_ADD, S.lfd, &lev) < 0)
        die("sink: epoll_ctl: %s", strerror(errno));
    atomic_store(&S.ready, 1);
    while (!atomic_load(&S.stop)) {
        struct epoll_event evs[256];
        int n = epoll_wait(S.ep, evs, 256, 50);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("sink: epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            struct sconn *c = evs[i].data.ptr;
            if (c == NULL) {
                webhook_accept();
                continue;
            }
            if ((evs[i].events & EPOLLOUT) && sconn_flush(c) < 0)
                continue;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                sconn_readable(c);
        }
    }
    return NULL;
}

static void webhook_listen(void)
{
    S.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (S.lfd < 0)
        die("socket: %s", strerror(errno));
    int one = 1;
    setsockopt(S.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(S.lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(S.lfd, 1024) < 0)
        die("sink: bind/listen: %s", strerror(errno));
    socklen_t alen = sizeof a;
    getsockname(S.lfd, (struct sockaddr *)&a, &alen);
    S.port = ntohs(a.sin_port);
    S.ep = epoll_create1(EPOLL_CLOEXEC);
    if (S.ep < 0)
        die("epoll_create1: %s", strerror(errno));
}

/* ---- amqp: a librabbitmq consumer */

static void amqp_check(amqp_rpc_reply_t r, const char *what)
{
    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        return;
    case AMQP_RESPONSE_NONE:
        die("sink: amqp %s: no reply", what);
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        die("sink: amqp %s: %s", what, amqp_error_string2(r.library_error));
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD || r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_connection_close_t *m = r.reply.decoded; /* same layout as channel.close */
            die("sink: amqp %s: server error %u: %.*s", what, m->reply_code, (int)m->reply_text.len,
                (char *)m->reply_text.bytes);
        }
        die("sink: amqp %s: server exception (method 0x%08x)", what, r.reply.id);
    }
}

static void *amqp_main(void *arg)
{
    (void)arg;
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = amqp_tcp_socket_new(conn);
    if (sock == NULL)
        die("sink: amqp: cannot make a socket");
    int rc = amqp_socket_open(sock, G.amqp_host, G.amqp_port);
    if (rc != AMQP_STATUS_OK)
        die("sink: amqp: connect to %s:%d: %s", G.amqp_host, G.amqp_port, amqp_error_string2(rc));
    amqp_check(amqp_login(conn, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest"), "login");
    amqp_channel_open(conn, 1);
    amqp_check(amqp_get_rpc_reply(conn), "channel.open");
    amqp_queue_declare(conn, 1, amqp_cstring_bytes(G.queue), 0, 1, 0, 0, amqp_empty_table);
    amqp_check(amqp_get_rpc_reply(conn), "queue.declare");
    amqp_basic_qos(conn, 1, 0, (uint16_t)G.prefetch, 0);
    amqp_check(amqp_get_rpc_reply(conn), "basic.qos");
    amqp_basic_consume(conn, 1, amqp_cstring_bytes(G.queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    amqp_check(amqp_get_rpc_reply(conn), "basic.consume");
    atomic_store(&S.ready, 1);
    while (!atomic_load(&S.stop)) {
        amqp_maybe_release_buffers(conn);
        amqp_envelope_t env;
        struct timeval tv = {0, 50000};
        amqp_rpc_reply_t r = amqp_consume_message(conn, &env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_NORMAL) {
            on_delivery(env.message.body.bytes, env.message.body.len, real_ms());
            if (amqp_basic_ack(conn, 1, env.delivery_tag, 0) != AMQP_STATUS_OK)
                die("sink: amqp: basic.ack failed");
            amqp_destroy_envelope(&env);
            continue;
        }
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT)
            continue;
        amqp_check(r, "consume");
        die("sink: amqp consume: reply type %d", (int)r.reply_type);
    }
    amqp_channel_close(conn, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn);
    return NULL;
}

/* ---- starting, routing, stopping */

static void sink_start(enum sink_kind kind)
{
    S.kind = kind;
    if (kind == SINK_WEBHOOK)
        webhook_listen();
    if (pthread_create(&S.thread, NULL, kind == SINK_WEBHOOK ? webhook_main : amqp_main, NULL) != 0)
        die("pthread_create failed");
    double until = mono() + 30;
    while (!atomic_load(&S.ready)) {
        if (mono() > until)
            die("sink: not ready within 30 s");
        usleep(1000);
    }
}

static void sink_stop(void)
{
    atomic_store(&S.stop, 1);
    pthread_join(S.thread, NULL);
}

/* PUT (route = 1) or DELETE (route = 0) the delivery route of every topic. */
static void set_routes(int route)
{
    for (int t = 0; t < G.topics; t++) {
        char topic[160], path[256], body[512], resp[1024];
        topic_name(topic, sizeof topic, t);
        snprintf(path, sizeof path, "/topics/%s", topic);
        if (!route) {
            int st = http_call("DELETE", path, NULL, resp, sizeof resp);
            if (st != 200 && st != 204)
                die("DELETE %s answered %d: %s", path, st, resp);
            continue;
        }
        if (S.kind == SINK_WEBHOOK)
            snprintf(body, sizeof body,
                     "{\"deliver\":{\"webhook\":\"http://127.0.0.1:%d/hook/%s\",\"concurrency\":%d,\"timeout\":%d}}",
                     S.port, topic, G.concurrency, G.route_timeout);
        else
            snprintf(body, sizeof body, "{\"deliver\":{\"amqp\":{\"exchange\":\"\",\"routingKey\":\"%s\"}}}", G.queue);
        int st = http_call("PUT", path, body, resp, sizeof resp);
        if (st != 200)
            die("PUT %s %s answered %d: %s", path, body, st, resp);
    }
}

/* One job per topic, due at once, must come through the route: then the route is in force. */
static int probe_routes(void)
{
    long long before = atomic_load(&S.distinct);
    for (int t = 0; t < G.topics; t++) {
        char topic[160], body[256], resp[1024];
        topic_name(topic, sizeof topic, t);
        snprintf(body, sizeof body, "{\"topic\":\"%s\",\"body\":{\"probe\":%d}}", topic, t);
        int st = http_call("POST", "/push", body, resp, sizeof resp);
        if (st != 200)
            die("probe push answered %d: %s", st, resp);
    }
    double t0 = mono();
    while (atomic_load(&S.distinct) < before + G.topics) {
        if (mono() - t0 > 15)
            die("only %lld of %d probe jobs came through the %s route within 15 s of the PUT",
                atomic_load(&S.distinct) - before, G.topics, S.kind == SINK_WEBHOOK ? "webhook" : "amqp");
        usleep(2000);
    }
    fprintf(stderr, "lateness: the %s routes of %d topics are in force (probes came through %.2f s after the PUT)\n",
            S.kind == SINK_WEBHOOK ? "webhook" : "amqp", G.topics, mono() - t0);
    return G.topics;
}

/* ------------------------------------------------------------------ modes */

static struct conn *make_conns(int np, int nc, int nf)
{
    G.nconns = np + nc + nf;
    G.conns = calloc((size_t)G.nconns, sizeof *G.conns);
    if (G.conns == NULL)
        die("out of memory");
    for (int i = 0; i < G.nconns; i++) {
        struct conn *c = &G.conns[i];
        c->role = i < np ? PRODUCER : i < np + nc ? CONSUMER : FILLER;
        c->index = i < np ? i : i < np + nc ? i - np : i - np - nc;
        conn_open(c);
    }
    return G.conns;
}

/* The lateness results every mode ends with: the series over time (--series, unsorted: before
 * print_dist sorts G.lat), the distribution, and its CDF (--samples). */
static void write_lateness(void)
{
    if (G.series_file) {
        FILE *f = fopen(G.series_file, "w");
        if (f == NULL)
            die("%s: %s", G.series_file, strerror(errno));
        for (size_t i = 0; i < G.series_t.n; i++)
            fprintf(f, "%.4f %.3f\n", G.series_t.v[i], G.series_v.v[i]);
        fclose(f);
    }
    print_dist("lat_ms", &G.lat);
    if (G.samples_file) {
        FILE *f = fopen(G.samples_file, "w");
        if (f == NULL)
            die("%s: %s", G.samples_file, strerror(errno));
        for (size_t i = 0; i < G.lat.n; i++)
            fprintf(f, "%.3f %.6f\n", G.lat.v[i], (double)(i + 1) / (double)G.lat.n);
        fclose(f);
    }
}

/* The deliveries the sink received: lateness samples of the steady window (and the series),
 * and G.received/G.redelivered, once its thread has stopped. */
static void sink_collect(long long probes)
{
    double lo = G.t0_real + G.delay_max, hi = G.t0_real + G.duration * 1e3 + G.delay_min;
    for (size_t i = 0; i < S.nrecs; i++) {
        const struct rec *r = &S.recs[i];
        if (r->run_at < lo || r->run_at > hi)
            continue;
        dpush(&G.lat, r->recv - r->run_at);
        if (G.series_file) {
            dpush(&G.series_t, (r->recv - G.t0_real) / 1e3);
            dpush(&G.series_v, r->recv - r->run_at);
        }
    }
    G.received = atomic_load(&S.distinct) - probes;
    G.redelivered = atomic_load(&S.redelivered);
}

static int run_steady(enum sink_kind sink)
{
    long long probes = 0;
    make_conns(G.producers, sink == SINK_NONE ? G.consumers : 0, 0);
    if (sink != SINK_NONE) {
        sink_start(sink);
        set_routes(1);
        probes = probe_routes();
    }
    for (int i = 0; i < G.nconns; i++)
        if (G.conns[i].role == CONSUMER)
            consumer_get(&G.conns[i], NULL);
    /* let the consumers park before the first job is pushed */
    double settle = mono() + 0.2;
    while (mono() < settle)
        poll_once(10);

    long long total = (long long)llround(G.rate * G.duration);
    G.t0_mono = mono();
    G.t0_real = real_ms();
    int next_producer = 0;
    double deadline = 0;
    for (;;) {
        double now = mono();
        long long due = (long long)((now - G.t0_mono) * G.rate) + 1;
        if (due > total)
            due = total;
        /* hand due jobs to free producer connections */
        for (int tries = 0; G.issued < due && tries < G.producers; tries++) {
            struct conn *c = &G.conns[next_producer];
            next_producer = (next_producer + 1) % G.producers;
            if (c->req == R_NONE)
                producer_send(c);
        }
        if (due - G.issued > G.max_behind)
            G.max_behind = due - G.issued;
        int all_answered = G.issued == total && G.pushed_ok + G.push_errors == total;
        if (all_answered && deadline == 0)
            deadline = now + G.delay_max / 1e3 + G.grace;
        if (sink != SINK_NONE)
            G.received = atomic_load(&S.distinct) - probes;
        if (all_answered && G.received >= G.pushed_ok &&
            (sink != SINK_NONE || G.finished + G.finish_errors >= G.received))
            break;
        if (deadline && now > deadline) {
            fprintf(stderr, "lateness: only %lld of %lld pushed jobs came back within %.0f s of the last push\n",
                    G.received, G.pushed_ok, G.delay_max / 1e3 + G.grace);
            break;
        }
        if (now - G.t0_mono > G.max_seconds)
            die("steady: still running after %.0f s", G.max_seconds);
        int wait_ms = 1;
        if (G.issued >= total)
            wait_ms = 20;
        poll_once(wait_ms);
    }
    if (sink != SINK_NONE) {
        set_routes(0);
        usleep(100000); /* a duplicate just behind the last job still counts */
        sink_stop();
        sink_collect(probes);
    }
    double push_secs = G.last_push_done - G.t0_mono;
    printf("rate_target=%.1f\nduration=%.1f\npushed=%lld\npush_errors=%lld\npush_rate=%.1f\n", G.rate, G.duration,
           G.pushed_ok, G.push_errors, push_secs > 0 ? (double)G.pushed_ok / push_secs : 0.0);
    printf("received=%lld\nfinished=%lld\nfinish_errors=%lld\nget_errors=%lld\nredelivered=%lld\nmax_behind=%lld\n",
           G.received, G.finished, G.finish_errors, G.get_errors, G.redelivered, G.max_behind);
    printf("window_lo_s=%.3f\nwindow_hi_s=%.3f\n", G.delay_max / 1e3, G.duration + G.delay_min / 1e3);
    print_dist("push_ms", &G.push_lat);
    write_lateness();
    if (sink != SINK_NONE)
        printf("duplicates=%lld\nprobes=%lld\nsink_requests=%lld\nsink_max_conns=%lld\n", atomic_load(&S.duplicates),
               probes, atomic_load(&S.requests), S.maxconns);
    int ok = G.received >= G.pushed_ok && G.push_errors == 0 && G.get_errors == 0 && G.finish_errors == 0;
    printf("ok=%d\n", ok);
    if (!ok)
        fprintf(stderr,
                "lateness: FAILED: %lld of %lld pushed jobs received, %lld push errors, %lld get errors, "
                "%lld finish errors\n",
                G.received, G.pushed_ok, G.push_errors, G.get_errors, G.finish_errors);
    return ok ? 0 : 3;
}

/* whdrain: the topics' ready backlog through a webhook route, as fast as the daemon sends it. */
static int run_whdrain(void)
{
    sink_start(SINK_WEBHOOK);
    double t_put = real_ms();
    set_routes(1);
    double t0 = mono();
    long long last = 0;
    double last_progress = t0;
    for (;;) {
        long long got = atomic_load(&S.distinct);
        if (got >= G.jobs)
            break;
        double now = mono();
        if (got != last) {
            last = got;
            last_progress = now;
        }
        if (now - last_progress > 15.0) {
            fprintf(stderr, "lateness: whdrain: no new job for 15 s, %lld of %lld received\n", got, G.jobs);
            break;
        }
        if (now - t0 > G.max_seconds)
            die("whdrain: still running after %.0f s (%lld received)", G.max_seconds, got);
        usleep(5000);
    }
    set_routes(0);
    usleep(100000);
    sink_stop();
    double first = 0, last_recv = 0;
    for (size_t i = 0; i < S.nrecs; i++) {
        if (i == 0 || S.recs[i].recv < first)
            first = S.recs[i].recv;
        if (S.recs[i].recv > last_recv)
            last_recv = S.recs[i].recv;
    }
    long long n = (long long)S.nrecs;
    double secs = (last_recv - first) / 1e3, secs_put = (last_recv - t_put) / 1e3;
    printf("jobs=%lld\nreceived=%lld\nduplicates=%lld\nredelivered=%lld\nsink_requests=%lld\nsink_max_conns=%lld\n",
           G.jobs, n, atomic_load(&S.duplicates), atomic_load(&S.redelivered), atomic_load(&S.requests), S.maxconns);
    printf("concurrency=%d\ntopics=%d\n", G.concurrency, G.topics);
    printf("seconds=%.3f\nrate=%.1f\nseconds_from_put=%.3f\nrate_from_put=%.1f\nfirst_after_put_s=%.3f\n", secs,
           secs > 0 && n > 1 ? (double)(n - 1) / secs : 0.0, secs_put, secs_put > 0 ? (double)n / secs_put : 0.0,
           n ? (first - t_put) / 1e3 : 0.0);
    int ok = n == G.jobs;
    printf("ok=%d\n", ok);
    if (!ok)
        fprintf(stderr, "lateness: whdrain FAILED: %lld of %lld jobs received\n", n, G.jobs);
    return ok ? 0 : 3;
}

static int run_drain(void)
{
    G.poll_timeout = 1;
    make_conns(0, G.consumers, 0);
    G.t0_mono = mono();
    G.t0_real = real_ms();
    G.delay_max = 0;
    G.duration = 1e9; /* no sampling window: nothing is recorded */
    for (int i = 0; i < G.nconns; i++)
        consumer_get(&G.conns[i], NULL);
    /* A 204 means nothing was ready on the consumer's topic for a whole long-poll timeout: once
     * every consumer has had one, the backlog is gone (short of --jobs: the run fails below).
     * Every consumer, not as many 204s as consumers: the topics need not drain at the same pace
     * (on a Redis Cluster, figure 15, a topic on a busier master drains later), and the
     * consumers of a topic that is empty already answer 204 once a second each. */
    while (G.finished + G.finish_errors < G.jobs && G.empty_consumers < G.consumers) {
        poll_once(50);
        if (mono() - G.t0_mono > G.max_seconds)
            die("drain: still running after %.0f s (%lld finished)", G.max_seconds, G.finished);
    }
    double secs = G.last_finish_done - G.t0_mono;
    printf("jobs=%lld\nfinished=%lld\nreceived=%lld\nfinish_errors=%lld\nget_errors=%lld\nseconds=%.3f\nrate=%.1f\n",
           G.jobs, G.finished, G.received, G.finish_errors, G.get_errors, secs,
           secs > 0 ? (double)G.finished / secs : 0.0);
    printf("empty_gets=%lld\n", G.empty_gets);
    int ok = G.finished == G.jobs && G.get_errors == 0 && G.finish_errors == 0;
    printf("ok=%d\n", ok);
    return ok ? 0 : 3;
}

/* bucket: jobs loaded by someone else come due; consume them and measure their lateness. */
static int run_bucket(void)
{
    if (G.from_ms <= 0 || G.until_ms < G.from_ms)
        die("bucket: --from-ms and --until-ms (epoch ms, until >= from) are required");
    G.dedupe = 1;
    make_conns(0, G.consumers, 0);
    /* every job is sampled: the window starts at the first due time and never ends */
    G.t0_mono = mono();
    G.t0_real = G.from_ms;
    G.delay_min = G.delay_max = 0;
    G.duration = 1e9;
    for (int i = 0; i < G.nconns; i++)
        consumer_get(&G.conns[i], NULL);
    int ok = 1;
    for (;;) {
        if (G.received >= G.jobs && (!G.finish || G.finished + G.finish_errors >= G.received))
            break;
        poll_once(10);
        double now = mono();
        for (int i = 0; i < G.nconns; i++) {
            struct conn *c = &G.conns[i];
            if (c->retry_at > 0 && now >= c->retry_at) {
                c->retry_at = 0;
                consumer_get(c, NULL);
            }
        }
        if (real_ms() > G.until_ms + G.grace * 1e3) {
            fprintf(stderr, "lateness: bucket: only %lld of %lld jobs arrived within %.0f s of the last due time\n",
                    G.received, G.jobs, G.grace);
            ok = 0;
            break;
        }
        if (mono() - G.t0_mono > G.max_seconds)
            die("bucket: still running after %.0f s (%lld received)", G.max_seconds, G.received);
    }
    double secs = (G.last_recv - G.first_recv) / 1e3;
    printf("jobs=%lld\nreceived=%lld\nduplicates=%lld\nfinished=%lld\nfinish_errors=%lld\nget_errors=%lld\n", G.jobs,
           G.received, G.duplicates, G.finished, G.finish_errors, G.get_errors);
    printf("redelivered=%lld\nempty_gets=%lld\n", G.redelivered, G.empty_gets);
    printf("first_recv_s=%.3f\nlast_recv_s=%.3f\nseconds=%.3f\nrate=%.1f\nspread_s=%.3f\n",
           (G.first_recv - G.from_ms) / 1e3, (G.last_recv - G.from_ms) / 1e3, secs,
           secs > 0 ? (double)(G.received - 1) / secs : 0.0, (G.until_ms - G.from_ms) / 1e3);
    write_lateness();
    ok = ok && G.received >= G.jobs && G.duplicates == 0 && G.get_errors == 0 && G.finish_errors == 0;
    printf("ok=%d\n", ok);
    if (!ok)
        fprintf(stderr,
                "lateness: bucket FAILED: %lld of %lld jobs received, %lld duplicates, %lld get errors, "
                "%lld finish errors\n",
                G.received, G.jobs, G.duplicates, G.get_errors, G.finish_errors);
    return ok ? 0 : 3;
}

static int run_fill(void)
{
    if (G.body_bytes < 2)
        die("--body-bytes must be at least 2");
    G.fill_body_len = (size_t)G.body_bytes;
    G.fill_body = malloc(G.fill_body_len + 1);
    G.fill_body[0] = '"';
    memset(G.fill_body + 1, 'x', G.fill_body_len - 2);
    G.fill_body[G.fill_body_len - 1] = '"';
    G.fill_body[G.fill_body_len] = '\0';
    make_conns(0, 0, G.producers);
    G.t0_mono = mono();
    for (int i = 0; i < G.nconns; i++)
        filler_send(&G.conns[i]);
    while (G.pushed_ok < G.jobs) {
        poll_once(100);
        if (mono() - G.t0_mono > G.max_seconds)
            die("fill: still running after %.0f s (%lld pushed)", G.max_seconds, G.pushed_ok);
    }
    double secs = G.last_push_done - G.t0_mono;
    printf("jobs=%lld\nseconds=%.3f\nrate=%.1f\nbody_bytes=%d\nok=1\n", G.pushed_ok, secs,
           secs > 0 ? (double)G.pushed_ok / secs : 0.0, G.body_bytes);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: lateness steady|drain|fill|webhook|amqp|whdrain|bucket HOST:PORT [options]\n"
            "  steady: --rate N/s --duration S --delay-min MS --delay-max MS --producers N --consumers N\n"
            "          --count K --topics T --prefix P --ttr MS --samples FILE --series FILE\n"
            "          --consumer-topics one|all\n"
            "  drain:  --jobs N --consumers N --count K --topics T --prefix P --consumer-topics one|all\n"
            "          --finish-next 0|1 (1: each answer's last job finished by the next get, ?finish=)\n"
            "  fill:   --jobs N --batch B --producers N --topics T --prefix P --delay MS --body-bytes B [--groups G]\n"
            "  webhook: the steady options but --consumers, --count, --consumer-topics; and\n"
            "          --concurrency N --timeout MS (the route's)\n"
            "  amqp:   the steady options but --consumers, --count, --consumer-topics; and\n"
            "          --amqp HOST:PORT (guest/guest) --queue Q --prefetch N\n"
            "  whdrain: --jobs N --topics T --prefix P --concurrency N --timeout MS\n"
            "  bucket: --jobs N --from-ms T --until-ms T (epoch ms: first and last due time) --consumers N\n"
            "          --count K --topics T --prefix P --finish 0|1 --grace S --samples FILE --series FILE\n"
            "  steady, webhook, amqp: --grace S (every job must have arrived S seconds after the last push\n"
            "          was answered + delay-max; 10, for webhook and amqp 60)\n"
            "  all:    --max-seconds S (fail past it)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        usage();
    G.mode = argv[1];
    char host[64];
    const char *colon = strrchr(argv[2], ':');
    if (colon == NULL || (size_t)(colon - argv[2]) >= sizeof host)
        usage();
    memcpy(host, argv[2], (size_t)(colon - argv[2]));
    host[colon - argv[2]] = '\0';
    G.addr.sin_family = AF_INET;
    G.addr.sin_port = htons((unsigned short)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &G.addr.sin_addr) != 1)
        die("bad address %s", host);
    for (int i = 3; i < argc; i++) {
        const char *o = argv[i];
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (!strcmp(o, "--rate"))
            G.rate = atof(v);
        else if (!strcmp(o, "--duration"))
            G.duration = atof(v);
        else if (!strcmp(o, "--delay-min"))
            G.delay_min = atoi(v);
        else if (!strcmp(o, "--delay-max"))
            G.delay_max = atoi(v);
        else if (!strcmp(o, "--producers"))
            G.producers = atoi(v);
        else if (!strcmp(o, "--consumers"))
            G.consumers = atoi(v);
        else if (!strcmp(o, "--count"))
            G.count = atoi(v);
        else if (!strcmp(o, "--topics"))
            G.topics = atoi(v);
        else if (!strcmp(o, "--prefix"))
            G.topic_prefix = v;
        else if (!strcmp(o, "--ttr"))
            G.ttr = atoi(v);
        else if (!strcmp(o, "--consumer-topics"))
            G.all_topics = !strcmp(v, "all");
        else if (!strcmp(o, "--samples"))
            G.samples_file = v;
        else if (!strcmp(o, "--series"))
            G.series_file = v;
        else if (!strcmp(o, "--jobs"))
            G.jobs = atoll(v);
        else if (!strcmp(o, "--batch"))
            G.batch = atoi(v);
        else if (!strcmp(o, "--delay"))
            G.delay = atoll(v);
        else if (!strcmp(o, "--body-bytes"))
            G.body_bytes = atoi(v);
        else if (!strcmp(o, "--groups"))
            G.groups = atoll(v);
        else if (!strcmp(o, "--max-seconds"))
            G.max_seconds = atof(v);
        else if (!strcmp(o, "--concurrency"))
            G.concurrency = atoi(v);
        else if (!strcmp(o, "--timeout"))
            G.route_timeout = atoi(v);
        else if (!strcmp(o, "--queue"))
            G.queue = v;
        else if (!strcmp(o, "--prefetch"))
            G.prefetch = atoi(v);
        else if (!strcmp(o, "--grace"))
            G.grace = atof(v);
        else if (!strcmp(o, "--finish-next"))
            G.finish_next = atoi(v);
        else if (!strcmp(o, "--finish"))
            G.finish = atoi(v);
        else if (!strcmp(o, "--from-ms"))
            G.from_ms = atof(v);
        else if (!strcmp(o, "--until-ms"))
            G.until_ms = atof(v);
        else if (!strcmp(o, "--amqp")) {
            const char *c2 = strrchr(v, ':');
            if (c2 == NULL || (size_t)(c2 - v) >= sizeof G.amqp_host)
                usage();
            memcpy(G.amqp_host, v, (size_t)(c2 - v));
            G.amqp_host[c2 - v] = '\0';
            G.amqp_port = atoi(c2 + 1);
        } else
            usage();
    }
    if (G.topics < 1 || G.count < 1 || G.count > 100 || G.delay_max < G.delay_min || G.rate <= 0)
        die("bad options");
    /* a route that falls behind still delivers: give its backlog time to arrive (and its
     * lateness to be measured) rather than calling its jobs lost */
    if (G.grace < 0)
        G.grace = !strcmp(G.mode, "webhook") || !strcmp(G.mode, "amqp") ? 60.0 : 10.0;
    signal(SIGPIPE, SIG_IGN);
    G.ep = epoll_create1(EPOLL_CLOEXEC);
    if (!strcmp(G.mode, "steady")) {
        if (!G.topic_prefix)
            G.topic_prefix = "lat";
        return run_steady(SINK_NONE);
    }
    if (!strcmp(G.mode, "webhook")) {
        if (!G.topic_prefix)
            G.topic_prefix = "wh";
        return run_steady(SINK_WEBHOOK);
    }
    if (!strcmp(G.mode, "amqp")) {
        if (!G.topic_prefix)
            G.topic_prefix = "amqp";
        if (!G.amqp_host[0])
            die("amqp: --amqp HOST:PORT is required");
        return run_steady(SINK_AMQP);
    }
    if (!strcmp(G.mode, "whdrain")) {
        if (!G.topic_prefix)
            G.topic_prefix = "whd";
        return run_whdrain();
    }
    if (!strcmp(G.mode, "drain")) {
        if (!G.topic_prefix)
            G.topic_prefix = "drain";
        return run_drain();
    }
    if (!strcmp(G.mode, "bucket")) {
        if (!G.topic_prefix)
            G.topic_prefix = "far";
        return run_bucket();
    }
    if (!strcmp(G.mode, "fill")) {
        if (!G.topic_prefix)
            G.topic_prefix = "fill";
        return run_fill();
    }
    usage();
    return 2;
}
