/*
 * loadgen.c: the benchmark's load generator.  C keep-alive connections to
 * 127.0.0.1:PORT, each on its own lock name (bench/c<i>), each looping
 *
 *   POST /v1/locks/bench/c<i>:acquire            -> 200, lease_id parsed
 *   POST /v1/locks/bench/c<i>:release?lease_id=L -> 204
 *
 * with `Authorization: Bearer $TOKEN`, one request in flight per
 * connection, driven by epoll on non-blocking sockets from one or two
 * threads.  After a warm-up it measures for D seconds and records the
 * latency of every cycle (acquire sent -> release answered).
 *
 * Any answer other than 200 (acquire) or 204 (release) is an error: the
 * first few are printed on stderr, all are counted, and the run exits 1.
 * A connection closed or broken by the server fails the run at once.
 *
 * Output, one line on stdout (key=value, space separated):
 *   label=L clients=C threads=T seconds=D cycles=N cycles_per_s=X
 *   p50_us=P p99_us=Q errors=E cpu_us_per_cycle=U
 * cpu_us_per_cycle is the server's utime+stime (from /proc/PID/stat, all
 * its threads) over the measured window divided by the cycles; "-" without
 * --pid.
 *
 * Usage: TOKEN=jwt loadgen --port P [--clients C] [--seconds D]
 *            [--warmup W] [--threads T] [--pid PID] [--label L]
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"

#define LG_CLIENTS_MAX      1024
#define LG_THREADS_MAX      2
#define LG_SECONDS_MAX      600
#define LG_TOKEN_MAX        8192 /* bytes of the bearer token */
#define LG_REQ_MAX          (LG_TOKEN_MAX + 1024)
#define LG_RESP_MAX         16384    /* bytes of one answer, head and body */
#define LG_LEASE_MAX        128      /* bytes of a lease_id */
#define LG_NAME_MAX         64       /* bytes of bench/c<i> */
#define LG_STAT_MAX         4096     /* bytes of /proc/PID/stat read */
#define LG_ERRORS_SHOWN     5        /* error answers printed on stderr */
#define LG_ERROR_BODY_SHOWN 300      /* bytes of such an answer printed */
#define LG_SLEEP_SLICE_NS   50000000 /* main thread: notice a failure */
#define LG_EVENTS           64       /* epoll events per wait */
#define LG_TICK_MS          10       /* epoll wait cap: the clock is checked */
#define LG_LAT_INIT         65536    /* latency slots first allocated */
#define LG_LAT_MAX          (64u << 20) /* latency slots at most, per thread */
#define LG_DRAIN_MS         10000 /* after the run: held leases released */
#define LG_NAME_PREFIX      "bench/c"

enum phase { SEND_ACQ, RECV_ACQ, SEND_REL, RECV_REL, IDLE };

typedef struct conn {
	int fd;
	int idx;
	enum phase phase;
	char name[LG_NAME_MAX];
	char lease[LG_LEASE_MAX];
	char out[LG_REQ_MAX];
	size_t outlen, outoff;
	char in[LG_RESP_MAX];
	size_t inlen;
	int64_t cycle_start_ns;
	bool want_out; /* EPOLLOUT armed */
} conn;

typedef struct worker {
	pthread_t tid;
	int ep;
	conn *conns;
	int nconns;
	int busy;      /* connections not IDLE */
	bench_lat lat; /* µs of each measured cycle */
	uint64_t errors;
	char fatal[256]; /* set when the run must stop */
} worker;

static struct {
	bench_opts opt; /* --port --clients --seconds --warmup --label */
	int threads;
	long pid;
	const char *token;
	int64_t measure_start_ns; /* set before the workers start */
	int64_t measure_end_ns;
} cfg;

static atomic_int lg_stop;
static atomic_uint lg_errors_shown;

/* utime+stime of PID in clock ticks (all threads), or -1. */
static long long
cpu_ticks(long pid)
{
	char path[64], buf[LG_STAT_MAX], *p;
	unsigned long long ut, st;
	size_t n;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: fields count from the last
	 * ')', which is followed by " " and field 3 (state).  utime and
	 * stime are fields 14 and 15: skip 11 more spaces to reach the one
	 * before utime. */
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	p++;
	for (i = 0; i < 11 && p != NULL; i++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p, " %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

static void
fatal(worker *w, const conn *c, const char *what)
{
	if (w->fatal[0] == '\0')
		snprintf(w->fatal, sizeof(w->fatal), "connection %d (%s): %s",
		    c->idx, c->name, what);
	atomic_store(&lg_stop, 1);
}

static void
error_answer(worker *w, const conn *c, const char *verb, int status,
    const char *body, size_t bodylen)
{
	w->errors++;
	if (atomic_fetch_add(&lg_errors_shown, 1) < LG_ERRORS_SHOWN)
		fprintf(stderr, "loadgen: %s %s answered %d: %.*s\n", verb,
		    c->name, status,
		    (int)(bodylen > LG_ERROR_BODY_SHOWN ? LG_ERROR_BODY_SHOWN
		                                        : bodylen),
		    body);
}

static int
arm(worker *w, conn *c, bool want_out)
{
	struct epoll_event ev;

	if (c->want_out == want_out)
		return 0;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0);
	ev.data.ptr = c;
	if (epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
		return -1;
	c->want_out = want_out;
	return 0;
}

/* Write what is left of c->out; arm EPOLLOUT if the socket is full. */
static void
flush_out(worker *w, conn *c)
{
	ssize_t n;

	while (c->outoff < c->outlen) {
		n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff,
		    MSG_NOSIGNAL);
		if (n > 0) {
			c->outoff += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (arm(w, c, true) != 0)
				fatal(w, c, "epoll_ctl failed");
			return;
		}
		fatal(w, c, "send failed: the server closed the connection");
		return;
	}
	if (arm(w, c, false) != 0)
		fatal(w, c, "epoll_ctl failed");
	c->phase = c->phase == SEND_ACQ ? RECV_ACQ : RECV_REL;
}

static void
send_request(worker *w, conn *c, bool acquire)
{
	int n;

	if (acquire) {
		c->cycle_start_ns = bench_now_ns();
		n = snprintf(c->out, sizeof(c->out),
		    "POST /v1/locks/%s:acquire HTTP/1.1\r\n"
		    "Host: 127.0.0.1:%d\r\n"
		    "User-Agent: lockgate-loadgen\r\n"
		    "Accept: */*\r\n"
		    "Authorization: Bearer %s\r\n"
		    "Content-Length: 0\r\n\r\n",
		    c->name, cfg.opt.port, cfg.token);
	} else {
		n = snprintf(c->out, sizeof(c->out),
		    "POST /v1/locks/%s:release?lease_id=%s HTTP/1.1\r\n"
		    "Host: 127.0.0.1:%d\r\n"
		    "User-Agent: lockgate-loadgen\r\n"
		    "Accept: */*\r\n"
		    "Authorization: Bearer %s\r\n"
		    "Content-Length: 0\r\n\r\n",
		    c->name, c->lease, cfg.opt.port, cfg.token);
	}
	if (n < 0 || (size_t)n >= sizeof(c->out)) {
		fatal(w, c, "request too long");
		return;
	}
	c->outlen = (size_t)n;
	c->outoff = 0;
	c->phase = acquire ? SEND_ACQ : SEND_REL;
	flush_out(w, c);
}

static const char *
find_header(const char *head, size_t headlen, const char *name)
{
	size_t nl = strlen(name);
	const char *p = head, *end = head + headlen;

	/* Lines after the status line: "\r\nName:" */
	while ((p = memmem(p, (size_t)(end - p), "\r\n", 2)) != NULL) {
		p += 2;
		if ((size_t)(end - p) > nl && strncasecmp(p, name, nl) == 0 &&
		    p[nl] == ':')
			return p + nl + 1;
	}
	return NULL;
}

/* Take lease_id out of a lease answer; -1 when it is missing or odd. */
static int
parse_lease(const char *body, size_t len, char *out, size_t outlen)
{
	static const char key[] = "\"lease_id\":\"";
	const char *p, *end = body + len;
	size_t n = 0;

	if ((p = memmem(body, len, key, sizeof(key) - 1)) == NULL)
		return -1;
	p += sizeof(key) - 1;
	while (p < end && *p != '"') {
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
			return -1;
		if (n + 1 >= outlen)
			return -1;
		out[n++] = *p++;
	}
	if (p >= end || n == 0)
		return -1;
	out[n] = '\0';
	return 0;
}

/* After a cycle (or a refused acquire): the next one, or IDLE once the
 * measured window is over, so that no lease stays held when the run ends
 * and the next run on the same server starts from free locks. */
static void
next_cycle(worker *w, conn *c)
{
	if (bench_now_ns() >= cfg.measure_end_ns) {
		c->phase = IDLE;
		w->busy--;
		return;
	}
	send_request(w, c, true);
}

/* One whole answer in c->in: act on it.  0 = consumed, 1 = need more. */
static int
handle_answer(worker *w, conn *c)
{
	const char *hend, *cl, *conn_hdr, *body;
	size_t headlen, bodylen, total;
	long v;
	int status;
	char *end;

	hend = memmem(c->in, c->inlen, "\r\n\r\n", 4);
	if (hend == NULL) {
		if (c->inlen == sizeof(c->in))
			fatal(w, c, "answer head too large");
		return 1;
	}
	headlen = (size_t)(hend - c->in) + 4;
	if (c->inlen < 12 || strncmp(c->in, "HTTP/1.1 ", 9) != 0) {
		fatal(w, c, "not an HTTP/1.1 answer");
		return 0;
	}
	status =
	    (c->in[9] - '0') * 100 + (c->in[10] - '0') * 10 + (c->in[11] - '0');
	bodylen = 0;
	if ((cl = find_header(c->in, headlen, "Content-Length")) != NULL) {
		errno = 0;
		v = strtol(cl, &end, 10);
		if (errno != 0 || v < 0 || v > LG_RESP_MAX) {
			fatal(w, c, "bad Content-Length");
			return 0;
		}
		bodylen = (size_t)v;
	} else if (status != 204 && status != 304) {
		fatal(w, c, "an answer without Content-Length");
		return 0;
	}
	total = headlen + bodylen;
	if (total > sizeof(c->in)) {
		fatal(w, c, "answer too large");
		return 0;
	}
	if (c->inlen < total)
		return 1;
	if (c->inlen > total) {
		fatal(w, c, "bytes after the answer (none were asked for)");
		return 0;
	}
	conn_hdr = find_header(c->in, headlen, "Connection");
	if (conn_hdr != NULL &&
	    strncasecmp(conn_hdr + strspn(conn_hdr, " "), "close", 5) == 0) {
		fatal(w, c, "the server closes the connection (no keep-alive)");
		return 0;
	}
	body = c->in + headlen;
	c->inlen = 0;
	if (c->phase == RECV_ACQ) {
		if (status != 200) {
			error_answer(w, c, "acquire", status, body, bodylen);
			next_cycle(w, c);
			return 0;
		}
		if (parse_lease(body, bodylen, c->lease, sizeof(c->lease)) !=
		    0) {
			fatal(w, c, "acquire answer without a lease_id");
			return 0;
		}
		send_request(w, c, false);
		return 0;
	}
	if (status != 204)
		error_answer(w, c, "release", status, body, bodylen);
	else
		bench_record(&w->lat, cfg.measure_start_ns, cfg.measure_end_ns,
		    c->cycle_start_ns, bench_now_ns());
	next_cycle(w, c);
	return 0;
}

static void
on_readable(worker *w, conn *c)
{
	ssize_t n;

	for (;;) {
		if (c->inlen == sizeof(c->in)) {
			fatal(w, c, "answer too large");
			return;
		}
		n = recv(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen, 0);
		if (n > 0) {
			c->inlen += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		fatal(w, c,
		    n == 0 ? "the server closed the connection"
		           : "recv failed");
		return;
	}
	if (c->phase != RECV_ACQ && c->phase != RECV_REL) {
		fatal(w, c, "an answer before the request was sent");
		return;
	}
	handle_answer(w, c);
}

static void *
worker_main(void *arg)
{
	worker *w = arg;
	struct epoll_event evs[LG_EVENTS];
	int i, n;

	int64_t drain_end = cfg.measure_end_ns + (int64_t)LG_DRAIN_MS * 1000000;

	w->busy = w->nconns;
	for (i = 0; i < w->nconns; i++)
		send_request(w, &w->conns[i], true);
	while (!atomic_load(&lg_stop) && w->busy > 0) {
		if (bench_now_ns() > drain_end) {
			snprintf(w->fatal, sizeof(w->fatal),
			    "%d connections "
			    "still waiting %d ms after the run",
			    w->busy, LG_DRAIN_MS);
			atomic_store(&lg_stop, 1);
			break;
		}
		n = epoll_wait(w->ep, evs, LG_EVENTS, LG_TICK_MS);
		if (n < 0 && errno != EINTR) {
			snprintf(w->fatal, sizeof(w->fatal), "epoll_wait: %s",
			    strerror(errno));
			atomic_store(&lg_stop, 1);
			break;
		}
		for (i = 0; i < n && !atomic_load(&lg_stop); i++) {
			conn *c = evs[i].data.ptr;

			if (evs[i].events & EPOLLOUT)
				flush_out(w, c);
			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				on_readable(w, c);
		}
	}
	return NULL;
}

static int
connect_one(conn *c)
{
	struct sockaddr_in sin;
	int one = 1, fl;

	if ((c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)cfg.opt.port);
	if (connect(c->fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		return -1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((fl = fcntl(c->fd, F_GETFL)) < 0 ||
	    fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0)
		return -1;
	return 0;
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: TOKEN=jwt loadgen --port P [--clients 1..%d] "
	    "[--seconds 1..%d] [--warmup MS] [--threads 1..%d] [--pid PID] "
	    "[--label L]\n",
	    LG_CLIENTS_MAX, LG_SECONDS_MAX, LG_THREADS_MAX);
}

/* loadgen's own options, for bench_parse_args: 0 when it took the pair. */
static int
own_option(const char *k, const char *a)
{
	long v;

	if (strcmp(k, "--threads") == 0 &&
	    bench_parse_int(a, 1, LG_THREADS_MAX, &v) == 0)
		cfg.threads = (int)v;
	else if (strcmp(k, "--pid") == 0 &&
	    bench_parse_int(a, 1, 1L << 30, &v) == 0)
		cfg.pid = v;
	else
		return -1;
	return 0;
}

static int
parse_args(int argc, char **argv)
{
	cfg.opt.clients = 64;
	cfg.threads = 1;
	cfg.opt.seconds = 5;
	cfg.opt.warmup_ms = 1000;
	cfg.pid = -1;
	snprintf(cfg.opt.label, sizeof(cfg.opt.label), "-");
	if (bench_parse_args(argc, argv, &cfg.opt, LG_CLIENTS_MAX,
	        LG_SECONDS_MAX, own_option) != 0)
		return -1;
	if (cfg.threads > cfg.opt.clients)
		cfg.threads = cfg.opt.clients;
	cfg.token = getenv("TOKEN");
	if (cfg.token == NULL || cfg.token[0] == '\0' ||
	    strlen(cfg.token) >= LG_TOKEN_MAX ||
	    strpbrk(cfg.token, "\r\n") != NULL) {
		fprintf(stderr, "loadgen: TOKEN must hold the bearer token\n");
		return -1;
	}
	return 0;
}

static void
sleep_until(int64_t t_ns)
{
	struct timespec ts;
	int64_t d;

	while (!atomic_load(&lg_stop) && (d = t_ns - bench_now_ns()) > 0) {
		if (d > LG_SLEEP_SLICE_NS)
			d = LG_SLEEP_SLICE_NS;
		ts.tv_sec = d / 1000000000;
		ts.tv_nsec = d % 1000000000;
		nanosleep(&ts, NULL);
	}
}

int
main(int argc, char **argv)
{
	worker ws[LG_THREADS_MAX];
	conn *conns = NULL;
	uint32_t *all = NULL;
	long long cpu0 = -1, cpu1 = -1;
	uint64_t errors = 0;
	size_t total = 0, k;
	double cpu_us = -1;
	int i, t, rc = 1, started = 0;

	memset(ws, 0, sizeof(ws));
	for (t = 0; t < LG_THREADS_MAX; t++) {
		ws[t].ep = -1;
		bench_lat_init(&ws[t].lat, LG_LAT_INIT, LG_LAT_MAX);
	}
	if (parse_args(argc, argv) != 0) {
		usage();
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((conns = calloc((size_t)cfg.opt.clients, sizeof(*conns))) == NULL)
		goto fail;
	for (i = 0; i < cfg.opt.clients; i++)
		conns[i].fd = -1;
	for (t = 0; t < cfg.threads; t++) {
		ws[t].conns = conns + (size_t)cfg.opt.clients * t / cfg.threads;
		ws[t].nconns = cfg.opt.clients * (t + 1) / cfg.threads -
		    cfg.opt.clients * t / cfg.threads;
		if ((ws[t].ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
			goto fail;
	}
	for (t = 0; t < cfg.threads; t++) {
		for (i = 0; i < ws[t].nconns; i++) {
			conn *c = &ws[t].conns[i];
			struct epoll_event ev;

			c->idx = (int)(c - conns);
			snprintf(c->name, sizeof(c->name), "%s%d",
			    LG_NAME_PREFIX, c->idx);
			if (connect_one(c) != 0) {
				fprintf(stderr,
				    "loadgen: cannot connect to "
				    "127.0.0.1:%d: %s\n",
				    cfg.opt.port, strerror(errno));
				goto fail;
			}
			memset(&ev, 0, sizeof(ev));
			ev.events = EPOLLIN;
			ev.data.ptr = c;
			if (epoll_ctl(ws[t].ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
				goto fail;
		}
	}
	cfg.measure_start_ns =
	    bench_now_ns() + (int64_t)cfg.opt.warmup_ms * 1000000;
	cfg.measure_end_ns =
	    cfg.measure_start_ns + (int64_t)cfg.opt.seconds * 1000000000;
	for (t = 0; t < cfg.threads; t++) {
		if (pthread_create(&ws[t].tid, NULL, worker_main, &ws[t]) != 0)
			goto fail_join;
		started++;
	}
	sleep_until(cfg.measure_start_ns);
	if (cfg.pid > 0)
		cpu0 = cpu_ticks(cfg.pid);
	sleep_until(cfg.measure_end_ns);
	if (cfg.pid > 0)
		cpu1 = cpu_ticks(cfg.pid);
fail_join:
	if (started < cfg.threads)
		atomic_store(&lg_stop, 1);
	for (t = 0; t < started; t++)
		pthread_join(ws[t].tid, NULL);
	if (started < cfg.threads) {
		fprintf(stderr, "loadgen: cannot start the threads\n");
		goto fail;
	}
	for (t = 0; t < cfg.threads; t++) {
		if (ws[t].fatal[0] != '\0') {
			fprintf(stderr, "loadgen: FAILED: %s\n", ws[t].fatal);
			goto fail;
		}
		total += ws[t].lat.n;
		errors += ws[t].errors;
	}
	if (total == 0) {
		fprintf(stderr,
		    "loadgen: FAILED: no cycle completed (%" PRIu64
		    " error answers)\n",
		    errors);
		goto fail;
	}
	if ((all = malloc(total * sizeof(*all))) == NULL)
		goto fail;
	for (t = 0, k = 0; t < cfg.threads; t++) {
		memcpy(all + k, ws[t].lat.us, ws[t].lat.n * sizeof(*all));
		k += ws[t].lat.n;
	}
	qsort(all, total, sizeof(*all), bench_cmp_u32);
	if (cpu0 >= 0 && cpu1 >= cpu0)
		cpu_us =
		    (double)(cpu1 - cpu0) * 1e6 / (double)sysconf(_SC_CLK_TCK);
	bench_print_result(&(bench_result){
	    .label = cfg.opt.label,
	    .clients = cfg.opt.clients,
	    .threads = cfg.threads,
	    .window_ns = cfg.measure_end_ns - cfg.measure_start_ns,
	    .lat = all,
	    .cycles = total,
	    .errors = errors,
	    .cpu_us = cpu_us,
	});
	fflush(stdout);
	if (errors > 0) {
		fprintf(stderr, "loadgen: FAILED: %" PRIu64 " error answers\n",
		    errors);
		goto fail;
	}
	if (cfg.pid > 0 && (cpu0 < 0 || cpu1 < 0)) {
		fprintf(stderr, "loadgen: FAILED: cannot read /proc/%ld/stat\n",
		    cfg.pid);
		goto fail;
	}
	rc = 0;
fail:
	for (t = 0; t < cfg.threads; t++) {
		if (ws[t].ep >= 0)
			close(ws[t].ep);
		free(ws[t].lat.us);
	}
	for (i = 0; conns != NULL && i < cfg.opt.clients; i++)
		if (conns[i].fd >= 0)
			close(conns[i].fd);
	free(conns);
	free(all);
	return rc;
}
