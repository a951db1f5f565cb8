/*
 * gcs_h1.h: HTTP/1.1 on a connection libcurl made (internal to gcs/).
 *
 * libcurl connects (name resolution, TCP, TLS with certificate checks)
 * and keeps the connection; lockgate writes each request and reads each
 * answer itself.  libcurl 7.88's own HTTP engine spends more CPU on a
 * small storage request than the whole rest of a lock operation (its URL
 * parser, request printf, header store and connection-cache walk run for
 * every request; docs/bench.md), and nothing in it can be switched off.
 *
 * The answer parser is strict, as a client should be with a server it
 * writes locks to: anything it cannot frame exactly (a header block over
 * GCS_H1_HEAD_MAX, a Content-Length that is not digits or disagrees with
 * another, a Transfer-Encoding other than chunked, both framings at once,
 * folded header lines, a chunk size that is not hex) ends the answer as
 * malformed, and the connection is not used again.
 */
#ifndef LOCKGATE_GCS_H1_H
#define LOCKGATE_GCS_H1_H

#include <stddef.h>
#include <stdint.h>

#include "gcs_http.h"

#define GCS_H1_HEAD_MAX 16384 /* bytes of status line + headers */
#define GCS_H1_LINE_MAX 8192  /* bytes of one header or chunk-size line */
#define GCS_H1_INTERIM  4     /* 1xx answers skipped before the real one */

/* What gcs_h1_feed and gcs_h1_eof say. */
enum {
	GCS_H1_MORE = 0, /* the answer goes on: feed more */
	GCS_H1_DONE = 1, /* the answer is complete */
	GCS_H1_BAD = -1  /* not an HTTP/1.x answer we can frame */
};

/* The parse of one answer, into a gcs_resp (status, body, date_ms,
 * metadata_flavor, too_big).  Fields below RESP are the parser's own. */
typedef struct gcs_h1 {
	gcs_resp *resp; /* borrowed; the body in it is owned by the resp */
	int state;
	int keep_alive; /* the connection may carry another request */
	int seen;       /* bytes of the answer arrived (any) */
	int interim;    /* 1xx answers skipped */
	int chunked;    /* Transfer-Encoding: chunked */
	int64_t clen;   /* Content-Length, -1 when none */
	uint64_t left;  /* bytes of body or of the chunk still to come */
	size_t head;    /* bytes of the header block so far */
	size_t llen;    /* bytes in LINE */
	char line[GCS_H1_LINE_MAX];
} gcs_h1;

/* Start parsing an answer into RESP (cleared first). */
void gcs_h1_init(gcs_h1 *p, gcs_resp *resp);

/* Take the N bytes at BUF.  *USED is set to how many belong to this
 * answer (all of them with GCS_H1_MORE).  GCS_H1_DONE: the answer is
 * complete (bytes past *USED are not ours: the connection must not be
 * reused); GCS_H1_BAD: malformed (RESP->status may be set; do not trust
 * it).  Out of memory for the body is GCS_H1_BAD too. */
int gcs_h1_feed(gcs_h1 *p, const char *buf, size_t n, size_t *used);

/* The peer closed the connection: GCS_H1_DONE when that ends the answer
 * (a body delimited by the close), else GCS_H1_BAD (cut off). */
int gcs_h1_eof(gcs_h1 *p);

/* Write the request METHOD TARGET to HOST (the authority of the URL)
 * with the header lines of HDRS ("Name: value"; a "Name:" with nothing
 * after it, libcurl's way of removing a header, is left out) and BODY
 * (BODY_LEN bytes; a Content-Length is written for any POST, PATCH or
 * PUT, and for any other method that has a body) into *OUT (grown with
 * realloc; *CAP its size), setting *LEN.  0, or -1 when out of memory or
 * when a header line holds CR or LF. */
int gcs_h1_request(char **out, size_t *cap, size_t *len, const char *method,
    const char *target, const char *host, const struct curl_slist *hdrs,
    const char *body, size_t body_len);

#endif
