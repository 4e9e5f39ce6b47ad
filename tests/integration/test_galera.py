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
  push: the finish still reaches the record (no workload; the lag made on purpose).

    make integration T=test_galera
"""

from __future__ import annotations

import time
import unittest

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

    def test_4_finish_through_a_node_that_has_not_applied_the_push(self):
        """Galera commits on one node once every node has certified the write set; the others
        apply it a little later. A job pushed through A (node 1) is in Redis as soon as its row
        commits there, so B (node 2) can finish it before node 2 has applied that row. The
        finish's UPDATE would then match no row and certify without a conflict: lost, the job
        left 'reserved' in MySQL for good (test_2 found two such jobs once). A large write set
        committed through node 1 just before the push keeps node 2 (one applier) behind; pausing
        one instance at a time decides who journals what (the instances share the outbox
        streams' consumer group): the push and the reservation A, through node 1; the finish B,
        through node 2, in a cycle of its own."""
        fleet = galera_fleet(self.stack, {"A": [0, 1, 2], "B": [1, 2, 0]})
        self.addCleanup(fleet.close)
        a, b = fleet.instances["A"], fleet.instances["B"]
        db = fleet.namespace.database
        node1, node2 = self.stack.cluster.nodes[0], self.stack.cluster.nodes[1]
        node1.execute("CREATE TABLE ballast (id INT AUTO_INCREMENT PRIMARY KEY, pad CHAR(200) NOT NULL)", db=db)
        self.addCleanup(node1.execute, "DROP TABLE IF EXISTS ballast", db=db)
        # One applier on node 2, so that the push waits behind the ballast instead of being
        # applied beside it (a row applied but not yet committed is locked, and an UPDATE would
        # wait for it): the lag of a node that is simply busy.
        threads = node2.query("SELECT @@GLOBAL.wsrep_slave_threads")[0][0]
        node2.execute("SET GLOBAL wsrep_slave_threads = 1")
        self.addCleanup(node2.execute, f"SET GLOBAL wsrep_slave_threads = {threads}")
        def one_applier() -> bool:  # a surplus applier leaves once it has applied a write set
            node1.execute("INSERT INTO ballast (pad) VALUES ('a')", db=db)
            return node2.status("wsrep_applier_thread_count").get("wsrep_applier_thread_count") == "1"

        wait_until(one_applier, 30, 0.1, "node 2 to run one applier")

        def journaled(node, jid: str, state: str) -> list[tuple[str | None, ...]]:
            return node.query(f"SELECT instance FROM transition WHERE message_id = {jid} AND to_state = '{state}'",
                              db=db)

        lagged = None
        for rows in (200_000, 400_000, 800_000):
            node1.execute(f"INSERT INTO ballast (pad) SELECT REPEAT('x', 200) FROM seq_1_to_{rows}", db=db)
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

if __name__ == "__main__":
    unittest.main()
