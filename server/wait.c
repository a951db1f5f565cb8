/*
 * wait.c: long-poll waiters without a thread per waiter.
 *
 * A request with wait=N that finds its lock held is suspended (http.c) and
 * queued here behind the earlier waiters of the same lock on this instance.
 * A few poller threads share the work: for each lock with waiters, one
 * store read per poll interval decides whether the head of the queue may
 * try to take it.  The interval backs off (capped, jittered) while the lock
 * stays held, and is cut short by the lease's expiry or by a release
 * handled on this instance (srv_waits_wake), which tries the head at once.
 * Only the head ever tries, so waiters on one instance are served first
 * come, first served.  A grant of a semaphore or shared lease may leave
 * room for more: the next head then looks at once, and so on until one
 * is refused, so a release wakes as many waiters as there are free slots
 * (readers up to the first writer).
 *
 * Every wait has a deadline; a client that hangs up is noticed within
 * SRV_HANGUP_CHECK_MS (suspended connections are not watched by
 * libmicrohttpd); on shutdown every waiter is answered 503.
 *
 * A lease nobody will be told of is not left to hold the lock until its
 * TTL: no write starts for a waiter past its deadline or whose client
 * left, a grant that completes after either is released, and a wait that
 * ends without a grant after an attempt that may have been applied (its
 * answer lost to a storage failure) releases whatever lease that
 * attempt's lease_id holds: except for a request with a client key,
 * whose lease another request may have handed out (see give_back).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "metrics.h"
#include "srv.h"
#include "util/clock.h"

/* How a poll ended, besides an api_code. */
enum {
	POLL_GONE = -1,    /* the client left */
	POLL_REFUSED = -2, /* the caller may no longer take the lock */
	POLL_LATE = -3,    /* the wait ran out: answer what was last seen */
};

typedef struct wlock {
	struct wlock *next;
	srv_waiter *head, *tail;
	int64_t next_poll; /* monotonic ms */
	int backoff;       /* ms */
	bool busy;         /* a poller is working on it, head included */
	bool woken;        /* a lease ended here: try the head at once */
	char name[];
} wlock;

/* Waiters of one owner, for its cap. */
typedef struct owner_count {
	struct owner_count *next;
	size_t n;
	char owner[];
} owner_count;

#define OWNER_BUCKETS 256

struct srv_waits {
	api_service *svc;
	size_t max_total, max_owner;
	owner_count *owners[OWNER_BUCKETS];
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* pollers */
	pthread_cond_t sweep_cv; /* the sweeper: only to stop */
	wlock *locks;
	size_t nwaiters;
	bool refusing; /* shutdown began: no new waiters */
	bool stopping; /* pollers must exit */
	int64_t next_sweep;
	int nthreads;
	pthread_t threads[SRV_WAIT_THREADS];
	bool sweeping; /* the sweeper thread runs */
	pthread_t sweep_thread;
};

static int
jitter(int ms, unsigned *seed)
{
	/* Uniform in [ms/2, ms]: spreads instances that poll one lock. */
	return ms / 2 + (int)(rand_r(seed) % (unsigned)(ms / 2 + 1));
}

static wlock *
find(srv_waits *ws, const char *name)
{
	wlock *l;

	for (l = ws->locks; l != NULL; l = l->next)
		if (strcmp(l->name, name) == 0)
			return l;
	return NULL;
}

static void
unlink_lock(srv_waits *ws, wlock *dead)
{
	wlock **p;

	for (p = &ws->locks; *p != NULL; p = &(*p)->next)
		if (*p == dead) {
			*p = dead->next;
			free(dead);
			return;
		}
}

static owner_count **
owner_slot(srv_waits *ws, const char *owner)
{
	unsigned h = 5381;
	const unsigned char *p;
	owner_count **oc;

	for (p = (const unsigned char *)owner; *p; p++)
		h = h * 33 + *p;
	for (oc = &ws->owners[h % OWNER_BUCKETS]; *oc != NULL;
	     oc = &(*oc)->next)
		if (strcmp((*oc)->owner, owner) == 0)
			break;
	return oc;
}

/* OWNER's count of waiters moved by DELTA (+1 or -1); -1 when out of
 * memory. */
static int
owner_add(srv_waits *ws, const char *owner, int delta)
{
	owner_count **oc = owner_slot(ws, owner), *dead;
	size_t len = strlen(owner);

	if (*oc == NULL) {
		if (delta < 0 ||
		    (*oc = calloc(1, sizeof(**oc) + len + 1)) == NULL)
			return -1;
		memcpy((*oc)->owner, owner, len + 1);
	}
	(*oc)->n = delta > 0 ? (*oc)->n + 1 : (*oc)->n - 1;
	if ((*oc)->n == 0) {
		dead = *oc;
		*oc = dead->next;
		free(dead);
	}
	return 0;
}

static size_t
owner_waiters(srv_waits *ws, const char *owner)
{
	owner_count *oc = *owner_slot(ws, owner);

	return oc != NULL ? oc->n : 0;
}

/* Take W out of L's queue. */
static void
dequeue(wlock *l, srv_waiter *w)
{
	srv_waiter **p, *prev = NULL;

	for (p = &l->head; *p != NULL; prev = *p, p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			if (l->tail == w)
				l->tail = prev;
			w->next = NULL;
			return;
		}
}

/* W leaves L's queue and the counts: its wait is over. */
static void
leave(srv_waits *ws, wlock *l, srv_waiter *w)
{
	dequeue(l, w);
	ws->nwaiters--;
	owner_add(ws, w->req->owner, -1);
}

static int
hung_up(int fd)
{
	char c;
	ssize_t n;

	if (fd < 0)
		return 0;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 ||
	    (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
	        errno != EINTR);
}

/*
 * Give back the lease LEASE_ID of W's request, granted but never to be
 * answered: a release as its owner, which removes that lease and nothing
 * else (another lease has another lease_id).  Best effort: if the storage
 * fails, the TTL frees the lock.
 *
 * Not when the request carries a client key: another request with that
 * key (the client's retry after giving up on this one) finds the same
 * lease as its own and hands it out, and a release here would take it
 * from under the client that was told it holds it.  That client finds it
 * again with its key, or its TTL frees the lock.
 */
static void
give_back(srv_waits *ws, const srv_waiter *w, const char *lease_id)
{
	api_lease_req q;
	api_err err;
	int rc;

	if (w->req->key[0] != '\0')
		return;
	memset(&q, 0, sizeof(q));
	api_copy(q.name, sizeof(q.name), w->req->name);
	api_copy(q.owner, sizeof(q.owner), w->req->owner);
	api_copy(q.lease_id, sizeof(q.lease_id), lease_id);
	rc = api_release(ws->svc, &q, &err);
	if (rc == API_OK) {
		metrics_lock_outcome("abandoned");
	} else if (rc != API_LEASE_LOST && rc != API_LEASE_NOT_FOUND) {
		srv_logf("WARNING",
		    "a lease on %s that nobody will be told of could not be "
		    "given back (%s); it frees itself when its TTL runs out",
		    w->req->name, err.message);
	}
}

/* Answer the waiters on the FINISHED list; called without the mutex. */
static void
deliver(srv_waits *ws, srv_waiter *finished)
{
	srv_waiter *w, *next;

	for (w = finished; w != NULL; w = next) {
		next = w->next;
		w->next = NULL;
		if (w->rc != API_OK && w->maybe_granted)
			give_back(ws, w, w->req->lease_id);
		metrics_wait_observe(
		    (double)(util_mono_ms() - w->start_ms) / 1000.0);
		metrics_waiters_add(-1);
		w->done(w, w->ctx);
	}
}

/* Move waiters past their deadline, or whose client left, to *FIN. */
static void
sweep(srv_waits *ws, int64_t now, srv_waiter **fin)
{
	wlock *l, *lnext;
	srv_waiter *w, *wnext;

	for (l = ws->locks; l != NULL; l = lnext) {
		lnext = l->next;
		for (w = l->head; w != NULL; w = wnext) {
			wnext = w->next;
			if (l->busy && w == l->head)
				continue; /* its poller decides */
			if (now < w->deadline_ms && !hung_up(w->fd))
				continue;
			leave(ws, l, w);
			if (now < w->deadline_ms)
				w->hung_up = true;
			/* else: answered with the last holder seen */
			w->next = *fin;
			*fin = w;
		}
		if (l->head == NULL && !l->busy)
			unlink_lock(ws, l);
	}
}

static wlock *
due(srv_waits *ws, int64_t now, int64_t *next)
{
	wlock *l;

	for (l = ws->locks; l != NULL; l = l->next) {
		if (l->busy || l->head == NULL)
			continue;
		if (l->woken || l->next_poll <= now)
			return l;
		if (l->next_poll < *next)
			*next = l->next_poll;
	}
	return NULL;
}

/* Replace the holder a waiter will be shown if its wait runs out. */
static void
note_holder(srv_waiter *w, api_lock *holder, const api_err *err, int rc)
{
	api_lock_clear(&w->lock);
	w->lock = *holder;
	memset(holder, 0, sizeof(*holder));
	w->err = *err;
	w->rc = rc;
}

/* Whether W may start a write: POLL_GONE, POLL_LATE, POLL_REFUSED (w->rc
 * and w->err say why) or API_OK. */
static int
may_write(srv_waiter *w)
{
	api_err err;
	int rc;

	if (hung_up(w->fd))
		return POLL_GONE; /* do not take a lock nobody will be told of */
	if (util_mono_ms() >= w->deadline_ms)
		return POLL_LATE;
	/* Nor one its caller may no longer take: the token expired during
	 * the wait, or a reloaded policy withdrew the right. */
	if (w->allowed != NULL && (rc = w->allowed(w, &err)) != API_OK) {
		api_lock_clear(&w->lock);
		w->rc = rc;
		w->err = err;
		return POLL_REFUSED;
	}
	return API_OK;
}

/* Milliseconds until HELD's lease may be taken over, on the store's clock;
 * -1 (no hint) when the answer carried no store time. */
static int64_t
expiry_hint(const api_lock *held)
{
	if (held->now_ms <= 0)
		return -1;
	return held->expires_at_ms + API_EXPIRY_MARGIN_MS - held->now_ms;
}

/*
 * One poll for the head waiter W of a lock, made without the mutex.
 * Returns the api code: API_OK = W was granted (w->lock is the lease),
 * or a POLL_ code.
 */
static int
poll_once(srv_waits *ws, srv_waiter *w, bool woken, int64_t *hint_ms)
{
	api_lock seen;
	api_err err;
	int rc;

	*hint_ms = -1;
	if (!woken) {
		/* One read tells whether anyone may try at all: the lock is
		 * free, expired, or this request's own lease (an earlier
		 * attempt whose insert was applied though its answer was
		 * lost, which the attempt below renews).  The read ends by
		 * the waiter's deadline (a slow storage must not hold its
		 * answer up); the write below keeps its own budget, as one
		 * cut short might leave a lease nobody is told of. */
		gcs_give_up_thread(w->deadline_ms);
		rc = api_acquire_peek(ws->svc, w->req, &seen, &err);
		gcs_give_up_thread(0);
		if (rc == API_LOCKED) {
			w->maybe_granted = false; /* ours would be API_OK */
			*hint_ms = expiry_hint(&seen);
			err.retry_after =
			    *hint_ms < 0 ? 2 : (int)(*hint_ms / 1000 + 1);
			snprintf(err.message, sizeof(err.message),
			    "the lock is still held by %.180s: the wait ran "
			    "out",
			    seen.owner);
			note_holder(w, &seen, &err, API_LOCKED);
			return API_LOCKED;
		}
		api_lock_clear(&seen);
		if (rc != API_OK)
			return rc; /* storage trouble: try again later */
	}
	if ((rc = may_write(w)) != API_OK)
		return rc;
	rc = api_acquire(ws->svc, w->req, &seen, &err);
	/* The write may take the storage's whole budget: the client may
	 * have left, or its wait run out, meanwhile. */
	if (rc == API_OK && (rc = may_write(w)) != API_OK) {
		give_back(ws, w, seen.lease_id);
		api_lock_clear(&seen);
		return rc;
	}
	w->maybe_granted = rc != API_OK && rc != API_LOCKED;
	if (rc == API_OK || rc == API_LOCKED) {
		if (rc == API_LOCKED)
			*hint_ms = expiry_hint(&seen);
		note_holder(w, &seen, &err, rc);
	} else {
		api_lock_clear(&seen);
	}
	return rc;
}

/*
 * Answers the waiters whose deadline passed or whose client left, every
 * SRV_HANGUP_CHECK_MS.  The pollers sweep too, but they all may be waiting
 * on a slow storage at once.
 */
static void *
sweeper(void *arg)
{
	srv_waits *ws = arg;
	srv_waiter *fin;
	struct timespec ts;
	int64_t next;

	pthread_mutex_lock(&ws->mu);
	while (!ws->stopping) {
		fin = NULL;
		next = util_mono_ms() + SRV_HANGUP_CHECK_MS;
		sweep(ws, util_mono_ms(), &fin);
		if (fin != NULL) {
			pthread_mutex_unlock(&ws->mu);
			deliver(ws, fin);
			pthread_mutex_lock(&ws->mu);
		}
		ts.tv_sec = next / 1000;
		ts.tv_nsec = (next % 1000) * 1000000;
		while (!ws->stopping &&
		    pthread_cond_timedwait(&ws->sweep_cv, &ws->mu, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&ws->mu);
	return NULL;
}

static void *
poller(void *arg)
{
	srv_waits *ws = arg;
	unsigned seed = (unsigned)(uintptr_t)&seed ^ (unsigned)util_mono_ms();
	srv_waiter *fin;
	struct timespec ts;
	int64_t now, next, hint;
	wlock *l;
	srv_waiter *w;
	bool woken;
	int rc, ms;

	pthread_mutex_lock(&ws->mu);
	while (!ws->stopping) {
		fin = NULL;
		now = util_mono_ms();
		if (now >= ws->next_sweep) {
			ws->next_sweep = now + SRV_HANGUP_CHECK_MS;
			sweep(ws, now, &fin);
		}
		next = ws->next_sweep;
		l = due(ws, now, &next);
		if (l != NULL) {
			l->busy = true;
			woken = l->woken;
			l->woken = false;
			w = l->head;
			pthread_mutex_unlock(&ws->mu);
			rc = poll_once(ws, w, woken, &hint);
			pthread_mutex_lock(&ws->mu);
			l->busy = false;
			now = util_mono_ms();
			if (rc == API_OK || rc == POLL_GONE ||
			    rc == POLL_REFUSED || rc == POLL_LATE ||
			    ws->refusing) {
				leave(ws, l, w);
				if (rc == POLL_GONE)
					w->hung_up = true;
				else if (rc != API_OK && rc != POLL_REFUSED &&
				    rc != POLL_LATE)
					w->rc = API_SHUTTING_DOWN;
				w->next = fin;
				fin = w;
				l->backoff = SRV_POLL_MIN_MS;
			} else {
				l->backoff = l->backoff * 2;
				if (l->backoff > SRV_POLL_MAX_MS)
					l->backoff = SRV_POLL_MAX_MS;
			}
			ms = jitter(l->backoff, &seed);
			if (hint >= 0 && hint < ms)
				ms = (int)hint;
			/* A semaphore or shared lock may have more free
			 * slots: the next waiter looks at once, and so on
			 * until one is refused. */
			if (rc == API_OK && api_acquire_is_group(w->req))
				ms = 0;
			l->next_poll = now + ms;
			if (l->head == NULL)
				unlink_lock(ws, l);
		}
		if (fin != NULL) {
			pthread_mutex_unlock(&ws->mu);
			deliver(ws, fin);
			pthread_mutex_lock(&ws->mu);
			continue;
		}
		if (l != NULL)
			continue;
		ts.tv_sec = next / 1000;
		ts.tv_nsec = (next % 1000) * 1000000;
		pthread_cond_timedwait(&ws->cv, &ws->mu, &ts);
	}
	pthread_mutex_unlock(&ws->mu);
	return NULL;
}

srv_waits *
srv_waits_new(api_service *svc, size_t max_total, size_t max_owner)
{
	srv_waits *ws = calloc(1, sizeof(*ws));
	pthread_condattr_t ca;
	int i;

	if (ws == NULL)
		return NULL;
	ws->svc = svc;
	ws->max_total = max_total;
	ws->max_owner = max_owner;
	pthread_mutex_init(&ws->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ws->cv, &ca);
	pthread_cond_init(&ws->sweep_cv, &ca);
	pthread_condattr_destroy(&ca);
	for (i = 0; i < SRV_WAIT_THREADS; i++) {
		if (pthread_create(&ws->threads[i], NULL, poller, ws) != 0)
			break;
		ws->nthreads++;
	}
	ws->sweeping = ws->nthreads > 0 &&
	    pthread_create(&ws->sweep_thread, NULL, sweeper, ws) == 0;
	if (!ws->sweeping) {
		srv_waits_free(ws);
		return NULL;
	}
	return ws;
}

int
srv_waits_add(srv_waits *ws, srv_waiter *w)
{
	size_t len = strlen(w->req->name);
	wlock *l;

	pthread_mutex_lock(&ws->mu);
	if (ws->refusing) {
		pthread_mutex_unlock(&ws->mu);
		return SRV_WAITS_STOPPING;
	}
	if (ws->nwaiters >= ws->max_total) {
		pthread_mutex_unlock(&ws->mu);
		return SRV_WAITS_FULL;
	}
	if (owner_waiters(ws, w->req->owner) >= ws->max_owner) {
		pthread_mutex_unlock(&ws->mu);
		return SRV_WAITS_OWNER_FULL;
	}
	l = find(ws, w->req->name);
	if (l == NULL) {
		l = calloc(1, sizeof(*l) + len + 1);
		if (l == NULL) {
			pthread_mutex_unlock(&ws->mu);
			return SRV_WAITS_STOPPING;
		}
		memcpy(l->name, w->req->name, len + 1);
		l->backoff = SRV_POLL_MIN_MS;
		l->next_poll = util_mono_ms() + SRV_POLL_MIN_MS;
		l->next = ws->locks;
		ws->locks = l;
	}
	if (owner_add(ws, w->req->owner, 1) != 0) {
		if (l->head == NULL && !l->busy)
			unlink_lock(ws, l);
		pthread_mutex_unlock(&ws->mu);
		return SRV_WAITS_STOPPING;
	}
	w->next = NULL;
	if (l->tail)
		l->tail->next = w;
	else
		l->head = w;
	l->tail = w;
	ws->nwaiters++;
	metrics_waiters_add(1);
	pthread_cond_signal(&ws->cv);
	pthread_mutex_unlock(&ws->mu);
	return SRV_WAITS_QUEUED;
}

int
srv_waits_has(srv_waits *ws, const char *name)
{
	int has;

	pthread_mutex_lock(&ws->mu);
	has = find(ws, name) != NULL;
	pthread_mutex_unlock(&ws->mu);
	return has;
}

int
srv_waits_has_writer(srv_waits *ws, const char *name)
{
	srv_waiter *w;
	wlock *l;
	int has = 0;

	pthread_mutex_lock(&ws->mu);
	if ((l = find(ws, name)) != NULL)
		for (w = l->head; w != NULL && !has; w = w->next)
			has = w->req->mode == API_MODE_EXCLUSIVE &&
			    w->req->limit <= 1;
	pthread_mutex_unlock(&ws->mu);
	return has;
}

void
srv_waits_wake(srv_waits *ws, const char *name)
{
	wlock *l;

	pthread_mutex_lock(&ws->mu);
	if ((l = find(ws, name)) != NULL) {
		l->woken = true;
		pthread_cond_signal(&ws->cv);
	}
	pthread_mutex_unlock(&ws->mu);
}

size_t
srv_waits_count(srv_waits *ws)
{
	size_t n;

	pthread_mutex_lock(&ws->mu);
	n = ws->nwaiters;
	pthread_mutex_unlock(&ws->mu);
	return n;
}

void
srv_waits_shutdown(srv_waits *ws)
{
	srv_waiter *fin = NULL, *w, *wnext;
	wlock *l, *lnext;

	pthread_mutex_lock(&ws->mu);
	ws->refusing = true;
	for (l = ws->locks; l != NULL; l = lnext) {
		lnext = l->next;
		for (w = l->head; w != NULL; w = wnext) {
			wnext = w->next;
			if (l->busy && w == l->head)
				continue; /* its poller answers it */
			leave(ws, l, w);
			w->rc = API_SHUTTING_DOWN;
			w->next = fin;
			fin = w;
		}
		if (l->head == NULL && !l->busy)
			unlink_lock(ws, l);
	}
	pthread_cond_broadcast(&ws->cv);
	pthread_mutex_unlock(&ws->mu);
	deliver(ws, fin);
}

void
srv_waits_free(srv_waits *ws)
{
	int i;

	if (ws == NULL)
		return;
	srv_waits_shutdown(ws);
	pthread_mutex_lock(&ws->mu);
	ws->stopping = true;
	pthread_cond_broadcast(&ws->cv);
	pthread_cond_broadcast(&ws->sweep_cv);
	pthread_mutex_unlock(&ws->mu);
	for (i = 0; i < ws->nthreads; i++)
		pthread_join(ws->threads[i], NULL);
	if (ws->sweeping)
		pthread_join(ws->sweep_thread, NULL);
	/* A poller that was busy at shutdown answered its waiter. */
	srv_waits_shutdown(ws);
	for (i = 0; i < OWNER_BUCKETS; i++)
		while (ws->owners[i] != NULL) {
			owner_count *dead = ws->owners[i];
			ws->owners[i] = dead->next;
			free(dead);
		}
	pthread_cond_destroy(&ws->cv);
	pthread_cond_destroy(&ws->sweep_cv);
	pthread_mutex_destroy(&ws->mu);
	free(ws);
}
