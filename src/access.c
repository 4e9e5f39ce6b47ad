/* access.c — see access.h. */
#include "access.h"
#include "app.h"
#include "metrics.h"
#include "ratelimit.h"
#include "request.h"

#include <event2/http.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Constant-time comparison: the time taken does not depend on where the strings differ. */
static int secret_equal(const char *given, size_t given_len, const char *secret)
{
    size_t secret_len = strlen(secret);
    unsigned char diff = (unsigned char)(given_len != secret_len);
    for (size_t i = 0; i < secret_len; i++)
        diff |= (unsigned char)(secret[i] ^ (i < given_len ? given[i] : 0));
    return diff == 0;
}

/* The Bearer token of the request, or NULL. */
static const char *bearer(struct request *r, size_t *len)
{
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
        return NULL;
    auth += 7;
    while (*auth == ' ')
        auth++;
    *len = strlen(auth);
    while (*len > 0 && auth[*len - 1] == ' ')
        (*len)--;
    return auth;
}

/* 0 when allowed; otherwise the request has been answered (401/403). */
static int authorize(struct request *r)
{
    const struct config *cfg = &r->ctx->app->cfg;
    size_t len = 0;
    const char *token = bearer(r, &len);
    int is_admin_token = token && cfg->admin_token[0] && secret_equal(token, len, cfg->admin_token);

    if (router_is_admin(r->endpoint, r->method)) {
        if (cfg->admin_token[0]) {
            if (is_admin_token)
                return 0;
            if (token == NULL)
                respond_error(r, 401, "unauthorized", "this admin endpoint needs Authorization: Bearer <admin_token>");
            else
                respond_error(r, 403, "forbidden", "the token given is not the admin token");
            return -1;
        }
        if (!r->loopback) {
            respond_error(r, 403, "forbidden", "admin endpoints answer loopback clients only when no admin_token is set");
            return -1;
        }
        /* no admin token: a loopback client still needs the general token, if one is set */
    }
    if (cfg->token[0] && r->endpoint != EP_HEALTH) {
        if (token == NULL) {
            respond_error(r, 401, "unauthorized", "missing Authorization: Bearer <token>");
            return -1;
        }
        if (!is_admin_token && !secret_equal(token, len, cfg->token)) {
            respond_error(r, 401, "unauthorized", "invalid token");
            return -1;
        }
    }
    return 0;
}

/* Over [http] rate_limit? Then it has been answered 429. The bucket is the token's when the
 * request carries a valid one (so one client's burst does not starve another behind the
 * same proxy), else the client address's — so made-up tokens cannot dodge the limit, and
 * failed authentication attempts count too. */
static int rate_limited(struct request *r)
{
    struct ratelimit *rl = r->ctx->app->ratelimit;
    const struct config *cfg = &r->ctx->app->cfg;
    if (rl == NULL || r->endpoint == EP_HEALTH || r->endpoint == EP_METRICS)
        return 0;
    size_t len = 0;
    const char *key = bearer(r, &len);
    if (key != NULL && !(cfg->token[0] && secret_equal(key, len, cfg->token)) &&
        !(cfg->admin_token[0] && secret_equal(key, len, cfg->admin_token)))
        key = NULL;
    if (key == NULL) {
        key = r->client;
        len = strlen(key);
    }
    int wait = ratelimit_take(rl, key, len, r->start_us);
    if (wait == 0)
        return 0;
    char retry[16];
    snprintf(retry, sizeof retry, "%d", wait);
    respond_header(r, "Retry-After", retry);
    metrics_inc(MC_RATE_LIMITED, 1);
    respond_error(r, 429, "rate_limited", "over %d requests per second; retry after %d s", cfg->rate_limit, wait);
    return 1;
}

int access_check(struct request *r)
{
    return rate_limited(r) || authorize(r) < 0 ? -1 : 0;
}
