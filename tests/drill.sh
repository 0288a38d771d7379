#!/usr/bin/env bash
# The power-pull drill: a protected VM streaming a sequence to a client,
# the primary's power pulled at a random moment, the backup taking over.
# Writes build/drill/report.json; exits non-zero if an invariant failed.
#
#   tests/drill.sh [--demo]     --demo narrates for a human
set -u
cd "$(dirname "$0")/.."
. tests/lib/common.sh
demo=false
[ "${1:-}" = --demo ] && demo=true
rdb_require_root
mkdir -p build/drill
rdb_build_guest
say() { $demo && printf '\n==> %s\n' "$*"; return 0; }

say "Four network namespaces stand in for hosts: switch, primary, backup, client."
say "The guest (Debian kernel + busybox, under QEMU) streams 1, 2, 3, ... over TCP to the client."
say "remusdbd checkpoints it every ${CKPT_MS:-25} ms to the backup and holds its output until each checkpoint is committed."
say "At a random moment the primary loses power: links down first, then SIGKILL."
RDB_RUN=drill timeout --kill-after=10 600 bash tests/e2e/failover-seq.sh
rc=$?
if [ -f build/e2e/drill/result.json ]; then
	cp build/e2e/drill/result.json build/drill/report.json
else
	jq -n --argjson rc $rc '{invariants_ok: false, error: "drill did not complete", rc: $rc}' \
		> build/drill/report.json
fi
if $demo; then
	jq -r '"
What happened:
  checkpoints before the pull : \(.checkpoints_per_s * 10 | round / 10) per second, guest paused p50 \(.pause_ms_p50 * 100 | round / 100) ms, p99 \(.pause_ms_p99 * 100 | round / 100) ms
  backup restored the VM      : from epoch \(.committed_epoch) in \(.restore_ms * 10 | round / 10) ms
  client saw                  : \(.values) values, last \(.last); stalled \(.failover_ms | round) ms across the failover
  gaps / repeats / rollbacks  : \(.gaps) / \(.dups) / \(.regressions + .corrupt)
  same TCP connection         : \(if .connection_lost then "NO" else "yes" end)
  invariants                  : \(if .invariants_ok then "OK" else "VIOLATED" end)"' build/drill/report.json 2>/dev/null ||
		cat build/drill/report.json
	echo "Report: build/drill/report.json; logs: build/e2e/drill/"
fi
[ "$(jq -r .invariants_ok build/drill/report.json)" = true ]
