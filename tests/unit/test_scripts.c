/* test_scripts.c — the script table made at build time (scripts/embed-lua.sh): every script
 * is bound, and its SHA-1 is the one Redis will compute for its text (checked with the
 * system's sha1sum, independently of the shell pipeline that made it). */
#include "redis/scripts.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* sha1sum of `text`, through a temporary file. */
static void sha1sum(const char *text, char out[41])
{
    char path[] = "/tmp/hg-test-scripts-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "sha1sum %s", path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(fgets(out, 41, p));
    pclose(p);
    unlink(path);
}

START_TEST(every_script_is_bound_with_its_sha1)
{
    ck_assert_int_eq(scripts_init(), 0);
    for (int guarded = 0; guarded <= 1; guarded++) {
        scripts_guard(guarded);
        for (int id = 0; id < SCRIPT_COUNT; id++) {
            const char *text = script_text((enum script_id)id), *sha = script_sha((enum script_id)id);
            ck_assert_ptr_nonnull(text);
            ck_assert_uint_eq(strlen(sha), 40);
            char want[41];
            sha1sum(text, want);
            ck_assert_str_eq(sha, want);
            const char *head[3];
            size_t lens[3];
            script_evalsha_head((enum script_id)id, head, lens);
            ck_assert_str_eq(head[1], sha);
        }
    }
    scripts_guard(0);
}
END_TEST

/* The guarded text is the plain one after guard.lua's one line of code, which comes first;
 * the plain text has no guard (a single Redis runs exactly what it ran before). */
START_TEST(guarded_texts_begin_with_the_guard)
{
    static const char guard[] = "redis.call(\"EXISTS\", KEYS[1], KEYS[1] .. \"~guard\")\n";
    ck_assert_int_eq(scripts_init(), 0);
    for (int id = 0; id < SCRIPT_COUNT; id++) {
        scripts_guard(0);
        const char *plain = script_text((enum script_id)id), *psha = script_sha((enum script_id)id);
        ck_assert_ptr_null(strstr(plain, "~guard"));
        scripts_guard(1);
        const char *text = script_text((enum script_id)id);
        ck_assert_str_ne(script_sha((enum script_id)id), psha);
        const char *g = strstr(text, guard);
        ck_assert_ptr_nonnull(g);
        /* only comments before it: no code runs before the guard */
        for (const char *line = text; line < g; line = strchr(line, '\n') + 1)
            ck_assert_msg(strncmp(line, "--", 2) == 0, "code before the guard in script %d", id);
        ck_assert_str_eq(g + strlen(guard), plain);
    }
    scripts_guard(0);
}
END_TEST

START_TEST(scripts_carry_the_prelude)
{
    ck_assert_int_eq(scripts_init(), 0);
    /* lib.lua's helpers are in every script's text (load_job is defined there) */
    for (int id = 0; id < SCRIPT_COUNT; id++)
        ck_assert_ptr_nonnull(strstr(script_text((enum script_id)id), "local function load_job"));
}
END_TEST

static Suite *scripts_suite(void)
{
    Suite *s = suite_create("scripts");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, every_script_is_bound_with_its_sha1);
    tcase_add_test(tc, scripts_carry_the_prelude);
    tcase_add_test(tc, guarded_texts_begin_with_the_guard);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(scripts_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
