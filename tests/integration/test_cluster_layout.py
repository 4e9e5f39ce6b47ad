"""[redis] cluster and the shard-tag key layout (issue 14, step 3), on a single Redis (the
daemon on a real cluster: test_cluster_wire, test_cluster_lifecycle).

* `cluster = true` with seed nodes is a configuration -t accepts, and a daemon with it starts
  while no seed answers (requests get 503 until one does), as a single-Redis daemon starts
  while its Redis is down; a seed list that does not parse is named, and so is a seed list
  without `cluster = true`.
* The cluster key layout ({<n>.<k>} tags, src/core/shardtag.h) runs on a single Redis through the
  test-only HOURGLASS_TEST_SHARD_TAGS=cluster (main.c): every key the daemon writes, and every
  script it runs, then works on tagged keys, which is what a cluster will see. A push -> due ->
  get -> finish round trip (a delayed job too: the mover and its wake) works there, and every
  shard key sits in its shard's slot (checked against an independent CRC16, rcluster.keyslot).
* The layout record (<prefix>:{w}:meta) names the tag scheme; a daemon refuses to start on data
  written with the other one, both ways, and a record without the field (written before it
  existed) means plain. A daemon that started while Redis was unreachable notices a mismatch
  once Redis is there and serves nothing.
* lib.lua reads the shard number out of both tag forms (EVAL of lib.lua and its begin).

    make integration T=test_cluster_layout
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from core_common import CoreTestCase
from harness import REPO_ROOT, Daemon, DaemonError, free_port, wait_until
from rcluster import keyslot

KNOB = "HOURGLASS_TEST_SHARD_TAGS"
SHARDS = 8
# src/core/shardtag.h under Cluster, pinned like test_cluster.c / test_shardtag.c pin them
CLUSTER_TAGS = ["0.6957", "1.48242", "2.68352", "3.2520", "4.586", "5.22978", "6.1197", "7.5679"]


def shard_slot(n: int, shards: int = SHARDS) -> int:
    """The middle slot of the n-th of `shards` equal slices (cluster_shard_slot)."""
    return (2 * n + 1) * 16384 // (2 * shards)


class ClusterSettingTest(CoreTestCase):
    """cluster = true is a setting the daemon runs with."""

    def test_cluster_true_starts_without_a_reachable_seed(self):
        dead = [free_port(), free_port()]
        d = Daemon(overrides={"redis": {"cluster": True, "address": f"127.0.0.1:{dead[0]}, 127.0.0.1:{dead[1]}",
                                        "db": 0}})
        self.addCleanup(d.close)
        r = d.check_config()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("configuration OK", r.stdout)
        d.start()
        self.assertIn("not reachable now", d.log())  # the start-up layout check, on no seed
        h = d.health()
        self.assertEqual(h.status, 503, h.body)
        self.assertEqual(h.json()["redis"], "down")
        r = d.push({"topic": "nowhere", "body": 1})
        self.assertEqual(r.status, 503, r.body)
        self.assertIn("Redis", r.json()["message"])
        self.assertTrue(d.running, "it keeps running")

    def test_bad_addresses_named(self):
        cases = [
            ({"cluster": True, "address": "127.0.0.1:7000,redis-b"}, 'seed "redis-b" is not host:port'),
            ({"cluster": True, "address": "unix:/run/redis.sock"}, 'seed "unix:/run/redis.sock"'),
            ({"cluster": True, "address": " , "}, "no seed node"),
            ({"cluster": False, "address": "127.0.0.1:7000,127.0.0.1:7001"}, "needs cluster = true"),
            ({"cluster": False, "address": "127.0.0.1:0"},
             'is not host:port, [IPv6]:port or unix:/path: port must be a number 1..65535, not "0"'),
        ]
        for redis, says in cases:
            with self.subTest(**redis):
                d = Daemon(overrides={"redis": redis})
                self.addCleanup(d.close)
                r = d.check_config()
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn("[redis] address", r.stderr)
                self.assertIn(says, r.stderr)


class ClusterTagsTest(CoreTestCase):
    """The cluster key layout on a single Redis (HOURGLASS_TEST_SHARD_TAGS=cluster)."""

    def tagged_daemon(self, ns=None, **overrides) -> Daemon:
        d = Daemon(namespace=ns, overrides=overrides or None)
        d.env[KNOB] = "cluster"
        self.addCleanup(d.close)
        d.start()
        self.wait_healthy(d)
        self.assertIn(f"{KNOB} is set (cluster)", d.log())
        return d

    def shard_keys(self, d: Daemon) -> dict[str, list[str]]:
        """{tag: keys} of every key under the daemon's prefix ({w} included)."""
        prefix = d.config["redis"]["prefix"]
        rx = re.compile(re.escape(prefix) + r":\{([^}]*)\}:")
        out: dict[str, list[str]] = {}
        for key in d.namespace.redis_keys("*"):
            m = rx.match(key)
            self.assertIsNotNone(m, f"a key without a tag: {key}")
            out.setdefault(m.group(1), []).append(key)
        return out

    def refuses_to_start(self, d: Daemon) -> str:
        with self.assertRaises(DaemonError, msg="it started on data of the other layout"):
            d.start(timeout=15)
        self.assertEqual(d.wait_exit(10), 1)
        return d.log()

    def test_round_trip_on_tagged_keys(self):
        d = self.tagged_daemon()
        topics = [f"cl.{i}" for i in range(12)]  # topics hash over several shards
        ids = {t: self.push(d, t, {"t": t}) for t in topics}
        late = self.push(d, "cl.late", {"late": True}, delay=1500)
        self.assertEqual(self.assertJsonOk(d.job(late))["state"], "delayed")  # so the mover makes it ready
        for t in topics:
            job = self.get_one(d, t)
            self.assertEqual(job["id"], ids[t])
            self.assertEqual(job["body"], {"t": t})
            self.assertJsonOk(d.finish(job["id"]))
        job = self.get_one(d, "cl.late", timeout=5)
        self.assertEqual(job["id"], late)
        self.assertJsonOk(d.finish(late))
        self.assertStatus(d.finish(late), 404)

        # the history's actors name the tagged keys (store_actor), once the journal has them
        def history():
            return self.assertJsonOk(d.job(late))["history"]
        wait_until(lambda: [h["state"] for h in history()][-1:] == ["finished"], 10, 0.1, "history to be journaled")
        by = " ".join(h["by"] for h in history())
        self.assertRegex(by, r":\{\d+\.\d+\}:", by)
        self.assertNotRegex(by, r":\{\d+\}:", by)

        keys = self.shard_keys(d)
        self.assertIn("w", keys)
        shard_tags = set(keys) - {"w"}
        self.assertTrue(shard_tags, keys)
        self.assertLessEqual(shard_tags, set(CLUSTER_TAGS), f"plain or unknown tags: {sorted(shard_tags)}")
        self.assertGreater(len(shard_tags), 2, "the topics landed on several shards")
        for tag in shard_tags:
            n = int(tag.split(".")[0])
            for key in keys[tag]:
                self.assertEqual(keyslot(key), shard_slot(n), f"{key} is not in shard {n}'s slot")
        prefix = d.config["redis"]["prefix"]
        meta = d.namespace.redis_cli("HGETALL", f"{prefix}:{{w}}:meta").split("\n")
        self.assertEqual(dict(zip(meta[0::2], meta[1::2])), {"shards": "8", "tags": "cluster"})

        self.push(d, "cl.wait", 1)  # /stats reads the shard's counters by key (rkey), not by script
        stats = self.assertJsonOk(d.request("GET", "/stats"))
        self.assertEqual(stats["topics"]["cl.wait"]["ready"], 1, stats["topics"])

    def test_plain_keys_unchanged(self):
        d = self.daemon()
        self.push(d, "pl.0", 1)
        self.assertEqual(self.get_one(d, "pl.0")["body"], 1)
        keys = self.shard_keys(d)
        self.assertLessEqual(set(keys) - {"w"}, {str(n) for n in range(SHARDS)}, sorted(keys))
        prefix = d.config["redis"]["prefix"]
        self.assertEqual(d.namespace.redis_cli("HMGET", f"{prefix}:{{w}}:meta", "shards", "tags"), "8\nplain")

    def test_other_scheme_refused_both_ways(self):
        ns = self.namespace()
        plain = Daemon(namespace=ns)
        self.addCleanup(plain.close)
        plain.start()
        self.wait_healthy(plain)
        self.push(plain, "mix", 1)
        plain.stop()
        tagged = Daemon(namespace=ns)
        tagged.env[KNOB] = "cluster"
        self.addCleanup(tagged.close)
        log = self.refuses_to_start(tagged)
        self.assertIn("was written with plain shard tags", log)
        self.assertIn("this instance uses cluster shard tags", log)
        self.assertIn("Shard tags are fixed for the life of the data", log)

        ns2 = self.namespace()
        self.tagged_daemon(ns2).stop()
        plain2 = Daemon(namespace=ns2)
        self.addCleanup(plain2.close)
        log = self.refuses_to_start(plain2)
        self.assertIn("was written with cluster shard tags", log)
        self.assertIn("this instance uses plain shard tags", log)

        shards4 = Daemon(namespace=ns2, overrides={"redis": {"shards": 4}})
        shards4.env[KNOB] = "cluster"
        self.addCleanup(shards4.close)
        self.assertIn("was written with [redis] shards = 8, this instance has 4", self.refuses_to_start(shards4))

    def test_record_without_tags_means_plain(self):
        ns = self.namespace()
        meta = f"{ns.prefix}:{{w}}:meta"
        ns.redis_cli("HSET", meta, "shards", "8")  # as daemons before the tags field wrote it
        tagged = Daemon(namespace=ns)
        tagged.env[KNOB] = "cluster"
        self.addCleanup(tagged.close)
        self.assertIn("was written with plain shard tags", self.refuses_to_start(tagged))
        d = self.start_daemon(namespace=ns)
        self.wait_healthy(d)
        self.push(d, "old", 1)
        self.assertEqual(ns.redis_cli("HGETALL", meta), "shards\n8", "an existing record is left as it was")

    def test_bad_knob_refused(self):
        d = Daemon()
        d.env[KNOB] = "yes"
        self.addCleanup(d.close)
        self.assertIn(f"{KNOB}=yes: must be plain or cluster", self.refuses_to_start(d))

    def test_mismatch_noticed_when_redis_comes_back(self):
        """Started while Redis was unreachable (it cannot check then), a plain daemon finds
        cluster-tagged data once Redis is there: it serves nothing and writes nothing — not its
        outbox (XGROUP CREATE ... MKSTREAM), its lease or its fleet heartbeat either."""
        redis = self.private_redis(persistent=True)
        ns = self.namespace()
        over = {"redis": {"address": redis.address, "db": 0, "timeout": 500}}
        self.tagged_daemon(ns, **over).stop()
        keys_before = sorted(redis.cli("KEYS", ns.prefix + "*", db=0).split("\n"))
        redis.stop()
        d = Daemon(namespace=ns, overrides=over)
        self.addCleanup(d.close)
        d.start(timeout=20)
        redis.start()
        back = time.monotonic()
        try:
            d.wait_for_log(r"redis: the data under prefix \S+ was written with cluster shard tags.*it refuses requests",
                           timeout=10)
        except TimeoutError:
            self.fail(d.log_tail(40))
        messages = set()
        deadline = time.monotonic() + 4.0  # the workers' reconnects back off up to 2 s
        while time.monotonic() < deadline and "shard tags differ" not in " ".join(messages):
            r = d.push({"topic": "late", "body": 1})
            messages.add(self.assertError(r, 503, "unavailable", "a push into data of the other layout")["message"])
            time.sleep(0.1)
        self.assertIn("shard tags differ", " ".join(messages), messages)
        # The blocking writers reconnect on their own clocks (the outbox about 1 s after Redis
        # is back, the topics' catch-up every 0.5 s): the outbox has tried and refused, and the
        # others have had their turn, before the keys are read.
        try:
            d.wait_for_log(r"outbox: the data under prefix \S+ was written with cluster shard tags.*writes nothing",
                           timeout=10)
        except TimeoutError:
            self.fail("the outbox never said it refused the data: " + d.log_tail(40))
        time.sleep(max(0.0, back + 3.0 - time.monotonic()))
        keys_after = sorted(redis.cli("KEYS", ns.prefix + "*", db=0).split("\n"))
        changed = {k for k in set(keys_after) ^ set(keys_before) if ":{w}:" not in k}
        self.assertEqual(changed, set(), "keys written into the cluster-tagged data by a plain daemon")
        # nor the global ones (a worker-id lease, a fleet heartbeat) — keys that were there may expire
        self.assertEqual(set(keys_after) - set(keys_before), set(), "keys a plain daemon created there")


class LibShardParseTest(CoreTestCase):
    """lib.lua's begin reads the prefix and the shard number out of KEYS[1] in both forms."""

    def test_both_tag_forms(self):
        ns = self.namespace()
        lib = (Path(REPO_ROOT) / "src" / "redis" / "lua" / "lib.lua").read_text()
        script = lib + "\nbegin(KEYS)\nreturn {tostring(prefix), tostring(shard)}\n"
        cases = {
            "hg:{3}:jobs": "hg\n3",
            "hg:{3.2520}:jobs": "hg\n3",
            "hg:{255.57581}:jobs": "hg\n255",
            "a.b-c_d:{0.6957}:jobs": "a.b-c_d\n0",
            "hg:{w}:meta": "hg\nnil",   # the global keys name no shard
            "hg:{3.}:jobs": "hg\nnil",  # not a tag the daemon makes
            "hg:{.5}:jobs": "hg\nnil",
        }
        for key, want in cases.items():
            with self.subTest(key=key):
                self.assertEqual(ns.redis_cli("EVAL", script, "1", key), want)
