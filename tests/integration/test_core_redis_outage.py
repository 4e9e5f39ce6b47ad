"""Black-box tests of a Redis outage under traffic, on a private Redis with persistence
(appendonly yes, appendfsync always), so that they are about the daemon and not about Redis
losing data.

While Redis is away every request must be answered promptly with 503 + Retry-After (no hang,
no other 5xx); the daemon must reconnect by itself; nothing acknowledged may be lost; and
afterwards MySQL must agree with what happened in Redis.

Each scenario (Redis restarted; Redis paused with SIGSTOP) runs once per class, in
setUpClass, with producers and consumers running; the test methods then each check one
property of what was recorded, so a failure names the property.

    make integration T=test_core_redis_outage
"""

import re
import socket
import threading
import time
import unittest

from core_common import CoreTestCase
from harness import Daemon, RedisServer, shared_stack, wait_until

TOPIC = "outage"
TTR = 3000
SLOW_S = 5.0  # no request may take longer than this beyond its own long-poll timeout


class Traffic:
    """Producers pushing single jobs and consumers getting and finishing them, recording every
    answer with the time it took."""

    def __init__(self, d, producers=2, consumers=2):
        self.d = d
        self.lock = threading.Lock()
        self.records = []         # (kind, status, seconds, retry_after, error_code, started_monotonic)
        self.pushed = []          # ids answered 200
        self.delivered = []       # (id, attempt)
        self.finished = set()     # ids whose finish answered 200
        self.finish_answers = {}  # id -> statuses of its finish calls
        self.errors = []
        self.producing = threading.Event()
        self.producing.set()
        self.consuming = threading.Event()
        self.consuming.set()
        self.n = 0
        self.threads = [threading.Thread(target=self._produce, args=(k,), daemon=True) for k in range(producers)]
        self.threads += [threading.Thread(target=self._consume, args=(k,), daemon=True) for k in range(consumers)]
        for t in self.threads:
            t.start()

    def _call(self, kind, fn, *args, **kw):
        t = time.monotonic()
        try:
            r = fn(*args, **kw)
        except Exception as e:  # noqa: BLE001 - a hang (timeout) or a dropped connection
            with self.lock:
                self.errors.append(f"{kind}: {e!r} after {time.monotonic() - t:.1f} s")
            return None
        took = time.monotonic() - t
        code = None
        if r.status >= 400:
            try:
                code = r.json().get("error")
            except ValueError:
                code = f"non-JSON body {r.body[:100]!r}"
        with self.lock:
            self.records.append((kind, r.status, took, r.header("Retry-After"), code, t))
        return r

    def _produce(self, k):
        while self.producing.is_set():
            with self.lock:
                self.n += 1
                i = self.n
            r = self._call("push", self.d.push, {"topic": TOPIC, "body": {"p": k, "i": i}, "ttr": TTR},
                           timeout=30)
            if r is not None and r.status == 200:
                with self.lock:
                    self.pushed.append(r.json()["id"])
            elif r is not None and r.status == 503:
                time.sleep(0.05)
            time.sleep(0.005)

    def _consume(self, k):
        while self.consuming.is_set():
            r = self._call("get", self.d.get, TOPIC, timeout=1, count=5, http_timeout=30)
            if r is None or r.status != 200:
                if r is not None and r.status == 503:
                    time.sleep(0.05)
                continue
            jobs = r.json()
            with self.lock:
                self.delivered += [(j["id"], j["attempt"]) for j in jobs]
            for j in jobs:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    f = self._call("finish", self.d.finish, j["id"], timeout=30)
                    with self.lock:
                        self.finish_answers.setdefault(j["id"], []).append(None if f is None else f.status)
                    if f is not None and f.status == 200:
                        with self.lock:
                            self.finished.add(j["id"])
                        break
                    if f is not None and f.status == 404:
                        break  # the lease ran out during the outage: it will be delivered again
                    time.sleep(0.1)

    def stop_producers(self):
        self.producing.clear()
        for t in self.threads[:2]:
            t.join(40)

    def stop(self):
        self.producing.clear()
        self.consuming.clear()
        for t in self.threads:
            t.join(40)

    def delivered_ids(self):
        with self.lock:
            return {i for i, _ in self.delivered}

    def pushes_ok_since(self, t0):
        with self.lock:
            return sum(1 for kind, st, _, _, _, at in self.records if kind == "push" and st == 200 and at >= t0)


class _OutageScenario(CoreTestCase):
    """Runs one outage under traffic in setUpClass; subclasses say how Redis goes away."""

    OUTAGE_S = 2.5

    @classmethod
    def outage_begin(cls):
        raise NotImplementedError

    @classmethod
    def outage_end(cls):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.redis = RedisServer(persistent=True)
        cls.addClassCleanup(cls.redis.close)
        cls.redis.start()
        cls.d = Daemon(namespace=shared_stack().fresh_namespace(),
                       overrides={"redis": {"address": cls.redis.address, "db": 0}})
        cls.addClassCleanup(cls.d.close)
        cls.d.start()
        cls.d.wait_ready(15)
        cls.traffic = t = Traffic(cls.d)
        cls.addClassCleanup(t.stop)
        wait_until(lambda: len(t.finished) >= 30, 20, 0.02, "traffic to flow")
        time.sleep(0.5)
        cls.pushed_before = set(t.pushed)

        cls.t_begin = time.monotonic()
        cls.outage_begin()
        time.sleep(cls.OUTAGE_S * 0.75)  # long enough for the daemon's Redis timeout (2 s) to notice a hang
        cls.health_during = cls.d.health()
        time.sleep(max(0.0, cls.t_begin + cls.OUTAGE_S - time.monotonic()))
        cls.outage_end()
        cls.t_end = time.monotonic()

        try:
            wait_until(lambda: t.pushes_ok_since(cls.t_end) >= 10, 15, 0.05, "pushes to succeed again")
            cls.resumed_after = time.monotonic() - cls.t_end
        except TimeoutError:
            cls.resumed_after = None
        cls.health_after = cls.d.health()
        time.sleep(0.5)
        t.stop_producers()
        cls.pushed = set(t.pushed)
        # consumers keep going until every acknowledged job was delivered and the topic is empty
        try:
            wait_until(lambda: cls.pushed <= t.delivered_ids(), 40, 0.1, "acknowledged jobs to be delivered")
        except TimeoutError:
            pass
        try:
            wait_until(lambda: cls._counts_zero(), 30, 0.1, "the topic to drain")
        except TimeoutError:
            pass
        t.stop()
        try:
            wait_until(lambda: cls._journal_idle(), 20, 0.1, "the journal to drain")
        except TimeoutError:
            pass

    @classmethod
    def _stats(cls):
        r = cls.d.stats()
        return r.json() if r.status == 200 else None

    @classmethod
    def _counts_zero(cls):
        s = cls._stats()
        if s is None:
            return False
        c = (s.get("topics") or {}).get(TOPIC) or {}
        return all(int(c.get(k, 0)) == 0 for k in ("delayed", "ready", "reserved", "dead"))

    @classmethod
    def _journal_idle(cls):
        s = cls._stats()
        return s is not None and s["journal"]["backlog"] == 0 and s["journal"]["durableWaiting"] == 0

    # -- the checks

    def test_traffic_flowed_before_and_after(self):
        self.assertGreater(len(self.pushed_before), 20)
        self.assertGreater(len(self.pushed), len(self.pushed_before) + 10)

    def test_no_request_hung_or_lost_its_connection(self):
        self.assertEqual(self.traffic.errors, [])
        slow = [rec for rec in self.traffic.records if rec[2] > SLOW_S + (1 if rec[0] == "get" else 0)]
        self.assertEqual(slow, [], "requests that took too long (kind, status, s, Retry-After, error, t)")

    def test_only_contract_statuses(self):
        allowed = {"push": {200, 503}, "get": {200, 204, 503}, "finish": {200, 404, 503}}
        bad = [rec for rec in self.traffic.records if rec[1] not in allowed[rec[0]]]
        self.assertEqual(bad, [], "answers outside the contract (kind, status, s, Retry-After, error, t)")

    def test_503s_carry_retry_after_and_the_json_error(self):
        unavailable = [rec for rec in self.traffic.records if rec[1] == 503]
        self.assertTrue(unavailable, "no request got 503 during the outage")
        for rec in unavailable:
            self.assertTrue(rec[3], f"503 without Retry-After: {rec}")
            self.assertEqual(rec[4], "unavailable", rec)

    def test_pushes_during_the_outage_get_503(self):
        """Pushes sent and answered inside the outage window (after its first 0.3 s) exist and
        were all refused (503). With Redis hung, the first requests wait out the Redis timeout;
        after that every worker knows (rconn.c), also one whose connection was idle — before,
        both producers could land on such a worker and wait out the whole window."""
        pushes = [rec for rec in self.traffic.records if rec[0] == "push"]
        inside = [rec for rec in pushes if self.t_begin + 0.3 <= rec[5] and rec[5] + rec[2] <= self.t_end]
        overlapping = [rec for rec in pushes if rec[5] < self.t_end and rec[5] + rec[2] > self.t_begin + 0.3]
        near = [(round(rec[5] - self.t_begin, 3), rec[1], round(rec[2], 3)) for rec in overlapping]
        what = f"pushes overlapping the {self.t_end - self.t_begin:.2f} s outage (start - its begin, status, seconds): {near}"
        self.assertIn(503, {rec[1] for rec in overlapping}, "no push was refused: the test did not test it; " + what)
        self.assertEqual({rec[1] for rec in inside} - {503}, set(), "statuses of pushes during the outage; " + what)
        self.assertTrue(inside, "no push was answered during the outage; " + what)

    def test_health_is_503_during_the_outage(self):
        self.assertEqual(self.health_during.status, 503, self.health_during)
        self.assertTrue(self.health_during.header("Retry-After"), self.health_during.headers)

    def test_daemon_reconnects_by_itself(self):
        self.assertIsNotNone(self.resumed_after, "pushes never succeeded again after Redis came back")
        self.assertLess(self.resumed_after, 10)
        self.assertStatus(self.health_after, 200, "health after Redis came back")

    def test_nothing_acknowledged_is_lost(self):
        missing = sorted(self.pushed - self.traffic.delivered_ids())
        self.assertEqual(missing, [], f"{len(missing)} of {len(self.pushed)} acknowledged jobs never delivered"
                         + (f"; e.g. {self.inspect(self.d, missing[0])}" if missing else ""))
        self.assertTrue(self.pushed_before <= self.pushed)

    def test_queue_drains_to_empty(self):
        self.assertCounts(self.d, TOPIC)

    def test_no_job_delivered_twice_inside_one_lease(self):
        seen = set()
        for id, attempt in self.traffic.delivered:
            self.assertNotIn((id, attempt), seen, f"job {id} delivered twice with attempt {attempt}")
            seen.add((id, attempt))

    def test_mysql_agrees_with_redis_afterwards(self):
        """Every job a consumer got, and then finished, ends 'finished' in its message row (its
        finished transition journaled); rows of jobs no consumer ever got are aborted pushes."""
        d, t = self.d, self.traffic
        got = t.delivered_ids()
        rows = {}
        # pushes in doubt are settled by the reconciler DOUBT_GRACE_MS (5 s) after the outage
        wait_until(lambda: d.stats().status == 200 and d.stats().json()["journal"]["inDoubt"] == 0, 20, 0.2,
                   "the outcomes in doubt to be settled")

        def journaled() -> bool:
            rows.clear()
            rows.update(dict(d.namespace.query("SELECT id, state FROM message")))
            return all(rows.get(i) == "finished" for i in got)
        try:
            wait_until(journaled, 10, 0.2, "delivered jobs to be journaled as finished")
        except TimeoutError:
            wrong = sorted(i for i in got if rows.get(i) != "finished")
            self.fail(f"{len(wrong)} of {len(got)} delivered and consumed jobs are not 'finished' in MySQL: "
                      + "; ".join(f"{i}: row {rows.get(i)!r}, push acknowledged {i in self.pushed}, "
                                  f"finish answers {t.finish_answers.get(i)}, /jobs state "
                                  f"{self.inspect(d, i).get('state')!r}, history "
                                  f"{[h['state'] for h in self.inspect(d, i).get('history', [])]}"
                                  for i in wrong[:5]))
        for id in self.pushed:
            self.assertIn(id, rows, f"acknowledged job {id} has no message row")
        never_seen = {i: st for i, st in rows.items() if i not in got}
        self.assertEqual(set(never_seen.values()) - {"aborted"}, set(),
                         f"rows of jobs no consumer ever got, left live in MySQL: {never_seen}")


class RedisRestartTest(_OutageScenario):
    """Redis shut down (SIGTERM) and started again on the same port and data."""

    @classmethod
    def outage_begin(cls):
        cls.redis.stop()

    @classmethod
    def outage_end(cls):
        cls.redis.start()


class RedisPauseTest(_OutageScenario):
    """Redis stops answering (SIGSTOP) rather than refusing connections: requests must still be
    answered, with 503, within the daemon's Redis timeout."""

    OUTAGE_S = 4.0

    @classmethod
    def outage_begin(cls):
        cls.redis.pause()

    @classmethod
    def outage_end(cls):
        cls.redis.resume()


del _OutageScenario  # only its subclasses are test cases


class RedisDownEndpointsTest(CoreTestCase):
    def get_after_outage(self, d, topic, timeout):
        """GET /get as a client would just after an outage: a 503 (+ Retry-After) while a
        connection is still being re-established is retried."""
        deadline = time.monotonic() + 15
        while True:
            r = d.get(topic, timeout=timeout)
            if r.status != 503 or time.monotonic() > deadline:
                return r
            self.assertTrue(r.header("Retry-After"), r)
            time.sleep(0.2)

    def start_on(self, redis):
        d = self.start_daemon({"redis": {"address": redis.address, "db": 0}}, namespace=self.namespace())
        self.wait_healthy(d)
        return d

    def test_requests_while_redis_is_down(self):
        """Each endpoint that needs Redis answers 503 + Retry-After while it is down, and works
        again after it is back, without a daemon restart."""
        redis = self.private_redis(persistent=True)
        d = self.start_on(redis)
        id = self.push(d, "down", "x", delay=600000)
        res = self.push(d, "res", "y")
        self.get_one(d, "res")
        redis.stop()
        calls = [("push", lambda: d.push({"topic": "down", "body": 1})),
                 ("push array", lambda: d.push([{"topic": "down"}, {"topic": "other"}])),
                 ("get", lambda: d.get("down", timeout=0)),
                 ("get with timeout", lambda: d.get("down", timeout=2)),
                 ("finish", lambda: d.finish(res)),
                 ("touch", lambda: d.touch(res)),
                 ("release", lambda: d.release(res)),
                 ("delete", lambda: d.delete(id)),
                 ("reschedule", lambda: d.reschedule(id, delay=0)),
                 ("stats", lambda: d.stats())]
        for what, call in calls:
            with self.subTest(what):
                t = time.monotonic()
                r = call()
                took = time.monotonic() - t
                self.assertError(r, 503, "unavailable", what)
                self.assertTrue(r.header("Retry-After"), f"{what}: 503 without Retry-After")
                self.assertLess(took, SLOW_S, f"{what} took {took:.1f} s")
        redis.start()
        wait_until(lambda: d.health().status == 200, 15, 0.05, "health to come back")
        self.assertEqual(self.inspect(d, id)["state"], "delayed", "a delete answered 503 must not have happened")
        self.assertEqual(self.inspect(d, res)["state"], "reserved")
        self.assertJsonOk(d.finish(res))
        self.assertJsonOk(d.delete(id))
        new = self.push(d, "down", "after")
        self.assertEqual(self.get_one(d, "down")["id"], new)
        # finish, delivery and the new job's "ready" reach MySQL through the outbox, a moment later
        wait_until(lambda: self.journal_idle(d), 10, 0.05, "the journal to be written")
        self.assertEqual(d.namespace.query("SELECT COUNT(*) FROM message WHERE state NOT IN "
                                           "('finished', 'deleted', 'aborted', 'reserved')"), [("0",)])

    def test_health_is_503_on_every_worker_while_one_cannot_use_redis(self):
        """/health is what a load balancer routes by, so it says 503 on every worker while any
        one of them has no Redis connection — not only on that one (at start-up, too: the
        workers connect one by one). Here Redis starts requiring a password and drops
        http-1's connection (found by its CLIENT LIST name); http-0 stays authenticated."""
        redis = self.private_redis()
        d = self.start_daemon({"redis": {"address": redis.address, "db": 0}, "http": {"threads": 2}},
                              namespace=self.namespace())
        self.wait_healthy(d)
        clients = dict(re.findall(r"\bid=(\d+) .*?\bname=(hourglass-\S+)", redis.cli("CLIENT", "LIST")))
        ids = {name: id for id, name in clients.items()}
        self.assertIn("hourglass-http-0", ids, clients)
        self.assertIn("hourglass-http-1", ids, clients)

        admin = socket.create_connection(("127.0.0.1", redis.port), timeout=5)
        self.addCleanup(admin.close)

        def command(*args: str) -> bytes:
            admin.sendall(b"".join([f"*{len(args)}\r\n".encode()] +
                                   [f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args]))
            return admin.recv(4096)

        self.assertEqual(command("CONFIG", "SET", "requirepass", "s3cret"), b"+OK\r\n")
        self.assertEqual(command("CLIENT", "KILL", "ID", ids["hourglass-http-1"]), b":1\r\n")
        try:
            def all_down() -> bool:
                answers = [d.health() for _ in range(20)]  # a new connection each: both workers
                return all(a.status == 503 and a.json()["redis"] == "down" for a in answers)
            wait_until(all_down, 5, 0.1, "/health 503 with redis down on every worker, 20 times in a row")
        finally:
            command("CONFIG", "SET", "requirepass", "")
        wait_until(lambda: all(d.health().status == 200 for _ in range(20)), 15, 0.1,
                   "/health 200 on every worker once http-1 is connected again")

    def test_a_hang_one_worker_found_is_seen_by_every_worker(self):
        """With Redis hung, a request waits at most the Redis timeout; once one connection has
        timed out, every worker answers 503 at once and /health says Redis is down — also the
        workers whose connections had nothing pending, which could not notice by themselves
        (requests open a new connection each, so the kernel spreads them over both workers)."""
        redis = self.private_redis(persistent=True)
        d = self.start_daemon({"redis": {"address": redis.address, "db": 0, "timeout": 1000},
                               "http": {"threads": 2}}, namespace=self.namespace())
        self.wait_healthy(d)
        self.push(d, "hang", "before")
        redis.pause()
        try:
            first = d.push({"topic": "hang", "body": 1}, timeout=10)
            self.assertError(first, 503, "unavailable", "a push into the hang")
            slow = []
            for i in range(20):
                for what, call in (("health", d.health), ("push", lambda: d.push({"topic": "hang", "body": 2}))):
                    t = time.monotonic()
                    r = call(timeout=10) if what == "health" else call()
                    took = time.monotonic() - t
                    self.assertEqual(r.status, 503, f"{what} #{i} while Redis hangs: {r!r}")
                    if took > 0.5:
                        slow.append((what, i, round(took, 2)))
            self.assertEqual(slow, [], "requests that waited for a hang another connection had already found")
        finally:
            redis.resume()
        # /health is answered by one worker; the other may still be reconnecting (its
        # connection timed out in the hang), and answers 503 until it has: wait for both.
        wait_until(lambda: d.health().status == 200, 15, 0.05, "health to come back")
        wait_until(lambda: d.push({"topic": "hang", "body": 3}).status == 200, 15, 0.05,
                   "pushes to be accepted again on every worker")

    def test_finish_answered_503_while_redis_hangs(self):
        """A finish sent while Redis hangs is answered 503 after the daemon's Redis timeout. Redis
        runs the command when it wakes up, so the outcome was unknown; either way the job must
        not end up gone from Redis while MySQL and /jobs still call it reserved for good: it is
        either redelivered when its lease runs out, or journaled as finished."""
        redis = self.private_redis(persistent=True)
        d = self.start_on(redis)
        id = self.push(d, "hang", "x", ttr=2000)
        self.get_one(d, "hang")
        wait_until(lambda: self.journal_idle(d), 10, 0.05, "the journal to be written")
        redis.pause()
        try:
            t = time.monotonic()
            r = d.finish(id, timeout=30)
            took = time.monotonic() - t
        finally:
            redis.resume()
        self.assertError(r, 503, "unavailable", "finish while Redis hangs")
        self.assertLess(took, SLOW_S)
        wait_until(lambda: d.health().status == 200, 15, 0.05, "health to come back")
        redelivered = self.get_after_outage(d, "hang", timeout=5)
        if redelivered.status == 200:
            self.assertEqual((redelivered.json()["id"], redelivered.json()["attempt"]), (id, 2))
            return
        # not redelivered: then it was finished, and MySQL / /jobs must say so
        self.assertCounts(d, "hang")
        self.wait_state(d, id, "finished", timeout=10)

    def test_push_answered_503_while_redis_hangs(self):
        """A push sent to a hung Redis is answered 503 naming its job under maybeQueued (Redis
        may run it when it wakes up). Afterwards the job either exists — delivered, with a live
        message row, so /reStore after a Redis loss would rebuild it — or /jobs/{id} says it is
        aborted: never a deliverable job whose row is aborted, never a row left pending."""
        redis = self.private_redis(persistent=True)
        d = self.start_on(redis)
        redis.pause()
        try:
            r = d.push({"topic": "hang", "body": "maybe"}, timeout=30)
        finally:
            redis.resume()
        self.assertError(r, 503, "unavailable", "push while Redis hangs")
        maybe = r.json().get("maybeQueued")
        self.assertIsInstance(maybe, list, f"a push sent to a hung Redis must say maybeQueued: {r!r}")
        self.assertEqual(len(maybe), 1, r)
        jid = maybe[0]
        wait_until(lambda: d.health().status == 200, 15, 0.05, "health to come back")
        got = self.get_after_outage(d, "hang", timeout=3)
        if got.status == 204:  # Redis did not run it: the row must be marked so
            wait_until(lambda: d.job(jid).status == 200 and d.job(jid).json().get("state") == "aborted", 10, 0.1,
                       f"/jobs/{jid} to say aborted")
            return
        job = self.assertJsonOk(got)
        self.assertEqual(job["id"], jid, "the job delivered is not the one maybeQueued named")
        wait_until(lambda: self.journal_idle(d), 10, 0.05, "the journal to be written")
        rows = d.namespace.query(f"SELECT state FROM message WHERE id = {int(job['id'])}")
        self.assertEqual(rows, [("reserved",)],
                         f"a push answered 503 was delivered anyway (job {job['id']}); its message row is "
                         f"{rows}, so /reStore after a Redis loss would not rebuild it")


if __name__ == "__main__":
    unittest.main(verbosity=2)
