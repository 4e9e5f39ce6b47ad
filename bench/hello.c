/* hello.c — the bare libevent HTTP server that figure 1 compares hourglassd against.
 *
 *   hello ADDR:PORT THREADS
 *
 * Built the way hourglassd's front end is (src/process/main.c, src/http.c): one thread per worker,
 * each with its own event_base, evhttp and listening socket on the same address
 * (SO_REUSEPORT, so the kernel spreads connections over the threads; up to fecaa63 this
 * server shared one socket between its threads, and in about a third of the runs one thread
 * won every accept and the server ran on one core: 58,000-63,000 req/s instead of
 * 74,000-81,000, which made the push/hello ratio read up to a third high). Every request — whatever its method, path or
 * body — is answered 200 with a fixed small JSON body shaped like a push answer. It reads the request body (evhttp
 * does) and does nothing else: no parsing, no Redis, no MySQL. The ratio hourglass/hello therefore says how much of the
 * bare HTTP stack's throughput is left once the queue's own work is added. Its loops are
 * configured as hourglassd's HTTP workers' are (src/process/worker.c: epoll's changelist): the
 * flag alone made this server ~16 % faster (80,000 -> 95,000 req/s), and a baseline without it
 * would credit the daemon with what is libevent's. Runs until SIGINT/SIGTERM. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char BODY[] = "{\"id\":\"382309563869507588\",\"runAt\":1795217002994}\n";

struct worker {
    struct event_base *base;
    struct evhttp *http;
    pthread_t thread;
};

static void on_request(struct evhttp_request *req, void *arg)
{
    (void)arg;
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, BODY, sizeof BODY - 1);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
}

static void *run(void *arg)
{
    struct worker *w = arg;
    event_base_dispatch(w->base);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hello ADDR:PORT THREADS\n");
        return 2;
    }
    char host[64];
    const char *colon = strrchr(argv[1], ':');
    int nthreads = atoi(argv[2]);
    if (colon == NULL || (size_t)(colon - argv[1]) >= sizeof host || nthreads < 1 || nthreads > 256) {
        fprintf(stderr, "hello: bad arguments\n");
        return 2;
    }
    memcpy(host, argv[1], (size_t)(colon - argv[1]));
    host[colon - argv[1]] = '\0';

    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons((unsigned short)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
        fprintf(stderr, "hello: bad address %s\n", host);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads();

    struct worker *ws = calloc((size_t)nthreads, sizeof *ws);
    for (int i = 0; i < nthreads; i++) {
        struct worker *w = &ws[i];
        struct event_config *ec = event_config_new();
        if (ec)
            event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
        w->base = ec ? event_base_new_with_config(ec) : NULL;
        if (ec)
            event_config_free(ec);
        w->http = w->base ? evhttp_new(w->base) : NULL;
        if (!w->base || !w->http)
            return 1;
        evhttp_set_gencb(w->http, on_request, w);
        evhttp_set_max_body_size(w->http, 65536);
        evhttp_set_timeout(w->http, 60);
        evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
            bind(fd, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(fd, 4096) < 0) {
            fprintf(stderr, "hello: cannot listen on %s: %s\n", argv[1], strerror(errno));
            return 1;
        }
        if (evhttp_accept_socket_with_handle(w->http, fd) == NULL) {
            fprintf(stderr, "hello: evhttp_accept_socket failed\n");
            return 1;
        }
    }
    /* The workers inherit a mask that blocks SIGINT/SIGTERM; the main thread waits for one. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&ws[i].thread, NULL, run, &ws[i]);
    int sig;
    sigwait(&set, &sig);
    _exit(0); /* a benchmark helper: nothing to flush */
}
