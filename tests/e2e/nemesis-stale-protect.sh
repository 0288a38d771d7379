#!/usr/bin/env bash
# Never two copies through an operator's ordinary steps on both hosts
# (docs/failure-modes.md, I6).  The primary is cut from every network and
# the backup wins and runs the VM; on the survivor the operator protects
# it back to the old host, which is still unreachable: the survivor
# registers the protection at the witness (owner bak, state protected)
# and the protect then fails.  On the cut-off old host the operator
# restarts remusdbd, attaches the VM (its stale guest still runs in its
# QEMU) and, still cut off, protects it from its VM file: the witness
# cannot be asked.  Then the network comes back.
#   - protect on the held stale copy keeps its output held while its
#     registration is pending and after it failed: no frame of it may
#     leave, whatever protect did;
#   - the witness then says bak owns the VM (state protected, not
#     running): any owner other than this host fences, so the stale copy
#     is fenced, never released.
# The guest pings the client every 200 ms, so a copy that is let go
# shows on the switch at once: the guest's MAC must switch hosts once
# (pri, then bak), never back.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

run=${RDB_RUN:-sp$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
nemesis_ping_guest || rdb_fail "guest build failed"
# the cut-off copy runs on with its output held (not paused at the hold
# bound), as a guest does whose host could not reach the witness and
# whose daemon was then restarted
export CL_HOLD_BOUND_MS=600000
cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
nemesis_watch_start 180
sleep 2
netns_isolate "$run" pri
cut_ms=$(date +%s%3N)
echo "cut the primary from every network"
nemesis_wait_state bak failed-over 20 || rdb_fail "the backup did not take over"

# the survivor's operator protects the VM back to the unreachable host
cl_ctl bak protect "$CL_VM" peer=10.78.0.1:7788 ||
	rdb_fail "protect by name refused on the survivor"
back_failed() {
	[ "$(nemesis_state bak)" = unprotected ] &&
		cl_ctl bak status "$CL_VM" --json | jq -r '.vms[0].state_reason' |
		grep -q "protect failed"
}
wait_for 30 "the survivor's protect to fail (its backup unreachable)" back_failed ||
	rdb_fail "bak: $(nemesis_state bak): $(cl_ctl bak status "$CL_VM" --json | jq -r '.vms[0].state_reason')"
cl_witness_get | grep -q "owner=bak state=protected" ||
	rdb_fail "the witness does not hold bak's registration: $(cl_witness_get)"
echo "the survivor's protect failed; the witness holds: $(cl_witness_get)"

# the old host's operator restarts its remusdbd and takes the VM back
kill -9 "$(cat "$CL_DIR/pri/remusdbd.pid")"
cl_start_daemon pri || rdb_fail "remusdbd did not start again"
cl_ctl pri attach "$CL_DIR/$CL_VM.conf" || rdb_fail "attach to the new daemon failed"
held_try() {	# held_try N: the check is at try N or later, holding
	cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason' |
		grep -Eq "held until the witness says who owns the VM \(try ([$1-9]|[1-9][0-9])"
}
wait_for 15 "the attach check asking again" held_try 2 ||
	rdb_fail "the attached copy is not held: $(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason')"
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" ||
	rdb_fail "protect from the VM file refused outright"
prot_failed() {
	cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason' |
		grep -q "held until the witness says who owns the VM"
}
wait_for 15 "the old host's protect to fail with the output still held" prot_failed ||
	rdb_fail "pri: $(nemesis_state pri): $(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason')"
grep -q "protect failed: cannot register" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the old host's protect did not fail at the witness"
# asking on after the failed protect, still holding
wait_for 15 "the check asking on after the failed protect" held_try 4 ||
	rdb_fail "the check does not ask on: $(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason')"
echo "protect on the cut-off old host failed; its output stays held"

netns_reconnect "$run" pri
back_ms=$(date +%s%3N)
echo "the old host is back on the network"
nemesis_wait_state pri fenced 15 || rdb_fail "the stale copy was not fenced"
grep -q "attached, but the witness says bak owns this VM" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the fence does not say why"
# what the stale copy would have sent, had it been let go
sleep 3
nemesis_watch_end
jq -e --argjson cut "$cut_ms" '.ports["port-pri"].last_ms < $cut and
	.ports["port-bak"].frames > 0' "$CL_DIR/macwatch.json" >/dev/null ||
	rdb_fail "the stale copy emitted after the cut (or the survivor never did)"
echo "PASS: the stale copy on the old host stayed held through attach and a failed protect, and was fenced when the witness (owner bak, state protected) answered; its MAC last left it before the cut, $(( back_ms - cut_ms )) ms before it came back"
