"""Black-box tests of the job state machine and delivery order.

delayed -> ready -> reserved -> finished; release; lease expiry and redelivery; dead after
`tries`; ttr=0 at most once; cancel before due; due order over 1000 jobs; priority ties.

    make integration T=test_core_lifecycle
"""

import random
import time
import unittest

from core_common import STATES_LIVE, CoreTestCase, now_ms
from harness import wait_until


class TransitionsTest(CoreTestCase):
    def test_delayed_ready_reserved_finished(self):
        d = self.daemon()
        t0 = now_ms()
        id = self.push(d, "t", "payload", delay=700)
        self.assertEqual(self.state(d, id), "delayed")
        self.assertCounts(d, "t", delayed=1)
        self.assertNothing(d, "t")
        job = self.get_one(d, "t", timeout=5)
        got = now_ms()
        self.assertEqual((job["id"], job["attempt"], job["body"]), (id, 1, "payload"))
        self.assertGreaterEqual(got, t0 + 700, "delivered before its delay")
        self.assertEqual(self.state(d, id), "reserved")
        self.assertCounts(d, "t", reserved=1)
        self.assertJsonOk(d.finish(id))
        self.wait_state(d, id, "finished")
        self.assertCounts(d, "t")
        self.wait_history(d, id, ["delayed", "ready", "reserved", "finished"])
        self.assertNothing(d, "t", timeout=0.5)

    def test_ready_job_waits_in_ready_until_taken(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        self.assertEqual(self.state(d, id), "ready")
        self.assertCounts(d, "t", ready=1)
        time.sleep(0.3)
        self.assertEqual(self.state(d, id), "ready")
        self.assertEqual(self.get_one(d, "t")["id"], id)

    def test_release_goes_delayed_then_ready(self):
        d = self.daemon()
        id = self.push(d, "t", 1)
        self.get_one(d, "t")
        self.assertJsonOk(d.release(id, delay=600))
        self.assertEqual(self.state(d, id), "delayed")
        wait_until(lambda: self.state(d, id) == "ready", 5, 0.05, "released job to become ready")
        self.assertCounts(d, "t", ready=1)
        job = self.get_one(d, "t")
        self.assertEqual((job["id"], job["attempt"]), (id, 2))
        self.assertJsonOk(d.finish(id))
        self.wait_history(d, id, ["ready", "reserved", "delayed", "ready", "reserved", "finished"])

    def test_lease_expiry_redelivers_with_attempt_plus_one(self):
        d = self.daemon()
        id = self.push(d, "t", "x", ttr=600, tries=5)
        first = self.get_one(d, "t")
        self.assertEqual(first["attempt"], 1)
        lease = first["leaseUntil"]
        second = self.get_one(d, "t", timeout=5)
        got = now_ms()
        self.assertEqual((second["id"], second["attempt"], second["body"]), (id, 2, "x"))
        self.assertGreaterEqual(got, lease, "redelivered before the lease ran out")
        self.assertLess(got, lease + 3000, "redelivery came very late")
        self.assertJsonOk(d.finish(id))
        self.assertEqual(self.wait_state(d, id, "finished")["attempt"], 2)
        self.assertNothing(d, "t", timeout=1)

    def test_dead_after_tries_deliveries(self):
        d = self.daemon()
        id = self.push(d, "t", "poison", ttr=300, tries=2)
        self.assertEqual(self.get_one(d, "t")["attempt"], 1)
        self.assertEqual(self.get_one(d, "t", timeout=5)["attempt"], 2)
        self.assertCounts(d, "t", reserved=1)
        wait_until(lambda: self.state(d, id) == "dead", 5, 0.05, "job to die after its last lease")
        self.assertCounts(d, "t", dead=1)
        self.assertNothing(d, "t", timeout=1)  # never a third delivery
        r = d.dead("t")
        obj = self.assertJsonOk(r)
        self.assertEqual([j["id"] for j in obj["jobs"]], [id])
        self.assertEqual(obj["jobs"][0]["body"], "poison")
        self.wait_history(d, id, ["ready", "reserved", "ready", "reserved", "dead"])
        # a dead job can be deleted; then it is no longer listed
        self.assertEqual(self.assertJsonOk(d.delete(id)), {"id": id, "state": "deleted"})
        self.assertEqual(self.assertJsonOk(d.dead("t"))["jobs"], [])
        self.assertCounts(d, "t")

    def test_tries_one_dies_on_first_expiry(self):
        d = self.daemon()
        id = self.push(d, "t", 1, ttr=200, tries=1)
        self.get_one(d, "t")
        wait_until(lambda: self.state(d, id) == "dead", 5, 0.05, "job to die")
        self.assertNothing(d, "t", timeout=0.5)
        self.assertEqual([j["id"] for j in self.assertJsonOk(d.dead("t"))["jobs"]], [id])

    def test_dead_list_limit(self):
        d = self.daemon()
        ids = [self.push(d, "t", i, ttr=100, tries=1) for i in range(5)]
        got = d.get("t", timeout=0, count=5).json()
        self.assertEqual(len(got), 5)
        self.wait_counts(d, "t", dead=5)
        self.assertEqual(len(self.assertJsonOk(d.dead("t"))["jobs"]), 5)
        self.assertEqual(len(self.assertJsonOk(d.dead("t", limit=2))["jobs"]), 2)
        self.assertEqual(sorted(j["id"] for j in self.assertJsonOk(d.dead("t"))["jobs"]), sorted(ids))
        self.assertEqual(self.assertJsonOk(d.dead("other"))["jobs"], [])

    def test_ttr_zero_is_delivered_at_most_once(self):
        d = self.daemon()
        id = self.push(d, "t", "once", ttr=0, tries=3)
        job = self.get_one(d, "t")
        self.assertEqual((job["id"], job["body"], job["attempt"]), (id, "once", 1))
        self.assertCounts(d, "t")
        self.assertNothing(d, "t", timeout=1.5)
        self.assertError(d.finish(id), 404, "not_found", "finish of a ttr=0 job after delivery")
        self.assertError(d.touch(id), 404, "not_found", "touch of a ttr=0 job after delivery")
        def gone() -> bool:
            r = d.job(id)
            if r.status == 404:
                self.assertError(r, 404, "not_found")
                return True
            return self.assertJsonOk(r)["state"] not in STATES_LIVE
        wait_until(gone, 10, 0.05, f"/jobs/{id} to show a delivered ttr=0 job as no longer live")
        self.assertNothing(d, "t", timeout=0.5)

    def test_delete_before_due_is_never_delivered(self):
        d = self.daemon()
        keep = self.push(d, "t", "keep", delay=500)
        gone = self.push(d, "t", "gone", delay=400)
        self.assertJsonOk(d.delete(gone))
        job = self.get_one(d, "t", timeout=5)
        self.assertEqual(job["id"], keep)
        self.assertNothing(d, "t", timeout=1)
        self.assertEqual(self.state(d, gone), "deleted")

    def test_delete_is_journaled_once(self):
        """The history of a deleted job has one 'deleted' entry, whatever state it was in."""
        d = self.daemon()
        delayed = self.push(d, "t", 1, delay=60000)
        ready = self.push(d, "t", 2)
        reserved = self.push(d, "r", 3)
        self.get_one(d, "r")
        for id in (delayed, ready, reserved):
            self.assertJsonOk(d.delete(id))
        wait_until(lambda: self.journal_idle(d), 10, 0.05, "the journal to be written")
        time.sleep(0.3)
        self.wait_history(d, delayed, ["delayed", "deleted"])
        self.wait_history(d, ready, ["ready", "deleted"])
        self.wait_history(d, reserved, ["ready", "reserved", "deleted"])

    def test_finish_after_redelivery_to_another_consumer(self):
        """A consumer whose lease expired may not act on the job once it is reserved again:
        with attempt= it gets 409; the current holder's finish works."""
        d = self.daemon()
        id = self.push(d, "t", 1, ttr=300, tries=5)
        a = self.get_one(d, "t")
        b = self.get_one(d, "t", timeout=5)
        self.assertEqual((a["attempt"], b["attempt"]), (1, 2))
        r = d.request("GET", "/finish", params={"id": id, "attempt": a["attempt"]})
        self.assertError(r, 409, "conflict", "finish with a stale attempt")
        self.assertEqual(self.state(d, id), "reserved")
        r = d.request("GET", "/finish", params={"id": id, "attempt": b["attempt"]})
        self.assertEqual(self.assertJsonOk(r)["state"], "finished")


class OrderTest(CoreTestCase):
    def test_1000_jobs_come_out_in_due_order(self):
        d = self.daemon()
        n = 1000
        delays = list(range(1500, 1500 + 2 * n, 2))  # 1.5 s .. 3.5 s, 2 ms apart
        random.Random(7).shuffle(delays)
        batch = 250
        ids_by_delay = {}
        t_push0 = now_ms()
        for i in range(0, n, batch):
            chunk = delays[i:i + batch]
            obj = self.assertJsonOk(d.push([{"topic": "ord", "body": dl, "delay": dl} for dl in chunk]))
            ids_by_delay.update(zip(chunk, obj["ids"]))
        pushed = now_ms()
        self.assertLess(pushed - t_push0, 1200, "pushing took so long that due times interleave with pushes")
        self.assertCounts(d, "ord", delayed=n)

        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < n and time.monotonic() < deadline:
            r = d.get("ord", timeout=5)
            if r.status == 204:
                continue
            self.assertStatus(r, 200)
            job = r.json()
            job["_got"] = now_ms()
            seen.append(job)
        self.assertEqual(len(seen), n, "not every job was delivered")
        self.assertEqual(len({j["id"] for j in seen}), n, "a job was delivered twice")
        run_ats = [j["runAt"] for j in seen]
        for i in range(1, n):
            if run_ats[i] < run_ats[i - 1]:
                self.fail(f"delivery {i} (runAt {run_ats[i]}, body {seen[i]['body']}) came after one due "
                          f"later (runAt {run_ats[i - 1]}, body {seen[i - 1]['body']})")
        for j in seen:
            self.assertEqual(j["id"], ids_by_delay[j["body"]])
            self.assertGreaterEqual(j["_got"], j["runAt"], f"job {j['id']} delivered before it was due")
            self.assertEqual(j["attempt"], 1)
        self.assertEqual(sorted(j["body"] for j in seen), sorted(delays))
        self.assertNothing(d, "ord")
        self.assertCounts(d, "ord", reserved=n)

    def test_priority_breaks_ties_among_ready_jobs(self):
        d = self.daemon()
        prios = [5, 9, 0, 3, 7, 1, 5, 2, 8, 4, 6, 0, 9]
        ids = [self.push(d, "pri", {"p": p, "i": i}, priority=p) for i, p in enumerate(prios)]
        expected = [ids[i] for i in sorted(range(len(prios)), key=lambda i: (prios[i], i))]
        got = [self.get_one(d, "pri", timeout=0)["id"] for _ in prios]
        self.assertEqual(got, expected)

    def test_priority_among_jobs_becoming_ready_together(self):
        d = self.daemon()
        at = now_ms() + 800
        prios = [6, 2, 9, 0, 4]
        ids = [self.push(d, "pri", p, priority=p, runAt=at) for p in prios]
        self.wait_counts(d, "pri", ready=len(prios))
        got = [j["id"] for j in d.get("pri", timeout=0, count=10).json()]
        self.assertEqual(got, [ids[i] for i in sorted(range(len(prios)), key=lambda i: prios[i])])

    def test_due_time_orders_within_one_priority(self):
        d = self.daemon()
        base = now_ms() + 600
        offsets = [50, 10, 40, 0, 30, 20]
        for o in offsets:
            self.push(d, "due", o, runAt=base + o)
        self.wait_counts(d, "due", ready=len(offsets))
        got = [self.get_one(d, "due", timeout=0)["body"] for _ in offsets]
        self.assertEqual(got, sorted(offsets))

    def test_urgent_job_overtakes_older_ready_jobs(self):
        d = self.daemon()
        old = [self.push(d, "t", i) for i in range(3)]
        urgent = self.push(d, "t", "urgent", priority=0)
        self.assertEqual(self.get_one(d, "t")["id"], urgent)
        self.assertEqual([self.get_one(d, "t")["id"] for _ in old], old)


if __name__ == "__main__":
    unittest.main(verbosity=2)
