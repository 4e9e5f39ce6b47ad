/* farpend.h — a journal's far-job counts per topic that are not yet in far_count.
 *
 * Why (architecture.md, "Counts and figures"): adding a cycle's far pushes to far_count
 * directly costs MySQL one row update per topic per cycle — about a tenth of a far push's
 * whole MySQL work with 16 topics. Instead each journal keeps the counts it has added since
 * its last fold in one row of its own (far_pending), rewritten in the same transaction as the
 * far_job rows it counts, and folds them into far_count about once a second. The far jobs of
 * a topic are always far_count + every far_pending row's count (the view far_total).
 *
 * This file is the pure part: a small map topic -> jobs, kept in topic_cmp order (the order
 * far_count rows are locked in), with the text form the row holds: a JSON array of
 * [topic, jobs] pairs, which MariaDB's JSON_TABLE reads back in SQL. */
#ifndef HG_FARPEND_H
#define HG_FARPEND_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "sbuf.h"

struct farpend_entry {
    char topic[TOPIC_MAX + 1];
    size_t len;
    int64_t jobs;
};

struct farpend {
    struct farpend_entry *e; /* sorted by topic_cmp */
    int n, cap;
};

#define FARPEND_INIT {NULL, 0, 0}

/* A far_pending row no journal has written for this long is folded into far_count by any
 * pager (its process died, or lost MySQL for that long); a journal reads its own row, locked,
 * before writing it again after half as long (journal.c), so that never counts twice. */
#define PENDING_ADOPT_S 60

/* Add `jobs` to the topic's count (a topic of 1..TOPIC_MAX bytes). 0, -1 (out of memory or a
 * name too long: the map is unchanged). */
int farpend_add(struct farpend *m, const char *topic, size_t len, int64_t jobs);

/* dst = src (dst's old entries dropped). 0 / -1 (out of memory: dst unchanged). */
int farpend_copy(struct farpend *dst, const struct farpend *src);

/* Topics with a count other than zero. */
int farpend_nonzero(const struct farpend *m);

void farpend_clear(struct farpend *m);
void farpend_free(struct farpend *m);

/* The row's text: [["topic",jobs],...] in map order, topics with zero jobs left out ("[]"
 * when none). */
void farpend_json(const struct farpend *m, struct sbuf *sb);

/* Add the counts of a row's text to m. 0, or -1 when the text is not such an array (m may
 * hold part of it then). */
int farpend_parse_add(struct farpend *m, const char *text, size_t len);

#endif
