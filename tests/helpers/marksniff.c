// SPDX-License-Identifier: GPL-2.0-only
/*
 * marksniff: counts, on one interface for a while, the frames carrying a
 * RemusDB mark (guest-kmod/include/uapi/remusdb.h) — what a peer of a
 * protected guest must never receive, because remusdbd strips the mark.
 *
 *   marksniff IFACE SECONDS [SRC_IPV4]  ->  {"frames":N,"from_src":N,"marked":N}
 *
 * from_src counts IPv4 frames whose source address is SRC_IPV4 (the
 * guest), so a test can tell the capture saw the guest's traffic at all.
 */
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../guest-kmod/include/uapi/remusdb.h"

int main(int argc, char **argv)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL) };
	unsigned long frames = 0, from = 0, marked = 0;
	struct in_addr src = { 0 };
	struct timespec t0, t;
	unsigned char buf[70000];
	int fd, secs;

	if (argc < 3)
		return 2;
	secs = atoi(argv[2]);
	if (argc > 3)
		inet_pton(AF_INET, argv[3], &src);
	fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	sll.sll_ifindex = (int)if_nametoindex(argv[1]);
	if (fd < 0 || !sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		perror("marksniff");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= secs)
			break;
		if (poll(&p, 1, 100) != 1)
			continue;
		n = recv(fd, buf, sizeof(buf), MSG_TRUNC);
		if (n <= 0)
			continue;
		if (n > (ssize_t)sizeof(buf))
			n = sizeof(buf);
		frames++;
		if (n >= 34 && buf[12] == 0x08 && buf[13] == 0x00 &&
		    !memcmp(buf + 26, &src, 4))
			from++;
		if (remusdb_frame_marked(buf, (unsigned long)n, REMUSDB_DSCP_DEFAULT))
			marked++;
	}
	printf("{\"frames\": %lu, \"from_src\": %lu, \"marked\": %lu}\n", frames, from, marked);
	return 0;
}
