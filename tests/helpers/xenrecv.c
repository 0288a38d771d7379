// SPDX-License-Identifier: GPL-2.0-only
/*
 * xenrecv: the Xen backend (hypervisor/xen/backend.c) driven as remusdbd
 * drives it, both roles in one process, in the Xen test host's dom0
 * (tools/mkxenhost.sh):
 *
 *   xenrecv DOMAIN SECS INTERVAL_MS WORKDIR
 *
 * As the primary it opens DOMAIN's control, starts checkpoints into its
 * own socket (remusdb-xen save) and answers the stream (START, STOP,
 * RESUME); as the backup it keeps what each complete epoch commits (the
 * RAM, the config and devstate blobs).  After SECS the primary's power is
 * pulled: its saver is killed and the domain destroyed.  Then the backup
 * restores the last committed epoch through the backend (an xl image,
 * `xl restore`) and the domain must run.  One JSON line:
 *
 *   {"epochs":N,"secs":S,"checkpoints_per_s":R,"pause_ms_p50":P,
 *    "pause_ms_p99":P,"pause_ms_max":P,"pages":N,"last_epoch":N,
 *    "restore_ms":T,"ok":true|false,"error":"..."}
 *
 * pause: from the STOP sent to the RESUME sent, as the daemon sees it
 * (the guest is suspended inside it).  Exit 0 if ok.
 */
#define RDB_COMPONENT "xenrecv"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "hv.h"
#include "sockutil.h"

extern const struct rdb_hv_ops rdb_hv_xen_ops;

#define MAX_EPOCHS 100000

struct recv {
	const struct rdb_hv_ops *ops;
	int fd;
	uint8_t *ram;
	uint64_t ram_bytes;
	struct rdb_ram_block block;
	struct rdb_buf config, dev, committed_dev, staged;
	uint64_t epochs, pages, last_epoch;
	uint64_t stop_ns;
	double pause_ms[MAX_EPOCHS];
	size_t npause;
	char err[300];
};

static int send_reply(struct recv *r, enum rdb_hv_reply what)
{
	uint8_t b[RDB_HV_REPLY_MAX_BYTES];
	size_t n = r->ops->reply(what, b);

	return rdb_sock_write_all(r->fd, b, n, rdb_now_ns() + 5 * RDB_NS_PER_S);
}

static int on_config(void *o, const uint8_t *blob, size_t len)
{
	struct recv *r = o;

	rdb_buf_reset(&r->config);
	return rdb_buf_append(&r->config, blob, len);
}

static int on_blocks(void *o, const struct rdb_ram_block *b, size_t n)
{
	struct recv *r = o;

	if (n != 1 || r->ram)
		return -EPROTO;
	r->block = b[0];
	r->ram_bytes = b[0].used_length;
	r->ram = calloc(1, r->ram_bytes);
	return r->ram ? 0 : -ENOMEM;
}

/* Epoch 0's pages go straight in (nothing is restorable before it ends);
 * later epochs' wait in staged until their end: {offset:8, page:4096}. */
static int on_page(void *o, uint32_t block, uint64_t offset,
		   const uint8_t *data, uint8_t fill)
{
	struct recv *r = o;
	uint8_t page[4096];

	if (!r->ram || offset + 4096 > r->ram_bytes)
		return -EPROTO;
	r->pages++;
	if (!data) {
		memset(page, fill, sizeof(page));
		data = page;
	}
	if (r->epochs == 0) {
		memcpy(r->ram + offset, data, 4096);
		return 0;
	}
	if (rdb_buf_append(&r->staged, &offset, 8) < 0 ||
	    rdb_buf_append(&r->staged, data, 4096) < 0)
		return -ENOMEM;
	return 0;
}

static int on_epoch(void *o, uint64_t epoch, const uint8_t *dev, size_t len)
{
	struct recv *r = o;
	uint64_t off;

	for (size_t at = 0; at < r->staged.len; at += 8 + 4096) {
		memcpy(&off, r->staged.data + at, 8);
		memcpy(r->ram + off, r->staged.data + at + 8, 4096);
	}
	rdb_buf_reset(&r->staged);
	rdb_buf_reset(&r->committed_dev);
	if (rdb_buf_append(&r->committed_dev, dev, len) < 0)
		return -ENOMEM;
	r->last_epoch = epoch;
	r->epochs++;
	if (epoch && r->stop_ns && r->npause < MAX_EPOCHS)
		r->pause_ms[r->npause++] = (double)(rdb_now_ns() - r->stop_ns) /
					   RDB_NS_PER_MS;
	return send_reply(r, epoch ? RDB_HV_RESUME : RDB_HV_START);
}

static int on_request(void *o, uint64_t epoch)
{
	struct recv *r = o;

	r->stop_ns = rdb_now_ns();
	return send_reply(r, RDB_HV_STOP);
}

static const struct rdb_hv_stream_cb cb = {
	.config = on_config, .ram_blocks = on_blocks, .page = on_page,
	.epoch_end = on_epoch, .checkpoint_request = on_request,
};

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p)
{
	return n ? v[(size_t)(p * (double)(n - 1) + 0.5)] : 0;
}

int main(int argc, char **argv)
{
	static struct recv r;
	struct rdb_hv_ctl *ctl = NULL;
	struct rdb_hv_stream *s = NULL;
	struct rdb_hv_restored rs;
	char sock[256], cmd[512], *dom;
	uint64_t t0, secs, t_restore = 0;
	unsigned interval;
	int lfd = -1, rc;

	if (argc != 5) {
		fprintf(stderr, "usage: xenrecv DOMAIN SECS INTERVAL_MS WORKDIR\n");
		return 2;
	}
	dom = argv[1];
	secs = strtoull(argv[2], NULL, 10);
	interval = (unsigned)strtoul(argv[3], NULL, 10);
	r.ops = &rdb_hv_xen_ops;
	r.fd = -1;
	rdb_buf_init(&r.config);
	rdb_buf_init(&r.dev);
	rdb_buf_init(&r.committed_dev);
	rdb_buf_init(&r.staged);
	memset(&rs, 0, sizeof(rs));	/* (hv.c's init: not linked here) */
	rdb_hv_proc_init(&rs.proc);
	snprintf(sock, sizeof(sock), "%s/%s.colo", argv[4], dom);
	rc = rdb_sock_listen_unix(sock, &lfd);
	if (rc == 0)
		rc = r.ops->ctl_open(&ctl, dom, dom, rdb_now_ns() + 30 * RDB_NS_PER_S,
				     r.err, sizeof(r.err));
	if (rc == 0)
		rc = r.ops->checkpoint_start(ctl, sock, interval, 0,
					     rdb_now_ns() + 30 * RDB_NS_PER_S);
	if (rc == 0)
		rc = r.ops->stream_new(&s, &cb, &r);
	if (rc == 0) {
		struct pollfd pf = { .fd = lfd, .events = POLLIN };

		rc = poll(&pf, 1, 60000) == 1 ? 0 : -ETIMEDOUT;
		if (rc == 0) {
			r.fd = accept(lfd, NULL, NULL);
			rc = r.fd < 0 ? -errno : 0;
		}
		if (rc < 0)
			snprintf(r.err, sizeof(r.err), "remusdb-xen save did not "
				 "connect (see %s.log)", sock);
	} else if (!r.err[0]) {
		snprintf(r.err, sizeof(r.err), "starting: %s", strerror(-rc));
	}
	t0 = rdb_now_ns();
	while (rc == 0 && rdb_now_ns() - t0 < secs * RDB_NS_PER_S) {
		static uint8_t buf[1 << 20];
		struct pollfd pf = { .fd = r.fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pf, 1, 100) <= 0)
			continue;
		n = read(r.fd, buf, sizeof(buf));
		if (n <= 0) {
			snprintf(r.err, sizeof(r.err), "the stream ended (see %s.log)",
				 sock);
			rc = -EPIPE;
			break;
		}
		rc = r.ops->stream_feed(s, buf, (size_t)n);
		/* what the backend kept back (its share per feed is
		 * bounded), as the daemon's on_mig takes it */
		while (rc == 0 && r.ops->stream_pending && r.ops->stream_pending(s))
			rc = r.ops->stream_feed(s, NULL, 0);
		if (rc < 0)
			snprintf(r.err, sizeof(r.err), "stream: %s",
				 rc == -EPROTO ? r.ops->stream_error(s) : strerror(-rc));
	}
	if (rc == 0 && !r.epochs) {
		snprintf(r.err, sizeof(r.err), "no epoch completed in %llu s",
			 (unsigned long long)secs);
		rc = -ETIMEDOUT;
	}
	/* the primary's power: its saver and its domain gone at once */
	/* ([n]: the pattern must not match this shell's own command line) */
	snprintf(cmd, sizeof(cmd), "pkill -9 -f 'remusdb-xe[n] save %s '; "
		 "xl destroy %s", dom, dom);
	if (system(cmd) != 0 && rc == 0) {
		snprintf(r.err, sizeof(r.err), "could not destroy %s", dom);
		rc = -EIO;
	}
	if (r.fd >= 0)
		close(r.fd);
	r.ops->ctl_close(ctl);
	if (rc == 0) {
		struct rdb_hv_restore req = { .vm = dom, .work_dir = argv[4] };
		const uint8_t *data[1] = { r.ram };
		struct rdb_hv_state st = {
			.config = r.config.data, .config_len = r.config.len,
			.blocks = &r.block, .nblocks = 1, .block_data = data,
			.devstate = r.committed_dev.data,
			.devstate_len = r.committed_dev.len,
		};
		uint64_t dl = rdb_now_ns() + 120 * RDB_NS_PER_S;

		t_restore = rdb_now_ns();
		rc = r.ops->restore_prepare(&req, &rs, dl, r.err, sizeof(r.err));
		if (rc == 0)
			rc = r.ops->restore_load(&req, &rs, &st, dl, r.err,
						 sizeof(r.err));
		t_restore = rdb_now_ns() - t_restore;
		r.ops->ctl_close(rs.ctl);	/* the restored domain runs on */
	}
	qsort(r.pause_ms, r.npause, sizeof(double), cmp);
	for (char *p = r.err; *p; p++)
		if (*p == '"' || *p == '\\' || *p == '\n')
			*p = ' ';
	printf("{\"epochs\":%llu,\"secs\":%llu,\"checkpoints_per_s\":%.2f,"
	       "\"pause_ms_p50\":%.1f,\"pause_ms_p99\":%.1f,\"pause_ms_max\":%.1f,"
	       "\"pages\":%llu,\"last_epoch\":%llu,\"restore_ms\":%.0f,"
	       "\"ok\":%s,\"error\":\"%s\"}\n",
	       (unsigned long long)r.epochs, (unsigned long long)secs,
	       secs ? (double)r.epochs / (double)secs : 0,
	       pct(r.pause_ms, r.npause, 0.5), pct(r.pause_ms, r.npause, 0.99),
	       r.npause ? r.pause_ms[r.npause - 1] : 0,
	       (unsigned long long)r.pages, (unsigned long long)r.last_epoch,
	       (double)t_restore / RDB_NS_PER_MS, rc == 0 ? "true" : "false",
	       r.err);
	r.ops->stream_free(s);
	if (lfd >= 0) {
		close(lfd);
		unlink(sock);
	}
	free(r.ram);
	return rc == 0 ? 0 : 1;
}
