/* test_scripts.c — the library made at build time (scripts/embed-lua.py): every script is a
 * function of it, named after the library, whose name follows its code; the guarded library
 * runs the guard before anything else; FCALL's head names the function; the readers alone are
 * no-writes; and FUNCTION LOAD's "already exists" is told from its other errors. */
#include "redis/scripts.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(every_script_is_a_function_of_the_library)
{
    ck_assert_int_eq(scripts_init(), 0);
    for (int guarded = 0; guarded <= 1; guarded++) {
        scripts_guard(guarded);
        const char *lib = script_library(), *name = script_library_name();
        ck_assert_uint_eq(strlen(name), 15); /* hg_ + 12 hex digits */
        ck_assert_int_eq(strncmp(name, "hg_", 3), 0);
        ck_assert_uint_eq(strspn(name + 3, "0123456789abcdef"), 12);
        char shebang[64];
        snprintf(shebang, sizeof shebang, "#!lua name=%s\n", name);
        ck_assert_int_eq(strncmp(lib, shebang, strlen(shebang)), 0);
        /* lib.lua's helpers are the library's shared part: made once, not per function */
        ck_assert_ptr_nonnull(strstr(lib, "local function load_job"));
        ck_assert_ptr_null(strstr(strstr(lib, "local function load_job") + 1, "local function load_job"));
        for (int id = 0; id < SCRIPT_COUNT; id++) {
            const char *fn = script_function((enum script_id)id);
            ck_assert_int_eq(strncmp(fn, name, strlen(name)), 0);
            char reg[128];
            snprintf(reg, sizeof reg, "redis.register_function{function_name = '%s', flags = {", fn);
            ck_assert_msg(strstr(lib, reg) != NULL, "%s is not registered", fn);
            const char *head[3];
            size_t lens[3];
            script_call_head((enum script_id)id, head, lens);
            ck_assert_str_eq(head[0], "FCALL");
            ck_assert_str_eq(head[1], fn);
            ck_assert_uint_eq(lens[1], strlen(fn));
            ck_assert_str_eq(head[2], "1");
        }
    }
    scripts_guard(0);
}
END_TEST

/* In the guarded library every function runs guard.lua's line first, before begin (nothing
 * reads or writes before the guard); the plain library has no guard (a single Redis runs
 * exactly what it ran before). The two differ, so their names do. */
START_TEST(the_guarded_library_guards_every_function_first)
{
    static const char guard[] = "redis.call(\"EXISTS\", KEYS[1], KEYS[1] .. \"~guard\")\nbegin(KEYS)\n";
    ck_assert_int_eq(scripts_init(), 0);
    scripts_guard(0);
    ck_assert_ptr_null(strstr(script_library(), "~guard"));
    const char *plain_name = script_library_name();
    scripts_guard(1);
    ck_assert_str_ne(script_library_name(), plain_name);
    const char *lib = script_library();
    int functions = 0;
    for (const char *p = strstr(lib, "redis.register_function{"); p; p = strstr(p + 1, "redis.register_function{")) {
        const char *body = strchr(p, '\n') + 1;
        ck_assert_msg(strncmp(body, guard, strlen(guard)) == 0, "a function without the guard first: %.60s", p);
        functions++;
    }
    ck_assert_int_eq(functions, script_names_count);
    scripts_guard(0);
}
END_TEST

/* The scripts that only read are no-writes (they still run while Redis is full: GET /jobs/{id},
 * the console's lists); every other one is not (Redis refuses it whole then, before it runs). */
START_TEST(only_the_readers_are_no_writes)
{
    ck_assert_int_eq(scripts_init(), 0);
    const char *lib = script_library();
    for (int id = 0; id < SCRIPT_COUNT; id++) {
        char reg[128];
        snprintf(reg, sizeof reg, "redis.register_function{function_name = '%s', flags = {",
                 script_function((enum script_id)id));
        const char *at = strstr(lib, reg);
        ck_assert_ptr_nonnull(at);
        int no_writes = strncmp(at + strlen(reg), "'no-writes'}", 12) == 0;
        int reader = id == SCRIPT_INSPECT || id == SCRIPT_JOBSCAN || id == SCRIPT_TOPICJOBS || id == SCRIPT_DEADLIST ||
                     id == SCRIPT_GROUPS;
        ck_assert_msg(no_writes == reader, "%s: no-writes %d", script_function((enum script_id)id), no_writes);
    }
}
END_TEST

START_TEST(already_exists_is_told_from_other_load_errors)
{
    static const char exists[] = "ERR Library 'hg_0123456789ab' already exists";
    ck_assert(script_library_present(exists, strlen(exists)));
    static const char *const others[] = {
        "ERR Error compiling function: user_function:3: unexpected symbol",
        "OOM command not allowed when used memory > 'maxmemory'.",
        "READONLY You can't write against a read only replica.",
        "ERR Function hg_0123456789ab_push already exists", /* a name clash is not our library */
        "",
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        ck_assert_msg(!script_library_present(others[i], strlen(others[i])), "%s", others[i]);
    ck_assert(!script_library_present(NULL, 0));
}
END_TEST

static Suite *scripts_suite(void)
{
    Suite *s = suite_create("scripts");
    TCase *tc = tcase_create("library");
    tcase_add_test(tc, every_script_is_a_function_of_the_library);
    tcase_add_test(tc, the_guarded_library_guards_every_function_first);
    tcase_add_test(tc, only_the_readers_are_no_writes);
    tcase_add_test(tc, already_exists_is_told_from_other_load_errors);
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
