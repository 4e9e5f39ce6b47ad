/* ptrmap.c — see ptrmap.h. */
#include "ptrmap.h"

#include <stdint.h>
#include <stdlib.h>

static size_t slot_of(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int grow(struct ptrmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    void **keys = calloc(cap, sizeof *keys), **values = calloc(cap, sizeof *values);
    if (keys == NULL || values == NULL) {
        free(keys);
        free(values);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            size_t j = slot_of(m->keys[i], cap);
            while (keys[j])
                j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            values[j] = m->values[i];
        }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = cap;
    return 0;
}

static size_t find(const struct ptrmap *m, const void *key)
{
    size_t i = slot_of(key, m->cap);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

void *ptrmap_get(const struct ptrmap *m, const void *key)
{
    if (m->cap == 0 || key == NULL)
        return NULL;
    size_t i = find(m, key);
    return m->keys[i] ? m->values[i] : NULL;
}

int ptrmap_put(struct ptrmap *m, void *key, void *value)
{
    if (key == NULL)
        return -1;
    if ((m->count + 1) * 2 > m->cap && grow(m) < 0)
        return -1;
    size_t i = find(m, key);
    if (m->keys[i] == NULL) {
        m->keys[i] = key;
        m->count++;
    }
    m->values[i] = value;
    return 0;
}

void *ptrmap_remove(struct ptrmap *m, const void *key)
{
    if (m->cap == 0 || key == NULL)
        return NULL;
    size_t mask = m->cap - 1, i = find(m, key);
    if (m->keys[i] == NULL)
        return NULL;
    void *value = m->values[i];
    /* backward shift: pull later members of the run into the hole while they stay findable */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m->keys[j], m->cap);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->keys[hole] = m->keys[j];
            m->values[hole] = m->values[j];
            hole = j;
        }
    }
    m->keys[hole] = NULL;
    m->values[hole] = NULL;
    m->count--;
    return value;
}

void ptrmap_free(struct ptrmap *m)
{
    free(m->keys);
    free(m->values);
    m->keys = m->values = NULL;
    m->cap = m->count = 0;
}
