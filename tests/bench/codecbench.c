// SPDX-License-Identifier: GPL-2.0-only
/*
 * codecbench: page-delta codecs on a captured corpus (remusdbctl capture).
 *
 *   codecbench CORPUS [--min-seconds S] [--how TEXT]  ->  JSON on stdout
 *
 * Replays the corpus epoch by epoch, keeping the last version of every
 * page: each RAW page that had an earlier version becomes an (old, new)
 * pair — what the primary's cache would give the encoder.  On those
 * pairs, single-threaded, each timed over at least --min-seconds:
 *   xor_rle            rdb_xorrle_encode / rdb_xorrle_decode
 *   byteloop_baseline  the byte-at-a-time encoder of the same grammar
 *                      (the shape of QEMU's xbzrle), same decoder
 *   lz4                LZ4_compress_default / LZ4_decompress_safe on the
 *                      new page alone
 * encode/decode GB/s per core count raw page bytes (4096 per pair).
 * ratio = output bytes / raw bytes.  Every decode is checked against the
 * new page once before timing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lz4.h>

#include "pagecache.h"
#include "proto.h"
#include "xorrle.h"

#define PG RDB_PAGE_SIZE

struct pair {
	uint8_t *old, *new_;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *msg)
{
	fprintf(stderr, "codecbench: %s\n", msg);
	exit(1);
}

/* Last version of each page: open addressing on (block, offset). */
struct slot {
	uint64_t key;
	uint8_t *page;
};
static struct slot *tab;
static size_t tab_cap = 1 << 20;

static uint8_t **lookup(uint64_t key)
{
	size_t i = (size_t)(key * 0x9e3779b97f4a7c15ULL >> 40) & (tab_cap - 1);

	while (tab[i].page && tab[i].key != key)
		i = (i + 1) & (tab_cap - 1);
	tab[i].key = key;
	return &tab[i].page;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *how = "unknown";
	double min_s = 1.0;
	struct pair *pairs = NULL;
	size_t npairs = 0, cap = 0, used = 0, epochs = 0, pages = 0;
	uint8_t *out, *work;
	FILE *f;
	char magic[8];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--min-seconds") && i + 1 < argc)
			min_s = atof(argv[++i]);
		else if (!strcmp(argv[i], "--how") && i + 1 < argc)
			how = argv[++i];
		else
			path = argv[i];
	}
	if (!path)
		die("usage: codecbench CORPUS [--min-seconds S] [--how TEXT]");
	f = fopen(path, "rb");
	if (!f || fread(magic, 1, 8, f) != 8 || memcmp(magic, "RDBCORP1", 8))
		die("not a corpus file (RDBCORP1)");
	tab = calloc(tab_cap, sizeof(*tab));
	for (;;) {
		char tag[4];
		uint64_t epoch;
		uint32_t nruns;

		if (fread(tag, 1, 4, f) != 4)
			break;
		if (memcmp(tag, "EPOC", 4) || fread(&epoch, 8, 1, f) != 1 ||
		    fread(&nruns, 4, 1, f) != 1)
			die("corrupt corpus (epoch header)");
		epochs++;
		for (uint32_t r = 0; r < nruns; r++) {
			uint32_t block, count;
			uint64_t len;
			uint8_t *recs, *p;

			if (fread(&block, 4, 1, f) != 1 || fread(&count, 4, 1, f) != 1 ||
			    fread(&len, 8, 1, f) != 1 || len > (1ULL << 32))
				die("corrupt corpus (run header)");
			recs = malloc(len ? len : 1);
			if (fread(recs, 1, len, f) != len)
				die("corrupt corpus (records)");
			p = recs;
			for (uint32_t k = 0; k < count; k++) {
				size_t sz = rdb_proto_page_record_size(p);
				uint64_t off = rdb_proto_page_record_offset(p);
				uint8_t **last;

				if (!sz || (size_t)(p - recs) + sz > len)
					die("corrupt corpus (record)");
				pages++;
				if (used * 2 >= tab_cap)
					die("corpus has too many distinct pages");
				last = lookup(rdb_page_key(block, off));
				if (!*last)
					used++;
				if (p[8] == RDB_PAGE_RAW) {
					uint8_t *nw = malloc(PG);

					memcpy(nw, p + 9, PG);
					if (*last) {
						if (npairs == cap) {
							cap = cap ? cap * 2 : 4096;
							pairs = realloc(pairs, cap * sizeof(*pairs));
						}
						pairs[npairs].old = *last;
						pairs[npairs].new_ = nw;
						npairs++;
					}
					*last = nw;
				} else {
					uint8_t *nw = malloc(PG);

					memset(nw, p[9], PG);
					*last = nw;
				}
				p += sz;
			}
			free(recs);
		}
	}
	fclose(f);
	if (!npairs)
		die("no page appears twice in the corpus: capture more epochs");

	/* a byte loop's worst case is 3 bytes per 2 (alternating bytes) */
	size_t stride = 2 * PG + 64;

	out = malloc(npairs * stride);
	work = malloc(PG);
	size_t *olen = malloc(npairs * sizeof(*olen));
	const char *names[3] = { "xor_rle", "byteloop_baseline", "lz4" };
	double enc_gbps[3], dec_gbps[3], ratio[3];

	for (int c = 0; c < 3; c++) {
		double t0, t, total_out = 0;
		size_t reps = 0;

		/* encode (and check every decode once) */
		for (size_t i = 0; i < npairs; i++) {
			long n;

			if (c == 0)
				n = rdb_xorrle_encode(pairs[i].old, pairs[i].new_, PG,
						      out + i * stride, stride);
			else if (c == 1)
				n = rdb_xorrle_encode_byteloop(pairs[i].old, pairs[i].new_,
							       PG, out + i * stride, stride);
			else
				n = LZ4_compress_default((const char *)pairs[i].new_,
							 (char *)out + i * stride, PG,
							 (int)stride);
			if (n < 0)
				die("encoder failed");
			olen[i] = (size_t)n;
			total_out += (double)n;
			if (c < 2) {
				memcpy(work, pairs[i].old, PG);
				if (rdb_xorrle_decode(work, PG, out + i * stride, olen[i]) ||
				    memcmp(work, pairs[i].new_, PG))
					die("XOR+RLE round trip failed");
			} else if (LZ4_decompress_safe((const char *)out + i * stride,
						       (char *)work, (int)olen[i], PG) != (int)PG ||
				   memcmp(work, pairs[i].new_, PG)) {
				die("LZ4 round trip failed");
			}
		}
		ratio[c] = total_out / ((double)npairs * PG);
		t0 = now_s();
		do {
			for (size_t i = 0; i < npairs; i++) {
				if (c == 0)
					rdb_xorrle_encode(pairs[i].old, pairs[i].new_, PG,
							  out + i * stride, stride);
				else if (c == 1)
					rdb_xorrle_encode_byteloop(pairs[i].old, pairs[i].new_,
								   PG, out + i * stride, stride);
				else
					LZ4_compress_default((const char *)pairs[i].new_,
							     (char *)out + i * stride, PG,
							     (int)stride);
			}
			reps++;
			t = now_s() - t0;
		} while (t < min_s);
		enc_gbps[c] = (double)reps * npairs * PG / t / 1e9;
		reps = 0;
		t0 = now_s();
		do {
			for (size_t i = 0; i < npairs; i++) {
				if (c < 2) {
					memcpy(work, pairs[i].old, PG);
					rdb_xorrle_decode(work, PG, out + i * stride, olen[i]);
				} else {
					LZ4_decompress_safe((const char *)out + i * stride,
							    (char *)work, (int)olen[i], PG);
				}
			}
			reps++;
			t = now_s() - t0;
		} while (t < min_s);
		dec_gbps[c] = (double)reps * npairs * PG / t / 1e9;
	}
	printf("{\n");
	for (int c = 0; c < 3; c++)
		printf("  \"%s\": {\"encode_gbps_per_core\": %.3f, \"decode_gbps_per_core\": %.3f, \"ratio\": %.5f},\n",
		       names[c], enc_gbps[c], dec_gbps[c], ratio[c]);
	printf("  \"xor_rle_vs_baseline_encode_speedup\": %.2f,\n", enc_gbps[0] / enc_gbps[1]);
	printf("  \"corpus\": {\"file\": \"%s\", \"epochs\": %zu, \"pages\": %zu, "
	       "\"pairs\": %zu, \"distinct_pages\": %zu, \"how\": \"%s\"},\n",
	       path, epochs, pages, npairs, used, how);
	printf("  \"note\": \"pairs = RAW pages with an earlier version in the corpus (what the page cache gives the encoder); "
	       "GB/s = raw page bytes per second, one thread; decode timing includes restoring the old page (a 4 KiB memcpy)\"\n}\n");
	return 0;
}
