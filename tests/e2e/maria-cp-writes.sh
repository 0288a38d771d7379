#!/usr/bin/env bash
# MariaDB under commit protection through a power pull, with
# remusdb_commit_protection = writes: the drill of tests/lib/cpdrill.sh,
# every invariant checked (CHECK TABLE for the database's own check).
# check-long: MariaDB with commit_protection = writes; make check has
#   the writes mode on PostgreSQL (pg-cp-writes) and MariaDB in mode all
#   (maria-cp-all)
set -u
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/netns.sh"
. "$(dirname "$0")/../lib/cluster.sh"
. "$(dirname "$0")/../lib/cpdrill.sh"
CPD_DBMS=mariadb CPD_POLICY=writes CPD_EXPECT=safe
cpdrill_run
