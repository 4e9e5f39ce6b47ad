/* farpend.c — see farpend.h. */
#include "farpend.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The index of topic in m, or -(insertion point) - 1. */
static int find(const struct farpend *m, const char *topic, size_t len)
{
    int lo = 0, hi = m->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = topic_cmp(m->e[mid].topic, m->e[mid].len, topic, len);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

int farpend_add(struct farpend *m, const char *topic, size_t len, int64_t jobs)
{
    if (len == 0 || len > TOPIC_MAX)
        return -1;
    int i = find(m, topic, len);
    if (i >= 0) {
        m->e[i].jobs += jobs;
        return 0;
    }
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 16;
        struct farpend_entry *grown = realloc(m->e, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        m->e = grown;
        m->cap = cap;
    }
    i = -i - 1;
    memmove(&m->e[i + 1], &m->e[i], (size_t)(m->n - i) * sizeof m->e[0]);
    memcpy(m->e[i].topic, topic, len);
    m->e[i].topic[len] = '\0';
    m->e[i].len = len;
    m->e[i].jobs = jobs;
    m->n++;
    return 0;
}

int farpend_copy(struct farpend *dst, const struct farpend *src)
{
    if (src->n > dst->cap) {
        struct farpend_entry *grown = realloc(dst->e, (size_t)src->n * sizeof *grown);
        if (grown == NULL)
            return -1;
        dst->e = grown;
        dst->cap = src->n;
    }
    if (src->n)
        memcpy(dst->e, src->e, (size_t)src->n * sizeof src->e[0]);
    dst->n = src->n;
    return 0;
}

int farpend_nonzero(const struct farpend *m)
{
    int k = 0;
    for (int i = 0; i < m->n; i++)
        k += m->e[i].jobs != 0;
    return k;
}

void farpend_clear(struct farpend *m)
{
    m->n = 0;
}

void farpend_free(struct farpend *m)
{
    free(m->e);
    *m = (struct farpend)FARPEND_INIT;
}

void farpend_json(const struct farpend *m, struct sbuf *sb)
{
    sb_putc(sb, '[');
    int first = 1;
    for (int i = 0; i < m->n; i++) {
        if (m->e[i].jobs == 0)
            continue;
        sb_puts(sb, first ? "[" : ",[");
        sb_json_str(sb, m->e[i].topic, m->e[i].len);
        sb_putc(sb, ',');
        sb_json_int(sb, m->e[i].jobs);
        sb_putc(sb, ']');
        first = 0;
    }
    sb_putc(sb, ']');
}

int farpend_parse_add(struct farpend *m, const char *text, size_t len)
{
    json_t *a = json_loadb(text, len, 0, NULL);
    int rc = json_is_array(a) ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < json_array_size(a); i++) {
        json_t *pair = json_array_get(a, i), *t = json_array_get(pair, 0), *j = json_array_get(pair, 1);
        if (json_array_size(pair) != 2 || !json_is_string(t) || !json_is_integer(j) ||
            farpend_add(m, json_string_value(t), json_string_length(t), json_integer_value(j)) < 0)
            rc = -1;
    }
    json_decref(a);
    return rc;
}
