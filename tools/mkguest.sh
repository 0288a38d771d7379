#!/usr/bin/env bash
# Build the test guest: a pinned Debian kernel and a busybox initramfs.
#
#   tools/mkguest.sh [--out DIR] [--payload DIR]... [--static BIN]...
#                    [--module NAME]...
#
# --payload DIR   copied into the initramfs root; executable
#                 DIR/etc/remusdb.d/*.sh run in name order after the NIC
#                 is up and REMUSDB-GUEST-READY was printed
# --static BIN    a static binary copied to /usr/bin/
# --module NAME   one more kernel module (with its dependencies) loaded at
#                 boot, e.g. virtio_blk ext4 for a guest with a disk
# Kernel command line understood by /init:
#   remusdb.ip=ADDR/PREFIX  remusdb.gw=ADDR  remusdb.run="CMD ARGS"
#
# Output: DIR/vmlinuz and DIR/initrd.img (default build/guest).  The same
# inputs give the same bytes (fixed mtimes, sorted entries); downloads are
# cached in ${REMUSDB_CACHE:-/var/cache/remusdb}/guest.
set -euo pipefail

# Pinned: the newest 6.1.0-NN Debian offers whose linux-headers package
# also exists (the guest kernel module is built against those headers).
KVER=6.1.0-56-amd64
KPKG_VERSION=6.1.192-2
# All =m in this kernel's config (virtio, virtio_pci, virtio_net,
# net_failover, failover, virtio_console); dependencies come from modinfo.
# 8250 serial is built in.
MODULES="virtio_pci virtio_net virtio_console"

here=$(cd "$(dirname "$0")" && pwd)
out=$here/../build/guest
payloads=() statics=()
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--payload) payloads+=("$2"); shift 2 ;;
	--static) statics+=("$2"); shift 2 ;;
	--module) MODULES="$MODULES $2"; shift 2 ;;
	*) echo "mkguest: unknown argument $1" >&2; exit 2 ;;
	esac
done
cache=${REMUSDB_CACHE:-/var/cache/remusdb}/guest
mkdir -p "$cache" "$out"

deb=$cache/linux-image-${KVER}_${KPKG_VERSION}_amd64.deb
if [ ! -f "$deb" ]; then
	(cd "$cache" && apt-get download "linux-image-$KVER=$KPKG_VERSION" >/dev/null 2>&1) ||
		{ echo "mkguest: cannot download linux-image-$KVER $KPKG_VERSION (apt-get update? tools/setup-deps.sh)" >&2; exit 1; }
fi
kdir=$cache/kernel-$KVER-$KPKG_VERSION
if [ ! -f "$kdir/.done" ]; then
	rm -rf "$kdir"
	mkdir -p "$kdir"
	dpkg-deb -x "$deb" "$kdir"
	touch "$kdir/.done"
fi
mdir=$kdir/lib/modules/$KVER

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,etc,usr/bin,lib/modules,run,var}
cp /bin/busybox "$root/bin/busybox"
for app in $(/bin/busybox --list); do
	[ "$app" = busybox ] || ln -sf busybox "$root/bin/$app"
done

# Modules and their dependencies, in load order (dependencies first).
declare -A seen=()
order=()
add_mod() {
	local name=$1 file dep
	[ -n "${seen[$name]:-}" ] && return 0
	seen[$name]=1
	file=$(find "$mdir/kernel" -name "$name.ko*" | head -n 1)
	[ -n "$file" ] || { echo "mkguest: module $name not in $KVER" >&2; exit 1; }
	for dep in $(modinfo -F depends "$file" | tr ',' ' '); do
		add_mod "$dep"
	done
	order+=("$file")
}
for m in $MODULES; do add_mod "$m"; done
: > "$root/lib/modules/load-order"
for f in "${order[@]}"; do
	cp "$f" "$root/lib/modules/"
	basename "$f" >> "$root/lib/modules/load-order"
done

cat > "$root/init" <<'EOI'
#!/bin/sh
# RemusDB test guest init.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
while read -r m; do
	insmod "/lib/modules/$m" || echo "REMUSDB-WARN: insmod $m failed"
done < /lib/modules/load-order
arg() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" /proc/cmdline | head -n 1; }
ip link set lo up
ipaddr=$(arg remusdb.ip)
if [ -n "$ipaddr" ]; then
	i=0
	while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
	[ -e /sys/class/net/eth0 ] || echo "REMUSDB-WARN: no eth0 after 5 s"
	ip link set eth0 up
	ip addr add "$ipaddr" dev eth0
	gw=$(arg remusdb.gw)
	[ -n "$gw" ] && ip route add default via "$gw"
fi
echo REMUSDB-GUEST-READY
# Payload hooks, in name order, after the NIC is configured.
for s in /etc/remusdb.d/*.sh; do
	[ -x "$s" ] || continue
	echo "REMUSDB-HOOK: $s"
	"$s"
done
# remusdb.run="..." may contain spaces: take everything between the quotes.
run=$(sed -n 's/.*remusdb\.run="\([^"]*\)".*/\1/p' /proc/cmdline)
[ -n "$run" ] || run=$(arg remusdb.run)
if [ -n "$run" ]; then
	echo "REMUSDB-RUN: $run"
	$run
	echo "REMUSDB-EXIT: $?"
fi
exec setsid sh -c 'exec sh </dev/ttyS0 >/dev/ttyS0 2>&1'
EOI
chmod +x "$root/init"
for p in "${payloads[@]}"; do cp -a "$p/." "$root/"; done
# (cp -a gives the root the payload directory's mode: mktemp -d's 0700
# would shut every user but root out of the guest)
chmod 0755 "$root"
for s in "${statics[@]}"; do install -m 0755 "$s" "$root/usr/bin/"; done

cp "$kdir/boot/vmlinuz-$KVER" "$out/vmlinuz.tmp"
(cd "$root" && find . -print0 | LC_ALL=C sort -z |
	xargs -0 touch -h -d @0 &&
	find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --reproducible 2>/dev/null) | gzip -9 -n > "$out/initrd.img.tmp"
mv "$out/vmlinuz.tmp" "$out/vmlinuz"
mv "$out/initrd.img.tmp" "$out/initrd.img"
echo "mkguest: $out/vmlinuz $out/initrd.img ($(du -h "$out/initrd.img" | cut -f1), kernel $KVER)"
