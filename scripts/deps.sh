#!/bin/sh
# Install the Debian 12 packages hourglass needs, only when some are missing.
#
#   scripts/deps.sh [core|test|bench|fuzz]      (default: core; `make deps` runs this)
#
#   core   build the daemon, run it and its tests (private Redis + MariaDB + RabbitMQ, Check, curl;
#          libssl-dev for the webhook client's https and signatures; python3-yaml converts
#          docs/openapi.yaml to the JSON the daemon serves, python3-jsonschema checks every
#          integration test's HTTP against it)
#   test   core + what `make test` also needs: faketime and iptables (the fault tests: a skewed
#          clock, a partition), clang-format (make lint), the console's browser tests (chromium, and node
#          and npm for playwright-core and axe-core, which tests/browser installs from its lockfile; and for
#          tests/openapi's linter and client generator, likewise), systemd and
#          man-db (test_install: `systemd-analyze verify` of the installed unit and its man page,
#          adduser for the package's postinst;
#          `make deb` itself needs only dpkg-dev and binutils, which build-essential brings), galera-4
#          and rsync (a private 3-node MariaDB Galera cluster, tests/integration/galera.py: the
#          provider library, and rsync for its state transfers; `ss` from iproute2 and lsof watch its
#          port)
#   bench  core + load generator and profilers, galera-4 and rsync (the Galera figure),
#          beanstalkd, and node and npm for BullMQ (figure 18's peers; bench/peers installs BullMQ
#          from its lockfile)
#   fuzz   core + clang and its sanitizer/fuzzer runtime
#
# When everything is installed this prints one line and exits 0 without touching apt.
# Otherwise, as root: apt-get update + apt-get install --no-install-recommends.
# Not root: prints the command to run and exits 1 (sudo is never assumed to exist).
# Installing redis-server / mariadb-server / rabbitmq-server may start the system services on
# 6379 / 3306 / 5672; that is fine, hourglass's private servers (scripts/stack.sh, the test
# harness) use other ports and never touch them.
set -eu

core="build-essential pkg-config libevent-dev libhiredis-dev libjansson-dev libssl-dev
      libmariadb-dev libmariadb-dev-compat check redis-server mariadb-server mariadb-client
      curl python3 procps iproute2 nginx-light tzdata
      librabbitmq-dev rabbitmq-server python3-pika python3-yaml python3-jsonschema"

set_name=${1:-core}
case "$set_name" in
    core)  pkgs="$core" ;;
    test)  pkgs="$core chromium nodejs npm faketime iptables clang-format systemd man-db adduser galera-4 rsync lsof" ;;
    bench) pkgs="$core wrk gnuplot-nox linux-perf valgrind galera-4 rsync lsof beanstalkd nodejs npm" ;;
    fuzz)  pkgs="$core clang libclang-rt-14-dev" ;;
    *)
        echo "usage: scripts/deps.sh [core|test|bench|fuzz]  (got '$set_name')" >&2
        exit 2
        ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    echo "deps.sh: dpkg-query not found: this script supports Debian 12 only; install by hand:" $pkgs >&2
    exit 1
fi

# One dpkg-query call for all packages; unknown packages only produce a stderr line.
# shellcheck disable=SC2086 # word splitting of the package list is intended
installed=" $(dpkg-query -W -f='${Package} ${Status}\n' $pkgs 2>/dev/null |
              awk '$2 == "install" && $3 == "ok" && $4 == "installed" { printf "%s ", $1 }' || true) "
# Node's packages count as there when their commands are: NodeSource's nodejs package bundles
# npm (and conflicts with Debian's npm package), so asking apt for npm there would fail.
provided() {
    case "$1" in
        nodejs) command -v node >/dev/null 2>&1 ;;
        npm) command -v npm >/dev/null 2>&1 ;;
        *) return 1 ;;
    esac
}
missing=""
for p in $pkgs; do
    case "$installed" in
        *" $p "*) ;;
        *) provided "$p" || missing="$missing $p" ;;
    esac
done
missing=${missing# }

if [ -z "$missing" ]; then
    echo "deps.sh: all $set_name packages are installed"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "deps.sh: missing Debian packages ($set_name): $missing" >&2
    echo "deps.sh: as root, run:" >&2
    echo "    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing" >&2
    exit 1
fi

echo "deps.sh: installing missing $set_name packages: $missing"
apt-get update
# shellcheck disable=SC2086 # word splitting of the package list is intended
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
