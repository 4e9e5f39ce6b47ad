/* hmap.h — the one hash map of the daemon, and its one hash function.
 *
 * Keys are byte strings, copied into the map (a pointer key is its sizeof(void *) bytes, a
 * topic its characters); values are the caller's pointers, never owned by the map. Open
 * addressing with linear probing over entries that hold their hash, so a probe compares
 * bytes only when hashes match; backward-shift deletion keeps lookups short without
 * tombstones. Used for a worker's connections (bufferevent -> conn), parked long-polls by
 * topic, rate-limit buckets and the per-topic merge of /stats. Not thread-safe. */
#ifndef HG_HMAP_H
#define HG_HMAP_H

#include <stddef.h>
#include <stdint.h>

struct hmap_entry;

struct hmap {
    struct hmap_entry **slots;
    size_t cap; /* power of two, or 0 before the first put */
    size_t count;
};

#define HMAP_INIT                                                                                                      \
    {                                                                                                                  \
        NULL, 0, 0                                                                                                     \
    }

/* 64-bit FNV-1a: cheap, and spreads short keys (topics, pointers) well enough for probing;
 * also the name hash of the fleet's rendezvous ownership. (A topic's shard, id_topic_shard in
 * ids.c, keeps its own 32-bit FNV-1a: it is part of the data layout and can never change.) */
uint64_t hmap_hash_bytes(const void *p, size_t len);

/* The value stored under key, or NULL. */
void *hmap_get(const struct hmap *m, const void *key, size_t len);

/* Store key -> value (replacing the value of an existing key). 0, or -1 when out of memory
 * (the map is unchanged). value must not be NULL. */
int hmap_put(struct hmap *m, const void *key, size_t len, void *value) __attribute__((warn_unused_result));

/* Remove key; returns the value it had, or NULL when absent. */
void *hmap_remove(struct hmap *m, const void *key, size_t len);

/* Iterate: `pos` starts at 0; returns the next value (its key through `key` and `len` when not NULL)
 * or NULL at the end. The map must not change during an iteration. */
void *hmap_next(const struct hmap *m, size_t *pos, const void **key, size_t *len);

/* Free the map's own memory (not the values). The map is empty and reusable afterwards. */
void hmap_free(struct hmap *m);

/* Pointer keys, the common case. */
static inline void *hmap_get_ptr(const struct hmap *m, const void *p)
{
    return hmap_get(m, &p, sizeof p);
}

#endif
