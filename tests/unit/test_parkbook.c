/* test_parkbook.c — the long-polls' bookkeeping without Redis or sockets: filing under several
 * topics, oldest first per topic; unfiling from head, middle, tail and every topic; a topic's
 * list going with its last request and coming back; whom a notification wakes, the rewake of a
 * busy request retried once; passing a notification on until a reservation finds nothing, and not
 * after one that emptied its topics; the
 * tick's topics; drain; and random filing and unfiling of 10,000 requests checked against a
 * plain array model. */
#include "core/parkbook.h"

#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct req {
    struct parkbook_entry e;
    int id;
    int answered;
    int nt;
    char names[4][8]; /* outlive the filing, as a request's URI does */
    const char *topics[4];
    size_t lens[4];
};

/* Give r the comma-separated topics of list. */
static void set_topics(struct req *r, int id, const char *list)
{
    memset(r, 0, sizeof *r);
    r->id = id;
    r->e.owner = r;
    for (const char *s = list; *s;) {
        size_t n = strcspn(s, ",");
        if (r->nt == 4 || n >= sizeof r->names[0])
            ck_abort_msg("test topics: at most 4 of up to 7 characters");
        memcpy(r->names[r->nt], s, n);
        r->names[r->nt][n] = '\0';
        r->topics[r->nt] = r->names[r->nt];
        r->lens[r->nt++] = n;
        s += n + (s[n] == ',');
    }
}

static void file_req(struct parkbook *b, struct req *r, int id, const char *list)
{
    set_topics(r, id, list);
    ck_assert_int_eq(parkbook_file(b, &r->e, r->topics, r->lens, r->nt), 0);
    ck_assert_int_eq(r->e.filed, 1);
}

/* Requests 1..n (r[1] to r[n]) filed under topic in that order. */
static void file_queue(struct parkbook *b, struct req *r, int n, const char *topic)
{
    for (int i = 1; i <= n; i++)
        file_req(b, &r[i], i, topic);
}

static int id_of(const struct parkbook_link *l)
{
    return ((const struct req *)l->e->owner)->id;
}

/* The ids filed under topic, oldest first, into ids (up to max); their count, or -1 when a back
 * link disagrees with the forward ones. Asserts only once per call: Check records every passing
 * assertion with a write(2), which the model test would pay a million times. */
static int walk(const struct parkbook *b, const char *topic, size_t len, int *ids, int max)
{
    int n = 0;
    const struct parkbook_link *prev = NULL;
    for (const struct parkbook_link *l = parkbook_oldest(b, topic, len); l; l = l->next) {
        if (l->prev != prev || !l->e->filed)
            return -1;
        if (n < max)
            ids[n] = id_of(l);
        n++;
        prev = l;
    }
    return n;
}

/* topic holds exactly the ids given (-1 ends the list), in that order. */
static void expect_order(const struct parkbook *b, const char *topic, ...)
{
    int want[64], got[64], nw = 0;
    va_list ap;
    va_start(ap, topic);
    for (int id; (id = va_arg(ap, int)) >= 0;)
        want[nw++] = id;
    va_end(ap);
    int ng = walk(b, topic, strlen(topic), got, 64);
    ck_assert_msg(ng == nw, "topic %s holds %d requests, expected %d", topic, ng, nw);
    for (int i = 0; i < nw; i++)
        ck_assert_msg(got[i] == want[i], "topic %s position %d: request %d, expected %d", topic, i, got[i], want[i]);
}

/* Unfile n requests (filed or not), which must leave the book empty, and free it. */
static void empty_and_free(struct parkbook *b, struct req *reqs, int n)
{
    for (int i = 0; i < n; i++)
        parkbook_unfile(b, &reqs[i].e);
    ck_assert_uint_eq(parkbook_topic_count(b), 0);
    parkbook_free(b);
}

static struct parkbook_entry *notify(struct parkbook *b, const char *topic)
{
    return parkbook_notify(b, topic, strlen(topic));
}

START_TEST(a_request_is_filed_under_each_of_its_topics)
{
    struct parkbook b = {0};
    struct req r;
    file_req(&b, &r, 1, "a,b,c");
    ck_assert_uint_eq(parkbook_topic_count(&b), 3);
    expect_order(&b, "a", 1, -1);
    expect_order(&b, "b", 1, -1);
    expect_order(&b, "c", 1, -1);
    expect_order(&b, "d", -1);
    ck_assert_ptr_eq(notify(&b, "b"), &r.e);
    ck_assert_ptr_eq(notify(&b, "c"), &r.e);
    ck_assert_ptr_null(notify(&b, "d"));
    empty_and_free(&b, &r, 1);
}
END_TEST

START_TEST(topic_names_are_copied_at_filing)
{
    struct parkbook b = {0};
    struct req r;
    set_topics(&r, 1, "orders,mail");
    ck_assert_int_eq(parkbook_file(&b, &r.e, r.topics, r.lens, r.nt), 0);
    memset(r.names, 'x', sizeof r.names); /* the request's own strings may go before the book's */
    ck_assert_ptr_eq(notify(&b, "orders"), &r.e);
    ck_assert_ptr_eq(notify(&b, "mail"), &r.e);
    int seen = 0;
    size_t pos = 0, len;
    for (const char *t; (t = parkbook_next_topic(&b, &pos, &len)) != NULL;) {
        ck_assert_uint_eq(len, strlen(t));
        seen |= (len == 6 && memcmp(t, "orders", 6) == 0) ? 1 : (len == 4 && memcmp(t, "mail", 4) == 0) ? 2 : 4;
    }
    ck_assert_int_eq(seen, 3);
    empty_and_free(&b, &r, 1);
}
END_TEST

START_TEST(each_topic_keeps_filing_order)
{
    struct parkbook b = {0};
    struct req r[5];
    file_req(&b, &r[1], 1, "a");
    file_req(&b, &r[2], 2, "a,b");
    file_req(&b, &r[3], 3, "b,a"); /* the order of a request's topics does not matter */
    file_req(&b, &r[4], 4, "c,a");
    expect_order(&b, "a", 1, 2, 3, 4, -1);
    expect_order(&b, "b", 2, 3, -1);
    expect_order(&b, "c", 4, -1);
    empty_and_free(&b, &r[1], 4);
}
END_TEST

START_TEST(unfiling_from_middle_head_and_tail_keeps_the_rest_in_order)
{
    struct parkbook b = {0};
    struct req r[7];
    file_queue(&b, r, 6, "a");
    parkbook_unfile(&b, &r[3].e); /* middle */
    expect_order(&b, "a", 1, 2, 4, 5, 6, -1);
    parkbook_unfile(&b, &r[1].e); /* head */
    expect_order(&b, "a", 2, 4, 5, 6, -1);
    parkbook_unfile(&b, &r[6].e); /* tail */
    expect_order(&b, "a", 2, 4, 5, -1);
    ck_assert_int_eq(r[6].e.filed, 0);
    file_req(&b, &r[6], 7, "a"); /* the tail is really the tail: a newcomer lands after 5 */
    expect_order(&b, "a", 2, 4, 5, 7, -1);
    ck_assert_ptr_eq(notify(&b, "a"), &r[2].e); /* and the head is 2 */
    empty_and_free(&b, &r[1], 6);               /* unfiling what is not filed is harmless */
}
END_TEST

START_TEST(unfiling_takes_a_request_out_of_every_topic)
{
    struct parkbook b = {0};
    struct req r[4];
    file_req(&b, &r[1], 1, "a,b,c");
    file_req(&b, &r[2], 2, "c,b,a");
    file_req(&b, &r[3], 3, "b");
    parkbook_unfile(&b, &r[2].e); /* tail of a, middle of b, tail of c */
    expect_order(&b, "a", 1, -1);
    expect_order(&b, "b", 1, 3, -1);
    expect_order(&b, "c", 1, -1);
    parkbook_unfile(&b, &r[1].e); /* head and last of a and c, head of b */
    expect_order(&b, "a", -1);
    expect_order(&b, "b", 3, -1);
    expect_order(&b, "c", -1);
    ck_assert_uint_eq(parkbook_topic_count(&b), 1);
    ck_assert_ptr_null(notify(&b, "a"));
    ck_assert_ptr_eq(notify(&b, "b"), &r[3].e);
    empty_and_free(&b, &r[3], 1);
}
END_TEST

START_TEST(a_topic_list_goes_with_its_last_request_and_comes_back)
{
    struct parkbook b = {0};
    struct req r[3];
    file_req(&b, &r[1], 1, "a,b");
    file_req(&b, &r[2], 2, "b");
    parkbook_unfile(&b, &r[1].e);
    ck_assert_uint_eq(parkbook_topic_count(&b), 1); /* a went, b stays */
    ck_assert_ptr_null(parkbook_oldest(&b, "a", 1));
    r[1].e.reserving = 1;
    ck_assert_ptr_null(notify(&b, "a")); /* nobody remembers a notification nobody waits for */
    ck_assert_int_eq(r[1].e.rewake, 0);
    r[1].e.reserving = 0;
    parkbook_unfile(&b, &r[2].e);
    ck_assert_uint_eq(parkbook_topic_count(&b), 0);
    size_t pos = 0, len;
    ck_assert_ptr_null(parkbook_next_topic(&b, &pos, &len));

    file_req(&b, &r[1], 3, "a"); /* re-created, holding only the newcomer */
    expect_order(&b, "a", 3, -1);
    expect_order(&b, "b", -1);
    ck_assert_uint_eq(parkbook_topic_count(&b), 1);
    empty_and_free(&b, &r[1], 1);
}
END_TEST

START_TEST(a_notification_wakes_the_oldest_idle_request)
{
    struct parkbook b = {0};
    struct req r[4];
    file_queue(&b, r, 3, "a");
    ck_assert_ptr_eq(notify(&b, "a"), &r[1].e);
    ck_assert_ptr_eq(notify(&b, "a"), &r[1].e); /* notify picks; only a reservation makes busy */
    r[1].e.reserving = 1;
    ck_assert_ptr_eq(notify(&b, "a"), &r[2].e);
    r[2].e.finished = 1; /* timed out mid-reservation: not to be woken again */
    ck_assert_ptr_eq(notify(&b, "a"), &r[3].e);
    for (int i = 1; i <= 3; i++)
        ck_assert_int_eq(r[i].e.rewake, 0); /* someone was idle: nothing to remember */
    empty_and_free(&b, &r[1], 3);
}
END_TEST

/* A tiny stand-in for longpoll.c's reservations: `jobs` wait on every topic; a woken request
 * reserves (queued, as Redis answers later); a reservation that takes a job answers the request
 * and passes the notification on; one that finds nothing leaves it parked and retries once if a
 * notification came meanwhile. */
struct sim {
    struct parkbook *b;
    int jobs;
    int count; /* jobs each request asks for (0 = 1) */
    struct req *queue[256];
    int head, tail;
    int reservations;
    int served[64], nserved;
};

static void sim_wake(struct parkbook_entry *e, void *arg)
{
    struct sim *s = arg;
    ck_assert_int_eq(e->reserving, 0);
    e->reserving = 1;
    s->queue[s->tail++] = e->owner;
    s->reservations++;
}

static void sim_notify(struct sim *s, const char *topic)
{
    struct parkbook_entry *e = notify(s->b, topic);
    if (e)
        sim_wake(e, s);
}

/* Redis answers the oldest reservation in flight. */
static void sim_answer_one(struct sim *s)
{
    ck_assert_int_lt(s->head, s->tail);
    struct req *r = s->queue[s->head++];
    r->e.reserving = 0;
    if (s->jobs > 0) {
        int count = s->count > 0 ? s->count : 1;
        int got = s->jobs < count ? s->jobs : count;
        s->jobs -= got;
        s->served[s->nserved++] = r->id;
        int pass_on = parkbook_pass_on_wanted(&r->e, got, count, 0);
        struct parkbook_topics saved;
        parkbook_topics_save(&saved, r->topics, r->lens, r->nt);
        parkbook_unfile(s->b, &r->e);
        memset(r, 0xa5, sizeof *r); /* answered and freed: the book must not look at it again */
        if (pass_on)
            parkbook_pass_on(s->b, &saved, sim_wake, NULL, s);
    } else if (parkbook_take_rewake(&r->e)) {
        sim_wake(&r->e, s);
    }
}

static void sim_run(struct sim *s)
{
    while (s->head < s->tail)
        sim_answer_one(s);
}

START_TEST(a_notification_during_a_reservation_is_retried_once)
{
    struct parkbook b = {0};
    struct sim s = {.b = &b};
    struct req r[3];
    file_req(&b, &r[1], 1, "a");
    sim_notify(&s, "a");
    for (int i = 0; i < 3; i++)
        sim_notify(&s, "a"); /* announcements while its reservation is out */
    ck_assert_int_eq(s.reservations, 1);
    ck_assert_int_eq(r[1].e.rewake, 1);
    sim_answer_one(&s); /* found nothing: retries, once for all three */
    ck_assert_int_eq(s.reservations, 2);
    ck_assert_int_eq(r[1].e.reserving, 1);
    sim_answer_one(&s); /* nothing again, and nothing came meanwhile: stays parked */
    ck_assert_int_eq(s.reservations, 2);
    ck_assert_int_eq(s.head, s.tail);
    ck_assert_int_eq(parkbook_take_rewake(&r[1].e), 0);

    /* with two waiting, the oldest remembers; the retry finds the job that came meanwhile */
    file_req(&b, &r[2], 2, "a");
    sim_notify(&s, "a");
    sim_notify(&s, "a");
    ck_assert_int_eq(s.reservations, 4); /* both busy */
    sim_notify(&s, "a");
    sim_notify(&s, "a");
    ck_assert_int_eq(s.reservations, 4);
    ck_assert_int_eq(r[1].e.rewake, 1);
    ck_assert_int_eq(r[2].e.rewake, 0);
    sim_answer_one(&s); /* 1: nothing, retries */
    sim_answer_one(&s); /* 2: nothing, nothing remembered */
    ck_assert_int_eq(s.reservations, 5);
    s.jobs = 1;
    sim_run(&s); /* 1's retry takes it and passes on to 2, which finds nothing */
    ck_assert_int_eq(s.nserved, 1);
    ck_assert_int_eq(s.served[0], 1);
    ck_assert_int_eq(s.reservations, 6);
    expect_order(&b, "a", 2, -1);
    ck_assert_int_eq(r[2].e.reserving, 0);
    ck_assert_int_eq(parkbook_take_rewake(&r[2].e), 0);
    empty_and_free(&b, &r[2], 1); /* 1 was answered */
}
END_TEST

START_TEST(a_burst_passes_on_until_a_reservation_finds_nothing)
{
    struct parkbook b = {0};
    struct sim s = {.b = &b, .jobs = 3};
    struct req r[6];
    file_queue(&b, r, 5, "a");
    sim_notify(&s, "a"); /* one announcement for three jobs */
    sim_run(&s);
    ck_assert_int_eq(s.nserved, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(s.served[i], i + 1); /* oldest first */
    ck_assert_int_eq(s.reservations, 4);      /* the fourth found nothing; the fifth was never asked */
    expect_order(&b, "a", 4, 5, -1);
    ck_assert_int_eq(r[4].e.reserving, 0);
    ck_assert_int_eq(r[5].e.reserving, 0);
    empty_and_free(&b, &r[4], 2);
}
END_TEST

/* A request that got fewer jobs than it asked for emptied its topics: waking the next would only
 * cost a reservation that finds nothing. A notification that came while it was busy is still
 * passed on, once. */
START_TEST(a_request_that_emptied_its_topics_does_not_pass_on)
{
    struct parkbook b = {0};
    struct sim s = {.b = &b, .jobs = 3, .count = 10};
    struct req r[6];
    file_queue(&b, r, 5, "a");
    sim_notify(&s, "a");
    sim_run(&s);
    ck_assert_int_eq(s.nserved, 1); /* all three in one answer, to the oldest */
    ck_assert_int_eq(s.served[0], 1);
    ck_assert_int_eq(s.reservations, 1);
    expect_order(&b, "a", 2, 3, 4, 5, -1);

    /* full: more may be ready, so the next is woken */
    s.jobs = 25;
    sim_notify(&s, "a");
    sim_run(&s);
    ck_assert_int_eq(s.nserved, 4); /* 2 and 3 took ten each, 4 the last five */
    ck_assert_int_eq(s.served[3], 4);
    ck_assert_int_eq(s.reservations, 4);
    expect_order(&b, "a", 5, -1);

    /* a notification while 5 reserves is remembered: 5 gets one job, emptying the topic, yet the
     * remembered notification is passed on, to the newcomer 6 (who finds nothing: no jobs left) */
    s.jobs = 1;
    file_req(&b, &r[1], 6, "a");
    sim_notify(&s, "a");
    ck_assert_int_eq(s.reservations, 5);
    ck_assert_ptr_eq(s.queue[s.head], &r[5]);
    sim_notify(&s, "a"); /* wakes 6 (idle) */
    sim_notify(&s, "a"); /* both busy: the oldest, 5, remembers */
    ck_assert_int_eq(r[5].e.rewake, 1);
    ck_assert_int_eq(s.reservations, 6);
    sim_answer_one(&s); /* 5 takes the job and passes on; 6 is busy, so it remembers */
    ck_assert_int_eq(s.nserved, 5);
    ck_assert_int_eq(r[1].e.rewake, 1);
    sim_run(&s); /* 6 finds nothing, retries once for what it remembered, finds nothing */
    ck_assert_int_eq(s.reservations, 7);
    expect_order(&b, "a", 6, -1);
    empty_and_free(&b, &r[1], 1);

    /* the policy itself */
    struct parkbook_entry e = {0};
    ck_assert_int_eq(parkbook_pass_on_wanted(&e, 3, 10, 0), 0);
    ck_assert_int_eq(parkbook_pass_on_wanted(&e, 10, 10, 0), 1);
    ck_assert_int_eq(parkbook_pass_on_wanted(&e, 3, 10, 1), 1); /* a rate held some back */
    e.rewake = 1;
    ck_assert_int_eq(parkbook_pass_on_wanted(&e, 3, 10, 0), 1);
    ck_assert_int_eq(e.rewake, 0); /* taken: passed on once */
    ck_assert_int_eq(parkbook_pass_on_wanted(&e, 3, 10, 0), 0);
}
END_TEST

/* A request filed behind an idle one on each of its topics need not look first; behind only
 * busy ones, or on a topic where it is alone, it must. */
START_TEST(a_request_behind_an_idle_one_skips_its_first_look)
{
    struct parkbook b = {0};
    struct req r[6];
    file_req(&b, &r[1], 1, "a");
    ck_assert_int_eq(parkbook_behind_idle(&r[1].e), 0); /* alone: nobody looked yet */
    file_req(&b, &r[2], 2, "a");
    ck_assert_int_eq(parkbook_behind_idle(&r[2].e), 1); /* 1 waits idle */
    r[1].e.reserving = 1;
    ck_assert_int_eq(parkbook_behind_idle(&r[2].e), 0); /* 1 is looking: it may find nothing for 2 */
    r[1].e.reserving = 0;
    r[1].e.finished = 1;
    ck_assert_int_eq(parkbook_behind_idle(&r[2].e), 0); /* 1 is being answered */
    r[1].e.finished = 0;
    file_req(&b, &r[3], 3, "a,b");
    ck_assert_int_eq(parkbook_behind_idle(&r[3].e), 0); /* alone on b */
    file_req(&b, &r[4], 4, "b,a");
    ck_assert_int_eq(parkbook_behind_idle(&r[4].e), 1); /* 3 idle on b, 1-3 on a */
    r[3].e.reserving = 1;
    ck_assert_int_eq(parkbook_behind_idle(&r[4].e), 0); /* b: only 3, busy */
    ck_assert_int_eq(parkbook_behind_idle(&r[2].e), 1); /* a: 1 is idle still */
    struct req quick;
    set_topics(&quick, 9, "a"); /* never filed (no timeout) */
    ck_assert_int_eq(parkbook_behind_idle(&quick.e), 0);
    empty_and_free(&b, &r[1], 4);
}
END_TEST

/* It looks back a bounded number of entries, then says it cannot tell. */
START_TEST(behind_idle_looks_only_a_few_back)
{
    struct parkbook b = {0};
    struct req r[PARKBOOK_BEHIND_LOOK + 3];
    int n = PARKBOOK_BEHIND_LOOK + 2;
    file_queue(&b, r, n, "a");
    for (int i = 2; i <= n - 1; i++)
        r[i].e.reserving = 1; /* 1 idle, then PARKBOOK_BEHIND_LOOK busy ones */
    ck_assert_int_eq(parkbook_behind_idle(&r[n].e), 0);
    ck_assert_int_eq(parkbook_behind_idle(&r[n - 1].e), 1); /* 1 is within reach of n-1 */
    empty_and_free(&b, &r[1], n);
}
END_TEST

START_TEST(passing_on_notifies_every_topic_of_the_answered_request)
{
    struct parkbook b = {0};
    struct sim s = {.b = &b, .jobs = 3};
    struct req r[5];
    file_req(&b, &r[1], 1, "a,b");
    file_req(&b, &r[2], 2, "b");
    file_req(&b, &r[3], 3, "a");
    file_req(&b, &r[4], 4, "c"); /* on none of 1's topics */
    sim_notify(&s, "a");
    sim_answer_one(&s); /* 1 served: a wakes 3, then b wakes 2 */
    ck_assert_int_eq(s.tail - s.head, 2);
    ck_assert_ptr_eq(s.queue[s.head], &r[3]);
    ck_assert_ptr_eq(s.queue[s.head + 1], &r[2]);
    sim_run(&s);
    ck_assert_int_eq(s.nserved, 3);
    ck_assert_int_eq(r[4].e.reserving, 0);
    expect_order(&b, "c", 4, -1);
    ck_assert_uint_eq(parkbook_topic_count(&b), 1);

    /* a GET without timeout is never filed, yet passes on what it leaves */
    struct req quick;
    set_topics(&quick, 9, "c");
    struct parkbook_topics saved;
    parkbook_topics_save(&saved, quick.topics, quick.lens, quick.nt);
    parkbook_unfile(&b, &quick.e);
    s.jobs = 1;
    parkbook_pass_on(&b, &saved, sim_wake, NULL, &s);
    sim_run(&s);
    ck_assert_int_eq(s.nserved, 4);
    ck_assert_int_eq(s.served[3], 4);
    ck_assert_uint_eq(parkbook_topic_count(&b), 0);
    parkbook_free(&b);
}
END_TEST

START_TEST(the_tick_visits_exactly_the_topics_with_parked_requests)
{
    struct parkbook b = {0};
    struct req r[5];
    file_req(&b, &r[1], 1, "a,b");
    file_req(&b, &r[2], 2, "b,c");
    file_req(&b, &r[3], 3, "d");
    file_req(&b, &r[4], 4, "e,a");
    parkbook_unfile(&b, &r[3].e); /* d goes */
    parkbook_unfile(&b, &r[4].e); /* e goes, a stays for 1 */
    const char *want = "abc";
    int seen[26] = {0};
    size_t pos = 0, len, n = 0;
    for (const char *t; (t = parkbook_next_topic(&b, &pos, &len)) != NULL; n++) {
        ck_assert_uint_eq(len, 1);
        ck_assert_int_ge(t[0], 'a');
        ck_assert_int_le(t[0], 'z');
        seen[t[0] - 'a']++;
    }
    ck_assert_uint_eq(n, parkbook_topic_count(&b));
    for (int c = 0; c < 26; c++)
        ck_assert_int_eq(seen[c], strchr(want, 'a' + c) ? 1 : 0);
    empty_and_free(&b, &r[1], 2);
}
END_TEST

struct drained {
    struct parkbook *b;
    int answered[64], n;
};

static void answer_and_free(struct parkbook_entry *e, void *arg)
{
    struct drained *d = arg;
    struct req *r = e->owner;
    ck_assert_int_eq(e->reserving, 0);
    d->answered[d->n++] = r->id;
    parkbook_unfile(d->b, e);
    free(r);
}

START_TEST(drain_answers_each_idle_request_once_and_marks_busy_ones)
{
    struct parkbook b = {0};
    static const char *const lists[] = {"a,b,c", "b", "c,a", "d", "a", "b,d", "e", "c"};
    enum { N = sizeof lists / sizeof lists[0] };
    struct req *r[N];
    for (int i = 0; i < N; i++) {
        r[i] = malloc(sizeof *r[i]); /* freed by the answer, so valgrind sees any later touch */
        file_req(&b, r[i], i, lists[i]);
    }
    r[2]->e.reserving = 1; /* on c and a */
    r[5]->e.reserving = 1; /* on b and d */
    struct drained d = {.b = &b};
    parkbook_drain(&b, answer_and_free, &d);

    int times[N] = {0};
    for (int i = 0; i < d.n; i++)
        times[d.answered[i]]++;
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(times[i], i == 2 || i == 5 ? 0 : 1);
    ck_assert_int_eq(r[2]->e.finished, 1);
    ck_assert_int_eq(r[5]->e.finished, 1);
    ck_assert_int_eq(r[2]->e.filed, 1); /* answered when their reservations return */
    expect_order(&b, "a", 2, -1);
    expect_order(&b, "b", 5, -1);
    expect_order(&b, "c", 2, -1);
    expect_order(&b, "d", 5, -1);
    ck_assert_uint_eq(parkbook_topic_count(&b), 4);

    /* what drain leaves is only the busy; a second drain answers nobody */
    d.n = 0;
    parkbook_drain(&b, answer_and_free, &d);
    ck_assert_int_eq(d.n, 0);
    parkbook_unfile(&b, &r[2]->e);
    parkbook_unfile(&b, &r[5]->e);
    free(r[2]);
    free(r[5]);
    ck_assert_uint_eq(parkbook_topic_count(&b), 0);
    parkbook_drain(&b, answer_and_free, &d); /* empty book */
    ck_assert_int_eq(d.n, 0);
    parkbook_free(&b);
}
END_TEST

START_TEST(free_forgets_requests_still_filed)
{
    struct parkbook b = {0};
    struct req r[3];
    file_req(&b, &r[1], 1, "a,b");
    file_req(&b, &r[2], 2, "b,c");
    parkbook_free(&b); /* valgrind: no list leaks */
    ck_assert_uint_eq(parkbook_topic_count(&b), 0);
    file_req(&b, &r[1], 3, "a"); /* reusable */
    expect_order(&b, "a", 3, -1);
    empty_and_free(&b, &r[1], 1);
}
END_TEST

/* Random filing and unfiling against a model: per topic, the ids in filing order. */
#define MANY        10000
#define MANY_TOPICS 300

static uint64_t rng = 0x9e3779b97f4a7c15u;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

struct model {
    int *ids[MANY_TOPICS];
    int len[MANY_TOPICS], cap[MANY_TOPICS];
};

static void model_add(struct model *m, int t, int id)
{
    if (m->len[t] == m->cap[t]) {
        m->cap[t] = m->cap[t] ? 2 * m->cap[t] : 16;
        m->ids[t] = realloc(m->ids[t], (size_t)m->cap[t] * sizeof *m->ids[t]);
        ck_assert_ptr_nonnull(m->ids[t]);
    }
    m->ids[t][m->len[t]++] = id;
}

static void model_remove(struct model *m, int t, int id)
{
    for (int i = 0; i < m->len[t]; i++)
        if (m->ids[t][i] == id) {
            memmove(&m->ids[t][i], &m->ids[t][i + 1], (size_t)(m->len[t] - i - 1) * sizeof *m->ids[t]);
            m->len[t]--;
            return;
        }
    ck_abort_msg("request %d missing from the model of topic %d", id, t);
}

static void check_against(struct parkbook *b, const struct model *m, struct req *reqs)
{
    size_t nonempty = 0;
    int *got = malloc(MANY * sizeof *got);
    int bad = -1;
    for (int t = 0; t < MANY_TOPICS && bad < 0; t++) {
        char name[16];
        int len = snprintf(name, sizeof name, "t%d", t);
        int n = walk(b, name, (size_t)len, got, MANY);
        if (n != m->len[t] || (n > 0 && memcmp(got, m->ids[t], (size_t)n * sizeof *got) != 0))
            bad = t;
        nonempty += n > 0;
        if (n <= 0)
            continue;
        /* whom a notification wakes: the first idle in filing order; with none, the oldest remembers */
        int busy = (int)rnd((unsigned)n + 1);
        for (int i = 0; i < busy; i++)
            reqs[m->ids[t][i] % MANY].e.reserving = 1;
        struct parkbook_entry *e = parkbook_notify(b, name, (size_t)len);
        struct parkbook_entry *head = &reqs[m->ids[t][0] % MANY].e;
        if (busy < n ? e != &reqs[m->ids[t][busy] % MANY].e || head->rewake : e != NULL || !head->rewake)
            bad = t;
        for (int i = 0; i < busy; i++) {
            reqs[m->ids[t][i] % MANY].e.reserving = 0;
            reqs[m->ids[t][i] % MANY].e.rewake = 0;
        }
    }
    ck_assert_msg(bad < 0, "topic t%d differs from the model", bad);
    ck_assert_uint_eq(parkbook_topic_count(b), nonempty);
    size_t pos = 0, len, visited = 0, empty_visited = 0;
    for (const char *name; (name = parkbook_next_topic(b, &pos, &len)) != NULL; visited++)
        empty_visited += m->len[atoi(name + 1)] == 0;
    ck_assert_uint_eq(empty_visited, 0);
    ck_assert_uint_eq(visited, nonempty);
    free(got);
}

START_TEST(many_requests_over_many_topics_match_a_model)
{
    struct parkbook b = {0};
    struct model m = {0};
    struct req *reqs = calloc(MANY, sizeof *reqs);
    int topics_of[MANY][4], ntopics_of[MANY];
    int generation = 0;
    for (int step = 0; step < 6 * MANY; step++) {
        int i = (int)rnd(MANY);
        struct req *r = &reqs[i];
        if (r->e.filed) {
            parkbook_unfile(&b, &r->e);
            for (int k = 0; k < ntopics_of[i]; k++)
                model_remove(&m, topics_of[i][k], r->id);
        } else {
            /* 1 to 4 distinct topics, skewed so some topics get long lists */
            char list[64] = "";
            int n = 1 + (int)rnd(4);
            ntopics_of[i] = 0;
            for (int k = 0; k < n; k++) {
                int t = rnd(4) ? (int)rnd(MANY_TOPICS) : (int)rnd(5);
                int dup = 0;
                for (int j = 0; j < ntopics_of[i]; j++)
                    dup |= topics_of[i][j] == t;
                if (dup)
                    continue;
                topics_of[i][ntopics_of[i]++] = t;
                snprintf(list + strlen(list), sizeof list - strlen(list), "%st%d", *list ? "," : "", t);
            }
            int id = ++generation * MANY + i; /* later filings have larger ids; % MANY finds the req */
            set_topics(r, id, list);
            if (parkbook_file(&b, &r->e, r->topics, r->lens, r->nt) != 0)
                ck_abort_msg("filing request %d failed", id);
            for (int k = 0; k < ntopics_of[i]; k++)
                model_add(&m, topics_of[i][k], id);
        }
        if (step % 5000 == 4999)
            check_against(&b, &m, reqs);
    }
    check_against(&b, &m, reqs);
    empty_and_free(&b, reqs, MANY);
    for (int t = 0; t < MANY_TOPICS; t++)
        free(m.ids[t]);
    free(reqs);
}
END_TEST

static Suite *parkbook_suite(void)
{
    Suite *s = suite_create("parkbook");
    TCase *tc = tcase_create("book");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_request_is_filed_under_each_of_its_topics);
    tcase_add_test(tc, topic_names_are_copied_at_filing);
    tcase_add_test(tc, each_topic_keeps_filing_order);
    tcase_add_test(tc, unfiling_from_middle_head_and_tail_keeps_the_rest_in_order);
    tcase_add_test(tc, unfiling_takes_a_request_out_of_every_topic);
    tcase_add_test(tc, a_topic_list_goes_with_its_last_request_and_comes_back);
    tcase_add_test(tc, a_notification_wakes_the_oldest_idle_request);
    tcase_add_test(tc, a_notification_during_a_reservation_is_retried_once);
    tcase_add_test(tc, a_burst_passes_on_until_a_reservation_finds_nothing);
    tcase_add_test(tc, a_request_that_emptied_its_topics_does_not_pass_on);
    tcase_add_test(tc, a_request_behind_an_idle_one_skips_its_first_look);
    tcase_add_test(tc, behind_idle_looks_only_a_few_back);
    tcase_add_test(tc, passing_on_notifies_every_topic_of_the_answered_request);
    tcase_add_test(tc, the_tick_visits_exactly_the_topics_with_parked_requests);
    tcase_add_test(tc, drain_answers_each_idle_request_once_and_marks_busy_ones);
    tcase_add_test(tc, free_forgets_requests_still_filed);
    tcase_add_test(tc, many_requests_over_many_topics_match_a_model);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(parkbook_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
