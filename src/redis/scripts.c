/* scripts.c — see scripts.h. */
#include "redis/scripts.h"
#include "base/log.h"

#include <stdio.h>
#include <string.h>

static const char *const names[SCRIPT_COUNT] = {
    [SCRIPT_PUSH] = "push",
    [SCRIPT_MOVE] = "move",
    [SCRIPT_RESERVE] = "reserve",
    [SCRIPT_FINISH] = "finish",
    [SCRIPT_RELEASE] = "release",
    [SCRIPT_TOUCH] = "touch",
    [SCRIPT_DELETE] = "delete",
    [SCRIPT_RESCHEDULE] = "reschedule",
    [SCRIPT_INSPECT] = "inspect",
    [SCRIPT_RESTORE] = "restore",
    [SCRIPT_REQUEUE] = "requeue",
    [SCRIPT_DEADLIST] = "deadlist",
    [SCRIPT_LEASE] = "lease",
    [SCRIPT_FLEET] = "fleet",
    [SCRIPT_DEADEXPIRE] = "deadexpire",
    [SCRIPT_JOBSCAN] = "jobscan",
    [SCRIPT_ALIGN] = "align",
    [SCRIPT_MARK] = "mark",
    [SCRIPT_RESTOREEND] = "restoreend",
    [SCRIPT_UNFENCE] = "unfence",
    [SCRIPT_TOPICSET] = "topicset",
    [SCRIPT_TOPICJOBS] = "topicjobs",
    [SCRIPT_FARDELETE] = "fardelete",
    [SCRIPT_UNPAGE] = "unpage",
    [SCRIPT_FARBIZ] = "farbiz",
    [SCRIPT_PURGE] = "purge",
    [SCRIPT_LAYOUT] = "layout",
    [SCRIPT_GONEEXPIRE] = "goneexpire",
    [SCRIPT_GROUPS] = "groups",
    [SCRIPT_FINISHMANY] = "finishmany",
};

#define FUNCTION_NAME_MAX 64 /* "hg_" + 12 hex digits + "_" + a script's name */

/* [0] plain, [1] guarded: "<library>_<script>" */
static char functions[2][SCRIPT_COUNT][FUNCTION_NAME_MAX];
static int guarded; /* scripts_guard: written once before the threads start */

int scripts_init(void)
{
    for (int id = 0; id < SCRIPT_COUNT; id++) {
        int found = 0;
        for (int i = 0; i < script_names_count; i++)
            found |= strcmp(script_names[i], names[id]) == 0;
        if (!found) {
            log_error("Lua script %s.lua was not embedded in this build", names[id]);
            return -1;
        }
        snprintf(functions[0][id], FUNCTION_NAME_MAX, "%s_%s", script_library_name_plain, names[id]);
        snprintf(functions[1][id], FUNCTION_NAME_MAX, "%s_%s", script_library_name_guarded, names[id]);
    }
    return 0;
}

void script_call_head(enum script_id id, const char **argv, size_t *lens)
{
    argv[0] = "FCALL";
    lens[0] = 5;
    argv[1] = script_function(id);
    lens[1] = strlen(argv[1]);
    argv[2] = "1";
    lens[2] = 1;
}

void script_load_argv(const char **argv, size_t *lens)
{
    argv[0] = "FUNCTION";
    lens[0] = 8;
    argv[1] = "LOAD";
    lens[1] = 4;
    argv[2] = script_library();
    lens[2] = strlen(argv[2]);
}

void scripts_guard(int on)
{
    guarded = on != 0;
}

const char *script_function(enum script_id id)
{
    return functions[guarded][id];
}

const char *script_library_name(void)
{
    return guarded ? script_library_name_guarded : script_library_name_plain;
}

const char *script_library(void)
{
    return guarded ? script_library_guarded : script_library_plain;
}

int script_library_present(const char *err, size_t len)
{
    /* "ERR Library 'hg_...' already exists" */
    static const char tail[] = "already exists";
    return err != NULL && len >= sizeof tail - 1 && memcmp(err + len - (sizeof tail - 1), tail, sizeof tail - 1) == 0 &&
           len >= 12 && memcmp(err, "ERR Library ", 12) == 0;
}
