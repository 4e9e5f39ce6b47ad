"""Durability of push/delete against MySQL and Redis failures (private servers).

Contract ("Durability"): a push is answered 200 only after its message row is committed in
MySQL and the job is in Redis. MySQL down -> 503 and nothing in Redis; Redis down -> 503 and
the message is not left pending in MySQL. A delete is answered only after its transition is
committed. Other transitions are journaled in batches; architecture.md: while MySQL is down
they wait in a ring (counted in /stats journal.backlog), consumption goes on, and pushes and
deletes get 503 at once.

"Promptly" is [mysql] timeout (2 s here) + a 2 s margin, for a stopped server (connection
refused) and for a paused one (SIGSTOP: connections hang) alike: the config defines [mysql]
timeout as "seconds for a connect, read or write before MySQL counts as down", and while MySQL
counts as down pushes and deletes get 503 at once, so no push should wait much longer than one
timeout, whichever statement or connect attempt it queued behind.
"""

from __future__ import annotations

import http.client
import queue
import subprocess
import threading
import time

import harness
from harness import HourglassTestCase, id_key, now_ms
from test_journal_common import (drain, expect_ok, journal_idle, mysql_overrides, pmap, start_ready,
                                 stats, topic_counts, totals, wait_or_fail)

MYSQL_TIMEOUT = 2


class Pusher(threading.Thread):
    """Pushes single jobs {"n": k} to a topic in a loop; records (k, status, seconds, id)."""

    def __init__(self, d, topic, gap=0.01, http_timeout=20.0):
        super().__init__(daemon=True)
        self.d, self.topic, self.gap, self.http_timeout = d, topic, gap, http_timeout
        self.stop_ev = threading.Event()
        self.log: list[tuple[int, int, float, str | None]] = []
        self.lock = threading.Lock()

    def run(self):
        k = 0
        while not self.stop_ev.is_set():
            t0 = time.monotonic()
            try:
                r = self.d.push({"topic": self.topic, "body": {"n": k}}, timeout=self.http_timeout)
                status, jid = r.status, (r.json().get("id") if r.status == 200 else None)
            except (OSError, http.client.HTTPException):
                status, jid = -1, None  # no answer in http_timeout: a hang
            with self.lock:
                self.log.append((k, status, time.monotonic() - t0, jid))
            k += 1
            time.sleep(self.gap)

    def records(self):
        with self.lock:
            return list(self.log)

    def count(self, status, since=0):
        return sum(1 for k, s, _, _ in self.records()[since:] if s == status)

    def finish(self):
        self.stop_ev.set()
        self.join(30)


class MySQLStoppedTest(HourglassTestCase):
    def test_mysql_stopped_mid_traffic(self):
        m = self.private_mariadb()
        m.create_database("hgdur")
        q = lambda sql: m.query(sql, db="hgdur")  # noqa: E731
        d = start_ready(self, {**mysql_overrides(m, "hgdur", timeout=MYSQL_TIMEOUT),
                               "queue": {"default_ttr": 120_000}})
        limit = MYSQL_TIMEOUT + 2.0

        seed = expect_ok(d.push([{"topic": "dur.seed", "body": i} for i in range(40)]), "push")["ids"]
        soon = expect_ok(d.push([{"topic": "dur.soon", "body": i, "delay": 2500} for i in range(10)]), "push")["ids"]
        early = expect_ok(d.get("dur.seed", timeout=1, count=20), "get")
        self.assertEqual(len(early), 20)
        wait_or_fail(self, lambda: journal_idle(d), 10, "the journal")

        pusher = Pusher(d, "dur.live")
        pusher.start()
        self.addCleanup(pusher.finish)
        wait_or_fail(self, lambda: pusher.count(200) >= 20, 10, "pushes before the outage")

        m.stop()
        mark = len(pusher.records())
        wait_or_fail(self, lambda: pusher.count(503, since=mark) >= 10, 3 * limit, "pushes to get 503",
                     lambda: f"{pusher.records()[mark:][-5:]}")

        # pushes and deletes: 503, promptly, nothing in Redis
        before = totals(d)
        for job in ({"topic": "dur.fail", "body": 1}, [{"topic": "dur.fail", "body": i} for i in range(5)],
                    {"topic": "dur.seed", "body": "x", "delay": 60_000}):
            t0 = time.monotonic()
            r = d.push(job, timeout=20)
            took = time.monotonic() - t0
            self.assertStatus(r, 503, "push while MySQL is stopped")
            self.assertLess(took, limit, f"push 503 took {took:.2f} s")
            self.assertEqual(r.json()["error"], "unavailable")
            self.assertTrue(r.header("Retry-After"), "503 without Retry-After")
        victim = seed[-1]
        t0 = time.monotonic()
        r = d.delete(victim, timeout=20)
        self.assertStatus(r, 503, "delete while MySQL is stopped")
        self.assertLess(time.monotonic() - t0, limit)
        self.assertEqual(totals(d), before, "a push or delete that got 503 changed Redis")
        self.assertEqual(topic_counts(d, "dur.fail"), {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0})
        self.assertEqual(expect_ok(d.job(victim), "/jobs")["state"], "ready", "a delete that got 503 happened")
        for what, call in (("/reStore", lambda: d.restore(expire=True, timeout=20)),
                           ("/reStore/{id}", lambda: d.restore_one(victim, timeout=20))):
            t0 = time.monotonic()
            r = call()
            self.assertStatus(r, 503, f"{what} while MySQL is stopped")
            self.assertLess(time.monotonic() - t0, limit, f"{what} while MySQL is stopped")

        # consumption goes on: finish what was reserved, reserve and finish more, incl. due delayed jobs
        done = []
        for j in early:
            expect_ok(d.finish(j["id"]), "finish while MySQL is stopped")
            done.append(j["id"])
        more = expect_ok(d.get("dur.seed", timeout=1, count=10), "get while MySQL is stopped")
        self.assertEqual(len(more), 10)
        due: list[dict] = []
        deadline = time.monotonic() + 10
        while len(due) < 10 and time.monotonic() < deadline:  # they come due 2.5 s after their push
            r = d.get("dur.soon", timeout=1, count=10 - len(due))
            if r.status == 200:
                due += r.json()
        for j in more + due:
            expect_ok(d.finish(j["id"]), "finish while MySQL is stopped")
            done.append(j["id"])
        self.assertEqual(sorted(j["id"] for j in due), sorted(soon))
        journal = stats(d)["journal"]
        self.assertGreater(journal["backlog"], 0, f"transitions made during the outage are not held: {journal}")

        # MySQL back, same daemon: the held transitions land, pushes work again
        m.start()
        wait_or_fail(self, lambda: d.push({"topic": "dur.after", "body": 0}, timeout=20).status == 200,
                     30, "pushes to succeed again after MySQL came back")
        ids = ",".join(done)
        wait_or_fail(self, lambda: journal_idle(d) and q(
            f"SELECT COUNT(*) FROM message WHERE state = 'finished' AND id IN ({ids})") == [(str(len(done)),)],
            30, "the held transitions to reach MySQL",
            lambda: f"/stats journal {stats(d)['journal']}; states "
                    f"{q(f'SELECT state, COUNT(*) FROM message WHERE id IN ({ids}) GROUP BY state')}")
        fin_rows = {r[0] for r in q(f"SELECT message_id FROM transition WHERE to_state = 'finished' "
                                   f"AND from_state = 'reserved' AND message_id IN ({ids})")}
        self.assertEqual(fin_rows, set(done), "finished transitions missing from the transition table")
        soon_ids = ",".join(soon)
        self.assertEqual(q(f"SELECT COUNT(DISTINCT message_id) FROM transition WHERE from_state = 'delayed' "
                           f"AND to_state = 'ready' AND message_id IN ({soon_ids})"), [("10",)],
                         "delayed -> ready made by the mover during the outage not journaled")
        for i in range(5):
            expect_ok(d.push({"topic": "dur.after", "body": i + 1}), "push after MySQL came back")
        self.assertEqual(d.delete(victim).status, 200)

        wait_or_fail(self, lambda: pusher.count(200, since=mark) >= 10, 10, "the pusher to succeed again")
        pusher.finish()
        recs = pusher.records()
        statuses = {s for _, s, _, _ in recs}
        self.assertLessEqual(statuses, {200, 503}, f"pushes answered other than 200/503 (-1 = no answer in 20 s)")
        slow = [(k, s, round(t, 2)) for k, s, t, _ in recs if t >= limit]
        self.assertFalse(slow, f"pushes answered slower than {limit} s: {slow[:10]}")

        acked = {str(k): jid for k, s, _, jid in recs if s == 200}
        refused = {str(k) for k, s, _, _ in recs if s == 503}
        self.assertTrue(refused)
        self.assertEqual(topic_counts(d, "dur.live")["ready"], len(acked), "Redis count vs acknowledged pushes")
        out = drain(d, "dur.live")
        got = {str(j["body"]["n"]): j["id"] for j in out}
        self.assertEqual(len(out), len(got), "a job delivered twice")
        self.assertFalse(set(got) & refused, f"pushes that got 503 were delivered: {sorted(set(got) & refused)[:10]}")
        self.assertEqual(got, acked)
        rows = q(f"SELECT COUNT(*) FROM message WHERE id IN ({','.join(acked.values())})")
        self.assertEqual(rows, [(str(len(acked)),)], "an acknowledged push has no message row")


class MySQLPausedTest(HourglassTestCase):
    def test_mysql_paused_pushes_503_never_hang(self):
        m = self.private_mariadb()
        m.create_database("hgpause")
        q = lambda sql: m.query(sql, db="hgpause")  # noqa: E731
        d = start_ready(self, {**mysql_overrides(m, "hgpause", timeout=MYSQL_TIMEOUT),
                               "queue": {"default_ttr": 120_000}})
        limit = MYSQL_TIMEOUT + 2.0
        acked = expect_ok(d.push([{"topic": "pz", "body": i} for i in range(10)]), "push")["ids"]
        early = expect_ok(d.get("pz", timeout=1, count=5), "get")
        wait_or_fail(self, lambda: journal_idle(d), 10, "the journal")

        m.pause()
        self.addCleanup(m.resume)
        t_pause = time.monotonic()

        def timed_push(i):
            t0 = time.monotonic()
            try:
                r = d.push({"topic": "pz", "body": f"paused-{i}"}, timeout=30)
                return r.status, time.monotonic() - t0, r
            except (OSError, http.client.HTTPException) as e:
                return -1, time.monotonic() - t0, e

        concurrent = pmap(timed_push, range(8), workers=8)
        sequential = [timed_push(100 + i) for i in range(3)]
        slow = []  # checked at the end, so the rest of the behaviour is tested too
        for i, (status, took, r) in enumerate(concurrent + sequential):
            self.assertEqual(status, 503, f"push while MySQL is paused: {r!r} after {took:.2f} s")
            self.assertTrue(r.header("Retry-After"))
            if took >= limit:
                slow.append(f"{'concurrent' if i < len(concurrent) else 'sequential'} push: {took:.2f} s")
        t0 = time.monotonic()
        r = d.delete(acked[-1], timeout=30)
        self.assertStatus(r, 503, "delete while MySQL is paused")
        if time.monotonic() - t0 >= limit:
            slow.append(f"delete: {time.monotonic() - t0:.2f} s")
        self.assertEqual(totals(d), {"delayed": 0, "ready": 5, "reserved": 5, "dead": 0},
                         "a refused push or delete changed Redis")

        for j in early:  # consumption goes on
            expect_ok(d.finish(j["id"]), "finish while MySQL is paused")
        self.assertEqual(len(expect_ok(d.get("pz", timeout=1, count=2), "get while MySQL is paused")), 2)
        self.assertGreater(stats(d)["journal"]["backlog"], 0)
        self.assertLess(time.monotonic() - t_pause, 60)

        m.resume()
        wait_or_fail(self, lambda: d.push({"topic": "pz", "body": "resumed"}, timeout=30).status == 200, 30,
                     "pushes to succeed after SIGCONT")
        ids = ",".join(j["id"] for j in early)
        wait_or_fail(self, lambda: journal_idle(d) and q(
            f"SELECT COUNT(*) FROM message WHERE state = 'finished' AND id IN ({ids})") == [("5",)], 30,
            "the held transitions to reach MySQL")
        bodies = [j["body"] for j in drain(d, "pz")]
        self.assertNotIn(True, [isinstance(b, str) and b.startswith("paused-") for b in bodies],
                         f"a push that got 503 was delivered: {bodies}")
        self.assertEqual(sorted(map(str, bodies)), sorted(["7", "8", "9", "resumed"]))
        self.assertFalse(slow, f"answers slower than [mysql] timeout + 2 s = {limit:g} s while MySQL "
                               f"was paused: {slow}")


class RedisDownTest(HourglassTestCase):
    def test_redis_down_push_503_and_no_pending_row(self):
        r = self.private_redis()
        d = start_ready(self, {"redis": {"address": r.address, "db": 0, "timeout": 500}})
        ns = d.namespace
        ok = [expect_ok(d.push({"topic": "rd", "body": f"ok-{i}"}), "push")["id"] for i in range(5)]
        wait_or_fail(self, lambda: journal_idle(d), 10, "the journal")

        r.stop()
        results = []
        for job in ([{"topic": "rd", "body": "fail-0"}] +
                    [[{"topic": "rd", "body": f"fail-{i}"} for i in range(1, 4)]] +
                    [{"topic": "rd", "body": "fail-4", "bizKey": "b-4"},
                     {"topic": "rd", "body": "fail-5", "delay": 60_000}]):
            t0 = time.monotonic()
            resp = d.push(job, timeout=30)
            results.append((resp.status, time.monotonic() - t0, resp.text[:200]))
        for status, took, text in results:
            self.assertEqual(status, 503, f"push while Redis is down: {text}")
            self.assertLess(took, 4.0, f"push while Redis is down took {took:.2f} s")
        self.assertStatus(d.delete(ok[0], timeout=30), 503, "delete while Redis is down")

        def pending_failed():
            return [row for row in ns.query(
                "SELECT id, state, body FROM message WHERE state IN ('delayed','ready','reserved')")
                if "fail-" in (row[2] or "")]
        wait_or_fail(self, lambda: not pending_failed(), 10,
                     "rows of refused pushes to be absent or aborted",
                     lambda: f"left pending in MySQL: {pending_failed()}")
        live = ns.query("SELECT id, state FROM message WHERE state IN ('delayed','ready','reserved')")
        self.assertEqual(sorted(live), sorted((i, "ready") for i in ok),
                         "a refused delete or push changed the live rows")

        # Redis comes back empty (it lost everything): pushes work again, /reStore brings back
        # exactly the acknowledged jobs, never a refused one.
        r.start()
        wait_or_fail(self, lambda: d.push({"topic": "rd", "body": "after"}, timeout=30).status == 200, 30,
                     "pushes to succeed after Redis came back")
        res = expect_ok(d.restore(expire=True), "/reStore")
        self.assertEqual((res["restored"], res["present"]), (5, 1), res)
        bodies = sorted(j["body"] for j in drain(d, "rd"))
        self.assertEqual(bodies, sorted([f"ok-{i}" for i in range(5)] + ["after"]))


class NothingDroppedTest(HourglassTestCase):
    """What the journal cannot write is kept, counted and logged, never dropped: a record MySQL
    refuses goes to refused_record with the server's error; an outbox entry the daemon cannot
    read goes to its shard's logbad stream. The records around them are written as usual."""

    def test_refused_records_and_unreadable_entries_are_kept(self):
        d = start_ready(self)
        ns = d.namespace
        jid = expect_ok(d.push({"topic": "kept", "body": 1, "delay": 600000}), "push")["id"]
        shard_log = next(k for k in ns.redis_keys("*:log") if ns.redis_cli("HEXISTS", k[:-3] + "jobs",
                                                                              id_key(jid)).strip() == "1")
        # MySQL refuses every transition of this job (a trigger stands in for whatever a server
        # may refuse: a value a column cannot hold, a constraint...)
        ns.execute(f"DELIMITER //\nCREATE TRIGGER refuse_one BEFORE INSERT ON transition FOR EACH ROW "
                   f"IF NEW.message_id = {jid} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; "
                   f"END IF//\nDELIMITER ;\n")
        expect_ok(d.request("GET", "/reschedule", params={"id": jid, "delay": 0}), "reschedule to now")
        # and an entry nobody can read
        ns.redis_cli("XADD", shard_log, "*", "t", "not a transition")
        # a normal job beside them is journaled as ever
        other = expect_ok(d.push({"topic": "other", "body": 2}), "push")["id"]
        self.assertEqual(expect_ok(d.get("other", timeout=2), "get")["id"], other)

        def refused():
            return ns.query(f"SELECT message_id, error, record FROM refused_record WHERE message_id = {jid}")
        wait_or_fail(self, lambda: refused(), 10, "the refused record to be kept in refused_record",
                     lambda: d.log_tail(20))
        mid, error, record = refused()[0]
        self.assertIn("refused by the test", error, "the server's error is kept with it")
        self.assertIn('"to":"ready"', record)
        bad = shard_log[:-3] + "logbad"
        wait_or_fail(self, lambda: ns.redis_cli("XLEN", bad).strip() == "1", 10, "the unreadable entry to be kept")
        self.assertIn("not a transition", ns.redis_cli("XRANGE", bad, "-", "+"))
        wait_or_fail(self, lambda: ns.query(f"SELECT state FROM message WHERE id = {other}") == [("reserved",)],
                     10, "the records beside them to be journaled")
        self.assertEqual(int(ns.redis_cli("XLEN", shard_log).strip() or 0), 0, "the outbox acknowledged them all")
        metrics = d.metrics().text
        self.assertRegex(metrics, r"hourglass_journal_refused_total 1\b")
        self.assertRegex(metrics, r"hourglass_outbox_unreadable_total 1\b")


class SqlSession:
    """An interactive `mariadb` client on the namespace's database: statements are sent as
    written and their output read line by line, so a test can hold a transaction open across
    steps (locks that a daemon's own transaction then meets)."""

    def __init__(self, tc, ns):
        self.proc = subprocess.Popen(
            [harness._which("mariadb"), "--no-defaults", "-uroot", f"--socket={ns.mariadb.socket}", "-D",
             ns.database, "-N", "-B", "--unbuffered"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        tc.addCleanup(self.close)

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def send(self, sql: str) -> None:
        self.proc.stdin.write(sql + "\n")
        self.proc.stdin.flush()

    def expect(self, marker: str, timeout: float) -> list[str]:
        """Lines read until `marker` (SELECT 'marker' ends what was sent); AssertionError if it
        does not come within timeout."""
        seen, deadline = [], time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"the SQL session did not reach {marker!r} in {timeout} s; it said {seen}")
            if line == marker:
                return seen
            seen.append(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


class LockConflictTest(HourglassTestCase):
    """A deadlock is not a lost connection. When InnoDB picks the journal's cycle as the victim
    of a deadlock with another writer (the pager, an operator's session), the cycle is rolled
    back whole and the connection is fine: the journal writes it again, and the pushes in it are
    answered 200 once it commits, not 503 with MySQL marked down for a reconnect."""

    def test_a_cycle_chosen_as_a_deadlock_victim_is_written_again(self):
        d = start_ready(self)
        ns = d.namespace
        far = 7_200_000  # beyond the default 1 h horizon: the journal writes a far key and far_count
        expect_ok(d.push({"topic": "dl", "body": 0, "delay": far}), "a first far push (dl's far_count row)")
        ns.execute("CREATE TABLE dl_scratch (n INT PRIMARY KEY) ENGINE=InnoDB")

        def deadlocks() -> int:
            return int(ns.query("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")[0][1])
        deadlocks_before = deadlocks()

        # A session holds dl's far_count row, and has written enough (1,000 rows) that InnoDB
        # will pick the journal's transaction, not this one, as the deadlock's victim.
        s = SqlSession(self, ns)
        s.send("BEGIN; INSERT INTO dl_scratch WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c "
               "WHERE n < 1000) SELECT n FROM c; UPDATE far_count SET jobs = jobs WHERE topic = 'dl'; SELECT 'held';")
        s.expect("held", 10)

        # A far push: its cycle inserts the message row (with its far key), then waits for dl's row.
        out: dict = {}
        th = threading.Thread(target=lambda: out.update(r=d.push({"topic": "dl", "body": 1, "delay": far},
                                                                  timeout=60)), daemon=True)
        th.start()
        wait_or_fail(self, lambda: ns.query("SELECT COUNT(*) FROM information_schema.INNODB_TRX "
                                            "WHERE trx_state = 'LOCK WAIT'") != [("0",)],
                     10, "the journal's cycle to wait for the session's lock", lambda: d.log_tail(20))

        # The session now waits for the far key the cycle inserted: a deadlock.
        s.send("SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL FOR UPDATE; SELECT 'scanned';")
        s.expect("scanned", 20)
        self.assertGreater(deadlocks(), deadlocks_before, "InnoDB saw a deadlock (else this test shows nothing)")
        s.send("ROLLBACK; SELECT 'done';")
        s.expect("done", 10)

        th.join(60)
        self.assertStatus(out.get("r"), 200, "the push whose cycle was the deadlock's victim")
        jid = out["r"].json()["id"]
        self.assertEqual(ns.query(f"SELECT state FROM message WHERE id = {jid}"), [("far",)])
        self.assertEqual(ns.query("SELECT jobs FROM far_count WHERE topic = 'dl'"), [("2",)],
                         "counted once: the rolled-back cycle's count went with it")
        self.assertIn("writing it again (1 of 3)", d.log())
        metrics = d.metrics().text
        self.assertRegex(metrics, r"hourglass_journal_lock_retries_total 1\b")
        self.assertRegex(metrics, r"hourglass_mysql_reconnects_total 0\b", "MySQL never counted as down")
        expect_ok(d.push({"topic": "dl", "body": 2, "delay": far}), "the next push")
