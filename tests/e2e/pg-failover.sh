#!/usr/bin/env bash
# PostgreSQL through a power pull (one drill): a protected VM running
# PostgreSQL 15 on a replicated disk, the ledger workload (every COMMIT the
# server acknowledged is journaled by the client) and pgbench beside it;
# the primary loses power at a random moment under that load.
#
# Checks, after the failover, on the backup:
#   I2  every acknowledged COMMIT's rows exist (ledger check)
#   I3  no row of a transaction rolled back or never COMMIT-sent, no
#       transaction half there (ledger check)
#   I1  implied by I2 on this path; failover-seq.sh checks it directly
#   I4  the replica equals the primary's disk: compared byte for byte
#       while the guest's filesystem is frozen (before the pull), and
#       pg_amcheck passes on the restored database (after it)
#   clients kept their connections (plain Remus mode)
#
# Output: build/e2e/<run>/result.json.  Exit 0 pass, 1 fail, 77 skipped.
# check-long: the plain PostgreSQL drill; make check pulls the power
#   under PostgreSQL in pg-cp-all, pg-readtrack, pg-failback and the
#   readopt tests
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/drillreport.sh"

run=${RDB_RUN:-pg$$}
ckpt=${CKPT_MS:-25}
before_s=${PULL_AFTER_S:-}
after_s=${AFTER_S:-10}
clients=${LEDGER_CLIENTS:-4}
trap 'cluster_down "$run"' EXIT

rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
cluster_vm_up "$ckpt" || rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
cl_wait_pg || rdb_fail "PostgreSQL not reachable from the client"

# I4 in a quiet moment: the filesystem frozen (nothing written), its
# writes committed, then the two disks must be the same bytes.
cl_frozen_disks_equal pri "$CL_DIR/pri/serial.sock" "$CL_DIR/pri/console.log" \
	"$CL_DIR/pri/$CL_VM.disk.img" "$CL_DIR/bak/state/$CL_VM/disk.img"
disk_equal=$CL_DISK_EQUAL

# The load: pgbench (TPC-B-like) beside the ledger, both through the pull.
[ -n "$before_s" ] || before_s=$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", 8 + (r % 6000) / 1000}')
total_s=$(awk -v a="$before_s" -v b="$after_s" 'BEGIN{printf "%d", a + b + 5}')
mkdir -p "$CL_DIR/ledger"
clix "$PGBIN/pgbench" -h "$CL_GUEST_IP" -U postgres -n -c 2 -j 1 -T "$total_s" -P 2 bench \
	>"$CL_DIR/pgbench.log" 2>&1 &
pgb=$!
clix "$RDB_ROOT/build/workload/ledger" run --host "$CL_GUEST_IP" --clients "$clients" \
	--duration "$total_s" --journal "$CL_DIR/ledger" --wait-timeout 30 \
	2>"$CL_DIR/ledger-run.log" &
led=$!
sleep "$before_s"
cl_status pri "$CL_VM" --json > "$CL_DIR/pri-status.json" ||
	rdb_fail "primary not answering before the pull"
cl_ctl pri epochs "$CL_VM" --count 4096 --json > "$CL_DIR/epochs.json" ||
	rdb_fail "the primary gave no epochs"
pull_ms=$(date +%s%3N)
cluster_pull_power "$run"
echo "pulled the primary's power at +${before_s}s under load"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
asked=$(date +%s.%N)
cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status.json"
wait_pid $((total_s + 60)) "$led"
ledger_rc=$?
wait_pid 60 "$pgb"
pgbench_rc=$?

clix "$RDB_ROOT/build/workload/ledger" check --host "$CL_GUEST_IP" --clients "$clients" \
	--journal "$CL_DIR/ledger" --pull-ms "$pull_ms" --json "$CL_DIR/ledger.json" \
	2>"$CL_DIR/ledger-check.log"
check_rc=$?
[ -s "$CL_DIR/ledger.json" ] || rdb_fail "ledger check produced nothing (rc $check_rc; $CL_DIR/ledger-check.log)"
t0=$(date +%s%3N)
timeout 300 ip netns exec "$(netns_name "$run" cli)" "$PGBIN/pg_amcheck" -h "$CL_GUEST_IP" \
	-U postgres -d ledger -d bench --heapallindexed >"$CL_DIR/amcheck.log" 2>&1
amcheck_rc=$?
amcheck_ms=$(( $(date +%s%3N) - t0 ))
tps_pgbench=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$CL_DIR/pgbench.log" | head -n 1)

jq -n --slurpfile l "$CL_DIR/ledger.json" --slurpfile s "$CL_DIR/bak-status.json" \
	--slurpfile p "$CL_DIR/pri-status.json" --argjson disk_equal "$disk_equal" \
	--argjson amcheck_rc "$amcheck_rc" --argjson amcheck_ms "$amcheck_ms" \
	--argjson ledger_rc "$ledger_rc" --argjson pgbench_rc "$pgbench_rc" \
	--arg tps "${tps_pgbench:-0}" --arg ckpt "$ckpt" --arg before "$before_s" \
	--argjson pull_ms "$pull_ms" --argjson asked "$asked" '
	$l[0] as $l | ($s[0].vms[0]) as $v | ($p[0].vms[0]) as $pv |
	{ epoch_ms: ($ckpt | tonumber), pull_after_s: ($before | tonumber),
	  pull_at_ms: $pull_ms, pull_at: ($pull_ms / 1000),
	  running_at: ($asked - $v.state_age_ms / 1000),
	  failover_at: ($asked - $v.state_age_ms / 1000 - $v.failover_ms / 1000),
	  checkpoints_per_s: $pv.checkpoints_per_s,
	  acked_commits: $l.acked_commits, lost_commits: $l.lost_commits,
	  phantom_txns: $l.phantom_txns, partial_txns: $l.partial_txns,
	  in_doubt: $l.in_doubt, rolled_back: $l.rolled_back,
	  broken_connections: $l.broken_connections,
	  failover_ms: $l.failover_gap_ms, max_gap_ms: $l.max_gap_ms,
	  tps_before: $l.tps_before, tps_after: $l.tps_after,
	  pgbench_tps: ($tps | tonumber), pgbench_rc: $pgbench_rc,
	  disk_equal_frozen: $disk_equal,
	  amcheck_ok: ($amcheck_rc == 0), amcheck_ms: $amcheck_ms,
	  restore_ms: $v.failover_ms, committed_epoch: $v.committed_epoch,
	  disk_ops_replicated: $pv.disk_ops, disk_bytes_replicated: $pv.disk_bytes,
	  pause_ms_p50: $pv.pause_ms_p50, pause_ms_p99: $pv.pause_ms_p99,
	  invariants_ok: ($l.lost_commits == 0 and $l.phantom_txns == 0
			  and $l.partial_txns == 0 and $l.broken_connections == 0
			  and $l.acked_commits > 0 and $l.failover_gap_ms >= 0
			  and $disk_equal and $ledger_rc == 0) }' > "$CL_DIR/result.json" ||
	rdb_fail "could not assemble the result"
cat "$CL_DIR/result.json"
[ "$(jq -r .invariants_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "invariant violated (logs in $CL_DIR)"
[ "$(jq -r .amcheck_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "pg_amcheck found corruption on the backup (see $CL_DIR/amcheck.log)"
# the drill report: acknowledged commits per second (every client's
# journal, 250 ms bins, empty bins kept: the outage the report check
# looks into, 0.3 s after the pull to the restore, is at least 0.7 s,
# so it holds a whole bin) across the pull
# (bins counted from the first commit seen: awk may print a large
# integer subscript as 3.59e+09, which would put every commit in one bin)
cat "$CL_DIR"/ledger/client-*.journal | awk '$1 == "A" {
	if (!seen) { base = $3 - $3 % 250; seen = 1; lo = hi = 0 }
	b = int(($3 - base) / 250); n[b]++
	if (b < lo) lo = b; if (b > hi) hi = b }
	END { print "# real_s commits_per_s (250 ms bins)"
	      for (b = lo; b <= hi; b++) printf "%.3f %d\n", (base + b * 250) / 1000, (n[b] + 0) * 4 }' \
	> "$CL_DIR/timeline.txt"
echo "acknowledged commits/s, 250 ms bins" > "$CL_DIR/rate_label"
drill_report_check "$CL_DIR" "$CL_DIR/report"
echo "PASS: $(jq -r .acked_commits "$CL_DIR/result.json") acknowledged commits, none lost; clients saw a $(jq -r .failover_ms "$CL_DIR/result.json") ms outage"
