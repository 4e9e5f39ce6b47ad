"""Faults of a real fleet (issue 31, item 1): a Redis Cluster seed that dies for good.

Most users configure a cluster client with one seed. Two instances here have `address` = one
master of a 3 + 3 cluster, which is then killed -9 for good; its replica takes over. Before,
the blocking connections (the journal's outbox readers, the pager, /reStore) found the cluster
only through the configured seeds: jobs finished after the failover stayed unfinished in MySQL
(the outbox never reconnected), a far job pushed after it was never delivered (the pager logged
"Connection refused" every 10 s), and /reStore answered 503 for 90 s and more. Every
connection now keeps using the nodes it has discovered (any known node refreshes the map; the
seeds only when none answers).

Asserted, from the moment every live node agrees on the new map:
* pushes through both instances succeed again within 5 s;
* 64 jobs pushed, delivered and finished after the failover reach `finished` in MySQL;
* a far job pushed after the failover (horizon 5 s) is paged in and delivered;
* /reStore answers 200 within 10 s.

    make integration T=test_fault_seed
"""

from __future__ import annotations

import time

from cluster_common import ClusterCase
from harness import Daemon, wait_until

PUSH_RESUME_S = 5.0
RESTORE_S = 10.0


class DeadSeedTest(ClusterCase):
    def seeded_daemon(self, seed: str, ns=None) -> Daemon:
        over = {"redis": {"cluster": True, "address": seed, "db": 0, "timeout": 1000},
                "queue": {"horizon": 5000}}
        d = Daemon(namespace=ns, overrides=over)
        self.addCleanup(d.close)
        d.start()
        self.wait_healthy(d, timeout=20)
        return d

    def test_the_only_seed_dies_for_good(self):
        c = self.cluster
        seed = c.masters()[0]
        a = self.seeded_daemon(seed.address)
        b = self.seeded_daemon(seed.address, ns=a.namespace)
        # the instances have done real work on every shard before the fault
        for i in range(16):
            self.assertJsonOk(a.push({"topic": f"seed.warm.{i}", "body": i}))

        c.kill_master(0)  # returns once every live node agrees on the new map
        agreed = time.monotonic()

        def both_push() -> bool:
            return all(d.push({"topic": f"seed.probe.{i}", "body": i}, timeout=5).status == 200
                       for d in (a, b) for i in range(16))

        wait_until(both_push, 30, 0.1, "pushes through both instances after the failover")
        resumed = time.monotonic() - agreed
        self.assertLess(resumed, PUSH_RESUME_S, f"pushes resumed {resumed:.1f} s after the cluster agreed")

        # /reStore reaches the cluster through the nodes it knows, not the dead seed
        restored = None
        while time.monotonic() - agreed < RESTORE_S + 5:
            r = a.restore(timeout=60)
            if r.status == 200:
                restored = time.monotonic() - agreed
                break
            time.sleep(0.5)
        self.assertIsNotNone(restored, f"/reStore never answered 200: {r.status} {r.text[:200]}")
        self.assertLess(restored, RESTORE_S, f"/reStore answered 200 only {restored:.1f} s after the cluster agreed")

        # jobs pushed, delivered and finished after the failover reach MySQL as finished
        ids = []
        for i in range(64):
            d = a if i % 2 == 0 else b
            ids.append(self.assertJsonOk(d.push({"topic": f"seed.after.{i % 16}", "body": i}))["id"])
        done = set()
        for i, jid in enumerate(ids):
            d = b if i % 2 == 0 else a
            topic = f"seed.after.{i % 16}"
            while True:
                g = self.assertJsonOk(d.get(topic, timeout=2))
                self.assertJsonOk(d.finish(g["id"]))
                done.add(g["id"])
                if g["id"] == jid or jid in done:
                    break
        self.assertEqual(done, set(ids))
        id_list = ",".join(ids)

        def finished_in_mysql() -> bool:
            rows = a.namespace.query(f"SELECT COUNT(*) FROM message WHERE id IN ({id_list}) AND state = 'finished'")
            return int(rows[0][0]) == len(ids)

        wait_until(finished_in_mysql, 20, 0.2,
                   "the 64 jobs finished after the failover to reach 'finished' in MySQL (the outbox)")

        # a far job pushed after the failover is paged in and delivered
        far = self.assertJsonOk(b.push({"topic": "seed.far", "body": 1, "delay": 8000}))
        rows = a.namespace.query(f"SELECT state FROM message WHERE id = {far['id']}")
        self.assertEqual(rows[0][0], "far", "the job is not a far job: the test would prove nothing")
        got = None
        deadline = time.monotonic() + 30
        while got is None and time.monotonic() < deadline:
            r = a.get("seed.far", timeout=2)
            if r.status == 200:
                got = r.json()
        self.assertIsNotNone(got, "the far job pushed after the failover was never delivered (the pager)")
        self.assertEqual(got["id"], far["id"])
        self.assertGreaterEqual(int(time.time() * 1000), got["runAt"] - 10)


if __name__ == "__main__":
    import unittest
    unittest.main()
