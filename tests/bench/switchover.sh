#!/usr/bin/env bash
# Planned switchover benchmark -> build/bench/switchover.json
#
# The client's stall at `remusdbctl migrate` (issue 12: "a stall <= 100 ms
# at 25 ms epochs"), over several handovers in one run, split into what
# the product causes and what the restored guest itself takes.
#
# The busybox sequence guest (seqsrv, a value every ~1 ms over one TCP
# connection) is protected at 25 ms epochs, placed as in migrate.sh (the
# daemons on CPU 0, the guest's QEMU on CPU 1), and handed over
# SWITCHOVER_ROUNDS times each way (default 3: 6 handovers): migrate,
# protect the survivor back to the old host, migrate again.  Before each
# handover a quiet mark, with nothing happening, gives the same run's
# baseline: the longest gap a client sees anyway at 25 ms epochs (output
# commit's bursts).
#
# Per handover, from seqcheck (tests/helpers/seqcheck.c):
#   stall_ms    the longest gap between two values within 3 s of it;
#   guest_ms    how long the guest ran between those two values, from the
#               guest's own clock in them (seqsrv.c).  Under TCG this is
#               mostly the restored QEMU translating the guest's code
#               again (its vCPU at 100% meanwhile, measured: see
#               docs/performance.md); under KVM it is near zero;
#   stopped_ms  the product's part: the guest stopped on the old host ->
#               running on the new one (the two daemons' log lines; both
#               "hosts" share this machine's clock): the last epoch's
#               checkpoint and ACK, the witness's claim, the restore;
#   restore_ms  of which the new host's decision -> guest running.
# The rest of a stall is how the held output of the last epoch and the
# guest's first values fall around the stop: stall - guest is not exactly
# stopped_ms (the last values before it were held up to an epoch).
# Goals (reported, not asserted; the end-to-end test migrate.sh asserts
# the invariants): stall p50 <= 100 ms; stopped p50 <= 25 ms, one epoch.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
rdb_require_root
out=build/bench
mkdir -p "$out"
run=${RDB_RUN:-switchover}
rounds=${SWITCHOVER_ROUNDS:-3}
ckpt=25
trap 'cluster_down "$run"' EXIT

if [ "$(nproc)" -ge 2 ]; then
	export CL_DAEMON_CPUS=0 CL_GUEST_CPUS=1 CL_BAK_CPUS=0-1
fi
rdb_build_guest
rdb_log "bench: switchover, $rounds round trips at $ckpt ms epochs"
cluster_up "$run" "$ckpt" || rdb_fail "setup failed (logs in $CL_DIR)"
cl_seq_start 900 --mark-window 3
checker=$CL_CHECKER
sleep 3

declare -A addr=([pri]=10.78.0.1:7788 [bak]=10.78.0.2:7788)
from=pri to=bak
: > "$CL_DIR/restores"
for ((i = 0; i < 2 * rounds; i++)); do
	kill -USR1 "$checker"	# quiet
	sleep 3.5
	kill -USR1 "$checker"	# handover
	cl_ctl "$from" migrate "$CL_VM" --timeout 30 > "$CL_DIR/migrate-$i.out" ||
		rdb_fail "migrate $from -> $to failed: $(cat "$CL_DIR/migrate-$i.out")"
	cl_ctl "$to" wait "$CL_VM" failed-over --timeout 30 ||
		rdb_fail "$to does not run the VM (see $CL_DIR/$to/remusdbd.log)"
	cl_ctl "$to" status "$CL_VM" --json | jq '.vms[0].failover_ms' >> "$CL_DIR/restores"
	sleep 3.5
	cl_ctl "$to" protect "$CL_VM" "peer=${addr[$from]}" ||
		rdb_fail "protect $to -> $from refused"
	cl_ctl "$to" wait "$CL_VM" protected --timeout 60 || rdb_fail "$to: not protected back"
	cl_ctl "$from" wait "$CL_VM" protected --timeout 10 || rdb_fail "$from is not the backup"
	sleep 2
	t=$from from=$to to=$t
done
kill -INT "$checker" 2>/dev/null
wait_pid 15 "$checker"

# "guest stopped after epoch" (old host) -> "failing-over -> failed-over"
# (new host), in the order they happened: ms
stop=
: > "$CL_DIR/stopped"
while read -r ts line; do
	t=$(date -u -d "$ts" +%s.%N) || rdb_fail "log time $ts"
	case "$line" in
	*"guest stopped after epoch"*) stop=$t ;;
	*) [ -n "$stop" ] && awk -v a="$t" -v b="$stop" 'BEGIN { printf "%.1f\n", (a - b) * 1000 }' >> "$CL_DIR/stopped"
	   stop= ;;
	esac
done < <(grep -h -e "guest stopped after epoch" -e "state failing-over -> failed-over" \
	"$CL_DIR/pri/remusdbd.log" "$CL_DIR/bak/remusdbd.log" | sort)
[ "$(wc -l < "$CL_DIR/stopped")" -eq $((2 * rounds)) ] ||
	rdb_fail "$(wc -l < "$CL_DIR/stopped") handovers in the logs, not $((2 * rounds))"

jq -n --slurpfile c "$CL_DIR/seqcheck.json" --slurpfile r <(jq -s . "$CL_DIR/restores") \
	--slurpfile s <(jq -s . "$CL_DIR/stopped") \
	--argjson epoch "$ckpt" '
	def p50: sort | .[(length - 1) / 2 | floor];
	$c[0] as $c | [$c.marks | to_entries[] | select(.key % 2 == 0) | .value] as $q |
	[$c.marks | to_entries[] | select(.key % 2 == 1) | .value] as $h |
	[$h | to_entries[] | { stall_ms: .value.stall_ms, guest_ms: .value.stall_guest_ms,
	    stopped_ms: ($s[0][.key] * 10 | round / 10),
	    restore_ms: ($r[0][.key] * 10 | round / 10) }] as $rows |
	{ epoch_ms: $epoch, handovers: ($rows | length),
	  sequence_ok: ($c.gaps == 0 and $c.dups == 0 and $c.regressions == 0
			and $c.corrupt == 0 and ($c.connection_lost | not)),
	  quiet_stall_ms: [$q[].stall_ms],
	  rows: $rows,
	  stall_ms_p50: ([$rows[].stall_ms] | p50), stall_ms_max: ([$rows[].stall_ms] | max),
	  guest_ms_p50: ([$rows[].guest_ms] | p50),
	  stopped_ms_p50: ([$rows[].stopped_ms] | p50), stopped_ms_max: ([$rows[].stopped_ms] | max),
	  quiet_stall_ms_p50: ([$q[].stall_ms] | p50),
	  stall_vs_quiet_p50: ((([$rows[].stall_ms] | p50) / ([$q[].stall_ms] | p50)) * 100 | round / 100),
	  goal_stall_p50_le_100ms: (([$rows[].stall_ms] | p50) <= 100),
	  goal_stopped_p50_le_one_epoch: (([$rows[].stopped_ms] | p50) <= $epoch) }' \
	> "$out/switchover.json" || rdb_fail "no result"
cat "$out/switchover.json"
[ "$(jq -r .sequence_ok "$out/switchover.json")" = true ] ||
	rdb_fail "the sequence broke across the handovers (logs in $CL_DIR)"
