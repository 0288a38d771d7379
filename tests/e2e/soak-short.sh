#!/usr/bin/env bash
# make soak's short form (make check-long): two whole lifecycles of the
# protected PostgreSQL VM (a power pull, the resync back and a migrate
# home; then a pull, the resync back and a second pull), the second with
# every extra fault (the witness restarted, the replication link cut,
# the backup's and the primary's remusdbd killed and started again):
# no commit lost or phantom, one copy at a time, no stray process, and
# no leak LeakSanitizer reports when the daemons stop (tests/soak/soak.sh).
# check-long: two whole lifecycles with every fault (make soak, short);
#   make check has each step alone
set -u
. "$(dirname "$0")/../lib/common.sh"
RDB_RUN=${RDB_RUN:-ss$$} exec bash "$RDB_ROOT/tests/soak/soak.sh" --cycles 2 --seed 1
