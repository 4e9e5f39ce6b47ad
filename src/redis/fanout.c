/* fanout.c — see fanout.h. */
#include "redis/fanout.h"
#include "redis/rlink.h"

#include <stdlib.h>

struct fanout {
    struct rlink *link;
    fanout_reply_fn reply;
    fanout_done_fn done;
    void *arg;
    int holds;   /* commands awaited, the sender's hold, the caller's */
    int awaited; /* commands sent and not yet answered */
    int failed;
    int n;
    struct slot { /* a command's callback argument */
        struct fanout *f;
        int index;
    } slots[];
};

struct fanout *fanout_new(struct rlink *link, int n, fanout_reply_fn reply, fanout_done_fn done, void *arg)
{
    struct fanout *f = malloc(sizeof *f + (size_t)(n > 0 ? n : 1) * sizeof f->slots[0]);
    if (f == NULL)
        return NULL;
    *f = (struct fanout){link, reply, done, arg, 1, 0, 0, n};
    for (int i = 0; i < n; i++)
        f->slots[i] = (struct slot){f, i};
    return f;
}

void fanout_hold(struct fanout *f)
{
    f->holds++;
}

void fanout_release(struct fanout *f)
{
    if (--f->holds > 0)
        return;
    f->done(f->failed, f->arg);
    free(f);
}

static void on_reply(redisReply *r, void *arg)
{
    struct slot *slot = arg;
    struct fanout *f = slot->f;
    f->awaited--;
    if (r == NULL || f->reply(r, slot->index, f->arg) < 0)
        f->failed = 1;
    fanout_release(f);
}

int fanout_send(struct fanout *f, int index, int argc, const char **argv, const size_t *lens)
{
    if (rlink_command(f->link, on_reply, &f->slots[index], argc, argv, lens) < 0) {
        f->failed = 1;
        return -1;
    }
    f->holds++;
    f->awaited++;
    return 0;
}

int fanout_sent(struct fanout *f)
{
    if (f->failed && f->awaited == 0) {
        free(f);
        return -1;
    }
    return 0;
}

int fanout_end(struct fanout *f)
{
    if (fanout_sent(f) < 0)
        return -1;
    fanout_release(f);
    return 0;
}
