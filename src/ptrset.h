/* ptrset.h — a set of pointers (open addressing, linear probing, backward-shift delete).
 * Used by a worker to know its live HTTP connections. Not thread-safe. */
#ifndef HG_PTRSET_H
#define HG_PTRSET_H

#include <stddef.h>

struct ptrset {
    void **slots;
    size_t cap;   /* power of two, or 0 */
    size_t count;
};

/* Add p; returns 1 when added, 0 when already present, -1 when out of memory. */
int ptrset_add(struct ptrset *s, void *p);
/* Remove p; returns 1 when removed, 0 when absent. */
int ptrset_remove(struct ptrset *s, void *p);
int ptrset_has(const struct ptrset *s, const void *p);
void ptrset_free(struct ptrset *s);

#endif
