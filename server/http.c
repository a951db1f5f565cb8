/*
 * http.c: libmicrohttpd plumbing: how a request runs (a task of its loop),
 * answers, the per-request state and log line.
 * Connections and their limits are http_conn.c's, reading a request's
 * head http_read.c's, starting and stopping http_loop.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_int.h"
#include "events.h"
#include "format_env.h"
#include "metrics.h"
#include "util/clock.h"

enum MHD_Result
http_send(srv_req *r, int status, struct MHD_Response *resp)
{
	enum MHD_Result rc;

	if (resp == NULL)
		return MHD_NO;
	r->status = status;
	if (r->kept) {
		/* Queued by the handler after the resume. */
		if (r->kept_resp != NULL)
			MHD_destroy_response(r->kept_resp);
		r->kept_resp = resp;
		r->kept_status = status;
		return MHD_YES;
	}
	rc = MHD_queue_response(r->conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return rc;
}

static enum MHD_Result
queue(srv_req *r, int status, struct MHD_Response *resp)
{
	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (r->close) /* libmicrohttpd closes the connection after it */
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION,
		    "close");
	return http_send(r, status, resp);
}

/* The loop whose thread this is; NULL on any other thread. */
__thread srv_loop *http_tl_loop;

void
http_resume(srv_req *r)
{
	srv_loop *lp = r->loop; /* R may be gone once resumed */

	MHD_resume_connection(r->conn);
	/* The daemon takes a resumed connection back in its next run, and
	 * in external mode nothing tells the loop that one is due: on the
	 * loop's own thread, say so; from another thread (a waiter), wake
	 * it. */
	__atomic_store_n(&lp->run_again, 1, __ATOMIC_SEQ_CST);
	if (lp != http_tl_loop)
		rt_loop_wake(lp->io);
}

/* ---- a request's task ---- */

static void
task_body(void *arg)
{
	srv_req *r = arg;

	r->task_rc = routes_dispatch(r);
}

/* The task ended after it had waited (so the connection is suspended):
 * resume the connection for its kept answer, unless a waiter has it. */
static void
task_done(void *arg)
{
	srv_req *r = arg;

	r->kept = false;
	if (r->waiting)
		return;
	r->ended = true;
	http_resume(r);
}

/*
 * Run R as a task of this thread's loop.  The task starts at once, on
 * this call: a request that needs no wait (mem://, an error, a cached
 * answer) is answered within it, exactly as if run inline, its connection
 * never suspended.  When the task first waits (a storage answer, a
 * file:// commit, a JWKS fetch), the connection is suspended; its answers
 * from then on are kept and queued once task_done resumes it.
 */
static enum MHD_Result
task_submit(srv_req *r)
{
	int rc;

	rc = rt_loop_spawn(r->loop->io, task_body, r, task_done);
	if (rc == 1)
		return r->task_rc;
	if (rc < 0)
		return http_fail(r, API_UNAVAILABLE, NULL,
		    "out of memory for this request; retry");
	/* Not waiting for a lock yet (start_wait is the task's last step,
	 * and it has not ended): the connection is the task's alone. */
	r->kept = true;
	MHD_suspend_connection(r->conn);
	return MHD_YES;
}

/* In the handler, after task_done resumed R: queue its answer. */
static enum MHD_Result
task_finish(srv_req *r)
{
	struct MHD_Response *resp = r->kept_resp;
	enum MHD_Result rc;

	r->ended = false;
	if (resp == NULL)
		return MHD_NO; /* the handler failed without an answer */
	r->kept_resp = NULL;
	rc = MHD_queue_response(r->conn, (unsigned)r->kept_status, resp);
	MHD_destroy_response(resp);
	return rc == MHD_YES ? r->task_rc : MHD_NO;
}

enum MHD_Result
http_text(srv_req *r, int status, const char *ctype, const void *data,
    size_t len, bool copy)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_buffer(len, (void *)data,
	    copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	if (resp == NULL)
		return MHD_NO;
	if (ctype != NULL)
		MHD_add_response_header(resp, "Content-Type", ctype);
	return queue(r, status, resp);
}

/* Answer BODY (stolen) as KEY='value' lines. */
static enum MHD_Result
env_answer(srv_req *r, int status, json_t *body, int retry_after)
{
	struct MHD_Response *resp;
	char *text = srv_env_format(body), ra[16];

	json_decref(body);
	if (text == NULL)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(strlen(text), text,
	    MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type",
	    "text/plain; charset=utf-8");
	if (retry_after > 0) {
		snprintf(ra, sizeof(ra), "%d", retry_after);
		MHD_add_response_header(resp, "Retry-After", ra);
	}
	if (status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
	return queue(r, status, resp);
}

enum MHD_Result
http_body(srv_req *r, int status, const char *ctype, char *text, size_t len)
{
	struct MHD_Response *resp;

	resp =
	    MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	return queue(r, status, resp);
}

enum MHD_Result
http_json(srv_req *r, int status, json_t *body)
{
	struct MHD_Response *resp;
	char *text = NULL;
	size_t len = 0;

	if (body != NULL && r->env_format)
		return env_answer(r, status, body, 0);
	if (body != NULL) {
		text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		if (text == NULL)
			return MHD_NO;
		len = strlen(text);
		text[len] = '\n';
		len++;
	}
	resp = MHD_create_response_from_buffer(len, text ? text : (void *)"",
	    text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (resp == NULL) {
		free(text);
		return MHD_NO;
	}
	if (body != NULL)
		MHD_add_response_header(resp, "Content-Type",
		    "application/json");
	return queue(r, status, resp);
}

enum MHD_Result
http_error(srv_req *r, const api_err *err, const api_lock *lock)
{
	struct MHD_Response *resp;
	json_t *body, *e;
	char *text, ra[16], msg[sizeof(err->message)];
	int status = api_code_status(err->code);
	size_t len;

	/* A message quoting a caller's text may have been cut in the middle
	 * of a character; JSON carries only text. */
	api_copy(msg, sizeof(msg), err->message);
	api_utf8_scrub(msg);
	e = json_pack("{s:s, s:s}", "code",
	    err->reason ? err->reason : api_code_reason(err->code), "message",
	    msg);
	if (e != NULL && lock != NULL && lock->name[0] != '\0')
		json_object_set_new(e, "lock", api_lock_json(lock, false));
	body = json_pack("{s:o}", "error", e);
	if (body == NULL)
		return MHD_NO;
	if (status >= 500) /* the log line says why, in full */
		api_copy(r->error, sizeof(r->error), api_err_detail(err));
	if (r->env_format)
		return env_answer(r, status, body,
		    status == 409 || status == 503
		        ? (err->retry_after > 0 ? err->retry_after : 1)
		        : 0);
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (text == NULL)
		return MHD_NO;
	len = strlen(text);
	text[len++] = '\n';
	resp =
	    MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	if (status == 409 || status == 429 || status == 503) {
		snprintf(ra, sizeof(ra), "%d",
		    err->retry_after > 0 ? err->retry_after : 1);
		MHD_add_response_header(resp, "Retry-After", ra);
	}
	if (status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
	return queue(r, status, resp);
}

enum MHD_Result
http_fail(srv_req *r, api_code code, const char *reason, const char *fmt, ...)
{
	api_err err;
	va_list ap;

	memset(&err, 0, sizeof(err));
	err.code = code;
	err.reason = reason;
	if (code == API_BUSY || code == API_UNAVAILABLE ||
	    code == API_SHUTTING_DOWN || code == API_LOCKED)
		err.retry_after = 1;
	va_start(ap, fmt);
	vsnprintf(err.message, sizeof(err.message), fmt, ap);
	va_end(ap);
	return http_error(r, &err, NULL);
}

/* The query string of a connection, for params.c. */
static const char *
mhd_query(void *ctx, const char *key)
{
	const char *v;

	if (MHD_lookup_connection_value_n(ctx, MHD_GET_ARGUMENT_KIND, key,
	        strlen(key), &v, NULL) != MHD_YES)
		return NULL;
	return v ? v : "";
}

typedef struct visit {
	params_visit_fn fn;
	void *arg;
} visit;

static enum MHD_Result
mhd_visit(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	visit *v = cls;

	(void)kind;
	return v->fn(v->arg, key, value) ? MHD_NO : MHD_YES;
}

static void
mhd_each(void *ctx, params_visit_fn fn, void *arg)
{
	visit v = { fn, arg };

	MHD_get_connection_values(ctx, MHD_GET_ARGUMENT_KIND, mhd_visit, &v);
}

/*
 * Cloud Logging groups a request's lines by trace: take TRACE_ID from
 * "X-Cloud-Trace-Context: TRACE_ID/SPAN_ID;o=1" and the project from the
 * environment.
 */
static void
trace_of(struct MHD_Connection *conn, char *out, size_t len)
{
	const char *h, *project;
	size_t n;

	out[0] = '\0';
	h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    "X-Cloud-Trace-Context");
	if (h == NULL)
		return;
	n = strspn(h, "0123456789abcdefABCDEF");
	if (n == 0 || n > 64)
		return;
	project = getenv("GOOGLE_CLOUD_PROJECT");
	if (project != NULL && project[0] != '\0' && strlen(project) < 64)
		snprintf(out, len, "projects/%s/traces/%.*s", project, (int)n,
		    h);
	else
		snprintf(out, len, "%.*s", (int)n, h);
}

/* A zeroed request, from this loop's spares when it has one. */
static srv_req *
req_new(void)
{
	srv_loop *lp = http_tl_loop;
	srv_req *r;

	if (lp == NULL || lp->spare == NULL)
		return calloc(1, sizeof(srv_req));
	r = lp->spare;
	lp->spare = r->spare_next;
	lp->nspare--;
	memset(r, 0, sizeof(*r));
	return r;
}

/* R is done with: kept as a spare by the loop that runs this thread. */
static void
req_free(srv_req *r)
{
	srv_loop *lp = http_tl_loop;

	if (lp == NULL || lp->nspare >= SRV_REQ_SPARE) {
		free(r);
		return;
	}
	r->spare_next = lp->spare;
	lp->spare = r;
	lp->nspare++;
}

/* The arguments of TARGET, counted as libmicrohttpd splits them: on '&'
 * after the '?', empty ones included (0 without a '?'). */
size_t
http_query_args(const char *target)
{
	const char *q = strchr(target, '?');
	size_t n = 1;

	if (q == NULL)
		return 0;
	for (q++; *q != '\0'; q++)
		if (*q == '&' && ++n > SRV_QUERY_ARGS_MAX)
			break;
	return n;
}

/* Read nothing more from CONN's client: what is in already is still read
 * and answered, and the connection closes then (or at once, with nothing
 * left to read). */
void
http_stop_reading(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci != NULL)
		shutdown(ci->connect_fd, SHUT_RD);
}

/* A request for CONN, from its first call of the handler; NULL when out
 * of memory. */
static srv_req *
req_start(srv_server *s, struct MHD_Connection *conn, const srv_target *t,
    const char *method)
{
	srv_req *r = req_new();

	if (r == NULL)
		return NULL;
	r->srv = s;
	r->loop = http_tl_loop;
	r->conn = conn;
	memcpy(r->path, t->path, sizeof(r->path));
	r->method = method;
	r->start_us = util_mono_us();
	r->route = "other";
	r->waiter.fd = -1;
	r->params.query = mhd_query;
	r->params.each = mhd_each;
	r->params.ctx = conn;
	__atomic_add_fetch(&s->active, 1, __ATOMIC_SEQ_CST);
	trace_of(conn, r->trace, sizeof(r->trace));
	return r;
}

enum MHD_Result
http_access_handler(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	srv_server *s = cls;
	srv_req *r = *con_cls;
	srv_target *t;

	if (r == NULL) {
		if ((t = http_target_of(conn)) == NULL ||
		    (r = req_start(s, conn, t, method)) == NULL)
			return MHD_NO; /* out of memory: close */
		t->head_by = 0;        /* the head is in */
		t->head_begun = false;
		*con_cls = r;
		return http_req_begin(r, t, method, url, version);
	}
	if (r->waiting)
		return routes_finish_wait(r);
	if (r->ended)
		return task_finish(r);
	if (*upload_data_size > 0) {
		size_t add = *upload_data_size;

		*upload_data_size = 0;
		if (r->too_large || r->len + add > SRV_BODY_MAX) {
			r->too_large = true;
			return MHD_YES; /* read and drop the rest */
		}
		if (r->len + add + 1 > r->cap) {
			size_t ncap = r->cap ? r->cap : 1024;
			char *nb;
			while (ncap < r->len + add + 1)
				ncap *= 2;
			if ((nb = realloc(r->body, ncap)) == NULL)
				return MHD_NO;
			r->body = nb;
			r->cap = ncap;
		}
		memcpy(r->body + r->len, upload_data, add);
		r->len += add;
		r->body[r->len] = '\0';
		return MHD_YES;
	}
	if (r->too_large)
		return http_fail(r, API_TOO_LARGE, NULL,
		    "the request body is larger than %d bytes", SRV_BODY_MAX);
	return task_submit(r);
}

void
http_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	srv_server *s = cls;
	srv_req *r = *con_cls;
	srv_target *t = http_target_of(conn);
	double secs;

	/* The next head on this connection, if any, is due within the idle
	 * timeout (libmicrohttpd's own) plus the head timeout. */
	if (t != NULL) {
		t->served = true;
		t->head_by = util_mono_ms() +
		    (int64_t)(s->cfg->connection_timeout +
		        s->cfg->head_timeout) *
		        1000;
	}
	if (r == NULL) /* the client left before its head was in */
		return;
	secs = (double)(util_mono_us() - r->start_us) / 1e6;
	if (r->status == 0 && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		r->status = 499; /* the client left before an answer */
	/* Waiters leave in thousands when a flood ends: counted and logged
	 * in aggregate, not a line each. */
	if (r->waiter.hung_up)
		srv_drop(SRV_DROP_WAITER, 1);
	else
		srv_log_request(r->status >= 500 ? "ERROR" : "INFO", r->method,
		    r->route, r->status, secs * 1000.0, r->lock, r->owner,
		    r->reason, r->error, r->trace);
	metrics_http(r->route, r->status, secs);
	params_clear(&r->params);
	if (r->kept_resp != NULL)
		MHD_destroy_response(r->kept_resp);
	json_decref(r->acq.labels);
	json_decref(r->acq.claims);
	api_lock_clear(&r->waiter.lock);
	if (r->have_id)
		auth_identity_clear(&r->id);
	free(r->body);
	req_free(r);
	*con_cls = NULL;
	__atomic_sub_fetch(&s->active, 1, __ATOMIC_SEQ_CST);
}
