/*
 * test_gcs_token.c: the token sources of the gs:// client end to end
 * against build/tools/fake_gcs started with --require-auth: the metadata
 * server (GCE_METADATA_HOST) and a service-account key whose token_uri is
 * the fake's OAuth endpoint (the assertion's RS256 signature is verified
 * with the public half of a key made here).  Caching, refresh, one fetch at
 * a time, failures that give GCS_UNAVAILABLE with a clear message.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "fake_gcs_proc.h"
#include "gcs/gcs.h"
#include "gcs/gcs_client.h"
#include "tmpdir.h"

#define THREADS 8

static fake_gcs fake; /* --require-auth, metadata and OAuth */
static char tmpdir[64];
static char pubkey_path[128];
static char key_pem[8192]; /* PKCS#8 private key of the test SA */

static int
make_keys(void)
{
	EVP_PKEY *k = EVP_RSA_gen(2048);
	BIO *b = NULL;
	FILE *f = NULL;
	long n;
	char *p;
	int rc = -1;

	if (k == NULL)
		return -1;
	b = BIO_new(BIO_s_mem());
	if (b == NULL ||
	    !PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL))
		goto out;
	n = BIO_get_mem_data(b, &p);
	if (n <= 0 || (size_t)n >= sizeof(key_pem))
		goto out;
	memcpy(key_pem, p, (size_t)n);
	key_pem[n] = '\0';
	snprintf(pubkey_path, sizeof(pubkey_path), "%s/pub.pem", tmpdir);
	f = fopen(pubkey_path, "w");
	if (f == NULL || !PEM_write_PUBKEY(f, k))
		goto out;
	rc = 0;
out:
	if (f != NULL)
		fclose(f);
	BIO_free(b);
	EVP_PKEY_free(k);
	return rc;
}

static int
group_setup(void **state)
{
	const char *args[] = { "--require-auth", "--oauth-pubkey", pubkey_path,
		NULL };

	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/lg-token-XXXXXX");
	if (mkdtemp(tmpdir) == NULL || make_keys() != 0)
		return -1;
	return fake_gcs_start_group(&fake, args);
}

static int
group_teardown(void **state)
{
	(void)state;
	fake_gcs_stop(&fake);
	tmpdir_remove(tmpdir);
	return 0;
}

static int
test_setup(void **state)
{
	(void)state;
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/reset", NULL), 200);
	assert_int_equal(
	    fake_gcs_ctl(&fake,
	        "/_fake/config?token_expires=3600&token_type=Bearer", NULL),
	    200);
	unsetenv("STORAGE_EMULATOR_HOST");
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	gcs_configure(&(gcs_settings){ .endpoint = fake.url });
	setenv("GCE_METADATA_HOST", fake.hostport, 1);
	return 0;
}

static gcs_store *
open_store(void)
{
	gcs_retry_policy p = { 2000, 5, 40, 1500 };
	gcs_err err;
	gcs_store *s = gcs_gs_new("bkt", "t/", &err);

	if (s == NULL)
		fail_msg("gcs_gs_new: %s", err.msg);
	assert_int_equal(gcs_gs_authenticated(s), 1);
	gcs_gs_set_retry(s, &p);
	return s;
}

static void
get_absent(gcs_store *s, gcs_status want)
{
	gcs_object o;
	gcs_err err;

	assert_int_equal(gcs_get(s, "nothing", &o, &err), want);
}

static const char *
last_auth(void)
{
	static char buf[256];
	json_t *a = fake_gcs_json(&fake, "/_fake/requests");
	size_t i = json_array_size(a);

	buf[0] = '\0';
	while (i-- > 0) {
		json_t *e = json_array_get(a, i);
		if (strcmp(json_string_value(json_object_get(e, "op")), "get"))
			continue;
		snprintf(buf, sizeof(buf), "%s",
		    json_string_value(json_object_get(e, "authorization"))
		        ?: "");
		break;
	}
	json_decref(a);
	return buf;
}

static void
test_metadata_server_once_per_lifetime(void **state)
{
	gcs_store *s;
	gcs_stats st0, st1;
	int i;

	(void)state;
	gcs_stats_get(&st0);
	s = open_store();
	for (i = 0; i < 10; i++)
		get_absent(s, GCS_NOT_FOUND); /* 404: auth accepted */
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 1);
	assert_int_equal(fake_gcs_count(&fake, "get"), 10);
	assert_string_equal(last_auth(), "Bearer ya29.fake-1");
	gcs_stats_get(&st1);
	assert_true(st1.token_fetches - st0.token_fetches == 1);
	gcs_store_free(s);
}

static void
test_refresh_ahead_of_expiry(void **state)
{
	gcs_store *s;
	struct timespec ts = { 1, 700 * 1000000 };

	(void)state;
	/* A 2 s token is refreshed after 2 - 2/5 = 1.6 s. */
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?token_expires=2",
	                     NULL),
	    200);
	s = open_store();
	get_absent(s, GCS_NOT_FOUND);
	get_absent(s, GCS_NOT_FOUND);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 1);
	nanosleep(&ts, NULL);
	get_absent(s, GCS_NOT_FOUND);
	get_absent(s, GCS_NOT_FOUND);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 2);
	assert_string_equal(last_auth(), "Bearer ya29.fake-2");
	gcs_store_free(s);
}

static void *
getter(void *arg)
{
	gcs_object o;
	gcs_err err;

	return (void *)(intptr_t)gcs_get(arg, "nothing", &o, &err);
}

static void
test_one_fetch_at_a_time(void **state)
{
	pthread_t th[THREADS];
	gcs_store *s;
	void *rc;
	int i;

	(void)state;
	/* A slow metadata server: all threads need the token at once. */
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=metadata&kind=latency&ms=300",
	                     NULL),
	    200);
	s = open_store();
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, getter, s), 0);
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], &rc);
		assert_int_equal((intptr_t)rc, GCS_NOT_FOUND);
	}
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 1);
	assert_int_equal(fake_gcs_count(&fake, "get"), THREADS);
	gcs_store_free(s);
}

static void
test_metadata_failures(void **state)
{
	gcs_store *s;
	gcs_object o;
	gcs_err err;
	fake_gcs dead;

	(void)state;
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=metadata&kind=500", NULL),
	    200);
	s = open_store();
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "metadata server"));
	assert_non_null(strstr(err.msg, "HTTP 500"));
	assert_int_equal(err.attempts, 0);
	assert_int_equal(fake_gcs_count(&fake, "get"), 0);
	gcs_store_free(s);

	/* No metadata server at all (a closed port). */
	assert_int_equal(fake_gcs_start(&dead, NULL), 0);
	fake_gcs_stop(&dead);
	setenv("GCE_METADATA_HOST", dead.hostport, 1);
	s = open_store();
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "metadata server"));
	assert_int_equal(gcs_check(s, &err), GCS_UNAVAILABLE);
	gcs_store_free(s);
}

/* A 401 drops the token and the request is tried once more, at once,
 * with a new one; a second 401 is the caller's GCS_DENIED. */
static void
test_401_drops_the_token(void **state)
{
	gcs_store *s;
	gcs_object o;
	gcs_err err;

	(void)state;
	s = open_store();
	get_absent(s, GCS_NOT_FOUND);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/fault?op=get&kind=401",
	                     NULL),
	    200);
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_NOT_FOUND);
	assert_int_equal(err.attempts, 2);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 2);
	assert_string_equal(last_auth(), "Bearer ya29.fake-2");

	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=get&kind=401&count=2", NULL),
	    200);
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_DENIED);
	assert_int_equal(err.attempts, 2);
	assert_int_equal(err.http_status, 401);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 3);
	get_absent(s, GCS_NOT_FOUND);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 4);
	assert_int_equal(fake_gcs_count(&fake, "get"), 6);
	gcs_store_free(s);
}

/* A token revoked before its expires_in: the requests that carried it,
 * THREADS at once, are answered 401 and each tried again with the one new
 * token the first of them fetched; a later 401 to the old token does not
 * throw the new one away. */
static void
test_revoked_token_replaced_once(void **state)
{
	pthread_t th[THREADS];
	gcs_store *s;
	char ctl[128];
	void *rc;
	int i;

	(void)state;
	s = open_store();
	get_absent(s, GCS_NOT_FOUND);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 1);
	/* Every get is held, then checked for its token: all of them were
	 * sent with the token revoked meanwhile.  Half are answered 300 ms
	 * later than the others, once the new token is in hand. */
	snprintf(ctl, sizeof(ctl),
	    "/_fake/fault?op=get&kind=latency&ms=300&count=%d", THREADS / 2);
	assert_int_equal(fake_gcs_ctl(&fake, ctl, NULL), 200);
	snprintf(ctl, sizeof(ctl),
	    "/_fake/fault?op=get&kind=latency&ms=600&count=%d",
	    THREADS - THREADS / 2);
	assert_int_equal(fake_gcs_ctl(&fake, ctl, NULL), 200);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, getter, s), 0);
	for (i = 0; i < 100 && fake_gcs_count(&fake, "get") < 1 + THREADS; i++)
		usleep(10000);
	assert_int_equal(fake_gcs_count(&fake, "get"), 1 + THREADS);
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/revoke", NULL), 200);
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], &rc);
		assert_int_equal((intptr_t)rc, GCS_NOT_FOUND);
	}
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 2);
	assert_int_equal(fake_gcs_count(&fake, "get"), 1 + 2 * THREADS);
	get_absent(s, GCS_NOT_FOUND);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 2);
	gcs_store_free(s);
}

/* A slow token source never holds a request past the store's deadline:
 * the fetch itself is bounded by it, and so is a wait for another
 * thread's fetch. */
typedef struct slow_arg {
	gcs_store *s;
	int rc;
	char msg[GCS_ERRMSG_MAX];
} slow_arg;

static void *
slow_getter(void *arg)
{
	slow_arg *a = arg;
	gcs_object o;
	gcs_err err;

	memset(&err, 0, sizeof(err));
	a->rc = gcs_get(a->s, "nothing", &o, &err);
	snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
	return NULL;
}

static void
test_slow_source_bounded_by_deadline(void **state)
{
	gcs_retry_policy quick = { 300, 5, 40, 300 };
	gcs_retry_policy patient = { 5000, 5, 40, 3000 };
	gcs_store *s, *p;
	gcs_object o;
	gcs_err err;
	pthread_t th;
	slow_arg a;
	struct timespec ts = { 0, 200 * 1000000 };

	(void)state;
	/* The fetch itself: 2 s of latency against a 300 ms deadline. */
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=metadata&kind=latency&ms=2000",
	                     NULL),
	    200);
	s = open_store();
	gcs_gs_set_retry(s, &quick);
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "metadata server"));
	assert_int_equal(fake_gcs_count(&fake, "get"), 0);
	gcs_store_free(s);

	/* Waiting for another thread's fetch: a patient call fetches for
	 * 1.5 s; a call made meanwhile on the same store (and token source)
	 * with a 300 ms deadline gives up waiting.  The policy is read at
	 * the start of a call (and the try timeout once the token is in),
	 * so changing it between the two calls is enough here. */
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/reset", NULL), 200);
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=metadata&kind=latency&ms=1500",
	                     NULL),
	    200);
	p = open_store();
	gcs_gs_set_retry(p, &patient);
	memset(&a, 0, sizeof(a));
	a.s = p;
	assert_int_equal(pthread_create(&th, NULL, slow_getter, &a), 0);
	nanosleep(&ts, NULL); /* the patient call is fetching */
	gcs_gs_set_retry(p, &quick);
	assert_int_equal(gcs_get(p, "x", &o, &err), GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "timed out waiting"));
	pthread_join(th, NULL);
	assert_int_equal(a.rc, GCS_NOT_FOUND); /* it got its token */
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 1);
	gcs_store_free(p);
}

/* Write a service-account key file; returns its path (static buffer). */
static const char *
write_key(const char *type, const char *pem, const char *token_uri)
{
	static char path[160];
	json_t *j = json_pack("{ss ss ss ss ss}", "type", type, "client_email",
	    "locker@proj.iam.gserviceaccount.com", "private_key_id", "kid-1",
	    "private_key", pem, "token_uri", token_uri);
	FILE *f;

	snprintf(path, sizeof(path), "%s/key.json", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(json_dumpf(j, f, 0), 0);
	fclose(f);
	json_decref(j);
	return path;
}

/* What a token source answers is checked: the metadata server's answers
 * carry its mark, a token_type other than Bearer is refused, and an
 * absurd expires_in (past int64 milliseconds) is cut to a day, not an
 * overflow (the ASan+UBSan build would stop on one). */
static void
test_token_answer_checked(void **state)
{
	gcs_store *s;
	gcs_object o;
	gcs_err err;

	(void)state;
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=metadata&kind=noflavor", NULL),
	    200);
	s = open_store();
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "Metadata-Flavor"));
	assert_int_equal(fake_gcs_count(&fake, "get"), 0);
	gcs_store_free(s);

	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?token_type=MAC",
	                     NULL),
	    200);
	s = open_store();
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "token_type"));
	gcs_store_free(s);
	/* the type is case-insensitive (RFC 6749 5.1) */
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?token_type=bearer",
	                     NULL),
	    200);
	s = open_store();
	get_absent(s, GCS_NOT_FOUND);
	gcs_store_free(s);

	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/config?token_expires=9223372036854775&"
	                     "token_type=Bearer",
	                     NULL),
	    200);
	s = open_store();
	get_absent(s, GCS_NOT_FOUND);
	get_absent(s, GCS_NOT_FOUND);
	gcs_store_free(s);
	/* one fetch per store, the last one's token kept for both gets */
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 4);
}

/* Ahead of expiry, with a token still valid in hand: a token source that
 * fails is asked again only after GCS_TOKEN_EARLY_RETRY_MS, not on every
 * request, and one that hangs holds the request that asked it at most
 * GCS_TOKEN_EARLY_FETCH_MS, which then goes on with the old token (before,
 * it waited for the whole fetch, past the old token's end).  A 10 s token
 * is refreshed from 8 s on; the test sleeps that long. */
static void
test_early_refresh_window(void **state)
{
	struct timespec ts = { 8, 100 * 1000000 };
	gcs_store *s;
	int i;

	(void)state;
	assert_int_equal(fake_gcs_ctl(&fake, "/_fake/config?token_expires=10",
	                     NULL),
	    200);
	s = open_store();
	get_absent(s, GCS_NOT_FOUND);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 1);
	nanosleep(&ts, NULL);
	/* hangs 3 s, more than the 1.9 s the old token has left */
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=metadata&kind=latency&ms=3000",
	                     NULL),
	    200);
	get_absent(s, GCS_NOT_FOUND); /* the old token, after 1 s */
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 2);
	assert_string_equal(last_auth(), "Bearer ya29.fake-1");
	/* the next ones do not ask again within the retry hold, even while
	 * the source fails */
	assert_int_equal(fake_gcs_ctl(&fake,
	                     "/_fake/fault?op=metadata&kind=500&count=-1",
	                     NULL),
	    200);
	for (i = 0; i < 10; i++)
		get_absent(s, GCS_NOT_FOUND);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 2);
	gcs_store_free(s);
}

static void
test_service_account(void **state)
{
	char uri[96];
	gcs_store *s;
	json_t *st, *as;
	int i;

	(void)state;
	snprintf(uri, sizeof(uri), "%s/token", fake.url);
	setenv("GOOGLE_APPLICATION_CREDENTIALS",
	    write_key("service_account", key_pem, uri), 1);
	s = open_store();
	for (i = 0; i < 5; i++)
		get_absent(s, GCS_NOT_FOUND);
	assert_int_equal(fake_gcs_count(&fake, "token"), 1);
	assert_int_equal(fake_gcs_count(&fake, "metadata"), 0);
	assert_string_equal(last_auth(), "Bearer ya29.fake-1");
	st = fake_gcs_json(&fake, "/_fake/stats");
	as = json_object_get(st, "last_assertion");
	assert_string_equal(json_string_value(json_object_get(as, "iss")),
	    "locker@proj.iam.gserviceaccount.com");
	assert_string_equal(json_string_value(json_object_get(as, "aud")), uri);
	assert_string_equal(json_string_value(json_object_get(as, "scope")),
	    "https://www.googleapis.com/auth/devstorage.read_write");
	assert_string_equal(json_string_value(json_object_get(as, "_kid")),
	    "kid-1");
	assert_int_equal(json_integer_value(json_object_get(as, "exp")) -
	        json_integer_value(json_object_get(as, "iat")),
	    3600);
	json_decref(st);
	gcs_store_free(s);
}

static void
test_service_account_wrong_key(void **state)
{
	char uri[96], other[8192];
	EVP_PKEY *k = EVP_RSA_gen(2048);
	BIO *b = BIO_new(BIO_s_mem());
	gcs_store *s;
	gcs_object o;
	gcs_err err;
	char *p;
	long n;

	(void)state;
	assert_non_null(k);
	assert_true(PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL));
	n = BIO_get_mem_data(b, &p);
	assert_true(n > 0 && (size_t)n < sizeof(other));
	memcpy(other, p, (size_t)n);
	other[n] = '\0';
	BIO_free(b);
	EVP_PKEY_free(k);
	snprintf(uri, sizeof(uri), "%s/token", fake.url);
	setenv("GOOGLE_APPLICATION_CREDENTIALS",
	    write_key("service_account", other, uri), 1);
	s = open_store();
	assert_int_equal(gcs_get(s, "x", &o, &err), GCS_UNAVAILABLE);
	assert_non_null(strstr(err.msg, "token_uri"));
	assert_non_null(strstr(err.msg, "HTTP 400"));
	assert_null(strstr(err.msg, "PRIVATE"));
	gcs_store_free(s);
}

/* A new private key of TYPE ("RSA", "EC") as PEM into OUT, encrypted
 * (AES-128-CBC, a passphrase) when ENCRYPTED. */
static void
other_key_pem(char *out, size_t outsz, const char *type, int encrypted)
{
	EVP_PKEY *k = strcmp(type, "EC") == 0
	    ? EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")
	    : EVP_RSA_gen(2048);
	BIO *b = BIO_new(BIO_s_mem());
	char *p;
	long n;

	assert_non_null(k);
	assert_non_null(b);
	assert_true(
	    PEM_write_bio_PrivateKey(b, k, encrypted ? EVP_aes_128_cbc() : NULL,
	        encrypted ? (unsigned char *)"secret" : NULL, encrypted ? 6 : 0,
	        NULL, NULL));
	n = BIO_get_mem_data(b, &p);
	assert_true(n > 0 && (size_t)n < outsz);
	memcpy(out, p, (size_t)n);
	out[n] = '\0';
	BIO_free(b);
	EVP_PKEY_free(k);
}

static void
test_bad_key_files(void **state)
{
	gcs_err err;
	char path[160];
	FILE *f;

	(void)state;
	setenv("GOOGLE_APPLICATION_CREDENTIALS",
	    write_key("authorized_user", key_pem, "http://x/token"), 1);
	assert_null(gcs_gs_new("bkt", "", &err));
	assert_int_equal(err.status, GCS_INVALID);
	assert_non_null(strstr(err.msg, "service_account"));
	setenv("GOOGLE_APPLICATION_CREDENTIALS",
	    write_key("service_account", "not a key", "http://x/token"), 1);
	assert_null(gcs_gs_new("bkt", "", &err));
	assert_non_null(strstr(err.msg, "private_key"));
	setenv("GOOGLE_APPLICATION_CREDENTIALS",
	    write_key("service_account", key_pem, "file:///etc/passwd"), 1);
	assert_null(gcs_gs_new("bkt", "", &err));
	assert_non_null(strstr(err.msg, "token_uri"));
	snprintf(path, sizeof(path), "%s/garbage.json", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"private_key\": \"-----BEGIN PRIVATE KEY-----\nMIIsecret", f);
	fclose(f);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	assert_null(gcs_gs_new("bkt", "", &err));
	assert_int_equal(err.status, GCS_INVALID);
	assert_null(strstr(err.msg, "MIIsecret"));
	setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json", 1);
	assert_null(gcs_gs_new("bkt", "", &err));
	assert_non_null(strstr(err.msg, "GOOGLE_APPLICATION_CREDENTIALS"));
	/* A FIFO would block the open for ever (no writer); a directory is
	 * no key either. */
	snprintf(path, sizeof(path), "%s/fifo.json", tmpdir);
	assert_int_equal(mkfifo(path, 0600), 0);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	assert_null(gcs_gs_new("bkt", "", &err));
	assert_non_null(strstr(err.msg, "not a regular file"));
	setenv("GOOGLE_APPLICATION_CREDENTIALS", tmpdir, 1);
	assert_null(gcs_gs_new("bkt", "", &err));
	assert_non_null(strstr(err.msg, "not a regular file"));
	/* An encrypted key would make OpenSSL ask for a passphrase on the
	 * terminal; an EC key cannot sign RS256: both refused at start. */
	{
		char pem[8192];

		other_key_pem(pem, sizeof(pem), "RSA", 1);
		setenv("GOOGLE_APPLICATION_CREDENTIALS",
		    write_key("service_account", pem, "http://x/token"), 1);
		assert_null(gcs_gs_new("bkt", "", &err));
		assert_non_null(strstr(err.msg, "not an unencrypted RSA key"));
		other_key_pem(pem, sizeof(pem), "EC", 0);
		setenv("GOOGLE_APPLICATION_CREDENTIALS",
		    write_key("service_account", pem, "http://x/token"), 1);
		assert_null(gcs_gs_new("bkt", "", &err));
		assert_non_null(strstr(err.msg, "not an unencrypted RSA key"));
	}
	/* token_uri of the wrong type is no reason to use the default. */
	snprintf(path, sizeof(path), "%s/num_uri.json", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	{
		json_t *j = json_pack("{ss ss ss si}", "type",
		    "service_account", "client_email", "a@b.c", "private_key",
		    key_pem, "token_uri", 12);

		assert_int_equal(json_dumpf(j, f, 0), 0);
		json_decref(j);
	}
	fclose(f);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	assert_null(gcs_gs_new("bkt", "", &err));
	assert_non_null(strstr(err.msg, "token_uri is not a string"));
	/* The emulator wins over credentials and turns auth off. */
	setenv("STORAGE_EMULATOR_HOST", fake.hostport, 1);
	{
		gcs_store *s = gcs_gs_new("bkt", "", &err);
		assert_non_null(s);
		assert_int_equal(gcs_gs_authenticated(s), 0);
		gcs_store_free(s);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_metadata_server_once_per_lifetime,
		    test_setup),
		cmocka_unit_test_setup(test_refresh_ahead_of_expiry,
		    test_setup),
		cmocka_unit_test_setup(test_one_fetch_at_a_time, test_setup),
		cmocka_unit_test_setup(test_metadata_failures, test_setup),
		cmocka_unit_test_setup(test_401_drops_the_token, test_setup),
		cmocka_unit_test_setup(test_revoked_token_replaced_once,
		    test_setup),
		cmocka_unit_test_setup(test_slow_source_bounded_by_deadline,
		    test_setup),
		cmocka_unit_test_setup(test_token_answer_checked, test_setup),
		cmocka_unit_test_setup(test_early_refresh_window, test_setup),
		cmocka_unit_test_setup(test_service_account, test_setup),
		cmocka_unit_test_setup(test_service_account_wrong_key,
		    test_setup),
		cmocka_unit_test_setup(test_bad_key_files, test_setup),
	};

	return cmocka_run_group_tests_name("gcs_token", tests, group_setup,
	    group_teardown);
}
