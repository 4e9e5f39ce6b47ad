/* test_loopq.c — the one cross-thread hand-off: functions posted from several threads all
 * run on the loop's thread, in each poster's order, none lost; the after-drain hook runs after
 * a batch; close runs what is queued and refuses later posts (their senders keep ownership); a
 * run posted at once is queued in order and drained in one batch. */
#include "base/loopq.h"

#include <check.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define POSTERS    4
#define PER_POSTER 5000

struct item {
    int poster, seq;
};

static pthread_t loop_thread;
static int last_seen[POSTERS];
static atomic_int ran, out_of_order, wrong_thread, drains;

static void run_item(void *arg)
{
    struct item *it = arg;
    if (!pthread_equal(pthread_self(), loop_thread))
        atomic_fetch_add(&wrong_thread, 1);
    if (it->seq != last_seen[it->poster] + 1)
        atomic_fetch_add(&out_of_order, 1);
    last_seen[it->poster] = it->seq;
    atomic_fetch_add(&ran, 1);
    free(it);
}

static void after_drain(void *arg)
{
    atomic_fetch_add(&drains, 1);
}

struct poster_arg {
    struct loopq *q;
    int poster;
};

static void *poster(void *arg)
{
    struct poster_arg *pa = arg;
    for (int s = 1; s <= PER_POSTER; s++) {
        struct item *it = malloc(sizeof *it);
        it->poster = pa->poster;
        it->seq = s;
        while (loopq_post(pa->q, run_item, it) < 0)
            ; /* out of memory only */
    }
    return NULL;
}

static void on_check(evutil_socket_t fd, short what, void *arg)
{
    if (atomic_load(&ran) == POSTERS * PER_POSTER)
        event_base_loopbreak(arg);
}

START_TEST(posts_from_many_threads_run_in_order_on_the_loop)
{
    ck_assert_int_eq(evthread_use_pthreads(), 0);
    struct event_base *base = event_base_new();
    struct loopq *q = loopq_new(base);
    ck_assert_ptr_nonnull(q);
    loopq_after_each_drain(q, after_drain, NULL);
    loop_thread = pthread_self();
    for (int i = 0; i < POSTERS; i++)
        last_seen[i] = 0;
    pthread_t t[POSTERS];
    struct poster_arg pa[POSTERS];
    for (int i = 0; i < POSTERS; i++) {
        pa[i] = (struct poster_arg){q, i};
        ck_assert_int_eq(pthread_create(&t[i], NULL, poster, &pa[i]), 0);
    }
    struct event *check = event_new(base, -1, EV_PERSIST, on_check, base);
    struct timeval ms = {0, 1000};
    event_add(check, &ms);
    struct timeval limit = {20, 0};
    event_base_loopexit(base, &limit);
    event_base_dispatch(base);
    for (int i = 0; i < POSTERS; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(atomic_load(&ran), POSTERS * PER_POSTER); /* no wake lost */
    ck_assert_int_eq(atomic_load(&out_of_order), 0);
    ck_assert_int_eq(atomic_load(&wrong_thread), 0);
    ck_assert_int_gt(atomic_load(&drains), 0);
    ck_assert_int_le(atomic_load(&drains), POSTERS * PER_POSTER); /* a burst is one batch or a few */
    event_free(check);
    loopq_close(q);
    loopq_free(q);
    event_base_free(base);
}
END_TEST

static int count;
static void bump(void *arg)
{
    (*(int *)arg)++;
}

START_TEST(close_runs_the_queue_and_refuses_later_posts)
{
    struct event_base *base = event_base_new();
    struct loopq *q = loopq_new(base);
    count = 0;
    ck_assert_int_eq(loopq_post(q, bump, &count), 0);
    ck_assert_int_eq(loopq_post(q, bump, &count), 0);
    ck_assert_int_eq(count, 0); /* not before the loop (or close) runs them */
    loopq_close(q);
    ck_assert_int_eq(count, 2);
    ck_assert_int_eq(loopq_post(q, bump, &count), -1); /* closed: the sender keeps its argument */
    ck_assert_int_eq(count, 2);
    loopq_free(q);
    event_base_free(base);
}
END_TEST

static int order[8], ordered;
static void note_order(void *arg)
{
    order[ordered++] = *(int *)arg;
}

START_TEST(post_many_queues_a_run_in_order_as_one_batch)
{
    struct event_base *base = event_base_new();
    struct loopq *q = loopq_new(base);
    loopq_after_each_drain(q, after_drain, NULL);
    atomic_store(&drains, 0);
    ordered = 0;
    int values[5] = {1, 2, 3, 4, 5};
    void *args[5] = {&values[0], &values[1], &values[2], &values[3], &values[4]};
    ck_assert_int_eq(loopq_post_many(q, note_order, args, 3), 3);
    ck_assert_int_eq(loopq_post(q, note_order, &values[3]), 0);
    ck_assert_int_eq(loopq_post_many(q, note_order, args + 4, 1), 1);
    ck_assert_int_eq(ordered, 0); /* not before the loop runs them */
    event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
    ck_assert_int_eq(ordered, 5); /* one wake: every queued function in one drain */
    ck_assert_int_eq(atomic_load(&drains), 1);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(order[i], i + 1);
    loopq_close(q);
    ck_assert_int_eq(loopq_post_many(q, note_order, args, 2), 0); /* closed: none queued */
    ck_assert_int_eq(ordered, 5);
    loopq_free(q);
    event_base_free(base);
}
END_TEST

static Suite *loopq_suite(void)
{
    Suite *s = suite_create("loopq");
    TCase *tc = tcase_create("handoff");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, posts_from_many_threads_run_in_order_on_the_loop);
    tcase_add_test(tc, close_runs_the_queue_and_refuses_later_posts);
    tcase_add_test(tc, post_many_queues_a_run_in_order_as_one_batch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(loopq_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
