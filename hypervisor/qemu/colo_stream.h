/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Parser of the stream a QEMU COLO primary sends to its secondary — here,
 * to remusdbd.  Pure: it is fed bytes in any split and reports through
 * callbacks; it never does I/O.  Grammar (QEMU 7.2-10.0, be = big-endian):
 *
 *   stream     = header config top* devtail colo*
 *   header     = magic:be32 0x5145564d  version:be32 3
 *   config     = 0x07 len:be32 machine[len] subsection*       (1 <= len <= 256)
 *   subsection = 0x05 len:u8 name[len] version:be32 1 body, by name:
 *                "configuration/target-page-bits": bits:be32   (must be 12)
 *                "configuration/capabilities": n:be32 (len:u8 cap[len])*n
 *                    (only x-ignore-shared and mapped-ram are ever listed;
 *                     either changes the RAM stream: rejected)
 *                "configuration/uuid": uuid[16]
 *   top        = command | ramsect
 *   command    = 0x08 cmd:be16 len:be16 0     (ENABLE_COLO 8, SWITCHOVER_START 11)
 *   ramsect    = (0x01 id:be32 len:u8 "ram" instance:be32 version:be32 4
 *                 memsize ramblock* | 0x02 id:be32 | 0x03 id:be32)
 *                page* eos [0x7e id:be32]
 *   memsize    = be64(total | MEM_SIZE 0x04 [| MAPPED 0x01])
 *   ramblock   = len:u8 idstr used:be64 [mapped:u8 [fd_offset:be64 0x20]]
 *                (until the used lengths add up to total; 1..64 blocks;
 *                 the bracketed part with MAPPED in memsize: capability
 *                 x-colo-mapped-ram, QEMU patch 0007: a mapped block's
 *                 memory fd comes over the socket with the 0x20 byte)
 *   page       = be64(addr | flags) [len:u8 idstr  unless CONTINUE 0x20]
 *                (ZERO 0x02: fill:u8 | PAGE 0x08: 4096 bytes |
 *                 MAPPED 0x01: nothing, the page is in the block's shared
 *                 memory; at checkpoints only, mapped blocks only)
 *   eos        = be64(EOS 0x10)
 *   devtail    = (0x04 device sections, not length-prefixed) ... 0x00 (EOF)
 *                0x06 len:be32 json[len]                 (len <= 16 MiB)
 *                — found as "EOF 0x06 len json[len] where json parses as
 *                  an object": QEMU then waits for our CHECKPOINT_READY,
 *                  so nothing follows it.
 *   colo       = REQUEST:be32 1  (we answer REPLY 2; the VM stops)
 *                VMSTATE_SEND:be32 3  command?  ramsect(0x03)  0x00
 *                VMSTATE_SIZE:be32 4  n:be64  devstate[n]  (1 <= n <= 64 MiB)
 *                (we answer VMSTATE_RECEIVED 5, VMSTATE_LOADED 6)
 *
 * The initial stream is epoch 0; checkpoint k is epoch k.  Its first
 * ram END marks where QEMU stopped the guest for the rest of it.
 */
#ifndef RDB_COLO_STREAM_H
#define RDB_COLO_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ramblock.h"

#define RDB_COLO_MAX_DEVSTATE (64u << 20)
#define RDB_COLO_MAX_VMDESC (16u << 20)
/* Places in the initial device state that look like the start of the
 * vmdesc but whose JSON has not fully arrived yet (normally at most one). */
#define RDB_COLO_MAX_CANDIDATES 64
/* File descriptors passed ahead of the bytes that use them. */
#define RDB_COLO_MAX_FDS 8
/* The byte a passed fd rides on (QEMU's qemu_file_put_fd). */
#define RDB_COLO_FD_CARRIER 0x20

enum rdb_colo_msg {
	RDB_COLO_CHECKPOINT_READY = 0,
	RDB_COLO_CHECKPOINT_REQUEST = 1,
	RDB_COLO_CHECKPOINT_REPLY = 2,
	RDB_COLO_VMSTATE_SEND = 3,
	RDB_COLO_VMSTATE_SIZE = 4,
	RDB_COLO_VMSTATE_RECEIVED = 5,
	RDB_COLO_VMSTATE_LOADED = 6,
	RDB_COLO_MSG__MAX
};

struct rdb_colo_ops {
	/* The raw QEMU_VM_CONFIGURATION section, from its 0x07 byte on. */
	int (*config)(void *opaque, const uint8_t *section, size_t len);
	int (*ram_blocks)(void *opaque, const struct rdb_ram_block *blocks,
			  size_t n);
	/* data: 4096 bytes valid during the call, or NULL: every byte = fill. */
	int (*page)(void *opaque, uint32_t block, uint64_t offset,
		    const uint8_t *data, uint8_t fill);
	/* devstate: device sections + EOF byte, no header. */
	int (*epoch_end)(void *opaque, uint64_t epoch, const uint8_t *devstate,
			 size_t len);
	/* QEMU asks for checkpoint `epoch`: answer REPLY now. */
	int (*checkpoint_request)(void *opaque, uint64_t epoch);
	/* Optional (NULL: not told).  QEMU stopped the guest to complete the
	 * initial stream: the first ram END (or a device section, or EOF,
	 * when no END came) in it.  QEMU writes no END before it stops the
	 * guest (savevm's precopy completion). */
	int (*initial_stop)(void *opaque);
	/* Optional (NULL: a mapped stream is refused).  Block blk's memory
	 * is fd (now the callee's to close) from fd_offset on, length bytes;
	 * called after ram_blocks, before any page. */
	int (*map_block)(void *opaque, uint32_t block, int fd,
			 uint64_t fd_offset, uint64_t length);
	/* A page of a mapped block, read from its memory during the call
	 * (the guest is stopped).  Needed with map_block. */
	int (*mapped_page)(void *opaque, uint32_t block, uint64_t offset);
};

enum rdb_colo_pstate {
	RDB_CP_HEADER,
	RDB_CP_CONFIG,
	RDB_CP_TOP,		/* initial stream, between sections */
	RDB_CP_RAM,		/* inside a ram section */
	RDB_CP_FOOTER,		/* after EOS: optional footer */
	RDB_CP_DEVTAIL,		/* initial device sections + vmdesc */
	RDB_CP_COLO,		/* waiting for REQUEST */
	RDB_CP_SEND,		/* waiting for VMSTATE_SEND */
	RDB_CP_CKPT_TOP,	/* checkpoint, between sections */
	RDB_CP_CKPT_SIZE,	/* VMSTATE_SIZE + n */
	RDB_CP_CKPT_DEV,	/* n bytes of device state */
	RDB_CP_FAILED,
};

struct rdb_colo_parser {
	const struct rdb_colo_ops *ops;
	void *opaque;
	enum rdb_colo_pstate state;
	struct rdb_buf in;
	uint64_t epoch;
	uint32_t ram_section_id;
	int have_ram_section;
	int blocks_reported;
	int stop_reported;	/* initial_stop was called */
	int ram_setup;		/* next ram record is MEM_SIZE (START) */
	uint64_t mem_total, mem_listed;
	struct rdb_ram_block blocks[RDB_MAX_RAM_BLOCKS];
	size_t nblocks;
	int cur_block;		/* for CONTINUE; persists across sections */
	bool mapped;		/* x-colo-mapped-ram: MAPPED records allowed */
	bool block_mapped[RDB_MAX_RAM_BLOCKS];
	int fds[RDB_COLO_MAX_FDS];	/* passed, not yet used */
	size_t nfds;
	uint64_t dev_len;
	/* RDB_CP_DEVTAIL: offsets into `in`, which is not consumed there. */
	size_t dt_scan;		/* next offset to test for EOF+VMDESCRIPTION */
	size_t dt_cand[RDB_COLO_MAX_CANDIDATES];	/* awaiting their JSON */
	size_t dt_ncand;
	char err[200];
};

int rdb_colo_parser_init(struct rdb_colo_parser *p,
			 const struct rdb_colo_ops *ops, void *opaque);
void rdb_colo_parser_dispose(struct rdb_colo_parser *p);
/* 0 when all of buf was taken; -EPROTO (see rdb_colo_parser_error),
 * -ENOMEM, or a callback's error.  After an error the parser stays failed. */
int rdb_colo_parser_feed(struct rdb_colo_parser *p, const uint8_t *buf,
			 size_t len);
const char *rdb_colo_parser_error(const struct rdb_colo_parser *p);
/* A file descriptor that came over the stream's socket (SCM_RIGHTS), to
 * queue before the bytes read with it are fed: the parser owns it (used
 * by the next mapped block, closed by dispose).  0 or -EPROTO. */
int rdb_colo_parser_take_fd(struct rdb_colo_parser *p, int fd);
void rdb_colo_msg_encode(enum rdb_colo_msg m, uint8_t out[4]);

#endif
