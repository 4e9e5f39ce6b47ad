/* test_fuzz_corpus.c — replay the fuzz corpus and the regression inputs through the fuzz
 * targets (tests/fuzz/targets.h), so every `make unit` re-checks what the fuzzers found.
 *
 * For each target <t> in router, params, job, ids, config:
 *   tests/fuzz/corpus/<t>/       must exist and hold at least one input (else a test fails,
 *                                so this cannot silently test nothing);
 *   tests/fuzz/regressions/<t>/  must exist (kept by a .gitkeep); crash inputs found by
 *                                fuzzing, committed once reported.
 * Every file (names starting with '.' aside) is one loop iteration of the "replay" test case,
 * in its own process under CK_FORK: a target abort()s on a broken invariant and the sanitizers
 * abort on memory errors, so one bad input fails one iteration, and its path is printed.
 *
 * Run from the repo root (as `make unit` does); HG_FUZZ_DIR overrides tests/fuzz. */
#include "../fuzz/targets.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

static const struct {
    const char *name;
    fuzz_fn fn;
} targets[] = {
    {"router", fuzz_router}, {"params", fuzz_params}, {"job", fuzz_job}, {"ids", fuzz_ids}, {"config", fuzz_config},
};
#define NTARGETS (int)(sizeof targets / sizeof targets[0])

struct input {
    int target;
    char *path;
};

static const char *fuzz_dir;
static struct input *inputs;
static int ninputs, cap_inputs;
static int corpus_files[NTARGETS];
static int regressions_files[NTARGETS];
static int regressions_dir_ok[NTARGETS];

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append the regular files of dir (sorted, dotfiles skipped) for target t. Returns the number
 * added, or -1 when dir cannot be opened. */
static int collect(int t, const char *kind)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s/%s", fuzz_dir, kind, targets[t].name);
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, (size_t)cap * sizeof *names);
            if (names == NULL)
                abort();
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (names[n] == NULL)
            abort();
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(names[n], &st) == 0 && S_ISREG(st.st_mode))
            n++;
        else
            free(names[n]);
    }
    closedir(d);
    if (n > 0)
        qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        if (ninputs == cap_inputs) {
            cap_inputs = cap_inputs ? cap_inputs * 2 : 256;
            inputs = realloc(inputs, (size_t)cap_inputs * sizeof *inputs);
            if (inputs == NULL)
                abort();
        }
        inputs[ninputs].target = t;
        inputs[ninputs].path = names[i];
        ninputs++;
    }
    free(names);
    return n;
}

static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    ck_assert_msg(!ferror(f), "%s: read error", path);
    fclose(f);
    *size = len;
    return buf;
}

START_TEST(test_corpus_present)
{
    ck_assert_msg(corpus_files[_i] > 0, "%s/corpus/%s/ is missing or empty: the %s target would test nothing", fuzz_dir,
                  targets[_i].name, targets[_i].name);
    ck_assert_msg(regressions_dir_ok[_i], "%s/regressions/%s/ is missing (it is kept by a .gitkeep)", fuzz_dir,
                  targets[_i].name);
}
END_TEST

START_TEST(test_replay)
{
    const struct input *in = &inputs[_i];
    size_t size;
    uint8_t *data = read_file(in->path, &size);
    /* an exact-size copy, so AddressSanitizer (make SANITIZE=address,undefined unit) sees overreads */
    uint8_t *exact = malloc(size ? size : 1);
    ck_assert_ptr_nonnull(exact);
    if (size)
        memcpy(exact, data, size);
    free(data);
    fuzz_input_name = in->path;
    ck_assert_int_eq(targets[in->target].fn(exact, size), 0);
    fuzz_input_name = NULL;
    free(exact);
}
END_TEST

/* The replay harness itself: the invariant machinery aborts (so a finding cannot pass). */
START_TEST(test_invariant_failure_aborts)
{
    if (freopen("/dev/null", "w", stderr) == NULL) /* keep the deliberate message out of the log */
        ck_abort_msg("cannot silence stderr");
    fz_fail("deliberate failure", __FILE__, __LINE__);
}
END_TEST

static Suite *fuzz_corpus_suite(int forking)
{
    Suite *s = suite_create("fuzz_corpus");

    TCase *tc = tcase_create("present");
    tcase_add_loop_test(tc, test_corpus_present, 0, NTARGETS);
    if (forking) /* an abort can only be expected in a child process */
        tcase_add_test_raise_signal(tc, test_invariant_failure_aborts, SIGABRT);
    suite_add_tcase(s, tc);

    tc = tcase_create("replay");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_replay, 0, ninputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    fuzz_dir = getenv("HG_FUZZ_DIR");
    if (fuzz_dir == NULL || fuzz_dir[0] == '\0')
        fuzz_dir = "tests/fuzz";
    fuzz_init();
    for (int t = 0; t < NTARGETS; t++) {
        int n = collect(t, "corpus");
        corpus_files[t] = n < 0 ? 0 : n;
        n = collect(t, "regressions");
        regressions_dir_ok[t] = n >= 0;
        regressions_files[t] = n < 0 ? 0 : n;
    }
    printf("fuzz corpus replay from %s:", fuzz_dir);
    for (int t = 0; t < NTARGETS; t++)
        printf(" %s %d+%d", targets[t].name, corpus_files[t], regressions_files[t]);
    printf(" (corpus+regressions)\n");

    const char *fork_env = getenv("CK_FORK");
    SRunner *sr = srunner_create(fuzz_corpus_suite(fork_env == NULL || strcmp(fork_env, "no") != 0));
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    for (int i = 0; i < ninputs; i++)
        free(inputs[i].path);
    free(inputs);
    return failed != 0;
}
