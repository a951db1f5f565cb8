/*
 * wait.c: long-poll waiters without a thread per waiter.
 *
 * A request with wait=N that finds its lock held is suspended (http.c) and
 * queued here behind the earlier waiters of the same lock on this instance.
 * Each lock with waiters has one task (lock_task) on an event loop, the
 * loop of its first waiter's connection: one store read per poll
 * interval, through that loop's libcurl multi like any request, decides
 * whether the head of the queue may try to take it.  Between polls the
 * task sleeps on an rt_waiter.  The interval backs off (capped, jittered)
 * while the lock stays held, and is cut short by the lease's expiry or by
 * a release handled on this instance (srv_waits_wake, from any loop),
 * which wakes the task to try the head at once.  Only the head ever
 * tries, so waiters on one instance are served first come, first served.
 * A grant of a semaphore or shared lease may leave room for more: the
 * next head then looks at once, and so on until one is refused, so a
 * release wakes as many waiters as there are free slots (readers up to
 * the first writer).  The read gives up by the head's deadline (its
 * task's rt_task_deadline).
 *
 * Every wait has a deadline; a client that hangs up is noticed within
 * SRV_HANGUP_CHECK_MS (suspended connections are not watched by
 * libmicrohttpd).  That is the sweeper's work, one thread for every lock:
 * a lock's task may spend a storage call's whole budget on its head's
 * read or write, and its other waiters must still be answered on time
 * (the task polls with a copy of the head's request, so the head may be
 * answered meanwhile).  The waiter being polled is answered at its
 * deadline while its read is in flight, but not while its write is: that
 * write may grant, and its outcome is the answer (a 409 sent meanwhile
 * would be untrue, and a lease granted under a client key can seldom be
 * given back: see give_back).  So a wait may end later than its deadline
 * by one acquire attempt (a few storage calls, each within the store's
 * budget).  The sweeper stays a thread, not a task, because it only
 * takes waiters out of queues and resumes their connections (any thread
 * may), never calls the store, and so needs no loop: a waiter whose end
 * needs a store call (below) is handed to its lock's task.  On shutdown every waiter is answered 503 (the one being
 * polled by its task, once the poll ends), and each lock's task ends once
 * its queue is empty; a loop stops only after its tasks have ended.
 *
 * A lease nobody will be told of is not left to hold the lock until its
 * TTL: no write starts for a waiter past its deadline or whose client
 * left, and a grant that completes after its client left is released
 * (with a client key, only one its write inserted: see give_back).
 * A wait that ends without a grant after an attempt that may have been
 * applied (its answer lost to a storage failure) is answered with that
 * failure, and releases whatever lease that attempt's lease_id holds:
 * except for a request with a client key, whose lease another request
 * may have handed out, and whose client learns from the failure to ask
 * again with its key.  Those releases are made by the lock's task; for a
 * waiter whose client left while it was polled, just after the
 * sweeper's answer.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "metrics.h"
#include "rt/rt.h"
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
	srv_waits *ws;
	srv_waiter *head, *tail;
	srv_waiter *gone; /* swept, to be given back and answered by the task */
	rt_waiter *sleep; /* the task's wait while it sleeps (wake_task) */
	/* The waiter the task polls for, the head when its poll began;
	 * NULL between polls.  The sweeper may take it out of the queue
	 * meanwhile, and the waiter behind it is then the head, but not
	 * the one polled. */
	srv_waiter *polled;
	/* While polling: its write is in flight.  Its outcome is the polled
	 * waiter's answer, so the sweeper leaves that waiter, past its
	 * deadline too, unless its client left. */
	bool writing;
	/* While polling: the sweeper answered the polled waiter (its wait
	 * ran out, or its client left), and the task touches it no more;
	 * owing the give-back of whatever its first attempt may have
	 * left. */
	bool polled_left, polled_owed;
	bool woken; /* a lease ended here: try the head at once */
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
	pthread_cond_t cv;       /* the last lock task ended (srv_waits_free) */
	pthread_cond_t sweep_cv; /* the sweeper: only to stop */
	wlock *locks;
	size_t nwaiters;
	int ntasks;    /* lock tasks alive: as many as LOCKS */
	bool refusing; /* shutdown began: no new waiters */
	bool stopping; /* the sweeper must exit */
	bool sweeping; /* the sweeper thread runs */
	pthread_t sweep_thread;
};

void
srv_poll_pace_init(srv_poll_pace *p, unsigned seed)
{
	p->backoff = SRV_POLL_MIN_MS;
	p->seed = seed;
}

int
srv_poll_next(srv_poll_pace *p, bool refused, int64_t hint_ms)
{
	int ms;

	if (!refused)
		p->backoff = SRV_POLL_MIN_MS;
	else if (p->backoff < SRV_POLL_MAX_MS / 2)
		p->backoff *= 2;
	else
		p->backoff = SRV_POLL_MAX_MS;
	/* Uniform in [backoff/2, backoff]: spreads instances that poll one
	 * lock. */
	ms = p->backoff / 2 +
	    (int)(rand_r(&p->seed) % (unsigned)(p->backoff / 2 + 1));
	if (hint_ms >= 0 && hint_ms < ms)
		ms = (int)hint_ms;
	return ms;
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
 * Give back what REQ got, never to be answered: the lease GRANTED (its
 * write's answer), or, when NULL, whatever lease REQ's lease_id holds
 * (an attempt whose answer was lost, which may have been applied).  A
 * release as its owner, which removes that lease and nothing else
 * (another lease has another lease_id).  Best effort: if the storage
 * fails, the TTL frees the lock.
 *
 * With a client key, another request with that key (the client's retry
 * after giving up on this one) may find the lease as its own and hand it
 * out, renewed: a release then would take it from under the client that
 * was told it holds it.  So a keyed grant is given back only when its
 * write inserted it and it was never renewed (metageneration 1: a lease
 * this write found and renewed may have been handed out before), and
 * only at that version (api_lease_req), which any renewal since moves
 * on.  Any other keyed lease (a group lease, a lost attempt's, whose
 * version is not known) is left: that client finds it again with its
 * key, or its TTL frees the lock.
 */
static void
give_back(srv_waits *ws, const api_acquire_req *req, const api_lock *granted)
{
	bool exact = req->key[0] != '\0' && granted != NULL &&
	    granted->object_metageneration == 1 && !api_acquire_is_group(req);
	api_lease_req q;
	api_err err;
	int rc;

	if (req->key[0] != '\0' && !exact)
		return;
	memset(&q, 0, sizeof(q));
	api_copy(q.name, sizeof(q.name), req->name);
	api_copy(q.owner, sizeof(q.owner), req->owner);
	api_copy(q.lease_id, sizeof(q.lease_id),
	    granted != NULL ? granted->lease_id : req->lease_id);
	if (exact) {
		q.generation = granted->object_generation;
		q.metageneration = granted->object_metageneration;
	}
	rc = api_release(ws->svc, &q, &err);
	if (rc == API_OK) {
		metrics_lock_outcome("abandoned");
	} else if (rc != API_LEASE_LOST && rc != API_LEASE_NOT_FOUND) {
		srv_logf("WARNING",
		    "a lease on %s that nobody will be told of could not be "
		    "given back (%s); it frees itself when its TTL runs out",
		    req->name, api_err_detail(&err));
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
			give_back(ws, w->req, NULL);
		metrics_wait_observe(
		    (double)(util_mono_ms() - w->start_ms) / 1000.0);
		metrics_waiters_add(-1);
		w->done(w, w->ctx);
	}
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

/* What a lock's task knows of the poll it makes for its head W, whose
 * request it copied (Q): the sweeper may answer W meanwhile (l->polled_left),
 * and W is then touched no more. */
typedef struct poll_ctx {
	wlock *l;
	srv_waiter *w;
	api_acquire_req q; /* W's request; its json values referenced */
	int64_t hint_ms;   /* until the lease seen may end; -1: no hint */
	api_lock seen;
	api_err err;
} poll_ctx;

/*
 * The read before a write, without the mutex: whether anyone may try at
 * all (the lock is free, expired, or this request's own lease: an earlier
 * attempt whose insert was applied though its answer was lost, which the
 * write renews).  It ends by the waiter's deadline (a slow storage must
 * not hold its answer up); the write keeps its own budget, as one cut
 * short might leave a lease nobody is told of.  Then, mutex held: API_OK
 * when the write may start, or the poll's end.
 */
static int
poll_read(srv_waits *ws, poll_ctx *c, bool woken)
{
	int rc = API_OK;

	if (!woken) {
		pthread_mutex_unlock(&ws->mu);
		rt_task_deadline_set(c->w->deadline_ms);
		rc = api_acquire_peek(ws->svc, &c->q, &c->seen, &c->err);
		rt_task_deadline_set(0);
		pthread_mutex_lock(&ws->mu);
	}
	if (c->l->polled_left) {
		api_lock_clear(&c->seen);
		return POLL_GONE;
	}
	if (!woken && rc == API_LOCKED) {
		c->w->maybe_granted = false; /* ours would be API_OK */
		c->hint_ms = expiry_hint(&c->seen);
		c->err.retry_after =
		    c->hint_ms < 0 ? 2 : (int)(c->hint_ms / 1000 + 1);
		snprintf(c->err.message, sizeof(c->err.message),
		    "the lock is still held by %.180s: the wait ran out",
		    c->seen.owner);
		note_holder(c->w, &c->seen, &c->err, API_LOCKED);
		return API_LOCKED;
	}
	api_lock_clear(&c->seen);
	if (rc != API_OK)
		return rc; /* storage trouble: try again later */
	return may_write(c->w);
}

/*
 * The write, without the mutex, then (mutex held) its outcome for W.  It
 * may take the storage's whole budget, and W's wait may run out
 * meanwhile: W is answered with what the write did (a grant is a grant,
 * a failure a failure), never with a refusal it no longer knows to be
 * true.  Only a grant nobody will be told of, W's client having left, is
 * given back.  Returns the api code, API_OK = W was granted (w->lock is
 * the lease), or a POLL_ code.
 */
static int
poll_write(srv_waits *ws, poll_ctx *c)
{
	bool back = false; /* to give back: the grant, or what q's lease_id
			      may hold */
	int rc, end;

	c->l->writing = true;
	pthread_mutex_unlock(&ws->mu);
	rc = api_acquire(ws->svc, &c->q, &c->seen, &c->err);
	pthread_mutex_lock(&ws->mu);
	c->l->writing = false;
	if (c->l->polled_left) {
		end = POLL_GONE;
		back = rc != API_LOCKED; /* a failed write may have applied */
	} else if (rc == API_OK && hung_up(c->w->fd)) {
		end = POLL_GONE;
		back = true;
	} else {
		end = rc;
		c->w->maybe_granted = rc != API_OK && rc != API_LOCKED;
		if (rc == API_LOCKED)
			c->hint_ms = expiry_hint(&c->seen);
		if (rc == API_OK || rc == API_LOCKED) {
			note_holder(c->w, &c->seen, &c->err, rc);
		} else {
			/* What the wait ends with if it ends before another
			 * look: the storage failed, and the write may have
			 * been applied (a retry with the client's lease_id
			 * finds out), not the holder seen before it. */
			c->w->rc = rc;
			c->w->err = c->err;
		}
	}
	if (back) {
		pthread_mutex_unlock(&ws->mu);
		give_back(ws, &c->q, rc == API_OK ? &c->seen : NULL);
		pthread_mutex_lock(&ws->mu);
	}
	api_lock_clear(&c->seen);
	return end;
}

/*
 * One poll for the head of L, mutex held on entry and exit (let go while
 * the store works).  Returns the api code, API_OK = the head was granted,
 * or a POLL_ code; POLL_GONE too when the sweeper answered the head
 * meanwhile, after the give-back it was owed, if any.
 */
static int
poll_once(srv_waits *ws, wlock *l, bool woken, int64_t *hint_ms)
{
	poll_ctx c;
	int rc;

	memset(&c, 0, sizeof(c));
	c.l = l;
	c.w = l->polled;
	c.q = *c.w->req;
	json_incref(c.q.labels);
	json_incref(c.q.claims);
	c.hint_ms = -1;
	l->polled_left = false;
	l->polled_owed = false;
	rc = poll_read(ws, &c, woken);
	if (rc == API_OK)
		rc = poll_write(ws, &c);
	else if (l->polled_left && l->polled_owed) {
		pthread_mutex_unlock(&ws->mu);
		give_back(ws, &c.q, NULL);
		pthread_mutex_lock(&ws->mu);
	}
	json_decref(c.q.labels);
	json_decref(c.q.claims);
	*hint_ms = c.hint_ms;
	return rc;
}

/* Wake L's task if it sleeps (mutex held): it looks at its lock again. */
static void
wake_task(wlock *l)
{
	if (l->sleep != NULL) {
		rt_waiter_wake(l->sleep);
		l->sleep = NULL;
	}
}

/*
 * Take the waiters of L whose wait ends now out of its queue: every one
 * when ALL (shutdown: answered 503), else those past their deadline or
 * whose client left, onto *FIN.  A waiter whose end needs a give-back (a
 * store call, made only by a task) goes on L's gone list for L's task
 * instead.  The waiter being polled (L->polled, by identity: the head
 * may have changed since its poll began) is answered here too, when its
 * client left or its deadline passed during a read (not a write: see
 * poll_write), and its task gives back what it may have got
 * (polled_left); at shutdown, its task answers it.  Any other waiter
 * ends by its own deadline, whatever the poll does.  Mutex held.
 */
static void
sweep_lock(srv_waits *ws, wlock *l, int64_t now, bool all, srv_waiter **fin)
{
	srv_waiter *w, *wnext;
	bool polled;

	for (w = l->head; w != NULL; w = wnext) {
		wnext = w->next;
		polled = w == l->polled;
		if (polled && all)
			continue;
		if (all)
			w->rc = API_SHUTTING_DOWN;
		else if (hung_up(w->fd))
			w->hung_up = true;
		else if (now < w->deadline_ms || (polled && l->writing))
			continue;
		/* else: answered with what was last learnt */
		leave(ws, l, w);
		if (polled) {
			l->polled_left = true;
			l->polled_owed = w->maybe_granted;
			w->maybe_granted = false;
		}
		if (w->maybe_granted) {
			w->next = l->gone;
			l->gone = w;
		} else {
			w->next = *fin;
			*fin = w;
		}
	}
	if (l->gone != NULL || l->head == NULL)
		wake_task(l);
}

static void
sweep(srv_waits *ws, int64_t now, bool all, srv_waiter **fin)
{
	wlock *l;

	for (l = ws->locks; l != NULL; l = l->next)
		sweep_lock(ws, l, now, all, fin);
}

/*
 * Answers the waiters whose deadline passed or whose client left, every
 * SRV_HANGUP_CHECK_MS, across every lock: a lock's task may be in a slow
 * storage call for its head meanwhile.  It never calls the store itself.
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
		sweep(ws, util_mono_ms(), false, &fin);
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

/* One poll for L's head, mutex held on entry and exit; a head whose wait
 * ended goes onto *FIN.  *NEXT_POLL (monotonic ms) is when the next is
 * due, by pace P. */
static void
poll_head(srv_waits *ws, wlock *l, srv_poll_pace *p, int64_t *next_poll,
    srv_waiter **fin)
{
	srv_waiter *w = l->head;
	bool woken = l->woken, group = api_acquire_is_group(w->req);
	bool refused = false;
	int64_t hint;
	int rc, ms;

	l->polled = w;
	l->woken = false;
	rc = poll_once(ws, l, woken, &hint);
	l->polled = NULL;
	if (l->polled_left) {
		/* The sweeper answered it: gone, like its client. */
	} else if (rc == API_OK || rc == POLL_GONE || rc == POLL_REFUSED ||
	    rc == POLL_LATE || ws->refusing ||
	    util_mono_ms() >= w->deadline_ms) {
		/* Past its deadline (a write that ran over it): answered
		 * now with what it learnt, as the sweeper would. */
		leave(ws, l, w);
		if (rc == POLL_GONE)
			w->hung_up = true;
		else if (ws->refusing && rc != API_OK && rc != POLL_REFUSED &&
		    rc != POLL_LATE)
			w->rc = API_SHUTTING_DOWN;
		w->next = *fin;
		*fin = w;
	} else {
		refused = true;
	}
	l->polled_left = false;
	ms = srv_poll_next(p, refused, hint);
	/* A semaphore or shared lock may have more free slots: the next
	 * waiter looks at once, and so on until one is refused. */
	if (rc == API_OK && group)
		ms = 0;
	*next_poll = util_mono_ms() + ms;
}

/*
 * The task of lock L, on the loop of its first waiter: until its queue
 * is empty, it answers the waiters the sweeper left to it, polls for the
 * head when due (or woken), and sleeps on an rt_waiter meanwhile, which
 * srv_waits_wake, the sweeper and shutdown wake.  It then takes L out of
 * the table and frees it, under the mutex: a later waiter makes a new one.
 */
static void
lock_task(void *arg)
{
	wlock *l = arg;
	srv_waits *ws = l->ws;
	int64_t next_poll = util_mono_ms() + SRV_POLL_MIN_MS;
	srv_poll_pace p;
	srv_waiter *fin;
	rt_waiter sleep;

	srv_poll_pace_init(&p, (unsigned)(uintptr_t)l ^ (unsigned)next_poll);
	pthread_mutex_lock(&ws->mu);
	for (;;) {
		fin = l->gone;
		l->gone = NULL;
		if (ws->refusing)
			sweep_lock(ws, l, 0, true, &fin);
		else if (fin == NULL && l->head != NULL &&
		    (l->woken || util_mono_ms() >= next_poll))
			poll_head(ws, l, &p, &next_poll, &fin);
		if (fin != NULL) {
			pthread_mutex_unlock(&ws->mu);
			deliver(ws, fin);
			pthread_mutex_lock(&ws->mu);
			continue;
		}
		if (l->head == NULL && l->gone == NULL)
			break;
		if (l->gone != NULL || l->woken || util_mono_ms() >= next_poll)
			continue;
		rt_waiter_init(&sleep);
		l->sleep = &sleep;
		pthread_mutex_unlock(&ws->mu);
		rt_waiter_wait(&sleep, next_poll);
		pthread_mutex_lock(&ws->mu);
		l->sleep = NULL;
	}
	unlink_lock(ws, l);
	if (--ws->ntasks == 0)
		pthread_cond_broadcast(&ws->cv);
	pthread_mutex_unlock(&ws->mu);
}
srv_waits *
srv_waits_new(api_service *svc, size_t max_total, size_t max_owner)
{
	srv_waits *ws = calloc(1, sizeof(*ws));
	pthread_condattr_t ca;

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
	ws->sweeping =
	    pthread_create(&ws->sweep_thread, NULL, sweeper, ws) == 0;
	if (!ws->sweeping) {
		srv_waits_free(ws);
		return NULL;
	}
	return ws;
}

/* The entry of NAME with its task on LOOP, new; NULL when out of memory.
 * Mutex held. */
static wlock *
lock_new(srv_waits *ws, const char *name, rt_loop *loop)
{
	size_t len = strlen(name);
	wlock *l;

	if (loop == NULL || (l = calloc(1, sizeof(*l) + len + 1)) == NULL)
		return NULL;
	memcpy(l->name, name, len + 1);
	l->ws = ws;
	/* It starts once this call has let the mutex go. */
	if (rt_loop_spawn_remote(loop, lock_task, l, NULL) != 0) {
		free(l);
		return NULL;
	}
	ws->ntasks++;
	l->next = ws->locks;
	ws->locks = l;
	return l;
}

int
srv_waits_add(srv_waits *ws, srv_waiter *w)
{
	wlock *l;
	int rc = SRV_WAITS_STOPPING;

	pthread_mutex_lock(&ws->mu);
	if (ws->refusing)
		goto out;
	rc = SRV_WAITS_FULL;
	if (ws->nwaiters >= ws->max_total)
		goto out;
	rc = SRV_WAITS_OWNER_FULL;
	if (owner_waiters(ws, w->req->owner) >= ws->max_owner)
		goto out;
	/* Out of memory: as if stopping.  A new lock's task, which has not
	 * started yet, ends at once with an empty queue. */
	rc = SRV_WAITS_STOPPING;
	if ((l = find(ws, w->req->name)) == NULL &&
	    (l = lock_new(ws, w->req->name, w->loop)) == NULL)
		goto out;
	if (owner_add(ws, w->req->owner, 1) != 0)
		goto out;
	w->next = NULL;
	if (l->tail)
		l->tail->next = w;
	else
		l->head = w;
	l->tail = w;
	ws->nwaiters++;
	metrics_waiters_add(1);
	rc = SRV_WAITS_QUEUED;
out:
	pthread_mutex_unlock(&ws->mu);
	return rc;
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
		wake_task(l);
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
	srv_waiter *fin = NULL;

	pthread_mutex_lock(&ws->mu);
	ws->refusing = true;
	sweep(ws, 0, true, &fin);
	pthread_mutex_unlock(&ws->mu);
	deliver(ws, fin);
}

void
srv_waits_free(srv_waits *ws)
{
	struct timespec ts;
	int64_t by;
	int i;

	if (ws == NULL)
		return;
	srv_waits_shutdown(ws);
	pthread_mutex_lock(&ws->mu);
	ws->stopping = true;
	pthread_cond_broadcast(&ws->sweep_cv);
	pthread_mutex_unlock(&ws->mu);
	if (ws->sweeping)
		pthread_join(ws->sweep_thread, NULL);
	/* The lock tasks answer what they hold and end, on loops that run
	 * until their tasks have ended (or their drain budget has). */
	by = util_mono_ms() + SRV_WAIT_TASKS_END_MS;
	ts.tv_sec = by / 1000;
	ts.tv_nsec = (by % 1000) * 1000000;
	pthread_mutex_lock(&ws->mu);
	while (ws->ntasks > 0 &&
	    pthread_cond_timedwait(&ws->cv, &ws->mu, &ts) == 0)
		;
	i = ws->ntasks;
	pthread_mutex_unlock(&ws->mu);
	if (i > 0) {
		/* A task outlived its loop's drain budget (a storage call
		 * that would not end): the process is ending, and what it
		 * may still touch is left as it is. */
		srv_logf("WARNING", "%d waiter tasks still running at exit", i);
		return;
	}
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
