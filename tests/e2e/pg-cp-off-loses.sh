#!/usr/bin/env bash
# The commit-protection drill must be able to see the failure it exists
# for: the same drill (tests/lib/cpdrill.sh) with PostgreSQL's
# remusdb.commit_protection = off, so commit acknowledgements leave the
# primary unprotected under mode = commit-protection.  Acknowledged
# commits must then be lost at the power pull, and the ledger must say
# so.  To make that certain rather than likely, the pull comes 150 ms into
# a 300 ms epoch (just after the primary saw the previous one
# acknowledged): the ~15 commits acknowledged meanwhile are exposed.  At
# a random moment of a 25 ms epoch a pull can fall right after a
# checkpoint and expose none (seen once in development).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/cpdrill.sh"
CPD_DBMS=postgresql CPD_POLICY=off CPD_EXPECT=loses CKPT_MS=${CKPT_MS:-300}
CPD_PULL_INTO_EPOCH_MS=150
cpdrill_run
