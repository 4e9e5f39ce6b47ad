/* api.h — one handler per endpoint (docs/api.md). Each is called on its worker's thread with
 * a routed, authorised request whose parameters are parsed, and must answer it exactly once,
 * now or from a later callback. */
#ifndef HG_API_H
#define HG_API_H

struct request;

void api_push(struct request *r);        /* api_push.c */
struct worker;
void api_push_tick(struct worker *w);    /* once a second: look up pushes whose outcome is unknown */
void api_push_flush(void *worker);       /* after each inbox drain: send committed pushes, a call per shard */
void api_push_free(struct worker *w);
void api_get(struct request *r);         /* longpoll.c */
void api_finish(struct request *r);      /* api_jobs.c */
void api_release(struct request *r);
void api_touch(struct request *r);
void api_delete(struct request *r);
void api_reschedule(struct request *r);
void api_jobs(struct request *r);
void api_dead(struct request *r);
void api_restore(struct request *r);     /* api_admin.c */
void api_restore_one(struct request *r);
void api_health(struct request *r);
void api_stats(struct request *r);
void api_metrics(struct request *r);

#endif
