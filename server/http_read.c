/*
 * http_read.c: reading a request's head before it is served: framing
 * that would make it ambiguous, header fields, the head's size, a
 * declared body over the cap; the handler's first call (http_req_begin).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_int.h"
#include "events.h"
#include "format_env.h"
#include "metrics.h"
#include "util/clock.h"

/* Headers that make a request ambiguous, counted by framing_seen. */
typedef struct framing {
	unsigned authorization, content_length, transfer_encoding, host;
	const char *te; /* the first Transfer-Encoding value */
} framing;

static enum MHD_Result
framing_seen(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	framing *f = cls;

	(void)kind;
	if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
		f->authorization++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
		f->host++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
		f->content_length++;
	else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0 &&
	    f->transfer_encoding++ == 0)
		f->te = value;
	return MHD_YES;
}

/*
 * Refuse, before its body is read, a request that two parties could read
 * two ways: one smuggled behind another through a proxy that frames it
 * differently, or two tokens, or two hosts, of which each reader picks
 * another.  A body is framed by one Content-Length or by
 * "Transfer-Encoding: chunked" alone (libmicrohttpd 0.9.75 waited for the
 * idle timeout on any other coding), and an HTTP/1.0 request has no
 * Transfer-Encoding (RFC 9112, section 6.1: a proxy of 1.0 does not know
 * it).  An HTTP/1.1 request carries one Host (section 3.2).  An early
 * answer makes libmicrohttpd close the connection after it, so nothing
 * behind it is read as a request.  NULL when fine.
 */
static const char *
framing_refusal(struct MHD_Connection *conn, const char *version,
    const char **reason)
{
	bool http11 = strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
	framing f;

	memset(&f, 0, sizeof(f));
	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_seen, &f);
	*reason = "bad_framing";
	if (f.transfer_encoding > 1 || f.content_length > 1)
		return "a request carries at most one Content-Length and one "
		       "Transfer-Encoding header";
	if (f.transfer_encoding > 0 && f.content_length > 0)
		return "a request carries Content-Length or Transfer-Encoding, "
		       "not both";
	if (f.te != NULL && strcasecmp(f.te, "chunked") != 0)
		return "the only Transfer-Encoding accepted is chunked";
	if (f.te != NULL && !http11)
		return "an HTTP/1.0 request carries no Transfer-Encoding";
	*reason = "duplicate_header";
	if (f.authorization > 1)
		return "a request carries at most one Authorization header";
	if (f.host > 1)
		return "a request carries at most one Host header";
	*reason = "bad_request";
	if (f.host == 0 && http11)
		return "an HTTP/1.1 request carries a Host header";
	return NULL;
}

/* Whether NAME (LEN bytes) is a token (RFC 9110, section 5.6.2), as a
 * method and a header name are: no whitespace in it (nor, for a header,
 * before its colon), no control byte, no separator. */
static bool
is_token(const char *name, size_t len)
{
	size_t i;
	int c;

	if (len == 0)
		return false;
	for (i = 0; i < len; i++) {
		c = (unsigned char)name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') ||
		        (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL)))
			return false;
	}
	return true;
}

/* Whether VALUE (LEN bytes) holds no control character but a tab
 * (RFC 9110, section 5.5: a bare CR is one). */
static bool
field_value_ok(const char *value, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (((unsigned char)value[i] < 0x20 && value[i] != '\t') ||
		    value[i] == 0x7f)
			return false;
	return true;
}

static enum MHD_Result
field_seen(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	const char **why = cls;

	(void)kind;
	if (!is_token(key, strlen(key)))
		*why = "a header name is a token, with no whitespace in it or "
		       "before its colon (RFC 9112, section 5.1)";
	else if (!field_value_ok(value, strlen(value)))
		*why = "a header value holds a control character";
	return *why == NULL ? MHD_YES : MHD_NO;
}

#if MHD_VERSION < 0x01000000
/* Walks the headers in the order they came, for head_cut. */
typedef struct head_walk {
	uintptr_t end; /* just past the last string libmicrohttpd kept */
	bool cut;      /* a line held more than it kept */
} head_walk;

/* Whether a line ending at END is followed by one starting at NEXT, with
 * just its CRLF or LF between. */
static bool
line_break_only(uintptr_t end, uintptr_t next)
{
	return next == end + 1 || next == end + 2;
}

static enum MHD_Result
field_tiles(void *cls, enum MHD_ValueKind kind, const char *key,
    size_t key_size, const char *value, size_t value_size)
{
	head_walk *w = cls;

	(void)kind;
	(void)key_size;
	if (!line_break_only(w->end, (uintptr_t)key)) {
		w->cut = true;
		return MHD_NO;
	}
	w->end = (uintptr_t)value + value_size;
	return MHD_YES;
}

/*
 * Whether libmicrohttpd cut a line of CONN's head at a raw NUL byte.
 * 0.9.x parses the head in place as C strings: a NUL ends the method, the
 * target or a header value there, and the rest of that line is dropped
 * unseen ("Transfer-Encoding: chunked\0gzip" was read as chunked, a path
 * "/v1/locks/prod/a\0zz" as prod/a).  No API gives the lengths received,
 * but what it kept tiles the head it measured
 * (MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE) with only separators between:
 *   METHOD SP TARGET SP VERSION EOL, then NAME ":" OWS VALUE EOL for each
 *   header, then EOL,
 * EOL being CRLF or LF, and the target as http_uri_seen saw it (T).  A wider
 * gap is a line cut short.  (libmicrohttpd 1.0 rewrote this parser and
 * refuses a NUL itself.)
 */
static bool
head_cut(struct MHD_Connection *conn, const srv_target *t, const char *method,
    const char *url, const char *version)
{
	const union MHD_ConnectionInfo *ci;
	head_walk w = { 0, false };
	uintptr_t head_end;

	if ((uintptr_t)url != (uintptr_t)method + strlen(method) + 1 ||
	    (uintptr_t)version != (uintptr_t)url + t->len + 1)
		return true;
	w.end = (uintptr_t)version + strlen(version);
	MHD_get_connection_values_n(conn, MHD_HEADER_KIND, field_tiles, &w);
	ci = MHD_get_connection_info(conn,
	    MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	if (w.cut || ci == NULL)
		return true;
	head_end = (uintptr_t)method + ci->header_size;
	return head_end < w.end + 2 || head_end > w.end + 4;
}
#else
static bool
head_cut(struct MHD_Connection *conn, const srv_target *t, const char *method,
    const char *url, const char *version)
{
	(void)conn, (void)t, (void)method, (void)url, (void)version;
	return false;
}
#endif

/*
 * Refuse a request head that libmicrohttpd read otherwise than a proxy in
 * front may have: a raw NUL byte anywhere (head_cut), a header name with
 * whitespace before its colon (0.9.75 keeps the space in the name, so
 * "Transfer-Encoding : chunked" was no Transfer-Encoding to
 * framing_refusal, and the body became a smuggled request), a control
 * character in a value, or a method that is no token.  NULL when the head
 * is fine.
 */
static const char *
head_refusal(struct MHD_Connection *conn, const srv_target *t,
    const char *method, const char *url, const char *version)
{
	const char *why = NULL;

	if (head_cut(conn, t, method, url, version))
		return "the request holds a NUL byte, or more than one space "
		       "between the parts of its first line";
	if (!is_token(method, strlen(method)))
		return "a request method is a token (RFC 9110, section 9.1)";
	MHD_get_connection_values(conn, MHD_HEADER_KIND, field_seen, &why);
	return why;
}

/* Refuse R's request with a 400 and close the connection: what follows
 * its head on the connection is not read as a request. */
enum MHD_Result
http_refuse(srv_req *r, const char *reason, const char *why)
{
	r->close = true;
	return http_fail(r, API_BAD_REQUEST, reason, "%s", why);
}

/* Whether CONN announces a body over SRV_BODY_MAX. */
static bool
body_too_large(struct MHD_Connection *conn)
{
	const char *cl;
	char *end;
	unsigned long long n;

	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl == NULL)
		return false;
	errno = 0;
	n = strtoull(cl, &end, 10);
	return errno == 0 && *end == '\0' && n > SRV_BODY_MAX;
}

/*
 * The first call of the handler for R, once its head is in: refuse what
 * cannot be read one way, before any of its body is read.  T is what
 * http_uri_seen saw of its target.  MHD_YES to go on reading.
 */
enum MHD_Result
http_req_begin(srv_req *r, const srv_target *t, const char *method,
    const char *url, const char *version)
{
	const char *why, *reason;

	if (t->many_args) {
		r->close = true;
		return http_fail(r, API_BAD_REQUEST, "too_many_parameters",
		    "a request takes at most %d query parameters",
		    SRV_QUERY_ARGS_MAX);
	}
	if ((why = head_refusal(r->conn, t, method, url, version)) != NULL)
		return http_refuse(r, "bad_request", why);
	if (t->path_too_long)
		return http_refuse(r, "bad_request",
		    "the request path is longer than any route");
	if (t->encoded_nul)
		return http_refuse(r, "bad_request",
		    "the request target holds an encoded NUL (%00)");
	if (t->space_or_ctl)
		return http_refuse(r, "bad_request",
		    "the request target holds a space or a control character");
	if (t->odd_target)
		return http_refuse(r, "bad_request",
		    "the request target is neither a path nor an http(s) URL "
		    "of a host and port (a '#' or '\\' in it, or userinfo)");
	if ((why = framing_refusal(r->conn, version, &reason)) != NULL)
		return http_refuse(r, reason, why);
	if (body_too_large(r->conn)) {
		/* Refuse before reading it; MHD closes the connection after
		 * this answer. */
		r->too_large = true;
		return http_fail(r, API_TOO_LARGE, NULL,
		    "the request body is larger than %d bytes", SRV_BODY_MAX);
	}
	return MHD_YES;
}
