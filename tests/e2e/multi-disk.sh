#!/usr/bin/env bash
# A VM with three disks (disk + two extra_disk), one epoch order over all
# of them (I4 across disks), end to end with a power pull.
#
# The guest's seqsrv writes record N to disk (N - 1) mod 3 (vda, vdb,
# vdc), O_DIRECT + fdatasync, before it sends line N to the client: one
# log striped over three disks, as a DBMS's WAL, data and tablespace
# files are.  The third disk is a qcow2 image over a raw backing file
# (an absolute path, on both hosts): remusdbd serves the qcow2 file's
# bytes, QEMU's qcow2 driver runs on the NBD export, on the backup too.
# Checked:
#  - a read-only image in the QEMU arguments (not replicated) is checked
#    on the backup against its own file of that path (roimage.h), and so
#    is the qcow2 disk's backing file;
#  - both daemons know three disks (the primary's devices, the backup's
#    three replicas), and each replica equals its primary image once the
#    initial copy is committed (the guest idle: seqsrv waits for its
#    client before it writes);
#  - the power pull: the client's sequence contiguous on one connection
#    (I1), the restored guest carries on;
#  - the backup's three replicas (the restored guest's disks; the qcow2
#    one read through qemu-img, its backing file under it) hold every
#    record 1..LAST the client received, and no record past a missing one
#    (an epoch committed on one disk but not on another would leave
#    exactly that); the restored QEMU opened the third with the qcow2
#    driver, and qemu-img check finds the replica clean;
#  - failback: the survivor protects the VM back to the repaired host
#    (three disks handed from the backup role to the primary role), each
#    disk resynced on its own (only what may differ sent), each new
#    replica equals the survivor's disk, and after the survivor's
#    power pull the original host runs the VM with every record.
# Shown red with the backup's commit leaving disk 1's part of every epoch
# unapplied (rdb_diskbuf_apply_set skipping set[1]): see the commit.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-md$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
[ -x "$RDB_HELPERS/seqsrv" ] && [ -x "$RDB_HELPERS/diskseq" ] ||
	rdb_fail "build/helpers/seqsrv or diskseq missing (make all)"
command -v qemu-img >/dev/null || rdb_fail "qemu-img missing (tools/setup-deps.sh)"
guest=$RDB_ROOT/build/guest-multidisk
bash "$RDB_ROOT/tools/mkguest.sh" --out "$guest" --static "$RDB_HELPERS/seqsrv" \
	--module virtio_blk >&2 || rdb_fail "guest build failed"

cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
img0=$CL_DIR/disk0-src.img
truncate -s 64M "$img0"
# and a read-only image (not replicated: the backup checks its own copy)
ro=$CL_DIR/ro.img
head -c $((3 << 20)) /dev/urandom > "$ro"
export CL_QEMU_MORE="-drive
if=none,id=ro0,readonly=on,format=raw,file=$ro
-device
virtio-blk-pci,drive=ro0"
# the third disk: a qcow2 overlay on a raw backing file of 8 MiB
base=$CL_DIR/base.raw
head -c $((8 << 20)) /dev/urandom > "$base"
qemu-img create -q -f qcow2 -b "$base" -F raw "$CL_DIR/disk2-src.qcow2" 64M ||
	rdb_fail "qemu-img create"
export CL_GUEST=$guest CL_DISK_IMAGE=$img0 CL_EXTRA_DISKS=2 CL_EXTRA_DISK_MB=64
export CL_EXTRA_DISK_IMAGES="$CL_DIR/disk1-none $CL_DIR/disk2-src.qcow2"
export CL_EXTRA_DISK_FORMATS="raw qcow2"
truncate -s 64M "$CL_DIR/disk1-none"
CL_GUEST_RUN="/usr/bin/seqsrv --port $CL_SEQ_PORT --interval-us 20000 --disk /dev/vda --disk /dev/vdb --disk /dev/vdc" \
	cluster_vm_up 25 || rdb_fail "VM setup failed (logs in $CL_DIR)"

pst=$(cl_status pri "$CL_VM" --json) || rdb_fail "no primary status"
bst=$(cl_status bak "$CL_VM" --json) || rdb_fail "no backup status"
ndev=$(jq '[.vms[0].devices[] | select(.kind == "disk")] | length' <<<"$pst")
[ "$ndev" = 3 ] || rdb_fail "the primary protects $ndev disk devices, not 3: $(jq -c .vms[0].devices <<<"$pst")"
nrep=$(jq '.vms[0].disks | length' <<<"$bst")
[ "$nrep" = 3 ] || rdb_fail "the backup keeps $nrep replicas, not 3"
grep -q "read-only image $ro: the same here" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup did not check the read-only image against its own"
grep -q "read-only image $base: the same here" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup did not check the qcow2 disk's backing file against its own"
pri_imgs=("$CL_DIR/pri/$CL_VM.disk.img" "$CL_DIR/pri/$CL_VM.disk1.img" "$CL_DIR/pri/$CL_VM.disk2.img")
mapfile -t bak_imgs < <(jq -r '.vms[0].disks[].replica' <<<"$bst")
for k in 0 1 2; do
	wait_for 20 "disk $k's replica equal to the primary's image" \
		cmp -s "${pri_imgs[$k]}" "${bak_imgs[$k]}" ||
		rdb_fail "disk $k: the replica ${bak_imgs[$k]} differs from ${pri_imgs[$k]}: $(cmp "${pri_imgs[$k]}" "${bak_imgs[$k]}" 2>&1 | head -n 1)"
done

cl_seq_start 60
checker=$CL_CHECKER
sleep 6
cluster_pull_power "$run"
kill -USR1 "$checker"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
sleep 5
kill -INT "$checker" 2>/dev/null
wait_pid 15 "$checker"
[ -s "$CL_DIR/seqcheck.json" ] || rdb_fail "no result from the client ($(tail -n 2 "$CL_DIR/seqcheck.log"))"
jq -e "$CL_SEQ_JQ"' seq_ok' "$CL_DIR/seqcheck.json" >/dev/null ||
	rdb_fail "the client's sequence is broken: $(jq -c . "$CL_DIR/seqcheck.json")"
last=$(jq -r .last "$CL_DIR/seqcheck.json")
# The client gone, seqsrv's next write fails and it exits: the restored
# guest writes nothing more to its disks.
wait_for 20 "seqsrv ended in the restored guest" \
	grep -q "REMUSDB-EXIT" "$CL_DIR/bak/state/$CL_VM/console.log" ||
	rdb_fail "seqsrv did not end in the restored guest"
# rawview QCOW2 OUT: the guest's view of a qcow2 image (its backing file
# under it), for diskseq
rawview() {
	qemu-img convert -U -f qcow2 -O raw "$1" "$2" || rdb_fail "qemu-img convert $1"
}
pgrep -af "qemu-system.*$CL_DIR/bak/" | grep -q "id=disk2,driver=qcow2,file.driver=nbd" ||
	rdb_fail "the restored QEMU did not open disk 2 with the qcow2 driver: $(pgrep -af "qemu-system.*$CL_DIR/bak/" | tr ' ' '\n' | grep disk2)"
qemu-img check -U -q "${bak_imgs[2]}" || rdb_fail "qemu-img check: the qcow2 replica is not clean"
rawview "${bak_imgs[2]}" "$CL_DIR/bak-disk2.raw"
check=$("$RDB_HELPERS/diskseq" --check-set "$last" "${bak_imgs[0]}" "${bak_imgs[1]}" "$CL_DIR/bak-disk2.raw")
rc=$?
[ $rc -le 1 ] || rdb_fail "diskseq --check-set: $check"
echo "$check" | tee "$CL_DIR/disks.json"
jq -e '.missing == 0 and .after_gap == 0' <<<"$check" >/dev/null ||
	rdb_fail "the restored disks are not one epoch's state: $check (the client had 1..$last)"

# Failback: the old host repaired, the survivor protects the VM back to
# it (its three disks pass from the backup role to the primary role; each
# is resynced against the old host's image of it), the replicas there equal
# the survivor's disks, then the survivor's power: the VM runs on the
# original host with every record.
cl_protect_back "$run"
bst=$(cl_status bak "$CL_VM" --json) || rdb_fail "no survivor status"
pst=$(cl_status pri "$CL_VM" --json) || rdb_fail "no new backup status"
ndev=$(jq '[.vms[0].devices[] | select(.kind == "disk")] | length' <<<"$bst")
[ "$ndev" = 3 ] || rdb_fail "the survivor protects $ndev disk devices, not 3"
# every disk resynced on its own lineage entry: the old host's image of it
# is the new replica, and only what may differ was sent
jq -c '[.vms[0].devices[] | select(.kind == "disk") | {id, initial_copy}]' <<<"$bst" | tee "$CL_DIR/resync.json"
for k in 0 1 2; do
	jq -e --argjson k "$k" '[.vms[0].devices[] | select(.kind == "disk")][$k].initial_copy
		| .resync == true and .blocks_that_could_differ * 4096 < 16 * 1048576' <<<"$bst" >/dev/null ||
		rdb_fail "disk $k was not resynced (copied whole, or most of it could differ): $(jq -c --argjson k "$k" '[.vms[0].devices[] | select(.kind == "disk")][$k].initial_copy' <<<"$bst")"
	grep -q "disk $k replica: this host's old image" "$CL_DIR/pri/remusdbd.log" ||
		rdb_fail "the old host did not take its own image of disk $k as the base"
done
surv_imgs=("$CL_DIR/bak/state/$CL_VM/disk.img" "$CL_DIR/bak/state/$CL_VM/disk1.img" "$CL_DIR/bak/state/$CL_VM/disk2.img")
mapfile -t back_imgs < <(jq -r '.vms[0].disks[].replica' <<<"$pst")
[ "${#back_imgs[@]}" = 3 ] || rdb_fail "the new backup keeps ${#back_imgs[@]} replicas, not 3"
for k in 0 1 2; do
	wait_for 20 "disk $k's new replica equal to the survivor's disk" \
		cmp -s "${surv_imgs[$k]}" "${back_imgs[$k]}" ||
		rdb_fail "disk $k: ${back_imgs[$k]} differs from ${surv_imgs[$k]}: $(cmp "${surv_imgs[$k]}" "${back_imgs[$k]}" 2>&1 | head -n 1)"
done
netns_power_pull "$run" bak
cl_ctl pri wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "the original host did not take the VM back (see $CL_DIR/pri/remusdbd.log)"
rawview "${back_imgs[2]}" "$CL_DIR/back-disk2.raw"
check2=$("$RDB_HELPERS/diskseq" --check-set "$last" "${back_imgs[0]}" "${back_imgs[1]}" "$CL_DIR/back-disk2.raw")
[ $? -le 1 ] || rdb_fail "diskseq --check-set: $check2"
jq -e '.missing == 0 and .after_gap == 0' <<<"$check2" >/dev/null ||
	rdb_fail "after the failback the disks are not whole: $check2"
echo "PASS: 3 disks (the third qcow2 on a backing file), replicas equal after the initial copy; power pull: sequence contiguous to $last, every record on the restored disks, none past a gap; protected back (3 disks equal), failed back with every record"
