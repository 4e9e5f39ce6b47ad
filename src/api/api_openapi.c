/* api_openapi.c — GET /openapi.json: the description the build embedded (api_openapi.h).
 * Answered from memory by reference, with an ETag from its content as the console's files are
 * (a client revalidates and gets 304 until a new build changes it). Parameters are ignored: the
 * description does not depend on them. */
#include "api/api_console.h"
#include "api/api_openapi.h"
#include "api/handlers.h"
#include "http/request.h"

void api_openapi(struct request *r)
{
    respond_header(r, "ETag", openapi_json_etag);
    respond_header(r, "Cache-Control", "no-cache"); /* revalidate: a new build is seen at once */
    respond_header(r, "X-Content-Type-Options", "nosniff");
    if (api_if_none_match(r, openapi_json_etag)) {
        respond_static(r, 304, NULL, NULL, 0);
        return;
    }
    respond_static(r, 200, "application/json", openapi_json, openapi_json_len);
}
