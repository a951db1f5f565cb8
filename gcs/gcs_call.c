/*
 * gcs_call.c: one request of the gs:// store (gcs_client.c) with its
 * retries inside a total deadline, on a pooled keep-alive handle: its
 * URL, headers and body built without printf, its answer classified by
 * HTTP status only, and the objects read out of it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "util/wipe.h"
#include "util/clock.h"
#include "gcs_client_int.h"
#include "rt/rt.h"

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
int
gs_success(long status)
{
	return status >= 200 && status <= 299;
}

/* ---- handle pool ---- */

/* A handle for one request: the most recently used idle one of the
 * store, a new one when there is none; NULL when out of memory.  Handles
 * hold no connection: those are the storage thread's (gcs_multi.h). */
static gcs_http *
pool_take(gs_store *g)
{
	gcs_http *h = NULL;

	pthread_mutex_lock(&g->pool_mu);
	if (g->npool > 0)
		h = g->pool[--g->npool];
	pthread_mutex_unlock(&g->pool_mu);
	return h ? h : gcs_http_new();
}

static void
pool_put(gs_store *g, gcs_http *h)
{
	pthread_mutex_lock(&g->pool_mu);
	if (g->npool < GCS_POOL_MAX) {
		g->pool[g->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&g->pool_mu);
	gcs_http_free(h);
}

/* ---- small helpers ---- */

uint64_t
gs_rand64(void)
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

/* A string in the caller's CAP bytes at P. */
void
gs_buf_fixed(gs_buf *b, char *p, size_t cap)
{
	*b = (gs_buf){ .p = p, .cap = cap, .failed = cap == 0, .fixed = 1 };
	if (cap > 0)
		p[0] = '\0';
}

/* Room for N more bytes and a NUL; 0, or -1 (remembered) without. */
int
gs_buf_room(gs_buf *b, size_t n)
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

void
gs_buf_add(gs_buf *b, const char *s, size_t n)
{
	if (gs_buf_room(b, n) != 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void
gs_buf_str(gs_buf *b, const char *s)
{
	gs_buf_add(b, s, strlen(s));
}

/* A then B into the caller's DSTSZ bytes at DST; -1 if they do not fit. */
int
gs_str_join(char *dst, size_t dstsz, const char *a, const char *b)
{
	gs_buf u;

	gs_buf_fixed(&u, dst, dstsz);
	gs_buf_str(&u, a);
	gs_buf_str(&u, b);
	return u.failed ? -1 : 0;
}

/* V >= 0 in decimal (generations). */
void
gs_buf_u64(gs_buf *b, uint64_t v)
{
	char d[24];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	gs_buf_add(b, d + i, sizeof(d) - i);
}

/* S percent-encoded: everything but unreserved characters, '/' too.
 * Room for the worst case (3 bytes each) is asked for, which the fixed
 * buffers have for the longest prefix and name. */
void
gs_buf_enc(gs_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	unsigned char c;
	char *o;

	if (gs_buf_room(b, 3 * strlen(s)) != 0)
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
void
gs_object_url(const gs_store *g, gs_buf *u, const char *name)
{
	if (strlen(name) > GCS_NAME_MAX)
		u->failed = 1;
	gs_buf_str(u, g->obj_head);
	gs_buf_enc(u, name);
	gs_buf_add(u, "?", 1);
}

/* The generation preconditions of a patch or delete. */
void
gs_buf_match(gs_buf *u, int64_t gen, int64_t metagen)
{
	gs_buf_str(u, "ifGenerationMatch=");
	gs_buf_u64(u, (uint64_t)gen);
	gs_buf_str(u, "&ifMetagenerationMatch=");
	gs_buf_u64(u, (uint64_t)metagen);
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
int
gs_gen_of_text(const char *s, int64_t *out)
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
int
gs_parse_gen(const json_t *v, int64_t *out)
{
	if (json_is_integer(v))
		return gen_in_range(json_integer_value(v), out);
	return gs_gen_of_text(json_string_value(v), out);
}

/* Fill OUT from an object resource J.  NOW_MS is the storage's clock. */
int
gs_parse_object(const json_t *j, int64_t now_ms, gcs_object *out)
{
	json_t *md = json_object_get(j, "metadata");

	if (!json_is_object(j) ||
	    gs_parse_gen(json_object_get(j, "generation"), &out->generation) ||
	    gs_parse_gen(json_object_get(j, "metageneration"),
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
 * 5xx.  (Every 2xx is success: see gs_success.)
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
 * Cut every copy of the lease_id in NAME (what follows its '#') out of
 * TEXT, in place, leaving "…", as gcs_name_shown does: Cloud Storage's
 * own messages may quote the object they are about (its 404 and 429 ones
 * do).  A lease_id is hex (API_LEASE_ID_NEW), so a URL-encoded copy
 * reads the same.
 */
static void
hide_lease(char *text, const char *name)
{
	static const char cut[] = "…";
	const char *hash = name ? strchr(name, '#') : NULL;
	size_t n;
	char *p;

	if (hash == NULL || (n = strlen(hash + 1)) < sizeof(cut) - 1)
		return;
	while ((p = strstr(text, hash + 1)) != NULL) {
		memcpy(p, cut, sizeof(cut) - 1);
		memmove(p + sizeof(cut) - 1, p + n, strlen(p + n) + 1);
	}
}

/*
 * The detail of an error answer R, for the log only (classification is by
 * status): "REASON: MESSAGE", either part alone, or "" when the body says
 * neither.  Two shapes: Cloud Storage's {"error":{"code","message",
 * "errors":[{"reason",...}]}}, and Google's emulator's
 * {"error":{"code":N,"message":"<JSON text>"}}, whose message is itself
 * an error object ({"error":{"errors":[{"message"}]}}): its first
 * error's message is the one a person can act on.  Bytes outside
 * printable ASCII replaced and the lease_id of object NAME (or NULL) cut
 * out, both before the text is cut to BUFSZ (at most GCS_ERRMSG_MAX), so
 * that no part of a lease_id is left at the cut.
 */
static const char *
error_detail(const gcs_resp *r, const char *name, char *buf, size_t bufsz)
{
	json_t *root, *inner_root = NULL, *e, *inner, *first;
	const char *reason, *msg;
	char full[GCS_ERRMSG_MAX + GCS_NAME_MAX];
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
	snprintf(full, sizeof(full), "%s%s%s", reason ? reason : "",
	    reason && msg ? ": " : "", msg ? msg : "");
	for (i = 0; full[i]; i++)
		if (full[i] < 0x20 || full[i] > 0x7e)
			full[i] = '?';
	hide_lease(full, name);
	i = strlen(full) < bufsz ? strlen(full) : bufsz - 1;
	memcpy(buf, full, i);
	buf[i] = '\0';
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
 * the calling task has less time (rt_task_deadline). */
static int64_t
give_up_by(int64_t deadline)
{
	int64_t cut = gcs_give_up_time(), mine = rt_task_deadline();

	if (mine > 0 && (cut <= 0 || mine < cut))
		cut = mine;
	return cut > 0 && cut < deadline ? cut : deadline;
}

/* One call's progress through its tries (gs_call). */
typedef struct gs_try {
	int64_t deadline; /* mono ms: no try starts after it */
	int64_t cap;      /* of the next back-off pause */
	uint64_t serial;  /* of the token the last try carried */
	int sent;         /* the last gcs_http_perform's: 0 an answer came */
	int tries, reached, reauthed;
	char ct[128]; /* the Content-Type header, or empty */
	char ebuf[GCS_ERRMSG_MAX];
} gs_try;

/* The Authorization header of a try into AUTH (empty when the store has
 * no token source); the token's bytes are wiped once copied.  GCS_OK, or
 * the failure with ERR filled. */
static int
auth_header(gs_store *g, gs_try *t, char *auth, size_t authsz, gcs_err *err)
{
	char tok[GCS_TOKEN_MAX];
	gcs_err terr;

	auth[0] = '\0';
	if (g->tok == NULL)
		return GCS_OK;
	memset(&terr, 0, sizeof(terr));
	if (gcs_token_get(g->tok, t->deadline, tok, sizeof(tok), &t->serial,
	        &terr) != GCS_OK)
		return gcs_fail(err, GCS_UNAVAILABLE, "%s", terr.msg);
	/* fits: AUTH_HDR_MAX has room for any token */
	gs_str_join(auth, authsz, "Authorization: Bearer ", tok);
	util_wipe(tok, strlen(tok));
	return GCS_OK;
}

/* Send REQ once on a pooled handle, within the try's timeout, and count
 * the try.  GCS_OK when it ended, with an answer in RESP (T->sent 0) or a
 * transport error in T->ebuf; otherwise the failure with ERR filled. */
static int
try_send(gs_store *g, const gs_req *req, gs_try *t, gcs_resp *resp,
    gcs_err *err)
{
	char auth[AUTH_HDR_MAX];
	gs_hdrs hl;
	gcs_http *h;
	long timeout;
	int rc;

	if ((rc = auth_header(g, t, auth, sizeof(auth), err)) != GCS_OK)
		return rc;
	hdrs_build(&hl, auth, t->ct, req->body != NULL);
	if ((h = pool_take(g)) == NULL) {
		util_wipe(auth, strlen(auth));
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	}
	gcs_http_set_buffer(h,
	    req->large_answer ? GCS_HTTP_BUF_LARGE : GCS_HTTP_BUF_SMALL);
	timeout = (long)(t->deadline - util_mono_ms());
	if (timeout > g->policy.try_timeout_ms)
		timeout = g->policy.try_timeout_ms;
	if (timeout < 1)
		timeout = 1;
	t->sent = gcs_http_perform(h, req->method, req->url, hl.list, req->body,
	    req->body_len, timeout, resp, t->ebuf, sizeof(t->ebuf));
	pool_put(g, h);
	util_wipe(auth, strlen(auth)); /* only the bytes written */
	/* A possible silent resend by libcurl counts as a try: the first
	 * send may have been applied. */
	t->tries++;
	t->reached += resp->sends;
	err->attempts = t->reached;
	err->http_status = t->sent == 0 ? (int)resp->status : 0;
	return GCS_OK;
}

/* After a try that did not succeed: the pause (ms, 0: at once) before the
 * next one, or -1 when there is to be none. */
static int64_t
try_again(gs_store *g, gs_try *t, const gcs_resp *resp)
{
	int64_t now, pause;
	int rc;

	if (t->sent == 0 && resp->status == 401 && g->tok != NULL) {
		/* The token was refused (revoked, or expired before its
		 * expires_in): a 401 applies nothing, so one more try with a
		 * new token, at once, if it still fits. */
		gcs_token_invalidate(g->tok, t->serial);
		t->deadline = give_up_by(t->deadline);
		if (!t->reauthed &&
		    util_mono_ms() + try_min(g) <= t->deadline) {
			t->reauthed = 1;
			return 0;
		}
	}
	/* Every request we send is a read or carries a precondition, so
	 * each may be retried (Cloud Storage's retry strategy). */
	rc = t->sent == 0 ? (int)resp->status : 0;
	if (!retryable(rc))
		return -1;
	now = util_mono_ms();
	pause = (int64_t)(gs_rand64() % (uint64_t)(t->cap + 1));
	t->deadline = give_up_by(t->deadline);
	/* Only while a useful try still fits: one cut short by the deadline
	 * would end the call on a transport error instead of the storage's
	 * answer, and might apply a write whose answer is lost. */
	if (now + pause + try_min(g) > t->deadline)
		return -1;
	t->cap = t->cap * 2 > g->policy.max_ms ? g->policy.max_ms : t->cap * 2;
	return pause;
}

/* A 2xx answer in RESP: GCS_OK, unless it passed GCS_RESP_MAX. */
static int
answer_ok(const gs_req *req, gcs_resp *resp, gcs_err *err)
{
	if (!resp->too_big)
		return GCS_OK;
	if (req->too_big != NULL)
		*req->too_big = 1;
	gcs_resp_clear(resp);
	return gcs_fail(err, GCS_UNAVAILABLE,
	    "Cloud Storage %s answer over %d bytes", req->op, GCS_RESP_MAX);
}

/* The last try's failure, classified, in ERR; RESP cleared. */
static int
call_failed(const gs_store *g, const gs_req *req, const gs_try *t,
    gcs_resp *resp, gcs_err *err)
{
	char detail[160], what[GCS_NAME_SHOWN_BUF + 4];
	gcs_status st;
	int rc;

	st = classify(t->sent == 0 ? resp->status : 0, req);
	what[0] = '\0';
	if (req->name != NULL) {
		memcpy(what, " of ", 4);
		gcs_name_shown(req->name, what + 4, sizeof(what) - 4);
	}
	if (t->sent == 0 && resp->status == 404 && req->no_object)
		rc = gcs_fail(err, st,
		    "Cloud Storage bucket '%s' not found (check --store)",
		    g->bucket);
	else if (t->sent != 0)
		rc = gcs_fail(err, st,
		    "Cloud Storage %s%s unreachable after %d tries: %s",
		    req->op, what, t->tries, t->ebuf);
	else {
		error_detail(resp, req->name, detail, sizeof(detail));
		rc = gcs_fail(err, st, "Cloud Storage %s%s: HTTP %ld%s%s%s",
		    req->op, what, resp->status, detail[0] ? " (" : "", detail,
		    detail[0] ? ")" : "");
	}
	gcs_resp_clear(resp);
	return rc;
}

/* Perform REQ with retries.  GCS_OK with *resp holding a 2xx answer (caller
 * clears it); otherwise the classified status with err filled. */
int
gs_call(gs_store *g, const gs_req *req, gcs_resp *resp, gcs_err *err)
{
	gs_try t;
	int64_t pause;
	int rc;

	memset(&t, 0, sizeof(t));
	t.deadline = util_mono_ms() + g->policy.total_ms;
	t.cap = g->policy.initial_ms;
	if (req->ctype != NULL &&
	    gs_str_join(t.ct, sizeof(t.ct), "Content-Type: ", req->ctype) != 0)
		return gcs_fail(err, GCS_INVALID, "Content-Type too long");
	memset(resp, 0, sizeof(*resp));
	for (;;) {
		/* A stopping process gives up in time to answer and exit. */
		t.deadline = give_up_by(t.deadline);
		if (t.tries == 0 && t.deadline <= util_mono_ms())
			return gcs_fail(err, GCS_UNAVAILABLE,
			    "Cloud Storage %s not sent: %s", req->op,
			    gcs_give_up_time() > 0 ? "lockgate is shutting down"
			                           : "its caller's time is up");
		err->attempts = t.reached;
		if ((rc = try_send(g, req, &t, resp, err)) != GCS_OK)
			return rc;
		if (t.sent == 0 && gs_success(resp->status))
			return answer_ok(req, resp, err);
		if ((pause = try_again(g, &t, resp)) < 0)
			break;
		gcs_resp_clear(resp);
		gcs_stat_retry();
		rt_sleep(pause); /* a task yields its thread */
	}
	return call_failed(g, req, &t, resp, err);
}

/* The storage's time of answer R.  Every GCS answer has a Date; one
 * without (a proxy's, another endpoint's) has no time we may judge
 * expiry by: never our own clock, which may run ahead (gcs.h). */
int64_t
gs_now_of(const gcs_resp *r)
{
	return r->date_ms > 0 ? r->date_ms : GCS_NOW_UNKNOWN;
}

/* Parse a 2xx answer carrying one object into OUT. */
int
gs_answer_object(const gcs_resp *r, const char *op, gcs_object *out,
    gcs_err *err)
{
	json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
	int rc = GCS_OK;

	if (gs_parse_object(j, gs_now_of(r), out) != 0) {
		gcs_object_clear(out);
		rc = gcs_fail(err, GCS_UNAVAILABLE,
		    "Cloud Storage %s: malformed object in the answer", op);
	}
	json_decref(j);
	return rc;
}
