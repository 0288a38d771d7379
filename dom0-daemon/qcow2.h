/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * qcow2 disk images, as remusdbd serves them: the image file's bytes,
 * with QEMU's qcow2 driver on top of the NBD export
 * (driver=qcow2,file.driver=nbd,...), so the replica is the same qcow2
 * file (docs/config.md).  Only the header is read here.
 *
 * An NBD export has a fixed size, and a qcow2 file grows as clusters are
 * allocated.  So the file is extended (sparse) to a ceiling before it is
 * served: the virtual size, plus 1/64 of it for the metadata (L2 tables
 * and refcount blocks take 1/8192 and 1/32768 of it at 64 KiB clusters),
 * plus 64 MiB, in whole MiB.  qcow2 allocates by its refcounts, not at
 * the file's end, so the zeroed tail is free space to it (qemu-img check
 * finds no error).  A file already past the ceiling (internal snapshots)
 * is refused: its growth would fail in the guest.
 *
 * Refused too: encryption (the replica would need the key), an external
 * data file (its bytes are not in this file), a relative backing file
 * name (over NBD there is no directory to resolve it in), an unknown
 * incompatible feature.  A backing file is opened by QEMU by its path on
 * both hosts: it must exist, unchanged, on the backup (checked at
 * protect, as read-only images are: roimage.h).
 */
#ifndef RDB_QCOW2_H
#define RDB_QCOW2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDB_QCOW2_CHAIN_MAX 8	/* backing files followed, at most */

struct rdb_qcow2_info {
	uint32_t version;
	uint32_t cluster_bits;
	uint64_t virtual_size;
	char backing[512];	/* "" without a backing file */
};

/*
 * 1: the file fd (size file_size) is a qcow2 image we can serve, info
 * filled; 0: not qcow2 (served raw); <0: a qcow2 image refused or
 * unreadable, err saying why.
 */
int rdb_qcow2_probe(int fd, uint64_t file_size, struct rdb_qcow2_info *info,
		    char *err, size_t errlen);
/* The same, for the file at path (opened read-only here). */
int rdb_qcow2_probe_path(const char *path, struct rdb_qcow2_info *info,
			 char *err, size_t errlen);
/* The size the file is served at (see above). */
uint64_t rdb_qcow2_ceiling(const struct rdb_qcow2_info *info);
/*
 * The backing files of the qcow2 image at path, nearest first (a raw
 * backing file ends the chain): *n of them in chain[], paths.  0 (n = 0
 * for a raw image or one without backing), or <0 with err.
 */
int rdb_qcow2_backing_chain(const char *path, char chain[][512], unsigned max,
			    unsigned *n, char *err, size_t errlen);

#endif
