"""Shared helpers for the black-box core tests (tests/integration/test_core_*.py).

Not a test module itself (discovery only picks up test_*.py). Everything here talks to the
daemon over HTTP through harness.Daemon; nothing reaches into src/.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import socket
import threading
import time
from typing import Any, Iterable

import harness
from harness import Daemon, HourglassTestCase, Response, now_ms, wait_until  # noqa: F401 (now_ms: for the test modules)

STATES_LIVE = ("delayed", "ready", "reserved")
COUNT_KEYS = ("delayed", "ready", "reserved", "dead")


class CoreTestCase(HourglassTestCase):
    """HourglassTestCase plus small assertions shared by the core tests."""

    # -- daemon
    def daemon(self, **queue: Any) -> Daemon:
        """A daemon on a fresh namespace; keyword args go to [queue] (e.g. default_ttr=1000).
        Waits until /health says 200 (Redis and MySQL connected), as a load balancer would."""
        d = self.start_daemon({"queue": queue} if queue else None)
        self.wait_healthy(d)
        return d

    def wait_healthy(self, d: Daemon, timeout: float = 15) -> None:
        harness.wait_healthy(self, d, timeout)

    # -- responses
    def assertJsonOk(self, r: Response, status: int = 200) -> Any:
        self.assertStatus(r, status)
        ctype = r.header("Content-Type") or ""
        self.assertTrue(ctype.startswith("application/json"),
                        f"Content-Type {ctype!r} for {r!r}")
        return r.json()

    def assertError(self, r: Response, status: int, code: str, what: str = "") -> dict:
        """The contract's error shape: status, application/json, {"error": code, "message": text}."""
        prefix = f"{what}: " if what else ""
        if r.status != status:
            self.fail(f"{prefix}expected HTTP {status} {code}, got {r.status}: {r.body[:500]!r}")
        ctype = r.header("Content-Type") or ""
        self.assertTrue(ctype.startswith("application/json"),
                        f"{prefix}Content-Type {ctype!r}, body {r.body[:300]!r}")
        try:
            obj = json.loads(r.body)
        except ValueError:
            self.fail(f"{prefix}error body is not JSON: {r.body[:300]!r}")
        self.assertIsInstance(obj, dict, f"{prefix}{r.body[:300]!r}")
        self.assertEqual(obj.get("error"), code, f"{prefix}{obj}")
        self.assertIsInstance(obj.get("message"), str, f"{prefix}{obj}")
        self.assertTrue(obj["message"], f"{prefix}empty message: {obj}")
        return obj

    # -- jobs
    def push(self, d: Daemon, topic: str, body: Any = None, **fields: Any) -> str:
        """Push one job; returns its id (asserting the 200 answer's shape)."""
        job = {"topic": topic, "body": body, **fields}
        obj = self.assertJsonOk(d.push(job))
        self.assertIsInstance(obj.get("id"), str, obj)
        self.assertTrue(obj["id"].isdigit(), obj)
        self.assertIsInstance(obj.get("runAt"), int, obj)
        return obj["id"]

    def get_one(self, d: Daemon, topic: str | Iterable[str], timeout: float = 5) -> dict:
        """GET /get/{topic} that must deliver one job (a JSON object)."""
        r = d.get(topic, timeout=timeout)
        self.assertStatus(r, 200, f"GET /get/{topic} timeout={timeout}")
        job = r.json()
        self.assertIsInstance(job, dict, job)
        return job

    def assertNothing(self, d: Daemon, topic: str | Iterable[str], timeout: float = 0) -> None:
        r = d.get(topic, timeout=timeout)
        self.assertEqual(r.status, 204, f"expected nothing on {topic}, got {r!r}")
        self.assertEqual(r.body, b"")

    def inspect(self, d: Daemon, id: str) -> dict:
        return self.assertJsonOk(d.job(id))

    def state(self, d: Daemon, id: str) -> str:
        return self.inspect(d, id)["state"]

    def wait_state(self, d: Daemon, id: str, state: str, timeout: float = 10) -> dict:
        """Poll /jobs/{id} until its state is `state` (states that only the batched journal
        records reach MySQL a little later); the inspected job."""
        last: dict = {}

        def ready() -> bool:
            nonlocal last
            last = self.inspect(d, id)
            return last.get("state") == state
        try:
            wait_until(ready, timeout, 0.05, f"job {id} to be {state}")
        except TimeoutError:
            self.fail(f"job {id} never became {state}: {last}")
        return last

    def wait_history(self, d: Daemon, id: str, states: list[str], timeout: float = 10) -> dict:
        """Poll /jobs/{id} until its history has len(states) entries (the journal writes in
        batches), then assert the state sequence. Returns the inspected job."""
        last: dict = {}

        def ready() -> bool:
            nonlocal last
            last = self.inspect(d, id)
            return len(last.get("history") or []) >= len(states)
        try:
            wait_until(ready, timeout, 0.05, f"history of {id} to reach {states}")
        except TimeoutError:
            self.fail(f"history of job {id} never reached {states}: {last}")
        got = [h.get("state") for h in last["history"]]
        self.assertEqual(got, states, f"history of {id}: {last['history']}")
        return last

    # -- stats
    def counts(self, d: Daemon, topic: str) -> dict:
        """{delayed, ready, reserved, dead} of one topic from /stats (zeros when absent)."""
        obj = self.assertJsonOk(d.stats())
        t = (obj.get("topics") or {}).get(topic) or {}
        return {k: int(t.get(k, 0)) for k in COUNT_KEYS}

    def assertCounts(self, d: Daemon, topic: str, **expected: int) -> None:
        want = {k: expected.get(k, 0) for k in COUNT_KEYS}
        self.assertEqual(self.counts(d, topic), want, f"/stats counts of topic {topic}")

    def wait_counts(self, d: Daemon, topic: str, timeout: float = 10, **expected: int) -> None:
        want = {k: expected.get(k, 0) for k in COUNT_KEYS}
        last: dict = {}

        def match() -> bool:
            nonlocal last
            last = self.counts(d, topic)
            return last == want
        try:
            wait_until(match, timeout, 0.05, f"counts of {topic} = {want}")
        except TimeoutError:
            self.fail(f"/stats counts of {topic} never became {want}; last {last}")

    def parked(self, d: Daemon) -> int:
        return int(self.assertJsonOk(d.stats())["http"]["parked"])

    def journal_idle(self, d: Daemon) -> bool:
        return harness.journal_idle(d)


class Background:
    """Run a callable in a thread and keep its result or exception (for parked long-polls)."""

    def __init__(self, fn, *args: Any, **kw: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self.finished: float | None = None
        self._t = threading.Thread(target=self._run, args=(fn, args, kw), daemon=True)
        self._t.start()

    def _run(self, fn, args, kw) -> None:
        try:
            self.result = fn(*args, **kw)
        except BaseException as e:  # noqa: BLE001 - reported by join()
            self.error = e
        finally:
            self.finished = time.monotonic()

    def join(self, timeout: float = 30) -> Any:
        self._t.join(timeout)
        if self._t.is_alive():
            raise TimeoutError(f"background call still running after {timeout} s")
        if self.error is not None:
            raise self.error
        return self.result

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started


def script_function(name: str) -> str:
    """The function FCALL calls src/redis/lua/<name>.lua by: "<library>_<name>", the plain
    library's name computed as scripts/embed-lua.py computes it."""
    root = pathlib.Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("embed_lua", root / "scripts" / "embed-lua.py")
    embed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(embed)
    lua = root / "src" / "redis" / "lua"
    scripts = sorted((p.stem, p.read_text()) for p in lua.glob("*.lua") if p.name not in ("lib.lua", "guard.lua"))
    library, _ = embed.library((lua / "lib.lua").read_text(), "", scripts, False)
    return f"{library}_{name}"


class RedisMonitor:
    """Every command Redis runs while open (MONITOR on its own connection), as text lines cut
    to 300 characters, or whole with full=True. `with RedisMonitor(port) as mon: ...` then read
    mon.lines."""

    FCALL = re.compile(r'"(?i:fcall)" "(hg_[0-9a-f]{12}_[a-z]+)" "1" "([^"]+):\{(\d+)\}:[a-z]+" "([^"]*)"')
    ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')  # one quoted argument of a MONITOR line

    def __init__(self, port: int, full: bool = False) -> None:
        self.lines: list[str] = []
        self._cut = None if full else 300
        self._sock = socket.create_connection(("127.0.0.1", port))
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> "RedisMonitor":
        self._sock.sendall(b"MONITOR\r\n")
        self._sock.settimeout(0.2)
        self._reader.start()
        time.sleep(0.2)  # MONITOR is in force once Redis has read it
        return self

    def __exit__(self, *exc: Any) -> None:
        time.sleep(0.3)  # what was sent just before is seen
        self._stop.set()
        self._reader.join(5)
        self._sock.close()

    def _read(self) -> None:
        buf = b""
        while not self._stop.is_set():
            try:
                chunk = self._sock.recv(1 << 20)
            except socket.timeout:
                continue
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            *done, buf = buf.split(b"\r\n")
            self.lines.extend(x[:self._cut].decode(errors="replace") for x in done)

    def calls(self, script: str, prefix: str) -> list[str]:
        """The first ARGV of every call of `script` on keys under `prefix`."""
        function = script_function(script)
        return [m.group(4) for m in map(self.FCALL.search, self.lines)
                if m and m.group(1) == function and m.group(2) == prefix]

    def push_calls(self, prefix: str) -> list[list[tuple[int, int]]]:
        """Every push.lua call on keys under `prefix`, as its (shard, jobs) pairs, one a key in
        the order sent: push.lua's ARGV is, for each key in turn, its job count and then 12
        values a job. Needs whole lines (full=True): a call of many jobs is long."""
        function = script_function("push")
        key = re.compile(re.escape(prefix) + r":\{(\d+)\}:jobs")
        out = []
        for line in self.lines:
            args = self.ARG.findall(line)
            if len(args) < 4 or args[0].lower() != "fcall" or args[1] != function:
                continue
            nkeys = int(args[2])
            shards = [key.fullmatch(k) for k in args[3:3 + nkeys]]
            if not all(shards):
                continue
            argv, at, call = args[3 + nkeys:], 0, []
            for m in shards:
                n = int(argv[at])
                call.append((int(m.group(1)), n))
                at += 1 + 12 * n
            if at != len(argv):
                raise AssertionError(f"a push.lua call's ARGV does not add up: {nkeys} keys, {len(argv)} values")
            out.append(call)
        return out
