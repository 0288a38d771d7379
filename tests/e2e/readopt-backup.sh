#!/usr/bin/env bash
# The backup's remusdbd is stopped under a PostgreSQL load, first as
# `systemctl restart` does (SIGTERM), then as a crash does (SIGKILL), and
# each time started again, and nobody types a command.  Its host closed
# the replication link: the primary drops protection (the failover
# decision, which it wins: the backup never claimed), its guest runs on
# degraded, and it protects the VM to the new daemon again on its own
# (auto_reprotect_s, primary_auto.c).  Checked: protected again on both
# hosts with no command, the primary's log and status say it did it on
# its own, the ledger's clients keep their connections and lose no
# acknowledged commit, and the protected VM then survives a power pull
# of the primary.  Reported: for each restart, the time from the new
# daemon's start to protected, and the clients' longest gap across it
# (issue 29's goals: 10 s, 1 s).  Red with auto_reprotect_s = 0
# (RDB_READOPT_RED=1 runs it so, and expects no protection).
# The protection again resyncs: the backup's replica, whole at an epoch
# of the lost protection, is the base, and the primary sends the extents
# of its activity log (kept since the link went) — not the whole disk,
# after the SIGTERM (a SIGKILL may land inside an epoch's apply: then a
# full copy is right).  Then the backup's daemon killed inside an apply
# (fault injection kill-in-apply): its torn replica must be copied whole
# (red with the replica marker's check off: the torn replica taken as a
# base).  The disks are compared at a quiet point (the guest's
# filesystem frozen) before the power pull.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-rb$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
[ "${RDB_READOPT_RED:-0}" = 1 ] && export CL_DAEMON_EXTRA="auto_reprotect_s = 0"
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
cluster_vm_up 25 || rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg || rdb_fail "PostgreSQL not reachable"
full_copy=$(cl_ctl pri status "$CL_VM" --json | jq '.vms[0].disk.initial_copy.bytes')

mkdir -p "$CL_DIR/ledger"
clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients 3 \
	--duration 150 --journal "$CL_DIR/ledger" --wait-timeout 30 \
	2>"$CL_DIR/ledger-run.log" &
led=$!
sleep 6
# restart SIG: the backup's remusdbd stopped by SIG (TERM: systemctl
# restart; KILL: a crash) and started again, no command typed; sets
# stop_ms, prot_ms (from the new daemon's start to protected)
restart() {
	local pid start_ms t
	pid=$(cat "$CL_DIR/bak/remusdbd.pid")
	stop_ms=$(date +%s%3N)
	if [ "$1" = TORN ]; then
		cl_ctl bak inject "$CL_VM" kill-in-apply || rdb_fail "fault injection refused"
	else
		kill -"$1" "$pid"
	fi
	wait_for 20 "the backup's remusdbd to exit" bash -c "! kill -0 $pid" ||
		rdb_fail "remusdbd did not exit on SIG$1"
	echo "stopped the backup's remusdbd (SIG$1)"
	cl_start_daemon bak || rdb_fail "the backup's remusdbd did not start again"
	start_ms=$(date +%s%3N)
	if [ "${RDB_READOPT_RED:-0}" = 1 ]; then
		sleep 15
		t=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state')
		[ "$t" = protected ] && rdb_fail "RED: protected again with auto_reprotect_s = 0"
		rdb_fail "the VM was not protected again with no command (auto_reprotect_s = 0: $t, as expected of the red run)"
	fi
	cl_ctl pri wait "$CL_VM" protected --timeout 60 ||
		rdb_fail "SIG$1: not protected again on its own (see $CL_DIR/pri/remusdbd.log)"
	prot_ms=$(( $(date +%s%3N) - start_ms ))
	cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "SIG$1: the backup is not protected"
	echo "SIG$1: protected again $prot_ms ms after the backup's new daemon started ($(( $(date +%s%3N) - stop_ms )) ms after the stop)"
	cl_ctl pri status "$CL_VM" --json > "$CL_DIR/pri-status-$1.json"
	jq -c '.vms[0].disk.initial_copy' "$CL_DIR/pri-status-$1.json"
	resync=$(jq -r '.vms[0].disk.initial_copy.resync' "$CL_DIR/pri-status-$1.json")
	copied=$(jq -r '.vms[0].disk.initial_copy.bytes' "$CL_DIR/pri-status-$1.json")
}
restart TERM
term_ms=$stop_ms term_prot=$prot_ms
[ "$resync" = true ] && [ $((copied * 2)) -lt "$full_copy" ] ||
	rdb_fail "protecting again after the backup's SIGTERM copied $copied bytes (resync $resync; full copy $full_copy): its replica was no base"
term_copy=$copied
sleep 5
restart KILL
kill_ms=$stop_ms kill_prot=$prot_ms kill_copy="$copied bytes, resync $resync"
if [ "$resync" != true ]; then
	grep -q "being written when remusdbd stopped" "$CL_DIR/bak/remusdbd.log" ||
		rdb_fail "after the SIGKILL the whole disk was copied, and the backup does not say its replica was torn"
fi
sleep 3
restart TORN
torn_ms=$stop_ms
[ "$resync" = false ] ||
	rdb_fail "RED: the backup's replica, torn by a kill inside an apply, was taken as the base of a resync ($copied bytes)"
sleep 3
cl_frozen_disks_equal pri "$CL_DIR/pri/serial.sock" "$CL_DIR/pri/console.log" \
	"$CL_DIR/pri/$CL_VM.disk.img" "$CL_DIR/bak/state/$CL_VM/disk.img"
[ "$CL_DISK_EQUAL" = true ] || rdb_fail "the primary's disk and the backup's replica differ after the resyncs"

n=$(grep -c "protected again on its own" "$CL_DIR/pri/remusdbd.log")
[ "$n" -ge 2 ] || rdb_fail "the primary's log does not say twice that it protected the VM again on its own ($n)"
cl_ctl pri status "$CL_VM" --json | jq -e '.vms[0].protect_pending == false' >/dev/null ||
	rdb_fail "protect still pending on a protected VM"
sleep 5
cluster_pull_power "$run"
pull_ms=$(date +%s%3N)
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 || rdb_fail "no failover"
wait_pid 190 "$led"
# each restart's gap: the longest that began within 1 s before its stop
# and ended before the next event (the other restart, the power pull)
cl_ledger_gap term "$term_ms" "$kill_ms"
cl_ledger_gap kill "$kill_ms" "$torn_ms"
cl_ledger_verdict "$pull_ms"
cl_no_guest_disk_errors "$CL_DIR/pri/console.log"
echo "PASS: the backup's remusdbd stopped (SIGTERM, then SIGKILL) and started again under load, the primary protected the VM to it again on its own each time: $term_prot ms / $kill_prot ms after the new daemon's start, the clients' longest gap across each restart $(jq .failover_gap_ms "$CL_DIR/ledger-term.json") ms / $(jq .failover_gap_ms "$CL_DIR/ledger-kill.json") ms; protected again by a resync of $((term_copy >> 20)) MiB after the SIGTERM ($kill_copy after the SIGKILL; the whole disk $((full_copy >> 20)) MiB), a replica torn inside an apply copied whole, the disks equal; then a power pull: $(jq .acked_commits "$CL_DIR/ledger.json") commits acknowledged, none lost, every connection kept, no I/O error"
