"""Redis failure modes other than "gone": each on a private redis-server, so flushed functions,
a full memory or a demotion to replica touches no other test.

* FUNCTION FLUSH, again and again, under traffic: no push (nor get/finish) is refused, not
  even the first after a flush; the daemon loads its library again each time and re-sends the
  call.
* maxmemory reached: a push answers 503 naming OOM, /health says unavailable naming OOM, the
  cause is counted in /metrics; once memory is freed pushes and /health recover by themselves.
* The daemon's Redis demoted to a replica (REPLICAOF, as after a failover): pushes answer 503
  naming READONLY, /health names it; after REPLICAOF NO ONE the daemon is back by itself.
* SIGTERM while a push waits on a hung Redis: the exit is bounded by the drain deadline, the
  push in doubt is written down and settled by the next start.
* A corrupt or missing job record: reserve.lua and move.lua set it aside (counted in
  hourglass_bad_records_total, the corrupt record kept in <prefix>:{shard}:bad) and still
  deliver/move the good jobs around it.

    make integration T=test_redis_failures
"""

from __future__ import annotations

import pathlib
import re
import threading
import time

from core_common import CoreTestCase
from harness import id_key, topic_shard, wait_until

def metric(text: str, name: str) -> float:
    """A sample of /metrics by its full name with labels, e.g. 'x_total{cause="oom"}'; 0 if absent."""
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


class _PrivateRedisCase(CoreTestCase):
    """A daemon on its own redis-server (shared MariaDB, fresh namespace)."""

    def setUp(self):
        super().setUp()
        self.redis = self.private_redis()
        self.d = self.start_daemon({"redis": {"address": self.redis.address, "db": 0}})
        self.wait_healthy(self.d)
        self.prefix = self.d.config["redis"]["prefix"]
        self.shards = int(self.d.config["redis"]["shards"])

    def shard_key(self, job_id: str, suffix: str) -> str:
        shard = (int(job_id) & 0xFFF) % self.shards
        return f"{self.prefix}:{{{shard}}}:{suffix}"

    def metrics_text(self) -> str:
        r = self.d.metrics()
        self.assertStatus(r, 200)
        return r.text

    def cause_count(self, cause: str) -> float:
        return metric(self.metrics_text(), f'hourglass_redis_error_causes_total{{cause="{cause}"}}')

    def health_json(self):
        r = self.d.health()
        return r.status, r.json()


class FunctionFlushTest(_PrivateRedisCase):

    def test_repeated_function_flush_under_traffic_refuses_nothing(self):
        d, stop, lock = self.d, threading.Event(), threading.Lock()
        answers = []  # (kind, status, message, monotonic)

        def record(kind, r):
            msg = ""
            if r.status >= 400:
                try:
                    msg = r.json().get("message", "")
                except ValueError:
                    msg = r.body[:200]
            with lock:
                answers.append((kind, r.status, msg, time.monotonic()))

        def produce(k):
            n = 0
            while not stop.is_set():
                n += 1
                record("push", d.push({"topic": "flush", "body": {"k": k, "n": n}}))

        def consume():
            while not stop.is_set():
                r = d.get("flush", timeout=1)
                record("get", r)
                if r.status == 200:
                    record("finish", d.finish(r.json()["id"]))

        threads = [threading.Thread(target=produce, args=(k,), daemon=True) for k in range(2)]
        threads.append(threading.Thread(target=consume, daemon=True))
        for t in threads:
            t.start()
        try:
            wait_until(lambda: sum(1 for a in answers if a[0] == "push" and a[1] == 200) >= 20, 15, 0.05,
                       "pushes to flow")
            flushes = 6
            for _ in range(flushes):
                self.redis.cli("FUNCTION", "FLUSH")
                time.sleep(0.4)
            t_last = time.monotonic()
            time.sleep(1.0)
        finally:
            stop.set()
            for t in threads:
                t.join(10)
        refused = [a for a in answers if a[1] >= 500]
        self.assertEqual(refused[:10], [], f"{len(refused)} answers refused across {flushes} flushes")
        after = [a for a in answers if a[0] == "push" and a[3] > t_last]
        self.assertTrue(after and all(a[1] == 200 for a in after), "pushes after the last flush")
        # the flushes reached the daemon (else this test proved nothing): each cost a reload
        self.assertGreaterEqual(self.cause_count("noscript"), 3)
        status, h = self.health_json()
        self.assertEqual(status, 200, h)
        self.assertNotIn("redisError", h)


class OutOfMemoryTest(_PrivateRedisCase):

    def test_oom_is_named_counted_and_recovers(self):
        d = self.d
        self.push(d, "oom", 1)
        self.redis.cli("CONFIG", "SET", "maxmemory-policy", "noeviction")
        self.redis.cli("CONFIG", "SET", "maxmemory", "1")
        try:
            r = d.push({"topic": "oom", "body": 2})
            err = self.assertError(r, 503, "unavailable", "push into a full Redis")
            self.assertIn("oom", err["message"].lower(), err)
            self.assertIn("maxmemory", err["message"], err)
            # Redis refuses a script under OOM before running it: the job is certainly not queued
            self.assertNotIn("maybeQueued", err, "an OOM refusal names no job as maybe queued")
            self.assertTrue(r.header("Retry-After"), "503 without Retry-After")
            status, h = self.health_json()
            self.assertEqual(status, 503, h)
            self.assertEqual(h["status"], "unavailable", h)
            self.assertEqual(h.get("redisError", {}).get("cause"), "oom", h)
            self.assertGreaterEqual(self.cause_count("oom"), 1)
        finally:
            self.redis.cli("CONFIG", "SET", "maxmemory", "0")
        last = {}

        def push_ok():
            last["r"] = d.push({"topic": "oom", "body": 3})
            return last["r"].status == 200

        try:
            wait_until(push_ok, 10, 0.1, "a push after memory was freed")
        except TimeoutError:
            self.fail(f"pushes did not recover: {last.get('r')!r}")
        try:
            wait_until(lambda: self.health_json()[0] == 200, 15, 0.1, "/health after memory was freed")
        except TimeoutError:
            self.fail(f"/health did not recover: {self.health_json()}")


class DemotedToReplicaTest(_PrivateRedisCase):

    def test_readonly_is_named_and_recovers_by_itself(self):
        d = self.d
        self.push(d, "ro", 1)
        master = self.private_redis()
        self.redis.cli("REPLICAOF", "127.0.0.1", master.port)
        try:
            wait_until(lambda: "master_link_status:up" in self.redis.cli("INFO", "replication"), 15, 0.05,
                       "the replica to sync")
            last = {}

            def refused_naming_readonly():
                r = last["r"] = d.push({"topic": "ro", "body": 2})
                return r.status == 503 and "readonly" in r.body.decode(errors="replace").lower()

            try:
                wait_until(refused_naming_readonly, 10, 0.05, "a push refused naming READONLY")
            except TimeoutError:
                self.fail(f"push on a replica: {last.get('r')!r}")
            self.assertError(last["r"], 503, "unavailable", "push on a replica")

            def health_names_readonly():
                status, h = last["h"] = self.health_json()
                return status == 503 and h.get("redisError", {}).get("cause") == "readonly"

            try:
                wait_until(health_names_readonly, 5, 0.05, "/health naming READONLY")
            except TimeoutError:
                self.fail(f"/health on a replica: {last.get('h')}")
            self.assertGreaterEqual(self.cause_count("readonly"), 1)
            # it stays down by itself (set-up asks ROLE), instead of flapping up and failing writes
            time.sleep(1.5)
            self.assertEqual(self.health_json()[0], 503)
        finally:
            self.redis.cli("REPLICAOF", "NO", "ONE")
        try:
            wait_until(lambda: self.health_json()[0] == 200, 15, 0.1, "/health after REPLICAOF NO ONE")
        except TimeoutError:
            self.fail(f"/health did not recover: {self.health_json()}\n{d.log_tail(20)}")
        # The replica's sync emptied Redis, worker-id lease included; the daemon notices at its
        # next renewal (up to a second), drops the id and takes one again, answering pushes 503
        # "retry shortly" meanwhile, so /health may have said 200 just before that: pushes are
        # taken again within seconds, by themselves.
        wait_until(lambda: d.push({"topic": "ro", "body": 3}).status == 200, 10, 0.1, "a push taken again")


class BadRecordTest(_PrivateRedisCase):
    """"é" is a msgpack prefix that asks for bytes that are not there: cmsgpack.unpack raises,
    as it would on a truncated or overwritten record."""

    CORRUPT = "é"

    def test_reserve_sets_bad_records_aside_and_delivers_the_rest(self):
        d = self.d
        ids = [self.push(d, "badres", i) for i in range(4)]
        before = metric(self.metrics_text(), "hourglass_bad_records_total")
        self.redis.cli("HSET", self.shard_key(ids[1], "jobs"), id_key(ids[1]), self.CORRUPT)
        self.redis.cli("HDEL", self.shard_key(ids[3], "jobs"), id_key(ids[3]))  # a dangling ready entry
        r = d.get("badres", timeout=0, count=4)
        self.assertStatus(r, 200, "reserve across a corrupt and a missing record")
        self.assertEqual([j["id"] for j in r.json()], [ids[0], ids[2]])
        self.assertEqual(self.redis.cli("HEXISTS", self.shard_key(ids[1], "bad"), id_key(ids[1])), "1")
        self.assertEqual(self.redis.cli("ZCARD", self.shard_key(ids[1], "ready:badres")), "0")
        self.assertEqual(metric(self.metrics_text(), "hourglass_bad_records_total"), before + 2)
        self.assertTrue(re.search(r"reserve\.lua: 2 job record", d.log()), "no log line for the bad records")
        # the set-aside job is absent from Redis; /reStore/{id} rebuilds it from MySQL
        r = self.assertJsonOk(d.restore_one(ids[1]))
        self.assertTrue(r.get("restored"), r)
        self.assertEqual(self.get_one(d, "badres", timeout=2)["id"], ids[1])

    def test_mover_sets_a_bad_record_aside_and_moves_the_rest(self):
        d = self.d
        ids = [self.push(d, "badmove", i, delay=1500) for i in range(3)]
        before = metric(self.metrics_text(), "hourglass_bad_records_total")
        self.redis.cli("HSET", self.shard_key(ids[1], "jobs"), id_key(ids[1]), self.CORRUPT)
        got = []

        def delivered_both():
            r = d.get("badmove", timeout=1, count=3)
            if r.status == 200:
                got.extend(j["id"] for j in r.json())
            return len(got) >= 2

        wait_until(delivered_both, 10, 0.05, "the good delayed jobs to come due")
        self.assertEqual(sorted(got), sorted([ids[0], ids[2]]))
        wait_until(lambda: metric(self.metrics_text(), "hourglass_bad_records_total") >= before + 1, 5, 0.1,
                   "the bad record to be counted")
        self.assertEqual(self.redis.cli("HEXISTS", self.shard_key(ids[1], "bad"), id_key(ids[1])), "1")
        self.assertEqual(self.redis.cli("ZSCORE", self.shard_key(ids[1], "delay"), id_key(ids[1])), "")


class StaleEntryTest(_PrivateRedisCase):
    """reserve.lua writes the records of the jobs it delivers once, at the end of the call
    (lib.lua gathered()): until then a delivered job's record still reads "ready". A stale
    entry of it in another topic's ready zset, reached later in the same call, must not deliver
    it a second time."""

    def test_a_stale_entry_of_a_job_delivered_in_the_same_call_is_dropped(self):
        d = self.d
        # two topics of one shard: one GET reserves from both in one call
        other = next(f"staleb{i}" for i in range(1000)
                     if topic_shard(f"staleb{i}", self.shards) == topic_shard("stalea", self.shards))
        job = self.push(d, "stalea", "once")
        ready = self.shard_key(job, "ready:stalea")
        score = self.redis.cli("ZSCORE", ready, id_key(job))
        self.assertNotEqual(score, "")
        # the same job listed again under the other topic: a stale entry
        stale = self.shard_key(job, "ready:" + other)
        self.redis.cli("ZADD", stale, score, id_key(job))
        r = d.get(["stalea", other], timeout=0, count=10)
        self.assertStatus(r, 200, "reserve over the job's topic and the stale entry's")
        self.assertEqual([j["id"] for j in r.json()], [job], "delivered exactly once")
        self.assertEqual(self.redis.cli("ZCARD", stale), "0", "the stale entry is dropped")
        self.assertEqual(self.redis.cli("ZCARD", ready), "0")
        self.assertEqual(self.redis.cli("ZCARD", self.shard_key(job, "delay")), "1", "one lease")
        self.assertEqual(d.get(["stalea", other], timeout=0, count=10).status, 204)


class ShutdownDeadlineTest(CoreTestCase):
    """SIGTERM while a push waits on a hung Redis ([redis] timeout 60 s):
    * at the drain deadline each worker closes its Redis connection before its HTTP server,
      because the connection's callbacks answer requests on that server (the other order
      freed evhttp first: a use after free under ASan);
    * those callbacks run while the journal and the reconciler still do: the push, committed
      in MySQL and sent to Redis without an answer, is in doubt and must be written down before
      the exit (the reconciler was closed first, so it was forgotten: this test's first failure);
    * the outbox thread, blocked in a Redis call, is cut loose at its stop deadline instead of
      holding the exit for the whole Redis timeout (it did: the stop took over 45 s);
    and the next start settles the push so that MySQL and Redis agree."""

    def test_a_push_waiting_on_a_hung_redis_at_the_shutdown_deadline(self):
        redis = self.private_redis()
        d = self.start_daemon({"redis": {"address": redis.address, "db": 0, "timeout": 60000}})
        self.wait_healthy(d)
        ns = d.namespace
        redis.pause()
        paused = True
        try:
            answer = {}

            def push():
                try:
                    answer["r"] = d.push({"topic": "deadline", "body": "at-shutdown", "delay": 600000}, timeout=60)
                except OSError as e:
                    answer["error"] = e

            t = threading.Thread(target=push, daemon=True)
            t.start()
            wait_until(lambda: ns.query("SELECT id FROM message WHERE body = '\"at-shutdown\"'"), 15, 0.05,
                       "the push's row to be committed (it then waits on Redis)")
            jid = ns.query("SELECT id FROM message WHERE body = '\"at-shutdown\"'")[0][0]
            time.sleep(0.3)  # the push.lua call is sent after the commit is reported to the worker
            started = time.monotonic()
            rc = d.stop(timeout=45)
            self.assertEqual(rc, 0, f"exit status after the drain deadline\n{d.log_tail(20)}")
            self.assertLess(time.monotonic() - started, 40, "the drain deadline bounds the shutdown")
            self.assertIn("requests still in flight after 6000 ms; closing them", d.log())
            t.join(15)
            self.assertFalse(t.is_alive(), "the client waiting on the push was answered or cut, not left hanging")
            if "r" in answer:
                self.assertEqual(answer["r"].status, 503, answer["r"].body[:300])
            state = pathlib.Path(d.dir, "state", "in-doubt").read_text()
            self.assertTrue(any(line.startswith(f"P {jid} ") for line in state.split("\n")),
                            f"the push in doubt is written down before the exit: {state!r}")
        finally:
            if paused:
                redis.resume()

        d.start()
        self.wait_healthy(d)
        wait_until(lambda: pathlib.Path(d.dir, "state", "in-doubt").read_text() == "", 30, 0.1,
                   "the next start to settle the push in doubt")
        row = ns.query(f"SELECT state FROM message WHERE id = {jid}")[0][0]
        seen = d.job(jid).json()["state"]
        self.assertIn((row, seen), [("aborted", "aborted"), ("delayed", "delayed")],
                      "MySQL and Redis agree on the push that was in doubt")
