#!/usr/bin/env bash
# A backup that refuses the primary's stream tells it so (ERROR), and
# the primary releases its held output at once and runs on unprotected:
# no decision at the witness, since the backup has given up.  So the
# backup must never go live from that protection but by the operator's
# --force: its last committed checkpoint is older than output already
# released (acknowledged commits would be lost), and the primary still
# runs (two copies).  The trigger here is an epoch whose disk writes
# pass disk_epoch_max_mb (1 MiB; the guest writes 8 MiB at once); a
# DISKREF that does not match or a malformed frame end the same way
# (refuse_link).  Then `remusdbctl failover vm1` on the backup, as an
# operator would try it, must be refused, and the guest's MAC must only
# ever come from the primary.  (docs/failure-modes.md)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/nemesis.sh"

run=${RDB_RUN:-gu$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
nemesis_ping_guest --module virtio_blk || rdb_fail "guest build failed"
nemesis_blank_disk 64 || rdb_fail "no disk image"
export CL_VM_EXTRA="disk_epoch_max_mb = 1"
cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
nemesis_watch_start 120
sleep 2
# 8 MiB in one direct write: an epoch or a few, each of more than 1 MiB
cl_console_cmd "dd if=/dev/urandom of=/dev/vda bs=8M count=1 iflag=fullblock oflag=direct" ||
	rdb_fail "console"
nemesis_wait_state bak degraded 20 || rdb_fail "the backup did not refuse the big epoch"
nemesis_wait_state pri degraded 10 || rdb_fail "the primary did not run on degraded"
reason=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state_reason')
echo "primary: $reason"
grep -q "backup reported" <<<"$reason" || rdb_fail "the primary does not say the backup gave up"
decisions=$(cl_ctl pri status "$CL_VM" --json | jq '.vms[0].decision.started')
[ "$decisions" = 0 ] || rdb_fail "the primary asked the witness ($decisions decisions): the test needs the release without one"
sleep 1
if cl_ctl bak failover "$CL_VM" >"$CL_DIR/failover.out" 2>&1; then
	rdb_fail "the backup accepted a failover of a protection it gave up: $(cat "$CL_DIR/failover.out")"
fi
grep -q "gave up backing up" "$CL_DIR/failover.out" ||
	rdb_fail "the refusal does not say why: $(cat "$CL_DIR/failover.out")"
echo "failover refused: $(cut -c1-200 "$CL_DIR/failover.out")"
# what a copy started there would have sent
sleep 4
state=$(nemesis_state bak)
[ "$state" = degraded ] || rdb_fail "the backup is $state, not degraded"
nemesis_watch_end
jq -e '.ports["port-bak"].frames == 0 and .ports["port-pri"].frames > 0' \
	"$CL_DIR/macwatch.json" >/dev/null || rdb_fail "the guest's MAC came from the backup's host"
echo "PASS: the backup gave up (epoch over disk_epoch_max_mb), the primary released and ran on, and the backup refused to fail over; the guest's MAC came only from the primary ($(jq -r '.ports["port-pri"].frames' "$CL_DIR/macwatch.json") frames)"
