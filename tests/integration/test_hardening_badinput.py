"""Hardening: hostile and buggy requests the core bad-input suite (test_core_badinput.py) does
not already send. Every one must be answered with the contract's 4xx JSON error (or, for a
client that vanishes mid-request, nothing), leave the daemon alive and serving, and leave
Redis and MySQL exactly as they were (every key and row compared before and after).

What is accepted on purpose (deep but legal nesting, huge numbers and duplicate keys inside a
body, a chunked push) is checked in AcceptedTest: the body must come back byte for byte.

    make integration T=test_hardening_badinput
"""

from __future__ import annotations

import json
import unittest

from harness import Daemon, shared_stack, wait_until
from test_hardening_common import (HardeningTestCase, diff_snapshots, jdump, raw_exchange, responses_of,
                                   snapshot)

JSON = {"Content-Type": "application/json"}


def job(**fields) -> str:
    return jdump({"topic": "t", **fields})


def raw_push(body: bytes, extra: str = "") -> bytes:
    return (f"POST /push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def chunked_push(chunks: bytes) -> bytes:
    return (b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunks)


def nest(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def nest_obj(depth: int) -> str:
    return '{"a":' * depth + "0" + "}" * depth


class _DaemonPerClass(HardeningTestCase):
    """One daemon (threads 2, defaults) on a fresh namespace for the whole class, with some state
    bad requests must not touch: a delayed job with a bizKey, a ready job, a reserved one."""

    d: Daemon

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.d = Daemon(namespace=shared_stack().fresh_namespace())
        cls.addClassCleanup(cls.d.close)
        cls.d.start()
        cls.d.wait_ready(15)
        d = cls.d

        def ok(r):
            assert r.status == 200, r
            return r.json()
        cls.delayed = ok(d.push({"topic": "t", "body": {"keep": 1}, "delay": 600000, "bizKey": "biz-1"}))["id"]
        cls.ready = ok(d.push({"topic": "r", "body": "ready"}))["id"]
        cls.reserved = ok(d.push({"topic": "q", "body": "reserved"}))["id"]
        assert ok(d.get("q", timeout=1))["id"] == cls.reserved

    def setUp(self):
        wait_until(lambda: self.journal_idle(self.d), 10, 0.05, "the journal to be idle")
        self.before = snapshot(self.d.namespace)
        self.sent = 0

    def assertUnchanged(self, what: str):
        self.assertAlive(self.d, what)
        wait_until(lambda: self.journal_idle(self.d), 10, 0.05, "the journal to be idle")
        after = snapshot(self.d.namespace)
        diff = diff_snapshots(self.before, after)
        self.assertEqual(diff, "", f"Redis or MySQL changed after {what}:\n{diff}")
        self.assertEqual(self.state(self.d, self.delayed), "delayed")
        self.assertEqual(self.state(self.d, self.reserved), "reserved")
        self.assertEqual(self.state(self.d, self.ready), "ready")

    def check(self, cases, what: str):
        """cases: (what, method, path, body, headers, allowed statuses)."""
        for name, method, path, body, headers, statuses in cases:
            with self.subTest(name):
                r = self.d.request(method, path, body=body, headers=headers)
                self.sent += 1
                self.assertJsonError(r, statuses, f"{name} ({method} {path[:60]})")
        self.assertUnchanged(what)

    def check_raw(self, cases, what: str, expect_answer: bool = True):
        """cases: (what, bytes, allowed statuses): exactly one answer, a 4xx JSON error, and the
        connection closed after it (evhttp closes after a malformed request)."""
        for name, data, statuses in cases:
            with self.subTest(name):
                out, closed = raw_exchange(self.d, data, read_timeout=2, until=2)
                self.sent += 1
                rs = responses_of(out)
                self.assertEqual(len(rs), 1, f"{name}: answers {rs} (raw {out[:300]!r})")
                self.assertJsonError(rs[0], statuses, name)
        self.assertUnchanged(what)


class MalformedJsonTest(_DaemonPerClass):
    def test_malformed_json_bodies(self):
        P = "/push"
        cases = [
            ("single quotes", "POST", P, "{'topic':'t'}", JSON, 400),
            ("trailing comma in object", "POST", P, '{"topic":"t",}', JSON, 400),
            ("trailing comma in array", "POST", P, '[{"topic":"t"},]', JSON, 400),
            ("unquoted key", "POST", P, '{topic:"t"}', JSON, 400),
            ("missing value", "POST", P, '{"topic":}', JSON, 400),
            ("missing colon", "POST", P, '{"topic" "t"}', JSON, 400),
            ("NaN", "POST", P, '{"topic":"t","body":NaN}', JSON, 400),
            ("Infinity", "POST", P, '{"topic":"t","body":Infinity}', JSON, 400),
            ("-Infinity", "POST", P, '{"topic":"t","body":-Infinity}', JSON, 400),
            ("block comment", "POST", P, '{"topic":"t"/* c */}', JSON, 400),
            ("line comment after the document", "POST", P, '{"topic":"t"} // c', JSON, 400),
            ("leading zero", "POST", P, '{"topic":"t","delay":01}', JSON, 400),
            ("leading plus", "POST", P, '{"topic":"t","delay":+1}', JSON, 400),
            ("hex number", "POST", P, '{"topic":"t","body":0x10}', JSON, 400),
            ("number starting with a dot", "POST", P, '{"topic":"t","body":.5}', JSON, 400),
            ("number ending with a dot", "POST", P, '{"topic":"t","body":1.}', JSON, 400),
            ("exponent without digits", "POST", P, '{"topic":"t","body":1e}', JSON, 400),
            ("raw newline inside a string", "POST", P, '{"topic":"t","body":"a\nb"}', JSON, 400),
            ("raw tab inside a string", "POST", P, '{"topic":"t","body":"a\tb"}', JSON, 400),
            ("invalid escape \\x", "POST", P, '{"topic":"t","body":"\\x41"}', JSON, 400),
            ("short \\u escape", "POST", P, '{"topic":"t","body":"\\u12"}', JSON, 400),
            ("unterminated string", "POST", P, '{"topic":"t', JSON, 400),
            ("two documents", "POST", P, '{"topic":"t"}{"topic":"t"}', JSON, 400),
            ("NUL byte after the document", "POST", P, b'{"topic":"t"}\x00', JSON, 400),
            ("overlong UTF-8 in a body", "POST", P, b'{"topic":"t","body":"\xc0\xaf"}', JSON, 400),
            ("UTF-8 encoded surrogate in a body", "POST", P, b'{"topic":"t","body":"\xed\xa0\x80"}', JSON, 400),
            ("truncated UTF-8 sequence", "POST", P, b'{"topic":"t","body":"\xe2\x82"}', JSON, 400),
            ("top-level true", "POST", P, "true", JSON, 400),
            ("top-level false", "POST", P, "false", JSON, 400),
            ("only whitespace", "POST", P, "   \r\n\t ", JSON, 400),
            ("array holding null", "POST", P, "[null]", JSON, 400),
        ]
        self.check(cases, "malformed JSON")

    def test_deep_nesting(self):
        P = "/push"
        cases = [
            ("300 nested arrays in a body", "POST", P, '{"topic":"t","body":' + nest(300) + "}", JSON, 400),
            ("300 nested objects in a body", "POST", P, '{"topic":"t","body":' + nest_obj(300) + "}", JSON, 400),
            ("300 nested arrays around the job", "POST", P, nest(300, '{"topic":"t"}'), JSON, 400),
            ("60000 open brackets (stack exhaustion)", "POST", P, '{"topic":"t","body":' + "[" * 60000 + "}",
             JSON, 400),
            ("nesting in a JSON parameter body", "POST", "/finish", '{"id":' + nest(300) + "}", JSON, 400),
        ]
        self.check(cases, "deep nesting")


class FieldValueTest(_DaemonPerClass):
    def test_huge_numbers_in_fields(self):
        P = "/push"
        cases = [
            ("priority 1e400", "POST", P, '{"topic":"t","priority":1e400}', JSON, 400),
            ("priority 2^64+5 (wraps to 5)", "POST", P, '{"topic":"t","priority":18446744073709551621}', JSON, 400),
            ("priority 20 digits", "POST", P, '{"topic":"t","priority":99999999999999999999}', JSON, 400),
            ("ttr 2^64", "POST", P, '{"topic":"t","ttr":18446744073709551616}', JSON, 400),
            ("ttr 1e400", "POST", P, '{"topic":"t","ttr":1e400}', JSON, 400),
            ("ttr over max_ttr", "POST", P, job(ttr=86400001), JSON, 400),
            ("tries 2^32+1 (wraps to 1)", "POST", P, job(tries=4294967297), JSON, 400),
            ("tries over max_tries", "POST", P, job(tries=1001), JSON, 400),
            ("tries 2^63", "POST", P, '{"topic":"t","tries":9223372036854775808}', JSON, 400),
            ("delay 1e400", "POST", P, '{"topic":"t","delay":1e400}', JSON, 400),
            ("delay -2^63", "POST", P, '{"topic":"t","delay":-9223372036854775808}', JSON, 400),
            ("delay 2^64 (wraps to 0)", "POST", P, '{"topic":"t","delay":18446744073709551616}', JSON, 400),
            ("runAt 2^63-1", "POST", P, job(runAt=9223372036854775807), JSON, 400),
            ("runAt 2^64", "POST", P, '{"topic":"t","runAt":18446744073709551616}', JSON, 400),
            ("runAt -2^63-1", "POST", P, '{"topic":"t","runAt":-9223372036854775809}', JSON, 400),
            ("runAt 1e400", "POST", P, '{"topic":"t","runAt":1e400}', JSON, 400),
            ("release delay 2^64", "GET", f"/release?id={self.reserved}&delay=18446744073709551616", None,
             None, 400),
            ("reschedule runAt 2^64", "GET", f"/reschedule?id={self.delayed}&runAt=18446744073709551616", None,
             None, 400),
            ("get count 2^64+1", "GET", "/get/r?timeout=0&count=18446744073709551617", None, None, 400),
            ("get timeout 1e400", "GET", "/get/r?timeout=1e400", None, None, 400),
            ("dead limit 2^64", "GET", "/dead/t?limit=18446744073709551616", None, None, 400),
            ("id 2^64", "GET", "/finish?id=18446744073709551616", None, None, 400),
        ]
        self.check(cases, "huge numbers in fields")

    def test_wrong_types(self):
        P = "/push"
        cases = [
            ("priority true", "POST", P, job(priority=True), JSON, 400),
            ("priority an array", "POST", P, job(priority=[1]), JSON, 400),
            ("priority an object", "POST", P, job(priority={"p": 1}), JSON, 400),
            ("priority a fraction", "POST", P, job(priority=2.5), JSON, 400),
            ("ttr a string of digits", "POST", P, job(ttr="1000"), JSON, 400),
            ("ttr an array", "POST", P, job(ttr=[]), JSON, 400),
            ("tries an object", "POST", P, job(tries={}), JSON, 400),
            ("tries a fraction", "POST", P, job(tries=2.5), JSON, 400),
            ("delay true", "POST", P, job(delay=True), JSON, 400),
            ("delay an array", "POST", P, job(delay=[1]), JSON, 400),
            ("runAt an array", "POST", P, job(runAt=[1]), JSON, 400),
            ("runAt a fraction", "POST", P, job(runAt=1.5), JSON, 400),
            ("bizKey true", "POST", P, job(bizKey=True), JSON, 400),
            ("bizKey an array", "POST", P, job(bizKey=["k"]), JSON, 400),
            ("replace the string true", "POST", P, job(bizKey="biz-1", replace="true"), JSON, 400),
            ("replace 1", "POST", P, job(bizKey="biz-1", replace=1), JSON, 400),
            ("topic true", "POST", P, jdump({"topic": True}), JSON, 400),
            ("topic an object", "POST", P, jdump({"topic": {"t": 1}}), JSON, 400),
            ("topic a fraction", "POST", P, jdump({"topic": 1.5}), JSON, 400),
            ("JSON params: id null", "POST", "/delete", jdump({"id": None}), JSON, 400),
            ("JSON params: delay an object", "POST", "/release", jdump({"id": self.reserved, "delay": {}}),
             JSON, 400),
        ]
        self.check(cases, "wrong types")

    def test_duplicate_keys_at_the_job_level(self):
        P = "/push"
        cases = [
            ("priority twice", "POST", P, '{"topic":"t","priority":1,"priority":2}', JSON, 400),
            ("body twice", "POST", P, '{"topic":"t","body":1,"body":2}', JSON, 400),
            ("body twice around topic", "POST", P, '{"body":1,"topic":"t","body":1}', JSON, 400),
            ("bizKey twice", "POST", P, '{"topic":"t","bizKey":"a","bizKey":"b"}', JSON, 400),
            ("ttr twice", "POST", P, '{"topic":"t","ttr":1,"ttr":1}', JSON, 400),
            ("tries twice", "POST", P, '{"topic":"t","tries":1,"tries":2}', JSON, 400),
            ("runAt twice", "POST", P, '{"topic":"t","runAt":1,"runAt":2}', JSON, 400),
            ("replace twice", "POST", P, '{"topic":"t","bizKey":"z","replace":true,"replace":false}', JSON, 400),
            ("topic twice, once escaped", "POST", P, '{"topic":"t","t\\u006fpic":"u"}', JSON, 400),
            ("duplicate inside one job of an array", "POST", P, '[{"topic":"t"},{"topic":"t","delay":1,"delay":1}]',
             JSON, 400),
        ]
        self.check(cases, "duplicate keys")


class TopicCharsetTest(_DaemonPerClass):
    def test_unicode_and_control_characters_in_pushed_topics(self):
        bad = ["a\tb", "a\nb", "a\rb", "a\x7fb", "a\x1bb", "a\u200bb", "a\u202eb", "a\U0001F600",
               "\uff54", "e\u0301", "a\u00a0b", "a\u2028b", "a\\b", 'a"b', "a*b", "a?b", "a%b", "{0}",
               "a\ud800b"]
        cases = [(f"topic {t!r}", "POST", "/push", json.dumps({"topic": t}), JSON, 400) for t in bad]
        self.check(cases, "bad topics in pushes")

    def test_unicode_and_control_characters_in_path_topics(self):
        bad = ["%09", "a%0D%0Ab", "%7F", "a%E2%80%8Bb", "%F0%9F%98%80", "%C0%AF", "%FF", "a*b", "%7B0%7D",
               "a%5Cb", "a%22b", "%EF%BD%94"]
        cases = [(f"GET /get/{t}", "GET", f"/get/{t}?timeout=0", None, None, 400) for t in bad]
        cases += [(f"GET /dead/{t}", "GET", f"/dead/{t}", None, None, 400) for t in ("a%E2%80%AEb", "a%0Ab", "%FF")]
        self.check(cases, "bad topics in paths")


class PathTraversalTest(_DaemonPerClass):
    def test_path_traversal_in_ids(self):
        """400 or 404 (the contract's JSON), never the page the path tries to reach. (A topic
        named ".." is legal, [A-Za-z0-9_.:-]: /get/.. and /dead/.. are plain topic names.)"""
        paths = ["/jobs/../stats", "/jobs/%2e%2e", "/jobs/%2E%2E", "/jobs/..", "/jobs/.", "/jobs/%2e",
                 "/jobs/%2e%2e%2fstats", "/jobs/..%2fstats", "/jobs/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
                 "/jobs/..%5c..%5cstats", "/jobs//1", "/jobs/", "/jobs/1%2f2", "/jobs/%00",
                 "/reStore/..%2f", "/reStore/..%2fhealth", "/reStore/../health", "/reStore/%2e%2e",
                 "/dead/..%2f..%2fetc%2fpasswd", "/dead/%2e%2e%2f", "/get/..%2fstats?timeout=0",
                 "/get/%2e%2e%2f%2e%2e?timeout=0",
                 "//stats", "/./stats", "/stats/.", "/stats/..", "/finish?id=../1", "/delete?id=..%2f1"]
        for p in paths:
            with self.subTest(p):
                r = self.d.request("GET", p)
                self.sent += 1
                self.assertJsonError(r, (400, 404), p)
                body = r.json()
                self.assertNotIn("topics", body, f"{p} reached /stats")
                self.assertNotIn("status", body, f"{p} reached /health")
        self.assertUnchanged("path traversal")


class TransportTest(_DaemonPerClass):
    """Truncated, chunked and pipelined requests, oversized headers: raw bytes on a socket."""

    def test_truncated_bodies(self):
        """Content-Length larger than what is sent, then the client goes away: nothing is
        queued, the daemon keeps serving; if it answers at all, a 4xx JSON error."""
        body = job(body="x" * 50).encode()
        cases = [
            ("push: 20 of 500 bytes, then close",
             b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: 500\r\n\r\n" + body[:20], False),
            ("push: a whole job but Content-Length + 100, then close",
             (b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % (len(body) + 100)) + body, False),
            ("push: half the job, then FIN", raw_push(body)[:-len(body) // 2], True),
            ("finish form body cut short, then FIN",
             b"POST /finish HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
             b"Content-Length: 40\r\n\r\nid=" + self.reserved.encode(), True),
            ("delete JSON body cut short, then close",
             b"POST /delete HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: 60\r\n\r\n{\"id\":\"" + self.delayed.encode() + b"\"}", False),
            ("headers cut mid-line, then FIN", b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Le", True),
            ("chunked push cut inside a chunk, then close",
             chunked_push(b"%x\r\n" % len(body) + body[:10]), False),
        ]
        for name, data, fin in cases:
            with self.subTest(name):
                if fin:
                    out, _ = raw_exchange(self.d, data, half_close=True, read_timeout=5)
                    for r in responses_of(out):
                        self.assertJsonError(r, range(400, 500), name)
                else:
                    raw_exchange(self.d, data, close_after_send=True)
                self.sent += 1
                self.assertAlive(self.d, name)
        self.assertUnchanged("truncated bodies")

    def test_malformed_chunked_bodies(self):
        body = job(body="chunk").encode()
        cases = [
            ("chunk size not hex", chunked_push(b"zz\r\n" + body + b"\r\n0\r\n\r\n"), 400),
            ("negative chunk size", chunked_push(b"-1\r\n" + body + b"\r\n0\r\n\r\n"), 400),
            ("chunk size with 0x (not HEXDIG; if read as 16, the body is cut JSON)",
             chunked_push(b"0x10\r\n" + body[:16] + b"\r\n0\r\n\r\n"), 400),
            ("chunk size overflowing 64 bits", chunked_push(b"ffffffffffffffffffffff\r\n" + body + b"\r\n0\r\n\r\n"),
             (400, 413)),
            ("empty chunk size line", chunked_push(b"\r\n" + body + b"\r\n0\r\n\r\n"), 400),
            ("chunk longer than its size", chunked_push(b"3\r\n" + body + b"\r\n0\r\n\r\n"), 400),
            ("chunked body over max_body", chunked_push(b"".join(b"8000\r\n" + b" " * 0x8000 + b"\r\n"
                                                                  for _ in range(3)) + b"0\r\n\r\n"), 413),
            ("chunk size 2^63", chunked_push(b"8000000000000000\r\n" + body + b"\r\n0\r\n\r\n"), (400, 413)),
            ("Content-Length and chunked together (request smuggling)",
             b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\n"
             b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nPOST /push HTTP/1.1\r\nHost: x\r\nContent-Length: "
             + b"%d\r\n\r\n" % len(body) + body, 400),
        ]
        self.check_raw([(n, d, s) for n, d, s in cases], "malformed chunked bodies")

    def test_pipelined_garbage_after_a_valid_request(self):
        """One keep-alive connection: a valid request, then garbage. The valid one is answered
        normally, the garbage with a 4xx JSON error, and nothing else happens."""
        ok = b"GET /jobs/" + self.delayed.encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        health = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        bad_push = raw_push(b'{"topic":"a b"}')
        cases = [
            ("unknown HTTP version", health, b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", 200),
            ("a body over max_body", health, raw_push(b"").replace(b"Content-Length: 0", b"Content-Length: 999999999"),
             200),
            ("garbage line", health, b"GARBAGE\r\n\r\n", 200),
            ("binary junk", ok, b"\x00\x01\x02\xff\xfe\r\n\r\n", 200),
            ("header without a colon", ok, b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 200),
            ("mangled protocol name", health, b"GET /health HTXP/1.1\r\nHost: x\r\n\r\n", 200),
            ("huge header line", health, b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 200),
            ("a rejected push then garbage", bad_push, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400),
            ("a truncated JSON push then garbage",
             b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{\"topic\":", b"HELLO WORLD\r\n\r\n", 400),
        ]
        for name, first, garbage, first_status in cases:
            with self.subTest(name):
                out, closed = raw_exchange(self.d, first + garbage, read_timeout=5)
                self.sent += 2
                rs = responses_of(out)
                self.assertEqual(len(rs), 2, f"{name}: expected two answers, got {rs} (raw {out[:400]!r})")
                if first_status == 200:
                    self.assertStatus(rs[0], 200, f"{name}: the valid request")
                else:
                    self.assertJsonError(rs[0], first_status, f"{name}: the first request")
                self.assertJsonError(rs[1], range(400, 500), f"{name}: the garbage")
                self.assertTrue(closed, f"{name}: connection left open after a malformed request")
        self.assertUnchanged("pipelined garbage")

    def test_oversized_headers(self):
        """Over [http] max_header (8192 by default): a 4xx JSON error (400 from libevent 2.1)."""
        cases = [
            ("one 10000-byte header", b"GET /stats HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 10000 + b"\r\n\r\n",
             range(400, 500)),
            ("300 headers of 40 bytes", b"GET /stats HTTP/1.1\r\nHost: x\r\n"
             + b"".join(b"X-H%03d: %s\r\n" % (i, b"v" * 30) for i in range(300)) + b"\r\n", range(400, 500)),
            ("a 9000-byte request line", b"GET /jobs/" + b"1" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
             range(400, 500)),
            ("a 20000-byte cookie on a push", raw_push(job().encode(), "Cookie: " + "c" * 20000 + "\r\n"),
             range(400, 500)),
            ("a header block that never ends", b"GET /stats HTTP/1.1\r\n" + b"X: y\r\n" * 3000, range(400, 500)),
        ]
        self.check_raw(cases, "oversized headers")


class AcceptedTest(HardeningTestCase):
    """Legal requests near the edges: accepted, and the body kept exactly as sent."""

    def raw_body_of_delivery(self, d, topic) -> bytes:
        """GET /get/{topic} and the raw JSON text of the delivered job's body (the test compares
        bytes: a JSON parser would round numbers and merge duplicate keys)."""
        r = d.get(topic, timeout=2)
        self.assertStatus(r, 200)
        return r.body

    def test_legal_edges_are_accepted_and_kept_exactly(self):
        d = self.daemon()
        bodies = {
            "nest200": nest(200),
            "nestobj200": nest_obj(200),
            "huge": '{"n":123456789012345678901234567890,"f":1.0000000000000000000000001,'
                    '"e":1e400,"neg":-0.0,"big":-99999999999999999999999999999e-99999}',
            "dups": '{"a":1,"a":2,"a":{"b":1,"b":[1,1]}}',
            "escapes": '"\\u00e9\\ud83d\\ude00\\/\\n"',
        }
        for topic, body in bodies.items():
            with self.subTest(topic):
                r = d.push(('{"topic":"%s","body":%s}' % (topic, body)).encode(), headers=JSON)
                self.assertStatus(r, 200, f"push of body {body[:60]}")
                got = self.raw_body_of_delivery(d, topic)
                self.assertIn(b'"body":' + body.encode(), got, f"body {body[:60]} not returned as sent: {got[:300]!r}")

        # a valid chunked push, split in odd places
        text = b'{"topic":"chunked","body":{"x":[1,2,3]}}'
        data = chunked_push(b"5\r\n" + text[:5] + b"\r\n" + b"1\r\n" + text[5:6] + b"\r\n"
                            + b"%x\r\n" % len(text[6:]) + text[6:] + b"\r\n0\r\n\r\n")
        out, _ = raw_exchange(d, data, read_timeout=5, until=1)
        rs = responses_of(out)
        self.assertEqual(len(rs), 1, out)
        self.assertStatus(rs[0], 200, "valid chunked push")
        self.assertIn(b'"body":{"x":[1,2,3]}', self.raw_body_of_delivery(d, "chunked"))

        # 200 levels inside a body in the deepest allowed array-of-jobs form
        r = d.push(('[{"topic":"deep","body":%s}]' % nest(200)).encode(), headers=JSON)
        self.assertStatus(r, 200, "array push with 200 levels in a body")


    def test_chunk_extension_gets_a_clear_400(self):
        """RFC 9112 7.1.1 says a recipient must ignore unrecognized chunk extensions, but
        libevent 2.1's chunked parser rejects them (it reads the size line with strtoll).
        hourglass documents that extensions are not supported (docs/api.md): such a push must
        get a clear 400 JSON error naming the chunked body — not a 413, not HTML, not a 5xx —
        and a plain chunked push on the same daemon must still work."""
        d = self.daemon()
        text = b'{"topic":"chunkext","body":1}'
        data = chunked_push(b"%x;name=value\r\n" % len(text) + text + b"\r\n0\r\n\r\n")
        out, _ = raw_exchange(d, data, read_timeout=5, until=1)
        rs = responses_of(out)
        self.assertEqual(len(rs), 1, out)
        self.assertJsonError(rs[0], 400, "chunk extension")
        self.assertIn("chunked", rs[0].json()["message"])
        plain = chunked_push(b"%x\r\n" % len(text) + text + b"\r\n0\r\n\r\n")
        out, _ = raw_exchange(d, plain, read_timeout=5, until=1)
        rs = responses_of(out)
        self.assertEqual(len(rs), 1, out)
        self.assertStatus(rs[0], 200, "plain chunked push")

if __name__ == "__main__":
    unittest.main(verbosity=2)
