#!/usr/bin/env bash
# Host tests of RemusDB's PostgreSQL 15 patch (dbms-patches/postgresql-15):
# the patched postgres runs on this host under build/dbms/fakekmod.so, which
# fakes remusdb.ko's contract and logs every protect call and every send
# (tests/dbms/fakekmod.c); tests/dbms/pg/pgcases.py talks to it over TCP
# and checks, message by message, what went out protected.
#
#   tests/dbms/pg-host.sh [CASE...]      cases a..h, default all
#
#   a  explicit block: only COMMIT's answer is protected, and the socket is
#      unprotected again at the client's next message
#   b  autocommit: INSERT protected; SELECT not under writes, yes under all
#   c  ROLLBACK not protected; PREPARE / COMMIT PREPARED / ROLLBACK PREPARED are
#   d  extended protocol, pipelined, pgbench -M extended and -M prepared
#   e  remusdb.commit_protection = off, and a reload in a running session
#   f  module absent: clients work, one warning for many connections
#   g  abort generation: an open transaction fails, its COMMIT errors
#   h  failover handler: events with and without REMUSDB_EVENT_ABORT
#
# PG_POSTGRES=path tests that binary instead of building the patch.
# One PASS/FAIL line per case; exit 1 if any failed, 77 if it cannot run.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
PGBIN=/usr/lib/postgresql/15/bin

skip() { echo "pg-host: SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (postgres runs as the postgres user)"
[ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pgbench" ] && [ -x "$PGBIN/psql" ] ||
	skip "Debian's postgresql-15 is not installed (tools/setup-deps.sh)"
id postgres >/dev/null 2>&1 || skip "no postgres user"
command -v python3 >/dev/null || skip "no python3"

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(a b c d e f g h)

postgres=${PG_POSTGRES:-}
if [ -z "$postgres" ]; then
	postgres=$(bash "$root/dbms-patches/postgresql-15/build.sh") ||
		{ echo "FAIL build: dbms-patches/postgresql-15/build.sh"; exit 1; }
fi
make -C "$root" -s build/dbms/fakekmod.so || { echo "FAIL build: fakekmod.so"; exit 1; }
fake=$root/build/dbms/fakekmod.so

work=$(mktemp -d /tmp/pg-host.XXXXXX)
chmod 755 "$work"
chown postgres "$work"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sock=$work/sock
running=			# normal | absent
runpid=

stop_server() {
	[ -n "$runpid" ] || return 0
	local pm
	pm=$(head -n 1 "$work/data/postmaster.pid" 2>/dev/null)
	[ -n "$pm" ] && kill -INT "$pm" 2>/dev/null
	for _ in $(seq 1 150); do kill -0 "$runpid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$runpid" 2>/dev/null; then
		echo "pg-host: postgres did not stop in 15 s, killing it" >&2
		[ -n "$pm" ] && kill -KILL "$pm" 2>/dev/null
	fi
	wait "$runpid" 2>/dev/null
	runpid= running=
}
cleanup() {
	stop_server
	rm -rf "$work"
}
trap cleanup EXIT

runuser -u postgres -- "$PGBIN/initdb" -D "$work/data" --auth=trust -E UTF8 \
	--locale=C --no-instructions >"$work/initdb.log" 2>&1 ||
	{ cat "$work/initdb.log"; echo "FAIL setup: initdb"; exit 1; }
mkdir -p "$sock"
chown postgres "$sock"
cat >> "$work/data/postgresql.conf" <<EOC
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
max_connections = 60
max_prepared_transactions = 4
shared_buffers = 16MB
fsync = off
log_line_prefix = '%m [%p] '
EOC
echo "INSERT INTO pgb VALUES (:client_id);" > "$work/pgbench.sql"

# start_server normal|absent: a fresh fakekmod log, event FIFO and generation
start_server() {
	[ "$running" = "$1" ] && return 0
	stop_server
	local absent=0
	[ "$1" = absent ] && absent=1
	rm -f "$work/event" "$work/gen"
	mkfifo -m 600 "$work/event"
	chown postgres "$work/event"
	: > "$work/fake-$1.log"
	: > "$work/server-$1.log"
	chown postgres "$work/fake-$1.log" "$work/server-$1.log"
	runuser -u postgres -- env LD_PRELOAD="$fake" FAKEKMOD_LOG="$work/fake-$1.log" \
		FAKEKMOD_ABSENT=$absent FAKEKMOD_GEN_FILE="$work/gen" \
		FAKEKMOD_EVENT="$work/event" \
		"$postgres" -D "$work/data" >>"$work/server-$1.log" 2>&1 &
	runpid=$!
	for _ in $(seq 1 300); do
		"$PGBIN/pg_isready" -q -h "$sock" -p "$port" && break
		kill -0 "$runpid" 2>/dev/null || break
		sleep 0.1
	done
	if ! "$PGBIN/pg_isready" -q -h "$sock" -p "$port"; then
		tail -20 "$work/server-$1.log"
		echo "FAIL setup: postgres ($1) did not start in 30 s"
		exit 1
	fi
	running=$1
	"$PGBIN/psql" -X -q -h "$sock" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
		-c "SET client_min_messages = warning" \
		-c "CREATE TABLE IF NOT EXISTS t (k text PRIMARY KEY, v int)" \
		-c "CREATE TABLE IF NOT EXISTS pgb (v int)" >/dev/null ||
		{ echo "FAIL setup: schema"; exit 1; }
	export PGH_FAKELOG=$work/fake-$1.log PGH_SERVERLOG=$work/server-$1.log
}

declare -A what=(
	[a]="explicit block: only COMMIT's answer protected; unprotected at the next client message"
	[b]="autocommit INSERT protected; SELECT unprotected under writes, protected under all"
	[c]="ROLLBACK unprotected; PREPARE, COMMIT PREPARED, ROLLBACK PREPARED protected"
	[d]="extended protocol, pipeline, pgbench -M extended/prepared: what follows the commit is protected"
	[e]="commit_protection = off protects nothing; reloading writes works in a running session"
	[f]="module absent: 20 connections work, exactly one warning"
	[g]="abort generation: open transaction fails, COMMIT errors (never ROLLBACK), new ones commit"
	[h]="failover handler: open blocks terminated; idle, autocommit, committing left alone; no-flag event aborts nothing"
)
export PGH_PORT=$port PGH_SOCKDIR=$sock PGH_GENFILE=$work/gen PGH_EVENT=$work/event
export PGH_PGBENCH_SCRIPT=$work/pgbench.sql

rc=0
for c in "${cases[@]}"; do
	[ -n "${what[$c]:-}" ] || { echo "pg-host: unknown case $c" >&2; exit 2; }
	if [ "$c" = f ]; then start_server absent; else start_server normal; fi
	if timeout 120 python3 "$here/pg/pgcases.py" "$c" 2>"$work/case-$c.err"; then
		echo "PASS $c: ${what[$c]}"
	else
		echo "FAIL $c: ${what[$c]}"
		sed 's/^/    /' "$work/case-$c.err"
		rc=1
	fi
done
stop_server

# No case may have crashed a server process.
if grep -E "terminated by signal|PANIC|TRAP:" "$work"/server-*.log; then
	echo "FAIL server: a server process crashed"
	rc=1
fi
exit $rc
