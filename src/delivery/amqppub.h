/* amqppub.h — a RabbitMQ publisher for one thread: persistent, mandatory messages with
 * publisher confirms, pipelined in batches, each message's fate reported.
 *
 * librabbitmq blocks, so the daemon calls this from a thread of its own; no call ever
 * blocks longer than the timeout it is given (a watchdog cuts the socket at the deadline,
 * the only way to bound a send librabbitmq would wait for forever). A publisher is not
 * thread-safe: one thread creates, uses and frees it.
 *
 * At-least-once: only CONFIRMED means the broker has the message. UNKNOWN means no answer
 * came (connection lost, time ran out): the caller must treat it as not delivered and retry
 * later, so a consumer may see a message twice, never zero times. */
#ifndef HG_AMQPPUB_H
#define HG_AMQPPUB_H

#include <stddef.h>
#include <stdint.h>

/* One message; every pointer is borrowed for the duration of the call. */
struct amqp_out {
    const char *exchange; /* "" = the default exchange (routing key = queue name) */
    const char *routing_key;
    const char *body; /* the job object as GET /get answers it (JSON) */
    size_t body_len;
    const char *id;          /* the job id: the message-id property and the Hourglass-Id header */
    const char *topic;       /* Hourglass-Topic header */
    int attempt;             /* Hourglass-Attempt header: this delivery's number, 1 = the first */
    const char *traceparent; /* the job's W3C Trace Context, as headers of these names; NULL = none */
    const char *tracestate;
};

enum amqppub_outcome {
    AMQPPUB_UNKNOWN = 0, /* no confirm (connection failed, timeout): not delivered as far as we know; retry */
    AMQPPUB_CONFIRMED,   /* basic.ack: the broker has it (persisted to the queues it was routed to) */
    AMQPPUB_NACKED,      /* basic.nack: the broker refused it: a failed attempt */
    AMQPPUB_RETURNED,    /* basic.return: no queue is bound for its routing key: a failed attempt */
    AMQPPUB_REFUSED,     /* the broker closed the channel over it (no such exchange, access refused), or
                          * it cannot be sent (a name longer than 255 bytes): a failed attempt */
};

struct amqppub;

/* A publisher for `url` (amqpurl.h), named `name` in the broker's connection list (NULL =
 * "hourglass"). No I/O: the first publish (or amqppub_connect) connects. NULL with err
 * filled when the url is bad or memory or a thread cannot be had. Free with amqppub_free. */
struct amqppub *amqppub_new(const char *url, const char *name, char *err, size_t errlen);

/* Close the connection politely (bounded by a second) and free everything. NULL is a no-op. */
void amqppub_free(struct amqppub *p);

/* Connect now if not connected (socket, login, channel, confirm.select) within timeout_ms;
 * after a failure, not again before the backoff (200 ms doubling to 5 s) has passed.
 * 0, or -1 (amqppub_error says why). */
int amqppub_connect(struct amqppub *p, int timeout_ms) __attribute__((warn_unused_result));

/* Publish msgs[0..n) in order (persistent, mandatory, content type application/json,
 * headers Hourglass-Id/-Topic/-Attempt, and traceparent/tracestate for a job with a trace
 * context), then wait for their confirms, all within
 * timeout_ms; connects or reconnects first when needed (waiting out the backoff only if it
 * ends in time). Fills outcome[0..n) for every message. Returns 0 when every message has
 * a definite answer (CONFIRMED, NACKED or RETURNED); -1 when some are UNKNOWN or REFUSED,
 * amqppub_error saying why. The connection is dropped after a failure or a timeout (a
 * late confirm must not be taken for the next batch's), a closed channel is reopened by
 * the next call. */
int amqppub_publish_batch(struct amqppub *p, const struct amqp_out *msgs, int n, enum amqppub_outcome *outcome,
                          int timeout_ms);

/* The reason of the last failure ("" if none yet); valid until the next call. */
const char *amqppub_error(const struct amqppub *p);

/* 1 when a connection with an open confirm channel is up. */
int amqppub_connected(const struct amqppub *p);

/* "unknown", "confirmed", "nacked", "returned", "refused". */
const char *amqppub_outcome_name(enum amqppub_outcome o);

/* ---- the confirm ledger of one batch: pure bookkeeping, exposed for tests ----
 * A message is open from its publish until its basic.ack or basic.nack; a basic.return
 * marks it RETURNED and it stays open until its ack (RabbitMQ returns before it acks). */
struct amqppub_ledger {
    const struct amqp_out *msg;
    enum amqppub_outcome *outcome;
    uint64_t *tag;       /* delivery tag of msg[i]; 0 = not published */
    unsigned char *open; /* published, neither acked nor nacked */
    int n, waiting;      /* waiting = how many are open */
};

/* Set every outcome to UNKNOWN; 0, or -1 when out of memory. */
int amqppub_ledger_init(struct amqppub_ledger *l, const struct amqp_out *msg, enum amqppub_outcome *outcome, int n)
    __attribute__((warn_unused_result));
void amqppub_ledger_free(struct amqppub_ledger *l);

/* msg[i] went out with delivery tag `tag`. */
void amqppub_ledger_sent(struct amqppub_ledger *l, int i, uint64_t tag);

/* basic.ack (ack = 1) or basic.nack (ack = 0) for `tag`, or with `multiple` every tag up to it:
 * returns how many messages it settled (tags of other batches settle none). */
int amqppub_ledger_confirm(struct amqppub_ledger *l, uint64_t tag, int multiple, int ack);

/* basic.return naming this message-id, exchange and routing key: the first open, unreturned
 * message with all three gets RETURNED; failing that (a message-id lost on the way), the
 * first with that exchange and routing key — the broker returns in publish order, and two
 * messages to the same exchange and key route alike. Its index, or -1 when none matches. */
int amqppub_ledger_returned(struct amqppub_ledger *l, const char *id, size_t id_len, const char *exchange,
                            size_t exchange_len, const char *routing_key, size_t routing_key_len);

/* channel.close with this reply text (RabbitMQ names the exchange: "NOT_FOUND - no exchange
 * 'x' in vhost '/'", "ACCESS_REFUSED - access to exchange 'x' ..."): the first open message
 * to that exchange gets REFUSED and is settled. Its index, or -1 when the text names none. */
int amqppub_ledger_refused(struct amqppub_ledger *l, const char *text, size_t len);

#endif
