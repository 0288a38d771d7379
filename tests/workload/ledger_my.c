// SPDX-License-Identifier: GPL-2.0-only
/*
 * ledger_my.c: the ledger workload's DBMS interface (ledger_db.h) for
 * MariaDB, over MariaDB Connector/C (libmariadb).
 *
 * Every call uses the library's non-blocking API and waits in poll(2)
 * until a deadline: the connect's timeout, kept for every later exec.
 * TCP always (the library would take "localhost" for its Unix socket);
 * no automatic reconnect; multi-statement strings allowed ("BEGIN;
 * INSERT ..."), every result read and dropped.
 *
 * Classification (ledger_db.h):
 *   server error (1000-1999, 3000+) on a live connection  LDB_ERROR
 *     e.g. 1213 deadlock, or RemusDB's abort after a failover
 *   client error (2000-2999: lost, gone away, ...), or the server's
 *     ER_CONNECTION_KILLED / ER_SERVER_SHUTDOWN              LDB_BROKEN
 *   no answer before the deadline                           LDB_TIMEOUT
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <mysql.h>

#include "ledger_db.h"

#define ER_SERVER_SHUTDOWN_ 1053
#define ER_CONNECTION_KILLED_ 1927

struct ldb {
	MYSQL *m;
	int64_t timeout_ms;
	int64_t deadline;	/* of the call in progress (CLOCK_MONOTONIC ms) */
	bool dead;		/* timed out or broken: only close() is left */
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Waits for what the library asked for (status: MYSQL_WAIT_*) and returns
 * what happened, for the next *_cont call; -1 when the deadline passed.
 */
static int await(struct ldb *c, int status)
{
	struct pollfd p = { .fd = (int)mysql_get_socket(c->m) };

	if (status & MYSQL_WAIT_READ)
		p.events |= POLLIN;
	if (status & MYSQL_WAIT_WRITE)
		p.events |= POLLOUT;
	if (status & MYSQL_WAIT_EXCEPT)
		p.events |= POLLPRI;
	for (;;) {
		int64_t left = c->deadline - mono_ms(), t = left;
		int r;

		if (left <= 0)
			return -1;
		if ((status & MYSQL_WAIT_TIMEOUT) &&
		    (int64_t)mysql_get_timeout_value_ms(c->m) < t)
			t = mysql_get_timeout_value_ms(c->m);
		r = poll(&p, 1, (int)t);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0) {
			if ((status & MYSQL_WAIT_TIMEOUT) && t < left)
				return MYSQL_WAIT_TIMEOUT;
			continue;	/* the deadline is checked above */
		}
		status = 0;
		if (p.revents & (POLLIN | POLLHUP | POLLERR))
			status |= MYSQL_WAIT_READ;
		if (p.revents & (POLLOUT | POLLHUP | POLLERR))
			status |= MYSQL_WAIT_WRITE;
		if (p.revents & POLLPRI)
			status |= MYSQL_WAIT_EXCEPT;
		return status;
	}
}

static enum ldb_rc timed_out(struct ldb *c, char *err, size_t errlen)
{
	c->dead = true;
	snprintf(err, errlen, "no answer within %" PRId64 " ms", c->timeout_ms);
	return LDB_TIMEOUT;
}

static enum ldb_rc failed(struct ldb *c, char *err, size_t errlen)
{
	unsigned int e = mysql_errno(c->m);

	snprintf(err, errlen, "%u (%s): %s", e, mysql_sqlstate(c->m),
		 mysql_error(c->m));
	if ((e >= 2000 && e < 3000) || e == ER_SERVER_SHUTDOWN_ ||
	    e == ER_CONNECTION_KILLED_ || e == 0) {
		c->dead = true;
		return LDB_BROKEN;
	}
	return LDB_ERROR;
}

static void ldb_my_close(struct ldb *c)
{
	int status;

	if (!c)
		return;
	if (c->dead && mysql_get_socket(c->m) != MARIADB_INVALID_SOCKET)
		shutdown((int)mysql_get_socket(c->m), SHUT_RDWR);
	/* COM_QUIT: bounded too; past the deadline the socket is shut down
	 * and the library finishes at once */
	c->deadline = mono_ms() + c->timeout_ms;
	status = mysql_close_start(c->m);
	while (status) {
		int ready = await(c, status);

		if (ready < 0) {
			shutdown((int)mysql_get_socket(c->m), SHUT_RDWR);
			ready = status & (MYSQL_WAIT_READ | MYSQL_WAIT_WRITE);
		}
		status = mysql_close_cont(c->m, ready);
	}
	free(c);
}

static struct ldb *ldb_my_connect(const char *host, const char *port,
				  const char *db, const char *user,
				  double timeout_s, char *err, size_t errlen)
{
	struct ldb *c = calloc(1, sizeof(*c));
	unsigned int proto = MYSQL_PROTOCOL_TCP;
	my_bool no = 0;
	MYSQL *ret = NULL;
	int status;

	if (!c || !(c->m = mysql_init(NULL))) {
		snprintf(err, errlen, "out of memory");
		free(c);
		return NULL;
	}
	c->timeout_ms = (int64_t)(timeout_s * 1000);
	c->deadline = mono_ms() + c->timeout_ms;
	mysql_options(c->m, MYSQL_OPT_NONBLOCK, 0);
	mysql_options(c->m, MYSQL_OPT_PROTOCOL, &proto);
	mysql_options(c->m, MYSQL_OPT_RECONNECT, &no);
	mysql_options(c->m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	status = mysql_real_connect_start(&ret, c->m, host, user, NULL, db,
					  (unsigned int)atoi(port), NULL,
					  CLIENT_MULTI_STATEMENTS |
					  CLIENT_MULTI_RESULTS);
	while (status) {
		if ((status = await(c, status)) < 0) {
			timed_out(c, err, errlen);
			ldb_my_close(c);
			return NULL;
		}
		status = mysql_real_connect_cont(&ret, c->m, status);
	}
	if (!ret) {
		failed(c, err, errlen);
		c->dead = true;
		ldb_my_close(c);
		return NULL;
	}
	return c;
}

/*
 * Sends sql and reads every result it produces; each result set is given
 * to row_cb (or dropped).  Stops at the first failing statement.
 */
static enum ldb_rc run(struct ldb *c, const char *sql,
		       void (*row_cb)(void *opaque, MYSQL_ROW row),
		       void *opaque, char *err, size_t errlen)
{
	int status, r = 0;

	if (c->dead) {
		snprintf(err, errlen, "connection already unusable");
		return LDB_BROKEN;
	}
	c->deadline = mono_ms() + c->timeout_ms;
	status = mysql_real_query_start(&r, c->m, sql, strlen(sql));
	while (status) {
		if ((status = await(c, status)) < 0)
			return timed_out(c, err, errlen);
		status = mysql_real_query_cont(&r, c->m, status);
	}
	if (r)
		return failed(c, err, errlen);
	for (;;) {
		MYSQL_RES *res = NULL;

		status = mysql_store_result_start(&res, c->m);
		while (status) {
			if ((status = await(c, status)) < 0)
				return timed_out(c, err, errlen);
			status = mysql_store_result_cont(&res, c->m, status);
		}
		if (res) {
			MYSQL_ROW row;

			/* stored: fetching is local, never waits */
			while (row_cb && (row = mysql_fetch_row(res)))
				row_cb(opaque, row);
			mysql_free_result(res);
		} else if (mysql_field_count(c->m)) {
			return failed(c, err, errlen);
		}
		if (!mysql_more_results(c->m))
			return LDB_OK;
		status = mysql_next_result_start(&r, c->m);
		while (status) {
			if ((status = await(c, status)) < 0)
				return timed_out(c, err, errlen);
			status = mysql_next_result_cont(&r, c->m, status);
		}
		if (r > 0)
			return failed(c, err, errlen);
	}
}

static enum ldb_rc ldb_my_exec(struct ldb *c, const char *sql, char *err,
			       size_t errlen)
{
	return run(c, sql, NULL, NULL, err, errlen);
}

struct counts_arg {
	void (*cb)(void *opaque, int64_t txn, int64_t n);
	void *opaque;
};

static void count_row(void *opaque, MYSQL_ROW row)
{
	struct counts_arg *a = opaque;

	if (row[0] && row[1])
		a->cb(a->opaque, strtoll(row[0], NULL, 10),
		      strtoll(row[1], NULL, 10));
}

static enum ldb_rc ldb_my_txn_counts(struct ldb *c,
				     void (*cb)(void *opaque, int64_t txn,
						int64_t n),
				     void *opaque, char *err, size_t errlen)
{
	struct counts_arg a = { cb, opaque };

	return run(c, "SELECT txn, count(*) FROM ledger GROUP BY txn",
		   count_row, &a, err, errlen);
}

const struct ldb_ops ldb_my_ops = {
	.name = "mariadb",
	.default_port = "3306",
	.default_user = "root",
	.connect = ldb_my_connect,
	.exec = ldb_my_exec,
	.txn_counts = ldb_my_txn_counts,
	.close = ldb_my_close,
};
