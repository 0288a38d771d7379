#!/usr/bin/env bash
# The survivor's remusdbd restarted: a PostgreSQL VM under load fails
# over (the primary's power pulled), then the host that runs it now
# stops its remusdbd, first as `systemctl restart` does (SIGTERM), then
# as a crash does (SIGKILL), each time started again with no command.
# The restored guest's QEMU and its replica's disk server outlive the
# daemon, its network does not (the daemon relays it): the new daemon
# re-adopts the VM from the definition the failover recorded (vmdef.h,
# restored), stops the old disk server, serves the replica with its
# written map recording on, relays the NIC again once the witness says
# this host runs the VM.  Then the old primary is repaired and the
# survivor protects the VM back to it by name (a resync of what may
# differ, not the whole disk), the disks are compared byte for byte at a
# quiet point, and the survivor's power is pulled: the VM back on the
# original host.
# Checks: re-adopted each time with no command (status: readopted, its
# output let go), 0 acknowledged commits lost across everything, no
# client connection broken, no I/O error in the guest, the resync a
# resync and smaller than half the full copy, the disks equal.
# Reported: each restart's time from the new daemon's start to the
# output let go, and the clients' longest gap across it.
# Red (RDB_READOPT_RED=1): the failover's definition removed before the
# first restart (re-adoption off): the VM is not known to the new daemon
# and its clients hear nothing.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-rs$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
cluster_vm_up 25 || rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg || rdb_fail "PostgreSQL not reachable"
cl_ctl pri status "$CL_VM" --json > "$CL_DIR/pri-status-first.json"
full_copy=$(jq '.vms[0].disk.initial_copy.bytes' "$CL_DIR/pri-status-first.json")

mkdir -p "$CL_DIR/ledger"
clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients 3 \
	--duration 120 --journal "$CL_DIR/ledger" --wait-timeout 30 \
	2>"$CL_DIR/ledger-run.log" &
led=$!
sleep 6

# 1. the primary's power: the VM runs on bak from now on
cluster_pull_power "$run"
echo "pulled the primary's power under load"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 || rdb_fail "no failover"
def=$CL_DIR/bak/state/$CL_VM/definition.json
wait_for 10 "the restored VM's definition" \
	bash -c "jq -e '.intent == \"restored\"' '$def' >/dev/null 2>&1" ||
	rdb_fail "the failover recorded no restored definition ($def)"
sleep 4

# restart SIG: the survivor's remusdbd stopped by SIG and started again,
# no command typed; sets stop_ms, adopt_ms (from the new daemon's start
# to the VM's output let go)
restart() {
	local pid start_ms n0
	pid=$(cat "$CL_DIR/bak/remusdbd.pid")
	stop_ms=$(date +%s%3N)
	kill -"$1" "$pid"
	wait_for 20 "the survivor's remusdbd to exit" bash -c "! kill -0 $pid" ||
		rdb_fail "remusdbd did not exit on SIG$1"
	echo "stopped the survivor's remusdbd (SIG$1)"
	[ "${RDB_READOPT_RED:-0}" = 1 ] && rm -f "$def"
	n0=$(grep -c "the witness says no other host owns the VM" "$CL_DIR/bak/remusdbd.log")
	cl_start_daemon bak || rdb_fail "the survivor's remusdbd did not start again"
	start_ms=$(date +%s%3N)
	if ! wait_for 30 "the restored VM re-adopted, its output let go" bash -c \
		"[ \$(grep -c 'the witness says no other host owns the VM' '$CL_DIR/bak/remusdbd.log') -gt $n0 ]"; then
		[ "${RDB_READOPT_RED:-0}" = 1 ] &&
			rdb_fail "RED (definition removed): the restored VM was not re-adopted, its network stays cut"
		rdb_fail "SIG$1: the restored VM was not re-adopted (see $CL_DIR/bak/remusdbd.log)"
	fi
	adopt_ms=$(( $(date +%s%3N) - start_ms ))
	# (status exits non-zero: the VM is not protected)
	cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status-$1.json"
	jq -e '.vms[0].readopted == true and .vms[0].role == "primary"' \
		"$CL_DIR/bak-status-$1.json" >/dev/null ||
		rdb_fail "SIG$1: status does not show the VM re-adopted as this host's ($CL_DIR/bak-status-$1.json)"
	grep -q "re-adopting the VM restored here" "$CL_DIR/bak/remusdbd.log" ||
		rdb_fail "SIG$1: the log does not say the restored VM was re-adopted"
	echo "SIG$1: the restored VM re-adopted, its output let go $adopt_ms ms after the new daemon started ($(( $(date +%s%3N) - stop_ms )) ms after the stop)"
}
restart TERM
term_ms=$stop_ms term_adopt=$adopt_ms
sleep 5
restart KILL
kill_ms=$stop_ms kill_adopt=$adopt_ms
# one disk server for the replica: the old one stopped, the new one serves
n=$(grep -c "stopping the restored guest's disk server" "$CL_DIR/bak/remusdbd.log")
[ "$n" -ge 1 ] || rdb_fail "the old daemon's disk server of the replica was not stopped ($n)"
sleep 4

# 2. the old primary repaired: its daemon back (its definition names a
# QEMU that is gone: not re-adopted), then protected to by name
netns_power_restore "$run" pri
wait_for 15 "the repaired host reachable on the replication link" \
	ip netns exec "$(netns_name "$run" bak)" ping -c 1 -W 1 10.78.0.1 ||
	rdb_fail "the repaired host's links did not come back"
cl_start_daemon pri || rdb_fail "the repaired host's remusdbd did not start"
reprot_ms=$(date +%s%3N)
cl_ctl bak protect "$CL_VM" peer=10.78.0.1:7788 || rdb_fail "protect by name refused"
cl_ctl bak wait "$CL_VM" protected --timeout 120 ||
	rdb_fail "the survivor is not protected (see $CL_DIR/bak/remusdbd.log)"
cl_ctl pri wait "$CL_VM" protected --timeout 10 || rdb_fail "the old host is not the backup"
cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status-resync.json"
jq '.vms[0].disk.initial_copy' "$CL_DIR/bak-status-resync.json"
jq -e --argjson full "$full_copy" '.vms[0].disk.initial_copy | .resync == true and .bytes * 2 < $full' \
	"$CL_DIR/bak-status-resync.json" >/dev/null ||
	rdb_fail "protecting back after the restarts copied the whole disk (full copy $full_copy bytes; see $CL_DIR/bak-status-resync.json)"

# 3. the disks at a quiet point
cl_frozen_disks_equal bak "$CL_DIR/bak/run/$CL_VM.serial.sock" \
	"$CL_DIR/bak/state/$CL_VM/console.log" "$CL_DIR/bak/state/$CL_VM/disk.img" \
	"$CL_DIR/pri/$CL_VM.disk.img"
[ "$CL_DISK_EQUAL" = true ] || rdb_fail "the disks differ after the resync"
sleep 4

# 4. the survivor's power: back to the original host
netns_power_pull "$run" bak
pull_ms=$(date +%s%3N)
echo "pulled the survivor's power"
cl_ctl pri wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "the original host did not take the VM back (see $CL_DIR/pri/remusdbd.log)"
wait_pid 200 "$led"

cl_ledger_gap term "$term_ms" "$kill_ms"
cl_ledger_gap kill "$kill_ms" "$reprot_ms"
cl_ledger_verdict "$pull_ms"
cl_no_guest_disk_errors "$CL_DIR/pri/console.log" "$CL_DIR/bak/state/$CL_VM/console.log" \
	"$CL_DIR/pri/state/$CL_VM/console.log"
echo "PASS: the survivor's remusdbd stopped (SIGTERM, then SIGKILL) and started again under load, the restored VM re-adopted each time with no command: output let go $term_adopt ms / $kill_adopt ms after the new daemon's start, the clients' longest gap across each restart $(jq .failover_gap_ms "$CL_DIR/ledger-term.json") ms / $(jq .failover_gap_ms "$CL_DIR/ledger-kill.json") ms; protected back with a resync of $(jq '.vms[0].disk.initial_copy.bytes / 1048576 | floor' "$CL_DIR/bak-status-resync.json") MiB (full copy $((full_copy >> 20)) MiB), disks equal; the survivor's power pulled: $(jq .acked_commits "$CL_DIR/ledger.json") commits acknowledged, none lost, every connection kept, no I/O error"
