#!/usr/bin/env bash
# A backup that stops answering (its daemon SIGSTOPped: no FIN, no RST,
# just silence): the primary must drop protection within the detection
# timeout, release the output it was holding, and the guest must carry on
# — the client's sequence stays contiguous on the same connection and
# resumes within the timeout.
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"

run=${RDB_RUN:-bl$$}
timeout_ms=${CL_FAILOVER_TIMEOUT_MS:-1000}
trap 'cluster_down "$run"' EXIT

rdb_require_root
cluster_up "$run" 25 || rdb_fail "setup failed (logs in $CL_DIR)"
cl_seq_start 40
checker=$CL_CHECKER
sleep 2
kill -STOP "$(cat "$CL_DIR/bak/remusdbd.pid")"
cl_ctl pri wait "$CL_VM" degraded --timeout 10 ||
	rdb_fail "primary did not notice its backup was gone"
# the backup's silence, then the witness's decision, before any release
grep -q "protected -> deciding.*backup silent" "$CL_DIR/pri/remusdbd.log" ||
	rdb_fail "degraded for the wrong reason"
grep -q "deciding -> degraded.*won the failover decision at the witness" \
	"$CL_DIR/pri/remusdbd.log" || rdb_fail "ran on without the witness's decision"
sleep 3
kill -INT "$checker"
wait_pid 15 "$checker"
kill -CONT "$(cat "$CL_DIR/bak/remusdbd.pid")" 2>/dev/null
jq -c . "$CL_DIR/seqcheck.json"
jq -e --argjson lim $((timeout_ms + 1500)) \
	'.gaps == 0 and .dups == 0 and .regressions == 0 and .corrupt == 0 and
	 (.connection_lost | not) and .values_after_stall > 0 and .max_stall_ms < $lim' \
	"$CL_DIR/seqcheck.json" >/dev/null ||
	rdb_fail "the guest did not carry on cleanly without its backup"
echo "PASS: backup lost; guest carried on unprotected (client stall $(jq -r .max_stall_ms "$CL_DIR/seqcheck.json") ms)"
