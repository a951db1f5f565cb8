/*
 * group_contract.c: semaphores and shared locks (api/group.c) over any
 * store, run by store_contract_run after the store's own contract, so on
 * mem://, file:// and gs:// (the fake, plain and with transient faults).
 * The store is wrapped to count writes: an uncontended acquire, refresh
 * and release each cost exactly one, the first use of a name included
 * (its lease is carried by the head that insert creates).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/api.h"
#include "group_contract.h"
#include "wrap_store.h"

#define GC_LEASES 3 /* the semaphore's limit in these tests */

static store_contract_open_fn gc_open;
static store_contract_close_fn gc_close;
static void *gc_ctx;
static unsigned gc_seq;

typedef struct gc_state {
	wrap_store *ws;
	api_service *svc;
	char name[API_NAME_MAX + 1]; /* this test's lock */
	bool increasing; /* tokens strictly increase (mem://, file://) */
} gc_state;

static int
gc_setup(void **state)
{
	gc_state *st = calloc(1, sizeof(*st));
	gcs_store *s;

	if (st == NULL || (s = gc_open(gc_ctx)) == NULL) {
		free(st);
		return -1;
	}
	st->increasing = strcmp(s->ops->scheme, "gs") != 0;
	st->ws = wrap_store_new(s);
	st->svc = api_new(&st->ws->base, NULL, NULL);
	snprintf(st->name, sizeof(st->name), "gc%ldx%u/lock", (long)getpid(),
	    ++gc_seq);
	*state = st;
	return 0;
}

static int
gc_teardown(void **state)
{
	gc_state *st = *state;
	gcs_store *inner;

	if (st == NULL)
		return 0;
	api_free(st->svc);
	/* The wrapper is ours; the store goes back to who made it. */
	inner = st->ws->inner;
	free(st->ws);
	gc_close(inner, gc_ctx);
	free(st);
	return 0;
}

static void
acq(api_acquire_req *q, const gc_state *st, const char *owner, api_mode mode,
    int limit, int ttl)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->name, sizeof(q->name), "%s", st->name);
	snprintf(q->owner, sizeof(q->owner), "%s", owner);
	snprintf(q->holder, sizeof(q->holder), "job-of-%s", owner);
	q->ttl = ttl;
	q->mode = mode;
	q->limit = limit;
	api_acquire_prepare(q);
}

/* Acquire, expecting WANT (and REASON, NULL for the default). */
static void
take(gc_state *st, const char *owner, api_mode mode, int limit, int want,
    const char *reason, api_lock *out)
{
	api_acquire_req q;
	api_err err;
	json_t *j;

	acq(&q, st, owner, mode, limit, 30);
	{
		int _r = api_acquire(st->svc, &q, out, &err);
		if (_r != want)
			fprintf(stderr, "DBG %s %d %s\n", owner, _r,
			    err.message);
		assert_int_equal(_r, want);
	}
	if (want != API_OK) {
		if (reason == NULL)
			assert_null(err.reason);
		else
			assert_string_equal(err.reason, reason);
		/* The refusal names the holders, without their lease_id. */
		j = api_lock_json(out, false);
		assert_true(
		    json_array_size(json_object_get(j, "holders")) >= 1);
		assert_null(json_object_get(json_array_get(json_object_get(j,
		                                               "holders"),
		                                0),
		    "lease_id"));
		json_decref(j);
		api_lock_clear(out);
	}
}

static void
lease_of(api_lease_req *q, const api_lock *l)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->name, sizeof(q->name), "%s", l->name);
	snprintf(q->owner, sizeof(q->owner), "%s", l->owner);
	snprintf(q->lease_id, sizeof(q->lease_id), "%s", l->lease_id);
}

/* NEWER, a fencing token handed out after OLDER, is another one, and on
 * a store whose tokens increase (not every emulator's), a larger one. */
static void
newer_token(const gc_state *st, int64_t newer, int64_t older)
{
	assert_true(newer != older);
	if (st->increasing)
		assert_true(newer > older);
}

static void
give_back(gc_state *st, const api_lock *l)
{
	api_lease_req q;
	api_err err;

	lease_of(&q, l);
	assert_int_equal(api_release(st->svc, &q, &err), API_OK);
}

/* Holders shown by inspect, or -1 when not held. */
static int
holders_now(gc_state *st)
{
	api_lock l;
	api_err err;
	int n = -1;
	size_t i;

	if (api_inspect(st->svc, st->name, &l, &err) == API_OK) {
		json_t *j = api_lock_json(&l, false);
		json_t *h = json_object_get(j, "holders");
		n = (int)json_array_size(h);
		for (i = 0; i < json_array_size(h); i++)
			assert_null(
			    json_object_get(json_array_get(h, i), "lease_id"));
		json_decref(j);
	}
	api_lock_clear(&l);
	return n;
}

static void
test_semaphore_limit(void **state)
{
	gc_state *st = *state;
	api_lock l[GC_LEASES + 1], extra;
	api_lease_req rq;
	api_err err;
	int i, j;

	/* The first use makes the head, carrying the lease: one write;
	 * then one each. */
	take(st, "a0", API_MODE_EXCLUSIVE, GC_LEASES, API_OK, NULL, &l[0]);
	assert_int_equal(wrap_writes(st->ws), 1);
	for (i = 1; i < GC_LEASES; i++) {
		wrap_reset(st->ws);
		take(st, "a", API_MODE_EXCLUSIVE, GC_LEASES, API_OK, NULL,
		    &l[i]);
		assert_int_equal(wrap_writes(st->ws), 1);
	}
	for (i = 0; i < GC_LEASES; i++)
		for (j = 0; j < i; j++) {
			assert_true(l[i].fencing_token != l[j].fencing_token);
			assert_string_not_equal(l[i].lease_id, l[j].lease_id);
			if (st->increasing)
				assert_true(
				    l[i].fencing_token > l[j].fencing_token);
		}
	assert_int_equal(holders_now(st), GC_LEASES);
	take(st, "b", API_MODE_EXCLUSIVE, GC_LEASES, API_LOCKED, NULL, &extra);
	assert_int_equal(holders_now(st), GC_LEASES);

	/* Refresh and release: one write each, per lease, the one the head
	 * carries included. */
	wrap_reset(st->ws);
	lease_of(&rq, &l[0]);
	assert_int_equal(api_refresh(st->svc, &rq, &extra, &err), API_OK);
	assert_int_equal(extra.fencing_token, l[0].fencing_token);
	api_lock_clear(&extra);
	assert_int_equal(wrap_writes(st->ws), 1);
	wrap_reset(st->ws);
	give_back(st, &l[0]);
	assert_int_equal(wrap_writes(st->ws), 1);
	assert_int_equal(api_refresh(st->svc, &rq, &extra, &err),
	    API_LEASE_NOT_FOUND);
	assert_int_equal(holders_now(st), GC_LEASES - 1);
	take(st, "a0", API_MODE_EXCLUSIVE, GC_LEASES, API_OK, NULL, &l[0]);
	wrap_reset(st->ws);
	lease_of(&rq, &l[1]);
	assert_int_equal(api_refresh(st->svc, &rq, &extra, &err), API_OK);
	assert_int_equal(extra.fencing_token, l[1].fencing_token);
	api_lock_clear(&extra);
	assert_int_equal(wrap_writes(st->ws), 1);
	wrap_reset(st->ws);
	give_back(st, &l[1]);
	assert_int_equal(wrap_writes(st->ws), 1);
	assert_int_equal(api_refresh(st->svc, &rq, &extra, &err),
	    API_LEASE_NOT_FOUND);
	assert_int_equal(holders_now(st), GC_LEASES - 1);

	take(st, "b", API_MODE_EXCLUSIVE, GC_LEASES, API_OK, NULL, &l[1]);
	take(st, "c", API_MODE_EXCLUSIVE, GC_LEASES, API_LOCKED, NULL, &extra);
	for (i = 0; i < GC_LEASES; i++) {
		give_back(st, &l[i]);
		api_lock_clear(&l[i]);
	}
	assert_int_equal(holders_now(st), -1);
}

static void
test_shared_and_exclusive(void **state)
{
	gc_state *st = *state;
	api_lock r[4], w, extra;
	api_lease_req rq;
	api_err err;
	int64_t top = 0;
	gcs_object o;
	gcs_err ge;
	int i;

	for (i = 0; i < 4; i++) {
		wrap_reset(st->ws);
		take(st, "reader", API_MODE_SHARED, 1, API_OK, NULL, &r[i]);
		/* The first one included: one write each. */
		assert_int_equal(wrap_writes(st->ws), 1);
		assert_int_equal(r[i].mode, API_MODE_SHARED);
		if (r[i].fencing_token > top)
			top = r[i].fencing_token;
	}
	assert_int_equal(holders_now(st), 4);
	/* Readers refuse a writer: locked, not another limit. */
	take(st, "writer", API_MODE_EXCLUSIVE, 1, API_LOCKED, NULL, &extra);
	take(st, "sem", API_MODE_EXCLUSIVE, 2, API_LOCKED, "limit_mismatch",
	    &extra);
	/* The first reader's lease, carried by the head: one write to
	 * refresh, one to release. */
	wrap_reset(st->ws);
	lease_of(&rq, &r[0]);
	assert_int_equal(api_refresh(st->svc, &rq, &extra, &err), API_OK);
	api_lock_clear(&extra);
	assert_int_equal(wrap_writes(st->ws), 1);
	for (i = 0; i < 4; i++) {
		wrap_reset(st->ws);
		give_back(st, &r[i]);
		assert_int_equal(wrap_writes(st->ws), 1);
		api_lock_clear(&r[i]);
	}
	/* The head stays after the last release. */
	assert_int_equal(gcs_get(&st->ws->base, st->name, &o, &ge), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(o.metadata, "lg_kind")),
	    "group");
	gcs_object_clear(&o);
	assert_int_equal(holders_now(st), -1);

	/* An exclusive lease over the head, then readers are refused. */
	take(st, "writer", API_MODE_EXCLUSIVE, 1, API_OK, NULL, &w);
	newer_token(st, w.fencing_token, top);
	assert_int_equal(holders_now(st), 1);
	take(st, "reader", API_MODE_SHARED, 1, API_LOCKED, NULL, &extra);
	take(st, "sem", API_MODE_EXCLUSIVE, 2, API_LOCKED, "limit_mismatch",
	    &extra);
	/* Its release deletes the name: the default path again, one write. */
	give_back(st, &w);
	api_lock_clear(&w);
	assert_int_equal(gcs_get(&st->ws->base, st->name, &o, &ge),
	    GCS_NOT_FOUND);
	wrap_reset(st->ws);
	take(st, "writer", API_MODE_EXCLUSIVE, 1, API_OK, NULL, &w);
	assert_int_equal(wrap_writes(st->ws), 1);
	give_back(st, &w);
	api_lock_clear(&w);
}

static void
test_limit_mismatch(void **state)
{
	gc_state *st = *state;
	api_lock a, extra;

	take(st, "a", API_MODE_EXCLUSIVE, 3, API_OK, NULL, &a);
	take(st, "b", API_MODE_EXCLUSIVE, 2, API_LOCKED, "limit_mismatch",
	    &extra);
	take(st, "b", API_MODE_SHARED, 1, API_LOCKED, "limit_mismatch", &extra);
	take(st, "b", API_MODE_EXCLUSIVE, 1, API_LOCKED, "limit_mismatch",
	    &extra);
	give_back(st, &a);
	api_lock_clear(&a);
	/* An exclusive holder refuses a semaphore as another limit, and a
	 * reader as locked. */
	take(st, "a", API_MODE_EXCLUSIVE, 1, API_OK, NULL, &a);
	take(st, "b", API_MODE_EXCLUSIVE, 3, API_LOCKED, "limit_mismatch",
	    &extra);
	take(st, "b", API_MODE_SHARED, 1, API_LOCKED, NULL, &extra);
	give_back(st, &a);
	api_lock_clear(&a);
	take(st, "a", API_MODE_SHARED, 1, API_OK, NULL, &a);
	take(st, "b", API_MODE_EXCLUSIVE, 3, API_LOCKED, "limit_mismatch",
	    &extra);
	give_back(st, &a);
	api_lock_clear(&a);
}

static void
test_reacquire_by_key(void **state)
{
	gc_state *st = *state;
	api_acquire_req q;
	api_lock a, b;
	api_err err;

	acq(&q, st, "a", API_MODE_EXCLUSIVE, 2, 30);
	snprintf(q.key, sizeof(q.key), "client-key-1");
	assert_int_equal(api_acquire(st->svc, &q, &a, &err), API_OK);
	acq(&q, st, "a", API_MODE_EXCLUSIVE, 2, 30);
	snprintf(q.key, sizeof(q.key), "client-key-1");
	assert_int_equal(api_acquire(st->svc, &q, &b, &err), API_OK);
	assert_int_equal(a.fencing_token, b.fencing_token);
	assert_string_equal(a.lease_id, b.lease_id);
	assert_int_equal(holders_now(st), 1);
	give_back(st, &b);
	api_lock_clear(&a);
	api_lock_clear(&b);
	assert_int_equal(holders_now(st), -1);
}

static void
test_other_instance(void **state)
{
	gc_state *st = *state;
	api_service *other = api_new(&st->ws->base, NULL, NULL);
	api_lease_req rq;
	api_lock a, r;
	api_err err;

	take(st, "a", API_MODE_SHARED, 1, API_OK, NULL, &a);
	lease_of(&rq, &a);
	wrap_reset(st->ws);
	assert_int_equal(api_refresh(other, &rq, &r, &err), API_OK);
	assert_int_equal(r.fencing_token, a.fencing_token);
	assert_int_equal(wrap_writes(st->ws), 1);
	api_lock_clear(&r);
	assert_int_equal(api_release(other, &rq, &err), API_OK);
	assert_int_equal(api_refresh(st->svc, &rq, &r, &err),
	    API_LEASE_NOT_FOUND);
	api_lock_clear(&a);
	api_free(other);
}

static void
test_force_per_lease(void **state)
{
	gc_state *st = *state;
	api_lock a, b;
	api_err err;

	take(st, "a", API_MODE_EXCLUSIVE, 2, API_OK, NULL, &a);
	take(st, "b", API_MODE_EXCLUSIVE, 2, API_OK, NULL, &b);
	assert_int_equal(api_force_release(st->svc, st->name, "admin", NULL, 0,
	                     &err),
	    API_BAD_REQUEST);
	assert_int_equal(api_force_release(st->svc, st->name, "admin", NULL,
	                     a.fencing_token, &err),
	    API_OK);
	assert_int_equal(holders_now(st), 1);
	assert_int_equal(api_force_release(st->svc, st->name, "admin", NULL,
	                     a.fencing_token, &err),
	    API_LEASE_LOST);
	give_back(st, &b);
	api_lock_clear(&a);
	api_lock_clear(&b);
}

/* Take a slot of a semaphore of LIMIT through SVC for OWNER (ttl 30 s)
 * once a lease of API_TTL_MIN has expired on the store's clock: 3 s, and
 * then up to 5 s more (gs:// tells its time in whole seconds, Date). */
static void
take_once_expired(gc_state *st, api_service *svc, const char *owner, int limit,
    api_lock *out)
{
	struct timespec ts = { 3, 0 }, step = { 0, 250000000L };
	api_acquire_req q;
	api_err err;
	int i, rc = API_LOCKED;

	nanosleep(&ts, NULL);
	for (i = 0; i < 20; i++) {
		acq(&q, st, owner, API_MODE_EXCLUSIVE, limit, 30);
		if ((rc = api_acquire(svc, &q, out, &err)) != API_LOCKED)
			break;
		api_lock_clear(out);
		nanosleep(&step, NULL);
	}
	assert_int_equal(rc, API_OK);
}

/* A holder that stops refreshing frees its slot after its TTL (2 s, plus
 * the store-time margin), on the store's own clock. */
static void
test_expired_slot(void **state)
{
	gc_state *st = *state;
	api_acquire_req q;
	api_lock a, b, c;
	api_err err;

	acq(&q, st, "a", API_MODE_EXCLUSIVE, 2, API_TTL_MIN);
	assert_int_equal(api_acquire(st->svc, &q, &a, &err), API_OK);
	take(st, "b", API_MODE_EXCLUSIVE, 2, API_OK, NULL, &b);
	take(st, "c", API_MODE_EXCLUSIVE, 2, API_LOCKED, NULL, &c);
	take_once_expired(st, st->svc, "c", 2, &c);
	assert_int_equal(holders_now(st), 2);
	give_back(st, &b);
	give_back(st, &c);
	api_lock_clear(&a);
	api_lock_clear(&b);
	api_lock_clear(&c);
}

/*
 * A refresh applied past its lease's expiry, after others took the slot,
 * whose answer was lost: the store's 412 to the retry (UNAVAILABLE false),
 * or a 503 and the client's retry at another instance (true).  It finds
 * its own late write and loses the lease, rather than renewing it from
 * there: the semaphore keeps its limit.  The lease is the one the head
 * carries, which no acquire sweeps away once expired (a lease object of
 * its own is swept, and the refresh finds nothing).
 */
static void
late_refresh_found_again(gc_state *st, bool unavailable)
{
	api_service *other = api_new(&st->ws->base, NULL, NULL);
	api_acquire_req q;
	api_lease_req r;
	api_lock a, b, c, x;
	api_err err;

	acq(&q, st, "a", API_MODE_EXCLUSIVE, 2, API_TTL_MIN);
	assert_int_equal(api_acquire(st->svc, &q, &a, &err), API_OK);
	take(st, "b", API_MODE_EXCLUSIVE, 2, API_OK, NULL, &b);
	take_once_expired(st, st->svc, "c", 2, &c);
	assert_int_equal(holders_now(st), 2);
	lease_of(&r, &a);
	if (unavailable) {
		st->ws->lost_op = W_PATCH;
		st->ws->lost_status = GCS_UNAVAILABLE;
		assert_int_equal(api_refresh(st->svc, &r, &x, &err),
		    API_UNAVAILABLE);
		assert_int_equal(api_refresh(other, &r, &x, &err),
		    API_LEASE_LOST);
	} else {
		st->ws->ghost_op = W_PATCH;
		assert_int_equal(api_refresh(st->svc, &r, &x, &err),
		    API_LEASE_LOST);
	}
	assert_int_equal(holders_now(st), 2);
	give_back(st, &b);
	give_back(st, &c);
	api_lock_clear(&a);
	api_lock_clear(&b);
	api_lock_clear(&c);
	api_free(other);
}

static void
test_late_refresh_412(void **state)
{
	late_refresh_found_again(*state, false);
}

static void
test_late_refresh_503_retried(void **state)
{
	late_refresh_found_again(*state, true);
}

typedef struct while_lost {
	gc_state *st;
	api_service *other;
	api_lock b, c;
} while_lost;

/* While a's first insert is unanswered: b takes the other slot, a's
 * lease expires and c takes its slot, and the store's answers lose their
 * time.  Through another instance: a's is in the middle of a call. */
static void
slots_taken(void *ctx)
{
	while_lost *wl = ctx;
	api_acquire_req q;
	api_err err;

	acq(&q, wl->st, "b", API_MODE_EXCLUSIVE, 2, 30);
	assert_int_equal(api_acquire(wl->other, &q, &wl->b, &err), API_OK);
	take_once_expired(wl->st, wl->other, "c", 2, &wl->c);
	wl->st->ws->no_time = true;
}

/*
 * An acquire whose insert of the head (carrying its lease) was applied
 * but answered 412 finds its own lease on the head.  Past its expiry,
 * others counted its slot free; on an answer with no store time nothing
 * tells, so it is no grant: the lease is judged as a new one, and the
 * semaphore keeps its limit.
 */
static void
test_own_head_lease_without_time(void **state)
{
	gc_state *st = *state;
	while_lost wl = { .st = st };
	api_acquire_req q;
	api_lock a;
	api_err err;
	int rc;

	wl.other = api_new(&st->ws->base, NULL, NULL);
	st->ws->ghost_op = W_INSERT;
	st->ws->meanwhile = slots_taken;
	st->ws->meanwhile_ctx = &wl;
	acq(&q, st, "a", API_MODE_EXCLUSIVE, 2, API_TTL_MIN);
	rc = api_acquire(st->svc, &q, &a, &err);
	st->ws->no_time = false;
	assert_int_not_equal(rc, API_OK);
	assert_int_equal(holders_now(st), 2);
	give_back(st, &wl.b);
	give_back(st, &wl.c);
	api_lock_clear(&a);
	api_lock_clear(&wl.b);
	api_lock_clear(&wl.c);
	api_free(wl.other);
}

typedef struct lease_between {
	gc_state *st;
	api_service *other;
	int64_t token;
} lease_between;

/* While the writer's marker insert is unanswered: a semaphore lease is
 * granted and released, its token handed out. */
static void
granted_between(void *ctx)
{
	lease_between *lb = ctx;
	api_acquire_req q;
	api_lease_req r;
	api_lock l;
	api_err err;

	acq(&q, lb->st, "y", API_MODE_EXCLUSIVE, 2, 30);
	assert_int_equal(api_acquire(lb->other, &q, &l, &err), API_OK);
	lb->token = l.fencing_token;
	lease_of(&r, &l);
	assert_int_equal(api_release(lb->other, &r, &err), API_OK);
	api_lock_clear(&l);
}

/*
 * A group lease granted and released while an exclusive acquire over the
 * group is under way (here just before it patches the head) was handed
 * a token before the exclusive lease's: the exclusive token is taken
 * after the patch, so it is newer.
 */
static void
test_exclusive_token_after_group_grant(void **state)
{
	gc_state *st = *state;
	lease_between lb = { .st = st };
	api_lock a, x;

	take(st, "a", API_MODE_SHARED, 1, API_OK, NULL, &a);
	give_back(st, &a);
	lb.other = api_new(&st->ws->base, NULL, NULL);
	st->ws->before_op = W_PATCH;
	st->ws->before = granted_between;
	st->ws->before_ctx = &lb;
	take(st, "x", API_MODE_EXCLUSIVE, 1, API_OK, NULL, &x);
	assert_int_not_equal(lb.token, 0);
	newer_token(st, x.fencing_token, lb.token);
	give_back(st, &x);
	api_lock_clear(&a);
	api_lock_clear(&x);
	api_free(lb.other);
}

typedef struct held_between {
	gc_state *st;
	api_service *other;
	wrap_op fail_next; /* the writer's next such write fails */
	api_lock l;
} held_between;

/* Just before the writer patches the head: a group lease is granted (and
 * kept), and the writer's next write of kind fail_next fails. */
static void
held_and_fail_next(void *ctx)
{
	held_between *hb = ctx;
	api_acquire_req q;
	api_err err;

	acq(&q, hb->st, "y", API_MODE_EXCLUSIVE, 2, 30);
	assert_int_equal(api_acquire(hb->other, &q, &hb->l, &err), API_OK);
	hb->st->ws->fail_op = hb->fail_next;
	hb->st->ws->fail_status = GCS_UNAVAILABLE;
}

/* A writer's acquire Q over a plain head of ST's lock, refused for the
 * group lease HB grants just before its patch, its next write of kind
 * FAIL failing; HB->l is that group lease (HB->other its instance). */
static void
refused_writer(gc_state *st, held_between *hb, wrap_op fail, api_acquire_req *q)
{
	api_lock a, x;
	api_err err;

	take(st, "a", API_MODE_SHARED, 1, API_OK, NULL, &a);
	give_back(st, &a);
	api_lock_clear(&a);
	hb->st = st;
	hb->fail_next = fail;
	hb->other = api_new(&st->ws->base, NULL, NULL);
	st->ws->before_op = W_PATCH;
	st->ws->before = held_and_fail_next;
	st->ws->before_ctx = hb;
	acq(q, st, "x", API_MODE_EXCLUSIVE, 1, 30);
	assert_int_equal(api_acquire(st->svc, q, &x, &err), API_LOCKED);
	api_lock_clear(&x);
}

/*
 * A writer refused for a group lease granted before its patch, whose head
 * could not be given back (its patch back failed), leaves its lease
 * flagged over the group with no token.  It is no lease: released by its
 * lease_id (as a waiter gives back what an unanswered attempt may have
 * taken), it is not found, and NAME stays for the group lease, so a plain
 * exclusive acquire is refused.  Its key's next acquire, once the group
 * lease is gone, does not take it for a grant: the head goes back, and
 * the token then taken is newer than the group lease's.
 */
static void
test_refused_writer_not_renewed(void **state)
{
	gc_state *st = *state;
	held_between hb;
	api_acquire_req q;
	api_lease_req r;
	api_lock x, z;
	api_err err;

	refused_writer(st, &hb, W_PATCH, &q);
	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "%s", st->name);
	snprintf(r.owner, sizeof(r.owner), "x");
	snprintf(r.lease_id, sizeof(r.lease_id), "%s", q.lease_id);
	assert_int_equal(api_release(st->svc, &r, &err), API_LEASE_NOT_FOUND);
	take(st, "z", API_MODE_EXCLUSIVE, 1, API_LOCKED, NULL, &z);
	give_back(st, &hb.l);
	assert_int_equal(api_acquire(st->svc, &q, &x, &err), API_OK);
	newer_token(st, x.fencing_token, hb.l.fencing_token);
	give_back(st, &x);
	api_lock_clear(&x);
	api_lock_clear(&hb.l);
	api_free(hb.other);
}

/*
 * A writer's attempt refused, its marker left behind (its removal
 * failed); group leases come and go; the same request's next attempt
 * finds that marker, older than their tokens: it is replaced, never
 * reused, and the token is newer than theirs.
 */
static void
test_marker_not_reused(void **state)
{
	gc_state *st = *state;
	held_between hb;
	api_acquire_req q;
	api_lock b, x;
	api_err err;

	refused_writer(st, &hb, W_REMOVE, &q);
	give_back(st, &hb.l);
	take(st, "b", API_MODE_EXCLUSIVE, 2, API_OK, NULL, &b);
	give_back(st, &b);
	assert_int_equal(api_acquire(st->svc, &q, &x, &err), API_OK);
	newer_token(st, x.fencing_token, b.fencing_token);
	give_back(st, &x);
	api_lock_clear(&b);
	api_lock_clear(&x);
	api_lock_clear(&hb.l);
	api_free(hb.other);
}

typedef struct head_gone {
	gc_state *st;
	api_service *other;
	api_lock y; /* the plain lease granted meanwhile */
} head_gone;

/* Just before the keyed acquire lists its group: a plain lease Y is
 * granted at the name, and the acquire's next removal fails. */
static void
plain_lease_taken(void *ctx)
{
	head_gone *hg = ctx;
	api_acquire_req q;
	api_err err;

	acq(&q, hg->st, "y", API_MODE_EXCLUSIVE, 1, 30);
	assert_int_equal(api_acquire(hg->other, &q, &hg->y, &err), API_OK);
	hg->st->ws->fail_op = W_REMOVE;
	hg->st->ws->fail_status = GCS_UNAVAILABLE;
}

/* Just before a keyed acquire inserts its lease object into a group
 * whose head it read: an exclusive lease takes the head and is released
 * (the head goes with it); then plain_lease_taken. */
static void
head_gone_before_insert(void *ctx)
{
	head_gone *hg = ctx;
	api_acquire_req q;
	api_lease_req r;
	api_lock x;
	api_err err;

	acq(&q, hg->st, "x", API_MODE_EXCLUSIVE, 1, 30);
	assert_int_equal(api_acquire(hg->other, &q, &x, &err), API_OK);
	lease_of(&r, &x);
	assert_int_equal(api_release(hg->other, &r, &err), API_OK);
	api_lock_clear(&x);
	hg->st->ws->before_op = W_LIST;
	hg->st->ws->before = plain_lease_taken;
}

/*
 * A keyed shared acquire read the group's head, which went before its
 * lease object was inserted; a plain lease Y took the name before its
 * listing, so after its insert.  The acquire is refused and its object,
 * which it could not remove, is left, live.  Y is released, and a
 * shared lease C makes a new head.  The key's retry renews the object
 * it finds, but its generation is older than Y's token and C's: it is
 * no grant, for a token never goes backwards; the retry's lease is a
 * new one, with a newer token.
 */
static void
test_keyed_lease_of_an_older_head(void **state)
{
	gc_state *st = *state;
	head_gone hg = { .st = st };
	api_acquire_req q;
	api_lock a, b, c;
	api_err err;

	take(st, "a", API_MODE_SHARED, 1, API_OK, NULL, &a);
	give_back(st, &a);
	hg.other = api_new(&st->ws->base, NULL, NULL);
	acq(&q, st, "b", API_MODE_SHARED, 1, 30);
	snprintf(q.key, sizeof(q.key), "client-key-b");
	st->ws->before_op = W_INSERT;
	st->ws->before = head_gone_before_insert;
	st->ws->before_ctx = &hg;
	assert_int_equal(api_acquire(st->svc, &q, &b, &err), API_LOCKED);
	api_lock_clear(&b);
	give_back(st, &hg.y);
	take(st, "c", API_MODE_SHARED, 1, API_OK, NULL, &c);
	assert_int_equal(api_acquire(st->svc, &q, &b, &err), API_OK);
	newer_token(st, b.fencing_token, hg.y.fencing_token);
	newer_token(st, b.fencing_token, c.fencing_token);
	assert_int_equal(holders_now(st), 2);
	give_back(st, &b);
	give_back(st, &c);
	api_lock_clear(&a);
	api_lock_clear(&c);
	api_lock_clear(&b);
	api_lock_clear(&hg.y);
	api_free(hg.other);
}

/* The longest lock name (256 bytes): its lease objects' names, with '#'
 * and a lease_id, are longer than any lock name, on every store. */
static void
test_longest_name(void **state)
{
	gc_state *st = *state;
	api_lock a, b;
	size_t n = strlen(st->name);

	memset(st->name + n, 'x', API_NAME_MAX - n);
	st->name[API_NAME_MAX] = '\0';
	take(st, "a", API_MODE_EXCLUSIVE, 2, API_OK, NULL, &a);
	take(st, "b", API_MODE_EXCLUSIVE, 2, API_OK, NULL, &b);
	assert_int_equal(holders_now(st), 2);
	give_back(st, &a);
	give_back(st, &b);
	assert_int_equal(holders_now(st), -1);
	api_lock_clear(&a);
	api_lock_clear(&b);
}

int
group_contract_run(const char *suite_name, store_contract_open_fn open,
    store_contract_close_fn close, void *ctx)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_semaphore_limit, gc_setup,
		    gc_teardown),
		cmocka_unit_test_setup_teardown(test_shared_and_exclusive,
		    gc_setup, gc_teardown),
		cmocka_unit_test_setup_teardown(test_limit_mismatch, gc_setup,
		    gc_teardown),
		cmocka_unit_test_setup_teardown(test_reacquire_by_key, gc_setup,
		    gc_teardown),
		cmocka_unit_test_setup_teardown(test_other_instance, gc_setup,
		    gc_teardown),
		cmocka_unit_test_setup_teardown(test_force_per_lease, gc_setup,
		    gc_teardown),
		cmocka_unit_test_setup_teardown(test_expired_slot, gc_setup,
		    gc_teardown),
		cmocka_unit_test_setup_teardown(test_late_refresh_412, gc_setup,
		    gc_teardown),
		cmocka_unit_test_setup_teardown(test_late_refresh_503_retried,
		    gc_setup, gc_teardown),
		cmocka_unit_test_setup_teardown(
		    test_own_head_lease_without_time, gc_setup, gc_teardown),
		cmocka_unit_test_setup_teardown(test_marker_not_reused,
		    gc_setup, gc_teardown),
		cmocka_unit_test_setup_teardown(
		    test_exclusive_token_after_group_grant, gc_setup,
		    gc_teardown),
		cmocka_unit_test_setup_teardown(test_refused_writer_not_renewed,
		    gc_setup, gc_teardown),
		cmocka_unit_test_setup_teardown(
		    test_keyed_lease_of_an_older_head, gc_setup, gc_teardown),
		cmocka_unit_test_setup_teardown(test_longest_name, gc_setup,
		    gc_teardown),
	};

	gc_open = open;
	gc_close = close;
	gc_ctx = ctx;
	return _cmocka_run_group_tests(suite_name, tests,
	    sizeof(tests) / sizeof(tests[0]), NULL, NULL);
}
