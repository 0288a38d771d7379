#!/usr/bin/env bash
# Build the Xen test host: Debian bookworm's Xen 4.17 hypervisor and a
# minimal PV dom0 (Debian minbase + xen-utils-4.17) that boots under
# QEMU's TCG (no KVM: Xen runs as a guest of the emulator, with SVM
# emulated by `-cpu max`), plus a tiny PV domU for `xl create`.
#
#   tools/mkxenhost.sh [--out DIR] [--debian-xen]
#
# --out DIR       default build/xenhost
# --debian-xen    xen is Debian's hypervisor as packaged (no shadow
#                 paging: PV guests cannot be live-migrated or Remus-ed)
#
# Output, in DIR (symbolic links into the cache):
#   xen           the hypervisor, a 32-bit ELF (what QEMU's multiboot
#                 loader, -kernel, takes): Debian's 4.17 source rebuilt
#                 with shadow paging (XEN_SRC_VERSION below)
#   xen-debian    Debian's xen-4.17-amd64.gz as installed, gunzipped
#   vmlinuz       dom0's kernel (mkguest.sh's pinned Debian kernel)
#   initrd.img    dom0's initramfs: busybox, loads virtio_blk + ext4,
#                 mounts /dev/vda and switches to /sbin/remusdb-xen-init
#   dom0.img      dom0's root, raw ext4 (sparse).  Give it to QEMU with
#                 snapshot=on (or copy it with cp --sparse=always): dom0
#                 writes its root.
#   cmdline       the Xen and dom0 command lines that work (shell words
#                 XEN_CMDLINE= and DOM0_CMDLINE=)
# The domU (the same kernel and a busybox initramfs whose init prints
# REMUSDB-DOMU-READY, then a heartbeat line every 2 s) is in the dom0
# root under /var/lib/remusdb-xen/ with its xl config domu.cfg.
#
# dom0's init (/sbin/remusdb-xen-init, no systemd: every second counts
# under TCG) loads the Xen modules, mounts xenfs, starts xenstored,
# xen-init-dom0 and xenconsoled (guest consoles logged in
# /var/log/xen/console/), prints REMUSDB-XEN-DOM0-READY on hvc0 (Xen's
# com1 console) and then, with remusdb.xen.smoke=1 on dom0's command
# line, runs /usr/local/sbin/remusdb-xen-smoke (xl info, xl list,
# xl create of the domU, xl save + xl restore, xl migrate to localhost,
# xl remus to localhost and a failover to the backup; REMUSDB-XEN-* lines).
# It ends in a root shell on hvc0.  tests/xen/boot-smoke.sh boots it.
#
# Pinned: Xen XEN_VERSION (bookworm-security's; the mirror keeps only the
# newest, so a newer one fails here until the pin moves) and mkguest.sh's
# kernel.  The debootstrapped root (with Xen installed) is cached as a
# tarball in ${REMUSDB_CACHE:-/var/cache/remusdb}/xen-dom0root-KEY (KEY:
# suite, packages, XEN_VERSION, apt sources), the image in
# xenhost-HASH (HASH: this script, the root's KEY, the kernel package,
# busybox), the rebuilt hypervisor in xen-shadow-KEY (the source version,
# this script); a cached build is linked in at once.  The hypervisor
# build: ~2 min (make -j2, niced).  First build: about
# 1.5 min here (debootstrap from a fast mirror; the image alone, ~15 s),
# ~350 MB in the cache (root tarball ~70 MB, image ~280 MB: dom0.img is
# sparse, 1 GiB apparent).  Needs root, debootstrap, unshare, mkfs.ext4
# (e2fsprogs), cpio, zstd.
#
# QEMU: -cpu max (TCG's AMD model with SVM and NPT; Xen's HVM, HAP and
# its nested guests then work), -machine pc, -smp 1, -m 768 or more;
# see tests/xen/boot-smoke.sh and docs/xen-host.md.
set -euo pipefail

XEN_VERSION=4.17.7+13-g2445b30a44-0+deb12u1
SUITE=bookworm
# minbase plus: what dom0's init and the smoke script run
INCLUDE=busybox,kmod,iproute2,procps
XEN_PKGS="xen-utils-4.17=$XEN_VERSION xen-hypervisor-4.17-amd64=$XEN_VERSION"
# what the drill in dom0 runs (tests/xen/drill-dom0.sh): remusdbd's
# libraries, remusdbctl's (libvirt0: it links libvirt for libvirt
# domains), jq for their JSON; qemu-nbd for the replicated disk's script
# (hypervisor/xen/block-remusdb)
DRILL_PKGS="libjansson4 liblz4-1 libcurl4 libssl3 libxxhash0 libvirt0 jq qemu-utils"
# The hypervisor actually booted is rebuilt from Debian's source with
# CONFIG_SHADOW_PAGING=y (Debian's config otherwise): Debian builds it
# without shadow paging, and a PV guest's log-dirty mode -- which live
# migration and Remus need -- is shadow paging.  The source is bookworm's
# (deb-src, which keeps one version: the pin); the tools stay
# XEN_VERSION's (same 4.17 interfaces).  --debian-xen boots Debian's own.
XEN_SRC_VERSION=4.17.5+72-g01140da4e8-1
# dom0's modules (dependencies from modinfo): the Xen back ends and
# devices xl needs, loop for later disks, nbd for the replicated disk
# (block-remusdb); bridge, veth and tun for the drill's hosts (network
# namespaces, tests/lib/netns.sh)
DOM0_MODULES="xen-evtchn xen-gntdev xen-gntalloc xen-privcmd xenfs xen-blkback xen-netback loop nbd bridge veth tun"
# the domU's: its NIC and its disk (the drill's domU has a vif and a vbd)
DOMU_MODULES="xen-netfront xen-blkfront"
# the initramfs's: dom0's root disk (ext4 wants crc32c, a soft dependency)
INITRD_MODULES="virtio_pci virtio_blk crc32c_generic ext4"
IMG_MB=1024
XEN_CMDLINE="console=com1 com1=115200,8n1 dom0_mem=512M,max:512M dom0_max_vcpus=1 loglvl=all guest_loglvl=all noreboot bootscrub=false"
# noxsave: dom0's kernel saves its processes' FPU state with FXSAVE, not
# XSAVE (and so they run without AVX).  With XSAVE, processes in dom0
# under Xen under TCG were corrupted: a 1 MB replication frame whose CRC
# no longer matched after its copy through TLS, remusdbctl and xcstat
# dying of SIGSEGV (docs/xen-host.md, "Emulation faults").  A real Xen
# host needs none of this.  The domUs' command lines have it too.
DOM0_CMDLINE="console=hvc0 root=/dev/vda noxsave"

here=$(cd "$(dirname "$0")" && pwd)
out=$here/../build/xenhost
shadow=1
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--debian-xen) shadow=0; shift ;;
	*) echo "mkxenhost: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "mkxenhost: needs root (debootstrap, chroot)" >&2; exit 1; }
for t in debootstrap unshare mkfs.ext4 cpio zstd dpkg-deb dpkg-source modinfo depmod make gcc flex bison; do
	command -v "$t" >/dev/null || { echo "mkxenhost: $t missing" >&2; exit 1; }
done
nice_() { nice -n 19 ionice -c3 "$@"; }

# xcstat (tests/helpers/xcstat.c): the project's Xen stream parser, run in
# dom0 over what xl save and xl remus produce
xcstat=$here/../build/helpers/xcstat
make -s -C "$here/.." build/helpers/xcstat >&2 ||
	{ echo "mkxenhost: building build/helpers/xcstat failed" >&2; exit 1; }
# The Xen backend in dom0: its helper remusdb-xen (linked with Xen 4.17's
# libraries, which dom0 has; needs libxen-dev here) and xenrecv
# (tests/helpers/xenrecv.c), which drives the backend as remusdbd does
xenhelper=$here/../build/remusdb-xen
xenrecv=$here/../build/helpers/xenrecv
make -s -C "$here/.." build/remusdb-xen build/helpers/xenrecv >&2 ||
	{ echo "mkxenhost: building remusdb-xen and xenrecv failed (libxen-dev: tools/setup-deps.sh)" >&2; exit 1; }
# The drill (tests/xen/drill-dom0.sh): remusdbd and remusdbctl in dom0
# (Debian 12 like this machine: the same libraries, from DRILL_PKGS),
# the sequence client in dom0 and its server (static) in the domU
drill_bins="build/remusdbd build/remusdbctl build/helpers/seqsrv build/helpers/seqcheck build/helpers/diskseq"
make -s -C "$here/.." $drill_bins >&2 ||
	{ echo "mkxenhost: building $drill_bins failed" >&2; exit 1; }
drill_files="tests/xen/drill-dom0.sh tests/lib/netns.sh hypervisor/xen/vif-remusdb hypervisor/xen/block-remusdb"

# The kernel: mkguest.sh's pin, and its download cache.
KVER=$(sed -n 's/^KVER=//p' "$here/mkguest.sh")
KPKG_VERSION=$(sed -n 's/^KPKG_VERSION=//p' "$here/mkguest.sh")
[ -n "$KVER" ] && [ -n "$KPKG_VERSION" ] || { echo "mkxenhost: no KVER/KPKG_VERSION in mkguest.sh" >&2; exit 1; }
cache=${REMUSDB_CACHE:-/var/cache/remusdb}
gcache=$cache/guest
mkdir -p "$gcache"
deb=$gcache/linux-image-${KVER}_${KPKG_VERSION}_amd64.deb
if [ ! -f "$deb" ]; then
	(cd "$gcache" && timeout 600 apt-get download "linux-image-$KVER=$KPKG_VERSION" >/dev/null 2>&1) ||
		{ echo "mkxenhost: cannot download linux-image-$KVER $KPKG_VERSION" >&2; exit 1; }
fi

# The apt sources (this machine's Debian entries, binary only), as
# run-packaging.sh gives its root.
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
	return 0
}
src_text=$(sources)
mirror=$(printf '%s\n' "$src_text" | awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}
	$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) {print $i; exit}}')
[ -n "$mirror" ] || { echo "mkxenhost: no Debian mirror in /etc/apt/sources.list{,.d}" >&2; exit 1; }

rootkey=$(printf '%s\n' "xenhost-root v1" "$SUITE" "$INCLUDE" "$XEN_PKGS $DRILL_PKGS" "$mirror" "$src_text" |
	sha256sum | cut -c1-16)
key=$( { cat "$0"; echo "$rootkey $shadow"; sha256sum < "$deb"; sha256sum < /bin/busybox;
	sha256sum < "$xcstat"; sha256sum < "$xenhelper"; sha256sum < "$xenrecv";
	(cd "$here/.." && sha256sum $drill_bins $drill_files); } |
	sha256sum | cut -c1-16)
entry=$cache/xenhost-$key
rentry=$cache/xen-dom0root-$rootkey
outputs="xen xen-debian vmlinuz initrd.img dom0.img cmdline"
mkdir -p "$out"
if [ -f "$entry/.done" ]; then
	touch "$entry/.used"
	for f in $outputs; do ln -sfn "$entry/$f" "$out/$f"; done
	echo "mkxenhost: $out (cached $entry)"
	exit 0
fi
t0=$(date +%s)

work=$(mktemp -d /var/tmp/remusdb-xenhost.XXXXXX)
trap 'rm -rf "$work"' EXIT

# ---- 1. the root: debootstrap minbase + Xen, cached as a tarball ----
mkdir -p "$rentry"
exec 9>"$rentry/.lock"
flock -w 1800 9 || { echo "mkxenhost: $rentry is locked by another build" >&2; exit 1; }
if [ ! -f "$rentry/.done" ]; then
	root=$work/root
	mkdir -p "$root"
	echo "mkxenhost: debootstrap --variant=minbase $SUITE ($mirror) -> $rentry" >&2
	timeout 1800 nice -n 19 ionice -c3 debootstrap --variant=minbase --include="$INCLUDE" \
		"$SUITE" "$root" "$mirror" > "$work/debootstrap.log" 2>&1 ||
		{ echo "mkxenhost: debootstrap failed:" >&2; tail -n 8 "$work/debootstrap.log" >&2; exit 1; }
	rm -f "$root/etc/apt/sources.list"
	printf '%s\n' "$src_text" > "$root/etc/apt/sources.list.d/debian.sources"
	# no daemon starts in the chroot
	printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	# (a private mount namespace: /proc is gone with it)
	timeout 1800 nice -n 19 ionice -c3 unshare --mount --propagation private sh -c '
		mount -t proc proc "$1/proc" &&
		chroot "$1" sh -c "apt-get update -q && apt-get -y -q upgrade &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $2 &&
			apt-get clean"' sh "$root" "$XEN_PKGS $DRILL_PKGS" > "$work/apt.log" 2>&1 ||
		{ echo "mkxenhost: installing Xen $XEN_VERSION in the root failed (has the mirror moved past the pin?):" >&2
		  tail -n 8 "$work/apt.log" >&2; exit 1; }
	rm -f "$root/usr/sbin/policy-rc.d"
	rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
	nice_ tar -C "$root" -I 'zstd -T1 -3' -cf "$rentry/root.tar.zst.tmp" . &&
		mv "$rentry/root.tar.zst.tmp" "$rentry/root.tar.zst"
	touch "$rentry/.done"
	rm -rf "$root"
fi
touch "$rentry/.used"
exec 9>&-

# ---- 2. the hypervisor with shadow paging, cached ----
# (key: the source and the configuration's root; "v1": the recipe below)
sentry=$cache/xen-shadow-$(printf '%s\n' "xen-shadow v1" "$XEN_SRC_VERSION" "$rootkey" |
	sha256sum | cut -c1-16)
if [ $shadow = 1 ] && [ ! -f "$sentry/.done" ]; then
	rm -rf "$sentry"
	mkdir -p "$sentry"
	src=$work/src
	mkdir -p "$src"
	echo "mkxenhost: building Xen $XEN_SRC_VERSION with shadow paging -> $sentry" >&2
	(cd "$src" && timeout 600 apt-get source --download-only "xen=$XEN_SRC_VERSION" > "$work/src.log" 2>&1 &&
	 timeout 600 nice -n 19 ionice -c3 dpkg-source -x xen_*.dsc x >> "$work/src.log" 2>&1) ||
		{ echo "mkxenhost: no source of xen $XEN_SRC_VERSION (deb-src lines? tools/setup-deps.sh):" >&2
		  tail -n 5 "$work/src.log" >&2; exit 1; }
	# Debian's hypervisor configuration from the root, plus shadow paging
	tar -C "$work" -I zstd -xf "$rentry/root.tar.zst" ./boot/xen-4.17-amd64.config
	sed 's/^# CONFIG_SHADOW_PAGING is not set$/CONFIG_SHADOW_PAGING=y/' \
		"$work/boot/xen-4.17-amd64.config" > "$src/x/xen/.config"
	(timeout 300 nice -n 19 make -C "$src/x/xen" olddefconfig &&
	 grep -qx 'CONFIG_SHADOW_PAGING=y' "$src/x/xen/.config" &&
	 timeout 3600 nice -n 19 ionice -c3 make -C "$src/x/xen" -j2 XEN_BUILD_DATE=bookworm \
		XEN_BUILD_HOST=remusdb XEN_WHOAMI=remusdb XEN_DOMAIN=mkxenhost) > "$work/make.log" 2>&1 ||
		{ echo "mkxenhost: the hypervisor build failed:" >&2; tail -n 15 "$work/make.log" >&2; exit 1; }
	cp "$src/x/xen/xen" "$sentry/xen"
	cp "$src/x/xen/.config" "$sentry/config"
	touch "$sentry/.done"
	rm -rf "$src"
fi

# ---- 3. the image ----
rm -rf "$entry"
mkdir -p "$entry"
root=$work/root
mkdir -p "$root"
nice_ tar -C "$root" -I zstd -xf "$rentry/root.tar.zst"
[ -f "$root/boot/xen-4.17-amd64.gz" ] || { echo "mkxenhost: no /boot/xen-4.17-amd64.gz in the root" >&2; exit 1; }
got=$(chroot "$root" dpkg-query -W -f '${Version}' xen-utils-4.17)
[ "$got" = "$XEN_VERSION" ] || { echo "mkxenhost: the root has xen-utils-4.17 $got, not $XEN_VERSION" >&2; exit 1; }

kdir=$work/kernel
mkdir -p "$kdir"
nice_ dpkg-deb -x "$deb" "$kdir"
mdir=$kdir/lib/modules/$KVER

# modules NAME... and their dependencies, dependencies first, into $order
declare -A seen=()
order=()
add_mod() {
	local name=$1 file dep
	[ -n "${seen[$name]:-}" ] && return 0
	seen[$name]=1
	file=$(find "$mdir/kernel" \( -name "$name.ko*" -o -name "${name//-/_}.ko*" \) | head -n 1)
	[ -n "$file" ] || { echo "mkxenhost: module $name not in $KVER" >&2; exit 1; }
	for dep in $(modinfo -F depends "$file" | tr ',' ' '); do
		add_mod "$dep"
	done
	order+=("$file")
}

# initramfs_modules DIR MODULE...: the modules and their dependencies in
# DIR/lib/modules, with DIR/lib/modules/load-order (insmod in that order)
initramfs_modules() {
	local dir=$1 m f
	shift
	seen=() order=()
	for m in "$@"; do add_mod "$m"; done
	: > "$dir/lib/modules/load-order"
	for f in "${order[@]}"; do
		cp "$f" "$dir/lib/modules/"
		basename "$f" >> "$dir/lib/modules/load-order"
	done
}

# dom0's modules, installed for modprobe
for m in $DOM0_MODULES $INITRD_MODULES; do add_mod "$m"; done
for f in "${order[@]}"; do
	rel=${f#"$kdir/"}
	mkdir -p "$root/$(dirname "$rel")"
	cp "$f" "$root/$rel"
done
cp "$mdir"/modules.{order,builtin,builtin.modinfo} "$root/lib/modules/$KVER/"
depmod -b "$root" "$KVER"

# ---- dom0's init ----
cat > "$root/sbin/remusdb-xen-init" <<'EOI'
#!/bin/sh
# RemusDB Xen test host: dom0's init (tools/mkxenhost.sh).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/lock
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -o remount,rw /
hostname xenhost
echo "REMUSDB-XEN-INIT uptime=$(cut -d' ' -f1 /proc/uptime)"
for m in xen-evtchn xen-gntdev xen-gntalloc xen-privcmd xenfs xen-blkback xen-netback; do
	modprobe "$m" || echo "REMUSDB-WARN: modprobe $m failed"
done
modprobe nbd nbds_max=8 max_part=0 || echo "REMUSDB-WARN: modprobe nbd failed"
mount -t xenfs xenfs /proc/xen || echo "REMUSDB-WARN: no xenfs"
mkdir -p /run/xen /run/xenstored /var/log/xen/console /var/lib/xen
XENBIN=/usr/lib/xen-4.17/bin
$XENBIN/xenstored --pid-file=/run/xenstored.pid || echo "REMUSDB-WARN: xenstored failed"
i=0
while ! xenstore-read / >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
$XENBIN/xen-init-dom0 || echo "REMUSDB-WARN: xen-init-dom0 failed"
$XENBIN/xenconsoled --pid-file=/run/xenconsoled.pid --log=guest \
	--log-dir=/var/log/xen/console || echo "REMUSDB-WARN: xenconsoled failed"
ip link set lo up
echo "REMUSDB-XEN-DOM0-READY uptime=$(cut -d' ' -f1 /proc/uptime)"
if grep -q 'remusdb.xen.smoke=1' /proc/cmdline; then
	/usr/local/sbin/remusdb-xen-smoke
fi
if grep -q 'remusdb.xen.drill=1' /proc/cmdline; then
	/usr/local/sbin/remusdb-xen-drill
fi
exec setsid sh -c 'exec sh -l </dev/hvc0 >/dev/hvc0 2>&1'
EOI
chmod 755 "$root/sbin/remusdb-xen-init"

# ---- the smoke sequence (dom0) ----
mkdir -p "$root/usr/local/sbin" "$root/var/lib/remusdb-xen"
cat > "$root/usr/local/sbin/remusdb-xen-smoke" <<'EOS'
#!/bin/sh
# xl info/list, xl create of the PV domU, save/restore, migrate.  Every
# result is a REMUSDB-XEN-* line on the console; times in ms, measured
# here with dom0's clock.
ms() { echo $(( $(date +%s%N) / 1000000 )); }
log=/var/log/xen/console/guest-smoke.log
# wait_marker FILE TEXT SECONDS: 0 once TEXT is in FILE
wait_marker() {
	i=0
	while [ $i -lt $(($3 * 10)) ]; do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1; i=$((i+1))
	done
	return 1
}
fail=0
xl info > /tmp/xl-info 2>&1 && echo "REMUSDB-XEN-XL-INFO ok" || { echo "REMUSDB-XEN-XL-INFO fail"; fail=1; }
sed 's/^/REMUSDB-XEN-XL-INFO: /' /tmp/xl-info | grep -E 'xen_version|xen_caps|total_memory|free_memory|nr_cpus|virt_caps|xen_commandline|xen_scheduler'
xl list > /tmp/xl-list 2>&1 && echo "REMUSDB-XEN-XL-LIST ok" || { echo "REMUSDB-XEN-XL-LIST fail"; fail=1; }
sed 's/^/REMUSDB-XEN-XL-LIST: /' /tmp/xl-list
for c in remus colo migrate save restore; do
	xl help 2>&1 | grep -qw "$c" && echo "REMUSDB-XEN-XL-HAS $c" || echo "REMUSDB-XEN-XL-LACKS $c"
done
for l in libxenctrl libxenguest libxenlight libxenstore libxentoollog; do
	f=$(ls /usr/lib/x86_64-linux-gnu/$l.so.* 2>/dev/null | head -n 1)
	echo "REMUSDB-XEN-LIB $l ${f:-missing}"
done

t=$(ms)
if xl create /var/lib/remusdb-xen/domu.cfg > /tmp/xl-create 2>&1; then
	tc=$(ms)
	if wait_marker "$log" REMUSDB-DOMU-READY 120; then
		echo "REMUSDB-XEN-DOMU-READY create_ms=$((tc - t)) ready_ms=$(($(ms) - t))"
	else
		echo "REMUSDB-XEN-DOMU-READY fail (no marker in 120 s)"; fail=1
		tail -n 20 "$log" 2>/dev/null | sed 's/^/REMUSDB-XEN-DOMU-CONSOLE: /'
	fi
else
	echo "REMUSDB-XEN-XL-CREATE fail"; fail=1
	sed 's/^/REMUSDB-XEN-XL-CREATE: /' /tmp/xl-create
fi
xl list | sed 's/^/REMUSDB-XEN-XL-LIST: /'

# the domU's console log: a migrated or failed-over domU was created as
# smoke--incoming and logs there
beats() { cat /var/log/xen/console/guest-smoke*.log 2>/dev/null | grep -c REMUSDB-DOMU-BEAT; }
# alive: a new heartbeat within 20 s
alive() {
	n0=$(beats) i=0
	while [ "$(beats)" -le "$n0" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
	[ "$(beats)" -gt "$n0" ]
}
# checkpoint: xl save (the domU stops), xl restore (it runs on)
if [ $fail = 0 ]; then
	t=$(ms)
	if xl save smoke /tmp/smoke.save > /tmp/xl-save 2>&1; then
		ts=$(ms)
		echo "REMUSDB-XEN-XCSTAT save $(/usr/local/bin/xcstat /tmp/smoke.save)"
		if xl restore /tmp/smoke.save > /tmp/xl-restore 2>&1 && alive; then
			echo "REMUSDB-XEN-SAVE-RESTORE ok save_ms=$((ts - t)) restore_ms=$(($(ms) - ts)) image_kb=$(($(stat -c %s /tmp/smoke.save) / 1024))"
		else
			echo "REMUSDB-XEN-SAVE-RESTORE fail (restore)"; fail=1
			tail -n 8 /tmp/xl-restore | sed 's/^/REMUSDB-XEN-XL-RESTORE: /'
		fi
	else
		echo "REMUSDB-XEN-SAVE-RESTORE fail (save)"; fail=1
		tail -n 8 /tmp/xl-save | sed 's/^/REMUSDB-XEN-XL-SAVE: /'
	fi
	rm -f /tmp/smoke.save
fi
# Live migration to this host (xl runs "SSH HOST xl migrate-receive"; the
# "ssh" here runs it locally) and Remus to this host.  Both need log-dirty
# mode, which for a PV guest is shadow paging: Debian's own hypervisor
# (mkxenhost.sh --debian-xen) has none, and they report "unsupported".
nologdirty() { grep -q 'Failed to enable logdirty' "$1"; }
if [ $fail = 0 ] && ! grep -q 'remusdb.xen.migrate=0' /proc/cmdline; then
	t=$(ms)
	if timeout 300 xl migrate -s /usr/local/sbin/remusdb-localssh smoke localhost > /tmp/xl-migrate 2>&1; then
		tm=$(ms)
		alive && echo "REMUSDB-XEN-MIGRATE ok migrate_ms=$((tm - t))" ||
			{ echo "REMUSDB-XEN-MIGRATE fail (no heartbeat after)"; fail=1; }
	elif nologdirty /tmp/xl-migrate; then
		echo "REMUSDB-XEN-MIGRATE unsupported (no log-dirty for PV: $(grep -m1 'Failed to enable logdirty' /tmp/xl-migrate))"
	else
		echo "REMUSDB-XEN-MIGRATE fail"; fail=1
		tail -n 8 /tmp/xl-migrate | sed 's/^/REMUSDB-XEN-XL-MIGRATE: /'
	fi
	# Remus: checkpoints every 200 ms to a backup domU on this host
	# (no network buffering, no disk: -F -n -d) for REMUS_SECS and at
	# least REMUS_CPS checkpoints (under nested TCG its first rounds
	# took from 5 to over 47 s: a fixed time left none, twice in CI), at
	# most REMUS_MAX_SECS; then the primary dies (destroyed, and its xl
	# remus killed, as when its host goes) and the backup must run on
	# from the last checkpoint
	REMUS_SECS=20 REMUS_CPS=3 REMUS_MAX_SECS=300
	rcps() { grep -c 'Domain now suspended' /tmp/xl-remus; }
	# (the stream to the backup is kept, for xcstat: remusdb-localssh-capture)
	xl remus -F -n -d -i 200 -s /usr/local/sbin/remusdb-localssh-capture smoke localhost > /tmp/xl-remus 2>&1 &
	rpid=$!
	t=$(ms) i=0
	while kill -0 $rpid 2>/dev/null && [ $i -lt $((REMUS_MAX_SECS * 10)) ] &&
		{ [ $i -lt $((REMUS_SECS * 10)) ] || [ "$(rcps)" -lt $REMUS_CPS ]; }; do
		sleep 0.1; i=$((i+1))
	done
	if ! kill -0 $rpid 2>/dev/null; then
		if nologdirty /tmp/xl-remus; then
			echo "REMUSDB-XEN-REMUS unsupported (no log-dirty for PV)"
		else
			echo "REMUSDB-XEN-REMUS fail (xl remus ended)"; fail=1
			grep -v 'progress\|All records' /tmp/xl-remus | tail -n 8 | sed 's/^/REMUSDB-XEN-XL-REMUS: /'
		fi
		alive && echo "REMUSDB-XEN-DOMU-ALIVE ok" || { echo "REMUSDB-XEN-DOMU-ALIVE fail"; fail=1; }
	elif [ "$(rcps)" -lt 1 ]; then
		echo "REMUSDB-XEN-REMUS fail (not one checkpoint in $(( ($(ms) - t) / 1000 )) s)"; fail=1
		grep -v 'progress\|All records' /tmp/xl-remus | tail -n 8 | sed 's/^/REMUSDB-XEN-XL-REMUS: /'
		kill -9 $rpid; wait $rpid 2>/dev/null
	else
		cps=$(rcps)
		secs=$(( ($(ms) - t) / 1000 ))
		xl list | sed 's/^/REMUSDB-XEN-XL-LIST: /'
		n0=$(beats)
		xl destroy "$(xl domid smoke)"
		t=$(ms)
		kill -9 $rpid
		wait $rpid 2>/dev/null
		i=0
		while [ "$(beats)" -le "$n0" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
		if [ "$(beats)" -gt "$n0" ]; then
			echo "REMUSDB-XEN-REMUS ok checkpoints=$cps secs=$secs failover_ms=$(($(ms) - t))"
			echo "REMUSDB-XEN-XCSTAT remus $(/usr/local/bin/xcstat /tmp/remus.stream)"
			# The backup's half done by the project's code: what
			# xen_state.c keeps of the captured stream's last
			# complete checkpoint, written as an xl image, must
			# restore to a domU that runs on from that checkpoint.
			# (xl's backup copy goes first: one domU named smoke.)
			rm -f /tmp/smoke.save
			boots=$(cat /var/log/xen/console/guest-smoke*.log | grep -c REMUSDB-DOMU-READY)
			xl destroy smoke
			t=$(ms)
			echo "REMUSDB-XEN-XCSTAT image $(/usr/local/bin/xcstat --image /var/tmp/synth.img /tmp/remus.stream | tail -n 1)"
			tb=$(ms)
			rm -f /tmp/remus.stream
			n0=$(beats)
			# it runs on from the checkpoint: beats, and no new boot
			if xl restore /var/tmp/synth.img > /tmp/xl-synth 2>&1 && alive &&
				[ "$(cat /var/log/xen/console/guest-smoke*.log | grep -c REMUSDB-DOMU-READY)" = "$boots" ]; then
				beat=$(grep REMUSDB-DOMU-BEAT /var/log/xen/console/guest-smoke.log | tail -n 1 | sed 's/.*BEAT \([0-9]*\).*/\1/')
				echo "REMUSDB-XEN-SYNTH-RESTORE ok build_ms=$((tb - t)) restore_ms=$(($(ms) - tb)) beat=$beat"
			else
				echo "REMUSDB-XEN-SYNTH-RESTORE fail"; fail=1
				tail -n 12 /tmp/xl-synth | sed 's/^/REMUSDB-XEN-XL-SYNTH: /'
			fi
			rm -f /var/tmp/synth.img
			# The Xen backend as remusdbd drives it (xenrecv): the
			# helper checkpoints the restored domU every 100 ms for
			# 20 s; then its saver is killed and the domain
			# destroyed, and the backend restores the last
			# committed checkpoint through xl, which must run on.
			if [ $fail = 0 ]; then
				mkdir -p /var/tmp/xr
				n0=$(beats)
				boots=$(cat /var/log/xen/console/guest-smoke*.log | grep -c REMUSDB-DOMU-READY)
				j=$(/usr/local/bin/xenrecv smoke 20 100 /var/tmp/xr 2>/tmp/xenrecv.err | tail -n 1)
				echo "REMUSDB-XEN-XCSTAT backend $j"
				if echo "$j" | grep -q '"ok":true' && alive &&
					[ "$(cat /var/log/xen/console/guest-smoke*.log | grep -c REMUSDB-DOMU-READY)" = "$boots" ]; then
					echo "REMUSDB-XEN-BACKEND ok"
				else
					echo "REMUSDB-XEN-BACKEND fail"; fail=1
					tail -n 12 /tmp/xenrecv.err /var/tmp/xr/smoke.colo.log 2>/dev/null | sed 's/^/REMUSDB-XEN-XENRECV: /'
					xl list | sed 's/^/REMUSDB-XEN-XL-LIST: /'
					tail -n 30 /var/log/xen/console/guest-smoke.log | sed 's/^/REMUSDB-XEN-DOMU-CONSOLE: /'
				fi
			fi
		else
			echo "REMUSDB-XEN-REMUS fail (no heartbeat from the backup in 30 s)"; fail=1
			grep -v 'progress\|All records' /tmp/xl-remus | tail -n 8 | sed 's/^/REMUSDB-XEN-XL-REMUS: /'
		fi
	fi
	xl list | sed 's/^/REMUSDB-XEN-XL-LIST: /'
fi
echo "REMUSDB-XEN-SMOKE-DONE rc=$fail"
EOS
cat > "$root/usr/local/sbin/remusdb-localssh" <<'EOS'
#!/bin/sh
# "ssh HOST CMD..." for xl migrate -s to this host: runs CMD here
shift
exec sh -c "$*"
EOS
cat > "$root/usr/local/sbin/remusdb-localssh-capture" <<'EOS'
#!/bin/sh
# remusdb-localssh, keeping a copy of the stream CMD reads (for xcstat)
shift
exec sh -c "tee /tmp/remus.stream | $*"
EOS
chmod 755 "$root/usr/local/sbin/remusdb-xen-smoke" "$root/usr/local/sbin/remusdb-localssh" \
	"$root/usr/local/sbin/remusdb-localssh-capture"
mkdir -p "$root/usr/local/bin"
install -m 755 "$xcstat" "$root/usr/local/bin/xcstat"
install -m 755 "$xenhelper" "$root/usr/local/bin/remusdb-xen"
install -m 755 "$xenrecv" "$root/usr/local/bin/xenrecv"
# the drill: the daemon, its control tool, the client, the vif script
for b in remusdbd remusdbctl helpers/seqcheck helpers/diskseq; do
	install -m 755 "$here/../build/$b" "$root/usr/local/bin/$(basename "$b")"
done
install -m 755 "$here/../tests/xen/drill-dom0.sh" "$root/usr/local/sbin/remusdb-xen-drill"
install -D -m 644 "$here/../tests/lib/netns.sh" "$root/usr/local/lib/remusdb/netns.sh"
install -m 755 "$here/../hypervisor/xen/vif-remusdb" "$root/etc/xen/scripts/vif-remusdb"
install -m 755 "$here/../hypervisor/xen/block-remusdb" "$root/etc/xen/scripts/block-remusdb"

# ---- the PV domU: the same kernel, a busybox initramfs ----
du=$work/domu
mkdir -p "$du"/{bin,dev,proc,sys,lib/modules}
cp /bin/busybox "$du/bin/busybox"
for app in $(/bin/busybox --list); do
	[ "$app" = busybox ] || ln -sf busybox "$du/bin/$app"
done
install -m 755 "$here/../build/helpers/seqsrv" "$du/bin/seqsrv"
initramfs_modules "$du" $DOMU_MODULES
# remusdb.ip=ADDR/LEN on its command line: its NIC up with that address;
# remusdb.wait=DEV: /dev/DEV waited for (20 s) before PROG starts;
# remusdb.run=PROG:ARG:...: that program started (xl's extra= has no
# quoting, so the words are joined with colons)
cat > "$du/init" <<'EOI'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "REMUSDB-DOMU-READY $(uname -r) $(cat /sys/hypervisor/guest_type 2>/dev/null)"
ip= run= wait_dev=
for w in $(cat /proc/cmdline); do
	case $w in
	remusdb.ip=*) ip=${w#remusdb.ip=} ;;
	remusdb.run=*) run=${w#remusdb.run=} ;;
	remusdb.wait=*) wait_dev=${w#remusdb.wait=} ;;
	esac
done
if [ -n "$ip" ]; then
	while read -r m; do
		insmod "/lib/modules/$m" || echo "REMUSDB-DOMU-WARN insmod $m failed"
	done < /lib/modules/load-order
	i=0
	while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
	# remusdb.wait=DEV: the program needs /dev/DEV (the vbd's frontend)
	i=0
	while [ -n "$wait_dev" ] && [ ! -b "/dev/$wait_dev" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done
	if [ -n "$wait_dev" ]; then
		[ -b "/dev/$wait_dev" ] && echo "REMUSDB-DOMU-DISK $wait_dev" ||
			echo "REMUSDB-DOMU-WARN no /dev/$wait_dev"
	fi
	ip link set lo up
	ip addr add "$ip" dev eth0 && ip link set eth0 up &&
		echo "REMUSDB-DOMU-NET $ip" || echo "REMUSDB-DOMU-WARN no eth0"
	if [ -n "$run" ]; then
		$(echo "$run" | tr ':' ' ') &
		echo "REMUSDB-DOMU-SEQSRV pid $!"
	fi
fi
n=0
while :; do n=$((n+1)); echo "REMUSDB-DOMU-BEAT $n"; sleep 2; done
EOI
chmod 755 "$du/init"
(cd "$du" && find . -print0 | LC_ALL=C sort -z | xargs -0 touch -h -d @0 &&
	find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --reproducible 2>/dev/null) |
	gzip -9 -n > "$root/var/lib/remusdb-xen/domu-initrd.img"
cp "$kdir/boot/vmlinuz-$KVER" "$root/var/lib/remusdb-xen/domu-vmlinuz"
cat > "$root/var/lib/remusdb-xen/domu.cfg" <<'EOC'
# RemusDB smoke domU: PV, no disk, no network (tools/mkxenhost.sh)
name = "smoke"
type = "pv"
kernel = "/var/lib/remusdb-xen/domu-vmlinuz"
ramdisk = "/var/lib/remusdb-xen/domu-initrd.img"
extra = "console=hvc0 quiet noxsave"
memory = 128
vcpus = 1
on_crash = "preserve"
EOC
echo 'export PS1="xenhost# "' > "$root/root/.profile"

# ---- dom0's initramfs ----
ird=$work/initrd
mkdir -p "$ird"/{bin,dev,proc,sys,newroot,lib/modules}
cp /bin/busybox "$ird/bin/busybox"
for app in $(/bin/busybox --list); do
	[ "$app" = busybox ] || ln -sf busybox "$ird/bin/$app"
done
initramfs_modules "$ird" $INITRD_MODULES
cat > "$ird/init" <<'EOI'
#!/bin/sh
# dom0's initramfs (tools/mkxenhost.sh): mount /dev/vda, switch to it.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do
	insmod "/lib/modules/$m" || echo "REMUSDB-WARN: insmod $m failed"
done < /lib/modules/load-order
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
if mount -t ext4 /dev/vda /newroot; then
	umount /proc /sys
	mount --move /dev /newroot/dev
	exec switch_root /newroot /sbin/remusdb-xen-init
fi
echo "REMUSDB-XEN-DOM0-FAIL: cannot mount /dev/vda"
exec sh
EOI
chmod 755 "$ird/init"
(cd "$ird" && find . -print0 | LC_ALL=C sort -z | xargs -0 touch -h -d @0 &&
	find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --reproducible 2>/dev/null) |
	nice_ gzip -9 -n > "$entry/initrd.img"

# ---- outputs ----
cp "$kdir/boot/vmlinuz-$KVER" "$entry/vmlinuz"
nice_ gzip -dc "$root/boot/xen-4.17-amd64.gz" > "$entry/xen-debian"
if [ $shadow = 1 ]; then
	touch "$sentry/.used"
	cp "$sentry/xen" "$entry/xen"
else
	cp "$entry/xen-debian" "$entry/xen"
fi
printf 'XEN_CMDLINE="%s"\nDOM0_CMDLINE="%s"\n' "$XEN_CMDLINE" "$DOM0_CMDLINE" > "$entry/cmdline"
# fixed UUID and hash seed; mtimes from the root
nice_ mkfs.ext4 -q -F -L xenhost-dom0 -U 6c1a9c6e-5e4b-4b8e-9b6e-0d0e0a0b0c01 \
	-E hash_seed=6c1a9c6e-5e4b-4b8e-9b6e-0d0e0a0b0c02,root_owner=0:0 \
	-d "$root" "$entry/dom0.img" "${IMG_MB}M"
touch "$entry/.done" "$entry/.used"
for f in $outputs; do ln -sfn "$entry/$f" "$out/$f"; done
bash "$here/cache-prune.sh" "$cache" xenhost 2
bash "$here/cache-prune.sh" "$cache" xen-dom0root 2
bash "$here/cache-prune.sh" "$cache" xen-shadow 2
echo "mkxenhost: $out (built in $(( $(date +%s) - t0 )) s, $entry, $(du -sh "$entry" | cut -f1))"
