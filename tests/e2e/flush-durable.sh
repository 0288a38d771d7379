#!/usr/bin/env bash
# The guest's flushes are durable on the primary's own disk while its VM
# is not protected.  (While it is, the backup's acknowledged replica
# carries them and the primary skips its own sync inside the pause:
# docs/performance.md.  This test guards the other side of that trade.)
#
# The primary's image sits on crashfs (tests/crashfs): only what was
# fdatasync()ed reaches the backing file, and killing crashfs loses the
# rest, as a power loss loses a disk's volatile cache.  The guest writes
# numbered records with O_DIRECT + fdatasync and prints "durable N" after
# each sync returns.  Power pull of the primary's host (QEMU, remusdbd,
# its disk server and crashfs, SIGKILLed together); then every record the
# guest was told is durable must be in the backing file, intact.
#
# Shown red: with the disk server's flush answered without a sync
# (flush_point returning 0 unprotected), the backing file held none of
# the records the guest had been told were durable.
#
# FD_MODE=protecting (flush-durable-protecting.sh): the power is pulled
# while the VM is being protected, during the disk's initial copy (768
# MiB of data behind the records), after the guest was told of records
# synced during it.  Until the guest stops for the initial state its
# output is not held (clients hear of its commits at once), so its
# flushes must still be synced here: before that state is committed no
# backup could run the VM.  Shown red with the replica taking over the
# flushes from the protection's start (rdb_disk_set_replicated in
# link_up): the records told durable during protecting were lost.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/crashfs.sh"

run=${RDB_RUN:-fd$$}
mode=${FD_MODE:-unprotected}
records=${FD_RECORDS:-300}
CRASH=$RDB_ROOT/build/e2e/$run.crashfs	# backing/ and mnt/
cleanup() {
	local rc=$?
	crashfs_cleanup "$rc"
	(exit $rc)
	cluster_down "$run"
}
trap cleanup EXIT

rdb_require_root
crashfs_check
[ -x "$RDB_HELPERS/diskseq" ] || rdb_fail "$RDB_HELPERS/diskseq missing (make all)"
guest=$RDB_ROOT/build/guest-disk
bash "$RDB_ROOT/tools/mkguest.sh" --out "$guest" --static "$RDB_HELPERS/diskseq" \
	--module virtio_blk >&2 || rdb_fail "guest build failed"

# Mounted before the hosts start (the disk server must see it).
crashfs_fresh
if [ "$mode" = protecting ]; then
	# data for the initial copy to carry, behind the records (from 8 MiB)
	truncate -s 1G "$CRASH/backing/disk.img"
	dd if=/dev/urandom of="$CRASH/backing/disk.img" bs=1M seek=8 \
		count="${FD_DATA_MB:-768}" conv=notrunc status=none ||
		rdb_fail "writing the disk's data"
else
	truncate -s 64M "$CRASH/backing/disk.img"
fi
crashfs_up || rdb_fail "crashfs did not mount"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"

export CL_GUEST=$guest CL_DISK_IMAGE=$CRASH/mnt/disk.img CL_DISK_AT=$CRASH/mnt/disk.img
CL_GUEST_RUN="/usr/bin/diskseq /dev/vda 5" CL_NO_PROTECT=1 cluster_vm_up 25 ||
	rdb_fail "VM setup failed (logs in $CL_DIR)"
con=$CL_DIR/pri/console.log
wait_for 120 "$records durable records on the guest's console" \
	grep -q "^durable $records\b" "$con" || {
	tail -5 "$con"
	rdb_fail "the guest did not write $records records"
}
if [ "$mode" = protecting ]; then
	before=$(grep -ao '^durable [0-9]*' "$con" | tail -n 1 | cut -d' ' -f2)
	cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "protect refused"
	# records synced while the disk's initial copy runs
	during=$((before + 60))
	wait_for 30 "record $during durable while protecting" \
		grep -q "^durable $during\b" "$con" || rdb_fail "the guest stopped writing"
	state=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0].state')
	[ "$state" = protecting ] ||
		rdb_fail "the VM is $state, not protecting, at the power pull"
fi
st=$(cl_status pri "$CL_VM" --json) || rdb_fail "no status"
syncs=$(jq '.vms[0].disk.syncs' <<<"$st")
flushes=$(jq '.vms[0].disk.flushes' <<<"$st")
# The power pull: the host's processes, then its "disk cache" (crashfs
# is outside the host's namespace; once the disk server is dead no sync
# can come, so killing it next is the same instant for the disk).
cluster_pull_power "$run"
crashfs_pull

# The last record the guest was told is durable, as the console shows it
# (the console log is the host's file: it outlives the guest).
last=$(grep -ao '^durable [0-9]*' "$con" | tail -n 1 | cut -d' ' -f2)
[ -n "$last" ] && [ "$last" -ge "$records" ] || rdb_fail "no durable records on the console"
img=$CRASH/backing/disk.img
# every record 1..last intact: "RDBSEQ01", N, N's low byte (seqrec.h)
check=$("$RDB_HELPERS/diskseq" --check "$img" "$last")
[ $? -le 1 ] || rdb_fail "diskseq --check $img: $check"
missing=$(jq -r .missing <<<"$check")
first_missing=$(jq -r .first_missing <<<"$check")
jq -n --argjson last "$last" --argjson missing "$missing" --argjson syncs "$syncs" \
	--argjson flushes "$flushes" '{ durable_records: $last, missing_after_power_loss: $missing,
	guest_flushes: $flushes, image_syncs: $syncs }' | tee "$CL_DIR/flush-durable.json"
[ "$missing" = 0 ] ||
	rdb_fail "$missing of $last records the guest was told were durable are not on the primary's disk after its power loss (first: $first_missing)"
[ "$syncs" -gt 0 ] || rdb_fail "the disk server never synced the image"
if [ "$mode" = protecting ]; then
	# every record told durable came before the initial state's stop:
	# QEMU's stream starts only after the disk's copy
	grep -q "QEMU connected its checkpoint stream" "$CL_DIR/pri/remusdbd.log" &&
		rdb_fail "the disk's copy ended before the power pull (give it more data: FD_DATA_MB)"
	echo "PASS: protecting, all $last records the guest synced survived the primary's power loss, $((last - before)) of them synced after protect ($flushes guest flushes, $syncs image syncs)"
	exit 0
fi
echo "PASS: unprotected, all $last records the guest synced survived the primary's power loss ($flushes guest flushes, $syncs image syncs)"
