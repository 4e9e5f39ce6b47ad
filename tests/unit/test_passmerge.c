/* test_passmerge.c — the calls of one loop pass, merged: reservations for the same shard,
 * topics (by content, in order) and actor are one call of their counts' sum, sent once the
 * pass's callbacks have run; its jobs are handed out in the order asked, each request up to its
 * count; finishes of one shard and actor are one call, each hearing its own outcome; every
 * request hears exactly once, also when the call cannot be sent; a call queued from an answer
 * goes into the next pass's call; a call stops growing at its cap. */
#include "api/passmerge.h"

#include <check.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#define CALLS_MAX 8

/* What the fake store was asked to send. */
static struct sent {
    int shard, ntopics, count;
    char topics[4][16];
    char who[32];
    store_reserve_fn fn;
    void *arg;
} sent[CALLS_MAX];
static int nsent, refuse_sends;

static int fake_send(void *send_arg, int shard, const char *const *topics, const size_t *lens, int ntopics, int count,
                     const char *who, store_reserve_fn fn, void *arg)
{
    (void)send_arg;
    if (refuse_sends)
        return -1;
    ck_assert_int_lt(nsent, CALLS_MAX);
    struct sent *c = &sent[nsent++];
    *c = (struct sent){.shard = shard, .ntopics = ntopics, .count = count, .fn = fn, .arg = arg};
    for (int i = 0; i < ntopics && i < 4; i++)
        memcpy(c->topics[i], topics[i], lens[i]);
    strcpy(c->who, who);
    return 0;
}

/* A request: what it heard. */
struct asker {
    int heard, n, failed;
    int64_t wait_ms;
    uint64_t ids[8];
    /* queue this reservation when answered (a long-poll passing a notification on) */
    struct passmerge *requeue;
    struct asker *next_asker;
};

static void on_answer(const struct delivered *jobs, int n, int failed, int64_t wait_ms, void *arg)
{
    struct asker *a = arg;
    a->heard++;
    a->n = n;
    a->failed = failed;
    a->wait_ms = wait_ms;
    for (int i = 0; i < n && i < 8; i++)
        a->ids[i] = jobs[i].id;
    if (a->requeue) {
        static const char *const t[] = {"orders"};
        static const size_t l[] = {6};
        ck_assert_int_eq(passmerge_reserve(a->requeue, 0, t, l, 1, 1, "w", on_answer, a->next_asker), 0);
    }
}

/* Finish calls the fake store was asked to send. */
static struct finish_sent {
    int shard, n;
    uint64_t ids[8];
    int attempts[8];
    char who[32];
    store_ids_fn fn;
    void *arg;
} fsent[CALLS_MAX];
static int nfsent;

static int fake_finish(void *send_arg, int shard, const uint64_t *ids, const int *attempts, int n, const char *who,
                       store_ids_fn fn, void *arg)
{
    (void)send_arg;
    if (refuse_sends)
        return -1;
    ck_assert_int_lt(nfsent, CALLS_MAX);
    struct finish_sent *c = &fsent[nfsent++];
    *c = (struct finish_sent){.shard = shard, .n = n, .fn = fn, .arg = arg};
    for (int i = 0; i < n && i < 8; i++) {
        c->ids[i] = ids[i];
        c->attempts[i] = attempts[i];
    }
    strcpy(c->who, who);
    return 0;
}

/* A finish request: what it heard. */
struct finisher {
    int heard, failed;
    struct id_outcome out;
};

static void on_finish(const struct id_outcome *o, void *arg)
{
    struct finisher *f = arg;
    f->heard++;
    f->failed = o == NULL;
    if (o)
        f->out = *o;
}

static struct event_base *base;
static struct passmerge *m;

static void setup(void)
{
    static const struct passmerge_sends sends = {fake_send, fake_finish};
    nsent = nfsent = refuse_sends = 0;
    memset(sent, 0, sizeof sent);
    memset(fsent, 0, sizeof fsent);
    base = event_base_new();
    m = passmerge_new(base, &sends, NULL);
    ck_assert_ptr_nonnull(m);
}

static void teardown(void)
{
    passmerge_free(m);
    event_base_free(base);
}

static void one_pass(void)
{
    event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

/* Answer sent call k with jobs of ids first..first+n-1. */
static void answer(int k, uint64_t first, int n, int64_t wait_ms)
{
    struct delivered jobs[16];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < n; i++)
        jobs[i].id = first + (uint64_t)i;
    sent[k].fn(n ? jobs : NULL, n, 0, wait_ms, sent[k].arg);
}

static int add(int shard, const char *t1, const char *t2, int count, const char *who, struct asker *a)
{
    const char *topics[2] = {t1, t2};
    size_t lens[2] = {strlen(t1), t2 ? strlen(t2) : 0};
    return passmerge_reserve(m, shard, topics, lens, t2 ? 2 : 1, count, who, on_answer, a);
}

START_TEST(one_call_per_shard_topics_and_actor_answered_in_order)
{
    struct asker a = {0}, b = {0}, c = {0}, d = {0}, e = {0}, f = {0}, g = {0};
    char orders_copy[] = "orders"; /* another pointer, the same topic */
    ck_assert_int_eq(add(0, "orders", NULL, 1, "w", &a), 0);
    ck_assert_int_eq(add(0, orders_copy, NULL, 3, "w", &b), 0);
    ck_assert_int_eq(add(0, "mails", NULL, 1, "w", &c), 0);      /* another topic */
    ck_assert_int_eq(add(0, "orders", NULL, 1, "other", &d), 0); /* another actor */
    ck_assert_int_eq(add(0, "orders", "mails", 1, "w", &e), 0);  /* more topics */
    ck_assert_int_eq(add(0, "mails", "orders", 1, "w", &f), 0);  /* the same, in another order */
    ck_assert_int_eq(add(0, orders_copy, NULL, 1, "w", &g), 0);
    ck_assert_int_eq(nsent, 0);   /* nothing before the pass ends */
    ck_assert_int_eq(a.heard, 0); /* and nobody hears from within add */
    one_pass();
    ck_assert_int_eq(nsent, 5);
    ck_assert_int_eq(sent[0].count, 5); /* a, b, g */
    ck_assert_str_eq(sent[0].topics[0], "orders");
    ck_assert_str_eq(sent[0].who, "w");
    ck_assert_int_eq(sent[1].count, 1);
    ck_assert_str_eq(sent[1].topics[0], "mails");
    ck_assert_str_eq(sent[2].who, "other");
    ck_assert_int_eq(sent[3].ntopics, 2);
    ck_assert_str_eq(sent[3].topics[1], "mails");
    ck_assert_str_eq(sent[4].topics[0], "mails");

    answer(0, 100, 4, 250); /* one short of the five asked */
    ck_assert_int_eq(a.heard, 1);
    ck_assert_int_eq(a.n, 1);
    ck_assert_uint_eq(a.ids[0], 100);
    ck_assert_int_eq(b.n, 3);
    ck_assert_uint_eq(b.ids[0], 101);
    ck_assert_uint_eq(b.ids[2], 103);
    ck_assert_int_eq(g.heard, 1);
    ck_assert_int_eq(g.n, 0); /* the last asked goes without */
    ck_assert_int_eq(g.failed, 0);
    ck_assert_int_eq(g.wait_ms, 250); /* the rate's wait reaches every request */
    ck_assert_int_eq(c.heard + d.heard + e.heard + f.heard, 0);
    for (int k = 1; k < 5; k++)
        answer(k, 0, 0, 0);
    ck_assert_int_eq(c.heard + d.heard + e.heard + f.heard, 4);
}
END_TEST

START_TEST(a_call_that_cannot_be_sent_fails_every_request_once)
{
    struct asker a = {0}, b = {0};
    ck_assert_int_eq(add(1, "orders", NULL, 2, "w", &a), 0);
    ck_assert_int_eq(add(1, "orders", NULL, 2, "w", &b), 0);
    refuse_sends = 1;
    one_pass();
    ck_assert_int_eq(a.heard, 1);
    ck_assert_int_eq(a.failed, 1);
    ck_assert_int_eq(a.n, 0);
    ck_assert_int_eq(b.heard, 1);
    ck_assert_int_eq(b.failed, 1);
    one_pass();
    ck_assert_int_eq(a.heard + b.heard, 2); /* nothing left queued */
}
END_TEST

START_TEST(a_reservation_queued_from_an_answer_goes_into_the_next_call)
{
    struct asker later = {0};
    struct asker first = {.requeue = m, .next_asker = &later};
    ck_assert_int_eq(add(0, "orders", NULL, 1, "w", &first), 0);
    one_pass();
    ck_assert_int_eq(nsent, 1);
    answer(0, 7, 1, 0);
    ck_assert_int_eq(first.heard, 1);
    ck_assert_int_eq(later.heard, 0);
    ck_assert_int_eq(nsent, 1); /* not sent from within the answer */
    one_pass();
    ck_assert_int_eq(nsent, 2);
    answer(1, 8, 1, 0);
    ck_assert_int_eq(later.heard, 1);
    ck_assert_uint_eq(later.ids[0], 8);
}
END_TEST

START_TEST(a_call_stops_growing_at_its_cap)
{
    struct asker a = {0}, b = {0};
    ck_assert_int_eq(add(0, "orders", NULL, PASSMERGE_COUNT_MAX - 1, "w", &a), 0);
    ck_assert_int_eq(add(0, "orders", NULL, 2, "w", &b), 0);
    one_pass();
    ck_assert_int_eq(nsent, 2);
    ck_assert_int_eq(sent[0].count, PASSMERGE_COUNT_MAX - 1);
    ck_assert_int_eq(sent[1].count, 2);
    answer(0, 0, 0, 0);
    answer(1, 0, 0, 0);
    ck_assert_int_eq(a.heard + b.heard, 2);
}
END_TEST

START_TEST(flush_sends_at_once_and_free_drops_what_is_queued)
{
    struct asker a = {0}, b = {0};
    ck_assert_int_eq(add(0, "orders", NULL, 1, "w", &a), 0);
    passmerge_flush(m);
    ck_assert_int_eq(nsent, 1);
    answer(0, 1, 1, 0);
    ck_assert_int_eq(a.heard, 1);
    ck_assert_int_eq(add(0, "orders", NULL, 1, "w", &b), 0); /* freed unsent by teardown: unheard */
    ck_assert_int_eq(b.heard, 0);
}
END_TEST

START_TEST(finishes_of_one_shard_and_actor_are_one_call_each_hearing_its_own)
{
    struct finisher a = {0}, b = {0}, c = {0}, d = {0};
    struct asker r = {0};
    ck_assert_int_eq(passmerge_finish(m, 2, 11, 0, "w", on_finish, &a), 0);
    ck_assert_int_eq(passmerge_finish(m, 3, 12, 0, "w", on_finish, &b), 0); /* another shard */
    ck_assert_int_eq(passmerge_finish(m, 2, 13, 4, "w", on_finish, &c), 0);
    ck_assert_int_eq(passmerge_finish(m, 2, 14, 0, "other", on_finish, &d), 0); /* another actor */
    ck_assert_int_eq(add(2, "orders", NULL, 1, "w", &r), 0);                    /* a reservation: its own call */
    ck_assert_int_eq(nfsent + nsent, 0);
    one_pass();
    ck_assert_int_eq(nfsent, 3);
    ck_assert_int_eq(nsent, 1);
    ck_assert_int_eq(fsent[0].shard, 2);
    ck_assert_int_eq(fsent[0].n, 2);
    ck_assert_uint_eq(fsent[0].ids[0], 11);
    ck_assert_uint_eq(fsent[0].ids[1], 13);
    ck_assert_int_eq(fsent[0].attempts[1], 4);
    ck_assert_int_eq(fsent[1].shard, 3);
    ck_assert_str_eq(fsent[2].who, "other");
    struct id_outcome outs[2] = {{.status = ID_OK, .ver = 3}, {.status = ID_STALE, .attempts = 5}};
    fsent[0].fn(outs, 2, fsent[0].arg);
    ck_assert_int_eq(a.heard, 1);
    ck_assert_int_eq(a.out.status, ID_OK);
    ck_assert_uint_eq(a.out.ver, 3);
    ck_assert_int_eq(c.heard, 1);
    ck_assert_int_eq(c.out.status, ID_STALE);
    fsent[1].fn(NULL, 1, fsent[1].arg); /* the call failed */
    ck_assert_int_eq(b.heard, 1);
    ck_assert_int_eq(b.failed, 1);
    ck_assert_int_eq(d.heard, 0);
    fsent[2].fn(outs, 1, fsent[2].arg);
    ck_assert_int_eq(d.heard, 1);
    answer(0, 1, 1, 0);
    ck_assert_int_eq(r.heard, 1);
}
END_TEST

START_TEST(a_finish_call_that_cannot_be_sent_fails_each_once)
{
    struct finisher a = {0}, b = {0};
    ck_assert_int_eq(passmerge_finish(m, 0, 1, 0, "w", on_finish, &a), 0);
    ck_assert_int_eq(passmerge_finish(m, 0, 2, 0, "w", on_finish, &b), 0);
    refuse_sends = 1;
    one_pass();
    ck_assert_int_eq(a.heard + b.heard, 2);
    ck_assert_int_eq(a.failed + b.failed, 2);
}
END_TEST

START_TEST(a_finish_call_stops_growing_at_its_cap)
{
    static struct finisher f[PASSMERGE_FINISH_MAX + 1];
    memset(f, 0, sizeof f);
    for (int i = 0; i <= PASSMERGE_FINISH_MAX; i++)
        ck_assert_int_eq(passmerge_finish(m, 0, (uint64_t)i + 1, 0, "w", on_finish, &f[i]), 0);
    one_pass();
    ck_assert_int_eq(nfsent, 2);
    ck_assert_int_eq(fsent[0].n, PASSMERGE_FINISH_MAX);
    ck_assert_int_eq(fsent[1].n, 1);
    ck_assert_uint_eq(fsent[1].ids[0], PASSMERGE_FINISH_MAX + 1);
    fsent[0].fn(NULL, 0, fsent[0].arg);
    fsent[1].fn(NULL, 0, fsent[1].arg);
}
END_TEST

static Suite *passmerge_suite(void)
{
    Suite *s = suite_create("passmerge");
    TCase *tc = tcase_create("merge");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, one_call_per_shard_topics_and_actor_answered_in_order);
    tcase_add_test(tc, a_call_that_cannot_be_sent_fails_every_request_once);
    tcase_add_test(tc, a_reservation_queued_from_an_answer_goes_into_the_next_call);
    tcase_add_test(tc, a_call_stops_growing_at_its_cap);
    tcase_add_test(tc, flush_sends_at_once_and_free_drops_what_is_queued);
    tcase_add_test(tc, finishes_of_one_shard_and_actor_are_one_call_each_hearing_its_own);
    tcase_add_test(tc, a_finish_call_that_cannot_be_sent_fails_each_once);
    tcase_add_test(tc, a_finish_call_stops_growing_at_its_cap);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(passmerge_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
