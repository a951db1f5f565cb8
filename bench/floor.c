/*
 * floor.c: the HTTP floor of the benchmark.  libmicrohttpd set up exactly
 * as lockgate's srv_start sets up its own (server/http.c), answering
 * lockgate's two hot request shapes with no auth, no store and no log:
 *
 *   POST /v1/locks/NAME:acquire  -> 200, a lease body of lockgate's size
 *                                   and shape (fresh lease_id each time)
 *   POST /v1/locks/NAME:release  -> 204
 *   anything else                -> 404
 *
 * The setup mirrored: one event loop per CPU (at most SRV_LOOPS_MAX), each
 * a thread with its own daemon in external epoll mode (MHD_USE_EPOLL,
 * suspend/resume allowed, error log) on its own SO_REUSEPORT listening
 * socket (backlog SRV_LISTEN_BACKLOG) on one shared port, so the kernel
 * spreads connections over the loops; the connection limit divided by the
 * number of loops; lockgate's default idle timeout and per-connection
 * memory.  Each thread loops as lockgate's loop_main does: the daemon's
 * timeout, capped at SRV_LOOP_IDLE_MS, bounds an epoll_wait on a set that
 * holds the daemon's epoll fd (and a wake-up eventfd), then MHD_run when
 * the daemon's fd fired or its timeout is due.
 *
 * What lockgate costs above this floor is its own work: routing, parsing,
 * the JWT check, the lock algorithm, the store, the log line and its
 * per-request state.  A floor set up differently from lockgate (another
 * threading model, other limits) would make the ratios of bench/run.sh
 * meaningless: keep the two in step.
 *
 * Usage: floor   (no arguments)
 * Listens on 127.0.0.1, a port the kernel picks, and prints one JSON line
 * {"message":"listening","port":P,"loops":N} on stdout; SIGTERM or SIGINT
 * stops it (exit 0; 1 when a loop failed).
 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "server/srv.h"

#define FLOOR_BODY_MAX     1024 /* bytes of one lease answer */
#define FLOOR_NAME_MAX     256  /* bytes of a lock name (design 2) */
#define FLOOR_TIME_MAX     32   /* bytes of an RFC 3339 time */
#define FLOOR_TTL          300  /* s, lockgate's default ttl */
#define FLOOR_REFRESH      37   /* s, lockgate's answer for ttl 300 */
#define FLOOR_LOCKS_PREFIX "/v1/locks/"
#define FLOOR_LOOP_EVENTS  4 /* a loop's set: the daemon's fd, the wake fd */
/* lockgate's fd_budget: fds kept out of the connection limit, and the
 * limit when the open-file limit is tiny. */
#define FLOOR_FD_RESERVE   128
#define FLOOR_FD_FLOOR     256
#define FLOOR_CONNS_MIN    64

/* One event loop: a thread, its daemon and the epoll set it waits on. */
typedef struct floor_loop {
	struct MHD_Daemon *daemon;
	int listen_fd; /* until the daemon has it */
	int epfd;
	int mhd_fd; /* the daemon's epoll fd (the daemon's to close) */
	int wakefd; /* written by main to make the loop look at `stop` */
	pthread_t thread;
	bool started;
} floor_loop;

static atomic_uint_fast64_t floor_seq;
static atomic_int floor_stop;   /* main asks every loop to end */
static atomic_int floor_failed; /* a loop ended on an error */
static char floor_marker;       /* *con_cls once the headers were seen */

/* RFC 3339 UTC with milliseconds, as lockgate writes its times. */
static void
fmt_time(const struct timespec *ts, time_t plus, char *out, size_t len)
{
	struct tm tm;
	time_t t = ts->tv_sec + plus;
	unsigned ms = (unsigned)(ts->tv_nsec / 1000000) % 1000u;
	size_t n;

	gmtime_r(&t, &tm);
	n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
	if (n == 0 || n + sizeof(".000Z") > len) {
		out[0] = '\0';
		return;
	}
	snprintf(out + n, len - n, ".%03uZ", ms);
}

/* Queue an answer with lockgate's headers.  BODY is copied. */
static enum MHD_Result
answer(struct MHD_Connection *conn, unsigned status, const char *body,
    size_t len)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;

	resp = MHD_create_response_from_buffer(len, (void *)body,
	    MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	if (len > 0 &&
	    MHD_add_response_header(resp, "Content-Type", "application/json") !=
	        MHD_YES)
		goto fail;
	if (MHD_add_response_header(resp, "Cache-Control", "no-store") !=
	        MHD_YES ||
	    MHD_add_response_header(resp, "X-Content-Type-Options",
	        "nosniff") != MHD_YES)
		goto fail;
	rc = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return rc;
fail:
	MHD_destroy_response(resp);
	return MHD_NO;
}

/* The same fields in the same order as lockgate's lease answer, and its
 * final newline. */
static enum MHD_Result
acquire(struct MHD_Connection *conn, const char *name, size_t namelen)
{
	char body[FLOOR_BODY_MAX], now[FLOOR_TIME_MAX], exp[FLOOR_TIME_MAX];
	struct timespec ts;
	uint64_t seq = atomic_fetch_add(&floor_seq, 1) + 1;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	fmt_time(&ts, 0, now, sizeof(now));
	fmt_time(&ts, FLOOR_TTL, exp, sizeof(exp));
	n = snprintf(body, sizeof(body),
	    "{\"name\":\"%.*s\",\"owner\":\"bench\",\"holder\":\"\","
	    "\"purpose\":\"\",\"labels\":{},\"claims\":{},"
	    "\"fencing_token\":\"%" PRIu64 "\",\"acquired_at\":\"%s\","
	    "\"refreshed_at\":\"%s\",\"expires_at\":\"%s\",\"ttl\":%d,"
	    "\"expected_duration\":0,\"overdue\":false,\"state\":\"held\","
	    "\"lease_id\":\"%016" PRIx64 "%016" PRIx64 "\","
	    "\"refresh_interval\":%d}\n",
	    (int)namelen, name, seq, now, now, exp, FLOOR_TTL,
	    seq * UINT64_C(0x9e3779b97f4a7c15), seq, FLOOR_REFRESH);
	if (n < 0 || (size_t)n >= sizeof(body))
		return answer(conn, 500, "", 0);
	return answer(conn, 200, body, (size_t)n);
}

static enum MHD_Result
handler(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	const char *name, *colon;
	size_t namelen;

	(void)cls;
	(void)version;
	(void)upload_data;
	/* Like lockgate: the first call only sees the headers; a body (none
	 * in the benchmark) is read and dropped; then the answer. */
	if (*con_cls == NULL) {
		*con_cls = &floor_marker;
		return MHD_YES;
	}
	if (*upload_data_size != 0) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "POST") != 0 ||
	    strncmp(url, FLOOR_LOCKS_PREFIX, strlen(FLOOR_LOCKS_PREFIX)) != 0)
		return answer(conn, 404, "", 0);
	name = url + strlen(FLOOR_LOCKS_PREFIX);
	if ((colon = strrchr(name, ':')) == NULL)
		return answer(conn, 404, "", 0);
	namelen = (size_t)(colon - name);
	if (namelen == 0 || namelen > FLOOR_NAME_MAX)
		return answer(conn, 404, "", 0);
	if (strcmp(colon, ":acquire") == 0)
		return acquire(conn, name, namelen);
	if (strcmp(colon, ":release") == 0)
		return answer(conn, 204, "", 0);
	return answer(conn, 404, "", 0);
}

/* The end of a request, as lockgate's `completed` ends one (without its
 * log line, metrics and frees): the next request on the connection starts
 * from its headers again. */
static void
completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)conn;
	(void)toe;
	*con_cls = NULL;
}

/* lockgate's fd_budget: the connection limit within the open-file limit. */
static unsigned
fd_budget(unsigned want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return want;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0 ||
		    getrlimit(RLIMIT_NOFILE, &rl) != 0)
			return want;
	}
	if (rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)want + FLOOR_FD_RESERVE)
		return rl.rlim_cur > FLOOR_FD_FLOOR
		    ? (unsigned)rl.rlim_cur - FLOOR_FD_RESERVE
		    : FLOOR_CONNS_MIN;
	return want;
}

/* lockgate's loop_count: one loop per CPU, at most SRV_LOOPS_MAX. */
static int
loop_count(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (ncpu < 1)
		return 1;
	return ncpu > SRV_LOOPS_MAX ? SRV_LOOPS_MAX : (int)ncpu;
}

/* lockgate's listen_socket, IPv4 only: a listening TCP socket on SIN with
 * SO_REUSEPORT; -1 with errno set. */
static int
listen_socket(const struct sockaddr_in *sin)
{
	int fd, one = 1, e;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
	    bind(fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0 ||
	    listen(fd, SRV_LISTEN_BACKLOG) != 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* A loop that cannot go on: the whole floor stops with status 1 (main
 * waits for this signal). */
static void
loop_fail(const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	atomic_store(&floor_failed, 1);
	kill(getpid(), SIGTERM);
}

/* lockgate's loop_main without tasks and resumes (the floor suspends no
 * connection): wait at most the daemon's own timeout, capped at
 * SRV_LOOP_IDLE_MS; run the daemon when its epoll fd fired or that
 * timeout is due, not when only the wake-up fd did. */
static void *
loop_main(void *arg)
{
	floor_loop *lp = arg;
	struct epoll_event ev[FLOOR_LOOP_EVENTS];
	MHD_UNSIGNED_LONG_LONG to;
	uint64_t v;
	int ms, n, i;
	bool work;

	while (!atomic_load(&floor_stop)) {
		ms = SRV_LOOP_IDLE_MS;
		if (MHD_get_timeout(lp->daemon, &to) == MHD_YES &&
		    to < (MHD_UNSIGNED_LONG_LONG)ms)
			ms = (int)to;
		n = epoll_wait(lp->epfd, ev, FLOOR_LOOP_EVENTS, ms);
		if (n < 0 && errno != EINTR) {
			loop_fail("epoll_wait");
			break;
		}
		work = false;
		for (i = 0; i < n; i++) {
			if (ev[i].data.fd == lp->mhd_fd)
				work = true;
			else if (ev[i].data.fd == lp->wakefd)
				while (read(lp->wakefd, &v, sizeof(v)) > 0)
					;
		}
		if (!work &&
		    !(MHD_get_timeout(lp->daemon, &to) == MHD_YES && to == 0))
			continue;
		if (MHD_run(lp->daemon) != MHD_YES) {
			loop_fail("MHD_run");
			break;
		}
	}
	return NULL;
}

static int
watch(int epfd, int fd)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = fd;
	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* Set up loop LP: its daemon on FD (taken, even on failure), its epoll
 * set and its thread.  0 or -1 (what is set up stays for loops_free). */
static int
loop_start(floor_loop *lp, int fd, unsigned conns)
{
	const union MHD_DaemonInfo *info;

	lp->listen_fd = fd;
	if ((lp->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (lp->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
	    watch(lp->epfd, lp->wakefd) != 0)
		return -1;
	/* lockgate's flags and options (loop_start in server/http.c), but
	 * for its logger: MHD logs to stderr here, and only on errors. */
	lp->daemon = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
	        MHD_USE_ERROR_LOG,
	    0, NULL, NULL, handler, NULL, MHD_OPTION_LISTEN_SOCKET,
	    (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT, conns,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SRV_CONN_TIMEOUT_DEFAULT,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_CONN_MEMORY,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
	if (lp->daemon == NULL)
		return -1;
	lp->listen_fd = -1; /* the daemon's now */
	info = MHD_get_daemon_info(lp->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	if (info == NULL || watch(lp->epfd, info->epoll_fd) != 0)
		return -1;
	lp->mhd_fd = info->epoll_fd;
	if ((errno = pthread_create(&lp->thread, NULL, loop_main, lp)) != 0)
		return -1;
	lp->started = true;
	return 0;
}

/* End every started loop thread, then free every loop. */
static void
loops_free(floor_loop *loops, int n)
{
	uint64_t one = 1;
	int i;

	atomic_store(&floor_stop, 1);
	for (i = 0; i < n; i++)
		if (loops[i].started &&
		    write(loops[i].wakefd, &one, sizeof(one)) != sizeof(one))
			fprintf(stderr, "floor: cannot wake loop %d\n", i);
	for (i = 0; i < n; i++) {
		floor_loop *lp = &loops[i];

		if (lp->started)
			pthread_join(lp->thread, NULL);
		if (lp->daemon != NULL)
			MHD_stop_daemon(lp->daemon);
		if (lp->listen_fd >= 0)
			close(lp->listen_fd);
		if (lp->wakefd >= 0)
			close(lp->wakefd);
		if (lp->epfd >= 0)
			close(lp->epfd);
	}
	free(loops);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	floor_loop *loops;
	unsigned conns;
	sigset_t set;
	int nloops, i, fd, sig;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: floor\n");
		return 2;
	}
	/* Blocked before any thread starts, so that every thread inherits
	 * the mask and only main's sigwait takes the signals. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 ||
	    signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
		fprintf(stderr, "floor: cannot set up signals\n");
		return 1;
	}
	nloops = loop_count();
	if ((loops = calloc((size_t)nloops, sizeof(*loops))) == NULL) {
		fprintf(stderr, "floor: out of memory\n");
		return 1;
	}
	for (i = 0; i < nloops; i++)
		loops[i].listen_fd = loops[i].epfd = loops[i].mhd_fd =
		    loops[i].wakefd = -1;
	conns = fd_budget(SRV_CONN_LIMIT_DEFAULT) / (unsigned)nloops;
	if (conns < 1)
		conns = 1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = 0;
	for (i = 0; i < nloops; i++) {
		/* The first socket takes a port the kernel picks, the others
		 * join it. */
		if ((fd = listen_socket(&sin)) < 0 ||
		    (i == 0 &&
		        getsockname(fd, (struct sockaddr *)&sin, &sl) != 0)) {
			fprintf(stderr,
			    "floor: cannot listen on 127.0.0.1: %s\n",
			    strerror(errno));
			if (fd >= 0)
				close(fd);
			loops_free(loops, nloops);
			return 1;
		}
		errno = 0;
		if (loop_start(&loops[i], fd, conns) != 0) {
			fprintf(stderr,
			    "floor: cannot start event loop %d: %s\n", i,
			    errno ? strerror(errno) : "libmicrohttpd refused");
			loops_free(loops, nloops);
			return 1;
		}
	}
	printf("{\"severity\":\"INFO\",\"message\":\"listening\","
	       "\"port\":%u,\"loops\":%d}\n",
	    (unsigned)ntohs(sin.sin_port), nloops);
	if (fflush(stdout) != 0) {
		loops_free(loops, nloops);
		return 1;
	}
	while (sigwait(&set, &sig) != 0)
		;
	loops_free(loops, nloops);
	return atomic_load(&floor_failed) ? 1 : 0;
}
