/* ids.c — see ids.h. */
#include "core/ids.h"

#include <string.h>

#define LOW_BITS    12
#define WORKER_BITS 10
#define LOW_MASK    ((UINT64_C(1) << LOW_BITS) - 1)
#define MS_MAX      ((INT64_C(1) << 41) - 1)

/* 64 symbols in ascending ASCII order: '-' < digits < upper < '_' < lower. */
static const char key_alphabet[] = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";

void idgen_init(struct idgen *g, int shards)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    g->shards = shards < 1 ? 1 : shards > IDS_MAX_SHARDS ? IDS_MAX_SHARDS : shards;
    g->worker = -1;
    g->horizon_ms = -1;
}

void idgen_destroy(struct idgen *g)
{
    pthread_mutex_destroy(&g->lock);
}

static void reset_counters(struct idgen *g)
{
    memset(g->next_k, 0, sizeof g->next_k);
}

void idgen_set_worker(struct idgen *g, int worker, int64_t floor_unix_ms)
{
    pthread_mutex_lock(&g->lock);
    if (worker != g->worker) {
        g->worker = worker;
        /* A new worker number shares nothing with the old one; start at the floor. */
        int64_t floor = floor_unix_ms - IDS_EPOCH_MS;
        g->cur_ms = floor >= 0 ? floor + 1 : 0;
        reset_counters(g);
    } else if (floor_unix_ms - IDS_EPOCH_MS >= g->cur_ms) {
        g->cur_ms = floor_unix_ms - IDS_EPOCH_MS + 1;
        reset_counters(g);
    }
    pthread_mutex_unlock(&g->lock);
}

void idgen_set_horizon(struct idgen *g, int64_t unix_ms)
{
    pthread_mutex_lock(&g->lock);
    g->horizon_ms = unix_ms == INT64_MAX ? INT64_MAX : unix_ms - IDS_EPOCH_MS;
    pthread_mutex_unlock(&g->lock);
}

int64_t idgen_last_ms(struct idgen *g)
{
    pthread_mutex_lock(&g->lock);
    int64_t ms = g->cur_ms + IDS_EPOCH_MS;
    pthread_mutex_unlock(&g->lock);
    return ms;
}

int idgen_next(struct idgen *g, int shard, int64_t now_unix_ms, uint64_t *out)
{
    int rc = -1;
    pthread_mutex_lock(&g->lock);
    if (g->worker < 0 || shard < 0 || shard >= g->shards)
        goto done;

    int64_t now = now_unix_ms - IDS_EPOCH_MS;
    if (now > g->cur_ms) {
        g->cur_ms = now;
        reset_counters(g);
    }
    /* k * shards + shard must stay below 2^12. */
    unsigned k_limit = (unsigned)((LOW_MASK + 1 - (unsigned)shard + (unsigned)g->shards - 1) / (unsigned)g->shards);
    if (g->next_k[shard] >= k_limit) {
        /* This shard's counter is spent for this millisecond: borrow the next one. */
        g->cur_ms++;
        reset_counters(g);
    }
    if (g->cur_ms > g->horizon_ms || g->cur_ms > MS_MAX)
        goto done;

    uint64_t low = (uint64_t)g->next_k[shard]++ * (uint64_t)g->shards + (uint64_t)shard;
    *out = ((uint64_t)g->cur_ms << (LOW_BITS + WORKER_BITS)) | ((uint64_t)g->worker << LOW_BITS) | low;
    rc = 0;
done:
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int id_shard(uint64_t id, int shards)
{
    return (int)((id & LOW_MASK) % (uint64_t)shards);
}

int id_topic_shard(const char *topic, size_t len, int shards)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)topic[i];
        h *= 16777619u;
    }
    return (int)(h % (uint32_t)shards);
}

uint64_t id_max_at(int64_t unix_ms)
{
    int64_t ms = unix_ms - IDS_EPOCH_MS;
    if (ms < 0)
        return 0;
    if (ms > MS_MAX)
        ms = MS_MAX;
    return ((uint64_t)ms << (LOW_BITS + WORKER_BITS)) | ((UINT64_C(1) << (LOW_BITS + WORKER_BITS)) - 1);
}

int64_t id_unix_ms(uint64_t id)
{
    return (int64_t)(id >> (LOW_BITS + WORKER_BITS)) + IDS_EPOCH_MS;
}

int id_worker(uint64_t id)
{
    return (int)((id >> LOW_BITS) & ((1u << WORKER_BITS) - 1));
}

void id_to_key(uint64_t id, char out[ID_KEY_LEN + 1])
{
    for (int i = ID_KEY_LEN - 1; i >= 0; i--) {
        out[i] = key_alphabet[id & 63];
        id >>= 6;
    }
    out[ID_KEY_LEN] = '\0';
}

static int key_digit(char c)
{
    if (c == '-')
        return 0;
    if (c >= '0' && c <= '9')
        return 1 + (c - '0');
    if (c >= 'A' && c <= 'Z')
        return 11 + (c - 'A');
    if (c == '_')
        return 37;
    if (c >= 'a' && c <= 'z')
        return 38 + (c - 'a');
    return -1;
}

int id_from_key(const char *s, size_t len, uint64_t *out)
{
    if (len != ID_KEY_LEN)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        int d = key_digit(s[i]);
        if (d < 0)
            return -1;
        if (i == 0 && d > 7) /* 66 bits of room; only 63 may be used */
            return -1;
        v = (v << 6) | (uint64_t)d;
    }
    *out = v;
    return 0;
}

int id_parse(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > ID_DECIMAL_MAX)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_C(0x7fffffffffffffff) - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v == 0)
        return -1;
    *out = v;
    return 0;
}

int id_format(uint64_t id, char out[ID_DECIMAL_MAX + 1])
{
    char tmp[ID_DECIMAL_MAX + 1];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + id % 10);
        id /= 10;
    } while (id);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}
