/*
 * gcs_multi.c: the store client's transfers on a runtime loop
 * (gcs_multi.h): a libcurl multi handle per loop, driven with its socket
 * interface, and the loop's cache of the client's handles.
 *
 * libcurl says which sockets it wants watched (on_socket) and when it
 * wants to be called back (on_timer); this file watches them through the
 * loop (rt_loop_fd_set, rt_timer_set), calls curl_multi_socket_action for
 * both, and resumes the tasks whose transfers ended.
 *
 * libcurl's sockets are registered lazily.  libcurl asks to stop watching
 * a keep-alive connection when its transfer ends and to watch it again for
 * the next one: two epoll_ctl calls per storage request.  Instead, a
 * socket left registered for reading stays so while idle (its callback
 * becomes on_idle, which costs no system call); the next transfer that
 * wants it read costs nothing.  Should an idle socket become readable
 * (the server closed it), it is dropped from epoll there and then, and
 * libcurl finds the connection dead when it next looks.  When libcurl
 * closes a socket, on_close has the loop forget it, so that a new socket
 * that gets the same number starts afresh.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "rt/rt.h"
#include "util/clock.h"
#include "gcs_http.h"
#include "gcs_multi.h"

/* A loop's part of the store client (its rt_loop_local). */
typedef struct gcs_multi {
	rt_loop *loop;
	CURLM *multi;   /* made on the first transfer */
	rt_timer timer; /* when libcurl wants a timeout call */
	long host_cap;  /* CURLMOPT_MAX_HOST_CONNECTIONS set, 0: none */
	struct {
		void *obj;
		void (*free_fn)(void *);
	} cache[GCS_MULTI_CACHE_MAX]; /* gcs_multi_cache_put, last on top */
	int ncache;
} gcs_multi;

/* One transfer of a task, between gcs_multi_perform and collect_done. */
typedef struct xfer {
	rt_task *task;
	CURLcode rc;
} xfer;

static const char multi_key; /* its rt_loop_local key */

/* ---- libcurl's callbacks ---- */

/* Transfers that ended: their tasks go on. */
static void
collect_done(gcs_multi *d)
{
	CURLMsg *m;
	xfer *x;
	char *p;
	int left;

	while ((m = curl_multi_info_read(d->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		p = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p);
		x = (xfer *)(void *)p;
		if (x == NULL)
			continue;
		x->rc = m->data.result;
		rt_task_resume(x->task);
	}
}

/* An event on a socket a transfer uses. */
static void
on_event(void *arg, int fd, unsigned events)
{
	gcs_multi *d = arg;
	int flags = 0, running;

	if (events & RT_IN)
		flags |= CURL_CSELECT_IN;
	if (events & RT_OUT)
		flags |= CURL_CSELECT_OUT;
	if (events & RT_ERR)
		flags |= CURL_CSELECT_ERR;
	curl_multi_socket_action(d->multi, fd, flags, &running);
	collect_done(d);
}

/* A connection no transfer uses became readable: its peer closed it.
 * Stop watching; libcurl will drop it. */
static void
on_idle(void *arg, int fd, unsigned events)
{
	gcs_multi *d = arg;

	(void)events;
	rt_loop_fd_set(d->loop, fd, 0, NULL, NULL);
}

static int
on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	gcs_multi *d = userp;

	(void)e;
	(void)socketp;
	if (what == CURL_POLL_REMOVE) {
		/* Readable-only: keep it (an idle socket is not readable
		 * unless the peer closed it).  Writable: level-triggered
		 * EPOLLOUT would fire at once, so drop it. */
		if (rt_loop_fd_want(d->loop, s) == RT_IN)
			rt_loop_fd_set(d->loop, s, RT_IN, on_idle, d);
		else
			rt_loop_fd_set(d->loop, s, 0, NULL, NULL);
		return 0;
	}
	return rt_loop_fd_set(d->loop, s,
	    ((what & CURL_POLL_IN) ? RT_IN : 0u) |
	        ((what & CURL_POLL_OUT) ? RT_OUT : 0u),
	    on_event, d);
}

/* libcurl closes one of this loop's sockets. */
static int
on_close(void *clientp, curl_socket_t s)
{
	gcs_multi *d = clientp;

	if (d != NULL)
		rt_loop_fd_set(d->loop, s, 0, NULL, NULL);
	return close(s);
}

static int
on_timer(CURLM *m, long ms, void *userp)
{
	gcs_multi *d = userp;

	(void)m;
	rt_timer_set(d->loop, &d->timer, ms < 0 ? -1 : util_mono_ms() + ms);
	return 0;
}

/* D's timer is due: libcurl's timeouts. */
static void
on_timeout(void *arg)
{
	gcs_multi *d = arg;
	int running;

	curl_multi_socket_action(d->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	collect_done(d);
}

/* ---- a loop's part ---- */

static void
multi_free(void *arg)
{
	gcs_multi *d = arg;

	while (d->ncache > 0) {
		d->ncache--;
		d->cache[d->ncache].free_fn(d->cache[d->ncache].obj);
	}
	/* Its connections close through on_close, while the loop is open. */
	if (d->multi != NULL)
		curl_multi_cleanup(d->multi);
	rt_timer_set(d->loop, &d->timer, -1);
	free(d);
}

/* L's part, made on first use; NULL when out of memory. */
static gcs_multi *
multi_of(rt_loop *l)
{
	gcs_multi *d = rt_loop_local(l, &multi_key);

	if (d != NULL)
		return d;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return NULL;
	d->loop = l;
	d->timer.fn = on_timeout;
	d->timer.arg = d;
	if (rt_loop_local_set(l, &multi_key, d, multi_free) != 0) {
		free(d);
		return NULL;
	}
	return d;
}

/* D's multi handle.  It multiplexes transfers over HTTP/2
 * (CURLPIPE_MULTIPLEX, libcurl's default, said here because the
 * connection count depends on it): with the handles' PIPEWAIT
 * (gcs_http.c) a loop keeps one HTTP/2 connection per storage host while
 * the server's stream limit allows.  See host_cap for the cap on
 * connections per host. */
static int
multi_init(gcs_multi *d)
{
	if (d->multi != NULL)
		return 0;
	gcs_curl_global_init();
	if ((d->multi = curl_multi_init()) == NULL)
		return -1;
	if (curl_multi_setopt(d->multi, CURLMOPT_SOCKETFUNCTION, on_socket) !=
	        CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_SOCKETDATA, d) != CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_TIMERFUNCTION, on_timer) !=
	        CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_TIMERDATA, d) != CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_MAXCONNECTS,
	        (long)GCS_MULTI_CONNS) != CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_PIPELINING,
	        (long)CURLPIPE_MULTIPLEX) != CURLM_OK) {
		curl_multi_cleanup(d->multi);
		d->multi = NULL;
		return -1;
	}
	return 0;
}

/*
 * PIPEWAIT makes a transfer wait for a connection that may multiplex only
 * while the host's protocol is unknown.  Once libcurl 7.88 knows the host
 * speaks HTTP/2, a burst of transfers that finds no usable connection
 * (the one it had got a GOAWAY, or the next is still in its handshake)
 * opens a connection each: 59 to a restarted front, measured.  So once an
 * https answer came over HTTP/2 the loop caps connections per host at
 * GCS_MULTI_H2_CONNS (libcurl queues the others until a stream is free);
 * an https answer over HTTP/1.1 lifts the cap, as HTTP/1.1 needs a
 * connection per transfer in flight.  Plain http (an emulator, the
 * metadata server) is HTTP/1.1 only and changes nothing, so it is never
 * capped.  One storage host per loop makes a per-loop cap a per-host one.
 */
static void
host_cap(gcs_multi *d, CURL *h)
{
	char *scheme = NULL;
	long ver = 0, cap;

	if (curl_easy_getinfo(h, CURLINFO_SCHEME, &scheme) != CURLE_OK ||
	    scheme == NULL || strcasecmp(scheme, "https") != 0 ||
	    curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &ver) != CURLE_OK ||
	    ver == 0)
		return;
	cap = ver == CURL_HTTP_VERSION_2_0 ? GCS_MULTI_H2_CONNS : 0;
	if (cap != d->host_cap &&
	    curl_multi_setopt(d->multi, CURLMOPT_MAX_HOST_CONNECTIONS, cap) ==
	        CURLM_OK)
		d->host_cap = cap;
}

CURLcode
gcs_multi_perform(CURL *h)
{
	rt_loop *l = rt_loop_self();
	gcs_multi *d;
	xfer x;

	if (l == NULL) {
		/* Outside any loop (`lockgate check`, unit tests): blocking.
		 * Connections it makes are its own, not a loop's. */
		curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, NULL);
		curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, NULL);
		return curl_easy_perform(h);
	}
	if ((d = multi_of(l)) == NULL || multi_init(d) != 0)
		return CURLE_OUT_OF_MEMORY;
	/* A connection made now belongs to D's cache and keeps these. */
	curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, on_close);
	curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, d);
	x.task = rt_task_self();
	x.rc = CURLE_OK;
	curl_easy_setopt(h, CURLOPT_PRIVATE, (char *)&x);
	if (curl_multi_add_handle(d->multi, h) != CURLM_OK) {
		curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
		return CURLE_OUT_OF_MEMORY;
	}
	rt_task_suspend(); /* until collect_done */
	if (x.rc == CURLE_OK)
		host_cap(d, h);
	curl_multi_remove_handle(d->multi, h);
	curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
	return x.rc;
}

/* ---- objects kept for a loop's tasks ---- */

void *
gcs_multi_cache_take(void (*free_fn)(void *))
{
	rt_loop *l = rt_loop_self();
	gcs_multi *d = l ? rt_loop_local(l, &multi_key) : NULL;
	void *obj;
	int i;

	if (d == NULL)
		return NULL;
	for (i = d->ncache - 1; i >= 0; i--) {
		if (d->cache[i].free_fn != free_fn)
			continue;
		obj = d->cache[i].obj;
		d->ncache--;
		memmove(&d->cache[i], &d->cache[i + 1],
		    (size_t)(d->ncache - i) * sizeof(d->cache[0]));
		return obj;
	}
	return NULL;
}

int
gcs_multi_cache_put(void *obj, void (*free_fn)(void *))
{
	rt_loop *l = rt_loop_self();
	gcs_multi *d = l ? multi_of(l) : NULL;

	if (d == NULL || d->ncache == GCS_MULTI_CACHE_MAX)
		return -1;
	d->cache[d->ncache].obj = obj;
	d->cache[d->ncache].free_fn = free_fn;
	d->ncache++;
	return 0;
}
