/* test_whclient.c — src/delivery/whclient.h: URL checks, and the client against real receivers.
 *
 * The receivers are evhttp servers on 127.0.0.1 port 0, on the same event_base as the client
 * (one plain, one TLS with a self-signed certificate made here with the OpenSSL API and
 * written to a temporary directory as the client's ca_file). Host names resolve through an
 * evdns base that reads a hosts file of our own (receiver.test and wrong.test are 127.0.0.1),
 * so names, SNI and the host name check run without a network. The servers count the
 * connections they accept (their bufferevent callback runs once per connection), so keep-alive
 * and the connection cap are checked from the receiving side. Tests wait for events by running
 * the loop until a condition holds, with a deadline that fails the test instead of hanging. */
#include "delivery/whclient.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- a self-signed certificate, made once ---- */

static char TMPDIR_[64];
static char CA_FILE[128];
static char HOSTS_FILE[128];
static EVP_PKEY *KEY;
static X509 *CERT;

static void add_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL || X509_add_ext(x, ext, -1) != 1) {
        fprintf(stderr, "test_whclient: extension %s\n", value);
        exit(2);
    }
    X509_EXTENSION_free(ext);
}

static void make_certificate(void)
{
    KEY = EVP_EC_gen("P-256");
    CERT = X509_new();
    if (KEY == NULL || CERT == NULL) {
        fprintf(stderr, "test_whclient: cannot make a key\n");
        exit(2);
    }
    X509_set_version(CERT, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(CERT), 1);
    X509_gmtime_adj(X509_getm_notBefore(CERT), -3600);
    X509_gmtime_adj(X509_getm_notAfter(CERT), 86400);
    X509_set_pubkey(CERT, KEY);
    X509_NAME *name = X509_get_subject_name(CERT);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"hourglass test receiver", -1, -1, 0);
    X509_set_issuer_name(CERT, name);
    add_ext(CERT, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(CERT, NID_key_usage, "critical,digitalSignature,keyCertSign");
    add_ext(CERT, NID_subject_alt_name, "DNS:receiver.test,IP:127.0.0.1");
    if (X509_sign(CERT, KEY, EVP_sha256()) == 0) {
        fprintf(stderr, "test_whclient: cannot sign\n");
        exit(2);
    }
    snprintf(TMPDIR_, sizeof TMPDIR_, "/tmp/test_whclient.XXXXXX");
    if (mkdtemp(TMPDIR_) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
    snprintf(CA_FILE, sizeof CA_FILE, "%s/ca.pem", TMPDIR_);
    snprintf(HOSTS_FILE, sizeof HOSTS_FILE, "%s/hosts", TMPDIR_);
    FILE *f = fopen(CA_FILE, "w");
    if (f == NULL || PEM_write_X509(f, CERT) != 1 || fclose(f) != 0) {
        perror("ca.pem");
        exit(2);
    }
    f = fopen(HOSTS_FILE, "w");
    if (f == NULL || fputs("127.0.0.1 receiver.test wrong.test\n", f) < 0 || fclose(f) != 0) {
        perror("hosts");
        exit(2);
    }
}

static void remove_certificate(void)
{
    unlink(CA_FILE);
    unlink(HOSTS_FILE);
    rmdir(TMPDIR_);
    X509_free(CERT);
    EVP_PKEY_free(KEY);
}

/* ---- the receivers ---- */

#define MAX_PARKED  64
#define ECHO_MAX    (1 << 20)
#define MAX_HEADERS 32
#define MAX_WATCH   16

static struct receiver {
    struct event_base *base;
    struct evdns_base *dns;
    struct evhttp *http, *https;
    SSL_CTX *ssl;
    int port, tls_port;
    int accepted;      /* connections accepted, both servers */
    int requests;      /* requests handled */
    int server_closed; /* server-side connections that saw their close */
    int hang_hits, close_hits, close_once_hits;
    int hang_closed; /* hung connections the client closed */
    struct event *watch[MAX_WATCH];
    int nwatch;
    struct evhttp_connection *last_conn; /* of the last request (valid while the test keeps it open) */
    /* /echo */
    char uri[4096];
    int method;
    unsigned char *body;
    size_t body_len;
    int nheaders;
    char hname[MAX_HEADERS][64], hvalue[MAX_HEADERS][256];
    /* /park: held until park_batch of them wait, then all answered */
    struct evhttp_request *parked[MAX_PARKED];
    int nparked, peak_parked, park_batch;
    int order[MAX_PARKED], norder;
} R;

static struct bufferevent *plain_bev(struct event_base *base, void *arg)
{
    R.accepted++;
    return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
}

static struct bufferevent *tls_bev(struct event_base *base, void *arg)
{
    R.accepted++;
    SSL *ssl = SSL_new(R.ssl);
    return bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
}

static void server_conn_closed(struct evhttp_connection *evcon, void *arg)
{
    R.server_closed++;
    if (R.last_conn == evcon)
        R.last_conn = NULL;
}

/* evhttp stops reading a connection while its request waits for an answer, so it does not
 * see the client go: watch the socket ourselves (reading and dropping whatever comes, as
 * nobody else reads it) and count the close. */
static void on_hung_readable(evutil_socket_t fd, short what, void *arg)
{
    struct event **ev = arg;
    char buf[4096];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        break; /* 0: closed; another error: broken */
    }
    R.hang_closed++;
    event_free(*ev);
    *ev = NULL;
}

static void watch_for_close(struct evhttp_connection *evcon)
{
    ck_assert_int_lt(R.nwatch, MAX_WATCH);
    struct event **slot = &R.watch[R.nwatch++];
    evutil_socket_t fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
    *slot = event_new(R.base, fd, EV_READ | EV_PERSIST, on_hung_readable, slot);
    ck_assert_ptr_nonnull(*slot);
    ck_assert_int_eq(event_add(*slot, NULL), 0);
}

static void drop_conn(evutil_socket_t fd, short what, void *arg)
{
    evhttp_connection_free(arg);
}

/* Close the request's connection without an answer, from the loop (not inside evhttp's call). */
static void close_without_answer(struct evhttp_request *req)
{
    struct timeval zero = {0, 0};
    event_base_once(R.base, -1, EV_TIMEOUT, drop_conn, evhttp_request_get_connection(req), &zero);
}

static int query_int(struct evhttp_request *req, const char *key, int dflt)
{
    struct evkeyvalq q;
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    int v = dflt;
    if (query != NULL && evhttp_parse_query_str(query, &q) == 0) {
        const char *s = evhttp_find_header(&q, key);
        if (s != NULL)
            v = atoi(s);
        evhttp_clear_headers(&q);
    }
    return v;
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)((i * 7) % 251);
}

static void handle(struct evhttp_request *req, void *arg)
{
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct evbuffer *out = evhttp_request_get_output_buffer(req);
    R.requests++;
    R.last_conn = evcon;
    evhttp_connection_set_closecb(evcon, server_conn_closed, NULL);
    if (path == NULL)
        path = "/";
    if (strcmp(path, "/ok") == 0) {
        evbuffer_add_printf(out, "ok");
        evhttp_send_reply(req, 200, "OK", NULL);
    } else if (strcmp(path, "/status500") == 0) {
        evbuffer_add_printf(out, "boom");
        evhttp_send_reply(req, 500, "Internal Server Error", NULL);
    } else if (strcmp(path, "/bye") == 0) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        evhttp_send_reply(req, 200, "OK", NULL);
    } else if (strcmp(path, "/hang") == 0) {
        R.hang_hits++; /* never answered; freed with its connection */
        watch_for_close(evcon);
    } else if (strcmp(path, "/close") == 0) {
        R.close_hits++;
        close_without_answer(req);
    } else if (strcmp(path, "/close-once") == 0) {
        if (R.close_once_hits++ == 0) {
            close_without_answer(req);
        } else {
            evbuffer_add_printf(out, "second time");
            evhttp_send_reply(req, 200, "OK", NULL);
        }
    } else if (strcmp(path, "/echo") == 0) {
        snprintf(R.uri, sizeof R.uri, "%s", evhttp_request_get_uri(req));
        R.method = evhttp_request_get_command(req);
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        R.body_len = evbuffer_get_length(in);
        evbuffer_copyout(in, R.body, R.body_len < ECHO_MAX ? R.body_len : ECHO_MAX);
        R.nheaders = 0;
        struct evkeyval *h;
        for (h = TAILQ_FIRST(evhttp_request_get_input_headers(req)); h != NULL; h = TAILQ_NEXT(h, next)) {
            if (R.nheaders < MAX_HEADERS) {
                snprintf(R.hname[R.nheaders], sizeof R.hname[0], "%s", h->key);
                snprintf(R.hvalue[R.nheaders], sizeof R.hvalue[0], "%s", h->value);
                R.nheaders++;
            }
        }
        evbuffer_add_printf(out, "pong");
        evhttp_send_reply(req, 200, "OK", NULL);
    } else if (strcmp(path, "/big") == 0) {
        int n = query_int(req, "n", 0);
        for (int i = 0; i < n; i++) {
            unsigned char b = pattern((size_t)i);
            evbuffer_add(out, &b, 1);
        }
        evhttp_send_reply(req, 200, "OK", NULL);
    } else if (strcmp(path, "/chunked") == 0) {
        int n = query_int(req, "n", 0), pieces = 10;
        evhttp_send_reply_start(req, 200, "OK");
        struct evbuffer *chunk = evbuffer_new();
        for (int k = 0, at = 0; k < pieces; k++) {
            int len = n / pieces + (k < n % pieces);
            for (int i = 0; i < len; i++, at++) {
                unsigned char b = pattern((size_t)at);
                evbuffer_add(chunk, &b, 1);
            }
            evhttp_send_reply_chunk(req, chunk);
        }
        evbuffer_free(chunk);
        evhttp_send_reply_end(req);
    } else if (strcmp(path, "/park") == 0) {
        const char *seq = evhttp_find_header(evhttp_request_get_input_headers(req), "Seq");
        if (R.norder < MAX_PARKED)
            R.order[R.norder++] = seq ? atoi(seq) : -1;
        R.parked[R.nparked++] = req;
        if (R.nparked > R.peak_parked)
            R.peak_parked = R.nparked;
        if (R.nparked >= R.park_batch) {
            for (int i = 0; i < R.nparked; i++)
                evhttp_send_reply(R.parked[i], 200, "OK", NULL);
            R.nparked = 0;
        }
    } else {
        evhttp_send_reply(req, 404, "Not Found", NULL);
    }
}

static int bound_port(struct evhttp_bound_socket *s)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&sa, &len), 0);
    if (sa.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
    return ntohs(((struct sockaddr_in *)&sa)->sin_port);
}

static int completions;

static void setup(void)
{
    memset(&R, 0, sizeof R);
    completions = 0;
    R.base = event_base_new();
    ck_assert_ptr_nonnull(R.base);
    R.body = malloc(ECHO_MAX);
    R.dns = evdns_base_new(R.base, 0);
    ck_assert_ptr_nonnull(R.dns);
    ck_assert_int_eq(evdns_base_load_hosts(R.dns, HOSTS_FILE), 0);

    R.http = evhttp_new(R.base);
    evhttp_set_bevcb(R.http, plain_bev, NULL);
    evhttp_set_gencb(R.http, handle, NULL);
    evhttp_set_max_body_size(R.http, ECHO_MAX);
    R.port = bound_port(evhttp_bind_socket_with_handle(R.http, "127.0.0.1", 0));

    R.ssl = SSL_CTX_new(TLS_server_method());
    ck_assert_ptr_nonnull(R.ssl);
    ck_assert_int_eq(SSL_CTX_use_certificate(R.ssl, CERT), 1);
    ck_assert_int_eq(SSL_CTX_use_PrivateKey(R.ssl, KEY), 1);
    R.https = evhttp_new(R.base);
    evhttp_set_bevcb(R.https, tls_bev, NULL);
    evhttp_set_gencb(R.https, handle, NULL);
    R.tls_port = bound_port(evhttp_bind_socket_with_handle(R.https, "127.0.0.1", 0));
}

static void teardown(void)
{
    for (int i = 0; i < R.nwatch; i++)
        if (R.watch[i] != NULL)
            event_free(R.watch[i]);
    evhttp_free(R.http);
    evhttp_free(R.https);
    SSL_CTX_free(R.ssl);
    evdns_base_free(R.dns, 0);
    event_base_free(R.base);
    free(R.body);
}

/* ---- driving the loop ---- */

static void set_flag(evutil_socket_t fd, short what, void *arg)
{
    *(int *)arg = 1;
}

/* Run the loop until cond holds; fail the test after ms. */
#define RUN_UNTIL(cond, ms)                                                                                            \
    do {                                                                                                               \
        int expired_ = 0;                                                                                              \
        struct event *t_ = evtimer_new(R.base, set_flag, &expired_);                                                   \
        struct timeval tv_ = {(ms) / 1000, ((ms) % 1000) * 1000};                                                      \
        evtimer_add(t_, &tv_);                                                                                         \
        while (!(cond) && !expired_)                                                                                   \
            event_base_loop(R.base, EVLOOP_ONCE);                                                                      \
        event_free(t_);                                                                                                \
        ck_assert_msg((cond), "not within %d ms: %s", (ms), #cond);                                                    \
    } while (0)

/* Let the loop run what is ready now, a few rounds (to see that nothing more comes). */
static void settle(void)
{
    for (int i = 0; i < 5; i++)
        event_base_loop(R.base, EVLOOP_NONBLOCK);
}

/* ---- requests and their outcomes ---- */

struct call {
    int calls;
    int order; /* completion order, from 1 */
    enum wh_outcome outcome;
    int status;
    char error[256];
    int has_error;
    int64_t latency_us;
    unsigned char body[4096];
    size_t body_len;
    int truncated, reused;
};

static void on_result(const struct wh_result *r, void *arg)
{
    struct call *k = arg;
    k->calls++;
    k->order = ++completions;
    k->outcome = r->outcome;
    k->status = r->status;
    k->has_error = r->error != NULL;
    snprintf(k->error, sizeof k->error, "%s", r->error ? r->error : "");
    k->latency_us = r->latency_us;
    k->body_len = r->body_len;
    memcpy(k->body, r->body, r->body_len < sizeof k->body ? r->body_len : sizeof k->body);
    k->truncated = r->body_truncated;
    k->reused = r->reused;
    ck_assert_int_eq(r->body[r->body_len], '\0');
}

static int all_called(const struct call *k, int n)
{
    for (int i = 0; i < n; i++)
        if (k[i].calls == 0)
            return 0;
    return 1;
}

static char URL[512];

static const char *url(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *url(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(URL, sizeof URL, fmt, ap);
    va_end(ap);
    return URL;
}

static void post(struct whclient *c, const char *u, int timeout_ms, struct call *k)
{
    ck_assert_msg(whclient_post(c, u, NULL, 0, "{}", 2, timeout_ms, on_result, k) == 0, "post %s refused", u);
}

static struct whclient *client(int max_per_origin, int idle_ms, size_t max_answer, const char *ca_file)
{
    struct whclient_opts o = {.max_per_origin = max_per_origin,
                              .idle_timeout_ms = idle_ms,
                              .max_answer = max_answer,
                              .ca_file = ca_file,
                              .dns = R.dns};
    char err[256] = "";
    struct whclient *c = whclient_new(R.base, &o, err, sizeof err);
    ck_assert_msg(c != NULL, "whclient_new: %s", err);
    return c;
}

static struct whclient_stats stats(struct whclient *c)
{
    struct whclient_stats s;
    whclient_get_stats(c, &s);
    return s;
}

/* ---- URL parsing ---- */

START_TEST(url_good)
{
    static const struct {
        const char *url;
        int https, ip;
        const char *host;
        int port;
        const char *path;
    } cases[] = {
        {"http://example.com", 0, 0, "example.com", 80, "/"},
        {"HTTPS://Example.COM:8443/a/B?x=1&y=%20", 1, 0, "example.com", 8443, "/a/B?x=1&y=%20"},
        {"http://127.0.0.1:8080/hook", 0, 4, "127.0.0.1", 8080, "/hook"},
        {"https://[::1]/x", 1, 6, "::1", 443, "/x"},
        {"https://[2001:DB8::1]:9443?q", 1, 6, "2001:db8::1", 9443, "/?q"},
        {"http://a-b.c_d.example/", 0, 0, "a-b.c_d.example", 80, "/"},
        {"http://h:1/", 0, 0, "h", 1, "/"},
        {"http://h:65535", 0, 0, "h", 65535, "/"},
        {"http://h:080/", 0, 0, "h", 80, "/"},
        {"http://localhost/p;a=b/@c:d/~e!$&'()*+,=", 0, 0, "localhost", 80, "/p;a=b/@c:d/~e!$&'()*+,="},
        {"https://x.example/?", 1, 0, "x.example", 443, "/?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct wh_url u;
        char err[160] = "";
        ck_assert_msg(whclient_parse_url(cases[i].url, &u, err, sizeof err) == 0, "%s: %s", cases[i].url, err);
        ck_assert_int_eq(u.https, cases[i].https);
        ck_assert_int_eq(u.host_ip, cases[i].ip);
        ck_assert_str_eq(u.host, cases[i].host);
        ck_assert_int_eq(u.port, cases[i].port);
        ck_assert_str_eq(u.path, cases[i].path);
    }
}
END_TEST

START_TEST(url_bad)
{
    static const struct {
        const char *url;
        const char *says;
    } cases[] = {
        {"", "empty URL"},
        {"ftp://example.com/", "http:// or https://"},
        {"example.com/hook", "http:// or https://"},
        {"http:/example.com/", "http:// or https://"},
        {"http://", "no host"},
        {"http:///path", "no host"},
        {"http://:80/", "no host"},
        {"http://user:pw@example.com/", "user information"},
        {"http://@example.com/", "user information"},
        {"https://example.com/a#frag", "fragments"},
        {"http://example.com:0/", "port must be a number 1..65535, not \"0\""},
        {"http://example.com:65536/", "port must be a number 1..65535, not \"65536\""},
        {"http://example.com:99999999999999999999/", "port must be a number 1..65535"},
        {"http://example.com:8a/", "port must be a number 1..65535, not \"8a\""},
        {"http://example.com:-1/", "port must be a number 1..65535, not \"-1\""},
        {"http://example.com:/", "port must be a number 1..65535, not \"\""},
        {"http://[::1/", "unclosed '['"},
        {"http://[fe80::1%25eth0]/", "zone"},
        {"http://[::g]/", "bad IPv6"},
        {"http://[]/", "no host"},
        {"http://[::1]x/", "unexpected text after ']'"},
        {"http://256.1.1.1/", "bad IPv4"},
        {"http://1.2.3/", "bad IPv4"},
        {"http://01.2.3.4/", "bad IPv4"},
        {"http://foo.123/", "bad IPv4"},
        {"http://-foo.com/", "starts or ends with '-'"},
        {"http://foo-.com/", "starts or ends with '-'"},
        {"http://foo..com/", "empty label"},
        {"http://foo.com./", "empty label"},
        {"http://ex!ample.com/", "not allowed in a host name"},
        {"http://exa mple.com/", "space"},
        {"http://example.com/a b", "space"},
        {"http://example.com/\x01", "control"},
        {"http://ex\xc3\xa4mple.com/", "non-ASCII"},
        {"http://example.com/<script>", "not allowed in the URL's path"},
        {"http://example.com/a\\b", "not allowed in the URL's path"},
        {"http://example.com/%zz", "%-escape"},
        {"http://example.com/%4", "%-escape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct wh_url u;
        char err[160] = "";
        ck_assert_msg(whclient_parse_url(cases[i].url, &u, err, sizeof err) == -1, "accepted: %s", cases[i].url);
        ck_assert_msg(strstr(err, cases[i].says) != NULL, "%s: got '%s', want '%s'", cases[i].url, err, cases[i].says);
    }
}
END_TEST

START_TEST(url_lengths)
{
    struct wh_url u;
    char err[160];
    static char buf[WH_URL_MAX + 64];
    /* a label of 63 is fine, 64 is not */
    snprintf(buf, sizeof buf, "http://%.63s.example/",
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    ck_assert_int_eq(whclient_parse_url(buf, &u, err, sizeof err), 0);
    snprintf(buf, sizeof buf, "http://%.64s.example/",
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    ck_assert_int_eq(whclient_parse_url(buf, &u, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "63"));
    /* a host of 253 bytes is fine, 254 is not */
    char host[256];
    for (int i = 0; i < 254; i++)
        host[i] = (i % 50 == 49) ? '.' : 'h';
    host[253] = '\0';
    snprintf(buf, sizeof buf, "http://%s/", host);
    ck_assert_msg(whclient_parse_url(buf, &u, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(strlen(u.host), 253);
    host[253] = 'h';
    host[254] = '\0';
    snprintf(buf, sizeof buf, "http://%s/", host);
    ck_assert_int_eq(whclient_parse_url(buf, &u, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "longer than 253"));
    /* the whole URL: WH_URL_MAX bytes are fine, one more is not */
    int n = snprintf(buf, sizeof buf, "https://example.com/");
    while (n < WH_URL_MAX)
        buf[n++] = 'p';
    buf[n] = '\0';
    ck_assert_msg(whclient_parse_url(buf, &u, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(strlen(u.path), WH_URL_MAX - strlen("https://example.com"));
    buf[n++] = 'p';
    buf[n] = '\0';
    ck_assert_int_eq(whclient_parse_url(buf, &u, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "longer than 2048"));
    ck_assert_int_eq(whclient_parse_url(NULL, &u, err, sizeof err), -1);
}
END_TEST

/* ---- the client over http ---- */

START_TEST(statuses_are_delivered)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call ok = {0}, boom = {0}, missing = {0};
    post(c, url("http://127.0.0.1:%d/ok", R.port), 5000, &ok);
    post(c, url("http://127.0.0.1:%d/status500", R.port), 5000, &boom);
    post(c, url("http://127.0.0.1:%d/nothing-here", R.port), 5000, &missing);
    ck_assert_int_eq(ok.calls + boom.calls + missing.calls, 0); /* never from inside post */
    RUN_UNTIL(ok.calls && boom.calls && missing.calls, 5000);
    ck_assert_int_eq(ok.outcome, WH_ANSWERED);
    ck_assert_int_eq(ok.status, 200);
    ck_assert_int_eq(ok.has_error, 0);
    ck_assert_uint_eq(ok.body_len, 2);
    ck_assert_int_eq(memcmp(ok.body, "ok", 2), 0);
    ck_assert_int_gt(ok.latency_us, 0);
    ck_assert_int_lt(ok.latency_us, 5000000);
    ck_assert_int_eq(boom.outcome, WH_ANSWERED);
    ck_assert_int_eq(boom.status, 500);
    ck_assert_uint_eq(boom.body_len, 4);
    ck_assert_int_eq(missing.status, 404);
    settle();
    whclient_free(c);
    ck_assert_int_eq(ok.calls, 1);
    ck_assert_int_eq(boom.calls, 1);
    ck_assert_int_eq(missing.calls, 1);
}
END_TEST

START_TEST(headers_and_body_arrive_intact)
{
    struct whclient *c = client(0, 0, 0, NULL);
    size_t len = 200000;
    unsigned char *body = malloc(len);
    for (size_t i = 0; i < len; i++)
        body[i] = pattern(i); /* NULs included */
    struct wh_header h[] = {
        {"Content-Type", "application/json"},
        {"Hourglass-Id", "1234567890123456789"},
        {"Hourglass-Topic", "orders.eu"},
        {"Hourglass-Attempt", "2"},
        {"Hourglass-Signature", "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
    };
    struct call k = {0};
    ck_assert_int_eq(
        whclient_post(c, url("http://127.0.0.1:%d/echo?a=1&b=%%2F", R.port), h, 5, body, len, 5000, on_result, &k), 0);
    free(body); /* copied by post */
    RUN_UNTIL(k.calls, 5000);
    ck_assert_int_eq(k.status, 200);
    ck_assert_uint_eq(k.body_len, 4);
    ck_assert_int_eq(memcmp(k.body, "pong", 4), 0);
    ck_assert_int_eq(R.method, EVHTTP_REQ_POST);
    ck_assert_str_eq(R.uri, "/echo?a=1&b=%2F");
    ck_assert_uint_eq(R.body_len, len);
    for (size_t i = 0; i < len; i++)
        if (R.body[i] != pattern(i))
            ck_abort_msg("body byte %zu differs", i);
    char host[64];
    snprintf(host, sizeof host, "127.0.0.1:%d", R.port);
    char clen[32];
    snprintf(clen, sizeof clen, "%zu", len);
    const char *want[][2] = {{"Host", host},
                             {"Content-Length", clen},
                             {"User-Agent", "hourglass-webhook"},
                             {"Content-Type", "application/json"},
                             {"Hourglass-Id", "1234567890123456789"},
                             {"Hourglass-Topic", "orders.eu"},
                             {"Hourglass-Attempt", "2"},
                             {"Hourglass-Signature", h[4].value}};
    for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
        int seen = 0;
        for (int i = 0; i < R.nheaders; i++)
            if (strcasecmp(R.hname[i], want[w][0]) == 0) {
                seen++;
                ck_assert_msg(strcmp(R.hvalue[i], want[w][1]) == 0, "%s: '%s', want '%s'", want[w][0], R.hvalue[i],
                              want[w][1]);
            }
        ck_assert_msg(seen == 1, "header %s seen %d times", want[w][0], seen);
    }
    whclient_free(c);
    ck_assert_int_eq(k.calls, 1);
}
END_TEST

START_TEST(own_user_agent_replaces_the_default)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct wh_header h[] = {{"User-Agent", "mine/1.0"}};
    struct call k = {0};
    ck_assert_int_eq(whclient_post(c, url("http://127.0.0.1:%d/echo", R.port), h, 1, NULL, 0, 5000, on_result, &k), 0);
    RUN_UNTIL(k.calls, 5000);
    ck_assert_int_eq(k.status, 200);
    ck_assert_uint_eq(R.body_len, 0);
    int seen = 0;
    for (int i = 0; i < R.nheaders; i++)
        if (strcasecmp(R.hname[i], "User-Agent") == 0) {
            seen++;
            ck_assert_str_eq(R.hvalue[i], "mine/1.0");
        }
    ck_assert_int_eq(seen, 1);
    whclient_free(c);
}
END_TEST

START_TEST(refused_posts_make_no_callback)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call k = {0};
    const char *u = url("http://127.0.0.1:%d/ok", R.port);
    struct wh_header bad_name[] = {{"Bad Name", "x"}};
    struct wh_header bad_value[] = {{"X-Injected", "a\r\nEvil: yes"}};
    struct wh_header reserved[] = {{"host", "elsewhere"}};
    struct wh_header reserved2[] = {{"Transfer-Encoding", "chunked"}};
    ck_assert_int_eq(whclient_post(c, "ftp://127.0.0.1/", NULL, 0, "", 0, 1000, on_result, &k), -1);
    ck_assert_int_eq(whclient_post(c, u, bad_name, 1, "", 0, 1000, on_result, &k), -1);
    ck_assert_int_eq(whclient_post(c, u, bad_value, 1, "", 0, 1000, on_result, &k), -1);
    ck_assert_int_eq(whclient_post(c, u, reserved, 1, "", 0, 1000, on_result, &k), -1);
    ck_assert_int_eq(whclient_post(c, u, reserved2, 1, "", 0, 1000, on_result, &k), -1);
    ck_assert_int_eq(whclient_post(c, u, NULL, 0, "", 0, 0, on_result, &k), -1);
    ck_assert_int_eq(whclient_post(c, u, NULL, 0, "", 0, 1000, NULL, &k), -1);
    ck_assert_int_eq(whclient_post(c, u, NULL, 0, NULL, 5, 1000, on_result, &k), -1);
    settle();
    ck_assert_int_eq(k.calls, 0);
    ck_assert_int_eq(R.requests, 0);
    struct whclient_stats s = stats(c);
    ck_assert_int_eq(s.open + s.queued + s.in_flight, 0);
    whclient_free(c);
    ck_assert_int_eq(k.calls, 0);
}
END_TEST

START_TEST(hanging_receiver_times_out_and_loses_the_connection)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call k = {0};
    post(c, url("http://127.0.0.1:%d/hang", R.port), 300, &k);
    RUN_UNTIL(R.hang_hits == 1, 5000);
    ck_assert_int_eq(stats(c).in_flight, 1);
    RUN_UNTIL(k.calls, 5000);
    ck_assert_int_eq(k.outcome, WH_TIMEOUT);
    ck_assert_int_eq(k.status, 0);
    ck_assert_str_eq(k.error, "timeout after 300 ms"); /* our deadline, not libevent's backstop */
    ck_assert_int_ge(k.latency_us, 300000);
    ck_assert_int_lt(k.latency_us, 300000 + 2000000);
    struct whclient_stats s = stats(c);
    ck_assert_int_eq(s.open, 0); /* cut, not kept */
    ck_assert_int_eq(s.in_flight, 0);
    RUN_UNTIL(R.hang_closed == 1, 5000); /* and the receiver saw it close */
    settle();
    whclient_free(c);
    ck_assert_int_eq(k.calls, 1);
}
END_TEST

START_TEST(close_without_answer_is_a_transport_error)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call k = {0};
    post(c, url("http://127.0.0.1:%d/close", R.port), 5000, &k);
    RUN_UNTIL(k.calls, 5000);
    ck_assert_int_eq(k.outcome, WH_CLOSED);
    ck_assert_int_eq(k.status, 0);
    ck_assert_msg(strstr(k.error, "closed") != NULL, "%s", k.error);
    ck_assert_int_eq(R.close_hits, 1); /* a fresh connection: not sent again */
    ck_assert_int_eq(stats(c).open, 0);
    ck_assert_int_eq(stats(c).retried, 0);
    whclient_free(c);
    ck_assert_int_eq(k.calls, 1);
}
END_TEST

START_TEST(connection_refused)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd); /* a port nobody listens on */
    int port = ntohs(sa.sin_port);
    struct whclient *c = client(0, 0, 0, NULL);
    struct call k = {0}, t = {0};
    post(c, url("http://127.0.0.1:%d/ok", port), 5000, &k);
    post(c, url("https://127.0.0.1:%d/ok", port), 5000, &t);
    RUN_UNTIL(k.calls && t.calls, 5000);
    ck_assert_int_eq(k.outcome, WH_CONNECT);
    ck_assert_int_eq(k.status, 0);
    ck_assert_msg(strstr(k.error, "refused") != NULL, "%s", k.error);
    ck_assert_int_eq(t.outcome, WH_CONNECT);
    ck_assert_int_eq(t.status, 0);
    ck_assert_int_eq(stats(c).open, 0);
    whclient_free(c);
    ck_assert_int_eq(k.calls, 1);
    ck_assert_int_eq(t.calls, 1);
}
END_TEST

START_TEST(unknown_host_name)
{
    /* a name server nobody runs, asked once with a short timeout: the lookup fails quickly */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    char ns[64];
    snprintf(ns, sizeof ns, "127.0.0.1:%d", ntohs(sa.sin_port));
    ck_assert_int_eq(evdns_base_set_option(R.dns, "timeout:", "0.2"), 0);
    ck_assert_int_eq(evdns_base_set_option(R.dns, "attempts:", "1"), 0);
    ck_assert_int_eq(evdns_base_nameserver_ip_add(R.dns, ns), 0);
    struct whclient *c = client(0, 0, 0, NULL);
    struct call k = {0};
    post(c, "http://nowhere.test/ok", 5000, &k);
    RUN_UNTIL(k.calls, 5000);
    ck_assert_int_eq(k.outcome, WH_CONNECT);
    ck_assert_msg(strstr(k.error, "cannot resolve nowhere.test") != NULL, "%s", k.error);
    whclient_free(c);
    ck_assert_int_eq(k.calls, 1);
}
END_TEST

START_TEST(host_names_resolve)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call k = {0};
    post(c, url("http://receiver.test:%d/echo", R.port), 5000, &k);
    RUN_UNTIL(k.calls, 5000);
    ck_assert_int_eq(k.status, 200);
    char host[64];
    snprintf(host, sizeof host, "receiver.test:%d", R.port);
    for (int i = 0; i < R.nheaders; i++)
        if (strcasecmp(R.hname[i], "Host") == 0)
            ck_assert_str_eq(R.hvalue[i], host);
    whclient_free(c);
}
END_TEST

START_TEST(sequential_requests_reuse_one_connection)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call k[5] = {{0}};
    for (int i = 0; i < 5; i++) {
        post(c, url("http://127.0.0.1:%d/ok", R.port), 5000, &k[i]);
        RUN_UNTIL(k[i].calls, 5000);
        ck_assert_int_eq(k[i].status, 200);
        ck_assert_int_eq(k[i].reused, i > 0);
        ck_assert_int_eq(stats(c).idle, 1);
    }
    ck_assert_int_eq(R.accepted, 1);
    struct whclient_stats s = stats(c);
    ck_assert_uint_eq(s.connects, 1);
    ck_assert_uint_eq(s.reused, 4);
    ck_assert_int_eq(s.open, 1);
    whclient_free(c);
}
END_TEST

START_TEST(parallel_requests_stay_within_the_cap_in_fifo_order)
{
    struct whclient *c = client(3, 0, 0, NULL);
    enum { N = 9 };
    struct call k[N] = {{0}};
    R.park_batch = 3; /* the receiver answers when 3 wait: only possible with 3 connections */
    for (int i = 0; i < N; i++) {
        char seq[16];
        snprintf(seq, sizeof seq, "%d", i);
        struct wh_header h[] = {{"Seq", seq}};
        ck_assert_int_eq(
            whclient_post(c, url("http://127.0.0.1:%d/park", R.port), h, 1, "{}", 2, 10000, on_result, &k[i]), 0);
    }
    struct whclient_stats s = stats(c);
    ck_assert_int_eq(s.open, 3);
    ck_assert_int_eq(s.in_flight, 3);
    ck_assert_int_eq(s.queued, N - 3);
    RUN_UNTIL(all_called(k, N), 10000);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(k[i].calls, 1);
        ck_assert_int_eq(k[i].status, 200);
    }
    ck_assert_int_eq(R.accepted, 3);
    ck_assert_int_eq(R.peak_parked, 3);
    ck_assert_uint_eq(stats(c).connects, 3);
    /* FIFO: the batches arrive as {0,1,2}, {3,4,5}, {6,7,8} */
    ck_assert_int_eq(R.norder, N);
    for (int b = 0; b < N / 3; b++) {
        int mask = 0;
        for (int i = 0; i < 3; i++)
            mask |= 1 << (R.order[3 * b + i] - 3 * b);
        ck_assert_msg(mask == 7, "batch %d arrived out of order", b);
    }
    whclient_free(c);
}
END_TEST

START_TEST(one_connection_sends_in_fifo_order)
{
    struct whclient *c = client(1, 0, 0, NULL);
    enum { N = 6 };
    struct call k[N] = {{0}};
    R.park_batch = 1;
    for (int i = 0; i < N; i++) {
        char seq[16];
        snprintf(seq, sizeof seq, "%d", i);
        struct wh_header h[] = {{"Seq", seq}};
        ck_assert_int_eq(
            whclient_post(c, url("http://127.0.0.1:%d/park", R.port), h, 1, NULL, 0, 10000, on_result, &k[i]), 0);
    }
    RUN_UNTIL(k[N - 1].calls, 10000);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(k[i].status, 200);
        ck_assert_int_eq(k[i].order, i + 1);
        ck_assert_int_eq(R.order[i], i);
    }
    ck_assert_int_eq(R.accepted, 1);
    whclient_free(c);
}
END_TEST

START_TEST(queued_requests_time_out_too)
{
    struct whclient *c = client(1, 0, 0, NULL);
    struct call hang = {0}, queued = {0};
    post(c, url("http://127.0.0.1:%d/hang", R.port), 2000, &hang);
    post(c, url("http://127.0.0.1:%d/ok", R.port), 200, &queued);
    ck_assert_int_eq(stats(c).queued, 1);
    RUN_UNTIL(queued.calls, 5000);
    ck_assert_int_eq(queued.outcome, WH_TIMEOUT);
    ck_assert_msg(strstr(queued.error, "waiting for a connection") != NULL, "%s", queued.error);
    ck_assert_int_eq(hang.calls, 0);
    ck_assert_int_eq(stats(c).queued, 0);
    RUN_UNTIL(hang.calls, 5000);
    ck_assert_int_eq(hang.outcome, WH_TIMEOUT);
    whclient_free(c);
    ck_assert_int_eq(hang.calls, 1);
    ck_assert_int_eq(queued.calls, 1);
}
END_TEST

START_TEST(connection_close_answer_is_not_reused)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call a = {0}, b = {0};
    post(c, url("http://127.0.0.1:%d/bye", R.port), 5000, &a);
    RUN_UNTIL(a.calls, 5000);
    ck_assert_int_eq(a.status, 200);
    post(c, url("http://127.0.0.1:%d/ok", R.port), 5000, &b);
    RUN_UNTIL(b.calls, 5000);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_eq(b.reused, 0);
    ck_assert_int_eq(R.accepted, 2);
    ck_assert_uint_eq(stats(c).retried, 0);
    whclient_free(c);
}
END_TEST

START_TEST(receiver_closing_an_idle_connection_is_noticed)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call a = {0}, b = {0};
    post(c, url("http://127.0.0.1:%d/ok", R.port), 5000, &a);
    RUN_UNTIL(a.calls, 5000);
    ck_assert_int_eq(stats(c).idle, 1);
    ck_assert_ptr_nonnull(R.last_conn);
    evhttp_connection_free(R.last_conn); /* the receiver's keep-alive timeout */
    RUN_UNTIL(stats(c).open == 0, 5000);
    post(c, url("http://127.0.0.1:%d/ok", R.port), 5000, &b);
    RUN_UNTIL(b.calls, 5000);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_eq(b.reused, 0);
    ck_assert_int_eq(R.accepted, 2);
    ck_assert_uint_eq(stats(c).retried, 0);
    whclient_free(c);
}
END_TEST

START_TEST(stale_kept_alive_connection_is_retried_once)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call a = {0}, b = {0};
    post(c, url("http://127.0.0.1:%d/ok", R.port), 5000, &a);
    RUN_UNTIL(a.calls, 5000);
    /* the receiver drops the kept-alive connection instead of answering: sent again on a new one */
    post(c, url("http://127.0.0.1:%d/close-once", R.port), 5000, &b);
    RUN_UNTIL(b.calls, 5000);
    ck_assert_int_eq(b.outcome, WH_ANSWERED);
    ck_assert_int_eq(b.status, 200);
    ck_assert_int_eq(R.close_once_hits, 2);
    ck_assert_int_eq(R.accepted, 2);
    ck_assert_uint_eq(stats(c).retried, 1);
    whclient_free(c);
    ck_assert_int_eq(b.calls, 1);
}
END_TEST

START_TEST(retry_happens_only_once)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call a = {0}, b = {0};
    post(c, url("http://127.0.0.1:%d/ok", R.port), 5000, &a);
    RUN_UNTIL(a.calls, 5000);
    post(c, url("http://127.0.0.1:%d/close", R.port), 5000, &b);
    RUN_UNTIL(b.calls, 5000);
    ck_assert_int_eq(b.outcome, WH_CLOSED);
    ck_assert_int_eq(R.close_hits, 2);
    ck_assert_uint_eq(stats(c).retried, 1);
    ck_assert_int_eq(stats(c).open, 0);
    whclient_free(c);
    ck_assert_int_eq(b.calls, 1);
}
END_TEST

START_TEST(idle_connections_are_closed_after_the_idle_timeout)
{
    struct whclient *c = client(0, 150, 0, NULL);
    struct call a = {0};
    post(c, url("http://127.0.0.1:%d/ok", R.port), 5000, &a);
    RUN_UNTIL(a.calls, 5000);
    ck_assert_int_eq(stats(c).open, 1);
    RUN_UNTIL(stats(c).open == 0, 5000);
    RUN_UNTIL(R.server_closed == 1, 5000);
    whclient_free(c);
}
END_TEST

START_TEST(answer_body_is_capped)
{
    struct whclient *c = client(0, 0, 1000, NULL);
    struct call big = {0}, chunked = {0}, small = {0};
    post(c, url("http://127.0.0.1:%d/big?n=300000", R.port), 5000, &big);
    post(c, url("http://127.0.0.1:%d/chunked?n=300000", R.port), 5000, &chunked);
    post(c, url("http://127.0.0.1:%d/big?n=999", R.port), 5000, &small);
    RUN_UNTIL(big.calls && chunked.calls && small.calls, 5000);
    struct call *capped[] = {&big, &chunked};
    for (int j = 0; j < 2; j++) {
        ck_assert_int_eq(capped[j]->status, 200);
        ck_assert_uint_eq(capped[j]->body_len, 1000);
        ck_assert_int_eq(capped[j]->truncated, 1);
        for (size_t i = 0; i < 1000; i++)
            ck_assert_int_eq(capped[j]->body[i], pattern(i));
    }
    ck_assert_int_eq(small.status, 200);
    ck_assert_uint_eq(small.body_len, 999);
    ck_assert_int_eq(small.truncated, 0);
    /* the rest was read and dropped: the connections stay usable */
    ck_assert_int_eq(stats(c).idle, stats(c).open);
    whclient_free(c);
}
END_TEST

/* ---- freeing with requests pending ---- */

START_TEST(free_cancels_pending_requests_once_each)
{
    struct whclient *c = client(2, 0, 0, NULL);
    struct call k[4] = {{0}};
    for (int i = 0; i < 4; i++)
        post(c, url("http://127.0.0.1:%d/hang", R.port), 10000, &k[i]);
    RUN_UNTIL(R.hang_hits == 2, 5000);
    ck_assert_int_eq(stats(c).in_flight, 2);
    ck_assert_int_eq(stats(c).queued, 2);
    whclient_free(c);
    for (int i = 0; i < 4; i++) { /* before free returned */
        ck_assert_int_eq(k[i].calls, 1);
        ck_assert_int_eq(k[i].outcome, WH_CANCELLED);
        ck_assert_msg(strstr(k[i].error, "cancelled") != NULL, "%s", k[i].error);
    }
    ck_assert_int_eq(k[0].order + k[1].order, 1 + 2); /* in flight first, then the queue in order */
    ck_assert_int_eq(k[2].order, 3);
    ck_assert_int_eq(k[3].order, 4);
    RUN_UNTIL(R.hang_closed == 2, 5000);
    settle();
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(k[i].calls, 1);
}
END_TEST

static struct whclient *FREE_ME;

static void free_on_result(const struct wh_result *r, void *arg)
{
    on_result(r, arg);
    ck_assert_int_eq(whclient_post(FREE_ME, "http://127.0.0.1:1/", NULL, 0, NULL, 0, 100, on_result, arg), 0);
    whclient_free(FREE_ME);
    FREE_ME = NULL;
}

/* Called from inside whclient_free: posting is refused there. */
static void post_on_cancel(const struct wh_result *r, void *arg)
{
    on_result(r, arg);
    ck_assert_ptr_nonnull(FREE_ME);
    ck_assert_int_eq(whclient_post(FREE_ME, "http://127.0.0.1:1/", NULL, 0, NULL, 0, 100, on_result, arg), -1);
}

START_TEST(free_from_a_callback)
{
    struct whclient *c = client(0, 0, 0, NULL);
    FREE_ME = c;
    struct call ok = {0}, hang = {0};
    ck_assert_int_eq(
        whclient_post(c, url("http://127.0.0.1:%d/hang", R.port), NULL, 0, NULL, 0, 10000, post_on_cancel, &hang), 0);
    RUN_UNTIL(R.hang_hits == 1, 5000);
    ck_assert_int_eq(
        whclient_post(c, url("http://127.0.0.1:%d/ok", R.port), NULL, 0, NULL, 0, 10000, free_on_result, &ok), 0);
    RUN_UNTIL(ok.calls, 5000);
    ck_assert_ptr_null(FREE_ME);
    /* ok's callback posted once more (accepted: the client was still open), then freed the client:
     * the hanging request (whose callback could not post) and that new one were cancelled, once each */
    ck_assert_int_eq(ok.calls, 2);
    ck_assert_int_eq(ok.outcome, WH_CANCELLED);
    ck_assert_int_eq(hang.calls, 1);
    ck_assert_int_eq(hang.outcome, WH_CANCELLED);
    settle();
    ck_assert_int_eq(ok.calls, 2);
    ck_assert_int_eq(hang.calls, 1);
}
END_TEST

/* ---- https ---- */

START_TEST(https_with_the_ca_file)
{
    struct whclient *c = client(0, 0, 0, CA_FILE);
    struct call a = {0}, b = {0}, ip = {0};
    post(c, url("https://receiver.test:%d/ok", R.tls_port), 5000, &a);
    RUN_UNTIL(a.calls, 5000);
    ck_assert_msg(a.outcome == WH_ANSWERED, "%s", a.error);
    ck_assert_int_eq(a.status, 200);
    ck_assert_uint_eq(a.body_len, 2);
    post(c, url("https://receiver.test:%d/status500", R.tls_port), 5000, &b);
    RUN_UNTIL(b.calls, 5000);
    ck_assert_int_eq(b.status, 500);
    ck_assert_int_eq(b.reused, 1);
    ck_assert_int_eq(R.accepted, 1);
    /* by IP address: checked against the certificate's IP entry */
    post(c, url("https://127.0.0.1:%d/echo", R.tls_port), 5000, &ip);
    RUN_UNTIL(ip.calls, 5000);
    ck_assert_msg(ip.outcome == WH_ANSWERED, "%s", ip.error);
    ck_assert_int_eq(ip.status, 200);
    ck_assert_uint_eq(R.body_len, 2);
    whclient_free(c);
}
END_TEST

START_TEST(https_without_the_ca_file_fails_verification)
{
    struct whclient *c = client(0, 0, 0, NULL);
    struct call k = {0};
    post(c, url("https://receiver.test:%d/ok", R.tls_port), 5000, &k);
    RUN_UNTIL(k.calls, 5000);
    ck_assert_int_eq(k.outcome, WH_TLS);
    ck_assert_int_eq(k.status, 0);
    ck_assert_msg(strstr(k.error, "verification failed") && strstr(k.error, "self"), "%s", k.error);
    ck_assert_int_eq(R.requests, 0);
    ck_assert_int_eq(stats(c).open, 0);
    whclient_free(c);
    ck_assert_int_eq(k.calls, 1);
}
END_TEST

START_TEST(https_with_the_wrong_host_name_fails_verification)
{
    struct whclient *c = client(0, 0, 0, CA_FILE);
    struct call k = {0};
    post(c, url("https://wrong.test:%d/ok", R.tls_port), 5000, &k);
    RUN_UNTIL(k.calls, 5000);
    ck_assert_int_eq(k.outcome, WH_TLS);
    ck_assert_msg(strstr(k.error, "verification failed") && strstr(k.error, "hostname mismatch"), "%s", k.error);
    ck_assert_int_eq(R.requests, 0);
    whclient_free(c);
    ck_assert_int_eq(k.calls, 1);
}
END_TEST

START_TEST(https_hang_times_out)
{
    struct whclient *c = client(0, 0, 0, CA_FILE);
    struct call k = {0};
    post(c, url("https://receiver.test:%d/hang", R.tls_port), 300, &k);
    RUN_UNTIL(k.calls, 5000);
    ck_assert_int_eq(k.outcome, WH_TIMEOUT);
    ck_assert_int_eq(R.hang_hits, 1);
    ck_assert_int_eq(stats(c).open, 0);
    RUN_UNTIL(R.hang_closed == 1, 5000);
    whclient_free(c);
}
END_TEST

START_TEST(ipv6_literals)
{
    struct evhttp_bound_socket *plain = evhttp_bind_socket_with_handle(R.http, "::1", 0);
    struct evhttp_bound_socket *tls = evhttp_bind_socket_with_handle(R.https, "::1", 0);
    if (plain == NULL || tls == NULL) {
        fprintf(stderr, "test_whclient: no IPv6 loopback here; ipv6_literals checks nothing\n");
        return;
    }
    int port = bound_port(plain), tls_port = bound_port(tls);
    struct whclient *c = client(0, 0, 0, CA_FILE);
    struct call k = {0}, t = {0};
    post(c, url("http://[::1]:%d/echo", port), 5000, &k);
    RUN_UNTIL(k.calls, 5000);
    ck_assert_msg(k.outcome == WH_ANSWERED, "%s", k.error);
    ck_assert_int_eq(k.status, 200);
    char host[64];
    snprintf(host, sizeof host, "[::1]:%d", port);
    int seen = 0;
    for (int i = 0; i < R.nheaders; i++)
        if (strcasecmp(R.hname[i], "Host") == 0 && strcmp(R.hvalue[i], host) == 0)
            seen++;
    ck_assert_int_eq(seen, 1);
    /* the certificate names 127.0.0.1, not ::1 */
    post(c, url("https://[::1]:%d/ok", tls_port), 5000, &t);
    RUN_UNTIL(t.calls, 5000);
    ck_assert_int_eq(t.outcome, WH_TLS);
    ck_assert_msg(strstr(t.error, "IP address mismatch") != NULL, "%s", t.error);
    whclient_free(c);
}
END_TEST

START_TEST(bad_ca_file_is_refused)
{
    char err[256] = "";
    struct whclient_opts o = {.ca_file = "/nonexistent/ca.pem", .dns = R.dns};
    ck_assert_ptr_null(whclient_new(R.base, &o, err, sizeof err));
    ck_assert_msg(strstr(err, "/nonexistent/ca.pem") != NULL, "%s", err);
}
END_TEST

static Suite *whclient_suite(void)
{
    Suite *s = suite_create("whclient");
    TCase *tc = tcase_create("url");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, url_good);
    tcase_add_test(tc, url_bad);
    tcase_add_test(tc, url_lengths);
    suite_add_tcase(s, tc);

    tc = tcase_create("http");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, statuses_are_delivered);
    tcase_add_test(tc, headers_and_body_arrive_intact);
    tcase_add_test(tc, own_user_agent_replaces_the_default);
    tcase_add_test(tc, refused_posts_make_no_callback);
    tcase_add_test(tc, hanging_receiver_times_out_and_loses_the_connection);
    tcase_add_test(tc, close_without_answer_is_a_transport_error);
    tcase_add_test(tc, connection_refused);
    tcase_add_test(tc, unknown_host_name);
    tcase_add_test(tc, host_names_resolve);
    tcase_add_test(tc, sequential_requests_reuse_one_connection);
    tcase_add_test(tc, parallel_requests_stay_within_the_cap_in_fifo_order);
    tcase_add_test(tc, one_connection_sends_in_fifo_order);
    tcase_add_test(tc, queued_requests_time_out_too);
    tcase_add_test(tc, connection_close_answer_is_not_reused);
    tcase_add_test(tc, receiver_closing_an_idle_connection_is_noticed);
    tcase_add_test(tc, stale_kept_alive_connection_is_retried_once);
    tcase_add_test(tc, retry_happens_only_once);
    tcase_add_test(tc, idle_connections_are_closed_after_the_idle_timeout);
    tcase_add_test(tc, answer_body_is_capped);
    tcase_add_test(tc, free_cancels_pending_requests_once_each);
    tcase_add_test(tc, free_from_a_callback);
    suite_add_tcase(s, tc);

    tc = tcase_create("https");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, https_with_the_ca_file);
    tcase_add_test(tc, https_without_the_ca_file_fails_verification);
    tcase_add_test(tc, https_with_the_wrong_host_name_fails_verification);
    tcase_add_test(tc, https_hang_times_out);
    tcase_add_test(tc, ipv6_literals);
    tcase_add_test(tc, bad_ca_file_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

/* libevent's informational lines (evdns: "nameserver has failed") are expected here; keep
 * its warnings and errors. */
static void libevent_log(int severity, const char *msg)
{
    if (severity >= EVENT_LOG_WARN)
        fprintf(stderr, "libevent: %s\n", msg);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as hourglassd: a receiver that goes away must not kill us */
    event_set_log_callback(libevent_log);
    make_certificate();
    SRunner *sr = srunner_create(whclient_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    remove_certificate();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
