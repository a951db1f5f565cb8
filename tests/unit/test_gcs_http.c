/* test_gcs_http.c: the time parsing the gs:// client relies on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gcs/gcs_http.h"

static void
test_rfc3339(void **state)
{
	(void)state;
	/* 2019-04-02T14:16:31.530Z, from a real object (facts §1) */
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
}

static void
test_rfc3339_malformed(void **state)
{
	const char *bad[] = { "", "2019-04-02", "2019-04-02 14:16:31Z",
		"2019-13-02T14:16:31Z", "2019-04-02T25:16:31Z",
		"2019-04-02T14:16:31", "2019-04-02T14:16:31.Z",
		"2019-04-02T14:16:31Zjunk", "2019-04-02T14:16:31+0200",
		"x019-04-02T14:16:31Z", NULL };
	int i;

	(void)state;
	for (i = 0; bad[i] != NULL; i++)
		assert_true(gcs_parse_rfc3339(bad[i]) == -1);
	assert_true(gcs_parse_rfc3339(NULL) == -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc3339),
		cmocka_unit_test(test_rfc3339_malformed),
	};

	return cmocka_run_group_tests_name("gcs_http", tests, NULL, NULL);
}
