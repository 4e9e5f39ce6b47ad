"""bench/galera.py — figure 16 of bench/run.sh (issue 32): the durable record on one MariaDB
against a 3-node MariaDB Galera cluster on this machine, in the same run, and the journal's
ceiling.

    python3 bench/galera.py --binary BIN --lateness TOOL --env ENVFILE --raw DIR \
        [--wrk-secs 10] [--wrk-conns 64] [--wrk-threads 2] [--http-threads N] [--fill-jobs 200000]

Its own servers (tests/integration/galera.py and harness.py start them, on free loopback ports in
temporary directories, removed at exit): a Redis, one MariaDB and three Galera nodes, every
MariaDB with the settings of run.sh's (innodb_flush_log_at_trx_commit = 1, doublewrite, no
binlog); the Galera nodes replicate with galera-4 (rsync state transfers). The daemon lists the
three nodes in [mysql] hosts and so writes through node 1.

1. Pushes/s and latency: figure 0's load (wrk, bench/push.lua: single-job durable pushes due in
   an hour, 64 connections) against the daemon on the single MariaDB and on the cluster,
   alternating, two runs each, the best of each kept. Recorded: requests/s, p50/p99, the
   journal's commit time (hourglass_mysql_commit_seconds: the write and COMMIT of one batch)
   and records per batch, and the CPU of the MariaDB processes per push — what the difference
   is made of. A third daemon on the cluster runs with [mysql] journal_lanes = 2 ("lanes2"):
   two journal cycles in flight, each waiting for its own certification.
2. The journal's ceiling: bench/lateness.c's fill (array pushes of 1,000 jobs, 4 producers,
   due in an hour) of --fill-jobs jobs through the daemon on the single MariaDB: journal
   records/s (hourglass_journal_records_total over the fill) and the CPU mariadbd used meanwhile;
   records per MariaDB core-second is the ceiling of one journal connection (its statements run
   one after another on one server thread), which is what one instance can send one MySQL.

Every figure goes to ENVFILE as gal_<name>=<value> lines (run.sh's format; report.py reads them).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import harness  # noqa: E402
from galera import GaleraCluster, GaleraStack  # noqa: E402
from harness import Daemon, MariaDBServer, RedisServer, Stack  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")
# run.sh's MariaDB settings (its servers section), for every server here
MYSQL_ARGS = ["--innodb-flush-log-at-trx-commit=1", "--innodb-doublewrite=1", "--innodb-log-file-size=256M"]


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLK
        except (OSError, IndexError, ValueError):
            pass
    return total


def metrics(d: Daemon) -> dict[str, float]:
    with urllib.request.urlopen(f"{d.url}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(hourglass_(?:journal_records_total|journal_batches_total|mysql_commit_seconds_(?:sum|count)|"
                     r"journal_batch_records_(?:sum|count)))\s+(\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def delta(a: dict[str, float], b: dict[str, float], key: str) -> float:
    return b.get(key, 0.0) - a.get(key, 0.0)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.env = open(args.env, "a")

    def rec(self, key: str, value: object) -> None:
        self.env.write(f"gal_{key}={value}\n")
        self.env.flush()

    def say(self, text: str) -> None:
        print(f"[galera] {text}", file=sys.stderr, flush=True)

    def daemon(self, stack: Stack, lanes: int = 1) -> Daemon:
        ns = stack.fresh_namespace()
        d = Daemon(namespace=ns, binary=self.args.binary, overrides={
            "http": {"threads": self.args.http_threads, "max_body": 4194304},
            "mysql": {"retention_days": 0, "journal_lanes": lanes},
            "queue": {"horizon": 0},
            "log": {"level": "warn"}})
        d.start()
        harness.wait_until(d.ready, 30, 0.05, "the daemon to be ready")
        return d

    def wrk(self, d: Daemon, tag: str, pids: list[int]) -> dict[str, float]:
        out = os.path.join(self.args.raw, f"wrk-gal-{tag}.txt")
        m0, c0, t0 = metrics(d), cpu_seconds(pids), time.monotonic()
        with open(out, "w") as f:
            subprocess.run(["wrk", "-t", str(self.args.wrk_threads), "-c", str(self.args.wrk_conns), "-d",
                            f"{self.args.wrk_secs}s", "--latency", "-s", os.path.join(HERE, "push.lua"),
                            f"{d.url}/push"], stdout=f, stderr=subprocess.STDOUT, check=True)
        secs, cpu, m1 = time.monotonic() - t0, cpu_seconds(pids) - c0, metrics(d)
        text = open(out).read()

        def ms(v: str) -> float:
            n = float(re.match(r"[\d.]+", v).group(0))
            return n / 1000 if v.endswith("us") else n * 1000 if v.endswith("s") and not v.endswith("ms") else n
        r = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)),
             "p50_ms": ms(re.search(r"^\s+50%\s+(\S+)", text, re.M).group(1)),
             "p99_ms": ms(re.search(r"^\s+99%\s+(\S+)", text, re.M).group(1)),
             "non2xx": int((re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text) or [0, 0])[1])}
        records = delta(m0, m1, "hourglass_journal_records_total")
        batches = delta(m0, m1, "hourglass_mysql_commit_seconds_count")
        r["commit_ms"] = 1000 * delta(m0, m1, "hourglass_mysql_commit_seconds_sum") / batches if batches else 0
        r["batch_records"] = records / batches if batches else 0
        r["mysql_cores"] = cpu / secs
        r["mysql_us_per_push"] = 1e6 * cpu / records if records else 0
        return r

    def fill(self, d: Daemon, pids: list[int]) -> dict[str, float]:
        m0, c0, t0 = metrics(d), cpu_seconds(pids), time.monotonic()
        out = subprocess.run([self.args.lateness, "fill", d.address, "--prefix", "ceil", "--jobs",
                              str(self.args.fill_jobs), "--delay", "3600000", "--topics", "16", "--body-bytes", "100",
                              "--batch", "1000", "--producers", "4", "--max-seconds", "900"],
                             capture_output=True, text=True, check=True).stdout
        harness.wait_until(lambda: harness.journal_idle(d), 120, 0.1, "the journal to be idle")
        secs, cpu, m1 = time.monotonic() - t0, cpu_seconds(pids) - c0, metrics(d)
        records = delta(m0, m1, "hourglass_journal_records_total")
        batches = delta(m0, m1, "hourglass_mysql_commit_seconds_count")
        rate = float(re.search(r"^rate=([\d.]+)", out, re.M).group(1))
        return {"push_rate": rate, "records": records, "records_s": records / secs, "secs": secs,
                "mysql_cores": cpu / secs, "records_per_core_s": records / cpu if cpu else 0,
                "batch_records": records / batches if batches else 0,
                "commit_ms": 1000 * delta(m0, m1, "hourglass_mysql_commit_seconds_sum") / batches if batches else 0}

    def run(self) -> None:
        t0 = time.monotonic()
        redis = RedisServer()
        single = MariaDBServer(buffer_pool="512M", args=MYSQL_ARGS)
        redis.start()
        single.start()
        one = Stack(redis, single)
        self.say("starting a 3-node Galera cluster")
        cluster = GaleraCluster(3, args=MYSQL_ARGS)
        gal = GaleraStack(redis, cluster)
        cluster.start()
        self.rec("cluster_start_s", round(time.monotonic() - t0, 1))
        # "lanes2": the cluster again with two journal lanes ([mysql] journal_lanes), whose
        # cycles overlap each other's wait for certification
        targets = {"single": (one, [single.pid], 1), "cluster": (gal, [n.pid for n in cluster.nodes], 1),
                   "lanes2": (gal, [n.pid for n in cluster.nodes], 2)}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
        for npass in (1, 2):
            for name, (stack, pids, lanes) in targets.items():
                d = self.daemon(stack, lanes)
                try:
                    r = self.wrk(d, f"{name}{npass}", pids)
                finally:
                    d.close()
                redis.flushall()
                runs[name].append(r)
                self.say(f"{name} pass {npass}: {r['rps']:.0f} pushes/s, p99 {r['p99_ms']:.2f} ms, commit "
                         f"{r['commit_ms']:.2f} ms x {r['batch_records']:.1f} records, MariaDB "
                         f"{r['mysql_us_per_push']:.0f} us CPU per push")
        for name, rs in runs.items():
            best = max(rs, key=lambda r: r["rps"])
            for k, v in best.items():
                self.rec(f"{name}_{k}", round(v, 3))
            self.rec(f"{name}_runs", " ".join(f"{r['rps']:.0f}" for r in rs))
        for name, (stack, pids, _) in (("ceiling", targets["single"]), ("ceilgal", targets["cluster"])):
            d = self.daemon(stack)
            try:
                r = self.fill(d, pids)
            finally:
                d.close()
            redis.flushall()
            for k, v in r.items():
                self.rec(f"{name}_{k}", round(v, 3))
            self.say(f"{name}: {r['records_s']:.0f} journal records/s, MariaDB {r['mysql_cores']:.2f} cores: "
                     f"{r['records_per_core_s']:.0f} records per core-second ({r['batch_records']:.0f} per commit, "
                     f"{r['commit_ms']:.1f} ms each)")
        self.rec("elapsed_s", round(time.monotonic() - t0, 1))
        gal.close()
        one.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", required=True)
    p.add_argument("--lateness", required=True)
    p.add_argument("--env", required=True)
    p.add_argument("--raw", required=True)
    p.add_argument("--wrk-secs", type=int, default=10)
    p.add_argument("--wrk-conns", type=int, default=64)
    p.add_argument("--wrk-threads", type=int, default=2)
    p.add_argument("--http-threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--fill-jobs", type=int, default=200000)
    args = p.parse_args()
    args.binary = os.path.abspath(args.binary)
    args.lateness = os.path.abspath(args.lateness)
    Bench(args).run()


if __name__ == "__main__":
    main()
