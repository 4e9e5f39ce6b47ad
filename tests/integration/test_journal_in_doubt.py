"""A COMMIT whose answer is lost: pushes answered 503 must not leave live rows behind.

The journal sends COMMIT after a batch's statements; when the connection breaks before the
answer arrives, MySQL may have committed. The pushes in that batch were answered 503 and
never reached Redis, so a committed row would stand for no job (and /reStore after a Redis
loss would bring back a job its producer was told had failed). The journal keeps their ids
"in doubt" and marks such rows aborted once it reconnects.

The lost answer is made deterministic with a proxy between the daemon and MariaDB that
understands just enough of the MySQL protocol: armed, it forwards the COMMIT that follows an
INSERT INTO message, lets the server answer, throws the answer away and cuts the connection.

Why COMMIT is a round trip of its own (journal.c, write_batch) is tested too: a hung server
that resumes still runs what waits in a connection its client has given up on. ScriptHolder,
armed, keeps a push cycle's statements instead of forwarding them, cuts the daemon's side
and keeps the server's side open, and sends the statements only after the daemon has
reconnected and settled. They run, but without their COMMIT nothing of them is committed;
had the script ended with COMMIT, the refused push would now have a live row.
"""

from __future__ import annotations

import pathlib
import select
import socket
import threading
import time
import unittest

from harness import HourglassTestCase, id_key, wait_until

COM_QUERY = 0x03
COM_STMT_PREPARE = 0x16
COM_STMT_BULK_EXECUTE = 0xFA  # the journal's rows in binary ([mysql] bulk_inserts, journal_bulk.h)
PUSH_TRIGGER = b"INSERT INTO MESSAGE"
SERVER_MORE_RESULTS_EXISTS = 0x0008


def _read_packet(sock: socket.socket) -> bytes | None:
    """One MySQL packet (4-byte header + payload), or None at EOF."""
    head = _read_exact(sock, 4)
    if head is None:
        return None
    length = int.from_bytes(head[:3], "little")
    body = _read_exact(sock, length) if length else b""
    return None if body is None else head + body


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def _skip_lenenc(body: bytes, pos: int) -> int:
    first = body[pos]
    return pos + {0xFC: 3, 0xFD: 4, 0xFE: 9}.get(first, 1)


def _read_script_answers(server: socket.socket) -> list[bytes]:
    """The answers to a multi-statement script, up to the last one (an OK without 'more
    results', or an error, which ends the script). Empty when the connection is gone."""
    answers = []
    while True:
        packet = _read_packet(server)
        if packet is None:
            return answers
        answers.append(packet)
        body = packet[4:]
        if body[:1] == b"\xff":
            return answers
        if body[:1] == b"\x00":
            pos = _skip_lenenc(body, _skip_lenenc(body, 1))  # affected rows, last insert id
            if not int.from_bytes(body[pos:pos + 2], "little") & SERVER_MORE_RESULTS_EXISTS:
                return answers


def _shutdown(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _MySQLProxy:
    """A TCP proxy in front of MariaDB on a free loopback port: one upstream connection per
    client connection. Client packets are relayed one by one, and a subclass's _intercept
    may take one over; answers are relayed as bytes."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.armed = threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closing = False
        self.sockets: list[socket.socket] = []
        # prepared statements, by client socket id: their texts by statement id, and the texts
        # sent for preparing whose answer (with the id the server gave) has not come yet
        self.prepared: dict[int, dict[int, bytes]] = {}
        self.preparing: dict[int, list[bytes]] = {}
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.closing = True
        for s in [self.listener, *self.sockets]:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self.closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [client, server]
            threading.Thread(target=self._server_to_client, args=(server, client), daemon=True).start()
            threading.Thread(target=self._client_to_server, args=(client, server), daemon=True).start()

    def _intercept(self, client: socket.socket, server: socket.socket, packet: bytes) -> bool:
        """True when this packet was dealt with (and the connection with it)."""
        return False

    def statement(self, client: socket.socket, payload: bytes) -> bytes:
        """The SQL a packet runs, upper-cased: a query's text, or a bulk execution's prepared
        statement (MariaDB numbers a connection's prepared statements 1, 2, ... in order); b""
        for anything else."""
        if payload[:1] == bytes([COM_QUERY]):
            return payload[1:].lstrip().upper()
        if payload[:1] == bytes([COM_STMT_BULK_EXECUTE]):
            text = self.prepared.get(id(client), {}).get(int.from_bytes(payload[1:5], "little"), b"")
            return text.lstrip().upper()
        return b""

    def _watch_answers(self, client: socket.socket, packets: list[bytes]) -> None:
        """Learn the ids the server gives prepared statements: the first packet after a
        COM_STMT_PREPARE is its answer (a client sends nothing else until it has it), and an OK
        one carries the id."""
        for packet in packets:
            pending = self.preparing.get(id(client))
            if pending:
                text = pending.pop(0)
                if packet[4:5] == b"\x00":
                    self.prepared.setdefault(id(client), {})[int.from_bytes(packet[5:9], "little")] = text

    def is_push_statements(self, client: socket.socket, payload: bytes) -> bool:
        """A journal cycle's statements that insert message rows (a push): as SQL text, or as
        the bulk execution of its message rows (the daemon's default)."""
        return self.statement(client, payload).startswith(PUSH_TRIGGER)

    def _held(self, server: socket.socket) -> bool:
        """A server connection to keep open after its client is gone."""
        return False

    def _client_to_server(self, client: socket.socket, server: socket.socket) -> None:
        while True:
            packet = _read_packet(client)
            if packet is None:
                break
            if packet[4:5] == bytes([COM_STMT_PREPARE]):
                self.preparing.setdefault(id(client), []).append(packet[5:])
            if self._intercept(client, server, packet):
                return
            try:
                server.sendall(packet)
            except OSError:
                break
        _shutdown(client, server)

    def _server_to_client(self, server: socket.socket, client: socket.socket) -> None:
        # select first: a relay blocked in recv on a connection that gets held would take
        # (part of) the answers meant for ScriptHolder.release()
        pending = b""  # the bytes of a packet not whole yet
        while not self._held(server):
            try:
                if not select.select([server], [], [], 0.05)[0]:
                    continue
                data = server.recv(65536)
                if not data:
                    break
                pending += data
                packets = []
                while len(pending) >= 4 and len(pending) >= 4 + int.from_bytes(pending[:3], "little"):
                    end = 4 + int.from_bytes(pending[:3], "little")
                    packets.append(pending[:end])
                    pending = pending[end:]
                self._watch_answers(client, packets)
                client.sendall(data)
            except (OSError, ValueError):
                break
        if not self._held(server):
            _shutdown(server, client)


class CommitAnswerDropper(_MySQLProxy):
    """While armed, the first connection that sends COMMIT after a statement starting with
    `trigger` (by default INSERT INTO message: a push) gets that COMMIT forwarded and answered
    by the server, then loses the answer and its connection (the server has committed; the
    client cannot know). rearm() sets it up for another drop."""

    def __init__(self, upstream_port: int, trigger: bytes = PUSH_TRIGGER) -> None:
        super().__init__(upstream_port)
        self.trigger = trigger
        self.dropped = threading.Event()
        self.inserted: set[int] = set()  # connections (by client socket id) inside a triggering transaction

    def rearm(self, trigger: bytes) -> None:
        self.trigger = trigger
        self.inserted.clear()
        self.dropped.clear()
        self.armed.set()

    def _intercept(self, client: socket.socket, server: socket.socket, packet: bytes) -> bool:
        payload = packet[4:]
        text = self.statement(client, payload)
        if text.startswith(self.trigger):
            self.inserted.add(id(client))
        elif text.startswith(b"COMMIT") and id(client) in self.inserted and self.armed.is_set() \
                and not self.dropped.is_set():
            self.dropped.set()
            # Stop relaying answers to the client first, then let the server commit and answer.
            client.shutdown(socket.SHUT_RDWR)
            server.sendall(packet)
            server.settimeout(10)
            _read_packet(server)  # the COMMIT's OK: the transaction is durable; nobody hears of it
            server.close()
            client.close()
            return True
        elif text.startswith(b"COMMIT") or text.startswith(b"ROLLBACK"):
            self.inserted.discard(id(client))
        return False


class ScriptHolder(_MySQLProxy):
    """While armed, the first push cycle's statements are not forwarded: the daemon's side of
    that connection is cut (its client sees the connection break with the script sent), the
    server's side stays open and idle, and release() sends the script on it later — what a
    hung server that resumes does with a script left in its socket."""

    def __init__(self, upstream_port: int) -> None:
        self.held = threading.Event()
        self.held_packet: bytes | None = None
        self.held_server: socket.socket | None = None
        super().__init__(upstream_port)

    def release(self) -> list[bytes]:
        """Send the held script on its old connection; the server's answers (none when the
        server has closed that connection)."""
        assert self.held_server is not None and self.held_packet is not None
        self.held_server.settimeout(5)
        try:
            self.held_server.sendall(self.held_packet)
            return _read_script_answers(self.held_server)
        except OSError:
            return []

    def close_held(self) -> None:
        assert self.held_server is not None
        self.held_server.close()

    def _held(self, server: socket.socket) -> bool:
        return self.held_server is server

    def _intercept(self, client: socket.socket, server: socket.socket, packet: bytes) -> bool:
        if not (self.is_push_statements(client, packet[4:]) and self.armed.is_set() and not self.held.is_set()):
            return False
        self.held_packet, self.held_server = packet, server
        self.held.set()
        client.shutdown(socket.SHUT_RDWR)
        client.close()
        return True


def start_behind_dropper(tc: HourglassTestCase):
    """A fresh namespace, a CommitAnswerDropper in front of its MariaDB, and a healthy daemon
    that reaches MySQL only through it."""
    ns = tc.namespace()
    proxy = CommitAnswerDropper(ns.mariadb.port)
    tc.addCleanup(proxy.close)
    d = tc.start_daemon({"mysql": {"port": proxy.port, "timeout": 3, **getattr(tc, "MYSQL", {})}}, namespace=ns)
    wait_until(lambda: d.health().status == 200, 15, 0.05, "the daemon to be healthy")
    return ns, proxy, d


class CommitInDoubtTest(HourglassTestCase):
    MYSQL: dict = {}  # the daemon's defaults: new jobs through the bulk protocol

    def test_pushes_answered_503_after_a_lost_commit_answer_leave_aborted_rows(self):
        ns, proxy, d = start_behind_dropper(self)
        before = d.push({"topic": "doubt", "body": "before", "delay": 600000})
        self.assertStatus(before, 200, "a push before the proxy is armed")

        proxy.armed.set()
        r = d.push({"topic": "doubt", "body": "lost-commit-answer", "delay": 600000})
        self.assertTrue(proxy.dropped.is_set(), "the proxy never saw the push's COMMIT")
        self.assertStatus(r, 503, "a push whose COMMIT answer was lost")

        # The row was committed although the push was refused ...
        rows = ns.query("SELECT id, version FROM message WHERE body = '\"lost-commit-answer\"'")
        self.assertEqual(len(rows), 1, f"the COMMIT should have happened on the server: {rows}")
        job_id = rows[0][0]

        # ... and once the journal is back it is marked aborted, with a transition saying why.
        wait_until(lambda: ns.query(f"SELECT state FROM message WHERE id = {job_id}") == [("aborted",)],
                   20, 0.1, "the row committed in doubt to be marked aborted")
        self.assertEqual(ns.query(f"SELECT version FROM message WHERE id = {job_id}"), [("2",)])
        history = ns.query(f"SELECT from_state, to_state, actor FROM job_history WHERE message_id = {job_id} "
                           "ORDER BY version")
        self.assertEqual([h[1] for h in history], ["delayed", "aborted"], history)
        self.assertIn("push in doubt", history[1][2])
        self.assertIn("reconciler: 1 outcomes in doubt settled: 1 pushes answered 503 had committed rows, now "
                      "aborted", d.log(), "the settle's log line and its count")

        # It never reached Redis, and the earlier, acknowledged job is untouched.
        self.assertEqual(d.job(job_id).json()["state"], "aborted", "the refused push must not be a live job")
        first = before.json()["id"]
        self.assertEqual(ns.query(f"SELECT state FROM message WHERE id = {first}"), [("delayed",)])
        self.assertEqual(d.job(first).json()["state"], "delayed")

        # After a Redis loss, a restore brings back the acknowledged job only.
        ns.flush_redis()
        restored = d.restore(expire=True, timeout=30)
        self.assertStatus(restored, 200, "/reStore")
        self.assertEqual(restored.json()["restored"], 1, restored.json())
        self.assertEqual(d.job(first).json()["state"], "delayed")
        self.assertEqual(d.job(job_id).json()["state"], "aborted", "the refused push must not come back")

        # And pushes work again without a restart.
        self.assertStatus(d.push({"topic": "doubt", "body": "after"}), 200, "a push after the reconnect")


class InDoubtAcrossKillTest(HourglassTestCase):
    """A push and a delete whose COMMIT answers were lost are written down (state_dir/in-doubt)
    before their 503s; the daemon is killed -9 before the reconciler's grace period ends; the
    next start settles both from the file: the push's committed row is aborted (it never
    reached Redis), the delete that committed is carried out in Redis."""

    def test_a_push_and_a_delete_in_doubt_are_settled_after_kill_9(self):
        ns, proxy, d = start_behind_dropper(self)
        kept = d.push({"topic": "kill9", "body": "kept", "delay": 600000})
        self.assertStatus(kept, 200)
        kept_id = kept.json()["id"]
        victim = d.push({"topic": "kill9", "body": "victim", "delay": 600000})
        self.assertStatus(victim, 200)
        victim_id = victim.json()["id"]

        # a push whose COMMIT answer is lost
        proxy.armed.set()
        self.assertStatus(d.push({"topic": "kill9", "body": "refused", "delay": 600000}), 503)
        self.assertTrue(proxy.dropped.is_set())
        refused_id = ns.query("SELECT id FROM message WHERE body = '\"refused\"'")[0][0]
        wait_until(lambda: d.health().status == 200, 15, 0.05, "the journal to reconnect")

        # a delete whose COMMIT answer is lost: its row says deleted, Redis still has the job
        proxy.rearm(b"INSERT IGNORE INTO TRANSITION")
        self.assertStatus(d.delete(victim_id), 503)
        self.assertTrue(proxy.dropped.is_set())
        self.assertEqual(ns.query(f"SELECT state, version FROM message WHERE id = {victim_id}"), [("deleted", "2")])
        shard_keys = [k for k in ns.redis_keys("*:jobs") if ns.redis_cli("HEXISTS", k, id_key(victim_id)).strip() == "1"]
        self.assertEqual(len(shard_keys), 1, "the job is still in Redis")

        # both written down before their 503s; kill -9 before the grace period lets them settle
        state = pathlib.Path(d.dir) / "state" / "in-doubt"
        lines = state.read_text().split("\n")
        self.assertTrue(any(line.startswith(f"P {refused_id} ") for line in lines), lines)
        self.assertTrue(any(line.startswith(f"D {victim_id} 1 ") for line in lines), lines)
        d.kill()
        self.assertEqual(ns.query(f"SELECT state, version FROM message WHERE id = {refused_id}"), [("delayed", "1")])

        # the next start (MySQL directly now) settles both
        d.config["mysql"]["port"] = ns.mariadb.port
        d.start()
        wait_until(lambda: ns.query(f"SELECT state FROM message WHERE id = {refused_id}") == [("aborted",)],
                   20, 0.1, "the refused push's committed row to be aborted")
        wait_until(lambda: ns.redis_cli("HEXISTS", shard_keys[0], id_key(victim_id)).strip() == "0",
                   20, 0.1, "the committed delete to be carried out in Redis")
        wait_until(lambda: state.read_text() == "", 10, 0.1, "the state file to be emptied")
        self.assertEqual(d.job(victim_id).json()["state"], "deleted")
        self.assertEqual(d.job(refused_id).json()["state"], "aborted")
        self.assertEqual(d.job(kept_id).json()["state"], "delayed", "the acknowledged job is untouched")
        self.assertEqual(ns.query(f"SELECT state FROM message WHERE id = {victim_id}"), [("deleted",)])
        counts = d.stats().json()["topics"]["kill9"]
        self.assertEqual(counts["delayed"], 1, counts)
        self.assertEqual(d.stats().json()["journal"]["inDoubt"], 0)


class HeldScriptTest(HourglassTestCase):
    MYSQL: dict = {}

    def test_a_script_left_in_the_old_connection_cannot_commit_after_the_reconnect(self):
        ns = self.namespace()
        proxy = ScriptHolder(ns.mariadb.port)
        self.addCleanup(proxy.close)
        d = self.start_daemon({"mysql": {"port": proxy.port, "timeout": 3, **self.MYSQL}}, namespace=ns)
        d.wait_ready()
        self.assertStatus(d.push({"topic": "held", "body": "before", "delay": 600000}), 200, "a push before")

        proxy.armed.set()
        r = d.push({"topic": "held", "body": "held-script", "delay": 600000})
        self.assertTrue(proxy.held.is_set(), "the proxy never saw the push's statements")
        self.assertStatus(r, 503, "a push whose cycle's connection broke after its statements were sent")

        # The journal reconnects (a new connection through the proxy) and takes pushes again.
        wait_until(lambda: d.push({"topic": "held", "body": "after", "delay": 600000}).status == 200, 20, 0.2,
                   "pushes to be accepted again after the reconnect")

        # Only now do the old connection's statements reach the server, as when a hung server
        # resumes. They run (the server answers them), but no COMMIT follows: the proxy then
        # closes that connection and the server rolls them back.
        answers = proxy.release()
        self.assertTrue(answers and answers[-1][4:5] == b"\x00",
                        f"the server should have run the held statements: {answers}")
        proxy.close_held()
        time.sleep(0.5)
        rows = ns.query("SELECT state FROM message WHERE body = '\"held-script\"'")
        self.assertIn(rows, ([], [("aborted",)]), f"the refused push's row must not be live: {rows}")
        self.assertEqual(ns.query("SELECT COUNT(*) FROM message WHERE body = '\"after\"' AND state = 'delayed'"),
                         [("1",)], "the push after the reconnect")


# The same with new jobs as SQL text ([mysql] bulk_inserts = false; what a server without bulk
# operations gets): their statements and COMMIT are as exposed to a lost answer.
class CommitInDoubtTextTest(CommitInDoubtTest):
    MYSQL = {"bulk_inserts": "false"}


class HeldScriptTextTest(HeldScriptTest):
    MYSQL = {"bulk_inserts": "false"}


if __name__ == "__main__":
    unittest.main(verbosity=2)
