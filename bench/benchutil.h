/* bench/benchutil.h — what the bench's C load tools (lateness.c, beanstalk.c) share: dying with
 * a message, the two clocks, and a growable vector of samples with its percentiles, printed as
 * the key=value lines bench/run.sh reads. Header-only (static functions): each tool is built
 * from its one .c file. Define BENCH_TOOL (the tool's name, for messages) before including it. */
#ifndef HG_BENCHUTIL_H
#define HG_BENCHUTIL_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef BENCH_TOOL
#error "define BENCH_TOOL before including benchutil.h"
#endif

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, BENCH_TOOL ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double real_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Samples (ms), grown by doubling. */
struct dvec {
    double *v;
    size_t n, cap;
};

static void dpush(struct dvec *d, double x)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 4096;
        d->v = realloc(d->v, d->cap * sizeof *d->v);
        if (d->v == NULL)
            die("out of memory");
    }
    d->v[d->n++] = x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted vector. */
static double pct(const struct dvec *d, double q)
{
    if (d->n == 0)
        return NAN;
    size_t k = (size_t)ceil(q * (double)d->n);
    if (k < 1)
        k = 1;
    if (k > d->n)
        k = d->n;
    return d->v[k - 1];
}

/* Sort d and print <prefix>_n, _p50, _p90, _p99, _p999 and _max. */
static void print_dist(const char *prefix, struct dvec *d)
{
    qsort(d->v, d->n, sizeof *d->v, cmp_double);
    printf("%s_n=%zu\n%s_p50=%.3f\n%s_p90=%.3f\n%s_p99=%.3f\n%s_p999=%.3f\n%s_max=%.3f\n", prefix, d->n, prefix,
           pct(d, 0.50), prefix, pct(d, 0.90), prefix, pct(d, 0.99), prefix, pct(d, 0.999), prefix,
           d->n ? d->v[d->n - 1] : NAN);
}

#endif
