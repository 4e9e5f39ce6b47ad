/* access.c — see access.h. */
#include "api/access.h"
#include "core/app.h"
#include "core/metrics.h"
#include "base/ratelimit.h"
#include "http/request.h"

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

static int b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* The console's pages are loaded by the browser itself, which cannot add a Bearer header to a
 * page load: there the token may come as the password of HTTP Basic (any user name), which the
 * browser asks for after a 401 with WWW-Authenticate. Decoded into buf; NULL when absent. */
static const char *basic_password(struct request *r, char *buf, size_t cap, size_t *len)
{
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
    if (r->endpoint != EP_CONSOLE || auth == NULL || strncasecmp(auth, "Basic ", 6) != 0)
        return NULL;
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (const char *p = auth + 6; *p && *p != '='; p++) {
        int v = b64val(*p);
        if (v < 0)
            return NULL;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n + 1 >= cap)
                return NULL;
            buf[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    buf[n] = '\0';
    const char *colon = memchr(buf, ':', n);
    if (colon == NULL)
        return NULL;
    *len = n - (size_t)(colon + 1 - buf);
    return colon + 1;
}

/* 401; on the console, with the challenge that makes a browser ask for the token. */
static void unauthorized(struct request *r, const char *message)
{
    if (r->endpoint == EP_CONSOLE)
        respond_header(r, "WWW-Authenticate", "Basic realm=\"hourglass console\", charset=\"UTF-8\"");
    respond_error(r, 401, "unauthorized", "%s", message);
}

/* 0 when allowed; otherwise the request has been answered (401/403). */
static int authorize(struct request *r)
{
    const struct config *cfg = &r->ctx->app->cfg;
    size_t len = 0;
    char basic[512];
    const char *token = bearer(r, &len);
    if (token == NULL)
        token = basic_password(r, basic, sizeof basic, &len);
    int is_admin_token = token && cfg->admin_token[0] && secret_equal(token, len, cfg->admin_token);

    if (router_is_admin(r->endpoint, r->method)) {
        if (cfg->admin_token[0]) {
            if (is_admin_token)
                return 0;
            if (token == NULL)
                unauthorized(r, "this admin endpoint needs Authorization: Bearer <admin_token>");
            else if (r->endpoint == EP_CONSOLE) /* 401 again, so the browser asks again */
                unauthorized(r, "the token given is not the admin token");
            else
                respond_error(r, 403, "forbidden", "the token given is not the admin token");
            return -1;
        }
        if (!r->loopback) {
            respond_error(r, 403, "forbidden",
                          "admin endpoints answer loopback clients only when no admin_token is set");
            return -1;
        }
        /* no admin token: a loopback client still needs the general token, if one is set */
    }
    if (cfg->token[0] && r->endpoint != EP_HEALTH && r->endpoint != EP_OPENAPI) {
        if (token == NULL) {
            unauthorized(r, "missing Authorization: Bearer <token>");
            return -1;
        }
        if (!is_admin_token && !secret_equal(token, len, cfg->token)) {
            unauthorized(r, "invalid token");
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
