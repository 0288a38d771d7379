#!/usr/bin/env bash
# The MariaDB drill must see the failure it exists for: the drill of
# tests/lib/cpdrill.sh with remusdb_commit_protection = off, so commit
# acknowledgements leave unprotected; acknowledged commits must then be
# lost at the pull (the replication link is cut 400 ms before it: see
# pg-cp-off-loses.sh),
# and the flow check must reset the connections that saw them.
# check-long: the MariaDB drill's power to see a loss (red without
#   commit protection); make check runs the drill itself (maria-cp-all)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/cpdrill.sh"
CPD_DBMS=mariadb CPD_POLICY=off CPD_EXPECT=loses CKPT_MS=${CKPT_MS:-25}
CPD_CUT_REPL_MS=400
cpdrill_run
