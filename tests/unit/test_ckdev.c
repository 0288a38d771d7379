// SPDX-License-Identifier: GPL-2.0-only
/*
 * The checkpoint device table (ckdev.h): its loops call every device in
 * order, count initial work, stop what started when a start fails, route
 * a backup's frame to the device that takes it, report the first failed
 * sync after calling every device, and close in reverse order.  And the
 * primary's NIC device (primary_nic.c): the role's gate decides where
 * each guest frame goes, output held on one NIC is that NIC's alone, and
 * a marked frame leaves without its mark.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ckdev.h"
#include "primary_dev.h"
#include "remusdb.h"
#include "vm.h"

/* ---- fake devices: each records its calls in a shared log ---- */

static char calls[512];

struct fake {
	struct rdb_ckdev dev;
	int start_rc, peer_rc, unrep_rc;
};

static void note(const struct rdb_ckdev *d, const char *what)
{
	char s[64];

	snprintf(s, sizeof(s), "%s:%s ", d->id, what);
	strncat(calls, s, sizeof(calls) - strlen(calls) - 1);
}

static int f_start(struct rdb_ckdev *d, char *err, size_t errlen)
{
	note(d, "start");
	if (((struct fake *)d)->start_rc < 0)
		snprintf(err, errlen, "%s refused", d->id);
	return ((struct fake *)d)->start_rc;
}

static int f_checkpoint(struct rdb_ckdev *d, uint64_t epoch)
{
	note(d, "ckpt");
	return epoch == 666 ? -EIO : 0;
}

static int f_peer(struct rdb_ckdev *d, const struct rdb_frame *f)
{
	note(d, "peer");
	return ((struct fake *)d)->peer_rc;
}

static void f_stop(struct rdb_ckdev *d)
{
	note(d, "stop");
}

static int f_unrep(struct rdb_ckdev *d)
{
	note(d, "unrep");
	return ((struct fake *)d)->unrep_rc;
}

static void f_close(struct rdb_ckdev *d)
{
	note(d, "close");
}

static const struct rdb_ckdev_ops disk_like = {
	.kind = "disk", .start = f_start, .checkpoint = f_checkpoint,
	.peer_msg = f_peer, .stop = f_stop, .unreplicate = f_unrep,
	.close = f_close,
};

/* a kind with most hooks left out: the loops must skip them */
static const struct rdb_ckdev_ops sparse = {
	.kind = "nic", .close = f_close,
};

static void fake_init(struct fake *f, const struct rdb_ckdev_ops *ops,
		      const char *id)
{
	memset(f, 0, sizeof(*f));
	f->dev.ops = ops;
	snprintf(f->dev.id, sizeof(f->dev.id), "%s", id);
}

static void test_table_loops(void **state)
{
	struct fake a, b, c;
	struct rdb_ckdevs t = { .n = 0 };
	struct rdb_frame fr = { .type = RDB_MSG_DISK_BASE };
	char err[100] = "";

	fake_init(&a, &disk_like, "d0");
	fake_init(&b, &disk_like, "d1");
	fake_init(&c, &sparse, "n0");
	assert_int_equal(rdb_ckdevs_add(&t, &a.dev), 0);
	assert_int_equal(rdb_ckdevs_add(&t, &b.dev), 0);
	assert_int_equal(rdb_ckdevs_add(&t, &c.dev), 0);
	assert_int_equal(rdb_ckdevs_count(&t, "disk"), 2);
	assert_ptr_equal(rdb_ckdevs_find(&t, "disk", 1), &b.dev);
	assert_ptr_equal(rdb_ckdevs_find(&t, "nic", 0), &c.dev);
	assert_null(rdb_ckdevs_find(&t, "nic", 1));

	/* two devices with initial work: 2 pending, in order */
	a.start_rc = b.start_rc = 1;
	calls[0] = 0;
	assert_int_equal(rdb_ckdevs_start(&t, err, sizeof(err)), 2);
	assert_string_equal(calls, "d0:start d1:start ");

	/* a refusal stops that device and those started before it, last
	 * first, and never starts later ones */
	b.start_rc = -EACCES;
	calls[0] = 0;
	assert_int_equal(rdb_ckdevs_start(&t, err, sizeof(err)), -EACCES);
	assert_string_equal(calls, "d0:start d1:start d1:stop d0:stop ");
	assert_string_equal(err, "d1 refused");

	/* the epoch's close stops at the first error */
	calls[0] = 0;
	assert_int_equal(rdb_ckdevs_checkpoint(&t, 7), 0);
	assert_string_equal(calls, "d0:ckpt d1:ckpt ");
	calls[0] = 0;
	assert_int_equal(rdb_ckdevs_checkpoint(&t, 666), -EIO);
	assert_string_equal(calls, "d0:ckpt ");

	/* a backup's frame goes to the first device of its kind that
	 * takes it; nobody's: 0 */
	b.peer_rc = 1;
	calls[0] = 0;
	assert_int_equal(rdb_ckdevs_peer_msg(&t, "disk", &fr), 1);
	assert_string_equal(calls, "d0:peer d1:peer ");
	b.peer_rc = 0;
	assert_int_equal(rdb_ckdevs_peer_msg(&t, "disk", &fr), 0);
	assert_int_equal(rdb_ckdevs_peer_msg(&t, "nic", &fr), 0);
	a.peer_rc = -EPROTO;
	assert_int_equal(rdb_ckdevs_peer_msg(&t, "disk", &fr), -EPROTO);

	/* every device syncs even after one failed; the first error wins */
	a.unrep_rc = -EIO;
	b.unrep_rc = -ENOSPC;
	calls[0] = 0;
	assert_int_equal(rdb_ckdevs_unreplicate(&t), -EIO);
	assert_string_equal(calls, "d0:unrep d1:unrep ");

	/* closed last to first; the table is empty after */
	calls[0] = 0;
	rdb_ckdevs_close(&t);
	assert_string_equal(calls, "n0:close d1:close d0:close ");
	assert_int_equal(t.n, 0);
}

static void test_table_bound(void **state)
{
	struct fake f[RDB_CKDEV_MAX + 1];
	struct rdb_ckdevs t = { .n = 0 };

	for (int i = 0; i <= RDB_CKDEV_MAX; i++) {
		char id[8];

		snprintf(id, sizeof(id), "x%d", i);
		fake_init(&f[i], &sparse, id);
		assert_int_equal(rdb_ckdevs_add(&t, &f[i].dev),
				 i < RDB_CKDEV_MAX ? 0 : -ENOSPC);
	}
	assert_int_equal(t.n, RDB_CKDEV_MAX);
}

/* ---- the primary's NIC device ---- */

static enum rdb_out_gate gate_now;
static struct rdb_buf epoch_frames;

static enum rdb_out_gate h_gate(void *o)
{
	return gate_now;
}

static struct rdb_buf *h_epoch_out(void *o)
{
	return &epoch_frames;
}

static const struct rdb_ckdev_host host = {
	.gate = h_gate,
	.epoch_out = h_epoch_out,
};

/* Ethernet + IPv4 + 8 bytes of UDP: not TCP, so commit protection
 * passes it at once; marked: the guest module's flag bit set. */
static size_t udp_frame(uint8_t *f, uint8_t tag, bool marked)
{
	memset(f, 0, 42);
	f[12] = 0x08;
	f[14] = 0x45;
	f[17] = 28;
	f[20] = marked ? 0x80 : 0;
	f[22] = 64;
	f[23] = 17;
	f[41] = tag;
	return 42;
}

static unsigned sunk;

static void count_sink(void *o, const uint8_t *frame, size_t len)
{
	sunk++;
}

/* What reached the tap (one datagram per frame), -1: nothing. */
static int wire_tag(int fd, bool *marked)
{
	uint8_t b[128];
	ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);

	if (n < 42)
		return -1;
	*marked = remusdb_frame_marked(b, (size_t)n, 0);
	return b[41];
}

static void test_nic_gate(void **state)
{
	struct rdb_ckpt ck = { .active = true, .open_epoch = 5 };
	struct rdb_vm_stats st = { 0 };
	struct rdb_pri_nic *n0, *n1;
	uint32_t dscp = 0;
	uint8_t f[64];
	size_t len;
	bool marked;
	int sv[2];

	rdb_buf_init(&epoch_frames);
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	assert_int_equal(rdb_pri_nic_new(&n0, 0, "vm1", &dscp, &ck, &host, &st), 0);
	assert_int_equal(rdb_pri_nic_new(&n1, 1, "vm1", &dscp, &ck, &host, &st), 0);
	assert_string_equal(n1->dev.id, "nic1");
	n0->nic.tap_fd = sv[0];		/* the tap, seen from the other end */

	/* unprotected: out at once, the mark stripped and counted */
	gate_now = RDB_OUT_WIRE;
	len = udp_frame(f, 1, true);
	rdb_pri_nic_from_guest(n0, f, len);
	assert_int_equal(wire_tag(sv[1], &marked), 1);
	assert_false(marked);
	assert_int_equal(st.marked_frames, 1);

	/* IPv6: marked by the VM's protect_dscp, read as it is now */
	{
		uint8_t v6[64] = { 0 };
		uint8_t tc = 5 << 2;	/* traffic class: DSCP 5 */

		v6[12] = 0x86;
		v6[13] = 0xdd;
		v6[14] = (uint8_t)(0x60 | tc >> 4);
		v6[15] = (uint8_t)(tc << 4);
		v6[20] = 17;		/* next header: UDP */
		v6[41] = 9;
		dscp = 5;
		rdb_pri_nic_from_guest(n0, v6, 62);
		assert_int_equal(st.marked_frames, 2);
		dscp = 7;		/* the option changed: not this mark */
		rdb_pri_nic_from_guest(n0, v6, 62);
		assert_int_equal(st.marked_frames, 2);
		while (recv(sv[1], f, sizeof(f), MSG_DONTWAIT) > 0)
			;
		dscp = 0;
	}

	/* plain Remus: held in the open epoch until released */
	gate_now = RDB_OUT_EPOCH;
	rdb_pri_nic_from_guest(n0, f, udp_frame(f, 2, false));
	assert_int_equal(wire_tag(sv[1], &marked), -1);
	assert_int_equal(rdb_pri_nic_held_frames(n0), 1);
	assert_int_equal(rdb_pri_nic_held_frames(n1), 0);
	rdb_pri_nic_release(n0, 4, NULL, NULL);		/* not its epoch */
	assert_int_equal(wire_tag(sv[1], &marked), -1);
	rdb_pri_nic_release(n0, 5, NULL, NULL);
	assert_int_equal(wire_tag(sv[1], &marked), 2);
	assert_int_equal(rdb_pri_nic_held_frames(n0), 0);

	/* commit protection: a non-TCP frame passes at once */
	gate_now = RDB_OUT_FLOW;
	rdb_pri_nic_from_guest(n0, f, udp_frame(f, 3, false));
	assert_int_equal(wire_tag(sv[1], &marked), 3);

	/* a decision pending: held whatever the mode; the held ones only
	 * leave by release_held, to the sink given */
	gate_now = RDB_OUT_HOLD;
	rdb_pri_nic_from_guest(n0, f, udp_frame(f, 4, false));
	rdb_pri_nic_from_guest(n1, f, udp_frame(f, 5, false));
	assert_int_equal(rdb_pri_nic_held_frames(n0), 1);
	assert_int_equal(rdb_pri_nic_held_frames(n1), 1);
	sunk = 0;
	rdb_pri_nic_release_held(n1, count_sink, NULL);
	assert_int_equal(sunk, 1);
	assert_int_equal(rdb_pri_nic_held_frames(n1), 0);
	assert_int_equal(rdb_pri_nic_held_frames(n0), 1);

	/* fenced: nothing leaves or is kept; what was held is dropped */
	gate_now = RDB_OUT_DROP;
	rdb_pri_nic_from_guest(n0, f, udp_frame(f, 6, false));
	assert_int_equal(wire_tag(sv[1], &marked), -1);
	assert_int_equal(rdb_pri_nic_discard(n0), 1);
	assert_int_equal(rdb_pri_nic_held_frames(n0), 0);

	n0->nic.tap_fd = -1;
	rdb_pri_nic_free(n0);
	rdb_pri_nic_free(n1);
	close(sv[0]);
	close(sv[1]);
	rdb_buf_dispose(&epoch_frames);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_loops),
		cmocka_unit_test(test_table_bound),
		cmocka_unit_test(test_nic_gate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
