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
cl_ticks_start 5 || rdb_fail "no ticks from the guest"
sleep 1
cl_stop_daemon_in_pause || rdb_fail "daemon did not stop in a pause"
kill -9 "$CL_DPID"
wait_pid 15 "$CL_GAP_PID"
wait_for 5 "the watchdog's alarm" \
	grep -q "ALARM: remusdbd exited" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "no alarm after the daemon died"
jq -c . "$CL_DIR/linegap.json"
cl_check_freeze $((deadline_ms + margin_ms)) ||
	rdb_fail "guest frozen ${CL_MAX_GAP} ms (limit $((deadline_ms + margin_ms)) ms)"
# 5 s of 10 ms ticks: most of them must have come after the kill.
[ "$CL_TICKS" -gt 250 ] || rdb_fail "the guest stopped ticking ($CL_TICKS ticks)"
echo "PASS: remusdbd killed inside a pause; guest frozen at most ${CL_MAX_GAP} ms, then ran on"
