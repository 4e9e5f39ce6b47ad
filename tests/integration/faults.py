"""Faults of a real fleet (issue 31): each fault a context object with prepare/inject/hold/heal,
its recovery bound and what it may cost; the fleets they act on; run_fault(), which runs the
history workload (history.py) before, during and after one fault and judges the run.

Not a test module: tests/integration/test_fault_suite.py runs each fault once, tests/soak.py
runs them at random.

Fleets (every server a real process on free loopback ports in temporary directories):
* SingleServers — one Redis master with a replica, and MariaDB; both Redis and MariaDB listen on
  127.0.0.1 and 127.0.0.2 (harness.ALT_HOST). Instance A reaches them through 127.0.0.2, B
  through 127.0.0.1, so iptables can cut or thin A's links alone. MariaDB's directory is on a
  tmpfs the class mounts (for the disk-full fault) when `mount` is permitted.
* a harness/rcluster.py RedisCluster (3 masters + 3 replicas) and the shared MariaDB, instances
  with `[redis] cluster = true` (for the seed fault: `address` = that one node).

Faults and how they are made (hold = how long the fault lasts, bound = how long after the heal
503s may still come):
* InstanceKill       kill -9 an hourglassd, start it again (same config and state_dir)
* InstancePause      SIGSTOP an hourglassd longer than a job's lease (ttr), then SIGCONT
* InstancePauseLease the same past the worker-number lease (10 s), while a third instance
                     configured with the paused one's number takes it over
* ClockSkew          restart an instance under libfaketime (FAKETIME=+5s / -5s), later without
* RedisSnapshot      SAVE, more traffic, kill -9 Redis, start it from that older snapshot;
                     the runbook's /reStore
* RedisReplicaKill   kill -9 the replica, start it again (nothing may notice)
* RedisPause         SIGSTOP Redis longer than ttr and the worker lease, then SIGCONT
* MariaDBKill        kill -9 MariaDB, start it again (crash recovery)
* DiskFull           fill MariaDB's tmpfs to the last byte, then free it
* LinkFault          iptables on the OUTPUT chain: DROP (partition) or drop 30 % at random
                     (lossy link) of the packets between instance A and Redis or MariaDB, both
                     ways (127.0.0.2:<port>); each rule tagged hg-test-<pid>-<n>, removed at the
                     heal, at exit, and by the next run if this one was SIGKILLed
* ClusterMasterKill  kill -9 a cluster master (its replica takes over), start it again (it
                     rejoins as a replica); /reStore
* ClusterReplicaKill kill -9 a cluster replica, start it again (nothing may notice)
* ClusterSeedLost    instances know the cluster by one seed, a master, killed for good; /reStore

iptables and mount need root (the tests run as root here and in CI): when either is refused,
the fault that needs it fails with a message saying so; it is not skipped.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

import harness
from harness import (ALT_HOST, HOST, Daemon, HarnessError, Namespace, RedisServer, Stack, daemon_binary,
                     journal_idle, shared_stack, skewed, wait_until)
from history import Recorder, Spec, Verdict, Violation, Window, Workload, check, final_rows, save

__all__ = ["FaultError", "Netfilter", "Tmpfs", "Fleet", "SingleServers", "cluster_fleet", "Fault", "Kill",
           "Pause", "InstanceKill", "InstancePause", "InstancePauseLease", "ClockSkew", "RedisSnapshot",
           "RedisReplicaKill", "RedisPause", "MariaDBKill", "DiskFull", "LinkFault", "ClusterMasterKill",
           "ClusterReplicaKill", "ClusterSeedLost", "run_fault", "Run"]


class FaultError(HarnessError):
    """A fault could not be injected (iptables or mount refused, a tool missing)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# --------------------------------------------------------------------------- iptables

_TAG = "hg-test"
_TAG_RX = re.compile(rf"--comment \"?{_TAG}-(\d+)-\d+\"?")


def _iptables(*args: str) -> subprocess.CompletedProcess:
    try:
        exe = harness._which("iptables")
    except HarnessError as e:
        raise FaultError(f"{e} (Debian's iptables package)") from None
    return subprocess.run([exe, "-w", *args], capture_output=True, text=True, timeout=30)


def sweep_stale_rules() -> None:
    """Remove OUTPUT rules tagged by test processes that are gone (SIGKILLed before cleanup)."""
    try:
        r = _iptables("-S", "OUTPUT")
    except (FaultError, OSError, subprocess.TimeoutExpired):
        return
    if r.returncode != 0:
        return
    for line in r.stdout.splitlines():
        m = _TAG_RX.search(line)
        if m and line.startswith("-A OUTPUT ") and not _pid_alive(int(m.group(1))):
            _iptables("-D", *shlex.split(line)[1:])


class Netfilter:
    """iptables rules of this test process on the OUTPUT chain (every loopback packet passes
    it, both ways), each tagged `hg-test-<pid>-<n>` (-m comment). remove() / clear() take them
    out; so does close(), which harness's exit hook calls (also after SIGTERM/SIGHUP, turned
    into KeyboardInterrupt by the harness). Raises FaultError when iptables is refused."""

    _count = 0

    def __init__(self) -> None:
        sweep_stale_rules()
        r = _iptables("-S", "OUTPUT")
        if r.returncode != 0:
            raise FaultError(f"iptables is not permitted here (the fault suite needs root and the "
                             f"iptables filter table): iptables -S OUTPUT: {(r.stderr or r.stdout).strip()}")
        self.rules: list[list[str]] = []
        self._closed = False
        harness._register(self)

    def add(self, spec: list[str]) -> list[str]:
        Netfilter._count += 1
        rule = spec + ["-m", "comment", "--comment", f"{_TAG}-{os.getpid()}-{Netfilter._count}", "-j", "DROP"]
        r = _iptables("-A", "OUTPUT", *rule)
        if r.returncode != 0:
            raise FaultError(f"iptables -A OUTPUT {' '.join(rule)} was refused: {(r.stderr or r.stdout).strip()}")
        self.rules.append(rule)
        return rule

    def drop_link(self, host: str, port: int, probability: float | None = None) -> None:
        """Drop TCP packets to host:port and from it (all of them, or at random with
        `probability`)."""
        rnd = [] if probability is None else ["-m", "statistic", "--mode", "random",
                                              "--probability", f"{probability:g}"]
        self.add(["-p", "tcp", "-d", host, "--dport", str(port), *rnd])
        self.add(["-p", "tcp", "-s", host, "--sport", str(port), *rnd])

    def remove(self, rule: list[str]) -> None:
        r = _iptables("-D", "OUTPUT", *rule)
        if r.returncode != 0 and "does a matching rule exist" not in r.stderr.lower() \
                and "bad rule" not in r.stderr.lower():
            raise FaultError(f"iptables -D OUTPUT {' '.join(rule)}: {(r.stderr or r.stdout).strip()}")
        with contextlib.suppress(ValueError):
            self.rules.remove(rule)

    def clear(self) -> None:
        for rule in list(self.rules):
            self.remove(rule)

    def close(self, check: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        harness._unregister(self)
        self.clear()


# --------------------------------------------------------------------------- tmpfs

_TMPFS_PREFIX = "hg-tmpfs-"


def sweep_stale_mounts() -> None:
    """Unmount the tmpfs of test processes that are gone (SIGKILLed before cleanup)."""
    try:
        with open("/proc/mounts") as f:
            mounts = [line.split()[1] for line in f if line.split()[0] == "tmpfs"]
    except OSError:
        return
    base = os.path.realpath(os.environ.get("TMPDIR") or "/tmp")
    for mp in mounts:
        if os.path.dirname(mp) != base or not os.path.basename(mp).startswith(_TMPFS_PREFIX):
            continue
        try:
            with open(os.path.join(mp, harness._OWNER)) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            pid = 0
        if pid and _pid_alive(pid):
            continue
        subprocess.run(["umount", "-l", mp], capture_output=True, timeout=30)
        with contextlib.suppress(OSError):
            os.rmdir(mp)


class Tmpfs:
    """A tmpfs of `size_mb` MiB mounted on a temporary directory (`dir`), unmounted and removed
    by close() (harness's exit hook too; HG_KEEP cannot keep what it held). fill() takes its last byte, free() gives it back.
    Raises FaultError when mount is refused."""

    def __init__(self, size_mb: int) -> None:
        sweep_stale_mounts()
        self.dir = harness._make_dir("tmpfs")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", self.dir],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            harness._remove_dir(self.dir)
            raise FaultError(f"mount -t tmpfs is not permitted here (the disk-full fault needs root): "
                             f"{(r.stderr or r.stdout).strip()}")
        with open(os.path.join(self.dir, harness._OWNER), "w") as f:
            f.write(str(os.getpid()))
        self.filler = os.path.join(self.dir, "filler")
        self._closed = False
        harness._register(self)

    def free_bytes(self) -> int:
        st = os.statvfs(self.dir)
        return st.f_bavail * st.f_frsize

    def fill(self) -> int:
        """Write a file until the tmpfs is full; the bytes written."""
        n = 0
        with open(self.filler, "ab", buffering=0) as f:
            for chunk in (1 << 20, 1 << 12, 1):
                block = b"\0" * chunk
                while True:
                    try:
                        f.write(block)
                        n += chunk
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
        return n

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.filler)

    def close(self, check: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        harness._unregister(self)
        r = subprocess.run(["umount", self.dir], capture_output=True, timeout=30)
        if r.returncode != 0:
            subprocess.run(["umount", "-l", self.dir], capture_output=True, timeout=30)
        # what it held went with it (HG_KEEP cannot keep it): the mount point goes too
        shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------- fleets


class Fleet:
    """What one fault run acts on: the instances by name (A, B, sometimes C) on one namespace,
    and the servers. `alt` names the instance that reaches Redis and MySQL through ALT_HOST."""

    def __init__(self, namespace: Namespace, instances: dict[str, Daemon], servers: "SingleServers | None" = None,
                 cluster: Any = None, alt: str | None = None) -> None:
        self.namespace = namespace
        self.instances = instances
        self.servers = servers
        self.cluster = cluster
        self.alt = alt

    @property
    def redis(self) -> RedisServer:
        return self.servers.stack.redis

    @property
    def mariadb(self) -> harness.MariaDBServer:
        return self.namespace.mariadb

    def instance(self, name: str, overrides: dict | None = None, alt: bool = False) -> Daemon:
        """A new instance on the fleet's namespace (through ALT_HOST when alt), named and started."""
        over = {"instance": {"id": f"fault-{name}"}}
        if self.cluster is None and alt:
            over["redis"] = {"address": f"{ALT_HOST}:{self.namespace.redis.port}"}
            over["mysql"] = {"host": ALT_HOST}
        elif self.cluster is not None:
            over["redis"] = {"cluster": True, "address": ",".join(self.cluster.seeds()), "db": 0}
        d = Daemon(namespace=self.namespace, overrides=over)
        if overrides:
            d.update_config(overrides)
        self.instances[name] = d
        d.start()
        return d

    def launch(self, names: tuple[str, ...], timeout: float, overrides: dict | None = None,
               each: dict[str, dict] | None = None) -> "Fleet":
        """Start instances `names` (the one named `alt` through ALT_HOST) and wait until every
        one is ready; on failure close them all. each[name], when given, replaces `overrides`
        for that instance."""
        try:
            for n in names:
                self.instance(n, overrides=(each or {}).get(n, overrides), alt=n == self.alt)
            if self.wait_ready(timeout) is None:
                raise HarnessError("the fleet's instances never became ready:\n" +
                                   "\n".join(f"{n}: {d.log_tail(15)}" for n, d in self.instances.items()))
        except BaseException:
            self.close(check=False)
            raise
        return self

    def ready(self, name: str) -> bool:
        d = self.instances[name]
        try:
            return d.running and d.ready()
        except (OSError, ValueError, http.client.HTTPException):
            return False

    def wait_ready(self, timeout: float) -> float | None:
        """Seconds until every instance is ready (/health 200 with a workerId); None if not in time."""
        t0 = time.monotonic()
        try:
            wait_until(lambda: all(self.ready(n) for n in self.instances), timeout, 0.05, "every instance ready")
        except TimeoutError:
            return None
        return time.monotonic() - t0

    def close(self, check: bool = True) -> None:
        """Stop every instance, side by side (each takes a second or two to drain)."""
        errors: list[BaseException] = []

        def close_one(d: Daemon) -> None:
            try:
                d.close(check)
            except BaseException as e:  # noqa: BLE001 - raised below, after the others
                errors.append(e)
        threads = [threading.Thread(target=close_one, args=(d,)) for d in self.instances.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]


class SingleServers:
    """One Redis master (non-persistent: a restart loads only a snapshot SAVEd by hand) with one
    replica, and MariaDB; Redis and MariaDB on HOST and ALT_HOST. MariaDB's directory is on a
    tmpfs of tmpfs_mb when mount is permitted (else on disk, `tmpfs_error` saying why, and
    DiskFull fails with it). For a test class: start once, fleet() per test."""

    def __init__(self, tmpfs_mb: int = 320) -> None:
        self.tmpfs: Tmpfs | None = None
        self.tmpfs_error = ""
        self.replica: RedisServer | None = None
        try:
            self.tmpfs = Tmpfs(tmpfs_mb)
        except FaultError as e:
            self.tmpfs_error = str(e)
        try:
            binds = (HOST, ALT_HOST)
            self.stack = Stack.start(
                redis_kw={"binds": binds, "args": ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]},
                mariadb_kw={"binds": binds, "dir": self.tmpfs.dir if self.tmpfs else None})
            self.replica = RedisServer(args=["--replicaof", HOST, str(self.stack.redis.port)])
            self.replica.start()
            self.wait_replica()
        except BaseException:
            self.close()
            raise

    def wait_replica(self, timeout: float = 20.0) -> None:
        wait_until(lambda: "master_link_status:up" in self.replica.cli("INFO", "replication"), timeout, 0.1,
                   "the replica to sync with the master")

    def fleet(self) -> Fleet:
        """A fresh namespace and instances A (through ALT_HOST) and B, both ready."""
        return Fleet(self.stack.fresh_namespace(), {}, servers=self, alt="A").launch(("A", "B"), 20)

    def close(self, check: bool = True) -> None:
        try:
            if self.replica is not None:
                self.replica.close()
            if getattr(self, "stack", None) is not None:
                self.stack.close()
        finally:
            if self.tmpfs is not None:
                self.tmpfs.close()


def cluster_fleet(cluster: Any, seed: str | None = None) -> Fleet:
    """Instances A and B on `cluster` (`address` = seed alone when given, else every node),
    a fresh namespace of the shared stack's MariaDB."""
    return Fleet(shared_stack().fresh_namespace(), {}, cluster=cluster).launch(
        ("A", "B"), 30, {"redis": {"address": seed}} if seed else None)


# --------------------------------------------------------------------------- faults


class Fault:
    """One fault. inject() starts it, hold() lets it last (`hold_s`), heal() ends it; 503s are
    allowed from inject until heal + `bound_s`, only on `target` when set (the other instances
    are bystanders; `strict`: every instance is). `losses` collects the spans within which Redis
    lost acknowledged writes (lost_redis_writes); `needs_restore`: the runbook's /reStore follows
    the heal."""

    name = "fault"
    hold_s = 2.0
    bound_s = 8.0
    needs_restore = False
    strict = False

    def __init__(self, target: str | None = None) -> None:
        self.target = target
        self.losses: list[tuple[float, float]] = []
        self.notes: list[str] = []
        self.extra: list[Violation] = []

    def lost_redis_writes(self, lose: Callable[[], Any]) -> Any:
        """Run `lose` (what makes Redis lose acknowledged writes) and note the span it took: the
        loss is somewhere inside it (a request the daemon ran while `lose` was still starting
        ran before it). Returns what `lose` returned."""
        start = time.monotonic()
        try:
            return lose()
        finally:
            self.losses.append((start, time.monotonic()))

    def prepare(self, fleet: Fleet) -> None:
        """Before the workload starts: check the fault can be made (raise FaultError if not)."""

    def process(self, fleet: Fleet) -> Any:
        """The process the fault acts on (Kill, Pause): by default the target instance."""
        return fleet.instances[self.target]

    def inject(self, fleet: Fleet) -> None:
        raise NotImplementedError

    def hold(self, fleet: Fleet, rec: Recorder) -> None:
        time.sleep(self.hold_s)

    def heal(self, fleet: Fleet) -> None:
        raise NotImplementedError

    def cleanup(self, fleet: Fleet) -> None:
        """After the run whatever happened: leave nothing broken (a paused process, a rule)."""

    def verify(self, fleet: Fleet, rec: Recorder, window: Window) -> list[Violation]:
        """Checks of this fault's own, besides history.check()."""
        return list(self.extra)

    def bystanders(self, fleet: Fleet) -> list[str]:
        if self.strict:
            return list(fleet.instances)
        return [n for n in fleet.instances if self.target and n != self.target]

    def __repr__(self) -> str:
        return f"<{self.name}>"


class Kill(Fault):
    """kill -9 a process (process() picks it), start it again after `hold_s`, its config and
    data kept."""

    what = ""   # default: "instance <target>"

    def __init__(self, down_s: float = 2.0, target: str | None = None) -> None:
        super().__init__(target)
        self.hold_s = down_s
        self.name = f"kill -9 {self.what or f'instance {target}'}, restart after {down_s:g} s"
        self.victim: Any = None

    def inject(self, fleet: Fleet) -> None:
        self.victim = self.process(fleet)
        self.victim.kill()

    def heal(self, fleet: Fleet) -> None:
        self.victim.start()

    def cleanup(self, fleet: Fleet) -> None:
        if self.victim is not None and not self.victim.running:
            self.victim.start()


class Pause(Fault):
    """SIGSTOP a process (process() picks it) for `hold_s`, then SIGCONT."""

    what = ""   # default: "instance <target>"
    why = ""

    def __init__(self, hold_s: float, target: str | None = None) -> None:
        super().__init__(target)
        self.hold_s = hold_s
        self.name = f"SIGSTOP {self.what or f'instance {target}'} for {hold_s:g} s{self.why}"

    def inject(self, fleet: Fleet) -> None:
        self.process(fleet).pause()

    def heal(self, fleet: Fleet) -> None:
        self.process(fleet).resume()

    def cleanup(self, fleet: Fleet) -> None:
        self.process(fleet).resume()


class InstanceKill(Kill):
    bound_s = 8.0

    def __init__(self, target: str = "A", down_s: float = 2.0) -> None:
        super().__init__(down_s, target)


class InstancePause(Pause):
    bound_s = 6.0
    why = " (> ttr)"

    def __init__(self, target: str = "A", hold_s: float = 6.0) -> None:
        super().__init__(hold_s, target)


class InstancePauseLease(InstancePause):
    """Paused past its worker-number lease (10 s), while a third instance C, configured with
    the paused one's number (`[instance] worker_id`), takes the number over and serves the
    workload. After SIGCONT the paused instance must not issue ids under that number."""

    def __init__(self, target: str = "A", hold_s: float = 13.0) -> None:
        super().__init__(target, hold_s)
        self.name = f"SIGSTOP instance {target} for {hold_s:g} s (> worker lease), C takes its number"
        self.worker = -1
        self.taken_ms = 0

    def prepare(self, fleet: Fleet) -> None:
        self.worker = fleet.instances[self.target].health().json()["workerId"]

    def hold(self, fleet: Fleet, rec: Recorder) -> None:
        t_end = time.monotonic() + self.hold_s
        c = fleet.instance("C", overrides={"instance": {"worker_id": self.worker}})

        def holds() -> bool:
            r = c.health(timeout=5)
            return r.status == 200 and r.json().get("workerId") == self.worker
        try:
            wait_until(holds, max(1.0, t_end - time.monotonic() + 3), 0.1,
                       f"C to take worker number {self.worker}")
        except TimeoutError:
            self.extra.append(Violation("recovery", f"C never held worker number {self.worker} during the "
                                                    f"{self.hold_s:g} s pause of {self.target}: {c.health().text[:300]}"))
        self.taken_ms = harness.now_ms()
        self.notes.append(f"C holds worker {self.worker} {self.hold_s - (t_end - time.monotonic()):.1f} s into the pause")
        rec.add_instance("C", c)
        time.sleep(max(0.0, t_end - time.monotonic()))

    def verify(self, fleet: Fleet, rec: Recorder, window: Window) -> list[Violation]:
        out = super().verify(fleet, rec, window)
        if not self.taken_ms:
            return out
        for op in rec.snapshot():
            if op.kind == "push" and op.inst == self.target and op.status == 200 and op.t0 > window.heal:
                jid = int(op.id)
                worker, ms = (jid >> 12) & 0x3FF, (jid >> 22) + 1704067200000
                if worker == self.worker and ms >= self.taken_ms:
                    out.append(Violation("unique", f"{self.target} issued id {op.id} under worker number "
                                                   f"{worker}, which C holds since {self.taken_ms}"))
        h = fleet.instances[self.target].health().json()
        if h.get("workerId") == self.worker:
            out.append(Violation("unique", f"{self.target} still says it holds worker number {self.worker}, "
                                           f"which C took over: {h}"))
        return out


class ClockSkew(Fault):
    bound_s = 8.0

    def __init__(self, target: str = "A", skew_ms: int = 5000, hold_s: float = 6.0) -> None:
        super().__init__(target)
        self.skew_ms = skew_ms
        self.hold_s = hold_s
        self.name = f"clock of instance {target} {skew_ms / 1000:+g} s for {hold_s:g} s"

    def prepare(self, fleet: Fleet) -> None:
        if not os.path.exists(harness.FAKETIME_LIB):
            raise FaultError(f"{harness.FAKETIME_LIB} not found: install Debian's libfaketime")

    def inject(self, fleet: Fleet) -> None:
        d = fleet.instances[self.target]
        d.stop()
        skewed(d, self.skew_ms)
        d.start()

    def hold(self, fleet: Fleet, rec: Recorder) -> None:
        t_end = time.monotonic() + self.hold_s
        d = fleet.instances[self.target]
        offset = None

        def measured() -> bool:
            nonlocal offset
            r = d.health(timeout=5)
            offset = r.json().get("clockOffsetMs") if r.status in (200, 503) and r.body else None
            return offset is not None
        with contextlib.suppress(TimeoutError):
            wait_until(measured, max(0.5, t_end - time.monotonic()), 0.1, "clockOffsetMs")
        if offset is None or abs(offset - self.skew_ms) > 500:
            self.extra.append(Violation("recovery", f"{self.target}'s /health clockOffsetMs is {offset} under a "
                                                    f"{self.skew_ms:+d} ms skew"))
        time.sleep(max(0.0, t_end - time.monotonic()))

    def heal(self, fleet: Fleet) -> None:
        d = fleet.instances[self.target]
        d.stop()
        skewed(d, 0)
        d.start()

    def cleanup(self, fleet: Fleet) -> None:
        skewed(fleet.instances[self.target], 0)


class RedisSnapshot(Fault):
    """SAVE, `lead_s` more traffic, kill -9 Redis, `down_s` later start it: it loads the
    snapshot, older than what the instances wrote (rolled back). The runbook: /reStore."""

    bound_s = 12.0
    needs_restore = True

    def __init__(self, lead_s: float = 1.5, down_s: float = 1.0) -> None:
        super().__init__()
        self.lead_s = lead_s
        self.hold_s = down_s
        self.name = f"kill -9 Redis, restart from a snapshot {lead_s:g} s old"

    def inject(self, fleet: Fleet) -> None:
        fleet.redis.cli("SAVE", timeout=30)
        time.sleep(self.lead_s)
        self.lost_redis_writes(fleet.redis.kill)

    def heal(self, fleet: Fleet) -> None:
        fleet.redis.start()

    def cleanup(self, fleet: Fleet) -> None:
        if not fleet.redis.running:
            fleet.redis.start()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(fleet.redis.dir, "dump.rdb"))
        fleet.servers.wait_replica()


class RedisReplicaKill(Kill):
    bound_s = 0.0
    strict = True
    what = "the Redis replica"

    def process(self, fleet: Fleet) -> RedisServer:
        return fleet.servers.replica

    def cleanup(self, fleet: Fleet) -> None:
        super().cleanup(fleet)
        fleet.servers.wait_replica()


class RedisPause(Pause):
    bound_s = 8.0
    what = "Redis"
    why = " (> ttr, > worker lease)"

    def __init__(self, hold_s: float = 12.0) -> None:
        super().__init__(hold_s)

    def process(self, fleet: Fleet) -> RedisServer:
        return fleet.redis


class MariaDBKill(Kill):
    bound_s = 10.0
    what = "MariaDB"

    def process(self, fleet: Fleet) -> harness.MariaDBServer:
        return fleet.mariadb


class DiskFull(Fault):
    bound_s = 5.0

    def __init__(self, hold_s: float = 5.0) -> None:
        super().__init__()
        self.hold_s = hold_s
        self.name = f"MariaDB's disk full for {hold_s:g} s"

    def prepare(self, fleet: Fleet) -> None:
        if fleet.servers is None or fleet.servers.tmpfs is None:
            raise FaultError("MariaDB's directory is not on a tmpfs of the test's: "
                             + (fleet.servers.tmpfs_error if fleet.servers else "no single-Redis fleet"))

    def inject(self, fleet: Fleet) -> None:
        n = fleet.servers.tmpfs.fill()
        self.notes.append(f"filled {n / 1e6:.0f} MB")

    def heal(self, fleet: Fleet) -> None:
        fleet.servers.tmpfs.free()

    def cleanup(self, fleet: Fleet) -> None:
        if fleet.servers and fleet.servers.tmpfs:
            fleet.servers.tmpfs.free()


class LinkFault(Fault):
    """Instance A's link to Redis or to MariaDB (it reaches both through ALT_HOST) cut
    (partition) or thinned (lossy: each packet dropped with probability `loss`), both ways."""

    def __init__(self, server: str = "redis", lossy: bool = False, hold_s: float = 5.0, loss: float = 0.3,
                 target: str = "A") -> None:
        super().__init__(target)
        self.server = server
        self.loss = loss if lossy else None
        self.hold_s = hold_s
        self.bound_s = 6.0 if server == "redis" else 8.0
        what = f"lossy link ({loss:.0%} dropped)" if lossy else "partition"
        self.name = f"{what} between instance {target} and {'Redis' if server == 'redis' else 'MySQL'} for {hold_s:g} s"
        self.net: Netfilter | None = None

    def prepare(self, fleet: Fleet) -> None:
        if fleet.alt != self.target:
            raise FaultError(f"instance {self.target} does not reach the servers through {ALT_HOST}")
        self.net = Netfilter()

    def port(self, fleet: Fleet) -> int:
        return fleet.redis.port if self.server == "redis" else fleet.mariadb.port

    def inject(self, fleet: Fleet) -> None:
        self.net.drop_link(ALT_HOST, self.port(fleet), self.loss)

    def heal(self, fleet: Fleet) -> None:
        self.net.clear()

    def cleanup(self, fleet: Fleet) -> None:
        if self.net is not None:
            self.net.close()


class ClusterMasterKill(Kill):
    """kill -9 a cluster master; once its replica has taken over (rcluster's kill_master waits
    for every node to agree), `hold_s` more, then start it again: it rejoins as a replica."""

    bound_s = 10.0
    needs_restore = True
    what = "a cluster master (its replica takes over)"

    def __init__(self, master: int = 0, hold_s: float = 1.0) -> None:
        self.master = master
        super().__init__(hold_s)

    def inject(self, fleet: Fleet) -> None:
        start = time.monotonic()
        self.victim, heir, took = fleet.cluster.kill_master(
            self.master, killed=lambda: self.losses.append((start, time.monotonic())))
        self.notes.append(f"{heir.address} took over from {self.victim.address} in {took:.1f} s")


class ClusterReplicaKill(Kill):
    bound_s = 0.0
    strict = True
    what = "a cluster replica"

    def process(self, fleet: Fleet) -> Any:
        c = fleet.cluster
        return c.replicas_of(c.masters()[0])[0]


class ClusterSeedLost(ClusterMasterKill):
    """The instances' only seed (build the fleet with cluster_fleet(c, seed=c.masters()[0].address)),
    a master, killed for good: its replica takes over, the node never comes back."""

    def __init__(self, hold_s: float = 1.0) -> None:
        super().__init__(0, hold_s)
        self.name = "the instances' only cluster seed (a master) lost for good"

    def heal(self, fleet: Fleet) -> None:
        pass  # gone for good: the cluster healed itself by the promotion

    def cleanup(self, fleet: Fleet) -> None:
        pass


# --------------------------------------------------------------------------- a run


class Run:
    """The outcome of run_fault(): the verdict, the recorder (its ops), the window."""

    def __init__(self, fault: Fault, verdict: Verdict, rec: Recorder, window: Window, rows: Any) -> None:
        self.fault = fault
        self.verdict = verdict
        self.rec = rec
        self.window = window
        self.rows = rows

    def summary(self) -> str:
        notes = f" [{'; '.join(self.fault.notes)}]" if self.fault.notes else ""
        return f"{self.fault.name}: {self.verdict.figures_line()}{notes}"

    def save(self, name: str) -> str:
        """Write the history as JSON lines under <build dir>/artefacts/faults/; the path."""
        out = Path(daemon_binary()).parent / "artefacts" / "faults"
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.jsonl"
        save(str(path), self.rec.snapshot(), [self.window], self.rows)
        return str(path)


def _quiet(fleet: Fleet, timeout: float) -> list[Violation]:
    """Wait until every instance's journal is idle and nothing is in doubt (the reconciler
    settles doubts 5 s after they arise), so MySQL's rows are final."""
    out = []
    for name, d in fleet.instances.items():
        def idle() -> bool:
            if not journal_idle(d):
                return False
            return d.stats(timeout=10).json()["journal"].get("inDoubt", 0) == 0
        try:
            wait_until(idle, timeout, 0.2, f"{name}'s journal to be idle")
        except (TimeoutError, AssertionError) as e:
            out.append(Violation("recovery", f"{name}: journal never idle with nothing in doubt: {e}; "
                                             f"/stats {d.stats(timeout=10).text[:400]}"))
    return out


def _health(fleet: Fleet) -> dict[str, Any]:
    """Every instance's /health answer (or the error getting it)."""
    out: dict[str, Any] = {}
    for name, d in fleet.instances.items():
        try:
            out[name] = d.health(timeout=5).json()
        except (OSError, ValueError, http.client.HTTPException) as e:
            out[name] = f"{type(e).__name__}: {e}"
    return out


def run_fault(fleet: Fleet, fault: Fault, spec: Spec | None = None, seed: int = 0, before_s: float = 1.5,
              after_s: float = 2.0, log: Callable[[str], None] | None = None) -> Run:
    """The workload before (before_s), during (fault.hold_s) and after (after_s, once healthy
    again; its pushes due by the end of it) the fault, a drain until every acknowledged push
    was delivered, then the checker over the history and MySQL's final rows."""
    spec = spec or Spec()
    say = log or (lambda s: None)
    fault.prepare(fleet)
    rec = Recorder(fleet.instances)
    wl = Workload(rec, spec, seed)
    restored = None
    t_start = time.monotonic()
    sampling = threading.Event()

    def sample(name: str) -> None:   # /health of each instance twice a second: a figure
        while not sampling.wait(0.5):
            rec.health(name)
    samplers = [threading.Thread(target=sample, args=(n,), daemon=True) for n in fleet.instances]
    try:
        for t in samplers:
            t.start()
        wl.start()
        time.sleep(before_s)
        t_inject = time.monotonic()
        fault.inject(fleet)
        fault.hold(fleet, rec)
        t_heal = time.monotonic()
        fault.heal(fleet)
        recovered = fleet.wait_ready(fault.bound_s + 30)
        if recovered is not None:
            recovered = time.monotonic() - t_heal
        if fault.needs_restore:
            restored = False
            by = next((n for n in fleet.instances if n != fault.target), "B")
            while not restored and time.monotonic() < t_heal + fault.bound_s + 30:
                op = rec.restore(by)
                restored = op.status == 200
                if restored:
                    a = op.answer or {}
                    fault.notes.append(f"/reStore after {op.t1 - t_heal:.1f} s: restored {a.get('restored')}, "
                                       f"removed {a.get('removed')}, aligned {a.get('aligned')}")
                else:
                    time.sleep(0.5)
            if restored and time.monotonic() > t_heal + fault.bound_s:
                restored = False
        wl.finish_by(time.monotonic() + after_s)
        time.sleep(after_s)
        wl.stop_producing()
        left = wl.drain(spec.max_delay_ms / 1000 + spec.ttr_ms / 1000 + 10)
        if left:
            say(f"{fault.name}: {len(left)} acknowledged push(es) still undelivered after the drain")
    finally:
        wl.stop()
        sampling.set()
        fault.cleanup(fleet)
    extra = _quiet(fleet, 30)
    health = _health(fleet)
    if fault.needs_restore and any(isinstance(h, dict) and h.get("redisLoss") for h in health.values()):
        # noticed after the restore had run (each instance notices within about a second): the
        # runbook's check — a second /reStore — repairs it
        op = rec.restore(next(n for n in fleet.instances if n != fault.target))
        fault.notes.append(f"a loss named after the /reStore: ran it again ({op.status}: {op.answer})")
        health = _health(fleet)
    rows = final_rows(fleet.namespace)
    window = Window(fault.name, t_inject, t_heal, fault.bound_s, list(fault.losses), fault.bystanders(fleet),
                    recovered, restored, health)
    verdict = check(rec.snapshot(), [window], rows, tries=spec.tries)
    verdict.violations += extra + fault.verify(fleet, rec, window)
    verdict.figures["wall_s"] = round(time.monotonic() - t_start, 1)
    return Run(fault, verdict, rec, window, rows)
