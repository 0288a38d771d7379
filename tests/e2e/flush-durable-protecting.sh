#!/usr/bin/env bash
# The guest's flushes stay durable on the primary's disk while its VM is
# being protected, up to the initial state's stop: flush-durable.sh with
# the power pulled during protecting (see there).
FD_MODE=protecting RDB_RUN=${RDB_RUN:-fp$$} exec bash "$(dirname "$0")/flush-durable.sh"
