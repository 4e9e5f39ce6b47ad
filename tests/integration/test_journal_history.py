"""History (/jobs/{id} from the transition table) and retention of ended messages.

Contract: GET /jobs/{id} answers the job object + "state" + "history": [{"state","at","by"}]
from the transition log; [mysql] retention_days = days finished/deleted/dead messages are kept.

Choice: the contract's states are delayed/ready/reserved/finished/deleted/dead; there is no
"created" state, so the first history entry (the creation) carries the state the job was
created in (ready, or delayed when it was pushed with a delay). The test checks that it is
the first entry and that its time is the push time. One entry per state change: a delete is
one "deleted" entry, not two.
"""

from __future__ import annotations

import time

from harness import HourglassTestCase
from test_journal_common import expect_ok, journal_idle, now_ms, start_ready, totals, wait_or_fail

DAY_MS = 86_400_000


class HistoryTest(HourglassTestCase):
    def wait_row(self, d, jid, state, timeout=10):
        q = d.namespace.query
        wait_or_fail(self, lambda: journal_idle(d) and q(f"SELECT state FROM message WHERE id = {jid}") == [(state,)],
                     timeout, f"message {jid} to be {state} in MySQL",
                     lambda: f"{q(f'SELECT state, version FROM message WHERE id = {jid}')}")

    def check_history(self, job, states, t_push, t_end):
        h = job.get("history")
        self.assertIsInstance(h, list, job)
        self.assertEqual([e.get("state") for e in h], states, f"history of {job['id']}: {h}")
        ats = [e.get("at") for e in h]
        for e in h:
            self.assertIsInstance(e.get("at"), int, e)
            self.assertIsInstance(e.get("by"), str, e)
            self.assertTrue(e["by"].strip(), f"empty 'by' in {e}")
        self.assertEqual(ats, sorted(ats), f"history not in order: {h}")
        self.assertTrue(t_push - 5 <= ats[0] <= t_push + 2000, f"creation at {ats[0]}, pushed at {t_push}")
        self.assertLessEqual(ats[-1], t_end + 5)
        return h

    def test_finished_job_history_served_from_mysql(self):
        d = start_ready(self)
        t0 = now_ms()
        jid = expect_ok(d.push({"topic": "hi", "body": {"v": 1}, "priority": 2, "bizKey": "h-1"}), "push")["id"]
        g = expect_ok(d.get("hi", timeout=2), "get")
        self.assertEqual(g["id"], jid)
        live = expect_ok(d.job(jid), "/jobs while reserved")
        self.assertEqual(live["state"], "reserved")
        expect_ok(d.finish(jid), "finish")
        self.wait_row(d, jid, "finished")
        self.assertEqual(totals(d), {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0},
                         "a finished job must not be in Redis any more")
        j = expect_ok(d.job(jid), "/jobs of a finished job")
        self.assertEqual((j["id"], j["state"], j["topic"], j["body"], j["priority"], j.get("bizKey")),
                         (jid, "finished", "hi", {"v": 1}, 2, "h-1"))
        h = self.check_history(j, ["ready", "reserved", "finished"], t0, now_ms())
        self.assertGreaterEqual(h[1]["at"], h[0]["at"])

    def test_delayed_job_history(self):
        d = start_ready(self)
        t0 = now_ms()
        r = expect_ok(d.push({"topic": "hd", "body": 2, "delay": 400}), "push")
        jid, run_at = r["id"], r["runAt"]
        g = expect_ok(d.get("hd", timeout=5), "get")
        self.assertEqual(g["id"], jid)
        expect_ok(d.finish(jid), "finish")
        self.wait_row(d, jid, "finished")
        j = expect_ok(d.job(jid), "/jobs")
        h = self.check_history(j, ["delayed", "ready", "reserved", "finished"], t0, now_ms())
        self.assertGreaterEqual(h[1]["at"], run_at, "ready before its runAt")

    def test_deleted_job_has_one_deleted_entry(self):
        d = start_ready(self)
        t0 = now_ms()
        a = expect_ok(d.push({"topic": "hx", "body": "a"}), "push")["id"]
        b = expect_ok(d.push({"topic": "hx", "body": "b", "delay": 600_000}), "push")["id"]
        c = expect_ok(d.push({"topic": "hx", "body": "c"}), "push")["id"]
        g = expect_ok(d.get("hx", timeout=1), "get")
        self.assertEqual(g["id"], a)
        for jid in (a, b, c):
            expect_ok(d.delete(jid), "delete")
        for jid in (a, b, c):
            self.wait_row(d, jid, "deleted")
        want = {a: ["ready", "reserved", "deleted"], b: ["delayed", "deleted"], c: ["ready", "deleted"]}
        for jid, states in want.items():
            j = expect_ok(d.job(jid), "/jobs of a deleted job")
            self.assertEqual(j["state"], "deleted")
            self.check_history(j, states, t0, now_ms())
        n = d.namespace.query(f"SELECT COUNT(*) FROM transition WHERE to_state = 'deleted' "
                              f"AND message_id IN ({a},{b},{c})")
        self.assertEqual(n, [("3",)], "one transition row per delete")

    def test_redelivery_and_death_history(self):
        d = start_ready(self)
        t0 = now_ms()
        jid = expect_ok(d.push({"topic": "hr", "body": 1, "ttr": 300, "tries": 2}), "push")["id"]
        self.assertEqual(expect_ok(d.get("hr", timeout=2), "get")["attempt"], 1)
        self.assertEqual(expect_ok(d.get("hr", timeout=5), "get after the lease ran out")["attempt"], 2)
        wait_or_fail(self, lambda: d.job(jid).json().get("state") == "dead", 10, "the job to die")
        self.wait_row(d, jid, "dead")
        j = expect_ok(d.job(jid), "/jobs of a dead job")
        self.check_history(j, ["ready", "reserved", "ready", "reserved", "dead"], t0, now_ms())


IDS_EPOCH_MS = 1704067200000  # src/core/ids.h: ids are (ms since this) << 22 | worker << 12 | low bits


def id_made_at(ms: int, low: int) -> int:
    """An id as the generator would make it at unix ms `ms` (retention reads ids as ages)."""
    return ((ms - IDS_EPOCH_MS) << 22) | (1 << 12) | low


class RetentionTest(HourglassTestCase):
    """Retention deletes messages in a terminal state (finished, deleted, dead, aborted) whose
    last change is older than retention_days, with their transitions. Ids are time-ordered and
    a message changes only after it is made, so the daemon only looks at messages made before
    the cutoff: old messages are written into MySQL as a job that ran two days ago would have
    left them (waiting two days is not an option), next to real jobs made by this test."""

    def insert_message(self, q_exec, mid: int, state: str, made_ms: int, changed_ms: int, transitions: int):
        q_exec(f"INSERT INTO message (id, topic, body, run_at, priority, ttr, tries, attempts, state, version, "
               f"created_at, updated_at) VALUES ({mid}, 'rt', '1', {made_ms}, 5, 30000, 3, 1, '{state}', "
               f"{transitions}, {made_ms}, {changed_ms})")
        # a job's first steps, as the daemon writes them (GET /jobs shows them: docs/openapi.yaml)
        steps = ["", "delayed", "ready", "reserved", "finished", "deleted"]
        rows = ",".join(f"({mid}, {v}, '{steps[v - 1]}', '{steps[v]}', {made_ms + v}, 'test', 'h', 'i', 0)"
                        for v in range(1, transitions + 1))
        q_exec(f"INSERT INTO transition (message_id, version, from_state, to_state, at, actor, host, instance, "
               f"attempts) VALUES {rows}")

    def test_old_ended_messages_are_deleted_with_their_transitions(self):
        d = start_ready(self, {"mysql": {"retention_days": 1, "retention_interval": 1}})
        q, x = d.namespace.query, d.namespace.execute

        # real jobs, made now: ended ones are recent, so they stay; live ones stay anyway
        def push(body, **kw):
            return expect_ok(d.push({"topic": "rt", "body": body, **kw}), "push")["id"]
        fin_new = push("f")
        self.assertEqual(expect_ok(d.get("rt", timeout=2), "get")["id"], fin_new)
        expect_ok(d.finish(fin_new), "finish")
        live_delayed = push("delayed", delay=600_000)
        wait_or_fail(self, lambda: journal_idle(d) and q(f"SELECT state FROM message WHERE id = {fin_new}")
                     == [("finished",)], 10, "the journal to catch up")

        # messages made two days ago
        now = now_ms()
        made = now - 2 * DAY_MS
        old = {state: id_made_at(made, i) for i, state in enumerate(
            ["finished", "deleted", "dead", "aborted", "delayed", "ready", "reserved"])}
        changed_23h = id_made_at(made, 20)   # ended 23 hours ago: younger than retention
        for state, mid in old.items():
            self.insert_message(x, mid, state, made, made + 1000, 3)
        self.insert_message(x, changed_23h, "finished", made, now - DAY_MS + 3_600_000, 2)
        gone = {str(old[s]) for s in ("finished", "deleted", "dead", "aborted")}
        keep = {str(old[s]) for s in ("delayed", "ready", "reserved")} | {str(changed_23h), fin_new, live_delayed}

        def ids(table, column):
            return {r[0] for r in q(f"SELECT DISTINCT {column} FROM {table}")}
        self.assertEqual(ids("message", "id"), gone | keep)
        wait_or_fail(self, lambda: not ids("message", "id") & gone, 10,
                     "old finished/deleted/dead/aborted messages to be deleted",
                     lambda: f"still there: {q('SELECT id, state, updated_at FROM message')}")
        self.assertEqual(ids("message", "id"), keep)
        self.assertFalse(ids("transition", "message_id") & gone, "transitions of deleted messages left behind")
        self.assertEqual(int(q(f"SELECT COUNT(*) FROM job_history WHERE message_id = {changed_23h}")[0][0]), 2)
        for mid in (old["finished"], old["deleted"]):
            self.assertStatus(d.job(str(mid)), 404, "a message removed by retention")

        # one more pass (proved by another old message going away): the keepers still stay
        extra = id_made_at(made, 30)
        self.insert_message(x, extra, "finished", made, made + 5000, 1)
        wait_or_fail(self, lambda: q(f"SELECT id FROM message WHERE id = {extra}") == [], 10,
                     "a second retention pass")
        self.assertEqual(ids("message", "id"), keep)
        self.assertEqual(expect_ok(d.job(fin_new), "/jobs of a recent finished job")["state"], "finished")
        self.assertEqual(expect_ok(d.job(str(changed_23h)), "/jobs of a message ended 23 h ago")["state"], "finished")


class DeadExpiryTest(HourglassTestCase):
    """Dead jobs leave Redis at the age retention removes their MySQL rows (expiry.c,
    deadexpire.lua): [mysql] retention_days after they died. Younger dead jobs stay."""

    def test_dead_jobs_older_than_retention_leave_redis(self):
        d = start_ready(self, {"mysql": {"retention_days": 1, "retention_interval": 1}})
        ns = d.namespace
        ids = []
        for i in range(3):
            r = d.push({"topic": "rip", "body": i, "tries": 1, "ttr": 500})
            ids.append(expect_ok(r, "push")["id"])
        got = set()
        while len(got) < 3:
            got.add(expect_ok(d.get("rip", timeout=2), "get")["id"])  # and never finished
        wait_or_fail(self, lambda: len(expect_ok(d.dead("rip"), "dead list")["jobs"]) == 3, 10,
                     "the three leases to run out (tries = 1: dead)")

        # two of them died two days ago, as far as Redis's dead zset says
        key = next(k for k in ns.redis_keys("*dead:rip"))
        members = [m for m in ns.redis_cli("ZRANGE", key, 0, -1).split("\n") if m]
        self.assertEqual(len(members), 3)
        old = now_ms() - 2 * DAY_MS
        for m in members[:2]:
            self.assertEqual(ns.redis_cli("ZADD", key, "XX", "CH", old, m).strip(), "1")

        def left() -> list[str]:
            return [j["id"] for j in expect_ok(d.dead("rip"), "dead list")["jobs"]]
        wait_or_fail(self, lambda: len(left()) == 1, 10, "the two old dead jobs to leave Redis",
                     lambda: f"dead list: {left()}")
        jobs_key = key.replace("dead:rip", "jobs")
        self.assertEqual(int(ns.redis_cli("HLEN", jobs_key).strip()), 1, "their records are gone too")
        stats = expect_ok(d.stats(), "stats")
        self.assertEqual(stats["topics"]["rip"]["dead"], 1, "the counters follow")
        # MySQL still has all three dead rows: retention removes them on its own schedule
        self.assertEqual(ns.query("SELECT COUNT(*) FROM message WHERE topic = 'rip' AND state = 'dead'")[0][0], '3')
        metrics = d.metrics().text
        self.assertRegex(metrics, r"hourglass_dead_expired_total(\{[^}]*\})? 2\b")


class RetentionRaceTest(HourglassTestCase):
    """Retention removes a message and its transitions together or not at all. A trigger
    stands in for a forced restore reviving the message at the worst moment — while the
    transitions of its batch are being deleted: retention used to delete the transitions first
    and re-check the message after, leaving a live message without its history."""

    def test_a_message_revived_mid_pass_keeps_its_history(self):
        d = start_ready(self, {"mysql": {"retention_days": 0}})  # no pass until the trigger is in
        x = d.namespace.execute
        q = d.namespace.query
        made = now_ms() - 2 * DAY_MS
        mid = id_made_at(made, 50)
        RetentionTest.insert_message(self, x, mid, "finished", made, made + 1000, 3)
        x(f"DELIMITER //\nCREATE TRIGGER revive BEFORE DELETE ON transition FOR EACH ROW "
          f"IF OLD.message_id = {mid} THEN UPDATE message SET state = 'ready', version = version + 1 "
          f"WHERE id = {mid}; END IF//\nDELIMITER ;\n")
        d.stop()
        d.update_config({"mysql": {"retention_days": 1, "retention_interval": 1}})
        d.start()

        def settled():
            rows = q(f"SELECT state FROM message WHERE id = {mid}")
            hist = int(q(f"SELECT COUNT(*) FROM job_history WHERE message_id = {mid}")[0][0])
            return (rows, hist) if (not rows and hist == 0) or (rows and rows[0][0] == "ready") else None
        wait_or_fail(self, settled, 10, "a retention pass over the message")
        time.sleep(1.5)  # and another pass
        rows = q(f"SELECT state FROM message WHERE id = {mid}")
        hist = int(q(f"SELECT COUNT(*) FROM job_history WHERE message_id = {mid}")[0][0])
        self.assertTrue((rows == [] and hist == 0) or (rows == [("ready",)] and hist == 3),
                        f"message {rows} with {hist} of its 3 transitions: deleted apart")
