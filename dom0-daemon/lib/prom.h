/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Prometheus text exposition (format 0.0.4) for the metrics file.
 *
 * The format wants every sample of one metric family together, after one
 * "# HELP" and one "# TYPE" line; remusdbd learns its samples VM by VM.
 * So a write collects them into a registry first (families in the order
 * first seen, samples in the order added) and prints it in one pass:
 *
 *   exposition = { "# HELP " name " " help "\n"
 *                  "# TYPE " name " " type "\n"
 *                  { name [suffix] "{" labels "}" " " value "\n" } }
 *   labels     = base-labels { "," key "=\"" escaped-value "\"" }
 *
 * The base labels (vm and role, set per VM) go on every sample added
 * after rdb_prom_set_base.  Label values are escaped (\\, \", \n); names
 * are the callers' constants.  Errors latch: the first one (ENOMEM, or a
 * family re-added with another type) is what rdb_prom_write returns, and
 * nothing partial is written.
 */
#ifndef RDB_PROM_H
#define RDB_PROM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum rdb_prom_type {
	RDB_PROM_COUNTER,
	RDB_PROM_GAUGE,
	RDB_PROM_HISTOGRAM,
	RDB_PROM_TYPE__MAX,
};

/* A histogram's upper bounds, seconds; the +Inf bucket is implied. */
#define RDB_PROM_HIST_BUCKETS 12
extern const double rdb_prom_hist_bounds[RDB_PROM_HIST_BUCKETS];

/* Cumulative since it was zeroed: counts per bucket (not cumulative here;
 * the writer sums them), their sum in seconds, and their count. */
struct rdb_prom_hist {
	uint64_t bucket[RDB_PROM_HIST_BUCKETS + 1];
	uint64_t count;
	double sum;
};

void rdb_prom_hist_observe(struct rdb_prom_hist *h, uint64_t ns);

struct rdb_prom_family;

struct rdb_prom {
	struct rdb_prom_family *fam;
	size_t nfam, capfam;
	char base[256];		/* preformatted base labels, may be empty */
	int err;		/* first error, negative errno; 0 */
};

void rdb_prom_init(struct rdb_prom *p);
void rdb_prom_dispose(struct rdb_prom *p);

/* Labels put on every sample added from now on: key, value pairs ending
 * with NULL.  rdb_prom_set_base(p, NULL) clears them. */
void rdb_prom_set_base(struct rdb_prom *p, ...) __attribute__((sentinel));

/* One sample of family name (a counter's name ends in _total); help and
 * type fixed by the family's first sample.  Extra labels as key, value
 * pairs ending with NULL. */
void rdb_prom_add(struct rdb_prom *p, const char *name, enum rdb_prom_type t,
		  const char *help, double v, ...) __attribute__((sentinel));

/* A histogram's _bucket/_sum/_count samples, with extra labels. */
void rdb_prom_add_hist(struct rdb_prom *p, const char *name, const char *help,
		       const struct rdb_prom_hist *h, ...) __attribute__((sentinel));

/* Prints the registry; 0, or the latched error (nothing printed). */
int rdb_prom_write(const struct rdb_prom *p, FILE *f);

/* Writes the escaped form of s into dst (always terminated); the length
 * it needed, as snprintf. */
size_t rdb_prom_escape(char *dst, size_t n, const char *s);

#endif
