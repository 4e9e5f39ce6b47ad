/* jobpack.c — see jobpack.h. The forms match Redis's lua_cmsgpack.c (mp_encode_int,
 * mp_encode_bytes): smallest integer encoding, signed forms only for negatives. */
#include "core/jobpack.h"

#include <string.h>

static size_t put_be(unsigned char *p, unsigned char tag, uint64_t v, int bytes)
{
    p[0] = tag;
    for (int i = 0; i < bytes; i++)
        p[1 + i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    return 1 + (size_t)bytes;
}

static size_t put_int(unsigned char *p, int64_t v)
{
    if (v >= 0) {
        uint64_t u = (uint64_t)v;
        if (u <= 0x7f) {
            p[0] = (unsigned char)u; /* positive fixint */
            return 1;
        }
        if (u <= 0xff)
            return put_be(p, 0xcc, u, 1);
        if (u <= 0xffff)
            return put_be(p, 0xcd, u, 2);
        if (u <= 0xffffffffu)
            return put_be(p, 0xce, u, 4);
        return put_be(p, 0xcf, u, 8);
    }
    uint64_t bits = (uint64_t)v; /* two's complement, as the wire wants */
    if (v >= -32) {
        p[0] = (unsigned char)bits; /* negative fixint */
        return 1;
    }
    if (v >= -128)
        return put_be(p, 0xd0, bits, 1);
    if (v >= -32768)
        return put_be(p, 0xd1, bits, 2);
    if (v >= INT32_MIN)
        return put_be(p, 0xd2, bits, 4);
    return put_be(p, 0xd3, bits, 8);
}

static size_t put_str(unsigned char *p, const char *s, size_t len)
{
    size_t head;
    if (len < 32) {
        p[0] = (unsigned char)(0xa0 | len); /* fixstr */
        head = 1;
    } else if (len <= 0xff) {
        head = put_be(p, 0xd9, len, 1);
    } else if (len <= 0xffff) {
        head = put_be(p, 0xda, len, 2);
    } else {
        head = put_be(p, 0xdb, len, 4);
    }
    if (len)
        memcpy(p + head, s, len);
    return head + len;
}

size_t jobpack_max_size(const struct job_spec *j)
{
    size_t trace = j->traceparent[0] ? 1 + 2 + TRACE_PARENT_LEN + (j->tracestate ? 3 + j->tracestate_len : 0) : 0;
    size_t group = j->group ? 3 + 2 + 2 + j->group_len : 0; /* nil places, then the group */
    return 8 * 9 + 3 * 5 + j->topic_len + (j->biz_key ? j->biz_len : 0) + j->body_len + trace + group;
}

struct jobpack_extra jobpack_extra_of(const struct job_spec *j)
{
    return (struct jobpack_extra){.has_backoff = j->has_backoff,
                                  .backoff = j->backoff,
                                  .traceparent = j->traceparent,
                                  .tracestate = j->tracestate,
                                  .tracestate_len = j->tracestate_len,
                                  .group = j->group,
                                  .group_len = j->group_len};
}

size_t jobpack_tail(char *out, const struct jobpack_extra *x)
{
    unsigned char *p = (unsigned char *)out;
    size_t n = 0;
    int traced = x->traceparent && x->traceparent[0];
    int grouped = x->group != NULL;
    int stated = traced && x->tracestate && x->tracestate_len <= TRACE_STATE_MAX; /* a row can hold no more */
    if (x->has_backoff)
        n += put_int(p + n, x->backoff);
    else if (traced || grouped)
        p[n++] = 0xc0; /* nil: cmsgpack's form of a Lua nil between two values */
    if (traced)
        n += put_str(p + n, x->traceparent, TRACE_PARENT_LEN);
    else if (grouped)
        p[n++] = 0xc0;
    if (stated)
        n += put_str(p + n, x->tracestate, x->tracestate_len);
    else if (grouped)
        p[n++] = 0xc0;
    if (grouped)
        n += put_str(p + n, x->group, x->group_len);
    return n;
}

size_t jobpack_encode(char *out, const struct job_spec *j, uint32_t ver, int state, uint32_t attempts)
{
    unsigned char *p = (unsigned char *)out;
    size_t n = 0;
    n += put_int(p + n, ver);
    n += put_int(p + n, state);
    n += put_int(p + n, attempts);
    n += put_int(p + n, j->priority);
    n += put_int(p + n, j->ttr);
    n += put_int(p + n, j->tries);
    n += put_int(p + n, j->run_at);
    n += put_str(p + n, j->topic, j->topic_len);
    n += put_str(p + n, j->biz_key ? j->biz_key : "", j->biz_key ? j->biz_len : 0);
    n += put_str(p + n, j->body, j->body_len);
    if (j->has_backoff || j->traceparent[0] || j->group) {
        struct jobpack_extra x = jobpack_extra_of(j);
        n += jobpack_tail(out + n, &x);
    }
    return n;
}
