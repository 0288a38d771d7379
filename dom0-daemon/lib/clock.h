/* SPDX-License-Identifier: GPL-2.0-only */
/* Monotonic time in nanoseconds. Tests set it with -Wl,--wrap=rdb_now_ns. */
#ifndef RDB_CLOCK_H
#define RDB_CLOCK_H

#include <stdint.h>

#define RDB_NS_PER_MS 1000000ULL
#define RDB_NS_PER_S 1000000000ULL

uint64_t rdb_now_ns(void);

#endif
