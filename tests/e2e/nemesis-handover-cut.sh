#!/usr/bin/env bash
# Nemesis: the replication link cut in the middle of a planned switchover
# (remusdbctl migrate), at its worst moment: the primary's guest stopped
# after epoch N, N committed on the backup, the handover request arrived
# and nobody has answered (fault injection on the backup: handover-cut).
# Neither side knows whether the other runs the VM; the witness decides,
# exactly as for a partition: either the primary runs on (degraded; the
# backup degraded, its prepared QEMU never run) or the backup (failed-
# over from N; the primary fenced).  Checks of tests/lib/nemesis.sh: the
# guest's MAC from one host then at most once from the other, 0
# acknowledged commits lost, 0 phantom or partial transactions.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

nemesis_start "${RDB_RUN:-nh$$}"
sleep 8
cl_ctl bak inject "$CL_VM" handover-cut || rdb_fail "fault injection refused"
nemesis_fault_now
cl_ctl pri migrate "$CL_VM" --timeout 10 > "$CL_DIR/migrate.out" 2>&1 &&
	rdb_fail "migrate says it succeeded: $(cat "$CL_DIR/migrate.out")"
cat "$CL_DIR/migrate.out"
grep -q "fault injection: the replication link is cut as the handover" \
	"$CL_DIR/bak/remusdbd.log" || rdb_fail "the fault did not fire"
deadline=$(( $(date +%s%3N) + 10000 ))
outcome=
while [ "$(date +%s%3N)" -lt "$deadline" ]; do
	p=$(nemesis_state pri) b=$(nemesis_state bak)
	if [ "$p" = degraded ] && [ "$b" = degraded ]; then outcome=primary; break; fi
	if [ "$p" = fenced ] && [ "$b" = failed-over ]; then outcome=backup; break; fi
	sleep 0.1
done
[ -n "$outcome" ] ||
	rdb_fail "no single copy running 10 s after the cut: primary $(nemesis_state pri), backup $(nemesis_state bak)"
echo "the $outcome runs on after the link was cut mid-handover"
nemesis_finish handover-cut
echo "PASS: link cut mid-handover: only the $outcome ran on; $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost; the guest's MAC switched hosts $(jq -r .emitter_switches "$CL_DIR/result.json") time(s)"
