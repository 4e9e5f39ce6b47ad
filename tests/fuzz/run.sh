#!/bin/sh
# tests/fuzz/run.sh — run libFuzzer targets (called by tests/fuzz/fuzz.mk `run`, from the repo root).
#
#   FUZZ_BUILD=build-fuzz FUZZ_SECONDS=60 FUZZ_JOBS=1 FUZZ_FLAGS= sh tests/fuzz/run.sh TARGET...
#
# Each target runs FUZZ_SECONDS over tests/fuzz/corpus/<t>/ and tests/fuzz/regressions/<t>/,
# writing new inputs to $FUZZ_BUILD/corpus/<t>/ (scratch) and findings to tests/fuzz/crashes/<t>/.
# FUZZ_JOBS > 1 uses libFuzzer's fork mode with that many processes. Every target runs even
# when an earlier one found something; the exit status is 1 if any did (non-zero fuzzer exit
# or a new file in its crashes directory).
set -u

build=${FUZZ_BUILD:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}
extra=${FUZZ_FLAGS:-}
dir=tests/fuzz

maxlen_of() {
    case $1 in
        router) echo 16384 ;; # reaches the 3 x 4096-byte path-argument limit
        params) echo 4096 ;;
        job) echo 8192 ;;
        ids) echo 1024 ;;
        config) echo 8192 ;; # reaches the 4096-byte line limit
        *) return 1 ;;
    esac
}

failed=""
for t in "$@"; do
    if ! maxlen=$(maxlen_of "$t"); then
        echo "fuzz: unknown target '$t'" >&2
        exit 2
    fi
    mkdir -p "$build/corpus/$t" "$dir/crashes/$t" "$dir/regressions/$t"
    fork=""
    [ "$jobs" -gt 1 ] && fork="-fork=$jobs"
    before=$(ls -A "$dir/crashes/$t" | wc -l)
    log="$build/fuzz_$t.log"
    echo "== fuzz_$t: ${seconds}s ${fork:-(one process)}, corpus $(ls "$dir/corpus/$t" | wc -l) files"
    # shellcheck disable=SC2086 # $fork and $extra are word lists
    (UBSAN_OPTIONS=print_stacktrace=1 "$build/fuzz_$t" $fork -max_total_time="$seconds" -max_len="$maxlen" \
        -timeout=10 -rss_limit_mb=2048 -dict="$build/$t.dict" -artifact_prefix="$dir/crashes/$t/" \
        -print_final_stats=1 $extra "$build/corpus/$t" "$dir/corpus/$t" "$dir/regressions/$t"
     echo $? >"$log.status") >"$log" 2>&1
    status=$(cat "$log.status")
    after=$(ls -A "$dir/crashes/$t" | wc -l)
    # one process: "#N DONE" and stat:: lines; fork mode: "#N: cov: ... time: Ts" progress lines
    grep -E '^#[0-9]+ +(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$log" | tail -n 5
    grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 |
        sed -E 's/^#([0-9]+): (cov: [0-9]+ ft: [0-9]+ corp: [0-9]+).*crash: ([0-9/]+) time: ([0-9]+)s.*/\1 \2 \3 \4/' |
        awk '{ printf "fork: %d runs in %ds (%d exec/s overall), %s %s %s %s %s %s, oom/timeout/crash %s\n", $1, $9, $9 ? $1 / $9 : 0, $2, $3, $4, $5, $6, $7, $8 }'
    if [ "$status" -eq 0 ] && [ "$after" -eq "$before" ]; then
        echo "fuzz_$t: ok (log $log)"
    else
        echo "fuzz_$t: FOUND SOMETHING (exit $status, $((after - before)) new files in $dir/crashes/$t/; log $log)" >&2
        grep -E -m 20 '==[0-9]+== ?ERROR|runtime error|fuzz invariant violated|^SUMMARY' "$log" >&2
        failed="$failed $t"
    fi
done

if [ -n "$failed" ]; then
    echo "fuzz: findings in:$failed" >&2
    exit 1
fi
echo "fuzz: no findings in $*"
