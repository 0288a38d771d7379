/* SPDX-License-Identifier: GPL-2.0-only */
/* domxml.c's libxml2 helpers, shared with domxml_undo.c (unenroll, read). */
#ifndef RDB_DOMXML_INT_H
#define RDB_DOMXML_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <libxml/tree.h>

#define X(s) ((const xmlChar *)(s))

/* libvirt's order of <devices> children */
extern const char *const rdb_dx_device_order[];
extern const size_t rdb_dx_ndevice_order;
/* and of <os> children */
extern const char *const rdb_dx_os_order[];
extern const size_t rdb_dx_nos_order;

void rdb_dx_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* element NAME in namespace HREF (NULL: none) */
bool rdb_dx_is_elem(xmlNodePtr n, const char *name, const char *href);
/* the first child element NAME in namespace HREF (NULL: none) */
xmlNodePtr rdb_dx_child(xmlNodePtr parent, const char *name, const char *href);
size_t rdb_dx_count(xmlNodePtr parent, const char *name);
/* an attribute's value into buf ("" when absent); false if absent */
bool rdb_dx_attr(xmlNodePtr n, const char *name, char *buf, size_t len);
bool rdb_dx_attr_is(xmlNodePtr n, const char *name, const char *want);
/* an element's text into buf, blanks around it removed */
void rdb_dx_text(xmlNodePtr n, char *buf, size_t len);
/* a <domain> document, or NULL with err */
xmlDocPtr rdb_dx_parse(const char *xml, char *err, size_t errlen);
/* the document as enroll and unenroll write it (caller frees *out) */
int rdb_dx_dump(xmlDocPtr doc, char **out, char *err, size_t errlen);
/* <metadata><remusdb:vm>, or NULL */
xmlNodePtr rdb_dx_find_meta(xmlNodePtr root);
/* NODE among PARENT's children before the first one ORDER places after it */
void rdb_dx_insert_ordered(xmlNodePtr parent, xmlNodePtr node,
			   const char *const *order, size_t n);

#endif
