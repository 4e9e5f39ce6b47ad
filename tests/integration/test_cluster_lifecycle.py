"""The core lifecycle suite (test_core_lifecycle) against a real Redis Cluster of 3 masters + 3
replicas (issue 14): every test of it, unchanged, with each daemon configured `[redis] cluster =
true` and the cluster's nodes as its seeds. The tests speak HTTP only, so the same assertions
hold whether the jobs live on one Redis or spread over three masters.

    make integration T=test_cluster_lifecycle
"""

from __future__ import annotations

from typing import Any, Mapping

import test_core_lifecycle as lifecycle  # a module: its classes are not collected here twice
from harness import Daemon, Namespace
from rcluster import RedisCluster

CLUSTER: RedisCluster | None = None


def setUpModule() -> None:
    global CLUSTER
    CLUSTER = RedisCluster(masters=3, replicas=1).start()


def tearDownModule() -> None:
    if CLUSTER is not None:
        CLUSTER.close()


class OnCluster:
    """start_daemon as HourglassTestCase's, pointed at the cluster."""

    def start_daemon(self, overrides: Mapping[str, Mapping[str, Any]] | None = None,
                     namespace: Namespace | None = None, timeout: float = 30.0, **kw: Any) -> Daemon:
        assert CLUSTER is not None
        d = Daemon(namespace=namespace, overrides=overrides, **kw)
        d.update_config({"redis": {"cluster": True, "address": ",".join(CLUSTER.seeds()), "db": 0}})
        self.addCleanup(d.close)  # type: ignore[attr-defined]
        return d.start(timeout)


class TransitionsOnClusterTest(OnCluster, lifecycle.TransitionsTest):
    pass


class OrderOnClusterTest(OnCluster, lifecycle.OrderTest):
    pass


if __name__ == "__main__":
    import unittest

    unittest.main()
