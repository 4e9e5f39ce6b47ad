"""AMQP delivery (docs/api.md "Delivery"): due jobs of a topic whose route is amqp are published
to a real, private RabbitMQ (persistent, mandatory, with publisher confirms) by two instances;
a confirm finishes the job, a return fails the attempt, a broker outage delays and loses
nothing."""

from __future__ import annotations

import json
import time

from core_common import CoreTestCase, wait_until
from harness import Daemon, shared_rabbitmq, unique_name


def put(d: Daemon, topic: str, settings):
    return d.request("PUT", "/topics/" + topic, body=settings)


class AmqpCase(CoreTestCase):
    def daemons(self, broker, n: int = 1, **queue):
        overrides = {"amqp": {"url": broker.url, "timeout": 3000}}
        if queue:
            overrides["queue"] = queue
        first = self.start_daemon(overrides)
        self.wait_healthy(first)
        out = [first]
        for _ in range(n - 1):
            d = self.start_daemon(overrides, namespace=first.namespace)
            self.wait_healthy(d)
            out.append(d)
        return out

    def route(self, d: Daemon, topic: str, exchange: str, key: str, **extra):
        self.assertJsonOk(put(d, topic, {"deliver": {"amqp": {"exchange": exchange, "routingKey": key}}, **extra}))
        time.sleep(0.6)  # every instance has read it


class AmqpDeliveryTest(AmqpCase):
    def test_every_job_published_once_persistent_with_its_headers(self):
        broker = shared_rabbitmq()
        q, ex = unique_name("q"), unique_name("ex")
        broker.declare(q, exchange=ex, routing_key="jobs")
        a, b = self.daemons(broker, 2)
        self.route(a, "am", ex, "jobs")
        ids = self.assertJsonOk(a.push([{"topic": "am", "body": {"n": i}, "delay": 200} for i in range(300)]))["ids"]
        wait_until(lambda: broker.count(q) >= 300, 20)
        time.sleep(0.5)
        msgs = broker.get_all(q)
        self.assertEqual(sorted(p.message_id for _, p, _ in msgs), sorted(ids))  # each exactly once
        for _, props, raw in msgs:
            body = json.loads(raw)
            self.assertEqual(props.delivery_mode, 2)
            self.assertEqual(props.content_type, "application/json")
            self.assertEqual(props.headers["Hourglass-Id"], props.message_id)
            self.assertEqual(props.headers["Hourglass-Topic"], "am")
            self.assertEqual(body["id"], props.message_id)
            self.assertEqual(body["topic"], "am")
            self.assertIn("n", body["body"])
        wait_until(lambda: self.assertJsonOk(a.request("GET", "/topics/am"))["counts"] ==
                   {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0, "far": 0}, 10)
        hist = self.assertJsonOk(a.job(ids[0]))["history"]
        self.assertEqual(hist[-1]["state"], "finished")
        self.assertTrue(hist[-1]["by"].endswith("amqp:confirmed"), hist)

    def test_unroutable_is_a_failed_attempt_then_dead(self):
        broker = shared_rabbitmq()
        ex = unique_name("ex")
        with broker.channel() as ch:
            ch.exchange_declare(exchange=ex, exchange_type="direct", durable=True)  # nothing bound
        (d,) = self.daemons(broker, 1, default_tries=2)
        self.route(d, "amr", ex, "nowhere", backoff=200)
        jid = self.assertJsonOk(d.push({"topic": "amr", "body": 1}))["id"]
        wait_until(lambda: self.assertJsonOk(d.job(jid))["state"] == "dead", 15)
        hist = self.assertJsonOk(d.job(jid))["history"]
        outs = [h["by"].rsplit(":", 1)[-1] for h in hist if h["from"] == "reserved"]
        self.assertEqual(outs, ["returned", "returned"])

    def test_missing_exchange_refused(self):
        broker = shared_rabbitmq()
        (d,) = self.daemons(broker, 1, default_tries=1)
        self.route(d, "amx", unique_name("nosuch"), "k")
        jid = self.assertJsonOk(d.push({"topic": "amx", "body": 1}))["id"]
        wait_until(lambda: self.assertJsonOk(d.job(jid))["state"] == "dead", 15)
        self.assertTrue(self.assertJsonOk(d.job(jid))["history"][-1]["by"].endswith("amqp:refused"))


class AmqpOutageTest(AmqpCase):
    def test_broker_stopped_mid_traffic_nothing_lost_no_try_spent(self):
        broker = self.private_rabbitmq()
        q = unique_name("q")
        broker.declare(q)
        (d,) = self.daemons(broker, 1, default_tries=1)  # one try: a spent try would kill a job
        self.route(d, "amo", "", q)  # the default exchange: routing key = queue
        first = self.assertJsonOk(d.push([{"topic": "amo", "body": i} for i in range(50)]))["ids"]
        wait_until(lambda: broker.count(q) >= 50, 15)
        broker.stop()
        during = self.assertJsonOk(d.push([{"topic": "amo", "body": i} for i in range(50, 150)]))["ids"]
        time.sleep(3)
        counts = self.assertJsonOk(d.request("GET", "/topics/amo"))["counts"]
        self.assertEqual(counts["dead"], 0, counts)
        self.assertEqual(counts["ready"] + counts["reserved"], 100, counts)
        broker.start()
        wait_until(lambda: self.assertJsonOk(d.request("GET", "/topics/amo"))["counts"] ==
                   {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0, "far": 0}, 30)
        got = [p.message_id for _, p, _ in broker.get_all(q)]
        self.assertEqual(set(got), set(first) | set(during))  # persistent: the first 50 survived too
        for jid in during:
            self.assertEqual(self.assertJsonOk(d.job(jid))["state"], "finished")
