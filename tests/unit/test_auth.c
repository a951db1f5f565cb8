/*
 * test_auth.c: the attack suite of issue 4 against auth_verify, and the
 * valid tokens of every supported kind.  Keys are generated here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth_testutil.h"

#define SECRET       "an-hs256-secret-of-forty-bytes-or-so-123"
#define OTHER_SECRET "another-secret-of-forty-bytes-or-so-4567"
#define HDR_HS       "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"
#define HDR_RS       "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"rsa1\"}"
#define HDR_ES       "{\"alg\":\"ES256\",\"typ\":\"JWT\",\"kid\":\"ec1\"}"
#define ISS          ",\"iss\":\"https://issuer.example\""
#define AUD          ",\"aud\":\"lockgate\""

static char *rsa_priv, *rsa_pub, *rsa2_priv, *ec_priv, *ec_pub;
static char *rsa_pub_path, *ec_pub_path;
static auth_ctx *hs;      /* the HS256 secret alone */
static auth_ctx *mixed;   /* secret + RSA (kid rsa1) + EC (kid ec1), iss/aud */
static auth_ctx *rsaonly; /* the RSA key alone, no kid */

static auth_ctx *
ctx(const auth_config *cfg)
{
	char err[256] = "";
	auth_ctx *a = auth_new(cfg, err, sizeof(err));

	if (a == NULL)
		fprintf(stderr, "auth_new: %s\n", err);
	return a;
}

static int
setup(void **state)
{
	char list[1024];
	auth_config c;

	(void)state;
	rsa_priv = authtest_keygen("RSA", &rsa_pub);
	rsa2_priv = authtest_keygen("RSA", NULL);
	ec_priv = authtest_keygen("EC", &ec_pub);
	rsa_pub_path = authtest_file("rsa.pem", rsa_pub);
	ec_pub_path = authtest_file("ec.pem", ec_pub);

	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	c.leeway = -1;
	hs = ctx(&c);

	snprintf(list, sizeof(list), "rsa1=%s, ec1=%s", rsa_pub_path,
	    ec_pub_path);
	c.public_keys = list;
	c.issuer = "https://issuer.example";
	c.audience = "lockgate";
	c.display_claims = "repository,run_id,actor";
	mixed = ctx(&c);

	memset(&c, 0, sizeof(c));
	c.public_keys = rsa_pub_path;
	c.leeway = -1;
	rsaonly = ctx(&c);
	return hs != NULL && mixed != NULL && rsaonly != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	auth_free(hs);
	auth_free(mixed);
	auth_free(rsaonly);
	free(rsa_priv);
	free(rsa_pub);
	free(rsa2_priv);
	free(ec_priv);
	free(ec_pub);
	free(rsa_pub_path);
	free(ec_pub_path);
	authtest_cleanup();
	return 0;
}

/* Verifies AUTHZ (freed) on A; asserts the reason, NULL meaning success. */
static void
expect(auth_ctx *a, char *authz, const char *reason)
{
	auth_identity id;
	auth_refusal why;
	int rc = auth_verify(a, authz, &id, &why);

	if (reason == NULL) {
		if (rc != 0)
			fprintf(stderr, "refused: %s %s\n", why.reason,
			    why.message);
		assert_int_equal(rc, 0);
		assert_true(id.owner[0] != '\0');
	} else {
		if (rc == 0 || strcmp(why.reason, reason) != 0)
			fprintf(stderr, "want %s, got rc %d %s %s\n", reason,
			    rc, rc == 0 ? "" : why.reason, why.message);
		assert_int_equal(rc, -1);
		assert_string_equal(why.reason, reason);
		assert_true(why.message[0] != '\0');
		assert_string_equal(id.owner, "");
		assert_null(id.claims);
		assert_null(id.display);
	}
	auth_identity_clear(&id);
	free(authz);
}

static char *
hs_token(const char *payload_extra, long exp_in, long iat_in)
{
	char *p = authtest_payload("alice", exp_in, iat_in, payload_extra);
	char *b = authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET);

	free(p);
	return b;
}

static char *
str(const char *s)
{
	char *d = strdup(s);

	assert_non_null(d);
	return d;
}

/* --- valid tokens --- */

static void
test_hs256_valid(void **state)
{
	auth_identity id;
	auth_refusal why;
	char *b = hs_token(",\"admin\":true", 600, 0);

	(void)state;
	assert_int_equal(auth_verify(hs, b, &id, &why), 0);
	assert_string_equal(id.owner, "alice");
	assert_true(id.admin);
	assert_non_null(id.claims);
	auth_identity_clear(&id);
	assert_null(id.claims);
	free(b);
	/* "admin": "true" (a string) is not admin. */
	b = hs_token(",\"admin\":\"true\"", 600, 0);
	assert_int_equal(auth_verify(hs, b, &id, &why), 0);
	assert_false(id.admin);
	auth_identity_clear(&id);
	free(b);
	/* The scheme is case-insensitive (RFC 7235). */
	b = hs_token("", 600, 0);
	memcpy(b, "bEaReR", 6);
	expect(hs, b, NULL);
}

static void
test_rs256_es256_valid(void **state)
{
	char *p = authtest_payload("repo:acme/app:ref:refs/heads/main", 600, 0,
	    ISS AUD ",\"repository\":\"acme/app\",\"run_id\":\"22259804324\"");
	auth_identity id;
	auth_refusal why;
	char *b = authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv);

	(void)state;
	assert_int_equal(auth_verify(mixed, b, &id, &why), 0);
	assert_string_equal(id.owner, "repo:acme/app:ref:refs/heads/main");
	assert_false(id.admin);
	assert_non_null(id.display);
	assert_string_equal(json_string_value(
	                        json_object_get(id.display, "run_id")),
	    "22259804324");
	assert_string_equal(json_string_value(
	                        json_object_get(id.display, "repository")),
	    "acme/app");
	assert_null(json_object_get(id.display, "actor"));
	auth_identity_clear(&id);
	free(b);
	expect(mixed, authtest_bearer(HDR_ES, p, JWT_ALG_ES256, ec_priv), NULL);
	/* A key configured without kid takes tokens with or without one. */
	expect(rsaonly, authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv),
	    NULL);
	expect(rsaonly,
	    authtest_bearer("{\"alg\":\"RS256\"}", p, JWT_ALG_RS256, rsa_priv),
	    NULL);
	free(p);
}

static void
test_aud_array_with_ours(void **state)
{
	char *p = authtest_payload("bob", 600, 0,
	    ISS ",\"aud\":[\"other\",\"lockgate\"]");

	(void)state;
	expect(mixed, authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv),
	    NULL);
	free(p);
}

static void
test_leeway_accepts_slightly_off_times(void **state)
{
	(void)state;
	/* Expired 30 s ago, issued 30 s ahead: inside the 60 s leeway. */
	expect(hs, hs_token("", -30, 30), NULL);
	expect(hs, hs_token(",\"nbf\":1", 600, 0), NULL);
}

/* --- the attack suite --- */

static void
test_alg_none_any_case(void **state)
{
	static const char *const algs[] = { "none", "None", "NONE", "nOnE" };
	char *p = authtest_payload("mallory", 600, 0, "");
	char h[128], *hb, *pb, *b;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
		snprintf(h, sizeof(h), "{\"alg\":\"%s\",\"typ\":\"JWT\"}",
		    algs[i]);
		hb = auth_b64url_encode((const unsigned char *)h, strlen(h));
		pb = auth_b64url_encode((const unsigned char *)p, strlen(p));
		b = malloc(strlen(hb) + strlen(pb) + 32);
		assert_non_null(b);
		snprintf(b, strlen(hb) + strlen(pb) + 32, "Bearer %s.%s.", hb,
		    pb);
		expect(hs, b, "alg_not_allowed");
		/* With a signature part too. */
		b = malloc(strlen(hb) + strlen(pb) + 32);
		assert_non_null(b);
		snprintf(b, strlen(hb) + strlen(pb) + 32, "Bearer %s.%s.AAAA",
		    hb, pb);
		expect(hs, b, "alg_not_allowed");
		free(hb);
		free(pb);
	}
	/* No alg at all, an alg spelled in another case, an unsupported one. */
	expect(hs,
	    authtest_bearer("{\"typ\":\"JWT\"}", p, JWT_ALG_HS256, SECRET),
	    "alg_not_allowed");
	expect(hs,
	    authtest_bearer("{\"alg\":\"hs256\"}", p, JWT_ALG_HS256, SECRET),
	    "alg_not_allowed");
	expect(hs,
	    authtest_bearer("{\"alg\":\"HS512\"}", p, JWT_ALG_HS256, SECRET),
	    "alg_not_allowed");
	expect(hs, authtest_bearer("{\"alg\":null}", p, JWT_ALG_HS256, SECRET),
	    "alg_not_allowed");
	free(p);
}

static void
test_alg_confusion(void **state)
{
	char *p = authtest_payload("mallory", 600, 0, ISS AUD);

	(void)state;
	/* HS256 signed with the RSA public key's PEM as the secret. */
	expect(rsaonly, authtest_bearer(HDR_HS, p, JWT_ALG_HS256, rsa_pub),
	    "alg_not_allowed");
	/* Same, where an HS256 secret is configured too. */
	expect(mixed, authtest_bearer(HDR_HS, p, JWT_ALG_HS256, rsa_pub),
	    "bad_signature");
	/* And with the kid of the RSA key. */
	expect(mixed,
	    authtest_bearer("{\"alg\":\"HS256\",\"kid\":\"rsa1\"}", p,
	        JWT_ALG_HS256, rsa_pub),
	    "bad_signature");
	free(p);
}

static void
test_key_of_other_alg(void **state)
{
	char *p = authtest_payload("mallory", 600, 0, ISS AUD);

	(void)state;
	/* An ES256 token where only an RSA key is configured. */
	expect(rsaonly, authtest_bearer(HDR_ES, p, JWT_ALG_ES256, ec_priv),
	    "alg_not_allowed");
	/* An RS256 token naming the EC key's kid. */
	expect(mixed,
	    authtest_bearer("{\"alg\":\"RS256\",\"kid\":\"ec1\"}", p,
	        JWT_ALG_RS256, rsa_priv),
	    "unknown_key");
	/* An ES256 header over an RSA signature. */
	expect(mixed, authtest_bearer(HDR_ES, p, JWT_ALG_RS256, rsa_priv),
	    "bad_signature");
	/* An RS256 token on an HS256-only service. */
	expect(hs, authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv),
	    "alg_not_allowed");
	free(p);
}

/* An HS256 token whose claims are sub plus FMT, where %ld is a time 600 s
 * from now; REASON as for expect(). */
static void
expect_times(const char *fmt, const char *reason)
{
	char extra[200], payload[300];

	snprintf(extra, sizeof(extra), fmt, (long)time(NULL) + 600);
	snprintf(payload, sizeof(payload), "{\"sub\":\"a\"%s}", extra);
	expect(hs, authtest_bearer(HDR_HS, payload, JWT_ALG_HS256, SECRET),
	    reason);
}

static void
test_time_claims_out_of_range_refused(void **state)
{
	char err[256];
	auth_config c;
	auth_ctx *aged;

	(void)state;
	expect(hs, hs_token("", -120, -600), "token_expired");
	expect(hs, hs_token(",\"nbf\":99999999999", 600, 0),
	    "token_not_yet_valid");
	expect(hs, hs_token("", 6000, 600), "token_issued_in_future");
	expect(hs, str("Bearer x"), "malformed_token");
	/* exp is required, and must be a number. */
	{
		char *b = authtest_bearer(HDR_HS, "{\"sub\":\"a\"}",
		    JWT_ALG_HS256, SECRET);

		expect(hs, b, "missing_claim");
		expect(hs,
		    authtest_bearer(HDR_HS,
		        "{\"sub\":\"a\",\"exp\":\"99999999999\"}",
		        JWT_ALG_HS256, SECRET),
		    "malformed_token");
	}
	/* exp, nbf and iat: whole seconds in 0..2^40 (issue 20: exp 1e30
	 * never expired). */
	expect_times(",\"exp\":1e30", "malformed_token");
	expect_times(",\"exp\":1099511627777", "malformed_token");
	expect_times(",\"exp\":1099511627776", NULL);
	expect_times(",\"exp\":-1", "malformed_token");
	expect_times(",\"exp\":%ld.5", "malformed_token");
	expect_times(",\"exp\":%ld.0", NULL);
	expect_times(",\"exp\":%ld,\"nbf\":1e300", "malformed_token");
	expect_times(",\"exp\":%ld,\"nbf\":-0.5", "malformed_token");
	expect_times(",\"exp\":%ld,\"nbf\":0", NULL);
	expect_times(",\"exp\":%ld,\"iat\":-5", "malformed_token");
	expect_times(",\"exp\":%ld,\"iat\":\"0\"", "malformed_token");
	expect_times(",\"exp\":%ld,\"iat\":null", "malformed_token");
	/* A maximum token age. */
	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	c.max_token_age = 3600;
	aged = auth_new(&c, err, sizeof(err));
	assert_non_null(aged);
	expect(aged, hs_token("", 600, -7200), "token_too_old");
	expect(aged, hs_token("", 600, -1800), NULL);
	expect(aged,
	    authtest_bearer(HDR_HS,
	        "{\"sub\":\"a\",\"exp\":"
	        "99999999999}",
	        JWT_ALG_HS256, SECRET),
	    "missing_claim");
	auth_free(aged);
}

static void
test_iss_aud_refusal_names_expected(void **state)
{
	char *p;

	(void)state;
	p = authtest_payload("m", 600, 0,
	    ",\"iss\":\"https://evil.example\"" AUD);
	expect(mixed, authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv),
	    "wrong_issuer");
	free(p);
	p = authtest_payload("m", 600, 0, AUD);
	expect(mixed, authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv),
	    "wrong_issuer");
	free(p);
	p = authtest_payload("m", 600, 0, ISS ",\"aud\":\"lockgate2\"");
	expect(mixed, authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv),
	    "wrong_audience");
	/* The refusal names what the service expects (issue 26). */
	{
		auth_identity id;
		auth_refusal why;
		char *b = authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv);

		assert_int_equal(auth_verify(mixed, b, &id, &why), -1);
		assert_string_equal(why.message,
		    "The token's audience (aud) is not the one this service "
		    "expects: \"lockgate\".");
		free(b);
	}
	free(p);
	p = authtest_payload("m", 600, 0, ",\"iss\":\"x\"" AUD);
	{
		auth_identity id;
		auth_refusal why;
		char *b = authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv);

		assert_int_equal(auth_verify(mixed, b, &id, &why), -1);
		assert_non_null(strstr(why.message,
		    "expects: \"https://issuer.example\"."));
		free(b);
	}
	free(p);
	p = authtest_payload("m", 600, 0, ISS ",\"aud\":[\"a\",\"b\"]");
	expect(mixed, authtest_bearer(HDR_ES, p, JWT_ALG_ES256, ec_priv),
	    "wrong_audience");
	free(p);
	p = authtest_payload("m", 600, 0, ISS);
	expect(mixed, authtest_bearer(HDR_ES, p, JWT_ALG_ES256, ec_priv),
	    "wrong_audience");
	free(p);
	/* The HS256 source has its own (here: no) issuer and audience. */
	p = authtest_payload("m", 600, 0, "");
	expect(mixed, authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET), NULL);
	free(p);
}

/* Replaces the payload part of "Bearer h.p.s" with PAYLOAD's encoding. */
static char *
swap_payload(const char *bearer, const char *payload)
{
	const char *d1 = strchr(bearer, '.'), *d2 = strrchr(bearer, '.');
	char *pb =
	    auth_b64url_encode((const unsigned char *)payload, strlen(payload));
	size_t len = strlen(bearer) + strlen(pb) + 1;
	char *out = malloc(len);

	assert_non_null(out);
	snprintf(out, len, "%.*s.%s%s", (int)(d1 - bearer), bearer, pb, d2);
	free(pb);
	return out;
}

static void
test_tampered_truncated_other_key(void **state)
{
	char *p = authtest_payload("alice", 600, 0, ISS AUD);
	char *q = authtest_payload("admin", 600, 0, ISS AUD ",\"admin\":true");
	char *b = authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv);
	char *d2 = strrchr(b, '.');
	unsigned char *sig;
	size_t siglen;
	char *enc, *t;

	(void)state;
	expect(mixed, swap_payload(b, q), "bad_signature");
	/* The signature cut short by 10 bytes, re-encoded strictly. */
	sig = auth_b64url_decode(d2 + 1, strlen(d2 + 1), &siglen);
	assert_non_null(sig);
	enc = auth_b64url_encode(sig, siglen - 10);
	t = malloc(strlen(b) + 1);
	assert_non_null(t);
	snprintf(t, strlen(b) + 1, "%.*s.%s", (int)(d2 - b), b, enc);
	expect(mixed, t, "bad_signature");
	free(enc);
	free(sig);
	/* Signed by another RSA key, by another secret. */
	expect(mixed, authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa2_priv),
	    "bad_signature");
	expect(hs, authtest_bearer(HDR_HS, p, JWT_ALG_HS256, OTHER_SECRET),
	    "bad_signature");
	/* Tampered HS256 payload. */
	free(b);
	b = authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET);
	expect(hs, swap_payload(b, q), "bad_signature");
	free(b);
	free(p);
	free(q);
}

/* Every one-character change or deletion of a valid token is refused:
 * strict base64url gives each byte string one spelling, and the signature
 * covers the rest. */
static void
mutate_all(auth_ctx *a, char *bearer)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij"
	                               "klmnopqrstuvwxyz0123456789-_.";
	size_t len = strlen(bearer), i;
	char *m = malloc(len + 1);
	int refused = 0;

	assert_non_null(m);
	for (i = 7; i < len; i++) { /* after "Bearer " */
		auth_identity id;
		auth_refusal why;
		const char *hit = strchr(alphabet, bearer[i]);
		size_t k = hit != NULL ? (size_t)(hit - alphabet) : 0;

		memcpy(m, bearer, len + 1);
		m[i] = alphabet[(k + 1 + i % 7) % (sizeof(alphabet) - 1)];
		if (m[i] == bearer[i])
			m[i] = bearer[i] == 'A' ? 'B' : 'A';
		assert_int_equal(auth_verify(a, m, &id, &why), -1);
		refused++;
		memcpy(m, bearer, i);
		memcpy(m + i, bearer + i + 1, len - i);
		assert_int_equal(auth_verify(a, m, &id, &why), -1);
		refused++;
	}
	assert_int_equal(refused, 2 * (int)(len - 7));
	/* And the original still passes. */
	expect(a, bearer, NULL);
	free(m);
}

static void
test_every_mutation_refused(void **state)
{
	char *p = authtest_payload("alice", 600, 0, ISS AUD);

	(void)state;
	mutate_all(hs, authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET));
	mutate_all(mixed, authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv));
	mutate_all(mixed, authtest_bearer(HDR_ES, p, JWT_ALG_ES256, ec_priv));
	free(p);
}

static void
test_unknown_kid(void **state)
{
	char *p = authtest_payload("m", 600, 0, ISS AUD);

	(void)state;
	expect(mixed,
	    authtest_bearer("{\"alg\":\"RS256\",\"kid\":\"rsa9\"}", p,
	        JWT_ALG_RS256, rsa_priv),
	    "unknown_key");
	expect(mixed,
	    authtest_bearer("{\"alg\":\"RS256\",\"kid\":7}", p, JWT_ALG_RS256,
	        rsa_priv),
	    "malformed_token");
	free(p);
}

static void
test_size_and_garbage(void **state)
{
	char *big = malloc(20 * 1024 + 16);
	size_t i;

	(void)state;
	assert_non_null(big);
	memcpy(big, "Bearer ", 7);
	for (i = 7; i < 20 * 1024 + 7; i++)
		big[i] = 'A';
	big[30] = '.';
	big[60] = '.';
	big[i] = '\0';
	expect(hs, big, "token_too_large");
	expect(hs, str("Bearer !!!!.@@@@.####"), "malformed_token");
	expect(hs, str("Bearer a.b"), "malformed_token");
	expect(hs, str("Bearer a.b.c.d"), "malformed_token");
	expect(hs, str("Bearer .."), "malformed_token");
	/* Padding, standard base64 and a stray bit are not base64url. */
	{
		char *b = hs_token("", 600, 0), *d = strchr(b, '.');
		char *t = malloc(strlen(b) + 4);

		assert_non_null(t);
		snprintf(t, strlen(b) + 4, "%.*s=%s", (int)(d - b), b, d);
		expect(hs, t, "malformed_token");
		/* "eyJ..." header: change its last char to one with low bits
		 * set would alter bytes; instead put a '+' in the payload. */
		t = str(b);
		t[(d - b) + 3] = '+';
		expect(hs, t, "malformed_token");
		free(b);
	}
	/* A stray bit: "QQ" is 'A' with 4 extra zero bits; "QR" sets one. */
	{
		char *hb = auth_b64url_encode((const unsigned char *)HDR_HS,
		    strlen(HDR_HS));
		char *t = malloc(strlen(hb) + 32);

		assert_non_null(t);
		snprintf(t, strlen(hb) + 32, "Bearer %s.QR.AAAA", hb);
		expect(hs, t, "malformed_token");
		free(hb);
	}
	/* A JSON payload that is not an object. */
	expect(hs, authtest_bearer(HDR_HS, "[1]", JWT_ALG_HS256, SECRET),
	    "malformed_token");
	/* A header that is not JSON. */
	expect(hs, authtest_bearer("{alg:HS256}", "{}", JWT_ALG_HS256, SECRET),
	    "malformed_token");
}

static void
test_empty_and_scheme(void **state)
{
	auth_identity id;
	auth_refusal why;

	(void)state;
	assert_int_equal(auth_verify(hs, NULL, &id, &why), -1);
	assert_string_equal(why.reason, "missing_token");
	expect(hs, str(""), "missing_token");
	expect(hs, str("Bearer"), "missing_token");
	expect(hs, str("Bearer    "), "missing_token");
	expect(hs, str("Basic YWxpY2U6c2VjcmV0"), "bad_scheme");
	expect(hs, str("BearerX.Y.Z"), "bad_scheme");
	{
		char *b = hs_token("", 600, 0);

		/* The token without "Bearer ". */
		expect(hs, str(b + 7), "bad_scheme");
		free(b);
	}
}

static void
test_duplicate_keys(void **state)
{
	char *p = authtest_payload("alice", 600, 0, "");

	(void)state;
	expect(hs,
	    authtest_bearer("{\"alg\":\"HS256\",\"alg\":\"none\"}", p,
	        JWT_ALG_HS256, SECRET),
	    "malformed_token");
	expect(hs,
	    authtest_bearer("{\"alg\":\"HS256\",\"alg\":\"HS256\"}", p,
	        JWT_ALG_HS256, SECRET),
	    "malformed_token");
	free(p);
	/* In the payload: sub twice. */
	p = authtest_payload("alice", 600, 0, ",\"sub\":\"root\"");
	expect(hs, authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET),
	    "malformed_token");
	free(p);
}

static void
test_header_oddities(void **state)
{
	char *p = authtest_payload("alice", 600, 0, "");

	(void)state;
	expect(hs,
	    authtest_bearer("{\"alg\":\"HS256\",\"typ\":\"at+jwt\"}", p,
	        JWT_ALG_HS256, SECRET),
	    "malformed_token");
	expect(hs,
	    authtest_bearer("{\"alg\":\"HS256\",\"crit\":[\"exp\"]}", p,
	        JWT_ALG_HS256, SECRET),
	    "malformed_token");
	expect(hs,
	    authtest_bearer("{\"alg\":\"HS256\",\"typ\":\"jwt\"}", p,
	        JWT_ALG_HS256, SECRET),
	    NULL);
	free(p);
}

static void
test_owner_claim(void **state)
{
	char err[256];
	auth_config c;
	auth_ctx *a;
	auth_identity id;
	auth_refusal why;
	char *b;

	(void)state;
	/* No sub, an empty sub, a sub with a control character (C0, C1). */
	expect(hs,
	    authtest_bearer(HDR_HS, "{\"exp\":99999999999}", JWT_ALG_HS256,
	        SECRET),
	    "missing_claim");
	expect(hs,
	    authtest_bearer(HDR_HS, "{\"sub\":\"\",\"exp\":99999999999}",
	        JWT_ALG_HS256, SECRET),
	    "missing_claim");
	expect(hs,
	    authtest_bearer(HDR_HS,
	        "{\"sub\":\"a\\nb\",\"exp\":"
	        "99999999999}",
	        JWT_ALG_HS256, SECRET),
	    "missing_claim");
	expect(hs,
	    authtest_bearer(HDR_HS,
	        "{\"sub\":\"a\\u0085b\",\"exp\":"
	        "99999999999}",
	        JWT_ALG_HS256, SECRET),
	    "missing_claim");
	/* A boolean is no owner (numbers are, as decimal text). */
	expect(hs,
	    authtest_bearer(HDR_HS, "{\"sub\":true,\"exp\":99999999999}",
	        JWT_ALG_HS256, SECRET),
	    "missing_claim");
	expect(hs,
	    authtest_bearer(HDR_HS, "{\"sub\":false,\"exp\":99999999999}",
	        JWT_ALG_HS256, SECRET),
	    "missing_claim");
	/* Another claim as owner; numbers read as strings. */
	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	c.owner_claim = "project_id";
	a = auth_new(&c, err, sizeof(err));
	assert_non_null(a);
	b = authtest_bearer(HDR_HS,
	    "{\"sub\":\"x\",\"project_id\":4242,"
	    "\"exp\":99999999999}",
	    JWT_ALG_HS256, SECRET);
	assert_int_equal(auth_verify(a, b, &id, &why), 0);
	assert_string_equal(id.owner, "4242");
	auth_identity_clear(&id);
	free(b);
	auth_free(a);
}

/* identity.md's recipe: CI tokens (PEM or JWKS) owned by "repository",
 * people's HS256 tokens from `lockgate token --sub NAME` owned by their
 * sub (issue 26: ops-anna's admin token was refused, missing_claim). */
static void
test_owner_claim_per_source(void **state)
{
	auth_config c;
	auth_ctx *a;
	auth_identity id;
	auth_refusal why;
	char *p, *b;

	(void)state;
	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	c.public_keys = rsa_pub_path;
	c.owner_claim = "repository";
	c.leeway = -1;
	a = ctx(&c);
	assert_non_null(a);
	/* `lockgate token --sub ops-anna --admin` */
	b = auth_mint_hs256(SECRET, strlen(SECRET), "ops-anna", 600, true);
	assert_non_null(b);
	p = malloc(strlen(b) + 8);
	assert_non_null(p);
	snprintf(p, strlen(b) + 8, "Bearer %s", b);
	assert_int_equal(auth_verify(a, p, &id, &why), 0);
	assert_string_equal(id.owner, "ops-anna");
	assert_true(id.admin);
	auth_identity_clear(&id);
	free(p);
	free(b);
	/* An HS256 token with the claim is owned by it, as before. */
	p = authtest_payload("x", 600, 0, ",\"repository\":\"acme/app\"");
	b = authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET);
	assert_int_equal(auth_verify(a, b, &id, &why), 0);
	assert_string_equal(id.owner, "acme/app");
	auth_identity_clear(&id);
	free(b);
	/* Present but unusable: refused, never replaced by sub. */
	expect(a,
	    authtest_bearer(HDR_HS,
	        "{\"sub\":\"x\",\"repository\":\"\",\"exp\":99999999999}",
	        JWT_ALG_HS256, SECRET),
	    "missing_claim");
	expect(a,
	    authtest_bearer(HDR_HS,
	        "{\"sub\":\"x\",\"repository\":true,\"exp\":99999999999}",
	        JWT_ALG_HS256, SECRET),
	    "missing_claim");
	/* A PEM (or JWKS) token never falls back to sub. */
	expect(a, authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv), NULL);
	free(p);
	p = authtest_payload("x", 600, 0, "");
	b = authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv);
	assert_int_equal(auth_verify(a, b, &id, &why), -1);
	assert_string_equal(why.reason, "missing_claim");
	assert_non_null(strstr(why.message, "\"repository\""));
	free(b);
	free(p);
	auth_free(a);
}

static void
test_display_cap(void **state)
{
	/* Two claims of this size fit in API_CLAIMS_BYTES_MAX, three do not. */
	char err[256], big[API_CLAIMS_BYTES_MAX / 2 - 20], extra[4096];
	auth_config c;
	auth_ctx *a;
	auth_identity id;
	auth_refusal why;
	char *p, *b;

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(extra, sizeof(extra),
	    ",\"d1\":\"%s\",\"d2\":\"%s\","
	    "\"d3\":\"%s\",\"d4\":true,\"d5\":{\"x\":1}",
	    big, big, big);
	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	c.display_claims = "d1, d2,d3,d4,d5,absent";
	a = auth_new(&c, err, sizeof(err));
	assert_non_null(a);
	p = authtest_payload("alice", 600, 0, extra);
	b = authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET);
	assert_int_equal(auth_verify(a, b, &id, &why), 0);
	/* Two big claims fit, the third does not; the boolean is kept as
	 * "true", the object is not a display value. */
	assert_non_null(json_object_get(id.display, "d1"));
	assert_non_null(json_object_get(id.display, "d2"));
	assert_null(json_object_get(id.display, "d3"));
	assert_string_equal(json_string_value(
	                        json_object_get(id.display, "d4")),
	    "true");
	assert_null(json_object_get(id.display, "d5"));
	assert_true(json_dumpb(id.display, NULL, 0, JSON_COMPACT) <=
	    API_CLAIMS_BYTES_MAX);
	auth_identity_clear(&id);
	free(p);
	free(b);
	auth_free(a);
}

static void
test_verified_cache(void **state)
{
	char *p = authtest_payload("alice", 600, 0, ISS AUD);
	char *b = authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa_priv);
	char *e = authtest_payload("alice", -120, -600, ISS AUD);
	char *be = authtest_bearer(HDR_RS, e, JWT_ALG_RS256, rsa_priv);
	char err[256], *path = authtest_file("cached.pem", rsa_pub), list[600];
	auth_config c;
	auth_ctx *a;
	unsigned long n0;
	int i;

	(void)state;
	snprintf(list, sizeof(list), "rsa1=%s", path);
	memset(&c, 0, sizeof(c));
	c.public_keys = list;
	c.leeway = -1;
	a = auth_new(&c, err, sizeof(err));
	assert_non_null(a);
	n0 = auth_sigchecks(a);
	for (i = 0; i < 5; i++)
		expect(a, str(b), NULL);
	/* One signature check for five requests with the same token. */
	assert_int_equal(auth_sigchecks(a) - n0, 1);
	/* Claims are checked every time: an expired token stays refused. */
	expect(a, str(be), "token_expired");
	expect(a, str(be), "token_expired");
	assert_int_equal(auth_sigchecks(a) - n0, 2);
	/* A forged signature is refused without reaching libjwt. */
	{
		char *f = authtest_bearer(HDR_RS, p, JWT_ALG_RS256, rsa2_priv);

		expect(a, f, "bad_signature");
		assert_int_equal(auth_sigchecks(a) - n0, 2);
	}
	/* A reload brings new key objects: the token is checked again. */
	assert_int_equal(auth_reload(a, err, sizeof(err)), 0);
	expect(a, str(b), NULL);
	assert_int_equal(auth_sigchecks(a) - n0, 3);
	/* The key replaced by another: the remembered signature is void. */
	{
		char *pub2 = NULL, *priv2 = authtest_keygen("RSA", &pub2);

		free(authtest_file("cached.pem", pub2));
		assert_int_equal(auth_reload(a, err, sizeof(err)), 0);
		expect(a, str(b), "bad_signature");
		free(priv2);
		free(pub2);
	}
	auth_free(a);
	free(path);
	free(p);
	free(b);
	free(e);
	free(be);
}

/* A token longer than the cache keeps is accepted, and verified anew each
 * time (its bytes are not held); a usual one is verified once. */
static void
test_long_token_not_cached(void **state)
{
	size_t pad = AUTH_CACHED_TOKEN_MAX, n;
	char *p = malloc(pad + 256), *b, *small;
	unsigned long n0;

	(void)state;
	assert_non_null(p);
	n = (size_t)snprintf(p, pad + 256,
	    "{\"sub\":\"alice\",\"exp\":%ld,"
	    "\"pad\":\"",
	    (long)time(NULL) + 600);
	memset(p + n, 'x', pad);
	memcpy(p + n + pad, "\"}", 3);
	b = authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET);
	assert_true(strlen(b) > AUTH_CACHED_TOKEN_MAX);
	n0 = auth_sigchecks(hs);
	expect(hs, strdup(b), NULL);
	expect(hs, strdup(b), NULL);
	assert_int_equal(auth_sigchecks(hs) - n0, 2);
	small = authtest_payload("bob", 600, 0, "");
	free(b);
	b = authtest_bearer(HDR_HS, small, JWT_ALG_HS256, SECRET);
	n0 = auth_sigchecks(hs);
	expect(hs, strdup(b), NULL);
	expect(hs, strdup(b), NULL);
	assert_int_equal(auth_sigchecks(hs) - n0, 1);
	free(b);
	free(small);
	free(p);
}

static void
test_config_errors(void **state)
{
	char err[256];
	auth_config c;
	char *bad;

	(void)state;
	memset(&c, 0, sizeof(c));
	c.jwt_secret = "short";
	assert_null(auth_new(&c, err, sizeof(err)));
	assert_non_null(strstr(err, "at least"));
	c.jwt_secret = SECRET;
	c.jwt_secret_file = "/nonexistent";
	assert_null(auth_new(&c, err, sizeof(err)));
	memset(&c, 0, sizeof(c));
	c.jwt_secret_file = "/nonexistent/secret";
	assert_null(auth_new(&c, err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent/secret"));
	memset(&c, 0, sizeof(c));
	bad = authtest_file("bad.pem", "not a key\n");
	c.public_keys = bad;
	assert_null(auth_new(&c, err, sizeof(err)));
	assert_non_null(strstr(err, "PEM"));
	free(bad);
	/* An issuer or audience setting that names none (a list of commas
	 * and spaces, "$AUD1,$AUD2" with both unset) is refused: read as
	 * unset, it would turn the check off, also beside a JWKS, which
	 * requires both. */
	{
		static const char *const empty[] = { ",", " ", " , ,", NULL };
		const char **setting[] = { &c.issuer, &c.audience,
			&c.secret_issuer, &c.secret_audience };
		size_t i, k;

		for (i = 0; empty[i] != NULL; i++) {
			for (k = 0; k < 4; k++) {
				memset(&c, 0, sizeof(c));
				c.jwt_secret = SECRET;
				*setting[k] = empty[i];
				assert_null(auth_new(&c, err, sizeof(err)));
				assert_non_null(strstr(err, "names no"));
			}
		}
	}
	/* Nothing configured: valid, but not configured. */
	memset(&c, 0, sizeof(c));
	{
		auth_ctx *a = auth_new(&c, err, sizeof(err));

		assert_non_null(a);
		assert_int_equal(auth_configured(a), 0);
		auth_free(a);
	}
	assert_int_equal(auth_configured(hs), 1);
}

static void
test_describe_names_keys_never_secret(void **state)
{
	char buf[256];

	(void)state;
	assert_int_equal(auth_describe(hs, buf, sizeof(buf)), 0);
	assert_string_equal(buf,
	    "HS256 secret; no policy (any valid token "
	    "reads and acquires)");
	assert_int_equal(auth_describe(mixed, buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, "HS256 secret; 2 PEM keys"));
	assert_null(strstr(buf, SECRET));
}

/* A context with one HS256 secret, SECRET, in the file *PATH (made here,
 * rewritten to rotate it, freed by the caller). */
static auth_ctx *
secret_file_ctx(char **path)
{
	char err[256];
	auth_config c;
	auth_ctx *a;

	*path = authtest_file("secret", SECRET "\n");
	memset(&c, 0, sizeof(c));
	c.jwt_secret_file = *path;
	a = auth_new(&c, err, sizeof(err));
	assert_non_null(a);
	return a;
}

static void
test_secret_file_and_reload(void **state)
{
	char err[256], why[200];
	char *path;
	auth_ctx *a = secret_file_ctx(&path);

	(void)state;
	expect(a, hs_token("", 600, 0), NULL);
	/* Rotate the secret in the file: old tokens stop, new ones pass. */
	free(authtest_file("secret", OTHER_SECRET "\n"));
	assert_int_equal(auth_reload(a, err, sizeof(err)), 0);
	expect(a, hs_token("", 600, 0), "bad_signature");
	{
		char *p = authtest_payload("alice", 600, 0, "");

		expect(a,
		    authtest_bearer(HDR_HS, p, JWT_ALG_HS256, OTHER_SECRET),
		    NULL);
		free(p);
	}
	/* A broken file: reload fails, the old secret stays. */
	free(authtest_file("secret", "short\n"));
	assert_int_equal(auth_reload(a, err, sizeof(err)), -1);
	{
		char *p = authtest_payload("alice", 600, 0, "");

		expect(a,
		    authtest_bearer(HDR_HS, p, JWT_ALG_HS256, OTHER_SECRET),
		    NULL);
		free(p);
	}
	(void)why;
	auth_free(a);
	free(path);
}

/*
 * A request waiting for a lock is re-checked before each write: once the
 * key that signed its token is gone (a leaked secret replaced, SIGHUP),
 * it is refused, as a new request with that token would be.  A reload
 * that keeps the key (a new key object, the same secret) refuses nothing.
 */
static void
test_still_allowed_needs_the_key(void **state)
{
	char err[256];
	char *path;
	char *b = hs_token("", 600, 0);
	auth_identity id;
	auth_refusal why;
	api_err e;
	auth_ctx *a = secret_file_ctx(&path);

	(void)state;
	assert_int_equal(auth_verify(a, b, &id, &why), 0);
	assert_int_equal(auth_still_allowed(a, &id, AUTH_ACQUIRE, "x", &e),
	    API_OK);
	assert_int_equal(auth_reload(a, err, sizeof(err)), 0);
	assert_int_equal(auth_still_allowed(a, &id, AUTH_ACQUIRE, "x", &e),
	    API_OK);
	free(authtest_file("secret", OTHER_SECRET "\n"));
	assert_int_equal(auth_reload(a, err, sizeof(err)), 0);
	assert_int_equal(auth_still_allowed(a, &id, AUTH_ACQUIRE, "x", &e),
	    API_UNAUTHORIZED);
	assert_string_equal(e.reason, "unknown_key");
	auth_identity_clear(&id);
	auth_free(a);
	free(path);
	free(b);
}

static void
test_minted_token_verifies(void **state)
{
	char *t = auth_mint_hs256(SECRET, strlen(SECRET), "carol", 60, true);
	char *b;
	auth_identity id;
	auth_refusal why;

	(void)state;
	assert_non_null(t);
	b = malloc(strlen(t) + 8);
	assert_non_null(b);
	snprintf(b, strlen(t) + 8, "Bearer %s", t);
	assert_int_equal(auth_verify(hs, b, &id, &why), 0);
	assert_string_equal(id.owner, "carol");
	assert_true(id.admin);
	auth_identity_clear(&id);
	free(b);
	free(t);
	assert_null(auth_mint_hs256(SECRET, strlen(SECRET), "", 60, false));
	assert_null(auth_mint_hs256(SECRET, strlen(SECRET), "x", 0, false));
}

/* Runs auth_token_main with ARGV and returns what it printed on stdout. */
static char *
run_token(int *rc, int argc, char **argv)
{
	char *path = authtest_file("out", "");
	FILE *f;
	int saved = dup(1), fd;
	static char buf[8192];
	size_t n;

	fflush(stdout);
	f = fopen(path, "w");
	assert_non_null(f);
	fd = fileno(f);
	dup2(fd, 1);
	*rc = auth_token_main(argc, argv);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	fclose(f);
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	free(path);
	return buf;
}

static void
test_token_cli_mints_verifiable_token(void **state)
{
	char *sf = authtest_file("tsecret", SECRET "\n");
	char *argv[] = { "token", "--secret-file", sf, "--sub", "ci-bot",
		"--ttl", "2h", "--claim", "repository=acme/app", "--admin",
		NULL };
	char *bad[] = { "token", "--sub", "x", "--ttl", "forever", NULL };
	char *res[] = { "token", "--secret-file", sf, "--sub", "x", "--claim",
		"exp=1", NULL };
	char *out, *nl, b[8192];
	auth_identity id;
	auth_refusal why;
	int rc;

	(void)state;
	out = run_token(&rc, 10, argv);
	assert_int_equal(rc, 0);
	nl = strchr(out, '\n');
	assert_non_null(nl);
	*nl = '\0';
	snprintf(b, sizeof(b), "Bearer %s", out);
	assert_int_equal(auth_verify(hs, b, &id, &why), 0);
	assert_string_equal(id.owner, "ci-bot");
	assert_true(id.admin);
	assert_string_equal(json_string_value(
	                        json_object_get(id.claims, "repository")),
	    "acme/app");
	assert_int_equal(json_integer_value(json_object_get(id.claims, "exp")) -
	        json_integer_value(json_object_get(id.claims, "iat")),
	    7200);
	auth_identity_clear(&id);
	out = run_token(&rc, 5, bad);
	assert_int_equal(rc, 2);
	assert_string_equal(out, "");
	out = run_token(&rc, 7, res);
	assert_int_equal(rc, 2);
	free(sf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hs256_valid),
		cmocka_unit_test(test_rs256_es256_valid),
		cmocka_unit_test(test_aud_array_with_ours),
		cmocka_unit_test(test_leeway_accepts_slightly_off_times),
		cmocka_unit_test(test_alg_none_any_case),
		cmocka_unit_test(test_alg_confusion),
		cmocka_unit_test(test_key_of_other_alg),
		cmocka_unit_test(test_time_claims_out_of_range_refused),
		cmocka_unit_test(test_iss_aud_refusal_names_expected),
		cmocka_unit_test(test_tampered_truncated_other_key),
		cmocka_unit_test(test_unknown_kid),
		cmocka_unit_test(test_every_mutation_refused),
		cmocka_unit_test(test_size_and_garbage),
		cmocka_unit_test(test_empty_and_scheme),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_header_oddities),
		cmocka_unit_test(test_owner_claim),
		cmocka_unit_test(test_owner_claim_per_source),
		cmocka_unit_test(test_display_cap),
		cmocka_unit_test(test_verified_cache),
		cmocka_unit_test(test_long_token_not_cached),
		cmocka_unit_test(test_config_errors),
		cmocka_unit_test(test_describe_names_keys_never_secret),
		cmocka_unit_test(test_secret_file_and_reload),
		cmocka_unit_test(test_still_allowed_needs_the_key),
		cmocka_unit_test(test_minted_token_verifies),
		cmocka_unit_test(test_token_cli_mints_verifiable_token),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
