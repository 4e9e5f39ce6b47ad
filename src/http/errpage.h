/* errpage.h — evhttp's own error pages, recognised and rewritten as our JSON errors.
 *
 * evhttp in libevent 2.1 answers some bad requests itself (malformed request line or headers,
 * a body or header block over the limit) with an HTML page, and 2.1 has no hook to change
 * that (evhttp_set_errorcb arrived in 2.2). The contract promises JSON errors, so httpconn.c
 * hands the bytes evhttp wrote on its own to errpage_rewrite and, when it says so, replaces
 * them before they reach the socket. Pure functions of their arguments: no libevent, no state. */
#ifndef HG_ERRPAGE_H
#define HG_ERRPAGE_H

#include <stddef.h>

#include "base/sbuf.h"

/* The contract's error object {"error":code,"message":...[,members]}: `members` holds more
 * JSON object members ("k":v,...), NULL or empty for none. */
void errpage_json(struct sbuf *sb, const char *code, const char *message, const struct sbuf *members);

/* The standard reason phrase of an HTTP status ("Error" for one we never send). */
const char *errpage_reason(int status);

enum errpage_verdict {
    ERRPAGE_WAIT,    /* an error page, not complete yet (or not a response): look again later */
    ERRPAGE_KEEP,    /* not an error page (a success or 1xx only): leave the bytes alone */
    ERRPAGE_REWRITE, /* `out` holds the whole replacement for the bytes given */
};

/* Look at the `len` bytes evhttp wrote on its own. `corrupt_chunked`: the request used chunked
 * encoding and had not sent more than max_body (libevent reports a corrupt chunked body as
 * "too long"). On ERRPAGE_REWRITE, *status is the status of the JSON answer (never 5xx) and
 * `out` the bytes to send instead: any "100 Continue" head before the page, then a complete
 * response with Connection: close. */
enum errpage_verdict errpage_rewrite(const char *p, size_t len, int corrupt_chunked, struct sbuf *out, int *status);

#endif
