/* netaddr.c — see netaddr.h. */
#include "base/netaddr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#define V6_TEXT_MAX 45 /* INET6_ADDRSTRLEN - 1: the longest IPv6 address inet_pton reads */
#define QUOTE_MAX   20 /* the longest refused port shown in a message */
#define TEXT(x)     #x
#define NUMBER(x)   TEXT(x)

/* Refuse: err gets `what`, then text[0..len) (the refused part, unless len is 0), then
 * `after`; *out is cleared (text may point into it: it is read first). */
static int refuse(struct netaddr *out, char *err, size_t errlen, const char *what, const char *text, size_t len,
                  const char *after)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s%.*s%s", what, (int)len, text, after);
    memset(out, 0, sizeof *out);
    return -1;
}

/* Refuse with a message that quotes nothing. */
static int say(struct netaddr *out, char *err, size_t errlen, const char *message)
{
    return refuse(out, err, errlen, message, "", 0, "");
}

static int is_digit(int ch)
{
    return ch >= '0' && ch <= '9';
}

static int name_char(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || is_digit(ch) || ch == '-' || ch == '_';
}

static int v6_char(int ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F') || ch == ':' || ch == '.';
}

/* A name's labels (out->host, n bytes), as netaddr.h says. */
static int check_name(struct netaddr *out, size_t n, char *err, size_t errlen)
{
    const char *h = out->host;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && h[i] != '.') {
            unsigned char ch = (unsigned char)h[i];
            if (name_char(ch))
                continue;
            if (ch >= ' ' && ch < 0x7f)
                return refuse(out, err, errlen, "character '", h + i, 1, "' is not allowed in a host name");
            return say(out, err, errlen, "a control or non-ASCII byte is not allowed in a host name");
        }
        size_t len = i - start;
        if (len == 0)
            return refuse(out, err, errlen, "empty label in host name \"", h, n, "\"");
        if (len > 63)
            return say(out, err, errlen, "host name label longer than 63 bytes");
        if (h[start] == '-' || h[i - 1] == '-')
            return refuse(out, err, errlen, "host name label \"", h + start, len, "\" starts or ends with '-'");
        if (i == n && strspn(h + start, "0123456789") == len)
            return refuse(out, err, errlen, "bad IPv4 address \"", h, n, "\"");
        start = i + 1;
    }
    return 0;
}

/* An unbracketed host (s[0..n)): an IPv4 address or a name. */
static int put_host(const char *s, size_t n, struct netaddr *out, char *err, size_t errlen)
{
    if (n == 0)
        return say(out, err, errlen, "no host");
    if (n > NETADDR_HOST_MAX)
        return say(out, err, errlen, "host is longer than " NUMBER(NETADDR_HOST_MAX) " bytes");
    memcpy(out->host, s, n);
    out->host[n] = '\0';
    if (strspn(out->host, "0123456789.") < n)
        return check_name(out, n, err, errlen);
    struct in_addr a4;
    if (inet_pton(AF_INET, out->host, &a4) != 1)
        return refuse(out, err, errlen, "bad IPv4 address \"", s, n, "\"");
    out->kind = NETADDR_IPV4;
    return 0;
}

/* The inside of "[...]" (s[0..n)): an IPv6 address. */
static int put_v6(const char *s, size_t n, struct netaddr *out, char *err, size_t errlen)
{
    if (n == 0)
        return say(out, err, errlen, "no host");
    if (memchr(s, '%', n) != NULL)
        return say(out, err, errlen, "IPv6 zone ids (%...) are not allowed");
    struct in6_addr a6;
    if (n <= V6_TEXT_MAX) {
        memcpy(out->host, s, n);
        out->host[n] = '\0';
        if (inet_pton(AF_INET6, out->host, &a6) == 1) {
            out->kind = NETADDR_IPV6;
            return 0;
        }
    }
    return refuse(out, err, errlen, "bad IPv6 address \"", s, n > V6_TEXT_MAX ? V6_TEXT_MAX : n,
                  n > V6_TEXT_MAX ? "...\"" : "\"");
}

/* The digits after ':' (s[0..n)). */
static int put_port(const char *s, size_t n, struct netaddr *out, char *err, size_t errlen)
{
    long v = 0;
    for (size_t i = 0; i < n && v <= 65535; i++) {
        if (!is_digit(s[i])) {
            v = -1;
            break;
        }
        v = v * 10 + (s[i] - '0');
    }
    if (n == 0 || v < 1 || v > 65535)
        return refuse(out, err, errlen, "port must be a number 1..65535, not \"", s, n > QUOTE_MAX ? QUOTE_MAX : n,
                      n > QUOTE_MAX ? "...\"" : "\"");
    out->port = (int)v;
    return 0;
}

int netaddr_parse(const char *s, size_t len, int default_port, struct netaddr *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *end = s + len, *colon;
    if (len > 0 && s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (rb == NULL)
            return say(out, err, errlen, "unclosed '[' (an IPv6 address is written [::1])");
        if (rb + 1 < end && rb[1] != ':')
            return say(out, err, errlen, "unexpected text after ']' (expected \":port\")");
        if (put_v6(s + 1, (size_t)(rb - s - 1), out, err, errlen) < 0)
            return -1;
        colon = rb + 1 < end ? rb + 1 : NULL;
    } else {
        colon = memchr(s, ':', len);
        if (colon != NULL && memchr(colon + 1, ':', (size_t)(end - colon - 1)) != NULL) {
            size_t i = 0;
            while (i < len && v6_char((unsigned char)s[i]))
                i++;
            if (i == len)
                return say(out, err, errlen, "an IPv6 address must be in brackets: \"[::1]:port\"");
        }
        if (put_host(s, colon ? (size_t)(colon - s) : len, out, err, errlen) < 0)
            return -1;
    }
    if (colon != NULL)
        return put_port(colon + 1, (size_t)(end - colon - 1), out, err, errlen);
    if (default_port < 1 || default_port > 65535)
        return say(out, err, errlen, "no port");
    out->port = default_port;
    return 0;
}
