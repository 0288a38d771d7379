#!/usr/bin/env bash
# The two hosts' failure timing is exchanged when protection starts
# (TIMING, docs/protocol.md) and checked by each side:
#   1. the backup's failover_timeout_ms (80) is under twice the primary's
#      heartbeat_ms (50): it would judge the primary silent between two
#      heartbeats.  The backup refuses, protect fails, and both logs and
#      the VM's state say why;
#   2. the backup's failover_timeout_ms (3000) differs from the primary's
#      (1000): protected, and each log warns, naming both values; and
#      `remusdbctl status --cluster` shows the witness's key for the VM,
#      owned by the primary, protected there and on both hosts.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-tm$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root

# bak_timeout MS: the backup's remusdbd again, with that failover_timeout_ms
bak_timeout() {
	local pid
	pid=$(cat "$CL_DIR/bak/remusdbd.pid")
	kill -TERM "$pid"
	wait_for 10 "the backup's remusdbd to exit" bash -c "! kill -0 $pid" || return 1
	sed -i "s/^failover_timeout_ms = .*/failover_timeout_ms = $1/" "$CL_DIR/bak/remusdbd.conf"
	grep -q "^failover_timeout_ms = $1\$" "$CL_DIR/bak/remusdbd.conf" || return 1
	cl_start_daemon bak
}

cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
grep -q "^heartbeat_ms = 50$" "$CL_DIR/pri/remusdbd.conf" ||
	rdb_fail "the harness's heartbeat_ms is not 50 (this test assumes it)"
CL_NO_PROTECT=1 cluster_vm_up 25 || rdb_fail "the VM did not come up (logs in $CL_DIR)"

# ---- 1: refused ----
bak_timeout 80 || rdb_fail "1: the backup's remusdbd did not restart"
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" >/dev/null || rdb_fail "1: protect request refused"
if cl_ctl pri wait "$CL_VM" protected --timeout 30 2>"$CL_DIR/wait1.err"; then
	rdb_fail "1: protected though the backup would judge the primary silent between heartbeats"
fi
grep -q "timing refused: the primary's heartbeat_ms 50 is over half this host's failover_timeout_ms 80" \
	"$CL_DIR/bak/remusdbd.log" || rdb_fail "1: the backup's log does not say why"
grep -q "timing refused: the primary's heartbeat_ms 50" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "1: the primary's log does not carry the backup's reason"
st=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0] | "\(.state): \(.state_reason)"')
case $st in *"timing refused"*) ;; *) rdb_fail "1: the VM's state does not say why: $st" ;; esac
echo "1: refused: $st"

# ---- 2: a warning ----
bak_timeout 3000 || rdb_fail "2: the backup's remusdbd did not restart"
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" --wait=90 ||
	rdb_fail "2: not protected with another, safe, failover_timeout_ms"
cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "2: the backup is not protected"
grep -q "WARN.*timing: the primary's failover_timeout_ms = 1000, this host's 3000" \
	"$CL_DIR/bak/remusdbd.log" || rdb_fail "2: no warning in the backup's log"
grep -q "WARN.*timing: the backup's failover_timeout_ms = 3000, this host's 1000" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "2: no warning in the primary's log"
# the cluster's view: the witness's key for the VM, owned by the
# primary, protected there and here (remusdbctl status --cluster, run
# on the host: the witness is reached from its namespace)
ctl_ns() {
	local side=$1
	shift
	_nsx "$run" "$side" "$RDB_BUILD/remusdbctl" --socket "$CL_DIR/$side/ctl.sock" \
		-c "$CL_DIR/$side/remusdbd.conf" "$@"
}
ctl_ns pri status --cluster --json > "$CL_DIR/cluster.json" 2>"$CL_DIR/cluster.err" ||
	rdb_fail "status --cluster: not every VM protected: $(cat "$CL_DIR/cluster.json" "$CL_DIR/cluster.err")"
jq -e --arg vm "$CL_VM" '.daemon_answered and ([.vms[] | select(.name == $vm and
	.owner == "pri" and .state == "protected" and .here.state == "protected" and
	.here.role == "primary")] | length == 1)' "$CL_DIR/cluster.json" >/dev/null ||
	rdb_fail "status --cluster does not show $CL_VM owned by pri, protected: $(jq -c . "$CL_DIR/cluster.json")"
ctl_ns bak status --cluster || rdb_fail "status --cluster on the backup's host: not 0"
echo "PASS: a backup that would judge the primary silent between heartbeats refuses it (both logs, the VM's state, say why); different silence limits protect with a warning on both hosts"
