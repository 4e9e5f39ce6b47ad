/* api_openapi.h — the API's OpenAPI 3.1 description (docs/openapi.yaml), converted to JSON at
 * build time by scripts/embed-openapi.py into the generated $(BUILD)/openapi_json.c, and served
 * as GET /openapi.json by api_openapi() (handlers.h), with no token needed. */
#ifndef HG_API_OPENAPI_H
#define HG_API_OPENAPI_H

#include <stddef.h>

/* The generated description (static data, never freed). */
extern const unsigned char openapi_json[];
extern const size_t openapi_json_len;
extern const char openapi_json_etag[]; /* quoted: "\"<20 hex digits of the SHA-1 of the JSON>\"" */

#endif
