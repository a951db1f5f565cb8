/*
 * store_mem.c: mem://, the in-memory store for tests and benchmarks.
 *
 * Objects live in an array sorted by name under one mutex; lookups are a
 * binary search.  Generations come from one counter per store, so they are
 * unique and strictly increasing across delete and re-create.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gcs.h"

typedef struct mem_obj {
	char *name;
	gcs_object obj; /* now_ms unused */
} mem_obj;

typedef struct mem_store {
	gcs_store base;
	pthread_mutex_t mu;
	mem_obj *objs;
	size_t n, cap;
	int64_t last_gen;
	gcs_clock_fn clock;
	void *clock_ctx;
} mem_store;

/* Index of NAME, or -(insertion point)-1 when absent. */
static long
find(const mem_store *m, const char *name)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->objs[mid].name, name);
		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -(long)lo - 1;
}

static int64_t
now(const mem_store *m)
{
	return m->clock(m->clock_ctx);
}

static void
answer(const mem_store *m, const mem_obj *o, gcs_object *out)
{
	gcs_object_copy(out, &o->obj);
	out->now_ms = now(m);
}

static int
mem_insert(gcs_store *s, const char *name, const json_t *metadata,
    gcs_object *out, gcs_err *err)
{
	mem_store *m = (mem_store *)s;
	mem_obj *o;
	long at;
	size_t pos;
	int rc = GCS_OK;

	pthread_mutex_lock(&m->mu);
	at = find(m, name);
	if (at >= 0) {
		rc = gcs_fail(err, GCS_PRECONDITION, "object exists");
		goto out;
	}
	pos = (size_t)(-at - 1);
	if (m->n == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 64;
		mem_obj *no = realloc(m->objs, ncap * sizeof(*no));
		if (no == NULL) {
			rc = gcs_fail(err, GCS_NOMEM, "out of memory");
			goto out;
		}
		m->objs = no;
		m->cap = ncap;
	}
	memmove(&m->objs[pos + 1], &m->objs[pos],
	    (m->n - pos) * sizeof(*m->objs));
	o = &m->objs[pos];
	memset(o, 0, sizeof(*o));
	o->name = strdup(name);
	o->obj.metadata = gcs_meta_new(metadata);
	if (o->name == NULL || o->obj.metadata == NULL) {
		free(o->name);
		json_decref(o->obj.metadata);
		memmove(&m->objs[pos], &m->objs[pos + 1],
		    (m->n - pos) * sizeof(*m->objs));
		rc = gcs_fail(err, GCS_NOMEM, "out of memory");
		goto out;
	}
	m->n++;
	o->obj.generation = ++m->last_gen;
	o->obj.metageneration = 1;
	o->obj.created_ms = o->obj.updated_ms = now(m);
	answer(m, o, out);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static int
mem_get(gcs_store *s, const char *name, gcs_object *out, gcs_err *err)
{
	mem_store *m = (mem_store *)s;
	long at;
	int rc = GCS_OK;

	pthread_mutex_lock(&m->mu);
	at = find(m, name);
	if (at < 0)
		rc = gcs_fail(err, GCS_NOT_FOUND, "no such object");
	else
		answer(m, &m->objs[at], out);
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* Check both preconditions on the live object; index or -1 with err set. */
static long
match(mem_store *m, const char *name, int64_t gen, int64_t metagen,
    gcs_err *err)
{
	long at = find(m, name);

	if (at < 0) {
		gcs_fail(err, GCS_NOT_FOUND, "no such object");
		return -1;
	}
	if (m->objs[at].obj.generation != gen ||
	    m->objs[at].obj.metageneration != metagen) {
		gcs_fail(err, GCS_PRECONDITION, "precondition failed");
		return -1;
	}
	return at;
}

static int
mem_patch(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    const json_t *metadata, gcs_object *out, gcs_err *err)
{
	mem_store *m = (mem_store *)s;
	json_t *merged;
	long at;
	int rc = GCS_OK;

	pthread_mutex_lock(&m->mu);
	at = match(m, name, gen, metagen, err);
	if (at < 0) {
		rc = err ? (int)err->status : GCS_PRECONDITION;
		goto out;
	}
	merged = gcs_meta_patched(m->objs[at].obj.metadata, metadata);
	if (merged == NULL) {
		rc = gcs_fail(err, GCS_NOMEM, "out of memory");
		goto out;
	}
	json_decref(m->objs[at].obj.metadata);
	m->objs[at].obj.metadata = merged;
	m->objs[at].obj.metageneration++;
	m->objs[at].obj.updated_ms = now(m);
	answer(m, &m->objs[at], out);
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static int
mem_remove(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    gcs_err *err)
{
	mem_store *m = (mem_store *)s;
	long at;
	int rc = GCS_OK;

	pthread_mutex_lock(&m->mu);
	at = match(m, name, gen, metagen, err);
	if (at < 0) {
		rc = err ? (int)err->status : GCS_PRECONDITION;
		goto out;
	}
	free(m->objs[at].name);
	gcs_object_clear(&m->objs[at].obj);
	memmove(&m->objs[at], &m->objs[at + 1],
	    (m->n - (size_t)at - 1) * sizeof(*m->objs));
	m->n--;
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static int
mem_list(gcs_store *s, const char *prefix, int max, const char *page_token,
    const char *after, gcs_page *out, gcs_err *err)
{
	mem_store *m = (mem_store *)s;
	size_t plen = strlen(prefix), i, start;
	long at;
	int rc = GCS_OK;

	if (page_token == NULL) /* our tokens are names too */
		page_token = after;
	pthread_mutex_lock(&m->mu);
	out->now_ms = now(m);
	/* The token is the last name of the previous page. */
	at = find(m, page_token ? page_token : prefix);
	start = at >= 0 ? (size_t)at + (page_token ? 1 : 0) : (size_t)(-at - 1);
	out->items = calloc((size_t)max, sizeof(*out->items));
	if (out->items == NULL) {
		rc = gcs_fail(err, GCS_NOMEM, "out of memory");
		goto out;
	}
	for (i = start; i < m->n; i++) {
		if (strncmp(m->objs[i].name, prefix, plen) != 0)
			break;
		if (out->n == (size_t)max) {
			out->next_token = strdup(out->items[out->n - 1].name);
			if (out->next_token == NULL) {
				gcs_page_clear(out);
				rc = gcs_fail(err, GCS_NOMEM, "out of memory");
			}
			break;
		}
		out->items[out->n].name = strdup(m->objs[i].name);
		if (out->items[out->n].name == NULL) {
			gcs_page_clear(out);
			rc = gcs_fail(err, GCS_NOMEM, "out of memory");
			break;
		}
		gcs_object_copy(&out->items[out->n].obj, &m->objs[i].obj);
		out->items[out->n].obj.now_ms = out->now_ms;
		out->n++;
	}
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static int
mem_check(gcs_store *s, gcs_err *err)
{
	(void)s;
	(void)err;
	return GCS_OK;
}

static void
mem_free(gcs_store *s)
{
	mem_store *m = (mem_store *)s;
	size_t i;

	for (i = 0; i < m->n; i++) {
		free(m->objs[i].name);
		gcs_object_clear(&m->objs[i].obj);
	}
	free(m->objs);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static const gcs_store_ops mem_ops = {
	.scheme = "mem",
	.insert = mem_insert,
	.get = mem_get,
	.patch = mem_patch,
	.remove = mem_remove,
	.list = mem_list,
	.check = mem_check,
	.free = mem_free,
};

gcs_store *
gcs_mem_new(gcs_clock_fn clock, void *clock_ctx)
{
	mem_store *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	m->base.ops = &mem_ops;
	pthread_mutex_init(&m->mu, NULL);
	m->clock = clock ? clock : gcs_clock_real;
	m->clock_ctx = clock_ctx;
	return &m->base;
}
