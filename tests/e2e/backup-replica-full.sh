#!/usr/bin/env bash
# A backup whose disk fills while it takes the VM's disk (its state_dir is
# a 64 MiB tmpfs; the PostgreSQL guest's disk holds ~170 MiB of data):
# protection must end with a clear error naming the cause on both hosts,
# no epoch may be acknowledged, and the guest must run on unprotected —
# PostgreSQL answering its client, its own disk untouched by the failure.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-rf$$}
small=$RDB_ROOT/build/e2e/$run-small
cleanup() {
	cluster_down "$run"
	umount "$small" 2>/dev/null
	rmdir "$small" 2>/dev/null
	return 0
}
trap cleanup EXIT

rdb_require_root
cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
mkdir -p "$small"
mount -t tmpfs -o size=64m tmpfs "$small" || rdb_skip "a tmpfs mount"
CL_BAK_STATE_DIR=$small cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
if cluster_vm_up 25; then
	rdb_fail "the VM became protected on a backup without room for its disk"
fi
cl_ctl pri wait "$CL_VM" degraded --timeout 30 || rdb_fail "primary not degraded"
grep -q "DISK_WRITE of epoch 0: .*No space left on device" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup's log does not say its disk is full"
grep -q "protecting -> degraded.*backup reported: .*DISK_WRITE.*No space left on device" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "the primary's log does not say why"
acks=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].last_ack_age_ms')
[ "$acks" = null ] || rdb_fail "an epoch was acknowledged"
# The guest runs on, unprotected, its disk still served by the primary.
wait_for 90 "PostgreSQL ready" grep -q REMUSDB-PG-READY "$CL_DIR/pri/console.log" ||
	rdb_fail "PostgreSQL did not start in the guest"
out=$(timeout 30 ip netns exec "$(netns_name "$run" cli)" "$PGBIN/psql" -X -At \
	-h "$CL_GUEST_IP" -U postgres -d bench -c "SELECT count(*) FROM pgbench_accounts" 2>&1) ||
	rdb_fail "PostgreSQL does not answer its client: $out"
[ "$out" = 100000 ] || rdb_fail "unexpected answer: $out"
cl_ctl pri status "$CL_VM" --json | jq -c '.vms[0] | {state, state_reason, disk}'
echo "PASS: backup disk full during the disk copy: refused with the cause on both hosts; PostgreSQL runs on unprotected"
