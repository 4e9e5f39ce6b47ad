/* ratelimit.h — request-rate limits per client: a token bucket per key (the Bearer token, or
 * the client address when requests carry none), shared by all workers of an instance.
 * rate_limit requests per second on average, bursts up to rate_burst. Buckets idle long
 * enough to be full again are forgotten, so the table stays as small as the active clients. */
#ifndef HG_RATELIMIT_H
#define HG_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

struct ratelimit;

struct ratelimit *ratelimit_new(int rate_per_second, int burst);
void ratelimit_free(struct ratelimit *rl);

/* Take one request for `key` at monotonic time now_us. Returns 0 when allowed, otherwise the
 * whole seconds (>= 1) after which one will be (for Retry-After). Thread-safe. */
int ratelimit_take(struct ratelimit *rl, const char *key, size_t len, int64_t now_us);

/* Buckets currently held (for tests). */
size_t ratelimit_size(struct ratelimit *rl);

#endif
