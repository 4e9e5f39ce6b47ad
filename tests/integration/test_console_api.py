"""The server side of the operator's console (docs/api.md): the embedded files under
/console/, a topic's jobs page by page (/topics/{topic}/jobs), per-topic running totals
(/throughput) and the fleet (/fleet). Black-box, against real Redis and MariaDB.

    make integration T=test_console_api
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
import unittest
import urllib.parse
from pathlib import Path

from core_common import CoreTestCase, RedisMonitor, now_ms
from harness import REPO_ROOT, Daemon, topic_shard, wait_until

CONSOLE = REPO_ROOT / "console"
SHARDS = 8


def same_shard(topic: str, n: int) -> list[str]:
    """n other topics on `topic`'s shard: their delayed and reserved jobs share its delay zset."""
    out, i = [], 0
    while len(out) < n:
        other = f"{topic}.neighbour{i}"
        if topic_shard(other) == topic_shard(topic):
            out.append(other)
        i += 1
    return out


class ConsoleFilesTest(CoreTestCase):
    """GET /console/: the files of console/, as built, with headers that keep the page to its
    own origin and let a browser revalidate cheaply."""

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon()
        cls.addClassCleanup(cls.d.close)
        cls.d.start()
        cls.d.wait_ready(15)

    def test_every_file_is_served_as_it_is_in_the_tree(self):
        files = sorted(p for p in CONSOLE.iterdir() if p.is_file())
        self.assertTrue(any(p.name == "index.html" for p in files))
        types = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
        for p in files:
            r = self.d.request("GET", f"/console/{p.name}")
            self.assertStatus(r, 200, p.name)
            self.assertEqual(r.body, p.read_bytes(), f"{p.name} differs from the tree (rebuild?)")
            self.assertTrue((r.header("Content-Type") or "").startswith(types[p.suffix]), r.header("Content-Type"))
            self.assertEqual(r.header("ETag"), '"' + hashlib.sha1(p.read_bytes()).hexdigest()[:20] + '"')
        index = self.d.request("GET", "/console/")
        self.assertStatus(index, 200)
        self.assertEqual(index.body, (CONSOLE / "index.html").read_bytes())

    def test_headers_keep_the_page_to_its_origin(self):
        r = self.d.request("GET", "/console/")
        csp = r.header("Content-Security-Policy") or ""
        directives = dict((d.strip().split(" ", 1) + [""])[:2] for d in csp.split(";") if d.strip())
        self.assertEqual(directives.get("default-src"), "'none'", csp)
        for name in ("script-src", "style-src", "connect-src"):
            self.assertEqual(directives.get(name), "'self'", csp)
        self.assertNotIn("unsafe-inline", csp)
        self.assertNotRegex(csp, r"https?:|\*", "no other origin is allowed")
        self.assertEqual(r.header("X-Content-Type-Options"), "nosniff")
        self.assertEqual(r.header("Cache-Control"), "no-cache")
        self.assertEqual(r.header("X-Frame-Options"), "DENY")

    def test_nothing_is_loaded_from_elsewhere(self):
        """Works offline: no script, style, font or image from another origin."""
        html = (CONSOLE / "index.html").read_text()
        for m in re.finditer(r'(?:src|href)="([^"]*)"', html):
            url = m.group(1)
            self.assertFalse(re.match(r"(?i)(https?:)?//", url), f"index.html loads {url}")
        css = (CONSOLE / "console.css").read_text()
        self.assertNotIn("@import", css)
        self.assertNotRegex(css, r"url\(", "console.css loads nothing")
        js = (CONSOLE / "console.js").read_text()
        # the one absolute URL is SVG's namespace name, which is never fetched
        self.assertEqual(set(re.findall(r"https?://[^'\"\s]*", js)), {"http://www.w3.org/2000/svg"})
        self.assertNotRegex(js, r"\b(eval|innerHTML|document\.write)\b", "the page builds its DOM node by node")

    def test_revalidation_answers_304(self):
        r = self.d.request("GET", "/console/console.js")
        etag = r.header("ETag")
        again = self.d.request("GET", "/console/console.js", headers={"If-None-Match": etag})
        self.assertEqual(again.status, 304)
        self.assertEqual(again.body, b"")
        self.assertEqual(again.header("ETag"), etag)
        listed = self.d.request("GET", "/console/console.js", headers={"If-None-Match": f'"x", W/{etag}'})
        self.assertEqual(listed.status, 304, "a list, and a weak tag, match too")
        other = self.d.request("GET", "/console/console.js", headers={"If-None-Match": '"not-it"'})
        self.assertStatus(other, 200)

    def test_bare_path_redirects_and_unknown_files_are_404(self):
        r = self.d.request("GET", "/console")
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header("Location"), "/console/")
        self.assertError(self.d.request("GET", "/console/nope.js"), 404, "not_found")
        self.assertError(self.d.request("GET", "/console/%2e%2e%2fsql%2fschema.sql"), 404, "not_found")
        self.assertError(self.d.request("GET", "/console/a/b"), 404, "not_found")
        self.assertError(self.d.request("POST", "/console/"), 405, "method_not_allowed")
        head = self.d.request("HEAD", "/console/")
        self.assertEqual((head.status, head.body), (200, b""))


class ConsoleAccessTest(CoreTestCase):
    """The console follows the admin rules; a browser may give the token as HTTP Basic's
    password, since a page load cannot carry a Bearer header."""

    ADMIN = "adm#in;=/+token"

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(overrides={"http": {"admin_token": cls.ADMIN}})
        cls.addClassCleanup(cls.d.close)
        cls.d.start()
        cls.d.wait_ready(15)

    @staticmethod
    def basic(user: str, password: str) -> dict:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    def test_without_the_token_the_browser_is_asked_for_it(self):
        r = self.d.request("GET", "/console/")
        self.assertError(r, 401, "unauthorized")
        self.assertRegex(r.header("WWW-Authenticate") or "", r'^Basic realm="hourglass console"')
        wrong = self.d.request("GET", "/console/", headers=self.basic("op", "nope"))
        self.assertError(wrong, 401, "unauthorized")  # asked again, not 403
        self.assertIsNotNone(wrong.header("WWW-Authenticate"))
        self.assertError(self.d.request("GET", "/console/", headers={"Authorization": "Basic !!!"}), 401,
                         "unauthorized")

    def test_the_admin_token_opens_it_either_way(self):
        for headers in (self.basic("operator", self.ADMIN), self.basic("", self.ADMIN),
                        {"Authorization": f"Bearer {self.ADMIN}"}):
            self.assertStatus(self.d.request("GET", "/console/", headers=headers), 200, str(headers))

    def test_basic_is_for_the_console_only(self):
        """Elsewhere the token is a Bearer token, as the contract says."""
        r = self.d.request("GET", "/dead/t", headers=self.basic("operator", self.ADMIN))
        self.assertError(r, 401, "unauthorized")
        self.assertIsNone(r.header("WWW-Authenticate"))
        self.assertError(self.d.request("GET", "/topics/t/jobs", params={"state": "ready"},
                                        headers=self.basic("operator", self.ADMIN)), 401, "unauthorized")

class AdminRulesTest(CoreTestCase):
    """Listing a topic's jobs (their bodies) is an admin endpoint, as /dead is; /fleet and
    /throughput are read like /stats."""

    ADMIN = "adm#in;=/+token"

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(overrides={"http": {"admin_token": cls.ADMIN}})
        cls.addClassCleanup(cls.d.close)
        cls.d.start()
        cls.d.wait_ready(15)

    def test_listing_jobs_is_an_admin_endpoint(self):
        self.assertError(self.d.request("GET", "/topics/t/jobs", params={"state": "ready"}), 401, "unauthorized")
        self.assertError(self.d.request("GET", "/topics/t/jobs", params={"state": "ready"},
                                        headers={"Authorization": "Bearer nope"}), 403, "forbidden")
        r = self.d.request("GET", "/topics/t/jobs", params={"state": "ready"},
                           headers={"Authorization": f"Bearer {self.ADMIN}"})
        self.assertEqual(self.assertJsonOk(r), {"topic": "t", "state": "ready", "jobs": [], "scanned": 0})
        # /fleet and /throughput are read like /stats: no admin token needed
        self.assertStatus(self.d.request("GET", "/fleet"), 200)
        self.assertStatus(self.d.request("GET", "/throughput", params={"topics": "t"}), 200)


class TopicJobsTest(CoreTestCase):
    """GET /topics/{topic}/jobs?state=: every job of the state exactly once over the pages, in
    the order the state keeps them, whatever else shares the shard."""

    def page_all(self, d: Daemon, topic: str, state: str, limit: int, scan: int | None = None,
                 between=None) -> tuple[list[dict], int]:
        """Follow `next` to the end; (jobs in order, calls made)."""
        jobs, after, calls = [], None, 0
        while True:
            r = d.request("GET", f"/topics/{urllib.parse.quote(topic)}/jobs",
                          params={"state": state, "limit": limit, "scan": scan, "after": after})
            page = self.assertJsonOk(r)
            calls += 1
            self.assertEqual((page["topic"], page["state"]), (topic, state))
            self.assertLessEqual(len(page["jobs"]), limit)
            if scan:
                self.assertLessEqual(page["scanned"], scan)
            jobs += page["jobs"]
            after = page.get("next")
            if after is None:
                return jobs, calls
            self.assertRegex(after, r"^\d+:\d+$")
            if between:
                between(page)
            self.assertLess(calls, 1000, "the pages never end")

    def test_delayed_pages_cover_every_job_once_next_due_first(self):
        d = self.daemon()
        topic = "pages.delayed"
        base = now_ms() + 1_200_000  # within [queue] horizon: in the shard's delay zset
        # 60 jobs of ours, due times out of push order and some equal (ties are ordered by id)
        ours = self.assertJsonOk(d.push([{"topic": topic, "body": i, "runAt": base + (i * 37) % 20 * 1000}
                                         for i in range(60)]))["ids"]
        # 300 jobs of other topics in the same delay zset, due before, among and after ours
        for t in same_shard(topic, 3):
            self.assertJsonOk(d.push([{"topic": t, "runAt": base - 5000 + k * 100} for k in range(100)]))
        # and reserved jobs of our own topic there too (the delay zset holds leases)
        self.assertJsonOk(d.push([{"topic": topic, "body": "r", "ttr": 3_600_000} for _ in range(5)]))
        self.assertEqual(len(self.assertJsonOk(d.get(topic, count=5))), 5)

        jobs, calls = self.page_all(d, topic, "delayed", limit=7, scan=25)
        self.assertEqual(sorted(j["id"] for j in jobs), sorted(ours), "each delayed job once, nothing else")
        self.assertEqual(len(jobs), len(set(j["id"] for j in jobs)))
        order = [(j["runAt"], int(j["id"])) for j in jobs]
        self.assertEqual(order, sorted(order), "next due first")
        self.assertGreater(calls, 60 // 7, "the scan bound made the pages short")
        for j in jobs:
            self.assertEqual((j["topic"], j["state"]), (topic, "delayed"))
            self.assertEqual(j["body"], ours.index(j["id"]))
        # one call without a small scan bound sees them all
        page = self.assertJsonOk(d.request("GET", f"/topics/{topic}/jobs", params={"state": "delayed", "limit": 1000}))
        self.assertEqual([j["id"] for j in page["jobs"]], [j["id"] for j in jobs])
        self.assertNotIn("next", page)

    def test_a_page_may_be_empty_with_a_next(self):
        d = self.daemon()
        topic = "pages.sparse"
        due = now_ms() + 1_200_000  # within [queue] horizon
        (other,) = same_shard(topic, 1)
        self.assertJsonOk(d.push([{"topic": other, "runAt": due} for _ in range(50)]))
        mine = self.push(d, topic, "late one", runAt=due + 60_000)
        page = self.assertJsonOk(d.request("GET", f"/topics/{topic}/jobs",
                                           params={"state": "delayed", "scan": 20}))
        self.assertEqual((page["jobs"], page["scanned"]), ([], 20))
        self.assertIn("next", page)
        jobs, _ = self.page_all(d, topic, "delayed", limit=10, scan=20)
        self.assertEqual([j["id"] for j in jobs], [mine])

    def test_ready_pages_in_delivery_order(self):
        d = self.daemon()
        topic = "pages.ready"
        ids = self.assertJsonOk(d.push([{"topic": topic, "body": i, "priority": (i * 7) % 10} for i in range(45)]))["ids"]
        jobs, _ = self.page_all(d, topic, "ready", limit=10)
        self.assertEqual(sorted(j["id"] for j in jobs), sorted(ids))
        order = [(j["priority"], j["runAt"], int(j["id"])) for j in jobs]
        self.assertEqual(order, sorted(order), "most urgent first, then earliest due")
        # what GET /get hands out next is the head of the list
        first = self.get_one(d, topic)
        self.assertEqual(first["id"], jobs[0]["id"])

    def test_reserved_pages_show_the_lease(self):
        d = self.daemon()
        topic = "pages.reserved"
        self.assertJsonOk(d.push([{"topic": topic, "body": i, "ttr": 600_000 + i * 1000} for i in range(12)]))
        taken = self.assertJsonOk(d.get(topic, count=12))
        jobs, _ = self.page_all(d, topic, "reserved", limit=5)
        self.assertEqual(sorted(j["id"] for j in jobs), sorted(j["id"] for j in taken))
        lease = {j["id"]: j["leaseUntil"] for j in taken}
        for j in jobs:
            self.assertEqual(j["leaseUntil"], lease[j["id"]])
            self.assertEqual(j["attempt"], 1)
        self.assertEqual([j["leaseUntil"] for j in jobs], sorted(lease.values()), "the lease ending first, first")

    def test_dead_pages_oldest_death_first(self):
        d = self.daemon()
        topic = "pages.dead"
        ids = self.assertJsonOk(d.push([{"topic": topic, "body": i, "tries": 1, "ttr": 100, "bizKey": f"k{i}"}
                                        for i in range(6)]))["ids"]
        got = 0
        while got < 6:
            got += len(self.assertJsonOk(d.get(topic, count=6, timeout=2)))
        self.wait_counts(d, topic, dead=6)
        jobs, _ = self.page_all(d, topic, "dead", limit=4)
        self.assertEqual(sorted(j["id"] for j in jobs), sorted(ids))
        self.assertEqual([j["diedAt"] for j in jobs], sorted(j["diedAt"] for j in jobs))
        self.assertEqual({j["bizKey"] for j in jobs}, {f"k{i}" for i in range(6)})
        self.assertEqual([j["id"] for j in jobs], [j["id"] for j in self.assertJsonOk(d.dead(topic))["jobs"]],
                         "the same order as /dead")

    def test_jobs_that_leave_between_pages_are_not_listed_twice_or_skipped(self):
        """A position is an entry, not an offset: removing listed jobs (even the one `next`
        names) or unlisted ones between two calls neither repeats nor skips the others."""
        d = self.daemon()
        topic = "pages.moving"
        base = now_ms() + 1_200_000  # within [queue] horizon
        ids = self.assertJsonOk(d.push([{"topic": topic, "body": i, "runAt": base + i} for i in range(40)]))["ids"]
        seen: list[str] = []
        deleted: set[str] = set()

        def between(page: dict) -> None:
            seen.extend(j["id"] for j in page["jobs"])
            cursor_id = page["next"].split(":")[1]
            unlisted = [i for i in ids if i not in seen and i not in deleted]
            for victim in ([cursor_id] if cursor_id not in deleted else []) + unlisted[-1:]:
                self.assertJsonOk(d.delete(victim))
                deleted.add(victim)

        jobs, _ = self.page_all(d, topic, "delayed", limit=6, between=between)
        listed = [j["id"] for j in jobs]
        self.assertEqual(len(listed), len(set(listed)), "no job twice")
        stayed = [i for i in ids if i not in deleted]
        self.assertEqual(set(stayed) - set(listed), set(), "every job that stayed was listed")
        self.assertEqual(set(listed) - set(ids), set())
        self.assertGreater(len(deleted), 5)

    def test_bad_input_is_400(self):
        d = self.daemon()
        path = "/topics/t/jobs"
        cases = [
            ({}, "no state"),
            ({"state": "finished"}, "a state that is not listed"),
            ({"state": "READY"}, "state names are lower case"),
            ({"state": "ready", "after": "x"}, "after without a colon"),
            ({"state": "ready", "after": "12:"}, "after without an id"),
            ({"state": "ready", "after": ":12"}, "after without a score"),
            ({"state": "ready", "after": "1a:12"}, "a score that is not a number"),
            ({"state": "ready", "after": "12345678901234567:12"}, "a score too long"),
            ({"state": "ready", "after": "12:abc"}, "an id that is not a number"),
            ({"state": "ready", "after": "12:0"}, "id 0"),
            ({"state": "ready", "after": "12:99999999999999999999"}, "an id past 2^64"),
            ({"state": "ready", "limit": 0}, "limit 0"),
            ({"state": "ready", "limit": 1001}, "limit over 1000"),
            ({"state": "ready", "limit": "ten"}, "limit not a number"),
            ({"state": "ready", "scan": 0}, "scan 0"),
            ({"state": "ready", "scan": 10001}, "scan over 10000"),
            ({"state": "ready", "page": 2}, "an unknown parameter"),
        ]
        for params, what in cases:
            self.assertError(d.request("GET", path, params=params), 400, "bad_request", what)
        for topic, what in [("a%20b", "a space"), ("x" * 129, "129 characters"), ("%C3%A9", "not ASCII")]:
            self.assertError(d.request("GET", f"/topics/{topic}/jobs", params={"state": "ready"}), 400,
                             "bad_request", what)
        self.assertError(d.request("GET", "/topics/a%zz/jobs"), 400, "bad_request", "a bad escape")
        self.assertError(d.request("POST", path, params={"state": "ready"}), 405, "method_not_allowed")
        self.assertError(d.request("GET", "/topics/a/b/jobs"), 404, "not_found")


class ThroughputTest(CoreTestCase):
    """GET /throughput?topics=: running totals per topic, kept by the scripts in Redis."""

    def tallies(self, d: Daemon, *topics: str) -> dict:
        r = d.request("GET", "/throughput", params={"topics": ",".join(topics)})
        obj = self.assertJsonOk(r)
        self.assertLessEqual(abs(obj["at"] - now_ms()), 5000)
        self.assertEqual(list(obj["topics"]), list(topics))
        return obj["topics"]

    def test_pushes_and_deliveries_are_counted(self):
        d = self.daemon()
        self.push(d, "tp.a", 1)
        self.assertJsonOk(d.push([{"topic": "tp.a", "body": i} for i in range(4)] + [{"topic": "tp.b", "delay": 60000}]))
        self.push(d, "tp.a", "keyed", bizKey="k")
        dup = self.assertJsonOk(d.push({"topic": "tp.a", "bizKey": "k"}))
        self.assertTrue(dup.get("duplicate"))
        zero = {"pushed": 0, "delivered": 0, "firstDelivered": 0, "latenessMsSum": 0}
        t = self.tallies(d, "tp.a", "tp.b", "tp.none")
        self.assertEqual(t["tp.a"], {**zero, "pushed": 6}, "a duplicate is no new job")
        self.assertEqual(t["tp.b"], {**zero, "pushed": 1})
        self.assertEqual(t["tp.none"], zero)

        first = self.assertJsonOk(d.get("tp.a", count=3))
        self.assertJsonOk(d.release(first[0]["id"]))
        rest = self.assertJsonOk(d.get("tp.a", count=10))
        self.assertEqual(sorted(j["attempt"] for j in rest), [1, 1, 1, 2], "three first deliveries and a redelivery")
        t = self.tallies(d, "tp.a")["tp.a"]
        self.assertEqual((t["pushed"], t["delivered"], t["firstDelivered"]), (6, 7, 6))
        self.assertGreaterEqual(t["latenessMsSum"], 0)

    def test_lateness_is_summed_over_first_deliveries(self):
        d = self.daemon()
        self.push(d, "tp.late", "x")
        time.sleep(0.5)  # due, not taken: half a second late at least
        self.get_one(d, "tp.late")
        t = self.tallies(d, "tp.late")["tp.late"]
        self.assertEqual(t["firstDelivered"], 1)
        self.assertGreaterEqual(t["latenessMsSum"], 500)

    def test_bad_input_is_400(self):
        d = self.daemon()
        for params, what in [({}, "no topics"), ({"topics": ""}, "empty"), ({"topics": "a,,b"}, "an empty name"),
                             ({"topics": "a b"}, "a space"), ({"topics": "a,"}, "a trailing comma"),
                             ({"topics": ",".join(f"t{i}" for i in range(1001))}, "1001 topics"),
                             ({"topics": "a", "x": "1"}, "an unknown parameter")]:
            self.assertError(d.request("GET", "/throughput", params=params), 400, "bad_request", what)
        self.assertEqual(len(self.tallies(d, *[f"t{i}" for i in range(1000)])), 1000)


class FleetTest(CoreTestCase):
    """GET /fleet: this instance's health and journal, and every instance's heartbeat."""

    def test_instances_with_their_totals_and_lateness(self):
        ns = self.namespace()
        a = self.start_daemon(namespace=ns)
        b = self.start_daemon(namespace=ns)
        self.wait_healthy(a)
        self.wait_healthy(b)
        ids = self.assertJsonOk(a.push([{"topic": "fleet.t", "body": i} for i in range(5)]))["ids"]
        self.assertEqual(len(self.assertJsonOk(b.get("fleet.t", count=5))), 5)

        def both() -> dict | None:
            f = self.assertJsonOk(a.request("GET", "/fleet"))
            inst = {i["instance"]: i for i in f["fleet"]["instances"]}
            settled = sum(i["ownedShards"] for i in inst.values()) == SHARDS  # each starts owning all
            return f if len(inst) == 2 and settled and sum(i["delivered"] for i in inst.values()) == 5 else None
        f = wait_until(both, 10, 0.2, "both heartbeats, with the five deliveries and the shards shared")
        self.assertEqual(f["health"]["status"], "ok")
        self.assertEqual((f["health"]["redis"], f["health"]["mysql"]), ("up", "up"))
        self.assertEqual(f["shards"], SHARDS)
        self.assertIn("backlog", f["journal"])
        bounds = f["latenessBounds"]
        self.assertEqual(bounds, sorted(bounds))
        by = {i["instance"]: i for i in f["fleet"]["instances"]}
        for i in by.values():
            self.assertEqual(len(i["lateness"]), len(bounds) + 1)
            self.assertLessEqual(abs(i["at"] - now_ms()), 5000)
        self.assertEqual(sum(sum(i["lateness"]) for i in by.values()), 5, "each first delivery in the histogram")
        self.assertEqual(sum(i["pushed"] for i in by.values()), len(ids))
        self.assertError(a.request("GET", "/fleet", params={"x": 1}), 400, "bad_request")

    def test_cost_does_not_grow_with_topics(self):
        """/fleet reads the heartbeats and the outbox lengths, never the per-topic counters that
        /stats walks; /throughput reads the topics it is asked for, one HMGET each."""
        ns = self.namespace()
        d = self.start_daemon(namespace=ns)
        self.wait_healthy(d)
        self.assertJsonOk(d.push([{"topic": f"many.{i}", "delay": 600000} for i in range(300)]))
        with RedisMonitor(ns.redis.port) as mon:
            self.assertJsonOk(d.request("GET", "/fleet"))
            self.assertJsonOk(d.request("GET", "/throughput", params={"topics": "many.1,many.2,many.3"}))
        mine = [line for line in mon.lines if ns.prefix in line]
        self.assertEqual([line for line in mine if '"HGETALL"' in line.upper() or ":count" in line], [],
                         "nothing read the per-topic counters")
        self.assertEqual(len([line for line in mine if '"hmget"' in line.lower()]), 3, mine)


if __name__ == "__main__":
    unittest.main()
