/*
 * test_fake_gcs.c: build/tools/fake_gcs behaves the way GCS does for the
 * subset lockgate uses (facts.md §1), checked with raw HTTP requests, so
 * that the client tests against it mean something.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "fake_gcs_proc.h"

#define UPLOAD  "/upload/storage/v1/b/bkt/o?uploadType=multipart"
#define MP_TYPE "Content-Type: multipart/related; boundary=XyZ"
#define HOLD_MS 500 /* a latency fault in the overlap tests */
#define PAR_MAX 4   /* concurrent requests in one test */
#define POLL_MS 10  /* between two looks at the fake's stats */
#define POLL_N  200 /* looks at most (2 s) */

static fake_gcs fake;

static int
group_setup(void **state)
{
	(void)state;
	return fake_gcs_start(&fake, NULL);
}

static int
group_teardown(void **state)
{
	(void)state;
	fake_gcs_stop(&fake);
	return 0;
}

static int
reset(void **state)
{
	(void)state;
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/reset", NULL), 200);
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/config?rate_limit=0&dialect=gcs&date=1",
	                     NULL),
	    200);
	return 0;
}

/* A multipart body creating NAME with metadata {"k": VALUE_JSON}. */
static char *
mp_body(const char *name, const char *value_json)
{
	char *b = NULL;

	assert_true(
	    asprintf(&b,
	        "--XyZ\r\nContent-Type: application/json; "
	        "charset=UTF-8\r\n\r\n{\"name\":\"%s\",\"metadata\":{\"k\":%s}}"
	        "\r\n--XyZ\r\nContent-Type: text/plain\r\n\r\n\r\n--XyZ--\r\n",
	        name, value_json) > 0);
	return b;
}

/* Insert NAME with QUERY added; the status, and the object in *obj. */
static int
insert(const char *name, const char *query, json_t **obj)
{
	char *body = mp_body(name, "\"v\""), *out = NULL, path[256];
	int st;

	snprintf(path, sizeof(path), UPLOAD "%s", query);
	st = fake_gcs_http(&fake, "POST", path, MP_TYPE, body, &out, NULL);
	if (obj != NULL)
		*obj = out ? json_loads(out, 0, NULL) : NULL;
	free(body);
	free(out);
	return st;
}

static long long
gen_of(const json_t *o)
{
	/* GCS sends int64 as JSON strings. */
	const char *s = json_string_value(json_object_get(o, "generation"));

	assert_non_null(s);
	return strtoll(s, NULL, 10);
}

static void
test_generations_unique_increasing(void **state)
{
	json_t *a, *b;
	char path[200];

	(void)state;
	assert_int_equal(insert("x/1", "&ifGenerationMatch=0", &a), 200);
	assert_string_equal(json_string_value(
	                        json_object_get(a, "metageneration")),
	    "1");
	assert_string_equal(json_string_value(
	                        json_object_get(json_object_get(a, "metadata"),
	                            "k")),
	    "v");
	snprintf(path, sizeof(path),
	    "/storage/v1/b/bkt/o/x%%2F1?"
	    "ifGenerationMatch=%lld&ifMetagenerationMatch=1",
	    gen_of(a));
	assert_int_equal(fake_gcs_http(&fake, "DELETE", path, NULL, NULL, NULL,
	                     NULL),
	    204);
	assert_int_equal(insert("x/1", "&ifGenerationMatch=0", &b), 200);
	assert_true(gen_of(b) > gen_of(a));
	json_decref(a);
	json_decref(b);
}

static void
test_preconditions(void **state)
{
	json_t *a, *e;
	char path[256], *out = NULL;
	int date = 0;
	long long g;

	(void)state;
	assert_int_equal(insert("p", "&ifGenerationMatch=0", &a), 200);
	g = gen_of(a);
	json_decref(a);
	/* create-only on a live object: 412 with GCS's error JSON */
	assert_int_equal(insert("p", "&ifGenerationMatch=0", &e), 412);
	assert_int_equal(json_integer_value(
	                     json_object_get(json_object_get(e, "error"),
	                         "code")),
	    412);
	assert_string_equal(
	    json_string_value(json_object_get(
	        json_array_get(json_object_get(json_object_get(e, "error"),
	                           "errors"),
	            0),
	        "reason")),
	    "conditionNotMet");
	json_decref(e);
	/* NotMatch forms answer 304 */
	snprintf(path, sizeof(path),
	    "/storage/v1/b/bkt/o/p?"
	    "ifGenerationNotMatch=%lld",
	    g);
	assert_int_equal(fake_gcs_http(&fake, "GET", path, NULL, NULL, NULL,
	                     NULL),
	    304);
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o/p?"
	                     "ifMetagenerationNotMatch=1",
	                     NULL, NULL, NULL, NULL),
	    304);
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o/p?"
	                     "ifGenerationNotMatch=0",
	                     NULL, NULL, NULL, NULL),
	    200);
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o/p?"
	                     "ifMetagenerationMatch=2",
	                     NULL, NULL, NULL, NULL),
	    412);
	/* patch: both preconditions, merge, null deletes, metageneration+1 */
	snprintf(path, sizeof(path),
	    "/storage/v1/b/bkt/o/p?ifGenerationMatch="
	    "%lld&ifMetagenerationMatch=1",
	    g);
	assert_int_equal(fake_gcs_http(&fake, "PATCH", path,
	                     "Content-Type: application/json",
	                     "{\"metadata\":{\"k\":null,\"z\":\"1\"}}", &out,
	                     &date),
	    200);
	assert_true(date);
	a = json_loads(out, 0, NULL);
	free(out);
	assert_string_equal(json_string_value(
	                        json_object_get(a, "metageneration")),
	    "2");
	assert_null(json_object_get(json_object_get(a, "metadata"), "k"));
	assert_true(json_object_get(a, "updated") != NULL);
	json_decref(a);
	assert_int_equal(fake_gcs_http(&fake, "PATCH", path,
	                     "Content-Type: application/json",
	                     "{\"metadata\":{}}", NULL, NULL),
	    412);
	/* overwrite with ifGenerationMatch=G: new generation, metagen 1 */
	snprintf(path, sizeof(path), "&ifGenerationMatch=%lld", g);
	assert_int_equal(insert("p", path, &a), 200);
	assert_true(gen_of(a) > g);
	assert_string_equal(json_string_value(
	                        json_object_get(a, "metageneration")),
	    "1");
	json_decref(a);
	/* absent objects: 404 on get/patch/delete */
	assert_int_equal(fake_gcs_http(&fake, "DELETE",
	                     "/storage/v1/b/bkt/o/"
	                     "nope?ifGenerationMatch=1",
	                     NULL, NULL, NULL, NULL),
	    404);
}

static void
test_names_and_list(void **state)
{
	char *out = NULL;
	json_t *j;
	int i;
	const char *names[] = { "l/a", "l/b", "l/c" };

	(void)state;
	for (i = 0; i < 3; i++)
		assert_int_equal(insert(names[i], "", NULL), 200);
	/* An unencoded '/' in the object segment is another path. */
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o/l/a",
	                     NULL, NULL, NULL, NULL),
	    404);
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o/"
	                     "l%2Fa",
	                     NULL, NULL, NULL, NULL),
	    200);
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o?"
	                     "prefix=l%2F&maxResults=2",
	                     NULL, NULL, &out, NULL),
	    200);
	j = json_loads(out, 0, NULL);
	free(out);
	assert_int_equal(json_array_size(json_object_get(j, "items")), 2);
	assert_non_null(json_object_get(j, "nextPageToken"));
	json_decref(j);
	/* Empty listing: no "items" key at all, as GCS does. */
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o?"
	                     "prefix=zzz",
	                     NULL, NULL, &out, NULL),
	    200);
	j = json_loads(out, 0, NULL);
	free(out);
	assert_null(json_object_get(j, "items"));
	json_decref(j);
	/* Another bucket is another namespace; missing-* buckets 404. */
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/other/o/"
	                     "l%2Fa",
	                     NULL, NULL, NULL, NULL),
	    404);
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/missing-b/"
	                     "o",
	                     NULL, NULL, NULL, NULL),
	    404);
}

/* The member names of object J, sorted, joined by ','. */
static void
keys_of(const json_t *j, char *out, size_t outsz)
{
	const char *k, *names[32];
	json_t *v;
	size_t n = 0, i, j2, o = 0;

	assert_true(json_is_object(j));
	json_object_foreach((json_t *)j, k, v)
	{
		assert_true(n < 32);
		names[n++] = k;
	}
	for (i = 1; i < n; i++)
		for (j2 = i; j2 > 0 && strcmp(names[j2 - 1], names[j2]) > 0;
		     j2--) {
			k = names[j2];
			names[j2] = names[j2 - 1];
			names[j2 - 1] = k;
		}
	out[0] = '\0';
	for (i = 0; i < n; i++)
		o += (size_t)snprintf(out + o, outsz - o, "%s%s", i ? "," : "",
		    names[i]);
	assert_true(o < outsz);
}

/* GET PATH: 200, the answer parsed. */
static json_t *
get_json(const char *path)
{
	char *out = NULL;
	json_t *j;

	assert_int_equal(fake_gcs_http(&fake, "GET", path, NULL, NULL, &out,
	                     NULL),
	    200);
	j = json_loads(out, 0, NULL);
	free(out);
	assert_non_null(j);
	return j;
}

/* "fields" cuts a 2xx answer down to what it selects, as GCS's partial
 * responses do; a malformed selection is a 400 that applies nothing. */
static void
test_fields(void **state)
{
	char keys[512];
	json_t *a, *j, *it;

	(void)state;
	assert_int_equal(insert("f/a",
	                     "&ifGenerationMatch=0&fields=generation,"
	                     "metageneration,timeCreated,updated",
	                     &a),
	    200);
	keys_of(a, keys, sizeof(keys));
	assert_string_equal(keys,
	    "generation,metageneration,timeCreated,updated");
	json_decref(a);
	assert_int_equal(insert("f/b", "", NULL), 200);

	j = get_json("/storage/v1/b/bkt/o/f%2Fa?fields=name,metadata");
	keys_of(j, keys, sizeof(keys));
	assert_string_equal(keys, "metadata,name");
	assert_string_equal(json_string_value(
	                        json_object_get(json_object_get(j, "metadata"),
	                            "k")),
	    "v");
	json_decref(j);
	/* "a/b" and "a(b)" select within a member; "*" keeps all. */
	j = get_json("/storage/v1/b/bkt/o/f%2Fa?fields=metadata/k");
	keys_of(json_object_get(j, "metadata"), keys, sizeof(keys));
	assert_string_equal(keys, "k");
	json_decref(j);
	j = get_json("/storage/v1/b/bkt/o/f%2Fa?fields=*");
	assert_non_null(json_object_get(j, "etag"));
	assert_non_null(json_object_get(j, "kind"));
	json_decref(j);

	/* Under an array, the selection applies to each element. */
	j = get_json("/storage/v1/b/bkt/o?prefix=f%2F&maxResults=1&fields="
	             "items(name,generation),nextPageToken");
	keys_of(j, keys, sizeof(keys));
	assert_string_equal(keys, "items,nextPageToken");
	assert_int_equal(json_array_size(json_object_get(j, "items")), 1);
	it = json_array_get(json_object_get(j, "items"), 0);
	keys_of(it, keys, sizeof(keys));
	assert_string_equal(keys, "generation,name");
	json_decref(j);
	/* Nothing selected that exists: an empty object. */
	j = get_json("/storage/v1/b/bkt/o?prefix=f%2F&fields=nextPageToken");
	assert_int_equal(json_object_size(j), 0);
	json_decref(j);

	/* Malformed: 400, and an insert is not applied. */
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o/f%2Fa?fields=name,(x", NULL,
	                     NULL, NULL, NULL),
	    400);
	assert_int_equal(insert("f/c", "&fields=name,", NULL), 400);
	assert_int_equal(insert("f/c", "&fields=a(b", NULL), 400);
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o/f%2Fc", NULL, NULL, NULL,
	                     NULL),
	    404);
}

static void
test_bad_uploads(void **state)
{
	char *b = mp_body("n", "7");

	(void)state;
	/* custom metadata values are strings */
	assert_int_equal(fake_gcs_http(&fake, "POST", UPLOAD, MP_TYPE, b, NULL,
	                     NULL),
	    400);
	free(b);
	assert_int_equal(fake_gcs_http(&fake, "POST", UPLOAD, MP_TYPE,
	                     "--XyZ\r\nno end", NULL, NULL),
	    400);
	assert_int_equal(fake_gcs_http(&fake, "POST",
	                     "/upload/storage/v1/b/bkt/o", MP_TYPE, "", NULL,
	                     NULL),
	    400);
}

static void
test_rate_limit(void **state)
{
	json_t *a, *e;
	char path[200];

	(void)state;
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?rate_limit=1",
	                     NULL),
	    200);
	assert_int_equal(insert("hot", "&ifGenerationMatch=0", &a), 200);
	/* A contending create within the second gets 429, not 412. */
	assert_int_equal(insert("hot", "&ifGenerationMatch=0", &e), 429);
	assert_string_equal(
	    json_string_value(json_object_get(
	        json_array_get(json_object_get(json_object_get(e, "error"),
	                           "errors"),
	            0),
	        "reason")),
	    "rateLimitExceeded");
	json_decref(e);
	snprintf(path, sizeof(path),
	    "/storage/v1/b/bkt/o/hot?"
	    "ifGenerationMatch=%lld&ifMetagenerationMatch=1",
	    gen_of(a));
	assert_int_equal(fake_gcs_http(&fake, "DELETE", path, NULL, NULL, NULL,
	                     NULL),
	    429);
	/* Reads are not limited. */
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o/hot",
	                     NULL, NULL, NULL, NULL),
	    200);
	json_decref(a);
}

static void
test_token_endpoints(void **state)
{
	char *out = NULL;
	json_t *j;
	const char *md = "/computeMetadata/v1/instance/service-accounts/"
	                 "default/token";

	(void)state;
	assert_int_equal(fake_gcs_http(&fake, "GET", md, NULL, NULL, NULL,
	                     NULL),
	    403);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?token_expires=1967",
	                     NULL),
	    200);
	assert_int_equal(fake_gcs_http(&fake, "GET", md,
	                     "Metadata-Flavor: Google", NULL, &out, NULL),
	    200);
	j = json_loads(out, 0, NULL);
	free(out);
	assert_int_equal(json_integer_value(json_object_get(j, "expires_in")),
	    1967);
	assert_non_null(json_string_value(json_object_get(j, "access_token")));
	json_decref(j);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 2);
	assert_int_equal(fake_gcs_count(&fake, "tokens_issued"), 1);
	/* The OAuth endpoint wants a jwt-bearer grant. */
	assert_int_equal(fake_gcs_http(&fake, "POST", "/token", NULL,
	                     "grant_type=password", NULL, NULL),
	    400);
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* One request of a batch sent at once, each on its own connection. */
typedef struct par_req {
	const fake_gcs *f;
	const char *pathq;
	int status;
	int started; /* the thread runs and is to be joined */
	int done;    /* atomic: the answer (or the failure) is in */
	pthread_t t;
} par_req;

static void *
par_main(void *arg)
{
	par_req *r = arg;

	r->status =
	    fake_gcs_http(r->f, "GET", r->pathq, NULL, NULL, NULL, NULL);
	__atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Send PATHQ N times at once; par_join must follow, before any assert
 * (each request ends within fake_gcs_http's own timeout). */
static void
par_start(par_req *r, int n, const fake_gcs *f, const char *pathq)
{
	int i;

	for (i = 0; i < n && i < PAR_MAX; i++) {
		r[i].f = f;
		r[i].pathq = pathq;
		r[i].status = 0;
		r[i].done = 0;
		r[i].started =
		    pthread_create(&r[i].t, NULL, par_main, &r[i]) == 0;
	}
}

/* Join the batch; 1 when every request was sent. */
static int
par_join(par_req *r, int n)
{
	int i, all = 1;

	for (i = 0; i < n && i < PAR_MAX; i++) {
		if (r[i].started)
			pthread_join(r[i].t, NULL);
		all = all && r[i].started;
	}
	return all;
}

/* Wait (bounded) until the fake's latency_peak reaches N: 1 when it did. */
static int
peak_reached(const fake_gcs *f, long n)
{
	long peak = -1;
	int i;

	for (i = 0; i < POLL_N; i++) {
		peak = fake_gcs_count(f, "latency_peak");
		if (peak >= n)
			break;
		sleep_ms(POLL_MS);
	}
	return peak == n;
}

/* Requests held by latency on distinct connections are held together,
 * not one after the other (the fake's count of requests held at once),
 * and the fake answers others meanwhile: an unheld request is answered
 * while neither held one has returned.  A hold never ends early. */
static void
test_latency_overlaps(void **state)
{
	par_req r[2];
	char q[128];
	long long t0, took;
	int peak_ok, unheld, held_back;

	(void)state;
	assert_int_equal(insert("slow", "", NULL), 200);
	snprintf(q, sizeof(q), "/_fake/fault?op=get&kind=latency&ms=%d&count=2",
	    HOLD_MS);
	assert_int_equal(fake_gcs_ctl(&fake, q, NULL), 200);
	t0 = now_ms();
	par_start(r, 2, &fake, "/storage/v1/b/bkt/o/slow");
	peak_ok = peak_reached(&fake, 2);
	/* An unheld request is not stuck behind the held ones. */
	unheld = fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o/slow", NULL,
	    NULL, NULL, NULL);
	held_back = !__atomic_load_n(&r[0].done, __ATOMIC_SEQ_CST) &&
	    !__atomic_load_n(&r[1].done, __ATOMIC_SEQ_CST);
	assert_true(par_join(r, 2));
	took = now_ms() - t0;
	assert_true(peak_ok);
	assert_int_equal(unheld, 200);
	assert_true(held_back);
	assert_int_equal(r[0].status, 200);
	assert_int_equal(r[1].status, 200);
	assert_true(took >= HOLD_MS);
	assert_int_equal(fake_gcs_count(&fake, "get"), 3);
}

/* Slow errors (delay) overlap too (held at once), answer the injected
 * status, and are never answered early. */
static void
test_slow_errors_overlap(void **state)
{
	par_req r[2];
	char q[128];
	long long t0, took;

	(void)state;
	snprintf(q, sizeof(q), "/_fake/fault?op=get&kind=503&delay=%d&count=2",
	    HOLD_MS);
	assert_int_equal(fake_gcs_ctl(&fake, q, NULL), 200);
	t0 = now_ms();
	par_start(r, 2, &fake, "/storage/v1/b/bkt/o/none");
	assert_true(par_join(r, 2));
	took = now_ms() - t0;
	assert_int_equal(r[0].status, 503);
	assert_int_equal(r[1].status, 503);
	assert_true(took >= HOLD_MS);
	assert_int_equal(fake_gcs_count(&fake, "latency_peak"), 2);
	/* The faults are used up: the next get is served (404). */
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o/none",
	                     NULL, NULL, NULL, NULL),
	    404);
}

/* reset: no answer, not applied.  drop: applied, no answer, and only
 * that request's answer is dropped (the next one, on the same server
 * thread, is answered), even when the dropped one ended early (401). */
static void
test_reset_and_drop(void **state)
{
	(void)state;
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=insert&kind=reset", NULL),
	    200);
	assert_int_equal(insert("r", "", NULL), -1);
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o/r",
	                     NULL, NULL, NULL, NULL),
	    404);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/fault?op=insert&kind=drop",
	                     NULL),
	    200);
	assert_int_equal(insert("d", "", NULL), -1);
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o/d",
	                     NULL, NULL, NULL, NULL),
	    200);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?require_auth=1",
	                     NULL),
	    200);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/fault?op=get&kind=drop",
	                     NULL),
	    200);
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o/d",
	                     NULL, NULL, NULL, NULL),
	    -1);
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o/d",
	                     NULL, NULL, NULL, NULL),
	    401);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?require_auth=0",
	                     NULL),
	    200);
}

/* SIGTERM while a request is held: the fake resumes it and exits 0
 * within the bounded wait below (2 s), well before the 10 s hold would
 * end, and not by SIGKILL.  Its own fake, stopped by PID before anything
 * is asserted. */
static void
test_stop_while_held(void **state)
{
	fake_gcs g;
	par_req r[1];
	int st = -1, i, held = 0, sent;
	pid_t w = 0;

	(void)state;
	assert_int_equal(fake_gcs_start(&g, NULL), 0);
	if (fake_gcs_ctl(&g, "/_fake/fault?op=get&kind=latency&ms=10000",
	        NULL) == 200) {
		par_start(r, 1, &g, "/storage/v1/b/bkt/o/x");
		held = peak_reached(&g, 1);
	} else {
		r[0].started = 0;
	}
	kill(g.pid, SIGTERM);
	for (i = 0; i < POLL_N && w == 0; i++) {
		w = waitpid(g.pid, &st, WNOHANG);
		if (w == 0)
			sleep_ms(POLL_MS);
	}
	if (w == 0) {
		kill(g.pid, SIGKILL);
		waitpid(g.pid, &st, 0);
	}
	g.pid = -1;
	sent = par_join(r, 1);
	assert_true(sent);
	assert_true(held);
	assert_true(w > 0);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* Its client got the answer (404) or a closed connection. */
	assert_true(r[0].status == 404 || r[0].status == -1);
}

/* The message inside an emulator error OUT: its "message" is JSON text
 * of {"error": {"errors": [{"domain", "message"}]}}, with no reason. */
static void
assert_emulator_error(const char *out, int code, const char *msg)
{
	json_t *j = json_loads(out, 0, NULL), *e, *inner, *first;

	assert_non_null(j);
	e = json_object_get(j, "error");
	assert_int_equal(json_integer_value(json_object_get(e, "code")), code);
	assert_null(json_object_get(e, "errors"));
	inner = json_loads(json_string_value(json_object_get(e, "message")), 0,
	    NULL);
	assert_non_null(inner);
	first = json_array_get(json_object_get(json_object_get(inner, "error"),
	                           "errors"),
	    0);
	assert_null(json_object_get(first, "reason"));
	assert_string_equal(json_string_value(
	                        json_object_get(first, "message")),
	    msg);
	json_decref(inner);
	json_decref(j);
}

/* The emulator dialect answers as Google's emulator does (facts §8). */
static void
test_emulator_dialect(void **state)
{
	const char *names[] = { "e/a", "e/b", "e/c" };
	char path[256], *out = NULL;
	json_t *a, *j, *md;
	int i, date = 0;

	(void)state;
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?dialect=emulator",
	                     NULL),
	    200);
	/* No bucket until it is made; made once. */
	assert_int_equal(insert("e/a", "", NULL), 404);
	assert_int_equal(fake_gcs_http(&fake, "POST", "/storage/v1/b?project=p",
	                     NULL, "{\"name\":\"bkt\"}", NULL, NULL),
	    200);
	assert_int_equal(fake_gcs_http(&fake, "POST", "/storage/v1/b?project=p",
	                     NULL, "{\"name\":\"bkt\"}", NULL, NULL),
	    409);
	for (i = 0; i < 3; i++)
		assert_int_equal(insert(names[i], "&ifGenerationMatch=0",
		                     i == 0 ? &a : NULL),
		    200);
	/* 13-digit generations; keys nobody wrote. */
	assert_true(
	    gen_of(a) >= 1000000000000LL && gen_of(a) <= 9999999999999LL);
	md = json_object_get(a, "metadata");
	assert_string_equal(json_string_value(json_object_get(md, "k")), "v");
	assert_non_null(json_object_get(md, "x_emulator_upload"));
	assert_non_null(json_object_get(md, "x_testbench_upload"));
	assert_null(json_object_get(a, "acl"));
	/* Errors: JSON text in the message. */
	assert_int_equal(insert("e/a", "&ifGenerationMatch=0", NULL), 412);
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o/nope",
	                     NULL, NULL, &out, NULL),
	    404);
	assert_emulator_error(out, 404, "No such object.");
	free(out);
	/* A list: one page whatever maxResults and pageToken say. */
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o?prefix=e%2F&maxResults=1&"
	                     "pageToken=garbage",
	                     NULL, NULL, &out, NULL),
	    200);
	j = json_loads(out, 0, NULL);
	free(out);
	assert_int_equal(json_array_size(json_object_get(j, "items")), 3);
	assert_null(json_object_get(j, "nextPageToken"));
	json_decref(j);
	assert_int_equal(fake_gcs_http(&fake, "GET",
	                     "/storage/v1/b/bkt/o?prefix=none%2F", NULL, NULL,
	                     &out, NULL),
	    200);
	j = json_loads(out, 0, NULL);
	free(out);
	assert_true(json_is_array(json_object_get(j, "items")));
	json_decref(j);
	/* A patch answer: acl and owner, whatever fields selects. */
	snprintf(path, sizeof(path),
	    "/storage/v1/b/bkt/o/e%%2Fa?ifGenerationMatch=%lld&"
	    "fields=generation",
	    gen_of(a));
	assert_int_equal(fake_gcs_http(&fake, "PATCH", path,
	                     "Content-Type: application/json",
	                     "{\"metadata\":{\"k\":\"w\"}}", &out, NULL),
	    200);
	j = json_loads(out, 0, NULL);
	free(out);
	assert_non_null(json_object_get(j, "acl"));
	assert_non_null(json_object_get(j, "owner"));
	assert_null(json_object_get(j, "metadata"));
	json_decref(j);
	/* A delete: 200, empty. */
	snprintf(path, sizeof(path),
	    "/storage/v1/b/bkt/o/e%%2Fa?ifGenerationMatch=%lld", gen_of(a));
	assert_int_equal(fake_gcs_http(&fake, "DELETE", path, NULL, NULL, &out,
	                     &date),
	    200);
	assert_true(out == NULL || out[0] == '\0');
	assert_int_equal(date, 1);
	free(out);
	json_decref(a);
}

/* config?date=0: answers without a Date header. */
static void
test_no_date(void **state)
{
	int date = -1;

	(void)state;
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?date=0", NULL),
	    200);
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o",
	                     NULL, NULL, NULL, &date),
	    200);
	assert_int_equal(date, 0);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?date=1", NULL),
	    200);
	assert_int_equal(fake_gcs_http(&fake, "GET", "/storage/v1/b/bkt/o",
	                     NULL, NULL, NULL, &date),
	    200);
	assert_int_equal(date, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_generations_unique_increasing,
		    reset),
		cmocka_unit_test_setup(test_preconditions, reset),
		cmocka_unit_test_setup(test_names_and_list, reset),
		cmocka_unit_test_setup(test_fields, reset),
		cmocka_unit_test_setup(test_bad_uploads, reset),
		cmocka_unit_test_setup(test_rate_limit, reset),
		cmocka_unit_test_setup(test_token_endpoints, reset),
		cmocka_unit_test_setup(test_latency_overlaps, reset),
		cmocka_unit_test_setup(test_slow_errors_overlap, reset),
		cmocka_unit_test_setup(test_reset_and_drop, reset),
		cmocka_unit_test_setup(test_stop_while_held, reset),
		cmocka_unit_test_setup(test_emulator_dialect, reset),
		cmocka_unit_test_setup(test_no_date, reset),
	};

	return cmocka_run_group_tests_name("fake_gcs", tests, group_setup,
	    group_teardown);
}
