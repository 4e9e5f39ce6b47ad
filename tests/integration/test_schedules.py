"""Schedules (docs/api.md "Schedules"): POST/GET /schedules, GET/PUT/DELETE /schedules/{id}, and
the fires they make, with real Redis and MariaDB and two instances where the contract speaks of
the fleet: every fire time makes exactly one job (bizKey "<id>@<time>") through kill -9 and
restarts; catch-up policies after downtime; pause holds; changes reach every instance within
a second; a fire is no later than an ordinary job due at the same time.

    make integration T=test_schedules
"""

from __future__ import annotations

import http.client
import json
import threading
import time

from core_common import CoreTestCase, now_ms, wait_until
from harness import Daemon

TOPIC = "sched"


def create(d: Daemon, **spec):
    return d.request("POST", "/schedules", body=spec)


def fire_times(d: Daemon, sid: str) -> list[int]:
    """The fire times with a job in MySQL (not aborted: a deduped second push leaves an aborted
    row), one entry per job; sorted."""
    rows = d.namespace.query(
        f"SELECT biz_key FROM message WHERE biz_key LIKE '{sid}@%' AND state <> 'aborted'")
    return sorted(int(r[0].split("@")[1]) for r in rows)


class Consumer:
    """Long-polls `topic` on the given instances until stopped, finishing every job; records
    (bizKey, runAt, received unix ms)."""

    def __init__(self, daemons: list[Daemon], topic: str) -> None:
        self.daemons, self.topic = daemons, topic
        self.got: list[tuple[str, int, int]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(d,), daemon=True) for d in daemons]
        for t in self.threads:
            t.start()

    def _run(self, d: Daemon) -> None:
        while not self.stop.is_set():
            try:
                r = d.get(self.topic, timeout=1, http_timeout=10)
            except (OSError, http.client.HTTPException):
                # refused, reset, or an answer cut short (a kill -9 mid-body raises IncompleteRead,
                # not an OSError): keep polling, as a consumer would; a job in a lost answer
                # comes back after its lease
                time.sleep(0.2)
                continue
            if r.status != 200:
                time.sleep(0.05 if r.status == 204 else 0.3)
                continue
            job = r.json()
            self.got.append((job.get("bizKey"), job["runAt"], now_ms()))
            try:
                d.finish(job["id"])
            except (OSError, http.client.HTTPException):
                pass

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)


class ScheduleApiTest(CoreTestCase):
    def test_create_list_get_pause_delete(self):
        d = self.daemon()
        before = now_ms()
        got = self.assertJsonOk(create(d, topic="rep", cron="30 2 * * *", tz="Europe/Berlin",
                                       job={"body": {"report": "daily"}, "ttr": 60000}, catchUp="one"))
        sid = got["id"]
        self.assertTrue(sid.isdigit(), got)
        # 02:30 Berlin is 00:30 or 01:30 UTC: the next fire is within a day, on a half hour
        self.assertGreater(got["next"], before)
        self.assertLessEqual(got["next"], before + 86400000 + 3600000)
        self.assertEqual(got["next"] % 1800000, 0)
        one = self.assertJsonOk(d.request("GET", f"/schedules/{sid}"))
        self.assertEqual((one["id"], one["topic"], one["cron"], one["tz"], one["catchUp"], one["paused"]),
                         (sid, "rep", "30 2 * * *", "Europe/Berlin", "one", False))
        self.assertEqual(one["job"], {"body": {"report": "daily"}, "ttr": 60000})
        self.assertEqual(one["next"], got["next"])
        every = self.assertJsonOk(create(d, topic="rep2", every=60000, job={"body": 1}))
        listed = self.assertJsonOk(d.request("GET", "/schedules"))["schedules"]
        self.assertEqual([s["id"] for s in listed], sorted([sid, every["id"]], key=int))
        e = next(s for s in listed if s["id"] == every["id"])
        self.assertEqual((e["every"], e["catchUp"]), (60000, "skip"))
        self.assertNotIn("cron", e)
        # pause and resume
        self.assertTrue(self.assertJsonOk(d.request("PUT", f"/schedules/{sid}", body={"paused": True}))["paused"])
        self.assertTrue(self.assertJsonOk(d.request("GET", f"/schedules/{sid}"))["paused"])
        self.assertFalse(self.assertJsonOk(d.request("PUT", f"/schedules/{sid}", body={"paused": False}))["paused"])
        # delete
        self.assertJsonOk(d.request("DELETE", f"/schedules/{sid}"))
        self.assertError(d.request("GET", f"/schedules/{sid}"), 404, "not_found")
        self.assertError(d.request("DELETE", f"/schedules/{sid}"), 404, "not_found")
        self.assertError(d.request("PUT", f"/schedules/{sid}", body={"paused": True}), 404, "not_found")
        self.assertEqual(len(self.assertJsonOk(d.request("GET", "/schedules"))["schedules"]), 1)

    def test_bad_input_is_a_400_naming_the_field(self):
        d = self.daemon()
        cases = [
            ({"topic": "t", "cron": "61 * * * *", "job": {}}, "cron: minute"),
            ({"topic": "t", "cron": "* 25 * * *", "job": {}}, "cron: hour"),
            ({"topic": "t", "cron": "* * 0 * *", "job": {}}, "cron: day-of-month"),
            ({"topic": "t", "cron": "* * * 13 *", "job": {}}, "cron: month"),
            ({"topic": "t", "cron": "* * * * MON-FUN", "job": {}}, "cron: day-of-week"),
            ({"topic": "t", "cron": "* * * *", "job": {}}, "cron:"),
            ({"topic": "t", "cron": "* * * * *", "tz": "Nowhere/Atlantis", "job": {}}, "tz:"),
            ({"topic": "t", "every": 10, "job": {}}, "every:"),
            ({"topic": "t", "every": 1000, "cron": "* * * * *", "job": {}}, "give cron"),
            ({"topic": "t", "job": {}}, "give cron"),
            ({"topic": "", "every": 1000, "job": {}}, "topic"),
            ({"topic": "t", "every": 1000}, "job"),
            ({"topic": "t", "every": 1000, "job": {"delay": 5}}, "job.delay"),
            ({"topic": "t", "every": 1000, "job": {"ttr": -5}}, "job:"),
            ({"topic": "t", "every": 1000, "job": {}, "catchUp": "twice"}, "catchUp"),
            ({"topic": "t", "every": 1000, "job": {}, "extra": 1}, "unknown field"),
            ([1], "JSON object"),
        ]
        for body, word in cases:
            with self.subTest(body=body):
                obj = self.assertError(d.request("POST", "/schedules", body=body), 400, "bad_request")
                self.assertIn(word, obj["message"])
        self.assertError(d.request("POST", "/schedules", body="{not json"), 400, "bad_request")
        self.assertError(d.request("GET", "/schedules/abc"), 400, "bad_request")
        self.assertError(d.request("GET", "/schedules/123"), 404, "not_found")
        sid = self.assertJsonOk(create(d, topic="t", every=60000, job={}))["id"]
        for body in ({}, {"paused": "yes"}, {"paused": True, "every": 5}, "x"):
            with self.subTest(put=body):
                self.assertError(d.request("PUT", f"/schedules/{sid}", body=body), 400, "bad_request")
        self.assertError(d.request("PATCH", f"/schedules/{sid}"), 405, "method_not_allowed")
        # nothing of the refused ones was stored
        self.assertEqual(len(self.assertJsonOk(d.request("GET", "/schedules"))["schedules"]), 1)

    def test_writes_are_admin_only(self):
        d = self.start_daemon({"http": {"admin_token": "adm"}})
        self.wait_healthy(d)
        self.assertError(d.request("POST", "/schedules", body={"topic": "t", "every": 1000, "job": {}}),
                         401, "unauthorized")
        auth = {"Authorization": "Bearer adm"}
        sid = self.assertJsonOk(d.request("POST", "/schedules", body={"topic": "t", "every": 60000, "job": {}},
                                          headers=auth))["id"]
        self.assertError(d.request("DELETE", f"/schedules/{sid}"), 401, "unauthorized")
        self.assertJsonOk(d.request("GET", f"/schedules/{sid}"))  # reading is not admin
        self.assertJsonOk(d.request("DELETE", f"/schedules/{sid}", headers=auth))


class FiringTest(CoreTestCase):
    """Two instances on one namespace."""

    def two(self, **overrides):
        ov = {"queue": overrides} if overrides else None
        a = self.start_daemon(ov)
        b = self.start_daemon(ov, namespace=a.namespace)
        self.wait_healthy(a)
        self.wait_healthy(b)
        return a, b

    def test_every_second_for_ten_seconds_makes_ten_jobs_once_each(self):
        a, b = self.two()
        topic = TOPIC + ".ten"
        consumer = Consumer([a, b], topic)
        self.addCleanup(consumer.close)
        made = self.assertJsonOk(create(a, topic=topic, every=1000, job={"body": {"tick": True}}))
        sid = made["id"]
        created = self.assertJsonOk(a.request("GET", f"/schedules/{sid}"))["createdAt"]
        self.assertEqual(made["next"], created + 1000)
        time.sleep(10.3 - (now_ms() - created) / 1000)
        self.assertJsonOk(a.request("DELETE", f"/schedules/{sid}"))
        expected = [created + 1000 * k for k in range(1, 11)]
        wait_until(lambda: len([g for g in consumer.got if g[1] <= expected[-1]]) >= 10, 10, 0.1,
                   "the ten fires to be delivered")
        time.sleep(1.5)  # anything made twice would arrive by now
        consumer.close()
        got = [g for g in consumer.got if g[1] <= expected[-1]]
        self.assertEqual(sorted(g[1] for g in got), expected, "one job per fire time")
        self.assertEqual(sorted(g[0] for g in got), sorted(f"{sid}@{t}" for t in expected))
        for biz, run_at, received in got:
            self.assertGreaterEqual(received, run_at - 5, f"{biz} delivered before its fire time")
        self.assertEqual(fire_times(a, sid)[:10], expected, "MySQL holds one live job per fire time")

    def test_kill_9_and_restarts_change_nothing(self):
        a, b = self.two()
        topic = TOPIC + ".kill"
        consumer = Consumer([a, b], topic)
        self.addCleanup(consumer.close)
        sid = self.assertJsonOk(create(a, topic=topic, every=1000, job={"body": 1}, catchUp="all"))["id"]
        created = self.assertJsonOk(a.request("GET", f"/schedules/{sid}"))["createdAt"]
        time.sleep(3)
        # the instance that fires it is killed mid-stream; the other takes its shards over
        firing = a if self.assertJsonOk(a.stats())["schedules"]["firing"] == 1 else b
        other = b if firing is a else a
        self.assertEqual(self.assertJsonOk(other.stats())["schedules"]["firing"], 0, "one instance fires it")
        firing.kill()
        time.sleep(8)
        firing.start()
        self.wait_healthy(firing)
        time.sleep(2)
        # then both restart, one after the other
        for d in (a, b):
            d.stop()
            d.start()
            self.wait_healthy(d)
        time.sleep(3)
        self.assertJsonOk(a.request("DELETE", f"/schedules/{sid}"))
        until = now_ms()
        time.sleep(2)
        times = fire_times(a, sid)
        self.assertEqual(len(times), len(set(times)), "a fire time made twice")
        expected = list(range(created + 1000, times[-1] + 1, 1000))
        self.assertEqual(times, expected, "a fire time missing")
        self.assertGreaterEqual(times[-1], until - 3000, "fires stopped early")
        # Each fire delivered. A job reserved by a long-poll of the killed instance comes back
        # after its lease (its runAt then moves): it is the same job, with its fire's bizKey.
        fired = lambda: {int(g[0].split("@")[1]) for g in consumer.got if g[0]}  # noqa: E731
        try:
            wait_until(lambda: fired() >= set(expected), 60, 0.2, "every fire delivered")
        except TimeoutError as e:
            missing = sorted(set(expected) - fired())
            rows = a.namespace.query("SELECT biz_key, id, state, attempts, run_at, updated_at FROM message WHERE "
                                     + " OR ".join(f"biz_key = '{sid}@{t}'" for t in missing[:20]))
            self.fail(f"{e}: {len(missing)} fires never delivered, their rows {rows}; consumer threads alive "
                      f"{[t.is_alive() for t in consumer.threads]}; last got {consumer.got[-3:]}")
        consumer.close()
        self.assertEqual(sorted(fired()), expected)

    def test_changes_reach_every_instance_within_a_second(self):
        a, b = self.two()
        sid = self.assertJsonOk(create(a, topic=TOPIC + ".reach", every=60000, job={}, paused=True))["id"]
        t0 = time.monotonic()
        wait_until(lambda: self.assertJsonOk(b.stats())["schedules"]["count"] == 1, 1.0, 0.05,
                   "the other instance to see the new schedule")
        self.assertLess(time.monotonic() - t0, 1.0)
        self.assertJsonOk(b.request("DELETE", f"/schedules/{sid}"))
        t0 = time.monotonic()
        wait_until(lambda: self.assertJsonOk(a.stats())["schedules"]["count"] == 0, 1.0, 0.05,
                   "the first instance to see the delete")

    def test_pause_holds_and_resume_does_not_make_up(self):
        a, b = self.two()
        topic = TOPIC + ".pause"
        sid = self.assertJsonOk(create(a, topic=topic, every=1000, job={}))["id"]
        time.sleep(2.5)
        self.assertJsonOk(b.request("PUT", f"/schedules/{sid}", body={"paused": True}))
        paused_at = now_ms()
        time.sleep(4)
        made = fire_times(a, sid)
        # the look-ahead may have made the fire due within a second of the pause; nothing after it
        self.assertTrue(made and all(t <= paused_at + 1000 + 250 for t in made), (made, paused_at))
        self.assertJsonOk(a.request("PUT", f"/schedules/{sid}", body={"paused": False}))
        resumed_at = now_ms()
        time.sleep(2.5)
        after = [t for t in fire_times(a, sid) if t > paused_at + 1250]
        self.assertTrue(after, "no fire after the resume")
        self.assertTrue(all(t > resumed_at for t in after), ("the pause was made up", after, resumed_at))

    def test_fire_is_no_later_than_an_ordinary_job(self):
        a, b = self.two()
        topic = TOPIC + ".race"
        sid = self.assertJsonOk(create(a, topic=topic, every=2000, job={"body": "fire"}))["id"]
        created = self.assertJsonOk(a.request("GET", f"/schedules/{sid}"))["createdAt"]
        # ordinary jobs due at the 2nd..4th fire times, pushed now
        for k in (2, 3, 4):
            self.push(a, topic + ".plain", {"k": k}, runAt=created + 2000 * k)
        time.sleep((created + 8600 - now_ms()) / 1000)
        self.assertJsonOk(a.request("DELETE", f"/schedules/{sid}"))
        ready = dict()
        for (biz, at) in a.namespace.query(
                f"SELECT m.biz_key, t.at FROM message m JOIN job_history t ON t.message_id = m.id "
                f"WHERE m.topic = '{topic}' AND m.state <> 'aborted' AND t.to_state = 'ready'"):
            ready[int(biz.split("@")[1])] = int(at)
        plain = {int(run_at): int(at) for (run_at, at) in a.namespace.query(
            f"SELECT m.run_at, t.at FROM message m JOIN job_history t ON t.message_id = m.id "
            f"WHERE m.topic = '{topic}.plain' AND t.to_state = 'ready'")}
        for k in (2, 3, 4):
            t = created + 2000 * k
            self.assertIn(t, ready, f"fire {k} not made ready")
            self.assertIn(t, plain, f"the ordinary job due at fire {k} not made ready")
            self.assertGreaterEqual(ready[t], t, "a fire made ready before its time")
            # the same mover pass makes both ready: the fire is not behind it
            self.assertLessEqual(ready[t], plain[t] + 50, (k, ready[t] - t, plain[t] - t))


class LostWatermarkTest(CoreTestCase):
    def test_fires_pushed_before_a_lost_watermark_are_not_made_again(self):
        """The window a crash leaves: fires pushed and answered, their watermark never written.
        The fault seam breaks the scheduler's connection on its 2nd-4th watermark updates; the
        consumer finishes every job at once, so the bizKeys are gone from Redis long before the
        scheduler (reconnected a second later) comes back to those fire times: only MySQL can
        say they were made."""
        d = Daemon()
        self.addCleanup(d.close)
        spec = "scheduler:mysql.exec=fail@2+3"
        d.env["HOURGLASS_FAULTS"] = spec
        d.start()
        self.wait_healthy(d)
        self.assertIn(f"HOURGLASS_FAULTS is set ({spec})", d.log())
        topic = TOPIC + ".lost"
        consumer = Consumer([d], topic)
        self.addCleanup(consumer.close)
        sid = self.assertJsonOk(create(d, topic=topic, every=1000, job={}, catchUp="all"))["id"]
        created = self.assertJsonOk(d.request("GET", f"/schedules/{sid}"))["createdAt"]
        wait_until(lambda: d.log().count("fires had been made already") >= 3, 20, 0.2,
                   "the scheduler to find, three times, fires made before the watermark was lost")
        time.sleep(2)
        self.assertJsonOk(d.request("DELETE", f"/schedules/{sid}"))
        time.sleep(1.5)
        consumer.close()
        times = fire_times(d, sid)
        self.assertEqual(len(times), len(set(times)), "a fire made twice")
        self.assertEqual(times, list(range(created + 1000, times[-1] + 1, 1000)), "a fire missing")
        delivered = sorted(int(g[0].split("@")[1]) for g in consumer.got)
        self.assertEqual(delivered, times, "each fire delivered once")


class CatchUpTest(CoreTestCase):
    def test_policies_after_downtime(self):
        d = self.start_daemon({"queue": {"schedule_grace": 2000}})
        self.wait_healthy(d)
        ids = {}
        for policy in ("skip", "one", "all"):
            ids[policy] = self.assertJsonOk(create(d, topic=f"{TOPIC}.cu.{policy}", every=1000, job={},
                                                   catchUp=policy))["id"]
        time.sleep(2)
        d.stop()
        time.sleep(7)
        restarted = now_ms()
        d.start()
        self.wait_healthy(d)
        time.sleep(3)
        for p, i in ids.items():
            one = self.assertJsonOk(d.request("GET", f"/schedules/{i}"))
            self.assertJsonOk(d.request("DELETE", f"/schedules/{i}"))
            times = fire_times(d, i)
            made, skipped = one["missed"]["made"], one["missed"]["skipped"]
            created = one["createdAt"]
            every = [created + 1000 * k for k in range(1, (times[-1] - created) // 1000 + 1)]
            missing = [t for t in every if t not in times]
            with self.subTest(policy=p, made=made, skipped=skipped, missing=missing):
                self.assertEqual(len(times), len(set(times)), "a fire time made twice")
                self.assertEqual(times, sorted(set(times) & set(every)), "a fire at a time not of the schedule")
                # 7 s down with a 2 s grace: several fires were missed, whatever the policy did
                self.assertGreaterEqual(made + skipped, 3)
                # what was skipped is exactly what is missing: one gap, the downtime
                self.assertEqual(len(missing), skipped)
                if missing:
                    self.assertEqual(missing, list(range(missing[0], missing[-1] + 1, 1000)), "one gap")
                if p == "skip":
                    self.assertEqual(made, 0)
                elif p == "one":
                    self.assertEqual(made, 1)
                    # the one made is the last missed fire: right after the gap
                    self.assertIn(missing[-1] + 1000, times)
                else:
                    self.assertEqual((skipped, missing), (0, []))
                # and the schedule ran on after the restart
                self.assertTrue(any(t > restarted for t in times), times)
