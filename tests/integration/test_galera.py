"""The durable record on a MySQL cluster (issue 32): hourglass on a real 3-node MariaDB Galera
cluster (tests/integration/galera.py; started once for the module, stopped and removed after),
[mysql] hosts naming every node.

Each test runs the fault suite's history workload (history.py: producers, consumers that
long-poll and finish, a deleter; ~30 pushes/s) through two instances A and B before, during and
after one event, and judges the run with history.check (nothing acknowledged lost, nothing
deleted delivered, one row per push, finished jobs `finished`, 503s only within the event's
bound...) plus the event's own checks (galera.py):

* the node in use killed -9 mid-traffic: pushes resume within 10 s on the next node, the node
  comes back and rejoins by IST under traffic, every connection of both instances ends on one
  surviving node, every node holds every row;
* two instances listing the nodes in different orders, so they write through two nodes at once:
  no 503 at all, nothing lost or doubled, each instance on its own first node;
* every node stopped, the cluster bootstrapped again (and Redis's data lost meanwhile), then
  /reStore: every acknowledged job comes back from the record and is delivered;
* a job pushed through A's node and finished through B's node before B's node has applied the
  push: the finish still reaches the record; a schedule created through A's node and paused,
  then deleted, through B's: 200s (no workload; the lag made on purpose).

    make integration T=test_galera
"""

from __future__ import annotations

import time
import unittest
from typing import Callable

from galera import GaleraFullRestart, GaleraNodeKill, GaleraStack, TwoWriters, galera_fleet
from harness import wait_until
from test_fault_suite import FaultCase


class GaleraTest(FaultCase):
    stack: GaleraStack

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.stack = GaleraStack.start_galera(3)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.stack.close()
        super().tearDownClass()

    def test_1_node_in_use_killed_then_rejoins_by_ist(self):
        self.run_fault(galera_fleet(self.stack), GaleraNodeKill(self.stack, down_s=3))

    def test_2_two_instances_two_nodes(self):
        self.run_fault(galera_fleet(self.stack, {"A": [0, 1, 2], "B": [1, 2, 0]}), TwoWriters(self.stack, 5))

    def test_3_whole_cluster_stopped_bootstrapped_restore(self):
        self.run_fault(galera_fleet(self.stack), GaleraFullRestart(self.stack, down_s=2))

    def lagging_node2(self, db: str) -> Callable[[int], None]:
        """Make node 2 fall behind on demand: one applier on node 2 (a row applied but not yet
        committed is locked, and a statement would wait for it; with one applier the next write
        set waits behind the current one instead: the lag of a node that is simply busy), and
        a function that commits `rows` rows of ballast through node 1, which node 2 then needs
        a while to apply. Everything committed through node 1 right after waits behind it."""
        node1, node2 = self.stack.cluster.nodes[0], self.stack.cluster.nodes[1]
        node1.execute("CREATE TABLE ballast (id INT AUTO_INCREMENT PRIMARY KEY, pad CHAR(200) NOT NULL)", db=db)
        self.addCleanup(node1.execute, "DROP TABLE IF EXISTS ballast", db=db)
        threads = node2.query("SELECT @@GLOBAL.wsrep_slave_threads")[0][0]
        node2.execute("SET GLOBAL wsrep_slave_threads = 1")
        self.addCleanup(node2.execute, f"SET GLOBAL wsrep_slave_threads = {threads}")

        def one_applier() -> bool:  # a surplus applier leaves once it has applied a write set
            node1.execute("INSERT INTO ballast (pad) VALUES ('a')", db=db)
            return node2.status("wsrep_applier_thread_count").get("wsrep_applier_thread_count") == "1"

        wait_until(one_applier, 30, 0.1, "node 2 to run one applier")
        return lambda rows: node1.execute(f"INSERT INTO ballast (pad) SELECT REPEAT('x', 200) FROM seq_1_to_{rows}",
                                          db=db)

    def test_4_finish_through_a_node_that_has_not_applied_the_push(self):
        """Galera commits on one node once every node has certified the write set; the others
        apply it a little later. A job pushed through A (node 1) is in Redis as soon as its row
        commits there, so B (node 2) can finish it before node 2 has applied that row. The
        finish's UPDATE would then match no row and certify without a conflict: lost, the job
        left 'reserved' in MySQL for good (test_2 found two such jobs once). Node 2 is kept
        behind on purpose (lagging_node2); pausing one instance at a time decides who journals
        what (the instances share the outbox streams' consumer group): the push and the
        reservation A, through node 1; the finish B, through node 2, in a cycle of its own."""
        fleet = galera_fleet(self.stack, {"A": [0, 1, 2], "B": [1, 2, 0]})
        self.addCleanup(fleet.close)
        a, b = fleet.instances["A"], fleet.instances["B"]
        db = fleet.namespace.database
        node1, node2 = self.stack.cluster.nodes[0], self.stack.cluster.nodes[1]
        ballast = self.lagging_node2(db)

        def journaled(node, jid: str, state: str) -> list[tuple[str | None, ...]]:
            return node.query(f"SELECT instance FROM job_history WHERE message_id = {jid} AND to_state = '{state}'",
                              db=db)

        lagged = None
        for rows in (200_000, 400_000, 800_000):
            ballast(rows)
            r = a.push({"topic": "lag", "body": rows})
            self.assertStatus(r, 200)
            jid = r.json()["id"]
            b.pause()
            try:
                got = a.get("lag", timeout=5)
                self.assertStatus(got, 200)
                self.assertEqual(got.json()["id"], jid)
                wait_until(lambda: journaled(node1, jid, "reserved"), 30, 0.05, "A to journal the reservation")
            finally:
                b.resume()
            a.pause()
            try:
                self.assertStatus(b.finish(jid), 200)
                behind = node2.query(f"SELECT COUNT(*) FROM message WHERE id = {jid}", db=db) == [("0",)]
                wait_until(lambda: journaled(node2, jid, "finished"), 30, 0.05, "B to journal the finish")
            finally:
                a.resume()
            if behind:
                lagged = jid
                break
        self.assertIsNotNone(lagged, "node 2 had applied the push before B finished the job in every attempt: "
                                     "the lag this test needs was not made")
        jid = lagged
        self.assertEqual(journaled(node2, jid, "finished"), [(b.config["instance"]["id"],)])

        # the record settles on 'finished' on every node (a lost UPDATE leaves it 'reserved')
        deadline = time.monotonic() + 30
        states: dict[str, object] = {}
        while time.monotonic() < deadline:
            states = {n.name: n.query_sync(f"SELECT state, version FROM message WHERE id = {jid}", db=db)
                      for n in self.stack.cluster.nodes}
            if all(v and v[0][0] == "finished" for v in states.values()):
                break
            time.sleep(0.2)
        self.assertTrue(all(v and v[0][0] == "finished" for v in states.values()),
                        f"job {jid}, finished (200) through B on node 2, is not 'finished' on every node: "
                        f"{states}\n--- B:\n{b.log_tail(20)}")

    def test_5_schedule_changed_through_a_node_that_has_not_applied_it(self):
        """A schedule created through A (node 1), then paused and deleted through B (node 2)
        before node 2 has applied it: both answered 200 and done, not 404 (their UPDATE and
        DELETE would match no row there)."""
        fleet = galera_fleet(self.stack, {"A": [0, 1, 2], "B": [1, 2, 0]})
        self.addCleanup(fleet.close)
        a, b = fleet.instances["A"], fleet.instances["B"]
        db = fleet.namespace.database
        node2 = self.stack.cluster.nodes[1]
        ballast = self.lagging_node2(db)
        behind = False
        for rows in (200_000, 400_000, 800_000):
            ballast(rows)
            made = a.request("POST", "/schedules", body={"topic": "lag", "every": 3_600_000, "job": {"body": rows}})
            sid = self.assertStatus(made, 200).json()["id"]
            behind = node2.query(f"SELECT COUNT(*) FROM schedule WHERE id = {sid}", db=db) == [("0",)]
            paused = self.assertStatus(b.request("PUT", f"/schedules/{sid}", body={"paused": True}), 200,
                                       "pause through B")
            self.assertIs(paused.json()["paused"], True, paused.body)
            self.assertStatus(b.request("DELETE", f"/schedules/{sid}"), 200, "delete through B")
            self.assertStatus(a.request("GET", f"/schedules/{sid}"), 404, "the schedule after its delete")
            if behind:
                break
        self.assertTrue(behind, "node 2 had applied the schedule before B changed it in every attempt: the lag "
                                "this test needs was not made")

if __name__ == "__main__":
    unittest.main()
