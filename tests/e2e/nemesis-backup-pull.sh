#!/usr/bin/env bash
# Nemesis 3: the backup's power pulled.  The primary holds its output
# until the witness lets it run on (it wins: the backup never claimed),
# then runs on unprotected (degraded).  The clients' stall stays within
# 2 s (failover timeout 1 s + the decision).  Checks of nemesis.sh.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

nemesis_start "${RDB_RUN:-nb$$}"
sleep 8
nemesis_fault_now
netns_power_pull "$NM_RUN" bak
echo "pulled the backup's power under load"
nemesis_wait_state pri degraded 10 || rdb_fail "the primary did not run on"
grep -q "deciding -> degraded.*won the failover decision at the witness" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "the primary ran on without the witness's decision"
nemesis_finish backup-pull
stall=$(jq -r .max_gap_ms "$CL_DIR/result.json")
[ "$stall" -le 2000 ] || rdb_fail "clients stalled $stall ms (over 2 s)"
[ "$(jq -r .frames_from_bak "$CL_DIR/result.json")" = 0 ] ||
	rdb_fail "frames of the guest came from the backup's host"
echo "PASS: backup lost: the primary won the decision and ran on, clients stalled at most $stall ms; $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost"
