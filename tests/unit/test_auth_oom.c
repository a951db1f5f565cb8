/*
 * test_auth_oom.c: every JSON allocation of a verification, of a policy
 * load and of a JWKS parse failing in turn (jansson's allocator fails the
 * Nth call): each attempt ends in a clean refusal or error, never a crash
 * or a leak (the ASan twin checks leaks), and with enough memory it works.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth_testutil.h"

#define SECRET       "an-hs256-secret-of-forty-bytes-or-so-123"
#define ATTEMPTS_MAX 2000

static long budget = -1; /* allocations left; -1: no limit */

static void *
counted_malloc(size_t n)
{
	if (budget == 0)
		return NULL;
	if (budget > 0)
		budget--;
	return malloc(n);
}

static void
test_verify_oom(void **state)
{
	char err[256];
	auth_config c;
	auth_ctx *a;
	char *p = authtest_payload("alice", 600, 0,
	    ",\"repository\":\"acme/app\",\"run_id\":\"7\",\"admin\":true");
	char *b = authtest_bearer("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", p,
	    JWT_ALG_HS256, SECRET);
	long n;
	int failures = 0, done = 0;

	(void)state;
	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	c.display_claims = "repository,run_id";
	a = auth_new(&c, err, sizeof(err));
	assert_non_null(a);
	json_set_alloc_funcs(counted_malloc, free);
	for (n = 0; n < ATTEMPTS_MAX && !done; n++) {
		auth_identity id;
		auth_refusal why;
		int rc;

		budget = n;
		rc = auth_verify(a, b, &id, &why);
		budget = -1;
		if (rc == 0) {
			assert_string_equal(id.owner, "alice");
			assert_true(id.admin);
			assert_string_equal(json_string_value(
			                        json_object_get(id.display,
			                            "run_id")),
			    "7");
			done = 1;
		} else {
			assert_non_null(why.reason);
			assert_true(why.message[0] != '\0');
			assert_null(id.claims);
			assert_null(id.display);
			failures++;
		}
		auth_identity_clear(&id);
	}
	json_set_alloc_funcs(malloc, free);
	assert_true(done);
	/* Header, payload, claims, display: dozens of allocation points. */
	assert_true(failures >= 20);
	auth_free(a);
	free(p);
	free(b);
}

static void
test_policy_and_jwks_oom(void **state)
{
	static const char policy[] =
	    "{\"rules\":[{\"name\":\"r\",\"match\":"
	    "{\"team\":[\"a*\",\"b\"]},\"locks\":[\"**\"],\"actions\":"
	    "[\"acquire\"]}]}";
	char *priv = authtest_keygen("EC", NULL);
	char *jwk = authtest_jwk(priv, "k1"), doc[4096], err[256];
	long n;
	int done = 0;

	(void)state;
	snprintf(doc, sizeof(doc), "{\"keys\":[%s]}", jwk);
	json_set_alloc_funcs(counted_malloc, free);
	for (n = 0; n < ATTEMPTS_MAX && !done; n++) {
		auth_policy *p;

		budget = n;
		p = auth_policy_parse(policy, strlen(policy), err, sizeof(err));
		budget = -1;
		done = p != NULL;
		auth_policy_free(p);
	}
	assert_true(done);
	for (n = 0, done = 0; n < ATTEMPTS_MAX && !done; n++) {
		auth_keyset *ks;

		budget = n;
		ks = auth_jwks_parse(doc, strlen(doc), err, sizeof(err));
		budget = -1;
		done = ks != NULL;
		if (ks != NULL)
			assert_int_equal(ks->n, 1);
		auth_keyset_unref(ks);
	}
	json_set_alloc_funcs(malloc, free);
	assert_true(done);
	free(priv);
	free(jwk);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verify_oom),
		cmocka_unit_test(test_policy_and_jwks_oom),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
