/* handlers.h — one handler per endpoint (docs/api.md). Each is called on its worker's thread with
 * a routed, authorised request whose parameters are parsed, and must answer it exactly once,
 * now or from a later callback. Handlers see the worker only through r->ctx (request.h). */
#ifndef HG_HANDLERS_H
#define HG_HANDLERS_H

#include <stdint.h>

struct request;
struct hctx;

void api_push(struct request *r);   /* api_push.c */
void api_get(struct request *r);    /* longpoll.c */
void api_finish(struct request *r); /* api_jobs.c */
void api_release(struct request *r);
void api_touch(struct request *r);
void api_delete(struct request *r);
void api_reschedule(struct request *r);
void api_jobs(struct request *r);
/* Answer r with job `id` exactly as GET /jobs/{id} does (Redis, else its message row, and its
 * history); r must hold no handler state (r->state) yet. For GET /jobs?topic=&bizKey=. */
void api_jobs_show(struct request *r, uint64_t id);
void api_lookup(struct request *r); /* api_lookup.c: GET /jobs?topic=&bizKey= */
void api_purge(struct request *r);  /* purge.c: POST /topics/{topic}/purge */
void api_dead(struct request *r);
void api_restore(struct request *r); /* api_restore.c */
void api_restore_one(struct request *r);
void api_health(struct request *r); /* api_info.c */
void api_stats(struct request *r);
void api_metrics(struct request *r);
void api_topics(struct request *r);    /* api_topics.c: GET /topics */
void api_topic(struct request *r);     /* GET|PUT|DELETE /topics/{topic} */
void api_schedules(struct request *r); /* api_schedules.c: GET|POST /schedules */
void api_schedule(struct request *r);  /* GET|PUT|DELETE /schedules/{id} */
void api_fleet(struct request *r);
void api_throughput(struct request *r);
void api_topic_jobs(struct request *r);   /* api_topicjobs.c */
void api_topic_groups(struct request *r); /* api_topicjobs.c: GET /topics/{topic}/groups */
void api_console(struct request *r);      /* api_console.c */
void api_openapi(struct request *r);      /* api_openapi.c: GET /openapi.json */

/* The push path's per-worker state (hctx.pushes), called from the worker's subsystem table:
 * after each inbox drain the committed pushes go to Redis, in one call (one per shard under
 * Redis Cluster); at the end it is freed. */
void api_push_flush(struct hctx *ctx);
void api_push_free(struct hctx *ctx);

#endif
