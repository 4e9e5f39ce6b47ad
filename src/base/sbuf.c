/* sbuf.c — see sbuf.h. */
#include "base/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(struct sbuf *sb, size_t extra)
{
    if (sb->oom)
        return -1;
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap)
        return 0;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need)
        cap *= 2;
    char *data = realloc(sb->data, cap);
    if (data == NULL) {
        sb->oom = 1;
        return -1;
    }
    sb->data = data;
    sb->cap = cap;
    sb->data[sb->len] = '\0'; /* a fresh allocation is not terminated yet (sb_reserve, sb_steal) */
    return 0;
}

int sb_reserve(struct sbuf *sb, size_t extra)
{
    return grow(sb, extra);
}

void sb_free(struct sbuf *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->oom = 0;
}

void sb_reset(struct sbuf *sb)
{
    sb->len = 0;
    sb->oom = 0;
    if (sb->data)
        sb->data[0] = '\0';
}

void sb_put(struct sbuf *sb, const void *data, size_t len)
{
    if (grow(sb, len) < 0)
        return;
    memcpy(sb->data + sb->len, data, len);
    sb->len += len;
    sb->data[sb->len] = '\0';
}

void sb_puts(struct sbuf *sb, const char *s)
{
    sb_put(sb, s, strlen(s));
}

void sb_putc(struct sbuf *sb, char c)
{
    if (grow(sb, 1) < 0)
        return;
    sb->data[sb->len++] = c;
    sb->data[sb->len] = '\0';
}

void sb_printf(struct sbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || grow(sb, (size_t)n) < 0)
        return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

char *sb_steal(struct sbuf *sb, size_t *len)
{
    if (sb->data == NULL)
        grow(sb, 0);
    char *data = sb->data;
    if (len)
        *len = sb->len;
    sb->data = NULL;
    sb->len = sb->cap = 0;
    return data;
}

void sb_json_str(struct sbuf *sb, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    if (grow(sb, len + 2) < 0)
        return;
    sb_putc(sb, '"');
    size_t run = 0; /* bytes that need no escaping, copied in one go */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        sb_put(sb, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"':
            sb_put(sb, "\\\"", 2);
            break;
        case '\\':
            sb_put(sb, "\\\\", 2);
            break;
        case '\n':
            sb_put(sb, "\\n", 2);
            break;
        case '\r':
            sb_put(sb, "\\r", 2);
            break;
        case '\t':
            sb_put(sb, "\\t", 2);
            break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            sb_put(sb, u, 6);
        }
        }
    }
    sb_put(sb, s + run, len - run);
    sb_putc(sb, '"');
}

void sb_json_cstr(struct sbuf *sb, const char *s)
{
    sb_json_str(sb, s, strlen(s));
}

/* Decimal digits by hand: printf's machinery is a measurable share of a request's CPU. */
/* The decimal digits of `u`, written backwards so that they end just before `end`; returns
 * where they start. */
static char *digits_before(char *end, uint64_t u)
{
    do {
        *--end = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    return end;
}

void sb_json_uint(struct sbuf *sb, uint64_t v)
{
    char tmp[INT_TEXT_MAX];
    char *start = digits_before(tmp + sizeof tmp, v);
    sb_put(sb, start, (size_t)(tmp + sizeof tmp - start));
}

void sb_json_int(struct sbuf *sb, int64_t v)
{
    char tmp[INT_TEXT_MAX];
    sb_put(sb, tmp, sb_int_to_text(v, tmp));
}

void sb_json_key(struct sbuf *sb, const char *key)
{
    sb_json_cstr(sb, key);
    sb_putc(sb, ':');
}

size_t sb_int_to_text(int64_t v, char out[INT_TEXT_MAX])
{
    char tmp[INT_TEXT_MAX];
    char *end = tmp + sizeof tmp - 1;
    *end = '\0';
    char *start = digits_before(end, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
    if (v < 0)
        *--start = '-';
    memcpy(out, start, (size_t)(end - start) + 1);
    return (size_t)(end - start);
}

size_t sb_str_put(char *out, size_t cap, size_t at, const char *s)
{
    size_t room = cap - 1 - at;
    size_t len = strnlen(s, room);
    memcpy(out + at, s, len);
    out[at + len] = '\0';
    return at + len;
}
