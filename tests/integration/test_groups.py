"""Flow control by key (docs/api.md "Groups"): a job's `group`, the topic settings
groupConcurrency / groupOrder / groupRate, GET /topics/{topic}/groups — on one instance, path by
path: count=N long-polls, several topics in one long-poll, priority, leases that run out,
release, retry with backoff under fifo, dead, delete, purge, reschedule, settings set and
removed on a live topic, /reStore after Redis is lost, and what an idle group leaves in Redis
(nothing). The fleet-wide properties (two instances, kill -9, rate, webhooks) are in
test_groups_fleet.py."""

from __future__ import annotations

import time

from core_common import CoreTestCase, wait_until
from harness import Daemon, journal_idle


def put(d: Daemon, topic: str, settings):
    return d.request("PUT", "/topics/" + topic, body=settings)


def groups_of(tc: CoreTestCase, d: Daemon, topic: str, limit: int | None = None) -> dict:
    """Every group of a topic (all pages, each group once: callers change nothing meanwhile) ->
    (delayed, ready, reserved)."""
    out: dict = {}
    after = None
    for _ in range(1000):
        page = tc.assertJsonOk(d.request("GET", f"/topics/{topic}/groups",
                                         params={"after": after, "limit": limit}))
        tc.assertEqual(set(page), {"groups", "next"}, page)
        tc.assertLessEqual(len(page["groups"]), limit or 100, f"a page of limit {limit}")
        tc.assertEqual(page["groups"], sorted(page["groups"], key=lambda g: g["group"].encode()), "sorted by name")
        for g in page["groups"]:
            tc.assertEqual(set(g), {"group", "delayed", "ready", "reserved"}, g)
            tc.assertNotIn(g["group"], out, "listed twice (nothing changed during the walk)")
            out[g["group"]] = (g["delayed"], g["ready"], g["reserved"])
        after = page["next"]
        if after is None:
            return out
    tc.fail("the groups listing never ended")


def group_keys(d: Daemon, topic: str) -> list[str]:
    """The topic's group keys in Redis (lib.lua "Flow control by key")."""
    return [k for k in d.namespace.redis_keys("*") if any(f"}}:{p}:{topic}" in k for p in ("gr", "gq", "gs", "gt", "gz"))]


def lists_disagree(d: Daemon, topic: str) -> list[str]:
    """Where a topic's group lists and its groups' fields disagree (lib.lua GL: a group is on the
    round, the rate waits or the idle list exactly once when its field says so, else not at all);
    [] when they agree."""
    ns = d.namespace
    flags: dict[str, int] = {}
    for key in ns.redis_keys(f"*:gs:{topic}"):
        kv = ns.redis_cli("HGETALL", key).split("\n")
        for g, v in zip(kv[0::2], kv[1::2]):
            nums = v.split()
            flags[g] = int(nums[4]) if len(nums) > 4 else 0
    out = []
    for kind, bit in (("gq", 1), ("gt", 2), ("gz", 4)):
        entries: dict[str, int] = {}
        for key in ns.redis_keys(f"*:{kind}:{topic}"):
            for g in ns.redis_cli("LRANGE", key, 0, -1).split("\n"):
                if g:
                    entries[g] = entries.get(g, 0) + 1
        for g in set(entries) | {g for g, f in flags.items() if f & bit}:
            want = 1 if flags.get(g, 0) & bit else 0
            if entries.get(g, 0) != want:
                out.append(f"{kind}: group {g} has {entries.get(g, 0)} entries, its field says {want}")
    return out


def topic_value(d: Daemon, topic: str) -> str:
    """What the scripts read for a topic's settings (lib.lua topic_conf), '' when none."""
    return d.namespace.redis_cli("EVAL", "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                                 "local v = redis.call('HGET', k, ARGV[2]) if v then return v end end return ''",
                                 "0", d.namespace.prefix + "*:topic", topic)


class GroupsApiTest(CoreTestCase):
    def test_group_is_stored_shown_and_journaled(self):
        d = self.daemon()
        a = self.push(d, "ga", {"n": 1}, group="customer-7")
        b = self.push(d, "ga", {"n": 2})
        self.assertEqual(self.inspect(d, a)["group"], "customer-7")
        self.assertIsNone(self.inspect(d, b)["group"])
        got = self.assertJsonOk(d.get("ga", count=2))
        self.assertEqual({j["id"]: j["group"] for j in got}, {a: "customer-7", b: None})
        wait_until(lambda: d.namespace.query(f"SELECT group_key FROM message WHERE id = {a}") == [("customer-7",)],
                   10, 0.05, "the group in MySQL")
        self.assertEqual(d.namespace.query(f"SELECT group_key FROM message WHERE id = {b}"), [(None,)])
        # a bizKey job takes the other path through push.lua: its group too
        c = self.push(d, "ga", None, group="ü-8", bizKey="k1")
        self.assertEqual(self.inspect(d, c)["group"], "ü-8")
        # a replace gives the job the replacing push's group
        r = self.assertJsonOk(d.push({"topic": "ga", "bizKey": "k1", "replace": True, "group": "g9", "delay": 5000}))
        self.assertEqual(r["id"], c)
        self.assertEqual(self.inspect(d, c)["group"], "g9")
        wait_until(lambda: d.namespace.query(f"SELECT group_key FROM message WHERE id = {c}") == [("g9",)],
                   10, 0.05, "the replaced group in MySQL")
        self.assertEqual(groups_of(self, d, "ga"), {"customer-7": (0, 0, 1), "g9": (1, 0, 0)})

    def test_bad_group_and_bad_settings_are_clear_400s(self):
        d = self.daemon()
        for bad in ("", "x" * 129, 5, ["a"], {"a": 1}, True, "a\u0001b", "tab\there"):
            self.assertError(d.push({"topic": "gb", "group": bad}), 400, "bad_request", f"group {bad!r}")
        self.assertError(d.push([{"topic": "gb"}, {"topic": "gb", "group": ""}]), 400, "bad_request")
        self.assertEqual(self.assertJsonOk(d.request("GET", "/topics/gb"))["counts"]["ready"], 0)
        self.push(d, "gb", None, group="x" * 128)  # 128 bytes: fine
        self.push(d, "gb", None, group="é" * 64)   # 128 bytes of UTF-8: fine
        self.assertError(d.push({"topic": "gb", "group": "é" * 65}), 400, "bad_request")
        self.push(d, "gb", None, group=None)       # null: no group
        for bad in ({"groupConcurrency": -1}, {"groupConcurrency": "2"}, {"groupConcurrency": 1.5},
                    {"groupConcurrency": 10 ** 7}, {"groupOrder": "lifo"}, {"groupOrder": 1},
                    {"groupRate": -1}, {"groupRate": "fast"}, {"groupOrder": "fifo", "groupConcurrency": 3}):
            r = put(d, "gb", bad)
            self.assertError(r, 400, "bad_request", f"settings {bad}")
            self.assertIn(next(iter(bad)), r.json()["message"])
        got = self.assertJsonOk(d.request("GET", "/topics/gb"))
        self.assertEqual((got["groupConcurrency"], got["groupOrder"], got["groupRate"]), (0, "any", 0))
        got = self.assertJsonOk(put(d, "gb", {"groupOrder": "fifo"}))
        self.assertEqual((got["groupConcurrency"], got["groupOrder"], got["groupRate"]), (1, "fifo", 0))
        got = self.assertJsonOk(put(d, "gb", {"groupOrder": "any", "groupConcurrency": 4, "groupRate": 7}))
        self.assertEqual((got["groupConcurrency"], got["groupOrder"], got["groupRate"]), (4, "any", 7))
        # GET's answer sent back as it is changes nothing
        shown = self.assertJsonOk(d.request("GET", "/topics/gb"))
        self.assertJsonOk(put(d, "gb", shown))
        self.assertEqual(self.assertJsonOk(d.request("GET", "/topics/gb")), shown)
        for bad in ({"after": "x"}, {"limit": 0}, {"limit": 100000}, {"bogus": 1}):
            self.assertError(d.request("GET", "/topics/gb/groups", params=bad), 400, "bad_request", str(bad))
        self.assertError(d.request("GET", "/topics/b%20d/groups"), 400, "bad_request")


class GroupsDeliveryTest(CoreTestCase):
    def test_concurrency_holds_with_count_n_and_frees_on_finish(self):
        d = self.daemon(default_ttr=30000)
        self.assertJsonOk(put(d, "gc", {"groupConcurrency": 2}))
        ids = {}
        for g in ("a", "b", "c"):
            ids[g] = [self.push(d, "gc", {"g": g, "i": i}, group=g) for i in range(5)]
        loose = self.push(d, "gc", "no group")
        got = self.assertJsonOk(d.get("gc", count=20))
        by = {}
        for j in got:
            by.setdefault(j["group"], []).append(j["id"])
        self.assertEqual({g: len(v) for g, v in by.items()}, {"a": 2, "b": 2, "c": 2, None: 1}, got)
        # each group's first two, in push order (priority and due time equal)
        for g in ("a", "b", "c"):
            self.assertEqual(by[g], ids[g][:2])
        self.assertEqual(by[None], [loose])
        self.assertEqual(groups_of(self, d, "gc"), {"a": (0, 3, 2), "b": (0, 3, 2), "c": (0, 3, 2)})
        self.assertNothing(d, "gc")
        # a finish frees one slot of its group, and a parked long-poll wakes for it
        t0 = time.monotonic()
        import threading
        box = {}
        th = threading.Thread(target=lambda: box.setdefault("r", d.get("gc", timeout=5, count=5)))
        th.start()
        time.sleep(0.3)
        self.assertJsonOk(d.finish(ids["b"][0]))
        th.join()
        r = box["r"]
        self.assertStatus(r, 200)
        self.assertEqual([j["id"] for j in r.json()], [ids["b"][2]])
        self.assertLess(time.monotonic() - t0, 4)
        self.assertEqual(groups_of(self, d, "gc")["b"], (0, 2, 2))

    def test_round_robin_does_not_starve_a_small_group(self):
        d = self.daemon(default_ttr=60000)
        self.assertJsonOk(put(d, "gs", {"groupConcurrency": 5000}))
        for k in range(4):
            self.assertJsonOk(d.push([{"topic": "gs", "group": "big", "body": k * 500 + i} for i in range(500)]))
        small = self.push(d, "gs", "small", group="small")
        first = [self.get_one(d, "gs") for _ in range(2)]
        self.assertIn(small, [j["id"] for j in first], "the small group waited more than one round")
        # and in batches too: a count=N long-poll takes one per group per round
        self.push(d, "gs", "small2", group="small")
        got = self.assertJsonOk(d.get("gs", count=4))
        self.assertEqual(sorted(j["group"] for j in got).count("small"), 1, got)

    def test_priority_and_ungrouped_jobs_keep_their_order_in_time(self):
        d = self.daemon(default_ttr=60000)
        self.assertJsonOk(put(d, "gp", {"groupConcurrency": 10}))
        low = self.push(d, "gp", "low", group="a", priority=9)
        high = self.push(d, "gp", "high", group="a", priority=0)
        u = self.push(d, "gp", "ungrouped", priority=5)
        got = self.assertJsonOk(d.get("gp", count=3))
        self.assertEqual([j["id"] for j in got], [high, u, low])

    def test_several_topics_in_one_long_poll(self):
        d = self.daemon(default_ttr=60000)
        self.assertJsonOk(put(d, "gm1", {"groupConcurrency": 1}))
        a = [self.push(d, "gm1", i, group="x") for i in range(3)]
        b = [self.push(d, "gm2", i, group="x") for i in range(3)]  # gm2: no group settings
        got = self.assertJsonOk(d.get(["gm1", "gm2"], count=10))
        self.assertEqual(sorted(j["id"] for j in got), sorted([a[0]] + b))

    def test_fifo_lease_expiry_release_and_backoff_keep_the_head(self):
        d = self.daemon()
        self.assertJsonOk(put(d, "gf", {"groupOrder": "fifo", "backoff": 300}))
        ids = [self.push(d, "gf", i, group="o", ttr=400, tries=5) for i in range(3)]
        first = self.get_one(d, "gf")
        self.assertEqual(first["id"], ids[0])
        self.assertNothing(d, "gf")
        # its lease runs out: it waits its backoff (300 ms), and nothing else of its group goes
        time.sleep(0.5)
        self.assertNothing(d, "gf")
        again = self.get_one(d, "gf", timeout=3)
        self.assertEqual((again["id"], again["attempt"]), (ids[0], 2))
        # a consumer's release with a delay: still the head
        self.assertJsonOk(d.release(ids[0], delay=300))
        self.assertNothing(d, "gf", timeout=0.2)
        again = self.get_one(d, "gf", timeout=3)
        self.assertEqual((again["id"], again["attempt"]), (ids[0], 3))
        self.assertJsonOk(d.finish(ids[0]))
        self.assertEqual(self.get_one(d, "gf")["id"], ids[1])
        # a release to ready now: the head again, at once
        self.assertJsonOk(d.release(ids[1], delay=0))
        self.assertEqual(self.get_one(d, "gf")["id"], ids[1])
        self.assertJsonOk(d.finish(ids[1]))
        self.assertEqual(self.get_one(d, "gf")["id"], ids[2])
        self.assertJsonOk(d.finish(ids[2]))
        self.assertEqual(groups_of(self, d, "gf"), {})
        self.assertEqual(group_keys(d, "gf"), [])

    def test_any_order_lease_expiry_frees_the_slot(self):
        d = self.daemon()
        self.assertJsonOk(put(d, "ge", {"groupConcurrency": 1}))
        ids = [self.push(d, "ge", i, group="o", ttr=300) for i in range(2)]
        self.assertEqual(self.get_one(d, "ge")["id"], ids[0])
        self.assertNothing(d, "ge")
        # its lease runs out: the slot is free, the job back in line behind the other
        got = self.get_one(d, "ge", timeout=3)
        self.assertEqual(got["id"], ids[1])
        self.assertJsonOk(d.finish(ids[1]))
        self.assertEqual(self.get_one(d, "ge", timeout=3)["id"], ids[0])

    def test_group_rate_spaces_a_groups_deliveries_and_leaves_nothing(self):
        d = self.daemon(default_ttr=30000)
        self.assertJsonOk(put(d, "gt1", {"groupRate": 5}))  # one every 200 ms per group
        a = [self.push(d, "gt1", i, group="a") for i in range(3)]
        b = self.push(d, "gt1", "b", group="b")
        got = self.assertJsonOk(d.get("gt1", count=10))
        self.assertEqual(sorted(j["id"] for j in got), sorted([a[0], b]))  # one per group, at once
        t0 = time.monotonic()
        self.assertEqual(self.get_one(d, "gt1", timeout=2)["id"], a[1])  # a parked poll waits its token
        self.assertGreaterEqual(time.monotonic() - t0, 0.15)
        self.assertEqual(self.get_one(d, "gt1", timeout=2)["id"], a[2])
        for j in a + [b]:
            self.assertJsonOk(d.finish(j))
        # the groups' rate clocks go once their time has passed and the topic is asked again
        time.sleep(0.3)
        self.assertNothing(d, "gt1")
        self.assertEqual(group_keys(d, "gt1"), [])

    def test_dead_delete_purge_and_reschedule_free_their_group(self):
        d = self.daemon(default_ttr=30000)
        self.assertJsonOk(put(d, "gd", {"groupConcurrency": 1}))
        # dead: a last try that runs out frees the group
        a = [self.push(d, "gd", i, group="a", ttr=300, tries=1) for i in range(2)]
        self.assertEqual(self.get_one(d, "gd")["id"], a[0])
        got = self.get_one(d, "gd", timeout=3)
        self.assertEqual(got["id"], a[1])
        self.assertEqual(self.state(d, a[0]), "dead")
        self.assertJsonOk(d.finish(a[1]))
        # delete of a reserved job frees its slot; of a ready one, its place
        b = [self.push(d, "gd", i, group="b") for i in range(3)]
        self.assertEqual(self.get_one(d, "gd")["id"], b[0])
        self.assertJsonOk(d.delete(b[1]))
        self.assertJsonOk(d.delete(b[0]))
        self.assertEqual(self.get_one(d, "gd")["id"], b[2])
        self.assertJsonOk(d.finish(b[2]))
        # reschedule of a ready job to later takes it out of its group's line
        c = [self.push(d, "gd", i, group="c") for i in range(2)]
        self.assertJsonOk(d.reschedule(c[0], delay=60000))
        self.assertEqual(groups_of(self, d, "gd"), {"c": (1, 1, 0)})
        self.assertEqual(self.get_one(d, "gd")["id"], c[1])
        self.assertJsonOk(d.finish(c[1]))
        self.assertJsonOk(d.reschedule(c[0], delay=0))
        self.assertEqual(self.get_one(d, "gd")["id"], c[0])
        self.assertJsonOk(d.finish(c[0]))
        # purge of ready and delayed jobs
        for i in range(5):
            self.push(d, "gd", i, group="p")
            self.push(d, "gd", i, group="q", delay=60000)
        self.assertEqual(groups_of(self, d, "gd"), {"p": (0, 5, 0), "q": (5, 0, 0)})
        for state in ("ready", "delayed"):
            r = self.assertJsonOk(d.request("POST", "/topics/gd/purge", params={"state": state}))
            self.assertEqual(r["deleted"], 5, r)
        self.assertEqual(lists_disagree(d, "gd"), [])
        self.assertEqual(groups_of(self, d, "gd"), {})
        self.assertEqual(group_keys(d, "gd"), [])
        self.assertNothing(d, "gd")

    def test_settings_set_and_removed_on_a_live_topic(self):
        d = self.daemon(default_ttr=30000)
        # ready before any group settings: on the topic's ready zset
        ids = {g: [self.push(d, "gl", i, group=g) for i in range(3)] for g in ("a", "b")}
        self.assertEqual(groups_of(self, d, "gl"), {"a": (0, 3, 0), "b": (0, 3, 0)})
        self.assertJsonOk(put(d, "gl", {"groupConcurrency": 1}))
        got = self.assertJsonOk(d.get("gl", count=10))
        self.assertEqual(sorted(j["id"] for j in got), sorted([ids["a"][0], ids["b"][0]]))
        self.assertNothing(d, "gl")
        # the settings go while the groups' ready jobs wait on their ranges: none is lost or
        # stuck, and with nothing left the topic is an ordinary one again
        self.assertJsonOk(d.request("DELETE", "/topics/gl"))
        got = self.assertJsonOk(d.get("gl", count=10))
        self.assertEqual(sorted(j["id"] for j in got), sorted(ids["a"][1:] + ids["b"][1:]))
        for j in ids["a"] + ids["b"]:
            self.assertJsonOk(d.finish(j))
        self.assertEqual(groups_of(self, d, "gl"), {})
        self.assertEqual(group_keys(d, "gl"), [])
        self.assertNotIn(" g", topic_value(d, "gl"))
        self.assertTrue(topic_value(d, "gl"))

    def test_a_get_that_finishes_first_frees_the_slot_for_its_own_group(self):
        d = self.daemon(default_ttr=30000)
        self.assertJsonOk(put(d, "gx", {"groupOrder": "fifo"}))
        ids = [self.push(d, "gx", i, group="a") for i in range(3)]
        self.assertEqual(self.get_one(d, "gx")["id"], ids[0])
        self.assertNothing(d, "gx")  # the group's one slot is taken
        for done, nxt in ((ids[0], ids[1]), (ids[1], ids[2])):
            r = d.get("gx", params={"finish": done})
            self.assertEqual(self.assertJsonOk(r)["id"], nxt, "the finish did not come before the get")
            self.assertEqual(r.headers.get("Hourglass-Finished"), done)
        r = d.get("gx", params={"finish": ids[2]})
        self.assertEqual((r.status, r.headers.get("Hourglass-Finished")), (204, ids[2]))
        self.assertEqual(group_keys(d, "gx"), [])

    def test_a_group_held_by_its_rate_is_served_at_once_when_the_rate_goes(self):
        d = self.daemon(default_ttr=30000)
        self.assertJsonOk(put(d, "gh", {"groupConcurrency": 2, "groupRate": 1}))  # one a second
        ids = [self.push(d, "gh", i, group="a") for i in range(2)]
        self.assertEqual(self.get_one(d, "gh")["id"], ids[0])
        self.assertNothing(d, "gh")  # a slot is free, its token is not: held until a second has passed
        # the rate goes (the concurrency stays): the held group is looked at again at once,
        # not left waiting on the list of rate waits, which nothing sweeps without a rate
        self.assertJsonOk(put(d, "gh", {"groupConcurrency": 2, "groupRate": 0}))
        got = self.assertJsonOk(d.get("gh", count=10, timeout=0))
        self.assertEqual([j["id"] for j in got], [ids[1]])
        for j in ids:
            self.assertJsonOk(d.finish(j))
        self.assertEqual(group_keys(d, "gh"), [])

    def test_groups_listing_pages_through_both_places(self):
        d = self.daemon(default_ttr=30000)
        self.assertJsonOk(put(d, "gk", {"groupConcurrency": 1}))
        self.assertJsonOk(d.push([{"topic": "gk", "group": f"g{i:03}", "body": k} for k in range(2) for i in range(300)]))
        self.push(d, "gk", None, group="late", delay=60000)
        got = self.assertJsonOk(d.get("gk", count=100))
        held = {j["group"] for j in got}
        self.assertEqual(len(held), 100)
        want = {f"g{i:03}": (0, 1, 1) if f"g{i:03}" in held else (0, 2, 0) for i in range(300)}
        want["late"] = (1, 0, 0)
        for limit in (7, 1000):
            self.assertEqual(groups_of(self, d, "gk", limit=limit), want, f"limit {limit}")
        # every group with something has a field of the group hash; the 200 whose jobs wait on
        # their ranges are on the round (a list of names), the 100 held ones are not (at their limit)
        fields = [k for k in d.namespace.redis_keys("*:gs:gk")]
        self.assertEqual(len(fields), 1)
        self.assertEqual(int(d.namespace.redis_cli("HLEN", fields[0])), 301)
        self.assertEqual(lists_disagree(d, "gk"), [])
        round_ = fields[0].replace(":gs:", ":gq:")
        self.assertEqual(sorted(d.namespace.redis_cli("LRANGE", round_, 0, -1).split()),
                         sorted(f"g{i:03}" for i in range(300) if f"g{i:03}" not in held))

    def test_ready_listing_shows_grouped_jobs_page_by_page(self):
        d = self.daemon(default_ttr=30000)
        self.assertJsonOk(put(d, "gj", {"groupConcurrency": 1}))
        plain = [self.push(d, "gj", i) for i in range(3)]
        grouped = [self.push(d, "gj", i, group=g) for i in range(3) for g in ("b", "a")]
        for limit in (1, 2, 4, 100):
            seen, after = [], None
            for _ in range(50):
                page = self.assertJsonOk(d.request("GET", "/topics/gj/jobs",
                                                   params={"state": "ready", "limit": limit, "after": after}))
                seen += [(j["id"], j["group"]) for j in page["jobs"]]
                after = page.get("next")
                if not after:
                    break
            self.assertEqual([i for i, _ in seen], plain + [x for x in grouped[1::2]] + [x for x in grouped[0::2]],
                             f"limit {limit}")  # the ready zset's, then group a's, then b's
            self.assertEqual([g for _, g in seen], [None] * 3 + ["a"] * 3 + ["b"] * 3)

    def test_restore_rebuilds_group_counts_from_the_jobs(self):
        d = self.daemon(default_ttr=30000)
        self.assertJsonOk(put(d, "gr", {"groupConcurrency": 1}))
        ids = [self.push(d, "gr", i, group="a") for i in range(3)]
        later = self.push(d, "gr", "later", group="a", delay=60000)
        self.assertEqual(self.get_one(d, "gr")["id"], ids[0])
        self.assertEqual(groups_of(self, d, "gr"), {"a": (1, 2, 1)})
        wait_until(lambda: d.namespace.query(f"SELECT state FROM message WHERE id = {ids[0]}") == [("reserved",)],
                   10, 0.05, "the reservation in MySQL")
        d.namespace.flush_redis()
        r = self.assertJsonOk(d.restore(expire=True), 200)
        self.assertTrue(r, r)
        # the reserved job lost its lease: ready again, its slot free; nothing counted twice
        self.assertEqual(groups_of(self, d, "gr"), {"a": (1, 3, 0)})
        # the topic's settings come back from MySQL (the twice-a-second repair, topics.h)
        wait_until(lambda: " g1 0 0 " in topic_value(d, "gr"), 5, 0.05, "the settings back in Redis")
        self.assertEqual(self.get_one(d, "gr", timeout=3)["id"], ids[0])
        self.assertNothing(d, "gr")
        # a second restore changes nothing
        self.assertJsonOk(d.restore(expire=True), 200)
        self.assertEqual(groups_of(self, d, "gr"), {"a": (1, 2, 1)})
        self.assertNothing(d, "gr")
        for j in ids:
            self.assertJsonOk(d.finish(j))
            if j != ids[-1]:
                self.assertEqual(self.get_one(d, "gr", timeout=3)["id"], ids[ids.index(j) + 1])
        self.assertJsonOk(d.delete(later))
        self.assertEqual(group_keys(d, "gr"), [])


class GroupsRollbackTest(CoreTestCase):
    def test_two_way_restore_after_a_rollback_frees_what_mysql_ended(self):
        redis = self.private_redis()
        d = self.start_daemon({"redis": {"address": redis.address, "db": 0}, "queue": {"default_ttr": 30000}})
        self.wait_healthy(d)
        self.assertJsonOk(put(d, "gw", {"groupConcurrency": 1}))
        a = [self.push(d, "gw", i, group="a") for i in range(2)]
        self.assertEqual(self.get_one(d, "gw")["id"], a[0])
        wait_until(lambda: journal_idle(d), 10, 0.05, "MySQL to have everything before the snapshot")
        redis.cli("SAVE")
        # after the snapshot: a[0] finished, a[1] delivered and finished, a new one pushed
        self.assertJsonOk(d.finish(a[0]))
        self.assertEqual(self.get_one(d, "gw")["id"], a[1])
        self.assertJsonOk(d.finish(a[1]))
        a.append(self.push(d, "gw", 2, group="a"))
        wait_until(lambda: journal_idle(d), 10, 0.05, "MySQL to have every change")
        # Redis comes back from the snapshot: a[0] reserved (its group's slot held), a[1] ready
        redis.kill()
        redis.start()
        self.wait_healthy(d)
        wait_until(lambda: d.push({"topic": "warm", "body": 1}).status == 200, 15, 0.1, "the workers reconnected")
        self.assertEqual(groups_of(self, d, "gw"), {"a": (0, 1, 1)})
        res = self.assertJsonOk(d.restore(expire=True, timeout=60))
        self.assertEqual((res["removed"], res["restored"]), (2, 1), res)
        # MySQL wins: both ended jobs leave, the slot a[0] held is free, the new job is there
        self.assertEqual(groups_of(self, d, "gw"), {"a": (0, 1, 0)})
        self.assertEqual(self.get_one(d, "gw", timeout=3)["id"], a[2])
        self.assertNothing(d, "gw")
        self.assertJsonOk(d.finish(a[2]))
        self.assertEqual(groups_of(self, d, "gw"), {})
