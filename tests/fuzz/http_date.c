/*
 * http_date.c: the storage's clock as it arrives (gcs/gcs_http.c):
 * gcs_parse_http_date (a Date header: IMF-fixdate, or RFC 850 / asctime
 * through curl_getdate), gcs_parse_imf_fixdate and gcs_parse_rfc3339
 * (object times).  What must hold: -1 or a time after the epoch, no
 * overflow on any year (gcs_parse_rfc3339 included); an IMF-fixdate accepted is written back by
 * strftime byte for byte (the parser is strict; a leap second, :60,
 * aside), and ms are whole seconds.
 */
#include <time.h>

#include "gcs/gcs_http.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	char *z, back[64];
	int64_t t;
	time_t sec;
	struct tm tm;

	t = gcs_parse_http_date(s, size);
	FUZZ_CHECK(t == -1 || t > 0);
	t = gcs_parse_imf_fixdate(s, size);
	FUZZ_CHECK(t == -1 || t > 0);
	if (t > 0 && memcmp(s + 23, "60", 2) != 0) { /* leap second: :60 */
		FUZZ_CHECK(t % 1000 == 0);
		sec = (time_t)(t / 1000);
		FUZZ_CHECK(gmtime_r(&sec, &tm) != NULL);
		FUZZ_CHECK(strftime(back, sizeof(back),
		               "%a, %d %b %Y %H:%M:%S GMT", &tm) == size);
		FUZZ_CHECK(memcmp(back, s, size) == 0);
	}
	/* Any value: a time before 1970 is negative, which every caller
	 * takes as malformed (< 0); only no UB is checked here. */
	z = fuzz_str(data, size);
	(void)gcs_parse_rfc3339(z);
	free(z);
	return 0;
}
