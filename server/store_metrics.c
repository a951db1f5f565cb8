/*
 * store_metrics.c: a store that forwards every call of the contract to an
 * inner store and records its operation, outcome and latency in the
 * metrics registry.  It sits between the api and the real store, so the
 * api and the stores stay unaware of metrics.
 *
 * The dispatchers (gcs_insert, ...) have already validated the arguments
 * and zeroed out/err when a slot here runs, so each slot calls the inner
 * store's slot directly instead of going through a dispatcher twice.
 */
#include <stdlib.h>
#include <time.h>

#include "metrics.h"
#include "util/clock.h"

typedef struct instrumented {
	gcs_store base;    /* first member: what callers see */
	gcs_store_ops ops; /* per instance, to keep the inner scheme */
	gcs_store *inner;  /* owned */
} instrumented;

static gcs_store *
inner_of(gcs_store *s)
{
	return ((instrumented *)s)->inner;
}

static double
now_s(void)
{
	return (double)util_mono_ns() / 1e9;
}

static int
record(const char *op, int rc, double t0)
{
	metrics_store_call(op, gcs_status_str((gcs_status)rc), now_s() - t0);
	return rc;
}

static int
m_insert(gcs_store *s, const char *name, const json_t *metadata,
    gcs_object *out, gcs_err *err)
{
	gcs_store *in = inner_of(s);
	double t0 = now_s();

	return record("insert", in->ops->insert(in, name, metadata, out, err),
	    t0);
}

static int
m_get(gcs_store *s, const char *name, gcs_object *out, gcs_err *err)
{
	gcs_store *in = inner_of(s);
	double t0 = now_s();

	return record("get", in->ops->get(in, name, out, err), t0);
}

static int
m_patch(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    const json_t *metadata, gcs_object *out, gcs_err *err)
{
	gcs_store *in = inner_of(s);
	double t0 = now_s();

	return record("patch",
	    in->ops->patch(in, name, gen, metagen, metadata, out, err), t0);
}

static int
m_remove(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    gcs_err *err)
{
	gcs_store *in = inner_of(s);
	double t0 = now_s();

	return record("delete", in->ops->remove(in, name, gen, metagen, err),
	    t0);
}

static int
m_list(gcs_store *s, const char *prefix, int max, const char *page_token,
    const char *after, gcs_page *out, gcs_err *err)
{
	gcs_store *in = inner_of(s);
	double t0 = now_s();

	return record("list",
	    in->ops->list(in, prefix, max, page_token, after, out, err), t0);
}

static int
m_check(gcs_store *s, gcs_err *err)
{
	gcs_store *in = inner_of(s);
	double t0 = now_s();

	return record("check", in->ops->check(in, err), t0);
}

static void
m_free(gcs_store *s)
{
	instrumented *m = (instrumented *)s;

	gcs_store_free(m->inner);
	free(m);
}

gcs_store *
srv_store_instrument(gcs_store *inner)
{
	instrumented *m;

	if (inner == NULL)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		goto fail;
	m->ops.scheme = inner->ops->scheme;
	m->ops.insert = m_insert;
	m->ops.get = m_get;
	m->ops.patch = m_patch;
	m->ops.remove = m_remove;
	m->ops.list = m_list;
	m->ops.check = m_check;
	m->ops.free = m_free;
	m->base.ops = &m->ops;
	m->inner = inner;
	return &m->base;
fail:
	gcs_store_free(inner);
	return NULL;
}
