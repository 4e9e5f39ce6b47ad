/* log.h — levelled logging, safe from any thread.
 *
 * Each line is formatted into a stack buffer and written with one write(2), so
 * lines from different threads never interleave. The level check happens before
 * any formatting. Secrets (tokens, passwords) must never be passed to these. */
#ifndef HG_LOG_H
#define HG_LOG_H

enum log_level { LL_ERROR = 0, LL_WARN = 1, LL_INFO = 2, LL_DEBUG = 3 };

#define log_error(...) log_at(LL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_at(LL_WARN, __VA_ARGS__)
#define log_info(...)  log_at(LL_INFO, __VA_ARGS__)
#define log_debug(...) log_at(LL_DEBUG, __VA_ARGS__)
#define log_at(level, ...)                                                                                             \
    do {                                                                                                               \
        if ((level) <= log_level_get())                                                                                \
            log_write((level), __FILE__, __LINE__, __VA_ARGS__);                                                       \
    } while (0)

/* The current threshold; lines above it are not formatted. */
int log_level_get(void);
void log_level_set(enum log_level level);

/* Parse "error|warn|info|debug"; returns the level or -1. */
int log_level_parse(const char *name);

/* Log to `path` (appending), or to stderr when path is NULL or empty. Returns 0 / -1. */
int log_open(const char *path) __attribute__((warn_unused_result));

/* Re-open the same file (for SIGHUP after logrotate). Safe to call from any thread. */
void log_reopen(void);

/* The descriptor log lines are written to (stays the same number across reopens; for tests). */
int log_fd_number(void);

/* Name this thread in its log lines ("main", "http-0", "keeper", ...) and in the kernel (top -H, ps -L,
 * perf), cut to 15 bytes there. The string must outlive the thread. */
void log_set_thread_name(const char *name);

/* This thread's name as set above ("main" until then). */
const char *log_thread_name(void);

void log_write(int level, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
