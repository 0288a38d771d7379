#!/usr/bin/env bash
# The power-pull drill: a protected VM streaming a sequence to a client,
# the primary's power pulled at a random moment, the backup taking over.
# Writes build/drill/report.json and build/drill/report.html (with plots:
# the client across the pull, the checkpoint pauses, bytes per epoch);
# exits non-zero if an invariant failed.
#
#   tests/drill.sh [--demo]     --demo narrates for a human, then runs
#                               one PostgreSQL drill (tests/drill-pg.sh)
#                               and one under commit protection
#                               (tests/e2e/pg-cp-writes.sh)
set -u
cd "$(dirname "$0")/.."
. tests/lib/common.sh
demo=false
[ "${1:-}" = --demo ] && demo=true
rdb_require_root
mkdir -p build/drill
rdb_build_guest
say() { $demo && printf '\n==> %s\n' "$*"; return 0; }

say "Five network namespaces stand in for hosts: switch, primary, backup, client, and the failover witness (etcd)."
say "The guest (Debian kernel + busybox, under QEMU) streams 1, 2, 3, ... over TCP to the client."
say "remusdbd checkpoints it every ${CKPT_MS:-25} ms to the backup and holds its output until each checkpoint is committed."
say "At a random moment the primary loses power: links down first, then SIGKILL."
RDB_RUN=drill timeout --kill-after=10 600 bash tests/e2e/failover-seq.sh
rc=$?
if [ -f build/e2e/drill/result.json ]; then
	cp build/e2e/drill/result.json build/drill/report.json
else
	jq -n --argjson rc $rc '{invariants_ok: false, error: "drill did not complete", rc: $rc}' \
		> build/drill/report.json
fi
if $demo; then
	# the backup went live only after winning the witness's decision
	decided=$(sed -n 's/.*deciding -> failing-over.*\(won the failover decision at the witness after [0-9]* ms\).*/the backup \1/p' \
		build/e2e/drill/bak/remusdbd.log 2>/dev/null | tail -n 1)
	jq -r --arg decided "${decided:-(no witness decision found in the backup log)}" '"
What happened:
  checkpoints before the pull : \(.checkpoints_per_s * 10 | round / 10) per second, guest paused p50 \(.pause_ms_p50 * 100 | round / 100) ms, p99 \(.pause_ms_p99 * 100 | round / 100) ms
  backup restored the VM      : from epoch \(.committed_epoch) in \(.restore_ms * 10 | round / 10) ms
  who runs it                 : \($decided)
  client saw                  : \(.values) values, last \(.last); stalled \(.failover_ms | round) ms across the failover
  gaps / repeats / rollbacks  : \(.gaps) / \(.dups) / \(.regressions + .corrupt)
  same TCP connection         : \(if .connection_lost then "NO" else "yes" end)
  invariants                  : \(if .invariants_ok then "OK" else "VIOLATED" end)"' build/drill/report.json 2>/dev/null ||
		cat build/drill/report.json
	echo "Report: build/drill/report.json; logs: build/e2e/drill/"
fi
# the report with plots (tools/drill-report.sh): build/drill/report.html
if [ -f build/e2e/drill/result.json ] &&
   bash tools/drill-report.sh build/e2e/drill build/drill >/dev/null; then
	echo "Report with plots: build/drill/report.html (throughput.png, pauses.png, epoch-bytes.png)"
else
	echo "drill: no report with plots (see above)" >&2
fi
seq_ok=false
[ "$(jq -r .invariants_ok build/drill/report.json)" = true ] && seq_ok=true
$demo || { $seq_ok; exit; }

say "Now the real job: PostgreSQL 15 in the guest, its disk served by remusdbd over NBD and replicated per epoch."
say "Four clients run the ledger workload (every COMMIT the server acknowledges is journaled), pgbench runs beside them."
say "The primary loses power at a random moment under that load; afterwards every acknowledged commit must be there, pg_amcheck must pass."
bash tests/drill-pg.sh --drills 1 >build/drill/pg-demo.log 2>&1
pg_rc=$?
jq -r '.per_drill[0] as $d | "
What happened:
  acknowledged commits        : \(.acked_commits), lost \(.lost_commits), phantom \(.phantom_txns), half-applied \(.partial_txns)
  disks before the pull       : \(if .disks_equal_frozen then "byte-equal (guest filesystem frozen)" else "DIFFERENT" end)
  clients                     : \(if .broken_connections == 0 then "all kept their connections" else "\(.broken_connections) lost their connection" end); no commit for \(.failover_ms_max) ms across the failover
  backup restored the VM      : from epoch \($d.committed_epoch // "?") in \(($d.restore_ms // 0) * 10 | round / 10) ms
  ledger throughput           : \(.tps_before_mean) commits/s before, \(.tps_after_mean) after (unprotected now)
  pg_amcheck on the backup    : \(if .amcheck_ok then "clean" else "CORRUPTION" end)
  invariants                  : \(if .invariants_ok then "OK" else "VIOLATED" end)"' build/drill/pg-report.json 2>/dev/null ||
	tail -20 build/drill/pg-demo.log
echo "Report: build/drill/pg-report.json; logs: build/e2e/drillpg1/, build/drill/pg-demo.log"

say "The same database under commit protection: only COMMIT's answer waits for the backup, the rest leaves at once."
say "Two more clients hold a transaction whose rows they have seen and ask to commit only after the pull: it must not survive."
say "After the restore, every client gets an answer or an error within 2 s; connections that saw output the backup never had are reset."
RDB_RUN=drillcp timeout --kill-after=10 900 bash tests/e2e/pg-cp-writes.sh >build/drill/cp-demo.log 2>&1
cp_rc=$?
if [ -f build/e2e/drillcp/result.json ]; then
	cp build/e2e/drillcp/result.json build/drill/cp-report.json
	jq -r '"
What happened:
  acknowledged commits        : \(.acked_commits), lost \(.lost_commits), phantom \(.phantom_txns), half-applied \(.partial_txns)
  speculative transactions    : \(if .speculative_committed == 0 then "none committed on the backup" else "\(.speculative_committed) COMMITTED" end)
  clients after the restore   : every one answered within \(.max_client_wait_ms) ms (\(.errors_after_pull) aborted with an error, \(.flows.reset) connections reset, \(.flows.consistent) carried on)
  held on the primary         : \(.output.held_marked.frames) commit acknowledgements; \(.output.released_at_once.frames) frames left at once
  ledger throughput           : \(.tps_before) commits/s before the pull
  invariants                  : \(if .invariants_ok then "OK" else "VIOLATED" end)"' build/drill/cp-report.json
else
	tail -20 build/drill/cp-demo.log
fi
echo "Report: build/drill/cp-report.json; logs: build/e2e/drillcp/, build/drill/cp-demo.log"
$seq_ok && [ $pg_rc -eq 0 ] && [ $cp_rc -eq 0 ]
