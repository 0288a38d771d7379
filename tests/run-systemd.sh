#!/usr/bin/env bash
# remusdbd under systemd: its unit (tools/systemd/remusdbd.service) passes
# systemd-analyze verify without a word; under Type=notify with
# WatchdogSec it says READY=1 once it serves, pings WATCHDOG=1 at half the
# period, says STOPPING=1 on SIGTERM and exits 0.  systemd stands in as a
# datagram socket (the protocol of sd_notify(3)); no VM.  Exit 0 pass, 1
# fail.
set -u
cd "$(dirname "$0")/.."
. tests/lib/common.sh
d=$(mktemp -d)
# the unit, with the binary where this build has it (verify checks it)
sed "s#/usr/sbin/remusdbd#$PWD/${RDB_BUILD:-build}/remusdbd#" \
	tools/systemd/remusdbd.service > "$d/remusdbd.service"
out=$(systemd-analyze verify --man=no "$d/remusdbd.service" 2>&1)
[ -z "$out" ] || rdb_fail "systemd-analyze verify: $out"

trap '[ -n "${pid:-}" ] && kill -9 "$pid" 2>/dev/null; [ -n "${lis:-}" ] && kill "$lis" 2>/dev/null; rm -rf "$d"' EXIT
mkdir -p "$d/run" "$d/state"
python3 - "$d/notify.sock" "$d/notify.log" <<'EOP' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(30)
with open(sys.argv[2], "w", buffering=1) as log:
    log.write("listening\n")
    while True:
        try:
            m = s.recv(4096).decode()
        except socket.timeout:
            break
        for line in m.split("\n"):
            log.write("%.3f %s\n" % (time.monotonic(), line))
        if "STOPPING=1" in m:
            break
EOP
lis=$!
wait_for 5 "the stand-in for systemd" grep -q listening "$d/notify.log" || rdb_fail "no listener"
port=$((20000 + RANDOM % 20000))
NOTIFY_SOCKET=$d/notify.sock WATCHDOG_USEC=200000 "${RDB_BUILD:-build}/remusdbd" \
	-o "listen=127.0.0.1:$port" -o "control_socket=$d/ctl.sock" -o "run_dir=$d/run" \
	-o "state_dir=$d/state" -o link_security=insecure -o log_level=warn \
	2>"$d/remusdbd.log" &
pid=$!
wait_for 10 "READY=1" grep -q "READY=1" "$d/notify.log" ||
	rdb_fail "no READY=1 ($(tail -3 "$d/remusdbd.log"))"
test -S "$d/ctl.sock" || rdb_fail "READY=1 before the control socket was there"
sleep 1
pings=$(grep -c "WATCHDOG=1" "$d/notify.log")
[ "$pings" -ge 6 ] || rdb_fail "$pings WATCHDOG=1 pings in ~1 s with WatchdogSec=0.2 s (want >= 6: every 0.1 s)"
kill -TERM "$pid"
wait_pid 10 "$pid"
rc=$?
pid=
[ "$rc" = 0 ] || rdb_fail "remusdbd exited $rc on SIGTERM"
wait_for 5 "STOPPING=1" grep -q "STOPPING=1" "$d/notify.log" || rdb_fail "no STOPPING=1"
echo "systemd: the unit verifies; READY=1, $pings watchdog pings in ~1 s at WatchdogSec=0.2 s, STOPPING=1, exit 0"
