#!/usr/bin/env bash
# Disk read tracking through a power pull, on the PostgreSQL guest.
#
# The load reads: sequential scans of pgbench_accounts (bigger than a
# quarter of shared_buffers, so PostgreSQL reads it through the kernel's
# page cache with a small ring), while the guest drops its page cache
# every second, so every scan reads the table from the disk again; the
# ledger workload writes beside it (its journal gives the invariants);
# and a loop in the guest makes stale copies (a block read, copied, then
# rewritten on the disk), the case the read index's invalidation is for.
# The VM runs with verify_pages: every epoch carries a digest of its pages
# as QEMU sent them, and the backup checks its RAM image against it after
# each commit, so a page rebuilt wrong from a disk reference (or any other
# encoding) is caught where it happens, not only if PostgreSQL trips on it.
#
# Checks: pages went as DISKREF (share > 0) and the backup verified them;
# every epoch verified, protection never dropped; then, through the pull,
# no acknowledged commit lost, no phantom or partial transaction, no
# broken connection, disks equal while frozen, pg_amcheck clean.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-rt$$}
before_s=${PULL_AFTER_S:-20}
after_s=10
clients=2
trap 'cluster_down "$run"' EXIT

rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
export CL_VM_EXTRA="read_tracking = true
verify_pages = true"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
cluster_vm_up 25 || rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg bench || rdb_fail "PostgreSQL not reachable from the client"

# I4 in a quiet moment, as pg-failover does: the filesystem frozen
# (before the loads: the guest's console is slow to read under them).
cl_frozen_disks_equal pri "$CL_DIR/pri/serial.sock" "$CL_DIR/pri/console.log" \
	"$CL_DIR/pri/$CL_VM.disk.img" "$CL_DIR/bak/state/$CL_VM/disk.img"
disk_equal=$CL_DISK_EQUAL

cl_console_cmd "(while :; do echo 3 > /proc/sys/vm/drop_caches; sleep 1; done) & echo REMUSDB-DROPPING" ||
	rdb_fail "console"
wait_for 20 "page cache dropping loop" grep -q REMUSDB-DROPPING "$CL_DIR/pri/console.log" ||
	rdb_fail "the guest did not start dropping its page cache"
# Stale copies, the case invalidation exists for: file a is read from the
# disk (its blocks enter the read index), copied to b (b's page cache
# pages hold a's old contents, dirty), then a is rewritten on the disk.
# b's pages must not go as references to a's blocks once a holds other
# bytes: the backup's replica would not match, and protection would drop.
cl_console_cmd "mkdir -p /pg/rt; (while :; do dd if=/dev/urandom of=/pg/rt/y bs=4k count=16 2>/dev/null; dd if=/dev/urandom of=/pg/rt/a bs=4k count=16 conv=fsync 2>/dev/null; echo 3 >/proc/sys/vm/drop_caches; cp /pg/rt/a /pg/rt/b; dd if=/pg/rt/y of=/pg/rt/a bs=4k count=16 conv=notrunc,fsync 2>/dev/null; sleep 1; done) & echo REMUSDB-STALE" ||
	rdb_fail "console"
wait_for 20 "stale-copy loop" grep -q REMUSDB-STALE "$CL_DIR/pri/console.log" ||
	rdb_fail "the guest did not start the stale-copy loop"

total_s=$((before_s + after_s + 5))
mkdir -p "$CL_DIR/ledger"
clix bash -c "end=\$((SECONDS + $total_s)); n=0; while [ \$SECONDS -lt \$end ]; do
	$PGBIN/psql -h $CL_GUEST_IP -U postgres -d bench -qAt -c 'SELECT count(*), sum(abalance) FROM pgbench_accounts' >/dev/null 2>&1 && n=\$((n + 1))
	done; echo scans=\$n" >"$CL_DIR/scans.log" 2>&1 &
scans=$!
clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients "$clients" \
	--duration "$total_s" --journal "$CL_DIR/ledger" --wait-timeout 30 \
	2>"$CL_DIR/ledger-run.log" &
led=$!
sleep "$before_s"


cl_status pri "$CL_VM" --json > "$CL_DIR/pri-status.json" ||
	rdb_fail "primary not answering before the pull"
cl_status bak "$CL_VM" --json > "$CL_DIR/bak-status-before.json" ||
	rdb_fail "backup not answering before the pull"
pull_ms=$(date +%s%3N)
cluster_pull_power "$run"
echo "pulled the primary's power at +${before_s}s under the read load"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
wait_pid $((total_s + 60)) "$led"
ledger_rc=$?
wait_pid 60 "$scans"
clix "$RDB_ROOT/build/workload/ledger" check --host "$CL_GUEST_IP" --clients "$clients" \
	--journal "$CL_DIR/ledger" --pull-ms "$pull_ms" --json "$CL_DIR/ledger.json" \
	2>"$CL_DIR/ledger-check.log"
[ -s "$CL_DIR/ledger.json" ] || rdb_fail "ledger check produced nothing ($CL_DIR/ledger-check.log)"
timeout 300 ip netns exec "$(netns_name "$run" cli)" "$PGBIN/pg_amcheck" -h "$CL_GUEST_IP" \
	-U postgres -d ledger -d bench --heapallindexed >"$CL_DIR/amcheck.log" 2>&1
amcheck_rc=$?

jq -n --slurpfile l "$CL_DIR/ledger.json" --slurpfile p "$CL_DIR/pri-status.json" \
	--slurpfile b "$CL_DIR/bak-status-before.json" --argjson disk_equal "$disk_equal" \
	--argjson amcheck_rc "$amcheck_rc" --argjson ledger_rc "$ledger_rc" \
	--arg scans "$(sed -n 's/^scans=//p' "$CL_DIR/scans.log")" '
	$l[0] as $l | ($p[0].vms[0]) as $pv | ($b[0].vms[0]) as $bv |
	{ acked_commits: $l.acked_commits, lost_commits: $l.lost_commits,
	  phantom_txns: $l.phantom_txns, partial_txns: $l.partial_txns,
	  broken_connections: $l.broken_connections, failover_ms: $l.failover_gap_ms,
	  scans: ($scans | tonumber? // 0),
	  primary_transitions: $pv.transitions, state_before_pull: $pv.state,
	  diskref_pages: $pv.compression.pages.diskref,
	  diskref_share: $pv.compression.diskref_share,
	  pages: $pv.compression.pages, page_bytes: $pv.compression.bytes,
	  read_tracking: $pv.read_tracking,
	  backup_diskref_verified: $bv.diskref_pages_verified,
	  backup_epochs_verified: $bv.epochs_verified,
	  backup_committed_epoch: $bv.committed_epoch,
	  disk_equal_frozen: $disk_equal, amcheck_ok: ($amcheck_rc == 0),
	  invariants_ok: ($l.lost_commits == 0 and $l.phantom_txns == 0
			  and $l.partial_txns == 0 and $l.broken_connections == 0
			  and $l.acked_commits > 0 and $disk_equal and $ledger_rc == 0
			  and $amcheck_rc == 0),
	  read_tracking_ok: ($pv.state == "protected" and $pv.transitions.degraded == 0
			  and $pv.compression.pages.diskref > 0
			  and $bv.diskref_pages_verified > 0
			  and $bv.epochs_verified >= $bv.committed_epoch - 2) }' \
	> "$CL_DIR/result.json" || rdb_fail "could not assemble the result"
cat "$CL_DIR/result.json"
[ "$(jq -r .read_tracking_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "read tracking: no disk references sent, or protection dropped (logs in $CL_DIR)"
[ "$(jq -r .invariants_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "invariant violated (logs in $CL_DIR)"
echo "PASS: $(jq -r .diskref_pages "$CL_DIR/result.json") pages sent as disk references ($(jq -r '.diskref_share * 100 | floor' "$CL_DIR/result.json")% of pages), every epoch's pages verified on the backup; $(jq -r .acked_commits "$CL_DIR/result.json") acknowledged commits through the pull, none lost"
