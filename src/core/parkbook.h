/* parkbook.h — the book of a worker's parked long-polls: who waits on which topic, in what
 * order, and whom a "ready" notification wakes. Pure bookkeeping (no I/O, clock or Redis), so
 * its edge cases are unit-tested in milliseconds; longpoll.c reserves and answers around it
 * (architecture.md, "Long-polls").
 *
 * Owns: one list per topic with at least one entry filed under it, created by the first
 * parkbook_file naming the topic and freed when its last entry leaves, and the topic names
 * (copied, so the caller's strings need only outlive the parkbook_file call).
 * Does not own: the entries. The caller embeds a struct parkbook_entry in its per-request state,
 * sets `owner`, and must parkbook_unfile it before freeing that state.
 *
 * Order: each topic's entries are kept oldest first; removing one (head, middle or tail) leaves
 * the others' order as it was. An entry filed under several topics is in each of those lists.
 *
 * Waking: an entry is busy while `reserving` (a reservation is in flight, set and cleared by the
 * caller) or `finished` (it will be answered when that reservation returns). A notification
 * wakes the oldest idle entry of the topic; when all there are busy, the oldest remembers it
 * (`rewake`), and however many notifications came, parkbook_take_rewake hands it back once, so
 * no notification falls between "the reservation found nothing" and "now waiting again".
 *
 * Not thread-safe: a book lives on one worker's loop. */
#ifndef HG_PARKBOOK_H
#define HG_PARKBOOK_H

#include "base/hmap.h"
#include "core/job.h"

#include <stddef.h>

/* All zeroes is an empty book. */
struct parkbook {
    struct hmap lists; /* topic -> struct parkbook_list, while entries are filed under it */
};

struct parkbook_list;
struct parkbook_entry;

struct parkbook_link {
    struct parkbook_entry *e;
    struct parkbook_list *list;
    struct parkbook_link *prev, *next;
};

struct parkbook_entry {
    void *owner;   /* the caller's request state */
    int reserving; /* a reservation is in flight (the caller's to set and clear) */
    int finished;  /* answer when the reservation returns: timed out, or drained while busy */
    int rewake;    /* a notification arrived while busy: retry once it returns */
    int filed;
    int ntopics;
    struct parkbook_link links[TOPICS_PER_GET];
};

/* Topic names kept across the free of the request that named them (parkbook_pass_on). */
struct parkbook_topics {
    int n;
    char name[TOPICS_PER_GET][TOPIC_MAX + 1];
    size_t len[TOPICS_PER_GET];
};

/* Free the lists and the map; entries still filed are only forgotten (shutdown past its
 * deadline), so none may be used with this book afterwards. */
void parkbook_free(struct parkbook *b);

/* File e at the tail of each of the n topics' lists (n <= TOPICS_PER_GET, each len <=
 * TOPIC_MAX). 0, or -1 when out of memory: then e is filed nowhere and the book is as before. */
int parkbook_file(struct parkbook *b, struct parkbook_entry *e, const char *const *topics, const size_t *lens, int n)
    __attribute__((warn_unused_result));

/* Take e out of every list it is in (nothing when it is not filed); emptied lists are freed. */
void parkbook_unfile(struct parkbook *b, struct parkbook_entry *e);

/* Copy n topics (n <= TOPICS_PER_GET, each len <= TOPIC_MAX) into saved: a request answered
 * with jobs passes the notification on after it is freed, and it need not have been filed
 * (a GET without timeout never is). */
void parkbook_topics_save(struct parkbook_topics *saved, const char *const *topics, const size_t *lens, int n);

/* Whom a notification on topic wakes: the oldest idle entry, which the caller then tries a
 * reservation for. NULL when nobody waits there, or when everyone is busy (the oldest then
 * remembers it). */
struct parkbook_entry *parkbook_notify(struct parkbook *b, const char *topic, size_t len);

/* After a reservation that took jobs: jobs may be left for others, so notify each saved topic in
 * turn and call wake for whom it picks, or `unclaimed` (when not NULL) for a topic where nobody in
 * this book was idle to take it (another worker's book may have someone). Each callback runs
 * before the next topic is looked at, and wake may file, unfile or free entries. */
void parkbook_pass_on(struct parkbook *b, const struct parkbook_topics *saved,
                      void (*wake)(struct parkbook_entry *, void *),
                      void (*unclaimed)(const char *topic, size_t len, void *), void *arg);

/* 1 once if a notification arrived while e was busy (clearing it), else 0. */
int parkbook_take_rewake(struct parkbook_entry *e);

/* Whether a request answered with jobs should pass the notification on (parkbook_pass_on), given
 * that it got `got` of the `count` jobs it asked for. Yes when it is full (more may be ready), when
 * `unsure` (a rate held jobs back, or a reservation failed, so what is left is unknown), and when a
 * notification came while it was busy (parkbook_take_rewake: that one is nobody's yet). Otherwise
 * its reservations emptied every topic it asked for, and each job made ready since brings its own
 * notification: passing on would only wake a request to find nothing, as a burst of small moves
 * did on every wake (a Redis script call each, at thousands a second). Takes e's rewake. */
int parkbook_pass_on_wanted(struct parkbook_entry *e, int got, int count, int unsure);

/* Whether e, just filed, may wait without a first reservation: under each of its topics one of
 * the few entries filed just before it is idle (neither reserving nor finished). That entry's
 * last reservation found its topics empty, and every job made ready since is announced, and
 * an announcement wakes the oldest idle entry: that one, before e. So e's own first look
 * could only find nothing (a script call for nothing: the first look of every consumer coming
 * back in a burst). Looks at most PARKBOOK_BEHIND_LOOK entries back per topic; 0 when it
 * cannot tell. */
#define PARKBOOK_BEHIND_LOOK 8
int parkbook_behind_idle(const struct parkbook_entry *e);

/* How many topics have entries filed under them. */
size_t parkbook_topic_count(const struct parkbook *b);

/* The oldest entry's link in topic's list (follow next for the rest, in filing order), or NULL
 * when nobody waits there. A read-only view: for tests and diagnostics. */
const struct parkbook_link *parkbook_oldest(const struct parkbook *b, const char *topic, size_t len);

/* Iterate the topics that have entries: `pos` starts at 0; returns the next name
 * (NUL-terminated, its length through len) or NULL at the end. The book must not change
 * during an iteration. */
const char *parkbook_next_topic(const struct parkbook *b, size_t *pos, size_t *len);

/* Shutdown: walk every topic's list, oldest first. An idle entry goes to answer, which must
 * unfile it (and may free it), so it is answered once however many topics it is filed under; a
 * busy one is marked finished (its caller answers when the reservation returns) and stays. */
void parkbook_drain(struct parkbook *b, void (*answer)(struct parkbook_entry *, void *), void *arg);

#endif
