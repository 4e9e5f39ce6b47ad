/* api_console.c — GET /console/<file>: the console's files from the table the build made
 * (api_console.h). Static and small, so each is answered from memory by reference, with an
 * ETag from its content (a browser revalidates and gets 304 until the build changes it) and
 * headers that keep the page to its own origin: its script, style and API calls come from
 * this daemon or nowhere. /console itself redirects to /console/, so the page's relative
 * links resolve under it. */
#include "api/api_console.h"
#include "api/handlers.h"
#include "http/request.h"

#include <string.h>

/* Everything from this origin only; no inline script, no framing, no plugins. The plots are
 * SVG built through the DOM, the favicon a data: URL. */
#define CONSOLE_CSP                                                                                                    \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "              \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const struct console_file *api_console_find(const char *name, size_t len)
{
    if (len == 0) {
        name = "index.html";
        len = strlen(name);
    }
    for (int i = 0; i < console_files_count; i++)
        if (strlen(console_files[i].name) == len && memcmp(console_files[i].name, name, len) == 0)
            return &console_files[i];
    return NULL;
}

int api_if_none_match(struct request *r, const char *etag)
{
    const char *inm = request_header(r, "If-None-Match");
    if (inm == NULL)
        return 0;
    size_t elen = strlen(etag);
    for (const char *p = inm; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *end = e;
        while (end > p && end[-1] == ' ')
            end--;
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/')
            p += 2; /* a weak comparison is what If-None-Match asks for */
        if ((end - p == 1 && *p == '*') || ((size_t)(end - p) == elen && memcmp(p, etag, elen) == 0))
            return 1;
        p = e;
    }
    return 0;
}

void api_console(struct request *r)
{
    /* parameters are ignored: a static file does not depend on them */
    if (strcmp(request_path(r), "/console") == 0) {
        respond_header(r, "Location", "/console/");
        respond_static(r, 301, "text/plain; charset=utf-8", "see /console/\n", 14);
        return;
    }
    const struct console_file *f = api_console_find(r->route.arg, r->route.arg_len);
    if (f == NULL) {
        respond_error(r, 404, "not_found", "no such console file; the console is at /console/");
        return;
    }
    respond_header(r, "ETag", f->etag);
    respond_header(r, "Cache-Control", "no-cache"); /* revalidate: a new build is seen at once */
    respond_header(r, "Content-Security-Policy", CONSOLE_CSP);
    respond_header(r, "X-Content-Type-Options", "nosniff");
    respond_header(r, "X-Frame-Options", "DENY");
    respond_header(r, "Referrer-Policy", "no-referrer");
    if (api_if_none_match(r, f->etag)) {
        respond_static(r, 304, NULL, NULL, 0);
        return;
    }
    respond_static(r, 200, f->content_type, f->data, f->len);
}
