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
  /reStore: every acknowledged job comes back from the record and is delivered.

    make integration T=test_galera
"""

from __future__ import annotations

import unittest

from galera import GaleraFullRestart, GaleraNodeKill, GaleraStack, TwoWriters, galera_fleet
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


if __name__ == "__main__":
    unittest.main()
