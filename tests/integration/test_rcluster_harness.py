"""Self-test of rcluster.py (a real Redis Cluster on loopback), and src/core/cluster.c checked
against it through tests/tools/cluster_probe: the C key slots and shard tags against CLUSTER
KEYSLOT, the C slot map against the cluster's own view, MOVED/ASK as Redis sends them — at
the start, during and after a slot migration, and after a master is killed. No daemon yet
(issue 14's wiring comes later). One cluster for the module; the tests run in name order
(a_ ... e_) because the last two change the cluster.

    make BUILD=build integration T=test_rcluster_harness
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import unittest

import harness
from rcluster import RedisCluster, command_raw, key_in_slots, keyslot, resp_parse

SHARDS = (8, 16, 48, 64, 256)


def probe(*args: str, stdin: bytes = b"") -> str:
    """Run cluster_probe (built from tests/tools/cluster_probe.c); its stdout."""
    r = subprocess.run([harness.tool_binary("cluster_probe"), *args], input=stdin, capture_output=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"cluster_probe {' '.join(args)}: exit {r.returncode}: {r.stderr.decode()}")
    return r.stdout.decode()


class RedisClusterHarnessTest(unittest.TestCase):
    cluster: RedisCluster

    @classmethod
    def setUpClass(cls) -> None:
        t0 = time.monotonic()
        cls.cluster = RedisCluster(masters=3, replicas=1, node_timeout_ms=1000).start()
        cls.addClassCleanup(cls.cluster.close)
        cls.start_secs = time.monotonic() - t0

    def c_map(self, via=None, shards: int = 8) -> dict:
        """CLUSTER SLOTS of `via` (default: the first live node) read by the C parser."""
        node = via or self.cluster.live()[0]
        return json.loads(probe("map", harness.HOST, str(shards),
                                stdin=command_raw(node.port, "CLUSTER", "SLOTS")))

    def assert_c_map_agrees(self) -> dict:
        """The C map of every live node's reply names the owners the cluster itself reports."""
        c = self.cluster
        want = [(a, b, c.node_by_id(nid).address) for a, b, nid in c.slot_owners()]
        for node in c.live():
            m = self.c_map(node)
            got = sorted((a, b, m["masters"][i]["addr"]) for a, b, i in m["ranges"])
            self.assertEqual(got, want, f"C map of {node.address}'s CLUSTER SLOTS")
            self.assertEqual(m["covered"], 16384)
            self.assertEqual(m["unserved"], 0)
        return m

    # -- a: the cluster as started
    def test_a_topology(self) -> None:
        c = self.cluster
        self.assertLess(self.start_secs, 30)
        masters = c.masters()
        self.assertEqual(len(masters), 3)
        self.assertEqual(len(c.nodes), 6)
        replicas = [r for m in masters for r in c.replicas_of(m)]
        self.assertEqual(len(replicas), 3)
        self.assertEqual(len({r.node_id for r in replicas}), 3)
        self.assertEqual(sorted(n.node_id for n in masters + replicas), sorted(n.node_id for n in c.nodes))
        covered = sorted((a, b) for a, b, _ in c.slot_owners())
        self.assertEqual(covered, [(0, 5460), (5461, 10922), (10923, 16383)])  # redis-cli's split
        for n in c.nodes:
            self.assertEqual(n.info_cluster()["cluster_state"], "ok")
            self.assertEqual(n.info_cluster()["cluster_slots_assigned"], "16384")
        self.assertEqual(len(c.seeds()), 6)
        # the C parser on the real reply: masters, their replicas, and every slot
        m = self.assert_c_map_agrees()
        self.assertEqual(sorted(x["addr"] for x in m["masters"]), sorted(n.address for n in masters))
        for x in m["masters"]:
            master = next(n for n in masters if n.address == x["addr"])
            self.assertEqual(x["id"], master.node_id)
            self.assertEqual(x["replicas"], [r.address for r in c.replicas_of(master)])

    # -- b: slots and tags
    def test_b_keyslots_and_tags_agree_with_redis(self) -> None:
        node = self.cluster.live()[0]
        keys = ["foo", "{user1000}.following", "user1000", "{}x", "a{b}c{d}", "hg:{3}:jobs", "ü{ñ}"]
        c_slots = probe("keyslot", *keys).split()
        for key, c_slot in zip(keys, c_slots):
            self.assertEqual(int(c_slot), int(node.cli("CLUSTER", "KEYSLOT", key)), key)
            self.assertEqual(int(c_slot), keyslot(key), key)
        self.assertEqual(c_slots[1], c_slots[2])
        for shards in SHARDS:
            lines = probe("tags", str(shards)).split("\n")[:-1]
            self.assertEqual(len(lines), shards)
            tags = []
            for line in lines:
                n, tag, slot = line.split()
                n, slot = int(n), int(slot)
                tags.append(tag)
                # Redis agrees on the slot of the tag, and of a key carrying it
                self.assertEqual(slot, int(node.cli("CLUSTER", "KEYSLOT", tag)), f"S={shards} n={n}")
                self.assertEqual(slot, keyslot(f"hg:{{{tag}}}:jobs"))
                self.assertTrue(n * 16384 // shards <= slot < (n + 1) * 16384 // shards, f"S={shards} n={n} {slot}")
            self.assertEqual(len(set(tags)), shards)

    def test_c_shards_spread_over_masters(self) -> None:
        # 3 masters on redis-cli's split: no master serves two shards more than another
        for shards in range(9, 257, 7):
            counts = [x["shards"] for x in self.c_map(shards=shards)["masters"]]
            self.assertEqual(sum(counts), shards)
            self.assertLessEqual(max(counts) - min(counts), 1, f"S={shards}: {counts}")

    # -- d: a slot migrated by hand: ASK while it moves, MOVED after, a split range
    def test_d_migrate_slot(self) -> None:
        c = self.cluster
        src, dest = c.masters()[0], c.masters()[1]
        slot = 105  # inside the first master's range: moving it splits that range
        keys = [key_in_slots(slot, slot, f"m{i}") for i in range(4)]
        for k in keys:
            src.cli("SET", k, k)
        owner = c.begin_migration(slot, dest)
        self.assertIs(owner, src)
        self.assertEqual(c.move_keys(slot, src, dest, count=2), 2)
        asks = [command_raw(src.port, "GET", k) for k in keys]
        self.assertEqual(sum(a.startswith(b"-ASK ") for a in asks), 2, asks)
        for a in asks:
            if a.startswith(b"-ASK "):
                rd = json.loads(probe("redirect", harness.HOST, stdin=a))
                self.assertEqual(rd, {"kind": "ask", "slot": slot, "addr": dest.address})
        # the map does not change until the slot is handed over
        self.assertEqual(self.c_map(src)["ranges"][0][:2], [0, 5460])
        self.assertEqual(c.move_keys(slot, src, dest), 2)
        c.end_migration(slot, dest)
        c.wait_stable()
        m = self.assert_c_map_agrees()
        self.assertIn([slot, slot], [r[:2] for r in m["ranges"]])
        self.assertEqual(len(m["ranges"]), 5)  # 0-104, 105, 106-5460 and the other two
        moved = command_raw(src.port, "GET", keys[0])
        self.assertEqual(json.loads(probe("redirect", harness.HOST, stdin=moved)),
                         {"kind": "moved", "slot": slot, "addr": dest.address})
        for k in keys:
            self.assertEqual(dest.cli("GET", k), k)
        # a plain error is not a redirect
        err = command_raw(src.port, "NOSUCHCOMMAND")
        self.assertEqual(json.loads(probe("redirect", harness.HOST, stdin=err))["kind"], "none")

    # -- dd: what a Lua script meets while its slot migrates (the daemon's scripts declare only
    #    KEYS[1], "<prefix>:{tag}:jobs", and derive the rest: docs/architecture.md, "Redis
    #    Cluster", scripts during a slot migration). A learning test: it pins Redis's own
    #    behaviour, so an upgrade that changes it fails here first.
    def test_dd_scripts_during_a_slot_migration(self) -> None:
        c = self.cluster
        src, dest = c.masters()[0], c.masters()[1]
        slot = 200
        tag = key_in_slots(slot, slot).split("{")[1].rstrip("}")  # "k:{<tag>}"
        base = f"x:{{{tag}}}:"
        self.assertEqual(keyslot(base + "jobs"), slot)
        src.cli("HSET", base + "jobs", "a", "1")
        src.cli("ZADD", base + "delay", "1", "a")
        self.assertIs(c.begin_migration(slot, dest), src)
        src.cli("MIGRATE", harness.HOST, dest.port, "", 0, 5000, "KEYS", base + "delay")

        def run(script: str, *keys: str) -> bytes:
            return command_raw(src.port, "EVAL", script, len(keys), *keys)
        derive = "local b = string.sub(KEYS[1], 1, -5) "
        # an undeclared key that has moved: the script fails when it reaches it...
        self.assertIn(b"non local key", run(derive + "return redis.call('ZCARD', b .. 'delay')", base + "jobs"))
        # ...and what it wrote before stays written: the script is torn
        r = run(derive + "redis.call('HSET', KEYS[1], 'w', '1') return redis.call('ZADD', b .. 'delay', 2, 'w')",
                base + "jobs")
        self.assertIn(b"non local key", r)
        self.assertEqual(src.cli("HGET", base + "jobs", "w"), "1", "the write before the failing access stayed")
        # a key that exists nowhere yet cannot be made on the source either
        self.assertIn(b"non local key", run(derive + "return redis.call('RPUSH', b .. 'ready', 'w')", base + "jobs"))
        # declared keys are checked before the script runs: nothing runs, TRYAGAIN (a key
        # moved, or one that does not exist yet)
        self.assertTrue(run("redis.call('HSET', KEYS[1], 'z', '1') return redis.call('ZCARD', KEYS[2])",
                            base + "jobs", base + "delay").startswith(b"-TRYAGAIN"))
        self.assertTrue(run("return redis.call('RPUSH', KEYS[2], 'x')", base + "jobs", base + "new")
                        .startswith(b"-TRYAGAIN"))
        self.assertIsNone(src.cli("HGET", base + "jobs", "z") or None, "a refused script wrote nothing")
        # once the slot is handed over, the same script runs whole on the new owner
        c.move_keys(slot, src, dest)
        c.end_migration(slot, dest)
        c.wait_stable()
        self.assertEqual(dest.cli("EVAL", derive + "return redis.call('ZCARD', b .. 'delay')", 1, base + "jobs"), "1")

    # -- e: a master dies
    def test_e_kill_master_fails_over(self) -> None:
        c = self.cluster
        victim = c.masters()[1]
        heirs = {r.node_id for r in c.replicas_of(victim)}
        victim_slots = [(a, b) for a, b, nid in c.slot_owners() if nid == victim.node_id]
        dead, heir, secs = c.kill_master(1)
        self.assertIs(dead, victim)
        self.assertFalse(victim.running)
        self.assertIn(heir.node_id, heirs)
        self.assertLess(secs, 10)
        self.assertEqual([(a, b) for a, b, nid in c.slot_owners() if nid == heir.node_id], victim_slots)
        self.assertEqual(len(c.masters()), 3)
        self.assertEqual(len(c.seeds()), 5)
        m = self.assert_c_map_agrees()
        self.assertNotIn(victim.address, [x["addr"] for x in m["masters"]])
        promoted = next(x for x in m["masters"] if x["addr"] == heir.address)
        self.assertEqual(promoted["replicas"], [])  # its old master is dead, no replica left
        # writes go to the heir now
        key = key_in_slots(victim_slots[0][0], victim_slots[0][1], "after")
        heir.cli("SET", key, "1")
        value, _ = resp_parse(command_raw(heir.port, "GET", key))
        self.assertEqual(value, "1")


if __name__ == "__main__":
    unittest.main()
