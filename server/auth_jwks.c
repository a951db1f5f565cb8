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
 * most AUTH_JWKS_WAIT_MS for that fetch, if it may (auth_jwks_refetch).
 *
 * A well-formed document is the issuer's whole key list and replaces the
 * cached one, even when it holds no usable key; a failed fetch (transport,
 * status, not a JWKS) keeps the cached keys.  Failures, recoveries and
 * documents with nothing usable are logged once each, not every retry.
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

#include "rt/rt.h"
#include "server/auth.h"
#include "server/auth_int.h"
#include "server/srv.h"
#include "util/clock.h"

struct auth_jwks {
	char *url;
	int min_interval;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	/* guarded by mu */
	auth_keyset *keys;
	unsigned long fetches; /* fetches ended */
	unsigned long begun;   /* fetches begun: the one in flight, if any,
				  is number fetches + 1 */
	time_t next_refresh;   /* monotonic s */
	time_t last_asked;     /* monotonic s of the last re-fetch an unknown
				kid caused; 0 = never */
	char last_err[200];    /* why there is no key: the last failed fetch,
				or a document with none */
	char logged[200];      /* the last problem logged; "" = none */
	unsigned long waits;   /* requests that waited for a fetch */
	int thread_waiters;    /* threads waiting for one now */
	int thread_waiters_max;
	/* tasks waiting for one now */
	rt_waiter *task_waiters;
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

/* Seconds on the monotonic clock: the refresh schedule's unit. */
static time_t
mono_now(void)
{
	return (time_t)(util_mono_ms() / 1000);
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

static __thread bool tl_may_wait;

void
auth_thread_may_wait(bool may)
{
	tl_may_wait = may;
}

/* What a fetch has to be logged as: PROBLEM (a failed fetch, a document
 * with nothing usable; "" once fetches are fine again) unless it is what
 * was logged last. */
typedef struct jwks_note {
	bool due;
	char problem[200];
	size_t nkeys;
} jwks_note;

static void
note_log(const auth_jwks *j, const jwks_note *n)
{
	if (!n->due)
		return;
	if (n->problem[0] != '\0')
		srv_logf("WARNING", "JWKS %s: %s (%zu key%s in use)", j->url,
		    n->problem, n->nkeys, n->nkeys == 1 ? "" : "s");
	else
		srv_logf("INFO", "JWKS %s: fetched, %zu key%s", j->url,
		    n->nkeys, n->nkeys == 1 ? "" : "s");
}

/* One fetch.  A new key set (perhaps empty) and *MAX_AGE, ERR saying
 * what to report about it ("" when nothing); or NULL and ERR. */
static auth_keyset *
fetch(const char *url, long *max_age, char *err, size_t errlen)
{
	CURL *c = curl_easy_init();
	body b = { NULL, 0, false, -1 };
	auth_keyset *ks = NULL;
	long status = 0;
	CURLcode rc;

	err[0] = '\0';
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

/* The outcome of a fetch, with J->mu held: KS (a new set; perhaps empty)
 * replaces the keys, kept MAX_AGE s (clamped); or, KS NULL, the keys stay
 * and the fetch is tried again in AUTH_JWKS_RETRY s.  ERR is what the
 * fetch had to say; *NOTE what to log.  Returns the replaced set, for the
 * caller to drop (and the note to log) outside the mutex. */
static auth_keyset *
install(auth_jwks *j, auth_keyset *ks, long max_age, const char *err,
    time_t now, jwks_note *note)
{
	auth_keyset *old = NULL;

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
		snprintf(j->last_err, sizeof(j->last_err), "%s",
		    ks->n == 0 ? err : "");
	} else {
		snprintf(j->last_err, sizeof(j->last_err), "%s", err);
		j->next_refresh = now + AUTH_JWKS_RETRY;
	}
	note->due = strcmp(err, j->logged) != 0;
	snprintf(note->problem, sizeof(note->problem), "%s", err);
	note->nkeys = j->keys != NULL ? j->keys->n : 0;
	snprintf(j->logged, sizeof(j->logged), "%s", err);
	return old;
}

/* With J->mu held: the tasks waiting for a fetch go on. */
static void
wake_tasks(auth_jwks *j)
{
	rt_waiter *w;

	for (w = j->task_waiters; w != NULL; w = w->next)
		rt_waiter_wake(w);
}

/* Fetches and installs; called without the mutex. */
static void
refresh(auth_jwks *j)
{
	char err[200];
	long max_age = -1;
	auth_keyset *ks = fetch(j->url, &max_age, err, sizeof(err)), *old;
	time_t now = mono_now();
	jwks_note note;

	pthread_mutex_lock(&j->mu);
	old = install(j, ks, max_age, err, now, &note);
	j->fetches++;
	pthread_cond_broadcast(&j->cv);
	wake_tasks(j);
	pthread_mutex_unlock(&j->mu);
	auth_keyset_unref(old);
	note_log(j, &note);
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
			j->begun++;
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

/* Whether URL is http:// to a loopback host (127.0.0.0/8, ::1,
 * localhost): a test's issuer, which no one on the path can change. */
static bool
loopback_http(const char *url)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	bool ok = false;
	size_t n;

	if (u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    strcmp(scheme, "http") == 0) {
		n = strlen(host);
		if (n > 2 && host[0] == '[' && host[n - 1] == ']') {
			memmove(host, host + 1, n - 2);
			host[n - 2] = '\0';
		}
		ok = srv_host_is_loopback(host) == 1;
	}
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return ok;
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
	if (strncmp(url, "https://", 8) != 0 && !loopback_http(url)) {
		snprintf(err, errlen,
		    "LOCKGATE_JWKS_URL must start with https:// (http:// "
		    "only to a loopback address, for tests): whoever can "
		    "change a JWKS in transit can sign any token");
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

		jwks_note note;

		(void)install(j, ks, max_age, err, mono_now(),
		    &note); /* nothing to replace yet */
		note_log(j, &note);
		j->fetches = 1;
		j->begun = 1;
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
		wake_tasks(j);
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

/* A request running as an event-loop task waits for a fetch to end
 * (called with J->mu held, returns with it held), until DEADLINE (ms,
 * monotonic) at most, without holding its thread: wake_tasks wakes it. */
static void
wait_in_task(auth_jwks *j, int64_t deadline)
{
	rt_waiter w, **p;

	rt_waiter_init(&w);
	w.next = j->task_waiters;
	/* W is taken off the list before this returns. */
	// cppcheck-suppress autoVariables
	j->task_waiters = &w;
	pthread_mutex_unlock(&j->mu);
	rt_waiter_wait(&w, deadline);
	pthread_mutex_lock(&j->mu);
	for (p = &j->task_waiters; *p != &w; p = &(*p)->next)
		;
	*p = w.next;
}

auth_keyset *
auth_jwks_refetch(auth_jwks *j)
{
	auth_keyset *ks;
	struct timespec until;
	unsigned long goal;
	int64_t deadline;
	time_t now = mono_now();

	pthread_mutex_lock(&j->mu);
	/* The fetch that answers a new kid is one that begins after it was
	 * asked for: one in flight may hold the document from before a
	 * rotation. */
	goal = j->begun + 1;
	if (j->want || j->last_asked == 0 ||
	    now - j->last_asked >= j->min_interval) {
		j->last_asked = now;
		j->want = true;
		pthread_cond_broadcast(&j->cv);
		until = util_mono_after_us((int64_t)AUTH_JWKS_WAIT_MS * 1000);
		deadline = util_mono_ms() + AUTH_JWKS_WAIT_MS;
		if (rt_in_task()) {
			j->waits++;
			while (j->fetches < goal && !j->stop &&
			    util_mono_ms() < deadline)
				wait_in_task(j, deadline);
		} else if (tl_may_wait &&
		    j->thread_waiters < AUTH_JWKS_THREAD_WAITERS) {
			j->waits++;
			if (++j->thread_waiters > j->thread_waiters_max)
				j->thread_waiters_max = j->thread_waiters;
			while (j->fetches < goal && !j->stop &&
			    pthread_cond_timedwait(&j->cv, &j->mu, &until) !=
			        ETIMEDOUT)
				;
			j->thread_waiters--;
		}
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

void
auth_jwks_counts(auth_jwks *j, auth_jwks_counters *out)
{
	pthread_mutex_lock(&j->mu);
	out->fetches = j->fetches;
	out->waits = j->waits;
	out->thread_waiters_max = j->thread_waiters_max;
	pthread_mutex_unlock(&j->mu);
}
