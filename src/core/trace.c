/* trace.c — see trace.h. */
#include "core/trace.h"

#include <string.h>

static int is_lhex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* n lowercase hex digits at s; *zero tells whether all were '0'. */
static int hex_run(const char *s, size_t n, int *zero)
{
    *zero = 1;
    for (size_t i = 0; i < n; i++) {
        if (!is_lhex(s[i]))
            return 0;
        if (s[i] != '0')
            *zero = 0;
    }
    return 1;
}

int trace_parent_valid(const char *s, size_t len)
{
    int zero;
    if (s == NULL || len < TRACE_PARENT_LEN)
        return 0;
    if (!hex_run(s, 2, &zero) || (s[0] == 'f' && s[1] == 'f'))
        return 0;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-')
        return 0;
    if (!hex_run(s + 3, 32, &zero) || zero)
        return 0; /* trace-id */
    if (!hex_run(s + 36, 16, &zero) || zero)
        return 0; /* parent-id */
    if (!hex_run(s + 53, 2, &zero))
        return 0; /* flags */
    if (s[0] == '0' && s[1] == '0')
        return len == TRACE_PARENT_LEN;
    /* a later version: its fields may follow, after a '-' */
    return len == TRACE_PARENT_LEN || s[TRACE_PARENT_LEN] == '-';
}

static int key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/' || c == '@';
}

/* One list-member m[0..n), spaces around it already trimmed: empty, or key=value. */
static int member_valid(const char *m, size_t n)
{
    if (n == 0)
        return 1;
    const char *eq = memchr(m, '=', n);
    if (eq == NULL || eq == m || (size_t)(eq - m) > 256)
        return 0;
    size_t klen = (size_t)(eq - m), vlen = n - klen - 1;
    if (!((m[0] >= 'a' && m[0] <= 'z') || (m[0] >= '0' && m[0] <= '9')))
        return 0;
    for (size_t i = 0; i < klen; i++)
        if (!key_char(m[i]))
            return 0;
    if (vlen == 0 || vlen > 256 || eq[vlen] == ' ')
        return 0;
    for (size_t i = 1; i <= vlen; i++)
        if (eq[i] == ',' || eq[i] == '=')
            return 0;
    return 1;
}

int trace_state_valid(const char *s, size_t len, size_t *start, size_t *keep_len)
{
    if (s == NULL)
        return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return 0; /* control characters, DEL, anything not ASCII */
    size_t a = 0, b = len;
    while (a < b && s[a] == ' ')
        a++;
    while (b > a && s[b - 1] == ' ')
        b--;
    if (b - a == 0 || b - a > TRACE_STATE_MAX)
        return 0;
    int members = 0, nonempty = 0;
    for (size_t p = a; p <= b;) {
        const char *comma = memchr(s + p, ',', b - p);
        size_t end = comma ? (size_t)(comma - s) : b;
        size_t ma = p, mb = end;
        while (ma < mb && s[ma] == ' ')
            ma++;
        while (mb > ma && s[mb - 1] == ' ')
            mb--;
        if (!member_valid(s + ma, mb - ma))
            return 0;
        nonempty += mb > ma;
        if (mb > ma && ++members > TRACE_STATE_MEMBERS)
            return 0;
        p = end + 1;
    }
    if (!nonempty)
        return 0;
    *start = a;
    *keep_len = b - a;
    return 1;
}

int trace_parent_make(char *out, const unsigned char random[TRACE_RANDOM_BYTES])
{
    static const char hex[] = "0123456789abcdef";
    int trace_zero = 1, parent_zero = 1;
    for (int i = 0; i < 16; i++)
        trace_zero &= random[i] == 0;
    for (int i = 16; i < TRACE_RANDOM_BYTES; i++)
        parent_zero &= random[i] == 0;
    if (trace_zero || parent_zero)
        return -1;
    char *p = out;
    memcpy(p, "00-", 3);
    p += 3;
    for (int i = 0; i < TRACE_RANDOM_BYTES; i++) {
        if (i == 16)
            *p++ = '-';
        *p++ = hex[random[i] >> 4];
        *p++ = hex[random[i] & 15];
    }
    memcpy(p, "-01", 4); /* sampled: a fire starts a trace that is worth recording */
    return 0;
}
