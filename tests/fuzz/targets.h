/* targets.h — fuzz target bodies, shared by the libFuzzer entry points (tests/fuzz/fuzz_*.c)
 * and the corpus replay unit test (tests/unit/test_fuzz_corpus.c).
 *
 * Each target is a static function taking (const uint8_t *data, size_t size) and returning 0.
 * It drives the pure APIs of src/ (router, params, job, ids, config) with the input and checks
 * invariants that follow from the headers and docs/contract; a violated invariant prints what
 * failed and abort()s, so libFuzzer reports it as a crash and the replay test fails.
 *
 * Inputs are copied into heap buffers of exactly the length the API is given (no NUL unless
 * the API needs a C string), so AddressSanitizer sees any read past the end.
 *
 * Where a check compares against a small reference implementation below, the reference is
 * written from the header's description, not from the code under test. */
#ifndef HG_FUZZ_TARGETS_H
#define HG_FUZZ_TARGETS_H

#include "core/config.h"
#include "core/ids.h"
#include "core/job.h"
#include "base/jscan.h"
#include "http/params.h"
#include "core/router.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_UNUSED __attribute__((unused))

/* Name of the input being run (set by the replay test); printed when an invariant fails. */
FZ_UNUSED static const char *fuzz_input_name = NULL;

FZ_UNUSED __attribute__((noreturn)) static void fz_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: fuzz invariant violated: %s%s%s\n", file, line, what, fuzz_input_name ? "\n  input: " : "",
            fuzz_input_name ? fuzz_input_name : "");
    fflush(stderr);
    abort();
}

#define FZ_CHECK(cond)                                                                                                 \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            fz_fail(#cond, __FILE__, __LINE__);                                                                        \
    } while (0)

/* Call once before any input: fixed jansson hash seed, so object iteration (and therefore which
 * error a params body reports first) is the same in every run. */
FZ_UNUSED static void fuzz_init(void)
{
    json_object_seed(0x5eed);
}

/* Exact-size heap copy, no terminator (a 0-byte input still gets a valid pointer). */
FZ_UNUSED static char *fz_copy(const uint8_t *data, size_t size)
{
    char *p = malloc(size ? size : 1);
    FZ_CHECK(p != NULL);
    if (size)
        memcpy(p, data, size);
    else
        p[0] = '\0'; /* never read: the length is 0 */
    return p;
}

/* Heap copy plus a NUL. */
FZ_UNUSED static char *fz_cstr(const uint8_t *data, size_t size)
{
    char *p = malloc(size + 1);
    FZ_CHECK(p != NULL);
    if (size)
        memcpy(p, data, size);
    p[size] = '\0';
    return p;
}

/* An error message was written: NUL-terminated inside its buffer and not empty. */
FZ_UNUSED static int fz_err_ok(const char *err, size_t errlen)
{
    return errlen == 0 || (memchr(err, '\0', errlen) != NULL && (errlen == 1 || err[0] != '\0'));
}

/* ------------------------------------------------------------------------------------------ */
/* router                                                                                     */
/* ------------------------------------------------------------------------------------------ */

FZ_UNUSED static int fz_hex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reference %-decoder into `out` (room for n + 1): -1 on a malformed escape. */
FZ_UNUSED static long fz_ref_decode(const char *s, size_t n, char *out, int plus_is_space)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (n - i < 3 || fz_hex((unsigned char)s[i + 1]) < 0 || fz_hex((unsigned char)s[i + 2]) < 0)
                return -1;
            c = fz_hex((unsigned char)s[i + 1]) * 16 + fz_hex((unsigned char)s[i + 2]);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return (long)o;
}

/* The contract's endpoints: exact paths, and prefixes that take one path segment. */
struct fz_path {
    const char *path;
    enum endpoint ep;
    int has_arg;
};
FZ_UNUSED static const struct fz_path fz_paths[] = {
    {"/push", EP_PUSH, 0},       {"/finish", EP_FINISH, 0},
    {"/release", EP_RELEASE, 0}, {"/touch", EP_TOUCH, 0},
    {"/delete", EP_DELETE, 0},   {"/reschedule", EP_RESCHEDULE, 0},
    {"/reStore", EP_RESTORE, 0}, {"/health", EP_HEALTH, 0},
    {"/stats", EP_STATS, 0},     {"/metrics", EP_METRICS, 0},
    {"/get/", EP_GET, 1},        {"/jobs/", EP_JOBS, 1},
    {"/dead/", EP_DEAD, 1},      {"/reStore/", EP_RESTORE_ONE, 1},
};
#define FZ_NPATHS (sizeof fz_paths / sizeof fz_paths[0])

#define FZ_ST(s) (1u << (s))

/* The statuses router_match may give for `path`, as a bit set of enum route_status; on ROUTE_OK
 * the expected endpoint and decoded argument. */
FZ_UNUSED static unsigned fz_ref_route(const char *path, size_t len, enum endpoint *ep, char *arg, long *arg_len)
{
    *ep = EP_NOT_FOUND;
    *arg_len = 0;
    arg[0] = '\0';
    for (size_t r = 0; r < FZ_NPATHS; r++)
        if (!fz_paths[r].has_arg && len == strlen(fz_paths[r].path) && memcmp(path, fz_paths[r].path, len) == 0) {
            *ep = fz_paths[r].ep;
            return FZ_ST(ROUTE_OK);
        }
    for (size_t r = 0; r < FZ_NPATHS; r++) {
        size_t plen = strlen(fz_paths[r].path);
        if (!fz_paths[r].has_arg || len < plen || memcmp(path, fz_paths[r].path, plen) != 0)
            continue;
        const char *tail = path + plen;
        size_t tlen = len - plen;
        if (memchr(tail, '/', tlen) != NULL)
            return FZ_ST(ROUTE_NOT_FOUND); /* one segment only */
        char *dec = malloc(tlen + 1);
        FZ_CHECK(dec != NULL);
        long n = fz_ref_decode(tail, tlen, dec, 0);
        unsigned st;
        if (n < 0) /* malformed: a long argument may be reported as too long instead */
            st = FZ_ST(ROUTE_BAD_ENCODING) | (tlen > ROUTE_ARG_MAX ? FZ_ST(ROUTE_TOO_LONG) : 0);
        else if (n > ROUTE_ARG_MAX)
            st = FZ_ST(ROUTE_TOO_LONG);
        else if (memchr(dec, '\0', (size_t)n) != NULL)
            st = FZ_ST(ROUTE_BAD_ENCODING);
        else {
            st = FZ_ST(ROUTE_OK);
            *ep = fz_paths[r].ep;
            memcpy(arg, dec, (size_t)n + 1);
            *arg_len = n;
        }
        free(dec);
        return st;
    }
    return FZ_ST(ROUTE_NOT_FOUND);
}

/* Does the Allow header value `allow` list method m? */
FZ_UNUSED static int fz_allow_lists(const char *allow, enum method m)
{
    static const char *const names[] = {"GET", "POST", "HEAD"};
    if (m == METHOD_OTHER)
        return 0;
    const char *name = names[m];
    size_t nlen = strlen(name);
    for (const char *p = allow; (p = strstr(p, name)) != NULL; p += nlen)
        if ((p == allow || p[-1] == ' ' || p[-1] == ',') && (p[nlen] == '\0' || p[nlen] == ','))
            return 1;
    return 0;
}

FZ_UNUSED static void fz_check_endpoint(enum endpoint ep)
{
    const char *name = router_endpoint_name(ep);
    FZ_CHECK(name != NULL && name[0] != '\0');
    for (const char *c = name; *c; c++)
        FZ_CHECK((*c >= 'a' && *c <= 'z') || *c == '_');
    FZ_CHECK(router_is_admin(ep, METHOD_GET) == (ep == EP_RESTORE || ep == EP_RESTORE_ONE || ep == EP_DEAD ||
                                                 ep == EP_CONSOLE || ep == EP_TOPIC_JOBS || ep == EP_PURGE ||
                                                 ep == EP_TOPIC_GROUPS));

    /* contract: POST /push; GET everything else; action endpoints accept GET and POST */
    int action = ep == EP_GET || ep == EP_FINISH || ep == EP_RELEASE || ep == EP_TOUCH || ep == EP_DELETE ||
                 ep == EP_RESCHEDULE || ep == EP_RESTORE || ep == EP_RESTORE_ONE;
    static const enum method methods[] = {METHOD_GET, METHOD_POST, METHOD_HEAD, METHOD_OTHER};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        const char *allow = NULL;
        int ok = router_method_allowed(ep, methods[i], &allow);
        FZ_CHECK(ok == 0 || ok == 1);
        FZ_CHECK(allow != NULL && allow[0] != '\0');
        FZ_CHECK(ok == fz_allow_lists(allow, methods[i])); /* a 405's Allow tells the truth */
        if (methods[i] == METHOD_OTHER)
            FZ_CHECK(!ok);
        if (ep == EP_PUSH && methods[i] == METHOD_POST)
            FZ_CHECK(ok);
        if (ep > EP_PUSH && ep < EP_COUNT && methods[i] == METHOD_GET)
            FZ_CHECK(ok);
        if (action && methods[i] == METHOD_POST)
            FZ_CHECK(ok);
    }
}

/* router_percent_decode of data into heap buffers of several capacities, both '+' modes. */
FZ_UNUSED static void fz_check_decode(const char *src, size_t size, size_t extra_cap)
{
    char *ref = malloc(size + 1), *ref_noplus = malloc(size + 1);
    FZ_CHECK(ref != NULL && ref_noplus != NULL);
    long want_noplus = fz_ref_decode(src, size, ref_noplus, 0);
    for (int plus = 0; plus <= 1; plus++) {
        long want = fz_ref_decode(src, size, ref, plus);
        const size_t caps[] = {0, 1, 2, 3, size / 2, size, size + 1, size + 2, size + 64, extra_cap};
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
            size_t cap = caps[c];
            char *dst = malloc(cap ? cap : 1);
            FZ_CHECK(dst != NULL);
            long got = router_percent_decode(src, size, dst, cap, plus);
            if (cap == 0) /* no room even for the terminator: nothing may be written */
                FZ_CHECK(got == (size == 0 ? 0 : -1));
            else if (want >= 0 && (size_t)want < cap) {
                FZ_CHECK(got == want);
                FZ_CHECK(memcmp(dst, ref, (size_t)want + 1) == 0);
            } else
                FZ_CHECK(got == -1);
            free(dst);
        }
        /* the two modes differ only where a literal '+' became a space */
        FZ_CHECK((want < 0) == (want_noplus < 0));
        if (want >= 0) {
            FZ_CHECK(want == want_noplus);
            for (long i = 0; i < want; i++)
                FZ_CHECK(ref[i] == ref_noplus[i] || (ref_noplus[i] == '+' && ref[i] == ' '));
        }
    }
    free(ref);
    free(ref_noplus);
}

/* Input: a raw request path (no query). */
FZ_UNUSED static int fuzz_router(const uint8_t *data, size_t size)
{
    char *path = fz_copy(data, size);
    struct route *rt = malloc(sizeof *rt);
    char *want_arg = malloc(size + 1);
    FZ_CHECK(rt != NULL && want_arg != NULL);
    memset(rt, 0xA5, sizeof *rt);

    enum endpoint want_ep;
    long want_len;
    unsigned allowed = fz_ref_route(path, size, &want_ep, want_arg, &want_len);
    enum route_status st = router_match(path, size, rt);
    FZ_CHECK(st == ROUTE_OK || st == ROUTE_NOT_FOUND || st == ROUTE_BAD_ENCODING || st == ROUTE_TOO_LONG);
    FZ_CHECK((allowed & FZ_ST(st)) != 0);
    if (st == ROUTE_OK) {
        FZ_CHECK(rt->endpoint == want_ep && rt->endpoint > EP_NOT_FOUND && rt->endpoint < EP_COUNT);
        FZ_CHECK(rt->arg_len <= ROUTE_ARG_MAX && rt->arg_len == (size_t)want_len);
        FZ_CHECK(rt->arg[rt->arg_len] == '\0' && memchr(rt->arg, '\0', rt->arg_len) == NULL);
        FZ_CHECK(memcmp(rt->arg, want_arg, rt->arg_len) == 0);
    } else {
        FZ_CHECK(rt->endpoint == EP_NOT_FOUND && rt->arg_len == 0);
    }
    fz_check_endpoint(rt->endpoint);
    if (size > 0) /* any enum value, including out-of-range ones */
        fz_check_endpoint((enum endpoint)(data[0] % (EP_COUNT + 1)));
    FZ_CHECK(strcmp(router_endpoint_name(EP_COUNT), "unknown") == 0);

    fz_check_decode(path, size, size > 0 ? data[size - 1] % 32 : 5);

    free(want_arg);
    free(rt);
    free(path);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* params                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Reference for param_int64_strict: optional '-', 1..19 digits, magnitude at most INT64_MAX. */
FZ_UNUSED static int fz_ref_int64(const char *s, size_t len, int64_t *out)
{
    size_t i = len > 0 && s[0] == '-' ? 1 : 0;
    if (len - i < 1 || len - i > 19)
        return -1;
    uint64_t v = 0;
    for (size_t k = i; k < len; k++) {
        if (s[k] < '0' || s[k] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[k] - '0'); /* 19 digits cannot overflow 64 bits */
    }
    if (v > (uint64_t)INT64_MAX)
        return -1;
    *out = i ? -(int64_t)v : (int64_t)v;
    return 0;
}

FZ_UNUSED static void fz_check_strict(const char *s, size_t len)
{
    int64_t want = 0, got = 0x4242;
    int rw = fz_ref_int64(s, len, &want);
    int rg = param_int64_strict(s, len, &got);
    FZ_CHECK(rg == rw);
    if (rg == 0)
        FZ_CHECK(got == want);
    else
        FZ_CHECK(got == 0x4242); /* untouched on failure */
}

/* Reference for param_seconds: 1..9 digits, optionally '.' and 1..3 digits; ms, or -1. */
FZ_UNUSED static int64_t fz_ref_seconds(const char *v)
{
    int64_t whole = 0, frac = 0;
    size_t i = 0, n = strlen(v);
    while (i < n && v[i] >= '0' && v[i] <= '9')
        i++;
    if (i == 0 || i > 9) /* at most 9 digits of whole seconds */
        return -1;
    for (size_t k = 0; k < i; k++)
        whole = whole * 10 + (v[k] - '0');
    if (i == n)
        return whole * 1000;
    if (v[i] != '.')
        return -1;
    size_t f0 = ++i;
    while (i < n && v[i] >= '0' && v[i] <= '9')
        i++;
    size_t fd = i - f0;
    if (i != n || fd < 1 || fd > 3)
        return -1;
    for (size_t k = 0; k < 3; k++)
        frac = frac * 10 + (k < fd ? v[f0 + k] - '0' : 0);
    return whole * 1000 + frac;
}

FZ_UNUSED static const char *const fz_allowed_sets[][5] = {
    {NULL},                           /* /push, /stats, /jobs/{id} ... */
    {"id", NULL},                     /* /delete */
    {"id", "attempt", NULL},          /* /finish, /touch */
    {"id", "delay", "attempt", NULL}, /* /release */
    {"id", "delay", "runAt", NULL},   /* /reschedule */
    {"timeout", "count", NULL},       /* /get */
    {"limit", NULL},                  /* /dead */
    {"expire", NULL},                 /* /reStore */
    {"force", NULL},                  /* /reStore/{id} */
};

FZ_UNUSED static const char *const fz_param_names[] = {"id",    "delay", "runAt",  "attempt", "timeout",
                                                       "count", "limit", "expire", "force",   "x"};

FZ_UNUSED static void fz_check_params(const struct params *p)
{
    FZ_CHECK(p->n >= 0 && p->n <= PARAMS_MAX);
    for (int i = 0; i < p->n; i++) {
        const struct param *it = &p->items[i];
        size_t nlen = strnlen(it->name, sizeof it->name);
        FZ_CHECK(nlen >= 1 && nlen <= PARAM_NAME_MAX);
        for (size_t k = 0; k < nlen; k++)
            FZ_CHECK((unsigned char)it->name[k] >= 0x21 && (unsigned char)it->name[k] <= 0x7e);
        FZ_CHECK(it->value != NULL && strlen(it->value) == it->len);
        for (int j = 0; j < i; j++)
            FZ_CHECK(strcmp(p->items[j].name, it->name) != 0);
        FZ_CHECK(params_get(p, it->name) == it->value);
        fz_check_strict(it->value, it->len);
    }
    FZ_CHECK(params_get(p, "") == NULL);

    char err[256];
    for (size_t s = 0; s < sizeof fz_allowed_sets / sizeof fz_allowed_sets[0]; s++) {
        int want = 0;
        for (int i = 0; i < p->n; i++) {
            int known = 0;
            for (const char *const *a = fz_allowed_sets[s]; *a; a++)
                known |= strcmp(*a, p->items[i].name) == 0;
            if (!known)
                want = -1;
        }
        err[0] = '\0';
        int got = params_only(p, fz_allowed_sets[s], err, sizeof err);
        FZ_CHECK(got == want);
        if (got < 0)
            FZ_CHECK(err[0] != '\0');
    }

    /* typed getters on the names handlers use and on every name present */
    const char *names[sizeof fz_param_names / sizeof fz_param_names[0] + PARAMS_MAX];
    size_t nn = 0;
    for (size_t i = 0; i < sizeof fz_param_names / sizeof fz_param_names[0]; i++)
        names[nn++] = fz_param_names[i];
    for (int i = 0; i < p->n; i++)
        names[nn++] = p->items[i].name;

    static const int64_t ranges[][2] = {{INT64_MIN, INT64_MAX},    {0, 0},   {1, 100}, {1, 1000000}, {-5, 5},
                                        {0, INT64_C(31536000000)}, {1, 1000}};
    static const int64_t max_ms[] = {0, 999, 1000, 30000, 60000, 3600000, INT64_C(999999999999), INT64_MAX};
    for (size_t k = 0; k < nn; k++) {
        const char *v = params_get(p, names[k]);
        for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
            int64_t out = 0, def = 4242, x = 0;
            err[0] = '\0';
            int rc = param_int(p, names[k], ranges[r][0], ranges[r][1], def, &out, err, sizeof err);
            if (v == NULL)
                FZ_CHECK(rc == 0 && out == def);
            else if (fz_ref_int64(v, strlen(v), &x) == 0 && x >= ranges[r][0] && x <= ranges[r][1])
                FZ_CHECK(rc == 0 && out == x);
            else
                FZ_CHECK(rc == -1 && err[0] != '\0' && strstr(err, names[k]) != NULL);
        }
        int b = 7;
        err[0] = '\0';
        int rc = param_bool(p, names[k], 1, &b, err, sizeof err);
        if (v == NULL)
            FZ_CHECK(rc == 0 && b == 1);
        else if (!strcmp(v, "true") || !strcmp(v, "1"))
            FZ_CHECK(rc == 0 && b == 1);
        else if (!strcmp(v, "false") || !strcmp(v, "0"))
            FZ_CHECK(rc == 0 && b == 0);
        else
            FZ_CHECK(rc == -1 && err[0] != '\0');

        int64_t want_ms = v ? fz_ref_seconds(v) : -1;
        for (size_t m = 0; m < sizeof max_ms / sizeof max_ms[0]; m++) {
            int64_t out = -7, def = max_ms[m] < 30000 ? max_ms[m] : 30000;
            err[0] = '\0';
            rc = param_seconds(p, names[k], max_ms[m], def, &out, err, sizeof err);
            if (v == NULL)
                FZ_CHECK(rc == 0 && out == def);
            else if (want_ms >= 0 && want_ms <= max_ms[m])
                FZ_CHECK(rc == 0 && out == want_ms);
            else
                FZ_CHECK(rc == -1 && err[0] != '\0');
        }
    }

    /* the required id of the by-id endpoints */
    const char *id = params_get(p, "id");
    uint64_t idv;
    if (id && id_parse(id, strlen(id), &idv) == 0)
        FZ_CHECK(idv >= 1 && idv <= (uint64_t)INT64_MAX);
}

/* Parse `s` (exactly len bytes) as form (json = 0) or JSON into p, with a heap error buffer of
 * errlen bytes (small ones catch messages written past their buffer). */
FZ_UNUSED static int fz_parse(struct params *p, const char *s, size_t len, int json, size_t errlen)
{
    char *copy = fz_copy((const uint8_t *)s, len);
    char *err = malloc(errlen);
    FZ_CHECK(err != NULL);
    memset(err, 'Z', errlen);
    int rc = json ? params_parse_json(p, copy, len, err, errlen) : params_parse_form(p, copy, len, err, errlen);
    FZ_CHECK(rc == 0 || rc == -1);
    if (rc < 0)
        FZ_CHECK(fz_err_ok(err, errlen));
    FZ_CHECK(p->n >= 0 && p->n <= PARAMS_MAX);
    free(err);
    free(copy);
    return rc;
}

/* Input: a query string and/or request body. The whole input is parsed as a form and as a
 * JSON object; when it contains a '\n', the part before is a query string and the part after
 * a form or JSON body added to the same set (as http.c does for POST). */
FZ_UNUSED static int fuzz_params(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    size_t errlen = size > 0 ? (size_t)data[0] % 64 + 1 : 256;
    struct params p;

    params_init(&p);
    if (fz_parse(&p, s, size, 0, 256) == 0)
        fz_check_params(&p);
    params_free(&p);
    FZ_CHECK(p.n == 0);

    params_init(&p);
    if (fz_parse(&p, s, size, 1, errlen) == 0)
        fz_check_params(&p);
    params_free(&p);

    const char *nl = memchr(s, '\n', size);
    if (nl != NULL) {
        size_t qlen = (size_t)(nl - s), blen = size - qlen - 1;
        for (int json = 0; json <= 1; json++) {
            params_init(&p);
            if (fz_parse(&p, s, qlen, 0, 256) == 0) {
                int nq = p.n;
                if (fz_parse(&p, nl + 1, blen, json, errlen) == 0)
                    fz_check_params(&p);
                else
                    FZ_CHECK(p.n >= nq); /* a failed body keeps what the query added, for params_free */
            }
            params_free(&p);
        }
    }

    fz_check_strict(s, size);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* job                                                                                        */
/* ------------------------------------------------------------------------------------------ */

#define FZ_NOW       INT64_C(1750000000000)
#define FZ_DAY       INT64_C(86400000)
#define FZ_RUNAT_MAX INT64_C(253402300799999)

/* contract defaults ([queue] and [http] max_batch) */
FZ_UNUSED static const struct job_limits fz_lim_default = {
    .max_delay = INT64_C(31536000000),
    .default_ttr = 30000,
    .max_ttr = FZ_DAY,
    .default_tries = 3,
    .max_tries = 1000,
    .max_batch = 1000,
};

/* tiny limits, each at most the default's (so what they accept, the defaults accept) */
FZ_UNUSED static const struct job_limits fz_lim_tiny = {
    .max_delay = 1000,
    .default_ttr = 0,
    .max_ttr = 1,
    .default_tries = 1,
    .max_tries = 1,
    .max_batch = 2,
};

FZ_UNUSED static int fz_ref_topic(const char *s, size_t len)
{
    if (len < 1 || len > TOPIC_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-", s[i]) || s[i] == '\0')
            return 0;
    return 1;
}

/* Reference bizKey check: valid UTF-8 (jansson decides), 1..128 code points, no C0/C1 control,
 * DEL, U+2028 or U+2029. */
FZ_UNUSED static int fz_ref_bizkey(const char *s, size_t len)
{
    json_t *str = json_stringn(s, len); /* NULL unless valid UTF-8 */
    if (str == NULL)
        return 0;
    json_decref(str);
    size_t chars = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c & 0xC0) != 0x80)
            chars++;
        if (c < 0x20 || c == 0x7F)
            return 0;
        if (c == 0xC2 && (unsigned char)s[i + 1] >= 0x80 && (unsigned char)s[i + 1] <= 0x9F)
            return 0; /* C1 controls */
        if (c == 0xE2 && (unsigned char)s[i + 1] == 0x80 &&
            ((unsigned char)s[i + 2] == 0xA8 || (unsigned char)s[i + 2] == 0xA9))
            return 0; /* line and paragraph separators */
    }
    return chars >= 1 && chars <= BIZKEY_MAX;
}

/* ---- JSON documents: jscan (src/jscan.h) against jansson as the reference ----
 *
 * jansson (JSON_DECODE_ANY | JSON_ALLOW_NUL, duplicates allowed) accepts exactly RFC 8259
 * JSON, with differences that are not jscan's to share: it refuses numbers it cannot hold
 * in an int64 or a double and a \u0000 in an object key (jscan accepts both: valid JSON),
 * it takes "2\0" as the number 2, and it allows 2048 levels of nesting where jscan allows
 * JSCAN_MAX_DEPTH. */

struct fz_doc {
    json_t *root; /* NULL when jansson refused the text */
    int known;    /* 1 when jansson's verdict is RFC 8259's (not a number it cannot hold) */
    int depth;    /* nesting of arrays and objects (when root != NULL) */
};

/* Deepest nesting of a valid JSON text. */
FZ_UNUSED static int fz_json_depth(const char *s, size_t len)
{
    int depth = 0, max = 0, in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                max = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return max;
}

FZ_UNUSED static struct fz_doc fz_doc_load(const char *s, size_t len)
{
    struct fz_doc d = {NULL, 1, 0};
    json_error_t jerr;
    d.root = json_loadb(s, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (d.root != NULL && memchr(s, '\0', len) != NULL) {
        /* jansson 2.14 takes a NUL right after a top-level number ("2\0") as the end of input;
         * a raw NUL is never valid JSON, but jansson's acceptance is not a reference here */
        json_decref(d.root);
        d.root = NULL;
        d.known = 0;
    } else if (d.root == NULL)
        d.known = strstr(jerr.text, "too big") == NULL && strstr(jerr.text, "overflow") == NULL &&
                  strstr(jerr.text, "NUL byte in object key") == NULL;
    else
        d.depth = fz_json_depth(s, len);
    return d;
}

/* The text without whitespace between tokens (what a stored body looks like); *out_len set. */
FZ_UNUSED static char *fz_strip_ws(const char *s, size_t len, size_t *out_len)
{
    char *o = malloc(len + 1);
    FZ_CHECK(o != NULL);
    size_t n = 0;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\' && i + 1 < len) {
                o[n++] = c;
                c = s[++i];
            } else if (c == '"') {
                in_string = 0;
            }
        } else if (c == '"') {
            in_string = 1;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        }
        o[n++] = c;
    }
    o[n] = '\0';
    *out_len = n;
    return o;
}

FZ_UNUSED static int fz_is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* jscan over the whole input as one JSON document, and its string decoder. */
FZ_UNUSED static void fz_check_jscan(const char *s, size_t len, const struct fz_doc *d, size_t small_cap)
{
    struct jscan j;
    size_t start = 7, end = 7;
    jscan_init(&j, s, len);
    int ok = jscan_value(&j, &start, &end) == 0;
    FZ_CHECK(j.pos <= len && memchr(j.err, '\0', sizeof j.err) != NULL);
    if (ok) {
        FZ_CHECK(start <= end && end <= len && end == j.pos);
        ok = jscan_end(&j) == 0;
    }
    if (!ok)
        FZ_CHECK(j.err[0] != '\0');
    if (d->known) { /* the verdict is RFC 8259's, up to the depth limit */
        if (d->root == NULL)
            FZ_CHECK(!ok);
        else
            FZ_CHECK(ok == (d->depth <= JSCAN_MAX_DEPTH));
    } else {
        FZ_CHECK(d->root == NULL);
    }
    size_t a = 0, b = len;
    while (a < len && fz_is_ws(s[a]))
        a++;
    while (b > a && fz_is_ws(s[b - 1]))
        b--;
    if (ok) /* the value is the text between the whitespace */
        FZ_CHECK(start == a && end == b);

    /* a document that is one string: jscan_string decodes what jansson decodes */
    if (a < len && s[a] == '"') {
        char *full = malloc(len + 1), *part = malloc(small_cap + 1);
        FZ_CHECK(full != NULL && part != NULL);
        size_t flen = 0, plen = 0;
        int ftrunc = -1, ptrunc = -1;
        jscan_init(&j, s, len);
        int rf = jscan_string(&j, full, len, &flen, &ftrunc);
        jscan_init(&j, s, len);
        int rp = jscan_string(&j, part, small_cap, &plen, &ptrunc);
        FZ_CHECK(rf == rp);
        if (rf == 0) {
            FZ_CHECK(ftrunc == 0 && flen <= len); /* decoding never grows the text */
            FZ_CHECK(ptrunc == (flen > small_cap));
            FZ_CHECK(plen <= small_cap);
            if (!ptrunc)
                FZ_CHECK(plen == flen && memcmp(part, full, flen) == 0);
            if (d->root != NULL && ok)
                FZ_CHECK(json_is_string(d->root) && json_string_length(d->root) == flen &&
                         memcmp(json_string_value(d->root), full, flen) == 0);
        } else if (d->known && d->root != NULL && json_is_string(d->root)) {
            fz_fail("jscan_string refused a string jansson accepts", __FILE__, __LINE__);
        }
        free(full);
        free(part);
    }
}

/* The value of a member as it must come out of a successful parse. */
FZ_UNUSED static int64_t fz_int_member(json_t *obj, const char *name, int64_t def)
{
    json_t *v = json_object_get(obj, name);
    FZ_CHECK(v == NULL || json_is_integer(v));
    return v ? (int64_t)json_integer_value(v) : def;
}

/* One accepted job; obj is its object in the reference parse (NULL when jansson could not
 * hold the document); stripped is the whole push body without whitespace between tokens. */
FZ_UNUSED static void fz_check_job(const struct job_spec *j, json_t *obj, const struct job_limits *lim,
                                   const char *stripped, size_t stripped_len)
{
    /* the job as parsed */
    FZ_CHECK(j->topic_len <= TOPIC_MAX && job_topic_valid(j->topic, j->topic_len) &&
             fz_ref_topic(j->topic, j->topic_len));
    FZ_CHECK(j->topic[j->topic_len] == '\0');
    FZ_CHECK(j->run_at >= FZ_NOW && j->run_at <= FZ_NOW + lim->max_delay);
    FZ_CHECK(j->priority >= 0 && j->priority <= 9);
    FZ_CHECK(j->ttr >= 0 && j->ttr <= lim->max_ttr);
    FZ_CHECK(j->tries >= 1 && j->tries <= lim->max_tries);
    FZ_CHECK(j->replace == 0 || j->replace == 1);
    if (j->biz_key == NULL)
        FZ_CHECK(j->biz_len == 0 && j->replace == 0);
    else
        FZ_CHECK(strlen(j->biz_key) == j->biz_len && job_bizkey_valid(j->biz_key, j->biz_len) &&
                 fz_ref_bizkey(j->biz_key, j->biz_len));

    /* the body: one JSON value, as sent (only whitespace between tokens dropped) */
    FZ_CHECK(j->body != NULL && j->body_len > 0 && strlen(j->body) == j->body_len);
    struct jscan js;
    size_t bs, be;
    jscan_init(&js, j->body, j->body_len);
    FZ_CHECK(jscan_value(&js, &bs, &be) == 0 && bs == 0 && be == j->body_len && jscan_end(&js) == 0);
    size_t sl;
    char *again = fz_strip_ws(j->body, j->body_len, &sl);
    FZ_CHECK(sl == j->body_len && memcmp(again, j->body, sl) == 0); /* no whitespace left between tokens */
    free(again);
    FZ_CHECK(strcmp(j->body, "null") == 0 || memmem(stripped, stripped_len, j->body, j->body_len) != NULL);
    struct fz_doc bd = fz_doc_load(j->body, j->body_len);
    FZ_CHECK(bd.root != NULL || !bd.known); /* valid JSON text */

    if (obj == NULL) {
        json_decref(bd.root);
        return;
    }
    /* ... and it is what the producer sent */
    FZ_CHECK(json_is_object(obj));
    json_t *topic = json_object_get(obj, "topic");
    FZ_CHECK(json_is_string(topic) && json_string_length(topic) == j->topic_len &&
             memcmp(json_string_value(topic), j->topic, j->topic_len) == 0);
    json_t *body = json_object_get(obj, "body");
    if (bd.root != NULL)
        FZ_CHECK(json_equal(bd.root, body ? body : json_null()));
    json_decref(bd.root);
    FZ_CHECK(j->priority == fz_int_member(obj, "priority", 5));
    FZ_CHECK(j->ttr == fz_int_member(obj, "ttr", lim->default_ttr));
    FZ_CHECK(j->tries == fz_int_member(obj, "tries", lim->default_tries));
    json_t *delay = json_object_get(obj, "delay"), *run_at = json_object_get(obj, "runAt");
    FZ_CHECK(delay == NULL || run_at == NULL);
    if (run_at != NULL) {
        int64_t want = fz_int_member(obj, "runAt", 0);
        FZ_CHECK(want >= 0 && want <= FZ_RUNAT_MAX);
        FZ_CHECK(j->run_at == (want < FZ_NOW ? FZ_NOW : want));
    } else {
        FZ_CHECK(j->run_at == FZ_NOW + fz_int_member(obj, "delay", 0));
    }
    json_t *biz = json_object_get(obj, "bizKey");
    if (biz == NULL || json_is_null(biz))
        FZ_CHECK(j->biz_key == NULL);
    else
        FZ_CHECK(json_is_string(biz) && j->biz_key != NULL && json_string_length(biz) == j->biz_len &&
                 memcmp(json_string_value(biz), j->biz_key, j->biz_len) == 0);
    json_t *replace = json_object_get(obj, "replace");
    FZ_CHECK(j->replace == (replace != NULL && json_is_true(replace)));
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value)
    {
        static const char *const known[] = {"topic", "body",  "delay",  "runAt",  "priority",
                                            "ttr",   "tries", "bizKey", "replace"};
        int ok = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            ok |= strcmp(known[k], key) == 0;
        FZ_CHECK(ok); /* unknown fields are refused */
    }
}

FZ_UNUSED static enum push_parse_result fz_push(const char *text, size_t len, const struct job_limits *lim,
                                                size_t errlen, const struct fz_doc *d)
{
    struct job_spec *jobs = (struct job_spec *)(uintptr_t)1; /* must be reset by the parser */
    int count = -1, is_array = -1;
    char *err = malloc(errlen);
    FZ_CHECK(err != NULL);
    memset(err, 'Z', errlen);
    enum push_parse_result rc = job_parse_push(text, len, lim, FZ_NOW, &jobs, &count, &is_array, err, errlen);
    FZ_CHECK(rc == PUSH_OK || rc == PUSH_BAD || rc == PUSH_TOO_MANY || rc == PUSH_NOMEM);
    json_t *root = d->root;
    int valid = root != NULL && d->depth <= JSCAN_MAX_DEPTH; /* RFC 8259 JSON within the depth limit */
    if (d->known && !valid)
        FZ_CHECK(rc == PUSH_BAD); /* not JSON: 400 */
    if (valid && json_is_array(root) && json_array_size(root) > (size_t)lim->max_batch)
        FZ_CHECK(rc == PUSH_TOO_MANY); /* 413 */
    if (valid && !json_is_array(root) && !json_is_object(root))
        FZ_CHECK(rc == PUSH_BAD);
    if (valid && json_is_array(root) && json_array_size(root) == 0)
        FZ_CHECK(rc == PUSH_BAD);
    if (rc != PUSH_OK) {
        FZ_CHECK(jobs == NULL && count == 0);
        FZ_CHECK(fz_err_ok(err, errlen));
        if (rc == PUSH_TOO_MANY && root != NULL)
            FZ_CHECK(json_is_array(root) && json_array_size(root) > (size_t)lim->max_batch);
    } else {
        /* only JSON holding an object or 1..max_batch of them */
        FZ_CHECK(valid || !d->known);
        FZ_CHECK(jobs != NULL && (is_array == 0 || is_array == 1));
        size_t stripped_len;
        char *stripped = fz_strip_ws(text, len, &stripped_len);
        if (root != NULL)
            FZ_CHECK(is_array == json_is_array(root));
        if (is_array) {
            FZ_CHECK(count >= 1 && count <= lim->max_batch);
            if (root != NULL)
                FZ_CHECK((size_t)count == json_array_size(root));
            for (int i = 0; i < count; i++)
                fz_check_job(&jobs[i], root ? json_array_get(root, (size_t)i) : NULL, lim, stripped, stripped_len);
        } else {
            FZ_CHECK(count == 1);
            fz_check_job(&jobs[0], root, lim, stripped, stripped_len);
        }
        free(stripped);
        job_specs_free(jobs, count);
    }
    free(err);
    return rc;
}

/* Input: a POST /push body (also a bare JSON document for jscan); a topic list
 * (GET /get/{a,b,c}), a topic and a bizKey. */
FZ_UNUSED static int fuzz_job(const uint8_t *data, size_t size)
{
    char *body = fz_copy(data, size);
    struct fz_doc doc = fz_doc_load(body, size);

    fz_check_jscan(body, size, &doc, size > 0 ? data[0] % 16 : 3);

    enum push_parse_result def = fz_push(body, size, &fz_lim_default, 512, &doc);
    enum push_parse_result tiny = fz_push(body, size, &fz_lim_tiny, 512, &doc);
    if (tiny == PUSH_OK)
        FZ_CHECK(def == PUSH_OK);
    /* a short error buffer changes nothing but the message */
    size_t errlen = size > 0 ? (size_t)data[size - 1] % 24 + 1 : 1;
    FZ_CHECK(fz_push(body, size, &fz_lim_default, errlen, &doc) == def);
    json_decref(doc.root);

    /* topics */
    FZ_CHECK(job_topic_valid(body, size) == fz_ref_topic(body, size));
    FZ_CHECK(job_bizkey_valid(body, size) == fz_ref_bizkey(body, size));

    char *list = fz_copy(data, size);
    const char *topics[TOPICS_PER_GET];
    size_t lens[TOPICS_PER_GET];
    char err[256] = "";
    int n = job_topic_list_parse(list, size, topics, lens, err, sizeof err);
    /* reference: the comma-separated segments, all valid topics, no repeats, at most 32 */
    size_t segs = 0, *seg_at = malloc((size + 1) * sizeof *seg_at), *seg_len = malloc((size + 1) * sizeof *seg_len);
    FZ_CHECK(seg_at != NULL && seg_len != NULL);
    int all_valid = 1, dup = 0;
    for (size_t i = 0, start = 0; i <= size; i++) {
        if (i < size && body[i] != ',')
            continue;
        seg_at[segs] = start;
        seg_len[segs++] = i - start;
        all_valid &= fz_ref_topic(body + start, i - start);
        start = i + 1;
    }
    for (size_t a = 0; a < segs && segs <= TOPICS_PER_GET; a++)
        for (size_t b = 0; b < a; b++)
            dup |= seg_len[a] == seg_len[b] && memcmp(body + seg_at[a], body + seg_at[b], seg_len[a]) == 0;
    free(seg_at);
    free(seg_len);
    if (all_valid && !dup && segs <= TOPICS_PER_GET) {
        FZ_CHECK(n == (int)segs);
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            FZ_CHECK(topics[i] == list + off && memcmp(topics[i], body + off, lens[i]) == 0);
            FZ_CHECK(job_topic_valid(topics[i], lens[i]));
            if (i < n - 1)
                FZ_CHECK(topics[i][lens[i]] == '\0');
            off += lens[i] + 1;
        }
        FZ_CHECK(off == size + 1);
    } else {
        FZ_CHECK(n == -1 && err[0] != '\0');
    }
    free(list);

    /* state names */
    char *name = fz_cstr(data, size);
    int st = job_state_parse(name);
    if (st >= 0)
        FZ_CHECK(st >= JS_DELAYED && st <= JS_ABORTED && strcmp(job_state_name(st), name) == 0);
    FZ_CHECK(job_state_name(size > 0 ? (int)(signed char)data[0] : 0) != NULL);
    free(name);
    free(body);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* ids                                                                                        */
/* ------------------------------------------------------------------------------------------ */

#define FZ_KEY_ALPHABET "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
#define FZ_MS_MAX       ((INT64_C(1) << 41) - 1)

/* Reference id_parse: 1..20 digits, value 1..2^63-1. */
FZ_UNUSED static int fz_ref_id(const char *s, size_t len, uint64_t *out)
{
    if (len < 1 || len > ID_DECIMAL_MAX)
        return -1;
    unsigned __int128 v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v < 1 || v > (unsigned __int128)INT64_MAX)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Everything that must hold for any 64-bit value. */
FZ_UNUSED static void fz_check_id_value(uint64_t id)
{
    char key[ID_KEY_LEN + 1], dec[ID_DECIMAL_MAX + 1];
    id_to_key(id, key);
    FZ_CHECK(strlen(key) == ID_KEY_LEN && strspn(key, FZ_KEY_ALPHABET) == ID_KEY_LEN);
    uint64_t back = 0;
    if (id <= (uint64_t)INT64_MAX)
        FZ_CHECK(id_from_key(key, ID_KEY_LEN, &back) == 0 && back == id);
    else
        FZ_CHECK(id_from_key(key, ID_KEY_LEN, &back) == -1); /* bit 63 is never used */

    int n = id_format(id, dec);
    FZ_CHECK(n >= 1 && n <= ID_DECIMAL_MAX && (size_t)n == strlen(dec));
    char want[32];
    snprintf(want, sizeof want, "%llu", (unsigned long long)id);
    FZ_CHECK(strcmp(dec, want) == 0);
    back = 0;
    if (id >= 1 && id <= (uint64_t)INT64_MAX)
        FZ_CHECK(id_parse(dec, (size_t)n, &back) == 0 && back == id);
    else
        FZ_CHECK(id_parse(dec, (size_t)n, &back) == -1);

    FZ_CHECK(id_worker(id) >= 0 && id_worker(id) <= IDS_MAX_WORKER);
    for (int shards = 1; shards <= IDS_MAX_SHARDS; shards = shards * 2 + 1) {
        int s = id_shard(id, shards);
        FZ_CHECK(s >= 0 && s < shards);
    }
}

FZ_UNUSED static uint64_t fz_u64(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n && i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* A little-endian reader over the input, yielding zeros past its end. */
struct fz_reader {
    const uint8_t *p;
    size_t n, i;
};
FZ_UNUSED static unsigned fz_byte(struct fz_reader *r)
{
    return r->i < r->n ? r->p[r->i++] : 0;
}
FZ_UNUSED static uint32_t fz_u32(struct fz_reader *r)
{
    uint32_t v = fz_byte(r);
    v |= (uint32_t)fz_byte(r) << 8;
    v |= (uint32_t)fz_byte(r) << 16;
    return v | (uint32_t)fz_byte(r) << 24;
}

/* A unix ms time the daemon could see: around now, near the epoch, or near the end of the
 * 41-bit range. */
FZ_UNUSED static int64_t fz_time(struct fz_reader *r)
{
    unsigned sel = fz_byte(r);
    int64_t off = (int32_t)fz_u32(r);
    switch (sel % 4) {
    case 0:
        return IDS_EPOCH_MS + off;
    case 1:
        return IDS_EPOCH_MS + FZ_MS_MAX + off / 1024;
    default:
        return FZ_NOW + off;
    }
}

/* Drive an id generator with a program read from the input; check every id it issues. */
FZ_UNUSED static void fz_idgen_program(const uint8_t *data, size_t size)
{
    struct fz_reader r = {data, size, 0};
    int shards_arg = (int)fz_byte(&r) * 2 - 128; /* -128..382: clamped to 1..256 */
    int shards = shards_arg < 1 ? 1 : shards_arg > IDS_MAX_SHARDS ? IDS_MAX_SHARDS : shards_arg;
    struct idgen *g = malloc(sizeof *g);
    FZ_CHECK(g != NULL);
    idgen_init(g, shards_arg);
    FZ_CHECK(g->shards == shards);

    int worker = -1;
    int64_t floor_ms = INT64_MIN, horizon = IDS_EPOCH_MS - 1, now = FZ_NOW, max_issued = INT64_MIN;
    uint64_t *last = calloc((size_t)shards, sizeof *last); /* per shard, in this worker session */
    FZ_CHECK(last != NULL);
    long budget = 10000;

    while (r.i < r.n && budget > 0) {
        unsigned op = fz_byte(&r);
        switch (op % 5) {
        case 0: { /* take a worker number (or give it up) above a floor */
            int w = (int)(fz_u32(&r) % (IDS_MAX_WORKER + 2)) - 1;
            int64_t fl = fz_time(&r);
            int64_t before = idgen_last_ms(g);
            idgen_set_worker(g, w, fl);
            if (w != worker) { /* a new number starts above its floor, sharing nothing */
                memset(last, 0, (size_t)shards * sizeof *last);
                floor_ms = fl;
                max_issued = INT64_MIN;
            } else { /* the same number: the clock never goes back, and ids pass the floor */
                FZ_CHECK(idgen_last_ms(g) >= before);
                if (fl > floor_ms)
                    floor_ms = fl;
            }
            worker = w;
            break;
        }
        case 1: { /* the lease made ids durable up to here */
            horizon = fz_byte(&r) == 0xff ? INT64_MAX : fz_time(&r);
            idgen_set_horizon(g, horizon);
            break;
        }
        case 2: { /* the clock moves (possibly backwards) */
            unsigned lo = fz_byte(&r), hi = fz_byte(&r);
            now += (int16_t)(lo | hi << 8);
            if (fz_byte(&r) == 0xfe)
                now = fz_time(&r);
            break;
        }
        default: { /* issue ids on one shard */
            unsigned lo = fz_byte(&r), hi = fz_byte(&r);
            int shard = (int)((lo | hi << 8) % (unsigned)(shards + 2)) - 1; /* -1 and shards: out of range */
            long count = op % 5 == 3 ? 1 : (long)fz_byte(&r) * 32 + 1;
            for (long k = 0; k < count && budget > 0; k++, budget--) {
                uint64_t id = 0;
                int rc = idgen_next(g, shard, now, &id);
                FZ_CHECK(rc == 0 || rc == -1);
                if (worker < 0 || shard < 0 || shard >= shards) {
                    FZ_CHECK(rc == -1);
                    break;
                }
                if (rc < 0) { /* refused only past the durable horizon or the 41-bit range */
                    FZ_CHECK(idgen_last_ms(g) > horizon || idgen_last_ms(g) - IDS_EPOCH_MS > FZ_MS_MAX);
                    break;
                }
                int64_t ms = id_unix_ms(id);
                FZ_CHECK(id <= (uint64_t)INT64_MAX && id != 0);
                FZ_CHECK(id_worker(id) == worker && id_shard(id, shards) == shard);
                FZ_CHECK(ms > floor_ms && ms >= now && ms <= horizon);
                FZ_CHECK(id > last[shard]); /* per shard: increasing, so never repeated */
                last[shard] = id;
                if (ms > max_issued)
                    max_issued = ms;
                FZ_CHECK(idgen_last_ms(g) >= max_issued); /* what a lease renewal persists */
                if (k < 4)
                    fz_check_id_value(id);
            }
            break;
        }
        }
    }
    free(last);
    idgen_destroy(g);
    free(g);
}

/* Input: decimal ids, compact keys and raw 64-bit values; also an id-generator program. */
FZ_UNUSED static int fuzz_ids(const uint8_t *data, size_t size)
{
    char *s = fz_copy(data, size);
    uint64_t v = 0, want = 0;

    /* decimal */
    int rc = id_parse(s, size, &v);
    FZ_CHECK(rc == fz_ref_id(s, size, &want));
    if (rc == 0) {
        FZ_CHECK(v == want);
        char dec[ID_DECIMAL_MAX + 1];
        int n = id_format(v, dec);
        size_t lead = 0;
        while (lead + 1 < size && s[lead] == '0')
            lead++;
        FZ_CHECK((size_t)n == size - lead && memcmp(dec, s + lead, (size_t)n) == 0);
        fz_check_id_value(v);
    }

    /* compact key: a bijection between 11-symbol keys whose first symbol is among the first 8
     * and the 63-bit values */
    v = 0;
    rc = id_from_key(s, size, &v);
    int want_ok = size == ID_KEY_LEN;
    for (size_t i = 0; want_ok && i < size; i++)
        want_ok = s[i] != '\0' && strchr(FZ_KEY_ALPHABET, s[i]) != NULL;
    if (want_ok) /* 66 bits of room, 63 used: the first symbol is one of the first 8 */
        want_ok = memchr(FZ_KEY_ALPHABET, s[0], 8) != NULL;
    FZ_CHECK((rc == 0) == want_ok);
    if (rc == 0) {
        char key[ID_KEY_LEN + 1];
        id_to_key(v, key);
        FZ_CHECK(v <= (uint64_t)INT64_MAX && memcmp(key, s, ID_KEY_LEN) == 0);
        fz_check_id_value(v);
    }

    /* raw values: round trips, and keys sort like ids */
    for (size_t off = 0; off + 16 <= size && off < 64; off += 16) {
        uint64_t a = fz_u64(data + off, 8), b = fz_u64(data + off + 8, 8);
        fz_check_id_value(a);
        fz_check_id_value(b);
        char ka[ID_KEY_LEN + 1], kb[ID_KEY_LEN + 1];
        id_to_key(a, ka);
        id_to_key(b, kb);
        int c = strcmp(ka, kb);
        FZ_CHECK((a < b) == (c < 0) && (a == b) == (c == 0));
    }
    if (size > 0 && size < 16)
        fz_check_id_value(fz_u64(data, size));

    /* topic -> shard */
    for (int shards = 1; shards <= IDS_MAX_SHARDS; shards *= 2) {
        int sh = id_topic_shard(s, size, shards);
        FZ_CHECK(sh >= 0 && sh < shards);
    }

    fz_idgen_program(data, size);
    free(s);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* config                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* config_print into a malloc'd string. */
FZ_UNUSED static char *fz_config_text(const struct config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    FZ_CHECK(f != NULL);
    config_print(cfg, f);
    FZ_CHECK(fclose(f) == 0 && text != NULL && strlen(text) == len);
    return text;
}

FZ_UNUSED static void fz_check_config_fields(const struct config *c)
{
#define FZ_STR_OK(field) FZ_CHECK(memchr(c->field, '\0', sizeof c->field) != NULL)
    FZ_STR_OK(listen);
    FZ_STR_OK(token);
    FZ_STR_OK(admin_token);
    FZ_STR_OK(redis_address);
    FZ_STR_OK(redis_password);
    FZ_STR_OK(redis_prefix);
    FZ_STR_OK(mysql_host);
    FZ_STR_OK(mysql_socket);
    FZ_STR_OK(mysql_user);
    FZ_STR_OK(mysql_password);
    FZ_STR_OK(mysql_database);
    FZ_STR_OK(instance_id);
    FZ_STR_OK(log_file);
#undef FZ_STR_OK
    FZ_CHECK(c->redis_prefix[0] != '\0' && c->mysql_database[0] != '\0');
    FZ_CHECK(c->http_threads >= 0 && c->max_body >= 1024 && c->max_batch >= 1);
    FZ_CHECK(c->redis_shards >= 1 && c->redis_shards <= IDS_MAX_SHARDS);
    FZ_CHECK(c->mysql_port >= 1 && c->mysql_port <= 65535);
    FZ_CHECK(c->default_ttr >= 0 && c->max_ttr >= 1 && c->default_tries >= 1 && c->max_tries >= 1);
    FZ_CHECK(c->max_delay >= 0);
    FZ_CHECK(c->worker_id >= -1 && c->worker_id <= IDS_MAX_WORKER);
    FZ_CHECK(c->log_level >= 0 && c->log_level <= 3);
    FZ_CHECK(c->journal_per_row == 0 || c->journal_per_row == 1);
}

/* Input: the text of conf/hourglass.conf. */
FZ_UNUSED static int fuzz_config(const uint8_t *data, size_t size)
{
    char *text = fz_cstr(data, size); /* a C string: an embedded NUL ends it */
    struct config *cfg = malloc(sizeof *cfg), *again = malloc(sizeof *again);
    FZ_CHECK(cfg != NULL && again != NULL);
    char err[512];
    memset(err, 'Z', sizeof err);

    config_defaults(cfg);
    int rc = config_load_string(cfg, "fuzz.conf", text, err, sizeof err);
    FZ_CHECK(rc == 0 || rc == -1);
    if (rc < 0) {
        /* "fuzz.conf:<line>: ..." with a line that exists */
        FZ_CHECK(fz_err_ok(err, sizeof err) && strncmp(err, "fuzz.conf:", 10) == 0);
        long line = strtol(err + 10, NULL, 10);
        long lines = 1;
        for (const char *c = text; *c; c++)
            lines += *c == '\n';
        FZ_CHECK(line >= 1 && line <= lines);
    } else {
        fz_check_config_fields(cfg);

        /* what `hourglassd -p` prints reads back as the same configuration */
        char *printed = fz_config_text(cfg);
        config_defaults(again);
        char err2[512] = "";
        if (config_load_string(again, "printed", printed, err2, sizeof err2) != 0) {
            fprintf(stderr, "config_print output does not load: %s\n", err2);
            fz_fail("config_print output loads", __FILE__, __LINE__);
        }
        char *reprinted = fz_config_text(again);
        if (strcmp(printed, reprinted) != 0) {
            fprintf(stderr, "--- printed\n%s--- printed, loaded and printed again\n%s", printed, reprinted);
            fz_fail("config_print output reads back as the same configuration", __FILE__, __LINE__);
        }
        free(reprinted);
        free(printed);

        /* cross-key validation either refuses with a message or leaves a usable config */
        char verr[512] = "";
        if (config_validate(cfg, verr, sizeof verr) == 0) {
            FZ_CHECK(cfg->http_threads >= 1);
            FZ_CHECK(cfg->default_ttr <= cfg->max_ttr && cfg->default_tries <= cfg->max_tries);
            FZ_CHECK(strrchr(cfg->listen, ':') != NULL);
            FZ_CHECK(!(cfg->token[0] && strcmp(cfg->token, cfg->admin_token) == 0));
        } else {
            FZ_CHECK(verr[0] != '\0');
        }
    }
    free(again);
    free(cfg);
    free(text);
    return 0;
}

#endif
