#!/usr/bin/env bash
# A production-shaped PostgreSQL VM through a power pull: three disks and
# two NICs.  The server, the catalog and the bench database on /dev/vda,
# the WAL (pg_wal) on /dev/vdb, the ledger database in a tablespace on
# /dev/vdc (tools/mkguest-pg.sh --layout split); eth0 10.77.0.100 carries
# the ledger's clients, eth1 10.76.0.100 pgbench's (a second client set).
# Every commit writes two disks at least (the WAL, then the data at the
# checkpoints), so one epoch committed on some disks and not on others is
# a database that does not recover.
#
# Checks:
#  - the layout is real: every disk device of the primary took writes
#    under the load, the ledger database's tablespace is /pgts/ts;
#  - I4 on every disk: the three replicas byte-equal to the primary's
#    disks, compared in one moment with the three filesystems frozen;
#  - the power pull, then on the backup: I2 every acknowledged COMMIT's
#    rows exist, I3 no row of a rolled-back or unsent transaction, none
#    half there (ledger check); the ledger's clients kept their
#    connections (NIC 0) and so did pgbench's (NIC 1: pgbench exits 0
#    only if no client was aborted);
#  - then PostgreSQL crashes in the restored guest and recovers from the
#    replicas alone (page cache dropped, the WAL replayed from vdb): the
#    ledger check again (I2, I3 on what the disks held), and pg_amcheck
#    clean on both databases;
#  - disk read tracking on every disk (read_tracking, verify_pages: the
#    backup checks its RAM image against the primary's digest after each
#    commit): the guest reads the tablespace's files from /dev/vdc with
#    its page cache dropped every second, and makes stale copies there (a
#    file read, copied, then rewritten: the index must forget the
#    rewritten blocks of that disk); pages went as references to disk 2's
#    blocks and the backup read and verified them from disk 2's replica,
#    every epoch verified, protection never dropped.  Red when the
#    backup resolves every reference on disk 0 (SHA-256 mismatch,
#    protection dropped).
# Shown red with the backup's commit leaving disk 1's (the WAL's) part
# of every epoch unapplied (rdb_diskbuf_apply_set skipping set[1]): see
# the commit.
#
# Output: build/e2e/<run>/result.json.  Exit 0 pass, 1 fail.
# check-long: the production-shaped VM through a pull; make check has
#   the same VM under commit protection (multi-pg-cp) and each device kind
#   alone (multi-disk, multi-nic)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-mp$$}
ckpt=${CKPT_MS:-25}
before_s=${PULL_AFTER_S:-}
after_s=${AFTER_S:-10}
clients=${LEDGER_CLIENTS:-4}
trap 'cluster_down "$run"' EXIT

rdb_require_root
[ -x build/workload/ledger ] || rdb_fail "build/workload/ledger missing (make all)"
export CL_VM_EXTRA="read_tracking = true
verify_pages = true"
cl_pg_split_up "$run" "$ckpt" postgres
ip1=$CL_PG_IP1

pst=$(cl_status pri "$CL_VM" --json) || rdb_fail "no primary status"
bst=$(cl_status bak "$CL_VM" --json) || rdb_fail "no backup status"
ndisk=$(jq '[.vms[0].devices[] | select(.kind == "disk")] | length' <<<"$pst")
nnic=$(jq '[.vms[0].devices[] | select(.kind == "nic")] | length' <<<"$pst")
[ "$ndisk" = 3 ] && [ "$nnic" = 2 ] ||
	rdb_fail "the primary protects $ndisk disks and $nnic NICs, not 3 and 2: $(jq -c .vms[0].devices <<<"$pst")"
mapfile -t bak_imgs < <(jq -r '.vms[0].disks[].replica' <<<"$bst")
[ "${#bak_imgs[@]}" = 3 ] || rdb_fail "the backup keeps ${#bak_imgs[@]} replicas, not 3"
ts=$(clix "$PGBIN/psql" -X -At -h "$CL_GUEST_IP" -U postgres -d postgres -c \
	"SELECT pg_tablespace_location(dattablespace) FROM pg_database WHERE datname = 'ledger'") ||
	rdb_fail "psql: the ledger database's tablespace"
[ "$ts" = /pgts/ts ] || rdb_fail "the ledger database is in '$ts', not /pgts/ts"

# I4 on every disk in one quiet moment: the three filesystems frozen,
# their writes committed, then each disk equal to its replica.
export CL_FREEZE_PAIRS="$CL_DIR/pri/$CL_VM.disk1.img:${bak_imgs[1]} $CL_DIR/pri/$CL_VM.disk2.img:${bak_imgs[2]}"
cl_frozen_disks_equal pri "$CL_DIR/pri/serial.sock" "$CL_DIR/pri/console.log" \
	"$CL_DIR/pri/$CL_VM.disk.img" "${bak_imgs[0]}"
disk_equal=$CL_DISK_EQUAL

# Reads of disk 2 (the tablespace's files, page cache dropped every
# second) and stale copies on it, for read tracking.
cl_console_cmd "mkdir -p /pgts/rt; (while :; do echo 3 > /proc/sys/vm/drop_caches; cat /pgts/ts/*/*/* > /dev/null 2>&1; dd if=/dev/urandom of=/pgts/rt/y bs=4k count=16 2>/dev/null; dd if=/dev/urandom of=/pgts/rt/a bs=4k count=16 conv=fsync 2>/dev/null; echo 3 >/proc/sys/vm/drop_caches; cp /pgts/rt/a /pgts/rt/b; dd if=/pgts/rt/y of=/pgts/rt/a bs=4k count=16 conv=notrunc,fsync 2>/dev/null; sleep 1; done) & echo REMUSDB-READS" ||
	rdb_fail "console"
wait_for 20 "the guest's read loop" grep -q REMUSDB-READS "$CL_DIR/pri/console.log" ||
	rdb_fail "the guest did not start reading disk 2"

w0=$(jq -c '[.vms[0].devices[] | select(.kind == "disk") | .writes]' <<<"$pst")
[ -n "$before_s" ] || before_s=$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", 8 + (r % 6000) / 1000}')
total_s=$(awk -v a="$before_s" -v b="$after_s" 'BEGIN{printf "%d", a + b + 5}')
mkdir -p "$CL_DIR/ledger"
# pgbench through NIC 1, the ledger through NIC 0
clix "$PGBIN/pgbench" -h "$ip1" -U postgres -n -c 2 -j 1 -T "$total_s" -P 2 bench \
	>"$CL_DIR/pgbench.log" 2>&1 &
pgb=$!
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
echo "pulled the primary's power at +${before_s}s under load"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
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

# The restored guest's memory holds the epoch's page cache: a replica
# that lacks writes can hide behind it.  So PostgreSQL crashes there and
# recovers from the disks alone (every process killed, the page cache
# dropped, the WAL replayed from /dev/vdb), and the ledger is checked
# again on what the disks held.
con=$CL_DIR/bak/state/$CL_VM/console.log
n0=$(grep -c REMUSDB-PG-READY "$con")
cl_console_cmd_at "$CL_DIR/bak/run/$CL_VM.serial.sock" "/usr/bin/rdb-pg-crash-restart" ||
	rdb_fail "the restored guest's console"
wait_for 120 "PostgreSQL recovered from the restored disks" \
	bash -c "[ \$(grep -c REMUSDB-PG-READY '$con') -gt $n0 ] || grep -q 'REMUSDB-WARN: postgres' '$con'" ||
	rdb_fail "PostgreSQL did not start again in the restored guest"
grep -q "REMUSDB-WARN: postgres" "$con" && rdb_fail "PostgreSQL did not recover from the restored disks: $(grep 'pg .*\(FATAL\|PANIC\)' "$con" | tail -n 3)"
grep -q "database system was interrupted" "$con" ||
	rdb_fail "PostgreSQL did not run crash recovery (no 'database system was interrupted' in $con)"
cl_wait_pg || rdb_fail "PostgreSQL not reachable after its crash recovery"
clix "$RDB_ROOT/build/workload/ledger" check --host "$CL_GUEST_IP" --clients "$clients" \
	--journal "$CL_DIR/ledger" --pull-ms "$pull_ms" --json "$CL_DIR/ledger-recovered.json" \
	2>"$CL_DIR/ledger-check-recovered.log"
[ -s "$CL_DIR/ledger-recovered.json" ] ||
	rdb_fail "ledger check after the crash recovery produced nothing ($CL_DIR/ledger-check-recovered.log)"
timeout 300 ip netns exec "$(netns_name "$run" cli)" "$PGBIN/pg_amcheck" -h "$ip1" \
	-U postgres -d ledger -d bench --heapallindexed >"$CL_DIR/amcheck.log" 2>&1
amcheck_rc=$?
tps_pgbench=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$CL_DIR/pgbench.log" | head -n 1)

jq -n --slurpfile l "$CL_DIR/ledger.json" --slurpfile s "$CL_DIR/bak-status.json" \
	--slurpfile r "$CL_DIR/ledger-recovered.json" \
	--slurpfile p "$CL_DIR/pri-status.json" --argjson w0 "$w0" \
	--slurpfile b "$CL_DIR/bak-status-before.json" \
	--argjson disk_equal "$disk_equal" --argjson amcheck_rc "$amcheck_rc" \
	--argjson ledger_rc "$ledger_rc" --argjson pgbench_rc "$pgbench_rc" \
	--arg tps "${tps_pgbench:-0}" --arg ckpt "$ckpt" --arg before "$before_s" '
	$l[0] as $l | $r[0] as $r | ($s[0].vms[0]) as $v | ($p[0].vms[0]) as $pv |
	($b[0].vms[0]) as $bv |
	([$pv.devices[] | select(.kind == "disk") | .writes]) as $w1 |
	([range(0; $w1 | length) | $w1[.] - $w0[.]]) as $dw |
	{ epoch_ms: ($ckpt | tonumber), pull_after_s: ($before | tonumber),
	  disks: ($dw | length), disk_writes_under_load: $dw,
	  nics: ([$pv.devices[] | select(.kind == "nic")] | length),
	  acked_commits: $l.acked_commits, lost_commits: $l.lost_commits,
	  phantom_txns: $l.phantom_txns, partial_txns: $l.partial_txns,
	  in_doubt: $l.in_doubt, rolled_back: $l.rolled_back,
	  broken_connections: $l.broken_connections,
	  failover_ms: $l.failover_gap_ms,
	  pgbench_tps: ($tps | tonumber), pgbench_rc: $pgbench_rc,
	  recovered_from_disks: { lost_commits: $r.lost_commits,
		phantom_txns: $r.phantom_txns, partial_txns: $r.partial_txns },
	  disk_equal_frozen: $disk_equal, amcheck_ok: ($amcheck_rc == 0),
	  committed_epoch: $v.committed_epoch,
	  read_tracking: $pv.read_tracking,
	  backup_diskref_verified_by_disk: $bv.diskref_pages_verified_by_disk,
	  backup_epochs_verified: $bv.epochs_verified,
	  read_tracking_ok: ($pv.state == "protected" and $pv.transitions.degraded == 0
			  and ($pv.read_tracking.disks | length) == 3
			  and $pv.read_tracking.disks[2].diskref_pages > 0
			  and $bv.diskref_pages_verified_by_disk[2] > 0
			  and $bv.epochs_verified >= $bv.committed_epoch - 2),
	  invariants_ok: ($l.lost_commits == 0 and $l.phantom_txns == 0
			  and $l.partial_txns == 0 and $l.broken_connections == 0
			  and $l.acked_commits > 0 and $l.failover_gap_ms >= 0
			  and $r.lost_commits == 0 and $r.phantom_txns == 0
			  and $r.partial_txns == 0
			  and $disk_equal and $ledger_rc == 0 and $pgbench_rc == 0
			  and ($dw | length) == 3 and ($dw | all(. > 0))) }' > "$CL_DIR/result.json" ||
	rdb_fail "could not assemble the result"
cat "$CL_DIR/result.json"
[ "$(jq -r .invariants_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "invariant violated (logs in $CL_DIR)"
[ "$(jq -r .amcheck_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "pg_amcheck found corruption on the backup (see $CL_DIR/amcheck.log)"
[ "$(jq -r .read_tracking_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "read tracking on disk 2: no references verified, or protection dropped (logs in $CL_DIR)"
echo "PASS: 3 disks (writes under load $(jq -c .disk_writes_under_load "$CL_DIR/result.json")), 2 NICs; $(jq -r .acked_commits "$CL_DIR/result.json") acknowledged commits, none lost, none lost after crash recovery from the replicas; pgbench on NIC 1 unbroken; amcheck clean; read tracking: disk 2's blocks referenced $(jq -r .read_tracking.disks[2].diskref_pages "$CL_DIR/result.json") times, verified from its replica"
