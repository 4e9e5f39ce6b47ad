/* dbtask.c — see dbtask.h. One shared FIFO; any idle thread takes the next task. */
#include "mysql/dbtask.h"
#include "mysql/db.h"
#include "base/bgthread.h"
#include "base/log.h"
#include "base/loopq.h"
#include "core/metrics.h"

#include <pthread.h>
#include <stdlib.h>

#define QUEUE_MAX   10000
#define THREADS_MAX 8
_Static_assert(THREADS_MAX <= BGTHREAD_MAX, "one bgthread runs the pool");

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
    struct bgthread bg; /* the pool's threads; bg.stop under lock */
    const struct config *cfg;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .cond = PTHREAD_COND_INITIALIZER,
          .bg = BGTHREAD_INIT(&pool.lock, &pool.cond, NULL)};

static void *pool_main(void *arg)
{
    static const char *const names[THREADS_MAX] = {"db-0", "db-1", "db-2", "db-3", "db-4", "db-5", "db-6", "db-7"};
    log_set_thread_name(names[(long)arg % THREADS_MAX]);
    MYSQL *db = NULL;
    for (;;) {
        pthread_mutex_lock(&pool.lock);
        while (!pool.bg.stop && pool.head == NULL)
            pthread_cond_wait(&pool.cond, &pool.lock);
        if (pool.bg.stop && pool.head == NULL) {
            pthread_mutex_unlock(&pool.lock);
            break;
        }
        struct task *t = pool.head;
        pool.head = t->next;
        if (pool.head == NULL)
            pool.tail = NULL;
        pool.queued--;
        pthread_mutex_unlock(&pool.lock);

        /* a stale connection ([mysql] hosts: the process moved to another node) is remade
         * between tasks, so the pool writes and reads where the journal does */
        if (db != NULL && (db_stale(db) || mysql_ping(db) != 0)) {
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
    for (long i = 0; i < nthreads && i < THREADS_MAX; i++)
        if (bgthread_start(&pool.bg, pool_main, (void *)i) < 0)
            return -1;
    return 0;
}

void dbtask_stop(void)
{
    bgthread_stop(&pool.bg, 0); /* the queue is worked off first: nothing to cut */
}

int dbtask_stopping(void)
{
    return bgthread_stopping(&pool.bg);
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
    if (pool.bg.stop || pool.queued >= QUEUE_MAX || !bgthread_running(&pool.bg)) {
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
