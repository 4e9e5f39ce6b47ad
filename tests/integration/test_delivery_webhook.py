"""Webhook delivery (docs/api.md "Delivery"): due jobs of a topic whose route is a webhook are
POSTed to a real receiver on loopback, by two instances, with backoff, dead letters, pause,
https and a kill -9 in the middle."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time

from core_common import CoreTestCase, now_ms, wait_until
from harness import Daemon
from receiver import WebhookReceiver


def put(d: Daemon, topic: str, settings):
    return d.request("PUT", "/topics/" + topic, body=settings)


class WebhookCase(CoreTestCase):
    def receiver(self, answer=None, tls: bool = False) -> WebhookReceiver:
        rcv = WebhookReceiver(answer, tls=tls)
        self.addCleanup(rcv.close)
        return rcv

    def pair(self, **overrides):
        a = self.start_daemon(overrides or None)
        self.wait_healthy(a)
        b = self.start_daemon(overrides or None, namespace=a.namespace)
        self.wait_healthy(b)
        return a, b

    def route(self, d: Daemon, topic: str, url: str, **extra):
        settings = {"deliver": {"webhook": url, **extra.pop("deliver", {})}, **extra}
        self.assertJsonOk(put(d, topic, settings))
        time.sleep(0.6)  # every instance has read it (within 1 s; the refresh runs every 0.5 s)


class WebhookDeliveryTest(WebhookCase):
    def test_every_job_once_with_headers_body_and_a_verifiable_signature(self):
        rcv = self.receiver()
        a, b = self.pair()
        self.route(a, "wh", rcv.url(), deliver={"secret": "s3cr3t", "concurrency": 8})
        ids = []
        for i in range(0, 200, 50):
            r = self.assertJsonOk(a.push([{"topic": "wh", "body": {"n": n}, "delay": 300} for n in range(i, i + 50)]))
            ids += r["ids"]
        wait_until(lambda: len(rcv.snapshot()) >= 200, 20)
        time.sleep(0.5)  # nothing more arrives
        hits = rcv.snapshot()
        self.assertEqual(sorted(h.headers["hourglass-id"] for h in hits), sorted(ids))  # each exactly once
        for h in hits:
            self.assertEqual(h.headers["hourglass-topic"], "wh")
            self.assertEqual(h.headers["hourglass-attempt"], "1")
            self.assertEqual(h.headers["content-type"], "application/json")
            want = hmac.new(b"s3cr3t", h.raw, hashlib.sha256).hexdigest()
            self.assertEqual(h.headers["hourglass-signature"], "sha256=" + want)
            self.assertEqual((h.body["id"], h.body["topic"], h.body["attempt"]), (h.headers["hourglass-id"], "wh", 1))
            self.assertIn("n", h.body["body"])
        # every job finished, in Redis and in MySQL, with the outcome in its history
        wait_until(lambda: self.assertJsonOk(a.request("GET", "/topics/wh"))["counts"] ==
                   {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0, "far": 0}, 10)
        hist = self.assertJsonOk(a.job(ids[0]))["history"]
        self.assertEqual([s["state"] for s in hist], ["delayed", "ready", "reserved", "finished"])
        self.assertIn("webhook:200", hist[-1]["by"])
        # never early: no job reached the receiver before it was due (one host, one clock; how
        # punctual deliveries are is a benchmark figure, `make bench`'s webhook lateness)
        early = [h.at_ms - h.body["runAt"] for h in hits if h.at_ms < h.body["runAt"]]
        self.assertEqual(early, [])
        # both instances delivered (the fleet shares the work), and the connections were kept alive
        m = a.metrics().text + b.metrics().text
        self.assertIn('hourglass_route_deliveries_total{topic="wh",route="webhook",outcome="delivered"}', m)
        self.assertLess(rcv.connections, 40)

    def test_failures_back_off_then_the_job_is_dead(self):
        rcv = self.receiver(lambda hit: 500)
        d = self.start_daemon({"queue": {"default_tries": 3}})
        self.wait_healthy(d)
        self.route(d, "whf", rcv.url(), backoff=300, maxBackoff=10000)
        jid = self.assertJsonOk(d.push({"topic": "whf", "body": 1}))["id"]
        wait_until(lambda: self.assertJsonOk(d.job(jid))["state"] == "dead", 15)
        hits = rcv.snapshot()
        self.assertEqual([h.headers["hourglass-attempt"] for h in hits], ["1", "2", "3"])
        gaps = [hits[i + 1].at_ms - hits[i].at_ms for i in range(2)]
        for gap, want in zip(gaps, [300, 600]):  # backoff x 2^(attempt-1)
            self.assertGreaterEqual(gap, want - 20, gaps)
            self.assertLess(gap, want + 400, gaps)
        hist = self.assertJsonOk(d.job(jid))["history"]
        self.assertEqual([h["by"].split(":")[-1] for h in hist if h["from"] == "reserved"], ["500", "500", "500"])
        self.assertEqual(hist[-1]["state"], "dead")
        self.assertEqual([j["id"] for j in self.assertJsonOk(d.dead("whf"))["jobs"]], [jid])

    def test_a_hanging_or_closing_receiver_fails_the_attempt(self):
        def answer(hit):
            return "hang" if hit.body["body"] == "hang" else "close"

        rcv = self.receiver(answer)
        d = self.start_daemon({"queue": {"default_tries": 1}})
        self.wait_healthy(d)
        self.route(d, "whh", rcv.url(), deliver={"timeout": 500})
        hang = self.assertJsonOk(d.push({"topic": "whh", "body": "hang"}))["id"]
        close = self.assertJsonOk(d.push({"topic": "whh", "body": "close"}))["id"]
        wait_until(lambda: all(self.assertJsonOk(d.job(j))["state"] == "dead" for j in (hang, close)), 10)
        by = {j: self.assertJsonOk(d.job(j))["history"][-1]["by"] for j in (hang, close)}
        self.assertTrue(by[hang].endswith("webhook:timeout"), by)
        self.assertTrue(by[close].endswith("webhook:closed"), by)

    def test_pause_holds_webhook_delivery_and_resume_releases_in_order(self):
        rcv = self.receiver()
        d = self.start_daemon()
        self.wait_healthy(d)
        self.route(d, "whp", rcv.url(), paused=True, deliver={"concurrency": 1})
        ids = [self.assertJsonOk(d.push({"topic": "whp", "body": i, "delay": 20 * i}))["id"] for i in range(10)]
        time.sleep(1.5)
        self.assertEqual(rcv.snapshot(), [])
        self.assertEqual(self.assertJsonOk(d.request("GET", "/topics/whp"))["counts"]["ready"], 10)
        self.assertJsonOk(put(d, "whp", {"paused": False}))
        wait_until(lambda: len(rcv.snapshot()) == 10, 10)
        self.assertEqual([h.headers["hourglass-id"] for h in rcv.snapshot()], ids)

    def test_https_with_a_private_ca(self):
        rcv = self.receiver(tls=True)
        d = self.start_daemon({"webhook": {"ca_file": rcv.ca_file}})
        self.wait_healthy(d)
        self.route(d, "whs", rcv.url(host="localhost"))
        jid = self.assertJsonOk(d.push({"topic": "whs", "body": "tls"}))["id"]
        wait_until(lambda: self.assertJsonOk(d.job(jid))["state"] == "finished", 10)
        self.assertEqual(rcv.snapshot()[0].headers["hourglass-id"], jid)

    def test_https_refused_without_the_ca(self):
        rcv = self.receiver(tls=True)
        d = self.start_daemon({"queue": {"default_tries": 1}})
        self.wait_healthy(d)
        self.route(d, "whs2", rcv.url(host="localhost"))
        jid = self.assertJsonOk(d.push({"topic": "whs2", "body": "tls"}))["id"]
        wait_until(lambda: self.assertJsonOk(d.job(jid))["state"] == "dead", 10)
        self.assertTrue(self.assertJsonOk(d.job(jid))["history"][-1]["by"].endswith("webhook:tls"))


class WebhookCrashTest(WebhookCase):
    def test_kill_9_mid_delivery_redelivers_nothing_lost(self):
        release = threading.Event()

        def answer(hit):
            return 200 if release.is_set() else "hang"

        rcv = self.receiver(answer)
        a, b = self.pair()
        self.route(a, "whk", rcv.url(), deliver={"timeout": 2000, "concurrency": 50})
        ids = self.assertJsonOk(a.push([{"topic": "whk", "body": i} for i in range(20)]))["ids"]
        wait_until(lambda: len(rcv.snapshot()) >= 20, 10)  # all out, hanging, split between a and b
        a.kill()
        b.kill()
        release.set()
        rcv.release.set()
        c = self.start_daemon(namespace=a.namespace)
        self.wait_healthy(c)
        # after the leases (timeout + 1 s) run out every job is delivered again and finished
        wait_until(lambda: all(self.assertJsonOk(c.job(j))["state"] == "finished" for j in ids), 20)
        attempts = {}
        for h in rcv.snapshot():
            attempts.setdefault(h.headers["hourglass-id"], []).append(h.headers["hourglass-attempt"])
        self.assertEqual(set(attempts), set(ids))
        self.assertTrue(all("2" in v for v in attempts.values()), attempts)
