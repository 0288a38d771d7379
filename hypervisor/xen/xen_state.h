/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What a PV domain's restore needs from a checkpointed libxc stream, kept
 * as two opaque blobs the daemon carries like QEMU's (hv.h's config and
 * devstate), and the xl save image built from them and the RAM.
 *
 * Both blobs are libxc records (type:le32 len:le32 body pad8), libxc's
 * own and the backend's private ones (bit 31: optional, so a libxc that
 * sees one skips it):
 *
 *   config   = DOMAIN  [XL_HEADER]  static*
 *     DOMAIN     0x80524401  version:le32 type:le32 xen_major:le32
 *                            xen_minor:le32  (the libxc headers' fields)
 *     XL_HEADER  0x80524402  xl's save-file header and the domain's config,
 *                            as xl writes them before the libxl stream
 *     static     X86_PV_INFO, X86_CPUID_POLICY, X86_MSR_POLICY,
 *                STATIC_DATA_END, X86_PV_P2M_FRAMES: sent once, before any
 *                page (Xen's save order; a restore wants them so)
 *   devstate = rec*  TYPES
 *     rec        the epoch's TSC_INFO, SHARED_INFO and X86_PV_VCPU_* records
 *     TYPES      0x80524404  (count:le32 type:le32)*: every pfn's latest
 *                PAGE_DATA type, in runs from pfn 0 (a restore pins the
 *                page tables by it and checks cr3's page is one)
 *
 *   REQUEST      0x80524403  (len 0) the save helper asks for a checkpoint
 *                (in the stream only, never in a blob)
 *
 * The image (rdb_xen_image_write) is what `xl restore` reads:
 *   XL_HEADER  lhdr  LIBXC_CONTEXT  ihdr dhdr  static*
 *   PAGE_DATA* (every pfn 0..max with its type, data from the RAM)
 *   rec*  END  (libxl) END
 */
#ifndef RDB_XEN_STATE_H
#define RDB_XEN_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "xen/xc_stream.h"

#define RDB_XEN_REC_DOMAIN 0x80524401u
#define RDB_XEN_REC_XL_HEADER 0x80524402u
#define RDB_XEN_REC_REQUEST 0x80524403u
#define RDB_XEN_REC_TYPES 0x80524404u

/* A pfn no PAGE_DATA named (XEN_DOMCTL_PFINFO_XTAB >> 28): not populated. */
#define RDB_XEN_TYPE_NONE 0xfu
/* Larger guests are refused (a 64 GiB PV guest: 16 Mi pfns). */
#define RDB_XEN_MAX_PFNS (16ull << 20)

struct rdb_xen_state {
	struct rdb_buf config;		/* done once P2M_FRAMES is in */
	bool config_done;
	uint64_t npfns;			/* max_pfn + 1, from P2M_FRAMES */
	uint8_t *types;			/* [npfns] */
	struct rdb_buf epoch;		/* the open epoch's records */
	char err[160];
};

void rdb_xen_state_init(struct rdb_xen_state *s);
void rdb_xen_state_dispose(struct rdb_xen_state *s);
/* The stream's headers; xl's header and config, if known (NULL: none). */
int rdb_xen_state_domain(struct rdb_xen_state *s, const struct rdb_xc_domain *d);
int rdb_xen_state_xl_header(struct rdb_xen_state *s, const uint8_t *h,
			    size_t len);
/* A libxc record of the stream (not PAGE_DATA, CHECKPOINT or END): kept
 * in config or in the open epoch.  1 when it completed config (the RAM's
 * size is known: npfns), else 0; -EPROTO with err on a record out of
 * place, -ENOMEM. */
int rdb_xen_state_record(struct rdb_xen_state *s, uint32_t type,
			 const uint8_t *body, size_t len);
/* One pfn of PAGE_DATA: its type remembered.  -EPROTO past npfns. */
int rdb_xen_state_page(struct rdb_xen_state *s, uint64_t pfn, unsigned type);
/* The open epoch is complete: out = its devstate (rec* TYPES), and the
 * next epoch starts empty. */
int rdb_xen_state_epoch_end(struct rdb_xen_state *s, struct rdb_buf *out);

/* Writes the xl save image of config + devstate + ram (ram_bytes: npfns
 * pages) to fd.  0, or -errno of a write, or -EPROTO with err when a blob
 * lacks what a restore needs (no XL_HEADER, no vcpu 0, ...). */
int rdb_xen_image_write(int fd, const uint8_t *config, size_t config_len,
			const uint8_t *devstate, size_t devstate_len,
			const uint8_t *ram, uint64_t ram_bytes, char *err,
			size_t errlen);

/*
 * The restored domain's replicated disk (the backup serves its replica on
 * a socket of its own): config with xl's saved domain config changed so
 * that the one disk whose hotplug script is `script` (base name) has
 * pdev_path (xl's target=) `target`; everything else as saved.  0 with
 * the new blob in out, -EPROTO with err when there is no xl header, its
 * JSON does not parse, or not exactly one disk runs that script; -ENOMEM.
 */
int rdb_xen_config_set_disk(const uint8_t *config, size_t config_len,
			    const char *script, const char *target,
			    struct rdb_buf *out, char *err, size_t errlen);

#endif
