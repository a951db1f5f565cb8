/* wrap_store.c: see wrap_store.h. */
#include <stdlib.h>
#include <string.h>

#include "wrap_store.h"

/* What another client did while a write's answer was lost. */
static void
meanwhile(wrap_store *w)
{
	void (*fn)(void *) = w->meanwhile;

	w->meanwhile = NULL;
	if (fn != NULL)
		fn(w->meanwhile_ctx);
}

/* The answer OUT as the store gave it, or with no store time (no_time). */
static int
timed(const wrap_store *w, int rc, gcs_object *out)
{
	if (rc == GCS_OK && w->no_time)
		out->now_ms = GCS_NOW_UNKNOWN;
	return rc;
}

static int
injected(wrap_store *w, wrap_op op, gcs_err *err)
{
	void (*fn)(void *) = w->before;

	if (w->fail_op == (int)op) {
		w->fail_op = -1;
		return gcs_fail(err, w->fail_status, "injected failure");
	}
	if (w->before_op == (int)op) {
		w->before_op = -1;
		w->before = NULL;
		if (fn != NULL)
			fn(w->before_ctx);
	}
	return GCS_OK;
}

static int
w_insert(gcs_store *s, const char *name, const json_t *m, gcs_object *out,
    gcs_err *err)
{
	wrap_store *w = (wrap_store *)s;
	int rc;

	w->calls[W_INSERT]++;
	if ((rc = injected(w, W_INSERT, err)) != GCS_OK)
		return rc;
	rc = gcs_insert(w->inner, name, m, out, err);
	if (rc == GCS_OK && w->lost_op == W_INSERT) {
		w->lost_op = -1;
		meanwhile(w);
		gcs_object_clear(out);
		rc = gcs_fail(err, w->lost_status, "answer lost, then failed");
		err->attempts = 2;
	}
	if (rc == GCS_OK && w->ghost_op == W_INSERT) {
		w->ghost_op = -1;
		meanwhile(w);
		gcs_object_clear(out);
		rc = gcs_fail(err, GCS_PRECONDITION, "412 after a retry");
		err->attempts = 2;
	}
	return timed(w, rc, out);
}

static int
w_get(gcs_store *s, const char *name, gcs_object *out, gcs_err *err)
{
	wrap_store *w = (wrap_store *)s;
	int rc;

	w->calls[W_GET]++;
	if ((rc = injected(w, W_GET, err)) != GCS_OK)
		return rc;
	return timed(w, gcs_get(w->inner, name, out, err), out);
}

static int
w_patch(gcs_store *s, const char *name, int64_t g, int64_t m, const json_t *md,
    gcs_object *out, gcs_err *err)
{
	wrap_store *w = (wrap_store *)s;
	int rc;

	w->calls[W_PATCH]++;
	if ((rc = injected(w, W_PATCH, err)) != GCS_OK)
		return rc;
	rc = gcs_patch(w->inner, name, g, m, md, out, err);
	if (w->retried_op == W_PATCH) {
		w->retried_op = -1;
		err->attempts = 2;
	}
	if (rc == GCS_OK && w->lost_op == W_PATCH) {
		w->lost_op = -1;
		meanwhile(w);
		gcs_object_clear(out);
		rc = gcs_fail(err, w->lost_status, "answer lost, then failed");
		err->attempts = 2;
	}
	if (rc == GCS_OK && w->ghost_op == W_PATCH) {
		w->ghost_op = -1;
		meanwhile(w);
		gcs_object_clear(out);
		rc = gcs_fail(err, GCS_PRECONDITION, "412 after a retry");
		err->attempts = 2;
	}
	return timed(w, rc, out);
}

static int
w_remove(gcs_store *s, const char *name, int64_t g, int64_t m, gcs_err *err)
{
	wrap_store *w = (wrap_store *)s;
	int rc;

	w->calls[W_REMOVE]++;
	if ((rc = injected(w, W_REMOVE, err)) != GCS_OK)
		return rc;
	rc = gcs_remove(w->inner, name, g, m, err);
	if (w->retried_op == W_REMOVE) {
		w->retried_op = -1;
		err->attempts = 2;
	}
	if (rc == GCS_OK && w->lost_op == W_REMOVE) {
		w->lost_op = -1;
		meanwhile(w);
		rc = gcs_fail(err, w->lost_status, "answer lost, then failed");
		err->attempts = 2;
	}
	if (rc == GCS_OK && w->ghost_op == W_REMOVE) {
		w->ghost_op = -1;
		meanwhile(w);
		rc = gcs_fail(err, GCS_NOT_FOUND, "404 after a retry");
		err->attempts = 2;
	}
	return rc;
}

static int
w_list(gcs_store *s, const char *prefix, int max, const char *tok,
    const char *after, gcs_page *out, gcs_err *err)
{
	wrap_store *w = (wrap_store *)s;
	int rc;

	w->calls[W_LIST]++;
	if ((rc = injected(w, W_LIST, err)) != GCS_OK)
		return rc;
	rc = after != NULL
	    ? gcs_list_after(w->inner, prefix, max, after, out, err)
	    : gcs_list(w->inner, prefix, max, tok, out, err);
	if (rc == GCS_OK && w->no_time) {
		size_t i;

		out->now_ms = GCS_NOW_UNKNOWN;
		for (i = 0; i < out->n; i++)
			out->items[i].obj.now_ms = GCS_NOW_UNKNOWN;
	}
	return rc;
}

static int
w_check(gcs_store *s, gcs_err *err)
{
	return gcs_check(((wrap_store *)s)->inner, err);
}

static void
w_free(gcs_store *s)
{
	wrap_store *w = (wrap_store *)s;

	gcs_store_free(w->inner);
	free(w);
}

static const gcs_store_ops wrap_ops = {
	.scheme = "wrap",
	.insert = w_insert,
	.get = w_get,
	.patch = w_patch,
	.remove = w_remove,
	.list = w_list,
	.check = w_check,
	.free = w_free,
};

wrap_store *
wrap_store_new(gcs_store *inner)
{
	wrap_store *w = calloc(1, sizeof(*w));

	if (w == NULL)
		return NULL;
	w->base.ops = &wrap_ops;
	w->inner = inner;
	w->ghost_op = -1;
	w->fail_op = -1;
	w->lost_op = -1;
	w->retried_op = -1;
	w->before_op = -1;
	return w;
}

int
wrap_writes(const wrap_store *w)
{
	return w->calls[W_INSERT] + w->calls[W_PATCH] + w->calls[W_REMOVE];
}

void
wrap_reset(wrap_store *w)
{
	memset(w->calls, 0, sizeof(w->calls));
	w->ghost_op = -1;
	w->fail_op = -1;
	w->lost_op = -1;
	w->retried_op = -1;
	w->before_op = -1;
	w->meanwhile = NULL;
	w->before = NULL;
}
