// SPDX-License-Identifier: GPL-2.0-only
#include "clock.h"

#include <time.h>

uint64_t rdb_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * RDB_NS_PER_S + (uint64_t)ts.tv_nsec;
}
