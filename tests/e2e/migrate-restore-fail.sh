#!/usr/bin/env bash
# A planned switchover whose restore fails on the backup (fault
# injection restore-fail: after its QEMU started, before the handed-over
# epoch is loaded).  The old copy must stay resumable until the new one
# runs: the backup answers TAKEN only once its guest runs, so here it
# gives its claim at the witness back and answers REFUSED, and the old
# primary resumes its stopped guest.  The client's sequence goes on, on
# its one connection, with no gap or repeat; then the link closes and
# the old primary wins the decision (the key is the registration again)
# and runs on, degraded.  (When TAKEN came before the restore, the old
# primary killed its QEMU at once and no copy ran.)
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
cl_ctl bak inject "$CL_VM" restore-fail || rdb_fail "fault injection refused"
kill -USR1 "$checker"
cl_ctl pri migrate "$CL_VM" --timeout 60 > "$CL_DIR/migrate.out" 2>&1 &&
	rdb_fail "migrate succeeded with the backup's restore failing: $(cat "$CL_DIR/migrate.out")"
cat "$CL_DIR/migrate.out"
grep -q "the backup refused the handover: the restore failed here" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the old primary was not told the restore failed"
cl_ctl bak wait "$CL_VM" failed --timeout 10 || rdb_fail "the backup is not failed"
cl_ctl pri wait "$CL_VM" degraded --timeout 15 ||
	rdb_fail "the old primary did not run on (it is $(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state'))"
kill -0 "$qemu_pid" || rdb_fail "the old primary's QEMU is gone"
grep -q "the witness's claim is given back" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup did not give its claim back"
cl_witness_get | grep -q "owner=pri state=running" ||
	rdb_fail "the witness does not name pri: $(cl_witness_get)"
sleep 3
kill -INT "$checker" 2>/dev/null
wait_pid 15 "$checker"
cat "$CL_DIR/seqcheck.json"
jq -e "$CL_SEQ_JQ seq_ok" "$CL_DIR/seqcheck.json" >/dev/null ||
	rdb_fail "the client's sequence broke across the failed handover"
echo "PASS: the backup's restore failed, it gave the VM back, the old primary resumed and ran on; the client's sequence went on ($(jq -r '.values' "$CL_DIR/seqcheck.json") values, the longest stall $(jq -r '.max_stall_ms' "$CL_DIR/seqcheck.json") ms)"
