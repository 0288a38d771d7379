#!/usr/bin/env bash
# Install everything RemusDB needs to build and test, from Debian packages
# (plus the two PyPI build tools QEMU's +ds tarball no longer bundles).
# Idempotent: a second run changes nothing and takes seconds.
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "setup-deps: must run as root (apt-get)" >&2; exit 1; }

stamp_dir=${REMUSDB_CACHE:-/var/cache/remusdb}
mkdir -p "$stamp_dir"
here=$(cd "$(dirname "$0")" && pwd)

# The deb-src and bookworm-backports entries reuse the mirror this machine's
# apt already trusts, so no host is named here.
mirror_uri() {
	local f u
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		u=$(awk '/^URIs:/{print $2; exit}' "$f")
		case "$u" in */debian|*/debian/) echo "${u%/}"; return 0 ;; esac
	done
	u=$(awk '$1=="deb" && $0 ~ / bookworm / {for(i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' /etc/apt/sources.list 2>/dev/null || true)
	[ -n "$u" ] && { echo "${u%/}"; return 0; }
	return 1
}

src=/etc/apt/sources.list.d/remusdb.sources
if [ ! -f "$src" ]; then
	uri=$(mirror_uri) || { echo "setup-deps: cannot find the Debian mirror in apt's sources" >&2; exit 1; }
	cat > "$src" <<EOS
# Added by RemusDB tools/setup-deps.sh: source packages (QEMU, PostgreSQL,
# MariaDB) and bookworm-backports (QEMU 10.0.2 orig tarball).
Types: deb-src
URIs: $uri
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
	rm -f "$stamp_dir/apt-updated"
fi
# An earlier hand-made copy of the same entries would duplicate them.
rm -f /etc/apt/sources.list.d/remusdb-test.sources

pkgs=(
	# build
	build-essential pkg-config clang llvm libclang-rt-14-dev
	libjansson-dev libcmocka-dev liblz4-dev libxxhash-dev
	# remusdbd's witness client (etcd's JSON gateway over HTTP)
	libcurl4-openssl-dev
	# the replication link's TLS (libssl), link keys in tests (openssl)
	libssl-dev openssl
	# QEMU build deps
	libglib2.0-dev libpixman-1-dev libfdt-dev libslirp-dev zlib1g-dev
	ninja-build python3 python3-venv flex bison bzip2 xz-utils dpkg-dev patch
	# QEMU firmware and test guest
	seabios ipxe-qemu qemu-system-data busybox-static cpio kmod
	# qcow2 test images (qemu-img: the test QEMU is built without tools)
	qemu-utils
	# UEFI guests' firmware (OVMF_CODE, OVMF_VARS) for the nvram test
	ovmf
	# tests: network namespaces, captures
	iproute2 iputils-ping procps jq curl
	# a power loss for a disk image in user space (tests/crashfs)
	libfuse3-dev fuse3
	# the failover witness the tests and the demo run (docs/failure-modes.md)
	etcd-server
	# the PostgreSQL test guest (its data image is made from these) and
	# the ledger workload, pgbench and pg_amcheck on the host side
	postgresql-15 postgresql-client-15 libpq-dev e2fsprogs
	# the MariaDB guest's host side: the ledger's driver, its client,
	# sysbench (make bench)
	libmariadb-dev mariadb-client sysbench
	# remusdb.ko for the test guest's pinned kernel (tools/mkguest.sh)
	linux-headers-6.1.0-56-amd64
	# the manual pages' check (make man: groff and man -l, no warnings),
	# remusdbctl's bash completion and its test, the systemd unit's check
	groff-base man-db bash-completion systemd
	# the metrics file's check: promtool's lint and a real scrape through
	# node_exporter's textfile collector (tests/lib/metrics.sh)
	prometheus prometheus-node-exporter
	# the drill report's plots (tools/drill-report.sh)
	gnuplot-nox
	# make deb (dpkg-dev above), and make check-packaging: a clean root
	# booted with systemd in a container (the root cached zstd-compressed)
	debhelper dh-dkms debootstrap systemd-container zstd
	# libvirt domains (remusdbctl enroll, docs/libvirt.md): remusdbctl links
	# libvirt and libxml2; tests/e2e/libvirt-drill.sh runs a libvirtd (the
	# monolithic daemon of Debian 12) per host; diff shows what enroll changes
	libvirt-dev libxml2-dev libvirt-daemon libvirt-daemon-driver-qemu
	libvirt-clients diffutils
	# the Xen backend's helper remusdb-xen (hypervisor/xen/xen_helper.h)
	# links Xen's libraries; it runs in the Xen test host's dom0
	libxen-dev
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ ! -f "$stamp_dir/apt-updated" ]; then
	apt-get update -q
	touch "$stamp_dir/apt-updated"
fi
# PostgreSQL's package would make and start a "main" cluster on this host:
# the tests only need its binaries.
mkdir -p /etc/postgresql-common/createcluster.d
[ -f /etc/postgresql-common/createcluster.d/remusdb.conf ] ||
	echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/remusdb.conf
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup-deps: installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
echo "setup-deps: ok"
