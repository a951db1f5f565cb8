/*
 * test_referee.c: gcs_referee_check (gcs/referee.c), which asks a store
 * whether it refuses the writes whose preconditions fail, against
 * build/tools/fake_gcs: Cloud Storage and Google's emulator refuse them;
 * the firebase dialect (firebase-tools' emulator) and a noprecond fault
 * on one operation apply them; a store that fails otherwise cannot be
 * judged.  Whatever the verdict, the object it wrote is gone, and it was
 * never one a listing of locks shows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake_gcs_proc.h"
#include "gcs/gcs.h"

#define BUCKET "bkt"
#define PREFIX "locks/"

static fake_gcs fake;

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
	fake_gcs_stop(&fake);
	return 0;
}

static void
ctl(const char *pathq)
{
	assert_int_equal(fake_gcs_ctl(&fake, pathq, NULL), 200);
}

/* A store on the fake in DIALECT, emptied, with a short retry policy. */
static int
setup_dialect(void **state, const char *dialect)
{
	static const gcs_retry_policy p = { 1500, 5, 40, 1000 };
	char q[64];

	snprintf(q, sizeof(q), "/_fake/config?dialect=%s", dialect);
	ctl(q);
	ctl("/_fake/reset");
	if (strcmp(dialect, "emulator") == 0) /* 409 when made already */
		fake_gcs_http(&fake, "POST", "/storage/v1/b?project=test", NULL,
		    "{\"name\":\"" BUCKET "\"}", NULL, NULL);
	*state = fake_gcs_store(&fake, BUCKET, PREFIX, &p);
	assert_non_null(*state);
	return 0;
}

static int
setup_gcs(void **state)
{
	return setup_dialect(state, "gcs");
}

static int
setup_emulator(void **state)
{
	return setup_dialect(state, "emulator");
}

static int
setup_firebase(void **state)
{
	return setup_dialect(state, "firebase");
}

static int
teardown(void **state)
{
	gcs_store_free(*state);
	return 0;
}

/* The fake's count of OP ("insert", ..., "objects"). */
static long
count(const char *op)
{
	long n = fake_gcs_count(&fake, op);

	assert_true(n >= 0);
	return n;
}

/* Every write the check makes, each answered as it must be, and nothing
 * left behind. */
static void
assert_refuses(gcs_store *s)
{
	gcs_err err;

	assert_int_equal(gcs_referee_check(s, &err), GCS_REFEREE_OK);
	assert_string_equal(err.msg, "");
	assert_int_equal(count("insert"), 2);
	assert_int_equal(count("patch"), 1);
	assert_int_equal(count("delete"), 2);
	assert_int_equal(count("objects"), 0);
}

static void
test_cloud_storage_refuses(void **state)
{
	assert_refuses(*state);
}

/* Deletes answered 200, 13-digit generations, errors as JSON text. */
static void
test_google_emulator_refuses(void **state)
{
	assert_refuses(*state);
}

/* Applies everything: the second create is the one that says so. */
static void
test_firebase_applies(void **state)
{
	gcs_err err;

	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_IGNORES);
	assert_non_null(strstr(err.msg,
	    "applied a second insert with ifGenerationMatch=0"));
	assert_non_null(strstr(err.msg, "two callers could hold one lock"));
	assert_int_equal(count("patch"), 0); /* no further question */
	assert_int_equal(count("objects"), 0);
}

/* One operation that applies what it should refuse is enough: N calls of
 * OP with their preconditions unread, and the words the verdict names it
 * by. */
static void
assert_applies_one(gcs_store *s, const char *op, int n, const char *words)
{
	gcs_err err;
	char q[96];

	snprintf(q, sizeof(q), "/_fake/fault?op=%s&kind=noprecond&count=%d", op,
	    n);
	ctl(q);
	assert_int_equal(gcs_referee_check(s, &err), GCS_REFEREE_IGNORES);
	if (strstr(err.msg, words) == NULL)
		fail_msg("%s: verdict '%s'", op, err.msg);
	assert_int_equal(count("objects"), 0);
}

static void
test_each_write_is_asked(void **state)
{
	/* The first create is new either way; the second is the
	 * question. */
	assert_applies_one(*state, "insert", 2, "a second insert");
	ctl("/_fake/reset");
	assert_applies_one(*state, "patch", 1,
	    "a patch with a wrong ifMetagenerationMatch");
	ctl("/_fake/reset");
	/* The first delete is the one with the wrong generation. */
	assert_applies_one(*state, "delete", 1,
	    "a delete with a wrong ifGenerationMatch");
}

/* A store that fails otherwise cannot be judged: the verdict says which
 * call failed and why, and an object written is deleted. */
static void
test_failures_are_unknown(void **state)
{
	gcs_err err;

	ctl("/_fake/fault?op=insert&kind=503&count=-1");
	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_UNKNOWN);
	if (strncmp(err.msg, "the first insert: ", 18) != 0 ||
	    strstr(err.msg, "503") == NULL)
		fail_msg("verdict '%s'", err.msg);
	assert_int_equal(count("objects"), 0);
	ctl("/_fake/reset");
	ctl("/_fake/fault?op=patch&kind=500&count=-1");
	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_UNKNOWN);
	if (strncmp(err.msg,
	        "a patch with a wrong ifMetagenerationMatch: ", 44) != 0)
		fail_msg("verdict '%s'", err.msg);
	assert_int_equal(count("objects"), 0);
}

/* A bucket that is not there: the first insert's 404, not a verdict on
 * preconditions. */
static void
test_missing_bucket_is_unknown(void **state)
{
	static const gcs_retry_policy p = { 1500, 5, 40, 1000 };
	gcs_store *s = fake_gcs_store(&fake, "missing-bkt", PREFIX, &p);
	gcs_err err;

	(void)state;
	assert_non_null(s);
	assert_int_equal(gcs_referee_check(s, &err), GCS_REFEREE_UNKNOWN);
	assert_non_null(strstr(err.msg, "the first insert: "));
	gcs_store_free(s);
}

/* The object is one no lock can be: under the prefix, named with a '.'
 * first and a '#' (a group's lease, left out of every listing). */
static void
test_object_name(void **state)
{
	json_t *reqs, *e;
	const char *uri;
	gcs_err err;
	size_t i;
	int seen = 0;

	assert_int_equal(gcs_referee_check(*state, &err), GCS_REFEREE_OK);
	reqs = fake_gcs_json(&fake, "/_fake/requests");
	assert_non_null(reqs);
	json_array_foreach(reqs, i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "op")),
		        "delete") != 0)
			continue;
		uri = json_string_value(json_object_get(e, "uri"));
		assert_non_null(strstr(uri, "/o/locks%2F.lockgate-referee%23"));
		seen++;
	}
	assert_int_equal(seen, 2);
	json_decref(reqs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cloud_storage_refuses,
		    setup_gcs, teardown),
		cmocka_unit_test_setup_teardown(test_google_emulator_refuses,
		    setup_emulator, teardown),
		cmocka_unit_test_setup_teardown(test_firebase_applies,
		    setup_firebase, teardown),
		cmocka_unit_test_setup_teardown(test_each_write_is_asked,
		    setup_gcs, teardown),
		cmocka_unit_test_setup_teardown(test_failures_are_unknown,
		    setup_gcs, teardown),
		cmocka_unit_test_setup_teardown(test_missing_bucket_is_unknown,
		    setup_gcs, teardown),
		cmocka_unit_test_setup_teardown(test_object_name, setup_gcs,
		    teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
