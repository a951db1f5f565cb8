/*
 * params.c: the request edge as a query string.  The input is
 * "ROUTE key=value&key&key=value..." as libmicrohttpd would hand the
 * decoded pairs over (bytes are kept as they are, NUL cuts a value as
 * the server's C strings do); server/params.c then checks and types them
 * for the route, and an acquire that passes goes on to the service (see
 * req_common.h).
 */
#include "req_common.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in in = { data, size };
	req_query q = { .n = 0 };
	char *pair[REQ_QUERY_MAX];
	const uint8_t *f;
	size_t len;
	int route = fuzz_u8(&in), i;

	while (in.n > 0 && q.n < REQ_QUERY_MAX) {
		char *eq;

		len = fuzz_field(&in, '&', &f);
		pair[q.n] = fuzz_str(f, len);
		eq = strchr(pair[q.n], '=');
		if (eq != NULL)
			*eq++ = '\0';
		q.key[q.n] = pair[q.n];
		q.val[q.n] = eq;
		q.n++;
	}
	req_run(route, &q, NULL, 0);
	for (i = 0; i < q.n; i++)
		free(pair[i]);
	return 0;
}
