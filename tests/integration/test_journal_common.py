"""Shared helpers for the test_journal_* integration tests (MySQL journal, durability, restore).

No tests here: unittest discovery imports this module and finds none. The other
test_journal_*.py files import it (tests/integration is the discovery top level, so it is on
sys.path).
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any, Callable, Iterable, Mapping

from harness import Daemon, MariaDBServer, journal_idle, now_ms, wait_healthy, wait_until  # noqa: F401 (for the test modules)

LIVE_STATES = ("delayed", "ready", "reserved")


def pmap(fn: Callable[[Any], Any], items: Iterable[Any], workers: int = 6) -> list[Any]:
    """fn over items on a small thread pool, results in order (exceptions propagate)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(fn, items))


def stats(d: Daemon) -> dict:
    r = d.stats(timeout=10)
    if r.status != 200:
        raise AssertionError(f"/stats answered {r.status}: {r.text[:300]}")
    return r.json()


def totals(d: Daemon) -> dict:
    t = stats(d)["totals"]
    return {k: t.get(k, 0) for k in ("delayed", "ready", "reserved", "dead")}


def topic_counts(d: Daemon, topic: str) -> dict:
    t = stats(d)["topics"].get(topic, {})
    return {k: t.get(k, 0) for k in ("delayed", "ready", "reserved", "dead")}


def state_counts(query: Callable[[str], list]) -> dict:
    """message rows per state, e.g. {'ready': 10, 'finished': 3}."""
    return {s: int(n) for s, n in query("SELECT state, COUNT(*) FROM message GROUP BY state")}


def states_by_id(query: Callable[[str], list], ids: Iterable[str]) -> dict:
    """{id: state} from the message table for the given ids (missing ids left out)."""
    ids = list(ids)
    out: dict[str, str] = {}
    for i in range(0, len(ids), 1000):
        chunk = ids[i:i + 1000]
        if not chunk:
            continue
        rows = query(f"SELECT id, state FROM message WHERE id IN ({','.join(chunk)})")
        out.update({r[0]: r[1] for r in rows})
    return out


def consume(d: Daemon, topic: str, n: int, batch: int = 100) -> list[dict]:
    """Reserve up to n jobs of topic (count=batch at a time, no waiting); stops at the first
    204. Returns the job objects in delivery order."""
    got: list[dict] = []
    while len(got) < n:
        r = d.get(topic, timeout=0, count=min(batch, n - len(got)))
        if r.status == 204:
            break
        if r.status != 200:
            raise AssertionError(f"GET /get/{topic} answered {r.status}: {r.text[:300]}")
        body = r.json()
        got += body if isinstance(body, list) else [body]
    return got


def drain(d: Daemon, topic: str, batch: int = 100) -> list[dict]:
    """Reserve every ready job of topic right now (until a 204)."""
    return consume(d, topic, 10 ** 9, batch)


def expect_ok(r, what: str) -> Any:
    if r.status != 200:
        raise AssertionError(f"{what}: expected 200, got {r.status}: {r.text[:300]}")
    return r.json()


def mysql_overrides(m: MariaDBServer, database: str, **extra: Any) -> dict:
    """A [mysql] section pointing a daemon at a private MariaDB."""
    return {"mysql": {"host": m.address.split(":")[0], "port": m.port, "socket": "",
                      "database": database, **extra}}


def wait_or_fail(tc, predicate: Callable[[], Any], timeout: float, what: str,
                 detail: Callable[[], str] | None = None) -> Any:
    """wait_until, but a timeout is a test failure (with detail()) rather than an error."""
    try:
        return wait_until(predicate, timeout, 0.1, what)
    except TimeoutError as e:
        tc.fail(f"{e}" + (f"\n{detail()}" if detail else ""))


def start_ready(tc, overrides: Mapping[str, Mapping[str, Any]] | None = None, **kw: Any) -> Daemon:
    """tc.start_daemon(...) and wait until /health says it is ready."""
    return wait_healthy(tc, tc.start_daemon(overrides, **kw))
