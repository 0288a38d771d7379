#!/usr/bin/env bash
# I5, end to end: remusdbd stops (SIGSTOP) while the guest is paused for a
# checkpoint — the worst moment: QEMU waits for our LOADED and has no
# timeout of its own.  The watchdog must drop protection so the guest is
# frozen no longer than the checkpoint deadline (+ its reaction time),
# although the daemon stays stopped for 3 s.  The guest prints a tick every
# 10 ms on its serial port; the host times the ticks.
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

"$RDB_HELPERS/linegap" --socket "$CL_DIR/pri/serial.sock" --start "tick " \
	--duration $((stop_s + 4)) >"$CL_DIR/linegap.json" 2>"$CL_DIR/linegap.log" &
gap=$!
wait_for 20 "ticks on the serial console" grep -q started "$CL_DIR/linegap.log" ||
	rdb_fail "no ticks from the guest"
sleep 1
cl_ctl pri inject "$CL_VM" stop-in-pause || rdb_fail "fault injection refused"
# `ip netns exec` execs the daemon: the recorded pid is the daemon's.
dpid=$(cat "$CL_DIR/pri/remusdbd.pid")
wait_for 5 "remusdbd stopped inside a pause" \
	sh -c "grep -q '^State:.*T' /proc/$dpid/status" || rdb_fail "daemon did not stop"
stopped_at=$(date +%s%N)
sleep $stop_s
kill -CONT "$dpid"
wait_pid 15 "$gap"
cl_ctl pri wait "$CL_VM" degraded --timeout 10 ||
	rdb_fail "VM not degraded after the watchdog tripped"
max_gap=$(jq -r .max_gap_ms "$CL_DIR/linegap.json")
lines=$(jq -r .lines "$CL_DIR/linegap.json")
grep -q "ALARM: remusdbd silent" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "no alarm in the daemon's log"
grep -q "protected -> degraded.*watchdog" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the degraded state does not name the watchdog"
jq -n --argjson g "$max_gap" --argjson l "$lines" --argjson d "$deadline_ms" \
	--argjson s $((stop_s * 1000)) \
	'{max_guest_freeze_ms: $g, ticks: $l, deadline_ms: $d, daemon_stopped_ms: $s}' \
	| tee "$CL_DIR/result.json"
awk -v g="$max_gap" -v lim=$((deadline_ms + margin_ms)) 'BEGIN { exit !(g > 0 && g <= lim) }' ||
	rdb_fail "guest frozen ${max_gap} ms (limit $((deadline_ms + margin_ms)) ms)"
echo "PASS: guest frozen at most ${max_gap} ms while remusdbd was stopped for ${stop_s} s"
