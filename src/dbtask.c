/* dbtask.c — see dbtask.h. One shared FIFO; any idle thread takes the next task. */
#include "dbtask.h"
#include "db.h"
#include "log.h"
#include "loopq.h"
#include "metrics.h"

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
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static void *pool_main(void *arg)
{
    static const char *const names[THREADS_MAX] = {"db-0", "db-1", "db-2", "db-3", "db-4", "db-5", "db-6", "db-7"};
    log_set_thread_name(names[(long)arg % THREADS_MAX]);
    MYSQL *db = NULL;
    for (;;) {
        pthread_mutex_lock(&P.lock);
        while (!P.stop && P.head == NULL)
            pthread_cond_wait(&P.cond, &P.lock);
        if (P.stop && P.head == NULL) {
            pthread_mutex_unlock(&P.lock);
            break;
        }
        struct task *t = P.head;
        P.head = t->next;
        if (P.head == NULL)
            P.tail = NULL;
        P.queued--;
        pthread_mutex_unlock(&P.lock);

        if (db != NULL && mysql_ping(db) != 0) {
            mysql_close(db);
            db = NULL;
        }
        if (db == NULL) {
            char err[512];
            db = db_connect(P.cfg, err, sizeof err);
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
    P.cfg = cfg;
    P.stop = 0;
    P.nthreads = 0;
    for (long i = 0; i < nthreads && i < THREADS_MAX; i++) {
        if (pthread_create(&P.threads[i], NULL, pool_main, (void *)i) != 0)
            return -1;
        P.nthreads++;
    }
    return 0;
}

void dbtask_stop(void)
{
    pthread_mutex_lock(&P.lock);
    P.stop = 1;
    pthread_cond_broadcast(&P.cond);
    pthread_mutex_unlock(&P.lock);
    for (int i = 0; i < P.nthreads; i++)
        pthread_join(P.threads[i], NULL);
    P.nthreads = 0;
}

int dbtask_stopping(void)
{
    pthread_mutex_lock(&P.lock);
    int stop = P.stop;
    pthread_mutex_unlock(&P.lock);
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
    pthread_mutex_lock(&P.lock);
    if (P.stop || P.queued >= QUEUE_MAX || P.nthreads == 0) {
        pthread_mutex_unlock(&P.lock);
        free(t);
        return -1;
    }
    if (P.tail)
        P.tail->next = t;
    else
        P.head = t;
    P.tail = t;
    P.queued++;
    pthread_cond_signal(&P.cond);
    pthread_mutex_unlock(&P.lock);
    return 0;
}
