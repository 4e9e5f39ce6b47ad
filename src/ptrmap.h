/* ptrmap.h — a map from pointers to pointers (open addressing, linear probing, backward-shift
 * deletion). A worker uses one to find its connection record from a bufferevent.
 * Not thread-safe. */
#ifndef HG_PTRMAP_H
#define HG_PTRMAP_H

#include <stddef.h>

struct ptrmap {
    void **keys;
    void **values;
    size_t cap;   /* power of two, or 0 */
    size_t count;
};

/* Set key -> value (replacing). 0, or -1 when out of memory. key must not be NULL. */
int ptrmap_put(struct ptrmap *m, void *key, void *value) __attribute__((warn_unused_result));
/* The value for key, or NULL. */
void *ptrmap_get(const struct ptrmap *m, const void *key);
/* Remove key; returns its value, or NULL when absent. */
void *ptrmap_remove(struct ptrmap *m, const void *key);
void ptrmap_free(struct ptrmap *m);

#endif
