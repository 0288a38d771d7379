#!/usr/bin/env bash
# The primary's remusdbd dies (SIGKILL) under a PostgreSQL load and is
# restarted: the watchdog drops protection (the guest must not freeze),
# QEMU holds the guest's disk requests (NBD reconnect-delay) and its NIC
# reconnects, the operator attaches the VM to the new daemon — disk and
# network are served again, the guest never sees an I/O error — and
# protects it again.  The ledger's clients keep their connections and no
# acknowledged commit is lost; the protected VM then survives a power pull.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-dr$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
cluster_vm_up 25 || rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg || rdb_fail "PostgreSQL not reachable"

mkdir -p "$CL_DIR/ledger"
clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients 3 \
	--duration 45 --journal "$CL_DIR/ledger" --wait-timeout 30 \
	2>"$CL_DIR/ledger-run.log" &
led=$!
sleep 6
kill -9 "$(cat "$CL_DIR/pri/remusdbd.pid")"
echo "killed the primary's remusdbd"
sleep 2
cl_start_daemon pri || rdb_fail "remusdbd did not restart"
cl_ctl pri attach "$CL_DIR/$CL_VM.conf" || rdb_fail "attach to the new daemon failed"
wait_for 20 "disk reconnected" bash -c "$RDB_BUILD/remusdbctl --socket $CL_DIR/pri/ctl.sock status $CL_VM --json | jq -e .vms[0].disk.client_connected" ||
	rdb_fail "QEMU did not reconnect its disk"
cl_ctl bak wait "$CL_VM" degraded --timeout 15 || rdb_fail "backup did not see the link go"
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "protect on the new daemon refused"
cl_ctl pri wait "$CL_VM" protected --timeout 90 || rdb_fail "not protected again"
echo "protected again by the new daemon"
sleep 5
cluster_pull_power "$run"
pull_ms=$(date +%s%3N)
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 || rdb_fail "no failover"
wait_pid 120 "$led"
clix "$RDB_ROOT/build/workload/ledger" check --host "$CL_GUEST_IP" --clients 3 \
	--journal "$CL_DIR/ledger" --pull-ms "$pull_ms" --json "$CL_DIR/ledger.json" \
	2>"$CL_DIR/ledger-check.log"
cat "$CL_DIR/ledger.json"
jq -e '.lost_commits == 0 and .phantom_txns == 0 and .partial_txns == 0 and
       .broken_connections == 0 and .acked_commits > 0' "$CL_DIR/ledger.json" >/dev/null ||
	rdb_fail "ledger invariants (see $CL_DIR/ledger-check.log, $CL_DIR/ledger-run.log)"
if grep -aiq "I/O error\|EXT4-fs error\|PANIC" "$CL_DIR/pri/console.log"; then
	grep -ai "I/O error\|EXT4-fs error\|PANIC" "$CL_DIR/pri/console.log" | head -3
	rdb_fail "the guest saw disk errors while remusdbd restarted"
fi
echo "PASS: remusdbd killed and restarted under load: disk and network back without an I/O error, protected again, then a power pull; $(jq .acked_commits "$CL_DIR/ledger.json") commits acknowledged, none lost, every connection kept"
