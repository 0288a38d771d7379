#!/usr/bin/env bash
# Build the PostgreSQL test guest: the test guest's kernel and initramfs
# (with virtio_blk and ext4) plus an ext4 data image holding PostgreSQL 15
# from Debian's packages and a cluster made on this host with initdb
# (fsync on, full_page_writes on), with the ledger table and pgbench's
# tables already in it.
#
#   tools/mkguest-pg.sh [--out DIR] [--server POSTGRES] [--kmod KO --eventd BIN]
#                       [--scale N] [--layout one|split]
#
# --out DIR          default build/guest-pg
# --server POSTGRES  the postgres binary in place of Debian's: the build with
#                    RemusDB's commit-protection patch
#                    (dbms-patches/postgresql-15/build.sh)
# --kmod KO          remusdb.ko (make kmod), loaded at boot before PostgreSQL
#                    starts, with the failover event helper --eventd
#                    (build/helpers/remusdb-eventd) running: it finds the
#                    virtio-serial port if the VM has one
# --scale N          pgbench's scale for the bench database (default 1;
#                    benchmarks with many clients want N >= clients, or
#                    they measure the one pgbench_branches row's lock)
#
# Output: DIR/vmlinuz, DIR/initrd.img, DIR/pgdata.img (raw, sparse, 1 GiB;
# copy it with cp --sparse=always before giving it to a VM: the VM writes
# it).  Cached in ${REMUSDB_CACHE:-/var/cache/remusdb}/guest-pg-HASH,
# keyed by this script, mkguest.sh, the extra static binaries, the
# installed PostgreSQL version, the scale and the layout; a cached build
# is linked in at once.
#
# In the guest, /etc/remusdb.d/50-postgres.sh mounts /dev/vda on /pg,
# starts postgres as the postgres user (listening on *:5432, trust auth:
# a test guest) and prints REMUSDB-PG-READY once it accepts connections
# (split: /dev/vdb and /dev/vdc mounted first).  A second NIC, if the VM
# has one, gets remusdb.ip1=ADDR/PREFIX from the kernel command line
# (eth1; ARP answered only on the NIC holding the address, so each
# subnet's traffic keeps to its own NIC).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$here/../build/guest-pg
statics=()
server= kmod= eventd=
SCALE=1		# pgbench scale: 100000 accounts per unit
LAYOUT=one
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--static) statics+=("$2"); shift 2 ;;
	--server) server=$2; shift 2 ;;
	--kmod) kmod=$2; shift 2 ;;
	--eventd) eventd=$2; shift 2 ;;
	--scale) SCALE=$2; shift 2 ;;
	--layout) LAYOUT=$2; shift 2 ;;
	*) echo "mkguest-pg: unknown argument $1" >&2; exit 2 ;;
	esac
done

PGVER=15
PGBIN=/usr/lib/postgresql/$PGVER/bin
[ -x "$PGBIN/postgres" ] ||
	{ echo "mkguest-pg: PostgreSQL $PGVER is not installed (tools/setup-deps.sh)" >&2; exit 1; }
pgpkg=$(dpkg-query -W -f '${Version}' "postgresql-$PGVER")
[ -z "$server" ] || [ -x "$server" ] || { echo "mkguest-pg: --server $server is not an executable" >&2; exit 1; }
[ -z "$kmod" ] || { [ -f "$kmod" ] && [ -x "$eventd" ]; } ||
	{ echo "mkguest-pg: --kmod needs the module and --eventd the helper" >&2; exit 1; }
pguid=$(id -u postgres)
pggid=$(id -g postgres)
IMG_MB=1024
[[ "$SCALE" =~ ^[1-9][0-9]?$ ]] || { echo "mkguest-pg: --scale wants 1-99" >&2; exit 2; }
case $LAYOUT in one) imgs="pgdata.img" ;; split) imgs="pgdata.img pgwal.img pgts.img" ;;
*) echo "mkguest-pg: --layout wants one or split" >&2; exit 2 ;; esac

key=$( { cat "$0" "$here/mkguest.sh" "$here/guest-remusdb-payload.sh"; echo "$pgpkg $pguid $pggid $SCALE $LAYOUT"
	 for s in "${statics[@]}" $server $kmod $eventd; do sha256sum < "$s"; done; } |
       sha256sum | cut -c1-16)
cache=${REMUSDB_CACHE:-/var/cache/remusdb}/guest-pg-$key
mkdir -p "$out"
if [ -f "$cache/.done" ]; then
	touch "$cache/.used"
	for f in vmlinuz initrd.img $imgs; do ln -sf "$cache/$f" "$out/$f"; done
	echo "mkguest-pg: $out (cached $cache)"
	exit 0
fi
rm -rf "$cache"
mkdir -p "$cache"
t0=$(date +%s)

work=$(mktemp -d)
chmod 755 "$work"	# initdb and the host postgres run as postgres
pgpid=
cleanup() {
	if [ -n "$pgpid" ]; then
		[ -f "$work/root/data/postmaster.pid" ] &&
			kill -QUIT "$(head -n 1 "$work/root/data/postmaster.pid")" 2>/dev/null
		kill "$pgpid" 2>/dev/null
		sleep 0.5
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# ---- the initramfs: test guest + postgres hook ----
payload=$work/payload
mkdir -p "$payload/etc/remusdb.d"
[ -z "$kmod" ] || bash "$here/guest-remusdb-payload.sh" "$payload" "$kmod" "$eventd"
cat > "$payload/etc/passwd" <<EOP
root:x:0:0:root:/:/bin/sh
postgres:x:$pguid:$pggid:PostgreSQL:/pg:/bin/sh
EOP
cat > "$payload/etc/group" <<EOP
root:x:0:
postgres:x:$pggid:
EOP
cat > "$payload/etc/remusdb.d/10-eth1.sh" <<'EOH'
#!/bin/sh
# A second NIC (remusdb.ip1=ADDR/PREFIX on the kernel command line): its
# own subnet, ARP answered only on the NIC that holds the address.
ip1=$(sed -n 's/.*remusdb\.ip1=\([^ ]*\).*/\1/p' /proc/cmdline)
[ -n "$ip1" ] || exit 0
echo 1 > /proc/sys/net/ipv4/conf/all/arp_ignore
echo 2 > /proc/sys/net/ipv4/conf/all/arp_announce
i=0
while [ ! -e /sys/class/net/eth1 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
[ -e /sys/class/net/eth1 ] || { echo "REMUSDB-WARN: no eth1 after 5 s"; exit 0; }
ip link set eth1 up
ip addr add "$ip1" dev eth1
EOH
chmod +x "$payload/etc/remusdb.d/10-eth1.sh"
mounts="/dev/vda:/pg"
[ "$LAYOUT" = split ] && mounts="$mounts /dev/vdb:/pgwal /dev/vdc:/pgts"
cat > "$payload/etc/remusdb.d/50-postgres.sh" <<EOH
#!/bin/sh
# Mount the data disk(s) and start PostgreSQL (see tools/mkguest-pg.sh).
mkdir -p /dev/shm /lib/x86_64-linux-gnu /lib64 /usr/lib /usr/share
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
chmod 1777 /tmp
for m in $mounts; do
	dev=\${m%%:*} dir=\${m#*:}
	i=0
	while [ ! -b \$dev ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i+1)); done
	[ -b \$dev ] || { echo "REMUSDB-WARN: no \$dev"; exit 0; }
	mkdir -p \$dir
	mount -t ext4 -o noatime \$dev \$dir || { echo "REMUSDB-WARN: mount \$dev failed"; exit 0; }
done
for f in /pg/pkg/lib/*; do ln -sf "\$f" /lib/x86_64-linux-gnu/; done
ln -sf /pg/pkg/lib/ld-linux-x86-64.so.2 /lib64/ld-linux-x86-64.so.2
ln -sfn /pg/pkg/usr/lib/postgresql /usr/lib/postgresql
ln -sfn /pg/pkg/usr/share/postgresql /usr/share/postgresql
ln -sfn /pg/pkg/usr/share/zoneinfo /usr/share/zoneinfo
/usr/bin/rdb-pg-start
EOH
mkdir -p "$payload/usr/bin"
cat > "$payload/usr/bin/rdb-pg-start" <<EOH
#!/bin/sh
# Start PostgreSQL on the mounted disks; REMUSDB-PG-READY once it accepts
# connections (its postmaster.pid's status line says "ready").
su -s /bin/sh postgres -c "exec $PGBIN/postgres -D /pg/data" >/dev/ttyS0 2>&1 &
pg=\$!
i=0
until grep -q '^ready' /pg/data/postmaster.pid 2>/dev/null || [ \$i -ge 600 ] ||
	! kill -0 \$pg 2>/dev/null; do sleep 0.1; i=\$((i+1)); done
if grep -q '^ready' /pg/data/postmaster.pid 2>/dev/null; then
	echo REMUSDB-PG-READY
else
	echo "REMUSDB-WARN: postgres did not start"
fi
EOH
cat > "$payload/usr/bin/rdb-pg-crash-restart" <<'EOH'
#!/bin/sh
# PostgreSQL crashes and starts again from what its disks hold: every
# postgres process killed at once (no shutdown checkpoint), the page
# cache dropped (the next reads come from the disks, not from memory),
# then crash recovery replays the WAL from the disk.  A restored guest's
# memory may hide a replica that lacks writes; this does not.
kill -9 $(pidof postgres) 2>/dev/null
i=0
while pidof postgres >/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
pidof postgres >/dev/null && { echo "REMUSDB-WARN: postgres did not die"; exit 1; }
rm -f /pg/data/postmaster.pid
sync
echo 3 > /proc/sys/vm/drop_caches
exec /usr/bin/rdb-pg-start
EOH
chmod +x "$payload/usr/bin/rdb-pg-start" "$payload/usr/bin/rdb-pg-crash-restart"
chmod +x "$payload/etc/remusdb.d/50-postgres.sh"
args=(--out "$cache" --payload "$payload" --module virtio_blk --module ext4
      --module crc32c_generic)
for s in "${statics[@]}"; do args+=(--static "$s"); done
bash "$here/mkguest.sh" "${args[@]}" >&2

# ---- the data image: PostgreSQL's files, its libraries, a cluster ----
root=$work/root
mkdir -p "$root/pkg/lib" "$root/pkg/usr/lib/postgresql" "$root/pkg/usr/share/postgresql"
cp -a "/usr/lib/postgresql/$PGVER" "$root/pkg/usr/lib/postgresql/"
[ -n "$server" ] && install -m 0755 "$server" "$root/pkg/usr/lib/postgresql/$PGVER/bin/postgres"
# no JIT in the guest (jit = off): LLVM would add 100 MB for nothing
rm -rf "$root/pkg/usr/lib/postgresql/$PGVER/lib/bitcode" \
	"$root/pkg/usr/lib/postgresql/$PGVER/lib/llvmjit"*
cp -a "/usr/share/postgresql/$PGVER" "$root/pkg/usr/share/postgresql/"
mkdir -p "$root/pkg/usr/share/zoneinfo/Etc"
cp -L /usr/share/zoneinfo/UTC "$root/pkg/usr/share/zoneinfo/"
cp -L /usr/share/zoneinfo/Etc/UTC "$root/pkg/usr/share/zoneinfo/Etc/"
# Every shared library the binaries and modules need, from this host's
# Debian packages (the guest has no libc of its own: busybox is static).
# (ldd fails on the scripts among them: pg_ctlcluster-style wrappers)
find "$root/pkg/usr/lib/postgresql/$PGVER" -type f \( -perm -u+x -o -name '*.so' \) -print0 |
	{ xargs -0 ldd 2>/dev/null || true; } | awk '/=> \//{print $3} /^\t\/lib64/{print $1}' |
	sort -u | while read -r lib; do cp -L "$lib" "$root/pkg/lib/"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$root/pkg/lib/"
# the conversion procs dlopen'ed by name: gconv is not needed (C locale)

mkdir -p "$root/data"
chown postgres:postgres "$root/data"
chmod 700 "$root/data"
# split: the WAL and the tablespace in their own file trees (their own
# images), made here at these paths and pointed at the guest's mount
# points once the host server is stopped
walroot=$work/walroot tsroot=$work/tsroot
waldir=()
if [ "$LAYOUT" = split ]; then
	mkdir -p "$walroot/wal" "$tsroot/ts"
	chown postgres:postgres "$walroot/wal" "$tsroot/ts"
	chmod 700 "$walroot/wal" "$tsroot/ts"
	waldir=(--waldir "$walroot/wal")
fi
runuser -u postgres -- "$PGBIN/initdb" -D "$root/data" "${waldir[@]}" --auth=trust \
	--encoding=UTF8 --locale=C --no-instructions >/dev/null
cat >> "$root/data/postgresql.conf" <<EOC
# RemusDB test guest
listen_addresses = '*'
port = 5432
unix_socket_directories = '/tmp'
max_connections = 40
shared_buffers = 32MB
fsync = on
full_page_writes = on
synchronous_commit = on
wal_sync_method = fdatasync
jit = off
huge_pages = off
dynamic_shared_memory_type = posix
max_wal_size = 256MB
log_destination = 'stderr'
logging_collector = off
log_line_prefix = 'pg %m [%p] '
timezone = 'UTC'
log_timezone = 'UTC'
# RemusDB commit protection (a patched server; Debian's ignores it): the
# DBA's choice of writes | all | off, see dbms-patches/postgresql-15
remusdb.commit_protection = 'writes'
max_prepared_transactions = 8
EOC
cat > "$root/data/pg_hba.conf" <<EOC
local all all trust
host all all 0.0.0.0/0 trust
host all all ::/0 trust
EOC

# Load the schema with the same server on the host, then stop it cleanly.
sock=$work/sock
mkdir -p "$sock"
chown postgres "$sock"
runuser -u postgres -- "$PGBIN/postgres" -D "$root/data" -c listen_addresses= \
	-c unix_socket_directories="$sock" -c port=54329 >"$work/pg.log" 2>&1 &
pgpid=$!
for _ in $(seq 1 300); do
	runuser -u postgres -- "$PGBIN/pg_isready" -q -h "$sock" -p 54329 && break
	sleep 0.1
done
runuser -u postgres -- "$PGBIN/pg_isready" -q -h "$sock" -p 54329 ||
	{ cat "$work/pg.log" >&2; echo "mkguest-pg: host postgres did not start" >&2; exit 1; }
psql_() { runuser -u postgres -- "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p 54329 "$@"; }
if [ "$LAYOUT" = split ]; then
	psql_ -d postgres -c "CREATE TABLESPACE ts LOCATION '$tsroot/ts'" \
		-c "CREATE DATABASE ledger TABLESPACE ts" -c "CREATE DATABASE bench"
else
	psql_ -d postgres -c "CREATE DATABASE ledger" -c "CREATE DATABASE bench"
fi
psql_ -d ledger <<'EOS'
CREATE EXTENSION amcheck;
-- One row per inserted item; txn = client * 10^9 + transaction number,
-- item 0 .. k-1 within the transaction.
CREATE TABLE ledger (
	txn bigint NOT NULL,
	item int NOT NULL,
	client int NOT NULL,
	amount bigint NOT NULL,
	at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (txn, item)
);
EOS
psql_ -d bench -c "CREATE EXTENSION amcheck"
runuser -u postgres -- "$PGBIN/pgbench" -q -i -s "$SCALE" -h "$sock" -p 54329 bench >/dev/null 2>&1
psql_ -d postgres -c "CHECKPOINT"
# (runuser does not pass signals on: stop the postmaster itself, with a
# deadline; a fast shutdown still ends with a checkpoint)
kill -INT "$(head -n 1 "$root/data/postmaster.pid")"
for _ in $(seq 1 300); do kill -0 "$pgpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pgpid" 2>/dev/null && { echo "mkguest-pg: host postgres did not stop" >&2; exit 1; }
wait "$pgpid" || true
pgpid=

if [ "$LAYOUT" = split ]; then
	# the links the host server made, to where the guest mounts them
	ln -sfn /pgwal/wal "$root/data/pg_wal"
	n=0
	for l in "$root/data/pg_tblspc"/*; do ln -sfn /pgts/ts "$l"; n=$((n + 1)); done
	[ "$n" = 1 ] || { echo "mkguest-pg: $n tablespaces, not 1" >&2; exit 1; }
fi

# mkimage NAME MB LABEL UUID TREE: an ext4 image of TREE, its tables and
# journal initialised (no lazy init writing in the guest)
mkimage() {
	local img=$cache/$1.tmp
	rm -f "$img"
	truncate -s "$2M" "$img"
	mkfs.ext4 -q -L "$3" -U "$4" \
		-E lazy_itable_init=0,lazy_journal_init=0,root_owner=0:0 \
		-d "$5" "$img"
	mv "$img" "$cache/$1"
}
mkimage pgdata.img "$IMG_MB" pgdata 6d2d5b1e-52e4-4db1-9c1e-72656d757364 "$root"
if [ "$LAYOUT" = split ]; then
	mkimage pgwal.img 512 pgwal 6d2d5b1e-52e4-4db1-9c1e-72656d757365 "$walroot"
	mkimage pgts.img 256 pgts 6d2d5b1e-52e4-4db1-9c1e-72656d757366 "$tsroot"
fi
touch "$cache/.done" "$cache/.used"
# older images (other commits' keys) would pile up: keep the newest few
# (two layouts and the benchmarks' scales, for two checkouts)
bash "$here/cache-prune.sh" "$(dirname "$cache")" guest-pg 6
for f in vmlinuz initrd.img $imgs; do ln -sf "$cache/$f" "$out/$f"; done
echo "mkguest-pg: $out (built in $(( $(date +%s) - t0 )) s, PostgreSQL $pgpkg${server:+ with $server}${kmod:+, remusdb.ko}, $(du -h --apparent-size "$cache/pgdata.img" | cut -f1) image, $(du -h "$cache/pgdata.img" | cut -f1) used)"
