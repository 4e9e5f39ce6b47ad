"""The daemon with `[redis] cluster = true` against a real cluster of 3 masters + 3 replicas
(tests/integration/rcluster.py; issue 14, step 4): the asynchronous traffic through
src/redis/rcluster.c (workers, keeper, delivery thread: src/redis/rlink.h), the subscriber on one node,
and the blocking connections per master (src/redis/rblock.h: start-up layout check, outbox, pager,
restore, reconciler, purge, topic settings).

* a: push -> get -> finish on topics of every shard, and a delayed job made ready by the mover
  (woken over pub/sub): every shard key sits on the master that serves its slot, shards on
  every master, the layout record on {w}'s master, /health ok.
* b: a shard's slot migrated mid-traffic, its keys moved one at a time: the scripts of that
  shard refuse whole while the slot moves (guard.lua), rcluster retries them, and no request
  fails; every job pushed is got exactly once.
* c: the subscriber's node killed -9: the subscriber moves to another node (PUBSUB NUMSUB),
  the victim's shards resume by themselves, the other masters' shards never fail.

    make integration T=test_cluster_wire
"""

from __future__ import annotations

import threading
import time

from cluster_common import CLUSTER_TAGS, SHARDS, ClusterCase, every_worker_up, shard_slot
from core_common import Background
from harness import HOST, Daemon, wait_until
from rcluster import command_raw, keyslot, resp_parse


class ClusterWireTest(ClusterCase):
    # -- a
    def test_a_round_trip_on_every_master(self):
        d = self.cluster_daemon()
        prefix = d.config["redis"]["prefix"]
        topics = [f"cw.{i}" for i in range(24)]
        ids = {t: self.push(d, t, {"t": t}) for t in topics}
        late = self.push(d, "cw.late", {"late": True}, delay=1500)
        self.assertEqual(self.assertJsonOk(d.job(late))["state"], "delayed")
        for t in topics:
            job = self.get_one(d, t)
            self.assertEqual(job["id"], ids[t])
            self.assertEqual(job["body"], {"t": t})
            self.assertJsonOk(d.finish(job["id"]))
            self.assertStatus(d.finish(job["id"]), 404)
        job = self.get_one(d, "cw.late", timeout=6)  # the mover made it ready, woken over pub/sub
        self.assertEqual(job["id"], late)
        self.assertJsonOk(d.finish(late))
        # the outbox (rblock_shards: a connection per master) carried every transition to MySQL
        for id_ in [late, *list(ids.values())[:6]]:
            self.wait_history(d, id_, ["ready", "reserved", "finished"] if id_ != late
                              else ["delayed", "ready", "reserved", "finished"])
        wait_until(lambda: self.journal_idle(d), 10, 0.1, "the outbox drained")

        by_node = self.keys_by_node(prefix)
        tags = set()
        for node, keys in by_node.items():
            for k in keys:
                tag = k[len(prefix) + 2:].split("}")[0]
                self.assertIs(self.owner(keyslot(k)), node, f"{k} on {node.address}")
                if tag == "w":
                    continue
                tags.add(tag)
                n = CLUSTER_TAGS.index(tag)
                self.assertEqual(keyslot(k), shard_slot(n), k)
        self.assertTrue(all(by_node.values()), f"a master holds no key: { {n.address: len(k) for n, k in by_node.items()} }")
        self.assertGreater(len(tags), 4, sorted(tags))
        w_owner = self.owner(keyslot("{w}"))
        self.assertEqual(w_owner.cli("HMGET", f"{prefix}:{{w}}:meta", "shards", "tags"), "8\ncluster")
        h = self.assertJsonOk(d.health())
        self.assertEqual((h["status"], h["redis"]), ("ok", "up"), h)

    # -- b
    def test_b_slot_migrated_mid_traffic(self):
        d = self.cluster_daemon()
        prefix = d.config["redis"]["prefix"]
        n = 3
        slot = shard_slot(n)
        topic = self.topic_of_shard(d, n, "mig")
        errors: list[str] = []
        pushed: list[str] = []
        got: list[str] = []
        spans: list[tuple[float, float]] = []  # each request: sent, answered (monotonic)
        stop = threading.Event()

        def timed(fn, *args, **kw):
            t0 = time.monotonic()
            r = fn(*args, **kw)
            spans.append((t0, time.monotonic()))
            return r

        def traffic(k: int) -> None:
            i = 0
            while not stop.is_set():
                r = timed(d.push, {"topic": topic, "body": {"k": k, "i": i}})
                if r.status != 200:
                    errors.append(f"push {r.status} {r.body[:200]!r}")
                else:
                    pushed.append(r.json()["id"])
                g = timed(d.get, topic, timeout=0)
                if g.status == 200:
                    got.append(g.json()["id"])
                    f = timed(d.finish, g.json()["id"])
                    if f.status != 200:
                        errors.append(f"finish {f.status} {f.body[:200]!r}")
                elif g.status != 204:
                    errors.append(f"get {g.status} {g.body[:200]!r}")
                i += 1

        threads = [threading.Thread(target=traffic, args=(k,)) for k in range(3)]
        for th in threads:
            th.start()
        try:
            time.sleep(0.5)
            src = self.owner(slot)
            dest = next(m for m in self.cluster.masters() if m is not src)
            self.assertIs(self.cluster.begin_migration(slot, dest), src)
            t0 = time.monotonic()
            moved = 0
            while True:  # one key at a time, over a socket (redis-cli's start-up is slow here)
                keys, _ = resp_parse(command_raw(src.port, "CLUSTER", "GETKEYSINSLOT", slot, 1))
                if not keys:
                    break
                reply, _ = resp_parse(command_raw(src.port, "MIGRATE", HOST, dest.port, "", 0, 5000, "KEYS", *keys))
                self.assertEqual(reply, "OK")
                moved += 1
                time.sleep(0.05)
            self.cluster.end_migration(slot, dest)
            t1 = time.monotonic()
            window = t1 - t0
            time.sleep(0.5)
        finally:
            stop.set()
            for th in threads:
                th.join(30)
        self.cluster.wait_stable()
        log = [x for x in d.log().splitlines() if "redis" in x and ("warn" in x or "error" in x)]
        self.assertEqual(errors, [], f"{len(errors)} failed requests; the log says:\n" + "\n".join(log[-20:]))
        self.assertGreaterEqual(moved, 3, "the shard's keys moved one by one")
        # The shard pauses while its slot moves (its scripts refuse whole and are retried), so
        # requests sent then are answered once it is over, within [redis] timeout (2 s)
        during = sum(1 for a, b in spans if a < t1 and b > t0)
        slowest = max(b - a for a, b in spans)
        self.assertGreaterEqual(during, 3, "requests were in flight while the slot moved")
        self.assertLess(window, 1.5, "the migration fits in the command timeout")
        self.assertLess(slowest, 2.5, "no request waited past the command timeout")
        print(f"\n  migration: {moved} keys in {window:.2f} s, {during} requests in flight during it, slowest "
              f"{slowest * 1000:.0f} ms, {len(pushed)} pushed in all", flush=True)
        self.assertIs(self.owner(slot), dest)
        # everything pushed is got exactly once (the rest is still ready)
        got += self.drain(d, topic)
        self.assertEqual(sorted(got), sorted(pushed))
        self.assertEqual(len(set(got)), len(got))
        # the shard's counters agree: no script ran half-way
        self.wait_counts(d, topic, ready=0, reserved=0, delayed=0, dead=0)
        self.assertEqual(src.cli("KEYS", f"{prefix}:{{{CLUSTER_TAGS[n]}}}:*"), "", "every key of the shard moved")
        self.assertTrue(dest.cli("KEYS", f"{prefix}:{{{CLUSTER_TAGS[n]}}}:*"))

    # -- c
    def test_c_subscriber_moves_when_its_node_dies(self):
        c = self.cluster
        victim = c.masters()[0]
        d = self.cluster_daemon(first_seed=victim)
        prefix = d.config["redis"]["prefix"]
        channel = f"{prefix}:ready"

        def subscribed_on():
            return [n for n in c.live() if n.cli("PUBSUB", "NUMSUB", channel).split("\n")[1:] == ["1"]]

        self.assertEqual(wait_until(subscribed_on, 10, 0.1, "the subscriber on the first seed"), [victim])
        victim_shards = [n for n in range(SHARDS) if self.owner(shard_slot(n)) is victim]
        other_shards = [n for n in range(SHARDS) if n not in victim_shards]
        self.assertTrue(victim_shards and other_shards)
        other_topic = self.topic_of_shard(d, other_shards[0], "oth")
        victim_topic = self.topic_of_shard(d, victim_shards[0], "vic")

        failures = {"other": 0, "victim": 0}
        stop = threading.Event()

        def traffic() -> None:
            while not stop.is_set():
                for key, t in (("other", other_topic), ("victim", victim_topic)):
                    if d.push({"topic": t, "body": 1}).status != 200:
                        failures[key] += 1
                time.sleep(0.02)

        th = threading.Thread(target=traffic)
        th.start()
        try:
            _, heir, secs = c.kill_master(0)
            moved_to = wait_until(lambda: [n for n in subscribed_on() if n is not victim], 10, 0.1,
                                  "the subscriber on another node")
            self.assertIn("listening on", d.log())
            # the victim's shards come back by themselves
            wait_until(lambda: d.push({"topic": victim_topic, "body": 2}).status == 200, 10, 0.1,
                       "pushes to the victim's shard again")
            wait_until(lambda: every_worker_up(d), 10, 0.1, "/health: every worker's masters up")
        finally:
            stop.set()
            th.join(30)
        self.assertEqual(failures["other"], 0, "the other masters' shards never failed")
        self.assertEqual(len(moved_to), 1)
        # a parked long-poll is answered after the move
        waiter = Background(self.get_one, d, "after.kill", timeout=10)
        time.sleep(0.3)
        self.push(d, "after.kill", 3)
        self.assertEqual(waiter.join(15)["body"], 3)
        h = self.assertJsonOk(d.health())
        self.assertEqual(h["redis"], "up", h)

    # -- d
    def test_d_topic_settings_caught_up_per_shard(self):
        """topics.c's blocking catch-up (rblock_shards): a shard whose copy of the settings was
        lost (as a failover may lose it) gets them back on the master that serves it."""
        d = self.cluster_daemon()
        prefix = d.config["redis"]["prefix"]
        names = [f"set.{i}" for i in range(12)]  # over several shards
        for t in names:
            self.assertJsonOk(d.request("PUT", f"/topics/{t}", body={"paused": True}))

        def holders() -> dict:
            out = {}
            for m in self.cluster.masters():
                for key in (k for k in m.cli("KEYS", f"{prefix}:*:topic").split("\n") if k):
                    out[key] = m
            return out
        copies = wait_until(lambda: len(holders()) > 2 and holders(), 10, 0.1, "the settings on several shards")
        self.assertGreater(len({m.address for m in copies.values()}), 1, "shards on more than one master")
        for key, m in copies.items():
            self.assertIs(self.owner(keyslot(key)), m)
            m.cli("DEL", key)  # lost
        wait_until(lambda: set(holders()) == set(copies), 10, 0.1, "every shard's settings written back")
        for key, m in copies.items():
            self.assertTrue(m.cli("HGET", key, "~synced"), key)
        self.assertIn("was behind", d.log())
        self.push(d, names[0], 1)
        self.assertEqual(d.get(names[0], timeout=0).status, 204, "the topic is paused")

    # -- e
    def test_e_restore_after_a_failover_that_lost_writes(self):
        """A master killed -9, its heir without the dead master's last writes (here: none of
        the prefix's keys, the worst case): /reStore (rblock_shards: the restoring flags, the
        align pass, restore.lua per shard on its master) puts back every acknowledged live job,
        never a deleted or finished one; the reconciler and ids work on."""
        c = self.cluster
        d = self.cluster_daemon()
        prefix = d.config["redis"]["prefix"]
        topics = [f"rs.{i}" for i in range(16)]
        pushed = {self.push(d, t, {"t": t}): t for t in topics for _ in range(3)}
        deleted = set(list(pushed)[::5])
        for id_ in deleted:
            self.assertJsonOk(d.delete(id_))
        finished = set()
        for t in topics[:4]:
            job = self.get_one(d, t)
            if job["id"] not in deleted:
                self.assertJsonOk(d.finish(job["id"]))
                finished.add(job["id"])
        wait_until(lambda: self.journal_idle(d), 15, 0.1, "every transition in MySQL")
        victim = c.masters()[1]
        _, heir, _ = c.kill_master(1)
        heir_keys = [k for k in heir.cli("KEYS", f"{prefix}:*").split("\n") if k]
        lost = [k for k in heir_keys if "{w}" not in k]
        self.assertTrue(lost, "the heir held some of the prefix's shards")
        heir.cli("DEL", *lost)  # the writes the failover dropped
        wait_until(lambda: d.push({"topic": "rs.probe", "body": 0}).status == 200, 15, 0.1, "pushes again")
        wait_until(lambda: every_worker_up(d), 10, 0.1, "/health: every worker's masters up")
        r = wait_until(lambda: (lambda x: x if x.status == 200 else None)(d.restore(expire=True)), 20, 0.5,
                       "/reStore to run")
        out = r.json()
        self.assertGreater(out["restored"], 0, out)
        want = set(pushed) - deleted - finished
        got = set()
        for t in topics:
            while True:
                g = d.get(t, timeout=0)
                if g.status == 204:
                    break
                job = self.assertJsonOk(g)
                self.assertNotIn(job["id"], got, "delivered twice")
                got.add(job["id"])
                self.assertJsonOk(d.finish(job["id"]))
        self.assertEqual(got, want, f"restore answered {out}")
        self.assertFalse(got & deleted, "a deleted job came back")
        ids = {self.push(d, "rs.after", i) for i in range(20)}
        self.assertEqual(len(ids), 20)
        self.assertFalse(ids & set(pushed), "ids stay unique")

    # -- f
    def test_f_pager_and_purge(self):
        """The pager (rblock_shards) pages a job due beyond the horizon into its shard's master in
        time; a topic purge (its shard's master) deletes a topic's jobs."""
        d = Daemon(overrides={"redis": {"cluster": True, "address": ",".join(self.cluster.seeds()), "db": 0},
                              "queue": {"horizon": 2000}})
        self.addCleanup(d.close)
        d.start()
        self.wait_healthy(d, timeout=20)
        far = self.push(d, "pg.far", {"far": True}, delay=5000)
        paged = self.wait_history(d, far, ["far", "delayed"])  # MySQL only, then paged in
        self.assertIn("pager", paged["history"][1]["by"], paged["history"])
        job = self.get_one(d, "pg.far", timeout=12)
        self.assertEqual(job["id"], far)
        self.assertJsonOk(d.finish(far))

        ids = [self.push(d, "pg.purge", i) for i in range(30)]
        r = self.assertJsonOk(d.request("POST", "/topics/pg.purge/purge", params={"state": "all"}))
        self.assertEqual(r["deleted"], len(ids), r)
        self.assertEqual(d.get("pg.purge", timeout=0).status, 204)
        self.assertEqual(self.state(d, ids[0]), "deleted")


class ClusterNotWholeAtStartTest(ClusterCase):
    """A daemon started while the slot of its {w} keys has no master (unassigned on every node,
    as between a master's loss and its replica's promotion when there is none to promote) starts
    and waits, as it does when Redis does not answer, rather than exiting: rblock_connect_key
    reports that as unreachable. Once the slot has a master again the daemon is healthy."""

    def test_starts_and_recovers_when_the_w_slot_has_no_master(self):
        c = self.cluster
        slot = keyslot("w")
        owner = self.owner(slot)
        for n in c.nodes:
            n.cli("CLUSTER", "DELSLOTS", str(slot))
        wait_until(lambda: not any(a <= slot <= b for n in c.nodes for a, b, _ in c.slot_owners(n)), 10, 0.1,
                   "every node to see the slot unassigned")
        d = Daemon(overrides={"redis": {"cluster": True, "address": ",".join(c.seeds()), "db": 0}})
        self.addCleanup(d.close)
        try:
            d.start()
            self.assertIn("no master serves the slot of {w} (the cluster is not whole)", d.log())
            self.assertIn("starting anyway", d.log())
            self.assertEqual(d.health().status, 503, "not healthy while the slot has no master")
        finally:
            owner.cli("CLUSTER", "ADDSLOTS", str(slot))
        c.wait_stable()
        self.wait_healthy(d, timeout=30)
        jid = self.assertJsonOk(d.push({"topic": "whole", "body": 1}))["id"]
        self.assertEqual(self.assertJsonOk(d.get("whole", timeout=5))["id"], jid)


if __name__ == "__main__":
    import unittest

    unittest.main()
