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
