// SPDX-License-Identifier: GPL-2.0-only
/*
 * remusdb-eventd: the guest helper of the failover event.  Finds the
 * virtio-serial port named org.remusdb.0, reads the host's lines
 *   "REMUSDB-FAILOVER epoch=<u64> generation=<u64> [flags=<u32>]"
 * and hands each to remusdb.ko by writing a struct remusdb_event to
 * /dev/remusdb, where the DBMS waits for it.  Once the write returned,
 * it answers on the same port
 *   "REMUSDB-FAILOVER-ACK generation=<u64>"
 * (the host holds clients' input to the guest until then, under commit
 * protection).  Runs as root; the module refuses the write otherwise.
 * A port the host has not opened reads as end-of-file or hangs up: the
 * helper polls again every 200 ms.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/uapi/remusdb.h"

static int find_port(char *dev, size_t len)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *e;
	int found = 0;

	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		char path[300], name[64] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f))
			name[strcspn(name, "\n")] = 0;
		fclose(f);
		if (!strcmp(name, REMUSDB_PORT_NAME)) {
			snprintf(dev, len, "/dev/%s", e->d_name);
			found = 1;
		}
	}
	closedir(d);
	return found;
}

/* Hands the event to the module; 0 once the write returned. */
static int deliver(const char *line)
{
	struct remusdb_event ev = { 0 };
	unsigned long long epoch, gen;
	unsigned flags = 0;
	int fd, n, rc = -1;

	n = sscanf(line, "REMUSDB-FAILOVER epoch=%llu generation=%llu flags=%u",
		   &epoch, &gen, &flags);
	if (n < 2) {
		fprintf(stderr, "remusdb-eventd: ignoring \"%s\"\n", line);
		return -1;
	}
	ev.epoch = epoch;
	ev.generation = gen;
	ev.flags = flags;
	fd = open(REMUSDB_DEV, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, &ev, sizeof(ev)) != (ssize_t)sizeof(ev)) {
		fprintf(stderr, "remusdb-eventd: %s: %s\n", REMUSDB_DEV, strerror(errno));
	} else {
		printf("remusdb-eventd: failover event epoch %llu generation %llu "
		       "flags %u delivered\n", epoch, gen, flags);
		rc = 0;
	}
	fflush(stdout);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The host learns the guest has the event (a blocking write: the port is
 * open non-blocking for reads only). */
static void answer(int fd, const char *line)
{
	unsigned long long epoch, gen;
	char ack[96];
	int n;

	if (sscanf(line, "REMUSDB-FAILOVER epoch=%llu generation=%llu",
		   &epoch, &gen) != 2)
		return;
	n = snprintf(ack, sizeof(ack), "REMUSDB-FAILOVER-ACK generation=%llu\n", gen);
	for (int i = 0; i < 50; i++) {
		ssize_t w = write(fd, ack, (size_t)n);

		if (w == n)
			return;
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			break;
		usleep(10000);
	}
	fprintf(stderr, "remusdb-eventd: could not answer the host: %s\n",
		strerror(errno));
}

int main(void)
{
	char dev[300], line[256];
	size_t have = 0;
	int fd = -1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; !find_port(dev, sizeof(dev)); i++) {
		if (i == 50) {
			fprintf(stderr, "remusdb-eventd: no virtio port %s\n", REMUSDB_PORT_NAME);
			return 1;
		}
		usleep(100000);
	}
	printf("remusdb-eventd: listening on %s (%s)\n", dev, REMUSDB_PORT_NAME);
	for (;;) {
		struct pollfd p;
		ssize_t n;

		if (fd < 0) {
			fd = open(dev, O_RDWR | O_NONBLOCK | O_CLOEXEC);
			if (fd < 0) {
				usleep(200000);
				continue;
			}
		}
		p = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return 1;
		n = read(fd, line + have, sizeof(line) - 1 - have);
		if (n <= 0) {
			if (n < 0 && errno == EAGAIN)
				continue;
			/* host side not connected (yet): wait and look again */
			usleep(200000);
			continue;
		}
		have += (size_t)n;
		line[have] = 0;
		for (char *nl; (nl = strchr(line, '\n'));) {
			*nl = 0;
			if (deliver(line) == 0)
				answer(fd, line);
			have -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, have + 1);
		}
		if (have == sizeof(line) - 1)
			have = 0;	/* an overlong line: drop it */
	}
}
