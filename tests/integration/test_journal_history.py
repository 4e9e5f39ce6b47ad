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


class RetentionTest(HourglassTestCase):
    def test_old_ended_messages_are_deleted_with_their_transitions(self):
        d = start_ready(self, {"mysql": {"retention_days": 1, "retention_interval": 1}})
        q = d.namespace.query

        def push(body, **kw):
            return expect_ok(d.push({"topic": "rt", "body": body, **kw}), "push")["id"]

        fin_old, fin_23h, fin_new = push("f1"), push("f2"), push("f3")
        dead_old = push("dead", tries=1, ttr=200, priority=9)
        got = {j["id"] for j in expect_ok(d.get("rt", timeout=2, count=4), "get")}
        self.assertEqual(got, {fin_old, fin_23h, fin_new, dead_old})
        for jid in (fin_old, fin_23h, fin_new):
            expect_ok(d.finish(jid), "finish")
        del_old = push("del")
        expect_ok(d.delete(del_old), "delete")
        live_res, live_delayed = push("to be reserved"), push("delayed", delay=600_000)
        live_rdy = push("ready")
        self.assertEqual(expect_ok(d.get("rt", timeout=2), "get")["id"], live_res)
        live_rdy2 = push("ready2")
        wait_or_fail(self, lambda: d.job(dead_old).json().get("state") == "dead", 10, "the job to die")

        want = {fin_old: "finished", fin_23h: "finished", fin_new: "finished", dead_old: "dead",
                del_old: "deleted", live_res: "reserved", live_rdy: "ready", live_delayed: "delayed",
                live_rdy2: "ready"}
        wait_or_fail(self, lambda: journal_idle(d) and dict(q("SELECT id, state FROM message")) == want, 10,
                     "the journal to catch up", lambda: f"{dict(q('SELECT id, state FROM message'))}")

        def transitions():
            return {r[0]: int(r[1]) for r in q("SELECT message_id, COUNT(*) FROM transition GROUP BY message_id")}
        before = transitions()
        self.assertEqual(set(before), set(want))

        old = [fin_old, dead_old, del_old, live_res, live_rdy, live_delayed]
        now = now_ms()
        d.namespace.execute(f"UPDATE message SET updated_at = {now - 2 * DAY_MS} WHERE id IN ({','.join(old)})")
        d.namespace.execute(f"UPDATE message SET updated_at = {now - DAY_MS + 3_600_000} WHERE id = {fin_23h}")
        gone = {fin_old, dead_old, del_old}
        keep = set(want) - gone

        wait_or_fail(self, lambda: not {r[0] for r in q("SELECT id FROM message")} & gone, 10,
                     "old finished/deleted/dead messages to be deleted",
                     lambda: f"still there: {q('SELECT id, state, updated_at FROM message')}")
        after = transitions()
        self.assertFalse(set(after) & gone, f"transitions of deleted messages left behind: {after}")
        self.assertEqual({r[0] for r in q("SELECT id FROM message")}, keep)
        self.assertEqual({k: v for k, v in after.items()}, {k: before[k] for k in keep})
        for jid in (fin_old, del_old):
            self.assertStatus(d.job(jid), 404, "a message removed by retention")

        # one more pass (proved by another old message going away): the keepers still stay
        extra = push("extra")
        self.assertEqual(expect_ok(d.get("rt", timeout=2), "get")["id"], live_rdy)
        self.assertEqual(expect_ok(d.get("rt", timeout=2), "get")["id"], live_rdy2)
        self.assertEqual(expect_ok(d.get("rt", timeout=2), "get")["id"], extra)
        expect_ok(d.finish(extra), "finish")
        wait_or_fail(self, lambda: journal_idle(d) and q(f"SELECT state FROM message WHERE id = {extra}") == [("finished",)],
                     10, "the journal to catch up")
        d.namespace.execute(f"UPDATE message SET updated_at = {now_ms() - 2 * DAY_MS} WHERE id = {extra}")
        wait_or_fail(self, lambda: q(f"SELECT id FROM message WHERE id = {extra}") == [], 10,
                     "a second retention pass")
        self.assertEqual({r[0] for r in q("SELECT id FROM message")}, keep)
        self.assertEqual(set(transitions()), keep)
        self.assertEqual(expect_ok(d.job(fin_23h), "/jobs of a recent finished job")["state"], "finished")
