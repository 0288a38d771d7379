#!/usr/bin/env bash
# Build the patched MariaDB server: Debian's mariadb source package of the
# version the test guest installs, the quilt patches in ./series on top,
# only the mariadbd binary (InnoDB, Aria, MyISAM built in; the loadable
# plugins, Galera, the embedded server and the tools off).
#
#   dbms-patches/mariadb-10.11/build.sh [--print]
#
# Output: ${REMUSDB_CACHE:-/var/cache/remusdb}/dbms/mariadb-10.11-KEY/mariadbd,
# linked at build/dbms/mariadb-10.11/mariadbd.  KEY hashes the source
# version, ./series, the patches, remusdb.h and this script; a cached build
# is linked at once.  --print: only print the binary's path (exit 1 if it
# is not built).  REMUSDB_JOBS: parallel compile jobs (default 2).
#
# The binary replaces Debian's /usr/sbin/mariadbd of that version: same
# layout (INSTALL_LAYOUT=DEB: plugin dir /usr/lib/mysql/plugin, charsets
# /usr/share/mysql/charsets, messages /usr/share/mysql, socket
# /run/mysqld/mysqld.sock), same system libraries, same errmsg.sys.
set -euo pipefail

SRC_VERSION=1:10.11.18-0+deb12u1
UPSTREAM=10.11.18
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
uapi=$repo/guest-kmod/include/uapi
patches=$(grep -v '^\s*\(#\|$\)' "$here/series")
jobs=${REMUSDB_JOBS:-2}

key=$( { echo "$SRC_VERSION"; cat "$0" "$here/series" "$uapi/remusdb.h"
	 for p in $patches; do cat "$here/$p"; done; } | sha256sum | cut -c1-16)
cache_root=${REMUSDB_CACHE:-/var/cache/remusdb}
out=$cache_root/dbms/mariadb-10.11-$key
link=$repo/build/dbms/mariadb-10.11

if [ "${1:-}" = --print ]; then
	[ -f "$out/.done" ] || exit 1
	echo "$out/mariadbd"
	exit 0
fi
if [ -f "$out/.done" ]; then
	mkdir -p "$link"
	ln -sfn "$out/mariadbd" "$link/mariadbd"
	echo "mariadb-build: $link/mariadbd (cached $out)"
	exit 0
fi

# ---- build dependencies (Debian packages; idempotent) ----
deps=(build-essential cmake bison pkg-config dpkg-dev patch libncurses-dev
      libssl-dev zlib1g-dev libpcre2-dev libfmt-dev libaio-dev liburing-dev
      libsystemd-dev libnuma-dev libcrypt-dev)
missing=()
for p in "${deps[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
# apt-get source needs the deb-src entries tools/setup-deps.sh adds
if ! apt-cache showsrc mariadb 2>/dev/null | grep -qx "Version: $SRC_VERSION"; then
	[ "$(id -u)" = 0 ] || { echo "mariadb-build: no deb-src for mariadb $SRC_VERSION; run tools/setup-deps.sh as root" >&2; exit 1; }
	bash "$repo/tools/setup-deps.sh"
	apt-cache showsrc mariadb 2>/dev/null | grep -qx "Version: $SRC_VERSION" || {
		apt-get update -q >/dev/null
		apt-cache showsrc mariadb | grep -qx "Version: $SRC_VERSION"
	} || { echo "mariadb-build: source package mariadb $SRC_VERSION not available" >&2; exit 1; }
fi
if [ ${#missing[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || { echo "mariadb-build: missing ${missing[*]} (run as root)" >&2; exit 1; }
	echo "mariadb-build: installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# ---- source: Debian's package, downloaded once ----
srcdl=$cache_root/src/mariadb-$UPSTREAM
dsc=$srcdl/mariadb_${SRC_VERSION#*:}.dsc
if [ ! -f "$srcdl/.done" ]; then
	rm -rf "$srcdl"
	mkdir -p "$srcdl"
	(cd "$srcdl" && apt-get source --download-only -q "mariadb=$SRC_VERSION" >/dev/null 2>&1) ||
		{ echo "mariadb-build: apt-get source mariadb=$SRC_VERSION failed" >&2; exit 1; }
	touch "$srcdl/.done"
fi

t0=$(date +%s)
work=$out.work
rm -rf "$work" "$out"
mkdir -p "$work"
log=$work/build.log
echo "mariadb-build: building in $work (log $log)"
dpkg-source -x "$dsc" "$work/src" >"$log" 2>&1
for p in $patches; do
	patch -d "$work/src" -p1 --no-backup-if-mismatch -s < "$here/$p" >>"$log" 2>&1 ||
		{ echo "mariadb-build: $p does not apply (log $log)" >&2; exit 1; }
done

# Debian's hardening flags, without -g (a Release build)
eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)"
CFLAGS="${CFLAGS/-g /} $CPPFLAGS"
CXXFLAGS="${CXXFLAGS/-g /} $CPPFLAGS"
export CFLAGS CXXFLAGS LDFLAGS
# Off: what the guest does not load.  Kept: the performance schema (Debian's
# mariadb-install-db creates the sys schema on it) and every plugin built
# into Debian's binary, so the options are Debian's (but for wsrep_*).
off_plugins=(ROCKSDB MROONGA SPIDER CONNECT S3 COLUMNSTORE OQGRAPH SPHINX
	     ARCHIVE FEDERATED FEDERATEDX AUTH_GSSAPI AUTH_PAM
	     AUTH_PAM_V1 CRACKLIB_PASSWORD_CHECK PROVIDER_BZIP2 PROVIDER_LZ4
	     PROVIDER_LZMA PROVIDER_LZO PROVIDER_SNAPPY AWS_KEY_MANAGEMENT
	     HASHICORP_KEY_MANAGEMENT)
cmake_args=(
	-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DDEB=debian
	-DCOMPILATION_COMMENT="Debian 12, RemusDB commit protection"
	-DMYSQL_SERVER_SUFFIX=-${SRC_VERSION#*-} -DSYSTEM_TYPE=debian-linux-gnu
	-DCMAKE_SYSTEM_PROCESSOR=amd64 -DCONC_DEFAULT_CHARSET=utf8mb4
	-DWITH_SSL=system -DWITH_ZLIB=system -DWITH_PCRE=system
	-DWITH_LIBFMT=system -DWITH_SYSTEMD=yes -DWITH_URING=ON
	-DWITH_LIBAIO=ON -DWITH_NUMA=AUTO -DIGNORE_AIO_CHECK=ON
	-DWITH_WSREP=OFF -DWITH_UNIT_TESTS=OFF -DWITH_EMBEDDED_SERVER=OFF
	-DWITH_MARIABACKUP=OFF -DPLUGIN_AUTH_SOCKET=YES
	-DREMUSDB_UAPI_DIR="$uapi")
for p in "${off_plugins[@]}"; do cmake_args+=("-DPLUGIN_$p=NO"); done
mkdir -p "$work/build"
(cd "$work/build" && cmake "${cmake_args[@]}" ../src >>"$log" 2>&1) ||
	{ echo "mariadb-build: cmake failed (log $log)" >&2; exit 1; }
(cd "$work/build" && nice -n 10 make -j"$jobs" mariadbd >>"$log" 2>&1) ||
	{ tail -n 30 "$log" >&2; echo "mariadb-build: make failed (log $log)" >&2; exit 1; }

bin=$work/build/sql/mariadbd
"$bin" --version | grep -q "Ver $UPSTREAM-MariaDB-${SRC_VERSION#*-} " ||
	{ echo "mariadb-build: unexpected $("$bin" --version)" >&2; exit 1; }
mkdir -p "$out"
install -m 0755 "$bin" "$out/mariadbd.tmp"
cp "$log" "$out/build.log"
mv "$out/mariadbd.tmp" "$out/mariadbd"
touch "$out/.done"
rm -rf "$work"
mkdir -p "$link"
ln -sfn "$out/mariadbd" "$link/mariadbd"
echo "mariadb-build: $link/mariadbd (built in $(( $(date +%s) - t0 )) s: $("$out/mariadbd" --version))"
