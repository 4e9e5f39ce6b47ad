"""Flow control by key across the fleet (docs/api.md "Groups"): two instances on one Redis and
MySQL, consumers on both.

* fifo (groupConcurrency 1): 8 consumers on two instances, random finish delays, abandoned
  deliveries whose leases run out, and one instance killed -9 while its consumers hold jobs —
  never two jobs of a group in flight at once, each group's jobs delivered in push order, every
  job delivered and finished.
* groupRate: each group delivers at its rate (within 10 % over 10 s), whichever instance asks.
* a webhook topic with groupConcurrency 2 never has three POSTs of one group in flight.
* an AMQP topic under fifo publishes each group's jobs one after another, in order.
* far jobs of a group (the MySQL tier) page in and keep the group's limit.
* on a Redis Cluster a topic's groups live in its shard's slot, and the limits hold there.

The in-flight check is sound from the consumer's side alone: a delivery is in flight from the
moment the server reserved it (before the consumer received it) until the server let it go
(after the consumer sent its finish, or at its leaseUntil or later), so a second delivery of
the group received before the first's finish was sent and before its leaseUntil proves an
overlap."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time

from cluster_common import CLUSTER_TAGS, ClusterCase, shard_slot
from core_common import CoreTestCase, wait_until
from harness import HOST, Daemon, now_ms, shared_rabbitmq, topic_shard, unique_name
from receiver import WebhookReceiver
from test_groups import lists_disagree, put


class Delivery:
    def __init__(self, job: dict, recv: int) -> None:
        self.id = job["id"]
        self.group = job["group"]
        self.seq = job["body"]["seq"]
        self.attempt = job["attempt"]
        self.recv = recv                    # unix ms the consumer had it
        self.lease = job["leaseUntil"]      # the server lets it go at this time or later
        self.finish_sent: int | None = None  # unix ms the finish went out (answered 200)

    @property
    def end(self) -> float:
        return min(self.lease, self.finish_sent if self.finish_sent is not None else float("inf"))


def overlaps(deliveries: list[Delivery]) -> list[str]:
    """Pairs of one group's deliveries that were certainly in flight at once."""
    out = []
    by: dict = {}
    for d in deliveries:
        by.setdefault(d.group, []).append(d)
    for g, ds in by.items():
        ds.sort(key=lambda d: d.recv)
        for i in range(1, len(ds)):
            prev = max(ds[:i], key=lambda d: d.end)  # the one that stayed longest
            if ds[i].recv < prev.end:
                out.append(f"group {g}: {ds[i].id} (seq {ds[i].seq}) received at {ds[i].recv} while {prev.id} "
                           f"(seq {prev.seq}) was held until {prev.end}")
    return out


def peak_in_flight(deliveries: list[Delivery]) -> dict:
    """Per group, the most deliveries certainly in flight at one moment (each from its receipt
    to the earlier of its finish's sending and its leaseUntil: inside the server's own span)."""
    out: dict = {}
    by: dict = {}
    for d in deliveries:
        by.setdefault(d.group, []).append(d)
    for g, ds in by.items():
        # ends sort before starts at the same ms: touching spans do not overlap
        events = sorted([(d.recv, 1) for d in ds] + [(d.end, -1) for d in ds], key=lambda e: (e[0], e[1]))
        n = peak = 0
        for _, step in events:
            n += step
            peak = max(peak, n)
        out[g] = peak
    return out


def out_of_order(deliveries: list[Delivery]) -> list[str]:
    """A group's deliveries, in the order they were received, must never go back in push order."""
    out = []
    by: dict = {}
    for d in sorted(deliveries, key=lambda d: d.recv):
        last = by.get(d.group)
        if last is not None and d.seq < last.seq:
            out.append(f"group {d.group}: seq {d.seq} ({d.id}) after seq {last.seq} ({last.id})")
        by[d.group] = d
    return out


class CheckerTest(CoreTestCase):
    """The checkers above find what they look for (so the fleet test can fail)."""

    def test_checkers(self):
        def dv(group, seq, recv, lease, fin=None, attempt=1):
            d = Delivery({"id": f"{group}{seq}.{attempt}", "group": group, "body": {"seq": seq},
                          "attempt": attempt, "leaseUntil": lease}, recv)
            d.finish_sent = fin
            return d
        ok = [dv("a", 0, 100, 700, fin=200), dv("a", 1, 201, 900), dv("a", 1, 900, 1500, fin=950, attempt=2),
              dv("b", 0, 150, 800, fin=790)]
        self.assertEqual(overlaps(ok), [])
        self.assertEqual(out_of_order(ok), [])
        # received before a0's finish went out, and still held when a1 came
        self.assertEqual(len(overlaps(ok + [dv("a", 2, 199, 800)])), 2)
        self.assertEqual(len(overlaps(ok + [dv("b", 1, 700, 1400)])), 1)    # b0 unfinished and leased
        self.assertEqual(len(out_of_order(ok + [dv("a", 0, 1000, 1600, attempt=2)])), 1)
        self.assertEqual(peak_in_flight(ok), {"a": 1, "b": 1})
        self.assertEqual(peak_in_flight(ok + [dv("b", 1, 700, 1400)]), {"a": 1, "b": 2})


class Consumer(threading.Thread):
    """Long-polls one instance (a keep-alive connection), finishes after a random delay or
    abandons the job (its lease runs out) now and then. Moves to the other instance when its
    own is gone."""

    def __init__(self, instances: list[Daemon], topic: str, rng: random.Random, log: list, lock: threading.Lock,
                 stop: threading.Event, abandon: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.instances, self.topic, self.rng, self.log, self.lock, self.stop = instances, topic, rng, log, lock, stop
        self.abandon = abandon
        self.errors = 0

    def call(self, d: Daemon, method: str, path: str, timeout: float) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(HOST, d.port, timeout=timeout)
        try:
            conn.request(method, path)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def run(self) -> None:
        k = 0
        while not self.stop.is_set():
            d = self.instances[k % len(self.instances)]
            try:
                status, body = self.call(d, "GET", f"/get/{self.topic}?timeout=0.5", 5)
            except (OSError, http.client.HTTPException):
                self.errors += 1
                k += 1  # this instance is gone: the other one
                time.sleep(0.05)
                continue
            if status != 200:
                continue
            job = json.loads(body)
            dv = Delivery(job, now_ms())
            with self.lock:
                self.log.append(dv)
            if self.rng.random() < self.abandon:
                continue  # never finished: its lease runs out
            time.sleep(self.rng.uniform(0, 0.15))
            sent = now_ms()
            try:
                status, _ = self.call(d, "POST", f"/finish?id={dv.id}&attempt={dv.attempt}", 5)
            except (OSError, http.client.HTTPException):
                continue
            if status == 200:
                dv.finish_sent = sent


class FifoFleetTest(CoreTestCase):
    def test_fifo_eight_consumers_two_instances_leases_and_a_kill(self):
        a = self.start_daemon()
        self.wait_healthy(a)
        b = self.start_daemon(namespace=a.namespace)
        self.wait_healthy(b)
        self.assertJsonOk(put(a, "ff", {"groupOrder": "fifo"}))
        time.sleep(0.6)  # both instances read it
        groups, per = 12, 15
        jobs = [{"topic": "ff", "group": f"g{g}", "body": {"seq": i}, "ttr": 600, "tries": 100}
                for i in range(per) for g in range(groups)]
        ids = []
        for i in range(0, len(jobs), 60):
            ids += self.assertJsonOk(a.push(jobs[i:i + 60]))["ids"]
        log: list = []
        lock = threading.Lock()
        stop = threading.Event()
        rng = random.Random(36)
        consumers = [Consumer([a, b] if k % 2 == 0 else [b, a], "ff", random.Random(rng.random()), log, lock, stop)
                     for k in range(8)]
        for c in consumers:
            c.start()
        # kill -9 an instance while its consumers hold jobs: their leases run out, slots come back
        wait_until(lambda: len(log) >= 40, 30, 0.05, "deliveries before the kill")
        b.kill()
        try:
            wait_until(lambda: self.all_finished(a, ids), 90, 0.5, "every job finished")
        except TimeoutError:
            self.fail(f"not all finished: {self.assertJsonOk(a.request('GET', '/topics/ff'))['counts']}, groups "
                      f"{self.assertJsonOk(a.request('GET', '/topics/ff/groups'))}")
        finally:
            stop.set()
            for c in consumers:
                c.join(10)
        with lock:
            seen = list(log)
        self.assertEqual(overlaps(seen), [])
        self.assertEqual(out_of_order(seen), [])
        self.assertEqual({d.id for d in seen if d.finish_sent is not None}, set(ids))
        self.assertGreater(sum(1 for d in seen if d.attempt > 1), 0, "no lease ran out: the test proved less")
        self.assertEqual(self.assertJsonOk(a.request("GET", "/topics/ff/groups"))["groups"], [])
        self.assertEqual(lists_disagree(a, "ff"), [])

    def all_finished(self, d: Daemon, ids: list[str]) -> bool:
        c = self.assertJsonOk(d.request("GET", "/topics/ff"))["counts"]
        return c["ready"] == 0 and c["reserved"] == 0 and c["delayed"] == 0 and c["dead"] == 0


class ConcurrencyFleetTest(CoreTestCase):
    def test_group_concurrency_n_holds_with_count_n_long_polls_on_two_instances(self):
        a = self.start_daemon()
        self.wait_healthy(a)
        b = self.start_daemon(namespace=a.namespace)
        self.wait_healthy(b)
        n = 3
        self.assertJsonOk(put(a, "gn", {"groupConcurrency": n}))
        time.sleep(0.6)
        ids = self.assertJsonOk(a.push([{"topic": "gn", "group": f"g{g}", "body": {"seq": i}, "ttr": 2000}
                                        for i in range(12) for g in range(4)]))["ids"]
        log: list = []
        lock = threading.Lock()
        stop = threading.Event()
        rng = random.Random(3)

        def consume(d: Daemon, seed: float) -> None:
            r2 = random.Random(seed)
            while not stop.is_set():
                r = d.get("gn", timeout=1, count=n)
                if r.status != 200:
                    continue
                got = [Delivery(j, now_ms()) for j in r.json()]
                with lock:
                    log.extend(got)
                for dv in got:
                    time.sleep(r2.uniform(0, 0.03))
                    sent = now_ms()
                    if d.request("GET", "/finish", params={"id": dv.id, "attempt": dv.attempt}).status == 200:
                        dv.finish_sent = sent

        threads = [threading.Thread(target=consume, args=(d, rng.random()), daemon=True) for d in (a, b) * 3]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: sum(1 for d in list(log) if d.finish_sent) >= len(ids), 60, 0.1, "every job finished")
        finally:
            stop.set()
            for t in threads:
                t.join(10)
        peaks = peak_in_flight(log)
        self.assertLessEqual(max(peaks.values()), n, peaks)
        self.assertEqual(max(peaks.values()), n, f"the limit never bound: {peaks}")  # so the test proves it
        self.assertEqual({d.id for d in log if d.finish_sent}, set(ids))
        self.assertEqual(lists_disagree(a, "gn"), [])


class RateFleetTest(CoreTestCase):
    def test_group_rate_holds_across_two_instances(self):
        a = self.start_daemon()
        self.wait_healthy(a)
        b = self.start_daemon(namespace=a.namespace)
        self.wait_healthy(b)
        rate, window = 10, 10.0
        self.assertJsonOk(put(a, "gt", {"groupRate": rate}))
        time.sleep(0.6)
        self.assertJsonOk(a.push([{"topic": "gt", "group": g, "body": {"seq": i}, "ttr": 60000}
                                  for i in range(200) for g in ("x", "y", "z")]))
        got: list = []
        lock = threading.Lock()
        stop = threading.Event()

        def consume(d: Daemon) -> None:
            while not stop.is_set():
                r = d.get("gt", timeout=0.5, count=5)
                if r.status == 200:
                    at = time.monotonic()
                    with lock:
                        got.extend((at, j["group"]) for j in r.json())

        threads = [threading.Thread(target=consume, args=(d,), daemon=True) for d in (a, b, a, b)]
        start = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(window + 0.5)
        stop.set()
        for t in threads:
            t.join(10)
        with lock:
            window_got = [g for at, g in got if start + 0.25 <= at < start + 0.25 + window]
        for g in ("x", "y", "z"):
            n = window_got.count(g)
            self.assertLessEqual(abs(n - rate * window), rate * window * 0.1, f"group {g}: {n} in {window} s")
        self.assertEqual(lists_disagree(a, "gt"), [])


class WebhookGroupsTest(CoreTestCase):
    def test_webhook_group_concurrency_two_never_three_in_flight(self):
        lock = threading.Lock()
        inflight: dict = {}
        peak: dict = {}
        rng = random.Random(7)

        def answer(hit) -> int:
            g = hit.body["group"]
            with lock:
                inflight[g] = inflight.get(g, 0) + 1
                peak[g] = max(peak.get(g, 0), inflight[g])
            time.sleep(rng.uniform(0.02, 0.12))
            with lock:
                inflight[g] -= 1
            return 200

        rcv = WebhookReceiver(answer)
        self.addCleanup(rcv.close)
        a = self.start_daemon()
        self.wait_healthy(a)
        b = self.start_daemon(namespace=a.namespace)
        self.wait_healthy(b)
        self.assertJsonOk(put(a, "gw", {"groupConcurrency": 2, "deliver": {"webhook": rcv.url(), "concurrency": 16}}))
        time.sleep(0.6)
        ids = self.assertJsonOk(a.push([{"topic": "gw", "group": f"g{g}", "body": {"g": g, "i": i}}
                                        for i in range(12) for g in range(4)]))["ids"]
        wait_until(lambda: len({h.body["id"] for h in rcv.snapshot()}) == len(ids), 30, 0.1, "every POST")
        wait_until(lambda: self.assertJsonOk(a.request("GET", "/topics/gw"))["counts"]["reserved"] == 0, 10, 0.1,
                   "every job finished")
        self.assertEqual(max(peak.values()), 2, peak)  # the limit is what bound them, and it held


class AmqpGroupsTest(CoreTestCase):
    def test_amqp_fifo_publishes_a_group_one_job_at_a_time_in_order(self):
        broker = shared_rabbitmq()
        q, ex = unique_name("q"), unique_name("ex")
        broker.declare(q, exchange=ex, routing_key="jobs")
        d = self.start_daemon({"amqp": {"url": broker.url, "timeout": 3000}})
        self.wait_healthy(d)
        self.assertJsonOk(put(d, "gam", {"groupOrder": "fifo",
                                         "deliver": {"amqp": {"exchange": ex, "routingKey": "jobs"}}}))
        time.sleep(0.6)
        ids = self.assertJsonOk(d.push([{"topic": "gam", "group": f"g{g}", "body": {"g": g, "seq": i}}
                                        for i in range(6) for g in range(3)]))["ids"]
        wait_until(lambda: broker.count(q) >= len(ids), 30, 0.1, "every message")
        bodies = [json.loads(raw) for _, _, raw in broker.get_all(q)]
        self.assertEqual(sorted(b["id"] for b in bodies), sorted(ids))
        for g in range(3):
            self.assertEqual([b["body"]["seq"] for b in bodies if b["group"] == f"g{g}"], list(range(6)))
        # one at a time: each job of a group reserved only once the one before it was confirmed
        for g in range(3):
            mine = [i for i, j in zip(ids, [{"g": g2} for i2 in range(6) for g2 in range(3)]) if j["g"] == g]
            spans = []
            for jid in mine:
                hist = self.assertJsonOk(d.job(jid))["history"]
                at = {h["state"]: h["at"] for h in hist}
                spans.append((at["reserved"], at["finished"]))
            for (r1, f1), (r2, f2) in zip(spans, spans[1:]):
                self.assertGreaterEqual(r2, f1, f"group g{g}: {spans}")


class FarGroupsTest(CoreTestCase):
    def test_far_jobs_of_a_group_page_in_and_keep_the_limit(self):
        d = self.start_daemon({"queue": {"horizon": 2000}})
        self.wait_healthy(d)
        self.assertJsonOk(put(d, "gz", {"groupConcurrency": 1}))
        due = now_ms() + 4000
        ids = self.assertJsonOk(d.push([{"topic": "gz", "group": "far", "body": {"seq": i}, "runAt": due + i,
                                         "ttr": 30000} for i in range(3)]))["ids"]
        self.assertEqual(self.assertJsonOk(d.job(ids[0])).get("tier"), "mysql")
        self.assertEqual(self.assertJsonOk(d.job(ids[0]))["group"], "far")
        first = self.assertJsonOk(d.get("gz", timeout=8))
        self.assertEqual(first["id"], ids[0])
        self.assertEqual(first["group"], "far")
        self.assertGreaterEqual(now_ms(), due - 5)
        time.sleep(0.2)
        self.assertEqual(d.get("gz").status, 204)  # the group's one slot is taken
        self.assertJsonOk(d.finish(ids[0]))
        self.assertEqual(self.assertJsonOk(d.get("gz", timeout=2))["id"], ids[1])


class ClusterGroupsTest(ClusterCase):
    def test_a_topics_groups_live_on_its_shard_of_a_cluster(self):
        d = self.cluster_daemon()
        prefix = d.config["redis"]["prefix"]
        topics = [f"gcl.{i}" for i in range(6)]
        for t in topics:
            self.assertJsonOk(put(d, t, {"groupConcurrency": 1, "groupRate": 1000}))
        time.sleep(0.6)
        for t in topics:
            self.assertJsonOk(d.push([{"topic": t, "group": g, "body": i, "ttr": 30000}
                                      for i in range(2) for g in ("a", "b", "c")]))
            self.push(d, t, "later", group="d", delay=60000)
        firsts = {t: self.assertJsonOk(d.get(t, count=10)) for t in topics}
        for t in topics:
            self.assertEqual(sorted(j["group"] for j in firsts[t]), ["a", "b", "c"], t)
            self.push(d, t, "waits its turn", group="e")  # in the round, not taken yet
        # a group held by its rate (on "gt:"), and one with nothing left whose rate still
        # remembers its delivery (on "gz:" until its tat passes)
        rated = "gcl.rate"
        self.assertJsonOk(put(d, rated, {"groupConcurrency": 2, "groupRate": 1}))
        time.sleep(0.6)
        self.assertJsonOk(d.push([{"topic": rated, "group": "h", "body": i, "ttr": 30000} for i in range(2)]
                                 + [{"topic": rated, "group": "z", "body": 0, "ttr": 30000}]))
        got = self.assertJsonOk(d.get(rated, count=10))
        self.assertEqual(sorted(j["group"] for j in got), ["h", "z"], "the rate holds h's second job")
        self.assertJsonOk(d.finish(next(j["id"] for j in got if j["group"] == "z")))
        # every key of a topic's groups carries its shard's tag, on the master serving that slot
        by_node = self.keys_by_node(prefix)
        want = {t: ["gq", "gr", "gs"] for t in topics}
        want[rated] = ["gr", "gs", "gt", "gz"]
        for t in topics + [rated]:
            tag = CLUSTER_TAGS[topic_shard(t)]
            owner = self.owner(shard_slot(topic_shard(t)))
            mine = [k for keys in by_node.values() for k in keys if k.endswith(":" + t) and
                    any(f":{p}:" in k for p in ("gr", "gq", "gs", "gt", "gz"))]
            self.assertEqual(sorted(k.split("}:")[1].split(":")[0] for k in mine), want[t], t)
            for k in mine:
                self.assertTrue(k.startswith(f"{prefix}:{{{tag}}}:"), k)
                self.assertIn(k, by_node[owner], f"{k} is not on the master of its slot")
        # finishing frees each group's slot: its second job comes, then nothing is left but the
        # delayed one
        for t in topics:
            for j in firsts[t]:
                self.assertJsonOk(d.finish(j["id"]))
            second = self.assertJsonOk(d.get(t, count=10, timeout=2))
            self.assertEqual(sorted(j["group"] for j in second), ["a", "b", "c", "e"], t)
            for j in second:
                self.assertJsonOk(d.finish(j["id"]))
            page = self.assertJsonOk(d.request("GET", f"/topics/{t}/groups"))
            self.assertEqual(page, {"groups": [{"group": "d", "delayed": 1, "ready": 0, "reserved": 0}],
                                    "next": None})
