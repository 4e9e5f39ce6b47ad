"""Faults of a real fleet (issue 31): one test per fault, each a workload through two instances
before, during and after the fault, judged by the history checker.

Every test runs tests/integration/history.py's workload — 3 producers (~30 pushes/s, at most
600, delays 0-3 s, ttr 4 s, 5 tries), 4 consumers (long-poll, finish; 3 % left to run out
their lease), a deleter (~8 % of the pushes) — through instances A and B for 1.5 s, injects the
fault (tests/integration/faults.py), keeps it for its hold time, heals it, waits until every
instance is healthy (and runs /reStore where the runbook says so), runs 2 s more, drains
until every acknowledged push was delivered, waits for the journals to settle, and checks
the history and MySQL's final rows (history.check: lost, early, after_delete, after_finish,
lease, unique, phantom, final_state, unavailable, status, recovery). Each fault's figures go
to stderr; a failed run (every run with HG_KEEP=1) leaves its history in
<build>/artefacts/faults/<Class.test>.jsonl (history.load() reads it back).

    make integration T=test_fault_suite
    make integration T=test_partition             # one fault

Needs root: iptables (partitions, lossy links) and mount (MariaDB's tmpfs for the disk-full
fault). Without them those tests fail saying so.
"""

from __future__ import annotations

import sys
import unittest
import zlib

from cluster_common import ClusterCase
from faults import (ClockSkew, ClusterMasterKill, ClusterReplicaKill, ClusterSeedLost, DiskFull, Fault,
                    Fleet, InstanceKill, InstancePause, InstancePauseLease, LinkFault, MariaDBKill,
                    RedisPause, RedisReplicaKill, RedisSnapshot, SingleServers, cluster_fleet, run_fault)
import harness
from harness import HourglassTestCase
from rcluster import RedisCluster


class FaultCase(HourglassTestCase):
    def run_fault(self, fleet: Fleet, fault: Fault) -> None:
        self.addCleanup(fleet.close)
        seed = zlib.crc32(self.id().encode())
        run = run_fault(fleet, fault, seed=seed, log=lambda s: print(f"\n  {s}", file=sys.stderr))
        print(f"\n  fault {run.summary()}", file=sys.stderr)
        if harness.KEEP or not run.verdict.ok:
            path = run.save(self.id().split(".", 1)[-1])
            print(f"  history: {path}", file=sys.stderr)
        if not run.verdict.ok:
            logs = "\n".join(f"--- {n} ({d.log_path}):\n{d.log_tail(12)}" for n, d in fleet.instances.items())
            self.fail(f"{fault.name} (seed {seed}): {run.verdict.report()}\n"
                      f"figures: {run.verdict.figures_line()}\nhistory: {path}\n{logs}")


class SingleRedisFaultTest(FaultCase):
    """A Redis master with a replica and a MariaDB (on a tmpfs), started once for the class;
    each test a fresh namespace with instances A (through 127.0.0.2) and B."""

    servers: SingleServers

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.servers = SingleServers()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.servers.close()
        super().tearDownClass()

    def fleet(self) -> Fleet:
        return self.servers.fleet()

    # -- an hourglassd instance
    def test_instance_kill9_restart(self):
        self.run_fault(self.fleet(), InstanceKill("A", down_s=2))

    def test_instance_pause_beyond_ttr(self):
        self.run_fault(self.fleet(), InstancePause("A", hold_s=5.5))

    def test_instance_pause_beyond_worker_lease(self):
        self.run_fault(self.fleet(), InstancePauseLease("A", hold_s=12))

    def test_instance_clock_ahead(self):
        self.run_fault(self.fleet(), ClockSkew("A", +5000, hold_s=4))

    def test_instance_clock_behind(self):
        self.run_fault(self.fleet(), ClockSkew("A", -5000, hold_s=4))

    # -- Redis
    def test_redis_kill9_restart_from_old_snapshot(self):
        self.run_fault(self.fleet(), RedisSnapshot(lead_s=1.5, down_s=1))

    def test_redis_replica_kill9_restart(self):
        self.run_fault(self.fleet(), RedisReplicaKill(down_s=2))

    def test_redis_pause_beyond_ttr_and_worker_lease(self):
        self.run_fault(self.fleet(), RedisPause(hold_s=11))

    # -- MariaDB
    def test_mariadb_kill9_restart(self):
        self.run_fault(self.fleet(), MariaDBKill(down_s=2))

    def test_mariadb_disk_full(self):
        self.run_fault(self.fleet(), DiskFull(hold_s=4))

    # -- links of one instance (iptables)
    def test_partition_instance_redis(self):
        self.run_fault(self.fleet(), LinkFault("redis", lossy=False, hold_s=4))

    def test_lossy_link_instance_redis(self):
        self.run_fault(self.fleet(), LinkFault("redis", lossy=True, hold_s=4))

    def test_partition_instance_mysql(self):
        self.run_fault(self.fleet(), LinkFault("mysql", lossy=False, hold_s=4))

    def test_lossy_link_instance_mysql(self):
        self.run_fault(self.fleet(), LinkFault("mysql", lossy=True, hold_s=4))


class ClusterFaultTest(FaultCase, ClusterCase):
    """A Redis Cluster of 3 masters + 3 replicas for the class (cluster_common.ClusterCase; a
    killed master comes back as a replica: still 3 + 3), the shared MariaDB; instances A and B
    with [redis] cluster = true. The seed lost for good takes a cluster of its own."""

    def setUp(self) -> None:
        self.cluster.wait_stable(30, replicas=True)

    def test_cluster_master_kill9_restart(self):
        self.run_fault(cluster_fleet(self.cluster), ClusterMasterKill(0))

    def test_cluster_replica_kill9_restart(self):
        self.run_fault(cluster_fleet(self.cluster), ClusterReplicaKill(down_s=2))

    def test_cluster_seed_lost_for_good(self):
        c = RedisCluster(masters=3, replicas=1)
        self.addCleanup(c.close)
        c.start()
        self.run_fault(cluster_fleet(c, seed=c.masters()[0].address), ClusterSeedLost())


if __name__ == "__main__":
    unittest.main()
