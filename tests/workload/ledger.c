// SPDX-License-Identifier: GPL-2.0-only
/*
 * ledger: the PostgreSQL workload whose every acknowledged commit must
 * survive a failover.
 *
 *   ledger run   --host H [--port P] [--db D] [--clients N] [--items K]
 *                --duration S --journal DIR [--rollback-every M]
 *                [--wait-timeout S] [--stop-file F]
 *   ledger check --host H [--port P] [--db D] --journal DIR [--items K]
 *                [--pull-ms T] [--json FILE]
 *
 * run: N connections, each a loop of transactions
 *     BEGIN; INSERT K rows (txn = client * 10^9 + n, item 0..K-1); COMMIT
 * Every M-th transaction ends in ROLLBACK instead.  Before a COMMIT or
 * ROLLBACK is sent, "S n" or "R n" goes to the client's journal; when the
 * server acknowledges the COMMIT, "A n ms" (wall clock, ms).  The journal is
 * written with write(2) before the next step, so a SIGKILLed ledger
 * leaves a journal that is true up to its last line.  Every wait on the
 * server has a deadline (--wait-timeout, default 30 s); a broken or
 * timed-out connection ends that client and is counted, never retried: in
 * plain Remus mode the connection must survive a failover.
 *
 * check: reads the journals and the table and reports, as JSON:
 *   acked_commits  COMMITs the server acknowledged
 *   lost_commits   acknowledged, not (wholly) in the table      (I2)
 *   phantom_txns   in the table but never COMMIT-sent, or rolled
 *                  back                                          (I3)
 *   partial_txns   present with fewer or more than K rows        (I3)
 *   in_doubt       COMMIT sent, no answer: either way is right
 *   broken_connections  clients whose connection did not survive
 *   max_gap_ms     longest time without any acknowledged commit
 *   failover_gap_ms the longest gap ending after --pull-ms that began at
 *                  most 1 s before it: the outage clients saw
 *   tps_before / tps_after  commits/s in the 10 s before the pull and
 *                  after the gap
 * Exit 0 when nothing is lost, phantom or partial and no connection
 * broke; 1 otherwise; 2 on usage or setup errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
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

#include <libpq-fe.h>

#define TXN_BASE ((int64_t)1000000000)

static const char *host = "127.0.0.1", *port = "5432", *db = "ledger";
static const char *journal_dir, *stop_file, *json_path;
static int nclients = 4, items = 3, rollback_every = 10;
static double duration_s = 10, wait_timeout_s = 30;
static int64_t pull_ms = -1;

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

static PGconn *connect_db(void)
{
	char conninfo[512];
	PGconn *c;

	snprintf(conninfo, sizeof(conninfo),
		 "host=%s port=%s dbname=%s user=postgres connect_timeout=%d "
		 "keepalives=1 application_name=ledger", host, port, db,
		 (int)wait_timeout_s);
	c = PQconnectdb(conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "ledger: connect %s:%s/%s: %s", host, port, db,
			PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	return c;
}

/* Sends q and waits for every result until the deadline; 0 if all were
 * OK, -1 with *why set otherwise.  A timeout is -2. */
static int run_query(PGconn *c, const char *q, const char **why)
{
	int64_t deadline = mono_ms() + (int64_t)(wait_timeout_s * 1000);
	int rc = 0;
	PGresult *r;

	*why = NULL;
	if (!PQsendQuery(c, q)) {
		*why = PQerrorMessage(c);
		return -1;
	}
	for (;;) {
		while (PQisBusy(c)) {
			struct pollfd p = { .fd = PQsocket(c), .events = POLLIN };
			int64_t left = deadline - mono_ms();

			if (left <= 0) {
				*why = "no answer before the deadline";
				return -2;
			}
			if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
				*why = "poll failed";
				return -1;
			}
			if (!PQconsumeInput(c)) {
				*why = PQerrorMessage(c);
				return -1;
			}
		}
		r = PQgetResult(c);
		if (!r)
			break;
		if (PQresultStatus(r) != PGRES_COMMAND_OK &&
		    PQresultStatus(r) != PGRES_TUPLES_OK) {
			*why = PQresultErrorMessage(r);
			rc = -1;
		}
		PQclear(r);
	}
	if (PQstatus(c) != CONNECTION_OK) {
		*why = PQerrorMessage(c);
		return -1;
	}
	return rc;
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

static bool stop_requested(int64_t end)
{
	struct stat sb;

	return mono_ms() >= end || (stop_file && stat(stop_file, &sb) == 0);
}

/* One client: its own process, so a stall of one never holds another. */
static int client_main(int id)
{
	char path[512], q[4096];
	int64_t end = mono_ms() + (int64_t)(duration_s * 1000);
	const char *why;
	PGconn *c;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/client-%d.journal", journal_dir, id);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd < 0)
		die("%s: %s", path, strerror(errno));
	c = connect_db();
	if (!c) {
		jwrite(fd, "X connect\n");
		return 1;
	}
	jwrite(fd, "C %" PRId64 "\n", now_ms());
	for (int64_t n = 1; !stop_requested(end); n++) {
		int64_t txn = (int64_t)id * TXN_BASE + n;
		bool rollback = rollback_every > 0 && n % rollback_every == 0;
		size_t at;

		at = (size_t)snprintf(q, sizeof(q), "BEGIN; INSERT INTO ledger "
				      "(txn, item, client, amount) VALUES ");
		for (int i = 0; i < items; i++)
			at += (size_t)snprintf(q + at, sizeof(q) - at,
					       "%s(%" PRId64 ", %d, %d, %" PRId64 ")",
					       i ? ", " : "", txn, i, id, txn % 1000 + i);
		rc = run_query(c, q, &why);
		if (rc < 0)
			goto broken;
		jwrite(fd, "%c %" PRId64 "\n", rollback ? 'R' : 'S', n);
		rc = run_query(c, rollback ? "ROLLBACK" : "COMMIT", &why);
		if (rc < 0)
			goto broken;
		if (!rollback)
			jwrite(fd, "A %" PRId64 " %" PRId64 "\n", n, now_ms());
	}
	PQfinish(c);
	jwrite(fd, "E %" PRId64 "\n", now_ms());
	close(fd);
	return 0;
broken:
	fprintf(stderr, "ledger: client %d: %s", id, why ? why : "?\n");
	jwrite(fd, "X %" PRId64 "\n", now_ms());
	PQfinish(c);
	close(fd);
	return 1;
}

static int do_run(void)
{
	pid_t *pids = calloc((size_t)nclients, sizeof(*pids));
	int failed = 0, status;

	if (!journal_dir)
		die("run needs --journal DIR");
	mkdir(journal_dir, 0755);
	for (int i = 0; i < nclients; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die("fork: %s", strerror(errno));
		if (pids[i] == 0)
			_exit(client_main(i + 1));
	}
	for (int i = 0; i < nclients; i++) {
		if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			failed++;
	}
	free(pids);
	fprintf(stderr, "ledger: %d clients done, %d with a broken connection\n",
		nclients, failed);
	return failed ? 1 : 0;
}

/* ---- check ---- */

enum tstate { T_NONE, T_SENT, T_ACKED, T_ROLLED };

struct client_log {
	unsigned char *st;	/* by transaction number */
	int64_t n;
	bool broken, connected;
};

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int do_check(void)
{
	struct client_log *cl = calloc((size_t)nclients + 1, sizeof(*cl));
	int64_t *acks = NULL, nacks = 0, capacks = 0;
	int64_t acked = 0, lost = 0, phantom = 0, partial = 0, in_doubt = 0;
	int64_t rolled = 0, broken = 0, max_gap = 0, max_gap_at = 0;
	int64_t fo_gap = -1, before = 0, after = 0, gap_end = -1;
	double tps_before = 0, tps_after = 0, after_span = 0;
	int64_t first_ack = INT64_MAX, last_ack = 0;
	PGconn *c;
	PGresult *r;
	FILE *out = stdout;
	char path[512], line[128];

	if (!journal_dir)
		die("check needs --journal DIR");
	for (int i = 1; i <= nclients; i++) {
		FILE *f;
		int64_t cap = 1024;

		snprintf(path, sizeof(path), "%s/client-%d.journal", journal_dir, i);
		f = fopen(path, "r");
		if (!f)
			die("%s: %s", path, strerror(errno));
		cl[i].st = calloc((size_t)cap, 1);
		while (fgets(line, sizeof(line), f)) {
			int64_t n = 0, t = 0;
			char k = line[0];

			if (k == 'X') {
				cl[i].broken = true;
				continue;
			}
			if (k == 'C') {
				cl[i].connected = true;
				continue;
			}
			if (k != 'S' && k != 'R' && k != 'A')
				continue;
			if (sscanf(line + 2, "%" SCNd64 " %" SCNd64, &n, &t) < 1 ||
			    n <= 0 || n >= TXN_BASE)
				die("%s: bad line %s", path, line);
			while (n >= cap) {
				cl[i].st = realloc(cl[i].st, (size_t)cap * 2);
				memset(cl[i].st + cap, 0, (size_t)cap);
				cap *= 2;
			}
			if (n > cl[i].n)
				cl[i].n = n;
			cl[i].st[n] = k == 'S' ? T_SENT : k == 'R' ? T_ROLLED : T_ACKED;
			if (k == 'A') {
				if (nacks == capacks) {
					capacks = capacks ? capacks * 2 : 4096;
					acks = realloc(acks, (size_t)capacks * sizeof(*acks));
				}
				acks[nacks++] = t;
			}
		}
		fclose(f);
		if (cl[i].broken || !cl[i].connected)
			broken++;
	}

	c = connect_db();
	if (!c)
		die("cannot connect to check the ledger");
	r = PQexec(c, "SELECT txn, count(*) FROM ledger GROUP BY txn");
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die("query: %s", PQresultErrorMessage(r));
	for (int row = 0; row < PQntuples(r); row++) {
		int64_t txn = strtoll(PQgetvalue(r, row, 0), NULL, 10);
		int cnt = atoi(PQgetvalue(r, row, 1));
		int64_t id = txn / TXN_BASE, n = txn % TXN_BASE;
		int s = id >= 1 && id <= nclients && n <= cl[id].n ?
			cl[id].st[n] : T_NONE;

		if (cnt != items)
			partial++;
		if (s == T_NONE || s == T_ROLLED) {
			phantom++;
			if (phantom <= 5)
				fprintf(stderr, "ledger: phantom txn %" PRId64
					" (%s)\n", txn, s == T_ROLLED ?
					"rolled back" : "COMMIT never sent");
			continue;
		}
		if (s == T_ACKED && cnt == items)
			cl[id].st[n] = 0x80 | T_ACKED;	/* found */
	}
	PQclear(r);
	PQfinish(c);
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
		    acks[i - 1] >= pull_ms - 1000 && acks[i] - acks[i - 1] > fo_gap) {
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
	fprintf(out, "{\"clients\": %d, \"items_per_txn\": %d, "
		"\"acked_commits\": %" PRId64 ", \"lost_commits\": %" PRId64 ", "
		"\"phantom_txns\": %" PRId64 ", \"partial_txns\": %" PRId64 ", "
		"\"in_doubt\": %" PRId64 ", \"rolled_back\": %" PRId64 ", "
		"\"broken_connections\": %" PRId64 ", \"max_gap_ms\": %" PRId64 ", "
		"\"max_gap_at_ms\": %" PRId64 ", \"failover_gap_ms\": %" PRId64 ", "
		"\"tps_before\": %.1f, \"tps_after\": %.1f, \"run_s\": %.1f}\n",
		nclients, items, acked, lost, phantom, partial, in_doubt, rolled,
		broken, max_gap, max_gap_at, fo_gap, tps_before, tps_after,
		nacks ? (double)(last_ack - first_ack) / 1000 : 0.0);
	if (out != stdout)
		fclose(out);
	for (int i = 1; i <= nclients; i++)
		free(cl[i].st);
	free(cl);
	free(acks);
	return lost || phantom || partial || broken ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ledger run --host H [--port P] [--db D] [--clients N] [--items K]\n"
		"                  --duration S --journal DIR [--rollback-every M]\n"
		"                  [--wait-timeout S] [--stop-file F]\n"
		"       ledger check --host H [--port P] [--db D] --journal DIR\n"
		"                  [--clients N] [--items K] [--pull-ms T] [--json FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },
		{ "db", required_argument, NULL, 'd' },
		{ "clients", required_argument, NULL, 'c' },
		{ "items", required_argument, NULL, 'k' },
		{ "duration", required_argument, NULL, 't' },
		{ "journal", required_argument, NULL, 'j' },
		{ "rollback-every", required_argument, NULL, 'r' },
		{ "wait-timeout", required_argument, NULL, 'w' },
		{ "stop-file", required_argument, NULL, 's' },
		{ "pull-ms", required_argument, NULL, 'P' },
		{ "json", required_argument, NULL, 'J' },
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
		case 'p': port = optarg; break;
		case 'd': db = optarg; break;
		case 'c': nclients = atoi(optarg); break;
		case 'k': items = atoi(optarg); break;
		case 't': duration_s = atof(optarg); break;
		case 'j': journal_dir = optarg; break;
		case 'r': rollback_every = atoi(optarg); break;
		case 'w': wait_timeout_s = atof(optarg); break;
		case 's': stop_file = optarg; break;
		case 'P': pull_ms = strtoll(optarg, NULL, 10); break;
		case 'J': json_path = optarg; break;
		default: usage();
		}
	}
	if (nclients < 1 || nclients > 64 || items < 1 || items > 100 ||
	    wait_timeout_s <= 0 || duration_s <= 0)
		die("bad --clients (1-64), --items (1-100), --duration or --wait-timeout");
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(cmd, "run"))
		return do_run();
	if (!strcmp(cmd, "check"))
		return do_check();
	usage();
	return 2;
}
