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
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "util/wipe.h"
#include "util/clock.h"
#include "gcs.h"
#include "gcs_client.h"
#include "gcs_http.h"
#include "gcs_multi.h"
#include "rt/rt.h"
#include "gcs_token.h"

#define OBJ_FIELDS    "name,generation,metageneration,timeCreated,updated,metadata"
#define LIST_FIELDS   "items(" OBJ_FIELDS "),nextPageToken"
/* An insert answer is read for these only (answer_inserted). */
#define INSERT_FIELDS "generation,metageneration,timeCreated,updated"
#define BOUNDARY_HEX  16 /* random bytes of a multipart boundary */
#define AUTH_HDR_MAX  (GCS_TOKEN_MAX + 32)
#define GCS_OBJ_HEAD_MAX \
	(GCS_ENDPOINT_MAX + GCS_BUCKET_NAME_MAX + 3 * GCS_PREFIX_MAX + 160)

typedef struct gs_store {
	gcs_store base;
	char bucket[GCS_BUCKET_NAME_MAX + 1];
	char prefix[GCS_PREFIX_MAX + 1];
	size_t plen;
	char endpoint[GCS_ENDPOINT_MAX];
	/* The constant heads of the requests' URLs, made once (url_heads):
	 * ENDPOINT/storage/v1/b/BUCKET/o, that and /ENC(prefix), and the
	 * whole insert URL. */
	char objs_url[GCS_OBJ_HEAD_MAX];
	char obj_head[GCS_OBJ_HEAD_MAX];
	char insert_url[GCS_OBJ_HEAD_MAX];
	gcs_token_src *tok; /* NULL: no auth (emulator) */
	gcs_retry_policy policy;
	pthread_mutex_t pool_mu;
	gcs_http *pool[GCS_POOL_MAX]; /* idle handles, most recent last */
	int npool;
} gs_store;

/* One request, before retries. */
typedef struct gs_req {
	const char *op; /* for messages: "insert", "get", ... */
	const char *method;
	const char *url;
	const char *ctype; /* Content-Type of BODY, or NULL */
	const char *body;
	size_t body_len;
	const char *name; /* lock name for messages, or NULL */
	/* A 404 names no object (insert, list): only the bucket can be
	 * missing. */
	int no_object;
	int large_answer; /* a list page: GCS_HTTP_BUF_LARGE */
	int *too_big;     /* set to 1 when a 2xx answer passed GCS_RESP_MAX */
} gs_req;

/* Every request but a read (GET) carries a generation precondition:
 * only then is a 409 or 412 an answer about the object. */
static int
guarded(const gs_req *req)
{
	return strcmp(req->method, "GET") != 0;
}

/* Any 2xx is success, for every method, as Google's client libraries
 * take it: Cloud Storage answers a delete 204, Google's emulator 200.
 * What the operation needs from the answer is checked by its caller. */
static int
success(long status)
{
	return status >= 200 && status <= 299;
}

/* ---- handle pool ---- */

/* A handle for one request.  In a loop's task: one the loop keeps (its
 * transfers use the loop's connections; see gcs_multi_cache_take), so a
 * handle never moves between threads.  Elsewhere: the most recently used
 * idle handle of the store (its own connection is the likeliest to be
 * alive).  A new one when there is none; NULL when out of memory. */
static void
http_free(void *h)
{
	gcs_http_free(h);
}

static gcs_http *
pool_take(gs_store *g)
{
	gcs_http *h = NULL;

	if (rt_in_task()) {
		h = gcs_multi_cache_take(http_free);
		return h ? h : gcs_http_new();
	}
	pthread_mutex_lock(&g->pool_mu);
	if (g->npool > 0)
		h = g->pool[--g->npool];
	pthread_mutex_unlock(&g->pool_mu);
	return h ? h : gcs_http_new();
}

static void
pool_put(gs_store *g, gcs_http *h)
{
	if (rt_in_task()) {
		if (gcs_multi_cache_put(h, http_free) != 0)
			gcs_http_free(h);
		return;
	}
	pthread_mutex_lock(&g->pool_mu);
	if (g->npool < GCS_POOL_MAX) {
		g->pool[g->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&g->pool_mu);
	gcs_http_free(h);
}

/* ---- small helpers ---- */

static uint64_t
rand64(void)
{
	static __thread uint64_t s;
	struct timespec ts;

	if (s == 0) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
		    ((uint64_t)(uintptr_t)&s) ^ ((uint64_t)getpid() << 40);
		if (s == 0)
			s = 0x9e3779b97f4a7c15ULL;
	}
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

/* ---- strings built without printf ---- */

/* A string being built: in a buffer of the caller's (FIXED: an append that
 * does not fit fails) or in one that grows.  Appends never fail loudly:
 * FAILED is remembered (too long, or out of memory) and the string stays
 * as it was. */
typedef struct gs_buf {
	char *p;
	size_t len, cap;
	int failed;
	int fixed;
} gs_buf;

/* A string in the caller's CAP bytes at P. */
static void
buf_fixed(gs_buf *b, char *p, size_t cap)
{
	*b = (gs_buf){ .p = p, .cap = cap, .failed = cap == 0, .fixed = 1 };
	if (cap > 0)
		p[0] = '\0';
}

/* Room for N more bytes and a NUL; 0, or -1 (remembered) without. */
static int
buf_room(gs_buf *b, size_t n)
{
	char *np;
	size_t cap;

	if (b->failed)
		return -1;
	if (n < b->cap - b->len)
		return 0;
	if (b->fixed) {
		b->failed = 1;
		return -1;
	}
	cap = b->cap ? b->cap : 1024;
	while (cap < b->len + n + 1)
		cap *= 2;
	np = realloc(b->p, cap);
	if (np == NULL) {
		b->failed = 1;
		return -1;
	}
	b->p = np;
	b->cap = cap;
	return 0;
}

static void
buf_add(gs_buf *b, const char *s, size_t n)
{
	if (buf_room(b, n) != 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
buf_str(gs_buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

/* A then B into the caller's DSTSZ bytes at DST; -1 if they do not fit. */
static int
str_join(char *dst, size_t dstsz, const char *a, const char *b)
{
	gs_buf u;

	buf_fixed(&u, dst, dstsz);
	buf_str(&u, a);
	buf_str(&u, b);
	return u.failed ? -1 : 0;
}

/* V >= 0 in decimal (generations). */
static void
buf_u64(gs_buf *b, uint64_t v)
{
	char d[24];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	buf_add(b, d + i, sizeof(d) - i);
}

/* S percent-encoded: everything but unreserved characters, '/' too.
 * Room for the worst case (3 bytes each) is asked for, which the fixed
 * buffers have for the longest prefix and name. */
static void
buf_enc(gs_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	unsigned char c;
	char *o;

	if (buf_room(b, 3 * strlen(s)) != 0)
		return;
	o = b->p + b->len;
	for (; *s; s++) {
		c = (unsigned char)*s;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~') {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	b->len = (size_t)(o - b->p);
}

/* The URL of object PREFIX+NAME up to and with its '?'. */
static void
object_url(const gs_store *g, gs_buf *u, const char *name)
{
	if (strlen(name) > GCS_NAME_MAX)
		u->failed = 1;
	buf_str(u, g->obj_head);
	buf_enc(u, name);
	buf_add(u, "?", 1);
}

/* The generation preconditions of a patch or delete. */
static void
buf_match(gs_buf *u, int64_t gen, int64_t metagen)
{
	buf_str(u, "ifGenerationMatch=");
	buf_u64(u, (uint64_t)gen);
	buf_str(u, "&ifMetagenerationMatch=");
	buf_u64(u, (uint64_t)metagen);
}

/*
 * A generation or metageneration of an answer: 1..GCS_GEN_MAX, so that
 * the next one (a refresh writes metageneration + 1) cannot overflow.
 * Cloud Storage's generations are microsecond timestamps, ~2^51 today.
 */
static int
gen_in_range(long long x, int64_t *out)
{
	if (x < 1 || x > GCS_GEN_MAX)
		return -1;
	*out = x;
	return 0;
}

/* A generation written in decimal digits, nothing else. */
static int
gen_of_text(const char *s, int64_t *out)
{
	char *end;
	long long x;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	return gen_in_range(x, out);
}

/* A generation as a JSON string of digits, the way GCS sends it, or a
 * plain integer. */
static int
parse_gen(const json_t *v, int64_t *out)
{
	if (json_is_integer(v))
		return gen_in_range(json_integer_value(v), out);
	return gen_of_text(json_string_value(v), out);
}

/* Fill OUT from an object resource J.  NOW_MS is the storage's clock. */
static int
parse_object(const json_t *j, int64_t now_ms, gcs_object *out)
{
	json_t *md = json_object_get(j, "metadata");

	if (!json_is_object(j) ||
	    parse_gen(json_object_get(j, "generation"), &out->generation) ||
	    parse_gen(json_object_get(j, "metageneration"),
	        &out->metageneration))
		return -1;
	out->created_ms = gcs_parse_rfc3339(
	    json_string_value(json_object_get(j, "timeCreated")));
	out->updated_ms =
	    gcs_parse_rfc3339(json_string_value(json_object_get(j, "updated")));
	if (out->updated_ms < 0)
		return -1;
	if (out->created_ms < 0)
		out->created_ms = out->updated_ms;
	out->now_ms = now_ms;
	/* GCS omits "metadata" when the object has none.  The map is shared
	 * with the parsed answer, which the caller drops right after. */
	out->metadata = json_is_object(md) ? json_incref(md) : json_object();
	return out->metadata == NULL ? -1 : 0;
}

/* ---- one call, with retries ---- */

static int
retryable(long status)
{
	return status == 0 || status == 408 || status == 429 || status >= 500;
}

/*
 * The outcome of HTTP STATUS (0: no answer) to REQ.  A 404 to a get, patch
 * or delete is "no such object"; to an insert or a list, which name no
 * object, it can only mean that the bucket does not exist: the storage is
 * unusable until --store is corrected (503 + Retry-After to the caller),
 * never "not held" or a bug of ours.  A 400 refuses a request we built: a
 * bug of ours.  A 409 or 412 is about the object only where a precondition
 * was sent: to a read it would otherwise be taken as "someone moved", so
 * it is unavailable.  Any other status that is no success (a redirect, a
 * 304, 405, 410, ...) tells nothing about the object: unavailable, like a
 * 5xx.  (Every 2xx is success: see success.)
 */
static gcs_status
classify(long status, const gs_req *req)
{
	switch (status) {
	case 404:
		return req->no_object ? GCS_UNAVAILABLE : GCS_NOT_FOUND;
	case 409: /* FALLTHROUGH */
	case 412:
		return guarded(req) ? GCS_PRECONDITION : GCS_UNAVAILABLE;
	case 429:
		return GCS_BUSY;
	case 401: /* FALLTHROUGH */
	case 403:
		return GCS_DENIED;
	case 400:
		return GCS_INVALID;
	default:
		return GCS_UNAVAILABLE;
	}
}

/* The "error" member of the JSON text S (N bytes), borrowed from *ROOT
 * (a new reference the caller drops), or NULL. */
static json_t *
error_member(const char *s, size_t n, json_t **root)
{
	*root = s ? json_loadb(s, n, 0, NULL) : NULL;
	return json_object_get(*root, "error");
}

/*
 * The detail of an error answer R, for the log only (classification is by
 * status): "REASON: MESSAGE", either part alone, or "" when the body says
 * neither.  Two shapes: Cloud Storage's {"error":{"code","message",
 * "errors":[{"reason",...}]}}, and Google's emulator's
 * {"error":{"code":N,"message":"<JSON text>"}}, whose message is itself
 * an error object ({"error":{"errors":[{"message"}]}}): its first
 * error's message is the one a person can act on.  Cut to BUFSZ, bytes
 * outside printable ASCII replaced.
 */
static const char *
error_detail(const gcs_resp *r, char *buf, size_t bufsz)
{
	json_t *root, *inner_root = NULL, *e, *inner, *first;
	const char *reason, *msg;
	size_t i;

	e = error_member(r->body, r->len, &root);
	first = json_array_get(json_object_get(e, "errors"), 0);
	reason = json_string_value(json_object_get(first, "reason"));
	msg = json_string_value(json_object_get(e, "message"));
	inner = msg ? error_member(msg, strlen(msg), &inner_root) : NULL;
	if (inner != NULL) {
		first = json_array_get(json_object_get(inner, "errors"), 0);
		if (reason == NULL)
			reason =
			    json_string_value(json_object_get(first, "reason"));
		msg = json_string_value(json_object_get(first, "message"));
		if (msg == NULL)
			msg = json_string_value(
			    json_object_get(inner, "message"));
	}
	snprintf(buf, bufsz, "%s%s%s", reason ? reason : "",
	    reason && msg ? ": " : "", msg ? msg : "");
	for (i = 0; buf[i]; i++)
		if (buf[i] < 0x20 || buf[i] > 0x7e)
			buf[i] = '?';
	json_decref(inner_root);
	json_decref(root);
	return buf;
}

/* The request headers of one try, as a list on the caller's stack:
 * libcurl only reads them while the transfer runs.  AUTH (the bearer
 * header, or "") and CT (a Content-Type header, or "") are the caller's. */
typedef struct gs_hdrs {
	struct curl_slist node[3];
	struct curl_slist *list;
} gs_hdrs;

static void
hdrs_build(gs_hdrs *hl, char *auth, char *ct, int has_body)
{
	/* No 100-continue round trip for our small bodies. */
	static char expect[] = "Expect:";
	char *v[3];
	int n = 0, i;

	if (auth[0] != '\0')
		v[n++] = auth;
	if (has_body)
		v[n++] = expect;
	if (ct[0] != '\0')
		v[n++] = ct;
	for (i = 0; i < n; i++) {
		hl->node[i].data = v[i];
		hl->node[i].next = i + 1 < n ? &hl->node[i + 1] : NULL;
	}
	hl->list = n > 0 ? &hl->node[0] : NULL;
}

/* The least time worth giving a try: GCS_TRY_MIN_MS, or the whole try
 * timeout when that is shorter. */
static int64_t
try_min(const gs_store *g)
{
	return g->policy.try_timeout_ms < GCS_TRY_MIN_MS
	    ? g->policy.try_timeout_ms
	    : GCS_TRY_MIN_MS;
}

/* DEADLINE, or earlier when the process is stopping (gcs_give_up_at) or
 * the calling thread has less time (gcs_give_up_thread). */
static int64_t
give_up_by(int64_t deadline)
{
	int64_t cut = gcs_give_up_time(), mine = gcs_give_up_thread_time();

	if (mine > 0 && (cut <= 0 || mine < cut))
		cut = mine;
	return cut > 0 && cut < deadline ? cut : deadline;
}

/* Perform REQ with retries.  GCS_OK with *resp holding a 2xx answer (caller
 * clears it); otherwise the classified status with err filled. */
static int
gs_call(gs_store *g, const gs_req *req, gcs_resp *resp, gcs_err *err)
{
	char auth[AUTH_HDR_MAX], ct[128], ebuf[GCS_ERRMSG_MAX], detail[160];
	char tok[GCS_TOKEN_MAX];
	int64_t deadline, now, cap, pause;
	long timeout;
	gcs_err terr;
	gcs_status st;
	gs_hdrs hl;
	gcs_http *h;
	uint64_t serial = 0;
	int rc, sent, tries = 0, reached = 0, reauthed = 0;

	deadline = util_mono_ms() + g->policy.total_ms;
	cap = g->policy.initial_ms;
	ebuf[0] = '\0';
	ct[0] = '\0';
	if (req->ctype != NULL &&
	    str_join(ct, sizeof(ct), "Content-Type: ", req->ctype) != 0)
		return gcs_fail(err, GCS_INVALID, "Content-Type too long");
	memset(resp, 0, sizeof(*resp));
	for (;;) {
		/* A stopping process gives up in time to answer and exit. */
		deadline = give_up_by(deadline);
		if (tries == 0 && deadline <= util_mono_ms())
			return gcs_fail(err, GCS_UNAVAILABLE,
			    "Cloud Storage %s not sent: %s", req->op,
			    gcs_give_up_time() > 0 ? "lockgate is shutting down"
			                           : "its caller's time is up");
		err->attempts = reached;
		auth[0] = '\0';
		if (g->tok != NULL) {
			memset(&terr, 0, sizeof(terr));
			if (gcs_token_get(g->tok, deadline, tok, sizeof(tok),
			        &serial, &terr) != GCS_OK)
				return gcs_fail(err, GCS_UNAVAILABLE, "%s",
				    terr.msg);
			/* fits: AUTH_HDR_MAX has room for any token */
			str_join(auth, sizeof(auth), "Authorization: Bearer ",
			    tok);
			util_wipe(tok, strlen(tok));
		}
		hdrs_build(&hl, auth, ct, req->body != NULL);
		h = pool_take(g);
		if (h == NULL) {
			util_wipe(auth, strlen(auth));
			return gcs_fail(err, GCS_NOMEM, "out of memory");
		}
		gcs_http_set_buffer(h,
		    req->large_answer ? GCS_HTTP_BUF_LARGE
		                      : GCS_HTTP_BUF_SMALL);
		now = util_mono_ms();
		timeout = (long)(deadline - now);
		if (timeout > g->policy.try_timeout_ms)
			timeout = g->policy.try_timeout_ms;
		if (timeout < 1)
			timeout = 1;
		sent = gcs_http_perform(h, req->method, req->url, hl.list,
		    req->body, req->body_len, timeout, resp, ebuf,
		    sizeof(ebuf));
		pool_put(g, h);
		util_wipe(auth, strlen(auth)); /* only the bytes written */
		/* A possible silent resend by libcurl counts as a try: the
		 * first send may have been applied. */
		tries++;
		reached += resp->sends;
		err->attempts = reached;
		err->http_status = sent == 0 ? (int)resp->status : 0;
		if (sent == 0 && success(resp->status)) {
			if (resp->too_big) {
				if (req->too_big != NULL)
					*req->too_big = 1;
				gcs_resp_clear(resp);
				return gcs_fail(err, GCS_UNAVAILABLE,
				    "Cloud Storage %s answer over %d bytes",
				    req->op, GCS_RESP_MAX);
			}
			return GCS_OK;
		}
		if (sent == 0 && resp->status == 401 && g->tok != NULL) {
			/* The token was refused (revoked, or expired before
			 * its expires_in): a 401 applies nothing, so one more
			 * try with a new token, at once, if it still fits. */
			gcs_token_invalidate(g->tok, serial);
			deadline = give_up_by(deadline);
			if (!reauthed &&
			    util_mono_ms() + try_min(g) <= deadline) {
				reauthed = 1;
				gcs_resp_clear(resp);
				gcs_stat_retry();
				continue;
			}
		}
		/* Every request we send is a read or carries a precondition,
		 * so each may be retried (facts §1). */
		rc = sent == 0 ? (int)resp->status : 0;
		if (!retryable(rc))
			break;
		now = util_mono_ms();
		pause = (int64_t)(rand64() % (uint64_t)(cap + 1));
		deadline = give_up_by(deadline);
		/* Only while a useful try still fits: one cut short by the
		 * deadline would end the call on a transport error instead
		 * of the storage's answer, and might apply a write whose
		 * answer is lost. */
		if (now + pause + try_min(g) > deadline)
			break;
		gcs_resp_clear(resp);
		gcs_stat_retry();
		rt_sleep(pause); /* a task yields its thread */
		cap = cap * 2 > g->policy.max_ms ? g->policy.max_ms : cap * 2;
	}
	st = classify(sent == 0 ? resp->status : 0, req);
	if (sent == 0 && resp->status == 404 && req->no_object)
		rc = gcs_fail(err, st,
		    "Cloud Storage bucket '%s' not found (check --store)",
		    g->bucket);
	else if (sent != 0)
		rc = gcs_fail(err, st,
		    "Cloud Storage %s%s%s unreachable after "
		    "%d tries: %s",
		    req->op, req->name ? " of " : "",
		    req->name ? req->name : "", tries, ebuf);
	else {
		error_detail(resp, detail, sizeof(detail));
		rc = gcs_fail(err, st, "Cloud Storage %s%s%s: HTTP %ld%s%s%s",
		    req->op, req->name ? " of " : "",
		    req->name ? req->name : "", resp->status,
		    detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
	}
	gcs_resp_clear(resp);
	return rc;
}

/* The storage's time of answer R.  Every GCS answer has a Date; one
 * without (a proxy's, another endpoint's) has no time we may judge
 * expiry by: never our own clock, which may run ahead (gcs.h). */
static int64_t
now_of(const gcs_resp *r)
{
	return r->date_ms > 0 ? r->date_ms : GCS_NOW_UNKNOWN;
}

/* Parse a 2xx answer carrying one object into OUT. */
static int
answer_object(const gcs_resp *r, const char *op, gcs_object *out, gcs_err *err)
{
	json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
	int rc = GCS_OK;

	if (parse_object(j, now_of(r), out) != 0) {
		gcs_object_clear(out);
		rc = gcs_fail(err, GCS_UNAVAILABLE,
		    "Cloud Storage %s: malformed object in the answer", op);
	}
	json_decref(j);
	return rc;
}

/* ---- the contract ---- */

/* ---- the insert request and its answer ---- */

/* S as a JSON string, quotes included.  S is valid UTF-8 (jansson checks
 * every string and key it holds; lock names are ASCII), which passes
 * through; '"', '\' and control characters are escaped. */
static void
buf_jstr(gs_buf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c;
	char *o;
	size_t i;

	if (buf_room(b, 6 * n + 2) != 0) /* every byte a \u00XX */
		return;
	o = b->p + b->len;
	*o++ = '"';
	for (i = 0; i < n; i++) {
		c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\') {
			*o++ = (char)c;
		} else if (c == '"' || c == '\\') {
			*o++ = '\\';
			*o++ = (char)c;
		} else {
			memcpy(o, "\\u00", 4);
			o[4] = hex[c >> 4];
			o[5] = hex[c & 15];
			o += 6;
		}
	}
	*o++ = '"';
	*o = '\0';
	b->len = (size_t)(o - b->p);
}

/* The object resource of a new lock, written straight as compact JSON:
 * {"name":FULL,"cacheControl":"no-store","contentType":...,"metadata":{..}}
 * with the null values of METADATA left out (a new object has no deleted
 * keys).  Metadata values are strings by contract; any other value is
 * written by jansson. */
static void
buf_resource(gs_buf *b, const char *full, const json_t *metadata)
{
	const char *k, *sep = "";
	json_t *v;
	char *dump;

	buf_str(b, "{\"name\":");
	buf_jstr(b, full, strlen(full));
	buf_str(b,
	    ",\"cacheControl\":\"no-store\",\"contentType\":"
	    "\"application/octet-stream\",\"metadata\":{");
	json_object_foreach((json_t *)metadata, k, v)
	{
		if (json_is_null(v))
			continue;
		buf_str(b, sep);
		sep = ",";
		buf_jstr(b, k, strlen(k));
		buf_add(b, ":", 1);
		if (json_is_string(v)) {
			buf_jstr(b, json_string_value(v),
			    json_string_length(v));
			continue;
		}
		dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		if (dump == NULL) {
			b->failed = 1;
			return;
		}
		buf_str(b, dump);
		free(dump);
	}
	buf_str(b, "}}");
}

/* NUL-terminate the N bytes at S into DST (DSTSZ bytes); -1 if too long. */
static int
text_copy(char *dst, size_t dstsz, const char *s, size_t n)
{
	if (s == NULL || n >= dstsz)
		return -1;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

/* A generation picked out of an answer, as parse_gen reads one. */
static int
pick_gen(const gcs_jpick *p, int64_t *out)
{
	char buf[32];

	if (p->val == NULL || text_copy(buf, sizeof(buf), p->val, p->len) != 0)
		return -1;
	return gen_of_text(buf, out);
}

static int64_t
pick_time(const gcs_jpick *p)
{
	char buf[64];

	if (!p->is_str || text_copy(buf, sizeof(buf), p->val, p->len) != 0)
		return -1;
	return gcs_parse_rfc3339(buf);
}

/* A new object's metadata: METADATA without its nulls, in a map of our
 * own whose values are shared with METADATA (jansson values are only
 * replaced in lockgate, never changed in place).  New reference, NULL on
 * allocation failure. */
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

/* The answer to an insert.  The new object's metadata is the one we sent
 * (minus its nulls): GCS stores it as given, and a 2xx with
 * ifGenerationMatch=0 is our own create, so only the generations and times
 * are read, by gcs_json_pick, without building the answer.  An answer the
 * pick cannot judge goes through jansson. */
static int
answer_inserted(const gcs_resp *r, const json_t *metadata, gcs_object *out,
    gcs_err *err)
{
	gcs_jpick f[4] = { { .key = "generation" }, { .key = "metageneration" },
		{ .key = "timeCreated" }, { .key = "updated" } };
	int rc = gcs_json_pick(r->body, r->len, f, 4);

	if (rc == 1)
		return answer_object(r, "insert", out, err);
	if (rc != 0 || pick_gen(&f[0], &out->generation) != 0 ||
	    pick_gen(&f[1], &out->metageneration) != 0 ||
	    (out->updated_ms = pick_time(&f[3])) < 0)
		goto bad;
	out->created_ms = pick_time(&f[2]);
	if (out->created_ms < 0)
		out->created_ms = out->updated_ms;
	out->now_ms = now_of(r);
	out->metadata = meta_sent(metadata);
	if (out->metadata == NULL) {
		memset(out, 0, sizeof(*out));
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	}
	return GCS_OK;
bad:
	memset(out, 0, sizeof(*out));
	return gcs_fail(err, GCS_UNAVAILABLE,
	    "Cloud Storage insert: malformed object in the answer");
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
	return rc == GCS_UNAVAILABLE && success(err->http_status);
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
		    name);
	}
	return rc;
}

static int
gs_insert(gcs_store *s, const char *name, const json_t *metadata,
    gcs_object *out, gcs_err *err)
{
	static const char hex[] = "0123456789abcdef";
	gs_store *g = (gs_store *)s;
	char full[GCS_PREFIX_MAX + GCS_NAME_MAX + 1];
	char boundary[2 * BOUNDARY_HEX + 1], ctype[96];
	gs_buf b = { 0 };
	size_t meta_len;
	uint64_t x = 0;
	gcs_resp r;
	gs_req req;
	int rc, i;

	memset(&r, 0, sizeof(r));
	if (str_join(full, sizeof(full), g->prefix, name) != 0)
		return gcs_fail(err, GCS_INVALID, "lock name too long");
	for (i = 0; i < BOUNDARY_HEX; i++) {
		if (i % 8 == 0)
			x = rand64();
		boundary[2 * i] = hex[(x >> 4) & 15];
		boundary[2 * i + 1] = hex[x & 15];
		x >>= 8;
	}
	boundary[2 * BOUNDARY_HEX] = '\0';
	str_join(ctype, sizeof(ctype), "multipart/related; boundary=",
	    boundary); /* fits: the boundary has a fixed size */
	/* Two parts: the resource JSON, then the empty media. */
	buf_str(&b, "--");
	buf_str(&b, boundary);
	buf_str(&b,
	    "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n");
	meta_len = b.len;
	buf_resource(&b, full, metadata);
	meta_len = b.len - meta_len;
	buf_str(&b, "\r\n--");
	buf_str(&b, boundary);
	buf_str(&b, "\r\nContent-Type: application/octet-stream\r\n\r\n\r\n--");
	buf_str(&b, boundary);
	buf_str(&b, "--\r\n");
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

	buf_fixed(&u, url, sizeof(url));
	object_url(g, &u, name);
	buf_str(&u, "fields=" OBJ_FIELDS);
	if (u.failed)
		return gcs_fail(err, GCS_INVALID, "URL too long");
	req =
	    (gs_req){ .op = "get", .method = "GET", .url = url, .name = name };
	rc = gs_call(g, &req, &r, err);
	if (rc == GCS_OK)
		rc = answer_object(&r, "get", out, err);
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
	buf_fixed(&u, url, sizeof(url));
	object_url(g, &u, name);
	buf_match(&u, gen, metagen);
	buf_str(&u, "&fields=" OBJ_FIELDS);
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
		rc = answer_object(&r, "patch", out, err);
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

	buf_fixed(&u, url, sizeof(url));
	object_url(g, &u, name);
	buf_match(&u, gen, metagen);
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
list_url(const gs_store *g, char *url, size_t urlsz, const char *prefix,
    int max, const char *token, const char *after, const char *fields)
{
	gs_buf u;

	if (g->plen + strlen(prefix) > GCS_PREFIX_MAX + GCS_NAME_MAX ||
	    (token != NULL && strlen(token) > GCS_PAGE_TOKEN_MAX))
		return -1;
	buf_fixed(&u, url, urlsz);
	buf_str(&u, g->objs_url);
	buf_str(&u, "?prefix=");
	buf_enc(&u, g->prefix);
	buf_enc(&u, prefix);
	buf_str(&u, "&maxResults=");
	buf_u64(&u, max > 0 ? (uint64_t)max : 0);
	if (token != NULL) {
		buf_str(&u, "&pageToken=");
		buf_enc(&u, token);
	} else if (after != NULL) {
		/* From the object named AFTER on (startOffset includes it:
		 * gs_list drops it). */
		buf_str(&u, "&startOffset=");
		buf_enc(&u, g->prefix);
		buf_enc(&u, after);
	}
	buf_str(&u, "&fields=");
	buf_str(&u, fields);
	return u.failed ? -1 : 0;
}

/*
 * One list page of up to MAX objects.  An object's entry takes up to about
 * twice its 8 KiB of metadata (each '"' or '\' escaped) and its other
 * fields, so a full page of large leases can pass GCS_RESP_MAX.  Such an
 * answer is asked for again with at most LIST_PAGE_SAFE objects, which
 * always fits, and that shorter page is the answer (with its token, as
 * any page that is not the last).
 */
#define LIST_ENTRY_MAX (2 * GCS_META_BYTES_MAX + 1024)
#define LIST_PAGE_SAFE (GCS_RESP_MAX / LIST_ENTRY_MAX)

/*
 * A store may ignore maxResults and pageToken (Google's emulator answers
 * every match in one page).  Such a page is cut to MAX here, and its
 * token is one of ours: OWN_TOKEN + the name of its last object, which
 * the next call turns into startOffset.  Cloud Storage's tokens are
 * base64, which never holds ':'.
 */
#define OWN_TOKEN     "lg:"
#define OWN_TOKEN_LEN 3

/* OUT's next_token: OWN_TOKEN after its last entry when the answer J
 * held more than was kept (CUT), else J's nextPageToken, if any.  GCS_OK,
 * GCS_NOMEM, or GCS_UNAVAILABLE for a token over GCS_PAGE_TOKEN_MAX. */
static int
next_token_of(gcs_page *out, const json_t *j, int cut, gcs_err *err)
{
	const char *tok =
	    json_string_value(json_object_get(j, "nextPageToken"));
	const char *last;

	if (cut) {
		last = out->items[out->n - 1].name;
		out->next_token = malloc(OWN_TOKEN_LEN + strlen(last) + 1);
		if (out->next_token != NULL) {
			memcpy(out->next_token, OWN_TOKEN, OWN_TOKEN_LEN);
			memcpy(out->next_token + OWN_TOKEN_LEN, last,
			    strlen(last) + 1);
		}
	} else if (tok != NULL && tok[0] != '\0') {
		if (strlen(tok) > GCS_PAGE_TOKEN_MAX)
			return gcs_fail(err, GCS_UNAVAILABLE,
			    "Cloud Storage list: malformed answer");
		out->next_token = strdup(tok);
	} else {
		return GCS_OK;
	}
	return out->next_token ? GCS_OK
	                       : gcs_fail(err, GCS_NOMEM, "out of memory");
}

static int
gs_list(gcs_store *s, const char *prefix, int max, const char *page_token,
    const char *after, gcs_page *out, gcs_err *err)
{
	gs_store *g = (gs_store *)s;
	char url[GCS_URL_MAX];
	json_t *j = NULL, *items, *it;
	const char *nm;
	gcs_resp r;
	gs_req req;
	size_t i;
	int rc, too_big = 0;

	if (page_token != NULL &&
	    strncmp(page_token, OWN_TOKEN, OWN_TOKEN_LEN) == 0) {
		after = page_token + OWN_TOKEN_LEN;
		page_token = NULL;
	}
	for (;;) {
		if (list_url(g, url, sizeof(url), prefix, max, page_token,
		        after, LIST_FIELDS) != 0)
			return gcs_fail(err, GCS_INVALID, "URL too long");
		req = (gs_req){ .op = "list",
			.no_object = 1,
			.large_answer = 1,
			.method = "GET",
			.url = url,
			.too_big = &too_big };
		rc = gs_call(g, &req, &r, err);
		if (rc == GCS_OK || !too_big || max <= LIST_PAGE_SAFE)
			break;
		max = LIST_PAGE_SAFE;
	}
	if (rc != GCS_OK)
		return rc;
	out->now_ms = now_of(&r);
	j = r.body ? json_loadb(r.body, r.len, 0, NULL) : NULL;
	/* An error object is no page, though a 200 carried it. */
	if (!json_is_object(j) || json_object_get(j, "error") != NULL)
		goto bad;
	items = json_object_get(j, "items"); /* absent on an empty page */
	if (items != NULL && !json_is_array(items))
		goto bad;
	if (json_array_size(items) > 0) {
		out->items =
		    calloc(json_array_size(items), sizeof(*out->items));
		if (out->items == NULL) {
			rc = gcs_fail(err, GCS_NOMEM, "out of memory");
			goto out;
		}
	}
	json_array_foreach(items, i, it)
	{
		gcs_entry *e = &out->items[out->n];
		if (out->n == (size_t)max)
			break; /* maxResults ignored: OWN_TOKEN follows */
		nm = json_string_value(json_object_get(it, "name"));
		if (nm == NULL)
			goto bad;
		if (strncmp(nm, g->prefix, g->plen) != 0)
			continue; /* not ours: cannot happen with prefix= */
		if (page_token == NULL && after != NULL &&
		    strcmp(nm + g->plen, after) == 0)
			continue; /* startOffset's own object: seen already */
		if (parse_object(it, out->now_ms, &e->obj) != 0)
			goto bad;
		e->name = strdup(nm + g->plen);
		if (e->name == NULL) {
			gcs_object_clear(&e->obj);
			rc = gcs_fail(err, GCS_NOMEM, "out of memory");
			goto fail;
		}
		out->n++;
	}
	rc = next_token_of(out, j, i < json_array_size(items), err);
	if (rc != GCS_OK)
		goto fail;
	goto out;
bad:
	rc = gcs_fail(err, GCS_UNAVAILABLE,
	    "Cloud Storage list: malformed answer");
fail:
	gcs_page_clear(out);
out:
	json_decref(j);
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

	if (list_url(g, url, sizeof(url), "", 1, NULL, NULL, "nextPageToken") !=
	    0)
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

	buf_fixed(&o, g->objs_url, sizeof(g->objs_url));
	buf_str(&o, g->endpoint);
	buf_str(&o, "/storage/v1/b/");
	buf_str(&o, g->bucket);
	buf_str(&o, "/o");
	buf_fixed(&u, g->obj_head, sizeof(g->obj_head));
	buf_str(&u, g->objs_url);
	buf_add(&u, "/", 1);
	buf_enc(&u, g->prefix);
	buf_fixed(&i, g->insert_url, sizeof(g->insert_url));
	buf_str(&i, g->endpoint);
	buf_str(&i, "/upload/storage/v1/b/");
	buf_str(&i, g->bucket);
	buf_str(&i,
	    "/o?uploadType=multipart&ifGenerationMatch=0&"
	    "fields=" INSERT_FIELDS);
	if (o.failed || u.failed || i.failed)
		return gcs_fail(err, GCS_INVALID,
		    "Cloud Storage URLs for this bucket and prefix are too "
		    "long");
	return GCS_OK;
}

static int
set_endpoint(gs_store *g, const char *v, gcs_err *err)
{
	int n;
	size_t len;

	n = snprintf(g->endpoint, sizeof(g->endpoint), "%s%s",
	    strstr(v, "://") ? "" : "http://", v);
	if (n < 0 || (size_t)n >= sizeof(g->endpoint) ||
	    (strncmp(g->endpoint, "http://", 7) != 0 &&
	        strncmp(g->endpoint, "https://", 8) != 0))
		return gcs_fail(err, GCS_INVALID,
		    "Cloud Storage endpoint '%.64s' is not an http(s) URL", v);
	len = strlen(g->endpoint);
	while (len > 0 && g->endpoint[len - 1] == '/')
		g->endpoint[--len] = '\0';
	return url_heads(g, err);
}

/* LOCKGATE_GCS_RETRY_TOTAL_MS shortens (or lengthens) the total retry
 * deadline; the try timeout never exceeds it. */
static int
retry_total_env(gcs_retry_policy *p, gcs_err *err)
{
	const char *v = getenv("LOCKGATE_GCS_RETRY_TOTAL_MS");
	char *end;
	long ms;

	if (v == NULL || v[0] == '\0')
		return GCS_OK;
	errno = 0;
	ms = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0' || ms < GCS_RETRY_TOTAL_MIN_MS ||
	    ms > GCS_RETRY_TOTAL_MAX_MS)
		return gcs_fail(err, GCS_INVALID,
		    "LOCKGATE_GCS_RETRY_TOTAL_MS "
		    "must be %d..%d",
		    GCS_RETRY_TOTAL_MIN_MS, GCS_RETRY_TOTAL_MAX_MS);
	p->total_ms = (int)ms;
	if (p->try_timeout_ms > p->total_ms)
		p->try_timeout_ms = p->total_ms;
	return GCS_OK;
}

gcs_store *
gcs_gs_new(const char *bucket, const char *prefix, gcs_err *err)
{
	const char *emu = getenv("STORAGE_EMULATOR_HOST");
	const char *ep = getenv("LOCKGATE_GCS_ENDPOINT");
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
	if (retry_total_env(&g->policy, err) != GCS_OK)
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
