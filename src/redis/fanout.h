/* fanout.h — one call made of several Redis commands (one per shard, or one per topic),
 * answered once: each reply is handed to the caller as it comes, and the caller is told when
 * every command has answered, failed when one could not be sent or its reply was wrong.
 *
 * Holds: the sender holds the call open while it sends, so that a reply that comes before the
 * last command is out cannot finish it; each command sent holds it until its reply; and the
 * caller may hold it for something else it waits for (another call's answer, fanout_hold).
 * When the last hold goes, `done` runs once and the fan-out is freed. A call of which nothing
 * could be sent (the first send failed: the link is down) ends without `done`, so the caller
 * can answer at once (fanout_sent).
 *
 *     f = fanout_new(link, n, on_reply, on_done, arg);
 *     for each i: if (fanout_send(f, i, argc, argv, lens) < 0) break;
 *     return fanout_end(f);   (-1: nothing was sent, on_done never runs, arg is the caller's)
 *
 * Owned by the thread of its rlink, like the link. */
#ifndef HG_FANOUT_H
#define HG_FANOUT_H

#include <hiredis/hiredis.h>
#include <stddef.h>

struct fanout;
struct rlink;

/* The reply to command `index`: never NULL, as a command that got no reply (an error reply
 * included, rconn.h) fails the call without reaching here. 0, or -1 when the reply is wrong:
 * the call fails. */
typedef int (*fanout_reply_fn)(redisReply *r, int index, void *arg);

/* Every hold has gone: failed = 1 when a command was not sent, got no reply or a wrong one.
 * Runs once; the fan-out is freed after it returns (arg is the caller's to free here). */
typedef void (*fanout_done_fn)(int failed, void *arg);

/* A fan-out of at most n commands (indexes 0..n-1) on `link`, with the sender's hold taken.
 * NULL when out of memory. */
struct fanout *fanout_new(struct rlink *link, int n, fanout_reply_fn reply, fanout_done_fn done, void *arg);

/* Send command `index`. 0, or -1 when it could not be sent: the call has failed, send no more. */
int fanout_send(struct fanout *f, int index, int argc, const char **argv, const size_t *lens)
    __attribute__((warn_unused_result));

/* After the last send: -1 when nothing was sent (a send failed and no reply is awaited): the
 * fan-out is freed and `done` never runs. Else 0: the call stays open, with the sender's hold,
 * until fanout_release. */
int fanout_sent(struct fanout *f) __attribute__((warn_unused_result));

/* Take one more hold (for something else the call waits for), or let one go; letting the last
 * one go runs `done`. */
void fanout_hold(struct fanout *f);
void fanout_release(struct fanout *f);

/* The usual end: fanout_sent, then (0) let the sender's hold go. 0 / -1 as fanout_sent. */
int fanout_end(struct fanout *f) __attribute__((warn_unused_result));

#endif
