"""`make soak`: the fault suite's faults at random, one after another, for SOAK_MINUTES
(default 10), each judged by the history checker (tests/integration/history.py). Not part of
`make test`.

    make soak                                   # 10 minutes, a random seed
    make soak SOAK_MINUTES=2
    make soak SOAK_SEED=123456 SOAK_MINUTES=10  # replay a run

The seed (printed first) decides the sequence of faults, their parameters (which instance, how
long, which skew, which link and how lossy) and each run's workload; the timing of the real
processes is not replayed, so a replay repeats the same faults in the same order, not the same
interleaving. At the end: the checker's verdict over every run, by property, and the figures;
each failed run's history is left in <build>/artefacts/faults/soak-<n>.jsonl. Exits 1 on any
violation (or a run that could not be made), 0 otherwise.

Needs what the fault suite needs: root (iptables, mount), Redis, MariaDB, libfaketime.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent / "integration"))

from faults import (ClockSkew, ClusterMasterKill, ClusterReplicaKill, ClusterSeedLost, DiskFull, Fault,  # noqa: E402
                    InstanceKill, InstancePause, InstancePauseLease, LinkFault, MariaDBKill, RedisPause,
                    RedisReplicaKill, RedisSnapshot, SingleServers, cluster_fleet, run_fault)
from history import PROPERTIES, Spec  # noqa: E402
from rcluster import RedisCluster  # noqa: E402

R = random.Random
# (fleet, how to make the fault from the run's random numbers): "single" = SingleServers'
# fleet (A through 127.0.0.2, B), "cluster" = a fresh 3 + 3 cluster, "seed" = the same with
# the instances knowing one seed
CATALOGUE: list[tuple[str, Callable[[R], Fault]]] = [
    ("single", lambda r: InstanceKill(r.choice("AB"), down_s=round(r.uniform(0.5, 4), 1))),
    ("single", lambda r: InstancePause(r.choice("AB"), hold_s=round(r.uniform(4.5, 8), 1))),
    ("single", lambda r: InstancePauseLease(r.choice("AB"), hold_s=round(r.uniform(11, 14), 1))),
    ("single", lambda r: ClockSkew(r.choice("AB"), r.choice((-5000, 5000)), hold_s=round(r.uniform(3, 6), 1))),
    ("single", lambda r: RedisSnapshot(lead_s=round(r.uniform(0.5, 3), 1), down_s=round(r.uniform(0.5, 2), 1))),
    ("single", lambda r: RedisReplicaKill(down_s=round(r.uniform(1, 4), 1))),
    ("single", lambda r: RedisPause(hold_s=round(r.uniform(3, 12), 1))),
    ("single", lambda r: MariaDBKill(down_s=round(r.uniform(0.5, 4), 1))),
    ("single", lambda r: DiskFull(hold_s=round(r.uniform(2, 6), 1))),
    ("single", lambda r: LinkFault(r.choice(("redis", "mysql")), lossy=r.random() < 0.5,
                                   hold_s=round(r.uniform(2, 8), 1), loss=round(r.uniform(0.1, 0.4), 2))),
    ("cluster", lambda r: ClusterMasterKill(r.randrange(3), hold_s=round(r.uniform(0.5, 2), 1))),
    ("cluster", lambda r: ClusterReplicaKill(down_s=round(r.uniform(1, 4), 1))),
    ("seed", lambda r: ClusterSeedLost(hold_s=round(r.uniform(0.5, 2), 1))),
]


def _out_of_time(signum: int, frame: object) -> None:
    raise KeyboardInterrupt("soak: out of time")


def main() -> int:
    minutes = float(os.environ.get("SOAK_MINUTES") or 10)
    seed = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(1, 2 ** 31))
    print(f"soak: SOAK_SEED={seed} SOAK_MINUTES={minutes:g} "
          f"(replay: make soak SOAK_SEED={seed} SOAK_MINUTES={minutes:g})", flush=True)
    rng = random.Random(seed)
    # a run that hangs must not hold the machine: 15 minutes past the end, stop (the harness
    # cleans up on KeyboardInterrupt)
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.alarm(int(minutes * 60) + 900)
    t0 = time.monotonic()
    deadline = t0 + minutes * 60
    servers: SingleServers | None = None
    runs = 0
    failed: list[str] = []
    by_prop: Counter = Counter()
    totals: Counter = Counter()
    worst_recovery = 0.0
    try:
        while time.monotonic() < deadline:
            runs += 1
            kind, make = CATALOGUE[rng.randrange(len(CATALOGUE))]
            fault = make(rng)
            run_seed = rng.randrange(2 ** 31)
            spec = Spec(rate=rng.choice((20.0, 30.0, 45.0)))
            label = f"[{runs}] +{time.monotonic() - t0:.0f} s {fault.name}"
            print(f"{label} ...", flush=True)
            cluster = fleet = None
            try:
                if kind == "single":
                    if servers is None:
                        servers = SingleServers()
                    fleet = servers.fleet()
                else:
                    cluster = RedisCluster(masters=3, replicas=1).start()
                    fleet = cluster_fleet(cluster, seed=cluster.masters()[0].address if kind == "seed" else None)
                run = run_fault(fleet, fault, spec=spec, seed=run_seed, log=lambda s: print(f"    {s}", flush=True))
            except Exception:  # noqa: BLE001 - a run that could not be made is a failure, and the soak goes on
                failed.append(f"{label}: could not run:\n{traceback.format_exc()}")
                by_prop["(run failed)"] += 1
                print(f"    could not run:\n{traceback.format_exc()}", flush=True)
                continue
            finally:
                if fleet is not None:
                    try:
                        fleet.close(check=False)
                        # MariaDB lives on a small tmpfs: a long soak must not fill it with old runs
                        fleet.namespace.mariadb.drop_database(fleet.namespace.database)
                    except Exception as e:  # noqa: BLE001 - the next run starts afresh anyway
                        print(f"    cleanup after the run: {e}", flush=True)
                if cluster is not None:
                    cluster.close()
            v = run.verdict
            print(f"    {'ok' if v.ok else 'VIOLATED'}: {run.summary()}", flush=True)
            for k in ("pushes", "acked", "delivered", "redelivered", "finished", "deleted", "unavailable"):
                totals[k] += v.figures.get(k, 0)
            worst_recovery = max(worst_recovery, v.figures.get("recovery_s", 0.0) or 0.0)
            if not v.ok:
                path = run.save(f"soak-{seed}-{runs}")
                print("    " + v.report().replace("\n", "\n    ") + f"\n    history: {path}", flush=True)
                failed.append(f"{label}: {len(v.violations)} violation(s), history {path}")
                by_prop.update(x.prop for x in v.violations)
    finally:
        if servers is not None:
            servers.close()
    print(f"\nsoak: {runs} run(s) in {(time.monotonic() - t0) / 60:.1f} min, seed {seed}")
    print("soak: figures: " + " ".join(f"{k}={totals[k]}" for k in totals) + f" worst_recovery_s={worst_recovery:.2f}")
    if failed:
        print(f"soak: VIOLATED in {len(failed)} of {runs} run(s): "
              + ", ".join(f"{p}={by_prop[p]}" for p in list(PROPERTIES) + ["(run failed)"] if by_prop[p]))
        for f in failed:
            print(f"  {f}")
        print(f"soak: replay with make soak SOAK_SEED={seed} SOAK_MINUTES={minutes:g}")
        return 1
    print("soak: every run kept the contract")
    return 0


if __name__ == "__main__":
    sys.exit(main())
