"""Faults of a real fleet (issue 31, item 2): one clock for the fleet.

Two instances share one Redis and MySQL; one runs with its clock 5 s ahead (Debian's
libfaketime, LD_PRELOAD + FAKETIME="+5s": the process's CLOCK_REALTIME is skewed, nothing
else). Before, due times and leases were judged by the clock of whichever instance ran the
script: the skewed one delivered everyone's jobs up to 5 s early and moved other consumers'
leases back to ready 5 s early. Now each instance measures its offset to Redis's TIME and
works in the fleet's time (base/clock.h, duties/clocksync.h):

* /health shows clockOffsetMs (about +5000 on the skewed instance, about 0 on the other) and
  /metrics hourglass_clock_offset_ms;
* jobs pushed with a delay through either instance are delivered through either, none more
  than 10 ms before its due time, and its due time is the push's moment plus the delay in the
  fleet's time (not 5 s later);
* a lease taken through the good instance is not cut by the skewed one's mover, and still runs
  out on time.
The same runs with the clock 5 s behind (BehindInstanceTest): its pushes were due 5 s early.

    make integration T=test_fault_clock
"""

from __future__ import annotations

import threading
import time
import unittest

from core_common import CoreTestCase
from harness import Daemon, now_ms, skewed, wait_healthy, wait_until

SKEW_MS = 5000
EARLY_MS = 10  # the contract's tolerance for a delivery before its due time


class Consumers:
    """Long-poll `topic` through each daemon, finishing every job; record (id, runAt, received ms)."""

    def __init__(self, daemons: list[Daemon], topic: str) -> None:
        self.topic = topic
        self.got: list[tuple[str, int, int, str]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(d,), daemon=True) for d in daemons for _ in range(2)]
        for t in self.threads:
            t.start()

    def run(self, d: Daemon) -> None:
        while not self.stop.is_set():
            try:
                r = d.get(self.topic, timeout=1, http_timeout=10)
            except OSError:
                time.sleep(0.2)
                continue
            if r.status != 200:
                time.sleep(0.05)
                continue
            job = r.json()
            with self.lock:
                self.got.append((job["id"], job["runAt"], now_ms(), d.address))
            d.finish(job["id"])

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)


class SkewedInstanceTest(CoreTestCase):
    skew_ms = SKEW_MS  # the skewed instance's clock minus the machine's

    def setUp(self):
        ns = self.namespace()
        self.good = self.start_daemon(namespace=ns)
        self.ahead = skewed(Daemon(namespace=ns), self.skew_ms)
        self.addCleanup(self.ahead.close)
        self.ahead.start()
        wait_healthy(self, self.good)
        wait_healthy(self, self.ahead)

    def test_health_and_metrics_show_the_offset(self):
        ahead = self.assertJsonOk(self.ahead.health())["clockOffsetMs"]
        good = self.assertJsonOk(self.good.health())["clockOffsetMs"]
        self.assertAlmostEqual(ahead, self.skew_ms, delta=100, msg="the skewed instance's offset")
        self.assertAlmostEqual(good, 0, delta=100, msg="the good instance's offset")
        metrics = self.ahead.metrics().text
        line = next(l for l in metrics.splitlines() if l.startswith("hourglass_clock_offset_ms "))
        self.assertAlmostEqual(float(line.split()[1]), self.skew_ms, delta=100)

    def test_no_delivery_early_through_either_instance(self):
        topic = "clock.due"
        sent: dict[str, int] = {}
        consumers = Consumers([self.good, self.ahead], topic)
        self.addCleanup(consumers.close)
        for i in range(40):
            d = self.good if i % 2 == 0 else self.ahead
            at = now_ms()
            sent[self.assertJsonOk(d.push({"topic": topic, "body": i, "delay": 3000}))["id"]] = at
        wait_until(lambda: len({g[0] for g in consumers.got}) >= 40, timeout=20)
        consumers.close()
        self.assertEqual({g[0] for g in consumers.got}, set(sent))
        for jid, run_at, received, via in consumers.got:
            # the due time is the push's moment plus the delay in the fleet's time (the test's
            # clock is the machine's, which Redis shares), not 5 s off
            self.assertGreaterEqual(run_at, sent[jid] + 3000 - EARLY_MS, f"job {jid}: runAt before its push + delay")
            self.assertLess(run_at, sent[jid] + 3000 + 1000, f"job {jid}: runAt skewed late")
            self.assertGreaterEqual(received, run_at - EARLY_MS,
                                    f"job {jid} delivered through {via} {run_at - received} ms before its due time")

    def test_a_lease_is_not_cut_by_the_skewed_instance(self):
        topic = "clock.lease"
        jid = self.assertJsonOk(self.good.push({"topic": topic, "body": 1, "ttr": 6000}))["id"]
        job = self.assertJsonOk(self.good.get(topic, timeout=2))
        self.assertEqual(job["id"], jid)
        taken = now_ms()
        # the skewed instance keeps asking for the job while the lease lasts: it must not get it
        deadline = taken + 6000 - 500
        while now_ms() < deadline:
            r = self.ahead.get(topic, timeout=0.5, http_timeout=10)
            self.assertNotEqual(r.status, 200, f"the job came back {now_ms() - taken} ms into a 6000 ms lease: {r.text}")
        # and the lease still runs out on time: the job is delivered again through the skewed one
        again = None
        while now_ms() < taken + 6000 + 3000 and again is None:
            r = self.ahead.get(topic, timeout=1, http_timeout=10)
            if r.status == 200:
                again = r.json()
        self.assertIsNotNone(again, "the lease never ran out")
        self.assertEqual(again["id"], jid)
        self.assertGreaterEqual(now_ms(), taken + 6000 - EARLY_MS)


class BehindInstanceTest(SkewedInstanceTest):
    skew_ms = -SKEW_MS


if __name__ == "__main__":
    unittest.main()
