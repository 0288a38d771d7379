// SPDX-License-Identifier: GPL-2.0-only
/*
 * remusdb-eventd: the guest helper of the failover event.  Finds the
 * virtio-serial port named org.remusdb.0, reads the host's lines
 *   "REMUSDB-FAILOVER epoch=<u64> generation=<u64>"
 * and hands each to remusdb.ko by writing a struct remusdb_event to
 * /dev/remusdb, where the DBMS waits for it.  Runs as root; the module
 * refuses the write otherwise.  A port the host has not opened reads as
 * end-of-file or hangs up: the helper polls again every 200 ms.
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

static void deliver(const char *line)
{
	struct remusdb_event ev;
	unsigned long long epoch, gen;
	int fd;

	if (sscanf(line, "REMUSDB-FAILOVER epoch=%llu generation=%llu",
		   &epoch, &gen) != 2) {
		fprintf(stderr, "remusdb-eventd: ignoring \"%s\"\n", line);
		return;
	}
	ev.epoch = epoch;
	ev.generation = gen;
	fd = open(REMUSDB_DEV, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, &ev, sizeof(ev)) != (ssize_t)sizeof(ev))
		fprintf(stderr, "remusdb-eventd: %s: %s\n", REMUSDB_DEV, strerror(errno));
	else
		printf("remusdb-eventd: failover event epoch %llu generation %llu "
		       "delivered\n", epoch, gen);
	fflush(stdout);
	if (fd >= 0)
		close(fd);
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
			fd = open(dev, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
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
			deliver(line);
			have -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, have + 1);
		}
		if (have == sizeof(line) - 1)
			have = 0;	/* an overlong line: drop it */
	}
}
