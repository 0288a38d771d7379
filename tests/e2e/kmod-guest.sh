#!/usr/bin/env bash
# remusdb.ko in a real guest under the test QEMU, protected by remusdbd:
# the socket option on IPv4/IPv6 TCP and its refusals, marking in every
# network namespace (a fresh one over loopback), marks on exactly
# the protected connection's packets (counted by remusdbd, which strips
# them: a capture at the peer sees none), the failover event through the
# virtio-serial port — first written by hand into the primary's port,
# then sent by the backup's remusdbd after a real power pull — and an
# rmmod that leaves nothing behind.  Steps run in the guest
# (guest-kmod/tests/kmodtest.sh); the host checks the other side.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-km$$}
trap 'cluster_down "$run"; [ -n "${sink:-}" ] && kill $sink 2>/dev/null' EXIT
rdb_require_root
ko=$RDB_ROOT/build/kmod/remusdb.ko
[ -f "$ko" ] || rdb_fail "$ko missing (make kmod)"
for b in kmodtest remusdb-eventd marksniff; do
	[ -x "$RDB_HELPERS/$b" ] || rdb_fail "$RDB_HELPERS/$b missing (make all)"
done
payload=$(mktemp -d)
mkdir -p "$payload/opt/remusdb"
cp "$ko" "$RDB_HELPERS/kmodtest" "$RDB_HELPERS/remusdb-eventd" \
	"$RDB_ROOT/guest-kmod/tests/kmodtest.sh" "$payload/opt/remusdb/"
bash "$RDB_ROOT/tools/mkguest.sh" --out "$RDB_ROOT/build/guest-kmod" --payload "$payload" >&2 ||
	rdb_fail "guest build failed"
rm -rf "$payload"

export CL_GUEST=$RDB_ROOT/build/guest-kmod CL_EVENT_PORT=1
export CL_GUEST_RUN="/bin/sh /opt/remusdb/kmodtest.sh" CL_GUEST_READY="KMODTEST start"
cluster_hosts_up "$run" || rdb_fail "hosts setup failed"
con=$CL_DIR/pri/console.log
clix() { ip netns exec "$(netns_name "$run" cli)" "$@"; }
# the peer: accepts connections, reads each to the end
clix sysctl -qw net.ipv6.conf.eth0.accept_dad=0
clix ip -6 addr add fd77::10/64 dev eth0
clix python3 -c '
import socket, threading
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", 7100)); s.listen(8)
def serve(c):
    while c.recv(4096): pass
    c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
' &
sink=$!
disown $sink
clix "$RDB_HELPERS/marksniff" eth0 60 "$CL_GUEST_IP" > "$CL_DIR/sniff.json" &
sniff=$!
cluster_vm_up 25 || rdb_fail "protected VM did not come up (logs in $CL_DIR)"
marked() { cl_ctl pri status "$CL_VM" --json | jq .vms[0].marked_frames; }

wait_for 60 "protected phase" grep -q "KMODTEST phase protected-done" "$con" ||
	rdb_fail "no protected phase ($(grep KMODTEST "$con" | tail -3))"
sleep 1
m1=$(marked)
wait_for 60 "plain phase" grep -q "KMODTEST phase plain-done" "$con" ||
	rdb_fail "no plain phase"
sleep 1
m2=$(marked)
echo "remusdbd: $m1 marked frames after the protected connection, $m2 after the plain one"
[ "$m1" -ge 20 ] || rdb_fail "only $m1 marked frames for 2 x 10 protected writes"
[ "$m2" = "$m1" ] || rdb_fail "the plain connection's frames were marked ($m1 -> $m2)"

wait_for 30 "waitevent" grep -q "KMODTEST waitevent waiting" "$con" || rdb_fail "no waitevent"
# an event asking for aborts; the guest's helper answers on the port
timeout 12 python3 - "$CL_DIR/pri/$CL_VM.event" > "$CL_DIR/event-answer.txt" <<'EOP' || rdb_fail "cannot write the event port"
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"REMUSDB-FAILOVER epoch=77 generation=3 flags=1\n")
s.settimeout(10); got = b""
try:
    while b"\n" not in got:
        b = s.recv(256)
        if not b: break
        got += b
except socket.timeout: pass
print(got.decode(errors="replace").strip()); s.close()
EOP
wait_for 30 "event delivered" grep -q "KMODTEST waitevent ok: epoch=77 generation=3 flags=1 abort_gen=1" "$con" ||
	rdb_fail "the event did not reach the waiting process, or the abort generation did not move ($(grep -a 'KMODTEST\|eventd' "$con" | tail -3))"
grep -qx "REMUSDB-FAILOVER-ACK generation=3" "$CL_DIR/event-answer.txt" ||
	rdb_fail "the guest's helper did not answer the event (got: $(cat "$CL_DIR/event-answer.txt"))"
wait_for 60 "ready for failover" grep -q "KMODTEST ready-for-failover" "$con" ||
	rdb_fail "guest steps did not finish ($(grep KMODTEST "$con" | tail -3))"
wait_for 20 "second waitevent" bash -c "[ \$(grep -c 'KMODTEST waitevent waiting' $con) -ge 2 ]" ||
	rdb_fail "no second waitevent"
grep -a "KMODTEST" "$con"
if grep -aq "KMODTEST.*FAIL" "$con"; then
	rdb_fail "a step failed in the guest"
fi
for step in "insmod ok" "sockopt ok" "loopback ok" \
	    "send ok: 10 writes, protected=1, IPv4" "send ok: 10 writes, protected=1, IPv6" \
	    "send ok: 10 writes, protected=0, IPv4" "send ok: 10 writes, protected=0, IPv6" \
	    "rmmod ok" "absent ok" "perm ok" "badevent ok"; do
	grep -aq "KMODTEST $step" "$con" || rdb_fail "missing step: $step"
done
# exactly the packets the module marked reached remusdbd marked
g0=$(sed -n 's/.*KMODTEST sysfs-before-sends packets_marked=\([0-9]*\).*/\1/p' "$con" | head -n 1)
g1=$(sed -n 's/.*KMODTEST sysfs packets_marked=\([0-9]*\).*/\1/p' "$con" | head -n 1)
[ $((g1 - g0)) = "$m1" ] || rdb_fail "the module marked $((g1 - g0)) packets on the wire, remusdbd saw $m1"
wait_pid 70 "$sniff"
cat "$CL_DIR/sniff.json"
[ "$(jq .marked "$CL_DIR/sniff.json")" = 0 ] || rdb_fail "the peer received marked packets"
[ "$(jq .from_src "$CL_DIR/sniff.json")" -ge 20 ] || rdb_fail "the capture saw too little of the guest"
[ "$(grep -c 'KMODTEST loopback ok' "$con")" = 2 ] ||
	rdb_fail "marking not seen in both network namespaces"

# A real failover: the backup's remusdbd tells the restored guest.
sleep 1
cluster_pull_power "$run"
cl_ctl bak wait "$CL_VM" failed-over --timeout 30 || rdb_fail "no failover"
epoch=$(cl_ctl bak status "$CL_VM" --json | jq .vms[0].committed_epoch)
# the event names the protection (its random generation, as the primary
# logged it in hex), so a guest tells this failover from any other
gen=$(sed -n 's/.*protecting: .*generation \([0-9a-f]\{16\}\).*/\1/p' "$CL_DIR/pri/remusdbd.log" | tail -n 1)
[ -n "$gen" ] || rdb_fail "the primary logged no protection generation"
gen=$(printf '%u' "0x$gen")
bcon=$CL_DIR/bak/state/$CL_VM/console.log
wait_for 30 "event in the restored guest" grep -aq "KMODTEST waitevent ok: epoch=$epoch generation=$gen flags=0 abort_gen=0" "$bcon" ||
	rdb_fail "restored guest got no failover event for epoch $epoch ($(grep -a 'KMODTEST\|eventd' "$bcon" | tail -3); $(grep 'failover event' "$CL_DIR/bak/remusdbd.log"))"
grep -q "failover event sent to the guest: epoch $epoch, generation $gen" "$CL_DIR/bak/remusdbd.log" ||
	rdb_fail "no log line for the event"
echo "PASS: remusdb.ko: option, refusals, marks on the protected connection only ($m1 frames, stripped before the peer), event by hand (abort generation moved, the helper answered) and after a real plain-Remus failover (epoch $epoch, no abort), clean rmmod"
