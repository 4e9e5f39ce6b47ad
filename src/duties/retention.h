/* retention.h — deleting old history from MySQL in the background.
 *
 * Messages in a terminal state (finished, deleted, dead, aborted) whose last change is older
 * than [mysql] retention_days are deleted with their transitions, 500 at a time with a short
 * pause between batches, so no statement holds locks for long and live traffic is not
 * starved. Runs as a task on the MySQL pool (dbtask.h); the keeper calls retention_schedule
 * every [mysql] retention_interval seconds. Deleted rows are counted in
 * hourglass_retention_deleted_total (metrics.h). */
#ifndef HG_RETENTION_H
#define HG_RETENTION_H

#include <stdint.h>

#include "core/config.h"

/* Schedule one retention pass if none is running (cheap to call every minute). */
void retention_schedule(const struct config *cfg);

#endif
