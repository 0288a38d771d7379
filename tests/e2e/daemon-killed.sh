#!/usr/bin/env bash
# I5 for a dead daemon: remusdbd is SIGKILLed while the guest is paused
# for a checkpoint (it stopped itself there by fault injection, then is
# killed).  Its watchdog outlives it, drops protection, and the guest runs
# on: frozen no longer than the checkpoint deadline, ticking afterwards.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-dk$$}
deadline_ms=${CL_DEADLINE_MS:-500}
margin_ms=500
trap 'cluster_down "$run"' EXIT

rdb_require_root
CL_GUEST_RUN="/usr/bin/ticker --interval-ms 10" CL_DEADLINE_MS=$deadline_ms \
	cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
"$RDB_HELPERS/linegap" --socket "$CL_DIR/pri/serial.sock" --start "tick " \
	--duration 5 >"$CL_DIR/linegap.json" 2>"$CL_DIR/linegap.log" &
gap=$!
wait_for 20 "ticks on the serial console" grep -q started "$CL_DIR/linegap.log" ||
	rdb_fail "no ticks from the guest"
sleep 1
cl_ctl pri inject "$CL_VM" stop-in-pause || rdb_fail "fault injection refused"
dpid=$(cat "$CL_DIR/pri/remusdbd.pid")
wait_for 5 "remusdbd stopped inside a pause" \
	sh -c "grep -q '^State:.*T' /proc/$dpid/status" || rdb_fail "daemon did not stop"
kill -9 "$dpid"
wait_pid 15 "$gap"
wait_for 5 "the watchdog's alarm" \
	grep -q "ALARM: remusdbd exited" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "no alarm after the daemon died"
max_gap=$(jq -r .max_gap_ms "$CL_DIR/linegap.json")
lines=$(jq -r .lines "$CL_DIR/linegap.json")
jq -c . "$CL_DIR/linegap.json"
# 5 s of 10 ms ticks: most of them must have come after the kill.
[ "$lines" -gt 250 ] || rdb_fail "the guest stopped ticking ($lines ticks)"
awk -v g="$max_gap" -v lim=$((deadline_ms + margin_ms)) 'BEGIN { exit !(g > 0 && g <= lim) }' ||
	rdb_fail "guest frozen ${max_gap} ms (limit $((deadline_ms + margin_ms)) ms)"
echo "PASS: remusdbd killed inside a pause; guest frozen at most ${max_gap} ms, then ran on"
