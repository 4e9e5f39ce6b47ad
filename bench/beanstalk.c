/* beanstalk.c — the beanstalkd load tool behind figure 18 (bench/run.sh builds it).
 *
 *   beanstalk put      HOST:PORT [options]   put throughput: --conns connections put as fast as they can
 *   beanstalk lateness HOST:PORT [options]   steady producers + reserving consumers: lateness of delayed jobs
 *
 * One thread, epoll, plain non-blocking sockets speaking beanstalkd's text protocol
 * (doc/protocol.txt): `use` and `watch`/`ignore` once per connection, then `put <pri> <delay>
 * <ttr> <bytes>`, `reserve-with-timeout` and `delete`. Each connection has at most one command in
 * flight, as bench/lateness.c does over HTTP. Anything the tool does not expect is counted as an
 * error (and the first few printed) rather than passed over.
 *
 * put: every connection (`use` --tube) puts jobs of --body-bytes with --delay seconds (3600 by
 * default: like bench/push.lua's pushes, due in an hour, so no job moves during the run) one after
 * the other for --duration seconds. Jobs/s = INSERTED answers received within the duration ÷ the
 * duration.
 *
 * lateness: producers put on an open-loop schedule (job k is due to be sent at t0 + k/rate; a
 * producer connection that is free takes the next job that is due), every job with the same
 * --delay (beanstalkd's delays are whole seconds), a body of --body-bytes that carries its due
 * time: the producer's wall clock when it sends the put, plus the delay, in ms (with a fraction).
 * Consumers `reserve-with-timeout 1` and `delete` each job before reserving again. Lateness = the
 * consumer's wall clock when the RESERVED answer is complete − the due time in the body, in ms.
 * Every job is sampled (one delay for all: the due rate is steady from the first due time on, no
 * ramp to leave out). Every put job must come back once (by its sequence number in the body; a
 * second reservation is a duplicate, counted, not sampled); the run ends when each has, or
 * --grace seconds after the last put's answer + the delay.
 *
 * Output: key=value lines on stdout (bench/run.sh parses them as it parses bench/lateness.c's);
 * diagnostics on stderr; with --samples FILE the sorted latenesses as "lateness_ms fraction" lines
 * (the CDF). Exit status 0 when the run is sound, 3 when jobs were lost or commands failed. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BENCH_TOOL "beanstalk"
#include "benchutil.h"

enum role { PRODUCER, CONSUMER };
enum cmd { C_NONE, C_PUT, C_RESERVE, C_DELETE };

struct conn {
    int fd;
    enum role role;
    enum cmd cmd; /* what is in flight */
    char *out;    /* command bytes not yet written */
    size_t outlen, outoff;
    char *in;
    size_t inlen, incap;
    int want_out;          /* EPOLLOUT registered */
    double sent_mono;      /* when the command went out */
    unsigned long long id; /* consumer: the reserved job being deleted */
};

static struct {
    /* options */
    const char *mode, *tube, *samples_file;
    struct sockaddr_in addr;
    double rate, duration, grace, max_seconds;
    int delay, producers, consumers, conns, body_bytes, ttr, pri;
    /* state */
    int ep;
    struct conn *c;
    int nconns;
    int stopping; /* put: the duration is over, answers no longer count */
    double t0_mono, last_push_done;
    long long total, issued, pushed_ok, push_errors, received, duplicates, finished, finish_errors, get_errors;
    long long max_behind, reported;
    unsigned char *seen; /* lateness: job k has been received */
    struct dvec lat, push_lat;
} G = {
    .tube = "hgbench",
    .rate = 1000,
    .duration = 10,
    .grace = 10,
    .max_seconds = 600,
    .delay = -1,
    .producers = 128,
    .consumers = 64,
    .conns = 64,
    .body_bytes = 100,
    .ttr = 60,
    .pri = 1024,
};

/* The first few unexpected answers are printed: a run that counts errors says which. */
static void report(const char *what, const char *line, size_t len)
{
    if (G.reported++ < 5)
        fprintf(stderr, "beanstalk: %s: unexpected answer '%.*s'\n", what, (int)(len > 80 ? 80 : len), line);
}

/* ------------------------------------------------------------------ connections */

/* A blocking command/answer at set-up time (use, watch, ignore): the answer must start with want. */
static void setup_cmd(int fd, const char *cmd, const char *want)
{
    size_t len = strlen(cmd);
    if (write(fd, cmd, len) != (ssize_t)len)
        die("set-up '%s': write: %s", cmd, strerror(errno));
    char line[256];
    size_t n = 0;
    while (n < 2 || line[n - 2] != '\r' || line[n - 1] != '\n') {
        if (n == sizeof line - 1)
            die("set-up '%s': answer too long", cmd);
        ssize_t k = read(fd, line + n, 1);
        if (k <= 0)
            die("set-up '%s': %s", cmd, k == 0 ? "connection closed" : strerror(errno));
        n++;
    }
    line[n - 2] = '\0';
    if (strncmp(line, want, strlen(want)) != 0)
        die("set-up '%s': answered '%s', not '%s...'", cmd, line, want);
}

static void conn_open(struct conn *c, enum role role)
{
    c->role = role;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die("socket: %s", strerror(errno));
    if (connect(c->fd, (struct sockaddr *)&G.addr, sizeof G.addr) < 0)
        die("connect: %s", strerror(errno));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char cmd[300];
    if (role == PRODUCER) {
        snprintf(cmd, sizeof cmd, "use %s\r\n", G.tube);
        setup_cmd(c->fd, cmd, "USING ");
    } else {
        snprintf(cmd, sizeof cmd, "watch %s\r\n", G.tube);
        setup_cmd(c->fd, cmd, "WATCHING ");
        setup_cmd(c->fd, "ignore default\r\n", "WATCHING 1");
    }
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(G.ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        die("epoll_ctl: %s", strerror(errno));
}

static void watch_out(struct conn *c, int out)
{
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(G.ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die("epoll_ctl: %s", strerror(errno));
    c->want_out = out;
}

static void flush_out(struct conn *c)
{
    while (c->outoff < c->outlen) {
        ssize_t k = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (!c->want_out)
                    watch_out(c, 1);
                return;
            }
            die("write: %s", strerror(errno));
        }
        c->outoff += (size_t)k;
    }
    c->outlen = c->outoff = 0;
    if (c->want_out)
        watch_out(c, 0);
}

/* Sends one command (text, then an optional body and its CRLF, as put wants). */
static void send_cmd(struct conn *c, enum cmd cmd, const char *text, const char *body, size_t body_len)
{
    if (c->cmd != C_NONE || c->outlen)
        die("internal: command while busy");
    size_t tlen = strlen(text), need = tlen + body_len + 2;
    c->out = realloc(c->out, need);
    if (c->out == NULL)
        die("out of memory");
    memcpy(c->out, text, tlen);
    c->outlen = tlen;
    if (body) {
        memcpy(c->out + tlen, body, body_len);
        memcpy(c->out + tlen + body_len, "\r\n", 2);
        c->outlen += body_len + 2;
    }
    c->outoff = 0;
    c->cmd = cmd;
    c->sent_mono = mono();
    flush_out(c);
}

/* ------------------------------------------------------------------ commands */

static void producer_put(struct conn *c)
{
    long long k = G.issued++;
    double due = G.delay > 0 ? real_ms() + G.delay * 1e3 : 0;
    char body[4096], head[96];
    int n = snprintf(body, sizeof body, "due=%.3f seq=%lld ", due, k);
    if (n < 0 || n > G.body_bytes)
        die("--body-bytes %d is too small for the due time and sequence number", G.body_bytes);
    memset(body + n, 'x', (size_t)(G.body_bytes - n));
    snprintf(head, sizeof head, "put %d %d %d %d\r\n", G.pri, G.delay, G.ttr, G.body_bytes);
    send_cmd(c, C_PUT, head, body, (size_t)G.body_bytes);
}

static void consumer_reserve(struct conn *c)
{
    send_cmd(c, C_RESERVE, "reserve-with-timeout 1\r\n", NULL, 0);
}

static void on_reserved(struct conn *c, unsigned long long id, const char *body, size_t len)
{
    double now = real_ms();
    char tmp[128];
    size_t m = len < sizeof tmp - 1 ? len : sizeof tmp - 1;
    memcpy(tmp, body, m);
    tmp[m] = '\0';
    double due;
    long long seq;
    if (sscanf(tmp, "due=%lf seq=%lld ", &due, &seq) != 2 || seq < 0 || seq >= G.total) {
        report("reserve (body)", body, len);
        G.get_errors++;
    } else if (G.seen[seq]) {
        G.duplicates++;
    } else {
        G.seen[seq] = 1;
        G.received++;
        dpush(&G.lat, now - due);
    }
    c->id = id;
    char cmd[64];
    snprintf(cmd, sizeof cmd, "delete %llu\r\n", id);
    send_cmd(c, C_DELETE, cmd, NULL, 0);
}

/* One complete answer (line without its CRLF; for RESERVED, its body) to the command in flight. */
static void on_answer(struct conn *c, const char *line, size_t len, const char *body, size_t blen)
{
    enum cmd cmd = c->cmd;
    c->cmd = C_NONE;
    if (cmd == C_PUT) {
        double now = mono();
        if (len > 9 && strncmp(line, "INSERTED ", 9) == 0) {
            if (!G.stopping) {
                G.pushed_ok++;
                G.last_push_done = now;
                dpush(&G.push_lat, (now - c->sent_mono) * 1e3);
            }
        } else {
            report("put", line, len);
            G.push_errors++;
        }
        if (strcmp(G.mode, "put") == 0 && !G.stopping)
            producer_put(c);
        return;
    }
    if (cmd == C_RESERVE) {
        unsigned long long id;
        if (body) {
            if (sscanf(line, "RESERVED %llu", &id) != 1)
                die("internal: RESERVED without an id");
            on_reserved(c, id, body, blen);
            return;
        }
        if (!(len == 9 && strncmp(line, "TIMED_OUT", 9) == 0) &&
            !(len == 13 && strncmp(line, "DEADLINE_SOON", 13) == 0)) {
            report("reserve", line, len);
            G.get_errors++;
        }
        consumer_reserve(c);
        return;
    }
    if (cmd == C_DELETE) {
        if (len == 7 && strncmp(line, "DELETED", 7) == 0) {
            G.finished++;
        } else {
            report("delete", line, len);
            G.finish_errors++;
        }
        consumer_reserve(c);
        return;
    }
    report("(nothing in flight)", line, len);
}

/* Reads what is there and handles every complete answer in it. */
static void conn_read(struct conn *c)
{
    for (;;) {
        if (c->incap - c->inlen < 4096) {
            c->incap = c->incap ? c->incap * 2 : 8192;
            c->in = realloc(c->in, c->incap);
            if (c->in == NULL)
                die("out of memory");
        }
        ssize_t k = read(c->fd, c->in + c->inlen, c->incap - c->inlen);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            die("read: %s", strerror(errno));
        }
        if (k == 0)
            die("beanstalkd closed a connection");
        c->inlen += (size_t)k;
    }
    size_t off = 0;
    for (;;) {
        char *eol = memmem(c->in + off, c->inlen - off, "\r\n", 2);
        if (eol == NULL)
            break;
        const char *line = c->in + off;
        size_t len = (size_t)(eol - line), used = len + 2;
        const char *body = NULL;
        size_t blen = 0;
        unsigned long long id;
        if (c->cmd == C_RESERVE && sscanf(line, "RESERVED %llu %zu", &id, &blen) == 2 && len > 9 &&
            strncmp(line, "RESERVED ", 9) == 0) {
            if (c->inlen - off < used + blen + 2)
                break; /* the body is not all here yet */
            body = line + used;
            used += blen + 2;
        }
        off += used;
        on_answer(c, line, len, body, blen);
    }
    memmove(c->in, c->in + off, c->inlen - off);
    c->inlen -= off;
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
            conn_read(c);
    }
}

static void make_conns(int np, int nc)
{
    G.nconns = np + nc;
    G.c = calloc((size_t)G.nconns, sizeof *G.c);
    if (G.c == NULL)
        die("out of memory");
    for (int i = 0; i < G.nconns; i++)
        conn_open(&G.c[i], i < np ? PRODUCER : CONSUMER);
}

/* ------------------------------------------------------------------ modes */

static int run_put(void)
{
    if (G.delay < 0)
        G.delay = 3600;
    make_conns(G.conns, 0);
    G.t0_mono = mono();
    for (int i = 0; i < G.nconns; i++)
        producer_put(&G.c[i]);
    double end = G.t0_mono + G.duration;
    for (double now = mono(); now < end; now = mono())
        poll_once((int)ceil((end - now) * 1e3 < 5 ? (end - now) * 1e3 : 5));
    G.stopping = 1;
    printf("conns=%d\nduration=%.1f\ndelay_s=%d\nbody_bytes=%d\nputs=%lld\nput_errors=%lld\nrate=%.1f\n", G.conns,
           G.duration, G.delay, G.body_bytes, G.pushed_ok, G.push_errors, (double)G.pushed_ok / G.duration);
    print_dist("put_ms", &G.push_lat);
    int ok = G.push_errors == 0 && G.pushed_ok > 0;
    printf("ok=%d\n", ok);
    return ok ? 0 : 3;
}

static int run_lateness(void)
{
    if (G.delay < 0)
        G.delay = 2;
    if (G.delay < 1)
        die("lateness: --delay must be at least 1 s (the due time is the put's time + the delay)");
    G.total = (long long)llround(G.rate * G.duration);
    G.seen = calloc((size_t)G.total + 1, 1);
    if (G.seen == NULL)
        die("out of memory");
    make_conns(G.producers, G.consumers);
    for (int i = G.producers; i < G.nconns; i++)
        consumer_reserve(&G.c[i]);
    double settle = mono() + 0.2; /* the consumers wait in their reserves before the first put */
    while (mono() < settle)
        poll_once(10);

    G.t0_mono = mono();
    int next = 0;
    double deadline = 0;
    for (;;) {
        double now = mono();
        long long due = (long long)((now - G.t0_mono) * G.rate) + 1;
        if (due > G.total)
            due = G.total;
        for (int tries = 0; G.issued < due && tries < G.producers; tries++) {
            struct conn *c = &G.c[next];
            next = (next + 1) % G.producers;
            if (c->cmd == C_NONE)
                producer_put(c);
        }
        if (due - G.issued > G.max_behind)
            G.max_behind = due - G.issued;
        int all_answered = G.issued == G.total && G.pushed_ok + G.push_errors == G.total;
        if (all_answered && deadline == 0)
            deadline = now + G.delay + G.grace;
        if (all_answered && G.received >= G.pushed_ok && G.finished + G.finish_errors >= G.received)
            break;
        if (deadline && now > deadline) {
            fprintf(stderr, "beanstalk: only %lld of %lld put jobs came back within %.0f s of the last put\n",
                    G.received, G.pushed_ok, G.delay + G.grace);
            break;
        }
        if (now - G.t0_mono > G.max_seconds)
            die("lateness: still running after %.0f s", G.max_seconds);
        poll_once(G.issued >= G.total ? 20 : 1);
    }
    double push_secs = G.last_push_done - G.t0_mono;
    long long lost = G.pushed_ok > G.received ? G.pushed_ok - G.received : 0;
    printf("rate_target=%.1f\nduration=%.1f\ndelay_s=%d\nbody_bytes=%d\nproducers=%d\nconsumers=%d\n", G.rate,
           G.duration, G.delay, G.body_bytes, G.producers, G.consumers);
    printf("sent=%lld\npushed=%lld\npush_errors=%lld\npush_rate=%.1f\nmax_behind=%lld\n", G.issued, G.pushed_ok,
           G.push_errors, push_secs > 0 ? (double)G.pushed_ok / push_secs : 0.0, G.max_behind);
    printf("received=%lld\nlost=%lld\nduplicates=%lld\nfinished=%lld\nfinish_errors=%lld\nget_errors=%lld\n",
           G.received, lost, G.duplicates, G.finished, G.finish_errors, G.get_errors);
    print_dist("push_ms", &G.push_lat);
    print_dist("lat_ms", &G.lat);
    if (G.samples_file) {
        FILE *f = fopen(G.samples_file, "w");
        if (f == NULL)
            die("%s: %s", G.samples_file, strerror(errno));
        for (size_t i = 0; i < G.lat.n; i++)
            fprintf(f, "%.3f %.6f\n", G.lat.v[i], (double)(i + 1) / (double)G.lat.n);
        fclose(f);
    }
    int ok = lost == 0 && G.duplicates == 0 && G.push_errors == 0 && G.get_errors == 0 && G.finish_errors == 0;
    printf("ok=%d\n", ok);
    if (!ok)
        fprintf(stderr,
                "beanstalk: FAILED: %lld of %lld put jobs received, %lld duplicates, %lld put errors, %lld "
                "reserve errors, %lld delete errors\n",
                G.received, G.pushed_ok, G.duplicates, G.push_errors, G.get_errors, G.finish_errors);
    return ok ? 0 : 3;
}

/* ------------------------------------------------------------------ main */

static void usage(void)
{
    fprintf(stderr,
            "usage: beanstalk put|lateness HOST:PORT [options]\n"
            "  put:      --conns N [64] --duration S [10] --delay S [3600] --body-bytes B [100] --tube T\n"
            "  lateness: --rate R [1000] --duration S [10] --delay S [2] --producers N [128] --consumers N [64]\n"
            "            --body-bytes B [100] --grace S [10] --samples FILE --max-seconds S [600] --tube T\n");
    exit(2);
}

static double num_arg(const char *opt, const char *v)
{
    char *end;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || !isfinite(x) || x < 0)
        die("%s: '%s' is not a number >= 0", opt, v);
    return x;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        usage();
    G.mode = argv[1];
    if (strcmp(G.mode, "put") != 0 && strcmp(G.mode, "lateness") != 0)
        usage();
    char host[64];
    int port;
    if (sscanf(argv[2], "%63[^:]:%d", host, &port) != 2 || port <= 0 || port > 65535)
        die("'%s' is not HOST:PORT", argv[2]);
    G.addr.sin_family = AF_INET;
    G.addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &G.addr.sin_addr) != 1)
        die("'%s' is not an IPv4 address", host);
    for (int i = 3; i < argc; i++) {
        const char *o = argv[i];
        if (i + 1 >= argc)
            die("%s needs a value", o);
        const char *v = argv[++i];
        if (strcmp(o, "--rate") == 0)
            G.rate = num_arg(o, v);
        else if (strcmp(o, "--duration") == 0)
            G.duration = num_arg(o, v);
        else if (strcmp(o, "--delay") == 0)
            G.delay = (int)num_arg(o, v);
        else if (strcmp(o, "--producers") == 0)
            G.producers = (int)num_arg(o, v);
        else if (strcmp(o, "--consumers") == 0)
            G.consumers = (int)num_arg(o, v);
        else if (strcmp(o, "--conns") == 0)
            G.conns = (int)num_arg(o, v);
        else if (strcmp(o, "--body-bytes") == 0)
            G.body_bytes = (int)num_arg(o, v);
        else if (strcmp(o, "--grace") == 0)
            G.grace = num_arg(o, v);
        else if (strcmp(o, "--max-seconds") == 0)
            G.max_seconds = num_arg(o, v);
        else if (strcmp(o, "--samples") == 0)
            G.samples_file = v;
        else if (strcmp(o, "--tube") == 0)
            G.tube = v;
        else
            die("unknown option %s", o);
    }
    if (G.body_bytes < 48 || G.body_bytes > 4000)
        die("--body-bytes must be 48-4000");
    if (G.rate <= 0 || G.duration <= 0 || G.conns < 1 || G.producers < 1 || G.consumers < 1)
        die("--rate, --duration, --conns, --producers and --consumers must be positive");
    if (strlen(G.tube) > 200)
        die("--tube is too long");
    G.ep = epoll_create1(EPOLL_CLOEXEC);
    if (G.ep < 0)
        die("epoll_create1: %s", strerror(errno));
    return strcmp(G.mode, "put") == 0 ? run_put() : run_lateness();
}
