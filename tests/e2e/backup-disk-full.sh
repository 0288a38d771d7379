#!/usr/bin/env bash
# A backup whose disk cannot hold the VM's RAM image (its state_dir is a
# 64 MiB tmpfs, the guest has 256 MiB): protection must fail with a clear
# error naming the cause on both hosts, nothing may be acknowledged, and
# the guest must run on, reachable, unprotected.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-df$$}
small=$RDB_ROOT/build/e2e/$run-small
cleanup() {
	cluster_down "$run"
	umount "$small" 2>/dev/null
	rmdir "$small" 2>/dev/null
	return 0
}
trap cleanup EXIT

rdb_require_root
mkdir -p "$small"
mount -t tmpfs -o size=64m tmpfs "$small" || rdb_skip "a tmpfs mount"
if CL_BAK_STATE_DIR=$small cluster_up "$run" 25; then
	rdb_fail "the VM became protected on a backup without room for its RAM"
fi
cl_ctl pri wait "$CL_VM" degraded --timeout 10 ||
	rdb_fail "primary not degraded"
grep -q "RAM image in .*: no space left on device" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup's log does not say its disk is full"
grep -q "protecting -> degraded.*backup reported: .*No space left on device" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "the primary's log does not say why"
acks=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].last_ack_age_ms')
[ "$acks" = null ] || rdb_fail "an epoch was acknowledged"
# The guest runs on: it boots and serves its client, unprotected.
wait_for 60 "guest ready" grep -q REMUSDB-GUEST-READY "$CL_DIR/pri/console.log" ||
	rdb_fail "guest did not boot"
ip netns exec "$(netns_name "$run" cli)" "$RDB_HELPERS/seqcheck" \
	--host "$CL_GUEST_IP" --port "$CL_SEQ_PORT" --duration 4 \
	--connect-timeout 20 >"$CL_DIR/seqcheck.json" 2>"$CL_DIR/seqcheck.log" ||
	rdb_fail "the guest is not serving its client"
jq -c . "$CL_DIR/seqcheck.json"
echo "PASS: full backup disk refused at setup; guest runs on unprotected"
