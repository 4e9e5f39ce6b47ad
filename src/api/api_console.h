/* api_console.h — the operator's web console (GET /console/, docs/api.md): the files of
 * console/, embedded at build time by scripts/embed-console.sh into the generated
 * $(BUILD)/console_files.c, and served by api_console() (handlers.h) under the admin rules. */
#ifndef HG_API_CONSOLE_H
#define HG_API_CONSOLE_H

#include <stddef.h>

struct console_file {
    const char *name;         /* "index.html", "console.js", ... */
    const char *content_type; /* from the extension */
    const char *etag;         /* quoted: "\"<20 hex digits of the SHA-1 of data>\"" */
    const unsigned char *data;
    size_t len;
};

/* The generated table (static data, never freed). */
extern const struct console_file console_files[];
extern const int console_files_count;

/* The embedded file called name[0..len) ("" is index.html), or NULL. */
const struct console_file *api_console_find(const char *name, size_t len);

/* Whether r's If-None-Match lists `etag` (weakly compared) or is "*": then a 304 answers it.
 * Also for GET /openapi.json (api_openapi.c). */
struct request;
int api_if_none_match(struct request *r, const char *etag);

#endif
