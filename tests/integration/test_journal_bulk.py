"""The journal's new-job rows through MariaDB's bulk binary protocol (src/mysql/journal_bulk.h).

A push's message row and first transition row go to MySQL as arrays bound to two prepared
INSERTs ([mysql] bulk_inserts = true, the default) instead of SQL text. What lands in MySQL must
be the same row for row: two daemons, one of each kind, push the same jobs of every shape (a
bizKey, a backoff, trace context, a group, due now, delayed, far beyond the horizon, bodies with
quotes, backslashes and non-ASCII text) and their rows are compared column by column, leaving out
only what differs between two pushes by nature (ids, times, the instance's name, a far job's
shard, which follows from its id). Rows larger than a bulk execution's chunk go in several
executions of one transaction. A refused row still fails its push alone (the journal's
group-by-group retry, as with text).
"""

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
        transitions = q(f"SELECT m.body, {TRANSITION_COMPARED}, t.instance FROM transition t "
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
        self.assertIn("new jobs are written as SQL text ([mysql] bulk_inserts = false)", text.log())
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
        self.assertEqual(d.namespace.query("SELECT COUNT(*) FROM transition"), [("30",)])
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
