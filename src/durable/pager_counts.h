/* pager_counts.h — the far counts: far_count's jobs per topic (far jobs, which MySQL alone holds:
 * pager.h), read by the pager thread twice a second and kept here for /stats, /metrics and
 * GET /topics/{topic}, which must not wait on MySQL. Any thread reads them; the pager thread
 * alone refreshes them. */
#ifndef HG_PAGER_COUNTS_H
#define HG_PAGER_COUNTS_H

#include <mysql.h>
#include <stddef.h>
#include <stdint.h>

/* One topic's far jobs. */
struct far_topic {
    char topic[129];
    int64_t jobs;
};

/* Far jobs per topic, as far_count said at the last refresh. Fills a malloc'd array sorted by
 * topic (free it); returns the count, -1 when out of memory. */
int pager_far_counts(struct far_topic **out);
/* One topic's (0 when it has none). */
int64_t pager_far_count(const char *topic, size_t len);

/* Every topic's far jobs together, as of the last refresh. */
long long pager_counts_total(void);

/* Read far_count again (the pager thread). 0, or -1 when MySQL failed (the last copy is kept). */
int pager_counts_refresh(MYSQL *db) __attribute__((warn_unused_result));

/* Forget the copy (the pager has stopped). */
void pager_counts_free(void);

#endif
