/* sbuf.h — a growable byte buffer, and JSON writing helpers on top of it.
 *
 * Allocation failure is sticky: the buffer stops growing, `oom` is set, and the caller
 * checks it once at the end instead of after every append. */
#ifndef HG_SBUF_H
#define HG_SBUF_H

#include <stddef.h>
#include <stdint.h>

struct sbuf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
    int oom;
};

#define SBUF_INIT                                                                                                      \
    {                                                                                                                  \
        NULL, 0, 0, 0                                                                                                  \
    }

void sb_free(struct sbuf *sb);
void sb_reset(struct sbuf *sb);
/* Make room for `extra` more bytes (plus the NUL); 0, or -1 (and oom) when out of memory.
 * Callers may then write up to `extra` bytes at data + len and advance len themselves. */
int sb_reserve(struct sbuf *sb, size_t extra);
void sb_put(struct sbuf *sb, const void *data, size_t len);
void sb_puts(struct sbuf *sb, const char *s);
void sb_putc(struct sbuf *sb, char c);
void sb_printf(struct sbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Hand the buffer's memory to the caller (free() it); the sbuf is left empty. */
char *sb_steal(struct sbuf *sb, size_t *len);

/* JSON: a quoted, escaped string (input is UTF-8; control characters are \u-escaped). */
void sb_json_str(struct sbuf *sb, const char *s, size_t len);
void sb_json_cstr(struct sbuf *sb, const char *s);
void sb_json_int(struct sbuf *sb, int64_t v);
void sb_json_uint(struct sbuf *sb, uint64_t v);
/* `"key":` */
void sb_json_key(struct sbuf *sb, const char *key);

/* Fixed-size C strings, built without printf: the per-request paths (actors, client
 * addresses, script arguments) used snprintf, whose format parsing showed in profiles. */
#define INT_TEXT_MAX 21 /* "-9223372036854775808" and its NUL */
/* `v` in decimal, NUL-terminated; returns its length. */
size_t sb_int_to_text(int64_t v, char out[INT_TEXT_MAX]);
/* Append `s` at out + at (at < cap), truncated to fit `cap` bytes with the NUL, as snprintf
 * would; returns the new length. Chain calls to join pieces. */
size_t sb_str_put(char *out, size_t cap, size_t at, const char *s);

#endif
