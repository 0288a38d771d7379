#!/usr/bin/env bash
# The Debian packages (make deb -> build/deb/) in a clean Debian root, as an
# operator gets them:
#  - remusdb installs with apt (its dependencies from the mirror), every
#    file where it belongs, the configuration a conffile with every option
#    commented out, the unit enabled;
#  - remusdb-xen installs beside it (Xen's libraries from the mirror): the
#    helper runs, the vif script is in /etc/xen/scripts, executable, and
#    purging the package removes both;
#  - the root boots systemd as a container (systemd-nspawn, private
#    network); the enabled unit starts at boot and fails for want of the
#    link key, saying so; with the key, `systemctl start` returns once
#    remusdbd said READY=1 (Type=notify), the unit is active, its STATUS=
#    and watchdog pings reach systemd, remusdbctl status answers on
#    /run/remusdb; the processes it leaves running are in units of their
#    own (a VM's disk server in a scope; a QEMU started as a failover's
#    is, a service outside the sandbox; both outlive the unit that
#    started them); `systemctl stop` ends it cleanly; with qemu_group
#    /run/remusdb is 0770 with that group; removing the package
#    stops it, purging it leaves the key and /var/lib/remusdb;
#  - remusdb-dkms and remusdb-guest install; with the guest kernel's
#    headers (linux-headers-6.1.0-56-amd64) DKMS builds and installs
#    remusdb.ko for that kernel; remusdb-eventd runs.
# The debootstrapped root is cached as a tarball in
# ${REMUSDB_CACHE:-/var/cache/remusdb}/deb-root-KEY (KEY: the package list
# and the apt sources), with apt's downloads beside it, so only the first
# run pays for debootstrap (~1-2 min).  RDB_PKG_DKMS=0 skips the DKMS part.
# Exit 0 pass, 1 fail, 77 skipped.
set -u
cd "$(dirname "$0")/.."
# (no QEMU here: keep common.sh from building the test QEMU)
RDB_QEMU=${RDB_QEMU:-unused}
. tests/lib/common.sh
rdb_require_root
for t in debootstrap systemd-nspawn nsenter zstd dpkg-deb flock; do
	command -v "$t" >/dev/null || rdb_skip "$t (make setup)"
done

debs=$PWD/build/deb
ver=$(dpkg-parsechangelog -l tools/debian/changelog -S Version)
for p in remusdb_${ver}_amd64 remusdb-xen_${ver}_amd64 remusdb-dkms_${ver}_all remusdb-guest_${ver}_amd64; do
	[ -f "$debs/$p.deb" ] || rdb_fail "$debs/$p.deb missing (make deb)"
done
kver=6.1.0-56-amd64	# the test guest's kernel (Makefile KMOD_KVER)
suite=bookworm
include=systemd	# what the root needs beyond minbase: systemd to boot

# The apt sources the root gets: this machine's Debian entries (the same
# mirror tools/setup-deps.sh reads; no host is named here), binary only.
sources() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		case $(basename "$f") in remusdb*) continue ;; esac
		grep -qE '^URIs:.*/debian(-security)?/?( |$)' "$f" || continue
		grep -qE '^Types:.*\bdeb\b' "$f" || continue
		echo "# from $f"
		sed 's/^Types:.*/Types: deb/' "$f"
		echo
	done
	[ -f /etc/apt/sources.list ] && awk '$1 == "deb" && $0 ~ /\/debian(-security)?\/? /' /etc/apt/sources.list
}
mirror_uri() {
	sources | awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}
		$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) {print $i; exit}}'
}
src_text=$(sources)
mirror=$(mirror_uri)
[ -n "$mirror" ] || rdb_fail "no Debian mirror in /etc/apt/sources.list{,.d}"
case "$src_text" in *https://*) include="$include,ca-certificates" ;; esac

cache=${REMUSDB_CACHE:-/var/cache/remusdb}
key=$(printf '%s\n' "root v1" "$suite" "$include" "$mirror" "$src_text" | sha256sum | cut -c1-16)
entry=$cache/deb-root-$key
mkdir -p "$entry/archives"
# one run at a time per cached root (the tarball, apt's downloads)
exec 9>"$entry/.lock"
flock -w 900 9 || rdb_fail "$entry is locked by another run for 15 min"

# (not under build/: the Makefile includes every build/**/*.d, and a Debian
# root has directories named so)
d=$(mktemp -d /var/tmp/remusdb-pkgtest.XXXXXX)
root=$d/root
nspawn_pid= eventd_pid=
cleanup() {
	if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
		kill -TERM "$nspawn_pid"	# the container halts
		wait_pid 30 "$nspawn_pid" >/dev/null
	fi
	[ -n "$eventd_pid" ] && kill -9 "$eventd_pid" 2>/dev/null
	# nspawn's mounts were in its own namespace; anything left would be ours
	if grep -q " $d/" /proc/mounts; then
		rdb_log "unmounting what is left under $d"
		grep " $d/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount -l
	fi
	rm -rf "$d"
	rm -rf "/run/systemd/nspawn/propagate/$machine" 2>/dev/null
}
machine=rdbpkg-$$
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
t0=$(date +%s)

# nspawn_run CMD...: CMD in the root (not booted), with this host's
# network, the packages in /debs and apt's downloads kept in the cache.
nspawn_run() {
	timeout 600 systemd-nspawn -q -D "$root" --register=no --keep-unit \
		--bind-ro="$debs:/debs" --bind="$entry/archives:/var/cache/apt/archives" \
		-E DEBIAN_FRONTEND=noninteractive -- "$@"
}

if [ ! -f "$entry/.done" ]; then
	rdb_log "making the clean root (debootstrap --variant=minbase $suite, $mirror) -> $entry"
	mkdir -p "$root"
	timeout 900 debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" \
		> "$d/debootstrap.log" 2>&1 || rdb_fail "debootstrap failed: $(tail -5 "$d/debootstrap.log")"
	rm -f "$root/etc/apt/sources.list"
	printf '%s\n' "$src_text" > "$root/etc/apt/sources.list.d/debian.sources"
	{ nspawn_run apt-get update -q && nspawn_run apt-get -y -q upgrade && nspawn_run apt-get clean; } \
		> "$d/upgrade.log" 2>&1 || rdb_fail "the root's apt-get upgrade failed: $(tail -5 "$d/upgrade.log")"
	tar -C "$root" -I 'zstd -T1 -3' -cf "$entry/root.tar.zst.tmp" . &&
		mv "$entry/root.tar.zst.tmp" "$entry/root.tar.zst" || rdb_fail "cannot write $entry/root.tar.zst"
	touch "$entry/.done"
	rm -rf "$root"
	bash tools/cache-prune.sh "$cache" deb-root 2
fi
touch "$entry/.used"
mkdir -p "$root"
tar -C "$root" -I zstd -xf "$entry/root.tar.zst" || rdb_fail "cannot unpack $entry/root.tar.zst"
rdb_log "clean root ready ($(( $(date +%s) - t0 )) s)"

# -- the host package, with apt, its dependencies from the mirror --------
nspawn_run apt-get update -q > "$d/apt.log" 2>&1 || rdb_fail "apt-get update: $(tail -3 "$d/apt.log")"
# (Recommends: qemu-system-x86 left out: a few hundred MB, not exercised)
nspawn_run apt-get install -y -q --no-install-recommends "/debs/remusdb_${ver}_amd64.deb" \
	>> "$d/apt.log" 2>&1 || rdb_fail "apt-get install remusdb: $(tail -5 "$d/apt.log")"
rdb_log "remusdb installed ($(( $(date +%s) - t0 )) s)"

want=(/usr/sbin/remusdbd /usr/sbin/remusdbctl /lib/systemd/system/remusdbd.service
	/etc/remusdb/remusdbd.conf /usr/share/man/man8/remusdbd.8.gz
	/usr/share/man/man8/remusdbctl.8.gz /usr/share/man/man5/remusdb.conf.5.gz
	/usr/share/man/man5/remusdb-vm.conf.5.gz
	/usr/share/bash-completion/completions/remusdbctl
	/usr/share/doc/remusdb/copyright /usr/share/doc/remusdb/examples/vm1.conf
	/usr/share/remusdb/drill-report.sh /usr/share/remusdb/grafana/remusdb.json
	/usr/share/remusdb/libvirt/qemu-hook)
listed=$(chroot "$root" dpkg -L remusdb)
for f in "${want[@]}"; do
	grep -qx "$f" <<<"$listed" || rdb_fail "dpkg -L remusdb has no $f"
	[ -e "$root$f" ] || rdb_fail "$f is listed but not there"
done
[ "$(stat -c %a "$root/usr/sbin/remusdbd")" = 755 ] || rdb_fail "remusdbd is not 0755"
chroot "$root" dpkg-query -W -f='${Conffiles}\n' remusdb | grep -q '^ /etc/remusdb/remusdbd.conf ' ||
	rdb_fail "/etc/remusdb/remusdbd.conf is not a conffile"
cmp -s "$root/lib/systemd/system/remusdbd.service" tools/systemd/remusdbd.service ||
	rdb_fail "the installed unit is not tools/systemd/remusdbd.service"
readelf -d "$root/usr/sbin/remusdbd" | grep -q BIND_NOW || rdb_fail "remusdbd is not linked with -z now (LDFLAGS lost)"

# the configuration: every option of the daemon's table, all commented out
conf=$root/etc/remusdb/remusdbd.conf
n_opts=$(chroot "$root" remusdbctl config --dump-defaults | grep -cE '^[a-z_0-9]+ =')
n_conf=$(grep -cE '^#[a-z_0-9]+ =' "$conf")
[ "$n_opts" -gt 10 ] && [ "$n_opts" = "$n_conf" ] ||
	rdb_fail "remusdbd.conf has $n_conf commented options, the daemon $n_opts"
! grep -qE '^[^#[:space:]]' "$conf" || rdb_fail "remusdbd.conf sets an option: $(grep -E '^[^#[:space:]]' "$conf" | head -1)"
grep -qx '#metrics_file = /var/lib/prometheus/node-exporter/remusdb.prom' "$conf" ||
	rdb_fail "remusdbd.conf has no commented metrics_file for node_exporter"

help=$(chroot "$root" remusdbctl --help 2>&1) || rdb_fail "remusdbctl --help failed: $help"
grep -q '^  status ' <<<"$help" || rdb_fail "remusdbctl --help lists no status: $help"
zcat "$root/usr/share/man/man8/remusdbd.8.gz" | grep -q '^\.TH REMUSDBD 8' || rdb_fail "remusdbd.8 is not a manual page"
chroot "$root" bash -c '. /usr/share/bash-completion/completions/remusdbctl && complete -p remusdbctl' \
	>/dev/null 2>&1 || rdb_fail "the bash completion does not register for remusdbctl"
[ "$(chroot "$root" systemctl is-enabled remusdbd 2>&1)" = enabled ] || rdb_fail "remusdbd.service is not enabled"

# -- the Xen dom0 helper, with Xen's libraries from the mirror -----------
# (Recommends: xen-utils-4.17 left out: the hypervisor is not booted here)
nspawn_run apt-get install -y -q --no-install-recommends "/debs/remusdb-xen_${ver}_amd64.deb" \
	>> "$d/apt.log" 2>&1 || rdb_fail "apt-get install remusdb-xen: $(tail -5 "$d/apt.log")"
xlisted=$(chroot "$root" dpkg -L remusdb-xen)
for f in /usr/sbin/remusdb-xen /etc/xen/scripts/vif-remusdb /etc/xen/scripts/block-remusdb \
	/usr/share/man/man8/remusdb-xen.8.gz; do
	grep -qx "$f" <<<"$xlisted" && [ -e "$root$f" ] || rdb_fail "remusdb-xen has no $f"
done
for s in vif-remusdb block-remusdb; do
	[ -x "$root/etc/xen/scripts/$s" ] || rdb_fail "$s is not executable"
	cmp -s "$root/etc/xen/scripts/$s" "hypervisor/xen/$s" ||
		rdb_fail "the installed $s is not hypervisor/xen/$s"
done
# block-remusdb's NBD client came with it (Depends: qemu-utils)
chroot "$root" sh -c 'command -v qemu-nbd' > /dev/null || rdb_fail "remusdb-xen did not bring qemu-nbd"
help=$(chroot "$root" remusdb-xen --help 2>&1) && grep -q '^usage: remusdb-xen save' <<<"$help" ||
	rdb_fail "remusdb-xen --help (its libraries resolved?): $help"
readelf -d "$root/usr/sbin/remusdb-xen" | grep -q BIND_NOW || rdb_fail "remusdb-xen is not linked with -z now (LDFLAGS lost)"
zcat "$root/usr/share/man/man8/remusdb-xen.8.gz" | grep -q '^\.TH REMUSDB-XEN 8' || rdb_fail "remusdb-xen.8 is not a manual page"
out=$(chroot "$root" dpkg -P remusdb-xen 2>&1) || rdb_fail "dpkg -P remusdb-xen: $out"
[ ! -e "$root/etc/xen/scripts/vif-remusdb" ] && [ ! -e "$root/etc/xen/scripts/block-remusdb" ] &&
	[ ! -e "$root/usr/sbin/remusdb-xen" ] ||
	rdb_fail "dpkg -P remusdb-xen left its files"
rdb_log "remusdb-xen installed, its helper runs, purged ($(( $(date +%s) - t0 )) s)"

# -- boot the root: systemd as PID 1 of a container ----------------------
install -m 0755 build/helpers/unitspawn "$root/usr/local/bin/unitspawn" || rdb_fail "build/helpers/unitspawn (make check-packaging)"
systemd-nspawn -q -D "$root" --register=no --keep-unit -M "$machine" -b \
	--private-network --console=read-only > "$d/boot.log" 2>&1 &
nspawn_pid=$!
leader() { pgrep -P "$nspawn_pid" -x systemd; }
wait_for 30 "the container's systemd" leader || rdb_fail "no systemd in the container: $(tail -5 "$d/boot.log")"
lpid=$(leader)
# ct CMD...: CMD inside the running container (all its namespaces, its root)
ct() { timeout 60 nsenter -t "$lpid" -a "$@"; }
booted() { case $(ct systemctl is-system-running 2>/dev/null) in running|degraded) return 0 ;; esac; return 1; }
wait_for 60 "the container to finish booting" booted ||
	rdb_fail "the container did not boot: $(ct systemctl is-system-running 2>&1); $(tail -5 "$d/boot.log")"
[ "$(ct cat /proc/1/comm)" = systemd ] || rdb_fail "PID 1 in the container is not systemd"
rdb_log "container booted: systemd $(ct systemctl --version | head -1 | cut -d' ' -f2) as PID 1 ($(( $(date +%s) - t0 )) s)"

out=$(ct systemd-analyze verify --man=no /lib/systemd/system/remusdbd.service 2>&1)
[ -z "$out" ] || rdb_fail "systemd-analyze verify of the installed unit: $out"

# enabled: started at boot, and refused to run without the cluster's key
nokey() { ct journalctl -b -u remusdbd --no-pager | grep -q 'link_psk_file /etc/remusdb/link.psk: No such file'; }
wait_for 20 "remusdbd's complaint about the missing link key" nokey ||
	rdb_fail "remusdbd did not start at boot, or not say the key is missing: $(ct journalctl -b -u remusdbd --no-pager | tail -5)"
[ "$(ct systemctl is-active remusdbd)" != active ] || rdb_fail "remusdbd is active without a link key"

# the operator's step 0 (docs/operations.md), without openssl in the root
ct systemctl stop remusdbd	# (its restart loop, if still going)
ct sh -c 'umask 077; od -An -tx1 -N32 /dev/urandom | tr -d " \n" > /etc/remusdb/link.psk' ||
	rdb_fail "cannot write the link key"
ct systemctl reset-failed remusdbd
# Type=notify: start returns once the daemon said READY=1 (or failed)
out=$(ct systemctl start remusdbd 2>&1) ||
	rdb_fail "systemctl start remusdbd: $out; $(ct journalctl -b -u remusdbd --no-pager | tail -5)"
[ "$(ct systemctl is-active remusdbd)" = active ] || rdb_fail "remusdbd is not active after start"
status=$(ct systemctl status remusdbd --no-pager -n 8 2>&1)
show=$(ct systemctl show remusdbd -p Type -p MainPID -p StatusText -p NRestarts -p WatchdogUSec)
grep -qx 'Type=notify' <<<"$show" || rdb_fail "not Type=notify: $show"
grep -qx 'NRestarts=0' <<<"$show" || rdb_fail "restarted since the start: $show"
grep -q '^StatusText=.' <<<"$show" || rdb_fail "no STATUS= from remusdbd reached systemd: $show"
mpid=$(sed -n 's/^MainPID=//p' <<<"$show")
[ "$(ct readlink "/proc/$mpid/exe")" = /usr/sbin/remusdbd ] || rdb_fail "the main PID $mpid is not /usr/sbin/remusdbd"
ct test -S /run/remusdb/remusdbd.sock || rdb_fail "no control socket in /run/remusdb"
[ "$(ct stat -c %a /run/remusdb)" = 700 ] && [ "$(ct stat -c %a /var/lib/remusdb)" = 700 ] ||
	rdb_fail "/run/remusdb, /var/lib/remusdb are not 0700 (RuntimeDirectory, StateDirectory)"
out=$(ct remusdbctl status 2>&1) || rdb_fail "remusdbctl status: $out"
grep -q '^NAME  *ROLE  *STATE' <<<"$out" || rdb_fail "remusdbctl status: $out"
# WatchdogSec=10s: remusdbd pings every 5 s; systemd records each ping
wd() { ct systemctl show remusdbd -p WatchdogTimestampMonotonic --value; }
wd0=$(wd)
wd_moved() { [ "$(wd)" != "$wd0" ]; }
wait_for 8 "a watchdog ping after $wd0" wd_moved ||
	rdb_fail "no WATCHDOG=1 reached systemd in 8 s"
rdb_log "remusdbd active under systemd, ready, watchdog pinged ($(( $(date +%s) - t0 )) s)"

# -- the processes remusdbd leaves running: units of their own -----------
# (hypervisor/sdunit.h; process_units = auto chooses them under systemd)
ct journalctl -b -u remusdbd --no-pager | grep -q 'the processes it leaves running: transient systemd units' ||
	rdb_fail "remusdbd under systemd did not choose transient units: $(ct journalctl -b -u remusdbd --no-pager | grep 'processes it leaves')"
# cg PID: its cgroup (the unified hierarchy's line); alive PID: it runs
cg() { ct sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null; }
alive() { ct test -d "/proc/$1"; }
# The daemon's own: a VM attached is served by a disk server in a scope.
ct sh -c 'mkdir -p /var/lib/images && truncate -s 64M /var/lib/images/vm1.raw' || rdb_fail "no image for vm1"
printf '%s\n' "name = vm1" "disk = /var/lib/images/vm1.raw" "tap = t0" "peer = 192.0.2.2:7788" \
	"on_peer_loss = manual" "qemu_arg = -machine" "qemu_arg = pc" > "$root/etc/remusdb/vm1.conf"
out=$(ct remusdbctl attach /etc/remusdb/vm1.conf 2>&1) || rdb_fail "remusdbctl attach vm1: $out"
# (its second word is --disk-server: not the word in this shell's own line)
dsrv() { ct sh -c 'for p in /proc/[0-9]*; do [ "$(tr "\0" "\n" < $p/cmdline 2>/dev/null | sed -n 2p)" = --disk-server ] && echo ${p#/proc/}; done' | head -1; }
in_disk_scope() { p=$(dsrv); [ -n "$p" ] && cg "$p" | grep -qE '^/system\.slice/remusdb-vm1-disk-[0-9-]+\.scope$'; }
wait_for 10 "vm1's disk server in a scope of its own" in_disk_scope ||
	rdb_fail "vm1's disk server (pid $(dsrv)) is in $(cg "$(dsrv)"), not a remusdb-vm1-disk-*.scope"
rdb_log "remusdbd's disk server for vm1 runs in $(cg "$(dsrv)")"
out=$(ct remusdbctl detach vm1 2>&1) || rdb_fail "remusdbctl detach vm1: $out"
# A failover's QEMU and a disk server as remusdbd starts them (unitspawn:
# sdunit.c's two paths), from a unit sandboxed as remusdbd.service is
# whose every process ends with it (KillMode=control-group): each must
# outlive it in its own unit, the QEMU without the sandbox.
# (oneshot: systemd-run returns when it has ended; --wait would want D-Bus)
spawner() {
	ct systemd-run --quiet --collect --service-type=oneshot --unit="$1" -p NoNewPrivileges=yes \
		-p PrivateTmp=yes -p ProtectSystem=full -p KillMode=control-group \
		-E UNITSPAWN_MODE="${UNITSPAWN_MODE:-systemd}" /usr/local/bin/unitspawn "${@:2}" ||
		{ ct journalctl -b -u "$1" --no-pager | grep unitspawn | tail -3; return 1; }
}
out=$(spawner rdb-spawner-q service vmx /var/log/rdb-qemu.log /run/rdb-qemu.pid -- \
	/bin/sh -c 'grep NoNewPrivs /proc/self/status; echo "tmp $(stat -c %i /tmp)"; exec sleep 600' 2>&1) ||
	rdb_fail "unitspawn service: $out"
qpid=$(ct cat /run/rdb-qemu.pid)
qcg=$(cg "$qpid")
alive "$qpid" || rdb_fail "the QEMU stand-in (pid $qpid) died with the unit that started it"
grep -qE '^/machine\.slice/remusdb-vmx-qemu-[0-9-]+\.service$' <<<"$qcg" ||
	rdb_fail "the QEMU stand-in is in $qcg, not a remusdb-vmx-qemu-*.service in machine.slice"
# (what it writes, it writes after systemd-run has returned)
qlog_done() { ct grep -q '^tmp ' /var/log/rdb-qemu.log 2>/dev/null; }
wait_for 5 "the QEMU stand-in's lines in its log" qlog_done || rdb_fail "the QEMU stand-in wrote no log"
qlog=$(ct cat /var/log/rdb-qemu.log)
grep -qP '^NoNewPrivs:\t0$' <<<"$qlog" || rdb_fail "the sandbox reached the QEMU stand-in: $qlog"
[ "$(sed -n 's/^tmp //p' <<<"$qlog")" = "$(ct stat -c %i /tmp)" ] ||
	rdb_fail "the QEMU stand-in saw a private /tmp: $qlog"
out=$(spawner rdb-spawner-d scope vmx /run/rdb-disk.pid -- \
	/bin/sh -c 'read x <&3; echo "$x" > /run/rdb-fd3; exec sleep 600' 2>&1) ||
	rdb_fail "unitspawn scope: $out"
dpid=$(ct cat /run/rdb-disk.pid)
alive "$dpid" || rdb_fail "the disk server stand-in (pid $dpid) died with the unit that started it"
cg "$dpid" | grep -qE '^/system\.slice/remusdb-vmx-disk-[0-9-]+\.scope$' ||
	rdb_fail "the disk server stand-in is in $(cg "$dpid"), not a remusdb-vmx-disk-*.scope"
fd3() { [ "$(ct cat /run/rdb-fd3 2>/dev/null)" = fd3 ]; }
wait_for 5 "the stand-in's read on its fd 3" fd3 || rdb_fail "the disk server stand-in lost its fd 3"
ct kill "$qpid" "$dpid"
rdb_log "processes outlive the unit that started them: a QEMU in $qcg unsandboxed, a disk server in a scope with its fds"

out=$(ct systemctl stop remusdbd 2>&1) || rdb_fail "systemctl stop remusdbd: $out"
show=$(ct systemctl show remusdbd -p ActiveState -p Result -p ExecMainStatus | sort | tr '\n' ' ')
[ "$show" = "ActiveState=inactive ExecMainStatus=0 Result=success " ] || rdb_fail "after stop: $show"
ct journalctl -b -u remusdbd --no-pager | grep -q 'remusdbd stopped' || rdb_fail "remusdbd did not say it stopped"

# qemu_group (libvirt runs QEMU as libvirt-qemu): under the unit's
# hardening (RestrictSUIDSGID among it) run_dir becomes 0770 with the
# group; the control socket stays root's
ct groupadd -r libvirt-qemu || rdb_fail "groupadd libvirt-qemu in the root"
echo "qemu_group = libvirt-qemu" >> "$conf"
out=$(ct systemctl start remusdbd 2>&1) ||
	rdb_fail "start with qemu_group: $out; $(ct journalctl -b -u remusdbd --no-pager | tail -3)"
[ "$(ct stat -c '%a %G' /run/remusdb)" = "770 libvirt-qemu" ] ||
	rdb_fail "with qemu_group, /run/remusdb is $(ct stat -c '%a %G' /run/remusdb)"
[ "$(ct stat -c '%a %U %G' /run/remusdb/remusdbd.sock)" = "600 root root" ] ||
	rdb_fail "with qemu_group, the control socket is $(ct stat -c '%a %U %G' /run/remusdb/remusdbd.sock)"
ct systemctl stop remusdbd || rdb_fail "stop with qemu_group"
sed -i '/^qemu_group = /d' "$conf"

# removing the package stops the daemon; the configuration stays
ct systemctl start remusdbd || rdb_fail "second start failed"
out=$(ct dpkg -r remusdb 2>&1) || rdb_fail "dpkg -r remusdb: $out"
[ "$(ct systemctl is-active remusdbd)" != active ] || rdb_fail "remusdbd still runs after dpkg -r remusdb"
! pgrep --ns "$lpid" --nslist pid remusdbd >/dev/null || rdb_fail "a remusdbd process is left after dpkg -r remusdb"
[ -f "$conf" ] || rdb_fail "dpkg -r removed the conffile"
# purge: the configuration goes; the key and the VMs' state stay
out=$(ct dpkg -P remusdb 2>&1) || rdb_fail "dpkg -P remusdb: $out"
[ ! -e "$conf" ] || rdb_fail "dpkg -P left $conf"
ct test -f /etc/remusdb/link.psk && ct test -d /var/lib/remusdb ||
	rdb_fail "dpkg -P removed the link key or /var/lib/remusdb"

kill -TERM "$nspawn_pid"
wait_pid 30 "$nspawn_pid" >/dev/null || rdb_fail "the container did not halt within 30 s"
nspawn_pid=
rdb_log "container halted ($(( $(date +%s) - t0 )) s)"

# -- the guest packages: DKMS builds remusdb.ko for the guest's kernel ---
if [ "${RDB_PKG_DKMS:-1}" = 1 ]; then
	mkdir -p "$root/etc/dkms/framework.conf.d"
	echo 'parallel_jobs=1' > "$root/etc/dkms/framework.conf.d/remusdb-test.conf"
	nspawn_run apt-get install -y -q --no-install-recommends \
		"/debs/remusdb-dkms_${ver}_all.deb" "/debs/remusdb-guest_${ver}_amd64.deb" \
		> "$d/dkms.log" 2>&1 || rdb_fail "apt-get install remusdb-dkms remusdb-guest: $(tail -5 "$d/dkms.log")"
	glisted=$(chroot "$root" dpkg -L remusdb-guest)
	for f in /usr/sbin/remusdb-eventd /usr/share/man/man8/remusdb-eventd.8.gz; do
		grep -qx "$f" <<<"$glisted" && [ -e "$root$f" ] || rdb_fail "remusdb-guest has no $f"
	done
	# the helper finds no virtio port here: it looks for 5 s, says so, exits 1
	chroot "$root" /usr/sbin/remusdb-eventd > "$d/eventd.log" 2>&1 &
	eventd_pid=$!
	mod_ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$root/usr/src/remusdb-$ver/dkms.conf")
	[ "$mod_ver" = "$ver" ] || rdb_fail "dkms.conf says $mod_ver, the package $ver"
	nspawn_run dkms status -m remusdb 2>>"$d/nspawn.log" | grep -q "^remusdb/$ver" ||
		rdb_fail "dkms status does not list remusdb/$ver: $(nspawn_run dkms status 2>&1)"
	# the headers' hook builds and installs it for that kernel
	nspawn_run apt-get install -y -q --no-install-recommends "linux-headers-$kver" \
		>> "$d/dkms.log" 2>&1 || rdb_fail "apt-get install linux-headers-$kver: $(tail -5 "$d/dkms.log")"
	st=$(nspawn_run dkms status -m remusdb -k "$kver" 2>>"$d/nspawn.log")
	grep -q "^remusdb/$ver, $kver, x86_64: installed" <<<"$st" ||
		rdb_fail "remusdb.ko is not built and installed for $kver: $st; $(grep -iE 'error|fail' "$d/dkms.log" | tail -5)"
	ko=$root/lib/modules/$kver/updates/dkms/remusdb.ko
	[ -f "$ko" ] || rdb_fail "no $ko"
	magic=$(chroot "$root" modinfo -F vermagic "/lib/modules/$kver/updates/dkms/remusdb.ko")
	[ "${magic%% *}" = "$kver" ] || rdb_fail "remusdb.ko's vermagic is $magic, not $kver"
	chroot "$root" modinfo -F license "/lib/modules/$kver/updates/dkms/remusdb.ko" | grep -qx GPL ||
		rdb_fail "remusdb.ko's license is not GPL"
	wait_pid 20 "$eventd_pid"
	rc=$?
	eventd_pid=
	[ "$rc" = 1 ] && grep -q 'no virtio port org.remusdb.0' "$d/eventd.log" ||
		rdb_fail "remusdb-eventd without a port: exit $rc, $(cat "$d/eventd.log")"
	rdb_log "remusdb.ko built by DKMS for $kver; remusdb-eventd runs ($(( $(date +%s) - t0 )) s)"
	dkms_note="; remusdb.ko built by DKMS for $kver"
else
	dkms_note="; DKMS part skipped (RDB_PKG_DKMS=0)"
fi

echo "packaging: remusdb $ver installed with apt in a clean $suite root, every file in place"
echo "  (and remusdb-xen: its helper runs with Xen's libraries from the mirror, purged);"
echo "  remusdbd.service enabled, started at boot (refused without link key), active under systemd"
echo "  (READY=1, STATUS=, watchdog), remusdbctl status answered, its disk servers and QEMUs in units of their own,"
echo "  stopped cleanly, stopped by dpkg -r, purged$dkms_note"
echo "  in $(( $(date +%s) - t0 )) s.  systemctl status, as it was:"
sed 's/^/    /' <<<"$status"
