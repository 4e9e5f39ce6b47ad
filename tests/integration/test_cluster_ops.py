"""Operating the daemon on a real Redis Cluster of 3 masters + 3 replicas (issue 14: what an
operator does and watches; tests/integration/rcluster.py).

* a: `redis-cli --cluster reshard` moves 1100 slots — shard 0's among them, and {w}'s — from
  one master to another while producers push and consumers get and finish: no request
  fails, every job pushed is delivered exactly once, the shard's keys end on the new owner,
  and the daemon followed the map (MOVED/ASK in /metrics).
* b: /health names every master (addr, up, slots, replicas) as the answering worker sees it,
  /metrics gives per-node series summed over the threads; a master killed -9 shows down,
  then its replica shows as the master, in both.
* c: /reStore's cost after a failover that lost a master's writes, 20,000 jobs: everything in
  Redis, and with tiers (only the horizon is reloaded). The figures go to the runbook in
  docs/operations.md.

The kill (b) is last but one and c needs no replica, so the tests share one cluster.

    make integration T=test_cluster_ops
"""

from __future__ import annotations

import re
import threading
import time

import harness
from cluster_common import CLUSTER_TAGS, SHARDS, ClusterCase, shard_slot
from harness import Daemon, wait_until
from rcluster import keyslot

RESHARD_SLOTS = 1100  # redis-cli takes a source's lowest slots: 0..1099 hold shard 0 (1024)

_SERIES = re.compile(r'^(\w+)\{node="([^"]+)"(?:,kind="(\w+)")?\} (\S+)$', re.M)


def node_series(text: str) -> dict[str, dict[str, float]]:
    """/metrics' per-node series: {name or name:kind: {node: value}}."""
    out: dict[str, dict[str, float]] = {}
    for name, node, kind, value in _SERIES.findall(text):
        out.setdefault(f"{name}:{kind}" if kind else name, {})[node] = float(value)
    return out


class ClusterOpsTest(ClusterCase):
    def metrics(self, d: Daemon) -> dict[str, dict[str, float]]:
        r = d.metrics()
        self.assertEqual(r.status, 200, r.body)
        return node_series(r.text)

    # -- a
    def test_a_reshard_under_traffic(self):
        c = self.cluster
        d = self.cluster_daemon()
        prefix = d.config["redis"]["prefix"]
        src, dest = c.masters()[0], c.masters()[2]
        self.assertEqual(min(a for a, b, nid in c.slot_owners() if nid == src.node_id), 0)
        moving = [n for n in range(SHARDS) if shard_slot(n) < RESHARD_SLOTS]
        self.assertEqual(moving, [0])
        topics = [self.topic_of_shard(d, 0, "rs0"), self.topic_of_shard(d, 0, "rs0b")]
        topics += [f"rs.{i}" for i in range(10)]  # and the other shards, on every master
        errors: list[str] = []
        pushed: list[str] = []
        got: list[str] = []
        stop = threading.Event()
        lock = threading.Lock()

        def producer(k: int) -> None:
            i = 0
            while not stop.is_set():
                t = topics[(k + i) % len(topics)]
                r = d.push({"topic": t, "body": {"k": k, "i": i}})
                with lock:
                    if r.status == 200:
                        pushed.append(r.json()["id"])
                    else:
                        errors.append(f"push {r.status} {r.body[:200]!r}")
                i += 1
                time.sleep(0.005)

        def consumer(k: int) -> None:
            i = 0
            while not stop.is_set():
                t = topics[(k * 5 + i) % len(topics)]
                g = d.get(t, timeout=0)
                i += 1
                if g.status == 204:
                    continue
                if g.status != 200:
                    with lock:
                        errors.append(f"get {g.status} {g.body[:200]!r}")
                    continue
                f = d.finish(g.json()["id"])
                with lock:
                    got.append(g.json()["id"])
                    if f.status != 200:
                        errors.append(f"finish {f.status} {f.body[:200]!r}")

        threads = [threading.Thread(target=producer, args=(k,)) for k in range(2)]
        threads += [threading.Thread(target=consumer, args=(k,)) for k in range(2)]
        for th in threads:
            th.start()
        try:
            time.sleep(0.5)
            t0 = time.monotonic()
            r = harness._run([harness._which("redis-cli"), "--cluster", "reshard", src.address,
                              "--cluster-from", src.node_id, "--cluster-to", dest.node_id,
                              "--cluster-slots", str(RESHARD_SLOTS), "--cluster-yes"],
                             timeout=240, what="redis-cli --cluster reshard")
            took = time.monotonic() - t0
            self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-2000:])
            time.sleep(0.5)
        finally:
            stop.set()
            for th in threads:
                th.join(30)
        c.wait_stable()
        log = [x for x in d.log().splitlines() if "redis" in x and ("warn" in x or "error" in x)]
        self.assertEqual(errors, [], f"{len(errors)} failed requests; the log says:\n" + "\n".join(log[-20:]))
        # the slots moved, shard 0's with its keys
        self.assertIs(self.owner(shard_slot(0)), dest)
        self.assertIs(self.owner(RESHARD_SLOTS - 1), dest)
        self.assertIs(self.owner(RESHARD_SLOTS), src)
        self.assertEqual(src.cli("KEYS", f"{prefix}:{{{CLUSTER_TAGS[0]}}}:*"), "", "a key of shard 0 stayed behind")
        self.assertTrue(dest.cli("KEYS", f"{prefix}:{{{CLUSTER_TAGS[0]}}}:*"))
        # everything pushed is delivered exactly once (the rest is still ready)
        for t in topics:
            got += self.drain(d, t)
        self.assertEqual(len(set(got)), len(got), "a job was delivered twice")
        self.assertEqual(sorted(got), sorted(pushed))
        for t in topics:
            self.wait_counts(d, t, ready=0, reserved=0, delayed=0, dead=0)
        # the daemon followed the map: shard 0's commands were redirected (MOVED, ASK) at least once
        def redirected():
            m = self.metrics(d)
            return sum(m.get("hourglass_redis_node_redirects_total:moved", {}).values()) + \
                sum(m.get("hourglass_redis_node_redirects_total:ask", {}).values()) > 0
        wait_until(redirected, 5, 0.2, "redirects counted in /metrics")
        w_moved = keyslot("{w}") < RESHARD_SLOTS
        print(f"\n  reshard: {RESHARD_SLOTS} slots (shard 0's{', and {w}' if w_moved else ''}) in {took:.1f} s, "
              f"{len(pushed)} jobs pushed and delivered once, 0 failed requests", flush=True)

    # -- b
    def test_b_health_and_metrics_per_node(self):
        c = self.cluster
        d = self.cluster_daemon()
        for i in range(16):  # every shard, every master
            t = f"hm.{i}"
            self.push(d, t, i)
            self.assertJsonOk(d.finish(self.get_one(d, t)["id"]))
        masters = c.masters()
        slots = {m.address: sum(b - a + 1 for a, b, nid in c.slot_owners() if nid == m.node_id) for m in masters}
        h = self.assertJsonOk(d.health())
        self.assertEqual((h["status"], h["redis"], h["mysql"], h["draining"]), ("ok", "up", "up", False), h)
        self.assertGreaterEqual(h["workerId"], 0)
        rc = h["redisCluster"]
        self.assertEqual((rc["masters"], rc["slotsCovered"]), (3, 16384), rc)
        nodes = {n["addr"]: n for n in rc["nodes"]}
        self.assertEqual(set(nodes), set(slots), rc)
        for m in masters:
            self.assertEqual(nodes[m.address], {"addr": m.address, "up": True, "slots": slots[m.address],
                                                 "replicas": len(c.replicas_of(m))}, rc)

        def settled(m):  # every thread has posted (the keeper, each worker, the delivery thread)
            return all(m.get("hourglass_redis_node_commands_total", {}).get(a, 0) > 0 for a in slots) and \
                all(m.get("hourglass_redis_node_up", {}).get(a, 0) >= 2 for a in slots)
        before = wait_until(lambda: (lambda m: m if settled(m) else None)(self.metrics(d)), 5, 0.2,
                            "per-node series for every master")
        for a in slots:
            self.assertEqual(before["hourglass_redis_node_master"][a], 1)
            self.assertEqual(before["hourglass_redis_node_slots"][a], slots[a])
            self.assertGreater(before["hourglass_redis_node_command_seconds_count"][a], 0)
            self.assertGreater(before["hourglass_redis_node_command_seconds_sum"][a], 0)
            self.assertIn(a, before["hourglass_redis_node_errors_total"])

        # a master with a replica killed -9: down in /health, then its replica is the master
        i = next(k for k, m in enumerate(masters) if c.replicas_of(m))
        victim = masters[i]
        seen: list[dict] = []
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                r = d.health(timeout=5)
                if r.status in (200, 503):
                    seen.append({n["addr"]: n for n in r.json()["redisCluster"]["nodes"]})
                time.sleep(0.02)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            _, heir, secs = c.kill_master(i)
            wait_until(lambda: seen and heir.address in seen[-1] and victim.address not in seen[-1], 10, 0.05,
                       "/health to name the heir instead of the victim")
        finally:
            stop.set()
            watcher.join(10)
        down = [s for s in seen if victim.address in s and not s[victim.address]["up"]]
        self.assertTrue(down, "the killed master never showed down in /health")
        self.assertEqual(down[0][victim.address]["slots"], slots[victim.address], "still the map's master then")
        wait_until(lambda: self.health_ok(d), 10, 0.1, "/health ok after the failover")
        rc = self.assertJsonOk(d.health())["redisCluster"]
        nodes = {n["addr"]: n for n in rc["nodes"]}
        self.assertEqual((rc["masters"], rc["slotsCovered"]), (3, 16384), rc)
        self.assertEqual(nodes[heir.address]["up"], True)
        self.assertEqual(nodes[heir.address]["slots"], slots[victim.address])
        self.assertEqual(nodes[heir.address]["replicas"], 0, "its replica is dead")
        self.assertNotIn(victim.address, nodes)

        for k in range(16):  # traffic on the heir's shards too
            self.push(d, f"hm.{k}", k)
            self.assertJsonOk(d.finish(self.get_one(d, f"hm.{k}")["id"]))

        def followed(m):
            return m.get("hourglass_redis_node_master", {}).get(heir.address) == 1 and \
                m.get("hourglass_redis_node_master", {}).get(victim.address, 0) == 0 and \
                m.get("hourglass_redis_node_commands_total", {}).get(heir.address, 0) > 0
        after = wait_until(lambda: (lambda m: m if followed(m) else None)(self.metrics(d)), 5, 0.2,
                           "/metrics to follow the failover")
        self.assertEqual(after["hourglass_redis_node_up"].get(victim.address, 0), 0)
        self.assertGreater(after["hourglass_redis_node_up"][heir.address], 0)
        self.assertEqual(after["hourglass_redis_node_slots"][heir.address], slots[victim.address])
        for name in ("hourglass_redis_node_commands_total", "hourglass_redis_node_command_seconds_count"):
            self.assertGreaterEqual(after[name][victim.address], before[name][victim.address],
                                    f"{name} of the dead master went back")
        text = d.metrics().text
        self.assertRegex(text, r"(?m)^hourglass_redis_cluster_masters 3$")
        self.assertRegex(text, r"(?m)^hourglass_redis_cluster_slots_covered 16384$")
        self.assertRegex(text, r"(?m)^hourglass_redis_cluster_map_changes_total [1-9]")
        print(f"\n  failover: every node agreed {secs:.1f} s after the kill; /health showed the master down in "
              f"{len(down)} of {len(seen)} polls", flush=True)

    def health_ok(self, d: Daemon) -> bool:
        r = d.health()
        return r.status == 200 and r.json()["status"] == "ok"

    # -- c
    def test_c_restore_cost_after_a_lost_master(self):
        """20,000 jobs, then one master's keys gone (what a failover that lost its writes leaves
        at worst): /reStore puts them back; its time is measured. With tiers only what is due
        within the horizon is reloaded."""
        for horizon, near in ((0, 20000), (600000, 2000)):
            with self.subTest(horizon=horizon):
                d = self.cluster_daemon(queue={"horizon": horizon})
                prefix = d.config["redis"]["prefix"]
                topics = [f"rc.{i}" for i in range(20)]
                jobs = 0
                for b in range(20):  # 20 batches of 1000: near ones 5 min ahead, far ones a day
                    delay = 300000 if b * 1000 < near else 86400000
                    batch = [{"topic": topics[(b * 1000 + k) % 20], "body": k, "delay": delay} for k in range(1000)]
                    jobs += len(self.assertJsonOk(d.push(batch))["ids"])
                wait_until(lambda: self.journal_idle(d), 60, 0.2, "every push in MySQL")
                r = self.assertJsonOk(d.restore(timeout=120))
                self.assertEqual((r["scanned"], r["present"], r["restored"]), (near, near, 0), r)
                whole = r["ms"]
                victim = self.owner(shard_slot(1))
                lost = [k for k in victim.cli("KEYS", f"{prefix}:*").split("\n") if k and "{w}" not in k]
                self.assertTrue(lost)
                for slot in {keyslot(k) for k in lost}:  # one DEL per slot: CROSSSLOT otherwise
                    victim.cli("DEL", *[k for k in lost if keyslot(k) == slot])
                r = self.assertJsonOk(d.restore(timeout=120))
                self.assertEqual(r["scanned"], near, r)
                self.assertEqual(r["present"] + r["restored"], near, r)
                self.assertGreater(r["restored"], 0, r)
                def delayed():  # far jobs' counts come from MySQL, refreshed now and then
                    stats = self.assertJsonOk(d.stats())["topics"]
                    return sum(stats.get(t, {}).get("delayed", 0) for t in topics)
                wait_until(lambda: delayed() == jobs, 20, 0.5, f"/stats to count {jobs} delayed jobs")
                print(f"\n  /reStore, {jobs} jobs, horizon {horizon}: {near} scanned; nothing lost {whole} ms; "
                      f"{r['restored']} lost on one master restored in {r['ms']} ms", flush=True)
                d.close()


if __name__ == "__main__":
    import unittest

    unittest.main()
