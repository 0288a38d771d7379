#!/usr/bin/env bash
# The replication link is authenticated (issue 10): only a primary that
# holds the backup's link key may write a VM's state there.
#   0. a daemon with no key and no link_security = insecure does not start;
#   1. a primary that speaks plaintext (link_security = insecure) sends a
#      valid HELLO: the backup refuses it, both logs say why;
#   2. a primary with another key: refused on both sides as an
#      authentication failure, naming both key ids; the VM's state on the
#      primary says why;
#   after 1 and 2 the backup holds nothing of the VM (no VM, no state dir);
#   3. the right key: protected, over TLS;
#   4. both hosts explicitly insecure: protected in plaintext (the mode
#      still works when asked for).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-la$$}
trap 'cluster_down "$run"' EXIT
rdb_require_root
command -v openssl >/dev/null || rdb_skip "openssl (make setup)"

# restart SIDE [link_security [key]]: that host's daemon with a new config
restart() {
	local side=$1 pid
	pid=$(cat "$CL_DIR/$side/remusdbd.pid")
	kill -TERM "$pid"
	wait_for 10 "$side remusdbd to exit" bash -c "! kill -0 $pid" || return 1
	if [ "$side" = pri ]; then
		cl_daemon_conf pri 10.78.0.1:7788 "${2:-psk}" "${3:-}"
	else
		cl_daemon_conf bak 10.78.0.2:7788 "${2:-psk}" "${3:-}"
	fi
	cl_start_daemon "$side"
}

# The backup must hold nothing of a VM whose primary it refused.
nothing_on_backup() {
	local n
	[ ! -e "$CL_DIR/bak/state/$CL_VM" ] ||
		rdb_fail "$1: the backup created $CL_DIR/bak/state/$CL_VM"
	n=$(cl_ctl bak status --json | jq '.vms | length')
	[ "$n" = 0 ] || rdb_fail "$1: the backup knows $n VM(s)"
}

cluster_hosts_up "$run" || rdb_fail "hosts setup failed (logs in $CL_DIR)"

# ---- 0: no key, no start ----
if ip netns exec "$(netns_name "$run" pri)" "$RDB_BUILD/remusdbd" \
	-c "$CL_DIR/pri/remusdbd.conf" -o link_psk_file="$CL_DIR/missing.psk" \
	-o control_socket="$CL_DIR/nokey.sock" >"$CL_DIR/nokey.log" 2>&1; then
	rdb_fail "remusdbd started without its link key"
fi
grep -q "link_psk_file $CL_DIR/missing.psk: No such file.*link_security = insecure" \
	"$CL_DIR/nokey.log" || rdb_fail "no clear message without a key: $(cat "$CL_DIR/nokey.log")"
echo "0: without a key remusdbd does not start: $(head -c 160 "$CL_DIR/nokey.log")..."

# ---- 1: a plaintext primary, a backup that requires the key ----
restart pri insecure || rdb_fail "primary restart"
if CL_ATTACH=1 cluster_vm_up 25 2>"$CL_DIR/protect1.err"; then
	rdb_fail "protected over plaintext by a backup that requires the key"
fi
grep -q "refused a connection from 10.78.0.1:[0-9]*: authentication failed: the primary speaks the replication protocol in plaintext" \
	"$CL_DIR/bak/remusdbd.log" || rdb_fail "1: the backup's log does not say why"
grep -q "protect failed: backup 10.78.0.2:7788 refused $CL_VM: this backup requires TLS" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "1: the primary's log does not say why"
nothing_on_backup 1
echo "1: plaintext HELLO refused: $(grep -o 'refused a connection.*' "$CL_DIR/bak/remusdbd.log" | head -1)"

# ---- 2: another key ----
cl_make_key "$CL_DIR/other.psk"
restart pri psk "$CL_DIR/other.psk" || rdb_fail "primary restart"
cl_ctl pri attach "$CL_DIR/$CL_VM.conf" || rdb_fail "attach to the new daemon"
# protect works in the background (witness, connect): its failure is the
# VM's state, which `wait` reports with the reason
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "2: protect request refused"
if cl_ctl pri wait "$CL_VM" protected --timeout 30 2>"$CL_DIR/protect2.err"; then
	rdb_fail "protected with the wrong key"
fi
grep -q "replication link to backup 10.78.0.2:7788: authentication failed" \
	"$CL_DIR/protect2.err" || rdb_fail "2: remusdbctl wait: $(cat "$CL_DIR/protect2.err")"
st=$(cl_ctl pri status "$CL_VM" --json | jq -r '.vms[0] | "\(.state): \(.state_reason)"')
case $st in
unprotected:*"authentication failed"*) ;;
*) rdb_fail "2: the primary's VM state does not say why: $st" ;;
esac
grep -q "refused a connection from 10.78.0.1:[0-9]*: authentication failed: the primary's link key (id [0-9a-f]*) is not this host's (id [0-9a-f]*)" \
	"$CL_DIR/bak/remusdbd.log" || rdb_fail "2: the backup's log does not say why"
nothing_on_backup 2
echo "2: wrong key refused; primary: $st"
echo "   backup: $(grep -o "refused a connection.*link key (id.*" "$CL_DIR/bak/remusdbd.log" | head -1)"

# ---- 3: the right key ----
restart pri psk || rdb_fail "primary restart"
cl_ctl pri attach "$CL_DIR/$CL_VM.conf" || rdb_fail "attach to the new daemon"
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "3: protect with the right key refused"
cl_ctl pri wait "$CL_VM" protected --timeout 90 || rdb_fail "3: not protected"
cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "3: backup not protected"
grep -q "replication link to backup 10.78.0.2:7788: TLS 1.3, pre-shared key id [0-9a-f]*, TLSv1.3" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "3: no TLS on the link"
[ -d "$CL_DIR/bak/state/$CL_VM" ] || rdb_fail "3: no state on the backup"
echo "3: right key: protected; $(grep -o 'replication link to backup.*' "$CL_DIR/pri/remusdbd.log" | tail -1)"

# ---- 4: plaintext, when both hosts say so ----
cl_ctl pri unprotect "$CL_VM" || rdb_fail "unprotect"
restart bak insecure || rdb_fail "backup restart"
restart pri insecure || rdb_fail "primary restart"
cl_ctl pri attach "$CL_DIR/$CL_VM.conf" || rdb_fail "attach to the new daemon"
cl_ctl pri protect "$CL_DIR/$CL_VM.conf" || rdb_fail "4: protect in plaintext refused"
cl_ctl pri wait "$CL_VM" protected --timeout 90 || rdb_fail "4: not protected"
cl_ctl bak wait "$CL_VM" protected --timeout 10 || rdb_fail "4: backup not protected"
grep -q "replication link to backup 10.78.0.2:7788: plaintext, unauthenticated" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "4: the link is not the plaintext one"
echo "PASS: plaintext and wrong-key primaries refused on both sides with nothing written on the backup; protected with the key over TLS, and in plaintext only when both hosts say insecure"
