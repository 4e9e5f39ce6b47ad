/* test_errpage.c — evhttp 2.1's own error pages become the contract's JSON errors
 * (errpage.h): complete pages are rewritten with the right status (never a 5xx), partial
 * ones wait, successes are left alone, a "100 Continue" head before the page is kept. */
#include "http/errpage.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What evhttp 2.1 writes for evhttp_send_error(req, code, reason). */
static char *evhttp_page(int code, const char *reason, int with_length)
{
    static char page[1024];
    char body[256];
    snprintf(body, sizeof body, "<HTML><HEAD>\n<TITLE>%d %s</TITLE>\n</HEAD><BODY>\n<H1>%s</H1>\n</BODY></HTML>\n",
             code, reason, reason);
    if (with_length)
        snprintf(page, sizeof page, "HTTP/1.1 %d %s\r\nContent-Type: text/html\r\nContent-Length: %zu\r\n\r\n%s", code,
                 reason, strlen(body), body);
    else
        snprintf(page, sizeof page, "HTTP/1.1 %d %s\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n%s", code,
                 reason, body);
    return page;
}

static enum errpage_verdict run(const char *in, size_t len, int chunked, struct sbuf *out, int *status)
{
    sb_free(out);
    *status = 0;
    return errpage_rewrite(in, len, chunked, out, status);
}

START_TEST(bad_request_becomes_json_400)
{
    struct sbuf out = SBUF_INIT;
    int status;
    const char *p = evhttp_page(400, "Bad Request", 1);
    ck_assert_int_eq(run(p, strlen(p), 0, &out, &status), ERRPAGE_REWRITE);
    ck_assert_int_eq(status, 400);
    sb_putc(&out, '\0');
    ck_assert_ptr_nonnull(strstr(out.data, "HTTP/1.1 400 Bad Request\r\n"));
    ck_assert_ptr_nonnull(strstr(out.data, "Content-Type: application/json\r\n"));
    ck_assert_ptr_nonnull(strstr(out.data, "Connection: close\r\n"));
    ck_assert_ptr_nonnull(strstr(out.data, "{\"error\":\"bad_request\",\"message\":"));
    /* Content-Length is the JSON body's */
    const char *body = strstr(out.data, "\r\n\r\n") + 4;
    const char *cl = strstr(out.data, "Content-Length: ");
    ck_assert_int_eq(atoi(cl + 16), (int)strlen(body));
    sb_free(&out);
}
END_TEST

START_TEST(statuses_map_to_codes_never_5xx)
{
    static const struct {
        int in, chunked, out;
        const char *code;
    } cases[] = {
        {413, 0, 413, "too_large"},   {413, 1, 400, "bad_request"}, /* 2.1 says "too long" for a corrupt chunked body */
        {404, 0, 404, "not_found"},   {405, 0, 400, "method_not_allowed"}, {501, 0, 405, "method_not_allowed"},
        {400, 0, 400, "bad_request"}, {408, 0, 400, "bad_request"},        {500, 0, 400, "bad_request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sbuf out = SBUF_INIT;
        int status;
        const char *p = evhttp_page(cases[i].in, "X", i % 2);
        ck_assert_int_eq(run(p, strlen(p), cases[i].chunked, &out, &status), ERRPAGE_REWRITE);
        ck_assert_int_eq(status, cases[i].out);
        ck_assert_int_lt(status, 500);
        sb_putc(&out, '\0');
        char want[64];
        snprintf(want, sizeof want, "{\"error\":\"%s\"", cases[i].code);
        ck_assert_msg(strstr(out.data, want) != NULL, "case %zu: %s", i, out.data);
        sb_free(&out);
    }
}
END_TEST

START_TEST(incomplete_pages_wait)
{
    struct sbuf out = SBUF_INIT;
    int status;
    const char *p = evhttp_page(400, "Bad Request", 1);
    size_t len = strlen(p);
    /* every strict prefix: head not complete, or body short of its Content-Length */
    for (size_t n = 0; n < len; n++)
        ck_assert_int_eq(run(p, n, 0, &out, &status), ERRPAGE_WAIT);
    /* without Content-Length, complete only at the closing tag */
    p = evhttp_page(400, "Bad Request", 0);
    len = strlen(p);
    ck_assert_int_eq(run(p, len - 1, 0, &out, &status), ERRPAGE_WAIT);
    ck_assert_int_eq(run(p, len, 0, &out, &status), ERRPAGE_REWRITE);
    sb_free(&out);
}
END_TEST

START_TEST(successes_are_left_alone)
{
    struct sbuf out = SBUF_INIT;
    int status;
    const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    ck_assert_int_eq(run(ok, strlen(ok), 0, &out, &status), ERRPAGE_KEEP);
    ck_assert_uint_eq(out.len, 0);
    char big[20000];
    memset(big, 'x', sizeof big);
    ck_assert_int_eq(run(big, sizeof big, 0, &out, &status), ERRPAGE_KEEP); /* not one of evhttp's pages */
    sb_free(&out);
}
END_TEST

START_TEST(continue_head_is_kept)
{
    struct sbuf out = SBUF_INIT;
    int status;
    char in[2048];
    const char *cont = "HTTP/1.1 100 Continue\r\n\r\n";
    snprintf(in, sizeof in, "%s%s", cont, evhttp_page(413, "Payload Too Large", 1));
    ck_assert_int_eq(run(in, strlen(in), 0, &out, &status), ERRPAGE_REWRITE);
    ck_assert_int_eq(status, 413);
    ck_assert_uint_gt(out.len, strlen(cont));
    ck_assert_int_eq(memcmp(out.data, cont, strlen(cont)), 0);
    ck_assert_int_eq(memcmp(out.data + strlen(cont), "HTTP/1.1 413 ", 13), 0);
    /* a 100 Continue alone waits for what follows */
    ck_assert_int_eq(run(cont, strlen(cont), 0, &out, &status), ERRPAGE_WAIT);
    sb_free(&out);
}
END_TEST

START_TEST(error_json_and_reasons)
{
    struct sbuf sb = SBUF_INIT, members = SBUF_INIT;
    sb_puts(&members, "\"ids\":[\"1\"]");
    errpage_json(&sb, "unavailable", "say \"why\"", &members);
    sb_putc(&sb, '\0');
    ck_assert_str_eq(sb.data, "{\"error\":\"unavailable\",\"message\":\"say \\\"why\\\"\",\"ids\":[\"1\"]}");
    ck_assert_str_eq(errpage_reason(429), "Too Many Requests");
    ck_assert_str_eq(errpage_reason(418), "Error");
    sb_free(&sb);
    sb_free(&members);
}
END_TEST

static Suite *errpage_suite(void)
{
    Suite *s = suite_create("errpage");
    TCase *tc = tcase_create("rewrite");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, bad_request_becomes_json_400);
    tcase_add_test(tc, statuses_map_to_codes_never_5xx);
    tcase_add_test(tc, incomplete_pages_wait);
    tcase_add_test(tc, successes_are_left_alone);
    tcase_add_test(tc, continue_head_is_kept);
    tcase_add_test(tc, error_json_and_reasons);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(errpage_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
