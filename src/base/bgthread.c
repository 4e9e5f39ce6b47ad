/* bgthread.c — see bgthread.h. */
#include "base/bgthread.h"
#include "base/log.h"

#include <time.h>

int bgthread_start(struct bgthread *t, void *(*main_fn)(void *), void *arg)
{
    if (t->n >= BGTHREAD_MAX)
        return -1;
    if (t->n == 0) {
        pthread_mutex_lock(t->lock);
        t->stop = 0;
        pthread_mutex_unlock(t->lock);
    }
    if (pthread_create(&t->threads[t->n], NULL, main_fn, arg) != 0)
        return -1;
    t->n++;
    return 0;
}

int bgthread_stopping(struct bgthread *t)
{
    pthread_mutex_lock(t->lock);
    int stop = t->stop;
    pthread_mutex_unlock(t->lock);
    return stop;
}

void bgthread_publish(struct bgthread *t, int slot, void *conn, bgthread_cut_fn cut)
{
    pthread_mutex_lock(t->lock);
    t->published[slot] = (struct bgthread_conn){conn, cut};
    pthread_mutex_unlock(t->lock);
}

static void cut_loose(struct bgthread *t)
{
    pthread_mutex_lock(t->lock);
    log_warn("%s", t->cut_warning);
    for (int i = 0; i < BGTHREAD_CONNS_MAX; i++)
        if (t->published[i].conn != NULL)
            t->published[i].cut(t->published[i].conn);
    pthread_mutex_unlock(t->lock);
}

void bgthread_stop(struct bgthread *t, int deadline_ms)
{
    if (t->n == 0)
        return;
    pthread_mutex_lock(t->lock);
    t->stop = 1;
    t->stop_deadline_us = clock_mono_us() + (int64_t)deadline_ms * 1000;
    pthread_cond_broadcast(t->cond);
    pthread_mutex_unlock(t->lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until); /* pthread_timedjoin_np's clock */
    int64_t ns = until.tv_nsec + (int64_t)(deadline_ms + BGTHREAD_GRACE_MS) * 1000000;
    until.tv_sec += ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    int cut = t->cut_warning == NULL; /* nothing to cut: wait */
    for (int i = 0; i < t->n; i++) {
        if (!cut && pthread_timedjoin_np(t->threads[i], NULL, &until) == 0)
            continue;
        if (!cut) {
            cut_loose(t);
            cut = 1;
        }
        pthread_join(t->threads[i], NULL);
    }
    t->n = 0;
}
