/* ratelimit.c — see ratelimit.h. Keys are hashed (64-bit FNV-1a): tokens are not kept in
 * memory, and a collision only makes two clients share a bucket. */
#include "ratelimit.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#define PURGE_AT 4096 /* look for forgettable buckets when the table holds this many more */

struct bucket {
    uint64_t key;     /* 0 = empty slot */
    double tokens;
    int64_t at_us;    /* when tokens was computed */
};

struct ratelimit {
    pthread_mutex_t lock;
    double rate, burst;
    struct bucket *slots;
    size_t cap, count, purge_at;
};

static uint64_t hash_key(const char *s, size_t len)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(1099511628211);
    }
    return h ? h : 1;
}

static struct bucket *lookup(struct bucket *slots, size_t cap, uint64_t key)
{
    size_t i = (size_t)(key ^ (key >> 29)) & (cap - 1);
    while (slots[i].key && slots[i].key != key)
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static double refill(const struct ratelimit *rl, const struct bucket *b, int64_t now_us)
{
    double t = b->tokens + (double)(now_us - b->at_us) / 1e6 * rl->rate;
    return t > rl->burst ? rl->burst : t;
}

/* Rebuild the table at `cap` slots, dropping buckets that have refilled completely. */
static int rebuild(struct ratelimit *rl, size_t cap, int64_t now_us)
{
    struct bucket *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    size_t count = 0;
    for (size_t i = 0; i < rl->cap; i++) {
        const struct bucket *b = &rl->slots[i];
        if (b->key == 0 || refill(rl, b, now_us) >= rl->burst)
            continue;
        *lookup(slots, cap, b->key) = *b;
        count++;
    }
    free(rl->slots);
    rl->slots = slots;
    rl->cap = cap;
    rl->count = count;
    rl->purge_at = count + PURGE_AT;
    return 0;
}

struct ratelimit *ratelimit_new(int rate_per_second, int burst)
{
    struct ratelimit *rl = calloc(1, sizeof *rl);
    if (rl == NULL)
        return NULL;
    pthread_mutex_init(&rl->lock, NULL);
    rl->rate = rate_per_second;
    rl->burst = burst > 0 ? burst : rate_per_second;
    if (rebuild(rl, 1024, 0) < 0) {
        free(rl);
        return NULL;
    }
    return rl;
}

void ratelimit_free(struct ratelimit *rl)
{
    if (rl == NULL)
        return;
    pthread_mutex_destroy(&rl->lock);
    free(rl->slots);
    free(rl);
}

int ratelimit_take(struct ratelimit *rl, const char *key, size_t len, int64_t now_us)
{
    uint64_t k = hash_key(key, len);
    int wait = 0;
    pthread_mutex_lock(&rl->lock);
    if (rl->count >= rl->purge_at || (rl->count + 1) * 2 > rl->cap) {
        size_t cap = rl->cap;
        while ((rl->count + 1) * 2 > cap)
            cap *= 2;
        rebuild(rl, cap, now_us); /* on failure keep going with the old table */
    }
    struct bucket *b = lookup(rl->slots, rl->cap, k);
    if (b->key == 0 && (rl->count + 1) * 2 <= rl->cap) {
        b->key = k;
        b->tokens = rl->burst;
        b->at_us = now_us;
        rl->count++;
    }
    if (b->key == k) {
        b->tokens = refill(rl, b, now_us);
        b->at_us = now_us;
        if (b->tokens >= 1.0)
            b->tokens -= 1.0;
        else
            wait = (int)ceil((1.0 - b->tokens) / rl->rate);
    }
    pthread_mutex_unlock(&rl->lock);
    return wait > 0 ? wait : 0;
}

size_t ratelimit_size(struct ratelimit *rl)
{
    pthread_mutex_lock(&rl->lock);
    size_t n = rl->count;
    pthread_mutex_unlock(&rl->lock);
    return n;
}
