"""src/redis/rcluster.c (the asynchronous connections to a Redis Cluster, issue 14 step 2) against a
real cluster (rcluster.py), through tests/tools/rcluster_drive: keys on every master, a slot
migrated under traffic (ASK, then MOVED, no command lost or doubled; an ASKed script that meets
a node whose functions were flushed), and a master killed
under traffic (its slots fail fast, then work on the promoted replica by themselves, scripts
included). No daemon yet. One cluster for the module; the tests run in name order (a_, b_,
bb, c_) because b, bb and c change the cluster.

    make BUILD=build-r integration T=test_rcluster_conn
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import unittest

import harness
from rcluster import RedisCluster, keyslot

KEYS_PER_MASTER = 6


def keys_of(cluster: RedisCluster, prefix: str, per_master: int = KEYS_PER_MASTER) -> dict[str, list[str]]:
    """per_master keys "<prefix>:{n}" on each master, each in a slot of its own: {node id: keys}."""
    owners = cluster.slot_owners()
    out: dict[str, list[str]] = {nid: [] for _, _, nid in owners}
    used: set[int] = set()
    n = 0
    while any(len(v) < per_master for v in out.values()):
        slot = keyslot(str(n))
        nid = next(nid for a, b, nid in owners if a <= slot <= b)
        if len(out[nid]) < per_master and slot not in used:
            out[nid].append(f"{prefix}:{{{n}}}")
            used.add(slot)
        n += 1
    return out


def library_loads(node) -> int:
    """FUNCTION LOAD calls the node has served (INFO commandstats): the daemon's scripts are one
    Redis Functions library (src/redis/scripts.h)."""
    for line in node.cli("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_function|load:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


class Traffic:
    """rcluster_drive traffic: INCR + a script per key, continuously, reporting every 250 ms."""

    def __init__(self, seeds: list[str], keys: list[str]) -> None:
        self.keys = keys
        self.proc = subprocess.Popen([harness.tool_binary("rcluster_drive"), ",".join(seeds), "traffic", *keys],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.intervals: list[dict] = []
        self.final: dict | None = None
        self.ready = threading.Event()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self.ready.wait(15):
            self.proc.kill()
            raise AssertionError(f"rcluster_drive never ready: {self.proc.stderr.read().decode()[-2000:]}")

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self.lock:
                if "ready" in msg:
                    self.ready.set()
                elif "final" in msg:
                    self.final = msg
                else:
                    self.intervals.append(msg)

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.intervals)

    def run_for(self, secs: float) -> None:
        time.sleep(secs)

    def stop(self) -> dict:
        self.proc.stdin.write(b"stop\n")
        self.proc.stdin.close()
        rc = self.proc.wait(30)
        self.reader.join(10)
        err = self.proc.stderr.read().decode()
        self.proc.stdout.close()
        self.proc.stderr.close()
        if rc != 0 or self.final is None:
            raise AssertionError(f"rcluster_drive exited {rc}: {err[-2000:]}")
        return self.final

    def sums(self, field: str, keys: list[str], intervals: list[dict] | None = None) -> int:
        idx = [self.keys.index(k) for k in keys]
        return sum(iv[field][i] for iv in (self.intervals if intervals is None else intervals) for i in idx)


class RclusterConnTest(unittest.TestCase):
    cluster: RedisCluster

    @classmethod
    def setUpClass(cls) -> None:
        cls.cluster = RedisCluster(masters=3, replicas=1, node_timeout_ms=1000).start()
        cls.addClassCleanup(cls.cluster.close)

    def drive_check(self, keys: list[str]) -> dict:
        r = subprocess.run([harness.tool_binary("rcluster_drive"), ",".join(self.cluster.seeds()[:2]), "check", *keys],
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr.decode()[-2000:])
        return json.loads(r.stdout)

    # -- 1: every master serves its keys, plain commands and scripts
    def test_a_keys_on_every_master(self) -> None:
        c = self.cluster
        by_master = keys_of(c, "chk", 2)
        keys = [k for ks in by_master.values() for k in ks]
        out = self.drive_check(keys)
        self.assertEqual(out["script_loads"], [3, 3])  # SCRIPT LOAD on every master
        self.assertEqual(out["infos"], [3, 3])
        for k, r in zip(keys, out["keys"]):
            self.assertEqual(r["key"], k)
            self.assertEqual(r["slot"], keyslot(k))
            self.assertEqual(r["set"], "OK", r)
            self.assertEqual(r["get"], f"value of {k}", r)
            self.assertEqual(r["evalsha"], f"value of {k}", r)  # the script loaded on every master
            self.assertEqual(r["inspect"], "array of 0", r)     # the daemon's inspect.lua, on every master
        # each key is where Redis says, and every master took commands
        for nid, ks in by_master.items():
            node = c.node_by_id(nid)
            for k in ks:
                self.assertEqual(node.cli("GET", k), f"value of {k}")
        masters = {n.address for n in c.masters()}
        served = {n["addr"] for n in out["nodes"] if n["master"] and n["answered"] >= 4 * 2}
        self.assertEqual(served, masters)
        self.assertEqual(sum(n["moved"] + n["asked"] for n in out["nodes"]), 0)  # the map was right
        self.assertEqual(out["stats"]["covered"], 16384)
        self.assertEqual(out["stats"]["nmasters"], 3)
        self.assertEqual(out["stats"]["gave_up"], 0)

    # -- 3: a slot migrated under traffic: ASK while its key moves, MOVED after; nothing fails
    def test_b_migration_under_traffic(self) -> None:
        c = self.cluster
        by_master = keys_of(c, "mig")
        src, dest = c.masters()[0], c.masters()[1]
        keys = [k for ks in by_master.values() for k in ks]
        moving = by_master[src.node_id][:3]
        t = Traffic(c.seeds(), keys)
        try:
            t.run_for(1.0)
            for k in moving:
                slot = keyslot(k)
                c.begin_migration(slot, dest)
                time.sleep(0.3)  # the key still on src: src answers
                self.assertGreaterEqual(c.move_keys(slot, src, dest), 1)
                time.sleep(0.3)  # the key on dest: src answers ASK
                c.end_migration(slot, dest)
                time.sleep(0.3)  # src answers MOVED until the map is read again
            c.wait_stable()
            t.run_for(0.5)
        finally:
            final = t.stop()
        f = final["final"]
        self.assertEqual(sum(f["fail"]), 0, f"failed INCRs: {f['fail']}")
        self.assertEqual(sum(f["efail"]), 0, f"failed scripts: {f['efail']}")
        self.assertTrue(all(n > 20 for n in f["ok"]), f["ok"])
        self.assertTrue(all(n > 20 for n in f["eok"]), f["eok"])
        # no lost or doubled write: each counter holds exactly the INCRs that succeeded
        self.assertEqual(f["values"], f["ok"])
        for k in moving:
            self.assertEqual(int(dest.cli("GET", k)), f["values"][keys.index(k)])
        nodes = final["nodes"]
        print(f"\nmigration: {sum(f['ok'])} INCRs and {sum(f['eok'])} scripts, none failed; ASK {sum(n['asked'] for n in nodes)}, "
              f"MOVED {sum(n['moved'] for n in nodes)}, map reads {final['stats']['map_reads']}, "
              f"slowest answer {max(iv['max_ok_ms'] for iv in t.intervals)} ms")
        self.assertGreater(sum(n["asked"] for n in nodes), 0, nodes)
        self.assertGreater(sum(n["moved"] for n in nodes), 0, nodes)
        self.assertEqual(final["stats"]["gave_up"], 0)
        self.assertGreaterEqual(final["stats"]["map_changes"], 2)  # the first map, then one per moved slot at least
        self.assertLess(max(iv["max_ok_ms"] for iv in t.intervals), 500)

    # -- 3b: an ASKed script meets a node whose functions were flushed. The call goes to the
    # importing node behind ASKING and is answered "Function not found"; rconn loads the scripts'
    # library there and sends the call
    # again on that connection, without ASKING (it holds for one command), so the importing node
    # answers MOVED to the source, and rcluster follows it: the source ASKs again, and the call
    # runs on the importing node, its library loaded now. One round longer; nothing fails.
    def test_bb_an_asked_script_meets_a_flushed_cache(self) -> None:
        c = self.cluster
        src, dest = c.masters()[0], c.masters()[1]
        key = keys_of(c, "askns")[src.node_id][0]
        slot = keyslot(key)
        t = Traffic(c.seeds(), [key])  # this key alone: every script call dest sees is an ASKed one
        try:
            t.run_for(0.5)
            c.begin_migration(slot, dest)
            self.assertGreaterEqual(c.move_keys(slot, src, dest), 1)  # (and the keys test_a left in the slot)
            loads_before = library_loads(dest)
            dest.cli("FUNCTION", "FLUSH")
            asked_from = len(t.snapshot())
            t.run_for(1.0)
            asked = t.snapshot()[asked_from + 1:]
            loads_after = library_loads(dest)
            c.end_migration(slot, dest)
            c.wait_stable()
            t.run_for(0.5)
        finally:
            final = t.stop()
        f = final["final"]
        self.assertEqual((sum(f["fail"]), sum(f["efail"])), (0, 0), f"failed INCRs, scripts: {f}")
        self.assertGreater(loads_after, loads_before, "dest answered \"Function not found\" to an ASKed script: library reloaded")
        self.assertGreater(t.sums("eok", [key], asked), 0, "scripts succeeded while ASKed to the flushed node")
        self.assertGreater(sum(n["asked"] for n in final["nodes"]), 0, final["nodes"])
        self.assertEqual(f["values"], f["ok"], "no INCR lost or doubled")
        self.assertEqual(int(dest.cli("GET", key)), f["values"][0])

    # -- 2: a master killed under traffic: its slots fail fast, then work on its heir
    def test_c_master_killed_under_traffic(self) -> None:
        c = self.cluster
        by_master = keys_of(c, "kill")
        victim = c.masters()[2]
        keys = [k for ks in by_master.values() for k in ks]
        lost = by_master[victim.node_id]
        others = [k for k in keys if k not in lost]
        t = Traffic(c.seeds(), keys)
        try:
            t.run_for(1.0)
            killed_at = len(t.snapshot())
            _, heir, secs = c.kill_master(2)
            # recovered by itself: a whole second without a failure on the victim's keys
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                tail = t.snapshot()[-4:]
                if len(tail) == 4 and t.sums("fail", lost, tail) == 0 and t.sums("ok", lost, tail) > 0:
                    break
                time.sleep(0.25)
            recovered_at = len(t.snapshot())
            # the heir's functions flushed under traffic: not found, reload, re-send (rconn)
            loads_before = library_loads(heir)
            heir.cli("FUNCTION", "FLUSH")
            t.run_for(1.0)
            loads_after = library_loads(heir)
        finally:
            final = t.stop()
        ivs = t.intervals
        f = final["final"]
        self.assertEqual(t.sums("fail", others) + t.sums("efail", others), 0, "other masters' keys failed")
        failing = [i for i, iv in enumerate(ivs) if sum(iv["fail"][keys.index(k)] for k in lost) > 0]
        self.assertTrue(failing, "the dead master's keys never failed")
        window = (failing[-1] - failing[0] + 1) * 0.25
        slowest_ok, slowest_fail = max(iv["max_ok_ms"] for iv in ivs), max(iv["max_fail_ms"] for iv in ivs)
        print(f"\nfailover: cluster agreed after {secs:.1f} s; the victim's keys failed for {window:.2f} s "
              f"(intervals {failing[0]}..{failing[-1]}, kill at {killed_at}); slowest success {slowest_ok} ms, "
              f"slowest failure {slowest_fail} ms; nodes {final['nodes']}")
        self.assertLessEqual(failing[0], killed_at + 1)
        self.assertLess(window, secs + 2.0)
        after = ivs[recovered_at:]
        self.assertEqual(t.sums("fail", lost, after) + t.sums("efail", lost, after), 0)
        self.assertGreater(t.sums("ok", lost, after), 0)
        self.assertGreater(t.sums("eok", lost, after), 0)  # scripts on the heir, after its flush too
        # fail fast: a failure is known at once, not after the 2 s timeout. (A success may take
        # longer: while the cluster is down every node answers CLUSTERDOWN, retried with backoff.)
        self.assertLess(slowest_fail, 300)
        # other masters lost nothing; the heir serves the victim's keys
        for k in others:
            self.assertEqual(f["values"][keys.index(k)], f["ok"][keys.index(k)], k)
        for k in lost:
            self.assertGreater(f["values"][keys.index(k)], 0)
            self.assertEqual(int(heir.cli("GET", k)), f["values"][keys.index(k)])
        self.assertGreater(loads_after, loads_before)  # "not found" seen: rconn loaded the library again
        addrs = {n["addr"]: n for n in final["nodes"]}
        self.assertTrue(addrs[heir.address]["master"] and addrs[heir.address]["up"])
        self.assertEqual(final["stats"]["nmasters"], 3)
        self.assertEqual(final["stats"]["covered"], 16384)


if __name__ == "__main__":
    unittest.main()
