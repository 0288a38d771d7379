// SPDX-License-Identifier: GPL-2.0-only
/* ticker: runs in the test guest; prints "tick N" every --interval-ms
 * (default 10) so the host can see, from the serial console, how long
 * the guest was frozen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int interval_ms = 10;
	unsigned long long n = 0;

	if (argc == 3 && !strcmp(argv[1], "--interval-ms"))
		interval_ms = atoi(argv[2]);
	for (;;) {
		printf("tick %llu\n", ++n);
		fflush(stdout);
		usleep((useconds_t)interval_ms * 1000);
	}
}
