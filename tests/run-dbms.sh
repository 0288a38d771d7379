#!/usr/bin/env bash
# Runs the DBMS patches' host tests (tests/dbms/*-host.sh: the patched
# servers under fakekmod.so, checked message by message).  Exit 77 from
# a test means skipped.  Prints "dbms: N passed, M failed, K skipped".
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0 skip=0 failed=()
# Which: RDB_DBMS_SET=check (the default; make check) those without a
# "# check-long: WHY" line, =long (make check-long) those with one, =all.
set_=${RDB_DBMS_SET:-check}
case $set_ in
check | long | all) ;;
*) echo "run-dbms.sh: RDB_DBMS_SET must be check, long or all, not '$set_'" >&2; exit 2 ;;
esac
for t in tests/dbms/*-host.sh; do
	[ -f "$t" ] || continue
	if grep -q '^# check-long:' "$t"; then
		[ "$set_" = check ] && continue
	else
		[ "$set_" = long ] && continue
	fi
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
