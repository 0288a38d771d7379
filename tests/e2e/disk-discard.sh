#!/usr/bin/env bash
# A protected guest discards 96 MiB of its disk at once (blkdiscard on a
# virtio-blk whose drive has discard=unmap): QEMU's NBD client sends the
# discard to remusdbd's disk server as one TRIM far over the 32 MiB
# maximum payload (its max_pdiscard is ~2 GiB).  The discard must
# succeed in the guest, the primary's image must read zeros there, and
# the backup's replica must equal the primary's image once the epoch is
# acknowledged.
#
# Shown red twice: with the server refusing TRIMs over 32 MiB (EINVAL, as
# before nbd.c split them), blkdiscard failed in the guest; with the disk
# server's ring refusing a ZERO over 1 MiB (as before diskring.c bounded
# only a record's data), the replica was given up and differed.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-dd$$}
# (not under build/: the Makefile includes every build/**/*.d, and the
# payload's hook directory is etc/remusdb.d)
d=$(mktemp -d /tmp/rdb-discard-XXXXXX)
trap 'cluster_down "$run"; rm -rf "$d"' EXIT
rdb_require_root
mkdir -p "$d/payload/etc/remusdb.d"
# The guest writes 96 MiB of data (replicated), says so, waits for the
# client's word (the VM protected), discards it all, and says how that
# went.
cat > "$d/payload/etc/remusdb.d/50-discard.sh" <<'EOS'
#!/bin/sh
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
dd if=/dev/urandom of=/dev/vda bs=1M count=96 conv=fsync 2>/dev/null
echo "REMUSDB-DISCARD-WRITTEN rc=$?"
nc -l -p 7000 </dev/null >/dev/null
blkdiscard -o 0 -l $((96 << 20)) /dev/vda
echo "REMUSDB-DISCARD rc=$?"
sync
EOS
chmod 0755 "$d/payload/etc/remusdb.d/50-discard.sh"
bash "$RDB_ROOT/tools/mkguest.sh" --out "$d/guest" --payload "$d/payload" \
	--module virtio_blk >&2 || rdb_fail "guest build failed"
truncate -s 256M "$d/disk.img"

cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
export CL_GUEST=$d/guest CL_DISK_IMAGE=$d/disk.img CL_DRIVE_OPTS=discard=unmap
CL_GUEST_RUN= cluster_vm_up 25 || rdb_fail "VM setup failed (logs in $CL_DIR)"
con=$CL_DIR/pri/$(cl_vm_file console.log)
wait_for 120 "the guest's 96 MiB written" grep -q "REMUSDB-DISCARD-WRITTEN" "$con" ||
	rdb_fail "the guest did not write its data ($(tail -n 3 "$con"))"
grep -q "REMUSDB-DISCARD-WRITTEN rc=0" "$con" || rdb_fail "the guest's write failed: $(grep -a DISCARD-WRITTEN "$con")"
cl_ctl pri wait "$CL_VM" protected --timeout 60 || rdb_fail "not protected"
pri_img=$CL_DIR/pri/$CL_VM.disk.img
bak_img=$CL_DIR/bak/state/$CL_VM/disk.img
# 1 when the image's first 96 MiB hold a byte other than zero, else 0
has_data() { dd if="$1" bs=1M count=96 2>/dev/null | tr -d '\0' | head -c 1 | wc -c; }
[ "$(has_data "$pri_img")" = 1 ] ||
	rdb_fail "the guest's data is not on the primary's image"
wait_for 30 "the guest listening" \
	ip netns exec "$(netns_name "$run" cli)" timeout 2 bash -c "exec 3<>/dev/tcp/$CL_GUEST_IP/7000" ||
	rdb_fail "could not tell the guest to discard"
wait_for 60 "the guest's discard" grep -q "REMUSDB-DISCARD rc=" "$con" ||
	rdb_fail "the guest did not discard ($(tail -n 3 "$con"))"
grep -q "REMUSDB-DISCARD rc=0" "$con" ||
	rdb_fail "the guest's discard of 96 MiB failed: $(grep -a 'REMUSDB-DISCARD rc=' "$con"); $(grep -a 'I/O error' "$con" | head -n 2)"
[ "$(has_data "$pri_img")" = 0 ] ||
	rdb_fail "the discarded range does not read zeros on the primary's image"
# the guest idles now: its next acknowledged epoch carries the discard
wait_for 20 "the replica equal to the primary's image" cmp -s "$pri_img" "$bak_img" ||
	rdb_fail "the backup's replica differs from the primary's image: $(cmp "$pri_img" "$bak_img" 2>&1 | head -n 1); the primary is $(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0] | "\(.state) (\(.state_reason))"')"
st=$(cl_status pri "$CL_VM" --json) || rdb_fail "no status"
[ "$(jq -r '.vms[0].state' <<<"$st")" = protected ] || rdb_fail "the VM left protection: $(jq -r '.vms[0].state_reason' <<<"$st")"
echo "PASS: a 96 MiB discard in a protected guest (one TRIM to the disk server) succeeded, read zeros, and reached the backup's replica (images equal)"
