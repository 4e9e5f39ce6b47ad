/* test_params.c — src/http/params.h: form and JSON parameters, typed getters, strict integers. */
#include "http/params.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char err[256];

static int form(struct params *p, const char *s)
{
    err[0] = '\0';
    return params_parse_form(p, s, strlen(s), err, sizeof err);
}

static int json(struct params *p, const char *s)
{
    err[0] = '\0';
    return params_parse_json(p, s, strlen(s), err, sizeof err);
}

/* Parse into a fresh set and free it; 0 / -1 (message in err). */
static int form_only(const char *s)
{
    struct params p;
    params_init(&p);
    int rc = form(&p, s);
    params_free(&p);
    return rc;
}

static int json_only(const char *s)
{
    struct params p;
    params_init(&p);
    int rc = json(&p, s);
    params_free(&p);
    return rc;
}

/* ---- form ---- */

START_TEST(test_form_basic)
{
    struct params p;
    params_init(&p);
    ck_assert_int_eq(form(&p, "id=123&delay=5000"), 0);
    ck_assert_int_eq(p.n, 2);
    ck_assert_str_eq(params_get(&p, "id"), "123");
    ck_assert_str_eq(params_get(&p, "delay"), "5000");
    ck_assert_ptr_null(params_get(&p, "runAt"));
    ck_assert_ptr_null(params_get(&p, "i"));
    params_free(&p);
    ck_assert_int_eq(p.n, 0);
}
END_TEST

START_TEST(test_form_decoding)
{
    struct params p;
    params_init(&p);
    ck_assert_int_eq(form(&p, "a=x+y&b=%41%2b%2F&c=100%25&d%5Fe=1&f=%e2%82%AC"), 0);
    ck_assert_str_eq(params_get(&p, "a"), "x y");
    ck_assert_str_eq(params_get(&p, "b"), "A+/");
    ck_assert_str_eq(params_get(&p, "c"), "100%");
    ck_assert_str_eq(params_get(&p, "d_e"), "1"); /* names are decoded too */
    ck_assert_str_eq(params_get(&p, "f"), "\xe2\x82\xac");
    ck_assert_uint_eq(p.items[4].len, 3);
    ck_assert_uint_eq(p.items[0].len, 3);
    params_free(&p);
}
END_TEST

START_TEST(test_form_empty_and_missing_values)
{
    struct params p;
    params_init(&p);
    ck_assert_int_eq(form(&p, "a=&b&c=1=2"), 0);
    ck_assert_int_eq(p.n, 3);
    ck_assert_str_eq(params_get(&p, "a"), "");
    ck_assert_uint_eq(p.items[0].len, 0);
    ck_assert_str_eq(params_get(&p, "b"), ""); /* no '=' at all: present, empty */
    ck_assert_str_eq(params_get(&p, "c"), "1=2");
    params_free(&p);

    /* empty pieces between '&' are nothing */
    params_init(&p);
    ck_assert_int_eq(form(&p, "&&a=1&&&b=2&"), 0);
    ck_assert_int_eq(p.n, 2);
    params_free(&p);
    params_init(&p);
    ck_assert_int_eq(form(&p, ""), 0);
    ck_assert_int_eq(p.n, 0);
    params_free(&p);
}
END_TEST

START_TEST(test_form_only_len_bytes)
{
    struct params p;
    params_init(&p);
    ck_assert_int_eq(params_parse_form(&p, "a=12&b=3", 4, err, sizeof err), 0);
    ck_assert_int_eq(p.n, 1);
    ck_assert_str_eq(params_get(&p, "a"), "12");
    params_free(&p);
}
END_TEST

START_TEST(test_form_repeated_name)
{
    ck_assert_int_eq(form_only("id=1&id=2"), -1);
    ck_assert_ptr_nonnull(strstr(err, "id"));
    ck_assert_int_eq(form_only("id=1&delay=2&id=1"), -1);
    ck_assert_int_eq(form_only("id=1&%69d=2"), -1); /* the same name once decoded */
    ck_assert_int_eq(form_only("a&a"), -1);
}
END_TEST

START_TEST(test_form_query_and_body_share_one_set)
{
    /* the query string and a form body add to the same set: a name in both is repeated */
    struct params p;
    params_init(&p);
    ck_assert_int_eq(form(&p, "id=1"), 0);
    ck_assert_int_eq(form(&p, "delay=2"), 0);
    ck_assert_int_eq(p.n, 2);
    ck_assert_int_eq(form(&p, "id=1"), -1);
    params_free(&p);
}
END_TEST

START_TEST(test_form_too_many)
{
    char buf[512];
    size_t o = 0;
    for (int i = 0; i < PARAMS_MAX; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%sp%d=%d", i ? "&" : "", i, i);
    struct params p;
    params_init(&p);
    ck_assert_int_eq(form(&p, buf), 0);
    ck_assert_int_eq(p.n, PARAMS_MAX);
    ck_assert_str_eq(params_get(&p, "p15"), "15");
    params_free(&p);
    snprintf(buf + o, sizeof buf - o, "&one=more");
    ck_assert_int_eq(form_only(buf), -1);
    ck_assert_str_ne(err, "");
}
END_TEST

START_TEST(test_form_bad_escapes)
{
    static const char *const bad[] = {"a=%", "a=%4", "a=%zz", "a=%4g", "a=1%",  "a=%%",
                                      "%=1", "%4=1", "a%=1",  "a=%-1", "a=x%0", "b=1&a=%G0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(form_only(bad[i]) == -1, "\"%s\" accepted", bad[i]);
        ck_assert_str_ne(err, "");
    }
}
END_TEST

START_TEST(test_form_nul)
{
    ck_assert_int_eq(form_only("a=%00"), -1);
    ck_assert_int_eq(form_only("a=x%00y"), -1);
    ck_assert_int_eq(form_only("a%00=1"), -1);
    ck_assert_int_eq(form_only("%00=1"), -1);
    /* a raw NUL byte inside the given length */
    struct params p;
    params_init(&p);
    ck_assert_int_eq(params_parse_form(&p, "a=x\0y", 5, err, sizeof err), -1);
    params_free(&p);
}
END_TEST

START_TEST(test_form_bad_names)
{
    ck_assert_int_eq(form_only("=1"), -1); /* empty name */
    ck_assert_int_eq(form_only("a=1&=2"), -1);
    ck_assert_int_eq(form_only("a+b=1"), -1);    /* a space in a name */
    ck_assert_int_eq(form_only("a%0Ab=1"), -1);  /* a control character */
    ck_assert_int_eq(form_only("%C3%A9=1"), -1); /* not ASCII */
    char name[64];
    memset(name, 'n', PARAM_NAME_MAX);
    strcpy(name + PARAM_NAME_MAX, "=1");
    ck_assert_int_eq(form_only(name), 0); /* 32 characters */
    memset(name, 'n', PARAM_NAME_MAX + 1);
    strcpy(name + PARAM_NAME_MAX + 1, "=1");
    ck_assert_int_eq(form_only(name), -1); /* 33 */
}
END_TEST

START_TEST(test_form_errors_leave_set_usable)
{
    struct params p;
    params_init(&p);
    ck_assert_int_eq(form(&p, "a=1&b=%zz"), -1);
    /* whatever was added before the error is still owned and freed normally */
    ck_assert_int_le(p.n, 1);
    params_free(&p);
    ck_assert_int_eq(p.n, 0);
}
END_TEST

/* ---- JSON ---- */

START_TEST(test_json_values)
{
    struct params p;
    params_init(&p);
    ck_assert_int_eq(json(&p, "{\"id\":\"9007199254740993\",\"count\":5,\"neg\":-3,\"force\":true,"
                              "\"expire\":false,\"timeout\":0.5,\"s\":\"a b+%41\"}"),
                     0);
    ck_assert_int_eq(p.n, 7);
    ck_assert_str_eq(params_get(&p, "id"), "9007199254740993");
    ck_assert_str_eq(params_get(&p, "count"), "5");
    ck_assert_str_eq(params_get(&p, "neg"), "-3");
    ck_assert_str_eq(params_get(&p, "force"), "true");
    ck_assert_str_eq(params_get(&p, "expire"), "false");
    ck_assert_str_eq(params_get(&p, "timeout"), "0.5");
    ck_assert_str_eq(params_get(&p, "s"), "a b+%41"); /* JSON strings are not percent-decoded */
    ck_assert_uint_eq(p.items[6].len, 7);
    params_free(&p);

    params_init(&p);
    ck_assert_int_eq(json(&p, "{}"), 0);
    ck_assert_int_eq(p.n, 0);
    params_free(&p);
}
END_TEST

START_TEST(test_json_names_are_literal)
{
    /* member names of a JSON object are what they say: no %-decoding, no '+' as space */
    struct params p;
    params_init(&p);
    ck_assert_int_eq(json(&p, "{\"i%64\":\"5\"}"), 0);
    ck_assert_ptr_null(params_get(&p, "id"));
    ck_assert_str_eq(params_get(&p, "i%64"), "5");
    params_free(&p);

    params_init(&p);
    ck_assert_int_eq(json(&p, "{\"id\":\"1\",\"i%64\":\"2\"}"), 0); /* two different names */
    ck_assert_int_eq(p.n, 2);
    ck_assert_str_eq(params_get(&p, "id"), "1");
    params_free(&p);
}
END_TEST

START_TEST(test_json_rejected_values)
{
    static const char *const bad[] = {
        "{\"a\":null}", "{\"a\":[1]}", "{\"a\":[]}", "{\"a\":{}}", "{\"a\":{\"b\":1}}", "{\"ok\":1,\"a\":null}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(json_only(bad[i]) == -1, "%s accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "\"a\""));
    }
}
END_TEST

START_TEST(test_json_invalid)
{
    static const char *const bad[] = {
        "",
        "{",
        "{\"a\":1",
        "{\"a\":1}x",
        "[]",
        "[{\"a\":1}]",
        "\"a=1\"",
        "1",
        "null",
        "true",
        "a=1",
        "{a:1}",
        "{'a':1}",
        "{\"a\":1,}",
        "{\"a\":1,\"a\":2}",     /* duplicate names */
        "{\"a\":\"x\\u0000y\"}", /* NUL inside a value */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(json_only(bad[i]) == -1, "%s accepted", bad[i]);
        ck_assert_str_ne(err, "");
    }
}
END_TEST

START_TEST(test_json_too_many_and_bad_names)
{
    char buf[1024];
    size_t o = (size_t)snprintf(buf, sizeof buf, "{");
    for (int i = 0; i < PARAMS_MAX; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s\"p%d\":%d", i ? "," : "", i, i);
    snprintf(buf + o, sizeof buf - o, "}");
    ck_assert_int_eq(json_only(buf), 0);
    snprintf(buf + o, sizeof buf - o, ",\"x\":1}");
    ck_assert_int_eq(json_only(buf), -1);

    ck_assert_int_eq(json_only("{\"\":1}"), -1);
    ck_assert_int_eq(json_only("{\"a b\":1}"), -1);
    char name[PARAM_NAME_MAX + 2];
    memset(name, 'n', sizeof name - 1);
    name[PARAM_NAME_MAX] = '\0';
    snprintf(buf, sizeof buf, "{\"%s\":1}", name);
    ck_assert_int_eq(json_only(buf), 0); /* 32 characters */
    name[PARAM_NAME_MAX] = 'n';
    name[PARAM_NAME_MAX + 1] = '\0';
    snprintf(buf, sizeof buf, "{\"%s\":1}", name);
    ck_assert_int_eq(json_only(buf), -1); /* 33 */
}
END_TEST

START_TEST(test_json_numbers_feed_typed_getters)
{
    /* A JSON number must mean the same as its text would in a query string. */
    struct params p;
    params_init(&p);
    ck_assert_int_eq(json(&p, "{\"timeout\":0.1,\"t2\":2.5,\"t3\":0.3,\"count\":7,\"delay\":1500}"), 0);
    int64_t v;
    ck_assert_int_eq(param_seconds(&p, "timeout", 60000, 30000, &v, err, sizeof err), 0);
    ck_assert_int_eq(v, 100);
    ck_assert_int_eq(param_seconds(&p, "t2", 60000, 30000, &v, err, sizeof err), 0);
    ck_assert_int_eq(v, 2500);
    ck_assert_int_eq(param_seconds(&p, "t3", 60000, 30000, &v, err, sizeof err), 0);
    ck_assert_int_eq(v, 300);
    ck_assert_int_eq(param_int(&p, "count", 1, 100, 1, &v, err, sizeof err), 0);
    ck_assert_int_eq(v, 7);
    ck_assert_int_eq(param_int(&p, "delay", 0, INT64_MAX, 0, &v, err, sizeof err), 0);
    ck_assert_int_eq(v, 1500);
    params_free(&p);

    /* whatever the digits, the text reads back as the very same number */
    static const char *const reals[] = {"0.1",    "1.2345678901234567",   "2.2250738585072014e-308",
                                        "1e+300", "-0.30000000000000004", "123456.789"};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        char body[96];
        snprintf(body, sizeof body, "{\"r\":%s}", reals[i]);
        params_init(&p);
        ck_assert_int_eq(json(&p, body), 0);
        ck_assert_msg(strtod(params_get(&p, "r"), NULL) == strtod(reals[i], NULL), "%s -> %s", reals[i],
                      params_get(&p, "r"));
        params_free(&p);
    }
}
END_TEST

/* ---- params_only ---- */

START_TEST(test_params_only)
{
    static const char *const allowed[] = {"id", "delay", "runAt", NULL};
    static const char *const none[] = {NULL};
    struct params p;
    params_init(&p);
    ck_assert_int_eq(params_only(&p, none, err, sizeof err), 0);
    ck_assert_int_eq(form(&p, "id=1&runAt=5"), 0);
    ck_assert_int_eq(params_only(&p, allowed, err, sizeof err), 0);
    ck_assert_int_eq(params_only(&p, none, err, sizeof err), -1);
    ck_assert_int_eq(form(&p, "Delay=5"), 0); /* names are case-sensitive */
    err[0] = '\0';
    ck_assert_int_eq(params_only(&p, allowed, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "Delay"));
    params_free(&p);
}
END_TEST

/* ---- typed getters ---- */

static struct params one(const char *name, const char *value)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s=%s", name, value);
    struct params p;
    params_init(&p);
    ck_assert_int_eq(form(&p, buf), 0);
    return p;
}

static int int_of(const char *value, int64_t min, int64_t max, int64_t *out)
{
    struct params p = one("n", value);
    err[0] = '\0';
    int rc = param_int(&p, "n", min, max, -999, out, err, sizeof err);
    params_free(&p);
    return rc;
}

START_TEST(test_param_int)
{
    int64_t v;
    struct params p;
    params_init(&p);
    ck_assert_int_eq(param_int(&p, "n", 0, 10, 7, &v, err, sizeof err), 0);
    ck_assert_int_eq(v, 7); /* absent -> default */
    params_free(&p);

    ck_assert_int_eq(int_of("5", 0, 10, &v), 0);
    ck_assert_int_eq(v, 5);
    ck_assert_int_eq(int_of("0", 0, 10, &v), 0);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(int_of("10", 0, 10, &v), 0);
    ck_assert_int_eq(v, 10);
    ck_assert_int_eq(int_of("-10", -10, 10, &v), 0);
    ck_assert_int_eq(v, -10);
    ck_assert_int_eq(int_of("9223372036854775807", 0, INT64_MAX, &v), 0);
    ck_assert_int_eq(v, INT64_MAX);

    static const char *const bad[] = {"11",
                                      "-1",
                                      "",
                                      "abc",
                                      "5.0",
                                      "5.",
                                      "1e1",
                                      "%2B5",
                                      "%205",
                                      "5%20",
                                      "0x5",
                                      "9223372036854775808",
                                      "99999999999999999999",
                                      "--1",
                                      "-"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(int_of(bad[i], 0, 10, &v) == -1, "\"%s\" accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "n must be"));
    }
}
END_TEST

START_TEST(test_param_bool)
{
    static const struct {
        const char *text;
        int rc, value;
    } cases[] = {{"true", 0, 1}, {"1", 0, 1},  {"false", 0, 0},  {"0", 0, 0},        {"", -1, 0},  {"yes", -1, 0},
                 {"no", -1, 0},  {"2", -1, 0}, {"truex", -1, 0}, {"%20true", -1, 0}, {"-1", -1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct params p = one("force", cases[i].text);
        int b = 42;
        ck_assert_msg(param_bool(&p, "force", 0, &b, err, sizeof err) == cases[i].rc, "\"%s\"", cases[i].text);
        if (cases[i].rc == 0)
            ck_assert_int_eq(b, cases[i].value);
        params_free(&p);
    }
    struct params p;
    params_init(&p);
    int b = 42;
    ck_assert_int_eq(param_bool(&p, "force", 1, &b, err, sizeof err), 0);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(param_bool(&p, "force", 0, &b, err, sizeof err), 0);
    ck_assert_int_eq(b, 0);
}
END_TEST

START_TEST(test_param_seconds)
{
    static const struct {
        const char *text;
        int rc;
        int64_t ms;
    } cases[] = {
        {"30", 0, 30000},  {"0", 0, 0},        {"0.5", 0, 500},   {"1.25", 0, 1250},
        {"0.001", 0, 1},   {"2.000", 0, 2000}, {"60", 0, 60000},  {"59.999", 0, 59999},
        {"60.001", -1, 0}, {"61", -1, 0},      {"1.2345", -1, 0}, {".5", -1, 0},
        {"5.", -1, 0},     {"-1", -1, 0},      {"+1", -1, 0},     {"1e3", -1, 0},
        {"", -1, 0},       {"abc", -1, 0},     {"1.5.2", -1, 0},  {"1..5", -1, 0},
        {"%201", -1, 0},   {"1%20", -1, 0},    {"0x10", -1, 0},   {"99999999999999999999", -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct params p = one("timeout", cases[i].text);
        int64_t ms = -5;
        err[0] = '\0';
        ck_assert_msg(param_seconds(&p, "timeout", 60000, 30000, &ms, err, sizeof err) == cases[i].rc, "\"%s\"",
                      cases[i].text);
        if (cases[i].rc == 0)
            ck_assert_msg(ms == cases[i].ms, "\"%s\" -> %lld ms", cases[i].text, (long long)ms);
        else
            ck_assert_ptr_nonnull(strstr(err, "timeout"));
        params_free(&p);
    }
    struct params p;
    params_init(&p);
    int64_t ms;
    ck_assert_int_eq(param_seconds(&p, "timeout", 60000, 30000, &ms, err, sizeof err), 0);
    ck_assert_int_eq(ms, 30000);
    /* a large bound: whole seconds beyond 32 bits of milliseconds */
    p = one("delay", "31536000");
    ck_assert_int_eq(param_seconds(&p, "delay", INT64_C(31536000000), 0, &ms, err, sizeof err), 0);
    ck_assert_int_eq(ms, INT64_C(31536000000));
    params_free(&p);
}
END_TEST

/* ---- param_int64_strict ---- */

static int strict(const char *s, int64_t *v)
{
    return param_int64_strict(s, strlen(s), v);
}

START_TEST(test_parse_int64_strict)
{
    int64_t v = 0;
    ck_assert_int_eq(strict("0", &v), 0);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(strict("123", &v), 0);
    ck_assert_int_eq(v, 123);
    ck_assert_int_eq(strict("-123", &v), 0);
    ck_assert_int_eq(v, -123);
    ck_assert_int_eq(strict("007", &v), 0);
    ck_assert_int_eq(v, 7);
    ck_assert_int_eq(strict("9223372036854775807", &v), 0);
    ck_assert_int_eq(v, INT64_MAX);
    ck_assert_int_eq(strict("-9223372036854775807", &v), 0);
    ck_assert_int_eq(v, -INT64_MAX);
    ck_assert_int_eq(param_int64_strict("12345", 2, &v), 0);
    ck_assert_int_eq(v, 12);

    static const char *const bad[] = {"",
                                      "-",
                                      "+1",
                                      " 1",
                                      "1 ",
                                      "1a",
                                      "a1",
                                      "0x1",
                                      "1.0",
                                      "--1",
                                      "-+1",
                                      "1-",
                                      "1e5",
                                      "١",
                                      "9223372036854775808",
                                      "10000000000000000000",
                                      "-99999999999999999999",
                                      "00000000000000000001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 4242;
        ck_assert_msg(strict(bad[i], &v) == -1, "\"%s\" accepted", bad[i]);
        ck_assert_int_eq(v, 4242);
    }
    ck_assert_int_eq(param_int64_strict("1\0", 2, &v), -1);
}
END_TEST

static Suite *params_suite(void)
{
    Suite *s = suite_create("params");
    TCase *tc = tcase_create("form");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_form_basic);
    tcase_add_test(tc, test_form_decoding);
    tcase_add_test(tc, test_form_empty_and_missing_values);
    tcase_add_test(tc, test_form_only_len_bytes);
    tcase_add_test(tc, test_form_repeated_name);
    tcase_add_test(tc, test_form_query_and_body_share_one_set);
    tcase_add_test(tc, test_form_too_many);
    tcase_add_test(tc, test_form_bad_escapes);
    tcase_add_test(tc, test_form_nul);
    tcase_add_test(tc, test_form_bad_names);
    tcase_add_test(tc, test_form_errors_leave_set_usable);
    suite_add_tcase(s, tc);

    tc = tcase_create("json");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_json_values);
    tcase_add_test(tc, test_json_names_are_literal);
    tcase_add_test(tc, test_json_rejected_values);
    tcase_add_test(tc, test_json_invalid);
    tcase_add_test(tc, test_json_too_many_and_bad_names);
    tcase_add_test(tc, test_json_numbers_feed_typed_getters);
    suite_add_tcase(s, tc);

    tc = tcase_create("getters");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_params_only);
    tcase_add_test(tc, test_param_int);
    tcase_add_test(tc, test_param_bool);
    tcase_add_test(tc, test_param_seconds);
    tcase_add_test(tc, test_parse_int64_strict);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(params_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed != 0;
}
