#!/usr/bin/env bash
# PostgreSQL under commit protection through a power pull, with
# remusdb.commit_protection = writes: the drill of tests/lib/cpdrill.sh,
# every invariant checked.
# check-long: commit_protection = writes on one NIC; make check has the
#   writes mode over two NICs (multi-pg-cp) and the drill in mode all (pg-
#   cp-all)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/cpdrill.sh"
CPD_DBMS=postgresql CPD_POLICY=writes CPD_EXPECT=safe
cpdrill_run
