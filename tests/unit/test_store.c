/* test_store.c — decoding the scripts' replies (store_decode_id, store_decode_view): every
 * shape an id script answers, the refusals (missing, state, stale, bizheld), and replies of
 * the wrong shape, which must be refused (-1: the caller answers 503) rather than read. The
 * replies are written as RESP text and parsed by hiredis's own reader, as they arrive. */
#include "core/job.h"
#include "redis/store.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

static redisReply *resp(const char *text)
{
    redisReader *rd = redisReaderCreate();
    ck_assert_ptr_nonnull(rd);
    ck_assert_int_eq(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
    void *reply = NULL;
    ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    ck_assert_ptr_nonnull(reply);
    redisReaderFree(rd);
    return reply;
}

static int decode_id(const char *text, enum store_id_shape shape, struct id_outcome *o)
{
    redisReply *r = resp(text);
    int rc = store_decode_id(r, shape, o);
    freeReplyObject(r);
    return rc;
}

START_TEST(id_ok_shapes)
{
    struct id_outcome o;
    ck_assert_int_eq(decode_id("*4\r\n$2\r\nok\r\n:3\r\n:1\r\n:1795216876674\r\n", SHAPE_FINISH, &o), 0);
    ck_assert_int_eq(o.status, ID_OK);
    ck_assert_int_eq(o.from_state, JS_RESERVED);
    ck_assert_int_eq(o.state, JS_FINISHED);
    ck_assert_uint_eq(o.ver, 3);
    ck_assert_uint_eq(o.attempts, 1);
    ck_assert_int_eq(o.run_at, 1795216876674);

    ck_assert_int_eq(decode_id("*5\r\n$2\r\nok\r\n:1\r\n:1795216880000\r\n:4\r\n:2\r\n", SHAPE_RELEASE, &o), 0);
    ck_assert_int_eq(o.state, JS_DELAYED);
    ck_assert_int_eq(o.run_at, 1795216880000);
    ck_assert_uint_eq(o.ver, 4);
    ck_assert_uint_eq(o.attempts, 2);

    ck_assert_int_eq(decode_id("*2\r\n$2\r\nok\r\n:1795216900000\r\n", SHAPE_TOUCH, &o), 0);
    ck_assert_int_eq(o.state, JS_RESERVED);
    ck_assert_int_eq(o.lease_until, 1795216900000);

    ck_assert_int_eq(decode_id("*5\r\n$2\r\nok\r\n:2\r\n:5\r\n:0\r\n:7\r\n", SHAPE_DELETE, &o), 0);
    ck_assert_int_eq(o.from_state, JS_READY);
    ck_assert_int_eq(o.state, JS_DELETED);
    ck_assert_uint_eq(o.ver, 5);
    ck_assert_int_eq(o.run_at, 7);

    /* numbers may come as bulk strings (Lua tostring) as well as integers */
    ck_assert_int_eq(decode_id("*6\r\n$2\r\nok\r\n:1\r\n:2\r\n$2\r\n99\r\n:6\r\n:0\r\n", SHAPE_RESCHEDULE, &o), 0);
    ck_assert_int_eq(o.from_state, JS_DELAYED);
    ck_assert_int_eq(o.state, JS_READY);
    ck_assert_int_eq(o.run_at, 99);
    ck_assert_uint_eq(o.ver, 6);

    ck_assert_int_eq(decode_id("*2\r\n$2\r\nok\r\n:9\r\n", SHAPE_REQUEUE, &o), 0);
    ck_assert_int_eq(o.from_state, JS_DEAD);
    ck_assert_int_eq(o.state, JS_READY);
    ck_assert_uint_eq(o.ver, 9);
}
END_TEST

START_TEST(id_refusals)
{
    struct id_outcome o;
    ck_assert_int_eq(decode_id("*1\r\n$7\r\nmissing\r\n", SHAPE_FINISH, &o), 0);
    ck_assert_int_eq(o.status, ID_MISSING);
    ck_assert_int_eq(decode_id("*2\r\n$5\r\nstate\r\n:3\r\n", SHAPE_RESCHEDULE, &o), 0);
    ck_assert_int_eq(o.status, ID_WRONG_STATE);
    ck_assert_int_eq(o.state, JS_RESERVED);
    ck_assert_int_eq(decode_id("*2\r\n$5\r\nstale\r\n:4\r\n", SHAPE_FINISH, &o), 0);
    ck_assert_int_eq(o.status, ID_STALE);
    ck_assert_uint_eq(o.attempts, 4);
    ck_assert_int_eq(decode_id("*1\r\n$7\r\nbizheld\r\n", SHAPE_REQUEUE, &o), 0);
    ck_assert_int_eq(o.status, ID_BIZ_HELD);
}
END_TEST

START_TEST(id_wrong_shapes_are_refused)
{
    struct id_outcome o;
    static const struct {
        const char *text;
        enum store_id_shape shape;
    } bad[] = {
        {"*3\r\n$2\r\nok\r\n:3\r\n:1\r\n", SHAPE_FINISH}, /* one element short */
        {"*1\r\n$2\r\nok\r\n", SHAPE_TOUCH},              /* no lease */
        {"*0\r\n", SHAPE_DELETE},                         /* empty */
        {"*1\r\n$5\r\nstate\r\n", SHAPE_RESCHEDULE},      /* "state" without the state */
        {"*2\r\n$7\r\nunknown\r\n:1\r\n", SHAPE_FINISH},  /* a word no script says */
        {":1\r\n", SHAPE_FINISH},                         /* not an array */
        {"$2\r\nok\r\n", SHAPE_FINISH},
        {"-ERR something\r\n", SHAPE_FINISH}, /* an error reply */
        {"*-1\r\n", SHAPE_FINISH},            /* nil */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(decode_id(bad[i].text, bad[i].shape, &o) == -1, "case %zu decoded", i);
    ck_assert_int_eq(store_decode_id(NULL, SHAPE_FINISH, &o), -1); /* no reply at all */
}
END_TEST

START_TEST(view_found_absent_and_wrong)
{
    struct job_view v;
    redisReply *r = resp("*11\r\n:3\r\n:4\r\n:1\r\n:5\r\n:30000\r\n:3\r\n:1795216876674\r\n$6\r\norders\r\n"
                         "$3\r\nk-1\r\n$9\r\n{\"a\":[1]}\r\n:1795216906674\r\n");
    ck_assert_int_eq(store_decode_view(r, &v), 0);
    ck_assert_int_eq(v.found, 1);
    ck_assert_int_eq(v.state, JS_RESERVED);
    ck_assert_uint_eq(v.ver, 4);
    ck_assert_uint_eq(v.attempts, 1);
    ck_assert_int_eq(v.priority, 5);
    ck_assert_int_eq(v.ttr, 30000);
    ck_assert_int_eq(v.tries, 3);
    ck_assert_int_eq(v.run_at, 1795216876674);
    ck_assert_int_eq(v.lease_until, 1795216906674);
    ck_assert_uint_eq(v.topic_len, 6);
    ck_assert_int_eq(memcmp(v.topic, "orders", 6), 0);
    ck_assert_uint_eq(v.biz_len, 3);
    ck_assert_uint_eq(v.body_len, 9);
    ck_assert_int_eq(memcmp(v.body, "{\"a\":[1]}", 9), 0);
    freeReplyObject(r);

    r = resp("*0\r\n");
    ck_assert_int_eq(store_decode_view(r, &v), 0);
    ck_assert_int_eq(v.found, 0);
    freeReplyObject(r);

    /* ten elements, a topic that is a number, a non-array: refused */
    static const char *const bad[] = {
        "*10\r\n:3\r\n:4\r\n:1\r\n:5\r\n:30000\r\n:3\r\n:1\r\n$1\r\nt\r\n$0\r\n\r\n$1\r\n1\r\n",
        "*11\r\n:3\r\n:4\r\n:1\r\n:5\r\n:30000\r\n:3\r\n:1\r\n:7\r\n$0\r\n\r\n$1\r\n1\r\n:0\r\n",
        ":0\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = resp(bad[i]);
        ck_assert_msg(store_decode_view(r, &v) == -1, "case %zu decoded", i);
        freeReplyObject(r);
    }
    ck_assert_int_eq(store_decode_view(NULL, &v), -1);
}
END_TEST

static Suite *store_suite(void)
{
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, id_ok_shapes);
    tcase_add_test(tc, id_refusals);
    tcase_add_test(tc, id_wrong_shapes_are_refused);
    tcase_add_test(tc, view_found_absent_and_wrong);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(store_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
