/* amqpurl.h — the [amqp] url, amqp://user:pass@host:port/vhost, read without I/O, so the
 * config check (-t) and the publisher (amqppub.h) accept and refuse the same strings.
 *
 * The grammar is RabbitMQ's URI spec with pika's one leniency: user, password and vhost are
 * percent-decoded ("%2F" is a '/', "%40" an '@'); no user part means guest:guest, no port
 * 5672, no path (or a bare "/") the default vhost "/". The host and port follow the rules of
 * every address the daemon reads (base/netaddr.h): a name, an IPv4 address or an IPv6 address
 * in brackets, a port 1..65535. amqps://, query parameters and fragments are refused with a
 * message that says so rather than being ignored. */
#ifndef HG_AMQPURL_H
#define HG_AMQPURL_H

#include <stddef.h>

#define AMQPURL_MAX 256 /* every field fits in an AMQP short string: at most 255 bytes */

struct amqpurl {
    char user[AMQPURL_MAX];
    char password[AMQPURL_MAX];
    char host[AMQPURL_MAX]; /* without the brackets of an IPv6 address */
    char vhost[AMQPURL_MAX];
    int port;
};

/* Parse and check `url` into *out. 0, or -1 with err filled (what is wrong and how to write
 * it, without the URL itself, which holds the password). *out is all zero on failure. */
int amqpurl_parse(const char *url, struct amqpurl *out, char *err, size_t errlen) __attribute__((warn_unused_result));

/* The URL of *u for logs: the password as "***", vhost re-encoded (amqp://u:***@h:5672/%2F). */
void amqpurl_redact(const struct amqpurl *u, char *buf, size_t len);

#endif
