#!/bin/sh
# Active health checks for hourglassd instances behind open-source nginx (which has none).
#
#   scripts/nginx-health.sh [-i SEC] [-t SEC] [-f N] [-u N] [-s PARAMS] [-r CMD] [-1] [-q]
#                           -o FILE HOST:PORT...
#
# Every SEC seconds it asks each instance for GET http://HOST:PORT/health (curl, all at once,
# each with a short timeout) and writes FILE: one `server` line per instance, in the order
# given, for the `upstream hourglass` block of conf/nginx.conf, which includes it:
#
#     upstream hourglass {
#         include /etc/nginx/hourglass-upstream.conf;
#         keepalive 64; ...
#     }
#
# An instance that failed N checks in a row (anything but HTTP 200: hourglassd answers 503
# while Redis or MySQL is unreachable or while it drains on SIGTERM; no answer within the
# timeout; connection refused) is written with `down`, so nginx sends it nothing; after N
# good checks in a row it is written without `down` again. FILE is rewritten atomically (a
# temporary file renamed over it) and only when its content changes, and only then is nginx
# reloaded, so a steady fleet costs no reloads. If the reload command fails, it is tried again
# at the next round until it succeeds.
#
# If every instance fails, none is marked down: nginx with every server down answers 502 to
# everything, while left to its passive checks (max_fails) it can still reach an instance that
# recovers between two rounds. So the healthy instances are always kept, and when there are
# none, all of them.
#
# The first round writes FILE from its own results (no hysteresis), so start it before nginx
# or point nginx at a FILE written by `-1`.
#
# Options:
#   -o FILE    the upstream include file to write (required)
#   -i SEC     seconds between rounds (default 1; fractions work where sleep takes them)
#   -t SEC     curl timeout per check, connect included (default 0.8)
#   -f N       failed checks in a row before an instance is marked down (default 2)
#   -u N       good checks in a row before it is up again (default 2)
#   -s PARAMS  parameters of every server line (default "max_fails=2 fail_timeout=5s")
#   -r CMD     reload command, run with sh -c (default "nginx -s reload"); for a private nginx:
#              -r "nginx -p DIR -c DIR/nginx.conf -s reload"
#   -1         one round: write FILE (reload if it changed) and exit 0 if every instance is
#              healthy, 1 otherwise
#   -q         log only changes and errors (default: also a line at start)
#
# Logs one line per state change and per reload to stdout. Stops on SIGTERM/SIGINT (exit 0).
# Example (systemd unit, ExecStart=):
#   /opt/hourglass/scripts/nginx-health.sh -o /etc/nginx/hourglass-upstream.conf \
#       10.0.0.11:8080 10.0.0.12:8080 10.0.0.13:8080
# Needs curl. Plain POSIX sh.
set -eu

usage() {
    sed -n '3,4p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
die() {
    echo "nginx-health.sh: $*" >&2
    exit 2
}
log() { echo "$(date '+%Y-%m-%dT%H:%M:%S') nginx-health: $*"; }

out=""
interval=1
ctimeout=0.8
fall=2
rise=2
params="max_fails=2 fail_timeout=5s"
reload="nginx -s reload"
once=no
quiet=no
while getopts o:i:t:f:u:s:r:1q opt; do
    case "$opt" in
        o) out=$OPTARG ;;
        i) interval=$OPTARG ;;
        t) ctimeout=$OPTARG ;;
        f) fall=$OPTARG ;;
        u) rise=$OPTARG ;;
        s) params=$OPTARG ;;
        r) reload=$OPTARG ;;
        1) once=yes ;;
        q) quiet=yes ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ -n "$out" ] || usage
[ $# -ge 1 ] || usage
case "$fall$rise" in *[!0-9]*) die "-f and -u take whole numbers" ;; esac
if [ "$fall" -lt 1 ] || [ "$rise" -lt 1 ]; then die "-f and -u must be at least 1"; fi
command -v curl >/dev/null 2>&1 || die "curl not found"
for a; do
    case "$a" in
        *:*) ;;
        *) die "'$a': expected HOST:PORT" ;;
    esac
done
n=$#

work=$(mktemp -d "${TMPDIR:-/tmp}/nginx-health.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 0' TERM INT HUP

# Per instance i (1..n): up_i (1 = not marked down), bad_i / good_i (checks in a row),
# code_i (last HTTP status, 000 = no answer). Instances start up with the first round deciding.
i=1
while [ "$i" -le "$n" ]; do
    eval "up_$i=1 bad_$i=0 good_$i=0 code_$i=000"
    i=$((i + 1))
done
first=yes
applied="" # content of FILE that nginx was last reloaded with (or found at start)
if [ -r "$out" ]; then applied=$(cat "$out"); fi

# probe_all: one round of checks, in parallel; leaves code_i set.
probe_all() {
    i=1
    for a; do
        curl -s -o /dev/null -w '%{http_code}' --max-time "$ctimeout" "http://$a/health" \
            >"$work/$i" 2>/dev/null &
        i=$((i + 1))
    done
    wait
    i=1
    while [ "$i" -le "$n" ]; do
        c=$(cat "$work/$i" 2>/dev/null || true)
        case "$c" in ''|*[!0-9]*) c=000 ;; esac
        eval "code_$i=\$c"
        i=$((i + 1))
    done
}

# update: hysteresis; logs changes.
update() {
    i=1
    for a; do
        eval "c=\$code_$i up=\$up_$i bad=\$bad_$i good=\$good_$i"
        if [ "$c" = 200 ]; then
            good=$((good + 1)); bad=0
        else
            bad=$((bad + 1)); good=0
        fi
        if [ "$first" = yes ]; then
            if [ "$c" = 200 ]; then up=1; else up=0; fi
            [ "$up" = 1 ] || log "$a is failing (health: $c)"
        elif [ "$up" = 1 ] && [ "$bad" -ge "$fall" ]; then
            up=0
            log "$a is failing (health: $c, $bad checks in a row)"
        elif [ "$up" = 0 ] && [ "$good" -ge "$rise" ]; then
            up=1
            log "$a is healthy again"
        fi
        eval "up_$i=\$up bad_$i=\$bad good_$i=\$good"
        i=$((i + 1))
    done
    first=no
}

# render: the file content; nobody marked down when nobody is up.
render() {
    anyup=no
    i=1
    while [ "$i" -le "$n" ]; do
        eval "[ \"\$up_$i\" = 1 ]" && anyup=yes
        i=$((i + 1))
    done
    echo "# written by scripts/nginx-health.sh; do not edit (rewritten when an instance's /health changes)"
    [ "$anyup" = yes ] || echo "# every instance fails its health check: none is marked down (nginx's passive checks decide)"
    i=1
    for a; do
        eval "up=\$up_$i"
        if [ "$up" = 1 ] || [ "$anyup" = no ]; then
            echo "server $a $params;"
        else
            echo "server $a $params down;"
        fi
        i=$((i + 1))
    done
}

round() {
    probe_all "$@"
    update "$@"
    content=$(render "$@")
    if [ "$content" != "$(cat "$out" 2>/dev/null || true)" ]; then
        printf '%s\n' "$content" >"$out.tmp.$$"
        mv -f "$out.tmp.$$" "$out"
        log "wrote $out ($(grep -c ' down;$' "$out" || true) of $n marked down)"
    fi
    if [ "$content" != "$applied" ]; then
        if sh -c "$reload" >"$work/reload.out" 2>&1; then
            applied=$content
            log "reloaded nginx"
        else
            log "reload failed ($reload): $(tr '\n' ' ' <"$work/reload.out")"
        fi
    fi
}

[ "$quiet" = yes ] || log "checking $n instance(s) every ${interval}s, writing $out"
if [ "$once" = yes ]; then
    round "$@"
    i=1
    while [ "$i" -le "$n" ]; do
        eval "[ \"\$code_$i\" = 200 ]" || exit 1
        i=$((i + 1))
    done
    exit 0
fi
while :; do
    round "$@"
    sleep "$interval" &
    wait $! || true
done
