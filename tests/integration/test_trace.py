"""W3C Trace Context (docs/api.md "Trace context"): the `traceparent` and `tracestate` of a push
(its headers, or a job object's own fields, which win) are kept with each job in Redis and
MySQL, shown in every job object, and handed to the consumer by every delivery route: long-poll
/get (count 1 and N), webhook (as headers), AMQP (as message headers). They survive a far job's
paging, /reStore after Redis is lost, a replace, a release and the dead list; a malformed
traceparent is ignored, never an error; each schedule fire starts a new trace. A job without
a context costs its Redis record nothing (the same ten values as before)."""

from __future__ import annotations

import json
import re
import time

from core_common import CoreTestCase, wait_until
from harness import shared_rabbitmq, unique_name
from receiver import WebhookReceiver
from test_hardening_common import key_to_id

TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TP2 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
TS = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
SHAPE = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")

# Malformed traceparents: every one ignored (200, the job stored without a context).
MALFORMED = [
    "",
    "garbage",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",       # no flags
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00",  # version 00 is exactly 55
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",     # uppercase
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",     # all-zero trace-id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",     # all-zero parent-id
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",     # version ff
    "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",     # version not hex
    "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",     # shifted fields
    "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",     # separators
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",     # flags not hex
    "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.x",   # later version, no '-' after
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" + "0" * 200,
]

# Every job record of a namespace: id key, the record re-packed by cmsgpack equals it (1/0), how
# many values it holds, and the last three as text (nil -> "nil").
RECORDS = """
local out = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  local h = redis.call('HGETALL', k)
  for i = 1, #h, 2 do
    local rec = h[i + 1]
    local v = {cmsgpack.unpack(rec)}
    local n = select('#', cmsgpack.unpack(rec))
    local same = cmsgpack.pack(cmsgpack.unpack(rec)) == rec and '1' or '0'
    out[#out + 1] = h[i] .. '|' .. same .. '|' .. n .. '|' .. tostring(v[11]) .. '|' .. tostring(v[12]) .. '|' ..
        tostring(v[13])
  end
end
return out
"""


def trace_of(job: dict) -> tuple:
    return job["traceparent"], job["tracestate"]


class TraceCase(CoreTestCase):
    def push_traced(self, d, jobs, traceparent=TP, tracestate=TS):
        headers = {}
        if traceparent is not None:
            headers["traceparent"] = traceparent
        if tracestate is not None:
            headers["tracestate"] = tracestate
        return self.assertJsonOk(d.push(jobs, headers=headers))

    def row_trace(self, d, jid: str) -> tuple:
        rows = d.namespace.query(f"SELECT traceparent, tracestate FROM message WHERE id = {jid}")
        self.assertEqual(len(rows), 1, f"the message row of {jid}")
        return rows[0]


class TraceRoundTripTest(TraceCase):
    def test_get_one_and_many_inspect_and_mysql(self):
        d = self.daemon()
        one = self.push_traced(d, {"topic": "tr.get", "body": 1})["id"]
        plain = self.assertJsonOk(d.push({"topic": "tr.get", "body": 2}))["id"]
        got = self.get_one(d, "tr.get")
        self.assertEqual((got["id"], trace_of(got)), (one, (TP, TS)))
        got = self.get_one(d, "tr.get")
        self.assertEqual((got["id"], trace_of(got)), (plain, (None, None)))  # always present, null

        ids = self.push_traced(d, [{"topic": "tr.many", "body": i} for i in range(5)])["ids"]
        many = self.assertJsonOk(d.get("tr.many", timeout=2, count=5))
        self.assertEqual(sorted(j["id"] for j in many), sorted(ids))
        for j in many:
            self.assertEqual(trace_of(j), (TP, TS))
        for jid in ids + [one]:
            self.assertEqual(trace_of(self.inspect(d, jid)), (TP, TS))
        self.assertEqual(trace_of(self.inspect(d, plain)), (None, None))
        wait_until(lambda: self.journal_idle(d), 10)
        self.assertEqual(self.row_trace(d, one), (TP, TS))
        self.assertEqual(self.row_trace(d, plain), (None, None))

    def test_own_fields_win_over_the_headers(self):
        d = self.daemon()
        ids = self.push_traced(d, [
            {"topic": "tr.own", "body": 0},                                            # the headers'
            {"topic": "tr.own", "body": 1, "traceparent": TP2},                          # its own, no state
            {"topic": "tr.own", "body": 2, "traceparent": TP2, "tracestate": "own=1"},   # its own pair
            {"topic": "tr.own", "body": 3, "traceparent": "nonsense", "tracestate": "own=2"},  # ignored
            {"topic": "tr.own", "body": 4, "tracestate": "own=3"},                       # a state alone
        ])["ids"]
        want = [(TP, TS), (TP2, None), (TP2, "own=1"), (TP, TS), (TP, TS)]
        for jid, w in zip(ids, want):
            self.assertEqual(trace_of(self.inspect(d, jid)), w, jid)
        # without headers, a job's own fields alone
        jid = self.assertJsonOk(d.push({"topic": "tr.own", "traceparent": TP2, "tracestate": "a=b"}))["id"]
        self.assertEqual(trace_of(self.inspect(d, jid)), (TP2, "a=b"))
        wait_until(lambda: self.journal_idle(d), 10)
        for jid, w in zip(ids, want):
            self.assertEqual(self.row_trace(d, jid), w, jid)

    def test_malformed_is_ignored_never_an_error(self):
        d = self.daemon()
        for bad in MALFORMED:
            r = d.push({"topic": "tr.bad", "body": bad}, headers={"traceparent": bad, "tracestate": "a=1"})
            jid = self.assertJsonOk(r)["id"]
            self.assertEqual(trace_of(self.inspect(d, jid)), (None, None), f"header {bad!r}")
            r = d.push({"topic": "tr.bad", "traceparent": bad, "tracestate": "a=1"})
            jid = self.assertJsonOk(r)["id"]
            self.assertEqual(trace_of(self.inspect(d, jid)), (None, None), f"field {bad!r}")
        # not a string at all: ignored too
        for value in (55, None, True, [TP], {"v": TP}):
            jid = self.assertJsonOk(d.push({"topic": "tr.bad", "traceparent": value}))["id"]
            self.assertEqual(trace_of(self.inspect(d, jid)), (None, None), repr(value))
        # a bad tracestate alone is dropped; its traceparent kept
        for bad_state in ("K=1", "a=1\x7f", "x" * 600, "novalue", "a=" + "v" * 300):
            jid = self.push_traced(d, {"topic": "tr.bad"}, tracestate=bad_state)["id"]
            self.assertEqual(trace_of(self.inspect(d, jid)), (TP, None), repr(bad_state))
        # a later version is read by its first 55 characters (forward compatibility)
        later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        jid = self.push_traced(d, {"topic": "tr.bad"}, traceparent=later + "-future-fields")["id"]
        self.assertEqual(trace_of(self.inspect(d, jid)), (later, TS))
        wait_until(lambda: self.journal_idle(d), 10)
        self.assertEqual(d.namespace.query("SELECT COUNT(*) FROM message WHERE topic = 'tr.bad' AND "
                                           "traceparent IS NULL AND tracestate IS NOT NULL"), [("0",)])

    def test_absent_costs_the_record_nothing(self):
        """A job without a context has the ten-value record it always had; one with a context
        adds its values after the body (nil standing for no backoff), each cmsgpack's own."""
        d = self.daemon()
        plain = self.assertJsonOk(d.push({"topic": "tr.rec", "body": 1}))["id"]
        biz = self.assertJsonOk(d.push({"topic": "tr.rec", "body": 1, "bizKey": "b1"}))["id"]
        traced = self.push_traced(d, {"topic": "tr.rec", "body": 2})["id"]
        traced_biz = self.push_traced(d, {"topic": "tr.rec", "body": 2, "bizKey": "b2", "backoff": 5},
                                      tracestate=None)["id"]
        out = d.namespace.redis_cli("EVAL", RECORDS, "0", d.namespace.prefix + ":{*}:jobs", timeout=10)
        records = {}
        for line in filter(None, out.split("\n")):
            key, same, n, v11, v12, v13 = line.split("|")
            records[key_to_id(key)] = (same, int(n), v11, v12, v13)
        self.assertEqual(records[plain], ("1", 10, "nil", "nil", "nil"))
        self.assertEqual(records[biz], ("1", 10, "nil", "nil", "nil"))
        self.assertEqual(records[traced], ("1", 13, "nil", TP, TS))
        self.assertEqual(records[traced_biz], ("1", 12, "5", TP, "nil"))


class TraceDeliveryTest(TraceCase):
    def test_webhook_sends_the_headers(self):
        rcv = WebhookReceiver()
        self.addCleanup(rcv.close)
        d = self.daemon()
        self.assertJsonOk(d.request("PUT", "/topics/tr.wh", body={"deliver": {"webhook": rcv.url()}}))
        time.sleep(0.6)
        traced = self.push_traced(d, {"topic": "tr.wh", "body": 1})["id"]
        alone = self.push_traced(d, {"topic": "tr.wh", "body": 2}, traceparent=TP2, tracestate=None)["id"]
        plain = self.assertJsonOk(d.push({"topic": "tr.wh", "body": 3}))["id"]
        wait_until(lambda: len(rcv.snapshot()) >= 3, 15)
        hits = {h.headers["hourglass-id"]: h for h in rcv.snapshot()}
        self.assertEqual(set(hits), {traced, alone, plain})
        self.assertEqual((hits[traced].headers.get("traceparent"), hits[traced].headers.get("tracestate")), (TP, TS))
        self.assertEqual(trace_of(hits[traced].body), (TP, TS))
        self.assertEqual((hits[alone].headers.get("traceparent"), hits[alone].headers.get("tracestate")), (TP2, None))
        self.assertEqual(trace_of(hits[alone].body), (TP2, None))
        self.assertNotIn("traceparent", hits[plain].headers)
        self.assertNotIn("tracestate", hits[plain].headers)
        self.assertEqual(trace_of(hits[plain].body), (None, None))

    def test_amqp_sends_message_headers(self):
        broker = shared_rabbitmq()
        q, ex = unique_name("q"), unique_name("ex")
        broker.declare(q, exchange=ex, routing_key="jobs")
        d = self.start_daemon({"amqp": {"url": broker.url, "timeout": 3000}})
        self.wait_healthy(d)
        self.assertJsonOk(d.request("PUT", "/topics/tr.amqp",
                                    body={"deliver": {"amqp": {"exchange": ex, "routingKey": "jobs"}}}))
        time.sleep(0.6)
        traced = self.push_traced(d, [{"topic": "tr.amqp", "body": i} for i in range(3)])["ids"]
        plain = self.assertJsonOk(d.push({"topic": "tr.amqp", "body": 9}))["id"]
        wait_until(lambda: broker.count(q) >= 4, 20)
        msgs = {p.message_id: (p.headers, json.loads(raw)) for _, p, raw in broker.get_all(q)}
        self.assertEqual(set(msgs), set(traced) | {plain})
        for jid in traced:
            headers, body = msgs[jid]
            self.assertEqual((headers.get("traceparent"), headers.get("tracestate")), (TP, TS))
            self.assertEqual(trace_of(body), (TP, TS))
        headers, body = msgs[plain]
        self.assertNotIn("traceparent", headers)
        self.assertNotIn("tracestate", headers)
        self.assertEqual(trace_of(body), (None, None))


class TraceKeptTest(TraceCase):
    def test_far_job_pages_in_with_it(self):
        d = self.daemon(horizon=2000)
        jid = self.push_traced(d, {"topic": "tr.far", "body": 1, "delay": 4000})["id"]
        far = self.inspect(d, jid)
        self.assertEqual((far.get("tier"), trace_of(far)), ("mysql", (TP, TS)))
        got = self.get_one(d, "tr.far", timeout=10)
        self.assertEqual((got["id"], trace_of(got)), (jid, (TP, TS)))

    def test_restore_after_redis_loss_and_lookup(self):
        d = self.daemon()
        near = self.push_traced(d, {"topic": "tr.rs", "body": 1, "delay": 60000})["id"]
        keyed = self.push_traced(d, {"topic": "tr.rs", "body": 2, "delay": 60000, "bizKey": "k1"},
                                 traceparent=TP2, tracestate=None)["id"]
        plain = self.assertJsonOk(d.push({"topic": "tr.rs", "body": 3, "delay": 60000}))["id"]
        wait_until(lambda: self.journal_idle(d), 10)
        self.assertGreater(d.namespace.flush_redis(), 0)
        res = self.assertJsonOk(d.restore(expire=True, timeout=60))
        self.assertEqual(res["restored"], 3, res)
        inspected = {j: self.inspect(d, j) for j in (near, keyed, plain)}
        for j in inspected.values():
            self.assertNotIn("tier", j)  # back in Redis
        self.assertEqual(trace_of(inspected[near]), (TP, TS))
        self.assertEqual(trace_of(inspected[keyed]), (TP2, None))
        self.assertEqual(trace_of(inspected[plain]), (None, None))
        found = self.assertJsonOk(d.request("GET", "/jobs", params={"topic": "tr.rs", "bizKey": "k1"}))
        self.assertEqual((found["id"], trace_of(found)), (keyed, (TP2, None)))
        # and delivered with it, straight from the restored record
        self.assertJsonOk(d.reschedule(near, delay=0))
        got = self.get_one(d, "tr.rs")
        self.assertEqual((got["id"], trace_of(got)), (near, (TP, TS)))

    def test_single_restore_from_mysql(self):
        d = self.daemon()
        jid = self.push_traced(d, {"topic": "tr.one", "body": 1, "delay": 60000})["id"]
        wait_until(lambda: self.journal_idle(d), 10)
        d.namespace.flush_redis()
        r = self.assertJsonOk(d.request("GET", f"/reStore/{jid}"))
        self.assertTrue(r["restored"], r)
        self.assertEqual(trace_of(self.inspect(d, jid)), (TP, TS))

    def test_replace_release_retry_and_dead_keep_or_take_it(self):
        d = self.daemon(default_ttr=1000)
        jid = self.push_traced(d, {"topic": "tr.rep", "body": 1, "delay": 60000, "bizKey": "x"})["id"]
        # a replace takes the replacing push's context, in Redis and in MySQL
        r = self.push_traced(d, {"topic": "tr.rep", "body": 2, "delay": 60000, "bizKey": "x", "replace": True},
                             traceparent=TP2, tracestate="r=2")
        self.assertEqual((r["id"], r.get("replaced")), (jid, True))
        self.assertEqual(trace_of(self.inspect(d, jid)), (TP2, "r=2"))
        wait_until(lambda: self.journal_idle(d) and self.row_trace(d, jid) == (TP2, "r=2"), 10)
        # a replace without one leaves the job without one
        self.assertJsonOk(d.push({"topic": "tr.rep", "body": 3, "bizKey": "x", "replace": True, "tries": 2}))
        self.assertEqual(trace_of(self.inspect(d, jid)), (None, None))
        wait_until(lambda: self.journal_idle(d) and self.row_trace(d, jid) == (None, None), 10)

        # a release, a lease that runs out, the dead list and a requeue keep it
        kid = self.push_traced(d, {"topic": "tr.rel", "body": 1, "tries": 2})["id"]
        got = self.get_one(d, "tr.rel")
        self.assertJsonOk(d.release(kid, delay=0))
        got = self.get_one(d, "tr.rel")
        self.assertEqual((got["id"], got["attempt"], trace_of(got)), (kid, 2, (TP, TS)))
        self.wait_state(d, kid, "dead", timeout=10)  # its lease ran out on its last try
        dead = self.assertJsonOk(d.dead("tr.rel"))["jobs"]
        self.assertEqual([(j["id"], trace_of(j)) for j in dead], [(kid, (TP, TS))])
        listed = self.assertJsonOk(d.request("GET", "/topics/tr.rel/jobs", params={"state": "dead"}))["jobs"]
        self.assertEqual([(j["id"], trace_of(j)) for j in listed], [(kid, (TP, TS))])
        self.assertJsonOk(d.request("GET", f"/reStore/{kid}"))  # requeues a dead job
        got = self.get_one(d, "tr.rel")
        self.assertEqual((got["id"], trace_of(got)), (kid, (TP, TS)))


    def test_purged_and_rescheduled_jobs_keep_it(self):
        d = self.daemon()
        ids = self.push_traced(d, [{"topic": "tr.pg", "body": i, "delay": 60000} for i in range(3)])["ids"]
        self.assertJsonOk(d.reschedule(ids[0], delay=120000))
        self.assertEqual(trace_of(self.inspect(d, ids[0])), (TP, TS))
        r = self.assertJsonOk(d.request("POST", "/topics/tr.pg/purge", params={"state": "delayed"}))
        self.assertEqual(r["deleted"], 3)
        wait_until(lambda: self.journal_idle(d), 10)
        for jid in ids:  # from MySQL now
            j = self.inspect(d, jid)
            self.assertEqual((j["state"], trace_of(j)), ("deleted", (TP, TS)))


class TraceScheduleTest(TraceCase):
    def test_each_fire_starts_a_new_trace(self):
        d = self.daemon()
        self.assertJsonOk(d.request("POST", "/schedules", body={"topic": "tr.sch", "every": 1000, "job": {"body": 1}}))
        seen = []
        deadline = time.time() + 15
        while len(seen) < 3 and time.time() < deadline:
            r = d.get("tr.sch", timeout=3)
            if r.status == 200:
                seen.append(self.assertJsonOk(r))
        self.assertEqual(len(seen), 3, "three fires within 15 s")
        for j in seen:
            self.assertRegex(j["traceparent"], SHAPE)
            self.assertTrue(j["traceparent"].startswith("00-") and j["traceparent"].endswith("-01"), j)  # sampled
            self.assertIsNone(j["tracestate"])
        self.assertEqual(len({j["traceparent"][3:35] for j in seen}), 3, "a trace-id of its own per fire")
        self.assertEqual(len({j["traceparent"][36:52] for j in seen}), 3)
        # a template cannot give every fire one trace
        r = d.request("POST", "/schedules", body={"topic": "tr.sch", "every": 1000, "job": {"traceparent": TP}})
        self.assertError(r, 400, "bad_request", "job.traceparent")
