/* amqp_publish — drives src/delivery/amqppub.h for tests/integration/test_amqp_publisher.py.
 *
 *   amqp_publish URL
 *
 * One publisher for the life of the process (so a test can stop and restart the broker under
 * it). Reads one JSON command per line on stdin, answers one JSON line on stdout:
 *
 *   {"op":"publish","timeout":MS,"msgs":[{"exchange","routingKey","body","id","topic","attempt"}...]}
 *   {"op":"publish","timeout":MS,"repeat":N,"msg":{...}}   N copies, ids "<id>-0" .. "<id>-N-1"
 *        -> {"rc":0|-1,"ms":ELAPSED,"outcomes":["confirmed",...],"error":"...","connected":bool}
 *   {"op":"connect","timeout":MS}  -> {"rc","ms","error","connected"}
 *
 * End of input frees the publisher (a polite connection.close) and exits 0. A bad URL exits 2
 * with the parser's message on stderr; a bad command line of input exits 3. */
#include "delivery/amqppub.h"
#include "base/clock.h"
#include "base/log.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *str(json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

static void answer(json_t *reply)
{
    char *text = json_dumps(reply, JSON_COMPACT);
    if (text == NULL) {
        fprintf(stderr, "amqp_publish: cannot encode the answer\n");
        exit(3);
    }
    printf("%s\n", text);
    fflush(stdout);
    free(text);
    json_decref(reply);
}

static json_t *publish(struct amqppub *p, json_t *cmd)
{
    int timeout = (int)json_integer_value(json_object_get(cmd, "timeout"));
    json_t *list = json_object_get(cmd, "msgs");
    json_t *one = json_object_get(cmd, "msg");
    size_t n = json_is_array(list) ? json_array_size(list) : (size_t)json_integer_value(json_object_get(cmd, "repeat"));
    struct amqp_out *msgs = calloc(n ? n : 1, sizeof *msgs);
    enum amqppub_outcome *outcome = calloc(n ? n : 1, sizeof *outcome);
    char(*ids)[64] = calloc(n ? n : 1, sizeof *ids);
    if (msgs == NULL || outcome == NULL || ids == NULL) {
        fprintf(stderr, "amqp_publish: out of memory\n");
        exit(3);
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_is_array(list) ? json_array_get(list, i) : one;
        const char *body = str(m, "body", "{}");
        msgs[i].exchange = str(m, "exchange", "");
        msgs[i].routing_key = str(m, "routingKey", "");
        msgs[i].body = body;
        msgs[i].body_len = strlen(body);
        msgs[i].topic = str(m, "topic", "t");
        msgs[i].attempt = (int)json_integer_value(json_object_get(m, "attempt"));
        if (json_is_array(list)) {
            msgs[i].id = str(m, "id", "");
        } else {
            snprintf(ids[i], sizeof ids[i], "%s-%zu", str(m, "id", "m"), i);
            msgs[i].id = ids[i];
        }
    }
    int64_t t0 = clock_mono_us();
    int rc = amqppub_publish_batch(p, msgs, (int)n, outcome, timeout);
    int64_t us = clock_mono_us() - t0;
    json_t *names = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(names, json_string(amqppub_outcome_name(outcome[i])));
    free(msgs);
    free(outcome);
    free(ids);
    return json_pack("{s:i, s:f, s:o, s:s, s:b}", "rc", rc, "ms", (double)us / 1000.0, "outcomes", names, "error",
                     amqppub_error(p), "connected", amqppub_connected(p));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: amqp_publish URL  (commands as JSON lines on stdin)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    log_level_set(LL_DEBUG);
    char err[256];
    struct amqppub *p = amqppub_new(argv[1], "hourglass-test", err, sizeof err);
    if (p == NULL) {
        fprintf(stderr, "amqp_publish: %s\n", err);
        return 2;
    }
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        json_error_t jerr;
        json_t *cmd = json_loads(line, 0, &jerr);
        if (cmd == NULL || !json_is_object(cmd)) {
            fprintf(stderr, "amqp_publish: bad command line: %s\n", cmd ? "not an object" : jerr.text);
            return 3;
        }
        const char *op = str(cmd, "op", "");
        if (strcmp(op, "publish") == 0) {
            answer(publish(p, cmd));
        } else if (strcmp(op, "connect") == 0) {
            int64_t t0 = clock_mono_us();
            int rc = amqppub_connect(p, (int)json_integer_value(json_object_get(cmd, "timeout")));
            int64_t us = clock_mono_us() - t0;
            answer(json_pack("{s:i, s:f, s:s, s:b}", "rc", rc, "ms", (double)us / 1000.0, "error", amqppub_error(p),
                             "connected", amqppub_connected(p)));
        } else {
            fprintf(stderr, "amqp_publish: unknown op '%s'\n", op);
            json_decref(cmd);
            return 3;
        }
        json_decref(cmd);
    }
    free(line);
    amqppub_free(p);
    return 0;
}
