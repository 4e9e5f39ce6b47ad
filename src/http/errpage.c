/* errpage.c — see errpage.h. */
#include "http/errpage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ERRPAGE_MAX 16384 /* evhttp's pages are small: more than this is not one of them */

static const char *find_crlf2(const char *p, size_t len)
{
    for (size_t i = 0; i + 3 < len; i++)
        if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n')
            return p + i;
    return NULL;
}

static long header_content_length(const char *head, size_t len)
{
    static const char name[] = "\r\nContent-Length:";
    for (size_t i = 0; i + sizeof name - 1 <= len; i++)
        if (strncasecmp(head + i, name, sizeof name - 1) == 0)
            return strtol(head + i + sizeof name - 1, NULL, 10);
    return -1;
}

const char *errpage_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 429:
        return "Too Many Requests";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}

void errpage_json(struct sbuf *sb, const char *code, const char *message, const struct sbuf *members)
{
    sb_puts(sb, "{\"error\":");
    sb_json_cstr(sb, code);
    sb_puts(sb, ",\"message\":");
    sb_json_cstr(sb, message);
    if (members && members->len) {
        sb_putc(sb, ',');
        sb_put(sb, members->data, members->len);
    }
    sb_putc(sb, '}');
}

enum errpage_verdict errpage_rewrite(const char *p, size_t len, int corrupt_chunked, struct sbuf *out, int *status)
{
    if (len > ERRPAGE_MAX)
        return ERRPAGE_KEEP;
    size_t off = 0;
    for (;;) {
        const char *end = find_crlf2(p + off, len - off);
        if (end == NULL || len - off < 12 || strncmp(p + off, "HTTP/1.", 7) != 0)
            return ERRPAGE_WAIT; /* header block incomplete (or not a response): wait for more */
        int code_in = atoi(p + off + 9);
        size_t head_len = (size_t)(end - (p + off)) + 4;
        if (code_in >= 100 && code_in < 200) {
            off += head_len; /* "100 Continue": keep it */
            continue;
        }
        if (code_in < 400)
            return ERRPAGE_KEEP;
        long cl = header_content_length(p + off, head_len);
        size_t body_len = len - off - head_len;
        if (cl >= 0 ? body_len < (size_t)cl : !(body_len >= 15 && memcmp(p + len - 15, "</BODY></HTML>\n", 15) == 0))
            return ERRPAGE_WAIT; /* body still being written */

        int code = code_in;
        if (code == 413 && corrupt_chunked)
            code = 400; /* libevent 2.1 reports a corrupt chunked body as "too long" */
        const char *name = code == 413                  ? "too_large"
                           : code == 404                ? "not_found"
                           : code == 405 || code == 501 ? "method_not_allowed"
                                                        : "bad_request";
        const char *message =
            code == 413                      ? "request body larger than the server accepts (max_body)"
            : corrupt_chunked && code == 400 ? "malformed chunked request body (chunk extensions are not supported)"
            : code == 501                    ? "unsupported HTTP method"
                          : "malformed HTTP request line or headers (or a header block over max_header bytes)";
        if (code == 501)
            code = 405; /* never a 5xx for bad input */
        else if (code != 413 && code != 404)
            code = 400;

        struct sbuf body = SBUF_INIT;
        errpage_json(&body, name, message, NULL);
        sb_putc(&body, '\n');
        sb_put(out, p, off);
        sb_printf(out,
                  "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                  "Connection: close\r\n\r\n",
                  code, errpage_reason(code), body.len);
        sb_put(out, body.data, body.len);
        sb_free(&body);
        *status = code;
        return out->oom ? ERRPAGE_KEEP : ERRPAGE_REWRITE;
    }
}
