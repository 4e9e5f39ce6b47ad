/* params.c — see params.h. */
#include "http/params.h"
#include "core/router.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void params_init(struct params *p)
{
    p->n = 0;
}

void params_free(struct params *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->items[i].value);
    p->n = 0;
}

static int add(struct params *p, const char *name, size_t name_len, const char *value, size_t value_len, int decode,
               char *err, size_t errlen)
{
    char decoded_name[PARAM_NAME_MAX + 1];
    long n = -1;
    if (decode) {
        n = router_percent_decode(name, name_len, decoded_name, sizeof decoded_name, 1);
    } else if (name_len < sizeof decoded_name) { /* a JSON member name is taken literally */
        memcpy(decoded_name, name, name_len);
        decoded_name[name_len] = '\0';
        n = (long)name_len;
    }
    if (n <= 0) {
        snprintf(err, errlen, n == 0 ? "empty parameter name" : "malformed or too long parameter name");
        return -1;
    }
    for (long i = 0; i < n; i++)
        if ((unsigned char)decoded_name[i] < 0x21 || (unsigned char)decoded_name[i] > 0x7e) {
            snprintf(err, errlen, "parameter names are printable ASCII");
            return -1;
        }
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->items[i].name, decoded_name) == 0) {
            snprintf(err, errlen, "parameter \"%s\" is given more than once", decoded_name);
            return -1;
        }
    if (p->n >= PARAMS_MAX) {
        snprintf(err, errlen, "more than %d parameters", PARAMS_MAX);
        return -1;
    }
    char *v = malloc(value_len + 1);
    if (v == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    long vlen;
    if (decode) {
        vlen = router_percent_decode(value, value_len, v, value_len + 1, 1);
        if (vlen < 0) {
            free(v);
            snprintf(err, errlen, "parameter \"%s\" has a malformed %%-escape", decoded_name);
            return -1;
        }
    } else {
        memcpy(v, value, value_len);
        v[value_len] = '\0';
        vlen = (long)value_len;
    }
    if (memchr(v, '\0', (size_t)vlen) != NULL) {
        free(v);
        snprintf(err, errlen, "parameter \"%s\" contains a NUL byte", decoded_name);
        return -1;
    }
    struct param *it = &p->items[p->n++];
    memcpy(it->name, decoded_name, (size_t)n + 1);
    it->value = v;
    it->len = (size_t)vlen;
    return 0;
}

int params_parse_form(struct params *p, const char *s, size_t len, char *err, size_t errlen)
{
    size_t i = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && s[end] != '&')
            end++;
        if (end > i) {
            const char *eq = memchr(s + i, '=', end - i);
            size_t name_len = eq ? (size_t)(eq - (s + i)) : end - i;
            const char *value = eq ? eq + 1 : s + end;
            size_t value_len = eq ? (size_t)(s + end - value) : 0;
            if (add(p, s + i, name_len, value, value_len, 1, err, errlen) < 0)
                return -1;
        }
        i = end + 1;
    }
    return 0;
}

int params_parse_json(struct params *p, const char *s, size_t len, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(s, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(err, errlen, "body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        return -1;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        snprintf(err, errlen, "body must be a JSON object of parameters");
        return -1;
    }
    const char *key;
    json_t *value;
    int rc = 0;
    json_object_foreach(root, key, value)
    {
        char tmp[64];
        const char *text;
        size_t text_len;
        if (json_is_string(value)) {
            text = json_string_value(value);
            text_len = json_string_length(value);
        } else if (json_is_integer(value)) {
            text_len = (size_t)snprintf(tmp, sizeof tmp, "%lld", (long long)json_integer_value(value));
            text = tmp;
        } else if (json_is_real(value)) {
            /* The shortest text that reads back as the same double, so 0.1 becomes "0.1" (what the
             * client wrote, and what param_seconds accepts), not "0.10000000000000001". */
            double d = json_real_value(value);
            for (int prec = 15; prec <= 17; prec++) {
                text_len = (size_t)snprintf(tmp, sizeof tmp, "%.*g", prec, d);
                if (strtod(tmp, NULL) == d)
                    break;
            }
            text = tmp;
        } else if (json_is_boolean(value)) {
            text = json_is_true(value) ? "true" : "false";
            text_len = strlen(text);
        } else {
            snprintf(err, errlen, "parameter \"%s\" must be a string, number or boolean", key);
            rc = -1;
            break;
        }
        if (add(p, key, strlen(key), text, text_len, 0, err, errlen) < 0) {
            rc = -1;
            break;
        }
    }
    json_decref(root);
    return rc;
}

int params_only(const struct params *p, const char *const *allowed, char *err, size_t errlen)
{
    for (int i = 0; i < p->n; i++) {
        int known = 0;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, p->items[i].name) == 0)
                known = 1;
        if (!known) {
            snprintf(err, errlen, "unknown parameter \"%s\"", p->items[i].name);
            return -1;
        }
    }
    return 0;
}

const char *params_get(const struct params *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->items[i].name, name) == 0)
            return p->items[i].value;
    return NULL;
}

int param_int64_strict(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (len > 0 && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == len || len - i > 19)
        return -1;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX)
        return -1;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

int param_int(const struct params *p, const char *name, int64_t min, int64_t max, int64_t def, int64_t *out, char *err,
              size_t errlen)
{
    const char *v = params_get(p, name);
    if (v == NULL) {
        *out = def;
        return 0;
    }
    int64_t n;
    if (param_int64_strict(v, strlen(v), &n) < 0 || n < min || n > max) {
        snprintf(err, errlen, "%s must be an integer from %lld to %lld", name, (long long)min, (long long)max);
        return -1;
    }
    *out = n;
    return 0;
}

int param_bool(const struct params *p, const char *name, int def, int *out, char *err, size_t errlen)
{
    const char *v = params_get(p, name);
    if (v == NULL)
        *out = def;
    else if (!strcmp(v, "true") || !strcmp(v, "1"))
        *out = 1;
    else if (!strcmp(v, "false") || !strcmp(v, "0"))
        *out = 0;
    else {
        snprintf(err, errlen, "%s must be true or false", name);
        return -1;
    }
    return 0;
}

int param_seconds(const struct params *p, const char *name, int64_t max_ms, int64_t def_ms, int64_t *out_ms, char *err,
                  size_t errlen)
{
    const char *v = params_get(p, name);
    if (v == NULL) {
        *out_ms = def_ms;
        return 0;
    }
    int64_t whole = 0, frac = 0;
    int digits = 0, frac_digits = 0, seen_dot = 0;
    for (const char *c = v; *c; c++) {
        if (*c == '.' && !seen_dot && digits > 0) {
            seen_dot = 1;
        } else if (*c >= '0' && *c <= '9' && !seen_dot && digits < 9) {
            whole = whole * 10 + (*c - '0');
            digits++;
        } else if (*c >= '0' && *c <= '9' && seen_dot && frac_digits < 3) {
            frac = frac * 10 + (*c - '0');
            frac_digits++;
        } else {
            digits = -1;
            break;
        }
    }
    if (seen_dot && frac_digits == 0)
        digits = -1;
    while (frac_digits > 0 && frac_digits < 3) {
        frac *= 10;
        frac_digits++;
    }
    int64_t ms = whole * 1000 + frac;
    if (digits <= 0 || ms > max_ms) {
        snprintf(err, errlen, "%s must be a number of seconds from 0 to %lld (up to 3 decimals)", name,
                 (long long)(max_ms / 1000));
        return -1;
    }
    *out_ms = ms;
    return 0;
}
