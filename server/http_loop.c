/*
 * http_loop.c: starting and stopping the server: the event loops (a
 * thread, a libmicrohttpd daemon and an rt_loop each), their listen
 * sockets and descriptor budget, graceful shutdown, and libmicrohttpd's
 * warnings and the service's events as log lines.
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

	http_tl_loop = lp;
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
		http_sweep_slow_heads(lp);
		srv_drops_report(false);
		if (run ||
		    __atomic_exchange_n(&lp->run_again, 0, __ATOMIC_SEQ_CST) ||
		    (MHD_get_timeout(lp->daemon, &to) == MHD_YES && to == 0))
			MHD_run(lp->daemon);
	}
	MHD_run(lp->daemon); /* take back what was resumed last */
	srv_log_batch_end();
	http_tl_loop = NULL;
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
		/* A task still waiting (a file:// commit on a disk that
		 * hangs past the drain budget) may yet be woken from another
		 * thread, which must find its loop: the process is ending,
		 * and that loop is left as it is. */
		if (rt_loop_tasks(lp->io) == 0)
			rt_loop_free(lp->io);
		while (lp->spare != NULL) {
			srv_req *r = lp->spare;

			lp->spare = r->spare_next;
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
	 * not left at libmicrohttpd's defaults, which have no idle
	 * timeout and a 1020-connection cap.  No per-IP limit: behind Cloud
	 * Run every caller arrives from a few proxy addresses.
	 */
	lp->daemon = MHD_start_daemon(flags | MHD_USE_EPOLL |
	        MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
	    0, NULL, NULL, http_access_handler, s, MHD_OPTION_EXTERNAL_LOGGER,
	    mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
	    MHD_OPTION_CONNECTION_LIMIT, conns + SRV_CONN_OVERFLOW,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_CONN_MEMORY,
	    MHD_OPTION_NOTIFY_COMPLETED, http_completed, s,
	    MHD_OPTION_URI_LOG_CALLBACK, http_uri_seen, NULL,
	    MHD_OPTION_NOTIFY_CONNECTION, http_conn_notify, lp, MHD_OPTION_END);
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

/* The address of --listen (LISTEN) into SS, and the daemon's flag for
 * its family into *FLAGS.  0, or -1 with ERR. */
static int
listen_addr(const char *listen, struct sockaddr_storage *ss, unsigned *flags,
    char *err, size_t errlen)
{
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	char host[256];
	int port;

	if (srv_parse_listen(listen, host, sizeof(host), &port) != 0) {
		snprintf(err, errlen, "bad listen address '%s'", listen);
		return -1;
	}
	memset(ss, 0, sizeof(*ss));
	if (strcmp(host, "localhost") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		*flags = 0;
	} else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		*flags = MHD_USE_IPv6;
	} else {
		snprintf(err, errlen,
		    "--listen host '%s' must be an IPv4 or IPv6 address", host);
		return -1;
	}
	return 0;
}

/* S's event loops, each on its own socket bound to SS: the first takes
 * the port (perhaps 0: the kernel picks, and S->port says which), the
 * others join it.  0, or -1 with ERR (the caller unwinds). */
static int
loops_open(srv_server *s, struct sockaddr_storage *ss, unsigned flags,
    char *err, size_t errlen)
{
	const srv_config *cfg = s->cfg;
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	socklen_t sl = sizeof(*ss);
	unsigned conns;
	int fd, i;

	s->nloops = loop_count();
	if ((s->loops = calloc((size_t)s->nloops, sizeof(*s->loops))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (i = 0; i < s->nloops; i++)
		s->loops[i].listen_fd = -1;
	conns = fd_budget((unsigned)cfg->max_connections) / (unsigned)s->nloops;
	if (conns < 1)
		conns = 1;
	for (i = 0; i < s->nloops; i++) {
		if ((fd = listen_socket(ss)) < 0 ||
		    (i == 0 &&
		        getsockname(fd, (struct sockaddr *)ss, &sl) != 0)) {
			if (fd >= 0)
				close(fd);
			snprintf(err, errlen, "cannot listen on %s: %s",
			    cfg->listen, strerror(errno));
			return -1;
		}
		if (i == 0)
			s->port =
			    ntohs(ss->ss_family == AF_INET6 ? v6->sin6_port
			                                    : v4->sin_port);
		if (loop_start(s, &s->loops[i], fd, flags, conns) != 0) {
			if (s->loops[i].listen_fd >= 0) {
				close(s->loops[i].listen_fd);
				s->loops[i].listen_fd = -1;
			}
			snprintf(err, errlen,
			    "cannot start the HTTP event loops: %s",
			    errno ? strerror(errno) : "libmicrohttpd refused");
			return -1;
		}
	}
	return 0;
}

/* Start-up in order (the address, the waiters, the loops) with one
 * unwind path. */
int
srv_start(srv_server *s, api_service *svc, auth_ctx *auth, char *err,
    size_t errlen)
{
	const srv_config *cfg = s->cfg;
	struct sockaddr_storage ss;
	unsigned flags;

	s->svc = svc;
	s->auth = auth;
	if (listen_addr(cfg->listen, &ss, &flags, err, errlen) != 0)
		return -1;
	if ((s->waits = srv_waits_new(svc, (size_t)cfg->max_waiters,
	         (size_t)cfg->max_owner_waiters)) == NULL) {
		snprintf(err, errlen, "cannot start the waiter threads");
		return -1;
	}
	if (loops_open(s, &ss, flags, err, errlen) == 0)
		return 0;
	loops_join(s, 0);
	loops_free(s);
	srv_waits_free(s->waits);
	s->waits = NULL;
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
	/* A loop ends once its tasks have (their storage calls are bounded
	 * by the store's deadlines), at the latest when the drain budget
	 * does; loops_free keeps a loop whose tasks outlived it. */
	loops_join(s, deadline);
	loops_free(s);
	srv_drops_report(true);
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
