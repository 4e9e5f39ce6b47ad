"""The MySQL schema: the daemon refuses a database without it; sql/schema.sql is idempotent.

Contract: "Schema: sql/schema.sql, idempotent (safe to apply twice)"; architecture: "The
daemon refuses to start when these tables are missing or older than it needs
(schema_version); it never changes the schema itself."
"""

from __future__ import annotations

import os
import subprocess
import time

from harness import (MYSQL_PASSWORD, MYSQL_USER, SCHEMA_SQL, Daemon, DaemonError, HOST,
                     HourglassTestCase, topic_shard)
from test_journal_common import expect_ok, journal_idle, start_ready, wait_healthy, wait_or_fail


# what a database of schema 8 lacks of schema 9 (the job_history view goes first: it reads them)
DROP_PUSH_COLUMNS = ("DROP COLUMN push_state, DROP COLUMN push_actor, DROP COLUMN push_host, "
                     "DROP COLUMN push_instance")


class SchemaTest(HourglassTestCase):
    def namespace_with(self, sql: str | None):
        """A namespace whose database holds only `sql` (None: no tables at all)."""
        ns = self.namespace()
        ns.mariadb.drop_database(ns.database)
        ns.mariadb.create_database(ns.database, schema=False)
        if sql:
            ns.execute(sql)
        return ns

    def assert_refuses_to_start(self, ns, what):
        d = Daemon(namespace=ns)
        self.addCleanup(d.close)
        t0 = time.monotonic()
        try:
            d.start(timeout=20)
        except DaemonError:
            pass
        else:
            self.fail(f"hourglassd started on a database {what}; log:\n{d.log_tail(20)}")
        rc = d.wait_exit(10)
        self.assertNotEqual(rc, 0, f"exit status on a database {what}")
        self.assertLess(time.monotonic() - t0, 15)
        log = d.log()
        self.assertIn("sql/schema.sql", log, f"the message must say to apply sql/schema.sql:\n{d.log_tail(20)}")
        return d

    def test_no_tables_exits_nonzero_naming_schema_sql(self):
        ns = self.namespace_with(None)
        self.assert_refuses_to_start(ns, "without tables")
        self.assertEqual(ns.mariadb.tables(ns.database), [], "the daemon must not create the tables itself")

    def test_missing_transition_table_exits_nonzero(self):
        schema = SCHEMA_SQL.read_text()
        ns = self.namespace_with(schema)
        ns.execute("DROP TABLE transition")
        self.assert_refuses_to_start(ns, "without the transition table")

    def test_transition_table_of_an_older_schema_exits_nonzero_naming_the_column(self):
        # as development databases made before the transition table was keyed by version:
        # CREATE TABLE IF NOT EXISTS leaves such a table alone, and the schema version is 1 in
        # both, so without the column check the daemon started healthy and every push got 503
        ns = self.namespace_with(SCHEMA_SQL.read_text())
        ns.execute("DROP TABLE transition")
        ns.execute("CREATE TABLE transition (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, "
                   "message_id BIGINT UNSIGNED NOT NULL, from_state VARCHAR(16) NOT NULL, "
                   "to_state VARCHAR(16) NOT NULL, at BIGINT NOT NULL, actor VARCHAR(200) NOT NULL, "
                   "host VARCHAR(64) NOT NULL, instance VARCHAR(64) NOT NULL, "
                   "attempts INT UNSIGNED NOT NULL DEFAULT 0)")
        d = self.assert_refuses_to_start(ns, "whose transition table lacks the version column")
        self.assertIn("Unknown column 'version'", d.log(), d.log_tail(20))
        self.assertIn("table transition", d.log(), d.log_tail(20))

    def test_refused_record_table_without_a_column_exits_nonzero_naming_it(self):
        # the column check once stopped at the second of its three tables: a refused_record
        # table without a column the journal writes let the daemon start, and the first record
        # MySQL refused could then not be kept either
        ns = self.namespace_with(SCHEMA_SQL.read_text())
        ns.execute("ALTER TABLE refused_record DROP COLUMN instance")
        d = self.assert_refuses_to_start(ns, "whose refused_record table lacks the instance column")
        self.assertIn("Unknown column 'instance'", d.log(), d.log_tail(20))
        self.assertIn("table refused_record", d.log(), d.log_tail(20))

    def test_empty_schema_version_exits_nonzero(self):
        ns = self.namespace_with(SCHEMA_SQL.read_text())
        ns.execute("DELETE FROM schema_version")
        self.assert_refuses_to_start(ns, "with no schema version recorded")

    def apply_schema(self, ns):
        """mariadb <db> < sql/schema.sql, as an operator would, as the application user."""
        with open(SCHEMA_SQL) as f:
            return subprocess.run(["mariadb", "--no-defaults", "--protocol=tcp", "-h", HOST, "-P", str(ns.mariadb.port),
                                   "-u", MYSQL_USER, "--show-warnings", ns.database],
                                  stdin=f, capture_output=True, text=True, timeout=60,
                                  env={**os.environ, "MYSQL_PWD": MYSQL_PASSWORD})

    def test_schema_5_far_keys_move_into_message_and_still_page_in(self):
        """Schema 6 moves the far tier's index from the far_job table into message (far_shard,
        far_run_at). A database of schema 5 with a far job in it: the binary refuses it, naming
        sql/schema.sql; applying the file moves the job's key (and drops far_job, so that a
        schema-5 binary left running fails instead of writing keys no pager reads); the job then
        pages in and is delivered, and its count goes."""
        ns = self.namespace_with(SCHEMA_SQL.read_text())
        # what schema 5 had: no far key columns (nor schema 7's, 8's and 9's after them), the
        # far_job table, no version 6 (nor 7, 8, 9)
        ns.execute("ALTER TABLE message DROP INDEX idx_far, DROP COLUMN far_shard, DROP COLUMN far_run_at, "
                   "DROP COLUMN traceparent, DROP COLUMN tracestate, DROP COLUMN group_key, " + DROP_PUSH_COLUMNS)
        ns.execute("CREATE TABLE far_job (shard SMALLINT UNSIGNED NOT NULL, run_at BIGINT NOT NULL, "
                   "id BIGINT UNSIGNED NOT NULL, PRIMARY KEY (shard, run_at, id)) ENGINE=InnoDB")
        ns.execute("DELETE FROM schema_version WHERE version IN (6, 7, 8, 9)")
        # a far job as a schema-5 daemon wrote it (its id on its topic's shard, as ids.h makes
        # them), due in 3 s; and a stray key without a message row, which the move drops
        shard = topic_shard("mig")
        jid, due = 7 * 4096 + shard, int(time.time() * 1000) + 3000
        ns.execute(f"INSERT INTO message (id, topic, body, run_at, priority, ttr, tries, state, created_at, "
                   f"updated_at) VALUES ({jid}, 'mig', '{{\"n\":1}}', {due}, 0, 30000, 3, 'far', 1, 1)")
        ns.execute(f"INSERT INTO far_job VALUES ({shard}, {due}, {jid}), ({shard}, {due}, 999)")
        ns.execute("INSERT INTO far_count VALUES ('mig', 1)")
        d = self.assert_refuses_to_start(ns, "of schema 5")
        self.assertIn("schema version 5 is older than 9", d.log())

        applied = self.apply_schema(ns)
        self.assertEqual((applied.returncode, applied.stderr.strip()), (0, ""), applied)
        self.assertEqual(ns.query(f"SELECT far_shard, far_run_at FROM message WHERE id = {jid}"), [(str(shard), str(due))])
        self.assertNotIn("far_job", ns.mariadb.tables(ns.database))
        again = self.apply_schema(ns)
        self.assertEqual((again.returncode, again.stderr.strip()), (0, ""), again)
        self.assertEqual(ns.query(f"SELECT far_shard, far_run_at FROM message WHERE id = {jid}"), [(str(shard), str(due))])

        d = start_ready(self, {"queue": {"horizon": 2000}}, namespace=ns)
        got = expect_ok(d.get("mig", timeout=10), "the migrated far job, delivered once due")
        self.assertEqual(got["id"], str(jid))
        self.assertGreaterEqual(time.time() * 1000, due - 50, "not delivered before its due time")
        wait_or_fail(self, lambda: journal_idle(d) and ns.query("SELECT jobs FROM far_count WHERE topic = 'mig'") == [("0",)],
                     10, "the far count to go with the paged job")
        self.assertEqual(ns.query(f"SELECT state, far_shard FROM message WHERE id = {jid}"), [("reserved", None)])

    def test_schema_6_gains_the_trace_context_columns(self):
        """Schema 7 appends message.traceparent and message.tracestate. A schema-6 database is
        refused, naming sql/schema.sql; applying it (twice) adds the columns, keeps the rows (no
        context: NULL) and the daemon then starts and keeps a pushed context."""
        ns = self.namespace_with(SCHEMA_SQL.read_text())
        ns.execute("ALTER TABLE message DROP COLUMN traceparent, DROP COLUMN tracestate, DROP COLUMN group_key, "
                   + DROP_PUSH_COLUMNS)
        ns.execute("DELETE FROM schema_version WHERE version IN (7, 8, 9)")
        ns.execute("INSERT INTO message (id, topic, body, run_at, priority, ttr, tries, state, created_at, "
                   "updated_at) VALUES (4096, 'old', '1', 1, 5, 30000, 3, 'finished', 1, 1)")
        d = self.assert_refuses_to_start(ns, "of schema 6")
        self.assertIn("schema version 6 is older than 9", d.log())
        for _ in range(2):
            applied = self.apply_schema(ns)
            self.assertEqual((applied.returncode, applied.stderr.strip()), (0, ""), applied)
        self.assertEqual(ns.query("SELECT id, traceparent, tracestate FROM message"), [("4096", None, None)])
        d = start_ready(self, namespace=ns)
        tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        jid = expect_ok(d.push({"topic": "new", "body": 1}, headers={"traceparent": tp}), "push")["id"]
        wait_or_fail(self, lambda: ns.query(f"SELECT traceparent FROM message WHERE id = {jid}") == [(tp,)], 10,
                     "the pushed context in its row")

    def test_schema_7_gains_the_group_column(self):
        """Schema 8 appends message.group_key (flow control by key). A schema-7 database is
        refused, naming sql/schema.sql; applying it (twice) adds the column, keeps the rows (no
        group: NULL) and the daemon then starts and keeps a pushed group."""
        ns = self.namespace_with(SCHEMA_SQL.read_text())
        ns.execute("ALTER TABLE message DROP COLUMN group_key, " + DROP_PUSH_COLUMNS)
        ns.execute("DELETE FROM schema_version WHERE version IN (8, 9)")
        ns.execute("INSERT INTO message (id, topic, body, run_at, priority, ttr, tries, state, created_at, "
                   "updated_at) VALUES (4096, 'old', '1', 1, 5, 30000, 3, 'finished', 1, 1)")
        d = self.assert_refuses_to_start(ns, "of schema 7")
        self.assertIn("schema version 7 is older than 9", d.log())
        for _ in range(2):
            applied = self.apply_schema(ns)
            self.assertEqual((applied.returncode, applied.stderr.strip()), (0, ""), applied)
        self.assertEqual(ns.query("SELECT id, group_key FROM message"), [("4096", None)])
        d = start_ready(self, namespace=ns)
        jid = expect_ok(d.push({"topic": "new", "body": 1, "group": "g-ü"}), "push")["id"]
        wait_or_fail(self, lambda: ns.query(f"SELECT group_key FROM message WHERE id = {jid}") == [("g-ü",)], 10,
                     "the pushed group in its row")

    def test_schema_8_pushes_are_recorded_in_their_message_rows(self):
        """Schema 9 records a push in its message row (push_state, push_actor, push_host,
        push_instance) rather than in a transition row of its own, and a job's history is the
        job_history view. A schema-8 database holding a job that lived under schema 8 (its push a
        transition row) is refused, naming sql/schema.sql; applying it (twice) adds the columns and
        the view; that job's history still reads whole, its push once; a new push writes no
        transition row, and its history shows the push with who made it."""
        ns = self.namespace_with(SCHEMA_SQL.read_text())
        ns.execute("DROP VIEW job_history")
        ns.execute("ALTER TABLE message " + DROP_PUSH_COLUMNS)
        ns.execute("DELETE FROM schema_version WHERE version = 9")
        old = 4096 * 5
        ns.execute(f"INSERT INTO message (id, topic, body, run_at, priority, ttr, tries, attempts, state, version, "
                   f"created_at, updated_at) VALUES ({old}, 'old', '1', 1000, 5, 30000, 3, 1, 'finished', 3, 1000, 3000)")
        who = "'10.1.1.1', 'old-1:8080'"
        ns.execute(f"INSERT INTO transition VALUES ({old}, 1, '', 'ready', 1000, 'http-0 hg:{{0}}:jobs', {who}, 0), "
                   f"({old}, 2, 'ready', 'reserved', 2000, 'http-1 hg:{{0}}:jobs', {who}, 1), "
                   f"({old}, 3, 'reserved', 'finished', 3000, 'http-1 hg:{{0}}:jobs', {who}, 1)")
        d = self.assert_refuses_to_start(ns, "of schema 8")
        self.assertIn("schema version 8 is older than 9", d.log())
        for _ in range(2):
            applied = self.apply_schema(ns)
            self.assertEqual((applied.returncode, applied.stderr.strip()), (0, ""), applied)
        self.assertEqual(ns.query(f"SELECT push_state, push_actor, push_host, push_instance FROM message "
                                  f"WHERE id = {old}"), [(None, None, None, None)])

        d = start_ready(self, namespace=ns)
        history = expect_ok(d.job(str(old)), "/jobs of the schema-8 job")["history"]
        self.assertEqual([(h["from"], h["state"], h["at"], h["by"], h["host"], h["instance"], h["attempt"])
                          for h in history],
                         [("", "ready", 1000, "http-0 hg:{0}:jobs", "10.1.1.1", "old-1:8080", 0),
                          ("ready", "reserved", 2000, "http-1 hg:{0}:jobs", "10.1.1.1", "old-1:8080", 1),
                          ("reserved", "finished", 3000, "http-1 hg:{0}:jobs", "10.1.1.1", "old-1:8080", 1)])

        job = expect_ok(d.push({"topic": "new", "body": 1, "delay": 60_000}), "push")
        jid = job["id"]
        wait_or_fail(self, lambda: journal_idle(d) and ns.query(f"SELECT COUNT(*) FROM message WHERE id = {jid}")
                     == [("1",)], 10, "the push's row")
        self.assertEqual(ns.query(f"SELECT COUNT(*) FROM transition WHERE message_id = {jid}"), [("0",)],
                         "a push writes no transition row")
        (state, actor, host, instance, created), = ns.query(
            f"SELECT push_state, push_actor, push_host, push_instance, created_at FROM message WHERE id = {jid}")
        self.assertEqual((state, host), ("delayed", "127.0.0.1"))
        self.assertRegex(actor, r"^http-\d+ ")
        self.assertTrue(instance, "the pushing instance is named")
        history = expect_ok(d.job(jid), "/jobs of the new job")["history"]
        self.assertEqual(history, [{"state": "delayed", "from": "", "at": int(created), "by": actor, "host": host,
                                    "instance": instance, "attempt": 0}])
        # its next change is a transition row, after the push in its history
        self.assertEqual(d.delete(jid).status, 200)
        wait_or_fail(self, lambda: journal_idle(d) and [h["state"] for h in expect_ok(d.job(jid), "/jobs")["history"]]
                     == ["delayed", "deleted"], 10, "the delete in the history")

    def test_schema_applies_twice_cleanly_with_the_mariadb_client(self):
        ns = self.namespace_with(None)
        m = ns.mariadb

        def apply():
            # as an operator would: mariadb <db> < sql/schema.sql, as the application user
            with open(SCHEMA_SQL) as f:
                return subprocess.run(["mariadb", "--no-defaults", "--protocol=tcp", "-h", HOST, "-P", str(m.port),
                                       "-u", MYSQL_USER, "--show-warnings", ns.database],
                                      stdin=f, capture_output=True, text=True, timeout=60,
                                      env={**os.environ, "MYSQL_PWD": MYSQL_PASSWORD})

        first = apply()
        self.assertEqual((first.returncode, first.stderr.strip()), (0, ""), first)
        tables = m.tables(ns.database)
        self.assertEqual(tables, ["biz_latest", "far_biz", "far_count", "far_mark", "job_history", "message", "refused_record", "schedule", "schema_version", "topic_change", "topic_setting", "transition"])

        d = start_ready(self, namespace=ns)
        jid = expect_ok(d.push({"topic": "sc", "body": {"k": 1}}), "push")["id"]
        wait_or_fail(self, lambda: journal_idle(d) and ns.query("SELECT COUNT(*) FROM job_history") == [("1",)],
                     10, "the journal")
        snapshot = ns.query("SELECT id, state, version FROM message"), ns.query("SELECT COUNT(*) FROM job_history")

        second = apply()
        self.assertEqual((second.returncode, second.stderr.strip()), (0, ""), second)
        self.assertNotIn("Error", second.stdout)
        self.assertEqual(m.tables(ns.database), tables)
        self.assertEqual(ns.query("SELECT version FROM schema_version ORDER BY version"),
                         [("1",), ("2",), ("3",), ("4",), ("5",), ("6",), ("7",), ("8",), ("9",)])
        self.assertEqual((ns.query("SELECT id, state, version FROM message"),
                          ns.query("SELECT COUNT(*) FROM job_history")), snapshot, "reapplying changed data")
        self.assertEqual(snapshot[0][0][0], jid)

        # the running daemon keeps working on the re-applied schema, and a new one starts
        expect_ok(d.push({"topic": "sc", "body": 2}), "push after re-applying the schema")
        wait_healthy(self, d.restart())
        self.assertEqual(len(expect_ok(d.get("sc", timeout=1, count=5), "get")), 2)
