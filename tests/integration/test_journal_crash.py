"""kill -9 of the daemon mid-traffic: every acknowledged push is still delivered after a restart.

Redis is persistent here (appendonly yes, appendfsync always), so the test is about the
daemon: a push answered 200 had its message row committed in MySQL and its job in Redis
before the answer, so neither a crash of the daemon nor its restart may lose it.

Allowed: a job delivered again after the restart although it was finished before the crash
only if its push had been acknowledged (at-least-once); jobs whose push got no answer (in
flight at the kill) may or may not exist; a job whose finish got no answer (in flight at the
kill) may or may not have finished. Not allowed: an acknowledged job that is never
delivered again (unless it was finished before the crash), a delivery of a job whose push was
refused, or an acknowledged push without its message row.
"""

from __future__ import annotations

import http.client
import threading
import time

from harness import HourglassTestCase
from test_journal_common import start_ready, totals, wait_healthy, wait_or_fail

TOPIC = "crash"


class Traffic:
    def __init__(self, d):
        self.d = d
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: set[str] = set()        # push answered 200
        self.refused: list[int] = []        # push answered something else (HTTP status)
        self.unknown = 0                    # push with no answer (connection dropped)
        self.delivered: set[str] = set()    # delivered before the kill
        self.finished: set[str] = set()     # finish answered 200 before the kill
        self.finish_unknown: set[str] = set()  # finish sent, no answer (in flight at the kill)
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self.pusher, args=(p,), daemon=True) for p in range(2)]
        self.threads.append(threading.Thread(target=self.consumer, daemon=True))

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def pusher(self, p):
        k = 0
        while not self.stop.is_set():
            size = 1 if k % 3 else 5
            jobs = [{"topic": TOPIC, "body": {"p": p, "k": k + i}} for i in range(size)]
            k += size
            try:
                r = self.d.push(jobs if size > 1 else jobs[0], timeout=10)
            except ConnectionRefusedError:
                continue  # the daemon is gone: this push was never received
            except (OSError, http.client.HTTPException):
                with self.lock:
                    self.unknown += size  # sent, no answer: may or may not have happened
                continue
            with self.lock:
                if r.status == 200:
                    b = r.json()
                    self.acked.update(b["ids"] if size > 1 else [b["id"]])
                else:
                    self.refused.append(r.status)

    def consumer(self):
        while not self.stop.is_set():
            try:
                r = self.d.get(TOPIC, timeout=1, count=10)
                if r.status != 200:
                    continue
                for j in r.json():
                    with self.lock:
                        self.delivered.add(j["id"])
                    try:
                        ok = self.d.finish(j["id"], timeout=10).status == 200
                    except ConnectionRefusedError:
                        raise
                    except (OSError, http.client.HTTPException):
                        with self.lock:
                            self.finish_unknown.add(j["id"])  # sent, no answer: may have finished
                        raise
                    if ok:
                        with self.lock:
                            self.finished.add(j["id"])
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)


class CrashTest(HourglassTestCase):
    def test_kill_9_mid_traffic_loses_no_acknowledged_push(self):
        r = self.private_redis(persistent=True)
        d = start_ready(self, {"redis": {"address": r.address, "db": 0},
                               "queue": {"default_ttr": 2000}})
        q = d.namespace.query
        traffic = Traffic(d)
        traffic.start()
        self.addCleanup(traffic.join)
        wait_or_fail(self, lambda: len(traffic.acked) >= 1500 and len(traffic.finished) >= 300, 30,
                     "traffic before the kill",
                     lambda: f"acked {len(traffic.acked)}, finished {len(traffic.finished)}")
        self.assertEqual(d.kill(), -9)
        traffic.join()
        with traffic.lock:
            acked, finished = set(traffic.acked), set(traffic.finished) | set(traffic.finish_unknown)
            refused = list(traffic.refused)
        self.assertFalse(refused, f"pushes refused before the kill: {refused[:10]}")

        wait_healthy(self, d.start())
        after: list[str] = []

        def drained():
            got = d.get(TOPIC, timeout=1, count=100)
            if got.status == 200:
                for j in got.json():
                    after.append(j["id"])
                    if d.finish(j["id"]).status != 200:
                        raise AssertionError(f"finish of {j['id']} after the restart failed")
                return False
            return totals(d) == {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0}
        # jobs reserved by the killed consumer come back when their 2 s lease runs out
        wait_or_fail(self, drained, 60, "every job to be consumed after the restart",
                     lambda: f"totals {totals(d)}")

        self.assertEqual(len(after), len(set(after)), "a job delivered twice after the restart")
        missing = acked - finished - set(after)
        self.assertFalse(missing, f"{len(missing)} of {len(acked)} acknowledged pushes were lost by kill -9 "
                                  f"(neither finished before nor delivered after), e.g. {sorted(missing)[:5]}")
        strays = set(after) - acked
        # a delivery of a job that was not acknowledged is fine only for a push left without an
        # answer by the kill (at most the pushes in flight then)
        self.assertLessEqual(len(strays), traffic.unknown,
                             f"{len(strays)} jobs delivered that no push acknowledged; "
                             f"{traffic.unknown} pushes were in flight at the kill")
        ids = sorted(acked)
        have = 0
        for i in range(0, len(ids), 1000):
            have += int(q(f"SELECT COUNT(*) FROM message WHERE id IN ({','.join(ids[i:i + 1000])})")[0][0])
        self.assertEqual(have, len(acked), "an acknowledged push has no committed message row")
