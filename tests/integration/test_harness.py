"""Self-test of harness.py; needs Redis and MariaDB, not the daemon (a tiny Python stand-in
plays hourglassd to exercise Daemon's start/stop/HTTP helpers).

    scripts/run-integration.sh test_harness
"""

import configparser
import os
import re
import signal
import sys
import tempfile
import textwrap
import time
import unittest

import harness
from harness import REPO_ROOT, HourglassTestCase, shared_stack

# The schema version sql/schema.sql brings a database to: the one the daemon requires
SCHEMA_VERSION = int(re.search(r"#define SCHEMA_VERSION_REQUIRED (\d+)",
                               (REPO_ROOT / "src" / "mysql" / "db.h").read_text()).group(1))

# A stand-in for hourglassd: `fake -c FILE` serves /health and echoes requests as JSON.
FAKE_DAEMON = textwrap.dedent('''\
    import configparser, json, signal, sys, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    assert sys.argv[1] == "-c", sys.argv
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(sys.argv[2])
    host, port = cfg["http"]["listen"].rsplit(":", 1)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def answer(self, status, obj):
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        def do_GET(self):
            if self.path == "/health":
                return self.answer(200, {"status": "ok"})
            self.answer(404, {"error": "not_found", "message": self.path})
        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n)
            self.answer(200, {"path": self.path, "type": self.headers.get("Content-Type"),
                              "body": json.loads(body)})
        def log_message(self, fmt, *args):
            print("fake:", fmt % args, file=sys.stderr, flush=True)

    srv = ThreadingHTTPServer((host, int(port)), Handler)
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=srv.shutdown).start())
    print("fake: listening on", cfg["http"]["listen"], "prefix", cfg["redis"]["prefix"], flush=True)
    srv.serve_forever()
    print("fake: bye", flush=True)
''')


def write_executable(directory: str, name: str, text: str) -> str:
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


class SharedStackTest(HourglassTestCase):
    def test_redis_ping(self):
        self.assertEqual(shared_stack().redis.cli("PING"), "PONG")

    def test_select_1(self):
        self.assertEqual(shared_stack().mariadb.query("SELECT 1"), [("1",)])

    def test_query_values(self):
        rows = shared_stack().mariadb.query("SELECT 1, NULL, 'a b', 'NULL' UNION ALL SELECT 2, 'x', '', 'y'")
        self.assertEqual(rows, [("1", None, "a b", None), ("2", "x", "", "y")])

    def test_namespaces_are_separate_and_have_the_schema(self):
        a, b = self.namespace(), self.namespace()
        self.assertNotEqual(a.prefix, b.prefix)
        self.assertNotEqual(a.database, b.database)
        self.assertNotEqual(a.redis_db, b.redis_db)
        self.assertFalse(a.prefix.startswith(b.prefix) or b.prefix.startswith(a.prefix))
        for ns in (a, b):
            self.assertEqual(ns.mariadb.tables(ns.database), ["biz_latest", "far_biz", "far_count", "far_mark", "job_history", "message", "refused_record", "schedule", "schema_version", "topic_change", "topic_setting", "transition"])
            self.assertEqual(ns.query("SELECT version FROM schema_version ORDER BY version"),
                             [(str(v),) for v in range(1, SCHEMA_VERSION + 1)])
        a.execute("INSERT INTO transition (message_id, version, from_state, to_state, at, actor, host, instance) "
                  "VALUES (1, 1, '', 'ready', 0, 't', 'h', 'i')")
        self.assertEqual(a.query("SELECT COUNT(*) FROM job_history"), [("1",)])
        self.assertEqual(b.query("SELECT COUNT(*) FROM job_history"), [("0",)])
        a.redis_cli("SET", a.prefix + ":k", "1")
        self.assertEqual(a.redis_keys(), [a.prefix + ":k"])
        self.assertEqual(b.redis_keys(), [])
        self.assertEqual(a.flush_redis(), 1)
        self.assertEqual(a.redis_keys(), [])

    def test_schema_is_idempotent(self):
        ns = self.namespace()
        ns.mariadb.apply_schema(ns.database)  # second time
        ns.mariadb.apply_schema(ns.database)  # third time
        self.assertEqual(ns.mariadb.tables(ns.database), ["biz_latest", "far_biz", "far_count", "far_mark", "job_history", "message", "refused_record", "schedule", "schema_version", "topic_change", "topic_setting", "transition"])
        self.assertEqual(ns.query("SELECT COUNT(*) FROM schema_version"), [(str(SCHEMA_VERSION),)])

    def test_hourglass_user_connects_over_tcp(self):
        ns = self.namespace()
        rows = ns.mariadb.query("SELECT CURRENT_USER(), DATABASE()", db=ns.database,
                                user="hourglass", password="hourglass")
        self.assertEqual(rows, [("hourglass@127.0.0.1", ns.database)])
        with self.assertRaises(harness.MariaDBError):
            ns.mariadb.query("SELECT 1", db=ns.database, user="hourglass", password="wrong")

    def test_sql_error_raises(self):
        with self.assertRaises(harness.MariaDBError):
            shared_stack().mariadb.query("SELEC 1")
        with self.assertRaises(harness.RedisError):
            shared_stack().redis.cli("NOSUCHCOMMAND")


class PrivateServerTest(HourglassTestCase):
    def test_redis_pause_resume_restart_kill(self):
        r = self.private_redis()
        port, pid = r.port, r.pid
        self.assertNotEqual(r.address, shared_stack().redis.address)
        r.cli("SET", "k", "v")
        r.pause()
        t0 = time.monotonic()
        with self.assertRaises(TimeoutError):
            r.cli("GET", "k", timeout=1)
        self.assertLess(time.monotonic() - t0, 5)
        r.resume()
        self.assertEqual(r.cli("GET", "k"), "v")
        r.restart()  # no persistence by default: same port, empty
        self.assertEqual(r.port, port)
        self.assertNotEqual(r.pid, pid)
        self.assertEqual(r.cli("GET", "k"), "")
        self.assertEqual(r.kill(), -signal.SIGKILL)
        self.assertFalse(r.running)

    def test_persistent_redis_keeps_data_across_kill(self):
        r = self.private_redis(persistent=True)
        r.cli("SET", "k", "v")
        r.kill()
        r.start()
        self.assertEqual(r.cli("GET", "k"), "v")

    def test_mariadb_restart_same_port_keeps_data(self):
        m = self.private_mariadb()
        port = m.port
        m.create_database("t1")
        m.execute("INSERT INTO schema_version (version) VALUES (42)", db="t1")
        m.restart()
        self.assertEqual(m.port, port)
        self.assertEqual(m.query("SELECT version FROM schema_version ORDER BY version", db="t1"),
                         [(str(v),) for v in range(1, SCHEMA_VERSION + 1)] + [("42",)])
        m.pause()
        with self.assertRaises(TimeoutError):
            m.query("SELECT 1", timeout=1)
        m.resume()
        self.assertEqual(m.query("SELECT 1"), [("1",)])

    def test_close_leaves_nothing(self):
        r = harness.RedisServer().start()
        pid, directory = r.pid, r.dir
        r.close()
        self.assertEqual(harness._proc_state(pid), "")  # gone and reaped
        if not harness.KEEP:
            self.assertFalse(os.path.exists(directory))

    def test_free_port_is_unique(self):
        ports = {harness.free_port() for _ in range(50)}
        self.assertEqual(len(ports), 50)


class DaemonHarnessTest(HourglassTestCase):
    """Daemon's config writing, start/stop and HTTP helpers, with a stand-in binary."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hg-fake-")
        self.addCleanup(harness._remove_dir, self.tmp)
        self.fake = write_executable(self.tmp, "fake-hourglassd",
                                     f"#!{sys.executable}\n" + FAKE_DAEMON)

    def test_config_has_contract_keys_and_overrides(self):
        ns = self.namespace()
        d = harness.Daemon(namespace=ns, binary=self.fake,
                           overrides={"http": {"threads": 4, "token": None}, "queue": {"default_tries": 5},
                                      "extra": {"flag": True}})
        self.addCleanup(d.close)
        cfg = configparser.ConfigParser(interpolation=None)
        cfg.read(d.write_config())
        self.assertEqual(cfg.sections(), ["http", "redis", "mysql", "queue", "log", "instance", "extra"])
        # what must survive a crash lives in the daemon's own directory, across restarts
        self.assertEqual(cfg["instance"]["state_dir"], os.path.join(d.dir, "state"))
        self.assertEqual(cfg["http"]["listen"], f"127.0.0.1:{d.port}")
        self.assertEqual(cfg["http"]["threads"], "4")
        self.assertNotIn("token", cfg["http"])
        self.assertEqual(cfg["http"]["admin_token"], "")
        self.assertEqual(dict(cfg["redis"]), {"address": ns.redis.address, "password": "",
                                              "db": str(ns.redis_db), "prefix": ns.prefix, "shards": "8"})
        self.assertEqual(dict(cfg["mysql"]), {"host": "127.0.0.1", "port": str(ns.mariadb.port), "socket": "",
                                              "user": "hourglass", "password": "hourglass",
                                              "database": ns.database, "retention_days": "7"})
        self.assertEqual(cfg["queue"]["default_tries"], "5")
        self.assertEqual(dict(cfg["log"]), {"level": "debug", "file": ""})
        self.assertEqual(cfg["extra"]["flag"], "true")

    def test_start_request_raw_stop(self):
        d = self.start_daemon(binary=self.fake)
        self.assertIn("fake: listening", d.log())
        self.assertStatus(d.health(), 200)
        self.assertEqual(d.health().json(), {"status": "ok"})
        r = d.push({"topic": "t", "body": [1, "x"]})
        self.assertStatus(r, 200)
        self.assertEqual(r.json(), {"path": "/push", "type": "application/json",
                                    "body": {"topic": "t", "body": [1, "x"]}})
        self.assertEqual(d.get(["a", "b"], timeout=0, count=2).json()["message"],
                         "/get/a,b?timeout=0&count=2")
        self.assertEqual(d.reschedule("7", run_at=5).json()["message"], "/reschedule?id=7&runAt=5")
        self.assertEqual(d.restore(expire=True).json()["message"], "/reStore?expire=true")
        raw = d.raw(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
                    read_timeout=0.5)
        responses = harness.parse_http_responses(raw)
        self.assertEqual([r.status for r in responses], [200, 404])
        self.assertEqual(responses[1].json()["error"], "not_found")
        d.wait_for_log(r'"GET /nope HTTP/1.1" 404')
        old_pid = d.pid
        d.restart()
        self.assertNotEqual(d.pid, old_pid)
        self.assertStatus(d.health(), 200)
        self.assertEqual(d.stop(), 0)
        self.assertIn("fake: bye", d.log())

    def test_start_failure_shows_the_log(self):
        bad = write_executable(self.tmp, "bad", "#!/bin/sh\necho \"bad config: $2 line 3\" >&2\nexit 1\n")
        d = harness.Daemon(binary=bad)
        self.addCleanup(d.close)
        with self.assertRaises(harness.DaemonError) as cm:
            d.start()
        self.assertIn("exited with status 1", str(cm.exception))
        self.assertIn("bad config: " + d.config_path, str(cm.exception))

    def test_sanitizer_report_fails_close(self):
        d = self.start_daemon(binary=self.fake)
        self.assertIsNone(d.sanitizer_report())
        with open(d.log_path, "a") as f:
            f.write("==123==ERROR: AddressSanitizer: heap-use-after-free on address 0x1\n")
        with self.assertRaises(harness.DaemonError):
            d.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
