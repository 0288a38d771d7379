#!/usr/bin/env bash
# I1 + I4-of-memory, end to end: the guest streams 1, 2, 3, ... over one TCP
# connection to a client; the primary loses power at a random moment; the
# client must see the sequence contiguous across the failover — no gap, no
# repeat, no line from an execution that was rolled back — on the same
# connection.
#
# Run with CPU placement (docs/operations.md), the deployment the pause
# figures assume: the daemons on CPU 0, the guest's QEMU on CPU 1 — the
# primary's by taskset, the one the backup restores by guest_cpus; both
# are checked.  The other tests run unplaced.
#
# Output: build/e2e/<run>/result.json.  Exit 0 pass, 1 fail, 77 skipped.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/drillreport.sh"

run=${RDB_RUN:-fo$$}
ckpt=${CKPT_MS:-25}
before_s=${PULL_AFTER_S:-}
after_s=${AFTER_S:-8}
trap 'cluster_down "$run"' EXIT

rdb_require_root
placed=
if [ "$(nproc)" -ge 2 ]; then
	# the backup's daemon may use both: the QEMU it restores must still
	# be on guest_cpus only, not on what it inherits
	export CL_DAEMON_CPUS=0 CL_GUEST_CPUS=1 CL_BAK_CPUS=0-1
	placed=1
fi
cluster_up "$run" "$ckpt" || rdb_fail "setup failed (logs in $CL_DIR)"
if [ -n "$placed" ]; then
	shared=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].placement.shared_cpus')
	[ "$shared" = "" ] || rdb_fail "placement: QEMU and remusdbd share CPUs '$shared'"
fi

# A random moment: not only "just after a checkpoint".
[ -n "$before_s" ] || before_s=$(awk -v r=$RANDOM 'BEGIN{printf "%.3f", 3 + (r % 4000) / 1000}')
total_s=$(awk -v a="$before_s" -v b="$after_s" 'BEGIN{printf "%d", a + b + 25}')
cl_seq_start "$total_s" --timeline "$CL_DIR/timeline.txt"
checker=$CL_CHECKER
# the operator's drill on the backup, armed before the pull
cl_ctl bak drill "$CL_VM" --timeout 90 --out "$CL_DIR/ctl-drill.json" \
	>"$CL_DIR/ctl-drill.log" 2>&1 &
driller=$!
wait_for 10 "remusdbctl drill armed" grep -q "drill armed" "$CL_DIR/ctl-drill.log" ||
	rdb_fail "remusdbctl drill did not arm: $(cat "$CL_DIR/ctl-drill.log")"
sleep "$before_s"
# The primary's own numbers, just before it dies.
cl_status pri "$CL_VM" --json > "$CL_DIR/pri-status.json" ||
	rdb_fail "primary not answering before the pull"
# the checkpoints before the pull, for the report's plots
cl_ctl pri epochs "$CL_VM" --count 4096 --json > "$CL_DIR/epochs.json" ||
	rdb_fail "the primary gave no epochs"
cluster_pull_power "$run"
# Marked once the links are down: the next value to arrive after the
# mark ends the outage the client saw (seqcheck's marks[0].next_ms).
kill -USR1 "$checker"
echo "pulled the primary's power at +${before_s}s"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
asked=$(date +%s.%N)
cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status.json"
# Let the client see the guest carry on, then stop it.
sleep "$after_s"
kill -INT "$checker" 2>/dev/null
wait_pid 15 "$checker"
checker_rc=$?

jq -n --slurpfile c "$CL_DIR/seqcheck.json" --slurpfile s "$CL_DIR/bak-status.json" \
	--slurpfile p "$CL_DIR/pri-status.json" --arg ckpt "$ckpt" --argjson asked "$asked" "$CL_SEQ_JQ"'
	$c[0] as $c | ($s[0].vms[0]) as $v | ($p[0].vms[0]) as $pv |
	{ gaps: $c.gaps, dups: $c.dups, regressions: $c.regressions,
	  corrupt: $c.corrupt, connection_lost: $c.connection_lost,
	  values: $c.values, last: $c.last,
	  values_after_failover: $c.values_after_stall,
	  failover_ms: ($c.marks[0].next_ms // -1),
	  max_stall_ms: $c.max_stall_ms,
	  restore_ms: $v.failover_ms, committed_epoch: $v.committed_epoch,
	  epoch_ms: ($ckpt | tonumber),
	  checkpoints_per_s: $pv.checkpoints_per_s,
	  pause_ms_p50: $pv.pause_ms_p50, pause_ms_p99: $pv.pause_ms_p99,
	  pull_at: $c.marks[0].at_real,
	  running_at: ($asked - $v.state_age_ms / 1000),
	  failover_at: ($asked - $v.state_age_ms / 1000 - $v.failover_ms / 1000),
	  invariants_ok: ($c | seq_ok) }' > "$CL_DIR/result.json" ||
	rdb_fail "no result from the client (rc $checker_rc)"
cat "$CL_DIR/result.json"
[ "$(jq -r .invariants_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "invariant violated (logs in $CL_DIR)"
# The drill report: the plots are made from what was recorded, and show
# the client streaming before the pull and again after the restore.
drill_report_check "$CL_DIR" "$CL_DIR/report"
# remusdbctl drill's record of the same failover, from the backup: the
# restore and epoch as status says, detection at least the failure
# timeout, and its least client stall within what the client measured
wait_pid 30 "$driller" || rdb_fail "remusdbctl drill failed: $(tail -n 3 "$CL_DIR/ctl-drill.log")"
cat "$CL_DIR/ctl-drill.log"
jq -e --slurpfile r "$CL_DIR/result.json" --slurpfile s "$CL_DIR/bak-status.json" '
	($s[0].vms[0]) as $v | $r[0] as $r |
	.outcome == "failed-over" and .committed_epoch == $v.committed_epoch and
	(.restore_ms - $v.failover_ms | fabs) < 0.01 and
	.detection_ms >= 1000 and .detection_ms < 5000 and
	.client_stall_ms_at_least >= .detection_ms and
	.client_stall_ms_at_least <= $r.failover_ms + 150 and
	(.running_at - $r.running_at | fabs) < 0.2 and
	([.states[].state] | index("failed-over")) != null' "$CL_DIR/ctl-drill.json" >/dev/null ||
	rdb_fail "remusdbctl drill's report disagrees with the test's: $(cat "$CL_DIR/ctl-drill.json")"
if [ -n "$placed" ]; then
	rq=$(pgrep -f "qemu-system.*$CL_DIR/bak/" | head -n 1)
	[ -n "$rq" ] || rdb_fail "no restored QEMU on the backup"
	cpus=$(taskset -c -p "$rq" | sed 's/.*: //')
	[ "$cpus" = "$CL_GUEST_CPUS" ] ||
		rdb_fail "the restored QEMU runs on CPUs $cpus, not guest_cpus = $CL_GUEST_CPUS"
	echo "placement: the restored QEMU runs on CPUs $cpus (guest_cpus)"
fi
# The restored VM is the only copy now: if its QEMU dies, the operator
# must hear of it (state failed, reason in the log), not find a zombie.
pkill -9 -f "qemu-system.*$CL_DIR/bak/" || rdb_fail "no restored QEMU on the backup"
cl_ctl bak wait "$CL_VM" failed --timeout 10 ||
	rdb_fail "the backup did not notice its restored QEMU died"
grep -q "failed-over -> failed.*the restored QEMU exited" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "no log line for the restored QEMU's exit"
echo "PASS: sequence contiguous across the failover (client outage $(jq -r .failover_ms "$CL_DIR/result.json") ms)"
