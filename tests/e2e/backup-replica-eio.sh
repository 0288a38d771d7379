#!/usr/bin/env bash
# A backup whose replica fails an epoch's writes (fault injection
# replica-eio: the next epoch with a disk change fails its replay at its
# first record, as an I/O error of the replica's disk would).  The replay
# runs on the backup's commit thread; its failure must come back to the
# primary as before: the epoch is not acknowledged, the backup refuses
# the link naming the error, the primary degrades and runs on with
# nothing lost, and the replica, written in part, is never served: a
# forced failover is refused with the reason (docs/protocol.md).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

NM_TOTAL_S=20
nemesis_start "${RDB_RUN:-re$$}"
sleep 5
[ "$(nemesis_state pri)" = protected ] ||
	rdb_fail "not protected before the fault ($(nemesis_state pri))"
nemesis_fault_now
cl_ctl bak inject "$CL_VM" replica-eio || rdb_fail "fault injection refused"
nemesis_wait_state pri degraded 15 || rdb_fail "the primary did not drop protection"
grep -q "EPOCH_END of epoch [0-9]*: .*injected failure" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup's log does not name the failed replay"
grep -q "protected -> .*backup reported: EPOCH_END of epoch [0-9]*: .*injected failure" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "the primary's log does not say why it degraded"
bj=$(cl_status bak "$CL_VM" --json) || rdb_fail "backup status"
[ "$(jq -r '.vms[0].disk.consistent' <<<"$bj")" = false ] ||
	rdb_fail "the replica, written in part, is not marked inconsistent: $(jq -c '.vms[0].disk' <<<"$bj")"
msg=$(cl_ctl bak failover "$CL_VM" --force 2>&1) &&
	rdb_fail "a forced failover onto the torn replica was accepted"
grep -q "inconsistent" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the refused failover does not say the replica is inconsistent ($msg)"
[ "$(nemesis_state pri)" = degraded ] ||
	rdb_fail "the primary's copy does not run on ($(nemesis_state pri))"
nemesis_finish replica-eio
[ "$(jq -r .frames_from_bak "$CL_DIR/result.json")" = 0 ] ||
	rdb_fail "frames of the guest came from the backup's host"
echo "PASS: a replica write error on the backup's commit thread: the primary degraded naming it, the torn replica was refused for failover, $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost"
