// SPDX-License-Identifier: GPL-2.0-only
/*
 * ckptbench: measures a COLO-protected guest's pauses from QMP events.
 *
 *   ckptbench --qmp PATH --seconds S                 observe (remusdbd is the destination)
 *   ckptbench --qmp PATH --seconds S --null-dest DIR --delay MS
 *       be the destination ourselves: the COLO parser with callbacks that
 *       do nothing — what any receiver must at least do, so its pauses are
 *       QEMU's own stop-and-copy plus the minimum, the baseline the
 *       daemon's overhead is measured against.
 *
 * Pause = QMP STOP -> RESUME, from QEMU's own event timestamps.  Prints
 * {"checkpoints":N,"checkpoints_per_s":R,"pause_ms_p50":..,"pause_ms_p99":..}.
 */
#define RDB_COMPONENT "ckptbench"
#include "clock.h"
#include "log.h"
#include "sockutil.h"
#include "qemu/colo_stream.h"
#include "qemu/qmp.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int mig_fd = -1;

static void send_msg(enum rdb_colo_msg m)
{
	uint8_t b[4];

	rdb_colo_msg_encode(m, b);
	rdb_sock_write_all(mig_fd, b, 4, rdb_now_ns() + RDB_NS_PER_S);
}

static int n_config(void *o, const uint8_t *s, size_t n) { return 0; }
static int n_blocks(void *o, const struct rdb_ram_block *b, size_t n) { return 0; }
static int n_page(void *o, uint32_t b, uint64_t off, const uint8_t *d, uint8_t f) { return 0; }
static int n_end(void *o, uint64_t e, const uint8_t *d, size_t n)
{
	if (e == 0) {
		send_msg(RDB_COLO_CHECKPOINT_READY);
	} else {
		/* in one write, as remusdbd does */
		uint8_t b[8];

		rdb_colo_msg_encode(RDB_COLO_VMSTATE_RECEIVED, b);
		rdb_colo_msg_encode(RDB_COLO_VMSTATE_LOADED, b + 4);
		rdb_sock_write_all(mig_fd, b, 8, rdb_now_ns() + RDB_NS_PER_S);
	}
	return 0;
}
static int n_req(void *o, uint64_t e) { send_msg(RDB_COLO_CHECKPOINT_REPLY); return 0; }
static const struct rdb_colo_ops null_ops = { n_config, n_blocks, n_page, n_end, n_req, NULL, NULL, NULL };

static double ev_time(json_t *ev)
{
	json_t *ts = json_object_get(ev, "timestamp");

	return (double)json_integer_value(json_object_get(ts, "seconds")) +
		(double)json_integer_value(json_object_get(ts, "microseconds")) / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *qmp_path = NULL, *null_dir = NULL;
	double seconds = 10, stop_t = 0, first = 0, last = 0;
	unsigned delay = 25;
	static double pauses[200000];
	size_t np = 0;
	struct rdb_colo_parser parser;
	struct rdb_qmp q;
	int lfd = -1, rc;
	uint64_t end;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--qmp"))
			qmp_path = argv[i + 1];
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--null-dest"))
			null_dir = argv[i + 1];
		else if (!strcmp(argv[i], "--delay"))
			delay = (unsigned)atoi(argv[i + 1]);
	}
	if (!qmp_path) {
		fprintf(stderr, "usage: ckptbench --qmp PATH [--seconds S] [--null-dest DIR --delay MS]\n");
		return 2;
	}
	rdb_log_setup("ckptbench", RDB_LOG_WARN);
	rc = rdb_qmp_connect(&q, qmp_path, "bench", rdb_now_ns() + 10 * RDB_NS_PER_S);
	if (rc < 0) {
		fprintf(stderr, "ckptbench: QMP %s: %s\n", qmp_path, strerror(-rc));
		return 1;
	}
	if (null_dir) {
		char path[108], uri[120];

		snprintf(path, sizeof(path), "%s/null.colo", null_dir);
		snprintf(uri, sizeof(uri), "unix:%s", path);
		rdb_colo_parser_init(&parser, &null_ops, NULL);
		if (rdb_sock_listen_unix(path, &lfd) < 0 ||
		    rdb_qmp_migrate_colo_start(&q, uri, delay, rdb_now_ns() + 5 * RDB_NS_PER_S) < 0) {
			fprintf(stderr, "ckptbench: cannot start COLO: %s\n", rdb_qmp_last_error(&q));
			return 1;
		}
	}
	end = rdb_now_ns() + (uint64_t)(seconds * RDB_NS_PER_S);
	while (rdb_now_ns() < end) {
		struct pollfd p[3] = {
			{ .fd = rdb_qmp_fd(&q), .events = POLLIN },
			{ .fd = lfd, .events = POLLIN },
			{ .fd = mig_fd, .events = POLLIN },
		};
		json_t *ev;

		poll(p, 3, 50);
		if (lfd >= 0 && (p[1].revents & POLLIN) && mig_fd < 0)
			mig_fd = rdb_sock_accept(lfd);
		if (mig_fd >= 0 && (p[2].revents & POLLIN)) {
			uint8_t buf[262144];
			ssize_t r = read(mig_fd, buf, sizeof(buf));

			if (r > 0 && rdb_colo_parser_feed(&parser, buf, (size_t)r) < 0) {
				fprintf(stderr, "ckptbench: %s\n", rdb_colo_parser_error(&parser));
				return 1;
			}
		}
		if (rdb_qmp_read_events(&q) < 0)
			break;
		while ((ev = rdb_qmp_next_event(&q))) {
			const char *name = json_string_value(json_object_get(ev, "event"));

			if (name && !strcmp(name, "STOP")) {
				stop_t = ev_time(ev);
			} else if (name && !strcmp(name, "RESUME") && stop_t > 0) {
				/* The first pause is the end of the initial copy. */
				if (first == 0)
					first = ev_time(ev);
				else if (np < sizeof(pauses) / sizeof(pauses[0]))
					pauses[np++] = (ev_time(ev) - stop_t) * 1000;
				last = ev_time(ev);
				stop_t = 0;
			}
			json_decref(ev);
		}
	}
	if (null_dir) {
		rdb_qmp_colo_lost_heartbeat(&q, rdb_now_ns() + RDB_NS_PER_S);
	}
	rdb_qmp_close(&q);
	if (np < 10) {
		fprintf(stderr, "ckptbench: only %zu checkpoints observed\n", np);
		printf("{\"checkpoints\":%zu}\n", np);
		return 1;
	}
	qsort(pauses, np, sizeof(pauses[0]), cmp);
	printf("{\"checkpoints\":%zu,\"checkpoints_per_s\":%.2f,\"pause_ms_p50\":%.3f,"
	       "\"pause_ms_p99\":%.3f}\n", np, (double)np / (last - first),
	       pauses[np / 2], pauses[(np * 99) / 100]);
	return 0;
}
