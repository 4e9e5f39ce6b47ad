/* ids.h — 64-bit, time-ordered job ids; which shard a job lives on; the id's compact Redis form.
 *
 * Layout (bit 63 is always 0, so ids fit MySQL BIGINT and stay positive):
 *
 *   | 41 bits: ms since 2024-01-01 UTC | 10 bits: worker | 12 bits: k * shards + shard |
 *
 * A job's shard is chosen from its topic (so a topic's ready queue, bizKey index and
 * jobs share one hash-tagged Redis slot) and is recoverable from the id alone:
 * shard = (id & 0xfff) % shards. Each shard has its own per-millisecond counter k.
 *
 * The generator never repeats an id: its clock never goes backwards (a clock that steps
 * back keeps using the last millisecond, borrowing the next one when a counter runs
 * out), it starts no lower than a floor (the previous holder's high-water mark), and it
 * refuses to issue ids past a horizon that the worker-id lease has made durable. */
#ifndef HG_IDS_H
#define HG_IDS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define IDS_EPOCH_MS   INT64_C(1704067200000) /* 2024-01-01T00:00:00Z */
#define IDS_MAX_WORKER 1023
#define IDS_MAX_SHARDS 256
#define ID_KEY_LEN     11 /* compact form length */
#define ID_DECIMAL_MAX 20 /* digits of the largest id */

struct idgen {
    pthread_mutex_t lock;
    int shards;
    int worker;         /* -1 until a worker id is held */
    int64_t cur_ms;     /* logical clock, ms since IDS_EPOCH_MS */
    int64_t horizon_ms; /* ids with cur_ms past this are refused (epoch-relative) */
    uint16_t next_k[IDS_MAX_SHARDS];
};

/* Initialise for `shards` shards (1..256) with no worker id. */
void idgen_init(struct idgen *g, int shards);
void idgen_destroy(struct idgen *g);

/* Take worker id `worker` (0..1023, or -1 to stop issuing). Ids will be > floor_unix_ms. */
void idgen_set_worker(struct idgen *g, int worker, int64_t floor_unix_ms);

/* Allow ids up to `unix_ms` (the durable high-water mark); INT64_MAX for a fixed worker id. */
void idgen_set_horizon(struct idgen *g, int64_t unix_ms);

/* The latest millisecond (unix) used so far; a lease renewal persists at least this. */
int64_t idgen_last_ms(struct idgen *g);

/* Next id for `shard` at wall time now_unix_ms. Returns 0, or -1 when no worker id is held
 * or the horizon is reached (the caller answers 503). */
int idgen_next(struct idgen *g, int shard, int64_t now_unix_ms, uint64_t *out) __attribute__((warn_unused_result));

/* Shard of an id, and of a topic (FNV-1a; part of the stored data format, never change it). */
int id_shard(uint64_t id, int shards);
int id_topic_shard(const char *topic, size_t len, int shards);

/* The largest id any generator could make at unix ms `unix_ms` (for "made before" ranges). */
uint64_t id_max_at(int64_t unix_ms);

/* Unix ms at which the id was made, and its worker number. */
int64_t id_unix_ms(uint64_t id);
int id_worker(uint64_t id);

/* Compact form used inside Redis: 11 characters from an alphabet in ASCII order, so
 * compact forms sort like the ids. `out` gets ID_KEY_LEN chars and a NUL. */
void id_to_key(uint64_t id, char out[ID_KEY_LEN + 1]);
int id_from_key(const char *s, size_t len, uint64_t *out) __attribute__((warn_unused_result));

/* Strict decimal parse: 1..20 digits, no sign/space, value 1..2^63-1. */
int id_parse(const char *s, size_t len, uint64_t *out) __attribute__((warn_unused_result));

/* Decimal form; returns its length. */
int id_format(uint64_t id, char out[ID_DECIMAL_MAX + 1]);

#endif
