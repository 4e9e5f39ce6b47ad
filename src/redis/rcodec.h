/* rcodec.h — building Redis command arguments, encoding commands and reading replies, shared
 * by the async job store (store.c), the connection (rconn.c) and the blocking restore
 * (restore.c).
 *
 * struct rargv collects an FCALL's argv without copying what it points at: strings stay the
 * caller's, numbers and id keys are formatted into the builder's own storage. Small calls
 * keep everything inside the struct (on the caller's stack); batches allocate once. argv[0..2]
 * are left for rconn_eval / rblock_append_eval (FCALL function numkeys).
 *
 * The rreply_* readers never trust a reply's shape: a wrong type reads as NULL / 0 / -1. */
#ifndef HG_RCODEC_H
#define HG_RCODEC_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ids.h"
#include "base/sbuf.h"

/* Small calls (everything but batches) build their arguments on the stack. */
#define RARGV_SMALL_ARGS 40
#define RARGV_SMALL_NUMS 16
#define RARGV_SMALL_IDS  8

struct rargv {
    const char **argv;
    size_t *lens;
    int argc, cap;
    char (*nums)[INT_TEXT_MAX]; /* storage for formatted numbers */
    int nnums, numcap;
    char (*idkeys)[ID_KEY_LEN + 1];
    int nids, idcap;
    char key[160];
    const char *argv_small[RARGV_SMALL_ARGS];
    size_t lens_small[RARGV_SMALL_ARGS];
    char nums_small[RARGV_SMALL_NUMS][INT_TEXT_MAX];
    char ids_small[RARGV_SMALL_IDS][ID_KEY_LEN + 1];
};

/* "<prefix>:{<tag>}:<suffix>" into buf, the tag being the shard's (shardtag.h: "3", or "3.2520"
 * under Cluster): every key of a shard shares it, so each script stays inside one Redis Cluster
 * slot. Its length, or -1 (and buf "") when it does not fit or the shard has no tag. */
int rkey(char *buf, size_t cap, const char *prefix, int shard, const char *suffix);

/* Room for `cap` arguments (3 reserved), `nums` numbers and `ids` id keys. 0, or -1 when out
 * of memory (call rargv_free either way). */
int rargv_init(struct rargv *b, int cap, int nums, int ids) __attribute__((warn_unused_result));
void rargv_free(struct rargv *b);

/* Append a string (not copied), a decimal number, a job id's key form, or the shard key
 * "<prefix>:{<tag>}:<suffix>" (rkey; kept in the builder; one per builder). */
void rargv_str(struct rargv *b, const char *s, size_t len);
void rargv_int(struct rargv *b, int64_t v);
void rargv_id(struct rargv *b, uint64_t id);
void rargv_key(struct rargv *b, const char *prefix, int shard, const char *suffix);

/* The RESP encoding of a command: `*<argc>`, then `$<len>` and the bytes of each argument,
 * each line ending in CRLF — what redisFormatCommandArgv makes, but without a printf per
 * argument (a push's FCALL has 12 arguments a job, and their formatting showed in profiles).
 * A malloc'd buffer (NUL after its last byte, freed with free()) in *out; its length, or -1
 * when out of memory. */
long rcodec_format_command(char **out, int argc, const char *const *argv, const size_t *lens);

/* r is an array of at least `min` elements. */
int rreply_is_array(const redisReply *r, size_t min);

/* Element i of array r as a string (bulk or status; NULL otherwise), its length in *len. */
const char *rreply_str(const redisReply *r, size_t i, size_t *len);

/* Element i as an integer (an integer reply, or a decimal bulk string; 0 otherwise). */
int64_t rreply_int(const redisReply *r, size_t i);

/* Element i is the string `word`. */
int rreply_is(const redisReply *r, size_t i, const char *word);

/* Element i as a job id in key form. 0, or -1. */
int rreply_id(const redisReply *r, size_t i, uint64_t *id);

#endif
