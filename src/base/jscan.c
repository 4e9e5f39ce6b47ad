/* jscan.c — see jscan.h. Recursive descent with an explicit depth limit. */
#include "base/jscan.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

void jscan_init(struct jscan *j, const char *s, size_t len)
{
    j->s = s;
    j->len = len;
    j->pos = 0;
    j->err[0] = '\0';
}

static int fail(struct jscan *j, const char *what)
{
    snprintf(j->err, sizeof j->err, "%s at byte %zu", what, j->pos);
    return -1;
}

static void skip_ws(struct jscan *j)
{
    while (j->pos < j->len) {
        char c = j->s[j->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        j->pos++;
    }
}

int jscan_peek(struct jscan *j)
{
    skip_ws(j);
    return j->pos < j->len ? (unsigned char)j->s[j->pos] : -1;
}

int jscan_expect(struct jscan *j, char c)
{
    if (jscan_peek(j) != (unsigned char)c) {
        char what[32];
        snprintf(what, sizeof what, "expected '%c'", c);
        return fail(j, what);
    }
    j->pos++;
    return 0;
}

int jscan_end(struct jscan *j)
{
    return jscan_peek(j) == -1 ? 0 : fail(j, "unexpected text after the JSON value");
}

static int hex4(struct jscan *j, uint32_t *out)
{
    if (j->len - j->pos < 4)
        return fail(j, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = j->s[j->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return fail(j, "bad \\u escape");
    }
    *out = v;
    return 0;
}

static void put_utf8(char *out, size_t cap, size_t *n, int *trunc, uint32_t cp)
{
    char b[4];
    size_t k;
    if (cp < 0x80) {
        b[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    if (out == NULL)
        return;
    if (*n + k > cap) {
        *trunc = 1;
        return;
    }
    memcpy(out + *n, b, k);
    *n += k;
}

/* One UTF-8 sequence starting at pos (first byte >= 0x80): validate and consume. */
static int utf8_seq(struct jscan *j, uint32_t *cp_out)
{
    const unsigned char *p = (const unsigned char *)j->s + j->pos;
    size_t left = j->len - j->pos;
    uint32_t cp;
    int extra;
    if ((p[0] & 0xE0) == 0xC0) {
        cp = p[0] & 0x1F;
        extra = 1;
    } else if ((p[0] & 0xF0) == 0xE0) {
        cp = p[0] & 0x0F;
        extra = 2;
    } else if ((p[0] & 0xF8) == 0xF0) {
        cp = p[0] & 0x07;
        extra = 3;
    } else {
        return fail(j, "invalid UTF-8");
    }
    if (left <= (size_t)extra)
        return fail(j, "truncated UTF-8");
    for (int i = 1; i <= extra; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return fail(j, "invalid UTF-8");
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return fail(j, "invalid UTF-8");
    j->pos += (size_t)extra + 1;
    *cp_out = cp;
    return 0;
}

int jscan_string(struct jscan *j, char *out, size_t cap, size_t *outlen, int *truncated)
{
    size_t n = 0;
    int trunc = 0;
    if (jscan_peek(j) != '"')
        return fail(j, "expected a string");
    j->pos++;
    for (;;) {
        if (j->pos >= j->len)
            return fail(j, "unterminated string");
        unsigned char c = (unsigned char)j->s[j->pos];
        if (c == '"') {
            j->pos++;
            break;
        }
        if (c < 0x20)
            return fail(j, "control character in a string");
        if (c == '\\') {
            j->pos++;
            if (j->pos >= j->len)
                return fail(j, "unterminated string");
            char e = j->s[j->pos++];
            uint32_t cp;
            switch (e) {
            case '"':
                cp = '"';
                break;
            case '\\':
                cp = '\\';
                break;
            case '/':
                cp = '/';
                break;
            case 'b':
                cp = '\b';
                break;
            case 'f':
                cp = '\f';
                break;
            case 'n':
                cp = '\n';
                break;
            case 'r':
                cp = '\r';
                break;
            case 't':
                cp = '\t';
                break;
            case 'u':
                if (hex4(j, &cp) < 0)
                    return -1;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (j->len - j->pos < 2 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u')
                        return fail(j, "unpaired surrogate in \\u escape");
                    j->pos += 2;
                    if (hex4(j, &lo) < 0)
                        return -1;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return fail(j, "unpaired surrogate in \\u escape");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return fail(j, "unpaired surrogate in \\u escape");
                }
                break;
            default:
                return fail(j, "bad escape in a string");
            }
            put_utf8(out, cap, &n, &trunc, cp);
            continue;
        }
        if (c < 0x80) {
            if (out) {
                if (n < cap)
                    out[n++] = (char)c;
                else
                    trunc = 1;
            }
            j->pos++;
            continue;
        }
        size_t at = j->pos;
        uint32_t cp;
        if (utf8_seq(j, &cp) < 0)
            return -1;
        if (out) {
            size_t k = j->pos - at;
            if (n + k <= cap) {
                memcpy(out + n, j->s + at, k);
                n += k;
            } else {
                trunc = 1;
            }
        }
    }
    if (outlen)
        *outlen = n;
    if (truncated)
        *truncated = trunc;
    return 0;
}

static int digits(struct jscan *j)
{
    size_t start = j->pos;
    while (j->pos < j->len && j->s[j->pos] >= '0' && j->s[j->pos] <= '9')
        j->pos++;
    return j->pos > start ? 0 : fail(j, "expected a digit");
}

static int number(struct jscan *j)
{
    if (j->s[j->pos] == '-')
        j->pos++;
    if (j->pos >= j->len)
        return fail(j, "truncated number");
    if (j->s[j->pos] == '0')
        j->pos++;
    else if (digits(j) < 0)
        return -1;
    if (j->pos < j->len && j->s[j->pos] == '.') {
        j->pos++;
        if (digits(j) < 0)
            return -1;
    }
    if (j->pos < j->len && (j->s[j->pos] == 'e' || j->s[j->pos] == 'E')) {
        j->pos++;
        if (j->pos < j->len && (j->s[j->pos] == '+' || j->s[j->pos] == '-'))
            j->pos++;
        if (digits(j) < 0)
            return -1;
    }
    return 0;
}

static int literal(struct jscan *j, const char *word)
{
    size_t n = strlen(word);
    if (j->len - j->pos < n || memcmp(j->s + j->pos, word, n) != 0)
        return fail(j, "invalid literal");
    j->pos += n;
    return 0;
}

static int value(struct jscan *j, int depth)
{
    int c = jscan_peek(j);
    switch (c) {
    case '{':
    case '[': {
        if (depth >= JSCAN_MAX_DEPTH)
            return fail(j, "nested too deeply");
        char close = c == '{' ? '}' : ']';
        j->pos++;
        if (jscan_peek(j) == close) {
            j->pos++;
            return 0;
        }
        for (;;) {
            if (c == '{') {
                if (jscan_string(j, NULL, 0, NULL, NULL) < 0 || jscan_expect(j, ':') < 0)
                    return -1;
            }
            if (value(j, depth + 1) < 0)
                return -1;
            int next = jscan_peek(j);
            if (next == ',') {
                j->pos++;
                continue;
            }
            if (next == close) {
                j->pos++;
                return 0;
            }
            return fail(j, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    case '"':
        return jscan_string(j, NULL, 0, NULL, NULL);
    case 't':
        return literal(j, "true");
    case 'f':
        return literal(j, "false");
    case 'n':
        return literal(j, "null");
    case -1:
        return fail(j, "unexpected end of input");
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return number(j);
        return fail(j, "unexpected character");
    }
}

int jscan_value(struct jscan *j, size_t *start, size_t *end)
{
    skip_ws(j);
    size_t s = j->pos;
    if (value(j, 0) < 0)
        return -1;
    if (start)
        *start = s;
    if (end)
        *end = j->pos;
    return 0;
}
