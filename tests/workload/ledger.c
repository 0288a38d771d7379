// SPDX-License-Identifier: GPL-2.0-only
/*
 * ledger: the database workload whose every acknowledged commit must
 * survive a failover (PostgreSQL or MariaDB: ledger_db.h).
 *
 *   ledger run   --host H [--dbms postgresql|mariadb] [--port P] [--db D]
 *                [--user U] [--clients N] [--items K] --duration S
 *                --journal DIR [--rollback-every M] [--wait-timeout S]
 *                [--stop-file F] [--reconnect] [--speculators K
 *                --pull-file F] [--readers R [--reader-host H2]] [--base B]
 *   ledger check --host H [--dbms ...] [--port P] [--db D] [--user U]
 *                --journal DIR [--clients N] [--items K] [--speculators K]
 *                [--pull-ms T] [--gap-before-ms T2] [--restore-ms T]
 *                [--json FILE] [--base B]
 *
 * --base B numbers a run's transactions from B + 1 (per client), and
 * check then leaves the table's rows numbered B or below to earlier runs:
 * several runs, each with its own journal, on one table.
 *
 * run: N connections, each a loop of transactions, one statement each:
 *     BEGIN; INSERT K rows (txn = client * 10^9 + n, item 0..K-1); COMMIT
 * Every M-th transaction ends in ROLLBACK instead.  Before a COMMIT or
 * ROLLBACK is sent, "S n" or "R n" goes to the client's journal; when the
 * server acknowledges the COMMIT, "A n ms".  The journal is written with
 * write(2) before the next step, so a SIGKILLed ledger leaves a journal
 * that is true up to its last line.  Every wait on the server has a
 * deadline (--wait-timeout, default 30 s).
 *
 * Without --reconnect (plain Remus: connections must survive a failover)
 * any error ends that client and is counted as a broken connection.  With
 * --reconnect (commit protection: the standby aborts what was not
 * committing, and resets inconsistent connections) an error is journaled
 * and the client goes on: "E n ms" for an error in transaction n, "F n ms"
 * for a COMMIT the server answered with an error (so it did not commit),
 * "X ms" when the connection broke, then a new connection ("C ms").
 *
 * --speculators K adds K clients (numbered after the N) that each open a
 * transaction, insert their rows and so see their results, journal
 * "H n ms", and wait, without asking to commit, until --pull-file
 * exists (the harness creates it when it pulls the power); then they
 * journal "P n ms" and send COMMIT.  The standby must not have committed
 * such a transaction (I3, the speculation lemma): an acknowledgement or
 * its rows in the table are violations.
 *
 * --readers R adds R clients (numbered after the speculators) that only
 * read, in a loop of autocommit statements (SELECT max(txn) FROM ledger),
 * journaling "Q n ms" for each answer: under commit protection their
 * answers leave unprotected, so at a pull they have seen output the
 * standby may not have, and their connections must be reset at once, not
 * left to stall.  They count in the stall check.  --reader-host H2: the
 * readers connect to H2 (the same server through another of its
 * addresses: a VM's second NIC) while the others use H.
 *
 * check: reads the journals and the table and reports, as JSON:
 *   acked_commits  COMMITs the server acknowledged
 *   lost_commits   acknowledged, not (wholly) in the table      (I2)
 *   phantom_txns   in the table but never COMMIT-sent, rolled back, or
 *                  answered with an error                       (I3)
 *   partial_txns   present with fewer or more than K rows        (I3)
 *   speculative_committed  a speculator's transaction committed   (I3)
 *   in_doubt       COMMIT sent, no answer: either way is right
 *   broken_connections  clients whose connection broke (without
 *                  --reconnect: a failure)
 *   errors, reconnects, failed_commits
 *   max_gap_ms     longest time without any acknowledged commit
 *   failover_gap_ms the longest gap ending after --pull-ms that began at
 *                  most 1 s before it (and ended before --gap-before-ms,
 *                  when a later event's gap must not count): the outage
 *                  clients saw
 *   max_client_wait_ms  with --restore-ms: the longest any client waited
 *                  after the restore for its next answer (an
 *                  acknowledgement or an error); stalled_clients: those
 *                  that waited more than 2 s or got none
 *   tps_before / tps_after  commits/s in the 10 s before the pull and
 *                  after the gap
 * Exit 0 when nothing is lost, phantom, partial or speculatively
 * committed, no client stalled, and (without --reconnect) no connection
 * broke; 1 otherwise; 2 on usage or setup errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ledger_db.h"

#define TXN_BASE ((int64_t)1000000000)
#define STALL_MS 2000

/* MariaDB support is linked in when ledger_my.c is built. */
extern const struct ldb_ops ldb_my_ops __attribute__((weak));

static const struct ldb_ops *ops = &ldb_pg_ops;
static const char *host = "127.0.0.1", *port, *db = "ledger", *user;
static const char *reader_host;
static const char *journal_dir, *stop_file, *json_path, *pull_file;
static int nclients = 4, items = 3, rollback_every = 10, nspec, nreaders;
static double duration_s = 10, wait_timeout_s = 30;
static int64_t pull_ms = -1, restore_ms = -1, gap_before_ms = -1;
/* --base B: this run's transactions are numbered from B + 1, and check
 * leaves rows numbered B or below to the runs before (several runs on
 * one table: tests/soak) */
static int64_t base_n;
static bool reconnect;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "ledger: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static struct ldb *connect_db(char *err, size_t errlen)
{
	return ops->connect(host, port, db, user, wait_timeout_s, err, errlen);
}

static void jwrite(int fd, const char *fmt, ...)
{
	char line[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (write(fd, line, (size_t)n) != n) {
		fprintf(stderr, "ledger: journal write: %s\n", strerror(errno));
		exit(2);
	}
}

static bool exists(const char *path)
{
	struct stat sb;

	return path && stat(path, &sb) == 0;
}

static bool stop_requested(int64_t end)
{
	return mono_ms() >= end || exists(stop_file);
}

static int open_journal(int id)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/client-%d.journal", journal_dir, id);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd < 0)
		die("%s: %s", path, strerror(errno));
	return fd;
}

static void insert_sql(char *q, size_t len, int id, int64_t txn)
{
	size_t at = (size_t)snprintf(q, len, "INSERT INTO ledger "
				     "(txn, item, client, amount) VALUES ");

	for (int i = 0; i < items; i++)
		at += (size_t)snprintf(q + at, len - at,
				       "%s(%" PRId64 ", %d, %d, %" PRId64 ")",
				       i ? ", " : "", txn, i, id, txn % 1000 + i);
}

/* Connects, retrying until the deadline (the server may be failing
 * over); NULL when it is over. */
static struct ldb *connect_retry(int fd, int id, int64_t end)
{
	char err[512];

	for (;;) {
		struct ldb *c = connect_db(err, sizeof(err));

		if (c) {
			jwrite(fd, "C %" PRId64 "\n", now_ms());
			return c;
		}
		if (!reconnect || stop_requested(end)) {
			fprintf(stderr, "ledger: client %d: connect: %s\n", id, err);
			return NULL;
		}
		usleep(100 * 1000);
	}
}

/* One client: its own process, so a stall of one never holds another. */
static int client_main(int id)
{
	int64_t end = mono_ms() + (int64_t)(duration_s * 1000);
	char q[4096], err[512];
	struct ldb *c;
	int fd = open_journal(id);
	enum ldb_rc rc;

	c = connect_retry(fd, id, end);
	if (!c) {
		jwrite(fd, "X %" PRId64 "\n", now_ms());
		return 1;
	}
	for (int64_t n = base_n + 1; !stop_requested(end); n++) {
		int64_t txn = (int64_t)id * TXN_BASE + n;
		bool rollback = rollback_every > 0 && n % rollback_every == 0;
		bool at_commit = false;

		rc = ops->exec(c, "BEGIN", err, sizeof(err));
		if (rc == LDB_OK) {
			insert_sql(q, sizeof(q), id, txn);
			rc = ops->exec(c, q, err, sizeof(err));
		}
		if (rc == LDB_OK) {
			jwrite(fd, "%c %" PRId64 "\n", rollback ? 'R' : 'S', n);
			at_commit = true;
			rc = ops->exec(c, rollback ? "ROLLBACK" : "COMMIT", err,
				       sizeof(err));
		}
		if (rc == LDB_OK) {
			if (!rollback)
				jwrite(fd, "A %" PRId64 " %" PRId64 "\n", n, now_ms());
			continue;
		}
		fprintf(stderr, "ledger: client %d, txn %" PRId64 ": %s\n", id, n, err);
		if (!reconnect) {
			jwrite(fd, "X %" PRId64 "\n", now_ms());
			ops->close(c);
			close(fd);
			return 1;
		}
		jwrite(fd, "%c %" PRId64 " %" PRId64 "\n",
		       at_commit && !rollback && rc == LDB_ERROR ? 'F' : 'E', n, now_ms());
		if (rc == LDB_ERROR) {
			/* the connection lives: end the transaction */
			if (ops->exec(c, "ROLLBACK", err, sizeof(err)) != LDB_BROKEN)
				continue;
		}
		jwrite(fd, "X %" PRId64 "\n", now_ms());
		ops->close(c);
		c = connect_retry(fd, id, end);
		if (!c)
			break;
	}
	ops->close(c);
	jwrite(fd, "Z %" PRId64 "\n", now_ms());
	close(fd);
	return 0;
}

/* A speculator: a transaction that has shown its results and has not
 * asked to commit when the power is pulled; it asks only after. */
static int speculator_main(int id)
{
	int64_t end = mono_ms() + (int64_t)(duration_s * 1000);
	int64_t txn = (int64_t)id * TXN_BASE + 1;
	char q[4096], err[512];
	struct ldb *c;
	int fd = open_journal(id);
	enum ldb_rc rc;

	c = connect_retry(fd, id, end);
	if (!c) {
		jwrite(fd, "X %" PRId64 "\n", now_ms());
		return 1;
	}
	rc = ops->exec(c, "BEGIN", err, sizeof(err));
	if (rc == LDB_OK) {
		insert_sql(q, sizeof(q), id, txn);
		rc = ops->exec(c, q, err, sizeof(err));
	}
	if (rc != LDB_OK) {
		fprintf(stderr, "ledger: speculator %d: %s\n", id, err);
		jwrite(fd, "X %" PRId64 "\n", now_ms());
		ops->close(c);
		return 1;
	}
	jwrite(fd, "H 1 %" PRId64 "\n", now_ms());
	while (!exists(pull_file) && !stop_requested(end))
		usleep(20 * 1000);
	if (!exists(pull_file)) {
		/* no pull came: nothing to speculate about */
		ops->exec(c, "ROLLBACK", err, sizeof(err));
		jwrite(fd, "Z %" PRId64 "\n", now_ms());
		ops->close(c);
		return 0;
	}
	jwrite(fd, "P 1 %" PRId64 "\n", now_ms());
	rc = ops->exec(c, "COMMIT", err, sizeof(err));
	if (rc == LDB_OK) {
		jwrite(fd, "A 1 %" PRId64 "\n", now_ms());
	} else {
		fprintf(stderr, "ledger: speculator %d: COMMIT after the pull: %s\n",
			id, err);
		jwrite(fd, "%c 1 %" PRId64 "\n", rc == LDB_ERROR ? 'F' : 'E', now_ms());
		if (rc != LDB_ERROR)
			jwrite(fd, "X %" PRId64 "\n", now_ms());
	}
	ops->close(c);
	jwrite(fd, "Z %" PRId64 "\n", now_ms());
	close(fd);
	return 0;
}

/* A reader: autocommit reads, answered unprotected under `writes`. */
static int reader_main(int id)
{
	int64_t end = mono_ms() + (int64_t)(duration_s * 1000);
	char err[512];
	struct ldb *c;
	int fd = open_journal(id);
	enum ldb_rc rc;

	if (reader_host)
		host = reader_host;	/* (a process of its own: fork) */
	c = connect_retry(fd, id, end);
	if (!c) {
		jwrite(fd, "X %" PRId64 "\n", now_ms());
		return 1;
	}
	for (int64_t n = 1; !stop_requested(end); n++) {
		rc = ops->exec(c, "SELECT max(txn) FROM ledger", err, sizeof(err));
		if (rc == LDB_OK) {
			jwrite(fd, "Q %" PRId64 " %" PRId64 "\n", n, now_ms());
			continue;
		}
		fprintf(stderr, "ledger: reader %d: %s\n", id, err);
		jwrite(fd, "E %" PRId64 " %" PRId64 "\n", n, now_ms());
		if (!reconnect) {
			jwrite(fd, "X %" PRId64 "\n", now_ms());
			ops->close(c);
			return 1;
		}
		if (rc == LDB_ERROR)
			continue;
		jwrite(fd, "X %" PRId64 "\n", now_ms());
		ops->close(c);
		c = connect_retry(fd, id, end);
		if (!c)
			break;
	}
	ops->close(c);
	jwrite(fd, "Z %" PRId64 "\n", now_ms());
	close(fd);
	return 0;
}

static int do_run(void)
{
	int total = nclients + nspec + nreaders, failed = 0, status;
	pid_t *pids = calloc((size_t)total, sizeof(*pids));

	if (!journal_dir)
		die("run needs --journal DIR");
	if (nspec && !pull_file)
		die("--speculators needs --pull-file");
	mkdir(journal_dir, 0755);
	for (int i = 0; i < total; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die("fork: %s", strerror(errno));
		if (pids[i] == 0)
			_exit(i < nclients ? client_main(i + 1) :
			      i < nclients + nspec ? speculator_main(i + 1) :
			      reader_main(i + 1));
	}
	for (int i = 0; i < total; i++) {
		if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			failed++;
	}
	free(pids);
	fprintf(stderr, "ledger: %d clients done, %d failed\n", total, failed);
	return failed ? 1 : 0;
}

/* ---- check ---- */

enum tstate { T_NONE, T_SENT, T_ACKED, T_ROLLED, T_FAILED, T_HELD, T_POST };

struct client_log {
	unsigned char *st;	/* by transaction number */
	int64_t n, cap;
	bool broken, connected, speculator;
	int64_t first_event_after_pull;	/* A E F X, ms; -1 none */
	bool done_before_pull;		/* ended (Z) before the pull */
};

struct check {
	struct client_log *cl;
	int64_t partial, phantom, spec_committed;
};

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void set_state(struct client_log *c, int64_t n, enum tstate s)
{
	while (n >= c->cap) {
		int64_t cap = c->cap ? c->cap * 2 : 1024;

		c->st = realloc(c->st, (size_t)cap);
		if (!c->st)
			die("out of memory");
		memset(c->st + c->cap, 0, (size_t)(cap - c->cap));
		c->cap = cap;
	}
	if (n > c->n)
		c->n = n;
	c->st[n] = (unsigned char)s;
}

static void on_count(void *opaque, int64_t txn, int64_t cnt)
{
	struct check *k = opaque;
	int64_t id = txn / TXN_BASE, n = txn % TXN_BASE;
	int total = nclients + nspec;
	int s = id >= 1 && id <= nclients && n <= k->cl[id].n ? k->cl[id].st[n] : T_NONE;

	if (n <= base_n && id >= 1 && id <= nclients)
		return;		/* an earlier run's (--base) */
	if (cnt != items)
		k->partial++;
	if (s == T_HELD || s == T_POST || (id > nclients && id <= total)) {
		k->spec_committed++;
		fprintf(stderr, "ledger: speculative txn %" PRId64 " COMMITTED "
			"(it had not asked to commit before the pull)\n", txn);
		return;
	}
	if (s == T_NONE || s == T_ROLLED || s == T_FAILED) {
		k->phantom++;
		if (k->phantom <= 5)
			fprintf(stderr, "ledger: phantom txn %" PRId64 " (%s)\n", txn,
				s == T_ROLLED ? "rolled back" : s == T_FAILED ?
				"its COMMIT was answered with an error" :
				"COMMIT never sent");
		return;
	}
	if (s == T_ACKED && cnt == items)
		k->cl[id].st[n] = 0x80 | T_ACKED;	/* found */
}

static int do_check(void)
{
	int total = nclients + nspec + nreaders;
	struct client_log *cl = calloc((size_t)total + 1, sizeof(*cl));
	int64_t reads = 0;
	struct check k = { .cl = cl };
	int64_t *acks = NULL, nacks = 0, capacks = 0;
	int64_t acked = 0, lost = 0, in_doubt = 0, rolled = 0, broken = 0;
	int64_t errors = 0, failed_commits = 0, reconnects = 0, spec_acked = 0;
	int64_t max_gap = 0, max_gap_at = 0, fo_gap = -1, before = 0, after = 0;
	int64_t gap_end = -1, first_ack = INT64_MAX, last_ack = 0;
	int64_t max_wait = -1, stalled = 0, errors_after_pull = 0;
	double tps_before = 0, tps_after = 0, after_span = 0;
	struct ldb *c;
	FILE *out = stdout;
	char path[512], line[128], err[512];
	enum ldb_rc rc;

	if (!journal_dir)
		die("check needs --journal DIR");
	for (int i = 1; i <= total; i++) {
		FILE *f;
		bool connected_before = false;

		cl[i].speculator = i > nclients;
		cl[i].first_event_after_pull = -1;
		snprintf(path, sizeof(path), "%s/client-%d.journal", journal_dir, i);
		f = fopen(path, "r");
		if (!f)
			die("%s: %s", path, strerror(errno));
		while (fgets(line, sizeof(line), f)) {
			int64_t n = 0, t = -1;
			char kind = line[0];
			int got;

			got = sscanf(line + 1, "%" SCNd64 " %" SCNd64, &n, &t);
			switch (kind) {
			case 'C':
				if (connected_before)
					reconnects++;
				connected_before = cl[i].connected = true;
				continue;
			case 'Z':
				if (pull_ms >= 0 && got >= 1 && n < pull_ms)
					cl[i].done_before_pull = true;
				continue;
			case 'X':
				cl[i].broken = true;
				t = n;
				break;
			case 'Q':
				reads++;
				if (got < 2)
					die("%s: bad line %s", path, line);
				break;
			case 'S': case 'R': case 'A': case 'E': case 'F':
			case 'H': case 'P':
				if (got < 1 || n <= 0 || n >= TXN_BASE)
					die("%s: bad line %s", path, line);
				break;
			default:
				continue;
			}
			if (kind == 'S')
				set_state(&cl[i], n, T_SENT);
			else if (kind == 'R')
				set_state(&cl[i], n, T_ROLLED);
			else if (kind == 'H')
				set_state(&cl[i], n, T_HELD);
			else if (kind == 'P')
				set_state(&cl[i], n, T_POST);
			else if (kind == 'F') {
				failed_commits++;
				if (n <= cl[i].n && cl[i].st[n] != T_NONE)
					set_state(&cl[i], n, T_FAILED);
			} else if (kind == 'A') {
				if (cl[i].speculator) {
					spec_acked++;
					fprintf(stderr, "ledger: speculator %d got its "
						"COMMIT (asked after the pull) "
						"acknowledged\n", i);
				}
				set_state(&cl[i], n, T_ACKED);
				if (nacks == capacks) {
					capacks = capacks ? capacks * 2 : 4096;
					acks = realloc(acks, (size_t)capacks * sizeof(*acks));
				}
				acks[nacks++] = t;
			}
			if (kind == 'E' || kind == 'F')
				errors++;
			/* answers after the pull: A E F X, and Q of readers */
			if (strchr("AEFXQ", kind) && pull_ms >= 0 && t >= pull_ms) {
				if (kind == 'E' || kind == 'F')
					errors_after_pull++;
				if (cl[i].first_event_after_pull < 0)
					cl[i].first_event_after_pull = t;
			}
		}
		fclose(f);
		if (cl[i].broken || !cl[i].connected)
			broken++;
	}

	c = connect_db(err, sizeof(err));
	if (!c)
		die("cannot connect to check the ledger: %s", err);
	rc = ops->txn_counts(c, on_count, &k, err, sizeof(err));
	if (rc != LDB_OK)
		die("query: %s", err);
	ops->close(c);
	for (int i = 1; i <= nclients; i++)
		for (int64_t n = 1; n <= cl[i].n; n++) {
			int s = cl[i].st[n];

			if ((s & 0x7f) == T_ACKED)
				acked++;
			if (s == T_ACKED) {
				lost++;
				if (lost <= 5)
					fprintf(stderr, "ledger: LOST acknowledged txn %"
						PRId64 "\n", (int64_t)i * TXN_BASE + n);
			}
			if (s == T_SENT)
				in_doubt++;
			if (s == T_ROLLED)
				rolled++;
		}

	/* Every client answered within STALL_MS of the restore. */
	if (restore_ms >= 0 && pull_ms >= 0) {
		for (int i = 1; i <= total; i++) {
			int64_t w;

			if (cl[i].done_before_pull)
				continue;
			if (cl[i].first_event_after_pull < 0) {
				stalled++;
				fprintf(stderr, "ledger: client %d: no answer at all "
					"after the pull\n", i);
				continue;
			}
			w = cl[i].first_event_after_pull - restore_ms;
			if (w < 0)
				w = 0;
			if (w > max_wait)
				max_wait = w;
			if (w > STALL_MS) {
				stalled++;
				fprintf(stderr, "ledger: client %d waited %" PRId64
					" ms after the restore\n", i, w);
			}
		}
	}

	qsort(acks, (size_t)nacks, sizeof(*acks), cmp64);
	for (int64_t i = 0; i < nacks; i++) {
		if (acks[i] < first_ack)
			first_ack = acks[i];
		if (acks[i] > last_ack)
			last_ack = acks[i];
		if (i && acks[i] - acks[i - 1] > max_gap) {
			max_gap = acks[i] - acks[i - 1];
			max_gap_at = acks[i - 1];
		}
		/* The outage the pull caused: the longest silence that ends
		 * after it and began at most 1 s before it (a commit may still
		 * be acknowledged between reading the clock and the links going
		 * down, so "the gap around pull_ms" alone can be a short one). */
		if (pull_ms >= 0 && i && acks[i] > pull_ms &&
		    acks[i - 1] >= pull_ms - 1000 &&
		    (gap_before_ms < 0 || acks[i] < gap_before_ms) &&
		    acks[i] - acks[i - 1] > fo_gap) {
			fo_gap = acks[i] - acks[i - 1];
			gap_end = acks[i];
		}
	}
	if (pull_ms >= 0) {
		for (int64_t i = 0; i < nacks; i++) {
			if (acks[i] <= pull_ms && acks[i] > pull_ms - 10000)
				before++;
			if (gap_end >= 0 && acks[i] >= gap_end)
				after++;
		}
		tps_before = before / 10.0;
		after_span = gap_end >= 0 ? (double)(last_ack - gap_end) / 1000 : 0;
		tps_after = after_span > 0 ? after / after_span : 0;
	}
	if (json_path) {
		out = fopen(json_path, "w");
		if (!out)
			die("%s: %s", json_path, strerror(errno));
	}
	fprintf(out, "{\"dbms\": \"%s\", \"clients\": %d, \"speculators\": %d, "
		"\"readers\": %d, \"reads\": %" PRId64 ", "
		"\"items_per_txn\": %d, "
		"\"acked_commits\": %" PRId64 ", \"lost_commits\": %" PRId64 ", "
		"\"phantom_txns\": %" PRId64 ", \"partial_txns\": %" PRId64 ", "
		"\"speculative_committed\": %" PRId64 ", "
		"\"speculative_acked\": %" PRId64 ", "
		"\"in_doubt\": %" PRId64 ", \"rolled_back\": %" PRId64 ", "
		"\"broken_connections\": %" PRId64 ", \"reconnects\": %" PRId64 ", "
		"\"errors\": %" PRId64 ", \"errors_after_pull\": %" PRId64 ", "
		"\"failed_commits\": %" PRId64 ", "
		"\"max_client_wait_ms\": %" PRId64 ", \"stalled_clients\": %" PRId64 ", "
		"\"max_gap_ms\": %" PRId64 ", "
		"\"max_gap_at_ms\": %" PRId64 ", \"failover_gap_ms\": %" PRId64 ", "
		"\"tps_before\": %.1f, \"tps_after\": %.1f, \"run_s\": %.1f}\n",
		ops->name, nclients, nspec, nreaders, reads, items, acked, lost, k.phantom, k.partial,
		k.spec_committed, spec_acked, in_doubt, rolled, broken, reconnects,
		errors, errors_after_pull, failed_commits, max_wait, stalled,
		max_gap, max_gap_at, fo_gap, tps_before, tps_after,
		nacks ? (double)(last_ack - first_ack) / 1000 : 0.0);
	if (out != stdout)
		fclose(out);
	for (int i = 1; i <= total; i++)
		free(cl[i].st);
	free(cl);
	free(acks);
	return lost || k.phantom || k.partial || k.spec_committed || spec_acked ||
	       stalled || (broken && !reconnect) ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ledger run --host H [--dbms postgresql|mariadb] [--port P] [--db D]\n"
		"                  [--user U] [--clients N] [--items K] --duration S\n"
		"                  --journal DIR [--rollback-every M] [--wait-timeout S]\n"
		"                  [--stop-file F] [--reconnect]\n"
		"                  [--speculators K --pull-file F] [--readers R]\n"
		"                  [--reader-host H2] [--base B]\n"
		"       ledger check --host H [--dbms ...] [--port P] [--db D] [--user U]\n"
		"                  --journal DIR [--clients N] [--items K] [--speculators K]\n"
		"                  [--readers R]\n"
		"                  [--reconnect] [--pull-ms T] [--gap-before-ms T2]\n"
		"                  [--restore-ms T] [--json FILE]\n"
		"                  [--base B]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'h' },
		{ "dbms", required_argument, NULL, 'D' },
		{ "port", required_argument, NULL, 'p' },
		{ "db", required_argument, NULL, 'd' },
		{ "user", required_argument, NULL, 'u' },
		{ "clients", required_argument, NULL, 'c' },
		{ "items", required_argument, NULL, 'k' },
		{ "duration", required_argument, NULL, 't' },
		{ "journal", required_argument, NULL, 'j' },
		{ "rollback-every", required_argument, NULL, 'r' },
		{ "wait-timeout", required_argument, NULL, 'w' },
		{ "stop-file", required_argument, NULL, 's' },
		{ "reconnect", no_argument, NULL, 'R' },
		{ "speculators", required_argument, NULL, 'S' },
		{ "readers", required_argument, NULL, 'Q' },
		{ "reader-host", required_argument, NULL, 'H' },
		{ "pull-file", required_argument, NULL, 'F' },
		{ "pull-ms", required_argument, NULL, 'P' },
		{ "gap-before-ms", required_argument, NULL, 'G' },
		{ "restore-ms", required_argument, NULL, 'T' },
		{ "json", required_argument, NULL, 'J' },
		{ "base", required_argument, NULL, 'B' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd;
	int o;

	if (argc < 2)
		usage();
	cmd = argv[1];
	optind = 2;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'h': host = optarg; break;
		case 'D':
			if (!strcmp(optarg, "postgresql"))
				ops = &ldb_pg_ops;
			else if (!strcmp(optarg, "mariadb") && &ldb_my_ops)
				ops = &ldb_my_ops;
			else
				die("--dbms %s: not built into this ledger", optarg);
			break;
		case 'p': port = optarg; break;
		case 'd': db = optarg; break;
		case 'u': user = optarg; break;
		case 'c': nclients = atoi(optarg); break;
		case 'k': items = atoi(optarg); break;
		case 't': duration_s = atof(optarg); break;
		case 'j': journal_dir = optarg; break;
		case 'r': rollback_every = atoi(optarg); break;
		case 'w': wait_timeout_s = atof(optarg); break;
		case 's': stop_file = optarg; break;
		case 'R': reconnect = true; break;
		case 'S': nspec = atoi(optarg); break;
		case 'Q': nreaders = atoi(optarg); break;
		case 'H': reader_host = optarg; break;
		case 'F': pull_file = optarg; break;
		case 'P': pull_ms = strtoll(optarg, NULL, 10); break;
		case 'G': gap_before_ms = strtoll(optarg, NULL, 10); break;
		case 'T': restore_ms = strtoll(optarg, NULL, 10); break;
		case 'J': json_path = optarg; break;
		case 'B': base_n = strtoll(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (nclients < 1 || nclients > 64 || nspec < 0 || nspec > 16 ||
	    nreaders < 0 || nreaders > 16 ||
	    items < 1 || items > 100 || wait_timeout_s <= 0 || duration_s <= 0)
		die("bad --clients (1-64), --speculators (0-16), --items (1-100), "
		    "--duration or --wait-timeout");
	if (!port)
		port = ops->default_port;
	if (!user)
		user = ops->default_user;
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(cmd, "run"))
		return do_run();
	if (!strcmp(cmd, "check"))
		return do_check();
	usage();
	return 2;
}
