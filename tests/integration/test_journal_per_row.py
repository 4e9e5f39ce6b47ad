"""[mysql] per_row_commit = true: the journal commits each record in its own transaction
(the benchmark's baseline for group commit, and a setting an operator may choose). It is
slower, never different: pushes (single and arrays, several at once), deliveries, finishes
and deletes all answer as with group commit, and every record reaches MySQL."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from harness import HourglassTestCase
from test_journal_common import expect_ok, journal_idle, start_ready, wait_or_fail


class PerRowCommitTest(HourglassTestCase):
    def test_every_record_committed_alone_and_every_answer_as_usual(self):
        d = start_ready(self, {"mysql": {"per_row_commit": True}})
        q = d.namespace.query
        with ThreadPoolExecutor(8) as pool:
            singles = list(pool.map(lambda k: d.push({"topic": "pr", "body": {"k": k}}), range(40)))
        for r in singles:
            expect_ok(r, "single push with per_row_commit")
        ids = [r.json()["id"] for r in singles]
        arr = expect_ok(d.push([{"topic": "pr", "body": {"a": i}} for i in range(10)]), "array push")["ids"]
        ids += arr
        self.assertEqual(len(set(ids)), 50)

        got = []
        while len(got) < 30:
            g = d.get("pr", count=10, timeout=2)
            self.assertEqual(g.status, 200, f"get: {g!r}")
            got += [j["id"] for j in g.json()]
        for jid in got:
            expect_ok(d.finish(jid), "finish")
        rest = [i for i in ids if i not in got]
        for jid in rest[:5]:
            expect_ok(d.delete(jid), "delete")

        def settled():
            return journal_idle(d) and q("SELECT COUNT(*) FROM message WHERE state = 'finished'") == [(str(len(got)),)]
        wait_or_fail(self, settled, 20, "the finishes to reach MySQL",
                     lambda: f"{q('SELECT state, COUNT(*) FROM message GROUP BY state')}")
        states = dict(q("SELECT state, COUNT(*) FROM message GROUP BY state"))
        self.assertEqual(states, {"finished": str(len(got)), "deleted": "5", "ready": str(50 - len(got) - 5)})
        self.assertEqual(q("SELECT COUNT(*) FROM transition WHERE to_state = 'finished'"), [(str(len(got)),)])
