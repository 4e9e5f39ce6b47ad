"""docs/openapi.yaml, the API's OpenAPI 3.1 description (contract, "Describing and tracing").

* The checker every integration test's HTTP goes through (openapi_check.py) catches what it
  must: an undocumented field, status, path or method, a required header missing, a request
  the description calls invalid answered 2xx, a raw answer that is not a documented error —
  and a Mismatch a test swallowed still fails that test.
* Every route the daemon's router knows is a path of the description, and the reverse.
* GET /openapi.json serves the description (converted from the YAML at build time) with no
  token, an ETag and 304s.
* A client generated from it by @hey-api/openapi-ts (tests/openapi/, pinned), compiled by
  typescript, pushes, gets and finishes a job against a real daemon.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

import openapi_check
import yaml
from harness import REPO_ROOT, HourglassTestCase, unique_name, wait_until
from openapi_check import Mismatch, exchange_problems

OPENAPI_DIR = REPO_ROOT / "tests" / "openapi"
JSON = {"Content-Type": "application/json"}


def err(code: str) -> bytes:
    return json.dumps({"error": code, "message": "m"}).encode()


TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class CheckerTest(unittest.TestCase):
    """The checker against hand-made exchanges: it passes the right ones and names the wrong."""

    JOB = {"id": "382309453472989188", "topic": "t", "body": {"a": 1}, "priority": 5, "ttr": 30000,
           "tries": 3, "attempt": 1, "runAt": 1795216876674, "leaseUntil": 1795216906674,
           "traceparent": None, "tracestate": None, "group": None}

    def problems(self, method, target, status, body, headers=JSON, req_headers=None, req_body=None):
        return exchange_problems(method, target, req_headers or {}, req_body, status, headers,
                                 body if isinstance(body, bytes) else json.dumps(body).encode())

    def assertCaught(self, problems, *words):
        self.assertTrue(problems, "the checker let it through")
        text = "\n".join(problems)
        for w in words:
            self.assertIn(w, text)

    def test_documented_exchanges_pass(self):
        self.assertEqual(self.problems("GET", "/get/t?timeout=0.5&count=1", 200, self.JOB), [])
        self.assertEqual(self.problems("GET", "/get/a,b?count=2", 200, [self.JOB, self.JOB]), [])
        self.assertEqual(self.problems("GET", "/get/t?timeout=0", 204, b"", headers={}), [])
        self.assertEqual(self.problems("POST", "/push", 200, {"id": "1", "runAt": 2, "duplicate": True},
                                       req_headers=JSON, req_body=b'{"topic":"t","body":null}'), [])
        self.assertEqual(self.problems("POST", "/finish", 200, {"id": "7", "state": "finished"},
                                       req_headers={"Content-Type": "application/x-www-form-urlencoded"},
                                       req_body=b"id=7&attempt=1"), [])
        self.assertEqual(self.problems("GET", "/finish?id=7", 404, err("not_found")), [])

    def test_an_undocumented_field_fails(self):
        self.assertCaught(self.problems("GET", "/get/t", 200, {**self.JOB, "colour": "red"}),
                          "colour", "Additional properties")
        # in a nested object too
        self.assertCaught(self.problems("GET", "/finish?id=1", 404, {"error": "not_found", "message": "m",
                                                                   "hint": "x"}), "hint")

    def test_a_missing_or_mistyped_field_fails(self):
        job = dict(self.JOB)
        del job["runAt"]
        self.assertCaught(self.problems("GET", "/get/t", 200, job), "runAt")
        self.assertCaught(self.problems("GET", "/get/t", 200, {**self.JOB, "id": 382309453472989188}),
                          "id")
        # every job object shows its trace context, null when it has none, a W3C value when it has
        self.assertEqual(self.problems("GET", "/get/t", 200, {**self.JOB, "traceparent": TRACEPARENT,
                                                              "tracestate": "k=v"}), [])
        self.assertCaught(self.problems("GET", "/get/t", 200, {k: v for k, v in self.JOB.items()
                                                               if k != "traceparent"}), "traceparent")
        # and its group, null when it has none
        self.assertEqual(self.problems("GET", "/get/t", 200, {**self.JOB, "group": "customer-7"}), [])
        self.assertCaught(self.problems("GET", "/get/t", 200, {k: v for k, v in self.JOB.items()
                                                               if k != "group"}), "group")
        self.assertCaught(self.problems("GET", "/get/t", 200, {**self.JOB, "traceparent": "00-x"}), "traceparent")

    def test_head_answers_as_its_get(self):
        # the daemon takes HEAD wherever it takes GET: checked by the path's get, without a body
        self.assertEqual(self.problems("HEAD", "/jobs/1", 404, b"", headers=JSON), [])
        self.assertCaught(self.problems("HEAD", "/jobs/1", 409, b"", headers=JSON), "status 409")
        self.assertCaught(self.problems("HEAD", "/push", 200, b"", headers=JSON), "no HEAD on /push")

    def test_an_undocumented_status_fails(self):
        self.assertCaught(self.problems("GET", "/stats", 409, err("conflict")), "status 409")
        self.assertCaught(self.problems("GET", "/finish?id=1", 500, err("unavailable")), "status 500")
        # a documented status with another status's error code
        self.assertCaught(self.problems("GET", "/finish?id=1", 404, err("conflict")), "not_found")

    def test_an_undocumented_path_or_method_fails_unless_refused(self):
        self.assertCaught(self.problems("GET", "/colours", 200, {}), "no such path", "status 200")
        self.assertEqual(self.problems("GET", "/colours", 404, err("not_found")), [])
        self.assertCaught(self.problems("DELETE", "/push", 200, {}), "no DELETE on /push")
        allow = {**JSON, "Allow": "POST"}
        self.assertEqual(self.problems("DELETE", "/push", 405, err("method_not_allowed"), headers=allow), [])
        self.assertCaught(self.problems("DELETE", "/push", 405, err("method_not_allowed")), "header Allow")

    def test_a_required_header_missing_fails(self):
        self.assertCaught(self.problems("GET", "/stats", 503, err("unavailable")), "Retry-After")
        self.assertEqual(self.problems("GET", "/stats", 503, err("unavailable"),
                                       headers={**JSON, "Retry-After": "1"}), [])

    def test_an_undocumented_media_type_fails(self):
        self.assertCaught(self.problems("GET", "/stats", 400, err("bad_request"), headers={"Content-Type": "text/html"}),
                          "Content-Type")
        self.assertCaught(self.problems("GET", "/get/t", 204, b"x", headers={}), "a body where none")

    def test_an_invalid_request_answered_2xx_fails(self):
        ok = {"id": "7", "state": "finished"}
        self.assertCaught(self.problems("GET", "/finish?id=7&colour=red", 200, ok), "colour", "invalid")
        self.assertCaught(self.problems("GET", "/finish", 200, ok), "id is required")
        self.assertCaught(self.problems("GET", "/finish?id=x7", 200, ok), "x7")
        self.assertCaught(self.problems("POST", "/push", 200, {"id": "1", "runAt": 2}, req_headers=JSON,
                                        req_body=b'{"topic":"t","delay":1,"runAt":2}'), "invalid")
        # the same requests refused are right
        self.assertEqual(self.problems("GET", "/finish?id=7&colour=red", 400, err("bad_request")), [])
        self.assertEqual(self.problems("POST", "/push", 400, err("bad_request"), req_headers=JSON,
                                       req_body=b'{"topic":"t","delay":1,"runAt":2}'), [])

    def test_raw_answers_to_malformed_requests_must_be_documented_errors(self):
        def answer(status, body, extra=""):
            return (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
                    f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        bad = b"GET /stats HTTP/1.1\r\nBad Header\r\n\r\n"
        openapi_check.check_raw(bad, answer(400, err("bad_request")))
        with self.assertRaises(Mismatch):
            openapi_check.check_raw(bad, answer(200, b"{}"))
        with self.assertRaises(Mismatch):
            openapi_check.check_raw(bad, answer(400, b'{"error":"bad_request"}'))
        # pipelined: each answer against its own request
        two = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        with self.assertRaises(Mismatch):
            openapi_check.check_raw(two, answer(404, err("not_found")) + answer(200, b"{}"))

    def test_webhook_deliveries_are_checked(self):
        headers = {"Content-Type": "application/json", "Hourglass-Id": self.JOB["id"], "Hourglass-Topic": "t",
                   "Hourglass-Attempt": "1"}
        body = json.dumps(self.JOB).encode()
        self.assertEqual(openapi_check.webhook_problems(headers, body), [])
        self.assertEqual(openapi_check.webhook_problems({**headers, "Hourglass-Signature": "sha256=" + "ab" * 32},
                                                        body), [])
        self.assertCaught(openapi_check.webhook_problems(headers, json.dumps({**self.JOB, "x": 1}).encode()), "'x'")
        self.assertCaught(openapi_check.webhook_problems({**headers, "Hourglass-Attempt": "0"}, body),
                          "Hourglass-Attempt")
        del headers["Hourglass-Id"]
        self.assertCaught(openapi_check.webhook_problems(headers, body), "Hourglass-Id missing")
        # recorded for the running test, not raised on the receiver's thread
        mark = openapi_check.problem_mark()
        openapi_check.check_webhook(headers, body)
        self.assertEqual(len(openapi_check.problems_since(mark)), 1)
        del openapi_check._PROBLEMS[mark:]  # (this test made it on purpose)

    def test_a_caught_mismatch_still_fails_its_test(self):
        class Inner(HourglassTestCase):
            def test_swallows(self):
                try:
                    openapi_check.check_exchange("GET", "/colours", {}, None, 200, JSON, b"{}")
                except Mismatch:
                    pass

        result = unittest.TestResult()
        Inner("test_swallows").run(result)
        self.assertEqual(len(result.failures) + len(result.errors), 1, result.failures + result.errors)
        self.assertIn("did not match docs/openapi.yaml", str(result.failures + result.errors))


class RoutesTest(unittest.TestCase):
    """The router's table (src/core/router.c) and the description's paths name the same URLs."""

    def test_every_route_is_described_and_every_path_routed(self):
        src = (REPO_ROOT / "src" / "core" / "router.c").read_text()
        rules = re.findall(r'\{"(/[^"]*)", EP_\w+\}', src)
        mids = re.findall(r'\{"(/[^"]*/)", "(/[^"]*)", EP_\w+\}', src)
        self.assertGreater(len(rules), 15, "router.c's table not found")
        self.assertTrue(mids, "router.c's mid-path table not found")
        paths = set(openapi_check.description().doc["paths"])

        def described(route: str) -> bool:
            if not route.endswith("/") or route in paths:
                return route in paths
            return any(re.fullmatch(re.escape(route) + r"\{[^}/]+\}", p) for p in paths)
        routes = set(rules) | {f"{a}{{x}}{b}" for a, b in mids}
        for route in sorted(set(rules)):
            self.assertTrue(described(route), f"the router serves {route} but docs/openapi.yaml has no path for it")
        for a, b in mids:
            self.assertTrue(any(re.fullmatch(re.escape(a) + r"\{[^}/]+\}" + re.escape(b), p) for p in paths),
                            f"the router serves {a}{{..}}{b} but docs/openapi.yaml has no path for it")
        for p in sorted(paths):
            generic = re.sub(r"\{[^}/]+\}", "{x}", p)
            self.assertTrue(p in routes or generic in routes or generic.replace("{x}", "") in routes
                            or any(generic == f"{r}{{x}}" for r in rules),
                            f"docs/openapi.yaml describes {p}, which the router does not serve")


class ServedTest(HourglassTestCase):
    """GET /openapi.json: the description as JSON, no token needed, revalidated by ETag."""

    def test_served_as_json_without_a_token(self):
        d = self.start_daemon({"http": {"token": "tok-" + unique_name("t"), "admin_token": "adm-x"}})
        self.assertEqual(d.request("GET", "/stats").status, 401, "the token is not in force")
        r = d.request("GET", "/openapi.json")
        self.assertStatus(r, 200)
        self.assertEqual(r.header("Content-Type"), "application/json")
        with open(openapi_check.DESCRIPTION, encoding="utf-8") as f:
            want = yaml.safe_load(f)
        self.assertEqual(r.json(), want, "GET /openapi.json is not docs/openapi.yaml as JSON")
        self.assertEqual(r.json()["openapi"], "3.1.0")
        etag = r.header("ETag")
        self.assertEqual(etag, '"' + hashlib.sha1(r.body).hexdigest()[:20] + '"')
        again = d.request("GET", "/openapi.json", headers={"If-None-Match": etag})
        self.assertStatus(again, 304)
        self.assertEqual(again.body, b"")
        self.assertStatus(d.request("GET", "/openapi.json", headers={"If-None-Match": '"0000"'}), 200)
        # HEAD, and a method it does not take
        self.assertStatus(d.request("HEAD", "/openapi.json"), 200)
        self.assertEqual(d.request("POST", "/openapi.json").status, 405)


def run(argv: list[str], cwd: Path | str, what: str, timeout: float = 300) -> str:
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"{what} failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


class GeneratedClientTest(HourglassTestCase):
    """A TypeScript client generated from the description drives a real daemon."""

    def test_generated_client_pushes_gets_and_finishes(self):
        missing = [t for t in ("node", "npm") if shutil.which(t) is None]
        self.assertEqual(missing, [], "node and npm are needed: run scripts/deps.sh test (as root)")
        run(["sh", str(OPENAPI_DIR / "npm-ci.sh")], OPENAPI_DIR, "npm ci in tests/openapi")
        bin_dir = OPENAPI_DIR / "node_modules" / ".bin"
        work = Path(tempfile.mkdtemp(prefix="hg-openapi-client-"))
        self.addCleanup(shutil.rmtree, work, True)
        run([str(bin_dir / "openapi-ts"), "-i", str(openapi_check.DESCRIPTION), "-o", str(work / "gen")],
            OPENAPI_DIR, "@hey-api/openapi-ts")
        shutil.copy(OPENAPI_DIR / "client-test.ts", work)
        (work / "tsconfig.json").write_text(json.dumps({
            "compilerOptions": {"target": "ES2022", "module": "commonjs", "moduleResolution": "node",
                                "strict": True, "skipLibCheck": True, "outDir": "out", "types": [],
                                "lib": ["ES2022", "DOM", "DOM.Iterable"]},
            "files": ["client-test.ts"]}))
        run([str(bin_dir / "tsc"), "-p", str(work / "tsconfig.json")], work, "tsc (the generated client)")

        token = "tok-" + unique_name("c")
        d = self.start_daemon({"http": {"token": token}})
        d.default_headers["Authorization"] = f"Bearer {token}"
        wait_until(d.ready, 15, 0.05, "the daemon to be ready")
        topic = unique_name("client")
        out = run(["node", str(work / "out" / "client-test.js"), d.url, topic, token], work,
                  "the generated client", timeout=60)
        seen = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(seen["push"]["status"], 200, seen)
        self.assertEqual(seen["get"]["status"], 200, seen)
        self.assertEqual(seen["get"]["body"]["id"], seen["id"], seen)
        self.assertEqual(seen["get"]["body"]["body"], {"hello": "openapi"})
        self.assertEqual(seen["get"]["body"]["priority"], 3)
        self.assertEqual(seen["finish"], {"status": 200, "contentType": "application/json",
                                          "body": {"id": seen["id"], "state": "finished"}})
        self.assertEqual(seen["inspect"]["status"], 200)
        self.assertEqual(seen["inspect"]["body"]["state"], "finished")
        # and the daemon saw it: the job is finished there
        self.assertEqual(d.job(seen["id"]).json()["state"], "finished")
        # what the client received is what the description says
        pushed = json.dumps({"topic": topic, "body": {"hello": "openapi"}, "priority": 3, "ttr": 60000}).encode()
        for method, target, req, key in (("POST", "/push", pushed, "push"),
                                         ("GET", f"/get/{topic}?timeout=5", None, "get"),
                                         ("GET", f"/finish?id={seen['id']}&attempt=1", None, "finish"),
                                         ("GET", f"/jobs/{seen['id']}", None, "inspect")):
            s = seen[key]
            openapi_check.check_exchange(method, target, JSON if req else {}, req, s["status"],
                                         {"Content-Type": s["contentType"]}, json.dumps(s["body"]).encode())


if __name__ == "__main__":
    unittest.main()
