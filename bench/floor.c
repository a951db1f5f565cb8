/*
 * floor.c: the HTTP floor of the benchmark.  A libmicrohttpd server set up
 * as lockgate's srv_start sets up its own (epoll, internal thread pool,
 * suspend/resume, the same connection limit, idle timeout, memory pool and
 * backlog) that answers lockgate's two hot request shapes with no auth, no
 * store and no log:
 *
 *   POST /v1/locks/NAME:acquire  -> 200, a lease body of lockgate's size
 *                                   and shape (fresh lease_id each time)
 *   POST /v1/locks/NAME:release  -> 204
 *   anything else                -> 404
 *
 * What lockgate costs above this floor is its own work: routing, parsing,
 * the JWT check, the lock algorithm, the store and the log line.
 *
 * Usage: floor [--threads N]   (N defaults to lockgate's --threads default)
 * Listens on 127.0.0.1, a port the kernel picks, and prints one JSON line
 * {"message":"listening","port":P} on stdout; SIGTERM or SIGINT stops it.
 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <microhttpd.h>

#include "server/srv.h"

#define FLOOR_BODY_MAX     1024 /* bytes of one lease answer */
#define FLOOR_NAME_MAX     256  /* bytes of a lock name (design 2) */
#define FLOOR_TIME_MAX     32   /* bytes of an RFC 3339 time */
#define FLOOR_TTL          300  /* s, lockgate's default ttl */
#define FLOOR_REFRESH      37   /* s, lockgate's answer for ttl 300 */
#define FLOOR_LOCKS_PREFIX "/v1/locks/"

static atomic_uint_fast64_t floor_seq;
static char floor_marker; /* *con_cls once the headers were seen */

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
	if (len > 0)
		MHD_add_response_header(resp, "Content-Type",
		    "application/json");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	rc = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return rc;
}

/* The same fields in the same order as lockgate's lease answer. */
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
	    "\"refresh_interval\":%d}",
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

/* lockgate's fd_budget: the connection limit within the open-file limit. */
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
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)want + 128)
		return rl.rlim_cur > 256 ? (unsigned)rl.rlim_cur - 128 : 64;
	return want;
}

static int
parse_threads(int argc, char **argv, unsigned *threads)
{
	char *end;
	long v;

	*threads = SRV_THREADS_DEFAULT;
	if (argc == 1)
		return 0;
	if (argc != 3 || strcmp(argv[1], "--threads") != 0)
		return -1;
	errno = 0;
	v = strtol(argv[2], &end, 10);
	if (errno != 0 || *end != '\0' || v < 1 || v > SRV_THREADS_MAX)
		return -1;
	*threads = (unsigned)v;
	return 0;
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sin;
	const union MHD_DaemonInfo *info;
	struct MHD_Daemon *d;
	unsigned threads;
	sigset_t set;
	int sig;

	if (parse_threads(argc, argv, &threads) != 0) {
		fprintf(stderr, "usage: floor [--threads 1..%d]\n",
		    SRV_THREADS_MAX);
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = 0;
	d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD |
	        MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
	    0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR,
	    (struct sockaddr *)&sin, MHD_OPTION_THREAD_POOL_SIZE, threads,
	    MHD_OPTION_CONNECTION_LIMIT, fd_budget(SRV_CONN_LIMIT_DEFAULT),
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SRV_CONN_TIMEOUT_DEFAULT,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_CONN_MEMORY,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_END);
	if (d == NULL) {
		fprintf(stderr, "floor: cannot listen on 127.0.0.1\n");
		return 1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	if (info == NULL) {
		fprintf(stderr, "floor: no bound port\n");
		MHD_stop_daemon(d);
		return 1;
	}
	printf("{\"severity\":\"INFO\",\"message\":\"listening\","
	       "\"port\":%u,\"threads\":%u}\n",
	    (unsigned)info->port, threads);
	fflush(stdout);
	while (sigwait(&set, &sig) != 0)
		;
	MHD_stop_daemon(d);
	return 0;
}
