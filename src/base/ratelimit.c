/* ratelimit.c — see ratelimit.h. Buckets are kept under the 64-bit hash of their key
 * (hmap.h's hmap_hash_bytes), not the key itself: tokens are not kept in memory, and a collision
 * only makes two clients share a bucket. */
#include "base/ratelimit.h"
#include "base/hmap.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PURGE_MIN 512 /* look for forgettable buckets once the table holds this many, then at twice what stays */

struct bucket {
    double tokens;
    int64_t at_us; /* when tokens was computed */
};

struct ratelimit {
    pthread_mutex_t lock;
    double rate, burst;
    struct hmap buckets; /* hash of the key -> struct bucket */
    size_t purge_at;
};

static double refill(const struct ratelimit *rl, const struct bucket *b, int64_t now_us)
{
    double t = b->tokens + (double)(now_us - b->at_us) / 1e6 * rl->rate;
    return t > rl->burst ? rl->burst : t;
}

/* Forget buckets that have refilled completely: a new one would start just as full. */
static void purge(struct ratelimit *rl, int64_t now_us)
{
    size_t n = 0, pos = 0;
    uint64_t *full = malloc(rl->buckets.count * sizeof *full);
    const void *key;
    struct bucket *b;
    while (full && (b = hmap_next(&rl->buckets, &pos, &key, NULL)) != NULL)
        if (refill(rl, b, now_us) >= rl->burst)
            memcpy(&full[n++], key, sizeof full[0]);
    for (size_t i = 0; i < n; i++)
        free(hmap_remove(&rl->buckets, &full[i], sizeof full[i]));
    free(full);
    rl->purge_at = rl->buckets.count * 2 > PURGE_MIN ? rl->buckets.count * 2 : PURGE_MIN;
}

struct ratelimit *ratelimit_new(int rate_per_second, int burst)
{
    struct ratelimit *rl = calloc(1, sizeof *rl);
    if (rl == NULL)
        return NULL;
    pthread_mutex_init(&rl->lock, NULL);
    rl->rate = rate_per_second;
    rl->burst = burst > 0 ? burst : rate_per_second;
    rl->purge_at = PURGE_MIN;
    return rl;
}

void ratelimit_free(struct ratelimit *rl)
{
    if (rl == NULL)
        return;
    pthread_mutex_destroy(&rl->lock);
    size_t pos = 0;
    struct bucket *b;
    while ((b = hmap_next(&rl->buckets, &pos, NULL, NULL)) != NULL)
        free(b);
    hmap_free(&rl->buckets);
    free(rl);
}

int ratelimit_take(struct ratelimit *rl, const char *key, size_t len, int64_t now_us)
{
    uint64_t k = hmap_hash_bytes(key, len);
    int wait = 0;
    pthread_mutex_lock(&rl->lock);
    if (rl->buckets.count >= rl->purge_at)
        purge(rl, now_us);
    struct bucket *b = hmap_get(&rl->buckets, &k, sizeof k);
    if (b == NULL && (b = malloc(sizeof *b)) != NULL) {
        b->tokens = rl->burst;
        b->at_us = now_us;
        if (hmap_put(&rl->buckets, &k, sizeof k, b) < 0) {
            free(b);
            b = NULL; /* out of memory: let the request through rather than refuse everyone */
        }
    }
    if (b) {
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
    size_t n = rl->buckets.count;
    pthread_mutex_unlock(&rl->lock);
    return n;
}
