#!/usr/bin/env bash
# Fail over and back (issue 12): PostgreSQL under the ledger workload and
# pgbench on a protected VM with a disk.  The primary's image sits on
# crashfs (tests/crashfs): what it did not fdatasync is lost with its
# power, as a disk's volatile cache is — under protection the primary
# syncs its image only for its activity log, so the writes lost are
# exactly what the log must name for the resync.
#   1. the primary's power is pulled (crashfs too); the backup runs the VM;
#   2. the old primary is "repaired": its namespace and daemon come back
#      with its old disk image; attaching the VM there is refused (the
#      witness says the backup runs it: the copy is fenced);
#   3. the survivor protects the VM back to it (remusdbctl protect vm1
#      peer=...): a resync of only what may differ;
#   4. the two disks are compared byte for byte at a quiet point (the
#      guest's filesystem frozen);
#   5. the survivor's power is pulled: the VM is back on the original host.
# Checks: across both failovers 0 acknowledged commits lost, 0 phantom or
# partial transactions, every client connection kept; pg_amcheck clean;
# the disks equal after the resync; the resync's bytes at most 2x the
# blocks written since the failover plus the old primary's logged
# extents, and less than half of the first protection's full copy.
# Output: build/e2e/<run>/result.json.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/crashfs.sh"

run=${RDB_RUN:-fb$$}
clients=${LEDGER_CLIENTS:-4}
total_s=${TOTAL_S:-75}
CRASH=$RDB_ROOT/build/e2e/$run.crashfs	# backing/ and mnt/
cleanup() {
	local rc=$?
	crashfs_cleanup "$rc"
	(exit $rc)
	cluster_down "$run"
}
trap cleanup EXIT

rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
crashfs_check
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
crashfs_fresh
cp --sparse=always "$CL_DISK_IMAGE" "$CRASH/backing/disk.img" && sync "$CRASH/backing/disk.img" ||
	rdb_fail "copying the disk image"
crashfs_up || rdb_fail "crashfs did not mount"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
CL_DISK_AT=$CRASH/mnt/disk.img cluster_vm_up 25 ||
	rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg || rdb_fail "PostgreSQL not reachable from the client"
cl_ctl pri status "$CL_VM" --json > "$CL_DIR/pri-status-first.json"
full_copy=$(jq '.vms[0].disk.initial_copy.bytes' "$CL_DIR/pri-status-first.json")

mkdir -p "$CL_DIR/ledger"
clix "$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n -c 2 -j 1 -T "$total_s" bench \
	>"$CL_DIR/pgbench.log" 2>&1 &
pgb=$!
clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients "$clients" \
	--duration "$total_s" --journal "$CL_DIR/ledger" --wait-timeout 30 \
	2>"$CL_DIR/ledger-run.log" &
led=$!
sleep 10

# 1. the first power pull: the host, then its disk's volatile cache
cluster_pull_power "$run"
crashfs_pull
echo "pulled the primary's power under load (its image lost what it had not synced)"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
sleep 5

# 2. the old host repaired: network and daemon back, its old image there
crashfs_up || rdb_fail "crashfs did not mount again"
netns_power_restore "$run" pri
wait_for 15 "the repaired host reachable on the replication link" \
	ip netns exec "$(netns_name "$run" bak)" ping -c 1 -W 1 10.78.0.1 ||
	rdb_fail "the repaired host's links did not come back"
cl_start_daemon pri || rdb_fail "the repaired host's remusdbd did not start"
cl_ctl pri attach "$CL_DIR/$CL_VM.conf" || rdb_fail "attach on the repaired host failed outright"
cl_ctl pri wait "$CL_VM" fenced --timeout 10 ||
	rdb_fail "the stale copy on the repaired host was not fenced"
grep -q "attached, but the witness says bak runs this VM" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the stale host does not say why it refuses the VM"
echo "the repaired host refuses its stale copy (the witness: bak runs it)"

# 3. the survivor protects the VM back to it
cl_ctl bak protect "$CL_VM" peer=10.78.0.1:7788 || rdb_fail "protect by name refused"
cl_ctl bak wait "$CL_VM" protected --timeout 120 ||
	rdb_fail "the survivor is not protected (see $CL_DIR/bak/remusdbd.log)"
cl_ctl pri wait "$CL_VM" protected --timeout 10 ||
	rdb_fail "the old host is not the backup"
cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status-resync.json"
echo "protected back to the old host: $(grep -o 'resync queued.*' "$CL_DIR/bak/remusdbd.log" | tail -1)"

# 4. the disks at a quiet point
bak_console=$CL_DIR/bak/state/$CL_VM/console.log
# which blocks differ, and whether the survivor's written map has them
differing() {
	cmp -l "$CL_DIR/bak/state/$CL_VM/disk.img" "$CRASH/mnt/disk.img" 2>/dev/null |
		awk '{print int(($1-1)/4096)}' | uniq > "$CL_DIR/differing-blocks.txt"
	python3 - "$CL_DIR/bak/state/$CL_VM/written.map" "$CL_DIR/differing-blocks.txt" \
		"$CL_DIR/bak/state/$CL_VM/disk.img" "$CRASH/mnt/disk.img" \
		> "$CL_DIR/differing-blocks-why.txt" <<-'EOP'
	import sys
	m = open(sys.argv[1], 'rb').read()[4096:]
	blocks = [int(x) for x in open(sys.argv[2])]
	a, b = open(sys.argv[3], 'rb'), open(sys.argv[4], 'rb')
	for blk in blocks[:200]:
	    inmap = (m[blk // 8] >> (blk % 8)) & 1 if blk // 8 < len(m) else -1
	    a.seek(blk * 4096); b.seek(blk * 4096)
	    da, db = a.read(4096), b.read(4096)
	    print(blk, "extent", blk * 4096 >> 20, "in-wmap", inmap,
	          "survivor-zero", da == bytes(4096), "old-zero", db == bytes(4096),
	          "diff-bytes", sum(x != y for x, y in zip(da, db)))
	EOP
}
cl_frozen_disks_equal bak "$CL_DIR/bak/run/$CL_VM.serial.sock" "$bak_console" \
	"$CL_DIR/bak/state/$CL_VM/disk.img" "$CRASH/mnt/disk.img" differing
disk_equal=$CL_DISK_EQUAL
sleep 5

# 5. the survivor's power: back to the original host
pull_ms=$(date +%s%3N)
netns_power_pull "$run" bak
echo "pulled the survivor's power"
cl_ctl pri wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "the original host did not take the VM back (see $CL_DIR/pri/remusdbd.log)"
cl_ctl pri status "$CL_VM" --json > "$CL_DIR/pri-status-back.json"
wait_pid $((total_s + 90)) "$led"
ledger_rc=$?
wait_pid 90 "$pgb"

clix "$RDB_ROOT/build/workload/ledger" check --host "$CL_GUEST_IP" --clients "$clients" \
	--journal "$CL_DIR/ledger" --pull-ms "$pull_ms" --json "$CL_DIR/ledger.json" \
	2>"$CL_DIR/ledger-check.log"
[ -s "$CL_DIR/ledger.json" ] || rdb_fail "ledger check produced nothing ($CL_DIR/ledger-check.log)"
timeout 300 ip netns exec "$(netns_name "$run" cli)" "$PGBIN/pg_amcheck" -h "$CL_GUEST_IP" \
	-U postgres -d ledger -d bench --heapallindexed >"$CL_DIR/amcheck.log" 2>&1
amcheck_rc=$?

jq -n --slurpfile l "$CL_DIR/ledger.json" --slurpfile r "$CL_DIR/bak-status-resync.json" \
	--slurpfile b "$CL_DIR/pri-status-back.json" --argjson disk_equal "$disk_equal" \
	--argjson amcheck_rc "$amcheck_rc" --argjson ledger_rc "$ledger_rc" \
	--argjson full_copy "$full_copy" '
	$l[0] as $l | ($r[0].vms[0].disk) as $d | ($b[0].vms[0]) as $back |
	($d.initial_copy.written_since_restore_blocks * 4096) as $written |
	($d.initial_copy.old_primary_log_extents * 1048576) as $logged |
	{ acked_commits: $l.acked_commits, lost_commits: $l.lost_commits,
	  phantom_txns: $l.phantom_txns, partial_txns: $l.partial_txns,
	  broken_connections: $l.broken_connections,
	  amcheck_ok: ($amcheck_rc == 0), disk_equal_after_resync: $disk_equal,
	  full_copy_bytes: $full_copy, resync: $d.initial_copy.resync,
	  resync_bytes: $d.initial_copy.bytes,
	  resync_blocks: $d.initial_copy.blocks_that_could_differ,
	  written_since_failover_bytes: $written, old_primary_log_bytes: $logged,
	  resync_s: $d.initial_copy.queued_s, disk_size: $d.size,
	  back_on_original: ($back.role == "backup" and $back.state == "failed-over"),
	  restored_ms: $back.failover_ms,
	  invariants_ok: ($l.lost_commits == 0 and $l.phantom_txns == 0
			  and $l.partial_txns == 0 and $l.broken_connections == 0
			  and $l.acked_commits > 0 and $ledger_rc == 0
			  and $amcheck_rc == 0 and $disk_equal),
	  resync_ok: ($d.initial_copy.resync == true
		      and $d.initial_copy.bytes <= 2 * $written + $logged
		      and $d.initial_copy.bytes * 2 < $full_copy) }' > "$CL_DIR/result.json" ||
	rdb_fail "could not assemble the result"
cat "$CL_DIR/result.json"
jq -e .invariants_ok "$CL_DIR/result.json" >/dev/null || rdb_fail "an invariant broke (see $CL_DIR)"
jq -e .resync_ok "$CL_DIR/result.json" >/dev/null || rdb_fail "the resync copied more than may differ (see $CL_DIR)"
jq -e .back_on_original "$CL_DIR/result.json" >/dev/null || rdb_fail "the VM is not back on the original host"
echo "PASS: failed over and back: $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost, disks equal after a resync of $(jq -r '.resync_bytes / 1048576 | floor' "$CL_DIR/result.json") MiB (full copy $(jq -r '.full_copy_bytes / 1048576 | floor' "$CL_DIR/result.json") MiB)"
