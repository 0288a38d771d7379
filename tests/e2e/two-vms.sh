#!/usr/bin/env bash
# Two protected VMs on the same pair of daemons: one remusdbd per host
# serves every VM on it.  Both guests stream to the client; the primary
# loses power; both must come back on the backup, each on its own TCP
# connection, each sequence contiguous.  Both daemons' metrics files,
# with two VMs in them, pass promtool's lint and a real scrape through
# node_exporter's textfile collector, and say what status says.  Before that, vm2's QEMU is
# silent on QMP while its protection starts: vm1 must not notice.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/metrics.sh"

run=${RDB_RUN:-tv$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
export CL_RAM_MB=128
cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
CL_VM=vm1 CL_GUEST_IP=10.77.0.100 CL_GUEST_MAC=52:54:00:52:44:01 CL_TAP=vmtap0 \
	cluster_vm_up 25 || rdb_fail "vm1 setup failed (logs in $CL_DIR)"
CL_VM=vm2 CL_GUEST_IP=10.77.0.101 CL_GUEST_MAC=52:54:00:52:44:02 CL_TAP=vmtap1 \
	CL_NO_PROTECT=1 cluster_vm_up 25 || rdb_fail "vm2 setup failed (logs in $CL_DIR)"

# One VM's QEMU that does not answer QMP while its protection starts
# (stopped here; busy or swapping in real life) must not stall the daemon
# that checkpoints the other: starting COLO waits on a thread, and vm1
# keeps its checkpoints, its deadline and its state all the while.
vm1() { cl_ctl pri status vm1 --json | jq -c '.vms[0] | {state, transitions,
	checkpoints, watchdog_trips, deadline_misses}'; }
before=$(vm1)
qemu2=$(cat "$CL_DIR/pri/vm2.qemu.pid")
kill -STOP "$qemu2"
t0=$(date +%s%N)
cl_ctl pri protect "$CL_DIR/vm2.conf" || rdb_fail "protect vm2 was refused"
cl_ctl pri wait vm2 unprotected --timeout 20 ||
	rdb_fail "vm2's protection did not give up on a silent QMP"
t1=$(date +%s%N)
kill -CONT "$qemu2"
after=$(vm1)
reason=$(cl_ctl pri status vm2 --json | jq -r '.vms[0].state_reason')
echo "vm2 with its QEMU stopped: $reason, after $(( (t1 - t0) / 1000000 )) ms"
echo "vm1 before: $before"
echo "vm1 after:  $after"
case $reason in *"starting checkpoints"*) ;;
	*) rdb_fail "vm2 failed for another reason than its silent QMP" ;; esac
jq -n -e --argjson a "$before" --argjson b "$after" --argjson ms $(( (t1 - t0) / 1000000 )) '
	$b.state == "protected" and $b.transitions == $a.transitions and
	$b.watchdog_trips == 0 and $b.deadline_misses == $a.deadline_misses and
	($b.checkpoints - $a.checkpoints) >= ($ms / 25 / 2)' >/dev/null ||
	rdb_fail "vm1 was disturbed while vm2's QMP was silent"
cl_ctl pri protect "$CL_DIR/vm2.conf" || rdb_fail "protect vm2 was refused"
cl_ctl pri wait vm2 protected --timeout 90 || rdb_fail "vm2 not protected"
cl_ctl bak wait vm2 protected --timeout 10 || rdb_fail "vm2 not protected on the backup"

# The metrics files (rewritten every second) with both VMs protected.
mval() { metrics_value "$CL_DIR/$1/scrape.txt" "${@:2}"; }
sleep 2
for side in pri bak; do
	metrics_lint "$CL_DIR/$side/metrics.prom" || rdb_fail "the $side metrics file fails promtool's lint"
	metrics_scrape "$(netns_name "$run" "$side")" "$CL_DIR/$side/metrics.prom" \
		"$CL_DIR/$side/scrape.txt" || rdb_fail "node_exporter did not serve the $side metrics file"
done
[ "$(mval pri remusdb_vms role=primary)" = 2 ] || rdb_fail "the primary's metrics do not count two VMs"
for vm in vm1 vm2; do
	[ "$(mval pri remusdb_vm_state vm=$vm role=primary state=protected)" = 1 ] &&
	[ "$(mval pri remusdb_vm_state vm=$vm role=primary state=protecting)" = 0 ] &&
	[ "$(mval bak remusdb_vm_state vm=$vm role=backup state=protected)" = 1 ] &&
	[ "$(mval bak remusdb_peer_link_up vm=$vm role=backup)" = 1 ] ||
		rdb_fail "the metrics do not show $vm protected on both hosts"
	n=$(mval pri remusdb_checkpoints_total vm=$vm role=primary)
	c=$(mval pri remusdb_checkpoint_pause_seconds_count vm=$vm role=primary)
	s=$(cl_ctl pri status "$vm" --json | jq '.vms[0].checkpoints')
	echo "metrics: $vm checkpoints_total $n, pauses $c; status now $s"
	# the file is at most a second (40 checkpoints) older than status
	[ "${n:-0}" -gt 0 ] && [ "$n" -le "$s" ] && [ "$(( s - n ))" -le 200 ] &&
		[ "${c:-0}" -gt 0 ] || rdb_fail "$vm's checkpoint counts in the metrics disagree with status"
done

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
# the backup's metrics after the failover: both VMs failed over
sleep 2
metrics_lint "$CL_DIR/bak/metrics.prom" || rdb_fail "the backup's metrics file fails promtool's lint after the failover"
metrics_scrape "$(netns_name "$run" bak)" "$CL_DIR/bak/metrics.prom" "$CL_DIR/bak/scrape.txt" ||
	rdb_fail "node_exporter did not serve the backup's metrics file after the failover"
for vm in vm1 vm2; do
	[ "$(mval bak remusdb_vm_state vm=$vm role=backup state=failed-over)" = 1 ] &&
	[ "$(mval bak remusdb_vm_state_transitions_total vm=$vm role=backup state=failed-over)" = 1 ] ||
		rdb_fail "the backup's metrics do not show $vm failed over"
	f=$(mval bak remusdb_failover_seconds vm=$vm role=backup)
	echo "metrics: $vm failover_seconds $f"
	awk -v f="${f:-0}" 'BEGIN { exit !(f > 0 && f < 30) }' ||
		rdb_fail "$vm's failover time is not in the backup's metrics"
done
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
