/* amqpurl.c — see amqpurl.h. */
#include "core/amqpurl.h"
#include "base/netaddr.h"
#include "core/router.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define AMQPURL_SHAPE "amqp://user:pass@host:port/vhost"
#define AMQPURL_PORT  5672 /* the port when the url names none */

_Static_assert(NETADDR_HOST_MAX < AMQPURL_MAX, "a host fits struct amqpurl");

static int fail(struct amqpurl *out, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct amqpurl *out, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    memset(out, 0, sizeof *out);
    return -1;
}

/* err is already filled: clear *out and fail. */
static int cleared(struct amqpurl *out)
{
    memset(out, 0, sizeof *out);
    return -1;
}

/* Percent-decode s[0..n) into dst (AMQPURL_MAX bytes). 0, or -1 with err naming `what`. */
static int decode(const char *s, size_t n, char *dst, const char *what, char *err, size_t errlen)
{
    char *buf = malloc(n + 1); /* decoded is never longer than encoded */
    long len = buf ? router_percent_decode(s, n, buf, n + 1, 0) : -1;
    int rc = -1;
    if (buf == NULL)
        snprintf(err, errlen, "out of memory reading the %s", what);
    else if (len < 0)
        snprintf(err, errlen, "bad percent-escape in the %s (write a '%%' as %%25)", what);
    else if (memchr(buf, '\0', (size_t)len) != NULL)
        snprintf(err, errlen, "%%00 is not allowed in the %s", what);
    else if (len > AMQPURL_MAX - 1)
        snprintf(err, errlen, "the %s is longer than %d bytes", what, AMQPURL_MAX - 1);
    else {
        memcpy(dst, buf, (size_t)len + 1);
        rc = 0;
    }
    free(buf);
    return rc;
}

/* The host and optional port (s[0..n)) into out, by base/netaddr.h's rules and messages. */
static int parse_hostport(const char *s, size_t n, struct amqpurl *out, char *err, size_t errlen)
{
    struct netaddr a;
    if (netaddr_parse(s, n, AMQPURL_PORT, &a, err, errlen) < 0)
        return -1;
    memcpy(out->host, a.host, sizeof a.host); /* fits: NETADDR_HOST_MAX < AMQPURL_MAX */
    out->port = a.port;
    return 0;
}

int amqpurl_parse(const char *url, struct amqpurl *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (url == NULL || url[0] == '\0')
        return fail(out, err, errlen, "empty (expected %s)", AMQPURL_SHAPE);
    for (const char *c = url; *c; c++) {
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            return fail(out, err, errlen, "contains a space or a control character (write a space as %%20)");
    }
    if (strncasecmp(url, "amqps://", 8) == 0)
        return fail(out, err, errlen, "amqps:// (TLS) is not supported; use amqp://");
    if (strncasecmp(url, "amqp://", 7) != 0)
        return fail(out, err, errlen, "must start with amqp:// (expected %s)", AMQPURL_SHAPE);
    const char *p = url + 7;
    if (strpbrk(p, "?#"))
        return fail(out, err, errlen, "query parameters and fragments (?... #...) are not supported");

    const char *slash = strchr(p, '/');
    const char *auth_end = slash ? slash : p + strlen(p);
    const char *at = NULL;
    for (const char *c = p; c < auth_end; c++) {
        if (*c == '@') {
            if (at)
                return fail(out, err, errlen, "more than one '@': write an '@' in the user or password as %%40");
            at = c;
        }
    }

    const char *hostport = p;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *user_end = colon ? colon : at;
        if (user_end == p)
            return fail(out, err, errlen, "empty user (expected %s)", AMQPURL_SHAPE);
        if (decode(p, (size_t)(user_end - p), out->user, "user", err, errlen) < 0)
            return cleared(out);
        if (colon && decode(colon + 1, (size_t)(at - colon - 1), out->password, "password", err, errlen) < 0)
            return cleared(out);
        hostport = at + 1;
    } else {
        strcpy(out->user, "guest");
        strcpy(out->password, "guest");
    }
    if (parse_hostport(hostport, (size_t)(auth_end - hostport), out, err, errlen) < 0)
        return cleared(out);

    if (slash == NULL || slash[1] == '\0') {
        strcpy(out->vhost, "/");
    } else {
        const char *path = slash + 1;
        if (strchr(path, '/'))
            return fail(out, err, errlen, "the vhost is one path segment: write a '/' in it as %%2F");
        if (decode(path, strlen(path), out->vhost, "vhost", err, errlen) < 0)
            return cleared(out);
    }
    return 0;
}

/* Append s to buf (len bytes, cut but always terminated), percent-encoding what is not
 * unreserved when `encode`. */
static void put(char *buf, size_t len, size_t *o, const char *s, int encode)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int plain = !encode || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '.' || c == '_' || c == '~';
        char out[3] = {(char)c, hex[c >> 4], hex[c & 15]};
        if (!plain)
            out[0] = '%';
        for (int i = 0; i < (plain ? 1 : 3); i++) {
            if (*o + 1 < len)
                buf[(*o)++] = out[i];
        }
    }
    buf[*o] = '\0';
}

void amqpurl_redact(const struct amqpurl *u, char *buf, size_t len)
{
    if (len == 0)
        return;
    size_t o = 0;
    char port[16];
    int v6 = strchr(u->host, ':') != NULL;
    snprintf(port, sizeof port, ":%d/", u->port);
    buf[0] = '\0';
    put(buf, len, &o, "amqp://", 0);
    put(buf, len, &o, u->user, 1);
    put(buf, len, &o, ":***@", 0);
    put(buf, len, &o, v6 ? "[" : "", 0);
    put(buf, len, &o, u->host, 0);
    put(buf, len, &o, v6 ? "]" : "", 0);
    put(buf, len, &o, port, 0);
    put(buf, len, &o, u->vhost, 1);
}
