# shellcheck shell=bash
# Shared by every shell test.  Every wait has a deadline.

RDB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Tests run the sanitizer build that `make check` produces.
RDB_BUILD=${RDB_BUILD:-$RDB_ROOT/build/san}
RDB_HELPERS=${RDB_HELPERS:-$RDB_ROOT/build/helpers}

rdb_log() { echo "[$(date +%H:%M:%S.%3N)] $*" >&2; }
# jq -e: Debian's jq 1.6 exits 0 when its input is empty (no result at
# all), so a check over the file of a client that died without writing
# would pass.  With -e, no output is exit status 4 here, as jq's manual
# says it should be.
jq() {
	local a e= out rc
	for a in "$@"; do [ "$a" = -e ] && e=1; done
	if [ -z "$e" ]; then
		command jq "$@"
		return
	fi
	out=$(command jq "$@")
	rc=$?
	[ $rc -eq 0 ] && [ -z "$out" ] && return 4
	[ -n "$out" ] && printf '%s\n' "$out"
	return $rc
}

rdb_fail() { rdb_log "FAIL: $*"; exit 1; }
rdb_skip() { rdb_log "SKIP: needs $*"; exit 77; }
rdb_require_root() { [ "$(id -u)" = 0 ] || rdb_skip "root (network namespaces, tap devices)"; }

# The cached test QEMU (builds it once if missing: ~4 minutes).
RDB_QEMU=${RDB_QEMU:-$(bash "$RDB_ROOT/hypervisor/qemu/build-test-qemu.sh")} ||
	rdb_fail "no test QEMU"
RDB_QEMU_DIR=$(dirname "$RDB_QEMU")

# wait_for SECONDS DESCRIPTION CMD...: poll CMD every 50 ms until it
# succeeds; fail loudly with DESCRIPTION at the deadline.
wait_for() {
	local secs=$1 what=$2 deadline
	shift 2
	deadline=$(( $(date +%s%N) + secs * 1000000000 ))
	until "$@" >/dev/null 2>&1; do
		if [ "$(date +%s%N)" -ge "$deadline" ]; then
			rdb_log "timed out after ${secs}s waiting for: $what"
			return 1
		fi
		sleep 0.05
	done
}

# wait_pid SECONDS PID: wait for a child to exit; returns its status, or
# kills it and returns 124 at the deadline.
wait_pid() {
	local secs=$1 pid=$2 i
	for ((i = 0; i < secs * 20; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			return $?
		fi
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rdb_log "process $pid did not exit within ${secs}s: killed"
	return 124
}

# The test guest with the sequence server, built once per run of the
# tests (seconds; the kernel download is cached).
rdb_build_guest() {
	local out=$RDB_ROOT/build/guest
	[ -x "$RDB_HELPERS/seqsrv" ] || rdb_fail "build/helpers/seqsrv missing (make all)"
	bash "$RDB_ROOT/tools/mkguest.sh" --out "$out" \
		--static "$RDB_HELPERS/seqsrv" --static "$RDB_HELPERS/ticker" \
		--static "$RDB_HELPERS/dirtier" >&2 ||
		rdb_fail "guest build failed"
}
