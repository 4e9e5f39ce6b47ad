#!/bin/sh
# Run Check unit-test binaries (built by the Makefile as build/tests/test_*); `make unit` calls it.
#
#   scripts/run-unit.sh BIN...
#
# Each binary runs with CK_FORK=yes (every test in its own process, so a crash fails one test)
# and CK_DEFAULT_TIMEOUT=30 s (override by exporting CK_DEFAULT_TIMEOUT, e.g. for sanitizer builds).
# Prints one summary line; exits 1 if any binary fails (or is missing), 0 otherwise.
set -eu

CK_FORK=yes
CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-30}
export CK_FORK CK_DEFAULT_TIMEOUT

if [ $# -eq 0 ]; then
    echo "unit: no test binaries given (no tests/unit/test_*.c yet?)"
    exit 0
fi

passed=0
failed=""
for bin; do
    echo "== $bin"
    if [ ! -x "$bin" ]; then
        echo "unit: $bin is missing or not executable (build it with make unit)" >&2
        failed="$failed $bin"
    elif "$bin"; then
        passed=$((passed + 1))
    else
        echo "unit: $bin failed (exit status $?)" >&2
        failed="$failed $bin"
    fi
done

if [ -n "$failed" ]; then
    echo "unit: $passed of $# test binaries passed; FAILED:$failed"
    exit 1
fi
echo "unit: all $# test binaries passed"
