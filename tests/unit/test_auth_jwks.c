/*
 * test_auth_jwks.c: the JWKS cache against a fake JWKS server on
 * loopback, in this process: rotation (a new kid appears, the old one
 * disappears), a failing fetch keeps the cached keys while a well-formed
 * document with no usable key revokes them, the re-fetch rate limit, a
 * hanging fetch never holding a request whose kid is cached, who waits for
 * a re-fetch (tasks, without their thread; threads that may, a few at
 * once), that a rotation during a fetch in flight is waited for, and
 * which published
 * keys are refused (e = 1, members of the wrong type, key_ops).
 *
 * The test thread says it may wait for re-fetches, as a storage worker.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <microhttpd.h>

#include "auth_testutil.h"
#include "rt/rt.h"
#include "server/auth.h"
#include "util/clock.h"

#define HANG_LIMIT_S 10 /* a hanging answer gives up after this */

/* The fake server's state, guarded by mu. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char *doc; /* the JWKS served */
static int status = 200;
static int requests; /* requests received */
static int hang;     /* 1: hold the answer until released */
static int hanging;  /* requests being held */
static const char *cache_control = "public, max-age=3600";

static struct MHD_Daemon *daemon_;
static unsigned short port;
static char url[64];
static char *rsa_priv, *ec_priv, *rsa2_priv;

static enum MHD_Result
answer(void *cls, struct MHD_Connection *c, const char *u, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **con)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	const char *cc;
	char *body;
	int st;

	(void)cls;
	(void)u;
	(void)method;
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con;
	pthread_mutex_lock(&mu);
	requests++;
	pthread_cond_broadcast(&cv);
	/* The answer is the document as it was when the request came, as
	 * one already on its way: a rotation while it is held is not in it. */
	body = strdup(doc);
	st = status;
	cc = cache_control;
	if (hang) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += HANG_LIMIT_S;
		hanging++;
		pthread_cond_broadcast(&cv);
		while (hang && pthread_cond_timedwait(&cv, &mu, &until) == 0)
			;
		hanging--;
	}
	pthread_mutex_unlock(&mu);
	r = MHD_create_response_from_buffer(strlen(body), body,
	    MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	if (cc != NULL)
		MHD_add_response_header(r, "Cache-Control", cc);
	ret = MHD_queue_response(c, (unsigned)st, r);
	MHD_destroy_response(r);
	return ret;
}

static void
serve(int st, const char *jwk1, const char *jwk2)
{
	char *d = malloc(8192);

	assert_non_null(d);
	snprintf(d, 8192, "{\"keys\":[%s%s%s]}", jwk1 ? jwk1 : "",
	    jwk1 && jwk2 ? "," : "", jwk2 ? jwk2 : "");
	pthread_mutex_lock(&mu);
	free(doc);
	doc = d;
	status = st;
	pthread_mutex_unlock(&mu);
}

static int
nrequests(void)
{
	int n;

	pthread_mutex_lock(&mu);
	n = requests;
	pthread_mutex_unlock(&mu);
	return n;
}

/* Wait (bounded) until the server holds one request (hang set). */
static void
wait_held(void)
{
	struct timespec until;
	int n;

	pthread_mutex_lock(&mu);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HANG_LIMIT_S;
	while (hanging == 0 && pthread_cond_timedwait(&cv, &mu, &until) == 0)
		;
	n = hanging;
	pthread_mutex_unlock(&mu);
	assert_int_equal(n, 1);
}

static int
setup(void **state)
{
	const union MHD_DaemonInfo *info;

	(void)state;
	auth_thread_may_wait(true);
	rsa_priv = authtest_keygen("RSA", NULL);
	rsa2_priv = authtest_keygen("RSA", NULL);
	ec_priv = authtest_keygen("EC", NULL);
	doc = strdup("{\"keys\":[]}");
	daemon_ = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
	        MHD_USE_THREAD_PER_CONNECTION,
	    0, NULL, NULL, answer, NULL, MHD_OPTION_SOCK_ADDR, NULL,
	    MHD_OPTION_END);
	if (daemon_ == NULL)
		return -1;
	info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
	port = info->port;
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/jwks", port);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	pthread_mutex_lock(&mu);
	hang = 0;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	MHD_stop_daemon(daemon_);
	free(doc);
	free(rsa_priv);
	free(rsa2_priv);
	free(ec_priv);
	authtest_cleanup();
	return 0;
}

static auth_ctx *
jwks_ctx(int min_interval)
{
	char err[256] = "";
	auth_config c;
	auth_ctx *a;

	memset(&c, 0, sizeof(c));
	c.jwks_url = url;
	c.issuer = "https://token.actions.githubusercontent.com";
	c.audience = "https://github.com/acme";
	c.jwks_min_interval = min_interval;
	c.leeway = -1;
	a = auth_new(&c, err, sizeof(err));
	if (a == NULL)
		fprintf(stderr, "auth_new: %s\n", err);
	return a;
}

/* The reason AUTH gives for a token of KID signed by KEY, NULL = valid. */
static const char *
verdict(auth_ctx *a, const char *alg, const char *kid, jwt_alg_t jalg,
    const char *key)
{
	static __thread char reason[64];
	char h[128], *p, *b;
	auth_identity id;
	auth_refusal why;
	int rc;

	snprintf(h, sizeof(h),
	    "{\"alg\":\"%s\",\"typ\":\"JWT\",\"kid\":\"%s\"}", alg, kid);
	p = authtest_payload("repo:acme/app:ref:refs/heads/main", 600, 0,
	    ",\"iss\":\"https://token.actions.githubusercontent.com\","
	    "\"aud\":\"https://github.com/acme\",\"run_id\":\"123\"");
	b = authtest_bearer(h, p, jalg, key);
	rc = auth_verify(a, b, &id, &why);
	snprintf(reason, sizeof(reason), "%s", rc == 0 ? "ok" : why.reason);
	auth_identity_clear(&id);
	free(p);
	free(b);
	return reason;
}

static void
test_rotated_keys_fetched(void **state)
{
	char *k1 = authtest_jwk(rsa_priv, "k1");
	char *k2 = authtest_jwk(ec_priv, "k2");
	auth_ctx *a;
	int base;

	(void)state;
	serve(200, k1, NULL);
	base = nrequests();
	a = jwks_ctx(-1); /* tests: no rate limit */
	assert_non_null(a);
	assert_int_equal(auth_configured(a), 1);
	assert_int_equal(nrequests(), base + 1);
	{
		char buf[256];

		assert_int_equal(auth_describe(a, buf, sizeof(buf)), 0);
		assert_non_null(strstr(buf, "JWKS 1 key;"));
	}
	assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256, rsa_priv),
	    "ok");
	/* Known kids are served from the cache. */
	assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256, rsa_priv),
	    "ok");
	assert_int_equal(nrequests(), base + 1);
	/* Another key under a known kid is a bad signature, not a fetch. */
	assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256, rsa2_priv),
	    "bad_signature");
	assert_int_equal(nrequests(), base + 1);

	/* Rotation: k2 appears (both published). */
	serve(200, k1, k2);
	assert_string_equal(verdict(a, "ES256", "k2", JWT_ALG_ES256, ec_priv),
	    "ok");
	assert_int_equal(nrequests(), base + 2);
	assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256, rsa_priv),
	    "ok");
	/* k1 disappears: tokens of k1 are refused once a fetch saw it go. */
	serve(200, k2, NULL);
	assert_string_equal(verdict(a, "ES256", "k9", JWT_ALG_ES256, ec_priv),
	    "unknown_key");
	assert_int_equal(nrequests(), base + 3);
	assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256, rsa_priv),
	    "unknown_key");
	assert_string_equal(verdict(a, "ES256", "k2", JWT_ALG_ES256, ec_priv),
	    "ok");
	/* A JWKS key is bound to its type's algorithm: an HS256 token
	 * naming it is not even tried. */
	assert_string_equal(verdict(a, "HS256", "k2", JWT_ALG_HS256,
	                        "an-hs256-secret-of-forty-bytes-or-so-123"),
	    "alg_not_allowed");
	auth_free(a);
	free(k1);
	free(k2);
}

static void
test_failure_keeps_cache(void **state)
{
	char *k1 = authtest_jwk(rsa_priv, "k1");
	auth_ctx *a;
	int base;

	(void)state;
	serve(200, k1, NULL);
	a = jwks_ctx(-1);
	assert_non_null(a);
	base = nrequests();
	serve(500, k1, NULL);
	/* An unknown kid asks for a fetch, which fails ... */
	assert_string_equal(verdict(a, "RS256", "k7", JWT_ALG_RS256, rsa_priv),
	    "unknown_key");
	assert_int_equal(nrequests(), base + 1);
	/* ... and the cached k1 still works. */
	assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256, rsa_priv),
	    "ok");
	/* So does it when the answer is not a JWKS at all. */
	serve(200, NULL, NULL);
	pthread_mutex_lock(&mu);
	snprintf(doc, 8192, "{\"keys\":{}}");
	pthread_mutex_unlock(&mu);
	assert_string_equal(verdict(a, "RS256", "k8", JWT_ALG_RS256, rsa_priv),
	    "unknown_key");
	assert_int_equal(nrequests(), base + 2);
	assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256, rsa_priv),
	    "ok");
	auth_free(a);
	free(k1);
}

/* A well-formed JWKS is the issuer's whole key list: one with no usable
 * key (none at all, or only keys of other kinds) removes every cached key,
 * as a rotation that drops a kid does; --check says why none is left. */
static void
test_no_usable_key_revokes(void **state)
{
	char *k1 = authtest_jwk(rsa_priv, "k1"), buf[256];
	static const char *const nothing_usable[] = {
		NULL, /* {"keys":[]} */
		"{\"kty\":\"oct\",\"k\":\"c2VjcmV0\",\"kid\":\"k8\"}",
	};
	auth_ctx *a;
	size_t i;

	(void)state;
	for (i = 0; i < 2; i++) {
		serve(200, k1, NULL);
		a = jwks_ctx(-1);
		assert_non_null(a);
		assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256,
		                        rsa_priv),
		    "ok");
		serve(200, nothing_usable[i], NULL);
		/* an unknown kid makes it look */
		assert_string_equal(verdict(a, "RS256", "k8", JWT_ALG_RS256,
		                        rsa_priv),
		    "unknown_key");
		assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256,
		                        rsa_priv),
		    "unknown_key");
		assert_int_equal(auth_describe(a, buf, sizeof(buf)), -1);
		assert_non_null(strstr(buf, "no usable RS256 or ES256 key"));
		/* and the key comes back with the issuer's next list */
		serve(200, k1, NULL);
		assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256,
		                        rsa_priv),
		    "ok");
		auth_free(a);
	}
	free(k1);
}

static void
test_refetch_rate_limit(void **state)
{
	char *k1 = authtest_jwk(rsa_priv, "k1");
	auth_ctx *a;
	int base, i;

	(void)state;
	serve(200, k1, NULL);
	base = nrequests();
	a = jwks_ctx(0); /* the default: once a minute */
	assert_non_null(a);
	for (i = 0; i < 5; i++)
		assert_string_equal(verdict(a, "RS256", "nope", JWT_ALG_RS256,
		                        rsa_priv),
		    "unknown_key");
	/* The start's fetch and one re-fetch: unknown kids cannot make us
	 * hammer the issuer. */
	assert_int_equal(nrequests(), base + 2);
	auth_free(a);
	free(k1);
}

static void
test_server_down_at_start(void **state)
{
	char err[256] = "";
	auth_config c;
	auth_ctx *a;

	(void)state;
	memset(&c, 0, sizeof(c));
	c.jwks_url = "http://127.0.0.1:1/jwks";
	c.jwks_min_interval = -1;
	a = auth_new(&c, err, sizeof(err));
	assert_non_null(a);
	assert_int_equal(auth_configured(a), 1);
	assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256, rsa_priv),
	    "unknown_key");
	/* --check says so. */
	{
		char buf[256];

		assert_int_equal(auth_describe(a, buf, sizeof(buf)), -1);
		assert_non_null(strstr(buf,
		    "JWKS: no key yet (JWKS fetch "
		    "failed"));
	}
	auth_free(a);
	c.jwks_url = "ftp://127.0.0.1/jwks";
	assert_null(auth_new(&c, err, sizeof(err)));
	assert_non_null(strstr(err, "https://"));
	/* Plain http only to a loopback address: whoever can change the
	 * document in transit can sign any token. */
	{
		static const char *const refused[] = {
			"http://example.com/jwks",
			"http://127.evil.example/jwks",
			"http://10.0.0.1/jwks",
			"http://[::2]/jwks",
		};
		static const char *const loopback[] = {
			"http://127.0.0.2:1/jwks",
			"http://[::1]:1/jwks",
			"http://localhost:1/jwks",
		};
		size_t i;

		for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
			c.jwks_url = refused[i];
			if (auth_new(&c, err, sizeof(err)) != NULL)
				fail_msg("%s was accepted", refused[i]);
			assert_non_null(strstr(err, "loopback"));
		}
		for (i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++) {
			c.jwks_url = loopback[i];
			a = auth_new(&c, err, sizeof(err));
			if (a == NULL)
				fail_msg("%s was refused: %s", loopback[i],
				    err);
			auth_free(a);
		}
	}
}

typedef struct asker {
	auth_ctx *a;
	const char *reason;
} asker;

static void *
ask_unknown(void *arg)
{
	asker *k = arg;

	k->reason = verdict(k->a, "RS256", "k5", JWT_ALG_RS256, rsa_priv);
	return NULL;
}

static void
test_hanging_fetch_does_not_stall(void **state)
{
	char *k1 = authtest_jwk(rsa_priv, "k1");
	auth_ctx *a;
	pthread_t t;
	asker k;
	int still_hanging;

	(void)state;
	serve(200, k1, NULL);
	a = jwks_ctx(-1);
	assert_non_null(a);
	pthread_mutex_lock(&mu);
	hang = 1;
	pthread_mutex_unlock(&mu);
	k.a = a;
	k.reason = NULL;
	assert_int_equal(pthread_create(&t, NULL, ask_unknown, &k), 0);
	wait_held();
	/* A token with a cached kid is verified while the fetch hangs. */
	assert_string_equal(verdict(a, "RS256", "k1", JWT_ALG_RS256, rsa_priv),
	    "ok");
	pthread_mutex_lock(&mu);
	still_hanging = hanging;
	hang = 0;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	assert_int_equal(still_hanging, 1);
	pthread_join(t, NULL);
	assert_string_equal(k.reason, "unknown_key");
	auth_free(a);
	free(k1);
}

typedef struct nowaiter {
	auth_ctx *a;
	const char *reason;
	unsigned long fetches_seen; /* completed fetches when it was answered */
	auth_jwks *j;
} nowaiter;

static void *
ask_without_waiting(void *arg)
{
	nowaiter *w = arg;

	/* A thread that has not said it may wait, as an event loop's. */
	w->reason = verdict(w->a, "ES256", "k2", JWT_ALG_ES256, ec_priv);
	return NULL;
}

/* An event loop's thread never waits for a re-fetch: the request that
 * asked for it is answered with the keys at hand, the fetch goes on, and
 * the next request finds the new key.  A thread that may wait (the test's
 * own, as a storage worker) gets the new key at once. */
static void
test_loop_thread_does_not_wait(void **state)
{
	char *k1 = authtest_jwk(rsa_priv, "k1");
	char *k2 = authtest_jwk(ec_priv, "k2");
	auth_ctx *a;
	pthread_t t;
	nowaiter w;
	int i, base;

	(void)state;
	serve(200, k1, NULL);
	a = jwks_ctx(-1);
	assert_non_null(a);
	base = nrequests();
	serve(200, k1, k2);
	memset(&w, 0, sizeof(w));
	w.a = a;
	assert_int_equal(pthread_create(&t, NULL, ask_without_waiting, &w), 0);
	pthread_join(t, NULL);
	assert_string_equal(w.reason, "unknown_key");
	/* the fetch it asked for happens anyway (bounded wait for it) */
	for (i = 0; i < 500 && nrequests() == base; i++)
		usleep(10000);
	assert_int_equal(nrequests(), base + 1);
	for (i = 0; i < 500; i++) {
		if (strcmp(verdict(a, "ES256", "k2", JWT_ALG_ES256, ec_priv),
		        "ok") == 0)
			break;
		usleep(10000);
	}
	assert_true(i < 500);
	/* the test thread may wait: a rotation is served to its request */
	{
		char *k3 = authtest_jwk(rsa2_priv, "k3");

		serve(200, k3, NULL);
		assert_string_equal(verdict(a, "RS256", "k3", JWT_ALG_RS256,
		                        rsa2_priv),
		    "ok");
		free(k3);
	}
	auth_free(a);
	free(k1);
	free(k2);
}

typedef struct refetcher {
	auth_jwks *j;
	auth_keyset *ks;
} refetcher;

static void *
refetch_may_wait(void *arg)
{
	refetcher *f = arg;

	auth_thread_may_wait(true);
	f->ks = auth_jwks_refetch(f->j);
	return NULL;
}

/* Against a hanging issuer, threads that may wait do so only a few at a
 * time: a flood of unknown kids cannot park every storage worker. */
static void
test_thread_waiters_bounded(void **state)
{
	enum { N = AUTH_JWKS_THREAD_WAITERS + 3 };
	char *k1 = authtest_jwk(rsa_priv, "k1"), err[200];
	auth_jwks_counters c;
	refetcher f[N];
	pthread_t t[N];
	auth_jwks *j;
	int i;

	(void)state;
	serve(200, k1, NULL);
	j = auth_jwks_new(url, 0, err, sizeof(err)); /* no rate limit */
	assert_non_null(j);
	pthread_mutex_lock(&mu);
	hang = 1;
	pthread_mutex_unlock(&mu);
	for (i = 0; i < N; i++) {
		f[i].j = j;
		f[i].ks = NULL;
		assert_int_equal(pthread_create(&t[i], NULL, refetch_may_wait,
		                     &f[i]),
		    0);
	}
	for (i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		/* every one is answered, with the keys at hand */
		assert_non_null(f[i].ks);
		assert_int_equal(f[i].ks->n, 1);
		auth_keyset_unref(f[i].ks);
	}
	pthread_mutex_lock(&mu);
	hang = 0;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	/* they all waited at once (a fetch hangs far longer than one wait),
	 * but never more than the bound */
	auth_jwks_counts(j, &c);
	assert_int_equal(c.thread_waiters_max, AUTH_JWKS_THREAD_WAITERS);
	assert_int_equal(c.waits, AUTH_JWKS_THREAD_WAITERS);
	auth_jwks_free(j);
	free(k1);
}

/* ---- tasks wait for a re-fetch without holding their thread ---- */

#define TASK_WAITERS 8

static void
refetch_in_task(void *arg)
{
	refetcher *f = arg;

	f->ks = auth_jwks_refetch(f->j);
}

/*
 * A rotation while a fetch is in flight: that fetch holds the document
 * from before it, so a request that asks for a re-fetch then (a thread
 * that may wait, and a task) waits for the next fetch, the first to begin
 * after it asked, and gets the new key.  The request that began the fetch
 * in flight gets what it fetched.  Deterministic: the issuer holds the
 * first fetch until both askers are seen waiting.
 */
static void
test_refetch_waits_past_fetch_in_flight(void **state)
{
	char *k1 = authtest_jwk(rsa_priv, "k1");
	char *k2 = authtest_jwk(ec_priv, "k2"), err[200];
	auth_jwks_counters c;
	refetcher early, late, task;
	pthread_t t1, t2;
	rt_loop *l = rt_loop_new();
	int64_t end;
	auth_jwks *j;
	int i, base;

	(void)state;
	assert_non_null(l);
	serve(200, k1, NULL);
	j = auth_jwks_new(url, 0, err, sizeof(err)); /* no rate limit */
	assert_non_null(j);
	base = nrequests();
	pthread_mutex_lock(&mu);
	hang = 1;
	pthread_mutex_unlock(&mu);
	early.j = late.j = task.j = j;
	early.ks = late.ks = task.ks = NULL;
	assert_int_equal(pthread_create(&t1, NULL, refetch_may_wait, &early),
	    0);
	/* The early fetch is at the issuer, its answer (k1 alone) taken. */
	wait_held();
	serve(200, k1, k2);
	assert_int_equal(pthread_create(&t2, NULL, refetch_may_wait, &late), 0);
	assert_int_equal(rt_loop_spawn(l, refetch_in_task, &task, NULL), 0);
	/* Both late askers wait (the early one too): 3 waits. */
	for (i = 0; i < 500; i++) {
		auth_jwks_counts(j, &c);
		if (c.waits == 3)
			break;
		usleep(10000);
	}
	assert_int_equal(c.waits, 3);
	pthread_mutex_lock(&mu);
	hang = 0;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	end = util_mono_ms() + 20000;
	while (rt_loop_tasks(l) > 0 && util_mono_ms() < end)
		rt_loop_run_once(l, 50);
	assert_int_equal(rt_loop_tasks(l), 0);
	assert_non_null(early.ks);
	assert_int_equal(early.ks->n, 1);
	assert_non_null(late.ks);
	assert_int_equal(late.ks->n, 2);
	assert_non_null(task.ks);
	assert_int_equal(task.ks->n, 2);
	/* One fetch after the early one served both late askers. */
	assert_int_equal(nrequests(), base + 2);
	auth_keyset_unref(early.ks);
	auth_keyset_unref(late.ks);
	auth_keyset_unref(task.ks);
	auth_jwks_free(j);
	rt_loop_free(l);
	free(k1);
	free(k2);
}

/* Tasks of one loop asking for a re-fetch all wait for it at once, none
 * holding the loop's thread (each spawn returns with its task waiting),
 * and no thread of the threads' bound is taken; the fetch's end wakes
 * them all with the new keys. */
static void
test_tasks_wait_without_their_thread(void **state)
{
	char *k1 = authtest_jwk(rsa_priv, "k1");
	char *k2 = authtest_jwk(ec_priv, "k2"), err[200];
	refetcher f[TASK_WAITERS];
	auth_jwks_counters c;
	rt_loop *l = rt_loop_new();
	int64_t end;
	auth_jwks *j;
	int i;

	(void)state;
	assert_non_null(l);
	serve(200, k1, NULL);
	j = auth_jwks_new(url, 0, err, sizeof(err)); /* no rate limit */
	assert_non_null(j);
	pthread_mutex_lock(&mu);
	hang = 1;
	pthread_mutex_unlock(&mu);
	serve(200, k1, k2);
	for (i = 0; i < TASK_WAITERS; i++) {
		f[i].j = j;
		f[i].ks = NULL;
		assert_int_equal(rt_loop_spawn(l, refetch_in_task, &f[i], NULL),
		    0);
	}
	assert_int_equal(rt_loop_tasks(l), TASK_WAITERS);
	pthread_mutex_lock(&mu);
	hang = 0;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	end = util_mono_ms() + 20000;
	while (rt_loop_tasks(l) > 0 && util_mono_ms() < end)
		rt_loop_run_once(l, 50);
	assert_int_equal(rt_loop_tasks(l), 0);
	for (i = 0; i < TASK_WAITERS; i++) {
		assert_non_null(f[i].ks);
		assert_int_equal(f[i].ks->n, 2);
		auth_keyset_unref(f[i].ks);
	}
	auth_jwks_counts(j, &c);
	assert_int_equal(c.waits, TASK_WAITERS);
	assert_int_equal(c.thread_waiters_max, 0);
	auth_jwks_free(j);
	rt_loop_free(l);
	free(k1);
	free(k2);
}

/* K (a JWK's JSON text) with member NAME's value (the text after
 * "NAME":) replaced by VALUE; a new string. */
static char *
jwk_with(const char *k, const char *name, const char *value)
{
	char key[32], *out;
	const char *p, *end;
	size_t n;

	snprintf(key, sizeof(key), "\"%s\":", name);
	p = strstr(k, key);
	assert_non_null(p);
	p += strlen(key);
	end = p;
	if (*end == '"')
		end = strchr(end + 1, '"') + 1;
	else
		while (*end != ',' && *end != '}')
			end++;
	n = strlen(k) + strlen(value) + 1;
	out = malloc(n);
	assert_non_null(out);
	snprintf(out, n, "%.*s%s%s", (int)(p - k), k, value, end);
	return out;
}

/* Published keys that must never verify anything: an RSA public exponent
 * of 1 (every padded hash is its own signature), an even or huge one;
 * kty, use, alg or kid of the wrong type; key_ops without "verify". */
static void
test_jwks_refuses_bad_keys(void **state)
{
	static const struct {
		const char *name, *value;
	} bad[] = {
		{ "e", "\"AQ\"" },       /* 1 */
		{ "e", "\"Ag\"" },       /* 2 */
		{ "e", "\"AQAAAAAB\"" }, /* 2^40 + 1 */
		{ "alg", "256" },        /* not a string */
		{ "kid", "7" },          /* not a string */
		{ "kty", "[\"RSA\"]" },  /* not a string */
		{ "use", "1" },          /* not "no use given" */
	};
	char *k1 = authtest_jwk(rsa_priv, "k1"), *k, d[8192], note[256];
	auth_keyset *ks;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		k = jwk_with(k1, bad[i].name, bad[i].value);
		snprintf(d, sizeof(d), "{\"keys\":[%s]}", k);
		ks = auth_jwks_parse(d, strlen(d), note, sizeof(note));
		assert_non_null(ks);
		if (ks->n != 0)
			fail_msg("a JWK with %s %s was used", bad[i].name,
			    bad[i].value);
		assert_non_null(strstr(note, "no usable"));
		auth_keyset_unref(ks);
		free(k);
	}
	/* e = 3 is odd and small: fine */
	k = jwk_with(k1, "e", "\"Aw\"");
	snprintf(d, sizeof(d), "{\"keys\":[%s]}", k);
	ks = auth_jwks_parse(d, strlen(d), note, sizeof(note));
	assert_non_null(ks);
	assert_int_equal(ks->n, 1);
	auth_keyset_unref(ks);
	free(k);
	/* key_ops: used only when it allows verify */
	snprintf(d, sizeof(d), "{\"keys\":[%.*s,\"key_ops\":[\"encrypt\"]}]}",
	    (int)strlen(k1) - 1, k1);
	ks = auth_jwks_parse(d, strlen(d), note, sizeof(note));
	assert_non_null(ks);
	assert_int_equal(ks->n, 0);
	auth_keyset_unref(ks);
	snprintf(d, sizeof(d),
	    "{\"keys\":[%.*s,\"key_ops\":[\"sign\",\"verify\"]}]}",
	    (int)strlen(k1) - 1, k1);
	ks = auth_jwks_parse(d, strlen(d), note, sizeof(note));
	assert_non_null(ks);
	assert_int_equal(ks->n, 1);
	assert_string_equal(note, "");
	auth_keyset_unref(ks);
	free(k1);
}

/* The keys are kept as long as Cache-Control max-age says, within the
 * bounds (a missing max-age gets the default). */
static void
test_max_age(void **state)
{
	static const struct {
		const char *cc;
		long lo, hi;
	} cases[] = {
		{ "public, max-age=3600", 3590, 3600 },
		{ "max-age=600, must-revalidate", 590, 600 },
		{ "max-age=5", AUTH_JWKS_AGE_MIN - 10, AUTH_JWKS_AGE_MIN },
		{ "max-age=999999999", AUTH_JWKS_AGE_MAX - 10,
		    AUTH_JWKS_AGE_MAX },
		{ "no-cache", AUTH_JWKS_AGE_DEFAULT - 10,
		    AUTH_JWKS_AGE_DEFAULT },
		{ NULL, AUTH_JWKS_AGE_DEFAULT - 10, AUTH_JWKS_AGE_DEFAULT },
	};
	char *k1 = authtest_jwk(rsa_priv, "k1"), err[200];
	auth_jwks *j;
	size_t i;
	long ttl;

	(void)state;
	serve(200, k1, NULL);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pthread_mutex_lock(&mu);
		cache_control = cases[i].cc;
		pthread_mutex_unlock(&mu);
		j = auth_jwks_new(url, -1, err, sizeof(err));
		assert_non_null(j);
		ttl = auth_jwks_ttl(j);
		if (ttl < cases[i].lo || ttl > cases[i].hi)
			fail_msg("Cache-Control '%s': keys kept %ld s, want "
			         "%ld..%ld",
			    cases[i].cc ? cases[i].cc : "(none)", ttl,
			    cases[i].lo, cases[i].hi);
		auth_jwks_free(j);
	}
	pthread_mutex_lock(&mu);
	cache_control = "public, max-age=3600";
	pthread_mutex_unlock(&mu);
	free(k1);
}

static void
test_jwks_parse_keeps_usable_keys(void **state)
{
	char err[256];
	char *k1 = authtest_jwk(rsa_priv, "k1"),
	     *k2 = authtest_jwk(ec_priv, "k2");
	char d[8192];
	auth_keyset *ks;

	(void)state;
	snprintf(d, sizeof(d),
	    "{\"keys\":[%s,%s,{\"kty\":\"RSA\",\"use\":"
	    "\"enc\",\"n\":\"AQAB\",\"e\":\"AQAB\",\"kid\":\"enc\"}]}",
	    k1, k2);
	ks = auth_jwks_parse(d, strlen(d), err, sizeof(err));
	assert_non_null(ks);
	assert_int_equal(ks->n, 2);
	assert_int_equal(ks->keys[0].alg, JWT_ALG_RS256);
	assert_string_equal(ks->keys[0].kid, "k1");
	assert_int_equal(ks->keys[1].alg, JWT_ALG_ES256);
	assert_non_null(
	    strstr((const char *)ks->keys[1].material, "BEGIN PUBLIC KEY"));
	auth_keyset_unref(ks);
	/* A key whose alg disagrees with its type is skipped. */
	snprintf(d, sizeof(d), "{\"keys\":[%s]}", k1);
	{
		char *p = strstr(d, "RS256");

		memcpy(p, "ES256", 5);
	}
	ks = auth_jwks_parse(d, strlen(d), err, sizeof(err));
	assert_non_null(ks);
	assert_int_equal(ks->n, 0);
	auth_keyset_unref(ks);
	/* Not a JWKS: no key set at all (the cached one stays). */
	assert_null(auth_jwks_parse("[]", 2, err, sizeof(err)));
	assert_null(auth_jwks_parse("{\"keys\":7}", 10, err, sizeof(err)));
	assert_non_null(strstr(err, "not an object"));
	/* An empty list is the issuer saying it has no key. */
	ks = auth_jwks_parse("{\"keys\":[]}", 11, err, sizeof(err));
	assert_non_null(ks);
	assert_int_equal(ks->n, 0);
	assert_non_null(strstr(err, "no usable"));
	auth_keyset_unref(ks);
	/* Past AUTH_KEYS_MAX usable keys: the first are used, and the note
	 * says the rest are not. */
	{
		size_t cap = (AUTH_KEYS_MAX + 2) * (strlen(k1) + 1) + 16, i;
		char *big = malloc(cap), *p = big;

		assert_non_null(big);
		p += sprintf(p, "{\"keys\":[");
		for (i = 0; i < AUTH_KEYS_MAX + 2; i++)
			p += sprintf(p, "%s%s", i ? "," : "", k1);
		sprintf(p, "]}");
		ks = auth_jwks_parse(big, strlen(big), err, sizeof(err));
		assert_non_null(ks);
		assert_int_equal(ks->n, AUTH_KEYS_MAX);
		assert_non_null(strstr(err, "2 usable keys past the first"));
		auth_keyset_unref(ks);
		free(big);
	}
	free(k1);
	free(k2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jwks_parse_keeps_usable_keys),
		cmocka_unit_test(test_rotated_keys_fetched),
		cmocka_unit_test(test_failure_keeps_cache),
		cmocka_unit_test(test_no_usable_key_revokes),
		cmocka_unit_test(test_loop_thread_does_not_wait),
		cmocka_unit_test(test_thread_waiters_bounded),
		cmocka_unit_test(test_tasks_wait_without_their_thread),
		cmocka_unit_test(test_refetch_waits_past_fetch_in_flight),
		cmocka_unit_test(test_jwks_refuses_bad_keys),
		cmocka_unit_test(test_refetch_rate_limit),
		cmocka_unit_test(test_server_down_at_start),
		cmocka_unit_test(test_hanging_fetch_does_not_stall),
		cmocka_unit_test(test_max_age),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
