#!/usr/bin/env bash
# Replication link benchmark -> build/bench/link.json
#
# What TLS costs the link itself: throughput (MB/s), CPU per GB and the
# round trip of a frame and its ACK, plaintext and TLS 1.3 PSK in the
# same run, alternating (tests/bench/linkbench.c says how).  The cost in
# the checkpoint pause and the ACK latency of a protected VM is in
# checkpoint.json (remusdbd vs remusdbd_tls).  Nothing is asserted.
set -u
cd "$(dirname "$0")/../.."
RDB_BUILD=${RDB_BUILD:-build/san}
BENCH=$RDB_BUILD/bench/linkbench
out=build/bench
[ -x "$BENCH" ] || { echo "$BENCH missing (make all)" >&2; exit 1; }
mkdir -p "$out"
"$BENCH" --mb "${LINK_MB:-256}" --rounds "${LINK_ROUNDS:-5}" > "$out/link.json" ||
	{ echo "linkbench failed" >&2; exit 1; }
cat "$out/link.json"
