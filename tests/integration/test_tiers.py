"""Tiers (issue 13; shared/contract.md "Tiers"; docs/architecture.md "Tiers"): Redis holds the near
future only, MySQL the rest, and the pager moves far jobs into Redis before they come due.

Real Redis and MariaDB (the harness's), one or two hourglassd instances per class:
* FarBacklogTest: 200,000 far jobs cost Redis ~nothing, MySQL and /stats hold them; /metrics
  and /stats show the tiers and the pager; FLUSHALL + /reStore reloads the near jobs only,
  fast, and far jobs (and their bizKeys) live on.
* PagingTwoInstancesTest: jobs just beyond a short horizon page in on two instances and are
  delivered once, on time; the tiers' counts add up afterwards.
* FarJobOperationsTest: inspect, delete, reschedule both ways, bizKey dedupe and replace of
  far jobs; deletes racing the pager; release beyond the horizon.
* PagerCrashTest: kill -9 of the pager mid-bucket, then a restart or a takeover.
* PagerPacingTest: a bucket with time to spare is paged at the paced rate, and a reschedule's
  page-now is not held up by the pacing.
* IdlePagerTest: an idle pager asks MySQL one count a tick, and still pages on time.

What the horizon settings below mean (the spec's formulas):
    lead   = horizon - min(60 s, horizon / 2) how far ahead of its due time a job is paged in
    bucket = clamp(horizon / 8, 50 ms, 10 s) paging granularity
    a job due at T is in Redis by about T - lead (its whole bucket is loaded at once, so it
    may be up to one bucket earlier), give or take one 100 ms pager tick.

Tolerances, and why:
* "not earlier than runAt": a consumer reads its clock after the answer arrived, on the same
  machine and clock as the daemon (CLOCK_REALTIME, ms); 2 ms cover ms rounding only.
* LATE_MS = 1000 ms "not later than": a paged job sits in Redis at least lead - one tick
  (>= 1.4 s here) before it is due, so from then on it is delivered by the ordinary near path,
  which takes milliseconds; what is left is a busy 2-core box (two daemons, MariaDB, Redis and
  the Python consumer threads sharing two cores) delaying a thread by some hundred ms, and the
  mover's once-a-second re-check of every shard, which bounds a missed precise wake-up at 1 s
  (test_fleet_e2e allows 1.5 s only because it also kills an instance).
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import random
import threading
import time
import urllib.parse
from typing import Any, Iterable

from harness import (HOST, CheckedHTTPConnection, Daemon, HourglassTestCase, RedisServer, journal_idle, now_ms,
                     topic_shard, topics_one_per_shard, wait_until)

SHARDS = 8
LATE_MS = 1000          # see the module docstring
EARLY_SLACK_MS = 2      # ms rounding only
DAY = 86_400_000


# --------------------------------------------------------------------------- helpers

def spec_timing(horizon: int) -> tuple[int, int]:
    """(lead, bucket) in ms as the spec defines them."""
    return horizon - min(60_000, horizon // 2), max(50, min(10_000, horizon // 8))


class Client:
    """One keep-alive HTTP connection to a daemon (one per thread): thousands of finishes or
    deletes without a TCP handshake each. Reconnects once when the server closed it."""

    def __init__(self, d: Daemon, timeout: float = 30.0) -> None:
        self.port = d.port
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: Any = None,
                timeout: float | None = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = CheckedHTTPConnection(HOST, self.port, timeout=timeout or self.timeout)
            try:
                if timeout is not None:
                    self.conn.timeout = timeout
                    if self.conn.sock is not None:
                        self.conn.sock.settimeout(timeout)
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                payload = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return r.status, (json.loads(payload) if payload else None)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def q(params: dict) -> str:
    return urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})


class Consumers:
    """Consumer threads long-polling `topics` on the given daemons (several threads per daemon
    allowed), finishing what they get when `finish` is set. Every delivery is recorded as
    (id, received wall-clock ms, the job object, which daemon). stop() ends them."""

    def __init__(self, daemons: Iterable[Daemon], topics: list[str], finish: bool = True,
                 count: int = 10, poll_s: float = 1.0) -> None:
        self.deliveries: list[tuple[str, int, dict, int]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = []
        path = "/get/" + ",".join(topics) + "?" + q({"timeout": poll_s, "count": count})
        for i, d in enumerate(daemons):
            t = threading.Thread(target=self._run, args=(i, d, path, finish), daemon=True)
            self._threads.append(t)
            t.start()

    def _run(self, i: int, d: Daemon, path: str, finish: bool) -> None:
        c = Client(d)
        try:
            while not self._stop.is_set():
                try:
                    status, body = c.request("GET", path, timeout=15)
                except OSError as e:
                    if self._stop.is_set():
                        return
                    with self._lock:
                        self.errors.append(f"consumer {i}: {e!r}")
                    time.sleep(0.05)
                    continue
                got_ms = now_ms()
                if status == 204:
                    continue
                if status != 200:
                    with self._lock:
                        self.errors.append(f"consumer {i}: GET answered {status}: {body}")
                    time.sleep(0.05)
                    continue
                jobs = body if isinstance(body, list) else [body]
                with self._lock:
                    self.deliveries += [(j["id"], got_ms, j, i) for j in jobs]
                if finish:
                    for j in jobs:
                        st, fb = c.request("GET", "/finish?" + q({"id": j["id"]}))
                        if st != 200:
                            with self._lock:
                                self.errors.append(f"consumer {i}: finish {j['id']} answered {st}: {fb}")
        finally:
            c.close()

    def ids(self) -> list[str]:
        with self._lock:
            return [x[0] for x in self.deliveries]

    def count(self) -> int:
        with self._lock:
            return len(self.deliveries)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)


def pmap(fn, items, workers: int = 4) -> list:
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(fn, items))


def ok(r, what: str) -> Any:
    if r.status != 200:
        raise AssertionError(f"{what}: expected 200, got {r.status}: {r.text[:500]}")
    return r.json()


def stats(d: Daemon) -> dict:
    return ok(d.stats(timeout=10), "/stats")


def far_total(d: Daemon) -> int:
    return int(stats(d)["totals"].get("far", -1))


def used_memory(r: RedisServer) -> int:
    for line in r.cli("INFO", "memory").splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":", 1)[1])
    raise AssertionError("INFO memory has no used_memory")


def metric_values(text: str, name: str) -> dict[str, float]:
    """{labels-string: value} of every sample of metric `name` (exact name, any labels)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        rest = line[len(name):]
        if rest.startswith("{"):
            labels, _, value = rest[1:].partition("} ")
        elif rest.startswith(" "):
            labels, value = "", rest[1:]
        else:
            continue  # a longer name with this prefix
        out[labels] = float(value.split()[0])
    return out


def act_on_schedule(d: Daemon, plan: list[tuple[int, str]], act) -> None:
    """Four client threads share plan [(when ms, job id)]: each calls act(client, id) at each of
    its times (the races with the pager aim at each job's own page-in time)."""
    def worker(part: list[tuple[int, str]]) -> None:
        c = Client(d)
        try:
            for at, jid in part:
                wait = (at - now_ms()) / 1000
                if wait > 0:
                    time.sleep(wait)
                act(c, jid)
        finally:
            c.close()
    threads = [threading.Thread(target=worker, args=(plan[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


class TiersCase(HourglassTestCase):
    """Helpers shared by the classes below."""

    maxDiff = None

    def wait_for(self, predicate, timeout: float, what: str, detail=None) -> Any:
        try:
            return wait_until(predicate, timeout, 0.05, what)
        except TimeoutError as e:
            self.fail(f"{e}" + (f"\n{detail()}" if detail else ""))

    def push_ids(self, d: Daemon, jobs: list[dict]) -> list[str]:
        obj = ok(d.push(jobs, timeout=120), f"push of {len(jobs)} jobs")
        self.assertEqual(len(obj["ids"]), len(jobs), obj)
        return obj["ids"]

    def push_one(self, d: Daemon, job: dict, retry_s: float = 0) -> dict:
        """Push one job; with retry_s, a 503 with Retry-After is retried (as a client does)
        for up to retry_s seconds."""
        deadline = time.monotonic() + retry_s
        r = d.push(job)
        while r.status == 503 and r.header("Retry-After") and time.monotonic() < deadline:
            time.sleep(0.1)
            r = d.push(job)
        obj = ok(r, f"push {job}")
        self.assertIsInstance(obj.get("id"), str, obj)
        return obj

    def inspect(self, d: Daemon, jid: str) -> dict:
        return ok(d.job(jid), f"/jobs/{jid}")

    def assertFar(self, d: Daemon, jid: str, run_at: int | None = None) -> dict:
        j = self.inspect(d, jid)
        self.assertEqual(j.get("state"), "delayed", f"a far job shows as delayed: {j}")
        self.assertEqual(j.get("tier"), "mysql", f"a far job has tier mysql: {j}")
        if run_at is not None:
            self.assertEqual(j.get("runAt"), run_at, j)
        return j

    def assertInRedis(self, d: Daemon, jid: str) -> dict:
        j = self.inspect(d, jid)
        self.assertNotIn("tier", j, f"a job in Redis has no tier member: {j}")
        return j

    def wait_paged(self, d: Daemon, jid: str, timeout: float) -> dict:
        """Poll /jobs/{id} until it has no tier member (it is in Redis); the job."""
        last: dict = {}

        def paged() -> bool:
            nonlocal last
            last = self.inspect(d, jid)
            return "tier" not in last
        self.wait_for(paged, timeout, f"job {jid} to be paged into Redis", lambda: f"last /jobs: {last}")
        return last

    def assertNeverDelivered(self, d: Daemon, topics: list[str], until_ms: int, allowed: set[str] = frozenset(),
                             what: str = "") -> list[dict]:
        """Long-poll `topics` until wall-clock until_ms: anything delivered must be in `allowed`
        (and is finished); returns what was delivered."""
        got: list[dict] = []
        while True:
            left = until_ms - now_ms()
            if left <= 0:
                return got
            r = d.get(topics, timeout=round(min(1.0, max(0.1, left / 1000)), 2), count=10)
            if r.status == 204:
                continue
            body = ok(r, "GET /get")
            for j in (body if isinstance(body, list) else [body]):
                if j["id"] not in allowed:
                    self.fail(f"{what}: job {j['id']} was delivered, it must never be: {j}")
                got.append(j)
                d.finish(j["id"])

    def assertOnTime(self, deliveries: list[tuple[str, int, dict, int]], late_ms: int = LATE_MS) -> list[int]:
        """Every delivery between runAt and runAt + late_ms (received wall clock); lateness list."""
        lateness = []
        early, late = [], []
        for jid, got_ms, job, _ in deliveries:
            lag = got_ms - job["runAt"]
            lateness.append(lag)
            if lag < -EARLY_SLACK_MS:
                early.append((jid, lag))
            elif lag > late_ms:
                late.append((jid, lag))
        self.assertEqual(early, [], "delivered before runAt (id, ms)")
        self.assertEqual(late, [], f"delivered more than {late_ms} ms after runAt (id, ms)")
        return lateness


def start_ready_class(cls, overrides: dict, namespace=None) -> Daemon:
    """A daemon for a whole class (stopped by the class cleanups), ready for pushes."""
    d = Daemon(namespace=namespace, overrides=overrides)
    cls.addClassCleanup(d.close)
    d.start()
    d.wait_ready(30)
    return d


# --------------------------------------------------------------------------- 1 + 5 + 6: a deep far backlog

class FarBacklogTest(TiersCase):
    """200,000 jobs due in 1-30 days on one instance with its own Redis (INFO memory and a real
    FLUSHALL concern that Redis alone; MySQL is the shared MariaDB). The tests run in name
    order: the memory and counts first, the FLUSHALL + /reStore last."""

    N = 200_000
    BATCH = 1000                    # [http] max_batch's default
    HORIZON = 4000
    TOPICS = [f"far.t{i}" for i in range(8)]

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.redis = RedisServer()
        cls.addClassCleanup(cls.redis.close)
        cls.redis.start()
        cls.d = start_ready_class(cls, {
            "redis": {"address": cls.redis.address, "db": 0},
            "http": {"max_body": 4 << 20, "threads": 2},
            "queue": {"horizon": cls.HORIZON}})
        cls.ns = cls.d.namespace
        # journal and fleet settle their keys in the first second; the baseline is taken
        # once the instance has written its first heartbeat (visible in /stats' fleet view)
        wait_until(lambda: stats(cls.d)["fleet"]["instances"], 10, 0.05, "the first heartbeat")
        cls.mem_before = used_memory(cls.redis)
        rng = random.Random(1313)
        batches = []
        for b in range(cls.N // cls.BATCH):
            t = now_ms()
            batches.append([{"topic": cls.TOPICS[(b * cls.BATCH + i) % len(cls.TOPICS)],
                             "body": {"n": b * cls.BATCH + i},
                             "runAt": t + rng.randrange(1 * DAY, 30 * DAY)} for i in range(cls.BATCH)])
        t0 = time.monotonic()

        def push(batch):
            r = cls.d.push(batch, timeout=120)
            if r.status != 200:
                raise AssertionError(f"far push answered {r.status}: {r.text[:300]}")
            return r.json()["ids"]
        cls.ids = [i for ids in pmap(push, batches, workers=4) for i in ids]
        cls.push_s = time.monotonic() - t0
        cls.mem_after = used_memory(cls.redis)

    def test_1_far_jobs_cost_redis_almost_nothing(self):
        self.assertEqual(len(set(self.ids)), self.N)
        growth = self.mem_after - self.mem_before
        # The target is <= 8 bytes of Redis per far job (a far job without a bizKey
        # should cost none at all: no Redis write). 1 MiB on top covers what moves in Redis
        # meanwhile whatever the jobs: heartbeats, id leases, client buffers of the daemon's
        # connections. A near job costs ~230 bytes + body, i.e. ~50 MB for 200,000: this
        # bound is 20 times below that.
        bound = 8 * self.N + (1 << 20)
        print(f"\n[tiers] pushed {self.N} far jobs in {self.push_s:.1f} s "
              f"({self.N / self.push_s:.0f}/s); Redis used_memory {self.mem_before} -> {self.mem_after} "
              f"(+{growth} B, {growth / self.N:.2f} B/job; bound {bound})", flush=True)
        self.assertLess(growth, bound, f"Redis grew by {growth} B for {self.N} far jobs")

        # MySQL holds every one of them, as far rows
        q = self.ns.query
        self.assertEqual(int(q("SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL")[0][0]), self.N)
        self.assertEqual(int(q("SELECT COALESCE(SUM(jobs),0) FROM far_count")[0][0]), self.N)
        self.assertEqual(int(q("SELECT COUNT(*) FROM message WHERE state = 'far'")[0][0]), self.N)
        per_topic = dict(q("SELECT topic, jobs FROM far_count"))
        self.assertEqual({t: int(n) for t, n in per_topic.items()},
                         {t: self.N // len(self.TOPICS) for t in self.TOPICS})

        # /stats shows them: delayed includes far, per topic and in the totals (may lag 0.5 s)
        want_topic = self.N // len(self.TOPICS)
        last: dict = {}

        def counted() -> bool:
            nonlocal last
            last = stats(self.d)
            tops = last.get("topics", {})
            return (last["totals"].get("far") == self.N and last["totals"].get("delayed") == self.N
                    and all(tops.get(t, {}).get("far") == want_topic
                            and tops.get(t, {}).get("delayed") == want_topic for t in self.TOPICS))
        self.wait_for(counted, 5, "/stats to count the far jobs",
                      lambda: json.dumps({"totals": last.get("totals"), "topics": last.get("topics")})[:2000])
        for k in ("ready", "reserved", "dead"):
            self.assertEqual(last["totals"].get(k), 0, last["totals"])

        # a sample of them inspected: delayed, tier mysql
        for jid in random.Random(7).sample(self.ids, 5):
            self.assertFar(self.d, jid)

    def test_2_metrics_and_stats_show_the_tiers(self):
        text = ok_text(self.d.metrics(timeout=10), "/metrics")
        tier = metric_values(text, "hourglass_jobs_tier")
        self.assertIn('tier="mysql"', tier, f"hourglass_jobs_tier samples: {tier}")
        self.assertIn('tier="redis"', tier, f"hourglass_jobs_tier samples: {tier}")
        # gauges refreshed from far_count twice a second: poll
        self.wait_for(lambda: metric_values(ok_text(self.d.metrics(timeout=10), "/metrics"),
                                            "hourglass_jobs_tier").get('tier="mysql"', -1) >= self.N,
                      5, 'hourglass_jobs_tier{tier="mysql"} to count the far jobs',
                      lambda: str(metric_values(ok_text(self.d.metrics(), "/metrics"), "hourglass_jobs_tier")))
        # (samples of the counter and the histogram are asserted where paging happened:
        # PagingTwoInstancesTest; nothing has been paged here yet)
        self.assertTrue(metric_values(text, "hourglass_pager_lag_seconds"),
                        "/metrics has no hourglass_pager_lag_seconds")
        self.assertRegex(text, r"(?m)^# TYPE hourglass_pager_paged_total counter$")
        self.assertRegex(text, r"(?m)^# TYPE hourglass_pager_lag_seconds gauge$")
        self.assertRegex(text, r"(?m)^# TYPE hourglass_pager_bucket_jobs histogram$")
        self.assertRegex(text, r"(?m)^# TYPE hourglass_jobs_tier gauge$")

        pager = stats(self.d).get("pager")
        self.assertIsInstance(pager, dict, "/stats has a pager member")
        lead, bucket = spec_timing(self.HORIZON)
        self.assertEqual({k: pager.get(k) for k in ("horizon", "lead", "bucket", "shards")},
                         {"horizon": self.HORIZON, "lead": lead, "bucket": bucket, "shards": SHARDS}, pager)
        for k in ("lag", "paged"):
            self.assertIsInstance(pager.get(k), int, pager)
        self.assertGreaterEqual(pager["paged"], 0)

    def test_3_flushall_restore_is_fast_and_far_jobs_still_come_due(self):
        d, rng = self.d, random.Random(99)
        topic_near, topic_soon, topic_biz = "far.near", "far.soon", "far.biz"
        # a few near jobs (within the horizon): what /reStore must bring back
        near_ids = self.push_ids(d, [{"topic": topic_near, "body": i, "delay": 0 if i % 2 else 2000}
                                     for i in range(30)])
        # far jobs holding bizKeys, due in days
        biz_far = {f"bk-{i}": self.push_one(d, {"topic": topic_biz, "bizKey": f"bk-{i}", "body": i,
                                                "delay": 2 * DAY + i})["id"] for i in range(20)}
        # far jobs due just beyond the horizon: they page in after the restore
        t_push = now_ms()
        soon_at = {}
        soon_jobs = [{"topic": topic_soon, "body": i, "runAt": t_push + 9000 + rng.randrange(0, 2000)}
                     for i in range(100)]
        soon_jobs[0]["bizKey"] = "soon-biz"
        for jid, j in zip(self.push_ids(d, soon_jobs), soon_jobs):
            soon_at[jid] = j["runAt"]
        soon_biz_id = next(i for i, j in zip(soon_at, soon_jobs) if j.get("bizKey"))
        self.assertFar(d, soon_biz_id)
        # the near jobs' rows are final in MySQL (pushes commit; the journal idle)
        self.wait_for(lambda: journal_idle(d), 10, "the journal to be idle")

        # ---- Redis loses everything
        self.redis.cli("FLUSHALL")
        t0 = time.monotonic()
        r = d.restore(expire=True, timeout=60)
        restore_s = time.monotonic() - t0
        res = ok(r, "/reStore?expire=true")
        print(f"\n[tiers] /reStore with {self.N + 120} far jobs pending: {restore_s * 1000:.0f} ms, {res}",
              flush=True)
        self.assertLess(now_ms(), min(soon_at.values()) - 2500,
                        "the restore took so long that the soon jobs may have paged before it: test is void")
        # fast: the target is 5 s with 10 million far jobs; far rows are not reloaded
        self.assertLess(restore_s, 3.0, f"/reStore took {restore_s:.2f} s with a deep far backlog")
        self.assertEqual(res["restored"], len(near_ids), f"restored only the near jobs: {res}")
        self.assertEqual(res["present"], 0, res)
        self.assertEqual(res["expiredSkipped"], 0, res)
        self.assertLess(res["scanned"], 1000, f"the restore scanned the far backlog: {res}")

        # the instance lost its worker-id lease with the rest of Redis: once it notices, pushes
        # answer 503 (Retry-After) until it holds one again, as after any Redis loss; the
        # pushes below retry as a client does (push_one's retry_s)
        # far jobs are still far and counted as such
        self.assertFar(d, self.ids[0])
        self.assertFar(d, soon_biz_id, soon_at[soon_biz_id])
        want_far = self.N + len(biz_far) + len(soon_at)
        self.wait_for(lambda: far_total(d) == want_far, 5, f"/stats totals.far = {want_far}",
                      lambda: str(stats(d)["totals"]))

        # far bizKeys still dedupe after the restore (the holder's id, duplicate)
        for key, jid in biz_far.items():
            a = self.push_one(d, {"topic": topic_biz, "bizKey": key, "body": "again", "delay": 1000}, retry_s=15)
            self.assertEqual((a["id"], a.get("duplicate")), (jid, True), f"bizKey {key} after the restore: {a}")
        a = self.push_one(d, {"topic": topic_soon, "bizKey": "soon-biz", "body": "again"}, retry_s=15)
        self.assertEqual((a["id"], a.get("duplicate")), (soon_biz_id, True), a)
        fresh = self.push_one(d, {"topic": topic_biz, "bizKey": "never-used", "delay": 3 * DAY}, retry_s=15)
        self.assertFalse(fresh.get("duplicate"), fresh)

        # the near jobs are back and deliverable; the soon ones page in and come due on time
        cons = Consumers([d, d, d], [topic_near, topic_soon], finish=True)
        try:
            want = set(near_ids) | set(soon_at)
            self.wait_for(lambda: set(cons.ids()) >= want, (max(soon_at.values()) - now_ms()) / 1000 + 10,
                          "every near and soon job to be delivered",
                          lambda: f"missing {len(want - set(cons.ids()))}; errors {cons.errors[:5]}")
            # a moment past the last due time: nothing more (no second delivery) arrives
            time.sleep(0.5)
        finally:
            cons.stop()
        ids = cons.ids()
        self.assertEqual(sorted(ids), sorted(want), "each near and soon job delivered exactly once")
        self.assertEqual(cons.errors, [])
        self.assertOnTime([x for x in cons.deliveries if x[0] in soon_at])


def ok_text(r, what: str) -> str:
    if r.status != 200:
        raise AssertionError(f"{what}: expected 200, got {r.status}: {r.text[:300]}")
    return r.text


# --------------------------------------------------------------------------- 2 + 6: paging, two instances

class PagingTwoInstancesTest(TiersCase):
    HORIZON = 3000

    def test_jobs_beyond_the_horizon_page_in_and_are_delivered_once_on_time(self):
        ov = {"queue": {"horizon": self.HORIZON}, "http": {"max_body": 1 << 20}}
        a = self.start_daemon(ov)
        b = self.start_daemon(ov, namespace=a.namespace)
        for d in (a, b):
            d.wait_ready(30)
        ns = a.namespace
        # both instances see each other, so shard ownership (and paging) is split and stable
        self.wait_for(lambda: all(len(stats(d)["fleet"]["instances"]) == 2 for d in (a, b)), 10,
                      "both instances to see the fleet of two")
        lead, bucket = spec_timing(self.HORIZON)
        topics = topics_one_per_shard("pg.t")
        rng = random.Random(2024)
        n = 400
        t0 = now_ms()
        jobs = [{"topic": topics[i % len(topics)], "body": {"i": i},
                 "runAt": t0 + rng.randrange(4000, 10_000)} for i in range(n)]
        ids = self.push_ids(a, jobs[:n // 2]) + self.push_ids(b, jobs[n // 2:])
        run_at = {jid: j["runAt"] for jid, j in zip(ids, jobs)}
        self.assertEqual(len(run_at), n)
        pushed_at = now_ms()
        self.assertLess(pushed_at, t0 + 4000 - self.HORIZON, "pushing took too long: the first jobs were near")

        # before paging: a sample, including the earliest, is far on either instance
        earliest = sorted(run_at, key=run_at.get)[:5]
        for jid in earliest + rng.sample(ids, 10):
            self.assertFar(rng.choice((a, b)), jid, run_at[jid])
        self.assertLess(now_ms(), min(run_at.values()) - lead - bucket - 100,
                        "inspecting took so long that paging may have begun: test is void")
        self.wait_for(lambda: far_total(a) == n and far_total(b) == n, 3, f"/stats totals.far = {n} on both")
        self.assertEqual(int(ns.query("SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL")[0][0]), n)

        # one job watched while it pages in: in Redis (no tier) well before it is due
        latest = max(run_at, key=run_at.get)
        cons = Consumers([a, a, b, b], topics, finish=True)
        try:
            j = self.wait_paged(b, latest, (run_at[latest] - now_ms()) / 1000 + 2)
            paged_ms = now_ms()
            self.assertEqual(j["state"], "delayed", j)
            self.assertEqual(j["runAt"], run_at[latest], j)
            # in Redis by T - lead (+ one tick): asserted with 1 s of slack for a busy box
            self.assertLessEqual(paged_ms, run_at[latest] - lead + 1000,
                                 f"job due at {run_at[latest]} was paged only at {paged_ms}")
            self.wait_for(lambda: cons.count() >= n, (max(run_at.values()) - now_ms()) / 1000 + 5,
                          f"all {n} jobs to be delivered",
                          lambda: f"{cons.count()} delivered; errors {cons.errors[:5]}")
            # nothing more arrives a little after the last one was due (no second delivery)
            self.wait_for(lambda: now_ms() > max(run_at.values()) + 1000, 15, "a second past the last due time")
        finally:
            cons.stop()
        self.assertEqual(cons.errors, [])
        got = cons.ids()
        dup = {i for i in got if got.count(i) > 1}
        self.assertEqual(dup, set(), "delivered more than once")
        self.assertEqual(set(got), set(run_at), "every job delivered, none lost")
        for jid, _, job, _ in cons.deliveries:
            self.assertEqual((job["runAt"], job["attempt"]), (run_at[jid], 1), job)
        lateness = self.assertOnTime(cons.deliveries)
        lateness.sort()
        print(f"\n[tiers] paging: {n} jobs, lateness ms p50 {lateness[n // 2]} p99 {lateness[n * 99 // 100]} "
              f"max {lateness[-1]}; by instance {[sum(1 for x in cons.deliveries if x[3] // 2 == k) for k in (0, 1)]}",
              flush=True)

        # after paging: no longer in the MySQL tier, the backlog empty, counts say so
        for jid in earliest:
            j = self.inspect(a, jid)
            self.assertEqual(j["state"], "finished", j)
            self.assertNotEqual(j.get("tier"), "mysql", j)
        # The tier's bookkeeping, all at once (one failure message shows every figure): nothing
        # is far any more, and between them the two pagers paged every job once. /stats and the
        # tier gauge are refreshed from far_count twice a second: give them a second.
        def bookkeeping() -> dict:
            pa, pb = stats(a)["pager"], stats(b)["pager"]
            ma, mb = ok_text(a.metrics(), "/metrics"), ok_text(b.metrics(), "/metrics")
            return {
                "far keys": int(ns.query("SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL")[0][0]),
                "far_count rows <> 0": ns.query("SELECT topic, jobs FROM far_count WHERE jobs <> 0"),
                "far_mark paged (sum)": int(ns.query("SELECT COALESCE(SUM(paged),0) FROM far_mark")[0][0]),
                "/stats totals.far (a, b)": (far_total(a), far_total(b)),
                "/stats pager.paged (a + b)": pa["paged"] + pb["paged"],
                "/stats pager.shards (a + b)": pa["shards"] + pb["shards"],
                "hourglass_pager_paged_total (a + b)": sum(metric_values(ma, "hourglass_pager_paged_total").values())
                + sum(metric_values(mb, "hourglass_pager_paged_total").values()),
                'hourglass_jobs_tier{tier="mysql"} (a, b)': (
                    metric_values(ma, "hourglass_jobs_tier").get('tier="mysql"'),
                    metric_values(mb, "hourglass_jobs_tier").get('tier="mysql"')),
            }
        want = {"far keys": 0, "far_count rows <> 0": [], "far_mark paged (sum)": n,
                "/stats totals.far (a, b)": (0, 0), "/stats pager.paged (a + b)": n,
                "/stats pager.shards (a + b)": SHARDS, "hourglass_pager_paged_total (a + b)": float(n),
                'hourglass_jobs_tier{tier="mysql"} (a, b)': (0.0, 0.0)}
        seen: dict = {}

        def settled() -> bool:
            nonlocal seen
            seen = bookkeeping()
            return seen == want
        try:
            wait_until(settled, 1.5, 0.1, "the tier bookkeeping")
        except TimeoutError:
            pass
        self.assertEqual(seen, want, "the tiers' counts after every far job was paged and delivered")
        # Every page step's token left its shard's "paging" set with its commit: no set is left
        # to make finishes write tombstones (it used to linger 60 s into the burst it paged in).
        self.assertEqual(ns.redis_cli("KEYS", ns.prefix + ":{*}:paging"), "",
                         "a paging set outlived the page steps' commits")

        pa, pb = stats(a)["pager"], stats(b)["pager"]
        for p in (pa, pb):
            self.assertEqual((p["horizon"], p["lead"], p["bucket"]), (self.HORIZON, lead, bucket), p)
            # rendezvous hashing gives both instances shards but for 2 runs in 256 (one owns all
            # 8); an instance that pages shards paged jobs (every shard has a topic here)
            if p["shards"] > 0:
                self.assertGreater(p["paged"], 0, p)
        for d in (a, b):
            m = ok_text(d.metrics(), "/metrics")
            if stats(d)["pager"]["paged"] > 0:
                self.assertGreater(sum(metric_values(m, "hourglass_pager_bucket_jobs_count").values()), 0,
                                   "hourglass_pager_bucket_jobs counted the buckets paged")
            self.assertTrue(metric_values(m, "hourglass_pager_lag_seconds"), "hourglass_pager_lag_seconds")


# --------------------------------------------------------------------------- pacing

class PagerPacingTest(TiersCase):
    """Pacing (pager.h, "Pacing"): a pass with time to spare spreads its jobs over it instead of
    paging flat out (which saturates a small machine and makes every other job late), and a
    reschedule's page-now is not held up by it.

    N far jobs are pushed by an instance with a 3 s horizon, due ~85 s later; a second instance
    with a 150 s horizon (lead 90 s, slack 60 s: pacing applies) then finds them all in its
    first pass, the earliest due ~80 s away: a deadline ~20 s away, so they go at the floor rate,
    PAGER_PACED_RATE = 2,000 jobs/s — 10 s for 20,000, where flat out takes ~1.5 s here."""

    N = 20_000
    PACED_RATE = 2000  # src/durable/pager.h

    def test_an_early_bucket_is_paced_and_a_page_now_is_not_held_up(self):
        a = self.start_daemon({"queue": {"horizon": 3000}, "http": {"max_body": 4 << 20}})
        a.wait_ready(30)
        ns = a.namespace
        T = now_ms() + 85_000
        topics = topics_one_per_shard("pace.t")
        jobs = [{"topic": topics[i % len(topics)], "body": {"i": i}, "runAt": T + i % 1000} for i in range(self.N)]
        ids = [i for got in pmap(lambda k: self.push_ids(a, jobs[k:k + 1000]), range(0, self.N, 1000), workers=3)
               for i in got]
        run_at = dict(zip(ids, (j["runAt"] for j in jobs)))
        a.stop()
        self.assertEqual(int(ns.query("SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL")[0][0]), self.N)

        b = self.start_daemon({"queue": {"horizon": 150_000}, "http": {"max_body": 4 << 20}}, namespace=ns)
        b.wait_ready(30)
        self.assertEqual(stats(b)["pager"]["lead"], 90_000)
        # the last jobs of the bucket (runAt T + 999) page in last: one of them, still far
        # half-way through, is rescheduled to be due in 2 s
        late_ones = [i for i in ids if run_at[i] == T + 999]
        t_first = t_last = None
        page_now: dict = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = int(ns.query("SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL")[0][0])
            t = time.monotonic()
            if left < self.N and t_first is None:
                t_first = t
            if left == 0:
                t_last = t
                break
            if not page_now and left < self.N // 2:
                jid = next(i for i in late_ones if "tier" in self.inspect(b, i))
                cons = Consumers([b], [topics[ids.index(jid) % len(topics)]], finish=True)
                self.addCleanup(cons.stop)
                rr = ok(b.reschedule(jid, delay=2000), "reschedule far -> near while the pager paces")
                page_now = {"id": jid, "runAt": rr["runAt"], "at": t}
                # served between two chunks, not after the pacing: in Redis before it is due
                self.wait_paged(b, jid, 2.0)
            time.sleep(0.05)
        self.assertIsNotNone(t_last, "the pager did not page the bucket within 60 s")
        took = t_last - t_first
        print(f"\n[tiers] pacing: {self.N} jobs paged in {took:.1f} s ({self.N / took:.0f}/s); "
              f"page-now of {page_now.get('id')} mid-way", flush=True)
        # spread: at the floor rate, (N - a first chunk of up to 1,000) / rate at least; flat out
        # would be ~1.5 s. A slow machine only makes this longer.
        self.assertGreaterEqual(took, (self.N - 1000) / self.PACED_RATE * 0.9, "the bucket was paged flat out")
        self.assertTrue(page_now, "the pager finished before half of the bucket: nothing rescheduled mid-way")
        self.assertLess(now_ms(), T - 40_000, "paged well before the jobs are due (pacing keeps the slack)")
        # the rescheduled one was delivered at its new time (a consumer waits for it since)
        self.wait_for(lambda: cons.count() >= 1, (page_now["runAt"] - now_ms()) / 1000 + 5,
                      "the rescheduled job to be delivered", lambda: str(cons.errors[:3]))
        cons.stop()
        self.assertEqual([(x[0], x[2]["runAt"]) for x in cons.deliveries], [(page_now["id"], page_now["runAt"])])
        self.assertOnTime(cons.deliveries)
        # every job is in Redis, waiting: /stats counts them delayed, none far
        def tiers() -> tuple:  # (the rescheduled one was delivered and finished)
            t = stats(b)["totals"]
            return t.get("far"), t.get("delayed", 0) + t.get("ready", 0) + t.get("reserved", 0)
        self.wait_for(lambda: tiers() == (0, self.N - 1), 3, "/stats: every job in Redis, none far",
                      lambda: str(stats(b)["totals"]))


class IdlePagerTest(TiersCase):
    """An idle pager — far jobs in MySQL, none due within the lead — asks MySQL one count a tick
    (100 ms), not a read per owned shard each followed by a COMMIT (~170 statements a second
    with 8 shards): counted with MariaDB's own Questions on a stack of its own, so no other
    daemon's statements are in the figure. A job that comes due after the idle spell still pages
    in and is delivered on time: the count that finds nothing does not hide a row committed
    after it."""

    HORIZON = 5000
    IDLE_S = 5.0
    MAX_PER_S = 60  # one count a tick, the far counts twice a second, the other duties' reads

    def test_an_idle_pager_counts_once_a_tick_and_still_pages_on_time(self):
        stack = self.private_stack()
        d = self.start_daemon({"queue": {"horizon": self.HORIZON}}, namespace=stack.fresh_namespace())
        d.wait_ready(30)
        far = self.push_one(d, {"topic": "idle.far", "body": 1, "delay": DAY})
        self.assertFar(d, far["id"])
        time.sleep(2)  # start-up's own statements are over

        def questions() -> int:  # this query is one of them
            return int(stack.mariadb.query("SHOW GLOBAL STATUS LIKE 'Questions'")[0][1])
        q0, t0 = questions(), time.monotonic()
        time.sleep(self.IDLE_S)
        q1, t1 = questions(), time.monotonic()
        per_s = (q1 - q0 - 1) / (t1 - t0)
        print(f"\n[tiers] idle: {per_s:.0f} MySQL statements a second", flush=True)
        self.assertLess(per_s, self.MAX_PER_S, "an idle instance's statements to MySQL a second")

        # due 2 s beyond the horizon: far when pushed, paged in by the idle pager before it is due
        topic = "idle.soon"
        job = self.push_one(d, {"topic": topic, "body": 2, "delay": self.HORIZON + 2000})
        self.assertFar(d, job["id"])
        cons = Consumers([d], [topic], finish=True)
        self.addCleanup(cons.stop)
        self.wait_paged(d, job["id"], (job["runAt"] - now_ms()) / 1000)  # in Redis before it is due
        self.wait_for(lambda: cons.count() >= 1, (job["runAt"] - now_ms()) / 1000 + 5, "its delivery",
                      lambda: str(cons.errors[:3]))
        cons.stop()
        self.assertEqual([x[0] for x in cons.deliveries], [job["id"]])
        self.assertOnTime(cons.deliveries)


# --------------------------------------------------------------------------- 3: by-id operations on far jobs

class FarJobOperationsTest(TiersCase):
    HORIZON = 3000

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.d = start_ready_class(cls, {"queue": {"horizon": cls.HORIZON}, "http": {"max_body": 1 << 20}})

    def test_inspect(self):
        d = self.d
        body = {"order": 42, "items": ["a", "b"]}
        r = self.push_one(d, {"topic": "op.inspect", "body": body, "delay": 600_000, "priority": 2,
                              "ttr": 5000, "tries": 4})
        self.assertNotIn("duplicate", r)
        j = self.assertFar(d, r["id"], r["runAt"])
        self.assertEqual((j["topic"], j["body"], j["priority"], j["ttr"], j["tries"], j["attempt"]),
                         ("op.inspect", body, 2, 5000, 4, 0), j)
        hist = j.get("history") or []
        self.assertTrue(hist, f"a far job has a history: {j}")
        self.assertEqual(hist[0].get("state"), "far", f"its first transition is to 'far': {hist}")
        self.assertEqual(hist[0].get("from", ""), "", hist)
        self.wait_for(lambda: stats(d)["topics"].get("op.inspect", {}).get("far") == 1, 3,
                      "/stats to count the far job")
        c = stats(d)["topics"]["op.inspect"]
        self.assertEqual((c["delayed"], c["ready"], c["reserved"]), (1, 0, 0), c)
        # and GET /topics/{topic} counts it alike (a delayed job, of them far)
        t = ok(d.request("GET", "/topics/op.inspect"), "GET /topics/op.inspect")
        self.assertEqual(t["counts"], {"delayed": 1, "ready": 0, "reserved": 0, "dead": 0, "far": 1}, t)
        self.assertEqual(self.d.namespace.query(f"SELECT state FROM message WHERE id = {r['id']}"), [("far",)])

    def test_delete_is_never_delivered(self):
        d = self.d
        r = self.push_one(d, {"topic": "op.del", "delay": self.HORIZON + 1500})
        keep = self.push_one(d, {"topic": "op.del", "delay": self.HORIZON + 1500})
        self.assertFar(d, r["id"])
        dr = d.delete(r["id"])
        self.assertEqual(ok(dr, "delete of a far job"), {"id": r["id"], "state": "deleted"})
        self.assertEqual(self.inspect(d, r["id"])["state"], "deleted")
        self.assertEqual(d.delete(r["id"]).status, 404, "a second delete: 404")
        self.assertEqual(self.d.namespace.query(f"SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL AND id = {r['id']}"), [("0",)])
        # past its due time (and past its whole paging window), a consumer polling all along
        # gets only the other job
        got = self.assertNeverDelivered(d, ["op.del"], r["runAt"] + 2000, allowed={keep["id"]},
                                        what="deleted far job")
        self.assertEqual([j["id"] for j in got], [keep["id"]])
        self.assertEqual(self.inspect(d, r["id"])["state"], "deleted")

    def test_reschedule_far_to_near_is_delivered_at_the_new_time(self):
        d = self.d
        r = self.push_one(d, {"topic": "op.rnear", "body": "x", "delay": 600_000})
        self.assertFar(d, r["id"])
        t = now_ms()
        rr = ok(d.reschedule(r["id"], delay=1500), "reschedule far -> near")
        self.assertEqual(rr["id"], r["id"], rr)
        self.assertTrue(t + 1500 <= rr["runAt"] <= now_ms() + 1500, rr)
        # paged in at once (the spec): well within a pager tick or two
        j = self.wait_paged(d, r["id"], 0.5)
        self.assertEqual((j["state"], j["runAt"]), ("delayed", rr["runAt"]), j)
        self.assertEqual(self.d.namespace.query(f"SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL AND id = {r['id']}"), [("0",)])
        resp = d.get("op.rnear", timeout=10)
        got_ms = now_ms()
        job = ok(resp, "GET after the reschedule")
        self.assertEqual((job["id"], job["runAt"]), (r["id"], rr["runAt"]), job)
        self.assertOnTime([(job["id"], got_ms, job, 0)])
        ok(d.finish(job["id"]), "finish")

    def test_reschedule_far_to_far_keeps_it_far_with_the_new_time(self):
        d = self.d
        r = self.push_one(d, {"topic": "op.rfar", "body": "y", "delay": 600_000})
        self.assertFar(d, r["id"], r["runAt"])
        rr = ok(d.reschedule(r["id"], delay=1_200_000), "reschedule far -> far")
        self.assertEqual(rr["id"], r["id"])
        self.assertGreater(rr["runAt"], r["runAt"] + 500_000, rr)
        self.assertFar(d, r["id"], rr["runAt"])
        rows = self.d.namespace.query(f"SELECT far_run_at FROM message WHERE far_shard IS NOT NULL AND id = {r['id']}")
        self.assertEqual(rows, [(str(rr["runAt"]),)], "far key re-keyed to the new due time")
        # and again, to just beyond the horizon: it stays far, then pages in and is delivered
        # at that time, not at any earlier one
        rr2 = ok(d.reschedule(r["id"], delay=self.HORIZON + 2500), "reschedule far -> far (soon)")
        self.assertFar(d, r["id"], rr2["runAt"])
        resp = d.get("op.rfar", timeout=15)
        got_ms = now_ms()
        job = ok(resp, "GET the rescheduled far job")
        self.assertEqual((job["id"], job["runAt"]), (r["id"], rr2["runAt"]), job)
        self.assertOnTime([(job["id"], got_ms, job, 0)])
        ok(d.finish(job["id"]), "finish")
        self.assertNeverDelivered(d, ["op.rfar"], now_ms() + 500, what="a rescheduled far job, delivered again")

    def test_bizkey_dedupes_against_a_far_job(self):
        d = self.d
        first = self.push_one(d, {"topic": "op.biz", "bizKey": "order-1", "body": 1, "delay": 600_000})
        self.assertNotIn("duplicate", first)
        self.assertFar(d, first["id"])
        for job in ({"delay": 900_000}, {"delay": 0}, {"delay": 1000}, {}):
            again = self.push_one(d, {"topic": "op.biz", "bizKey": "order-1", "body": 2, **job})
            self.assertEqual((again["id"], again.get("duplicate"), again["runAt"]),
                             (first["id"], True, first["runAt"]), f"push {job} with the far job's bizKey: {again}")
        # in an array too
        arr = ok(d.push([{"topic": "op.biz", "bizKey": "order-1"}, {"topic": "op.biz", "bizKey": "order-2",
                                                                    "delay": 600_000}]), "array push")
        self.assertEqual(arr["ids"][0], first["id"], arr)
        # the same key on another topic is another job
        other = self.push_one(d, {"topic": "op.biz2", "bizKey": "order-1", "delay": 600_000})
        self.assertNotEqual(other["id"], first["id"])
        self.assertFalse(other.get("duplicate"), other)
        # one far job, still the only one with that key
        self.assertFar(d, first["id"])
        self.assertEqual(self.d.namespace.query(
            f"SELECT COUNT(*) FROM far_biz WHERE topic = 'op.biz' AND biz_key = 'order-1'"), [("1",)])
        # once the far holder is deleted, the key is free again
        ok(d.delete(first["id"]), "delete")
        fresh = self.push_one(d, {"topic": "op.biz", "bizKey": "order-1", "delay": 600_000})
        self.assertNotEqual(fresh["id"], first["id"])
        self.assertFalse(fresh.get("duplicate"), fresh)

    def test_bizkey_of_a_far_job_holds_through_its_paging(self):
        """A far job's bizKey dedupes while it is far, after the pager put it in Redis, and until
        it is finished; then the key is free. A near holder dedupes a far push too."""
        d = self.d
        first = self.push_one(d, {"topic": "op.bizp", "bizKey": "p-1", "body": 1, "delay": self.HORIZON + 2500})
        self.assertFar(d, first["id"])
        self.assertEqual(self.push_one(d, {"topic": "op.bizp", "bizKey": "p-1", "delay": 600_000})["id"], first["id"])
        self.wait_paged(d, first["id"], 5)
        again = self.push_one(d, {"topic": "op.bizp", "bizKey": "p-1", "delay": 600_000})
        self.assertEqual((again["id"], again.get("duplicate")), (first["id"], True), f"after paging: {again}")
        job = ok(d.get("op.bizp", timeout=10), "GET the paged job")
        self.assertEqual(job["id"], first["id"])
        again = self.push_one(d, {"topic": "op.bizp", "bizKey": "p-1", "delay": 600_000})
        self.assertEqual((again["id"], again.get("duplicate")), (first["id"], True), f"while reserved: {again}")
        ok(d.finish(first["id"]), "finish")
        free = self.push_one(d, {"topic": "op.bizp", "bizKey": "p-1", "delay": 600_000})
        self.assertNotEqual(free["id"], first["id"])
        self.assertFalse(free.get("duplicate"), free)
        self.assertFar(d, free["id"])
        # a near holder, then a far push with its key: the near job answers
        near = self.push_one(d, {"topic": "op.bizp", "bizKey": "p-2", "delay": 2000})
        far = self.push_one(d, {"topic": "op.bizp", "bizKey": "p-2", "delay": 600_000})
        self.assertEqual((far["id"], far.get("duplicate")), (near["id"], True), far)
        self.assertInRedis(d, near["id"])

    def test_replace_of_a_far_holder(self):
        d = self.d
        old = self.push_one(d, {"topic": "op.repl", "bizKey": "k", "body": "old", "delay": self.HORIZON + 2000})
        self.assertFar(d, old["id"])
        new = self.push_one(d, {"topic": "op.repl", "bizKey": "k", "body": "new", "delay": 1000, "replace": True})
        self.assertNotEqual(new["id"], old["id"], f"the far holder is replaced by a new job: {new}")
        self.assertTrue(new.get("replaced"), new)
        self.assertTrue(new.get("duplicate"), new)
        self.assertEqual(self.inspect(d, old["id"])["state"], "deleted")
        j = self.inspect(d, new["id"])
        self.assertEqual((j["state"], j["body"], j.get("bizKey")), ("delayed", "new", "k"), j)
        # the key is the new job's now
        dup = self.push_one(d, {"topic": "op.repl", "bizKey": "k", "body": "third"})
        self.assertEqual((dup["id"], dup.get("duplicate")), (new["id"], True), dup)
        # the new one is delivered; the old one never, not even past its own due time
        got = self.assertNeverDelivered(d, ["op.repl"], old["runAt"] + 2000, allowed={new["id"]},
                                        what="replaced far job")
        self.assertEqual([(x["id"], x["body"]) for x in got], [(new["id"], "new")])

    def test_replace_with_a_far_job(self):
        """A far holder replaced by another far job, 20 times over (different keys): each time
        the holder is deleted when the push is answered (a replace deletes its holder, and a
        delete is answered only after it is committed), the new job is far with the key."""
        d = self.d
        stale = []
        pairs = []
        for i in range(20):
            old = self.push_one(d, {"topic": "op.repl2", "bizKey": f"k2-{i}", "body": "old", "delay": 600_000})
            new = self.push_one(d, {"topic": "op.repl2", "bizKey": f"k2-{i}", "body": "new", "delay": 900_000,
                                    "replace": True})
            self.assertNotEqual(new["id"], old["id"], f"the far holder is replaced by a new job: {new}")
            self.assertEqual((new.get("duplicate"), new.get("replaced")), (True, True), new)
            j = self.inspect(d, old["id"])
            if j["state"] != "deleted":
                stale.append((old["id"], j["state"], j.get("tier")))
            pairs.append((old, new))
        if stale:
            time.sleep(1.5)  # only to say, in the failure, whether the delete landed later
            later = {jid: self.inspect(d, jid)["state"] for jid, _, _ in stale}
            self.fail(f"{len(stale)} of 20 far holders were not deleted when the replace was answered "
                      f"(id, state, tier): {stale[:5]}; 1.5 s later their states: {list(later.values())[:5]}")
        for old, new in pairs:
            j = self.assertFar(d, new["id"], new["runAt"])
            self.assertEqual(j["body"], "new")
        self.assertEqual(self.d.namespace.query(
            "SELECT COUNT(*) FROM far_biz WHERE topic = 'op.repl2'"), [("20",)])
        self.wait_for(lambda: stats(d)["topics"].get("op.repl2", {}).get("far") == 20, 3, "far count 20")

    def test_delete_racing_the_pager(self):
        """Far jobs due just beyond the horizon, due times spread over 1.2 s so that they page in
        over about as long; half of them deleted, each at a moment drawn within 250 ms of its own
        page-in (some before it, some during, some after: all well before it is due). No
        deleted job is ever delivered; every other one is, once."""
        d = self.d
        lead, bucket = spec_timing(self.HORIZON)
        topics = topics_one_per_shard("race.t")
        rng = random.Random(77)
        n = 800
        t0 = now_ms()
        base = t0 + self.HORIZON + 2500
        jobs = [{"topic": topics[i % len(topics)], "body": i, "runAt": base + rng.randrange(0, 1200)}
                for i in range(n)]
        ids = self.push_ids(d, jobs)
        run_at = {jid: j["runAt"] for jid, j in zip(ids, jobs)}
        doomed = rng.sample(ids, n // 2)
        kept = set(ids) - set(doomed)

        # The spec's page-in moment of a job due at R: the first tick when
        # bucket_end(now + lead) > R, i.e. now >= floor(R / bucket) * bucket - lead.
        def page_at(r: int) -> int:
            return (r // bucket) * bucket - lead

        plan = sorted((page_at(run_at[j]) + rng.randrange(-250, 250), j) for j in doomed)
        self.assertLess(now_ms(), plan[0][0], "pushing took too long: test is void")
        self.assertLess(max(at - run_at[j] for at, j in plan), -1000, "a delete is planned too close to due")
        results: dict[str, tuple[int, Any, int]] = {}
        lock = threading.Lock()

        def delete(c: Client, jid: str) -> None:
            st, body = c.request("GET", "/delete?" + q({"id": jid}))
            with lock:
                results[jid] = (st, body, now_ms())

        cons = Consumers([d, d], topics, finish=True)
        try:
            act_on_schedule(d, plan, delete)
            self.wait_for(lambda: set(cons.ids()) >= kept, (max(run_at.values()) - now_ms()) / 1000 + 5,
                          "every kept job to be delivered",
                          lambda: f"missing {len(kept - set(cons.ids()))}; errors {cons.errors[:5]}")
            self.wait_for(lambda: now_ms() > max(run_at.values()) + 1000, 15, "a second past the last due time")
        finally:
            cons.stop()
        bad = {jid: r for jid, r in results.items() if r[0] != 200 or r[1] != {"id": jid, "state": "deleted"}}
        if bad:
            got = cons.ids()
            detail = []
            for jid, (st, body, at) in sorted(bad.items())[:5]:
                detail.append(f"job {jid} (runAt {run_at[jid]}): delete at {at} "
                              f"({at - run_at[jid]:+d} ms from due) answered {st} {body}; delivered "
                              f"{got.count(jid)} times; now /jobs: {d.job(jid).text[:1500]}")
            self.fail(f"{len(bad)} deletes of live far jobs racing the pager did not answer 200 deleted:\n"
                      + "\n".join(detail))
        self.assertEqual(len(results), len(doomed))
        # the race happened both ways: some doomed jobs were deleted while far, some after the
        # pager had put them in Redis (their history has far -> delayed before deleted)
        self.wait_for(lambda: journal_idle(d), 10, "the journal to be idle")
        paged_first = {r[0] for r in d.namespace.query(
            "SELECT message_id FROM transition WHERE from_state = 'far' AND to_state <> 'deleted' "
            f"AND message_id IN ({','.join(doomed)})")}
        late = [results[j][2] - run_at[j] for j in doomed]
        print(f"\n[tiers] delete race: {len(paged_first)} of {len(doomed)} deleted after paging, the rest while far; "
              f"deletes {min(late)}..{max(late)} ms from due", flush=True)
        self.assertGreater(len(paged_first), 0, "no delete came after its job was paged: no race")
        self.assertLess(len(paged_first), len(doomed), "no delete came before its job was paged: no race")
        self.assertLess(max(late), -1000, "a delete came too close to due (the test's own timing)")
        got = cons.ids()
        delivered_doomed = set(got) & set(doomed)
        self.assertEqual(delivered_doomed, set(), "deleted jobs were delivered")
        self.assertEqual(sorted(got), sorted(kept), "every kept job delivered exactly once")
        self.assertEqual(cons.errors, [])
        for jid in rng.sample(doomed, 20):
            self.assertEqual(self.inspect(d, jid)["state"], "deleted")
        ns_left = d.namespace.query(
            f"SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL AND id IN ({','.join(doomed)})")
        self.assertEqual(ns_left, [("0",)], "deleted jobs kept their far keys")

    def test_reschedule_racing_the_pager(self):
        """As the delete race, with reschedules: half of the jobs are moved, each within 250 ms of
        its own page-in, either later (still far: due 4 s after its old time) or earlier (near,
        0.5 s before its old time). Every job is delivered exactly once, at the time its last
        reschedule answered (never at the old one)."""
        d = self.d
        lead, bucket = spec_timing(self.HORIZON)
        topics = topics_one_per_shard("rrace.t")
        rng = random.Random(78)
        n = 600
        base = now_ms() + self.HORIZON + 2500
        jobs = [{"topic": topics[i % len(topics)], "body": i, "runAt": base + rng.randrange(0, 1200)}
                for i in range(n)]
        ids = self.push_ids(d, jobs)
        run_at = {jid: j["runAt"] for jid, j in zip(ids, jobs)}
        moved = rng.sample(ids, n // 2)
        later = set(moved[::2])
        plan = sorted(((run_at[j] // bucket) * bucket - lead + rng.randrange(-250, 250), j) for j in moved)
        self.assertLess(now_ms(), plan[0][0], "pushing took too long: test is void")
        answers: dict[str, tuple[int, Any]] = {}
        lock = threading.Lock()

        def move(c: Client, jid: str) -> None:
            new_at = run_at[jid] + 4000 if jid in later else run_at[jid] - 500
            st, body = c.request("GET", "/reschedule?" + q({"id": jid, "runAt": new_at}))
            with lock:
                answers[jid] = (st, body)

        cons = Consumers([d, d], topics, finish=True)
        try:
            act_on_schedule(d, plan, move)
            final = dict(run_at)
            bad = {}
            for jid, (st, body) in answers.items():
                if st == 200 and body.get("id") == jid:
                    final[jid] = body["runAt"]
                else:
                    bad[jid] = (st, body)
            for jid in moved:
                want = run_at[jid] + 4000 if jid in later else run_at[jid] - 500
                if jid not in bad:
                    self.assertEqual(final[jid], want, jid)
            self.wait_for(lambda: cons.count() >= n, (max(final.values()) - now_ms()) / 1000 + 5,
                          f"all {n} jobs to be delivered",
                          lambda: f"{cons.count()} delivered; errors {cons.errors[:5]}")
            self.wait_for(lambda: now_ms() > max(final.values()) + 1000, 15, "a second past the last due time")
        finally:
            cons.stop()
        self.assertEqual(cons.errors, [])
        got = cons.ids()
        if bad:
            when = {x[0]: x[1] for x in cons.deliveries}
            detail = [f"job {jid} (runAt {run_at[jid]}, asked to move to "
                      f"{run_at[jid] + 4000 if jid in later else run_at[jid] - 500}): answered {st} {body}; "
                      f"delivered {got.count(jid)} times (at {when.get(jid)}); /jobs {d.job(jid).text[:1500]}"
                      for jid, (st, body) in sorted(bad.items())[:4]]
            self.fail(f"{len(bad)} reschedules of live far jobs racing the pager did not answer 200:\n"
                      + "\n".join(detail))
        if sorted(got) != sorted(ids):
            missing = sorted(set(ids) - set(got))
            twice = sorted({i for i in got if got.count(i) > 1})
            detail = [f"{jid}: pushed runAt {run_at[jid]}, reschedule answer {answers.get(jid)}; /jobs "
                      f"{d.job(jid).text[:1500]}" for jid in (missing + twice)[:4]]
            self.fail(f"{len(missing)} jobs never delivered, {len(twice)} delivered more than once:\n"
                      + "\n".join(detail))
        wrong_time = [(jid, job["runAt"], final[jid]) for jid, _, job, _ in cons.deliveries
                      if job["runAt"] != final[jid]]
        self.assertEqual(wrong_time, [], "delivered with another runAt than its last reschedule's (id, got, want)")
        self.assertOnTime(cons.deliveries)

    def test_a_restore_keeps_the_tombstones_a_page_step_still_needs(self):
        """A restore drops its tombstones when it ends, but not while a page step is between its
        Redis write and its commit (a token in the shard's paging set): were the pager to die
        then, its successor re-pages those rows and must skip the jobs that ended meanwhile."""
        ns = self.d.namespace
        paging, gone = ns.prefix + ":{0}:paging", ns.prefix + ":{0}:gone"
        ns.redis_cli("SADD", paging, "a-pager#1")
        ns.redis_cli("PEXPIRE", paging, "60000")
        ns.redis_cli("ZADD", gone, str(now_ms()), "12345")
        self.addCleanup(ns.redis_cli, "DEL", paging, gone)
        ok(self.d.restore(), "/reStore with a page step in flight")
        self.assertNotEqual(ns.redis_cli("ZSCORE", gone, "12345"), "", "the tombstone survived the restore")
        # the step committed (its token left): the next restore's end drops them as it always did
        ns.redis_cli("SREM", paging, "a-pager#1")
        ok(self.d.restore(), "/reStore with no page step in flight")
        self.assertEqual(ns.redis_cli("EXISTS", gone), "0", "the restore dropped its tombstones")

    def test_old_tombstones_are_pruned_unless_a_restore_runs(self):
        """The pager's pruning (goneexpire.lua, every 10 s on each shard it pages): tombstones older
        than 10 minutes leave the shard's gone set, younger ones stay, and a shard where a restore
        runs keeps them all (the restore reads them, and drops them itself when it ends)."""
        ns = self.d.namespace
        gone0, gone1, restoring1 = ns.prefix + ":{0}:gone", ns.prefix + ":{1}:gone", ns.prefix + ":{1}:restoring"
        self.addCleanup(ns.redis_cli, "DEL", gone0, gone1, restoring1)
        old, young = now_ms() - 11 * 60_000, now_ms()
        ns.redis_cli("SET", restoring1, "a-restore", "PX", "60000")
        ns.redis_cli("ZADD", gone1, str(old), "333")
        ns.redis_cli("ZADD", gone0, str(old), "111", str(young), "222")
        self.wait_for(lambda: ns.redis_cli("ZSCORE", gone0, "111") == "", 15, "the old tombstone to be pruned")
        self.assertNotEqual(ns.redis_cli("ZSCORE", gone0, "222"), "", "a young tombstone stays")
        self.assertNotEqual(ns.redis_cli("ZSCORE", gone1, "333"), "",
                            "a shard where a restore runs keeps its tombstones (pruned in the same pass)")

    def test_release_beyond_the_horizon_stays_in_redis(self):
        d = self.d
        r = self.push_one(d, {"topic": "op.rel", "body": "r"})
        job = ok(d.get("op.rel", timeout=5), "GET")
        self.assertEqual(job["id"], r["id"])
        rel = d.release(r["id"], delay=self.HORIZON + 1500)
        self.assertEqual(rel.status, 200, rel.text)
        t_rel = now_ms()
        j = self.inspect(d, r["id"])
        self.assertEqual(j["state"], "delayed", j)
        self.assertNotIn("tier", j, f"a released job stays in Redis: {j}")
        self.assertTrue(t_rel - 1000 + self.HORIZON + 1500 <= j["runAt"] <= t_rel + self.HORIZON + 1500, j)
        resp = d.get("op.rel", timeout=10)
        got_ms = now_ms()
        again = ok(resp, "GET after the release")
        self.assertEqual((again["id"], again["attempt"]), (r["id"], 2), again)
        self.assertOnTime([(again["id"], got_ms, again, 0)])
        ok(d.finish(r["id"]), "finish")


# --------------------------------------------------------------------------- 4: kill -9 mid-bucket

class PagerCrashTest(TiersCase):
    """kill -9 of the instance that is paging a large bucket, when some but not all of it is in
    Redis (the far keys, polled as fast as the mariadb client goes, has shrunk but is not empty).
    Then either the instance is restarted, or a second instance takes its shards over; either
    way every job is delivered exactly once (consumers finish each; ttr 120 s, so a second
    delivery could only be a duplicate, never a lease that ran out)."""

    HORIZON = 3000
    N = 20_000
    OV = {"queue": {"horizon": HORIZON, "default_ttr": 120_000}, "http": {"max_body": 4 << 20, "threads": 2}}

    def far_rows(self, ns) -> int:
        return int(ns.query("SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL")[0][0])

    def redis_jobs(self, ns) -> int:
        return int(ns.redis_cli("EVAL", "local n=0 for _,k in ipairs(redis.call('KEYS', ARGV[1])) do "
                                "n=n+redis.call('HLEN',k) end return n", "0", ns.prefix + ":{*}:jobs") or 0)

    def kill_mid_bucket(self, a: Daemon, topics: list[str]) -> dict[str, int]:
        """Push N jobs due within one second on `topics` through a, and kill -9 a while it pages
        them. Up to 3 rounds (a round whose bucket paged between two looks at the far keys, or
        whose kill came during the last commit, is followed by another; its jobs are checked
        too). Returns {id: runAt} of every job pushed; a is dead."""
        ns = a.namespace
        ids_all: dict[str, int] = {}
        for rnd in range(3):
            if not a.running:
                a.start()
                a.wait_ready(30)
            # N jobs due within one second, T..T+1s; pushing (20 arrays) must end before T - horizon
            t0 = now_ms()
            T = t0 + self.HORIZON + 9000
            jobs = [{"topic": topics[i % len(topics)], "body": {"r": rnd, "i": i}, "runAt": T + (i * 7919) % 1000}
                    for i in range(self.N)]
            batches = [jobs[k:k + 1000] for k in range(0, self.N, 1000)]
            ids = [i for ids in pmap(lambda b: self.push_ids(a, b), batches, workers=3) for i in ids]
            self.assertLess(now_ms(), T - self.HORIZON, "pushing took too long: test is void")
            earlier = len(ids_all)      # earlier rounds' jobs: all in Redis, none consumed
            ids_all.update({jid: j["runAt"] for jid, j in zip(ids, jobs)})
            self.assertEqual(self.far_rows(ns), self.N)
            seen = []
            deadline = time.monotonic() + (T - now_ms()) / 1000 + 5
            at_kill = None
            while time.monotonic() < deadline:
                c = self.far_rows(ns)
                seen.append(c)
                if 0 < c < self.N:
                    a.kill()
                    at_kill = c
                    break
                if c == 0:
                    break
            if at_kill is None and seen[-1] == self.N:
                self.fail(f"the pager never touched the bucket due at {T} (far keys still {self.N} "
                          f"5 s after it was due)\n{a.log_tail(20)}")
            after_kill = self.far_rows(ns)
            in_redis = self.redis_jobs(ns) - earlier
            print(f"\n[tiers] round {rnd}: far keys {seen[-3:]} (kill at {at_kill}), {after_kill} after; "
                  f"{in_redis} of the round's {self.N} jobs in Redis", flush=True)
            if at_kill is not None and after_kill > 0:
                self.assertGreater(in_redis, 0, "the kill came before anything was in Redis")
                return ids_all
        self.fail("never caught the pager mid-bucket in 3 rounds (paging too fast for a poll of the far keys)")

    def consume_all(self, d: Daemon, topics: list[str], ids_all: dict[str, int], timeout_after_due: float,
                    meanwhile=None) -> None:
        """Consumers on d until every job was delivered, and 2 s past the last due time (with
        meanwhile() run once they are polling); then every job delivered exactly once,
        finished in MySQL, none left far."""
        ns = d.namespace
        last_due = max(ids_all.values())
        cons = Consumers([d, d, d, d], topics, finish=True, count=100)
        try:
            if meanwhile is not None:
                meanwhile()
            self.wait_for(lambda: cons.count() >= len(ids_all), (last_due - now_ms()) / 1000 + timeout_after_due,
                          f"all {len(ids_all)} jobs to be delivered",
                          lambda: f"{cons.count()} deliveries, {len(set(cons.ids()))} distinct; far keys "
                                  f"{self.far_rows(ns)}; errors {cons.errors[:5]}\n{d.log_tail(20)}")
            self.wait_for(lambda: now_ms() > last_due + 2000, 20, "2 s past the last due time")
        finally:
            cons.stop()
        counts: dict[str, int] = {}
        for i in cons.ids():
            counts[i] = counts.get(i, 0) + 1
        twice = {i: n for i, n in counts.items() if n > 1}
        missing = set(ids_all) - set(counts)
        unknown = set(counts) - set(ids_all)
        self.assertEqual((len(twice), len(missing), len(unknown)), (0, 0, 0),
                         f"delivered twice (sample): {list(twice.items())[:5]}; missing (sample): {list(missing)[:5]}; "
                         f"unknown: {list(unknown)[:5]}")
        self.assertEqual(cons.errors, [])
        self.assertTrue(all(j["attempt"] == 1 for _, _, j, _ in cons.deliveries), "a job was delivered twice")
        self.assertEqual(self.far_rows(ns), 0)
        # MySQL agrees: every job finished, once (the journal caught up)
        self.wait_for(lambda: journal_idle(d) and ns.query(
            "SELECT state, COUNT(*) FROM message GROUP BY state") == [("finished", str(len(ids_all)))],
            20, "every message finished in MySQL",
            lambda: str(ns.query("SELECT state, COUNT(*) FROM message GROUP BY state")))
        fin = ns.query("SELECT COUNT(*) FROM transition WHERE to_state = 'finished'")
        self.assertEqual(fin, [(str(len(ids_all)),)], "one finished transition per job")

    def test_kill_9_mid_bucket_then_restart_loses_and_duplicates_nothing(self):
        a = self.start_daemon({**self.OV, "instance": {"id": "crash-a"}})
        a.wait_ready(30)
        topics = topics_one_per_shard("crash.t")
        ids_all = self.kill_mid_bucket(a, topics)
        # restarted (same instance id): it (re)pages what is left, skipping what Redis holds
        a.start()
        a.wait_ready(30)
        self.consume_all(a, topics, ids_all, 30)

    def test_kill_9_mid_bucket_then_the_other_instance_takes_over(self):
        names = ["crash-a", "crash-b"]
        a = self.start_daemon({**self.OV, "instance": {"id": names[0]}})
        b = self.start_daemon({**self.OV, "instance": {"id": names[1]}}, namespace=a.namespace)
        for d in (a, b):
            d.wait_ready(30)
        self.wait_for(lambda: all(len(stats(d)["fleet"]["instances"]) == 2 for d in (a, b)), 10,
                      "both instances to see the fleet of two")
        from test_fleet_e2e import shard_owner  # fleet.c's rendezvous hashing, in Python
        mine = [s for s in range(SHARDS) if shard_owner(names, s) == names[0]]
        self.wait_for(lambda: (stats(a)["pager"]["shards"], stats(b)["pager"]["shards"])
                      == (len(mine), SHARDS - len(mine)),
                      5, "each instance to page the shards rendezvous gives it",
                      lambda: f"a {stats(a)['pager']}, b {stats(b)['pager']}, a's by rendezvous {mine}")
        if not mine:
            self.skipTest("rendezvous gives crash-a no shard")  # not so for these two names
        topics = [t for t in topics_one_per_shard("crash.t") if topic_shard(t) in mine]
        ids_all = self.kill_mid_bucket(a, topics)
        # b takes a's shards over once a's heartbeat is 3 s old, and pages the rest: it meets the
        # jobs a put in Redis, and (consumers on b from now on: the bucket is due about when b
        # takes over) the tombstones of those delivered and finished meanwhile
        killed = time.monotonic()

        def takeover() -> None:
            self.wait_for(lambda: stats(b)["pager"]["shards"] == SHARDS, 10, "b to page every shard",
                          lambda: str(stats(b)["pager"]))
            print(f"\n[tiers] takeover: b pages all shards {time.monotonic() - killed:.1f} s after the kill",
                  flush=True)
        self.consume_all(b, topics, ids_all, 30, meanwhile=takeover)
