"""A private 3-node MariaDB Galera cluster on loopback, for the tests of issue 32 ("the durable
record on a MySQL cluster") and the bench's Galera figure.

Not a test module (discovery only picks up test_*.py). Each node is a harness.MariaDBServer (its
own temporary directory, data dir, socket and free port, cleaned up at exit like every server of
the harness) started with the wsrep options of a Galera node: the galera-4 provider, its own
group-communication (gmcast), IST and SST ports on 127.0.0.1, rsync as the state transfer. The
first node bootstraps the cluster (--wsrep-new-cluster); the others join it (a full rsync SST the
first time, an incremental one — IST — when they come back after a kill).

    cluster = GaleraCluster(3).start()        # ~10-30 s on a busy machine
    cluster.nodes[0].kill()                   # kill -9
    cluster.nodes[0].start()                  # rejoins (IST), waits until Synced
    cluster.stop_all(); cluster.bootstrap()   # the whole cluster down, then started again
    cluster.close()

A node counts as started only when it is Synced (wsrep_local_state 4) and ready. Writes made
through any node are on every Synced node (Galera applies them before the next read that waits
for them: `query(..., sync=True)` sets wsrep_sync_wait for the read).
"""

from __future__ import annotations

import os
import pwd
import re
import threading
import time
from typing import Any, Iterable

from history import Recorder, Violation, Window, final_rows

from faults import Fault, Fleet, Kill
from harness import (HOST, HarnessError, MariaDBServer, Namespace, RedisServer, Stack, _run, free_port,
                     wait_until)

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
SYNCED = "4"  # wsrep_local_state: Synced


class GaleraNode(MariaDBServer):
    """One node of a GaleraCluster. start() returns once the node is Synced with the cluster."""

    kind = "galera"

    def __init__(self, cluster: "GaleraCluster", index: int, args: Iterable[str] = (), buffer_pool: str = "64M") -> None:
        self.cluster = cluster
        self.index = index
        self.gmcast_port = free_port()
        self.ist_port = free_port()
        self.sst_port = free_port()
        self.bootstrap = False  # the next start makes a new cluster (--wsrep-new-cluster)
        self.start_position = ""  # uuid:seqno recovered after a crash (--wsrep-start-position)
        super().__init__(buffer_pool=buffer_pool, args=args)
        self._chown(self.dir)

    # As user mysql (when the tests run as root): the rsync daemon that receives a state transfer
    # runs as the server's user, and rsync run by root switches to "nobody", who may not write
    # into the node's directory.
    @staticmethod
    def _chown(path: str) -> None:
        if os.geteuid() == 0:
            pw = pwd.getpwnam("mysql")
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def _user_args(self) -> list[str]:
        return ["--user=mysql"] if os.geteuid() == 0 else []

    def _tmpdir(self) -> str:
        path = super()._tmpdir()
        self._chown(path)
        return path

    @property
    def name(self) -> str:
        return f"node{self.index + 1}"

    def _argv(self) -> list[str]:
        peers = ",".join(f"{HOST}:{n.gmcast_port}" for n in self.cluster.nodes)
        argv = super()._argv() + [
            "--wsrep-on=ON", f"--wsrep-provider={PROVIDER}",
            f"--wsrep-cluster-address=gcomm://{peers}", f"--wsrep-cluster-name={self.cluster.name}",
            f"--wsrep-node-name={self.name}", f"--wsrep-node-address={HOST}:{self.gmcast_port}",
            f"--wsrep-node-incoming-address={HOST}:{self.port}",
            f"--wsrep-sst-receive-address={HOST}:{self.sst_port}", "--wsrep-sst-method=rsync",
            # small caches and timeouts for a machine shared with other tests; evs timeouts
            # short so that a killed node is dropped from the view within a few seconds
            "--wsrep-provider-options=" + ";".join([
                f"gmcast.listen_addr=tcp://{HOST}:{self.gmcast_port}", f"ist.recv_addr={HOST}:{self.ist_port}",
                f"base_port={self.gmcast_port}", "gcache.size=64M",
                "evs.suspect_timeout=PT3S", "evs.inactive_timeout=PT6S", "evs.keepalive_period=PT0.5S",
                "evs.inactive_check_period=PT0.5S", "evs.install_timeout=PT6S", "pc.wait_prim_timeout=PT30S"]),
            "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--wsrep-slave-threads=2",
        ]
        if self.bootstrap:
            argv.append("--wsrep-new-cluster")
        if self.start_position:
            argv.append(f"--wsrep-start-position={self.start_position}")
        return argv

    def _recover_position(self) -> str:
        """After a crash grastate.dat says seqno -1: the node would not know what it holds and
        take a full state transfer. What the Debian unit does before each start (galera_recovery):
        mariadbd --wsrep-recover reads the position from InnoDB; the node then starts from it and
        catches up by IST."""
        if not self.started_once or self.seqno() != -1:
            return ""
        self.start_position = ""
        out = os.path.join(self.dir, "wsrep-recover.log")
        with open(out, "w"):
            pass
        self._chown(out)
        _run(self._argv() + ["--wsrep-recover", f"--log-error={out}"], timeout=120, what=f"{self.name} --wsrep-recover")
        with open(out) as f:
            m = re.search(r"Recovered position: (\S+:-?\d+)", f.read())
        with open(self.log_path, "a") as f:
            f.write(f"=== harness: --wsrep-recover: {m.group(1) if m else 'no position'}\n")
        return m.group(1) if m else ""

    def start(self, timeout: float = 180.0) -> "GaleraNode":
        """Start (no-op if running) and wait until the node is Synced and ready."""
        if self.running:
            return self
        self.start_position = self._recover_position()
        super().start(timeout)
        try:
            wait_until(self.synced, timeout, 0.1, f"{self.name} to be Synced")
        except TimeoutError:
            raise self._fail(f"{self.name} did not reach Synced within {timeout:g} s") from None
        finally:
            self.bootstrap = False
        return self

    def status(self, *names: str) -> dict[str, str]:
        """wsrep status variables by name (e.g. "wsrep_local_state"), through the socket."""
        like = " OR ".join(f"VARIABLE_NAME = '{n.upper()}'" for n in names)
        rows = self.query(f"SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                          f"WHERE {like}", timeout=10)
        return {k: v for k, v in rows}

    def synced(self) -> bool:
        if not self.running:
            raise self._fail(f"{self.name} exited with status {self.returncode}")
        try:
            s = self.status("wsrep_local_state", "wsrep_ready")
        except (HarnessError, TimeoutError):
            return False
        return s.get("wsrep_local_state") == SYNCED and s.get("wsrep_ready") == "ON"

    def stop(self, timeout: float = 120.0) -> int | None:
        return self._terminate(15, timeout)

    def seqno(self) -> int:
        """The last committed seqno in grastate.dat (-1 after a crash; the node is stopped)."""
        try:
            with open(os.path.join(self.datadir, "grastate.dat")) as f:
                m = re.search(r"^seqno:\s*(-?\d+)", f.read(), re.M)
        except OSError:
            return -1
        return int(m.group(1)) if m else -1

    def mark_safe_to_bootstrap(self) -> None:
        """grastate.dat's safe_to_bootstrap: 1 — what the operator does on the node with the
        highest seqno before bootstrapping a cluster that was stopped all at once."""
        path = os.path.join(self.datadir, "grastate.dat")
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(re.sub(r"^safe_to_bootstrap:\s*\d", "safe_to_bootstrap: 1", text, flags=re.M))

    def connections(self, db: str) -> int:
        """The daemons' connections to this node on database `db` (the hourglass user's)."""
        rows = self.query(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'hourglass' "
                          f"AND DB = '{db}'", timeout=10)
        return int(rows[0][0])

    def state_transfers(self) -> tuple[int, int]:
        """(full state transfers, incremental ones) this node's log shows it received: an rsync
        SST that copied the data, an IST that carried at least one write set."""
        log = self.log()
        full = len(re.findall(r"rsync SST completed on joiner", log)) - len(re.findall(r"bypass", log, re.I))
        ist = len([m for m in re.findall(r"Receiving IST\.\.\. 100\.0% \((\d+)/", log) if int(m) > 0])
        return full, ist

    def query_sync(self, sql: str, db: str | None = None, timeout: float = 30.0) -> list[tuple[str | None, ...]]:
        """query() on this node after every write the cluster committed before it (wsrep_sync_wait)."""
        return self.query("SET SESSION wsrep_sync_wait = 1;\n" + sql, db=db, timeout=timeout)


class GaleraCluster:
    """n GaleraNodes on loopback. start() bootstraps node 1 and joins the others one by one."""

    def __init__(self, n: int = 3, name: str = "hg", args: Iterable[str] = (), buffer_pool: str = "64M") -> None:
        """n nodes; `args` are more mariadbd options for each (after the harness's own)."""
        self.name = name
        self.nodes: list[GaleraNode] = []
        for i in range(n):
            self.nodes.append(GaleraNode(self, i, args, buffer_pool))

    def start(self) -> "GaleraCluster":
        try:
            self.nodes[0].bootstrap = True
            self.nodes[0].start()
            for n in self.nodes[1:]:
                n.start()
            self.wait_size(len(self.nodes))
        except BaseException:
            self.close()
            raise
        return self

    def hosts(self, order: list[int] | None = None) -> str:
        """The [mysql] hosts value: every node's host:port, in `order` (node indexes) if given."""
        order = order if order is not None else list(range(len(self.nodes)))
        return ",".join(f"{HOST}:{self.nodes[i].port}" for i in order)

    def running(self) -> list[GaleraNode]:
        return [n for n in self.nodes if n.running]

    def any_synced(self) -> GaleraNode:
        for n in self.nodes:
            if n.running and n.synced():
                return n
        raise HarnessError("no Galera node is running and Synced")

    def size(self) -> int:
        return int(self.any_synced().status("wsrep_cluster_size").get("wsrep_cluster_size", "0"))

    def wait_size(self, n: int, timeout: float = 60.0) -> None:
        wait_until(lambda: self.size() == n, timeout, 0.2, f"a Galera cluster of {n} nodes")

    def stop_all(self) -> None:
        """Stop every node cleanly, one after another (the last one stopped has the newest state)."""
        for n in self.nodes:
            if n.running:
                n.stop()

    def bootstrap(self) -> GaleraNode:
        """Start a stopped cluster again: the node with the highest seqno bootstraps (marked safe
        to), then the others join. Returns the bootstrapping node."""
        if self.running():
            raise HarnessError("bootstrap() needs every node stopped")
        first = max(self.nodes, key=lambda n: n.seqno())
        first.mark_safe_to_bootstrap()
        first.bootstrap = True
        first.start()
        for n in self.nodes:
            if n is not first:
                n.start()
        self.wait_size(len(self.nodes))
        return first

    def create_database(self, name: str) -> str:
        """The database, the hourglass user and the schema, made through a Synced node (DDL and
        grants replicate)."""
        return self.any_synced().create_database(name)

    def close(self, check: bool = True) -> None:
        for n in reversed(self.nodes):
            n.close(check)

    def __repr__(self) -> str:
        return f"<GaleraCluster {' '.join(f'{n.name}:{n.port}' for n in self.nodes)}>"


class _LiveNode:
    """Stands where a Namespace expects its MariaDBServer: every call goes to a Synced node of
    the cluster (whichever is alive), reading after the cluster's last commit."""

    def __init__(self, cluster: GaleraCluster) -> None:
        self.cluster = cluster

    def query(self, sql: str, db: str | None = None, **kw: Any) -> list[tuple[str | None, ...]]:
        return self.cluster.any_synced().query_sync(sql, db=db, **kw)

    def execute(self, sql: str, db: str | None = None, **kw: Any) -> str:
        return self.cluster.any_synced().execute(sql, db=db, **kw)

    @property
    def port(self) -> int:
        return self.cluster.any_synced().port


class GaleraStack(Stack):
    """A Redis and a GaleraCluster, in the shape of harness.Stack: fresh_namespace() makes a
    database on the cluster, and a daemon on the namespace lists every node in [mysql] hosts
    (node 1 first). Queries of the namespace go to a Synced node, after the cluster's last commit."""

    def __init__(self, redis: RedisServer, cluster: GaleraCluster) -> None:
        self.cluster = cluster
        super().__init__(redis, _LiveNode(cluster))  # type: ignore[arg-type]

    @classmethod
    def start_galera(cls, nodes: int = 3) -> "GaleraStack":  # type: ignore[override]
        stack = cls(RedisServer(), GaleraCluster(nodes))
        try:
            stack.redis.start()
            stack.cluster.start()
        except BaseException:
            stack.close(check=False)
            raise
        return stack

    def _sql_servers(self) -> "GaleraCluster":
        return self.cluster


class GaleraNamespace(Namespace):
    """A Namespace whose daemons name every node of the cluster in [mysql] hosts."""

    def config(self) -> dict[str, dict[str, Any]]:
        cfg = super().config()
        cfg["mysql"]["hosts"] = self.stack.cluster.hosts()  # type: ignore[attr-defined]
        return cfg


GaleraStack.namespace_class = GaleraNamespace


# --------------------------------------------------------------------------- faults (faults.py)


def galera_fleet(stack: GaleraStack, orders: dict[str, list[int]] | None = None) -> Fleet:
    """Instances A and B on a fresh namespace of `stack`, every node in [mysql] hosts: in the
    order orders[name] gives (node indexes), else node 1 first. Both ready."""
    each = {n: {"mysql": {"hosts": stack.cluster.hosts(o)}} for n, o in (orders or {}).items()}
    return Fleet(stack.fresh_namespace(), {}).launch(("A", "B"), 30, each=each)


def nodes_agree(cluster: GaleraCluster, database: str, fleet_rows: list[tuple[str, str, int | None]]) -> list[Violation]:
    """Every running node holds the rows the namespace's query found (id and state), read after
    the cluster's last commit: nothing acknowledged is missing from a surviving node."""
    want = sorted((jid, state) for jid, state, _ in fleet_rows)
    out = []
    for n in cluster.running():
        got = sorted((r[0], r[1]) for r in n.query_sync("SELECT id, state FROM message", db=database, timeout=60))
        if got != want:
            missing = sorted(set(want) - set(got))[:5]
            extra = sorted(set(got) - set(want))[:5]
            out.append(Violation("final_state", f"{n.name} holds {len(got)} rows, the namespace {len(want)}: "
                                                f"missing {missing}, different {extra}"))
    return out


def first_push_after(rec: Recorder, t: float) -> float | None:
    """Seconds from t until a push sent after t was answered 200 (None: none was)."""
    done = [op.t1 for op in rec.snapshot() if op.kind == "push" and op.status == 200 and op.t0 >= t]
    return min(done) - t if done else None


class GaleraNodeKill(Kill):
    """kill -9 the node the instances write to (node 1: first in their [mysql] hosts) mid-traffic;
    after `down_s` start it again: it rejoins by IST while the traffic goes on. Pushes must
    resume within RESUME_S of the kill (on the next node), every connection of both instances
    must end on one surviving node, and every node must hold every row at the end."""

    bound_s = 10.0
    RESUME_S = 10.0

    def __init__(self, stack: GaleraStack, down_s: float = 3.0) -> None:
        self.stack = stack
        self.what = "the Galera node in use"
        super().__init__(down_s)
        self.transfers_before = (0, 0)
        self.committed_at_kill = self.committed_at_start = 0
        self.rejoin: threading.Thread | None = None

    def process(self, fleet: Fleet) -> GaleraNode:
        return self.stack.cluster.nodes[0]

    def inject(self, fleet: Fleet) -> None:
        self.transfers_before = self.stack.cluster.nodes[0].state_transfers()
        super().inject(fleet)
        self.committed_at_kill = self.survivor_committed()

    def survivor_committed(self) -> int:
        """The cluster's last committed write set, as node 2 (alive throughout) has it."""
        return int(self.stack.cluster.nodes[1].status("wsrep_last_committed").get("wsrep_last_committed", -1))

    def heal(self, fleet: Fleet) -> None:
        """Start the node and let it rejoin in the background, as the traffic goes on: the
        instances' recovery is not held up by the node's (crash recovery, then IST)."""
        self.committed_at_start = self.survivor_committed()
        self.rejoin = threading.Thread(target=self._rejoin, name="galera-rejoin", daemon=True)
        self.rejoin.start()

    def _rejoin(self) -> None:
        t0 = time.monotonic()
        try:
            self.victim.start()
            self.notes.append(f"{self.victim.name} Synced again {time.monotonic() - t0:.1f} s after its start")
        except BaseException as e:  # noqa: BLE001 - reported by verify
            self.extra.append(Violation("recovery", f"{self.victim.name} did not rejoin: {e}"))

    def cleanup(self, fleet: Fleet) -> None:
        if self.rejoin is not None:
            self.rejoin.join(200)
        super().cleanup(fleet)

    def verify(self, fleet: Fleet, rec: Recorder, window: Window) -> list[Violation]:
        out = list(self.extra)
        resumed = first_push_after(rec, window.inject)
        self.notes.append(f"pushes resumed {resumed if resumed is None else round(resumed, 1)} s after the kill")
        if resumed is None or resumed > self.RESUME_S:
            out.append(Violation("unavailable", f"no push answered 200 within {self.RESUME_S:g} s of the kill "
                                                f"(first after {resumed} s)"))
        node = self.stack.cluster.nodes[0]
        (full0, ist0), (full1, ist1) = self.transfers_before, node.state_transfers()
        # IST carries what the cluster committed while the node was away: when the instances
        # wrote nothing in that time (their writes may stall until the cluster evicts the dead
        # node, as long as it is down), the node rejoins with no transfer at all; either way
        # never a full one, and at most one IST
        written = self.committed_at_start - self.committed_at_kill
        self.notes.append(f"{written} write sets committed while {node.name} was down")
        if full1 != full0 or ist1 - ist0 > 1 or (written > 0 and ist1 != ist0 + 1):
            out.append(Violation("recovery", f"{node.name} did not rejoin by one IST alone: {full1 - full0} full "
                                             f"state transfers, {ist1 - ist0} ISTs ({written} write sets "
                                             f"committed while it was down)"))
        used = {n.name: n.connections(fleet.namespace.database) for n in self.stack.cluster.nodes}
        self.notes.append(f"connections per node at the end {used}")
        if used["node1"] != 0 or sorted(used.values())[1] != 0:
            out.append(Violation("recovery", f"the instances' connections are not all on one surviving node: {used}"))
        out += nodes_agree(self.stack.cluster, fleet.namespace.database, final_rows(fleet.namespace))
        return out


class TwoWriters(Fault):
    """No fault: the two instances list the nodes in different orders, so they write through two
    nodes at once and Galera certifies their writes against each other (a conflict fails a
    COMMIT with a deadlock, which the journal writes again). Nothing may be refused, lost or
    doubled; each instance's connections stay on its own first node."""

    strict = True
    bound_s = 0.0

    def __init__(self, stack: GaleraStack, hold_s: float = 5.0) -> None:
        super().__init__()
        self.stack = stack
        self.hold_s = hold_s
        self.name = f"two instances writing through two Galera nodes for {hold_s:g} s"
        self.used: dict[str, int] = {}

    def inject(self, fleet: Fleet) -> None:
        pass

    def hold(self, fleet: Fleet, rec: Recorder) -> None:
        time.sleep(self.hold_s / 2)
        self.used = {n.name: n.connections(fleet.namespace.database) for n in self.stack.cluster.nodes}
        time.sleep(self.hold_s / 2)

    def heal(self, fleet: Fleet) -> None:
        pass

    def verify(self, fleet: Fleet, rec: Recorder, window: Window) -> list[Violation]:
        out = list(self.extra)
        retries = sum(d.log().count("rolled this cycle back on a lock") for d in fleet.instances.values())
        self.notes.append(f"connections per node {self.used}; journal cycles written again after a conflict: "
                          f"{retries}")
        if not (self.used.get("node1") and self.used.get("node2")) or self.used.get("node3"):
            out.append(Violation("recovery", f"expected connections on node1 (A) and node2 (B) alone: {self.used}"))
        out += nodes_agree(self.stack.cluster, fleet.namespace.database, final_rows(fleet.namespace))
        return out


class GaleraFullRestart(Fault):
    """Every node stopped (the instances get 503 for pushes meanwhile), the cluster bootstrapped
    again from the node with the newest state; then — so that the record alone must carry the
    jobs — the namespace's Redis data lost (the heal); the runbook's /reStore."""

    bound_s = 12.0
    needs_restore = True

    def __init__(self, stack: GaleraStack, down_s: float = 2.0) -> None:
        super().__init__()
        self.stack = stack
        self.hold_s = down_s
        self.name = f"every Galera node stopped for {down_s:g} s, bootstrapped again, Redis lost; /reStore"

    def inject(self, fleet: Fleet) -> None:
        self.stack.cluster.stop_all()

    def hold(self, fleet: Fleet, rec: Recorder) -> None:
        """Down for hold_s, then bootstrapped: the fault lasts until the cluster is back (its
        bootstrap's seconds are not the daemon's to recover in)."""
        time.sleep(self.hold_s)
        t0 = time.monotonic()
        first = self.stack.cluster.bootstrap()
        self.notes.append(f"bootstrapped from {first.name} in {time.monotonic() - t0:.1f} s")

    def heal(self, fleet: Fleet) -> None:
        n = self.lost_redis_writes(fleet.namespace.flush_redis)
        self.notes.append(f"{n} Redis keys dropped")
        # the runbook: the operator sees the loss named by /health, then runs /reStore (a loss
        # an instance notices only after the restore stays named until the next one)
        for name, d in fleet.instances.items():
            wait_until(lambda: d.health(timeout=5).json().get("redisLoss"), 10, 0.1, f"{name} to name the loss")

    def cleanup(self, fleet: Fleet) -> None:
        if not self.stack.cluster.running():
            self.stack.cluster.bootstrap()

    def verify(self, fleet: Fleet, rec: Recorder, window: Window) -> list[Violation]:
        return list(self.extra) + nodes_agree(self.stack.cluster, fleet.namespace.database,
                                              final_rows(fleet.namespace))
