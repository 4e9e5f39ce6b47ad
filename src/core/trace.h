/* trace.h — W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` and
 * `tracestate` a producer sends with a push, checked before a job keeps them, and the form a
 * schedule's fire makes a new trace in.
 *
 * A job keeps its producer's context and hands it to whoever consumes the job (GET /get, a
 * webhook's headers, an AMQP message's headers), so the consumer's span can be linked to the
 * push's (docs/api.md, "Trace context"). hourglass is no tracing participant itself: it never
 * changes a parent-id, it stores and forwards.
 *
 * What passes (anything else is ignored, never an error: the job is stored without a context):
 *   traceparent  "vv-<32 hex>-<16 hex>-<2 hex>", lowercase hex; version ff, an all-zero
 *                trace-id or parent-id are invalid. Version 00 is exactly those 55 characters.
 *                A higher version is read as the spec's forward compatibility asks: its first 55
 *                characters in that layout, then the end or a '-' (what follows is that
 *                version's and unknown here); the job keeps those 55 characters, version
 *                included, so every stored traceparent has the one shape.
 *   tracestate   1..TRACE_STATE_MAX characters of printable ASCII (no control character, so it
 *                is safe in any header), at most 32 comma-separated list-members, each empty or
 *                key=value (key: lowercase letters, digits and the characters _ - * / @,
 *                starting with a letter or digit; value: printable, no ',' or '=', not ending in a space). Spaces
 * around the whole value are trimmed; one that is only empty members counts as none. A tracestate means nothing without
 * its traceparent, and goes with it. Pure functions (no I/O): the caller draws the random bytes of a new trace. */
#ifndef HG_TRACE_H
#define HG_TRACE_H

#include <stddef.h>

#define TRACE_PARENT_LEN    55
#define TRACE_STATE_MAX     512
#define TRACE_STATE_MEMBERS 32
#define TRACE_RANDOM_BYTES  24 /* a trace-id (16) and a parent-id (8) */

/* A job's context as read back from wherever it is kept (pointers into a reply or a row, not
 * NUL-terminated); parent NULL: the job has none (and then no state either). */
struct trace_ref {
    const char *parent, *state;
    size_t parent_len, state_len; /* state_len 0: no tracestate */
};

/* 1 when s[0..len) is a traceparent to keep (above), 0 otherwise. The part kept is always its
 * first TRACE_PARENT_LEN characters. */
int trace_parent_valid(const char *s, size_t len);

/* When s[0..len) is a tracestate to keep (above): 1, with *start and *keep_len the trimmed
 * part; 0 otherwise (or when it holds no member). */
int trace_state_valid(const char *s, size_t len, size_t *start, size_t *keep_len);

/* A new trace's traceparent, version 00 with the sampled flag, from TRACE_RANDOM_BYTES random
 * bytes, into out (TRACE_PARENT_LEN + 1 bytes, NUL-terminated). -1 (out untouched) when the
 * bytes give an all-zero trace-id or parent-id, which the spec forbids: draw again. */
int trace_parent_make(char *out, const unsigned char random[TRACE_RANDOM_BYTES]);

#endif
