#!/usr/bin/env bash
# Build the QEMU the tests run: Debian's pinned QEMU 10.0.2 orig tarball plus
# the patches in hypervisor/qemu/patches/ (periodic COLO checkpoints under
# TCG; see hypervisor/qemu/README.md). The result is cached outside the tree,
# keyed by the tarball's and the patches' hashes, so a rebuild happens only
# when one of them changes.  Prints the path of qemu-system-x86_64.
#
# Environment: REMUSDB_CACHE (default /var/cache/remusdb).
set -euo pipefail

QEMU_DEB_VERSION='1:10.0.2+ds-2+deb13u1~bpo12+1'
QEMU_ORIG='qemu_10.0.2+ds.orig.tar.xz'
QEMU_ORIG_SHA256='0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1'

here=$(cd "$(dirname "$0")" && pwd)
cache=${REMUSDB_CACHE:-/var/cache/remusdb}
mkdir -p "$cache/src"

log() { echo "build-test-qemu: $*" >&2; }

key=$( { echo "$QEMU_ORIG_SHA256"; cat "$here"/patches/*.patch "$0"; } | sha256sum | cut -c1-16)
out="$cache/qemu-$key"
bin="$out/build/qemu-system-x86_64"
if [ -x "$bin" ] && [ -f "$out/.complete" ]; then
	echo "$bin"
	exit 0
fi

tarball="$cache/src/$QEMU_ORIG"
if ! echo "$QEMU_ORIG_SHA256  $tarball" | sha256sum -c --status 2>/dev/null; then
	log "downloading $QEMU_ORIG (Debian source $QEMU_DEB_VERSION)"
	tmp=$(mktemp -d "$cache/src/dl.XXXXXX")
	# The .dsc and .debian.tar.xz of this backport are gone from the
	# archive; apt still fetches the orig tarball, which is all we need.
	(cd "$tmp" && timeout 600 apt-get source --download-only "qemu=$QEMU_DEB_VERSION" >/dev/null 2>&1 || true)
	[ -f "$tmp/$QEMU_ORIG" ] || { log "apt-get source did not fetch $QEMU_ORIG (is bookworm-backports deb-src configured? run tools/setup-deps.sh)"; rm -rf "$tmp"; exit 1; }
	echo "$QEMU_ORIG_SHA256  $tmp/$QEMU_ORIG" | sha256sum -c --status || { log "$QEMU_ORIG: checksum mismatch"; rm -rf "$tmp"; exit 1; }
	mv "$tmp/$QEMU_ORIG" "$tarball"
	rm -rf "$tmp"
fi

# Built in place (the build tree holds symlinks into the source tree, so
# it cannot be moved); .complete marks a finished build.
rm -rf "$out"
mkdir -p "$out"
log "unpacking into $out"
tar -C "$out" --strip-components=1 -xf "$tarball"
for p in "$here"/patches/*.patch; do
	log "applying $(basename "$p")"
	patch -d "$out" -p1 --quiet --forward < "$p"
done
# The +ds tarball drops the prebuilt edk2 images; meson only needs the
# inputs to exist, and x86_64 guests here boot SeaBIOS, never edk2.
for f in aarch64-code arm-code arm-vars riscv-code riscv-vars i386-code \
	 i386-secure-code i386-vars x86_64-code x86_64-secure-code \
	 loongarch64-code loongarch64-vars; do
	[ -f "$out/pc-bios/edk2-$f.fd.bz2" ] || printf '' | bzip2 > "$out/pc-bios/edk2-$f.fd.bz2"
done
# It also drops the bundled meson and pycotap wheels: a private venv has them.
venv="$cache/qemu-venv"
if [ ! -x "$venv/bin/meson" ] || ! "$venv/bin/python3" -c 'import pycotap' 2>/dev/null; then
	log "creating build venv $venv"
	/usr/bin/python3 -m venv "$venv"
	"$venv/bin/pip" install -q 'meson>=1.5,<2' pycotap
fi

mkdir -p "$out/build"
cd "$out/build"
log "configuring"
../configure --python="$venv/bin/python3" \
	--target-list=x86_64-softmmu --disable-docs --disable-werror \
	--disable-tools --disable-install-blobs --disable-download \
	--disable-sdl --disable-gtk --disable-vnc --disable-spice \
	--disable-opengl --disable-curses --disable-libusb --disable-usb-redir \
	--disable-xen --audio-drv-list= --enable-slirp >"$out/configure.log" 2>&1 \
	|| { log "configure failed; see $out/configure.log"; tail -20 "$out/configure.log" >&2; exit 1; }
log "building qemu-system-x86_64 (about 4 minutes on 2 cores)"
ninja -j"$(nproc)" qemu-system-x86_64 >"$out/build.log" 2>&1 \
	|| { log "build failed; see $out/build.log"; tail -30 "$out/build.log" >&2; exit 1; }
# Option ROMs (linuxboot_dma.bin for -kernel boots) are not in the +ds
# tarball and configure does not build them here: tests take them from
# Debian's qemu-system-data (-L /usr/share/qemu), like SeaBIOS and iPXE.
touch "$out/.complete"
echo "$bin"
