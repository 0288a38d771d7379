#!/usr/bin/env bash
# Runs every end-to-end test (tests/e2e/*.sh) on network namespaces with a
# real guest under the test QEMU.  Exit 77 from a test means skipped.
# Prints one summary line: "e2e: N passed, M failed, K skipped".
set -u
cd "$(dirname "$0")/.."
. tests/lib/common.sh
rdb_build_guest
pass=0 fail=0 skip=0 failed=()
for t in tests/e2e/*.sh; do
	name=$(basename "$t" .sh)
	rdb_log "e2e: $name"
	# A hung test is a failed test: the harness bounds it as a whole too.
	timeout --kill-after=10 600 bash "$t"
	rc=$?
	case $rc in
	0) pass=$((pass + 1)) ;;
	77) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)); failed+=("$name (rc $rc)") ;;
	esac
done
[ $fail -eq 0 ] || echo "e2e: failed: ${failed[*]}"
echo "e2e: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
