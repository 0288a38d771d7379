// SPDX-License-Identifier: GPL-2.0-only
#include "ramimage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int rdb_ramimage_open(const char *dir, const struct rdb_ram_block *blocks,
		      size_t n, struct rdb_ramimage *img)
{
	int rc = 0;

	memset(img, 0, sizeof(*img));
	if (n == 0 || n > RDB_MAX_RAM_BLOCKS)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		img->b[i].fd = -1;
	for (size_t i = 0; i < n; i++) {
		char name[256];
		void *m;
		int w;

		/* mmap cannot map 0 bytes, and QEMU's blocks are whole pages. */
		if (blocks[i].used_length == 0 ||
		    blocks[i].used_length % RDB_PAGE_SIZE ||
		    blocks[i].used_length > (uint64_t)SIZE_MAX / 2) {
			rc = -EINVAL;
			goto out;
		}
		snprintf(name, sizeof(name), "%s", blocks[i].idstr);
		for (char *c = name; *c; c++)
			if (*c == '/')
				*c = '_';
		snprintf(img->b[i].idstr, sizeof(img->b[i].idstr), "%s",
			 blocks[i].idstr);
		w = snprintf(img->b[i].path, sizeof(img->b[i].path), "%s/%s.img",
			     dir, name);
		if (w < 0 || (size_t)w >= sizeof(img->b[i].path)) {
			rc = -ENAMETOOLONG;
			goto out;
		}
		/* "a/b" and "a_b" would share a file and overwrite each other. */
		for (size_t k = 0; k < i; k++)
			if (strcmp(img->b[k].path, img->b[i].path) == 0) {
				rc = -EEXIST;
				goto out;
			}
		img->b[i].length = blocks[i].used_length;
		img->n = i + 1;
		/* O_NOFOLLOW: a link planted in the state dir must not turn
		 * the guest's RAM into writes somewhere else. */
		img->b[i].fd = open(img->b[i].path,
				    O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (img->b[i].fd < 0) {
			rc = -errno;
			goto out;
		}
		/* Fresh contents: a stale image must never leak into a new VM. */
		if (ftruncate(img->b[i].fd, 0) < 0) {
			rc = -errno;
			goto out;
		}
		rc = -posix_fallocate(img->b[i].fd, 0, (off_t)blocks[i].used_length);
		if (rc < 0)
			goto out;
		m = mmap(NULL, blocks[i].used_length, PROT_READ | PROT_WRITE,
			 MAP_SHARED, img->b[i].fd, 0);
		if (m == MAP_FAILED) {
			rc = -errno;
			goto out;
		}
		img->b[i].base = m;
	}
out:
	if (rc < 0)
		rdb_ramimage_close(img);
	return rc;
}

void rdb_ramimage_close(struct rdb_ramimage *img)
{
	for (size_t i = 0; i < img->n; i++) {
		if (img->b[i].base)
			munmap(img->b[i].base, img->b[i].length);
		if (img->b[i].fd >= 0)
			close(img->b[i].fd);
		img->b[i].base = NULL;
		img->b[i].fd = -1;
	}
	img->n = 0;
}

uint8_t *rdb_ramimage_base(struct rdb_ramimage *img, size_t block)
{
	return block < img->n ? img->b[block].base : NULL;
}

uint64_t rdb_ramimage_length(const struct rdb_ramimage *img, size_t block)
{
	return block < img->n ? img->b[block].length : 0;
}

const char *rdb_ramimage_path(const struct rdb_ramimage *img, const char *idstr)
{
	for (size_t i = 0; i < img->n; i++)
		if (strcmp(img->b[i].idstr, idstr) == 0)
			return img->b[i].path;
	return NULL;
}
