/* scripts.h — the Lua scripts (the .lua files under src/redis/lua, embedded at build time by
 * scripts/embed-lua.sh) and their SHA-1 names, also computed at build time. Each script's
 * contract (KEYS, ARGV, reply) is in the header comment of its .lua file. */
#ifndef HG_SCRIPTS_H
#define HG_SCRIPTS_H

#include <stddef.h>

enum script_id {
    SCRIPT_PUSH,
    SCRIPT_MOVE,
    SCRIPT_RESERVE,
    SCRIPT_FINISH,
    SCRIPT_RELEASE,
    SCRIPT_TOUCH,
    SCRIPT_DELETE,
    SCRIPT_RESCHEDULE,
    SCRIPT_INSPECT,
    SCRIPT_RESTORE,
    SCRIPT_REQUEUE,
    SCRIPT_DEADLIST,
    SCRIPT_LEASE,
    SCRIPT_FLEET,
    SCRIPT_DEADEXPIRE,
    SCRIPT_JOBSCAN,
    SCRIPT_ALIGN,
    SCRIPT_RESTOREEND,
    SCRIPT_UNFENCE,
    SCRIPT_MARK,
    SCRIPT_TOPICSET,
    SCRIPT_TOPICJOBS,
    SCRIPT_FARDELETE,
    SCRIPT_UNPAGE,
    SCRIPT_FARBIZ,
    SCRIPT_PURGE,
    SCRIPT_LAYOUT,
    SCRIPT_GONEEXPIRE,
    SCRIPT_GROUPS,
    SCRIPT_COUNT
};

/* Generated table (build/lua_scripts.c): name = file name without .lua, sha = SHA-1 of text
 * in hex, text = lib.lua + file; the guarded text (cluster mode) = guard.lua + lib.lua + file,
 * and its SHA-1. */
struct script_source {
    const char *name;
    const char *sha;
    const char *text;
    const char *guarded_sha;
    const char *guarded_text;
};
extern const struct script_source script_sources[];
extern const int script_sources_count;

/* Bind every script_id to its source. Returns 0, or -1 (and logs) if one is missing. */
int scripts_init(void) __attribute__((warn_unused_result));

/* Use the guarded texts (1) or the plain ones (0, the default) from now on: the guard
 * (src/redis/lua/guard.lua) makes a script refuse whole while its slot migrates in a Redis Cluster.
 * Set once with the shard tags (cluster tags: guarded), before any thread loads a script. */
void scripts_guard(int on);

/* Fill argv[0..2] (and lens) with "EVALSHA <sha> 1": every script takes one key, its shard's. */
void script_evalsha_head(enum script_id id, const char **argv, size_t *lens);

/* The script's SHA-1 (40 hex digits) and text, once scripts_init succeeded (guarded or not:
 * scripts_guard). */
const char *script_sha(enum script_id id);
const char *script_text(enum script_id id);

#endif
