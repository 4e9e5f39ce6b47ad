"""/reStore after a Redis loss: the MySQL journal rebuilds exactly the live jobs.

Contract (shared/contract.md, "Durability" and the /reStore rows): every job in Redis has its
committed message row, so /reStore after a Redis loss rebuilds every job that was neither
finished, deleted nor dead, with its original runAt, attempts and bizKey. A finished job may
come back only if its "finished" transition was not journaled yet, so these tests wait for
the journal to catch up (MySQL state counts) before dropping Redis, and then assert strictly.

Choices where the contract is silent (what an SQS/beanstalkd user would expect):
* A job that was reserved when Redis was lost has lost its lease; it comes back deliverable
  at once (ready), with its attempts so far kept, so its next delivery is attempt + 1.
* The counts of a /reStore answer partition `scanned`: scanned = restored + present +
  expiredSkipped (+ gone + bizHeld + misplaced when the answer has them).
"""

from __future__ import annotations

import random
import subprocess
import threading
import time

import harness
from harness import HourglassTestCase
from test_journal_common import (LIVE_STATES, consume, drain, expect_ok, journal_idle, now_ms, pmap,
                                 start_ready, state_counts, stats, topic_counts, totals, wait_or_fail)

FIELDS = ("topic", "body", "priority", "ttr", "tries", "runAt", "bizKey")
EXTRA_COUNTS = ("gone", "bizHeld", "misplaced")


def count_sum(res: dict) -> int:
    return (res["restored"] + res["present"] + res["expiredSkipped"]
            + sum(res.get(k, 0) for k in EXTRA_COUNTS))


def lock_transitions(tc, ns) -> str:
    """LOCK TABLES transition WRITE in a session of its own (the journal's next cycle waits for
    it); unlocked when the test ends. Returns its connection id, for unlock()."""
    sql = "LOCK TABLES transition WRITE; SELECT SLEEP(600); UNLOCK TABLES;"
    locker = subprocess.Popen(
        [harness._which("mariadb"), "--no-defaults", "-uroot", f"--socket={ns.mariadb.socket}",
         "-D", ns.database, "-e", sql],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tc.addCleanup(lambda: locker.poll() is None and (locker.kill(), locker.wait()))
    find = ("SELECT ID FROM information_schema.PROCESSLIST "
            f"WHERE DB = '{ns.database}' AND INFO = 'SELECT SLEEP(600)'")
    rows = wait_or_fail(tc, lambda: ns.mariadb.query(find), 10, "the table lock")
    conn_id = rows[0][0]
    tc.addCleanup(unlock, ns, conn_id)
    return conn_id


def unlock(ns, conn_id: str) -> None:
    """KILL the locking session: its locks go with it."""
    if ns.mariadb.query(f"SELECT ID FROM information_schema.PROCESSLIST WHERE ID = {conn_id}"):
        ns.mariadb.execute(f"KILL {conn_id}")


class RestoreAfterRedisLossTest(HourglassTestCase):
    """10,000 jobs in every state, the journal caught up, Redis flushed, /reStore?expire=true.
    Every pending job in Redis ([queue] horizon = 0): restoring a deep far backlog, which
    stays in MySQL, is test_tiers.py's."""

    N = 10_000
    TOPICS = ("rs.alpha", "rs.beta", "rs.gamma", "rs.delta")

    def test_restore_brings_back_exactly_the_live_jobs(self):
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        d = start_ready(self, {"http": {"threads": 2, "max_body": 4 << 20}, "queue": {"horizon": 0}})
        ns = d.namespace
        q = ns.query

        # ---- push 10,000 jobs in arrays of 1000, recording what we asked for
        spec: dict[str, dict] = {}      # id -> the job as pushed (+ runAt bounds)
        group: dict[str, str] = {}      # id -> "now" | "soon" | "later"
        for start in range(0, self.N, 1000):
            batch, meta = [], []
            t_base = now_ms()
            for i in range(start, start + 1000):
                j = {"topic": rng.choice(self.TOPICS), "body": {"i": i, "pad": "x" * rng.randrange(0, 40)},
                     "priority": rng.randrange(0, 10), "ttr": rng.randrange(120_000, 3_600_000),
                     "tries": rng.randrange(2, 10)}
                if i % 3 == 0:
                    j["bizKey"] = f"bk-{seed}-{i}"
                g = ("now", "now", "now", "now", "soon", "soon", "later", "later", "later", "later")[i % 10]
                if g == "now":
                    pass  # due at once: runAt = the server's now
                elif g == "soon":
                    j["runAt"] = t_base + rng.randrange(1000, 3000)
                # "later" is far enough that no job of it comes due while the test runs, even
                # on a slow, shared machine or under a sanitizer (a run took over 5 minutes)
                elif i % 2:
                    j["runAt"] = t_base + rng.randrange(60 * 60_000, 120 * 60_000)
                else:
                    j["delay"] = rng.randrange(60 * 60_000, 120 * 60_000)
                batch.append(j)
                meta.append(g)
            t0 = now_ms()
            r = d.push(batch, timeout=60)
            t1 = now_ms()
            ids = expect_ok(r, "push of 1000 jobs")["ids"]
            self.assertEqual(len(ids), len(batch))
            for jid, j, g in zip(ids, batch, meta):
                rec = dict(j)
                if "runAt" in j:
                    rec["runAt_lo"] = rec["runAt_hi"] = j["runAt"]
                else:
                    delay = rec.pop("delay", 0)
                    rec["runAt_lo"], rec["runAt_hi"] = t0 + delay, t1 + delay
                rec.pop("runAt", None)
                spec[jid] = rec
                group[jid] = g
        self.assertEqual(len(spec), self.N, "push answered duplicate ids")

        later = {i for i, g in group.items() if g == "later"}
        soon_last = max(s["runAt_hi"] for i, s in spec.items() if group[i] == "soon")

        # ---- let the 1-3 s jobs come due: every "now"/"soon" job is ready
        wait_or_fail(self, lambda: totals(d) == {"delayed": len(later), "ready": self.N - len(later),
                                                 "reserved": 0, "dead": 0},
                     15, "the 1-3 s jobs to become ready", lambda: f"totals {totals(d)}")
        self.assertGreaterEqual(now_ms(), soon_last)

        # ---- consume some (reserve), finish some of those, delete some in each state
        reserved: list[dict] = []
        for t in self.TOPICS:
            reserved += consume(d, t, 750)
        self.assertEqual(len(reserved), 3000)
        reserved_ids = [j["id"] for j in reserved]
        self.assertEqual(len(set(reserved_ids)), 3000, "a job was delivered twice")
        rng.shuffle(reserved_ids)
        finished = set(reserved_ids[:2000])
        deleted_reserved = set(reserved_ids[2000:2150])
        still_reserved = set(reserved_ids[2150:])
        taken = set(reserved_ids)
        ready_left = [i for i in spec if group[i] != "later" and i not in taken]
        deleted_ready = set(rng.sample(ready_left, 250))
        deleted_later = set(rng.sample(sorted(later), 400))
        deleted = deleted_reserved | deleted_ready | deleted_later

        for r in pmap(lambda i: d.finish(i), sorted(finished)):
            expect_ok(r, "finish")
        for r in pmap(lambda i: d.delete(i), sorted(deleted)):
            expect_ok(r, "delete")

        live = set(spec) - finished - deleted
        live_later = later - deleted_later
        live_due = live - live_later          # ready or reserved now: due when restored
        self.assertEqual(len(live), self.N - 2000 - 800)
        self.assertEqual(totals(d), {"delayed": len(live_later), "ready": len(live_due) - len(still_reserved),
                                     "reserved": len(still_reserved), "dead": 0})

        # ---- wait for the journal: every transition made so far is in MySQL
        expected_states = {"delayed": len(live_later), "ready": len(live_due) - len(still_reserved),
                           "reserved": len(still_reserved), "finished": len(finished), "deleted": len(deleted)}
        wait_or_fail(self, lambda: journal_idle(d) and state_counts(q) == expected_states, 30,
                     "the journal to catch up",
                     lambda: f"MySQL states {state_counts(q)}, expected {expected_states}; /stats {stats(d)['journal']}")
        to_counts = {s: int(n) for s, n in q("SELECT to_state, COUNT(*) FROM transition GROUP BY to_state")}
        self.assertEqual(to_counts.get("reserved"), 3000, to_counts)
        self.assertEqual(to_counts.get("finished"), 2000, to_counts)
        # (one "deleted" row per delete is asserted in test_journal_history; here: which jobs)
        del_rows = {r[0] for r in q("SELECT DISTINCT message_id FROM transition WHERE to_state = 'deleted'")}
        self.assertEqual(del_rows, deleted)

        # ---- what Redis says about every live job, just before losing it
        before = dict(zip(sorted(live), pmap(lambda i: expect_ok(d.job(i), f"/jobs/{i}"), sorted(live))))
        for jid, b in before.items():
            s = spec[jid]
            self.assertTrue(s["runAt_lo"] <= b["runAt"] <= s["runAt_hi"], (jid, s, b))
            for f in ("topic", "body", "priority", "ttr", "tries", "bizKey"):
                self.assertEqual(b.get(f), s.get(f), f"{jid} {f} as pushed (seed {seed})")
            self.assertEqual(b["attempt"], 1 if jid in still_reserved else 0, (jid, b))

        # ---- lose Redis
        self.assertGreater(ns.flush_redis(), 0)
        self.assertEqual(totals(d), {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0})

        res = expect_ok(d.restore(expire=True, timeout=120), "/reStore?expire=true")
        self.assertEqual(res["scanned"], len(live), res)
        self.assertEqual(res["restored"], len(live), res)
        self.assertEqual(res["present"], 0, res)
        self.assertEqual(res["expiredSkipped"], 0, res)
        self.assertEqual(count_sum(res), res["scanned"], f"counts do not add up: {res}")

        # The restore journals a transition per job put back (reserved ones become ready): let
        # those land first, so this second run is about idempotence only. (A /reStore while
        # rows change state is RestoreConcurrencyTest.)
        expected_after = {"delayed": len(live_later), "ready": len(live_due),
                          "finished": len(finished), "deleted": len(deleted)}
        wait_or_fail(self, lambda: journal_idle(d) and state_counts(q) == expected_after, 30,
                     "the restore's transitions to reach MySQL",
                     lambda: f"MySQL states {state_counts(q)}, expected {expected_after}")
        again = expect_ok(d.restore(expire=True, timeout=120), "second /reStore?expire=true")
        self.assertEqual(again["restored"], 0, again)
        self.assertEqual(again["present"], len(live), again)
        self.assertEqual(again["scanned"], len(live), again)
        self.assertEqual(count_sum(again), again["scanned"], f"counts do not add up: {again}")

        # Reserved jobs lost their lease with Redis: they come back deliverable (ready).
        self.assertEqual(totals(d), {"delayed": len(live_later), "ready": len(live_due),
                                     "reserved": 0, "dead": 0})

        # ---- every live job as it was, through /jobs/{id}
        after = dict(zip(sorted(live), pmap(lambda i: d.job(i), sorted(live))))
        for jid in sorted(live):
            a = expect_ok(after[jid], f"/jobs/{jid} after restore")
            b = before[jid]
            for f in FIELDS:
                self.assertEqual(a.get(f), b.get(f), f"{jid}: {f} changed by the restore (seed {seed})")
            self.assertEqual(a["attempt"], b["attempt"], f"{jid}: attempts not preserved")
            self.assertEqual(a["state"], "delayed" if jid in live_later else "ready", (jid, a["state"]))

        # ---- finished and deleted jobs stay ended (served from MySQL)
        for jid, r in zip(sorted(finished | deleted), pmap(lambda i: d.job(i), sorted(finished | deleted))):
            a = expect_ok(r, f"/jobs/{jid} of an ended job")
            self.assertEqual(a["state"], "finished" if jid in finished else "deleted", jid)

        # ---- bizKeys are held again by the restored jobs
        held = [i for i in sorted(live) if spec[i].get("bizKey")][:20]
        for jid in held:
            r = expect_ok(d.push({"topic": spec[jid]["topic"], "body": "dup", "bizKey": spec[jid]["bizKey"]}),
                          "push with a restored job's bizKey")
            self.assertEqual(r["id"], jid, f"bizKey {spec[jid]['bizKey']} not held by the restored job")
            self.assertTrue(r.get("duplicate"), r)
        freed = [i for i in sorted(finished | deleted) if spec[i].get("bizKey")][:5]
        for jid in freed:
            r = expect_ok(d.push({"topic": spec[jid]["topic"], "body": "new", "bizKey": spec[jid]["bizKey"],
                                  "delay": 3_600_000}), "push with an ended job's bizKey")
            self.assertNotEqual(r["id"], jid)
            self.assertFalse(r.get("duplicate", False), r)
            expect_ok(d.delete(r["id"]), "delete")

        # ---- consume: exactly the due live jobs come out, each once, as they were
        delivered: dict[str, dict] = {}
        for t in self.TOPICS:
            got = drain(d, t)
            prios = [j["priority"] for j in got]
            self.assertEqual(prios, sorted(prios), f"{t}: restored jobs not delivered in priority order")
            for j in got:
                self.assertNotIn(j["id"], delivered, f"{j['id']} delivered twice")
                delivered[j["id"]] = j
        resurrected = (set(delivered) & (finished | deleted))
        self.assertFalse(resurrected, f"{len(resurrected)} finished/deleted jobs delivered again, "
                                      f"e.g. {sorted(resurrected)[:5]}")
        missing = live_due - set(delivered)
        self.assertFalse(missing, f"{len(missing)} live jobs not delivered after restore, e.g. {sorted(missing)[:5]}")
        self.assertEqual(set(delivered), live_due)
        for jid, j in delivered.items():
            b = before[jid]
            for f in FIELDS:
                self.assertEqual(j.get(f), b.get(f), f"{jid}: {f} differs on delivery after restore")
            self.assertEqual(j["attempt"], b["attempt"] + 1, f"{jid}: attempt on delivery after restore")
        self.assertEqual(totals(d), {"delayed": len(live_later), "ready": 0,
                                     "reserved": len(live_due), "dead": 0})


class RestoreExpireFalseTest(HourglassTestCase):
    """expire=false (the default) leaves due jobs in MySQL, counted in expiredSkipped."""

    def test_expire_false_skips_due_jobs_and_restores_future_ones(self):
        d = start_ready(self)
        ns = d.namespace
        due = expect_ok(d.push([{"topic": "ex", "body": i, "priority": i % 10} for i in range(60)]), "push")["ids"]
        # far enough ahead that none comes due during the test, however slow the machine
        future = expect_ok(d.push([{"topic": "ex", "body": 100 + i, "delay": 600_000 + 500 * i}
                                   for i in range(100)]), "push")["ids"]
        got = consume(d, "ex", 40)  # 40 reserved, 20 left ready
        self.assertEqual(len(got), 40)
        want = {"ready": 20, "reserved": 40, "delayed": 100}
        wait_or_fail(self, lambda: journal_idle(d) and state_counts(ns.query) == want, 15,
                     "the journal to catch up", lambda: f"{state_counts(ns.query)}")
        runat = {i: expect_ok(d.job(i), "/jobs")["runAt"] for i in future}

        ns.flush_redis()
        res = expect_ok(d.restore(expire=False), "/reStore?expire=false")
        self.assertEqual(res["scanned"], 160, res)
        self.assertEqual(res["expiredSkipped"], 60, res)
        self.assertEqual(res["restored"], 100, res)
        self.assertEqual(res["present"], 0, res)
        self.assertEqual(count_sum(res), res["scanned"], f"counts do not add up: {res}")
        self.assertEqual(totals(d), {"delayed": 100, "ready": 0, "reserved": 0, "dead": 0})
        for i in future:
            j = expect_ok(d.job(i), "/jobs")
            self.assertEqual((j["state"], j["runAt"]), ("delayed", runat[i]), i)
        # the skipped ones are still live in MySQL, not dropped
        self.assertEqual({s: n for s, n in state_counts(ns.query).items() if s in LIVE_STATES},
                         {"ready": 20, "reserved": 40, "delayed": 100})

        # default is expire=false
        res2 = expect_ok(d.restore(), "/reStore")
        self.assertEqual((res2["scanned"], res2["restored"], res2["present"], res2["expiredSkipped"]),
                         (160, 0, 100, 60), res2)

        res3 = expect_ok(d.restore(expire=True), "/reStore?expire=true")
        self.assertEqual((res3["scanned"], res3["restored"], res3["present"], res3["expiredSkipped"]),
                         (160, 60, 100, 0), res3)
        out = drain(d, "ex")
        self.assertEqual(sorted(j["id"] for j in out), sorted(set(due)))
        self.assertEqual(sorted(j["attempt"] for j in out), [1] * 20 + [2] * 40)


class RestoreEdgeTest(HourglassTestCase):
    def test_expire_false_counts_jobs_redis_holds_as_present(self):
        # A due job that Redis still holds is "present", not "expiredSkipped": it was not left
        # in MySQL. (An operator reading expiredSkipped=N on a healthy system would think N
        # jobs were not brought back.)
        d = start_ready(self)
        ns = d.namespace
        expect_ok(d.push([{"topic": "pr", "body": i} for i in range(5)]), "push")
        expect_ok(d.push([{"topic": "pr", "body": i, "delay": 600_000} for i in range(3)]), "push")
        self.assertEqual(len(consume(d, "pr", 2)), 2)
        want = {"ready": 3, "reserved": 2, "delayed": 3}
        wait_or_fail(self, lambda: journal_idle(d) and state_counts(ns.query) == want, 10, "the journal")
        res = expect_ok(d.restore(expire=False), "/reStore?expire=false with nothing lost")
        self.assertEqual((res["scanned"], res["restored"], res["present"], res["expiredSkipped"]),
                         (8, 0, 8, 0), res)
        self.assertEqual(count_sum(res), res["scanned"], res)
        self.assertEqual(totals(d), {"delayed": 3, "ready": 3, "reserved": 2, "dead": 0})

    def test_restored_job_on_its_last_try_is_not_delivered_beyond_tries(self):
        # tries = max deliveries. A job reserved on its last try when Redis was lost has lost
        # its lease, as if it had run out: it may come back dead, but it must not be delivered
        # once more than tries.
        d = start_ready(self)
        ns = d.namespace
        jid = expect_ok(d.push({"topic": "lt", "body": 1, "tries": 2, "ttr": 300}), "push")["id"]
        self.assertEqual(expect_ok(d.get("lt", timeout=2), "get")["attempt"], 1)
        second = expect_ok(d.get("lt", timeout=5), "get after the lease ran out")
        self.assertEqual((second["id"], second["attempt"]), (jid, 2))
        wait_or_fail(self, lambda: journal_idle(d) and ns.query(f"SELECT state, attempts FROM message WHERE id = {jid}")
                     == [("reserved", "2")], 10, "the journal")
        ns.flush_redis()
        expect_ok(d.restore(expire=True), "/reStore?expire=true")
        r = d.get("lt", timeout=1)
        if r.status == 200:
            j = r.json()
            self.assertLessEqual(j["attempt"], j["tries"],
                                 f"a tries={j['tries']} job delivered again after a restore (attempt {j['attempt']}): {j}")
        else:
            self.assertStatus(r, 204)


class RestoreConcurrencyTest(HourglassTestCase):
    def test_restore_while_the_journal_moves_rows_between_states(self):
        # Redis is lost twice in a row: the second /reStore runs while the journal is still
        # writing the first one's transitions (3000 rows reserved -> ready). The contract
        # says a restore is safe beside live traffic and rebuilds every live job: rows that
        # change state during the scan must not be skipped. ([mysql] batch is small so the
        # journal takes a while over them, as a busy or slow MySQL would.)
        d = start_ready(self, {"mysql": {"batch": 20}, "http": {"max_body": 1 << 20}})
        ns = d.namespace
        # tries well above the rounds: each round delivers the 3000 again, and a job reserved on
        # its last try comes back dead from a restore (its lost lease counts as expired)
        for _ in range(4):
            expect_ok(d.push([{"topic": "rc", "body": i, "tries": 10} for i in range(1000)]), "push")
        # The race depends on timing; a few rounds make a miss very likely when it exists.
        for rnd in range(3):
            self.assertEqual(len(consume(d, "rc", 3000)), 3000)
            want = {"ready": 1000, "reserved": 3000}
            wait_or_fail(self, lambda: journal_idle(d) and state_counts(ns.query) == want, 30, "the journal",
                         lambda: f"{state_counts(ns.query)}")

            ns.flush_redis()
            first = expect_ok(d.restore(expire=True, timeout=120), "first /reStore")
            self.assertEqual((first["scanned"], first["restored"]), (4000, 4000), first)
            ns.flush_redis()
            second = expect_ok(d.restore(expire=True, timeout=120), "second /reStore, right after")
            journal = stats(d)["journal"]
            self.assertEqual((second["scanned"], second["restored"]), (4000, 4000),
                             f"round {rnd + 1}: live jobs skipped by a /reStore while their rows changed "
                             f"state: {second} (journal right after: {journal})")
            self.assertEqual(totals(d)["ready"], 4000)
            wait_or_fail(self, lambda: journal_idle(d) and state_counts(ns.query) == {"ready": 4000}, 30,
                         "the journal", lambda: f"{state_counts(ns.query)}")


class RestoreFlagRenewalTest(HourglassTestCase):
    """The "restoring" flags stay up while /reStore waits on back-pressure.

    Defect guarded (fixed in e9bde90, renew_flags in src/durable/restore.c): the per-shard
    <prefix>:{n}:restoring flags, set with a 120 s TTL (FLAG_TTL_MS), were renewed only between
    pages, so a restore waiting for the journal (MySQL hung, slow or down) longer than the TTL
    let them lapse; a job ended after that left no tombstone and the restore, going on from a
    MySQL snapshot that still had it live, brought it back. They must be renewed every quarter
    of the TTL (30 s), also during the wait: after 30 s of waiting their PTTL must be back near
    120 s, where an un-renewed flag would be down to 90 s. (The 120 s lapse itself is not waited
    for; the PTTL is what tells the two apart.)

    Back-pressure without stopping MySQL (the restore's own connection needs it for its
    snapshot): [mysql] backlog at its minimum (1000) and the transition table held by LOCK
    TABLES ... WRITE in another session, so the journal cannot write and 1100 reservations fill
    the outbox past the limit. [mysql] timeout is long enough that the journal stays up, blocked
    in its write, as on a hung MySQL. The restore first waits for the outbox entries older than
    its flags to be committed (a job that ended just before it must not come back from a stale
    snapshot), and logs when that wait is long; that is where the clock starts. While it waits,
    reserved jobs are deleted (/finish answers 503 while the journal is full; a delete is written
    to MySQL first and waits for it): once the journal is released they end in Redis, and the
    restore must not bring them back.
    """

    FLAG_TTL_MS = 120_000          # FLAG_TTL_MS in src/durable/restore.c
    RENEW_MS = FLAG_TTL_MS // 4    # renewed at least this often
    MARGIN_MS = 5_000
    VICTIMS = 20
    FILLERS = 1200
    RESERVED_FILLERS = 1100        # past [mysql] backlog = 1000

    def flag_pttls(self, ns) -> dict:
        """{flag key: PTTL ms} for every shard's restoring flag that exists."""
        return {k: int(ns.redis_cli("PTTL", k)) for k in ns.redis_keys("*:restoring")}

    def background(self, fn) -> tuple[threading.Thread, dict]:
        """fn() on a thread of its own; out["result"] or out["error"] once it is done."""
        out: dict = {}

        def run():
            try:
                out["result"] = fn()
            except Exception as e:  # noqa: BLE001 - reported by the test thread
                out["error"] = e
        th = threading.Thread(target=run, daemon=True)  # ends with the daemon on a failure
        th.start()
        return th, out

    def test_flags_are_renewed_while_the_restore_waits_for_the_journal(self):
        d = start_ready(self, {"mysql": {"backlog": 1000, "timeout": 120}, "redis": {"shards": 8}})
        ns = d.namespace
        # long leases: nothing may expire (and move) during the wait
        victims = expect_ok(d.push([{"topic": "rn.v", "body": i, "ttr": 600_000} for i in range(self.VICTIMS)]),
                            "push")["ids"]
        for start in range(0, self.FILLERS, 600):
            expect_ok(d.push([{"topic": "rn.f", "body": i, "ttr": 600_000} for i in range(start, start + 600)]),
                      "push")
        self.assertEqual(sorted(j["id"] for j in consume(d, "rn.v", self.VICTIMS)), sorted(victims))
        want = {"reserved": self.VICTIMS, "ready": self.FILLERS}
        wait_or_fail(self, lambda: journal_idle(d) and state_counts(ns.query) == want, 15, "the journal",
                     lambda: f"{state_counts(ns.query)}")

        # ---- back-pressure: the journal cannot write, the outbox fills past [mysql] backlog
        lock_id = lock_transitions(self, ns)
        reserved = 0
        while reserved < self.RESERVED_FILLERS:
            r = d.get("rn.f", timeout=0, count=min(100, self.RESERVED_FILLERS - reserved))
            if r.status == 503:  # the keeper measured the outbox already: full
                break
            reserved += len(expect_ok(r, "GET /get/rn.f"))
        self.assertGreaterEqual(reserved, 1000)
        wait_or_fail(self, lambda: stats(d)["journal"]["accepting"] is False, 10, "the journal to refuse more",
                     lambda: f"{stats(d)['journal']}")

        # ---- /reStore in the background: it sets the flags, then waits for the outbox to be committed
        restore, restore_out = self.background(lambda: d.restore(timeout=180))
        d.wait_for_log(r"restore: waiting for the journal", timeout=15)
        t0 = time.monotonic()
        first = self.flag_pttls(ns)
        self.assertEqual(len(first), 8, f"one restoring flag per shard: {first}")
        self.assertTrue(all(0 < p <= self.FLAG_TTL_MS for p in first.values()), first)

        # ---- wait past one renewal period: every flag's TTL must go back up
        seen: dict = {}

        def renewed():
            now = self.flag_pttls(ns)
            elapsed_ms = (time.monotonic() - t0) * 1000
            seen.update(pttl=now, elapsed_ms=elapsed_ms)
            # an un-renewed flag has at most first - elapsed left
            return (set(now) == set(first)
                    and all(now[k] > first[k] - elapsed_ms + self.MARGIN_MS for k in first))

        try:
            harness.wait_until(renewed, (self.RENEW_MS + 8_000) / 1000, 0.5, "the restoring flags to be renewed")
        except TimeoutError:
            self.fail(f"the restoring flags were not renewed while /reStore waited on the journal: "
                      f"{seen['elapsed_ms'] / 1000:.1f} s into the wait their PTTLs are "
                      f"{sorted(seen['pttl'].values())} ms (at its start {sorted(first.values())}); they must be "
                      f"renewed every {self.RENEW_MS} ms, else they lapse {self.FLAG_TTL_MS // 1000} s into the "
                      f"wait and a job that ends after that leaves no tombstone and comes back")
        self.assertTrue(restore.is_alive(), f"the restore ended before the journal was released: {restore_out}")
        self.assertIs(stats(d)["journal"]["accepting"], False, "the restore must still be waiting")

        # ---- delete the victims during the wait: MySQL first, so they wait for the journal
        waiting = stats(d)["journal"]["durableWaiting"]
        deletes, deletes_out = self.background(
            lambda: pmap(lambda i: d.delete(i, timeout=120), victims, workers=len(victims)))
        wait_or_fail(self, lambda: stats(d)["journal"]["durableWaiting"] == waiting + self.VICTIMS, 10,
                     "the deletes to wait for the journal", lambda: f"{stats(d)['journal']} {deletes_out}")

        # ---- release the journal: the deletes end the jobs in Redis, the restore goes on
        unlock(ns, lock_id)
        deletes.join(60)
        restore.join(60)
        self.assertFalse(deletes.is_alive() or restore.is_alive(), "deletes or restore still running")
        for jid, r in zip(victims, deletes_out["result"]):
            expect_ok(r, f"delete {jid}")
        res = expect_ok(restore_out["result"], "/reStore after the wait")
        # its snapshot, taken once the outbox caught up (after the release): every filler, and
        # the victims whose deletes were not committed by then (released at the same moment,
        # so any number of them); Redis has every filler, and every victim it scanned either
        # still (present) or ended with a tombstone (gone)
        self.assertGreaterEqual(res["scanned"], self.FILLERS, res)
        self.assertLessEqual(res["scanned"], self.FILLERS + self.VICTIMS, res)
        self.assertEqual(res["restored"], 0, f"/reStore brought back jobs ended while it ran: {res}")
        self.assertEqual(res["present"] + res["gone"], res["scanned"], res)
        self.assertEqual(ns.redis_keys("*:restoring"), [], "flags left up after the restore")
        self.assertEqual(ns.redis_keys("*:gone"), [], "tombstones left after the restore")

        # ---- the deleted jobs stay deleted
        self.assertEqual(topic_counts(d, "rn.v"), {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0})
        self.assertEqual(totals(d), {"delayed": 0, "ready": self.FILLERS - reserved, "reserved": reserved,
                                     "dead": 0})
        want = {"deleted": self.VICTIMS, "reserved": reserved, "ready": self.FILLERS - reserved}
        wait_or_fail(self, lambda: journal_idle(d) and state_counts(ns.query) == want, 30, "the journal",
                     lambda: f"{state_counts(ns.query)}")
        for jid in victims:
            self.assertEqual(expect_ok(d.job(jid), f"/jobs/{jid}")["state"], "deleted", jid)


class RestoreOneTest(HourglassTestCase):
    """GET /reStore/{id}."""

    def wait_state(self, d, jid, state, timeout=10):
        return wait_or_fail(self, lambda: d.job(jid).status == 200 and d.job(jid).json()["state"] == state,
                            timeout, f"job {jid} to be {state}", lambda: d.job(jid).text)

    def wait_row(self, d, jid, state, timeout=10):
        q = d.namespace.query
        wait_or_fail(self, lambda: q(f"SELECT state FROM message WHERE id = {jid}") == [(state,)], timeout,
                     f"message {jid} to be {state} in MySQL",
                     lambda: f"{q(f'SELECT state, attempts, version FROM message WHERE id = {jid}')}")

    def make_dead(self, d, topic):
        jid = expect_ok(d.push({"topic": topic, "body": {"k": "dead"}, "tries": 1, "ttr": 200, "priority": 2}),
                        "push")["id"]
        j = expect_ok(d.get(topic, timeout=2), "get")
        self.assertEqual((j["id"], j["attempt"]), (jid, 1))
        self.wait_state(d, jid, "dead")
        return jid

    def test_dead_job_is_requeued_and_starts_over(self):
        d = start_ready(self)
        jid = self.make_dead(d, "ro.dead")
        listed = expect_ok(d.dead("ro.dead"), "/dead")["jobs"]
        self.assertEqual([j["id"] for j in listed], [jid])

        r = expect_ok(d.restore_one(jid), "/reStore/{id} of a dead job")
        self.assertEqual(r, {"id": jid, "restored": True, "state": "ready"})
        j = expect_ok(d.job(jid), "/jobs")
        self.assertEqual((j["state"], j["attempt"]), ("ready", 0), j)
        self.assertEqual(expect_ok(d.dead("ro.dead"), "/dead")["jobs"], [])
        g = expect_ok(d.get("ro.dead", timeout=2), "get after requeue")
        self.assertEqual((g["id"], g["attempt"], g["body"], g["priority"]), (jid, 1, {"k": "dead"}, 2))
        expect_ok(d.finish(jid), "finish")
        self.wait_row(d, jid, "finished")

    def test_dead_job_after_redis_loss_is_requeued_not_bulk_restored(self):
        d = start_ready(self)
        jid = self.make_dead(d, "ro.dead2")
        self.wait_row(d, jid, "dead")
        d.namespace.flush_redis()
        res = expect_ok(d.restore(expire=True), "/reStore")
        self.assertEqual(res["restored"], 0, f"/reStore must not bring back a dead job: {res}")
        self.assertEqual(d.job(jid).json().get("state"), "dead")
        r = expect_ok(d.restore_one(jid), "/reStore/{id} of a dead job Redis lost")
        self.assertEqual(r, {"id": jid, "restored": True, "state": "ready"})
        g = expect_ok(d.get("ro.dead2", timeout=2), "get after requeue")
        self.assertEqual((g["id"], g["attempt"]), (jid, 1))

    def test_live_job_present_in_redis_is_not_restored(self):
        d = start_ready(self)
        ready = expect_ok(d.push({"topic": "ro.live", "body": 1}), "push")["id"]
        delayed = expect_ok(d.push({"topic": "ro.live", "body": 2, "delay": 600_000}), "push")["id"]
        self.assertEqual(expect_ok(d.restore_one(ready), "/reStore/{id}"),
                         {"id": ready, "restored": False, "state": "ready"})
        self.assertEqual(expect_ok(d.restore_one(delayed), "/reStore/{id}"),
                         {"id": delayed, "restored": False, "state": "delayed"})
        g = expect_ok(d.get("ro.live", timeout=1), "get")
        self.assertEqual(expect_ok(d.restore_one(ready), "/reStore/{id}"),
                         {"id": ready, "restored": False, "state": "reserved"})
        self.assertEqual(g["id"], ready)
        self.assertEqual(d.get("ro.live", timeout=0).status, 204, "restore_one must not duplicate a live job")
        self.assertEqual(totals(d), {"delayed": 1, "ready": 0, "reserved": 1, "dead": 0})

    def test_live_job_lost_by_redis_is_restored_as_it_was(self):
        d = start_ready(self)
        jid = expect_ok(d.push({"topic": "ro.lost", "body": {"a": [1, 2]}, "priority": 1, "ttr": 45_000,
                                "tries": 4, "bizKey": "bk-lost", "delay": 600_000}), "push")["id"]
        before = expect_ok(d.job(jid), "/jobs")
        self.wait_row(d, jid, "delayed")
        d.namespace.flush_redis()
        self.assertEqual(expect_ok(d.restore_one(jid), "/reStore/{id}"),
                         {"id": jid, "restored": True, "state": "delayed"})
        after = expect_ok(d.job(jid), "/jobs")
        for f in FIELDS + ("attempt", "state"):
            self.assertEqual(after.get(f), before.get(f), f)
        self.assertEqual(expect_ok(d.restore_one(jid), "/reStore/{id} again"),
                         {"id": jid, "restored": False, "state": "delayed"})
        dup = expect_ok(d.push({"topic": "ro.lost", "body": 0, "bizKey": "bk-lost"}), "push dup")
        self.assertEqual((dup["id"], dup.get("duplicate")), (jid, True))

    def test_finished_and_deleted_need_force(self):
        d = start_ready(self)
        fin = expect_ok(d.push({"topic": "ro.end", "body": "f", "priority": 3, "tries": 2}), "push")["id"]
        dele = expect_ok(d.push({"topic": "ro.end", "body": "d", "priority": 4, "delay": 600_000}), "push")["id"]
        g = expect_ok(d.get("ro.end", timeout=1), "get")
        self.assertEqual(g["id"], fin)
        expect_ok(d.finish(fin), "finish")
        expect_ok(d.delete(dele), "delete")
        self.wait_row(d, fin, "finished")
        self.wait_row(d, dele, "deleted")

        for jid, state in ((fin, "finished"), (dele, "deleted")):
            r = d.restore_one(jid)
            self.assertStatus(r, 409, f"/reStore/{{id}} of a {state} job without force")
            self.assertEqual(r.json()["error"], "conflict")
            self.assertStatus(d.restore_one(jid, force=False), 409)
            self.assertEqual(d.job(jid).json()["state"], state, "a refused restore changed the job")
        self.assertEqual(d.get("ro.end", timeout=0).status, 204)

        for jid in (fin, dele):
            self.assertEqual(expect_ok(d.restore_one(jid, force=True), "/reStore/{id}?force=true"),
                             {"id": jid, "restored": True, "state": "ready"})
            j = expect_ok(d.job(jid), "/jobs")
            self.assertEqual((j["state"], j["attempt"]), ("ready", 0), j)
        out = drain(d, "ro.end")
        self.assertEqual(sorted((j["id"], j["attempt"], j["body"]) for j in out),
                         sorted([(fin, 1, "f"), (dele, 1, "d")]))
        # forced again while live: nothing to do
        self.assertEqual(expect_ok(d.restore_one(fin, force=True), "/reStore/{id}?force=true on a live job"),
                         {"id": fin, "restored": False, "state": "reserved"})

    def test_unknown_id_is_404(self):
        d = start_ready(self)
        jid = expect_ok(d.push({"topic": "ro.x", "body": 1}), "push")["id"]
        unknown = str(int(jid) + 1)  # never issued: the only job of this namespace is jid
        for i in (unknown, "1", "9223372036854775807"):
            r = d.restore_one(i)
            self.assertStatus(r, 404, f"/reStore/{i}")
            self.assertEqual(r.json()["error"], "not_found")
            self.assertStatus(d.restore_one(i, force=True), 404)
        self.assertStatus(d.restore_one("not-a-number"), 400)


class DeleteAcrossARedisLossTest(HourglassTestCase):
    """A delete is committed in MySQL before Redis is changed. When the job leaves Redis in the
    moment between the two because Redis lost its data, the commit holds: the delete is answered
    `deleted`, and no restore brings the job back. Found by the fault suite's Galera restart: its
    flush came while a delete's commit was on its way, the delete was answered 404, and the
    history checker counted the push as lost. When the job left because it ended (its
    consumer's finish), the delete did not happen: 404, as before."""

    def delete_held_at_its_commit(self, d, jid: str):
        """DELETE jid on a thread of its own, once its commit waits for a lock on the transition
        table; returns a function that releases the lock and answers the delete's response."""
        ns = d.namespace
        lock_id = lock_transitions(self, ns)
        out: dict = {}
        th = threading.Thread(target=lambda: out.update(r=d.delete(jid, timeout=60)), daemon=True)
        th.start()
        waiting = ("SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                   f"WHERE DB = '{ns.database}' AND STATE LIKE 'Waiting for table%'")
        wait_or_fail(self, lambda: ns.mariadb.query(waiting) != [("0",)], 10,
                     "the delete's commit to wait for the table lock", lambda: d.log_tail(20))

        def release():
            unlock(ns, lock_id)
            th.join(60)
            self.assertIsNotNone(out.get("r"), "the delete never answered")
            return out["r"]
        return release

    def test_delete_whose_job_redis_lost_before_the_commit_returned(self):
        d = start_ready(self)
        ns = d.namespace
        gone, kept = (expect_ok(d.push({"topic": "dl.loss", "body": i, "delay": 600_000}), "push")["id"]
                      for i in range(2))
        wait_or_fail(self, lambda: journal_idle(d) and state_counts(ns.query) == {"delayed": 2}, 15, "the journal",
                     lambda: f"{state_counts(ns.query)}")
        answer = self.delete_held_at_its_commit(d, gone)
        self.assertGreater(ns.flush_redis(), 0)
        self.assertEqual(expect_ok(answer(), "the delete"), {"id": gone, "state": "deleted"})
        self.assertEqual(ns.query(f"SELECT state FROM message WHERE id = {gone}"), [("deleted",)])

        res = expect_ok(d.restore(expire=True), "/reStore")
        self.assertEqual((res["scanned"], res["restored"]), (1, 1), res)
        self.assertEqual(expect_ok(d.job(gone), "/jobs of the deleted job")["state"], "deleted")
        self.assertEqual(expect_ok(d.job(kept), "/jobs of the other job")["state"], "delayed")

    def test_delete_whose_job_finished_before_the_commit_returned(self):
        """The other way a job leaves Redis in that moment: its consumer finishes it. The job
        ended before the delete reached it: 404, as before — and it has ended in MySQL too, so
        no restore brings it back. (Which ended state MySQL keeps depends on versions: here the
        finish and the delete's commit carry the same one and the delete's, applied by force,
        stays; a job delivered after the delete's check, as in the fault suite's Galera restart
        where a commit took 1.8 s, finishes at a newer version, and that wins.)"""
        d = start_ready(self)
        ns = d.namespace
        jid = expect_ok(d.push({"topic": "dl.fin", "body": 1}), "push")["id"]
        self.assertEqual(expect_ok(d.get("dl.fin", timeout=2), "get")["id"], jid)
        wait_or_fail(self, lambda: journal_idle(d) and state_counts(ns.query) == {"reserved": 1}, 15, "the journal",
                     lambda: f"{state_counts(ns.query)}")
        answer = self.delete_held_at_its_commit(d, jid)
        expect_ok(d.finish(jid), "the consumer's finish")
        r = answer()
        self.assertEqual((r.status, r.json()["message"]), (404, "the job ended before it could be deleted"))
        wait_or_fail(self, lambda: journal_idle(d), 15, "the journal")
        self.assertIn(ns.query(f"SELECT state FROM message WHERE id = {jid}"), ([("finished",)], [("deleted",)]))
        ns.flush_redis()
        res = expect_ok(d.restore(expire=True), "/reStore")
        self.assertEqual(res["restored"], 0, f"an ended job came back: {res}")
        self.assertEqual(d.get("dl.fin", timeout=0).status, 204)


class RestoreAdminAuthTest(HourglassTestCase):
    def test_admin_token(self):
        d = start_ready(self, {"http": {"admin_token": "adm-s3cret"}})
        jid = expect_ok(d.push({"topic": "au", "body": 1}), "push")["id"]
        for call in (lambda **kw: d.restore(**kw), lambda **kw: d.restore_one(jid, **kw)):
            r = call()
            self.assertStatus(r, 401, "admin endpoint without a token")
            self.assertEqual(r.json()["error"], "unauthorized")
            r = call(headers={"Authorization": "Bearer wrong-token"})
            self.assertStatus(r, 403, "admin endpoint with a wrong token")
            self.assertEqual(r.json()["error"], "forbidden")
            self.assertStatus(call(headers={"Authorization": "Bearer adm-s3cret"}), 200)
        self.assertEqual(totals(d)["ready"], 1)

    def test_no_admin_token_allows_loopback(self):
        d = start_ready(self, {"http": {"admin_token": ""}})
        jid = expect_ok(d.push({"topic": "au", "body": 1}), "push")["id"]
        self.assertStatus(d.restore(), 200)
        self.assertStatus(d.restore_one(jid), 200)
        # Non-loopback clients (403) cannot be reached from one host without faking it: not tested.


class RestoreWaitsForTheFleetsOutboxTest(HourglassTestCase):
    """A job that ended just before a /reStore must not come back, even when its "finished"
    entry was taken by another instance's outbox that has not committed it: B's restore waits
    until every outbox entry older than the restore is committed, by whoever holds it. Seen in
    the fault suite (a Redis rollback, /reStore): two jobs finished via A 10 ms before the
    restore began, their entries read by B's outbox, were restored from MySQL's stale
    "reserved" and delivered again after their finish was answered."""

    def test_entries_held_by_another_instance_are_waited_for(self):
        ns = self.namespace()
        b = start_ready(self, namespace=ns)
        topic = "rw.fleet"
        ids = [expect_ok(b.push({"topic": topic, "body": i}), "push")["id"] for i in range(100)]
        got = expect_ok(b.get(topic, timeout=2, count=100), "get")
        self.assertEqual(sorted(j["id"] for j in got), sorted(ids))
        wait_or_fail(self, lambda: state_counts(ns.query).get("reserved", 0) == len(ids), 10,
                     "MySQL to know the deliveries")
        # A's journal cannot commit (an instance cut off from MySQL): what its outbox takes
        # from the streams stays pending there until B claims it (OUTBOX_CLAIM_IDLE_MS, 15 s)
        a = harness.Daemon(namespace=ns)
        a.env["HOURGLASS_FAULTS"] = "journal:mysql.commit=fail@1+1000000"
        self.addCleanup(a.close)
        a.start()
        wait_or_fail(self, lambda: a.health().status in (200, 503), 10, "A to answer")
        held, done = 0, 0
        while not held and done < len(ids):  # until A's outbox holds some (about half, each round)
            for jid in ids[done:done + 20]:
                self.assertEqual(expect_ok(b.finish(jid), "finish")["state"], "finished")
            done += 20
            time.sleep(1.0)  # B commits what it took within milliseconds; what is left, A holds
            held = sum(int(ns.redis_cli("XLEN", f"{ns.prefix}:{{{s}}}:log")) for s in range(8))
        self.assertGreater(held, 0, f"A's outbox took none of {done} finishes: the case was not made")
        self.assertGreater(state_counts(ns.query).get("reserved", 0), len(ids) - done,
                           "MySQL still says reserved for the finishes A holds")
        started = time.monotonic()
        r = expect_ok(b.restore(expire=True, timeout=60), "/reStore")
        took = time.monotonic() - started
        # the reserved jobs not finished yet are in Redis (present); none that finished came back
        self.assertEqual(r["restored"], 0, f"finished jobs came back: {r}")
        self.assertGreater(took, 5, "the restore waited for B to claim and commit what A held")
        self.assertEqual(state_counts(ns.query), {"finished": done, "reserved": len(ids) - done}
                         if done < len(ids) else {"finished": done})
        # and none of the finished ones is deliverable again (the unfinished ones' leases run)
        self.assertEqual(b.get(topic, timeout=1).status, 204, "nothing of the topic is deliverable")
