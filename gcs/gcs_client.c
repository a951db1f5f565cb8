/*
 * gcs_client.c: gs://BUCKET/PREFIX, the lock store on the Cloud Storage
 * JSON API over libcurl.
 *
 * One lock = one object PREFIX+name with an empty body and the lease in its
 * custom metadata.  Every call is one HTTP request on a pooled keep-alive
 * easy handle, retried per gcs_client.h inside a total deadline.  Every
 * write carries a precondition, so every request we send may be retried;
 * err->attempts tells the caller when an answer may be the echo of an
 * earlier try (a 412 after a retried insert, a 404 after a retried delete).
 * Errors are classified by HTTP status only.
 *
 * This file: the operations of the store contract and the store itself.
 * One request with its retries is gcs_call.c's, list pages gcs_list.c's
 * (shared declarations in gcs_client_int.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gcs_client_int.h"

/* ---- the insert request and its answer ---- */

/* A new object's metadata: METADATA without its nulls (a new object has
 * no deleted keys), in a map of our own whose values are shared with
 * METADATA (jansson values are only replaced in lockgate, never changed
 * in place).  New reference, NULL on allocation failure. */
static json_t *
meta_sent(const json_t *metadata)
{
	json_t *m = json_object(), *v;
	const char *k;

	if (m == NULL)
		return NULL;
	json_object_foreach((json_t *)metadata, k, v)
	{
		if (!json_is_null(v) && json_object_set(m, k, v) != 0) {
			json_decref(m);
			return NULL;
		}
	}
	return m;
}

/* The object resource of a new lock FULL with METADATA, as compact JSON
 * text: {"name":..,"cacheControl":"no-store","contentType":..,"metadata":
 * {..}}.  New string (free()), NULL on allocation failure. */
static char *
resource_text(const char *full, const json_t *metadata)
{
	json_t *m = meta_sent(metadata), *r;
	char *text;

	if (m == NULL)
		return NULL;
	r = json_pack("{sssssssO}", "name", full, "cacheControl", "no-store",
	    "contentType", "application/octet-stream", "metadata", m);
	text = r ? json_dumps(r, JSON_COMPACT) : NULL;
	json_decref(r);
	json_decref(m);
	return text;
}

/* The answer to an insert, read as any object is.  The new object's
 * metadata is the one we sent: GCS stores it as given, and a 2xx with
 * ifGenerationMatch=0 is our own create.  The answer has none (fields=
 * leaves it out), or from an emulator that ignores fields, keys of its
 * own besides. */
static int
answer_inserted(const gcs_resp *r, const json_t *metadata, gcs_object *out,
    gcs_err *err)
{
	int rc = gs_answer_object(r, "insert", out, err);

	if (rc != GCS_OK)
		return rc;
	json_decref(out->metadata);
	out->metadata = meta_sent(metadata);
	if (out->metadata == NULL) {
		memset(out, 0, sizeof(*out));
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	}
	return GCS_OK;
}

static int
gs_get(gcs_store *s, const char *name, gcs_object *out, gcs_err *err);

/* 1 when metadata HAVE holds WANT as a write leaves it: every string of
 * WANT with its value, no key WANT sets to null.  HAVE may hold more keys
 * (Google's emulator adds its own to an upload). */
static int
meta_holds(const json_t *have, const json_t *want)
{
	const char *k;
	json_t *v, *h;

	json_object_foreach((json_t *)want, k, v)
	{
		h = json_object_get(have, k);
		if (json_is_null(v) ? h != NULL : !json_equal(h, v))
			return 0;
	}
	return 1;
}

/* RC and ERR of a write: answered 2xx, so applied, but its answer could
 * not be used (malformed, without a generation, too big). */
static int
applied_unreadable(int rc, const gcs_err *err)
{
	return rc == GCS_UNAVAILABLE && gs_success(err->http_status);
}

/*
 * A write of METADATA to NAME was answered 2xx, so it was applied, but the
 * answer lacks what the caller needs (an insert's generation, a patch's
 * object): read it back instead of failing a write that succeeded.  The
 * live object is the written one when it holds METADATA (meta_holds) and,
 * for a patch (GEN > 0), still has generation GEN: GCS_OK with it in OUT.
 * Another object, or none, means someone moved since: GCS_PRECONDITION,
 * as a write that lost would have answered (a patch's GCS_NOT_FOUND
 * stays: the lease is gone); the caller reads again and judges.
 */
static int
read_back(gs_store *g, const char *name, const json_t *metadata, int64_t gen,
    gcs_object *out, gcs_err *err)
{
	char shown[GCS_NAME_SHOWN_BUF];
	int rc = gs_get(&g->base, name, out, err);

	if (rc == GCS_NOT_FOUND && gen > 0)
		return rc;
	if (rc == GCS_NOT_FOUND ||
	    (rc == GCS_OK &&
	        ((gen > 0 && out->generation != gen) ||
	            !meta_holds(out->metadata, metadata)))) {
		gcs_object_clear(out);
		return gcs_fail(err, GCS_PRECONDITION,
		    "Cloud Storage: %s was written, then changed by another "
		    "writer before it was read back",
		    gcs_name_shown(name, shown, sizeof(shown)));
	}
	return rc;
}

/* An insert's multipart body into B: the resource JSON of FULL with
 * METADATA (*META_LEN bytes), then the empty media; its Content-Type,
 * with a random boundary, into CTYPE. */
static void
insert_body(gs_buf *b, const char *full, const json_t *metadata, char *ctype,
    size_t ctypesz, size_t *meta_len)
{
	static const char hex[] = "0123456789abcdef";
	char boundary[2 * BOUNDARY_HEX + 1], *res;
	uint64_t x = 0;
	int i;

	for (i = 0; i < BOUNDARY_HEX; i++) {
		if (i % 8 == 0)
			x = gs_rand64();
		boundary[2 * i] = hex[(x >> 4) & 15];
		boundary[2 * i + 1] = hex[x & 15];
		x >>= 8;
	}
	boundary[2 * BOUNDARY_HEX] = '\0';
	gs_str_join(ctype, ctypesz, "multipart/related; boundary=",
	    boundary); /* fits: the boundary has a fixed size */
	gs_buf_str(b, "--");
	gs_buf_str(b, boundary);
	gs_buf_str(b,
	    "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n");
	if ((res = resource_text(full, metadata)) == NULL) {
		b->failed = 1;
		return;
	}
	*meta_len = strlen(res);
	gs_buf_str(b, res);
	free(res);
	gs_buf_str(b, "\r\n--");
	gs_buf_str(b, boundary);
	gs_buf_str(b,
	    "\r\nContent-Type: application/octet-stream\r\n\r\n\r\n--");
	gs_buf_str(b, boundary);
	gs_buf_str(b, "--\r\n");
}

static int
gs_insert(gcs_store *s, const char *name, const json_t *metadata,
    gcs_object *out, gcs_err *err)
{
	gs_store *g = (gs_store *)s;
	char full[GCS_PREFIX_MAX + GCS_NAME_MAX + 1], ctype[96];
	gs_buf b = { 0 };
	size_t meta_len;
	gcs_resp r;
	gs_req req;
	int rc;

	memset(&r, 0, sizeof(r));
	if (gs_str_join(full, sizeof(full), g->prefix, name) != 0)
		return gcs_fail(err, GCS_INVALID, "lock name too long");
	insert_body(&b, full, metadata, ctype, sizeof(ctype), &meta_len);
	if (b.failed) {
		rc = gcs_fail(err, GCS_NOMEM, "out of memory");
		goto out;
	}
	if (meta_len >
	    GCS_META_BYTES_MAX + GCS_NAME_MAX + GCS_PREFIX_MAX + 256) {
		rc = gcs_fail(err, GCS_INVALID, "metadata over %d bytes",
		    GCS_META_BYTES_MAX);
		goto out;
	}
	req = (gs_req){ .op = "insert",
		.no_object = 1,
		.method = "POST",
		.url = g->insert_url,
		.ctype = ctype,
		.body = b.p,
		.body_len = b.len,
		.name = name };
	rc = gs_call(g, &req, &r, err);
	if (rc == GCS_OK)
		rc = answer_inserted(&r, metadata, out, err);
	if (applied_unreadable(rc, err))
		rc = read_back(g, name, metadata, 0, out, err);
out:
	gcs_resp_clear(&r);
	free(b.p);
	return rc;
}

static int
gs_get(gcs_store *s, const char *name, gcs_object *out, gcs_err *err)
{
	gs_store *g = (gs_store *)s;
	char url[GCS_URL_MAX];
	gcs_resp r;
	gs_req req;
	gs_buf u;
	int rc;

	gs_buf_fixed(&u, url, sizeof(url));
	gs_object_url(g, &u, name);
	gs_buf_str(&u, "fields=" OBJ_FIELDS);
	if (u.failed)
		return gcs_fail(err, GCS_INVALID, "URL too long");
	req =
	    (gs_req){ .op = "get", .method = "GET", .url = url, .name = name };
	rc = gs_call(g, &req, &r, err);
	if (rc == GCS_OK)
		rc = gs_answer_object(&r, "get", out, err);
	gcs_resp_clear(&r);
	return rc;
}

static int
gs_patch(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    const json_t *metadata, gcs_object *out, gcs_err *err)
{
	gs_store *g = (gs_store *)s;
	char url[GCS_URL_MAX];
	json_t *res;
	char *body = NULL;
	gcs_resp r;
	gs_req req;
	gs_buf u;
	int rc;

	memset(&r, 0, sizeof(r));
	gs_buf_fixed(&u, url, sizeof(url));
	gs_object_url(g, &u, name);
	gs_buf_match(&u, gen, metagen);
	gs_buf_str(&u, "&fields=" OBJ_FIELDS);
	if (u.failed)
		return gcs_fail(err, GCS_INVALID, "URL too long");
	/* A key set to null is deleted by GCS: pass nulls through. */
	res = json_pack("{sO}", "metadata", (json_t *)metadata);
	body = res ? json_dumps(res, JSON_COMPACT) : NULL;
	json_decref(res);
	if (body == NULL)
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	req = (gs_req){ .op = "patch",
		.method = "PATCH",
		.url = url,
		.ctype = "application/json",
		.body = body,
		.body_len = strlen(body),
		.name = name };
	rc = gs_call(g, &req, &r, err);
	if (rc == GCS_OK)
		rc = gs_answer_object(&r, "patch", out, err);
	if (applied_unreadable(rc, err))
		rc = read_back(g, name, metadata, gen, out, err);
	gcs_resp_clear(&r);
	free(body);
	return rc;
}

static int
gs_remove(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    gcs_err *err)
{
	gs_store *g = (gs_store *)s;
	char url[GCS_URL_MAX];
	gcs_resp r;
	gs_req req;
	gs_buf u;
	int rc;

	gs_buf_fixed(&u, url, sizeof(url));
	gs_object_url(g, &u, name);
	gs_buf_match(&u, gen, metagen);
	if (u.failed)
		return gcs_fail(err, GCS_INVALID, "URL too long");
	req = (gs_req){ .op = "delete",
		.method = "DELETE",
		.url = url,
		.name = name };
	rc = gs_call(g, &req, &r, err);
	gcs_resp_clear(&r);
	return rc;
}

static int
gs_check(gcs_store *s, gcs_err *err)
{
	gs_store *g = (gs_store *)s;
	char url[GCS_URL_MAX];
	gcs_resp r;
	gs_req req;
	int rc;

	if (gs_list_url(g, url, sizeof(url), "", 1, NULL, NULL,
	        "nextPageToken") != 0)
		return gcs_fail(err, GCS_INVALID, "URL too long");
	req = (gs_req){ .op = "list (readiness check)",
		.no_object = 1,
		.method = "GET",
		.url = url };
	rc = gs_call(g, &req, &r, err);
	gcs_resp_clear(&r);
	if (rc == GCS_DENIED)
		gcs_fail(err, GCS_DENIED,
		    "Cloud Storage refused the "
		    "credentials for bucket '%s' (HTTP %d)",
		    g->bucket, err->http_status);
	return rc;
}

static void
gs_free(gcs_store *s)
{
	gs_store *g = (gs_store *)s;
	int i;

	if (g == NULL)
		return;
	for (i = 0; i < g->npool; i++)
		gcs_http_free(g->pool[i]);
	pthread_mutex_destroy(&g->pool_mu);
	gcs_token_src_free(g->tok);
	free(g);
}

static const gcs_store_ops gs_ops = {
	.scheme = "gs",
	.insert = gs_insert,
	.get = gs_get,
	.patch = gs_patch,
	.remove = gs_remove,
	.list = gs_list,
	.check = gs_check,
	.free = gs_free,
};

/* Bucket names: 3-63 characters per dot-separated part, 222 in all, of
 * a-z 0-9 - _ ., starting and ending with a letter or digit. */
static int
bucket_valid(const char *b)
{
	size_t n = strlen(b), i, label = 0;

	if (n < 3 || n > GCS_BUCKET_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		char c = b[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && c != '-' && c != '_' && c != '.')
			return 0;
		label = c == '.' ? 0 : label + 1;
		if (label > GCS_BUCKET_LABEL_MAX)
			return 0;
	}
	return ((b[0] >= 'a' && b[0] <= 'z') || (b[0] >= '0' && b[0] <= '9')) &&
	    ((b[n - 1] >= 'a' && b[n - 1] <= 'z') ||
	        (b[n - 1] >= '0' && b[n - 1] <= '9')) &&
	    strstr(b, "..") == NULL;
}

/* Prefixes: printable ASCII, no leading '/', no "." or ".." segment. */
static int
prefix_valid(const char *p)
{
	size_t i, n = strlen(p);

	if (n > GCS_PREFIX_MAX || p[0] == '/')
		return 0;
	for (i = 0; i < n; i++)
		if (p[i] < 0x21 || p[i] > 0x7e || p[i] == '#' || p[i] == '?' ||
		    p[i] == '[' || p[i] == ']' || p[i] == '*')
			return 0;
	return strstr(p, "//") == NULL && strncmp(p, "./", 2) != 0 &&
	    strncmp(p, "../", 3) != 0 && strstr(p, "/./") == NULL &&
	    strstr(p, "/../") == NULL;
}

/* G's URL heads, once its endpoint, bucket and prefix are set. */
static int
url_heads(gs_store *g, gcs_err *err)
{
	gs_buf o, u, i;

	gs_buf_fixed(&o, g->objs_url, sizeof(g->objs_url));
	gs_buf_str(&o, g->endpoint);
	gs_buf_str(&o, "/storage/v1/b/");
	gs_buf_str(&o, g->bucket);
	gs_buf_str(&o, "/o");
	gs_buf_fixed(&u, g->obj_head, sizeof(g->obj_head));
	gs_buf_str(&u, g->objs_url);
	gs_buf_add(&u, "/", 1);
	gs_buf_enc(&u, g->prefix);
	gs_buf_fixed(&i, g->insert_url, sizeof(g->insert_url));
	gs_buf_str(&i, g->endpoint);
	gs_buf_str(&i, "/upload/storage/v1/b/");
	gs_buf_str(&i, g->bucket);
	gs_buf_str(&i,
	    "/o?uploadType=multipart&ifGenerationMatch=0&"
	    "fields=" INSERT_FIELDS);
	if (o.failed || u.failed || i.failed)
		return gcs_fail(err, GCS_INVALID,
		    "Cloud Storage URLs for this bucket and prefix are too "
		    "long");
	return GCS_OK;
}

/* Drops the '/'s that end E, of length *LEN. */
static void
trim_slashes(char *e, size_t *len)
{
	while (*len > 0 && e[*len - 1] == '/')
		e[--*len] = '\0';
}

/* G's endpoint from V: "host:port" (http:// assumed) or a URL, with or
 * without the JSON API's root, "/storage/v1", at the end of its path.
 * Google's clients differ there (Go's WithEndpoint takes the root,
 * Python's api_endpoint and STORAGE_EMULATOR_HOST do not), so both are
 * taken: lockgate adds the root itself, and "/upload" before it. */
static int
set_endpoint(gs_store *g, const char *v, gcs_err *err)
{
	static const char root[] = "/storage/v1";
	const size_t rlen = sizeof(root) - 1;
	char *e = g->endpoint, *path;
	int n;
	size_t len;

	n = snprintf(e, sizeof(g->endpoint), "%s%s",
	    strstr(v, "://") ? "" : "http://", v);
	if (n < 0 || (size_t)n >= sizeof(g->endpoint))
		goto bad;
	if (strncmp(e, "http://", 7) == 0)
		path = e + 7;
	else if (strncmp(e, "https://", 8) == 0)
		path = e + 8;
	else
		goto bad;
	if (path[0] == '\0' || path[0] == '/')
		goto bad; /* no host */
	len = strlen(e);
	trim_slashes(e, &len);
	path = strchr(path, '/');
	if (path != NULL && (size_t)(e + len - path) >= rlen &&
	    strcmp(e + len - rlen, root) == 0) {
		len -= rlen;
		e[len] = '\0';
		trim_slashes(e, &len);
	}
	return url_heads(g, err);
bad:
	return gcs_fail(err, GCS_INVALID,
	    "Cloud Storage endpoint '%.64s' is not an http(s) URL", v);
}

static gcs_settings settings; /* gcs_configure's */

void
gcs_configure(const gcs_settings *s)
{
	settings = *s;
}

const gcs_settings *
gcs_settings_get(void)
{
	return &settings;
}

/* The configured total retry deadline, when set, shortens (or lengthens)
 * P's; the try timeout never exceeds it. */
static int
retry_total_set(gcs_retry_policy *p, gcs_err *err)
{
	int ms = settings.retry_total_ms;

	if (ms == 0)
		return GCS_OK;
	if (ms < GCS_RETRY_TOTAL_MIN_MS || ms > GCS_RETRY_TOTAL_MAX_MS)
		return gcs_fail(err, GCS_INVALID,
		    "the gs:// retry deadline must be %d..%d ms",
		    GCS_RETRY_TOTAL_MIN_MS, GCS_RETRY_TOTAL_MAX_MS);
	p->total_ms = ms;
	if (p->try_timeout_ms > p->total_ms)
		p->try_timeout_ms = p->total_ms;
	return GCS_OK;
}

gcs_store *
gcs_gs_new(const char *bucket, const char *prefix, gcs_err *err)
{
	const char *emu = getenv("STORAGE_EMULATOR_HOST");
	const char *ep = settings.endpoint;
	gs_store *g;

	if (prefix == NULL)
		prefix = "";
	if (bucket == NULL || !bucket_valid(bucket)) {
		gcs_fail(err, GCS_INVALID,
		    "gs:// bucket name '%.64s' is not "
		    "valid (3-63 of a-z 0-9 - _ . per part)",
		    bucket ? bucket : "");
		return NULL;
	}
	if (!prefix_valid(prefix)) {
		gcs_fail(err, GCS_INVALID,
		    "gs:// prefix is not valid (at most "
		    "%d printable characters, no '//', '.' or '..' segment, "
		    "no # ? [ ] *)",
		    GCS_PREFIX_MAX);
		return NULL;
	}
	gcs_curl_global_init();
	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		return NULL;
	}
	g->base.ops = &gs_ops;
	pthread_mutex_init(&g->pool_mu, NULL);
	memcpy(g->bucket, bucket, strlen(bucket) + 1);
	memcpy(g->prefix, prefix, strlen(prefix) + 1);
	g->plen = strlen(prefix);
	g->policy =
	    (gcs_retry_policy){ GCS_RETRY_TOTAL_MS, GCS_BACKOFF_INITIAL_MS,
		    GCS_BACKOFF_MAX_MS, GCS_TRY_TIMEOUT_MS };
	if (retry_total_set(&g->policy, err) != GCS_OK)
		goto fail;
	if (emu != NULL && emu[0] != '\0') {
		if (set_endpoint(g, emu, err) != GCS_OK)
			goto fail;
		return &g->base; /* emulator: no credentials */
	}
	if (set_endpoint(g, ep && ep[0] ? ep : GCS_DEFAULT_ENDPOINT, err) !=
	    GCS_OK)
		goto fail;
	g->tok = gcs_token_src_new(err);
	if (g->tok == NULL)
		goto fail;
	return &g->base;
fail:
	gs_free(&g->base);
	return NULL;
}

void
gcs_gs_set_retry(gcs_store *s, const gcs_retry_policy *p)
{
	gs_store *g = (gs_store *)s;

	if (p->total_ms > 0)
		g->policy.total_ms = p->total_ms;
	if (p->initial_ms > 0)
		g->policy.initial_ms = p->initial_ms;
	if (p->max_ms > 0)
		g->policy.max_ms = p->max_ms;
	if (p->try_timeout_ms > 0)
		g->policy.try_timeout_ms = p->try_timeout_ms;
}

const char *
gcs_gs_endpoint(const gcs_store *s)
{
	return ((const gs_store *)s)->endpoint;
}

int
gcs_gs_authenticated(const gcs_store *s)
{
	return ((const gs_store *)s)->tok != NULL;
}
