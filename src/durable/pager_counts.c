/* pager_counts.c — see pager_counts.h. */
#include "durable/pager_counts.h"
#include "base/sbuf.h"
#include "mysql/db.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    pthread_mutex_t lock;
    struct far_topic *topics; /* under lock: sorted by topic */
    int n;                    /* under lock */
    _Atomic long long total;
} counts = {.lock = PTHREAD_MUTEX_INITIALIZER};

int pager_counts_refresh(MYSQL *db)
{
    struct sbuf sql = SBUF_INIT;
    sb_puts(&sql, "SELECT topic, jobs FROM far_count WHERE jobs <> 0 ORDER BY topic");
    MYSQL_RES *res = db_query(db, &sql); /* autocommit (the pager's reader): sees the latest commits */
    if (res == NULL)
        return -1;
    int n = (int)mysql_num_rows(res);
    struct far_topic *t = calloc((size_t)(n ? n : 1), sizeof *t);
    long long total = 0;
    if (t == NULL) {
        mysql_free_result(res);
        return 0; /* keep the last copy */
    }
    MYSQL_ROW row;
    for (int i = 0; i < n && (row = mysql_fetch_row(res)) != NULL; i++) {
        snprintf(t[i].topic, sizeof t[i].topic, "%s", row[0]);
        t[i].jobs = strtoll(row[1], NULL, 10);
        total += t[i].jobs;
    }
    mysql_free_result(res);
    pthread_mutex_lock(&counts.lock);
    free(counts.topics);
    counts.topics = t;
    counts.n = n;
    pthread_mutex_unlock(&counts.lock);
    atomic_store(&counts.total, total);
    return 0;
}

int pager_far_counts(struct far_topic **out)
{
    pthread_mutex_lock(&counts.lock);
    int n = counts.n;
    *out = malloc((size_t)(n ? n : 1) * sizeof **out);
    if (*out && n)
        memcpy(*out, counts.topics, (size_t)n * sizeof **out);
    pthread_mutex_unlock(&counts.lock);
    return *out ? n : -1;
}

int64_t pager_far_count(const char *topic, size_t len)
{
    int64_t jobs = 0;
    pthread_mutex_lock(&counts.lock);
    int lo = 0, hi = counts.n - 1;
    while (lo <= hi) { /* sorted by name, as strcmp orders them */
        int mid = (lo + hi) / 2;
        int c = strncmp(counts.topics[mid].topic, topic, len);
        if (c == 0 && counts.topics[mid].topic[len] != '\0')
            c = 1;
        if (c == 0) {
            jobs = counts.topics[mid].jobs;
            break;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    pthread_mutex_unlock(&counts.lock);
    return jobs;
}

long long pager_counts_total(void)
{
    return atomic_load(&counts.total);
}

void pager_counts_free(void)
{
    pthread_mutex_lock(&counts.lock);
    free(counts.topics);
    counts.topics = NULL;
    counts.n = 0;
    pthread_mutex_unlock(&counts.lock);
}
