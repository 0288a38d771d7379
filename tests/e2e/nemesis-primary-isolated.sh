#!/usr/bin/env bash
# Nemesis 4: the primary cut from every network (switch port and
# replication link) but alive.  The backup wins the witness's decision and
# runs.  The old primary, unable to reach the witness, holds its output
# and pauses its guest; once reconnected it asks, loses, and stops its
# guest (fenced) — it never emits again.  Checks of nemesis.sh.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

nemesis_start "${RDB_RUN:-ni$$}"
sleep 8
nemesis_fault_now
netns_isolate "$NM_RUN" pri
echo "cut the primary from every network under load"
nemesis_wait_state bak failed-over 10 || rdb_fail "the backup did not take over"
# isolated: the primary cannot decide; it holds (deciding), nothing else
sleep 4
[ "$(nemesis_state pri)" = deciding ] ||
	rdb_fail "the isolated primary is $(nemesis_state pri), not deciding"
grep -q "no decision within hold_bound_ms.*guest paused" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "the isolated primary did not pause its guest at the hold bound"
netns_reconnect "$NM_RUN" pri
echo "reconnected the old primary"
nemesis_wait_state pri fenced 10 || rdb_fail "the old primary did not stop its copy"
nemesis_finish primary-isolated
echo "PASS: isolated primary: the backup ran on; the old primary held its output, paused, and stopped its guest once it reached the witness; $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost; the guest's MAC switched hosts $(jq -r .emitter_switches "$CL_DIR/result.json") time(s)"
