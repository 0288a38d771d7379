#!/usr/bin/env bash
# A UEFI guest: OVMF's code a read-only pflash, its variable store
# (nvram) the VM's last disk, served and replicated by remusdbd and
# attached by QEMU as -drive if=pflash,unit=1,driver=nbd on both hosts.
#
# Checked:
#  - the guest booted through OVMF (/sys/firmware/efi is there) and
#    writes a UEFI variable; the firmware stores it in the flash, and the
#    backup's replica of the variable store holds it, byte-equal to the
#    primary's file once the epoch is committed;
#  - the firmware's code was checked on the backup (a read-only image);
#  - the power pull: the client's sequence contiguous; the restored QEMU
#    has the replica as its pflash unit 1 over NBD; the restored guest
#    reads the variable back, and a variable it writes lands in the
#    replica (the variable store is live on this host) beside the first
#    (the restored QEMU writes its flash back over the drive: with the
#    flash's writes not in the checkpoints, that erased it).
# Shown red with the backup's commit leaving the variable store's part
# of every epoch unapplied (rdb_diskbuf_apply_set skipping set[1]): see
# the commit.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-ue$$}
d=$(mktemp -d /tmp/rdb-uefi-XXXXXX)
trap 'cluster_down "$run"; rm -rf "$d"' EXIT
rdb_require_root
[ -x "$RDB_HELPERS/seqsrv" ] || rdb_fail "build/helpers/seqsrv missing (make all)"
export CL_OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd CL_OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
[ -f "$CL_OVMF_CODE" ] && [ -f "$CL_OVMF_VARS" ] || rdb_fail "OVMF missing (tools/setup-deps.sh: ovmf)"
mkdir -p "$d/payload/etc/remusdb.d"
cat > "$d/payload/etc/remusdb.d/10-efivars.sh" <<'EOS'
#!/bin/sh
if [ -d /sys/firmware/efi ]; then
	mount -t efivarfs efivarfs /sys/firmware/efi/efivars &&
		echo "REMUSDB-EFI: efivarfs mounted"
else
	echo "REMUSDB-WARN: not booted through UEFI"
fi
# the sequence server in the background: the console stays a shell
/usr/bin/seqsrv --port 7000 --interval-us 20000 > /dev/null 2>&1 &
EOS
chmod 0755 "$d/payload/etc/remusdb.d/10-efivars.sh"
bash "$RDB_ROOT/tools/mkguest.sh" --out "$d/guest" --payload "$d/payload" \
	--static "$RDB_HELPERS/seqsrv" --module efivarfs >&2 || rdb_fail "guest build failed"

cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
truncate -s 16M "$CL_DIR/disk0-src.img"
export CL_GUEST=$d/guest CL_DISK_IMAGE=$CL_DIR/disk0-src.img CL_NVRAM=1
[ "$CL_SEQ_PORT" = 7000 ] || rdb_fail "the guest's seqsrv listens on 7000, not $CL_SEQ_PORT"
CL_GUEST_RUN= cluster_vm_up 25 || rdb_fail "VM setup failed (logs in $CL_DIR)"
con=$CL_DIR/pri/console.log
wait_for 30 "efivarfs in the guest" grep -q "REMUSDB-EFI: efivarfs mounted" "$con" ||
	rdb_fail "the guest did not boot through UEFI: $(grep REMUSDB-WARN "$con" | tail -n 1)"
grep -q "read-only image $CL_OVMF_CODE: the same here" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup did not check the firmware's code against its own"
bst=$(cl_status bak "$CL_VM" --json) || rdb_fail "no backup status"
[ "$(jq '.vms[0].disks | length' <<<"$bst")" = 2 ] || rdb_fail "the backup keeps $(jq '.vms[0].disks | length' <<<"$bst") replicas, not 2"
replica=$(jq -r '.vms[0].disks[1].replica' <<<"$bst")
pri_vars=$CL_DIR/pri/$CL_VM.nvram.fd

# A variable (attributes NV|BS|RT, then its data) written in the guest
guid=6d2d5b1e-52e4-4db1-9c1e-72656d757364
tag=$RANDOM$RANDOM
setvar() {	# setvar SOCK NAME DATA
	cl_console_cmd_at "$1" "printf '\\007\\000\\000\\000$3' > /sys/firmware/efi/efivars/$2-$guid && echo REMUSDB-SET\"VAR\"-$2" ||
		rdb_fail "console"
}
setvar "$CL_DIR/pri/serial.sock" RemusDBBefore "remusdb-before-$tag"
wait_for 20 "the variable set" grep -q "REMUSDB-SETVAR-RemusDBBefore" "$con" ||
	rdb_fail "the guest could not set a UEFI variable: $(tail -n 3 "$con")"
grep -q "remusdb-before-$tag" "$pri_vars" || rdb_fail "the firmware did not store the variable in its flash ($pri_vars)"
wait_for 20 "the variable store's replica equal to the primary's" cmp -s "$pri_vars" "$replica" ||
	rdb_fail "the replica $replica differs from $pri_vars: $(cmp "$pri_vars" "$replica" 2>&1 | head -n 1)"
grep -q "remusdb-before-$tag" "$replica" || rdb_fail "the replica lacks the variable"

cl_seq_start 60
checker=$CL_CHECKER
sleep 4
cluster_pull_power "$run"
kill -USR1 "$checker"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
pgrep -af "qemu-system.*$CL_DIR/bak/" | grep -q "if=pflash,unit=1,driver=nbd" ||
	rdb_fail "the restored QEMU has no pflash unit 1 over NBD"
bcon=$CL_DIR/bak/state/$CL_VM/console.log
bsock=$CL_DIR/bak/run/$CL_VM.serial.sock
cl_console_cmd_at "$bsock" "echo REMUSDB-GOT\"VAR\"-\$(tail -c +5 /sys/firmware/efi/efivars/RemusDBBefore-$guid)" ||
	rdb_fail "console of the restored guest"
wait_for 20 "the restored guest reads the variable" grep -q "REMUSDB-GOTVAR-remusdb-before-$tag" "$bcon" ||
	rdb_fail "the restored guest does not read the variable back: $(tail -n 3 "$bcon")"
setvar "$bsock" RemusDBAfter "remusdb-after-$tag"
wait_for 20 "the restored guest's variable in the replica" grep -q "remusdb-after-$tag" "$replica" ||
	rdb_fail "a variable the restored guest set did not reach the replica $replica"
# ...beside the one set on the primary: the restored QEMU wrote its flash
# back over the drive after loading, from the checkpoint's copy of the
# flash (hypervisor/qemu/patches/0004; without it that copy was the
# first, and the variable was gone)
grep -q "remusdb-before-$tag" "$replica" ||
	rdb_fail "the variable set on the primary is gone from the replica $replica after the restore"
sleep 2
kill -INT "$checker" 2>/dev/null
wait_pid 15 "$checker"
[ -s "$CL_DIR/seqcheck.json" ] || rdb_fail "no result from the client ($(tail -n 2 "$CL_DIR/seqcheck.log"))"
jq -e "$CL_SEQ_JQ"' seq_ok' "$CL_DIR/seqcheck.json" >/dev/null ||
	rdb_fail "the client's sequence is broken: $(jq -c . "$CL_DIR/seqcheck.json")"
echo "PASS: UEFI guest (OVMF), its variable store replicated: a variable set on the primary in the replica (byte-equal), read back by the restored guest after the power pull, one it set there in the replica; sequence contiguous to $(jq .last "$CL_DIR/seqcheck.json")"
