#!/usr/bin/env bash
# MariaDB under commit protection through a power pull, with
# remusdb_commit_protection = all: the drill of tests/lib/cpdrill.sh,
# every invariant checked (CHECK TABLE for the database's own check).
# check-long: MariaDB (its build: a third of make check's budget on an
#   empty cache); make check has the same drill on PostgreSQL (pg-cp-all,
#   pg-cp-writes)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/cpdrill.sh"
CPD_DBMS=mariadb CPD_POLICY=all CPD_EXPECT=safe
cpdrill_run
