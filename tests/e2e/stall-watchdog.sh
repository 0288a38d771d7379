#!/usr/bin/env bash
# I5, end to end: remusdbd stops (SIGSTOP) while the guest is paused for a
# checkpoint — the worst moment: QEMU waits for our LOADED and has no
# timeout of its own.  The watchdog must drop protection so the guest is
# frozen no longer than the checkpoint deadline (+ its reaction time),
# although the daemon stays stopped for 3 s.  The guest prints a tick every
# 10 ms on its serial port; the host times the ticks.  Stopped past the
# failover timeout, the primary must then find the backup running the VM
# (it won the witness's decision) and stop its own copy (I6).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-st$$}
deadline_ms=${CL_DEADLINE_MS:-500}
stop_s=3
# Reaction: watchdog poll (5 ms) + QMP connect and command + TCG jitter.
margin_ms=500
trap 'cluster_down "$run"' EXIT

rdb_require_root
CL_GUEST_RUN="/usr/bin/ticker --interval-ms 10" CL_DEADLINE_MS=$deadline_ms \
	cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"

cl_ticks_start $((stop_s + 4)) || rdb_fail "no ticks from the guest"
sleep 1
cl_stop_daemon_in_pause || rdb_fail "daemon did not stop in a pause"
sleep $stop_s
kill -CONT "$CL_DPID"
wait_pid 15 "$CL_GAP_PID"
# I6: stopped longer than the failover timeout, the primary lost its
# backup's trust: the backup won the witness's decision and runs; the
# primary, once it runs again, asks too, loses, and stops its guest.
cl_ctl bak wait "$CL_VM" failed-over --timeout 10 ||
	rdb_fail "the backup did not take over the stalled primary's VM"
cl_ctl pri wait "$CL_VM" fenced --timeout 10 ||
	rdb_fail "the primary did not stop its copy after the stall (two copies)"
grep -qE "ALARM: (remusdbd silent|the guest stopped for)" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "no alarm in the daemon's log"
grep -q "protected -> deciding.*watchdog" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the decision does not name the watchdog"
cl_check_freeze $((deadline_ms + margin_ms))
freeze_ok=$?
jq -n --argjson g "$CL_MAX_GAP" --argjson l "$CL_TICKS" --argjson d "$deadline_ms" \
	--argjson s $((stop_s * 1000)) \
	'{max_guest_freeze_ms: $g, ticks: $l, deadline_ms: $d, daemon_stopped_ms: $s}' \
	| tee "$CL_DIR/result.json"
[ $freeze_ok -eq 0 ] ||
	rdb_fail "guest frozen ${CL_MAX_GAP} ms (limit $((deadline_ms + margin_ms)) ms)"
echo "PASS: guest frozen at most ${CL_MAX_GAP} ms while remusdbd was stopped for ${stop_s} s"
