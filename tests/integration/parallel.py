"""Run the integration test modules in N processes at once (scripts/run-integration.sh).

Each process is one `python -m unittest` over a group of modules, so each starts its shared
Redis + MariaDB (+ RabbitMQ when a module asks) once, as a single run does; the groups are
balanced by how long each module took last time (`durations.txt` beside this file, refreshed
with --record) — the slowest first onto the least loaded group. Output of a group is printed
whole when it ends (interleaved lines would be unreadable), with a summary at the end.

    parallel.py N [--record]

Most of the suite waits (leases, timeouts, backoffs, servers starting), so two groups on a
2-core machine take little more than half the time of one; the tests never depend on a
fixed port or on running alone (every server is private to its process, on free ports).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DURATIONS = HERE / "durations.txt"


def load_durations() -> dict[str, float]:
    out: dict[str, float] = {}
    if DURATIONS.exists():
        for line in DURATIONS.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and not line.startswith("#"):
                out[parts[0]] = float(parts[1])
    return out


def main() -> int:
    if len(sys.argv) < 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        print("usage: parallel.py N [--record]", file=sys.stderr)
        return 2
    n = int(sys.argv[1])
    record = "--record" in sys.argv[2:]
    modules = sorted(p.stem for p in HERE.glob("test_*.py"))
    known = load_durations()
    default = max(known.values(), default=30.0) / 2  # a new module: assume it is middling
    groups: list[list[str]] = [[] for _ in range(n)]
    load = [0.0] * n
    for m in sorted(modules, key=lambda m: -known.get(m, default)):
        i = load.index(min(load))
        groups[i].append(m)
        load[i] += known.get(m, default)
    procs = []
    logs = []
    t0 = time.monotonic()
    for i, group in enumerate(groups):
        if not group:
            continue
        log = tempfile.NamedTemporaryFile("w+", prefix=f"hg-it{i}-", suffix=".log", delete=False)
        logs.append(log)
        # the runner prints each module's time (runmods.py) so --record can refresh the table
        p = subprocess.Popen([sys.executable, str(HERE / "runmods.py"), *group], stdout=log,
                             stderr=subprocess.STDOUT, cwd=HERE)
        procs.append((i, group, p, log, time.monotonic()))
        print(f"integration: group {i}: {len(group)} modules (~{load[i]:.0f} s): {' '.join(group)}", flush=True)
    def stop(signum, frame):
        # a timeout or Ctrl-C: the groups' harnesses clean their servers up on SIGTERM
        for _, _, p, _, _ in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, _, p, _, _ in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        sys.exit(130)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = []
    times: dict[str, float] = {}
    summaries = []
    pending = list(procs)
    while pending:
        for item in list(pending):
            i, group, p, log, started = item
            if p.poll() is None:
                continue
            pending.remove(item)
            log.seek(0)
            text = log.read()
            log.close()
            os.unlink(log.name)
            print(f"\n===== integration group {i} ({time.monotonic() - started:.0f} s, exit {p.returncode}) =====")
            print(text, flush=True)
            for m, secs in re.findall(r"^runmods: (\S+) took ([0-9.]+) s$", text, re.M):
                times[m] = float(secs)
            ran = re.findall(r"^runmods: (\d+) tests in", text, re.M)
            summaries.append(f"group {i}: {ran[0] if ran else '?'} tests, exit {p.returncode}")
            if p.returncode != 0:
                failed.append(i)
        time.sleep(0.2)
    print(f"\nintegration: {len(procs)} groups in {time.monotonic() - t0:.0f} s: " + "; ".join(summaries))
    if record and times:
        merged = {**known, **times}
        DURATIONS.write_text("# seconds per integration module, one run (tests/integration/parallel.py --record)\n" +
                             "".join(f"{m} {merged[m]:.0f}\n" for m in sorted(merged) if m in modules))
    if failed:
        print(f"integration: FAILED in group(s) {', '.join(map(str, failed))} (their output is above)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
