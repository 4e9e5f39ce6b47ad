"""[mysql] hosts with plain MariaDB servers (issue 32): the node list without Galera. Nodes that
cannot take the journal's writes — one that refuses connections, a read-only standby not yet
promoted — are passed over for the next, once, by every connection of the instance together;
the instance then serves as with one server. (The Galera cluster itself: test_galera.)"""

from __future__ import annotations

import socket
import unittest

from harness import HOST, Daemon, HourglassTestCase, journal_idle, wait_healthy, wait_until


def closed_port() -> int:
    """A loopback port nothing listens on (bound and released: connecting is refused)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class NodeListTest(HourglassTestCase):
    def push_and_check(self, d, ns, n: int = 20) -> None:
        ids = []
        for i in range(n):
            r = self.assertStatus(d.push({"topic": "hosts", "body": {"i": i}, "delay": 0}), 200)
            ids.append(r.json()["id"])
        wait_until(lambda: journal_idle(d), 10, 0.05, "the journal to be idle")
        rows = {r[0] for r in ns.query("SELECT id FROM message")}
        self.assertEqual(rows, set(ids), "every push answered 200 has its row on the node in use")
        got = self.assertStatus(d.get("hosts", timeout=1, count=n), 200).json()
        self.assertEqual(len(got), n)

    def test_a_refusing_first_node_is_passed_over(self):
        ns = self.namespace()
        dead = closed_port()
        d = wait_healthy(self, self.start_daemon(
            {"mysql": {"host": "192.0.2.1", "port": 1, "hosts": f"{HOST}:{dead}, {HOST}:{ns.mariadb.port}"}},
            namespace=ns))
        self.push_and_check(d, ns)
        log = d.log()
        self.assertIn(f"mysql: node {HOST}:{dead} failed", log)
        # one move for the whole process: every connection found node 2 after the first one moved
        self.assertEqual(log.count("every connection moves to"), 1, log[-3000:])
        # /health names the node in use, so the runbook can see where each instance writes
        self.assertEqual(d.health().json()["mysqlNode"],
                         {"address": f"{HOST}:{ns.mariadb.port}", "index": 1, "switches": 1})

    def test_a_read_only_standby_is_passed_over(self):
        ns = self.namespace()
        standby = self.private_mariadb(args=["--read-only=ON"])
        standby.create_database(ns.database)  # the schema is there: only read_only is in the way
        d = wait_healthy(self, self.start_daemon(
            {"mysql": {"hosts": f"{HOST}:{standby.port},{HOST}:{ns.mariadb.port}"}}, namespace=ns))
        self.push_and_check(d, ns)
        self.assertIn("read-only (a standby not promoted)", d.log())
        self.assertEqual(standby.query("SELECT COUNT(*) FROM message", db=ns.database), [("0",)])
        self.assertEqual(d.health().json()["mysqlNode"]["index"], 1)

    def test_one_server_shows_no_node(self):
        d = wait_healthy(self, self.start_daemon())
        self.assertNotIn("mysqlNode", d.health().json(), "without [mysql] hosts there is no node list")

    def test_a_bad_list_is_refused_at_start(self):
        c = Daemon(namespace=self.namespace(), overrides={"mysql": {"hosts": f"{HOST}:3306,{HOST}:0"}})
        self.addCleanup(c.close)
        r = c.check_config()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn('[mysql] hosts: "127.0.0.1:0"', r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
