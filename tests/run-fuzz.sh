#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for
# FUZZ_SECONDS (default 60).  A crash fails the run and leaves the input
# in build/fuzz/<target>/.  Seeds: none committed; corpora grow in
# build/fuzz/<target>/corpus across runs on one machine.
set -u
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
srcs=(dom0-daemon/lib/buf.c dom0-daemon/lib/crc32c.c dom0-daemon/lib/clock.c
      dom0-daemon/lib/sockutil.c dom0-daemon/proto.c dom0-daemon/nbd.c
      hypervisor/qemu/colo_stream.c hypervisor/xen/xc_stream.c dom0-daemon/xorrle.c
      dom0-daemon/stage.c dom0-daemon/diskbuf.c dom0-daemon/ramimage.c
      dom0-daemon/flowcheck.c dom0-daemon/tcpseg.c dom0-daemon/lib/fileio.c
      dom0-daemon/lib/log.c hypervisor/xen/backend.c hypervisor/xen/xen_state.c
      hypervisor/proc.c dom0-daemon/lib/cpulist.c)
flags=(-std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined
       -Idom0-daemon -Idom0-daemon/lib -Ihypervisor)
fail=0
for t in tests/fuzz/fuzz_*.c; do
	name=$(basename "$t" .c)
	dir=build/fuzz/$name
	mkdir -p "$dir/corpus"
	clang "${flags[@]}" "$t" "${srcs[@]}" -ljansson -llz4 -lcrypto -lpthread -o "$dir/$name" ||
		{ echo "fuzz: $name does not build"; fail=1; continue; }
	if (cd "$dir" && ./"$name" -max_total_time="$secs" -rss_limit_mb=2048 \
		-print_final_stats=1 corpus >log 2>&1); then
		echo "fuzz: $name: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log" | grep -o '[0-9]*$') runs, no crash"
	else
		echo "fuzz: $name: CRASH (see $dir/log and $dir/crash-*)"
		fail=1
	fi
done
exit $fail
