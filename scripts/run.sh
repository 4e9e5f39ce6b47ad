#!/bin/sh
# Run the daemon in the foreground on the private dev stack (what `make run` does after building).
#
#   scripts/run.sh BINARY [CONFIG]        CONFIG defaults to conf/hourglass.conf
#
# Starts Redis + MariaDB under .run/ (scripts/stack.sh start .run CONFIG), then `BINARY -c CONFIG`.
# Ctrl-C or SIGTERM: the daemon gets SIGTERM (a second Ctrl-C: SIGKILL) and is waited for, then
# the servers this script started are stopped. A stack that was already running before is left
# running (stop it with `make stack-stop`). Exits with the daemon's exit status.
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: scripts/run.sh BINARY [CONFIG]" >&2
    exit 2
fi
BIN=$1
CONFIG=${2:-$ROOT/conf/hourglass.conf}
RUN=$ROOT/.run
STACK="$ROOT/scripts/stack.sh"

[ -x "$BIN" ] || { echo "run.sh: $BIN is not an executable file: build it first (make)" >&2; exit 1; }
[ -r "$CONFIG" ] || { echo "run.sh: config file $CONFIG not found" >&2; exit 1; }

# ini_get SECTION KEY: the value in CONFIG ('' when absent).
ini_get() {
    awk -v sec="$1" -v key="$2" '
        { sub(/\r$/, "") }
        /^[ \t]*[#;]/ { next }
        /^[ \t]*\[/ { s = $0; gsub(/^[ \t]*\[[ \t]*|[ \t]*\][ \t]*$/, "", s); cur = s; next }
        cur == sec {
            i = index($0, "="); if (i == 0) next
            k = substr($0, 1, i - 1); gsub(/^[ \t]+|[ \t]+$/, "", k)
            if (k == key) { v = substr($0, i + 1); gsub(/^[ \t]+|[ \t]+$/, "", v); val = v }
        }
        END { print val }' "$CONFIG"
}

pid=""         # the daemon
stopping=""    # set once we asked the daemon to stop
started_stack=yes
if sh "$STACK" status "$RUN" >/dev/null 2>&1; then
    started_stack=no
fi

# shellcheck disable=SC2317 # runs from a trap
cleanup() {
    trap - INT TERM HUP EXIT
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    if [ "$started_stack" = yes ]; then
        sh "$STACK" stop "$RUN" "$CONFIG" || true
    else
        echo "run.sh: leaving the stack under .run running (it was running before); make stack-stop stops it"
    fi
}
# shellcheck disable=SC2317 # runs from a trap
on_signal() {
    if [ -z "$pid" ]; then # still starting the stack
        exit 130
    fi
    if [ -n "$stopping" ]; then
        echo "run.sh: killing the daemon (pid $pid)" >&2
        kill -KILL "$pid" 2>/dev/null || true
    else
        stopping=yes
        echo "run.sh: stopping the daemon (pid $pid); Ctrl-C again to kill it" >&2
        kill -TERM "$pid" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap on_signal INT TERM HUP

sh "$STACK" start "$RUN" "$CONFIG"

listen=$(ini_get http listen)
logfile=$(ini_get log file)
echo "run.sh: hourglassd listens on http://${listen:-?}/ ; daemon log: ${logfile:-this terminal (stderr)}; Redis/MariaDB logs: $RUN/redis/redis.log, $RUN/mysql/mysqld.log ; Ctrl-C stops everything"

# In the background so that the traps run while we wait for it, and in its own session so
# that a Ctrl-C reaches only this script: the daemon gets exactly one signal, our SIGTERM
# (hourglassd treats a second signal as "exit now, skip draining").
setsid "$BIN" -c "$CONFIG" &
pid=$!
rc=0
while :; do
    rc=0
    wait "$pid" || rc=$?
    # wait returns early (status > 128) when a trapped signal arrives: as long as the daemon
    # is not reaped (kill -0 works, zombies included), wait again for its real status.
    kill -0 "$pid" 2>/dev/null || break
done
pid=""
[ -n "$stopping" ] || echo "run.sh: the daemon exited with status $rc" >&2
exit "$rc"
