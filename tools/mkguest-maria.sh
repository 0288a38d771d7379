#!/usr/bin/env bash
# Build the MariaDB test guest: the test guest's kernel and initramfs (with
# virtio_blk and ext4) plus an ext4 data image holding Debian's MariaDB
# 10.11 packages with the RemusDB-patched mariadbd in place of Debian's,
# the shared libraries they need, and a data directory made on this host
# (InnoDB, innodb_flush_log_at_trx_commit=1, no binary log) with the
# ledger table and sysbench's oltp tables already in it.
#
#   tools/mkguest-maria.sh [--out DIR] [--server MARIADBD] [--payload DIR]...
#                          [--static BIN]...
#   tools/mkguest-maria.sh --print-stage
#
# --server    the mariadbd to install (default: the cached build of
#             dbms-patches/mariadb-10.11/build.sh, built if missing)
# --payload   more files for the initramfs (passed to mkguest.sh), e.g. a
#             hook etc/remusdb.d/10-remusdb.sh loading remusdb.ko
# --print-stage  only unpack Debian's packages (cached) and print the
#             directory holding their usr/ tree (for tests/dbms/maria-host.sh)
#
# Output: DIR/vmlinuz, DIR/initrd.img, DIR/mariadata.img (raw, sparse,
# 1 GiB; copy it with cp --sparse=always before giving it to a VM: the VM
# writes it).  Cached in ${REMUSDB_CACHE:-/var/cache/remusdb}/guest-maria-HASH,
# keyed by this script, mkguest.sh, the server binary, the payloads and
# statics and the mysql uid/gid; a cached build is linked in at once.
#
# In the guest, /etc/remusdb.d/50-mariadb.sh mounts /dev/vda on /maria,
# links Debian's paths (/usr/sbin/mariadbd, /usr/share/mysql,
# /usr/lib/mysql) to it, starts mariadbd with /etc/mysql/my.cnf (port 3306
# on 0.0.0.0, root from any host without a password: a test guest) and
# prints REMUSDB-MARIADB-READY once root can connect over TCP.  With
# remusdb.binlog=SERVER_ID on the kernel command line it starts mariadbd
# as a replication node (binary log, row format, sync_binlog=1, relay
# log, that server_id).
set -euo pipefail

VERSION=1:10.11.18-0+deb12u1	# the packages dbms-patches/mariadb-10.11 patches
PKGS=(mariadb-server-core mariadb-client-core mariadb-client libmariadb3)
IMG_MB=1024
SB_TABLES=4 SB_ROWS=10000	# sysbench oltp_read_write: 4 x 10000 rows

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
out=$repo/build/guest-maria
server= print_stage=
payloads=() statics=()
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift 2 ;;
	--server) server=$2; shift 2 ;;
	--payload) payloads+=("$2"); shift 2 ;;
	--static) statics+=("$2"); shift 2 ;;
	--print-stage) print_stage=1; shift ;;
	*) echo "mkguest-maria: unknown argument $1" >&2; exit 2 ;;
	esac
done
cache_root=${REMUSDB_CACHE:-/var/cache/remusdb}

# ---- Debian's binary packages, unpacked once (never installed here) ----
stage=$cache_root/dbms/mariadb-${VERSION#*:}-stage
if [ ! -f "$stage/.done" ]; then
	rm -rf "$stage"
	mkdir -p "$stage/debs" "$stage/root"
	(cd "$stage/debs" && apt-get download -q "${PKGS[@]/%/=$VERSION}" >/dev/null 2>&1) ||
		{ echo "mkguest-maria: cannot download ${PKGS[*]} $VERSION (apt-get update?)" >&2; exit 1; }
	for d in "$stage"/debs/*.deb; do dpkg-deb -x "$d" "$stage/root"; done
	touch "$stage/.done"
fi
if [ -n "$print_stage" ]; then
	echo "$stage/root"
	exit 0
fi

if [ -z "$server" ]; then
	bash "$repo/dbms-patches/mariadb-10.11/build.sh" >&2
	server=$(bash "$repo/dbms-patches/mariadb-10.11/build.sh" --print)
fi
[ -x "$server" ] || { echo "mkguest-maria: $server is not executable" >&2; exit 1; }
command -v sysbench >/dev/null ||
	{ echo "mkguest-maria: sysbench is not installed (apt-get install sysbench)" >&2; exit 1; }
# Debian's mariadb-server makes this user; the data directory belongs to it
if ! id mysql >/dev/null 2>&1; then
	[ "$(id -u)" = 0 ] || { echo "mkguest-maria: no mysql user (run as root)" >&2; exit 1; }
	useradd --system --user-group --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin --comment "MariaDB Server" mysql
fi
myuid=$(id -u mysql)
mygid=$(id -g mysql)

key=$( { cat "$0" "$here/mkguest.sh"; echo "$VERSION $myuid $mygid $SB_TABLES $SB_ROWS"
	 sha256sum < "$server"
	 for p in "${payloads[@]}"; do (cd "$p" && find . -type f -print0 | LC_ALL=C sort -z |
		 xargs -0r sha256sum); done
	 for s in "${statics[@]}"; do sha256sum < "$s"; done; } |
       sha256sum | cut -c1-16)
cache=$cache_root/guest-maria-$key
mkdir -p "$out"
if [ -f "$cache/.done" ]; then
	touch "$cache/.used"
	for f in vmlinuz initrd.img mariadata.img; do ln -sf "$cache/$f" "$out/$f"; done
	echo "mkguest-maria: $out (cached $cache)"
	exit 0
fi
rm -rf "$cache"
mkdir -p "$cache"
t0=$(date +%s)

work=$(mktemp -d)
chmod 755 "$work"	# the host mariadbd runs as mysql
mypid=
cleanup() {
	if [ -n "$mypid" ]; then
		kill -KILL "$mypid" 2>/dev/null
		wait "$mypid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# ---- the initramfs: test guest + MariaDB config and hook ----
payload=$work/payload
mkdir -p "$payload/etc/remusdb.d" "$payload/etc/mysql"
cat > "$payload/etc/passwd" <<EOP
root:x:0:0:root:/:/bin/sh
mysql:x:$myuid:$mygid:MariaDB Server:/nonexistent:/bin/false
EOP
cat > "$payload/etc/group" <<EOP
root:x:0:
mysql:x:$mygid:
EOP
cat > "$payload/etc/mysql/my.cnf" <<'EOC'
# RemusDB MariaDB test guest (tools/mkguest-maria.sh)
[mariadbd]
user = mysql
datadir = /maria/data
socket = /run/mysqld/mysqld.sock
pid-file = /run/mysqld/mysqld.pid
bind-address = 0.0.0.0
port = 3306
skip-name-resolve
skip-external-locking
max_connections = 64
character-set-server = utf8mb4
collation-server = utf8mb4_general_ci
default-storage-engine = InnoDB
innodb_buffer_pool_size = 64M
innodb_log_file_size = 32M
innodb_flush_log_at_trx_commit = 1
innodb_doublewrite = 1
# no binary log (sync_binlog does not apply)
skip-log-bin
key_buffer_size = 4M
table_open_cache = 200
# RemusDB: commit acknowledgements of transactions that wrote wait for
# their checkpoint (off | writes | all)
remusdb_commit_protection = writes

[client]
socket = /run/mysqld/mysqld.sock
EOC
cat > "$payload/etc/remusdb.d/50-mariadb.sh" <<'EOH'
#!/bin/sh
# Mount the data disk and start MariaDB (see tools/mkguest-maria.sh).
# remusdb.ko and remusdb-eventd belong in a hook that sorts before this one
# (e.g. 10-remusdb.sh): mariadbd protects its client sockets only while the
# module is loaded (it logs one warning otherwise) and its failover handler
# looks for /dev/remusdb every 5 s until it appears.
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
[ -b /dev/vda ] || { echo "REMUSDB-WARN: no /dev/vda"; exit 0; }
mkdir -p /maria /dev/shm /lib/x86_64-linux-gnu /lib64 /usr/sbin /usr/lib /usr/share /run/mysqld
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
chmod 1777 /tmp
mount -t ext4 -o noatime /dev/vda /maria || { echo "REMUSDB-WARN: mount /dev/vda failed"; exit 0; }
for f in /maria/pkg/lib/*; do ln -sf "$f" /lib/x86_64-linux-gnu/; done
ln -sf /maria/pkg/lib/ld-linux-x86-64.so.2 /lib64/ld-linux-x86-64.so.2
# Debian's paths: the binary is a drop-in for Debian's
ln -sf /maria/pkg/usr/sbin/mariadbd /usr/sbin/mariadbd
for f in /maria/pkg/usr/bin/*; do ln -sf "$f" /usr/bin/; done
ln -sfn /maria/pkg/usr/share/mysql /usr/share/mysql
ln -sfn /maria/pkg/usr/lib/mysql /usr/lib/mysql
chown mysql:mysql /run/mysqld
# remusdb.binlog=SERVER_ID (kernel command line): a replication node, for
# the semi-synchronous peer of the benchmarks (tests/lib/peer-maria.sh):
# the binary log (row format, synced at every commit), a relay log, both
# named here (their default names come from the host name, "(none)" here)
set --
sid=$(sed -n 's/.*remusdb\.binlog=\([0-9]*\).*/\1/p' /proc/cmdline)
[ -n "$sid" ] && set -- --log-bin=rdb-bin --relay-log=rdb-relay \
	--binlog-format=ROW --sync-binlog=1 --server-id="$sid"
/usr/sbin/mariadbd "$@" >/dev/ttyS0 2>&1 &
md=$!
# Ready: root runs a query over TCP (60 s: TCG is slow)
ready() {
	/usr/bin/mariadb --no-defaults --protocol=tcp -h 127.0.0.1 -P 3306 -u root \
		--connect-timeout=2 -e "SELECT 1" >/dev/null 2>&1
}
i=0
until ready || [ $i -ge 120 ] || ! kill -0 $md 2>/dev/null; do
	sleep 0.5; i=$((i+1))
done
if ready; then
	echo REMUSDB-MARIADB-READY
else
	echo "REMUSDB-WARN: mariadbd did not start"
fi
EOH
chmod +x "$payload/etc/remusdb.d/50-mariadb.sh"
args=(--out "$cache" --payload "$payload" --module virtio_blk --module ext4
      --module crc32c_generic)
for p in "${payloads[@]}"; do args+=(--payload "$p"); done
for s in "${statics[@]}"; do args+=(--static "$s"); done
bash "$here/mkguest.sh" "${args[@]}" >&2

# ---- the data image: MariaDB's files, its libraries, a data directory ----
root=$work/root
pkg=$root/pkg
mkdir -p "$pkg/lib" "$pkg/usr/sbin" "$pkg/usr/bin" "$pkg/usr/lib/mysql/plugin" "$pkg/usr/share"
install -m 0755 "$server" "$pkg/usr/sbin/mariadbd"
for b in mariadb mariadb-admin my_print_defaults mariadb-install-db resolveip; do
	cp -a "$stage/root/usr/bin/$b" "$pkg/usr/bin/"
done
cp -a "$stage/root/usr/share/mysql" "$pkg/usr/share/"
# the libraries come from this host's Debian 12: the guest has no libc of
# its own (busybox is static); libmariadb from the staged package
cp -a "$stage/root/usr/lib/x86_64-linux-gnu/libmariadb.so.3" "$pkg/lib/"
for b in "$pkg/usr/sbin/mariadbd" "$pkg/usr/bin/mariadb" "$pkg/usr/bin/mariadb-admin" \
	 "$pkg/usr/bin/my_print_defaults"; do
	LD_LIBRARY_PATH=$pkg/lib ldd "$b"
done | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
	case $lib in "$pkg"/*) ;; *) cp -L "$lib" "$pkg/lib/" ;; esac
done
cp -L /lib64/ld-linux-x86-64.so.2 "$pkg/lib/"

# The data directory, made by the staged packages' mariadb-install-db with
# the patched server, as the mysql user
mkdir -p "$root/data"
chown mysql:mysql "$root/data"
chmod 750 "$root/data"
"$pkg/usr/bin/mariadb-install-db" --no-defaults --basedir="$pkg/usr" \
	--datadir="$root/data" --user=mysql --auth-root-authentication-method=normal \
	--skip-test-db --skip-name-resolve >"$work/install-db.log" 2>&1 ||
	{ cat "$work/install-db.log" >&2; echo "mkguest-maria: mariadb-install-db failed" >&2; exit 1; }

# Load the schemas with the same server on the host (Unix socket only),
# then stop it cleanly.
sock=$work/run/mysqld.sock
mkdir -p "$work/run"
chown mysql:mysql "$work/run"
"$pkg/usr/sbin/mariadbd" --defaults-file="$payload/etc/mysql/my.cnf" \
	--basedir="$pkg/usr" --datadir="$root/data" --socket="$sock" \
	--pid-file="$work/run/mysqld.pid" --skip-networking >"$work/mariadbd.log" 2>&1 &
mypid=$!
my() { LD_LIBRARY_PATH=$pkg/lib "$pkg/usr/bin/mariadb" --no-defaults -S "$sock" -u root "$@"; }
for _ in $(seq 1 300); do
	my -e "SELECT 1" >/dev/null 2>&1 && break
	kill -0 "$mypid" 2>/dev/null || break
	sleep 0.1
done
my -e "SELECT 1" >/dev/null 2>&1 ||
	{ cat "$work/mariadbd.log" >&2; echo "mkguest-maria: host mariadbd did not start" >&2; exit 1; }
my <<'EOS'
-- A test guest: root from anywhere, no password; nothing named after
-- this build host (mariadb-install-db adds root@<hostname>).
DELETE FROM mysql.global_priv WHERE Host NOT IN ('localhost', '%');
DELETE FROM mysql.proxies_priv WHERE Host NOT IN ('localhost', '%');
FLUSH PRIVILEGES;
CREATE USER 'root'@'%';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
CREATE DATABASE ledger;
CREATE DATABASE sbtest;
-- One row per inserted item; txn = client * 10^9 + transaction number,
-- item 0 .. k-1 within the transaction.
CREATE TABLE ledger.ledger (
	txn BIGINT NOT NULL,
	item INT NOT NULL,
	client INT NOT NULL,
	amount BIGINT NOT NULL,
	at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
	PRIMARY KEY (txn, item)
) ENGINE=InnoDB;
EOS
sysbench oltp_read_write --db-driver=mysql --mysql-socket="$sock" --mysql-user=root \
	--mysql-db=sbtest --tables=$SB_TABLES --table-size=$SB_ROWS prepare >"$work/sysbench.log" 2>&1 ||
	{ cat "$work/sysbench.log" >&2; echo "mkguest-maria: sysbench prepare failed" >&2; exit 1; }
[ "$(my -N -e "SELECT COUNT(*) FROM sbtest.sbtest$SB_TABLES")" = "$SB_ROWS" ] ||
	{ echo "mkguest-maria: sbtest.sbtest$SB_TABLES is not $SB_ROWS rows" >&2; exit 1; }
# a slow shutdown: purge and change buffer merged, nothing left to do at boot
my -e "SET GLOBAL innodb_fast_shutdown = 0; SHUTDOWN"
for _ in $(seq 1 600); do kill -0 "$mypid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$mypid" 2>/dev/null && { echo "mkguest-maria: host mariadbd did not stop" >&2; exit 1; }
wait "$mypid" || { cat "$work/mariadbd.log" >&2; echo "mkguest-maria: host mariadbd failed" >&2; exit 1; }
mypid=
grep -q "Shutdown complete" "$work/mariadbd.log" ||
	{ cat "$work/mariadbd.log" >&2; echo "mkguest-maria: no clean shutdown" >&2; exit 1; }
chown -R mysql:mysql "$root/data"	# mysql_upgrade_info is made as root

img=$cache/mariadata.img.tmp
rm -f "$img"
truncate -s "${IMG_MB}M" "$img"
# Initialised tables and journal: no lazy init writing in the guest.
mkfs.ext4 -q -L mariadata -U 6d2d5b1e-52e4-4db1-9c1e-6d6172696164 \
	-E lazy_itable_init=0,lazy_journal_init=0,root_owner=0:0 \
	-d "$root" "$img"
mv "$img" "$cache/mariadata.img"
touch "$cache/.done" "$cache/.used"
# older images (other commits' keys) would pile up: keep the newest few
bash "$here/cache-prune.sh" "$(dirname "$cache")" guest-maria
for f in vmlinuz initrd.img mariadata.img; do ln -sf "$cache/$f" "$out/$f"; done
echo "mkguest-maria: $out (built in $(( $(date +%s) - t0 )) s, MariaDB $VERSION + $(basename "$(dirname "$server")"), $(du -h --apparent-size "$cache/mariadata.img" | cut -f1) image, $(du -h "$cache/mariadata.img" | cut -f1) used)"
