"""/stats with 50,000 topics: counts merge in O(topics) (a hash map, not a scan of what was
merged so far), the topics come in name order one page at a time (?limit=, ?after=, ?prefix=)
with totals over all of them, and the worker answering it keeps serving other requests."""

from __future__ import annotations

import threading
import urllib.parse

from core_common import CoreTestCase

TOPICS = 50_000


class StatsScaleTest(CoreTestCase):
    def stats(self, d, **params) -> dict:
        path = "/stats" + ("?" + urllib.parse.urlencode(params) if params else "")
        return self.assertJsonOk(d.request("GET", path, timeout=30))

    def test_fifty_thousand_topics(self):
        d = self.start_daemon({"http": {"threads": 1}})
        self.wait_healthy(d)
        names = [f"s{i:05d}" for i in range(TOPICS)]
        for start in range(0, TOPICS, 1000):
            jobs = [{"topic": t, "body": 1, "delay": 600000} for t in names[start:start + 1000]]
            self.assertJsonOk(d.push(jobs, timeout=30))

        whole = self.stats(d, limit=0)
        self.assertEqual(whole["topicCount"], TOPICS)
        self.assertEqual(whole["totals"]["delayed"], TOPICS)
        self.assertEqual(whole["topics"], {})
        self.assertNotIn("next", whole)

        # every topic once, in name order, a page at a time
        seen: list[str] = []
        after = None
        while True:
            params = {"limit": 10000, **({"after": after} if after else {})}
            page = self.stats(d, **params)
            self.assertEqual(page["totals"]["delayed"], TOPICS, "totals cover every topic on every page")
            seen.extend(page["topics"])
            self.assertTrue(all(c == {"delayed": 1, "ready": 0, "reserved": 0, "dead": 0, "far": 0}
                                for c in page["topics"].values()))
            if "next" not in page:
                break
            self.assertEqual(page["next"], list(page["topics"])[-1])
            after = page["next"]
        self.assertEqual(seen, names)

        # the default page, and a prefix
        self.assertEqual(len(self.stats(d)["topics"]), 1000)
        self.assertEqual(list(self.stats(d, prefix="s0001")["topics"]), [f"s0001{i}" for i in range(10)])
        self.assertEqual(list(self.stats(d, prefix="s4999", after="s49995")["topics"]),
                         ["s49996", "s49997", "s49998", "s49999"])

        # bad input: a clear 400
        for params in ({"prefix": "a b"}, {"after": "x" * 129}, {"limit": 10001}, {"limit": -1}, {"page": 2}):
            r = d.request("GET", "/stats?" + urllib.parse.urlencode(params))
            self.assertError(r, 400, "bad_request", f"/stats {params}")

        # the one worker keeps serving pushes while it answers /stats over and over
        stop = threading.Event()
        answered = []

        def hammer() -> None:
            while not stop.is_set():
                answered.append(d.request("GET", "/stats?limit=10000", timeout=30).status)

        t = threading.Thread(target=hammer, daemon=True)
        t.start()
        try:
            for i in range(30):
                self.assertJsonOk(d.push({"topic": "beside", "body": i}, timeout=10))
        finally:
            stop.set()
            t.join(60)
        self.assertTrue(answered and all(s == 200 for s in answered), answered[:5])
        self.assertCounts(d, "beside", ready=30)
