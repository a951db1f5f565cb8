/*
 * body.c: the request edge as a JSON body.  The first byte picks the
 * route (acquire, refresh, release/list, forceRelease); the rest is the
 * body server/params.c parses with jansson and types; an acquire that
 * passes goes on to the service (see req_common.h).
 */
#include "req_common.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	req_query q = { .n = 0 };

	if (size < 1)
		return 0;
	req_run(data[0], &q, (const char *)data + 1, size - 1);
	return 0;
}
