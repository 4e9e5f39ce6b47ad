#!/bin/sh
# bench/run.sh — hourglass's benchmark suite (what each figure means: docs/performance.md).
#
#   sh bench/run.sh quick|full BINARY        (make bench-quick / make bench)
#
# One run measures every figure on one fresh private stack and prints one table:
#   0  group commit: durable pushes/s, normal vs [mysql] per_row_commit = true
#   1  durable pushes/s vs a bare libevent server (bench/hello.c): both at each connection count
#      of a sweep, same wrk settings; the figure is peak against peak
#   2  delivery lateness p50/p99/max at steady 1,000 and 5,000 jobs/s (bench/lateness.c)
#   3  consume throughput (get + finish, and get?finish= one request a job) from a ready backlog
#   4  lateness p99 and push throughput with a large delayed backlog vs 1,000 pending
#   5  /reStore of that backlog into an emptied Redis
#   6  Redis bytes per pending job beyond its body
#   7  webhook delivery: lateness p50/p99/max at a steady 1,000 jobs/s into the load tool's own
#      HTTP receiver, and deliveries/s of a ready backlog
#   8  amqp delivery: lateness p50/p99/max at a steady 1,000 jobs/s through a private RabbitMQ
#      to the load tool's own consumer (skipped, saying so, when rabbitmq-server is not installed)
# Tiers ([queue] horizon; figures 0-8 run with horizon = 0, every pending job in Redis as before):
#   9  Redis bytes per far job (pushed through HTTP, due in 30 days, horizon 1 h)
#  10  far pushes/s vs near pushes/s: figure 0's wrk load, jobs due in 1 day vs in 30 minutes
#  11  near-job push rate and lateness p99 with 10,000,000 far jobs pending vs none (the far jobs
#      bulk-loaded straight into MySQL by bench/farload.py, due over 1-30 days)
#  12  /reStore into an emptied Redis with those 10,000,000 far jobs pending (and 1,000 near)
#  13  a bucket of 1,000,000 far jobs due within one minute, paged in ahead (horizon 3 min: lead
#      2 min): lateness p50/p99/max of their deliveries to long-polling consumers
# Purge (issue 18; horizon 0 as figures 0-8):
#  14  figure 2's steady 1,000 jobs/s on other topics while POST /topics/{topic}/purge deletes
#      100,000 delayed jobs of one topic, vs the same load just before on the same data: lateness
#      p99 ratio, and how long the purge took
# Redis Cluster (issue 14; horizon 0 as figures 0-8):
#  15  figure 0's push load and figure 3's consume on one Redis vs a 3-master + 3-replica Redis
#      Cluster started on loopback by this script ([redis] cluster = true, the seed list as address):
#      pushes/s and jobs/s of each, cluster / single, Redis CPU per job, the jobs per master
# MySQL as a cluster (issue 32; horizon 0 as figures 0-8; bench/galera.py, its own servers):
#  16  figure 0's push load on one MariaDB vs a 3-node MariaDB Galera cluster on loopback ([mysql]
#      hosts, writes through node 1): pushes/s, p50/p99, the journal's commit time and MariaDB CPU per
#      push of each; and the journal's ceiling: records/s and MariaDB CPU while array pushes fill
#      GAL_FILL jobs, as records per MariaDB core-second
# Flow control by key (issue 36; horizon 0 as figures 0-8):
#  17  figure 3's consume (CONSUMERS consumers, count=1, CONSUME_N ready jobs over 4 topics) with the
#      jobs in 1,000 groups at groupConcurrency 1 vs the same jobs without groups (>= 0.8x), then
#      again beside 100,000 idle groups (each with one job delayed by an hour: a field of their
#      topic's group hash each) vs beside the same 100,000 delayed jobs without groups (reserve's
#      cost unchanged: within noise), and the
#      Redis bytes of an active group's structures beside its jobs (MEMORY USAGE of the topics'
#      group hash and round-robin zset over the groups), and of a grouped job over a plain one
# Peers (issue 34; horizon 0 as figures 0-8; phase "peers"):
#  18  hourglass beside BullMQ 5 and beanstalkd on this machine, in this run: figure 0's durable
#      pushes/s against BullMQ's Queue.add/s (bench/peers/bullmq_add.mjs: 64 producers in one node
#      process, delay 1 h, WRK_SECS; its own private Redis without persistence; best of two each);
#      get?finish= jobs/s with 64 consumers against a BullMQ Worker of concurrency 64
#      (bench/peers/bullmq_worker.mjs), PEERS_N ready jobs each (50,000, quick too), and get +
#      finish likewise; figure 2's lateness p99 at 1,000 jobs/s against beanstalkd's with a binlog
#      fsynced on every put (bench/beanstalk.c lateness, delay 2 s: beanstalkd's delays are whole
#      seconds), its 5,000/s and its put/s (64 connections) with and without the binlog, and BullMQ's
#      lateness at 1,000 jobs/s (bench/peers/bullmq_lateness.mjs, figure 2's schedule). BullMQ comes
#      from the npm registry (bench/peers/package-lock.json, `npm ci` when bench/peers/node_modules is
#      missing), beanstalkd from Debian; a peer that cannot run is skipped, its rows saying why
# Ratios compare numbers measured in this same run (the machine is small and noisy).
# quick: every size and duration cut down (said in the output), 4-5 minutes.
# full:  the real sizes (1,000,000 backlog, 10,000,000 far jobs), ~20 minutes, plus perf profiles of
#        the push path, of the restores and of figure 13's paging.
#
# Results: bench/results/<UTC timestamp>.json and latest.json (same content), latency-cdf.png,
# latency-tail.png, lateness-time.png, <timestamp>-perf.txt and <timestamp>-perf-restore.txt
# (full), and the raw data (samples, wrk output, /metrics snapshots) under
# bench/results/<timestamp>/. bench/results/ is git-ignored. A full run of every phase (no
# HG_BENCH_PHASES) then rewrites the summary block docs/performance.md opens with
# (bench/summary.py: each figure's target, value, result, the commit and the date).
#
# Servers: a fresh Redis (no persistence) and MariaDB (innodb_flush_log_at_trx_commit=1, no
# binlog, 1 GiB buffer pool) on free loopback ports under a mktemp -d directory, removed on
# exit (HG_BENCH_KEEP=1 keeps it); figure 15 adds six Redis Cluster nodes there for its phase
# only. Between phases the daemon is stopped, Redis flushed and the tables truncated, so no phase
# inherits another's jobs (except where the figure says so).
#
# Environment knobs (defaults in brackets): HG_BENCH_WRK_CONNS [64], HG_BENCH_WRK_THREADS [2],
# HG_BENCH_SWEEP_CONNS [64 128 256 512 in full, 64 512 in quick: figure 1's sweep],
# HG_BENCH_HTTP_THREADS [nproc: hourglassd's [http] threads],
# HG_BENCH_HELLO_THREADS [nproc: hello's threads], HG_BENCH_PROFILE [1 in full, 0 in quick],
# HG_BENCH_LAT_PRODUCERS [128], HG_BENCH_LAT_CONSUMERS [64], HG_BENCH_LAT_COUNT [10],
# HG_BENCH_LAT_CONSUMER_TOPICS [one] (figures 2, 4: "one" = consumer i polls topic i mod 4, "all"),
# HG_BENCH_PHASES [all] (space-separated subset of: hello perrow push lateness consume backlog
# webhook amqp farpush farbacklog bucket purge cluster galera groups peers; farpush, farbacklog and bucket are the tiers'
# figures 9-10, 11-12, 13; purge is figure 14; cluster is figure 15; galera is figure 16; groups is figure 17; peers
# is figure 18, whose ratios take figures 0 and 2 from the push and lateness phases), HG_BENCH_WH_CONCURRENCY [64: the route's concurrency in figure 7's deliveries/s],
# HG_BENCH_WH_LAT_CONCURRENCY [16: per topic, in figure 7's lateness run], HG_BENCH_CONSUME_N
# [100,000 in full, 10,000 in quick: figure 3's ready backlog], HG_BENCH_PEERS_N [50,000: figure 18's ready jobs a delivery run],
# HG_BENCH_BUCKET_GRACE [120] and HG_BENCH_BUCKET_NEAR [1] (figure 13: seconds past the bucket's last
# due time for every job to arrive; 0 = no near jobs beside the bucket), HG_BENCH_BUCKET_HORIZON and
# HG_BENCH_BUCKET_AHEAD [by mode, ms: figure 13's horizon, and when its first job is due after the
# load starts; full: 1200000 and 800000, the bucket paged at the 2,000 jobs/s pacing floor],
# HG_BENCH_KEEP [0], HG_BENCH_LOG_LEVEL [warn: the daemon's [log] level], HG_BENCH_QUIET_WAIT [0]: seconds to wait, before starting, for the machine
# to be quiet (other processes using under HG_BENCH_QUIET_MAX [0.3] cores over 5 s); the
# load seen before and during every measurement is recorded either way.
# HG_BENCH_NICE [unset]: run the whole suite (servers, daemon, load generators) at this nice
# value, e.g. -10 on a shared box so other people's work disturbs the figures less (negative
# values need root); recorded in the results.
set -eu

usage() {
    echo "usage: sh bench/run.sh quick|full BINARY" >&2
    exit 2
}
die() {
    echo "bench: $*" >&2
    exit 1
}

[ $# -eq 2 ] || usage
MODE=$1
case "$MODE" in quick | full) ;; *) usage ;; esac
[ -x "$2" ] || die "$2 is not an executable (build it first: make)"
BIN=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
PATH=$PATH:/usr/sbin:/sbin
for c in cc pkg-config wrk gnuplot curl python3 redis-server redis-cli mariadbd mariadb mariadb-admin \
    mariadb-install-db; do
    command -v "$c" >/dev/null 2>&1 || die "'$c' not found: run sh scripts/deps.sh bench (as root)"
done

if [ -n "${HG_BENCH_NICE:-}" ]; then
    # The kernel groups processes by session (autogroup) and shares CPU between groups, so a
    # plain renice does not help against another session's load: the suite runs in its own
    # session whose autogroup gets the nice value. This process only waits and forwards signals.
    if [ -z "${HG_BENCH_INNER:-}" ]; then
        HG_BENCH_INNER=1 setsid sh "$0" "$@" &
        inner=$!
        trap 'kill -TERM "$inner" 2>/dev/null || true' INT TERM HUP
        rc=0
        while kill -0 "$inner" 2>/dev/null; do
            wait "$inner" && rc=0 || rc=$?
        done
        exit "$rc"
    fi
    if [ -w /proc/self/autogroup ]; then
        echo "$HG_BENCH_NICE" >/proc/self/autogroup 2>/dev/null || die "cannot set the autogroup nice to $HG_BENCH_NICE (needs root)"
    fi
    renice -n "$HG_BENCH_NICE" -p $$ >/dev/null || die "renice $HG_BENCH_NICE failed (negative values need root)"
fi

# ------------------------------------------------------------------ sizes

NPROC=$(nproc)
WRK_THREADS=${HG_BENCH_WRK_THREADS:-2}
WRK_CONNS=${HG_BENCH_WRK_CONNS:-64} # figure 0, and the first point of figure 1's sweep
BASE_CONNS=$WRK_CONNS
# Both servers run with their defaults: one HTTP thread per core.
HTTP_THREADS=${HG_BENCH_HTTP_THREADS:-$NPROC}
HELLO_THREADS=${HG_BENCH_HELLO_THREADS:-$NPROC}
PHASES=${HG_BENCH_PHASES:-hello perrow push lateness consume backlog webhook amqp farpush farbacklog bucket purge cluster galera groups peers}
PURGE_N=100000       # figure 14: delayed jobs of one topic purged beside figure 2's load (both modes),
PURGE_LAT_SECS=20    # measured for this long before and after the purge, twice as long during it (both modes: a p99 of 6 s is noise)
PREFILL=1000         # delayed jobs pending during the "1,000 pending" measurements
FAR=2592000000       # 30 days: backlog jobs never come due during the run
MEM_BODY=16          # figure 6: each job's body is a 16-byte JSON string
LAT_DMIN=1000        # figure 2: delays spread over 1-3 s
LAT_DMAX=3000
LAT_PRODUCERS=${HG_BENCH_LAT_PRODUCERS:-128}
LAT_CONSUMERS=${HG_BENCH_LAT_CONSUMERS:-64}
LAT_COUNT=${HG_BENCH_LAT_COUNT:-10}
LAT_TOPICS=4
LAT_CTOPICS=${HG_BENCH_LAT_CONSUMER_TOPICS:-one} # consumer i polls topic i mod 4 ("all": every topic)
CONSUMERS=16         # figure 3
WH_CONCURRENCY=${HG_BENCH_WH_CONCURRENCY:-64}         # figure 7, deliveries/s: one topic, its route's concurrency
WH_LAT_CONCURRENCY=${HG_BENCH_WH_LAT_CONCURRENCY:-16} # figure 7, lateness: each of the 4 topics' route's concurrency
BUCKET_GRACE=${HG_BENCH_BUCKET_GRACE:-120} # figure 13: seconds after the last due time for every job to arrive
BUCKET_NEAR=${HG_BENCH_BUCKET_NEAR:-1}      # figure 13: 0 = no near jobs at 1,000/s while the bucket pages in
TIER_HORIZON=3600000 # figures 9-12: the default horizon, 1 h
NEAR_DELAY=1800000   # figures 10, 11: pushes due in 30 minutes are near...
FAR_DELAY=86400000   # ... and in 1 day far
RABBITMQ_SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server # Debian's; /usr/sbin's wrapper su's to the rabbitmq user
if [ "$MODE" = full ]; then
    WRK_SECS=10
    SWEEP=${HG_BENCH_SWEEP_CONNS:-64 128 256 512}
    LAT_SECS=30
    CONSUME_N=100000
    WH_DRAIN_N=100000
    BACKLOG_N=1000000
    FARMEM_N=1000000     # figure 9
    FAR_N=10000000       # figures 11, 12
    BUCKET_N=1000000     # figure 13: jobs due within BUCKET_SPREAD ms,
    BUCKET_SPREAD=60000
    BUCKET_HORIZON=${HG_BENCH_BUCKET_HORIZON:-1200000} # lead = horizon - min(60 s, horizon / 2) = 1140 s, 10 s buckets, pacing slack 285 s
    BUCKET_AHEAD=${HG_BENCH_BUCKET_AHEAD:-800000} # the first job is due this long after the load starts: the whole
    # bucket is in the window at once, and the ~500 s before the slack page it at the 2,000 jobs/s floor, as the
    # default hour does
    BUCKET_AHEAD_NEAR=120000 # the baseline's: the load, then /reStore (~15 + ~50 s)
    BUCKET_BACKLOG=4000000 # [mysql] backlog: the burst's ~2 transitions per job wait in the outbox
    GAL_FILL=1000000     # figure 16: jobs of the journal's ceiling
    PROFILE=${HG_BENCH_PROFILE:-1}
else
    WRK_SECS=5
    SWEEP=${HG_BENCH_SWEEP_CONNS:-$WRK_CONNS 512} # the two ends of the full sweep
    LAT_SECS=6
    CONSUME_N=10000
    WH_DRAIN_N=10000
    BACKLOG_N=100000
    FARMEM_N=100000
    FAR_N=1000000
    BUCKET_N=100000      # the same due rate as full's (16,667 jobs/s), for 6 s
    BUCKET_SPREAD=6000
    BUCKET_HORIZON=${HG_BENCH_BUCKET_HORIZON:-150000} # lead 90 s, 10 s buckets, pacing slack 60 s
    BUCKET_AHEAD=${HG_BENCH_BUCKET_AHEAD:-88000}
    BUCKET_AHEAD_NEAR=25000
    BUCKET_BACKLOG=1000000
    GAL_FILL=200000
    PROFILE=${HG_BENCH_PROFILE:-0}
fi
PEERS_CONNS=64       # figure 18: BullMQ's producers and Worker concurrency, hourglass's consumers, beanstalkd's put connections
PEERS_N=${HG_BENCH_PEERS_N:-50000} # figure 18: ready jobs of each delivery run (both modes: a drain takes seconds)
CONSUME_N=${HG_BENCH_CONSUME_N:-$CONSUME_N} # an A/B of the consume path wants a longer drain than quick's

# ------------------------------------------------------------------ bookkeeping

START=$(date +%s)
TS=$(date -u +%Y%m%dT%H%M%SZ)
# The commit docs/performance.md's summary names (a full run's, at the end): taken now, as the
# binary was built from it; "+dirty" when a tracked file differs, the doc itself aside (the last
# full run rewrote it)
SUMMARY_COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no -- . ':!docs/performance.md' 2>/dev/null)" ]; then
    SUMMARY_COMMIT="$SUMMARY_COMMIT+dirty"
fi
RESULTS=$BENCH/results
RAW=$RESULTS/$TS
mkdir -p "$RAW"
WORK=$(mktemp -d /tmp/hgbench.XXXXXX)
ENV=$RAW/results.env
: >"$ENV"

say() { echo "[bench $(($(date +%s) - START))s] $*" >&2; }
rec() { printf '%s=%s\n' "$1" "$2" >>"$ENV"; } # KEY VALUE
rec_prefixed() { sed -n "s/^\([a-z0-9_]*\)=/$1_\1=/p" >>"$ENV"; } # PREFIX < key=value lines
getv() { sed -n "s/^$1=//p" "$ENV" | tail -n 1; }

REDIS_PID=""
MYSQL_PID=""
DPID=""
HELLO_PID=""
RABBIT_PID=""
EPMD_PID=""
SAMPLER_PID=""
PEER_PID="" # figure 18: BullMQ's Redis or a beanstalkd
CL_PIDS="" CL_PORTS="" CL_SEEDS="" CL_MASTER_PORTS="" CL_MASTER_PIDS="" # figure 15's Redis Cluster
# shellcheck disable=SC2317 # runs from a trap
cleanup() {
    trap - EXIT INT TERM HUP
    for p in $SAMPLER_PID $DPID $HELLO_PID $RABBIT_PID $EPMD_PID $PEER_PID; do
        kill -TERM "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    for p in $CL_PIDS; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $CL_PIDS; do wait "$p" 2>/dev/null || true; done
    if [ -n "$REDIS_PID" ]; then
        kill -TERM "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    fi
    if [ -n "$MYSQL_PID" ]; then
        kill -TERM "$MYSQL_PID" 2>/dev/null || true
        wait "$MYSQL_PID" 2>/dev/null || true
    fi
    if [ "${HG_BENCH_KEEP:-0}" = 1 ]; then
        echo "bench: kept $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# ------------------------------------------------------------------ a quiet machine?

# Busy = user + nice + system + irq + softirq + steal. The kernel charges the softirq time of
# our loopback traffic to the processes it interrupts (their utime + stime add up to user +
# system + softirq), so it belongs in the machine's busy time, or "other" (machine minus
# ours) comes out below zero under load and no other load could ever show.
machine_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
busy_over() { # SECONDS -> cores busy on average
    b0=$(machine_busy)
    sleep "$1"
    echo "$b0 $(machine_busy) $(getconf CLK_TCK) $1" | awk '{ printf "%.2f", ($2 - $1) / $3 / $4 }'
}
rec nice "$(ps -o ni= -p $$ | tr -d ' ')"
QUIET_WAIT=${HG_BENCH_QUIET_WAIT:-0}
QUIET_MAX=${HG_BENCH_QUIET_MAX:-0.3}
waited=0
busy=$(busy_over 2)
while [ "$QUIET_WAIT" -gt 0 ] && [ "$(echo "$busy $QUIET_MAX" | awk '{ print ($1 > $2) }')" = 1 ]; do
    [ "$waited" -lt "$QUIET_WAIT" ] || {
        say "the machine is still busy ($busy cores) after ${QUIET_WAIT}s; measuring anyway"
        break
    }
    say "the machine is busy ($busy cores used by other processes); waiting for it to be quiet"
    busy=$(busy_over 5)
    waited=$((waited + 5))
done
rec busy_before "$busy"
rec quiet_waited_s "$waited"
START=$(date +%s) # the run's time does not count the wait
[ "$(echo "$busy" | awk '{ print ($1 > 0.3) }')" = 0 ] ||
    say "warning: other processes use $busy of $(nproc) cores; figures will be noisy (see 'other load' notes)"

# ------------------------------------------------------------------ tools

say "mode $MODE: wrk ${WRK_SECS}s x ${WRK_CONNS} conns / ${WRK_THREADS} threads, lateness ${LAT_SECS}s, consume backlog $CONSUME_N, delayed backlog $BACKLOG_N"
LEV=$(pkg-config --cflags --libs libevent libevent_pthreads)
# shellcheck disable=SC2086
cc -O2 -g -Wall -Wextra -o "$WORK/hello" "$BENCH/hello.c" $LEV -pthread || die "building bench/hello.c failed"
cc -O2 -g -Wall -Wextra -o "$WORK/lateness" "$BENCH/lateness.c" -lm -lrabbitmq -pthread ||
    die "building bench/lateness.c failed (it needs librabbitmq-dev: sh scripts/deps.sh bench)"
LATENESS=$WORK/lateness
cc -O2 -g -Wall -Wextra -o "$WORK/beanstalk" "$BENCH/beanstalk.c" -lm || die "building bench/beanstalk.c failed"
# A private copy of the daemon: a rebuild of build/hourglassd during the run (others work in
# this tree) must not change the binary between phases.
cp "$BIN" "$WORK/hourglassd"
BIN_SHA=$(sha256sum "$BIN" | cut -c1-12)
BIN_SRC=$BIN
BIN_BUILT=$(date -u -r "$BIN" '+%Y-%m-%d %H:%M UTC')
BIN=$WORK/hourglassd

# ------------------------------------------------------------------ servers

free_ports() { # N: N free loopback ports, held together while they are picked so all differ
    python3 -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

set -- $(free_ports 3)
RPORT=$1 MPORT=$2 HPORT=$3
URL=http://127.0.0.1:$HPORT
MSOCK=$WORK/mysql/mysqld.sock
mkdir -p "$WORK/redis" "$WORK/mysql"

redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK/redis" \
    --logfile "$WORK/redis/redis.log" </dev/null >/dev/null 2>&1 &
REDIS_PID=$!
rcli() { redis-cli -h 127.0.0.1 -p "$RPORT" "$@"; }

userarg=""
[ "$(id -u)" -ne 0 ] || userarg=--user=root
# shellcheck disable=SC2086
mariadb-install-db --no-defaults $userarg --datadir="$WORK/mysql/data" --auth-root-authentication-method=normal \
    --skip-test-db >"$WORK/mysql/install.log" 2>&1 || die "mariadb-install-db failed ($WORK/mysql/install.log)"
# shellcheck disable=SC2086
mariadbd --no-defaults $userarg --datadir="$WORK/mysql/data" --bind-address=127.0.0.1 --port="$MPORT" \
    --socket="$MSOCK" --log-error="$WORK/mysql/mysqld.log" --skip-log-bin --skip-name-resolve \
    --innodb-flush-log-at-trx-commit=1 --innodb-doublewrite=1 --innodb-buffer-pool-size=1G \
    --innodb-log-file-size=512M --max-connections=200 \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci </dev/null >/dev/null 2>&1 &
MYSQL_PID=$!
sqlroot() { mariadb --no-defaults -uroot --socket="$MSOCK" "$@"; }

n=0
until [ "$(rcli ping 2>/dev/null)" = PONG ]; do
    n=$((n + 1))
    [ $n -lt 300 ] || die "redis did not start ($WORK/redis/redis.log)"
    sleep 0.1
done
n=0
until mariadb-admin --no-defaults -uroot --socket="$MSOCK" --connect-timeout=2 ping >/dev/null 2>&1; do
    n=$((n + 1))
    [ $n -lt 600 ] || die "mariadbd did not start ($WORK/mysql/mysqld.log)"
    kill -0 "$MYSQL_PID" 2>/dev/null || die "mariadbd exited ($WORK/mysql/mysqld.log)"
    sleep 0.1
done
sqlroot <<EOF || die "database set-up failed"
CREATE DATABASE hourglass;
CREATE USER 'hourglass'@'127.0.0.1' IDENTIFIED BY 'hourglass';
GRANT ALL PRIVILEGES ON hourglass.* TO 'hourglass'@'127.0.0.1';
EOF
sqlroot hourglass <"$ROOT/sql/schema.sql" || die "applying sql/schema.sql failed"
# The tiers (issue 13): a daemon that knows [queue] horizon and a schema with the far tables.
# Without them (an older build measured for comparison) the tiers' phases are skipped.
HAS_TIERS=0
if "$BIN" -p -c /dev/null 2>/dev/null | grep -q '^horizon' &&
    [ -n "$(sqlroot hourglass -N -B -e "SHOW TABLES LIKE 'far_count'")" ]; then
    HAS_TIERS=1
fi
say "redis :$RPORT and mariadb :$MPORT up in $WORK"

# ------------------------------------------------------------------ the daemon

HORIZON=0 # [queue] horizon of the next start_daemon: 0 (every pending job in Redis) but for the tiers' phases
write_conf() { # FILE PER_ROW
    cat >"$1" <<EOF
# written by bench/run.sh
[http]
listen = 127.0.0.1:$HPORT
threads = $HTTP_THREADS
max_body = 4194304
longpoll_max = 60

[redis]
address = ${REDIS_ADDRESS:-127.0.0.1:$RPORT}
prefix = hg
shards = 8
EOF
    if [ -n "$REDIS_ADDRESS" ]; then
        echo "cluster = true" >>"$1"
    fi
    cat >>"$1" <<EOF

[mysql]
host = 127.0.0.1
port = $MPORT
user = hourglass
password = hourglass
database = hourglass
per_row_commit = $2
backlog = ${BACKLOG:-1000000}

[log]
level = ${HG_BENCH_LOG_LEVEL:-warn}
file = $WORK/daemon.log
EOF
    if [ -n "$AMQP_URL" ]; then
        printf '\n[amqp]\nurl = %s\n' "$AMQP_URL" >>"$1"
    fi
    if [ "$HAS_TIERS" = 1 ]; then
        printf '\n[queue]\nhorizon = %s\n' "$HORIZON" >>"$1"
    fi
}
AMQP_URL="" # set while figure 8's private RabbitMQ runs
REDIS_ADDRESS="" # figure 15: the cluster's seed list (the daemon runs with [redis] cluster = true)

wait_http() { # what, for up to 30 s
    n=0
    until curl -s -o /dev/null -m 2 "$URL/health" 2>/dev/null; do
        n=$((n + 1))
        [ $n -lt 300 ] || die "$1 does not answer on $URL"
        sleep 0.1
    done
}

start_daemon() { # PER_ROW
    write_conf "$WORK/hourglass.conf" "$1"
    "$BIN" -t -c "$WORK/hourglass.conf" >/dev/null || die "the daemon rejects $WORK/hourglass.conf"
    "$BIN" -c "$WORK/hourglass.conf" >>"$WORK/daemon.out" 2>&1 &
    DPID=$!
    n=0
    until [ "$(curl -s -o /dev/null -w '%{http_code}' -m 2 "$URL/health" 2>/dev/null)" = 200 ]; do
        n=$((n + 1))
        kill -0 "$DPID" 2>/dev/null || die "hourglassd exited at start ($WORK/daemon.out, $WORK/daemon.log)"
        [ $n -lt 300 ] || die "hourglassd not healthy within 30 s ($WORK/daemon.log)"
        sleep 0.1
    done
    name_threads
}

# name_threads: the daemon names its threads in the kernel (src/base/log.c: http-N, journal, keeper,
# outbox, db-N); the main thread keeps the process's name and is called "main" here.
name_threads() {
    sleep 0.5
    : >"$WORK/threadmap"
    for tid in $(ls "/proc/$DPID/task" | sort -n); do
        n=$(cat "/proc/$DPID/task/$tid/comm" 2>/dev/null || echo other)
        [ "$tid" = "$DPID" ] && n=main
        echo "$tid $n" >>"$WORK/threadmap"
    done
}

stop_daemon() {
    [ -n "$DPID" ] || return 0
    kill -TERM "$DPID" 2>/dev/null || true
    wait "$DPID" 2>/dev/null || true
    DPID=""
}

reset_data() { # a clean slate: no daemon, empty Redis, empty tables
    stop_daemon
    rcli flushall >/dev/null
    for p in $CL_MASTER_PORTS; do
        redis-cli -h 127.0.0.1 -p "$p" flushall >/dev/null || die "flushall on the cluster's master :$p failed"
    done
    sqlroot hourglass -e 'TRUNCATE TABLE message; TRUNCATE TABLE transition; TRUNCATE TABLE topic_setting;
        TRUNCATE TABLE topic_change' || die "truncate failed"
    if [ "$HAS_TIERS" = 1 ]; then
        sqlroot hourglass -e 'TRUNCATE TABLE far_count; TRUNCATE TABLE far_biz; TRUNCATE TABLE far_mark' ||
            die "truncate of the far tables failed"
    fi
}

# ------------------------------------------------------------------ RabbitMQ (figure 8)

# start_rabbit: a private RabbitMQ (Debian's rabbitmq-server) on free loopback ports, set up as
# tests/integration/harness.py's RabbitMQServer does: everything under $WORK/rabbitmq (config,
# an empty rabbitmq-env.conf so /etc/rabbitmq is never read, mnesia, logs, HOME for the Erlang
# cookie), its own epmd on its own port, no plugins, a node name of its own, and the Erlang VM
# exec'd as our direct child (RABBITMQ_ALLOW_INPUT; -noinput keeps its shell off), so the
# cleanup's SIGTERM reaches it. Never the system's rabbitmq service or epmd. Sets AMQP_PORT and
# AMQP_URL; 1 when it does not answer the AMQP handshake within 120 s.
start_rabbit() {
    RQ=$WORK/rabbitmq
    mkdir -p "$RQ/mnesia" "$RQ/log"
    set -- $(free_ports 3)
    AMQP_PORT=$1 EPMD_PORT=$2 DIST_PORT=$3
    printf '%s\n' "listeners.tcp.default = 127.0.0.1:$AMQP_PORT" "disk_free_limit.absolute = 1MB" \
        "log.console = true" "log.console.level = warning" "log.file = false" >"$RQ/rabbitmq.conf"
    echo '[].' >"$RQ/enabled_plugins"
    : >"$RQ/rabbitmq-env.conf"
    epmd -port "$EPMD_PORT" -address 127.0.0.1 </dev/null >"$RQ/epmd.log" 2>&1 &
    EPMD_PID=$!
    (cd "$RQ" && exec env HOME="$RQ" RABBITMQ_NODENAME="hgbench$$@localhost" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
        RABBITMQ_NODE_PORT="$AMQP_PORT" RABBITMQ_DIST_PORT="$DIST_PORT" ERL_EPMD_PORT="$EPMD_PORT" \
        ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_CONFIG_FILE="$RQ/rabbitmq.conf" \
        RABBITMQ_ADVANCED_CONFIG_FILE="$RQ/advanced.config" RABBITMQ_CONF_ENV_FILE="$RQ/rabbitmq-env.conf" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$RQ/enabled_plugins" RABBITMQ_MNESIA_BASE="$RQ/mnesia" \
        RABBITMQ_LOG_BASE="$RQ/log" RABBITMQ_PID_FILE="$RQ/rabbitmq.pid" RABBITMQ_ALLOW_INPUT=true \
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-noinput -kernel inet_dist_use_interface {127,0,0,1}" \
        "$RABBITMQ_SERVER") </dev/null >"$RQ/rabbitmq.log" 2>&1 &
    RABBIT_PID=$!
    t0=$(date +%s)
    until python3 -c '
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2) as s:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        s.settimeout(2)
        head = b""
        while len(head) < 11:
            b = s.recv(11 - len(head))
            if not b:
                sys.exit(1)
            head += b
        sys.exit(0 if head[0] == 1 and head[7:11] == b"\x00\x0a\x00\x0a" else 1)
except OSError:
    sys.exit(1)' "$AMQP_PORT"; do
        kill -0 "$RABBIT_PID" 2>/dev/null || { tail -n 20 "$RQ/rabbitmq.log" >&2; return 1; }
        [ $(($(date +%s) - t0)) -lt 120 ] || { tail -n 20 "$RQ/rabbitmq.log" >&2; return 1; }
        sleep 0.2
    done
    AMQP_URL="amqp://guest:guest@127.0.0.1:$AMQP_PORT/"
    rec rabbit_start_s "$(($(date +%s) - t0))"
    rec rabbit_version "RabbitMQ $(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null), Erlang $(dpkg-query -W -f '${Version}' erlang-base 2>/dev/null)"
    # The broker's CPU counts as its own, not as other load: RABBIT_PID is the Erlang VM itself.
    [ "$(cat "/proc/$RABBIT_PID/comm" 2>/dev/null)" = beam.smp ] ||
        say "amqp: warning: pid $RABBIT_PID is $(cat "/proc/$RABBIT_PID/comm" 2>/dev/null), not the Erlang VM: its CPU shows as other load"
}
stop_rabbit() {
    for p in $RABBIT_PID $EPMD_PID; do
        kill -TERM "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    RABBIT_PID="" EPMD_PID="" AMQP_URL=""
}

# ------------------------------------------------------------------ Redis Cluster (figure 15)

# start_rcluster: 3 masters + 3 replicas on free loopback ports under $WORK/rcluster, set up as
# tests/integration/rcluster.py sets up the tests' cluster: redis-server --cluster-enabled yes,
# a bus port of its own (--cluster-port), node timeout 1 s, repl-diskless-sync-delay 0 (a
# replica syncs at once), and no persistence, as the single Redis; joined by redis-cli --cluster
# create --cluster-replicas 1. Every node is this shell's direct child (CL_PIDS), so cleanup's
# SIGTERM reaches it on exit and on Ctrl-C. Ready when every node says cluster_state:ok, 16384
# slots and 6 known nodes, 3 of them are masters and every replica's link is up. Sets CL_PORTS,
# CL_SEEDS (the daemon's [redis] address), CL_MASTER_PORTS and CL_MASTER_PIDS; 1 when the
# cluster is not ready within 60 s.
start_rcluster() {
    CL=$WORK/rcluster
    mkdir -p "$CL"
    # shellcheck disable=SC2046 # six client ports and six bus ports
    set -- $(free_ports 12)
    CL_PORTS="" CL_SEEDS=""
    while [ $# -ge 2 ]; do
        mkdir -p "$CL/$1"
        redis-server --port "$1" --cluster-port "$2" --bind 127.0.0.1 --save '' --appendonly no \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 1000 \
            --repl-diskless-sync-delay 0 --dir "$CL/$1" --logfile "$CL/$1/redis.log" </dev/null >/dev/null 2>&1 &
        echo $! >"$CL/$1/pid"
        CL_PIDS="$CL_PIDS $!"
        CL_PORTS="$CL_PORTS $1"
        CL_SEEDS="$CL_SEEDS${CL_SEEDS:+,}127.0.0.1:$1"
        shift 2
    done
    cl_t0=$(date +%s)
    for p in $CL_PORTS; do
        until [ "$(redis-cli -h 127.0.0.1 -p "$p" ping 2>/dev/null)" = PONG ]; do
            [ $(($(date +%s) - cl_t0)) -lt 30 ] || { say "cluster: :$p did not start ($CL/$p/redis.log)"; return 1; }
            sleep 0.1
        done
    done
    # shellcheck disable=SC2046 # one address an argument
    if ! redis-cli --cluster create $(echo "$CL_SEEDS" | tr ',' ' ') --cluster-replicas 1 --cluster-yes \
        </dev/null >"$CL/create.log" 2>&1 || ! grep -q 'All 16384 slots covered' "$CL/create.log"; then
        tail -n 20 "$CL/create.log" >&2
        return 1
    fi
    until rcluster_ready; do
        [ $(($(date +%s) - cl_t0)) -lt 60 ] || { say "cluster: not ready within 60 s"; return 1; }
        sleep 0.2
    done
    CL_MASTER_PORTS="" CL_MASTER_PIDS=""
    for p in $CL_PORTS; do
        [ "$(redis-cli -h 127.0.0.1 -p "$p" role | head -n 1)" = master ] || continue
        CL_MASTER_PORTS="$CL_MASTER_PORTS $p"
        CL_MASTER_PIDS="$CL_MASTER_PIDS $(cat "$CL/$p/pid")"
    done
    rec cluster_start_s "$(($(date +%s) - cl_t0))"
}
rcluster_ready() {
    cl_m=0
    for p in $CL_PORTS; do
        redis-cli -h 127.0.0.1 -p "$p" cluster info 2>/dev/null | tr -d '\r' >"$CL/info"
        grep -qx 'cluster_state:ok' "$CL/info" && grep -qx 'cluster_slots_ok:16384' "$CL/info" &&
            grep -qx 'cluster_known_nodes:6' "$CL/info" || return 1
        case $(redis-cli -h 127.0.0.1 -p "$p" role 2>/dev/null | head -n 1) in
        master) cl_m=$((cl_m + 1)) ;;
        slave)
            redis-cli -h 127.0.0.1 -p "$p" info replication 2>/dev/null | tr -d '\r' |
                grep -qx 'master_link_status:up' || return 1
            ;;
        *) return 1 ;;
        esac
    done
    [ $cl_m = 3 ]
}
stop_rcluster() {
    for p in $CL_PIDS; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $CL_PIDS; do wait "$p" 2>/dev/null || true; done
    CL_PIDS="" CL_PORTS="" CL_SEEDS="" CL_MASTER_PORTS="" CL_MASTER_PIDS=""
    [ "${HG_BENCH_KEEP:-0}" = 1 ] || rm -rf "$WORK/rcluster"
}
# The next start_daemon, reset_data, redis_jobs, scrape and CPU accounting: on the single Redis,
# or on the cluster (the daemon with [redis] cluster = true and the seed list; "redis" CPU = the
# six nodes, the masters also alone).
on_single() { REDIS_ADDRESS="" DATA_PORTS="" REDIS_CPU_PIDS="" REDIS_CPU_MASTERS=""; }
on_cluster() {
    REDIS_ADDRESS=$CL_SEEDS DATA_PORTS=$CL_MASTER_PORTS REDIS_CPU_PIDS=$CL_PIDS REDIS_CPU_MASTERS=$CL_MASTER_PIDS
}
# cluster_spread: how the daemon's data lies over the masters, one line: per master the shards
# holding jobs, the jobs (and their share) and all keys (DBSIZE).
cluster_spread() {
    for p in $CL_MASTER_PORTS; do
        echo ":$p $(redis-cli -h 127.0.0.1 -p "$p" --scan --pattern 'hg:{*}:jobs' | wc -l) $(redis_jobs_at "$p")" \
            "$(redis-cli -h 127.0.0.1 -p "$p" dbsize)"
    done | awk '{ p[NR] = $1; s[NR] = $2; j[NR] = $3; k[NR] = $4; t += $3 }
        END { for (i = 1; i <= NR; i++)
                  printf "%s%s %d shards, %d jobs (%.0f%%), %d keys", (i > 1 ? "; " : ""), p[i], s[i], j[i],
                      t ? 100 * j[i] / t : 0, k[i]
              print "" }'
}

# ------------------------------------------------------------------ measuring helpers

TCK=$(getconf CLK_TCK)
cpu_ticks() { # PID... -> utime+stime of these whole processes, summed (0 for one that is gone)
    ct=0
    for ct_pid in "$@"; do
        if [ -n "$ct_pid" ] && [ -r "/proc/$ct_pid/stat" ]; then
            ct_v=$(sed 's/.*) //' "/proc/$ct_pid/stat" 2>/dev/null | awk '{ print $12 + $13 }')
            ct=$((ct + ${ct_v:-0}))
        fi
    done
    echo $ct
}

# CPU accounting around a measurement: cores used by the server under test, Redis, MariaDB,
# the load generator (this shell's reaped children: wrk or lateness) and everything else on
# the machine ("other": on a shared box, other people's work — a noisy measurement says so).
children_ticks() { # FILE written by `times` in this shell (not in $(...): a subshell has its own)
    awk -v tck="$TCK" 'NR == 2 {
        t = 0
        for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] }
        printf "%d\n", t * tck }' "$1"
}
scrape() { # TAG 0|1: the daemon's /metrics and Redis's commandstats before/after a measurement
    [ -n "$DPID" ] || return 0
    curl -s -m 5 "$URL/metrics" >"$RAW/metrics-$1-$2.txt" 2>/dev/null || true
    for p in $(data_ports); do # (a cluster's masters one after the other: report.py sums them)
        redis-cli -h 127.0.0.1 -p "$p" info commandstats 2>/dev/null || true
    done >"$RAW/redis-$1-$2.txt"
    # CPU ticks per daemon thread: "tid name ticks" (names from name_threads)
    for t in /proc/"$DPID"/task/*; do
        [ -r "$t/stat" ] || continue
        tid=${t##*/}
        name=$(awk -v t="$tid" '$1 == t { print $2 }' "$WORK/threadmap" 2>/dev/null)
        echo "$tid ${name:-new} $(sed 's/.*) //' "$t/stat" | awk '{ print $12 + $13 }')"
    done >"$RAW/threads-$1-$2.txt" 2>/dev/null || true
    date +%s.%N >"$RAW/metrics-$1-$2.time"
}
REDIS_CPU_PIDS=""    # the processes counted as "redis" (default: REDIS_PID; figure 15's cluster: all six nodes)
REDIS_CPU_MASTERS="" # figure 15's cluster: its masters, also recorded alone as TAG_cpu_redis_masters
cpu_begin() { # SERVER_PID
    c_pid=$1
    times >"$WORK/times0"
    c_t0=$(date +%s.%N) c_m0=$(machine_busy)
    # shellcheck disable=SC2086 # lists of pids
    c_s0=$(cpu_ticks "$c_pid") c_r0=$(cpu_ticks ${REDIS_CPU_PIDS:-$REDIS_PID}) c_q0=$(cpu_ticks "$MYSQL_PID")
    c_b0=$(cpu_ticks "$RABBIT_PID")
    # shellcheck disable=SC2086
    c_rm0=$(cpu_ticks $REDIS_CPU_MASTERS)
}
cpu_end() { # TAG
    times >"$WORK/times1"
    c_t1=$(date +%s.%N) c_m1=$(machine_busy)
    # shellcheck disable=SC2086
    c_s1=$(cpu_ticks "$c_pid") c_r1=$(cpu_ticks ${REDIS_CPU_PIDS:-$REDIS_PID}) c_q1=$(cpu_ticks "$MYSQL_PID")
    c_b1=$(cpu_ticks "$RABBIT_PID")
    # shellcheck disable=SC2086
    c_rm1=$(cpu_ticks $REDIS_CPU_MASTERS)
    c_c0=$(children_ticks "$WORK/times0") c_c1=$(children_ticks "$WORK/times1")
    echo "$1 $c_t0 $c_t1 $TCK $((c_s1 - c_s0)) $((c_r1 - c_r0)) $((c_q1 - c_q0)) $((c_c1 - c_c0)) $((c_m1 - c_m0)) $((c_b1 - c_b0))" |
        awk '{ secs = $3 - $2; k = $4 * secs
               o = $9 - $5 - $6 - $7 - $8 - $10; if (o < 0) o = 0
               printf "%s_cpu_server=%.2f\n%s_cpu_redis=%.2f\n%s_cpu_mysql=%.2f\n", $1, $5 / k, $1, $6 / k, $1, $7 / k
               printf "%s_cpu_loadgen=%.2f\n%s_cpu_other=%.2f\n%s_cpu_machine=%.2f\n", $1, $8 / k, $1, o / k, $1, $9 / k
               printf "%s_cpu_window_s=%.3f\n", $1, secs
               if ($10 > 0) printf "%s_cpu_broker=%.2f\n", $1, $10 / k
             }' >>"$ENV"
    if [ -n "$REDIS_CPU_MASTERS" ]; then # figure 15's cluster: its masters' share of "redis"
        echo "$c_t0 $c_t1 $TCK $((c_rm1 - c_rm0))" |
            awk -v t="$1" '{ printf "%s_cpu_redis_masters=%.3f\n", t, $4 / ($3 * ($2 - $1)) }' >>"$ENV"
    fi
}
cores() { # TAG: one line for the log
    echo "cores: server $(getv "${1}_cpu_server") redis $(getv "${1}_cpu_redis") mysql $(getv "${1}_cpu_mysql")$(
        [ -z "$(getv "${1}_cpu_broker")" ] || echo " rabbitmq $(getv "${1}_cpu_broker")") load $(getv "${1}_cpu_loadgen") other $(getv "${1}_cpu_other")"
}

# run_wrk TAG SERVER_PID: wrk with push.lua against $URL/push. Records TAG_rps, latency
# percentiles, non-2xx/socket errors and where the CPU went.
run_wrk() {
    tag=$1
    [ "$2" != "$DPID" ] || scrape "$tag" 0
    cpu_begin "$2"
    wrk -t "$WRK_THREADS" -c "$WRK_CONNS" -d "${WRK_SECS}s" --latency -s "$BENCH/push.lua" "$URL/push" \
        >"$RAW/wrk-$tag.txt" 2>&1 || die "wrk failed (see $RAW/wrk-$tag.txt)"
    cpu_end "$tag"
    [ "$2" != "$DPID" ] || scrape "$tag" 1
    awk -v tag="$tag" '
        function ms(v) {
            if (v ~ /us$/) return v * 0.001
            if (v ~ /ms$/) return v + 0
            if (v ~ /s$/) return v * 1000
            return v
        }
        /Requests\/sec:/ { rps = $2 }
        /requests in/ { n = $1 }
        /Non-2xx or 3xx responses:/ { bad = $5 }
        /Socket errors:/ { gsub(",", ""); serr = $4 + $6 + $8 + $10 }
        /^ +50%/ { p50 = ms($2) } /^ +90%/ { p90 = ms($2) } /^ +99%/ { p99 = ms($2) }
        END {
            printf "%s_rps=%s\n%s_requests=%s\n%s_non2xx=%d\n%s_socket_errors=%d\n", tag, rps, tag, n, tag, bad, tag, serr
            printf "%s_lat_p50_ms=%s\n%s_lat_p90_ms=%s\n%s_lat_p99_ms=%s\n", tag, p50, tag, p90, tag, p99
        }' "$RAW/wrk-$tag.txt" >>"$ENV"
    say "$tag: $(getv "${tag}_rps") req/s, p99 $(getv "${tag}_lat_p99_ms") ms, non-2xx $(getv "${tag}_non2xx"); $(cores "$tag")"
}

# pick_best TAG KEY: of the two runs TAG1 and TAG2, the one with the larger TAG?_KEY becomes TAG
# (its recorded figures copied under TAG; $best names it); TAG_runs records both values.
pick_best() {
    r1=$(getv "${1}1_$2") r2=$(getv "${1}2_$2")
    best=$(echo "$r1 $r2" | awk -v t="$1" '{ print ($2 + 0 > $1 + 0) ? t "2" : t "1" }')
    grep "^${best}_" "$ENV" | sed "s/^${best}_/${1}_/" >"$WORK/best.env"
    cat "$WORK/best.env" >>"$ENV"
    rec "${1}_runs" "$r1 $r2"
}

# keep_best TAG: of the two runs TAG1 and TAG2, the one with more requests/s becomes TAG (its
# figures, daemon metrics and wrk output); TAG_runs records both. A single wrk run of either
# server on this VM can come out tens of percent slow (hello alone measured 60,900-80,600
# req/s in one morning), and figures 0 and 1 are ratios of such runs.
keep_best() {
    pick_best "$1" rps
    cp "$RAW/wrk-$best.txt" "$RAW/wrk-$1.txt"
    for i in 0 1; do
        for f in metrics-$best-$i.txt metrics-$best-$i.time redis-$best-$i.txt threads-$best-$i.txt; do
            [ -f "$RAW/$f" ] && cp "$RAW/$f" "$RAW/$(echo "$f" | sed "s/-$best-/-$1-/")"
        done
    done
    say "$1: best of two runs: $r1 and $r2 req/s"
}

fill() { # PREFIX JOBS DELAY TOPICS BODY_BYTES [tag]
    out=$("$LATENESS" fill "127.0.0.1:$HPORT" --prefix "$1" --jobs "$2" --delay "$3" --topics "$4" \
        --body-bytes "$5" --batch 1000 --producers 4 --max-seconds 900) || die "fill of $2 jobs failed"
    if [ -n "${6:-}" ]; then
        echo "$out" | rec_prefixed "$6"
    fi
}

# steady TAG RATE [MODE [OPTIONS...]]: figure 2's workload (MODE steady, the default: long-polling
# consumers), or figures 7 and 8's (MODE webhook or amqp: the same producers, the jobs delivered by
# that route to the load tool's own receiver; OPTIONS are the tool's for it); samples go to
# $RAW/lat-TAG.{cdf,series}
steady() {
    s_tag=$1 s_rate=$2 s_mode=${3:-steady}
    shift 2
    [ $# -eq 0 ] || shift
    if [ "$s_mode" = steady ]; then
        set -- --consumers "$LAT_CONSUMERS" --count "$LAT_COUNT" --consumer-topics "$LAT_CTOPICS"
        s_how="$LAT_CONSUMERS consumers, count=$LAT_COUNT, $LAT_TOPICS topics, consumer topics: $LAT_CTOPICS"
    else
        s_how="delivered by $s_mode to bench/lateness.c's receiver, $LAT_TOPICS topics, $*"
    fi
    say "$s_tag: steady $s_rate jobs/s for ${LAT_SECS}s (delays ${LAT_DMIN}-${LAT_DMAX} ms, $s_how)"
    scrape "$s_tag" 0
    cpu_begin "$DPID"
    "$LATENESS" "$s_mode" "127.0.0.1:$HPORT" --rate "$s_rate" --duration "$LAT_SECS" --delay-min "$LAT_DMIN" \
        --delay-max "$LAT_DMAX" --producers "$LAT_PRODUCERS" --topics "$LAT_TOPICS" "$@" --prefix "$s_tag" \
        --samples "$RAW/lat-$s_tag.cdf" --series "$RAW/lat-$s_tag.series" \
        --max-seconds 600 >"$RAW/lat-$s_tag.txt" 2>"$RAW/lat-$s_tag.err" || {
        cat "$RAW/lat-$s_tag.err" >&2
        echo "bench: the $s_tag lateness run reported a failure (see above); its numbers are kept and marked" >&2
        rec "${s_tag}_tool_failed" 1
    }
    set -- "$s_tag"
    cpu_end "$1"
    scrape "$1" 1
    rec_prefixed "$1" <"$RAW/lat-$1.txt"
    say "$1: lateness p50 $(getv "${1}_lat_ms_p50") p99 $(getv "${1}_lat_ms_p99") max $(getv "${1}_lat_ms_max") ms over $(getv "${1}_lat_ms_n") jobs; pushed at $(getv "${1}_push_rate")/s; $(cores "$1")"
}

journal_idle() { # SECONDS: wait until /stats shows no journal backlog; 1 if it never does
    _deadline=$(($(date +%s) + $1))
    while [ "$(date +%s)" -lt "$_deadline" ]; do
        _b=$(curl -s -m 5 "$URL/stats" | python3 -c 'import json,sys
try:
    j = json.load(sys.stdin)["journal"]
    print(j["backlog"] + j["durableWaiting"])
except Exception:
    print(-1)')
        [ "$_b" = 0 ] && return 0
        sleep 0.5
    done
    return 1
}
redis_mem() { rcli info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p'; }
# Microseconds Redis spent in scripts since the last CONFIG RESETSTAT (INFO commandstats: FCALL,
# and EVALSHA/EVAL for builds before the scripts became functions): what the Lua side of a path
# costs, apart from the network and the daemon.
script_usec() {
    rcli info commandstats | tr -d '\r' | sed -n 's/^cmdstat_\(fcall\|evalsha\|eval\):.*,usec=\([0-9]*\),.*/\2/p' |
        awk '{ t += $1 } END { print t + 0 }'
}
# The Redis nodes that hold the daemon's data now: the single Redis, or (figure 15) the
# cluster's masters.
DATA_PORTS=""
data_ports() { echo "${DATA_PORTS:-$RPORT}"; }
redis_jobs_at() { # PORT -> total HLEN of the shards' jobs hashes on that node
    # Every shard's jobs hash is hg:{<tag>}:jobs, the tag "3" on a single Redis and "3.2520" in a
    # cluster (src/core/shardtag.h), whatever the shard count: find them by SCAN, not by number.
    redis-cli -h 127.0.0.1 -p "$1" --scan --pattern 'hg:{*}:jobs' | sed 's/^/HLEN /' |
        redis-cli -h 127.0.0.1 -p "$1" | awk '{ t += $1 } END { print t + 0 }'
}
redis_jobs() { # total HLEN of every shard's jobs hash, over every node holding data
    rj=0
    for p in $(data_ports); do rj=$((rj + $(redis_jobs_at "$p"))); done
    echo $rj
}

# perf_report DATA: what perf recorded (all processes), summarised: CPU by process, the
# daemon by thread with each busy thread's top symbols, then Redis and MariaDB.
perf_report() {
    echo "## CPU samples by process (hourglassd's threads by their names, then its total)"
    perf report -i "$1" --stdio --sort comm 2>/dev/null | grep '%' | head -20
    perf report -i "$1" --stdio --pid "$DPID" --sort pid --percentage absolute 2>/dev/null | grep '%' |
        awk '{ s += $1 } END { printf "    %.2f%%  hourglassd, all threads\n", s }'
    echo
    echo "## hourglassd by thread (tid; share of hourglassd's samples), then each busy thread's top symbols"
    perf report -i "$1" --stdio --pid "$DPID" --sort pid --percentage relative 2>/dev/null |
        grep '%' | head -10 | tee "$WORK/tids"
    for thread in $(awk '$1 + 0 >= 1 { print $NF }' "$WORK/tids"); do
        tid=${thread%%:*}
        echo
        echo "### $thread"
        perf report -i "$1" --stdio --tid "$tid" --sort dso,sym --percentage relative 2>/dev/null | grep '%' | head -15
    done
    echo
    echo "## hourglassd, all threads, self time by symbol (share of hourglassd's samples)"
    perf report -i "$1" --stdio --pid "$DPID" --sort dso,sym --percentage relative 2>/dev/null | grep '%' | head -40
    echo
    echo "## redis-server, self time by symbol"
    perf report -i "$1" --stdio --pid "$REDIS_PID" --sort sym --percentage relative 2>/dev/null | grep '%' | head -20
    echo
    echo "## mariadbd, self time by symbol"
    perf report -i "$1" --stdio --pid "$MYSQL_PID" --sort sym --percentage relative 2>/dev/null | grep '%' | head -20
}

# profile_push: perf record -a (all processes, 999 Hz) during one more push run, not counted;
# writes the report to bench/results/<timestamp>-perf.txt.
profile_push() {
    [ "$PROFILE" = 1 ] || return 0
    command -v perf >/dev/null 2>&1 || { say "profile: perf not found, skipped"; return 0; }
    say "profile: perf record -a during one more push run (not counted)"
    perf record -a -F 999 -o "$WORK/perf.data" -- sleep "$WRK_SECS" >/dev/null 2>"$WORK/perf.err" &
    ppid=$!
    wrk -t "$WRK_THREADS" -c "$WRK_CONNS" -d "${WRK_SECS}s" -s "$BENCH/push.lua" "$URL/push" \
        >"$RAW/wrk-profile.txt" 2>&1 || true
    wait "$ppid" || true
    {
        echo "# perf record -a -F 999 during wrk push ($WRK_CONNS conns, ${WRK_SECS}s, right after the measured push run), $(date -u)"
        echo "# $(grep 'Requests/sec' "$RAW/wrk-profile.txt")"
        echo
        perf_report "$WORK/perf.data"
    } >"$RESULTS/$TS-perf.txt"
    rm -f "$WORK/perf.data"
    say "profile: $RESULTS/$TS-perf.txt"
}

has_phase() { case " $PHASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# ------------------------------------------------------------------ phases

rec mode "$MODE"
rec phases "$PHASES" # bench/summary.py names what a run left out
rec wrk_secs "$WRK_SECS"
rec wrk_conns "$WRK_CONNS"
rec wrk_threads "$WRK_THREADS"
rec http_threads "$HTTP_THREADS"
rec hello_threads "$HELLO_THREADS"
rec sweep_conns "$SWEEP"
rec nproc "$NPROC"
rec lat_secs "$LAT_SECS"
rec consume_n "$CONSUME_N"
rec backlog_n "$BACKLOG_N"
rec prefill "$PREFILL"
rec lat_producers "$LAT_PRODUCERS"
rec lat_consumers "$LAT_CONSUMERS"
rec lat_count "$LAT_COUNT"
rec lat_ctopics "$LAT_CTOPICS"
rec wh_drain_n "$WH_DRAIN_N"
rec wh_concurrency "$WH_CONCURRENCY"
rec wh_lat_concurrency "$WH_LAT_CONCURRENCY"

if has_phase hello; then
    # Figure 1's denominator: the bare server, same wrk settings and request bodies.
    "$WORK/hello" "127.0.0.1:$HPORT" "$HELLO_THREADS" 2>>"$WORK/hello.log" &
    HELLO_PID=$!
    wait_http "bench/hello"
    run_wrk hello1 "$HELLO_PID"
    run_wrk hello2 "$HELLO_PID"
    keep_best hello
    # Figure 1 compares peaks: the same wrk runs at each connection count of the sweep.
    for conns in $SWEEP; do
        [ "$conns" != "$WRK_CONNS" ] || continue
        WRK_CONNS=$conns
        run_wrk "hello${conns}c1" "$HELLO_PID"
        run_wrk "hello${conns}c2" "$HELLO_PID"
        keep_best "hello${conns}c"
        WRK_CONNS=$BASE_CONNS
    done
    kill -TERM "$HELLO_PID"
    wait "$HELLO_PID" 2>/dev/null || true
    HELLO_PID=""
fi

if has_phase perrow; then
    # Figure 0's baseline: one MySQL transaction (one fsync) per push. Two runs, each from an
    # empty store plus the 1,000 pending jobs; the better one counts.
    for pass_no in 1 2; do
        reset_data
        start_daemon true
        fill pre "$PREFILL" "$FAR" 1 "$MEM_BODY"
        run_wrk "perrow$pass_no" "$DPID"
    done
    keep_best perrow
fi

if has_phase push; then
    # Figures 0, 1 and the "1,000 pending" half of figure 4's push throughput: two runs as
    # for the baseline.
    for pass_no in 1 2; do
        reset_data
        start_daemon false
        fill pre "$PREFILL" "$FAR" 1 "$MEM_BODY"
        run_wrk "push$pass_no" "$DPID"
    done
    keep_best push
    profile_push
    # Figure 1's sweep: more producers make bigger commits (docs/performance.md, figure 1).
    for conns in $SWEEP; do
        [ "$conns" != "$WRK_CONNS" ] || continue
        WRK_CONNS=$conns
        for pass_no in 1 2; do
            reset_data
            start_daemon false
            fill pre "$PREFILL" "$FAR" 1 "$MEM_BODY"
            run_wrk "push${conns}c$pass_no" "$DPID"
        done
        keep_best "push${conns}c"
        WRK_CONNS=$BASE_CONNS
    done
fi

if has_phase lateness; then
    # Figure 2, and the "1,000 pending" half of figure 4's lateness.
    reset_data
    start_daemon false
    fill pre "$PREFILL" "$FAR" 1 "$MEM_BODY"
    steady lat1k 1000
    steady lat5k 5000
fi

if has_phase purge; then
    # Figure 14: a purge of PURGE_N delayed jobs of one topic beside figure 2's steady 1,000
    # jobs/s on other topics, against the same load just before and just after it.
    reset_data
    start_daemon false
    fill pre "$PREFILL" "$FAR" 1 "$MEM_BODY"
    say "purge: filling $PURGE_N delayed jobs (due in 30 days) into topic purge.0"
    fill purge "$PURGE_N" "$FAR" 1 "$MEM_BODY" purge_fill
    rec purge_n "$PURGE_N"
    rec purge_lat_secs "$PURGE_LAT_SECS"
    lat_secs_saved=$LAT_SECS
    LAT_SECS=$PURGE_LAT_SECS
    steady plat0 1000
    say "purge: POST /topics/purge.0/purge?state=all, with the same load beside it"
    curl -s -m 900 -X POST -o "$RAW/purge.json" -w '%{http_code} %{time_total}\n' \
        "$URL/topics/purge.0/purge?state=all" >"$RAW/purge.status" 2>&1 &
    purge_pid=$!
    # while it runs, twice as long as each window without it (so both sides have as many samples)
    LAT_SECS=$((PURGE_LAT_SECS * 2))
    rec purge_during_secs "$LAT_SECS"
    steady platp 1000
    wait "$purge_pid" || echo "bench: the purge request failed" >&2
    # and the same load again once it is over: the p99 without a purge pools the windows before
    # and after it, so that a drift of the machine over the phase does not pass for the purge
    LAT_SECS=$PURGE_LAT_SECS
    steady plat1 1000
    LAT_SECS=$lat_secs_saved
    rec plat_base_lat_ms_p99 "$(sort -n "$RAW/lat-plat0.cdf" "$RAW/lat-plat1.cdf" |
        awk '{ v[NR] = $1 } END { k = int(NR * 0.99); if (k < NR * 0.99) k++; if (k < 1) k = 1; print v[k] }')"
    rec purge_status "$(cut -d' ' -f1 "$RAW/purge.status")"
    rec purge_secs "$(cut -d' ' -f2 "$RAW/purge.status")"
    rec purge_deleted "$(sed -n 's/.*"deleted":\([0-9]*\).*/\1/p' "$RAW/purge.json")"
    rec purge_left "$(curl -s "$URL/topics/purge.0" | sed -n 's/.*"delayed":\([0-9]*\).*/\1/p')"
    say "purge: $(getv purge_deleted) of $PURGE_N deleted in $(getv purge_secs) s (HTTP $(getv purge_status)); $(getv purge_left) left"
fi

if has_phase consume; then
    # Figure 3: fill a ready backlog with array pushes, then get + finish as fast as possible.
    reset_data
    start_daemon false
    say "consume: filling $CONSUME_N ready jobs"
    fill drain "$CONSUME_N" 0 4 "$MEM_BODY" consume_fill
    say "consume: draining with $CONSUMERS consumers, count=1"
    rcli config resetstat >/dev/null
    "$LATENESS" drain "127.0.0.1:$HPORT" --prefix drain --jobs "$CONSUME_N" --consumers "$CONSUMERS" --count 1 \
        --topics 4 --max-seconds 900 >"$RAW/consume.txt" 2>"$RAW/consume.err" || cat "$RAW/consume.err" >&2
    rec_prefixed consume <"$RAW/consume.txt"
    rec consume_script_usec "$(script_usec)"
    say "consume: $(getv consume_rate) jobs/s (count=1)"
    # The same with count=10 (information: how much batching the get helps).
    fill drain10 "$CONSUME_N" 0 4 "$MEM_BODY"
    rcli config resetstat >/dev/null
    "$LATENESS" drain "127.0.0.1:$HPORT" --prefix drain10 --jobs "$CONSUME_N" --consumers "$CONSUMERS" \
        --count 10 --topics 4 --max-seconds 900 >"$RAW/consume10.txt" 2>"$RAW/consume10.err" ||
        cat "$RAW/consume10.err" >&2
    rec_prefixed consume10 <"$RAW/consume10.txt"
    rec consume10_script_usec "$(script_usec)"
    say "consume: $(getv consume10_rate) jobs/s (count=10)"
    # count=1 again, each get finishing the job before it (GET /get?finish=): one request a job.
    fill drainfn "$CONSUME_N" 0 4 "$MEM_BODY"
    "$LATENESS" drain "127.0.0.1:$HPORT" --prefix drainfn --jobs "$CONSUME_N" --consumers "$CONSUMERS" \
        --count 1 --finish-next 1 --topics 4 --max-seconds 900 >"$RAW/consumefn.txt" 2>"$RAW/consumefn.err" ||
        cat "$RAW/consumefn.err" >&2
    rec_prefixed consumefn <"$RAW/consumefn.txt"
    say "consume: $(getv consumefn_rate) jobs/s (count=1, get?finish=)"
fi

if has_phase groups; then
    # Figure 17: figure 3's drain with the jobs in 1,000 groups (4 topics x 250) at groupConcurrency
    # 1, against the same jobs without groups, then beside 100,000 idle groups.
    reset_data
    start_daemon false
    for t in 0 1 2 3; do
        curl -s -m 10 -XPUT "$URL/topics/grp.$t" -d '{"groupConcurrency":1}' >/dev/null ||
            die "groups: PUT /topics/grp.$t failed"
    done
    sleep 1 # every shard's topic hash has it (topics.h: within 1 s)
    group_bytes() { # MEMORY USAGE of the grp.* topics' group structures: group hash, round, rate lists
        gb=0
        for k in $(rcli --scan --pattern "hg:*:gs:grp.*") $(rcli --scan --pattern "hg:*:gq:grp.*") \
            $(rcli --scan --pattern "hg:*:gt:grp.*") $(rcli --scan --pattern "hg:*:gz:grp.*"); do
            gb=$((gb + $(rcli memory usage "$k" samples 0)))
        done
        echo "$gb"
    }
    g_drain() { # TAG PREFIX [--groups N]: fill CONSUME_N ready jobs, drain them as figure 3 does
        g_tag=$1 g_prefix=$2
        shift 2
        m0=$(redis_mem)
        "$LATENESS" fill "127.0.0.1:$HPORT" --prefix "$g_prefix" --jobs "$CONSUME_N" --delay 0 --topics 4 \
            --body-bytes "$MEM_BODY" --batch 1000 --producers 4 --max-seconds 900 "$@" >/dev/null ||
            die "groups: fill of $g_tag failed"
        rec "${g_tag}_mem" "$(($(redis_mem) - m0))"
        if [ "$g_tag" = grouped ]; then # the group structures alone, before anything is delivered
            rec groups_struct_bytes "$(group_bytes)"
        fi
        scrape "$g_tag" 0
        "$LATENESS" drain "127.0.0.1:$HPORT" --prefix "$g_prefix" --jobs "$CONSUME_N" --consumers "$CONSUMERS" \
            --count 1 --topics 4 --max-seconds 900 >"$RAW/$g_tag.txt" 2>"$RAW/$g_tag.err" || {
            cat "$RAW/$g_tag.err" >&2
            rec "${g_tag}_tool_failed" 1 # figure 17's ratio rows fail on it (bench/report.py)
        }
        scrape "$g_tag" 1
        rec_prefixed "$g_tag" <"$RAW/$g_tag.txt"
        say "groups: $g_tag $(getv "${g_tag}_rate") jobs/s"
    }
    g_drain plain nogrp
    g_drain grouped grp --groups 250
    g_drain plain2 nogrp
    g_drain grouped2 grp --groups 250
    # An active group at its busiest: groupConcurrency 4 and a groupRate, two jobs of each group
    # in flight and more waiting — its field of the group hash ("<held> <reserved> <delayed>
    # <ready> <lists> <tat>") and its entry on the round (or on the rate waits), per group.
    for t in 0 1 2 3; do
        curl -s -m 10 -XPUT "$URL/topics/grp.$t" -d '{"groupConcurrency":4,"groupRate":50}' >/dev/null ||
            die "groups: PUT /topics/grp.$t failed"
    done
    sleep 1
    "$LATENESS" fill "127.0.0.1:$HPORT" --prefix grp --jobs 8000 --delay 0 --topics 4 --groups 250 \
        --body-bytes "$MEM_BODY" --batch 1000 --producers 4 --max-seconds 300 >/dev/null ||
        die "groups: fill of the busy groups failed"
    g_held=0
    for g_call in 1 2 3 4 5; do # count=100 takes one job of 100 groups a call, round robin: 2 each
        for t in 0 1 2 3; do
            n=$(curl -s -m 10 "$URL/get/grp.$t?count=100&timeout=0" | grep -o '"id":' | wc -l)
            g_held=$((g_held + n))
        done
    done
    g_bytes=$(group_bytes)
    rec groups_busy_struct_bytes "$g_bytes"
    rec groups_busy_held "$g_held"
    say "groups: 1,000 groups with $g_held jobs in flight: $g_bytes bytes of group structures"
    stop_daemon
    # 100,000 idle groups (one job each, due in an hour: a field of their topic's group hash
    # apiece) against the same 100,000 delayed jobs without groups, each on a fresh slate, twice
    for g_round in 1 2; do
        for g_idle in 0 100000; do
            reset_data
            start_daemon false
            for t in 0 1 2 3; do
                curl -s -m 10 -XPUT "$URL/topics/grp.$t" -d '{"groupConcurrency":1}' >/dev/null ||
                    die "groups: PUT /topics/grp.$t failed"
            done
            sleep 1
            m0=$(redis_mem)
            # shellcheck disable=SC2086 # g_opt: no option, or two words
            g_opt=""
            [ "$g_idle" = 0 ] || g_opt="--groups 100000"
            "$LATENESS" fill "127.0.0.1:$HPORT" --prefix grp --jobs 100000 --delay 3600000 --topics 4 \
                --body-bytes "$MEM_BODY" --batch 1000 --producers 4 --max-seconds 900 $g_opt >/dev/null ||
                die "groups: fill of the delayed jobs failed"
            if [ "$g_idle" = 0 ]; then
                rec groups_delayed_mem "$(($(redis_mem) - m0))"
                g_drain "busy$g_round" grp --groups 250
            else
                rec groups_idle_mem "$(($(redis_mem) - m0))"
                g_drain "idle$g_round" grp --groups 250
            fi
            stop_daemon
        done
    done
fi

if has_phase backlog; then
    # Figures 6, 5 and 4, in that order, on one backlog of BACKLOG_N delayed jobs.
    reset_data
    start_daemon false
    m0=$(redis_mem)
    say "backlog: filling $BACKLOG_N delayed jobs (due in 30 days, ${MEM_BODY}-byte bodies)"
    fill fill "$BACKLOG_N" "$FAR" 8 "$MEM_BODY" backlog_fill
    sleep 1
    m1=$(redis_mem)
    rec mem_before "$m0"
    rec mem_after "$m1"
    rec mem_jobs "$(redis_jobs)"
    rec mem_body "$MEM_BODY"
    say "backlog: filled at $(getv backlog_fill_rate) jobs/s; Redis used_memory $m0 -> $m1"

    # Figure 5: Redis loses everything; rebuild from MySQL.
    pending=$(sqlroot -N -B hourglass -e "SELECT COUNT(*) FROM message WHERE state IN ('delayed','ready','reserved')")
    rec restore_pending "$pending"
    rcli flushall >/dev/null
    say "restore: FLUSHALL, then /reStore?expire=true of $pending pending messages"
    scrape restore 0
    cpu_begin "$DPID"
    rperf=""
    if [ "$PROFILE" = 1 ] && command -v perf >/dev/null 2>&1; then
        perf record -a -F 499 -o "$WORK/perf-restore.data" >/dev/null 2>"$WORK/perf-restore.err" &
        rperf=$!
    fi
    t0=$(date +%s.%N)
    curl -s -m 900 -o "$RAW/restore.json" -w '%{http_code}' "$URL/reStore?expire=true" >"$RAW/restore.status" ||
        echo "bench: /reStore request failed" >&2
    t1=$(date +%s.%N)
    if [ -n "$rperf" ]; then
        kill -TERM "$rperf" 2>/dev/null || true  # (SIGINT is ignored by background jobs of sh)
        wait "$rperf" 2>/dev/null || true
    fi
    cpu_end restore
    scrape restore 1
    if [ -n "$rperf" ]; then
        {
            echo "# perf record -a -F 499 during GET /reStore?expire=true of $pending jobs, $(date -u)"
            echo
            perf_report "$WORK/perf-restore.data"
        } >"$RESULTS/$TS-perf-restore.txt"
        rm -f "$WORK/perf-restore.data"
    fi
    rec restore_status "$(cat "$RAW/restore.status")"
    rec restore_secs "$(echo "$t1 $t0" | awk '{ printf "%.3f", $1 - $2 }')"
    python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    d = {}
for k in ("scanned", "restored", "present", "expiredSkipped", "ms"):
    print("restore_%s=%s" % (k, d.get(k, "")))' "$RAW/restore.json" >>"$ENV"
    rec restore_jobs_after "$(redis_jobs)"
    rec restore_mem_after "$(redis_mem)"
    say "restore: $(getv restore_restored) restored in $(getv restore_secs) s (HTTP $(getv restore_status)); $(cores restore)"

    # The restore journals a 'restored' transition per job through the outbox, and MySQL
    # catches up after /reStore has answered; figure 4 measures the backlog's steady state,
    # not that catch-up, so it starts once the journal is idle (the wait is recorded).
    t0=$(date +%s.%N)
    journal_idle 600 || echo "bench: the journal still had a backlog 600 s after the restore" >&2
    t1=$(date +%s.%N)
    rec restore_journal_secs "$(echo "$t1 $t0" | awk '{ printf "%.3f", $1 - $2 }')"
    say "restore: the journal caught up $(getv restore_journal_secs) s after /reStore answered"

    # Figure 4: the same lateness and push measurements with the backlog pending.
    steady latbig 1000
    run_wrk pushbig "$DPID"

fi

if has_phase webhook; then
    # Figure 7: lateness at 1,000 jobs/s with the jobs POSTed to bench/lateness.c's own HTTP
    # receiver (4 topics, each with a webhook route), then deliveries/s of a ready backlog.
    reset_data
    start_daemon false
    fill pre "$PREFILL" "$FAR" 1 "$MEM_BODY"
    steady whlat1k 1000 webhook --concurrency "$WH_LAT_CONCURRENCY" --timeout 10000
    say "whdrain: filling $WH_DRAIN_N ready jobs on one topic (no route yet)"
    fill whd "$WH_DRAIN_N" 0 1 "$MEM_BODY" whdrain_fill
    say "whdrain: webhook route (concurrency $WH_CONCURRENCY), until the receiver has every job"
    scrape whdrain 0
    cpu_begin "$DPID"
    "$LATENESS" whdrain "127.0.0.1:$HPORT" --prefix whd --jobs "$WH_DRAIN_N" --topics 1 \
        --concurrency "$WH_CONCURRENCY" --timeout 10000 --max-seconds 900 >"$RAW/whdrain.txt" 2>"$RAW/whdrain.err" || {
        cat "$RAW/whdrain.err" >&2
        rec whdrain_tool_failed 1
    }
    cpu_end whdrain
    scrape whdrain 1
    rec_prefixed whdrain <"$RAW/whdrain.txt"
    say "whdrain: $(getv whdrain_rate) jobs/s from the first to the last arrival ($(getv whdrain_received) of $WH_DRAIN_N received, $(getv whdrain_duplicates) duplicates); $(cores whdrain)"
fi

if has_phase amqp; then
    # Figure 8: lateness at 1,000 jobs/s through a private RabbitMQ (publisher confirms) to
    # bench/lateness.c's own consumer.
    if [ ! -x "$RABBITMQ_SERVER" ] || ! command -v epmd >/dev/null 2>&1; then
        say "amqp: SKIPPED: $RABBITMQ_SERVER (Debian's rabbitmq-server) is not installed (sh scripts/deps.sh bench)"
        rec amqp_skipped "rabbitmq-server is not installed"
    else
        stop_daemon
        say "amqp: starting a private rabbitmq-server"
        if start_rabbit; then
            say "amqp: rabbitmq up on :$AMQP_PORT in $(getv rabbit_start_s) s"
            reset_data
            start_daemon false
            fill pre "$PREFILL" "$FAR" 1 "$MEM_BODY"
            steady amqplat1k 1000 amqp --amqp "127.0.0.1:$AMQP_PORT" --queue hgbench --prefetch 1000
            stop_daemon
        else
            say "amqp: FAILED: rabbitmq-server did not start ($WORK/rabbitmq/rabbitmq.log)"
            rec amqp_failed "rabbitmq-server did not start (see the run's log)"
        fi
        stop_rabbit
    fi
fi

# ------------------------------------------------------------------ tiers (issue 13)

# far_load TAG JOBS RUN_AT SPREAD TTR: bulk-load JOBS far jobs straight into MySQL
# (bench/farload.py: message rows in state 'far' with their far keys, far_count; 16 topics spread over the
# shards), due from RUN_AT (unix ms) over SPREAD ms; records TAG_load_secs and TAG_prefix.
far_load() {
    say "$1: bulk-loading $2 far jobs into MySQL (bench/farload.py)"
    t0=$(date +%s.%N)
    python3 "$BENCH/farload.py" --jobs "$2" --run-at "$3" --spread "$4" --ttr "$5" --prefix "$1" --topics 16 \
        --state "${FARLOAD_STATE:-far}" \
        --shards 8 --body-bytes "$MEM_BODY" 2>"$WORK/farload-$1.err" >"$WORK/farload-$1.sql" ||
        die "bench/farload.py failed ($WORK/farload-$1.err)"
    sqlroot hourglass <"$WORK/farload-$1.sql" || die "loading $2 far jobs failed"
    t1=$(date +%s.%N)
    rm -f "$WORK/farload-$1.sql"
    rec "${1}_load_secs" "$(echo "$t1 $t0" | awk '{ printf "%.3f", $1 - $2 }')"
    rec "${1}_prefix" "$(sed -n 's/^prefix=//p' "$WORK/farload-$1.err")"
    rec "${1}_far_rows" "$(sqlroot hourglass -N -B -e 'SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL')"
    say "$1: $(getv "${1}_far_rows") far jobs in $(getv "${1}_load_secs") s"
}

# restore_timed TAG [PROFILE_NAME]: FLUSHALL, then GET /reStore?expire=true, timed by the client;
# records TAG_secs, TAG_status, the answer's counts, the near (delayed/ready/reserved) messages
# it should bring back (TAG_pending), far rows (TAG_far) and Redis's jobs afterwards.
restore_timed() {
    pending=$(sqlroot -N -B hourglass -e "SELECT COUNT(*) FROM message WHERE state IN ('delayed','ready','reserved')")
    rec "${1}_pending" "$pending"
    rec "${1}_far" "$(sqlroot -N -B hourglass -e 'SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL')"
    rcli flushall >/dev/null
    say "$1: FLUSHALL, then /reStore?expire=true ($pending near messages, $(getv "${1}_far") far)"
    scrape "$1" 0
    cpu_begin "$DPID"
    rperf=""
    if [ -n "${2:-}" ] && [ "$PROFILE" = 1 ] && command -v perf >/dev/null 2>&1; then
        perf record -a -F 499 -o "$WORK/perf-$1.data" >/dev/null 2>"$WORK/perf-$1.err" &
        rperf=$!
    fi
    t0=$(date +%s.%N)
    curl -s -m 900 -o "$RAW/$1.json" -w '%{http_code}' "$URL/reStore?expire=true" >"$RAW/$1.status" ||
        echo "bench: /reStore request failed" >&2
    t1=$(date +%s.%N)
    if [ -n "$rperf" ]; then
        kill -TERM "$rperf" 2>/dev/null || true
        wait "$rperf" 2>/dev/null || true
    fi
    cpu_end "$1"
    scrape "$1" 1
    if [ -n "$rperf" ]; then
        {
            echo "# perf record -a -F 499 during GET /reStore?expire=true of $pending near jobs with $(getv "${1}_far") far jobs pending, $(date -u)"
            echo
            perf_report "$WORK/perf-$1.data"
        } >"$RESULTS/$TS-$2.txt"
        rm -f "$WORK/perf-$1.data"
    fi
    rec "${1}_status" "$(cat "$RAW/$1.status")"
    rec "${1}_secs" "$(echo "$t1 $t0" | awk '{ printf "%.3f", $1 - $2 }')"
    python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    d = {}
for k in ("scanned", "restored", "present", "expiredSkipped", "ms"):
    print("%s_%s=%s" % (sys.argv[2], k, d.get(k, "")))' "$RAW/$1.json" "$1" >>"$ENV"
    rec "${1}_jobs_after" "$(redis_jobs)"
    say "$1: $(getv "${1}_restored") restored in $(getv "${1}_secs") s (HTTP $(getv "${1}_status")); Redis holds $(getv "${1}_jobs_after") jobs; $(cores "$1")"
}

# push_ready TAG: after a FLUSHALL the daemon answers pushes 503 for a while (its worker-id
# lease and high-water mark lived in Redis; the lease is renewed once a second, so the first
# pushes after the restore can still pass before the loss is noticed). Wait (up to 60 s) until
# pushes have been answered 200 for 5 s in a row, and record how long that took as
# TAG_push_ready_secs (and the 503s seen as TAG_push_ready_refused), so the next measurement
# does not count it.
push_ready() {
    t0=$(date +%s.%N)
    n=0 ok=0 refused=0
    while [ $ok -lt 20 ]; do
        code=$(curl -s -o /dev/null -w '%{http_code}' -m 5 -XPOST "$URL/push" -H 'Content-Type: application/json' \
            -d "{\"topic\":\"ready.probe\",\"body\":0,\"delay\":$NEAR_DELAY}")
        if [ "$code" = 200 ]; then ok=$((ok + 1)); else ok=0 refused=$((refused + 1)); fi
        n=$((n + 1))
        [ $n -lt 240 ] || { echo "bench: pushes still fail 60 s after the restore" >&2; break; }
        sleep 0.25
    done
    rec "${1}_push_ready_secs" "$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.3f", $1 - $2 }')"
    rec "${1}_push_ready_refused" "$refused"
    say "$1: pushes answered 200 for 5 s in a row $(getv "${1}_push_ready_secs") s after the restore ($refused refused before)"
}

# wrk_delay TAG DELAY: run_wrk with push.lua's jobs due in DELAY ms
wrk_delay() {
    HG_DELAY=$2
    export HG_DELAY
    run_wrk "$1" "$DPID"
    unset HG_DELAY
}

# pager_sampler FILE: every 0.25 s one line "unix_ms paged_total redis_jobs mysql_jobs lag_s moved
# delivered journal_backlog daemon_ticks redis_ticks mysql_ticks" (the pager's, the mover's and the
# journal's figures from /metrics, and the CPU ticks of the three processes): figure 13's timeline.
pager_sampler() {
    while :; do
        curl -s -m 2 "$URL/metrics" 2>/dev/null | awk -v t="$(date +%s%3N)" \
            -v cpu="$(cpu_ticks "$DPID") $(cpu_ticks "$REDIS_PID") $(cpu_ticks "$MYSQL_PID")" '
            function v(x) { return x == "" ? "-" : x }
            /^hourglass_pager_paged_total / { p = $2 }
            /^hourglass_jobs_tier\{tier="redis"\} / { r = $2 }
            /^hourglass_jobs_tier\{tier="mysql"\} / { m = $2 }
            /^hourglass_pager_lag_seconds / { l = $2 }
            /^hourglass_transitions_total\{from="delayed",to="ready"\} / { mv = $2 }
            /^hourglass_delivery_lateness_seconds_count / { d = $2 }
            /^hourglass_journal_backlog / { j = $2 }
            END { printf "%s %s %s %s %s %s %s %s %s", t, v(p), v(r), v(m), v(l), v(mv), v(d), v(j), cpu }'
        rcli info memory 2>/dev/null | awk -F: '/^used_memory:/ { printf " %d", $2 } END { print "" }' | tr -d '\r'
        sleep 0.25
    done >"$1"
}

rec tiers "$HAS_TIERS"
rec tier_horizon "$TIER_HORIZON"
rec near_delay "$NEAR_DELAY"
rec far_delay "$FAR_DELAY"
rec farmem_n "$FARMEM_N"
rec far_n "$FAR_N"
rec bucket_n "$BUCKET_N"
rec bucket_spread "$BUCKET_SPREAD"
rec bucket_horizon "$BUCKET_HORIZON"
rec bucket_grace "$BUCKET_GRACE"
if [ "$HAS_TIERS" = 0 ] && { has_phase farpush || has_phase farbacklog || has_phase bucket; }; then
    say "tiers: SKIPPED: this daemon has no [queue] horizon or sql/schema.sql no far tables (figures 9-13)"
    rec tiers_skipped "the daemon has no [queue] horizon, or the schema no far tables"
fi

if [ "$HAS_TIERS" = 1 ] && has_phase farpush; then
    # Figure 9: far jobs pushed through HTTP (arrays of 1,000, due in 30 days, 8 topics, the
    # 16-byte body of figure 6) must leave Redis (almost) untouched.
    HORIZON=$TIER_HORIZON
    reset_data
    start_daemon false
    sleep 1
    m0=$(redis_mem)
    say "farmem: filling $FARMEM_N far jobs (due in 30 days, horizon ${TIER_HORIZON} ms)"
    fill farmem "$FARMEM_N" "$FAR" 8 "$MEM_BODY" farmem_fill
    journal_idle 120 || echo "bench: the journal still had a backlog 120 s after the far fill" >&2
    sleep 1
    m1=$(redis_mem)
    rec farmem_before "$m0"
    rec farmem_after "$m1"
    rec farmem_redis_jobs "$(redis_jobs)"
    rec farmem_far_rows "$(sqlroot -N -B hourglass -e 'SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL')"
    say "farmem: filled at $(getv farmem_fill_rate) jobs/s; Redis used_memory $m0 -> $m1, $(getv farmem_redis_jobs) jobs in Redis, $(getv farmem_far_rows) far keys in MySQL"

    # Figure 10: figure 0's wrk load (single pushes, 64 connections), the jobs due in 30 minutes
    # (near: Redis and MySQL) or in 1 day (far: MySQL only), alternating, each run from an empty
    # store plus 1,000 near jobs pending; the better of two runs each.
    for pass_no in 1 2; do
        for kind in near far; do
            reset_data
            start_daemon false
            fill pre "$PREFILL" "$NEAR_DELAY" 1 "$MEM_BODY"
            if [ $kind = near ]; then wrk_delay "nearpush$pass_no" "$NEAR_DELAY"; else wrk_delay "farpush$pass_no" "$FAR_DELAY"; fi
        done
    done
    keep_best nearpush
    keep_best farpush
    HORIZON=0
fi

if [ "$HAS_TIERS" = 1 ] && has_phase farbacklog; then
    # Figures 11 and 12. First without far jobs: figure 2's 1,000 jobs/s run (near jobs, delays
    # 1-3 s) and two wrk runs of near pushes (due in 30 minutes), then FLUSHALL + /reStore of the
    # 1,000 near jobs; then the same with FAR_N far jobs bulk-loaded into MySQL (due over 1-30 days).
    HORIZON=$TIER_HORIZON
    reset_data
    start_daemon false
    fill pre "$PREFILL" "$NEAR_DELAY" 1 "$MEM_BODY"
    steady tlat0 1000
    wrk_delay tpush01 "$NEAR_DELAY"
    wrk_delay tpush02 "$NEAR_DELAY"
    keep_best tpush0
    reset_data
    start_daemon false
    fill pre "$PREFILL" "$NEAR_DELAY" 1 "$MEM_BODY"
    journal_idle 60 || true
    restore_timed trestore0
    journal_idle 60 || true

    reset_data
    now=$(date +%s%3N)
    far_load farbig "$FAR_N" $((now + 86400000)) $((29 * 86400000)) 30000
    # what the bulk load left for InnoDB to write out while figure 11 measures (pages of 16 KiB;
    # flushing them first made no difference to the figure, 2026-11-26 23:43 and 23:52)
    rec farbig_dirty_pages "$(sqlroot -N -B -e "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'" | awk '{ print $2 }')"
    start_daemon false
    fill pre "$PREFILL" "$NEAR_DELAY" 1 "$MEM_BODY"
    journal_idle 60 || true
    steady tlatbig 1000
    # Figure 12 here, with only the 1,000 near jobs pending besides the far ones (the wrk runs
    # below leave ~100,000 more).
    restore_timed trestorebig perf-restore-far
    push_ready trestorebig
    journal_idle 120 || echo "bench: the journal still had a backlog 120 s after the restore" >&2
    wrk_delay tpushbig1 "$NEAR_DELAY"
    wrk_delay tpushbig2 "$NEAR_DELAY"
    keep_best tpushbig
    rec farbig_far_after "$(sqlroot -N -B hourglass -e 'SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL')"
    reset_data
    HORIZON=0
fi

# bucket_run TAG far|near: figure 13's bucket, as far jobs paged in (far), or as the same jobs
# already in Redis before the first is due (near: the baseline, through /reStore).
bucket_run() {
    # Figure 13: BUCKET_N far jobs (ttr 0: deleted on delivery, nothing to finish), due within
    # BUCKET_SPREAD ms starting BUCKET_AHEAD ms after the load starts, bulk-loaded into MySQL;
    # the daemon (horizon BUCKET_HORIZON: lead = horizon - min(60 s, horizon / 2)) pages them in ahead,
    # 64 consumers (4 per topic, count=100) long-poll them; lateness = receipt - runAt, each once.
    tag=$1
    reset_data
    if [ "$2" = far ]; then
        b_from=$(($(date +%s%3N) + BUCKET_AHEAD))
    else
        b_from=$(($(date +%s%3N) + BUCKET_AHEAD_NEAR))
    fi
    b_until=$((b_from + BUCKET_SPREAD - 1))
    rec "${tag}_from" "$b_from"
    FARLOAD_STATE=far
    [ "$2" = far ] || FARLOAD_STATE=delayed
    far_load "$tag" "$BUCKET_N" "$b_from" "$BUCKET_SPREAD" 0
    FARLOAD_STATE=far
    start_daemon false
    if [ "$2" = near ]; then # the baseline: the same jobs, all in Redis before the first is due
        t0=$(date +%s.%N)
        code=$(curl -s -o "$WORK/$tag-restore.json" -w '%{http_code}' -m 300 "$URL/reStore?expire=true")
        rec "${tag}_restore_secs" "$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.3f", $1 - $2 }')"
        rec "${tag}_restore_status" "$code"
        say "$tag: /reStore put the $BUCKET_N near jobs into Redis in $(getv "${tag}_restore_secs") s (HTTP $code)"
    fi
    lead=$(curl -s -m 5 "$URL/stats" | python3 -c 'import json, sys; print(json.load(sys.stdin)["pager"]["lead"])')
    rec "${tag}_lead" "$lead"
    rec "${tag}_started_before_s" "$(echo "$b_from $(date +%s%3N)" | awk '{ printf "%.3f", ($1 - $2) / 1000 }')"
    [ "$2" = near ] || [ $(($(date +%s%3N) + lead / 4)) -lt "$b_from" ] ||
        say "$tag: warning: the daemon started less than a quarter of the lead before the first job is due (the load was slow): no time to pace"
    pager_sampler "$RAW/$tag-paging.txt" &
    SAMPLER_PID=$!
    say "$tag: $BUCKET_N $2 jobs due from $(getv "${tag}_started_before_s") s from now over $((BUCKET_SPREAD / 1000)) s; horizon $BUCKET_HORIZON ms (lead $lead ms); 64 consumers"
    scrape "$tag" 0
    cpu_begin "$DPID"
    # Meanwhile, while the bucket pages in, figure 2's 1,000 jobs/s of near jobs (delays 1-3 s,
    # their own topics and consumers): does paging the bucket in make them late? The pager paces
    # a bucket until its first job is due within the slack (pager.h: max(lead / 4, 60 s) for a
    # lead over a minute) and pages what is left flat out then: the near load runs until then
    # (the baseline's until its bucket is due, less the near jobs' delay).
    b_slack=0
    [ "$2" = near ] || [ "$lead" -le 60000 ] || b_slack=$((lead / 4 > 60000 ? lead / 4 : 60000))
    rec "${tag}_pace_slack_ms" "$b_slack"
    bp_secs=$(((b_from - b_slack - $(date +%s%3N)) / 1000 - LAT_DMAX / 1000))
    bp_pid=""
    # full: perf record -a from here until the bucket comes due (the paging, with figure 2's load)
    b_perf=""
    if [ "$PROFILE" = 1 ] && [ "$2" = far ] && command -v perf >/dev/null 2>&1 && [ "$bp_secs" -ge 5 ]; then
        perf record -a -F 499 -o "$WORK/perf-$tag.data" -- sleep $((bp_secs + LAT_DMAX / 1000)) \
            >/dev/null 2>"$WORK/perf-$tag.err" &
        b_perf=$!
    fi
    # (the baseline runs the same near load while its bucket waits in Redis: no paging beside it)
    bp=bpage
    [ "$2" = far ] || bp=bpage0
    if [ "$bp_secs" -ge 5 ] && [ "$BUCKET_NEAR" = 1 ]; then
        say "$bp: steady 1000 jobs/s for ${bp_secs}s while the bucket $([ "$2" = far ] && echo pages in || echo waits in Redis)"
        "$LATENESS" steady "127.0.0.1:$HPORT" --rate 1000 --duration "$bp_secs" --delay-min "$LAT_DMIN" \
            --delay-max "$LAT_DMAX" --producers "$LAT_PRODUCERS" --topics "$LAT_TOPICS" --consumers "$LAT_CONSUMERS" \
            --count "$LAT_COUNT" --consumer-topics "$LAT_CTOPICS" --prefix "$bp" --samples "$RAW/lat-$bp.cdf" \
            --series "$RAW/lat-$bp.series" --max-seconds 900 >"$RAW/lat-$bp.txt" 2>"$RAW/lat-$bp.err" &
        bp_pid=$!
    fi
    "$LATENESS" bucket "127.0.0.1:$HPORT" --prefix "$(getv "${tag}_prefix")" --jobs "$BUCKET_N" --topics 16 \
        --consumers 64 --count 100 --finish 0 --from-ms "$b_from" --until-ms "$b_until" --grace "$BUCKET_GRACE" \
        --samples "$RAW/lat-$tag.cdf" --series "$RAW/lat-$tag.series" --max-seconds 900 \
        >"$RAW/lat-$tag.txt" 2>"$RAW/lat-$tag.err" || {
        cat "$RAW/lat-$tag.err" >&2
        rec "${tag}_tool_failed" 1
    }
    if [ -n "$bp_pid" ]; then
        wait "$bp_pid" || {
            cat "$RAW/lat-$bp.err" >&2
            rec "${bp}_tool_failed" 1
        }
        rec_prefixed "$bp" <"$RAW/lat-$bp.txt"
        rec "${bp}_secs" "$bp_secs"
    fi
    cpu_end "$tag"
    scrape "$tag" 1
    if [ -n "$b_perf" ]; then
        wait "$b_perf" 2>/dev/null || true
        {
            echo "# perf record -a -F 499 from the daemon's start until the bucket of $BUCKET_N far jobs came due (the pager paging it in, lead $lead ms, beside 1,000 near jobs/s), $(date -u)"
            echo
            perf_report "$WORK/perf-$tag.data"
        } >"$RESULTS/$TS-perf-$tag.txt"
        rm -f "$WORK/perf-$tag.data"
        say "$tag: profile in $RESULTS/$TS-perf-$tag.txt"
    fi
    kill -TERM "$SAMPLER_PID" 2>/dev/null || true
    wait "$SAMPLER_PID" 2>/dev/null || true
    SAMPLER_PID=""
    rec_prefixed "$tag" <"$RAW/lat-$tag.txt"
    python3 -c '
import sys
path, n, t0, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
first = last = None
lag = 0.0
p0 = plast = None
paged_at_due = None
mem = 0
for line in open(path):
    f = line.split()
    if len(f) < 5 or f[1] == "-":
        continue
    t, p = int(f[0]), float(f[1])
    if p0 is None:
        p0 = plast = p
    if p > plast:
        if first is None:
            first = t
        last, plast = t, p
    if t <= t0:
        paged_at_due = p - p0
    if f[4] != "-":
        lag = max(lag, float(f[4]))
    if len(f) > 11:
        mem = max(mem, int(f[11]))
# the paged counter goes up as the pager commits; "done" = its last increase
print(tag + "_paging_first_s=%s" % ("" if first is None else "%.3f" % ((first - t0) / 1e3)))
print(tag + "_paging_done_s=%s" % ("" if last is None else "%.3f" % ((last - t0) / 1e3)))
print(tag + "_paged=%d" % (0 if p0 is None else plast - p0))
print(tag + "_paged_at_due=%s" % ("" if paged_at_due is None else "%d" % paged_at_due))
print(tag + "_pager_lag_max_s=%.3f" % lag)
print(tag + "_redis_mem_max=%d" % mem)' "$RAW/$tag-paging.txt" "$BUCKET_N" "$b_from" "$tag" >>"$ENV"
    # What the bucket left behind once the journal is idle: no far key, no far count.
    journal_idle 600 || echo "bench: the journal still had a backlog 600 s after the bucket" >&2
    rec "${tag}_far_left" "$(sqlroot -N -B hourglass -e 'SELECT COUNT(*) FROM message WHERE far_shard IS NOT NULL')"
    rec "${tag}_far_count_left" "$(sqlroot -N -B hourglass -e 'SELECT COALESCE(SUM(jobs), 0) FROM far_count')"
    rec "${tag}_far_mark_paged" "$(sqlroot -N -B hourglass -e 'SELECT COALESCE(SUM(paged), 0) FROM far_mark')"
    # The paging's own lateness: when each job of the bucket became ready in Redis (its first
    # "ready" transition: the mover's at its due time when it was paged in ahead, the pager's
    # when it paged it late) against its runAt. Delivery adds the consume path's own limits
    # (figure 3) on top: that is the lateness above.
    sqlroot -N -B hourglass -e "SELECT GREATEST(0, MIN(t.at) - m.run_at) FROM message m JOIN transition t
        ON t.message_id = m.id AND t.to_state = 'ready' WHERE m.topic LIKE '$(getv "${tag}_prefix").%' GROUP BY m.id" |
        python3 -c '
import sys
tag = sys.argv[1]
v = sorted(int(x) for x in sys.stdin if x.strip())
q = lambda p: v[min(len(v) - 1, int(p * len(v)))] if v else ""
print(tag + "_ready_n=%d" % len(v))
print(tag + "_ready_ms_p50=%s" % q(0.50))
print(tag + "_ready_ms_p99=%s" % q(0.99))
print(tag + "_ready_ms_max=%s" % (v[-1] if v else ""))' "$tag" >>"$ENV"
    rec "${tag}_states_after" "$(sqlroot -N -B hourglass -e "SELECT GROUP_CONCAT(CONCAT(state, ':', n) ORDER BY state)
        FROM (SELECT state, COUNT(*) n FROM message GROUP BY state) s")"
    say "$tag: lateness p50 $(getv "${tag}_lat_ms_p50") p99 $(getv "${tag}_lat_ms_p99") max $(getv "${tag}_lat_ms_max") ms over $(getv "${tag}_received") of $BUCKET_N jobs ($(getv "${tag}_rate")/s); due -> ready p99 $(getv "${tag}_ready_ms_p99") ms; paging began $(getv "${tag}_paging_first_s") s and ended $(getv "${tag}_paging_done_s") s from the first due time; $(cores "$tag")"
}

if [ "$HAS_TIERS" = 1 ] && has_phase bucket; then
    HORIZON=$BUCKET_HORIZON
    BACKLOG=$BUCKET_BACKLOG
    bucket_run bucket far
    bucket_run bucketn near
    reset_data
    HORIZON=0
    BACKLOG=""
fi

if has_phase cluster; then
    # Figure 15: figure 0's push load (wrk, push.lua, 64 connections, 1,000 pending; best of two
    # runs each, single and cluster alternating) and figure 3's consume (CONSUME_N ready jobs over
    # 4 topics, 16 consumers, count=1), against one Redis and against a 3-master + 3-replica Redis
    # Cluster on this machine. The same daemon and MariaDB, 8 shards in both (in the cluster:
    # 3/2/3 shards over the masters, cluster_shard_tag).
    stop_daemon
    say "cluster: starting 3 masters + 3 replicas (redis-server --cluster-enabled yes, redis-cli --cluster create)"
    if start_rcluster; then
        rec cluster_masters "${CL_MASTER_PORTS# }"
        say "cluster: up in $(getv cluster_start_s) s; masters on $(getv cluster_masters), seeds $CL_SEEDS"
        for pass_no in 1 2; do
            for where in 1 3; do
                if [ $where = 1 ]; then on_single; else on_cluster; fi
                reset_data
                start_daemon false
                fill pre "$PREFILL" "$FAR" 1 "$MEM_BODY"
                run_wrk "cl${where}push$pass_no" "$DPID"
                rec "cl${where}push${pass_no}_jobs" "$(redis_jobs)"
                if [ $where = 3 ]; then
                    rec "cl3push${pass_no}_spread" "$(cluster_spread)"
                    say "cl3push$pass_no: Redis holds $(getv "cl3push${pass_no}_jobs") jobs: $(getv "cl3push${pass_no}_spread")"
                fi
            done
        done
        keep_best cl1push
        keep_best cl3push
        for where in 1 3; do
            tag=cl${where}cons
            if [ $where = 1 ]; then on_single; else on_cluster; fi
            reset_data
            start_daemon false
            say "$tag: filling $CONSUME_N ready jobs"
            fill drain "$CONSUME_N" 0 4 "$MEM_BODY" "${tag}_fill"
            rec "${tag}_jobs_before" "$(redis_jobs)"
            [ $where = 1 ] || rec cl3cons_spread "$(cluster_spread)"
            say "$tag: draining $(getv "${tag}_jobs_before") jobs with $CONSUMERS consumers, count=1"
            scrape "$tag" 0
            cpu_begin "$DPID"
            "$LATENESS" drain "127.0.0.1:$HPORT" --prefix drain --jobs "$CONSUME_N" --consumers "$CONSUMERS" \
                --count 1 --topics 4 --max-seconds 900 >"$RAW/$tag.txt" 2>"$RAW/$tag.err" || {
                cat "$RAW/$tag.err" >&2
                rec "${tag}_tool_failed" 1
            }
            cpu_end "$tag"
            scrape "$tag" 1
            rec_prefixed "$tag" <"$RAW/$tag.txt"
            rec "${tag}_jobs_after" "$(redis_jobs)"
            say "$tag: $(getv "${tag}_rate") jobs/s; $(getv "${tag}_jobs_after") jobs left in Redis; $(cores "$tag")"
        done
        on_single
        reset_data
    else
        say "cluster: FAILED: the cluster did not start ($WORK/rcluster)"
        rec cluster_failed "the Redis Cluster did not start (see the run's log)"
        on_single
    fi
    stop_rcluster
fi

if has_phase galera; then
    # Figure 16: bench/galera.py starts its own Redis, MariaDB (run.sh's settings) and 3-node Galera
    # cluster (tests/integration/galera.py), measures both, and records gal_* here.
    stop_daemon
    say "galera: one MariaDB vs a 3-node Galera cluster (bench/galera.py), then the journal's ceiling ($GAL_FILL jobs)"
    python3 "$BENCH/galera.py" --binary "$BIN" --lateness "$LATENESS" --env "$ENV" --raw "$RAW" \
        --wrk-secs "$WRK_SECS" --wrk-conns "$WRK_CONNS" --wrk-threads "$WRK_THREADS" --http-threads "$HTTP_THREADS" \
        --fill-jobs "$GAL_FILL" >"$RAW/galera.log" 2>&1 || {
        tail -n 20 "$RAW/galera.log" >&2
        rec gal_failed "bench/galera.py failed ($RAW/galera.log)"
    }
    grep '^\[galera\]' "$RAW/galera.log" >&2 || true
fi

if has_phase peers; then
    # Figure 18 (issue 34): hourglass beside its peers, on this machine in this run. BullMQ 5
    # (bench/peers: Queue.add from 64 producers against figure 0's pushes; a Worker of concurrency
    # 64 against get?finish= with 64 consumers) on a private Redis of its own, and beanstalkd
    # (bench/beanstalk.c: lateness with a binlog fsynced on every put, against figure 2's 1,000/s;
    # put/s with and without the binlog). Each peer is skipped, saying why, when it cannot run.
    stop_daemon
    PEERS=$WORK/peers
    mkdir -p "$PEERS"
    rec peers_n "$PEERS_N"
    rec peers_conns "$PEERS_CONNS"

    # -- hourglass: figure 3's drain, but with PEERS_CONNS consumers on PEERS_N jobs (figure 3 runs
    # 16 consumers): get?finish= (one request a job) twice, the better counts; get + finish once
    for p_tag in pfn1 pfn2 pgf; do
        reset_data
        start_daemon false
        say "peers: $p_tag: filling $PEERS_N ready jobs (100-byte bodies, 4 topics)"
        fill "$p_tag" "$PEERS_N" 0 4 100
        p_fn=1
        [ "$p_tag" != pgf ] || p_fn=0
        rcli config resetstat >/dev/null
        cpu_begin "$DPID"
        "$LATENESS" drain "127.0.0.1:$HPORT" --prefix "$p_tag" --jobs "$PEERS_N" --consumers "$PEERS_CONNS" \
            --count 1 --finish-next "$p_fn" --topics 4 --max-seconds 900 >"$RAW/peers-$p_tag.txt" \
            2>"$RAW/peers-$p_tag.err" || {
            cat "$RAW/peers-$p_tag.err" >&2
            rec "${p_tag}_tool_failed" 1
        }
        cpu_end "$p_tag"
        rec_prefixed "$p_tag" <"$RAW/peers-$p_tag.txt"
        say "peers: $p_tag: $(getv "${p_tag}_rate") jobs/s ($PEERS_CONNS consumers, count=1, finish-next $p_fn); $(cores "$p_tag")"
        # where Redis's time went, per delivered job (the drain's commands: its scripts and the
        # journal's outbox reads, acknowledgements and deletes)
        rcli info commandstats >"$RAW/peers-$p_tag-commandstats.txt"
        say "peers: $p_tag: redis µs a job: $(tr -d '\r' <"$RAW/peers-$p_tag-commandstats.txt" |
            awk -F'[:=,]' -v n="$PEERS_N" '/^cmdstat_/ { u = $5 / n; if (u >= 0.5) printf "%s %.1f  ", substr($1, 9), u }')"
    done
    pick_best pfn rate
    stop_daemon

    # -- BullMQ: its own Redis (the same redis-server binary, no persistence) on a free port
    p_skip=""
    PEERS_NODE=$BENCH/peers
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        p_skip="node or npm not found (sh scripts/deps.sh bench installs them)"
    elif [ -n "$(find "$PEERS_NODE/node_modules/.package-lock.json" -newer "$PEERS_NODE/package-lock.json" \
        2>/dev/null)" ]; then
        : # node_modules holds what the lockfile says (npm writes .package-lock.json as it installs)
    else
        say "peers: npm ci in bench/peers (BullMQ, pinned by package-lock.json)"
        if ! (cd "$PEERS_NODE" && npm ci --no-audit --no-fund --loglevel=error) >"$RAW/peers-npm.txt" 2>&1; then
            # its reason, not the closing "a complete log is in ..." line
            p_why=$(grep -m 1 -E 'reason:|Error:' "$RAW/peers-npm.txt" || grep -m 1 'error code' "$RAW/peers-npm.txt" ||
                grep -v '^ *$' "$RAW/peers-npm.txt" | tail -n 1)
            p_skip="npm ci in bench/peers failed (the npm registry unreachable?): $(echo "$p_why" | sed 's/^npm error *//' |
                cut -c1-160) ($RAW/peers-npm.txt)"
        fi
    fi
    if [ -z "$p_skip" ]; then
        rec peers_bullmq_version "$(sed -n 's/^ *"version": "\(.*\)".*/\1/p' "$PEERS_NODE/node_modules/bullmq/package.json" | head -n 1)"
        rec peers_node_version "$(node --version)"
        P_RPORT=$(free_ports 1)
        mkdir -p "$PEERS/redis"
        redis-server --port "$P_RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$PEERS/redis" \
            --logfile "$PEERS/redis/redis.log" </dev/null >/dev/null 2>&1 &
        PEER_PID=$!
        n=0
        until [ "$(redis-cli -h 127.0.0.1 -p "$P_RPORT" ping 2>/dev/null)" = PONG ]; do
            n=$((n + 1))
            [ $n -lt 300 ] || die "BullMQ's redis did not start ($PEERS/redis/redis.log)"
            sleep 0.1
        done
        say "peers: BullMQ $(getv peers_bullmq_version) (node $(getv peers_node_version)) on its own redis :$P_RPORT"
        for p_tag in bmqadd1 bmqadd2 bmqwrk1 bmqwrk2; do
            redis-cli -h 127.0.0.1 -p "$P_RPORT" flushall >/dev/null
            case $p_tag in
            bmqadd*) set -- bullmq_add.mjs --producers "$PEERS_CONNS" --duration "$WRK_SECS" --delay 3600000 ;;
            *) set -- bullmq_worker.mjs --jobs "$PEERS_N" --concurrency "$PEERS_CONNS" --max-seconds 600 ;;
            esac
            cpu_begin "$PEER_PID"
            (cd "$PEERS_NODE" && node "$@" --port "$P_RPORT") >"$RAW/peers-$p_tag.txt" 2>"$RAW/peers-$p_tag.err" || {
                cat "$RAW/peers-$p_tag.err" >&2
                rec "${p_tag}_tool_failed" 1
            }
            cpu_end "$p_tag"
            rec_prefixed "$p_tag" <"$RAW/peers-$p_tag.txt"
            say "peers: $p_tag: $(getv "${p_tag}_rate")/s; cores: BullMQ's redis $(getv "${p_tag}_cpu_server") node $(getv "${p_tag}_cpu_loadgen") other $(getv "${p_tag}_cpu_other")"
        done
        pick_best bmqadd rate
        pick_best bmqwrk rate
        # lateness (information): figure 2's schedule at 1,000 jobs/s, delays 1-3 s, into a Worker
        redis-cli -h 127.0.0.1 -p "$P_RPORT" flushall >/dev/null
        cpu_begin "$PEER_PID"
        (cd "$PEERS_NODE" && node bullmq_lateness.mjs --port "$P_RPORT" --rate 1000 --duration "$LAT_SECS" \
            --delay-min "$LAT_DMIN" --delay-max "$LAT_DMAX" --concurrency "$PEERS_CONNS") >"$RAW/peers-bmqlat1k.txt" \
            2>"$RAW/peers-bmqlat1k.err" || {
            cat "$RAW/peers-bmqlat1k.err" >&2
            rec bmqlat1k_tool_failed 1
        }
        cpu_end bmqlat1k
        rec_prefixed bmqlat1k <"$RAW/peers-bmqlat1k.txt"
        say "peers: bmqlat1k: lateness p50 $(getv bmqlat1k_lat_ms_p50) p99 $(getv bmqlat1k_lat_ms_p99) max $(getv bmqlat1k_lat_ms_max) ms; added at $(getv bmqlat1k_push_rate)/s, $(getv bmqlat1k_received) of $(getv bmqlat1k_pushed) processed"
        kill -TERM "$PEER_PID" 2>/dev/null || true
        wait "$PEER_PID" 2>/dev/null || true
        PEER_PID=""
    else
        say "peers: BullMQ skipped: $p_skip"
        rec peers_bullmq_skipped "$p_skip"
    fi

    # -- beanstalkd (Debian's): a fresh one per measurement, on a free port, its binlog (if any)
    # under the run's temp dir; -f 0 = fsync after every binlog write (each put and delete)
    if command -v beanstalkd >/dev/null 2>&1; then
        rec peers_beanstalkd_version "$(beanstalkd -v 2>&1 | head -n 1)"
        bs_start() { # fsync|nobinlog
            P_BPORT=$(free_ports 1)
            if [ "$1" = fsync ]; then
                rm -rf "$PEERS/binlog"
                mkdir -p "$PEERS/binlog"
                beanstalkd -l 127.0.0.1 -p "$P_BPORT" -b "$PEERS/binlog" -f 0 </dev/null >>"$PEERS/beanstalkd.log" 2>&1 &
            else
                beanstalkd -l 127.0.0.1 -p "$P_BPORT" </dev/null >>"$PEERS/beanstalkd.log" 2>&1 &
            fi
            PEER_PID=$!
            n=0
            until python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' \
                "$P_BPORT" 2>/dev/null; do
                n=$((n + 1))
                [ $n -lt 100 ] || die "beanstalkd did not start ($PEERS/beanstalkd.log)"
                sleep 0.1
            done
        }
        bs_stop() {
            kill -TERM "$PEER_PID" 2>/dev/null || true
            wait "$PEER_PID" 2>/dev/null || true
            PEER_PID=""
        }
        bs_run() { # TAG MODE [beanstalk.c's options]
            p_tag=$1 p_mode=$2
            shift 2
            cpu_begin "$PEER_PID"
            "$WORK/beanstalk" "$p_mode" "127.0.0.1:$P_BPORT" "$@" >"$RAW/peers-$p_tag.txt" 2>"$RAW/peers-$p_tag.err" || {
                cat "$RAW/peers-$p_tag.err" >&2
                rec "${p_tag}_tool_failed" 1
            }
            cpu_end "$p_tag"
            rec_prefixed "$p_tag" <"$RAW/peers-$p_tag.txt"
        }
        # lateness: figure 2's rates, producers and consumers; delay 2 s (whole seconds only)
        bs_start fsync
        for p_rate in 1000 5000; do
            p_tag=bslat$((p_rate / 1000))k
            say "peers: beanstalkd (binlog, fsync every put): steady $p_rate jobs/s for ${LAT_SECS}s, delay 2 s"
            bs_run "$p_tag" lateness --rate "$p_rate" --duration "$LAT_SECS" --delay 2 --producers "$LAT_PRODUCERS" \
                --consumers "$LAT_CONSUMERS" --body-bytes 100 --tube "lat$p_rate" --samples "$RAW/lat-$p_tag.cdf"
            say "peers: $p_tag: lateness p50 $(getv "${p_tag}_lat_ms_p50") p99 $(getv "${p_tag}_lat_ms_p99") max $(getv "${p_tag}_lat_ms_max") ms; put at $(getv "${p_tag}_push_rate")/s, $(getv "${p_tag}_received") of $(getv "${p_tag}_pushed") received"
        done
        bs_stop
        # put/s: PEERS_CONNS connections for figure 0's wrk duration, due in an hour as push.lua's
        for p_how in fsync nobinlog; do
            p_tag=bsput$p_how
            bs_start "$p_how"
            bs_run "$p_tag" put --conns "$PEERS_CONNS" --duration "$WRK_SECS" --delay 3600 --body-bytes 100
            say "peers: beanstalkd put/s ($p_how): $(getv "${p_tag}_rate")"
            bs_stop
        done
    else
        say "peers: beanstalkd skipped: not installed"
        rec peers_beanstalk_skipped "beanstalkd is not installed (sh scripts/deps.sh bench installs it)"
    fi
fi

stop_daemon
rec elapsed_s "$(($(date +%s) - START))"

# ------------------------------------------------------------------ report

commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no -- src 2>/dev/null)" ]; then
    commit="$commit+dirty-src"
fi
rec commit "$commit"
rec date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
rec machine "$(uname -srm), $NPROC cores ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)), $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM"
rec versions "$(redis-server --version | awk '{ print $1, $2, $3 }'); $(mariadbd --version | awk '{ print $2, $3 }'); libevent $(pkg-config --modversion libevent)"
rec binary "$BIN_SRC (sha256 $BIN_SHA, built $BIN_BUILT)"

python3 "$BENCH/report.py" "$ENV" "$RESULTS/$TS.json" "$RAW"
cp "$RESULTS/$TS.json" "$RESULTS/latest.json"
# docs/performance.md opens with the latest full run of every phase (bench/summary.py); quick runs
# and runs of a subset of the phases (HG_BENCH_PHASES) leave it as it was
if [ "$MODE" = full ] && [ -z "${HG_BENCH_PHASES:-}" ]; then
    python3 "$BENCH/summary.py" "$RESULTS/$TS.json" "$ROOT/docs/performance.md" --commit "$SUMMARY_COMMIT" \
        --date "$(getv date)" || echo "bench: docs/performance.md's summary was not rewritten (above)" >&2
fi
BIGN=$(python3 -c 'import sys; print(f"{int(sys.argv[1]):,}")' "$BACKLOG_N")
if gnuplot -e "raw='$RAW'; out='$RESULTS'; bigN='$BIGN'" "$BENCH/plot.gp" 2>"$WORK/gnuplot.err"; then
    echo "plots: $RESULTS/latency-cdf.png $RESULTS/latency-tail.png $RESULTS/lateness-time.png"
else
    cat "$WORK/gnuplot.err" >&2
    echo "bench: gnuplot failed (above); the table and JSON are complete" >&2
fi
echo "json: $RESULTS/$TS.json (and latest.json); raw data: $RAW"
