#!/bin/sh
# remusdb.ko in the test guest (run by tests/e2e/kmod-guest.sh through
# remusdb.run).  Every step prints "KMODTEST <step> ok ..." or "... FAIL".
R=/opt/remusdb
HOST=10.77.0.10
say() { echo "KMODTEST $*"; }
lsmod_has() { grep -q "^remusdb " /proc/modules; }

say start
echo 0 > /proc/sys/net/ipv6/conf/eth0/accept_dad
ip -6 addr add fd77::100/64 dev eth0 || say "ipv6 address FAIL"
insmod $R/remusdb.ko && lsmod_has && say insmod ok || say "insmod FAIL"
$R/kmodtest sockopt
$R/kmodtest badevent
# hooks in every network namespace: a fresh one, over its loopback
unshare -n sh -c "ip link set lo up && $R/kmodtest loopback 5"
$R/kmodtest loopback 5
$R/remusdb-eventd &
ev=$!
say "sysfs-before-sends packets_marked=$(cat /sys/kernel/remusdb/packets_marked)"
# protected, then plain: the host counts marked frames between the two
$R/kmodtest send $HOST 7100 1 10
$R/kmodtest send fd77::10 7100 1 10
say "phase protected-done"
sleep 3
$R/kmodtest send $HOST 7100 0 10
$R/kmodtest send fd77::10 7100 0 10
say "phase plain-done"
say "sysfs packets_marked=$(cat /sys/kernel/remusdb/packets_marked) protected_sockets=$(cat /sys/kernel/remusdb/protected_sockets) state=$(cat /sys/kernel/remusdb/state)"
# the host writes an event into the port (the primary's chardev)
$R/kmodtest waitevent 60
say "sysfs failovers_seen=$(cat /sys/kernel/remusdb/failovers_seen) last_epoch=$(cat /sys/kernel/remusdb/last_epoch) last_generation=$(cat /sys/kernel/remusdb/last_generation) abort_generation=$(cat /sys/kernel/remusdb/abort_generation)"
kill $ev
wait $ev 2>/dev/null
# unload leaves nothing; the permission rule with protect_gid
rmmod remusdb && ! lsmod_has && say rmmod ok || say "rmmod FAIL"
$R/kmodtest absent
insmod $R/remusdb.ko protect_gid=4242 && $R/kmodtest perm 4242
rmmod remusdb || say "rmmod FAIL (protect_gid)"
# armed for a real failover: the backup's remusdbd sends the event
insmod $R/remusdb.ko && say "insmod ok (failover)"
$R/remusdb-eventd &
say ready-for-failover
$R/kmodtest waitevent 300
say done
