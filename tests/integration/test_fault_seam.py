"""The fault seam (src/base/fault.h) with real servers: HOURGLASS_FAULTS makes a chosen MySQL
statement or COMMIT fail or lose its answer, and the daemon must come out right each time.

- A cycle whose statements fail before they reach MySQL (the connection broke) is certainly
  not committed: the push is answered 503 without being "in doubt", nothing of it is left
  in MySQL or Redis, and the next push works.
- An outbox batch whose COMMIT answer is lost did commit; the journal cannot know, so it
  writes the batch again after reconnecting. Every transition is then in MySQL exactly
  once and the message row has the job's real state and version: a journaled transition in
  doubt settles by replaying it, idempotently.
- A spec the seam cannot read stops the daemon at start with a message naming it.
"""

from __future__ import annotations

import pathlib
import time
import unittest

from harness import Daemon, HourglassTestCase, journal_idle, wait_healthy, wait_until


class FaultSeamTest(HourglassTestCase):

    def start_with_faults(self, spec: str, overrides: dict | None = None) -> Daemon:
        d = Daemon(overrides=overrides)
        self.addCleanup(d.close)
        d.env["HOURGLASS_FAULTS"] = spec
        d.start()
        wait_healthy(self, d)
        self.assertIn(f"HOURGLASS_FAULTS is set ({spec})", d.log(), "the daemon says faults are armed")
        return d

    def test_statements_that_never_reached_mysql_leave_nothing_and_nothing_in_doubt(self):
        # The journal's first statement on a connection creates its staging table; the second
        # is the first push's cycle.
        d = self.start_with_faults("journal:mysql.exec=fail@2")
        ns = d.namespace
        r = d.push({"topic": "seam", "body": "never-written", "delay": 600000})
        self.assertStatus(r, 503, "a push whose statements failed")
        self.assertNotIn("maybeQueued", r.json(), "nothing was sent to Redis: the push is not in doubt")
        self.assertIn("fault seam: mysql.exec fail (arrival 2)", d.log())

        wait_healthy(self, d)
        self.assertEqual(ns.query("SELECT COUNT(*) FROM message WHERE body = '\"never-written\"'"), [("0",)],
                         "the server rolled the cycle back")
        self.assertEqual(d.stats().json()["journal"]["inDoubt"], 0)
        self.assertEqual((pathlib.Path(d.dir) / "state" / "in-doubt").read_text(), "")
        self.assertEqual(d.stats().json()["topics"].get("seam", {}).get("delayed", 0), 0, "nothing in Redis")

        ok = self.assertStatus(d.push({"topic": "seam", "body": "after", "delay": 600000}), 200,
                               "the next push, after the journal reconnected")
        jid = ok.json()["id"]
        self.assertEqual(ns.query(f"SELECT state, version FROM message WHERE id = {jid}"), [("delayed", "1")])

    def test_an_outbox_batch_whose_commit_answer_is_lost_is_written_once(self):
        # Commit 1: the push. Commit 2: the outbox batch carrying the reservation.
        d = self.start_with_faults("journal:mysql.commit=lost@2", {"mysql": {"timeout": 3}})
        ns = d.namespace
        pushed = self.assertStatus(d.push({"topic": "seam2", "body": "b"}), 200, "push")
        jid = pushed.json()["id"]
        wait_until(lambda: journal_idle(d), 10, 0.05, "the push's commit")

        got = self.assertStatus(d.get("seam2", timeout=5), 200, "get")
        self.assertEqual(got.json()["id"], jid)
        wait_until(lambda: "fault seam: mysql.commit lost (arrival 2)" in d.log(), 10, 0.05,
                   "the reservation's commit answer to be lost")
        wait_until(lambda: journal_idle(d) and d.health().status == 200, 20, 0.1,
                   "the journal to reconnect and write the batch again")
        self.assertStatus(d.finish(jid), 200, "finish")
        wait_until(lambda: journal_idle(d), 10, 0.05, "the finish's commit")

        history = ns.query(f"SELECT version, from_state, to_state FROM job_history WHERE message_id = {jid} "
                           "ORDER BY version, to_state")
        self.assertEqual([h[2] for h in history], ["ready", "reserved", "finished"],
                         f"each transition exactly once: {history}")
        self.assertEqual(d.job(jid).json()["state"], "finished")
        newest = max(int(h[0]) for h in history)
        self.assertEqual(ns.query(f"SELECT state, version FROM message WHERE id = {jid}"),
                         [("finished", str(newest))], "the row has the job's real state and newest version")
        self.assertEqual(ns.query("SELECT COUNT(*) FROM refused_record"), [("0",)],
                         "the batch written again is taken as it is, not refused as a duplicate")
        self.assertEqual(d.log().count("fault seam:"), 1, "one fault, injected once")

    def test_a_commit_that_hangs_is_answered_within_the_timeout_and_settled(self):
        # The first COMMIT hangs for the connection's read timeout (2 s), then its answer is
        # lost although it ran: the push must be answered 503 in bounded time (not held for
        # ever), written down as in doubt, and its committed row aborted by the reconciler.
        d = self.start_with_faults("journal:mysql.commit=hang@1", {"mysql": {"timeout": 2}})
        ns = d.namespace
        started = time.monotonic()
        r = d.push({"topic": "hang", "body": "hung-commit", "delay": 600000}, timeout=30)
        took = time.monotonic() - started
        self.assertStatus(r, 503, "a push whose COMMIT hung")
        self.assertGreaterEqual(took, 1.5, "the push waited for the hung COMMIT")
        self.assertLess(took, 15, "the push is answered once the read timeout has passed, not held")
        self.assertIn("fault seam: mysql.commit hang (arrival 1)", d.log())
        rows = ns.query("SELECT id FROM message WHERE body = '\"hung-commit\"'")
        self.assertEqual(len(rows), 1, "the COMMIT ran on the server although its answer was lost")
        jid = rows[0][0]
        wait_until(lambda: ns.query(f"SELECT state FROM message WHERE id = {jid}") == [("aborted",)],
                   30, 0.1, "the reconciler to abort the row committed in doubt")
        self.assertEqual(d.job(jid).json()["state"], "aborted", "the refused push is not a live job")
        wait_healthy(self, d)
        self.assertStatus(d.push({"topic": "hang", "body": "after"}), 200, "pushes work again")

    def test_a_spec_it_cannot_read_stops_the_start(self):
        d = Daemon()
        self.addCleanup(d.close)
        d.env["HOURGLASS_FAULTS"] = "mysql.commit=explode@1"
        with self.assertRaises(Exception):
            d.start(timeout=10)
        self.assertIn("HOURGLASS_FAULTS: no such point and action in 'mysql.commit=explode@1'", d.log())
        self.assertNotEqual(d.returncode, 0)


if __name__ == "__main__":
    unittest.main()
