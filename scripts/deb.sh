#!/bin/sh
# `make deb`: build/hourglass_<version>_<arch>.deb with dpkg-deb alone (no debhelper).
#
#   BIN=build/hourglassd VERSION=1.0.0 OUT=build sh scripts/deb.sh     (the Makefile passes these)
#
# The tree is `make install PREFIX=/usr` staged (scripts/install.sh has the layout) with the
# binary stripped and the man page gzipped, plus what Debian asks of a package:
#   DEBIAN/control     Depends: the shared libraries' packages as dpkg-shlibdeps finds them from
#                      the binary (so they are the build machine's: build on the release you
#                      install on), adduser (postinst) and tzdata (schedules' time zones)
#   DEBIAN/conffiles   /etc/hourglass/hourglass.conf: dpkg keeps an edited copy on upgrade and
#                      removal, and removes it on purge
#   DEBIAN/postinst, prerm, postrm   packaging/deb/: the hourglass system user, the config's
#                      group, systemd's daemon-reload; the service is never started by the package
#   DEBIAN/md5sums; usr/share/doc/hourglass/copyright and changelog.gz
# VERSION is the daemon's (the Makefile reads HOURGLASS_VERSION from src/process/main.c, what
# `hourglassd -v` prints); the architecture is dpkg's (`dpkg --print-architecture`).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
: "${BIN:?BIN= the hourglassd to package}" "${VERSION:?VERSION= the version}" "${OUT:?OUT= the output directory}"
MAINTAINER=${MAINTAINER:-hourglass maintainers <maintainers@users.noreply.a-seed-93ac0107.example>}

die() {
    echo "deb.sh: $*" >&2
    exit 1
}

for tool in dpkg-deb dpkg-shlibdeps strip gzip; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (Debian: apt-get install dpkg-dev binutils)"
done
case "$VERSION" in
    [0-9]*) ;;
    *) die "VERSION '$VERSION' is not a Debian version (the Makefile reads it from src/process/main.c)" ;;
esac
built=$("$BIN" -v) || die "$BIN -v failed"
[ "$built" = "hourglassd $VERSION" ] || die "$BIN says '$built', the package would say $VERSION: rebuild (make)"
arch=$(dpkg --print-architecture)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# dpkg-shlibdeps wants a source tree: debian/control, the package under debian/<name>/.
mkdir -p "$work/debian"
: >"$work/debian/control"
pkg=$work/debian/hourglass

DESTDIR=$pkg PREFIX=/usr BIN=$BIN sh "$ROOT/scripts/install.sh" install >/dev/null
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$pkg/usr/bin/hourglassd"
gzip -9n "$pkg/usr/share/man/man8/hourglassd.8"
install -m 644 "$ROOT/packaging/deb/copyright" "$pkg/usr/share/doc/hourglass/copyright"
printf 'hourglass (%s) unstable; urgency=medium\n\n  * Built by make deb from the hourglass source tree.\n\n -- %s  %s\n' \
    "$VERSION" "$MAINTAINER" "$(date -R -d @"${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || date +%s)}")" |
    gzip -9n >"$pkg/usr/share/doc/hourglass/changelog.gz"

depends=$(cd "$work" && dpkg-shlibdeps -O -edebian/hourglass/usr/bin/hourglassd 2>/dev/null |
          sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || die "dpkg-shlibdeps found no library dependencies for $BIN"

mkdir -p "$pkg/DEBIAN"
for s in postinst prerm postrm; do
    install -m 755 "$ROOT/packaging/deb/$s" "$pkg/DEBIAN/$s"
done
echo /etc/hourglass/hourglass.conf >"$pkg/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: hourglass
Version: $VERSION
Architecture: $arch
Maintainer: $MAINTAINER
Installed-Size: $size
Depends: $depends, adduser, tzdata
Recommends: redis-server, default-mysql-server | virtual-mysql-server, ca-certificates
Section: net
Priority: optional
Description: HTTP delay queue backed by Redis and MySQL/MariaDB
 hourglassd runs business events later: a producer pushes a job with a topic,
 a body and a delay over HTTP; when it comes due a consumer long-polling the
 topic receives it, or it is POSTed to a webhook or published to RabbitMQ.
 Every state change is journaled to MySQL, far-future jobs wait there instead
 of in Redis, and cron schedules push jobs in any time zone.
 .
 The package installs the daemon, /etc/hourglass/hourglass.conf, the systemd
 unit hourglass.service (not enabled), the schema in /usr/share/hourglass and
 the documentation; it creates the hourglass system user.
EOF
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
    >"$pkg/DEBIAN/md5sums"

mkdir -p "$OUT"
deb=$OUT/hourglass_${VERSION}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "deb.sh: $deb"
