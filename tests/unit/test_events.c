/* test_events.c: the per-instance event ring (server/events.c). */
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

#include "gcs/gcs.h"
#include "server/events.h"

#define T0 1795000000123LL /* 2026-11-18T11:06:40.123Z */

static void
ev(api_event_kind kind, const char *name, const char *owner, const char *holder,
    const char *actor, int64_t token, int64_t at)
{
	api_event e;

	memset(&e, 0, sizeof(e));
	e.kind = kind;
	e.name = name;
	e.owner = owner;
	e.holder = holder;
	e.actor = actor;
	e.fencing_token = token;
	e.at_ms = at;
	srv_events_record(&e);
}

static int
reset(void **state)
{
	(void)state;
	srv_events_reset();
	return 0;
}

static json_t *
events_of(const char *name, size_t max)
{
	json_t *root = srv_events_json(name, max), *arr;

	assert_non_null(root);
	arr = json_object_get(root, "events");
	assert_true(json_is_array(arr));
	json_incref(arr);
	json_decref(root);
	return arr;
}

static const char *
field(json_t *arr, size_t i, const char *key)
{
	json_t *v = json_object_get(json_array_get(arr, i), key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static void
test_unknown_lock_has_no_events(void **state)
{
	json_t *arr;

	(void)state;
	arr = events_of("nothing", 10);
	assert_int_equal(json_array_size(arr), 0);
	json_decref(arr);
}

static void
test_fields_and_kinds(void **state)
{
	static const struct {
		api_event_kind kind;
		const char *str;
	} kinds[] = {
		{ API_EV_GRANTED, "acquired" },
		{ API_EV_TAKEOVER, "takeover" },
		{ API_EV_RELEASED, "released" },
		{ API_EV_FORCED, "force_released" },
		{ API_EV_LOST, "lost" },
		{ API_EV_REFRESHED, "refreshed" },
	};
	size_t i, n = sizeof(kinds) / sizeof(kinds[0]);
	json_t *arr, *o;
	char *dump;

	(void)state;
	for (i = 0; i < n; i++)
		ev(kinds[i].kind, "prod/deploy", "alice", "job-1", "bob",
		    1234567890123456LL, T0 + (int64_t)i);
	arr = events_of("prod/deploy", 0);
	assert_int_equal(json_array_size(arr), n);
	for (i = 0; i < n; i++) /* newest first */
		assert_string_equal(field(arr, i, "kind"),
		    kinds[n - 1 - i].str);
	assert_string_equal(field(arr, n - 1, "at"),
	    "2026-11-18T11:06:40.123Z");
	assert_string_equal(field(arr, 0, "at"), "2026-11-18T11:06:40.128Z");
	assert_string_equal(field(arr, 0, "owner"), "alice");
	assert_string_equal(field(arr, 0, "holder"), "job-1");
	assert_string_equal(field(arr, 0, "actor"), "bob");
	assert_string_equal(field(arr, 0, "fencing_token"), "1234567890123456");
	o = json_array_get(arr, 0);
	assert_int_equal(json_integer_value(json_object_get(o, "count")), 1);
	/* never a lease id, whatever the event carried */
	dump = json_dumps(arr, 0);
	assert_non_null(dump);
	assert_null(strstr(dump, "lease_id"));
	free(dump);
	json_decref(arr);
}

/* A force release's reason, as the admin gave it, is in its entry. */
static void
test_force_reason_kept(void **state)
{
	api_event e;
	json_t *arr;

	(void)state;
	memset(&e, 0, sizeof(e));
	e.kind = API_EV_FORCED;
	e.name = "prod/deploy";
	e.owner = "alice";
	e.actor = "root";
	e.reason = "job 42 hung; INC-7";
	e.fencing_token = 9;
	e.at_ms = T0;
	srv_events_record(&e);
	arr = events_of("prod/deploy", 1);
	assert_int_equal(json_array_size(arr), 1);
	assert_string_equal(field(arr, 0, "kind"), "force_released");
	assert_string_equal(field(arr, 0, "reason"), "job 42 hung; INC-7");
	json_decref(arr);
}

static void
test_absent_strings_are_null(void **state)
{
	json_t *arr, *o;

	(void)state;
	ev(API_EV_GRANTED, "a", "alice", "", NULL, 1, T0);
	arr = events_of("a", 5);
	assert_int_equal(json_array_size(arr), 1);
	o = json_array_get(arr, 0);
	assert_true(json_is_null(json_object_get(o, "holder")));
	assert_true(json_is_null(json_object_get(o, "actor")));
	assert_true(json_is_null(json_object_get(o, "reason")));
	assert_string_equal(field(arr, 0, "owner"), "alice");
	json_decref(arr);
	/* an event without a name is dropped */
	ev(API_EV_GRANTED, NULL, "alice", NULL, NULL, 1, T0);
	ev(API_EV_GRANTED, "", "alice", NULL, NULL, 1, T0);
	arr = events_of("", 5);
	assert_int_equal(json_array_size(arr), 0);
	json_decref(arr);
}

static void
test_strings_are_copied(void **state)
{
	char name[16], holder[64];
	json_t *arr;

	(void)state;
	snprintf(name, sizeof(name), "ci/lock");
	snprintf(holder, sizeof(holder), "https://ci.example/job/1");
	ev(API_EV_GRANTED, name, "o", holder, "o", 7, T0);
	memset(holder, 'X', sizeof(holder) - 1);
	holder[sizeof(holder) - 1] = '\0';
	name[0] = 'Z';
	arr = events_of("ci/lock", 5);
	assert_int_equal(json_array_size(arr), 1);
	assert_string_equal(field(arr, 0, "holder"),
	    "https://ci.example/job/1");
	json_decref(arr);
}

static void
test_names_are_separate(void **state)
{
	json_t *arr;

	(void)state;
	ev(API_EV_GRANTED, "a", "x", NULL, NULL, 1, T0);
	ev(API_EV_GRANTED, "ab", "y", NULL, NULL, 2, T0);
	ev(API_EV_GRANTED, "a/b", "z", NULL, NULL, 3, T0);
	arr = events_of("a", 10);
	assert_int_equal(json_array_size(arr), 1);
	assert_string_equal(field(arr, 0, "owner"), "x");
	json_decref(arr);
	arr = events_of("a/b", 10);
	assert_int_equal(json_array_size(arr), 1);
	assert_string_equal(field(arr, 0, "fencing_token"), "3");
	json_decref(arr);
	arr = events_of(NULL, 10);
	assert_int_equal(json_array_size(arr), 0);
	json_decref(arr);
}

static void
test_refreshes_fold(void **state)
{
	json_t *arr;
	int i;

	(void)state;
	ev(API_EV_GRANTED, "r", "alice", "h", "alice", 10, T0);
	for (i = 1; i <= 50; i++) {
		ev(API_EV_REFRESHED, "r", "alice", "h", "alice", 10, T0 + i);
		/* another lock's refreshes in between do not split them */
		ev(API_EV_REFRESHED, "other", "bob", "h", "bob", 99, T0 + i);
	}
	arr = events_of("r", 10);
	assert_int_equal(json_array_size(arr), 2);
	assert_string_equal(field(arr, 0, "kind"), "refreshed");
	assert_int_equal(json_integer_value(
	                     json_object_get(json_array_get(arr, 0), "count")),
	    50);
	assert_string_equal(field(arr, 0, "at"), "2026-11-18T11:06:40.173Z");
	assert_string_equal(field(arr, 1, "kind"), "acquired");
	json_decref(arr);

	/* a new lease (another fencing token) starts a new entry */
	ev(API_EV_RELEASED, "r", "alice", "h", "alice", 10, T0 + 60);
	ev(API_EV_GRANTED, "r", "carol", "h2", "carol", 11, T0 + 61);
	ev(API_EV_REFRESHED, "r", "carol", "h2", "carol", 11, T0 + 62);
	ev(API_EV_REFRESHED, "r", "carol", "h2", "carol", 11, T0 + 63);
	arr = events_of("r", 10);
	assert_int_equal(json_array_size(arr), 5);
	assert_string_equal(field(arr, 0, "owner"), "carol");
	assert_int_equal(json_integer_value(
	                     json_object_get(json_array_get(arr, 0), "count")),
	    2);
	assert_string_equal(field(arr, 2, "kind"), "released");
	json_decref(arr);
}

static void
test_max_limits_answer(void **state)
{
	json_t *arr;
	int i;

	(void)state;
	for (i = 0; i < 300; i++)
		ev(i % 2 ? API_EV_RELEASED : API_EV_GRANTED, "m", "o", NULL,
		    NULL, i, T0 + i);
	arr = events_of("m", 3);
	assert_int_equal(json_array_size(arr), 3);
	assert_string_equal(field(arr, 0, "fencing_token"), "299");
	assert_string_equal(field(arr, 2, "fencing_token"), "297");
	json_decref(arr);
	arr = events_of("m", 100000);
	assert_int_equal(json_array_size(arr), SRV_EVENTS_ANSWER_MAX);
	json_decref(arr);
}

static void
test_ring_is_bounded(void **state)
{
	char name[32];
	json_t *arr;
	int i, total = SRV_EVENTS_MAX + 100;

	(void)state;
	ev(API_EV_GRANTED, "first", "o", NULL, NULL, 1, T0);
	for (i = 0; i < total; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		ev(API_EV_GRANTED, name, "o", NULL, NULL, i, T0 + i);
	}
	/* the oldest were overwritten (and freed: LSan checks the twin) */
	arr = events_of("first", 10);
	assert_int_equal(json_array_size(arr), 0);
	json_decref(arr);
	arr = events_of("n0", 10);
	assert_int_equal(json_array_size(arr), 0);
	json_decref(arr);
	snprintf(name, sizeof(name), "n%d", total - SRV_EVENTS_MAX);
	arr = events_of(name, 10);
	assert_int_equal(json_array_size(arr), 1);
	json_decref(arr);
	snprintf(name, sizeof(name), "n%d", total - 1);
	arr = events_of(name, 10);
	assert_int_equal(json_array_size(arr), 1);
	json_decref(arr);
}

/* The number of events of lock NAME (up to the answer's maximum). */
static size_t
count_of(const char *name)
{
	json_t *arr = events_of(name, SRV_EVENTS_ANSWER_MAX);
	size_t n = json_array_size(arr);

	json_decref(arr);
	return n;
}

#define QUIET 100 /* locks with one event each before a flood */

static void
quiet_locks(bool one_owner)
{
	char name[32], owner[32];
	int i;

	for (i = 0; i < QUIET; i++) {
		snprintf(name, sizeof(name), "quiet/%d", i);
		snprintf(owner, sizeof(owner), "q%d", i);
		ev(API_EV_GRANTED, name, one_owner ? "ci" : owner, NULL, NULL,
		    i, T0 + i);
	}
}

static void
assert_quiet_kept(void)
{
	char name[32];
	int i;

	for (i = 0; i < QUIET; i++) {
		snprintf(name, sizeof(name), "quiet/%d", i);
		assert_int_equal(count_of(name), 1);
	}
}

/* One lock flooded (by any number of owners) pushes out its own oldest
 * events once it has the most, never the other locks'. */
static void
test_one_lock_cannot_flood(void **state)
{
	char owner[16];
	json_t *arr;
	int i, n = 3 * SRV_EVENTS_MAX;

	(void)state;
	quiet_locks(false);
	for (i = 0; i < n; i++) {
		snprintf(owner, sizeof(owner), "x%d", i % 10);
		ev(i % 2 ? API_EV_RELEASED : API_EV_GRANTED, "noisy", owner,
		    NULL, NULL, i, T0 + i);
	}
	assert_quiet_kept();
	arr = events_of("noisy", 1);
	assert_string_equal(field(arr, 0, "fencing_token"), "12287");
	json_decref(arr);
}

/* One owner flooding many locks pushes out its own oldest events, never
 * another owner's: a lock with ten events of its own stays whole. */
static void
test_one_owner_cannot_flood(void **state)
{
	char name[32];
	int i, n = 3 * SRV_EVENTS_MAX;

	(void)state;
	quiet_locks(false);
	for (i = 0; i < 10; i++)
		ev(i % 2 ? API_EV_RELEASED : API_EV_GRANTED, "busy", "b", NULL,
		    NULL, i, T0 + i);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "flood/%d", i);
		ev(API_EV_GRANTED, name, "x", NULL, NULL, i, T0 + i);
	}
	assert_quiet_kept();
	assert_int_equal(count_of("busy"), 10);
	snprintf(name, sizeof(name), "flood/%d", n - 1);
	assert_int_equal(count_of(name), 1);
	assert_int_equal(count_of("flood/0"), 0);
}

/* Where one owner has every event (one token for all of CI), one lock
 * flooded by it takes at most half the buffer: the newest half of the
 * other locks' events stays. */
static void
test_one_lock_of_one_owner(void **state)
{
	char name[32];
	int i, half = SRV_EVENTS_MAX / 2;

	(void)state;
	for (i = 0; i < SRV_EVENTS_MAX; i++) {
		snprintf(name, sizeof(name), "quiet/%d", i);
		ev(API_EV_GRANTED, name, "ci", NULL, NULL, i, T0 + i);
	}
	for (i = 0; i < 3 * SRV_EVENTS_MAX; i++)
		ev(i % 2 ? API_EV_RELEASED : API_EV_GRANTED, "noisy", "ci",
		    NULL, NULL, i, T0 + i);
	snprintf(name, sizeof(name), "quiet/%d", half - 1);
	assert_int_equal(count_of(name), 0);
	snprintf(name, sizeof(name), "quiet/%d", half);
	assert_int_equal(count_of(name), 1);
	snprintf(name, sizeof(name), "quiet/%d", SRV_EVENTS_MAX - 1);
	assert_int_equal(count_of(name), 1);
	assert_int_equal(count_of("noisy"), SRV_EVENTS_ANSWER_MAX);
}

/* Before a flood fills it, one owner's events on its own fill the
 * buffer: nothing is pushed out early. */
static void
test_single_owner_fills_the_buffer(void **state)
{
	char name[32];
	int i;

	(void)state;
	quiet_locks(true);
	for (i = 0; i < SRV_EVENTS_MAX - QUIET; i++)
		ev(i % 2 ? API_EV_RELEASED : API_EV_GRANTED, "noisy", "ci",
		    NULL, NULL, i, T0 + i);
	assert_quiet_kept();
	/* full now: the next event of the lock with the most goes */
	ev(API_EV_GRANTED, "noisy", "ci", NULL, NULL, 99999, T0);
	assert_quiet_kept();
	snprintf(name, sizeof(name), "noisy");
	assert_int_equal(count_of(name), SRV_EVENTS_ANSWER_MAX);
}

/* An event the store gave no time for (a delete answers without one) is
 * stamped with this machine's clock when recorded, not with 1970.  The
 * bounds are read from that clock (CLOCK_REALTIME): time() may read a
 * coarser one, a tick behind, and failed once at a second's turn. */
static void
test_missing_time_is_now(void **state)
{
	json_t *arr;
	struct tm tm;
	time_t before, after, at;
	int ms;

	(void)state;
	before = (time_t)(gcs_clock_real(NULL) / 1000);
	ev(API_EV_RELEASED, "t", "o", NULL, NULL, 2, 0);
	after = (time_t)(gcs_clock_real(NULL) / 1000);
	ev(API_EV_GRANTED, "t", "o", NULL, NULL, 3, T0);
	arr = events_of("t", 10);
	assert_string_equal(field(arr, 0, "at"), "2026-11-18T11:06:40.123Z");
	memset(&tm, 0, sizeof(tm));
	assert_int_equal(sscanf(field(arr, 1, "at"), "%d-%d-%dT%d:%d:%d.%dZ",
	                     &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
	                     &tm.tm_min, &tm.tm_sec, &ms),
	    7);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	at = timegm(&tm);
	assert_true(at >= before && at <= after);
	json_decref(arr);
}

#define THREADS    4
#define PER_THREAD 1000
_Static_assert(THREADS *PER_THREAD <= SRV_EVENTS_MAX, "all fit in the ring");

static void *
writer(void *arg)
{
	char name[16];
	int i, id = (int)(intptr_t)arg;

	snprintf(name, sizeof(name), "w%d", id);
	for (i = 0; i < PER_THREAD; i++) {
		ev(i % 2 ? API_EV_RELEASED : API_EV_GRANTED, name, "o", "h",
		    NULL, i, T0 + i);
		if (i % 100 == 0)
			json_decref(srv_events_json(name, 5));
	}
	return NULL;
}

static void
test_concurrent_writers_keep_newest(void **state)
{
	pthread_t th[THREADS];
	char name[16];
	json_t *arr;
	size_t total = 0;
	int i;

	(void)state;
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, writer,
		                     (void *)(intptr_t)i),
		    0);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	for (i = 0; i < THREADS; i++) {
		snprintf(name, sizeof(name), "w%d", i);
		arr = events_of(name, SRV_EVENTS_ANSWER_MAX);
		total += json_array_size(arr);
		/* each writer's newest event survived */
		assert_string_equal(field(arr, 0, "fencing_token"), "999");
		json_decref(arr);
	}
	assert_int_equal(total, THREADS * SRV_EVENTS_ANSWER_MAX);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unknown_lock_has_no_events,
		    reset, reset),
		cmocka_unit_test_setup_teardown(test_fields_and_kinds, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_force_reason_kept, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_absent_strings_are_null,
		    reset, reset),
		cmocka_unit_test_setup_teardown(test_strings_are_copied, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_names_are_separate, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_refreshes_fold, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_max_limits_answer, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_ring_is_bounded, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_missing_time_is_now, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_one_lock_cannot_flood,
		    reset, reset),
		cmocka_unit_test_setup_teardown(test_one_owner_cannot_flood,
		    reset, reset),
		cmocka_unit_test_setup_teardown(test_one_lock_of_one_owner,
		    reset, reset),
		cmocka_unit_test_setup_teardown(
		    test_single_owner_fills_the_buffer, reset, reset),
		cmocka_unit_test_setup_teardown(
		    test_concurrent_writers_keep_newest, reset, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
