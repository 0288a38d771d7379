#!/usr/bin/env bash
# A libvirt domain shaped like a database VM: UEFI (OVMF, its variable
# store an <nvram>), an OS disk (raw, virtio-blk), a data disk (qcow2
# over a raw backing file, on a virtio-scsi controller), a WAL disk (raw,
# SATA, on an AHCI controller), a CD-ROM, a
# client NIC and a second NIC on another subnet; enrolled on both hosts
# (one --tap per interface), attached, started and protected with
# libvirt_restore, the primary's power pulled.  Checked:
#  - enroll moved the three writable disks (the SCSI one a scsi-hd on
#    the controller's bus, the SATA one an ide-hd on the AHCI
#    controller's port, the controllers libvirt's), the variable store and
#    both NICs to remusdbd (the CD-ROM stays libvirt's), and the VM
#    config attach derived from the domain has the data disk, the
#    variable store and the second NIC;
#  - the guest booted through OVMF and sets a UEFI variable every second
#    (a counter), which the firmware writes to its flash;
#  - the backup checked the CD-ROM's image, the qcow2 disk's backing
#    file and the firmware's code against its own (read-only images);
#  - after the pull: `virsh list` on the backup shows vm1 running,
#    restored through libvirt, its QEMU on the four replicas' sockets
#    and both NICs' sockets; both clients' sequences contiguous on one
#    connection each (I1 on both NICs); the restored guest's counter
#    goes on past the last the primary's flash held, in the variable
#    store's replica (live on the backup);
#  - the replicas (the qcow2 one read through qemu-img) hold every
#    record the client received, none past a gap: the guest's log is
#    striped over the three disks (record N on disk (N - 1) mod 3).
#
# Output: build/e2e/<run>/result.json.  Exit 0 pass, 1 fail, 77 skipped.
# check-long: a database-shaped libvirt domain (UEFI, three disks); make
#   check has each part: libvirt-drill, libvirt-restore, uefi-nvram,
#   multi-disk
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/libvirt.sh"

run=${RDB_RUN:-lm$$}
d=$(mktemp -d /tmp/rdb-lvmulti-XXXXXX)
chmod 0755 "$d"	# libvirt's QEMU (libvirt-qemu) reads the guest's kernel here
trap 'cluster_down "$run"; lv_down; rm -rf "$d"' EXIT

lv_test_require
command -v qemu-img >/dev/null || rdb_fail "qemu-img missing (tools/setup-deps.sh)"
[ -x "$RDB_HELPERS/diskseq" ] || rdb_fail "build/helpers/diskseq missing (make all)"
t0=$(date +%s%N)
ovmf_code=/usr/share/OVMF/OVMF_CODE_4M.fd ovmf_vars=/usr/share/OVMF/OVMF_VARS_4M.fd
[ -f "$ovmf_code" ] && [ -f "$ovmf_vars" ] || rdb_fail "OVMF missing (tools/setup-deps.sh: ovmf)"
# the guest: eth1 on 10.76.0.100 with a sequence server of its own; a
# UEFI variable set every second, a new one each time (efivarfs will not
# truncate an existing variable's file), its value a counter
cl_eth1_payload "$d/payload" 10000 || rdb_fail "guest payload"
cat > "$d/payload/etc/remusdb.d/20-efitick.sh" <<'EOS'
#!/bin/sh
if [ -d /sys/firmware/efi ] && mount -t efivarfs efivarfs /sys/firmware/efi/efivars; then
	echo "REMUSDB-EFI: efivarfs mounted"
	(
		i=0
		while :; do
			i=$((i + 1))
			printf '\007\000\000\000rdb-tick-%08d' $i \
				> /sys/firmware/efi/efivars/RemusDBTick$i-6d2d5b1e-52e4-4db1-9c1e-72656d757364
			sleep 1
		done
	) > /dev/null 2>&1 &
else
	echo "REMUSDB-WARN: not booted through UEFI"
fi
EOS
chmod 0755 "$d/payload/etc/remusdb.d/20-efitick.sh"
# the SCSI and SATA disks show up once their controllers' scans are
# done, in either order: named by their bus (an ATA disk's vendor is
# "ATA"), /dev/scsi-data and /dev/sata-wal
cat > "$d/payload/etc/remusdb.d/05-sda.sh" <<'EOS'
#!/bin/sh
i=0
while { [ ! -b /dev/sda ] || [ ! -b /dev/sdb ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
for s in sda sdb; do
	[ -b /dev/$s ] || { echo "REMUSDB-WARN: no /dev/$s after 10 s"; continue; }
	case "$(cat /sys/block/$s/device/vendor 2>/dev/null)" in
	ATA*) ln -sf /dev/$s /dev/sata-wal ;;
	*) ln -sf /dev/$s /dev/scsi-data ;;
	esac
done
EOS
chmod 0755 "$d/payload/etc/remusdb.d/05-sda.sh"
bash "$RDB_ROOT/tools/mkguest.sh" --out "$d/guest" --payload "$d/payload" \
	--static "$RDB_HELPERS/seqsrv" --module virtio_blk --module virtio_scsi \
	--module ahci --module sd_mod --module efivarfs >&2 ||
	rdb_fail "guest build failed"
export CL_GUEST=$d/guest
# the highest counter in a variable store (the firmware appends each
# write; older values stay until it reclaims the space)
ticks() { grep -ao 'rdb-tick-[0-9]\{8\}' "$1" | sed 's/rdb-tick-0*//' | sort -n | tail -n 1; }
export -f ticks	# (wait_for's bash -c)

cluster_hosts_up "$run" || rdb_fail "setup failed (logs in $CL_DIR)"
# the data disk, qcow2 over a raw backing file; a CD-ROM image
base=$CL_DIR/base.raw iso=$CL_DIR/tools.iso
head -c $((4 << 20)) /dev/urandom > "$base"
head -c $((2 << 20)) /dev/urandom > "$iso"
mkdir -p "$CL_DIR/pri" "$CL_DIR/bak"
# the variable store, from OVMF's template, on each host (the backup's
# definition names its own path; its restore uses the replica)
cp "$ovmf_vars" "$CL_DIR/pri/vm1_VARS.fd" && cp "$ovmf_vars" "$CL_DIR/bak/vm1_VARS.fd" ||
	rdb_fail "variable store"
export LV_OS_MORE="    <loader readonly='yes' type='pflash'>$ovmf_code</loader>
    <nvram template='$ovmf_vars'>$CL_DIR/pri/vm1_VARS.fd</nvram>"
qemu-img create -q -f qcow2 -b "$base" -F raw "$CL_DIR/pri/vm1-data.qcow2" 64M ||
	rdb_fail "qemu-img create"
truncate -s 32M "$CL_DIR/pri/vm1-wal.img" "$CL_DIR/bak/vm1-wal.img" || rdb_fail "the WAL disk's image"
export LV_MORE_DISKS="    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='$CL_DIR/pri/vm1-data.qcow2'/>
      <target dev='sda' bus='scsi'/>
    </disk>
    <controller type='scsi' index='0' model='virtio-scsi'/>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='$CL_DIR/pri/vm1-wal.img'/>
      <target dev='sdb' bus='sata'/>
    </disk>
    <controller type='sata' index='0'/>
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <source file='$iso'/>
      <target dev='hdc' bus='ide'/>
      <readonly/>
    </disk>"
export LV_MORE_IFACES="    <interface type='bridge'>
      <mac address='52:54:00:52:45:01'/>
      <source bridge='vmbr0'/>
      <model type='virtio'/>
    </interface>"
export LV_GUEST_RUN="/usr/bin/seqsrv --port $CL_SEQ_PORT --interval-us 20000 --disk /dev/vda --disk /dev/scsi-data --disk /dev/sata-wal"
export LV_ENROLL_ARGS="--tap vmtap1"
lv_pair_protected || rdb_fail "the protected libvirt domain did not come up (logs in $CL_DIR)"
echo "libvirtd on both hosts, vm1 (UEFI, 3 disks, a CD-ROM, 2 NICs) enrolled on both, protected after $(ms_since "$t0") ms"

# enroll's work: four NBD disks (the last the variable store, pflash1)
# and two netdevs, the CD-ROM libvirt's
lv_virsh pri dumpxml vm1 > "$CL_DIR/pri-domain.xml"
grep -q "vm1.disk1" "$CL_DIR/pri-domain.xml" && grep -q "id=net1" "$CL_DIR/pri-domain.xml" &&
	grep -q "vm1.disk2" "$CL_DIR/pri-domain.xml" && grep -q "vm1.disk3" "$CL_DIR/pri-domain.xml" &&
	grep -q "pflash1=rdbnvram" "$CL_DIR/pri-domain.xml" &&
	grep -q "scsi-hd&quot;,&quot;bus&quot;:&quot;scsi0.0&quot;" "$CL_DIR/pri-domain.xml" &&
	grep -q "ide-hd&quot;,&quot;bus&quot;:&quot;sata0.1&quot;" "$CL_DIR/pri-domain.xml" &&
	grep -q "device=\"cdrom\"\|device='cdrom'" "$CL_DIR/pri-domain.xml" ||
	rdb_fail "enroll did not move the disks, the variable store and the NICs (see $CL_DIR/pri-domain.xml)"
pst=$(cl_status pri vm1 --json) || rdb_fail "no primary status"
[ "$(jq '[.vms[0].devices[] | select(.kind == "disk")] | length' <<<"$pst")" = 4 ] &&
	[ "$(jq '[.vms[0].devices[] | select(.kind == "nic")] | length' <<<"$pst")" = 2 ] ||
	rdb_fail "the primary protects $(jq -c '[.vms[0].devices[] | .kind]' <<<"$pst"), not 4 disks and 2 NICs"
grep -q "REMUSDB-EFI: efivarfs mounted" "$CL_DIR/pri/console.log" ||
	rdb_fail "the guest did not boot through UEFI: $(grep REMUSDB-WARN "$CL_DIR/pri/console.log" | tail -n 1)"
grep -q "read-only image $ovmf_code: the same here" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup did not check the firmware's code against its own"
wait_for 20 "the guest's UEFI variable in the primary's flash" \
	grep -aq rdb-tick- "$CL_DIR/pri/vm1_VARS.fd" ||
	rdb_fail "the firmware did not store the guest's variable in $CL_DIR/pri/vm1_VARS.fd"
grep -q "read-only image $iso: the same here" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup did not check the CD-ROM's image against its own"
grep -q "read-only image $base: the same here" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "the backup did not check the qcow2 disk's backing file"

# the second NIC's client, then the pull with the first's
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
clix ip addr add 10.76.0.10/24 dev eth0 || rdb_fail "client address on the second subnet"
ip netns exec "$(netns_name "$run" cli)" "$RDB_HELPERS/seqcheck" \
	--host 10.76.0.100 --port 7001 --duration 120 \
	--connect-timeout 20 --stall-timeout 20 \
	>"$CL_DIR/seqcheck2.json" 2>"$CL_DIR/seqcheck2.log" &
c2=$!
wait_for 20 "first values at the second NIC's client" \
	grep -q '^first ' "$CL_DIR/seqcheck2.log" || rdb_fail "the second NIC's client got nothing"
cl_seq_start 120
c1=$CL_CHECKER
sleep 4
cluster_pull_power "$run"
kill -USR1 "$c1" "$c2"
tick_pri=$(ticks "$CL_DIR/pri/vm1_VARS.fd")
cl_ctl bak wait vm1 failed-over --timeout 30 ||
	rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
cl_ctl bak status vm1 --json > "$CL_DIR/bak-status.json"
sleep 6
kill -INT "$c1" "$c2" 2>/dev/null
wait_pid 15 "$c1"
wait_pid 15 "$c2"
for f in seqcheck seqcheck2; do
	[ -s "$CL_DIR/$f.json" ] || rdb_fail "$f: no result ($(tail -n 2 "$CL_DIR/$f.log"))"
	jq -e "$CL_SEQ_JQ"' seq_ok' "$CL_DIR/$f.json" >/dev/null ||
		rdb_fail "$f: the sequence is broken: $(jq -c . "$CL_DIR/$f.json")"
done

# the backup's libvirt runs it, on both disks and both NICs
[ "$(jq -r '.vms[0].restored_by' "$CL_DIR/bak-status.json")" = libvirt ] ||
	rdb_fail "the backup did not restore vm1 through libvirt (see $CL_DIR/bak/remusdbd.log)"
lv_virsh bak list > "$CL_DIR/bak-virsh-list.txt"
grep -Eq '^ *[0-9]+ +vm1 +running$' "$CL_DIR/bak-virsh-list.txt" ||
	rdb_fail "virsh list on the backup does not show vm1 running: $(cat "$CL_DIR/bak-virsh-list.txt")"
qpid=$(jq -r '.vms[0].qemu_pid' "$CL_DIR/bak-status.json")
tr '\0' '\n' < "/proc/$qpid/cmdline" > "$CL_DIR/bak-qemu.argv" || rdb_fail "no QEMU $qpid on the backup"
for s in "$CL_DIR/bak/run/vm1.disk" "$CL_DIR/bak/run/vm1.disk1" "$CL_DIR/bak/run/vm1.disk2" \
	"$CL_DIR/bak/run/vm1.disk3" pflash1=rdbnvram \
	"addr.path=$CL_DIR/bak/run/vm1.net," "addr.path=$CL_DIR/bak/run/vm1.net1,"; do
	grep -qF "$s" "$CL_DIR/bak-qemu.argv" ||
		rdb_fail "the restored QEMU lacks $s (see $CL_DIR/bak-qemu.argv)"
done

# every record the client got is on the replicas, none past a gap
last=$(jq -r .last "$CL_DIR/seqcheck.json")
mapfile -t reps < <(jq -r '.vms[0].disks[].replica' "$CL_DIR/bak-status.json")
[ "${#reps[@]}" = 4 ] || rdb_fail "the backup kept ${#reps[@]} replicas, not 4"
# the restored guest's counter, past the primary's last, in the replica
# of the variable store (written on this host since the failover)
wait_for 20 "the restored guest's UEFI variable in the replica" \
	bash -c "[ \"\$(ticks '${reps[3]}')\" -gt '$tick_pri' ]" ||
	rdb_fail "the variable store's replica ${reps[3]} has no counter past $tick_pri (the primary's last): $(ticks "${reps[3]}")"
# ...and every counter before it: what the primary's guest set came with
# the checkpoints (each value is a variable of its own); one copy read
# for both (the guest sets the next meanwhile)
cp "${reps[3]}" "$CL_DIR/vars-replica.fd" || rdb_fail "copying the variable store's replica"
tick_bak=$(ticks "$CL_DIR/vars-replica.fd")
nticks=$(grep -ao 'rdb-tick-[0-9]\{8\}' "$CL_DIR/vars-replica.fd" | sort -u | wc -l)
[ "$nticks" = "$tick_bak" ] ||
	rdb_fail "the variable store's replica holds $nticks of the counters 1..$tick_bak: the primary's were not all replicated"
lv_virsh bak destroy vm1 >/dev/null || rdb_fail "virsh destroy on the backup"
qemu-img convert -U -f qcow2 -O raw "${reps[1]}" "$CL_DIR/rep1.raw" || rdb_fail "qemu-img convert ${reps[1]}"
check=$("$RDB_HELPERS/diskseq" --check-set "$last" "${reps[0]}" "$CL_DIR/rep1.raw" "${reps[2]}")
[ $? -le 1 ] || rdb_fail "diskseq --check-set: $check"
jq -e '.missing == 0 and .after_gap == 0' <<<"$check" >/dev/null ||
	rdb_fail "the replicas are not one epoch's state: $check (the client had 1..$last)"
echo "PASS: UEFI libvirt domain with 3 disks (one qcow2 on virtio-scsi, one on SATA), a CD-ROM, 2 NICs and an OVMF variable store: enrolled, protected, restored through the backup's libvirt after the power pull (virsh list: running); both NICs' sequences contiguous (to $last and $(jq .last "$CL_DIR/seqcheck2.json")); every record on the replicas; the guest's UEFI counter $tick_pri on the primary's flash, $tick_bak in the replica after; whole test $(ms_since "$t0") ms"
