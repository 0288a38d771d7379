# shellcheck shell=bash
# A protected VM on network-namespace hosts: the shared setup of the
# end-to-end tests, the drill and the benchmark.  Source after common.sh
# and netns.sh.  Every wait has a deadline.
#
#   cluster_up RUN [checkpoint_ms]   cluster_hosts_up + cluster_vm_up
#   cluster_hosts_up RUN             topology and both daemons (the
#                                    link authenticated with a key made
#                                    for the run: CL_DIR/link.psk)
#   cluster_vm_up [checkpoint_ms]    the guest CL_VM (CL_GUEST_IP,
#                                    CL_GUEST_MAC, CL_TAP): QEMU, protect;
#                                    CL_DISK_IMAGE: a disk (copied, then
#                                    attached and served by the daemon;
#                                    CL_DISK_AT: the primary's image is
#                                    this file, used in place, not a copy);
#                                    CL_ATTACH: attached first, no disk;
#                                    CL_GUEST_READY: console line to wait for;
#                                    CL_PRI=pr2: on the second primary host
#                                    (NETNS_PR2=1 cluster_hosts_up)
#   cluster_pull_power RUN           links down first, then SIGKILL
#   cl_seq_start SECS [ARG...]       the sequence client (seqcheck) on
#                                    CL_VM for SECS, in the background
#                                    (pid CL_CHECKER; CL_DIR/seqcheck.json,
#                                    .log), once its first value came;
#                                    ARGs go to seqcheck after its defaults
#                                    (a later option wins)
#   cluster_seq_pull RUN BEFORE AFTER  the sequence client on CL_VM, the
#                                    primary's power pulled BEFORE s after
#                                    its first value, the backup awaited
#                                    to failed-over, the client stopped
#                                    AFTER s later: CL_DIR/seqcheck.json,
#                                    pri-status.json (before the pull),
#                                    bak-status.json (after); CL_CHECKER_RC
#   CL_SEQ_JQ                        jq def seq_ok: a seqcheck verdict with
#                                    no gap, repeat, rollback or corrupt
#                                    line, one connection, values after
#                                    the outage and after the pull mark
#   cluster_down RUN                 idempotent; for trap ... EXIT (a
#                                    passed test's images are deleted)
#
# CL_DAEMON_CPUS / CL_GUEST_CPUS: pin the daemons and the guests' QEMU
# (cpu lists, as taskset -c; unset: no placement).  CL_QEMU_TRACE=FILE:
# the primary QEMU logs its checkpoint trace events there.
# Sets: CL_DIR.

CL_VM=vm1
CL_GUEST_IP=10.77.0.100
CL_GUEST_MAC=52:54:00:52:44:01
CL_SEQ_PORT=7000

cl_ctl() {	# cl_ctl pri|bak ARGS...
	local side=$1; shift
	"$RDB_BUILD/remusdbctl" --socket "$CL_DIR/$side/ctl.sock" "$@"
}

# cl_status pri|bak [NAME] [--json]: remusdbctl status, its output as it
# is; true when the daemon answered, whether every VM listed is protected
# (exit 0) or not (1); false on no answer (3) or a usage error (2)
cl_status() {
	local side=$1; shift
	cl_ctl "$side" status "$@"
	[ $? -le 1 ]
}

# Per-VM file names on the primary: vm1 keeps the plain names the tests
# use (console.log, serial.sock, qemu.pid); other VMs get a prefix.
cl_vm_file() {
	if [ "$CL_VM" = vm1 ]; then echo "$1"; else echo "$CL_VM.$1"; fi
}

# cl_make_key PATH: a fresh link key, as an operator makes one (0600).
cl_make_key() {
	(umask 077 && openssl rand -hex 32 > "$1")
}

# cl_daemon_conf side listen_addr [link_security [link_psk_file]]: the
# replication link is TLS with the run's key ($CL_DIR/link.psk) unless
# told otherwise (CL_LINK_SECURITY=insecure: plaintext for the whole run).
cl_daemon_conf() {
	local side=$1 listen=$2
	local security=${3:-${CL_LINK_SECURITY:-psk}} key=${4:-$CL_DIR/link.psk}
	local state=$CL_DIR/$side/state
	# CL_BAK_STATE_DIR: put the backup's RAM images elsewhere (full-disk test)
	[ "$side" = bak ] && [ -n "${CL_BAK_STATE_DIR:-}" ] && state=$CL_BAK_STATE_DIR
	mkdir -p "$CL_DIR/$side/run" "$state"
	cat > "$CL_DIR/$side/remusdbd.conf" <<EOC
listen = $listen
control_socket = $CL_DIR/$side/ctl.sock
run_dir = $CL_DIR/$side/run
state_dir = $state
qemu_binary = $RDB_QEMU
heartbeat_ms = 50
failover_timeout_ms = ${CL_FAILOVER_TIMEOUT_MS:-1000}
node_name = $side
witness = $( [ "${CL_WITNESS:-etcd}" = none ] || echo "http://10.77.0.3:2379" )
witness_timeout_ms = 500
metrics_file = $CL_DIR/$side/metrics.prom
allow_fault_injection = true
log_level = info
link_security = $security
link_psk_file = $key
EOC
	# CL_DAEMON_CPUS, CL_GUEST_CPUS: CPU placement, as an operator sets
	# it (docs/performance.md): the primary's daemon on some CPUs, the
	# guests' QEMU (the primary's: taskset; the one restored: guest_cpus)
	# on others.  The backup's daemon stands for another host: it goes
	# with the guest (CL_BAK_CPUS, default CL_GUEST_CPUS), not beside the
	# primary's daemon — on one CPU with it, the two daemons' TLS and the
	# initial copy starved the primary past its watchdog (seen once).
	local cpus=${CL_DAEMON_CPUS:-}
	[ "$side" = bak ] && [ -n "$cpus" ] && cpus=${CL_BAK_CPUS:-${CL_GUEST_CPUS:-$cpus}}
	[ -n "$cpus" ] && echo "cpus = $cpus" >> "$CL_DIR/$side/remusdbd.conf"
	[ -n "${CL_GUEST_CPUS:-}" ] && echo "guest_cpus = $CL_GUEST_CPUS" >> "$CL_DIR/$side/remusdbd.conf"
	# CL_QEMU_GROUP: QEMU runs as that group, not root (libvirt's)
	[ -n "${CL_QEMU_GROUP:-}" ] && echo "qemu_group = $CL_QEMU_GROUP" >> "$CL_DIR/$side/remusdbd.conf"
	# CL_DAEMON_EXTRA: more "key = value" lines for both daemons
	[ -n "${CL_DAEMON_EXTRA:-}" ] && printf '%s\n' "$CL_DAEMON_EXTRA" >> "$CL_DIR/$side/remusdbd.conf"
	return 0
}

# The guest's QEMU arguments common to both hosts (remusdbd adds QMP,
# netdev, serial, incoming and the memory backend on the backup).
# cl_eth1_payload DIR INTERVAL_US: a guest payload in DIR whose hook
# brings up the second NIC, eth1 10.76.0.100/24 (ARP answered only on
# the NIC that holds the address, so each subnet's traffic keeps to its
# own NIC), with a sequence server on port 7001 sending every INTERVAL_US.
cl_eth1_payload() {
	mkdir -p "$1/etc/remusdb.d" || return 1
	cat > "$1/etc/remusdb.d/10-eth1.sh" <<EOS
#!/bin/sh
echo 1 > /proc/sys/net/ipv4/conf/all/arp_ignore
echo 2 > /proc/sys/net/ipv4/conf/all/arp_announce
i=0
while [ ! -e /sys/class/net/eth1 ] && [ \$i -lt 50 ]; do sleep 0.1; i=\$((i+1)); done
ip link set eth1 up
ip addr add 10.76.0.100/24 dev eth1
/usr/bin/seqsrv --port 7001 --interval-us $2 > /dev/ttyS0 2>&1 &
EOS
	chmod 0755 "$1/etc/remusdb.d/10-eth1.sh"
}

# CL_APPEND_MORE: more of the guest kernel's command line (remusdb.ip1=).
cl_common_args() {
	local run=${CL_GUEST_RUN-/usr/bin/seqsrv --port $CL_SEQ_PORT}
	printf '%s\n' -accel tcg -machine pc -m "${CL_RAM_MB:-256}" -smp 1 \
		-nodefaults -no-user-config -display none \
		-L "$RDB_QEMU_DIR/pc-bios" -L /usr/share/seabios -L /usr/lib/ipxe/qemu -L /usr/share/qemu \
		-kernel "$CL_GUEST/vmlinuz" -initrd "$CL_GUEST/initrd.img" \
		-append "console=ttyS0 panic=-1 quiet remusdb.ip=$CL_GUEST_IP/24${CL_APPEND_MORE:+ $CL_APPEND_MORE}${run:+ remusdb.run=\"$run\"}" \
		-device "virtio-net-pci,netdev=net0,mac=$CL_GUEST_MAC"
	# the disk's drive (-drive, host-specific: the daemon's NBD socket)
	# is added on each host; the device is common
	[ -n "${CL_DISK_IMAGE:-}" ] && printf '%s\n' -device virtio-blk-pci,drive=disk0
	# CL_EXTRA_NICS=N: N more NICs (extra_nic), netdevs net1..netN
	local k
	for ((k = 1; k <= ${CL_EXTRA_NICS:-0}; k++)); do
		printf '%s\n' -device "virtio-net-pci,netdev=net$k,mac=52:54:00:52:45:0$k"
	done
	# CL_EXTRA_DISKS=N: N more disks (extra_disk), drives disk1..diskN
	for ((k = 1; k <= ${CL_EXTRA_DISKS:-0}; k++)); do
		printf '%s\n' -device "virtio-blk-pci,drive=disk$k"
	done
	# CL_NVRAM: a UEFI guest: OVMF's code a read-only pflash (its
	# variable store, nvram, is the VM's last disk: cluster_vm_up)
	[ -n "${CL_NVRAM:-}" ] && printf '%s\n' -drive \
		"if=pflash,unit=0,format=raw,readonly=on,file=$CL_OVMF_CODE"
	# CL_QEMU_MORE: more common QEMU arguments, one per line
	[ -n "${CL_QEMU_MORE:-}" ] && printf '%s\n' "$CL_QEMU_MORE"
	# the failover event port (its -chardev is host-specific, like the
	# drive: the primary's here, the backup's from remusdbd)
	[ -n "${CL_EVENT_PORT:-}" ] && printf '%s\n' -device virtio-serial-pci,id=vser0 \
		-device virtserialport,bus=vser0.0,chardev=rdbevent,name=org.remusdb.0
	return 0
}

cluster_up() {
	cluster_hosts_up "$1" && cluster_vm_up "${2:-25}"
}

cluster_hosts_up() {
	local run=$1
	CL_RUN=$run
	CL_DIR="$RDB_ROOT/build/e2e/$run"
	rm -rf "$CL_DIR"
	mkdir -p "$CL_DIR"
	CL_GUEST=${CL_GUEST:-$RDB_ROOT/build/guest}
	netns_setup "$run" || return 1
	[ "${CL_WITNESS:-etcd}" = none ] || cl_start_witness || return 1
	cl_make_key "$CL_DIR/link.psk" || return 1
	cl_daemon_conf pri 10.78.0.1:7788
	cl_daemon_conf bak 10.78.0.2:7788
	cl_start_daemon pri || return 1
	cl_start_daemon bak || return 1
	if [ -n "${NETNS_PR2:-}" ]; then
		cl_daemon_conf pr2 10.79.0.1:7788
		cl_start_daemon pr2 || return 1
	fi
}

# The failover witness: Debian's etcd in its own namespace (10.77.0.3).
# Its data is in memory (/dev/shm, kept across a witness restart within
# the run): a witness is another machine, and on this one's disk it
# stalled with the VMs' I/O (CI: I/O full 94%, its reads waited on its
# own fsyncs, a protect's registration timed out three times).
# CL_WITNESS=none: no witness (the VM then needs CL_ON_PEER_LOSS).
cl_start_witness() {
	local ns
	ns=$(netns_name "$CL_RUN" wit)
	command -v etcd >/dev/null || { rdb_log "etcd missing (tools/setup-deps.sh)"; return 1; }
	mkdir -p "$CL_DIR/wit" "/dev/shm/rdb-wit-$CL_RUN" || return 1
	ip netns exec "$ns" etcd --name wit --data-dir "/dev/shm/rdb-wit-$CL_RUN/data" \
		--listen-client-urls http://10.77.0.3:2379 \
		--advertise-client-urls http://10.77.0.3:2379 \
		--listen-peer-urls http://127.0.0.1:2380 \
		--initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster wit=http://127.0.0.1:2380 \
		>"$CL_DIR/wit/etcd.log" 2>&1 &
	echo $! > "$CL_DIR/wit/etcd.pid"
	disown $!
	wait_for 20 "the witness (etcd) answering" \
		ip netns exec "$ns" curl -sf -m 1 http://10.77.0.3:2379/version
}

cl_stop_witness() {
	[ -f "$CL_DIR/wit/etcd.pid" ] && kill -9 "$(cat "$CL_DIR/wit/etcd.pid")" 2>/dev/null
	return 0
}

# cl_witness_get: the VM's key at the witness (its value), or nothing.
cl_witness_get() {
	ip netns exec "$(netns_name "$CL_RUN" wit)" curl -sf -m 2 \
		-d "{\"key\":\"$(printf '%s' "/remusdb/vm/$CL_VM" | base64 -w0)\"}" \
		http://10.77.0.3:2379/v3/kv/range |
		jq -r '.kvs[0].value // empty' | base64 -d
}

# cl_start_daemon pri|bak: (re)starts that host's remusdbd; its log is
# appended to, so a restart keeps the history.
#   CL_REMUSDBD_pri, CL_REMUSDBD_bak: that host's remusdbd binary
#   (an earlier release: tests/lib/oldbuild.sh); default $RDB_BUILD's
cl_start_daemon() {
	local side=$1 port ns bin
	bin=CL_REMUSDBD_$side
	bin=${!bin:-$RDB_BUILD/remusdbd}
	ns=$(netns_name "$CL_RUN" "$side")
	port=$(sed -n 's/^listen = .*:\([0-9]*\)$/\1/p' "$CL_DIR/$side/remusdbd.conf")
	# A daemon killed just before may still hold its replication port:
	# its thread group leader shows as a zombie while another thread
	# still tears down the (ASan-sized) address space, and the sockets
	# close only after that.  Seen: "cannot listen for primaries on
	# 10.78.0.1:7788: Address already in use" 0.4 s after the kill.
	wait_for 10 "$side's replication port $port free" \
		bash -c "[ -z \"\$(ip netns exec $ns ss -Hltn 'sport = :$port')\" ]" ||
		return 1
	rm -f "$CL_DIR/$side/ctl.sock"
	ip netns exec "$(netns_name "$CL_RUN" "$side")" "$bin" \
		-c "$CL_DIR/$side/remusdbd.conf" >>"$CL_DIR/$side/remusdbd.log" 2>&1 &
	echo $! > "$CL_DIR/$side/remusdbd.pid"
	disown $!	# killed on purpose later: no job notices
	wait_for 10 "$side remusdbd control socket" test -S "$CL_DIR/$side/ctl.sock"
}

cluster_vm_up() {
	local ckpt=${1:-25} arg run=$CL_RUN tap=${CL_TAP:-vmtap0} P=${CL_PRI:-pri} k

	mapfile -t CL_ARGS < <(cl_common_args)
	{
		echo "name = $CL_VM"
		echo "qmp = $CL_DIR/$P/$CL_VM.qmp"
		echo "watchdog_qmp = $CL_DIR/$P/$CL_VM.wd.qmp"
		echo "net_socket = $CL_DIR/$P/run/$CL_VM.net"
		echo "tap = $tap"
		echo "mac = $CL_GUEST_MAC"
		echo "peer = 10.78.0.2:7788"
		echo "checkpoint_ms = $ckpt"
		echo "checkpoint_deadline_ms = ${CL_DEADLINE_MS:-500}"
		echo "ram_mb = ${CL_RAM_MB:-256}"
		echo "compression = ${CL_COMPRESSION:-true}"
		echo "mode = ${CL_MODE:-plain}"
		[ -n "${CL_ON_PEER_LOSS:-}" ] && echo "on_peer_loss = $CL_ON_PEER_LOSS"
		[ -n "${CL_HOLD_BOUND_MS:-}" ] && echo "hold_bound_ms = $CL_HOLD_BOUND_MS"
		[ -n "${CL_EVENT_PORT:-}" ] && echo "event_port = true"
		for ((k = 1; k <= ${CL_EXTRA_NICS:-0}; k++)); do
			echo "extra_nic = tap=vmtap$k,mac=52:54:00:52:45:0$k"
		done
		# CL_VM_EXTRA: more "key = value" lines for the VM file
		[ -n "${CL_VM_EXTRA:-}" ] && printf '%s\n' "$CL_VM_EXTRA"
		if [ -n "${CL_DISK_IMAGE:-}" ]; then
			echo "disk = ${CL_DISK_AT:-$CL_DIR/$P/$CL_VM.disk.img}"
			echo "disk_socket = $CL_DIR/$P/run/$CL_VM.disk"
			for ((k = 1; k <= ${CL_EXTRA_DISKS:-0}; k++)); do
				echo "extra_disk = $CL_DIR/$P/$CL_VM.disk$k.img"
			done
			[ -n "${CL_NVRAM:-}" ] && echo "nvram = $CL_DIR/$P/$CL_VM.nvram.fd"
		fi
		for arg in "${CL_ARGS[@]}"; do echo "qemu_arg = $arg"; done
	} > "$CL_DIR/$CL_VM.conf"

	# A VM with a disk: the daemon serves it before QEMU can start.
	local drive=()
	if [ -n "${CL_DISK_IMAGE:-}" ] && [ -z "${CL_DISK_AT:-}" ]; then
		cp --sparse=always "$CL_DISK_IMAGE" "$CL_DIR/$P/$CL_VM.disk.img" || return 1
		# On disk now: otherwise the guest's first flush makes remusdbd's
		# disk server fdatasync the whole copy inside its event loop
		# (seen: 558 ms, past the watchdog's 500 ms deadline)
		sync "$CL_DIR/$P/$CL_VM.disk.img" || return 1
	fi
	# the extra disks: copies of CL_EXTRA_DISK_IMAGES (one path per disk,
	# space-separated), or else empty, sparse, CL_EXTRA_DISK_MB each (64)
	local extra_imgs=()
	read -r -a extra_imgs <<<"${CL_EXTRA_DISK_IMAGES:-}"
	for ((k = 1; k <= ${CL_EXTRA_DISKS:-0}; k++)); do
		if [ -n "${extra_imgs[k - 1]:-}" ]; then
			cp --sparse=always "${extra_imgs[k - 1]}" "$CL_DIR/$P/$CL_VM.disk$k.img" &&
				sync "$CL_DIR/$P/$CL_VM.disk$k.img" || return 1
		else
			truncate -s "${CL_EXTRA_DISK_MB:-64}M" "$CL_DIR/$P/$CL_VM.disk$k.img" || return 1
		fi
	done
	# CL_NVRAM: the UEFI variable store, a fresh copy of OVMF's
	if [ -n "${CL_NVRAM:-}" ]; then
		cp "$CL_OVMF_VARS" "$CL_DIR/$P/$CL_VM.nvram.fd" || return 1
	fi
	if [ -n "${CL_DISK_IMAGE:-}" ]; then
		cl_ctl "$P" attach "$CL_DIR/$CL_VM.conf" || return 1
		# reconnect-delay: if remusdbd restarts, QEMU holds the guest's
		# disk requests (up to 15 s) until the disk is served again
		# CL_DRIVE_OPTS: more of the drive's options (discard=unmap)
		drive=(-drive "if=none,id=disk0,driver=nbd,server.type=unix,server.path=$CL_DIR/$P/run/$CL_VM.disk,reconnect-delay=15${CL_DRIVE_OPTS:+,$CL_DRIVE_OPTS}")
		# CL_EXTRA_DISK_FORMATS: each extra disk's format (raw or
		# qcow2: QEMU's qcow2 driver on the NBD export of the file)
		local fmts=()
		read -r -a fmts <<<"${CL_EXTRA_DISK_FORMATS:-}"
		# the UEFI variable store: the disk after the extra ones
		if [ -n "${CL_NVRAM:-}" ]; then
			k=$((${CL_EXTRA_DISKS:-0} + 1))
			drive+=(-drive "if=pflash,unit=1,driver=nbd,server.type=unix,server.path=$CL_DIR/$P/run/$CL_VM.disk$k,reconnect-delay=15")
		fi
		for ((k = 1; k <= ${CL_EXTRA_DISKS:-0}; k++)); do
			if [ "${fmts[k - 1]:-raw}" = qcow2 ]; then
				drive+=(-drive "if=none,id=disk$k,driver=qcow2,file.driver=nbd,file.server.type=unix,file.server.path=$CL_DIR/$P/run/$CL_VM.disk$k,file.reconnect-delay=15")
			else
				drive+=(-drive "if=none,id=disk$k,driver=nbd,server.type=unix,server.path=$CL_DIR/$P/run/$CL_VM.disk$k,reconnect-delay=15")
			fi
		done
	fi

	# CL_ATTACH: known to the daemon before QEMU starts, disk or not (a
	# protect that fails leaves it attached, its state saying why).
	if [ -z "${CL_DISK_IMAGE:-}" ] && [ -n "${CL_ATTACH:-}" ]; then
		cl_ctl "$P" attach "$CL_DIR/$CL_VM.conf" || return 1
	fi
	[ -n "${CL_EVENT_PORT:-}" ] &&
		drive+=(-chardev "socket,id=rdbevent,path=$CL_DIR/$P/$CL_VM.event,server=on,wait=off")
	# CL_RAM_SHARED=file|memfd: the primary's guest RAM (pc.ram) shared,
	# on a file in /dev/shm (cl_pri_ram_file: tests read it) or a memfd;
	# the backup's restore brings its own backend (the common arguments
	# carry none)
	case ${CL_RAM_SHARED:-} in
	'') ;;
	file) drive+=(-object "memory-backend-file,id=pc.ram,size=${CL_RAM_MB:-256}M,mem-path=$(cl_pri_ram_file "$P"),share=on,prealloc=on"
		-machine memory-backend=pc.ram) ;;
	memfd) drive+=(-object "memory-backend-memfd,id=pc.ram,size=${CL_RAM_MB:-256}M,share=on,prealloc=on"
		-machine memory-backend=pc.ram) ;;
	*) rdb_log "CL_RAM_SHARED must be file or memfd, not '$CL_RAM_SHARED'"; return 1 ;;
	esac
	local pin=() ev
	for ((k = 1; k <= ${CL_EXTRA_NICS:-0}; k++)); do
		drive+=(-netdev "stream,id=net$k,server=off,addr.type=unix,addr.path=$CL_DIR/$P/run/$CL_VM.net$k,reconnect-ms=100")
	done
	[ -n "${CL_GUEST_CPUS:-}" ] && pin=(taskset -c "$CL_GUEST_CPUS")
	# CL_QEMU_TRACE=FILE: the checkpoint path's trace events into FILE
	# (tests/bench/pausebreak.sh reads them)
	if [ -n "${CL_QEMU_TRACE:-}" ]; then
		for ev in runstate_set vm_stop_flush_all colo_send_message colo_receive_message \
			migration_bitmap_sync_start migration_bitmap_sync_end \
			savevm_section_start savevm_section_end vmstate_downtime_checkpoint; do
			drive+=(-trace "enable=$ev")
		done
		# (the log backend prints TID@TIME: only with timestamps on)
		drive+=(-D "$CL_QEMU_TRACE" -msg timestamp=on)
	fi
	ip netns exec "$(netns_name "$run" "$P")" "${pin[@]}" "$RDB_QEMU" "${CL_ARGS[@]}" "${drive[@]}" \
		-qmp "unix:$CL_DIR/$P/$CL_VM.qmp,server=on,wait=off" \
		-qmp "unix:$CL_DIR/$P/$CL_VM.wd.qmp,server=on,wait=off" \
		-qmp "unix:$CL_DIR/$P/$CL_VM.mon.qmp,server=on,wait=off" \
		-netdev "stream,id=net0,server=off,addr.type=unix,addr.path=$CL_DIR/$P/run/$CL_VM.net,reconnect-ms=100" \
		-chardev "socket,id=ser0,path=$CL_DIR/$P/$(cl_vm_file serial.sock),server=on,wait=off,logfile=$CL_DIR/$P/$(cl_vm_file console.log)" \
		-serial chardev:ser0 \
		>"$CL_DIR/$P/$(cl_vm_file qemu.log)" 2>&1 &
	echo $! > "$CL_DIR/$P/$(cl_vm_file qemu.pid)"
	disown $!
	wait_for 10 "primary QEMU's QMP socket" test -S "$CL_DIR/$P/$CL_VM.qmp" || return 1
	local ready=${CL_GUEST_READY:-REMUSDB-GUEST-READY}
	if [ -n "${CL_NO_PROTECT:-}" ]; then
		wait_for 90 "$ready on the primary's console" \
			grep -q "$ready" "$CL_DIR/$P/$(cl_vm_file console.log)"
		return
	fi
	cl_ctl "$P" protect "$CL_DIR/$CL_VM.conf" || return 1
	cl_ctl "$P" wait "$CL_VM" protected --timeout 90 || return 1
	cl_ctl bak wait "$CL_VM" protected --timeout 10 || return 1
	wait_for 90 "$ready on the primary's console" \
		grep -q "$ready" "$CL_DIR/$P/$(cl_vm_file console.log)" || return 1
}

# cl_protect_back RUN: after a power pull of pri and its failover to bak,
# pri is repaired (links and remusdbd back) and the survivor protects the
# VM back to it by name; both sides protected, or the test fails.
cl_protect_back() {
	local run=$1
	netns_power_restore "$run" pri
	wait_for 15 "the repaired host reachable on the replication link" \
		ip netns exec "$(netns_name "$run" bak)" ping -c 1 -W 1 10.78.0.1 ||
		rdb_fail "the repaired host's links did not come back"
	cl_start_daemon pri || rdb_fail "the repaired host's remusdbd did not start"
	cl_ctl bak protect "$CL_VM" peer=10.78.0.1:7788 || rdb_fail "protect back refused"
	cl_ctl bak wait "$CL_VM" protected --timeout 120 ||
		rdb_fail "the survivor is not protected (see $CL_DIR/bak/remusdbd.log)"
	cl_ctl pri wait "$CL_VM" protected --timeout 10 ||
		rdb_fail "the old host is not the backup"
}

cluster_pull_power() {
	netns_power_pull "$1"
}

# cl_pri_ram_file HOST: the guest RAM file of HOST's QEMU (CL_RAM_SHARED=file)
cl_pri_ram_file() {
	echo "/dev/shm/rdb-ram-$CL_RUN-$1-$CL_VM"
}

cluster_down() {
	local rc=$? run=$1 side pid	# rc: the test's exit status (EXIT trap)
	[ -n "${CL_DIR:-}" ] || return 0
	# A failed test shows its daemons' last words where a CI log's tail
	# will carry them (the whole logs stay in $CL_DIR).
	if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
		for side in pri pr2 bak; do
			[ -s "$CL_DIR/$side/remusdbd.log" ] || continue
			echo "-- $side remusdbd.log, last 12 lines:"
			tail -n 12 "$CL_DIR/$side/remusdbd.log"
		done >&2
	fi
	for pid in "$CL_DIR"/pri/*.pid "$CL_DIR"/pr2/*.pid "$CL_DIR"/bak/*.pid "$CL_DIR"/wit/*.pid; do
		[ -f "$pid" ] && kill -9 "$(cat "$pid")" 2>/dev/null
	done
	# The backup's restored QEMU is the daemon's child but outlives it.
	pkill -9 -f "$CL_DIR/bak/" 2>/dev/null
	netns_cleanup "$run"
	rm -rf "/dev/shm/rdb-wit-$CL_RUN" "/dev/shm/rdb-ram-$CL_RUN-"*
	[ -n "${NM_BLANK_DISK:-}" ] && rm -f "$NM_BLANK_DISK"
	# A state change the lifecycle's table does not list (vm.c) is a
	# bug, whatever the test checked
	local unlisted
	unlisted=$(grep -h "is not in the lifecycle's table" "$CL_DIR"/*/remusdbd.log 2>/dev/null | head -n 3)
	if [ -n "$unlisted" ] && [ "$rc" = 0 ]; then
		echo "FAIL: a state change not in the lifecycle's table (dom0-daemon/vm.c):" >&2
		echo "$unlisted" >&2
		rc=1
	fi
	# A passed test keeps its logs and results, not its RAM and disk
	# images (~0.5-1 GiB a test: a whole run would fill a small disk).
	# A failed one keeps everything; RDB_KEEP_E2E=1 keeps it all anyway.
	if [ "$rc" = 0 ] && [ -z "${RDB_KEEP_E2E:-}" ] && [ -d "$CL_DIR" ]; then
		find "$CL_DIR" -xdev -type f -size +4M ! -name '*.log' ! -name '*.json' -delete
	fi
	[ "$rc" = 0 ] || [ -z "$unlisted" ] || exit 1
	return 0
}

# ---- freeze measurements (the I5 tests) ----
# The guest prints "tick N" every 10 ms on its serial port; linegap times
# the ticks from the host.

# cl_ticks_start SECONDS: measure for SECONDS from the first tick on.
# Sets CL_GAP_PID; results in $CL_DIR/linegap.json.
cl_ticks_start() {
	"$RDB_HELPERS/linegap" --socket "$CL_DIR/pri/serial.sock" --start "tick " \
		--duration "$1" >"$CL_DIR/linegap.json" 2>"$CL_DIR/linegap.log" &
	CL_GAP_PID=$!
	wait_for 20 "ticks on the serial console" grep -q started "$CL_DIR/linegap.log"
}

# cl_starve_daemon MS [SIDE[:MS2]...]: the host does not run remusdbd on
# SIDEs (default: pri) for MS milliseconds (a SIDE:MS2, for its first MS2
# only): each one's loop thread is pinned to the last CPU, where a
# SCHED_FIFO busy loop runs that long.  The threads stay runnable (R) and
# get no CPU, as a hypervisor's steal or a busy CPU leaves them (CI: 57%
# steal).  With both sides, the two "hosts" stall together, as two
# namespaces on one stolen VM do.  Their CPUs are put back after (a
# thread let go early runs at once on another CPU).  The kernel still
# runs other tasks 50 ms in each second beside a real-time loop (RT
# throttling; the fair server since 6.12): MS over ~900 is no longer one
# stretch.
cl_starve_daemon() {
	local ms=$1 arg side cpu rc pids=() olds=() early=() lets=() i wpid
	local wpids=() wolds=()
	shift
	[ $# -gt 0 ] || set -- pri
	cpu=$(($(nproc) - 1))
	for arg in "$@"; do
		side=${arg%%:*}
		pids+=("$(cat "$CL_DIR/$side/remusdbd.pid")") || return 1
		olds+=("$(taskset -p "${pids[-1]}" | awk '{print $NF}')") || return 1
		early+=("$([ "$arg" = "$side" ] || echo "${arg#*:}")")
	done
	for i in "${!pids[@]}"; do
		taskset -p -c "$cpu" "${pids[$i]}" >/dev/null || return 1
	done
	# each one's watchdog keeps to the other CPUs: it must see the
	# stall, not be in it (a child woken on the busy CPU overslept
	# 404 ms under a CPU hog and judged nothing)
	for arg in "$@"; do
		side=${arg%%:*}
		wpid=$(sed -n 's/.*watchdog running as pid \([0-9]*\).*/\1/p' "$CL_DIR/$side/remusdbd.log" | tail -1)
		[ -n "$wpid" ] || continue
		wpids+=("$wpid")
		wolds+=("$(taskset -p "$wpid" | awk '{print $NF}')") || return 1
		taskset -p -c "0-$((cpu - 1))" "$wpid" >/dev/null || return 1
	done
	for i in "${!pids[@]}"; do
		[ -n "${early[$i]}" ] || continue
		# real-time too, above the loop: on time beside a CPU hog (at
		# nice 0 it let the backup go ~200 ms late, with the primary).
		# Onto the other CPUs only: a mask that still holds the busy
		# CPU moves no thread queued there (the kernel leaves a task
		# where it is if its CPU stays allowed), and beside a CPU hog
		# no idle CPU pulls it either; its own mask comes back at the
		# end, with the others'.
		chrt -f 30 sh -c 'sleep "$1"; taskset -p -c "$2" "$3" >/dev/null' _ \
			"$(awk -v m="${early[$i]}" 'BEGIN { printf "%.3f", m / 1000 }')" \
			"0-$((cpu - 1))" "${pids[$i]}" &
		lets+=($!)
	done
	# the timer that ends the loop must preempt it: a higher priority
	chrt -f 20 taskset -c "$cpu" timeout "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')" \
		chrt -f 10 sh -c 'while :; do :; done'
	rc=$?
	[ ${#lets[@]} = 0 ] || wait "${lets[@]}"
	for i in "${!pids[@]}"; do
		taskset -p "${olds[$i]}" "${pids[$i]}" >/dev/null || return 1
	done
	for i in "${!wpids[@]}"; do
		taskset -p "${wolds[$i]}" "${wpids[$i]}" >/dev/null || return 1
	done
	[ "$rc" = 124 ]	# ended by its timeout
}

# cl_stop_daemon_in_pause: fault injection makes the primary's daemon stop
# itself (SIGSTOP) inside the next checkpoint pause.  Sets CL_DPID
# (`ip netns exec` execs the daemon: the recorded pid is the daemon's).
cl_stop_daemon_in_pause() {
	cl_ctl pri inject "$CL_VM" stop-in-pause || return 1
	CL_DPID=$(cat "$CL_DIR/pri/remusdbd.pid")
	wait_for 5 "remusdbd stopped inside a pause" \
		sh -c "grep -q '^State:.*T' /proc/$CL_DPID/status"
}

# cl_check_freeze LIMIT_MS: the longest gap between ticks, 0 < gap <= LIMIT.
# Sets CL_MAX_GAP and CL_TICKS.
cl_check_freeze() {
	CL_MAX_GAP=$(jq -r .max_gap_ms "$CL_DIR/linegap.json")
	CL_TICKS=$(jq -r .lines "$CL_DIR/linegap.json")
	awk -v g="$CL_MAX_GAP" -v lim="$1" 'BEGIN { exit !(g > 0 && g <= lim) }'
}

# cl_console_cmd "CMD": types a line on the primary guest's serial console
# (its shell reads ttyS0); the output lands in console.log.
cl_console_cmd() {
	cl_console_cmd_at "$CL_DIR/pri/$(cl_vm_file serial.sock)" "$1"
}

# cl_console_cmd_at SOCKET "CMD": the same on another console (a VM
# restored by a backup: its run_dir/NAME.serial.sock).
cl_console_cmd_at() {
	timeout 8 python3 - "$1" "$2" <<'EOP'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(4)
s.connect(sys.argv[1])
# The UART takes 16 bytes at a time: QEMU reads the socket only as fast
# as the guest drains it, and drops what is unread when we hang up.
s.sendall(sys.argv[2].encode() + b"\n")
time.sleep(2)
s.close()
EOP
}

# cl_frozen_disks_equal SIDE SOCK LOG IMG_A IMG_B [ON_DIFFER]: the disks
# compared at a quiet point.  The guest's /pg is frozen through its
# console (SOCK, its output in LOG; the marker is split in the typed line
# so that only the guest's own output matches it), then SIDE (the
# primary: pri or bak) waits until the epoch after the one open at the
# freeze is committed — every write finished before the freeze is in it
# or earlier, and acknowledgements may lag several epochs — and IMG_A is
# compared with IMG_B; ON_DIFFER (a function) runs while still frozen if
# they differ; then the guest thaws.  Sets CL_DISK_EQUAL (true/false).
# A guest with several disks: CL_FREEZE_MOUNTS lists its mount points
# (default /pg), all frozen together, and CL_FREEZE_PAIRS the other
# disks' "PRIMARY:REPLICA" pairs, compared in the same frozen moment.
cl_frozen_disks_equal() {
	local side=$1 sock=$2 log=$3 a=$4 b=$5 on_differ=${6:-} e0 tag=$RANDOM
	local mounts=${CL_FREEZE_MOUNTS:-/pg} freeze= thaw= m k
	for m in $mounts; do
		freeze+="fsfreeze --freeze $m && "
		thaw+="fsfreeze --unfreeze $m; "
	done
	cl_console_cmd_at "$sock" "sync; ${freeze}echo REMUSDB-FRO\"ZEN\"-$tag" ||
		rdb_fail "console"
	wait_for 20 "guest filesystem frozen" grep -q "REMUSDB-FROZEN-$tag" "$log" ||
		rdb_fail "fsfreeze in the guest did not answer"
	rdb_log "the guest's filesystem is frozen (its DBMS waits): comparing $a and $b"
	e0=$(cl_ctl "$side" status "$CL_VM" --json | jq '.vms[0].checkpoints + 1')
	wait_for 10 "epoch $e0 committed" \
		bash -c "[ \$($RDB_BUILD/remusdbctl --socket $CL_DIR/$side/ctl.sock status $CL_VM --json | jq .vms[0].committed_epoch) -ge $e0 ]" ||
		rdb_fail "checkpoints stopped"
	# (only where either has data: while the guest is frozen its DBMS
	# waits, and its clients with it; a whole 1 GiB image read through
	# crashfs took 19 s on a busy host, past a client's 30 s elsewhere)
	CL_DISK_EQUAL=true
	python3 "$RDB_ROOT/tests/lib/sparsecmp.py" "$a" "$b" >&2 || CL_DISK_EQUAL=false
	# CL_FREEZE_PAIRS: the other disks' pairs, "PRIMARY:REPLICA ..."
	for k in ${CL_FREEZE_PAIRS:-}; do
		python3 "$RDB_ROOT/tests/lib/sparsecmp.py" "${k%%:*}" "${k#*:}" >&2 || CL_DISK_EQUAL=false
	done
	[ "$CL_DISK_EQUAL" = false ] && [ -n "$on_differ" ] && "$on_differ"
	cl_console_cmd_at "$sock" "${thaw}echo REMUSDB-THA\"WED\"-$tag" ||
		rdb_fail "console"
	wait_for 20 "guest filesystem thawed" grep -q "REMUSDB-THAWED-$tag" "$log" ||
		rdb_fail "fsfreeze --unfreeze in the guest did not answer"
	rdb_log "the guest's filesystem is thawed (disks equal: $CL_DISK_EQUAL)"
}

# cl_use_pg_guest: the next cluster_vm_up runs the PostgreSQL guest
# (tools/mkguest-pg.sh, built or linked from its cache) on a disk, with
# remusdb.ko, its event helper, the ticker and the server with RemusDB's patch
# (make dbms; CL_PG_SERVER names another; CL_PG_SCALE: pgbench's scale,
# default 1; CL_PG_LAYOUT=split: the WAL and a tablespace on two more
# disks, CL_EXTRA_DISKS and CL_EXTRA_DISK_IMAGES set for them, and
# CL_FREEZE_MOUNTS): sets CL_GUEST, CL_DISK_IMAGE, CL_RAM_MB (512 unless set),
# CL_GUEST_RUN (nothing), CL_GUEST_READY, CL_EVENT_PORT, and PGBIN for the
# host's client tools.
cl_use_pg_guest() {
	local ko=$RDB_ROOT/build/kmod/remusdb.ko ev=$RDB_HELPERS/remusdb-eventd
	[ -f "$ko" ] || { rdb_log "$ko missing (make kmod)"; return 1; }
	CL_PG_SERVER=${CL_PG_SERVER:-$RDB_ROOT/build/dbms/postgresql-15/postgres}
	[ -x "$CL_PG_SERVER" ] || { rdb_log "$CL_PG_SERVER missing (make dbms)"; return 1; }
	local out=$RDB_ROOT/build/guest-pg${CL_PG_SCALE:+-s$CL_PG_SCALE}${CL_PG_LAYOUT:+-$CL_PG_LAYOUT}
	bash "$RDB_ROOT/tools/mkguest-pg.sh" --out "$out" --kmod "$ko" --eventd "$ev" \
		--static "$RDB_HELPERS/ticker" ${CL_PG_SERVER:+--server "$CL_PG_SERVER"} ${CL_PG_SCALE:+--scale "$CL_PG_SCALE"} \
		${CL_PG_LAYOUT:+--layout "$CL_PG_LAYOUT"} >&2 ||
		return 1
	if [ "${CL_PG_LAYOUT:-one}" = split ]; then
		export CL_EXTRA_DISKS=2 CL_EXTRA_DISK_IMAGES="$out/pgwal.img $out/pgts.img"
		export CL_FREEZE_MOUNTS="/pg /pgwal /pgts"
	fi
	export CL_EVENT_PORT=1
	PGBIN=/usr/lib/postgresql/15/bin
	export CL_GUEST=$out CL_DISK_IMAGE=$out/pgdata.img
	export CL_RAM_MB=${CL_RAM_MB:-512} CL_GUEST_RUN= CL_GUEST_READY=REMUSDB-PG-READY
}

# cl_pg_split_up RUN CKPT DB: the PostgreSQL guest of multi-pg*.sh up
# and protected: --layout split (WAL and a tablespace on two more disks)
# and a second NIC, eth1 CL_PG_IP1 (10.76.0.100), the client host on both
# subnets; PostgreSQL answers DB on both NICs.  Defines clix (a command
# on the client host).
CL_PG_IP1=10.76.0.100
cl_pg_split_up() {
	local run=$1 ckpt=$2 db=$3
	export CL_PG_LAYOUT=split
	cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
	export CL_EXTRA_NICS=1 CL_APPEND_MORE="remusdb.ip1=$CL_PG_IP1/24"
	cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"
	cluster_vm_up "$ckpt" || rdb_fail "protected PostgreSQL VM did not come up (logs in $CL_DIR)"
	clix() { ip netns exec "$(netns_name "$CL_RUN" cli)" "$@"; }
	clix ip addr add 10.76.0.10/24 dev eth0 || rdb_fail "client address on the second subnet"
	cl_wait_pg "$db" || rdb_fail "PostgreSQL not reachable from the client on NIC 0"
	wait_for 30 "PostgreSQL reachable on NIC 1" \
		clix "$PGBIN/pg_isready" -q -h "$CL_PG_IP1" -U postgres -d "$db" -t 2 ||
		rdb_fail "PostgreSQL not reachable from the client on NIC 1 ($CL_PG_IP1)"
}

# cl_wait_pg [DB]: PostgreSQL in the guest answers the client host.
cl_wait_pg() {
	wait_for 30 "PostgreSQL reachable from the client" \
		ip netns exec "$(netns_name "$CL_RUN" cli)" "$PGBIN/pg_isready" -q \
		-h "$CL_GUEST_IP" -U postgres -d "${1:-postgres}" -t 2
}

# The ledger workload's verdicts (build/workload/ledger, its journal in
# $CL_DIR/ledger, 3 clients).
#
# cl_ledger_gap NAME AT_MS UNTIL_MS: the clients' longest gap that began
# within 1 s before AT_MS (ms since the epoch: a restart, a pull) and
# ended before UNTIL_MS (the next event), in $CL_DIR/ledger-NAME.json
# (.failover_gap_ms).
cl_ledger_gap() {
	ip netns exec "$(netns_name "$CL_RUN" cli)" "$RDB_ROOT/build/workload/ledger" \
		check --host "$CL_GUEST_IP" --clients 3 --journal "$CL_DIR/ledger" \
		--pull-ms "$2" --gap-before-ms "$3" --json "$CL_DIR/ledger-$1.json" \
		2>"$CL_DIR/ledger-check-$1.log"
}

# cl_ledger_verdict PULL_MS: after a power pull at PULL_MS, no
# acknowledged commit lost, no phantom or partial transaction, no
# connection broken ($CL_DIR/ledger.json, printed); fails the test
# otherwise.
cl_ledger_verdict() {
	ip netns exec "$(netns_name "$CL_RUN" cli)" "$RDB_ROOT/build/workload/ledger" \
		check --host "$CL_GUEST_IP" --clients 3 --journal "$CL_DIR/ledger" \
		--pull-ms "$1" --json "$CL_DIR/ledger.json" 2>"$CL_DIR/ledger-check.log"
	cat "$CL_DIR/ledger.json"
	jq -e '.lost_commits == 0 and .phantom_txns == 0 and .partial_txns == 0 and
	       .broken_connections == 0 and .acked_commits > 0' "$CL_DIR/ledger.json" >/dev/null ||
		rdb_fail "ledger invariants (see $CL_DIR/ledger-check.log, $CL_DIR/ledger-run.log)"
}

# cl_no_guest_disk_errors CONSOLE...: none of the guest's console logs
# that exist shows a disk error; fails the test otherwise.
cl_no_guest_disk_errors() {
	local c
	for c in "$@"; do
		[ -f "$c" ] || continue
		if grep -aiq "I/O error\|EXT4-fs error\|PANIC" "$c"; then
			grep -ai "I/O error\|EXT4-fs error\|PANIC" "$c" | head -3
			rdb_fail "the guest saw disk errors ($c)"
		fi
	done
}

# cl_use_maria_guest: the next cluster_vm_up runs the MariaDB guest
# (tools/mkguest-maria.sh: Debian's MariaDB 10.11 with the patched
# mariadbd from make dbms, remusdb.ko and its event helper, the ledger
# and sysbench tables) on a disk: sets CL_GUEST, CL_DISK_IMAGE, CL_RAM_MB
# (512 unless set), CL_GUEST_RUN (nothing), CL_GUEST_READY, CL_EVENT_PORT,
# CL_SB_TABLES and CL_SB_ROWS (the sysbench tables in it).
cl_use_maria_guest() {
	local ko=$RDB_ROOT/build/kmod/remusdb.ko ev=$RDB_HELPERS/remusdb-eventd payload
	local server=${CL_MARIA_SERVER:-$RDB_ROOT/build/dbms/mariadb-10.11/mariadbd}
	[ -x "$server" ] || { rdb_log "$server missing (make dbms)"; return 1; }
	payload=$(mktemp -d)
	bash "$RDB_ROOT/tools/guest-remusdb-payload.sh" "$payload" "$ko" "$ev" >&2 &&
		bash "$RDB_ROOT/tools/mkguest-maria.sh" --out "$RDB_ROOT/build/guest-maria" \
			--server "$server" --payload "$payload" >&2
	local rc=$?
	rm -rf "$payload"
	[ $rc = 0 ] || return 1
	export CL_GUEST=$RDB_ROOT/build/guest-maria
	export CL_DISK_IMAGE=$CL_GUEST/mariadata.img CL_EVENT_PORT=1
	export CL_RAM_MB=${CL_RAM_MB:-512} CL_GUEST_RUN= CL_GUEST_READY=REMUSDB-MARIADB-READY
	export CL_SB_TABLES=4 CL_SB_ROWS=10000
}

# cl_wait_maria: MariaDB in the guest answers the client host.
cl_wait_maria() {
	wait_for 30 "MariaDB reachable from the client" \
		ip netns exec "$(netns_name "$CL_RUN" cli)" mariadb -h "$CL_GUEST_IP" \
		-u root --connect-timeout=2 -e "SELECT 1" ledger
}

CL_SEQ_JQ='def seq_ok: .gaps == 0 and .dups == 0 and .regressions == 0
	and .corrupt == 0 and (.connection_lost | not)
	and .values_after_stall > 0 and (.marks[0].next_ms // -1) >= 0;'

cl_seq_start() {
	local secs=$1
	shift
	ip netns exec "$(netns_name "$CL_RUN" cli)" "$RDB_HELPERS/seqcheck" \
		--host "$CL_GUEST_IP" --port "$CL_SEQ_PORT" --duration "$secs" \
		--connect-timeout 20 --stall-timeout 20 "$@" \
		>"$CL_DIR/seqcheck.json" 2>"$CL_DIR/seqcheck.log" &
	CL_CHECKER=$!
	wait_for 20 "first values at the client" \
		grep -q '^first ' "$CL_DIR/seqcheck.log" || rdb_fail "client got nothing"
}

cluster_seq_pull() {
	local run=$1 before_s=$2 after_s=$3 total_s checker
	total_s=$(awk -v a="$before_s" -v b="$after_s" 'BEGIN{printf "%d", a + b + 25}')
	cl_seq_start "$total_s"
	checker=$CL_CHECKER
	sleep "$before_s"
	cl_status pri "$CL_VM" --json > "$CL_DIR/pri-status.json" ||
		rdb_fail "primary not answering before the pull"
	cluster_pull_power "$run"
	kill -USR1 "$checker"
	echo "pulled the primary's power at +${before_s}s"
	cl_ctl bak wait "$CL_VM" failed-over --timeout 30 ||
		rdb_fail "backup did not fail over (see $CL_DIR/bak/remusdbd.log)"
	cl_ctl bak status "$CL_VM" --json > "$CL_DIR/bak-status.json"
	sleep "$after_s"
	kill -INT "$checker" 2>/dev/null
	wait_pid 15 "$checker"
	CL_CHECKER_RC=$?
}
