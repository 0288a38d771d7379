#!/usr/bin/env bash
# Run every unit test binary given; print one summary line the CI reads.
set -u
pass=0 fail=0 failed=()
for t in "$@"; do
	if timeout 120 "$t"; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		failed+=("$(basename "$t")")
	fi
done
[ $fail -eq 0 ] || echo "unit: failed: ${failed[*]}"
echo "unit: $pass passed, $fail failed"
[ $fail -eq 0 ]
