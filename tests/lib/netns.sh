# shellcheck shell=bash
# Hosts as network namespaces (WireGuard's netns.sh spirit).
#
#            ┌──────── rdb-RUN-sw: bridge br0 ────────┐
#            │                │                       │
#   rdb-RUN-pri          rdb-RUN-bak             rdb-RUN-cli   rdb-RUN-wit
#   vmbr0 10.77.0.1      vmbr0 10.77.0.2         eth0 10.77.0.10   eth0 10.77.0.3
#    ├ uplink             ├ uplink
#    └ vmtap0, vmtap1     └ vmtap0, vmtap1 (guests after failover)
#   repl 10.78.0.1 ───────── repl 10.78.0.2   (replication link)
#
# NETNS_PR2=1 adds rdb-RUN-pr2, a second primary host backed up by the
# same backup: vmbr0 10.77.0.4 on the switch, its own replication link
# (repl 10.79.0.1 ── repl2 10.79.0.2 on bak; bak's 10.78.0.2 routed
# through it), so one primary's power can be pulled while the other's
# VMs stay protected.
#
# The guest is 10.77.0.100 wherever it runs.  The failover witness (etcd)
# is a host of its own on the switch: cutting the replication link leaves
# both hosts able to reach it; pulling the primary's links cuts it off too.
# Nothing routes out of these namespaces.

netns_name() { echo "rdb-$1-$2"; }

_nsx() { local ns; ns=$(netns_name "$1" "$2"); shift 2; ip netns exec "$ns" "$@"; }

# _veth RUN NS_A NAME_A NS_B NAME_B
_veth() {
	local a=r${RANDOM}a b=r${RANDOM}b
	ip link add "$a" type veth peer name "$b" || return 1
	ip link set "$a" netns "$(netns_name "$1" "$2")" name "$3" || return 1
	ip link set "$b" netns "$(netns_name "$1" "$4")" name "$5" || return 1
	_nsx "$1" "$2" ip link set "$3" up
	_nsx "$1" "$4" ip link set "$5" up
}

netns_setup() {
	local run=$1 h t hosts="pri bak"
	[ -n "${NETNS_PR2:-}" ] && hosts="pri pr2 bak"
	netns_cleanup "$run"
	for h in sw $hosts cli wit; do
		ip netns add "$(netns_name "$run" "$h")" || return 1
		_nsx "$run" "$h" ip link set lo up
	done
	_nsx "$run" sw ip link add br0 type bridge
	# No STP delay: ports forward at once.
	_nsx "$run" sw ip link set br0 type bridge forward_delay 0 stp_state 0
	_nsx "$run" sw ip link set br0 up
	for h in $hosts; do
		_veth "$run" sw "port-$h" "$h" uplink || return 1
	done
	_veth "$run" sw port-cli cli eth0 || return 1
	_veth "$run" sw port-wit wit eth0 || return 1
	for h in $hosts cli wit; do
		_nsx "$run" sw ip link set "port-$h" master br0
	done
	for h in $hosts; do
		local last=1
		[ "$h" = bak ] && last=2
		[ "$h" = pr2 ] && last=4
		_nsx "$run" "$h" ip link add vmbr0 type bridge
		_nsx "$run" "$h" ip link set vmbr0 type bridge forward_delay 0 stp_state 0
		_nsx "$run" "$h" ip link set dev uplink master vmbr0
		# one tap per guest a host may run (two-VM tests use vmtap1)
		for t in vmtap0 vmtap1; do
			_nsx "$run" "$h" ip tuntap add dev $t mode tap
			_nsx "$run" "$h" ip link set $t master vmbr0
			_nsx "$run" "$h" ip link set $t up
		done
		_nsx "$run" "$h" ip link set vmbr0 up
		_nsx "$run" "$h" ip addr add "10.77.0.$last/24" dev vmbr0
	done
	_nsx "$run" cli ip addr add 10.77.0.10/24 dev eth0
	_nsx "$run" wit ip addr add 10.77.0.3/24 dev eth0
	_veth "$run" pri repl bak repl || return 1
	_nsx "$run" pri ip addr add 10.78.0.1/24 dev repl
	_nsx "$run" bak ip addr add 10.78.0.2/24 dev repl
	if [ -n "${NETNS_PR2:-}" ]; then
		_veth "$run" pr2 repl bak repl2 || return 1
		_nsx "$run" pr2 ip addr add 10.79.0.1/24 dev repl
		_nsx "$run" bak ip addr add 10.79.0.2/24 dev repl2
		_nsx "$run" pr2 ip route add 10.78.0.2/32 via 10.79.0.2
	fi
}

# Pulling the power (of the primary, or of SIDE): every link goes down first (the
# replication link, its switch port in sw, then each of its other
# interfaces; the replication link's going down drops the carrier of its
# far end too), so not a FIN or RST can leave it; then everything running
# there is killed.
netns_power_pull() {
	local run=$1 side=${2:-pri} l pids
	# A real pull cuts every link at once; here each `ip` takes a few ms.
	# The replication link goes first: with the switch port first, the
	# backup could go on committing epochs whose output no client could
	# hear any more, and a primary that let output out before the
	# backup's acknowledgement would pass (seen on the Xen drill, where
	# one `ip` takes 0.1-1 s).
	_nsx "$run" "$side" ip link set repl down 2>/dev/null
	_nsx "$run" sw ip link set "port-$side" down
	for l in $(_nsx "$run" "$side" ls /sys/class/net); do
		_nsx "$run" "$side" ip link set "$l" down 2>/dev/null
	done
	pids=$(ip netns pids "$(netns_name "$run" "$side")")
	[ -n "$pids" ] && kill -9 $pids 2>/dev/null
	return 0
}

# The host back after a power pull ("repaired"): its interfaces and its
# switch port up again; nothing runs there until started.
netns_power_restore() {
	local run=$1 side=${2:-pri} l
	for l in $(_nsx "$run" "$side" ls /sys/class/net); do
		_nsx "$run" "$side" ip link set "$l" up 2>/dev/null
	done
	_nsx "$run" sw ip link set "port-$side" up
}

# Cutting the replication link only: both hosts stay up and on the
# client network (the primary's end goes down; the backup sees no carrier
# change it could act on, only silence).
netns_cut_repl() {
	_nsx "$1" pri ip link set repl down
}

# Cutting a host from every network (alive, but nobody reaches it):
# its switch port and the replication link go down, nothing is killed.
netns_isolate() {
	_nsx "$1" sw ip link set "port-$2" down
	_nsx "$1" "$2" ip link set repl down
}

netns_reconnect() {
	_nsx "$1" sw ip link set "port-$2" up
	_nsx "$1" "$2" ip link set repl up
}

netns_cleanup() {
	local run=$1 h ns pids
	for h in pri pr2 bak cli wit sw; do
		ns=$(netns_name "$run" "$h")
		# Exact name: run "a" must not match "x-a"'s namespaces.
		ip netns list 2>/dev/null | cut -d' ' -f1 | grep -qxF "$ns" || continue
		pids=$(ip netns pids "$ns" 2>/dev/null)
		[ -n "$pids" ] && kill -9 $pids 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	return 0
}
