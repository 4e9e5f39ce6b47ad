/* scripts.c — see scripts.h. */
#include "scripts.h"
#include "log.h"
#include "sha1.h"

#include <string.h>

static const char *const names[SCRIPT_COUNT] = {
    [SCRIPT_PUSH] = "push",       [SCRIPT_MOVE] = "move",         [SCRIPT_RESERVE] = "reserve",
    [SCRIPT_FINISH] = "finish",   [SCRIPT_RELEASE] = "release",   [SCRIPT_TOUCH] = "touch",
    [SCRIPT_DELETE] = "delete",   [SCRIPT_RESCHEDULE] = "reschedule", [SCRIPT_INSPECT] = "inspect",
    [SCRIPT_RESTORE] = "restore", [SCRIPT_REQUEUE] = "requeue",   [SCRIPT_DEADLIST] = "deadlist", [SCRIPT_LEASE] = "lease",
    [SCRIPT_FLEET] = "fleet",
};

static const char *texts[SCRIPT_COUNT];
static char shas[SCRIPT_COUNT][41];

int scripts_init(void)
{
    for (int id = 0; id < SCRIPT_COUNT; id++) {
        texts[id] = NULL;
        for (int i = 0; i < script_sources_count; i++)
            if (strcmp(script_sources[i].name, names[id]) == 0)
                texts[id] = script_sources[i].text;
        if (texts[id] == NULL) {
            log_error("Lua script %s.lua was not embedded in this build", names[id]);
            return -1;
        }
        sha1_hex(texts[id], strlen(texts[id]), shas[id]);
    }
    return 0;
}

const char *script_name(enum script_id id)
{
    return names[id];
}

const char *script_sha(enum script_id id)
{
    return shas[id];
}

const char *script_text(enum script_id id)
{
    return texts[id];
}
