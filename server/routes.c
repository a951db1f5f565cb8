/*
 * routes.c: the routes of design section 2.  Each handler authenticates,
 * turns the request into a typed, validated api_* struct, calls the lock
 * service and answers.  No lease_id ever leaves here except in the answer
 * to the caller that holds it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "routes_int.h"
#include "metrics.h"
#include "events.h"
#include "web.h"
#include "util/clock.h"

static const char *const acquire_params[] = { "ttl", "wait", "holder",
	"purpose", "expected_duration", "labels", "lease_id", "limit", "mode",
	"format", NULL };
static const char *const refresh_params[] = { "lease_id", "ttl", "format",
	NULL };
static const char *const release_params[] = { "lease_id", "format", NULL };
static const char *const list_params[] = { "prefix", "page_size", "page_token",
	"include_expired", "format", NULL };
static const char *const force_params[] = { "fencing_token", "reason", "format",
	NULL };
const char *const routes_plain_params[] = { "format", NULL };
static const char *const events_params[] = { "max", "format", NULL };

bool
routes_is_get(const srv_req *r)
{
	return !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
}

enum MHD_Result
routes_bad_method(srv_req *r, const char *allowed)
{
	return http_fail(r, API_METHOD, NULL,
	    "use %s for this route, not %.10s", allowed, r->method);
}

/*
 * Authenticate for ACTION on NAME.  0 when the request may go on (with
 * r->id set, or anonymous for a public read); -1 when an answer was
 * queued, its result in *MR.
 */
int
routes_authenticate(srv_req *r, auth_action action, const char *name,
    enum MHD_Result *mr)
{
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_AUTHORIZATION);
	auth_refusal why;
	char msg[256];

	if (h == NULL && action == AUTH_READ && r->srv->cfg->public_read)
		return 0;
	memset(&why, 0, sizeof(why));
	if (auth_verify(r->srv->auth, h, &r->id, &why) != 0) {
		r->reason = why.reason;
		*mr = http_fail(r, API_UNAUTHORIZED,
		    why.reason ? why.reason : "unauthorized", "%s%s",
		    why.message[0] ? why.message
		                   : "a valid bearer token is "
		                     "required",
		    r->srv->cfg->dev_mode && why.reason != NULL &&
		            strcmp(why.reason, "bad_signature") == 0
		        ? " This is a development-mode lockgate, whose "
		          "secret is new at every start: get a fresh token "
		          "with `lockgate token --dev`."
		        : "");
		return -1;
	}
	r->have_id = true;
	api_copy(r->owner, sizeof(r->owner), r->id.owner);
	msg[0] = '\0';
	if (!auth_allowed(r->srv->auth, &r->id, action, name, msg,
	        sizeof(msg))) {
		*mr = http_fail(r, API_FORBIDDEN, "forbidden", "%s",
		    msg[0] ? msg : "this token may not do that");
		return -1;
	}
	return 0;
}

/* Answer with a lock (a lease when WITH_LEASE) as JSON. */
static enum MHD_Result
answer_lock(srv_req *r, int status, const api_lock *l, bool with_lease)
{
	json_t *j = api_lock_json(l, with_lease);

	if (j == NULL)
		return MHD_NO;
	return http_json(r, status, j);
}

/* Set the answer's format from F ("env" or "json"; NULL: not a string).
 * -1 when F is neither (answered, result in *MR). */
int
routes_format_pick(srv_req *r, const char *f, enum MHD_Result *mr)
{
	if (f == NULL || (strcmp(f, "env") != 0 && strcmp(f, "json") != 0)) {
		*mr = http_fail(r, API_BAD_REQUEST, "bad_format",
		    "format must be env or json");
		return -1;
	}
	r->env_format = strcmp(f, "env") == 0;
	return 0;
}

/* Parse the parameters against ALLOWED; a format in the body counts as
 * one in the query (routes_negotiate() saw only the query). */
int
routes_prepare(srv_req *r, const char *const *allowed, enum MHD_Result *mr)
{
	api_err err;
	json_t *f;

	memset(&err, 0, sizeof(err));
	if (params_prepare(&r->params, r->body, r->len, allowed, &err) != 0) {
		*mr = http_error(r, &err, NULL);
		return -1;
	}
	f = r->params.body ? json_object_get(r->params.body, "format") : NULL;
	if (f != NULL)
		return routes_format_pick(r, json_string_value(f), mr);
	return 0;
}

static void
wait_done(srv_waiter *w, void *ctx)
{
	srv_req *r = ctx;

	(void)w;
	http_resume(r);
}

enum MHD_Result
routes_finish_wait(srv_req *r)
{
	srv_waiter *w = &r->waiter;

	r->waiting = false;
	if (w->hung_up) {
		r->status = 499;
		return MHD_NO; /* nobody to answer */
	}
	if (w->rc == API_OK) {
		metrics_grant(r->acq.mode, r->acq.limit);
		return answer_lock(r, 200, &w->lock, true);
	}
	if (w->rc == API_SHUTTING_DOWN)
		return http_fail(r, API_SHUTTING_DOWN, NULL,
		    "this instance is shutting down; retry and another "
		    "instance will answer");
	if (w->err.code == API_OK)
		w->err.code = (api_code)w->rc;
	if (w->rc == API_LOCKED)
		metrics_lock_outcome("conflict");
	return http_error(r, &w->err, w->rc == API_LOCKED ? &w->lock : NULL);
}

static int
wait_allowed(srv_waiter *w, api_err *err)
{
	srv_req *r = w->ctx;

	return auth_still_allowed(r->srv->auth, &r->id, AUTH_ACQUIRE,
	    w->req->name, err);
}

/* Suspend R until the lock is granted, the wait runs out or we stop.  RC
 * and ERR (the holder, HOLDER, may be NULL) are the answer if it runs out
 * with nothing learnt since. */
static enum MHD_Result
start_wait(srv_req *r, int wait, api_lock *holder, int rc, const api_err *err)
{
	const union MHD_ConnectionInfo *ci;
	srv_waiter *w = &r->waiter;
	int added;

	w->req = &r->acq;
	w->done = wait_done;
	w->allowed = wait_allowed;
	w->ctx = r;
	w->loop = r->loop->io;
	ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	w->fd = ci ? ci->connect_fd : -1;
	w->start_ms = util_mono_ms();
	/* From the request's arrival: time its first attempt spent on a
	 * slow storage counts against the wait. */
	w->deadline_ms = r->start_us / 1000 + (int64_t)wait * 1000;
	w->rc = rc;
	w->err = *err;
	/* The first attempt failed on the storage: its insert may have
	 * been applied. */
	w->maybe_granted = rc == API_BUSY || rc == API_UNAVAILABLE;
	if (holder != NULL) {
		w->lock = *holder;
		memset(holder, 0, sizeof(*holder));
	}
	/* The waiter has the connection from here on, and resumes it (see
	 * srv_req): suspended before queueing, as a waiter granted at once
	 * resumes it, unless the task (which ends with this step) has done
	 * so already. */
	r->waiting = true;
	if (!r->kept)
		MHD_suspend_connection(r->conn);
	switch ((added = srv_waits_add(r->srv->waits, w))) {
	case SRV_WAITS_QUEUED:
		metrics_wait_start(r->acq.mode, r->acq.limit);
		break;
	case SRV_WAITS_FULL:
	case SRV_WAITS_OWNER_FULL:
		/* Answered at once, as Retry-After says: holding the
		 * connection is what the cap is there to prevent. */
		metrics_lock_outcome("too_many_waiters");
		api_lock_clear(&w->lock);
		w->rc = api_fail(&w->err, API_TOO_MANY,
		    "this instance has as many waiting requests as it takes%s; "
		    "retry later, or without wait",
		    added == SRV_WAITS_OWNER_FULL ? " from one owner" : "");
		w->err.reason = "too_many_waiters";
		w->err.retry_after = SRV_WAITERS_RETRY_AFTER;
		wait_done(w, r);
		break;
	default:
		w->rc = API_SHUTTING_DOWN;
		wait_done(w, r);
	}
	return MHD_YES;
}

/* The limit and mode of an acquire into Q; 0, or -1 with ERR. */
static int
acquire_kind(srv_req *r, api_acquire_req *q, api_err *err)
{
	char mode[16];
	long limit;
	int have;

	if (params_int(&r->params, "limit", 1, API_LIMIT_MAX, 1, &limit, err) ||
	    (have = params_str(&r->params, "mode", mode, sizeof(mode), err)) <
	        0)
		return -1;
	if (have == 0 || strcmp(mode, "exclusive") == 0)
		q->mode = API_MODE_EXCLUSIVE;
	else if (strcmp(mode, "shared") == 0)
		q->mode = API_MODE_SHARED;
	else {
		api_fail(err, API_BAD_REQUEST,
		    "mode must be exclusive or shared");
		err->reason = "bad_mode";
		return -1;
	}
	if (q->mode == API_MODE_SHARED && limit != 1) {
		api_fail(err, API_BAD_REQUEST,
		    "mode=shared takes no limit: any number of shared leases "
		    "may hold the lock at once (or one exclusive lease); "
		    "leave limit out");
		err->reason = "bad_limit";
		return -1;
	}
	q->limit = (int)limit;
	return 0;
}

/*
 * Whether Q is a retry that finds its own live lease by its client key
 * (its first attempt granted, the answer lost): it gets that lease at
 * once, as it would without waiters here, never queued behind them nor
 * held back behind a writer.  They wait for that very lease, which
 * nobody else hands out (give_back in wait.c never releases a keyed lease
 * a retry may have found), so queued it would hold the lock until its
 * TTL.
 */
static bool
retry_finds_own(srv_req *r, const api_acquire_req *q)
{
	return api_acquire_finds_own(r->srv->svc, q) == 1;
}

/* Writers do not starve: a reader asking without wait while a writer
 * waits here is refused (with wait it queues behind the writer), unless
 * it finds its own lease.  1 when refused (answered, result in *MR). */
static int
reader_held_back(srv_req *r, const api_acquire_req *q, enum MHD_Result *mr)
{
	if (q->mode != API_MODE_SHARED ||
	    !srv_waits_has_writer(r->srv->waits, q->name) ||
	    retry_finds_own(r, q))
		return 0;
	metrics_lock_outcome("conflict");
	*mr = http_fail(r, API_LOCKED, NULL,
	    "an exclusive acquire is waiting for this lock: new shared "
	    "leases wait behind it; retry, or ask with wait");
	return 1;
}

/* Queue R behind the waiters already queued for its lock, with no
 * attempt.  A lease too large to store is the caller's 400 now, not a
 * timeout later (api_acquire checks it on every attempt). */
static enum MHD_Result
wait_behind(srv_req *r)
{
	api_err err;

	if (api_acquire_check(&r->acq, &err) != API_OK)
		return http_error(r, &err, NULL);
	err.code = API_LOCKED;
	snprintf(err.message, sizeof(err.message),
	    "the lock is still held: the wait ran out");
	err.retry_after = 1;
	return start_wait(r, r->acq.wait, NULL, API_LOCKED, &err);
}

static enum MHD_Result
do_acquire(srv_req *r, const char *name)
{
	api_acquire_req *q = &r->acq;
	enum MHD_Result mr;
	api_lock lock;
	api_err err;
	long ttl, wait, expected;
	bool own = false;
	int rc;

	if (routes_authenticate(r, AUTH_ACQUIRE, name, &mr) != 0 ||
	    routes_prepare(r, acquire_params, &mr) != 0)
		return mr;
	memset(&err, 0, sizeof(err));
	api_copy(q->name, sizeof(q->name), name);
	api_copy(q->owner, sizeof(q->owner), r->id.owner);
	if (params_int(&r->params, "ttl", API_TTL_MIN, API_TTL_MAX,
	        API_TTL_DEFAULT, &ttl, &err) ||
	    params_int(&r->params, "wait", 0, r->srv->cfg->max_wait, 0, &wait,
	        &err) ||
	    params_int(&r->params, "expected_duration", 0, API_EXPECTED_MAX, 0,
	        &expected, &err) ||
	    params_str(&r->params, "holder", q->holder, sizeof(q->holder),
	        &err) < 0 ||
	    params_str(&r->params, "purpose", q->purpose, sizeof(q->purpose),
	        &err) < 0 ||
	    params_str(&r->params, "lease_id", q->key, sizeof(q->key), &err) <
	        0 ||
	    params_labels(&r->params, &q->labels, &err) ||
	    acquire_kind(r, q, &err))
		return http_error(r, &err, NULL);
	/* An acquire's lease_id is the client's idempotency key; the lease
	 * it is granted gets a lease_id of its own (api_acquire_prepare). */
	if (q->key[0] && !api_lease_id_valid(q->key))
		return http_fail(r, API_BAD_REQUEST, "bad_lease_id",
		    "a client lease_id must be 8 to 64 characters of "
		    "A-Z a-z 0-9 - _");
	q->ttl = (int)ttl;
	q->wait = (int)wait;
	q->expected_duration = (int)expected;
	if (r->id.display != NULL)
		q->claims = json_incref(r->id.display);
	/* Its lease_id, one for every attempt and waiter poll (never
	 * logged; shown only in the answer that grants it), and new for
	 * every request, so that no two grants share one. */
	api_acquire_prepare(q);

	/* First come, first served: behind waiters already queued here,
	 * unless it is a retry that finds its own lease. */
	if (wait > 0 && srv_waits_has(r->srv->waits, name) &&
	    !srv_draining(r->srv) && !(own = retry_finds_own(r, q)))
		return wait_behind(r);
	if (!own && reader_held_back(r, q, &mr))
		return mr;
	rc = api_acquire(r->srv->svc, q, &lock, &err);
	if (rc == API_OK) {
		metrics_grant(q->mode, q->limit);
		mr = answer_lock(r, 200, &lock, true);
		api_lock_clear(&lock);
		return mr;
	}
	/* A waiter also waits out storage trouble (a 429 that outlived the
	 * store's retries, an outage): its lock's task tries again until the wait
	 * runs out, and then this error is the answer. */
	if ((rc == API_LOCKED || rc == API_BUSY || rc == API_UNAVAILABLE) &&
	    wait > 0 && !srv_draining(r->srv))
		return start_wait(r, (int)wait, rc == API_LOCKED ? &lock : NULL,
		    rc, &err);
	if (rc == API_LOCKED)
		metrics_lock_outcome("conflict");
	mr = http_error(r, &err, rc == API_LOCKED ? &lock : NULL);
	api_lock_clear(&lock);
	return mr;
}

/* The lease_id and ttl of a refresh or release. */
static int
lease_params(srv_req *r, const char *name, bool with_ttl, api_lease_req *q,
    enum MHD_Result *mr)
{
	char why[200];
	api_err err;
	long ttl = 0;
	int have;

	memset(q, 0, sizeof(*q));
	memset(&err, 0, sizeof(err));
	api_copy(q->name, sizeof(q->name), name);
	api_copy(q->owner, sizeof(q->owner), r->id.owner);
	/* Who may refresh or release another owner's lease: an admin, as
	 * the policy says when there is one (the claim alone is not). */
	q->admin = auth_allowed(r->srv->auth, &r->id, AUTH_ADMIN, name, why,
	               sizeof(why)) != 0;
	have = params_str(&r->params, "lease_id", q->lease_id,
	    sizeof(q->lease_id), &err);
	if (have < 0 ||
	    (with_ttl &&
	        params_int(&r->params, "ttl", API_TTL_MIN, API_TTL_MAX, 0, &ttl,
	            &err))) {
		*mr = http_error(r, &err, NULL);
		return -1;
	}
	if (have == 0) {
		*mr = http_fail(r, API_BAD_REQUEST, "missing_lease_id",
		    "this request needs the lease_id that acquire returned");
		return -1;
	}
	if (!api_lease_id_valid(q->lease_id)) {
		*mr = http_fail(r, API_BAD_REQUEST, "bad_lease_id",
		    "a lease_id is 8 to 64 characters of A-Z a-z 0-9 - _");
		return -1;
	}
	q->ttl = (int)ttl;
	return 0;
}

static enum MHD_Result
do_refresh(srv_req *r, const char *name)
{
	enum MHD_Result mr;
	api_lease_req q;
	api_lock lock;
	api_err err;

	if (routes_authenticate(r, AUTH_ACQUIRE, name, &mr) != 0 ||
	    routes_prepare(r, refresh_params, &mr) != 0 ||
	    lease_params(r, name, true, &q, &mr) != 0)
		return mr;
	if (api_refresh(r->srv->svc, &q, &lock, &err) != API_OK)
		return http_error(r, &err, NULL);
	mr = answer_lock(r, 200, &lock, true);
	api_lock_clear(&lock);
	return mr;
}

static enum MHD_Result
do_release(srv_req *r, const char *name)
{
	enum MHD_Result mr;
	api_lease_req q;
	api_err err;

	if (routes_authenticate(r, AUTH_ACQUIRE, name, &mr) != 0 ||
	    routes_prepare(r, release_params, &mr) != 0 ||
	    lease_params(r, name, false, &q, &mr) != 0)
		return mr;
	if (api_release(r->srv->svc, &q, &err) != API_OK)
		return http_error(r, &err, NULL);
	return http_json(r, 204, NULL);
}

static enum MHD_Result
do_force(srv_req *r, const char *name)
{
	enum MHD_Result mr;
	api_err err;
	long token;
	char reason[API_REASON_MAX + 1];

	memset(&err, 0, sizeof(err));
	if (routes_authenticate(r, AUTH_ADMIN, name, &mr) != 0 ||
	    routes_prepare(r, force_params, &mr) != 0)
		return mr;
	/* The fencing token of the lease the admin saw: only that one is
	 * removed (0, the default: whichever holds it).  The reason, text
	 * of at most API_REASON_MAX bytes, goes to the log line and event. */
	if (params_int(&r->params, "fencing_token", 1, INT64_MAX, 0, &token,
	        &err) ||
	    params_str(&r->params, "reason", reason, sizeof(reason), &err) < 0)
		return http_error(r, &err, NULL);
	if (api_force_release(r->srv->svc, name, r->id.owner, reason, token,
	        &err) != API_OK)
		return http_error(r, &err, NULL);
	return http_json(r, 204, NULL);
}

static enum MHD_Result
do_inspect(srv_req *r, const char *name)
{
	enum MHD_Result mr;
	api_lock lock;
	api_err err;

	if (routes_authenticate(r, AUTH_READ, name, &mr) != 0 ||
	    routes_prepare(r, routes_plain_params, &mr) != 0)
		return mr;
	if (api_inspect(r->srv->svc, name, &lock, &err) != API_OK) {
		api_lock_clear(&lock);
		return http_error(r, &err, NULL);
	}
	mr = answer_lock(r, 200, &lock, false);
	api_lock_clear(&lock);
	return mr;
}

/* The timeline of recent events this instance saw for NAME. */
static enum MHD_Result
do_events(srv_req *r, const char *name)
{
	enum MHD_Result mr;
	api_err err;
	long limit;

	memset(&err, 0, sizeof(err));
	if (routes_authenticate(r, AUTH_READ, name, &mr) != 0 ||
	    routes_prepare(r, events_params, &mr) != 0)
		return mr;
	if (params_int(&r->params, "max", 1, SRV_EVENTS_ANSWER_MAX,
	        SRV_EVENTS_ANSWER_MAX, &limit, &err))
		return http_error(r, &err, NULL);
	return http_json(r, 200, srv_events_json(name, (size_t)limit));
}

static int
prefix_valid(const char *p)
{
	for (; *p; p++) {
		int c = (unsigned char)*p;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		        c == '-' || c == '/'))
			return 0;
	}
	return 1;
}

/* Whether the caller of the list request CTX may read the lock NAME (a
 * policy may allow reading prod/ and not staging/). */
static bool
list_visible(void *ctx, const char *name)
{
	srv_req *r = ctx;
	char why[200];

	return !r->have_id ||
	    auth_allowed(r->srv->auth, &r->id, AUTH_READ, name, why,
	        sizeof(why));
}

/* A weak validator of the page's content, "now" excluded. */
static void
etag_of(const char *text, char *out, size_t len)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *text; text++)
		h = (h ^ (unsigned char)*text) * 1099511628211ULL;
	snprintf(out, len, "W/\"%016" PRIx64 "\"", h);
}

/* long: parse, call, and write three answer formats (json, text, env); split
 * pending (issue 21) */
static enum MHD_Result
do_list(srv_req *r)
{
	enum MHD_Result mr;
	api_list_req q;
	api_list_res res;
	api_err err;
	json_t *locks, *body;
	char *text, etag[40], now[40];
	const char *inm;
	struct MHD_Response *resp;
	size_t i;
	long size;

	memset(&q, 0, sizeof(q));
	memset(&err, 0, sizeof(err));
	if (routes_prepare(r, list_params, &mr) != 0)
		return mr;
	if (params_str(&r->params, "prefix", q.prefix, sizeof(q.prefix), &err) <
	        0 ||
	    params_str(&r->params, "page_token", q.page_token,
	        sizeof(q.page_token), &err) < 0 ||
	    params_int(&r->params, "page_size", 1, API_PAGE_SIZE_MAX,
	        API_PAGE_SIZE_DEFAULT, &size, &err) ||
	    params_bool(&r->params, "include_expired", false,
	        &q.include_expired, &err))
		return http_error(r, &err, NULL);
	if (!prefix_valid(q.prefix))
		return http_fail(r, API_BAD_REQUEST, "bad_prefix",
		    "a prefix may only hold A-Z a-z 0-9 . _ - /");
	/* A page token is the last lock name of the previous page. */
	if (!prefix_valid(q.page_token))
		return http_fail(r, API_BAD_REQUEST, "bad_page_token",
		    "the page_token is not one this server handed out");
	q.page_size = (int)size;
	if (routes_authenticate(r, AUTH_READ, NULL, &mr) != 0)
		return mr;
	q.visible = list_visible;
	q.visible_ctx = r;
	if (api_list(r->srv->svc, &q, &res, &err) != API_OK)
		return http_error(r, &err, NULL);
	locks = json_array();
	for (i = 0; locks != NULL && i < res.n; i++)
		json_array_append_new(locks,
		    api_lock_json(&res.locks[i], false));
	body = json_pack("{s:o, s:s?}", "locks", locks, "next_page_token",
	    res.next_page_token);
	if (body != NULL && res.next_page_token == NULL)
		json_object_set_new(body, "next_page_token", json_null());
	if (body != NULL && r->env_format) {
		/* lockctl list: KEY='value' lines, no ETag. */
		api_list_res_clear(&res);
		return http_json(r, 200, body);
	}
	/* Expiry states are part of the content; "now" is not. */
	text = body ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (text == NULL) {
		json_decref(body);
		api_list_res_clear(&res);
		return MHD_NO;
	}
	etag_of(text, etag, sizeof(etag));
	free(text);
	api_time_str(res.now_ms, now, sizeof(now));
	api_list_res_clear(&res);
	inm = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_IF_NONE_MATCH);
	if (inm != NULL && strcmp(inm, etag) == 0) {
		json_decref(body);
		resp = MHD_create_response_from_buffer(0, (void *)"",
		    MHD_RESPMEM_PERSISTENT);
		if (resp == NULL)
			return MHD_NO;
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
		MHD_add_response_header(resp, "Cache-Control", "no-store");
		return http_send(r, 304, resp);
	}
	json_object_set_new(body, "now", json_string(now));
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (text == NULL)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(strlen(text), text,
	    MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	return http_send(r, 200, resp);
}

/* The routing table: what is served is exactly what is listed here, and
 * `lockgate --routes` prints it for the OpenAPI test. */
typedef enum MHD_Result (*fixed_fn)(srv_req *r);
typedef enum MHD_Result (*lock_fn)(srv_req *r, const char *name);

static const struct fixed_route {
	const char *path;
	const char *method;
	const char *route; /* its name in logs and metrics */
	fixed_fn fn;
} fixed_routes[] = {
	{ "/v1/locks", "GET", "list", do_list },
	{ "/v1/whoami", "GET", "whoami", routes_whoami },
	{ "/healthz", "GET", "healthz", routes_healthz },
	{ "/readyz", "GET", "readyz", routes_readyz },
	{ "/metrics", "GET", "metrics", routes_metrics },
};

static const struct lock_route {
	const char *verb; /* after "/v1/locks/{name}:"; NULL = none */
	const char *method;
	lock_fn fn;
} lock_routes[] = {
	{ NULL, "GET", do_inspect },
	{ "acquire", "POST", do_acquire },
	{ "refresh", "POST", do_refresh },
	{ "release", "POST", do_release },
	{ "forceRelease", "POST", do_force },
	{ "events", "GET", do_events },
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static bool
method_is(const srv_req *r, const char *method)
{
	return !strcmp(method, "GET") ? routes_is_get(r)
	                              : !strcmp(r->method, method);
}

static enum MHD_Result
lock_route(srv_req *r, const char *rest)
{
	char name[API_NAME_MAX + 1], why[128];
	const char *colon, *verb;
	size_t nlen, i;

	colon = strchr(rest, ':');
	nlen = colon ? (size_t)(colon - rest) : strlen(rest);
	verb = colon ? colon + 1 : NULL;
	if (nlen > API_NAME_MAX)
		return http_fail(r, API_BAD_REQUEST, "bad_name",
		    "the lock name is longer than 256 bytes");
	memcpy(name, rest, nlen);
	name[nlen] = '\0';
	if (strchr(name, '%') != NULL)
		return http_fail(r, API_BAD_REQUEST, "bad_name",
		    "a lock name is sent as it is, never percent-encoded: "
		    "it holds only A-Z a-z 0-9 . _ - /");
	if (!api_name_valid(name, why, sizeof(why)))
		return http_fail(r, API_BAD_REQUEST, "bad_name", "%s", why);
	api_copy(r->lock, sizeof(r->lock), name);
	for (i = 0; i < NELEM(lock_routes); i++) {
		const struct lock_route *lr = &lock_routes[i];
		if (verb == NULL
		        ? lr->verb != NULL
		        : lr->verb == NULL || strcmp(lr->verb, verb) != 0)
			continue;
		/* The verb names the route in logs and metrics. */
		r->route = lr->verb ? lr->verb : "inspect";
		if (!method_is(r, lr->method))
			return routes_bad_method(r, lr->method);
		return lr->fn(r, name);
	}
	return http_fail(r, API_NOT_FOUND, "unknown_verb",
	    "unknown verb ':%.32s' (use acquire, refresh, release, "
	    "forceRelease or events)",
	    verb);
}

/*
 * The path is matched as it was sent, never decoded: a route is spelled
 * one way only, so "/%6detrics" is not /metrics and a proxy that filters
 * by path sees what is served.  No lock name needs encoding (design
 * section 2), so an encoded character in one is a bad_name.
 */
enum MHD_Result
routes_dispatch(srv_req *r)
{
	const char *path = r->path;
	enum MHD_Result mr;
	size_t i;

	if (!strncmp(path, "/v1/", 4) && routes_negotiate(r, &mr) != 0)
		return mr;
	for (i = 0; i < NELEM(fixed_routes); i++) {
		if (strcmp(path, fixed_routes[i].path) != 0)
			continue;
		r->route = fixed_routes[i].route;
		if (!method_is(r, fixed_routes[i].method))
			return routes_bad_method(r, fixed_routes[i].method);
		return fixed_routes[i].fn(r);
	}
	if (!strncmp(path, "/v1/locks/", 10))
		return lock_route(r, path + 10);
	if (!strncmp(path, "/v1/", 4))
		return http_fail(r, API_NOT_FOUND, NULL,
		    "no such route; see /v1/locks");
	return routes_asset(r, path);
}

void
srv_routes_print(void)
{
	const srv_asset *a;
	size_t i;

	for (i = 0; i < NELEM(fixed_routes); i++)
		printf("%s %s\n", fixed_routes[i].method, fixed_routes[i].path);
	for (i = 0; i < NELEM(lock_routes); i++)
		printf("%s /v1/locks/{name}%s%s\n", lock_routes[i].method,
		    lock_routes[i].verb ? ":" : "",
		    lock_routes[i].verb ? lock_routes[i].verb : "");
	printf("GET /\n");
	for (a = srv_assets; a->path != NULL; a++)
		printf("GET %s\n", a->path);
}
