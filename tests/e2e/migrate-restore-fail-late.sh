#!/usr/bin/env bash
# migrate-restore-fail.sh with the restore failing 1 s after its guest
# ran: nothing that guest sent reaches the wire (see there).
MRF_LATE=1 exec bash "$(dirname "$0")/migrate-restore-fail.sh" "$@"
