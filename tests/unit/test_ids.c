/* test_ids.c — src/core/ids.h: the id generator, shards, the compact key form and decimal ids. */
#include "core/ids.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layout from ids.h, restated here so the tests do not lean on ids.c's own macros. */
#define T_LOW_BITS    12
#define T_WORKER_BITS 10
#define T_MS_BITS     41
#define T_NOW         (IDS_EPOCH_MS + INT64_C(86400000) * 400) /* some time in 2025 */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

/* xorshift64*: deterministic pseudo-random numbers for property tests. */
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static uint64_t rnd_id(void)
{
    /* Spread over all magnitudes, not just the top: random bit length 1..63. */
    int bits = 1 + (int)(rnd() % 63);
    uint64_t v = rnd() >> (64 - bits);
    return v ? v : 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t id_ms_field(uint64_t id)
{
    return (int64_t)(id >> (T_LOW_BITS + T_WORKER_BITS));
}

static unsigned id_worker_field(uint64_t id)
{
    return (unsigned)((id >> T_LOW_BITS) & ((1u << T_WORKER_BITS) - 1));
}

/* How many k satisfy k * shards + shard < 2^12, counted by brute force. */
static unsigned slots_per_ms(int shards, int shard)
{
    unsigned n = 0;
    for (unsigned k = 0; k * (unsigned)shards + (unsigned)shard < (1u << T_LOW_BITS); k++)
        n++;
    return n;
}

static void gen_ready(struct idgen *g, int shards, int worker)
{
    idgen_init(g, shards);
    idgen_set_worker(g, worker, 0);
    idgen_set_horizon(g, INT64_MAX);
}

/* ---- generator ---- */

START_TEST(test_unique_many_ids_many_shards)
{
    enum { SHARDS = 8, N = 200000 };
    struct idgen g;
    gen_ready(&g, SHARDS, 17);
    uint64_t *ids = malloc(N * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    int64_t now = T_NOW;
    for (int i = 0; i < N; i++) {
        if (i % 5000 == 0)
            now++; /* ~625 ids per shard per ms, more than the 512 slots: counters run out */
        int shard = (int)(rnd() % SHARDS);
        ck_assert_int_eq(idgen_next(&g, shard, now, &ids[i]), 0);
        ck_assert_uint_ne(ids[i], 0);
        ck_assert_uint_eq(ids[i] >> 63, 0);
        ck_assert_int_eq(id_shard(ids[i], SHARDS), shard);
        ck_assert_int_ge(id_unix_ms(ids[i]), now);
    }
    qsort(ids, N, sizeof *ids, cmp_u64);
    for (int i = 1; i < N; i++)
        ck_assert_msg(ids[i] != ids[i - 1], "id %" PRIu64 " issued twice", ids[i]);
    free(ids);
    idgen_destroy(&g);
}
END_TEST

START_TEST(test_unique_across_shard_counts)
{
    static const int shard_counts[] = {1, 2, 3, 5, 7, 8, 100, 255, 256};
    for (size_t c = 0; c < sizeof shard_counts / sizeof shard_counts[0]; c++) {
        int shards = shard_counts[c];
        enum { N = 30000 };
        struct idgen g;
        gen_ready(&g, shards, 1023);
        uint64_t *ids = malloc(N * sizeof *ids);
        ck_assert_ptr_nonnull(ids);
        for (int i = 0; i < N; i++) {
            int shard = (int)(rnd() % (uint64_t)shards);
            ck_assert_int_eq(idgen_next(&g, shard, T_NOW, &ids[i]), 0);
            ck_assert_int_eq(id_shard(ids[i], shards), shard);
            ck_assert_uint_lt(ids[i] & ((1u << T_LOW_BITS) - 1), 1u << T_LOW_BITS);
        }
        qsort(ids, N, sizeof *ids, cmp_u64);
        for (int i = 1; i < N; i++)
            ck_assert_msg(ids[i] != ids[i - 1], "shards=%d: duplicate id %" PRIu64, shards, ids[i]);
        free(ids);
        idgen_destroy(&g);
    }
}
END_TEST

START_TEST(test_time_order)
{
    struct idgen g;
    gen_ready(&g, 4, 3);
    uint64_t prev_same_shard = 0, prev = 0, id;
    int64_t now = T_NOW;
    for (int i = 0; i < 50000; i++) {
        if (i % 97 == 0)
            now += 1 + (int64_t)(rnd() % 5);
        ck_assert_int_eq(idgen_next(&g, 2, now, &id), 0);
        /* within one shard, every id is larger than the one before */
        ck_assert_uint_gt(id, prev_same_shard);
        prev_same_shard = id;
        /* the millisecond part never goes down, and is the clock when the clock is ahead */
        ck_assert_int_ge(id_ms_field(id), prev ? id_ms_field(prev) : 0);
        ck_assert_int_ge(id_unix_ms(id), now);
        prev = id;
    }
    /* ids made at a later millisecond compare larger than earlier ones, whatever the shard */
    uint64_t early, late;
    ck_assert_int_eq(idgen_next(&g, 3, now + 10, &early), 0);
    ck_assert_int_eq(idgen_next(&g, 0, now + 11, &late), 0);
    ck_assert_uint_gt(late, early);
    ck_assert_int_eq(id_unix_ms(early), now + 10);
    ck_assert_int_eq(id_unix_ms(late), now + 11);
    idgen_destroy(&g);
}
END_TEST

START_TEST(test_id_fields)
{
    struct idgen g;
    for (int worker = 0; worker <= IDS_MAX_WORKER; worker += 31) {
        gen_ready(&g, 8, worker);
        uint64_t id;
        ck_assert_int_eq(idgen_next(&g, 5, T_NOW, &id), 0);
        ck_assert_int_eq(id_worker(id), worker);
        ck_assert_uint_eq(id_worker_field(id), (unsigned)worker);
        ck_assert_int_eq(id_ms_field(id), T_NOW - IDS_EPOCH_MS);
        ck_assert_int_eq(id_unix_ms(id), T_NOW);
        ck_assert_int_eq(id_shard(id, 8), 5);
        ck_assert_uint_eq(id >> 63, 0);
        idgen_destroy(&g);
    }
    gen_ready(&g, 1, IDS_MAX_WORKER);
    uint64_t id;
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), 0);
    ck_assert_int_eq(id_worker(id), 1023);
    idgen_destroy(&g);
}
END_TEST

/* id_max_at(t) bounds every id made at or before t, and no id made after t. */
START_TEST(test_id_max_at)
{
    struct idgen g;
    for (int worker = 0; worker <= IDS_MAX_WORKER; worker += 341) {
        for (int shards = 1; shards <= 16; shards *= 4) {
            gen_ready(&g, shards, worker);
            for (int64_t dt = 0; dt < 3; dt++) {
                for (int i = 0; i < 200; i++) {
                    uint64_t id;
                    ck_assert_int_eq(idgen_next(&g, i % shards, T_NOW + dt, &id), 0);
                    int64_t made = id_unix_ms(id);
                    ck_assert_uint_le(id, id_max_at(made));
                    ck_assert_uint_gt(id, id_max_at(made - 1));
                }
            }
            idgen_destroy(&g);
        }
    }
    /* The bound is the last id of its millisecond: worker and counter all ones. */
    uint64_t top = id_max_at(T_NOW);
    ck_assert_int_eq(id_unix_ms(top), T_NOW);
    ck_assert_int_eq(id_worker(top), IDS_MAX_WORKER);
    ck_assert_uint_eq(top & ((1u << T_LOW_BITS) - 1), (1u << T_LOW_BITS) - 1);
    ck_assert_uint_eq(id_max_at(T_NOW + 1), top + 1 + (((uint64_t)1 << (T_LOW_BITS + T_WORKER_BITS)) - 1));
    /* Before the epoch nothing was made; far in the future it saturates within 63 bits. */
    ck_assert_uint_eq(id_max_at(IDS_EPOCH_MS - 1), 0);
    ck_assert_uint_eq(id_max_at(INT64_MAX / 2) >> 63, 0);
}
END_TEST

START_TEST(test_counter_exhaustion_borrows_next_ms)
{
    static const int cases[][2] = {{1, 0}, {3, 0}, {3, 1}, {3, 2}, {8, 7}, {256, 255}, {100, 99}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int shards = cases[c][0], shard = cases[c][1];
        unsigned slots = slots_per_ms(shards, shard);
        struct idgen g;
        gen_ready(&g, shards, 9);
        uint64_t *ids = malloc((slots + 10) * sizeof *ids);
        ck_assert_ptr_nonnull(ids);
        /* the clock stands still: the first `slots` ids use this millisecond... */
        for (unsigned i = 0; i < slots; i++) {
            ck_assert_int_eq(idgen_next(&g, shard, T_NOW, &ids[i]), 0);
            ck_assert_msg(id_unix_ms(ids[i]) == T_NOW, "shards=%d shard=%d: id %u of %u left the millisecond", shards,
                          shard, i, slots);
            ck_assert_int_eq(id_shard(ids[i], shards), shard);
        }
        /* ...and the next ones borrow the following one */
        for (unsigned i = slots; i < slots + 10; i++) {
            ck_assert_int_eq(idgen_next(&g, shard, T_NOW, &ids[i]), 0);
            ck_assert_int_eq(id_unix_ms(ids[i]), T_NOW + 1);
            ck_assert_int_eq(id_shard(ids[i], shards), shard);
        }
        ck_assert_int_eq(idgen_last_ms(&g), T_NOW + 1);
        /* when the wall clock catches up with the borrowed millisecond, nothing repeats */
        uint64_t more;
        ck_assert_int_eq(idgen_next(&g, shard, T_NOW + 1, &more), 0);
        for (unsigned i = 0; i < slots + 10; i++)
            ck_assert_uint_ne(more, ids[i]);
        ck_assert_uint_gt(more, ids[slots + 9]);
        for (unsigned i = 1; i < slots + 10; i++)
            ck_assert_uint_gt(ids[i], ids[i - 1]);
        free(ids);
        idgen_destroy(&g);
    }
}
END_TEST

START_TEST(test_clock_backwards)
{
    enum { N = 20000 };
    struct idgen g;
    gen_ready(&g, 4, 77);
    uint64_t *ids = malloc(N * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    int64_t high = 0;
    uint64_t last[4] = {0, 0, 0, 0};
    for (int i = 0; i < N; i++) {
        /* a clock that jumps around, mostly backwards from where it has been */
        int64_t now = T_NOW + (int64_t)(rnd() % 50) - (i % 3 == 0 ? 1000 : 0);
        int shard = (int)(rnd() % 4);
        ck_assert_int_eq(idgen_next(&g, shard, now, &ids[i]), 0);
        ck_assert_uint_gt(ids[i], last[shard]);
        last[shard] = ids[i];
        ck_assert_int_ge(id_unix_ms(ids[i]), high); /* never goes down */
        high = id_unix_ms(ids[i]);
        ck_assert_int_ge(idgen_last_ms(&g), high);
    }
    qsort(ids, N, sizeof *ids, cmp_u64);
    for (int i = 1; i < N; i++)
        ck_assert_uint_ne(ids[i], ids[i - 1]);
    free(ids);

    /* a big step back: keeps using the last millisecond */
    uint64_t a, b;
    ck_assert_int_eq(idgen_next(&g, 1, T_NOW + 100000, &a), 0);
    ck_assert_int_eq(idgen_next(&g, 1, T_NOW - 100000, &b), 0);
    ck_assert_uint_gt(b, a);
    ck_assert_int_eq(id_unix_ms(b), T_NOW + 100000);
    idgen_destroy(&g);
}
END_TEST

START_TEST(test_floor_from_set_worker)
{
    struct idgen g;
    uint64_t id;
    idgen_init(&g, 8);
    idgen_set_horizon(&g, INT64_MAX);

    /* floor ahead of the wall clock: ids are above the floor */
    idgen_set_worker(&g, 4, T_NOW + 5000);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), 0);
    ck_assert_int_gt(id_unix_ms(id), T_NOW + 5000);
    ck_assert_int_eq(id_worker(id), 4);

    /* floor behind the wall clock: the clock wins */
    idgen_set_worker(&g, 5, T_NOW - 5000);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), 0);
    ck_assert_int_eq(id_unix_ms(id), T_NOW);

    /* the same worker with a higher floor (a lease renewal elsewhere): jump above it */
    idgen_set_worker(&g, 5, T_NOW + 20);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), 0);
    ck_assert_int_gt(id_unix_ms(id), T_NOW + 20);
    int64_t ms = id_unix_ms(id);

    /* the same worker with a lower floor must not take the generator backwards */
    idgen_set_worker(&g, 5, T_NOW - 100000);
    uint64_t next;
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &next), 0);
    ck_assert_uint_gt(next, id);
    ck_assert_int_ge(id_unix_ms(next), ms);
    idgen_destroy(&g);
}
END_TEST

START_TEST(test_floor_boundaries)
{
    /* "Ids will be > floor_unix_ms" must hold at every floor, including the epoch itself. */
    static const int64_t floors[] = {IDS_EPOCH_MS - 1, IDS_EPOCH_MS, IDS_EPOCH_MS + 1, T_NOW - 1, T_NOW};
    for (size_t i = 0; i < sizeof floors / sizeof floors[0]; i++) {
        struct idgen g;
        idgen_init(&g, 2);
        idgen_set_horizon(&g, INT64_MAX);
        idgen_set_worker(&g, 0, floors[i]);
        uint64_t id;
        /* the wall clock sits exactly on the floor (or just before the epoch) */
        int64_t now = floors[i] < IDS_EPOCH_MS ? IDS_EPOCH_MS : floors[i];
        ck_assert_int_eq(idgen_next(&g, 0, now, &id), 0);
        ck_assert_msg(id_unix_ms(id) > floors[i], "floor %lld: id made at %lld", (long long)floors[i],
                      (long long)id_unix_ms(id));
        idgen_destroy(&g);
    }
}
END_TEST

START_TEST(test_horizon)
{
    struct idgen g;
    uint64_t id;
    idgen_init(&g, 4);
    idgen_set_worker(&g, 2, 0);
    /* no horizon granted yet: nothing is durable, so nothing is issued */
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), -1);

    idgen_set_horizon(&g, T_NOW + 10);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), 0);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW + 10, &id), 0); /* up to and including the horizon */
    ck_assert_int_eq(id_unix_ms(id), T_NOW + 10);
    ck_assert_int_eq(idgen_next(&g, 1, T_NOW + 11, &id), -1);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW + 5000, &id), -1);

    /* renewing the horizon lets it go on, above everything issued before */
    idgen_set_horizon(&g, T_NOW + 100000);
    uint64_t after;
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW + 5000, &after), 0);
    ck_assert_int_eq(id_unix_ms(after), T_NOW + 5000);
    idgen_destroy(&g);

    /* counters running out at the horizon: borrowing past it is refused too */
    idgen_init(&g, 1);
    idgen_set_worker(&g, 2, 0);
    idgen_set_horizon(&g, T_NOW);
    unsigned slots = slots_per_ms(1, 0);
    for (unsigned i = 0; i < slots; i++)
        ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), 0);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), -1);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), -1);
    idgen_set_horizon(&g, T_NOW + 1);
    uint64_t borrowed;
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &borrowed), 0);
    ck_assert_int_eq(id_unix_ms(borrowed), T_NOW + 1);
    ck_assert_uint_gt(borrowed, id);
    idgen_destroy(&g);
}
END_TEST

START_TEST(test_no_worker_refuses)
{
    struct idgen g;
    uint64_t id = 12345;
    idgen_init(&g, 8);
    idgen_set_horizon(&g, INT64_MAX);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), -1);
    idgen_set_worker(&g, 6, 0);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), 0);
    /* giving the worker id up stops issuing */
    idgen_set_worker(&g, -1, 0);
    ck_assert_int_eq(idgen_next(&g, 0, T_NOW, &id), -1);
    idgen_destroy(&g);
}
END_TEST

START_TEST(test_bad_shard_refused)
{
    struct idgen g;
    uint64_t id;
    gen_ready(&g, 8, 1);
    ck_assert_int_eq(idgen_next(&g, 8, T_NOW, &id), -1);
    ck_assert_int_eq(idgen_next(&g, -1, T_NOW, &id), -1);
    ck_assert_int_eq(idgen_next(&g, 7, T_NOW, &id), 0);
    idgen_destroy(&g);
}
END_TEST

START_TEST(test_end_of_time)
{
    /* 41 bits of milliseconds: the last one is usable, the one after is not */
    struct idgen g;
    uint64_t id;
    gen_ready(&g, 1, 1);
    int64_t last = IDS_EPOCH_MS + ((INT64_C(1) << T_MS_BITS) - 1);
    ck_assert_int_eq(idgen_next(&g, 0, last, &id), 0);
    ck_assert_int_eq(id_unix_ms(id), last);
    ck_assert_uint_eq(id >> 63, 0);
    ck_assert_int_eq(idgen_next(&g, 0, last + 1, &id), -1);
    idgen_destroy(&g);
}
END_TEST

/* ---- shards of topics ---- */

START_TEST(test_topic_shard_fnv1a)
{
    /* FNV-1a 32-bit published vectors: "" = 0x811c9dc5, "a" = 0xe40c292c, "foobar" = 0xbf9cf968;
     * the others computed with an independent FNV-1a implementation. */
    static const struct {
        const char *topic;
        uint32_t hash;
    } v[] = {
        {"", 0x811c9dc5u},       {"a", 0xe40c292cu},          {"foobar", 0xbf9cf968u},
        {"orders", 0x325e96ecu}, {"email.send", 0x14bda46du}, {"payments:refund-v2", 0xdfe6d36du},
    };
    static const int shard_counts[] = {1, 2, 7, 8, 100, 256};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        for (size_t s = 0; s < sizeof shard_counts / sizeof shard_counts[0]; s++)
            ck_assert_int_eq(id_topic_shard(v[i].topic, strlen(v[i].topic), shard_counts[s]),
                             (int)(v[i].hash % (uint32_t)shard_counts[s]));
    /* a few spelled out */
    ck_assert_int_eq(id_topic_shard("orders", 6, 8), 4);
    ck_assert_int_eq(id_topic_shard("email.send", 10, 8), 5);
    ck_assert_int_eq(id_topic_shard("a", 1, 256), 44);
    /* only `len` bytes count */
    ck_assert_int_eq(id_topic_shard("foobarXYZ", 6, 256), 104);
}
END_TEST

START_TEST(test_topic_shard_stable_and_in_range)
{
    char topic[40];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(topic, sizeof topic, "topic-%d", i);
        int s1 = id_topic_shard(topic, (size_t)n, 8);
        ck_assert_int_ge(s1, 0);
        ck_assert_int_lt(s1, 8);
        ck_assert_int_eq(id_topic_shard(topic, (size_t)n, 8), s1);
        int s2 = id_topic_shard(topic, (size_t)n, 256);
        ck_assert_int_ge(s2, 0);
        ck_assert_int_lt(s2, 256);
        /* 8 divides 256, so the 8-shard value is the 256-shard value mod 8 */
        ck_assert_int_eq(s2 % 8, s1);
    }
}
END_TEST

START_TEST(test_id_shard)
{
    /* shard = (id & 0xfff) % shards, from ids.h */
    for (int i = 0; i < 10000; i++) {
        uint64_t id = rnd_id();
        int shards = 1 + (int)(rnd() % IDS_MAX_SHARDS);
        ck_assert_int_eq(id_shard(id, shards), (int)((id & 0xfff) % (uint64_t)shards));
    }
}
END_TEST

/* ---- compact key form ---- */

START_TEST(test_key_known_values)
{
    char key[ID_KEY_LEN + 1];
    /* alphabet, ascending ASCII: - 0-9 A-Z _ a-z; digit values 0..63 */
    id_to_key(0, key);
    ck_assert_str_eq(key, "-----------");
    id_to_key(1, key);
    ck_assert_str_eq(key, "----------0");
    id_to_key(63, key);
    ck_assert_str_eq(key, "----------z");
    id_to_key(64, key);
    ck_assert_str_eq(key, "---------0-");
    id_to_key(37, key);
    ck_assert_str_eq(key, "----------_");
    id_to_key(UINT64_C(0x7fffffffffffffff), key);
    ck_assert_str_eq(key, "6zzzzzzzzzz");
    ck_assert_uint_eq(strlen(key), ID_KEY_LEN);
}
END_TEST

START_TEST(test_key_round_trip)
{
    char key[ID_KEY_LEN + 1];
    uint64_t back;
    static const uint64_t edge[] = {
        1, 2, 63, 64, 4095, 4096, UINT64_C(0x7fffffffffffffff), UINT64_C(0x4000000000000000)};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        id_to_key(edge[i], key);
        ck_assert_int_eq(id_from_key(key, ID_KEY_LEN, &back), 0);
        ck_assert_uint_eq(back, edge[i]);
    }
    for (int i = 0; i < 100000; i++) {
        uint64_t id = rnd_id();
        id_to_key(id, key);
        ck_assert_uint_eq(strlen(key), ID_KEY_LEN);
        ck_assert_int_eq(id_from_key(key, ID_KEY_LEN, &back), 0);
        ck_assert_uint_eq(back, id);
    }
}
END_TEST

static int sign(int v)
{
    return (v > 0) - (v < 0);
}

START_TEST(test_key_order_matches_id_order)
{
    char ka[ID_KEY_LEN + 1], kb[ID_KEY_LEN + 1];
    for (int i = 0; i < 100000; i++) {
        uint64_t a = rnd_id(), b;
        switch (i % 4) {
        case 0:
            b = rnd_id();
            break;
        case 1:
            b = a + 1 + rnd() % 100;
            break; /* close neighbours */
        case 2:
            b = a ^ (UINT64_C(1) << (rnd() % 63));
            break; /* one bit apart */
        default:
            b = a;
            break;
        }
        b &= UINT64_C(0x7fffffffffffffff);
        id_to_key(a, ka);
        id_to_key(b, kb);
        int want = a < b ? -1 : a > b;
        ck_assert_msg(sign(strcmp(ka, kb)) == want, "%" PRIu64 " (%s) vs %" PRIu64 " (%s)", a, ka, b, kb);
        ck_assert_msg(sign(memcmp(ka, kb, ID_KEY_LEN)) == want, "memcmp order differs");
    }
}
END_TEST

START_TEST(test_key_rejects)
{
    uint64_t out = 42;
    char good[ID_KEY_LEN + 1];
    id_to_key(123456789, good);
    ck_assert_int_eq(id_from_key(good, ID_KEY_LEN, &out), 0);

    /* lengths */
    ck_assert_int_eq(id_from_key("", 0, &out), -1);
    ck_assert_int_eq(id_from_key(good, ID_KEY_LEN - 1, &out), -1);
    ck_assert_int_eq(id_from_key("-----------0", 12, &out), -1);
    ck_assert_int_eq(id_from_key("0", 1, &out), -1);

    /* characters outside the alphabet, in every position */
    static const char bad_chars[] = {'.', '/', ' ', '+', '=', '`', '{', '~', '@', '[', '^', ':', '\0', '\x80', '\xff'};
    for (size_t c = 0; c < sizeof bad_chars; c++)
        for (int pos = 0; pos < ID_KEY_LEN; pos++) {
            char k[ID_KEY_LEN + 1];
            memcpy(k, good, sizeof k);
            k[pos] = bad_chars[c];
            ck_assert_msg(id_from_key(k, ID_KEY_LEN, &out) == -1, "char 0x%02x at %d accepted",
                          (unsigned char)bad_chars[c], pos);
        }

    /* more than 63 bits: the first symbol may carry at most 3 bits (values 0..7 = '-'..'6') */
    ck_assert_int_eq(id_from_key("6zzzzzzzzzz", ID_KEY_LEN, &out), 0);
    ck_assert_uint_eq(out, UINT64_C(0x7fffffffffffffff));
    ck_assert_int_eq(id_from_key("7----------", ID_KEY_LEN, &out), -1);
    ck_assert_int_eq(id_from_key("9----------", ID_KEY_LEN, &out), -1);
    ck_assert_int_eq(id_from_key("A----------", ID_KEY_LEN, &out), -1);
    ck_assert_int_eq(id_from_key("zzzzzzzzzzz", ID_KEY_LEN, &out), -1);
}
END_TEST

/* ---- decimal ids ---- */

static int parse_str(const char *s, uint64_t *out)
{
    return id_parse(s, strlen(s), out);
}

START_TEST(test_id_parse_accepts)
{
    uint64_t v = 0;
    ck_assert_int_eq(parse_str("1", &v), 0);
    ck_assert_uint_eq(v, 1);
    ck_assert_int_eq(parse_str("1234567890", &v), 0);
    ck_assert_uint_eq(v, UINT64_C(1234567890));
    ck_assert_int_eq(parse_str("9223372036854775807", &v), 0);
    ck_assert_uint_eq(v, UINT64_C(9223372036854775807));
    /* only `len` bytes are read */
    ck_assert_int_eq(id_parse("12x", 2, &v), 0);
    ck_assert_uint_eq(v, 12);
}
END_TEST

START_TEST(test_id_parse_rejects)
{
    static const char *const bad[] = {
        "",
        "0",
        "00",
        "+1",
        "-1",
        "+0",
        " 1",
        "1 ",
        "1 2",
        "\t1",
        "1a",
        "a1",
        "0x10",
        "1.0",
        "1e3",
        "9223372036854775808",   /* 2^63 */
        "9999999999999999999",   /* 19 digits over 2^63-1 */
        "18446744073709551615",  /* 2^64-1, 20 digits */
        "18446744073709551616",  /* 2^64 */
        "99999999999999999999",  /* 20 digits */
        "123456789012345678901", /* 21 digits */
        "１",                    /* fullwidth digit */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 777;
        ck_assert_msg(parse_str(bad[i], &v) == -1, "\"%s\" accepted", bad[i]);
        ck_assert_uint_eq(v, 777); /* untouched on error */
    }
    uint64_t v;
    ck_assert_int_eq(id_parse("1\0002", 3, &v), -1); /* embedded NUL */
}
END_TEST

START_TEST(test_id_format)
{
    char buf[ID_DECIMAL_MAX + 1], want[32];
    static const uint64_t edge[] = {0, 1, 9, 10, 99, 100, UINT64_C(9223372036854775807), UINT64_MAX};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        int n = id_format(edge[i], buf);
        snprintf(want, sizeof want, "%" PRIu64, edge[i]);
        ck_assert_str_eq(buf, want);
        ck_assert_int_eq(n, (int)strlen(want));
    }
    for (int i = 0; i < 100000; i++) {
        uint64_t id = rnd_id(), back;
        int n = id_format(id, buf);
        snprintf(want, sizeof want, "%" PRIu64, id);
        ck_assert_str_eq(buf, want);
        ck_assert_int_eq(n, (int)strlen(want));
        ck_assert_int_eq(id_parse(buf, (size_t)n, &back), 0);
        ck_assert_uint_eq(back, id);
    }
}
END_TEST

START_TEST(test_generated_ids_round_trip)
{
    struct idgen g;
    gen_ready(&g, 8, 512);
    for (int i = 0; i < 10000; i++) {
        uint64_t id, back;
        ck_assert_int_eq(idgen_next(&g, i % 8, T_NOW + i / 100, &id), 0);
        char dec[ID_DECIMAL_MAX + 1], key[ID_KEY_LEN + 1];
        int n = id_format(id, dec);
        ck_assert_int_eq(id_parse(dec, (size_t)n, &back), 0);
        ck_assert_uint_eq(back, id);
        id_to_key(id, key);
        ck_assert_int_eq(id_from_key(key, ID_KEY_LEN, &back), 0);
        ck_assert_uint_eq(back, id);
    }
    idgen_destroy(&g);
}
END_TEST

static Suite *ids_suite(void)
{
    Suite *s = suite_create("ids");

    TCase *tc = tcase_create("idgen");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_unique_many_ids_many_shards);
    tcase_add_test(tc, test_unique_across_shard_counts);
    tcase_add_test(tc, test_time_order);
    tcase_add_test(tc, test_id_fields);
    tcase_add_test(tc, test_id_max_at);
    tcase_add_test(tc, test_counter_exhaustion_borrows_next_ms);
    tcase_add_test(tc, test_clock_backwards);
    tcase_add_test(tc, test_floor_from_set_worker);
    tcase_add_test(tc, test_floor_boundaries);
    tcase_add_test(tc, test_horizon);
    tcase_add_test(tc, test_no_worker_refuses);
    tcase_add_test(tc, test_bad_shard_refused);
    tcase_add_test(tc, test_end_of_time);
    suite_add_tcase(s, tc);

    tc = tcase_create("shards");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_topic_shard_fnv1a);
    tcase_add_test(tc, test_topic_shard_stable_and_in_range);
    tcase_add_test(tc, test_id_shard);
    suite_add_tcase(s, tc);

    tc = tcase_create("keys");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_key_known_values);
    tcase_add_test(tc, test_key_round_trip);
    tcase_add_test(tc, test_key_order_matches_id_order);
    tcase_add_test(tc, test_key_rejects);
    suite_add_tcase(s, tc);

    tc = tcase_create("decimal");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_id_parse_accepts);
    tcase_add_test(tc, test_id_parse_rejects);
    tcase_add_test(tc, test_id_format);
    tcase_add_test(tc, test_generated_ids_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(ids_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
