"""A real HTTP(S) receiver on loopback for the webhook delivery tests: records every request
(time, headers, body) and answers as the test says — a status, a hang, or a closed connection.

Not a test module itself. Standard library only (http.server, ssl), and the description's
checker (openapi_check.py), which each delivery received goes through."""

from __future__ import annotations

import http.server
import json
import os
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import openapi_check
from harness import HOST, free_port


@dataclass
class Hit:
    at_ms: int
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any = field(default=None)


class WebhookReceiver:
    """`answer(hit) -> int | "hang" | "close"` decides each answer (default 200)."""

    def __init__(self, answer: Callable[[Hit], Any] | None = None, tls: bool = False) -> None:
        self.answer = answer or (lambda hit: 200)
        self.hits: list[Hit] = []
        self.lock = threading.Lock()
        self.release = threading.Event()  # set to let hanging requests go (answer 200)
        self.port = free_port()
        self.connections = 0
        self.dir = tempfile.mkdtemp(prefix="hg-receiver-")
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # the answer's head and body go out in two writes: without this, Nagle and the
                # client's delayed ACK hold every answer ~40 ms (a real receiver does the same)
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with receiver.lock:
                    receiver.connections += 1

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                hit = Hit(int(time.time() * 1000), self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
                try:
                    hit.body = json.loads(raw)
                except ValueError:
                    pass
                with receiver.lock:
                    receiver.hits.append(hit)
                # the delivery as docs/openapi.yaml's webhooks.jobDelivery says (the test fails
                # at its end otherwise)
                openapi_check.check_webhook(self.headers, raw)
                what = receiver.answer(hit)
                if what == "hang":
                    receiver.release.wait(60)
                    what = 200
                if what == "close":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                payload = b'{"ok":true}'
                try:
                    self.send_response(int(what))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the daemon gave up on this request (its timeout): expected
                    self.close_connection = True

        self.server = http.server.ThreadingHTTPServer((HOST, self.port), Handler)
        self.server.daemon_threads = True
        self.ca_file = None
        if tls:
            cert, key = os.path.join(self.dir, "cert.pem"), os.path.join(self.dir, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                            "-days", "2", "-subj", "/CN=localhost",
                            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                           check=True, capture_output=True, timeout=60)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
            self.ca_file = cert
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook", host: str = HOST) -> str:
        scheme = "https" if self.ca_file else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def snapshot(self) -> list[Hit]:
        with self.lock:
            return list(self.hits)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        subprocess.run(["rm", "-rf", self.dir], check=False)
