/*
 * test_drops.c: clients that went away (server/drops.c) are counted in
 * /metrics at once and logged in aggregate: a burst of thousands makes a
 * line or two, whose numbers add up to the burst.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "capture.h"
#include "server/metrics.h"
#include "server/srv.h"
#include "util/clock.h"

#define BURST 4100

/* stdout into a fresh temporary file. */
static int
setup(void **state)
{
	(void)state;
	return capture_start();
}

static int
teardown(void **state)
{
	(void)state;
	capture_end();
	return 0;
}

/* The lines written so far, each a JSON object: how many, and the sum of
 * their field KEY. */
static int
lines(const char *key, long *sum)
{
	char buf[4096];
	FILE *f;
	json_t *j;
	int n = 0;

	fflush(stdout);
	assert_non_null(f = fopen(capture_path(), "r"));
	*sum = 0;
	while (fgets(buf, sizeof(buf), f) != NULL) {
		assert_non_null(j = json_loads(buf, 0, NULL));
		*sum += (long)json_integer_value(json_object_get(j, key));
		json_decref(j);
		n++;
	}
	fclose(f);
	return n;
}

/* The value of a counter in the /metrics text. */
static long
counter(const char *name)
{
	size_t len;
	char *text = metrics_render(&len), *p;
	char want[128];
	long v = -1;

	assert_non_null(text);
	snprintf(want, sizeof(want), "\n%s ", name);
	if ((p = strstr(text, want)) != NULL)
		v = strtol(p + strlen(want), NULL, 10);
	free(text);
	return v;
}

/* A burst, reported on as the HTTP loops do after each event: one line a
 * second at most, and the last at stop; the numbers add up. */
static void
test_burst_is_a_few_lines(void **state)
{
	int64_t start = util_mono_ms();
	long sum, heads;
	int i, n, most;

	(void)state;
	for (i = 0; i < BURST; i++) {
		srv_drop(SRV_DROP_WAITER, 1);
		srv_drop(SRV_DROP_HEAD, 1);
		srv_drops_report(false);
	}
	/* One line a second at most: a count bound by the time it took. */
	most = 1 + (int)((util_mono_ms() - start) / SRV_LOG_INTERVAL_MS);
	n = lines("waiters_abandoned", &sum);
	assert_true(n >= 1 && n <= most);
	srv_drops_report(true); /* at stop: what is left */
	assert_int_equal(lines("waiters_abandoned", &sum), n + 1);
	assert_int_equal(sum, BURST);
	lines("heads_dropped", &heads);
	assert_int_equal(heads, BURST);
	assert_int_equal(counter("lockgate_waiters_abandoned_total"), BURST);
	assert_int_equal(counter("lockgate_heads_dropped_total"), BURST);
	/* Nothing left: nothing more is written. */
	srv_drops_report(true);
	assert_int_equal(lines("waiters_abandoned", &sum), n + 1);
}

/* Slow heads are counted in their own counter and in the same line. */
static void
test_slow_heads(void **state)
{
	long sum, before = counter("lockgate_slow_heads_closed_total");

	(void)state;
	srv_drop(SRV_DROP_SLOW_HEAD, 40);
	srv_drop(SRV_DROP_SLOW_HEAD, 0); /* nothing */
	srv_drops_report(true);
	assert_int_equal(lines("slow_heads_closed", &sum), 1);
	assert_int_equal(sum, 40);
	assert_int_equal(counter("lockgate_slow_heads_closed_total"),
	    before + 40);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_burst_is_a_few_lines,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_heads, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
