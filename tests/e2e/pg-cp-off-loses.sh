#!/usr/bin/env bash
# The commit-protection drill must be able to see the failure it exists
# for: the same drill (tests/lib/cpdrill.sh) with PostgreSQL's
# remusdb.commit_protection = off, so commit acknowledgements leave the
# primary unprotected under mode = commit-protection.  Acknowledged
# commits must then be lost at the power pull, and the ledger must say
# so.  To make that certain rather than likely, the replication link is
# cut 400 ms before the pull: the ~30 commits acknowledged meanwhile
# never reach the backup.  Timing the pull against the epochs instead
# (150 ms after an acknowledgement seen through remusdbctl, 300 ms
# epochs) once let the pull land just after a checkpoint and expose none.
# check-long: the drill's power to see a loss (red without commit
#   protection); make check runs the drill itself (pg-cp-all, pg-cp-
#   writes)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/cpdrill.sh"
CPD_DBMS=postgresql CPD_POLICY=off CPD_EXPECT=loses CKPT_MS=${CKPT_MS:-25}
CPD_CUT_REPL_MS=400
cpdrill_run
