/*
 * http.c: libmicrohttpd plumbing: the daemon and its limits, reading a
 * request body incrementally under a cap, answers, the per-request log
 * line, graceful shutdown.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "http_int.h"
#include "events.h"
#include "format_env.h"
#include "metrics.h"

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

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
	return http_send(r, status, resp);
}

void
http_release_hold(srv_req *r)
{
	struct MHD_Connection *conn = r->conn;

	if (__atomic_sub_fetch(&r->holds, 1, __ATOMIC_SEQ_CST) == 0)
		MHD_resume_connection(conn);
}

/* ---- storage workers ---- */

/* Whether URL may call the storage (so runs on a worker). */
static bool
blocking_route(const char *url)
{
	return strncmp(url, "/v1/", 4) == 0 || strcmp(url, "/readyz") == 0;
}

static void
job_run(srv_req *r)
{
	r->job_rc = routes_dispatch(r, r->url);
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
job_submit(srv_jobs *j, srv_req *r, const char *url)
{
	srv_worker *w;

	pthread_mutex_lock(&j->mu);
	if (j->stop) {
		pthread_mutex_unlock(&j->mu);
		return routes_dispatch(r, url);
	}
	r->url = url;
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
	char *text, ra[16];
	int status = api_code_status(err->code);
	size_t len;

	e = json_pack("{s:s, s:s}", "code",
	    err->reason ? err->reason : api_code_reason(err->code), "message",
	    err->message);
	if (e != NULL && lock != NULL && lock->name[0] != '\0')
		json_object_set_new(e, "lock", api_lock_json(lock, false));
	body = json_pack("{s:o}", "error", e);
	if (body == NULL)
		return MHD_NO;
	if (status >= 500) /* the log line says why */
		snprintf(r->error, sizeof(r->error), "%s", err->message);
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
	if (status == 409 || status == 503) {
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

static enum MHD_Result
access_handler(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	srv_server *s = cls;
	srv_req *r = *con_cls;
	const char *cl;
	char *end;
	unsigned long long n;

	(void)version;
	if (r == NULL) {
		r = calloc(1, sizeof(*r));
		if (r == NULL)
			return MHD_NO;
		r->srv = s;
		r->conn = conn;
		r->method = method;
		r->start_us = now_us();
		r->route = "other";
		r->waiter.fd = -1;
		r->params.query = mhd_query;
		r->params.each = mhd_each;
		r->params.ctx = conn;
		__atomic_add_fetch(&s->active, 1, __ATOMIC_SEQ_CST);
		*con_cls = r;
		trace_of(conn, r->trace, sizeof(r->trace));
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl != NULL) {
			errno = 0;
			n = strtoull(cl, &end, 10);
			if (errno == 0 && *end == '\0' && n > SRV_BODY_MAX) {
				/* Refuse before reading it; MHD closes the
				 * connection after this answer. */
				r->too_large = true;
				return http_fail(r, API_TOO_LARGE, NULL,
				    "the request body is larger than %d bytes",
				    SRV_BODY_MAX);
			}
		}
		return MHD_YES;
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
	if (s->jobs != NULL && blocking_route(url))
		return job_submit(s->jobs, r, url);
	return routes_dispatch(r, url);
}

static void
completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	srv_server *s = cls;
	srv_req *r = *con_cls;
	double secs;

	(void)conn;
	if (r == NULL)
		return;
	secs = (double)(now_us() - r->start_us) / 1e6;
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
	free(r);
	*con_cls = NULL;
	__atomic_sub_fetch(&s->active, 1, __ATOMIC_SEQ_CST);
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	srv_log("WARNING", msg, json_pack("{s:s}", "component", "http"));
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

int
srv_start(srv_server *s, api_service *svc, auth_ctx *auth, char *err,
    size_t errlen)
{
	const srv_config *cfg = s->cfg;
	struct sockaddr_storage ss;
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	const union MHD_DaemonInfo *info;
	char host[256];
	unsigned flags, conns, pool;
	int port;

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
	if ((s->waits = srv_waits_new(svc)) == NULL) {
		snprintf(err, errlen, "cannot start the waiter threads");
		return -1;
	}
	/* A store whose calls block gets storage workers, and its polling
	 * threads only poll; mem:// answers on the polling threads. */
	if (strcmp(cfg->store, "mem://") != 0) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		if ((s->jobs = jobs_new(cfg->threads)) == NULL) {
			snprintf(err, errlen,
			    "cannot start the storage worker threads");
			srv_waits_free(s->waits);
			s->waits = NULL;
			return -1;
		}
		pool = ncpu < 2                   ? 2
		    : ncpu > SRV_POLL_THREADS_MAX ? SRV_POLL_THREADS_MAX
		                                  : (unsigned)ncpu;
	} else {
		pool = (unsigned)cfg->threads;
	}
	conns = fd_budget((unsigned)cfg->max_connections);
	/*
	 * epoll with a pool of polling threads; suspend/resume for waiters
	 * (it brings the inter-thread channel that quiesce needs).  Limits
	 * are set on purpose, not left at MHD's defaults (facts.md 6): the
	 * default has no idle timeout and a 1020-connection cap.  No per-IP
	 * limit: behind Cloud Run every caller arrives from a few proxy
	 * addresses.
	 */
	flags |= MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
	    MHD_USE_ERROR_LOG;
	s->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL,
	    access_handler, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
	    MHD_OPTION_THREAD_POOL_SIZE, pool, MHD_OPTION_CONNECTION_LIMIT,
	    conns, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)cfg->connection_timeout,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_CONN_MEMORY,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_NOTIFY_COMPLETED,
	    completed, s, MHD_OPTION_END);
	if (s->daemon == NULL) {
		snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen,
		    errno ? strerror(errno) : "libmicrohttpd refused");
		srv_waits_free(s->waits);
		s->waits = NULL;
		jobs_free(s->jobs);
		s->jobs = NULL;
		return -1;
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : port;
	return 0;
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
	int64_t deadline = srv_mono_ms() + SRV_DRAIN_MAX_MS;
	MHD_socket ls;

	if (s->daemon == NULL)
		return;
	s->draining = 1;
	/* Storage calls (retrying through an outage, say) end in time for
	 * their callers to be answered within the drain budget. */
	gcs_give_up_at(deadline - SRV_STORE_GIVE_UP_MARGIN_MS);
	/* Stop accepting: new connections are refused at once. */
	ls = MHD_quiesce_daemon(s->daemon);
	if (ls != MHD_INVALID_SOCKET)
		close(ls);
	/* Every waiter answered 503 + Retry-After (resumes them all: MHD
	 * must not be stopped with suspended connections). */
	srv_waits_shutdown(s->waits);
	/* In-flight requests finish, within the drain budget. */
	while (__atomic_load_n(&s->active, __ATOMIC_SEQ_CST) > 0 &&
	    srv_mono_ms() < deadline)
		usleep(5000);
	/* The workers finish what they run and what is queued (every
	 * suspended connection must be resumed before MHD stops; a storage
	 * call is bounded by the store's own deadlines), then MHD gets a
	 * moment to take the resumed connections back. */
	if (s->jobs != NULL) {
		jobs_stop(s->jobs);
		usleep(SRV_RESUME_GRACE_MS * 1000);
	}
	MHD_stop_daemon(s->daemon);
	s->daemon = NULL;
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
		    ev->fencing_token);
	if ((ev->kind == API_EV_RELEASED || ev->kind == API_EV_FORCED) &&
	    s != NULL && s->waits != NULL)
		srv_waits_wake(s->waits, ev->name);
}
