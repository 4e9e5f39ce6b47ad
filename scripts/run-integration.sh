#!/bin/sh
# Run the Python integration tests (tests/integration/test_*.py); `make integration [T=PATTERN]`.
#
#   HOURGLASSD=/abs/path/to/hourglassd HG_TOOLS=/abs/path/to/build/tests scripts/run-integration.sh [PATTERN]
#
# HG_TOOLS is the directory of the programs built from tests/tools/*.c (amqp_publish, which
# drives the AMQP publisher); `make integration` sets both.
# PATTERN filters tests by substring of their full name, e.g. `test_push` (a module),
# `PushTest` (a class) or `test_push_array` (a method); a path like tests/integration/test_push.py
# works too. The tests start their own Redis/MariaDB servers on free loopback ports in temporary
# directories (tests/integration/harness.py) and need no running stack; RabbitMQ likewise.
# Uses Debian's /usr/bin/python3 when present (standard library only). Exits non-zero on failure.
# INTEGRATION_TIMEOUT (seconds, default 3600) bounds the whole run. INTEGRATION_JOBS (default 3)
# runs the whole suite in that many processes at once; INTEGRATION_RECORD=1 refreshes the
# module durations that balance them (tests/integration/durations.txt).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -x /usr/bin/python3 ]; then
    PY=/usr/bin/python3
else
    PY=python3
fi

if [ $# -gt 1 ]; then
    echo "usage: scripts/run-integration.sh [PATTERN]" >&2
    exit 2
fi

if [ -n "${HOURGLASSD:-}" ] && [ ! -x "$HOURGLASSD" ]; then
    echo "run-integration.sh: HOURGLASSD=$HOURGLASSD is not an executable file (build it with make)" >&2
    exit 1
fi

if [ -n "${HG_TOOLS:-}" ] && [ ! -d "$HG_TOOLS" ]; then
    echo "run-integration.sh: HG_TOOLS=$HG_TOOLS is not a directory (build the tools with make integration)" >&2
    exit 1
fi

pattern=${1:-}
[ -z "$pattern" ] || pattern=$(basename "$pattern" .py)
if [ -n "$pattern" ]; then
    # unittest happily runs 0 tests; a mistyped pattern should fail instead.
    n=$("$PY" - "$ROOT/tests/integration" "$pattern" <<'EOF'
import sys, unittest
top, pattern = sys.argv[1], sys.argv[2]
loader = unittest.TestLoader()
loader.testNamePatterns = [pattern if "*" in pattern else f"*{pattern}*"]  # as unittest -k does
print(loader.discover(top, "test_*.py", top).countTestCases())
EOF
)
    if [ "$n" = 0 ]; then
        echo "run-integration.sh: no test in tests/integration matches '$pattern'" >&2
        exit 1
    fi
fi
set -- -m unittest discover -v -s "$ROOT/tests/integration" -t "$ROOT/tests/integration" -p 'test_*.py'
[ -z "$pattern" ] || set -- "$@" -k "$pattern"
# The whole suite runs in INTEGRATION_JOBS processes at once (default 3; 1 = one process), each
# with its own servers: most of it waits on timers (a run keeps about a quarter of two cores
# busy), so three groups take little more than a third of the time
# (tests/integration/parallel.py). A pattern runs in one process, as before.
jobs=${INTEGRATION_JOBS:-3}
if [ -z "$pattern" ] && [ "$jobs" -gt 1 ]; then
    set -- "$ROOT/tests/integration/parallel.py" "$jobs"
    [ -z "${INTEGRATION_RECORD:-}" ] || set -- "$@" --record
fi

export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
cd "$ROOT"
# SIGTERM on timeout: the harness turns it into KeyboardInterrupt, so its servers are cleaned up.
# --foreground keeps Python in our process group, so Ctrl-C reaches it too.
exec timeout --foreground -k 30 "${INTEGRATION_TIMEOUT:-3600}" "$PY" "$@"
