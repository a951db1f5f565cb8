/*
 * test_wait.c: the waiter queue (server/wait.c) over the mem store wrapped
 * to misbehave: a wait that ends without a grant, after an attempt whose
 * insert was applied though its answer was lost, leaves no lease behind.
 * The lock tasks run on a real event loop, on a thread of the test's own
 * (as on a server's loop); every wait here is bounded.  The pace of the
 * polls is checked step by step, with no clock.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/api.h"
#include "rt/rt.h"
#include "server/srv.h"
#include "util/clock.h"
#include "wrap_store.h"

#define BOUND_MS           5000 /* every wait of this test ends by then */
/* The bound README gives on how long a waiter takes to see a release on
 * another instance: the poll cap, 1 s. */
#define README_POLL_CAP_MS 1000

/* The event loop the waiters' lock tasks run on, and its thread. */
static rt_loop *test_loop;
static pthread_t loop_thread;
static int loop_stop; /* atomic: the loop thread ends */
static sem_t loop_ready;

static void *
loop_main(void *arg)
{
	(void)arg;
	test_loop = rt_loop_new();
	sem_post(&loop_ready);
	while (!__atomic_load_n(&loop_stop, __ATOMIC_SEQ_CST) ||
	    rt_loop_tasks(test_loop) > 0)
		rt_loop_run_once(test_loop, 20);
	rt_loop_free(test_loop);
	return NULL;
}

static int
loop_up(void **state)
{
	(void)state;
	sem_init(&loop_ready, 0, 0);
	if (pthread_create(&loop_thread, NULL, loop_main, NULL) != 0)
		return -1;
	sem_wait(&loop_ready);
	return test_loop != NULL ? 0 : -1;
}

static int
loop_down(void **state)
{
	(void)state;
	__atomic_store_n(&loop_stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(loop_thread, NULL);
	sem_destroy(&loop_ready);
	return 0;
}

typedef struct fixture {
	wrap_store *ws;
	api_service *svc;
	srv_waits *waits;
	api_acquire_req req;
	srv_waiter w;
	int done;         /* waiters answered (their done callback) */
	int64_t write_ms; /* when a hooked write reached the store */
	/* A second waiter, queued behind the first (two_waiters), whose
	 * client may hang up: PEER is its end of the first's socket. */
	api_acquire_req req2;
	srv_waiter w2;
	int peer;
	int64_t hold_until;  /* a hooked store call is answered then */
	int64_t held_end_ms; /* when it was */
	int64_t w2_done_ms;  /* when w2 was answered */
	bool renew;          /* client_gone: a retry renews the lease */
} fixture;

static void
on_done(srv_waiter *w, void *ctx)
{
	fixture *f = ctx;

	if (w == &f->w2)
		__atomic_store_n(&f->w2_done_ms, util_mono_ms(),
		    __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&f->done, 1, __ATOMIC_SEQ_CST);
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	f->ws = wrap_store_new(gcs_mem_new(NULL, NULL));
	f->svc = api_new(&f->ws->base, NULL, NULL);
	f->waits = srv_waits_new(f->svc, 100, 100);
	snprintf(f->req.name, sizeof(f->req.name), "w/lost");
	snprintf(f->req.owner, sizeof(f->req.owner), "alice");
	f->req.ttl = 60;
	api_acquire_prepare(&f->req);
	f->w.req = &f->req;
	f->w.done = on_done;
	f->w.ctx = f;
	f->w.loop = test_loop;
	f->w.fd = -1; /* no client socket: never hung up */
	f->w.start_ms = util_mono_ms();
	f->w.deadline_ms = f->w.start_ms + BOUND_MS;
	f->w.rc = API_UNAVAILABLE;
	f->w.err.code = API_UNAVAILABLE;
	f->peer = -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	srv_waits_free(f->waits);
	api_lock_clear(&f->w.lock);
	api_lock_clear(&f->w2.lock);
	if (f->peer >= 0) {
		close(f->peer);
		close(f->w.fd);
	}
	api_free(f->svc);
	gcs_store_free(&f->ws->base);
	free(f);
	return 0;
}

/* Wait (bounded) until the counter *C reaches N. */
static void
wait_count(const int *c, int n)
{
	int i;

	for (i = 0;
	     i < BOUND_MS / 5 && __atomic_load_n(c, __ATOMIC_SEQ_CST) < n; i++)
		sleep_ms(5);
	assert_true(__atomic_load_n(c, __ATOMIC_SEQ_CST) >= n);
}

/* The client's retry of the fixture's request with its key KEY: granted,
 * the lease into *MINE. */
static void
acquire_with_key(fixture *f, const char *key, api_lock *mine)
{
	api_acquire_req retry;
	api_err e;

	memset(&retry, 0, sizeof(retry));
	snprintf(retry.name, sizeof(retry.name), "%s", f->req.name);
	snprintf(retry.owner, sizeof(retry.owner), "%s", f->req.owner);
	snprintf(retry.key, sizeof(retry.key), "%s", key);
	retry.ttl = 60;
	api_acquire_prepare(&retry);
	assert_int_equal(api_acquire(f->svc, &retry, mine, &e), API_OK);
}

/* Nothing was removed, and the fixture's lock is held by MINE (cleared
 * here). */
static void
still_held_by(fixture *f, api_lock *mine)
{
	api_lock l;
	api_err e;

	assert_int_equal(f->ws->calls[W_REMOVE], 0);
	assert_int_equal(api_inspect(f->svc, f->req.name, &l, &e), API_OK);
	assert_int_equal(l.fencing_token, mine->fencing_token);
	api_lock_clear(&l);
	api_lock_clear(mine);
}

/*
 * The waiter's insert is applied but its answer lost and the call fails;
 * then the wait ends (here: shutdown) before another attempt.  The lease
 * that attempt left is released, by its lease_id, so the lock is free.
 */
static void
test_lost_insert_given_back(void **state)
{
	fixture *f = *state;
	api_lock l;
	api_err e;

	f->ws->lost_op = W_INSERT;
	f->ws->lost_status = GCS_UNAVAILABLE;
	assert_int_equal(srv_waits_add(f->waits, &f->w), 0);
	wait_count(&f->ws->calls[W_INSERT], 1);
	srv_waits_shutdown(f->waits);
	wait_count(&f->done, 1);
	assert_int_equal(f->w.rc, API_SHUTTING_DOWN);
	assert_int_equal(f->ws->calls[W_REMOVE], 1);
	assert_int_equal(api_inspect(f->svc, "w/lost", &l, &e), API_NOT_HELD);
	api_lock_clear(&l);
}

/*
 * The same with a client key: the client gave up on this request and
 * retried with its key, and the retry found the lease this attempt left
 * and handed it out.  Ending this wait must not release that lease from
 * under the client (found by the soak: a release 2 ms after the grant
 * answered 404).
 */
static void
test_keyed_lost_insert_kept(void **state)
{
	fixture *f = *state;
	api_lock mine;

	snprintf(f->req.key, sizeof(f->req.key), "client-key-1");
	f->ws->lost_op = W_INSERT;
	f->ws->lost_status = GCS_UNAVAILABLE;
	assert_int_equal(srv_waits_add(f->waits, &f->w), 0);
	wait_count(&f->ws->calls[W_INSERT], 1);
	acquire_with_key(f, "client-key-1", &mine);
	srv_waits_shutdown(f->waits);
	wait_count(&f->done, 1);
	still_held_by(f, &mine);
}

/* An attempt that failed unapplied leaves nothing, and nothing is
 * deleted: in particular not another holder's lease. */
static void
test_failed_insert_deletes_nothing(void **state)
{
	fixture *f = *state;
	api_acquire_req other;
	api_lock l, held;
	api_err e;

	f->ws->fail_op = W_INSERT;
	f->ws->fail_status = GCS_UNAVAILABLE;
	assert_int_equal(srv_waits_add(f->waits, &f->w), 0);
	wait_count(&f->ws->calls[W_INSERT], 1);
	/* Meanwhile bob takes the lock. */
	memset(&other, 0, sizeof(other));
	snprintf(other.name, sizeof(other.name), "w/lost");
	snprintf(other.owner, sizeof(other.owner), "bob");
	other.ttl = 60;
	api_acquire_prepare(&other);
	assert_int_equal(api_acquire(f->svc, &other, &held, &e), API_OK);
	srv_waits_shutdown(f->waits);
	wait_count(&f->done, 1);
	assert_int_equal(f->ws->calls[W_REMOVE], 0);
	assert_int_equal(api_inspect(f->svc, "w/lost", &l, &e), API_OK);
	assert_int_equal(l.fencing_token, held.fencing_token);
	api_lock_clear(&l);
	api_lock_clear(&held);
}

/* A store hook: the write reached the store; it is answered only after
 * the waiter's deadline and two of the sweeper's looks. */
static void
hold_past_deadline(void *ctx)
{
	fixture *f = ctx;
	int64_t until = f->w.deadline_ms + 2 * SRV_HANGUP_CHECK_MS;
	int i;

	f->write_ms = util_mono_ms();
	for (i = 0; i < BOUND_MS / 10 && util_mono_ms() < until; i++)
		sleep_ms(10);
}

/* The waiter's first look found the lock held (409); its wait ends in a
 * second, and its lock is free. */
static void
wait_a_second(fixture *f, const char *key)
{
	if (key != NULL)
		snprintf(f->req.key, sizeof(f->req.key), "%s", key);
	f->w.deadline_ms = f->w.start_ms + 1000;
	f->w.rc = API_LOCKED;
	f->w.err.code = API_LOCKED;
}

/* The fixture's waiter waits until it is answered; its hooked write
 * reached the store within its wait (else the test proves nothing). */
static void
wait_out(fixture *f)
{
	assert_int_equal(srv_waits_add(f->waits, &f->w), 0);
	wait_count(&f->done, 1);
	assert_true(f->write_ms > 0 && f->write_ms < f->w.deadline_ms);
}

/*
 * The waiter's write is in flight when its wait runs out, and it grants:
 * the waiter is told so (200), and the lease stands.  Before, the sweeper
 * answered the 409 its first look had seen, and the grant was released
 * (without a client key) or left to its TTL with nobody told of it (with
 * one: found by the short soak, "phantom").
 */
static void
grant_past_deadline(fixture *f, const char *key)
{
	api_lock l;
	api_err e;

	wait_a_second(f, key);
	f->ws->before_op = W_INSERT;
	f->ws->before = hold_past_deadline;
	f->ws->before_ctx = f;
	wait_out(f);
	assert_int_equal(f->w.rc, API_OK);
	assert_false(f->w.hung_up);
	assert_int_equal(f->ws->calls[W_REMOVE], 0);
	assert_int_equal(api_inspect(f->svc, "w/lost", &l, &e), API_OK);
	assert_int_equal(l.fencing_token, f->w.lock.fencing_token);
	assert_string_equal(l.owner, "alice");
	api_lock_clear(&l);
}

static void
test_grant_past_deadline_answered(void **state)
{
	grant_past_deadline(*state, NULL);
}

static void
test_keyed_grant_past_deadline_answered(void **state)
{
	grant_past_deadline(*state, "client-key-2");
}

/*
 * A keyed waiter's write is applied, its answer lost (503), and the wait
 * runs out before another look: the waiter is answered with that failure,
 * which tells its client to ask again with its key, and not with the 409
 * of its first look; the lease is left for that retry, which finds it.
 */
static void
test_keyed_lost_write_answered_as_failed(void **state)
{
	fixture *f = *state;
	api_lock mine;

	wait_a_second(f, "client-key-3");
	f->ws->lost_op = W_INSERT;
	f->ws->lost_status = GCS_UNAVAILABLE;
	f->ws->meanwhile = hold_past_deadline;
	f->ws->meanwhile_ctx = f;
	wait_out(f);
	assert_int_equal(f->w.rc, API_UNAVAILABLE);
	assert_int_equal(f->ws->calls[W_REMOVE], 0);
	/* Answered when the write ended, its wait over: no other look at the
	 * store (one was the read before the write). */
	assert_int_equal(f->ws->calls[W_GET], 1);
	acquire_with_key(f, "client-key-3", &mine);
	still_held_by(f, &mine);
}

/* The fixture's waiter gets a client socket (a socket pair), whose other
 * end f->peer can hang up. */
static void
client_socket(fixture *f)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	f->w.fd = sv[0];
	f->peer = sv[1];
}

/*
 * Two waiters of the fixture's lock: the first (alice, its client on a
 * socket pair, so that it can hang up) is the head, far from its
 * deadline; behind it the second, OWNER2's, whose wait ends in 0.6 s,
 * answered RC2 if nothing is learnt meanwhile.
 */
static void
two_waiters(fixture *f, const char *owner2, int rc2)
{
	client_socket(f);
	f->w.rc = API_LOCKED;
	f->w.err.code = API_LOCKED;
	f->req2 = f->req;
	snprintf(f->req2.owner, sizeof(f->req2.owner), "%s", owner2);
	f->req2.lease_id[0] = '\0';
	api_acquire_prepare(&f->req2);
	f->w2 = f->w;
	f->w2.req = &f->req2;
	f->w2.fd = -1;
	f->w2.deadline_ms = f->w2.start_ms + 600;
	f->w2.rc = rc2;
	f->w2.err.code = rc2;
}

/* A store hook: the head's client hangs up, and the call is answered at
 * f->hold_until, past the second waiter's deadline. */
static void
head_leaves_during_call(void *ctx)
{
	fixture *f = ctx;
	int i;

	shutdown(f->peer, SHUT_RDWR);
	for (i = 0; i < BOUND_MS / 10 && util_mono_ms() < f->hold_until; i++)
		sleep_ms(10);
	__atomic_store_n(&f->held_end_ms, util_mono_ms(), __ATOMIC_SEQ_CST);
}

/*
 * The head's client hangs up while its lock is read, and the wait of
 * the waiter behind it runs out during that read.  That waiter's first
 * attempt (no client key) was applied and answered 503: what it left is
 * given back, and the lock is free.  Before, the sweeper took it for the
 * waiter being polled (the head when the poll began), owed the head's
 * give-back in its place (its lease_id holds nothing), and the lease
 * held the lock until its TTL (found by review, with this test).
 */
static void
test_give_back_behind_a_head_that_left(void **state)
{
	fixture *f = *state;
	api_lock l;
	api_err e;

	two_waiters(f, "bob", API_UNAVAILABLE);
	f->ws->lost_op = W_INSERT;
	f->ws->lost_status = GCS_UNAVAILABLE;
	assert_int_equal(api_acquire(f->svc, &f->req2, &l, &e),
	    API_UNAVAILABLE);
	api_lock_clear(&l);
	f->w2.maybe_granted = true; /* as start_wait sets it for that 503 */
	f->hold_until = f->w2.deadline_ms + 2 * SRV_HANGUP_CHECK_MS + 100;
	f->ws->before_op = W_GET;
	f->ws->before = head_leaves_during_call;
	f->ws->before_ctx = f;
	assert_int_equal(srv_waits_add(f->waits, &f->w), 0);
	assert_int_equal(srv_waits_add(f->waits, &f->w2), 0);
	wait_count(&f->done, 2);
	assert_true(f->w.hung_up);
	assert_int_equal(f->w2.rc, API_UNAVAILABLE);
	wait_count(&f->ws->calls[W_REMOVE], 1);
	assert_int_equal(api_inspect(f->svc, "w/lost", &l, &e), API_NOT_HELD);
	api_lock_clear(&l);
}

/*
 * The head's client hangs up while its write is in flight: the waiter
 * behind it is answered by its own deadline, before that write ends
 * (not its write, nor its answer).  Before, it was held until the write
 * ended, taken for the waiter being polled.
 */
static void
test_waiter_behind_a_write_ends_by_its_deadline(void **state)
{
	fixture *f = *state;
	int i;

	two_waiters(f, "bob", API_LOCKED);
	f->hold_until = f->w2.deadline_ms + 2000;
	f->ws->before_op = W_INSERT;
	f->ws->before = head_leaves_during_call;
	f->ws->before_ctx = f;
	assert_int_equal(srv_waits_add(f->waits, &f->w), 0);
	assert_int_equal(srv_waits_add(f->waits, &f->w2), 0);
	wait_count(&f->done, 2);
	assert_int_equal(f->w2.rc, API_LOCKED);
	for (i = 0; i < BOUND_MS / 10 &&
	     __atomic_load_n(&f->held_end_ms, __ATOMIC_SEQ_CST) == 0;
	     i++)
		sleep_ms(10);
	assert_true(f->w2_done_ms > 0 && f->held_end_ms > 0);
	assert_true(f->w2_done_ms < f->held_end_ms);
}

/* A store hook: the client's retry with the fixture's key finds its lease
 * and renews it, to hand it out. */
static void
retry_renews(void *ctx)
{
	fixture *f = ctx;
	api_lock mine;

	acquire_with_key(f, f->req.key, &mine);
	api_lock_clear(&mine);
}

/* A store hook before the waiter's write: its client hangs up; with
 * f->renew, the client's retry renews the lease just before the
 * give-back's delete. */
static void
client_gone(void *ctx)
{
	fixture *f = ctx;

	shutdown(f->peer, SHUT_RDWR);
	if (f->renew) {
		f->ws->before_op = W_REMOVE;
		f->ws->before = retry_renews;
	}
}

/*
 * A keyed waiter's client hangs up while its write is in flight, and
 * the write grants: nobody will be told of that lease, and it is given
 * back (its exact version), unless the client's retry with its key
 * renewed it meanwhile to hand it out: then it stays.  Before, with a
 * key nothing was given back, and the lease held the lock until its TTL
 * though no client knew of it (a retry answered 409 meanwhile, on this
 * instance or another).
 */
static void
keyed_grant_of_a_client_gone(fixture *f, bool renew)
{
	api_lock l;
	api_err e;

	snprintf(f->req.key, sizeof(f->req.key), "client-key-4");
	client_socket(f);
	f->renew = renew;
	f->ws->before_op = W_INSERT;
	f->ws->before = client_gone;
	f->ws->before_ctx = f;
	assert_int_equal(srv_waits_add(f->waits, &f->w), 0);
	wait_count(&f->done, 1);
	/* Every task ended: the give-back, if any, is over. */
	srv_waits_free(f->waits);
	f->waits = NULL;
	assert_true(f->w.hung_up);
	assert_int_equal(f->ws->calls[W_REMOVE], 1);
	assert_int_equal(api_inspect(f->svc, "w/lost", &l, &e),
	    renew ? API_OK : API_NOT_HELD);
	api_lock_clear(&l);
}

/*
 * The client's retry with its key was granted the lease first (it holds
 * it); then the waiter's own write, whose client left, found that lease
 * and renewed it.  The renewal is no grant of the waiter's to give back:
 * the lease stays with the client that was told it holds it.
 */
static void
test_keyed_renewal_of_a_lease_handed_out_kept(void **state)
{
	fixture *f = *state;
	api_lock mine;

	snprintf(f->req.key, sizeof(f->req.key), "client-key-5");
	acquire_with_key(f, "client-key-5", &mine); /* the retry holds it */
	client_socket(f);
	f->ws->before_op = W_PATCH; /* the waiter's renewal */
	f->ws->before = client_gone;
	f->ws->before_ctx = f;
	assert_int_equal(srv_waits_add(f->waits, &f->w), 0);
	wait_count(&f->done, 1);
	srv_waits_free(f->waits); /* every task ended */
	f->waits = NULL;
	assert_true(f->w.hung_up);
	assert_int_equal(f->ws->calls[W_PATCH], 1);
	still_held_by(f, &mine);
}

static void
test_keyed_grant_of_a_client_gone_given_back(void **state)
{
	keyed_grant_of_a_client_gone(*state, false);
}

static void
test_keyed_grant_renewed_by_a_retry_kept(void **state)
{
	keyed_grant_of_a_client_gone(*state, true);
}

/* A waiter for NAME of OWNER, far from its deadline, never done. */
static void
waiter_for(srv_waiter *w, api_acquire_req *q, const char *name,
    const char *owner)
{
	memset(q, 0, sizeof(*q));
	memset(w, 0, sizeof(*w));
	snprintf(q->name, sizeof(q->name), "%s", name);
	snprintf(q->owner, sizeof(q->owner), "%s", owner);
	q->ttl = 60;
	api_acquire_prepare(q);
	w->req = q;
	w->done = on_done;
	w->loop = test_loop;
	w->fd = -1;
	w->start_ms = util_mono_ms();
	w->deadline_ms = w->start_ms + BOUND_MS;
	w->rc = API_LOCKED;
}

/* The caps: in all, and per owner; a wait that ends frees its place. */
static void
test_waiter_caps_hold(void **state)
{
	fixture *f = *state;
	srv_waits *ws;
	api_acquire_req q[5];
	srv_waiter w[5];
	api_acquire_req hq;
	api_lock held;
	api_err e;
	int i;

	/* Someone holds the lock: every waiter stays queued. */
	memset(&hq, 0, sizeof(hq));
	snprintf(hq.name, sizeof(hq.name), "w/capped");
	snprintf(hq.owner, sizeof(hq.owner), "holder");
	hq.ttl = 60;
	api_acquire_prepare(&hq);
	assert_int_equal(api_acquire(f->svc, &hq, &held, &e), API_OK);
	api_lock_clear(&held);
	ws = srv_waits_new(f->svc, 3, 2);
	assert_non_null(ws);
	for (i = 0; i < 5; i++) {
		waiter_for(&w[i], &q[i], "w/capped", i < 3 ? "alice" : "bob");
		w[i].ctx = f;
	}
	assert_int_equal(srv_waits_add(ws, &w[0]), SRV_WAITS_QUEUED);
	assert_int_equal(srv_waits_add(ws, &w[1]), SRV_WAITS_QUEUED);
	assert_int_equal(srv_waits_add(ws, &w[2]), SRV_WAITS_OWNER_FULL);
	assert_int_equal(srv_waits_add(ws, &w[3]), SRV_WAITS_QUEUED);
	assert_int_equal(srv_waits_add(ws, &w[4]), SRV_WAITS_FULL);
	assert_int_equal(srv_waits_count(ws), 3);
	/* A wait that ends (here: its client left) frees its place. */
	w[0].fd = -1;
	w[0].deadline_ms = util_mono_ms(); /* runs out now */
	wait_count(&f->done, 1);
	assert_int_equal(srv_waits_count(ws), 2);
	assert_int_equal(srv_waits_add(ws, &w[2]), SRV_WAITS_QUEUED);
	srv_waits_free(ws);
	for (i = 0; i < 5; i++)
		api_lock_clear(&w[i].lock);
}

static void
on_done_count(srv_waiter *w, void *ctx)
{
	fixture *f = ctx;

	(void)w;
	__atomic_add_fetch(&f->done, 1, __ATOMIC_SEQ_CST);
}

/*
 * A semaphore's two leases end and this instance is told once: its first
 * two waiters are granted (one look after each grant), the third waits
 * on.  A writer waiting is seen by srv_waits_has_writer (readers hold
 * back behind it); semaphore waiters are not writers.
 */
static void
test_group_wakes_free_slots(void **state)
{
	fixture *f = *state;
	api_acquire_req hq[2], q[4];
	api_lease_req rel;
	srv_waiter w[4];
	api_lock held[2];
	api_err e;
	int i;

	for (i = 0; i < 2; i++) {
		waiter_for(&w[0], &hq[i], "w/sem", "holder");
		hq[i].limit = 2;
		assert_int_equal(api_acquire(f->svc, &hq[i], &held[i], &e),
		    API_OK);
	}
	for (i = 0; i < 3; i++) {
		waiter_for(&w[i], &q[i], "w/sem", "waiter");
		q[i].limit = 2;
		w[i].done = on_done_count;
		w[i].ctx = f;
		assert_int_equal(srv_waits_add(f->waits, &w[i]),
		    SRV_WAITS_QUEUED);
	}
	assert_int_equal(srv_waits_has_writer(f->waits, "w/sem"), 0);
	for (i = 0; i < 2; i++) {
		memset(&rel, 0, sizeof(rel));
		snprintf(rel.name, sizeof(rel.name), "w/sem");
		snprintf(rel.owner, sizeof(rel.owner), "holder");
		snprintf(rel.lease_id, sizeof(rel.lease_id), "%s",
		    held[i].lease_id);
		assert_int_equal(api_release(f->svc, &rel, &e), API_OK);
		api_lock_clear(&held[i]);
	}
	srv_waits_wake(f->waits, "w/sem");
	wait_count(&f->done, 2);
	assert_int_equal(w[0].rc, API_OK);
	assert_int_equal(w[1].rc, API_OK);
	/* A writer queued on another lock, held. */
	waiter_for(&w[3], &hq[0], "w/rw", "holder");
	assert_int_equal(api_acquire(f->svc, &hq[0], &held[0], &e), API_OK);
	api_lock_clear(&held[0]);
	waiter_for(&w[3], &q[3], "w/rw", "writer");
	w[3].done = on_done_count;
	w[3].ctx = f;
	assert_int_equal(srv_waits_has_writer(f->waits, "w/rw"), 0);
	assert_int_equal(srv_waits_add(f->waits, &w[3]), SRV_WAITS_QUEUED);
	assert_int_equal(srv_waits_has_writer(f->waits, "w/rw"), 1);
	srv_waits_shutdown(f->waits);
	wait_count(&f->done, 4);
	assert_int_not_equal(w[2].rc, API_OK);
	for (i = 0; i < 4; i++)
		api_lock_clear(&w[i].lock);
}

/*
 * The pace of a lock's polls, step by step (no clock): while the lock
 * stays held the interval doubles from SRV_POLL_MIN_MS and never passes
 * SRV_POLL_MAX_MS, so a release on another instance, which only a poll
 * can see, is seen within the cap; each interval is jittered over
 * [backoff/2, backoff]; a new head starts afresh; the lease's expiry
 * hint cuts an interval short and never stretches one.
 */
static void
test_poll_pace(void **state)
{
	int lo = SRV_POLL_MAX_MS, hi = 0, ms, want, step;
	unsigned seed;
	srv_poll_pace p;

	(void)state;
	for (seed = 1; seed <= 200; seed++) {
		srv_poll_pace_init(&p, seed);
		want = SRV_POLL_MIN_MS;
		for (step = 0; step < 30; step++) {
			ms = srv_poll_next(&p, true, -1);
			want = want * 2 > SRV_POLL_MAX_MS ? SRV_POLL_MAX_MS
			                                  : want * 2;
			assert_in_range(ms, want / 2, want);
			assert_true(ms <= README_POLL_CAP_MS);
			if (want == SRV_POLL_MAX_MS) {
				lo = ms < lo ? ms : lo;
				hi = ms > hi ? ms : hi;
			}
		}
		/* The cap is reached after 4 refusals: 200, 400, 800, 1000. */
		assert_int_equal(p.backoff, SRV_POLL_MAX_MS);
		/* The head's wait ended: the next head starts afresh. */
		ms = srv_poll_next(&p, false, -1);
		assert_in_range(ms, SRV_POLL_MIN_MS / 2, SRV_POLL_MIN_MS);
		ms = srv_poll_next(&p, true, -1);
		assert_in_range(ms, SRV_POLL_MIN_MS, 2 * SRV_POLL_MIN_MS);
	}
	/* The jitter spreads over its range (4,400 draws at the cap). */
	assert_true(lo < SRV_POLL_MAX_MS * 6 / 10);
	assert_true(hi > SRV_POLL_MAX_MS * 9 / 10);
	/* The expiry hint: taken when sooner, at once when due now, never
	 * when later than the backoff or absent. */
	srv_poll_pace_init(&p, 7);
	assert_int_equal(srv_poll_next(&p, true, 30), 30);
	assert_int_equal(srv_poll_next(&p, true, 0), 0);
	ms = srv_poll_next(&p, true, 60000);
	assert_in_range(ms, SRV_POLL_MAX_MS / 2, SRV_POLL_MAX_MS);
	ms = srv_poll_next(&p, true, -1);
	assert_in_range(ms, SRV_POLL_MAX_MS / 2, SRV_POLL_MAX_MS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lost_insert_given_back,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_keyed_lost_insert_kept,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_failed_insert_deletes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_grant_past_deadline_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_keyed_grant_past_deadline_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_keyed_lost_write_answered_as_failed, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_give_back_behind_a_head_that_left, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_waiter_behind_a_write_ends_by_its_deadline, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_keyed_grant_of_a_client_gone_given_back, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_keyed_grant_renewed_by_a_retry_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_keyed_renewal_of_a_lease_handed_out_kept, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_waiter_caps_hold, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_group_wakes_free_slots,
		    setup, teardown),
		cmocka_unit_test(test_poll_pace),
	};

	return cmocka_run_group_tests(tests, loop_up, loop_down);
}
