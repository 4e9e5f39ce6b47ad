/* test_metrics.c — src/core/metrics.h: counters, gauges, histograms and the Prometheus text output.
 *
 * Metrics are process-wide, so every check compares a render before and after the change
 * (deltas), and the tests hold whether or not Check forks per test. The output is read with
 * a small, strict parser of the Prometheus text exposition format written for these tests. */
#include "core/job.h"
#include "core/metrics.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a strict reader of the text exposition format ---- */

#define MAX_SAMPLES  4096
#define MAX_LABELS   8
#define MAX_FAMILIES 512

struct sample {
    char name[128];
    int nl;
    char ln[MAX_LABELS][64];
    char lv[MAX_LABELS][256];
    double value;
    int family;
};

struct family {
    char name[128];
    char kind[16];
    int help, type, samples, closed;
};

struct parsed {
    int n, nf;
    struct sample s[MAX_SAMPLES];
    struct family f[MAX_FAMILIES];
};

static char perr[512];

static int reject(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int reject(int line, const char *fmt, ...)
{
    int n = snprintf(perr, sizeof perr, "line %d: ", line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(perr + n, sizeof perr - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int name_char(char c, int first, int colon_ok)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_ok && c == ':') ||
           (!first && c >= '0' && c <= '9');
}

/* A metric name at *p; advances *p. */
static int read_name(const char **p, char *out, size_t cap, int colon_ok)
{
    size_t n = 0;
    while (name_char((*p)[n], n == 0, colon_ok)) {
        if (n + 1 >= cap)
            return -1;
        out[n] = (*p)[n];
        n++;
    }
    out[n] = '\0';
    *p += n;
    return n > 0 ? 0 : -1;
}

/* The sample value: a decimal float or +Inf, -Inf, NaN, and nothing after it. */
static int read_value(const char *s, double *out)
{
    if (!strcmp(s, "+Inf")) {
        *out = INFINITY;
        return 0;
    }
    if (!strcmp(s, "-Inf")) {
        *out = -INFINITY;
        return 0;
    }
    if (!strcmp(s, "NaN")) {
        *out = NAN;
        return 0;
    }
    const char *c = s;
    if (*c == '-' || *c == '+')
        c++;
    int digits = 0;
    while (*c >= '0' && *c <= '9')
        c++, digits++;
    if (*c == '.') {
        c++;
        while (*c >= '0' && *c <= '9')
            c++, digits++;
    }
    if (digits == 0)
        return -1;
    if (*c == 'e' || *c == 'E') {
        c++;
        if (*c == '-' || *c == '+')
            c++;
        if (!(*c >= '0' && *c <= '9'))
            return -1;
        while (*c >= '0' && *c <= '9')
            c++;
    }
    if (*c != '\0')
        return -1;
    *out = strtod(s, NULL);
    return 0;
}

static int find_family(struct parsed *p, const char *name)
{
    for (int i = 0; i < p->nf; i++)
        if (!strcmp(p->f[i].name, name))
            return i;
    return -1;
}

static int add_family(struct parsed *p, const char *name)
{
    int i = find_family(p, name);
    if (i >= 0 || p->nf == MAX_FAMILIES)
        return i;
    snprintf(p->f[p->nf].name, sizeof p->f[p->nf].name, "%s", name);
    return p->nf++;
}

/* The family a sample belongs to: its own name, or a histogram's _bucket/_sum/_count. */
static int family_of(struct parsed *p, const char *name, const char **suffix)
{
    *suffix = "";
    int f = find_family(p, name);
    if (f >= 0 && p->f[f].type)
        return f;
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(name), k = strlen(sfx[i]);
        if (n > k && !strcmp(name + n - k, sfx[i])) {
            char base[128];
            snprintf(base, sizeof base, "%.*s", (int)(n - k), name);
            f = find_family(p, base);
            if (f >= 0 && (!strcmp(p->f[f].kind, "histogram") || (i > 0 && !strcmp(p->f[f].kind, "summary")))) {
                *suffix = sfx[i];
                return f;
            }
        }
    }
    return -1;
}

static const char *label(const struct sample *s, const char *name)
{
    for (int i = 0; i < s->nl; i++)
        if (!strcmp(s->ln[i], name))
            return s->lv[i];
    return NULL;
}

static int same_series(const struct sample *a, const struct sample *b)
{
    if (strcmp(a->name, b->name) || a->nl != b->nl)
        return 0;
    for (int i = 0; i < a->nl; i++) {
        const char *v = label(b, a->ln[i]);
        if (v == NULL || strcmp(v, a->lv[i]))
            return 0;
    }
    return 1;
}

static int parse_sample(const char *line, int lineno, struct sample *s)
{
    const char *c = line;
    memset(s, 0, sizeof *s);
    if (read_name(&c, s->name, sizeof s->name, 1) < 0)
        return reject(lineno, "bad metric name in \"%s\"", line);
    if (*c == '{') {
        c++;
        while (*c != '}') {
            if (s->nl == MAX_LABELS)
                return reject(lineno, "too many labels");
            if (read_name(&c, s->ln[s->nl], sizeof s->ln[0], 0) < 0)
                return reject(lineno, "bad label name in \"%s\"", line);
            for (int i = 0; i < s->nl; i++)
                if (!strcmp(s->ln[i], s->ln[s->nl]))
                    return reject(lineno, "label %s twice", s->ln[i]);
            if (c[0] != '=' || c[1] != '"')
                return reject(lineno, "expected =\" after label %s", s->ln[s->nl]);
            c += 2;
            size_t o = 0;
            for (;;) {
                if (*c == '\0')
                    return reject(lineno, "unterminated label value");
                if (*c == '"')
                    break;
                char ch = *c++;
                if (ch == '\\') {
                    if (*c == '\\' || *c == '"')
                        ch = *c++;
                    else if (*c == 'n')
                        ch = '\n', c++;
                    else
                        return reject(lineno, "bad escape \\%c in a label value", *c);
                }
                if (o + 1 >= sizeof s->lv[0])
                    return reject(lineno, "label value too long");
                s->lv[s->nl][o++] = ch;
            }
            s->lv[s->nl][o] = '\0';
            c++; /* closing quote */
            s->nl++;
            if (*c == ',')
                c++;
            else if (*c != '}')
                return reject(lineno, "expected , or } in \"%s\"", line);
        }
        c++;
    }
    if (*c != ' ')
        return reject(lineno, "expected one space before the value in \"%s\"", line);
    c++;
    if (read_value(c, &s->value) < 0)
        return reject(lineno, "bad value \"%s\"", c);
    return 0;
}

/* Parse and check `text`; 0, or -1 with the reason in perr. */
static int parse_exposition(const char *text, struct parsed *p)
{
    memset(p, 0, sizeof *p);
    size_t len = strlen(text);
    if (len == 0 || text[len - 1] != '\n')
        return reject(0, "the text must end with a newline");
    int current = -1, lineno = 0;
    const char *start = text;
    while (*start) {
        const char *nl = strchr(start, '\n');
        char line[2048];
        size_t n = (size_t)(nl - start);
        lineno++;
        if (n >= sizeof line)
            return reject(lineno, "line too long");
        memcpy(line, start, n);
        line[n] = '\0';
        start = nl + 1;
        if (n == 0)
            continue;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)line[i] < 0x20 && line[i] != '\t')
                return reject(lineno, "control character");

        int f;
        if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7)) {
            int is_help = line[2] == 'H';
            const char *c = line + 7;
            char name[128];
            if (read_name(&c, name, sizeof name, 1) < 0)
                return reject(lineno, "bad name in \"%s\"", line);
            if ((f = add_family(p, name)) < 0)
                return reject(lineno, "too many families");
            struct family *fam = &p->f[f];
            if (fam->closed)
                return reject(lineno, "family %s appears again after another family", name);
            if (fam->samples)
                return reject(lineno, "%s of %s after its samples", is_help ? "HELP" : "TYPE", name);
            if (current >= 0 && current != f)
                p->f[current].closed = 1;
            current = f;
            if (is_help) {
                if (fam->help++)
                    return reject(lineno, "second HELP for %s", name);
                if (*c != ' ' || c[1] == '\0')
                    return reject(lineno, "HELP of %s has no text", name);
            } else {
                if (fam->type++)
                    return reject(lineno, "second TYPE for %s", name);
                if (*c != ' ')
                    return reject(lineno, "TYPE of %s has no type", name);
                c++;
                if (strcmp(c, "counter") && strcmp(c, "gauge") && strcmp(c, "histogram") && strcmp(c, "summary") &&
                    strcmp(c, "untyped"))
                    return reject(lineno, "unknown type \"%s\"", c);
                snprintf(fam->kind, sizeof fam->kind, "%s", c);
            }
            continue;
        }
        if (line[0] == '#')
            continue; /* a plain comment */

        if (p->n == MAX_SAMPLES)
            return reject(lineno, "too many samples");
        struct sample *s = &p->s[p->n];
        if (parse_sample(line, lineno, s) < 0)
            return -1;
        const char *suffix;
        if ((f = family_of(p, s->name, &suffix)) < 0)
            return reject(lineno, "sample %s comes before (or without) its TYPE", s->name);
        struct family *fam = &p->f[f];
        if (!fam->help)
            return reject(lineno, "sample %s comes before (or without) its HELP", s->name);
        if (fam->closed)
            return reject(lineno, "sample %s is apart from the rest of its family", s->name);
        if (current != f) {
            if (current >= 0)
                p->f[current].closed = 1;
            current = f;
        }
        if (!strcmp(fam->kind, "histogram")) {
            if (suffix[0] == '\0')
                return reject(lineno, "histogram sample %s without _bucket/_sum/_count", s->name);
            const char *le = label(s, "le");
            if (!strcmp(suffix, "_bucket")) {
                double bound;
                if (le == NULL || read_value(le, &bound) < 0)
                    return reject(lineno, "bucket without a numeric le");
            } else if (le != NULL) {
                return reject(lineno, "le label on %s", s->name);
            }
        }
        if ((!strcmp(fam->kind, "counter") || !strcmp(fam->kind, "histogram")) && !(s->value >= 0))
            return reject(lineno, "%s %s has a negative value", fam->kind, s->name);
        for (int i = 0; i < p->n; i++)
            if (same_series(&p->s[i], s))
                return reject(lineno, "series %s given twice", s->name);
        s->family = f;
        fam->samples++;
        p->n++;
    }
    return 0;
}

/* The one sample `name` whose labels include the NULL-terminated (name, value) pairs. */
static const struct sample *find(const struct parsed *p, const char *name, ...)
{
    const struct sample *hit = NULL;
    for (int i = 0; i < p->n; i++) {
        const struct sample *s = &p->s[i];
        if (strcmp(s->name, name))
            continue;
        va_list ap;
        va_start(ap, name);
        int ok = 1;
        const char *ln;
        while ((ln = va_arg(ap, const char *)) != NULL) {
            const char *lv = va_arg(ap, const char *), *got = label(s, ln);
            if (got == NULL || strcmp(got, lv))
                ok = 0;
        }
        va_end(ap);
        if (ok) {
            ck_assert_msg(hit == NULL, "more than one %s matches", name);
            hit = s;
        }
    }
    return hit;
}

static struct parsed *render(const char *instance)
{
    struct sbuf sb = SBUF_INIT;
    metrics_render(&sb, instance);
    ck_assert_int_eq(sb.oom, 0);
    ck_assert_ptr_nonnull(sb.data);
    struct parsed *p = malloc(sizeof *p);
    ck_assert_ptr_nonnull(p);
    ck_assert_msg(parse_exposition(sb.data, p) == 0, "invalid exposition: %s", perr);
    sb_free(&sb);
    return p;
}

static double value_or_zero(const struct sample *s)
{
    return s ? s->value : 0;
}

/* The sum over every sample `name` whose labels include the NULL-terminated pairs. */
static double sum_of(const struct parsed *p, const char *name, ...)
{
    double total = 0;
    for (int i = 0; i < p->n; i++) {
        const struct sample *s = &p->s[i];
        if (strcmp(s->name, name))
            continue;
        va_list ap;
        va_start(ap, name);
        int ok = 1;
        const char *ln;
        while ((ln = va_arg(ap, const char *)) != NULL) {
            const char *lv = va_arg(ap, const char *), *got = label(s, ln);
            if (got == NULL || strcmp(got, lv))
                ok = 0;
        }
        va_end(ap);
        if (ok)
            total += s->value;
    }
    return total;
}

/* ---- the parser itself must be able to fail ---- */

START_TEST(test_parser_rejects_bad_text)
{
    struct parsed *p = malloc(sizeof *p);
    ck_assert_ptr_nonnull(p);
    static const char *const bad[] = {
        "x 1\n",                                                                              /* no TYPE/HELP */
        "# TYPE x counter\nx 1\n",                                                            /* no HELP */
        "# HELP x h\n# TYPE x counter\nx 1",                                                  /* no final newline */
        "# HELP x h\n# TYPE x counter\nx{a=\"1\"} one\n",                                     /* value */
        "# HELP x h\n# TYPE x counter\nx{a=\"1} 1\n",                                         /* unterminated */
        "# HELP x h\n# TYPE x counter\nx{a=\"a\"b\"} 1\n",                                    /* raw quote */
        "# HELP x h\n# TYPE x counter\nx{a=\"a\\qb\"} 1\n",                                   /* bad escape */
        "# HELP x h\n# TYPE x counter\nx{a=\"1\"}  1\n",                                      /* two spaces */
        "# HELP x h\n# TYPE x wat\nx 1\n",                                                    /* type */
        "# HELP x h\n# TYPE x counter\nx 1\nx 2\n",                                           /* duplicate series */
        "# HELP x h\n# TYPE x counter\nx 1\n# HELP y h\n# TYPE y gauge\ny 1\nx{a=\"b\"} 1\n", /* split family */
        "# HELP h h\n# TYPE h histogram\nh 1\n",        /* histogram without suffix */
        "# HELP h h\n# TYPE h histogram\nh_bucket 1\n", /* bucket without le */
        "# HELP x h\n# TYPE x counter\nx -1\n",         /* negative counter */
        "# HELP 1x h\n# TYPE 1x counter\n1x 1\n",       /* name */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(parse_exposition(bad[i], p) == -1, "accepted:\n%s", bad[i]);
    ck_assert_msg(parse_exposition("# HELP x h\n# TYPE x gauge\nx{a=\"q\\\"\\\\\\n\",b=\"\"} -1.5e3\n"
                                   "# HELP h h\n# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
                                   "h_sum 3.5\nh_count 2\n",
                                   p) == 0,
                  "%s", perr);
    ck_assert_str_eq(label(&p->s[0], "a"), "q\"\\\n");
    free(p);
}
END_TEST

/* ---- the output ---- */

START_TEST(test_render_is_valid_prometheus_text)
{
    struct parsed *p = render("node-1:8080");
    const struct sample *info = find(p, "hourglass_info", NULL);
    ck_assert_ptr_nonnull(info);
    ck_assert_str_eq(label(info, "instance"), "node-1:8080");
    /* every counter family is named *_total, as Prometheus expects */
    for (int i = 0; i < p->nf; i++)
        if (!strcmp(p->f[i].kind, "counter")) {
            size_t n = strlen(p->f[i].name);
            ck_assert_msg(n > 6 && !strcmp(p->f[i].name + n - 6, "_total"), "counter %s", p->f[i].name);
        }
    free(p);
}
END_TEST

START_TEST(test_render_valid_after_everything_moved)
{
    for (int ep = 0; ep <= EP_COUNT; ep++)
        for (int st = 100; st < 600; st += 7)
            metrics_http((enum endpoint)ep, st, (int64_t)st * 997);
    metrics_http(EP_PUSH, 200, 1);
    for (int f = -1; f <= JS_ABORTED + 1; f++)
        for (int t = -1; t <= JS_ABORTED + 1; t++)
            if (t != JS_NONE) /* no transition leads to "no state" */
                metrics_transition(f, t, 1);
    for (int c = 0; c < MC_COUNT; c++)
        metrics_inc((enum metric_counter)c, (uint64_t)c + 1);
    for (int g = 0; g < MG_COUNT; g++)
        metrics_gauge_set((enum metric_gauge)g, g % 2 ? -g : g * 1000);
    for (int h = 0; h < MH_COUNT; h++)
        for (double v = 0.00001; v < 1e6; v *= 1.7)
            metrics_observe((enum metric_hist)h, v);
    struct parsed *p = render("after");
    ck_assert_ptr_nonnull(find(p, "hourglass_transitions_total", "from", "ready", "to", "reserved", NULL));
    ck_assert_ptr_nonnull(find(p, "hourglass_http_requests_total", "endpoint", "push", "code", "200", NULL));
    free(p);
}
END_TEST

START_TEST(test_counters)
{
    struct parsed *before = render("i");
    uint64_t got[MC_COUNT];
    for (int c = 0; c < MC_COUNT; c++) {
        got[c] = metrics_counter_get((enum metric_counter)c);
        metrics_inc((enum metric_counter)c, 1);
        metrics_inc((enum metric_counter)c, (uint64_t)c * 10);
        ck_assert_uint_eq(metrics_counter_get((enum metric_counter)c), got[c] + 1 + (uint64_t)c * 10);
    }
    struct parsed *after = render("i");
    /* each counter is its own label-less family; counter c moved by 1 + 10c (all different) */
    int counter_families = 0, moved[MC_COUNT] = {0};
    for (int i = 0; i < after->nf; i++) {
        const struct family *f = &after->f[i];
        if (strcmp(f->kind, "counter") || f->samples != 1)
            continue;
        const struct sample *a = find(after, f->name, NULL), *b = find(before, f->name, NULL);
        ck_assert_ptr_nonnull(a);
        if (a->nl != 0)
            continue; /* a labelled family that happens to have one series */
        ck_assert_ptr_nonnull(b);
        double delta = a->value - b->value;
        int c = (int)((delta - 1) / 10);
        ck_assert_msg(c >= 0 && c < MC_COUNT && delta == 1 + 10.0 * c, "%s moved by %g", f->name, delta);
        ck_assert_msg(a->value == (double)metrics_counter_get((enum metric_counter)c), "%s is %g, counter %d is %llu",
                      f->name, a->value, c, (unsigned long long)metrics_counter_get((enum metric_counter)c));
        moved[c]++;
        counter_families++;
    }
    for (int c = 0; c < MC_COUNT; c++)
        ck_assert_msg(moved[c] == 1, "counter %d rendered %d times", c, moved[c]);
    ck_assert_int_eq(counter_families, MC_COUNT);
    free(before);
    free(after);
}
END_TEST

static void *bump(void *arg)
{
    for (int i = 0; i < 100000; i++)
        metrics_inc(MC_MOVER_RUNS, 1);
    return arg;
}

START_TEST(test_counter_concurrency)
{
    enum { THREADS = 4 };
    uint64_t start = metrics_counter_get(MC_MOVER_RUNS);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, bump, NULL), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_eq(metrics_counter_get(MC_MOVER_RUNS), start + THREADS * 100000);
}
END_TEST

START_TEST(test_gauges)
{
    for (int g = 0; g < MG_COUNT; g++) /* without fork, an earlier test left values behind */
        metrics_gauge_set((enum metric_gauge)g, 0);
    metrics_gauge_set(MG_PARKED, 42);
    ck_assert_int_eq(metrics_gauge_get(MG_PARKED), 42);
    metrics_gauge_add(MG_PARKED, -2);
    ck_assert_int_eq(metrics_gauge_get(MG_PARKED), 40);
    metrics_gauge_add(MG_PARKED, 5);
    ck_assert_int_eq(metrics_gauge_get(MG_PARKED), 45);
    metrics_gauge_set(MG_CONNECTIONS, -7); /* a gauge may go below zero */
    ck_assert_int_eq(metrics_gauge_get(MG_CONNECTIONS), -7);
    metrics_gauge_set(MG_JOURNAL_BACKLOG, INT64_C(123456789012));

    struct parsed *p = render("g");
    int seen45 = 0, seen_neg7 = 0, seen_big = 0, gauges = 0;
    for (int i = 0; i < p->n; i++) {
        const struct sample *s = &p->s[i];
        if (strcmp(p->f[s->family].kind, "gauge") || !strcmp(s->name, "hourglass_info"))
            continue;
        gauges++;
        seen45 += s->value == 45;
        seen_neg7 += s->value == -7;
        seen_big += s->value == 123456789012.0;
    }
    ck_assert_int_eq(gauges, MG_COUNT);
    ck_assert_int_eq(seen45, 1);
    ck_assert_int_eq(seen_neg7, 1);
    ck_assert_int_eq(seen_big, 1);
    free(p);
}
END_TEST

/* Check a histogram's buckets moved by exactly the observations at or below each bound. */
static void check_hist_delta(const struct parsed *before, const struct parsed *after, const char *base,
                             const char *lname, const char *lvalue, const double *obs, int nobs)
{
    char bucket[160], count[160], sum[160];
    snprintf(bucket, sizeof bucket, "%s_bucket", base);
    snprintf(count, sizeof count, "%s_count", base);
    snprintf(sum, sizeof sum, "%s_sum", base);
    int buckets = 0, saw_inf = 0;
    double prev_le = -INFINITY, prev_val = -1;
    for (int i = 0; i < after->n; i++) {
        const struct sample *s = &after->s[i];
        if (strcmp(s->name, bucket))
            continue;
        if (lname && (label(s, lname) == NULL || strcmp(label(s, lname), lvalue)))
            continue;
        const char *le = label(s, "le");
        double bound;
        ck_assert_int_eq(read_value(le, &bound), 0);
        /* buckets come in increasing le order, cumulative counts never decrease */
        ck_assert_msg(bound > prev_le, "%s: le %s out of order", base, le);
        ck_assert_msg(s->value >= prev_val, "%s: le %s is not cumulative", base, le);
        prev_le = bound;
        prev_val = s->value;
        const struct sample *b =
            lname ? find(before, bucket, lname, lvalue, "le", le, NULL) : find(before, bucket, "le", le, NULL);
        int want = 0;
        for (int k = 0; k < nobs; k++)
            want += obs[k] <= bound;
        ck_assert_msg(s->value - value_or_zero(b) == want, "%s le=%s moved by %g, want %d", base, le,
                      s->value - value_or_zero(b), want);
        buckets++;
        if (isinf(bound)) {
            saw_inf = 1;
            const struct sample *c = lname ? find(after, count, lname, lvalue, NULL) : find(after, count, NULL);
            ck_assert_ptr_nonnull(c);
            ck_assert_msg(c->value == s->value, "%s: +Inf bucket %g != count %g", base, s->value, c->value);
        }
    }
    ck_assert_int_ge(buckets, 2);
    ck_assert_msg(saw_inf, "%s has no le=\"+Inf\" bucket", base);
    ck_assert(isinf(prev_le)); /* +Inf is the last bucket */

    const struct sample *ca = lname ? find(after, count, lname, lvalue, NULL) : find(after, count, NULL);
    const struct sample *cb = lname ? find(before, count, lname, lvalue, NULL) : find(before, count, NULL);
    ck_assert_ptr_nonnull(ca);
    ck_assert_msg(ca->value - value_or_zero(cb) == nobs, "%s_count moved by %g", base, ca->value - value_or_zero(cb));
    const struct sample *sa = lname ? find(after, sum, lname, lvalue, NULL) : find(after, sum, NULL);
    const struct sample *sb = lname ? find(before, sum, lname, lvalue, NULL) : find(before, sum, NULL);
    ck_assert_ptr_nonnull(sa);
    double total = 0;
    for (int k = 0; k < nobs; k++)
        total += obs[k];
    double moved = sa->value - value_or_zero(sb);
    ck_assert_msg(fabs(moved - total) <= 1e-5 * (1 + total), "%s_sum moved by %.9g, want %.9g", base, moved, total);
}

START_TEST(test_histogram_sizes)
{
    static const double obs[] = {1, 3, 5, 150, 1000000, 2, 2, 99999};
    struct parsed *before = render("h");
    for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++)
        metrics_observe(MH_JOURNAL_BATCH, obs[i]);
    struct parsed *after = render("h");
    check_hist_delta(before, after, "hourglass_journal_batch_records", NULL, NULL, obs,
                     (int)(sizeof obs / sizeof obs[0]));
    free(before);
    free(after);
}
END_TEST

START_TEST(test_histogram_times)
{
    /* values on bucket edges count in that bucket (le is "less than or equal") */
    static const double obs[] = {0.00005, 0.0001, 0.001, 0.0015, 0.25, 0.2500001, 7.5, 10, 11, 3600};
    struct parsed *before = render("h");
    for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++)
        metrics_observe(MH_LATENESS, obs[i]);
    struct parsed *after = render("h");
    check_hist_delta(before, after, "hourglass_delivery_lateness_seconds", NULL, NULL, obs,
                     (int)(sizeof obs / sizeof obs[0]));
    /* the other time histograms did not move */
    static const double none[] = {0};
    check_hist_delta(before, after, "hourglass_redis_command_seconds", NULL, NULL, none, 0);
    free(before);
    free(after);
}
END_TEST

START_TEST(test_http)
{
    struct parsed *before = render("x");
    metrics_http(EP_PUSH, 200, 1500);
    metrics_http(EP_PUSH, 200, 1500);
    metrics_http(EP_PUSH, 200, 250000);
    metrics_http(EP_PUSH, 503, 2000000);
    metrics_http(EP_GET, 204, 30000000);
    metrics_http(EP_HEALTH, 418, 10); /* a status outside the usual set */
    struct parsed *after = render("x");

#define DELTA(...) (value_or_zero(find(after, __VA_ARGS__, NULL)) - value_or_zero(find(before, __VA_ARGS__, NULL)))
    ck_assert_ptr_nonnull(find(after, "hourglass_http_requests_total", "endpoint", "push", "code", "200", NULL));
    ck_assert(DELTA("hourglass_http_requests_total", "endpoint", "push", "code", "200") == 3);
    ck_assert(DELTA("hourglass_http_requests_total", "endpoint", "push", "code", "503") == 1);
    ck_assert(DELTA("hourglass_http_requests_total", "endpoint", "get", "code", "204") == 1);
    ck_assert(DELTA("hourglass_http_requests_total", "endpoint", "health", "code", "418") +
                  DELTA("hourglass_http_requests_total", "endpoint", "health", "code", "other") ==
              1);
    ck_assert(DELTA("hourglass_http_requests_total", "endpoint", "finish", "code", "200") == 0);
#undef DELTA
    /* every code label is a status number or "other" */
    for (int i = 0; i < after->n; i++) {
        const char *code = label(&after->s[i], "code");
        if (code == NULL)
            continue;
        int numeric = strlen(code) == 3 && strspn(code, "0123456789") == 3;
        ck_assert_msg(numeric || !strcmp(code, "other"), "code=\"%s\"", code);
    }

    static const double push_obs[] = {0.0015, 0.0015, 0.25, 2.0};
    check_hist_delta(before, after, "hourglass_http_request_seconds", "endpoint", "push", push_obs, 4);
    static const double get_obs[] = {30.0};
    check_hist_delta(before, after, "hourglass_http_request_seconds", "endpoint", "get", get_obs, 1);
    free(before);
    free(after);
}
END_TEST

START_TEST(test_http_out_of_range_endpoint)
{
    struct parsed *before = render("x");
    metrics_http(EP_COUNT, 404, 100);
    metrics_http((enum endpoint)1000, 404, 100);
    struct parsed *after = render("x");
    double total_before = 0, total_after = 0;
    for (int i = 0; i < before->n; i++)
        if (!strcmp(before->s[i].name, "hourglass_http_requests_total"))
            total_before += before->s[i].value;
    for (int i = 0; i < after->n; i++)
        if (!strcmp(after->s[i].name, "hourglass_http_requests_total")) {
            total_after += after->s[i].value;
            ck_assert_str_ne(label(&after->s[i], "endpoint"), "unknown");
        }
    ck_assert(total_after - total_before == 2); /* counted, under a real endpoint name */
    free(before);
    free(after);
}
END_TEST

START_TEST(test_transitions)
{
    struct parsed *before = render("t");
    metrics_transition(JS_READY, JS_RESERVED, 2);
    metrics_transition(JS_READY, JS_RESERVED, 3);
    metrics_transition(JS_NONE, JS_DELAYED, 1); /* a new job */
    metrics_transition(JS_RESERVED, JS_DEAD, 1);
    metrics_transition(-1, JS_READY, 100); /* out of range: ignored */
    metrics_transition(JS_READY, JS_FAR + 1, 100);
    struct parsed *after = render("t");
#define DELTA(...) (sum_of(after, __VA_ARGS__, NULL) - sum_of(before, __VA_ARGS__, NULL))
    ck_assert(DELTA("hourglass_transitions_total", "from", "ready", "to", "reserved") == 5);
    ck_assert(DELTA("hourglass_transitions_total", "from", "reserved", "to", "dead") == 1);
    ck_assert(DELTA("hourglass_transitions_total", "to", "delayed") == 1);
    ck_assert(DELTA("hourglass_transitions_total") == 7); /* the out-of-range ones were not counted */
#undef DELTA
    for (int i = 0; i < after->n; i++)
        if (!strcmp(after->s[i].name, "hourglass_transitions_total")) {
            ck_assert_str_ne(label(&after->s[i], "from"), ""); /* the start of a job's life has a name too */
            ck_assert_int_ge(job_state_parse(label(&after->s[i], "to")), 1);
        }
    free(before);
    free(after);
}
END_TEST

START_TEST(test_instance_label_escaped)
{
    /* [instance] id is free text: quotes, backslashes and newlines must not break the format */
    static const char *const names[] = {"plain",      "with \"quotes\"", "back\\slash",
                                        "two\nlines", "\\n literal",     "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct parsed *p = render(names[i]);
        const struct sample *info = find(p, "hourglass_info", NULL);
        ck_assert_ptr_nonnull(info);
        ck_assert_str_eq(label(info, "instance"), names[i]);
        ck_assert(info->value == 1);
        free(p);
    }
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("format");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_parser_rejects_bad_text);
    tcase_add_test(tc, test_render_is_valid_prometheus_text);
    tcase_add_test(tc, test_render_valid_after_everything_moved);
    tcase_add_test(tc, test_instance_label_escaped);
    suite_add_tcase(s, tc);

    tc = tcase_create("values");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_counters);
    tcase_add_test(tc, test_counter_concurrency);
    tcase_add_test(tc, test_gauges);
    tcase_add_test(tc, test_histogram_sizes);
    tcase_add_test(tc, test_histogram_times);
    tcase_add_test(tc, test_http);
    tcase_add_test(tc, test_http_out_of_range_endpoint);
    tcase_add_test(tc, test_transitions);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(metrics_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
