#!/bin/sh
# Private Redis + MariaDB for development, with all their state under one directory.
#
#   scripts/stack.sh start  DIR [CONFIG]   start both (idempotent: if running, only re-apply
#                                          the database, user grants and sql/schema.sql)
#   scripts/stack.sh stop   DIR [CONFIG]   shut both down and wait until they exited
#   scripts/stack.sh status DIR [CONFIG]   show what runs; exit 0 if both run, 3 otherwise
#
# CONFIG (default conf/hourglass.conf) is the daemon's INI file. Read from it:
#   [redis] address (127.0.0.1:PORT), password
#   [mysql] host (127.0.0.1 or localhost), port, user, password, database
# Both servers listen on 127.0.0.1 only. Layout under DIR:
#   redis/  redis.pid redis.log redis.sock (and any dump files)
#   mysql/  data/ mysqld.pid mysqld.log mysqld.sock install.log
# MariaDB's root@localhost has no password and is reachable only through DIR/mysql/mysqld.sock:
#   mariadb --no-defaults -uroot --socket=DIR/mysql/mysqld.sock
# Redis runs without persistence (--save '' --appendonly no). Extra server options, word-split:
#   REDIS_ARGS="--appendonly yes"  MARIADB_ARGS="--innodb-buffer-pool-size=1G"
# Plain POSIX sh (the Makefile runs it with `sh`); needs iproute2 (ss) and util-linux (setsid, flock).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PATH=$PATH:/usr/sbin:/sbin # mariadbd lives in /usr/sbin, often not in a non-root PATH

usage() {
    echo "usage: scripts/stack.sh start|stop|status DIR [CONFIG]" >&2
    exit 2
}
die() {
    echo "stack.sh: $*" >&2
    exit 1
}

if [ $# -lt 2 ] || [ $# -gt 3 ]; then usage; fi
cmd=$1
DIR_ARG=$2
CONFIG=${3:-$ROOT/conf/hourglass.conf}
REDIS_ARGS=${REDIS_ARGS:-}
MARIADB_ARGS=${MARIADB_ARGS:-}
case "$cmd" in start | stop | status) ;; *) usage ;; esac

# ---------------------------------------------------------------- helpers

# ini_get SECTION KEY: the value in CONFIG, trimmed ('' when absent). Full-line comments only.
ini_get() {
    awk -v sec="$1" -v key="$2" '
        { sub(/\r$/, "") }
        /^[ \t]*[#;]/ { next }
        /^[ \t]*\[/ { s = $0; gsub(/^[ \t]*\[[ \t]*|[ \t]*\][ \t]*$/, "", s); cur = s; next }
        cur == sec {
            i = index($0, "="); if (i == 0) next
            k = substr($0, 1, i - 1); gsub(/^[ \t]+|[ \t]+$/, "", k)
            if (k != key) next
            v = substr($0, i + 1); gsub(/^[ \t]+|[ \t]+$/, "", v); val = v
        }
        END { print val }' "$CONFIG"
}

# alive PID COMM: PID is a live (not zombie) process whose name is COMM.
alive() {
    [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ -n "$st" ] && [ "$st" != Z ] || return 1
    [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]
}

pid_of() { # PIDFILE -> pid or ''
    if [ -r "$1" ]; then tr -dc '0-9' <"$1"; fi
}

# listeners PORT: ss lines for TCP sockets listening on PORT (any address).
listeners() { ss -Hltnp "sport = :$1" 2>/dev/null || true; }

# ports_of PID: the TCP addresses PID listens on (needs root, or PID being ours).
ports_of() {
    ss -Hltnp 2>/dev/null | awk -v p="pid=$1," 'index($0, p) { printf "%s%s", sep, $4; sep = " " }'
}

# need_free_port PORT KEY: fail unless nothing listens on PORT.
need_free_port() {
    l=$(listeners "$1")
    [ -z "$l" ] || die "port $1 is in use by another program (not our server under $DIR):
    $l
  Change $2 in $CONFIG to a free port, or stop that program."
}

# wait_gone PID COMM SECONDS: wait until PID exited; 1 on timeout.
wait_gone() {
    n=0
    while alive "$1" "$2"; do
        n=$((n + 1))
        [ "$n" -le $(($3 * 10)) ] || return 1
        sleep 0.1
    done
}

log_tail() { # FILE
    if [ -r "$1" ]; then
        echo "--- last lines of $1:" >&2
        tail -n 25 "$1" >&2
    fi
}

sql_str() { # escape for a '...' SQL string literal
    printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g"
}

need() {
    for c; do
        command -v "$c" >/dev/null 2>&1 || die "'$c' not found: run scripts/deps.sh (as root) first"
    done
}

# ---------------------------------------------------------------- paths and config

if [ "$cmd" = start ]; then
    mkdir -p "$DIR_ARG" || die "cannot create $DIR_ARG"
elif [ ! -d "$DIR_ARG" ]; then
    echo "redis: not running (no $DIR_ARG)"
    echo "mariadb: not running (no $DIR_ARG)"
    [ "$cmd" = stop ] && exit 0
    exit 3
fi
DIR=$(cd "$DIR_ARG" && pwd)
RDIR=$DIR/redis
MDIR=$DIR/mysql
RPIDF=$RDIR/redis.pid
RLOG=$RDIR/redis.log
RSOCK=$RDIR/redis.sock
MPIDF=$MDIR/mysqld.pid
MLOG=$MDIR/mysqld.log
MSOCK=$MDIR/mysqld.sock
[ ${#MSOCK} -lt 100 ] || die "socket path $MSOCK is too long for a unix socket: use a shorter DIR"

have_config=no
if [ -r "$CONFIG" ]; then
    have_config=yes
elif [ "$cmd" = start ]; then
    die "config file $CONFIG not found"
fi

rpass=""
if [ "$have_config" = yes ]; then
    raddr=$(ini_get redis address)
    rpass=$(ini_get redis password)
    mhost=$(ini_get mysql host)
    mport=$(ini_get mysql port)
    muser=$(ini_get mysql user)
    mpass=$(ini_get mysql password)
    mdb=$(ini_get mysql database)
    rhost=${raddr%:*}
    rport=${raddr##*:}
fi

check_config() {
    case "$raddr" in
        unix:*) die "[redis] address = $raddr in $CONFIG: stack.sh only starts Redis on 127.0.0.1:PORT" ;;
    esac
    case "$rhost" in
        127.0.0.1 | localhost) ;;
        *) die "[redis] address = $raddr in $CONFIG: stack.sh only starts servers on 127.0.0.1 (use 127.0.0.1:PORT)" ;;
    esac
    case "$rport" in
        '' | *[!0-9]*) die "[redis] address = $raddr in $CONFIG: expected 127.0.0.1:PORT" ;;
    esac
    case "$mhost" in
        127.0.0.1 | localhost) ;;
        *) die "[mysql] host = $mhost in $CONFIG: stack.sh only starts MariaDB on 127.0.0.1" ;;
    esac
    case "$mport" in
        '' | *[!0-9]*) die "[mysql] port = $mport in $CONFIG: expected a port number" ;;
    esac
    [ "$rport" != "$mport" ] || die "[redis] address and [mysql] port in $CONFIG use the same port $rport"
    case "$muser" in
        '' | *[!A-Za-z0-9_]*) die "[mysql] user = '$muser' in $CONFIG: use letters, digits and _ only" ;;
        root) die "[mysql] user = root in $CONFIG: use a dedicated user (stack.sh keeps root for itself)" ;;
    esac
    case "$mdb" in
        '' | *[!A-Za-z0-9_]*) die "[mysql] database = '$mdb' in $CONFIG: use letters, digits and _ only" ;;
    esac
}

mariadb_root() { mariadb --no-defaults -uroot --socket="$MSOCK" "$@"; }

# ---------------------------------------------------------------- redis

start_redis() {
    mkdir -p "$RDIR"
    pid=$(pid_of "$RPIDF")
    if alive "$pid" redis-server; then
        case " $(ports_of "$pid") " in
            *":$rport "*) ;;
            *) die "our redis-server (pid $pid, $RDIR) does not listen on port $rport ([redis] address in $CONFIG): run scripts/stack.sh stop $DIR_ARG first" ;;
        esac
        echo "redis: already running (pid $pid) on 127.0.0.1:$rport"
        return 0
    fi
    rm -f "$RPIDF"
    need_free_port "$rport" "[redis] address"
    set -- --daemonize yes --bind 127.0.0.1 --port "$rport" \
        --unixsocket "$RSOCK" --unixsocketperm 700 \
        --dir "$RDIR" --pidfile "$RPIDF" --logfile "$RLOG" \
        --save '' --appendonly no
    [ -z "$rpass" ] || set -- "$@" --requirepass "$rpass"
    # shellcheck disable=SC2086 # REDIS_ARGS is word-split on purpose
    redis-server "$@" $REDIS_ARGS </dev/null >>"$RLOG" 2>&1 9>&- ||
        { log_tail "$RLOG"; die "redis-server failed to start"; }
    n=0
    deadline=$(($(date +%s) + 60))
    until [ "$(rcli -h 127.0.0.1 -p "$rport" ping 2>/dev/null)" = PONG ]; do
        n=$((n + 1))
        pid=$(pid_of "$RPIDF")
        if [ "$n" -gt 20 ] && ! alive "$pid" redis-server; then
            log_tail "$RLOG"
            die "redis-server exited during startup (see $RLOG)"
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log_tail "$RLOG"
            die "redis-server did not answer PING on 127.0.0.1:$rport within 60 s (see $RLOG)"
        fi
        sleep 0.1
    done
    echo "redis: started (pid $(pid_of "$RPIDF")) on 127.0.0.1:$rport"
}

rcli() { # redis-cli with the configured password, if any, and a time limit
    if [ -n "$rpass" ]; then
        REDISCLI_AUTH=$rpass timeout 10 redis-cli "$@"
    else
        timeout 10 redis-cli "$@"
    fi
}

stop_redis() {
    pid=$(pid_of "$RPIDF")
    if ! alive "$pid" redis-server; then
        rm -f "$RPIDF"
        echo "redis: not running"
        return 0
    fi
    # SHUTDOWN NOSAVE through our unix socket; SIGTERM if that fails (e.g. unknown password).
    if ! rcli -s "$RSOCK" shutdown nosave >/dev/null 2>&1; then
        kill -TERM "$pid" 2>/dev/null || true
    fi
    if ! wait_gone "$pid" redis-server 30; then
        echo "redis: pid $pid did not exit within 30 s, killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone "$pid" redis-server 10 || die "redis-server pid $pid does not die"
    fi
    rm -f "$RPIDF" "$RSOCK"
    echo "redis: stopped"
}

# ---------------------------------------------------------------- mariadb

start_mariadb() {
    mkdir -p "$MDIR"
    pid=$(pid_of "$MPIDF")
    if alive "$pid" mariadbd; then
        case " $(ports_of "$pid") " in
            *":$mport "*) ;;
            *) die "our mariadbd (pid $pid, $MDIR) does not listen on port $mport ([mysql] port in $CONFIG): run scripts/stack.sh stop $DIR_ARG first" ;;
        esac
        echo "mariadb: already running (pid $pid) on 127.0.0.1:$mport"
        return 0
    fi
    rm -f "$MPIDF"
    need_free_port "$mport" "[mysql] port"

    userarg=""
    [ "$(id -u)" -ne 0 ] || userarg=--user=root # mariadbd refuses to run as root without it

    # First use: initialise the data directory. The marker tells a finished init from an
    # interrupted one, which is thrown away and redone.
    if [ ! -e "$MDIR/.initialized" ]; then
        rm -rf "$MDIR/data"
        echo "mariadb: initialising $MDIR/data"
        # shellcheck disable=SC2086
        mariadb-install-db --no-defaults $userarg --datadir="$MDIR/data" \
            --auth-root-authentication-method=normal --skip-test-db \
            >"$MDIR/install.log" 2>&1 ||
            { log_tail "$MDIR/install.log"; die "mariadb-install-db failed (see $MDIR/install.log)"; }
        touch "$MDIR/.initialized"
    fi

    # setsid: own session, so a Ctrl-C in the terminal (e.g. `make run`) does not reach it.
    # shellcheck disable=SC2086 # userarg / MARIADB_ARGS are word-split on purpose
    setsid mariadbd --no-defaults $userarg --datadir="$MDIR/data" \
        --bind-address=127.0.0.1 --port="$mport" --socket="$MSOCK" \
        --pid-file="$MPIDF" --log-error="$MLOG" \
        --skip-log-bin --skip-name-resolve --innodb-buffer-pool-size=256M \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
        $MARIADB_ARGS </dev/null >>"$MLOG" 2>&1 9>&- &
    spid=$!
    n=0
    deadline=$(($(date +%s) + 60))
    until mariadb-admin --no-defaults -uroot --socket="$MSOCK" --connect-timeout=2 ping >/dev/null 2>&1; do
        n=$((n + 1))
        if [ "$n" -gt 10 ] && ! alive "$spid" mariadbd && ! alive "$(pid_of "$MPIDF")" mariadbd; then
            log_tail "$MLOG"
            die "mariadbd exited during startup (see $MLOG)"
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            log_tail "$MLOG"
            die "mariadbd did not answer on $MSOCK within 60 s (see $MLOG)"
        fi
        sleep 0.1
    done
    echo "mariadb: started (pid $(pid_of "$MPIDF")) on 127.0.0.1:$mport"
}

setup_database() {
    pw=$(sql_str "$mpass")
    mariadb_root <<EOF || die "creating database '$mdb' / user '$muser' failed"
CREATE DATABASE IF NOT EXISTS \`$mdb\`;
CREATE USER IF NOT EXISTS '$muser'@'127.0.0.1' IDENTIFIED BY '$pw';
CREATE USER IF NOT EXISTS '$muser'@'localhost' IDENTIFIED BY '$pw';
ALTER USER '$muser'@'127.0.0.1' IDENTIFIED BY '$pw';
ALTER USER '$muser'@'localhost' IDENTIFIED BY '$pw';
GRANT ALL PRIVILEGES ON \`$mdb\`.* TO '$muser'@'127.0.0.1';
GRANT ALL PRIVILEGES ON \`$mdb\`.* TO '$muser'@'localhost';
EOF
    [ -r "$ROOT/sql/schema.sql" ] || die "$ROOT/sql/schema.sql not found"
    mariadb_root "$mdb" <"$ROOT/sql/schema.sql" || die "applying sql/schema.sql to '$mdb' failed"
    # Connect the way the daemon will: TCP, its user and password.
    MYSQL_PWD=$mpass mariadb --no-defaults --protocol=tcp -h 127.0.0.1 -P "$mport" -u "$muser" \
        -N -B -e 'SELECT 1' "$mdb" >/dev/null ||
        die "user '$muser' cannot connect to 127.0.0.1:$mport/$mdb"
    echo "mariadb: database '$mdb' ready for user '$muser' (schema applied)"
}

stop_mariadb() {
    pid=$(pid_of "$MPIDF")
    if ! alive "$pid" mariadbd; then
        rm -f "$MPIDF"
        echo "mariadb: not running"
        return 0
    fi
    if ! mariadb-admin --no-defaults -uroot --socket="$MSOCK" --connect-timeout=5 shutdown >/dev/null 2>&1; then
        kill -TERM "$pid" 2>/dev/null || true
    fi
    if ! wait_gone "$pid" mariadbd 60; then
        echo "mariadb: pid $pid did not exit within 60 s, killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone "$pid" mariadbd 10 || die "mariadbd pid $pid does not die"
    fi
    rm -f "$MPIDF"
    echo "mariadb: stopped"
}

# ---------------------------------------------------------------- commands

status() {
    rc=0
    pid=$(pid_of "$RPIDF")
    if alive "$pid" redis-server; then
        echo "redis: running (pid $pid) on $(ports_of "$pid"), log $RLOG"
    else
        echo "redis: not running"
        rc=3
    fi
    pid=$(pid_of "$MPIDF")
    if alive "$pid" mariadbd; then
        echo "mariadb: running (pid $pid) on $(ports_of "$pid") and $MSOCK, log $MLOG"
    else
        echo "mariadb: not running"
        rc=3
    fi
    return "$rc"
}

lock() { # one start/stop at a time per DIR (servers are started with fd 9 closed)
    exec 9>"$DIR/.stack.lock"
    flock -w 300 9 || die "another stack.sh holds $DIR/.stack.lock for 5 minutes"
}

case "$cmd" in
    start)
        need redis-server redis-cli mariadbd mariadb mariadb-admin mariadb-install-db ss setsid flock
        check_config
        lock
        start_redis
        start_mariadb
        setup_database
        echo "stack: redis 127.0.0.1:$rport, mariadb 127.0.0.1:$mport (database $mdb, user $muser); logs in $DIR"
        ;;
    stop)
        lock
        stop_redis
        stop_mariadb
        ;;
    status)
        status
        ;;
esac
