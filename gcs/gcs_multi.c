/*
 * gcs_multi.c: the store client's transfers (gcs_multi.h), all on one
 * libcurl multi handle that the storage thread drives with its socket
 * interface, so that every loop's requests share one cache of
 * connections.
 *
 * The storage thread runs a runtime loop of its own (rt/rt.h), started on
 * the first transfer.  A caller puts its transfer on the thread's queue
 * and waits for it (an rt_waiter: a task yields its thread meanwhile,
 * anyone else blocks).  The thread adds what it finds queued to the multi
 * handle whenever its loop wakes; there libcurl says which sockets it wants watched (on_socket)
 * and when it wants to be called back (on_timer); this file watches them
 * through the loop (rt_loop_fd_set, rt_timer_set), calls
 * curl_multi_socket_action for both, and wakes the callers whose
 * transfers ended.
 *
 * Why one multi handle and not one per loop: a loop's multi handle keeps
 * its own connections, so a loop whose callers went quiet keeps idle ones
 * while another opens more (69-76 HTTP/1.1 connections for 64 requests in
 * flight, measured), and each loop kept its own HTTP/2 connections.  One
 * cache holds no more connections than requests were in flight at once,
 * and one HTTP/2 connection carries them all.  The hand-over costs two
 * thread wake-ups per request, microseconds against a bucket's tens of
 * milliseconds.
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "rt/rt.h"
#include "util/clock.h"
#include "gcs_http.h"
#include "gcs_multi.h"

/* One transfer, from gcs_multi_perform to collect_done: on its caller's
 * stack, which waits on W. */
typedef struct job {
	CURL *h;
	CURLcode rc;
	rt_waiter w;
	struct job *next; /* the queue */
} job;

/* A storage thread and everything it owns; its thread frees it. */
typedef struct gcs_multi {
	rt_loop *loop;
	CURLM *multi;
	rt_timer timer; /* when libcurl wants a timeout call */
	long host_cap;  /* CURLMOPT_MAX_HOST_CONNECTIONS set, 0: none */
	job *queue;     /* handed over, not yet added: last on top */
	int running;    /* transfers added and not yet ended */
	pthread_t thread;
} gcs_multi;

/* The storage thread (NULL when none runs; one that is no longer this
 * ends once its transfers have), and the socket events the storage
 * threads handled (for tests). */
static struct {
	pthread_mutex_t mu; /* starting and stopping */
	gcs_multi *cur;
	unsigned long events;
} home = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- libcurl's callbacks, on the storage thread ---- */

/*
 * PIPEWAIT makes a transfer wait for a connection that may multiplex only
 * while the host's protocol is unknown.  Once libcurl 7.88 knows the host
 * speaks HTTP/2, a burst of transfers that finds no usable connection
 * (the one it had got a GOAWAY, or the next is still in its handshake)
 * opens a connection each: 59 to a restarted front, measured.  So once an
 * https answer came over HTTP/2 the handle caps connections per host at
 * GCS_MULTI_H2_CONNS (libcurl queues the others until a stream is free);
 * an https answer over HTTP/1.1 lifts the cap, as HTTP/1.1 needs a
 * connection per transfer in flight.  Plain http (an emulator, the
 * metadata server) is HTTP/1.1 only and changes nothing, so it is never
 * capped.  One storage host per process makes the handle's cap a
 * per-host one.
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

/* Transfers that ended: their callers go on. */
static void
collect_done(gcs_multi *d)
{
	CURLMsg *m;
	CURL *h;
	job *j;
	char *p;
	int left;

	while ((m = curl_multi_info_read(d->multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		h = m->easy_handle;
		p = NULL;
		curl_easy_getinfo(h, CURLINFO_PRIVATE, &p);
		if ((j = (job *)(void *)p) == NULL)
			continue;
		j->rc = m->data.result;
		if (j->rc == CURLE_OK)
			host_cap(d, h);
		curl_multi_remove_handle(d->multi, h);
		curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
		d->running--;
		rt_waiter_wake(&j->w); /* J is its caller's again */
	}
}

/* An event on a socket a transfer uses. */
static void
on_event(void *arg, int fd, unsigned events)
{
	gcs_multi *d = arg;
	int flags = 0, running;

	__atomic_add_fetch(&home.events, 1, __ATOMIC_RELAXED);
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
	__atomic_add_fetch(&home.events, 1, __ATOMIC_RELAXED);
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

/* libcurl closes one of the storage thread's sockets. */
static int
on_close(void *clientp, curl_socket_t s)
{
	gcs_multi *d = clientp;

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

/* ---- the storage thread ---- */

/* The transfers handed over since the last look, added to the multi
 * handle (last come first: they all start now). */
static void
take_queue(gcs_multi *d)
{
	job *j = __atomic_exchange_n(&d->queue, NULL, __ATOMIC_ACQUIRE);
	job *next;

	for (; j != NULL; j = next) {
		next = j->next;
		/* A connection made now belongs to D and keeps these. */
		curl_easy_setopt(j->h, CURLOPT_CLOSESOCKETFUNCTION, on_close);
		curl_easy_setopt(j->h, CURLOPT_CLOSESOCKETDATA, d);
		curl_easy_setopt(j->h, CURLOPT_PRIVATE, (char *)j);
		if (curl_multi_add_handle(d->multi, j->h) == CURLM_OK) {
			d->running++;
			continue;
		}
		curl_easy_setopt(j->h, CURLOPT_PRIVATE, NULL);
		j->rc = CURLE_OUT_OF_MEMORY;
		rt_waiter_wake(&j->w);
	}
}

/* Free D: its multi handle first, its connections closing through
 * on_close while the loop is open, then the loop. */
static void
multi_free(gcs_multi *d)
{
	if (d->multi != NULL)
		curl_multi_cleanup(d->multi);
	if (d->loop != NULL) {
		rt_timer_set(d->loop, &d->timer, -1);
		rt_loop_free(d->loop);
	}
	free(d);
}

static void *
home_main(void *arg)
{
	gcs_multi *d = arg;

	while (__atomic_load_n(&home.cur, __ATOMIC_ACQUIRE) == d ||
	    d->running > 0 ||
	    __atomic_load_n(&d->queue, __ATOMIC_ACQUIRE) != NULL) {
		rt_loop_run_once(d->loop, GCS_MULTI_IDLE_MS);
		take_queue(d);
	}
	multi_free(d);
	return NULL;
}

/* A storage thread's state, its loop and its multi handle.  It
 * multiplexes transfers over HTTP/2 (CURLPIPE_MULTIPLEX, libcurl's
 * default, said here because the connection count depends on it): with
 * the handles' PIPEWAIT (gcs_http.c) the process keeps one HTTP/2
 * connection per storage host while the server's stream limit allows.
 * See host_cap for the cap on connections per host.  NULL when out of
 * memory. */
static gcs_multi *
multi_new(void)
{
	gcs_multi *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	gcs_curl_global_init();
	d->timer.fn = on_timeout;
	d->timer.arg = d;
	if ((d->loop = rt_loop_new()) == NULL ||
	    (d->multi = curl_multi_init()) == NULL ||
	    curl_multi_setopt(d->multi, CURLMOPT_SOCKETFUNCTION, on_socket) !=
	        CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_SOCKETDATA, d) != CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_TIMERFUNCTION, on_timer) !=
	        CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_TIMERDATA, d) != CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_MAXCONNECTS,
	        (long)GCS_MULTI_CONNS) != CURLM_OK ||
	    curl_multi_setopt(d->multi, CURLMOPT_PIPELINING,
	        (long)CURLPIPE_MULTIPLEX) != CURLM_OK) {
		multi_free(d);
		return NULL;
	}
	return d;
}

/* The storage thread, started when none runs; NULL when it cannot be
 * (out of memory or threads). */
static gcs_multi *
home_get(void)
{
	gcs_multi *d = __atomic_load_n(&home.cur, __ATOMIC_ACQUIRE);

	if (d != NULL)
		return d;
	pthread_mutex_lock(&home.mu);
	if (home.cur == NULL && (d = multi_new()) != NULL) {
		/* Set first: the thread runs while it is the storage thread. */
		__atomic_store_n(&home.cur, d, __ATOMIC_RELEASE);
		if (pthread_create(&d->thread, NULL, home_main, d) != 0) {
			__atomic_store_n(&home.cur, NULL, __ATOMIC_RELEASE);
			multi_free(d);
		}
	}
	d = home.cur;
	pthread_mutex_unlock(&home.mu);
	return d;
}

CURLcode
gcs_multi_perform(CURL *h)
{
	gcs_multi *d = home_get();
	job j, *head;

	if (d == NULL)
		return CURLE_OUT_OF_MEMORY;
	j.h = h;
	j.rc = CURLE_OK;
	rt_waiter_init(&j.w);
	head = __atomic_load_n(&d->queue, __ATOMIC_RELAXED);
	do
		j.next = head;
	while (!__atomic_compare_exchange_n(&d->queue, &head, &j, true,
	    __ATOMIC_RELEASE, __ATOMIC_RELAXED));
	if (head == NULL) /* else a wake is on its way already */
		rt_loop_wake(d->loop);
	/* Bounded: every transfer has its timeout (CURLOPT_TIMEOUT_MS). */
	rt_waiter_wait(&j.w, RT_FOREVER);
	return j.rc;
}

int
gcs_multi_stop(int64_t wait_ms)
{
	struct timespec ts;
	gcs_multi *d;
	pthread_t th;
	int rc = 0;

	pthread_mutex_lock(&home.mu);
	if ((d = home.cur) != NULL) {
		/* No longer the storage thread: it ends once its transfers
		 * have, and frees D. */
		th = d->thread;
		__atomic_store_n(&home.cur, NULL, __ATOMIC_RELEASE);
		rt_loop_wake(d->loop);
		clock_gettime(CLOCK_REALTIME, &ts); /* pthread_timedjoin_np's */
		ts.tv_sec += (time_t)(wait_ms / 1000);
		ts.tv_nsec += (long)(wait_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_timedjoin_np(th, NULL, &ts) != 0) {
			pthread_detach(th);
			rc = -1;
		}
	}
	pthread_mutex_unlock(&home.mu);
	return rc;
}

unsigned long
gcs_multi_events(void)
{
	return __atomic_load_n(&home.events, __ATOMIC_RELAXED);
}

unsigned long
gcs_multi_epoll_ctls(void)
{
	gcs_multi *d = __atomic_load_n(&home.cur, __ATOMIC_ACQUIRE);

	return d != NULL ? rt_loop_epoll_ctls(d->loop) : 0;
}
