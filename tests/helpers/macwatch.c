// SPDX-License-Identifier: GPL-2.0-only
/*
 * macwatch: which host emits a MAC's frames, and when (the I6 check).
 *
 *   macwatch --mac 52:54:00:52:44:01 --duration S IFACE...
 *
 * Run in the switch's namespace on its ports (port-pri, port-bak): a frame
 * the switch receives on a port was sent by that port's host.  Every
 * frame with the MAC as its source is recorded; at the end one JSON
 * object goes to stdout:
 *   { "ports": { IFACE: { "frames": N, "first_ms": T, "last_ms": T } },
 *     "switches": K }       times the emitting port changed: 0 when
 *                           one host emitted throughout, 1 for a clean
 *                           failover, more when two copies ran at once
 * Times are CLOCK_REALTIME milliseconds, comparable to the tests' `date`.
 * "started" goes to stderr once the sockets are bound.  SIGINT or SIGTERM
 * ends the watch early, with the same output.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PORTS 8

struct port {
	const char *name;
	int fd;
	uint64_t frames;
	int64_t first_ms, last_ms;
};

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned b[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", b, b + 1, b + 2, b + 3, b + 4, b + 5) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	return 0;
}

int main(int argc, char **argv)
{
	struct port ports[MAX_PORTS];
	struct pollfd pfd[MAX_PORTS];
	uint8_t mac[6], buf[65536];
	double duration = 0;
	int nports = 0, last_port = -1;
	unsigned switches = 0;
	int64_t end;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--mac") && i + 1 < argc) {
			if (parse_mac(argv[++i], mac) < 0) {
				fprintf(stderr, "macwatch: bad MAC %s\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--duration") && i + 1 < argc) {
			duration = atof(argv[++i]);
		} else if (nports < MAX_PORTS) {
			ports[nports++] = (struct port){ .name = argv[i], .fd = -1,
							 .first_ms = -1, .last_ms = -1 };
		}
	}
	if (nports == 0 || duration <= 0) {
		fprintf(stderr, "usage: macwatch --mac MAC --duration S IFACE...\n");
		return 2;
	}
	for (int i = 0; i < nports; i++) {
		struct sockaddr_ll sll = { .sll_family = AF_PACKET,
					   .sll_protocol = htons(ETH_P_ALL) };

		sll.sll_ifindex = (int)if_nametoindex(ports[i].name);
		ports[i].fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
		if (!sll.sll_ifindex || ports[i].fd < 0 ||
		    bind(ports[i].fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
			fprintf(stderr, "macwatch: %s: %s\n", ports[i].name, strerror(errno));
			return 1;
		}
		pfd[i] = (struct pollfd){ .fd = ports[i].fd, .events = POLLIN };
	}
	{
		/* no SA_RESTART: poll returns at once */
		struct sigaction sa = { .sa_handler = on_stop };

		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	fprintf(stderr, "started\n");
	end = now_ms() + (int64_t)(duration * 1000);
	while (!stop && now_ms() < end) {
		int n = poll(pfd, (nfds_t)nports, 100);

		if (n < 0 && errno != EINTR)
			return 1;
		for (int i = 0; n > 0 && i < nports; i++) {
			struct sockaddr_ll from;
			socklen_t fl = sizeof(from);
			ssize_t r;

			if (!(pfd[i].revents & POLLIN))
				continue;
			r = recvfrom(ports[i].fd, buf, sizeof(buf), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);
			/* only what the port's host sent (not the switch's
			 * flooding out of it) */
			if (r < 14 || from.sll_pkttype == PACKET_OUTGOING ||
			    memcmp(buf + 6, mac, 6) != 0)
				continue;
			int64_t t = now_ms();

			if (last_port >= 0 && last_port != i)
				switches++;
			last_port = i;
			if (ports[i].first_ms < 0)
				ports[i].first_ms = t;
			ports[i].last_ms = t;
			ports[i].frames++;
		}
	}
	printf("{\"ports\": {");
	for (int i = 0; i < nports; i++)
		printf("%s\"%s\": {\"frames\": %llu, \"first_ms\": %lld, \"last_ms\": %lld}",
		       i ? ", " : "", ports[i].name, (unsigned long long)ports[i].frames,
		       (long long)ports[i].first_ms, (long long)ports[i].last_ms);
	printf("}, \"switches\": %u}\n", switches);
	return 0;
}
