/* parkbook.c — see parkbook.h. */
#include "core/parkbook.h"

#include <stdlib.h>
#include <string.h>

struct parkbook_list {
    struct parkbook_link *head, *tail;
    size_t len;
    char topic[];
};

static struct parkbook_list *find_list(struct parkbook *b, const char *topic, size_t len, int create)
{
    struct parkbook_list *t = hmap_get(&b->lists, topic, len);
    if (t || !create)
        return t;
    t = calloc(1, sizeof *t + len + 1);
    if (t == NULL)
        return NULL;
    memcpy(t->topic, topic, len);
    t->len = len;
    if (hmap_put(&b->lists, topic, len, t) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

static void drop_list(struct parkbook *b, struct parkbook_list *t)
{
    hmap_remove(&b->lists, t->topic, t->len);
    free(t);
}

static void unlink_one(struct parkbook *b, struct parkbook_link *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        l->list->head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        l->list->tail = l->prev;
    if (l->list->head == NULL)
        drop_list(b, l->list);
}

void parkbook_free(struct parkbook *b)
{
    size_t pos = 0;
    struct parkbook_list *t;
    while ((t = hmap_next(&b->lists, &pos, NULL, NULL)) != NULL)
        free(t);
    hmap_free(&b->lists);
}

int parkbook_file(struct parkbook *b, struct parkbook_entry *e, const char *const *topics, const size_t *lens, int n)
{
    for (int i = 0; i < n; i++) {
        struct parkbook_list *t = find_list(b, topics[i], lens[i], 1);
        if (t == NULL) {
            while (--i >= 0)
                unlink_one(b, &e->links[i]);
            return -1;
        }
        struct parkbook_link *l = &e->links[i];
        l->e = e;
        l->list = t;
        l->next = NULL;
        l->prev = t->tail;
        if (t->tail)
            t->tail->next = l;
        else
            t->head = l;
        t->tail = l;
    }
    e->ntopics = n;
    e->filed = 1;
    return 0;
}

void parkbook_unfile(struct parkbook *b, struct parkbook_entry *e)
{
    if (!e->filed)
        return;
    for (int i = 0; i < e->ntopics; i++)
        unlink_one(b, &e->links[i]);
    e->filed = 0;
}

void parkbook_topics_save(struct parkbook_topics *saved, const char *const *topics, const size_t *lens, int n)
{
    saved->n = n;
    for (int i = 0; i < n; i++) {
        memcpy(saved->name[i], topics[i], lens[i]);
        saved->len[i] = lens[i];
    }
}

struct parkbook_entry *parkbook_notify(struct parkbook *b, const char *topic, size_t len)
{
    struct parkbook_list *t = find_list(b, topic, len, 0);
    if (t == NULL)
        return NULL;
    for (struct parkbook_link *l = t->head; l; l = l->next)
        if (!l->e->reserving && !l->e->finished)
            return l->e;
    t->head->e->rewake = 1; /* a list exists only while it has entries */
    return NULL;
}

void parkbook_pass_on(struct parkbook *b, const struct parkbook_topics *saved,
                      void (*wake)(struct parkbook_entry *, void *),
                      void (*unclaimed)(const char *topic, size_t len, void *), void *arg)
{
    for (int i = 0; i < saved->n; i++) {
        struct parkbook_entry *e = parkbook_notify(b, saved->name[i], saved->len[i]);
        if (e)
            wake(e, arg);
        else if (unclaimed)
            unclaimed(saved->name[i], saved->len[i], arg);
    }
}

int parkbook_take_rewake(struct parkbook_entry *e)
{
    int r = e->rewake;
    e->rewake = 0;
    return r;
}

int parkbook_pass_on_wanted(struct parkbook_entry *e, int got, int count, int unsure)
{
    int rewake = parkbook_take_rewake(e);
    return got >= count || unsure || rewake;
}

int parkbook_behind_idle(const struct parkbook_entry *e)
{
    if (!e->filed)
        return 0;
    for (int i = 0; i < e->ntopics; i++) {
        int idle = 0;
        const struct parkbook_link *l = e->links[i].prev;
        for (int k = 0; l && k < PARKBOOK_BEHIND_LOOK && !idle; l = l->prev, k++)
            idle = !l->e->reserving && !l->e->finished;
        if (!idle)
            return 0;
    }
    return 1;
}

size_t parkbook_topic_count(const struct parkbook *b)
{
    return b->lists.count;
}

const struct parkbook_link *parkbook_oldest(const struct parkbook *b, const char *topic, size_t len)
{
    const struct parkbook_list *t = hmap_get(&b->lists, topic, len);
    return t ? t->head : NULL;
}

const char *parkbook_next_topic(const struct parkbook *b, size_t *pos, size_t *len)
{
    const struct parkbook_list *t = hmap_next(&b->lists, pos, NULL, NULL);
    if (t == NULL)
        return NULL;
    *len = t->len;
    return t->topic;
}

/* Answering an entry unlinks it from every list, possibly freeing this one: stop after the
 * last link rather than touch the list again. */
static void drain_list(struct parkbook_list *t, void (*answer)(struct parkbook_entry *, void *), void *arg)
{
    struct parkbook_link *l = t->head;
    while (l) {
        struct parkbook_entry *e = l->e;
        struct parkbook_link *next = l->next;
        int last = next == NULL;
        if (e->reserving) {
            e->finished = 1;
        } else {
            answer(e, arg);
            if (last)
                return;
        }
        l = next;
    }
}

/* answer frees lists, which the map's iteration must not see: collect the names first. */
void parkbook_drain(struct parkbook *b, void (*answer)(struct parkbook_entry *, void *), void *arg)
{
    size_t n = b->lists.count;
    if (n == 0)
        return;
    char **names = calloc(n, sizeof *names);
    size_t *lens = calloc(n, sizeof *lens);
    size_t k = 0, pos = 0;
    const void *key;
    size_t len;
    while (names && lens && hmap_next(&b->lists, &pos, &key, &len) != NULL) {
        names[k] = strndup(key, len);
        lens[k++] = len;
    }
    for (size_t i = 0; i < k; i++) {
        struct parkbook_list *t = names[i] ? find_list(b, names[i], lens[i], 0) : NULL;
        if (t)
            drain_list(t, answer, arg);
        free(names[i]);
    }
    free(names);
    free(lens);
}
