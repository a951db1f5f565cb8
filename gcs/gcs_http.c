/*
 * gcs_http.c: one HTTP transfer over a reusable libcurl easy handle, with
 * the response body, status and Date header collected; time helpers.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gcs_http.h"

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

int64_t
gcs_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
gcs_wipe(void *p, size_t n)
{
	if (p != NULL && n > 0)
		explicit_bzero(p, n);
}

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
	gcs_resp *r = ud;
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

static size_t
on_header(char *buf, size_t size, size_t nitems, void *ud)
{
	gcs_resp *r = ud;
	size_t n = size * nitems;
	char line[128];
	time_t t;

	if (n > 5 && n < sizeof(line) && strncasecmp(buf, "Date:", 5) == 0) {
		memcpy(line, buf + 5, n - 5);
		line[n - 5] = '\0';
		t = curl_getdate(line, NULL);
		if (t > 0)
			r->date_ms = (int64_t)t * 1000;
	}
	return n;
}

int
gcs_http_perform(CURL *h, int reuse, const char *method, const char *url,
    struct curl_slist *hdrs, const char *body, size_t body_len, long timeout_ms,
    gcs_resp *resp, char *errbuf, size_t errlen)
{
	char cerr[CURL_ERROR_SIZE];
	long conns = 0;
	curl_socket_t sock = CURL_SOCKET_BAD;
	CURLcode rc;

	memset(resp, 0, sizeof(*resp));
	cerr[0] = '\0';
	curl_easy_reset(h); /* keeps the connection cache */
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
	    timeout_ms < 1 ? 1L : timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
	    timeout_ms < GCS_CONNECT_TIMEOUT_MS
	        ? (timeout_ms < 1 ? 1L : timeout_ms)
	        : (long)GCS_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
	if (hdrs != NULL)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (strcmp(method, "GET") != 0) {
		if (strcmp(method, "POST") != 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
		if (body != NULL || strcmp(method, "DELETE") != 0) {
			curl_easy_setopt(h, CURLOPT_POST, 1L);
			curl_easy_setopt(h, CURLOPT_POSTFIELDS,
			    body ? body : "");
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
			    (curl_off_t)body_len);
		}
	}
	rc = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	/* A new connection where one was kept: libcurl may have sent the
	 * request on the dead one first (see gcs_resp.sends). */
	curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &conns);
	if (rc != CURLE_OK) {
		snprintf(errbuf, errlen, "%s",
		    cerr[0] ? cerr : curl_easy_strerror(rc));
		gcs_resp_clear(resp);
		resp->sends = reuse && conns > 0 ? 2 : 1;
		return -1;
	}
	resp->sends = reuse && conns > 0 ? 2 : 1;
	resp->kept =
	    curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &sock) == CURLE_OK &&
	    sock != CURL_SOCKET_BAD;
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

int64_t
gcs_parse_rfc3339(const char *s)
{
	struct tm tm;
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
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    sec > 60)
		return -1;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = (int64_t)timegm(&tm) * 1000 + ms;
	if (*s == 'Z' || *s == 'z')
		return s[1] == '\0' ? t : -1;
	if (*s != '+' && *s != '-')
		return -1;
	sign = *s++ == '-' ? -1 : 1;
	if (digits(&s, 2, &oh) || *s++ != ':' || digits(&s, 2, &om) ||
	    *s != '\0')
		return -1;
	return t - sign * ((int64_t)oh * 3600 + om * 60) * 1000;
}
