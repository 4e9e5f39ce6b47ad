/* netaddr.h — a network address, "host", "host:port", "[IPv6]" or "[IPv6]:port", read without
 * I/O. Every address the daemon is given goes through here, so they follow one rule set and
 * refuse with one message style: the [redis] address and the Cluster seeds (core/raddr.h), the
 * host of the [amqp] url (core/amqpurl.h) and of a webhook URL (delivery/whclient.h).
 *
 * The rules. A host is one of
 *   - an IPv6 address in brackets, as inet_pton reads it ("[::1]", "[2001:db8::7]"), without a
 *     zone id ("%eth0"); outside brackets it is refused (is "::1:80" the host "::1", port 80?);
 *   - an IPv4 address, as inet_pton reads it (four decimal numbers, no leading zeros): a host
 *     of digits and dots only is read as one;
 *   - a name: dot-separated labels of letters, digits, '-' and '_', each 1..63 bytes and
 *     neither starting nor ending with '-', the last not all digits (an IPv4 address was
 *     meant), the whole at most NETADDR_HOST_MAX bytes (no trailing dot).
 * A port is ':' and decimal digits, valued 1..65535 ("080" is 80). Without one the caller's
 * default applies (5672 for amqp://, 80 or 443 for webhooks); a caller without a default (a
 * Redis address) refuses the address. Nothing may follow the port.
 *
 * The messages name what is wrong, in lower case without a final stop, with the offending
 * text in double quotes (a single character in single quotes), and never the whole input (an
 * amqp url holds a password). Every caller shows the same port message:
 * port must be a number 1..65535, not "0". */
#ifndef HG_NETADDR_H
#define HG_NETADDR_H

#include <stddef.h>

#define NETADDR_HOST_MAX 253 /* longest host, in bytes: a DNS name's limit */

enum netaddr_kind {
    NETADDR_NAME = 0, /* a host name, resolved later */
    NETADDR_IPV4 = 4, /* a dotted IPv4 address */
    NETADDR_IPV6 = 6, /* an IPv6 address (written in brackets) */
};

struct netaddr {
    enum netaddr_kind kind;
    int port;                        /* 1..65535: as written, else the caller's default */
    char host[NETADDR_HOST_MAX + 1]; /* as written (case kept); an IPv6 address without brackets */
};

/* Parse s[0..len) (no NUL needed) into *out. default_port (1..65535) is the port when none is
 * written; 0 makes a port required. 0, or -1 with err filled (err may be NULL) and *out all
 * zero. */
int netaddr_parse(const char *s, size_t len, int default_port, struct netaddr *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
