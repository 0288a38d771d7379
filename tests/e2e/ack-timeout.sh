#!/usr/bin/env bash
# A backup that answers heartbeats but does not commit: one epoch's
# replica replay takes 3 s (fault injection slow-replica), while
# ack_timeout_ms is 1.5 s.  Nothing else would notice: the backup's loop
# answers heartbeats, the primary's checkpoints go on, its output stays
# held.  The primary must raise an alarm once the oldest unacknowledged
# epoch has waited ack_timeout_ms, and treat the backup as lost: the
# decision at the witness (the backup, alive and not claiming, loses
# it), the held output released, the guest running on degraded.  The
# backup, once its commit ends, reads the primary's goodbye and does not
# fail over: one copy throughout.  (With the default, 5 x
# failover_timeout_ms, nemesis-backup-slow-disk's 3 s stall passes
# protected.)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"
. "$(dirname "$0")/../lib/metrics.sh"

run=${RDB_RUN:-at$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
nemesis_ping_guest --module virtio_blk || rdb_fail "guest build failed"
nemesis_blank_disk 64 || rdb_fail "no disk image"
export CL_DAEMON_EXTRA="ack_timeout_ms = 1500"
cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
nemesis_watch_start 120
sleep 2
cl_ctl bak inject "$CL_VM" slow-replica || rdb_fail "fault injection refused"
t0=$(date +%s%3N)
nemesis_wait_state pri degraded 10 ||
	rdb_fail "the primary stayed $(nemesis_state pri) through a 3 s unacknowledged epoch"
t1=$(date +%s%3N)
reason=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason')
echo "primary degraded $((t1 - t0)) ms after the injection: $reason"
grep -q "state protected -> deciding after [0-9.]* s: the backup did not acknowledge epoch [0-9]* within ack_timeout_ms (1500 ms)" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "the primary did not decide for the unacknowledged epoch"
grep -q "won the failover decision" <<<"$reason" || rdb_fail "no decision before the release"
grep -q "ALARM: epoch [0-9]* has waited [0-9]* ms for the backup's acknowledgement" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "no alarm in the primary's log"
[ "$(cl_ctl pri status "$CL_VM" --json | jq '.vms[0].ack_timeouts')" = 1 ] ||
	rdb_fail "ack_timeouts is not 1"
ack_metric() { [ "$(metrics_value "$CL_DIR/pri/metrics.prom" remusdb_ack_timeouts_total)" = 1 ]; }
wait_for 3 "remusdb_ack_timeouts_total 1 in the metrics file" ack_metric ||
	rdb_fail "no remusdb_ack_timeouts_total 1 in the metrics"
nemesis_wait_state bak degraded 10 || rdb_fail "the backup did not end its protection"
sleep 3
[ "$(nemesis_state bak)" = degraded ] || rdb_fail "the backup is $(nemesis_state bak)"
[ "$(nemesis_state pri)" = degraded ] || rdb_fail "the primary is $(nemesis_state pri)"
nemesis_watch_end
jq -e '.ports["port-bak"].frames == 0' "$CL_DIR/macwatch.json" >/dev/null ||
	rdb_fail "the guest's MAC came from the backup's host"
echo "PASS: an epoch unacknowledged for ack_timeout_ms raised the alarm and went through the decision ($((t1 - t0)) ms after the stall began); one copy"
