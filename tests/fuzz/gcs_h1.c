/*
 * gcs_h1.c: the storage client's own HTTP/1.1 answer parser
 * (gcs/gcs_h1.c).  Kept apart from the other harnesses so that it can be
 * dropped with gcs_h1.c.  Input: byte 0 says how the bytes arrive (in
 * one piece, or in pieces of 1..255 bytes), byte 1 whether the peer then
 * closes; the rest is what the connection delivers.  What must hold: the
 * parser never takes more bytes than it was given, a complete answer
 * has a status and a body of the length it holds (NUL-terminated), and
 * once it says DONE or BAD it is not fed again.
 */
#include "gcs/gcs_h1.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in in = { data, size };
	size_t piece = fuzz_u8(&in), used, n;
	int close_after = fuzz_u8(&in) & 1, rc = GCS_H1_MORE;
	gcs_h1 *p = malloc(sizeof(*p));
	gcs_resp resp;

	FUZZ_CHECK(p != NULL);
	gcs_h1_init(p, &resp);
	while (in.n > 0 && rc == GCS_H1_MORE) {
		n = piece == 0 || piece > in.n ? in.n : piece;
		used = (size_t)-1;
		rc = gcs_h1_feed(p, (const char *)in.p, n, &used);
		FUZZ_CHECK(
		    rc == GCS_H1_MORE || rc == GCS_H1_DONE || rc == GCS_H1_BAD);
		if (rc != GCS_H1_BAD)
			FUZZ_CHECK(used <= n);
		if (rc == GCS_H1_MORE)
			FUZZ_CHECK(used == n);
		in.p += n;
		in.n -= n;
	}
	if (rc == GCS_H1_MORE && close_after)
		rc = gcs_h1_eof(p);
	if (rc == GCS_H1_DONE) {
		FUZZ_CHECK(resp.status >= 100 && resp.status <= 999);
		if (resp.body != NULL)
			FUZZ_CHECK(resp.body[resp.len] == '\0');
		else
			FUZZ_CHECK(resp.len == 0);
		FUZZ_CHECK(resp.len <= GCS_RESP_MAX);
	}
	gcs_resp_clear(&resp);
	free(p);
	return 0;
}
