/* rcause.c — see rcause.h. */
#include "core/rcause.h"

#include <string.h>

static const char *const cause_names[RCAUSE_COUNT] = {
    [RCAUSE_NONE] = "none",       [RCAUSE_DOWN] = "down",         [RCAUSE_TIMEOUT] = "timeout",
    [RCAUSE_OOM] = "oom",         [RCAUSE_BUSY] = "busy",         [RCAUSE_READONLY] = "readonly",
    [RCAUSE_LOADING] = "loading", [RCAUSE_NOSCRIPT] = "noscript", [RCAUSE_SCRIPT] = "script",
    [RCAUSE_AUTH] = "auth",       [RCAUSE_OTHER] = "other",
};

const char *rcause_name(enum rcause cause)
{
    return (unsigned)cause < RCAUSE_COUNT ? cause_names[cause] : "other";
}

int rcause_refuses(enum rcause cause)
{
    switch (cause) {
    case RCAUSE_OOM:
    case RCAUSE_BUSY:
    case RCAUSE_READONLY:
    case RCAUSE_LOADING:
    case RCAUSE_NOSCRIPT:
    case RCAUSE_AUTH:
        return 1;
    default:
        return 0;
    }
}

static int has_word(const char *s, size_t len, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 0; i + wl <= len; i++)
        if (memcmp(s + i, word, wl) == 0)
            return 1;
    return 0;
}

enum rcause rcause_classify(const char *err, size_t len)
{
    static const struct {
        const char *prefix;
        enum rcause cause;
    } codes[] = {
        {"OOM ", RCAUSE_OOM},
        {"BUSY ", RCAUSE_BUSY},
        {"READONLY ", RCAUSE_READONLY},
        {"LOADING ", RCAUSE_LOADING},
        {"NOSCRIPT ", RCAUSE_NOSCRIPT},
        {"NOAUTH ", RCAUSE_AUTH},
        {"WRONGPASS ", RCAUSE_AUTH},
        {"NOPERM ", RCAUSE_AUTH},
        {"MASTERDOWN ", RCAUSE_READONLY},
        /* FCALL of a function the server does not hold: the scripts' library is not loaded */
        {"ERR Function not found", RCAUSE_NOSCRIPT},
    };
    if (err == NULL)
        return RCAUSE_OTHER;
    /* Redis 7 passes the code of an error raised inside a script through ("OOM command not
     * allowed ... script: ..."), so the leading code comes first. */
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        size_t pl = strlen(codes[i].prefix);
        if (len >= pl && memcmp(err, codes[i].prefix, pl) == 0)
            return codes[i].cause;
    }
    /* Older servers wrap it: "ERR Error running script (call to f_...): ... OOM command not
     * allowed when used memory > 'maxmemory'". */
    if (has_word(err, len, "OOM command not allowed"))
        return RCAUSE_OOM;
    if (has_word(err, len, "read only replica") || has_word(err, len, "read only slave"))
        return RCAUSE_READONLY;
    if (has_word(err, len, "user_script") || has_word(err, len, "Error running script") ||
        has_word(err, len, "@user_script") || has_word(err, len, "script:") || has_word(err, len, "user_function"))
        return RCAUSE_SCRIPT;
    return RCAUSE_OTHER;
}
