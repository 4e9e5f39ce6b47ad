#!/usr/bin/env python3
"""bench/farload.py — SQL that bulk-loads far jobs straight into MySQL (figures 11, 12, 13).

    python3 bench/farload.py --jobs N --run-at MS --spread MS [options] | mariadb hourglass

Pushing ten million jobs through HTTP takes longer than the rest of the suite, so the far
backlog is written the way the daemon would have written it, without the daemon: for each job
a `message` row in state 'far' with its far key (far_shard, far_run_at) and its push (schema
9's push_* columns, so that rows are as wide as the daemon's), and per topic its `far_count`.

Ids follow src/core/ids.h (| 41 bits ms since 2024-01-01 | 10 bits worker | 12 bits k * shards +
shard |), with shard = the topic's shard (FNV-1a of its name, mod shards), so every job lands
on the shard the daemon would have chosen and pages in through that shard's pager. The ids'
milliseconds start a day before now (--id-ms-ago) and the worker is 1023, so no id the daemon
makes during the run can collide with them; 512 ids per millisecond.

Due times: job i of N is due at run_at + floor(i * spread / N), so they rise with the id and
each shard's far keys are appended in key order (a random order would make the load
several times slower). Rows go in with MariaDB's SEQUENCE engine, --chunk jobs per INSERT ...
SELECT and per transaction.

Topics: --topics names PREFIX.0 ... PREFIX.(T-1); with --balance (default) the prefix is
PREFIX, PREFIX1, PREFIX2... the first whose names fall on the shards as evenly as possible
(the chosen prefix is printed on stderr as `prefix=...` and in a SQL comment).
"""
import argparse
import sys
import time

IDS_EPOCH_MS = 1704067200000
WORKER = 1023
PER_MS = 512


def topic_shard(name, shards):
    h = 2166136261
    for b in name.encode():
        h ^= b
        h = (h * 16777619) & 0xFFFFFFFF
    return h % shards


def pick_prefix(base, topics, shards, balance):
    best = None
    for n in range(0, 20000 if balance else 1):
        prefix = base if n == 0 else f"{base}{n}"
        counts = [0] * shards
        for t in range(topics):
            counts[topic_shard(f"{prefix}.{t}", shards)] += 1
        spread = max(counts) - min(counts)
        if best is None or spread < best[0]:
            best = (spread, prefix)
        if spread <= (0 if topics % shards == 0 else 1):
            break
    return best[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, required=True)
    ap.add_argument("--run-at", type=int, required=True, help="due time of the first job, unix ms")
    ap.add_argument("--spread", type=int, required=True, help="due times spread over this many ms")
    ap.add_argument("--prefix", default="far")
    ap.add_argument("--topics", type=int, default=16)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--ttr", type=int, default=30000)
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--body-bytes", type=int, default=16)
    ap.add_argument("--chunk", type=int, default=500000)
    ap.add_argument("--id-ms-ago", type=int, default=86400000)
    ap.add_argument("--no-balance", action="store_true")
    ap.add_argument("--state", choices=("far", "delayed"), default="far",
                    help="delayed: near jobs (message rows only), for /reStore to put into Redis")
    a = ap.parse_args()
    if a.jobs < 1 or a.body_bytes < 2 or a.shards < 1 or a.shards > 256 or a.topics < 1:
        sys.exit("farload: bad options")
    if (PER_MS - 1) * a.shards + a.shards - 1 > 0xFFF:
        sys.exit("farload: too many shards for 512 ids per ms")
    prefix = pick_prefix(a.prefix, a.topics, a.shards, not a.no_balance)
    print(f"prefix={prefix}", file=sys.stderr)
    now = int(time.time() * 1000)
    ms0 = now - a.id_ms_ago - IDS_EPOCH_MS
    body = '"' + "x" * (a.body_bytes - 2) + '"'
    out = sys.stdout
    w = out.write
    w(f"-- bench/farload.py: {a.jobs} far jobs, topics {prefix}.0..{a.topics - 1}, due {a.run_at} + [0, {a.spread}) ms\n")
    w("SET SESSION unique_checks = 0;\n")
    w("CREATE TEMPORARY TABLE farload_topic (t INT NOT NULL PRIMARY KEY, topic VARCHAR(128) NOT NULL, "
      "shard INT NOT NULL) ENGINE=MEMORY;\n")
    w("INSERT INTO farload_topic VALUES " + ",".join(
        f"({t},'{prefix}.{t}',{topic_shard(f'{prefix}.{t}', a.shards)})" for t in range(a.topics)) + ";\n")
    for lo in range(0, a.jobs, a.chunk):
        n = min(a.chunk, a.jobs - lo)
        i = f"({lo} + s.seq)"
        idexpr = (f"(({ms0} + {i} DIV {PER_MS}) << 22) | ({WORKER} << 12) | "
                  f"(({i} MOD {PER_MS}) * {a.shards} + m.shard)")
        runat = f"{a.run_at} + ({i} * {a.spread}) DIV {a.jobs}"
        w("START TRANSACTION;\n")
        farkey = f"m.shard, {runat}" if a.state == "far" else "NULL, NULL"
        w("INSERT INTO message (id, topic, biz_key, body, run_at, priority, ttr, tries, attempts, backoff, state, "
          "version, created_at, updated_at, far_shard, far_run_at, push_state, push_actor, push_host, "
          "push_instance)\n")
        w(f"  SELECT {idexpr}, m.topic, NULL, '{body}', {runat}, 5, {a.ttr}, {a.tries}, 0, NULL, '{a.state}', 1, "
          f"{now}, {now}, {farkey}, '{a.state}', CONCAT('http-0 hg:{{', m.shard, '}}:jobs'), '127.0.0.1', "
          f"'farload'\n")
        w(f"  FROM seq_0_to_{n - 1} s JOIN farload_topic m ON m.t = {i} MOD {a.topics};\n")
        w("COMMIT;\n")
    counts = [0] * a.topics
    for t in range(a.topics):
        counts[t] = a.jobs // a.topics + (1 if t < a.jobs % a.topics else 0)
    if a.state == "far":
        w("INSERT INTO far_count (topic, jobs) VALUES " + ",".join(
            f"('{prefix}.{t}',{counts[t]})" for t in range(a.topics) if counts[t]) +
          " ON DUPLICATE KEY UPDATE jobs = jobs + VALUES(jobs);\n")
    w("DROP TEMPORARY TABLE farload_topic;\n")


if __name__ == "__main__":
    main()
