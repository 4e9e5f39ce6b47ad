/* test_log.c — the log file: lines land in it, and a reopen (SIGHUP after logrotate renamed
 * the file) switches to the new file on the SAME descriptor number, so a thread writing
 * at that moment can never write into a descriptor reused by a socket. */
#include "base/log.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], path[128], rotated[160];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/hg-test-log-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/hourglass.log", dir);
    snprintf(rotated, sizeof rotated, "%s.1", path);
}

static void teardown(void)
{
    unlink(path);
    unlink(rotated);
    rmdir(dir);
}

static int file_has(const char *p, const char *needle)
{
    char buf[4096] = {0};
    FILE *f = fopen(p, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

START_TEST(reopen_keeps_the_descriptor_number)
{
    log_level_set(LL_INFO);
    ck_assert_int_eq(log_open(path), 0);
    int fd = log_fd_number();
    ck_assert_int_ne(fd, STDERR_FILENO);
    log_info("before rotation %d", 1);
    ck_assert(file_has(path, "before rotation 1"));

    ck_assert_int_eq(rename(path, rotated), 0); /* what logrotate does */
    log_reopen();
    ck_assert_int_eq(log_fd_number(), fd); /* same number: nothing to race with */
    log_info("after rotation %d", 2);
    ck_assert(file_has(path, "after rotation 2"));
    ck_assert(!file_has(path, "before rotation 1"));
    ck_assert(file_has(rotated, "before rotation 1"));
    ck_assert(!file_has(rotated, "after rotation 2"));

    /* the old file's descriptor is not left open: only `fd` refers to a log file */
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd + 1);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) {
        target[n] = '\0';
        ck_assert_ptr_null(strstr(target, "hourglass.log"));
    }
}
END_TEST

START_TEST(levels_filter_before_formatting)
{
    ck_assert_int_eq(log_open(path), 0);
    log_level_set(LL_WARN);
    log_info("quiet %d", 3);
    log_warn("loud %d", 4);
    ck_assert(!file_has(path, "quiet 3"));
    ck_assert(file_has(path, "loud 4"));
    ck_assert_int_eq(log_level_parse("DEBUG"), LL_DEBUG);
    ck_assert_int_eq(log_level_parse("nope"), -1);
}
END_TEST

static Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("file");
    tcase_set_timeout(tc, 30);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, reopen_keeps_the_descriptor_number);
    tcase_add_test(tc, levels_filter_before_formatting);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(log_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
