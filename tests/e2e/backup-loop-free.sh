#!/usr/bin/env bash
# One backup for two primaries (NETNS_PR2: vm1 on pri, vm2 on pr2).  The
# backup's disk is slow for vm1: its next epoch's replica writes and sync
# start 3 s late (fault injection slow-replica), and vm1's primary loses
# power inside that stall.  The backup notices vm1's primary gone, wins
# the decision, and must wait for that disk step before it restores (its
# replica writes cannot be taken back) — but on its thread, never on the
# event loop that serves every other VM: vm2 stays protected on both
# hosts, its heartbeats and acknowledgements flowing, and the backup's
# control socket answers throughout.  vm1 then fails over once the step
# is done.  (Joining the disk thread on the loop there held it ~2 s: vm2's
# primary dropped protection, "backup silent".)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

run=${RDB_RUN:-lf$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
rdb_build_guest
nemesis_ping_guest --module virtio_blk || rdb_fail "guest build failed"
ping_guest=$CL_GUEST
export CL_RAM_MB=128
NETNS_PR2=1 cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
nemesis_blank_disk 64 || rdb_fail "no disk image"
CL_GUEST=$ping_guest cluster_vm_up 25 || rdb_fail "vm1 setup failed (logs in $CL_DIR)"
unset CL_DISK_IMAGE
CL_PRI=pr2 CL_VM=vm2 CL_GUEST=$RDB_ROOT/build/guest CL_GUEST_RUN="/usr/bin/seqsrv --port $CL_SEQ_PORT" \
	CL_GUEST_IP=10.77.0.101 CL_GUEST_MAC=52:54:00:52:44:02 CL_TAP=vmtap1 \
	cluster_vm_up 25 || rdb_fail "vm2 setup failed (logs in $CL_DIR)"
vm2() { cl_ctl "$1" status vm2 --json | jq -c '.vms[0] | {state, transitions, committed_epoch}'; }
before=$(vm2 pr2)
sleep 2
cl_ctl bak inject vm1 slow-replica || rdb_fail "fault injection refused"
t0=$(date +%s%3N)
sleep 0.3
netns_power_pull "$run" pri
echo "pulled vm1's primary's power inside the backup's 3 s disk stall"
# the backup's control socket while vm1's disk step runs: every answer
# within a second (on the loop: blocked until the step ended)
worst=0
while [ $(( $(date +%s%3N) - t0 )) -lt 4000 ]; do
	a=$(date +%s%3N)
	# answered: exit 0 (protected) or 1 (not); 124 is timeout's
	timeout 5 "$RDB_BUILD/remusdbctl" --socket "$CL_DIR/bak/ctl.sock" status vm2 --json >/dev/null
	[ $? -le 1 ] || rdb_fail "the backup's control socket did not answer"
	b=$(date +%s%3N)
	[ $((b - a)) -gt "$worst" ] && worst=$((b - a))
	sleep 0.1
done
echo "the backup's status answered within $worst ms at worst during the stall"
cl_ctl bak wait vm1 failed-over --timeout 30 || rdb_fail "vm1 did not fail over"
t1=$(date +%s%3N)
after=$(vm2 pr2)
echo "vm1 failed over $((t1 - t0)) ms after the injection"
echo "vm2 on pr2 before: $before"
echo "vm2 on pr2 after:  $after"
jq -n -e --argjson a "$before" --argjson b "$after" '
	$b.state == "protected" and $b.transitions == $a.transitions and
	$b.committed_epoch > $a.committed_epoch' >/dev/null ||
	rdb_fail "vm2 did not stay protected while the backup waited for vm1's disk: $(cl_ctl pr2 status vm2 --json | jq -r '.vms[0].state_reason')"
[ "$(cl_ctl bak status vm2 --json | jq -r '.vms[0].state')" = protected ] ||
	rdb_fail "vm2 is not protected on the backup"
grep -q "the failover waits for the last epoch's replica writes and sync" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the failover did not wait for the disk step (was the pull inside the stall?)"
[ "$worst" -lt 1000 ] || rdb_fail "the backup's control socket took $worst ms to answer"
echo "PASS: the backup waited for vm1's disk step off its loop ($((t1 - t0)) ms to vm1's failover), vm2 stayed protected, status answered within $worst ms"
