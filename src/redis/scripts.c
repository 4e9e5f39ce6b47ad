/* scripts.c — see scripts.h. */
#include "redis/scripts.h"
#include "base/log.h"

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
};

static const struct script_source *bound[SCRIPT_COUNT];
static int guarded; /* scripts_guard: written once before the threads start */

int scripts_init(void)
{
    for (int id = 0; id < SCRIPT_COUNT; id++) {
        bound[id] = NULL;
        for (int i = 0; i < script_sources_count; i++)
            if (strcmp(script_sources[i].name, names[id]) == 0)
                bound[id] = &script_sources[i];
        if (bound[id] == NULL) {
            log_error("Lua script %s.lua was not embedded in this build", names[id]);
            return -1;
        }
    }
    return 0;
}

void script_evalsha_head(enum script_id id, const char **argv, size_t *lens)
{
    argv[0] = "EVALSHA";
    lens[0] = 7;
    argv[1] = script_sha(id);
    lens[1] = 40;
    argv[2] = "1";
    lens[2] = 1;
}

void scripts_guard(int on)
{
    guarded = on != 0;
}

const char *script_sha(enum script_id id)
{
    return guarded ? bound[id]->guarded_sha : bound[id]->sha;
}

const char *script_text(enum script_id id)
{
    return guarded ? bound[id]->guarded_text : bound[id]->text;
}
