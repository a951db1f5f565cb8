/*
 * test_api.c: the lock algorithm over the mem store with a clock the test
 * moves, and a wrapper store that counts calls and injects the ambiguous
 * answers of a retried request.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/api.h"
#include "api/lease.h"
#include "wrap_store.h"
#include "tmpdir.h"

static int64_t clock_ms;

static int64_t
test_clock(void *ctx)
{
	(void)ctx;
	return clock_ms;
}

typedef struct fixture {
	wrap_store *ws;
	api_service *svc;
	int events[API_EV_LOST + 1];
	char reason[64]; /* of the last event, "" for none */
} fixture;

static void
count_event(void *ctx, const api_event *ev)
{
	fixture *f = ctx;

	f->events[ev->kind]++;
	snprintf(f->reason, sizeof(f->reason), "%s",
	    ev->reason != NULL ? ev->reason : "");
}

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	clock_ms = 1700000000000LL;
	f->ws = wrap_store_new(gcs_mem_new(test_clock, NULL));
	f->svc = api_new(&f->ws->base, count_event, f);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	api_free(f->svc);
	gcs_store_free(&f->ws->base);
	free(f);
	return 0;
}

/* A request as the server parses it: prepared, so with its lease_id. */
static void
acq_req(api_acquire_req *q, const char *name, const char *owner, int ttl)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->name, sizeof(q->name), "%s", name);
	snprintf(q->owner, sizeof(q->owner), "%s", owner);
	snprintf(q->holder, sizeof(q->holder), "holder-of-%s", owner);
	q->ttl = ttl;
	api_acquire_prepare(q);
}

static void
lease_req(api_lease_req *q, const api_lock *l, const char *owner, int ttl)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->name, sizeof(q->name), "%s", l->name);
	snprintf(q->owner, sizeof(q->owner), "%s", owner);
	snprintf(q->lease_id, sizeof(q->lease_id), "%s", l->lease_id);
	q->ttl = ttl;
}

static void
test_lock_names_valid_or_refused(void **state)
{
	static const char *good[] = { "a", "prod/deploy", "A.b_c-d/e/f", "9",
		"x..y", "a/b.c", "a/.hidden", NULL };
	static const char *bad[] = { "", "/a", "a/", "a//b", "../a", "a/../b",
		"a/..", "-a", ".a", "_a", "a b", "a:b", "a%2F", "a\\b", "ä",
		"a/./b", "a?b", "a#b", NULL };
	char why[128], big[300];
	int i;

	(void)state;
	for (i = 0; good[i]; i++)
		assert_int_equal(api_name_valid(good[i], why, sizeof(why)), 1);
	for (i = 0; bad[i]; i++) {
		why[0] = '\0';
		assert_int_equal(api_name_valid(bad[i], why, sizeof(why)), 0);
		assert_true(why[0] != '\0');
	}
	memset(big, 'a', 256);
	big[256] = '\0';
	assert_int_equal(api_name_valid(big, why, sizeof(why)), 1);
	big[256] = 'a';
	big[257] = '\0';
	assert_int_equal(api_name_valid(big, why, sizeof(why)), 0);
	assert_int_equal(api_name_valid(NULL, why, sizeof(why)), 0);
}

/* Text is well-formed UTF-8 without C0, DEL or C1 control characters. */
static void
test_text_clean(void **state)
{
	static const char *good[] = { "", "plain ascii ~", "caf\xc3\xa9",
		"\xc2\xa0",         /* U+00A0, the first after C1 */
		"\xdf\xbf",         /* U+07FF */
		"\xe0\xa0\x80",     /* U+0800, the smallest of 3 bytes */
		"\xed\x9f\xbf",     /* U+D7FF, just below the surrogates */
		"\xee\x80\x80",     /* U+E000, just above them */
		"\xf0\x90\x80\x80", /* U+10000, the smallest of 4 bytes */
		"\xf0\x9f\x94\x92", /* a lock emoji */
		"\xf4\x8f\xbf\xbf", /* U+10FFFF, the largest */
		NULL };
	static const char *bad[] = { "a\nb", "tab\t", "\x1b[31m", "\x7f",
		"\xc2\x80", "\xc2\x85", "\xc2\x9f",     /* C1 */
		"\xc0\xaf", "\xc1\xbf",                 /* overlong, 2 bytes */
		"\xe0\x80\xaf", "\xe0\x9f\xbf",         /* overlong, 3 bytes */
		"\xf0\x80\x80\xaf", "\xf0\x8f\xbf\xbf", /* overlong, 4 */
		"\xed\xa0\x80", "\xed\xbf\xbf",         /* surrogates */
		"\xf4\x90\x80\x80", "\xf5\x80\x80\x80", /* > U+10FFFF */
		"\xff", "\xfe", "\x80", "\xbf",         /* never a lead */
		"\xe2\x82", "\xf0\x9f\x94", "\xc3",     /* cut short */
		"\xe2\x28\xa1",                         /* bad continuation */
		NULL };
	int i;

	(void)state;
	for (i = 0; good[i]; i++)
		assert_int_equal(api_text_clean(good[i], strlen(good[i])), 1);
	for (i = 0; bad[i]; i++)
		assert_int_equal(api_text_clean(bad[i], strlen(bad[i])), 0);
	/* N counts: a NUL inside is a control character, and a sequence
	 * cut by N is cut short. */
	assert_int_equal(api_text_clean("a\0b", 3), 0);
	assert_int_equal(api_text_clean("\xc3\xa9", 1), 0);
}

/* A message cut in the middle of a character is made text again: each
 * byte that starts no well-formed sequence becomes '?', the rest stays. */
static void
test_utf8_scrub(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "held by aaa\xc3", "held by aaa?" },  /* cut after the lead */
		{ "caf\xc3\xa9 ok", "caf\xc3\xa9 ok" }, /* whole: kept */
		{ "\xf0\x9f\x94 x", "??? x" },          /* 4 bytes cut to 3 */
		{ "\xed\xa0\x80", "???" },              /* a surrogate */
		{ "\xc0\xaf", "??" },                   /* overlong */
		{ "a\x80"
		  "b\xff"
		  "c",
		    "a?b?c" },                /* stray bytes */
		{ "tab\tnl\n", "tab\tnl\n" }, /* controls are text (escaped) */
	};
	char buf[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(buf, sizeof(buf), "%s", cases[i].in);
		api_utf8_scrub(buf);
		assert_string_equal(buf, cases[i].out);
	}
}

/* A lease's end, judged on times another writer of the bucket stored:
 * held at INT64_MAX, never overflowed (UBSan would stop here), and the
 * margin's order kept (expired implies past its end). */
static void
test_lease_ends_saturated(void **state)
{
	static const int64_t updated[] = { 0, 1795756211903, INT64_MAX - 1000,
		INT64_MAX };
	gcs_object o;
	size_t i;

	(void)state;
	assert_int_equal(lease_ends_ms(1000, 2), 3000);
	assert_int_equal(lease_ends_ms(INT64_MAX - 1, 300), INT64_MAX);
	assert_int_equal(lease_ends_ms(INT64_MAX, 86400), INT64_MAX);
	memset(&o, 0, sizeof(o));
	o.metadata = json_pack("{s:s}", LEASE_KEY_TTL, "300");
	assert_int_equal(lease_ttl_of(&o), 300);
	for (i = 0; i < sizeof(updated) / sizeof(updated[0]); i++) {
		o.updated_ms = updated[i];
		o.now_ms = INT64_MAX;
		assert_int_equal(lease_past_expiry(&o),
		    updated[i] < INT64_MAX - 300000);
		assert_true(!lease_expired(&o) || lease_past_expiry(&o));
		o.now_ms = 0; /* no store time: nothing is judged */
		assert_false(lease_past_expiry(&o));
		assert_false(lease_expired(&o));
	}
	o.updated_ms = 1000;
	o.now_ms = 1000 + 300000; /* at its end: not past it */
	assert_false(lease_past_expiry(&o));
	o.now_ms++;
	assert_true(lease_past_expiry(&o));
	assert_false(lease_expired(&o)); /* within the margin */
	json_decref(o.metadata);
}

static void
test_lease_ids_and_labels(void **state)
{
	char why[128];
	json_t *l;

	(void)state;
	assert_true(api_lease_id_valid("job-1234_abc"));
	assert_false(api_lease_id_valid("short"));
	assert_false(api_lease_id_valid("has space in it"));
	assert_false(api_lease_id_valid(NULL));
	l = json_pack("{s:s, s:s}", "env", "prod", "team", "web");
	assert_true(api_labels_valid(l, why, sizeof(why)));
	json_object_set_new(l, "n", json_integer(3));
	assert_false(api_labels_valid(l, why, sizeof(why)));
	json_decref(l);
	l = json_pack("{s:s}", "bad key", "v");
	assert_false(api_labels_valid(l, why, sizeof(why)));
	json_decref(l);
	l = json_pack("{s:s}", "k", "next\xc2\x85line"); /* C1 NEL */
	assert_false(api_labels_valid(l, why, sizeof(why)));
	json_decref(l);
	l = json_array();
	assert_false(api_labels_valid(l, why, sizeof(why)));
	json_decref(l);
}

/* Uncontended acquire, refresh and release cost exactly one write each
 * (and no read) on the instance that granted the lease. */
static void
test_one_write_each(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l, r;
	api_err e;

	acq_req(&q, "prod/deploy", "alice", 30);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	assert_int_equal(wrap_writes(f->ws), 1);
	assert_int_equal(f->ws->calls[W_GET], 0);
	assert_int_equal(strlen(l.lease_id), 32);
	assert_true(l.fencing_token > 0);
	assert_int_equal(l.refresh_interval, 3);

	wrap_reset(f->ws);
	clock_ms += 5000;
	lease_req(&lq, &l, "alice", 60);
	assert_int_equal(api_refresh(f->svc, &lq, &r, &e), API_OK);
	assert_int_equal(wrap_writes(f->ws), 1);
	assert_int_equal(f->ws->calls[W_GET], 0);
	assert_int_equal(r.ttl, 60);
	assert_int_equal(r.fencing_token, l.fencing_token);
	assert_true(r.expires_at_ms == clock_ms + 60000);
	api_lock_clear(&r);

	wrap_reset(f->ws);
	assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
	assert_int_equal(wrap_writes(f->ws), 1);
	assert_int_equal(f->ws->calls[W_GET], 0);
	assert_int_equal(f->events[API_EV_GRANTED], 1);
	assert_int_equal(f->events[API_EV_REFRESHED], 1);
	assert_int_equal(f->events[API_EV_RELEASED], 1);
	api_lock_clear(&l);
}

/* Expiry is judged on the store's clock with a 1 s margin. */
static void
test_expiry_and_takeover(void **state)
{
	fixture *f = *state;
	api_acquire_req qa, qb;
	api_lease_req lq;
	api_lock la, lb, x;
	api_err e;
	int64_t t0 = clock_ms;

	acq_req(&qa, "db/migrate", "alice", 10);
	acq_req(&qb, "db/migrate", "bob", 10);
	assert_int_equal(api_acquire(f->svc, &qa, &la, &e), API_OK);

	clock_ms = t0 + 9000; /* ttl - 1 s */
	assert_int_equal(api_acquire(f->svc, &qb, &x, &e), API_LOCKED);
	assert_string_equal(x.owner, "alice");
	assert_string_equal(x.lease_id, ""); /* never shown to others */
	assert_true(e.retry_after >= 1);
	api_lock_clear(&x);
	/* What the lease has left, on the store's clock. */
	assert_int_equal(api_inspect(f->svc, "db/migrate", &x, &e), API_OK);
	assert_int_equal(x.expires_in, 1);
	api_lock_clear(&x);
	clock_ms = t0 + 11000; /* ttl + margin: not yet */
	assert_int_equal(api_acquire(f->svc, &qb, &x, &e), API_LOCKED);
	api_lock_clear(&x);
	assert_int_equal(api_inspect(f->svc, "db/migrate", &x, &e), API_OK);
	assert_int_equal(x.expires_in, 0);
	api_lock_clear(&x);

	clock_ms = t0 + 11001; /* past ttl + margin: expired */
	assert_int_equal(api_inspect(f->svc, "db/migrate", &x, &e),
	    API_NOT_HELD);
	assert_true(x.expired);
	api_lock_clear(&x);
	assert_int_equal(api_acquire(f->svc, &qb, &lb, &e), API_OK);
	assert_string_equal(lb.owner, "bob");
	assert_true(lb.fencing_token > la.fencing_token);
	assert_int_equal(f->events[API_EV_TAKEOVER], 1);

	/* Alice's lease is lost: refresh and release say so (409). */
	lease_req(&lq, &la, "alice", 0);
	assert_int_equal(api_refresh(f->svc, &lq, &x, &e), API_LEASE_LOST);
	api_lock_clear(&x);
	assert_int_equal(api_release(f->svc, &lq, &e), API_LEASE_LOST);
	/* Bob's still holds. */
	assert_int_equal(api_inspect(f->svc, "db/migrate", &x, &e), API_OK);
	assert_string_equal(x.owner, "bob");
	api_lock_clear(&x);
	api_lock_clear(&la);
	api_lock_clear(&lb);
}

/* A lease past its TTL that nobody took over may still be refreshed: the
 * object never went away, so nobody else was granted the lock. */
static void
test_refresh_expired_not_taken(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l, r;
	api_err e;

	acq_req(&q, "late", "alice", 2);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	clock_ms += 5000;
	lease_req(&lq, &l, "alice", 0);
	assert_int_equal(api_refresh(f->svc, &lq, &r, &e), API_OK);
	assert_false(r.expired);
	api_lock_clear(&r);
	api_lock_clear(&l);
}

static void
test_released_then_not_found(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l, r;
	api_err e;

	acq_req(&q, "x", "alice", 30);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	lease_req(&lq, &l, "alice", 0);
	assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
	assert_int_equal(api_refresh(f->svc, &lq, &r, &e), API_LEASE_NOT_FOUND);
	api_lock_clear(&r);
	assert_int_equal(api_release(f->svc, &lq, &e), API_LEASE_NOT_FOUND);
	assert_int_equal(api_code_status(e.code), 404);
	api_lock_clear(&l);
}

/* design 1: a retried insert whose first attempt succeeded gets 412; the
 * read-back shows our lease_id, so it is ours. */
static void
test_retried_insert_is_ours(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock l, x;
	api_err e;

	acq_req(&q, "ghost", "alice", 30);
	f->ws->ghost_op = W_INSERT;
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	assert_int_equal(f->ws->calls[W_INSERT], 1);
	assert_int_equal(f->ws->calls[W_GET], 1);
	assert_string_equal(l.owner, "alice");
	assert_int_equal(strlen(l.lease_id), 32);
	/* Learning of the lost grant is the grant: announced once. */
	assert_int_equal(f->events[API_EV_GRANTED], 1);
	assert_int_equal(api_inspect(f->svc, "ghost", &x, &e), API_OK);
	assert_int_equal(x.fencing_token, l.fencing_token);
	api_lock_clear(&x);
	/* The same request again (a client re-acquiring with its own key):
	 * its lease, renewed, and no second announcement of a grant. */
	f->ws->ghost_op = -1;
	assert_int_equal(api_acquire(f->svc, &q, &x, &e), API_OK);
	assert_string_equal(x.lease_id, l.lease_id);
	assert_int_equal(x.fencing_token, l.fencing_token);
	assert_int_equal(f->events[API_EV_GRANTED], 1);
	assert_int_equal(f->events[API_EV_REFRESHED], 1);
	api_lock_clear(&x);
	api_lock_clear(&l);
}

/* design 1: a retried delete answered 404 is a release. */
static void
test_retried_delete_is_released(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l, x;
	api_err e;

	acq_req(&q, "ghost-del", "alice", 30);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	lease_req(&lq, &l, "alice", 0);
	f->ws->ghost_op = W_REMOVE;
	assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
	assert_int_equal(api_inspect(f->svc, "ghost-del", &x, &e),
	    API_NOT_HELD);
	api_lock_clear(&x);
	api_lock_clear(&l);
}

/* Bob takes the lock a lost delete of alice's freed (wrap_store). */
static void
bob_takes(void *ctx)
{
	fixture *f = ctx;
	api_acquire_req q;
	api_lock l;
	api_err e;

	acq_req(&q, "taken", "bob", 30);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	api_lock_clear(&l);
}

/* A delete applied whose answer was lost, retried and answered 412
 * because the free lock was taken meanwhile (or 404, nobody took it):
 * the release went through, and is answered as one, not lease_lost.
 * The soak found it: a holder told lease_lost 20 ms after its grant. */
static void
test_retried_delete_412_is_released(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l, x;
	api_err e;
	int taken;

	for (taken = 0; taken < 2; taken++) {
		acq_req(&q, taken ? "taken" : "freed", "alice", 30);
		assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
		lease_req(&lq, &l, "alice", 0);
		f->ws->lost_op = W_REMOVE;
		f->ws->lost_status = GCS_PRECONDITION;
		f->ws->meanwhile = taken ? bob_takes : NULL;
		f->ws->meanwhile_ctx = f;
		assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
		if (taken) {
			/* Bob's lease is untouched. */
			assert_int_equal(api_inspect(f->svc, "taken", &x, &e),
			    API_OK);
			assert_string_equal(x.owner, "bob");
		} else {
			assert_int_equal(api_inspect(f->svc, "freed", &x, &e),
			    API_NOT_HELD);
		}
		api_lock_clear(&x);
		api_lock_clear(&l);
	}
}

/* Just before alice's delete reaches the store: her lease expired, bob
 * took it over; her delete is answered as the retry of a first attempt
 * that failed unanswered. */
static void
bob_takes_over(void *ctx)
{
	fixture *f = ctx;

	clock_ms += 32000; /* past the 30 s ttl and the margin */
	bob_takes(f);
	f->ws->retried_op = W_REMOVE;
}

/*
 * A release whose first delete failed unanswered and unapplied (a slow
 * 503), while the lease expired and was taken over: its retry meets a
 * 412, and the lease there was made after this one's expiry.  The caller
 * had lost its lease, and is told so (409 lease_lost), not that it
 * released it; bob's lease is untouched.  (The same 412 with a lease
 * made while this one lived is a release: above.)
 */
static void
test_retried_delete_after_takeover_is_lost(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l, x;
	api_err e;

	acq_req(&q, "taken", "alice", 30);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	lease_req(&lq, &l, "alice", 0);
	f->ws->before_op = W_REMOVE;
	f->ws->before = bob_takes_over;
	f->ws->before_ctx = f;
	assert_int_equal(api_release(f->svc, &lq, &e), API_LEASE_LOST);
	assert_int_equal(api_inspect(f->svc, "taken", &x, &e), API_OK);
	assert_string_equal(x.owner, "bob");
	api_lock_clear(&x);
	api_lock_clear(&l);
}

/* Just before alice's delete reaches the store: her lease expired, and
 * carol's semaphore acquire took it over by patching it into a group
 * head (its generation kept, no delete); with dave too, dave's exclusive
 * acquire then patched that head into his lease over the group, still
 * of alice's generation.  Her delete is the retry of a first attempt
 * that failed unanswered. */
static int group_then_exclusive;
static const char *const group_taken[] = { "taken-by-group",
	"taken-by-group-then-one" };

static void
carol_takes_over_as_group(void *ctx)
{
	fixture *f = ctx;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l;
	api_err e;

	clock_ms += 32000; /* past the 30 s ttl and the margin */
	acq_req(&q, group_taken[group_then_exclusive], "carol", 30);
	q.limit = 2;
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	if (group_then_exclusive) {
		lease_req(&lq, &l, "carol", 0);
		assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
		api_lock_clear(&l);
		acq_req(&q, group_taken[1], "dave", 30);
		assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	}
	api_lock_clear(&l);
	f->ws->retried_op = W_REMOVE;
}

/*
 * As above, but the takeover patched alice's object rather than deleting
 * it: what her retried delete meets is her own object, of her
 * generation and creation time, now a group head (or a lease over it).
 * She had lost her lease all the same: 409 lease_lost, not 204 (a head
 * read as 'no lease here', a lease created 'before her expiry').
 */
static void
test_retried_delete_after_group_takeover_is_lost(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l, x;
	api_err e;

	for (group_then_exclusive = 0; group_then_exclusive < 2;
	     group_then_exclusive++) {
		acq_req(&q, group_taken[group_then_exclusive], "alice", 30);
		assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
		lease_req(&lq, &l, "alice", 0);
		f->ws->before_op = W_REMOVE;
		f->ws->before = carol_takes_over_as_group;
		f->ws->before_ctx = f;
		assert_int_equal(api_release(f->svc, &lq, &e), API_LEASE_LOST);
		assert_int_equal(api_inspect(f->svc,
		                     group_taken[group_then_exclusive], &x, &e),
		    API_OK);
		assert_string_equal(x.owner,
		    group_then_exclusive ? "dave" : "carol");
		api_lock_clear(&x);
		api_lock_clear(&l);
	}
}

/*
 * A force-release whose delete was applied, its answer lost, and whose
 * retry met a 412 because Bob took the freed lock meanwhile: the force
 * is done, and Bob's lease is not removed as well (without a token the
 * force looked again and removed it) nor the force answered as a
 * mismatch (with alice's token).
 */
static void
test_force_retried_delete_412(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock l, x;
	api_err e;
	int with_token;

	for (with_token = 0; with_token < 2; with_token++) {
		acq_req(&q, "taken", "alice", 30);
		assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
		f->ws->lost_op = W_REMOVE;
		f->ws->lost_status = GCS_PRECONDITION;
		f->ws->meanwhile = bob_takes;
		f->ws->meanwhile_ctx = f;
		assert_int_equal(api_force_release(f->svc, "taken", "root",
		                     NULL, with_token ? l.fencing_token : 0,
		                     &e),
		    API_OK);
		assert_int_equal(api_inspect(f->svc, "taken", &x, &e), API_OK);
		assert_string_equal(x.owner, "bob");
		assert_int_equal(api_force_release(f->svc, "taken", "root",
		                     NULL, x.fencing_token, &e),
		    API_OK);
		api_lock_clear(&x);
		api_lock_clear(&l);
	}
}

/* A first-attempt 404 on delete is not ours to call a success. */
static void
test_delete_404_not_retried(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l;
	api_err e;

	acq_req(&q, "gone", "alice", 30);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	/* Another instance force-released it behind our cache's back. */
	assert_int_equal(api_force_release(f->svc, "gone", "root", NULL, 0, &e),
	    API_OK);
	lease_req(&lq, &l, "alice", 0);
	assert_int_equal(api_release(f->svc, &lq, &e), API_LEASE_NOT_FOUND);
	assert_int_equal(f->events[API_EV_FORCED], 1);
	api_lock_clear(&l);
}

/* Two instances on one store: a stale lease cache costs a 412 and a
 * re-read, never a wrong answer. */
static void
test_two_instances_stale_cache(void **state)
{
	fixture *f = *state;
	api_service *other = api_new(&f->ws->base, NULL, NULL);
	api_acquire_req q;
	api_lease_req lq;
	api_lock l, r;
	api_err e;

	acq_req(&q, "shared", "alice", 30);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	lease_req(&lq, &l, "alice", 0);
	wrap_reset(f->ws);
	assert_int_equal(api_refresh(other, &lq, &r, &e), API_OK);
	assert_int_equal(f->ws->calls[W_GET], 1); /* not cached there */
	assert_int_equal(wrap_writes(f->ws), 1);
	api_lock_clear(&r);
	wrap_reset(f->ws);
	assert_int_equal(api_refresh(f->svc, &lq, &r, &e), API_OK);
	assert_int_equal(f->ws->calls[W_PATCH], 2); /* 412, then again */
	assert_int_equal(f->ws->calls[W_GET], 1);
	api_lock_clear(&r);
	assert_int_equal(api_release(other, &lq, &e), API_OK);
	api_free(other);
	api_lock_clear(&l);
}

/*
 * A refresh records "lost" only for a lease known to have existed: any
 * caller can send a lease_id nobody ever held, and that must not write
 * events (or push real ones out of the ring).
 */
static void
test_lost_only_when_real(void **state)
{
	fixture *f = *state;
	api_service *other = api_new(&f->ws->base, NULL, NULL);
	api_acquire_req qa, qb;
	api_lease_req lq;
	api_lock la, lb, r;
	api_err e;
	int64_t t0 = clock_ms;

	/* Made up, on a free lock and on a held one. */
	memset(&lq, 0, sizeof(lq));
	snprintf(lq.name, sizeof(lq.name), "%s", "never");
	snprintf(lq.owner, sizeof(lq.owner), "%s", "mallory");
	snprintf(lq.lease_id, sizeof(lq.lease_id), "%s", "abcdefgh12345678");
	assert_int_equal(api_refresh(f->svc, &lq, &r, &e), API_LEASE_NOT_FOUND);
	api_lock_clear(&r);
	acq_req(&qa, "held", "alice", 10);
	assert_int_equal(api_acquire(f->svc, &qa, &la, &e), API_OK);
	snprintf(lq.name, sizeof(lq.name), "%s", "held");
	assert_int_equal(api_refresh(f->svc, &lq, &r, &e), API_LEASE_LOST);
	api_lock_clear(&r);
	assert_int_equal(f->events[API_EV_LOST], 0);

	/* Alice's real lease, served here, taken over elsewhere: lost. */
	clock_ms = t0 + 11001;
	acq_req(&qb, "held", "bob", 10);
	assert_int_equal(api_acquire(other, &qb, &lb, &e), API_OK);
	lease_req(&lq, &la, "alice", 0);
	assert_int_equal(api_refresh(f->svc, &lq, &r, &e), API_LEASE_LOST);
	api_lock_clear(&r);
	assert_int_equal(f->events[API_EV_LOST], 1);
	api_free(other);
	api_lock_clear(&la);
	api_lock_clear(&lb);
}

static void
test_owner_and_admin(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock l, r;
	api_err e;

	acq_req(&q, "mine", "alice", 30);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	lease_req(&lq, &l, "mallory", 0);
	assert_int_equal(api_refresh(f->svc, &lq, &r, &e), API_FORBIDDEN);
	api_lock_clear(&r);
	assert_int_equal(api_release(f->svc, &lq, &e), API_FORBIDDEN);
	lq.admin = true;
	assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
	api_lock_clear(&l);
}

static void
test_overdue_and_json(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock l, x;
	api_err e;
	json_t *j;

	acq_req(&q, "slow", "alice", 60);
	q.expected_duration = 5;
	q.labels = json_pack("{s:s}", "env", "prod");
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	json_decref(q.labels);
	assert_false(l.overdue);
	clock_ms += 6000;
	assert_int_equal(api_inspect(f->svc, "slow", &x, &e), API_OK);
	assert_true(x.overdue);
	j = api_lock_json(&x, false);
	assert_non_null(j);
	assert_null(json_object_get(j, "lease_id"));
	assert_true(json_is_true(json_object_get(j, "overdue")));
	assert_string_equal(json_string_value(
	                        json_object_get(json_object_get(j, "labels"),
	                            "env")),
	    "prod");
	assert_string_equal(json_string_value(
	                        json_object_get(j, "fencing_token")),
	    "1");
	json_decref(j);
	j = api_lock_json(&l, true);
	assert_string_equal(json_string_value(json_object_get(j, "lease_id")),
	    l.lease_id);
	json_decref(j);
	api_lock_clear(&x);
	api_lock_clear(&l);
}

static void
test_list_pages_leave_expired_out(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_list_req lr;
	api_list_res res;
	api_lock l;
	api_err e;
	char name[32];
	int i, seen = 0, pages = 0;

	for (i = 0; i < 7; i++) {
		snprintf(name, sizeof(name), "team/l%d", i);
		acq_req(&q, name, "alice", i == 3 ? 2 : 60);
		assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
		api_lock_clear(&l);
	}
	acq_req(&q, "other", "alice", 60);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	api_lock_clear(&l);
	clock_ms += 4000; /* team/l3 expired */
	memset(&lr, 0, sizeof(lr));
	snprintf(lr.prefix, sizeof(lr.prefix), "team/");
	lr.page_size = 3;
	do {
		assert_int_equal(api_list(f->svc, &lr, &res, &e), API_OK);
		seen += (int)res.n;
		pages++;
		snprintf(lr.page_token, sizeof(lr.page_token), "%s",
		    res.next_page_token ? res.next_page_token : "");
		api_list_res_clear(&res);
	} while (lr.page_token[0] && pages < 10);
	assert_int_equal(seen, 6); /* the expired one left out */
	/* 3 + 3: the second page reads on past the expired one. */
	assert_int_equal(pages, 2);
	memset(&lr, 0, sizeof(lr));
	snprintf(lr.prefix, sizeof(lr.prefix), "team/");
	lr.page_size = 100;
	lr.include_expired = true;
	assert_int_equal(api_list(f->svc, &lr, &res, &e), API_OK);
	assert_int_equal(res.n, 7);
	assert_true(res.locks[3].expired);
	assert_null(res.next_page_token);
	api_list_res_clear(&res);
}

static void
test_store_failures(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock l;
	api_err e;

	acq_req(&q, "flaky", "alice", 30);
	f->ws->fail_op = W_INSERT;
	f->ws->fail_status = GCS_UNAVAILABLE;
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_UNAVAILABLE);
	assert_int_equal(api_code_status(e.code), 503);
	assert_true(e.retry_after >= 1);
	api_lock_clear(&l);
	f->ws->fail_op = W_INSERT;
	f->ws->fail_status = GCS_BUSY;
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_BUSY);
	assert_true(e.retry_after >= 1);
	api_lock_clear(&l);
	/* Nothing was written by the failed attempts. */
	assert_int_equal(api_inspect(f->svc, "flaky", &l, &e), API_NOT_HELD);
	api_lock_clear(&l);
}

/* A page token is a lock name, checked by the server before it reaches
 * the store: a storage that refuses a list as malformed is a fault of
 * ours (500) with or without one, never the caller's. */
static void
test_list_refused_by_store(void **state)
{
	fixture *f = *state;
	api_list_req lr;
	api_list_res res;
	api_err e;

	memset(&lr, 0, sizeof(lr));
	lr.page_size = 10;
	f->ws->fail_op = W_LIST;
	f->ws->fail_status = GCS_INVALID;
	assert_int_equal(api_list(f->svc, &lr, &res, &e), API_INTERNAL);
	api_list_res_clear(&res);
	snprintf(lr.page_token, sizeof(lr.page_token), "%s", "x");
	f->ws->fail_op = W_LIST;
	f->ws->fail_status = GCS_INVALID;
	assert_int_equal(api_list(f->svc, &lr, &res, &e), API_INTERNAL);
	assert_null(res.locks);
	api_list_res_clear(&res);
}

static bool
not_hidden(void *ctx, const char *name)
{
	(void)ctx;
	return strncmp(name, "hidden/", 7) != 0;
}

/* Locks the caller may not see are left out, pages still fill, and no
 * page token ever names one, whatever the page size. */
static void
test_list_hides_names(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_list_req lr;
	api_list_res res;
	api_lock l;
	api_err e;
	char name[32], got[512];
	int i, size, pages;

	for (i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "%s/%02d",
		    i % 3 == 0       ? "a"
		        : i % 3 == 1 ? "hidden"
		                     : "z",
		    i);
		acq_req(&q, name, "alice", 60);
		assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
		api_lock_clear(&l);
	}
	for (size = 1; size <= 5; size++) {
		memset(&lr, 0, sizeof(lr));
		lr.page_size = size;
		lr.visible = not_hidden;
		got[0] = '\0';
		pages = 0;
		do {
			assert_int_equal(api_list(f->svc, &lr, &res, &e),
			    API_OK);
			for (i = 0; i < (int)res.n; i++) {
				assert_true(
				    not_hidden(NULL, res.locks[i].name));
				snprintf(got + strlen(got),
				    sizeof(got) - strlen(got), "%s ",
				    res.locks[i].name);
			}
			/* Only the last page may be short. */
			if (res.next_page_token != NULL) {
				assert_int_equal(res.n, size);
				assert_true(
				    not_hidden(NULL, res.next_page_token));
			}
			snprintf(lr.page_token, sizeof(lr.page_token), "%s",
			    res.next_page_token ? res.next_page_token : "");
			api_list_res_clear(&res);
		} while (lr.page_token[0] && ++pages < 20);
		assert_string_equal(got,
		    "a/00 a/03 a/06 a/09 z/02 z/05 "
		    "z/08 z/11 ");
	}
}

static bool
not_under_h(void *ctx, const char *name)
{
	(void)ctx;
	return strstr(name, "/h/") == NULL;
}

/*
 * A full page followed only by locks the caller may not see ends the
 * listing: no next_page_token says that more exist.  Whether the hidden
 * lock follows in the same store page (p/), or after a store page that
 * ended with the caller's page full (q/: its extra entry a lease of a
 * group, which is no lock); a lock it may see after them (r/) is paged
 * to.
 */
static void
test_list_hidden_tail(void **state)
{
	static const char *const names[] = { "p/a1", "p/a2", "p/h/1", "q/a1",
		"q/a2", "q/a2#lease", "q/h/1", "r/a1", "r/a2", "r/h/1", "r/z" };
	fixture *f = *state;
	json_t *m = json_pack("{ss}", "owner", "x");
	api_list_req lr;
	api_list_res res;
	gcs_object o;
	gcs_err ge;
	api_err e;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_equal(gcs_insert(f->ws->inner, names[i], m, &o, &ge),
		    GCS_OK);
		gcs_object_clear(&o);
	}
	json_decref(m);
	for (i = 0; i < 3; i++) {
		memset(&lr, 0, sizeof(lr));
		snprintf(lr.prefix, sizeof(lr.prefix), "%c/", "pqr"[i]);
		lr.page_size = 2;
		lr.visible = not_under_h;
		assert_int_equal(api_list(f->svc, &lr, &res, &e), API_OK);
		assert_int_equal(res.n, 2);
		if (i < 2) {
			assert_null(res.next_page_token);
			api_list_res_clear(&res);
			continue;
		}
		assert_string_equal(res.next_page_token, "r/a2");
		snprintf(lr.page_token, sizeof(lr.page_token), "r/a2");
		api_list_res_clear(&res);
		assert_int_equal(api_list(f->svc, &lr, &res, &e), API_OK);
		assert_int_equal(res.n, 1);
		assert_string_equal(res.locks[0].name, "r/z");
		assert_null(res.next_page_token);
		api_list_res_clear(&res);
	}
}

/*
 * A group whose listing is cut short (more objects than
 * API_GROUP_SCAN_PAGES read: here stale leases nobody swept, sorting
 * first) is full, though no live lease was in what was read: an
 * exclusive acquire is refused, for the semaphore's two live leases lie
 * past the cut.
 */
static void
test_group_cut_short_is_full(void **state)
{
	fixture *f = *state;
	json_t *m =
	    json_pack("{ss ss ss}", "owner", "x", "lease_id", "x", "ttl", "2");
	api_acquire_req q;
	api_lease_req lq;
	api_lock a, b, c, x;
	gcs_object o;
	gcs_err ge;
	api_err e;
	char name[32];
	int i;

	acq_req(&q, "g", "alice", 60);
	q.limit = 2;
	assert_int_equal(api_acquire(f->svc, &q, &a, &e), API_OK);
	lease_req(&lq, &a, "alice", 0);
	assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
	acq_req(&q, "g", "bob", 60);
	q.limit = 2;
	assert_int_equal(api_acquire(f->svc, &q, &b, &e), API_OK);
	acq_req(&q, "g", "carol", 60);
	q.limit = 2;
	assert_int_equal(api_acquire(f->svc, &q, &c, &e), API_OK);
	/* Long expired, and before the live ones ('-' below hex). */
	clock_ms -= 3600 * 1000;
	for (i = 0; i < API_GROUP_SCAN_PAGES * GCS_LIST_PAGE_MAX; i++) {
		snprintf(name, sizeof(name), "g#-%06d", i);
		assert_int_equal(gcs_insert(f->ws->inner, name, m, &o, &ge),
		    GCS_OK);
		gcs_object_clear(&o);
	}
	clock_ms += 3600 * 1000;
	json_decref(m);
	acq_req(&q, "g", "xavier", 60);
	assert_int_equal(api_acquire(f->svc, &q, &x, &e), API_LOCKED);
	api_lock_clear(&x);
	/* Nor may an exclusive lease flagged over the group, met expired,
	 * be removed as any other: the guard counts the unread as live
	 * (and patches the head it was given back into a head). */
	assert_int_equal(gcs_get(f->ws->inner, "g", &o, &ge), GCS_OK);
	assert_int_equal(group_guard_removal(f->svc, "g", &o, &e), 1);
	gcs_object_clear(&o);
	api_lock_clear(&a);
	api_lock_clear(&b);
	api_lock_clear(&c);
}

static bool
only_last(void *ctx, const char *name)
{
	(void)ctx;
	return strcmp(name, "zz") == 0;
}

/* A caller who may see nothing in a long run of locks is told to narrow
 * the prefix (400) rather than handed a token naming a hidden lock, after
 * a bounded number of store reads; a shorter run is simply read past. */
static void
test_list_too_sparse(void **state)
{
	fixture *f = *state;
	json_t *m = json_pack("{ss}", "owner", "x");
	int n = API_LIST_SCAN_PAGES * GCS_LIST_PAGE_MAX, i, before;
	api_list_req lr;
	api_list_res res;
	gcs_object o;
	gcs_err ge;
	api_err e;
	char name[32];

	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "h/%06d", i);
		assert_int_equal(gcs_insert(f->ws->inner, name, m, &o, &ge),
		    GCS_OK);
		gcs_object_clear(&o);
	}
	assert_int_equal(gcs_insert(f->ws->inner, "zz", m, &o, &ge), GCS_OK);
	gcs_object_clear(&o);
	json_decref(m);
	memset(&lr, 0, sizeof(lr));
	lr.page_size = 1;
	lr.visible = only_last;
	before = f->ws->calls[W_LIST];
	assert_int_equal(api_list(f->svc, &lr, &res, &e), API_BAD_REQUEST);
	assert_string_equal(e.reason, "list_too_sparse");
	assert_int_equal(f->ws->calls[W_LIST] - before, API_LIST_SCAN_PAGES);
	assert_null(res.next_page_token);
	api_list_res_clear(&res);
	/* From past most of the run, the visible lock is found. */
	snprintf(lr.page_token, sizeof(lr.page_token), "h/%06d", n / 2);
	assert_int_equal(api_list(f->svc, &lr, &res, &e), API_OK);
	assert_int_equal(res.n, 1);
	assert_string_equal(res.locks[0].name, "zz");
	assert_null(res.next_page_token);
	api_list_res_clear(&res);
}

/* What the bucket holds is not trusted to be what lockgate wrote: labels
 * and claims of another shape (someone else's writer, a thousand nested
 * arrays that would overrun a loop task's stack when printed) are left
 * out of the lock, which is still shown. */
static void
test_foreign_metadata_shapes(void **state)
{
	fixture *f = *state;
	gcs_store *st = &f->ws->base;
	api_acquire_req q;
	api_lock l, x;
	gcs_object o, p;
	gcs_err ge;
	api_err e;
	json_t *md;
	char deep[2100];
	int i, n = 0;

	n += snprintf(deep + n, sizeof(deep) - (size_t)n, "{\"a\":");
	for (i = 0; i < 1000; i++)
		deep[n++] = '[';
	for (i = 0; i < 1000; i++)
		deep[n++] = ']';
	snprintf(deep + n, sizeof(deep) - (size_t)n, "}");
	acq_req(&q, "foreign", "alice", 60);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	assert_int_equal(gcs_get(st, "foreign", &o, &ge), GCS_OK);
	md = json_pack("{s:s, s:s}", "claims", deep, "labels",
	    "{\"k\": 1, \"s\": \"text\"}");
	assert_int_equal(gcs_patch(st, "foreign", o.generation,
	                     o.metageneration, md, &p, &ge),
	    GCS_OK);
	json_decref(md);
	gcs_object_clear(&o);
	gcs_object_clear(&p);
	assert_int_equal(api_inspect(f->svc, "foreign", &x, &e), API_OK);
	assert_string_equal(x.owner, "alice");
	assert_null(x.claims);
	assert_null(x.labels);
	api_lock_clear(&x);
	api_lock_clear(&l);
}

/*
 * One request, two attempts (the first acquire of a waiter and its next
 * poll): the first attempt's insert was applied but its answer lost and
 * the retries failed.  The next attempt must find that lease to be its
 * own (same lease_id, made once when the request was parsed), not wait
 * behind it until its TTL.
 */
static void
test_attempts_share_lease_id(void **state)
{
	fixture *f = *state;
	api_acquire_req q, other;
	api_lock l, p, x;
	api_err e;
	char id[API_LEASE_ID_MAX + 1];

	acq_req(&q, "orphan", "alice", 30);
	snprintf(id, sizeof(id), "%s", q.lease_id);
	f->ws->lost_op = W_INSERT;
	f->ws->lost_status = GCS_UNAVAILABLE;
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_UNAVAILABLE);
	api_lock_clear(&l);
	/* The waiter's read sees its own lease: worth an attempt, and no
	 * write yet. */
	wrap_reset(f->ws);
	assert_int_equal(api_acquire_peek(f->svc, &q, &p, &e), API_OK);
	assert_int_equal(wrap_writes(f->ws), 0);
	assert_string_equal(p.lease_id, "");
	api_lock_clear(&p);
	/* The attempt finds it, renews it (one patch) and answers it. */
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	assert_string_equal(l.lease_id, id);
	assert_int_equal(f->ws->calls[W_PATCH], 1);
	assert_int_equal(api_inspect(f->svc, "orphan", &p, &e), API_OK);
	assert_int_equal(l.fencing_token, p.fencing_token);
	api_lock_clear(&p);
	/* Anyone else sees it held, and never its lease_id. */
	acq_req(&other, "orphan", "bob", 30);
	assert_int_equal(api_acquire_peek(f->svc, &other, &x, &e), API_LOCKED);
	assert_string_equal(x.owner, "alice");
	assert_string_equal(x.lease_id, "");
	assert_true(e.retry_after >= 1);
	api_lock_clear(&x);
	/* The same lease_id from another owner is not theirs. */
	snprintf(other.lease_id, sizeof(other.lease_id), "%s", id);
	assert_int_equal(api_acquire(f->svc, &other, &x, &e), API_LOCKED);
	assert_string_equal(x.lease_id, "");
	api_lock_clear(&x);
	/* Once it expires, peek says try, for an attempt to take over. */
	clock_ms += 32000;
	assert_int_equal(api_acquire_peek(f->svc, &other, &x, &e), API_OK);
	api_lock_clear(&x);
	api_lock_clear(&l);
}

/* The lease_id is made once, by prepare, with or without a client key
 * (which stays a key, never a lease_id); an unprepared request is a bug
 * of the caller's code, refused before any store call. */
static void
test_prepare_lease_id(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock l;
	api_err e;
	char id[API_LEASE_ID_MAX + 1];

	acq_req(&q, "p", "alice", 30);
	assert_int_equal(strlen(q.lease_id), API_LEASE_ID_NEW);
	assert_true(api_lease_id_valid(q.lease_id));
	snprintf(id, sizeof(id), "%s", q.lease_id);
	api_acquire_prepare(&q);
	assert_string_equal(q.lease_id, id); /* once */
	acq_req(&q, "p", "alice", 30);
	assert_string_not_equal(q.lease_id, id); /* one per request */
	snprintf(q.key, sizeof(q.key), "client-key-1");
	api_acquire_prepare(&q);
	assert_string_not_equal(q.lease_id, "client-key-1");
	assert_int_equal(strlen(q.lease_id), API_LEASE_ID_NEW);
	q.lease_id[0] = '\0';
	wrap_reset(f->ws);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_INTERNAL);
	api_lock_clear(&l);
	assert_int_equal(api_acquire_peek(f->svc, &q, &l, &e), API_INTERNAL);
	api_lock_clear(&l);
	assert_int_equal(wrap_writes(f->ws) + f->ws->calls[W_GET], 0);
}

/* A request with client key KEY, as lockctl sends on every retry. */
static void
keyed_req(api_acquire_req *q, const char *name, const char *owner, int ttl,
    const char *key)
{
	acq_req(q, name, owner, ttl);
	snprintf(q->key, sizeof(q->key), "%s", key);
}

/*
 * Issue 18, 1: one client key, two grants.  A takes the lock with key K,
 * stalls past its TTL; B takes over and releases; A' (same owner, same K:
 * a re-run job) takes it again.  A's lease is the first grant only: its
 * refresh and release are refused as lost, on this instance (its cache
 * knows the old grant) and on another one (it reads), and A''s lease is
 * untouched.
 */
static void
test_key_reused_is_a_new_lease(void **state)
{
	fixture *f = *state;
	api_service *other = api_new(&f->ws->base, NULL, NULL);
	api_acquire_req qa, qb, qa2;
	api_lease_req lq;
	api_lock a, b, a2, x;
	api_err e;

	keyed_req(&qa, "reuse", "ci", 10, "run-1234567");
	assert_int_equal(api_acquire(f->svc, &qa, &a, &e), API_OK);
	assert_string_not_equal(a.lease_id, "run-1234567");
	clock_ms += 12000; /* past ttl and margin */
	acq_req(&qb, "reuse", "bob", 10);
	assert_int_equal(api_acquire(f->svc, &qb, &b, &e), API_OK);
	lease_req(&lq, &b, "bob", 0);
	assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
	keyed_req(&qa2, "reuse", "ci", 10, "run-1234567");
	assert_int_equal(api_acquire(other, &qa2, &a2, &e), API_OK);
	assert_true(a2.fencing_token != a.fencing_token);
	assert_string_not_equal(a2.lease_id, a.lease_id);

	lease_req(&lq, &a, "ci", 0);
	assert_int_equal(api_refresh(f->svc, &lq, &x, &e), API_LEASE_LOST);
	api_lock_clear(&x);
	assert_int_equal(api_refresh(other, &lq, &x, &e), API_LEASE_LOST);
	api_lock_clear(&x);
	assert_int_equal(api_release(f->svc, &lq, &e), API_LEASE_LOST);
	assert_int_equal(api_release(other, &lq, &e), API_LEASE_LOST);
	assert_int_equal(api_inspect(f->svc, "reuse", &x, &e), API_OK);
	assert_int_equal(x.fencing_token, a2.fencing_token);
	api_lock_clear(&x);
	/* A' still holds it, by its own lease_id. */
	lease_req(&lq, &a2, "ci", 0);
	assert_int_equal(api_refresh(f->svc, &lq, &x, &e), API_OK);
	assert_int_equal(x.fencing_token, a2.fencing_token);
	api_lock_clear(&x);
	api_lock_clear(&a);
	api_lock_clear(&b);
	api_lock_clear(&a2);
	api_free(other);
}

/*
 * A refresh or release that names the live lease by the client key its
 * acquire was sent with, not by the lease_id the answer gave: the
 * caller's mistake, a 400 lease_id_is_key that changes nothing (it was a
 * 409 lease_lost, "stop the work", while the lease lived), on this
 * instance and on another.  Another owner sending that key is told what
 * any lease_id not the holder's gets.
 */
static void
test_key_is_not_the_lease_id(void **state)
{
	fixture *f = *state;
	api_service *other = api_new(&f->ws->base, NULL, NULL);
	api_service *svcs[2] = { f->svc, other };
	api_acquire_req q;
	api_lease_req lq;
	api_lock a, x;
	api_err e;
	int i;

	keyed_req(&q, "keyed", "ci", 30, "run-7654321");
	assert_int_equal(api_acquire(f->svc, &q, &a, &e), API_OK);
	lease_req(&lq, &a, "ci", 0);
	snprintf(lq.lease_id, sizeof(lq.lease_id), "run-7654321");
	for (i = 0; i < 2; i++) {
		wrap_reset(f->ws);
		assert_int_equal(api_refresh(svcs[i], &lq, &x, &e),
		    API_BAD_REQUEST);
		assert_string_equal(e.reason, "lease_id_is_key");
		api_lock_clear(&x);
		assert_int_equal(api_release(svcs[i], &lq, &e),
		    API_BAD_REQUEST);
		assert_string_equal(e.reason, "lease_id_is_key");
		assert_int_equal(wrap_writes(f->ws), 0);
	}
	snprintf(lq.owner, sizeof(lq.owner), "mallory");
	assert_int_equal(api_release(other, &lq, &e), API_LEASE_LOST);
	assert_int_equal(api_inspect(f->svc, "keyed", &x, &e), API_OK);
	assert_int_equal(x.fencing_token, a.fencing_token);
	api_lock_clear(&x);
	lease_req(&lq, &a, "ci", 0);
	assert_int_equal(api_release(other, &lq, &e), API_OK);
	api_lock_clear(&a);
	api_free(other);
}

/* As test_key_is_not_the_lease_id, for shared leases: the one the head
 * carries and one of its own object. */
static void
test_group_key_is_not_the_lease_id(void **state)
{
	fixture *f = *state;
	static const char *keys[] = { "run-head-0001", "run-object-01" };
	api_acquire_req q;
	api_lease_req lq;
	api_lock l[2], x;
	api_err e;
	int i;

	for (i = 0; i < 2; i++) {
		keyed_req(&q, "gkeyed", "ci", 30, keys[i]);
		q.mode = API_MODE_SHARED;
		assert_int_equal(api_acquire(f->svc, &q, &l[i], &e), API_OK);
	}
	for (i = 0; i < 2; i++) {
		lease_req(&lq, &l[i], "ci", 0);
		snprintf(lq.lease_id, sizeof(lq.lease_id), "%s", keys[i]);
		wrap_reset(f->ws);
		assert_int_equal(api_refresh(f->svc, &lq, &x, &e),
		    API_BAD_REQUEST);
		assert_string_equal(e.reason, "lease_id_is_key");
		api_lock_clear(&x);
		assert_int_equal(api_release(f->svc, &lq, &e), API_BAD_REQUEST);
		assert_string_equal(e.reason, "lease_id_is_key");
		assert_int_equal(wrap_writes(f->ws), 0);
		snprintf(lq.owner, sizeof(lq.owner), "mallory");
		assert_int_equal(api_release(f->svc, &lq, &e),
		    API_LEASE_NOT_FOUND);
	}
	for (i = 0; i < 2; i++) {
		lease_req(&lq, &l[i], "ci", 0);
		assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
		api_lock_clear(&l[i]);
	}
}

/*
 * A lease written before client keys were kept apart stored the client's
 * key as its lease_id: the same key still finds it as its own.
 */
static void
test_key_finds_lease_of_old_layout(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock l, x;
	api_err e;
	gcs_object o;
	gcs_err ge;
	json_t *meta;

	meta = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "lease_id", "old-key-123",
	    "owner", "ci", "holder", "h", "purpose", "", "ttl", "30",
	    "expected_duration", "0");
	assert_int_equal(gcs_insert(&f->ws->base, "old", meta, &o, &ge),
	    GCS_OK);
	json_decref(meta);
	keyed_req(&q, "old", "ci", 30, "old-key-123");
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
	assert_string_equal(l.lease_id, "old-key-123");
	assert_int_equal(l.fencing_token, o.generation);
	gcs_object_clear(&o);
	/* Another key of the same owner is someone else. */
	keyed_req(&q, "old", "ci", 30, "other-key-1");
	assert_int_equal(api_acquire(f->svc, &q, &x, &e), API_LOCKED);
	api_lock_clear(&x);
	api_lock_clear(&l);
}

/*
 * Issue 18, 2: a re-acquire with the key of a live lease answers that
 * lease renewed (one patch), never with an expiry that is about to pass:
 * the caller counts its TTL from its request.  Just before the TTL and
 * just after it (within the 1 s margin, when the lease still counts as
 * live).
 */
static void
test_reacquire_renews(void **state)
{
	fixture *f = *state;
	static const int64_t offsets[] = { 9500, 10500 };
	api_acquire_req q;
	api_lock l, x;
	api_err e;
	size_t i;

	for (i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		int64_t t0;

		keyed_req(&q, i == 0 ? "renew-a" : "renew-b", "ci", 10,
		    "retry-key-1");
		t0 = clock_ms;
		assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_OK);
		clock_ms = t0 + offsets[i];
		wrap_reset(f->ws);
		assert_int_equal(api_acquire(f->svc, &q, &x, &e), API_OK);
		assert_int_equal(f->ws->calls[W_PATCH], 1);
		assert_string_equal(x.lease_id, l.lease_id);
		assert_int_equal(x.fencing_token, l.fencing_token);
		assert_false(x.expired);
		assert_true(x.expires_at_ms >= clock_ms + 10000 - 1);
		assert_int_equal(x.expires_in, 10);
		api_lock_clear(&x);
		api_lock_clear(&l);
	}
}

/*
 * api_acquire_finds_own, the server's look before a keyed request waits
 * behind others: only a live lease of the same key and owner, exclusive
 * or one of a group's (the head's own, or an object of its own), and no
 * write.  Anything else is 0: the request then waits its turn.
 */
static void
test_finds_own(void **state)
{
	fixture *f = *state;
	api_acquire_req q, mine;
	api_lock a, r, x;
	api_err e;

	keyed_req(&mine, "own", "ci", 10, "retry-key-1");
	assert_int_equal(api_acquire_finds_own(f->svc, &mine), 0); /* free */
	assert_int_equal(api_acquire(f->svc, &mine, &a, &e), API_OK);
	wrap_reset(f->ws);
	keyed_req(&q, "own", "ci", 10, "retry-key-1"); /* the retry */
	assert_int_equal(api_acquire_finds_own(f->svc, &q), 1);
	assert_int_equal(wrap_writes(f->ws), 0);
	acq_req(&q, "own", "ci", 10); /* no key */
	assert_int_equal(api_acquire_finds_own(f->svc, &q), 0);
	keyed_req(&q, "own", "ci", 10, "retry-key-2");
	assert_int_equal(api_acquire_finds_own(f->svc, &q), 0);
	keyed_req(&q, "own", "bob", 10, "retry-key-1");
	assert_int_equal(api_acquire_finds_own(f->svc, &q), 0);
	clock_ms += 12000; /* past ttl and margin: no longer anyone's */
	assert_int_equal(api_acquire_finds_own(f->svc, &mine), 0);
	api_lock_clear(&a);

	/* Shared: the lease the head carries, and one of its own object. */
	keyed_req(&mine, "own-rw", "ci", 30, "read-key-01");
	mine.mode = API_MODE_SHARED;
	assert_int_equal(api_acquire(f->svc, &mine, &a, &e), API_OK);
	assert_int_equal(api_acquire_finds_own(f->svc, &mine), 1);
	keyed_req(&q, "own-rw", "ci", 30, "read-key-02");
	q.mode = API_MODE_SHARED;
	assert_int_equal(api_acquire(f->svc, &q, &r, &e), API_OK);
	wrap_reset(f->ws);
	assert_int_equal(api_acquire_finds_own(f->svc, &q), 1);
	assert_int_equal(wrap_writes(f->ws), 0);
	keyed_req(&q, "own-rw", "ci", 30, "read-key-03");
	q.mode = API_MODE_SHARED;
	assert_int_equal(api_acquire_finds_own(f->svc, &q), 0);
	/* The retry gets the very lease it looked for. */
	assert_int_equal(api_acquire(f->svc, &mine, &x, &e), API_OK);
	assert_string_equal(x.lease_id, a.lease_id);
	assert_int_equal(x.fencing_token, a.fencing_token);
	api_lock_clear(&x);
	api_lock_clear(&a);
	api_lock_clear(&r);
}

/* Issue 18, 5: a force release names the lease the admin saw; a newer
 * lease is refused (409) and left alone. */
static void
test_force_release_expected_token(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lease_req lq;
	api_lock a, b, x;
	api_err e;

	acq_req(&q, "forced", "alice", 30);
	assert_int_equal(api_acquire(f->svc, &q, &a, &e), API_OK);
	lease_req(&lq, &a, "alice", 0);
	assert_int_equal(api_release(f->svc, &lq, &e), API_OK);
	acq_req(&q, "forced", "bob", 30);
	assert_int_equal(api_acquire(f->svc, &q, &b, &e), API_OK);
	/* The admin's view still shows alice's lease. */
	assert_int_equal(api_force_release(f->svc, "forced", "root", "stale",
	                     a.fencing_token, &e),
	    API_LEASE_LOST);
	assert_string_equal(e.reason, "fencing_token_mismatch");
	assert_int_equal(api_inspect(f->svc, "forced", &x, &e), API_OK);
	assert_int_equal(x.fencing_token, b.fencing_token);
	api_lock_clear(&x);
	assert_int_equal(api_force_release(f->svc, "forced", "root",
	                     "stuck deploy", b.fencing_token, &e),
	    API_OK);
	/* the admin's reason reaches the event (logs, timeline) */
	assert_string_equal(f->reason, "stuck deploy");
	assert_int_equal(api_inspect(f->svc, "forced", &x, &e), API_NOT_HELD);
	api_lock_clear(&x);
	api_lock_clear(&a);
	api_lock_clear(&b);
}

/* A string of N copies of C, in BUF. */
static char *
fill(char *buf, int c, size_t n)
{
	memset(buf, c, n);
	buf[n] = '\0';
	return buf;
}

/* A request whose lease is too large as stored metadata, though each value
 * is within its own limit: every '"' takes two bytes, and the labels and
 * the claims are JSON text inside a string, escaped twice.  Free its
 * labels and claims. */
static void
huge_req(api_acquire_req *q, const char *name)
{
	char key[API_LABEL_KEY_MAX + 1], val[512];
	int i;

	acq_req(q, name, "alice", 30);
	q->claims = json_pack("{s:s}", "team", fill(val, '"', 300));
	fill(q->holder, '"', API_HOLDER_MAX);
	fill(q->purpose, '"', API_PURPOSE_MAX);
	q->labels = json_object();
	for (i = 0; i < API_LABELS_MAX; i++) {
		fill(key, 'k', API_LABEL_KEY_MAX);
		key[0] = (char)('a' + i);
		json_object_set_new(q->labels, key,
		    json_string(fill(val, '"', 50)));
	}
}

/* design 2: a lease over the store's 8 KiB of metadata is the caller's
 * 400 metadata_too_large, found before any store call (mem:// would have
 * granted it; file:// and gs:// refused it as a bug, a 500). */
static void
test_metadata_too_large(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock l;
	api_err e;
	char why[128];
	json_t *bad;

	huge_req(&q, "big");
	assert_true(api_labels_valid(q.labels, why, sizeof(why)));
	assert_int_equal(api_acquire_check(&q, &e), API_BAD_REQUEST);
	assert_string_equal(e.reason, "metadata_too_large");
	assert_non_null(strstr(e.message, "8192"));
	wrap_reset(f->ws);
	assert_int_equal(api_acquire(f->svc, &q, &l, &e), API_BAD_REQUEST);
	assert_int_equal(api_code_status(e.code), 400);
	assert_string_equal(e.reason, "metadata_too_large");
	api_lock_clear(&l);
	assert_int_equal(wrap_writes(f->ws) + f->ws->calls[W_GET], 0);
	assert_int_equal(api_inspect(f->svc, "big", &l, &e), API_NOT_HELD);
	api_lock_clear(&l);
	json_decref(q.labels);
	json_decref(q.claims);

	/* Label values are text, as holder and purpose are. */
	bad = json_pack("{s:s}", "env", "a\001b");
	assert_false(api_labels_valid(bad, why, sizeof(why)));
	assert_non_null(strstr(why, "control"));
	json_decref(bad);
	bad = json_pack("{s:s}", "env", "tab\there");
	assert_false(api_labels_valid(bad, why, sizeof(why)));
	json_decref(bad);
	bad = json_pack("{s:s}", "env", "del\177");
	assert_false(api_labels_valid(bad, why, sizeof(why)));
	json_decref(bad);
	bad = json_pack("{s:s%}", "env", "nul\0x", (size_t)5);
	assert_false(api_labels_valid(bad, why, sizeof(why)));
	json_decref(bad);
	bad = json_pack("{s:s}", "env", "caf\303\251 \"q\" \\");
	assert_true(api_labels_valid(bad, why, sizeof(why)));
	json_decref(bad);
}

/* Q, huge_req's, with its holder cut to the largest the check passes. */
static void
largest_req(api_acquire_req *q, const char *name)
{
	char *h;
	size_t n;
	api_err e;

	huge_req(q, name);
	/* Shrink until it fits, then grow a byte at a time: the holder ends
	 * at the largest size that passes. */
	h = q->holder;
	n = strlen(h);
	while (n > 0 && api_acquire_check(q, &e) != API_OK)
		h[--n] = '\0';
	assert_true(n > 0 && n < API_HOLDER_MAX - 1);
	do {
		h[n++] = 'x';
		h[n] = '\0';
	} while (api_acquire_check(q, &e) == API_OK);
	h[--n] = '\0';
	assert_int_equal(api_acquire_check(q, &e), API_OK);
}

/* Lease O's metadata at the widest its refreshes can make it, and what
 * an exclusive lease carries over a group's head, fits store ST exactly:
 * with one more byte of holder the store refuses it. */
static void
widest_fits_exactly(gcs_store *st, const gcs_object *o)
{
	char seq[24], more[API_HOLDER_MAX + 2];
	gcs_object o2;
	gcs_err ge;
	json_t *m = json_deep_copy(o->metadata);

	snprintf(seq, sizeof(seq), "%" PRId64, INT64_MAX);
	json_object_set_new(m, "refresh_seq", json_string(seq));
	/* A group lease's refresh writes when the version it replaced
	 * ended, an int64 too. */
	json_object_set_new(m, "prev_end", json_string(seq));
	json_object_set_new(m, "lg_over_group", json_string("1"));
	json_object_set_new(m, "lg_token", json_string(seq));
	assert_int_equal(gcs_insert(st, "edge-copy", m, &o2, &ge), GCS_OK);
	assert_int_equal(gcs_remove(st, "edge-copy", o2.generation,
	                     o2.metageneration, &ge),
	    GCS_OK);
	gcs_object_clear(&o2);
	snprintf(more, sizeof(more), "%sx",
	    json_string_value(json_object_get(o->metadata, "holder")));
	json_object_set_new(m, "holder", json_string(more));
	assert_int_equal(gcs_insert(st, "edge-over", m, &o2, &ge), GCS_INVALID);
	json_decref(m);
}

/* A shared lease of NAME comes and goes on SVC: NAME stays a group's
 * head. */
static void
group_head_left(api_service *svc, const char *name)
{
	api_acquire_req g;
	api_lease_req lq;
	api_lock l;
	api_err e;

	acq_req(&g, name, "bob", 30);
	g.mode = API_MODE_SHARED;
	assert_int_equal(api_acquire(svc, &g, &l, &e), API_OK);
	lease_req(&lq, &l, "bob", 30);
	assert_int_equal(api_release(svc, &lq, &e), API_OK);
	api_lock_clear(&l);
}

/*
 * The check counts exactly what the file store counts: the largest lease
 * it passes is granted and refreshed there, and that lease's metadata,
 * grown as far as refreshes can grow it, is exactly at the store's limit
 * (one byte more is refused by the store itself).  So too when it is
 * granted over a group's head, where it carries lg_over_group and its
 * token (without room kept for them, such a lease stopped being
 * refreshable, a 500, once its refresh_seq had grown).
 */
static void
test_metadata_limit_exact(void **state)
{
	static const char *names[] = { "edge", "grouped" };
	api_acquire_req q;
	api_lease_req lq;
	api_service *svc;
	gcs_store *st;
	gcs_object o;
	api_lock l, r;
	api_err e;
	gcs_err ge;
	int over, i;
	char t_dir[] = "/tmp/lockgate-test-api.XXXXXX";

	(void)state;
	assert_non_null(mkdtemp(t_dir));
	st = gcs_file_new(t_dir, &ge);
	assert_non_null(st);
	svc = api_new(st, NULL, NULL);
	for (over = 0; over < 2; over++) {
		if (over)
			group_head_left(svc, names[over]);
		largest_req(&q, names[over]);
		assert_int_equal(api_acquire(svc, &q, &l, &e), API_OK);
		assert_int_equal(gcs_get(st, names[over], &o, &ge), GCS_OK);
		assert_int_equal(json_object_get(o.metadata, "lg_over_group") !=
		        NULL,
		    over);
		gcs_object_clear(&o);
		lease_req(&lq, &l, "alice", API_TTL_MAX);
		for (i = 0; i < 3; i++) {
			assert_int_equal(api_refresh(svc, &lq, &r, &e), API_OK);
			assert_int_equal(r.fencing_token, l.fencing_token);
			api_lock_clear(&r);
		}
		assert_int_equal(gcs_get(st, names[over], &o, &ge), GCS_OK);
		widest_fits_exactly(st, &o);
		gcs_object_clear(&o);
		api_lock_clear(&l);
		json_decref(q.labels);
		json_decref(q.claims);
	}
	api_free(svc);
	gcs_store_free(st);
	tmpdir_remove(t_dir);
}

/* A text longer than its field (metadata another client stored) is cut
 * at a character boundary, never in the middle of one (the fuzzer's
 * find: the lock then could not be shown as JSON). */
static void
test_copy_utf8_boundary(void **state)
{
	char src[16], dst[6];

	(void)state;
	snprintf(src, sizeof(src), "ab\xc3\xa9\xe2\x82\xac"); /* ab é € */
	api_copy(dst, sizeof(dst), src); /* 5 bytes fit: "ab" + "é" + 1 */
	assert_string_equal(dst, "ab\xc3\xa9");
	api_copy(dst, 4, src); /* "ab" + half of "é" */
	assert_string_equal(dst, "ab");
	api_copy(dst, sizeof(dst), "abcdefgh");
	assert_string_equal(dst, "abcde");
	api_copy(dst, sizeof(dst), "\xc3\xa9"); /* fits whole */
	assert_string_equal(dst, "\xc3\xa9");
}

/* An acquire of REQ's kind on NAME by OWNER with TTL. */
static int
group_take(fixture *f, const char *name, const char *owner, api_mode mode,
    int limit, int ttl, api_lock *out, api_err *err)
{
	api_acquire_req q;

	acq_req(&q, name, owner, ttl);
	q.mode = mode;
	q.limit = limit;
	return api_acquire(f->svc, &q, out, err);
}

/* The fencing token an exclusive lease over a group recorded. */
static int64_t
lease_token_fetch(const gcs_object *o)
{
	const char *t =
	    json_string_value(json_object_get(o->metadata, "lg_token"));

	return t != NULL ? strtoll(t, NULL, 10) : 0;
}

/*
 * A reader's lease object inserted (pending: its acquire not done) while
 * an exclusive lease over the group expired: the next exclusive acquire
 * must not remove the flagged lease; it becomes a group head again, and
 * the acquire is refused while the reader's lease is live.
 */
static void
test_group_flagged_takeover(void **state)
{
	fixture *f = *state;
	api_lock r, w, x;
	api_err err;
	gcs_page pg;
	gcs_object o;
	gcs_err ge;
	json_t *m;

	assert_int_equal(group_take(f, "rw", "reader", API_MODE_SHARED, 1, 30,
	                     &r, &err),
	    API_OK);
	{
		api_lease_req q;
		lease_req(&q, &r, "reader", 0);
		assert_int_equal(api_release(f->svc, &q, &err), API_OK);
	}
	assert_int_equal(group_take(f, "rw", "writer", API_MODE_EXCLUSIVE, 1, 2,
	                     &w, &err),
	    API_OK);
	assert_int_equal(gcs_get(&f->ws->base, "rw", &o, &ge), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(o.metadata, "lg_over_group")),
	    "1");
	/* Its token came from a marker object, gone again; a token of its
	 * own, above the reader's. */
	assert_int_equal(lease_token_fetch(&o), w.fencing_token);
	assert_true(w.fencing_token > r.fencing_token);
	assert_true(w.fencing_token != o.generation);
	gcs_object_clear(&o);
	assert_int_equal(gcs_list(&f->ws->base, "rw#", 10, NULL, &pg, &ge),
	    GCS_OK);
	assert_int_equal(pg.n, 0);
	gcs_page_clear(&pg);
	clock_ms += 5000; /* the writer's lease expired */
	m = json_pack("{s:s,s:s,s:s,s:s,s:s}", "lease_id", "pendingreader1",
	    "owner", "r2", "ttl", "30", "mode", "shared", "limit", "1");
	assert_int_equal(gcs_insert(&f->ws->base, "rw#pendingreader1", m, &o,
	                     &ge),
	    GCS_OK);
	gcs_object_clear(&o);
	json_decref(m);
	assert_int_equal(group_take(f, "rw", "other", API_MODE_EXCLUSIVE, 1, 30,
	                     &x, &err),
	    API_LOCKED);
	api_lock_clear(&x);
	assert_int_equal(gcs_get(&f->ws->base, "rw", &o, &ge), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(o.metadata, "lg_kind")),
	    "group");
	gcs_object_clear(&o);
	api_lock_clear(&r);
	api_lock_clear(&w);
}

/* A group lease refreshed after its expiry (others may have counted its
 * slot free meanwhile) is lost, and its object removed; the lease the
 * head carries likewise, cleared from the head (which stays). */
static void
test_group_refresh_after_expiry(void **state)
{
	fixture *f = *state;
	api_lease_req q;
	api_lock a, b, c, r;
	api_err err;
	gcs_object o;
	gcs_err ge;
	char oname[400];

	assert_int_equal(group_take(f, "sem", "a", API_MODE_EXCLUSIVE, 3, 2, &a,
	                     &err),
	    API_OK);
	assert_int_equal(group_take(f, "sem", "c", API_MODE_EXCLUSIVE, 3, 2, &c,
	                     &err),
	    API_OK);
	assert_int_equal(group_take(f, "sem", "b", API_MODE_EXCLUSIVE, 3, 30,
	                     &b, &err),
	    API_OK);
	clock_ms += 2500; /* past its ttl, within the margin: still good */
	lease_req(&q, &a, "a", 0);
	assert_int_equal(api_refresh(f->svc, &q, &r, &err), API_LEASE_LOST);
	api_lock_clear(&r);
	assert_int_equal(gcs_get(&f->ws->base, "sem", &o, &ge), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(o.metadata, "lg_kind")),
	    "group");
	assert_null(json_object_get(o.metadata, "lease_id"));
	gcs_object_clear(&o);
	assert_int_equal(api_refresh(f->svc, &q, &r, &err),
	    API_LEASE_NOT_FOUND);
	lease_req(&q, &c, "c", 0);
	assert_int_equal(api_refresh(f->svc, &q, &r, &err), API_LEASE_LOST);
	api_lock_clear(&r);
	snprintf(oname, sizeof(oname), "sem#%s", c.lease_id);
	assert_int_equal(gcs_get(&f->ws->base, oname, &o, &ge), GCS_NOT_FOUND);
	api_lock_clear(&c);
	/* Within its ttl a refresh is one write and keeps the lease. */
	lease_req(&q, &b, "b", 0);
	f->ws->calls[W_PATCH] = 0;
	assert_int_equal(api_refresh(f->svc, &q, &r, &err), API_OK);
	assert_int_equal(f->ws->calls[W_PATCH], 1);
	assert_int_equal(r.fencing_token, b.fencing_token);
	api_lock_clear(&r);
	api_lock_clear(&a);
	api_lock_clear(&b);
}

/* The head NAME as stored; its lease_id ("" when it carries none). */
static const char *
head_lease_id(fixture *f, const char *name, gcs_object *o)
{
	gcs_err ge;
	const char *id;

	assert_int_equal(gcs_get(&f->ws->base, name, o, &ge), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(o->metadata, "lg_kind")),
	    "group");
	id = json_string_value(json_object_get(o->metadata, "lease_id"));
	return id != NULL ? id : "";
}

/*
 * The first lease of a group is carried by the head its one insert
 * creates (token: the head's generation).  Later acquires count it with
 * the listed ones and check its mode and limit; inspect shows it among
 * the holders without a lease_id; another instance (no cache) releases
 * it with one patch, and the head's slot is not reused.
 */
/*
 * A semaphore refusal's Retry-After: 1 s while some lease was made a
 * moment ago (perhaps an acquire in flight, counted until its refusal
 * removes it: a burst refused with a slot about to be free again), else
 * when the first lease expires.  Its message says every slot is taken.
 */
static void
test_group_refusal_retry_after(void **state)
{
	fixture *f = *state;
	api_lock a, b, l;
	api_err err;

	assert_int_equal(group_take(f, "burst", "a", API_MODE_EXCLUSIVE, 2, 30,
	                     &a, &err),
	    API_OK);
	assert_int_equal(group_take(f, "burst", "b", API_MODE_EXCLUSIVE, 2, 30,
	                     &b, &err),
	    API_OK);
	assert_int_equal(group_take(f, "burst", "c", API_MODE_EXCLUSIVE, 2, 30,
	                     &l, &err),
	    API_LOCKED);
	assert_int_equal(err.retry_after, 1);
	assert_non_null(strstr(err.message, "all 2 leases"));
	api_lock_clear(&l);
	clock_ms += 5000;
	assert_int_equal(group_take(f, "burst", "c", API_MODE_EXCLUSIVE, 2, 30,
	                     &l, &err),
	    API_LOCKED);
	assert_int_equal(err.retry_after, 26); /* 25 s left, and the margin */
	api_lock_clear(&l);
	api_lock_clear(&a);
	api_lock_clear(&b);
}

static void
test_group_head_lease_counted(void **state)
{
	fixture *f = *state;
	api_service *other = api_new(&f->ws->base, NULL, NULL);
	api_lock a, b, c, l;
	api_lease_req q;
	api_err err;
	gcs_object o;
	gcs_page pg;
	gcs_err ge;
	json_t *j, *h;
	size_t i;

	memset(f->ws->calls, 0, sizeof(f->ws->calls));
	assert_int_equal(group_take(f, "emb", "a", API_MODE_EXCLUSIVE, 2, 30,
	                     &a, &err),
	    API_OK);
	assert_int_equal(f->ws->calls[W_INSERT], 1);
	assert_int_equal(f->ws->calls[W_PATCH] + f->ws->calls[W_REMOVE], 0);
	assert_string_equal(head_lease_id(f, "emb", &o), a.lease_id);
	assert_int_equal(a.fencing_token, o.generation);
	gcs_object_clear(&o);
	assert_int_equal(gcs_list(&f->ws->base, "emb#", 10, NULL, &pg, &ge),
	    GCS_OK);
	assert_int_equal(pg.n, 0);
	gcs_page_clear(&pg);
	/* Its mode and limit are checked as any lease's. */
	assert_int_equal(group_take(f, "emb", "x", API_MODE_EXCLUSIVE, 3, 30,
	                     &l, &err),
	    API_LOCKED);
	assert_string_equal(err.reason, "limit_mismatch");
	api_lock_clear(&l);
	assert_int_equal(group_take(f, "emb", "x", API_MODE_SHARED, 1, 30, &l,
	                     &err),
	    API_LOCKED);
	assert_string_equal(err.reason, "limit_mismatch");
	api_lock_clear(&l);
	/* It counts: with one more lease, the limit of 2 is reached. */
	clock_ms += 10;
	assert_int_equal(group_take(f, "emb", "b", API_MODE_EXCLUSIVE, 2, 30,
	                     &b, &err),
	    API_OK);
	assert_true(b.fencing_token != a.fencing_token);
	assert_int_equal(group_take(f, "emb", "c", API_MODE_EXCLUSIVE, 2, 30,
	                     &c, &err),
	    API_LOCKED);
	api_lock_clear(&c);
	assert_int_equal(group_take(f, "emb", "w", API_MODE_EXCLUSIVE, 1, 30,
	                     &c, &err),
	    API_LOCKED);
	api_lock_clear(&c);
	assert_int_equal(api_inspect(other, "emb", &l, &err), API_OK);
	j = api_lock_json(&l, false);
	h = json_object_get(j, "holders");
	assert_int_equal(json_array_size(h), 2);
	assert_string_equal(json_string_value(
	                        json_object_get(json_array_get(h, 0), "owner")),
	    "a");
	for (i = 0; i < json_array_size(h); i++)
		assert_null(json_object_get(json_array_get(h, i), "lease_id"));
	json_decref(j);
	api_lock_clear(&l);
	/* Released by an instance that never saw it: one patch. */
	lease_req(&q, &a, "a", 0);
	memset(f->ws->calls, 0, sizeof(f->ws->calls));
	assert_int_equal(api_release(other, &q, &err), API_OK);
	assert_int_equal(f->ws->calls[W_PATCH], 1);
	assert_int_equal(f->ws->calls[W_INSERT] + f->ws->calls[W_REMOVE], 0);
	assert_string_equal(head_lease_id(f, "emb", &o), "");
	gcs_object_clear(&o);
	assert_int_equal(api_release(f->svc, &q, &err), API_LEASE_NOT_FOUND);
	/* The freed slot is an object of its own now. */
	assert_int_equal(group_take(f, "emb", "c", API_MODE_EXCLUSIVE, 2, 30,
	                     &c, &err),
	    API_OK);
	assert_string_equal(head_lease_id(f, "emb", &o), "");
	gcs_object_clear(&o);
	assert_int_equal(api_force_release(f->svc, "emb", "admin", NULL,
	                     a.fencing_token, &err),
	    API_LEASE_LOST);
	api_lock_clear(&a);
	api_lock_clear(&b);
	api_lock_clear(&c);
	api_free(other);
}

/*
 * An exclusive acquire is refused while the head's lease is live, and
 * granted once it expired (on the store's clock, past the margin); its
 * flagged lease keeps nothing of the head's lease, whose refresh then
 * finds no lease.
 */
static void
test_group_head_lease_exclusive(void **state)
{
	fixture *f = *state;
	api_lock a, w, r;
	api_lease_req q;
	api_err err;
	gcs_object o;
	gcs_err ge;

	assert_int_equal(group_take(f, "rd", "a", API_MODE_SHARED, 1, 2, &a,
	                     &err),
	    API_OK);
	assert_int_equal(group_take(f, "rd", "w", API_MODE_EXCLUSIVE, 1, 30, &w,
	                     &err),
	    API_LOCKED);
	api_lock_clear(&w);
	clock_ms += 2500; /* past its ttl, within the margin: still live */
	assert_int_equal(group_take(f, "rd", "w", API_MODE_EXCLUSIVE, 1, 30, &w,
	                     &err),
	    API_LOCKED);
	api_lock_clear(&w);
	clock_ms += 1000;
	assert_int_equal(group_take(f, "rd", "w", API_MODE_EXCLUSIVE, 1, 30, &w,
	                     &err),
	    API_OK);
	assert_true(w.fencing_token > a.fencing_token);
	assert_int_equal(gcs_get(&f->ws->base, "rd", &o, &ge), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(o.metadata, "lease_id")),
	    w.lease_id);
	assert_null(json_object_get(o.metadata, "mode"));
	assert_null(json_object_get(o.metadata, "lg_kind"));
	gcs_object_clear(&o);
	lease_req(&q, &a, "a", 0);
	assert_int_equal(api_refresh(f->svc, &q, &r, &err),
	    API_LEASE_NOT_FOUND);
	api_lock_clear(&r);
	lease_req(&q, &w, "w", 0);
	assert_int_equal(api_release(f->svc, &q, &err), API_OK);
	assert_int_equal(gcs_get(&f->ws->base, "rd", &o, &ge), GCS_NOT_FOUND);
	api_lock_clear(&a);
	api_lock_clear(&w);
}

/* An attempt whose head insert was applied (its answer lost) finds the
 * head carrying its own lease: granted, with no write. */
static void
test_group_head_lease_found(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock a;
	api_err err;
	gcs_object o;
	gcs_err ge;
	json_t *m;

	acq_req(&q, "found", "a", 30);
	q.limit = 2;
	m = json_pack("{s:s,s:s,s:s,s:s,s:s}", "lg_kind", "group", "lease_id",
	    q.lease_id, "owner", "a", "ttl", "30", "limit", "2");
	assert_int_equal(gcs_insert(&f->ws->base, "found", m, &o, &ge), GCS_OK);
	json_decref(m);
	memset(f->ws->calls, 0, sizeof(f->ws->calls));
	assert_int_equal(api_acquire(f->svc, &q, &a, &err), API_OK);
	assert_int_equal(f->ws->calls[W_INSERT] + f->ws->calls[W_PATCH] +
	        f->ws->calls[W_REMOVE],
	    0);
	assert_string_equal(a.lease_id, q.lease_id);
	assert_int_equal(a.fencing_token, o.generation);
	gcs_object_clear(&o);
	api_lock_clear(&a);
}

/*
 * The head's lease ended by a clearing patch whose answer was lost, so
 * that its retry met a 412 (the patch had applied): a release and a
 * force-release both answer that the lease is gone, not a mismatch.  A
 * force-release also removes a head's lease refreshed meanwhile (the
 * token named is the same lease), as it does an exclusive lease.
 */
static void
test_group_head_lease_cleared_twice(void **state)
{
	fixture *f = *state;
	api_lease_req q;
	api_lock a, r;
	api_err err;
	gcs_object o;

	assert_int_equal(group_take(f, "twice", "a", API_MODE_EXCLUSIVE, 2, 30,
	                     &a, &err),
	    API_OK);
	lease_req(&q, &a, "a", 0);
	f->ws->ghost_op = W_PATCH;
	assert_int_equal(api_release(f->svc, &q, &err), API_OK);
	assert_string_equal(head_lease_id(f, "twice", &o), "");
	gcs_object_clear(&o);
	api_lock_clear(&a);

	assert_int_equal(group_take(f, "again", "a", API_MODE_EXCLUSIVE, 2, 30,
	                     &a, &err),
	    API_OK);
	f->ws->ghost_op = W_PATCH;
	assert_int_equal(api_force_release(f->svc, "again", "admin", NULL,
	                     a.fencing_token, &err),
	    API_OK);
	assert_string_equal(head_lease_id(f, "again", &o), "");
	gcs_object_clear(&o);
	/* Gone for good: a second force-release is told so. */
	assert_int_equal(api_force_release(f->svc, "again", "admin", NULL,
	                     a.fencing_token, &err),
	    API_LEASE_LOST);
	assert_string_equal(err.reason, "fencing_token_mismatch");
	api_lock_clear(&a);

	assert_int_equal(group_take(f, "busy", "a", API_MODE_EXCLUSIVE, 2, 30,
	                     &a, &err),
	    API_OK);
	/* Refreshed between the force's look and its patch: the patch
	 * meets a 412 on its first attempt and the force looks again. */
	f->ws->fail_op = W_PATCH;
	f->ws->fail_status = GCS_PRECONDITION;
	assert_int_equal(api_force_release(f->svc, "busy", "admin", NULL,
	                     a.fencing_token, &err),
	    API_OK);
	assert_string_equal(head_lease_id(f, "busy", &o), "");
	gcs_object_clear(&o);
	lease_req(&q, &a, "a", 0);
	assert_int_equal(api_refresh(f->svc, &q, &r, &err),
	    API_LEASE_NOT_FOUND);
	api_lock_clear(&r);
	api_lock_clear(&a);
}

/* Before alice's clearing patch of the lease the head of "sem-taken"
 * carries reaches the store: in round 1 her lease expired meanwhile (the
 * first attempt failed unanswered and unapplied), and dave's exclusive
 * acquire patched the head into his lease over the group. */
static void
dave_takes_head_over(void *ctx)
{
	fixture *f = ctx;
	api_lock d;
	api_err e;

	clock_ms += 32000; /* past alice's 30 s ttl and the margin */
	assert_int_equal(group_take(f, "sem-taken", "dave", API_MODE_EXCLUSIVE,
	                     1, 30, &d, &e),
	    API_OK);
	api_lock_clear(&d);
	f->ws->retried_op = W_PATCH;
}

/* Round 0: alice's clearing patch was applied, its answer lost; dave took
 * the free name at once, while her lease would still have lived. */
static void
dave_takes_freed_head(void *ctx)
{
	fixture *f = ctx;
	api_lock d;
	api_err e;

	assert_int_equal(group_take(f, "sem-freed", "dave", API_MODE_EXCLUSIVE,
	                     1, 30, &d, &e),
	    API_OK);
	api_lock_clear(&d);
}

/*
 * The release of the lease a semaphore's head carries, whose clearing
 * patch met a 412 after a retry, and found an exclusive lease over the
 * group at the head.  When that lease was there while alice's still
 * lived, her patch had cleared hers: released.  When it was taken only
 * past her expiry, it may have taken hers over (its patch removes every
 * key of the head, her lease judged expired), and her first attempt may
 * never have applied: 409 lease_lost, as for an exclusive lease (design
 * 1), not 204.  Dave's lease is untouched either way.
 */
static void
test_group_head_release_after_exclusive_takeover(void **state)
{
	fixture *f = *state;
	api_lease_req q;
	api_lock a, x;
	api_err err;
	int taken;

	for (taken = 0; taken < 2; taken++) {
		const char *name = taken ? "sem-taken" : "sem-freed";

		assert_int_equal(group_take(f, name, "alice",
		                     API_MODE_EXCLUSIVE, 2, 30, &a, &err),
		    API_OK);
		lease_req(&q, &a, "alice", 0);
		if (taken) {
			f->ws->before_op = W_PATCH;
			f->ws->before = dave_takes_head_over;
			f->ws->before_ctx = f;
		} else {
			f->ws->lost_op = W_PATCH;
			f->ws->lost_status = GCS_PRECONDITION;
			f->ws->meanwhile = dave_takes_freed_head;
			f->ws->meanwhile_ctx = f;
		}
		assert_int_equal(api_release(f->svc, &q, &err),
		    taken ? API_LEASE_LOST : API_OK);
		assert_int_equal(api_inspect(f->svc, name, &x, &err), API_OK);
		assert_string_equal(x.owner, "dave");
		api_lock_clear(&x);
		api_lock_clear(&a);
	}
}

/* A keyed re-acquire renews its own live lease (the head's here); one
 * whose renewal lands past the lease's expiry (others may have counted
 * it free) loses it and is granted a new lease instead. */
static void
test_group_keyed_late(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock a, b, c;
	api_err err;
	gcs_object o;

	acq_req(&q, "keyed", "a", 2);
	q.limit = 2;
	snprintf(q.key, sizeof(q.key), "client-key-1");
	assert_int_equal(api_acquire(f->svc, &q, &a, &err), API_OK);
	assert_string_equal(head_lease_id(f, "keyed", &o), a.lease_id);
	gcs_object_clear(&o);
	clock_ms += 1000;
	acq_req(&q, "keyed", "a", 2);
	q.limit = 2;
	snprintf(q.key, sizeof(q.key), "client-key-1");
	assert_int_equal(api_acquire(f->svc, &q, &b, &err), API_OK);
	assert_string_equal(b.lease_id, a.lease_id);
	assert_int_equal(b.fencing_token, a.fencing_token);
	clock_ms += 2500; /* past its ttl, within the margin: found, late */
	acq_req(&q, "keyed", "a", 2);
	q.limit = 2;
	snprintf(q.key, sizeof(q.key), "client-key-1");
	assert_int_equal(api_acquire(f->svc, &q, &c, &err), API_OK);
	assert_string_not_equal(c.lease_id, a.lease_id);
	assert_true(c.fencing_token != a.fencing_token);
	assert_string_equal(head_lease_id(f, "keyed", &o), "");
	gcs_object_clear(&o);
	api_lock_clear(&a);
	api_lock_clear(&b);
	api_lock_clear(&c);
}

/* The shapes of a group lock in JSON: mode, limit (null for shared),
 * holders without lease_ids, the earliest lease on top. */
static void
test_group_json(void **state)
{
	fixture *f = *state;
	api_lock a, b, l;
	api_err err;
	json_t *j;

	assert_int_equal(group_take(f, "g", "first", API_MODE_SHARED, 1, 30, &a,
	                     &err),
	    API_OK);
	clock_ms += 10;
	assert_int_equal(group_take(f, "g", "second", API_MODE_SHARED, 1, 30,
	                     &b, &err),
	    API_OK);
	assert_int_equal(api_inspect(f->svc, "g", &l, &err), API_OK);
	j = api_lock_json(&l, false);
	assert_string_equal(json_string_value(json_object_get(j, "mode")),
	    "shared");
	assert_true(json_is_null(json_object_get(j, "limit")));
	assert_string_equal(json_string_value(json_object_get(j, "owner")),
	    "first");
	assert_int_equal(json_array_size(json_object_get(j, "holders")), 2);
	assert_null(json_object_get(j, "lease_id"));
	json_decref(j);
	api_lock_clear(&l);
	api_lock_clear(&a);
	api_lock_clear(&b);
	/* An exclusive lock: today's fields, plus its one holder. */
	assert_int_equal(group_take(f, "x", "solo", API_MODE_EXCLUSIVE, 1, 30,
	                     &a, &err),
	    API_OK);
	j = api_lock_json(&a, true);
	assert_string_equal(json_string_value(json_object_get(j, "mode")),
	    "exclusive");
	assert_int_equal(json_integer_value(json_object_get(j, "limit")), 1);
	assert_int_equal(json_array_size(json_object_get(j, "holders")), 1);
	json_decref(j);
	api_lock_clear(&a);
}

/* A holder that stops refreshing frees its slot after its TTL, and the
 * grant that takes it removes the dead lease's object. */
static void
test_group_expired_slot_swept(void **state)
{
	fixture *f = *state;
	api_lock a, b, c;
	api_err err;
	gcs_object o;
	gcs_err ge;
	char oname[400];

	assert_int_equal(group_take(f, "s1", "a", API_MODE_EXCLUSIVE, 2, 2, &a,
	                     &err),
	    API_OK);
	assert_int_equal(group_take(f, "s1", "b", API_MODE_EXCLUSIVE, 2, 30, &b,
	                     &err),
	    API_OK);
	assert_int_equal(group_take(f, "s1", "c", API_MODE_EXCLUSIVE, 2, 30, &c,
	                     &err),
	    API_LOCKED);
	api_lock_clear(&c);
	clock_ms += 3500;
	assert_int_equal(group_take(f, "s1", "c", API_MODE_EXCLUSIVE, 2, 30, &c,
	                     &err),
	    API_OK);
	snprintf(oname, sizeof(oname), "s1#%s", a.lease_id);
	assert_int_equal(gcs_get(&f->ws->base, oname, &o, &ge), GCS_NOT_FOUND);
	api_lock_clear(&a);
	api_lock_clear(&b);
	api_lock_clear(&c);
}

/*
 * A semaphore acquire with a client key whose lease insert was applied
 * but answered as failed (its answer lost, every retry failed: 503) left
 * a lease object that no listing ever judged.  The client's retry with
 * the same key (lockctl's) found it by the key and renewed it as a lease
 * granted before: a third holder of a limit of 2.  It is judged now,
 * and ended before a new lease is tried (or the answer is 503).
 */
static void
test_group_keyed_pending_judged(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock a, b, c, l;
	api_err err;

	assert_int_equal(group_take(f, "pend", "a", API_MODE_EXCLUSIVE, 2, 30,
	                     &a, &err),
	    API_OK);
	assert_int_equal(group_take(f, "pend", "b", API_MODE_EXCLUSIVE, 2, 30,
	                     &b, &err),
	    API_OK);
	keyed_req(&q, "pend", "c", 30, "client-key-c");
	q.limit = 2;
	f->ws->lost_op = W_INSERT;
	f->ws->lost_status = GCS_UNAVAILABLE;
	assert_int_equal(api_acquire(f->svc, &q, &c, &err), API_UNAVAILABLE);
	api_lock_clear(&c);
	/* Judged no grant, and its removal fails: 503, not a new lease
	 * beside it (it would hold a slot until its expiry, its key
	 * naming it). */
	keyed_req(&q, "pend", "c", 30, "client-key-c");
	q.limit = 2;
	f->ws->fail_op = W_REMOVE;
	f->ws->fail_status = GCS_UNAVAILABLE;
	f->ws->calls[W_INSERT] = 0;
	assert_int_equal(api_acquire(f->svc, &q, &c, &err), API_UNAVAILABLE);
	assert_int_equal(f->ws->calls[W_INSERT], 0);
	api_lock_clear(&c);
	/* The retry finds it again and ends it. */
	keyed_req(&q, "pend", "c", 30, "client-key-c");
	q.limit = 2;
	assert_int_equal(api_acquire(f->svc, &q, &c, &err), API_LOCKED);
	api_lock_clear(&c);
	assert_int_equal(api_inspect(f->svc, "pend", &l, &err), API_OK);
	assert_int_equal(json_array_size(l.holders), 2);
	api_lock_clear(&l);
	api_lock_clear(&a);
	api_lock_clear(&b);
}

/*
 * A keyed re-acquire of a semaphore lease still held: its renewal patch
 * is applied, its answer lost, and the retry meets 412 (the patch itself
 * moved the metageneration).  The lease is still ours: renewed and
 * answered, beside the other holder.  It went on as a new lease before,
 * the old one left beside it until its expiry, its key still naming it
 * (found by the soak's checker).
 */
static void
test_group_keyed_renew_412(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock z, a, b, l;
	api_err err;

	/* Z's lease on the head, A's an object of its own. */
	assert_int_equal(group_take(f, "rk", "z", API_MODE_EXCLUSIVE, 3, 30, &z,
	                     &err),
	    API_OK);
	keyed_req(&q, "rk", "a", 30, "client-key-a");
	q.limit = 3;
	assert_int_equal(api_acquire(f->svc, &q, &a, &err), API_OK);
	keyed_req(&q, "rk", "a", 30, "client-key-a");
	q.limit = 3;
	f->ws->ghost_op = W_PATCH;
	assert_int_equal(api_acquire(f->svc, &q, &b, &err), API_OK);
	assert_string_equal(b.lease_id, a.lease_id);
	assert_int_equal(b.fencing_token, a.fencing_token);
	assert_int_equal(api_inspect(f->svc, "rk", &l, &err), API_OK);
	assert_int_equal(json_array_size(l.holders), 2);
	api_lock_clear(&l);
	api_lock_clear(&z);
	api_lock_clear(&a);
	api_lock_clear(&b);
}

/*
 * A keyed re-acquire that asks with another mode or limit than its own
 * live lease holds is answered as any acquire of another kind beside a
 * holder: 409 limit_mismatch, the lease untouched.  It renewed that
 * lease before, answering a limit the client had not asked for.
 */
static void
test_group_keyed_other_kind(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock a, b;
	api_err err;

	keyed_req(&q, "kind", "a", 30, "client-key-a");
	q.limit = 3;
	assert_int_equal(api_acquire(f->svc, &q, &a, &err), API_OK);
	keyed_req(&q, "kind", "a", 30, "client-key-a");
	q.limit = 5;
	assert_int_equal(api_acquire(f->svc, &q, &b, &err), API_LOCKED);
	assert_string_equal(err.reason, "limit_mismatch");
	assert_int_equal(b.limit, 3);
	api_lock_clear(&b);
	keyed_req(&q, "kind", "a", 30, "client-key-a");
	q.mode = API_MODE_SHARED;
	assert_int_equal(api_acquire(f->svc, &q, &b, &err), API_LOCKED);
	assert_string_equal(err.reason, "limit_mismatch");
	api_lock_clear(&b);
	/* Asked as it was taken: the same lease, renewed. */
	keyed_req(&q, "kind", "a", 30, "client-key-a");
	q.limit = 3;
	assert_int_equal(api_acquire(f->svc, &q, &b, &err), API_OK);
	assert_int_equal(b.fencing_token, a.fencing_token);
	assert_string_equal(b.lease_id, a.lease_id);
	api_lock_clear(&a);
	api_lock_clear(&b);
}

/*
 * An exclusive acquire over a group head patched the head into its own
 * flagged lease, and a reader granted meanwhile (it listed before that
 * patch) made it back off; but the patch back into a head never happened
 * (the instance died, or the storage failed the listing and the patch).
 * The client's retry with the same key found the flagged lease as its
 * own and renewed it without looking at the group: a writer beside a
 * live reader.  It is judged as a takeover of the flagged lease is.
 */
static void
test_group_keyed_flagged_judged(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock r1, r2, w;
	api_lease_req lq;
	api_err err;
	gcs_object o, p;
	gcs_err ge;
	json_t *m;

	assert_int_equal(group_take(f, "fl", "r1", API_MODE_SHARED, 1, 30, &r1,
	                     &err),
	    API_OK);
	assert_int_equal(group_take(f, "fl", "r2", API_MODE_SHARED, 1, 30, &r2,
	                     &err),
	    API_OK);
	lease_req(&lq, &r1, "r1", 0);
	assert_int_equal(api_release(f->svc, &lq, &err), API_OK);
	/* What the writer's patch left: the plain head as its lease. */
	assert_int_equal(gcs_get(&f->ws->base, "fl", &o, &ge), GCS_OK);
	m = json_pack("{s:n,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "lg_kind",
	    "lease_id", "writerslease0001", "client_key", "client-key-w",
	    "owner", "w", "holder", "h", "ttl", "30", "lg_over_group", "1",
	    "lg_token", "999");
	assert_int_equal(gcs_patch(&f->ws->base, "fl", o.generation,
	                     o.metageneration, m, &p, &ge),
	    GCS_OK);
	json_decref(m);
	gcs_object_clear(&o);
	gcs_object_clear(&p);
	keyed_req(&q, "fl", "w", 30, "client-key-w");
	assert_int_equal(api_acquire(f->svc, &q, &w, &err), API_LOCKED);
	api_lock_clear(&w);
	assert_int_equal(gcs_get(&f->ws->base, "fl", &o, &ge), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(o.metadata, "lg_kind")),
	    "group");
	gcs_object_clear(&o);
	api_lock_clear(&r1);
	api_lock_clear(&r2);
}

/*
 * A request whose first attempt created the head carrying its lease (the
 * answer lost, the attempt failed) and that tries again after that lease
 * expired (a waiter polling out a storage outage): the head's lease was
 * counted free meanwhile, and is not granted as it is.
 */
static void
test_group_head_lease_found_expired(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock a, b, c;
	api_err err;
	gcs_object o;

	acq_req(&q, "late", "a", 2);
	q.limit = 2;
	f->ws->lost_op = W_INSERT;
	f->ws->lost_status = GCS_UNAVAILABLE;
	assert_int_equal(api_acquire(f->svc, &q, &a, &err), API_UNAVAILABLE);
	api_lock_clear(&a);
	assert_string_equal(head_lease_id(f, "late", &o), q.lease_id);
	gcs_object_clear(&o);
	clock_ms += 3500; /* past its ttl and the margin */
	assert_int_equal(group_take(f, "late", "b", API_MODE_EXCLUSIVE, 2, 30,
	                     &b, &err),
	    API_OK);
	assert_int_equal(group_take(f, "late", "c", API_MODE_EXCLUSIVE, 2, 30,
	                     &c, &err),
	    API_OK);
	assert_int_equal(api_acquire(f->svc, &q, &a, &err), API_LOCKED);
	api_lock_clear(&a);
	api_lock_clear(&b);
	api_lock_clear(&c);
}

/*
 * The same with the lease's own object: an attempt whose insert was
 * applied (its answer lost) and whose next attempt finds it after its
 * expiry was granted that expired lease as it was, which the next
 * acquire counted free: three holders of a limit of 2.  It is granted a
 * live lease, which the next acquire counts.
 */
static void
test_group_own_object_found_expired(void **state)
{
	fixture *f = *state;
	api_acquire_req q;
	api_lock a, b, c;
	api_err err;

	assert_int_equal(group_take(f, "late2", "a", API_MODE_EXCLUSIVE, 2, 30,
	                     &a, &err),
	    API_OK);
	acq_req(&q, "late2", "b", 2);
	q.limit = 2;
	f->ws->lost_op = W_INSERT;
	f->ws->lost_status = GCS_UNAVAILABLE;
	assert_int_equal(api_acquire(f->svc, &q, &b, &err), API_UNAVAILABLE);
	api_lock_clear(&b);
	clock_ms += 3500; /* past its ttl and the margin */
	assert_int_equal(api_acquire(f->svc, &q, &b, &err), API_OK);
	assert_false(b.expired);
	assert_int_equal(group_take(f, "late2", "c", API_MODE_EXCLUSIVE, 2, 30,
	                     &c, &err),
	    API_LOCKED);
	api_lock_clear(&b);
	api_lock_clear(&a);
	api_lock_clear(&c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lock_names_valid_or_refused),
		cmocka_unit_test(test_text_clean),
		cmocka_unit_test(test_utf8_scrub),
		cmocka_unit_test(test_copy_utf8_boundary),
		cmocka_unit_test(test_lease_ends_saturated),
		cmocka_unit_test(test_lease_ids_and_labels),
		cmocka_unit_test_setup_teardown(test_one_write_each, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_expiry_and_takeover, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_refresh_expired_not_taken,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_released_then_not_found,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_retried_insert_is_ours,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_retried_delete_is_released,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete_404_not_retried,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_instances_stale_cache,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost_only_when_real, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_list_refused_by_store,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_metadata_shapes,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_owner_and_admin, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_overdue_and_json, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_list_pages_leave_expired_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_hides_names, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_list_hidden_tail, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_group_cut_short_is_full,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_too_sparse, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_store_failures, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_metadata_too_large, setup,
		    teardown),
		cmocka_unit_test(test_metadata_limit_exact),
		cmocka_unit_test_setup_teardown(
		    test_retried_delete_412_is_released, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_retried_delete_after_takeover_is_lost, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_retried_delete_after_group_takeover_is_lost, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_force_retried_delete_412,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_keyed_renew_412,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_attempts_share_lease_id,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_reused_is_a_new_lease,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_is_not_the_lease_id,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_group_key_is_not_the_lease_id, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_key_finds_lease_of_old_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reacquire_renews, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_force_release_expected_token, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prepare_lease_id, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_group_flagged_takeover,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_refresh_after_expiry,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_refusal_retry_after,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_head_lease_counted,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_head_lease_exclusive,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_head_lease_found,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_group_head_lease_cleared_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_group_head_release_after_exclusive_takeover, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_group_keyed_late, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_group_json, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_group_expired_slot_swept,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_keyed_pending_judged,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_keyed_flagged_judged,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_keyed_other_kind,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_group_head_lease_found_expired, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_group_own_object_found_expired, setup, teardown),
		cmocka_unit_test_setup_teardown(test_finds_own, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
