#!/bin/sh
# `make install` / `make uninstall` (and the staging step of `make deb`, scripts/deb.sh).
#
#   scripts/install.sh install|uninstall      the Makefile passes the variables below
#
# BIN         the daemon to install (the Makefile's $(BUILD)/hourglassd)
# DESTDIR     a staging root put in front of every path below (default: none, the live system)
# PREFIX      default /usr/local; BINDIR=$PREFIX/bin, DATADIR=$PREFIX/share,
#             DOCDIR=$DATADIR/doc/hourglass, MANDIR=$DATADIR/man,
#             UNITDIR=$PREFIX/lib/systemd/system (systemd looks
#             in /usr/local/lib/systemd/system and /usr/lib/systemd/system; another PREFIX
#             needs UNITDIR=/etc/systemd/system)
# SYSCONFDIR  default /etc, whatever PREFIX is: the configuration is /etc/hourglass/hourglass.conf
#
# What goes where (each path under DESTDIR):
#   BINDIR/hourglassd                      0755
#   SYSCONFDIR/hourglass/hourglass.conf    0640, dir 0750 — only when no file is there yet: an
#                                          operator's edited config is never overwritten. It is
#                                          conf/hourglass.conf with the dev stack's settings
#                                          (make run's ports, .run/state) turned into a system's
#                                          (Redis 6379, MySQL 3306 without a password, state in
#                                          /var/lib/hourglass, the unit's StateDirectory)
#   DATADIR/hourglass/hourglass.conf       the same file, always: the shipped defaults, to diff
#                                          an edited /etc copy against after an upgrade
#   DATADIR/hourglass/schema.sql           sql/schema.sql (idempotent; apply it with mysql)
#   DATADIR/hourglass/nginx.conf           conf/nginx.conf, the fleet example
#   DOCDIR/README.md, api.md, operations.md, architecture.md, performance.md
#   MANDIR/man8/hourglassd.8               docs/hourglassd.8 (the package gzips it)
#   UNITDIR/hourglass.service              systemd/hourglass.service with its paths made these
#
# DESTDIR is a staging root (a package build, a chroot): /etc becomes DESTDIR/etc, and "already
# there" is judged there, never on the build machine's own /etc.
#
# uninstall removes every file install puts, except the /etc config when it differs from the
# shipped defaults (an operator's edits are kept, and it says so); then the hourglass
# directories it leaves empty. It creates or removes no user: `make deb`'s package does (its
# postinst); for a plain install see docs/operations.md, "Deploying".
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
BINDIR=${BINDIR:-$PREFIX/bin}
DATADIR=${DATADIR:-$PREFIX/share}
DOCDIR=${DOCDIR:-$DATADIR/doc/hourglass}
MANDIR=${MANDIR:-$DATADIR/man}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
SYSCONFDIR=${SYSCONFDIR:-/etc}
BIN=${BIN:-$ROOT/build/hourglassd}
DOCS="README.md docs/api.md docs/operations.md docs/architecture.md docs/performance.md"

die() {
    echo "install.sh: $*" >&2
    exit 1
}

for d in "$PREFIX" "$BINDIR" "$DATADIR" "$DOCDIR" "$MANDIR" "$UNITDIR" "$SYSCONFDIR"; do
    case "$d" in
        /*) ;;
        *) die "'$d' is not an absolute path (PREFIX and the directories under it must be)" ;;
    esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The system config from the dev one. Each replaced line must be there: if conf/hourglass.conf
# changes those lines, this fails instead of shipping the dev stack's ports.
render_conf() {
    # shellcheck disable=SC2016 # the backquotes are the comment's own text
    sed -e '/^# This file is what `make run` uses/,/^# so they never collide/c\
# Installed by `make install` or the hourglass package: Redis and MySQL/MariaDB on this host,\
# at their usual ports. Set [mysql] user and password, apply schema.sql (in the share/hourglass\
# directory), check this file with `hourglassd -t -c FILE`, then start the service.' \
        -e 's|^address = 127\.0\.0\.1:16379$|address = 127.0.0.1:6379|' \
        -e 's|^port = 13306$|port = 3306|' \
        -e 's|^password = hourglass$|password =|' \
        -e 's|^state_dir = \.run/state$|state_dir = /var/lib/hourglass|' \
        -e 's|(make run: the repo)|(the unit sets /var/lib/hourglass)|' \
        "$ROOT/conf/hourglass.conf" >"$1"
    for want in 'address = 127.0.0.1:6379' 'port = 3306' 'state_dir = /var/lib/hourglass'; do
        grep -qx "$want" "$1" || die "conf/hourglass.conf changed: no line to turn into '$want' (fix render_conf)"
    done
    ! grep -q -e '16379' -e '13306' -e '^password = hourglass$' -e '\.run/' "$1" ||
        die "conf/hourglass.conf changed: a dev stack setting is left in the system config (fix render_conf)"
}

# The unit with this install's paths (the repo's copy says /usr/local and /etc).
render_unit() {
    sed -e "s|/usr/local/bin/hourglassd|$BINDIR/hourglassd|g" \
        -e "s|/usr/local/share/doc/hourglass|$DOCDIR|g" \
        -e "s|/etc/hourglass/|$SYSCONFDIR/hourglass/|g" \
        "$ROOT/systemd/hourglass.service" >"$1"
}

do_install() {
    [ -x "$BIN" ] || die "$BIN is not an executable file: build it first (make)"
    render_conf "$tmp/hourglass.conf"
    render_unit "$tmp/hourglass.service"

    install -d "$DESTDIR$BINDIR" "$DESTDIR$DATADIR/hourglass" "$DESTDIR$DOCDIR" "$DESTDIR$MANDIR/man8" \
        "$DESTDIR$UNITDIR"
    install -m 755 "$BIN" "$DESTDIR$BINDIR/hourglassd"
    install -m 644 "$tmp/hourglass.service" "$DESTDIR$UNITDIR/hourglass.service"
    install -m 644 "$tmp/hourglass.conf" "$DESTDIR$DATADIR/hourglass/hourglass.conf"
    install -m 644 "$ROOT/sql/schema.sql" "$DESTDIR$DATADIR/hourglass/schema.sql"
    install -m 644 "$ROOT/conf/nginx.conf" "$DESTDIR$DATADIR/hourglass/nginx.conf"
    install -m 644 "$ROOT/docs/hourglassd.8" "$DESTDIR$MANDIR/man8/hourglassd.8"
    for f in $DOCS; do
        install -m 644 "$ROOT/$f" "$DESTDIR$DOCDIR/"
    done

    conf=$DESTDIR$SYSCONFDIR/hourglass/hourglass.conf
    if [ -e "$conf" ]; then
        echo "install.sh: $conf is there already: kept (the shipped defaults are in $DATADIR/hourglass/hourglass.conf)"
    else
        install -d -m 750 "$DESTDIR$SYSCONFDIR/hourglass"
        install -m 640 "$tmp/hourglass.conf" "$conf"
        # The daemon runs as hourglass (the unit's User=): on the live system, let it read its
        # config when that group exists. A staged install leaves ownership to the packager.
        if [ -z "$DESTDIR" ] && [ "$(id -u)" -eq 0 ] && getent group hourglass >/dev/null; then
            chgrp hourglass "$DESTDIR$SYSCONFDIR/hourglass" "$conf"
        fi
    fi
    echo "install.sh: installed hourglassd into $DESTDIR$BINDIR, the unit into $DESTDIR$UNITDIR"
}

# rm a file install put, and say so; a missing one is not an error (uninstall twice is fine).
remove() {
    if [ -e "$1" ] || [ -L "$1" ]; then
        rm -f "$1"
        echo "removed $1"
    fi
}

do_uninstall() {
    render_conf "$tmp/hourglass.conf"
    conf=$DESTDIR$SYSCONFDIR/hourglass/hourglass.conf
    if [ -e "$conf" ]; then
        if cmp -s "$conf" "$tmp/hourglass.conf"; then
            remove "$conf"
        else
            echo "install.sh: $conf differs from the shipped defaults: kept (remove it by hand)"
        fi
    fi
    remove "$DESTDIR$BINDIR/hourglassd"
    remove "$DESTDIR$UNITDIR/hourglass.service"
    remove "$DESTDIR$MANDIR/man8/hourglassd.8"
    for f in hourglass.conf schema.sql nginx.conf; do
        remove "$DESTDIR$DATADIR/hourglass/$f"
    done
    for f in $DOCS; do
        remove "$DESTDIR$DOCDIR/$(basename "$f")"
    done
    # only hourglass's own directories, and only when empty
    for d in "$DESTDIR$SYSCONFDIR/hourglass" "$DESTDIR$DATADIR/hourglass" "$DESTDIR$DOCDIR"; do
        [ ! -d "$d" ] || rmdir "$d" 2>/dev/null || echo "install.sh: $d is not empty: kept"
    done
}

case "${1:-}" in
    install) do_install ;;
    uninstall) do_uninstall ;;
    *)
        echo "usage: scripts/install.sh install|uninstall" >&2
        exit 2
        ;;
esac
