/*
 * test_gcs_multi.c: the store client's transfers on the storage thread
 * (gcs/gcs_multi.c): the gs:// store, called from tasks, keeps its
 * semantics (concurrent calls, a dropped answer reported as attempts > 1);
 * tasks of different loops share its connections; a kept connection stays
 * registered with epoll between transfers, and one its server closed
 * while idle is dropped, not spun on; the thread stops and starts again.
 *
 * No timing upper bounds: concurrency is shown by counts (requests the
 * fake held at once), every wait is bounded.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "util/clock.h"
#include "fake_gcs_proc.h"
#include "gcs/gcs.h"
#include "gcs/gcs_client.h"
#include "gcs/gcs_http.h"
#include "gcs/gcs_multi.h"
#include "rt/rt.h"

#define BUCKET      "bkt"
#define PREFIX      "loop/"
#define RUN_MAX_MS  20000 /* any test's loop gives up after this long */
#define STORE_TASKS 100   /* concurrent store calls, above the old cap of 64 */
#define HOLD_MS     400   /* the fake holds each insert this long */

static fake_gcs fake;

/* Run L until it has no task left, for at most RUN_MAX_MS. */
static void
run_until_idle(rt_loop *l)
{
	int64_t end = util_mono_ms() + RUN_MAX_MS;

	while (rt_loop_tasks(l) > 0 && util_mono_ms() < end)
		rt_loop_run_once(l, 50);
	assert_int_equal(rt_loop_tasks(l), 0);
}

/* ---- the gs:// store from tasks ---- */

static int
group_setup(void **state)
{
	(void)state;
	return fake_gcs_start_group(&fake, NULL);
}

static int
group_teardown(void **state)
{
	(void)state;
	assert_int_equal(gcs_multi_stop(RUN_MAX_MS), 0);
	fake_gcs_stop(&fake);
	return 0;
}

static gcs_store *
open_store(void)
{
	static const gcs_retry_policy p = { 5000, 5, 40, 2000 };
	gcs_store *s;

	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/reset", NULL), 200);
	s = fake_gcs_store(&fake, BUCKET, PREFIX, &p);
	assert_non_null(s);
	return s;
}

typedef struct call {
	gcs_store *s;
	char name[32];
	int insert_rc, get_rc, remove_rc;
	int insert_attempts, remove_attempts;
	int64_t gen;
	char lease[32];
} call;

/* Insert, read back, delete: three storage round trips in one task. */
static void
store_fn(void *arg)
{
	call *c = arg;
	json_t *m = json_object();
	gcs_object o, g;
	gcs_err err;

	json_object_set_new(m, "lease_id", json_string(c->name));
	c->insert_rc = gcs_insert(c->s, c->name, m, &o, &err);
	c->insert_attempts = err.attempts;
	json_decref(m);
	if (c->insert_rc != GCS_OK)
		return;
	c->gen = o.generation;
	c->get_rc = gcs_get(c->s, c->name, &g, &err);
	if (c->get_rc == GCS_OK) {
		snprintf(c->lease, sizeof(c->lease), "%s",
		    json_string_value(json_object_get(g.metadata, "lease_id")));
		gcs_object_clear(&g);
	}
	c->remove_rc =
	    gcs_remove(c->s, c->name, o.generation, o.metageneration, &err);
	c->remove_attempts = err.attempts;
	gcs_object_clear(&o);
}

/* STORE_TASKS tasks on one thread, each insert held HOLD_MS by the fake:
 * they are all at the storage together (no thread per call, no cap of a
 * worker pool), and every call keeps its answer. */
static void
test_store_calls_in_tasks_overlap(void **state)
{
	gcs_store *s = open_store();
	rt_loop *l = rt_loop_new();
	call *c = calloc(STORE_TASKS, sizeof(*c));
	char q[128];
	int i;

	(void)state;
	assert_non_null(c);
	snprintf(q, sizeof(q),
	    "/_fake/fault?op=insert&kind=latency&count=-1&ms=%d", HOLD_MS);
	assert_int_equal(fake_gcs_ctl(&fake, q, NULL), 200);
	for (i = 0; i < STORE_TASKS; i++) {
		c[i].s = s;
		snprintf(c[i].name, sizeof(c[i].name), "t%d", i);
		assert_int_equal(rt_loop_spawn(l, store_fn, &c[i], NULL), 0);
	}
	assert_int_equal(rt_loop_tasks(l), STORE_TASKS);
	run_until_idle(l);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/clear-faults", NULL), 200);
	for (i = 0; i < STORE_TASKS; i++) {
		assert_int_equal(c[i].insert_rc, GCS_OK);
		assert_int_equal(c[i].insert_attempts, 1);
		assert_int_equal(c[i].get_rc, GCS_OK);
		assert_string_equal(c[i].lease, c[i].name);
		assert_int_equal(c[i].remove_rc, GCS_OK);
		assert_int_equal(c[i].remove_attempts, 1);
	}
	assert_int_equal(fake_gcs_count(&fake, "latency_peak"), STORE_TASKS);
	assert_int_equal(fake_gcs_count(&fake, "insert"), STORE_TASKS);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
	free(c);
	rt_loop_free(l);
	gcs_store_free(s);
}

/* Tasks of two loops, one after the other, each loop's SHARE_TASKS at the
 * storage together: the second loop's reuse the connections the first
 * loop's opened (one multi handle for the process), where a multi handle
 * per loop opened SHARE_TASKS more. */
#define SHARE_TASKS 4

static void
test_loops_share_connections(void **state)
{
	gcs_store *s = open_store();
	rt_loop *l[2] = { rt_loop_new(), rt_loop_new() };
	call c[2][SHARE_TASKS];
	char q[128];
	long before, after;
	int i, k;

	(void)state;
	memset(c, 0, sizeof(c));
	assert_int_equal(gcs_multi_stop(RUN_MAX_MS), 0); /* none kept */
	snprintf(q, sizeof(q),
	    "/_fake/fault?op=insert&kind=latency&count=-1&ms=%d", HOLD_MS);
	assert_int_equal(fake_gcs_ctl(&fake, q, NULL), 200);
	/* This control request's connection is counted in BEFORE, the
	 * next one's in AFTER. */
	before = fake_gcs_count(&fake, "connections");
	for (k = 0; k < 2; k++) {
		for (i = 0; i < SHARE_TASKS; i++) {
			c[k][i].s = s;
			snprintf(c[k][i].name, sizeof(c[k][i].name), "s%d-%d",
			    k, i);
			assert_int_equal(rt_loop_spawn(l[k], store_fn, &c[k][i],
			                     NULL),
			    0);
		}
		run_until_idle(l[k]);
	}
	after = fake_gcs_count(&fake, "connections");
	assert_int_equal(fake_gcs_count(&fake, "latency_peak"), SHARE_TASKS);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/clear-faults", NULL), 200);
	for (k = 0; k < 2; k++)
		for (i = 0; i < SHARE_TASKS; i++)
			assert_int_equal(c[k][i].remove_rc, GCS_OK);
	assert_int_equal(after - before - 1, SHARE_TASKS);
	rt_loop_free(l[0]);
	rt_loop_free(l[1]);
	gcs_store_free(s);
}

/* A delete applied with its answer dropped, on a connection the loop's
 * shared cache reused: libcurl or the retry sends it again, the second
 * send finds it gone, and the store says so with attempts == 2, from
 * which the api layer concludes "released". */
static void
test_dropped_answer_in_task_counts_sends(void **state)
{
	gcs_store *s = open_store();
	rt_loop *l = rt_loop_new();
	call warm = { 0 }, c = { 0 };

	(void)state;
	/* A first call leaves a kept connection in the loop's cache. */
	warm.s = s;
	snprintf(warm.name, sizeof(warm.name), "warm");
	if (rt_loop_spawn(l, store_fn, &warm, NULL) == 0)
		run_until_idle(l);
	assert_int_equal(warm.remove_rc, GCS_OK);
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=delete&kind=drop&count=1", NULL),
	    200);
	c.s = s;
	snprintf(c.name, sizeof(c.name), "amb");
	if (rt_loop_spawn(l, store_fn, &c, NULL) == 0)
		run_until_idle(l);
	assert_int_equal(c.insert_rc, GCS_OK);
	assert_int_equal(c.remove_rc, GCS_NOT_FOUND);
	assert_int_equal(c.remove_attempts, 2);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
	rt_loop_free(l);
	gcs_store_free(s);
}

/* Sequential store calls on one loop reuse one kept connection: its
 * socket stays registered with epoll between transfers, so the epoll_ctl
 * calls do not grow with the number of requests (two per request before).
 * A connection libcurl closes (a dropped answer) is forgotten, and its
 * replacement, often under the same fd number, is registered afresh. */
#define SEQ_CALLS 20

static void
seq_fn(void *arg)
{
	call *c = arg;
	int i;

	for (i = 0; i < SEQ_CALLS; i++) {
		snprintf(c->name, sizeof(c->name), "seq%d", i);
		store_fn(c);
		if (c->remove_rc != GCS_OK)
			return;
	}
}

static void
test_kept_connection_stays_registered(void **state)
{
	gcs_store *s = open_store();
	rt_loop *l = rt_loop_new();
	call c = { 0 };
	unsigned long ctls;

	(void)state;
	/* A storage thread of its own, with no connection yet. */
	assert_int_equal(gcs_multi_stop(RUN_MAX_MS), 0);
	c.s = s;
	if (rt_loop_spawn(l, seq_fn, &c, NULL) == 0)
		run_until_idle(l);
	assert_int_equal(c.remove_rc, GCS_OK);
	/* 60 requests; the connection's setup costs a few calls. */
	ctls = gcs_multi_epoll_ctls();
	assert_true(ctls >= 1);
	assert_true(ctls <= 4);
	/* The fake closes the connection after a delete: libcurl closes its
	 * socket and makes a new one. */
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=delete&kind=drop&count=1", NULL),
	    200);
	memset(&c, 0, sizeof(c));
	c.s = s;
	if (rt_loop_spawn(l, seq_fn, &c, NULL) == 0)
		run_until_idle(l);
	/* The dropped delete was seq0's; the rest went through. */
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/clear-faults", NULL), 200);
	memset(&c, 0, sizeof(c));
	c.s = s;
	if (rt_loop_spawn(l, seq_fn, &c, NULL) == 0)
		run_until_idle(l);
	assert_int_equal(c.remove_rc, GCS_OK);
	assert_true(gcs_multi_epoll_ctls() <= ctls + 6);
	assert_int_equal(fake_gcs_count(&fake, "objects"), 0);
	rt_loop_free(l);
	gcs_store_free(s);
}

/* ---- a server that closes a kept connection while it is idle ---- */

typedef struct idle_srv {
	int lfd, port;
	int close_pipe[2]; /* a byte: close the connection now */
	int served;
} idle_srv;

#define IDLE_WAIT_MS 5000 /* any wait of the server thread */

/* Serve one request on FD (read up to the blank line, answer "ok"). */
static int
serve_one(int fd)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
	                         "Content-Type: text/plain\r\n\r\nok";
	char buf[4096];
	size_t got = 0;
	struct pollfd p = { fd, POLLIN, 0 };
	ssize_t n;

	buf[0] = '\0';
	while (strstr(buf, "\r\n\r\n") == NULL && got < sizeof(buf) - 1) {
		if (poll(&p, 1, IDLE_WAIT_MS) != 1)
			return -1;
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = '\0';
	}
	return write(fd, ok, sizeof(ok) - 1) == (ssize_t)(sizeof(ok) - 1) ? 0
	                                                                  : -1;
}

/* Two connections: the first answers one request, then is closed when
 * told (idle, kept alive by the client); the second answers one. */
static void *
idle_srv_main(void *arg)
{
	idle_srv *v = arg;
	struct pollfd p = { v->lfd, POLLIN, 0 };
	char b;
	int fd, i;

	for (i = 0; i < 2; i++) {
		if (poll(&p, 1, IDLE_WAIT_MS) != 1 ||
		    (fd = accept(v->lfd, NULL, NULL)) < 0)
			return NULL;
		if (serve_one(fd) == 0)
			v->served++;
		if (i == 0) {
			struct pollfd q = { v->close_pipe[0], POLLIN, 0 };

			if (poll(&q, 1, IDLE_WAIT_MS) == 1 &&
			    read(v->close_pipe[0], &b, 1) != 1) {
				/* closed anyway below */
			}
		}
		close(fd);
	}
	return NULL;
}

/* Start V's thread on a loopback port of its own (V->port). */
static void
idle_srv_start(idle_srv *v, pthread_t *th)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	v->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(v->lfd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(v->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(v->lfd, 4), 0);
	assert_int_equal(getsockname(v->lfd, (struct sockaddr *)&sa, &len), 0);
	v->port = ntohs(sa.sin_port);
	assert_int_equal(pipe(v->close_pipe), 0);
	assert_int_equal(pthread_create(th, NULL, idle_srv_main, v), 0);
}

/* Wait for V's thread (its waits are bounded) and close its fds. */
static void
idle_srv_stop(idle_srv *v, pthread_t th)
{
	pthread_join(th, NULL);
	close(v->lfd);
	close(v->close_pipe[0]);
	close(v->close_pipe[1]);
}

typedef struct get_call {
	int port;
	CURLcode rc;
	long status;
} get_call;

static size_t
discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

static void
get_fn(void *arg)
{
	get_call *g = arg;
	CURL *h = curl_easy_init();
	char url[64];

	if (h == NULL)
		return;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", g->port);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	g->rc = gcs_multi_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &g->status);
	curl_easy_cleanup(h);
}

/* Have V's server close the kept, idle connection.  The storage thread
 * sees it once and stops watching it: one event, where a socket left
 * registered would fire every round of its loop. */
static void
close_idle(idle_srv *v)
{
	const struct timespec tick = { 0, 5 * 1000 * 1000 };
	const struct timespec pause = { 0, 200 * 1000 * 1000 };
	unsigned long e0 = gcs_multi_events();
	int64_t end = util_mono_ms() + RUN_MAX_MS;

	assert_int_equal(write(v->close_pipe[1], "x", 1), 1);
	while (gcs_multi_events() == e0 && util_mono_ms() < end)
		nanosleep(&tick, NULL);
	nanosleep(&pause, NULL);
	assert_int_equal(gcs_multi_events() - e0, 1);
}

static void
test_idle_connection_closed_by_peer(void **state)
{
	idle_srv v = { 0 };
	pthread_t th;
	rt_loop *l = rt_loop_new();
	get_call g = { 0 };

	(void)state;
	idle_srv_start(&v, &th);

	g.port = v.port;
	if (rt_loop_spawn(l, get_fn, &g, NULL) == 0)
		run_until_idle(l);
	assert_int_equal(g.rc, CURLE_OK);
	assert_int_equal(g.status, 200);
	close_idle(&v);
	/* The next transfer finds the connection dead and makes another. */
	memset(&g, 0, sizeof(g));
	g.port = v.port;
	if (rt_loop_spawn(l, get_fn, &g, NULL) == 0)
		run_until_idle(l);
	assert_int_equal(g.rc, CURLE_OK);
	assert_int_equal(g.status, 200);
	idle_srv_stop(&v, th);
	assert_int_equal(v.served, 2);
	rt_loop_free(l);
}

/* The store client's handle (gcs_http) on a loop's kept connection: a
 * connection the server closed while idle is left before a request is
 * sent on it (one send, not a send into a dead connection and a resend),
 * and never spun on. */
typedef struct http_call {
	int port;
	int rc;
	gcs_resp resp;
} http_call;

static void
http_get_fn(void *arg)
{
	http_call *o = arg;
	gcs_http *h = gcs_http_new();
	char url[64], err[128];

	if (h == NULL)
		return;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", o->port);
	o->rc = gcs_http_perform(h, "GET", url, NULL, NULL, 0, 5000, &o->resp,
	    err, sizeof(err));
	gcs_http_free(h);
}

static void
test_http_idle_connection_closed(void **state)
{
	idle_srv v = { 0 };
	pthread_t th;
	rt_loop *l = rt_loop_new();
	http_call o = { 0 };

	(void)state;
	idle_srv_start(&v, &th);

	o.port = v.port;
	o.rc = -9;
	if (rt_loop_spawn(l, http_get_fn, &o, NULL) == 0)
		run_until_idle(l);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.resp.status, 200);
	assert_int_equal(o.resp.sends, 1);
	assert_int_equal(o.resp.len, 2);
	assert_memory_equal(o.resp.body, "ok", 2);
	gcs_resp_clear(&o.resp);
	close_idle(&v);
	o.rc = -9;
	if (rt_loop_spawn(l, http_get_fn, &o, NULL) == 0)
		run_until_idle(l);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.resp.status, 200);
	assert_int_equal(o.resp.sends, 1); /* not sent into the dead one */
	gcs_resp_clear(&o.resp);
	idle_srv_stop(&v, th);
	assert_int_equal(v.served, 2);
	rt_loop_free(l);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_calls_in_tasks_overlap),
		cmocka_unit_test(test_loops_share_connections),
		cmocka_unit_test(test_dropped_answer_in_task_counts_sends),
		cmocka_unit_test(test_kept_connection_stays_registered),
		cmocka_unit_test(test_idle_connection_closed_by_peer),
		cmocka_unit_test(test_http_idle_connection_closed),
	};

	return cmocka_run_group_tests_name("gcs_multi", tests, group_setup,
	    group_teardown);
}
