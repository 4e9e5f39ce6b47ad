"""Integration-test harness for hourglass: private Redis / MariaDB servers and the daemon.

Python 3.11 standard library only; Redis and MariaDB are driven through their command-line
clients (redis-cli, mariadb). Every server runs on a free loopback port in its own temporary
directory, and everything is cleaned up when the test process exits, even after failures:
objects are closed by unittest cleanups / context managers, leftovers by an atexit hook;
SIGTERM and SIGHUP are turned into KeyboardInterrupt so that hook runs, and on Linux the servers
get SIGKILL if the test process dies (PR_SET_PDEATHSIG). Set HG_KEEP=1 to keep the temporary
directories (logs, configs, data) for inspection; their paths are printed at exit.

Typical test:

    from harness import HourglassTestCase

    class PushTest(HourglassTestCase):
        def test_push_then_get(self):
            d = self.start_daemon({"queue": {"default_ttr": 5000}})
            r = d.push({"topic": "t", "body": {"x": 1}})
            self.assertStatus(r, 200)
            job = d.get("t", timeout=1).json()
            ...

Shared vs private servers: shared_stack() is one Redis + one MariaDB for the whole test process;
each test gets isolation from Stack.fresh_namespace() (its own Redis key prefix and Redis db
number, and its own MySQL database with the schema applied). Tests that stop, pause, kill or
restart a server must use their own: self.private_stack(), self.private_redis(),
self.private_mariadb() (all cleaned up after the test). RabbitMQ likewise: shared_rabbitmq()
(tests keep apart by queue and exchange names, unique_name()) or self.private_rabbitmq().
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import http.client
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import openapi_check
from openapi_check import CheckedHTTPConnection

HOST = "127.0.0.1"
# A second loopback address (all of 127.0.0.0/8 is loopback on Linux). A server started with
# binds=(HOST, ALT_HOST) answers on both, so one instance can reach it through ALT_HOST and
# its traffic can be told apart (the fault suite's iptables rules match it).
ALT_HOST = "127.0.0.2"
REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_SQL = REPO_ROOT / "sql" / "schema.sql"
KEEP = os.environ.get("HG_KEEP", "") not in ("", "0")
MYSQL_USER = "hourglass"
MYSQL_PASSWORD = "hourglass"

__all__ = [
    "HOST", "ALT_HOST", "REPO_ROOT", "SCHEMA_SQL", "HarnessError", "RedisError", "MariaDBError",
    "DaemonError", "free_port", "wait_until", "RedisServer", "MariaDBServer", "Namespace",
    "Stack", "shared_stack", "private_stack", "Response", "Daemon", "daemon_binary",
    "parse_http_responses", "HourglassTestCase", "CheckedHTTPConnection",
]


class HarnessError(Exception):
    """A server or the daemon could not be started, stopped or talked to."""


class RedisError(HarnessError):
    """redis-cli reported an error reply or failed."""


class MariaDBError(HarnessError):
    """The mariadb client reported an error."""


class DaemonError(HarnessError):
    """hourglassd failed to start/stop, or its log shows a sanitizer report."""


# --------------------------------------------------------------------------- cleanup

_registry: dict[int, Any] = {}  # id -> object with close(); closed in reverse order at exit
_registry_lock = threading.Lock()
_kept_dirs: list[str] = []


def _register(obj: Any) -> None:
    with _registry_lock:
        _registry[id(obj)] = obj


def _unregister(obj: Any) -> None:
    with _registry_lock:
        _registry.pop(id(obj), None)


def _cleanup_all() -> None:
    with _registry_lock:
        objs = list(_registry.values())[::-1]
    for obj in objs:
        try:
            obj.close(check=False)
        except Exception as e:  # noqa: BLE001 - keep cleaning up the rest
            print(f"harness: cleanup of {obj!r} failed: {e}", file=sys.stderr)
    if _kept_dirs:
        print("harness: HG_KEEP is set; kept " + " ".join(_kept_dirs), file=sys.stderr)


atexit.register(_cleanup_all)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


if threading.current_thread() is threading.main_thread():
    for _sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(_sig) is signal.SIG_DFL:
            signal.signal(_sig, _raise_interrupt)

try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _prctl = _libc.prctl
except (OSError, AttributeError):  # not Linux/glibc: no parent-death signal
    _prctl = None


_SIGKILL = int(signal.SIGKILL)


def _child_setup() -> None:
    # In the child between fork and exec: die with the test process (PR_SET_PDEATHSIG = 1).
    if _prctl is not None:
        _prctl(1, _SIGKILL, 0, 0, 0)


_OWNER = ".hg-owner"  # pid of the test process that made a temp dir


def _make_dir(prefix: str) -> str:
    path = tempfile.mkdtemp(prefix=f"hg-{prefix}-")
    with open(os.path.join(path, _OWNER), "w") as f:
        f.write(str(os.getpid()))
    return path


def _remove_dir(path: str | None) -> None:
    if not path:
        return
    if KEEP:
        _kept_dirs.append(path)
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(path, _OWNER))  # kept on purpose: not for _sweep_stale_dirs
        return
    shutil.rmtree(path, ignore_errors=True)


def _sweep_stale_dirs() -> None:
    """Remove temp dirs left by test processes that were SIGKILLed (their servers died with
    them through PDEATHSIG; only the files remained)."""
    base = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(base) if n.startswith("hg-")]
    except OSError:
        return
    for name in names:
        path = os.path.join(base, name)
        try:
            with open(os.path.join(path, _OWNER)) as f:
                pid = int(f.read().strip())
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except (OSError, ValueError):
            pass  # no owner file (not ours, or HG_KEEP), or owner alive / not ours to signal


_sweep_stale_dirs()


# --------------------------------------------------------------------------- utilities

_ports_given: set[int] = set()
_ports_lock = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and not handed out before in this process.

    Picked below the kernel's ephemeral range (32768+), so outgoing connections do not
    take it before the server binds it.
    """
    with _ports_lock:
        for _ in range(1000):
            port = random.randrange(20000, 32000)
            if port in _ports_given:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((HOST, port))
                except OSError:
                    continue
            _ports_given.add(port)
            return port
    raise HarnessError("no free port found in 20000-32000")


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05,
               what: str = "condition") -> Any:
    """Poll predicate() until it returns something truthy and return that; TimeoutError after
    timeout seconds. Exceptions from predicate propagate."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def topic_shard(topic: str, shards: int = 8) -> int:
    """The daemon's topic -> shard (ids.c topic_shard): FNV-1a 32 of the topic, mod shards."""
    h = 2166136261
    for b in topic.encode():
        h ^= b
        h = (h * 16777619) & 0xFFFFFFFF
    return h % shards


def topics_one_per_shard(prefix: str, shards: int = 8) -> list[str]:
    """`shards` topic names "<prefix><n>", one on each shard (in shard order), so every shard —
    and every instance's mover and pager — has work."""
    by_shard: dict[int, str] = {}
    n = 0
    while len(by_shard) < shards:
        t = f"{prefix}{n}"
        by_shard.setdefault(topic_shard(t, shards), t)
        n += 1
    return [by_shard[s] for s in range(shards)]


def now_ms() -> int:
    """Wall-clock ms, the same clock the daemon uses (same machine)."""
    return int(time.time() * 1000)


KEY_ALPHABET = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"


def id_key(job_id: str) -> str:
    """The compact Redis form of a job id: its field in the shard's jobs hash (src/core/ids.c id_to_key)."""
    v, out = int(job_id), []
    for _ in range(11):
        out.append(KEY_ALPHABET[v & 63])
        v >>= 6
    return "".join(reversed(out))


def journal_idle(d: "Daemon") -> bool:
    """/stats says nothing waits for MySQL: no batched record, no durable waiter. Polled with
    wait_until; a 503 with Retry-After (the worker that took the request is still reconnecting
    to Redis after an outage) means "not known yet"."""
    r = d.stats(timeout=10)
    if r.status == 503 and r.header("Retry-After"):
        return False
    if r.status != 200:
        raise AssertionError(f"/stats answered {r.status}: {r.text[:300]}")
    j = r.json()["journal"]
    return j.get("backlog") == 0 and j.get("durableWaiting", 0) == 0


def wait_healthy(tc: unittest.TestCase, d: "Daemon", timeout: float = 15.0) -> "Daemon":
    """Wait until the daemon is ready for pushes: GET /health 200 with a workerId. It answers
    HTTP (503s) before its Redis and MySQL connections are up, and /health can say ok a moment
    before the id generator holds a worker number (pushes then get 503 until it does). A
    timeout fails the test, with the last /health and the daemon's log."""
    try:
        wait_until(d.ready, timeout, 0.02, "GET /health 200 with a workerId")
    except TimeoutError:
        tc.fail(f"/health never answered 200 with a workerId: {d.health(timeout=5).text[:300]}\n{d.log_tail(20)}")
    return d


def _tail(path: str | os.PathLike, lines: int = 40) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"(no log: {e})"
    return "\n".join(data.splitlines()[-lines:])


def _which(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")
    if not path:
        raise HarnessError(f"'{name}' not found: run scripts/deps.sh (as root) to install it")
    return path


def _proc_state(pid: int) -> str:
    """One-letter process state from /proc ('R', 'S', 'T', 'Z', ...), '' if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _run(argv: list[str], input: str | None = None, timeout: float = 30.0,
         env: Mapping[str, str] | None = None, what: str = "") -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, input=input, capture_output=True, timeout=timeout,
                              env={**os.environ, **env} if env else None,
                              text=True, errors="surrogateescape")
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"{what or argv[0]} did not finish within {timeout:g} s") from None


# --------------------------------------------------------------------------- processes


class _Process:
    """A child process with its own temp dir and a log file there (stdout+stderr appended)."""

    kind = "process"

    def __init__(self, dir: str | None = None) -> None:
        self._own_dir = dir is None
        self.dir = dir or _make_dir(self.kind)
        os.makedirs(self.dir, exist_ok=True)
        self.log_path = os.path.join(self.dir, f"{self.kind}.log")
        self.proc: subprocess.Popen | None = None
        self._closed = False
        _register(self)

    # -- state
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """Exit status of the last run; negative -N when it died of signal N (Popen style)."""
        return self.proc.poll() if self.proc else None

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log_path, lines)

    # -- control
    def _spawn(self, argv: list[str], env: Mapping[str, str] | None = None) -> None:
        with open(self.log_path, "ab") as logf:
            logf.write(f"\n=== harness {time.strftime('%H:%M:%S')}: {' '.join(argv)}\n".encode())
            logf.flush()
            main = threading.current_thread() is threading.main_thread()
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                cwd=self.dir, env={**os.environ, **env} if env else None,
                start_new_session=True,  # a Ctrl-C in the terminal reaches only the test runner
                # PDEATHSIG fires when the forking *thread* exits: only set it from the main thread.
                preexec_fn=_child_setup if main else None)

    def _fail(self, message: str, exc: type[HarnessError] = HarnessError) -> HarnessError:
        return exc(f"{message}\n--- last lines of {self.log_path}:\n{self.log_tail()}")

    def _accepting(self, what: str) -> bool:
        """Started: does self.port accept a connection yet? Raises if the process died."""
        if not self.running:
            raise self._fail(f"{what} exited with status {self.returncode} during startup")
        try:
            with socket.create_connection((HOST, self.port), timeout=1):
                return True
        except OSError:
            return False

    def pause(self) -> None:
        """SIGSTOP: the process stays alive but answers nothing (connections hang)."""
        if not self.running:
            raise HarnessError(f"{self.kind} is not running")
        os.kill(self.proc.pid, signal.SIGSTOP)
        wait_until(lambda: _proc_state(self.proc.pid) in ("T", "t", ""), 5, 0.01, f"{self.kind} to stop")

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if self.running:
            os.kill(self.proc.pid, signal.SIGCONT)

    def signal(self, sig: int) -> None:
        if self.running:
            os.kill(self.proc.pid, sig)

    def kill(self) -> int | None:
        """SIGKILL and reap; returns the exit status (-9), None if it never ran."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait()

    def _terminate(self, sig: int, timeout: float) -> int | None:
        """Send sig (after SIGCONT, in case it is paused) and wait; SIGKILL after timeout.
        Returns the exit status; raises HarnessError if it had to be killed."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, sig)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise self._fail(f"{self.kind} (pid {self.proc.pid}) did not exit within {timeout:g} s "
                                 f"after {signal.Signals(sig).name}; killed it") from None
        return self.proc.returncode

    def close(self, check: bool = True) -> None:
        """Stop (or kill) the process and remove the temp dir (unless HG_KEEP). Idempotent."""
        if self._closed:
            return
        self._closed = True
        _unregister(self)
        try:
            if self.running:
                try:
                    self._terminate(signal.SIGTERM, 30)
                except HarnessError:
                    pass
        finally:
            if self._own_dir:
                _remove_dir(self.dir)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self, timeout: float = 60.0):  # pragma: no cover - overridden
        raise NotImplementedError

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} pid={self.pid} {state} dir={self.dir}>"


class RedisServer(_Process):
    """A private redis-server on 127.0.0.1:<free port>, data in its temp dir.

    No persistence by default (restart() = an empty Redis, i.e. "Redis lost its data");
    persistent=True turns on appendonly with fsync always, so restart() and even kill() keep it.
    binds: the loopback addresses it listens on (default HOST only; e.g. (HOST, ALT_HOST)).
    """

    kind = "redis"

    def __init__(self, port: int | None = None, dir: str | None = None,
                 password: str | None = None, persistent: bool = False,
                 args: Iterable[str] = (), binds: Iterable[str] = (HOST,)) -> None:
        super().__init__(dir)
        self._auto_port = port is None
        self.port = port or free_port()
        self.password = password
        self.persistent = persistent
        self.args = list(args)
        self.binds = list(binds)
        self.started_once = False

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def _argv(self) -> list[str]:
        argv = [_which("redis-server"), "--port", str(self.port), "--bind", *self.binds,
                "--dir", self.dir, "--daemonize", "no", "--logfile", "", "--save", "",
                "--appendonly", "yes" if self.persistent else "no", "--appendfsync", "always"]
        if self.password:
            argv += ["--requirepass", self.password]
        return argv + self.args

    def start(self, timeout: float = 30.0) -> "RedisServer":
        """Start (no-op if running) and wait until it answers PING."""
        if self.running:
            return self
        for attempt in range(3):
            self._spawn(self._argv())
            try:
                wait_until(self._ready, timeout, 0.02, f"redis-server on {self.address}")
                self.started_once = True
                return self
            except TimeoutError:
                self.kill()
                raise self._fail(f"redis-server did not answer PING on {self.address} within {timeout:g} s")
            except HarnessError:
                if (self._auto_port and not self.started_once and attempt < 2
                        and "in use" in self.log_tail(5)):
                    self.port = free_port()  # lost a race for the port: try another
                    continue
                raise
        raise AssertionError("unreachable")

    def _ready(self) -> bool:
        if not self.running:
            raise self._fail(f"redis-server exited with status {self.returncode} during startup")
        try:
            return self.cli("PING", timeout=2) == "PONG"
        except (TimeoutError, RedisError):
            return False

    def stop(self, timeout: float = 30.0) -> int | None:
        """Clean shutdown (SIGTERM; saves only if persistent) and wait."""
        return self._terminate(signal.SIGTERM, timeout)

    def restart(self, timeout: float = 30.0) -> "RedisServer":
        """stop() + start() on the same port and data dir."""
        self.stop()
        return self.start(timeout)

    def cli(self, *args: Any, db: int | None = None, timeout: float = 5.0) -> str:
        """Run one command through redis-cli; returns its output minus the final newline.

        Raw output (redis-cli is not on a tty): a bulk string as is, nil as '', an integer as
        digits, an array as one element per line. Error replies raise RedisError; no answer
        within timeout (e.g. the server is paused) raises TimeoutError.
        """
        argv = [_which("redis-cli"), "-h", HOST, "-p", str(self.port), "-e"]
        if db is not None:
            argv += ["-n", str(db)]
        argv += [str(a) for a in args]
        env = {"REDISCLI_AUTH": self.password} if self.password else None
        r = _run(argv, timeout=timeout, env=env, what=f"redis-cli {' '.join(argv[6:])[:80]}")
        if r.returncode != 0:
            raise RedisError(f"redis-cli {' '.join(argv[6:])[:200]}: "
                             f"{(r.stderr or r.stdout).strip() or f'exit status {r.returncode}'}")
        return r.stdout.removesuffix("\n")

    def flushall(self) -> None:
        self.cli("FLUSHALL")


class MariaDBServer(_Process):
    """A private mariadbd on 127.0.0.1:<free port>, data dir and socket in its temp dir.

    The data dir is initialised once per instance (mariadb-install-db), so restart() keeps the
    data. root@localhost has no password and is used through the unix socket by query/execute.
    Runs with innodb_flush_log_at_trx_commit=2: commits survive a mariadbd crash or kill, only
    an OS crash could lose the last second (speed for tests). binds: the loopback addresses it
    listens on, as for RedisServer.
    """

    kind = "mariadb"

    def __init__(self, port: int | None = None, dir: str | None = None,
                 buffer_pool: str = "128M", args: Iterable[str] = (),
                 binds: Iterable[str] = (HOST,)) -> None:
        super().__init__(dir)
        self._auto_port = port is None
        self.port = port or free_port()
        self.binds = list(binds)
        self.datadir = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "mysqld.sock")
        self.buffer_pool = buffer_pool
        self.args = list(args)
        self.started_once = False
        if len(self.socket) > 100:
            raise HarnessError(f"socket path {self.socket} is too long: set TMPDIR to a shorter dir")

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def _user_args(self) -> list[str]:
        return ["--user=root"] if os.geteuid() == 0 else []  # mariadbd refuses root without it

    def _initialise(self) -> None:
        marker = os.path.join(self.dir, ".initialized")
        if os.path.exists(marker):
            return
        shutil.rmtree(self.datadir, ignore_errors=True)
        argv = [_which("mariadb-install-db"), "--no-defaults", *self._user_args(),
                f"--datadir={self.datadir}", f"--tmpdir={self._tmpdir()}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db", "--innodb-log-file-size=16M"]
        r = _run(argv, timeout=300, what="mariadb-install-db")
        with open(self.log_path, "a") as f:
            f.write(f"=== harness: {' '.join(argv)}\n{r.stdout}{r.stderr}")
        if r.returncode != 0:
            raise self._fail(f"mariadb-install-db failed with status {r.returncode}")
        Path(marker).touch()

    def _tmpdir(self) -> str:
        """Its own temporary directory: servers started side by side (parallel suites) never
        share one (a bootstrap once failed removing its temporary table from a shared /tmp)."""
        path = os.path.join(self.dir, "tmp")
        os.makedirs(path, exist_ok=True)
        return path

    def _argv(self) -> list[str]:
        return [_which("mariadbd"), "--no-defaults", *self._user_args(),
                f"--datadir={self.datadir}", f"--socket={self.socket}", f"--tmpdir={self._tmpdir()}",
                f"--pid-file={os.path.join(self.dir, 'mysqld.pid')}",
                f"--port={self.port}", f"--bind-address={','.join(self.binds)}",
                "--skip-log-bin", "--skip-name-resolve",
                f"--innodb-buffer-pool-size={self.buffer_pool}", "--innodb-log-file-size=16M",
                "--innodb-flush-log-at-trx-commit=2",
                # a shared server holds every daemon of a suite, each with its journal, outbox,
                # pool and pager connections: the default 151 is within reach of a busy suite
                "--max-connections=2000",
                "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
                *self.args]

    def start(self, timeout: float = 120.0) -> "MariaDBServer":
        """Initialise the data dir on first use, start, wait until it answers a ping."""
        if self.running:
            return self
        self._initialise()
        for attempt in range(3):
            self._spawn(self._argv())
            try:
                wait_until(self._ready, timeout, 0.05, f"mariadbd on {self.address}")
                self.started_once = True
                return self
            except TimeoutError:
                self.kill()
                raise self._fail(f"mariadbd did not answer on {self.socket} within {timeout:g} s")
            except HarnessError:
                if (self._auto_port and not self.started_once and attempt < 2
                        and "in use" in self.log_tail(10)):
                    self.port = free_port()
                    continue
                raise
        raise AssertionError("unreachable")

    def _ready(self) -> bool:
        if not self.running:
            raise self._fail(f"mariadbd exited with status {self.returncode} during startup")
        if not os.path.exists(self.socket):
            return False
        r = _run([_which("mariadb-admin"), "--no-defaults", "-uroot", f"--socket={self.socket}",
                  "--connect-timeout=2", "ping"], timeout=10)
        return r.returncode == 0

    def stop(self, timeout: float = 60.0) -> int | None:
        """Clean shutdown (SIGTERM) and wait."""
        return self._terminate(signal.SIGTERM, timeout)

    def restart(self, timeout: float = 120.0) -> "MariaDBServer":
        """stop() + start() on the same port and data dir."""
        self.stop()
        return self.start(timeout)

    # -- SQL
    def _client(self, db: str | None, user: str | None, password: str | None) -> tuple[list[str], dict]:
        argv = [_which("mariadb"), "--no-defaults"]
        env = {}
        if user is None:
            argv += ["-uroot", f"--socket={self.socket}"]
        else:  # as an application user, over TCP like the daemon
            argv += ["--protocol=tcp", "-h", HOST, "-P", str(self.port), "-u", user]
            env["MYSQL_PWD"] = password or ""
        argv += ["--connect-timeout=5"]
        if db:
            argv += ["-D", db]
        return argv, env

    def execute(self, sql: str, db: str | None = None, timeout: float = 30.0,
                user: str | None = None, password: str | None = None) -> str:
        """Run SQL (one or more ;-separated statements, e.g. a whole .sql file); returns the
        client's raw output. MariaDBError on an SQL error, TimeoutError if no answer in time."""
        argv, env = self._client(db, user, password)
        r = _run(argv + ["-N", "-B", "--raw"], input=sql, timeout=timeout, env=env,
                 what=f"mariadb: {sql.strip()[:80]}")
        if r.returncode != 0:
            raise MariaDBError(f"mariadb (db={db}): {r.stderr.strip()}\nSQL: {sql.strip()[:500]}")
        return r.stdout

    def query(self, sql: str, db: str | None = None, timeout: float = 30.0,
              user: str | None = None, password: str | None = None) -> list[tuple[str | None, ...]]:
        """Rows of a SELECT as tuples of str, via `mariadb -N -B --raw` (root over the socket,
        or user/password over TCP).

        Every value comes back as text (numbers too: '1'). SQL NULL comes back as None, and so
        does the 4-letter string 'NULL' (the client prints both the same: test with IS NULL when
        that matters). Values are not escaped (--raw): a tab or newline inside a value breaks
        the row/column split, so select HEX(col), or REPLACE()/JSON for such columns.
        """
        out = self.execute(sql, db, timeout, user, password)
        return [tuple(None if v == "NULL" else v for v in line.split("\t"))
                for line in out.split("\n") if line != ""]

    def create_database(self, name: str, user: str = MYSQL_USER, password: str = MYSQL_PASSWORD,
                        schema: bool = True) -> str:
        """CREATE DATABASE (if missing), the user @127.0.0.1 and @localhost with ALL on it,
        and sql/schema.sql applied. Returns name."""
        _check_ident(name)
        _check_ident(user)
        pw = _sql_str(password)
        self.execute(
            f"CREATE DATABASE IF NOT EXISTS `{name}`;\n"
            + "".join(f"CREATE USER IF NOT EXISTS '{user}'@'{h}' IDENTIFIED BY '{pw}';\n"
                      f"GRANT ALL PRIVILEGES ON `{name}`.* TO '{user}'@'{h}';\n"
                      for h in ("127.0.0.1", "localhost")))
        if schema:
            self.apply_schema(name)
        return name

    def apply_schema(self, db: str, path: str | os.PathLike = SCHEMA_SQL) -> None:
        """Apply sql/schema.sql (idempotent) to db."""
        self.execute(Path(path).read_text(), db=db, timeout=120)

    def drop_database(self, name: str) -> None:
        _check_ident(name)
        self.execute(f"DROP DATABASE IF EXISTS `{name}`")

    def tables(self, db: str) -> list[str]:
        return sorted(r[0] for r in self.query("SHOW TABLES", db=db))


def _check_ident(name: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_]{1,64}", name):
        raise ValueError(f"not a plain SQL identifier: {name!r}")


def _sql_str(s: str) -> str:
    return s.replace("\\", "\\\\").replace("'", "\\'")


# --------------------------------------------------------------------------- stack


class Namespace:
    """One test's slice of a Stack: a Redis key prefix + Redis db number, and a MySQL database
    (schema applied, hourglass user granted). Daemon(namespace=...) uses all of them."""

    def __init__(self, stack: "Stack", prefix: str, redis_db: int, database: str) -> None:
        self.stack = stack
        self.prefix = prefix
        self.redis_db = redis_db
        self.database = database

    @property
    def redis(self) -> RedisServer:
        return self.stack.redis

    @property
    def mariadb(self) -> MariaDBServer:
        return self.stack.mariadb

    def redis_cli(self, *args: Any, timeout: float = 5.0) -> str:
        """redis-cli on this namespace's db number (keys are NOT prefixed for you)."""
        return self.redis.cli(*args, db=self.redis_db, timeout=timeout)

    def redis_keys(self, pattern: str = "*") -> list[str]:
        """Keys of this namespace (prefix + pattern), sorted."""
        out = self.redis_cli("KEYS", self.prefix + pattern)
        return sorted(k for k in out.split("\n") if k)

    def flush_redis(self) -> int:
        """Delete this namespace's Redis keys (simulates losing Redis); returns how many."""
        script = ("local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                  "redis.call('DEL', k) n = n + 1 end return n")
        return int(self.redis_cli("EVAL", script, "0", self.prefix + "*") or 0)

    def query(self, sql: str, **kw: Any) -> list[tuple[str | None, ...]]:
        return self.mariadb.query(sql, db=self.database, **kw)

    def execute(self, sql: str, **kw: Any) -> str:
        return self.mariadb.execute(sql, db=self.database, **kw)

    def config(self) -> dict[str, dict[str, Any]]:
        """The [redis] and [mysql] config sections that point a daemon here."""
        return {
            "redis": {"address": self.redis.address, "password": self.redis.password or "",
                      "db": self.redis_db, "prefix": self.prefix},
            "mysql": {"host": HOST, "port": self.mariadb.port, "socket": "", "user": MYSQL_USER,
                      "password": MYSQL_PASSWORD, "database": self.database},
        }

    def __repr__(self) -> str:
        return f"<Namespace prefix={self.prefix} redis_db={self.redis_db} database={self.database}>"


class Stack:
    """One Redis + one MariaDB. Start with Stack.start(); close() stops and removes both."""

    namespace_class: type = Namespace  # what fresh_namespace() makes (galera.py: its own)

    def __init__(self, redis: RedisServer, mariadb: MariaDBServer) -> None:
        self.redis = redis
        self.mariadb = mariadb
        self._counter = 0
        self._lock = threading.Lock()
        self._closed = False
        _register(self)

    @classmethod
    def start(cls, redis_kw: Mapping[str, Any] | None = None,
              mariadb_kw: Mapping[str, Any] | None = None) -> "Stack":
        """Start a new private Redis and MariaDB (about a second). Sequentially, from the
        calling thread, so the parent-death signal stays tied to it."""
        redis = RedisServer(**(redis_kw or {}))
        mariadb = MariaDBServer(**(mariadb_kw or {}))
        stack = cls(redis, mariadb)
        try:
            redis.start()
            mariadb.start()
        except BaseException:
            stack.close(check=False)
            raise
        return stack

    def fresh_namespace(self) -> Namespace:
        """A new, empty namespace: unique 12-char Redis prefix (none is a prefix of another),
        Redis db 1..15 in rotation, and a new MySQL database with the schema."""
        with self._lock:
            self._counter += 1
            n = self._counter
        token = secrets.token_hex(5)
        ns = self.namespace_class(self, prefix=f"hg{token}", redis_db=1 + (n - 1) % 15, database=f"hg_{token}")
        self._sql_servers().create_database(ns.database)
        return ns

    def _sql_servers(self) -> Any:
        """Where fresh namespaces get their database, stopped after Redis by close(): the one
        MariaDB (galera.py: the whole cluster)."""
        return self.mariadb

    def close(self, check: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        _unregister(self)
        try:
            self.redis.close()
        finally:
            self._sql_servers().close()

    def __enter__(self) -> "Stack":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Stack redis={self.redis.address} mariadb={self.mariadb.address}>"


_shared: Stack | None = None
_shared_error: BaseException | None = None
_shared_lock = threading.Lock()


def shared_stack() -> Stack:
    """The process-wide Redis + MariaDB, started on first use and stopped at exit.
    Never stop, pause or restart its servers: use private_stack() for that."""
    global _shared, _shared_error
    with _shared_lock:
        if _shared is None:
            if _shared_error is not None:
                raise HarnessError(f"the shared stack failed to start earlier: {_shared_error}")
            try:
                _shared = Stack.start()
            except BaseException as e:
                _shared_error = e
                raise
        return _shared


def private_stack(testcase: unittest.TestCase | None = None, **kw: Any) -> Stack:
    """A Stack of its own (for tests that stop/pause/kill servers); closed by testcase's
    cleanups when given, else at exit or by `with`."""
    stack = Stack.start(**kw)
    if testcase is not None:
        testcase.addCleanup(stack.close)
    return stack


# --------------------------------------------------------------------------- HTTP


class Response:
    """An HTTP response: status, reason, headers (case-insensitive .get), body (bytes)."""

    def __init__(self, status: int, reason: str, headers: Any, body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def header(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name, default)

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise ValueError(f"HTTP {self.status} body is not JSON ({e}): {self.text[:500]!r}") from None

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.body[:300]!r}>"


def _query_string(params: Mapping[str, Any]) -> str:
    items = []
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        items.append((k, str(v)))
    return urllib.parse.urlencode(items)


def parse_http_responses(data: bytes) -> list[Response]:
    """Split raw bytes from Daemon.raw() into responses (Content-Length, chunked, or a body
    that runs to the end). For pipelining tests. Assumes responses to non-HEAD requests."""
    out: list[Response] = []
    rest = data
    while rest:
        head, sep, rest = rest.partition(b"\r\n\r\n")
        if not sep:
            raise ValueError(f"incomplete HTTP response head: {head[:200]!r}")
        lines = head.decode("iso-8859-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError(f"not an HTTP status line: {lines[0]!r}")
        status = int(parts[1])
        headers = http.client.HTTPMessage()
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip()] = value.strip()
        if status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in (headers.get("Transfer-Encoding") or "").lower():
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                if size == 0:
                    _, _, rest = rest.partition(b"\r\n")  # (no trailers expected)
                    break
                body += rest[:size]
                rest = rest[size + 2:]
        elif headers.get("Content-Length") is not None:
            n = int(headers["Content-Length"])
            body, rest = rest[:n], rest[n:]
        else:
            body, rest = rest, b""
        out.append(Response(status, parts[2] if len(parts) > 2 else "", headers, body))
    return out


# --------------------------------------------------------------------------- daemon


def daemon_binary() -> str:
    """$HOURGLASSD (set by `make integration`), else build/hourglassd or ./hourglassd."""
    env = os.environ.get("HOURGLASSD")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise DaemonError(f"HOURGLASSD={env} is not an executable file: build it with make")
        return os.path.abspath(env)
    for cand in (REPO_ROOT / "build" / "hourglassd", REPO_ROOT / "hourglassd"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    raise DaemonError("HOURGLASSD is not set and build/hourglassd does not exist: run "
                      "`make integration`, or set HOURGLASSD=/absolute/path/to/hourglassd")


# First line of an ASan/LSan/MSan, TSan or UBSan report.
_SANITIZER_RX = re.compile(r"^(==\d+==ERROR: \w+Sanitizer|WARNING: ThreadSanitizer|"
                           r"\S+:\d+:\d+: runtime error: )", re.MULTILINE)


class Daemon(_Process):
    """hourglassd with a generated config, its log in a temp dir, and HTTP helpers.

    Config = the defaults below + namespace.config() + overrides (a dict of dicts, e.g.
    {"http": {"threads": 4}, "queue": {"default_ttr": 1000}}); an override value of None
    removes the key. self.config can be edited before start()/restart().
    Defaults: listen 127.0.0.1:<free port>, threads 2, log level debug, log file empty
    (stderr, which goes to self.log_path).
    """

    kind = "hourglassd"

    def __init__(self, namespace: Namespace | None = None,
                 overrides: Mapping[str, Mapping[str, Any]] | None = None,
                 binary: str | None = None, port: int | None = None, dir: str | None = None) -> None:
        self.binary = binary or daemon_binary()
        # its HTTP is checked against docs/openapi.yaml, unless it runs a stand-in for the daemon
        # (test_harness's fake binaries: they describe nothing)
        self.checked = binary is None
        super().__init__(dir)
        self.namespace = namespace if namespace is not None else shared_stack().fresh_namespace()
        self._auto_port = port is None
        self.port = port or free_port()
        self.config_path = os.path.join(self.dir, "hourglass.conf")
        self.default_headers: dict[str, str] = {}
        self.stopped_by_us = False
        self.starts = 0
        self.env: dict[str, str] = {}  # extra environment (e.g. HOURGLASS_FAULTS), read at start()
        self.config: dict[str, dict[str, Any]] = {
            "http": {"listen": f"{HOST}:{self.port}", "threads": 2, "max_body": 65536,
                     "longpoll_max": 60, "token": "", "admin_token": ""},
            "redis": {"address": "", "password": "", "db": 0, "prefix": "", "shards": 8},
            "mysql": {"host": HOST, "port": 3306, "socket": "", "user": MYSQL_USER,
                      "password": MYSQL_PASSWORD, "database": "", "retention_days": 7},
            "queue": {"default_ttr": 30000, "default_tries": 3, "max_delay": 31536000000},
            "log": {"level": "debug", "file": ""},
            "instance": {"state_dir": os.path.join(self.dir, "state")},
        }
        self.update_config(self.namespace.config())
        self.update_config(overrides or {})

    # -- config
    def update_config(self, overrides: Mapping[str, Mapping[str, Any]]) -> None:
        for section, values in overrides.items():
            sec = self.config.setdefault(section, {})
            for key, value in values.items():
                if value is None:
                    sec.pop(key, None)
                else:
                    sec[key] = value

    def config_text(self) -> str:
        def fmt(v: Any) -> str:
            return ("true" if v else "false") if isinstance(v, bool) else str(v)
        lines = ["# written by tests/integration/harness.py"]
        for section, values in self.config.items():
            lines.append(f"\n[{section}]")
            lines += [f"{k} = {fmt(v)}".rstrip() for k, v in values.items()]
        return "\n".join(lines) + "\n"

    def write_config(self) -> str:
        with open(self.config_path, "w") as f:
            f.write(self.config_text())
        return self.config_path

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    # -- process
    def run_binary(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
        """Run the binary once with args (e.g. "-t", "-c", d.write_config()) and capture output."""
        return _run([self.binary, *args], timeout=timeout, what=f"hourglassd {' '.join(args)}")

    def check_config(self) -> subprocess.CompletedProcess:
        """`hourglassd -t -c <this config>`: returncode 0 = valid."""
        return self.run_binary("-t", "-c", self.write_config())

    def start(self, timeout: float = 30.0) -> "Daemon":
        """Write the config, start `binary -c config`, wait until GET /health answers (any
        status). DaemonError with the log tail if it exits first or does not answer in time."""
        if self.running:
            return self
        for attempt in range(3):
            self.write_config()
            self.stopped_by_us = False
            self._spawn([self.binary, "-c", self.config_path], env=self.env)
            try:
                wait_until(self._ready, timeout, 0.02, f"hourglassd to answer on {self.url}/health")
                self.starts += 1
                return self
            except TimeoutError:
                self.kill()
                raise self._fail(f"hourglassd did not answer GET /health on {self.url} within "
                                 f"{timeout:g} s", DaemonError) from None
            except DaemonError:
                if (self._auto_port and self.starts == 0 and attempt < 2
                        and "in use" in self.log_tail(10)):
                    self.port = free_port()
                    self.config["http"]["listen"] = f"{HOST}:{self.port}"
                    continue
                self.stopped_by_us = True  # the exception has the log tail; close() needn't repeat it
                raise
        raise AssertionError("unreachable")

    def _ready(self) -> bool:
        if not self.running:
            raise self._fail(f"hourglassd exited with status {self.returncode} during startup "
                             f"(config {self.config_path})", DaemonError)
        try:
            self.request("GET", "/health", timeout=2)
            return True
        except (OSError, http.client.HTTPException):
            return False

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Send sig and wait for the exit status (negative -N: killed by signal N). If it does
        not exit within timeout it is killed and DaemonError is raised."""
        self.stopped_by_us = True
        try:
            return self._terminate(sig, timeout)
        except HarnessError as e:
            raise DaemonError(str(e)) from None

    def kill(self) -> int | None:
        self.stopped_by_us = True
        return super().kill()

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Wait for the daemon to exit by itself; its exit status."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"hourglassd still running after {timeout:g} s") from None

    def restart(self, timeout: float = 30.0) -> "Daemon":
        """stop() + start(): same port, config rewritten from self.config."""
        self.stop()
        return self.start(timeout)

    def wait_for_log(self, pattern: str, timeout: float = 10.0) -> re.Match:
        """Poll the log until the regex pattern matches; the match."""
        rx = re.compile(pattern)
        return wait_until(lambda: rx.search(self.log()), timeout, 0.05, f"log line /{pattern}/")

    def sanitizer_report(self) -> str | None:
        """The log from the first ASan/UBSan/LSan/TSan report on, or None."""
        text = self.log()
        m = _SANITIZER_RX.search(text)
        return text[m.start():m.start() + 8000] if m else None

    def close(self, check: bool = True) -> None:
        """Stop the daemon (SIGTERM, then SIGKILL after 30 s) and remove its dir. With
        check=True (unittest cleanups), raise DaemonError if the log has a sanitizer report."""
        if self._closed:
            return
        crashed = self.proc is not None and not self.running and not self.stopped_by_us
        if crashed:
            print(f"\nharness: hourglassd (pid {self.pid}) had exited by itself with status "
                  f"{self.returncode}; last lines of its log:\n{self.log_tail(30)}", file=sys.stderr)
        if self.running:
            try:
                self.stop(timeout=30)
            except DaemonError as e:
                print(f"harness: {e}", file=sys.stderr)
        report = self.sanitizer_report() if check and self.proc is not None else None
        super().close(check)
        if report:
            raise DaemonError(f"sanitizer report in the hourglassd log:\n{report}")

    # -- HTTP
    # An HTTP gateway (NginxServer) answers some statuses itself: those are not checked.
    gateway = False

    def connection(self, timeout: float = 10.0) -> http.client.HTTPConnection:
        """A keep-alive connection of your own (close it yourself); its exchanges are checked
        against docs/openapi.yaml (openapi_check.py)."""
        if not self.checked:
            return http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        conn = CheckedHTTPConnection(HOST, self.port, timeout=timeout)
        conn.gateway = self.gateway
        return conn

    def request(self, method: str, path: str, body: Any = None,
                headers: Mapping[str, str] | None = None, timeout: float = 10.0,
                params: Mapping[str, Any] | None = None) -> Response:
        """One request on a new connection. body: bytes/str as is; dict/list JSON-encoded with
        Content-Type: application/json. params are added to the query string (None values
        dropped, booleans as true/false). Errors other than HTTP statuses raise (OSError,
        http.client.HTTPException, TimeoutError). The exchange is checked against
        docs/openapi.yaml: openapi_check.Mismatch (an AssertionError) when it does not match."""
        hdrs = {**self.default_headers, **(headers or {})}
        if isinstance(body, (dict, list)):
            data: bytes | None = json.dumps(body).encode()
            if not any(k.lower() == "content-type" for k in hdrs):
                hdrs["Content-Type"] = "application/json"
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = body
        if params:
            qs = _query_string(params)
            if qs:
                path += ("&" if "?" in path else "?") + qs
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=hdrs)
            r = conn.getresponse()
            payload = r.read()
        finally:
            conn.close()
        if self.checked:
            openapi_check.check_exchange(method, path, hdrs, data, r.status, r.headers, payload, self.gateway)
        return Response(r.status, r.reason, r.headers, payload)

    def push(self, job_or_list: Any, **kw: Any) -> Response:
        """POST /push with one job object or a list of them."""
        return self.request("POST", "/push", body=job_or_list, **kw)

    def get(self, topic: str | Iterable[str], timeout: float | None = 0, count: int | None = None,
            http_timeout: float | None = None, **kw: Any) -> Response:
        """GET /get/{topic}?timeout=&count= (topic may be a list: a,b,c; timeout=None leaves
        it out). The HTTP timeout defaults to the long-poll timeout + 10 s."""
        if not isinstance(topic, str):
            topic = ",".join(topic)
        params = {"timeout": None if timeout is None else _num(timeout), "count": count,
                  **kw.pop("params", {})}
        if http_timeout is None:
            http_timeout = (60.0 if timeout is None else float(timeout)) + 10
        return self.request("GET", "/get/" + urllib.parse.quote(topic, safe=",:.-_"),
                            params=params, timeout=http_timeout, **kw)

    def finish(self, id: str, **kw: Any) -> Response:
        return self.request("GET", "/finish", params={"id": id}, **kw)

    def release(self, id: str, delay: int | None = None, **kw: Any) -> Response:
        return self.request("GET", "/release", params={"id": id, "delay": delay}, **kw)

    def touch(self, id: str, **kw: Any) -> Response:
        return self.request("GET", "/touch", params={"id": id}, **kw)

    def delete(self, id: str, **kw: Any) -> Response:
        return self.request("GET", "/delete", params={"id": id}, **kw)

    def reschedule(self, id: str, delay: int | None = None, run_at: int | None = None,
                   **kw: Any) -> Response:
        return self.request("GET", "/reschedule", params={"id": id, "delay": delay, "runAt": run_at}, **kw)

    def job(self, id: str, **kw: Any) -> Response:
        """GET /jobs/{id}"""
        return self.request("GET", f"/jobs/{urllib.parse.quote(str(id), safe='')}", **kw)

    def dead(self, topic: str, limit: int | None = None, **kw: Any) -> Response:
        return self.request("GET", f"/dead/{urllib.parse.quote(topic, safe='')}", params={"limit": limit}, **kw)

    def restore(self, expire: bool | None = None, **kw: Any) -> Response:
        """GET /reStore?expire="""
        return self.request("GET", "/reStore", params={"expire": expire}, **kw)

    def restore_one(self, id: str, force: bool | None = None, **kw: Any) -> Response:
        """GET /reStore/{id}?force="""
        return self.request("GET", f"/reStore/{urllib.parse.quote(str(id), safe='')}",
                            params={"force": force}, **kw)

    def health(self, **kw: Any) -> Response:
        return self.request("GET", "/health", **kw)

    def ready(self) -> bool:
        """Ready for pushes: /health 200 (Redis and MySQL connected) and an id-generator worker
        number held. It answers HTTP (503s) before its connections are up, and /health can say
        ok a moment before the id lease is taken (pushes get 503 until then)."""
        r = self.health(timeout=5)
        return r.status == 200 and r.json().get("workerId", -1) >= 0

    def wait_ready(self, timeout: float = 15.0) -> "Daemon":
        wait_until(self.ready, timeout, 0.02, f"{self.kind} to be ready (/health 200 with a workerId)")
        return self

    def stats(self, **kw: Any) -> Response:
        return self.request("GET", "/stats", **kw)

    def metrics(self, **kw: Any) -> Response:
        return self.request("GET", "/metrics", **kw)

    def raw(self, data: bytes | str | Iterable[bytes], read_timeout: float = 2.0,
            half_close: bool = False, gap: float = 0.0, connect_timeout: float = 5.0,
            max_total: float = 60.0) -> bytes:
        """Send bytes on a fresh TCP connection and return everything read back until the server
        closes it or nothing arrives for read_timeout s (max_total caps the whole read).

        data may be a list of chunks, sent `gap` s apart (slow clients). half_close=True shuts
        down our sending side after the data (FIN), as `curl` does not but some clients do.
        Resets by the server are not errors: you get what arrived before. The answers are
        checked against docs/openapi.yaml (openapi_check.check_raw): each answer to a
        well-formed request as that request's, the rest as documented errors.
        """
        chunks = [data] if isinstance(data, (bytes, bytearray, str)) else list(data)
        chunks = [c.encode() if isinstance(c, str) else bytes(c) for c in chunks]
        out = bytearray()
        with socket.create_connection((HOST, self.port), timeout=connect_timeout) as s:
            try:
                for i, c in enumerate(chunks):
                    if i and gap:
                        time.sleep(gap)
                    s.sendall(c.encode() if isinstance(c, str) else c)
                if half_close:
                    s.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass
            s.settimeout(read_timeout)
            deadline = time.monotonic() + max_total
            while time.monotonic() < deadline:
                try:
                    b = s.recv(65536)
                except (socket.timeout, ConnectionResetError):
                    break
                if not b:
                    break
                out += b
        if self.checked:
            openapi_check.check_raw(b"".join(chunks), bytes(out), self.gateway)
        return bytes(out)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"  # Debian's libfaketime


def skewed(d: Daemon, skew_ms: int) -> Daemon:
    """Make `d` run, from its next start(), with its clock skew_ms off the machine's (Debian's
    libfaketime: LD_PRELOAD + FAKETIME="+5s"; the process's clocks are shifted, nothing else).
    skewed(d, 0) takes the skew off again."""
    if skew_ms == 0:
        for k in ("LD_PRELOAD", "FAKETIME", "FAKETIME_DONT_RESET", "ASAN_OPTIONS"):
            d.env.pop(k, None)
        return d
    if not os.path.exists(FAKETIME_LIB):
        raise HarnessError(f"{FAKETIME_LIB} not found: run scripts/deps.sh (as root) to install libfaketime")
    d.env.update({"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": f"{skew_ms / 1000:+g}s",
                  "FAKETIME_DONT_RESET": "1",
                  # an ASan build must not refuse a preloaded library ahead of its runtime
                  "ASAN_OPTIONS": (os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")})
    return d


__all__ += ["FAKETIME_LIB", "skewed"]


# --------------------------------------------------------------------------- unittest


class HourglassTestCase(unittest.TestCase):
    """unittest.TestCase with harness helpers; everything it starts is cleaned up after the test.

    Every HTTP exchange with a daemon is checked against docs/openapi.yaml as it happens
    (openapi_check.py); one that does not match also fails the test at its end, even when the
    test (a retry loop, a thread) caught the Mismatch raised where the request was made."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        # registered first, so it runs last: after every cleanup that still talks to a daemon
        self.addCleanup(self._check_openapi_exchanges)
        self._openapi_mark = 0

    def run(self, result: Any = None) -> Any:
        self._openapi_mark = openapi_check.problem_mark()
        return super().run(result)

    def _check_openapi_exchanges(self) -> None:
        problems = openapi_check.problems_since(self._openapi_mark)
        if problems:
            self.fail(f"{len(problems)} HTTP exchange(s) of this test did not match docs/openapi.yaml:\n"
                      + "\n".join(problems[:10]))

    def namespace(self) -> Namespace:
        """A fresh namespace on the shared stack."""
        return shared_stack().fresh_namespace()

    def start_daemon(self, overrides: Mapping[str, Mapping[str, Any]] | None = None,
                     namespace: Namespace | None = None, timeout: float = 30.0, **kw: Any) -> Daemon:
        """A started Daemon (fresh namespace on the shared stack unless given), stopped after the test."""
        d = Daemon(namespace=namespace, overrides=overrides, **kw)
        self.addCleanup(d.close)
        return d.start(timeout)

    def private_stack(self, **kw: Any) -> Stack:
        return private_stack(self, **kw)

    def private_redis(self, **kw: Any) -> RedisServer:
        r = RedisServer(**kw)
        self.addCleanup(r.close)
        return r.start()

    def private_mariadb(self, **kw: Any) -> MariaDBServer:
        m = MariaDBServer(**kw)
        self.addCleanup(m.close)
        return m.start()

    def private_rabbitmq(self, **kw: Any) -> "RabbitMQServer":
        """A RabbitMQ of its own (for tests that stop, pause, kill or restart it; several
        seconds to start), closed after the test."""
        r = RabbitMQServer(**kw)
        self.addCleanup(r.close)
        return r.start()

    def assertStatus(self, response: Response, status: int, msg: str = "") -> Response:
        """Assert the HTTP status; the failure message shows the body."""
        if response.status != status:
            self.fail(f"{msg + ': ' if msg else ''}expected HTTP {status}, got {response.status}: "
                      f"{response.body[:1000]!r}")
        return response


# --------------------------------------------------------------------------- nginx

NGINX_CONF = REPO_ROOT / "conf" / "nginx.conf"

_NGINX_TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def nginx_local_config(template: str, dir: str, listen: str, upstream_lines: Iterable[str],
                       server_extra: Iterable[str] = ()) -> str:
    """conf/nginx.conf (its text in `template`) rewritten to run from `dir` without root paths:

    * `user` dropped (nginx keeps the user it was started as, or `nobody` under root);
    * pid, error_log and access_log under dir; every *_temp_path under dir/tmp;
    * the first `listen` of the server block becomes `listen <listen>;` (further ones dropped);
    * the `server`/`include` lines of `upstream hourglass` replaced by upstream_lines
      (e.g. ["include /x/upstream.conf;"] or ["server 127.0.0.1:8081;"]);
    * server_extra lines added at the top of the server block (e.g. an add_header).

    Everything else — timeouts, retries, keepalive, locations — is the example as shipped, so
    tests and scripts/fleet.sh exercise the real file. scripts/fleet.sh does the same in awk.
    Raises HarnessError when the template lacks a part the rewrite relies on."""
    out: list[str] = []
    stack: list[str] = []  # names of the open blocks
    seen = {"pid": False, "http": False, "upstream": False, "server": False, "listen": False}
    for line in template.splitlines():
        s = line.strip()
        depth = len(stack)
        if s.startswith("#") or not s:
            out.append(line)
            continue
        word = s.split(None, 1)[0].rstrip(";{")
        ind = line[:len(line) - len(line.lstrip())]
        if s.endswith("{"):
            stack.append(" ".join(s[:-1].split()))
            out.append(line)
            name = stack[-1]
            if name == "http" and depth == 0:
                seen["http"] = True
                out += [f"{ind}    {p}_temp_path {dir}/tmp/{p};" for p in _NGINX_TEMP_PATHS]
            elif name == "upstream hourglass":
                seen["upstream"] = True
                out += [f"{ind}    {u}" for u in upstream_lines]
            elif name == "server" and stack[:-1] == ["http"]:
                seen["server"] = True
                out += [f"{ind}    {x}" for x in server_extra]
            continue
        if s == "}":
            if stack:
                stack.pop()
            out.append(line)
            continue
        if depth == 0 and word == "user":
            continue
        if word == "pid":
            seen["pid"] = True
            out.append(f"{ind}pid {dir}/nginx.pid;")
        elif word == "error_log":
            out.append(f"{ind}error_log {dir}/error.log info;")
        elif word == "access_log":
            parts = s.rstrip(";").split()
            rest = " ".join(parts[2:]) if len(parts) > 2 and parts[1] != "off" else ""
            out.append(f"{ind}access_log {dir}/access.log{' ' + rest if rest else ''};")
        elif stack and stack[-1] == "upstream hourglass" and word in ("server", "include"):
            continue
        elif stack == ["http", "server"] and word == "listen":
            if not seen["listen"]:
                seen["listen"] = True
                out.append(f"{ind}listen {listen};")
        else:
            out.append(line)
    missing = [k for k, v in seen.items() if not v]
    if missing:
        raise HarnessError(f"nginx template lacks: {', '.join(missing)} (expected the shape of {NGINX_CONF})")
    return "\n".join(out) + "\n"


def nginx_binary() -> str:
    return _which("nginx")


class NginxServer(_Process):
    """A real nginx (master + workers) on 127.0.0.1:<free port> in front of hourglassd instances,
    running conf/nginx.conf as shipped except for paths, the listen address and the upstream
    servers (nginx_local_config). The upstream `server` lines live in an include file,
    dir/upstream.conf, which scripts/nginx-health.sh can rewrite (reload_command()).

    Runs in the foreground (`-g "daemon off;"`), so it is our child; close() stops the master and
    then SIGKILLs whatever is left of its process group (workers). If the test process is
    SIGKILLed, the master dies with it but its workers do not (nginx has no parent-death
    check): `pkill -P 1 -f hg-nginx-` is not done for you.

    HTTP helpers are Daemon's (request, push, get, finish, stats, health, ...), aimed at nginx.
    """

    kind = "nginx"
    gateway = True  # its own 502/504 (no daemon answered) are not checked against the description
    checked = True

    # Borrowed: they only use HOST, self.port and self.default_headers.
    request = Daemon.request
    push = Daemon.push
    get = Daemon.get
    finish = Daemon.finish
    release = Daemon.release
    touch = Daemon.touch
    delete = Daemon.delete
    job = Daemon.job
    dead = Daemon.dead
    restore = Daemon.restore
    health = Daemon.health
    stats = Daemon.stats
    metrics = Daemon.metrics
    connection = Daemon.connection

    def __init__(self, upstreams: Iterable[str], port: int | None = None, dir: str | None = None,
                 server_params: str = "max_fails=2 fail_timeout=5s", server_extra: Iterable[str] = (),
                 template: str | os.PathLike = NGINX_CONF) -> None:
        super().__init__(dir)
        if os.geteuid() == 0:
            # Workers run as nobody under root: they must reach dir/tmp (temp files).
            os.chmod(self.dir, 0o755)
        self.binary = nginx_binary()
        self._auto_port = port is None
        self.port = port or free_port()
        self.upstreams = list(upstreams)
        self.server_params = server_params
        self.server_extra = list(server_extra)
        self.template = Path(template).read_text()
        self.config_path = os.path.join(self.dir, "nginx.conf")
        self.upstream_path = os.path.join(self.dir, "upstream.conf")
        self.access_log_path = os.path.join(self.dir, "access.log")
        self.error_log_path = os.path.join(self.dir, "error.log")
        self.default_headers: dict[str, str] = {}

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def upstream_text(self, down: Iterable[str] = ()) -> str:
        down = set(down)
        return "".join(f"server {u} {self.server_params}{' down' if u in down else ''};\n"
                       for u in self.upstreams)

    def write_config(self) -> str:
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        if not os.path.exists(self.upstream_path):
            with open(self.upstream_path, "w") as f:
                f.write(self.upstream_text())
        text = nginx_local_config(self.template, self.dir, self.address,
                                  [f"include {self.upstream_path};"], self.server_extra)
        with open(self.config_path, "w") as f:
            f.write(text)
        return self.config_path

    def _base_argv(self) -> list[str]:
        return [self.binary, "-p", self.dir + "/", "-c", self.config_path, "-e", self.log_path]

    def check_config(self) -> subprocess.CompletedProcess:
        """`nginx -t` on the generated config; returncode 0 = valid."""
        self.write_config()
        return _run(self._base_argv() + ["-t", "-q"], timeout=30, what="nginx -t")

    def reload_command(self) -> str:
        """A shell command that reloads this nginx (for scripts/nginx-health.sh -r)."""
        import shlex
        return " ".join(shlex.quote(a) for a in self._base_argv() + ["-s", "reload"])

    def start(self, timeout: float = 30.0) -> "NginxServer":
        """Write the configs, check them (nginx -t), start, wait until the port accepts."""
        if self.running:
            return self
        for attempt in range(3):
            r = self.check_config()
            if r.returncode != 0:
                raise self._fail(f"nginx -t failed for {self.config_path}:\n{r.stdout}{r.stderr}")
            self._spawn(self._base_argv() + ["-g", "daemon off;"])
            try:
                wait_until(self._ready, timeout, 0.02, f"nginx on {self.address}")
                return self
            except TimeoutError:
                self.kill()
                raise self._fail(f"nginx did not accept connections on {self.address} within {timeout:g} s")
            except HarnessError:
                if self._auto_port and attempt < 2 and "in use" in self.log_tail(10):
                    self.port = free_port()
                    continue
                raise
        raise AssertionError("unreachable")

    def _ready(self) -> bool:
        return self._accepting("nginx")

    def reload(self) -> None:
        """SIGHUP: re-read the config and the upstream file (new workers; old ones finish)."""
        self.signal(signal.SIGHUP)

    def set_upstreams(self, down: Iterable[str] = (), reload: bool = True) -> None:
        """Rewrite the upstream include file, marking `down` addresses down, and reload."""
        with open(self.upstream_path, "w") as f:
            f.write(self.upstream_text(down))
        if reload:
            self.reload()

    def access_log(self) -> str:
        try:
            with open(self.access_log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def error_log(self) -> str:
        try:
            with open(self.error_log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (fast shutdown) and wait; leftover workers are killed."""
        try:
            return self._terminate(signal.SIGTERM, timeout)
        finally:
            self._kill_group()

    def kill(self) -> int | None:
        rc = super().kill()
        self._kill_group()
        return rc

    def _kill_group(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # start_new_session: pgid = master pid

    def close(self, check: bool = True) -> None:
        if self._closed:
            return
        try:
            if self.running:
                with contextlib.suppress(HarnessError):
                    self._terminate(signal.SIGTERM, 15)
        finally:
            self._kill_group()
            super().close(check)


__all__ += ["NGINX_CONF", "nginx_local_config", "nginx_binary", "NginxServer"]


# --------------------------------------------------------------------------- RabbitMQ

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # Debian's; /usr/sbin's wrapper su's to rabbitmq
_rabbit_counter = 0
_rabbit_counter_lock = threading.Lock()


def amqp_handshake(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when host:port answers the AMQP 0-9-1 protocol header with connection.start (a
    broker that is up and serving, not just a port that accepts). Standard library only."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"AMQP\x00\x00\x09\x01")
            s.settimeout(timeout)
            head = b""
            while len(head) < 11:
                b = s.recv(11 - len(head))
                if not b:
                    return False
                head += b
            # method frame (1) on channel 0, class 10 (connection) method 10 (start)
            return head[0] == 1 and head[7:11] == b"\x00\x0a\x00\x0a"
    except OSError:
        return False


class _Epmd(_Process):
    """The Erlang port mapper of one RabbitMQServer, on its own loopback port, in the
    broker's dir; started and stopped by the broker (never the system's epmd on 4369)."""

    kind = "epmd"

    def __init__(self, dir: str) -> None:
        super().__init__(dir)
        _unregister(self)  # the broker closes it, after itself
        self.port = free_port()

    def start(self, timeout: float = 10.0) -> "_Epmd":
        if self.running:
            return self
        self._spawn([_which("epmd"), "-port", str(self.port), "-address", HOST])
        try:
            wait_until(self._ready, timeout, 0.02, f"epmd on {HOST}:{self.port}")
        except TimeoutError:
            self.kill()
            raise self._fail(f"epmd did not listen on {HOST}:{self.port} within {timeout:g} s") from None
        return self

    def _ready(self) -> bool:
        return self._accepting("epmd")


class RabbitMQServer(_Process):
    """A private RabbitMQ (Debian's rabbitmq-server) on 127.0.0.1:<free port>.

    Everything is in its temp dir: config (RABBITMQ_CONFIG_FILE, an empty
    RABBITMQ_CONF_ENV_FILE so /etc/rabbitmq is never read), mnesia (RABBITMQ_MNESIA_BASE),
    HOME (the Erlang cookie); the log goes to the harness log (stdout). A unique node name,
    free loopback ports for AMQP (RABBITMQ_NODE_PORT), Erlang distribution
    (RABBITMQ_DIST_PORT) and its own epmd (ERL_EPMD_PORT, started first and stopped last), no
    plugins. Never the system's rabbitmq service or epmd. The Erlang VM is our direct child
    (RABBITMQ_ALLOW_INPUT makes the start script exec it, -noinput keeps its shell off), so
    signals, kill() and the parent-death signal reach it.

    Start takes several seconds (about 6 on an idle 2-core machine): use shared_rabbitmq()
    unless the test stops, pauses, kills or restarts the broker. restart() keeps the node name,
    port and mnesia dir, so durable queues and their persistent messages survive it.
    `url` is amqp://guest:guest@127.0.0.1:<port>/ (guest may log in from loopback).

    pika (Debian's python3-pika) is imported only by the consumer helpers (channel(), ...).
    """

    kind = "rabbitmq"

    def __init__(self, port: int | None = None, dir: str | None = None) -> None:
        global _rabbit_counter
        super().__init__(dir)
        self._auto_port = port is None
        self.port = port or free_port()
        self.dist_port = free_port()
        with _rabbit_counter_lock:
            _rabbit_counter += 1
            n = _rabbit_counter
        self.node = f"hg{os.getpid()}n{n}@localhost"
        self.epmd = _Epmd(self.dir)
        self.config_path = os.path.join(self.dir, "rabbitmq.conf")
        self.mnesia_dir = os.path.join(self.dir, "mnesia")
        self.started_once = False

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{HOST}:{self.port}/"

    def _write_config(self) -> None:
        os.makedirs(self.mnesia_dir, exist_ok=True)
        with open(self.config_path, "w") as f:
            f.write(f"listeners.tcp.default = {HOST}:{self.port}\n"
                    "disk_free_limit.absolute = 1MB\n"   # a full /tmp must not block publishers
                    "log.console = true\n"
                    "log.console.level = info\n"
                    "log.file = false\n")
        with open(os.path.join(self.dir, "enabled_plugins"), "w") as f:
            f.write("[].\n")
        open(os.path.join(self.dir, "rabbitmq-env.conf"), "w").close()

    def _env(self) -> dict[str, str]:
        return {
            "HOME": self.dir,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": HOST,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd.port),
            "ERL_EPMD_ADDRESS": HOST,
            "RABBITMQ_CONFIG_FILE": self.config_path,
            "RABBITMQ_ADVANCED_CONFIG_FILE": os.path.join(self.dir, "advanced.config"),  # absent
            "RABBITMQ_CONF_ENV_FILE": os.path.join(self.dir, "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(self.dir, "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": self.mnesia_dir,
            "RABBITMQ_LOG_BASE": os.path.join(self.dir, "log"),
            "RABBITMQ_PID_FILE": os.path.join(self.dir, "rabbitmq.pid"),
            "RABBITMQ_ALLOW_INPUT": "true",
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": f"-noinput -kernel inet_dist_use_interface {{127,0,0,1}}",
        }

    def start(self, timeout: float = 90.0) -> "RabbitMQServer":
        """Start epmd (if needed) and the broker; wait until it answers the AMQP handshake."""
        if self.running:
            return self
        if not os.path.exists(RABBITMQ_SERVER):
            raise HarnessError(f"{RABBITMQ_SERVER} not found: run scripts/deps.sh (as root) to install rabbitmq-server")
        self.epmd.start()
        for attempt in range(3):
            self._write_config()
            self._spawn([RABBITMQ_SERVER], env=self._env())
            try:
                wait_until(self._ready, timeout, 0.1, f"rabbitmq on {self.address}")
                self.started_once = True
                return self
            except TimeoutError:
                self.kill()
                raise self._fail(f"rabbitmq did not answer AMQP on {self.address} within {timeout:g} s") from None
            except HarnessError:
                tail = self.log_tail(30)
                if (not self.started_once and attempt < 2
                        and ("eaddrinuse" in tail or "address already in use" in tail.lower())):
                    if self._auto_port:
                        self.port = free_port()
                    self.dist_port = free_port()
                    continue
                raise
        raise AssertionError("unreachable")

    def _ready(self) -> bool:
        if not self.running:
            raise self._fail(f"rabbitmq exited with status {self.returncode} during startup")
        return amqp_handshake(HOST, self.port, timeout=2)

    def stop(self, timeout: float = 60.0) -> int | None:
        """Clean shutdown (SIGTERM: clients get connection.close 320) and wait; epmd stays."""
        return self._terminate(signal.SIGTERM, timeout)

    def restart(self, timeout: float = 90.0) -> "RabbitMQServer":
        """stop() + start(): same node, port and mnesia dir."""
        self.stop()
        return self.start(timeout)

    def close(self, check: bool = True) -> None:
        if self._closed:
            return
        try:
            if self.running:
                with contextlib.suppress(HarnessError):
                    self._terminate(signal.SIGTERM, 30)
        finally:
            try:
                self.epmd.close(check)
            finally:
                super().close(check)

    # -- consumers (pika, imported here only)
    def connection(self, timeout: float = 10.0) -> Any:
        """A pika.BlockingConnection to this broker as guest; the caller closes it."""
        import pika  # Debian's python3-pika (scripts/deps.sh)
        params = pika.ConnectionParameters(host=HOST, port=self.port, virtual_host="/",
                                           credentials=pika.PlainCredentials("guest", "guest"),
                                           connection_attempts=1, socket_timeout=timeout,
                                           blocked_connection_timeout=timeout)
        return pika.BlockingConnection(params)

    @contextlib.contextmanager
    def channel(self) -> Any:
        """`with broker.channel() as ch:` a pika channel on a fresh connection, closed after."""
        conn = self.connection()
        try:
            yield conn.channel()
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def declare(self, queue: str, exchange: str | None = None, routing_key: str | None = None,
                exchange_type: str = "direct") -> None:
        """A durable queue, and (when exchange is given) a durable exchange with the queue bound
        to it by routing_key (default: the queue's name)."""
        with self.channel() as ch:
            ch.queue_declare(queue=queue, durable=True)
            if exchange:
                ch.exchange_declare(exchange=exchange, exchange_type=exchange_type, durable=True)
                ch.queue_bind(queue=queue, exchange=exchange, routing_key=routing_key or queue)

    def get_all(self, queue: str, limit: int = 100000) -> list[tuple[Any, Any, bytes]]:
        """Take every message now in `queue` (basic.get with ack): [(method, properties, body)]."""
        out = []
        with self.channel() as ch:
            while len(out) < limit:
                method, props, body = ch.basic_get(queue=queue, auto_ack=True)
                if method is None:
                    break
                out.append((method, props, body))
        return out

    def count(self, queue: str) -> int:
        """Messages ready in a queue (passive declare)."""
        with self.channel() as ch:
            return ch.queue_declare(queue=queue, passive=True).method.message_count


_shared_rabbit: RabbitMQServer | None = None
_shared_rabbit_error: BaseException | None = None


def shared_rabbitmq() -> RabbitMQServer:
    """The process-wide RabbitMQ, started on first use and stopped at exit. Never stop,
    pause or restart it: use HourglassTestCase.private_rabbitmq() for that. Tests share it by
    using queue and exchange names of their own (unique_name())."""
    global _shared_rabbit, _shared_rabbit_error
    with _shared_lock:
        if _shared_rabbit is None:
            if _shared_rabbit_error is not None:
                raise HarnessError(f"the shared RabbitMQ failed to start earlier: {_shared_rabbit_error}")
            r = RabbitMQServer()
            try:
                _shared_rabbit = r.start()
            except BaseException as e:
                _shared_rabbit_error = e
                r.close(check=False)
                raise
        return _shared_rabbit


def unique_name(prefix: str = "q") -> str:
    """A queue/exchange name no other test in this process uses."""
    return f"{prefix}-{secrets.token_hex(5)}"


def tool_binary(name: str) -> str:
    """A program the Makefile builds from tests/tools/NAME.c: $HG_TOOLS/NAME (set by `make
    integration`), else build/tests/NAME."""
    base = os.environ.get("HG_TOOLS") or str(REPO_ROOT / "build" / "tests")
    path = os.path.join(base, name)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise HarnessError(f"{path} is not an executable file: build it with `make integration` "
                           f"(or set HG_TOOLS to the directory holding it)")
    return os.path.abspath(path)


__all__ += ["RABBITMQ_SERVER", "amqp_handshake", "RabbitMQServer", "shared_rabbitmq", "unique_name",
            "tool_binary"]
