/* jobjson.c — see jobjson.h. */
#include "redis/jobjson.h"
#include "core/ids.h"
#include "core/job.h"

void jobjson_id(struct sbuf *sb, uint64_t id)
{
    char dec[ID_DECIMAL_MAX + 1];
    int n = id_format(id, dec);
    sb_putc(sb, '"');
    sb_put(sb, dec, (size_t)n);
    sb_putc(sb, '"');
}

void jobjson_open(struct sbuf *sb, const struct jobjson *j)
{
    sb_puts(sb, "{\"id\":");
    jobjson_id(sb, j->id);
    if (j->topic) {
        sb_puts(sb, ",\"topic\":");
        sb_json_str(sb, j->topic, j->topic_len);
    }
    if (j->state) {
        sb_puts(sb, ",\"state\":");
        sb_json_cstr(sb, j->state);
    }
    sb_puts(sb, ",\"body\":");
    sb_put(sb, j->body, j->body_len); /* stored as compact JSON text */
    sb_puts(sb, ",\"priority\":");
    sb_json_int(sb, j->priority);
    sb_puts(sb, ",\"ttr\":");
    sb_json_int(sb, j->ttr);
    sb_puts(sb, ",\"tries\":");
    sb_json_int(sb, j->tries);
    sb_puts(sb, ",\"attempt\":");
    sb_json_int(sb, j->attempt);
    sb_puts(sb, ",\"runAt\":");
    sb_json_int(sb, j->run_at);
    if (j->created_at > 0) {
        sb_puts(sb, ",\"createdAt\":");
        sb_json_int(sb, j->created_at);
    }
    if (j->lease_until > 0) {
        sb_puts(sb, ",\"leaseUntil\":");
        sb_json_int(sb, j->lease_until);
    }
    if (j->died_at > 0) {
        sb_puts(sb, ",\"diedAt\":");
        sb_json_int(sb, j->died_at);
    }
    if (j->biz_len > 0) {
        sb_puts(sb, ",\"bizKey\":");
        sb_json_str(sb, j->biz, j->biz_len);
    }
    if (j->has_backoff) {
        sb_puts(sb, ",\"backoff\":");
        sb_json_int(sb, j->backoff);
    }
    if (j->trace.parent == NULL) {
        sb_puts(sb, ",\"traceparent\":null,\"tracestate\":null");
    } else {
        sb_puts(sb, ",\"traceparent\":");
        sb_json_str(sb, j->trace.parent, j->trace.parent_len);
        sb_puts(sb, ",\"tracestate\":");
        if (j->trace.state)
            sb_json_str(sb, j->trace.state, j->trace.state_len);
        else
            sb_puts(sb, "null");
    }
    sb_puts(sb, ",\"group\":");
    if (j->group)
        sb_json_str(sb, j->group, j->group_len);
    else
        sb_puts(sb, "null");
}

void jobjson_delivered(struct sbuf *sb, const struct delivered *d)
{
    struct jobjson j = {.id = d->id,
                        .topic = d->topic,
                        .topic_len = d->topic_len,
                        .body = d->body,
                        .body_len = d->body_len,
                        .biz = d->biz,
                        .biz_len = d->biz_len,
                        .priority = d->priority,
                        .ttr = d->ttr,
                        .tries = d->tries,
                        .attempt = d->attempt,
                        .run_at = d->run_at,
                        .lease_until = d->lease_until,
                        .trace = d->trace,
                        .group = d->group,
                        .group_len = d->group_len};
    jobjson_open(sb, &j);
    sb_putc(sb, '}');
}

void jobjson_view(struct sbuf *sb, uint64_t id, const struct job_view *v)
{
    struct jobjson j = {.id = id,
                        .topic = v->topic,
                        .topic_len = v->topic_len,
                        .state = job_state_name(v->state),
                        .body = v->body,
                        .body_len = v->body_len,
                        .biz = v->biz,
                        .biz_len = v->biz_len,
                        .priority = v->priority,
                        .ttr = v->ttr,
                        .tries = v->tries,
                        .attempt = v->attempts,
                        .run_at = v->run_at,
                        .created_at = id_unix_ms(id),
                        .lease_until = v->lease_until,
                        .has_backoff = v->backoff >= 0,
                        .backoff = v->backoff,
                        .trace = v->trace,
                        .group = v->group,
                        .group_len = v->group_len};
    jobjson_open(sb, &j);
}
