/* SPDX-License-Identifier: GPL-2.0-only */
/* remusdb-xen vif (xen_helper.h; vifrelay.c). */
#ifndef RDB_XEN_VIFRELAY_H
#define RDB_XEN_VIFRELAY_H

#include <stdint.h>

/* Starts the relay of domain domid's vif<domid>.0 to sock, which runs on
 * by itself (its words in log), and returns the exit code: 0 once it
 * relays or another relay has the vif, 1 with why on stdout.  The relay
 * itself never returns. */
int rdb_xen_vif_relay(uint32_t domid, const char *domain, const char *sock,
		      const char *log);

#endif
