"""Hardening: Redis and MySQL outages, on private servers, under traffic.

* Unreachable at start (a host that does not resolve; a port nobody listens on): the daemon
  starts, answers 503 + Retry-After promptly, stays up, and recovers by itself when the server
  appears.
* PurgeDuringMySQLOutageTest: a purge stops with a prompt 503 when MySQL goes down, and
  purging again once it is back finishes the work.
* One scenario under traffic (OutageSequenceTest, run once in setUpClass): producers push and
  consumers get and finish while, one after the other, Redis is stopped and restarted, MySQL is
  stopped and restarted, both are, MySQL hangs (SIGSTOP) and Redis hangs. Every answer is
  recorded; the test methods then each check one property: answers prompt (configured
  timeout + 2 s) and within the contract, 503s with Retry-After, service back by itself after
  each outage, no acknowledged job lost, and, once the journal has caught up, MySQL agreeing
  with Redis job by job.

Redis runs with appendonly/fsync always, so a Redis restart is an outage, not a data loss.

    make integration T=test_hardening_outage
"""

from __future__ import annotations

import http.client
import random
import threading
import time
import unittest

from harness import Daemon, MariaDBServer, RedisServer, free_port, shared_stack, wait_until
from test_hardening_common import HardeningTestCase, redis_jobs

REDIS_TIMEOUT_MS = 500
MYSQL_TIMEOUT_S = 1
MARGIN = 2.0
PROMPT = max(REDIS_TIMEOUT_MS / 1000, MYSQL_TIMEOUT_S) + MARGIN  # any answer, but a long-poll's own wait
TOPIC = "hard.outage"
TTR = 3000
GET_WAIT = 1


def timed(fn, *args, **kw):
    t = time.monotonic()
    try:
        r = fn(*args, **kw)
    except (OSError, http.client.HTTPException) as e:
        return None, time.monotonic() - t, e
    return r, time.monotonic() - t, None


class UnreachableAtStartTest(HardeningTestCase):
    """Servers that are not there when the daemon starts."""

    def assertPrompt503(self, d: Daemon, what: str) -> None:
        calls = [("health", lambda: d.health(timeout=20)),
                 ("push", lambda: d.push({"topic": "u", "body": 1}, timeout=20)),
                 ("get", lambda: d.get("u", timeout=0, http_timeout=20)),
                 ("get with a wait", lambda: d.get("u", timeout=3, http_timeout=20)),
                 ("finish", lambda: d.finish("382309453472989188", timeout=20)),
                 ("stats", lambda: d.stats(timeout=20))]
        for name, call in calls:
            with self.subTest(f"{what}: {name}"):
                r, took, err = timed(call)
                self.assertIsNone(err, f"{what}: {name} raised {err!r} after {took:.1f} s")
                self.assertUnavailable(r, name == "health", f"{what}: {name}")
                self.assertTrue(r.header("Retry-After"), f"{what}: {name}: 503 without Retry-After")
                self.assertLess(took, PROMPT, f"{what}: {name} took {took:.1f} s")

    def assertUnavailable(self, r, health: bool, what: str) -> None:
        """503 + Retry-After: the error JSON, or for /health its status document saying so."""
        if not health:
            self.assertJsonError(r, 503, what)
        else:
            self.assertStatus(r, 503, what)
            self.assertNotEqual(r.json().get("status"), "ok", f"{what}: {r!r}")
        self.assertTrue(r.header("Retry-After"), f"{what}: 503 without Retry-After")

    def start(self, redis_address: str, mysql: dict) -> Daemon:
        d = Daemon(namespace=self.namespace(), overrides={
            "redis": {"address": redis_address, "db": 0, "timeout": REDIS_TIMEOUT_MS},
            "mysql": {**mysql, "timeout": MYSQL_TIMEOUT_S}})
        self.addCleanup(d.close)
        d.start(timeout=20)
        return d

    def stays_up(self, d: Daemon, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.assertTrue(d.running, f"hourglassd exited: {d.log_tail(20)}")
            r, took, err = timed(d.health, timeout=20)
            self.assertIsNone(err, f"/health raised {err!r}")
            self.assertLess(took, PROMPT)
            time.sleep(0.2)

    def test_hosts_that_do_not_resolve(self):
        d = self.start("hg-no-such-host.invalid:6379", {"host": "hg-no-such-host.invalid", "port": 3306})
        self.assertPrompt503(d, "Redis and MySQL hosts do not resolve")
        self.stays_up(d, 2.5)
        self.assertPrompt503(d, "still, 2.5 s later")

    def test_redis_port_closed_then_redis_appears(self):
        port = free_port()
        d = self.start(f"127.0.0.1:{port}", {})  # MySQL: the shared one, up
        self.assertPrompt503(d, "Redis connection refused")
        self.stays_up(d, 1.5)
        redis = RedisServer(port=port)
        self.addCleanup(redis.close)
        redis.start()
        wait_until(lambda: d.push({"topic": "u", "body": "back"}).status == 200, 15, 0.1,
                   "pushes to succeed once Redis is there")
        self.assertStatus(d.health(), 200)
        self.assertEqual(self.get_one(d, "u")["body"], "back")

    def test_mysql_port_closed_then_mysql_appears(self):
        port = free_port()
        ns = self.namespace()
        d = Daemon(namespace=ns, overrides={"redis": {"timeout": REDIS_TIMEOUT_MS},
                                            "mysql": {"port": port, "timeout": MYSQL_TIMEOUT_S}})
        self.addCleanup(d.close)
        d.start(timeout=20)
        for name, call in (("health", lambda: d.health(timeout=20)),
                           ("push", lambda: d.push({"topic": "m", "body": 1}, timeout=20))):
            r, took, err = timed(call)
            self.assertIsNone(err, f"{name}: {err!r}")
            self.assertUnavailable(r, name == "health", f"{name} while MySQL refuses connections")
            self.assertLess(took, PROMPT, f"{name} took {took:.1f} s")
        # consumption does not need MySQL, once Redis is connected and the fleet's clock measured
        # on it (one TIME after the keeper connects; contract, "One clock for the fleet"):
        # /health answers as soon as the daemon listens, which can be before every HTTP worker's
        # Redis connection is up
        def consumable():
            h = d.health(timeout=20).json()
            return h.get("redis") == "up" and h.get("clockOffsetMs") is not None
        wait_until(consumable, 10, 0.05, "/health to say Redis is up and the clock measured while MySQL refuses")
        r, took, _ = timed(d.get, "m", timeout=0)
        self.assertEqual(r.status, 204, f"get while MySQL refuses connections: {r!r}")
        self.stays_up(d, 1.5)
        m = MariaDBServer(port=port)
        self.addCleanup(m.close)
        m.start()
        m.create_database(ns.database)
        wait_until(lambda: d.push({"topic": "m", "body": "back"}).status == 200, 20, 0.2,
                   "pushes to succeed once MySQL is there")
        self.assertEqual(self.get_one(d, "m")["body"], "back")


class ShardCountGuardTest(HardeningTestCase):
    """operations.md: "[redis] shards is part of the stored data ... recorded in Redis and an
    instance configured differently refuses to start." That guard must hold when Redis is not
    reachable at the moment the daemon starts: once Redis is there, a daemon configured with
    another shard count must not serve (exit, or keep answering 503), nor write anything."""

    def test_shard_count_checked_when_redis_comes_back(self):
        redis = self.private_redis(persistent=True)
        ns = self.namespace()
        d8 = Daemon(namespace=ns, overrides={"redis": {"address": redis.address, "db": 0, "shards": 8}})
        self.addCleanup(d8.close)
        d8.start()
        wait_until(lambda: d8.push({"topic": "guard", "body": 8}).status == 200, 15, 0.05, "a push with 8 shards")
        d8.stop()
        self.assertEqual(redis.cli("HGET", ns.prefix + ":{w}:meta", "shards", db=0), "8")
        keys_before = sorted(k for k in redis.cli("KEYS", ns.prefix + "*", db=0).split("\n") if ":{w}:" not in k)

        redis.stop()
        d4 = Daemon(namespace=ns, overrides={"redis": {"address": redis.address, "db": 0, "shards": 4,
                                                       "timeout": REDIS_TIMEOUT_MS}})
        self.addCleanup(d4.close)
        d4.start(timeout=20)  # starts: Redis is unreachable, it cannot check yet
        redis.start()
        served = []
        deadline = time.monotonic() + 4.0  # reconnects back off up to 2 s
        while time.monotonic() < deadline and d4.running:
            r, _, err = timed(d4.push, {"topic": "guard", "body": 4}, timeout=10)
            if r is not None and r.status == 200:
                served.append(r.json()["id"])
            time.sleep(0.1)
        keys_after = sorted(k for k in redis.cli("KEYS", ns.prefix + "*", db=0).split("\n") if ":{w}:" not in k)
        self.assertEqual(len(served), 0, f"a daemon with shards = 4 served {len(served)} pushes into data recorded "
                                         f"with 8 shards (it started while Redis was unreachable and never "
                                         f"checked): ids {served[:3]}")
        self.assertEqual(keys_after, keys_before, "keys written under the 8-shard data by a 4-shard daemon")


class Traffic:
    """Producers pushing single jobs, consumers getting (count 5) and finishing them; every
    answer recorded as (kind, status, started, seconds, Retry-After, error code, exception)."""

    def __init__(self, d: Daemon, producers: int = 2, consumers: int = 2):
        self.d = d
        self.lock = threading.Lock()
        self.records: list[tuple] = []
        self.acked: dict[str, float] = {}          # id -> when its push was answered 200
        self.unknown_pushes = 0                    # 503s: not done (or outcome unknown on a hang)
        self.delivered: list[tuple[str, int]] = []  # (id, attempt)
        self.push_answers: dict[int, tuple] = {}   # body "i" -> (status, started, seconds)
        self.delivered_i: dict[int, str] = {}      # body "i" -> id, of every delivered job
        self.finished: dict[str, float] = {}       # id -> when its finish was answered 200
        self.producing = threading.Event()
        self.consuming = threading.Event()
        self.producing.set()
        self.consuming.set()
        self.n = 0
        self.producers = [threading.Thread(target=self._produce, args=(k,), daemon=True) for k in range(producers)]
        self.consumers = [threading.Thread(target=self._consume, daemon=True) for _ in range(consumers)]
        for t in self.producers + self.consumers:
            t.start()

    def _call(self, kind, fn, *args, **kw):
        t = time.monotonic()
        r, took, err = timed(fn, *args, **kw)
        code = None
        if r is not None and r.status >= 400:
            try:
                code = r.json().get("error")
            except ValueError:
                code = f"non-JSON {r.body[:80]!r}"
        with self.lock:
            self.records.append((kind, None if r is None else r.status, t, took,
                                 None if r is None else r.header("Retry-After"), code, err))
        return r

    def _produce(self, k):
        rnd = random.Random(k)
        while self.producing.is_set():
            with self.lock:
                self.n += 1
                i = self.n
            job = {"topic": TOPIC, "body": {"p": k, "i": i}, "ttr": TTR, "delay": rnd.choice((0, 0, 300, 1500))}
            t0 = time.monotonic()
            r = self._call("push", self.d.push, job, timeout=30)
            maybe = []
            if r is not None and r.status == 503:
                maybe = r.json().get("maybeQueued", [])
            with self.lock:
                self.push_answers[i] = (None if r is None else r.status, t0, time.monotonic() - t0, maybe)
            if r is not None and r.status == 200:
                with self.lock:
                    self.acked[r.json()["id"]] = time.monotonic()
            else:
                time.sleep(0.05)
            time.sleep(0.02)

    def _consume(self):
        while self.consuming.is_set():
            r = self._call("get", self.d.get, TOPIC, timeout=GET_WAIT, count=5, http_timeout=30)
            if r is None or r.status != 200:
                if r is None or r.status == 503:
                    time.sleep(0.05)
                continue
            jobs = r.json()
            with self.lock:
                self.delivered += [(j["id"], j["attempt"]) for j in jobs]
                self.delivered_i.update((j["body"]["i"], j["id"]) for j in jobs)
            for j in jobs:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    f = self._call("finish", self.d.finish, j["id"], timeout=30)
                    if f is not None and f.status == 200:
                        with self.lock:
                            self.finished[j["id"]] = time.monotonic()
                        break
                    if f is not None and f.status == 404:
                        break  # lease ran out during the outage: delivered again later
                    time.sleep(0.1)

    def stop_producers(self):
        self.producing.clear()
        for t in self.producers:
            t.join(40)

    def stop(self):
        self.producing.clear()
        self.consuming.clear()
        for t in self.producers + self.consumers:
            t.join(40)

    def delivered_ids(self):
        with self.lock:
            return {i for i, _ in self.delivered}

    def pushes_ok_since(self, t0):
        with self.lock:
            return sum(1 for rec in self.records if rec[0] == "push" and rec[1] == 200 and rec[2] >= t0)


class OutageSequenceTest(HardeningTestCase):
    HOLD = {"redis stopped": 2.0, "mysql stopped": 2.0, "both stopped": 2.0, "mysql hangs": 3.0,
            "redis hangs": 3.0}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.redis = RedisServer(persistent=True)
        cls.addClassCleanup(cls.redis.close)
        cls.redis.start()
        cls.mariadb = MariaDBServer()
        cls.addClassCleanup(cls.mariadb.close)
        cls.mariadb.start()
        db = "hg_outage"
        cls.mariadb.create_database(db)
        ns_redis = shared_stack().fresh_namespace()  # only for a prefix and the Namespace helpers
        cls.d = d = Daemon(namespace=ns_redis, overrides={
            "redis": {"address": cls.redis.address, "db": 0, "timeout": REDIS_TIMEOUT_MS},
            "mysql": {"host": "127.0.0.1", "port": cls.mariadb.port, "database": db, "timeout": MYSQL_TIMEOUT_S},
            "queue": {"default_ttr": TTR}})
        cls.addClassCleanup(d.close)
        d.start()
        d.wait_ready(15)
        cls.q = lambda sql: cls.mariadb.query(sql, db=db)  # noqa: E731

        t = cls.traffic = Traffic(d)
        cls.addClassCleanup(t.stop)
        wait_until(lambda: len(t.finished) >= 20, 20, 0.05, "traffic to flow")

        phases = [
            ("redis stopped", [cls.redis.stop], [cls.redis.start]),
            ("mysql stopped", [cls.mariadb.stop], [cls.mariadb.start]),
            ("both stopped", [cls.redis.stop, cls.mariadb.stop], [cls.mariadb.start, cls.redis.start]),
            ("mysql hangs", [cls.mariadb.pause], [cls.mariadb.resume]),
            ("redis hangs", [cls.redis.pause], [cls.redis.resume]),
        ]
        cls.windows = {}      # name -> (begin, end) monotonic
        cls.health_during = {}
        cls.resumed_after = {}
        for name, begin, end in phases:
            t0 = time.monotonic()
            for f in begin:
                f()
            time.sleep(cls.HOLD[name] * 0.7)  # past the configured timeouts
            cls.health_during[name] = timed(d.health, timeout=30)
            time.sleep(max(0.0, t0 + cls.HOLD[name] - time.monotonic()))
            t1 = time.monotonic()
            for f in end:
                f()
            cls.windows[name] = (t0, t1)
            try:
                wait_until(lambda: t.pushes_ok_since(t1) >= 5, 20, 0.05, f"pushes to succeed after {name}")
                cls.resumed_after[name] = time.monotonic() - t1
            except TimeoutError:
                cls.resumed_after[name] = None
            time.sleep(0.5)

        t.stop_producers()
        cls.acked = dict(t.acked)
        try:  # consumers go on until every acknowledged job was delivered and the topic is empty
            wait_until(lambda: set(cls.acked) <= t.delivered_ids() and cls._topic_empty(), 40, 0.1,
                       "every acknowledged job to be delivered and the topic to drain")
        except TimeoutError:
            pass
        t.stop()
        try:
            wait_until(cls._journal_idle, 30, 0.1, "the journal to catch up")
            cls.journal_caught_up = True
        except TimeoutError:
            cls.journal_caught_up = False
        cls.rows = {r[0]: (r[1], int(r[2]), int(r[3])) for r in
                    cls.q("SELECT id, state, version, attempts FROM message")}
        cls.in_redis = redis_jobs(lambda *a, timeout: cls.redis.cli(*a, db=0, timeout=timeout), d.config["redis"]["prefix"])

    @classmethod
    def _topic_empty(cls):
        r = cls.d.stats(timeout=10)
        if r.status != 200:
            return False
        c = (r.json().get("topics") or {}).get(TOPIC) or {}
        return all(int(c.get(k, 0)) == 0 for k in ("delayed", "ready", "reserved", "dead"))

    @classmethod
    def _journal_idle(cls):
        r = cls.d.stats(timeout=10)
        if r.status != 200:
            return False
        j = r.json()["journal"]
        # and no outcome in doubt: a push answered 503 while Redis hung may have committed its
        # row, which the reconciler marks aborted only once its grace period is over (doubt.h)
        return j["backlog"] == 0 and j["durableWaiting"] == 0 and j["inDoubt"] == 0

    def records(self, kind=None):
        return [r for r in self.traffic.records if kind is None or r[0] == kind]

    # -- promptness and the shape of answers

    def test_no_request_hung_or_lost_its_connection(self):
        errors = [r for r in self.records() if r[6] is not None]
        self.assertEqual(errors, [], "requests that raised (hang past 30 s or a dropped connection)")

    def test_every_answer_prompt(self):
        slow = []
        for kind, status, at, took, _, _, _ in self.records():
            limit = PROMPT + (GET_WAIT if kind == "get" else 0)
            if took > limit:
                phase = next((n for n, (b, e) in self.windows.items() if b - 1 <= at <= e + 1), "no outage")
                slow.append(f"{kind} -> {status} took {took:.2f} s (limit {limit:.1f}) during {phase}")
        self.assertEqual(slow, [], "answers slower than the configured timeouts + 2 s")

    def test_only_contract_statuses(self):
        allowed = {"push": {200, 503}, "get": {200, 204, 503}, "finish": {200, 404, 503}}
        bad = [r[:6] for r in self.records() if r[1] is not None and r[1] not in allowed[r[0]]]
        self.assertEqual(bad, [], "answers outside the contract")

    def test_503s_carry_retry_after_and_the_json_error(self):
        unavailable = [r for r in self.records() if r[1] == 503]
        self.assertTrue(unavailable, "no 503 at all: the outages were not seen")
        bad = [r[:6] for r in unavailable if not r[4] or r[5] != "unavailable"]
        self.assertEqual(bad, [], "503s without Retry-After or the unavailable JSON error")

    # -- each outage seen and recovered from

    def test_each_outage_refused_pushes_and_health(self):
        for name, (b, e) in self.windows.items():
            with self.subTest(name):
                during = [r for r in self.records("push") if b + 1.2 <= r[2] and r[2] + r[3] <= e]
                self.assertTrue(during, f"no push was answered during '{name}'")
                self.assertEqual({r[1] for r in during}, {503}, f"pushes during '{name}'")
                r, took, err = self.health_during[name]
                self.assertIsNone(err, f"/health during '{name}' raised {err!r}")
                self.assertEqual(r.status, 503, f"/health during '{name}': {r!r}")
                self.assertTrue(r.header("Retry-After"))
                self.assertLess(took, PROMPT, f"/health during '{name}' took {took:.1f} s")

    def test_service_resumes_by_itself(self):
        for name, after in self.resumed_after.items():
            with self.subTest(name):
                self.assertIsNotNone(after, f"pushes never succeeded again after '{name}'")
                self.assertLess(after, 10, f"pushes succeeded again only {after:.1f} s after '{name}' ended")

    def test_consumption_goes_on_while_mysql_is_down(self):
        b, e = self.windows["mysql stopped"]
        ok = [r for r in self.records("finish") if r[1] == 200 and b + 0.5 <= r[2] <= e]
        gets = [r for r in self.records("get") if r[1] == 200 and b + 0.5 <= r[2] <= e]
        self.assertTrue(ok or gets, "no job was delivered or finished while MySQL was stopped")

    # -- nothing lost, MySQL agrees

    def test_traffic_flowed(self):
        self.assertGreater(len(self.acked), 100, "too little traffic for the test to mean much")
        self.assertTrue(self.journal_caught_up, "the journal never caught up (backlog or durable waiters left)")

    def test_zero_lost_acknowledged_jobs(self):
        """Every push answered 200 was delivered, or is still live in Redis; and (the consumers
        having polled until the topic was empty) every one ends finished in MySQL. A finish
        answered 503 while Redis hung may have happened anyway (outcome unknown): the job is
        then finished without a 200, which is fine."""
        t = self.traffic
        delivered = t.delivered_ids()
        lost = [i for i in self.acked if i not in delivered and i not in self.in_redis]
        self.assertEqual(lost, [], f"{len(lost)} of {len(self.acked)} acknowledged jobs neither delivered nor in "
                                   f"Redis; MySQL rows: {[(i, self.rows.get(i)) for i in lost[:10]]}")
        unfinished = [i for i in self.acked if (self.rows.get(i) or ("",))[0] != "finished"]
        self.assertEqual(unfinished, [], f"{len(unfinished)} acknowledged jobs not finished although consumers "
                                         f"polled until the topic was empty: (id, Redis, MySQL) "
                                         f"{[(i, self.in_redis.get(i), self.rows.get(i)) for i in unfinished[:10]]}")

    def test_mysql_agrees_with_redis(self):
        t = self.traffic
        problems = []
        for i in self.acked:
            row = self.rows.get(i)
            if row is None:
                problems.append(f"{i}: acknowledged push has no message row")
            elif i in t.finished and row[0] != "finished":
                problems.append(f"{i}: finish answered 200, MySQL says {row}")
        for i, (state, ver, att) in self.in_redis.items():
            row = self.rows.get(i)
            if row is None:
                problems.append(f"{i}: in Redis ({state}) without a message row")
            elif row[0] != state or row[1] != ver:
                problems.append(f"{i}: Redis {state} v{ver}, MySQL {row[0]} v{row[1]}")
        for i, (state, ver, att) in self.rows.items():
            if state in ("delayed", "ready", "reserved") and i not in self.in_redis:
                problems.append(f"{i}: MySQL says {state} v{ver}, Redis has no such job "
                                f"(acknowledged {i in self.acked}, finished {i in t.finished})")
        for i in t.delivered_ids():
            row = self.rows.get(i)
            if row is None or row[0] == "aborted":
                problems.append(f"{i}: delivered, but its message row is {row} (acknowledged {i in self.acked})")
        self.assertEqual(problems, [], f"{len(problems)} disagreements between MySQL and Redis:\n"
                         + "\n".join(problems[:30]))

    def test_refused_pushes_are_not_delivered(self):
        """A push answered 503 did nothing (contract: MySQL down -> nothing in Redis; Redis down
        -> 503), unless the daemon said otherwise: when Redis was sent the push but its answer
        was lost (Redis hung, or stopped right after running it), the 503 lists the job under
        maybeQueued. So every delivered job whose push was not answered 200 must have been
        named, by id, in its push's maybeQueued."""
        t = self.traffic
        wrong = []
        for i, job_id in sorted(t.delivered_i.items()):
            status, at, took, maybe = t.push_answers.get(i, (None, 0, 0, []))
            if status == 200 or job_id in maybe:
                continue
            phase = next((n for n, (b, e) in self.windows.items() if b - 0.1 <= at + took and at <= e + 0.1),
                         "no outage")
            wrong.append(f"push #{i} answered {status} (maybeQueued {maybe}) after {took:.2f} s during "
                         f"'{phase}' was delivered as {job_id}")
        self.assertEqual(wrong, [], "pushes refused with 503 that happened anyway:\n" + "\n".join(wrong))

    def test_maybe_queued_names_one_job_per_single_push(self):
        """A 503 naming jobs under maybeQueued names the push's own job and no other (these are
        single pushes). Whether any push of this run was caught in flight by the Redis hang
        depends on timing (test_core_redis_outage makes it happen on purpose); the property
        that matters here, that every refused push later delivered was named, is
        test_refused_pushes_are_not_delivered."""
        t = self.traffic
        with t.lock:
            named = [a for a in t.push_answers.values() if a[3]]
        self.assertTrue(all(a[0] == 503 and len(a[3]) == 1 for a in named), f"{named[:5]}")

    def test_no_job_delivered_twice_inside_one_lease(self):
        seen = {}
        for i, attempt in self.traffic.delivered:
            self.assertNotIn((i, attempt), seen, f"job {i} delivered twice with attempt {attempt}")
            seen[(i, attempt)] = True


class PurgeDuringMySQLOutageTest(HardeningTestCase):
    """A purge while MySQL goes down: it stops with a prompt 503 naming the journal (a purge
    waits for the journal after every batch, purge.c pace, so it stops deleting once MySQL
    cannot record what it deletes), nothing it had deleted comes back, and purging again once
    MySQL is back finishes the work, every purged job's row ending 'deleted'."""

    N = 6000

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.redis = RedisServer()
        cls.addClassCleanup(cls.redis.close)
        cls.redis.start()
        cls.mariadb = MariaDBServer()
        cls.addClassCleanup(cls.mariadb.close)
        cls.mariadb.start()
        cls.db = "hg_purge_outage"
        cls.mariadb.create_database(cls.db)
        cls.d = d = Daemon(namespace=shared_stack().fresh_namespace(), overrides={
            "redis": {"address": cls.redis.address, "db": 0, "timeout": REDIS_TIMEOUT_MS},
            "mysql": {"host": "127.0.0.1", "port": cls.mariadb.port, "database": cls.db,
                      "timeout": MYSQL_TIMEOUT_S},
            "http": {"max_body": 1 << 20}})
        cls.addClassCleanup(d.close)
        d.start()
        d.wait_ready(15)

    def purge(self, timeout: float):
        return self.d.request("POST", "/topics/pg.outage/purge", params={"state": "all"}, timeout=timeout)

    def test_purge_stops_with_503_and_finishes_after(self):
        d, topic = self.d, "pg.outage"
        ids: list[str] = []
        for first in range(0, self.N, 1000):
            r = d.push([{"topic": topic, "body": {"i": first + i}, "delay": 600_000} for i in range(1000)],
                       timeout=60)
            ids += self.assertJsonOk(r)["ids"]
        self.wait_counts(d, topic, delayed=self.N, timeout=30)
        wait_until(lambda: self.mariadb.query("SELECT COUNT(*) FROM message WHERE state = 'delayed'",
                                              db=self.db) == [(str(self.N),)], 30, 0.1, "the pushes' rows")

        answer: list = []
        purger = threading.Thread(target=lambda: answer.append(timed(self.purge, 120)))
        purger.start()
        wait_until(lambda: self.counts(d, topic)["delayed"] < self.N, 20, 0.02, "the purge to begin")
        self.mariadb.stop()
        stopped = time.monotonic()
        try:
            purger.join(60)
            self.assertFalse(purger.is_alive(), "the purge did not answer within 60 s of MySQL stopping")
            r, _, err = answer[0]
            self.assertIsNone(err, "the purge's request failed")
            self.assertLess(time.monotonic() - stopped, PROMPT + 10, "the purge's 503 came late")
            body = self.assertJsonError(r, 503, "a purge while MySQL is down")
            self.assertIn("journal", body["message"])
            self.assertIn("purge again to finish", body["message"])
            self.assertTrue(r.header("Retry-After"), "503 without Retry-After")
            left = self.counts(d, topic)["delayed"]
            self.assertGreater(left, 0, "the purge went on deleting while MySQL was down")
        finally:
            self.mariadb.start()
        wait_until(lambda: d.health(timeout=5).status == 200, 30, 0.1, "health after MySQL is back")
        # nothing the first purge deleted comes back, and purging again finishes the work
        self.assertLessEqual(self.counts(d, topic)["delayed"], left)
        obj = self.assertJsonOk(self.purge(300))
        self.assertGreater(obj["deleted"], 0)
        self.wait_counts(d, topic, timeout=30)
        wait_until(lambda: self.mariadb.query("SELECT state, COUNT(*) FROM message GROUP BY state", db=self.db)
                   == [("deleted", str(self.N))], 60, 0.2, "every purged job's row 'deleted'")


if __name__ == "__main__":
    unittest.main(verbosity=2)
