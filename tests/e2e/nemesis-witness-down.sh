#!/usr/bin/env bash
# Nemesis 5: the witness down alone: protection carries on (checkpoints
# acknowledged, both hosts protected).  Then the primary's power pulled:
# the backup does not fail over by itself and says why; the operator's
# `remusdbctl failover --force` restores the VM.  Checks of nemesis.sh.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

NM_TOTAL_S=40
nemesis_start "${RDB_RUN:-nw$$}"
sleep 5
cl_stop_witness
echo "stopped the witness"
e0=$(cl_ctl pri status "$CL_VM" --json | jq .vms[0].committed_epoch)
sleep 4
e1=$(cl_ctl pri status "$CL_VM" --json | jq .vms[0].committed_epoch)
[ "$(nemesis_state pri)" = protected ] && [ "$(nemesis_state bak)" = protected ] ||
	rdb_fail "protection did not carry on without the witness: primary $(nemesis_state pri), backup $(nemesis_state bak)"
[ "$e1" -gt $((e0 + 50)) ] || rdb_fail "checkpoints stalled without the witness ($e0 -> $e1)"
nemesis_fault_now
cluster_pull_power "$NM_RUN"
echo "pulled the primary's power with the witness down"
nemesis_wait_state bak deciding 10 || rdb_fail "the backup did not notice"
sleep 4
[ "$(nemesis_state bak)" = deciding ] ||
	rdb_fail "the backup went $(nemesis_state bak) without the witness"
grep -q "the witness did not decide.*not failing over without it" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup's log does not say why it waits"
cl_ctl bak failover "$CL_VM" >/dev/null 2>&1
[ "$(nemesis_state bak)" = deciding ] || rdb_fail "failover without --force did not wait for the witness"
cl_ctl bak failover "$CL_VM" --force || rdb_fail "failover --force refused"
nemesis_wait_state bak failed-over 10 || rdb_fail "failover --force did not restore"
nemesis_finish witness-down
echo "PASS: witness down: protection carried on ($e0 -> $e1 epochs in 4 s); after the primary's power pull the backup waited and said why, failover --force restored it; $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost"
