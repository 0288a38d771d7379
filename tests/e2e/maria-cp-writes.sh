#!/usr/bin/env bash
# MariaDB under commit protection through a power pull, with
# remusdb_commit_protection = writes: the drill of tests/lib/cpdrill.sh,
# every invariant checked (CHECK TABLE for the database's own check).
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/cpdrill.sh"
CPD_DBMS=mariadb CPD_POLICY=writes CPD_EXPECT=safe
cpdrill_run
