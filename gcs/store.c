/*
 * store.c: the dispatchers of the store contract, shared helpers, and the
 * store URL parser.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gcs.h"

int
gcs_fail(gcs_err *err, gcs_status status, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL) {
		err->status = status;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		err->detail[0] = '\0';
	}
	return (int)status;
}

const char *
gcs_err_detail(const gcs_err *err)
{
	return err->detail[0] != '\0' ? err->detail : err->msg;
}

const char *
gcs_name_shown(const char *name, char *buf, size_t bufsz)
{
	const char *hash = strchr(name, '#');

	if (hash == NULL)
		snprintf(buf, bufsz, "%s", name);
	else
		snprintf(buf, bufsz, "%.*s…", (int)(hash - name + 1), name);
	return buf;
}

const char *
gcs_status_str(gcs_status st)
{
	switch (st) {
	case GCS_OK:
		return "ok";
	case GCS_NOT_FOUND:
		return "not_found";
	case GCS_PRECONDITION:
		return "precondition_failed";
	case GCS_BUSY:
		return "busy";
	case GCS_UNAVAILABLE:
		return "unavailable";
	case GCS_DENIED:
		return "denied";
	case GCS_INVALID:
		return "invalid";
	case GCS_NOMEM:
		return "nomem";
	}
	return "unknown";
}

static uint64_t stat_retries, stat_token_ok, stat_token_fail;
static int64_t give_up_ms;

void
gcs_give_up_at(int64_t mono_ms)
{
	__atomic_store_n(&give_up_ms, mono_ms, __ATOMIC_RELEASE);
}

int64_t
gcs_give_up_time(void)
{
	return __atomic_load_n(&give_up_ms, __ATOMIC_ACQUIRE);
}

void
gcs_stat_retry(void)
{
	__atomic_add_fetch(&stat_retries, 1, __ATOMIC_RELAXED);
}

void
gcs_stat_token_fetch(int ok)
{
	__atomic_add_fetch(ok ? &stat_token_ok : &stat_token_fail, 1,
	    __ATOMIC_RELAXED);
}

void
gcs_stats_get(gcs_stats *out)
{
	out->retries = __atomic_load_n(&stat_retries, __ATOMIC_RELAXED);
	out->token_fetches = __atomic_load_n(&stat_token_ok, __ATOMIC_RELAXED);
	out->token_failures =
	    __atomic_load_n(&stat_token_fail, __ATOMIC_RELAXED);
}

int64_t
gcs_clock_real(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
gcs_object_clear(gcs_object *o)
{
	if (o == NULL)
		return;
	json_decref(o->metadata);
	memset(o, 0, sizeof(*o));
}

void
gcs_object_copy(gcs_object *dst, const gcs_object *src)
{
	*dst = *src;
	json_incref(dst->metadata);
}

void
gcs_page_clear(gcs_page *p)
{
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->n; i++) {
		free(p->items[i].name);
		gcs_object_clear(&p->items[i].obj);
	}
	free(p->items);
	free(p->next_token);
	memset(p, 0, sizeof(*p));
}

json_t *
gcs_meta_new(const json_t *meta)
{
	return gcs_meta_patched(NULL, meta);
}

json_t *
gcs_meta_patched(const json_t *base, const json_t *patch)
{
	/* A new object, its values shared with BASE and PATCH: metadata
	 * values are strings, and no one changes a json string once made. */
	json_t *m = base ? json_copy((json_t *)base) : json_object();
	const char *k;
	json_t *v;

	if (m == NULL)
		return NULL;
	json_object_foreach((json_t *)patch, k, v)
	{
		if (json_is_null(v))
			json_object_del(m, k);
		else if (json_object_set(m, k, v) != 0) {
			json_decref(m);
			return NULL;
		}
	}
	return m;
}

static void
reset(gcs_object *out, gcs_err *err)
{
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	if (err != NULL)
		memset(err, 0, sizeof(*err));
}

static int
bad_name(const char *name, gcs_err *err)
{
	size_t n;

	if (name == NULL)
		return gcs_fail(err, GCS_INVALID, "no object name");
	n = strlen(name);
	if (n == 0 || n > GCS_NAME_MAX)
		return gcs_fail(err, GCS_INVALID, "object name length %zu", n);
	return 0;
}

int
gcs_insert(gcs_store *s, const char *name, const json_t *metadata,
    gcs_object *out, gcs_err *err)
{
	reset(out, err);
	if (bad_name(name, err))
		return GCS_INVALID;
	if (!json_is_object(metadata))
		return gcs_fail(err, GCS_INVALID, "metadata is not an object");
	return s->ops->insert(s, name, metadata, out, err);
}

int
gcs_get(gcs_store *s, const char *name, gcs_object *out, gcs_err *err)
{
	reset(out, err);
	if (bad_name(name, err))
		return GCS_INVALID;
	return s->ops->get(s, name, out, err);
}

int
gcs_patch(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    const json_t *metadata, gcs_object *out, gcs_err *err)
{
	reset(out, err);
	if (bad_name(name, err))
		return GCS_INVALID;
	if (gen <= 0 || metagen <= 0)
		return gcs_fail(err, GCS_INVALID,
		    "patch needs both preconditions");
	if (!json_is_object(metadata))
		return gcs_fail(err, GCS_INVALID, "metadata is not an object");
	return s->ops->patch(s, name, gen, metagen, metadata, out, err);
}

int
gcs_remove(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    gcs_err *err)
{
	reset(NULL, err);
	if (bad_name(name, err))
		return GCS_INVALID;
	if (gen <= 0 || metagen <= 0)
		return gcs_fail(err, GCS_INVALID,
		    "delete needs both preconditions");
	return s->ops->remove(s, name, gen, metagen, err);
}

static int
list_checked(gcs_store *s, const char *prefix, int max, const char *page_token,
    const char *after, gcs_page *out, gcs_err *err)
{
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	reset(NULL, err);
	if (prefix == NULL)
		prefix = "";
	if (strlen(prefix) > GCS_NAME_MAX)
		return gcs_fail(err, GCS_INVALID, "prefix too long");
	if (max < 1 || max > GCS_LIST_PAGE_MAX)
		return gcs_fail(err, GCS_INVALID, "page size %d", max);
	if (page_token != NULL &&
	    (page_token[0] == '\0' || strlen(page_token) > GCS_PAGE_TOKEN_MAX))
		return gcs_fail(err, GCS_INVALID, "bad page token");
	if (after != NULL && (after[0] == '\0' || strlen(after) > GCS_NAME_MAX))
		return gcs_fail(err, GCS_INVALID, "bad name to list after");
	/* Every name under PREFIX sorts at or after PREFIX itself. */
	if (after != NULL && strcmp(after, prefix) < 0)
		after = NULL;
	return s->ops->list(s, prefix, max, page_token, after, out, err);
}

int
gcs_list(gcs_store *s, const char *prefix, int max, const char *page_token,
    gcs_page *out, gcs_err *err)
{
	return list_checked(s, prefix, max, page_token, NULL, out, err);
}

int
gcs_list_after(gcs_store *s, const char *prefix, int max, const char *after,
    gcs_page *out, gcs_err *err)
{
	return list_checked(s, prefix, max, NULL, after, out, err);
}

int
gcs_check(gcs_store *s, gcs_err *err)
{
	reset(NULL, err);
	return s->ops->check(s, err);
}

void
gcs_store_free(gcs_store *s)
{
	if (s != NULL)
		s->ops->free(s);
}

gcs_store *
gcs_open(const char *url, gcs_err *err)
{
	char bucket[256];
	const char *p, *slash;
	size_t blen;

	reset(NULL, err);
	if (url == NULL) {
		gcs_fail(err, GCS_INVALID, "no store URL");
		return NULL;
	}
	if (strcmp(url, "mem://") == 0 || strcmp(url, "mem:") == 0)
		return gcs_mem_new(NULL, NULL);
	if (strncmp(url, "file://", 7) == 0) {
		if (url[7] == '\0') {
			gcs_fail(err, GCS_INVALID,
			    "file:// needs a directory, e.g. "
			    "file://./lockgate-data");
			return NULL;
		}
		return gcs_file_new(url + 7, err);
	}
	if (strncmp(url, "gs://", 5) == 0) {
		p = url + 5;
		slash = strchr(p, '/');
		blen = slash ? (size_t)(slash - p) : strlen(p);
		if (blen < 3 || blen >= sizeof(bucket)) {
			gcs_fail(err, GCS_INVALID,
			    "gs:// needs a bucket name of 3 to 222 characters");
			return NULL;
		}
		memcpy(bucket, p, blen);
		bucket[blen] = '\0';
		return gcs_gs_new(bucket, slash ? slash + 1 : "", err);
	}
	gcs_fail(err, GCS_INVALID,
	    "unknown store URL scheme in '%.64s' (use file://, gs:// or "
	    "mem://)",
	    url);
	return NULL;
}
