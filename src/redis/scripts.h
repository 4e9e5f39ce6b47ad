/* scripts.h — the Lua scripts (the .lua files under src/redis/lua), embedded at build time by
 * scripts/embed-lua.py as one Redis Functions library: loaded once per connection with FUNCTION
 * LOAD and called with FCALL. Each script's contract (KEYS, ARGV, reply) is in the header
 * comment of its .lua file.
 *
 * Why functions and not EVALSHA: an EVAL script is one chunk, so lib.lua, its shared prelude,
 * ran on every call and made its ~60 helper closures each time — 3 us of Redis CPU per call
 * before any work, more than a finish's own work. A library's helpers are made once, when it
 * is loaded; a call runs only its function (docs/architecture.md, "The scripts"). */
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
    SCRIPT_FINISHMANY,
    SCRIPT_COUNT
};

/* Generated (build/lua_scripts.c, scripts/embed-lua.py): the scripts' names (file names without
 * .lua), and the library made of them: plain, and guarded for Redis Cluster (every function runs
 * guard.lua's line first). A library's name is "hg_" and 12 hex digits of its code's SHA-1; a
 * function's is "<library>_<script>". */
extern const char *const script_names[];
extern const int script_names_count;
extern const char script_library_name_plain[], script_library_plain[];
extern const char script_library_name_guarded[], script_library_guarded[];

/* Bind every script_id to its function. Returns 0, or -1 (and logs) if one is missing. */
int scripts_init(void) __attribute__((warn_unused_result));

/* Use the guarded library (1) or the plain one (0, the default) from now on: the guard
 * (src/redis/lua/guard.lua) makes a function refuse whole while its slot migrates in a Redis
 * Cluster. Set once with the shard tags (cluster tags: guarded), before any thread loads it. */
void scripts_guard(int on);

/* Fill argv[0..2] (and lens) with "FCALL <function> 1": every function takes one key, its
 * shard's. */
void script_call_head(enum script_id id, const char **argv, size_t *lens);

/* Fill argv[0..2] (and lens) with "FUNCTION LOAD <library in use>": loading it, whoever loads. */
void script_load_argv(const char **argv, size_t *lens);

/* The function's name, once scripts_init succeeded. */
const char *script_function(enum script_id id);

/* The library in use (plain or guarded: scripts_guard): its name, and the text FUNCTION LOAD
 * takes. */
const char *script_library_name(void);
const char *script_library(void);

/* 1 if an error reply to FUNCTION LOAD says only that the library is loaded already (another
 * connection, or another instance of this version, loaded it first). */
int script_library_present(const char *err, size_t len);

#endif
