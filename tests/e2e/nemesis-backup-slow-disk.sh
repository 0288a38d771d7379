#!/usr/bin/env bash
# Nemesis: the backup's disk is slow.  One epoch's replica writes and
# fdatasync take 3 s, three times the failover timeout (fault injection
# slow-replica: the backup's disk step for its next epoch starts 3 s
# late, where a replica's fdatasync waits behind another writer of the
# host's disk).  A slow disk is no dead host: the backup must go on
# answering heartbeats, so the VM stays protected on both hosts and only
# its output waits for that epoch's acknowledgement.  Then the primary's
# power is pulled: the backup fails over from its replica and image, no
# acknowledged commit lost, one copy (checks of nemesis.sh).
#
# Seen in CI before the disk step left the backup's event loop: a 1.3 s
# fdatasync of the replica, and the primary dropped protection ("backup
# silent for 1007 ms").  Shown red with the disk step run on the loop
# again (commit_start calling commit_finish inline): the primary
# degraded within the stall.
# check-long: a slow backup disk; make check has the backup's other
#   faults (backup-lost, backup-replica-eio, nemesis-backup-pull, ack-
#   timeout)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"
. "$(dirname "$0")/../lib/metrics.sh"

NM_TOTAL_S=30
nemesis_start "${RDB_RUN:-nd$$}"
sleep 6
[ "$(nemesis_state pri)" = protected ] && [ "$(nemesis_state bak)" = protected ] ||
	rdb_fail "not protected before the fault (pri $(nemesis_state pri), bak $(nemesis_state bak))"
cl_ctl bak inject "$CL_VM" slow-replica || rdb_fail "fault injection refused"
# The stall as the backup's own commit times show it, however the commit
# ran: one of 2 s or more (remusdb_checkpoint_commit_seconds)
slow_seen() {
	local f=$CL_DIR/bak/metrics.prom all le2
	all=$(metrics_value "$f" remusdb_checkpoint_commit_seconds_count) &&
		le2=$(metrics_value "$f" remusdb_checkpoint_commit_seconds_bucket le=2) &&
		[ -n "$all" ] && [ -n "$le2" ] && [ $((all - le2)) -ge 1 ]
}
wait_for 15 "a backup commit of 2 s or more" slow_seen ||
	rdb_fail "no commit of the backup took 2 s after slow-replica (see $CL_DIR/bak/remusdbd.log)"
# a second of checkpoints after it: protection carried on through it
sleep 1
for side in pri bak; do
	st=$(nemesis_state $side)
	[ "$st" = protected ] ||
		rdb_fail "$side is $st after the backup's slow disk, not protected ($(cl_ctl $side status "$CL_VM" --json | jq -r '.vms[0].state_reason'))"
	! grep -q "state protected -> " "$CL_DIR/$side/remusdbd.log" ||
		rdb_fail "$side left protection during the backup's slow disk: $(grep "state protected -> " "$CL_DIR/$side/remusdbd.log" | head -n 1)"
done
slow_ms=$(grep -o "the disk replica's writes and sync took [0-9]* ms" \
	"$CL_DIR/bak/remusdbd.log" | head -n 1 | awk '{print $(NF - 1)}')
[ "${slow_ms:-0}" -ge 3000 ] ||
	rdb_fail "the backup did not log a disk step of 3 s or more (${slow_ms:-none})"
acked=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].committed_epoch')
echo "the backup's disk step took $slow_ms ms; both hosts stayed protected (epoch $acked acknowledged)"
sleep 2
nemesis_fault_now
netns_power_pull "$NM_RUN" pri
echo "pulled the primary's power under load"
nemesis_wait_state bak failed-over 15 || rdb_fail "the backup did not fail over"
nemesis_finish backup-slow-disk
echo "PASS: the backup's disk stalled $slow_ms ms (3x the failover timeout) without a drop of protection; after the power pull $(jq -r .acked_commits "$CL_DIR/result.json") commits acknowledged, none lost, one copy"
