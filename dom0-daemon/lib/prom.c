// SPDX-License-Identifier: GPL-2.0-only
/* The metrics registry: samples grouped by family, then printed in the
 * Prometheus text format (prom.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "prom.h"

/* 1 ms .. 10 s: a checkpoint pause is a few ms; an ACK wait tens; a
 * commit at the backup can reach seconds when its disk is slow. */
const double rdb_prom_hist_bounds[RDB_PROM_HIST_BUCKETS] = {
	0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 10,
};

struct sample {
	const char *suffix;	/* "", "_bucket", "_sum", "_count" */
	char *labels;
	double v;
};

struct rdb_prom_family {
	char *name, *help;
	enum rdb_prom_type type;
	struct sample *s;
	size_t n, cap;
};

static const char *const type_names[RDB_PROM_TYPE__MAX] = {
	[RDB_PROM_COUNTER] = "counter",
	[RDB_PROM_GAUGE] = "gauge",
	[RDB_PROM_HISTOGRAM] = "histogram",
};

void rdb_prom_hist_observe(struct rdb_prom_hist *h, uint64_t ns)
{
	double s = (double)ns / 1e9;
	int i = 0;

	while (i < RDB_PROM_HIST_BUCKETS && s > rdb_prom_hist_bounds[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum += s;
}

void rdb_prom_init(struct rdb_prom *p)
{
	memset(p, 0, sizeof(*p));
}

void rdb_prom_dispose(struct rdb_prom *p)
{
	for (size_t i = 0; i < p->nfam; i++) {
		struct rdb_prom_family *f = &p->fam[i];

		for (size_t j = 0; j < f->n; j++)
			free(f->s[j].labels);
		free(f->s);
		free(f->name);
		free(f->help);
	}
	free(p->fam);
	rdb_prom_init(p);
}

size_t rdb_prom_escape(char *dst, size_t n, const char *s)
{
	size_t o = 0;

	for (; *s; s++) {
		const char *e = NULL;
		char one[2] = { *s, 0 };

		switch (*s) {
		case '\\': e = "\\\\"; break;
		case '"': e = "\\\""; break;
		case '\n': e = "\\n"; break;
		default: e = one; break;
		}
		for (; *e; e++, o++)
			if (o + 1 < n)
				dst[o] = *e;
	}
	if (n)
		dst[o < n ? o : n - 1] = 0;
	return o;
}

/* Appends `,key="value"` (or without the comma when *len is 0) to a
 * growing string; -ENOMEM. */
static int append_label(char **buf, size_t *len, const char *k, const char *v)
{
	size_t need = rdb_prom_escape(NULL, 0, v) + strlen(k) + 5;
	char *nb = realloc(*buf, *len + need);

	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*len += (size_t)sprintf(nb + *len, "%s%s=\"", *len ? "," : "", k);
	*len += rdb_prom_escape(nb + *len, need, v);
	nb[(*len)++] = '"';
	nb[*len] = 0;
	return 0;
}

static void fail(struct rdb_prom *p, int err)
{
	if (!p->err)
		p->err = err;
}

void rdb_prom_set_base(struct rdb_prom *p, ...)
{
	char *buf = NULL;
	size_t len = 0;
	va_list ap;
	const char *k;

	va_start(ap, p);
	while ((k = va_arg(ap, const char *))) {
		const char *v = va_arg(ap, const char *);

		if (append_label(&buf, &len, k, v ? v : "") < 0) {
			fail(p, -ENOMEM);
			break;
		}
	}
	va_end(ap);
	if (len >= sizeof(p->base))
		fail(p, -ENAMETOOLONG);
	else
		memcpy(p->base, buf ? buf : "", len + 1);
	free(buf);
}

static struct rdb_prom_family *family(struct rdb_prom *p, const char *name,
				      enum rdb_prom_type t, const char *help)
{
	struct rdb_prom_family *f;

	for (size_t i = 0; i < p->nfam; i++) {
		f = &p->fam[i];
		if (strcmp(f->name, name))
			continue;
		if (f->type != t || strcmp(f->help, help)) {
			fail(p, -EINVAL);
			return NULL;
		}
		return f;
	}
	if (p->nfam == p->capfam) {
		size_t cap = p->capfam ? p->capfam * 2 : 32;
		struct rdb_prom_family *nf = realloc(p->fam, cap * sizeof(*nf));

		if (!nf) {
			fail(p, -ENOMEM);
			return NULL;
		}
		p->fam = nf;
		p->capfam = cap;
	}
	f = &p->fam[p->nfam];
	memset(f, 0, sizeof(*f));
	f->type = t;
	f->name = strdup(name);
	f->help = strdup(help);
	if (!f->name || !f->help) {
		free(f->name);
		free(f->help);
		fail(p, -ENOMEM);
		return NULL;
	}
	p->nfam++;
	return f;
}

/* Adds a sample whose labels are the base, then `extra` (already
 * formatted, may be NULL), then le when not NULL. */
static void add_sample(struct rdb_prom *p, struct rdb_prom_family *f,
		       const char *suffix, const char *extra, const char *le,
		       double v)
{
	char *labels = NULL;
	size_t len = strlen(p->base);
	struct sample *s;

	labels = malloc(len + (extra ? strlen(extra) : 0) + 2);
	if (!labels)
		goto nomem;
	memcpy(labels, p->base, len + 1);
	if (extra && extra[0])
		len += (size_t)sprintf(labels + len, "%s%s", len ? "," : "", extra);
	if (le && append_label(&labels, &len, "le", le) < 0)
		goto nomem;
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 8;
		struct sample *ns = realloc(f->s, cap * sizeof(*ns));

		if (!ns)
			goto nomem;
		f->s = ns;
		f->cap = cap;
	}
	s = &f->s[f->n++];
	s->suffix = suffix;
	s->labels = labels;
	s->v = v;
	return;
nomem:
	free(labels);
	fail(p, -ENOMEM);
}

/* The extra labels of a call, formatted; *out NULL when there are none.
 * -ENOMEM. */
static int extra_labels(va_list ap, char **out)
{
	size_t len = 0;
	const char *k;

	*out = NULL;
	while ((k = va_arg(ap, const char *))) {
		const char *v = va_arg(ap, const char *);

		if (append_label(out, &len, k, v ? v : "") < 0) {
			free(*out);
			*out = NULL;
			return -ENOMEM;
		}
	}
	return 0;
}

void rdb_prom_add(struct rdb_prom *p, const char *name, enum rdb_prom_type t,
		  const char *help, double v, ...)
{
	struct rdb_prom_family *f;
	char *extra;
	va_list ap;
	int rc;

	if (p->err || t == RDB_PROM_HISTOGRAM || t >= RDB_PROM_TYPE__MAX) {
		fail(p, -EINVAL);
		return;
	}
	va_start(ap, v);
	rc = extra_labels(ap, &extra);
	va_end(ap);
	if (rc < 0) {
		fail(p, rc);
		return;
	}
	f = family(p, name, t, help);
	if (f)
		add_sample(p, f, "", extra, NULL, v);
	free(extra);
}

void rdb_prom_add_hist(struct rdb_prom *p, const char *name, const char *help,
		       const struct rdb_prom_hist *h, ...)
{
	struct rdb_prom_family *f;
	uint64_t cum = 0;
	char *extra, le[32];
	va_list ap;
	int rc;

	if (p->err)
		return;
	va_start(ap, h);
	rc = extra_labels(ap, &extra);
	va_end(ap);
	if (rc < 0) {
		fail(p, rc);
		return;
	}
	f = family(p, name, RDB_PROM_HISTOGRAM, help);
	for (int i = 0; f && i <= RDB_PROM_HIST_BUCKETS; i++) {
		cum += h->bucket[i];
		if (i < RDB_PROM_HIST_BUCKETS)
			snprintf(le, sizeof(le), "%g", rdb_prom_hist_bounds[i]);
		else
			strcpy(le, "+Inf");
		add_sample(p, f, "_bucket", extra, le, (double)cum);
	}
	if (f) {
		add_sample(p, f, "_sum", extra, NULL, h->sum);
		add_sample(p, f, "_count", extra, NULL, (double)h->count);
	}
	free(extra);
}

static void print_value(FILE *out, double v)
{
	if (isnan(v))
		fputs("NaN", out);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", out);
	else if (v == floor(v) && fabs(v) < 1e17)
		fprintf(out, "%.0f", v);
	else
		fprintf(out, "%.9g", v);
}

int rdb_prom_write(const struct rdb_prom *p, FILE *out)
{
	if (p->err)
		return p->err;
	for (size_t i = 0; i < p->nfam; i++) {
		const struct rdb_prom_family *f = &p->fam[i];

		/* HELP text escapes only \ and newline */
		fprintf(out, "# HELP %s ", f->name);
		for (const char *c = f->help; *c; c++) {
			if (*c == '\\')
				fputs("\\\\", out);
			else if (*c == '\n')
				fputs("\\n", out);
			else
				fputc(*c, out);
		}
		fprintf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
		for (size_t j = 0; j < f->n; j++) {
			const struct sample *s = &f->s[j];

			fprintf(out, "%s%s", f->name, s->suffix);
			if (s->labels[0])
				fprintf(out, "{%s}", s->labels);
			fputc(' ', out);
			print_value(out, s->v);
			fputc('\n', out);
		}
	}
	return ferror(out) ? -EIO : 0;
}
