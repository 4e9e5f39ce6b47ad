"""A real Redis Cluster on loopback for the integration tests (issue 14: [redis] cluster = true).

    from rcluster import RedisCluster

    with RedisCluster() as c:             # 3 masters + 3 replicas, cluster_state:ok everywhere
        c.seeds()                          # ["127.0.0.1:p1", ...]
        c.masters()                        # [ClusterNode, ...] serving slots, in slot order
        c.kill_master(0)                   # SIGKILL it, wait for its replica to take over
        c.migrate_slots(100, 109, c.masters()[1])

Each node is a harness.RedisServer (its own temp dir, removed on close; killed with the test
process through PDEATHSIG; closed by harness's atexit hook if the test forgets) started with
--cluster-enabled and a cluster bus port of its own (--cluster-port, so both ports come from
harness.free_port). The cluster is joined by `redis-cli --cluster create`. Slot migration is
done by hand (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE), because
`redis-cli --cluster reshard` only moves slots from the start of a node's ranges, and a test
wants a chosen range (a split) and a slot left half-way (ASK).

Topology is read from CLUSTER NODES (text, one line a node); raw RESP bytes of any command
(for recorded replies, or to feed the C parser) come from command_raw over a plain socket.
"""

from __future__ import annotations

import socket
import time
from typing import Any, Callable

import harness
from harness import HOST, HarnessError, RedisServer, free_port, wait_until

__all__ = ["ClusterNode", "RedisCluster", "command_raw", "resp_parse", "keyslot", "key_in_slots"]


# --------------------------------------------------------------------------- RESP


def _encode(args: tuple[Any, ...]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def resp_parse(buf: bytes, pos: int = 0) -> tuple[Any, int] | None:
    """One RESP2 value from buf[pos:]: (value, end) or None when buf holds only part of it.
    Errors come back as RedisError instances (not raised), nil as None."""
    eol = buf.find(b"\r\n", pos)
    if eol < 0:
        return None
    kind, line = buf[pos:pos + 1], buf[pos + 1:eol]
    if kind == b"+":
        return line.decode(), eol + 2
    if kind == b"-":
        return harness.RedisError(line.decode()), eol + 2
    if kind == b":":
        return int(line), eol + 2
    if kind == b"$":
        n = int(line)
        if n < 0:
            return None, eol + 2
        if len(buf) < eol + 2 + n + 2:
            return None
        return buf[eol + 2:eol + 2 + n].decode(), eol + 2 + n + 2
    if kind == b"*":
        n = int(line)
        if n < 0:
            return None, eol + 2
        items, p = [], eol + 2
        for _ in range(n):
            r = resp_parse(buf, p)
            if r is None:
                return None
            items.append(r[0])
            p = r[1]
        return items, p
    raise HarnessError(f"not RESP: {buf[pos:pos + 40]!r}")


def command_raw(port: int, *args: Any, timeout: float = 5.0) -> bytes:
    """Send one command to 127.0.0.1:port and return its reply's raw RESP bytes."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(_encode(args))
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                raise HarnessError(f"127.0.0.1:{port} closed the connection during {args[0]}")
            buf += chunk
            r = resp_parse(buf)
            if r is not None:
                return buf[:r[1]]


def _crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def keyslot(key: str | bytes) -> int:
    """Redis's key -> slot (hash tag rule included), independent of src/core/cluster.c."""
    k = key.encode() if isinstance(key, str) else key
    i = k.find(b"{")
    if i >= 0:
        j = k.find(b"}", i + 1)
        if j > i + 1:
            k = k[i + 1:j]
    return _crc16(k) % 16384


def key_in_slots(first: int, last: int, prefix: str = "k") -> str:
    """The first key "<prefix>:{<n>}" whose slot lies in first..last."""
    n = 0
    while not first <= keyslot(str(n)) <= last:
        n += 1
    return f"{prefix}:{{{n}}}"


# --------------------------------------------------------------------------- nodes


class ClusterNode(RedisServer):
    """A redis-server with cluster mode on, its bus on a free port of its own."""

    kind = "rcluster"

    def __init__(self, node_timeout_ms: int) -> None:
        self.bus_port = free_port()
        self.node_timeout_ms = node_timeout_ms
        super().__init__()
        self.node_id = ""

    def _argv(self) -> list[str]:
        return super()._argv() + ["--cluster-enabled", "yes", "--cluster-port", str(self.bus_port),
                                  "--cluster-config-file", "nodes.conf",
                                  "--cluster-node-timeout", str(self.node_timeout_ms),
                                  # a replica syncs at once instead of after the default 5 s: one
                                  # that never synced refuses to fail over
                                  "--repl-diskless-sync-delay", "0"]

    def start(self, timeout: float = 30.0) -> "ClusterNode":
        for attempt in range(3):
            try:
                super().start(timeout)
                break
            except HarnessError:
                # RedisServer retries a taken client port itself; a taken bus port lands here
                if attempt == 2 or self.started_once or "in use" not in self.log_tail(10):
                    raise
                self.bus_port, self.port = free_port(), free_port()
        self.node_id = self.cli("CLUSTER", "MYID")
        return self

    def info_cluster(self) -> dict[str, str]:
        out = {}
        for line in self.cli("CLUSTER", "INFO").splitlines():
            k, _, v = line.strip().partition(":")
            out[k] = v
        return out

    def link_up(self) -> bool:
        """A replica whose replication link is up (it has synced: it can take over)."""
        return "master_link_status:up" in self.cli("INFO", "replication")

    def nodes(self) -> list[dict[str, Any]]:
        """CLUSTER NODES as seen by this node: id, addr, flags, master (id or '-'), slots
        [(first, last)] (migration markers "[slot->-id]" left out)."""
        out = []
        for line in self.cli("CLUSTER", "NODES").splitlines():
            f = line.split()
            if len(f) < 8:
                continue
            slots = []
            for s in f[8:]:
                if s.startswith("["):
                    continue
                a, _, b = s.partition("-")
                slots.append((int(a), int(b or a)))
            out.append({"id": f[0], "addr": f[1].split("@")[0], "flags": set(f[2].split(",")),
                        "master": f[3], "slots": slots})
        return out

    def __repr__(self) -> str:
        return f"<ClusterNode {self.address} id={self.node_id[:8]} {'up' if self.running else 'down'}>"


# --------------------------------------------------------------------------- the cluster


class RedisCluster:
    """masters x (1 + replicas) cluster nodes on loopback. start() is called by __enter__."""

    def __init__(self, masters: int = 3, replicas: int = 1, node_timeout_ms: int = 1000) -> None:
        if masters < 3:
            raise HarnessError("redis-cli --cluster create wants at least 3 masters")
        self.nmasters, self.nreplicas = masters, replicas
        self.node_timeout_ms = node_timeout_ms
        self.nodes: list[ClusterNode] = []
        self._closed = False
        harness._register(self)  # closed by harness's atexit hook if the test does not

    # -- life
    def start(self, timeout: float = 30.0) -> "RedisCluster":
        total = self.nmasters * (1 + self.nreplicas)
        try:
            for _ in range(total):
                n = ClusterNode(self.node_timeout_ms)
                self.nodes.append(n)
                n.start()
            argv = [harness._which("redis-cli"), "--cluster", "create",
                    *[n.address for n in self.nodes],
                    "--cluster-replicas", str(self.nreplicas), "--cluster-yes"]
            r = harness._run(argv, timeout=timeout, what="redis-cli --cluster create")
            if r.returncode != 0 or "[OK] All 16384 slots covered" not in r.stdout:
                raise HarnessError(f"redis-cli --cluster create failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
            # create returns once the slots are assigned; replicas attach and gossip settles later
            self.wait_stable(timeout, replicas=True)
            # CLUSTER SLOTS lists only replicas with a replication offset above 0: one write per
            # master, so that the map a client reads shows the replicas
            for a, b, nid in self.slot_owners():
                self.node_by_id(nid).cli("SET", key_in_slots(a, b, "rcluster"), "1")
            # every node learns a replica's offset by gossip on its own schedule: ask each of them
            wait_until(lambda: all(len(e) - 3 >= self.nreplicas
                                   for n in self.nodes for e in self.cluster_slots(n)), timeout, 0.1,
                       "CLUSTER SLOTS of every node to list every replica")
        except BaseException:
            self.close(check=False)
            raise
        return self

    def close(self, check: bool = True) -> None:
        """Stop every node and remove their directories. Idempotent."""
        if self._closed:
            return
        self._closed = True
        harness._unregister(self)
        for n in self.nodes:
            n.close(check=False)

    def __enter__(self) -> "RedisCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- topology
    def live(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.running]

    def node_by_id(self, node_id: str) -> ClusterNode:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise HarnessError(f"no node with id {node_id}")

    def seeds(self) -> list[str]:
        """host:port of every live node (a daemon's `[redis] address`, comma-joined)."""
        return [n.address for n in self.live()]

    def slot_owners(self, via: ClusterNode | None = None) -> list[tuple[int, int, str]]:
        """[(first, last, master id)] sorted by slot, as `via` (default: a live node) sees it."""
        node = via or self.live()[0]
        return sorted((a, b, e["id"]) for e in node.nodes() if "master" in e["flags"]
                      for a, b in e["slots"])

    def cluster_slots(self, via: ClusterNode | None = None) -> list[list[Any]]:
        """CLUSTER SLOTS, decoded: [[first, last, [host, port, id, ...], replica...], ...]."""
        node = via or self.live()[0]
        value, _ = resp_parse(command_raw(node.port, "CLUSTER", "SLOTS"))
        if isinstance(value, Exception):
            raise value
        return value

    def masters(self) -> list[ClusterNode]:
        """The masters serving slots, ordered by their lowest slot."""
        seen: list[str] = []
        for _, _, nid in self.slot_owners():
            if nid not in seen:
                seen.append(nid)
        return [self.node_by_id(nid) for nid in seen]

    def replicas_of(self, master: ClusterNode) -> list[ClusterNode]:
        """Live replicas attached to master, as master itself sees them, that have synced."""
        return [self.node_by_id(e["id"]) for e in master.nodes()
                if "slave" in e["flags"] and e["master"] == master.node_id and "fail" not in e["flags"]
                and self.node_by_id(e["id"]).running and self.node_by_id(e["id"]).link_up()]

    def stable(self, replicas: bool = False) -> bool:
        """Every live node says cluster_state:ok and sees the same slot owners, all 16384 slots
        covered by live masters; with replicas=True also every master has its replicas."""
        live = self.live()
        views = []
        for n in live:
            if n.info_cluster().get("cluster_state") != "ok":
                return False
            views.append(self.slot_owners(n))
        if any(v != views[0] for v in views) or sum(b - a + 1 for a, b, _ in views[0]) != 16384:
            return False
        live_ids = {n.node_id for n in live}
        if any(nid not in live_ids for _, _, nid in views[0]):
            return False
        if replicas:
            return all(len(self.replicas_of(m)) >= self.nreplicas for m in self.masters())
        return True

    def wait_stable(self, timeout: float = 20.0, replicas: bool = False) -> None:
        wait_until(lambda: self.stable(replicas), timeout, 0.1, "the cluster to agree on its slot map")

    # -- faults
    def kill_master(self, i: int, timeout: float = 20.0,
                    killed: Callable[[], None] | None = None) -> tuple[ClusterNode, ClusterNode, float]:
        """SIGKILL masters()[i]; wait until one of its replicas serves its slots and the cluster
        is ok again on every live node. `killed` is called once the master is dead, before the
        wait. Returns (the dead master, the promoted replica, seconds from the kill until every
        live node agreed)."""
        victim = self.masters()[i]
        slots = [(a, b) for a, b, nid in self.slot_owners() if nid == victim.node_id]
        t0 = time.monotonic()
        victim.kill()
        if killed is not None:
            killed()

        def promoted() -> ClusterNode | None:
            if not self.stable():
                return None
            owners = {nid for a, b, nid in self.slot_owners() if (a, b) in slots}
            if len(owners) != 1 or victim.node_id in owners:
                return None
            return self.node_by_id(owners.pop())

        heir = wait_until(promoted, timeout, 0.05, f"a replica of {victim.address} to take over")
        return victim, heir, time.monotonic() - t0

    # -- resharding
    def begin_migration(self, slot: int, dest: ClusterNode) -> ClusterNode:
        """Mark slot as migrating from its owner to dest (both sides); returns the owner. Keys
        not moved yet are answered by the owner, moved ones with ASK."""
        owner = self.node_by_id(next(nid for a, b, nid in self.slot_owners() if a <= slot <= b))
        if owner is dest:
            raise HarnessError(f"slot {slot} is on {dest.address} already")
        dest.cli("CLUSTER", "SETSLOT", slot, "IMPORTING", owner.node_id)
        owner.cli("CLUSTER", "SETSLOT", slot, "MIGRATING", dest.node_id)
        return owner

    def move_keys(self, slot: int, owner: ClusterNode, dest: ClusterNode, count: int = 0) -> int:
        """MIGRATE up to count (0 = all) of slot's keys from owner to dest; returns how many."""
        moved = 0
        while count == 0 or moved < count:
            batch = 100 if count == 0 else min(100, count - moved)
            keys = owner.cli("CLUSTER", "GETKEYSINSLOT", slot, batch).split()
            if not keys:
                break
            owner.cli("MIGRATE", HOST, dest.port, "", 0, 5000, "KEYS", *keys)
            moved += len(keys)
        return moved

    def end_migration(self, slot: int, dest: ClusterNode) -> None:
        """Give slot to dest: the importing side first, then every other master (as
        redis-cli does), so no master answers MOVED back to the old owner."""
        dest.cli("CLUSTER", "SETSLOT", slot, "NODE", dest.node_id)
        for m in self.masters():
            if m is not dest and m.running:
                m.cli("CLUSTER", "SETSLOT", slot, "NODE", dest.node_id)

    def migrate_slots(self, first: int, last: int, dest: ClusterNode, timeout: float = 20.0) -> None:
        """Move slots first..last (with their keys) to dest, then wait for agreement."""
        for slot in range(first, last + 1):
            owner = self.begin_migration(slot, dest)
            self.move_keys(slot, owner, dest)
            self.end_migration(slot, dest)
        self.wait_stable(timeout)

    def __repr__(self) -> str:
        return f"<RedisCluster {len(self.live())}/{len(self.nodes)} nodes up>"
