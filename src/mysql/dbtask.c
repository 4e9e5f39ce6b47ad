/* dbtask.c — see dbtask.h. One shared FIFO; any idle thread takes the next task. */
#include "mysql/dbtask.h"
#include "mysql/db.h"
#include "base/log.h"
#include "base/loopq.h"
#include "core/metrics.h"

#include <pthread.h>
#include <stdlib.h>

#define QUEUE_MAX 10000
#define THREADS_MAX 8

struct task {
    struct task *next;
    dbtask_run_fn run;
    dbtask_done_fn done;
    struct loopq *reply_to;
    void *arg;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct task *head, *tail;
    int queued;
    int stop;
    int nthreads;
    pthread_t threads[THREADS_MAX];
    const struct config *cfg;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *pool_main(void *arg)
{
    static const char *const names[THREADS_MAX] = {"db-0", "db-1", "db-2", "db-3", "db-4", "db-5", "db-6", "db-7"};
    log_set_thread_name(names[(long)arg % THREADS_MAX]);
    MYSQL *db = NULL;
    for (;;) {
        pthread_mutex_lock(&pool.lock);
        while (!pool.stop && pool.head == NULL)
            pthread_cond_wait(&pool.cond, &pool.lock);
        if (pool.stop && pool.head == NULL) {
            pthread_mutex_unlock(&pool.lock);
            break;
        }
        struct task *t = pool.head;
        pool.head = t->next;
        if (pool.head == NULL)
            pool.tail = NULL;
        pool.queued--;
        pthread_mutex_unlock(&pool.lock);

        if (db != NULL && mysql_ping(db) != 0) {
            mysql_close(db);
            db = NULL;
        }
        if (db == NULL) {
            char err[512];
            db = db_connect(pool.cfg, err, sizeof err);
            if (db == NULL) {
                metrics_inc(MC_MYSQL_ERRORS, 1);
                log_warn("db: cannot connect to MySQL: %s", err);
            }
        }
        t->run(db, t->arg);
        if (db != NULL && mysql_errno(db) != 0 && db_error_is_connection(db)) {
            mysql_close(db);
            db = NULL;
        }
        if (t->done && t->reply_to) {
            if (loopq_post(t->reply_to, t->done, t->arg) < 0)
                log_error("db: cannot report a task's result (out of memory)");
        }
        free(t);
    }
    if (db)
        mysql_close(db);
    mysql_thread_end();
    return NULL;
}

int dbtask_start(const struct config *cfg, int nthreads)
{
    pool.cfg = cfg;
    pool.stop = 0;
    pool.nthreads = 0;
    for (long i = 0; i < nthreads && i < THREADS_MAX; i++) {
        if (pthread_create(&pool.threads[i], NULL, pool_main, (void *)i) != 0)
            return -1;
        pool.nthreads++;
    }
    return 0;
}

void dbtask_stop(void)
{
    pthread_mutex_lock(&pool.lock);
    pool.stop = 1;
    pthread_cond_broadcast(&pool.cond);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < pool.nthreads; i++)
        pthread_join(pool.threads[i], NULL);
    pool.nthreads = 0;
}

int dbtask_stopping(void)
{
    pthread_mutex_lock(&pool.lock);
    int stop = pool.stop;
    pthread_mutex_unlock(&pool.lock);
    return stop;
}

int dbtask_submit(dbtask_run_fn run, dbtask_done_fn done, struct loopq *reply_to, void *arg)
{
    struct task *t = calloc(1, sizeof *t);
    if (t == NULL)
        return -1;
    t->run = run;
    t->done = done;
    t->reply_to = reply_to;
    t->arg = arg;
    pthread_mutex_lock(&pool.lock);
    if (pool.stop || pool.queued >= QUEUE_MAX || pool.nthreads == 0) {
        pthread_mutex_unlock(&pool.lock);
        free(t);
        return -1;
    }
    if (pool.tail)
        pool.tail->next = t;
    else
        pool.head = t;
    pool.tail = t;
    pool.queued++;
    pthread_cond_signal(&pool.cond);
    pthread_mutex_unlock(&pool.lock);
    return 0;
}
