/* loopq.c — see loopq.h. A mutex-protected FIFO plus an eventfd: the poster writes the
 * eventfd only when the queue goes from empty to non-empty, so a burst costs one wake. */
#include "base/loopq.h"
#include "base/log.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct node {
    struct node *next;
    loopq_fn fn;
    void *arg;
};

struct loopq {
    pthread_mutex_t lock;
    struct node *head, *tail;
    int closed;
    int fd;
    struct event *ev;
    loopq_fn after_drain; /* runs once after each batch of queued functions */
    void *after_drain_arg;
};

static void drain(evutil_socket_t fd, short what, void *arg)
{
    struct loopq *q = arg;
    uint64_t n;
    if (read(q->fd, &n, sizeof n) < 0) {
        /* EAGAIN: another drain already consumed the count; nothing to do */
    }
    pthread_mutex_lock(&q->lock);
    struct node *list = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    if (list == NULL)
        return;
    while (list) {
        struct node *next = list->next;
        list->fn(list->arg);
        free(list);
        list = next;
    }
    if (q->after_drain)
        q->after_drain(q->after_drain_arg);
}

struct loopq *loopq_new(struct event_base *base)
{
    struct loopq *q = calloc(1, sizeof *q);
    if (q == NULL)
        return NULL;
    q->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->fd < 0) {
        free(q);
        return NULL;
    }
    pthread_mutex_init(&q->lock, NULL);
    q->ev = event_new(base, q->fd, EV_READ | EV_PERSIST, drain, q);
    if (q->ev == NULL || event_add(q->ev, NULL) < 0) {
        if (q->ev)
            event_free(q->ev);
        close(q->fd);
        free(q);
        return NULL;
    }
    return q;
}

void loopq_after_each_drain(struct loopq *q, loopq_fn fn, void *arg)
{
    q->after_drain = fn;
    q->after_drain_arg = arg;
}

void loopq_free(struct loopq *q)
{
    if (q == NULL)
        return;
    event_free(q->ev);
    close(q->fd);
    struct node *n = q->head;
    while (n) {
        struct node *next = n->next;
        free(n);
        n = next;
    }
    pthread_mutex_destroy(&q->lock);
    free(q);
}

void loopq_close(struct loopq *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = 1;
    pthread_mutex_unlock(&q->lock);
    drain(q->fd, EV_READ, q);
}

int loopq_post(struct loopq *q, loopq_fn fn, void *arg)
{
    return loopq_post_many(q, fn, &arg, 1) == 1 ? 0 : -1;
}

int loopq_post_many(struct loopq *q, loopq_fn fn, void *const *args, int n)
{
    struct node *first = NULL, *last = NULL;
    int made = 0;
    for (; made < n; made++) {
        struct node *node = malloc(sizeof *node);
        if (node == NULL)
            break;
        *node = (struct node){.fn = fn, .arg = args[made]};
        if (last)
            last->next = node;
        else
            first = node;
        last = node;
    }
    if (made == 0)
        return 0;
    pthread_mutex_lock(&q->lock);
    if (q->closed) {
        pthread_mutex_unlock(&q->lock);
        while (first) {
            struct node *next = first->next;
            free(first);
            first = next;
        }
        return 0;
    }
    int was_empty = q->head == NULL;
    if (q->tail)
        q->tail->next = first;
    else
        q->head = first;
    q->tail = last;
    pthread_mutex_unlock(&q->lock);
    if (was_empty) {
        uint64_t one = 1;
        if (write(q->fd, &one, sizeof one) < 0)
            log_error("loopq: eventfd write failed");
    }
    return made;
}
