/*
 * gcs_http.h: the libcurl plumbing shared by the Cloud Storage client
 * (gcs_client.c) and its token sources (gcs_token.c).  Internal to gcs/.
 */
#ifndef LOCKGATE_GCS_HTTP_H
#define LOCKGATE_GCS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#define GCS_RESP_MAX           (1 << 20) /* bytes of a response body we keep */
#define GCS_CONNECT_TIMEOUT_MS 3000      /* TCP (+TLS) connect of one try */
#define GCS_DATE_MAX           128       /* bytes of a Date header we look at */
/* The last second a Date may name, 9999-12-31T23:59:59Z: the largest an
 * IMF-fixdate can write.  A later one (an obsolete form with a far-future
 * year) is no time: in milliseconds it could overflow an int64. */
#define GCS_DATE_LAST_S        253402300799LL
#define GCS_ORIGIN_MAX         576 /* bytes of the scheme://authority of a URL */
/* libcurl's receive buffer for one transfer.  libcurl 7.88 allocates it
 * at the start of every transfer and frees it at the end.  At its default
 * 16 KiB that allocation is a large one for glibc, which then consolidates
 * its fast bins every time; at 1 KiB it comes from glibc's per-thread
 * cache.  Object answers (fields= keeps them to a few hundred bytes) take
 * the small one; a list page, which may be hundreds of KiB, the large one,
 * so it is not read 1 KiB per recv. */
#define GCS_HTTP_BUF_SMALL     1024L
#define GCS_HTTP_BUF_LARGE     16384L

/* A response: status 0 means no HTTP answer (transport error). */
typedef struct gcs_resp {
	long status;
	char *body; /* owned, NUL-terminated, NULL when empty */
	size_t len;
	int64_t date_ms; /* the Date header in ms since the epoch, 0 if none */
	int metadata_flavor; /* "Metadata-Flavor: Google" was among the
				headers (the metadata server's mark) */
	int too_big;         /* the body passed GCS_RESP_MAX and was cut */
	int sends;           /* times the request may have gone out, counted by
			     libcurl's pre-request callback: 0 when it never
			     left (no connection), 2 when libcurl silently
			     sent it again on a new connection because a
			     reused one died before answering (so a write may
			     have been applied although we tried once) */
} gcs_resp;

/* A keep-alive HTTP client: one libcurl easy handle whose constant
 * options (no signals, protocols, no redirects, TCP keep-alive, callbacks,
 * error buffer) are set once; libcurl's HTTP engine does each transfer, on
 * the storage thread's connections (gcs_multi_perform).  Used by one
 * caller at a time.  gcs_http_new: NULL on allocation failure; free with
 * gcs_http_free. */
typedef struct gcs_http gcs_http;
gcs_http *gcs_http_new(void);
void gcs_http_free(gcs_http *c);
/* The receive buffer (GCS_HTTP_BUF_SMALL or _LARGE) of C's next transfers;
 * a new handle has the small one. */
void gcs_http_set_buffer(gcs_http *c, long bytes);

/* Perform one transfer on C; only the options of this request are set.
 * METHOD is "GET", "POST", "PATCH" or "DELETE"; BODY (borrowed, may be
 * NULL) is sent as is; HDRS is borrowed and only read during the call (its
 * nodes may live on the caller's stack).  The whole transfer is bounded by
 * TIMEOUT_MS (>= 1).  Fills *resp (cleared first; caller frees with
 * gcs_resp_clear).  Returns 0 when an HTTP answer arrived, -1 on a transport
 * error with a short description in ERRBUF (ERRLEN bytes). */
int gcs_http_perform(gcs_http *c, const char *method, const char *url,
    struct curl_slist *hdrs, const char *body, size_t body_len, long timeout_ms,
    gcs_resp *resp, char *errbuf, size_t errlen);
void gcs_resp_clear(gcs_resp *r);

/* Initialise libcurl once per process (thread-safe). */
void gcs_curl_global_init(void);
/* Parse an RFC 3339 UTC time ("2019-04-02T14:16:31.530Z", offsets allowed)
 * into ms since the epoch.  -1 when malformed. */
int64_t gcs_parse_rfc3339(const char *s);
/* Parse exactly N bytes at S as an IMF-fixdate (RFC 9110 5.6.7:
 * "Sun, 06 Nov 1994 08:49:37 GMT", the form every HTTP/1.1 server sends)
 * into ms since the epoch.  Strict: case-sensitive names, the weekday must
 * match the date, no other whitespace.  -1 when S is anything else or
 * before 1970-01-01T00:00:01Z. */
int64_t gcs_parse_imf_fixdate(const char *s, size_t n);
/* The value of a Date header (N bytes at S, surrounding whitespace and CRLF
 * allowed) in ms since the epoch: an IMF-fixdate by the strict parser, any
 * other form (RFC 850, asctime) by curl_getdate.  -1 when neither parses,
 * when N > GCS_DATE_MAX or when the time is not after the epoch or after
 * GCS_DATE_LAST_S. */
int64_t gcs_parse_http_date(const char *s, size_t n);

#endif
