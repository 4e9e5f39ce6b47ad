"""Lookup by business key and purge of a topic (issue 18; shared/contract.md "Schedules, purge,
lookup by business key"; docs/api.md).

Real Redis and MariaDB (the harness's shared stack), one hourglassd per class:
* LookupTest: GET /jobs?topic=&bizKey= for a near job, a far job, a finished one (the latest),
  a duplicate push (the holder stays the answer), a replaced job, a deleted one; 404s and 400s.
* PurgeStatesTest: POST /topics/{topic}/purge by each state; reserved jobs untouched; far jobs
  purged; bizKeys released; /stats counts; the journal's message rows end 'deleted'; bad input.
* PurgeFarRaceTest: far jobs that are about to be paged in, purged; none is ever delivered.
* PurgeBigTest: 30,000 jobs purged while other topics push and deliver beside it (a purge now
  yields to live traffic: ~1,000 jobs/s on an idle machine, slower beside load; purge.c pace).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from typing import Any

from core_common import CoreTestCase
from harness import HOST, Daemon, journal_idle, now_ms, topic_shard, wait_until

DAY = 86_400_000


def start_ready_class(cls, overrides: dict) -> Daemon:
    """A daemon for a whole class (stopped by the class cleanups), ready for pushes."""
    d = Daemon(overrides=overrides)
    cls.addClassCleanup(d.close)
    d.start()
    d.wait_ready(30)
    return d


class Case(CoreTestCase):
    d: Daemon

    def lookup(self, topic: Any, biz: Any, **extra: Any):
        params = {"topic": topic, "bizKey": biz, **extra}
        return self.d.request("GET", "/jobs", params=params)

    def lookup_ok(self, topic: str, biz: str) -> dict:
        return self.assertJsonOk(self.lookup(topic, biz))

    def purge(self, topic: str, state: Any, timeout: float = 60, **kw: Any):
        return self.d.request("POST", f"/topics/{urllib.parse.quote(topic, safe='')}/purge",
                              params={"state": state, **kw}, timeout=timeout)

    def purged(self, topic: str, state: str, timeout: float = 60) -> int:
        obj = self.assertJsonOk(self.purge(topic, state, timeout))
        self.assertEqual(set(obj), {"deleted"}, obj)
        return obj["deleted"]

    def wait_journal(self, timeout: float = 60) -> None:
        wait_until(lambda: journal_idle(self.d), timeout, 0.1, "the journal to be idle")

    def sql(self, q: str) -> list:
        return self.d.namespace.query(q)

    def row_states(self, ids: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for first in range(0, len(ids), 5000):
            part = ",".join(ids[first:first + 5000])
            for state, n in self.sql(f"SELECT state, COUNT(*) FROM message WHERE id IN ({part}) GROUP BY state"):
                out[state] = out.get(state, 0) + int(n)
        return out

    def push_many(self, topic: str, n: int, **fields: Any) -> list[str]:
        ids: list[str] = []
        for first in range(0, n, 1000):
            jobs = [{"topic": topic, "body": {"i": first + i}, **fields} for i in range(min(1000, n - first))]
            obj = self.assertJsonOk(self.d.push(jobs, timeout=60))
            ids += obj["ids"]
        return ids

    def make_dead(self, topic: str, n: int) -> list[str]:
        ids = [self.push(self.d, topic, {"dead": i}, tries=1, ttr=100) for i in range(n)]
        for _ in ids:
            self.get_one(self.d, topic)
        wait_until(lambda: self.counts(self.d, topic)["dead"] == n, 10, 0.05, f"{n} dead jobs on {topic}")
        return ids


# --------------------------------------------------------------------------- lookup

class LookupTest(Case):
    HORIZON = 60_000

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.d = start_ready_class(cls, {"queue": {"horizon": cls.HORIZON}})

    def test_near_job(self) -> None:
        id = self.push(self.d, "lk.near", {"a": 1}, bizKey="order-1", delay=30_000)
        got = self.lookup_ok("lk.near", "order-1")
        byid = self.inspect(self.d, id)
        self.assertEqual(got["id"], id)
        self.assertEqual(got["state"], "delayed")
        self.assertEqual(got["bizKey"], "order-1")
        self.assertNotIn("tier", got)
        self.assertEqual({k: v for k, v in got.items() if k != "history"},
                         {k: v for k, v in byid.items() if k != "history"})

    def test_far_job(self) -> None:
        id = self.push(self.d, "lk.far", {"far": True}, bizKey="k-far", delay=DAY)
        self.assertEqual(self.sql(f"SELECT state FROM message WHERE id = {id}"), [("far",)])
        got = self.lookup_ok("lk.far", "k-far")
        self.assertEqual(got["id"], id)
        self.assertEqual(got["state"], "delayed")
        self.assertEqual(got["tier"], "mysql")
        self.assertEqual(got["body"], {"far": True})

    def test_finished_job_is_the_latest(self) -> None:
        first = self.push(self.d, "lk.fin", "one", bizKey="k1")
        job = self.get_one(self.d, "lk.fin")
        self.assertEqual(job["id"], first)
        self.assertJsonOk(self.d.finish(first))
        got = self.lookup_ok("lk.fin", "k1")
        self.assertEqual((got["id"], got["state"]), (first, "finished"))
        # a new job with the key: live, so it is the answer; finished too, still the latest
        second = self.push(self.d, "lk.fin", "two", bizKey="k1")
        self.assertNotEqual(second, first)
        self.assertEqual(self.lookup_ok("lk.fin", "k1")["id"], second)
        self.assertEqual(self.get_one(self.d, "lk.fin")["id"], second)
        self.assertJsonOk(self.d.finish(second))
        got = self.lookup_ok("lk.fin", "k1")
        self.assertEqual((got["id"], got["state"], got["body"]), (second, "finished", "two"))

    def test_duplicate_push_keeps_the_holder(self) -> None:
        holder = self.push(self.d, "lk.dup", "h", bizKey="k")
        dup = self.assertJsonOk(self.d.push({"topic": "lk.dup", "body": "d", "bizKey": "k"}))
        self.assertEqual((dup["id"], dup.get("duplicate")), (holder, True))
        self.get_one(self.d, "lk.dup")
        self.assertJsonOk(self.d.finish(holder))
        self.wait_journal()
        # the duplicate's row (aborted) is newer, but it never was a job
        got = self.lookup_ok("lk.dup", "k")
        self.assertEqual((got["id"], got["state"]), (holder, "finished"))

    def test_replaced_job(self) -> None:
        id = self.push(self.d, "lk.rep", {"v": 1}, bizKey="k", delay=20_000)
        r = self.assertJsonOk(self.d.push({"topic": "lk.rep", "body": {"v": 2}, "bizKey": "k", "replace": True,
                                           "delay": 25_000}))
        self.assertEqual((r["id"], r.get("replaced")), (id, True))
        got = self.lookup_ok("lk.rep", "k")
        self.assertEqual((got["id"], got["body"]), (id, {"v": 2}))
        # a far holder replaced by a near push: the new job takes the key
        far = self.push(self.d, "lk.rep", "far", bizKey="kf", delay=DAY)
        r = self.assertJsonOk(self.d.push({"topic": "lk.rep", "body": "near", "bizKey": "kf", "replace": True}))
        self.assertEqual(r.get("replaced"), True, r)
        self.assertNotEqual(r["id"], far)
        got = self.lookup_ok("lk.rep", "kf")
        self.assertEqual((got["id"], got["body"], got["state"]), (r["id"], "near", "ready"))

    def test_deleted_job(self) -> None:
        id = self.push(self.d, "lk.del", "x", bizKey="gone", delay=10_000)
        self.assertJsonOk(self.d.delete(id))
        got = self.lookup_ok("lk.del", "gone")
        self.assertEqual((got["id"], got["state"]), (id, "deleted"))

    def test_not_found(self) -> None:
        self.push(self.d, "lk.nf", "x", bizKey="present")
        self.assertError(self.lookup("lk.nf", "absent"), 404, "not_found")
        self.assertError(self.lookup("lk.nf.other", "present"), 404, "not_found")

    def test_bad_input(self) -> None:
        cases = {
            "no topic": self.d.request("GET", "/jobs", params={"bizKey": "k"}),
            "no bizKey": self.d.request("GET", "/jobs", params={"topic": "t"}),
            "no params": self.d.request("GET", "/jobs"),
            "empty topic": self.lookup("", "k"),
            "empty bizKey": self.lookup("t", ""),
            "topic too long": self.lookup("t" * 129, "k"),
            "bad topic": self.lookup("a b", "k"),
            "bizKey too long": self.lookup("t", "k" * 129),
            "control char": self.lookup("t", "a\x01b"),
            "unknown param": self.lookup("t", "k", id="1"),
        }
        for what, r in cases.items():
            self.assertError(r, 400, "bad_request", what)
        self.assertError(self.d.request("POST", "/jobs", params={"topic": "t", "bizKey": "k"}), 405,
                         "method_not_allowed")
        # the longest of each is fine (128 code points of bizKey, multi-byte ones included)
        self.assertError(self.lookup("t" * 128, "é" * 128), 404, "not_found")


# --------------------------------------------------------------------------- purge, state by state

class PurgeStatesTest(Case):
    HORIZON = 60_000

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.d = start_ready_class(cls, {"queue": {"horizon": cls.HORIZON}})

    def test_each_state_and_reserved_untouched(self) -> None:
        t = "pg.states"
        delayed = self.push_many(t, 30, delay=40_000)
        far = self.push_many(t, 20, delay=DAY)
        biz_far = self.push(self.d, t, "bf", bizKey="bf", delay=DAY)
        biz_near = self.push(self.d, t, "bn", bizKey="bn", delay=40_000)
        dead = self.make_dead(t, 3)
        reserved = [self.push(self.d, t, {"r": i}, ttr=120_000) for i in range(2)]
        for _ in reserved:
            self.get_one(self.d, t)
        ready = self.push_many(t, 25)
        other = self.push_many("pg.states.other", 10, delay=40_000) + self.push_many("pg.states.other", 5)
        # far jobs of a topic on the same shard: the purge walks the shard's far keys and must
        # leave every other topic's
        neighbour = next(f"pg.states.n{i}" for i in range(100)
                         if topic_shard(f"pg.states.n{i}") == topic_shard(t))
        neighbour_far = self.push_many(neighbour, 5, delay=DAY)
        self.wait_counts(self.d, t, delayed=52, ready=25, reserved=2, dead=3)  # far jobs count as delayed

        self.assertEqual(self.purged(t, "ready"), 25)
        self.assertCounts(self.d, t, delayed=52, reserved=2, dead=3)
        self.assertEqual(self.purged(t, "dead"), 3)
        self.assertCounts(self.d, t, delayed=52, reserved=2)
        self.assertEqual(self.purged(t, "delayed"), 52)
        # /stats' far part is read from far_count twice a second (as after a by-id far delete)
        self.wait_counts(self.d, t, timeout=2, reserved=2)
        self.assertEqual(self.purged(t, "all"), 0)
        self.assertCounts(self.d, t, reserved=2)

        # reserved jobs: still theirs, and they finish
        for id in reserved:
            self.assertEqual(self.state(self.d, id), "reserved")
            self.assertJsonOk(self.d.finish(id))
        # the far tier is empty for the topic
        far_ids = ",".join(far + [biz_far])
        self.assertEqual(self.sql(f"SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL AND id IN ({far_ids})"), [("0",)])
        self.assertEqual(self.sql(f"SELECT COUNT(*) FROM far_biz WHERE id = {biz_far}"), [("0",)])
        self.assertEqual(self.sql(f"SELECT COALESCE(SUM(jobs), 0) FROM far_count WHERE topic = '{t}'"), [("0",)])
        # bizKeys released: the same keys make new jobs
        for key, delay in (("bf", DAY), ("bn", 40_000)):
            r = self.assertJsonOk(self.d.push({"topic": t, "body": key, "bizKey": key, "delay": delay}))
            self.assertNotIn("duplicate", r)
            self.assertNotIn(r["id"], (biz_far, biz_near))
        # the journal: every purged job's row is deleted, with its transition
        self.wait_journal()
        purged = delayed + far + [biz_far, biz_near] + dead + ready
        self.assertEqual(self.row_states(purged), {"deleted": len(purged)})
        n = self.sql(f"SELECT COUNT(DISTINCT message_id) FROM transition WHERE to_state = 'deleted' AND "
                     f"message_id IN ({','.join(purged)})")
        self.assertEqual(n, [(str(len(purged)),)])
        for id in far[:3] + delayed[:3]:
            hist = self.inspect(self.d, id)["history"]
            self.assertEqual(hist[-1]["state"], "deleted", hist)
            self.assertIn("purge", hist[-1]["by"], hist)
        # the other topics: untouched
        self.assertCounts(self.d, "pg.states.other", delayed=10, ready=5)
        self.assertEqual(self.row_states(other), {"delayed": 10, "ready": 5})
        self.assertCounts(self.d, neighbour, delayed=5)
        self.assertEqual(self.row_states(neighbour_far), {"far": 5})
        self.assertEqual(self.sql(f"SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL AND id IN "
                                  f"({','.join(neighbour_far)})"), [("5",)])

    def test_all(self) -> None:
        t = "pg.all"
        ids = self.make_dead(t, 2)  # first: it takes what is ready
        ids += self.push_many(t, 40, delay=30_000) + self.push_many(t, 10, delay=DAY) + self.push_many(t, 30)
        self.assertEqual(self.purged(t, "all"), 82)
        self.wait_counts(self.d, t, timeout=2)  # far_count is read twice a second
        self.assertNothing(self.d, t)
        self.wait_journal()
        self.assertEqual(self.row_states(ids), {"deleted": 82})

    def test_bad_input(self) -> None:
        for state in ("", "reserved", "finished", "ALL", "delayed,ready"):
            e = self.assertError(self.purge("pg.bad", state), 400, "bad_request", f"state={state!r}")
            self.assertIn("delayed, ready, dead, all", e["message"])
        self.assertError(self.d.request("POST", "/topics/pg.bad/purge"), 400, "bad_request", "no state")
        self.assertError(self.purge("pg.bad", "all", limit=5), 400, "bad_request", "unknown parameter")
        self.assertError(self.purge("a b", "all"), 400, "bad_request", "bad topic")
        self.assertError(self.purge("t" * 129, "all"), 400, "bad_request", "long topic")
        self.assertError(self.d.request("GET", "/topics/pg.bad/purge", params={"state": "all"}), 405,
                         "method_not_allowed")
        self.assertEqual(self.purged("pg.never.seen", "all"), 0)


# --------------------------------------------------------------------------- far jobs racing the pager

class PurgeFarRaceTest(Case):
    HORIZON = 3000          # lead 1.5 s, bucket 375 ms

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.d = start_ready_class(cls, {"queue": {"horizon": cls.HORIZON}, "http": {"max_body": 1 << 20}})

    def test_far_jobs_purged_are_never_delivered(self) -> None:
        t = "pg.farrace"
        base = now_ms()
        # due 3.2 - 6.7 s from now: far at push (beyond the 3 s horizon), paged in from ~1.3 s on
        # (lead 1.5 s, a bucket early): when the purge begins some are in Redis, most are not,
        # and the pager is at work on the next
        jobs = [{"topic": t, "body": i, "runAt": base + 3200 + i * 5} for i in range(700)]
        ids = self.assertJsonOk(self.d.push(jobs, timeout=60))["ids"]
        self.assertGreater(int(self.sql(f"SELECT COUNT(*) FROM message WHERE topic = '{t}' AND state = 'far'")[0][0]), 0)
        time.sleep(max(0, (base + 2400 - now_ms()) / 1000))
        still_far = int(self.sql(f"SELECT COUNT(*) FROM message WHERE topic = '{t}' AND state = 'far'")[0][0])
        print(f"\n{700 - still_far} of 700 jobs paged in when the purge began", flush=True)
        self.assertEqual(self.purged(t, "delayed"), 700)
        self.wait_counts(self.d, t, timeout=2)  # far_count is read twice a second
        # past every due time: nothing comes
        time.sleep(max(0, (base + 7700 - now_ms()) / 1000))
        self.assertNothing(self.d, t, timeout=1)
        self.assertCounts(self.d, t)
        self.wait_journal()
        self.assertEqual(self.row_states(ids), {"deleted": 700})
        self.assertEqual(self.sql(f"SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL AND id IN ({','.join(ids)})"), [("0",)])


# --------------------------------------------------------------------------- 100,000 jobs beside live traffic

class PurgeBigTest(Case):
    N = 30_000
    OTHERS = ["pg.big.o1", "pg.big.o2", "pg.big.o3"]

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.d = start_ready_class(cls, {"http": {"max_body": 1 << 20}})

    def test_purge_30k_beside_traffic(self) -> None:
        t = "pg.big"
        half = self.N // 2
        ids = self.push_many(t, half, delay=600_000) + self.push_many(t, self.N - half)
        self.wait_counts(self.d, t, delayed=half, ready=self.N - half, timeout=30)

        stop = threading.Event()
        errors: list[str] = []
        pushed: dict[str, list[str]] = {o: [] for o in self.OTHERS}
        got: dict[str, list[str]] = {o: [] for o in self.OTHERS}
        during: list[str] = []          # jobs of the purged topic pushed while it runs
        slowest = [0.0]

        def traffic(topic: str) -> None:
            conn = self.d.connection(timeout=30)
            try:
                while not stop.is_set():
                    t0 = time.monotonic()
                    conn.request("POST", "/push", body=json.dumps({"topic": topic, "body": "x"}),
                                 headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    body = r.read()
                    if r.status != 200:
                        errors.append(f"push {topic}: {r.status} {body[:200]!r}")
                        continue
                    pushed[topic].append(json.loads(body)["id"])
                    conn.request("GET", f"/get/{topic}?timeout=5")
                    r = conn.getresponse()
                    body = r.read()
                    if r.status != 200:
                        errors.append(f"get {topic}: {r.status} {body[:200]!r}")
                        continue
                    job = json.loads(body)
                    got[topic].append(job["id"])
                    conn.request("GET", f"/finish?id={job['id']}")
                    r = conn.getresponse()
                    r.read()
                    if r.status != 200:
                        errors.append(f"finish {topic}: {r.status}")
                    slowest[0] = max(slowest[0], time.monotonic() - t0)
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(f"{topic}: {e!r}")
            finally:
                conn.close()

        def push_purged_topic() -> None:
            while not stop.is_set():
                r = self.d.push({"topic": t, "body": "during"})
                if r.status == 200:
                    during.append(r.json()["id"])
                time.sleep(0.05)

        threads = [threading.Thread(target=traffic, args=(o,)) for o in self.OTHERS]
        threads.append(threading.Thread(target=push_purged_topic))
        for th in threads:
            th.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        try:
            deleted = self.purged(t, "all", timeout=300)
        finally:
            took = time.monotonic() - t0
            stop.set()
            for th in threads:
                th.join(30)
        print(f"\npurge of {self.N} jobs: {took:.1f} s; {sum(len(v) for v in got.values())} jobs of other "
              f"topics delivered meanwhile, slowest push+get+finish {slowest[0]:.2f} s", flush=True)
        self.assertEqual(errors, [])
        # every job pushed before the purge went, and only jobs pushed while it ran may have
        self.assertGreaterEqual(deleted, self.N)
        self.assertLessEqual(deleted, self.N + len(during))
        # the other topics lived on: every push delivered once, in full
        for o in self.OTHERS:
            self.assertGreater(len(got[o]), 0, o)
            self.assertEqual(got[o], pushed[o], o)
            self.assertCounts(self.d, o)
        # nothing of the purged topic is delivered after the answer but jobs pushed while it ran
        after = self.push(self.d, t, "after")
        delivered = []
        while True:
            r = self.d.get(t, timeout=0, count=100)
            if r.status == 204:
                break
            delivered += [j["id"] for j in self.assertJsonOk(r)]
        self.assertIn(after, delivered)
        self.assertEqual(set(delivered) - set(during) - {after}, set())
        self.assertEqual(set(delivered) & set(ids), set())
        # the journal: every purged row deleted, other topics' rows not
        self.wait_journal(120)
        self.assertEqual(self.row_states(ids), {"deleted": self.N})
        others = [i for o in self.OTHERS for i in pushed[o]]
        self.assertNotIn("deleted", self.row_states(others))
        self.assertCounts(self.d, t, reserved=len(delivered))


# --------------------------------------------------------------------------- retention

IDS_EPOCH_MS = 1704067200000  # src/core/ids.h


class LookupRetentionTest(Case):
    """Retention deletes the biz_latest rows of the messages it deletes: the table does not grow
    with every bizKey ever used, and a key whose latest job is gone is unknown (404), as that
    job's id is."""

    def test_retention_forgets_the_key_with_its_job(self) -> None:
        self.d = d = self.start_daemon({"mysql": {"retention_days": 1, "retention_interval": 1}})
        d.wait_ready(30)
        recent = self.push(d, "lk.ret", "new", bizKey="recent")
        made = now_ms() - 2 * DAY
        old = ((made - IDS_EPOCH_MS) << 22) | (1 << 12) | 7
        x = d.namespace.execute
        x(f"INSERT INTO message (id, topic, biz_key, body, run_at, priority, ttr, tries, attempts, state, version, "
          f"created_at, updated_at) VALUES ({old}, 'lk.ret', 'old', '1', {made}, 5, 30000, 3, 1, 'finished', 3, "
          f"{made}, {made + 1000})")
        x(f"INSERT INTO biz_latest (topic, biz_key, id) VALUES ('lk.ret', 'old', {old})")
        self.assertEqual(self.lookup_ok("lk.ret", "old")["id"], str(old))
        wait_until(lambda: self.sql(f"SELECT id FROM message WHERE id = {old}") == [], 15, 0.1,
                   "retention to delete the old message")
        self.assertEqual(self.sql(f"SELECT COUNT(*) FROM biz_latest WHERE id = {old}"), [("0",)])
        self.assertError(self.lookup("lk.ret", "old"), 404, "not_found")
        self.assertEqual(self.lookup_ok("lk.ret", "recent")["id"], recent)
