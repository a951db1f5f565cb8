/*
 * http.c: libmicrohttpd plumbing: the daemon and its limits, reading a
 * request body incrementally under a cap, answers, the per-request log
 * line, graceful shutdown.
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
	if (r->in_job) {
		/* Queued by the polling thread after the resume. */
		if (r->job_resp != NULL)
			MHD_destroy_response(r->job_resp);
		r->job_resp = resp;
		r->job_status = status;
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
static __thread srv_loop *tl_loop;

void
http_release_hold(srv_req *r)
{
	struct MHD_Connection *conn = r->conn;
	srv_loop *lp = r->loop; /* R may be gone once resumed */

	if (__atomic_sub_fetch(&r->holds, 1, __ATOMIC_SEQ_CST) != 0)
		return;
	MHD_resume_connection(conn);
	/* The daemon takes a resumed connection back in its next run, and
	 * in external mode nothing tells the loop that one is due: on the
	 * loop's own thread, say so; from another thread (a waiter, a
	 * storage worker), wake it. */
	__atomic_store_n(&lp->run_again, 1, __ATOMIC_SEQ_CST);
	if (lp != tl_loop)
		rt_loop_wake(lp->io);
}

/* ---- storage workers ---- */

/* Whether PATH may call the storage (so runs on a worker). */
static bool
blocking_route(const char *path)
{
	return strncmp(path, "/v1/", 4) == 0 || strcmp(path, "/readyz") == 0;
}

static void
job_run(srv_req *r)
{
	r->job_rc = routes_dispatch(r);
	r->in_job = false;
	r->job_done = true;
	http_release_hold(r);
}

/* A worker: runs queued requests, else waits idle to be handed one. */
static void *
job_main(void *arg)
{
	srv_worker *w = arg;
	srv_jobs *j = w->jobs;
	srv_req *r;

	/* A worker runs one request at a time: it may wait for a JWKS
	 * re-fetch (a few workers at once, at most). */
	auth_thread_may_wait(true);
	pthread_mutex_lock(&j->mu);
	for (;;) {
		if ((r = j->head) != NULL) {
			j->head = r->job_next;
			if (j->head == NULL)
				j->tail = NULL;
			pthread_mutex_unlock(&j->mu);
			job_run(r);
			pthread_mutex_lock(&j->mu);
			continue;
		}
		if (j->stop)
			break;
		w->idle = j->idle;
		j->idle = w;
		pthread_mutex_unlock(&j->mu);
		while (sem_wait(&w->go) != 0)
			;
		if ((r = w->req) != NULL) {
			w->req = NULL;
			job_run(r);
		}
		pthread_mutex_lock(&j->mu);
	}
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

/* Suspend R and hand it to a worker (an idle one directly, else the
 * queue); run it here once the workers have stopped (a keep-alive request
 * during the last moments of a drain). */
static enum MHD_Result
job_submit(srv_jobs *j, srv_req *r)
{
	srv_worker *w;

	pthread_mutex_lock(&j->mu);
	if (j->stop) {
		pthread_mutex_unlock(&j->mu);
		return routes_dispatch(r);
	}
	r->in_job = true;
	r->holds = 1;
	MHD_suspend_connection(r->conn);
	if ((w = j->idle) != NULL) {
		j->idle = w->idle;
		w->req = r;
		pthread_mutex_unlock(&j->mu);
		sem_post(&w->go);
		return MHD_YES;
	}
	r->job_next = NULL;
	if (j->tail != NULL)
		j->tail->job_next = r;
	else
		j->head = r;
	j->tail = r;
	pthread_mutex_unlock(&j->mu);
	return MHD_YES;
}

/* ---- loop tasks (gs://) ---- */

static void
task_body(void *arg)
{
	srv_req *r = arg;

	r->job_rc = routes_dispatch(r);
}

/* The task ended: as a worker's request ends (job_run). */
static void
task_done(void *arg)
{
	srv_req *r = arg;

	r->in_job = false;
	r->job_done = true;
	http_release_hold(r);
}

/*
 * Run R as a task of this thread's loop.  The task starts at once, on
 * this call: a request that needs no storage wait (mem://, an error, a
 * cached answer) is answered within it, exactly as if run inline, its
 * connection never suspended.  Only when the task first waits is the
 * connection suspended and held for it, as for a storage worker; its
 * answers from then on are kept and queued after task_done resumes it.
 */
static enum MHD_Result
task_submit(srv_req *r)
{
	int rc;

	rc = rt_loop_spawn(r->loop->io, task_body, r, task_done);
	if (rc == 1)
		return r->job_rc;
	if (rc < 0)
		return http_fail(r, API_UNAVAILABLE, NULL,
		    "out of memory for this request; retry");
	/* Not waiting yet (a wait ends the handler, so the task cannot have
	 * started one before its first yield): the task holds the
	 * connection alone. */
	r->in_job = true;
	r->holds = 1;
	MHD_suspend_connection(r->conn);
	return MHD_YES;
}

/* On the polling thread, after the worker resumed R: queue its answer. */
static enum MHD_Result
job_finish(srv_req *r)
{
	struct MHD_Response *resp = r->job_resp;
	enum MHD_Result rc;

	r->job_done = false;
	if (resp == NULL)
		return MHD_NO; /* the handler failed without an answer */
	r->job_resp = NULL;
	rc = MHD_queue_response(r->conn, (unsigned)r->job_status, resp);
	MHD_destroy_response(resp);
	return rc == MHD_YES ? r->job_rc : MHD_NO;
}

static void jobs_free(srv_jobs *j);

static srv_jobs *
jobs_new(int n)
{
	srv_jobs *j = calloc(1, sizeof(*j));
	srv_worker *w;

	if (j == NULL)
		return NULL;
	pthread_mutex_init(&j->mu, NULL);
	j->workers = calloc((size_t)n, sizeof(*j->workers));
	if (j->workers == NULL) {
		jobs_free(j);
		return NULL;
	}
	for (; j->nworkers < n; j->nworkers++) {
		w = &j->workers[j->nworkers];
		w->jobs = j;
		sem_init(&w->go, 0, 0);
		if (pthread_create(&w->thread, NULL, job_main, w) != 0) {
			sem_destroy(&w->go);
			jobs_free(j);
			return NULL;
		}
	}
	return j;
}

/* Stop the workers once they have run every queued request.  Later
 * requests run on the polling threads. */
static void
jobs_stop(srv_jobs *j)
{
	srv_worker *w;
	int i;

	pthread_mutex_lock(&j->mu);
	j->stop = true;
	while ((w = j->idle) != NULL) {
		j->idle = w->idle;
		sem_post(&w->go); /* with no request: look again, and stop */
	}
	pthread_mutex_unlock(&j->mu);
	for (i = 0; i < j->nworkers; i++) {
		pthread_join(j->workers[i].thread, NULL);
		sem_destroy(&j->workers[i].go);
	}
	j->nworkers = 0;
}

/* After MHD has stopped (its threads read s->jobs). */
static void
jobs_free(srv_jobs *j)
{
	if (j == NULL)
		return;
	jobs_stop(j);
	free(j->workers);
	pthread_mutex_destroy(&j->mu);
	free(j);
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
	if (status >= 500) /* the log line says why */
		api_copy(r->error, sizeof(r->error), msg);
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
	srv_loop *lp = tl_loop;
	srv_req *r;

	if (lp == NULL || lp->spare == NULL)
		return calloc(1, sizeof(srv_req));
	r = lp->spare;
	lp->spare = r->job_next;
	lp->nspare--;
	memset(r, 0, sizeof(*r));
	return r;
}

/* R is done with: kept as a spare by the loop that runs this thread. */
static void
req_free(srv_req *r)
{
	srv_loop *lp = tl_loop;

	if (lp == NULL || lp->nspare >= SRV_REQ_SPARE) {
		free(r);
		return;
	}
	r->job_next = lp->spare;
	lp->spare = r;
	lp->nspare++;
}

/* The arguments of TARGET, counted as libmicrohttpd splits them: on '&'
 * after the '?', empty ones included (0 without a '?'). */
static size_t
query_args(const char *target)
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
static void
stop_reading(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci != NULL)
		shutdown(ci->connect_fd, SHUT_RD);
}

/*
 * What uri_seen saw of the request target a connection sends, kept for
 * the access handler, which libmicrohttpd gives the decoded path only.
 * One per connection, from its start to its close, rather than one per
 * request: a request line that libmicrohttpd 0.9.75 fails to parse (too
 * many arguments) never reaches the handler, and a context made for it in
 * uri_seen never came back to be freed.
 */
typedef struct srv_target {
	struct srv_target *prev, *next; /* the loop's connections */
	int fd;                         /* the connection's socket */
	/* Mono ms by which the next request head must be in (0: none is
	 * pending, a request is being served): see sweep_slow_heads. */
	int64_t head_by;
	char path[SRV_PATH_MAX + 1]; /* up to the '?', not decoded */
	size_t len;                  /* of the target, up to a raw NUL */
	bool path_too_long;          /* path is empty then */
	bool encoded_nul;            /* "%00" in the target */
	bool many_args;              /* over SRV_QUERY_ARGS_MAX arguments */
} srv_target;

/*
 * A connection past the limit: answered 503 with Retry-After at once and
 * closed, rather than left to wait in the kernel's backlog as
 * libmicrohttpd would (it stops accepting at its limit, which is set
 * SRV_CONN_OVERFLOW above ours for this).  The answer is a few fixed bytes
 * written straight to the new socket, whose send buffer is empty: no
 * request is read, so there is nothing to frame.  Counted.
 */
static void
refuse_over_limit(srv_target *t)
{
	static const char body[] =
	    "{\"error\":{\"code\":\"too_many_connections\",\"message\":"
	    "\"this instance has all the connections it takes; retry "
	    "shortly\"}}\n";
	char answer[512];
	int n;

	n = snprintf(answer, sizeof(answer),
	    "HTTP/1.1 503 Service Unavailable\r\n"
	    "Content-Type: application/json\r\n"
	    "Retry-After: 1\r\n"
	    "Connection: close\r\n"
	    "Content-Length: %zu\r\n\r\n%s",
	    sizeof(body) - 1, body);
	if (t->fd >= 0 && n > 0 && (size_t)n < sizeof(answer)) {
		(void)send(t->fd, answer, (size_t)n,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
		shutdown(t->fd, SHUT_RDWR);
	}
	t->head_by = 0;
	metrics_conns_refused(1);
}

/* A connection starts (its record joins the loop's list, its first head
 * due within the head timeout) or ends.  On the loop's thread. */
static void
conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode code)
{
	srv_loop *lp = cls;
	srv_target *t = *socket_context;
	const union MHD_ConnectionInfo *ci;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		if ((t = calloc(1, sizeof(*t))) == NULL)
			return;
		ci = MHD_get_connection_info(conn,
		    MHD_CONNECTION_INFO_CONNECTION_FD);
		t->fd = ci != NULL ? ci->connect_fd : -1;
		t->head_by = util_mono_ms() + lp->srv->cfg->head_timeout * 1000;
		if ((t->next = lp->conns) != NULL)
			t->next->prev = t;
		lp->conns = t;
		*socket_context = t;
		if (++lp->nconns > lp->max_conns)
			refuse_over_limit(t);
		return;
	}
	if (t == NULL)
		return;
	lp->nconns--;
	if (t->prev != NULL)
		t->prev->next = t->next;
	else
		lp->conns = t->next;
	if (t->next != NULL)
		t->next->prev = t->prev;
	free(t);
	*socket_context = NULL;
}

/*
 * Close the connections of LP whose request head is overdue: a client
 * that opens connections and trickles a header byte now and then (each
 * byte restarts libmicrohttpd's idle timeout) would otherwise hold them
 * all, and nobody else, a lock's holder included, could connect.  The
 * socket is shut down; libmicrohttpd sees it end and closes it.  Counted,
 * and logged once per sweep.  On the loop's thread.
 */
static void
sweep_slow_heads(srv_loop *lp)
{
	int64_t now = util_mono_ms();
	unsigned n = 0;
	srv_target *t;

	if (now < lp->next_sweep)
		return;
	lp->next_sweep = now + SRV_SWEEP_MS;
	for (t = lp->conns; t != NULL; t = t->next)
		if (t->head_by != 0 && now >= t->head_by && t->fd >= 0) {
			shutdown(t->fd, SHUT_RDWR);
			t->head_by = 0;
			n++;
		}
	if (n == 0)
		return;
	metrics_slow_heads(n);
	srv_logf("WARNING",
	    "closed %u connection%s whose request head took over %d s", n,
	    n == 1 ? "" : "s", lp->srv->cfg->head_timeout);
}

/* CONN's srv_target; NULL when there was no memory for one. */
static srv_target *
target_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci != NULL ? ci->socket_context : NULL;
}

/*
 * libmicrohttpd's URI callback: it sees the request target as received,
 * before the query is split into arguments and anything is decoded.  The
 * target is kept (srv_target) so that the request is routed on the raw
 * path: "/%6detrics" is no route, and what a proxy in front filtered by
 * its path is what is served.  What is wrong with it is noted for
 * access_handler to refuse:
 *
 * - "%00" anywhere: the decoded path or value would end at the NUL, and
 *   what follows would never be checked.
 * - More than SRV_QUERY_ARGS_MAX arguments.  libmicrohttpd 0.9.75 stores
 *   each one in the connection's memory (SRV_CONN_MEMORY), and from about
 *   480 it runs out, and loses even its own 431: the client waited for the
 *   idle timeout.  So nothing more is read from that client: a head that
 *   is in already gets the 400, any other the connection closed at once.
 */
static void *
uri_seen(void *cls, const char *uri, struct MHD_Connection *conn)
{
	srv_target *t = target_of(conn);
	size_t plen = strcspn(uri, "?");

	(void)cls;
	if (t == NULL)
		return NULL;
	t->path[0] = '\0';
	t->encoded_nul = t->many_args = false;
	t->len = strlen(uri);
	t->path_too_long = plen > SRV_PATH_MAX;
	if (!t->path_too_long) {
		memcpy(t->path, uri, plen);
		t->path[plen] = '\0';
	}
	t->encoded_nul = strstr(uri, "%00") != NULL;
	if (query_args(uri) > SRV_QUERY_ARGS_MAX) {
		t->many_args = true;
		stop_reading(conn);
	}
	return NULL;
}

/* Headers that make a request ambiguous, counted by framing_seen. */
typedef struct framing {
	unsigned authorization, content_length, transfer_encoding;
	const char *te; /* the first Transfer-Encoding value */
} framing;

static enum MHD_Result
framing_seen(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	framing *f = cls;

	(void)kind;
	if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
		f->authorization++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
		f->content_length++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0 &&
	    f->transfer_encoding++ == 0)
		f->te = value;
	return MHD_YES;
}

/*
 * Refuse, before its body is read, a request that two parties could read
 * two ways: one smuggled behind another through a proxy that frames it
 * differently, or two tokens of which each reader picks another.  A body
 * is framed by one Content-Length or by "Transfer-Encoding: chunked"
 * alone (libmicrohttpd 0.9.75 waited for the idle timeout on any other
 * coding).  An early answer makes libmicrohttpd close the connection
 * after it, so nothing behind it is read as a request.  NULL when fine.
 */
static const char *
framing_refusal(struct MHD_Connection *conn, const char **reason)
{
	framing f;

	memset(&f, 0, sizeof(f));
	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_seen, &f);
	*reason = "bad_framing";
	if (f.transfer_encoding > 1 || f.content_length > 1)
		return "a request carries at most one Content-Length and one "
		       "Transfer-Encoding header";
	if (f.transfer_encoding > 0 && f.content_length > 0)
		return "a request carries Content-Length or Transfer-Encoding, "
		       "not both";
	if (f.te != NULL && strcasecmp(f.te, "chunked") != 0)
		return "the only Transfer-Encoding accepted is chunked";
	*reason = "duplicate_header";
	if (f.authorization > 1)
		return "a request carries at most one Authorization header";
	return NULL;
}

/* Whether NAME (LEN bytes) is a token (RFC 9110, section 5.6.2): no
 * whitespace before its colon, none inside. */
static bool
field_name_ok(const char *name, size_t len)
{
	size_t i;
	int c;

	if (len == 0)
		return false;
	for (i = 0; i < len; i++) {
		c = (unsigned char)name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') ||
		        (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL)))
			return false;
	}
	return true;
}

/* Whether VALUE (LEN bytes) holds no control character but a tab
 * (RFC 9110, section 5.5: a bare CR is one). */
static bool
field_value_ok(const char *value, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (((unsigned char)value[i] < 0x20 && value[i] != '\t') ||
		    value[i] == 0x7f)
			return false;
	return true;
}

static enum MHD_Result
field_seen(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	const char **why = cls;

	(void)kind;
	if (!field_name_ok(key, strlen(key)))
		*why = "a header name is a token, with no whitespace in it or "
		       "before its colon (RFC 9112, section 5.1)";
	else if (!field_value_ok(value, strlen(value)))
		*why = "a header value holds a control character";
	return *why == NULL ? MHD_YES : MHD_NO;
}

#if MHD_VERSION < 0x01000000
/* Walks the headers in the order they came, for head_cut. */
typedef struct head_walk {
	uintptr_t end; /* just past the last string libmicrohttpd kept */
	bool cut;      /* a line held more than it kept */
} head_walk;

/* Whether a line ending at END is followed by one starting at NEXT, with
 * just its CRLF or LF between. */
static bool
line_break_only(uintptr_t end, uintptr_t next)
{
	return next == end + 1 || next == end + 2;
}

static enum MHD_Result
field_tiles(void *cls, enum MHD_ValueKind kind, const char *key,
    size_t key_size, const char *value, size_t value_size)
{
	head_walk *w = cls;

	(void)kind;
	(void)key_size;
	if (!line_break_only(w->end, (uintptr_t)key)) {
		w->cut = true;
		return MHD_NO;
	}
	w->end = (uintptr_t)value + value_size;
	return MHD_YES;
}

/*
 * Whether libmicrohttpd cut a line of CONN's head at a raw NUL byte.
 * 0.9.x parses the head in place as C strings: a NUL ends the method, the
 * target or a header value there, and the rest of that line is dropped
 * unseen ("Transfer-Encoding: chunked\0gzip" was read as chunked, a path
 * "/v1/locks/prod/a\0zz" as prod/a).  No API gives the lengths received,
 * but what it kept tiles the head it measured
 * (MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE) with only separators between:
 *   METHOD SP TARGET SP VERSION EOL, then NAME ":" OWS VALUE EOL for each
 *   header, then EOL,
 * EOL being CRLF or LF, and the target as uri_seen saw it (T).  A wider
 * gap is a line cut short.  (libmicrohttpd 1.0 rewrote this parser and
 * refuses a NUL itself.)
 */
static bool
head_cut(struct MHD_Connection *conn, const srv_target *t, const char *method,
    const char *url, const char *version)
{
	const union MHD_ConnectionInfo *ci;
	head_walk w = { 0, false };
	uintptr_t head_end;

	if ((uintptr_t)url != (uintptr_t)method + strlen(method) + 1 ||
	    (uintptr_t)version != (uintptr_t)url + t->len + 1)
		return true;
	w.end = (uintptr_t)version + strlen(version);
	MHD_get_connection_values_n(conn, MHD_HEADER_KIND, field_tiles, &w);
	ci = MHD_get_connection_info(conn,
	    MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	if (w.cut || ci == NULL)
		return true;
	head_end = (uintptr_t)method + ci->header_size;
	return head_end < w.end + 2 || head_end > w.end + 4;
}
#else
static bool
head_cut(struct MHD_Connection *conn, const srv_target *t, const char *method,
    const char *url, const char *version)
{
	(void)conn, (void)t, (void)method, (void)url, (void)version;
	return false;
}
#endif

/*
 * Refuse a request head that libmicrohttpd read otherwise than a proxy in
 * front may have: a raw NUL byte anywhere (head_cut), a header name with
 * whitespace before its colon (0.9.75 keeps the space in the name, so
 * "Transfer-Encoding : chunked" was no Transfer-Encoding to
 * framing_refusal, and the body became a smuggled request), or a control
 * character in a value.  NULL when the head is fine.
 */
static const char *
head_refusal(struct MHD_Connection *conn, const srv_target *t,
    const char *method, const char *url, const char *version)
{
	const char *why = NULL;

	if (head_cut(conn, t, method, url, version))
		return "the request holds a NUL byte, or more than one space "
		       "between the parts of its first line";
	MHD_get_connection_values(conn, MHD_HEADER_KIND, field_seen, &why);
	return why;
}

/* Refuse R's request with a 400 and close the connection: what follows
 * its head on the connection is not read as a request. */
static enum MHD_Result
refuse(srv_req *r, const char *reason, const char *why)
{
	r->close = true;
	return http_fail(r, API_BAD_REQUEST, reason, "%s", why);
}

/* Whether CONN announces a body over SRV_BODY_MAX. */
static bool
body_too_large(struct MHD_Connection *conn)
{
	const char *cl;
	char *end;
	unsigned long long n;

	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl == NULL)
		return false;
	errno = 0;
	n = strtoull(cl, &end, 10);
	return errno == 0 && *end == '\0' && n > SRV_BODY_MAX;
}

/*
 * The first call of the handler for R, once its head is in: refuse what
 * cannot be read one way, before any of its body is read.  T is what
 * uri_seen saw of its target.  MHD_YES to go on reading.
 */
static enum MHD_Result
req_begin(srv_req *r, const srv_target *t, const char *method, const char *url,
    const char *version)
{
	const char *why, *reason;

	if (t->many_args) {
		r->close = true;
		return http_fail(r, API_BAD_REQUEST, "too_many_parameters",
		    "a request takes at most %d query parameters",
		    SRV_QUERY_ARGS_MAX);
	}
	if ((why = head_refusal(r->conn, t, method, url, version)) != NULL)
		return refuse(r, "bad_request", why);
	if (t->path_too_long)
		return refuse(r, "bad_request",
		    "the request path is longer than any route");
	if (t->encoded_nul)
		return refuse(r, "bad_request",
		    "the request target holds an encoded NUL (%00)");
	if ((why = framing_refusal(r->conn, &reason)) != NULL)
		return refuse(r, reason, why);
	if (body_too_large(r->conn)) {
		/* Refuse before reading it; MHD closes the connection after
		 * this answer. */
		r->too_large = true;
		return http_fail(r, API_TOO_LARGE, NULL,
		    "the request body is larger than %d bytes", SRV_BODY_MAX);
	}
	return MHD_YES;
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
	r->loop = tl_loop;
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

static enum MHD_Result
access_handler(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	srv_server *s = cls;
	srv_req *r = *con_cls;
	srv_target *t;

	if (r == NULL) {
		if ((t = target_of(conn)) == NULL ||
		    (r = req_start(s, conn, t, method)) == NULL)
			return MHD_NO; /* out of memory: close */
		t->head_by = 0;        /* the head is in */
		*con_cls = r;
		return req_begin(r, t, method, url, version);
	}
	if (r->waiting)
		return routes_finish_wait(r);
	if (r->job_done)
		return job_finish(r);
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
	if (s->tasks && r->loop != NULL && blocking_route(r->path))
		return task_submit(r);
	if (s->jobs != NULL && blocking_route(r->path))
		return job_submit(s->jobs, r);
	return routes_dispatch(r);
}

static void
completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	srv_server *s = cls;
	srv_req *r = *con_cls;
	srv_target *t = target_of(conn);
	double secs;

	/* The next head on this connection, if any, is due within the idle
	 * timeout (libmicrohttpd's own) plus the head timeout. */
	if (t != NULL)
		t->head_by = util_mono_ms() +
		    (int64_t)(s->cfg->connection_timeout +
		        s->cfg->head_timeout) *
		        1000;
	if (r == NULL) /* the client left before its head was in */
		return;
	secs = (double)(util_mono_us() - r->start_us) / 1e6;
	if (r->status == 0 && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		r->status = 499; /* the client left before an answer */
	srv_log_request(r->status >= 500 ? "ERROR" : "INFO", r->method,
	    r->route, r->status, secs * 1000.0, r->lock, r->owner, r->reason,
	    r->error, r->trace);
	metrics_http(r->route, r->status, secs);
	params_clear(&r->params);
	if (r->job_resp != NULL)
		MHD_destroy_response(r->job_resp);
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

/*
 * libmicrohttpd's own warnings, at most one line a second: each client
 * that leaves or misbehaves makes one, and a flood of them (thousands of
 * waiters hanging up at once) must not flood the log.  A line says how
 * many were left out since the last one.
 */
static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static int64_t next_ms;
	static unsigned left_out;
	unsigned skipped;
	int64_t now = util_mono_ms();
	char msg[512];

	(void)cls;
	pthread_mutex_lock(&mu);
	if (now < next_ms) {
		left_out++;
		pthread_mutex_unlock(&mu);
		return;
	}
	next_ms = now + SRV_LOG_INTERVAL_MS;
	skipped = left_out;
	left_out = 0;
	pthread_mutex_unlock(&mu);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	srv_log("WARNING", msg,
	    json_pack("{s:s, s:i}", "component", "http", "left_out",
	        (int)skipped));
}

srv_server *
srv_new(const srv_config *cfg)
{
	srv_server *s = calloc(1, sizeof(*s));

	if (s != NULL)
		s->cfg = cfg;
	return s;
}

/* Raise the open-file limit so the connection limit can be met. */
static unsigned
fd_budget(unsigned want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return want;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	/* Keep room for store connections, files and the listen socket. */
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)want + 128)
		return rl.rlim_cur > 256 ? (unsigned)rl.rlim_cur - 128 : 64;
	return want;
}

/* ---- event loops ---- */

static void
mhd_readable(void *arg)
{
	srv_loop *lp = arg;

	__atomic_store_n(&lp->run_again, 1, __ATOMIC_SEQ_CST);
}

static void *
loop_main(void *arg)
{
	srv_loop *lp = arg;
	MHD_UNSIGNED_LONG_LONG to;
	MHD_socket ls;
	int ms, run;

	tl_loop = lp;
	srv_log_batch_begin();
	for (;;) {
		if (__atomic_load_n(&lp->stop, __ATOMIC_SEQ_CST) &&
		    (rt_loop_tasks(lp->io) == 0 ||
		        util_mono_ms() >= lp->stop_by))
			break;
		if (__atomic_load_n(&lp->quiesce, __ATOMIC_SEQ_CST) &&
		    !__atomic_load_n(&lp->quiesced, __ATOMIC_SEQ_CST)) {
			/* New connections are refused from now on. */
			ls = MHD_quiesce_daemon(lp->daemon);
			if (ls != MHD_INVALID_SOCKET)
				close(ls);
			__atomic_store_n(&lp->quiesced, 1, __ATOMIC_SEQ_CST);
		}
		/* The daemon runs when its epoll fd is readable, when a
		 * connection was resumed, or when its own timeout is due;
		 * rounds that only move storage transfers leave it be. */
		run = __atomic_exchange_n(&lp->run_again, 0, __ATOMIC_SEQ_CST);
		ms = run ? 0 : SRV_LOOP_IDLE_MS;
		if (MHD_get_timeout(lp->daemon, &to) == MHD_YES &&
		    to < (MHD_UNSIGNED_LONG_LONG)ms)
			ms = (int)to;
		srv_log_flush(); /* before it may wait */
		rt_loop_run_once(lp->io, ms);
		sweep_slow_heads(lp);
		if (run ||
		    __atomic_exchange_n(&lp->run_again, 0, __ATOMIC_SEQ_CST) ||
		    (MHD_get_timeout(lp->daemon, &to) == MHD_YES && to == 0))
			MHD_run(lp->daemon);
	}
	MHD_run(lp->daemon); /* take back what was resumed last */
	srv_log_batch_end();
	tl_loop = NULL;
	return NULL;
}

/* A listening TCP socket on SS with SO_REUSEPORT (every loop has one on
 * the same port); -1 with errno set. */
static int
listen_socket(const struct sockaddr_storage *ss)
{
	int fd, one = 1;
	socklen_t len = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                          : sizeof(struct sockaddr_in);

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
	    (ss->ss_family == AF_INET6 &&
	        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) !=
	            0) ||
	    bind(fd, (const struct sockaddr *)ss, len) != 0 ||
	    listen(fd, SRV_LISTEN_BACKLOG) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The number of event loops: one per CPU, within limits. */
static int
loop_count(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (ncpu < 1)
		return 1;
	return ncpu > SRV_LOOPS_MAX ? SRV_LOOPS_MAX : (int)ncpu;
}

/* Stop and free every loop; their threads must be joined already or
 * never started. */
static void
loops_free(srv_server *s)
{
	int i;

	for (i = 0; i < s->nloops; i++) {
		srv_loop *lp = &s->loops[i];

		if (lp->daemon != NULL)
			MHD_stop_daemon(lp->daemon);
		if (lp->listen_fd >= 0)
			close(lp->listen_fd);
		rt_loop_free(lp->io);
		while (lp->spare != NULL) {
			srv_req *r = lp->spare;

			lp->spare = r->job_next;
			free(r);
		}
	}
	free(s->loops);
	s->loops = NULL;
	s->nloops = 0;
}

/* Ask every loop thread to end (after its tasks, or by STOP_BY) and join
 * them. */
static void
loops_join(srv_server *s, int64_t stop_by)
{
	int i;

	for (i = 0; i < s->nloops; i++) {
		srv_loop *lp = &s->loops[i];

		if (!lp->started)
			continue;
		lp->stop_by = stop_by;
		__atomic_store_n(&lp->stop, 1, __ATOMIC_SEQ_CST);
		rt_loop_wake(lp->io);
	}
	for (i = 0; i < s->nloops; i++)
		if (s->loops[i].started) {
			pthread_join(s->loops[i].thread, NULL);
			s->loops[i].started = false;
		}
}

/* Set up loop LP: its rt_loop, its daemon on FD (taken) and its thread. */
static int
loop_start(srv_server *s, srv_loop *lp, int fd, unsigned flags, unsigned conns)
{
	const srv_config *cfg = s->cfg;
	const union MHD_DaemonInfo *info;

	lp->srv = s;
	lp->listen_fd = fd;
	lp->max_conns = conns;
	if ((lp->io = rt_loop_new()) == NULL)
		return -1;
	/*
	 * External epoll mode: this loop's thread runs the daemon, so a
	 * request can wait on the storage as a task of the same thread.
	 * Suspend/resume for waiters and tasks.  Limits are set on purpose,
	 * not left at MHD's defaults (facts.md 6): the default has no idle
	 * timeout and a 1020-connection cap.  No per-IP limit: behind Cloud
	 * Run every caller arrives from a few proxy addresses.
	 */
	lp->daemon = MHD_start_daemon(flags | MHD_USE_EPOLL |
	        MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
	    0, NULL, NULL, access_handler, s, MHD_OPTION_EXTERNAL_LOGGER,
	    mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
	    MHD_OPTION_CONNECTION_LIMIT, conns + SRV_CONN_OVERFLOW,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_CONN_MEMORY,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, s,
	    MHD_OPTION_URI_LOG_CALLBACK, uri_seen, NULL,
	    MHD_OPTION_NOTIFY_CONNECTION, conn_notify, lp, MHD_OPTION_END);
	if (lp->daemon == NULL)
		return -1;
	lp->listen_fd = -1; /* the daemon's now */
	info = MHD_get_daemon_info(lp->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL ||
	    rt_loop_watch(lp->io, info->epoll_fd, mhd_readable, lp) != 0)
		return -1;
	if (pthread_create(&lp->thread, NULL, loop_main, lp) != 0)
		return -1;
	lp->started = true;
	return 0;
}

/* long: start-up in order (socket, daemon, loops, pool) with one unwind
 * path; issue 21 section 2 reworks it */
int
srv_start(srv_server *s, api_service *svc, auth_ctx *auth, char *err,
    size_t errlen)
{
	const srv_config *cfg = s->cfg;
	struct sockaddr_storage ss;
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl = sizeof(ss);
	char host[256];
	unsigned flags, conns;
	int port, fd, i;

	s->svc = svc;
	s->auth = auth;
	if (srv_parse_listen(cfg->listen, host, sizeof(host), &port) != 0) {
		snprintf(err, errlen, "bad listen address '%s'", cfg->listen);
		return -1;
	}
	memset(&ss, 0, sizeof(ss));
	if (strcmp(host, "localhost") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		flags = 0;
	} else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		flags = MHD_USE_IPv6;
	} else {
		snprintf(err, errlen,
		    "--listen host '%s' must be an IPv4 or IPv6 address", host);
		return -1;
	}
	if ((s->waits = srv_waits_new(svc, (size_t)cfg->max_waiters,
	         (size_t)cfg->max_owner_waiters)) == NULL) {
		snprintf(err, errlen, "cannot start the waiter threads");
		return -1;
	}
	/* How a request that may call the storage runs: as a loop task on
	 * gs:// and mem:// (it waits for the network, or for a JWKS fetch,
	 * without holding the thread), on a storage worker on file:// (its
	 * calls wait for the disk's group commit, which only a thread can). */
	if (strncmp(cfg->store, "file://", 7) != 0)
		s->tasks = true;
	else if ((s->jobs = jobs_new(cfg->threads)) == NULL) {
		snprintf(err, errlen,
		    "cannot start the storage worker threads");
		goto fail;
	}
	s->nloops = loop_count();
	if ((s->loops = calloc((size_t)s->nloops, sizeof(*s->loops))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (i = 0; i < s->nloops; i++)
		s->loops[i].listen_fd = -1;
	conns = fd_budget((unsigned)cfg->max_connections) / (unsigned)s->nloops;
	if (conns < 1)
		conns = 1;
	for (i = 0; i < s->nloops; i++) {
		/* The first socket takes the port (perhaps 0: the kernel
		 * picks), the others join it. */
		if ((fd = listen_socket(&ss)) < 0) {
			snprintf(err, errlen, "cannot listen on %s: %s",
			    cfg->listen, strerror(errno));
			goto fail;
		}
		if (i == 0) {
			if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
				close(fd);
				snprintf(err, errlen, "cannot listen on %s: %s",
				    cfg->listen, strerror(errno));
				goto fail;
			}
			s->port =
			    ntohs(ss.ss_family == AF_INET6 ? v6->sin6_port
			                                   : v4->sin_port);
		}
		if (loop_start(s, &s->loops[i], fd, flags, conns) != 0) {
			if (s->loops[i].listen_fd >= 0) {
				close(s->loops[i].listen_fd);
				s->loops[i].listen_fd = -1;
			}
			snprintf(err, errlen,
			    "cannot start the HTTP event loops: %s",
			    errno ? strerror(errno) : "libmicrohttpd refused");
			goto fail;
		}
	}
	return 0;
fail:
	loops_join(s, 0);
	loops_free(s);
	srv_waits_free(s->waits);
	s->waits = NULL;
	jobs_free(s->jobs);
	s->jobs = NULL;
	return -1;
}

int
srv_port(const srv_server *s)
{
	return s->port;
}

bool
srv_draining(const srv_server *s)
{
	return s->draining != 0;
}

void
srv_stop(srv_server *s)
{
	int64_t deadline = util_mono_ms() + SRV_DRAIN_MAX_MS;
	bool all;
	int i;

	if (s->loops == NULL)
		return;
	s->draining = 1;
	/* Storage calls (retrying through an outage, say) end in time for
	 * their callers to be answered within the drain budget. */
	gcs_give_up_at(deadline - SRV_STORE_GIVE_UP_MARGIN_MS);
	/* Stop accepting: new connections are refused at once.  Each loop
	 * quiesces its own daemon, on its own thread. */
	for (i = 0; i < s->nloops; i++) {
		__atomic_store_n(&s->loops[i].quiesce, 1, __ATOMIC_SEQ_CST);
		rt_loop_wake(s->loops[i].io);
	}
	do {
		all = true;
		for (i = 0; i < s->nloops; i++)
			if (!__atomic_load_n(&s->loops[i].quiesced,
			        __ATOMIC_SEQ_CST))
				all = false;
		if (!all)
			usleep(1000);
	} while (!all && util_mono_ms() < deadline);
	/* Every waiter answered 503 + Retry-After (resumes them all: MHD
	 * must not be stopped with suspended connections). */
	srv_waits_shutdown(s->waits);
	/* In-flight requests finish, within the drain budget. */
	while (__atomic_load_n(&s->active, __ATOMIC_SEQ_CST) > 0 &&
	    util_mono_ms() < deadline)
		usleep(5000);
	/* The workers finish what they run and what is queued (every
	 * suspended connection must be resumed before MHD stops; a storage
	 * call is bounded by the store's own deadlines), then the loops get
	 * a moment to take the resumed connections back. */
	if (s->jobs != NULL) {
		jobs_stop(s->jobs);
		usleep(SRV_RESUME_GRACE_MS * 1000);
	}
	/* A loop ends once its tasks have (they too are bounded by the
	 * store's deadlines), at the latest when the drain budget does. */
	loops_join(s, deadline);
	loops_free(s);
	jobs_free(s->jobs);
	s->jobs = NULL;
	srv_waits_free(s->waits);
	s->waits = NULL;
}

void
srv_free(srv_server *s)
{
	if (s == NULL)
		return;
	srv_stop(s);
	srv_events_reset();
	free(s);
}

static const char *
event_name(api_event_kind k)
{
	switch (k) {
	case API_EV_GRANTED:
		return "granted";
	case API_EV_TAKEOVER:
		return "expired_takeover";
	case API_EV_REFRESHED:
		return "refreshed";
	case API_EV_RELEASED:
		return "released";
	case API_EV_FORCED:
		return "forced";
	case API_EV_LOST:
		return "lost";
	}
	return "other";
}

void
srv_on_event(void *ctx, const api_event *ev)
{
	srv_server *s = ctx;
	const char *what = event_name(ev->kind);

	metrics_lock_outcome(what);
	srv_events_record(ev);
	if (ev->kind != API_EV_REFRESHED)
		srv_log_event(ev->kind == API_EV_FORCED ||
		            ev->kind == API_EV_LOST
		        ? "NOTICE"
		        : "INFO",
		    what, ev->name, ev->owner, ev->holder, ev->actor,
		    ev->reason, ev->fencing_token);
	if ((ev->kind == API_EV_RELEASED || ev->kind == API_EV_FORCED) &&
	    s != NULL && s->waits != NULL)
		srv_waits_wake(s->waits, ev->name);
}
