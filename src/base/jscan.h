/* jscan.h — a validating JSON scanner that reports where values are instead of building them.
 *
 * The push path uses it so a job's body is stored and returned as the exact text the
 * producer sent: a tree round-trip (jansson) would turn 0.1 into 0.10000000000000001, 1e2
 * into 100.0, reject integers wider than 64 bits and duplicate keys inside the body — none
 * of which is ours to judge. The scanner checks RFC 8259 syntax, UTF-8 and nesting depth.
 * Pure functions; unit-tested and fuzzed. */
#ifndef HG_JSCAN_H
#define HG_JSCAN_H

#include <stddef.h>

#define JSCAN_MAX_DEPTH 256

struct jscan {
    const char *s;
    size_t len;
    size_t pos;
    char err[160];
};

void jscan_init(struct jscan *j, const char *s, size_t len);

/* Skip whitespace. Returns the next byte, or -1 at the end. */
int jscan_peek(struct jscan *j);

/* Consume `c` (after whitespace). 0, or -1 with err set. */
int jscan_expect(struct jscan *j, char c) __attribute__((warn_unused_result));

/* Validate one value at the current position; start and end delimit its text. 0 / -1. */
int jscan_value(struct jscan *j, size_t *start, size_t *end) __attribute__((warn_unused_result));

/* Read a string (the current position must be at its opening quote), decoding escapes into
 * out (capacity cap; longer strings are still validated and *truncated is set). 0 / -1. */
int jscan_string(struct jscan *j, char *out, size_t cap, size_t *outlen, int *truncated)
    __attribute__((warn_unused_result));

/* Only whitespace is left? 0, or -1 with err set. */
int jscan_end(struct jscan *j) __attribute__((warn_unused_result));

#endif
