/*
 * gcs_http.c: one HTTP transfer over a reusable handle, with the response
 * body, status and Date header collected; time helpers.  A transfer goes
 * through libcurl's HTTP engine, on the storage thread's multi handle
 * (gcs_multi_perform).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gcs_client.h"
#include "gcs_http.h"
#include "gcs_multi.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

void
gcs_curl_global_init(void)
{
	pthread_once(&curl_once, curl_init_once);
}

struct gcs_http {
	CURL *h;
	gcs_resp *resp; /* the answer being received, during a transfer */
	int prereqs;    /* times this transfer was about to send its request */
	int head_done;  /* the last answer's header block was ended */
	int http_proxy; /* a proxy from the environment may carry http:// */
	long pipewait;  /* CURLOPT_PIPEWAIT as set on the handle */
	long buf;       /* the receive buffer set on the handle */
	char origin[GCS_ORIGIN_MAX]; /* scheme://authority of the request */
	char cerr[CURL_ERROR_SIZE];
};

void
gcs_resp_clear(gcs_resp *r)
{
	if (r == NULL)
		return;
	free(r->body);
	memset(r, 0, sizeof(*r));
}

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
	gcs_resp *r = ((gcs_http *)ud)->resp;
	size_t n = size * nmemb;
	char *nb;

	if (r->too_big || r->len + n > GCS_RESP_MAX) {
		r->too_big = 1;
		return n; /* drain; the caller treats it as a bad answer */
	}
	nb = realloc(r->body, r->len + n + 1);
	if (nb == NULL)
		return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
	memcpy(nb + r->len, ptr, n);
	r->body = nb;
	r->len += n;
	r->body[r->len] = '\0';
	return n;
}

/* The value of header line BUF (N bytes, its CRLF included) when it is
 * header NAME (given with its colon), spaces and the line end trimmed,
 * its length in *VLEN; NULL otherwise.  Most lines are dismissed at their
 * first byte. */
static const char *
header_value(const char *buf, size_t n, const char *name, size_t *vlen)
{
	size_t k = strlen(name), i, e = n;

	if (n <= k || (buf[0] | 0x20) != (name[0] | 0x20) ||
	    strncasecmp(buf, name, k) != 0)
		return NULL;
	for (i = k; i < e && (buf[i] == ' ' || buf[i] == '\t'); i++)
		;
	while (e > i &&
	    (buf[e - 1] == '\r' || buf[e - 1] == '\n' || buf[e - 1] == ' ' ||
	        buf[e - 1] == '\t'))
		e--;
	*vlen = e - i;
	return buf + i;
}

/* Called once per header line: only Date (and the metadata server's
 * Metadata-Flavor) matters. */
static size_t
on_header(char *buf, size_t size, size_t nitems, void *ud)
{
	gcs_http *c = ud;
	gcs_resp *r = c->resp;
	size_t n = size * nitems, vlen;
	const char *v;
	int64_t t;

	/* The empty line that ends a header block, or the status line that
	 * starts another (after a 1xx, or on a resend). */
	if ((n == 2 && buf[0] == '\r' && buf[1] == '\n') ||
	    (n == 1 && buf[0] == '\n'))
		c->head_done = 1;
	else if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0)
		c->head_done = 0;
	if ((v = header_value(buf, n, "Date:", &vlen)) != NULL) {
		t = gcs_parse_http_date(v, vlen);
		if (t > 0)
			r->date_ms = t;
	} else if ((v = header_value(buf, n, "Metadata-Flavor:", &vlen)) !=
	    NULL)
		r->metadata_flavor = vlen == 6 && strncmp(v, "Google", 6) == 0;
	return n;
}

/* The proxies libcurl would take from the environment: it reads
 * http_proxy, https_proxy or HTTPS_PROXY, all_proxy or ALL_PROXY (never
 * HTTP_PROXY), empty meaning unset. */
#define PROXY_HTTP 1 /* one may carry http:// requests */
#define PROXY_ANY  2 /* one may carry some request */

static int
proxy_env(void)
{
	static const struct {
		const char *name;
		int kind;
	} vars[] = {
		{ "http_proxy", PROXY_HTTP | PROXY_ANY },
		{ "all_proxy", PROXY_HTTP | PROXY_ANY },
		{ "ALL_PROXY", PROXY_HTTP | PROXY_ANY },
		{ "https_proxy", PROXY_ANY },
		{ "HTTPS_PROXY", PROXY_ANY },
	};
	const char *v;
	size_t i;
	int kind = 0;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		v = getenv(vars[i].name);
		if (v != NULL && v[0] != '\0')
			kind |= vars[i].kind;
	}
	return kind;
}

/* libcurl is about to send the request: once per transfer, and once more
 * for each silent resend (a reused connection that died before answering
 * makes libcurl send again on a new one). */
static int
on_prereq(void *ud, char *remote_ip, char *local_ip, int remote_port,
    int local_port)
{
	gcs_http *c = ud;

	(void)remote_ip;
	(void)local_ip;
	(void)remote_port;
	(void)local_port;
	c->prereqs++;
	return CURL_PREREQFUNC_OK;
}

/* The configured certificates to trust for https instead of the
 * system's (a private endpoint; tests); NULL when unset. */
static const char *
ca_file(void)
{
	const char *f = gcs_settings_get()->ca_file;

	return f != NULL && f[0] != '\0' ? f : NULL;
}

gcs_http *
gcs_http_new(void)
{
	gcs_http *c = calloc(1, sizeof(*c));
	CURL *h;
	int proxy;

	if (c == NULL)
		return NULL;
	h = c->h = curl_easy_init();
	if (h == NULL)
		goto fail;
	proxy = proxy_env();
	c->http_proxy = (proxy & PROXY_HTTP) != 0;
	/* Without a proxy in the environment, say so once: libcurl would
	 * otherwise look it up (five getenv and a printf) every transfer. */
	if (!(proxy & PROXY_ANY) &&
	    (curl_easy_setopt(h, CURLOPT_PROXY, "") != CURLE_OK ||
	        curl_easy_setopt(h, CURLOPT_NOPROXY, "") != CURLE_OK))
		goto fail;
	/* The options every transfer shares, set once: a transfer only sets
	 * what belongs to its request (gcs_http_perform). */
	if (curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") !=
	        CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, GCS_HTTP_BUF_SMALL) !=
	        CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->cerr) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEDATA, c) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header) !=
	        CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HEADERDATA, c) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, on_prereq) !=
	        CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_PREREQDATA, c) != CURLE_OK)
		goto fail;
	/* HTTP/2 where the endpoint offers it by ALPN (https; Cloud Storage
	 * does), HTTP/1.1 otherwise (see set_request for PIPEWAIT). */
	if (curl_easy_setopt(h, CURLOPT_HTTP_VERSION,
	        (long)CURL_HTTP_VERSION_2TLS) != CURLE_OK)
		goto fail;
	if (ca_file() != NULL &&
	    curl_easy_setopt(h, CURLOPT_CAINFO, ca_file()) != CURLE_OK)
		goto fail;
	c->buf = GCS_HTTP_BUF_SMALL;
	return c;
fail:
	gcs_http_free(c);
	return NULL;
}

void
gcs_http_set_buffer(gcs_http *c, long bytes)
{
	if (bytes != c->buf &&
	    curl_easy_setopt(c->h, CURLOPT_BUFFERSIZE, bytes) == CURLE_OK)
		c->buf = bytes;
}

void
gcs_http_free(gcs_http *c)
{
	if (c == NULL)
		return;
	if (c->h != NULL)
		curl_easy_cleanup(c->h);
	free(c);
}

/* The path and query of URL (borrowed from it), with the scheme and
 * authority before them copied into C->origin; NULL when URL has no path,
 * its origin does not fit, or a proxy would need the whole URL. */
static const char *
split_url(gcs_http *c, const char *url)
{
	const char *p = strstr(url, "://");
	size_t n;

	if (p == NULL || (c->http_proxy && strncmp(url, "https:", 6) != 0))
		return NULL;
	p = strchr(p + 3, '/');
	if (p == NULL || (size_t)(p - url) >= sizeof(c->origin))
		return NULL;
	n = (size_t)(p - url);
	memcpy(c->origin, url, n);
	c->origin[n] = '\0';
	return p;
}

/* The options of one request.  Everything a previous request set is
 * overwritten: the method (GET, POST with a body, or a custom one with or
 * without a body), the URL, the headers and the timeouts.
 *
 * The URL goes in two pieces: the origin as CURLOPT_URL and the path and
 * query as the request target.  libcurl 7.88 re-assembles a URL and
 * writes its query into the request line through its own printf, one
 * function call per byte; a request target is copied as is.  Our URLs are
 * already percent-encoded, so the request line is the same. */
static int
set_request(gcs_http *c, const char *method, const char *url,
    struct curl_slist *hdrs, const char *body, size_t body_len, long timeout_ms)
{
	CURL *h = c->h;
	const char *target = split_url(c, url);
	int get = strcmp(method, "GET") == 0;
	int post = !get && (body != NULL || strcmp(method, "DELETE") != 0);
	const char *custom = get || strcmp(method, "POST") == 0 ? NULL : method;
	long cto = timeout_ms < GCS_CONNECT_TIMEOUT_MS ? timeout_ms
	                                               : GCS_CONNECT_TIMEOUT_MS;

	/* PIPEWAIT for https: while the first connection to a host is
	 * being made, or its protocol is not yet known, a new transfer waits
	 * for it rather than opening another, so a burst of tasks shares one
	 * HTTP/2 connection (the multi handle multiplexes, gcs_multi.c).
	 * Not for http, which is HTTP/1.1 only here: a burst would wait a
	 * whole round trip for the first answer to say so. */
	long pipewait = strncmp(url, "https:", 6) == 0;

	if (pipewait != c->pipewait) {
		if (curl_easy_setopt(h, CURLOPT_PIPEWAIT, pipewait) != CURLE_OK)
			return -1;
		c->pipewait = pipewait;
	}
	if (curl_easy_setopt(h, CURLOPT_URL, target ? c->origin : url) !=
	        CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_REQUEST_TARGET, target) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, cto) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, custom) != CURLE_OK)
		return -1;
	if (!post)
		return curl_easy_setopt(h, CURLOPT_HTTPGET, 1L) == CURLE_OK
		    ? 0
		    : -1;
	/* POSTFIELDS first: it makes the request a POST (CUSTOMREQUEST
	 * renames it), then its size, so a body may hold NUL bytes. */
	if (curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "") !=
	        CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
	        (curl_off_t)body_len) != CURLE_OK)
		return -1;
	return 0;
}

int
gcs_http_perform(gcs_http *c, const char *method, const char *url,
    struct curl_slist *hdrs, const char *body, size_t body_len, long timeout_ms,
    gcs_resp *resp, char *errbuf, size_t errlen)
{
	CURL *h = c->h;
	CURLcode rc;

	memset(resp, 0, sizeof(*resp));
	c->resp = resp;
	c->prereqs = 0;
	c->head_done = 0;
	c->cerr[0] = '\0';
	if (set_request(c, method, url, hdrs, body, body_len,
	        timeout_ms < 1 ? 1L : timeout_ms) != 0) {
		snprintf(c->cerr, sizeof(c->cerr), "cannot set up the request");
		rc = CURLE_OUT_OF_MEMORY;
	} else
		rc = gcs_multi_perform(h);
	/* Nothing borrowed outlives the call: the next request sets its
	 * own body and headers. */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
	c->resp = NULL;
	/* libcurl 7.88 ends a transfer whose connection closes inside the
	 * answer's header block without an error, with the status of its
	 * first line: whether the request was applied is unknown. */
	if (rc == CURLE_OK && !c->head_done) {
		snprintf(c->cerr, sizeof(c->cerr),
		    "the answer ended inside its headers");
		rc = CURLE_RECV_ERROR;
	}
	if (rc != CURLE_OK) {
		snprintf(errbuf, errlen, "%s",
		    c->cerr[0] ? c->cerr : curl_easy_strerror(rc));
		gcs_resp_clear(resp);
		resp->sends = c->prereqs;
		return -1;
	}
	resp->sends = c->prereqs;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
	return 0;
}

static int
digits(const char **p, int n, int *out)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

static int
month_days(int y, int m)
{
	static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30,
		31 };

	if (m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))
		return 29;
	return days[m - 1];
}

/* Days from 1970-01-01 to Y-M-D (proleptic Gregorian, M 1..12): whole
 * 400-year eras of 146097 days, then years of 365 days plus the leap days,
 * counting the year from March so that February's leap day comes last. */
static int64_t
days_from_civil(int y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

int64_t
gcs_parse_rfc3339(const char *s)
{
	int y, mo, d, h, mi, sec, ms = 0, scale = 100, oh, om, sign;
	int64_t t;

	if (s == NULL)
		return -1;
	if (digits(&s, 4, &y) || *s++ != '-' || digits(&s, 2, &mo) ||
	    *s++ != '-' || digits(&s, 2, &d) || (*s != 'T' && *s != 't'))
		return -1;
	s++;
	if (digits(&s, 2, &h) || *s++ != ':' || digits(&s, 2, &mi) ||
	    *s++ != ':' || digits(&s, 2, &sec))
		return -1;
	if (*s == '.') {
		s++;
		if (*s < '0' || *s > '9')
			return -1;
		while (*s >= '0' && *s <= '9') {
			ms += (*s - '0') * scale;
			scale /= 10;
			s++;
		}
	}
	if (mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo) || h > 23 ||
	    mi > 59 || sec > 60)
		return -1;
	t = (((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 + sec) *
	        1000 +
	    ms;
	if (*s == 'Z' || *s == 'z')
		return s[1] == '\0' ? t : -1;
	if (*s != '+' && *s != '-')
		return -1;
	sign = *s++ == '-' ? -1 : 1;
	if (digits(&s, 2, &oh) || *s++ != ':' || digits(&s, 2, &om) ||
	    *s != '\0' || oh > 23 || om > 59)
		return -1;
	return t - sign * ((int64_t)oh * 3600 + om * 60) * 1000;
}

/* N decimal digits at S into *OUT; -1 when one is not a digit. */
static int
digits_at(const char *s, int n, int *out)
{
	return digits(&s, n, out);
}

/* Index of the 3-letter name at S in NAMES (COUNT names back to back),
 * -1 when absent. */
static int
name_index(const char *names, int count, const char *s)
{
	int i;

	for (i = 0; i < count; i++)
		if (memcmp(names + 3 * i, s, 3) == 0)
			return i;
	return -1;
}

int64_t
gcs_parse_imf_fixdate(const char *s, size_t n)
{
	static const char wdays[] = "SunMonTueWedThuFriSat";
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	int wd, d, mo, y, h, mi, sec;
	int64_t days, t;

	/* "Sun, 06 Nov 1994 08:49:37 GMT": fixed width, 29 bytes. */
	if (s == NULL || n != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' ||
	    s[11] != ' ' || s[16] != ' ' || s[19] != ':' || s[22] != ':' ||
	    s[25] != ' ' || memcmp(s + 26, "GMT", 3) != 0)
		return -1;
	wd = name_index(wdays, 7, s);
	mo = name_index(months, 12, s + 8) + 1;
	if (wd < 0 || mo < 1 || digits_at(s + 5, 2, &d) ||
	    digits_at(s + 12, 4, &y) || digits_at(s + 17, 2, &h) ||
	    digits_at(s + 20, 2, &mi) || digits_at(s + 23, 2, &sec))
		return -1;
	if (y < 1970 || d < 1 || d > month_days(y, mo) || h > 23 || mi > 59 ||
	    sec > 60)
		return -1;
	days = days_from_civil(y, mo, d);
	if ((days + 4) % 7 != wd) /* 1970-01-01 was a Thursday */
		return -1;
	t = ((days * 24 + h) * 60 + mi) * 60 + sec;
	return t > 0 ? t * 1000 : -1;
}

int64_t
gcs_parse_http_date(const char *s, size_t n)
{
	char buf[GCS_DATE_MAX + 1];
	int64_t t;
	time_t ct;

	if (s == NULL)
		return -1;
	while (n > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n > 0 &&
	    (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
	        s[n - 1] == '\n'))
		n--;
	if (n == 0 || n > GCS_DATE_MAX)
		return -1;
	t = gcs_parse_imf_fixdate(s, n);
	if (t > 0)
		return t;
	/* The obsolete forms HTTP/1.1 still allows a server to send. */
	memcpy(buf, s, n);
	buf[n] = '\0';
	ct = curl_getdate(buf, NULL);
	return ct > 0 && ct <= GCS_DATE_LAST_S ? (int64_t)ct * 1000 : -1;
}

/* ---- picking members out of a JSON answer ---- */

typedef struct jscan {
	const char *p, *end;
	int depth;
} jscan;

static void
jws(jscan *s)
{
	while (s->p < s->end &&
	    (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int
hexdigit(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	    (c >= 'A' && c <= 'F');
}

/* One UTF-8 sequence of 2..4 bytes starting at the lead byte *s->p
 * (>= 0x80): no overlong form, no surrogate, nothing past U+10FFFF. */
static int
jutf8(jscan *s)
{
	const unsigned char *u = (const unsigned char *)s->p;
	size_t left = (size_t)(s->end - s->p), n, i;
	unsigned c = u[0], cp;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return -1;
	if (left < n)
		return -1;
	for (i = 1; i < n; i++) {
		if ((u[i] & 0xc0) != 0x80)
			return -1;
		cp = (cp << 6) | (u[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return -1;
	s->p += n;
	return 0;
}

/* The value of the four hex digits of the \u escape at s->p, or -1. */
static long
jhex4(const jscan *s)
{
	long v = 0;
	int i;

	if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u')
		return -1;
	for (i = 2; i < 6; i++) {
		char c = s->p[i];

		if (!hexdigit(c))
			return -1;
		v = v * 16 + (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return v;
}

/* A \u escape at s->p, as jansson reads it: a high surrogate only with a
 * low one right after it, never a low one alone. */
static int
jescape_u(jscan *s)
{
	long v = jhex4(s), lo;

	if (v < 0 || (v >= 0xdc00 && v <= 0xdfff))
		return -1;
	s->p += 6;
	if (v >= 0xd800 && v <= 0xdbff) {
		lo = jhex4(s);
		if (lo < 0xdc00 || lo > 0xdfff)
			return -1;
		s->p += 6;
	}
	return 0;
}

/* The string at s->p (its opening quote).  Leaves s->p past the closing
 * quote; *esc = 1 when it holds an escape. */
static int
jstring(jscan *s, int *esc)
{
	unsigned char c;

	*esc = 0;
	s->p++;
	while (s->p < s->end) {
		c = (unsigned char)*s->p;
		if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
			s->p++; /* the usual byte first */
			continue;
		}
		if (c == '"') {
			s->p++;
			return 0;
		}
		if (c < 0x20)
			return -1;
		if (c >= 0x80) {
			if (jutf8(s) != 0)
				return -1;
			continue;
		}
		if (c == '\\') {
			*esc = 1;
			if (s->end - s->p < 2)
				return -1;
			c = (unsigned char)s->p[1];
			if (c == 'u') {
				if (jescape_u(s) != 0)
					return -1;
				continue;
			}
			if (strchr("\"\\/bfnrt", c) == NULL || c == '\0')
				return -1;
			s->p += 2;
			continue;
		}
		s->p++;
	}
	return -1;
}

static int
jdigits(jscan *s)
{
	const char *start = s->p;

	while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
		s->p++;
	return s->p > start ? 0 : -1;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int
jnumber(jscan *s)
{
	if (s->p < s->end && *s->p == '-')
		s->p++;
	if (s->p < s->end && *s->p == '0')
		s->p++;
	else if (jdigits(s) != 0)
		return -1;
	if (s->p < s->end && *s->p == '.') {
		s->p++;
		if (jdigits(s) != 0)
			return -1;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (jdigits(s) != 0)
			return -1;
	}
	return 0;
}

static int jvalue(jscan *s);

/* The object or array at s->p; CLOSE is '}' or ']'. */
static int
jcontainer(jscan *s, char close)
{
	int rc, esc;

	if (++s->depth > GCS_JSON_DEPTH)
		return 1; /* deep: let jansson decide */
	s->p++;
	jws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		s->depth--;
		return 0;
	}
	for (;;) {
		if (close == '}') {
			if (s->p >= s->end || *s->p != '"' ||
			    jstring(s, &esc) != 0)
				return -1;
			jws(s);
			if (s->p >= s->end || *s->p != ':')
				return -1;
			s->p++;
			jws(s);
		}
		if ((rc = jvalue(s)) != 0)
			return rc;
		jws(s);
		if (s->p >= s->end)
			return -1;
		if (*s->p == close) {
			s->p++;
			s->depth--;
			return 0;
		}
		if (*s->p != ',')
			return -1;
		s->p++;
		jws(s);
	}
}

static int
jliteral(jscan *s, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0)
		return -1;
	s->p += n;
	return 0;
}

/* Any value at s->p, leading whitespace skipped by the caller. */
static int
jvalue(jscan *s)
{
	int esc;

	if (s->p >= s->end)
		return -1;
	switch (*s->p) {
	case '{':
		return jcontainer(s, '}');
	case '[':
		return jcontainer(s, ']');
	case '"':
		return jstring(s, &esc);
	case 't':
		return jliteral(s, "true");
	case 'f':
		return jliteral(s, "false");
	case 'n':
		return jliteral(s, "null");
	default:
		return jnumber(s);
	}
}

/* The member KEY (KLEN bytes) of value VAL..END into the picks that name
 * it.  0, or 1 for a string value with an escape (gcs_json_pick's 1). */
static int
pick_member(gcs_jpick *pick, size_t n, const char *key, size_t klen,
    const char *val, const char *end)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (strlen(pick[i].key) != klen ||
		    memcmp(pick[i].key, key, klen) != 0)
			continue;
		/* The last of duplicate names wins, as in jansson. */
		pick[i].val = NULL;
		pick[i].is_str = *val == '"';
		if (pick[i].is_str) {
			if (memchr(val, '\\', (size_t)(end - val)))
				return 1;
			pick[i].val = val + 1;
			pick[i].len = (size_t)(end - val) - 2;
		} else if (*val == '-' || (*val >= '0' && *val <= '9')) {
			pick[i].val = val;
			pick[i].len = (size_t)(end - val);
		}
	}
	return 0;
}

int
gcs_json_pick(const char *buf, size_t len, gcs_jpick *pick, size_t n)
{
	jscan s;
	const char *key, *val;
	size_t klen, i;
	int rc, esc;

	for (i = 0; i < n; i++) {
		pick[i].val = NULL;
		pick[i].len = 0;
		pick[i].is_str = 0;
	}
	if (buf == NULL)
		return -1;
	s = (jscan){ buf, buf + len, 1 };
	jws(&s);
	if (s.p >= s.end || *s.p != '{')
		return -1;
	s.p++;
	jws(&s);
	if (s.p < s.end && *s.p == '}') {
		s.p++;
		goto tail;
	}
	for (;;) {
		if (s.p >= s.end || *s.p != '"')
			return -1;
		key = s.p + 1;
		if (jstring(&s, &esc) != 0)
			return -1;
		if (esc)
			return 1; /* an escaped name may still be ours */
		klen = (size_t)(s.p - 1 - key);
		jws(&s);
		if (s.p >= s.end || *s.p != ':')
			return -1;
		s.p++;
		jws(&s);
		val = s.p;
		if ((rc = jvalue(&s)) != 0)
			return rc;
		if (pick_member(pick, n, key, klen, val, s.p) != 0)
			return 1;
		jws(&s);
		if (s.p >= s.end)
			return -1;
		if (*s.p == '}') {
			s.p++;
			break;
		}
		if (*s.p != ',')
			return -1;
		s.p++;
		jws(&s);
	}
tail:
	jws(&s);
	return s.p == s.end ? 0 : -1;
}
