#!/usr/bin/env bash
# migrate-restore-fail.sh with on_peer_loss = manual and no witness: the
# old primary runs on, degraded, without waiting for the operator (see
# there).
# check-long: the failed switchover under on_peer_loss = manual; make
#   check has it under the witness (migrate-restore-fail, migrate-restore-
#   fail-late)
CL_WITNESS=none CL_ON_PEER_LOSS=manual exec bash "$(dirname "$0")/migrate-restore-fail.sh" "$@"
