# shellcheck shell=bash
# A libvirtd of a namespace host's own, for the libvirt tests.  Source
# after cluster.sh.  Every wait has a deadline.
#
#   lv_host_up pri|bak [HOOK MEMDIR]
#                               libvirtd in that host's network namespace
#                               and a mount namespace of its own: a private
#                               /run, the libvirt directories bind-mounted
#                               from CL_DIR/SIDE/lv; HOOK: installed as its
#                               /etc/libvirt/hooks/qemu, MEMDIR its
#                               memory_backing_dir (on the mount of the
#                               daemon's state_dir: the hook hard-links the
#                               RAM image there).  Sets LV_URI_SIDE.
#   lv_virsh pri|bak ARGS...    virsh on that host's libvirtd
#   lv_test_require             what a libvirt test needs: root, libvirtd,
#                               virsh, unshare (else skipped), the helpers,
#                               the test guest (built if missing); sets
#                               LV_QEMU_USER and the daemons' CL_QEMU_GROUP
#   ms_since T0                 milliseconds since T0 (date +%s%N)
#   lv_down                     for the EXIT trap, after cluster_down
#                               (which kills the daemons with their hosts)
#   lv_pair_protected           after cluster_hosts_up: libvirtd on both
#                               hosts (the backup's with RemusDB's hook), the
#                               test guest's domain defined on both (same
#                               UUID and addresses) and enrolled on each,
#                               attached, started and protected on the
#                               primary with libvirt_restore = the backup's
#                               libvirt (LV_ENROLL_ARGS: more enroll
#                               options).  Sets LV_UUID.
#   lv_event_guest              the test guest with remusdb.ko loaded and
#                               remusdb-eventd running (the failover event's
#                               guest side) in build/guest-lvevent; sets
#                               CL_GUEST to it
#
# QEMU runs as libvirt-qemu, as on a Debian host (docs/libvirt.md
# "Permissions"; LV_QEMU_USER=root: as root), with the daemons'
# qemu_group its group (lv_test_require sets CL_QEMU_GROUP); outside the
# host's cgroups, its output to a file (no virtlogd).  Debian's
# libvirt-daemon-system creates the user, which this test host need not
# have installed: the namespace gets a passwd and group that have it (read
# only at libvirtd's start, so a host that replaces its /etc/passwd later,
# which detaches the bind mount, does no harm).  remusdbd, outside that
# mount namespace, knows the group by its number.  This host's /dev/kvm
# is root's alone; a Debian host's is 0660 group kvm with libvirt-qemu in
# it.  libvirt probes QEMU with KVM (as root) and then finds /dev/kvm
# closed to libvirt-qemu, and re-probes on every start (~4 s,
# docs/libvirt-research.md §1): libvirtd's namespace sees a /dev/kvm
# open to that group instead (the same device; the domains are TCG).

LV_DIRS="/var/lib/libvirt /var/log/libvirt /var/cache/libvirt"

lv_host_up() {
	local side=$1 hook=${2:-} memdir=${3:-} lv=$CL_DIR/$1/lv d uri
	mkdir -p "$lv"/{etc,lib,log,cache,sock}
	cp -a /etc/libvirt/. "$lv/etc/"
	cat > "$lv/etc/libvirtd.conf" <<EOC
unix_sock_dir = "$lv/sock"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
EOC
	cat > "$lv/etc/qemu.conf" <<EOC
user = "$LV_QEMU_USER"
group = "$LV_QEMU_USER"
remember_owner = 0
cgroup_controllers = [ ]
stdio_handler = "file"
EOC
	if [ -n "$hook" ]; then
		mkdir -p "$lv/etc/hooks"
		install -m 0755 "$hook" "$lv/etc/hooks/qemu"
	fi
	if [ -n "$memdir" ]; then
		mkdir -p "$memdir"
		echo "memory_backing_dir = \"$memdir\"" >> "$lv/etc/qemu.conf"
	fi
	cp /etc/passwd "$lv/passwd"
	cp /etc/group "$lv/group"
	if ! grep -q '^libvirt-qemu:' /etc/passwd; then
		echo 'libvirt-qemu:x:64055:64055:Libvirt Qemu,,,:/var/lib/libvirt:/usr/sbin/nologin' >> "$lv/passwd"
		grep -q '^libvirt-qemu:' /etc/group || echo 'libvirt-qemu:x:64055:' >> "$lv/group"
	fi
	# the mount points, made on the host if missing (empty: the mounts
	# are in libvirtd's own namespace); lv_down removes what it made
	for d in $LV_DIRS; do
		[ -d "$d" ] || { mkdir -p "$d" && echo "$d" >> "$CL_DIR/lv-made-dirs"; }
	done
	ip netns exec "$(netns_name "$CL_RUN" "$side")" unshare -m --propagation private -- bash -c '
		set -e
		mount -t tmpfs -o mode=755 tmpfs /run
		mkdir -p /run/lock /run/libvirt
		if [ -c /dev/kvm ] && [ "$2" != 0 ]; then
			mknod -m 0660 /run/kvm c $((0x$(stat -c %t /dev/kvm))) $((0x$(stat -c %T /dev/kvm)))
			chgrp "$2" /run/kvm
			mount --bind /run/kvm /dev/kvm
		fi
		mount --bind "$1/etc" /etc/libvirt
		mount --bind "$1/lib" /var/lib/libvirt
		mount --bind "$1/log" /var/log/libvirt
		mount --bind "$1/cache" /var/cache/libvirt
		mount --bind "$1/passwd" /etc/passwd
		mount --bind "$1/group" /etc/group
		exec libvirtd -f /etc/libvirt/libvirtd.conf' lvns "$lv" "${CL_QEMU_GROUP:-0}" \
		>"$lv/libvirtd.out" 2>&1 &
	echo $! > "$CL_DIR/$side/libvirtd.pid"	# killed with the host (cluster_down)
	disown $!
	uri="qemu+unix:///system?socket=$lv/sock/libvirt-sock"
	printf -v "LV_URI_$side" '%s' "$uri"
	wait_for 20 "libvirtd on $side" virsh -q -c "$uri" list --all ||
		{ rdb_log "libvirtd did not start (see $lv/libvirtd.out, $lv/log/libvirtd.log)"; return 1; }
}

lv_virsh() {
	local uri_var="LV_URI_$1"
	shift
	virsh -q -c "${!uri_var}" "$@"
}

lv_down() {
	local d
	[ -f "${CL_DIR:-/nonexistent}/lv-made-dirs" ] &&
		while read -r d; do rmdir "$d" 2>/dev/null; done < "$CL_DIR/lv-made-dirs"
	return 0
}

# lv_test_domain IMAGE CONSOLE: the test guest as a plain domain (a raw
# disk, a bridge NIC, its console written to the file CONSOLE), on stdout.
# LV_MORE_DISKS, LV_MORE_IFACES: more <disk>s and <interface>s (XML)
# after the first of each; LV_OS_MORE: more of <os> after its <type> (a
# UEFI guest's <loader> and <nvram>, with <features><acpi/>, which
# libvirt requires for UEFI); LV_GUEST_RUN: the guest's
# remusdb.run command (default seqsrv on CL_SEQ_PORT).
lv_test_domain() {
	cat <<EOX
<domain type='qemu'>
  <name>$CL_VM</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
${LV_OS_MORE:-}
    <kernel>$CL_GUEST/vmlinuz</kernel>
    <initrd>$CL_GUEST/initrd.img</initrd>
    <cmdline>console=ttyS0 panic=-1 quiet remusdb.ip=$CL_GUEST_IP/24 remusdb.run=&quot;${LV_GUEST_RUN:-/usr/bin/seqsrv --port $CL_SEQ_PORT}&quot;</cmdline>
  </os>
${LV_OS_MORE:+  <features><acpi/></features>}
  <on_poweroff>destroy</on_poweroff>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>$RDB_QEMU</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='$1'/>
      <target dev='vda' bus='virtio'/>
    </disk>
${LV_MORE_DISKS:-}
    <interface type='bridge'>
      <mac address='$CL_GUEST_MAC'/>
      <source bridge='vmbr0'/>
      <model type='virtio'/>
    </interface>
${LV_MORE_IFACES:-}
    <serial type='file'>
      <source path='$2'/>
      <target port='0'/>
    </serial>
  </devices>
</domain>
EOX
}

lv_pair_protected() {
	local img=$CL_DIR/pri/vm1.img
	lv_host_up pri "$RDB_ROOT/tools/libvirt/qemu-hook" "$CL_DIR/pri/state/lvram" || return 1
	lv_host_up bak "$RDB_ROOT/tools/libvirt/qemu-hook" "$CL_DIR/bak/state/lvram" || return 1
	truncate -s 64M "$img"
	head -c 1048576 /dev/urandom | dd of="$img" bs=1M seek=8 conv=notrunc status=none
	sync "$img"
	lv_test_domain "$img" "$CL_DIR/pri/console.log" > "$CL_DIR/vm1.domain.xml"
	lv_virsh pri define "$CL_DIR/vm1.domain.xml" >/dev/null || return 1
	# the backup's: the same machine (UUID, addresses), its own paths
	lv_virsh pri dumpxml --inactive vm1 | sed "s|$CL_DIR/pri/|$CL_DIR/bak/|g" \
		> "$CL_DIR/vm1.bak-domain.xml"
	lv_virsh bak define "$CL_DIR/vm1.bak-domain.xml" >/dev/null || return 1
	# shellcheck disable=SC2086 # LV_ENROLL_ARGS: words
	cl_ctl pri enroll vm1 --yes --tap vmtap0 --connect "$LV_URI_pri" ${LV_ENROLL_ARGS:-} \
		>"$CL_DIR/enroll-pri.out" 2>&1 || { rdb_log "enroll (pri): $(tail -1 "$CL_DIR/enroll-pri.out")"; return 1; }
	# shellcheck disable=SC2086
	cl_ctl bak enroll vm1 --yes --tap vmtap0 --connect "$LV_URI_bak" ${LV_ENROLL_ARGS:-} \
		>"$CL_DIR/enroll-bak.out" 2>&1 || { rdb_log "enroll (bak): $(tail -1 "$CL_DIR/enroll-bak.out")"; return 1; }
	LV_UUID=$(lv_virsh pri domuuid vm1)
	[ "$(lv_virsh bak domuuid vm1)" = "$LV_UUID" ] || { rdb_log "the two definitions differ"; return 1; }
	cl_ctl pri attach vm1 peer=10.78.0.2:7788 --connect "$LV_URI_pri" || return 1
	lv_virsh pri start vm1 >/dev/null || { rdb_log "virsh start (see $CL_DIR/pri/lv/log/qemu/vm1.log)"; return 1; }
	wait_for 90 "the guest ready on its console" grep -q REMUSDB-GUEST-READY "$CL_DIR/pri/console.log" ||
		return 1
	# who libvirt runs QEMU as (the only QEMU of this domain yet)
	ps -o user= -p "$(pgrep -f -- "-uuid $(lv_virsh pri domuuid vm1)" | head -n 1)" |
		tr -d ' ' > "$CL_DIR/pri/qemu.user"
	cl_ctl pri protect vm1 peer=10.78.0.2:7788 "libvirt_restore=$LV_URI_bak" --connect "$LV_URI_pri" ||
		return 1
	cl_ctl pri wait vm1 protected --timeout 90 || return 1
	cl_ctl bak wait vm1 protected --timeout 10
}

lv_event_guest() {
	local payload ko=$RDB_ROOT/build/kmod/remusdb.ko out=$RDB_ROOT/build/guest-lvevent
	[ -f "$ko" ] || { rdb_log "$ko missing (make kmod)"; return 1; }
	[ -x "$RDB_HELPERS/remusdb-eventd" ] || { rdb_log "remusdb-eventd missing (make all)"; return 1; }
	payload=$(mktemp -d)
	mkdir -p "$payload/opt/remusdb" "$payload/etc/remusdb.d"
	cp "$ko" "$RDB_HELPERS/remusdb-eventd" "$payload/opt/remusdb/"
	cat > "$payload/etc/remusdb.d/50-eventd.sh" <<'EOS'
insmod /opt/remusdb/remusdb.ko && echo REMUSDB-KMOD-LOADED
/opt/remusdb/remusdb-eventd </dev/null >/dev/console 2>&1 &
EOS
	chmod +x "$payload/etc/remusdb.d/50-eventd.sh"
	bash "$RDB_ROOT/tools/mkguest.sh" --out "$out" --payload "$payload" \
		--static "$RDB_HELPERS/seqsrv" >&2 ||
		{ rm -rf "$payload"; rdb_log "guest build failed"; return 1; }
	rm -rf "$payload"
	export CL_GUEST=$out
}

lv_test_require() {
	local c
	rdb_require_root
	for c in libvirtd virsh unshare; do
		command -v $c >/dev/null || rdb_skip "$c (tools/setup-deps.sh)"
	done
	[ -x "$RDB_HELPERS/seqsrv" ] || rdb_fail "build/helpers missing (make all)"
	[ -f "$RDB_ROOT/build/guest/vmlinuz" ] || rdb_build_guest
	LV_QEMU_USER=${LV_QEMU_USER:-libvirt-qemu}
	if [ "$LV_QEMU_USER" = root ]; then
		CL_QEMU_GROUP=
	else
		CL_QEMU_GROUP=$(getent group libvirt-qemu | cut -d: -f3)
		CL_QEMU_GROUP=${CL_QEMU_GROUP:-64055}
	fi
	export CL_QEMU_GROUP LV_QEMU_USER
}

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
