/* test_gcs_http.c: the time parsing the gs:// client relies on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "gcs/gcs_http.h"

static void
test_rfc3339_parsed(void **state)
{
	(void)state;
	/* 2019-04-02T14:16:31.530Z, from a real object */
	assert_true(
	    gcs_parse_rfc3339("2019-04-02T14:16:31.530Z") == 1554214591530LL);
	assert_true(
	    gcs_parse_rfc3339("2019-04-02T14:16:31Z") == 1554214591000LL);
	assert_true(
	    gcs_parse_rfc3339("2019-04-02T14:16:31.5Z") == 1554214591500LL);
	assert_true(gcs_parse_rfc3339("2019-04-02T14:16:31.123456Z") ==
	    1554214591123LL);
	assert_true(gcs_parse_rfc3339("2019-04-02T16:16:31.530+02:00") ==
	    1554214591530LL);
	assert_true(gcs_parse_rfc3339("2019-04-02T12:16:31.530-02:00") ==
	    1554214591530LL);
	assert_true(gcs_parse_rfc3339("1970-01-01T00:00:00Z") == 0);
	assert_true(gcs_parse_rfc3339("2024-02-29T00:00:00Z") ==
	    1709164800000LL); /* a leap day */
	assert_true(gcs_parse_rfc3339("2019-04-02T14:16:31.530+23:59") ==
	    1554214591530LL - (23 * 3600 + 59 * 60) * 1000LL);
}

static void
test_rfc3339_malformed(void **state)
{
	const char *bad[] = { "", "2019-04-02", "2019-04-02 14:16:31Z",
		"2019-13-02T14:16:31Z", "2019-04-02T25:16:31Z",
		"2019-04-02T14:16:31", "2019-04-02T14:16:31.Z",
		"2019-04-02T14:16:31Zjunk", "2019-04-02T14:16:31+0200",
		"x019-04-02T14:16:31Z",
		"2024-02-30T00:00:00Z", /* no such day: not rolled over */
		"2023-02-29T00:00:00Z", "2024-04-31T00:00:00Z",
		"2019-04-02T14:16:31+24:00", "2019-04-02T14:16:31+99:99",
		"2019-04-02T14:16:31-00:60", NULL };
	int i;

	(void)state;
	for (i = 0; bad[i] != NULL; i++)
		assert_true(gcs_parse_rfc3339(bad[i]) == -1);
	assert_true(gcs_parse_rfc3339(NULL) == -1);
}

/* The strict parser on a NUL-terminated string. */
static int64_t
fixdate(const char *s)
{
	return gcs_parse_imf_fixdate(s, strlen(s));
}

static void
test_imf_fixdate_parsed(void **state)
{
	(void)state;
	/* RFC 9110's example, and `date -u -d ... +%s` for the others */
	assert_true(fixdate("Sun, 06 Nov 1994 08:49:37 GMT") == 784111777000LL);
	assert_true(fixdate("Thu, 01 Jan 1970 00:00:01 GMT") == 1000);
	assert_true(
	    fixdate("Thu, 29 Feb 2024 23:59:59 GMT") == 1709251199000LL);
	assert_true(fixdate("Tue, 29 Feb 2000 12:00:00 GMT") == 951825600000LL);
	assert_true(
	    fixdate("Tue, 19 Jan 2038 03:14:08 GMT") == 2147483648000LL);
	assert_true(
	    fixdate("Fri, 31 Dec 9999 23:59:59 GMT") == 253402300799000LL);
	/* a leap second counts as the next second, as curl_getdate does */
	assert_true(
	    fixdate("Sat, 31 Dec 2016 23:59:60 GMT") == 1483228800000LL);
	/* only N bytes are read */
	assert_true(gcs_parse_imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMTxyz",
	                29) == 784111777000LL);
}

static void
test_imf_fixdate_malformed(void **state)
{
	const char *bad[] = {
		"",
		"Thu, 01 Jan 1970 00:00:00 GMT", /* the epoch is not a time */
		"Wed, 31 Dec 1969 23:59:59 GMT", /* before it */
		"Sat, 06 Nov 1994 08:49:37 GMT", /* wrong weekday */
		"sun, 06 Nov 1994 08:49:37 GMT", /* names are case-sensitive */
		"Sun, 06 nov 1994 08:49:37 GMT",
		"Sun, 06 NOV 1994 08:49:37 GMT",
		"Sun, 06 Nov 1994 08:49:37 UTC",
		"Sun, 06 Nov 1994 08:49:37 gmt",
		"Sun,  6 Nov 1994 08:49:37 GMT",
		"Sun, 6 Nov 1994 08:49:37 GMT",
		"Sun, 06 Nov 1994 08:49:37 GMT ",
		" Sun, 06 Nov 1994 08:49:37 GMT",
		"Sun 06 Nov 1994 08:49:37 GMT",
		"Sun, 06 Nov 94 08:49:37 GMT",
		"Sun, 06 Nov 1994 8:49:37 GMT",
		"Sun, 06 Nov 1994 08-49-37 GMT",
		"Sun, 06 Nov 1994 24:00:00 GMT",
		"Sun, 06 Nov 1994 08:60:37 GMT",
		"Sun, 06 Nov 1994 08:49:61 GMT",
		"Sun, 00 Nov 1994 08:49:37 GMT",
		"Mon, 31 Apr 2023 10:00:00 GMT", /* April has 30 days */
		"Wed, 29 Feb 2023 10:00:00 GMT", /* not a leap year */
		"Thu, 29 Feb 1900 10:00:00 GMT", /* nor is 1900 */
		"Sun, 06 Nov 1994 08:49:3x GMT",
		"Sun, 06 Nov 199x 08:49:37 GMT",
		"Sun, +6 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", /* RFC 850 */
		"Sun Nov  6 08:49:37 1994",       /* asctime */
		NULL,
	};
	int i;

	(void)state;
	for (i = 0; bad[i] != NULL; i++)
		if (fixdate(bad[i]) != -1)
			fail_msg("'%s' parsed", bad[i]);
	assert_true(gcs_parse_imf_fixdate(NULL, 29) == -1);
	/* one byte short of the date */
	assert_true(
	    gcs_parse_imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMT", 28) == -1);
}

/* Every second the strict parser accepts is the one strftime wrote and
 * the one curl_getdate reads: 20000 times spread over 1970..9999. */
static void
test_imf_fixdate_matches_strftime(void **state)
{
	uint64_t x = 0x2545f4914f6cdd1dULL;
	char buf[64];
	struct tm tm;
	time_t t;
	size_t n;
	int i;

	(void)state;
	for (i = 0; i < 20000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		t = (time_t)(1 + x % 253402300799ULL);
		if (i < 400) /* and densely around the start of the range */
			t = (time_t)(1 + i * 86399LL);
		assert_non_null(gmtime_r(&t, &tm));
		n = strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT",
		    &tm);
		assert_int_equal(n, 29);
		if (gcs_parse_imf_fixdate(buf, n) != (int64_t)t * 1000)
			fail_msg("'%s' is not %lld", buf, (long long)t);
		if (t < 0x7fffffffLL)
			assert_true(curl_getdate(buf, NULL) == t);
	}
}

static void
test_http_date_forms_parsed(void **state)
{
	const char *v;

	(void)state;
	/* the value as the header callback sees it: after "Date:" */
	v = " Sun, 06 Nov 1994 08:49:37 GMT\r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == 784111777000LL);
	v = "\tSun, 06 Nov 1994 08:49:37 GMT \r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == 784111777000LL);
	/* the obsolete forms, through curl_getdate */
	v = " Sunday, 06-Nov-94 08:49:37 GMT\r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == 784111777000LL);
	v = " Sun Nov  6 08:49:37 1994\r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == 784111777000LL);
	/* a wrong weekday is not an IMF-fixdate; curl_getdate ignores it */
	v = " Mon, 06 Nov 1994 08:49:37 GMT\r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == 784111777000LL);
	/* only N bytes are read */
	v = " Sun, 06 Nov 1994 08:49:37 GMT\r\nX-Other: 1";
	assert_true(gcs_parse_http_date(v, strlen(v) - 10) == 784111777000LL);
	v = " not a date\r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == -1);
	v = " \r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == -1);
	v = " Thu, 01 Jan 1970 00:00:00 GMT\r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == -1);
	assert_true(gcs_parse_http_date(NULL, 0) == -1);
}

/* A time past 9999 is no time: in an obsolete form curl_getdate reads
 * any year, and in milliseconds a year past ~292 million overflowed an
 * int64 (undefined behaviour, found by a fuzzer). */
static void
test_http_date_far_future(void **state)
{
	const char *v;

	(void)state;
	v = " Sun Nov 6 08:49:37 2147483647\r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == -1);
	v = " Sunday, 06-Nov-9999999 08:49:37 GMT\r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == -1);
	v = " Sun, 06 Nov 10000 08:49:37 GMT\r\n";
	assert_true(gcs_parse_http_date(v, strlen(v)) == -1);
	/* the last second allowed, in both parsers */
	v = " Fri, 31 Dec 9999 23:59:59 GMT\r\n";
	assert_true(
	    gcs_parse_http_date(v, strlen(v)) == GCS_DATE_LAST_S * 1000);
	v = " Fri Dec 31 23:59:59 9999\r\n";
	assert_true(
	    gcs_parse_http_date(v, strlen(v)) == GCS_DATE_LAST_S * 1000);
}

static void
test_http_date_too_long(void **state)
{
	char v[GCS_DATE_MAX + 64];
	size_t n;

	(void)state;
	/* a valid date behind GCS_DATE_MAX bytes of blanks is still found,
	 * but a value longer than GCS_DATE_MAX is not parsed at all */
	memset(v, ' ', sizeof(v));
	memcpy(v + sizeof(v) - 29, "Sun, 06 Nov 1994 08:49:37 GMT", 29);
	assert_true(gcs_parse_http_date(v, sizeof(v)) == 784111777000LL);
	memset(v, 'x', sizeof(v));
	memcpy(v, "Sun, 06 Nov 1994 08:49:37 GMT", 29);
	n = GCS_DATE_MAX + 1;
	assert_true(gcs_parse_http_date(v, n) == -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc3339_parsed),
		cmocka_unit_test(test_rfc3339_malformed),
		cmocka_unit_test(test_imf_fixdate_parsed),
		cmocka_unit_test(test_imf_fixdate_malformed),
		cmocka_unit_test(test_imf_fixdate_matches_strftime),
		cmocka_unit_test(test_http_date_forms_parsed),
		cmocka_unit_test(test_http_date_too_long),
		cmocka_unit_test(test_http_date_far_future),
	};

	return cmocka_run_group_tests_name("gcs_http", tests, NULL, NULL);
}
