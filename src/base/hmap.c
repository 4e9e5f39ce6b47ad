/* hmap.c — see hmap.h. */
#include "base/hmap.h"

#include <stdlib.h>
#include <string.h>

struct hmap_entry {
    uint64_t hash;
    void *value;
    size_t len;
    unsigned char key[];
};

uint64_t hmap_hash_bytes(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = UINT64_C(0xcbf29ce484222325); /* the FNV-1a offset basis */
    for (size_t i = 0; i < len; i++) {
        h ^= s[i];
        h *= UINT64_C(0x100000001b3); /* the FNV prime */
    }
    return h;
}

static size_t home_of(uint64_t hash, size_t cap)
{
    return (size_t)(hash ^ (hash >> 32)) & (cap - 1);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t find(const struct hmap *m, uint64_t hash, const void *key, size_t len)
{
    size_t mask = m->cap - 1;
    for (size_t i = home_of(hash, m->cap);; i = (i + 1) & mask) {
        const struct hmap_entry *e = m->slots[i];
        if (e == NULL || (e->hash == hash && e->len == len && memcmp(e->key, key, len) == 0))
            return i;
    }
}

static int grow(struct hmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    struct hmap_entry **slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        struct hmap_entry *e = m->slots[i];
        if (e == NULL)
            continue;
        size_t j = home_of(e->hash, cap);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = e;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

void *hmap_get(const struct hmap *m, const void *key, size_t len)
{
    if (m->count == 0)
        return NULL;
    const struct hmap_entry *e = m->slots[find(m, hmap_hash_bytes(key, len), key, len)];
    return e ? e->value : NULL;
}

int hmap_put(struct hmap *m, const void *key, size_t len, void *value)
{
    if (value == NULL)
        return -1;
    if ((m->count + 1) * 4 > m->cap * 3 && grow(m) < 0) /* load factor at most 3/4 */
        return -1;
    uint64_t hash = hmap_hash_bytes(key, len);
    size_t i = find(m, hash, key, len);
    if (m->slots[i]) {
        m->slots[i]->value = value;
        return 0;
    }
    struct hmap_entry *e = malloc(sizeof *e + len);
    if (e == NULL)
        return -1;
    e->hash = hash;
    e->value = value;
    e->len = len;
    memcpy(e->key, key, len);
    m->slots[i] = e;
    m->count++;
    return 0;
}

void *hmap_remove(struct hmap *m, const void *key, size_t len)
{
    if (m->count == 0)
        return NULL;
    size_t mask = m->cap - 1, hole = find(m, hmap_hash_bytes(key, len), key, len);
    struct hmap_entry *gone = m->slots[hole];
    if (gone == NULL)
        return NULL;
    void *value = gone->value;
    free(gone);
    /* backward shift: pull later members of the run into the hole while they stay findable */
    for (size_t j = (hole + 1) & mask; m->slots[j]; j = (j + 1) & mask) {
        size_t home = home_of(m->slots[j]->hash, m->cap);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole] = NULL;
    m->count--;
    return value;
}

void *hmap_next(const struct hmap *m, size_t *pos, const void **key, size_t *len)
{
    for (; *pos < m->cap; (*pos)++) {
        const struct hmap_entry *e = m->slots[*pos];
        if (e == NULL)
            continue;
        (*pos)++;
        if (key)
            *key = e->key;
        if (len)
            *len = e->len;
        return e->value;
    }
    return NULL;
}

void hmap_free(struct hmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->slots[i]);
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}
