"""Hardening: authentication exactly as the contract says, and no secret in any log line.

Contract (shared/contract.md, "HTTP API"): with [http] token set, every endpoint but /health
needs `Authorization: Bearer <token>` (missing or wrong: 401 unauthorized). Admin endpoints
(/reStore, /reStore/{id}, /dead/{topic}) need the admin token: missing 401, wrong 403; with no
admin token set they answer loopback clients only (and, with a token set, still need it).
A non-loopback client cannot be made on one host without faking it, so that case is not here.

The admin token on ordinary endpoints: the contract says every endpoint "needs that token",
yet admin endpoints, which are endpoints too, are reached with the admin token alone (one
Authorization header cannot carry both). So the admin token is read as the stronger
credential, accepted everywhere; that is what AdminTokenScopeTest asserts.

    make integration T=test_hardening_auth
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import subprocess
import time
import unittest

from harness import Daemon, shared_stack, wait_until
from test_hardening_common import HardeningTestCase, raw_exchange, responses_of


def secret(prefix: str) -> tuple[str, str]:
    """A secret with characters a config reader or a logger might trip on, and its random
    core (what a grep looks for, in case a logger escapes the rest)."""
    core = secrets.token_hex(16)
    return f"{prefix}#{core};=/+", core


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


class _AuthBase(HardeningTestCase):
    @classmethod
    def start(cls, http: dict, **kw) -> Daemon:
        d = Daemon(namespace=shared_stack().fresh_namespace(), overrides={"http": http}, **kw)
        cls.addClassCleanup(d.close)
        d.start()
        d.wait_ready(15)
        return d


class TokenTest(_AuthBase):
    """[http] token and admin_token both set."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.token, _ = secret("tok")
        cls.admin, _ = secret("adm")
        cls.d = cls.start({"token": cls.token, "admin_token": cls.admin})
        r = cls.d.push({"topic": "auth", "body": "x", "delay": 600000}, headers=bearer(cls.token))
        assert r.status == 200, r
        cls.job = r.json()["id"]
        cls.unknown = str(int(cls.job) + 4096 * 1000)

    def ordinary(self):
        """(name, method, path, body, headers, status when authorized)."""
        u, j = self.unknown, self.job
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        return [
            ("push", "POST", "/push", {"topic": "auth.push", "body": 1}, None, 200),
            ("get", "GET", "/get/auth.none?timeout=0", None, None, 204),
            ("finish", "GET", f"/finish?id={u}", None, None, 404),
            ("finish by POST form", "POST", "/finish", f"id={u}", form, 404),
            ("release", "GET", f"/release?id={u}", None, None, 404),
            ("touch", "GET", f"/touch?id={u}", None, None, 404),
            ("delete", "GET", f"/delete?id={u}", None, None, 404),
            ("reschedule", "GET", f"/reschedule?id={u}&delay=5", None, None, 404),
            ("inspect", "GET", f"/jobs/{j}", None, None, 200),
            ("stats", "GET", "/stats", None, None, 200),
            ("metrics", "GET", "/metrics", None, None, 200),
        ]

    def admin_endpoints(self):
        return [
            ("reStore", "GET", "/reStore?expire=false", 200),
            ("reStore by POST", "POST", "/reStore", 200),
            ("reStore/{id}", "GET", f"/reStore/{self.job}", 200),
            ("dead", "GET", "/dead/auth?limit=5", 200),
        ]

    def wrong_credentials(self):
        t = self.token
        return [
            ("no Authorization", {}),
            ("a wrong token", bearer("not-the-token")),
            ("the token minus its last character", bearer(t[:-1])),
            ("the token plus one character", bearer(t + "x")),
            ("the token upper-cased", bearer(t.upper())),
            ("Bearer with nothing after it", {"Authorization": "Bearer "}),
            ("Bearer with spaces only", {"Authorization": "Bearer    "}),
            ("the token without the Bearer scheme", {"Authorization": t}),
            ("the token as Basic credentials", {"Authorization": "Basic " + base64.b64encode(
                f"user:{t}".encode()).decode()}),
            ("the token in another header", {"X-Auth-Token": t, "X-Api-Key": t}),
        ]

    def counts_snapshot(self):
        return self.assertJsonOk(self.d.stats(headers=bearer(self.token)))["totals"]

    def test_ordinary_endpoints_need_the_token(self):
        before = self.counts_snapshot()
        for cred_name, headers in self.wrong_credentials():
            for name, method, path, body, _, _ in self.ordinary():
                with self.subTest(f"{name} with {cred_name}"):
                    r = self.d.request(method, path, body=body, headers=headers)
                    self.assertJsonError(r, 401, f"{name} with {cred_name}")
        self.assertEqual(self.counts_snapshot(), before, "an unauthorized request changed the queue")
        self.assertEqual(self.d.namespace.query("SELECT COUNT(*) FROM message WHERE topic = 'auth.push'"), [("0",)],
                         "an unauthorized push reached MySQL")

    def test_ordinary_endpoints_work_with_the_token(self):
        for name, method, path, body, headers, status in self.ordinary():
            with self.subTest(name):
                r = self.d.request(method, path, body=body, headers={**(headers or {}), **bearer(self.token)})
                self.assertEqual(r.status, status, f"{name} with the token: {r!r}")

    def test_admin_endpoints(self):
        for name, method, path, ok in self.admin_endpoints():
            with self.subTest(f"{name} without a token"):
                self.assertJsonError(self.d.request(method, path), 401, f"{name} without a token")
            with self.subTest(f"{name} with a wrong token"):
                self.assertJsonError(self.d.request(method, path, headers=bearer("wrong")), 403,
                                     f"{name} with a wrong token")
            with self.subTest(f"{name} with the ordinary token"):
                self.assertJsonError(self.d.request(method, path, headers=bearer(self.token)), 403,
                                     f"{name} with the ordinary (non-admin) token")
            with self.subTest(f"{name} with the admin token minus a character"):
                self.assertJsonError(self.d.request(method, path, headers=bearer(self.admin[:-1])), 403,
                                     f"{name} with a near miss of the admin token")
            with self.subTest(f"{name} with the admin token"):
                r = self.d.request(method, path, headers=bearer(self.admin))
                self.assertEqual(r.status, ok, f"{name} with the admin token: {r!r}")

    def test_health_needs_no_token(self):
        for headers in ({}, bearer("wrong"), bearer(self.token), bearer(self.admin)):
            r = self.d.health(headers=headers)
            self.assertStatus(r, 200, f"/health with {headers}")
            self.assertEqual(r.json()["status"], "ok")

    def test_nul_in_the_authorization_header(self):
        """Raw, since http.client refuses it: the token followed by NUL and more is not the token."""
        data = (b"GET /stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + self.token.encode()
                + b"\x00tail\r\n\r\n")
        out, _ = raw_exchange(self.d, data, read_timeout=3, until=1)
        rs = responses_of(out)
        self.assertEqual(len(rs), 1, out)
        self.assertJsonError(rs[0], (400, 401), "token + NUL + tail")


class AdminTokenScopeTest(_AuthBase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.token, _ = secret("tok")
        cls.admin, _ = secret("adm")
        cls.d = cls.start({"token": cls.token, "admin_token": cls.admin})

    def test_admin_token_is_accepted_on_ordinary_endpoints(self):
        d, a = self.d, self.admin
        r = d.push({"topic": "scope", "body": 1}, headers=bearer(a))
        self.assertStatus(r, 200, "push with the admin token")
        job = self.assertJsonOk(d.get("scope", timeout=1, headers=bearer(a)))
        self.assertJsonOk(d.finish(job["id"], headers=bearer(a)))
        self.assertJsonOk(d.stats(headers=bearer(a)))
        self.assertStatus(d.metrics(headers=bearer(a)), 200)


class LoopbackAdminTest(_AuthBase):
    """[http] token set, no admin_token: admin endpoints answer loopback clients that carry the
    ordinary token (every endpoint but /health needs it)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.token, _ = secret("tok")
        cls.d = cls.start({"token": cls.token, "admin_token": ""})

    def test_admin_endpoints_from_loopback(self):
        for name, path in (("reStore", "/reStore"), ("reStore/{id}", "/reStore/382309745173114881"),
                           ("dead", "/dead/x")):
            with self.subTest(name):
                self.assertJsonError(self.d.request("GET", path), 401, f"{name} without a token")
                self.assertJsonError(self.d.request("GET", path, headers=bearer("wrong")), 401,
                                     f"{name} with a wrong token")
                r = self.d.request("GET", path, headers=bearer(self.token))
                self.assertIn(r.status, (200, 404), f"{name} with the token from loopback: {r!r}")
                if r.status == 404:
                    self.assertJsonError(r, 404, name)


class SecretsNotLoggedTest(HardeningTestCase):
    """Run with a token, an admin token, a Redis password (a private Redis with requirepass)
    and a MySQL password, at log level debug; drive ordinary traffic, wrong tokens, a Redis
    restart, killed MySQL connections, rate-limited requests; then no secret, nor a wrong token
    a client sent, may appear in the log file or on stderr. Also -p (secrets masked) and -t,
    and start-ups with a wrong Redis or MySQL password."""

    def grep(self, text: str, needles: dict[str, str], where: str) -> list[str]:
        found = []
        for name, needle in needles.items():
            for line in text.splitlines():
                if needle in line:
                    found.append(f"{where}: {name} in: {line[:300]}")
        return found

    def test_no_secret_in_any_log_line(self):
        token, token_core = secret("tok")
        admin, admin_core = secret("adm")
        rpass, rpass_core = secret("rp")
        mpass, mpass_core = secret("mp")
        wrong1, wrong1_core = secret("wrong")
        wrong_redis, wrong_redis_core = secret("wrp")
        wrong_mysql, wrong_mysql_core = secret("wmp")
        needles = {"token": token_core, "admin token": admin_core, "Redis password": rpass_core,
                   "MySQL password": mpass_core, "a wrong token a client sent": wrong1_core,
                   "wrong Redis password": wrong_redis_core, "wrong MySQL password": wrong_mysql_core}
        for name, full in (("token", token), ("admin token", admin), ("Redis password", rpass),
                           ("MySQL password", mpass)):
            needles[name + " (whole)"] = full

        redis = self.private_redis(password=rpass, persistent=True)
        stack = shared_stack()
        ns = stack.fresh_namespace()
        user = "hgsec_" + secrets.token_hex(4)
        stack.mariadb.create_database(ns.database, user=user, password=mpass)
        d = Daemon(namespace=ns, overrides={
            "http": {"token": token, "admin_token": admin, "rate_limit": 20, "rate_burst": 20},
            "redis": {"address": redis.address, "password": rpass, "db": 0},
            "mysql": {"user": user, "password": mpass},
            "log": {"level": "debug"}})
        log_file = os.path.join(d.dir, "hourglass-file.log")
        d.config["log"]["file"] = log_file
        self.addCleanup(d.close)
        d.start()
        d.wait_ready(15)
        T, A, W = bearer(token), bearer(admin), bearer(wrong1)

        # ordinary traffic, admin traffic, wrong tokens
        ids = [self.assertJsonOk(d.push({"topic": "sec", "body": i}, headers=T))["id"] for i in range(5)]
        got = self.assertJsonOk(d.get("sec", timeout=1, count=5, headers=T))
        for j in got[:3]:
            self.assertJsonOk(d.finish(j["id"], headers=T))
        self.assertJsonOk(d.restore(headers=A))
        self.assertJsonOk(d.job(ids[0], headers=T))
        for method, path in (("GET", "/stats"), ("POST", "/push"), ("GET", "/reStore"), ("GET", "/dead/sec"),
                             ("GET", f"/jobs/{ids[0]}")):
            body = {"topic": "sec"} if method == "POST" else None
            for h in (W, bearer(token + "x"), {"Authorization": f"Basic {wrong1}"}):
                self.assertIn(d.request(method, path, body=body, headers=h).status, (401, 403), f"{path} {h}")

        # Redis restart: 503s logged at debug, reconnect with AUTH
        redis.stop()
        for _ in range(3):
            self.assertEqual(d.push({"topic": "sec", "body": "down"}, headers=T).status, 503)
        redis.start()
        wait_until(lambda: d.push({"topic": "sec", "body": "back"}, headers=T).status == 200, 20, 0.1,
                   "pushes to work after Redis came back")

        # MySQL connections killed under the daemon: reconnect with the password
        conns = stack.mariadb.query(f"SELECT id FROM information_schema.processlist WHERE user = '{user}'")
        self.assertTrue(conns, "the daemon holds no MySQL connection to kill")
        for (cid,) in conns:
            try:
                stack.mariadb.execute(f"KILL CONNECTION {int(cid)}")
            except Exception:  # noqa: BLE001 - it may have gone by itself
                pass
        wait_until(lambda: d.push({"topic": "sec", "body": "again"}, headers=T).status == 200, 20, 0.1,
                   "pushes to work after the MySQL connections were killed")

        # rate-limited requests (429s are logged at debug)
        statuses = [d.stats(headers=T).status for _ in range(40)]
        self.assertIn(429, statuses, "rate_limit 20/s never limited 40 quick requests")
        time.sleep(1.1)  # let the bucket refill a little before the clean stop

        d.stop()
        found = self.grep(d.log(), needles, "stderr")
        with open(log_file, encoding="utf-8", errors="replace") as f:
            file_text = f.read()
        self.assertIn("listening", file_text, "the log file was not written: the test would prove nothing")
        self.assertIn(redis.address, file_text, "the grep would not find what the log does say")
        found += self.grep(file_text, needles, "log file")

        # -p prints the configuration with secrets masked; -t checks it
        p = subprocess.run([d.binary, "-p", "-c", d.config_path], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("token", p.stdout)
        found += self.grep(p.stdout + p.stderr, needles, "hourglassd -p")
        t = subprocess.run([d.binary, "-t", "-c", d.config_path], capture_output=True, text=True, timeout=30)
        found += self.grep(t.stdout + t.stderr, needles, "hourglassd -t")

        # a wrong Redis password: refused at start (exit 1), saying why without the password
        bad_redis = Daemon(namespace=ns, overrides={
            "http": {"token": token}, "redis": {"address": redis.address, "password": wrong_redis, "db": 0},
            "mysql": {"user": user, "password": mpass}})
        self.addCleanup(bad_redis.close)
        bad_redis.write_config()
        r = subprocess.run([bad_redis.binary, "-c", bad_redis.config_path], capture_output=True, text=True,
                           timeout=30)
        self.assertNotEqual(r.returncode, 0, "started with a wrong Redis password")
        self.assertTrue(re.search(r"(?i)auth|password", r.stderr), r.stderr)
        found += self.grep(r.stdout + r.stderr, needles, "start-up with a wrong Redis password")

        # a wrong MySQL password: starts, answers 503 to pushes, logs why without the password
        bad_mysql = Daemon(namespace=ns, overrides={
            "http": {"token": token}, "redis": {"address": redis.address, "password": rpass, "db": 0},
            "mysql": {"user": user, "password": wrong_mysql}})
        self.addCleanup(bad_mysql.close)
        bad_mysql.start()
        wait_until(lambda: "denied" in bad_mysql.log().lower() or "mysql" in bad_mysql.log().lower(), 10, 0.1,
                   "the MySQL error to be logged")
        self.assertEqual(bad_mysql.push({"topic": "sec", "body": 1}, headers=T).status, 503)
        bad_mysql.stop()
        found += self.grep(bad_mysql.log(), needles, "daemon with a wrong MySQL password")

        self.assertEqual(found, [], "secrets in log lines or output:\n" + "\n".join(found))


if __name__ == "__main__":
    unittest.main(verbosity=2)
