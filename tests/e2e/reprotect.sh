#!/usr/bin/env bash
# Protect again after protection was dropped: the backup stops answering
# (SIGSTOP), the primary degrades, the backup comes back, the operator
# runs `remusdbctl protect` again — a new link, a new COLO run in the same
# QEMU — and the VM then survives a power pull: the client's sequence is
# contiguous on one connection through all of it.  While it is being
# protected again the client is not held up: the guest's output leaves
# at once until the guest stops for the initial state, so the longest
# gap the client sees then is shorter than the protection by at least
# half the time the guest ran before that stop (red when output is held
# from the protection's start: the gap is all of it).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-rp$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
cl_seq_start 90 --mark-window 3
checker=$CL_CHECKER
sleep 2
kill -STOP "$(cat "$CL_DIR/bak/remusdbd.pid")"
cl_ctl pri wait "$CL_VM" degraded --timeout 10 || rdb_fail "primary did not degrade"
kill -CONT "$(cat "$CL_DIR/bak/remusdbd.pid")"
cl_ctl bak wait "$CL_VM" degraded --timeout 10 || rdb_fail "backup did not see the link go"
sleep 2
kill -USR1 "$checker"
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "protect again refused"
cl_ctl pri wait "$CL_VM" protected --timeout 60 || rdb_fail "not protected again"
cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "backup not protected again"
grep -q "degraded -> protecting.*operator protect (again" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "no log line for the second protection"
sleep 3	# (past the protect mark's window: 3 s)
cluster_pull_power "$run"
kill -USR1 "$checker"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 || rdb_fail "no failover after protecting again"
sleep 5
kill -INT "$checker"
wait_pid 15 "$checker"
jq -c . "$CL_DIR/seqcheck.json"
jq -e '.gaps == 0 and .dups == 0 and .regressions == 0 and .corrupt == 0 and
       (.connection_lost | not) and .values_after_stall > 0 and
       (.marks[1].next_ms // -1) >= 0' "$CL_DIR/seqcheck.json" >/dev/null ||
	rdb_fail "sequence broken (see $CL_DIR)"
# How long the second protection took, how long of it the guest ran
# before QEMU stopped it for the initial state's last part (its output
# leaves meanwhile), and the client's longest gap in it.  Held output
# would make that gap all of the protection; not held, it is the stop
# and the backup's commit after it: shorter by the run before the stop.
log="$CL_DIR/pri/remusdbd.log"
took=$(sed -n 's/.*protecting -> protected after \([0-9.]*\) s: backup committed.*/\1/p' "$log" | tail -n 1)
[ -n "$took" ] || rdb_fail "no end of the second protection in the log"
ms_at() { date -d "$1" +%s%3N; }
t_start=$(ms_at "$(grep 'degraded -> protecting.*operator protect (again' "$log" | tail -n 1 | cut -d' ' -f1)")
line=$(grep 'initial state taken: .* stopped the guest' "$log" | tail -n 1)
stopped=$(sed -n 's/.*stopped the guest \([0-9.]*\) ms.*/\1/p' <<<"$line")
[ -n "$stopped" ] || rdb_fail "no initial state's stop in the log"
ran=$(awk -v a="$(ms_at "$(cut -d' ' -f1 <<<"$line")")" -v s="$stopped" -v t="$t_start" \
	'BEGIN { printf "%.0f", a - s - t }')
stall=$(jq -r '.marks[0].stall_ms' "$CL_DIR/seqcheck.json")
[ "$ran" -ge 200 ] ||
	rdb_fail "the guest ran $ran ms of the protection before its stop: too short to tell held output from a gap"
awk -v t="$took" -v s="$stall" -v r="$ran" 'BEGIN { exit !(s < t * 1000 - r / 2) }' ||
	rdb_fail "the client waited $stall ms while the VM was being protected ($took s, of which the guest ran $ran ms before its stop): its output was held"
echo "PASS: protected again after the backup was lost (in $took s, the guest running $ran ms of it before the initial state's stop; the client's longest gap meanwhile $stall ms); then a power pull: sequence contiguous (outage $(jq -r '.marks[1].next_ms' "$CL_DIR/seqcheck.json") ms)"
