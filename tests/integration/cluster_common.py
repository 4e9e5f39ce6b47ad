"""What the tests of the daemon on a real Redis Cluster share (test_cluster_wire,
test_cluster_ops): one cluster of 3 masters + 3 replicas per test class, daemons seeded with
it, and where the daemon's shards live on it."""

from __future__ import annotations

from core_common import CoreTestCase
from harness import Daemon
from rcluster import RedisCluster

SHARDS = 8
# src/core/shardtag.h under Cluster, pinned like test_cluster.c / test_shardtag.c pin them
CLUSTER_TAGS = ["0.6957", "1.48242", "2.68352", "3.2520", "4.586", "5.22978", "6.1197", "7.5679"]


def shard_slot(n: int, shards: int = SHARDS) -> int:
    """The middle slot of the n-th of `shards` equal slices (cluster_shard_slot)."""
    return (2 * n + 1) * 16384 // (2 * shards)


def every_worker_up(d: Daemon) -> bool:
    """/health says Redis is up: every HTTP worker's link (each learns of a failover's heir on
    its own connections, refusing that shard's requests at once until then) and the keeper's."""
    h = d.health()
    return h.status == 200 and h.json().get("redis") == "up"


class ClusterCase(CoreTestCase):
    """A cluster for the class (started once: about 3 s), and helpers over it."""

    cluster: RedisCluster

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.cluster = RedisCluster(masters=3, replicas=1).start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cluster.close()
        super().tearDownClass()

    def cluster_daemon(self, first_seed=None, **overrides) -> Daemon:
        """A daemon on the cluster (first_seed: the seed it tries first), healthy."""
        seeds = self.cluster.seeds()
        if first_seed is not None:
            seeds.remove(first_seed.address)
            seeds.insert(0, first_seed.address)
        over = {"redis": {"cluster": True, "address": ",".join(seeds), "db": 0}, **overrides}
        d = Daemon(overrides=over)
        self.addCleanup(d.close)
        d.start()
        self.wait_healthy(d, timeout=20)
        return d

    def owner(self, slot: int):
        """The master serving slot, by the cluster's own map."""
        return self.cluster.node_by_id(next(nid for a, b, nid in self.cluster.slot_owners() if a <= slot <= b))

    def keys_by_node(self, prefix: str) -> dict:
        out = {}
        for m in self.cluster.masters():
            out[m] = [k for k in m.cli("KEYS", prefix + ":*").split("\n") if k]
        return out

    def drain(self, d: Daemon, topic: str) -> list[str]:
        """Get and finish every job the topic has ready now; their ids."""
        ids = []
        while True:
            g = d.get(topic, timeout=0)
            if g.status == 204:
                return ids
            ids.append(self.assertJsonOk(g)["id"])
            self.assertJsonOk(d.finish(ids[-1]))

    def topic_of_shard(self, d: Daemon, n: int, stem: str) -> str:
        """A topic of shard n: the one whose ready key a push makes lands in n's tag."""
        prefix = d.config["redis"]["prefix"]
        for i in range(2000):
            t = f"{stem}.{i}"
            self.push(d, t, {"probe": i})
            node = self.owner(shard_slot(n))
            on_n = node.cli("EXISTS", f"{prefix}:{{{CLUSTER_TAGS[n]}}}:ready:{t}") == "1"
            job = self.get_one(d, t)
            self.assertJsonOk(d.finish(job["id"]))
            if on_n:
                return t
        self.fail(f"no topic of shard {n}")
