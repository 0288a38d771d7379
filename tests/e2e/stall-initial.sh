#!/usr/bin/env bash
# I5 at protection start: QEMU stops the guest to send the last of the
# initial state (epoch 0) and then waits for remusdbd to take it, with no
# timeout of its own.  remusdbd works on for 400 ms after the guest
# stopped (as a daemon slow to take that last part does: it still beats),
# then stops (SIGSTOP) right there for 3 s.  The watchdog, armed before
# QEMU connects its stream, must free the guest within the checkpoint
# deadline of the guest's stop (+ its reaction time), not the deadline of
# the daemon's last beat: counted from the beat, the guest would wait
# 400 + 500 ms and more.  No checkpoint was committed, so the backup has
# nothing to run: the primary's copy stays the only one and runs on,
# degraded, with the watchdog named as the reason.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-si$$}
deadline_ms=${CL_DEADLINE_MS:-500}
stop_s=3
# Reaction: watchdog poll (5 ms), a quarter of the deadline without a beat
# after it (the daemon stalls 400 ms after the stop: it trips at ~525),
# QMP and TCG jitter.  The bound counted from the beat would be >= 900.
margin_ms=300
trap 'cluster_down "$run"' EXIT

rdb_require_root
CL_GUEST_RUN="/usr/bin/ticker --interval-ms 10" CL_DEADLINE_MS=$deadline_ms \
	CL_ATTACH=1 CL_NO_PROTECT=1 cluster_up "$run" 25 ||
	rdb_fail "setup failed (logs in $CL_DIR)"

cl_ticks_start $((stop_s + 8)) || rdb_fail "no ticks from the guest"
sleep 1
cl_ctl pri inject "$CL_VM" stop-late-in-initial-state || rdb_fail "inject refused"
CL_DPID=$(cat "$CL_DIR/pri/remusdbd.pid")
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "protect refused"
wait_for 60 "remusdbd stopped at the initial state" \
	sh -c "grep -q '^State:.*T' /proc/$CL_DPID/status" ||
	rdb_fail "the daemon did not stop at the initial state"
sleep $stop_s
kill -CONT "$CL_DPID"
wait_pid 20 "$CL_GAP_PID"
cl_check_freeze $((deadline_ms + margin_ms))
freeze_ok=$?
jq -n --argjson g "$CL_MAX_GAP" --argjson l "$CL_TICKS" --argjson d "$deadline_ms" \
	--argjson s $((stop_s * 1000)) \
	'{max_guest_freeze_ms: $g, ticks: $l, deadline_ms: $d, daemon_stopped_ms: $s}' \
	| tee "$CL_DIR/result.json"
[ $freeze_ok -eq 0 ] ||
	rdb_fail "guest frozen ${CL_MAX_GAP} ms (limit $((deadline_ms + margin_ms)) ms)"
cl_ctl pri wait "$CL_VM" degraded --timeout 10 ||
	rdb_fail "the primary did not drop protection after the stall"
reason=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason')
echo "primary: $reason"
case $reason in *watchdog*) ;; *) rdb_fail "the reason does not name the watchdog" ;; esac
grep -q "ALARM: the guest stopped for" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "no alarm for the guest's stop in the daemon's log"
# I6: the backup never committed a checkpoint; it must not run the VM.
bst=$(cl_ctl bak status "$CL_VM" --json | jq -r '.vms[0].state // "gone"')
echo "backup: $bst"
case $bst in failing-over|failed-over) rdb_fail "the backup runs a VM it has no state of" ;; esac
echo "PASS: guest frozen at most ${CL_MAX_GAP} ms while remusdbd was stopped for ${stop_s} s at the initial state"
