// SPDX-License-Identifier: GPL-2.0-only
/* dirtier: runs in the test guest; writes to --pages-per-s random pages of
 * a --mb MiB buffer, spread evenly over time — a steady dirty-page load
 * for the checkpoint benchmark (default 8000/s: ~200 pages per 25 ms). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long pages_per_s = 8000, mb = 64;
	uint64_t x = 88172645463325252ull;
	unsigned char *buf;
	size_t npages;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--pages-per-s"))
			pages_per_s = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--mb"))
			mb = atol(argv[i + 1]);
	}
	npages = (size_t)mb * 256;
	buf = malloc(npages * 4096);
	if (!buf)
		return 1;
	memset(buf, 1, npages * 4096);
	printf("dirtier: %ld pages/s over %ld MiB\n", pages_per_s, mb);
	fflush(stdout);
	for (;;) {
		/* 1 ms worth of pages, then sleep the rest of the millisecond */
		for (long k = 0; k < pages_per_s / 1000; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[(x % npages) * 4096 + (x >> 40) % 4096]++;
		}
		usleep(1000);
	}
}
