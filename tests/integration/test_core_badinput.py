"""Black-box tests of malformed requests: every one must get the contract's 4xx JSON error
({"error": code, "message": text}, Content-Type application/json), never a 5xx or a hang, and
leave the daemon alive and Redis and MySQL exactly as they were.

    make integration T=test_core_badinput
"""

import json
import unittest

from core_common import CoreTestCase, now_ms
from harness import parse_http_responses, wait_until

JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
MAX_DELAY = 31536000000


def push_body(**fields):
    return json.dumps({"topic": "t", **fields})


class BadInputTest(CoreTestCase):
    def setUp(self):
        self.d = self.daemon()
        d = self.d
        # Some state the bad requests must not touch: a delayed job with a bizKey, a ready
        # job and a reserved one.
        self.delayed = self.push(d, "t", {"keep": 1}, delay=600000, bizKey="biz-1")
        self.ready = self.push(d, "r", "ready")
        res = self.push(d, "q", "reserved")
        self.assertEqual(self.get_one(d, "q")["id"], res)
        self.reserved = res
        self.unknown = str(int(self.delayed) + 4096 * 1000)  # well-formed, never issued
        wait_until(lambda: self.journal_idle(d), 10, 0.05, "the journal to be written")
        self.before = self.snapshot()

    # -- state of Redis and MySQL
    def snapshot(self):
        ns = self.d.namespace
        redis = {}
        for key in ns.redis_keys():
            if ":{w}:" in key or key.endswith(":marks"):
                continue  # id-generator lease, loss-detection marks: advanced every second by design
            kind = ns.redis_cli("TYPE", key)
            if kind == "hash":
                value = ns.redis_cli("HGETALL", key)
            elif kind == "zset":
                value = ns.redis_cli("ZRANGE", key, "0", "-1", "WITHSCORES")
            elif kind == "string":
                value = ns.redis_cli("GET", key)
            else:
                value = kind
            redis[key] = value
        mysql = {
            "message": ns.query("SELECT id, topic, state, version, attempts, run_at, HEX(body) "
                                "FROM message ORDER BY id"),
            "transition": ns.query("SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS(',', message_id, version, to_state, at))), 0) "
                                "FROM job_history"),
        }
        return {"redis": redis, "mysql": mysql}

    def assertUnchanged(self):
        self.assertStatus(self.d.health(), 200, "daemon health after bad input")
        wait_until(lambda: self.journal_idle(self.d), 10, 0.05, "the journal to be idle")
        after = self.snapshot()
        self.assertEqual(after["redis"], self.before["redis"], "Redis changed")
        self.assertEqual(after["mysql"], self.before["mysql"], "MySQL changed")
        # and the jobs still behave
        self.assertEqual(self.inspect(self.d, self.delayed)["state"], "delayed")
        self.assertEqual(self.inspect(self.d, self.reserved)["state"], "reserved")
        self.assertCounts(self.d, "t", delayed=1)
        self.assertCounts(self.d, "r", ready=1)
        self.assertCounts(self.d, "q", reserved=1)

    def check(self, cases):
        """cases: (what, method, path, body, headers, status, code)."""
        for what, method, path, body, headers, status, code in cases:
            with self.subTest(what):
                r = self.d.request(method, path, body=body, headers=headers)
                self.assertError(r, status, code, f"{what} ({method} {path[:80]})")
        self.assertUnchanged()

    # -- /push bodies
    def test_push_malformed_json_and_shapes(self):
        P = "/push"
        cases = [
            ("truncated JSON", "POST", P, '{"topic": "t",', JSON, 400, "bad_request"),
            ("not JSON", "POST", P, "hello", JSON, 400, "bad_request"),
            ("empty body", "POST", P, "", JSON, 400, "bad_request"),
            ("trailing garbage", "POST", P, '{"topic":"t"} x', JSON, 400, "bad_request"),
            ("JSON string", "POST", P, '"t"', JSON, 400, "bad_request"),
            ("JSON number", "POST", P, "42", JSON, 400, "bad_request"),
            ("JSON null", "POST", P, "null", JSON, 400, "bad_request"),
            ("empty array", "POST", P, "[]", JSON, 400, "bad_request"),
            ("array of arrays", "POST", P, '[[{"topic":"t"}]]', JSON, 400, "bad_request"),
            ("array with a non-object", "POST", P, '[{"topic":"t"}, 1]', JSON, 400, "bad_request"),
            ("array with one bad job", "POST", P, '[{"topic":"t"},{"topic":"t","priority":"x"}]', JSON,
             400, "bad_request"),
            ("invalid UTF-8", "POST", P, b'{"topic":"t","body":"\xff\xfe"}', JSON, 400, "bad_request"),
            ("duplicate key topic", "POST", P, '{"topic":"t","topic":"u"}', JSON, 400, "bad_request"),
            ("duplicate key delay", "POST", P, '{"topic":"t","delay":1,"delay":2}', JSON, 400, "bad_request"),
            ("unknown field", "POST", P, push_body(delay_ms=5), JSON, 400, "bad_request"),
            ("unknown field, other case", "POST", P, '{"Topic":"t"}', JSON, 400, "bad_request"),
            ("unknown field id", "POST", P, push_body(id="1"), JSON, 400, "bad_request"),
            ("form body instead of JSON", "POST", P, "topic=t&body=1", FORM, 400, "bad_request"),
        ]
        self.check(cases)

    def test_push_bad_topics(self):
        P = "/push"
        cases = [
            ("missing topic", "POST", P, '{"body":1}', JSON, 400, "bad_request"),
            ("empty topic", "POST", P, '{"topic":""}', JSON, 400, "bad_request"),
            ("topic of 129 chars", "POST", P, json.dumps({"topic": "a" * 129}), JSON, 400, "bad_request"),
            ("topic with a space", "POST", P, '{"topic":"a b"}', JSON, 400, "bad_request"),
            ("topic with a slash", "POST", P, '{"topic":"a/b"}', JSON, 400, "bad_request"),
            ("topic with a comma", "POST", P, '{"topic":"a,b"}', JSON, 400, "bad_request"),
            ("topic with accented letter", "POST", P, json.dumps({"topic": "caf\u00e9"}), JSON, 400,
             "bad_request"),
            ("topic in CJK", "POST", P, json.dumps({"topic": "\u4e2d\u6587"}), JSON, 400, "bad_request"),
            ("topic with NUL", "POST", P, '{"topic":"a\\u0000b"}', JSON, 400, "bad_request"),
            ("topic a number", "POST", P, '{"topic":5}', JSON, 400, "bad_request"),
            ("topic null", "POST", P, '{"topic":null}', JSON, 400, "bad_request"),
            ("topic an array", "POST", P, '{"topic":["t"]}', JSON, 400, "bad_request"),
        ]
        self.check(cases)
        # 128 chars is fine (the boundary)
        self.assertJsonOk(self.d.push({"topic": "a" * 128}))

    def test_push_bad_field_values(self):
        P = "/push"
        far = now_ms() + 2 * MAX_DELAY
        cases = [
            ("negative delay", "POST", P, push_body(delay=-1), JSON, 400, "bad_request"),
            ("delay over max_delay", "POST", P, push_body(delay=MAX_DELAY + 1), JSON, 400, "bad_request"),
            ("delay 2^63", "POST", P, '{"topic":"t","delay":9223372036854775808}', JSON, 400, "bad_request"),
            ("delay 1e30", "POST", P, '{"topic":"t","delay":1e30}', JSON, 400, "bad_request"),
            ("delay a string", "POST", P, push_body(delay="100"), JSON, 400, "bad_request"),
            ("delay a fraction", "POST", P, push_body(delay=1.5), JSON, 400, "bad_request"),
            ("delay and runAt", "POST", P, push_body(delay=10, runAt=now_ms() + 1000), JSON, 400,
             "bad_request"),
            ("runAt a string", "POST", P, push_body(runAt="soon"), JSON, 400, "bad_request"),
            ("runAt past max_delay", "POST", P, push_body(runAt=far), JSON, 400, "bad_request"),
            ("runAt negative", "POST", P, push_body(runAt=-5), JSON, 400, "bad_request"),
            ("priority 10", "POST", P, push_body(priority=10), JSON, 400, "bad_request"),
            ("priority -1", "POST", P, push_body(priority=-1), JSON, 400, "bad_request"),
            ("priority a string", "POST", P, push_body(priority="1"), JSON, 400, "bad_request"),
            ("ttr negative", "POST", P, push_body(ttr=-1), JSON, 400, "bad_request"),
            ("ttr a string", "POST", P, push_body(ttr="30s"), JSON, 400, "bad_request"),
            ("tries 0", "POST", P, push_body(tries=0), JSON, 400, "bad_request"),
            ("tries negative", "POST", P, push_body(tries=-3), JSON, 400, "bad_request"),
            ("tries a boolean", "POST", P, push_body(tries=True), JSON, 400, "bad_request"),
            ("bizKey of 129 chars", "POST", P, push_body(bizKey="k" * 129), JSON, 400, "bad_request"),
            ("bizKey a number", "POST", P, push_body(bizKey=12), JSON, 400, "bad_request"),
            ("bizKey an object", "POST", P, push_body(bizKey={}), JSON, 400, "bad_request"),
            ("bizKey with a control char", "POST", P, push_body(bizKey="a\u0001b"), JSON, 400, "bad_request"),
            ("replace a string", "POST", P, push_body(bizKey="biz-1", replace="yes"), JSON, 400,
             "bad_request"),
        ]
        self.check(cases)

    def test_push_too_large(self):
        d = self.d
        many = [{"topic": "t", "body": i} for i in range(1001)]
        self.assertError(d.push(many), 413, "too_large", "array over max_batch")
        big = json.dumps({"topic": "t", "body": "x" * 70000})
        raw = d.raw(f"POST /push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(big)}\r\n\r\n{big}", read_timeout=3)
        [r] = parse_http_responses(raw)
        self.assertError(r, 413, "too_large", "body over max_body")
        raw = d.raw(f"POST /finish HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                    f"Content-Length: {len(big)}\r\n\r\n{big}", read_timeout=3)
        [r] = parse_http_responses(raw)
        self.assertError(r, 413, "too_large", "form body over max_body")
        self.assertUnchanged()

    # -- ids and by-id endpoints
    def test_bad_and_unknown_ids(self):
        u, res, dl = self.unknown, self.reserved, self.delayed
        cases = [
            ("finish without id", "GET", "/finish", None, None, 400, "bad_request"),
            ("finish with empty id", "GET", "/finish?id=", None, None, 400, "bad_request"),
            ("id not a number", "GET", "/finish?id=abc", None, None, 400, "bad_request"),
            ("negative id", "GET", "/finish?id=-1", None, None, 400, "bad_request"),
            ("fractional id", "GET", "/touch?id=1.5", None, None, 400, "bad_request"),
            ("id over 64 bits", "GET", "/finish?id=99999999999999999999999", None, None, 400, "bad_request"),
            ("hex id", "GET", "/delete?id=0x10", None, None, 400, "bad_request"),
            ("id with spaces", "GET", f"/delete?id=%20{dl}", None, None, 400, "bad_request"),
            ("unknown id: finish", "GET", f"/finish?id={u}", None, None, 404, "not_found"),
            ("unknown id: touch", "GET", f"/touch?id={u}", None, None, 404, "not_found"),
            ("unknown id: release", "GET", f"/release?id={u}", None, None, 404, "not_found"),
            ("unknown id: delete", "GET", f"/delete?id={u}", None, None, 404, "not_found"),
            ("unknown id: reschedule", "GET", f"/reschedule?id={u}&delay=1", None, None, 404, "not_found"),
            ("unknown id: inspect", "GET", f"/jobs/{u}", None, None, 404, "not_found"),
            ("malformed id: inspect", "GET", "/jobs/abc", None, None, 400, "bad_request"),
            ("negative id: inspect", "GET", "/jobs/-7", None, None, 400, "bad_request"),
            ("finish a ready job", "GET", f"/finish?id={self.ready}", None, None, 404, "not_found"),
            ("touch a delayed job", "GET", f"/touch?id={dl}", None, None, 404, "not_found"),
            ("reschedule a reserved job", "GET", f"/reschedule?id={res}&delay=5", None, None, 409, "conflict"),
        ]
        self.check(cases)

    def test_bad_parameters(self):
        res, dl = self.reserved, self.delayed
        cases = [
            ("unknown parameter on finish", "GET", f"/finish?id={res}&bogus=1", None, None, 400, "bad_request"),
            ("unknown parameter on delete", "GET", f"/delete?id={dl}&force=1", None, None, 400, "bad_request"),
            ("unknown parameter on stats", "GET", "/stats?verbose=1", None, None, 400, "bad_request"),
            ("id given twice", "GET", f"/finish?id={res}&id={res}", None, None, 400, "bad_request"),
            ("release delay negative", "GET", f"/release?id={res}&delay=-1", None, None, 400, "bad_request"),
            ("release delay not a number", "GET", f"/release?id={res}&delay=abc", None, None, 400,
             "bad_request"),
            ("release delay over max", "GET", f"/release?id={res}&delay={MAX_DELAY + 1}", None, None, 400,
             "bad_request"),
            ("reschedule delay negative", "GET", f"/reschedule?id={dl}&delay=-5", None, None, 400, "bad_request"),
            ("reschedule delay and runAt", "GET", f"/reschedule?id={dl}&delay=1&runAt={now_ms() + 1000}", None,
             None, 400, "bad_request"),
            ("reschedule runAt not a number", "GET", f"/reschedule?id={dl}&runAt=abc", None, None, 400,
             "bad_request"),
            ("reschedule delay huge", "GET", f"/reschedule?id={dl}&delay=99999999999999999999", None, None, 400,
             "bad_request"),
            ("malformed %-escape in query", "GET", f"/finish?id={res}%ZZ", None, None, 400, "bad_request"),
            ("JSON params: invalid JSON", "POST", "/finish", '{"id": ', JSON, 400, "bad_request"),
            ("JSON params: id an array", "POST", "/finish", json.dumps({"id": [res]}), JSON, 400, "bad_request"),
            ("JSON params: not an object", "POST", "/finish", json.dumps([res]), JSON, 400, "bad_request"),
            ("JSON params: duplicate key", "POST", "/delete", f'{{"id":"{dl}","id":"{dl}"}}', JSON, 400,
             "bad_request"),
            ("JSON params: unknown key", "POST", "/delete", json.dumps({"id": dl, "now": True}), JSON, 400,
             "bad_request"),
            ("form params: malformed escape", "POST", "/finish", "id=%ZZ", FORM, 400, "bad_request"),
            ("form params: unknown key", "POST", "/finish", f"id={res}&x=1", FORM, 400, "bad_request"),
            ("dead limit not a number", "GET", "/dead/t?limit=abc", None, None, 400, "bad_request"),
            ("dead limit negative", "GET", "/dead/t?limit=-1", None, None, 400, "bad_request"),
            ("dead bad topic", "GET", "/dead/a%20b", None, None, 400, "bad_request"),
        ]
        self.check(cases)

    def test_bad_get_requests(self):
        cases = [
            ("timeout over longpoll_max", "GET", "/get/r?timeout=61", None, None, 400, "bad_request"),
            ("timeout negative", "GET", "/get/r?timeout=-1", None, None, 400, "bad_request"),
            ("timeout not a number", "GET", "/get/r?timeout=abc", None, None, 400, "bad_request"),
            ("timeout empty", "GET", "/get/r?timeout=", None, None, 400, "bad_request"),
            ("count 0", "GET", "/get/r?timeout=0&count=0", None, None, 400, "bad_request"),
            ("count 101", "GET", "/get/r?timeout=0&count=101", None, None, 400, "bad_request"),
            ("count not a number", "GET", "/get/r?timeout=0&count=abc", None, None, 400, "bad_request"),
            ("count fractional", "GET", "/get/r?timeout=0&count=1.5", None, None, 400, "bad_request"),
            ("unknown get parameter", "GET", "/get/r?timeout=0&wait=5", None, None, 400, "bad_request"),
            ("empty topic in a list", "GET", "/get/a,,r?timeout=0", None, None, 400, "bad_request"),
            ("trailing comma", "GET", "/get/r,?timeout=0", None, None, 400, "bad_request"),
            ("topic with a space", "GET", "/get/a%20b?timeout=0", None, None, 400, "bad_request"),
            ("topic of 129 chars", "GET", "/get/" + "a" * 129 + "?timeout=0", None, None, 400, "bad_request"),
            ("unicode topic", "GET", "/get/caf%C3%A9?timeout=0", None, None, 400, "bad_request"),
            ("topic with NUL", "GET", "/get/a%00b?timeout=0", None, None, 400, "bad_request"),
            ("malformed escape in topic", "GET", "/get/a%ZZ?timeout=0", None, None, 400, "bad_request"),
        ]
        self.check(cases)

    def test_unknown_paths_and_methods(self):
        dl = self.delayed
        cases = [
            ("unknown path", "GET", "/nope", None, None, 404, "not_found"),
            ("root", "GET", "/", None, None, 404, "not_found"),
            ("near miss", "GET", "/pushx", None, None, 404, "not_found"),
            ("nested topic path", "GET", "/get/r/extra?timeout=0", None, None, 404, "not_found"),
            ("nested jobs path", "GET", f"/jobs/{dl}/history", None, None, 404, "not_found"),
            ("path traversal", "GET", "/get/../stats", None, None, 404, "not_found"),
            ("PUT /push", "PUT", "/push", push_body(), JSON, 405, "method_not_allowed"),
            ("DELETE /jobs/{id}", "DELETE", f"/jobs/{dl}", None, None, 405, "method_not_allowed"),
            ("PATCH /reschedule", "PATCH", f"/reschedule?id={dl}&delay=0", b"", None, 405,
             "method_not_allowed"),
            ("POST /stats", "POST", "/stats", b"", None, 405, "method_not_allowed"),
            ("OPTIONS /push", "OPTIONS", "/push", None, None, 405, "method_not_allowed"),
        ]
        self.check(cases)

    # -- malformed HTTP
    def test_malformed_http(self):
        d = self.d
        raws = [
            ("garbage request line", b"GARBAGE\r\n\r\n"),
            ("request line without a path", b"GET\r\n\r\n"),
            ("binary junk", b"\x00\x01\x02\xff\r\n\r\n"),
            ("header without a colon", b"GET /health HTTP/1.1\r\nHost: x\r\nBadHeader\r\n\r\n"),
            ("negative Content-Length", b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"),
            ("non-numeric Content-Length", b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"),
        ]
        for what, data in raws:
            with self.subTest(what):
                out = d.raw(data, read_timeout=3)
                self.assertTrue(out, f"{what}: no answer at all")
                responses = parse_http_responses(out)
                self.assertEqual(len(responses), 1, out)
                self.assertError(responses[0], 400, "bad_request", what)
        self.assertUnchanged()


if __name__ == "__main__":
    unittest.main(verbosity=2)
