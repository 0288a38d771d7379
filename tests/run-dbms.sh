#!/usr/bin/env bash
# Runs the DBMS patches' host tests (tests/dbms/*-host.sh: the patched
# servers under fakekmod.so, checked message by message).  Exit 77 from
# a test means skipped.  Prints "dbms: N passed, M failed, K skipped".
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0 skip=0 failed=()
for t in tests/dbms/*-host.sh; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .sh)
	echo "[$(date +%H:%M:%S.%3N)] dbms: $name" >&2
	timeout --kill-after=10 600 bash "$t"
	rc=$?
	case $rc in
	0) pass=$((pass + 1)) ;;
	77) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)); failed+=("$name (rc $rc)") ;;
	esac
done
[ $fail -eq 0 ] || echo "dbms: failed: ${failed[*]}"
echo "dbms: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
