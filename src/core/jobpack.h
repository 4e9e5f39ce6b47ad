/* jobpack.h — a job's Redis record, encoded on the daemon's side.
 *
 * The record is what src/redis/lua/lib.lua's save_job() stores in the shard's jobs hash:
 * cmsgpack.pack(ver, state, attempts, priority, ttr, tries, runAt, topic, bizKey, body[,
 * backoff]), ten MessagePack values back to back (eleven for a job pushed with its own
 * backoff), each integer in its shortest form and each string as a MessagePack str, byte for
 * byte what Redis's cmsgpack writes. push.lua stores a record built
 * here as it is, so a new job costs Redis no Lua packing (that was the largest share of a
 * push's script time); every script reads it back with cmsgpack.unpack like any other.
 * Checked against cmsgpack's own bytes: tests/unit/test_jobpack.c (vectors made by Redis) and
 * tests/integration/test_core_api.py (records of pushed jobs against cmsgpack.pack in Redis). */
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

#endif
