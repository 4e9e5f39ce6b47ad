/* dbtask.h — MySQL work that is not the journal: reading a job's history, restore, retention.
 *
 * A small pool of threads, each with its own connection (made on first use, remade after a
 * failure), runs tasks in submission order per thread. A task's `run` executes on a pool
 * thread with the connection (NULL when MySQL cannot be reached: the task reports that);
 * its `done` then executes on the submitter's event loop. Long tasks (a restore) occupy one
 * thread; the others keep serving short ones. */
#ifndef HG_DBTASK_H
#define HG_DBTASK_H

#include <mysql.h>

#include "core/config.h"

struct loopq;

typedef void (*dbtask_run_fn)(MYSQL *db, void *arg);
typedef void (*dbtask_done_fn)(void *arg);

int dbtask_start(const struct config *cfg, int nthreads) __attribute__((warn_unused_result));
void dbtask_stop(void);

/* Queue a task. `done` may be NULL (fire and forget). -1 when the queue is full or stopping. */
int dbtask_submit(dbtask_run_fn run, dbtask_done_fn done, struct loopq *reply_to, void *arg)
    __attribute__((warn_unused_result));

/* Is the pool stopping? Long tasks poll this to end early. */
int dbtask_stopping(void);

#endif
