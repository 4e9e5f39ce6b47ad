/* ptrset.c — see ptrset.h. */
#include "ptrset.h"

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

static int grow(struct ptrset *s)
{
    size_t cap = s->cap ? s->cap * 2 : 64;
    void **slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i]) {
            size_t j = slot_of(s->slots[i], cap);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = s->slots[i];
        }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
    return 0;
}

int ptrset_has(const struct ptrset *s, const void *p)
{
    if (s->cap == 0 || p == NULL)
        return 0;
    for (size_t i = slot_of(p, s->cap); s->slots[i]; i = (i + 1) & (s->cap - 1))
        if (s->slots[i] == p)
            return 1;
    return 0;
}

int ptrset_add(struct ptrset *s, void *p)
{
    if (p == NULL)
        return -1;
    if (ptrset_has(s, p))
        return 0;
    if ((s->count + 1) * 2 > s->cap && grow(s) < 0)
        return -1;
    size_t i = slot_of(p, s->cap);
    while (s->slots[i])
        i = (i + 1) & (s->cap - 1);
    s->slots[i] = p;
    s->count++;
    return 1;
}

int ptrset_remove(struct ptrset *s, void *p)
{
    if (s->cap == 0 || p == NULL)
        return 0;
    size_t mask = s->cap - 1, i = slot_of(p, s->cap);
    while (s->slots[i] && s->slots[i] != p)
        i = (i + 1) & mask;
    if (s->slots[i] == NULL)
        return 0;
    /* backward-shift: move later members of the run into the hole when that keeps them findable */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; s->slots[j]; j = (j + 1) & mask) {
        size_t home = slot_of(s->slots[j], s->cap);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            s->slots[hole] = s->slots[j];
            hole = j;
        }
    }
    s->slots[hole] = NULL;
    s->count--;
    return 1;
}

void ptrset_free(struct ptrset *s)
{
    free(s->slots);
    s->slots = NULL;
    s->cap = s->count = 0;
}
