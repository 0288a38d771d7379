#!/usr/bin/env bash
# Codec benchmark -> build/bench/codec.json
#
# XOR+RLE (this codec), LZ4 alone and a byte-loop XOR+RLE baseline (the
# shape of QEMU's xbzrle), single-threaded, on page deltas captured from
# the PostgreSQL guest under pgbench (tests/bench/codecbench.c says how
# the pairs are formed).  The corpus is built when missing:
# build/bench/corpus/pgbench.rdbc — a protected PostgreSQL VM, pgbench
# running, `remusdbctl capture` of CORPUS_EPOCHS (default 200) epochs.
# Goal (reported, not asserted): xor_rle encodes >= 4 GB/s per core and
# >= 2x the baseline, at an equal or better ratio.
set -u
cd "$(dirname "$0")/../.."
. tests/lib/common.sh
. tests/lib/netns.sh
. tests/lib/cluster.sh
rdb_require_root
out=build/bench
corpus=$out/corpus/pgbench.rdbc
epochs=${CORPUS_EPOCHS:-200}
BENCH=$RDB_BUILD/bench/codecbench
[ -x "$BENCH" ] || rdb_fail "$BENCH missing (make all)"
mkdir -p "$out/corpus"
how="PostgreSQL 15 guest (tools/mkguest-pg.sh), pgbench TPC-B-like scale 1, 4 clients, protected at 25 ms epochs; $epochs consecutive epochs of dirty pages as QEMU sent them (remusdbctl capture)"

if [ ! -s "$corpus" ]; then
	rdb_log "bench: capturing a corpus of $epochs epochs from the PostgreSQL guest"
	CL_RAM_MB=512
	cl_use_pg_guest || rdb_fail "PostgreSQL guest build failed"
	trap 'cluster_down corpus' EXIT
	cluster_hosts_up corpus && cluster_vm_up 25 || rdb_fail "setup failed"
	cl_wait_pg bench || rdb_fail "PostgreSQL not reachable"
	ip netns exec "$(netns_name corpus cli)" "$PGBIN/pgbench" -h "$CL_GUEST_IP" \
		-U postgres -n -c 4 -j 1 -T 120 bench >/dev/null 2>&1 &
	pgb=$!
	sleep 5
	cl_ctl pri capture "$CL_VM" "$RDB_ROOT/$corpus.tmp" "$epochs" || rdb_fail "capture refused"
	wait_for 90 "capture of $epochs epochs" bash -c \
		"[ \"\$($RDB_BUILD/remusdbctl --socket $CL_DIR/pri/ctl.sock status $CL_VM --json | jq .vms[0].capture_epochs_left)\" = 0 ]" ||
		rdb_fail "capture did not finish"
	kill "$pgb" 2>/dev/null
	wait "$pgb" 2>/dev/null
	cluster_down corpus
	trap - EXIT
	mv "$corpus.tmp" "$corpus"
fi
"$BENCH" "$corpus" --min-seconds "${CODEC_MIN_SECONDS:-1}" --how "$how" > "$out/codec.json" ||
	rdb_fail "codecbench failed"
cat "$out/codec.json"
