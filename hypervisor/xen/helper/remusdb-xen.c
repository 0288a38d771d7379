// SPDX-License-Identifier: GPL-2.0-only
/*
 * remusdb-xen: the Xen backend's helper (protocol in ../xen_helper.h).
 * It checkpoints a PV domain with libxenguest's xc_domain_save in Remus
 * mode, suspending the guest through xenstore as libxl does
 * (control/shutdown = "suspend", then the domain's shutdown with reason
 * suspend) and resuming it cooperatively (xc_domain_resume fast), and
 * answers one-shot control calls for remusdbd.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <libxl.h>
#include <xenctrl.h>
#include <xenguest.h>
#include <xenstore.h>
#include <xen/sched.h>

#include "clock.h"
#include "xen/xc_stream.h"
#include "xen/xen_helper.h"
#include "xen/xen_state.h"
#include "xen/helper/vifrelay.h"

#define SUSPEND_ACK_MS 10000	/* the guest takes the suspend request */
#define SUSPENDED_MS 10000	/* ... and shuts down for it */

struct helper {
	xc_interface *xch;
	struct xs_handle *xsh;
	uint32_t domid;
	char ctl_path[256];	/* .../control/shutdown */
	int fd;			/* the daemon's socket */
	unsigned interval_ms;
	uint64_t resumed_ms;
	uint64_t epoch;		/* the checkpoint being taken */
	bool suspended;
	bool failed;
};

static void die_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void die_msg(const char *fmt, ...)
{
	va_list ap;

	fputs("remusdb-xen: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t now_ms(void)
{
	return rdb_now_ns() / RDB_NS_PER_MS;
}

/* The domain named name: 0 with its id, -ENOENT. */
static int find_domain(struct xs_handle *xsh, const char *name, uint32_t *out)
{
	unsigned n = 0;
	char **ids = xs_directory(xsh, XBT_NULL, "/local/domain", &n);
	int rc = -ENOENT;

	for (unsigned i = 0; ids && i < n && rc; i++) {
		char path[64];
		unsigned len;
		char *v;

		snprintf(path, sizeof(path), "/local/domain/%s/name", ids[i]);
		v = xs_read(xsh, XBT_NULL, path, &len);
		if (v && strcmp(v, name) == 0) {
			*out = (uint32_t)strtoul(ids[i], NULL, 10);
			rc = 0;
		}
		free(v);
	}
	free(ids);
	return rc;
}

/* 0 running, 1 paused, 2 suspended, 3 shut down otherwise; -ENOENT. */
static int dom_state(struct helper *h)
{
	xc_dominfo_t info;

	if (xc_domain_getinfo(h->xch, h->domid, 1, &info) != 1 ||
	    info.domid != h->domid)
		return -ENOENT;
	if (info.shutdown)
		return info.shutdown_reason == SHUTDOWN_suspend ? 2 : 3;
	return info.paused ? 1 : 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t r = write(fd, b, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* The daemon's next reply within the timeout: its code, or -1. */
static int read_reply(struct helper *h)
{
	uint8_t b[4];
	size_t have = 0;
	uint64_t deadline = now_ms() + RDB_XEN_REPLY_TIMEOUT_MS;

	while (have < sizeof(b)) {
		struct pollfd pf = { .fd = h->fd, .events = POLLIN };
		uint64_t t = now_ms();
		ssize_t r;

		if (t >= deadline) {
			die_msg("no reply from remusdbd in %d ms",
				RDB_XEN_REPLY_TIMEOUT_MS);
			return -1;
		}
		if (poll(&pf, 1, (int)(deadline - t)) <= 0)
			continue;
		r = read(h->fd, b + have, sizeof(b) - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			die_msg("remusdbd hung up (%s)", r ? strerror(errno) : "end of stream");
			return -1;
		}
		have += (size_t)r;
	}
	return (int)(b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24);
}

/* Waits for path's value to leave "suspend" (the guest's ack), or the
 * domain to be suspended already. */
static bool wait_acked(struct helper *h, uint64_t deadline)
{
	while (now_ms() < deadline) {
		unsigned len = 0;
		char *v = xs_read(h->xsh, XBT_NULL, h->ctl_path, &len);
		bool acked = !v || strcmp(v, "suspend") != 0;

		free(v);
		if (acked || dom_state(h) == 2)
			return true;
		usleep(1000);
	}
	return false;
}

static int cb_suspend(void *data)
{
	struct helper *h = data;
	uint64_t deadline = now_ms() + SUSPEND_ACK_MS;
	xs_transaction_t t;

	if (!xs_write(h->xsh, XBT_NULL, h->ctl_path, "suspend", 7)) {
		die_msg("writing %s: %s", h->ctl_path, strerror(errno));
		return 0;
	}
	if (!wait_acked(h, deadline)) {
		/* take the request back, unless the guest took it meanwhile */
		for (;;) {
			char *v;
			unsigned len;

			t = xs_transaction_start(h->xsh);
			v = xs_read(h->xsh, t, h->ctl_path, &len);
			if (v && strcmp(v, "suspend") == 0)
				xs_write(h->xsh, t, h->ctl_path, "", 0);
			free(v);
			if (xs_transaction_end(h->xsh, t, false) || errno != EAGAIN)
				break;
		}
		die_msg("the guest did not take the suspend request in %d ms",
			SUSPEND_ACK_MS);
		return 0;
	}
	deadline = now_ms() + SUSPENDED_MS;
	while (dom_state(h) != 2) {
		if (now_ms() >= deadline) {
			die_msg("the guest did not suspend in %d ms", SUSPENDED_MS);
			return 0;
		}
		usleep(500);
	}
	h->suspended = true;
	return 1;
}

static int resume(struct helper *h)
{
	if (dom_state(h) != 2)
		return 0;
	if (xc_domain_resume(h->xch, h->domid, 1) < 0) {
		die_msg("xc_domain_resume: %s", strerror(errno));
		return -1;
	}
	xs_resume_domain(h->xsh, h->domid);
	return 0;
}

/* The epoch's state is written: resume once the daemon has taken it. */
static int cb_postcopy(void *data)
{
	struct helper *h = data;
	int r = read_reply(h);
	bool want = r == (h->epoch ? RDB_XEN_REPLY_RESUME : RDB_XEN_REPLY_START);

	if (r >= 0 && !want)
		die_msg("reply %d where %s was due", r, h->epoch ? "RESUME" : "START");
	if (resume(h) < 0)
		return 0;
	h->suspended = false;
	h->resumed_ms = now_ms();
	if (!want) {
		h->failed = true;
		return 0;	/* the guest runs on; no more checkpoints */
	}
	h->epoch++;
	return 1;
}

/* Between checkpoints: the interval, then the daemon's go. */
static int cb_checkpoint(void *data)
{
	struct helper *h = data;
	uint64_t due = h->resumed_ms + h->interval_ms;
	uint8_t rec[8] = { 0 };
	uint32_t type = RDB_XEN_REC_REQUEST;
	int r;

	for (uint64_t t = now_ms(); t < due; t = now_ms())
		usleep((useconds_t)(due - t) * 1000);
	memcpy(rec, &type, 4);	/* (x86: little-endian) */
	if (write_all(h->fd, rec, sizeof(rec)) < 0) {
		die_msg("writing to remusdbd: %s", strerror(errno));
		h->failed = true;
		return 0;
	}
	r = read_reply(h);
	if (r != RDB_XEN_REPLY_STOP) {
		if (r >= 0)
			die_msg("reply %d where STOP was due", r);
		h->failed = true;
		return 0;
	}
	return 1;
}

static int xl_header(uint32_t domid, uint8_t **out, size_t *len_out)
{
	static const char magic[32] = "Xen saved domain, xl format\n \0 \r";
	libxl_domain_config dc;
	libxl_ctx *ctx = NULL;
	xentoollog_logger_stdiostream *lg;
	char *json = NULL;
	uint32_t v[5];
	size_t jl;
	uint8_t *b;
	int rc = -1;

	lg = xtl_createlogger_stdiostream(stderr, XTL_ERROR, 0);
	if (libxl_ctx_alloc(&ctx, LIBXL_VERSION, 0, (xentoollog_logger *)lg))
		goto out;
	libxl_domain_config_init(&dc);
	if (libxl_retrieve_domain_configuration(ctx, domid, &dc, NULL) == 0)
		json = libxl_domain_config_to_json(ctx, &dc);
	libxl_domain_config_dispose(&dc);
	if (!json)
		goto out;
	jl = strlen(json) + 1;	/* xl counts the NUL */
	b = malloc(sizeof(magic) + sizeof(v) + jl);
	if (!b || sizeof(v) + jl > RDB_XEN_PREAMBLE_MAX)
		goto out;
	v[0] = 0x01020304;	/* byte order, host's */
	v[1] = 3;		/* mandatory: JSON config, stream v2 */
	v[2] = 0;
	v[3] = (uint32_t)(4 + jl);
	v[4] = (uint32_t)jl;
	memcpy(b, magic, sizeof(magic));
	memcpy(b + sizeof(magic), v, sizeof(v));
	memcpy(b + sizeof(magic) + sizeof(v), json, jl);
	*out = b;
	*len_out = sizeof(magic) + sizeof(v) + jl;
	rc = 0;
out:
	free(json);
	libxl_ctx_free(ctx);
	if (lg)
		xtl_logger_destroy((xentoollog_logger *)lg);
	return rc;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || strlen(path) >= sizeof(a.sun_path))
		return -1;
	strcpy(a.sun_path, path);
	for (int i = 0; i < 500; i++) {
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return fd;
		if (errno != ENOENT && errno != ECONNREFUSED)
			break;
		usleep(10000);
	}
	close(fd);
	return -1;
}

static int do_save(struct helper *h, const char *sock)
{
	struct save_callbacks cb = {
		.suspend = cb_suspend,
		.postcopy = cb_postcopy,
		.checkpoint = cb_checkpoint,
		.data = h,
	};
	uint8_t *xl = NULL, pre[12];
	size_t xl_len = 0;
	char *dp;
	int rc;

	dp = xs_get_domain_path(h->xsh, h->domid);
	if (!dp)
		return 1;
	snprintf(h->ctl_path, sizeof(h->ctl_path), "%s/control/shutdown", dp);
	free(dp);
	if (xl_header(h->domid, &xl, &xl_len) < 0) {
		die_msg("the domain's configuration (libxl) could not be read");
		return 1;
	}
	h->fd = connect_unix(sock);
	if (h->fd < 0) {
		die_msg("connecting to %s: %s", sock, strerror(errno));
		return 1;
	}
	memcpy(pre, RDB_XEN_PREAMBLE, 8);
	pre[8] = (uint8_t)xl_len;
	pre[9] = (uint8_t)(xl_len >> 8);
	pre[10] = (uint8_t)(xl_len >> 16);
	pre[11] = (uint8_t)(xl_len >> 24);
	if (write_all(h->fd, pre, sizeof(pre)) < 0 ||
	    write_all(h->fd, xl, xl_len) < 0) {
		die_msg("writing to remusdbd: %s", strerror(errno));
		return 1;
	}
	free(xl);
	rc = xc_domain_save(h->xch, h->fd, h->domid, XCFLAGS_LIVE, &cb,
			    XC_STREAM_REMUS, -1);
	/* However it ended, the guest runs on: never left suspended. */
	if (resume(h) < 0)
		die_msg("the domain is left suspended: `remusdb-xen ctl DOMAIN "
			"resume` or xl destroy");
	close(h->fd);
	if (rc != 0 || h->failed) {
		die_msg("checkpointing ended after checkpoint %llu%s",
			(unsigned long long)h->epoch, rc ? " (xc_domain_save failed)" : "");
		return 1;
	}
	return 0;
}

static int do_ctl(struct helper *h, const char *cmd)
{
	static const char *const names[] = { "running", "paused", "suspended",
					     "shutdown" };
	int s;

	if (strcmp(cmd, "state") == 0) {
		s = dom_state(h);
		if (s < 0)
			return RDB_XEN_EXIT_NO_DOMAIN;
		printf("%s\n", names[s]);
		return 0;
	}
	if (strcmp(cmd, "pause") == 0)
		return xc_domain_pause(h->xch, h->domid) ? 1 : 0;
	if (strcmp(cmd, "unpause") == 0)
		return xc_domain_unpause(h->xch, h->domid) ? 1 : 0;
	if (strcmp(cmd, "resume") == 0)
		return resume(h) ? 1 : 0;
	die_msg("unknown control call %s", cmd);
	return 2;
}

/*
 * watch: runs while the domain does (running, paused or suspended for a
 * checkpoint) and ends when it is gone or shut down, the reason on
 * stderr: exit 0 for a shutdown it asked for (poweroff, reboot), 4 for a
 * crash, RDB_XEN_EXIT_NO_DOMAIN when it was destroyed.  A restored domain
 * is no process of remusdbd's: this one stands for it (remusdbd watches
 * it as it watches a restored QEMU).  Xen tells of every domain's end on
 * @releaseDomain; a poll every second backs that up.
 */
static int do_watch(struct helper *h)
{
	static const char *const why[] = { "poweroff", "reboot", "suspend",
					   "crash", "watchdog", "soft_reset" };

	if (!xs_watch(h->xsh, "@releaseDomain", "remusdb-xen")) {
		die_msg("xenstore watch @releaseDomain: %s", strerror(errno));
		return 1;
	}
	for (;;) {
		struct pollfd p = { .fd = xs_fileno(h->xsh), .events = POLLIN };
		xc_dominfo_t info;

		if (xc_domain_getinfo(h->xch, h->domid, 1, &info) != 1 ||
		    info.domid != h->domid || info.dying) {
			die_msg("domain %u is gone (destroyed)", h->domid);
			return RDB_XEN_EXIT_NO_DOMAIN;
		}
		if (info.shutdown && info.shutdown_reason != SHUTDOWN_suspend) {
			die_msg("domain %u shut down: %s", h->domid,
				info.shutdown_reason < sizeof(why) / sizeof(why[0]) ?
				why[info.shutdown_reason] : "unknown reason");
			return info.shutdown_reason == SHUTDOWN_crash ? 4 : 0;
		}
		if (poll(&p, 1, 1000) > 0) {
			unsigned n;

			free(xs_read_watch(h->xsh, &n));
		}
	}
}

int main(int argc, char **argv)
{
	struct helper h = { .fd = -1 };
	int rc;

	static const char usage[] =
		"usage: remusdb-xen save DOMAIN SOCKET INTERVAL_MS\n"
		"       remusdb-xen ctl DOMAIN pause|unpause|state|resume\n"
		"       remusdb-xen vif DOMAIN SOCKET LOG\n"
		"       remusdb-xen watch DOMAIN\n"
		"remusdbd runs it (remusdb-xen(8)); not a command for operators.\n";

	signal(SIGPIPE, SIG_IGN);
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage, stdout);
		return 0;
	}
	if (argc < 3 || (strcmp(argv[1], "save") == 0 && argc != 5) ||
	    (strcmp(argv[1], "ctl") == 0 && argc != 4) ||
	    (strcmp(argv[1], "vif") == 0 && argc != 5) ||
	    (strcmp(argv[1], "watch") == 0 && argc != 3) ||
	    (strcmp(argv[1], "save") && strcmp(argv[1], "ctl") &&
	     strcmp(argv[1], "vif") && strcmp(argv[1], "watch"))) {
		fputs(usage, stderr);
		return 2;
	}
	h.xch = xc_interface_open(NULL, NULL, 0);
	h.xsh = xs_open(0);
	if (!h.xch || !h.xsh) {
		die_msg("cannot open Xen's control interfaces: %s", strerror(errno));
		return 1;
	}
	if (find_domain(h.xsh, argv[2], &h.domid) < 0) {
		die_msg("no domain %s", argv[2]);
		return RDB_XEN_EXIT_NO_DOMAIN;
	}
	if (strcmp(argv[1], "vif") == 0) {
		xs_close(h.xsh);
		xc_interface_close(h.xch);
		return rdb_xen_vif_relay(h.domid, argv[2], argv[3], argv[4]);
	}
	if (strcmp(argv[1], "watch") == 0) {
		rc = do_watch(&h);
	} else if (strcmp(argv[1], "save") == 0) {
		h.interval_ms = (unsigned)strtoul(argv[4], NULL, 10);
		rc = do_save(&h, argv[3]);
	} else {
		rc = do_ctl(&h, argv[3]);
	}
	xs_close(h.xsh);
	xc_interface_close(h.xch);
	return rc;
}
