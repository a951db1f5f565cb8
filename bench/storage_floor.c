/*
 * storage_floor.c: the storage floor of the benchmark.  The CPU cost of
 * the storage work of one gs:// lock cycle alone, with no lockgate around
 * it: what any client built on libcurl over HTTP/1.1 spends to make the
 * two Cloud Storage requests of an acquire+release against the fake.
 *
 * One thread drives a libcurl multi handle with curl_multi_socket_action
 * on epoll, as lockgate's storage thread does (gcs/gcs_multi.c: a socket
 * callback, a timer callback, GCS_MULTI_CONNS kept connections).  C
 * clients, each with its own easy handle (kept, so its connection is
 * reused) and its own object p/bench/c<i> in bucket bench-bucket, each
 * looping
 *
 *   POST /upload/storage/v1/b/bench-bucket/o?uploadType=multipart
 *        &ifGenerationMatch=0&fields=generation,metageneration,timeCreated,
 *        updated                                  -> 200, generation read
 *   DELETE /storage/v1/b/bench-bucket/o/p%2Fbench%2Fc<i>
 *        ?ifGenerationMatch=G&ifMetagenerationMatch=M     -> 204
 *
 * with the request shapes lockgate sends (gs_insert and gs_remove in
 * gcs/gcs_client.c): the same multipart/related body, of the same size
 * (a fresh boundary and lease_id each time), `Expect:` removed,
 * libcurl's receive buffer at GCS_HTTP_BUF_SMALL (as lockgate's object
 * requests), no proxy lookup, the path sent as the request target.  A *cycle* is insert sent
 * to delete answered.  After a warm-up it measures for D seconds.
 *
 * Any answer other than 200 (insert) or 204 (delete), a malformed insert
 * answer, or a transport error on each of SF_TRIES sends is an error: the
 * first few are printed on stderr, no new cycle starts, the cycles in
 * flight end, and the run exits 1 after its line.  A request sent again
 * (by the floor after a transport error, or by libcurl on a new
 * connection when a reused one closed under it: a front's GOAWAY ends the
 * streams in flight) may have been applied by its first send, so, as
 * lockgate reads it, a 412 to such an insert (the object is the first
 * send's: deleted with no precondition) and a 404 to such a delete are
 * that send's echo; their count goes to stderr.
 *
 * Output, one line on stdout, in bench/loadgen's format:
 *   label=L clients=C threads=1 seconds=D cycles=N cycles_per_s=X
 *   p50_us=P p99_us=Q errors=E cpu_us_per_cycle=U
 * where cpu_us_per_cycle is this process's own utime+stime (getrusage)
 * over the measured window divided by the cycles: the client side only,
 * not the fake's.
 *
 * With --raw 1 the same requests go over plain keep-alive sockets with
 * HTTP/1.1 written and read by hand (the *hand-written floor*, label
 * rawfloor): each client's socket is connected once and stays in the
 * epoll set for reading; a request is one send() of the bytes libcurl
 * sends (request line, Host, Accept, and for the insert Content-Type and
 * Content-Length; the body); an answer is read until its headers and
 * Content-Length bytes of body are in.  It is a measuring instrument,
 * not a client: no TLS, no chunked answers, no reconnect, no proxy; a
 * partial send, a closed connection or an answer it cannot frame fails
 * the run.  What it measures is what the two requests cost the kernel
 * and the least user-space work, so (mem + rawfloor) / mem is about the
 * best gs/mem ratio an HTTP/1.1 client over loopback TCP that sends and
 * receives once per request could reach, hand-written or not.
 *
 * With --ca FILE the requests go over https to an HTTP/2 TLS front on
 * 127.0.0.1:P (label gs20h2floor), whose certificate FILE holds, as
 * lockgate sends them there: h2 by ALPN, multiplexed, PIPEWAIT, at most
 * GCS_MULTI_H2_CONNS connections (gcs/gcs_multi.c).
 *
 * Usage: storage_floor --port P [--clients C] [--seconds D] [--warmup W]
 *            [--label L] [--raw 0|1 | --ca FILE]
 *            (the fake, or the front, listens on 127.0.0.1:P)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "bench/bench.h"
#include "gcs/gcs_http.h"
#include "gcs/gcs_multi.h"
#include "rt/rt.h"

#define SF_CLIENTS_MAX      1024
#define SF_SECONDS_MAX      600
#define SF_BUCKET           "bench-bucket" /* bench/run.sh's gs:// bucket */
#define SF_PREFIX           "p/"           /* and its prefix */
#define SF_NAME_PREFIX      "bench/c"      /* loadgen's lock names */
#define SF_NAME_MAX         64             /* bytes of p/bench/c<i> */
#define SF_ORIGIN_MAX       64             /* bytes of https://127.0.0.1:PORT */
#define SF_TARGET_MAX       256            /* bytes of a request target */
#define SF_BODY_MAX         1024           /* bytes of an insert body */
#define SF_CTYPE_MAX        96     /* bytes of the Content-Type header */
#define SF_RESP_MAX         4096   /* bytes of an answer kept */
#define SF_NUM_MAX          24     /* bytes of a generation in an answer */
#define SF_BOUNDARY_HEX     16     /* random bytes of a boundary (lockgate's) */
#define SF_LEASE_HEX        16     /* random bytes of a lease_id (lockgate's) */
#define SF_TRANSFER_MS      10000L /* a transfer that takes longer fails */
#define SF_CONNECT_MS       3000L  /* GCS_CONNECT_TIMEOUT_MS */
#define SF_TICK_MS          10     /* epoll wait cap: the clock is checked */
#define SF_DRAIN_MS         10000  /* after the window: cycles in flight end */
#define SF_ERRORS_SHOWN     5      /* errors printed on stderr */
#define SF_TRIES            3      /* sends of a request: see client_done */
#define SF_ERROR_BODY_SHOWN 300    /* bytes of such an answer printed */
#define SF_LAT_INIT         65536  /* latency slots first allocated */
#define SF_LAT_MAX          (64u << 20) /* latency slots at most */
#define SF_REQ_MAX          2048 /* bytes of a raw request, body included */
#define SF_HEAD_MAX         2048 /* bytes of a raw answer's headers */

/* No 100-continue round trip for a small body (libcurl's slist wants a
 * writable string). */
static char sf_expect[] = "Expect:";

enum sf_phase { SF_INSERT, SF_DELETE, SF_IDLE };

/* One client: an easy handle, its object and its request in flight. */
typedef struct sf_client {
	CURL *h;
	int idx;
	enum sf_phase phase;
	char name[SF_NAME_MAX];     /* p/bench/c<i> */
	char target[SF_TARGET_MAX]; /* path and query of the request */
	char body[SF_BODY_MAX];     /* the insert's */
	size_t body_len;
	char ctype[SF_CTYPE_MAX];   /* "Content-Type: multipart/..." */
	struct curl_slist hdr[2];   /* Expect:, Content-Type */
	char resp[SF_RESP_MAX + 1]; /* the answer's body, NUL-terminated */
	size_t resp_len;
	bool resp_too_big;
	long status; /* of the answer, 0 before one */
	/* --raw: the socket, and the answer as read so far */
	int fd;
	char in[SF_HEAD_MAX + SF_RESP_MAX + 1];
	size_t in_len;
	int64_t gen, metagen; /* of the object inserted; 0: not known */
	/* Sends of this request (libcurl's, and ours after a transport
	 * error): over 1, the first may have applied.  Tries: ours. */
	int sends, tries;
	int64_t cycle_start_ns;
	char cerr[CURL_ERROR_SIZE];
} sf_client;

static struct {
	bench_opts opt; /* --port --clients --seconds --warmup --label */
	bool raw;       /* --raw 1: hand-written HTTP/1.1, no libcurl */
	const char *ca; /* --ca: https to a front this certificate names */
	char origin[SF_ORIGIN_MAX];
} cfg;

/* The run: the loop, its clients and what it measured. */
typedef struct sf_run {
	CURLM *multi;
	int ep;
	int64_t curl_due_ms; /* when libcurl wants its timeout action; -1 */
	sf_client *clients;
	int busy; /* clients not IDLE */
	int64_t start_ns, end_ns, drain_ns;
	bool stopping; /* no new cycle: the window ended, or an error */
	bench_lat lat; /* us of each measured cycle */
	uint64_t errors;
	uint64_t resent; /* answers to a request sent again */
	uint64_t rng;
} sf_run;

/* This process's utime+stime in microseconds, or -1. */
static int64_t
cpu_us(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return -1;
	return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
	    ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

static uint64_t
rand64(sf_run *r)
{
	r->rng ^= r->rng << 13;
	r->rng ^= r->rng >> 7;
	r->rng ^= r->rng << 17;
	return r->rng;
}

/* N random bytes as 2N lowercase hex digits and a NUL at OUT. */
static void
rand_hex(sf_run *r, char *out, int n)
{
	static const char hex[] = "0123456789abcdef";
	uint64_t x = 0;
	int i;

	for (i = 0; i < n; i++) {
		if (i % 8 == 0)
			x = rand64(r);
		out[2 * i] = hex[(x >> 4) & 15];
		out[2 * i + 1] = hex[x & 15];
		x >>= 8;
	}
	out[2 * n] = '\0';
}

/* An error of client C: counted, the first few shown, and the run stops
 * starting cycles.  WHAT says what went wrong; NULL for an answer of the
 * wrong status, which is shown with its body. */
static void
fail(sf_run *r, const sf_client *c, const char *what)
{
	const char *op = c->phase == SF_INSERT ? "insert" : "delete";
	int shown;

	if (r->errors++ < SF_ERRORS_SHOWN) {
		if (what != NULL)
			fprintf(stderr, "storage_floor: %s of %s: %s\n", op,
			    c->name, what);
		else {
			shown = c->resp_len > SF_ERROR_BODY_SHOWN
			    ? SF_ERROR_BODY_SHOWN
			    : (int)c->resp_len;
			fprintf(stderr,
			    "storage_floor: %s of %s answered %ld: "
			    "%.*s\n",
			    op, c->name, c->status, shown, c->resp);
		}
	}
	r->stopping = true;
}

/* ---- libcurl's callbacks ---- */

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
	sf_client *c = ud;
	size_t n = size * nmemb;

	if (c->resp_too_big || c->resp_len + n > SF_RESP_MAX) {
		c->resp_too_big = true;
		return n; /* drained; the answer is an error */
	}
	memcpy(c->resp + c->resp_len, ptr, n);
	c->resp_len += n;
	c->resp[c->resp_len] = '\0';
	return n;
}

/* As gcs_multi.c's on_socket: the fd in the epoll set, with the events
 * libcurl asks for. */
static int
on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	sf_run *r = userp;
	struct epoll_event ev;

	(void)e;
	if (what == CURL_POLL_REMOVE) {
		/* libcurl may have closed it already: ENOENT/EBADF are fine */
		epoll_ctl(r->ep, EPOLL_CTL_DEL, s, NULL);
		return curl_multi_assign(r->multi, s, NULL) == CURLM_OK ? 0
		                                                        : -1;
	}
	memset(&ev, 0, sizeof(ev));
	ev.data.fd = s;
	ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) |
	    ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
	if (socketp != NULL)
		return epoll_ctl(r->ep, EPOLL_CTL_MOD, s, &ev) == 0 ? 0 : -1;
	if (epoll_ctl(r->ep, EPOLL_CTL_ADD, s, &ev) != 0 &&
	    (errno != EEXIST || epoll_ctl(r->ep, EPOLL_CTL_MOD, s, &ev) != 0))
		return -1;
	return curl_multi_assign(r->multi, s, r) == CURLM_OK ? 0 : -1;
}

static int
on_timer(CURLM *m, long ms, void *userp)
{
	sf_run *r = userp;

	(void)m;
	r->curl_due_ms = ms < 0 ? -1 : bench_now_ns() / 1000000 + ms;
	return 0;
}

/* ---- the two requests ---- */

/* --raw: C's socket, connected to the fake (TCP_NODELAY, as libcurl
 * sets it), non-blocking, in the epoll set for reading under C's index. */
static int
raw_connect(sf_run *r, sf_client *c)
{
	struct sockaddr_in a;
	struct epoll_event ev;
	int one = 1;

	if ((c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)cfg.opt.port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u32 = (uint32_t)c->idx;
	if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) !=
	        0 ||
	    connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    fcntl(c->fd, F_SETFL, O_NONBLOCK) != 0 ||
	    epoll_ctl(r->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
		return -1;
	return 0;
}

/* libcurl is about to send C's request: count it (a dying reused
 * connection makes libcurl send it again, unasked, as lockgate counts in
 * gcs_http.c). */
static int
on_prereq(void *cp, char *conn_primary_ip, char *conn_local_ip,
    int conn_primary_port, int conn_local_port)
{
	(void)conn_primary_ip;
	(void)conn_local_ip;
	(void)conn_primary_port;
	(void)conn_local_port;
	((sf_client *)cp)->sends++;
	return CURL_PREREQFUNC_OK;
}

/* The options every transfer of C shares, set once (gcs_http_new); with
 * --raw, its socket instead. */
static int
client_init(sf_run *r, sf_client *c, int idx)
{
	c->idx = idx;
	c->phase = SF_IDLE;
	c->fd = -1;
	if ((size_t)snprintf(c->name, sizeof(c->name), "%s%s%d", SF_PREFIX,
	        SF_NAME_PREFIX, idx) >= sizeof(c->name))
		return -1;
	if (cfg.raw)
		return raw_connect(r, c);
	if ((c->h = curl_easy_init()) == NULL)
		return -1;
	if (curl_easy_setopt(c->h, CURLOPT_PROXY, "") != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_NOPROXY, "") != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_PROTOCOLS_STR,
	        cfg.ca ? "https" : "http") != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_BUFFERSIZE, GCS_HTTP_BUF_SMALL) !=
	        CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, c->cerr) != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body) !=
	        CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c) != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_PRIVATE, (char *)c) != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_PREREQFUNCTION, on_prereq) !=
	        CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_PREREQDATA, c) != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_URL, cfg.origin) != CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, SF_TRANSFER_MS) !=
	        CURLE_OK ||
	    curl_easy_setopt(c->h, CURLOPT_CONNECTTIMEOUT_MS, SF_CONNECT_MS) !=
	        CURLE_OK)
		return -1;
	if (cfg.ca != NULL &&
	    (curl_easy_setopt(c->h, CURLOPT_CAINFO, cfg.ca) != CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_HTTP_VERSION,
	            (long)CURL_HTTP_VERSION_2TLS) != CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_PIPEWAIT, 1L) != CURLE_OK))
		return -1;
	return 0;
}

/* --raw: send C's request, METHOD on c->target with the insert's body
 * when BODY, in one send() (a request this small always fits in an idle
 * connection's send buffer; a partial send is an error). */
static int
raw_send(sf_client *c, const char *method, bool body)
{
	char req[SF_REQ_MAX];
	ssize_t sent;
	int n;

	if (body)
		n = snprintf(req, sizeof(req),
		    "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: */*\r\n"
		    "%s\r\nContent-Length: %zu\r\n\r\n%s",
		    method, c->target, cfg.opt.port, c->ctype, c->body_len,
		    c->body);
	else
		n = snprintf(req, sizeof(req),
		    "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: */*\r\n"
		    "\r\n",
		    method, c->target, cfg.opt.port);
	if (n < 0 || (size_t)n >= sizeof(req))
		return -1;
	sent = send(c->fd, req, (size_t)n, MSG_NOSIGNAL);
	return sent == n ? 0 : -1;
}

/* Forget C's last answer, before a send. */
static void
answer_clear(sf_client *c)
{
	c->resp_len = 0;
	c->resp[0] = '\0';
	c->resp_too_big = false;
	c->status = 0;
	c->in_len = 0;
	c->cerr[0] = '\0';
}

/* Start C's request: METHOD (and the insert's body when BODY) on the
 * raw socket, or its easy handle, its options set, handed to the multi
 * handle. */
static int
client_go(sf_run *r, sf_client *c, const char *method, bool body)
{
	answer_clear(c);
	c->sends = 0;
	c->tries = 1;
	if (cfg.raw)
		return raw_send(c, method, body);
	return curl_multi_add_handle(r->multi, c->h) == CURLM_OK ? 0 : -1;
}

/* gs_insert's request: a new object with lockgate's resource JSON for a
 * fresh lease, ifGenerationMatch=0. */
static int
start_insert(sf_run *r, sf_client *c)
{
	char boundary[2 * SF_BOUNDARY_HEX + 1], lease[2 * SF_LEASE_HEX + 1];
	int n;

	rand_hex(r, boundary, SF_BOUNDARY_HEX);
	rand_hex(r, lease, SF_LEASE_HEX);
	n = snprintf(c->body, sizeof(c->body),
	    "--%s\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
	    "{\"name\":\"%s\",\"cacheControl\":\"no-store\",\"contentType\":"
	    "\"application/octet-stream\",\"metadata\":{\"lease_id\":\"%s\","
	    "\"owner\":\"bench\",\"holder\":\"\",\"purpose\":\"\",\"ttl\":"
	    "\"300\",\"expected_duration\":\"0\",\"labels\":\"\",\"claims\":"
	    "\"\"}}\r\n--%s\r\nContent-Type: application/octet-stream\r\n\r\n"
	    "\r\n--%s--\r\n",
	    boundary, c->name, lease, boundary, boundary);
	if (n < 0 || (size_t)n >= sizeof(c->body))
		return -1;
	c->body_len = (size_t)n;
	n = snprintf(c->ctype, sizeof(c->ctype),
	    "Content-Type: multipart/related; boundary=%s", boundary);
	if (n < 0 || (size_t)n >= sizeof(c->ctype))
		return -1;
	n = snprintf(c->target, sizeof(c->target),
	    "/upload/storage/v1/b/%s/o?uploadType=multipart"
	    "&ifGenerationMatch=0"
	    "&fields=generation,metageneration,timeCreated,updated",
	    SF_BUCKET);
	if (n < 0 || (size_t)n >= sizeof(c->target))
		return -1;
	c->hdr[0].data = sf_expect;
	c->hdr[0].next = &c->hdr[1];
	c->hdr[1].data = c->ctype;
	c->hdr[1].next = NULL;
	if (!cfg.raw &&
	    (curl_easy_setopt(c->h, CURLOPT_REQUEST_TARGET, c->target) !=
	            CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, &c->hdr[0]) !=
	            CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, NULL) !=
	            CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, c->body) !=
	            CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE_LARGE,
	            (curl_off_t)c->body_len) != CURLE_OK))
		return -1;
	c->phase = SF_INSERT;
	c->cycle_start_ns = bench_now_ns();
	return client_go(r, c, "POST", true);
}

/* gs_remove's request: the object deleted under both preconditions, or
 * under none when its generation is not known (an insert answered 412
 * to libcurl's resend of it: the first send made it). */
static int
start_delete(sf_run *r, sf_client *c)
{
	int n;

	/* p/bench/c<i> percent-encoded: only the slashes need it. */
	if (c->gen > 0)
		n = snprintf(c->target, sizeof(c->target),
		    "/storage/v1/b/%s/o/"
		    "p%%2Fbench%%2Fc%d?ifGenerationMatch=%" PRId64
		    "&ifMetagenerationMatch=%" PRId64,
		    SF_BUCKET, c->idx, c->gen, c->metagen);
	else
		n = snprintf(c->target, sizeof(c->target),
		    "/storage/v1/b/%s/o/p%%2Fbench%%2Fc%d", SF_BUCKET, c->idx);
	if (n < 0 || (size_t)n >= sizeof(c->target))
		return -1;
	if (!cfg.raw &&
	    (curl_easy_setopt(c->h, CURLOPT_REQUEST_TARGET, c->target) !=
	            CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, NULL) != CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, NULL) != CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L) != CURLE_OK ||
	        curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, "DELETE") !=
	            CURLE_OK))
		return -1;
	c->phase = SF_DELETE;
	return client_go(r, c, "DELETE", false);
}

/* The value of the top-level member KEY (given with its quotes) of the
 * JSON object in BODY, a positive integer written as a string of digits
 * (as GCS writes generations) or as a number; -1 when absent or odd. */
static int64_t
member_i64(const char *body, const char *key)
{
	const char *p = strstr(body, key);
	char num[SF_NUM_MAX];
	size_t n = 0;
	long long v;
	char *end;

	if (p == NULL)
		return -1;
	p += strlen(key);
	while (*p == ' ')
		p++;
	if (*p++ != ':')
		return -1;
	while (*p == ' ')
		p++;
	if (*p == '"')
		p++;
	while (*p >= '0' && *p <= '9') {
		if (n + 1 >= sizeof(num))
			return -1;
		num[n++] = *p++;
	}
	if (n == 0)
		return -1;
	num[n] = '\0';
	errno = 0;
	v = strtoll(num, &end, 10);
	return errno != 0 || *end != '\0' || v <= 0 ? -1 : (int64_t)v;
}

/* C's answer is in (c->status, c->resp): check it, go on with the
 * cycle. */
static void
client_answered(sf_run *r, sf_client *c)
{
	int64_t t;

	if (c->sends > 1)
		r->resent++;
	if (c->phase == SF_INSERT) {
		if (c->status == 412 && c->sends > 1) {
			c->gen = c->metagen = 0;
			if (start_delete(r, c) != 0) {
				fail(r, c, "cannot set up the delete");
				goto idle;
			}
			return;
		}
		if (c->status != 200) {
			fail(r, c, NULL);
			goto idle;
		}
		if (c->resp_too_big) {
			fail(r, c, "an answer too large");
			goto idle;
		}
		c->gen = member_i64(c->resp, "\"generation\"");
		c->metagen = member_i64(c->resp, "\"metageneration\"");
		if (c->gen < 0 || c->metagen < 0) {
			fail(r, c, "no generation in the answer");
			goto idle;
		}
		/* The object exists: delete it even when stopping. */
		if (start_delete(r, c) != 0) {
			fail(r, c, "cannot set up the delete");
			goto idle;
		}
		return;
	}
	/* A 404 to a resent delete: the first send removed the object. */
	if (c->status != 204 && !(c->status == 404 && c->sends > 1)) {
		fail(r, c, NULL);
		goto idle;
	}
	t = bench_now_ns();
	bench_record(&r->lat, r->start_ns, r->end_ns, c->cycle_start_ns, t);
	if (t >= r->end_ns)
		r->stopping = true;
	if (r->stopping)
		goto idle;
	if (start_insert(r, c) != 0) {
		fail(r, c, "cannot set up the insert");
		goto idle;
	}
	return;
idle:
	c->phase = SF_IDLE;
	r->busy--;
}

/* C's transfer ended with RC.  A transport error (a connection closed
 * under it) sends the request again, SF_TRIES times in all. */
static void
client_done(sf_run *r, sf_client *c, CURLcode rc)
{
	if (curl_multi_remove_handle(r->multi, c->h) != CURLM_OK)
		fail(r, c, "curl_multi_remove_handle failed");
	else if (rc != CURLE_OK && c->tries < SF_TRIES) {
		c->tries++;
		answer_clear(c);
		if (curl_multi_add_handle(r->multi, c->h) == CURLM_OK)
			return;
		fail(r, c, "curl_multi_add_handle failed");
	} else if (rc != CURLE_OK)
		fail(r, c, c->cerr[0] ? c->cerr : curl_easy_strerror(rc));
	else {
		if (curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE,
		        &c->status) != CURLE_OK)
			c->status = 0;
		client_answered(r, c);
		return;
	}
	c->phase = SF_IDLE;
	r->busy--;
}

/* The value of header NAME (lowercase, with its colon) in the header
 * block HEAD (NUL-terminated, lines ending in CRLF) as a whole decimal
 * number, or -1 when absent or not one. */
static long
raw_header_num(const char *head, const char *name)
{
	size_t n = strlen(name);
	const char *p;
	char *end;
	long v;

	for (p = strstr(head, "\r\n"); p != NULL; p = strstr(p, "\r\n")) {
		p += 2;
		if (strncasecmp(p, name, n) != 0)
			continue;
		p += n;
		while (*p == ' ' || *p == '\t')
			p++;
		errno = 0;
		v = strtol(p, &end, 10);
		if (errno != 0 || end == p || v < 0 ||
		    (*end != '\r' && *end != ' ' && *end != '\t'))
			return -1;
		return v;
	}
	return -1;
}

/* --raw: C's socket is readable.  Read what is there; once the answer's
 * headers and its Content-Length bytes of body are in, it is answered.
 * An answer it cannot frame (no Content-Length where a body may follow,
 * Transfer-Encoding, too big), a closed connection or an error fails the
 * run. */
static void
raw_readable(sf_run *r, sf_client *c)
{
	size_t head_len, room = sizeof(c->in) - 1 - c->in_len;
	const char *end;
	long clen;
	ssize_t got;

	if (c->phase == SF_IDLE)
		return;
	got = recv(c->fd, c->in + c->in_len, room, 0);
	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (got <= 0) {
		fail(r, c, got == 0 ? "connection closed" : strerror(errno));
		goto idle;
	}
	c->in_len += (size_t)got;
	c->in[c->in_len] = '\0';
	if ((end = strstr(c->in, "\r\n\r\n")) == NULL) {
		if (c->in_len >= SF_HEAD_MAX) {
			fail(r, c, "answer headers too large");
			goto idle;
		}
		return;
	}
	head_len = (size_t)(end - c->in) + 4;
	if (strncmp(c->in, "HTTP/1.1 ", 9) != 0 ||
	    raw_header_num(c->in, "transfer-encoding:") != -1) {
		fail(r, c, "an answer this client cannot frame");
		goto idle;
	}
	c->status = strtol(c->in + 9, NULL, 10);
	clen = raw_header_num(c->in, "content-length:");
	if (clen < 0 && c->status == 204)
		clen = 0;
	if (clen < 0 || clen > SF_RESP_MAX) {
		fail(r, c, "an answer without a usable Content-Length");
		goto idle;
	}
	if (c->in_len < head_len + (size_t)clen)
		return;
	if (c->in_len > head_len + (size_t)clen) {
		fail(r, c, "bytes after the answer");
		goto idle;
	}
	memcpy(c->resp, c->in + head_len, (size_t)clen);
	c->resp[clen] = '\0';
	c->resp_len = (size_t)clen;
	client_answered(r, c);
	return;
idle:
	c->phase = SF_IDLE;
	r->busy--;
}

/* Transfers that ended. */
static void
collect_done(sf_run *r)
{
	CURLMsg *m;
	char *p;
	int left;

	while ((m = curl_multi_info_read(r->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		p = NULL;
		if (curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p) !=
		        CURLE_OK ||
		    p == NULL)
			continue;
		client_done(r, (sf_client *)(void *)p, m->data.result);
	}
}

/* Run every client until the window and the drain after it end.  Fills
 * *CPU0 and *CPU1 at the window's edges.  0, or -1 when the loop itself
 * broke (its clients' errors are in r->errors). */
static int
run(sf_run *r, int64_t *cpu0, int64_t *cpu1)
{
	struct epoll_event evs[RT_LOOP_EVENTS];
	int64_t now, now_ms;
	int i, n, running, flags, timeout;

	for (i = 0; i < cfg.opt.clients; i++) {
		if (start_insert(r, &r->clients[i]) != 0) {
			fprintf(stderr,
			    "storage_floor: cannot start client %d\n", i);
			return -1;
		}
		r->busy++;
	}
	while (r->busy > 0) {
		now = bench_now_ns();
		if (*cpu0 < 0 && now >= r->start_ns)
			*cpu0 = cpu_us();
		if (*cpu1 < 0 && now >= r->end_ns) {
			*cpu1 = cpu_us();
			r->stopping = true;
		}
		if (now >= r->drain_ns) {
			fprintf(stderr,
			    "storage_floor: %d clients still busy %d ms after "
			    "the run\n",
			    r->busy, SF_DRAIN_MS);
			return -1;
		}
		now_ms = now / 1000000;
		timeout = SF_TICK_MS;
		if (r->curl_due_ms >= 0 && r->curl_due_ms - now_ms < timeout)
			timeout = r->curl_due_ms <= now_ms
			    ? 0
			    : (int)(r->curl_due_ms - now_ms);
		n = epoll_wait(r->ep, evs, RT_LOOP_EVENTS, timeout);
		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "storage_floor: epoll_wait: %s\n",
			    strerror(errno));
			return -1;
		}
		for (i = 0; cfg.raw && i < n; i++)
			raw_readable(r, &r->clients[evs[i].data.u32]);
		for (i = 0; !cfg.raw && i < n; i++) {
			flags = 0;
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))
				flags |= CURL_CSELECT_IN;
			if (evs[i].events & EPOLLOUT)
				flags |= CURL_CSELECT_OUT;
			if (evs[i].events & EPOLLERR)
				flags |= CURL_CSELECT_ERR;
			if (curl_multi_socket_action(r->multi, evs[i].data.fd,
			        flags, &running) != CURLM_OK) {
				fprintf(stderr,
				    "storage_floor: "
				    "curl_multi_socket_action failed\n");
				return -1;
			}
		}
		if (!cfg.raw && r->curl_due_ms >= 0 &&
		    r->curl_due_ms <= bench_now_ns() / 1000000) {
			r->curl_due_ms = -1;
			if (curl_multi_socket_action(r->multi,
			        CURL_SOCKET_TIMEOUT, 0, &running) != CURLM_OK) {
				fprintf(stderr,
				    "storage_floor: "
				    "curl_multi_socket_action failed\n");
				return -1;
			}
		}
		if (!cfg.raw)
			collect_done(r);
	}
	if (*cpu1 < 0) /* the clients stopped early, on errors */
		*cpu1 = cpu_us();
	return 0;
}

/* --raw 0|1, --ca FILE */
static int
parse_extra(const char *key, const char *val)
{
	long v;

	if (strcmp(key, "--ca") == 0 && val[0] != '\0') {
		cfg.ca = val;
		return 0;
	}
	if (strcmp(key, "--raw") != 0 || bench_parse_int(val, 0, 1, &v) != 0)
		return -1;
	cfg.raw = v == 1;
	return 0;
}

static int
parse_args(int argc, char **argv)
{
	cfg.opt.clients = 64;
	cfg.opt.seconds = 5;
	cfg.opt.warmup_ms = 1000;
	snprintf(cfg.opt.label, sizeof(cfg.opt.label), "gsfloor");
	if (bench_parse_args(argc, argv, &cfg.opt, SF_CLIENTS_MAX,
	        SF_SECONDS_MAX, parse_extra) != 0)
		return -1;
	if (cfg.raw && cfg.ca != NULL) /* the raw client has no TLS */
		return -1;
	snprintf(cfg.origin, sizeof(cfg.origin), "%s://127.0.0.1:%d",
	    cfg.ca ? "https" : "http", cfg.opt.port);
	return 0;
}

int
main(int argc, char **argv)
{
	sf_run r;
	int64_t cpu0 = -1, cpu1 = -1;
	int i, rc = 1;
	bool curl_up = false;

	memset(&r, 0, sizeof(r));
	r.ep = -1;
	r.curl_due_ms = -1;
	bench_lat_init(&r.lat, SF_LAT_INIT, SF_LAT_MAX);
	if (parse_args(argc, argv) != 0) {
		fprintf(stderr,
		    "usage: storage_floor --port P [--clients 1..%d] "
		    "[--seconds 1..%d] [--warmup MS] [--label L] "
		    "[--raw 0|1 | --ca FILE]\n",
		    SF_CLIENTS_MAX, SF_SECONDS_MAX);
		return 2;
	}
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR ||
	    curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "storage_floor: cannot set up libcurl\n");
		return 1;
	}
	curl_up = true;
	r.rng = (uint64_t)bench_now_ns() ^ ((uint64_t)getpid() << 32);
	if (r.rng == 0)
		r.rng = UINT64_C(0x9e3779b97f4a7c15);
	if ((r.ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (r.multi = curl_multi_init()) == NULL ||
	    (r.clients = calloc((size_t)cfg.opt.clients, sizeof(*r.clients))) ==
	        NULL) {
		fprintf(stderr, "storage_floor: out of memory or fds\n");
		goto out;
	}
	if (curl_multi_setopt(r.multi, CURLMOPT_SOCKETFUNCTION, on_socket) !=
	        CURLM_OK ||
	    curl_multi_setopt(r.multi, CURLMOPT_SOCKETDATA, &r) != CURLM_OK ||
	    curl_multi_setopt(r.multi, CURLMOPT_TIMERFUNCTION, on_timer) !=
	        CURLM_OK ||
	    curl_multi_setopt(r.multi, CURLMOPT_TIMERDATA, &r) != CURLM_OK ||
	    curl_multi_setopt(r.multi, CURLMOPT_MAXCONNECTS,
	        (long)GCS_MULTI_CONNS) != CURLM_OK ||
	    curl_multi_setopt(r.multi, CURLMOPT_PIPELINING,
	        (long)CURLPIPE_MULTIPLEX) != CURLM_OK ||
	    (cfg.ca != NULL &&
	        curl_multi_setopt(r.multi, CURLMOPT_MAX_HOST_CONNECTIONS,
	            (long)GCS_MULTI_H2_CONNS) != CURLM_OK)) {
		fprintf(stderr,
		    "storage_floor: cannot set up the multi "
		    "handle\n");
		goto out;
	}
	for (i = 0; i < cfg.opt.clients; i++)
		r.clients[i].fd = -1;
	for (i = 0; i < cfg.opt.clients; i++)
		if (client_init(&r, &r.clients[i], i) != 0) {
			fprintf(stderr,
			    "storage_floor: cannot set up client "
			    "%d\n",
			    i);
			goto out;
		}
	r.start_ns = bench_now_ns() + (int64_t)cfg.opt.warmup_ms * 1000000;
	r.end_ns = r.start_ns + (int64_t)cfg.opt.seconds * 1000000000;
	r.drain_ns = r.end_ns + (int64_t)SF_DRAIN_MS * 1000000;
	if (run(&r, &cpu0, &cpu1) != 0)
		goto out;
	if (r.lat.n == 0) {
		fprintf(stderr,
		    "storage_floor: FAILED: no cycle completed (%" PRIu64
		    " errors)\n",
		    r.errors);
		goto out;
	}
	if (cpu0 < 0 || cpu1 < cpu0) {
		fprintf(stderr, "storage_floor: FAILED: no CPU time reading\n");
		goto out;
	}
	qsort(r.lat.us, r.lat.n, sizeof(*r.lat.us), bench_cmp_u32);
	bench_print_result(&(bench_result){
	    .label = cfg.opt.label,
	    .clients = cfg.opt.clients,
	    .threads = 1,
	    .window_ns = r.end_ns - r.start_ns,
	    .lat = r.lat.us,
	    .cycles = r.lat.n,
	    .errors = r.errors,
	    .cpu_us = (double)(cpu1 - cpu0),
	});
	if (fflush(stdout) != 0)
		goto out;
	if (r.resent > 0)
		fprintf(stderr,
		    "storage_floor: %" PRIu64 " answers to a request sent "
		    "again (a connection closed under it)\n",
		    r.resent);
	if (r.errors > 0) {
		fprintf(stderr, "storage_floor: FAILED: %" PRIu64 " errors\n",
		    r.errors);
		goto out;
	}
	rc = 0;
out:
	for (i = 0; r.clients != NULL && i < cfg.opt.clients; i++) {
		sf_client *c = &r.clients[i];

		if (c->fd >= 0)
			close(c->fd);
		if (c->h == NULL)
			continue;
		if (c->phase != SF_IDLE && r.multi != NULL)
			curl_multi_remove_handle(r.multi, c->h);
		curl_easy_cleanup(c->h);
	}
	if (r.multi != NULL)
		curl_multi_cleanup(r.multi);
	if (r.ep >= 0)
		close(r.ep);
	free(r.clients);
	free(r.lat.us);
	if (curl_up)
		curl_global_cleanup();
	return rc;
}
