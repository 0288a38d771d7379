/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The ledger workload's view of a DBMS: one table of these per client
 * library (ledger_pg.c: libpq; ledger_my.c: MariaDB Connector/C), so the
 * workload and its checks are written once.
 *
 * Every call that waits on the server has a deadline; none retries.
 * Errors are reported as text in err (NUL-ended, cut to errlen - 1) and
 * classified, because the checks care which kind happened:
 *
 *   LDB_OK       the statement succeeded
 *   LDB_ERROR    the server answered with an error; the connection is
 *                still usable (a transaction it was in is aborted)
 *   LDB_BROKEN   the connection is gone (reset, closed, terminated by
 *                the server with a fatal error): err says how
 *   LDB_TIMEOUT  no answer before the deadline; the connection is
 *                unusable and must be closed
 */
#ifndef LEDGER_DB_H
#define LEDGER_DB_H

#include <stddef.h>
#include <stdint.h>

enum ldb_rc {
	LDB_OK = 0,
	LDB_ERROR = -1,
	LDB_BROKEN = -2,
	LDB_TIMEOUT = -3,
};

struct ldb;	/* one connection */

struct ldb_ops {
	const char *name;		/* "postgresql", "mariadb" */
	const char *default_port;	/* "5432", "3306" */
	const char *default_user;	/* "postgres", "root" */
	/* NULL on failure (err says why).  timeout_s bounds the connect and
	 * is kept as the deadline of every later exec. */
	struct ldb *(*connect)(const char *host, const char *port,
			       const char *db, const char *user,
			       double timeout_s, char *err, size_t errlen);
	/* One statement (no result rows wanted: they are read and dropped). */
	enum ldb_rc (*exec)(struct ldb *c, const char *sql, char *err,
			    size_t errlen);
	/* SELECT txn, count(*) FROM ledger GROUP BY txn: cb once per row. */
	enum ldb_rc (*txn_counts)(struct ldb *c,
				  void (*cb)(void *opaque, int64_t txn, int64_t n),
				  void *opaque, char *err, size_t errlen);
	void (*close)(struct ldb *c);	/* NULL is fine */
};

extern const struct ldb_ops ldb_pg_ops;
extern const struct ldb_ops ldb_my_ops;

#endif
