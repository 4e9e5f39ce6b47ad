"""The journal's rows through MariaDB's bulk binary protocol (src/mysql/journal_bulk.h).

A push's message row and first transition row, and every later transition row and update of a
message row, go to MySQL as arrays bound to three prepared statements ([mysql] bulk_inserts =
true, the default) instead of SQL text. What lands in MySQL must be the same row for row: two
daemons, one of each kind, push the same jobs of every shape (a bizKey, a backoff, trace
context, a group, due now, delayed, far beyond the horizon, bodies with quotes, backslashes and
non-ASCII text), take them through every kind of later change, and their rows are compared
column by column, leaving out only what differs between two runs by nature (ids, times, the
instance's name, a far job's shard, which follows from its id). Rows larger than a bulk
execution's chunk go in several executions of one transaction. A refused row still fails its
push alone (the journal's group-by-group retry, as with text)."""

from __future__ import annotations

import concurrent.futures as cf
import json
import re

from harness import Daemon, HourglassTestCase, journal_idle, wait_until

HORIZON_MS = 600_000
DAY_MS = 86_400_000
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

MESSAGE_COMPARED = ("topic, biz_key, body, run_at - created_at, priority, ttr, tries, attempts, backoff, state, "
                    "version, IF(version = 1, updated_at - created_at, NULL), far_shard IS NULL, far_run_at - run_at, traceparent, "
                    "tracestate, group_key")
# (later changes, such as a bizKey duplicate's abort, happen when they happen: their times are not compared)
TRANSITION_COMPARED = ("t.version, t.from_state, t.to_state, IF(t.version = 1, t.at - m.created_at, NULL), t.actor, "
                       "t.host, t.attempts")


def job_shapes(tag: str) -> list[dict]:
    """Jobs of every shape a message row can take; "n" in each body pairs them across daemons."""
    return [
        {"topic": "bulk-plain", "body": {"n": 0, "tag": tag}, "delay": 300000},
        {"topic": "bulk-ready", "body": {"n": 1, "text": "quote ' double \" backslash \\ tab \t"}},
        {"topic": "bulk-biz", "body": {"n": 2}, "delay": 300000, "bizKey": "order-ünïcode-42"},
        {"topic": "bulk-tuned", "body": {"n": 3}, "delay": 300000, "priority": 7, "ttr": 12345, "tries": 9,
         "backoff": 2500},
        {"topic": "bulk-trace", "body": {"n": 4}, "delay": 300000, "traceparent": TRACEPARENT,
         "tracestate": "vendor=a,other=b"},
        {"topic": "bulk-trace", "body": {"n": 5}, "delay": 300000, "traceparent": TRACEPARENT},
        {"topic": "bulk-group", "body": {"n": 6}, "delay": 300000, "group": "tenant-ß"},
        {"topic": "bulk-far", "body": {"n": 7}, "delay": 2 * DAY_MS},
        {"topic": "bulk-far", "body": {"n": 8}, "delay": 2 * DAY_MS, "bizKey": "far-1", "group": "g"},
        {"topic": "bulk-text", "body": "plain string with \u00e9 and \u4e2d and \\u0000 escaped", "delay": 300000},
    ]


class BulkRowsTest(HourglassTestCase):
    def start(self, bulk: bool) -> Daemon:
        d = self.start_daemon({"http": {"threads": 1, "max_body": 4 << 20},
                               "queue": {"horizon": HORIZON_MS},
                               "mysql": {"bulk_inserts": "true" if bulk else "false"}})
        d.wait_ready()
        return d

    def rows(self, d: Daemon) -> tuple[list, list]:
        """Message and transition rows of every job, keyed by the pair's number in its body."""
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal to settle")
        q = d.namespace.query
        messages = q(f"SELECT body, {MESSAGE_COMPARED} FROM message ORDER BY id")
        transitions = q(f"SELECT m.body, {TRANSITION_COMPARED}, t.instance FROM job_history t "
                        f"JOIN message m ON m.id = t.message_id ORDER BY m.id, t.version")
        # the actor names the Redis key that acted: this daemon's prefix, and the job's shard
        prefix = d.config["redis"]["prefix"]
        transitions = [r[:5] + (re.sub(r"\{\d+\}", "{shard}", r[5].replace(prefix, "PREFIX:")),) + r[6:]
                       for r in transitions]
        # paired by content (the ids, and so their order, differ between the daemons)
        return sorted(messages, key=repr), sorted(transitions, key=repr)

    def test_rows_are_the_same_as_text_rows(self):
        bulk, text = self.start(True), self.start(False)
        self.assertNotIn("written as SQL text", bulk.log(), "the bulk daemon uses the bulk protocol")
        self.assertIn("journal: rows are written as SQL text ([mysql] bulk_inserts = false)", text.log())
        for d in (bulk, text):
            for job in job_shapes("one by one"):  # one job a cycle
                self.assertStatus(d.push(job), 200, f"push {job}")
            self.assertStatus(d.push(job_shapes("in one array")), 200, "an array push: one cycle")
        (bm, bt), (tm, tt) = self.rows(bulk), self.rows(text)
        self.assertEqual(len(bm), 2 * len(job_shapes("")), bm)
        self.assertEqual([r[1:] for r in bm], [r[1:] for r in tm], "message rows: bulk vs text")
        self.assertEqual([r[1:-1] for r in bt], [r[1:-1] for r in tt], "transition rows: bulk vs text")
        self.assertEqual({r[-1] for r in bt}, {bulk.health().json()["instance"]}, "the bulk daemon's instance")
        # the values themselves, not only their agreement
        by_n = {json.loads(r[0])["n"] if r[0].startswith("{") else "text": r for r in bm}
        self.assertEqual(by_n[2][2], "order-ünïcode-42")
        self.assertEqual(by_n[3][5:10], ("7", "12345", "9", "0", "2500"))
        self.assertEqual(by_n[4][15:17], (TRACEPARENT, "vendor=a,other=b"))
        self.assertEqual(by_n[5][15:17], (TRACEPARENT, None))
        self.assertEqual(by_n[6][17], "tenant-ß")
        self.assertEqual(by_n[7][10], "far", "a job beyond the horizon is MySQL's alone")
        self.assertEqual((by_n[7][13], by_n[7][14]), ("0", "0"), "a far job carries its far key")
        self.assertEqual((by_n[0][13], by_n[0][14]), ("1", None), "a near job has none")
        self.assertEqual(by_n[1][10], "ready")
        self.assertEqual(sorted({r[2:5] for r in bt}), [("", "delayed", "0"), ("", "far", "0"), ("", "ready", "0"),
                                                        ("delayed", "aborted", None), ("far", "aborted", None)],
                         "each job's creation at its push time; the second pass's bizKey duplicates aborted")

    def lifecycle(self, d: Daemon) -> None:
        """Every kind of change a message row takes after its push, some in one journal cycle and
        some alone: deliveries, a finish, a finish by the next get, releases (to later and to
        now, then delivered again), a delete of a reserved job, a reschedule, a replace."""
        jobs = [{"topic": "life", "body": {"n": n}, "ttr": 60000} for n in range(8)]
        jobs.append({"topic": "life-later", "body": {"n": 8}, "delay": 300000, "bizKey": "k"})
        self.assertStatus(d.push(jobs), 200, "the jobs")
        got = self.assertStatus(d.get("life", count=8), 200, "a delivery of 8").json()
        ids = {job["body"]["n"]: job["id"] for job in got}
        self.assertEqual(sorted(ids), list(range(8)))
        self.assertStatus(d.finish(ids[0]), 200, "finish")
        self.assertStatus(d.release(ids[1], delay=300000), 200, "release to later")
        self.assertStatus(d.reschedule(ids[1], delay=600000), 200, "reschedule")
        self.assertStatus(d.release(ids[2], delay=0), 200, "release to now")
        self.assertStatus(d.delete(ids[3]), 200, "delete a reserved job")
        again = self.assertStatus(d.get("life", params={"finish": ids[4]}), 200, "get?finish=").json()
        self.assertEqual(again["body"]["n"], 2, "the released job is delivered again")
        self.assertStatus(d.push({"topic": "life-later", "body": {"n": 8, "replaced": True}, "delay": 400000,
                                  "bizKey": "k", "replace": True}), 200, "a replace")
        with cf.ThreadPoolExecutor(4) as pool:  # some in one cycle
            answers = list(pool.map(d.finish, [ids[5], ids[6], ids[7], again["id"]]))
        self.assertEqual([a.status for a in answers], [200] * 4, [a.text for a in answers])

    def test_later_changes_are_the_same_as_text_rows(self):
        """Transition rows and message-row updates (journal_bulk_transitions, journal_bulk_updates)
        against the text path's, for every kind of change after the push: each job's whole
        history (job_history: its push, recorded in its message row, then its transitions)."""
        bulk, text = self.start(True), self.start(False)
        compared = ("topic, body, priority, ttr, tries, attempts, state, version, backoff, biz_key, "
                    "updated_at >= created_at, far_shard IS NULL")
        rows = []
        for d in (bulk, text):
            self.lifecycle(d)
            wait_until(lambda: journal_idle(d), 10, 0.05, "the journal to settle")
            q = d.namespace.query
            rows.append((sorted(q(f"SELECT {compared} FROM message")),
                         sorted(q("SELECT m.body, t.version, t.from_state, t.to_state, t.attempts, t.actor FROM "
                                  "job_history t JOIN message m ON m.id = t.message_id")),
                         q("SELECT run_at - updated_at FROM message WHERE topic = 'life-later' AND state = 'delayed'")))
        (bm, bt, blater), (tm, tt, tlater) = rows
        self.assertEqual(bm, tm, "message rows after their changes: bulk vs text")
        prefix = {d: d.config["redis"]["prefix"] for d in (bulk, text)}
        norm = [[r[:5] + (re.sub(r"\{\d+\}", "{shard}", r[5].replace(prefix[d], "PREFIX:")),) for r in t]
                for d, t in ((bulk, bt), (text, tt))]
        self.assertEqual(sorted(norm[0]), sorted(norm[1]), "transition rows: bulk vs text")
        for later in (blater, tlater):  # the replace's delay, from its own time (a ms may pass between the two)
            self.assertEqual(len(later), 1, later)
            self.assertIn(int(later[0][0]), range(399_000, 400_001), "the replaced job's due time")
        # the values themselves, not only their agreement
        states = {json.loads(r[1])["n"]: (r[6], r[5], r[7]) for r in bm}  # n -> state, attempts, version
        self.assertEqual(states, {0: ("finished", "1", "3"), 1: ("delayed", "1", "4"), 2: ("finished", "2", "5"),
                                  3: ("deleted", "1", "3"), 4: ("finished", "1", "3"), 5: ("finished", "1", "3"),
                                  6: ("finished", "1", "3"), 7: ("finished", "1", "3"), 8: ("delayed", "0", "2")},
                         bm)
        self.assertEqual(len(bt), 9 + 9 + 9 + 1 + 1 + 2, "9 pushes, 9 deliveries (one again), 9 finishes, "
                         "releases and the delete, the reschedule, the replace of the holder, and the replacing "
                         "push's own row: created, then aborted")

    def test_rows_larger_than_a_chunk(self):
        """30 jobs of 100 kB: several bulk executions (1 MB each) in one transaction."""
        d = self.start(True)
        big = "x" * 100_000
        r = self.assertStatus(d.push([{"topic": "bulk-big", "body": {"n": i, "pad": big}, "delay": 300000}
                                      for i in range(30)]), 200, "an array push of 3 MB")
        ids = r.json()["ids"]
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal to settle")
        rows = d.namespace.query("SELECT id, LENGTH(body), state FROM message ORDER BY id")
        self.assertEqual([x[0] for x in rows], sorted(str(i) for i in ids))
        self.assertTrue(all(int(x[1]) > 100_000 and x[2] == "delayed" for x in rows), rows[:3])
        self.assertEqual(d.namespace.query("SELECT COUNT(*) FROM job_history"), [("30",)])
        self.assertEqual(d.stats().json()["topics"]["bulk-big"]["delayed"], 30)

    def test_a_refused_row_fails_its_push_alone(self):
        """MySQL refuses a row (here: a CHECK constraint stands for any per-row refusal): the cycle's
        other pushes are written again group by group and succeed; the refused one gets 503."""
        d = self.start(True)
        ns = d.namespace
        ns.execute("ALTER TABLE message ADD CONSTRAINT refuse_poison CHECK (topic <> 'bulk-poison')")
        self.addCleanup(ns.execute, "ALTER TABLE message DROP CONSTRAINT IF EXISTS refuse_poison")
        jobs = [{"topic": "bulk-poison" if i == 5 else "bulk-fine", "body": {"n": i}, "delay": 300000}
                for i in range(12)]
        with cf.ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(d.push, jobs))
        self.assertEqual([a.status for a in answers], [503 if i == 5 else 200 for i in range(12)],
                         [a.text[:120] for a in answers])
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal to settle")
        self.assertEqual(ns.query("SELECT topic, COUNT(*) FROM message GROUP BY topic"), [("bulk-fine", "11")])
        self.assertEqual(d.stats().json()["topics"]["bulk-fine"]["delayed"], 11)
        self.assertNotIn("bulk-poison", d.stats().json()["topics"])
