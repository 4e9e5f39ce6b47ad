"""Faults of a real fleet (issue 31, item 4): background duties that stop are visible.

Before, /health said "ok" while the journal's outbox reader, the pager or the reconciler had
stopped succeeding (a Cluster seed lost for good left the outbox never reconnecting, with
/health "ok"). Now every duty reports its successes and failures (src/core/dutywatch.h), and
one that has not succeeded for longer than its bound (5 s) is named in /health under
"stuck":[{"duty","shard","sinceMs","error"}] — status "degraded", still 200 — and counted in
/metrics (hourglass_duties_stuck, hourglass_duty_stuck_seconds{duty,shard}), within 10 s.

Each test stops one duty alone with the fault seam (HOURGLASS_FAULTS, src/base/fault.h: the
duty's thread's MySQL statements or Redis sends fail from some point on), so the rest of the
instance works and only the duty's own failure can make it "degraded".

    make integration T=test_fault_stuck
"""

from __future__ import annotations

import time

from core_common import CoreTestCase
from harness import journal_idle, wait_until

SHOWN_WITHIN_S = 10.0
FOREVER = 1_000_000  # arrivals at the fault point that fail: the rest of the test


class StuckDutyTest(CoreTestCase):
    def stuck_daemon(self, faults: str, **overrides):
        d = self.daemon_with(faults, **overrides)
        self.wait_healthy(d)
        return d

    def daemon_with(self, faults: str, **overrides):
        from harness import Daemon
        d = Daemon(overrides=overrides or None)
        if faults:
            d.env["HOURGLASS_FAULTS"] = faults
        self.addCleanup(d.close)
        return d.start()

    def assertStuck(self, d, duty: str, since: float, within: float = SHOWN_WITHIN_S) -> dict:
        """/health names `duty` as stuck within `within` s of `since` (monotonic: when the duty
        stopped), says degraded with 200, and /metrics counts it."""
        def named():
            r = d.health()
            body = r.json()
            hit = [s for s in body.get("stuck", []) if s["duty"] == duty]
            return (r.status, body, hit[0]) if hit else None

        status, body, entry = wait_until(named, within + 5, 0.1, f"/health to name the {duty} duty as stuck")
        shown_after = time.monotonic() - since
        self.assertLess(shown_after, within, f"{duty} shown stuck only {shown_after:.1f} s after it stopped")
        self.assertEqual((status, body["status"]), (200, "degraded"), body)
        self.assertGreaterEqual(entry["sinceMs"], 5000, entry)
        self.assertTrue(entry["error"], entry)
        metrics = d.metrics().text
        self.assertRegex(metrics, r"\nhourglass_duties_stuck [1-9]")
        self.assertIn(f'hourglass_duty_stuck_seconds{{duty="{duty}",', metrics)
        return entry

    def test_the_mover_stopped_by_redis_failures(self):
        # the keeper's Redis sends fail from the 40th on: the mover (and nothing on the workers)
        d = self.stuck_daemon("keeper:redis.send=fail@40+%d" % FOREVER)
        since = time.monotonic()  # the failures begin after this (the 40th send): a stricter bound
        entry = self.assertStuck(d, "mover", since)
        self.assertIsInstance(entry["shard"], int)

    def test_the_pager_stopped_by_mysql_failures(self):
        # the pager's statements through db.h fail; it reads a shard's far keys only once the
        # shard has far jobs, so one is pushed (horizon 5 s)
        d = self.stuck_daemon("pager:mysql.exec=fail@1+%d" % FOREVER, queue={"horizon": 5000})
        self.assertJsonOk(d.push({"topic": "stuck.p", "body": 1, "delay": 60000}))
        self.assertStuck(d, "pager", time.monotonic())
        self.assertJsonOk(d.push({"topic": "stuck.p", "body": 2}))  # the rest serves

    def test_the_scheduler_stopped_by_mysql_failures(self):
        # the scheduler's writes fail: a schedule due every second cannot fire
        d = self.stuck_daemon("scheduler:mysql.exec=fail@1+%d" % FOREVER)
        self.assertJsonOk(d.request("POST", "/schedules", body={"topic": "stuck.s", "every": 1000,
                                                                "job": {"body": {"tick": 1}}}))
        self.assertStuck(d, "scheduler", time.monotonic())

    def test_the_reconciler_stopped_by_mysql_failures(self):
        # a push whose COMMIT answer is lost is in doubt; the pool's MySQL then fails, so the
        # reconciler cannot settle it (it waits DOUBT_GRACE_MS, 5 s, before its first try)
        d = self.stuck_daemon("journal:mysql.commit=lost@1,db-0:mysql.exec=fail@1+%d,db-1:mysql.exec=fail@1+%d"
                              % (FOREVER, FOREVER))
        r = d.push({"topic": "stuck.r", "body": 1})
        self.assertEqual(r.status, 503, r.text)
        entry = self.assertStuck(d, "reconciler", time.monotonic() + 4, within=SHOWN_WITHIN_S + 6)
        self.assertIsNone(entry["shard"])

    def test_the_outbox_of_a_shard_redis_refuses_to_read(self):
        d = self.stuck_daemon("")
        # shard 0's outbox stream becomes a key Redis will not read as a stream
        key = f"{d.config['redis']['prefix']}:{{0}}:log"
        d.namespace.redis_cli("DEL", key)
        d.namespace.redis_cli("SET", key, "not a stream")
        entry = self.assertStuck(d, "outbox", time.monotonic())
        self.assertIn("WRONGTYPE", entry["error"])

    def test_the_fence_check_stopped_by_mysql_down(self):
        # Redis rolls back while MySQL is down: the shards are fenced and their fence check
        # (the restore duty) cannot run; /health names it (503 here: MySQL is down too) until
        # MySQL is back, the check runs and the stuck entry goes
        stack = self.private_stack()
        d = self.start_daemon(namespace=stack.fresh_namespace())
        self.wait_healthy(d)
        time.sleep(1.2)  # this instance's marks are in every shard
        self.assertJsonOk(d.push({"topic": "stuck.f", "body": 1, "delay": 60000}))
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal")
        stack.redis.cli("SAVE")
        time.sleep(1.2)  # the marks move on past the snapshot's
        stack.mariadb.stop()
        stack.redis.kill()
        stack.redis.start()
        since = time.monotonic()

        def named():
            hit = [s for s in d.health().json().get("stuck", []) if s["duty"] == "restore"]
            return hit[0] if hit else None

        entry = wait_until(named, SHOWN_WITHIN_S + 5, 0.1, "/health to name the restore duty as stuck")
        self.assertLess(time.monotonic() - since, SHOWN_WITHIN_S)
        self.assertIn("fence check", entry["error"])
        self.assertGreaterEqual(d.health().json().get("fencedShards", 0), 1)
        stack.mariadb.start()
        wait_until(lambda: named() is None and "fencedShards" not in d.health().json(), 30, 0.2,
                   "the fence check to run once MySQL is back")

    def test_a_healthy_instance_names_no_duty(self):
        d = self.daemon_with("")
        self.wait_healthy(d)
        self.assertJsonOk(d.push({"topic": "stuck.none", "body": 1}))
        time.sleep(7)  # past every bound
        body = d.health().json()
        self.assertEqual(body["status"], "ok", body)
        self.assertNotIn("stuck", body)
        self.assertIn("\nhourglass_duties_stuck 0\n", d.metrics().text)


if __name__ == "__main__":
    import unittest
    unittest.main()
