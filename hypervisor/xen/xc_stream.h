/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Parser of Xen's save/migration stream, as `xl migrate` and `xl remus`
 * send it (libxl over libxc, "migration v2"; Xen's docs/specs/
 * libxl-migration-stream.pandoc and libxc-migration-stream.pandoc) —
 * the Xen backend's counterpart of colo_stream.h.  Pure: fed bytes in any
 * split, reports through callbacks, never does I/O.  le = little-endian,
 * be = big-endian; every record is padded with zeroes to 8 octets.
 *
 *   libxl stream = lhdr lrec*
 *   lhdr   = ident:be64 "LibxlFmt"  version:be32 2  options:be32
 *            (bit 0 big-endian: refused; bit 1 legacy libxc stream:
 *             refused)
 *   lrec   = type:le32 len:le32 body[len] pad
 *            END 0 (len 0, the last record), LIBXC_CONTEXT 1 (len 0: the
 *            libxc stream follows, once), EMULATOR_XENSTORE_DATA 2,
 *            EMULATOR_CONTEXT 3 (emulator id:le32 index:le32 blob),
 *            CHECKPOINT_END 4 (len 0: the end of checkpoint k),
 *            CHECKPOINT_STATE 5 (id:le32, COLO's)
 *   libxc stream = ihdr dhdr xrec*, up to its END (libxl's records
 *            follow) or, in a checkpointed stream (xl remus), up to each
 *            CHECKPOINT: then libxl's records of that checkpoint up to
 *            its CHECKPOINT_END, and the libxc records go on (as libxl
 *            reads it: libxc hands it the stream at a checkpoint and
 *            takes it back after CHECKPOINT_END)
 *   ihdr   = marker:be64 ~0  id:be32 "XENF"  version:be32 2|3
 *            options:be16 (bit 0 big-endian: refused) res:be16 res:be32
 *   dhdr   = type:le32 (1 x86 PV, 2 x86 HVM, 3 x86 PVH, 4 ARM)
 *            page_shift:le16 12  res:le16  xen_major:le32  xen_minor:le32
 *   xrec   = type:le32 len:le32 body[len] pad; types 0x00-0x12 known
 *            (END, PAGE_DATA, X86_PV_INFO, ..., CHECKPOINT 0x0e,
 *            CHECKPOINT_DIRTY_PFN_LIST, STATIC_DATA_END, X86_CPUID_POLICY,
 *            X86_MSR_POLICY 0x12); bit 31 set: optional (passed on,
 *            may be ignored); any other type is refused
 *   PAGE_DATA = count:le32 (1..1024) res:le32 pfn:le64[count]
 *            page[4096] for each pfn whose type carries data
 *            (pfn bits 63-60 type: 0-4 and 9-0xc carry data, 0xd BROKEN,
 *             0xe XALLOC, 0xf XTAB do not, 5-8 refused; bits 59-52 zero)
 *
 * A raw libxc stream (no libxl layer) is parsed with RDB_XC_RAW.  The
 * state up to the first checkpoint's end is epoch 0; checkpoint k ends
 * epoch k (libxl's CHECKPOINT_END, or libxc's CHECKPOINT in a raw stream).
 */
#ifndef RDB_XC_STREAM_H
#define RDB_XC_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define RDB_XC_MAX_BATCH 1024u		/* pfns per PAGE_DATA (libxc's) */
#define RDB_XC_MAX_RECORD (16u << 20)	/* any other record's body */
#define RDB_XC_PAGE_SIZE 4096u

enum rdb_xc_layer {
	RDB_XC_LIBXL,		/* what xl sends: libxl records around libxc */
	RDB_XC_RAW,		/* a bare libxc stream */
};

/* libxc record types (xrec) */
enum rdb_xc_rec {
	RDB_XC_END = 0x00,
	RDB_XC_PAGE_DATA = 0x01,
	RDB_XC_X86_PV_INFO = 0x02,
	RDB_XC_X86_PV_P2M_FRAMES = 0x03,
	RDB_XC_X86_PV_VCPU_BASIC = 0x04,
	RDB_XC_X86_PV_VCPU_EXTENDED = 0x05,
	RDB_XC_X86_PV_VCPU_XSAVE = 0x06,
	RDB_XC_SHARED_INFO = 0x07,
	RDB_XC_TSC_INFO = 0x08,
	RDB_XC_HVM_CONTEXT = 0x09,
	RDB_XC_HVM_PARAMS = 0x0a,
	RDB_XC_TOOLSTACK = 0x0b,
	RDB_XC_X86_PV_VCPU_MSRS = 0x0c,
	RDB_XC_VERIFY = 0x0d,
	RDB_XC_CHECKPOINT = 0x0e,
	RDB_XC_CHECKPOINT_DIRTY_PFN_LIST = 0x0f,
	RDB_XC_STATIC_DATA_END = 0x10,
	RDB_XC_X86_CPUID_POLICY = 0x11,
	RDB_XC_X86_MSR_POLICY = 0x12,
	RDB_XC_REC__KNOWN,
};
/* bit 31 of a libxc record type: optional, may be ignored */
#define RDB_XC_OPTIONAL 0x80000000u

/* libxl record types (lrec) */
enum rdb_xl_rec {
	RDB_XL_END = 0,
	RDB_XL_LIBXC_CONTEXT = 1,
	RDB_XL_EMULATOR_XENSTORE_DATA = 2,
	RDB_XL_EMULATOR_CONTEXT = 3,
	RDB_XL_CHECKPOINT_END = 4,
	RDB_XL_CHECKPOINT_STATE = 5,
	RDB_XL_REC__KNOWN,
};

struct rdb_xc_domain {
	uint32_t version;		/* libxc stream version: 2 or 3 */
	uint32_t type;			/* 1 PV, 2 HVM, 3 PVH, 4 ARM */
	uint32_t xen_major, xen_minor;	/* 0.N: converted legacy stream */
};

struct rdb_xc_ops {
	/* The libxc headers, once, before any record. */
	int (*domain)(void *opaque, const struct rdb_xc_domain *d);
	/* One pfn of a PAGE_DATA record: data is 4096 bytes valid during the
	 * call, or NULL for a type that carries none (BROKEN, XALLOC, XTAB). */
	int (*page)(void *opaque, uint64_t epoch, uint64_t pfn, unsigned type,
		    const uint8_t *data);
	/* Any other libxc record but END, CHECKPOINT and PAGE_DATA, checked
	 * where the spec fixes its size; libxl = false.  Then any libxl
	 * record with a body (EMULATOR_*, CHECKPOINT_STATE); libxl = true. */
	int (*record)(void *opaque, uint64_t epoch, bool libxl, uint32_t type,
		      const uint8_t *body, size_t len);
	/* A consistent state: epoch is complete. */
	int (*epoch_end)(void *opaque, uint64_t epoch);
	/* The stream's END: nothing may follow. */
	int (*end)(void *opaque);
};

enum rdb_xc_pstate {
	RDB_XC_S_LHDR,		/* libxl header */
	RDB_XC_S_LREC,		/* libxl records */
	RDB_XC_S_IHDR,		/* libxc image + domain header */
	RDB_XC_S_XREC,		/* libxc records */
	RDB_XC_S_DONE,		/* after END: nothing more */
	RDB_XC_S_FAILED,
};

struct rdb_xc_parser {
	const struct rdb_xc_ops *ops;
	void *opaque;
	enum rdb_xc_layer layer;
	enum rdb_xc_pstate state;
	struct rdb_buf in;
	uint64_t epoch;
	bool have_headers;	/* libxc's, seen once */
	bool in_checkpoint;	/* libxl's records of a libxc CHECKPOINT */
	bool verify;		/* after VERIFY: pages are for checking */
	bool static_end;	/* STATIC_DATA_END seen (version 3) */
	uint64_t records, pages;
	char err[200];
	/* At most page_budget pages per feed (0: no limit): a PAGE_DATA
	 * record of up to 1024 pages is then taken over several feeds, the
	 * rest waiting in the parser (rdb_xc_parser_pending). */
	uint32_t page_budget, budget_left;
	uint32_t pd_done, pd_data_done;	/* of the record under way */
};

int rdb_xc_parser_init(struct rdb_xc_parser *p, enum rdb_xc_layer layer,
		       const struct rdb_xc_ops *ops, void *opaque);
void rdb_xc_parser_dispose(struct rdb_xc_parser *p);
/* 0 when all of buf was taken; -EPROTO (see rdb_xc_parser_error), -ENOMEM,
 * or a callback's error.  After an error the parser stays failed.  With
 * a page_budget, the pages of buf past it wait: feed (buf may be NULL)
 * again while rdb_xc_parser_pending. */
int rdb_xc_parser_feed(struct rdb_xc_parser *p, const uint8_t *buf,
		       size_t len);
bool rdb_xc_parser_pending(const struct rdb_xc_parser *p);
const char *rdb_xc_parser_error(const struct rdb_xc_parser *p);
const char *rdb_xc_rec_name(uint32_t type);

#endif
