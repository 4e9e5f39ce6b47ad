/* jobpack.h — a job's Redis record, encoded on the daemon's side.
 *
 * The record is what src/redis/lua/lib.lua's save_job() stores in the shard's jobs hash:
 * cmsgpack.pack(ver, state, attempts, priority, ttr, tries, runAt, topic, bizKey, body[,
 * backoff[, traceparent[, tracestate[, group]]]]), ten MessagePack values back to back and then
 * its tail: the job's own backoff when it was pushed with one, its W3C trace context when it
 * has one (trace.h), its group when it has one — an absent value before a present one nil
 * (0xc0), as cmsgpack packs a Lua nil — and nothing for a job with none, whose record is byte for byte what it was
 * before trace context existed. Each integer in its shortest form and each string as a MessagePack str, byte for byte
 * what Redis's cmsgpack writes. push.lua stores a record built here as it is, so a new job costs Redis no Lua packing
 * (that was the largest share of a push's script time); every script reads it back with cmsgpack.unpack like any other.
 * Checked against cmsgpack's own bytes: tests/unit/test_jobpack.c (vectors made by Redis) and
 * tests/integration/test_core_api.py (records of pushed jobs against cmsgpack.pack in Redis).
 *
 * The tail alone is also how push.lua (a job with a bizKey, whose record the script builds) and
 * restore.lua (a job read back from MySQL) are given a job's optional values: one argument,
 * '' for a job with none, unpacked by lib.lua's unpack_tail. */
#ifndef HG_JOBPACK_H
#define HG_JOBPACK_H

#include "core/job.h"

#include <stddef.h>
#include <stdint.h>

/* The most bytes jobpack_encode() writes for `j` (an integer takes at most 9, a string's
 * header at most 5). */
size_t jobpack_max_size(const struct job_spec *j);

/* Write the record of `j` in `state`, at version `ver` with `attempts` deliveries, to `out`
 * (at least jobpack_max_size(j) bytes); returns the bytes written. A job without a bizKey
 * records "" as cmsgpack does for the scripts' empty string. */
size_t jobpack_encode(char *out, const struct job_spec *j, uint32_t ver, int state, uint32_t attempts);

/* The most bytes a tail takes: a backoff, a traceparent and the longest tracestate. */
#define JOBPACK_TAIL_MAX (9 + 2 + TRACE_PARENT_LEN + 3 + TRACE_STATE_MAX + 2 + GROUP_MAX)

/* A job's optional values, wherever they were read from. */
struct jobpack_extra {
    int has_backoff;
    int64_t backoff;
    const char *traceparent; /* TRACE_PARENT_LEN characters; NULL or "" = none */
    const char *tracestate;  /* NULL = none (also when there is no traceparent) */
    size_t tracestate_len;
    const char *group; /* flow control by key; NULL = none */
    size_t group_len;
};

/* The tail of a record with these values, to `out` (JOBPACK_TAIL_MAX bytes); returns the bytes
 * written, 0 for a job with none. */
size_t jobpack_tail(char *out, const struct jobpack_extra *x);

/* The optional values of a job spec, for jobpack_tail. */
struct jobpack_extra jobpack_extra_of(const struct job_spec *j);

#endif
