#!/usr/bin/env bash
# Host tests of the MariaDB commit-protection patch: the patched mariadbd
# runs here under fakekmod.so (remusdb.ko's contract faked in user space)
# and the mariadb client drives it over TCP.  Every assertion is on what
# the server sent: fakekmod logs each send with the socket's protected
# flag and the first bytes (a MySQL packet: 3-byte length, sequence id,
# then 00 OK, ff ERR, fe EOF, anything else a result set).
#
#   tests/dbms/maria-host.sh [MARIADBD]
#
# MARIADBD defaults to build/dbms/mariadb-10.11/mariadbd
# (dbms-patches/mariadb-10.11/build.sh).  Debian's packages (client,
# share files) come from tools/mkguest-maria.sh --print-stage.
# Cases: the drop-in paths; under "writes" only the OKs of COMMIT, of
# writing autocommit statements (InnoDB, MyISAM, DDL), of XA PREPARE /
# XA COMMIT / XA COMMIT ONE PHASE leave protected, while result sets,
# errors, BEGIN, statements inside the transaction, read-only COMMIT and
# ROLLBACK do not, and the socket is unprotected before the next output;
# "all" adds read-only commits and the end of an autocommit SELECT; "off"
# protects nothing; the abort generation (FAKEKMOD_GEN_FILE) fails the
# next statement, the block and COMMIT with 1213 and leaves no row, while
# ROLLBACK, new transactions, autocommit statements and PREPARED XA
# branches go on; the failover handler (FAKEKMOD_EVENT, a FIFO) kills the
# open transaction's connection only, logs one line per event and aborts
# nothing for an event without REMUSDB_EVENT_ABORT; clean shutdown; with
# FAKEKMOD_ABSENT=1 one warning and clients unaffected.
# One PASS/FAIL line per case; exit 1 if any failed, 77 if it cannot run.
# KEEP=1 keeps the temporary directory (logs, fakekmod.log).
# check-long: the MariaDB patch needs the MariaDB build (30 min on an
#   empty cache here, a third of make check's budget); make check has the
#   PostgreSQL patch's host tests (pg-host)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
server=${1:-$repo/build/dbms/mariadb-10.11/mariadbd}
fake=$repo/build/dbms/fakekmod.so

skip() { echo "SKIP: $*"; exit 77; }
[ -x "$server" ] || skip "no patched mariadbd at $server (dbms-patches/mariadb-10.11/build.sh)"
command -v python3 >/dev/null || skip "python3 missing"
make -s -C "$repo" build/dbms/fakekmod.so >/dev/null 2>&1 || skip "cannot build fakekmod.so"
stage=$(bash "$repo/tools/mkguest-maria.sh" --print-stage 2>/dev/null) ||
	skip "Debian's mariadb packages not available (tools/mkguest-maria.sh --print-stage)"
client=$stage/usr/bin/mariadb
[ -x "$client" ] || skip "no mariadb client in $stage"
export LD_LIBRARY_PATH=$stage/usr/lib/x86_64-linux-gnu

T=$(mktemp -d /tmp/maria-host.XXXXXX)
chmod 755 "$T"
srvpid= bgpids=() fails=0
cleanup() {
	for p in "${bgpids[@]}"; do kill "$p" 2>/dev/null; done
	[ -n "$srvpid" ] && kill -KILL "$srvpid" 2>/dev/null
	wait 2>/dev/null
	[ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LOG=$T/fakekmod.log GEN=$T/gen FIFO=$T/event.fifo ERR= nstart=0
mkfifo "$FIFO"
user_opt=()
[ "$(id -u)" = 0 ] && user_opt=(--user=root)

# ---- the data directory (Debian's mariadb-install-db, the patched server) ----
MYSQLD_BOOTSTRAP=$server timeout 120 "$stage/usr/bin/mariadb-install-db" --no-defaults \
	--basedir="$stage/usr" --datadir="$T/data" "${user_opt[@]}" \
	--auth-root-authentication-method=normal --skip-test-db \
	--skip-name-resolve >"$T/install-db.log" 2>&1 ||
	{ cat "$T/install-db.log"; skip "mariadb-install-db failed"; }

# start_server [ENV=VALUE...]: the patched server under fakekmod.so
start_server() {
	nstart=$((nstart + 1))
	ERR=$T/error-$nstart.log
	: > "$LOG"
	echo 0 > "$GEN"
	env "$@" LD_PRELOAD="$fake" FAKEKMOD_LOG="$LOG" FAKEKMOD_GEN_FILE="$GEN" \
		FAKEKMOD_EVENT="$FIFO" "$server" --no-defaults "${user_opt[@]}" \
		--basedir="$stage/usr" --datadir="$T/data" --socket="$T/sock" \
		--pid-file="$T/pid" --port="$port" --bind-address=127.0.0.1 \
		--log-error="$ERR" --innodb-buffer-pool-size=32M \
		--innodb-log-file-size=16M --skip-log-bin --max-connections=20 \
		>>"$T/server.out" 2>&1 &
	srvpid=$!
	for _ in $(seq 1 300); do
		sq -e "SELECT 1" >/dev/null 2>&1 && return 0
		kill -0 "$srvpid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$ERR"
	echo "maria-host: the server did not start"
	exit 1
}

stop_server() {
	sq -e "SHUTDOWN" >/dev/null 2>&1
	for _ in $(seq 1 300); do kill -0 "$srvpid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$srvpid" 2>/dev/null
	wait "$srvpid" 2>/dev/null
	srvpid=
}

# sq: over the Unix socket (not logged: fakekmod logs TCP only)
sq() { timeout 30 "$client" --no-defaults -S "$T/sock" -u root "$@"; }
# tc: one TCP session; statements on stdin; errors do not stop it
tc() { timeout 60 "$client" --no-defaults --protocol=tcp -h 127.0.0.1 -P "$port" \
	-u root --connect-timeout=5 --skip-reconnect --force --unbuffered -N "$@"; }

# seg NAME: the server's sends between marker NAME and the next marker,
# one line each: "<protected 0|1> <packet type: 00 ff fe or rs>"
# A marker is an error (never protected, one packet) carrying its name
mk() { printf "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'mk_%s.';\n" "$1"; }
seg() {
	python3 - "$LOG" "$srvpid" "mk_$1" <<'EOP'
import sys
log, pid, name = sys.argv[1], sys.argv[2], sys.argv[3]
want = (name + ".").encode().hex()
on = False
for line in open(log):
    f = line.split()
    if len(f) < 6 or f[0] != "W" or f[1] != pid:
        continue
    if on:
        if "6d6b5f" in f[5]:		# "mk_": the next marker
            break
        t = f[5][8:10]
        print(f[3], t if t in ("00", "ff", "fe") else "rs")
    elif want in f[5]:
        on = True
EOP
}
# expect CASE NAME WANT: the sends of marker NAME's statement are WANT
# (lines joined by ","), e.g. "1 00" for one protected OK
expect() {
	local got
	got=$(seg "$2" | paste -sd, -)
	if [ "$got" = "$3" ]; then pass "$1: $2 -> $3"; else fail "$1: $2 sent [$got], want [$3]"; fi
}
count_rows() { sq -N -e "SELECT COUNT(*) FROM t.a WHERE id IN ($1)"; }

start_server
sq <<'EOS' || { echo "maria-host: setup failed"; exit 1; }
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE DATABASE t;
CREATE TABLE t.a (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;
CREATE TABLE t.m (id INT PRIMARY KEY) ENGINE=MyISAM;
EOS

# ---- drop-in: the paths that matter are Debian's ----
deb_help=$("$stage/usr/sbin/mariadbd" --no-defaults --help --verbose 2>/dev/null)
our_help=$("$server" --no-defaults --help --verbose 2>/dev/null)
dropin_ok=1
for v in plugin-dir character-sets-dir lc-messages-dir basedir datadir socket port; do
	a=$(awk -v v="$v" '$1==v{print $2}' <<<"$deb_help")
	b=$(awk -v v="$v" '$1==v{print $2}' <<<"$our_help")
	[ -n "$a" ] && [ "$a" = "$b" ] || { dropin_ok=0; fail "drop-in: $v is '$b', Debian's '$a'"; }
done
[ $dropin_ok = 1 ] && pass "drop-in: plugin-dir, character-sets-dir, lc-messages-dir, basedir, datadir, socket, port as Debian's"
grep -q "RemusDB: commit protection: writes" "$ERR" &&
	pass "startup: policy writes logged" || fail "startup: no 'commit protection: writes' line"

# ---- writes: only commit acknowledgements of writing transactions ----
tc >"$T/s1.out" 2>&1 <<EOS
$(mk s1_begin) BEGIN;
$(mk s1_insert) INSERT INTO t.a VALUES (1, 1);
$(mk s1_select) SELECT * FROM t.a;
$(mk s1_error) SELECT * FROM t.nonexistent;
$(mk s1_commit) COMMIT;
$(mk s1_after) SELECT 1;
$(mk s1_ac_insert) INSERT INTO t.a VALUES (2, 2);
$(mk s1_ac_select) SELECT * FROM t.a WHERE id = 2;
$(mk s1_ac_myisam) INSERT INTO t.m VALUES (1);
$(mk s1_ro_begin) BEGIN;
$(mk s1_ro_select) SELECT * FROM t.a WHERE id = 1;
$(mk s1_ro_commit) COMMIT;
$(mk s1_rb_begin) BEGIN;
$(mk s1_rb_insert) INSERT INTO t.a VALUES (3, 3);
$(mk s1_rollback) ROLLBACK;
$(mk s1_ddl) CREATE TABLE t.d (id INT PRIMARY KEY) ENGINE=InnoDB;
$(mk s1_end)
EOS
expect writes s1_begin "0 00"
expect writes s1_insert "0 00"
expect writes s1_select "0 rs"
expect writes s1_error "0 ff"
expect writes s1_commit "1 00"
expect writes s1_after "0 rs"
expect writes s1_ac_insert "1 00"
expect writes s1_ac_select "0 rs"
expect writes s1_ac_myisam "1 00"
expect writes s1_ro_commit "0 00"
expect writes s1_rollback "0 00"
expect writes s1_ddl "1 00"
[ "$(count_rows 1,2,3)" = 2 ] && pass "writes: rows of the commits present, the rolled back one absent" ||
	fail "writes: rows 1,2,3: $(count_rows 1,2,3), want 2"
# the protected OK was followed by an unprotect before the next output
python3 - "$LOG" "$srvpid" <<'EOP' && pass "writes: unprotected lazily after the commit's OK (P 1, W 1, P 0, then W 0)" || fail "writes: protect/unprotect order wrong"
import sys
ev = [l.split() for l in open(sys.argv[1]) if l.split()[1:2] == [sys.argv[2]]]
# after each protected send, the next P must be 0 and come before the next send
ok, seen = False, False
for i, e in enumerate(ev):
    if e[0] == "W" and e[3] == "1":
        rest = [x for x in ev[i + 1:] if x[0] in ("P", "W") and x[2] == e[2]]
        nxt = next((x for x in rest if x[0] == "W"), None)
        if nxt is not None and nxt[3] == "0":
            seen = True
            before = rest[:rest.index(nxt)]
            if not any(x[0] == "P" and x[3] == "0" for x in before):
                sys.exit(1)
sys.exit(0 if seen else 1)
EOP

# ---- XA ----
tc >"$T/s2.out" 2>&1 <<EOS
$(mk xa_start) XA START 'x1';
$(mk xa_insert) INSERT INTO t.a VALUES (20, 20);
$(mk xa_end) XA END 'x1';
$(mk xa_prepare) XA PREPARE 'x1';
$(mk xa_commit) XA COMMIT 'x1';
$(mk xa1_start) XA START 'x2';
$(mk xa1_insert) INSERT INTO t.a VALUES (21, 21);
$(mk xa1_end) XA END 'x2';
$(mk xa1_commit) XA COMMIT 'x2' ONE PHASE;
$(mk xa_done)
EOS
expect xa xa_start "0 00"
expect xa xa_insert "0 00"
expect xa xa_end "0 00"
expect xa xa_prepare "1 00"
expect xa xa_commit "1 00"
expect xa xa1_end "0 00"
expect xa xa1_commit "1 00"
[ "$(count_rows 20,21)" = 2 ] && pass "xa: both committed" || fail "xa: rows 20,21: $(count_rows 20,21)"

# ---- all: read-only transactions and autocommit reads too ----
sq -e "SET GLOBAL remusdb_commit_protection = all"
tc >"$T/s3.out" 2>&1 <<EOS
$(mk all_ac_select) SELECT * FROM t.a WHERE id = 1;
$(mk all_ro_begin) BEGIN;
$(mk all_ro_select) SELECT * FROM t.a WHERE id = 1;
$(mk all_ro_commit) COMMIT;
$(mk all_rb_begin) BEGIN;
$(mk all_rollback) ROLLBACK;
$(mk all_end)
EOS
# the rows leave unprotected (written before the statement's commit), the
# final EOF protected
expect all all_ac_select "0 rs,1 fe"
expect all all_ro_select "0 rs"
expect all all_ro_commit "1 00"
expect all all_rollback "0 00"

# ---- off: nothing protected ----
sq -e "SET GLOBAL remusdb_commit_protection = off"
nP=$(grep -c '^P ' "$LOG")
tc >"$T/s4.out" 2>&1 <<EOS
$(mk off_begin) BEGIN;
$(mk off_insert) INSERT INTO t.a VALUES (30, 30);
$(mk off_commit) COMMIT;
$(mk off_ac_insert) INSERT INTO t.a VALUES (31, 31);
$(mk off_end)
EOS
expect off off_commit "0 00"
expect off off_ac_insert "0 00"
[ "$(grep -c '^P ' "$LOG")" = "$nP" ] && pass "off: no protect call at all" || fail "off: protect calls made"
sq -e "SET GLOBAL remusdb_commit_protection = writes"

# ---- abort generation ----
tc >"$T/s5.out" 2>&1 <<EOS
BEGIN;
INSERT INTO t.a VALUES (40, 40);
system echo 1 > $GEN
INSERT INTO t.a VALUES (41, 41);
SELECT 'still in the aborted block';
COMMIT;
BEGIN;
INSERT INTO t.a VALUES (42, 42);
COMMIT;
BEGIN;
INSERT INTO t.a VALUES (43, 43);
system echo 2 > $GEN
COMMIT;
INSERT INTO t.a VALUES (44, 44);
BEGIN;
INSERT INTO t.a VALUES (45, 45);
system echo 3 > $GEN
ROLLBACK;
SELECT 'mk_gen_end';
EOS
nerr=$(grep -c "ERROR 1213 (40001).*failed over to its standby.*(RemusDB)" "$T/s5.out")
[ "$nerr" = 4 ] && pass "abort gen: the next statement, the block's next statement, COMMIT and a COMMIT right after the move fail with 1213 (4 errors)" ||
	{ fail "abort gen: $nerr RemusDB errors, want 4"; cat "$T/s5.out"; }
[ "$(count_rows 40,41,43)" = 0 ] && pass "abort gen: rows of the aborted transactions absent" ||
	fail "abort gen: rows 40,41,43 present: $(count_rows 40,41,43)"
[ "$(count_rows 42,44)" = 2 ] && pass "abort gen: a new transaction and an autocommit statement commit" ||
	fail "abort gen: rows 42,44: $(count_rows 42,44), want 2"
! grep -q "ERROR.* at line 18:" "$T/s5.out" && [ "$(count_rows 45)" = 0 ] &&
	pass "abort gen: ROLLBACK after a move succeeds" || fail "abort gen: ROLLBACK after a move failed"

echo 3 > "$GEN"
tc >"$T/s6.out" 2>&1 <<EOS
XA START 'g1';
INSERT INTO t.a VALUES (50, 50);
system echo 4 > $GEN
XA END 'g1';
XA PREPARE 'g1';
XA ROLLBACK 'g1';
XA START 'g2';
INSERT INTO t.a VALUES (51, 51);
XA END 'g2';
XA PREPARE 'g2';
system echo 5 > $GEN
XA COMMIT 'g2';
SELECT 'mk_xa_gen_end';
EOS
grep -q "ERROR 1213 .*line 4:.*(RemusDB)" "$T/s6.out" && grep -q "ERROR .* at line 5" "$T/s6.out" &&
	! grep -q "ERROR .* at line 6" "$T/s6.out" &&
	pass "abort gen: XA ACTIVE aborted (XA END 1213, XA PREPARE refused, XA ROLLBACK ok)" ||
	{ fail "abort gen: XA ACTIVE"; cat "$T/s6.out"; }
! grep -q "ERROR .* at line 12" "$T/s6.out" && [ "$(count_rows 50,51)" = 1 ] &&
	[ "$(count_rows 51)" = 1 ] &&
	pass "abort gen: XA PREPARED left alone (XA COMMIT after a move commits)" ||
	{ fail "abort gen: XA PREPARED"; cat "$T/s6.out"; }

# ---- the failover handler (FAKEKMOD_EVENT: a FIFO standing in for /dev/remusdb) ----
grep -q "RemusDB: waiting for failover events on /dev/remusdb" "$ERR" &&
	pass "handler: waiting on /dev/remusdb" || fail "handler: not waiting on /dev/remusdb"
# session SESSION: a TCP session fed from a FIFO, its output in $T/SESSION.out
session() {
	mkfifo "$T/$1.in"
	tc <"$T/$1.in" >"$T/$1.out" 2>&1 &
	bgpids+=($!)
	eval "exec {fd_$1}>\"$T/$1.in\""
}
feed() { local fd="fd_$1"; printf '%s\n' "$2" >&"${!fd}"; }
# wait_out SESSION TEXT: until the session printed TEXT (10 s)
wait_out() {
	for _ in $(seq 1 100); do grep -q "$2" "$T/$1.out" && return 0; sleep 0.1; done
	return 1
}
event() {
	timeout 5 python3 -c 'import struct, sys
sys.stdout.buffer.write(struct.pack("<QQII", int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), 0))' \
		"$1" "$2" "$3" >"$FIFO"
}

echo 10 > "$GEN"
session open; session auto; session prep
feed open "BEGIN; INSERT INTO t.a VALUES (60, 60); SELECT 'open-ready';"
feed auto "INSERT INTO t.a VALUES (61, 61); SELECT 'auto-ready';"
feed prep "XA START 'h1'; INSERT INTO t.a VALUES (62, 62); XA END 'h1'; XA PREPARE 'h1'; SELECT 'prep-ready';"
if wait_out open '^open-ready$' && wait_out auto '^auto-ready$' && wait_out prep '^prep-ready$'; then
	# the kernel moves the generation before the event is delivered
	echo 11 > "$GEN"
	event 7 1 1
	for _ in $(seq 1 100); do grep -q "RemusDB: failover to epoch 7" "$ERR" && break; sleep 0.1; done
	grep -q "RemusDB: failover to epoch 7, generation 1: aborted 1 open transactions, left [0-9]* sessions" "$ERR" &&
		pass "handler: one line per event (epoch, generation, 1 aborted, sessions left)" ||
		{ fail "handler: no or wrong event line"; grep RemusDB "$ERR"; }
	feed open "INSERT INTO t.a VALUES (63, 63); COMMIT; SELECT 'open-after';"
	feed auto "INSERT INTO t.a VALUES (64, 64); SELECT 'auto-after';"
	feed prep "XA COMMIT 'h1'; SELECT 'prep-after';"
	wait_out auto '^auto-after$'; wait_out prep '^prep-after$'
	wait_out open "^ERROR"
	grep -q "ERROR 20\(13\|06\)" "$T/open.out" && ! grep -qx open-after "$T/open.out" &&
		pass "handler: the open transaction's connection was killed (client: $(grep -o 'ERROR 20[0-9]*[^:]*: [^(]*' "$T/open.out" | head -1))" ||
		{ fail "handler: open transaction not killed"; cat "$T/open.out"; }
	! grep -q ERROR "$T/auto.out" && grep -qx auto-after "$T/auto.out" &&
		pass "handler: autocommit session unaffected" || { fail "handler: autocommit session"; cat "$T/auto.out"; }
	! grep -q ERROR "$T/prep.out" && grep -qx prep-after "$T/prep.out" &&
		pass "handler: XA PREPARED left alone, XA COMMIT succeeds" || { fail "handler: XA PREPARED"; cat "$T/prep.out"; }
	[ "$(count_rows 60,63)" = 0 ] && [ "$(count_rows 61,62,64)" = 3 ] &&
		pass "handler: rows: aborted transaction absent, others present" ||
		fail "handler: rows 60,63: $(count_rows 60,63) (want 0), 61,62,64: $(count_rows 61,62,64) (want 3)"
else
	fail "handler: sessions did not get ready"
fi
for s in open auto prep; do fd="fd_$s"; eval "exec ${!fd}>&-"; done

# an event without REMUSDB_EVENT_ABORT aborts nothing
session keep
feed keep "BEGIN; INSERT INTO t.a VALUES (70, 70); SELECT 'keep-ready';"
if wait_out keep '^keep-ready$'; then
	event 8 2 0
	for _ in $(seq 1 100); do grep -q "RemusDB: failover to epoch 8" "$ERR" && break; sleep 0.1; done
	grep -q "RemusDB: failover to epoch 8, generation 2, without abort: no transaction aborted" "$ERR" &&
		pass "handler: event without the abort flag logged" || fail "handler: no line for the event without abort"
	feed keep "INSERT INTO t.a VALUES (71, 71); COMMIT; SELECT 'keep-after';"
	wait_out keep '^keep-after$'
	! grep -q ERROR "$T/keep.out" && [ "$(count_rows 70,71)" = 2 ] &&
		pass "handler: event without the flag: the open transaction commits" ||
		{ fail "handler: event without the flag aborted something"; cat "$T/keep.out"; }
else
	fail "handler: keep session did not get ready"
fi
eval "exec ${fd_keep}>&-"
stop_server
grep -q "Shutdown complete" "$ERR" && pass "shutdown: clean with the handler thread" ||
	fail "shutdown: not clean"

# ---- module absent: one warning, clients fine ----
start_server FAKEKMOD_ABSENT=1
for i in 1 2; do
	tc >"$T/abs$i.out" 2>&1 <<EOS
BEGIN;
INSERT INTO t.a VALUES (8$i, 1);
COMMIT;
INSERT INTO t.a VALUES (9$i, 1);
EOS
done
nw=$(grep -c "Warning\] RemusDB" "$ERR")
[ "$nw" = 1 ] && grep -q "remusdb.ko is not loaded" "$ERR" &&
	pass "absent: exactly one warning in the error log" ||
	{ fail "absent: $nw RemusDB warnings"; grep RemusDB "$ERR"; }
! grep -q ERROR "$T/abs1.out" "$T/abs2.out" && [ "$(count_rows 81,82,91,92)" = 4 ] &&
	pass "absent: both clients committed" || { fail "absent: client errors"; cat "$T"/abs*.out; }
! grep -q '^W [0-9]* [0-9]* 1 ' "$LOG" && pass "absent: nothing sent protected" ||
	fail "absent: protected sends"
stop_server

echo "maria-host: $fails failed"
[ "$fails" = 0 ]
