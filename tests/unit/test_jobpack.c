/* test_jobpack.c — src/core/jobpack.h against records made by Redis's own cmsgpack.pack (Redis
 * 7.0.15): every integer form (fixint, uint8..64, negative fixint, int8..64) and every string
 * form (fixstr, str8, str16, str32) at their boundaries. Each vector is written as tokens:
 * hex bytes, or "<char>*<count>" for a run of one character. */
#include "core/jobpack.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Expand the token form of a vector into bytes; returns the length. */
static size_t expand(const char *spec, unsigned char *out)
{
    size_t n = 0;
    char tok[256];
    int used;
    while (sscanf(spec, " %255s%n", tok, &used) == 1) {
        spec += used;
        char *star = strchr(tok, '*');
        if (star) {
            size_t count = strtoul(star + 1, NULL, 10);
            memset(out + n, tok[0], count);
            n += count;
            continue;
        }
        for (size_t i = 0; tok[i]; i += 2) {
            unsigned int byte;
            ck_assert_int_eq(sscanf(tok + i, "%2x", &byte), 1);
            out[n++] = (unsigned char)byte;
        }
    }
    return n;
}

static char *repeat(char c, size_t count)
{
    char *s = malloc(count + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, c, count);
    s[count] = '\0';
    return s;
}

/* Encode `j` and compare with the vector, byte for byte and in length. */
static void check_record(const struct job_spec *j, uint32_t ver, int state, uint32_t attempts, const char *vector)
{
    size_t cap = jobpack_max_size(j);
    char *got = malloc(cap);
    unsigned char *want = malloc(cap + 64);
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_nonnull(want);
    size_t n = jobpack_encode(got, j, ver, state, attempts);
    size_t wn = expand(vector, want);
    ck_assert_uint_le(n, cap);
    ck_assert_uint_eq(n, wn);
    for (size_t i = 0; i < wn; i++)
        ck_assert_msg((unsigned char)got[i] == want[i], "byte %zu: got %02x, want %02x", i, (unsigned char)got[i],
                      want[i]);
    free(got);
    free(want);
}

static struct job_spec spec(const char *topic, const char *biz, const char *body, size_t body_len, int priority,
                            int64_t ttr, int tries, int64_t run_at)
{
    struct job_spec j;
    memset(&j, 0, sizeof j);
    j.topic_len = strlen(topic);
    memcpy(j.topic, topic, j.topic_len);
    j.biz_key = (char *)biz;
    j.biz_len = biz ? strlen(biz) : 0;
    j.body = (char *)body; /* read only by the encoder */
    j.body_len = body_len;
    j.priority = priority;
    j.ttr = ttr;
    j.tries = tries;
    j.run_at = run_at;
    return j;
}

START_TEST(test_push_of_the_benchmark)
{
    /* cmsgpack.pack(1, 1, 0, 0, 30000, 3, 1795244586520, 'bench.1', '', '"hello"') */
    struct job_spec j = spec("bench.1", NULL, "\"hello\"", 7, 0, 30000, 3, 1795244586520LL);
    check_record(&j, 1, 1, 0, "01010000cd753003cf000001a1fcea7618 a762656e63682e31 a0 a72268656c6c6f22");
}
END_TEST

START_TEST(test_with_its_own_backoff)
{
    /* cmsgpack.pack(1, 1, 0, 0, 30000, 3, 1795244586520, 'bench.1', '', '"hello"', 1500): an
     * eleventh value only for a job pushed with its own backoff */
    struct job_spec j = spec("bench.1", NULL, "\"hello\"", 7, 0, 30000, 3, 1795244586520LL);
    j.has_backoff = 1;
    j.backoff = 1500;
    check_record(&j, 1, 1, 0, "01010000cd753003cf000001a1fcea7618 a762656e63682e31 a0 a72268656c6c6f22 cd05dc");
    /* 0 is a backoff too (redeliver at once, whatever the topic says): written, as fixint 0 */
    j.backoff = 0;
    check_record(&j, 1, 1, 0, "01010000cd753003cf000001a1fcea7618 a762656e63682e31 a0 a72268656c6c6f22 00");
}
END_TEST

/* TP as cmsgpack packs it: str8 (0xd9), 55 bytes */
#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TP_HEX                                                                                                         \
    "d93730302d34626639326633353737623334646136613363653932396430653065343733362d303066303637616130626139303262372d30" \
    "31"
#define HEAD "01010000cd753003cf000001a1fcea7618 a762656e63682e31 a0 a72268656c6c6f22 "

START_TEST(test_with_a_trace_context)
{
    /* cmsgpack.pack(1, 1, 0, 0, 30000, 3, 1795244586520, 'bench.1', '', '"hello"', nil, TP): a
     * job with a traceparent and no backoff of its own keeps the backoff's place with nil */
    struct job_spec j = spec("bench.1", NULL, "\"hello\"", 7, 0, 30000, 3, 1795244586520LL);
    memcpy(j.traceparent, TP, sizeof TP);
    check_record(&j, 1, 1, 0, HEAD "c0 " TP_HEX);
    /* cmsgpack.pack(..., '"hello"', 1500, TP, 'congo=t61rcWkgMzE'): all three */
    char state[] = "congo=t61rcWkgMzE";
    j.has_backoff = 1;
    j.backoff = 1500;
    j.tracestate = state;
    j.tracestate_len = strlen(state);
    check_record(&j, 1, 1, 0, HEAD "cd05dc " TP_HEX " b1636f6e676f3d7436317263576b674d7a45");
    /* cmsgpack.pack(..., '"hello"', nil, TP, 'a=' .. ('v'):rep(510)): the longest tracestate, str16 */
    char *longest = repeat('v', 512);
    memcpy(longest, "a=", 2);
    j.has_backoff = 0;
    j.tracestate = longest;
    j.tracestate_len = 512;
    check_record(&j, 1, 1, 0, HEAD "c0 " TP_HEX " da0200 613d v*510");
    /* the tail alone (push.lua's and restore.lua's argument) is the record's end, and no more
     * than JOBPACK_TAIL_MAX */
    char tail[JOBPACK_TAIL_MAX], rec[1024];
    struct jobpack_extra x = jobpack_extra_of(&j);
    size_t tn = jobpack_tail(tail, &x), rn = jobpack_encode(rec, &j, 1, 1, 0);
    ck_assert_uint_le(tn, JOBPACK_TAIL_MAX);
    ck_assert_uint_eq(tn, 1 + 2 + 55 + 3 + 512);
    ck_assert(memcmp(rec + rn - tn, tail, tn) == 0);
    /* and nothing for a job with neither: its record is what it was before trace context */
    struct jobpack_extra none = {0};
    ck_assert_uint_eq(jobpack_tail(tail, &none), 0);
    free(longest);
}
END_TEST

START_TEST(test_with_a_group)
{
    /* cmsgpack.pack(1, 1, 0, 0, 30000, 3, 1795244586520, 'bench.1', '', '"hello"', nil, nil, nil,
     * 'cust-7'): a group keeps the places of the values before it with nil */
    struct job_spec j = spec("bench.1", NULL, "\"hello\"", 7, 0, 30000, 3, 1795244586520LL);
    char group[] = "cust-7";
    j.group = group;
    j.group_len = 6;
    check_record(&j, 1, 1, 0, HEAD "c0 c0 c0 a6637573742d37");
    /* cmsgpack.pack(..., '"hello"', 1500, TP, nil, 'g'): a traceparent without a tracestate */
    j.has_backoff = 1;
    j.backoff = 1500;
    memcpy(j.traceparent, TP, sizeof TP);
    group[0] = 'g';
    j.group_len = 1;
    check_record(&j, 1, 1, 0, HEAD "cd05dc " TP_HEX " c0 a167");
    /* the tail alone is the record's end */
    char tail[JOBPACK_TAIL_MAX], rec[256];
    struct jobpack_extra x = jobpack_extra_of(&j);
    size_t tn = jobpack_tail(tail, &x), rn = jobpack_encode(rec, &j, 1, 1, 0);
    ck_assert_uint_eq(tn, 3 + 2 + 55 + 1 + 2);
    ck_assert(memcmp(rec + rn - tn, tail, tn) == 0);
}
END_TEST

START_TEST(test_with_biz_key)
{
    /* cmsgpack.pack(1, 2, 0, 9, 86400000, 255, 1763700000000, 'orders.cancel', 'order-42', '{"id":42}') */
    struct job_spec j = spec("orders.cancel", "order-42", "{\"id\":42}", 9, 9, 86400000, 255, 1763700000000LL);
    check_record(&j, 1, 2, 0,
                 "01020009ce05265c00ccffcf0000019aa4b64500 ad6f72646572732e63616e63656c a86f726465722d3432 "
                 "a97b226964223a34327d");
}
END_TEST

START_TEST(test_upper_bounds_of_the_short_forms)
{
    /* cmsgpack.pack(128, 3, 255, 127, 65535, 65536, 4294967295, ('t'):rep(31), ('k'):rep(32), ('b'):rep(255)) */
    char topic[32], *biz = repeat('k', 32), *body = repeat('b', 255);
    memset(topic, 't', 31);
    topic[31] = '\0';
    struct job_spec j = spec(topic, biz, body, 255, 127, 65535, 65536, 4294967295LL);
    check_record(&j, 128, 3, 255, "cc8003ccff7fcdffffce00010000ceffffffff bf t*31 d920 k*32 d9ff b*255");
    free(biz);
    free(body);
}
END_TEST

START_TEST(test_just_past_the_short_forms)
{
    /* cmsgpack.pack(256, 6, 256, 128, 65536, 2147483647, 4294967296, ('t'):rep(128), '', ('b'):rep(256)) */
    char topic[129], *body = repeat('b', 256);
    memset(topic, 't', 128);
    topic[128] = '\0';
    struct job_spec j = spec(topic, NULL, body, 256, 128, 65536, 2147483647, 4294967296LL);
    check_record(&j, 256, 6, 256,
                 "cd010006cd0100cc80ce00010000ce7fffffffcf0000000100000000 d980 t*128 a0 da0100 b*256");
    free(body);
}
END_TEST

START_TEST(test_negative_forms)
{
    /* cmsgpack.pack(1, 1, 0, -129, -33, -128, -1, 'x', '', '1') */
    struct job_spec j = spec("x", NULL, "1", 1, -129, -33, -128, -1);
    check_record(&j, 1, 1, 0, "010100d1ff7fd0dfd080ff a178 a0 a131");
    /* cmsgpack.pack(1, 1, 0, -32769, -2147483649, -32768, -2147483648, 'x', '', '2') */
    struct job_spec k = spec("x", NULL, "2", 1, -32769, -2147483649LL, -32768, -2147483648LL);
    check_record(&k, 1, 1, 0, "010100d2ffff7fffd3ffffffff7fffffffd18000d280000000 a178 a0 a132");
}
END_TEST

START_TEST(test_long_bodies)
{
    /* cmsgpack.pack(1, 1, 0, 0, 1000, 1, 1763700000000, 'x', '', ('f'):rep(n)), n = 65535 and 65536 */
    char *body = repeat('f', 65536);
    struct job_spec j = spec("x", NULL, body, 65535, 0, 1000, 1, 1763700000000LL);
    check_record(&j, 1, 1, 0, "01010000cd03e801cf0000019aa4b64500 a178 a0 daffff f*65535");
    j.body_len = 65536;
    check_record(&j, 1, 1, 0, "01010000cd03e801cf0000019aa4b64500 a178 a0 db00010000 f*65536");
    free(body);
}
END_TEST

static Suite *jobpack_suite(void)
{
    Suite *s = suite_create("jobpack");
    TCase *tc = tcase_create("cmsgpack vectors");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_push_of_the_benchmark);
    tcase_add_test(tc, test_with_biz_key);
    tcase_add_test(tc, test_with_its_own_backoff);
    tcase_add_test(tc, test_with_a_trace_context);
    tcase_add_test(tc, test_with_a_group);
    tcase_add_test(tc, test_upper_bounds_of_the_short_forms);
    tcase_add_test(tc, test_just_past_the_short_forms);
    tcase_add_test(tc, test_negative_forms);
    tcase_add_test(tc, test_long_bodies);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(jobpack_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
