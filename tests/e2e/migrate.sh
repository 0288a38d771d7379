#!/usr/bin/env bash
# A planned switchover there and back (remusdbctl migrate): the guest
# streams 1, 2, 3, ... over one TCP connection; the operator migrates the
# protected VM to its backup at 25 ms epochs, protects it back to the
# old host, and migrates it home again.  The client must see the
# sequence contiguous on its one connection (no gap, no repeat), and a
# stall around either handover shorter than the failure detector's
# timeout: the handover never waits for the detector.  How long the stall
# is (issue 12's goal: <= 100 ms at 25 ms epochs) is measured by `make
# bench` (tests/bench/switchover.sh), over several handovers and split
# into the product's part and the restored guest's own: under TCG the
# latter is most of it, and it varies from run to run (a timed bound here
# failed one run in ten).  result.json reports both parts for these two.
# After each handover the old host's QEMU is gone (one running copy) and
# the witness names the new owner.  First, with the witness down, the backup refuses the handover:
# the guest runs on where it was, protected, the sequence unbroken.
#
# Output: build/e2e/<run>/result.json.  Exit 0 pass, 1 fail, 77 skipped.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-mg$$}
ckpt=${CKPT_MS:-25}
# the cluster's failover_timeout_ms (tests/lib/cluster.sh)
stall_max_ms=${CL_FAILOVER_TIMEOUT_MS:-1000}
trap 'cluster_down "$run"' EXIT
rdb_require_root

# CPU placement as in failover-seq.sh (the deployment the pause figures
# assume): the daemons on CPU 0, the guest's QEMU on CPU 1, the one the
# backup restores too (guest_cpus).
if [ "$(nproc)" -ge 2 ]; then
	export CL_DAEMON_CPUS=0 CL_GUEST_CPUS=1 CL_BAK_CPUS=0-1
fi
cluster_up "$run" "$ckpt" || rdb_fail "setup failed (logs in $CL_DIR)"
cl_seq_start 120 --mark-window 3
checker=$CL_CHECKER
sleep 3

qemu_pid=$(cat "$CL_DIR/pri/qemu.pid")
kill -0 "$qemu_pid" || rdb_fail "no primary QEMU"
# a mark with nothing happening: the stall a client sees anyway (its
# window, 3 s, ends before the first handover)
kill -USR1 "$checker"
sleep 3.5

# ---- refused: the witness is down, the backup cannot claim the VM ----
cl_stop_witness
cl_ctl pri migrate "$CL_VM" --timeout 30 > "$CL_DIR/migrate-0.out" 2>&1 &&
	rdb_fail "migrate succeeded with the witness down: $(cat "$CL_DIR/migrate-0.out")"
cat "$CL_DIR/migrate-0.out"
grep -q "protected (the backup refused the handover: the witness did not answer" \
	"$CL_DIR/migrate-0.out" || rdb_fail "no refusal with its reason"
cl_ctl pri wait "$CL_VM" protected --timeout 5 || rdb_fail "not protected after the refusal"
cl_ctl bak wait "$CL_VM" protected --timeout 5 || rdb_fail "the backup left protected"
kill -0 "$qemu_pid" || rdb_fail "the primary's QEMU is gone after a refusal"
cl_start_witness || rdb_fail "the witness did not come back"
sleep 2

# ---- there: pri -> bak ----
kill -USR1 "$checker"
cl_ctl pri migrate "$CL_VM" --timeout 30 > "$CL_DIR/migrate-1.out" ||
	rdb_fail "migrate to bak failed: $(cat "$CL_DIR/migrate-1.out")"
cat "$CL_DIR/migrate-1.out"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "the backup does not run the VM (see $CL_DIR/bak/remusdbd.log)"
# one running copy: the old primary's QEMU is gone, the witness agrees
wait_for 5 "the old primary's QEMU gone" \
	sh -c "! kill -0 $qemu_pid 2>/dev/null || grep -q '^State:.*Z' /proc/$qemu_pid/status" ||
	rdb_fail "the old primary's QEMU (pid $qemu_pid) still runs"
case "$(cl_witness_get)" in
*owner=bak\ state=running*) ;;
*) rdb_fail "the witness does not name bak as the owner: $(cl_witness_get)" ;;
esac
grep -q "protected -> migrating.*operator migrate" "$CL_DIR/pri/remusdbd.log" &&
grep -q "migrating -> migrated.*the VM runs on 10.78.0.2:7788 from epoch" "$CL_DIR/pri/remusdbd.log" &&
grep -q "protected -> failing-over.*planned migration" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the handover's state changes are not logged"
# nothing of the guest was rolled back: no failover event, no flow check
grep -q "failover event sent" "$CL_DIR/bak/remusdbd.log" &&
	rdb_fail "a failover event went to a guest that lost nothing"
cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status-1.json"
sleep 3

# ---- protect it back to pri, then home again: bak -> pri ----
cl_ctl bak protect "$CL_VM" peer=10.78.0.1:7788 || rdb_fail "protect back refused"
cl_ctl bak wait "$CL_VM" protected --timeout 60 || rdb_fail "not protected back"
cl_ctl pri wait "$CL_VM" protected --timeout 10 || rdb_fail "pri is not the backup"
grep -q "handed-over copy attached here is detached" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the handed-over entry on pri was not replaced by the backup role"
sleep 3
rq=$(pgrep -f "qemu-system.*$CL_DIR/bak/" | head -n 1)
[ -n "$rq" ] || rdb_fail "no restored QEMU on bak"
kill -USR1 "$checker"
cl_ctl bak migrate "$CL_VM" --timeout 30 > "$CL_DIR/migrate-2.out" ||
	rdb_fail "migrate home failed: $(cat "$CL_DIR/migrate-2.out")"
cat "$CL_DIR/migrate-2.out"
cl_ctl pri wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "pri does not run the VM again (see $CL_DIR/pri/remusdbd.log)"
wait_for 5 "bak's QEMU gone" sh -c "! kill -0 $rq 2>/dev/null" ||
	rdb_fail "bak's QEMU (pid $rq) still runs"
case "$(cl_witness_get)" in
*owner=pri\ state=running*) ;;
*) rdb_fail "the witness does not name pri as the owner: $(cl_witness_get)" ;;
esac
cl_ctl pri status "$CL_VM" --json > "$CL_DIR/pri-status-2.json"
sleep 3
kill -INT "$checker" 2>/dev/null
wait_pid 15 "$checker"

jq -n --slurpfile c "$CL_DIR/seqcheck.json" --arg max "$stall_max_ms" \
	--slurpfile b "$CL_DIR/bak-status-1.json" --slurpfile p "$CL_DIR/pri-status-2.json" '
	$c[0] as $c |
	{ gaps: $c.gaps, dups: $c.dups, regressions: $c.regressions,
	  corrupt: $c.corrupt, connection_lost: $c.connection_lost,
	  values: $c.values, max_stall_ms: $c.max_stall_ms,
	  quiet_stall_ms: $c.marks[0].stall_ms,
	  migrate_stall_ms: [$c.marks[1:][] | .stall_ms],
	  migrate_stall_guest_ms: [$c.marks[1:][] | .stall_guest_ms],
	  migrate_outage_ms: [$c.marks[1:][] | if .stall_guest_ms < 0 then null
			      else (.stall_ms - .stall_guest_ms) * 10 | round / 10 end],
	  first_value_after_migrate_ms: [$c.marks[1:][] | .next_ms],
	  restore_ms: [$b[0].vms[0].failover_ms, $p[0].vms[0].failover_ms],
	  epoch_ms: 25,
	  invariants_ok: ($c.gaps == 0 and $c.dups == 0 and $c.regressions == 0
			  and $c.corrupt == 0 and ($c.connection_lost | not)
			  and $c.values_after_stall > 0
			  and ([$c.marks[] | .next_ms >= 0] | all)),
	  stall_ok: ([$c.marks[1:][] | .stall_ms < ($max | tonumber)] | all) }' > "$CL_DIR/result.json" ||
	rdb_fail "no result from the client"
cat "$CL_DIR/result.json"
[ "$(jq -r .invariants_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "sequence broken across the handovers (logs in $CL_DIR)"
[ "$(jq -r .stall_ok "$CL_DIR/result.json")" = true ] ||
	rdb_fail "the client stalled $(jq -c .migrate_stall_ms "$CL_DIR/result.json") ms around the handovers: as long as the failure detector's timeout ($stall_max_ms ms)"
echo "PASS: migrated there and back at ${ckpt} ms epochs: sequence contiguous on one connection, client stalls $(jq -c .migrate_stall_ms "$CL_DIR/result.json") ms (the restored guest's own part $(jq -c .migrate_stall_guest_ms "$CL_DIR/result.json"), the rest $(jq -c .migrate_outage_ms "$CL_DIR/result.json"))"

