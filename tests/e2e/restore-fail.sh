#!/usr/bin/env bash
# A restore that fails after its QEMU started (fault injection on the
# backup: "restore-fail") must leave no half-restored guest behind: the
# backup's state says failed, and that QEMU is gone.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-rs$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
cl_ctl bak inject "$CL_VM" restore-fail || rdb_fail "fault injection refused"
sleep 2
cluster_pull_power "$run"
cl_ctl bak wait "$CL_VM" failed --timeout 30 ||
	rdb_fail "the backup is $(cl_ctl bak status "$CL_VM" --json | jq -r .vms[0].state), not failed"
grep -q "killed the QEMU of the failed restore" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup's log does not say the half-restored QEMU was killed"
sleep 1
if pgrep -f "$CL_DIR/bak/" | xargs -r ps -o comm= -p 2>/dev/null | grep -q qemu; then
	rdb_fail "a QEMU of the failed restore still runs: $(pgrep -af "$CL_DIR/bak/" | grep qemu)"
fi
echo "PASS: a restore that failed after QEMU started left no guest running ($(grep -o 'killed the QEMU of the failed restore.*' "$CL_DIR/bak/remusdbd.log"))"
