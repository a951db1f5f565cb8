/* test_gcs_h1.c: the HTTP/1.1 answer parser and request writer the storage
 * client uses on its own connections (gcs_h1.c, RFC 9112 framing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>

#include <cmocka.h>

#include "gcs/gcs_h1.h"

#define DATE_HDR "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
#define DATE_MS  784111777000LL

/* One answer and what parsing it must give.  With EOF set the peer
 * closes after IN: every feed must say MORE and take all the bytes, then
 * gcs_h1_eof decides.  With DONE, all the fields after RC must match. */
struct h1_case {
	const char *name;
	const char *in; /* the bytes that arrive */
	size_t in_len;
	size_t used; /* bytes of IN that are the answer; 0: all of them */
	int eof;
	int rc; /* GCS_H1_DONE or GCS_H1_BAD */
	long status;
	const char *body;
	size_t body_len;
	int keep_alive;
	int64_t date_ms;
	int flavor; /* resp.metadata_flavor */
};

#define IN(s)   .in = (s), .in_len = sizeof(s) - 1
#define BODY(s) .body = (s), .body_len = sizeof(s) - 1

/* How the bytes are cut into feeds. */
enum { WHOLE, BYTEWISE, CUT };

/* Feed the N bytes at B as one piece, from a buffer of exactly N bytes so
 * that ASan sees any read past them.  Adds the bytes taken to *TOTAL;
 * notes in WHY (when still empty) a broken promise of gcs_h1_feed. */
static int
feed_piece(gcs_h1 *p, const char *b, size_t n, size_t *total, char *why,
    size_t whylen)
{
	char *copy = malloc(n > 0 ? n : 1);
	size_t used = (size_t)-1;
	int rc;

	assert_non_null(copy);
	if (n > 0)
		memcpy(copy, b, n);
	rc = gcs_h1_feed(p, copy, n, &used);
	free(copy);
	if (used > n) {
		if (why[0] == '\0')
			snprintf(why, whylen, "*used %zu of a %zu-byte feed",
			    used, n);
		used = n;
	} else if (rc == GCS_H1_MORE && used != n && why[0] == '\0')
		snprintf(why, whylen, "MORE with *used %zu of %zu", used, n);
	if (rc != GCS_H1_MORE && rc != GCS_H1_DONE && rc != GCS_H1_BAD &&
	    why[0] == '\0')
		snprintf(why, whylen, "feed returned %d", rc);
	*total += used;
	return rc;
}

static const char *
rc_name(int rc)
{
	if (rc == GCS_H1_DONE)
		return "DONE";
	if (rc == GCS_H1_BAD)
		return "BAD";
	if (rc == GCS_H1_MORE)
		return "MORE";
	return "?";
}

/* Parse C->in cut as MODE says (CUT: two pieces at AT) and compare with
 * what C expects.  0, or 1 with the first difference in WHY. */
static int
try_case(const struct h1_case *c, int mode, size_t at, char *why, size_t whylen)
{
	gcs_resp r;
	gcs_h1 *p = malloc(sizeof(*p));
	size_t total = 0, want_used = c->used ? c->used : c->in_len, i;
	int rc = GCS_H1_MORE, eofed = 0, bad = 0;

	assert_non_null(p);
	why[0] = '\0';
	gcs_h1_init(p, &r);
	if (mode == WHOLE)
		rc = feed_piece(p, c->in, c->in_len, &total, why, whylen);
	else if (mode == BYTEWISE)
		for (i = 0; i < c->in_len && rc == GCS_H1_MORE; i++)
			rc = feed_piece(p, c->in + i, 1, &total, why, whylen);
	else {
		rc = feed_piece(p, c->in, at, &total, why, whylen);
		if (rc == GCS_H1_MORE)
			rc = feed_piece(p, c->in + at, c->in_len - at, &total,
			    why, whylen);
	}
	if (rc == GCS_H1_MORE && c->eof) {
		if (total != c->in_len && why[0] == '\0')
			snprintf(why, whylen,
			    "took %zu of %zu before the close", total,
			    c->in_len);
		rc = gcs_h1_eof(p);
		eofed = 1;
	}
	if (why[0] != '\0')
		bad = 1;
	else if (rc != c->rc) {
		snprintf(why, whylen, "got %s, want %s (status %ld)",
		    rc_name(rc), rc_name(c->rc), r.status);
		bad = 1;
	} else if (c->eof && !eofed) {
		snprintf(why, whylen, "%s before the close", rc_name(rc));
		bad = 1;
	} else if (rc == GCS_H1_BAD) {
		if (p->keep_alive != 0) {
			snprintf(why, whylen, "BAD but keep_alive %d",
			    p->keep_alive);
			bad = 1;
		}
	} else if (total != want_used) {
		snprintf(why, whylen, "took %zu bytes, the answer is %zu",
		    total, want_used);
		bad = 1;
	} else if (r.status != c->status) {
		snprintf(why, whylen, "status %ld, want %ld", r.status,
		    c->status);
		bad = 1;
	} else if (r.len != c->body_len ||
	    (r.len > 0 &&
	        (r.body == NULL || memcmp(r.body, c->body, r.len) != 0))) {
		snprintf(why, whylen, "body of %zu bytes '%.40s', want %zu",
		    r.len, r.body ? r.body : "(null)", c->body_len);
		bad = 1;
	} else if (r.len == 0 && r.body != NULL) {
		snprintf(why, whylen, "an empty body is not NULL");
		bad = 1;
	} else if (r.len > 0 && r.body[r.len] != '\0') {
		snprintf(why, whylen, "the body is not NUL-terminated");
		bad = 1;
	} else if (r.too_big) {
		snprintf(why, whylen, "too_big set");
		bad = 1;
	} else if (p->keep_alive != c->keep_alive) {
		snprintf(why, whylen, "keep_alive %d, want %d", p->keep_alive,
		    c->keep_alive);
		bad = 1;
	} else if (r.date_ms != c->date_ms) {
		snprintf(why, whylen, "date_ms %lld, want %lld",
		    (long long)r.date_ms, (long long)c->date_ms);
		bad = 1;
	} else if (r.metadata_flavor != c->flavor) {
		snprintf(why, whylen, "metadata_flavor %d, want %d",
		    r.metadata_flavor, c->flavor);
		bad = 1;
	}
	gcs_resp_clear(&r);
	free(p);
	return bad;
}

/* C in one piece, one byte at a time, and cut in two at every place
 * (including the empty pieces at either end).  Prints each way that goes
 * wrong (of the cuts, the first and how many); returns how many did. */
static size_t
run_case(const struct h1_case *c)
{
	char why[256];
	size_t nfail = 0, ncut = 0, first = 0, at;
	char first_why[256] = "";

	if (try_case(c, WHOLE, 0, why, sizeof(why))) {
		print_error("%s: in one piece: %s\n", c->name, why);
		nfail++;
	}
	if (try_case(c, BYTEWISE, 0, why, sizeof(why))) {
		print_error("%s: byte by byte: %s\n", c->name, why);
		nfail++;
	}
	for (at = 0; at <= c->in_len; at++)
		if (try_case(c, CUT, at, why, sizeof(why))) {
			if (ncut++ == 0) {
				first = at;
				memcpy(first_why, why, sizeof(why));
			}
		}
	if (ncut > 0) {
		print_error("%s: cut in two: %zu of %zu cuts fail, first at "
		            "%zu: %s\n",
		    c->name, ncut, c->in_len + 1, first, first_why);
		nfail++;
	}
	return nfail;
}

static void
run_table(const struct h1_case *t, size_t n)
{
	size_t i, nfail = 0;

	for (i = 0; i < n; i++)
		nfail += run_case(&t[i]);
	if (nfail > 0)
		fail_msg("%zu of %zu (case, way of cutting) pairs went wrong "
		         "(above)",
		    nfail, n * 3);
}

/* Answers an HTTP/1.1 client must frame and read exactly. */
static const struct h1_case framed[] = {
	{ .name = "200 with Content-Length",
	    IN("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	       "Content-Length: 13\r\n" DATE_HDR "\r\nhello, world!"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("hello, world!"),
	    .keep_alive = 1,
	    .date_ms = DATE_MS },
	{ .name = "200 with NUL bytes in the body",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\na\0b\0c"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("a\0b\0c"),
	    .keep_alive = 1 },
	{ .name = "404 with a body",
	    IN("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\n"
	       "not found"),
	    .rc = GCS_H1_DONE,
	    .status = 404,
	    BODY("not found"),
	    .keep_alive = 1 },
	{ .name = "599",
	    IN("HTTP/1.1 599 X\r\nContent-Length: 1\r\n\r\nx"),
	    .rc = GCS_H1_DONE,
	    .status = 599,
	    BODY("x"),
	    .keep_alive = 1 },
	{ .name = "204 without a body",
	    IN("HTTP/1.1 204 No Content\r\n" DATE_HDR "\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 204,
	    .keep_alive = 1,
	    .date_ms = DATE_MS },
	{ .name = "204 with Content-Length: 0",
	    IN("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 204,
	    .keep_alive = 1 },
	{ .name = "304",
	    IN("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 304,
	    .keep_alive = 1 },
	/* RFC 9110 8.6 lets a 304 carry the Content-Length a 200 would
	 * have had, and RFC 9112 6.3 (1) ends a 304 at the empty line
	 * whatever its fields say. */
	{ .name = "304 with the Content-Length of the 200",
	    IN("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 304,
	    .keep_alive = 1 },
	/* RFC 9112 6.1: a server MAY send Transfer-Encoding in a 304. */
	{ .name = "304 with Transfer-Encoding: chunked",
	    IN("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n"
	       "\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 304,
	    .keep_alive = 1 },
	{ .name = "200 with Content-Length: 0",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    .keep_alive = 1 },
	{ .name = "chunked with extensions and trailers",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" DATE_HDR
	       "\r\n5\r\nhello\r\n1;a=b\r\n,\r\n6 ; ext=\"q\"\r\n world\r\n"
	       "0;last\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("hello, world"),
	    .keep_alive = 1,
	    .date_ms = DATE_MS },
	{ .name = "chunked, upper-case hex and leading zeros",
	    IN("HTTP/1.1 200 OK\r\nTRANSFER-ENCODING: Chunked\r\n\r\n"
	       "1A\r\nABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n00a\r\n0123456789\r\n"
	       "0\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
	    .keep_alive = 1 },
	{ .name = "chunked, 15 hex digits",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "000000000000003\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("abc"),
	    .keep_alive = 1 },
	{ .name = "chunked, no chunk before the last",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "0\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    .keep_alive = 1 },
	{ .name = "HTTP/1.0 with Content-Length",
	    IN("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("ok"),
	    .keep_alive = 0 },
	{ .name = "Connection: close",
	    IN("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n"
	       "\r\nok"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("ok"),
	    .keep_alive = 0 },
	{ .name = "Connection: keep-alive, Close",
	    IN("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\n"
	       "Content-Length: 2\r\n\r\nok"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("ok"),
	    .keep_alive = 0 },
	{ .name = "Connection: keep-alive",
	    IN("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n"
	       "Content-Length: 2\r\n\r\nok"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("ok"),
	    .keep_alive = 1 },
	{ .name = "Connection: closed (not close)",
	    IN("HTTP/1.1 200 OK\r\nConnection: closed, xclose\r\n"
	       "Content-Length: 2\r\n\r\nok"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("ok"),
	    .keep_alive = 1 },
	{ .name = "100 Continue, then 200",
	    IN("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
	       "Content-Length: 2\r\n\r\nok"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("ok"),
	    .keep_alive = 1 },
	{ .name = "the fields of a 1xx are not the answer's",
	    IN("HTTP/1.1 103 Early Hints\r\n" DATE_HDR
	       "Metadata-Flavor: Google\r\nContent-Length: 7\r\n"
	       "Link: </s>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
	       "ok"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("ok"),
	    .keep_alive = 1 },
	{ .name = "field names in any case",
	    IN("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n"
	       "DATE: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
	       "metadata-FLAVOR: Google\r\ncOnNeCtIoN: CLOSE\r\n\r\nabc"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("abc"),
	    .keep_alive = 0,
	    .date_ms = DATE_MS,
	    .flavor = 1 },
	{ .name = "Metadata-Flavor: Google",
	    IN("HTTP/1.1 200 OK\r\nMetadata-Flavor:  Google \r\n"
	       "Content-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    .keep_alive = 1,
	    .flavor = 1 },
	{ .name = "Metadata-Flavor: another",
	    IN("HTTP/1.1 200 OK\r\nMetadata-Flavor: Googler\r\n"
	       "Content-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    .keep_alive = 1 },
	{ .name = "a Date that is not a date",
	    IN("HTTP/1.1 200 OK\r\nDate: yesterday\r\nContent-Length: 0\r\n"
	       "\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    .keep_alive = 1 },
	{ .name = "bare LF line ends",
	    IN("HTTP/1.1 200 OK\nContent-Length: 3\n"
	       "Date: Sun, 06 Nov 1994 08:49:37 GMT\n\nabc"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("abc"),
	    .keep_alive = 1,
	    .date_ms = DATE_MS },
	{ .name = "bare LF line ends, chunked",
	    IN("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n"
	       "2;x\r\nde\n0\nT: 1\n\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("abcde"),
	    .keep_alive = 1 },
	{ .name = "two equal Content-Length",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX: y\r\n"
	       "Content-Length: 3\r\n\r\nabc"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("abc"),
	    .keep_alive = 1 },
	{ .name = "Content-Length with whitespace around it",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: \t 3 \t\r\n\r\nabc"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("abc"),
	    .keep_alive = 1 },
	{ .name = "Content-Length of 18 digits",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 000000000000000003\r\n\r\n"
	       "abc"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("abc"),
	    .keep_alive = 1 },
	{ .name = "status line without a reason",
	    IN("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    .keep_alive = 1 },
	{ .name = "status line with an empty reason",
	    IN("HTTP/1.1 201 \r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_DONE,
	    .status = 201,
	    .keep_alive = 1 },
	{ .name = "a 1xx's framing fields are dropped with it",
	    IN("HTTP/1.1 100 Continue\r\nTransfer-Encoding: chunked\r\n"
	       "Content-Length: 9\r\n\r\nHTTP/1.1 200 OK\r\n"
	       "Content-Length: 2\r\n\r\nok"),
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("ok"),
	    .keep_alive = 1 },
};

/* Answers that are not HTTP/1.x or cannot be framed exactly. */
static const struct h1_case malformed[] = {
	{ .name = "two different Content-Length",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n"
	       "\r\nabcd"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length: +3",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length: -3",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\nabc"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length: 1 2",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\nabcdefghijkl"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length: 0x3",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 0x3\r\n\r\nabc"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length: 3a",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 3a\r\n\r\nabc"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length: 3, 3",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\nabc"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length empty",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length of 19 digits",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 0000000000000000003\r\n\r\n"
	       "abc"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length of 20 digits",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n"
	       "\r\nabc"),
	    .rc = GCS_H1_BAD },
	{ .name = "Transfer-Encoding: gzip, chunked",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
	       "3\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "Transfer-Encoding: identity",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n"
	       "Content-Length: 3\r\n\r\nabc"),
	    .rc = GCS_H1_BAD },
	{ .name = "Transfer-Encoding: chunked twice",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	       "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "chunked and Content-Length",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	       "Content-Length: 10\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "Content-Length and chunked",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n"
	       "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "obs-fold with a space",
	    IN("HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "obs-fold with a tab",
	    IN("HTTP/1.1 200 OK\r\nX-A: 1\r\n\t2\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "whitespace line right after the status line",
	    IN("HTTP/1.1 200 OK\r\n Content-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "space before the colon",
	    IN("HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nabcde"),
	    .rc = GCS_H1_BAD },
	{ .name = "header line without a colon",
	    IN("HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "header line with an empty name",
	    IN("HTTP/1.1 200 OK\r\n: x\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "CR inside a header line",
	    IN("HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "CR inside the status line",
	    IN("HTTP/1.1 200 O\rK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "NUL in a header value",
	    IN("HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "NUL in a header name",
	    IN("HTTP/1.1 200 OK\r\nX\0A: b\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "NUL in the status line",
	    IN("HTTP/1.1 200 O\0K\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/2 200",
	    IN("HTTP/2 200\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.1 20",
	    IN("HTTP/1.1 20\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.1 20 OK",
	    IN("HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.1 2000 OK",
	    IN("HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.1 600 X",
	    IN("HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.1 099 X",
	    IN("HTTP/1.1 099 X\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.1 2x0 X",
	    IN("HTTP/1.1 2x0 X\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.1 101 Switching",
	    IN("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
	       "Connection: Upgrade\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.x 200 OK",
	    IN("HTTP/1.x 200 OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.1_200 OK",
	    IN("HTTP/1.1_200 OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "ICY 200 OK",
	    IN("ICY 200 OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "http/1.1 in lower case",
	    IN("http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "HTTP/1.1 200OK",
	    IN("HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "two spaces before the status",
	    IN("HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "an empty line for a status line",
	    IN("\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	/* A 204 has no body, and a server MUST NOT send Content-Length or
	 * Transfer-Encoding in one (RFC 9110 8.6, RFC 9112 6.1): one that
	 * does is not trusted. */
	{ .name = "204 with Content-Length: 5",
	    IN("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "204 chunked",
	    IN("HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "chunk size not hex",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "xyz\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "chunk size 0x3",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "0x3\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "chunk size -3",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "-3\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "chunk size followed by junk",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "3 x\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "empty chunk size",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "empty chunk size with an extension",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       ";a=b\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "chunk size of 16 hex digits",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "0000000000000003\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "chunk size ffffffffffffffff",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "ffffffffffffffff\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "no CRLF after the chunk data",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "3\r\nabcX\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "the next chunk size right after the data",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "3\r\nabc0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
	{ .name = "NUL in a chunk size line",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "3;a\0\r\nabc\r\n0\r\n\r\n"),
	    .rc = GCS_H1_BAD },
};

/* Answers the peer's close cuts off or ends. */
static const struct h1_case closed[] = {
	{ .name = "body delimited by the close",
	    IN("HTTP/1.1 200 OK\r\n" DATE_HDR "\r\nhello\r\n\r\nworld"),
	    .eof = 1,
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("hello\r\n\r\nworld"),
	    .keep_alive = 0,
	    .date_ms = DATE_MS },
	{ .name = "HTTP/1.0 body delimited by the close",
	    IN("HTTP/1.0 200 OK\r\n\r\na\0b"),
	    .eof = 1,
	    .rc = GCS_H1_DONE,
	    .status = 200,
	    BODY("a\0b"),
	    .keep_alive = 0 },
	{ .name = "empty body delimited by the close",
	    IN("HTTP/1.1 500 Oops\r\nConnection: keep-alive\r\n\r\n"),
	    .eof = 1,
	    .rc = GCS_H1_DONE,
	    .status = 500,
	    .keep_alive = 0 },
	{ .name = "close before any byte", IN(""), .eof = 1, .rc = GCS_H1_BAD },
	{ .name = "close in the status line",
	    IN("HTTP/1.1 20"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
	{ .name = "close in the headers",
	    IN("HTTP/1.1 200 OK\r\nContent-Len"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
	{ .name = "close before the empty line",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
	{ .name = "close after a 100 Continue",
	    IN("HTTP/1.1 100 Continue\r\n\r\n"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
	{ .name = "close in a Content-Length body",
	    IN("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcd"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
	{ .name = "close in a chunk size",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "3\r\nabc\r\n1"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
	{ .name = "close in a chunk",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "5\r\nabc"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
	{ .name = "close before the CRLF after a chunk",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "3\r\nabc"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
	{ .name = "close in the trailers",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "3\r\nabc\r\n0\r\nX-T: 1\r\n"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
	{ .name = "close before the end of a chunked body",
	    IN("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "3\r\nabc\r\n0\r\n"),
	    .eof = 1,
	    .rc = GCS_H1_BAD },
};

/* Every framed answer gives its status, body, keep_alive, date and
 * Metadata-Flavor, and takes exactly its bytes, however it is cut. */
static void
test_framed(void **state)
{
	(void)state;
	run_table(framed, sizeof(framed) / sizeof(framed[0]));
}

/* Every malformed answer is BAD (and the connection not kept), however
 * it is cut. */
static void
test_malformed(void **state)
{
	(void)state;
	run_table(malformed, sizeof(malformed) / sizeof(malformed[0]));
}

/* The close ends a body without framing (DONE, not kept alive) and cuts
 * off anything else (BAD), however the bytes before it were cut. */
static void
test_closed(void **state)
{
	(void)state;
	run_table(closed, sizeof(closed) / sizeof(closed[0]));
}

/* The close-delimited body step by step: feed takes all and says MORE,
 * gcs_h1_eof then says DONE with the whole body; and eof in the headers,
 * in a Content-Length body or in a chunked body is BAD. */
static void
test_eof(void **state)
{
	const char *a = "HTTP/1.1 200 OK\r\nServer: x\r\n\r\nsome",
	           *b = " more";
	gcs_resp r;
	gcs_h1 p;
	size_t used;

	(void)state;
	gcs_h1_init(&p, &r);
	assert_int_equal(gcs_h1_feed(&p, a, strlen(a), &used), GCS_H1_MORE);
	assert_int_equal(used, strlen(a));
	assert_int_equal(gcs_h1_feed(&p, b, strlen(b), &used), GCS_H1_MORE);
	assert_int_equal(used, strlen(b));
	assert_int_equal(r.status, 200);
	assert_int_equal(gcs_h1_eof(&p), GCS_H1_DONE);
	assert_int_equal(r.len, 9);
	assert_memory_equal(r.body, "some more", 10);
	assert_int_equal(p.keep_alive, 0);
	assert_int_equal(r.too_big, 0);
	gcs_resp_clear(&r);

	gcs_h1_init(&p, &r);
	a = "HTTP/1.1 200 OK\r\nContent-";
	assert_int_equal(gcs_h1_feed(&p, a, strlen(a), &used), GCS_H1_MORE);
	assert_int_equal(gcs_h1_eof(&p), GCS_H1_BAD);
	gcs_resp_clear(&r);

	gcs_h1_init(&p, &r);
	a = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n123456789";
	assert_int_equal(gcs_h1_feed(&p, a, strlen(a), &used), GCS_H1_MORE);
	assert_int_equal(gcs_h1_eof(&p), GCS_H1_BAD);
	assert_int_equal(p.keep_alive, 0);
	gcs_resp_clear(&r);

	gcs_h1_init(&p, &r);
	a = "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
	    "chunked\r\n\r\n4\r\nabcd\r\n";
	assert_int_equal(gcs_h1_feed(&p, a, strlen(a), &used), GCS_H1_MORE);
	assert_int_equal(gcs_h1_eof(&p), GCS_H1_BAD);
	gcs_resp_clear(&r);
}

/* Answers for test_bytes_after. */
#define A_CL "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"
#define A_CHUNKED \
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" \
	"3\r\nabc\r\n0\r\nT: x\r\n\r\n"
#define A_204 "HTTP/1.1 204 No Content\r\n\r\n"
#define A_INTERIM \
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n" \
	"Content-Length: 0\r\n\r\n"
#define A_LF "HTTP/1.1 200 OK\nContent-Length: 1\n\nx"

/* Bytes after a complete answer are not taken: *used is the answer's
 * length and DONE comes on its last byte, however the bytes are cut. */
static void
test_bytes_after(void **state)
{
	static const struct h1_case after[] = {
		{ .name = "Content-Length, then the next answer",
		    IN(A_CL A_CL),
		    .used = sizeof(A_CL) - 1,
		    .rc = GCS_H1_DONE,
		    .status = 200,
		    BODY("abc"),
		    .keep_alive = 1 },
		{ .name = "chunked, then junk",
		    IN(A_CHUNKED "junk\r\n\r\n"),
		    .used = sizeof(A_CHUNKED) - 1,
		    .rc = GCS_H1_DONE,
		    .status = 200,
		    BODY("abc"),
		    .keep_alive = 1 },
		{ .name = "204, then junk",
		    IN(A_204 "0\r\n\r\n"),
		    .used = sizeof(A_204) - 1,
		    .rc = GCS_H1_DONE,
		    .status = 204,
		    .keep_alive = 1 },
		{ .name = "100 and 200, then junk",
		    IN(A_INTERIM "HTTP/1.1 500 X\r\n\r\n"),
		    .used = sizeof(A_INTERIM) - 1,
		    .rc = GCS_H1_DONE,
		    .status = 200,
		    .keep_alive = 1 },
		{ .name = "bare LF, then junk",
		    IN(A_LF "yz"),
		    .used = sizeof(A_LF) - 1,
		    .rc = GCS_H1_DONE,
		    .status = 200,
		    BODY("x"),
		    .keep_alive = 1 },
	};

	(void)state;
	run_table(after, sizeof(after) / sizeof(after[0]));
}

/* Up to GCS_H1_INTERIM 1xx answers are skipped; one more is BAD. */
static void
test_interim_limit(void **state)
{
	const char *one = "HTTP/1.1 100 Continue\r\n\r\n",
	           *last = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	size_t n1 = strlen(one), nl = strlen(last), k, i, nfail = 0;
	char *buf = malloc(n1 * (GCS_H1_INTERIM + 1) + nl);
	struct h1_case c = { .rc = GCS_H1_DONE,
		.status = 200,
		BODY("ok"),
		.keep_alive = 1 };

	(void)state;
	assert_non_null(buf);
	for (k = 0; k <= GCS_H1_INTERIM + 1; k++) {
		for (i = 0; i < k; i++)
			memcpy(buf + i * n1, one, n1);
		memcpy(buf + k * n1, last, nl);
		c.in = buf;
		c.in_len = k * n1 + nl;
		c.rc = k <= GCS_H1_INTERIM ? GCS_H1_DONE : GCS_H1_BAD;
		c.name = k <= GCS_H1_INTERIM ? "up to GCS_H1_INTERIM 1xx"
		                             : "GCS_H1_INTERIM + 1 1xx";
		nfail += run_case(&c);
	}
	free(buf);
	if (nfail > 0)
		fail_msg("%zu went wrong (above)", nfail);
}

/* Write one header line of L bytes (L >= 10), "X-Fill: aaa...\r\n", at
 * B. */
static void
line_of(char *b, size_t l)
{
	memcpy(b, "X-Fill: ", 8);
	memset(b + 8, 'a', l - 10);
	memcpy(b + l - 2, "\r\n", 2);
}

/* Write header lines of at most 1010 bytes, N bytes in all (N >= 10), at
 * B. */
static size_t
fill_headers(char *b, size_t n)
{
	size_t at = 0, l;

	while (at < n) {
		l = n - at > 1010 ? 1000 : n - at;
		line_of(b + at, l);
		at += l;
	}
	return at;
}

/* A header block of exactly HEAD bytes (status line to the empty line
 * included) followed by a 3-byte body, into the buffer at B. */
static size_t
head_of(char *b, size_t head)
{
	static const char first[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n";
	size_t at = sizeof(first) - 1;

	memcpy(b, first, at);
	at += fill_headers(b + at, head - at - 2);
	memcpy(b + at, "\r\nabc", 5);
	return at + 5;
}

/* GCS_H1_HEAD_MAX bounds the header block, not the body: a block just
 * under it (and one of exactly that size) is read; past it, BAD, though
 * each line is short. */
static void
test_head_max(void **state)
{
	char *b = malloc(2 * GCS_H1_HEAD_MAX + 64);
	struct h1_case c = { .status = 200, BODY("abc"), .keep_alive = 1 };
	size_t nfail = 0;

	(void)state;
	assert_non_null(b);
	c.in = b;
	c.name = "header block of GCS_H1_HEAD_MAX - 1";
	c.in_len = head_of(b, GCS_H1_HEAD_MAX - 1);
	c.rc = GCS_H1_DONE;
	nfail += run_case(&c);
	c.name = "header block of GCS_H1_HEAD_MAX";
	c.in_len = head_of(b, GCS_H1_HEAD_MAX);
	nfail += run_case(&c);
	/* over it even without the empty line */
	c.name = "header block of GCS_H1_HEAD_MAX + 3";
	c.in_len = head_of(b, GCS_H1_HEAD_MAX + 3);
	c.rc = GCS_H1_BAD;
	nfail += run_case(&c);
	c.name = "header block of 2 * GCS_H1_HEAD_MAX";
	c.in_len = head_of(b, 2 * GCS_H1_HEAD_MAX);
	nfail += run_case(&c);
	free(b);
	if (nfail > 0)
		fail_msg("%zu went wrong (above)", nfail);
}

/* GCS_H1_LINE_MAX bounds one header, status or chunk-size line: a line
 * of that many bytes (its CRLF included) is read, a longer one is BAD
 * although the header block is under GCS_H1_HEAD_MAX. */
static void
test_line_max(void **state)
{
	static const char st[] = "HTTP/1.1 200 OK\r\n",
	                  cl[] = "Content-Length: 3\r\n\r\nabc",
	                  te[] = "Transfer-Encoding: chunked\r\n\r\n";
	size_t cap = 2 * GCS_H1_LINE_MAX + 256, at, l, nfail = 0;
	char *b = malloc(cap);
	struct h1_case c = { .status = 200, BODY("abc"), .keep_alive = 1 };

	(void)state;
	assert_non_null(b);
	assert_true(GCS_H1_LINE_MAX + 64 < GCS_H1_HEAD_MAX);
	c.in = b;
	for (l = GCS_H1_LINE_MAX; l <= GCS_H1_LINE_MAX + 64; l += 64) {
		/* one header line of L bytes */
		memcpy(b, st, sizeof(st) - 1);
		at = sizeof(st) - 1;
		line_of(b + at, l);
		at += l;
		memcpy(b + at, cl, sizeof(cl) - 1);
		c.in_len = at + sizeof(cl) - 1;
		c.rc = l == GCS_H1_LINE_MAX ? GCS_H1_DONE : GCS_H1_BAD;
		c.name = l == GCS_H1_LINE_MAX ? "header line of LINE_MAX"
		                              : "header line of LINE_MAX + 64";
		nfail += run_case(&c);

		/* a status line of L bytes */
		memcpy(b, "HTTP/1.1 200 ", 13);
		memset(b + 13, 'r', l - 15);
		memcpy(b + l - 2, "\r\n", 2);
		memcpy(b + l, cl, sizeof(cl) - 1);
		c.in_len = l + sizeof(cl) - 1;
		c.name = l == GCS_H1_LINE_MAX ? "status line of LINE_MAX"
		                              : "status line of LINE_MAX + 64";
		nfail += run_case(&c);

		/* a chunk-size line of L bytes: "3;" and an extension */
		memcpy(b, st, sizeof(st) - 1);
		at = sizeof(st) - 1;
		memcpy(b + at, te, sizeof(te) - 1);
		at += sizeof(te) - 1;
		memcpy(b + at, "3;e=", 4);
		memset(b + at + 4, 'v', l - 6);
		memcpy(b + at + l - 2, "\r\nabc\r\n0\r\n\r\n", 12);
		c.in_len = at + l + 10;
		c.name = l == GCS_H1_LINE_MAX
		    ? "chunk-size line of LINE_MAX"
		    : "chunk-size line of LINE_MAX + 64";
		nfail += run_case(&c);
	}
	free(b);
	if (nfail > 0)
		fail_msg("%zu went wrong (above)", nfail);
}

/* A body of N bytes: a pattern that shows where a kept part came from. */
static char *
pattern(size_t n)
{
	char *b = malloc(n + 1);
	size_t i;

	assert_non_null(b);
	for (i = 0; i < n; i++)
		b[i] = (char)('a' + (i * 7 + i / 251) % 26);
	b[n] = '\0';
	return b;
}

/* Feed the LEN bytes at IN in pieces of STEP; the last result. */
static int
feed_steps(gcs_h1 *p, const char *in, size_t len, size_t step, size_t *total)
{
	size_t at = 0, k, used;
	int rc = GCS_H1_MORE;

	*total = 0;
	while (at < len && rc == GCS_H1_MORE) {
		k = len - at < step ? len - at : step;
		rc = gcs_h1_feed(p, in + at, k, &used);
		assert_true(used <= k);
		if (rc == GCS_H1_MORE)
			assert_int_equal(used, k);
		*total += used;
		at += k;
	}
	return rc;
}

/* What was kept of a too-big BODY: at most GCS_RESP_MAX bytes, a prefix
 * of it, in an allocation not much larger. */
static void
check_cut(const gcs_resp *r, const char *body)
{
	assert_int_equal(r->too_big, 1);
	assert_true(r->len <= GCS_RESP_MAX);
	if (r->len > 0) {
		assert_non_null(r->body);
		assert_memory_equal(r->body, body, r->len);
		assert_int_equal(r->body[r->len], '\0');
		assert_true(malloc_usable_size(r->body) <= GCS_RESP_MAX + 8192);
	}
}

/* A body over GCS_RESP_MAX, with Content-Length, chunked or ended by the
 * close, completes the answer with too_big set and at most GCS_RESP_MAX
 * bytes kept; one of exactly GCS_RESP_MAX bytes is kept whole. */
static void
test_too_big(void **state)
{
	static const size_t steps[] = { 4096, 65536, (size_t)-1 };
	size_t big = GCS_RESP_MAX + 100000, n, i, s, total, at, k;
	char *body = pattern(big), *in = malloc(2 * big), head[128];
	gcs_resp r;
	gcs_h1 *p = malloc(sizeof(*p));
	int hl;

	(void)state;
	assert_non_null(in);
	assert_non_null(p);
	for (s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		/* Content-Length: MAX + 1, MAX + 100000, and MAX exactly */
		for (i = 0; i < 3; i++) {
			n = i == 0   ? GCS_RESP_MAX + 1
			    : i == 1 ? big
			             : GCS_RESP_MAX;
			hl = snprintf(head, sizeof(head),
			    "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
			    n);
			memcpy(in, head, (size_t)hl);
			memcpy(in + hl, body, n);
			gcs_h1_init(p, &r);
			assert_int_equal(feed_steps(p, in, (size_t)hl + n,
			                     steps[s], &total),
			    GCS_H1_DONE);
			assert_int_equal(total, (size_t)hl + n);
			assert_int_equal(r.status, 200);
			assert_int_equal(p->keep_alive, 1);
			if (n > GCS_RESP_MAX)
				check_cut(&r, body);
			else {
				assert_int_equal(r.too_big, 0);
				assert_int_equal(r.len, n);
				assert_memory_equal(r.body, body, n);
			}
			gcs_resp_clear(&r);
		}

		/* chunked, 4000-byte chunks */
		hl = snprintf(head, sizeof(head),
		    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
		memcpy(in, head, (size_t)hl);
		n = (size_t)hl;
		for (at = 0; at < big; at += k) {
			k = big - at < 4000 ? big - at : 4000;
			n += (size_t)snprintf(in + n, 16, "%zx\r\n", k);
			memcpy(in + n, body + at, k);
			n += k;
			memcpy(in + n, "\r\n", 2);
			n += 2;
		}
		memcpy(in + n, "0\r\n\r\n", 5);
		n += 5;
		assert_true(n <= 2 * big);
		gcs_h1_init(p, &r);
		assert_int_equal(feed_steps(p, in, n, steps[s], &total),
		    GCS_H1_DONE);
		assert_int_equal(total, n);
		assert_int_equal(r.status, 200);
		check_cut(&r, body);
		gcs_resp_clear(&r);

		/* delimited by the close */
		hl = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\n\r\n");
		memcpy(in, head, (size_t)hl);
		memcpy(in + hl, body, big);
		gcs_h1_init(p, &r);
		assert_int_equal(feed_steps(p, in, (size_t)hl + big, steps[s],
		                     &total),
		    GCS_H1_MORE);
		assert_int_equal(gcs_h1_eof(p), GCS_H1_DONE);
		check_cut(&r, body);
		gcs_resp_clear(&r);
	}
	free(p);
	free(in);
	free(body);
}

/* The LEN bytes at GOT are the WANT_LEN bytes at WANT. */
static void
same(const char *got, size_t len, const char *want, size_t want_len)
{
	if (len != want_len || memcmp(got, want, len) != 0)
		fail_msg("wrote %zu bytes:\n%.*s\nwant %zu:\n%.*s", len,
		    (int)len, got, want_len, (int)want_len, want);
}

#define SAME(got, len, lit) same((got), (len), (lit), sizeof(lit) - 1)

/* The request's exact bytes: request line, Host, Accept, the caller's
 * headers in order without the "Name:" ones, a Content-Length when the
 * method or a body calls for one, and the body whole. */
static void
test_request(void **state)
{
	static char auth[] = "Authorization: Bearer x",
	            expect[] = "Expect:", ct[] = "Content-Type: a/b",
	            blank[] = "X-Gone: \t";
	struct curl_slist h3 = { ct, NULL }, h2 = { expect, &h3 },
	                  h1 = { auth, &h2 }, hb = { blank, &h3 },
	                  ha = { auth, NULL };
	char *out = NULL;
	size_t cap = 0, len = 99;

	(void)state;
	/* (a) GET, no headers */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "GET", "/p?q=1",
	                     "h:1", NULL, NULL, 0),
	    0);
	SAME(out, len,
	    "GET /p?q=1 HTTP/1.1\r\nHost: h:1\r\nAccept: */*\r\n\r\n");

	/* (b) POST with a body; "Expect:" is left out */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "POST",
	                     "/upload/storage/v1/b/k/o?uploadType=media",
	                     "storage.googleapis.com", &h1, "{\"a\":1}", 7),
	    0);
	SAME(out, len,
	    "POST /upload/storage/v1/b/k/o?uploadType=media HTTP/1.1\r\n"
	    "Host: storage.googleapis.com\r\nAccept: */*\r\n"
	    "Authorization: Bearer x\r\nContent-Type: a/b\r\n"
	    "Content-Length: 7\r\n\r\n{\"a\":1}");

	/* a "Name:" with only whitespace after it is left out too */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "POST", "/", "h", &hb,
	                     "x", 1),
	    0);
	SAME(out, len,
	    "POST / HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n"
	    "Content-Type: a/b\r\nContent-Length: 1\r\n\r\nx");

	/* (c) DELETE without a body: no Content-Length */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "DELETE",
	                     "/storage/v1/b/k/o/l?ifGenerationMatch=5", "h:1",
	                     &ha, NULL, 0),
	    0);
	SAME(out, len,
	    "DELETE /storage/v1/b/k/o/l?ifGenerationMatch=5 HTTP/1.1\r\n"
	    "Host: h:1\r\nAccept: */*\r\nAuthorization: Bearer x\r\n\r\n");

	/* (d) PATCH with a body */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "PATCH", "/o", "h:1",
	                     &h1, "{\"metadata\":{}}", 15),
	    0);
	SAME(out, len,
	    "PATCH /o HTTP/1.1\r\nHost: h:1\r\nAccept: */*\r\n"
	    "Authorization: Bearer x\r\nContent-Type: a/b\r\n"
	    "Content-Length: 15\r\n\r\n{\"metadata\":{}}");

	/* (e) POST, PATCH and PUT without a body: Content-Length: 0 */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "POST", "/t", "h:1",
	                     NULL, NULL, 0),
	    0);
	SAME(out, len,
	    "POST /t HTTP/1.1\r\nHost: h:1\r\nAccept: */*\r\n"
	    "Content-Length: 0\r\n\r\n");
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "PATCH", "/t", "h:1",
	                     NULL, NULL, 0),
	    0);
	SAME(out, len,
	    "PATCH /t HTTP/1.1\r\nHost: h:1\r\nAccept: */*\r\n"
	    "Content-Length: 0\r\n\r\n");
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "PUT", "/t", "h:1",
	                     NULL, NULL, 0),
	    0);
	SAME(out, len,
	    "PUT /t HTTP/1.1\r\nHost: h:1\r\nAccept: */*\r\n"
	    "Content-Length: 0\r\n\r\n");

	/* another method with a body gets a Content-Length as well */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "DELETE", "/t", "h:1",
	                     NULL, "{}", 2),
	    0);
	SAME(out, len,
	    "DELETE /t HTTP/1.1\r\nHost: h:1\r\nAccept: */*\r\n"
	    "Content-Length: 2\r\n\r\n{}");

	/* a body with NUL bytes is copied whole */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "POST", "/n", "h",
	                     NULL, "a\0b\0c", 5),
	    0);
	SAME(out, len,
	    "POST /n HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n"
	    "Content-Length: 5\r\n\r\na\0b\0c");
	free(out);
}

/* A header line holding CR or LF (a header injected into the request)
 * fails the request. */
static void
test_request_crlf(void **state)
{
	static char inj[] = "X-A: a\r\nX-Injected: 1", lf[] = "X-A: a\nb",
	            cr[] = "X-A: a\rb", ok[] = "X-B: fine";
	struct curl_slist hi = { inj, NULL }, hl = { lf, NULL },
	                  hc = { cr, NULL }, tail = { inj, NULL },
	                  head = { ok, &tail };
	char *out = NULL;
	size_t cap = 0, len = 0;

	(void)state;
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "GET", "/", "h", &hi,
	                     NULL, 0),
	    -1);
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "GET", "/", "h", &hl,
	                     NULL, 0),
	    -1);
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "POST", "/", "h", &hc,
	                     "x", 1),
	    -1);
	/* not only as the first header */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "GET", "/", "h",
	                     &head, NULL, 0),
	    -1);
	/* the buffer is still the caller's, and still usable */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "GET", "/", "h", NULL,
	                     NULL, 0),
	    0);
	SAME(out, len, "GET / HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n");
	free(out);
}

/* The output buffer starts as NULL/0, grows to fit a large request, and
 * is reused by the next: each result exact, nothing left of the last. */
static void
test_request_buffer(void **state)
{
	size_t big = 100000, cap = 0, len = 0, cap1, hl;
	char *body = pattern(big), *out = NULL, *want = malloc(big + 256),
	     *keep;
	int n;

	(void)state;
	assert_non_null(want);
	/* small first, from nothing */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "GET", "/a", "h",
	                     NULL, NULL, 0),
	    0);
	assert_non_null(out);
	assert_true(cap >= len);
	SAME(out, len, "GET /a HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n");

	/* then large: it grows */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "POST", "/b", "h",
	                     NULL, body, big),
	    0);
	n = snprintf(want, 256,
	    "POST /b HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n"
	    "Content-Length: %zu\r\n\r\n",
	    big);
	hl = (size_t)n;
	memcpy(want + hl, body, big);
	assert_true(cap >= len);
	same(out, len, want, hl + big);

	/* then small again, in the same buffer */
	cap1 = cap;
	keep = out;
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "DELETE", "/c", "h",
	                     NULL, NULL, 0),
	    0);
	SAME(out, len, "DELETE /c HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n");
	assert_ptr_equal(out, keep);
	assert_int_equal(cap, cap1);

	/* and the same call twice gives the same bytes */
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "DELETE", "/c", "h",
	                     NULL, NULL, 0),
	    0);
	SAME(out, len, "DELETE /c HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n");
	free(out);

	/* large first, from nothing, with a long target */
	out = NULL;
	cap = 0;
	memset(want, '/', 5000);
	want[5000] = '\0';
	assert_int_equal(gcs_h1_request(&out, &cap, &len, "GET", want, "h",
	                     NULL, NULL, 0),
	    0);
	assert_int_equal(len,
	    5000 +
	        strlen("GET  HTTP/1.1\r\nHost: h\r\n"
	               "Accept: */*\r\n\r\n"));
	assert_memory_equal(out, "GET //", 6);
	assert_memory_equal(out + 4 + 5000, " HTTP/1.1\r\n", 11);
	free(out);
	free(want);
	free(body);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_framed),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_closed),
		cmocka_unit_test(test_eof),
		cmocka_unit_test(test_bytes_after),
		cmocka_unit_test(test_interim_limit),
		cmocka_unit_test(test_head_max),
		cmocka_unit_test(test_line_max),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_request_crlf),
		cmocka_unit_test(test_request_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
