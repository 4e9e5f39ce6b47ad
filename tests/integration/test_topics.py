"""Topic settings (docs/api.md "Topics"): GET /topics, GET|PUT|DELETE /topics/{topic}; pause,
rate and backoff as consumers see them, with real Redis and MariaDB and two instances where the
contract speaks of the fleet."""

from __future__ import annotations

import threading
import time

from core_common import Background, CoreTestCase, now_ms, wait_until
from harness import Daemon


def put(d: Daemon, topic: str, settings, **kw):
    return d.request("PUT", "/topics/" + topic, body=settings, **kw)


class TopicSettingsApiTest(CoreTestCase):
    def test_defaults_put_get_delete_and_the_journal(self):
        d = self.daemon()
        r = self.assertJsonOk(d.request("GET", "/topics/t1"))
        self.assertEqual(r, {"topic": "t1", "paused": False, "rate": 0, "backoff": 0, "maxBackoff": 3600000,
                             "groupConcurrency": 0, "groupOrder": "any", "groupRate": 0, "deliver": None, "counts": {"delayed": 0, "ready": 0, "reserved": 0, "dead": 0, "far": 0}})
        got = self.assertJsonOk(put(d, "t1", {"paused": True, "rate": 20}))
        self.assertEqual((got["paused"], got["rate"], got["backoff"]), (True, 20, 0))
        # a PUT merges: fields it does not name keep their values
        got = self.assertJsonOk(put(d, "t1", {"backoff": 250}))
        self.assertEqual((got["paused"], got["rate"], got["backoff"]), (True, 20, 250))
        d.push({"topic": "t1", "delay": 60000})
        r = self.assertJsonOk(d.request("GET", "/topics/t1"))
        self.assertEqual(r["counts"]["delayed"], 1)
        self.assertTrue(r["paused"])
        # a webhook route: the secret is never shown, "signed" stands for it
        hook = {"webhook": "https://example.test:8443/hook?x=1", "timeout": 2000, "concurrency": 4, "secret": "k"}
        got = self.assertJsonOk(put(d, "t1", {"deliver": hook}))
        self.assertEqual(got["deliver"], {"webhook": hook["webhook"], "timeout": 2000, "concurrency": 4,
                                          "signed": True})
        # what GET answered, sent back as it is, keeps the secret and changes nothing
        before = self.assertJsonOk(d.request("GET", "/topics/t1"))
        self.assertJsonOk(put(d, "t1", before))
        self.assertEqual(self.assertJsonOk(d.request("GET", "/topics/t1")), before)
        stored = d.namespace.query("SELECT settings FROM topic_setting WHERE topic = 't1'")[0][0]
        self.assertIn('"secret":"k"', stored)
        # an amqp route needs a broker: this instance has no [amqp] url
        r = put(d, "t1", {"deliver": {"amqp": {"exchange": "ex", "routingKey": "rk"}}})
        self.assertStatus(r, 400)
        self.assertIn("[amqp] url", r.json()["message"])
        got = self.assertJsonOk(d.request("DELETE", "/topics/t1"))
        self.assertEqual((got["paused"], got["rate"], got["backoff"], got["deliver"]), (False, 0, 0, None))
        # every change journaled, with who made it and the settings after it; never the secret
        rows = d.namespace.query("SELECT topic, instance, actor, settings FROM topic_change ORDER BY seq")
        self.assertEqual(len(rows), 5)  # the refused amqp route wrote nothing
        self.assertTrue(all(r[0] == "t1" and r[1] and "topics" in r[2] for r in rows), rows)
        self.assertIn('"paused":true', rows[0][3])
        self.assertIn('"signed":true', rows[3][3])
        self.assertFalse(any('"k"' in r[3] for r in rows), rows)
        self.assertIn('"paused":false', rows[4][3])

    def test_bad_input_is_a_clear_400_and_changes_nothing(self):
        d = self.daemon()
        self.assertJsonOk(put(d, "good", {"rate": 5}))
        cases = [
            ({"rate": -1}, "rate"), ({"rate": 1.5}, "rate"), ({"rate": "5"}, "rate"),
            ({"paused": "yes"}, "paused"), ({"backoff": -5}, "backoff"), ({"maxBackoff": 10 ** 15}, "maxBackoff"),
            ({"colour": "red"}, "colour"), ({"deliver": 5}, "deliver"),
            ({"deliver": {"webhook": "ftp://x/"}}, "http"), ({"deliver": {"webhook": "http://"}}, "host"),
            ({"deliver": {"webhook": "http://a b/"}}, "space"), ({"deliver": {"webhook": "http://u:p@h/"}}, "user"),
            ({"deliver": {"webhook": "http://h:99999/"}}, "port"),
            ({"deliver": {"webhook": "http://h/", "timeout": 0}}, "timeout"),
            ({"deliver": {"webhook": "http://h/", "concurrency": 0}}, "concurrency"),
            ({"deliver": {"webhook": "http://h/", "amqp": {"exchange": ""}}}, "exactly one"),
            ({"deliver": {"amqp": {"routingKey": "k"}}}, "exchange"),
            ({"deliver": {"amqp": {"exchange": "x" * 256}}}, "exchange"),
            ([1, 2], "object"),
        ]
        for body, word in cases:
            with self.subTest(body=body):
                r = put(d, "good", body)
                self.assertStatus(r, 400)
                self.assertEqual(r.json()["error"], "bad_request")
                self.assertIn(word, r.json()["message"])
        for raw in (b"{", b"", b"null", b'{"rate":1,"rate":2}'):
            r = d.request("PUT", "/topics/good", body=raw, headers={"Content-Type": "application/json"})
            self.assertStatus(r, 400, raw)
        self.assertStatus(put(d, "bad%20topic", {"rate": 1}), 400)
        self.assertStatus(d.request("GET", "/topics/" + "x" * 129), 400)
        self.assertStatus(d.request("POST", "/topics/good", body={"rate": 1}), 405)
        self.assertStatus(d.request("GET", "/topics", params={"limit": 0}), 400)
        self.assertStatus(d.request("GET", "/topics", params={"colour": 1}), 400)
        self.assertEqual(self.assertJsonOk(d.request("GET", "/topics/good"))["rate"], 5)
        self.assertEqual(d.namespace.query("SELECT COUNT(*) FROM topic_change"), [("1",)])

    def test_put_and_delete_are_admin_only_reading_is_not(self):
        d = self.start_daemon({"http": {"token": "t0k", "admin_token": "adm"}})
        self.wait_healthy(d)
        user = {"Authorization": "Bearer t0k"}
        admin = {"Authorization": "Bearer adm"}
        self.assertStatus(put(d, "a", {"paused": True}, headers=user), 403)
        self.assertStatus(d.request("DELETE", "/topics/a", headers=user), 403)
        self.assertStatus(put(d, "a", {"paused": True}, headers=admin), 200)
        self.assertTrue(self.assertJsonOk(d.request("GET", "/topics/a", headers=user))["paused"])
        self.assertStatus(d.request("GET", "/topics", headers=user), 200)

    def test_list_merges_counted_and_configured_topics_in_pages(self):
        d = self.daemon()
        for t in ("b", "d", "f"):
            d.push({"topic": t})
        for t in ("a", "d", "e"):
            self.assertJsonOk(put(d, t, {"rate": 7}))
        seen, after = [], None
        while True:
            page = self.assertJsonOk(d.request("GET", "/topics", params={"limit": 2, "after": after}))
            seen += page["topics"]
            after = page.get("next")
            if after is None:
                break
        self.assertEqual([t["topic"] for t in seen], ["a", "b", "d", "e", "f"])
        by = {t["topic"]: t for t in seen}
        self.assertEqual((by["d"]["rate"], by["d"]["counts"]["ready"]), (7, 1))
        self.assertEqual((by["b"]["rate"], by["b"]["counts"]["ready"]), (0, 1))
        self.assertEqual((by["e"]["rate"], by["e"]["counts"]["ready"]), (7, 0))
        page = self.assertJsonOk(d.request("GET", "/topics", params={"prefix": "d"}))
        self.assertEqual([t["topic"] for t in page["topics"]], ["d"])

    def test_a_change_reaches_the_other_instance_within_a_second(self):
        a = self.daemon()
        b = self.start_daemon(namespace=a.namespace)
        self.wait_healthy(b)
        time.sleep(1)  # b has read the settings once
        t0 = time.monotonic()
        # `rate` is not in b's answer from Redis but from its own copy of the settings
        self.assertJsonOk(put(a, "x", {"rate": 123}))
        def b_sees_it():
            listed = b.request("GET", "/topics", params={"prefix": "x"}).json()["topics"]
            return listed and listed[0]["rate"] == 123

        wait_until(b_sees_it, 3)
        self.assertLess(time.monotonic() - t0, 1.0 + 0.3)  # 1 s, plus this test's own polling


class PauseTest(CoreTestCase):
    def test_paused_topic_delivers_nothing_then_in_order(self):
        a = self.daemon(default_ttr=30000)
        b = self.start_daemon(namespace=a.namespace)
        self.wait_healthy(b)
        self.assertJsonOk(put(a, "p", {"paused": True}))
        ids = [a.push({"topic": "p", "body": i, "delay": 50 * i}).json()["id"] for i in range(5)]
        # a consumer parked on the other instance before the jobs came due
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("r", b.get("p", timeout=5)))
        t.start()
        time.sleep(1.5)
        self.assertEqual(self.assertJsonOk(a.request("GET", "/topics/p"))["counts"]["ready"], 5)
        self.assertStatus(a.get("p", timeout=0), 204)
        self.assertTrue(t.is_alive())
        self.assertJsonOk(put(a, "p", {"paused": False}))
        t.join(10)
        self.assertEqual(got["r"].status, 200)
        first = got["r"].json()
        self.assertEqual(first["id"], ids[0])  # resumed: the parked consumer gets the first, at once
        rest = a.get("p", timeout=1, count=10).json()
        self.assertEqual([j["id"] for j in rest], ids[1:])


class RateTest(CoreTestCase):
    def test_rate_holds_across_two_instances(self):
        a = self.daemon(default_ttr=0)
        b = self.start_daemon(namespace=a.namespace, overrides={"queue": {"default_ttr": 0}})
        self.wait_healthy(b)
        self.assertJsonOk(put(a, "r", {"rate": 50}))
        a.push([{"topic": "r", "body": i} for i in range(1000)])
        stop = time.monotonic() + 10
        counts = []

        def consume(d: Daemon):
            n = 0
            while time.monotonic() < stop:
                r = d.get("r", timeout=0.5, count=10)
                if r.status == 200:
                    n += len(r.json())
            counts.append(n)

        threads = [threading.Thread(target=consume, args=(d,)) for d in (a, b, a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        total = sum(counts)
        self.assertGreaterEqual(total, 450, counts)  # 50/s over 10 s = 500, within 10 %
        self.assertLessEqual(total, 550, counts)
        # both instances were held to the one bucket, and both delivered
        self.assertTrue(all(c > 0 for c in counts), counts)


    def test_a_rate_paces_parked_consumers_without_waiting_for_the_tick(self):
        # rate 10/s holds one token at a time: each reservation delivers one job and says when
        # the next token comes, so the answer passes the notification on and the next long-poll
        # comes back for that token. Were it not passed on, only the 1 s safety tick would
        # wake the others: five jobs would take four seconds or more.
        d = self.daemon(default_ttr=0)
        self.assertJsonOk(put(d, "paced", {"rate": 10}))
        polls = [Background(d.get, "paced", timeout=10, count=10) for _ in range(5)]
        wait_until(lambda: self.parked(d) >= 5, 5, 0.01, "5 long-polls to park")
        time.sleep(0.3)
        t0 = time.monotonic()
        ids = self.assertJsonOk(d.push([{"topic": "paced", "body": i} for i in range(5)]))["ids"]
        got = []
        for p in polls:
            r = p.join(15)
            self.assertStatus(r, 200)
            self.assertEqual(len(r.json()), 1, "one token, one job")
            got.append(r.json()[0]["id"])
        self.assertEqual(sorted(got), sorted(ids))
        took = max(p.finished for p in polls) - t0
        self.assertGreater(took, 0.3, "the rate let them through at once")
        self.assertLess(took, 2.0, f"five jobs at 10/s took {took:.2f} s: paced by the tick, not the rate")


class BackoffTest(CoreTestCase):
    def test_expired_and_released_attempts_wait_out_the_backoff(self):
        d = self.daemon(default_ttr=200, default_tries=4)
        self.assertJsonOk(put(d, "bo", {"backoff": 400, "maxBackoff": 1000}))
        jid = d.push({"topic": "bo"}).json()["id"]
        deliveries = []
        deadline = time.monotonic() + 10
        while len(deliveries) < 4 and time.monotonic() < deadline:
            r = d.get("bo", timeout=2)
            if r.status == 200:
                deliveries.append((now_ms(), r.json()["attempt"]))
                if r.json()["attempt"] == 2:
                    # a release without a delay is a failed attempt too: backoff, not at once
                    self.assertEqual(self.assertJsonOk(d.release(jid))["state"], "delayed")
        self.assertEqual([a for _, a in deliveries], [1, 2, 3, 4])
        gaps = [deliveries[i + 1][0] - deliveries[i][0] for i in range(3)]
        # attempt 1 expired (ttr 200) + 400; attempt 2 released at once + 800; attempt 3 expired + min(1600, 1000)
        expected = [200 + 400, 800, 200 + 1000]
        for gap, want in zip(gaps, expected):
            self.assertGreaterEqual(gap, want - 20, (gaps, expected))
            self.assertLess(gap, want + 600, (gaps, expected))
        # after its tries the job is dead, as before
        wait_until(lambda: d.job(jid).json()["state"] == "dead", 5)

    def test_explicit_release_delay_still_wins(self):
        d = self.daemon(default_ttr=5000)
        self.assertJsonOk(put(d, "bo2", {"backoff": 60000}))
        jid = d.push({"topic": "bo2"}).json()["id"]
        self.assertEqual(d.get("bo2", timeout=1).json()["id"], jid)
        self.assertEqual(self.assertJsonOk(d.release(jid, delay=0))["state"], "ready")
        self.assertEqual(d.get("bo2", timeout=1).json()["attempt"], 2)


class SettingsSurviveRedisLossTest(CoreTestCase):
    def test_flushall_then_the_refresh_writes_the_settings_back(self):
        d = self.daemon()
        self.assertJsonOk(put(d, "keep", {"paused": True}))
        d.push({"topic": "keep"})
        time.sleep(0.2)
        d.namespace.redis.flushall()
        d.push({"topic": "keep"})
        # within a second the refresh sees the shard behind and writes the pause back
        time.sleep(1.5)
        self.assertStatus(d.get("keep", timeout=0), 204)
        self.assertJsonOk(put(d, "keep", {"paused": False}))
        self.assertStatus(d.get("keep", timeout=1), 200)


class JobBackoffTest(CoreTestCase):
    """A job pushed with its own `backoff` uses it instead of its topic's (the topic's
    maxBackoff still caps it), in every tier of its life: Redis, MySQL, a restore."""

    def redelivery_gap(self, d: Daemon, topic: str, jid: str) -> int:
        first = d.get(topic, timeout=2)
        self.assertEqual(first.json()["id"], jid)
        t0 = now_ms()
        self.assertEqual(self.assertJsonOk(d.release(jid))["state"], "delayed")
        again = d.get(topic, timeout=5)
        self.assertEqual((again.json()["id"], again.json()["attempt"]), (jid, 2))
        return now_ms() - t0

    def test_own_backoff_beats_the_topics_and_is_kept(self):
        d = self.daemon(default_ttr=30000)
        self.assertJsonOk(put(d, "jb", {"backoff": 60000, "maxBackoff": 120000}))
        jid = d.push({"topic": "jb", "backoff": 300}).json()["id"]
        self.assertEqual(self.assertJsonOk(d.job(jid))["backoff"], 300)
        gap = self.redelivery_gap(d, "jb", jid)
        self.assertGreaterEqual(gap, 300 - 20)
        self.assertLess(gap, 1500)
        # MySQL holds it too: after Redis lost everything, the restored job keeps it
        wait_until(lambda: d.namespace.query(f"SELECT backoff FROM message WHERE id = {jid}") == [("300",)], 5)
        d.finish(jid)
        jid2 = d.push({"topic": "jb", "backoff": 400, "bizKey": "k1"}).json()["id"]
        wait_until(lambda: d.namespace.query(f"SELECT backoff FROM message WHERE id = {jid2}") == [("400",)], 5)
        d.namespace.redis.flushall()
        self.assertEqual(self.assertJsonOk(d.restore(expire=True))["restored"], 1)
        self.assertEqual(self.assertJsonOk(d.job(jid2))["backoff"], 400)
        gap = self.redelivery_gap(d, "jb", jid2)
        self.assertGreaterEqual(gap, 400 - 20)
        self.assertLess(gap, 1500)

    def test_replace_takes_the_new_backoff_and_none_means_the_topics(self):
        d = self.daemon(default_ttr=30000)
        jid = d.push({"topic": "jr", "bizKey": "b", "delay": 60000, "backoff": 100}).json()["id"]
        r = self.assertJsonOk(d.push({"topic": "jr", "bizKey": "b", "replace": True, "backoff": 700}))
        self.assertEqual(r["id"], jid)
        self.assertEqual(self.assertJsonOk(d.job(jid))["backoff"], 700)
        wait_until(lambda: d.namespace.query(f"SELECT backoff FROM message WHERE id = {jid}") == [("700",)], 5)
        self.assertJsonOk(d.push({"topic": "jr", "bizKey": "b", "replace": True}))
        self.assertNotIn("backoff", self.assertJsonOk(d.job(jid)))
        wait_until(lambda: d.namespace.query(f"SELECT backoff FROM message WHERE id = {jid}") == [(None,)], 5)
