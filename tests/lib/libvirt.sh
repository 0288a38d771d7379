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
#   lv_down                     for the EXIT trap, after cluster_down
#                               (which kills the daemons with their hosts)
#
# QEMU runs as root (docs/libvirt.md "Permissions"), outside the host's
# cgroups, its output to a file (no virtlogd).  libvirtd resolves the
# user libvirt-qemu at start whatever qemu.conf says; Debian's
# libvirt-daemon-system creates it, which this test host need not have
# installed: the namespace gets a passwd and group that have it (read
# only at libvirtd's start, so a host that replaces its /etc/passwd later,
# which detaches the bind mount, does no harm).

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
user = "root"
group = "root"
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
		mount --bind "$1/etc" /etc/libvirt
		mount --bind "$1/lib" /var/lib/libvirt
		mount --bind "$1/log" /var/log/libvirt
		mount --bind "$1/cache" /var/cache/libvirt
		mount --bind "$1/passwd" /etc/passwd
		mount --bind "$1/group" /etc/group
		exec libvirtd -f /etc/libvirt/libvirtd.conf' lvns "$lv" >"$lv/libvirtd.out" 2>&1 &
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
lv_test_domain() {
	cat <<EOX
<domain type='qemu'>
  <name>$CL_VM</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$CL_GUEST/vmlinuz</kernel>
    <initrd>$CL_GUEST/initrd.img</initrd>
    <cmdline>console=ttyS0 panic=-1 quiet remusdb.ip=$CL_GUEST_IP/24 remusdb.run=&quot;/usr/bin/seqsrv --port $CL_SEQ_PORT&quot;</cmdline>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>$RDB_QEMU</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='$1'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='bridge'>
      <mac address='$CL_GUEST_MAC'/>
      <source bridge='vmbr0'/>
      <model type='virtio'/>
    </interface>
    <serial type='file'>
      <source path='$2'/>
      <target port='0'/>
    </serial>
  </devices>
</domain>
EOX
}
