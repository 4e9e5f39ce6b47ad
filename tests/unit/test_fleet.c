/* test_fleet.c — rendezvous ownership of shards (fleet_owner): every instance computes the
 * same owner from the same list whatever its order, shards spread over the instances, and
 * when an instance leaves only its own shards move. */
#include "duties/fleet.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[] = {"api-1:8080", "api-2:8080", "api-3:8080", "api-4:8080"};
#define NNAMES 4
#define SHARDS 256

START_TEST(owner_does_not_depend_on_list_order)
{
    const char *reversed[NNAMES];
    for (int i = 0; i < NNAMES; i++)
        reversed[i] = names[NNAMES - 1 - i];
    for (int s = 0; s < SHARDS; s++) {
        int a = fleet_owner(names, NNAMES, s), b = fleet_owner(reversed, NNAMES, s);
        ck_assert_int_ge(a, 0);
        ck_assert_str_eq(names[a], reversed[b]);
    }
}
END_TEST

START_TEST(shards_spread_over_instances)
{
    int count[NNAMES] = {0};
    for (int s = 0; s < SHARDS; s++)
        count[fleet_owner(names, NNAMES, s)]++;
    for (int i = 0; i < NNAMES; i++) /* 64 each on average; rendezvous hashing stays near it */
        ck_assert_msg(count[i] >= 40 && count[i] <= 90, "%s owns %d of %d shards", names[i], count[i], SHARDS);
}
END_TEST

START_TEST(a_leaving_instance_moves_only_its_shards)
{
    const char *rest[NNAMES - 1] = {names[0], names[1], names[3]}; /* api-3 left */
    for (int s = 0; s < SHARDS; s++) {
        const char *before = names[fleet_owner(names, NNAMES, s)];
        const char *after = rest[fleet_owner(rest, NNAMES - 1, s)];
        if (strcmp(before, names[2]) != 0)
            ck_assert_str_eq(before, after);
        else
            ck_assert_str_ne(after, names[2]);
    }
}
END_TEST

START_TEST(alone_owns_everything_and_nobody_owns_nothing)
{
    for (int s = 0; s < 8; s++)
        ck_assert_int_eq(fleet_owner(names, 1, s), 0);
    ck_assert_int_eq(fleet_owner(names, 0, 3), -1);
}
END_TEST

static Suite *fleet_suite(void)
{
    Suite *s = suite_create("fleet");
    TCase *tc = tcase_create("owner");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, owner_does_not_depend_on_list_order);
    tcase_add_test(tc, shards_spread_over_instances);
    tcase_add_test(tc, a_leaving_instance_moves_only_its_shards);
    tcase_add_test(tc, alone_owns_everything_and_nobody_owns_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fleet_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
