"""End-to-end: a fleet of hourglassd behind a real nginx, instance failures, graceful shutdown,
sd_notify, and the nginx health checker.

    make integration T=test_fleet_e2e

FleetThroughNginxTest runs conf/nginx.conf (NginxServer: only paths, the listen address and the
upstream servers are rewritten) in front of three instances on one Redis and one MariaDB, with
scripts/nginx-health.sh keeping the upstream file. Producers push through nginx and consumers
long-poll and finish through nginx for about 25 s; meanwhile one instance is killed with
SIGKILL and another is restarted (SIGTERM, start again with the same config). Then it checks:

* nothing acknowledged is missing: every acknowledged push was delivered and ended finished;
* exactly once, except explained redeliveries: a job is delivered again only with a higher
  attempt, and only when the earlier delivery's lease ran out (its finish got 404/409 or
  failed) or when a delivery was lost with the killed instance (a skipped attempt whose lease
  started when the kill happened); nothing is delivered after its finish was acknowledged;
* pushes that failed in nginx (502/504, connection errors) were retried with the same bizKey;
  a job created by a failed attempt that the retry could not see any more (already finished)
  must belong to such an attempt;
* ids: all distinct; the worker number in each id (id >> 12 & 0x3ff) is one the issuing
  process held (polled from its /stats), live processes never held the same number at the same
  time, and no two processes' ids with the same number interleave in time;
* lateness (consumer receive time minus runAt, both on this host's clock) of jobs due after
  the kill, at their first delivery, stays under LATENESS_LIMIT, in particular for the shards
  the dead instance owned (computed with the daemon's rendezvous hash and checked against
  /stats);
* the killed instance was marked down by the health checker, after which nginx sent it nothing.

Measured figures are printed to stderr ("fleet e2e: ...").

GracefulShutdownTest: SIGTERM with parked long-polls (204), exit 0 within 10 s, journal flushed
(MySQL transition rows = transitions made). SdNotifyTest: READY=1 / STOPPING=1 on NOTIFY_SOCKET.
HealthCheckerTest: scripts/nginx-health.sh against stand-in /health servers. LogReopenTest:
SIGHUP after the log file was renamed (logrotate) sends every later line, from every thread,
to a new file at the configured path. WorkerLeaseTest: an instance whose id lease is taken
stops using that worker number and leases another.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest
from dataclasses import dataclass, field
from typing import Any

import harness
from harness import (HOST, REPO_ROOT, CheckedHTTPConnection, Daemon, HourglassTestCase, NginxServer, topic_shard,
                     topics_one_per_shard, wait_until)

HEALTH_SCRIPT = str(REPO_ROOT / "scripts" / "nginx-health.sh")

SHARDS = 8
TTR_MS = 4000               # lease; a delivery lost with the killed instance comes back after it
RUN_S = 24.0                # producers run this long
KILL_AT_S = 7.0             # kill -9 instance 1
RESTART_AT_S = 13.0         # SIGTERM + start instance 2
DRAIN_S = 15.0              # after the producers stop, at most this long for the rest to finish
PRODUCERS = 3
CONSUMERS = 4
POLL_S = 2                  # consumers' long-poll timeout
MAX_DELAY_MS = 2000
LATENESS_LIMIT = 1.5        # s: the 1 s safety re-check plus scheduling margin on a small box
LOSS_WINDOW = (-1.0, 2.5)   # s around the kill in which a lost delivery's lease may have started

M64 = (1 << 64) - 1


# --------------------------------------------------------------------------- the daemon's hashes

def _mix64(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    x ^= x >> 31
    return x


def shard_owner(names: list[str], shard: int) -> str:
    """fleet.c fleet_owner: rendezvous hashing, the highest score wins (ties: smaller name)."""
    best, best_score = None, -1
    for name in names:
        h = 0xCBF29CE484222325  # FNV-1a 64 (hmap.c hash_bytes)
        for b in name.encode():
            h ^= b
            h = (h * 0x100000001B3) & M64
        score = _mix64(h ^ _mix64(shard + 1))
        if score > best_score or (score == best_score and name < best):
            best, best_score = name, score
    return best


def worker_of(job_id: int) -> int:
    return (job_id >> 12) & 0x3FF


def id_ms(job_id: int) -> int:
    return (job_id >> 22) + 1704067200000


def pick_topics() -> list[str]:
    """One topic per shard, so every instance owns some of the traffic."""
    return topics_one_per_shard("e2e.t", SHARDS)


def read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]


# --------------------------------------------------------------------------- a keep-alive client

class Client:
    """One keep-alive HTTP/1.1 connection (reopened after any error), as a real client has."""

    def __init__(self, port: int, timeout: float = 15.0) -> None:
        self.port = port
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any, bytes]:
        if self.conn is None:
            self.conn = CheckedHTTPConnection(HOST, self.port, timeout=self.timeout)
            self.conn.gateway = True  # through nginx: its own 502/504 are not the daemon's
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            self.conn.request(method, path, body=data, headers=headers)
            r = self.conn.getresponse()
            payload = r.read()
        except Exception:
            self.close()
            raise
        if r.will_close:
            self.close()
        return r.status, r.headers, payload

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# --------------------------------------------------------------------------- records

@dataclass
class Attempt:
    t_send: float
    t_recv: float
    outcome: str                  # "200", "502", ..., or "exc:<type>"
    upstream: str = ""
    detail: str = ""              # the error message of a failed attempt


@dataclass
class Push:
    key: str
    topic: str
    attempts: list[Attempt] = field(default_factory=list)
    id: int | None = None         # acknowledged id
    run_at: int | None = None     # ms
    duplicate: bool = False       # the acknowledging answer said duplicate (an earlier attempt made it)
    upstream: str = ""            # the instance that acknowledged (last of nginx's list)
    t_send: float = 0.0           # of the acknowledged attempt


@dataclass
class Delivery:
    id: int
    key: str
    attempt: int
    run_at: int
    t_recv: float
    consumer: int
    lease_until: int = 0          # ms: reserved at lease_until - TTR_MS (server clock)
    upstream: str = ""            # instance that answered the get
    finish: list[Attempt] = field(default_factory=list)

    @property
    def finish_outcome(self) -> str:
        """The last answer to its finish: 200, 404, 409, or the last error."""
        return self.finish[-1].outcome if self.finish else "none"


@dataclass
class Proc:
    """One process of one instance (an instance restarted is a new Proc)."""
    name: str
    addr: str
    gen: int
    t_start: float
    t_end: float | None = None
    worker_ids: dict[int, list[float]] = field(default_factory=dict)  # number -> poll times

    @property
    def label(self) -> str:
        return f"{self.name}#{self.gen}"


# --------------------------------------------------------------------------- the e2e test


class FleetThroughNginxTest(HourglassTestCase):

    def setUp(self) -> None:
        self.lock = threading.Lock()
        self.stop_producers = threading.Event()
        self.stop_consumers = threading.Event()
        self.stop_poller = threading.Event()
        self.pushes: list[Push] = []
        self.deliveries: list[Delivery] = []
        self.get_errors: list[tuple[float, str]] = []
        self.unexpected: list[str] = []
        self.procs: list[Proc] = []
        self.current: dict[int, Proc | None] = {}
        self.poll_rounds: list[tuple[float, dict[str, int]]] = []
        self.threads: list[threading.Thread] = []
        self.addCleanup(self._stop_threads)

    def _stop_threads(self) -> None:
        self.stop_producers.set()
        self.stop_consumers.set()
        self.stop_poller.set()
        for t in self.threads:
            t.join(POLL_S + 20)

    # -- workers

    def producer(self, p: int, port: int, topics: list[str]) -> None:
        rnd = random.Random(p)
        client = Client(port)
        n = 0
        try:
            while not self.stop_producers.is_set():
                key = f"p{p}-{n}"
                n += 1
                topic = rnd.choice(topics)
                job = {"topic": topic, "body": {"k": key}, "delay": rnd.randint(0, MAX_DELAY_MS),
                       "bizKey": key, "ttr": TTR_MS, "tries": 10}
                push = Push(key, topic)
                with self.lock:
                    self.pushes.append(push)
                deadline = time.monotonic() + 10
                while True:
                    t0 = time.time()
                    try:
                        status, headers, body = client.request("POST", "/push", job)
                        outcome = str(status)
                        upstream = headers.get("X-Upstream", "")
                    except (OSError, http.client.HTTPException) as e:
                        status, body, outcome, upstream = 0, b"", f"exc:{type(e).__name__}", ""
                    t1 = time.time()
                    detail = ""
                    if status != 200:
                        try:
                            detail = json.loads(body)["message"][:80] if body else ""
                        except (ValueError, KeyError, TypeError):
                            detail = body[:80].decode("utf-8", "replace")
                    push.attempts.append(Attempt(t0, t1, outcome, upstream, detail))
                    if status == 200:
                        a = json.loads(body)
                        push.id, push.run_at = int(a["id"]), int(a["runAt"])
                        push.duplicate = bool(a.get("duplicate"))
                        push.upstream = upstream.split(",")[-1].strip()
                        push.t_send = t0
                        break
                    if status not in (0, 502, 503, 504):
                        with self.lock:
                            self.unexpected.append(f"push {key}: HTTP {status} {body[:200]!r}")
                        break
                    if time.monotonic() > deadline:
                        with self.lock:
                            self.unexpected.append(f"push {key}: still failing after 10 s ({outcome})")
                        break
                    time.sleep(0.05)  # then again, same bizKey
                time.sleep(rnd.uniform(0.03, 0.07))
        finally:
            client.close()

    def consumer(self, c: int, port: int, topics: list[str]) -> None:
        order = topics[c * 2 % len(topics):] + topics[:c * 2 % len(topics)]
        path = "/get/" + ",".join(order) + f"?timeout={POLL_S}&count=1"
        client = Client(port)
        try:
            while not self.stop_consumers.is_set():
                try:
                    status, headers, body = client.request("GET", path)
                except (OSError, http.client.HTTPException) as e:
                    with self.lock:
                        self.get_errors.append((time.time(), f"exc:{type(e).__name__}"))
                    time.sleep(0.05)
                    continue
                t_recv = time.time()
                if status == 204:
                    continue
                if status != 200:
                    with self.lock:
                        self.get_errors.append((t_recv, str(status)))
                    if status not in (502, 503, 504):
                        with self.lock:
                            self.unexpected.append(f"get: HTTP {status} {body[:200]!r}")
                    time.sleep(0.05)
                    continue
                j = json.loads(body)
                d = Delivery(int(j["id"]), j["body"]["k"], int(j["attempt"]), int(j["runAt"]), t_recv, c,
                             int(j.get("leaseUntil", 0)), headers.get("X-Upstream", ""))
                with self.lock:
                    self.deliveries.append(d)
                for _ in range(20):
                    t0 = time.time()
                    try:
                        fstatus, _, fbody = client.request("GET", f"/finish?id={d.id}&attempt={d.attempt}")
                        outcome = str(fstatus)
                    except (OSError, http.client.HTTPException) as e:
                        fstatus, fbody, outcome = 0, b"", f"exc:{type(e).__name__}"
                    d.finish.append(Attempt(t0, time.time(), outcome))
                    if fstatus in (200, 404, 409):
                        break
                    if fstatus not in (0, 502, 503, 504):
                        with self.lock:
                            self.unexpected.append(f"finish {d.id}: HTTP {fstatus} {fbody[:200]!r}")
                        break
                    time.sleep(0.05)
        finally:
            client.close()

    def poller(self, daemons: list[Daemon]) -> None:
        """Every 0.2 s, each live process's worker number, straight from its /stats."""
        while not self.stop_poller.is_set():
            seen: dict[str, int] = {}
            for i, d in enumerate(daemons):
                with self.lock:
                    proc = self.current.get(i)
                if proc is None:
                    continue
                try:
                    r = d.stats(timeout=1)
                    w = int(r.json()["workerId"]) if r.status == 200 else -1
                except (OSError, http.client.HTTPException, ValueError, KeyError):
                    continue
                t = time.time()
                with self.lock:
                    if self.current.get(i) is not proc:
                        continue  # the process changed under us: the answer may be the old one's
                    if w >= 0:
                        proc.worker_ids.setdefault(w, []).append(t)
                        seen[proc.label] = w
            with self.lock:
                self.poll_rounds.append((time.time(), seen))
            self.stop_poller.wait(0.2)

    def start_thread(self, target, *args) -> None:
        def run():
            try:
                target(*args)
            except BaseException:  # noqa: BLE001 - a dead client thread must fail the test
                with self.lock:
                    self.unexpected.append(f"{target.__name__}{args[:1]} crashed:\n{traceback.format_exc()}")
        t = threading.Thread(target=run, daemon=True)
        self.threads.append(t)
        t.start()

    # -- the test

    def test_fleet_through_nginx_survives_kill_and_restart(self):
        ns = self.namespace()
        names = [f"e2e-{i + 1}" for i in range(3)]
        daemons = []
        for i, name in enumerate(names):
            d = Daemon(namespace=ns, overrides={
                "http": {"threads": 2}, "log": {"level": "info"},
                "instance": {"id": name, "worker_id": "auto"}})
            self.addCleanup(d.close)
            d.start()
            daemons.append(d)
            proc = Proc(name, d.address, 0, time.time())
            self.procs.append(proc)
            self.current[i] = proc
        a_d, b_d, c_d = daemons

        nginx = NginxServer([d.address for d in daemons],
                            server_extra=["add_header X-Upstream $upstream_addr always;"])
        self.addCleanup(nginx.close)
        nginx.start()

        checker_log = open(os.path.join(nginx.dir, "health.log"), "ab")
        self.addCleanup(checker_log.close)
        checker = subprocess.Popen(
            ["sh", HEALTH_SCRIPT, "-i", "0.5", "-t", "0.4", "-o", nginx.upstream_path,
             "-r", nginx.reload_command(), *[d.address for d in daemons]],
            stdin=subprocess.DEVNULL, stdout=checker_log, stderr=subprocess.STDOUT)

        def stop_checker():
            if checker.poll() is None:
                checker.terminate()
                try:
                    checker.wait(10)
                except subprocess.TimeoutExpired:
                    checker.kill()
                    checker.wait()
        self.addCleanup(stop_checker)

        topics = pick_topics()
        # Every instance must be in the fleet before the run (ownership is computed from it).
        # The daemons were not waited for: one still starting answers /stats 503, "not yet".
        def live_instances(d) -> int:
            r = d.stats()
            return len(r.json()["fleet"]["instances"]) if r.status == 200 else 0
        wait_until(lambda: all(live_instances(d) == 3 for d in daemons), 10, 0.1,
                   "three live instances in every /stats")
        r = nginx.push({"topic": "e2e.warmup", "body": "warm-up", "ttr": 0})
        self.assertStatus(r, 200, "a push through nginx")
        self.assertStatus(nginx.get("e2e.warmup", timeout=5), 200, "a get through nginx")

        t0 = time.time()
        for p in range(PRODUCERS):
            self.start_thread(self.producer, p, nginx.port, topics)
        for c in range(CONSUMERS):
            self.start_thread(self.consumer, c, nginx.port, topics)
        self.start_thread(self.poller, daemons)

        # -- kill -9 instance 1
        time.sleep(max(0.0, t0 + KILL_AT_S - time.time()))
        owners = {s: shard_owner(names, s) for s in range(SHARDS)}
        owned_stats = {d.config["instance"]["id"]: d.stats().json()["mover"]["owned"] for d in daemons}
        owned_model = {n: sum(1 for s in owners.values() if s == n) for n in names}
        self.assertEqual(owned_stats, owned_model,
                         "shards owned per instance (/stats) differ from the rendezvous model of fleet.c")
        dead_shards = {s for s, n in owners.items() if n == names[0]}
        with self.lock:
            self.current[0] = None
        t_kill = time.time()
        self.assertEqual(a_d.kill(), -signal.SIGKILL)
        self.procs[0].t_end = t_kill

        # The health checker must take it out; from then on nginx must not try it.
        down_line = re.compile(rf"^server {re.escape(a_d.address)} .* down;$", re.M)
        wait_until(lambda: down_line.search(read_text(nginx.upstream_path)), 10, 0.05,
                   f"nginx-health.sh to mark {a_d.address} down")
        t_marked = time.time()

        # -- SIGTERM instance 2, then start it again with the same config
        time.sleep(max(0.0, t0 + RESTART_AT_S - time.time()))
        t_term = time.time()
        rc = b_d.stop(timeout=10)
        t_exit = time.time()
        with self.lock:
            self.current[1] = None
            self.procs[1].t_end = t_exit
        self.assertEqual(rc, 0, f"instance 2 exit status after SIGTERM under load\n{b_d.log_tail(30)}")
        self.assertLess(t_exit - t_term, 10, "instance 2 took 10 s or more to drain")
        time.sleep(0.5)
        b_d.start()
        proc_b1 = Proc(names[1], b_d.address, 1, time.time())
        with self.lock:
            self.procs.append(proc_b1)
            self.current[1] = proc_b1
        t_restarted = proc_b1.t_start

        # -- end of the run: stop pushing, let the consumers finish everything acknowledged
        time.sleep(max(0.0, t0 + RUN_S - time.time()))
        self.stop_producers.set()
        for t in self.threads[:PRODUCERS]:
            t.join(30)
        t_prod_end = time.time()

        def settled() -> bool:
            with self.lock:
                done = {d.id for d in self.deliveries if d.finish_outcome in ("200", "404")}
            return all(p.id in done for p in self.pushes if p.id is not None)
        try:
            wait_until(settled, DRAIN_S, 0.2, "every acknowledged job to be finished")
        except TimeoutError:
            pass  # the checks below say which
        self.stop_consumers.set()
        for t in self.threads[PRODUCERS:PRODUCERS + CONSUMERS]:
            t.join(POLL_S + 20)
        self.stop_poller.set()
        for t in self.threads:
            t.join(10)
        t_end = time.time()

        self.check_and_report(ns, nginx, daemons, names, dead_shards,
                              dict(t0=t0, t_kill=t_kill, t_marked=t_marked, t_term=t_term, t_exit=t_exit,
                                   t_restarted=t_restarted, t_prod_end=t_prod_end, t_end=t_end))

    # -- the checks

    def explain_late(self, ns, late: list[Delivery], t0: float) -> list[str]:
        """For the latest deliveries: where the time went. Times relative to t0, in s:
        due -> ready (by whom, from MySQL's transition log) -> reserved (leaseUntil - ttr) -> received."""
        late = sorted(late, key=lambda d: d.run_at)[:40]
        if not late:
            return []
        rows = ns.query("SELECT message_id, to_state, at, instance, actor FROM job_history WHERE message_id IN ("
                        + ",".join(str(d.id) for d in late) + ") ORDER BY message_id, version, at")
        ready: dict[int, tuple[int, str]] = {}
        for mid, to_state, at, instance, actor in rows:
            if to_state == "ready" and int(mid) not in ready:
                ready[int(mid)] = (int(at), f"{instance}/{actor.split()[0]}")
        out = []
        for d in late:
            due = d.run_at / 1000
            r_at, by = ready.get(d.id, (0, "?"))
            reserved = (d.lease_until - TTR_MS) / 1000 if d.lease_until else float("nan")
            out.append(f"shard {(d.id & 0xFFF) % SHARDS} due {due - t0:.2f} ready {r_at / 1000 - t0:.2f} by {by} "
                       f"reserved {reserved - t0:.2f} at {d.upstream} received {d.t_recv - t0:.2f} "
                       f"(c{d.consumer}, late {d.t_recv - due:.3f})")
        return out

    def check_and_report(self, ns, nginx: NginxServer, daemons: list[Daemon], names: list[str],
                         dead_shards: set[int], t: dict[str, float]) -> None:
        a_addr = daemons[0].address
        pushes = list(self.pushes)
        deliveries = sorted(self.deliveries, key=lambda d: d.t_recv)
        self.assertEqual(self.unexpected, [], "unexpected answers")

        acked = [p for p in pushes if p.id is not None]
        unacked = [p for p in pushes if p.id is None]
        self.assertEqual([p.key for p in unacked], [], "pushes never acknowledged (gave up)")
        self.assertGreater(len(acked), 500, "too few jobs for a meaningful run")

        # ---- retries
        retried = [p for p in acked if len(p.attempts) > 1]
        retry_outcomes: dict[str, int] = {}
        for p in acked:
            for a in p.attempts[:-1]:
                retry_outcomes[a.outcome] = retry_outcomes.get(a.outcome, 0) + 1
        # A retry that says "duplicate" found the job an earlier failed attempt had created.
        dup_after_retry = [p for p in retried if p.duplicate]
        self.assertTrue(all(len(p.attempts) > 1 for p in acked if p.duplicate),
                        "a first attempt answered duplicate: bizKeys are unique per push here")

        # ---- ids
        by_id: dict[int, Push] = {}
        for p in acked:
            self.assertNotIn(p.id, by_id, f"id {p.id} acknowledged for two pushes: {by_id.get(p.id)} and {p}")
            by_id[p.id] = p
        key_of_push = {p.key: p for p in pushes}

        # ---- deliveries per job
        per_id: dict[int, list[Delivery]] = {}
        for d in deliveries:
            per_id.setdefault(d.id, []).append(d)
        missing = [p.id for p in acked if p.id not in per_id]
        self.assertEqual(missing, [], f"{len(missing)} acknowledged jobs were never delivered")

        orphans = []  # delivered, not acknowledged: made by a push attempt whose answer was lost
        for job_id, ds in per_id.items():
            keys = {d.key for d in ds}
            self.assertEqual(len(keys), 1, f"job {job_id} delivered with different bodies {keys}")
            key = ds[0].key
            if job_id in by_id:
                self.assertEqual(by_id[job_id].key, key, f"job {job_id}: delivered body is another push's")
                continue
            p = key_of_push.get(key)
            self.assertIsNotNone(p, f"job {job_id} delivered with key {key} that nobody pushed")
            failed = [a for a in p.attempts if a.outcome != "200"]
            self.assertTrue(failed, f"job {job_id} (key {key}) was delivered, but its push was acknowledged "
                                    f"with id {p.id} at the first attempt: an id collision or a phantom job")
            orphans.append(job_id)

        redelivered_lease = []   # an earlier delivery's finish failed (lease ran out / instance died)
        redelivered_lost = []    # an attempt never reached a consumer: lost with the killed instance
        unexplained = []
        finished_twice = []
        after_finish = []
        for job_id, ds in per_id.items():
            attempts = [d.attempt for d in ds]
            if attempts != sorted(set(attempts)):
                unexplained.append(f"job {job_id}: attempts not strictly increasing {attempts}")
                continue
            oks = [d for d in ds if d.finish_outcome == "200"]
            if len(oks) > 1:
                finished_twice.append(job_id)
            if oks:
                t_ok = min(a.t_recv for d in oks for a in d.finish if a.outcome == "200")
                later = [d for d in ds if d.t_recv > t_ok]
                if later:
                    after_finish.append(f"job {job_id}: delivered at {later[0].t_recv - t['t0']:.2f}s after "
                                        f"its finish was acknowledged at {t_ok - t['t0']:.2f}s")
            prev_attempt = 0
            for i, d in enumerate(ds):
                skipped = d.attempt - prev_attempt - 1
                if skipped > 0:
                    lease_start = d.t_recv - TTR_MS / 1000
                    if skipped == 1 and t["t_kill"] + LOSS_WINDOW[0] <= lease_start <= t["t_kill"] + LOSS_WINDOW[1]:
                        redelivered_lost.append(job_id)
                    else:
                        unexplained.append(
                            f"job {job_id}: attempt {d.attempt} received at {d.t_recv - t['t0']:.2f}s, "
                            f"{skipped} earlier attempt(s) never reached a consumer and the lost lease "
                            f"started at {lease_start - t['t0']:.2f}s, not at the kill ({t['t_kill'] - t['t0']:.2f}s)")
                if i > 0:
                    prev = ds[i - 1]
                    if prev.finish_outcome == "200":
                        pass  # reported in after_finish
                    elif skipped == 0:
                        redelivered_lease.append(job_id)
                prev_attempt = d.attempt
        self.assertEqual(finished_twice, [], "jobs whose finish was acknowledged twice")
        self.assertEqual(after_finish, [], "jobs delivered again after their finish was acknowledged")
        self.assertEqual(unexplained, [], "redeliveries without an explanation")

        # ---- nothing live is left anywhere (Redis counters through any instance)
        def totals_zero():
            r = nginx.stats(timeout=5)
            return r.status == 200 and r.json()["totals"] == {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0, "far": 0}
        try:
            wait_until(totals_zero, 10, 0.2, "Redis totals to be zero")
        except TimeoutError:
            self.fail(f"jobs left in Redis after the run: {nginx.stats().json()['totals']}")
        not_done = [p.id for p in acked if not any(d.finish_outcome in ("200", "404") for d in per_id[p.id])]
        self.assertEqual(not_done, [], "acknowledged jobs whose last delivery was not finished")

        # ---- MySQL agrees: every job ended finished. A finish the killed instance made in Redis in
        # its last moment may be missing from MySQL (batched journal, contract: at-least-once).
        want = sorted(set(by_id) | set(orphans))

        def mysql_states() -> dict[int, str]:
            rows = ns.query("SELECT id, state FROM message WHERE id IN (" + ",".join(map(str, want)) + ")")
            return {int(i): s for i, s in rows}
        try:
            wait_until(lambda: all(s == "finished" for s in mysql_states().values())
                       and len(mysql_states()) == len(want), 10, 0.3, "MySQL rows to say finished")
        except TimeoutError:
            pass
        states = mysql_states()
        lagging = []
        for job_id in want:
            if states.get(job_id) == "finished":
                continue
            fin = [a for d in per_id[job_id] for a in d.finish]
            near_kill = any(t["t_kill"] - 1.0 <= a.t_send <= t["t_kill"] + 0.2 for a in fin)
            if near_kill:
                lagging.append(job_id)
            else:
                self.fail(f"job {job_id}: MySQL says {states.get(job_id)!r}, consumers saw "
                          f"{[(d.attempt, d.finish_outcome) for d in per_id[job_id]]}")

        # ---- worker numbers and ids
        procs = list(self.procs)
        b0, b1 = procs[1], procs[3]
        for pr in procs:
            self.assertTrue(pr.worker_ids, f"never saw a worker number on {pr.label}")
        for when, seen in self.poll_rounds:
            nums = list(seen.values())
            self.assertEqual(len(nums), len(set(nums)),
                             f"two live instances held the same worker number at {when - t['t0']:.2f}s: {seen}")

        def issuer(p: Push) -> Proc:
            if p.upstream == procs[0].addr:
                return procs[0]
            if p.upstream == procs[1].addr:
                return b0 if p.t_send < t["t_exit"] + 0.25 else b1
            if p.upstream == procs[2].addr:
                return procs[2]
            raise AssertionError(f"push {p.key} acknowledged by unknown upstream {p.upstream!r}")
        intervals: dict[int, dict[str, list[int]]] = {}
        for p in acked:
            if p.duplicate:
                continue  # the id was issued by an earlier attempt's instance
            pr = issuer(p)
            w = worker_of(p.id)
            self.assertIn(w, pr.worker_ids, f"id {p.id} from {pr.label} has worker number {w}, "
                                            f"but that process held {sorted(pr.worker_ids)}")
            iv = intervals.setdefault(w, {}).setdefault(pr.label, [id_ms(p.id), id_ms(p.id)])
            iv[0] = min(iv[0], id_ms(p.id))
            iv[1] = max(iv[1], id_ms(p.id))
        for w, by_proc in intervals.items():
            spans = sorted((lo, hi, label) for label, (lo, hi) in by_proc.items())
            for (lo1, hi1, l1), (lo2, hi2, l2) in zip(spans, spans[1:]):
                self.assertLess(hi1, lo2, f"worker number {w}: ids of {l1} and {l2} interleave in time")

        # ---- lateness: first deliveries (attempt 1) of jobs due after the kill
        first = {}
        for job_id, ds in per_id.items():
            first[job_id] = ds[0]
        late_all, late_dead, late_dead_early, late_dead_taken = [], [], [], []
        late_list: list[Delivery] = []  # over 0.9 s late, explained in the report
        for job_id, d in first.items():
            if d.attempt != 1 or d.run_at / 1000 <= t["t_kill"]:
                continue
            lateness = d.t_recv - d.run_at / 1000
            late_all.append(lateness)
            if lateness > 0.9:
                late_list.append(d)
            if (job_id & 0xFFF) % SHARDS in dead_shards:
                late_dead.append(lateness)
                if d.run_at / 1000 <= t["t_kill"] + 4:
                    late_dead_early.append(lateness)
                elif d.run_at / 1000 >= t["t_kill"] + 5:
                    late_dead_taken.append(lateness)

        # ---- nginx stopped trying the killed instance once the checker marked it down
        tried_a_after_mark = [p.key for p in acked for a in p.attempts
                              if a.t_send > t["t_marked"] + POLL_S + 1 and a_addr in a.upstream]
        upstream_file = read_text(nginx.upstream_path)

        failed_attempts = sorted((a.t_send, a.outcome, a.upstream, a.detail)
                                 for p in acked for a in p.attempts if a.outcome != "200")
        report = {
            "jobs_acked": len(acked), "deliveries": len(deliveries),
            "push_retries": sum(len(p.attempts) - 1 for p in acked), "pushes_retried": len(retried),
            "retry_outcomes": retry_outcomes, "dup_answer_after_retry": len(dup_after_retry),
            "orphans_from_lost_answers": len(orphans),
            "redelivered_lost_with_killed": len(redelivered_lost),
            "redelivered_lease_expired": len(redelivered_lease),
            "get_errors": len(self.get_errors),
            "finish_not_200": sum(1 for d in deliveries if d.finish_outcome != "200"),
            "finish_retries": sum(max(0, len(d.finish) - 1) for d in deliveries),
            "mysql_lagging_after_kill": len(lagging),
            "lateness_after_kill": {"n": len(late_all), "max": round(max(late_all), 3),
                                    "p99": round(pct(late_all, 0.99), 3), "p50": round(pct(late_all, 0.5), 3)},
            "lateness_dead_shards": {"shards": sorted(dead_shards), "n": len(late_dead),
                                     "max": round(max(late_dead), 3), "p99": round(pct(late_dead, 0.99), 3)},
            "lateness_dead_shards_first_4s": {"n": len(late_dead_early),
                                              "max": round(max(late_dead_early), 3) if late_dead_early else None},
            "lateness_dead_shards_after_5s": {"n": len(late_dead_taken),
                                              "max": round(max(late_dead_taken), 3) if late_dead_taken else None,
                                              "p99": round(pct(late_dead_taken, 0.99), 3)},
            "push_failures": [f"{ts - t['t0']:.2f} {o} {u} {m}" for ts, o, u, m in failed_attempts][:60],
            "late_over_0.9s": self.explain_late(ns, late_list, t["t0"]),
            "events_s": {k: round(v - t["t0"], 2) for k, v in t.items()},
            "worker_numbers": {pr.label: sorted(pr.worker_ids) for pr in procs},
            "marked_down_after_kill_s": round(t["t_marked"] - t["t_kill"], 2),
            "restart_drain_s": round(t["t_exit"] - t["t_term"], 3),
            "drain_after_producers_s": round(t["t_end"] - t["t_prod_end"], 2),
        }
        print(f"\nfleet e2e: {json.dumps(report)}", file=sys.stderr)

        self.assertEqual(tried_a_after_mark, [], "nginx still tried the killed instance after it was marked down")
        self.assertRegex(upstream_file, rf"(?m)^server {re.escape(a_addr)} .* down;$")
        for d in daemons[1:]:
            self.assertRegex(upstream_file, rf"(?m)^server {re.escape(d.address)} [^\n]*(?<!down);$")
        self.assertGreater(len(late_dead_early), 5, "too few jobs due on the dead instance's shards right after "
                                                    "the kill to measure its lateness")
        self.assertLessEqual(max(late_all), LATENESS_LIMIT,
                             f"lateness after the kill: max {max(late_all):.3f} s, p99 {pct(late_all, 0.99):.3f} s")
        self.assertLessEqual(len(lagging), 20, "too many MySQL rows behind Redis after the kill")


# --------------------------------------------------------------------------- graceful shutdown


class GracefulShutdownTest(HourglassTestCase):
    N = 200

    def test_sigterm_answers_parked_polls_exits_0_and_flushes_the_journal(self):
        d = self.start_daemon({"http": {"threads": 2}, "log": {"level": "info"},
                               "instance": {"id": "graceful"}})
        ns = d.namespace
        wait_until(lambda: d.health().status == 200, 10, 0.05, "/health 200")

        # Parked long-polls on a topic nothing is pushed to.
        results: list[tuple[int, float]] = []

        def park():
            try:
                r = d.get("idle", timeout=30, http_timeout=40)
                results.append((r.status, time.monotonic()))
            except Exception as e:  # noqa: BLE001 - recorded, asserted below
                results.append((-1, time.monotonic()))
                print(f"parked get failed: {e!r}", file=sys.stderr)
        parkers = [threading.Thread(target=park, daemon=True) for _ in range(3)]
        for th in parkers:
            th.start()
        wait_until(lambda: d.stats().json()["http"]["parked"] == 3, 10, 0.05, "3 parked long-polls")

        # N jobs pushed, delivered and finished, the finishes in a burst right before SIGTERM.
        r = d.push([{"topic": "g", "body": i} for i in range(self.N)])
        self.assertStatus(r, 200)
        ids = r.json()["ids"]
        got = []
        while len(got) < self.N:
            r = d.get("g", timeout=1, count=100)
            self.assertStatus(r, 200)
            got += r.json()
        self.assertEqual(sorted(j["id"] for j in got), sorted(ids))

        # Hold the transition table for a second, so the finishes' journal records are still
        # pending when SIGTERM comes: the shutdown must wait for them (it allows 2 s).
        locker = subprocess.Popen(
            [harness._which("mariadb"), "--no-defaults", "-uroot", f"--socket={ns.mariadb.socket}",
             "-D", ns.database, "-e", "LOCK TABLES transition WRITE; SELECT SLEEP(1.0); UNLOCK TABLES;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.addCleanup(lambda: locker.poll() is None and (locker.kill(), locker.wait()))
        wait_until(lambda: ns.mariadb.query("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                                            "WHERE INFO LIKE 'SELECT SLEEP%'") == [("1",)],
                   10, 0.01, "the table lock")

        conns = [d.connection() for _ in range(8)]
        fin_status: list[int] = []

        def finish_some(k: int):
            c = conns[k]
            for j in got[k::8]:
                c.request("GET", f"/finish?id={j['id']}")
                resp = c.getresponse()
                resp.read()
                fin_status.append(resp.status)
        finishers = [threading.Thread(target=finish_some, args=(k,)) for k in range(8)]
        for th in finishers:
            th.start()
        for th in finishers:
            th.join(30)
        for c in conns:
            c.close()
        made = sum(int(float(m.group(1))) for m in
                   re.finditer(r'^hourglass_transitions_total\{[^}]*\} (\S+)$', d.metrics().text, re.M))
        backlog = d.stats().json()["journal"]["backlog"]
        t_term = time.monotonic()
        d.signal(signal.SIGTERM)
        self.assertEqual(fin_status.count(200), self.N, f"finish answers {set(fin_status)}")
        self.assertEqual(made, 3 * self.N, "transitions the daemon counted (/metrics) for push, get, finish")
        self.assertGreater(backlog, 0, "journal records pending at SIGTERM (else this tests no flush)")

        try:
            rc = d.wait_exit(10)
        except TimeoutError:
            d.kill()
            self.fail(f"hourglassd did not exit within 10 s of SIGTERM\n{d.log_tail(30)}")
        t_exit = time.monotonic()
        d.stopped_by_us = True
        for th in parkers:
            th.join(5)
        self.assertEqual(rc, 0, f"exit status after SIGTERM\n{d.log_tail(30)}")
        _, err = locker.communicate(timeout=10)
        self.assertEqual(locker.returncode, 0, f"the table lock: {err!r}")
        self.assertEqual([s for s, _ in results], [204, 204, 204], "parked long-polls on SIGTERM")
        self.assertTrue(all(at - t_term < 5 for _, at in results), "parked long-polls answered late")

        # The journal was flushed before exit: nothing is added afterwards (the process is gone).
        id_list = ",".join(ids)
        rows = ns.query(f"SELECT to_state, COUNT(*) FROM job_history WHERE message_id IN ({id_list}) "
                        f"GROUP BY to_state ORDER BY to_state")
        counts = {s: int(n) for s, n in rows}
        self.assertEqual(sum(counts.values()), made,
                         f"transition rows in MySQL vs transitions made ({backlog} pending at SIGTERM; "
                         f"exit took {t_exit - t_term:.2f} s)")
        self.assertEqual(counts, {"ready": self.N, "reserved": self.N, "finished": self.N})
        states = ns.query(f"SELECT state, COUNT(*) FROM message WHERE id IN ({id_list}) GROUP BY state")
        self.assertEqual(states, [("finished", str(self.N))])


# --------------------------------------------------------------------------- sd_notify


class _NotifyDaemon(Daemon):
    """A Daemon started with NOTIFY_SOCKET set."""
    notify_socket = ""

    def _spawn(self, argv, env=None):
        super()._spawn(argv, {**(env or {}), "NOTIFY_SOCKET": self.notify_socket})


class SdNotifyTest(HourglassTestCase):
    def run_notify(self, path_for_env: str, bind_addr: str) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        sock.bind(bind_addr)
        sock.settimeout(15)
        d = _NotifyDaemon(overrides={"log": {"level": "info"}})
        d.notify_socket = path_for_env
        self.addCleanup(d.close)
        d.start()

        msg = sock.recv(4096).decode()
        self.assertIn("READY=1", msg.split("\n"), f"first notification: {msg!r}")
        self.assertIsNotNone(d.health(timeout=2).status)  # serving once READY was sent
        sock.settimeout(0.5)
        with self.assertRaises(socket.timeout, msg="no further notification before SIGTERM"):
            extra = sock.recv(4096)
            print(f"unexpected notification: {extra!r}", file=sys.stderr)

        sock.settimeout(10)
        d.signal(signal.SIGTERM)
        msg = sock.recv(4096).decode()
        self.assertIn("STOPPING=1", msg.split("\n"), f"notification after SIGTERM: {msg!r}")
        self.assertEqual(d.wait_exit(10), 0)
        d.stopped_by_us = True

    def test_ready_and_stopping_on_a_socket_path(self):
        path = os.path.join(tempfile.mkdtemp(prefix="hg-notify-"), "notify.sock")
        self.addCleanup(lambda: harness._remove_dir(os.path.dirname(path)))
        self.run_notify(path, path)

    def test_ready_and_stopping_on_an_abstract_socket(self):
        name = f"hg-notify-{os.getpid()}-{random.randrange(1 << 30)}"
        self.run_notify("@" + name, "\0" + name)


# --------------------------------------------------------------------------- scripts/nginx-health.sh


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code = self.server.code  # type: ignore[attr-defined]
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *a):
        pass


class HealthCheckerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hg-health-")
        self.addCleanup(lambda: harness._remove_dir(self.dir))
        self.servers = []
        for _ in range(3):
            s = http.server.ThreadingHTTPServer((HOST, 0), _Health)
            s.code = 200
            threading.Thread(target=s.serve_forever, daemon=True).start()
            self.addCleanup(s.server_close)
            self.addCleanup(s.shutdown)
            self.servers.append(s)
        self.addrs = [f"{HOST}:{s.server_address[1]}" for s in self.servers]
        self.out = os.path.join(self.dir, "upstream.conf")
        self.reloads = os.path.join(self.dir, "reloads")

    def reload_count(self) -> int:
        try:
            with open(self.reloads) as f:
                return len(f.read().splitlines())
        except FileNotFoundError:
            return 0

    def down(self) -> list[str]:
        with open(self.out) as f:
            return [line.split()[1] for line in f if line.startswith("server ") and line.rstrip().endswith(" down;")]

    def servers_listed(self) -> list[str]:
        with open(self.out) as f:
            return [line.split()[1] for line in f if line.startswith("server ")]

    def run_once(self, *addrs: str) -> int:
        return subprocess.run(["sh", HEALTH_SCRIPT, "-1", "-q", "-t", "0.5", "-o", self.out,
                               "-r", f"echo reload >> {self.reloads}", *addrs],
                              capture_output=True, timeout=30).returncode

    def test_one_round(self):
        dead = f"{HOST}:{harness.free_port()}"
        self.assertEqual(self.run_once(*self.addrs), 0)
        self.assertEqual(self.servers_listed(), self.addrs)
        self.assertEqual(self.down(), [])
        self.assertEqual(self.reload_count(), 1)
        self.assertEqual(self.run_once(*self.addrs), 0)
        self.assertEqual(self.reload_count(), 1, "reloaded although the file did not change")
        self.assertEqual(self.run_once(*self.addrs, dead), 1)
        self.assertEqual(self.down(), [dead])
        self.assertEqual(self.reload_count(), 2)
        with open(self.out) as f:
            self.assertIn(f"server {self.addrs[0]} max_fails=2 fail_timeout=5s;\n", f.read())

    def test_continuous_with_hysteresis_and_never_all_down(self):
        log = open(os.path.join(self.dir, "log"), "wb")
        self.addCleanup(log.close)
        p = subprocess.Popen(["sh", HEALTH_SCRIPT, "-i", "0.2", "-t", "0.5", "-f", "2", "-u", "2",
                              "-s", "max_fails=1", "-o", self.out, "-r", f"echo reload >> {self.reloads}",
                              *self.addrs], stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        wait_until(lambda: os.path.exists(self.out) and self.reload_count() == 1, 10, 0.05, "first round")
        self.assertEqual(self.down(), [])

        self.servers[1].code = 503  # e.g. draining
        # (the file is written first, then nginx reloaded)
        wait_until(lambda: self.down() == [self.addrs[1]] and self.reload_count() >= 2, 5, 0.05,
                   "instance 2 marked down, then a reload")
        self.assertEqual(self.reload_count(), 2)
        with open(self.out) as f:
            self.assertIn(f"server {self.addrs[1]} max_fails=1 down;\n", f.read())

        for s in self.servers:
            s.code = 503
        wait_until(lambda: self.reload_count() == 3, 5, 0.05, "a reload when all fail")
        self.assertEqual(self.down(), [], "every instance failing: none may be marked down")
        self.assertEqual(self.servers_listed(), self.addrs)

        for s in self.servers:
            s.code = 200
        time.sleep(1.0)
        self.assertEqual(self.down(), [])
        self.servers[0].code = 500
        wait_until(lambda: self.down() == [self.addrs[0]], 5, 0.05, "instance 1 marked down")
        self.servers[0].code = 200
        wait_until(lambda: self.down() == [], 5, 0.05, "instance 1 up again")
        time.sleep(0.1)  # its reload
        n = self.reload_count()
        time.sleep(1.0)
        self.assertEqual(self.reload_count(), n, "reloads while nothing changed")

        p.terminate()
        self.assertEqual(p.wait(5), 0)


if __name__ == "__main__":
    unittest.main()


class LogReopenTest(HourglassTestCase):
    """SIGHUP reopens the log file (for logrotate's rename-then-signal): after the old file is
    renamed, every later line — from the main thread and from the others — goes to a new file
    at the configured path, and nothing more to the renamed one."""

    def test_sighup_after_rename_writes_to_a_new_file(self):
        log_dir = tempfile.mkdtemp(prefix="hg-logreopen-")
        self.addCleanup(shutil.rmtree, log_dir, True)
        path = os.path.join(log_dir, "hourglass.log")
        # debug level and a tiny rate limit: a 429 is logged by the HTTP worker that answers it
        d = self.start_daemon({"log": {"level": "debug", "file": path}, "http": {"rate_limit": 1, "rate_burst": 1}})
        wait_until(lambda: d.health().status == 200, 10, 0.05, "/health 200")
        wait_until(lambda: os.path.exists(path) and "listening on" in open(path).read(), 10, 0.05,
                   "the start-up lines in the log file")
        rotated = path + ".1"
        os.rename(path, rotated)
        before = open(rotated).read()

        d.signal(signal.SIGHUP)
        wait_until(lambda: os.path.exists(path) and "log file reopened" in open(path).read(), 10, 0.05,
                   "a new log file with the SIGHUP line")
        self.assertEqual(d.health().status, 200, "the daemon must keep serving after SIGHUP")
        statuses = [d.stats().status for _ in range(5)]
        self.assertIn(429, statuses, "the rate limit should have refused one of 5 quick requests")
        wait_until(lambda: "-> 429" in open(path).read(), 10, 0.05, "the worker's 429 line in the new file")
        d.signal(signal.SIGTERM)
        wait_until(lambda: not d.running, 15, 0.05, "the daemon to exit")
        self.assertEqual(d.returncode, 0)

        after = open(path).read()
        self.assertEqual(open(rotated).read(), before, "lines written to the renamed file after SIGHUP")
        self.assertIn("draining", after, f"the shutdown lines must go to the new file:\n{after}")
        threads = set(re.findall(r"^\S+ \w+ +\[([\w-]+)\]", after, re.M))
        self.assertGreater(len(threads), 1, f"only {threads} wrote to the new file:\n{after}")


class ThreadNamesTest(HourglassTestCase):
    """The threads carry their log names in the kernel (docs/operations.md, "Logs"), so top -H,
    ps -L and perf tell them apart; the main thread keeps the process name."""

    def test_threads_are_named_in_the_kernel(self):
        d = self.start_daemon({"http": {"threads": 3}})
        d.wait_ready()
        task_dir = f"/proc/{d.pid}/task"

        def names() -> dict[int, str]:
            found = {}
            for tid in os.listdir(task_dir):
                try:
                    with open(os.path.join(task_dir, tid, "comm")) as f:
                        found[int(tid)] = f.read().strip()
                except OSError:
                    pass  # a thread that just ended
            return found

        expected = {"http-0", "http-1", "http-2", "journal", "outbox", "keeper", "db-0", "db-1"}
        wait_until(lambda: expected <= set(names().values()), 10, 0.05, f"threads named {sorted(expected)}")
        by_tid = names()
        self.assertEqual(by_tid[d.pid], "hourglassd", f"the main thread must keep the process name: {by_tid}")
        self.assertEqual(sorted(by_tid.values()).count("journal"), 1, f"one journal thread: {by_tid}")


class WorkerLeaseTest(HourglassTestCase):
    """An instance whose id lease is taken from it (here: overwritten in Redis, as if it had
    expired and another instance took it) stops issuing ids with that number, leaves the
    lease alone and takes another number (idlease.h). That a new holder of a number starts
    above the number's high-water mark is tested in tests/unit/test_ids.c."""

    def test_lease_taken_away_switches_to_a_new_number(self):
        d = self.start_daemon({"instance": {"worker_id": "auto"}})
        d.wait_ready(10)
        old = d.health().json()["workerId"]
        r = d.push({"topic": "lease", "body": 0})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(worker_of(int(r.json()["id"])), old)

        prefix = d.config["redis"]["prefix"]
        lease_key = f"{prefix}:{{w}}:worker:{old}"
        self.assertTrue(d.namespace.redis_cli("GET", lease_key), f"no lease at {lease_key}")
        d.namespace.redis_cli("SET", lease_key, "intruder", "PX", "60000")
        d.wait_for_log(rf"lost worker number {old}\b", 10)
        wait_until(lambda: d.health().json().get("workerId", -1) not in (-1, old), 10, 0.05, "a new worker number")
        new = d.health().json()["workerId"]

        ids = []
        for i in range(20):
            r = d.push({"topic": "lease", "body": i + 1})
            self.assertEqual(r.status, 200, r)
            ids.append(int(r.json()["id"]))
        self.assertEqual({worker_of(i) for i in ids}, {new}, "ids after the lease was lost must use the new number")
        self.assertEqual(d.namespace.redis_cli("GET", lease_key), "intruder", "the taken lease must not be taken back")
        self.assertEqual(ids, sorted(set(ids)), "ids must stay unique and increasing")
