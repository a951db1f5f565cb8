/*
 * auth_jwks.c: a JWKS URL, cached.
 *
 * One background thread does every fetch, so a slow or dead issuer never
 * holds a request: requests only take a reference to the current key set
 * under a mutex that no fetch ever holds.  The thread refreshes when the
 * Cache-Control max-age runs out (retrying every AUTH_JWKS_RETRY s after a
 * failure, keeping the old keys meanwhile), and early when a token names a
 * kid we do not know, at most once per min_interval (the first time at
 * once: a rotation right after start is served); such a request waits at
 * most AUTH_JWKS_WAIT_MS for that fetch.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "gcs/gcs_loop.h"
#include "server/auth_int.h"

struct auth_jwks {
	char *url;
	int min_interval;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	/* guarded by mu */
	auth_keyset *keys;
	unsigned long fetches;
	time_t next_refresh; /* monotonic s */
	time_t last_asked;   /* monotonic s of the last re-fetch an unknown
				kid caused; 0 = never */
	char last_err[200];  /* of the last failed fetch */
	bool want;
	bool stop;
	bool started;
	pthread_t thread;
};

typedef struct body {
	char *buf;
	size_t len;
	bool too_big;
	long max_age; /* -1: none seen */
} body;

static time_t
mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static size_t
on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	body *b = arg;
	size_t n = size * nmemb;
	char *nb;

	if (b->len + n > AUTH_JWKS_BODY_MAX) {
		b->too_big = true;
		return 0;
	}
	nb = realloc(b->buf, b->len + n + 1);
	if (nb == NULL)
		return 0;
	b->buf = nb;
	memcpy(b->buf + b->len, data, n);
	b->len += n;
	b->buf[b->len] = '\0';
	return n;
}

/* Cache-Control: ..., max-age=N, ... (RFC 9111 5.2). */
static size_t
on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	body *b = arg;
	size_t n = size * nmemb, i;
	static const char name[] = "cache-control:";
	static const char dir[] = "max-age=";

	if (n < sizeof(name) - 1 ||
	    strncasecmp(data, name, sizeof(name) - 1) != 0)
		return n;
	for (i = sizeof(name) - 1; i + sizeof(dir) - 1 < n; i++) {
		if (strncasecmp(data + i, dir, sizeof(dir) - 1) == 0) {
			long v = 0;
			size_t k = i + sizeof(dir) - 1;

			while (k < n && isdigit((unsigned char)data[k]) &&
			    v < AUTH_JWKS_AGE_MAX)
				v = v * 10 + (data[k++] - '0');
			b->max_age = v;
			break;
		}
	}
	return n;
}

/* One fetch.  A new key set and *MAX_AGE, or NULL and ERR. */
static auth_keyset *
fetch(const char *url, long *max_age, char *err, size_t errlen)
{
	CURL *c = curl_easy_init();
	body b = { NULL, 0, false, -1 };
	auth_keyset *ks = NULL;
	long status = 0;
	CURLcode rc;

	if (c == NULL) {
		snprintf(err, errlen, "JWKS: cannot start libcurl");
		return NULL;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)AUTH_JWKS_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)AUTH_JWKS_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &b);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "lockgate");
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "JWKS fetch failed: %s",
		    b.too_big ? "document too large" : curl_easy_strerror(rc));
		goto out;
	}
	if (status != 200 || b.buf == NULL) {
		snprintf(err, errlen, "JWKS fetch answered HTTP %ld", status);
		goto out;
	}
	ks = auth_jwks_parse(b.buf, b.len, err, errlen);
	*max_age = b.max_age;
out:
	free(b.buf);
	curl_easy_cleanup(c);
	return ks;
}

/* Fetches and installs; called without the mutex. */
static void
refresh(auth_jwks *j)
{
	char err[200];
	long max_age = -1;
	auth_keyset *ks = fetch(j->url, &max_age, err, sizeof(err)),
	            *old = NULL;
	time_t now = mono_now();

	pthread_mutex_lock(&j->mu);
	if (ks != NULL) {
		if (max_age < 0)
			max_age = AUTH_JWKS_AGE_DEFAULT;
		if (max_age < AUTH_JWKS_AGE_MIN)
			max_age = AUTH_JWKS_AGE_MIN;
		if (max_age > AUTH_JWKS_AGE_MAX)
			max_age = AUTH_JWKS_AGE_MAX;
		old = j->keys;
		j->keys = ks;
		j->next_refresh = now + max_age;
	} else {
		/* Keep what we had; try again soon. */
		snprintf(j->last_err, sizeof(j->last_err), "%s", err);
		j->next_refresh = now + AUTH_JWKS_RETRY;
	}
	j->fetches++;
	pthread_cond_broadcast(&j->cv);
	pthread_mutex_unlock(&j->mu);
	auth_keyset_unref(old);
}

static void *
run(void *arg)
{
	auth_jwks *j = arg;

	pthread_mutex_lock(&j->mu);
	while (!j->stop) {
		time_t now = mono_now();

		if (j->want || now >= j->next_refresh) {
			j->want = false;
			pthread_mutex_unlock(&j->mu);
			refresh(j);
			pthread_mutex_lock(&j->mu);
			continue;
		}
		{
			struct timespec until = { j->next_refresh, 0 };

			pthread_cond_timedwait(&j->cv, &j->mu, &until);
		}
	}
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

auth_jwks *
auth_jwks_new(const char *url, int min_interval, char *err, size_t errlen)
{
	auth_jwks *j = calloc(1, sizeof(*j));
	pthread_condattr_t ca;

	if (j == NULL || (j->url = strdup(url)) == NULL) {
		free(j);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (strncmp(url, "https://", 8) != 0 &&
	    strncmp(url, "http://", 7) != 0) {
		snprintf(err, errlen,
		    "LOCKGATE_JWKS_URL must start with "
		    "https:// (or http:// for tests)");
		free(j->url);
		free(j);
		return NULL;
	}
	j->min_interval =
	    min_interval < 0 ? AUTH_JWKS_MIN_INTERVAL : min_interval;
	pthread_mutex_init(&j->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->cv, &ca);
	pthread_condattr_destroy(&ca);

	/* The first fetch happens here so the first requests find keys. */
	{
		long max_age = -1;
		auth_keyset *ks = fetch(url, &max_age, err, errlen);

		if (ks == NULL) {
			snprintf(j->last_err, sizeof(j->last_err), "%s", err);
			j->next_refresh = mono_now() + AUTH_JWKS_RETRY;
		} else {
			if (max_age < AUTH_JWKS_AGE_MIN)
				max_age = max_age < 0 ? AUTH_JWKS_AGE_DEFAULT
				                      : AUTH_JWKS_AGE_MIN;
			if (max_age > AUTH_JWKS_AGE_MAX)
				max_age = AUTH_JWKS_AGE_MAX;
			j->keys = ks;
			j->next_refresh = mono_now() + max_age;
		}
		j->fetches = 1;
	}
	if (pthread_create(&j->thread, NULL, run, j) != 0) {
		snprintf(err, errlen, "cannot start the JWKS thread");
		auth_jwks_free(j);
		return NULL;
	}
	j->started = true;
	return j;
}

void
auth_jwks_free(auth_jwks *j)
{
	if (j == NULL)
		return;
	if (j->started) {
		pthread_mutex_lock(&j->mu);
		j->stop = true;
		pthread_cond_broadcast(&j->cv);
		pthread_mutex_unlock(&j->mu);
		pthread_join(j->thread, NULL);
	}
	auth_keyset_unref(j->keys);
	pthread_cond_destroy(&j->cv);
	pthread_mutex_destroy(&j->mu);
	free(j->url);
	free(j);
}

auth_keyset *
auth_jwks_keys(auth_jwks *j)
{
	auth_keyset *ks;

	pthread_mutex_lock(&j->mu);
	ks = auth_keyset_ref(j->keys);
	pthread_mutex_unlock(&j->mu);
	return ks;
}

/* A request running as an event-loop task waits for the fetch (called
 * with J->mu held, returns with it held) without holding its thread: it
 * looks again every AUTH_JWKS_WAIT_STEP_MS, up to AUTH_JWKS_WAIT_MS. */
static void
wait_in_task(auth_jwks *j, unsigned long seen)
{
	int waited = 0;

	while (j->fetches == seen && !j->stop && waited < AUTH_JWKS_WAIT_MS) {
		pthread_mutex_unlock(&j->mu);
		gcs_loop_sleep(AUTH_JWKS_WAIT_STEP_MS);
		waited += AUTH_JWKS_WAIT_STEP_MS;
		pthread_mutex_lock(&j->mu);
	}
}

auth_keyset *
auth_jwks_refetch(auth_jwks *j)
{
	auth_keyset *ks;
	struct timespec until;
	unsigned long seen;
	time_t now = mono_now();

	pthread_mutex_lock(&j->mu);
	seen = j->fetches;
	if (j->want || j->last_asked == 0 ||
	    now - j->last_asked >= j->min_interval) {
		j->last_asked = now;
		j->want = true;
		pthread_cond_broadcast(&j->cv);
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += AUTH_JWKS_WAIT_MS / 1000;
		until.tv_nsec += (long)(AUTH_JWKS_WAIT_MS % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		if (gcs_loop_in_task())
			wait_in_task(j, seen);
		else
			while (j->fetches == seen && !j->stop &&
			    pthread_cond_timedwait(&j->cv, &j->mu, &until) !=
			        ETIMEDOUT)
				;
	}
	ks = auth_keyset_ref(j->keys);
	pthread_mutex_unlock(&j->mu);
	return ks;
}

size_t
auth_jwks_status(auth_jwks *j, char *err, size_t errlen)
{
	size_t n;

	pthread_mutex_lock(&j->mu);
	n = j->keys != NULL ? j->keys->n : 0;
	if (n == 0)
		snprintf(err, errlen, "%s",
		    j->last_err[0] != '\0' ? j->last_err
		                           : "no key fetched yet");
	pthread_mutex_unlock(&j->mu);
	return n;
}

long
auth_jwks_ttl(auth_jwks *j)
{
	long left;

	pthread_mutex_lock(&j->mu);
	left = (long)(j->next_refresh - mono_now());
	pthread_mutex_unlock(&j->mu);
	return left;
}

unsigned long
auth_jwks_fetches(auth_jwks *j)
{
	unsigned long n;

	pthread_mutex_lock(&j->mu);
	n = j->fetches;
	pthread_mutex_unlock(&j->mu);
	return n;
}
