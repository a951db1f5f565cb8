/*
 * test_jsonw.c: the log lines' JSON text writer (api/jsonw.c) and the
 * string helpers that replaced snprintf there.  Every string the writer
 * emits must read back, through jansson, as exactly the bytes it was
 * given; a buffer that runs out is reported full and never overrun.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

#include "api/api.h"
#include "api/jsonw.h"

static char big_buf[65536]; /* every test's writer but the one that fills */

/* S written as a JSON string reads back as S. */
static void
assert_round_trip(const char *s)
{
	api_jw jw;
	json_t *v;
	json_error_t e;

	api_jw_init(&jw, big_buf, sizeof(big_buf), 0);
	api_jw_str(&jw, s);
	assert_false(jw.full);
	assert_int_equal(strlen(jw.buf), jw.len);
	v = json_loads(jw.buf, JSON_DECODE_ANY, &e);
	assert_non_null(v);
	assert_true(json_is_string(v));
	assert_string_equal(json_string_value(v), s);
	json_decref(v);
}

static void
test_plain_strings(void **state)
{
	api_jw jw;

	(void)state;
	api_jw_init(&jw, big_buf, sizeof(big_buf), 0);
	api_jw_str(&jw, "deploy/prod");
	assert_string_equal(jw.buf, "\"deploy/prod\"");
	assert_round_trip("");
	assert_round_trip("a");
	assert_round_trip("caf\xc3\xa9 \xe2\x9c\x93"); /* UTF-8 as it is */
}

static void
test_every_byte_escaped_or_kept(void **state)
{
	char s[2];
	int c;
	api_jw jw;

	(void)state;
	s[1] = '\0';
	for (c = 1; c < 0x80; c++) {
		s[0] = (char)c;
		assert_round_trip(s);
		api_jw_init(&jw, big_buf, sizeof(big_buf), 0);
		api_jw_str(&jw, s);
		if (c < 0x20 || c == 0x7f)
			assert_int_equal(jw.len, 8); /* "\u00XX" */
		else if (c == '"' || c == '\\')
			assert_int_equal(jw.len, 4); /* "\X" */
		else
			assert_int_equal(jw.len, 3);
	}
	assert_round_trip("a\"b\\c\nd\x01\x7f"
	                  "e");
	assert_round_trip("\"");
	assert_round_trip("tail\\");
}

/* Members as log.c writes them: raw text, strings and numbers. */
static void
test_members_in_a_line(void **state)
{
	api_jw jw;

	(void)state;
	api_jw_init(&jw, big_buf, sizeof(big_buf), 0);
	api_jw_lit(&jw, "{\"name\":");
	api_jw_str(&jw, "x");
	api_jw_lit(&jw, ",\"n\":");
	api_jw_int(&jw, -42);
	api_jw_lit(&jw, ",\"we\\\"ird\":");
	api_jw_str(&jw, "v\n");
	api_jw_raw(&jw, "}", 1);
	assert_string_equal(jw.buf,
	    "{\"name\":\"x\",\"n\":-42,\"we\\\"ird\":\"v\\u000a\"}");
}

/* A long string with one byte to escape in its middle, whole. */
static void
test_long_string(void **state)
{
	api_jw jw;
	char *big = malloc(10000);
	json_t *v;
	int i;

	(void)state;
	assert_non_null(big);
	for (i = 0; i < 9999; i++)
		big[i] = (char)('a' + i % 26);
	big[9999] = '\0';
	big[5000] = '\t';
	api_jw_init(&jw, big_buf, sizeof(big_buf), 0);
	api_jw_str(&jw, big);
	assert_false(jw.full);
	assert_int_equal(jw.len, 9999 + 5 + 2);
	v = json_loads(jw.buf, JSON_DECODE_ANY, NULL);
	assert_non_null(v);
	assert_string_equal(json_string_value(v), big);
	json_decref(v);
	free(big);
}

/* The writer never writes past CAP - KEEP and says it is full. */
static void
test_fixed_buffer_full(void **state)
{
	char buf[32];
	api_jw jw;
	size_t cap;

	(void)state;
	for (cap = 1; cap < 24; cap++) {
		memset(buf, 'Z', sizeof(buf));
		api_jw_init(&jw, buf, cap, 2);
		api_jw_lit(&jw, "\"key\":");
		api_jw_str(&jw, "value with \"quote\"");
		assert_true(jw.full);
		assert_true(jw.len + 2 + 1 <= cap || jw.len == 0);
		for (size_t i = cap; i < sizeof(buf); i++)
			assert_int_equal(buf[i], 'Z');
		/* Once full, nothing more is written. */
		api_jw_raw(&jw, "x", 1);
		assert_true(jw.full);
	}
	api_jw_init(&jw, buf, sizeof(buf), 0);
	api_jw_str(&jw, "fits");
	assert_false(jw.full);
	assert_string_equal(buf, "\"fits\"");
}

static void
test_copy_stays_within_cap(void **state)
{
	char d[6];

	(void)state;
	memset(d, 'Z', sizeof(d));
	api_copy(d, sizeof(d), "abc");
	assert_string_equal(d, "abc");
	api_copy(d, sizeof(d), "abcdefgh");
	assert_string_equal(d, "abcde");
	api_copy(d, 1, "abc");
	assert_string_equal(d, "");
	d[0] = 'Q';
	api_copy(d, 0, "abc"); /* no room: untouched */
	assert_int_equal(d[0], 'Q');
}

static void
test_fmt_int_whole_range(void **state)
{
	char b[24], s[3];

	(void)state;
	assert_int_equal(api_fmt_int(b, sizeof(b), 0), 1);
	assert_string_equal(b, "0");
	api_fmt_int(b, sizeof(b), 1234567);
	assert_string_equal(b, "1234567");
	api_fmt_int(b, sizeof(b), -5);
	assert_string_equal(b, "-5");
	assert_int_equal(api_fmt_int(b, sizeof(b), INT64_MAX), 19);
	assert_string_equal(b, "9223372036854775807");
	assert_int_equal(api_fmt_int(b, sizeof(b), INT64_MIN), 20);
	assert_string_equal(b, "-9223372036854775808");
	assert_int_equal(api_fmt_int(s, sizeof(s), 12345), 2);
	assert_string_equal(s, "12");
}

/* The hand-made RFC 3339 time agrees with gmtime_r, leap days and
 * century years included, and stays in its 24 characters at the ends. */
static void
test_time_str_agrees_with_gmtime(void **state)
{
	static const int64_t days[] = { 0, 59, 60, 365, 10957, 11016, 11017,
		11322, 47540, 47541, 47482, 20000, 2932890 };
	char got[32], want[32];
	int64_t d, ms;
	size_t i;
	struct tm tm;
	time_t t;

	(void)state;
	for (i = 0; i < sizeof(days) / sizeof(days[0]); i++)
		for (d = days[i] - 2; d <= days[i] + 2; d++) {
			if (d < 0)
				continue;
			ms = d * 86400000 + 3723456; /* 01:02:03.456 */
			t = (time_t)(ms / 1000);
			gmtime_r(&t, &tm);
			strftime(want, sizeof(want), "%Y-%m-%dT%H:%M:%S.456Z",
			    &tm);
			api_time_str(ms, got, sizeof(got));
			assert_string_equal(got, want);
		}
	/* Every day of 1900..2400 by a stride that visits all month ends. */
	for (d = 0; d < 160000; d += 7) {
		ms = d * 86400000 + 86399999;
		t = (time_t)(ms / 1000);
		gmtime_r(&t, &tm);
		strftime(want, sizeof(want), "%Y-%m-%dT%H:%M:%S.999Z", &tm);
		api_time_str(ms, got, sizeof(got));
		assert_string_equal(got, want);
	}
	api_time_str(-5, got, sizeof(got));
	assert_string_equal(got, "1970-01-01T00:00:00.000Z");
	api_time_str(INT64_MAX, got, sizeof(got));
	assert_string_equal(got, "9999-12-31T23:59:59.999Z");
	got[0] = 'x';
	api_time_str(0, got, 24); /* too small: empty */
	assert_string_equal(got, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_strings),
		cmocka_unit_test(test_every_byte_escaped_or_kept),
		cmocka_unit_test(test_members_in_a_line),
		cmocka_unit_test(test_long_string),
		cmocka_unit_test(test_fixed_buffer_full),
		cmocka_unit_test(test_copy_stays_within_cap),
		cmocka_unit_test(test_fmt_int_whole_range),
		cmocka_unit_test(test_time_str_agrees_with_gmtime),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
