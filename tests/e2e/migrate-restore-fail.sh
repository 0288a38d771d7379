#!/usr/bin/env bash
# A planned switchover whose restore fails on the backup (fault
# injection restore-fail: after its QEMU started, before the handed-over
# epoch is loaded).  The old copy must stay resumable until the new one
# runs: the backup answers TAKEN only once its guest runs, so here it
# gives its claim at the witness back and answers REFUSED, and the old
# primary resumes its stopped guest.  The client's sequence goes on, on
# its one connection, with no gap or repeat; the backup, which gave the
# protection up, says so (ERROR: no failover from it without --force),
# and the old primary runs on, degraded, without a decision (under any
# on_peer_loss; the witness's key is its registration again).  (When
# TAKEN came before the restore, the old primary killed its QEMU at once
# and no copy ran.)
#
# With CL_WITNESS=none CL_ON_PEER_LOSS=manual (migrate-restore-fail-
# manual.sh) the same, with no witness to ask: the backup's ERROR spares
# the old primary a decision that would wait for the operator.  (Without
# it: deciding, the guest paused, an outage until the operator acts.)
#
# MRF_LATE=1 (migrate-restore-fail-late.sh): the restore fails 1 s after
# its guest ran (fault restore-fail-late), as a last step failing after
# QEMU started the guest would.  That guest's frames must not reach the
# wire, since the old copy resumes from the same epoch: a capture on the
# backup's switch port while it runs sees none of the guest's MAC.  (When
# the restored guest's frames went straight out, it saw its announce-self
# and its TCP segments.)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-mf$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
cl_seq_start 60 --mark-window 5
checker=$CL_CHECKER
sleep 3
qemu_pid=$(cat "$CL_DIR/pri/qemu.pid")
late=${MRF_LATE:-0}
cl_ctl bak inject "$CL_VM" "$([ "$late" = 1 ] && echo restore-fail-late || echo restore-fail)" ||
	rdb_fail "fault injection refused"
kill -USR1 "$checker"
cl_ctl pri migrate "$CL_VM" --timeout 60 > "$CL_DIR/migrate.out" 2>&1 &
mig=$!
if [ "$late" = 1 ]; then
	# the restored guest runs now, for 1 s: watch the backup's port
	wait_for 60 "the restored guest running" grep -q "the restored guest runs 1 s" \
		"$CL_DIR/bak/remusdbd.log" || rdb_fail "the fault did not fire"
	ip netns exec "$(netns_name "$run" sw)" "$RDB_ROOT/build/helpers/macwatch" \
		--mac "$CL_GUEST_MAC" --duration 1 port-bak \
		> "$CL_DIR/macwatch-bak.json" 2> "$CL_DIR/macwatch-bak.log" ||
		rdb_fail "macwatch failed ($CL_DIR/macwatch-bak.log)"
	cat "$CL_DIR/macwatch-bak.json"
fi
wait_pid 90 "$mig"
case $? in
0) rdb_fail "migrate succeeded with the backup's restore failing: $(cat "$CL_DIR/migrate.out")" ;;
124) rdb_fail "migrate did not end" ;;
esac
cat "$CL_DIR/migrate.out"
if [ "$late" = 1 ]; then
	jq -e '.ports["port-bak"].frames == 0' "$CL_DIR/macwatch-bak.json" >/dev/null ||
		rdb_fail "the failed restore's guest reached the wire: $(jq -r '.ports["port-bak"].frames' "$CL_DIR/macwatch-bak.json") frames from the backup's port while it ran"
	grep -q "dropped the [0-9]* frame(s) the failed restore's guest sent" "$CL_DIR/bak/remusdbd.log" ||
		rdb_fail "the backup did not say it dropped the restored guest's frames"
fi
grep -q "the backup refused the handover: the restore failed here" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the old primary was not told the restore failed"
cl_ctl bak wait "$CL_VM" failed --timeout 10 || rdb_fail "the backup is not failed"
cl_ctl pri wait "$CL_VM" degraded --timeout 15 ||
	rdb_fail "the old primary did not run on (it is $(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state'))"
kill -0 "$qemu_pid" || rdb_fail "the old primary's QEMU is gone"
if [ "${CL_WITNESS:-etcd}" != none ]; then
	grep -q "the witness's claim is given back" "$CL_DIR/bak/remusdbd.log" ||
		rdb_fail "the backup did not give its claim back"
	cl_witness_get | grep -q "owner=pri " ||
		rdb_fail "the witness does not name pri: $(cl_witness_get)"
fi
grep -q "backup reported: the handover's restore failed here" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the backup did not say it gave the protection up"
cl_ctl bak failover "$CL_VM" > "$CL_DIR/failover.out" 2>&1 &&
	rdb_fail "the backup that gave up failed over without --force: $(cat "$CL_DIR/failover.out")"
sleep 3
kill -INT "$checker" 2>/dev/null
wait_pid 15 "$checker"
cat "$CL_DIR/seqcheck.json"
jq -e "$CL_SEQ_JQ seq_ok" "$CL_DIR/seqcheck.json" >/dev/null ||
	rdb_fail "the client's sequence broke across the failed handover"
echo "PASS: the backup's restore failed$([ "$late" = 1 ] && echo " after its guest ran 1 s (none of its frames on the wire)"), it gave the VM back, the old primary resumed and ran on; the client's sequence went on ($(jq -r '.values' "$CL_DIR/seqcheck.json") values, the longest stall $(jq -r '.max_stall_ms' "$CL_DIR/seqcheck.json") ms)"
