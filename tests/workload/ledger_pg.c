// SPDX-License-Identifier: GPL-2.0-only
/* The ledger's PostgreSQL driver (libpq): ledger_db.h. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "ledger_db.h"

struct ldb {
	PGconn *c;
	double timeout_s;
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void say(char *err, size_t errlen, const char *what)
{
	size_t n;

	snprintf(err, errlen, "%s", what ? what : "?");
	n = strlen(err);
	while (n && (err[n - 1] == '\n' || err[n - 1] == ' '))
		err[--n] = 0;
}

static struct ldb *pg_connect(const char *host, const char *port,
			      const char *db, const char *user,
			      double timeout_s, char *err, size_t errlen)
{
	char conninfo[512];
	struct ldb *l = calloc(1, sizeof(*l));

	if (!l) {
		say(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(conninfo, sizeof(conninfo),
		 "host=%s port=%s dbname=%s user=%s connect_timeout=%d "
		 "keepalives=1 application_name=ledger", host, port, db, user,
		 (int)(timeout_s + 0.999));
	l->c = PQconnectdb(conninfo);
	l->timeout_s = timeout_s;
	if (PQstatus(l->c) != CONNECTION_OK) {
		say(err, errlen, PQerrorMessage(l->c));
		PQfinish(l->c);
		free(l);
		return NULL;
	}
	return l;
}

/* Waits for every result of the query sent; the last one's status. */
static enum ldb_rc results(struct ldb *l, const char *sql, char *err,
			   size_t errlen,
			   void (*row)(void *opaque, const PGresult *r, int i),
			   void *opaque)
{
	int64_t deadline = mono_ms() + (int64_t)(l->timeout_s * 1000);
	enum ldb_rc rc = LDB_OK;
	PGresult *r;

	for (;;) {
		while (PQisBusy(l->c)) {
			struct pollfd p = { .fd = PQsocket(l->c), .events = POLLIN };
			int64_t left = deadline - mono_ms();

			if (left <= 0) {
				say(err, errlen, "no answer before the deadline");
				return LDB_TIMEOUT;
			}
			if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
				say(err, errlen, "poll failed");
				return LDB_BROKEN;
			}
			if (!PQconsumeInput(l->c)) {
				say(err, errlen, PQerrorMessage(l->c));
				return LDB_BROKEN;
			}
		}
		r = PQgetResult(l->c);
		if (!r)
			break;
		switch (PQresultStatus(r)) {
		case PGRES_COMMAND_OK:
			/* A COMMIT of an aborted transaction answers ROLLBACK:
			 * that is a failed commit, not a success. */
			if (!strcmp(sql, "COMMIT") && strcmp(PQcmdStatus(r), "COMMIT")) {
				snprintf(err, errlen, "COMMIT answered %s", PQcmdStatus(r));
				rc = LDB_ERROR;
			}
			break;
		case PGRES_TUPLES_OK:
			for (int i = 0; row && i < PQntuples(r); i++)
				row(opaque, r, i);
			break;
		default:
			say(err, errlen, PQresultErrorMessage(r));
			rc = LDB_ERROR;
		}
		PQclear(r);
	}
	if (PQstatus(l->c) != CONNECTION_OK) {
		say(err, errlen, PQerrorMessage(l->c));
		return LDB_BROKEN;
	}
	return rc;
}

static enum ldb_rc pg_exec(struct ldb *l, const char *sql, char *err,
			   size_t errlen)
{
	if (!PQsendQuery(l->c, sql)) {
		say(err, errlen, PQerrorMessage(l->c));
		return PQstatus(l->c) == CONNECTION_OK ? LDB_ERROR : LDB_BROKEN;
	}
	return results(l, sql, err, errlen, NULL, NULL);
}

struct counts {
	void (*cb)(void *opaque, int64_t txn, int64_t n);
	void *opaque;
};

static void count_row(void *opaque, const PGresult *r, int i)
{
	struct counts *c = opaque;

	c->cb(c->opaque, strtoll(PQgetvalue(r, i, 0), NULL, 10),
	      strtoll(PQgetvalue(r, i, 1), NULL, 10));
}

static enum ldb_rc pg_txn_counts(struct ldb *l,
				 void (*cb)(void *opaque, int64_t txn, int64_t n),
				 void *opaque, char *err, size_t errlen)
{
	static const char q[] = "SELECT txn, count(*) FROM ledger GROUP BY txn";
	struct counts c = { cb, opaque };

	if (!PQsendQuery(l->c, q)) {
		say(err, errlen, PQerrorMessage(l->c));
		return LDB_BROKEN;
	}
	return results(l, q, err, errlen, count_row, &c);
}

static void pg_close(struct ldb *l)
{
	if (!l)
		return;
	PQfinish(l->c);
	free(l);
}

const struct ldb_ops ldb_pg_ops = {
	.name = "postgresql",
	.default_port = "5432",
	.default_user = "postgres",
	.connect = pg_connect,
	.exec = pg_exec,
	.txn_counts = pg_txn_counts,
	.close = pg_close,
};
