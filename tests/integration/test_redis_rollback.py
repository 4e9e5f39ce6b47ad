"""Redis that comes back with older data (restarted from an RDB snapshot; a replica promoted
after losing the master's last writes): `/reStore` reconciles both ways.

The loss is also noticed without an admin: each instance keeps a growing mark in every shard
(src/duties/lossmark.h); Redis holding an older mark, or none, is a loss — logged, counted, shown in
/health as "degraded" until a restore repairs it, and with [redis] auto_restore repaired by
the daemon itself.

The reproduction (issue 17): push a job; SAVE; delete it (200, committed); kill -9 Redis and
start it from the snapshot: the deleted job is back in Redis. Restore used to count it
"present" and leave it, and the next GET delivered it — a deleted job delivered, which the
contract forbids. Now every job Redis holds is compared with its MySQL row by version and the
newer wins: the deleted and the finished job leave Redis, the rescheduled one takes its new
due time, and the jobs Redis lost entirely come back as before.

    make integration T=test_redis_rollback
"""

from __future__ import annotations

import re
import time

from core_common import CoreTestCase
from harness import free_port, id_key, journal_idle, now_ms, wait_until


def held(redis, d, jid: str) -> bool:
    """Does `redis` hold job `jid` (its record in its shard's jobs hash, as d lays them out)?"""
    shard = (int(jid) & 0xFFF) % int(d.config["redis"]["shards"])
    return redis.cli("HEXISTS", f"{d.config['redis']['prefix']}:{{{shard}}}:jobs", id_key(jid)) == "1"


def held_in(ns, d, jid: str) -> bool:
    """held(), in the namespace's own Redis database."""
    shard = (int(jid) & 0xFFF) % int(d.config["redis"]["shards"])
    return ns.redis_cli("HEXISTS", f"{d.config['redis']['prefix']}:{{{shard}}}:jobs", id_key(jid)) == "1"


def deliver_until_due(tc, d, topic: str, due: int, want: int) -> list[str]:
    """Get and finish jobs of `topic` until `want` came or a while after `due` (unix ms) passed;
    the ids delivered, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + (due - now_ms()) / 1000 + 8
    while time.monotonic() < deadline and len(seen) < want:
        r = d.get(topic, timeout=2)
        if r.status == 200:
            seen.append(r.json()["id"])
            tc.assertStatus(d.finish(r.json()["id"]), 200)
    return seen


class RolledBackRedisTest(CoreTestCase):

    def test_restore_after_a_rollback_lets_mysql_win_for_every_job_redis_holds(self):
        redis = self.private_redis()
        d = self.start_daemon({"redis": {"address": redis.address, "db": 0}})
        self.wait_healthy(d)
        ns = d.namespace

        due = now_ms() + 12000  # none of these is due before the restore has run
        deleted = self.assertJsonOk(d.push({"topic": "rb", "body": "deleted", "runAt": due}))["id"]
        moved = self.assertJsonOk(d.push({"topic": "rb", "body": "rescheduled", "runAt": due}))["id"]
        finished = self.assertJsonOk(d.push({"topic": "rbf", "body": "finished"}))["id"]
        kept = self.assertJsonOk(d.push({"topic": "rb", "body": "kept", "runAt": due}))["id"]
        got = self.assertJsonOk(d.get("rbf", timeout=5))
        self.assertEqual(got["id"], finished)
        wait_until(lambda: journal_idle(d), 10, 0.05, "MySQL to have everything before the snapshot")
        redis.cli("SAVE")

        # after the snapshot: a delete, a finish, a reschedule, and a new push
        self.assertStatus(d.delete(deleted), 200, "delete")
        self.assertStatus(d.finish(finished), 200, "finish")
        self.assertStatus(d.reschedule(moved, delay=0), 200, "reschedule to now")
        after = self.assertJsonOk(d.push({"topic": "rb", "body": "after-snapshot", "runAt": due}))["id"]
        wait_until(lambda: journal_idle(d), 10, 0.05, "MySQL to have every change")
        self.assertEqual(ns.query(f"SELECT state FROM message WHERE id = {moved}"), [("ready",)])

        # Redis dies and comes back from the snapshot
        redis.kill()
        redis.start()
        self.assertTrue(all(held(redis, d, j) for j in (deleted, finished, moved)), "the snapshot has the old jobs")
        self.assertFalse(held(redis, d, after), "the snapshot lacks the job pushed after it")
        self.wait_healthy(d)
        wait_until(lambda: d.push({"topic": "warm", "body": 1}).status == 200, 15, 0.1,
                   "every worker to reconnect to the restarted Redis")

        res = self.assertJsonOk(d.restore(expire=True, timeout=60))
        self.assertEqual(res["removed"], 2, f"the deleted and the finished job leave Redis: {res}")
        self.assertEqual(res["aligned"], 1, f"the rescheduled job takes MySQL's newer state: {res}")
        self.assertEqual(res["restored"], 1, f"the job Redis lost comes back: {res}")
        self.assertGreaterEqual(res["checked"], 4, res)
        self.assertFalse(held(redis, d, deleted), "the deleted job is gone from Redis")
        self.assertFalse(held(redis, d, finished), "the finished job is gone from Redis")
        self.assertEqual(d.job(deleted).json()["state"], "deleted")
        self.assertEqual(d.job(finished).json()["state"], "finished")

        # what is delivered now: the rescheduled job at once (its old due time is 12 s away)
        j = self.assertJsonOk(d.get("rb", timeout=5))
        self.assertEqual(j["id"], moved, "the rescheduled job is due now, as MySQL says")
        self.assertLess(now_ms(), due, "delivered before its old due time")
        self.assertStatus(d.finish(moved), 200)

        # a second restore finds nothing left to do
        again = self.assertJsonOk(d.restore(expire=True, timeout=60))
        self.assertEqual((again["removed"], again["aligned"], again["restored"]), (0, 0, 0), again)

        # and once the rest is due, the deleted job is never delivered; the others are, once
        seen = deliver_until_due(self, d, "rb", due, 2)
        self.assertEqual(sorted(seen), sorted([kept, after]), "each remaining job once, the deleted one never")
        self.assertEqual(d.get("rb", timeout=1).status, 204, "nothing else is delivered")


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


class LossDetectionTest(CoreTestCase):
    """Redis restarted from a snapshot is noticed within seconds, without an admin."""

    def rolled_back(self, auto_restore: bool):
        redis = self.private_redis()
        d = self.start_daemon({"redis": {"address": redis.address, "db": 0, "auto_restore": auto_restore}})
        self.wait_healthy(d)
        gone = self.assertJsonOk(d.push({"topic": "ld", "body": "deleted", "delay": 60000}))["id"]
        self.assertEqual(d.health().json()["status"], "ok")
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal")
        time.sleep(1.2)  # a mark written after the push: the snapshot holds this instance's marks
        redis.cli("SAVE")
        time.sleep(1.2)  # the marks move on past the snapshot's
        self.assertStatus(d.delete(gone), 200, "delete after the snapshot")
        redis.kill()
        redis.start()
        return redis, d, gone

    def test_a_rollback_is_shown_in_health_until_a_restore_repairs_it(self):
        redis, d, gone = self.rolled_back(auto_restore=False)

        def degraded():
            r = d.health()
            return r.json() if r.status == 200 and r.json().get("status") == "degraded" else None
        h = wait_until(degraded, 15, 0.1, "/health to say degraded")
        self.assertEqual(h["redisLoss"]["kind"], "rolled back", h)
        self.assertIn("run GET /reStore", h["redisLoss"]["message"])
        self.assertIn("came back with older data (rolled back)", d.log())
        self.assertGreaterEqual(metric(d.metrics().text, "hourglass_redis_losses_total"), 1)
        time.sleep(2)
        self.assertEqual(d.health().json()["status"], "degraded", "nothing repaired it yet")

        res = self.assertJsonOk(d.restore(expire=True, timeout=60))
        self.assertEqual(res["removed"], 1, res)
        wait_until(lambda: d.health().json()["status"] == "ok", 10, 0.1, "/health to be ok after the restore")
        self.assertIn("was repaired by a restore", d.log())
        self.assertEqual(d.job(gone).json()["state"], "deleted")

    def test_a_redis_that_lost_everything_is_named_but_stays_ok(self):
        # nothing wrong can be delivered (the jobs are missing, none come back): "ok" as
        # before, with the loss named until a restore puts the jobs back
        d = self.start_daemon()
        self.wait_healthy(d)
        jid = self.assertJsonOk(d.push({"topic": "lost", "body": 1, "delay": 60000}))["id"]
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal")
        time.sleep(1.2)  # this instance's marks are written
        d.namespace.flush_redis()
        def named():  # (the id lease went with the data: /health is 503 until it is taken again)
            r = d.health()
            return r.json() if r.status == 200 and "redisLoss" in r.json() else None
        h = wait_until(named, 15, 0.1, "/health to be 200 and name the loss")
        self.assertEqual((h["status"], h["redisLoss"]["kind"]), ("ok", "lost"), h)
        res = self.assertJsonOk(d.restore(timeout=60))
        self.assertEqual(res["restored"], 1, res)
        wait_until(lambda: "redisLoss" not in d.health().json(), 10, 0.1, "the loss to be repaired")
        self.assertEqual(d.job(jid).json()["state"], "delayed")

    def test_auto_restore_repairs_a_rollback_without_an_admin(self):
        redis, d, gone = self.rolled_back(auto_restore=True)
        wait_until(lambda: "auto-restore: Redis lost data" in d.log(), 15, 0.1, "the automatic restore to start")
        wait_until(lambda: not held(redis, d, gone), 30, 0.1, "the deleted job to leave Redis again")
        wait_until(lambda: d.health().json()["status"] == "ok", 15, 0.1, "/health to be ok again")
        self.assertRegex(d.log(), r"restore: scanned \d+, .* removed 1 ")
        self.assertEqual(d.get("ld", timeout=1).status, 204, "the deleted job is not delivered")
        self.assertEqual(d.log().count("auto-restore: Redis lost data"), 1, "one automatic restore")


class RollbackComesDueTest(CoreTestCase):
    """Issue 31, item 3: a job deleted after the snapshot that comes due after the rollback.

    Before, the mover made the resurrected job ready at its due time and gave it the version
    MySQL holds for the delete; /reStore then saw equal versions, skipped it (aligned 0,
    removed 0) and the deleted job was delivered. Now the rollback fences the shard (mark.lua):
    it moves and delivers nothing until its fence check — run at once by the instance that saw
    the rollback, without [redis] auto_restore or an admin — has let MySQL win; and an end MySQL
    holds wins at an equal version too (VersionCollisionTest)."""

    def test_a_deleted_job_that_comes_due_after_a_rollback_is_never_delivered(self):
        redis = self.private_redis()
        d = self.start_daemon({"redis": {"address": redis.address, "db": 0, "auto_restore": False}})
        self.wait_healthy(d)
        time.sleep(1.2)  # this instance's marks are in every shard
        # due a second after Redis comes back, before the runbook's /reStore 2 s after it
        pushed = now_ms()
        jid = self.assertJsonOk(d.push({"topic": "rcd", "body": "deleted", "delay": 2500}))["id"]
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal")
        redis.cli("SAVE")
        time.sleep(1.2)  # the marks move on past the snapshot's: the rollback is seen
        self.assertStatus(d.delete(jid), 200, "delete after the snapshot")
        redis.kill()
        redis.start()
        self.assertTrue(held(redis, d, jid), "the snapshot holds the deleted job")
        restarted = time.monotonic()

        delivered, restored = [], None
        while now_ms() < pushed + 2500 + 5000:  # until well after its due time
            if restored is None and time.monotonic() - restarted > 2:
                r = d.restore(timeout=60)  # the runbook's step, 2 s after the restart (as reported)
                restored = r.json() if r.status == 200 else r.status
            r = d.get("rcd", timeout=0.5, http_timeout=10)
            if r.status == 200:
                delivered.append(r.json()["id"])
        self.assertNotIn(jid, delivered, f"the deleted job was delivered (restore said {restored})")
        self.assertFalse(held(redis, d, jid), "the deleted job left Redis")
        self.assertTrue(re.search(r"shard \d+: fence check: Redis held \d+ jobs, aligned \d+, removed 1 ", d.log()),
                        "no fence check removed the deleted job")
        # the shard delivers again: a new job on it is delivered
        wait_until(lambda: "fencedShards" not in d.health().json(), 15, 0.1, "the fence to be lifted")
        fresh = self.assertJsonOk(d.push({"topic": "rcd", "body": "fresh"}))["id"]
        self.assertEqual(self.assertJsonOk(d.get("rcd", timeout=5))["id"], fresh)


class VersionCollisionTest(CoreTestCase):
    """Two histories that reached one version: Redis holds a job live at version v while MySQL
    ended it (deleted, finished) at v. A job ends by leaving Redis, so that cannot be one history;
    /reStore lets the end win (before, equal versions were skipped)."""

    def test_an_end_in_mysql_wins_at_an_equal_version(self):
        d = self.start_daemon()
        self.wait_healthy(d)
        ns = d.namespace
        ended = {}
        for state in ("deleted", "finished"):
            jid = self.assertJsonOk(d.push({"topic": "vc", "body": state, "delay": 60000}))["id"]
            wait_until(lambda: journal_idle(d), 10, 0.05, "the journal")
            ns.execute(f"UPDATE message SET state = '{state}' WHERE id = {jid}")  # same version
            ended[jid] = state
        live = self.assertJsonOk(d.push({"topic": "vc", "body": "live", "delay": 60000}))["id"]
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal")
        res = self.assertJsonOk(d.restore(timeout=60))
        self.assertEqual(res["removed"], 2, res)
        for jid in ended:
            self.assertFalse(held_in(ns, d, jid), f"job {jid} ({ended[jid]} in MySQL) left Redis")
        self.assertTrue(held_in(ns, d, live), "a job MySQL has live at the same version stays")
        again = self.assertJsonOk(d.restore(timeout=60))
        self.assertEqual(again["removed"], 0, again)


class RollbackUnderTrafficTest(CoreTestCase):
    """A few thousand jobs in every state, changed in every way after the snapshot, Redis rolled
    back, restored while other producers and consumers keep going: afterwards every job's
    state in Redis is the one MySQL has, no deleted or finished job is left in Redis, and a
    second restore changes nothing."""

    def test_every_job_ends_as_mysql_says(self):
        from test_journal_common import consume, pmap, states_by_id
        import threading

        redis = self.private_redis()
        d = self.start_daemon({"redis": {"address": redis.address, "db": 0}})
        self.wait_healthy(d)
        ns = d.namespace
        far = now_ms() + 3_600_000

        def push_many(topic, n, **fields):
            ids = []
            for start in range(0, n, 200):
                jobs = [{"topic": topic, "body": i, "ttr": 600_000, **fields} for i in range(start, min(n, start + 200))]
                ids += self.assertJsonOk(d.push(jobs))["ids"]
            return ids

        delayed = push_many("rt.d", 1500, runAt=far)
        ready = push_many("rt.r", 1200)
        reserved = [j["id"] for j in consume(d, "rt.r", 600)]
        # dead: one try, a 1 s lease that runs out
        doomed = push_many("rt.x", 200, tries=1, ttr=1000)
        self.assertEqual(len(consume(d, "rt.x", 200)), 200)
        wait_until(lambda: d.stats().json()["topics"].get("rt.x", {}).get("dead") == 200, 15, 0.1,
                   "the leases to run out (dead)")
        wait_until(lambda: journal_idle(d), 15, 0.05, "the journal")
        redis.cli("SAVE")

        # after the snapshot: every kind of change
        deleted = delayed[:300] + doomed[:50]
        rescheduled = delayed[300:450]
        finished = reserved[:200]
        released = reserved[200:300]
        requeued = doomed[50:100]
        pmap(lambda i: self.assertStatus(d.delete(i), 200), deleted)
        pmap(lambda i: self.assertStatus(d.restore_one(i), 200), requeued)
        pmap(lambda i: self.assertStatus(d.reschedule(i, run_at=far + 60_000), 200), rescheduled)
        pmap(lambda i: self.assertStatus(d.finish(i), 200), finished)
        pmap(lambda i: self.assertStatus(d.release(i, delay=3_000_000), 200), released)
        pushed_after = push_many("rt.n", 150, runAt=far)
        wait_until(lambda: journal_idle(d), 15, 0.05, "the journal")

        # traffic on another topic the whole time from here on
        stop = threading.Event()
        errors: list = []

        def traffic():
            while not stop.is_set():
                try:
                    r = d.push({"topic": "rt.bg", "body": 1}, timeout=10)
                    if r.status == 200:
                        g = d.get("rt.bg", timeout=0)
                        if g.status == 200:
                            d.finish(g.json()["id"], timeout=10)
                except OSError as e:
                    errors.append(e)
                    time.sleep(0.05)

        t = threading.Thread(target=traffic, daemon=True)
        t.start()
        try:
            redis.kill()
            redis.start()
            self.wait_healthy(d)
            wait_until(lambda: d.push({"topic": "warm", "body": 1}).status == 200, 15, 0.1, "the workers")
            res = self.assertJsonOk(d.restore(expire=True, timeout=120))
            self.assertEqual(res["removed"], len(deleted) + len(finished), res)
            self.assertEqual(res["aligned"], len(rescheduled) + len(released) + len(requeued), res)
            self.assertGreaterEqual(res["restored"], len(pushed_after), res)
        finally:
            stop.set()
            t.join(15)

        wait_until(lambda: journal_idle(d), 20, 0.1, "the journal after the restore")
        everyone = delayed + ready + pushed_after + doomed
        mysql = states_by_id(ns.query, everyone)

        wrong = []
        for jid in everyone:
            seen = d.job(jid).json()["state"]
            if mysql[jid] in ("finished", "deleted"):
                if held(redis, d, jid):
                    wrong.append((jid, mysql[jid], "still in Redis"))
            elif seen != mysql[jid] or not held(redis, d, jid):
                wrong.append((jid, mysql[jid], seen))
        self.assertEqual(wrong, [], f"{len(wrong)} jobs differ from MySQL, e.g. {wrong[:5]}")
        self.assertEqual({mysql[i] for i in deleted}, {"deleted"})
        self.assertEqual({mysql[i] for i in finished}, {"finished"})
        self.assertEqual({mysql[i] for i in released}, {"delayed"})
        self.assertEqual({mysql[i] for i in requeued}, {"ready"})
        self.assertEqual({mysql[i] for i in doomed[100:]}, {"dead"})
        # the reserved jobs nobody touched after the snapshot are still reserved (their leases
        # were in the snapshot too), and the ready ones still ready
        self.assertEqual({mysql[i] for i in reserved[300:]}, {"reserved"})
        self.assertEqual({mysql[i] for i in ready if i not in set(reserved)}, {"ready"})

        again = self.assertJsonOk(d.restore(expire=True, timeout=120))
        self.assertEqual((again["removed"], again["aligned"], again["restored"]), (0, 0, 0), again)


class _Vip:
    """A TCP forwarder standing for a failover's virtual address: clients connect to it, it
    forwards to the current master; switch() points it at another server and cuts the
    connections it carried (as a VIP move or a Sentinel-aware proxy does)."""

    def __init__(self, target_port: int) -> None:
        import socket
        import threading
        self.target = target_port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: list = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            if self.closed:
                client.close()
                server.close()
                return
            with self.lock:
                self.conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b) -> None:
        import socket
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def switch(self, target_port: int) -> None:
        import socket
        self.target = target_port
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.closed = True
        self.sock.close()
        self.switch(self.target)  # cuts and closes what it carried


class PromotedReplicaTest(CoreTestCase):
    """A replica promoted after asynchronous replication dropped the master's last writes:
    replication is cut (the replica follows an absent master), a delete and a push go to the master, the
    master is killed, the replica resumes and is promoted behind the same address. The
    daemon notices the loss by itself and, with auto_restore, repairs it: the deleted job is
    never delivered, the job pushed after the pause is delivered."""

    def test_a_failover_that_lost_writes_is_repaired(self):
        master = self.private_redis()
        replica = self.private_redis(args=["--replicaof", "127.0.0.1", str(master.port)])
        vip = _Vip(master.port)
        self.addCleanup(vip.close)
        d = self.start_daemon({"redis": {"address": f"127.0.0.1:{vip.port}", "db": 0, "auto_restore": True}})
        self.wait_healthy(d)
        due = now_ms() + 15_000
        gone = self.assertJsonOk(d.push({"topic": "fo", "body": "deleted-after-pause", "runAt": due}))["id"]
        kept = self.assertJsonOk(d.push({"topic": "fo", "body": "kept", "runAt": due}))["id"]
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal")
        wait_until(lambda: held(replica, d, gone), 10, 0.05, "replication")
        time.sleep(1.5)  # the replica has this instance's marks as of now

        # replication stops (the replica follows a master that is not there): what follows
        # reaches the master only, as writes an asynchronous replica had not received yet
        replica.cli("REPLICAOF", "127.0.0.1", str(free_port()))
        time.sleep(1.5)  # the marks move on past the replica's
        self.assertStatus(d.delete(gone), 200, "delete while the replica lags")
        late = self.assertJsonOk(d.push({"topic": "fo", "body": "pushed-after-pause", "runAt": due}))["id"]
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal")
        master.kill()
        replica.cli("REPLICAOF", "NO", "ONE")
        self.assertTrue(held(replica, d, gone), "the promoted replica has the deleted job")
        vip.switch(replica.port)

        wait_until(lambda: "came back with older data" in d.log(), 20, 0.1, "the loss to be noticed")
        wait_until(lambda: not held(replica, d, gone), 30, 0.1, "the automatic restore to remove the deleted job")
        wait_until(lambda: d.health().json().get("status") == "ok", 15, 0.1, "/health ok again")
        self.assertEqual(d.job(gone).json()["state"], "deleted")
        self.assertEqual(d.job(late).json()["state"], "delayed", "the job pushed after the pause is back")

        seen = deliver_until_due(self, d, "fo", due, 2)
        self.assertEqual(sorted(seen), sorted([kept, late]), "the deleted job is never delivered")
