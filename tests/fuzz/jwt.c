/*
 * jwt.c: bearer token verification (server/auth.c, auth_jwt.c,
 * auth_keys.c) with an HS256 secret and RS256/ES256 PEM keys configured,
 * an issuer and an audience required.
 *
 * Input: byte 0 picks the mode.  Raw modes pass the rest as the
 * Authorization header (with or without "Bearer ").  Signing modes take
 * the rest as HEADER NUL PAYLOAD, two JSON texts signed as they are with
 * the configured secret (auth_jwt_sign), or rarely the EC or RSA key
 * (raw tokens signed with them are in the corpus), so that the claim
 * checks are reached with a good signature.  The EC and RSA keys are
 * parsed once, at start: signing is the harness's set-up, not code under
 * test, and auth_jwt_sign parses its PEM key on every call (~150 ms for
 * the EC key under the sanitizers: it held the harness near 1,800
 * inputs/s).
 * What must hold: an accepted token gives an owner JSON can carry; a
 * refusal has a reason and never quotes the token's signature; and so
 * again for a token whose signature was just verified, now from the
 * cache of verified tokens.
 *
 * That cache is emptied after every input that filled it: an input that
 * ends with more allocations than frees makes libFuzzer run a full leak
 * check (10-70 ms here), and after 1,000 of them it stops checking for
 * leaks at all (2,000 -> 20,000+ inputs/s).
 */
#include <jwt.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "server/auth.h"
#include "server/auth_ctx.h"
#include "server/auth_int.h"

#include "fuzz.h"

#define KEYS_DIR "tests/fuzz/keys/"
#define SECRET   "fuzz-secret-0123456789abcdefghijklmnopqrstuvwxyz"

#define ES_HALF 32 /* bytes of R and of S in an ES256 signature */

static auth_ctx *ctx;
static EVP_PKEY *ec_key, *rsa_key;

static EVP_PKEY *
key_load(const char *path)
{
	FILE *f = fopen(path, "rb");
	EVP_PKEY *k = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;

	if (k == NULL) {
		fprintf(stderr,
		    "jwt: cannot read %s (run from the top "
		    "directory)\n",
		    path);
		exit(1);
	}
	fclose(f);
	return k;
}

/* INPUT signed with KEY (RS256, or ES256 as JWS writes it: R || S),
 * base64url; NULL on failure. */
static char *
sign_asym(EVP_PKEY *key, int es, const char *input)
{
	unsigned char der[1024], raw[2 * ES_HALF];
	const unsigned char *p = der;
	size_t len = sizeof(der);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	ECDSA_SIG *es_sig = NULL;
	char *out = NULL;

	if (md == NULL ||
	    EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, der, &len, (const unsigned char *)input,
	        strlen(input)) != 1)
		goto done;
	if (!es) {
		out = auth_b64url_encode(der, len);
		goto done;
	}
	es_sig = d2i_ECDSA_SIG(NULL, &p, (long)len);
	if (es_sig != NULL &&
	    BN_bn2binpad(ECDSA_SIG_get0_r(es_sig), raw, ES_HALF) == ES_HALF &&
	    BN_bn2binpad(ECDSA_SIG_get0_s(es_sig), raw + ES_HALF, ES_HALF) ==
	        ES_HALF)
		out = auth_b64url_encode(raw, sizeof(raw));
done:
	ECDSA_SIG_free(es_sig);
	EVP_MD_CTX_free(md);
	return out;
}

/* HEADER.PAYLOAD signed with KEY: "h.p.s" base64url, or NULL. */
static char *
token_asym(EVP_PKEY *key, int es, const char *header, const char *payload)
{
	char *h =
	    auth_b64url_encode((const unsigned char *)header, strlen(header));
	char *p =
	    auth_b64url_encode((const unsigned char *)payload, strlen(payload));
	char *in = NULL, *s = NULL, *tok = NULL;
	size_t n;

	FUZZ_CHECK(h != NULL && p != NULL);
	n = strlen(h) + strlen(p) + 2;
	in = malloc(n);
	FUZZ_CHECK(in != NULL);
	snprintf(in, n, "%s.%s", h, p);
	s = sign_asym(key, es, in);
	if (s != NULL) {
		n = strlen(in) + strlen(s) + 2;
		tok = malloc(n);
		FUZZ_CHECK(tok != NULL);
		snprintf(tok, n, "%s.%s", in, s);
	}
	free(h);
	free(p);
	free(in);
	free(s);
	return tok;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	auth_config c;
	char err[256];

	(void)argc;
	(void)argv;
	ec_key = key_load(KEYS_DIR "ec.key");
	rsa_key = key_load(KEYS_DIR "rsa.key");
	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	c.public_keys = "rs=" KEYS_DIR "rsa.pem,es=" KEYS_DIR "ec.pem";
	c.issuer = "https://issuer.example,issuer2";
	c.audience = "lockgate";
	c.secret_audience = "lockgate";
	c.display_claims = "name,email,repository";
	c.leeway = -1;
	ctx = auth_new(&c, err, sizeof(err));
	if (ctx == NULL) {
		fprintf(stderr, "jwt: auth_new: %s\n", err);
		exit(1);
	}
	return 0;
}

static void
verify_once(const char *authorization)
{
	auth_identity id;
	auth_refusal why;
	const char *sig;
	json_t *j;

	memset(&id, 0, sizeof(id));
	memset(&why, 0, sizeof(why));
	if (auth_verify(ctx, authorization, &id, &why) == 0) {
		FUZZ_CHECK(id.owner[0] != '\0');
		j = json_string(id.owner);
		FUZZ_CHECK(j != NULL);
		json_decref(j);
		auth_identity_clear(&id);
		return;
	}
	FUZZ_CHECK(why.reason != NULL && why.reason[0] != '\0');
	FUZZ_CHECK(memchr(why.message, '\0', sizeof(why.message)) != NULL);
	sig = authorization ? strrchr(authorization, '.') : NULL;
	if (sig != NULL && strlen(sig + 1) >= 16)
		FUZZ_CHECK(strstr(why.message, sig + 1) == NULL);
}

/* Empty the cache of verified tokens (see the top). */
static void
cache_forget(void)
{
	size_t i;

	for (i = 0; i < AUTH_VERIFIED_SLOTS; i++) {
		verified *v = &ctx->cache[i];

		if (v->tok == NULL)
			continue;
		json_decref(v->claims);
		free(v->tok);
		memset(v, 0, sizeof(*v));
	}
}

static void
verify(const char *authorization)
{
	unsigned long checks = auth_sigchecks(ctx);

	verify_once(authorization);
	if (auth_sigchecks(ctx) != checks) {
		/* A signature was decoded (and, good, remembered). */
		verify_once(authorization);
		cache_forget();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in in = { data, size };
	unsigned mode = fuzz_u8(&in) % 16;
	const uint8_t *h, *p;
	size_t hl, pl;
	char *hs, *ps, *tok, *auth;
	EVP_PKEY *key = NULL;

	if (mode < 8) {
		auth = fuzz_str(in.p, in.n);
		if (mode < 6) {
			char *b = malloc(in.n + 8);
			FUZZ_CHECK(b != NULL);
			memcpy(b, "Bearer ", 7);
			memcpy(b + 7, auth, strlen(auth) + 1);
			free(auth);
			auth = b;
		}
		verify(mode == 7 ? NULL : auth);
		free(auth);
		return 0;
	}
	if (mode == 15) {
		uint8_t b = fuzz_u8(&in);

		if (b == 0)
			key = rsa_key;
		else if (b < 8)
			key = ec_key;
	}
	hl = fuzz_field(&in, 0, &h);
	pl = fuzz_field(&in, 0, &p);
	hs = fuzz_str(h, hl);
	ps = fuzz_str(p, pl);
	tok = key ? token_asym(key, key == ec_key, hs, ps)
	          : auth_jwt_sign(hs, ps, JWT_ALG_HS256,
	                (const unsigned char *)SECRET, strlen(SECRET));
	if (tok != NULL) {
		auth = malloc(strlen(tok) + 8);
		FUZZ_CHECK(auth != NULL);
		memcpy(auth, "Bearer ", 7);
		memcpy(auth + 7, tok, strlen(tok) + 1);
		verify(auth);
		free(auth);
		free(tok);
	}
	free(hs);
	free(ps);
	return 0;
}
