"""A cycle of pushes committed by its one statement, and the connection that lost its answer.

Under a load of pushes alone the journal writes a cycle as one bulk INSERT on a connection in
autocommit: the statement commits by itself, one round trip instead of two (journal.c). Its
answer can be lost as a COMMIT's can; then the pushes are answered 503 and the reconciler
(doubt.h) later reads the rows to settle them. That reading is only an answer once the old
connection can commit nothing more, so the reconciler first KILLs it by the id the journal took
when it connected (dbfence.h) and waits until the server no longer lists it.

- StatementCommitLostTest: the fault seam loses the answer of such a statement (it ran: the
  rows are committed). The push gets 503; its ledger line names the connection; the row ends
  'aborted', and the job never reaches a consumer.
- LateStatementTest: the statement itself is held on its way — iptables drops what the
  journal's connection sends, as a broken link would — until after the reconciler settled.
  The client's kernel sends it again once the link heals, although the journal closed that
  socket long before. Had the reconciler only read (no row: "not committed") without closing
  the old connection, the late statement would now commit a live row for a push answered 503;
  the server closed that connection when it was killed, so the late packet finds no one.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import time
import unittest

from faults import Netfilter
from harness import Daemon, HourglassTestCase, wait_healthy, wait_until


def _journal_connection(d: Daemon) -> int:
    """The id of the journal's current MySQL connection, from its log line."""
    ids = re.findall(r"\[journal\] .*journal: connected to MySQL \(connection (\d+)\)", d.log())
    if not ids:
        raise AssertionError(f"the journal logged no connection id:\n{d.log()[-2000:]}")
    return int(ids[-1])


def _metric(d: Daemon, name: str) -> float:
    for line in d.metrics().text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def _push_until_statement_commits(tc: HourglassTestCase, d: Daemon, topic: str) -> list[int]:
    """Push single jobs one after another until the journal commits cycles by their statement
    (twice more than before)."""
    ids = []
    start = _metric(d, "hourglass_journal_statement_commits_total")
    for i in range(20):
        ids.append(tc.assertStatus(d.push({"topic": topic, "body": f"warm-{i}", "delay": 600000}), 200).json()["id"])
        if _metric(d, "hourglass_journal_statement_commits_total") >= start + 2:
            return ids
    tc.fail("the journal never committed a cycle of pushes by its statement: "
            f"{_metric(d, 'hourglass_journal_statement_commits_total')}")


class StatementCommitLostTest(HourglassTestCase):

    def test_a_lost_statement_commit_is_settled_as_a_lost_commit(self):
        # COMMIT arrivals 1-3: the first cycles, in transactions; from the 4th on the cycles commit
        # by their statement (AUTOCOMMIT_AFTER), and the 7th answer is lost.
        d = Daemon(overrides={"mysql": {"timeout": 3}})
        self.addCleanup(d.close)
        d.env["HOURGLASS_FAULTS"] = "journal:mysql.commit=lost@7"
        d.start()
        wait_healthy(self, d)
        ns = d.namespace
        conn = _journal_connection(d)
        kept = []
        for i in range(6):
            kept.append(self.assertStatus(d.push({"topic": "stmt", "body": f"kept-{i}", "delay": 600000}), 200,
                                          f"push {i + 1}").json()["id"])
        self.assertEqual(_metric(d, "hourglass_journal_statement_commits_total"), 3,
                         "pushes 4-6 were committed by their one statement")

        r = d.push({"topic": "stmt", "body": "lost", "delay": 600000})
        self.assertStatus(r, 503, "a push whose statement's answer was lost")
        self.assertIn("fault seam: mysql.commit lost (arrival 7)", d.log())
        rows = ns.query("SELECT id, state, version FROM message WHERE body = '\"lost\"'")
        self.assertEqual(len(rows), 1, f"the statement committed on the server: {rows}")
        lost_id, state, version = rows[0]
        self.assertEqual((state, version), ("delayed", "1"))

        # Written down before the 503, with the connection that lost the answer.
        ledger = (pathlib.Path(d.dir) / "state" / "in-doubt").read_text().split("\n")
        line = next((x for x in ledger if x.startswith(f"P {lost_id} ")), None)
        self.assertIsNotNone(line, ledger)
        self.assertRegex(line, rf"^P {lost_id} \d+ {conn}/[0-9a-f]{{16}}/\d+$", "its ticket names the connection")

        # Settled: the old connection is gone, the row aborted, and the job was never in Redis.
        wait_until(lambda: ns.query(f"SELECT state FROM message WHERE id = {lost_id}") == [("aborted",)],
                   30, 0.1, "the row committed in doubt to be marked aborted")
        self.assertIn("reconciler: 1 outcomes in doubt settled: 1 pushes answered 503 had committed rows, now "
                      "aborted", d.log())
        self.assertEqual(ns.query(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {conn}"),
                         [("0",)], "the connection that lost the answer is gone")
        self.assertEqual(d.stats().json()["journal"]["inDoubt"], 0)
        self.assertEqual(d.job(lost_id).json()["state"], "aborted")
        for jid in kept:
            self.assertEqual(ns.query(f"SELECT state, version FROM message WHERE id = {jid}"), [("delayed", "1")])
        self.assertEqual(d.stats().json()["topics"]["stmt"]["delayed"], 6, "the acknowledged pushes, all in Redis")

        # Pushes go on, on the new connection, again one statement a cycle.
        self.assertNotEqual(_journal_connection(d), conn)
        _push_until_statement_commits(self, d, "stmt")


class LateStatementTest(HourglassTestCase):

    def test_a_statement_delivered_after_the_settle_commits_nothing(self):
        d = self.start_daemon({"mysql": {"timeout": 2}})
        wait_healthy(self, d)
        ns = d.namespace
        _push_until_statement_commits(self, d, "late")
        conn = _journal_connection(d)
        host = ns.query(f"SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = {conn}")
        self.assertEqual(len(host), 1, host)
        client_port = int(host[0][0].rsplit(":", 1)[1])
        mport = ns.mariadb.port

        # What the journal's connection sends is dropped on its way: the push's statement leaves
        # the daemon and waits in its kernel, retransmitted, while the journal gives up on it.
        net = Netfilter()
        self.addCleanup(net.close)
        rule = net.add(["-p", "tcp", "-s", "127.0.0.1", "--sport", str(client_port), "-d", "127.0.0.1",
                        "--dport", str(mport)])
        r = d.push({"topic": "late", "body": "held", "delay": 600000}, timeout=30)
        self.assertStatus(r, 503, "a push whose statement never got an answer")
        ledger = pathlib.Path(d.dir) / "state" / "in-doubt"
        self.assertRegex(ledger.read_text(), rf"(?m)^P \d+ \d+ {conn}/[0-9a-f]{{16}}/\d+$",
                         "in doubt, with the connection that lost the answer")

        # The journal reconnects (a new socket, not dropped) and the reconciler settles the push:
        # it kills the old connection first, then finds no row.
        wait_until(lambda: d.stats().json()["journal"]["inDoubt"] == 0, 30, 0.2, "the push in doubt to settle")
        self.assertIn("journal: connected to MySQL (connection", d.log())
        self.assertNotEqual(_journal_connection(d), conn)
        self.assertEqual(ns.query(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {conn}"),
                         [("0",)], "the reconciler closed the old connection")
        self.assertEqual(ns.query("SELECT COUNT(*) FROM message WHERE body = '\"held\"'"), [("0",)])

        # The link heals: the client's kernel delivers the held statement at its next retry. The
        # old socket leaves the client's table once that retry was answered.
        net.remove(rule)

        def old_socket_gone() -> bool:
            out = subprocess.run(["ss", "-tanH", f"( sport = :{client_port} and dport = :{mport} )"],
                                 capture_output=True, text=True, timeout=10).stdout
            return out.strip() == ""
        wait_until(old_socket_gone, 120, 0.5, "the held statement to be delivered (the old socket to close)")
        time.sleep(0.5)
        self.assertEqual(ns.query("SELECT COUNT(*) FROM message WHERE body = '\"held\"'"), [("0",)],
                         "a push answered 503 must not commit later")

        ok = self.assertStatus(d.push({"topic": "late", "body": "after", "delay": 600000}), 200, "a push after")
        self.assertEqual(ns.query(f"SELECT state FROM message WHERE id = {ok.json()['id']}"), [("delayed",)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
