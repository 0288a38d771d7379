#!/usr/bin/env bash
# Build the Patroni variant of the PostgreSQL test guest: the guest of
# tools/mkguest-pg.sh (the same kernel, initramfs and cluster, built or
# linked from its cache with the same options) plus Debian's Patroni
# 3.0.2 for the peer rows of the benchmark (docs/peers-research.md).
#
#   tools/mkguest-pg-patroni.sh [--out DIR] [mkguest-pg.sh's options]
#
# --out DIR   default build/guest-pg-patroni; every other option goes to
#             mkguest-pg.sh as it is (--layout split is refused)
#
# Output: DIR/vmlinuz, DIR/initrd.img, DIR/pgdata.img (raw, sparse,
# 2 GiB: room for pgbench's scale 16, Patroni's WAL retention and
# Python; copy it with cp --sparse=always before giving it to a VM).
# Cached in ${REMUSDB_CACHE:-/var/cache/remusdb}/guest-patroni-HASH,
# keyed by this script, the base guest's cache entry (its own key), the
# staged packages' bytes, the host's Python and the libraries copied.
#
# The data image is the base image's tree plus, under /pg/pkg, the host's
# python3.11 with its standard library (tests and build files pruned),
# Debian's patroni and its Python dependencies (apt-get download and
# dpkg-deb -x into a stage cached by their versions, never installed on
# this host), their byte code compiled here (the guest's postgres user
# cannot write it, and compiling it under TCG at every start would be
# slow), and every shared library these need (ldd).  Nothing of Python
# is in the initramfs: that lives in the guest's RAM.
#
# The initramfs is the base one with a second archive appended (the
# kernel unpacks concatenated archives in order, a later file replacing
# an earlier one): /usr/bin/rdb-pg-start, which the base's boot hook
# runs once /pg is mounted, starts Patroni in place of PostgreSQL when
# the kernel command line has remusdb.patroni=NAME, and is the base's
# rdb-pg-start (kept as rdb-pg-start-plain) when it has not.  With it:
#   remusdb.patroni=NAME          the member's name; Patroni runs as the
#                                 postgres user with /tmp/patroni.yml
#                                 (REST API on *:8008, etcd3 DCS, scope
#                                 remusdb, the image's cluster in
#                                 /pg/data, watchdog off: no device)
#   remusdb.patroni_etcd=H:P      the DCS (default 10.77.0.3:2379, the
#                                 witness; its etcd 3.4 serves only v3)
#   remusdb.patroni_ttl=S remusdb.patroni_loop_wait=S
#   remusdb.patroni_retry=S       bootstrap.dcs (default 30 10 10, as
#                                 Patroni's; 3.0.2 enforces no minimum)
#   remusdb.patroni_strict=0|1    synchronous_mode_strict (default 0);
#                                 synchronous_mode is always on
# The guest prints REMUSDB-PATRONI-START UPTIME when Patroni is launched
# and REMUSDB-PATRONI-READY UPTIME once its REST /health answers 200
# (its PostgreSQL runs, as primary or replica); REMUSDB-WARN if Patroni
# exits first or 600 s pass.
set -euo pipefail

PATRONI_VERSION=3.0.2-1
# patroni's Depends, with python3-etcd for its etcd3 DCS (dcs/etcd3.py
# imports etcd) and their own dependencies; libpq and libyaml come from
# this host through ldd, as the base image's libraries do
PKGS=(patroni python3-etcd python3-dnspython python3-psycopg2 python3-psutil
      python3-urllib3 python3-six python3-yaml python3-click python3-colorama
      python3-dateutil python3-prettytable python3-wcwidth python3-cdiff
      python3-pkg-resources)
PY=python3.11
IMG_MB=2048

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=$repo/build/guest-pg-patroni
base_args=()
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--layout)
		[ "$2" = one ] || { echo "mkguest-pg-patroni: only --layout one" >&2; exit 2; }
		shift 2 ;;
	*) base_args+=("$1"); shift ;;
	esac
done
cache_root=${REMUSDB_CACHE:-/var/cache/remusdb}
# Debian's (a python3.11 earlier on PATH may be another build: pyenv's)
pybin=/usr/bin/$PY
[ -x "$pybin" ] || { echo "mkguest-pg-patroni: no $pybin ($PY-minimal)" >&2; exit 1; }
pyver=$(dpkg-query -W -f '${Version}' "$PY-minimal" "lib$PY-stdlib" | tr '\n' ' ')

work=$(mktemp -d)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

# ---- the base guest (mkguest-pg.sh's own cache) ----
bash "$here/mkguest-pg.sh" --out "$work/base" "${base_args[@]}" >&2
base=$(dirname "$(readlink -f "$work/base/pgdata.img")")

# ---- Debian's packages, unpacked once per set of versions ----
# (one apt-cache call: each takes a second)
declare -A cand=()
while read -r p v; do cand[$p]=$v; done < <(apt-cache policy "${PKGS[@]}" 2>/dev/null |
	awk '/^[^ ]/ { p = $1; sub(/:$/, "", p) } /^  Candidate:/ { print p, $2 }')
vers=()
for p in "${PKGS[@]}"; do
	v=${cand[$p]:-}
	[ -n "$v" ] && [ "$v" != "(none)" ] ||
		{ echo "mkguest-pg-patroni: no candidate for $p (apt-get update?)" >&2; exit 1; }
	vers+=("$p=$v")
done
[ "${vers[0]}" = "patroni=$PATRONI_VERSION" ] ||
	{ echo "mkguest-pg-patroni: apt offers ${vers[0]}, not patroni $PATRONI_VERSION" >&2; exit 1; }
stage=$cache_root/dbms/patroni-stage-$(printf '%s\n' "${vers[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$stage/.done" ]; then
	rm -rf "$stage"
	mkdir -p "$stage/debs" "$stage/root"
	(cd "$stage/debs" && apt-get download -q "${vers[@]}" >/dev/null 2>&1) ||
		{ echo "mkguest-pg-patroni: cannot download ${vers[*]}" >&2; exit 1; }
	for d in "$stage"/debs/*.deb; do dpkg-deb -x "$d" "$stage/root"; done
	# byte code that needs no source timestamps (mkfs and copies keep
	# them, but nothing has to)
	"$pybin" -m compileall -q -j 0 --invalidation-mode unchecked-hash \
		"$stage/root/usr/lib/python3/dist-packages" >/dev/null
	touch "$stage/.done"
fi
dist=$stage/root/usr/lib/python3/dist-packages

# Every shared library Python, its extension modules and the staged
# C extensions need, as the base image's are found.
stdlib=/usr/lib/$PY
libs=$work/libs
{ ldd "$pybin"; find "$stdlib/lib-dynload" "$dist" -name '*.so' ! -name '_tkinter*' ! -name '_test*' \
	! -name '_ctypes_test*' ! -name 'xx*' -print0 | xargs -0 ldd; } > "$work/ldd" 2>/dev/null || true
if grep -q 'not found' "$work/ldd"; then
	echo "mkguest-pg-patroni: libraries that Python's modules need are missing here:" >&2
	grep 'not found' "$work/ldd" | sort -u >&2
	exit 1
fi
awk '/=> \//{print $3}' "$work/ldd" | sort -u > "$libs"

key=$( { cat "$0"; basename "$base"; echo "$pyver"; sha256sum < "$pybin"
	 (cd "$stage/debs" && sha256sum -- *.deb)
	 xargs -a "$libs" -d '\n' cat | sha256sum; } | sha256sum | cut -c1-16)
cache=$cache_root/guest-patroni-$key
mkdir -p "$out"
if [ -f "$cache/.done" ]; then
	touch "$cache/.used" "$base/.used"
	for f in vmlinuz initrd.img pgdata.img; do ln -sf "$cache/$f" "$out/$f"; done
	echo "mkguest-pg-patroni: $out (cached $cache)"
	exit 0
fi
rm -rf "$cache"
mkdir -p "$cache"
t0=$(date +%s)

# ---- the initramfs: the base one and an archive appended ----
ov=$work/overlay
mkdir -p "$ov/usr/bin"
(cd "$work" && gzip -dc "$base/initrd.img" | cpio -i --quiet --to-stdout usr/bin/rdb-pg-start) \
	> "$ov/usr/bin/rdb-pg-start-plain"
grep -q REMUSDB-PG-READY "$ov/usr/bin/rdb-pg-start-plain" ||
	{ echo "mkguest-pg-patroni: the base initramfs has no rdb-pg-start" >&2; exit 1; }
cat > "$ov/usr/bin/rdb-pg-start" <<'EOH'
#!/bin/sh
# PostgreSQL under Patroni when the kernel command line names a member
# (remusdb.patroni=NAME, tools/mkguest-pg-patroni.sh), else as in every
# PostgreSQL test guest.
grep -q 'remusdb\.patroni=' /proc/cmdline || exec /usr/bin/rdb-pg-start-plain
exec /usr/bin/rdb-patroni-start
EOH
cat > "$ov/usr/bin/rdb-patroni-start" <<'EOH'
#!/bin/sh
# Patroni on the mounted /pg (tools/mkguest-pg-patroni.sh): its
# configuration from the kernel command line, then Patroni as the
# postgres user; REMUSDB-PATRONI-READY once its REST API says healthy.
arg() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" /proc/cmdline | head -n 1; }
up() { cut -d' ' -f1 /proc/uptime; }
name=$(arg 'remusdb\.patroni')
ip=$(arg 'remusdb\.ip')
ip=${ip%/*}
etcd=$(arg remusdb.patroni_etcd)
ttl=$(arg remusdb.patroni_ttl)
loop_wait=$(arg remusdb.patroni_loop_wait)
retry=$(arg remusdb.patroni_retry)
strict=false
[ "$(arg remusdb.patroni_strict)" = 1 ] && strict=true
# (no resolver here: "localhost" must be in /etc/hosts for libpq)
echo "127.0.0.1 localhost" > /etc/hosts
cat > /tmp/patroni.yml <<EOC
scope: remusdb
name: $name
log:
  level: INFO
restapi:
  listen: 0.0.0.0:8008
  connect_address: $ip:8008
etcd3:
  hosts: ${etcd:-10.77.0.3:2379}
bootstrap:
  dcs:
    ttl: ${ttl:-30}
    loop_wait: ${loop_wait:-10}
    retry_timeout: ${retry:-10}
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: $strict
    postgresql:
      use_slots: true
      use_pg_rewind: false
      parameters:
        max_connections: 40
        max_prepared_transactions: 8
postgresql:
  listen: 0.0.0.0:5432
  connect_address: $ip:5432
  data_dir: /pg/data
  bin_dir: /usr/lib/postgresql/15/bin
  pgpass: /tmp/pgpass
  use_unix_socket: true
  use_unix_socket_repl: true
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: /tmp
  pg_hba:
    - local all all trust
    - local replication all trust
    - host all all 0.0.0.0/0 trust
    - host replication all 0.0.0.0/0 trust
watchdog:
  mode: 'off'
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOC
chmod 0644 /tmp/patroni.yml
su -s /bin/sh postgres -c "PYTHONHOME=/pg/pkg/usr exec /pg/pkg/usr/bin/python3.11 /pg/pkg/usr/bin/patroni /tmp/patroni.yml" \
	>/dev/ttyS0 2>&1 &
pid=$!
echo "REMUSDB-PATRONI-START $(up)"
# (in the background: the console's shell comes up meanwhile; nc, not
# busybox's wget: that one dies of SIGSEGV here)
(
	i=0
	until printf 'GET /health HTTP/1.0\r\n\r\n' | nc -w 2 127.0.0.1 8008 2>/dev/null |
		head -n 1 | grep -q ' 200 '; do
		kill -0 $pid 2>/dev/null || { echo "REMUSDB-WARN: patroni exited"; exit 1; }
		[ $i -ge 600 ] && { echo "REMUSDB-WARN: patroni not healthy after 600 s"; exit 1; }
		sleep 1
		i=$((i + 1))
	done
	echo "REMUSDB-PATRONI-READY $(up)"
) &
EOH
chmod 0755 "$ov/usr/bin/rdb-pg-start" "$ov/usr/bin/rdb-pg-start-plain" "$ov/usr/bin/rdb-patroni-start"
cp "$base/vmlinuz" "$cache/vmlinuz"
{ cat "$base/initrd.img"
  (cd "$ov" && find . -print0 | LC_ALL=C sort -z | xargs -0 touch -h -d @0 &&
	find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --reproducible 2>/dev/null) | gzip -9 -n
} > "$cache/initrd.img.tmp"
mv "$cache/initrd.img.tmp" "$cache/initrd.img"

# ---- the data image: the base tree, Python and Patroni ----
root=$work/root
mkdir -p "$root"
debugfs -R "rdump / $root" "$base/pgdata.img" >/dev/null 2>&1
[ -f "$root/data/PG_VERSION" ] || { echo "mkguest-pg-patroni: could not read $base/pgdata.img" >&2; exit 1; }
rm -rf "$root/lost+found"
pkg=$root/pkg
mkdir -p "$pkg/usr/bin" "$pkg/usr/lib/python3"
install -m 0755 "$pybin" "$pkg/usr/bin/$PY"
cp -a "$stdlib" "$pkg/usr/lib/"
# not needed to run Patroni: the test suite, the static library and
# build files, 2to3, pydoc's data, ensurepip, venv; the byte code is
# made again below (the host's is timestamp-checked: made at install)
rm -rf "$pkg/usr/lib/$PY/test" "$pkg/usr/lib/$PY"/config-* "$pkg/usr/lib/$PY/lib2to3" \
	"$pkg/usr/lib/$PY/pydoc_data" "$pkg/usr/lib/$PY/ensurepip" "$pkg/usr/lib/$PY/venv" \
	"$pkg/usr/lib/$PY/idlelib" "$pkg/usr/lib/$PY/tkinter" "$pkg/usr/lib/$PY/turtledemo" \
	"$pkg/usr/lib/$PY/lib-dynload"/_test*.so "$pkg/usr/lib/$PY/lib-dynload"/_xxtestfuzz*.so \
	"$pkg/usr/lib/$PY/lib-dynload"/_ctypes_test*.so "$pkg/usr/lib/$PY/lib-dynload"/_tkinter*.so \
	"$pkg/usr/lib/$PY/lib-dynload"/xx*.so
find "$pkg/usr/lib/$PY" -name __pycache__ -prune -exec rm -rf {} +
"$pybin" -m compileall -q -j 0 --invalidation-mode unchecked-hash "$pkg/usr/lib/$PY" >/dev/null
cp -a "$dist" "$pkg/usr/lib/python3/"
cp -a "$stage/root/usr/bin/patroni" "$stage/root/usr/bin/patronictl" "$pkg/usr/bin/"
xargs -a "$libs" -d '\n' cp -L -t "$pkg/lib/"
img=$cache/pgdata.img.tmp
truncate -s "${IMG_MB}M" "$img"
mkfs.ext4 -q -L pgdata -U 6d2d5b1e-52e4-4db1-9c1e-72656d757364 \
	-E lazy_itable_init=0,lazy_journal_init=0,root_owner=0:0 -d "$root" "$img"
mv "$img" "$cache/pgdata.img"
touch "$cache/.done" "$cache/.used"
bash "$here/cache-prune.sh" "$cache_root" guest-patroni 3
for f in vmlinuz initrd.img pgdata.img; do ln -sf "$cache/$f" "$out/$f"; done
echo "mkguest-pg-patroni: $out (built in $(( $(date +%s) - t0 )) s, ${vers[0]}, base $(basename "$base"), $(du -sh "$pkg/usr/lib/$PY" | cut -f1) stdlib, $(du -h --apparent-size "$cache/pgdata.img" | cut -f1) image, $(du -h "$cache/pgdata.img" | cut -f1) used)"
