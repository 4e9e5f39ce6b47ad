/* params.h — request parameters of action endpoints, from the query string and, for POST,
 * from a form-encoded or JSON-object body. Strict: a malformed escape, a repeated name or a
 * name the endpoint does not know is an error the caller turns into a 400. */
#ifndef HG_PARAMS_H
#define HG_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#define PARAMS_MAX     16
#define PARAM_NAME_MAX 32

struct param {
    char name[PARAM_NAME_MAX + 1];
    char *value; /* decoded, NUL-terminated, owned */
    size_t len;
};

struct params {
    int n;
    struct param items[PARAMS_MAX];
};

void params_init(struct params *p);
void params_free(struct params *p);

/* Add "a=1&b=two" (percent-decoding, '+' = space). Returns 0, or -1 with a message in err. */
int params_parse_form(struct params *p, const char *s, size_t len, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Add the members of a flat JSON object whose values are strings, numbers or booleans. */
int params_parse_json(struct params *p, const char *s, size_t len, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Every name present is in `allowed` (NULL-terminated)? 0, or -1 naming the stranger. */
int params_only(const struct params *p, const char *const *allowed, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The value of `name`, or NULL when absent. */
const char *params_get(const struct params *p, const char *name);

/* Integer parameter in [min, max]; absent -> def. 0, or -1 with a message. */
int param_int(const struct params *p, const char *name, int64_t min, int64_t max, int64_t def, int64_t *out, char *err,
              size_t errlen) __attribute__((warn_unused_result));

/* Boolean parameter (true/false/1/0); absent -> def. */
int param_bool(const struct params *p, const char *name, int def, int *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Seconds with up to 3 decimals ("30", "0.5") as milliseconds in [0, max_ms]; absent -> def_ms. */
int param_seconds(const struct params *p, const char *name, int64_t max_ms, int64_t def_ms, int64_t *out_ms, char *err,
                  size_t errlen) __attribute__((warn_unused_result));

/* Strict integer text: optional '-', 1..19 digits, nothing else. 0 / -1. */
int param_int64_strict(const char *s, size_t len, int64_t *out);

#endif
