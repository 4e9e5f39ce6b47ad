"""Black-box tests of every core endpoint of hourglassd against real Redis and MariaDB.

    make integration T=test_core_api
"""

import json
import re
import socket
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

from core_common import CoreTestCase, RedisMonitor, now_ms
from harness import topics_one_per_shard, wait_until


class PushTest(CoreTestCase):
    def test_push_single_answers_id_and_run_at(self):
        d = self.daemon()
        t0 = now_ms()
        r = d.push({"topic": "t", "body": {"x": [1, "two", None, True]}})
        t1 = now_ms()
        obj = self.assertJsonOk(r)
        self.assertEqual(set(obj), {"id", "runAt"}, obj)
        self.assertIsInstance(obj["id"], str)
        self.assertRegex(obj["id"], r"^[1-9][0-9]*$")
        self.assertLess(int(obj["id"]), 2 ** 64)
        self.assertTrue(t0 <= obj["runAt"] <= t1 + 1, (t0, obj["runAt"], t1))
        job = self.inspect(d, obj["id"])
        self.assertEqual(job["id"], obj["id"])
        self.assertEqual(job["topic"], "t")
        self.assertEqual(job["state"], "ready")
        self.assertEqual(job["body"], {"x": [1, "two", None, True]})
        self.assertEqual(job["priority"], 5)
        self.assertEqual(job["ttr"], 30000)
        self.assertEqual(job["tries"], 3)
        self.assertEqual(job["attempt"], 0)
        self.assertEqual(job["runAt"], obj["runAt"])

    def test_body_is_returned_as_the_same_json_value(self):
        d = self.daemon()
        bodies = [None, 0, -12345678901234, 1.5, "text with \"quotes\" and \u00e9\u4e2d\U0001F600",
                  [], {}, [1, {"a": [None]}], {"nested": {"deep": {"list": [1, 2, 3]}}}, True, False]
        ids = [self.push(d, "bodies", b) for b in bodies]
        for id, b in zip(ids, bodies):
            self.assertEqual(self.inspect(d, id)["body"], b)
        got = [self.get_one(d, "bodies") for _ in bodies]
        self.assertEqual({j["id"]: j["body"] for j in got}, dict(zip(ids, bodies)))

    def test_push_defaults_and_explicit_fields(self):
        d = self.daemon()
        id = self.push(d, "t", "b", priority=1, ttr=4000, tries=7, delay=60000, bizKey="order-17")
        job = self.inspect(d, id)
        self.assertEqual((job["priority"], job["ttr"], job["tries"], job["state"]),
                         (1, 4000, 7, "delayed"))
        self.assertEqual(job.get("bizKey"), "order-17", job)

    def test_ids_are_unique_and_time_ordered_strings(self):
        d = self.daemon()
        ids = []
        for _ in range(20):
            ids.append(self.push(d, "t", None))
        r = d.push([{"topic": "t"} for _ in range(50)])
        ids += self.assertJsonOk(r)["ids"]
        self.assertEqual(len(set(ids)), 70)
        first = [int(i) for i in ids[:20]]
        self.assertEqual(first, sorted(first), "ids of successive pushes should increase (time-ordered)")

    def test_push_array_answers_ids_in_order(self):
        d = self.daemon()
        jobs = [{"topic": f"arr{i % 3}", "body": {"i": i}, "priority": i % 10} for i in range(25)]
        obj = self.assertJsonOk(d.push(jobs))
        self.assertEqual(set(obj), {"ids"}, obj)
        ids = obj["ids"]
        self.assertEqual(len(ids), 25)
        self.assertEqual(len(set(ids)), 25)
        for i, id in enumerate(ids):
            self.assertIsInstance(id, str)
            job = self.inspect(d, id)
            self.assertEqual((job["topic"], job["body"], job["priority"]),
                             (f"arr{i % 3}", {"i": i}, i % 10), f"ids[{i}]")
        self.assertCounts(d, "arr0", ready=9)
        self.assertCounts(d, "arr1", ready=8)
        self.assertCounts(d, "arr2", ready=8)

    def test_push_array_of_max_batch_is_accepted(self):
        d = self.daemon()
        obj = self.assertJsonOk(d.push([{"topic": "big", "body": i} for i in range(1000)]))
        self.assertEqual(len(obj["ids"]), 1000)
        self.assertEqual(len(set(obj["ids"])), 1000)
        self.assertCounts(d, "big", ready=1000)

    def test_push_array_is_all_or_nothing(self):
        d = self.daemon()
        good = {"topic": "aon", "body": 1}
        for bad in ({"topic": "aon", "priority": 10}, {"topic": ""}, {"body": 1},
                    {"topic": "aon", "bogus": 1}, 7):
            self.assertError(d.push([good, good, bad, good]), 400, "bad_request", f"bad element {bad!r}")
        self.assertCounts(d, "aon")
        self.assertNothing(d, "aon")
        self.assertEqual(d.namespace.query("SELECT COUNT(*) FROM message WHERE state <> 'aborted'"), [("0",)])

    def test_run_at_in_the_future_and_in_the_past(self):
        d = self.daemon()
        at = now_ms() + 60000
        r = self.assertJsonOk(d.push({"topic": "t", "runAt": at}))
        self.assertEqual(r["runAt"], at)
        self.assertEqual(self.state(d, r["id"]), "delayed")
        past = self.assertJsonOk(d.push({"topic": "t", "runAt": now_ms() - 3600000}))
        self.assertEqual(self.state(d, past["id"]), "ready")
        self.assertEqual(self.get_one(d, "t", timeout=0)["id"], past["id"])

    def test_delay_sets_run_at(self):
        d = self.daemon()
        t0 = now_ms()
        r = self.assertJsonOk(d.push({"topic": "t", "delay": 45000}))
        t1 = now_ms()
        self.assertTrue(t0 + 45000 <= r["runAt"] <= t1 + 45000 + 1, (t0, r, t1))
        self.assertEqual(self.state(d, r["id"]), "delayed")
        self.assertCounts(d, "t", delayed=1)


class JobRecordTest(CoreTestCase):
    """A new job without a bizKey reaches Redis with a record the daemon encoded
    (src/core/jobpack.c) and push.lua stores as it is; every script reads it with cmsgpack.unpack.
    Each record must be exactly what Redis's cmsgpack.pack writes for its fields (so the
    scripts' own records and these are interchangeable) and hold the pushed values."""

    # every job record of a namespace: id key, the record re-packed by cmsgpack equals it
    # (1/0), and its ten fields as JSON
    RECORDS = """
local out = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  local h = redis.call('HGETALL', k)
  for i = 1, #h, 2 do
    local rec = h[i + 1]
    local same = cmsgpack.pack(cmsgpack.unpack(rec)) == rec and '1' or '0'
    out[#out + 1] = h[i] .. ' ' .. same .. ' ' .. cjson.encode({cmsgpack.unpack(rec)})
  end
end
return out
"""

    def test_records_are_what_cmsgpack_writes(self):
        from test_hardening_common import key_to_id
        d = self.daemon(max_ttr=7 * 86400000, max_tries=100000)
        cases = [  # (fields, the body's JSON text in the record)
            ({"body": None}, "null"),
            ({"body": "a" * 29, "priority": 0, "ttr": 1, "tries": 1}, '"' + "a" * 29 + '"'),  # fixstr
            ({"body": "b" * 30, "priority": 9, "ttr": 127, "tries": 127}, '"' + "b" * 30 + '"'),  # str8
            ({"body": "c" * 253, "ttr": 128, "tries": 128, "delay": 60000}, '"' + "c" * 253 + '"'),
            ({"body": "d" * 254, "ttr": 65536, "tries": 65535, "delay": 60000}, '"' + "d" * 254 + '"'),  # str16
            ({"body": ["e" * 40000], "ttr": 7 * 86400000, "tries": 100000, "delay": 3600000},
             '["' + "e" * 40000 + '"]'),
            ({"body": {"k": 1}, "bizKey": "order-1", "delay": 60000}, '{"k":1}'),  # packed by push.lua
        ]
        pushed = {}
        for fields, body_text in cases:
            r = self.assertJsonOk(d.push({"topic": "rec.t", **fields}))
            pushed[r["id"]] = (fields, body_text, r["runAt"])

        out = d.namespace.redis_cli("EVAL", self.RECORDS, "0", d.namespace.prefix + ":{*}:jobs", timeout=10)
        records = {}
        for line in filter(None, out.split("\n")):
            key, same, fields_json = line.split(" ", 2)
            records[key_to_id(key)] = (same, json.loads(fields_json))
        self.assertEqual(set(records), set(pushed))
        for job_id, (fields, body_text, run_at) in pushed.items():
            same, rec = records[job_id]
            self.assertEqual(same, "1", f"job {job_id} ({fields}): not cmsgpack's own bytes")
            state = 1 if fields.get("delay") else 2
            want = [1, state, 0, fields.get("priority", 5), fields.get("ttr", 30000), fields.get("tries", 3),
                    run_at, "rec.t", fields.get("bizKey", ""), body_text]
            self.assertEqual(rec, want, f"job {job_id} ({fields})")
            self.assertEqual(self.inspect(d, job_id)["body"], fields["body"])


class MoverWakeTest(CoreTestCase):
    """push.lua tells the movers when a push puts a shard's earliest delayed entry in place
    ("<shard> <due>" on <prefix>:wake), so the owner wakes before its planned time: once per
    call, for the earliest entry after the call, whichever path (plain job or bizKey) added
    it; a push behind the current head publishes nothing. Watched with SUBSCRIBE."""

    MESSAGE = re.compile(rb"\*3\r\n\$7\r\nmessage\r\n\$\d+\r\n[^\r]*\r\n\$\d+\r\n(\d+) (\d+)\r\n")

    def test_wake_is_published_for_a_new_head_only_once_per_call(self):
        ns = self.namespace()
        d = self.start_daemon(namespace=ns)
        self.wait_healthy(d)
        sub = socket.create_connection(("127.0.0.1", ns.redis.port))
        self.addCleanup(sub.close)
        channel = f"{ns.prefix}:wake".encode()
        sub.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n" % (len(channel), channel))
        buf = b""

        def wakes(settle: float = 0.5) -> list[int]:
            """The due times published since the last call (after `settle` seconds of quiet)."""
            nonlocal buf
            deadline = time.monotonic() + settle
            while time.monotonic() < deadline:
                sub.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    chunk = sub.recv(65536)
                except socket.timeout:
                    break
                buf += chunk
            found = [int(m.group(2)) for m in self.MESSAGE.finditer(buf)]
            buf = b""
            return found

        wakes()  # the subscription's confirmation

        def push(jobs):
            obj = self.assertJsonOk(d.push(jobs))
            ids = obj["ids"] if "ids" in obj else [obj["id"]]
            return [self.inspect(d, i)["runAt"] for i in ids]

        [a] = push({"topic": "w", "delay": 60000})
        self.assertEqual(wakes(), [a], "the first delayed job of an empty shard is its head")
        push({"topic": "w", "delay": 120000})
        self.assertEqual(wakes(), [], "a job behind the head wakes nobody")
        [c] = push({"topic": "w", "delay": 30000})
        self.assertEqual(wakes(), [c])
        # one call, three jobs, two of them earlier than the head in turn: one message, the
        # earliest entry after the call
        _, e, _ = push([{"topic": "w", "delay": 20000}, {"topic": "w", "delay": 10000},
                        {"topic": "w", "delay": 50000}])
        self.assertEqual(wakes(), [e])
        # the bizKey path counts as well
        [g] = push({"topic": "w", "delay": 5000, "bizKey": "wake-g"})
        self.assertEqual(wakes(), [g])


class PushBatchingTest(CoreTestCase):
    """Pushes whose rows one journal cycle committed go to Redis together: on a single Redis,
    one push.lua call for every shard they are on (api_push.c), a run of jobs a shard, each job
    with its own request's clock, in commit order. Watched with Redis MONITOR: every job reaches
    Redis exactly once, calls carry several requests' jobs and several shards, and each job's
    state in Redis is the one its committed row says."""

    def test_pushes_committed_together_share_one_call(self):
        ns = self.namespace()
        d = self.start_daemon(namespace=ns)
        self.wait_healthy(d)
        topics = topics_one_per_shard("batch")

        # 40 clients x 5 pushes: half due now (ready), half in 10 minutes (delayed), on the 8
        # shards; every fifth is an array of three jobs on three shards (one request, answered
        # once, whose jobs are in three runs of one call)
        def client(c: int) -> list[tuple[str, str, int]]:
            out = []
            for k in range(5):
                delay = 0 if (c + k) % 2 == 0 else 600000
                state = "ready" if delay == 0 else "delayed"
                if k == 4:
                    shards = [(c + m) % 8 for m in range(3)]
                    r = d.push([{"topic": topics[s], "body": [c, k, m], "delay": delay} for m, s in enumerate(shards)])
                    self.assertStatus(r, 200, f"array push {c}")
                    out.extend((i, state, s) for i, s in zip(r.json()["ids"], shards))
                    continue
                shard = (c * 5 + k) % 8
                r = d.push({"topic": topics[shard], "body": [c, k], "delay": delay})
                self.assertStatus(r, 200, f"push {c}/{k}")
                out.append((r.json()["id"], state, shard))
            return out

        with RedisMonitor(ns.redis.port, full=True) as mon, ThreadPoolExecutor(40) as pool:
            pushed = [job for jobs in pool.map(client, range(40)) for job in jobs]

        calls = mon.push_calls(ns.prefix)
        self.assertGreater(len(calls), 0, "MONITOR saw no push.lua call (is the script's sha computed right?)")
        jobs = [sum(n for _, n in call) for call in calls]
        self.assertEqual(sum(jobs), len(pushed), f"every job reaches Redis exactly once: calls {calls}")
        per_shard = {s: sum(n for call in calls for t, n in call if t == s) for s in range(8)}
        self.assertEqual(per_shard, {s: sum(1 for *_, t in pushed if t == s) for s in range(8)}, calls)
        self.assertLess(len(calls), len(pushed), f"no call carried more than one request's job: {calls}")
        self.assertGreater(max(jobs), 1, calls)
        self.assertGreater(max(len(call) for call in calls), 1, f"no call carried more than one shard: {calls}")
        for call in calls:
            shards = [s for s, _ in call]
            self.assertEqual(shards, sorted(set(shards)), f"a call names each shard once, in order: {call}")
            self.assertTrue(all(n > 0 for _, n in call), call)

        # each job is where its own request's clock put it, in Redis and in MySQL alike
        for job_id, state, _ in pushed:
            self.assertEqual(self.state(d, job_id), state, job_id)
        rows = dict(ns.query("SELECT id, state FROM message WHERE topic LIKE 'batch%'"))
        self.assertEqual(rows, {job_id: state for job_id, state, _ in pushed})


class PushCallCapTest(CoreTestCase):
    """However many pushes one journal cycle commits, one push.lua call carries at most 1,000
    jobs (api_push.c, PUSH_CALL_MAX): Redis runs one script at a time, so an unbounded call
    would hold every other client for as long as it takes. A push whose jobs straddle a cut
    is answered once, after both calls."""

    def test_no_push_call_carries_more_than_1000_jobs(self):
        ns = self.namespace()
        d = self.start_daemon(namespace=ns)
        self.wait_healthy(d)
        topics = topics_one_per_shard("capped")[:2]

        # 8 concurrent arrays of 700 jobs on two topics (two shards): the journal commits the
        # ones that queue behind the first together, so one drain holds several thousand, and
        # calls are cut inside a shard's run as well as between shards
        def push(c: int) -> list[str]:
            jobs = [{"topic": topics[c % 2], "body": [c, k], "delay": 600000} for k in range(700)]
            r = d.push(jobs)
            self.assertStatus(r, 200, f"array push {c}")
            ids = r.json()["ids"]
            self.assertEqual(len(ids), 700)
            return ids

        with RedisMonitor(ns.redis.port, full=True) as mon, ThreadPoolExecutor(8) as pool:
            pushed = [i for ids in pool.map(push, range(8)) for i in ids]

        jobs = [sum(n for _, n in call) for call in mon.push_calls(ns.prefix)]
        self.assertEqual(sum(jobs), len(pushed), f"every job reaches Redis exactly once: calls {jobs}")
        self.assertLessEqual(max(jobs), 1000, f"a push.lua call carried more than 1000 jobs: {jobs}")
        for topic in topics:
            self.assertCounts(d, topic, delayed=len(pushed) // 2)
        rows = ns.query("SELECT state, COUNT(*) FROM message WHERE topic LIKE 'capped%' GROUP BY state")
        self.assertEqual(dict((s, int(n)) for s, n in rows), {"delayed": len(pushed)})


class BizKeyTest(CoreTestCase):
    def test_duplicate_bizkey_answers_the_same_id(self):
        d = self.daemon()
        first = self.assertJsonOk(d.push({"topic": "t", "bizKey": "k1", "body": "first", "delay": 60000}))
        self.assertNotIn("duplicate", first)
        again = self.assertJsonOk(d.push({"topic": "t", "bizKey": "k1", "body": "second"}))
        self.assertEqual(again["id"], first["id"])
        self.assertIs(again.get("duplicate"), True, again)
        job = self.inspect(d, first["id"])
        self.assertEqual((job["body"], job["state"], job["runAt"]), ("first", "delayed", first["runAt"]))
        self.assertCounts(d, "t", delayed=1)
        # same bizKey on another topic is another job
        other = self.assertJsonOk(d.push({"topic": "u", "bizKey": "k1"}))
        self.assertNotEqual(other["id"], first["id"])
        self.assertNotIn("duplicate", other)

    def test_concurrent_pushes_of_one_bizkey_make_one_job(self):
        # Requests committed in one journal cycle reach Redis in one call (PushBatchingTest):
        # the dedupe must hold between them as between separate calls.
        ns = self.namespace()
        d = self.start_daemon(namespace=ns)
        self.wait_healthy(d)

        def push(c: int) -> dict:
            return self.assertJsonOk(d.push({"topic": "t", "bizKey": "once", "body": c, "delay": 60000}))

        with ThreadPoolExecutor(30) as pool:
            answers = list(pool.map(push, range(30)))
        self.assertEqual(len({a["id"] for a in answers}), 1, answers)
        firsts = [c for c, a in enumerate(answers) if not a.get("duplicate")]
        self.assertEqual(len(firsts), 1, f"exactly one push creates the job: {answers}")
        job = self.inspect(d, answers[0]["id"])
        self.assertEqual((job["body"], job["state"]), (firsts[0], "delayed"))
        self.assertCounts(d, "t", delayed=1)
        # the duplicates' rows stand for no job: marked aborted (journaled after the answers)
        def states() -> list:
            return sorted(state for (state,) in ns.query("SELECT state FROM message WHERE biz_key = 'once'"))
        wait_until(lambda: states() == ["aborted"] * 29 + ["delayed"], 10, 0.1,
                   "29 aborted rows and one delayed")

    def test_duplicate_inside_one_array(self):
        d = self.daemon()
        obj = self.assertJsonOk(d.push([{"topic": "t", "bizKey": "same", "body": 1},
                                        {"topic": "t", "bizKey": "same", "body": 2},
                                        {"topic": "t", "bizKey": "other", "body": 3}]))
        ids = obj["ids"]
        self.assertEqual(ids[0], ids[1])
        self.assertNotEqual(ids[0], ids[2])
        self.assertCounts(d, "t", ready=2)
        self.assertEqual(self.inspect(d, ids[0])["body"], 1)

    def test_duplicate_while_reserved_and_free_after_finish(self):
        d = self.daemon()
        id = self.push(d, "t", 1, bizKey="k")
        job = self.get_one(d, "t")
        self.assertEqual(job["id"], id)
        dup = self.assertJsonOk(d.push({"topic": "t", "bizKey": "k", "body": 2}))
        self.assertEqual((dup["id"], dup.get("duplicate")), (id, True))
        self.assertJsonOk(d.finish(id))
        fresh = self.assertJsonOk(d.push({"topic": "t", "bizKey": "k", "body": 3}))
        self.assertNotEqual(fresh["id"], id, "a finished job no longer holds its bizKey")
        self.assertNotIn("duplicate", fresh)

    def test_bizkey_is_free_after_delete(self):
        d = self.daemon()
        id = self.push(d, "t", 1, bizKey="k", delay=60000)
        self.assertJsonOk(d.delete(id))
        fresh = self.assertJsonOk(d.push({"topic": "t", "bizKey": "k"}))
        self.assertNotEqual(fresh["id"], id)
        self.assertNotIn("duplicate", fresh)

    def test_replace_reschedules_a_delayed_holder(self):
        d = self.daemon()
        id = self.push(d, "t", "old", bizKey="k", delay=60000, priority=7)
        t0 = now_ms()
        r = self.assertJsonOk(d.push({"topic": "t", "bizKey": "k", "replace": True, "body": "new",
                                      "delay": 0, "priority": 2}))
        self.assertEqual(r["id"], id, "replace acts on the live holder")
        self.assertGreaterEqual(r["runAt"], t0)
        self.assertLess(r["runAt"], t0 + 5000)
        job = self.get_one(d, "t", timeout=2)
        self.assertEqual((job["id"], job["body"], job["priority"]), (id, "new", 2))
        self.assertCounts(d, "t", reserved=1)

    def test_replace_reschedules_a_ready_holder(self):
        d = self.daemon()
        id = self.push(d, "t", "old", bizKey="k")
        at = now_ms() + 60000
        r = self.assertJsonOk(d.push({"topic": "t", "bizKey": "k", "replace": True, "runAt": at, "body": "new"}))
        self.assertEqual((r["id"], r["runAt"]), (id, at))
        job = self.inspect(d, id)
        self.assertEqual((job["state"], job["runAt"], job["body"]), ("delayed", at, "new"))
        self.assertNothing(d, "t")
        self.assertCounts(d, "t", delayed=1)

    def test_replace_without_holder_pushes_a_new_job(self):
        d = self.daemon()
        r = self.assertJsonOk(d.push({"topic": "t", "bizKey": "nobody", "replace": True, "body": 1}))
        self.assertEqual(self.state(d, r["id"]), "ready")
        self.assertNotIn("duplicate", r)

    def test_replace_of_a_reserved_holder_is_409(self):
        d = self.daemon()
        id = self.push(d, "t", "old", bizKey="k")
        self.assertEqual(self.get_one(d, "t")["id"], id)
        self.assertError(d.push({"topic": "t", "bizKey": "k", "replace": True, "body": "new"}), 409, "conflict")
        job = self.inspect(d, id)
        self.assertEqual((job["state"], job["body"]), ("reserved", "old"))
        self.assertCounts(d, "t", reserved=1)


class GetTest(CoreTestCase):
    def test_get_returns_the_job_object(self):
        d = self.daemon()
        id = self.push(d, "t", {"k": "v"}, priority=3, ttr=9000, tries=4)
        t0 = now_ms()
        job = self.get_one(d, "t")
        t1 = now_ms()
        for key in ("id", "topic", "body", "priority", "ttr", "tries", "attempt", "runAt", "leaseUntil"):
            self.assertIn(key, job)
        self.assertEqual((job["id"], job["topic"], job["body"], job["priority"], job["ttr"], job["tries"],
                          job["attempt"]), (id, "t", {"k": "v"}, 3, 9000, 4, 1))
        self.assertTrue(t0 + 9000 <= job["leaseUntil"] <= t1 + 9000 + 1, (t0, job["leaseUntil"], t1))
        self.assertEqual(self.state(d, id), "reserved")

    def test_empty_topic_answers_204_after_the_timeout(self):
        d = self.daemon()
        t = time.monotonic()
        r = d.get("empty", timeout=0)
        self.assertEqual((r.status, r.body), (204, b""))
        self.assertLess(time.monotonic() - t, 1.0, "timeout=0 must not wait")
        t = time.monotonic()
        r = d.get("empty", timeout=1.5)
        took = time.monotonic() - t
        self.assertEqual((r.status, r.body), (204, b""))
        self.assertGreaterEqual(took, 1.4, "answered before its timeout")
        self.assertLess(took, 4.0, "answered long after its timeout")

    def test_timeout_accepts_fractions_of_a_second(self):
        d = self.daemon()
        t = time.monotonic()
        r = d.get("empty", timeout=0.3)
        took = time.monotonic() - t
        self.assertEqual(r.status, 204)
        self.assertGreaterEqual(took, 0.25)
        self.assertLess(took, 2.5)

    def test_count_returns_an_array(self):
        d = self.daemon()
        ids = [self.push(d, "t", i) for i in range(5)]
        r = d.get("t", timeout=0, count=3)
        self.assertStatus(r, 200)
        first = r.json()
        self.assertIsInstance(first, list)
        self.assertEqual([j["id"] for j in first], ids[:3])
        rest = d.get("t", timeout=1, count=10).json()
        self.assertIsInstance(rest, list)
        self.assertEqual([j["id"] for j in rest], ids[3:], "count>1 answers what is ready, not waiting for more")
        self.assertEqual(d.get("t", timeout=0, count=10).status, 204)
        self.assertCounts(d, "t", reserved=5)

    def test_count_above_one_with_one_job_is_still_an_array(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        t = time.monotonic()
        r = d.get("t", timeout=5, count=2)
        self.assertLess(time.monotonic() - t, 2.0, "one ready job must be answered at once")
        self.assertStatus(r, 200)
        self.assertEqual([j["id"] for j in r.json()], [id])

    def test_count_one_is_an_object(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        job = d.get("t", timeout=0, count=1).json()
        self.assertIsInstance(job, dict)
        self.assertEqual(job["id"], id)

    def test_count_100_is_allowed(self):
        d = self.daemon()
        self.assertJsonOk(d.push([{"topic": "t", "body": i} for i in range(150)]))
        got = d.get("t", timeout=0, count=100).json()
        self.assertEqual(len(got), 100)
        self.assertEqual(len(d.get("t", timeout=0, count=100).json()), 50)

    def test_multi_topic_prefers_earlier_topics(self):
        d = self.daemon()
        c = self.push(d, "c", "c", priority=0)   # most urgent, and pushed first
        b = self.push(d, "b", "b", priority=5)
        a = self.push(d, "a", "a", priority=9)   # least urgent, pushed last
        order = [self.get_one(d, "a,b,c", timeout=0)["id"] for _ in range(3)]
        self.assertEqual(order, [a, b, c])
        self.assertNothing(d, ["a", "b", "c"])

    def test_multi_topic_with_count(self):
        d = self.daemon()
        c = [self.push(d, "c", i) for i in range(2)]
        a = [self.push(d, "a", i) for i in range(2)]
        got = d.get(["a", "b", "c"], timeout=0, count=3).json()
        self.assertEqual([j["id"] for j in got], a + c[:1])
        self.assertEqual([j["topic"] for j in got], ["a", "a", "c"])
        self.assertEqual([j["id"] for j in d.get(["a", "b", "c"], timeout=0, count=3).json()], c[1:])

    def test_get_accepts_post(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        r = d.request("POST", "/get/t", params={"timeout": 0})
        self.assertEqual(self.assertJsonOk(r)["id"], id)
        id2 = self.push(d, "t", 2)
        r = d.request("POST", "/get/t", body="timeout=0&count=2",
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual([j["id"] for j in self.assertJsonOk(r)], [id2])


class GetFinishTest(CoreTestCase):
    """GET /get/{topic}?finish=<id>: finish the job held, then take the next, in one request."""

    def test_finish_and_take_the_next_in_one_request(self):
        d = self.daemon()
        ids = [self.push(d, "gf", i) for i in range(3)]
        first = self.get_one(d, "gf")
        self.assertEqual(first["id"], ids[0])
        r = d.get("gf", params={"finish": ids[0], "attempt": first["attempt"]})
        self.assertEqual(self.assertJsonOk(r)["id"], ids[1])
        self.assertEqual(r.headers.get("Hourglass-Finished"), ids[0])
        self.assertEqual(self.state(d, ids[0]), "finished")
        # with count, and fewer jobs left than asked: the one there is
        r = d.get("gf", count=5, params={"finish": ids[1]})
        self.assertEqual([j["id"] for j in self.assertJsonOk(r)], [ids[2]])
        self.assertEqual(r.headers.get("Hourglass-Finished"), ids[1])
        # as a form in a POST's body too; with nothing left, 204 after the finish
        r = d.request("POST", "/get/gf", body=f"finish={ids[2]}&timeout=0",
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual((r.status, r.headers.get("Hourglass-Finished")), (204, ids[2]))
        # every finish reaches MySQL as GET /finish's would
        wait_until(lambda: all(d.namespace.query(f"SELECT state FROM message WHERE id = {i}") == [("finished",)]
                               for i in ids), 10, 0.05, "the finished rows")

    def test_a_refused_finish_takes_nothing(self):
        d = self.daemon()
        ids = [self.push(d, "gr", i) for i in range(2)]
        self.assertEqual(self.get_one(d, "gr")["id"], ids[0])
        self.assertJsonOk(d.finish(ids[0]))
        r = d.get("gr", params={"finish": ids[0]})  # finished already
        self.assertStatus(r, 404)
        self.assertIsNone(r.headers.get("Hourglass-Finished"))
        self.assertEqual(self.state(d, ids[1]), "ready", "a refused finish took the next job")
        held = self.get_one(d, "gr")
        self.assertEqual(held["id"], ids[1])
        r = d.get("gr", params={"finish": ids[1], "attempt": held["attempt"] + 1})  # not this delivery
        self.assertStatus(r, 409)
        self.assertEqual(r.json()["error"], "conflict")
        self.assertEqual(self.state(d, ids[1]), "reserved")
        for params, why in (({"finish": "x"}, "finish must be a job id"), ({"attempt": 1}, "attempt goes with finish"),
                            ({"finish": ids[1], "attempt": 0}, "attempt")):
            r = d.get("gr", params=params)
            self.assertStatus(r, 400)
            self.assertIn(why, r.json()["message"])
        self.assertEqual(self.state(d, ids[1]), "reserved")

    def test_a_long_poll_after_the_finish_waits_and_says_so(self):
        d = self.daemon()
        jid = self.push(d, "gw", 1)
        self.assertEqual(self.get_one(d, "gw")["id"], jid)
        t = time.monotonic()
        r = d.get("gw", timeout=1, params={"finish": jid})
        self.assertEqual((r.status, r.headers.get("Hourglass-Finished")), (204, jid))
        self.assertGreaterEqual(time.monotonic() - t, 0.9, "answered before its timeout")
        self.assertEqual(self.state(d, jid), "finished")
        # parked after its finish, it gets a job pushed meanwhile
        held = self.push(d, "gw", 2)
        self.assertEqual(self.get_one(d, "gw")["id"], held)
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(d.get, "gw", timeout=5, params={"finish": held})
            wait_until(lambda: self.state(d, held) == "finished", 5, 0.02, "the finish before the wait")
            later = self.push(d, "gw", 3)
            r = waiting.result(10)
        self.assertEqual(self.assertJsonOk(r)["id"], later)
        self.assertEqual(r.headers.get("Hourglass-Finished"), held)


class ByIdTest(CoreTestCase):
    def test_finish(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        self.assertError(d.finish(id), 404, "not_found", "finish of a ready job")
        self.get_one(d, "t")
        obj = self.assertJsonOk(d.finish(id))
        self.assertEqual(obj, {"id": id, "state": "finished"})
        self.assertError(d.finish(id), 404, "not_found", "second finish")
        self.wait_state(d, id, "finished")
        self.assertCounts(d, "t")

    def test_inspect_right_after_finish_reports_finished(self):
        """After a 200 from /finish, /jobs/{id} must not report an older state (read your writes)."""
        d = self.daemon()
        seen = []
        for i in range(20):
            id = self.push(d, "t", i)
            self.get_one(d, "t")
            self.assertJsonOk(d.finish(id))
            job = self.inspect(d, id)
            seen.append((job["state"], job["attempt"]))
        self.assertEqual(seen, [("finished", 1)] * 20, "state/attempt seen by /jobs right after finish")

    def test_release_with_delay(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        self.assertError(d.release(id), 404, "not_found", "release of a ready job")
        self.assertEqual(self.get_one(d, "t")["attempt"], 1)
        t0 = now_ms()
        r = d.release(id, delay=1000)
        self.assertStatus(r, 200)
        obj = r.json()
        self.assertEqual(obj["id"], id)
        self.assertEqual(self.state(d, id), "delayed")
        self.assertCounts(d, "t", delayed=1)
        self.assertNothing(d, "t")
        job = self.get_one(d, "t", timeout=5)
        got = now_ms()
        self.assertEqual((job["id"], job["attempt"]), (id, 2))
        self.assertGreaterEqual(got, t0 + 1000, "released job delivered before its delay")
        self.assertGreaterEqual(job["runAt"], t0 + 1000)

    def test_release_without_delay_is_ready_at_once(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        self.get_one(d, "t")
        self.assertJsonOk(d.release(id))
        job = self.get_one(d, "t", timeout=2)
        self.assertEqual((job["id"], job["attempt"]), (id, 2))

    def test_touch_moves_lease_until(self):
        d = self.daemon()
        id = self.push(d, "t", 1, ttr=2000)
        self.assertError(d.touch(id), 404, "not_found", "touch of a ready job")
        job = self.get_one(d, "t")
        lease0 = job["leaseUntil"]
        time.sleep(0.8)
        t0 = now_ms()
        obj = self.assertJsonOk(d.touch(id))
        t1 = now_ms()
        self.assertEqual(obj["id"], id)
        lease1 = obj["leaseUntil"]
        self.assertTrue(t0 + 2000 <= lease1 <= t1 + 2000 + 1, (t0, lease1, t1))
        self.assertGreater(lease1, lease0 + 500)
        # not redelivered at the old deadline...
        wait_s = max(0.0, (lease0 + 300 - now_ms()) / 1000)
        self.assertNothing(d, "t", timeout=round(wait_s, 3))
        self.assertLess(now_ms(), lease1, "the test was too slow to check the old deadline")
        self.assertEqual(self.state(d, id), "reserved")
        # ...but after the new one
        again = self.get_one(d, "t", timeout=5)
        self.assertEqual((again["id"], again["attempt"]), (id, 2))
        self.assertGreaterEqual(now_ms(), lease1)

    def test_delete_in_every_live_state(self):
        d = self.daemon()
        delayed = self.push(d, "t", 1, delay=60000)
        ready = self.push(d, "t", 2)
        reserved = self.push(d, "r", 3)
        self.assertEqual(self.get_one(d, "r")["id"], reserved)
        for id in (delayed, ready, reserved):
            self.assertEqual(self.assertJsonOk(d.delete(id)), {"id": id, "state": "deleted"})
            self.assertError(d.delete(id), 404, "not_found", "second delete")
            self.assertEqual(self.state(d, id), "deleted")
        self.assertCounts(d, "t")
        self.assertCounts(d, "r")
        self.assertNothing(d, ["t", "r"])
        self.assertError(d.finish(reserved), 404, "not_found", "finish of a deleted job")

    def test_delete_unknown_or_finished_is_404(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        self.get_one(d, "t")
        self.assertJsonOk(d.finish(id))
        self.assertError(d.delete(id), 404, "not_found", "delete of a finished job")
        self.wait_state(d, id, "finished")
        unknown = str(int(id) + 4096 * 1000)
        self.assertError(d.delete(unknown), 404, "not_found", "delete of an unknown id")

    def test_reschedule_delayed_job_with_delay(self):
        d = self.daemon()
        id = self.push(d, "t", 1, delay=60000)
        t0 = now_ms()
        obj = self.assertJsonOk(d.reschedule(id, delay=300))
        self.assertEqual(obj["id"], id)
        self.assertTrue(t0 + 300 <= obj["runAt"] <= now_ms() + 300 + 1, obj)
        job = self.get_one(d, "t", timeout=5)
        self.assertEqual(job["id"], id)
        self.assertGreaterEqual(now_ms(), obj["runAt"])

    def test_reschedule_ready_job_with_run_at(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        at = now_ms() + 60000
        obj = self.assertJsonOk(d.reschedule(id, run_at=at))
        self.assertEqual((obj["id"], obj["runAt"]), (id, at))
        job = self.inspect(d, id)
        self.assertEqual((job["state"], job["runAt"]), ("delayed", at))
        self.assertNothing(d, "t")
        self.assertCounts(d, "t", delayed=1)
        # and back to now
        self.assertJsonOk(d.reschedule(id, delay=0))
        self.assertEqual(self.get_one(d, "t", timeout=2)["id"], id)

    def test_reschedule_reserved_is_409_and_unknown_is_404(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        self.get_one(d, "t")
        self.assertError(d.reschedule(id, delay=1000), 409, "conflict")
        self.assertEqual(self.state(d, id), "reserved")
        self.assertJsonOk(d.finish(id))
        self.assertError(d.reschedule(id, delay=1000), 404, "not_found", "reschedule of a finished job")
        self.assertError(d.reschedule(str(int(id) + 4096 * 1000), delay=1), 404, "not_found")

    def test_inspect_history_comes_from_the_journal(self):
        d = self.daemon()
        id = self.push(d, "t", {"a": 1}, delay=300)
        self.get_one(d, "t", timeout=5)
        self.assertJsonOk(d.finish(id))
        job = self.wait_history(d, id, ["delayed", "ready", "reserved", "finished"])
        self.assertEqual(job["state"], "finished")
        self.assertEqual(job["body"], {"a": 1})
        ats = [h["at"] for h in job["history"]]
        self.assertEqual(ats, sorted(ats), job["history"])
        for h in job["history"]:
            self.assertIsInstance(h["at"], int)
            self.assertIsInstance(h["by"], str)
            self.assertTrue(h["by"])
        # ready came at or after the due time
        self.assertGreaterEqual(ats[1], job["runAt"])

    def test_inspect_unknown_is_404(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        self.assertError(d.job(str(int(id) + 4096 * 1000)), 404, "not_found")


class InfoTest(CoreTestCase):
    def test_health(self):
        d = self.daemon()
        obj = self.assertJsonOk(d.health())
        self.assertEqual(obj["status"], "ok")

    def test_stats_counts_follow_what_was_done(self):
        d = self.daemon(default_ttr=60000)
        delayed = [self.push(d, "s1", i, delay=60000) for i in range(3)]
        ready = [self.push(d, "s1", i) for i in range(4)]
        self.push(d, "s2", "x")
        self.assertCounts(d, "s1", delayed=3, ready=4)
        self.assertCounts(d, "s2", ready=1)
        a, b = self.get_one(d, "s1"), self.get_one(d, "s1")
        self.assertCounts(d, "s1", delayed=3, ready=2, reserved=2)
        self.assertJsonOk(d.finish(a["id"]))
        self.assertJsonOk(d.release(b["id"], delay=60000))
        self.assertCounts(d, "s1", delayed=4, ready=2)
        self.assertJsonOk(d.delete(delayed[0]))
        self.assertJsonOk(d.delete(ready[3]))
        self.assertCounts(d, "s1", delayed=3, ready=1)
        self.assertJsonOk(d.reschedule(delayed[1], delay=0))
        self.assertCounts(d, "s1", delayed=2, ready=2)
        obj = self.assertJsonOk(d.stats())
        totals = obj.get("totals")
        if totals is not None:
            self.assertEqual(totals, {"delayed": 2, "ready": 3, "reserved": 0, "dead": 0, "far": 0})

    def test_metrics_is_prometheus_text(self):
        d = self.daemon()
        self.push(d, "t", 1)
        r = d.metrics()
        self.assertStatus(r, 200)
        self.assertTrue((r.header("Content-Type") or "").startswith("text/plain"), r.headers)
        self.assertIn("# TYPE", r.text)


class MethodsAndParamsTest(CoreTestCase):
    FORM = {"Content-Type": "application/x-www-form-urlencoded"}

    def test_actions_accept_get_and_post_with_query_form_or_json(self):
        d = self.daemon()
        ids = [self.push(d, "t", i) for i in range(6)]
        for _ in ids:
            self.get_one(d, "t")
        # finish: POST with query parameters
        self.assertEqual(self.assertJsonOk(d.request("POST", "/finish", params={"id": ids[0]}))["state"], "finished")
        # finish: POST with a form body
        r = d.request("POST", "/finish", body=f"id={ids[1]}", headers=self.FORM)
        self.assertEqual(self.assertJsonOk(r), {"id": ids[1], "state": "finished"})
        # finish: POST with a JSON body
        r = d.request("POST", "/finish", body={"id": ids[2]})
        self.assertEqual(self.assertJsonOk(r), {"id": ids[2], "state": "finished"})
        # touch: POST JSON
        self.assertIn("leaseUntil", self.assertJsonOk(d.request("POST", "/touch", body={"id": ids[3]})))
        # release: POST form with delay
        r = d.request("POST", "/release", body=f"id={ids[3]}&delay=60000", headers=self.FORM)
        self.assertJsonOk(r)
        self.assertEqual(self.state(d, ids[3]), "delayed")
        # reschedule: POST JSON with a numeric delay
        r = d.request("POST", "/reschedule", body={"id": ids[3], "delay": 0})
        self.assertJsonOk(r)
        self.assertEqual(self.get_one(d, "t", timeout=2)["id"], ids[3])
        # delete: POST form / GET query
        r = d.request("POST", "/delete", body=f"id={ids[4]}", headers=self.FORM)
        self.assertEqual(self.assertJsonOk(r), {"id": ids[4], "state": "deleted"})
        self.assertEqual(self.assertJsonOk(d.request("GET", f"/delete?id={ids[5]}"))["state"], "deleted")
        self.assertCounts(d, "t", reserved=1)

    def test_wrong_method_is_405_with_allow(self):
        d = self.daemon()
        cases = [("GET", "/push", {"POST"}), ("PUT", "/push", {"POST"}), ("DELETE", "/push", {"POST"}),
                 ("PUT", "/finish", {"GET", "POST"}), ("DELETE", "/delete", {"GET", "POST"}),
                 ("PATCH", "/release", {"GET", "POST"}), ("PUT", "/get/t", {"GET", "POST"}),
                 ("POST", "/health", {"GET"}), ("PUT", "/stats", {"GET"}), ("DELETE", "/jobs/1", {"GET"})]
        for method, path, must in cases:
            r = d.request(method, path, body=b"" if method != "GET" else None)
            self.assertError(r, 405, "method_not_allowed", f"{method} {path}")
            allow = {m.strip() for m in (r.header("Allow") or "").split(",") if m.strip()}
            self.assertTrue(must <= allow, f"{method} {path}: Allow {r.header('Allow')!r} lacks {must}")
            self.assertNotIn(method, allow, f"{method} {path}: Allow {r.header('Allow')!r}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
