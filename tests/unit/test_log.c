/*
 * test_log.c: the request and event log lines, and the batching an HTTP
 * loop uses: lines are held until the loop flushes (before it waits),
 * come out whole and in order, and a thread that does not batch writes
 * each line at once.
 */
#include <fcntl.h>
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
#include "server/srv.h"

#define OUT_MAX 65536

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

/* What stdout holds so far (static buffer). */
static const char *
written(void)
{
	static char buf[OUT_MAX];
	FILE *f = fopen(capture_path(), "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* Each line of TEXT is a JSON object; returns how many there are. */
static int
count_json_lines(const char *text)
{
	const char *p = text, *nl;
	int n = 0;

	while ((nl = strchr(p, '\n')) != NULL) {
		json_t *j = json_loadb(p, (size_t)(nl - p), 0, NULL);

		assert_non_null(j);
		assert_true(json_is_object(j));
		assert_non_null(json_object_get(j, "severity"));
		assert_non_null(json_object_get(j, "time"));
		json_decref(j);
		n++;
		p = nl + 1;
	}
	assert_int_equal(*p, '\0'); /* no partial line */
	return n;
}

static void
test_unbatched_lines_go_out_at_once(void **state)
{
	(void)state;
	srv_log_request("INFO", "POST", "acquire", 200, 1.5, "a/b", "alice",
	    NULL, NULL, NULL);
	assert_int_equal(count_json_lines(written()), 1);
	assert_non_null(strstr(written(), "\"latency_ms\":1.500"));
}

static void
test_batch_held_then_flushed(void **state)
{
	(void)state;
	srv_log_batch_begin();
	srv_log_event("INFO", "granted", "a/b", "alice", "ci", NULL, NULL, 7);
	srv_log_request("INFO", "POST", "acquire", 200, 0.25, "a/b", "alice",
	    NULL, NULL, NULL);
	/* Held until the loop flushes. */
	assert_string_equal(written(), "");
	srv_log_flush();
	assert_int_equal(count_json_lines(written()), 2);
	/* In order: the event first. */
	assert_true(strstr(written(), "\"event\":\"granted\"") <
	    strstr(written(), "\"message\":\"request\""));
	srv_log_flush(); /* nothing more */
	assert_int_equal(count_json_lines(written()), 2);
	srv_log_batch_end();
}

/* More than a batch holds: written in whole lines, none lost, and the
 * rest by batch_end. */
static void
test_batch_overflow_and_end(void **state)
{
	char holder[200];
	int i;

	(void)state;
	memset(holder, 'h', sizeof(holder) - 1);
	holder[sizeof(holder) - 1] = '\0';
	srv_log_batch_begin();
	for (i = 0; i < 60; i++)
		srv_log_event("INFO", "granted", "a/b", "alice", holder, NULL,
		    NULL, i + 1);
	/* 60 lines of ~300 bytes do not fit in one 4 KiB batch. */
	assert_true(count_json_lines(written()) > 0);
	srv_log_batch_end();
	assert_int_equal(count_json_lines(written()), 60);
}

/* A field too long for a line is dropped, and the line stays JSON. */
static void
test_long_field_cut(void **state)
{
	char *big = malloc(8000);

	(void)state;
	assert_non_null(big);
	memset(big, 'x', 7999);
	big[7999] = '\0';
	srv_log_request("ERROR", "POST", "acquire", 503, 3.0, "a/b", "alice",
	    NULL, big, NULL);
	assert_int_equal(count_json_lines(written()), 1);
	assert_null(strstr(written(), "xxxx")); /* dropped whole */
	assert_non_null(strstr(written(), "\"status\":503"));
	free(big);
}

/*
 * Text that is not UTF-8 (a store's message cut to its buffer inside the
 * "…" that stands for a lease_id) still makes a JSON line, with the rest
 * of its text: before, the request line carried the bytes raw (no JSON
 * parser took it) and a plain line lost its message.
 */
static void
test_text_cut_in_a_character(void **state)
{
	const char *cut = "Cloud Storage patch of a/b#\xe2\x80";
	const char *out;

	(void)state;
	srv_log_request("ERROR", "POST", "acquire", 503, 3.0, "a/b", "alice",
	    NULL, cut, NULL);
	srv_logf("WARNING", "%s", cut);
	srv_log_event("INFO", "granted", "a/b", "alice", "h\xc3\xa9 \xff", NULL,
	    NULL, 7);
	out = written();
	assert_int_equal(count_json_lines(out), 3);
	assert_non_null(strstr(out,
	    "\"error\":\"Cloud Storage patch of "
	    "a/b#\\ufffd\\ufffd\""));
	assert_non_null(strstr(out,
	    "\"message\":\"Cloud Storage patch of "
	    "a/b#??\""));
	/* Whole characters go through as they are. */
	assert_non_null(strstr(out, "\"h\xc3\xa9 \\ufffd\""));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    test_unbatched_lines_go_out_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_held_then_flushed,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_overflow_and_end,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_field_cut, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_text_cut_in_a_character,
		    setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
