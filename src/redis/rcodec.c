/* rcodec.c — see rcodec.h. */
#include "redis/rcodec.h"
#include "core/ids.h"
#include "core/shardtag.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int rkey(char *buf, size_t cap, const char *prefix, int shard, const char *suffix)
{
    size_t tlen, plen = strlen(prefix), slen = strlen(suffix);
    const char *tag = shardtag(shard, &tlen);
    size_t n = plen + 2 + tlen + 2 + slen;
    if (tag == NULL || n >= cap || n > INT_MAX) {
        if (cap > 0)
            buf[0] = '\0';
        return -1;
    }
    char *p = buf;
    memcpy(p, prefix, plen);
    p += plen;
    *p++ = ':';
    *p++ = '{';
    memcpy(p, tag, tlen);
    p += tlen;
    *p++ = '}';
    *p++ = ':';
    memcpy(p, suffix, slen + 1);
    return (int)n;
}

/* ---- commands in RESP ---- */

static size_t decimal_digits(size_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static char *put_header(char *p, char type, size_t n)
{
    *p++ = type;
    p += sb_int_to_text((int64_t)n, p);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

long rcodec_format_command(char **out, int argc, const char *const *argv, const size_t *lens)
{
    size_t total = 1 + decimal_digits((size_t)argc) + 2;
    for (int i = 0; i < argc; i++)
        total += 1 + decimal_digits(lens[i]) + 2 + lens[i] + 2;
    /* sb_int_to_text writes a NUL after the digits: room for the last one */
    char *buf = malloc(total + 1);
    if (buf == NULL)
        return -1;
    char *p = put_header(buf, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) {
        p = put_header(p, '$', lens[i]);
        if (lens[i] > 0)
            memcpy(p, argv[i], lens[i]);
        p += lens[i];
        *p++ = '\r';
        *p++ = '\n';
    }
    *p = '\0';
    *out = buf;
    return (long)(p - buf);
}

/* ---- reply helpers ---- */

int rreply_is_array(const redisReply *r, size_t min)
{
    return r && r->type == REDIS_REPLY_ARRAY && r->elements >= min;
}

const char *rreply_str(const redisReply *r, size_t i, size_t *len)
{
    const redisReply *e = r->element[i];
    if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS) {
        if (len)
            *len = e->len;
        return e->str;
    }
    if (len)
        *len = 0;
    return NULL;
}

int64_t rreply_int(const redisReply *r, size_t i)
{
    const redisReply *e = r->element[i];
    if (e->type == REDIS_REPLY_INTEGER)
        return e->integer;
    if (e->type == REDIS_REPLY_STRING)
        return strtoll(e->str, NULL, 10);
    return 0;
}

int rreply_is(const redisReply *r, size_t i, const char *word)
{
    size_t len;
    const char *s = rreply_str(r, i, &len);
    return s && len == strlen(word) && memcmp(s, word, len) == 0;
}

int rreply_id(const redisReply *r, size_t i, uint64_t *id)
{
    size_t len;
    const char *s = rreply_str(r, i, &len);
    return s ? id_from_key(s, len, id) : -1;
}

/* ---- argv building ---- */

int rargv_init(struct rargv *b, int cap, int nums, int ids)
{
    b->argc = 3; /* FCALL function numkeys, filled by rconn_eval */
    b->cap = cap;
    b->numcap = nums;
    b->idcap = ids;
    b->nnums = b->nids = 0;
    b->argv = cap <= RARGV_SMALL_ARGS ? b->argv_small : malloc((size_t)cap * sizeof *b->argv);
    b->lens = cap <= RARGV_SMALL_ARGS ? b->lens_small : malloc((size_t)cap * sizeof *b->lens);
    b->nums = nums <= RARGV_SMALL_NUMS ? b->nums_small : malloc((size_t)nums * sizeof *b->nums);
    b->idkeys = ids <= RARGV_SMALL_IDS ? b->ids_small : malloc((size_t)ids * sizeof *b->idkeys);
    if (!b->argv || !b->lens || !b->nums || !b->idkeys)
        return -1;
    return 0;
}

void rargv_free(struct rargv *b)
{
    if (b->argv != b->argv_small)
        free(b->argv);
    if (b->lens != b->lens_small)
        free(b->lens);
    if (b->nums != b->nums_small)
        free(b->nums);
    if (b->idkeys != b->ids_small)
        free(b->idkeys);
}

void rargv_str(struct rargv *b, const char *s, size_t len)
{
    b->argv[b->argc] = s;
    b->lens[b->argc] = len;
    b->argc++;
}

void rargv_int(struct rargv *b, int64_t v)
{
    char *slot = b->nums[b->nnums++];
    rargv_str(b, slot, sb_int_to_text(v, slot));
}

void rargv_id(struct rargv *b, uint64_t id)
{
    char *slot = b->idkeys[b->nids++];
    id_to_key(id, slot);
    rargv_str(b, slot, ID_KEY_LEN);
}

void rargv_key(struct rargv *b, const char *prefix, int shard, const char *suffix)
{
    int n = rkey(b->key, sizeof b->key, prefix, shard, suffix);
    rargv_str(b, b->key, n < 0 ? 0 : (size_t)n);
}
