/*
 * gcs_token.c: access tokens from a service-account key or the metadata
 * server, cached and refreshed ahead of expiry by one thread at a time.
 *
 * Key material (the private key, the signed assertion, access tokens in
 * request buffers) is wiped after use; the private key is re-read from its
 * file at each refresh rather than kept in memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <jwt.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "gcs_http.h"
#include "rt/rt.h"
#include "gcs_token.h"
#include "util/wipe.h"
#include "util/clock.h"

#define TOKEN_URL_MAX 1024
#define SA_EMAIL_MAX  512
#define FORM_MAX      16384 /* bytes of the token request body */
#define MD_PATH       "/computeMetadata/v1/instance/service-accounts/default/token"

typedef enum { SRC_SA, SRC_METADATA } src_kind;

struct gcs_token_src {
	src_kind kind;
	char key_path[1024];      /* SRC_SA */
	char email[SA_EMAIL_MAX]; /* SRC_SA */
	char token_url[TOKEN_URL_MAX];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refreshing;
	uint64_t fetch_seq;      /* bumped after every fetch */
	rt_waiter *task_waiters; /* tasks waiting for the fetch in flight */
	int last_ok;
	int64_t last_fail_ms; /* mono time of the last failed fetch */
	char last_msg[GCS_ERRMSG_MAX];
	char token[GCS_TOKEN_MAX]; /* "" when none */
	uint64_t serial;           /* of token: bumped with each new one */
	int64_t expires_ms;        /* mono time the token expires */
	int64_t refresh_ms;        /* mono time to refresh from */
};

/* Read PATH (at most GCS_SA_KEY_FILE_MAX bytes) and parse it.  The caller
 * wipes the private key in the returned JSON before json_decref. */
static json_t *
sa_load(const char *path, gcs_err *err)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f;
	json_t *j = NULL;
	json_error_t je;
	struct stat st;
	int fd;

	/* Without O_NONBLOCK, opening a FIFO waits for a writer, for ever
	 * and with our signals blocked; only a regular file is a key. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		gcs_fail(err, GCS_INVALID,
		    "cannot open GOOGLE_APPLICATION_CREDENTIALS file: %s",
		    strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		gcs_fail(err, GCS_INVALID,
		    "GOOGLE_APPLICATION_CREDENTIALS is not a regular file");
		close(fd);
		return NULL;
	}
	f = fdopen(fd, "rb");
	if (f == NULL) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		close(fd);
		return NULL;
	}
	buf = malloc(GCS_SA_KEY_FILE_MAX + 1);
	if (buf == NULL) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		goto out;
	}
	n = fread(buf, 1, GCS_SA_KEY_FILE_MAX + 1, f);
	if (n > GCS_SA_KEY_FILE_MAX) {
		gcs_fail(err, GCS_INVALID,
		    "GOOGLE_APPLICATION_CREDENTIALS file is over %d bytes",
		    GCS_SA_KEY_FILE_MAX);
		goto out;
	}
	j = json_loadb(buf, n, 0, &je);
	if (j == NULL) /* je.text may quote key bytes: do not pass it on */
		gcs_fail(err, GCS_INVALID,
		    "GOOGLE_APPLICATION_CREDENTIALS is not JSON (line %d)",
		    je.line);
out:
	util_wipe(buf, n > GCS_SA_KEY_FILE_MAX ? GCS_SA_KEY_FILE_MAX + 1 : n);
	free(buf);
	fclose(f);
	return j;
}

static void
sa_wipe_free(json_t *j)
{
	json_t *k = json_object_get(j, "private_key");

	if (json_is_string(k))
		util_wipe((char *)json_string_value(k), json_string_length(k));
	json_decref(j);
}

static int
copy_str(char *dst, size_t dstsz, const char *src)
{
	size_t n = strlen(src);

	if (n >= dstsz)
		return -1;
	memcpy(dst, src, n + 1);
	return 0;
}

/* OpenSSL's passphrase callback: never ask (the default one reads the
 * terminal, and would wait there for ever). */
static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* Whether KEY is an unencrypted PEM RSA private key (what RS256 signs
 * with, and what Google issues). */
static int
rsa_private_pem(const char *key)
{
	BIO *bio = BIO_new_mem_buf(key, -1);
	EVP_PKEY *pkey = bio != NULL
	    ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL)
	    : NULL;
	int ok = pkey != NULL && EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA;

	EVP_PKEY_free(pkey); /* clears the key's memory */
	BIO_free(bio);
	return ok;
}

/* Check the key file's fields and copy the public ones into T. */
static int
sa_fields(gcs_token_src *t, json_t *j, gcs_err *err)
{
	const char *type = json_string_value(json_object_get(j, "type"));
	const char *email =
	    json_string_value(json_object_get(j, "client_email"));
	const char *key = json_string_value(json_object_get(j, "private_key"));
	const json_t *juri = json_object_get(j, "token_uri");
	const char *uri = json_string_value(juri);

	if (type == NULL || strcmp(type, "service_account") != 0)
		return gcs_fail(err, GCS_INVALID,
		    "GOOGLE_APPLICATION_CREDENTIALS is not a service-account "
		    "key "
		    "(type must be \"service_account\")");
	if (email == NULL || email[0] == '\0' ||
	    copy_str(t->email, sizeof(t->email), email) != 0)
		return gcs_fail(err, GCS_INVALID,
		    "service-account key: client_email missing or too long");
	if (key == NULL || strstr(key, "PRIVATE KEY") == NULL)
		return gcs_fail(err, GCS_INVALID,
		    "service-account key: private_key missing or not PEM");
	if (strstr(key, "ENCRYPTED") != NULL || !rsa_private_pem(key))
		return gcs_fail(err, GCS_INVALID,
		    "service-account key: private_key is not an unencrypted "
		    "RSA key");
	if (juri != NULL && uri == NULL)
		return gcs_fail(err, GCS_INVALID,
		    "service-account key: token_uri is not a string");
	if (uri == NULL)
		uri = GCS_DEFAULT_TOKEN_URI;
	if ((strncmp(uri, "https://", 8) != 0 &&
	        strncmp(uri, "http://", 7) != 0) ||
	    copy_str(t->token_url, sizeof(t->token_url), uri) != 0)
		return gcs_fail(err, GCS_INVALID,
		    "service-account key: token_uri must be an http(s) URL");
	return GCS_OK;
}

gcs_token_src *
gcs_token_src_new(gcs_err *err)
{
	gcs_token_src *t;
	const char *path = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	const char *md = getenv("GCE_METADATA_HOST");
	json_t *j;
	int n;

	gcs_curl_global_init();
	t = calloc(1, sizeof(*t));
	if (t == NULL) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	if (path != NULL && path[0] != '\0') {
		t->kind = SRC_SA;
		if (copy_str(t->key_path, sizeof(t->key_path), path) != 0) {
			gcs_fail(err, GCS_INVALID,
			    "GOOGLE_APPLICATION_CREDENTIALS path too long");
			goto fail;
		}
		j = sa_load(path, err);
		if (j == NULL)
			goto fail;
		n = sa_fields(t, j, err);
		sa_wipe_free(j);
		if (n != GCS_OK)
			goto fail;
		return t;
	}
	t->kind = SRC_METADATA;
	if (md == NULL || md[0] == '\0')
		md = GCS_DEFAULT_METADATA_HOST;
	n = snprintf(t->token_url, sizeof(t->token_url), "%s%s%s",
	    strstr(md, "://") ? "" : "http://", md, MD_PATH);
	if (n < 0 || (size_t)n >= sizeof(t->token_url)) {
		gcs_fail(err, GCS_INVALID, "GCE_METADATA_HOST too long");
		goto fail;
	}
	return t;
fail:
	gcs_token_src_free(t);
	return NULL;
}

void
gcs_token_src_free(gcs_token_src *t)
{
	if (t == NULL)
		return;
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->cv);
	util_wipe(t, sizeof(*t));
	free(t);
}

const char *
gcs_token_src_kind(const gcs_token_src *t)
{
	return t->kind == SRC_SA ? "service_account" : "metadata_server";
}

/* Build the signed assertion for the key file; caller wipes and frees it. */
static char *
sa_assertion(gcs_token_src *t, gcs_err *err)
{
	json_t *j;
	const char *key, *kid;
	jwt_t *jwt = NULL;
	char *out = NULL;
	time_t now = time(NULL);

	j = sa_load(t->key_path, err);
	if (j == NULL)
		return NULL;
	if (sa_fields(t, j, err) != GCS_OK)
		goto out;
	key = json_string_value(json_object_get(j, "private_key"));
	kid = json_string_value(json_object_get(j, "private_key_id"));
	if (jwt_new(&jwt) != 0) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		goto out;
	}
	if (jwt_set_alg(jwt, JWT_ALG_RS256, (const unsigned char *)key,
	        (int)strlen(key)) != 0 ||
	    jwt_add_grant(jwt, "iss", t->email) != 0 ||
	    jwt_add_grant(jwt, "scope", GCS_TOKEN_SCOPE) != 0 ||
	    jwt_add_grant(jwt, "aud", t->token_url) != 0 ||
	    jwt_add_grant_int(jwt, "iat", (long)now) != 0 ||
	    jwt_add_grant_int(jwt, "exp", (long)now + GCS_SA_ASSERTION_TTL_S) !=
	        0 ||
	    (kid != NULL && kid[0] != '\0' &&
	        jwt_add_header(jwt, "kid", kid) != 0)) {
		gcs_fail(err, GCS_INVALID,
		    "service-account key: cannot build "
		    "the token assertion");
		goto out;
	}
	out = jwt_encode_str(jwt);
	if (out == NULL)
		gcs_fail(err, GCS_INVALID,
		    "service-account key: cannot sign "
		    "with private_key (not an RSA PEM key?)");
out:
	jwt_free(jwt); /* scrubs its copy of the key */
	sa_wipe_free(j);
	return out;
}

/* A token goes into a header line: printable ASCII, no spaces. */
static int
token_chars_ok(const char *s)
{
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e)
			return 0;
	return 1;
}

/* The request of a fetch: for a service account, its signed assertion
 * in a form body (*ASSERTION, *FORM of *FORMLEN bytes, the caller wipes
 * and frees them); the headers into *HDRS.  GCS_OK, or the failure with
 * ERR filled. */
static int
fetch_request(gcs_token_src *t, char **assertion, char **form, size_t *formlen,
    struct curl_slist **hdrs, gcs_err *err)
{
	int n;

	if (t->kind != SRC_SA) {
		*hdrs = curl_slist_append(NULL, "Metadata-Flavor: Google");
		return *hdrs ? GCS_OK
		             : gcs_fail(err, GCS_NOMEM, "out of memory");
	}
	*assertion = sa_assertion(t, err);
	if (*assertion == NULL) {
		if (err != NULL) /* 503 to callers, message kept */
			err->status = GCS_UNAVAILABLE;
		return GCS_UNAVAILABLE;
	}
	*form = malloc(FORM_MAX);
	if (*form == NULL)
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	n = snprintf(*form, FORM_MAX,
	    "grant_type=urn%%3Aietf%%3Aparams"
	    "%%3Aoauth%%3Agrant-type%%3Ajwt-bearer&assertion=%s",
	    *assertion);
	if (n < 0 || n >= FORM_MAX)
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "service-account assertion too long");
	*formlen = (size_t)n;
	*hdrs = curl_slist_append(NULL,
	    "Content-Type: application/x-www-form-urlencoded");
	return *hdrs ? GCS_OK : gcs_fail(err, GCS_NOMEM, "out of memory");
}

/* The token of answer R from SRC (T's source) into TOK and its lifetime
 * into *LIFE_MS; the parsed copy of the token is wiped.  GCS_OK, or the
 * failure with ERR filled. */
static int
fetch_answer(const gcs_token_src *t, const char *src, const gcs_resp *r,
    char *tok, size_t toksz, int64_t *life_ms, gcs_err *err)
{
	json_t *j, *v;
	const char *at, *ttype;
	json_int_t exp;
	int rc = GCS_OK;

	if (r->status != 200)
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "cannot get a Cloud Storage access token: the %s answered "
		    "HTTP %ld",
		    src, r->status);
	if (t->kind == SRC_METADATA && !r->metadata_flavor)
		/* What answers without the header is not the metadata
		 * server (a proxy, a captive portal, a wrong host). */
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "cannot get a Cloud Storage access token: the answer of "
		    "the metadata server has no Metadata-Flavor: Google");
	j = r->body && !r->too_big ? json_loadb(r->body, r->len, 0, NULL)
	                           : NULL;
	at = json_string_value(json_object_get(j, "access_token"));
	exp = json_integer_value(json_object_get(j, "expires_in"));
	ttype = json_string_value(json_object_get(j, "token_type"));
	if (at == NULL || at[0] == '\0' || exp <= 0 || strlen(at) >= toksz ||
	    !token_chars_ok(at) ||
	    (json_object_get(j, "token_type") != NULL &&
	        (ttype == NULL || strcasecmp(ttype, "Bearer") != 0))) {
		rc = gcs_fail(err, GCS_UNAVAILABLE,
		    "the %s gave no usable access_token/expires_in/token_type",
		    src);
	} else {
		memcpy(tok, at, strlen(at) + 1);
		if (exp > GCS_TOKEN_LIFE_MAX_S) /* and no overflow below */
			exp = GCS_TOKEN_LIFE_MAX_S;
		*life_ms = (int64_t)exp * 1000;
	}
	v = json_object_get(j, "access_token");
	if (json_is_string(v))
		util_wipe((char *)json_string_value(v), json_string_length(v));
	json_decref(j);
	return rc;
}

/* One fetch, bounded by TIMEOUT_MS.  On success copies the token into
 * TOK and its lifetime into *life_ms.  Every copy of a secret it made
 * (the assertion, the form, the answer) is wiped. */
static int
fetch(gcs_token_src *t, long timeout_ms, char *tok, size_t toksz,
    int64_t *life_ms, gcs_err *err)
{
	gcs_http *h = NULL;
	struct curl_slist *hdrs = NULL;
	char *assertion = NULL, *form = NULL, ebuf[GCS_ERRMSG_MAX];
	const char *src =
	    t->kind == SRC_SA ? "service-account token_uri" : "metadata server";
	size_t formlen = 0;
	gcs_resp r;
	int rc;

	memset(&r, 0, sizeof(r));
	h = gcs_http_new();
	if (h == NULL)
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	rc = fetch_request(t, &assertion, &form, &formlen, &hdrs, err);
	if (rc != GCS_OK)
		goto out;
	if (gcs_http_perform(h, form ? "POST" : "GET", t->token_url, hdrs, form,
	        formlen, timeout_ms, &r, ebuf, sizeof(ebuf)) != 0)
		rc = gcs_fail(err, GCS_UNAVAILABLE,
		    "cannot get a Cloud Storage access token from the %s: %s",
		    src, ebuf);
	else
		rc = fetch_answer(t, src, &r, tok, toksz, life_ms, err);
out:
	util_wipe(r.body, r.len);
	gcs_resp_clear(&r);
	if (assertion != NULL) {
		util_wipe(assertion, strlen(assertion));
		free(assertion);
	}
	if (form != NULL) {
		util_wipe(form, FORM_MAX);
		free(form);
	}
	curl_slist_free_all(hdrs);
	gcs_http_free(h);
	return rc;
}

static int
copy_token(const gcs_token_src *t, char *out, size_t outsz, gcs_err *err)
{
	size_t n = strlen(t->token);

	if (n >= outsz)
		return gcs_fail(err, GCS_INVALID, "token buffer too small");
	memcpy(out, t->token, n + 1);
	return GCS_OK;
}

/* With T->mu held: a task waits for the fetch in flight, until
 * DEADLINE_MS, without holding its thread (the fetcher may be a task of
 * this very thread); fetch_and_keep wakes it. */
static void
wait_in_task(gcs_token_src *t, int64_t deadline_ms)
{
	rt_waiter w, **p;

	rt_waiter_init(&w);
	w.next = t->task_waiters;
	/* W is taken off the list before this returns. */
	// cppcheck-suppress autoVariables
	t->task_waiters = &w;
	pthread_mutex_unlock(&t->mu);
	rt_waiter_wait(&w, deadline_ms);
	pthread_mutex_lock(&t->mu);
	for (p = &t->task_waiters; *p != &w; p = &(*p)->next)
		;
	*p = w.next;
}

/* With T->mu held and a fetch of another caller in flight: wait for it,
 * at most until DEADLINE_MS (NOW: the clock read under the lock).
 * Returns with T->mu held: GCS_OK to look again, or the failure (that
 * fetch's, or the deadline) with ERR filled. */
static int
wait_for_fetch(gcs_token_src *t, int64_t deadline_ms, int64_t now, gcs_err *err)
{
	struct timespec ts;
	uint64_t seq;

	if (now >= deadline_ms)
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "timed out waiting for a Cloud Storage "
		    "access token from the %s",
		    t->kind == SRC_SA ? "service-account "
		                        "token_uri"
		                      : "metadata server");
	seq = t->fetch_seq;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (deadline_ms - now) / 1000;
	ts.tv_nsec += ((deadline_ms - now) % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	if (rt_in_task())
		wait_in_task(t, deadline_ms);
	else
		while (t->refreshing && t->fetch_seq == seq &&
		    pthread_cond_timedwait(&t->cv, &t->mu, &ts) == 0)
			;
	if (t->fetch_seq != seq && !t->last_ok)
		return gcs_fail(err, GCS_UNAVAILABLE, "%s", t->last_msg);
	return GCS_OK;
}

/* With T->mu held: fetch a token (the lock let go meanwhile; others use
 * the old token while it lasts, or wait), keep it, and copy it, or the
 * old one while it lasts, into OUT.  TOK: the caller's scratch buffer.
 * VALID: a token in hand, so the source is waited for only briefly. */
static int
fetch_and_keep(gcs_token_src *t, int64_t deadline_ms, int64_t now, int valid,
    char *tok, size_t toksz, char *out, size_t outsz, gcs_err *err)
{
	int64_t life = 0, early;
	rt_waiter *w;
	long timeout;
	int rc;

	t->refreshing = 1;
	pthread_mutex_unlock(&t->mu);
	timeout = (long)(deadline_ms - now);
	if (timeout > GCS_TOKEN_FETCH_TIMEOUT_MS)
		timeout = GCS_TOKEN_FETCH_TIMEOUT_MS;
	if (valid && timeout > GCS_TOKEN_EARLY_FETCH_MS)
		timeout = GCS_TOKEN_EARLY_FETCH_MS;
	if (timeout < 1)
		timeout = 1;
	rc = fetch(t, timeout, tok, toksz, &life, err);
	gcs_stat_token_fetch(rc == GCS_OK);
	pthread_mutex_lock(&t->mu);
	t->refreshing = 0;
	t->fetch_seq++;
	t->last_ok = rc == GCS_OK;
	now = util_mono_ms();
	if (rc == GCS_OK) {
		early = life / GCS_TOKEN_EARLY_DIV;
		if (early > GCS_TOKEN_EARLY_MS)
			early = GCS_TOKEN_EARLY_MS;
		memcpy(t->token, tok, sizeof(t->token));
		t->serial++;
		t->expires_ms = now + life; /* life <= 1 day: no overflow */
		t->refresh_ms = now + life - early;
		t->last_fail_ms = 0;
		rc = copy_token(t, out, outsz, err);
	} else {
		t->last_fail_ms = now;
		snprintf(t->last_msg, sizeof(t->last_msg), "%s",
		    err ? err->msg : "token source failed");
		if (t->token[0] != '\0' && now < t->expires_ms)
			rc = copy_token(t, out, outsz, err); /* old one lasts */
	}
	pthread_cond_broadcast(&t->cv);
	for (w = t->task_waiters; w != NULL; w = w->next)
		rt_waiter_wake(w);
	return rc;
}

/* The cache, single-flight and refresh-early rules, under T->mu: a fresh
 * token is copied; one being fetched by another caller is waited for (or
 * the still-valid one used); a source that failed a moment ago is not
 * asked again yet; otherwise this caller fetches. */
int
gcs_token_get(gcs_token_src *t, int64_t deadline_ms, char *out, size_t outsz,
    uint64_t *serial, gcs_err *err)
{
	char tok[GCS_TOKEN_MAX];
	int64_t now;
	int rc, fetched = 0, valid = 0;

	pthread_mutex_lock(&t->mu);
	for (;;) {
		now = util_mono_ms();
		valid = t->token[0] != '\0' && now < t->expires_ms;
		if (valid && now < t->refresh_ms) {
			rc = copy_token(t, out, outsz, err);
			goto out;
		}
		if (t->refreshing) {
			/* Someone else is fetching: a still-valid token will
			 * do; otherwise wait for that fetch, within our own
			 * deadline. */
			rc = valid ? copy_token(t, out, outsz, err)
			           : wait_for_fetch(t, deadline_ms, now, err);
			if (valid || rc != GCS_OK)
				goto out;
			continue;
		}
		if (!t->last_ok && t->last_fail_ms != 0 &&
		    now - t->last_fail_ms < (valid ? GCS_TOKEN_EARLY_RETRY_MS
		                                   : GCS_TOKEN_FAIL_HOLD_MS)) {
			/* The source failed a moment ago: the token in
			 * hand while it lasts, else fail fast. */
			rc = valid
			    ? copy_token(t, out, outsz, err)
			    : gcs_fail(err, GCS_UNAVAILABLE, "%s", t->last_msg);
			goto out;
		}
		break;
	}
	fetched = 1;
	rc = fetch_and_keep(t, deadline_ms, now, valid, tok, sizeof(tok), out,
	    outsz, err);
out:
	if (rc == GCS_OK)
		*serial = t->serial;
	pthread_mutex_unlock(&t->mu);
	if (fetched) /* the usual path never touches TOK: no 4 KiB wipe */
		util_wipe(tok, sizeof(tok));
	return rc;
}

void
gcs_token_invalidate(gcs_token_src *t, uint64_t serial)
{
	pthread_mutex_lock(&t->mu);
	if (t->serial == serial && t->token[0] != '\0') {
		util_wipe(t->token, sizeof(t->token));
		t->expires_ms = t->refresh_ms = 0;
	}
	pthread_mutex_unlock(&t->mu);
}
