#!/usr/bin/env bash
# Writes RemusDB's guest half into a test guest's payload directory (for
# tools/mkguest.sh --payload): remusdb.ko and its failover event helper
# under /opt/remusdb, and the boot hook /etc/remusdb.d/40-remusdb.sh that
# loads the module and starts the helper before any DBMS hook (50-*)
# runs.  The helper finds the virtio-serial port org.remusdb.0 if the VM
# has one.  The hook prints REMUSDB-KMOD-READY.
#
#   tools/guest-remusdb-payload.sh DIR KO EVENTD
set -euo pipefail
[ $# = 3 ] || { echo "usage: guest-remusdb-payload.sh DIR KO EVENTD" >&2; exit 2; }
dir=$1 ko=$2 eventd=$3
[ -f "$ko" ] || { echo "guest-remusdb-payload: $ko missing (make kmod)" >&2; exit 1; }
[ -x "$eventd" ] || { echo "guest-remusdb-payload: $eventd missing (make all)" >&2; exit 1; }
mkdir -p "$dir/opt/remusdb" "$dir/etc/remusdb.d"
# mkguest.sh copies the payload's root onto the guest's: a 0700 directory
# (mktemp -d) would shut every user but root out of the whole guest
chmod 0755 "$dir" "$dir/opt" "$dir/opt/remusdb" "$dir/etc" "$dir/etc/remusdb.d"
install -m 0644 "$ko" "$dir/opt/remusdb/remusdb.ko"
install -m 0755 "$eventd" "$dir/opt/remusdb/remusdb-eventd"
cat > "$dir/etc/remusdb.d/40-remusdb.sh" <<'EOH'
#!/bin/sh
# RemusDB's guest half: the commit-protection module and the failover
# event helper, before the DBMS starts (tools/guest-remusdb-payload.sh).
if insmod /opt/remusdb/remusdb.ko; then
	/opt/remusdb/remusdb-eventd >/dev/ttyS0 2>&1 &
	echo REMUSDB-KMOD-READY
else
	echo "REMUSDB-WARN: insmod remusdb.ko failed"
fi
EOH
chmod +x "$dir/etc/remusdb.d/40-remusdb.sh"
