#!/usr/bin/env python3
"""PUBLISH against SPUBLISH on a 3-master + 3-replica Redis Cluster on loopback: the CPU each
node spends per message, with one subscriber as the daemon has (its keeper subscribes on one
node). Why hourglass uses plain PUBLISH in cluster mode is in docs/architecture.md ("Redis
Cluster"); this is the measurement behind it.

    python3 bench/pubsub_cluster.py [messages]

Starts its own cluster (tests/integration/rcluster.py) and removes it on exit. For each
command: a subscriber connection (SUBSCRIBE, or SSUBSCRIBE on the channel's owner), then
`redis-benchmark -n N` of the command against the channel's owner; CPU seconds of every
redis-server read from /proc before and after."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "integration"))
from rcluster import RedisCluster, keyslot  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def subscriber(port: int, command: str, channel: str, received: list[int], stop: threading.Event) -> None:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"{command} {channel}\r\n".encode())
    s.settimeout(0.2)
    n = 0
    while not stop.is_set():
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        n += chunk.count(b"message\r\n")  # "message" or "smessage" pushes
    received.append(n)
    s.close()


def measure(c: RedisCluster, kind: str, messages: int) -> dict:
    channel = "hg:ready" if kind == "PUBLISH" else "hg:{0.6957}:ready"
    slot = keyslot(channel)
    owner = c.node_by_id(next(nid for a, b, nid in c.slot_owners() if a <= slot <= b))
    listen_on = owner if kind == "SPUBLISH" else c.masters()[0]
    received: list[int] = []
    stop = threading.Event()
    th = threading.Thread(target=subscriber, args=(
        listen_on.port, "SSUBSCRIBE" if kind == "SPUBLISH" else "SUBSCRIBE", channel, received, stop))
    th.start()
    time.sleep(0.3)
    nodes = c.live()
    before = {n.port: cpu_seconds(n.proc.pid) for n in nodes}
    t0 = time.monotonic()
    subprocess.run(["redis-benchmark", "-p", str(owner.port), "-c", "8", "-n", str(messages), "-q",
                    kind, channel, "topic.name.12"], check=True, capture_output=True)
    wall = time.monotonic() - t0
    time.sleep(0.5)  # the cluster bus delivers the rest
    after = {n.port: cpu_seconds(n.proc.pid) for n in nodes}
    stop.set()
    th.join()
    per = {}
    for n in nodes:
        role = "publisher's master" if n is owner else ("replica" if n not in c.masters() else "other master")
        per.setdefault(role, 0.0)
        per[role] += after[n.port] - before[n.port]
    return {"kind": kind, "wall": wall, "received": received[0] if received else 0, "cpu": per}


def main() -> None:
    messages = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    with RedisCluster(masters=3, replicas=1) as c:  # started on entry
        for kind in ("PUBLISH", "SPUBLISH", "PUBLISH", "SPUBLISH"):
            r = measure(c, kind, messages)
            total = sum(r["cpu"].values())
            parts = ", ".join(f"{k} {v / messages * 1e6:.1f}" for k, v in sorted(r["cpu"].items()))
            print(f"{kind:8s} {messages / r['wall']:9,.0f} msg/s  received {r['received']:,}  "
                  f"CPU µs per message: all nodes {total / messages * 1e6:.1f} ({parts})")


if __name__ == "__main__":
    main()
