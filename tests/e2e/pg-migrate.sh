#!/usr/bin/env bash
# A planned switchover of a database VM there and back (issue 12):
# PostgreSQL under the ledger workload and pgbench on a protected VM with
# a disk.
#   1. remusdbctl migrate: the VM moves to the backup host at a checkpoint;
#   2. the new owner protects it back to the old host (a resync: the old
#      host's image differs only in what the guest wrote since);
#   3. the two disks are compared byte for byte at a quiet point (the
#      guest's filesystem frozen);
#   4. remusdbctl migrate home.
# Checks: 0 acknowledged commits lost, 0 phantom or partial transactions,
# every client connection kept, pg_amcheck clean, the disks equal, the
# resync far below a full copy, the old QEMU gone after each handover.
# Output: build/e2e/<run>/result.json.
# check-long: a switchover there and back under a database load; make
#   check has the switchover (migrate) and its failures (migrate-restore-
#   fail*)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-pm$$}
clients=${LEDGER_CLIENTS:-4}
total_s=${TOTAL_S:-45}
trap 'cluster_down "$run"' EXIT

rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
cluster_up "$run" 25 || rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg || rdb_fail "PostgreSQL not reachable from the client"
cl_ctl pri status "$CL_VM" --json > "$CL_DIR/pri-status-first.json"
full_copy=$(jq '.vms[0].disk.initial_copy.bytes' "$CL_DIR/pri-status-first.json")
qemu_pid=$(cat "$CL_DIR/pri/qemu.pid")

mkdir -p "$CL_DIR/ledger"
clix "$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n -c 2 -j 1 -T "$total_s" bench \
	>"$CL_DIR/pgbench.log" 2>&1 &
pgb=$!
clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients "$clients" \
	--duration "$total_s" --journal "$CL_DIR/ledger" --wait-timeout 30 \
	2>"$CL_DIR/ledger-run.log" &
led=$!
sleep 8

# 1. there
migrate_ms=$(date +%s%3N)
cl_ctl pri migrate "$CL_VM" --timeout 30 > "$CL_DIR/migrate-1.out" 2>&1 ||
	rdb_fail "migrate to bak failed: $(cat "$CL_DIR/migrate-1.out")"
cat "$CL_DIR/migrate-1.out"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 || rdb_fail "bak does not run the VM"
wait_for 5 "the old primary's QEMU gone" \
	sh -c "! kill -0 $qemu_pid 2>/dev/null || grep -q '^State:.*Z' /proc/$qemu_pid/status" ||
	rdb_fail "the old primary's QEMU (pid $qemu_pid) still runs"
cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status-1.json"
sleep 4

# 2. protected back: a resync
cl_ctl bak protect "$CL_VM" peer=10.78.0.1:7788 || rdb_fail "protect back refused"
cl_ctl bak wait "$CL_VM" protected --timeout 120 ||
	rdb_fail "not protected back (see $CL_DIR/bak/remusdbd.log)"
cl_ctl pri wait "$CL_VM" protected --timeout 10 || rdb_fail "pri is not the backup"
cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status-resync.json"
echo "protected back: $(grep -o 'resync queued.*' "$CL_DIR/bak/remusdbd.log" | tail -1)"

# 3. the disks at a quiet point
cl_frozen_disks_equal bak "$CL_DIR/bak/run/$CL_VM.serial.sock" \
	"$CL_DIR/bak/state/$CL_VM/console.log" \
	"$CL_DIR/bak/state/$CL_VM/disk.img" "$CL_DIR/pri/$CL_VM.disk.img"
disk_equal=$CL_DISK_EQUAL
sleep 3

# 4. home
rq=$(pgrep -f "qemu-system.*$CL_DIR/bak/" | head -n 1)
migrate2_ms=$(date +%s%3N)
cl_ctl bak migrate "$CL_VM" --timeout 30 > "$CL_DIR/migrate-2.out" 2>&1 ||
	rdb_fail "migrate home failed: $(cat "$CL_DIR/migrate-2.out")"
cat "$CL_DIR/migrate-2.out"
cl_ctl pri wait "$CL_VM" failed-over --timeout 30 || rdb_fail "pri does not run the VM again"
wait_for 5 "bak's QEMU gone" sh -c "! kill -0 $rq 2>/dev/null" ||
	rdb_fail "bak's QEMU (pid $rq) still runs"
wait_pid $((total_s + 90)) "$led"
ledger_rc=$?
wait_pid 90 "$pgb"

clix "$RDB_ROOT/build/workload/ledger" check --host "$CL_GUEST_IP" --clients "$clients" \
	--journal "$CL_DIR/ledger" --json "$CL_DIR/ledger.json" \
	2>"$CL_DIR/ledger-check.log"
[ -s "$CL_DIR/ledger.json" ] || rdb_fail "ledger check produced nothing ($CL_DIR/ledger-check.log)"
timeout 300 ip netns exec "$(netns_name "$run" cli)" "$PGBIN/pg_amcheck" -h "$CL_GUEST_IP" \
	-U postgres -d ledger -d bench --heapallindexed >"$CL_DIR/amcheck.log" 2>&1
amcheck_rc=$?

# The longest time without an acknowledged commit (all clients) around
# each handover: from its start to 3 s after.
gaps=$(cat "$CL_DIR"/ledger/*.journal | awk '$1 == "A" {print $3}' | sort -n |
	awk -v a="$migrate_ms" -v b="$migrate2_ms" '
	NR > 1 { for (k = 0; k < 2; k++) { t = k ? b : a
		if ($1 > t && p < t + 3000 && $1 - p > g[k]) g[k] = $1 - p } }
	{ p = $1 } END { printf "[%d,%d]", g[0], g[1] }')
jq -n --slurpfile l "$CL_DIR/ledger.json" --slurpfile r "$CL_DIR/bak-status-resync.json" \
	--argjson gaps "$gaps" \
	--argjson disk_equal "$disk_equal" --argjson amcheck_rc "$amcheck_rc" \
	--argjson ledger_rc "$ledger_rc" --argjson full_copy "$full_copy" '
	$l[0] as $l | ($r[0].vms[0].disk) as $d |
	{ acked_commits: $l.acked_commits, lost_commits: $l.lost_commits,
	  phantom_txns: $l.phantom_txns, partial_txns: $l.partial_txns,
	  broken_connections: $l.broken_connections,
	  commit_gap_at_migrate_ms: $gaps, max_commit_gap_ms: $l.max_gap_ms,
	  amcheck_ok: ($amcheck_rc == 0), disk_equal_after_resync: $disk_equal,
	  full_copy_bytes: $full_copy, resync: $d.initial_copy.resync,
	  resync_bytes: $d.initial_copy.bytes,
	  invariants_ok: ($l.lost_commits == 0 and $l.phantom_txns == 0
			  and $l.partial_txns == 0 and $l.broken_connections == 0
			  and $l.acked_commits > 0 and $ledger_rc == 0
			  and $amcheck_rc == 0 and $disk_equal),
	  resync_ok: ($d.initial_copy.resync == true
		      and $d.initial_copy.bytes * 2 < $full_copy) }' > "$CL_DIR/result.json" ||
	rdb_fail "could not assemble the result"
cat "$CL_DIR/result.json"
jq -e .invariants_ok "$CL_DIR/result.json" >/dev/null || rdb_fail "an invariant broke (see $CL_DIR)"
jq -e .resync_ok "$CL_DIR/result.json" >/dev/null || rdb_fail "protecting back was no resync, or not a small one (see $CL_DIR)"
echo "PASS: PostgreSQL migrated there and back: $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost, disks equal after a resync of $(jq -r '.resync_bytes / 1048576 | floor' "$CL_DIR/result.json") MiB"
