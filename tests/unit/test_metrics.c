/*
 * test_metrics.c: the Prometheus registry (server/metrics.c) and the
 * instrumenting store (server/store_metrics.c).
 *
 * The registry is process-wide, so every test measures deltas between two
 * scrapes instead of absolute values.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gcs/gcs.h"
#include "server/metrics.h"

#define THREADS    4
#define PER_THREAD 20000

static char *
scrape(void)
{
	size_t len = 12345;
	char *s = metrics_render(&len);

	assert_non_null(s);
	assert_int_equal(len, strlen(s));
	assert_true(len > 0 && s[len - 1] == '\n');
	return s;
}

/* The value of the sample named exactly SERIES (name plus labels), or
 * -1 when the text has no such line. */
static double
sample(const char *text, const char *series)
{
	size_t n = strlen(series);
	const char *p = text;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return -1;
}

/* Like sample(), but an absent series of a counter is 0. */
static double
counter(const char *text, const char *series)
{
	double v = sample(text, series);

	return v < 0 ? 0 : v;
}

static double
delta(const char *before, const char *after, const char *series)
{
	return counter(after, series) - counter(before, series);
}

static int
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, line, n) == 0 && p[n] == '\n')
			return 1;
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return 0;
}

/*
 * Check every histogram series in TEXT: buckets in increasing le order,
 * cumulative counts that never decrease, a +Inf bucket equal to _count,
 * and a _sum present.  Returns how many series were checked.
 */
static int
check_histograms(const char *text)
{
	char key[512] = "", line[512], name[256], labels[256];
	double prev_le = -INFINITY, prev_v = 0, inf_v = -1, v;
	const char *p = text, *nl, *le;
	int checked = 0, inf_seen = 0;
	size_t n;

	for (; *p != '\0'; p = nl + 1) {
		nl = strchr(p, '\n');
		assert_non_null(nl);
		n = (size_t)(nl - p);
		assert_true(n < sizeof(line));
		memcpy(line, p, n);
		line[n] = '\0';
		if (line[0] == '#')
			continue;
		le = strstr(line, "_bucket{");
		if (le != NULL) {
			char *lep = strstr(line, "le=\"");
			char *close = strchr(line, '}');
			size_t nn = (size_t)(le - line), ln;

			assert_non_null(lep);
			assert_non_null(close);
			/* key = name + labels other than le */
			memcpy(name, line, nn);
			name[nn] = '\0';
			ln = (size_t)(lep - (le + 8));
			memcpy(labels, le + 8, ln);
			labels[ln] = '\0';
			snprintf(line, sizeof(line), "%s|%s", name, labels);
			if (strcmp(line, key) != 0) {
				/* a new series starts; the old one ended */
				assert_false(key[0] != '\0' && !inf_seen);
				snprintf(key, sizeof(key), "%s", line);
				prev_le = -INFINITY;
				prev_v = 0;
				inf_seen = 0;
			}
			v = strtod(close + 2, NULL);
			assert_true(v >= prev_v);
			if (strncmp(lep + 4, "+Inf\"", 5) == 0) {
				inf_seen = 1;
				inf_v = v;
			} else {
				double lev = strtod(lep + 4, NULL);

				assert_false(inf_seen);
				assert_true(lev > prev_le);
				prev_le = lev;
			}
			prev_v = v;
			continue;
		}
		if (strstr(line, "_count") != NULL && key[0] != '\0' &&
		    strncmp(line, key, strcspn(key, "|")) == 0 &&
		    strncmp(line + strcspn(key, "|"), "_count", 6) == 0) {
			assert_true(inf_seen);
			v = strtod(strrchr(line, ' ') + 1, NULL);
			assert_true(v == inf_v);
			checked++;
			key[0] = '\0';
		}
	}
	return checked;
}

static void
test_families_and_format(void **state)
{
	static const char *const types[] = {
		"# TYPE lockgate_build_info gauge",
		"# TYPE lockgate_process_start_time_seconds gauge",
		"# TYPE lockgate_http_requests_total counter",
		"# TYPE lockgate_http_request_duration_seconds histogram",
		"# TYPE lockgate_lock_outcomes_total counter",
		"# TYPE lockgate_wait_duration_seconds histogram",
		"# TYPE lockgate_waiters gauge",
		"# TYPE lockgate_storage_requests_total counter",
		"# TYPE lockgate_storage_request_duration_seconds histogram",
		"# TYPE lockgate_storage_retries_total counter",
		"# TYPE lockgate_storage_token_fetches_total counter",
	};
	char *s = scrape();
	const char *p, *nl;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		assert_true(has_line(s, types[i]));
	{
		const char *bi = strstr(s, "\nlockgate_build_info{version=\"");
		const char *eol = bi ? strchr(bi + 1, '\n') : NULL;

		assert_non_null(eol);
		/* a non-empty version, value 1 */
		assert_true(bi[30] != '"');
		assert_memory_equal(eol - 4, "\"} 1", 4);
	}
	assert_true(sample(s, "lockgate_process_start_time_seconds") > 1e9);
	/* Every sample line: lockgate_ name, optional labels, one number. */
	for (p = s; *p != '\0'; p = nl + 1) {
		nl = strchr(p, '\n');
		assert_non_null(nl);
		if (*p == '#') {
			assert_true(strncmp(p, "# HELP lockgate_", 16) == 0 ||
			    strncmp(p, "# TYPE lockgate_", 16) == 0);
			continue;
		}
		assert_true(strncmp(p, "lockgate_", 9) == 0);
		{
			const char *sp = memrchr(p, ' ', (size_t)(nl - p));
			char *end;

			assert_non_null(sp);
			strtod(sp + 1, &end);
			assert_ptr_equal(end, nl);
		}
	}
	free(s);
}

static void
test_http_counts_and_other(void **state)
{
	char *a, *b;

	(void)state;
	a = scrape();
	metrics_http("acquire", 200, 0.002);
	metrics_http("acquire", 200, 0.004);
	metrics_http("acquire", 409, 0.001);
	metrics_http("forceRelease", 204, 0.001);
	metrics_http("v1/locks/secret-project/deploy", 404, 0.001);
	metrics_http(NULL, 200, 0.001);
	metrics_http("list", 42, 0.001);
	metrics_http("list", 600, 0.001);
	b = scrape();
	assert_true(delta(a, b,
	                "lockgate_http_requests_total"
	                "{route=\"acquire\",status=\"200\"}") == 2);
	assert_true(delta(a, b,
	                "lockgate_http_requests_total"
	                "{route=\"acquire\",status=\"409\"}") == 1);
	assert_true(delta(a, b,
	                "lockgate_http_requests_total"
	                "{route=\"force_release\",status=\"204\"}") == 1);
	assert_true(delta(a, b,
	                "lockgate_http_requests_total"
	                "{route=\"other\",status=\"404\"}") == 1);
	assert_true(delta(a, b,
	                "lockgate_http_requests_total"
	                "{route=\"other\",status=\"200\"}") == 1);
	assert_true(delta(a, b,
	                "lockgate_http_requests_total"
	                "{route=\"list\",status=\"other\"}") == 2);
	/* A name that is not a known route never becomes a label. */
	assert_null(strstr(b, "secret-project"));
	assert_true(delta(a, b,
	                "lockgate_http_request_duration_seconds_count"
	                "{route=\"acquire\"}") == 3);
	/* 0.002 and 0.001 are <= 0.0025; 0.004 is not. */
	assert_true(delta(a, b,
	                "lockgate_http_request_duration_seconds_bucket"
	                "{route=\"acquire\",le=\"0.0025\"}") == 2);
	assert_true(delta(a, b,
	                "lockgate_http_request_duration_seconds_bucket"
	                "{route=\"acquire\",le=\"0.005\"}") == 3);
	assert_true(fabs(delta(a, b,
	                     "lockgate_http_request_duration_seconds_sum"
	                     "{route=\"acquire\"}") -
	                0.007) < 1e-9);
	free(a);
	free(b);
}

static void
test_histogram_edges(void **state)
{
	char *a, *b;

	(void)state;
	a = scrape();
	metrics_wait_observe(0.01); /* exactly on a bound: le is inclusive */
	metrics_wait_observe(0.011);
	metrics_wait_observe(1000); /* above every finite bound */
	metrics_wait_observe(NAN);  /* counted as 0 */
	metrics_wait_observe(-3);   /* counted as 0 */
	b = scrape();
	assert_true(
	    delta(a, b, "lockgate_wait_duration_seconds_bucket{le=\"0.01\"}") ==
	    3);
	assert_true(
	    delta(a, b, "lockgate_wait_duration_seconds_bucket{le=\"0.05\"}") ==
	    4);
	assert_true(
	    delta(a, b, "lockgate_wait_duration_seconds_bucket{le=\"300\"}") ==
	    4);
	assert_true(
	    delta(a, b, "lockgate_wait_duration_seconds_bucket{le=\"+Inf\"}") ==
	    5);
	assert_true(delta(a, b, "lockgate_wait_duration_seconds_count") == 5);
	assert_true(fabs(delta(a, b, "lockgate_wait_duration_seconds_sum") -
	                1000.021) < 1e-6);
	assert_true(check_histograms(b) >= 2);
	free(a);
	free(b);
}

static void
test_lock_outcomes(void **state)
{
	static const char *const names[] = {
		"granted",
		"conflict",
		"lost",
		"expired_takeover",
		"forced",
		"released",
		"refreshed",
	};
	char series[128], *a, *b;
	size_t i;

	(void)state;
	a = scrape();
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		/* series i moves by i + 1, so a mix-up of two shows */
		size_t k;

		for (k = 0; k <= i; k++)
			metrics_lock_outcome(names[i]);
	}
	metrics_lock_outcome("stolen");
	metrics_lock_outcome(NULL);
	b = scrape();
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(series, sizeof(series),
		    "lockgate_lock_outcomes_total{outcome=\"%s\"}", names[i]);
		assert_true(
		    sample(a, series) >= 0); /* present from the start */
		assert_true(delta(a, b, series) == (double)(i + 1));
	}
	assert_true(
	    delta(a, b, "lockgate_lock_outcomes_total{outcome=\"other\"}") ==
	    2);
	assert_null(strstr(b, "stolen"));
	free(a);
	free(b);
}

static void
test_waiters_gauge(void **state)
{
	char *s;

	(void)state;
	metrics_waiters_add(3);
	metrics_waiters_add(-1);
	s = scrape();
	assert_true(sample(s, "lockgate_waiters") == 2);
	free(s);
	metrics_waiters_add(-7); /* a double decrement must not show < 0 */
	s = scrape();
	assert_true(sample(s, "lockgate_waiters") == 0);
	free(s);
	metrics_waiters_add(5);
	metrics_waiters_add(1);
	s = scrape();
	assert_true(sample(s, "lockgate_waiters") == 1);
	free(s);
	metrics_waiters_add(-1);
}

static void
test_store_calls_counted(void **state)
{
	char *a, *b;

	(void)state;
	a = scrape();
	gcs_stat_retry();
	gcs_stat_retry();
	gcs_stat_token_fetch(1);
	gcs_stat_token_fetch(0);
	gcs_stat_token_fetch(0);
	b = scrape();
	assert_true(delta(a, b, "lockgate_storage_retries_total") == 2);
	assert_true(
	    delta(a, b,
	        "lockgate_storage_token_fetches_total{result=\"ok\"}") == 1);
	assert_true(
	    delta(a, b,
	        "lockgate_storage_token_fetches_total{result=\"error\"}") == 2);
	free(a);
	free(b);
}

#define STORE_SERIES(op, st) \
	"lockgate_storage_requests_total{op=\"" op "\",status=\"" st "\"}"

static void
test_store_wrapper(void **state)
{
	gcs_store *s;
	gcs_object o = { 0 }, o2 = { 0 };
	gcs_page pg = { 0 };
	gcs_err err;
	json_t *meta = json_pack("{s:s}", "owner", "alice");
	char *a, *b;

	(void)state;
	assert_non_null(meta);
	s = srv_store_instrument(gcs_mem_new(NULL, NULL));
	assert_non_null(s);
	assert_string_equal(s->ops->scheme, "mem");
	a = scrape();
	assert_int_equal(gcs_insert(s, "a/b", meta, &o, &err), GCS_OK);
	assert_int_equal(gcs_insert(s, "a/b", meta, &o2, &err),
	    GCS_PRECONDITION);
	gcs_object_clear(&o);
	assert_int_equal(gcs_get(s, "a/b", &o, &err), GCS_OK);
	assert_string_equal(json_string_value(
	                        json_object_get(o.metadata, "owner")),
	    "alice");
	assert_int_equal(gcs_get(s, "nope", &o2, &err), GCS_NOT_FOUND);
	assert_int_equal(gcs_patch(s, "a/b", o.generation, o.metageneration,
	                     meta, &o2, &err),
	    GCS_OK);
	gcs_object_clear(&o2);
	assert_int_equal(gcs_remove(s, "a/b", o.generation, o.metageneration,
	                     &err),
	    GCS_PRECONDITION); /* stale metageneration */
	assert_int_equal(gcs_remove(s, "a/b", o.generation,
	                     o.metageneration + 1, &err),
	    GCS_OK);
	assert_int_equal(gcs_list(s, "a/", 10, NULL, &pg, &err), GCS_OK);
	assert_int_equal(pg.n, 0);
	gcs_page_clear(&pg);
	assert_int_equal(gcs_check(s, &err), GCS_OK);
	/* A call the dispatcher refuses never reaches the store. */
	assert_int_equal(gcs_get(s, "", &o2, &err), GCS_INVALID);
	b = scrape();
	assert_true(delta(a, b, STORE_SERIES("insert", "ok")) == 1);
	assert_true(
	    delta(a, b, STORE_SERIES("insert", "precondition_failed")) == 1);
	assert_true(delta(a, b, STORE_SERIES("get", "ok")) == 1);
	assert_true(delta(a, b, STORE_SERIES("get", "not_found")) == 1);
	assert_true(delta(a, b, STORE_SERIES("get", "invalid")) == 0);
	assert_true(delta(a, b, STORE_SERIES("patch", "ok")) == 1);
	assert_true(
	    delta(a, b, STORE_SERIES("delete", "precondition_failed")) == 1);
	assert_true(delta(a, b, STORE_SERIES("delete", "ok")) == 1);
	assert_true(delta(a, b, STORE_SERIES("list", "ok")) == 1);
	assert_true(delta(a, b, STORE_SERIES("check", "ok")) == 1);
	assert_true(delta(a, b,
	                "lockgate_storage_request_duration_seconds_count"
	                "{op=\"insert\"}") == 2);
	assert_true(delta(a, b,
	                "lockgate_storage_request_duration_seconds_count"
	                "{op=\"get\"}") == 2);
	assert_true(check_histograms(b) >= 3);
	gcs_object_clear(&o);
	json_decref(meta);
	gcs_store_free(s); /* frees the mem store too (ASan checks) */
	free(a);
	free(b);
}

static void
test_store_wrapper_null(void **state)
{
	(void)state;
	assert_null(srv_store_instrument(NULL));
}

static void
test_unknown_store_labels(void **state)
{
	char *a, *b;

	(void)state;
	a = scrape();
	metrics_store_call("rewrite", "ok", 0.01);
	metrics_store_call("get", "teapot", 0.01);
	b = scrape();
	assert_true(delta(a, b, STORE_SERIES("other", "ok")) == 1);
	assert_true(delta(a, b, STORE_SERIES("get", "other")) == 1);
	free(a);
	free(b);
}

static void *
hammer(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < PER_THREAD; i++) {
		metrics_http("inspect", 200, 0.0001 * (i % 50));
		metrics_store_call("list", "ok", 0.0001 * (i % 50));
		metrics_waiters_add(1);
		metrics_waiters_add(-1);
	}
	return NULL;
}

static void
test_threads_lose_nothing(void **state)
{
	pthread_t t[THREADS];
	char *a, *b;
	int i;

	(void)state;
	a = scrape();
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer, NULL), 0);
	/* Scrapes during the writes must stay self-consistent. */
	for (i = 0; i < 20; i++) {
		char *mid = scrape();

		assert_true(check_histograms(mid) >= 1);
		free(mid);
	}
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	b = scrape();
	assert_true(
	    delta(a, b,
	        "lockgate_http_requests_total"
	        "{route=\"inspect\",status=\"200\"}") == THREADS * PER_THREAD);
	assert_true(delta(a, b,
	                "lockgate_http_request_duration_seconds_count"
	                "{route=\"inspect\"}") == THREADS * PER_THREAD);
	assert_true(
	    delta(a, b, STORE_SERIES("list", "ok")) == THREADS * PER_THREAD);
	assert_true(sample(b, "lockgate_waiters") == 0);
	free(a);
	free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_families_and_format),
		cmocka_unit_test(test_http_counts_and_other),
		cmocka_unit_test(test_histogram_edges),
		cmocka_unit_test(test_lock_outcomes),
		cmocka_unit_test(test_waiters_gauge),
		cmocka_unit_test(test_store_calls_counted),
		cmocka_unit_test(test_store_wrapper),
		cmocka_unit_test(test_store_wrapper_null),
		cmocka_unit_test(test_unknown_store_labels),
		cmocka_unit_test(test_threads_lose_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
