/* log.c — see log.h.
 *
 * Reopening (SIGHUP, after logrotate moved the file) must not close the descriptor other
 * threads are writing to: between the close and their write() the number could be reused
 * by a client socket or a Redis connection, and a log line would go there. So the new file
 * is dup2()ed onto the same descriptor number, which the kernel does atomically: a write
 * goes to the old file or the new one, never anywhere else. */
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int current_level = LL_INFO;
static atomic_int log_fd = STDERR_FILENO;
static char log_path[1024];
static pthread_mutex_t reopen_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local const char *thread_name = "main";

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int log_level_get(void)
{
    return atomic_load_explicit(&current_level, memory_order_relaxed);
}

void log_level_set(enum log_level level)
{
    atomic_store(&current_level, (int)level);
}

int log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcasecmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

const char *log_thread_name(void)
{
    return thread_name;
}

void log_set_thread_name(const char *name)
{
    thread_name = name;
    /* The kernel's name too, so top -H, ps -L and perf tell the threads apart (at most 15
     * bytes; every name the daemon gives is shorter). Purely informative: failure is fine. */
    char kernel_name[16];
    snprintf(kernel_name, sizeof kernel_name, "%s", name);
    (void)pthread_setname_np(pthread_self(), kernel_name);
}

static int open_path(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

int log_open(const char *path)
{
    if (path == NULL || path[0] == '\0') {
        log_path[0] = '\0';
        atomic_store(&log_fd, STDERR_FILENO);
        return 0;
    }
    int fd = open_path(path);
    if (fd < 0)
        return -1;
    pthread_mutex_lock(&reopen_lock);
    snprintf(log_path, sizeof log_path, "%s", path);
    int cur = atomic_load(&log_fd);
    if (cur == STDERR_FILENO) {
        atomic_store(&log_fd, fd); /* first file: the number is new, nobody can hold it */
    } else {
        dup2(fd, cur); /* see the top of the file */
        close(fd);
    }
    pthread_mutex_unlock(&reopen_lock);
    return 0;
}

void log_reopen(void)
{
    pthread_mutex_lock(&reopen_lock);
    int cur = atomic_load(&log_fd);
    if (log_path[0] != '\0' && cur != STDERR_FILENO) {
        int fd = open_path(log_path);
        if (fd >= 0) {
            if (dup2(fd, cur) < 0) /* keep writing to the old file rather than lose lines */
                fprintf(stderr, "hourglassd: cannot reopen the log file %s: %s\n", log_path, strerror(errno));
            close(fd);
        }
    }
    pthread_mutex_unlock(&reopen_lock);
}

int log_fd_number(void)
{
    return atomic_load(&log_fd);
}

void log_write(int level, const char *file, int line, const char *fmt, ...)
{
    char buf[2048];
    struct timeval tv;
    struct tm tm;
    int saved_errno = errno;

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;

    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    int w = snprintf(buf + n, sizeof buf - n, ".%03d %-5s [%s] %s:%d: ", (int)(tv.tv_usec / 1000),
                     level_names[level < 0   ? 0
                                 : level > 3 ? 3
                                             : level],
                     thread_name, base, line);
    if (w > 0)
        n += (size_t)w < sizeof buf - n ? (size_t)w : sizeof buf - n - 1;

    va_list ap;
    va_start(ap, fmt);
    w = vsnprintf(buf + n, sizeof buf - n, fmt, ap);
    va_end(ap);
    if (w > 0)
        n += (size_t)w < sizeof buf - n ? (size_t)w : sizeof buf - n - 1;
    if (n >= sizeof buf - 1)
        n = sizeof buf - 2;
    buf[n++] = '\n';

    ssize_t r = write(atomic_load_explicit(&log_fd, memory_order_relaxed), buf, n);
    (void)r;
    errno = saved_errno;
}
