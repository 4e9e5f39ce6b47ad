"""Journal lanes ([mysql] journal_lanes; docs/architecture.md, "Lanes"): cycles written side by
side, each lane on its own MySQL connection.

With two lanes every push answered 200 has exactly its committed row and its first transition,
bizKey duplicates (the aborts go through the journal's local ring, which one lane at a time
writes) end aborted, and the threads carry their lanes' names. A lane whose COMMIT answer is
lost (the fault seam, on lane 1 only) gives its cycle's pushes their 503 and settles them as in
doubt, while the other lane goes on writing: pushes are accepted throughout.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import re

from harness import Daemon, HourglassTestCase, journal_idle, wait_until

PUSHERS = 24


def thread_names(d: Daemon) -> list[str]:
    names = []
    for tid in os.listdir(f"/proc/{d.pid}/task"):
        try:
            with open(f"/proc/{d.pid}/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    return names


class JournalLanesTest(HourglassTestCase):
    def start(self, env: dict | None = None) -> Daemon:
        d = Daemon(overrides={"mysql": {"journal_lanes": 2, "timeout": 3}})
        self.addCleanup(d.close)
        d.env.update(env or {})
        d.start()
        d.wait_ready()
        return d

    def test_two_lanes_write_every_push_once(self):
        d = self.start()
        self.assertEqual(sorted(n for n in thread_names(d) if n.startswith("journal")), ["journal", "journal-1"])
        jobs = [{"topic": "lanes", "body": {"n": i}, "delay": 600000} for i in range(600)]
        # ten bizKeys pushed five times each: the first holds the key, the rest are aborted rows
        jobs += [{"topic": "lanes-biz", "body": {"k": k, "try": t}, "delay": 600000, "bizKey": f"key-{k}"}
                 for t in range(5) for k in range(10)]
        with cf.ThreadPoolExecutor(PUSHERS) as pool:
            answers = list(pool.map(d.push, jobs))
        self.assertEqual({a.status for a in answers}, {200}, [a.text[:100] for a in answers if a.status != 200][:3])
        ids = {a.json()["id"] for a in answers}
        wait_until(lambda: journal_idle(d), 15, 0.05, "the journal to settle")
        q = d.namespace.query
        self.assertEqual(sorted(q("SELECT topic, state, COUNT(*) FROM message GROUP BY topic, state")),
                         [("lanes", "delayed", "600"), ("lanes-biz", "aborted", "40"), ("lanes-biz", "delayed", "10")])
        live = {r[0] for r in q("SELECT id FROM message WHERE state = 'delayed'")}
        self.assertTrue(live <= ids, "every live row is a job a client was given")
        self.assertEqual(q("SELECT COUNT(*), COUNT(DISTINCT message_id) FROM job_history WHERE version = 1"),
                         [("650", "650")], "one first transition per pushed row")
        self.assertEqual(q("SELECT COUNT(*) FROM transition WHERE to_state = 'aborted'"), [("40",)])
        topics = d.stats().json()["topics"]
        self.assertEqual((topics["lanes"]["delayed"], topics["lanes-biz"]["delayed"]), (600, 10))

    def test_a_lane_whose_commit_answer_is_lost_leaves_the_other_writing(self):
        d = self.start({"HOURGLASS_FAULTS": "journal-1:mysql.commit=lost@1"})
        answers = []

        def push(i):
            return d.push({"topic": "lanes-fault", "body": {"n": i}, "delay": 600000})

        with cf.ThreadPoolExecutor(PUSHERS) as pool:
            for round_ in range(40):
                answers += pool.map(push, range(round_ * PUSHERS, (round_ + 1) * PUSHERS))
                if "fault seam: mysql.commit lost (arrival 1)" in d.log():
                    break
        self.assertIn("fault seam: mysql.commit lost (arrival 1)", d.log(), "lane 1 wrote a cycle")
        refused = [a for a in answers if a.status == 503]
        self.assertTrue(refused, "the lost cycle's pushes are answered 503")
        self.assertEqual({a.status for a in answers} - {200, 503}, set())
        # the other lane is connected throughout: pushes keep being accepted at once
        self.assertStatus(push(-1), 200, "a push right after the lost commit")
        accepted = {a.json()["id"] for a in answers if a.status == 200}
        wait_until(lambda: d.stats().json()["journal"].get("inDoubt", 0) == 0 and journal_idle(d), 30, 0.2,
                   "the lost cycle's pushes to be settled")
        q = d.namespace.query
        live = {r[0] for r in q("SELECT id FROM message WHERE state = 'delayed'")}
        self.assertEqual(live - {str(i) for i in accepted}, {r[0] for r in q(
            "SELECT id FROM message WHERE state = 'delayed' AND body = '{\"n\":-1}'")},
            "no live row for a push answered 503")
        self.assertTrue({str(i) for i in accepted} <= live, "every push answered 200 is live")
        self.assertEqual(len(refused), len(q("SELECT id FROM message WHERE state = 'aborted'")),
                         "the 503'd pushes' rows, committed all the same, are aborted")
        self.assertEqual(len(re.findall(r"\[journal-1\].*connected to MySQL", d.log())), 2,
                        "lane 1 reconnected")
