// SPDX-License-Identifier: GPL-2.0-only
/* qcow2 headers, for serving the image file's bytes (qcow2.h). */
#include "qcow2.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (1ull << 20)
/* incompatible feature bits (qcow2 v3): dirty, corrupt, external data
 * file, compression type, extended L2 */
#define INCOMPAT_DIRTY (1ull << 0)
#define INCOMPAT_CORRUPT (1ull << 1)
#define INCOMPAT_DATA_FILE (1ull << 2)
#define INCOMPAT_COMPRESSION (1ull << 3)
#define INCOMPAT_EXTL2 (1ull << 4)

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

int rdb_qcow2_probe(int fd, uint64_t file_size, struct rdb_qcow2_info *info,
		    char *err, size_t errlen)
{
	uint8_t h[112] = { 0 };
	ssize_t r = pread(fd, h, sizeof(h), 0);
	uint64_t boff, incompat = 0;
	uint32_t blen;

	memset(info, 0, sizeof(*info));
	if (r < 0) {
		snprintf(err, errlen, "reading its header: %s", strerror(errno));
		return -errno;
	}
	if (r < 4 || memcmp(h, "QFI\xfb", 4) != 0)
		return 0;
	if (r < 72) {
		snprintf(err, errlen, "a qcow2 header cut short (%zd bytes)", r);
		return -EINVAL;
	}
	info->version = be32(h + 4);
	boff = be64(h + 8);
	blen = be32(h + 16);
	info->cluster_bits = be32(h + 20);
	info->virtual_size = be64(h + 24);
	if (info->version != 2 && info->version != 3) {
		snprintf(err, errlen, "qcow2 version %u (2 and 3 are known)",
			 info->version);
		return -EINVAL;
	}
	if (info->cluster_bits < 9 || info->cluster_bits > 21 ||
	    info->virtual_size == 0 || info->virtual_size > (1ull << 56)) {
		snprintf(err, errlen, "a malformed qcow2 header (cluster bits %u, "
			 "virtual size %llu)", info->cluster_bits,
			 (unsigned long long)info->virtual_size);
		return -EINVAL;
	}
	if (be32(h + 32) != 0) {
		snprintf(err, errlen, "an encrypted qcow2 image (the backup would "
			 "need its key): not protected");
		return -EOPNOTSUPP;
	}
	if (info->version == 3) {
		if (r < 104) {
			snprintf(err, errlen, "a qcow2 v3 header cut short");
			return -EINVAL;
		}
		incompat = be64(h + 72);
	}
	if (incompat & INCOMPAT_DATA_FILE) {
		snprintf(err, errlen, "a qcow2 image with an external data file "
			 "(its data is not in this file): not protected");
		return -EOPNOTSUPP;
	}
	if (incompat & INCOMPAT_CORRUPT) {
		snprintf(err, errlen, "a qcow2 image marked corrupt (qemu-img "
			 "check -r all)");
		return -EINVAL;
	}
	if (incompat & ~(INCOMPAT_DIRTY | INCOMPAT_COMPRESSION | INCOMPAT_EXTL2)) {
		snprintf(err, errlen, "a qcow2 image with unknown incompatible "
			 "features 0x%llx", (unsigned long long)incompat);
		return -EOPNOTSUPP;
	}
	if (boff) {
		if (blen == 0 || blen >= sizeof(info->backing) ||
		    boff > file_size || blen > file_size - boff) {
			snprintf(err, errlen, "a malformed backing file name in "
				 "the qcow2 header");
			return -EINVAL;
		}
		r = pread(fd, info->backing, blen, (off_t)boff);
		if (r != (ssize_t)blen) {
			snprintf(err, errlen, "reading the backing file name");
			return -EIO;
		}
		info->backing[blen] = 0;
		if (strlen(info->backing) != blen) {
			snprintf(err, errlen, "a backing file name with a NUL in it");
			return -EINVAL;
		}
		if (info->backing[0] != '/') {
			snprintf(err, errlen, "backing file '%s' is a relative name: "
				 "served over NBD the image has no directory to "
				 "find it in (qemu-img rebase -u -b /absolute/path)",
				 info->backing);
			return -EINVAL;
		}
	}
	if (file_size > rdb_qcow2_ceiling(info)) {
		snprintf(err, errlen, "a qcow2 file of %llu bytes, past %llu (its "
			 "virtual size %llu + 1/64 + 64 MiB: internal snapshots?): "
			 "it could not grow while served at a fixed size",
			 (unsigned long long)file_size,
			 (unsigned long long)rdb_qcow2_ceiling(info),
			 (unsigned long long)info->virtual_size);
		return -EFBIG;
	}
	return 1;
}

int rdb_qcow2_probe_path(const char *path, struct rdb_qcow2_info *info,
			 char *err, size_t errlen)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	memset(info, 0, sizeof(*info));
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s", strerror(errno));
		return rc;
	}
	rc = fstat(fd, &sb) < 0 ? -errno : 0;
	if (rc < 0)
		snprintf(err, errlen, "%s", strerror(-rc));
	else
		rc = rdb_qcow2_probe(fd, (uint64_t)sb.st_size, info, err, errlen);
	close(fd);
	return rc;
}

uint64_t rdb_qcow2_ceiling(const struct rdb_qcow2_info *info)
{
	uint64_t c = info->virtual_size + info->virtual_size / 64 + 64 * MIB;

	return (c + MIB - 1) / MIB * MIB;
}

int rdb_qcow2_backing_chain(const char *path, char chain[][512], unsigned max,
			    unsigned *n, char *err, size_t errlen)
{
	char cur[512];

	*n = 0;
	snprintf(cur, sizeof(cur), "%s", path);
	for (;;) {
		struct rdb_qcow2_info info;
		char why[400];
		int rc = rdb_qcow2_probe_path(cur, &info, why, sizeof(why));

		/* (a backing file is read only: past the ceiling is fine) */
		if (rc == -EFBIG)
			rc = 1;
		if (rc < 0) {
			snprintf(err, errlen, "%s: %s", cur, why);
			return rc;
		}
		if (rc == 0 || !info.backing[0])
			return 0;
		if (*n >= max) {
			snprintf(err, errlen, "%s: a backing chain longer than %u",
				 path, max);
			return -E2BIG;
		}
		snprintf(chain[*n], 512, "%s", info.backing);
		snprintf(cur, sizeof(cur), "%s", info.backing);
		(*n)++;
	}
}
