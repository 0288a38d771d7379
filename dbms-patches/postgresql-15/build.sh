#!/usr/bin/env bash
# Build the PostgreSQL 15 server binary with RemusDB commit protection:
# Debian's postgresql-15 source package (the version the test guests and
# this host install), the patches listed in series, Debian's configure
# options minus what the server binary does not use (LLVM/JIT, the PL
# languages, libxslt, readline, TAP tests).  Only src/backend/postgres is
# built; it is a drop-in replacement for /usr/lib/postgresql/15/bin/postgres
# and links the same shared libraries.
#
#   dbms-patches/postgresql-15/build.sh        prints the path of postgres
#
# The result is cached in ${REMUSDB_CACHE:-/var/cache/remusdb}/dbms/
# postgresql-15-KEY/ (postgres, postgres.debug, build.log), KEY a hash of
# the source version, series, the patches and this script; a cached build
# returns at once.  build/dbms/postgresql-15/postgres (in the repository)
# links to it.  Needs root for apt-get (the first time).
set -euo pipefail

PG_DEB_VERSION=15.18-0+deb12u1

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${REMUSDB_CACHE:-/var/cache/remusdb}

log() { echo "build-pg: $*" >&2; }

patches=()
while read -r p; do
	case $p in ''|'#'*) continue ;; esac
	patches+=("$here/$p")
done < "$here/series"

key=$( { echo "$PG_DEB_VERSION"; cat "$here/series" "${patches[@]}" "$0"; } |
	sha256sum | cut -c1-16)
out=$cache/dbms/postgresql-15-$key
link=$root/build/dbms/postgresql-15/postgres

# The patch carries its own copy of remusdb.ko's contract (a PostgreSQL tree
# must build without this repository): it must equal the module's header.
pdef() { sed -n "s/^+#define $1[[:space:]]\{1,\}\([^[:space:]]*\).*/\1/p" "${patches[@]}" | head -n 1; }
check_contract() {
	local h=$root/guest-kmod/include/uapi/remusdb.h name t rc=0
	t=$(mktemp -d)
	{
		printf '#include <stddef.h>\n#include "%s"\n' "$h"
		for name in REMUSDB_SO_PROTECT REMUSDB_SO_ABORT_GEN REMUSDB_EVENT_ABORT; do
			echo "_Static_assert($name == ($(pdef $name)), \"the patch's $name\");"
		done
		echo '_Static_assert(sizeof(struct remusdb_event) == 24 &&
	offsetof(struct remusdb_event, generation) == 8 &&
	offsetof(struct remusdb_event, flags) == 16,
	"the patch reads struct remusdb_event as two uint64 and two uint32");'
	} > "$t/contract.c"
	cc -fsyntax-only "$t/contract.c" || rc=1
	[ "$(printf '#include "%s"\nREMUSDB_DEV\n' "$h" | cpp -P | tail -n 1)" = "$(pdef REMUSDB_DEV)" ] || rc=1
	rm -rf "$t"
	[ $rc = 0 ] || log "the patch's copy of the contract differs from $h"
	return $rc
}
check_contract

if [ -x "$out/postgres" ]; then
	mkdir -p "$(dirname "$link")"
	ln -sfn "$out/postgres" "$link"
	echo "$out/postgres"
	exit 0
fi

[ "$(id -u)" = 0 ] || { log "must run as root the first time (apt-get)"; exit 1; }
t0=$(date +%s)
mkdir -p "$cache/dbms" "$cache/src"
work=$(mktemp -d "$cache/dbms/pg-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- dependencies: deb-src, Debian's build dependencies of the server ----
# setup-deps.sh adds the deb-src entry and installs postgresql-15 itself.
bash "$root/tools/setup-deps.sh" >&2
deps=(build-essential dpkg-dev bison flex gettext mawk pkg-config
      libicu-dev libkrb5-dev libldap2-dev liblz4-dev libpam0g-dev
      libselinux1-dev libssl-dev libsystemd-dev libxml2-dev libzstd-dev
      uuid-dev zlib1g-dev systemtap-sdt-dev)
missing=()
for p in "${deps[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

# ---- source: Debian's package, with Debian's patches applied ----
srcdir=$cache/src/postgresql-15-$PG_DEB_VERSION
dsc=$srcdir/postgresql-15_$PG_DEB_VERSION.dsc
if [ ! -f "$dsc" ]; then
	log "downloading the source of postgresql-15 $PG_DEB_VERSION"
	rm -rf "$srcdir.tmp"
	mkdir -p "$srcdir.tmp"
	(cd "$srcdir.tmp" && timeout 600 apt-get source --download-only \
		"postgresql-15=$PG_DEB_VERSION" >/dev/null 2>&1) ||
		{ log "apt-get source failed (deb-src for bookworm? tools/setup-deps.sh)"; exit 1; }
	rm -rf "$srcdir"
	mv "$srcdir.tmp" "$srcdir"
fi
t1=$(date +%s)
# (its signature cannot be checked without Debian's keyring of uploaders;
# apt-get source checked the files against the archive's signed index)
dpkg-source -x "$dsc" "$work/src" >/dev/null 2>&1 || { log "dpkg-source -x $dsc failed"; exit 1; }
for p in "${patches[@]}"; do
	log "applying $(basename "$p")"
	patch -d "$work/src" -p1 --quiet --forward < "$p"
done

# ---- configure: debian/rules' options (postgresql-common's
# server/postgresql.mk), minus --with-tcl/perl/python/libxslt/llvm,
# --enable-tap-tests; --without-readline (only psql uses it) ----
mkdir -p "$work/src/build"
cd "$work/src/build"
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
log "configuring"
../configure --build=x86_64-linux-gnu --prefix=/usr \
	--mandir=/usr/share/postgresql/15/man \
	--docdir=/usr/share/doc/postgresql-doc-15 \
	--sysconfdir=/etc/postgresql-common --datarootdir=/usr/share/ \
	--datadir=/usr/share/postgresql/15 \
	--bindir=/usr/lib/postgresql/15/bin \
	--libdir=/usr/lib/x86_64-linux-gnu/ --libexecdir=/usr/lib/postgresql/ \
	--includedir=/usr/include/postgresql/ --localstatedir=/var \
	--with-extra-version=" (Debian $PG_DEB_VERSION + RemusDB)" \
	--enable-nls --enable-thread-safety --enable-debug --enable-dtrace \
	--disable-rpath --with-uuid=e2fs --with-gnu-ld --with-gssapi \
	--with-ldap --with-pam --with-openssl --with-libxml --with-icu \
	--with-lz4 --with-zstd --with-systemd --with-selinux \
	--with-pgport=5432 --with-system-tzdata=/usr/share/zoneinfo \
	--without-readline AWK=mawk 'MKDIR_P=/bin/mkdir -p' TAR=/bin/tar \
	CFLAGS="$(dpkg-buildflags --get CFLAGS) -fno-omit-frame-pointer" \
	CPPFLAGS="$(dpkg-buildflags --get CPPFLAGS)" \
	LDFLAGS="$(dpkg-buildflags --get LDFLAGS)" >"$work/build.log" 2>&1 ||
	{ tail -20 "$work/build.log" >&2; log "configure failed"; exit 1; }

log "building src/backend/postgres (about 3 minutes on 2 cores)"
# MAKELEVEL=0 makes src/backend generate the headers it needs first.
MAKELEVEL=0 nice -n 10 make -j"$(nproc)" -C src/backend >>"$work/build.log" 2>&1 ||
	{ grep -E 'error|Error' "$work/build.log" | tail -20 >&2; log "build failed"; exit 1; }

# Stripped like Debian's binary, its debug info beside it.
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
objcopy --only-keep-debug src/backend/postgres "$out.tmp/postgres.debug"
strip --remove-section=.comment --remove-section=.note -o "$out.tmp/postgres" src/backend/postgres
objcopy --add-gnu-debuglink="$out.tmp/postgres.debug" "$out.tmp/postgres"
cp "$work/build.log" "$out.tmp/"
rm -rf "$out"
mv "$out.tmp" "$out"
mkdir -p "$(dirname "$link")"
ln -sfn "$out/postgres" "$link"
t2=$(date +%s)
log "built in $((t2 - t0)) s ($((t2 - t1)) s without apt)"
echo "$out/postgres"
