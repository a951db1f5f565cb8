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

/* A response: status 0 means no HTTP answer (transport error). */
typedef struct gcs_resp {
	long status;
	char *body; /* owned, NUL-terminated, NULL when empty */
	size_t len;
	int64_t date_ms; /* the Date header in ms since the epoch, 0 if none */
	int too_big;     /* the body passed GCS_RESP_MAX and was cut */
	int sends;       /* times the request may have gone out: libcurl
			     silently resends once when a reused connection
			     dies before answering, so a write may have been
			     applied although we tried once.  2 when a
			     transfer meant to reuse a connection opened a
			     new one (at worst an over-count: safe) */
	int kept;        /* the connection stayed open for the next one */
} gcs_resp;

/* Perform one transfer on H (reset first; its connections are kept).
 * REUSE says H kept a connection from its last transfer (resp->kept).
 * METHOD is "GET", "POST", "PATCH" or "DELETE"; BODY (borrowed, may be NULL)
 * is sent as is; HDRS is borrowed.  The whole transfer is bounded by
 * TIMEOUT_MS (>= 1).  Fills *resp (cleared first; caller frees with
 * gcs_resp_clear).  Returns 0 when an HTTP answer arrived, -1 on a transport
 * error with a short description in ERRBUF (ERRLEN bytes). */
int gcs_http_perform(CURL *h, int reuse, const char *method, const char *url,
    struct curl_slist *hdrs, const char *body, size_t body_len, long timeout_ms,
    gcs_resp *resp, char *errbuf, size_t errlen);
void gcs_resp_clear(gcs_resp *r);

/* Monotonic milliseconds, for deadlines. */
int64_t gcs_mono_ms(void);
/* Overwrite N bytes at P so the compiler cannot drop it (secrets). */
void gcs_wipe(void *p, size_t n);
/* Initialise libcurl once per process (thread-safe). */
void gcs_curl_global_init(void);
/* Parse an RFC 3339 UTC time ("2019-04-02T14:16:31.530Z", offsets allowed)
 * into ms since the epoch.  -1 when malformed. */
int64_t gcs_parse_rfc3339(const char *s);

#endif
