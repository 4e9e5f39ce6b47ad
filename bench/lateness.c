/* lateness.c — the load tool behind figures 2, 3, 4, 5 and 6 (bench/run.sh builds it).
 *
 *   lateness steady HOST:PORT [options]   steady producers + long-polling consumers (figures 2, 4)
 *   lateness drain  HOST:PORT [options]   get + finish as fast as possible (figure 3)
 *   lateness fill   HOST:PORT [options]   array pushes, N jobs (backlogs for figures 3-6)
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
#include <signal.h>
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

enum role { PRODUCER, CONSUMER, FILLER };
enum req { R_NONE, R_PUSH, R_GET, R_FINISH };

struct conn {
    int fd;
    enum role role;
    int index;
    enum req req;      /* what is in flight */
    char *out;         /* request bytes not yet written */
    size_t outlen, outoff;
    char *in;
    size_t inlen, incap;
    int want_out;      /* EPOLLOUT registered */
    double sent_mono;  /* when the request went out */
    long long job;     /* producer: job number in flight; filler: jobs in the request */
    /* consumer: ids received in the last answer, finished one by one */
    char ids[100][24];
    int nids, nfin;
};

struct dvec {
    double *v;
    size_t n, cap;
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
    int all_topics;     /* consumers ask for every topic (rotated) instead of one each */
    const char *samples_file, *series_file, *topic_prefix;
    long long jobs;     /* fill: jobs to push; drain: jobs to finish */
    int batch;
    long long delay;    /* fill: delay of every job */
    int body_bytes;     /* fill: size of each job's body (a JSON string) */
    int ttr;
    double max_seconds;
    /* state */
    int ep;
    struct conn *conns;
    int nconns;
    double t0_mono, t0_real;
    long long issued, pushed_ok, push_errors, received, finished, finish_errors, get_errors, redelivered;
    long long empty_gets, fill_sent;
    double last_push_done, last_finish_done, first_push_sent;
    long long max_behind;
    struct dvec lat, push_lat, series_t, series_v;
    char *fill_body;
    size_t fill_body_len;
} G = {
    .rate = 1000, .duration = 10, .delay_min = 1000, .delay_max = 3000, .producers = 32, .consumers = 16,
    .count = 1, .topics = 4, .poll_timeout = 5, .topic_prefix = NULL, .jobs = 100000, .batch = 1000,
    .delay = 0, .body_bytes = 16, .ttr = 60000, .max_seconds = 600,
};

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "lateness: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double real_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void dpush(struct dvec *d, double x)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 4096;
        d->v = realloc(d->v, d->cap * sizeof *d->v);
        if (d->v == NULL)
            die("out of memory");
    }
    d->v[d->n++] = x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted vector. */
static double pct(const struct dvec *d, double q)
{
    if (d->n == 0)
        return NAN;
    size_t k = (size_t)ceil(q * (double)d->n);
    if (k < 1)
        k = 1;
    if (k > d->n)
        k = d->n;
    return d->v[k - 1];
}

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

static void consumer_get(struct conn *c)
{
    char path[2048];
    int off = snprintf(path, sizeof path, "/get/");
    for (int t = 0; t < (G.all_topics ? G.topics : 1); t++) {
        char topic[160];
        topic_name(topic, sizeof topic, (c->index + t) % G.topics); /* rotated: spread first choices */
        off += snprintf(path + off, sizeof path - (size_t)off, "%s%s", t ? "," : "", topic);
    }
    snprintf(path + off, sizeof path - (size_t)off, "?timeout=%d&count=%d", G.poll_timeout, G.count);
    send_request(c, R_GET, "GET", path, NULL, 0);
}

static void consumer_next(struct conn *c)
{
    if (c->nfin < c->nids) {
        char path[96];
        snprintf(path, sizeof path, "/finish?id=%s", c->ids[c->nfin]);
        send_request(c, R_FINISH, "GET", path, NULL, 0);
    } else {
        c->nids = c->nfin = 0;
        consumer_get(c);
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
    size_t cap = (size_t)n * (G.fill_body_len + 200) + 16;
    char *body = malloc(cap);
    if (body == NULL)
        die("out of memory");
    size_t off = 0;
    body[off++] = '[';
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(body + off, cap - off, "%s{\"topic\":\"%s\",\"body\":%s,\"delay\":%lld}", i ? "," : "",
                                topic, G.fill_body, G.delay);
    body[off++] = ']';
    G.fill_sent += n;
    c->job = n;
    send_request(c, R_PUSH, "POST", "/push", body, off);
    free(body);
}

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
        if (status == 200) {
            on_jobs(c, body, blen, real_ms());
        } else if (status == 204) {
            G.empty_gets++;
        } else if (G.get_errors++ < 5) {
            fprintf(stderr, "lateness: get answered %d: %.*s\n", status, (int)(blen > 300 ? 300 : blen), body);
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
                c->role == PRODUCER ? "producer" : c->role == CONSUMER ? "consumer" : "filler", (int)c->req);
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

static void print_dist(const char *prefix, struct dvec *d)
{
    qsort(d->v, d->n, sizeof *d->v, cmp_double);
    printf("%s_n=%zu\n%s_p50=%.3f\n%s_p90=%.3f\n%s_p99=%.3f\n%s_p999=%.3f\n%s_max=%.3f\n", prefix, d->n, prefix,
           pct(d, 0.50), prefix, pct(d, 0.90), prefix, pct(d, 0.99), prefix, pct(d, 0.999), prefix,
           d->n ? d->v[d->n - 1] : NAN);
}

static int run_steady(void)
{
    make_conns(G.producers, G.consumers, 0);
    for (int i = 0; i < G.nconns; i++)
        if (G.conns[i].role == CONSUMER)
            consumer_get(&G.conns[i]);
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
            deadline = now + G.delay_max / 1e3 + 10.0;
        if (all_answered && G.received >= G.pushed_ok && G.finished + G.finish_errors >= G.received)
            break;
        if (deadline && now > deadline) {
            fprintf(stderr, "lateness: only %lld of %lld pushed jobs came back within %.0f s of the last push\n",
                    G.received, G.pushed_ok, G.delay_max / 1e3 + 10.0);
            break;
        }
        if (now - G.t0_mono > G.max_seconds)
            die("steady: still running after %.0f s", G.max_seconds);
        int wait_ms = 1;
        if (G.issued >= total)
            wait_ms = 20;
        poll_once(wait_ms);
    }
    double push_secs = G.last_push_done - G.t0_mono;
    printf("rate_target=%.1f\nduration=%.1f\npushed=%lld\npush_errors=%lld\npush_rate=%.1f\n", G.rate, G.duration,
           G.pushed_ok, G.push_errors, push_secs > 0 ? (double)G.pushed_ok / push_secs : 0.0);
    printf("received=%lld\nfinished=%lld\nfinish_errors=%lld\nget_errors=%lld\nredelivered=%lld\nmax_behind=%lld\n",
           G.received, G.finished, G.finish_errors, G.get_errors, G.redelivered, G.max_behind);
    printf("window_lo_s=%.3f\nwindow_hi_s=%.3f\n", G.delay_max / 1e3, G.duration + G.delay_min / 1e3);
    print_dist("push_ms", &G.push_lat);
    /* series before sorting */
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
    int ok = G.received >= G.pushed_ok && G.push_errors == 0 && G.get_errors == 0 && G.finish_errors == 0;
    printf("ok=%d\n", ok);
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
        consumer_get(&G.conns[i]);
    /* A 204 means nothing was ready for a whole long-poll timeout: once every consumer has
     * had one, the backlog is gone (short of --jobs: the run fails below). */
    while (G.finished + G.finish_errors < G.jobs && G.empty_gets < G.consumers) {
        poll_once(50);
        if (mono() - G.t0_mono > G.max_seconds)
            die("drain: still running after %.0f s (%lld finished)", G.max_seconds, G.finished);
    }
    double secs = G.last_finish_done - G.t0_mono;
    printf("jobs=%lld\nfinished=%lld\nreceived=%lld\nfinish_errors=%lld\nget_errors=%lld\nseconds=%.3f\nrate=%.1f\n",
           G.jobs, G.finished, G.received, G.finish_errors, G.get_errors, secs,
           secs > 0 ? (double)G.finished / secs : 0.0);
    int ok = G.finished == G.jobs && G.get_errors == 0 && G.finish_errors == 0;
    printf("ok=%d\n", ok);
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
            "usage: lateness steady|drain|fill HOST:PORT [options]\n"
            "  steady: --rate N/s --duration S --delay-min MS --delay-max MS --producers N --consumers N\n"
            "          --count K --topics T --prefix P --ttr MS --samples FILE --series FILE\n"
            "          --consumer-topics one|all\n"
            "  drain:  --jobs N --consumers N --count K --topics T --prefix P --consumer-topics one|all\n"
            "  fill:   --jobs N --batch B --producers N --topics T --prefix P --delay MS --body-bytes B\n"
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
        if (!strcmp(o, "--rate")) G.rate = atof(v);
        else if (!strcmp(o, "--duration")) G.duration = atof(v);
        else if (!strcmp(o, "--delay-min")) G.delay_min = atoi(v);
        else if (!strcmp(o, "--delay-max")) G.delay_max = atoi(v);
        else if (!strcmp(o, "--producers")) G.producers = atoi(v);
        else if (!strcmp(o, "--consumers")) G.consumers = atoi(v);
        else if (!strcmp(o, "--count")) G.count = atoi(v);
        else if (!strcmp(o, "--topics")) G.topics = atoi(v);
        else if (!strcmp(o, "--prefix")) G.topic_prefix = v;
        else if (!strcmp(o, "--ttr")) G.ttr = atoi(v);
        else if (!strcmp(o, "--consumer-topics")) G.all_topics = !strcmp(v, "all");
        else if (!strcmp(o, "--samples")) G.samples_file = v;
        else if (!strcmp(o, "--series")) G.series_file = v;
        else if (!strcmp(o, "--jobs")) G.jobs = atoll(v);
        else if (!strcmp(o, "--batch")) G.batch = atoi(v);
        else if (!strcmp(o, "--delay")) G.delay = atoll(v);
        else if (!strcmp(o, "--body-bytes")) G.body_bytes = atoi(v);
        else if (!strcmp(o, "--max-seconds")) G.max_seconds = atof(v);
        else usage();
    }
    if (G.topics < 1 || G.count < 1 || G.count > 100 || G.delay_max < G.delay_min || G.rate <= 0)
        die("bad options");
    signal(SIGPIPE, SIG_IGN);
    G.ep = epoll_create1(EPOLL_CLOEXEC);
    if (!strcmp(G.mode, "steady")) {
        if (!G.topic_prefix) G.topic_prefix = "lat";
        return run_steady();
    }
    if (!strcmp(G.mode, "drain")) {
        if (!G.topic_prefix) G.topic_prefix = "drain";
        return run_drain();
    }
    if (!strcmp(G.mode, "fill")) {
        if (!G.topic_prefix) G.topic_prefix = "fill";
        return run_fill();
    }
    usage();
    return 2;
}
