/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Bringing a VM back on the backup.  A fresh QEMU, started with the VM's
 * own arguments plus rdb_restore_argv()'s, loads a migration stream we
 * synthesize from the last committed checkpoint (be = big-endian):
 *
 *   stream   = magic:be32 0x5145564d  version:be32 3
 *              config ramstart ramend devstate vmdesc
 *   config   = 0x07 len:be32 machine[len]
 *              [tpb] caps [uuid]         (the primary's, re-emitted)
 *   tpb      = sub("configuration/target-page-bits") bits:be32
 *   caps     = sub("configuration/capabilities") n:be32 (len:u8 name)*n
 *              (the primary's list, plus "x-ignore-shared")
 *   uuid     = sub("configuration/uuid") uuid[16]
 *   sub(s)   = 0x05 len:u8 s version:be32 1
 *   ramstart = 0x01 id:be32 len:u8 "ram" instance:be32 0 version:be32 4
 *              be64(total | MEM_SIZE 0x04)
 *              { len:u8 idstr used:be64 gpa:be64 0 }*   (every block)
 *              be64(EOS 0x10) 0x7e id:be32
 *   ramend   = 0x03 id:be32 page* be64(EOS 0x10) 0x7e id:be32
 *   page     = be64(offset | ZERO 0x02 [| CONTINUE 0x20]) [len:u8 idstr] 0x00
 *            | be64(offset | PAGE 0x08 [| CONTINUE 0x20]) [len:u8 idstr]
 *              data[4096]
 *              (idstr unless CONTINUE; pages of the blocks not shared only)
 *   devstate = the committed device sections + EOF 0x00, as QEMU sent them
 *   vmdesc   = 0x06 len:be32 json[len]   (a stub; QEMU reads and skips it)
 *
 * The main RAM block is not in the stream: QEMU maps the backup's image
 * file of it (memory-backend-file share=on) and, with capability
 * x-ignore-shared set before migrate-incoming, skips it.  So the stream is
 * ~220 KB (ROMs, ACPI tables, device state) whatever the guest's RAM size.
 * With x-ignore-shared the destination reads a gpa after every block's
 * length and compares it with the MemoryRegion address of each skipped
 * block; a memory backend's region is only mapped through aliases and sits
 * at 0 itself, which is also what a QEMU source sends for it.
 * The destination validates x-ignore-shared against the configuration's
 * capability list (QEMU savevm.c should_validate_capability), so the
 * primary's configuration, which lacks it, is re-emitted with it.
 *
 * The device state's globalstate section says "running", so a QEMU started
 * without -S runs the guest by itself once the stream is loaded.
 */
#ifndef RDB_RESTORE_H
#define RDB_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The main RAM block's RAMBlock idstr: the default RAM backend id of the
 * pc and q35 machines, and the id rdb_restore_argv() gives the backend. */
#define RDB_RESTORE_SHARED_BLOCK "pc.ram"

struct rdb_restore_block {
	const char *idstr;	/* 1..255 bytes */
	uint64_t used_length;	/* > 0, a multiple of 4096 */
	bool shared;		/* mapped from the image file, not sent */
	const uint8_t *data;	/* !shared: used_length bytes */
};

struct rdb_restore_spec {
	/* The primary's QEMU_VM_CONFIGURATION section, from its 0x07 byte
	 * to the end of its last subsection. */
	const uint8_t *config;
	size_t config_len;
	/* Every RAM block of the primary, in its order. */
	const struct rdb_restore_block *blocks;
	size_t nblocks;
	/* The committed device state: FULL sections + EOF (0x00). */
	const uint8_t *devstate;
	size_t devstate_len;
};

/*
 * Builds the whole stream into a malloc'd buffer (the caller frees it).
 * -EINVAL: a spec field out of range; -EPROTO: the configuration section
 * is not one this code can re-emit; -ENOMEM.
 */
int rdb_restore_stream_build(const struct rdb_restore_spec *spec,
			     uint8_t **buf_out, size_t *len_out);
/* Writes buf to fd before deadline_ns (monotonic): -ETIMEDOUT past it,
 * -EPIPE/-ECONNRESET when QEMU closed the socket (it rejected the
 * stream: its log says why). */
int rdb_restore_stream_send(int fd, const uint8_t *buf, size_t len,
			    uint64_t deadline_ns);

/*
 * argv for the restored QEMU: qemu_binary, the VM's common arguments, then
 *   -object memory-backend-file,id=pc.ram,size=RAM,mem-path=IMAGE,share=on
 *   -machine memory-backend=pc.ram
 *   -qmp unix:QMP,server=on,wait=off
 *   -qmp unix:WD_QMP,server=on,wait=off           (if wd_qmp_path: the
 *                                                   watchdog's, when the
 *                                                   VM is protected again)
 *   -netdev stream,id=net0,server=off,addr.type=unix,addr.path=NET,
 *           reconnect-ms=100                       (if net_path)
 *   -serial file:CONSOLE                           (if console_path)
 *   or, with serial_sock too:
 *   -chardev socket,id=rdbser0,path=SERIAL,server=on,wait=off,
 *            logfile=CONSOLE  -serial chardev:rdbser0
 *   -drive DRIVE                                   (if drive: the replica,
 *                                                   see rdb_qemu_nbd_drive)
 *   -drive MORE_DRIVES[i] ...                      (the VM's other disks'
 *                                                   replicas, in order)
 *   -netdev stream,id=net<i+1>,...,addr.path=MORE_NETS[i] ...
 *                                                  (the VM's other NICs,
 *                                                   as net0's)
 *   -chardev socket,id=rdbevent,path=EVENT,server=on,wait=off
 *                                                  (if event_path: the
 *                                                   failover event port)
 *   -incoming defer
 * NULL-terminated; free with rdb_restore_argv_free.  The common arguments
 * must not contain -S (the guest would stay paused) nor a memory backend
 * of their own; ram_bytes is the primary's pc.ram used_length (its -m).
 */
int rdb_restore_argv(const char *qemu_binary, char *const *common,
		     size_t ncommon, const char *image_path, uint64_t ram_bytes,
		     const char *qmp_path, const char *wd_qmp_path,
		     const char *net_path, const char *console_path,
		     const char *serial_sock, const char *drive,
		     const char *event_path, const char *const *more_drives,
		     size_t nmore, const char *const *more_nets,
		     size_t nnets, char ***argv_out);
void rdb_restore_argv_free(char **argv);	/* NULL is fine */
/* The -drive value of a VM disk served by remusdbd over NBD on a unix
 * socket, the same on both hosts but for the socket: "if=none,id=ID,
 * driver=nbd,server.type=unix,server.path=SOCK,reconnect-delay=15" (a
 * new disk server taking over the socket, when the restored VM is
 * protected again, is a reconnect the guest does not see).  qcow2: the
 * export is a qcow2 file's bytes, QEMU's qcow2 driver on top:
 * "if=none,id=ID,driver=qcow2,file.driver=nbd,file.server.type=unix,
 * file.server.path=SOCK,file.reconnect-delay=15" (RDB_HV_DISK_QCOW2).
 * The UEFI variable store (RDB_HV_DISK_PFLASH): "if=pflash,unit=1,"
 * in place of "if=none,id=ID,".
 * -ENAMETOOLONG if it does not fit. */
int rdb_qemu_nbd_drive(char *buf, size_t len, const char *id,
		       const char *sock_path, unsigned flags);

#endif
