/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The read-only images a VM's QEMU arguments name (a CD-ROM, an OVMF
 * code image, a read-only drive): not replicated, so the backup's QEMU
 * opens its own file of the same path after a failover.  That file must
 * hold the same bytes, or the restored guest reads another disk than the
 * one it ran on (I4).  The primary sends each image's fingerprint (size,
 * SHA-256 of its first and last MiB) with the VM's setup and the backup
 * refuses the protection when its file differs or is missing.
 *
 * A writable drive in the QEMU arguments (-drive without readonly=on or
 * media=cdrom, -hda..-hdd, -pflash, a -blockdev not read-only) would not
 * be replicated at all: refused (use disk / extra_disk).
 */
#ifndef RDB_ROIMAGE_H
#define RDB_ROIMAGE_H

#include <stddef.h>
#include <stdint.h>

#define RDB_ROIMAGE_MAX 8

struct rdb_roimage {
	char path[512];
	uint64_t size;
	char sha256[65];	/* hex, of the first and last MiB */
};

/*
 * The read-only images among QEMU arguments args[0..n) (their paths;
 * size and sha256 left empty), at most RDB_ROIMAGE_MAX.  -EINVAL, with
 * err naming the argument, for a writable drive or a malformed one;
 * -E2BIG for more images than that.
 */
int rdb_roimages_list(char *const *args, size_t n, struct rdb_roimage *out,
		      unsigned *count, char *err, size_t errlen);
/* Fills size and sha256 from the file at im->path; err says why not. */
int rdb_roimage_fingerprint(struct rdb_roimage *im, char *err, size_t errlen);
/* 0 when this host's file at want->path has want's size and sha256;
 * -ENOENT/-EINVAL/-EIO otherwise, err saying how it differs. */
int rdb_roimage_verify(const struct rdb_roimage *want, char *err,
		       size_t errlen);

#endif
