"""Shared helpers for the hardening tests (tests/integration/test_hardening_*.py).

No tests here (discovery imports it and finds none). Everything talks to the daemon over
HTTP or raw TCP, and to Redis and MySQL through the harness's command-line clients; nothing
reaches into src/.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any, Iterable

import openapi_check
from core_common import CoreTestCase
from harness import HOST, Daemon, Namespace, Response, parse_http_responses

ERROR_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "too_large", 429: "rate_limited",
               503: "unavailable"}

KEY_ALPHABET = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"  # docs/architecture.md


def key_to_id(key: str) -> str:
    """A compact Redis id key (11 chars of the ordered base-64 alphabet) as the decimal API id."""
    n = 0
    for c in key:
        n = n * 64 + KEY_ALPHABET.index(c)
    return str(n)


# Every job record of a namespace: id key, state number, version, attempts (cmsgpack, see
# src/redis/lua/lib.lua: pack(ver, state, attempts, ...)). Test-only: KEYS over one Redis.
_DUMP_JOBS = """
local out = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  local h = redis.call('HGETALL', k)
  for i = 1, #h, 2 do
    local ver, st, att = cmsgpack.unpack(h[i + 1])
    out[#out + 1] = h[i]
    out[#out + 1] = tostring(st) .. ' ' .. tostring(ver) .. ' ' .. tostring(att)
  end
end
return out
"""
STATE_NAMES = {1: "delayed", 2: "ready", 3: "reserved", 4: "finished", 5: "deleted", 6: "dead"}


def redis_jobs(cli, prefix: str, timeout: float = 10.0) -> dict[str, tuple[str, int, int]]:
    """{decimal id: (state, version, attempts)} of every job record under prefix in Redis;
    cli runs one redis-cli command (e.g. Namespace.redis_cli, or RedisServer.cli with db=)."""
    out = cli("EVAL", _DUMP_JOBS, "0", prefix + ":{*}:jobs", timeout=timeout)
    lines = [x for x in out.split("\n") if x != ""]
    jobs = {}
    for key, rec in zip(lines[0::2], lines[1::2]):
        st, ver, att = rec.split()
        jobs[key_to_id(key)] = (STATE_NAMES.get(int(st), st), int(ver), int(att))
    return jobs


# A fingerprint of every key of a namespace but the id-generator lease ({w}: renewed every
# second by design) and the loss-detection marks (<shard>:marks: advanced every second by
# design, src/duties/lossmark.h): type and content (stream: length only; its consumer group's
# bookkeeping moves with every blocking read).
_DUMP_KEYS = """
local out = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  if not string.find(k, ':{w}:', 1, true) and string.sub(k, -6) ~= ':marks' then
    local t = redis.call('TYPE', k)['ok']
    local v
    if t == 'hash' then v = redis.call('HGETALL', k)
    elseif t == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
    elseif t == 'string' then v = {redis.call('GET', k)}
    elseif t == 'stream' then v = {tostring(redis.call('XLEN', k))}
    else v = {} end
    out[#out + 1] = k .. '\\t' .. t .. '\\t' .. cjson.encode(v)
  end
end
table.sort(out)
return out
"""


def snapshot(ns: Namespace) -> dict[str, Any]:
    """Redis keys (type and content) and MySQL rows of a namespace, for before/after checks."""
    redis = ns.redis_cli("EVAL", _DUMP_KEYS, "0", ns.prefix + "*", timeout=10).split("\n")
    mysql = {
        "message": ns.query("SELECT id, topic, state, version, attempts, run_at, HEX(body), "
                            "COALESCE(HEX(biz_key), '-') FROM message ORDER BY id"),
        "transition": ns.query("SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS(',', message_id, version, to_state, at))), 0) "
                                "FROM job_history"),
    }
    return {"redis": sorted(x for x in redis if x), "mysql": mysql}


def diff_snapshots(before: dict, after: dict) -> str:
    """A readable difference of two snapshots ('' when equal)."""
    lines = []
    b, a = set(before["redis"]), set(after["redis"])
    lines += [f"  Redis lost:   {x[:300]}" for x in sorted(b - a)]
    lines += [f"  Redis gained: {x[:300]}" for x in sorted(a - b)]
    for table in ("message", "transition"):
        tb, ta = set(before["mysql"][table]), set(after["mysql"][table])
        lines += [f"  MySQL {table} lost:   {x}" for x in sorted(tb - ta, key=str)]
        lines += [f"  MySQL {table} gained: {x}" for x in sorted(ta - tb, key=str)]
    return "\n".join(lines)


def raw_exchange(d: Daemon, chunks: Iterable[bytes] | bytes, gap: float = 0.0, read_timeout: float = 3.0,
                 close_after_send: bool = False, half_close: bool = False,
                 max_total: float = 20.0, until: int | None = None) -> tuple[bytes, bool]:
    """Send bytes on a fresh connection; return (what came back, whether the server closed
    the connection). Reads until the server closes, nothing arrives for read_timeout s, or
    (until=n) n complete responses have arrived. close_after_send: close our socket right
    after sending (a client that gives up mid-request); nothing is read then."""
    if isinstance(chunks, (bytes, bytearray)):
        chunks = [chunks]
    out = bytearray()
    closed = False
    with socket.create_connection((HOST, d.port), timeout=5) as s:
        try:
            for i, c in enumerate(chunks):
                if i and gap:
                    time.sleep(gap)
                s.sendall(c)
            if half_close:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        if close_after_send:
            return b"", False
        s.settimeout(read_timeout)
        deadline = time.monotonic() + max_total
        while time.monotonic() < deadline:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not b:
                closed = True
                break
            out += b
            if until is not None and complete_responses(bytes(out)) >= until:
                break
    # the answers, against docs/openapi.yaml (malformed requests' as documented errors)
    if d.checked:
        openapi_check.check_raw(b"".join(bytes(c) for c in chunks), bytes(out))
    return bytes(out), closed


def complete_responses(data: bytes) -> int:
    """How many complete responses (with Content-Length or no body) data holds."""
    n = 0
    rest = data
    while rest:
        head, sep, rest = rest.partition(b"\r\n\r\n")
        if not sep:
            return n
        length = 0
        status = head[9:12]
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip() or 0)
        if status in (b"204", b"304"):
            length = 0
        if len(rest) < length:
            return n
        rest = rest[length:]
        n += 1
    return n


def responses_of(data: bytes) -> list[Response]:
    return parse_http_responses(data) if data else []


class HardeningTestCase(CoreTestCase):
    """CoreTestCase plus error-shape assertions that accept a set of statuses."""

    def assertJsonError(self, r: Response, statuses: int | Iterable[int], what: str = "") -> dict:
        """A contract error: status among `statuses`, Content-Type application/json, body
        {"error": <the code of that status>, "message": <non-empty text>}."""
        allowed = {statuses} if isinstance(statuses, int) else set(statuses)
        prefix = f"{what}: " if what else ""
        if r.status not in allowed:
            self.fail(f"{prefix}expected HTTP {sorted(allowed)}, got {r.status}: {r.body[:300]!r}")
        return self.assertError(r, r.status, ERROR_CODES[r.status], what)

    def assertAlive(self, d: Daemon, what: str = "") -> None:
        self.assertTrue(d.running, f"hourglassd exited ({what}): {d.log_tail(20)}")
        r = d.health(timeout=10)
        self.assertStatus(r, 200, f"/health after {what}")


class Metrics:
    """Parsed Prometheus text: value(name, **labels) sums the samples that match."""

    def __init__(self, text: str) -> None:
        self.samples: list[tuple[str, dict, float]] = []
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name_labels, _, value = line.rpartition(" ")
            name, _, labels = name_labels.partition("{")
            lab = {}
            for part in labels.rstrip("}").split(","):
                if "=" in part:
                    k, _, v = part.partition("=")
                    lab[k.strip()] = v.strip().strip('"')
            try:
                self.samples.append((name, lab, float(value)))
            except ValueError:
                pass

    def value(self, name: str, **labels: str) -> float:
        return sum(v for n, lab, v in self.samples
                   if n == name and all(lab.get(k) == want for k, want in labels.items()))

    def has(self, name: str) -> bool:
        return any(n == name for n, _, _ in self.samples)


class Recorder:
    """Thread-safe list of records with a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[Any] = []

    def add(self, item: Any) -> None:
        with self.lock:
            self.items.append(item)

    def list(self) -> list[Any]:
        with self.lock:
            return list(self.items)


def jdump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
