#!/usr/bin/env bash
# Two protected VMs on the same pair of daemons: one remusdbd per host
# serves every VM on it.  Both guests stream to the client; the primary
# loses power; both must come back on the backup, each on its own TCP
# connection, each sequence contiguous.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-tv$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
export CL_RAM_MB=128
cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
CL_VM=vm1 CL_GUEST_IP=10.77.0.100 CL_GUEST_MAC=52:54:00:52:44:01 CL_TAP=vmtap0 \
	cluster_vm_up 25 || rdb_fail "vm1 setup failed (logs in $CL_DIR)"
CL_VM=vm2 CL_GUEST_IP=10.77.0.101 CL_GUEST_MAC=52:54:00:52:44:02 CL_TAP=vmtap1 \
	cluster_vm_up 25 || rdb_fail "vm2 setup failed (logs in $CL_DIR)"

pids=()
for ip in 10.77.0.100 10.77.0.101; do
	ip netns exec "$(netns_name "$run" cli)" "$RDB_HELPERS/seqcheck" \
		--host "$ip" --port "$CL_SEQ_PORT" --duration 60 \
		--connect-timeout 20 --stall-timeout 20 \
		>"$CL_DIR/seq-$ip.json" 2>"$CL_DIR/seq-$ip.log" &
	pids+=($!)
done
for ip in 10.77.0.100 10.77.0.101; do
	wait_for 20 "values from $ip" grep -q '^first ' "$CL_DIR/seq-$ip.log" ||
		rdb_fail "client got nothing from $ip"
done
sleep 3
cluster_pull_power "$run"
for p in "${pids[@]}"; do kill -USR1 "$p"; done
for vm in vm1 vm2; do
	cl_ctl bak wait "$vm" failed-over --timeout 30 ||
		rdb_fail "$vm did not fail over (see $CL_DIR/bak/remusdbd.log)"
done
sleep 6
for p in "${pids[@]}"; do kill -INT "$p"; done
for p in "${pids[@]}"; do wait_pid 15 "$p"; done
cl_ctl bak status
ok=true
for ip in 10.77.0.100 10.77.0.101; do
	jq -c --arg ip "$ip" '{ip: $ip, values, gaps, dups, regressions, corrupt,
		connection_lost, outage_ms: (.marks[0].next_ms // -1), values_after_stall}' \
		"$CL_DIR/seq-$ip.json"
	jq -e '.gaps == 0 and .dups == 0 and .regressions == 0 and .corrupt == 0
	       and (.connection_lost | not) and .values_after_stall > 0
	       and (.marks[0].next_ms // -1) >= 0' "$CL_DIR/seq-$ip.json" >/dev/null || ok=false
done
$ok || rdb_fail "a guest's sequence broke across the failover"
echo "PASS: two VMs on one daemon pair, both failed over with contiguous sequences"
