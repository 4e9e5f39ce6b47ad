/* test_bgthread.c — a background thread's life (bgthread.h): a pool stops together and a new
 * start clears the stop; a thread with work left finishes by the deadline; a thread blocked in
 * a call past the deadline is cut loose through the connection it published (and only then),
 * so the stop takes the deadline plus the grace, not the call's whole wait. */
#include "base/bgthread.h"
#include "base/clock.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static atomic_int ended, cuts;

/* Sleeps on the condition until a stop. */
static void *idle_main(void *arg)
{
    struct bgthread *t = arg;
    pthread_mutex_lock(&lock);
    while (!t->stop)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    atomic_fetch_add(&ended, 1);
    return NULL;
}

START_TEST(pool_stops_together_and_starts_again)
{
    struct bgthread t = BGTHREAD_INIT(&lock, &cond, NULL);
    atomic_store(&ended, 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(bgthread_start(&t, idle_main, &t), 0);
    ck_assert(bgthread_running(&t));
    ck_assert_int_eq(bgthread_stopping(&t), 0);
    bgthread_stop(&t, 1000);
    ck_assert_int_eq(atomic_load(&ended), 3);
    ck_assert(!bgthread_running(&t));
    ck_assert_int_eq(bgthread_stopping(&t), 1); /* stays stopped: the owner may keep refusing work */
    bgthread_stop(&t, 1000);                    /* nothing runs: nothing to do */
    ck_assert_int_eq(bgthread_start(&t, idle_main, &t), 0);
    ck_assert_int_eq(bgthread_stopping(&t), 0); /* a new start clears it */
    bgthread_stop(&t, 1000);
    ck_assert_int_eq(atomic_load(&ended), 4);
}
END_TEST

START_TEST(pool_has_room_for_max_threads)
{
    struct bgthread t = BGTHREAD_INIT(&lock, &cond, NULL);
    for (int i = 0; i < BGTHREAD_MAX; i++)
        ck_assert_int_eq(bgthread_start(&t, idle_main, &t), 0);
    ck_assert_int_eq(bgthread_start(&t, idle_main, &t), -1);
    bgthread_stop(&t, 0);
    ck_assert(!bgthread_running(&t));
}
END_TEST

/* Always has work: ends only at the stop's deadline. */
static void *busy_main(void *arg)
{
    struct bgthread *t = arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        int due = bgthread_stop_due_locked(t, 0);
        pthread_mutex_unlock(&lock);
        if (due)
            break;
        usleep(1000);
    }
    return NULL;
}

START_TEST(work_left_goes_on_until_the_deadline)
{
    struct bgthread t = BGTHREAD_INIT(&lock, &cond, NULL);
    ck_assert_int_eq(bgthread_start(&t, busy_main, &t), 0);
    int64_t t0 = clock_mono_us();
    bgthread_stop(&t, 200);
    int64_t took_ms = (clock_mono_us() - t0) / 1000;
    ck_assert_int_ge(took_ms, 200);
    ck_assert_int_lt(took_ms, 1000);
}
END_TEST

static int fds[2];

static void cut_fd(void *conn)
{
    atomic_fetch_add(&cuts, 1);
    shutdown(*(int *)conn, SHUT_RDWR);
}

/* Blocked in a read that nothing answers, on a connection it published. */
static void *blocked_main(void *arg)
{
    struct bgthread *t = arg;
    bgthread_publish(t, 3, &fds[0], cut_fd);
    char c;
    ssize_t n = read(fds[0], &c, 1); /* 0 once cut */
    bgthread_publish(t, 3, NULL, NULL);
    atomic_store(&ended, n == 0 ? 1 : 2);
    return NULL;
}

START_TEST(a_blocked_call_is_cut_loose_past_the_deadline)
{
    struct bgthread t = BGTHREAD_INIT(&lock, &cond, "test: a call outlived the stop deadline; cutting it");
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    atomic_store(&ended, 0);
    atomic_store(&cuts, 0);
    ck_assert_int_eq(bgthread_start(&t, blocked_main, &t), 0);
    int64_t t0 = clock_mono_us();
    bgthread_stop(&t, 100);
    int64_t took_ms = (clock_mono_us() - t0) / 1000;
    ck_assert_int_eq(atomic_load(&cuts), 1);
    ck_assert_int_eq(atomic_load(&ended), 1); /* its read failed: the socket was shut */
    ck_assert_int_ge(took_ms, 100 + BGTHREAD_GRACE_MS);
    ck_assert_int_lt(took_ms, 100 + BGTHREAD_GRACE_MS + 1000);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

START_TEST(a_thread_that_ends_in_time_is_not_cut)
{
    struct bgthread t = BGTHREAD_INIT(&lock, &cond, "test: never logged");
    atomic_store(&cuts, 0);
    ck_assert_int_eq(bgthread_start(&t, idle_main, &t), 0);
    bgthread_publish(&t, 0, &fds[0], cut_fd); /* published, but the thread ends by the deadline */
    bgthread_stop(&t, 100);
    ck_assert_int_eq(atomic_load(&cuts), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bgthread");
    TCase *tc = tcase_create("life");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, pool_stops_together_and_starts_again);
    tcase_add_test(tc, pool_has_room_for_max_threads);
    tcase_add_test(tc, work_left_goes_on_until_the_deadline);
    tcase_add_test(tc, a_blocked_call_is_cut_loose_past_the_deadline);
    tcase_add_test(tc, a_thread_that_ends_in_time_is_not_cut);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
