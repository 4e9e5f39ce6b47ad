"""A COMMIT whose answer is lost: pushes answered 503 must not leave live rows behind.

The journal sends COMMIT after a batch's statements; when the connection breaks before the
answer arrives, MySQL may have committed. The pushes in that batch were answered 503 and
never reached Redis, so a committed row would stand for no job (and /reStore after a Redis
loss would bring back a job its producer was told had failed). The journal keeps their ids
"in doubt" and marks such rows aborted once it reconnects.

The lost answer is made deterministic with a proxy between the daemon and MariaDB that
understands just enough of the MySQL protocol: armed, it forwards the COMMIT that follows an
INSERT INTO message, lets the server answer, throws the answer away and cuts the connection.
"""

from __future__ import annotations

import socket
import threading
import unittest

from harness import HourglassTestCase, wait_until

COM_QUERY = 0x03


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


class CommitAnswerDropper:
    """A TCP proxy in front of MariaDB. While armed, the first connection that sends COMMIT
    after an INSERT INTO message gets that COMMIT forwarded and answered by the server, then
    loses the answer and its connection (the server has committed; the client cannot know)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.armed = threading.Event()
        self.dropped = threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closing = False
        self.sockets: list[socket.socket] = []
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
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()
            threading.Thread(target=self._client_to_server, args=(client, server), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        while True:
            try:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _client_to_server(self, client: socket.socket, server: socket.socket) -> None:
        """Forward packet by packet, watching COM_QUERY texts."""
        inserted = False
        while True:
            packet = _read_packet(client)
            if packet is None:
                break
            payload = packet[4:]
            if payload[:1] == bytes([COM_QUERY]):
                text = payload[1:].lstrip().upper()
                if text.startswith(b"INSERT INTO MESSAGE"):
                    inserted = True
                elif text.startswith(b"COMMIT") and inserted and self.armed.is_set() \
                        and not self.dropped.is_set():
                    self.dropped.set()
                    self._commit_then_cut(client, server, packet)
                    return
                elif text.startswith(b"COMMIT") or text.startswith(b"ROLLBACK"):
                    inserted = False
            try:
                server.sendall(packet)
            except OSError:
                break
        for s in (client, server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _commit_then_cut(self, client: socket.socket, server: socket.socket, packet: bytes) -> None:
        # Stop relaying answers to the client first, then let the server commit and answer.
        client.shutdown(socket.SHUT_RDWR)
        server.sendall(packet)
        server.settimeout(10)
        _read_packet(server)  # the COMMIT's OK: the transaction is durable; nobody hears of it
        server.close()
        client.close()


class CommitInDoubtTest(HourglassTestCase):

    def test_pushes_answered_503_after_a_lost_commit_answer_leave_aborted_rows(self):
        ns = self.namespace()
        proxy = CommitAnswerDropper(ns.mariadb.port)
        self.addCleanup(proxy.close)
        d = self.start_daemon({"mysql": {"port": proxy.port, "timeout": 3}}, namespace=ns)
        wait_until(lambda: d.health().status == 200, 15, 0.05, "the daemon to be healthy")
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
        history = ns.query(f"SELECT from_state, to_state, actor FROM transition WHERE message_id = {job_id} "
                           "ORDER BY version")
        self.assertEqual([h[1] for h in history], ["delayed", "aborted"], history)
        self.assertIn("commit in doubt", history[1][2])

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


if __name__ == "__main__":
    unittest.main(verbosity=2)
