#!/usr/bin/env bash
# Nemesis 4b: the primary cut from every network (the backup wins and
# runs), then, still cut off, its remusdbd restarted by an operator
# (SIGKILL, start, attach the VM again), then the network back.  The old
# guest still runs in its QEMU; attached again, its frames would go out
# unheld.  The new daemon asks the witness who owns the VM before any of
# them leave; cut off, it gets no answer and keeps asking, holding (no
# answer is no answer: letting them go would be a guess).  The network
# back, the witness says the backup runs the VM, and this copy is
# fenced: the guest's MAC never comes from the old primary again.
# Checks of nemesis.sh.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

nemesis_start "${RDB_RUN:-nr$$}"
sleep 8
nemesis_fault_now
netns_isolate "$NM_RUN" pri
echo "cut the primary from every network under load"
nemesis_wait_state bak failed-over 10 || rdb_fail "the backup did not take over"
kill -9 "$(cat "$CL_DIR/pri/remusdbd.pid")"
echo "killed the old primary's remusdbd (still cut off)"
# (cl_start_daemon waits until the killed daemon's listen port is free)
cl_start_daemon pri || rdb_fail "remusdbd did not start again"
cl_ctl pri attach "$CL_DIR/$CL_VM.conf" || rdb_fail "attach to the new daemon failed"
echo "the old primary's VM attached again, the host still cut off"
# No answer from the witness: held, asking again (status says so), for
# several of its 500 ms tries; nothing of the guest's leaves meanwhile
# (macwatch would see it once the port is up again).
attach_held_retrying() {
	cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason' |
		grep -q 'held until the witness says who owns the VM (try [3-9]'
}
wait_for 10 "the attach check retrying" attach_held_retrying ||
	rdb_fail "the attached copy is not held asking the witness again: $(nemesis_state pri): $(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason')"
cl_ctl pri unprotect "$CL_VM" >/dev/null 2>&1 &&
	rdb_fail "unprotect (not --force) let the held copy's output go"
netns_reconnect "$NM_RUN" pri
echo "the old primary is back on the network"
nemesis_wait_state pri fenced 10 || rdb_fail "the attached old copy was not fenced"
grep -q "attached, but the witness says bak runs this VM" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the fence does not say why"
nemesis_finish loser-restarted
echo "PASS: the old primary's restarted remusdbd fenced its copy on attach (the witness: bak runs it); $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost; the guest's MAC switched hosts $(jq -r .emitter_switches "$CL_DIR/result.json") time(s)"
