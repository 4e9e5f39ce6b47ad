/* fault.h — the fault seam: a test makes a chosen MySQL statement or commit, or a chosen Redis
 * send or reply, fail, lose its answer or hang, as beanstalkd's falloc makes a chosen
 * allocation fail.
 *
 * Armed only by the environment variable HOURGLASS_FAULTS, read once at start (main.c logs a
 * warning when it is set); unarmed, a check is one relaxed atomic load. A spec is a comma-
 * separated list of
 *     [thread:]point=action@N[+K]
 * meaning: the Nth time `point` is reached (counting from 1, only on threads whose log name is
 * `thread` when one is given), and the K-1 times after it, `action` happens instead of the
 * normal course. Points and their actions:
 *     mysql.exec, mysql.commit   fail  the connection breaks before the statement is sent
 *                                      (the server rolls the transaction back);
 *                                lost  the statement runs, then the connection breaks before
 *                                      its answer is seen (the outcome the client cannot know);
 *                                hang  as lost, after waiting the connection's read timeout.
 *     redis.send                 fail  the send fails as if hiredis refused it.
 *     redis.reply                lost  the connection drops when the reply arrives;
 *                                hang  the reply is swallowed until the watchdog drops it.
 * Example: HOURGLASS_FAULTS=journal:mysql.commit=lost@3 loses the answer of the journal's
 * third COMMIT. */
#ifndef HG_FAULT_H
#define HG_FAULT_H

#include <stddef.h>

enum fault_point { FP_MYSQL_EXEC, FP_MYSQL_COMMIT, FP_REDIS_SEND, FP_REDIS_REPLY, FP_COUNT };
enum fault_action { FA_NONE, FA_FAIL, FA_LOST, FA_HANG };

/* Arm the seam with `spec` (replacing what was armed). 0; -1 with err naming the bad part. */
int fault_arm(const char *spec, char *err, size_t errlen);

/* Is anything armed at `p`? (One relaxed load: callers skip the seam entirely when not.) */
int fault_armed(enum fault_point p);

/* Count one arrival at `p` on this thread and say what happens instead (FA_NONE: nothing). */
enum fault_action fault_at(enum fault_point p);

/* Disarm everything (tests). */
void fault_disarm(void);

#endif
