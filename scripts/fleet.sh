#!/bin/sh
# A local fleet to try hourglass the way it runs in production: N hourglassd instances on one
# Redis and one MariaDB, behind nginx (conf/nginx.conf) with active health checks
# (scripts/nginx-health.sh).
#
#   make && sh scripts/fleet.sh start 3      start Redis + MariaDB (scripts/stack.sh, under .run/),
#                                            instances on 127.0.0.1:8081..8083, nginx on :8080
#   sh scripts/fleet.sh status               what runs, and each instance's /health
#   sh scripts/fleet.sh stop                 stop everything `start` started (SIGTERM, then wait)
#
# Then, through nginx:
#   curl -s -XPOST localhost:8080/push -d '{"topic":"demo","body":{"hello":1},"delay":3000}'
#   curl -s 'localhost:8080/get/demo?timeout=10'          # a job, after about 3 s
#   curl -s 'localhost:8080/finish?id=ID'
#   curl -s localhost:8080/stats                          # "fleet": who owns which share of shards
# Kill one instance (kill -9 $(cat .run/fleet/hourglass-2.pid)) and watch the others take over
# its shards; `start` again is refused while anything runs, so stop first.
#
# Instance i gets a config generated from CONFIG: [http] listen = 127.0.0.1:<FLEET_PORT + i>,
# [instance] id = fleet-<i>, worker_id = auto (leased in Redis), [log] file empty (its stderr
# goes to .run/fleet/hourglass-<i>.log). nginx runs from .run/fleet/nginx/ (config, pid, logs,
# temp dirs; nothing outside it), on 127.0.0.1:FLEET_PORT, with conf/nginx.conf rewritten only
# in its paths, listen address and upstream servers (which it includes from upstream.conf,
# the file the health checker rewrites; its log is .run/fleet/health.log).
# A stack that was already running before `start` is left running by `stop`.
#
# Environment: CONFIG (default conf/hourglass.conf), HOURGLASSD (default build/hourglassd),
# FLEET_PORT (default 8080), NGINX (default: nginx from PATH or /usr/sbin).
# Plain POSIX sh; needs curl, nginx, and what scripts/stack.sh needs.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PATH=$PATH:/usr/sbin:/sbin
RUN=$ROOT/.run
FDIR=$RUN/fleet
NDIR=$FDIR/nginx
CONFIG=${CONFIG:-$ROOT/conf/hourglass.conf}
BIN=${HOURGLASSD:-$ROOT/build/hourglassd}
FLEET_PORT=${FLEET_PORT:-8080}
NGINX=${NGINX:-nginx}
STACK=$ROOT/scripts/stack.sh

usage() {
    echo "usage: sh scripts/fleet.sh start N | stop | status" >&2
    exit 2
}
die() {
    echo "fleet.sh: $*" >&2
    exit 1
}
say() { echo "fleet: $*"; }

# alive PID COMM: PID is a live (not zombie) process whose name is COMM.
alive() {
    [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ -n "$st" ] && [ "$st" != Z ] || return 1
    [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]
}

# alive_script PID NAME: PID is a live shell running the script NAME.
alive_script() {
    [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q "$2"
}

pid_of() { # PIDFILE -> pid or ''
    if [ -r "$1" ]; then tr -dc '0-9' <"$1"; fi
}

# wait_gone PID SECONDS: wait until PID exited; 1 on timeout.
wait_gone() {
    k=0
    while [ -d "/proc/$1" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]; do
        k=$((k + 1))
        [ "$k" -le $(($2 * 10)) ] || return 1
        sleep 0.1
    done
}

http_code() { # URL -> status code, 000 when nothing answered
    curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null || true
}

log_tail() {
    if [ -r "$1" ]; then
        echo "--- last lines of $1:" >&2
        tail -n 20 "$1" >&2
    fi
}

count() { # the N of the last start
    if [ -r "$FDIR/count" ]; then tr -dc '0-9' <"$FDIR/count"; else echo 0; fi
}

# ---------------------------------------------------------------- configs

# instance_config I: CONFIG with this instance's listen address, id, worker id and log.
instance_config() {
    awk -v listen="127.0.0.1:$((FLEET_PORT + $1))" -v id="fleet-$1" '
        function put(sec) {
            if (sec == "http") print "listen = " listen
            else if (sec == "instance") { print "id = " id; print "worker_id = auto" }
            else if (sec == "log") print "file ="
            done[sec] = 1
        }
        { sub(/\r$/, "") }
        /^[ \t]*\[/ {
            s = $0; gsub(/^[ \t]*\[[ \t]*|[ \t]*\][ \t]*$/, "", s); cur = s
            print; put(cur); next
        }
        /^[ \t]*[#;]/ { print; next }
        {
            i = index($0, "=")
            if (i > 0) {
                k = substr($0, 1, i - 1); gsub(/^[ \t]+|[ \t]+$/, "", k)
                if ((cur == "http" && k == "listen") || (cur == "instance" && (k == "id" || k == "worker_id")) ||
                    (cur == "log" && k == "file"))
                    next
            }
            print
        }
        END {
            split("http instance log", want, " ")
            for (j = 1; j <= 3; j++)
                if (!(want[j] in done)) { print ""; print "[" want[j] "]"; put(want[j]) }
        }' "$CONFIG"
}

# nginx_config: conf/nginx.conf with paths under NDIR, listen 127.0.0.1:FLEET_PORT and the
# upstream servers included from NDIR/upstream.conf. (tests/integration/harness.py,
# nginx_local_config, does the same rewrite in Python.)
nginx_config() {
    awk -v dir="$NDIR" -v listen="127.0.0.1:$FLEET_PORT" -v up="$NDIR/upstream.conf" '
        function indent(s) { match(s, /^[ \t]*/); return substr(s, 1, RLENGTH) }
        {
            line = $0; s = $0
            sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s)
            if (s == "" || substr(s, 1, 1) == "#") { print; next }
            ind = indent(line)
            split(s, w, /[ \t;{]+/); word = w[1]
            if (s ~ /\{$/) {
                name = s; sub(/[ \t]*\{$/, "", name); gsub(/[ \t]+/, " ", name)
                stack[++depth] = name
                print
                if (name == "http" && depth == 1) {
                    seen["http"] = 1
                    n = split("client_body proxy fastcgi uwsgi scgi", t, " ")
                    for (k = 1; k <= n; k++) print ind "    " t[k] "_temp_path " dir "/tmp/" t[k] ";"
                } else if (name == "upstream hourglass") {
                    seen["upstream"] = 1
                    print ind "    include " up ";"
                } else if (name == "server" && depth == 2 && stack[1] == "http") {
                    seen["server"] = 1
                }
                next
            }
            if (s == "}") { if (depth > 0) depth--; print; next }
            if (depth == 0 && word == "user") next
            if (word == "pid") { seen["pid"] = 1; print ind "pid " dir "/nginx.pid;"; next }
            if (word == "error_log") { print ind "error_log " dir "/error.log info;"; next }
            if (word == "access_log") {
                n = split(s, a, /[ \t;]+/); rest = ""
                if (a[2] != "off") for (k = 3; k <= n; k++) if (a[k] != "") rest = rest " " a[k]
                print ind "access_log " dir "/access.log" rest ";"
                next
            }
            if (depth > 0 && stack[depth] == "upstream hourglass" && (word == "server" || word == "include")) next
            if (depth == 2 && stack[1] == "http" && stack[2] == "server" && word == "listen") {
                if (!("listen" in seen)) { seen["listen"] = 1; print ind "listen " listen ";" }
                next
            }
            print
        }
        END {
            split("http upstream server pid listen", need, " ")
            for (k = 1; k <= 5; k++)
                if (!(need[k] in seen)) { print "conf/nginx.conf lacks: " need[k] > "/dev/stderr"; exit 1 }
        }' "$ROOT/conf/nginx.conf"
}

# ---------------------------------------------------------------- stop / status

stop_all() {
    pid=$(pid_of "$FDIR/health.pid")
    if alive_script "$pid" nginx-health.sh; then
        kill -TERM "$pid" 2>/dev/null || true
        wait_gone "$pid" 5 || kill -KILL "$pid" 2>/dev/null || true
        say "health checker stopped"
    fi
    rm -f "$FDIR/health.pid"

    pid=$(pid_of "$NDIR/nginx.pid")
    if alive "$pid" nginx; then
        # SIGTERM: fast shutdown (a graceful SIGQUIT would wait for parked long-polls).
        kill -TERM "$pid" 2>/dev/null || true
        if ! wait_gone "$pid" 10; then
            echo "fleet: nginx (pid $pid) did not exit within 10 s, killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        say "nginx stopped"
    fi

    # SIGTERM every instance first (they drain in parallel), then wait for each.
    pids=""
    for f in "$FDIR"/hourglass-*.pid; do
        [ -e "$f" ] || continue
        pid=$(pid_of "$f")
        if alive "$pid" hourglassd; then
            kill -TERM "$pid" 2>/dev/null || true
            pids="$pids $pid:$f"
        else
            rm -f "$f"
            say "$(basename "$f" .pid) was not running"
        fi
    done
    for pf in $pids; do
        pid=${pf%%:*}
        f=${pf#*:}
        if ! wait_gone "$pid" 15; then
            echo "fleet: hourglassd (pid $pid) did not exit within 15 s, killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
        say "$(basename "$f" .pid) stopped"
    done

    if [ -e "$FDIR/stack.ours" ]; then
        sh "$STACK" stop "$RUN" "$CONFIG" || true
        rm -f "$FDIR/stack.ours"
    fi
}

status() {
    rc=0
    n=$(count)
    i=1
    while [ "$i" -le "$n" ]; do
        pid=$(pid_of "$FDIR/hourglass-$i.pid")
        port=$((FLEET_PORT + i))
        if alive "$pid" hourglassd; then
            say "fleet-$i: running (pid $pid) on http://127.0.0.1:$port, /health $(http_code "http://127.0.0.1:$port/health"), log $FDIR/hourglass-$i.log"
        else
            say "fleet-$i: not running (port $port, log $FDIR/hourglass-$i.log)"
            rc=3
        fi
        i=$((i + 1))
    done
    pid=$(pid_of "$NDIR/nginx.pid")
    if alive "$pid" nginx; then
        say "nginx: running (pid $pid) on http://127.0.0.1:$FLEET_PORT, logs in $NDIR"
        if [ -r "$NDIR/upstream.conf" ]; then
            grep -q ' down;$' "$NDIR/upstream.conf" &&
                say "  marked down: $(grep ' down;$' "$NDIR/upstream.conf" | awk '{print $2}' | tr '\n' ' ')"
        fi
    else
        say "nginx: not running"
        rc=3
    fi
    pid=$(pid_of "$FDIR/health.pid")
    if alive_script "$pid" nginx-health.sh; then
        say "health checker: running (pid $pid), log $FDIR/health.log"
    else
        say "health checker: not running"
        rc=3
    fi
    sh "$STACK" status "$RUN" "$CONFIG" | sed 's/^/fleet: /' || rc=3
    return "$rc"
}

# ---------------------------------------------------------------- start

start_failed() {
    [ "$1" -ne 0 ] || return 0
    echo "fleet: start failed; stopping what was started" >&2
    stop_all
}

start() {
    n=$1
    case "$n" in '' | *[!0-9]*) usage ;; esac
    if [ "$n" -lt 1 ] || [ "$n" -gt 32 ]; then die "N must be 1..32"; fi
    [ -x "$BIN" ] || die "$BIN is not an executable file: build it first (make)"
    [ -r "$CONFIG" ] || die "config file $CONFIG not found"
    command -v "$NGINX" >/dev/null 2>&1 || die "nginx not found (apt-get install nginx-light, or set NGINX=)"
    command -v curl >/dev/null 2>&1 || die "curl not found"
    mkdir -p "$FDIR" "$NDIR/tmp"

    # Refuse to start over a running fleet (ours or a half-stopped one).
    for f in "$FDIR"/hourglass-*.pid; do
        [ -e "$f" ] || continue
        ! alive "$(pid_of "$f")" hourglassd || die "a fleet is running ($f): sh scripts/fleet.sh stop first"
    done
    ! alive "$(pid_of "$NDIR/nginx.pid")" nginx || die "the fleet's nginx is running: sh scripts/fleet.sh stop first"
    p=$FLEET_PORT
    while [ "$p" -le $((FLEET_PORT + n)) ]; do
        l=$(ss -Hltn "sport = :$p" 2>/dev/null || true)
        [ -z "$l" ] || die "port $p is in use by another program (e.g. make run): stop it, or set FLEET_PORT"
        p=$((p + 1))
    done

    # From here on, a failure stops whatever was started.
    trap 'start_failed $?' EXIT

    if sh "$STACK" status "$RUN" "$CONFIG" >/dev/null 2>&1; then
        rm -f "$FDIR/stack.ours"
        sh "$STACK" start "$RUN" "$CONFIG" >/dev/null # already running: re-apply the schema only
        say "using the running Redis + MariaDB under $RUN (left running by stop)"
    else
        touch "$FDIR/stack.ours"
        sh "$STACK" start "$RUN" "$CONFIG"
    fi
    echo "$n" >"$FDIR/count"
    rm -f "$FDIR"/hourglass-*.pid

    addrs=""
    i=1
    while [ "$i" -le "$n" ]; do
        conf=$FDIR/hourglass-$i.conf
        log=$FDIR/hourglass-$i.log
        instance_config "$i" >"$conf"
        "$BIN" -t -c "$conf" >/dev/null || die "generated config $conf is not valid (see above)"
        # setsid: own session, so a Ctrl-C in this terminal later does not reach it.
        setsid "$BIN" -c "$conf" </dev/null >>"$log" 2>&1 &
        echo $! >"$FDIR/hourglass-$i.pid"
        addrs="$addrs 127.0.0.1:$((FLEET_PORT + i))"
        i=$((i + 1))
    done
    i=1
    while [ "$i" -le "$n" ]; do
        port=$((FLEET_PORT + i))
        pid=$(pid_of "$FDIR/hourglass-$i.pid")
        k=0
        until [ "$(http_code "http://127.0.0.1:$port/health")" = 200 ]; do
            if ! alive "$pid" hourglassd; then
                log_tail "$FDIR/hourglass-$i.log"
                die "fleet-$i exited during startup"
            fi
            k=$((k + 1))
            if [ "$k" -gt 300 ]; then
                log_tail "$FDIR/hourglass-$i.log"
                die "fleet-$i did not answer GET /health with 200 within 30 s"
            fi
            sleep 0.1
        done
        say "fleet-$i: http://127.0.0.1:$port (pid $pid)"
        i=$((i + 1))
    done

    # nginx: the upstream file from one health round (all instances answer by now), then the
    # config, checked before it starts.
    # shellcheck disable=SC2086 # addrs is a list
    sh "$ROOT/scripts/nginx-health.sh" -1 -q -r true -o "$NDIR/upstream.conf" $addrs >/dev/null ||
        echo "fleet: warning: not every instance passed its first health check" >&2
    nginx_config >"$NDIR/nginx.conf"
    nginx_cmd="$NGINX -p $NDIR/ -c $NDIR/nginx.conf -e $NDIR/error.log"
    # shellcheck disable=SC2086 # nginx_cmd is a command line
    $nginx_cmd -t -q || die "nginx -t failed for $NDIR/nginx.conf"
    # shellcheck disable=SC2086
    $nginx_cmd || { log_tail "$NDIR/error.log"; die "nginx failed to start"; }
    k=0
    until [ "$(http_code "http://127.0.0.1:$FLEET_PORT/health")" = 200 ]; do
        k=$((k + 1))
        if [ "$k" -gt 100 ]; then
            log_tail "$NDIR/error.log"
            die "nginx on 127.0.0.1:$FLEET_PORT did not answer GET /health with 200 within 10 s"
        fi
        sleep 0.1
    done
    say "nginx: http://127.0.0.1:$FLEET_PORT (pid $(pid_of "$NDIR/nginx.pid"), logs in $NDIR)"

    # shellcheck disable=SC2086
    setsid sh "$ROOT/scripts/nginx-health.sh" -q -o "$NDIR/upstream.conf" -r "$nginx_cmd -s reload" $addrs \
        </dev/null >>"$FDIR/health.log" 2>&1 &
    echo $! >"$FDIR/health.pid"
    say "health checker: pid $!, log $FDIR/health.log"
    trap - EXIT

    cat <<EOF

hourglass fleet of $n instance(s) behind nginx on http://127.0.0.1:$FLEET_PORT
  push:    curl -s -XPOST 127.0.0.1:$FLEET_PORT/push -d '{"topic":"demo","body":{"hello":1},"delay":2000}'
  get:     curl -s '127.0.0.1:$FLEET_PORT/get/demo?timeout=10'
  finish:  curl -s '127.0.0.1:$FLEET_PORT/finish?id=ID'
  stats:   curl -s 127.0.0.1:$FLEET_PORT/stats      (fleet view: instances, worker ids, owned shards)
  direct:  http://127.0.0.1:$((FLEET_PORT + 1)) .. http://127.0.0.1:$((FLEET_PORT + n))  (/metrics per instance)
  logs:    $FDIR/hourglass-N.log, $NDIR/access.log, $FDIR/health.log
  stop:    sh scripts/fleet.sh stop
EOF
}

case "${1:-}" in
    start)
        [ $# -eq 2 ] || usage
        start "$2"
        ;;
    stop)
        [ $# -eq 1 ] || usage
        stop_all
        ;;
    status)
        [ $# -eq 1 ] || usage
        status
        ;;
    *) usage ;;
esac
