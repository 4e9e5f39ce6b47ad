"""Faults of a real fleet (issue 31, item 5): every wait for a server that is down backs off.

An instance whose Redis (or MySQL) is down must not burn a core while it waits: found on a
`make run` left running after its servers were stopped, the keeper thread ran at 100 % of a
core as long as Redis was gone once a schedule was defined and a job was held reserved (the
mover re-armed its timer at 0 for a shard whose due time had passed, and each try failed at
once).

Each test starts one daemon on a private stack with every feature in use — a schedule firing
every 2 s, a job held reserved, delayed near jobs, a far job (horizon 5 s), a webhook topic and
parked long-polls — stops one server, and measures the daemon's CPU (utime + stime of every
thread, from /proc) over 10 s. The bound is 10 % of one core; the failure message names the
threads that spent it.

    make integration T=test_fault_idle_cpu
"""

from __future__ import annotations

import os
import threading
import time
import unittest

from core_common import CoreTestCase
from harness import wait_healthy, wait_until
from receiver import WebhookReceiver

MEASURE_S = 10.0
BOUND_S = 1.0  # CPU seconds in MEASURE_S: 10 % of one core
TICKS = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread name (summed over threads of one name) of process `pid`."""
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue  # the thread ended meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICKS
    return out


def cpu_spent(pid: int, seconds: float) -> tuple[float, dict[str, float]]:
    before = thread_cpu(pid)
    time.sleep(seconds)
    after = thread_cpu(pid)
    per = {n: round(after[n] - before.get(n, 0.0), 2) for n in after}
    return sum(per.values()), {n: s for n, s in sorted(per.items(), key=lambda kv: -kv[1]) if s > 0}


class IdleWhileDownTest(CoreTestCase):
    def setUp(self):
        self.stack = self.private_stack()
        self.ns = self.stack.fresh_namespace()
        self.receiver = WebhookReceiver()
        self.addCleanup(self.receiver.close)
        self.d = self.start_daemon({"queue": {"horizon": 5000}, "redis": {"timeout": 500},
                                    "mysql": {"timeout": 1}}, namespace=self.ns)
        wait_healthy(self, self.d)
        self.stop_polls = threading.Event()
        self.addCleanup(self.stop_polls.set)
        self.use_every_feature()

    def use_every_feature(self) -> None:
        d = self.d
        self.assertJsonOk(d.request("POST", "/schedules", body={"topic": "cpu.sched", "every": 2000,
                                                                "job": {"body": {"tick": 1}, "ttr": 2000}}))
        self.assertJsonOk(d.request("PUT", "/topics/cpu.hook",
                                    body={"deliver": {"webhook": self.receiver.url()}}))
        # held reserved; its lease (2 s) runs out while the server is down, so a due time the
        # mover cannot act on passes during the outage
        self.assertJsonOk(d.push({"topic": "cpu.held", "body": 1, "ttr": 2000}))
        held = self.assertJsonOk(d.get("cpu.held"))
        self.assertEqual(held["topic"], "cpu.held")
        for i in range(20):
            self.assertJsonOk(d.push({"topic": "cpu.later", "body": i, "delay": 60000 + i}))
        self.assertJsonOk(d.push({"topic": "cpu.far", "body": 1, "delay": 3600000}))
        self.assertJsonOk(d.push({"topic": "cpu.hook", "body": 1, "delay": 100}))
        # a schedule's first job arrives, so the firing thread has done real work once
        wait_until(lambda: d.get("cpu.sched").status == 200, timeout=10)
        wait_until(lambda: len(self.receiver.hits) >= 1, timeout=10)
        for _ in range(4):  # long-polls parked on the workers while the server is gone
            threading.Thread(target=self.poll, daemon=True).start()

    def poll(self) -> None:
        """A consumer as the docs ask: it waits Retry-After (or 1 s) after a 503."""
        while not self.stop_polls.is_set():
            try:
                r = self.d.get("cpu.idle", timeout=5, http_timeout=20)
            except OSError:
                time.sleep(1)
                continue
            if r.status == 503:
                time.sleep(float(r.header("Retry-After") or 1))

    def assertIdle(self, what: str) -> None:
        time.sleep(2)  # past the first reconnect attempts and timeouts
        total, per = cpu_spent(self.d.pid, MEASURE_S)
        self.assertLess(total, BOUND_S, f"{what}: hourglassd spent {total:.2f} s of CPU in {MEASURE_S:.0f} s; "
                                        f"by thread: {per}")

    def test_redis_down(self):
        self.stack.redis.stop()
        self.assertIdle("Redis down")
        self.stack.redis.start()
        wait_until(lambda: self.d.health().json().get("status") == "ok", timeout=30)

    def test_mysql_down(self):
        self.stack.mariadb.stop()
        self.assertIdle("MySQL down")
        self.stack.mariadb.start()
        wait_until(lambda: self.d.health().json().get("status") == "ok", timeout=60)

    def test_both_down(self):
        self.stack.redis.stop()
        self.stack.mariadb.stop()
        self.assertIdle("Redis and MySQL down")


if __name__ == "__main__":
    unittest.main()
