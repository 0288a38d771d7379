#!/usr/bin/env bash
# Nemesis 6: the primary's remusdbd stops (SIGSTOP, 3 s) inside a
# checkpoint pause while the PostgreSQL guest's disk is busy: the daemon
# stops at the first disk change it handles in that pause.  QEMU's
# stop-and-copy drains the guest's disk requests under its big lock; the
# disk must be answered without the stopped daemon, or neither the
# watchdog's shutdown of the checkpoint stream nor x-colo-lost-heartbeat
# can free the guest.  The guest's freeze (ticks on its serial console
# every 10 ms) stays within the checkpoint deadline plus the watchdog's
# reaction; stopped past the failover timeout, the primary loses the
# witness's decision to the backup and stops its copy: one copy only, no
# acknowledged commit lost (checks of nemesis.sh).
# check-long: the daemon stopped inside a pause with the PostgreSQL
#   guest's disk busy; make check has the stop inside a pause (stall-
#   watchdog, stall-initial) and the kill (daemon-killed)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

deadline_ms=500
margin_ms=500	# watchdog poll, QMP connect and command, TCG jitter
stop_s=3
export CL_DEADLINE_MS=$deadline_ms
NM_GUEST_RUN="/usr/bin/ticker --interval-ms 10"
NM_TOTAL_S=30
nemesis_start "${RDB_RUN:-ns$$}"
cl_ticks_start 16 || rdb_fail "no ticks from the guest"
sleep 6
cl_ctl pri inject "$CL_VM" stop-in-disk-pause || rdb_fail "inject refused"
CL_DPID=$(cat "$CL_DIR/pri/remusdbd.pid")
wait_for 10 "remusdbd stopped at a disk change inside a pause" \
	sh -c "grep -q '^State:.*T' /proc/$CL_DPID/status" ||
	rdb_fail "the daemon did not stop (no disk change inside a pause in 10 s)"
nemesis_fault_now
echo "remusdbd stopped inside a pause with the guest's disk busy"
sleep $stop_s
kill -CONT "$CL_DPID"
nemesis_wait_state bak failed-over 10 ||
	rdb_fail "the backup did not take over the stalled primary's VM"
nemesis_wait_state pri fenced 10 ||
	rdb_fail "the primary did not stop its copy after the stall (two copies)"
grep -qE "ALARM: (remusdbd silent|the guest stopped for)" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "no watchdog alarm in the daemon's log"
wait_pid 30 "$CL_GAP_PID"
cl_check_freeze $((deadline_ms + margin_ms))
freeze_ok=$?
nemesis_finish daemon-stall
jq --argjson g "$CL_MAX_GAP" --argjson d "$deadline_ms" --argjson s $((stop_s * 1000)) \
	'. + {max_guest_freeze_ms: $g, deadline_ms: $d, daemon_stopped_ms: $s}' \
	"$CL_DIR/result.json" > "$CL_DIR/result2.json" && mv "$CL_DIR/result2.json" "$CL_DIR/result.json"
cat "$CL_DIR/result.json"
[ $freeze_ok -eq 0 ] ||
	rdb_fail "guest frozen ${CL_MAX_GAP} ms (limit $((deadline_ms + margin_ms)) ms) while remusdbd was stopped with the disk busy"
echo "PASS: remusdbd stopped ${stop_s} s in a pause with the disk busy: guest frozen at most ${CL_MAX_GAP} ms, the backup took over, the primary fenced; $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost"
