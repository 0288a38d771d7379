#!/usr/bin/env bash
# The resync on a 4 GiB sparse disk (issue 12): 512 MiB of data, the
# primary's power pulled, 100 MiB written by the restored guest, the old
# primary repaired and protected to again.  The resync copies what was
# written since (and the old primary's logged extents: none here, its
# guest only read), at most twice that, far below the disk's data; the
# disks are equal afterwards.  The benchmark's scenario
# (tests/bench/reprotect.sh) in its test mode, with a 256 MiB guest.
# check-long: the resync's size on a 4 GiB disk; make check has the
#   resync's correctness (pg-failback, reprotect)
set -u
. "$(dirname "$0")/../lib/common.sh"
rdb_require_root
RDB_RUN=${RDB_RUN:-rs$$} REPROTECT_TEST=1 REPROTECT_RAM_MB=${REPROTECT_RAM_MB:-256} REPROTECT_CACHED_MB=64 \
	exec bash "$RDB_ROOT/tests/bench/reprotect.sh"
