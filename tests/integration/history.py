"""A fault run's history: every request and its answer, the workload that makes them, and the
checker that judges them against the contract (issue 31, "Faults of a real fleet").

Not a test module (discovery only picks up test_*.py): tests/integration/test_fault_suite.py and
tests/soak.py drive it through faults.py; test_history_checker.py checks the checker.

* Recorder — every request of a run (push, get, finish, delete, and the admin's /reStore) with
  the instance it went to, its start and end (monotonic seconds and unix ms: the machine's clock,
  which Redis shares, is the reference), its status (0 = no answer: refused, reset or timed out)
  and the answer's fields that matter: push: id, runAt, maybeQueued; get: each job's id, runAt,
  attempt, leaseUntil and the push it came from (its body is {"p": <push number>}); finish and
  delete: the id and the state answered.
* Workload — producers, consumers (long-poll, then finish, a few left to run out their lease)
  and deleters over a few topics through the fleet's instances, bounded in jobs and in time.
* check() — the properties below, for one run: a list of Violation (empty = the run kept the
  contract) and the run's figures.

Properties (PROPERTIES, each reported under its name):
  lost          every push answered 200, with no delete that could have succeeded, is delivered
  early         no delivery answered more than 10 ms before the job's due time: the later of its
                runAt and (push sent + delay), by the machine's clock
  after_delete  nothing delivered by a get sent after its delete was answered 200
  after_finish  nothing delivered by a get sent after its finish was answered 200 — unless Redis
                lost acknowledged writes (a Window's `losses`) between the finish and
                FINISH_JOURNAL_S after it (a loss span overlapping that time) (the contract's at-least-once after a Redis loss)
  lease         no second delivery answered before the first one's leaseUntil (-10 ms), unless
                Redis lost writes in between
  unique        one id per push, one push per id, no id twice in one answer, one MySQL row per push
  phantom       every delivered job comes from a push of the run that was not refused (a 503
                without maybeQueued "queued nothing")
  final_state   each MySQL row's final state is one the history allows: `deleted` only with a
                delete request, `finished` only with a finish request, `deleted` if a delete was
                answered 200, `finished` if a finish was (and no delete asked), never `aborted` or
                missing for a push answered 200, `absent`/`aborted` for a refused push, `dead`
                only after `tries` deliveries (lost answers counted), never `far`
  unavailable   503s and unanswered requests only while a fault lasts plus its recovery bound,
                and never on an instance the fault is not about (a Window's bystanders)
  status        every answer is one its endpoint may give (no 500, no 4xx to valid requests)
  recovery      after the heal every instance's /health is 200 within the recovery bound (+1 s,
                the poll's slack), /reStore, when the fault needs one, answered 200 within it,
                and at the end every journal is idle and every /health says "ok", no duty stuck
  loss          at the end no instance's /health names a Redis loss (redisLoss) or a fenced shard:
                none at all after a fault that lost no Redis write, none left after the restore
                of one that did
"""

from __future__ import annotations

import dataclasses
import http.client
import itertools
import json
import random
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from harness import Daemon, Namespace, now_ms

PROPERTIES = ("lost", "early", "after_delete", "after_finish", "lease", "unique", "phantom",
              "final_state", "unavailable", "status", "recovery", "loss")
EARLY_MS = 10            # the contract's tolerance for a delivery before its due time
FINISH_JOURNAL_S = 2.0   # a finish reaches MySQL within this (journaled in batches "soon after")
UNAVAILABLE = (0, 503)   # no answer, or 503: the request was not served
HEALTH_SLACK_S = 1.0     # /health is polled: recovery is judged against the bound plus this
ALLOWED_STATUS = {
    "push": {200, 503, 0},
    "get": {200, 204, 503, 0},
    "finish": {200, 404, 503, 0},
    "delete": {200, 404, 503, 0},
}
WORKLOAD_KINDS = tuple(ALLOWED_STATUS)
LIVE_STATES = ("delayed", "ready", "reserved")


# --------------------------------------------------------------------------- history


@dataclass
class Op:
    """One request and its answer."""

    n: int                       # issue order
    kind: str                    # push | get | finish | delete | restore | health
    inst: str                    # instance name ("A", "B", ...)
    t0: float                    # sent, monotonic s
    t1: float                    # answered (or given up), monotonic s
    u0: int                      # sent, unix ms
    u1: int                      # answered, unix ms
    status: int                  # HTTP status; 0 = no answer
    err: str = ""                # the answer's message, or the client's exception
    pseq: int | None = None      # push: the push's number (the job's body is {"p": pseq})
    topic: str | None = None
    delay: int | None = None     # push: ms asked
    tries: int | None = None
    id: str | None = None        # push: the id answered; finish/delete: the id asked
    run_at: int | None = None    # push: runAt answered
    maybe: list[str] = field(default_factory=list)   # push 503: maybeQueued
    jobs: list[dict] = field(default_factory=list)   # get: {"id","runAt","attempt","leaseUntil","p"}
    state: str | None = None     # finish/delete: the state answered
    answer: Any = None           # restore: the answer


@dataclass
class Window:
    """One fault of a run, on the monotonic clock: injected at `inject`, healed at `heal`;
    503s are allowed from inject until heal + bound, except on `bystanders`. `losses`: spans
    (start, end) within which Redis lost acknowledged writes (a master killed, a restart from an
    old snapshot, its data deleted): the fault cannot name the instant, only that it came after
    `start` and before `end` — a request sent before `end` may have run before the loss.
    `recovered`: seconds from heal until every instance's /health was 200 (None: never)."""

    name: str
    inject: float
    heal: float
    bound: float
    losses: list[tuple[float, float]] = field(default_factory=list)
    bystanders: list[str] = field(default_factory=list)
    recovered: float | None = 0.0
    restored: bool | None = None   # /reStore answered 200 (None: the fault needs none)
    health_end: dict = field(default_factory=dict)   # instance -> its /health answer at the end


@dataclass
class Violation:
    prop: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.prop}] {self.detail}"


def save(path: str, ops: Iterable[Op], windows: Iterable[Window] = (), rows: Any = None) -> None:
    """The history as JSON lines (ops, then windows, then MySQL's rows): for a failed run."""
    with open(path, "w") as f:
        for op in ops:
            f.write(json.dumps({"op": dataclasses.asdict(op)}) + "\n")
        for w in windows:
            f.write(json.dumps({"window": dataclasses.asdict(w)}) + "\n")
        if rows is not None:
            f.write(json.dumps({"rows": rows}) + "\n")


def load(path: str) -> tuple[list[Op], list[Window], Any]:
    ops, windows, rows = [], [], None
    with open(path) as f:
        for line in f:
            obj = json.loads(line)
            if "op" in obj:
                ops.append(Op(**obj["op"]))
            elif "window" in obj:
                windows.append(Window(**obj["window"]))
            else:
                rows = obj["rows"]
    return ops, windows, rows


class Recorder:
    """Sends requests to named instances and records each with its answer (thread-safe).
    A client gives up after http_timeout (a get: its long-poll + 4 s), as a client of a hung
    instance would, and goes on with the next request.
    `routable` names the instances the workload spreads its requests over (an instance
    that is down stays in it: its requests fail, as a client's without a balancer would)."""

    def __init__(self, instances: Mapping[str, Daemon], http_timeout: float = 6.0) -> None:
        self.instances: dict[str, Daemon] = dict(instances)
        self.routable: list[str] = list(instances)
        self.http_timeout = http_timeout
        self.ops: list[Op] = []
        self.lock = threading.Lock()
        self._n = itertools.count()
        self.t_start = time.monotonic()

    def add_instance(self, name: str, d: Daemon, routable: bool = True) -> None:
        with self.lock:
            self.instances[name] = d
            if routable and name not in self.routable:
                self.routable.append(name)

    def pick(self, rng: random.Random) -> str:
        with self.lock:
            return rng.choice(self.routable)

    def snapshot(self) -> list[Op]:
        with self.lock:
            return list(self.ops)

    def _call(self, kind: str, inst: str, send: Callable[[Daemon], Any],
              parse: Callable[[Op, Any], None], **fields: Any) -> Op:
        d = self.instances[inst]
        n = next(self._n)
        t0, u0 = time.monotonic(), now_ms()
        status, err, resp = 0, "", None
        try:
            resp = send(d)
            status = resp.status
        except (OSError, http.client.HTTPException, TimeoutError) as e:
            err = f"{type(e).__name__}: {e}"[:200]
        t1, u1 = time.monotonic(), now_ms()
        op = Op(n=n, kind=kind, inst=inst, t0=t0, t1=t1, u0=u0, u1=u1, status=status, err=err, **fields)
        if resp is not None:
            try:
                body = resp.json() if resp.body else None
            except ValueError:
                body = None
                op.err = resp.text[:200]
            if isinstance(body, dict) and status != 200:
                op.err = str(body.get("message") or body.get("error") or "")[:200]
            if status == 200 or (status == 503 and isinstance(body, dict)):
                try:
                    parse(op, body)
                except (KeyError, TypeError, ValueError) as e:
                    op.err = f"unreadable answer ({e}): {resp.text[:200]}"
        with self.lock:
            self.ops.append(op)
        return op

    # -- the endpoints
    def push(self, inst: str, pseq: int, topic: str, delay: int, ttr: int, tries: int) -> Op:
        job = {"topic": topic, "body": {"p": pseq}, "delay": delay, "ttr": ttr, "tries": tries}

        def parse(op: Op, body: Any) -> None:
            if op.status == 200:
                op.id, op.run_at = str(body["id"]), int(body["runAt"])
            else:
                op.maybe = [str(x) for x in body.get("maybeQueued") or []]
        return self._call("push", inst, lambda d: d.push(job, timeout=self.http_timeout), parse,
                          pseq=pseq, topic=topic, delay=delay, tries=tries)

    def get(self, inst: str, topics: list[str], timeout: float, count: int) -> Op:
        def parse(op: Op, body: Any) -> None:
            if op.status != 200:
                return
            for j in body if isinstance(body, list) else [body]:
                b = j.get("body")
                op.jobs.append({"id": str(j["id"]), "runAt": int(j["runAt"]), "attempt": j.get("attempt"),
                                "leaseUntil": j.get("leaseUntil"),
                                "p": b.get("p") if isinstance(b, dict) else None})
        return self._call("get", inst, lambda d: d.get(topics, timeout=timeout, count=count,
                                                       http_timeout=timeout + 4.0), parse)

    def _act(self, kind: str, inst: str, jid: str) -> Op:
        def parse(op: Op, body: Any) -> None:
            if op.status == 200:
                op.state = body.get("state")
        send = (lambda d: d.finish(jid, timeout=self.http_timeout)) if kind == "finish" else \
            (lambda d: d.delete(jid, timeout=self.http_timeout))
        return self._call(kind, inst, send, parse, id=jid)

    def finish(self, inst: str, jid: str) -> Op:
        return self._act("finish", inst, jid)

    def delete(self, inst: str, jid: str) -> Op:
        return self._act("delete", inst, jid)

    def health(self, inst: str) -> Op:
        """GET /health (not part of the workload: a figure, not judged by `unavailable`)."""
        def parse(op: Op, body: Any) -> None:
            op.answer = {k: body.get(k) for k in ("status", "redis", "mysql", "redisLoss", "fencedShards",
                                                  "stuck") if k in body}
        return self._call("health", inst, lambda d: d.health(timeout=3), parse)

    def restore(self, inst: str, expire: bool = True, timeout: float = 60.0) -> Op:
        def parse(op: Op, body: Any) -> None:
            op.answer = body
        return self._call("restore", inst, lambda d: d.restore(expire=expire, timeout=timeout), parse)


# --------------------------------------------------------------------------- workload


@dataclass
class Spec:
    """What the workload does. Rates are for the whole run, over every instance."""

    producers: int = 3
    consumers: int = 4
    deleters: int = 1
    rate: float = 30.0          # pushes per second
    max_jobs: int = 600         # pushes in all, at most
    topics: int = 4
    max_delay_ms: int = 3000
    ttr_ms: int = 4000
    tries: int = 5
    delete_share: float = 0.08  # about this share of the pushes get a delete
    skip_finish: float = 0.03   # consumers leave this share unfinished (their lease runs out)
    longpoll_s: float = 1.0
    count: int = 4


def pending(ops: Iterable[Op]) -> set[str]:
    """Ids that must still be delivered: pushes answered 200 with no delivery yet and no delete
    that could have succeeded (answered 200, 503 or not at all)."""
    acked: dict[str, Op] = {}
    delivered: set[str] = set()
    maybe_deleted: set[str] = set()
    for op in ops:
        if op.kind == "push" and op.status == 200 and op.id:
            acked[op.id] = op
        elif op.kind == "get" and op.status == 200:
            delivered.update(j["id"] for j in op.jobs)
        elif op.kind == "delete" and op.status in (200,) + UNAVAILABLE:
            maybe_deleted.add(op.id)
    return set(acked) - delivered - maybe_deleted


class Workload:
    """Producers, consumers and deleters over `spec.topics` topics, through rec's instances."""

    def __init__(self, rec: Recorder, spec: Spec, seed: int, topic_prefix: str = "fs") -> None:
        self.rec = rec
        self.spec = spec
        self.seed = seed
        self.topics = [f"{topic_prefix}.{i}" for i in range(spec.topics)]
        self.producing = threading.Event()
        self.consuming = threading.Event()
        self._pseq = itertools.count(1)
        self._lock = threading.Lock()
        self._deletable: list[tuple[int, str]] = []   # (runAt, id) of pushes answered 200
        self.threads: list[threading.Thread] = []
        self.due_by: float | None = None   # monotonic: no push due later than this (see finish_by)

    def start(self) -> "Workload":
        self.producing.set()
        self.consuming.set()
        roles = ([self._produce] * self.spec.producers + [self._consume] * self.spec.consumers
                 + [self._delete] * self.spec.deleters)
        for i, fn in enumerate(roles):
            t = threading.Thread(target=fn, args=(random.Random(self.seed * 1000 + i),), daemon=True,
                                 name=f"workload-{fn.__name__.strip('_')}-{i}")
            t.start()
            self.threads.append(t)
        return self

    def _produce(self, rng: random.Random) -> None:
        period = self.spec.producers / self.spec.rate
        next_at = time.monotonic() + rng.random() * period
        while self.producing.is_set():
            wait = next_at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if not self.producing.is_set():
                return
            next_at += period
            with self._lock:
                pseq = next(self._pseq)
            if pseq > self.spec.max_jobs:
                return
            delay = rng.randrange(0, self.spec.max_delay_ms + 1)
            if self.due_by is not None:
                delay = min(delay, max(0, int((self.due_by - time.monotonic()) * 1000)))
            op = self.rec.push(self.rec.pick(rng), pseq, rng.choice(self.topics), delay, self.spec.ttr_ms,
                               self.spec.tries)
            if op.status == 200 and op.id:
                with self._lock:
                    self._deletable.append((op.run_at or 0, op.id))
            next_at = max(next_at, time.monotonic() - period)  # a stalled request does not cause a burst

    def _consume(self, rng: random.Random) -> None:
        while self.consuming.is_set():
            op = self.rec.get(self.rec.pick(rng), self.topics, self.spec.longpoll_s, self.spec.count)
            if op.status in UNAVAILABLE:
                time.sleep(0.1)
                continue
            for j in op.jobs:
                if rng.random() < self.spec.skip_finish:
                    continue
                self.rec.finish(self.rec.pick(rng), j["id"])

    def _delete(self, rng: random.Random) -> None:
        period = self.spec.deleters / max(self.spec.rate * self.spec.delete_share, 0.1)
        while self.producing.is_set():
            time.sleep(period * (0.5 + rng.random()))
            with self._lock:
                # mostly jobs still delayed; now and then any (it may be reserved or finished)
                soon = now_ms() + 300
                pool = [x for x in self._deletable if x[0] > soon] if rng.random() < 0.8 else self._deletable
                if not pool:
                    continue
                pick = rng.choice(pool)
                self._deletable.remove(pick)
            self.rec.delete(self.rec.pick(rng), pick[1])

    def finish_by(self, t: float) -> None:
        """From now on no push is due after monotonic time t (delays are cut to fit): the last
        seconds of a run do not leave jobs due long after it, and the drain is short."""
        self.due_by = t

    def stop_producing(self) -> None:
        self.producing.clear()

    def drain(self, timeout: float) -> set[str]:
        """Keep consuming until every push answered 200 (and not deleted) was delivered, or
        timeout; the ids still pending."""
        deadline = time.monotonic() + timeout
        while True:
            left = pending(self.rec.snapshot())
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        self.producing.clear()
        self.consuming.clear()
        for t in self.threads:
            t.join(timeout)


# --------------------------------------------------------------------------- the checker


@dataclass
class Verdict:
    violations: list[Violation]
    figures: dict[str, Any]

    @property
    def ok(self) -> bool:
        return not self.violations

    def by_property(self) -> dict[str, list[Violation]]:
        out: dict[str, list[Violation]] = {}
        for v in self.violations:
            out.setdefault(v.prop, []).append(v)
        return out

    def report(self, limit: int = 8) -> str:
        lines = [f"{len(self.violations)} violation(s)" if self.violations else "no violation"]
        for prop, vs in self.by_property().items():
            lines.append(f"  {prop}: {len(vs)}")
            lines += [f"    {v.detail}" for v in vs[:limit]]
            if len(vs) > limit:
                lines.append(f"    ... and {len(vs) - limit} more")
        return "\n".join(lines)

    def figures_line(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.figures.items())


def _rel(t: float, w: Window | None) -> str:
    return f"{t - w.inject:+.2f} s from the fault" if w else f"t={t:.2f}"


def _op_str(op: Op, w: Window | None = None) -> str:
    what = f"{op.kind} #{op.n} via {op.inst}"
    if op.id:
        what += f" id={op.id}"
    if op.pseq is not None:
        what += f" p={op.pseq}"
    return f"{what} sent {_rel(op.t0, w)}, answered {op.status or 'nothing'} after {op.t1 - op.t0:.2f} s" + \
        (f" ({op.err})" if op.err else "")


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def check(ops: Iterable[Op], windows: Iterable[Window] = (), rows: Iterable[Iterable[Any]] | None = None,
          tries: int | None = None) -> Verdict:
    """Judge one run. rows: MySQL's final (id, state, p) of every message of the run, or None
    to skip final_state. tries: the pushes' tries (else each push's own)."""
    ops = sorted(ops, key=lambda o: o.n)
    windows = list(windows)
    w0 = windows[0] if windows else None
    bad: list[Violation] = []

    def v(prop: str, detail: str) -> None:
        bad.append(Violation(prop, detail))

    pushes: dict[int, Op] = {}
    deliveries: dict[str, list[tuple[Op, dict]]] = {}
    finishes: dict[str, list[Op]] = {}
    deletes: dict[str, list[Op]] = {}
    lost_gets = 0
    for op in ops:
        if op.kind in ALLOWED_STATUS and op.status not in ALLOWED_STATUS[op.kind]:
            v("status", f"{_op_str(op, w0)}: {op.kind} may not answer {op.status}")
        if op.kind == "push":
            if op.pseq in pushes:
                v("unique", f"push number {op.pseq} sent twice (a workload bug)")
            pushes[op.pseq] = op
        elif op.kind == "get":
            if op.status == 0:
                lost_gets += 1
            ids = [j["id"] for j in op.jobs]
            if len(ids) != len(set(ids)):
                v("unique", f"{_op_str(op, w0)} delivered one id twice: {ids}")
            for j in op.jobs:
                deliveries.setdefault(j["id"], []).append((op, j))
        elif op.kind == "finish":
            finishes.setdefault(op.id, []).append(op)
        elif op.kind == "delete":
            deletes.setdefault(op.id, []).append(op)

    def outcome(p: Op) -> str:
        if p.status == 200 and p.id:
            return "ack"
        if p.status == 503 and p.maybe:
            return "maybe"
        if p.status == 0 or (p.status >= 500 and p.status != 503):
            return "unknown"
        return "refused"

    # unique: one id per push, one push per id
    push_of_id: dict[str, int] = {}
    for pseq, p in pushes.items():
        for jid in ([p.id] if outcome(p) == "ack" else p.maybe if outcome(p) == "maybe" else []):
            other = push_of_id.setdefault(jid, pseq)
            if other != pseq:
                v("unique", f"id {jid} answered to two pushes: p={other} and p={pseq}")
    for jid, ds in deliveries.items():
        ps = {j.get("p") for _, j in ds}
        if len(ps) > 1:
            v("unique", f"id {jid} delivered with bodies of pushes {sorted(map(str, ps))}")
        for g, j in ds:
            p = pushes.get(j.get("p"))
            if p is None:
                v("phantom", f"{_op_str(g, w0)} delivered {jid} whose body names no push of this run: {j}")
                continue
            o = outcome(p)
            if o == "ack" and p.id != jid:
                v("unique", f"push p={p.pseq} was answered id {p.id} but delivered as {jid} ({_op_str(g, w0)})")
            elif o == "maybe" and jid not in p.maybe:
                v("unique", f"push p={p.pseq} named {p.maybe} maybeQueued but delivered as {jid}")
            elif o == "refused":
                v("phantom", f"{jid} delivered ({_op_str(g, w0)}) though its push was refused: {_op_str(p, w0)}")

    # lost
    for pseq, p in pushes.items():
        if outcome(p) != "ack" or p.id in deliveries:
            continue
        if any(d.status in (200,) + UNAVAILABLE for d in deletes.get(p.id, [])):
            continue
        dels = deletes.get(p.id, [])
        v("lost", f"{_op_str(p, w0)} (runAt {p.run_at}) was never delivered"
                  + (f"; its deletes: {', '.join(_op_str(d, w0) for d in dels)}" if dels else ""))

    def loss_between(a: float, b: float) -> bool:
        return any(start <= b and a <= end for w in windows for start, end in w.losses)

    # early, after_delete, after_finish, lease
    late: list[float] = []
    for jid, ds in deliveries.items():
        ds = sorted(ds, key=lambda x: x[0].t0)
        first = True
        for g, j in ds:
            p = pushes.get(j.get("p"))
            due = max(j.get("runAt") or 0, (p.run_at or 0) if p else 0,
                      (p.u0 + (p.delay or 0)) if p else 0)
            if g.u1 < due - EARLY_MS:
                v("early", f"{_op_str(g, w0)} delivered {jid} {due - g.u1} ms before its due time {due} "
                           f"(runAt {j.get('runAt')}, push {'sent at ' + str(p.u0) + ' + delay ' + str(p.delay) if p else '?'})")
            if first:
                late.append(g.u1 - due)
                first = False
        for d in deletes.get(jid, []):
            if d.status != 200:
                continue
            for g, _ in ds:
                if g.t0 > d.t1:
                    v("after_delete", f"{_op_str(g, w0)} delivered {jid} {g.t0 - d.t1:.2f} s after its delete "
                                      f"was answered 200 ({_op_str(d, w0)})")
        for f in finishes.get(jid, []):
            if f.status != 200:
                continue
            for g, _ in ds:
                if g.t0 > f.t1 and not loss_between(f.t0, min(g.t1, f.t1 + FINISH_JOURNAL_S)):
                    v("after_finish", f"{_op_str(g, w0)} delivered {jid} {g.t0 - f.t1:.2f} s after its finish "
                                      f"was answered 200 ({_op_str(f, w0)})")
        for (g1, j1), (g2, _) in zip(ds, ds[1:]):
            lease = j1.get("leaseUntil")
            if lease and g2.u1 < lease - EARLY_MS and not loss_between(g1.t0, g2.t1):
                v("lease", f"{jid} delivered again ({_op_str(g2, w0)}) {lease - g2.u1} ms before the lease of "
                           f"its delivery by {_op_str(g1, w0)} ran out (leaseUntil {lease})")

    # unavailable
    unavailable = [op for op in ops if op.kind in WORKLOAD_KINDS and op.status in UNAVAILABLE]
    for op in unavailable:
        excused = [w for w in windows if op.t1 >= w.inject and op.t0 <= w.heal + w.bound]
        if not excused:
            if w0 and op.t1 < w0.inject:
                when = "before the fault"
            elif w0:
                when = f"{op.t0 - w0.heal:.2f} s after the heal (bound {w0.bound:g} s)"
            else:
                when = "with no fault"
            v("unavailable", f"{_op_str(op, w0)}: {when}")
        elif all(op.inst in w.bystanders for w in excused):
            v("unavailable", f"{_op_str(op, w0)}: instance {op.inst} is not the fault's "
                             f"({', '.join(w.name for w in excused)})")

    # recovery
    for w in windows:
        if w.recovered is None or w.recovered > w.bound + HEALTH_SLACK_S:
            v("recovery", f"{w.name}: /health of every instance 200 only "
                          f"{'never' if w.recovered is None else f'{w.recovered:.2f} s'} after the heal (bound {w.bound:g} s)")
        if w.restored is False:
            v("recovery", f"{w.name}: /reStore never answered 200 within the bound")

    # loss
    for w in windows:
        for name, h in sorted(w.health_end.items()):
            if not isinstance(h, dict):
                continue
            why = ("though this fault lost no Redis write" if not w.losses
                   else "after the restore that followed the fault")
            if h.get("redisLoss"):
                v("loss", f"{w.name}: {name}'s /health still names redisLoss {h['redisLoss']} at the end, {why}")
            if h.get("fencedShards"):
                v("loss", f"{w.name}: {name}'s /health says {h['fencedShards']} shard(s) fenced at the end, {why}")
            if h.get("stuck"):
                v("recovery", f"{w.name}: {name}'s /health names stuck duties at the end: {h['stuck']}")
            elif h.get("status") != "ok" and not h.get("redisLoss") and not h.get("fencedShards"):
                v("recovery", f"{w.name}: {name}'s /health is not ok at the end: {h}")

    # final_state
    if rows is not None:
        row_of: dict[int, tuple[str, str]] = {}
        for jid, state, p in rows:
            jid = str(jid)
            try:
                pseq = int(p)
            except (TypeError, ValueError):
                v("phantom", f"MySQL row {jid} ({state}) has no push number in its body")
                continue
            if pseq in row_of:
                v("unique", f"push p={pseq} has two MySQL rows: {row_of[pseq][0]} and {jid}")
                continue
            row_of[pseq] = (jid, state)
        for pseq, p in pushes.items():
            o = outcome(p)
            jid, state = row_of.get(pseq, (None, None))
            if jid is None:
                if o == "ack":
                    v("final_state", f"{_op_str(p, w0)}: no MySQL row")
                continue
            if o == "ack" and jid != p.id:
                v("unique", f"push p={pseq} was answered id {p.id}; MySQL's row is {jid}")
            if o == "refused":
                if state != "aborted":
                    v("final_state", f"{_op_str(p, w0)} was refused but its row {jid} is '{state}' "
                                     f"(a 503 without maybeQueued queues nothing)")
                continue
            dels, fins = deletes.get(jid, []), finishes.get(jid, [])
            why = ""
            if state == "deleted" and not dels:
                why = "deleted without a delete request"
            elif state == "finished" and not fins:
                why = "finished without a finish request"
            elif any(d.status == 200 for d in dels) and state != "deleted":
                why = "a delete was answered 200"
            elif state == "aborted" and o == "ack":
                why = "aborted though the push was answered 200"
            elif state == "far":
                why = "in the far tier though due within seconds"
            elif state == "dead":
                seen = len(deliveries.get(jid, []))
                need = tries or p.tries or 1
                if seen + lost_gets < need:
                    why = f"dead after {seen} deliveries seen (+{lost_gets} gets unanswered) of {need} tries"
            elif not dels and state != "finished":
                acked_fins = [f for f in fins if f.status == 200]
                redelivered = any(g.t0 > f.t1 for f in acked_fins for g, _ in deliveries.get(jid, []))
                if acked_fins and not redelivered:
                    why = "a finish was answered 200"
            if why:
                v("final_state", f"job {jid} (p={pseq}) is '{state}' in MySQL: {why}; "
                                 f"deletes {[d.status for d in dels]}, finishes {[f.status for f in fins]}, "
                                 f"deliveries {len(deliveries.get(jid, []))}")
        for pseq in set(row_of) - set(pushes):
            v("phantom", f"MySQL row {row_of[pseq][0]} names push p={pseq}, which this run never sent")

    # figures
    out = [p for p in pushes.values()]
    n_deliv = sum(len(ds) for ds in deliveries.values())
    figures: dict[str, Any] = {
        "pushes": len(out),
        "acked": sum(outcome(p) == "ack" for p in out),
        "refused": sum(outcome(p) == "refused" for p in out),
        "maybe": sum(outcome(p) == "maybe" for p in out),
        "unanswered": sum(outcome(p) == "unknown" for p in out),
        "delivered": len(deliveries),
        "redelivered": n_deliv - len(deliveries),
        "finished": sum(f.status == 200 for fs in finishes.values() for f in fs),
        "deleted": sum(d.status == 200 for ds in deletes.values() for d in ds),
        "unavailable": len(unavailable),
    }
    if w0:
        figures["fault_s"] = round(w0.heal - w0.inject, 2)
        if unavailable:
            figures["window_503_s"] = (f"{min(o.t0 for o in unavailable) - w0.inject:+.2f}.."
                                       f"{max(o.t1 for o in unavailable) - w0.inject:+.2f}")
            figures["recovery_s"] = round(max(0.0, max(o.t1 for o in unavailable) - w0.heal), 2)
        else:
            figures["window_503_s"] = "none"
            figures["recovery_s"] = 0.0
        figures["healthy_after_s"] = None if w0.recovered is None else round(w0.recovered, 2)
        down: dict[str, list[float]] = {}
        for op in ops:
            if op.kind == "health" and op.status != 200:
                down.setdefault(op.inst, []).append(op.t0)
        figures["health_not_200"] = ",".join(f"{n}:{min(ts) - w0.inject:+.1f}..{max(ts) - w0.inject:+.1f}"
                                             for n, ts in sorted(down.items())) or "none"
        stuck = sorted({f"{op.inst}:{d.get('duty')}" for op in ops if op.kind == "health" and op.answer
                        for d in op.answer.get("stuck") or [] if isinstance(d, dict)})
        figures["stuck_named"] = ",".join(stuck) or "none"
    if late:
        figures["lateness_ms_p50"] = round(statistics.median(late))
        figures["lateness_ms_p99"] = round(_percentile(late, 0.99))
    return Verdict(bad, figures)


# --------------------------------------------------------------------------- MySQL's side


def final_rows(ns: Namespace) -> list[tuple[str, str, int | None]]:
    """(id, state, push number) of every message in the namespace's database."""
    out = []
    for jid, state, body in ns.query("SELECT id, state, body FROM message"):
        try:
            b = json.loads(body or "null")
        except ValueError:
            b = None
        out.append((jid, state, b.get("p") if isinstance(b, dict) else None))
    return out
