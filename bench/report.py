#!/usr/bin/env python3
"""bench/report.py — turn one run's key=value results into the table and the JSON.

    python3 bench/report.py RESULTS.env OUT.json RAWDIR

RESULTS.env is what bench/run.sh recorded (one KEY=VALUE per line, later lines win). Prints
the table (figure, value, target, result) on stdout and writes OUT.json with the same rows,
the run's settings and every raw number. Exit status 0 even when targets fail: a benchmark
reports, it does not gate (the JSON's "failed" list says what missed).

A row stands only on sound runs: one measured under a load (a lateness, a ratio of two, a rate)
FAILS, whatever its value, when any run under it lost jobs, had HTTP errors or had its producers
below 95 % of the rate asked of them (load_problems and its kin); its notes, and the row's
"problems" list in the JSON, say which run and why. bench/summary.py puts the rows at the top of
docs/performance.md.
"""
import json
import math
import re
import sys


def load(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" in line:
                k, v = line.split("=", 1)
                env[k] = v
    return env


def num(env, key):
    v = env.get(key, "")
    try:
        x = float(v)
    except ValueError:
        return None
    return None if math.isnan(x) else x


def fmt_int(x):
    return "n/a" if x is None else f"{x:,.0f}"


def fmt_ms(x):
    if x is None:
        return "n/a"
    return f"{x:.2f}" if x < 100 else f"{x:.0f}"


def load_problems(env, tag, rate=None):
    """Why a run of bench/lateness.c under a steady load does not count: jobs lost, HTTP errors,
    producers under 95 % of the rate asked of them, or the tool's own verdict. Empty when the run
    is sound. A figure measured under that load (a lateness, or a ratio of two) stands only if the
    load was what it claims: a p99 of a load that dropped jobs or ran slow says nothing."""
    if num(env, f"{tag}_lat_ms_p99") is None and num(env, f"{tag}_pushed") is None:
        return ["the load tool failed: see the run's log"] if num(env, f"{tag}_tool_failed") == 1 else []
    out = []
    asked = num(env, f"{tag}_rate_target") or rate
    achieved = num(env, f"{tag}_push_rate")
    if asked and (achieved or 0) < 0.95 * asked:
        out.append(f"producers at {100 * (achieved or 0) / asked:.0f} % of the asked {asked:,.0f}/s")
    pushed, received = num(env, f"{tag}_pushed"), num(env, f"{tag}_received")
    if pushed is not None and received is not None and received < pushed:
        out.append(f"{pushed - received:,.0f} jobs lost (pushed {pushed:,.0f}, delivered {received:,.0f})")
    e = {k: int(num(env, f"{tag}_{k}") or 0) for k in ("push_errors", "get_errors", "finish_errors")}
    if sum(e.values()):
        which = ", ".join(f"{k.split('_')[0]} {v:,}" for k, v in e.items() if v)
        out.append(f"{sum(e.values()):,} HTTP errors ({which})")
    if not out and (num(env, f"{tag}_tool_failed") == 1 or num(env, f"{tag}_ok") == 0):
        out.append("the load tool reported a failure: see the run's log")
    return out


def bucket_problems(env, tag, n):
    """Why a drain of figure 13's bucket (bench/lateness.c bucket) does not count: jobs that never
    arrived, duplicates, HTTP errors, or the tool's own verdict."""
    got = num(env, f"{tag}_received")
    if got is None:
        return ["the load tool failed: see the run's log"] if num(env, f"{tag}_tool_failed") == 1 else []
    out = []
    if got < n:
        out.append(f"{n - got:,.0f} jobs lost ({got:,.0f} of {n:,} delivered)")
    dup = int(num(env, f"{tag}_duplicates") or 0)
    if dup:
        out.append(f"{dup:,} duplicate deliveries")
    return consumer_problems(env, tag, out)


def drain_problems(env, tag, jobs=None):
    """Why a drain (bench/lateness.c drain: get + finish of a ready backlog) does not count."""
    if num(env, f"{tag}_rate") is None:
        return ["the load tool failed: see the run's log"] if num(env, f"{tag}_tool_failed") == 1 else []
    out = []
    jobs = num(env, f"{tag}_jobs") or jobs
    fin = num(env, f"{tag}_finished")
    if jobs and fin is not None and fin < jobs:
        out.append(f"{jobs - fin:,.0f} jobs not finished ({fin:,.0f} of {jobs:,.0f})")
    return consumer_problems(env, tag, out)


def consumer_problems(env, tag, out):
    """`out` (what a consuming run already found wrong) and its get/finish errors, or, when
    nothing else is wrong, the tool's own verdict."""
    e = int((num(env, f"{tag}_get_errors") or 0) + (num(env, f"{tag}_finish_errors") or 0))
    if e:
        out.append(f"{e:,} HTTP errors")
    if not out and (num(env, f"{tag}_tool_failed") == 1 or num(env, f"{tag}_ok") == 0):
        out.append("the load tool reported a failure: see the run's log")
    return out


def wrk_problems(env, tag):
    """A wrk run with non-2xx answers or socket errors measured something else than pushes."""
    bad = int((num(env, f"{tag}_non2xx") or 0) + (num(env, f"{tag}_socket_errors") or 0))
    return [f"{bad:,} non-2xx/socket errors"] if bad else []


def of_runs(*runs):
    """The problems of several runs under one row, each named: runs = (label, problems) pairs."""
    return [f"{label}: {p}" for label, probs in runs for p in probs]


def parse_metrics(path):
    """Prometheus text -> {series: value} (series = name plus its label block)."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                key, _, val = line.rstrip("\n").rpartition(" ")
                try:
                    out[key] = float(val)
                except ValueError:
                    pass
    except OSError:
        return None
    return out


def read_time(path):
    try:
        with open(path) as f:
            return float(f.read().strip())
    except (OSError, ValueError):
        return None


def hist_quantile(d, name, q):
    """Upper bucket bound holding quantile q of a histogram delta (None when empty)."""
    buckets = []
    for k, v in d.items():
        if k.startswith(name + "_bucket{le=\""):
            le = k[len(name) + 12:-2]
            buckets.append((float("inf") if le == "+Inf" else float(le), v))
    buckets.sort()
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    for le, c in buckets:
        if c >= q * total:
            return le
    return None


def route_stats(d, secs):
    """The delivery routes' figures in a /metrics delta, summed over topics: per route (webhook,
    amqp) deliveries/s by outcome, mean latency and the histogram bucket holding its p99."""
    out = {}
    for k, v in d.items():
        if not k.startswith("hourglass_route_") or "{" not in k:
            continue
        name, _, labels = k.partition("{")
        lab = dict(x.split("=", 1) for x in labels.rstrip("}").split(",") if "=" in x)
        lab = {a: b.strip('"') for a, b in lab.items()}
        r = out.setdefault(lab.get("route", "?"), {"buckets": {}, "sum": 0.0, "count": 0.0, "outcomes": {}})
        if name == "hourglass_route_deliveries_total":
            r["outcomes"][lab.get("outcome", "?")] = r["outcomes"].get(lab.get("outcome", "?"), 0) + v
        elif name == "hourglass_route_latency_seconds_bucket":
            le = lab.get("le", "+Inf")
            le = float("inf") if le == "+Inf" else float(le)
            r["buckets"][le] = r["buckets"].get(le, 0) + v
        elif name == "hourglass_route_latency_seconds_sum":
            r["sum"] += v
        elif name == "hourglass_route_latency_seconds_count":
            r["count"] += v
    res = {}
    for route, r in out.items():
        if r["count"] <= 0:
            continue
        p99 = None
        for le in sorted(r["buckets"]):
            if r["buckets"][le] >= 0.99 * r["count"]:
                p99 = le
                break
        res[route] = {"per_s": {o: n / secs for o, n in r["outcomes"].items()},
                      "failed": r["outcomes"].get("failed", 0), "undelivered": r["outcomes"].get("undelivered", 0),
                      "latency_mean_ms": r["sum"] / r["count"] * 1e3,
                      "latency_p99_ms_le": p99 * 1e3 if p99 is not None else None}
    return res


def redis_stats(path):
    """INFO commandstats -> {command: (calls, usec)}; commands run inside scripts count too. A file
    may hold several nodes' answers one after the other (figure 15's cluster masters): summed."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("cmdstat_"):
                    continue
                name, _, rest = line[8:].partition(":")
                kv = dict(x.split("=", 1) for x in rest.split(",") if "=" in x)
                calls, usec = out.get(name, (0.0, 0.0))
                out[name] = (calls + float(kv.get("calls", 0)), usec + float(kv.get("usec", 0)))
    except OSError:
        return None
    return out


def thread_cores(raw_dir, tag, secs, tck=100):
    """Cores used by each daemon thread over a measurement (names from run.sh's name_threads)."""
    def load_threads(path):
        out = {}
        try:
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 3:
                        out[int(parts[0])] = (parts[1], float(parts[2]))
        except (OSError, ValueError):
            return None
        return out

    t0, t1 = load_threads(f"{raw_dir}/threads-{tag}-0.txt"), load_threads(f"{raw_dir}/threads-{tag}-1.txt")
    if not t0 or not t1:
        return None
    res = {}
    for tid in sorted(t1):
        name, ticks = t1[tid]
        if name in res:
            name = f"{name}/{tid}"
        res[name] = (ticks - t0.get(tid, (name, 0.0))[1]) / tck / secs
    return res


def internals(raw_dir, tag):
    """What the daemon's own /metrics say about one measurement (deltas over it)."""
    m0 = parse_metrics(f"{raw_dir}/metrics-{tag}-0.txt")
    m1 = parse_metrics(f"{raw_dir}/metrics-{tag}-1.txt")
    t0, t1 = read_time(f"{raw_dir}/metrics-{tag}-0.time"), read_time(f"{raw_dir}/metrics-{tag}-1.time")
    if not m0 or not m1 or t0 is None or t1 is None or t1 <= t0:
        return None
    d = {k: m1[k] - m0.get(k, 0.0) for k in m1}
    secs = t1 - t0

    def avg(name, scale=1.0):
        c = d.get(f"{name}_count", 0)
        return d.get(f"{name}_sum", 0) / c * scale if c else None

    push_count = d.get('hourglass_http_request_seconds_count{endpoint="push"}', 0)
    push_sum = d.get('hourglass_http_request_seconds_sum{endpoint="push"}', 0)
    res = {
        "seconds": secs,
        "push_server_ms": push_sum / push_count * 1e3 if push_count else None,
        "redis_call_ms": avg("hourglass_redis_command_seconds", 1e3),
        "redis_calls_per_s": d.get("hourglass_redis_command_seconds_count", 0) / secs,
        "journal_cycle_ms": avg("hourglass_mysql_commit_seconds", 1e3),
        "journal_cycles_per_s": d.get("hourglass_mysql_commit_seconds_count", 0) / secs,
        "journal_batch": avg("hourglass_journal_batch_records"),
        "journal_busy": d.get("hourglass_mysql_commit_seconds_sum", 0) / secs,
        "mysql_cycle_p99_ms_le": (hist_quantile(d, "hourglass_mysql_commit_seconds", 0.99) or 0) * 1e3 or None,
        "server_lateness_mean_ms": avg("hourglass_delivery_lateness_seconds", 1e3),
        "server_lateness_p99_ms_le": (hist_quantile(d, "hourglass_delivery_lateness_seconds", 0.99) or 0) * 1e3
        or None,
        "pubsub_per_s": d.get("hourglass_pubsub_messages_total", 0) / secs,
        "mover_runs_per_s": d.get("hourglass_mover_runs_total", 0) / secs,
        "http_per_s": sum(v for k, v in d.items() if k.startswith("hourglass_http_requests_total{")) / secs,
        "threads": thread_cores(raw_dir, tag, secs),
        "routes": route_stats(d, secs),
    }
    r0, r1 = redis_stats(f"{raw_dir}/redis-{tag}-0.txt"), redis_stats(f"{raw_dir}/redis-{tag}-1.txt")
    if r0 is not None and r1 is not None:
        # FCALL since the scripts became a Redis Functions library; EVALSHA for older builds
        calls = sum(r1.get(c, (0, 0))[0] - r0.get(c, (0, 0))[0] for c in ("fcall", "evalsha"))
        usec = sum(r1.get(c, (0, 0))[1] - r0.get(c, (0, 0))[1] for c in ("fcall", "evalsha"))
        res["redis_evalsha_per_s"] = calls / secs
        res["redis_evalsha_us"] = usec / calls if calls else None
    return res


def tiers(env, row, rps_row, lat_row, noise):
    """Figures 9-13 (issue 13: Redis holds the near future, MySQL the rest)."""
    if env.get("tiers_skipped") or env.get("tiers") != "1":
        why = env.get("tiers_skipped", "not run")
        for fig, name in ((9, "Redis bytes per far job"), (10, "far pushes/s / near pushes/s"),
                          (11, "far backlog vs none: near pushes/s and lateness p99"),
                          (12, "restore with a far backlog pending"), (13, "paging a bucket: lateness p99")):
            if env.get("tiers_skipped"):
                row(fig, name, None, "n/a", "-", "skip", notes=f"skipped: {why}")
        return

    # ---- figure 9: Redis bytes per far job
    m0, m1, nj = num(env, "farmem_before"), num(env, "farmem_after"), num(env, "farmem_fill_jobs")
    if m0 is not None and m1 is not None and nj:
        per = (m1 - m0) / nj
        rows_far = int(num(env, "farmem_far_rows") or 0)
        in_redis = int(num(env, "farmem_redis_jobs") or 0)
        notes = [f"used_memory {m0 / 2**20:.2f} -> {m1 / 2**20:.2f} MiB", f"{rows_far:,} far keys",
                 f"{in_redis:,} jobs in Redis"]
        ok = per <= 8 and rows_far == int(nj)
        if rows_far != int(nj):
            notes.append(f"NOT all {int(nj):,} jobs went far")
        row(9, f"Redis bytes per far job ({int(nj):,} jobs due in 30 days)", per, f"{per:.1f} B", "<= 8 B",
            "PASS" if ok else "FAIL", "bytes", "; ".join(notes))
    else:
        row(9, "Redis bytes per far job", None, "n/a", "<= 8 B", "skip")

    # ---- figure 10: far vs near pushes/s
    rps_row(10, "nearpush", "near pushes/s (due in 30 min)")
    rps_row(10, "farpush", "far pushes/s (due in 1 day)")
    near, far = num(env, "nearpush_rps"), num(env, "farpush_rps")
    if near and far:
        r = far / near
        row(10, "far pushes/s / near pushes/s", r, f"{far:,.0f} / {near:,.0f} = {r:.2f}x", ">= 1.3x",
            "FAIL" if r < 1.3 else "PASS", "x", "; ".join(x for x in (noise("farpush"), noise("nearpush")) if x),
            of_runs(("far", wrk_problems(env, "farpush")), ("near", wrk_problems(env, "nearpush"))))
    else:
        row(10, "far pushes/s / near pushes/s", None, "n/a", ">= 1.3x", "skip")

    # ---- figure 11: a far backlog vs none, for near jobs
    nfar = int(num(env, "farbig_far_rows") or num(env, "far_n") or 0)
    load = num(env, "farbig_load_secs")
    lat_row(11, "tlat0", 1000, "near lateness p50/p99/max @ 1,000/s, no far jobs", None)
    lat_row(11, "tlatbig", 1000, f"near lateness p50/p99/max @ 1,000/s, {nfar:,} far jobs", None)
    small, big = num(env, "tlat0_lat_ms_p99"), num(env, "tlatbig_lat_ms_p99")
    if small and big is not None:
        r = big / small
        row(11, f"near p99 lateness, {nfar:,} far vs none", r, f"{fmt_ms(big)} / {fmt_ms(small)} ms = {r:.2f}x",
            "<= 1.2x", "PASS" if r <= 1.2 else "FAIL", "x",
            "; ".join(x for x in (noise("tlatbig"), noise("tlat0")) if x),
            of_runs((f"{nfar:,} far", load_problems(env, "tlatbig", 1000)),
                    ("no far", load_problems(env, "tlat0", 1000))))
    else:
        row(11, f"near p99 lateness, {nfar:,} far vs none", None, "n/a", "<= 1.2x", "skip")
    rps_row(11, "tpush0", "near pushes/s, no far jobs")
    rps_row(11, "tpushbig", f"near pushes/s, {nfar:,} far jobs")
    p0, pb = num(env, "tpush0_rps"), num(env, "tpushbig_rps")
    if p0 and pb:
        r = p0 / pb
        notes = [x for x in (noise("tpushbig"), noise("tpush0")) if x]
        if load is not None:
            notes.append(f"far jobs bulk-loaded in {load:.1f} s")
        row(11, f"near pushes/s slowdown, none / {nfar:,} far", r, f"{p0:,.0f} / {pb:,.0f} = {r:.2f}x", "<= 1.2x",
            "FAIL" if r > 1.2 else "PASS", "x", "; ".join(notes),
            of_runs(("no far", wrk_problems(env, "tpush0")), (f"{nfar:,} far", wrk_problems(env, "tpushbig"))))
    else:
        row(11, f"near pushes/s slowdown, none / {nfar:,} far", None, "n/a", "<= 1.2x", "skip")

    # ---- figure 12: restore with the far backlog pending
    secs = num(env, "trestorebig_secs")
    if secs is not None:
        pending = int(num(env, "trestorebig_pending") or 0)
        restored = int(num(env, "trestorebig_restored") or 0)
        after = int(num(env, "trestorebig_jobs_after") or 0)
        notes = [f"{restored:,} restored of {pending:,} near", f"{int(num(env, 'trestorebig_far') or 0):,} far pending",
                 f"Redis holds {after:,} jobs after"]
        ok = env.get("trestorebig_status") == "200" and restored == pending and after == pending
        if not ok:
            notes.append("NOT what was expected: every near job back, no far job in Redis")
        s0 = num(env, "trestore0_secs")
        if s0 is not None:
            notes.append(f"{s0:.2f} s with no far jobs")
        if noise("trestorebig"):
            notes.append(noise("trestorebig"))
        row(12, f"restore with {nfar:,} far jobs pending", secs, f"{secs:.2f} s", "<= 5 s",
            "PASS" if ok and secs <= 5 else "FAIL", "s", "; ".join(notes))
    else:
        row(12, "restore with a far backlog pending", None, "n/a", "<= 5 s", "skip")

    # ---- figure 13: paging a bucket
    n = int(num(env, "bucket_n") or 0)
    spread = (num(env, "bucket_spread") or 0) / 1000
    name = f"lateness p50/p99/max, {n:,} far jobs due within {spread:g} s"
    p50, p99, mx = num(env, "bucket_lat_ms_p50"), num(env, "bucket_lat_ms_p99"), num(env, "bucket_lat_ms_max")
    # the near loads at 1,000/s beside the paged bucket (bpage) and beside the baseline's (bpage0):
    # a bucket figure measured beside a load that lost jobs or ran slow was not measured as named
    beside = of_runs(("the near load beside it", load_problems(env, "bpage", 1000)))
    beside0 = of_runs(("the near load beside the baseline", load_problems(env, "bpage0", 1000)))
    if p99 is not None:
        got = int(num(env, "bucket_received") or 0)
        notes = [f"{got:,} of {n:,} delivered", f"{num(env, 'bucket_rate') or 0:,.0f}/s"]
        pf, pd = env.get("bucket_paging_first_s", ""), env.get("bucket_paging_done_s", "")
        if pf and pd:
            notes.append(f"paged (pager's count: {int(num(env, 'bucket_paged') or 0):,}) from {float(pf):+.1f} s to "
                         f"{float(pd):+.1f} s of the first due time, {int(num(env, 'bucket_paged_at_due') or 0):,} "
                         f"by then")
        lag = num(env, "bucket_pager_lag_max_s")
        if lag is not None:
            notes.append(f"pager lag max {lag:.2f} s")
        notes.append(f"horizon {(num(env, 'bucket_horizon') or 0) / 1000:g} s, lead {(num(env, 'bucket_lead') or 0) / 1000:g} s"
                     + (f", paced until {num(env, 'bucket_pace_slack_ms') / 1000:g} s before due"
                        if num(env, "bucket_pace_slack_ms") else ", not paced"))
        mem = num(env, "bucket_redis_mem_max")
        if mem:
            notes.append(f"Redis used_memory peak {mem / 1e6:,.0f} MB")
        left, cleft = num(env, "bucket_far_left"), num(env, "bucket_far_count_left")
        if left or cleft:
            notes.append(f"LEFT BEHIND: {int(left or 0):,} far keys, far_count {int(cleft or 0):,} "
                         f"(messages: {env.get('bucket_states_after', '?')})")
        if noise("bucket"):
            notes.append(noise("bucket"))
        row(13, name, {"p50": p50, "p99": p99, "max": mx}, f"{fmt_ms(p50)} / {fmt_ms(p99)} / {fmt_ms(mx)} ms",
            "p99 <= 20 ms", "PASS" if p99 <= 20 else "FAIL", "ms", "; ".join(notes),
            bucket_problems(env, "bucket", n) + beside)
    else:
        failed = num(env, "bucket_tool_failed") == 1
        got = num(env, "bucket_received")
        why = "the load tool failed: see the run's log"
        if got is not None:
            why = f"{int(got):,} of {n:,} delivered within {env.get('bucket_grace', '?')} s of the last due time"
        row(13, name, None, "n/a", "p99 <= 20 ms", "FAIL" if failed else "skip", notes=why if failed else "")
    # the paging's own lateness: due -> ready in Redis (from MySQL's transitions)
    rp99 = num(env, "bucket_ready_ms_p99")
    if rp99 is not None:
        rn = int(num(env, "bucket_ready_n") or 0)
        rp50, rmx = num(env, "bucket_ready_ms_p50"), num(env, "bucket_ready_ms_max")
        row(13, f"ready in Redis p50/p99/max (due -> ready: the paging's own lateness), {n:,} jobs",
            {"p50": rp50, "p99": rp99, "max": rmx}, f"{fmt_ms(rp50)} / {fmt_ms(rp99)} / {fmt_ms(rmx)} ms",
            "p99 <= 20 ms", "PASS" if rp99 <= 20 and rn >= n else "FAIL", "ms",
            f"{rn:,} of {n:,} became ready; delivery to the consumers is the row above", beside)
    if num(env, "bpage_lat_ms_p99") is not None or num(env, "bpage_tool_failed") == 1:
        lat_row(13, "bpage", 1000, f"near lateness p50/p99/max @ 1,000/s while the bucket pages in "
                f"({int(num(env, 'bpage_secs') or 0)} s)", None)
    if num(env, "bpage0_lat_ms_p99") is not None or num(env, "bpage0_tool_failed") == 1:
        lat_row(13, "bpage0", 1000, f"the same while the baseline's bucket waits in Redis, no paging "
                f"({int(num(env, 'bpage0_secs') or 0)} s)", None)
        during, base = num(env, "bpage_lat_ms_p99"), num(env, "bpage0_lat_ms_p99")
        if during is not None and base:
            r = during / base
            row(13, "near lateness p99, while the bucket pages in / without paging", r,
                f"{fmt_ms(during)} / {fmt_ms(base)} ms = {r:.2f}x", "<= 1.2x", "PASS" if r <= 1.2 else "FAIL", "x",
                problems=of_runs(("while paging", load_problems(env, "bpage", 1000)),
                                 ("without paging", load_problems(env, "bpage0", 1000))))
    # the baseline: the same jobs already in Redis (near, put there by /reStore) before the first is
    # due, delivered to the same consumers: what the machine does with the burst without paging
    bp99 = num(env, "bucketn_lat_ms_p99")
    if bp99 is not None or num(env, "bucketn_tool_failed") == 1:
        bnotes = [f"{int(num(env, 'bucketn_received') or 0):,} of {n:,} delivered",
                  f"{num(env, 'bucketn_rate') or 0:,.0f}/s",
                  f"/reStore took {num(env, 'bucketn_restore_secs') or 0:.1f} s (HTTP {env.get('bucketn_restore_status', '?')})"]
        if noise("bucketn"):
            bnotes.append(noise("bucketn"))
        if bp99 is None:
            row(13, "baseline: the same jobs already in Redis, lateness p50/p99/max", None, "n/a", "-", "FAIL",
                notes="the load tool failed: see the run's log")
        else:
            b50, bmx = num(env, "bucketn_lat_ms_p50"), num(env, "bucketn_lat_ms_max")
            row(13, "baseline: the same jobs already in Redis, lateness p50/p99/max",
                {"p50": b50, "p99": bp99, "max": bmx}, f"{fmt_ms(b50)} / {fmt_ms(bp99)} / {fmt_ms(bmx)} ms", "-",
                "info", "ms", "; ".join(bnotes), bucket_problems(env, "bucketn", n) + beside0)
        br99 = num(env, "bucketn_ready_ms_p99")
        if br99 is not None:
            br50, brmx = num(env, "bucketn_ready_ms_p50"), num(env, "bucketn_ready_ms_max")
            row(13, "baseline: due -> ready p50/p99/max", {"p50": br50, "p99": br99, "max": brmx},
                f"{fmt_ms(br50)} / {fmt_ms(br99)} / {fmt_ms(brmx)} ms", "-", "info", "ms",
                f"{int(num(env, 'bucketn_ready_n') or 0):,} of {n:,} became ready")
        # what paging adds: the same figures, paged against already in Redis (1 ms floor: a
        # ratio of two near-zero figures says nothing)
        for what, paged, base in (("due -> ready p99", rp99, br99), ("delivery lateness p99", p99, bp99)):
            if paged is None or base is None:
                continue
            r = max(paged, 1) / max(base, 1)
            row(13, f"{what}, paged / already in Redis", r, f"{fmt_ms(paged)} / {fmt_ms(base)} ms = {r:.2f}x",
                "<= 1.2x", "PASS" if r <= 1.2 else "FAIL", "x",
                problems=of_runs(("paged", bucket_problems(env, "bucket", n)),
                                 ("already in Redis", bucket_problems(env, "bucketn", n))) + beside + beside0)


def cluster_figure(env, row, rows, noise, errs, consume_n, raw_dir):
    """Figure 15 (issue 14): figure 0's pushes and figure 3's consume on one Redis (cl1) and on a
    3-master + 3-replica cluster on this machine (cl3); CPU per job from /proc/<pid>/stat."""

    def per_job_us(tag, what, jobs_key):
        """CPU microseconds of `what` (a TAG_cpu_<what> in cores) per job of the measurement."""
        cores, secs, jobs = num(env, f"{tag}_cpu_{what}"), num(env, f"{tag}_cpu_window_s"), num(env, jobs_key)
        if cores is None or not secs or not jobs:
            return None
        return cores * secs / jobs * 1e6

    def us(x):
        return "n/a" if x is None else f"{x:.0f} us"

    def about(x):  # an estimate: two significant digits
        return f"{float(f'{x:.2g}'):,.0f}"

    def cpu_notes(tag, jobs_key, what):
        """Where the CPU went per job: Redis (masters and replicas apart in a cluster), the daemon,
        MariaDB; the jobs per master in a cluster."""
        r = per_job_us(tag, "redis", jobs_key)
        notes = []
        if tag.startswith("cl3"):
            m = per_job_us(tag, "redis_masters", jobs_key)
            rep_ = r - m if r is not None and m is not None else None
            notes.append(f"Redis {num(env, f'{tag}_cpu_redis') or 0:.2f} cores = {us(r)} CPU per {what} "
                         f"(masters {us(m)}, replicas {us(rep_)})")
        else:
            notes.append(f"Redis {num(env, f'{tag}_cpu_redis') or 0:.2f} cores = {us(r)} CPU per {what}")
        notes.append(f"daemon {us(per_job_us(tag, 'server', jobs_key))}, MariaDB {us(per_job_us(tag, 'mysql', jobs_key))}")
        return notes

    # -- pushes/s
    for tag, name in (("cl1push", "pushes/s, 1 Redis (figure 0's load)"),
                      ("cl3push", "pushes/s, 3 masters + 3 replicas")):
        v = num(env, f"{tag}_rps")
        if v is None:
            row(15, name, None, "n/a", "-", "skip")
            continue
        e = errs(tag)
        runs = env.get(f"{tag}_runs", "").split()
        notes = [f"best of {', '.join(fmt_int(float(x)) for x in runs)}"] if len(runs) > 1 else []
        notes += cpu_notes(tag, f"{tag}_requests", "push")
        jobs = num(env, f"{tag}_jobs")
        if jobs is not None:
            notes.append(f"Redis holds {fmt_int(jobs)} jobs after it (wrk counted {fmt_int(num(env, f'{tag}_requests'))}"
                         f" answers, {fmt_int(num(env, 'prefill'))} were pending)")
        if env.get(f"{tag}_spread"):
            notes.append(f"per master: {env[f'{tag}_spread']}")
        if e:
            notes.append(f"{e} non-2xx/socket errors")
        if noise(tag):
            notes.append(noise(tag))
        p99 = num(env, f"{tag}_lat_p99_ms")
        row(15, name, v, f"{fmt_int(v)}/s" + (f" (p99 {fmt_ms(p99)} ms)" if p99 is not None else ""), "-",
            "FAIL" if e else "info", "req/s", "; ".join(notes))
    s1, s3 = num(env, "cl1push_rps"), num(env, "cl3push_rps")
    if s1 and s3:
        row(15, "pushes/s, cluster / 1 Redis", s3 / s1, f"{fmt_int(s3)} / {fmt_int(s1)} = {s3 / s1:.2f}x", "-",
            "info", "x")

    # -- consume jobs/s
    for tag, name in (("cl1cons", f"get+finish jobs/s, count=1, backlog {consume_n:,}, 1 Redis (figure 3)"),
                      ("cl3cons", f"get+finish jobs/s, count=1, backlog {consume_n:,}, 3 masters + 3 replicas")):
        v = num(env, f"{tag}_rate")
        if v is None:
            failed = num(env, f"{tag}_tool_failed") == 1
            row(15, name, None, "n/a", "-", "FAIL" if failed else "skip",
                notes="the load tool failed: see the run's log" if failed else "")
            continue
        notes = cpu_notes(tag, f"{tag}_finished", "job")
        ok = num(env, f"{tag}_ok") == 1
        if not ok:
            notes.append(f"finished {fmt_int(num(env, f'{tag}_finished'))} of {consume_n:,}; errors")
        left = num(env, f"{tag}_jobs_after")
        if left:
            notes.append(f"{fmt_int(left)} jobs left in Redis")
        if env.get(f"{tag}_spread"):
            notes.append(f"per master: {env[f'{tag}_spread']}")
        if noise(tag):
            notes.append(noise(tag))
        row(15, name, v, f"{fmt_int(v)}/s", "-", "info" if ok else "FAIL", "jobs/s", "; ".join(notes))
    c1, c3 = num(env, "cl1cons_rate"), num(env, "cl3cons_rate")
    if c1 and c3:
        row(15, "consume jobs/s, cluster / 1 Redis", c3 / c1, f"{fmt_int(c3)} / {fmt_int(c1)} = {c3 / c1:.2f}x", "-",
            "info", "x")

    # -- the note line, and an estimate for 3 machines from the single-node run's CPU per job
    cores = num(env, "nproc")
    why = (f"on {cores:g} cores the cluster cannot be faster: 6 redis-servers, the daemon, MariaDB and the load "
           f"generator share them; each thread's shard commands go out over 3 connections, in smaller pipelines; "
           f"the masters feed their replicas (docs/performance.md, figure 15)") if cores else ""
    est = []
    for one_tag, three_tag, what, rate in (("cl1push", "cl3push", "push", s1), ("cl1cons", "cl3cons", "job", c1)):
        jobs_key = "requests" if what == "push" else "finished"
        r = per_job_us(one_tag, "redis", f"{one_tag}_{jobs_key}")
        rest = [per_job_us(one_tag, k, f"{one_tag}_{jobs_key}") for k in ("server", "mysql")]
        if not r or not rate or None in rest:
            continue
        # The Redis side with three masters, each on a machine of its own (its replica on another):
        # at best the single Redis's CPU per job, shards spread evenly (3 x one Redis core); at worst
        # what the cluster's masters used per job here (smaller pipelines, the scripts' guard, feeding
        # the replicas, and this box's contention), the busiest master carrying its share of the jobs.
        best = 3e6 / r
        worst, share = None, None
        m3 = per_job_us(three_tag, "redis_masters", f"{three_tag}_{jobs_key}")
        shares = [int(x) for x in re.findall(r"\((\d+)%\)", env.get(f"{three_tag}_spread", ""))]
        if m3 and shares:
            share = max(shares) / 100
            worst = 1e6 / (m3 * share)
        host = 2e6 / sum(rest)  # the daemon and MariaDB alone on a 2-core host, the load from elsewhere
        redis_side = f"3 masters ~{about(best)}/s" + (
            f" (~{about(worst)}/s at the cluster's {m3:.0f} us of master CPU per {what} measured here, the "
            f"busiest master holding {share:.0%} of the jobs)" if worst else "")
        lo, hi = min(worst or best, host), min(best, host)
        span = f"~{about(lo)}/s" if about(lo) == about(hi) else f"~{about(lo)}-{about(hi)}/s"
        line = (f"{'pushes' if what == 'push' else 'consume'}: one Redis spent {r:.0f} us per {what} (one core: "
                f"~{about(1e6 / r)}/s), {redis_side}; the daemon + MariaDB spent {sum(rest):.0f} us per {what}: "
                f"~{about(host)}/s on 2 cores of their own; so {span} at most against {rate:,.0f}/s measured "
                f"here with one Redis")
        x = internals(raw_dir, one_tag) if what == "push" else None
        if x and x.get("journal_busy") is not None and x["journal_busy"] >= 0.7:
            line += (f", but a durable push waits for the journal's MariaDB commit, busy {x['journal_busy']:.0%} of "
                     f"the time here, which the cluster does not touch: pushes/s would stay near the one-Redis "
                     f"figure")
        est.append(line)
    if why or est:
        row(15, "note", None, "-", "-", "info", notes="; ".join(
            ([why] if why else []) + (["ESTIMATE for 3 machines (one master each), not measured: " + "; ".join(est)]
                                      if est else [])))


def galera_figure(env, row):
    """Figure 16 (issue 32, bench/galera.py): figure 0's pushes on one MariaDB and on a 3-node
    Galera cluster on this machine, what the difference is made of, and the journal's ceiling."""
    for tag, name in (("gal_single", "pushes/s, one MariaDB (figure 0's load)"),
                      ("gal_cluster", "pushes/s, 3-node Galera cluster, writes through node 1"),
                      ("gal_lanes2", "pushes/s, 3-node Galera cluster, [mysql] journal_lanes = 2")):
        v = num(env, f"{tag}_rps")
        if v is None:
            row(16, name, None, "n/a", "-", "skip")
            continue
        runs = env.get(f"{tag}_runs", "").split()
        notes = [f"best of {', '.join(fmt_int(float(x)) for x in runs)}"] if len(runs) > 1 else []
        notes.append(f"journal commit {num(env, f'{tag}_commit_ms') or 0:.2f} ms x "
                     f"{num(env, f'{tag}_batch_records') or 0:.1f} records; MariaDB CPU "
                     f"{num(env, f'{tag}_mysql_us_per_push') or 0:.0f} us per push "
                     f"({num(env, f'{tag}_mysql_cores') or 0:.2f} cores)")
        bad = int(num(env, f"{tag}_non2xx") or 0)
        if bad:
            notes.append(f"{bad} non-2xx")
        row(16, name, v, f"{fmt_int(v)}/s (p50 {fmt_ms(num(env, f'{tag}_p50_ms'))} ms, p99 "
                         f"{fmt_ms(num(env, f'{tag}_p99_ms'))} ms)", "-", "FAIL" if bad else "info", "req/s",
            "; ".join(notes))
    s1, s3 = num(env, "gal_single_rps"), num(env, "gal_cluster_rps")
    if s1 and s3:
        c1, c3 = num(env, "gal_single_commit_ms") or 0, num(env, "gal_cluster_commit_ms") or 0
        u1, u3 = num(env, "gal_single_mysql_us_per_push") or 0, num(env, "gal_cluster_mysql_us_per_push") or 0
        row(16, "pushes/s, Galera / one MariaDB", s3 / s1, f"{fmt_int(s3)} / {fmt_int(s1)} = {s3 / s1:.2f}x", "-",
            "info", "x",
            f"made of: each journal commit waits for the write set to be replicated to the two other nodes and "
            f"certified (commit {c1:.2f} -> {c3:.2f} ms; a push waits for its batch's commit), and here the three "
            f"nodes apply every write set on the same {num(env, 'nproc') or '?'} cores as the daemon and the load "
            f"({u1:.0f} -> {u3:.0f} us of MariaDB CPU per push); on three machines the CPU is spread and the "
            f"commit's extra network round trip remains")
    s2 = num(env, "gal_lanes2_rps")
    if s3 and s2:
        row(16, "pushes/s on Galera, 2 journal lanes / 1", s2 / s3, f"{fmt_int(s2)} / {fmt_int(s3)} = {s2 / s3:.2f}x",
            "-", "info", "x",
            "two cycles in flight, each waiting for its own certification; here the three nodes share the machine's "
            "cores, so the wait is CPU and a second lane only halves the rows per commit (docs/architecture.md, "
            "\"Lanes\")")
    for tag, name in (("gal_ceiling", "journal ceiling, one MariaDB: records per MariaDB core-second"),
                      ("gal_ceilgal", "journal ceiling, 3-node Galera: records per core-second of the 3 nodes")):
        v = num(env, f"{tag}_records_per_core_s")
        if v is None:
            continue
        row(16, name, v, f"{fmt_int(v)}/core-s", "-", "info", "records/s",
            f"{fmt_int(num(env, f'{tag}_records'))} jobs pushed in arrays of 1,000: "
            f"{fmt_int(num(env, f'{tag}_records_s'))} journal records/s with MariaDB at "
            f"{num(env, f'{tag}_mysql_cores') or 0:.2f} cores, {fmt_int(num(env, f'{tag}_batch_records'))} records "
            f"per commit, {num(env, f'{tag}_commit_ms') or 0:.1f} ms each; a journal connection's statements run on "
            f"one server thread, so this is one instance's ceiling per MySQL server (docs/architecture.md)")
    if env.get("gal_failed"):
        row(16, "one MariaDB vs 3-node Galera", None, "n/a", "-", "FAIL", notes=env["gal_failed"])


def groups_figure(env, row, consume_n):
    """Figure 17 (issue 36): figure 3's drain with the jobs in 1,000 groups at groupConcurrency 1 vs
    the same jobs without groups (two runs of each, alternating: the best of each pair), then
    beside 100,000 idle groups; and what an active group costs Redis beside its jobs."""
    def best(*tags):
        vals = [num(env, f"{t}_rate") for t in tags]
        vals = [v for v in vals if v is not None]
        return max(vals) if vals else None

    def problems(*tags):
        return of_runs(*((t, drain_problems(env, t)) for t in tags))

    plain, grouped = best("plain", "plain2"), best("grouped", "grouped2")
    busy, idle = best("busy1", "busy2"), best("idle1", "idle2")
    name = f"get+finish jobs/s, 1,000 groups at groupConcurrency 1 vs no groups (backlog {consume_n:,})"
    if plain and grouped:
        r = grouped / plain
        row(17, name, r, f"{fmt_int(grouped)} / {fmt_int(plain)} = {r:.2f}x", ">= 0.8x",
            "PASS" if r >= 0.8 else "FAIL", "x", problems=problems("plain", "plain2", "grouped", "grouped2"))
    else:
        row(17, name, None, "n/a", ">= 0.8x", "skip")
    name = "get+finish jobs/s, 1,000 active groups beside 100,000 idle vs beside 100,000 delayed jobs"
    if busy and idle:
        r = idle / busy
        row(17, name, r, f"{fmt_int(idle)} / {fmt_int(busy)} = {r:.2f}x", ">= 0.9x (noise)",
            "PASS" if r >= 0.9 else "FAIL", "x", problems=problems("idle1", "idle2", "busy1", "busy2"))
    else:
        row(17, name, None, "n/a", ">= 0.9x (noise)", "skip")
    b = num(env, "groups_struct_bytes")
    if b is not None:
        per = b / 1000
        row(17, "Redis bytes per active group beside its jobs (group hash + round)", per,
            f"{per:.0f} B", "<= 100 B", "PASS" if per <= 100 else "FAIL", "B")
    b, held = num(env, "groups_busy_struct_bytes"), num(env, "groups_busy_held")
    if b is not None and held is not None:
        per = b / 1000
        ok = held == 2000  # two jobs of every group in flight, else the state measured is not the one named
        row(17, "Redis bytes per active group at groupConcurrency 4 + groupRate, 2 jobs in flight each "
            "(group hash + round + rate lists)", per, f"{per:.0f} B", "<= 100 B",
            ("PASS" if per <= 100 else "FAIL") if ok else "FAIL", "B",
            "" if ok else f"{held:.0f} jobs in flight, not 2,000")
    gm, pm = num(env, "grouped_mem"), num(env, "plain_mem")
    if gm is not None and pm is not None and consume_n:
        per = (gm - pm) / consume_n
        row(17, "Redis bytes a job in a group costs over one without (used_memory)", per, f"{per:.0f} B", "-",
            "info", "B", "its group in its record and its entry on the group's range, the groups' structures")
    im, dm = num(env, "groups_idle_mem"), num(env, "groups_delayed_mem")
    if im is not None and dm is not None:
        per = (im - dm) / 100000
        row(17, "Redis bytes an idle group with one delayed job costs over the same job without a group", per,
            f"{per:.0f} B", "-", "info", "B")


def peers_figure(env, row, lat_row, noise):
    """Figure 18 (issue 34): hourglass beside BullMQ 5 and beanstalkd on this machine, in this run.
    Each ratio takes hourglass's side from the same run (figure 0's pushes, figure 2's 1,000/s, the
    peers phase's own 64-consumer drains) and stands only when the runs on both sides are sound."""
    n = int(num(env, "peers_n") or 0)
    conns = int(num(env, "peers_conns") or 64)
    quick = f"{n:,} jobs, not the figure's 50,000" if n and n != 50000 else ""
    bmq_skip = env.get("peers_bullmq_skipped", "")
    bs_skip = env.get("peers_beanstalk_skipped", "")

    def best_of(tag):
        runs = env.get(f"{tag}_runs", "").split()
        return f"best of {', '.join(fmt_int(float(x)) for x in runs)}" if len(runs) > 1 else ""

    def bmq_problems(tag, jobs=None):
        """A BullMQ run (bench/peers/*.mjs) that failed adds or jobs, or did not finish its work."""
        if num(env, f"{tag}_rate") is None:
            return ["the node script failed: see the run's log"] if num(env, f"{tag}_tool_failed") == 1 else []
        out = []
        if num(env, f"{tag}_add_errors"):
            out.append(f"{int(num(env, f'{tag}_add_errors')):,} adds failed")
        done = num(env, f"{tag}_completed")
        if jobs and done is not None and done < jobs:
            out.append(f"{jobs - done:,.0f} jobs not completed ({done:,.0f} of {jobs:,})")
        if num(env, f"{tag}_failed"):
            out.append(f"{int(num(env, f'{tag}_failed')):,} jobs failed")
        if not out and (num(env, f"{tag}_tool_failed") == 1 or num(env, f"{tag}_ok") == 0):
            out.append("the node script reported a failure: see the run's log")
        return out

    def notes(*xs):
        return "; ".join(x for x in xs if x)

    def noisy(who, tag):  # noise() of one side of a ratio, saying which
        return f"{who}: {noise(tag)}" if noise(tag) else ""

    # -- durable pushes vs BullMQ's Queue.add
    name = f"durable pushes/s / BullMQ Queue.add/s, {conns} producers"
    push, add = num(env, "push_rps"), num(env, "bmqadd_rate")
    if bmq_skip:
        row(18, name, None, "n/a", ">= 1.0x", "skip", notes=f"BullMQ skipped: {bmq_skip}")
    elif push is None:
        row(18, name, None, "n/a", ">= 1.0x", "skip", notes="figure 0 (phase push) was not measured in this run")
    elif add is None:
        row(18, name, None, "n/a", ">= 1.0x", "FAIL", notes="; ".join(bmq_problems("bmqadd")) or "BullMQ not measured")
    else:
        r = push / add
        row(18, name, r, f"{fmt_int(push)} / {fmt_int(add)} = {r:.2f}x", ">= 1.0x", "PASS" if r >= 1.0 else "FAIL",
            "x", notes(f"hourglass: figure 0, {best_of('push')}", f"BullMQ: {best_of('bmqadd')}",
                       noisy("hourglass", "push"), noisy("BullMQ", "bmqadd")),
            of_runs(("hourglass push", wrk_problems(env, "push")), ("BullMQ add", bmq_problems("bmqadd"))))
    if add is not None and not bmq_skip:
        p99 = num(env, "bmqadd_add_ms_p99")
        row(18, f"BullMQ {env.get('peers_bullmq_version', '?')} Queue.add/s ({conns} producers, one node process, "
            f"its own Redis, no persistence)", add,
            f"{fmt_int(add)}/s" + (f" (p99 {fmt_ms(p99)} ms)" if p99 is not None else ""), "-", "info", "adds/s",
            notes(best_of("bmqadd"), f"BullMQ's Redis {num(env, 'bmqadd_cpu_server') or 0:.2f} cores, node "
                  f"{num(env, 'bmqadd_cpu_loadgen') or 0:.2f}", noise("bmqadd")), bmq_problems("bmqadd"))

    # -- deliveries vs BullMQ's Worker
    wrk_rate, fn, gf = num(env, "bmqwrk_rate"), num(env, "pfn_rate"), num(env, "pgf_rate")
    for tag, what, target in (("pfn", "get?finish=", ">= 0.7x"), ("pgf", "get+finish", "-")):
        v = fn if tag == "pfn" else gf
        name = f"{what} jobs/s / BullMQ Worker jobs/s, {conns} consumers / concurrency {conns}, {n:,} ready jobs"
        if bmq_skip:
            row(18, name, None, "n/a", target, "skip", notes=f"BullMQ skipped: {bmq_skip}")
            continue
        probs = of_runs((f"hourglass {what}", drain_problems(env, tag, n)), ("BullMQ Worker",
                                                                          bmq_problems("bmqwrk", n)))
        if v is None or wrk_rate is None:
            row(18, name, None, "n/a", target, "FAIL" if probs else "skip", notes=quick, problems=probs)
            continue
        r = v / wrk_rate
        result = ("PASS" if r >= 0.7 else "FAIL") if target != "-" else "info"
        row(18, name, r, f"{fmt_int(v)} / {fmt_int(wrk_rate)} = {r:.2f}x", target, result, "x",
            notes(best_of(tag) if tag == "pfn" else "", f"BullMQ: {best_of('bmqwrk')}" if best_of("bmqwrk") else "",
                  quick, noisy("hourglass", tag), noisy("BullMQ", "bmqwrk")), probs)
    if wrk_rate is not None and not bmq_skip:
        fs = num(env, "bmqwrk_rate_from_start")
        row(18, f"BullMQ Worker jobs/s (concurrency {conns}, no-op, one node process; first to last completion)",
            wrk_rate, f"{fmt_int(wrk_rate)}/s", "-", "info", "jobs/s",
            notes(f"{fmt_int(fs)}/s from the Worker's start" if fs else "", "removeOnComplete",
                  f"BullMQ's Redis {num(env, 'bmqwrk_cpu_server') or 0:.2f} cores, node "
                  f"{num(env, 'bmqwrk_cpu_loadgen') or 0:.2f}", quick), bmq_problems("bmqwrk", n))

    if not bmq_skip and (num(env, "bmqlat1k_lat_ms_p99") is not None or num(env, "bmqlat1k_tool_failed") == 1):
        lat_row(18, "bmqlat1k", 1000, f"BullMQ lateness p50/p99/max @ 1,000 jobs/s (Worker of concurrency {conns}, "
                "figure 2's delays 1-3 s)", None)

    # -- lateness vs beanstalkd with its binlog fsynced on every put
    name = "lateness p99 @ 1,000 jobs/s, hourglass / beanstalkd (binlog fsync every put)"
    hg, bs = num(env, "lat1k_lat_ms_p99"), num(env, "bslat1k_lat_ms_p99")
    if bs_skip:
        row(18, name, None, "n/a", "<= beanstalkd p99 + 1 ms", "skip", notes=f"beanstalkd skipped: {bs_skip}")
    elif hg is None:
        row(18, name, None, "n/a", "<= beanstalkd p99 + 1 ms", "skip",
            notes="figure 2 (phase lateness) was not measured in this run")
    else:
        probs = of_runs(("hourglass", load_problems(env, "lat1k", 1000)), ("beanstalkd",
                                                                          load_problems(env, "bslat1k", 1000)))
        if bs is None:
            row(18, name, None, "n/a", "<= beanstalkd p99 + 1 ms", "FAIL",
                notes="beanstalkd's run gave no lateness: see the run's log", problems=probs)
        else:
            row(18, name, {"hourglass": hg, "beanstalkd": bs}, f"{fmt_ms(hg)} / {fmt_ms(bs)} ms", "<= beanstalkd p99 + 1 ms",
                "PASS" if hg <= bs + 1.0 else "FAIL", "ms",
                notes("hourglass: figure 2 (delays 1-3 s)", "beanstalkd: delay 2 s, due = put sent + 2 s",
                      noisy("hourglass", "lat1k"), noisy("beanstalkd", "bslat1k")), probs)
    if not bs_skip:
        for tag, rate in (("bslat1k", 1000), ("bslat5k", 5000)):
            if num(env, f"{tag}_lat_ms_p99") is not None or num(env, f"{tag}_tool_failed") == 1:
                lat_row(18, tag, rate, f"beanstalkd lateness p50/p99/max @ {rate:,} jobs/s (binlog, fsync every put; "
                        f"delay 2 s)", None)
        for tag, how in (("bsputfsync", "binlog, fsync every put"), ("bsputnobinlog", "no binlog")):
            v = num(env, f"{tag}_rate")
            if v is None and num(env, f"{tag}_tool_failed") != 1:
                continue
            errs_n = int(num(env, f"{tag}_put_errors") or 0)
            probs = [f"{errs_n:,} puts failed"] if errs_n else (
                ["the load tool failed: see the run's log"] if v is None else [])
            p99 = num(env, f"{tag}_put_ms_p99")
            row(18, f"beanstalkd put/s, {conns} connections ({how}; delay 1 h)", v,
                "n/a" if v is None else f"{fmt_int(v)}/s" + (f" (p99 {fmt_ms(p99)} ms)" if p99 is not None else ""),
                "-", "info", "puts/s", notes(f"beanstalkd {num(env, f'{tag}_cpu_server') or 0:.2f} cores", noise(tag)),
                probs)


def main():
    env_path, out_path, raw_dir = sys.argv[1:4]
    env = load(env_path)
    mode = env.get("mode", "?")
    backlog = int(num(env, "backlog_n") or 0)
    consume_n = int(num(env, "consume_n") or 0)
    rows = []

    def row(fig, name, value, display, target, result, unit="", notes="", problems=()):
        # problems: why the runs under this row do not count (load_problems and its kin); any one
        # fails the row, whatever its value, and leads its notes
        problems = list(problems)
        if problems and result != "skip":
            result = "FAIL"
        notes = "; ".join(x for x in problems + [notes] if x)
        rows.append({"figure": fig, "name": name, "value": value, "unit": unit, "display": display,
                     "target": target, "result": result, "notes": notes, "problems": problems})

    def noise(tag):
        o = num(env, f"{tag}_cpu_other")
        return f"other load {o:.2f} cores" if o is not None and o >= 0.15 else ""

    # ---- figure 0 and 1: pushes/s
    push, perrow, hello = num(env, "push_rps"), num(env, "perrow_rps"), num(env, "hello_rps")

    def errs(tag):
        bad = (num(env, f"{tag}_non2xx") or 0) + (num(env, f"{tag}_socket_errors") or 0)
        return int(bad)

    def rps_row(fig, tag, name):
        v = num(env, f"{tag}_rps")
        runs = env.get(f"{tag}_runs", "").split()
        both = f"best of {', '.join(fmt_int(float(x)) for x in runs)}" if len(runs) > 1 else ""
        notes = "; ".join(x for x in (both, noise(tag)) if x)
        p99 = num(env, f"{tag}_lat_p99_ms")
        disp = "n/a" if v is None else f"{fmt_int(v)}/s" + (f" (p99 {fmt_ms(p99)} ms)" if p99 is not None else "")
        row(fig, name, v, disp, "-", "info" if v is not None else "skip", "req/s", notes,
            wrk_problems(env, tag) if v is not None else [])

    rps_row(0, "push", "durable pushes/s, group commit")
    rps_row(0, "perrow", "durable pushes/s, per_row_commit=true")
    if push and perrow:
        row(0, "group commit speed-up", push / perrow, f"{push / perrow:.2f}x", "-", "info", "x")
    else:
        row(0, "group commit speed-up", None, "n/a", "-", "skip")
    # Figure 1: both servers at each connection count of the sweep (the base count's runs are
    # figure 0's push and the plain "hello"); the figure is peak against peak.
    base = int(num(env, "wrk_conns") or 64)
    sweep = sorted({base} | {int(c) for c in env.get("sweep_conns", "").split()})

    def tag_at(server, conns):
        return server if conns == base else f"{server}{conns}c"

    rps_row(1, "hello", f"bare evhttp hello (bench/hello.c) req/s, {base} connections")
    peaks = {}
    sweep_problems = []  # the peak row stands on every run of the sweep, not only on the two peaks
    for conns in sweep:
        p, h = num(env, f"{tag_at('push', conns)}_rps"), num(env, f"{tag_at('hello', conns)}_rps")
        if p is None or h is None:
            continue
        probs = of_runs((f"push at {conns}", wrk_problems(env, tag_at("push", conns))),
                        (f"hello at {conns}", wrk_problems(env, tag_at("hello", conns))))
        note = "; ".join(x for x in (noise(tag_at("push", conns)), noise(tag_at("hello", conns))) if x)
        row(1, f"push / hello at {conns} connections", p / h, f"{fmt_int(p)} / {fmt_int(h)} = {p / h:.3f}", "-",
            "info", "x", note, probs)
        sweep_problems += probs
        if not probs:
            peaks[conns] = (p, h)
    if peaks:
        pc = max(peaks, key=lambda c: peaks[c][0])
        hc = max(peaks, key=lambda c: peaks[c][1])
        r = peaks[pc][0] / peaks[hc][1]
        row(1, "durable push / hello, peak against peak", r,
            f"{fmt_int(peaks[pc][0])} ({pc}) / {fmt_int(peaks[hc][1])} ({hc}) = {r:.3f}", ">= 0.40",
            "PASS" if r >= 0.4 else "FAIL", "x", f"sweep over {', '.join(str(c) for c in sweep)} connections",
            sweep_problems)
    else:
        row(1, "durable push / hello, peak against peak", None, "n/a", ">= 0.40",
            "FAIL" if sweep_problems else "skip", notes="; ".join(sweep_problems))

    # ---- figure 2: lateness
    def lat_row(fig, tag, rate, name, limit):
        p50, p99, mx = num(env, f"{tag}_lat_ms_p50"), num(env, f"{tag}_lat_ms_p99"), num(env, f"{tag}_lat_ms_max")
        if p99 is None:
            failed = num(env, f"{tag}_tool_failed") == 1
            row(fig, name, None, "n/a", f"p99 <= {limit} ms" if limit else "-", "FAIL" if failed else "skip",
                notes="the load tool failed: see the run's log" if failed else "")
            return
        notes = []
        if num(env, f"{tag}_redelivered"):
            notes.append(f"{int(num(env, f'{tag}_redelivered'))} redeliveries")
        if num(env, f"{tag}_duplicates"):
            notes.append(f"{int(num(env, f'{tag}_duplicates'))} duplicate deliveries")
        notes.append(f"n={int(num(env, f'{tag}_lat_ms_n') or 0):,}")
        if noise(tag):
            notes.append(noise(tag))
        # a lateness without a target is still a load's: one that lost jobs or ran slow fails
        row(fig, name, {"p50": p50, "p99": p99, "max": mx},
            f"{fmt_ms(p50)} / {fmt_ms(p99)} / {fmt_ms(mx)} ms", f"p99 <= {limit} ms" if limit else "-",
            ("PASS" if p99 <= limit else "FAIL") if limit else "info", "ms", "; ".join(notes),
            load_problems(env, tag, rate))

    lat_row(2, "lat1k", 1000, "lateness p50/p99/max @ 1,000 jobs/s", 5)
    lat_row(2, "lat5k", 5000, "lateness p50/p99/max @ 5,000 jobs/s", 20)

    # ---- figure 3: consume
    for tag, k in (("consume", 1), ("consume10", 10)):
        v = num(env, f"{tag}_rate")
        row(3, f"get+finish jobs/s, count={k}, backlog {consume_n:,}", v,
            f"{fmt_int(v)}/s" if v is not None else "n/a", "-", "info" if v is not None else "skip", "jobs/s",
            problems=drain_problems(env, tag, consume_n))
        us = num(env, f"{tag}_script_usec")
        if v is not None and us is not None and consume_n:
            per = us / consume_n
            row(3, f"Redis script time per job, get+finish count={k}", per, f"{per:.1f} us", "-", "info", "us",
                "FCALL time in INFO commandstats over the drain, divided by its jobs")
    # the same drain, count=1, each get finishing the job before (GET /get?finish=): one request a job
    v, v1 = num(env, "consumefn_rate"), num(env, "consume_rate")
    if v is not None:
        row(3, f"get?finish= jobs/s (one request a job), count=1, backlog {consume_n:,}", v,
            f"{fmt_int(v)}/s" + (f" = {v / v1:.2f}x get+finish" if v1 else ""), "-", "info", "jobs/s",
            problems=drain_problems(env, "consumefn", consume_n))

    # ---- figure 4: backlog scaling
    lat_row(4, "latbig", 1000, f"lateness p50/p99/max @ 1,000/s, {backlog:,} pending", None)
    small, big = num(env, "lat1k_lat_ms_p99"), num(env, "latbig_lat_ms_p99")
    if small and big is not None:
        r = big / small
        row(4, f"p99 lateness, {backlog:,} vs 1,000 pending", r,
            f"{fmt_ms(big)} / {fmt_ms(small)} ms = {r:.2f}x", "<= 1.5x", "PASS" if r <= 1.5 else "FAIL", "x",
            noise("latbig"), of_runs((f"{backlog:,} pending", load_problems(env, "latbig", 1000)),
                                     ("1,000 pending", load_problems(env, "lat1k", 1000))))
    else:
        row(4, f"p99 lateness, {backlog:,} vs 1,000 pending", None, "n/a", "<= 1.5x", "skip")
    pbig = num(env, "pushbig_rps")
    if push and pbig:
        r = pbig / push
        row(4, f"pushes/s, {backlog:,} vs 1,000 pending", r, f"{fmt_int(pbig)} / {fmt_int(push)} = {r:.2f}x", "-",
            "info", "x", noise("pushbig"), of_runs((f"{backlog:,} pending", wrk_problems(env, "pushbig")),
                                                   ("1,000 pending", wrk_problems(env, "push"))))
    else:
        row(4, f"pushes/s, {backlog:,} vs 1,000 pending", None, "n/a", "-", "skip")

    # ---- figure 5: restore
    secs = num(env, "restore_secs")
    restored, pending = num(env, "restore_restored"), num(env, "restore_pending")
    limit5 = 30.0 * backlog / 1_000_000 if backlog else 30.0
    if secs is not None and restored is not None:
        notes = [f"{fmt_int(restored)} restored of {fmt_int(pending)} pending"]
        ok = env.get("restore_status") == "200" and restored == pending
        if not ok:
            notes.append("NOT everything came back")
        if backlog != 1_000_000:
            notes.append("target scaled to the backlog size")
        jsecs = num(env, "restore_journal_secs")
        if jsecs is not None:
            notes.append(f"journal caught up {jsecs:.1f} s later")
        if noise("restore"):
            notes.append(noise("restore"))
        row(5, f"restore {fmt_int(pending)} pending into an empty Redis", secs, f"{secs:.1f} s",
            f"<= {limit5:g} s", "PASS" if ok and secs <= limit5 else "FAIL", "s", "; ".join(notes))
    else:
        row(5, "restore into an empty Redis", None, "n/a", f"<= {limit5:g} s", "skip")

    # ---- figure 6: memory
    m0, m1, nj, body = num(env, "mem_before"), num(env, "mem_after"), num(env, "backlog_fill_jobs"), num(env, "mem_body")
    if m0 is not None and m1 is not None and nj:
        per = (m1 - m0) / nj - body
        row(6, f"Redis bytes per pending job beyond its body ({fmt_int(nj)} jobs, {int(body)}-byte body)", per,
            f"{per:.0f} B", "<= 250 B", "PASS" if per <= 250 else "FAIL", "bytes",
            f"used_memory {m0 / 2**20:.1f} -> {m1 / 2**20:.1f} MiB")
    else:
        row(6, "Redis bytes per pending job beyond its body", None, "n/a", "<= 250 B", "skip")

    # ---- figure 7: webhook delivery (lateness into the load tool's receiver; deliveries/s)
    lat_row(7, "whlat1k", 1000, "webhook lateness p50/p99/max @ 1,000 jobs/s", 10)
    v = num(env, "whdrain_rate")
    whn = int(num(env, "wh_drain_n") or 0)
    name7 = (f"webhook deliveries/s, backlog {whn:,}, 1 topic, concurrency "
             f"{int(num(env, 'whdrain_concurrency') or num(env, 'wh_concurrency') or 0)}")
    if v is not None:
        notes = []
        got = int(num(env, "whdrain_received") or 0)
        if num(env, "whdrain_ok") != 1:
            notes.append(f"received {got:,} of {whn:,}: NOT every job arrived")
        if num(env, "whdrain_duplicates"):
            notes.append(f"{int(num(env, 'whdrain_duplicates'))} duplicate deliveries")
        fp = num(env, "whdrain_rate_from_put")
        if fp:
            notes.append(f"{fp:,.0f}/s counted from the route's PUT")
        if noise("whdrain"):
            notes.append(noise("whdrain"))
        row(7, name7, v, f"{fmt_int(v)}/s", "-", "info" if num(env, "whdrain_ok") == 1 else "FAIL", "jobs/s",
            "; ".join(notes))
    else:
        failed = num(env, "whdrain_tool_failed") == 1
        row(7, name7, None, "n/a", "-", "FAIL" if failed else "skip",
            notes="the load tool failed: see the run's log" if failed else "")

    # ---- figure 8: amqp delivery (through a private RabbitMQ into the load tool's consumer)
    if env.get("amqp_skipped"):
        row(8, "amqp lateness p50/p99/max @ 1,000 jobs/s", None, "n/a", "p99 <= 20 ms", "skip",
            notes=f"skipped: {env['amqp_skipped']}")
    elif env.get("amqp_failed"):
        row(8, "amqp lateness p50/p99/max @ 1,000 jobs/s", None, "n/a", "p99 <= 20 ms", "FAIL",
            notes=env["amqp_failed"])
    else:
        lat_row(8, "amqplat1k", 1000, "amqp lateness p50/p99/max @ 1,000 jobs/s", 20)

    # ---- figures 9-13: tiers (issue 13)
    tiers(env, row, rps_row, lat_row, noise)

    # ---- figure 14: a topic's purge beside live traffic
    pn = int(num(env, "purge_n") or 0)
    if num(env, "plat0_lat_ms_p99") is not None or num(env, "platp_lat_ms_p99") is not None:
        lat_row(14, "plat0", 1000, f"lateness p50/p99/max @ 1,000/s, {pn:,} delayed jobs of another topic", None)
        lat_row(14, "platp", 1000, f"the same while they are purged", None)
        if num(env, "plat1_lat_ms_p99") is not None:
            lat_row(14, "plat1", 1000, f"the same after the purge", None)
        # the p99 without a purge: the windows before and after it pooled (runs before 2026-11-27
        # had only the window before)
        base = num(env, "plat_base_lat_ms_p99") or num(env, "plat0_lat_ms_p99")
        during = num(env, "platp_lat_ms_p99")
        without = "before and after it" if num(env, "plat_base_lat_ms_p99") else "before it"
        secs, deleted = num(env, "purge_secs"), int(num(env, "purge_deleted") or 0)
        left = int(num(env, "purge_left") or 0)
        notes = [f"purge: {deleted:,} deleted in {secs or 0:.2f} s ({deleted / secs if secs else 0:,.0f}/s), "
                 f"HTTP {env.get('purge_status', '?')}, {left:,} left"]
        lat_secs = num(env, "purge_during_secs") or num(env, "purge_lat_secs")
        if secs is not None and lat_secs and secs < lat_secs:
            notes.append(f"the purge overlapped only {secs:.1f} s of the {lat_secs:g} s load beside it")
        if noise("platp"):
            notes.append(noise("platp"))
        ok_purge = env.get("purge_status") == "200" and deleted == pn and left == 0
        if not ok_purge:
            notes.append("NOT every job purged")
        if base and during is not None:
            r = during / base
            row(14, f"lateness p99 during a purge / {without}", r, f"{fmt_ms(during)} / {fmt_ms(base)} ms = {r:.2f}x",
                "<= 1.2x", "PASS" if r <= 1.2 and ok_purge else "FAIL", "x", "; ".join(notes),
                of_runs(("during", load_problems(env, "platp", 1000)), ("before", load_problems(env, "plat0", 1000)),
                        ("after", load_problems(env, "plat1", 1000))))
        else:
            row(14, "lateness p99 during a purge / without one", None, "n/a", "<= 1.2x", "skip", notes="; ".join(notes))

    # ---- figure 15: one Redis vs a 3-master + 3-replica Redis Cluster, on this machine
    if env.get("cluster_failed"):
        row(15, "pushes/s and consume jobs/s, 3-master cluster vs 1 Redis", None, "n/a", "-", "FAIL",
            notes=env["cluster_failed"])
    elif any(num(env, k) is not None for k in ("cl1push_rps", "cl3push_rps", "cl1cons_rate", "cl3cons_rate")):
        cluster_figure(env, row, rows, noise, errs, consume_n, raw_dir)

    # ---- figure 16: one MariaDB vs a 3-node Galera cluster, and the journal's ceiling
    if any(k.startswith("gal_") for k in env):
        galera_figure(env, row)

    # ---- figure 17: flow control by key
    if any(num(env, f"{t}_rate") is not None for t in ("plain", "grouped", "idle1")):
        groups_figure(env, row, consume_n)

    # ---- figure 18: hourglass beside BullMQ and beanstalkd (issue 34)
    if "peers_n" in env:
        peers_figure(env, row, lat_row, noise)

    # ---- the daemon's own view of each measurement
    daemon = {}
    for tag in ["push", "perrow", "pushbig", "lat1k", "lat5k", "latbig", "restore", "whlat1k", "whdrain",
                "amqplat1k"] + [f"push{c}c" for c in sweep if c != base] + [
                "nearpush", "farpush", "tlat0", "tpush0", "trestore0", "tlatbig", "trestorebig", "tpushbig",
                "bucket", "bucketn", "plat0", "platp", "plat1", "cl1push", "cl3push", "cl1cons", "cl3cons"]:
        x = internals(raw_dir, tag)
        if x:
            daemon[tag] = x

    # ---- print
    print()
    print(f"hourglass benchmark — {mode} run, {env.get('date', '?')}, commit {env.get('commit', '?')}")
    print(f"machine: {env.get('machine', '?')}")
    print(f"servers: {env.get('versions', '?')}")
    print(f"load from other processes just before the run: {env.get('busy_before', '?')} cores "
          f"(per figure: 'other load' notes when >= 0.15 cores); suite ran at nice {env.get('nice', '?')}")
    print(f"wrk: {env.get('wrk_threads')} threads, {env.get('wrk_conns')} connections (figure 1: also "
          f"{', '.join(str(c) for c in sweep if c != base) or 'no other counts'}), {env.get('wrk_secs')} s, "
          f"POST /push, one job per request (100-byte body, delay 1 h, 16 topics); "
          f"HTTP threads: hourglassd {env.get('http_threads')}, hello {env.get('hello_threads', env.get('http_threads'))}; "
          f"figures 0 and 1: best of two runs each")
    if env.get("tiers") == "1":
        print(f"tiers (figures 9-13): figures 0-8 run with [queue] horizon = 0 (every pending job in Redis); "
              f"9-12 with horizon {(num(env, 'tier_horizon') or 0) / 1000:g} s, near jobs due in "
              f"{(num(env, 'near_delay') or 0) / 60000:g} min, far ones in {(num(env, 'far_delay') or 0) / 3600000:g} h "
              f"(figure 9: 30 days); figures 11-13's far jobs bulk-loaded into MySQL by bench/farload.py")
    print(f"delivery routes (figures 7, 8): 4 topics at 1,000 jobs/s in all, delays 1-3 s; webhook: each topic "
          f"concurrency {env.get('wh_lat_concurrency', '?')} to bench/lateness.c's HTTP receiver; amqp: a private "
          f"RabbitMQ ({env.get('rabbit_version', 'not run')}), persistent + confirms, to its consumer; "
          f"lateness = receipt - runAt")
    if env.get("cluster_masters") or env.get("cluster_failed"):
        print(f"Redis Cluster (figure 15): 3 masters + 3 replicas on loopback (masters on "
              f"{', '.join(':' + p for p in env.get('cluster_masters', '').split()) or '?'}, node timeout 1 s, "
              f"up in {env.get('cluster_start_s', '?')} s), the daemon with [redis] cluster = true and the six as "
              f"seeds, 8 shards as with one Redis; figure 0's wrk load (best of two, alternating) and figure 3's "
              f"consume on each")
    if "peers_n" in env:
        bmq = (f"BullMQ {env['peers_bullmq_version']} (node {env.get('peers_node_version', '?')}) on a Redis of its own"
               if env.get("peers_bullmq_version") else "BullMQ not run")
        print(f"peers (figure 18): {bmq}; {env.get('peers_beanstalkd_version') or 'beanstalkd not run'} "
              f"(-b, -f 0: fsync every binlog write); hourglass's side from figures 0 and 2 of this run and its own "
              f"{int(num(env, 'peers_conns') or 64)}-consumer drains of {int(num(env, 'peers_n') or 0):,} jobs")
    if mode == "quick":
        print(f"QUICK MODE: reduced sizes — wrk {env.get('wrk_secs')} s (full: 10 s), lateness {env.get('lat_secs')} s "
              f"(full: 30 s), consume backlog {consume_n:,} (full: 100,000), delayed backlog {backlog:,} "
              f"(full: 1,000,000), webhook backlog {int(num(env, 'wh_drain_n') or 0):,} (full: 100,000); tiers: far "
              f"jobs for Redis memory {int(num(env, 'farmem_n') or 0):,} (full: 1,000,000), far backlog "
              f"{int(num(env, 'far_n') or 0):,} (full: 10,000,000), bucket {int(num(env, 'bucket_n') or 0):,} jobs due "
              f"within {(num(env, 'bucket_spread') or 0) / 1000:g} s, horizon {(num(env, 'bucket_horizon') or 0) / 1000:g} s "
              f"(full: 1,000,000 within 60 s, horizon 180 s)")
    print()
    w1 = max(len(f"{r['figure']}  {r['name']}") for r in rows)
    w2 = max(len(r["display"]) for r in rows)
    w3 = max(len(r["target"]) for r in rows)
    hdr = f"{'figure':<{w1}}  {'value':<{w2}}  {'target':<{w3}}  result"
    print(hdr)
    print("-" * (len(hdr) + 4))
    for r in rows:
        name = f"{r['figure']}  {r['name']}"
        line = f"{name:<{w1}}  {r['display']:<{w2}}  {r['target']:<{w3}}  {r['result']}"
        if r["notes"]:
            line += f"   ({r['notes']})"
        print(line)
    failed = [f"{r['figure']} {r['name']}" for r in rows if r["result"] == "FAIL"]
    if daemon:
        print()
        print("inside hourglassd during each measurement (its /metrics; journal busy = share of the time the")
        print("journal thread spent in a MySQL write+commit cycle; '<=' values are histogram bucket bounds;")
        print("threads by the names the daemon gives them):")

        def f(x, spec):
            return "n/a" if x is None else format(x, spec)

        for tag, x in daemon.items():
            rate = num(env, f"{tag}_rps") or num(env, f"{tag}_push_rate") or num(env, f"{tag}_rate")
            if rate and x.get("redis_evalsha_per_s") is not None:
                x["redis_scripts_per_job"] = x["redis_evalsha_per_s"] / rate
            line = f"  {tag:<8} "
            if x["push_server_ms"] is not None:
                line += f"push {f(x['push_server_ms'], '.2f')} ms in server; "
            line += (f"Redis call {f(x['redis_call_ms'], '.2f')} ms"
                    f" ({f(x['redis_calls_per_s'], ',.0f')}/s); journal {f(x['journal_cycles_per_s'], ',.0f')} cycles/s x "
                    f"{f(x['journal_batch'], '.1f')} records, {f(x['journal_cycle_ms'], '.2f')} ms each, busy "
                    f"{f(x['journal_busy'] * 100 if x['journal_busy'] is not None else None, '.0f')}%")
            if x.get("redis_evalsha_per_s") is not None:
                line += (f"; Redis: {f(x['redis_evalsha_per_s'], ',.0f')} scripts/s"
                         f" ({f(x.get('redis_scripts_per_job'), '.1f')} per job), {f(x.get('redis_evalsha_us'), '.0f')} us each;"
                         f" HTTP {f(x['http_per_s'], ',.0f')} req/s")
            if x["server_lateness_mean_ms"] is not None:
                line += (f"; lateness (server) mean {f(x['server_lateness_mean_ms'], '.2f')} ms, p99 <= "
                         f"{f(x['server_lateness_p99_ms_le'], 'g')} ms")
            for route, r in (x.get("routes") or {}).items():
                line += (f"; {route} route: {f(sum(r['per_s'].values()), ',.0f')} answers/s, latency (handed to the route"
                         f" -> its answer) mean {f(r['latency_mean_ms'], '.2f')} ms, p99 <= "
                         f"{f(r['latency_p99_ms_le'], 'g')} ms")
                if r["failed"] or r["undelivered"]:
                    line += f", {r['failed']:.0f} failed, {r['undelivered']:.0f} undelivered"
            if x.get("threads"):
                busy = [(k, v) for k, v in x["threads"].items() if v >= 0.005]
                line += "; threads (cores): " + ", ".join(f"{k} {v:.2f}" for k, v in busy)
            print(line)
    print()
    waited = num(env, "quiet_waited_s")
    print(f"targets: {sum(r['result'] == 'PASS' for r in rows)} pass, {len(failed)} fail; run took "
          f"{env.get('elapsed_s', '?')} s" + (f" (after waiting {waited:.0f} s for a quiet machine)" if waited else ""))

    raw = {}
    for k, v in env.items():
        x = num(env, k)
        raw[k] = x if x is not None and k not in ("commit", "date") else v
    doc = {
        "date": env.get("date"), "mode": mode, "commit": env.get("commit"), "machine": env.get("machine"),
        "versions": env.get("versions"), "binary": env.get("binary"), "elapsed_s": num(env, "elapsed_s"),
        "figures": rows, "failed": failed, "daemon": daemon, "raw": raw, "raw_dir": raw_dir,
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
