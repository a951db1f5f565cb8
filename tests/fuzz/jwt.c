/*
 * jwt.c: bearer token verification (server/auth.c, auth_jwt.c,
 * auth_keys.c) with an HS256 secret and RS256/ES256 PEM keys configured,
 * an issuer and an audience required.
 *
 * Input: byte 0 picks the mode.  Raw modes pass the rest as the
 * Authorization header (with or without "Bearer ").  Signing modes take
 * the rest as HEADER NUL PAYLOAD, two JSON texts signed as they are with
 * the configured secret, or rarely the EC or RSA key (signing with them
 * costs milliseconds; raw tokens signed with them are in the corpus), so
 * that the claim checks are reached with a good signature.
 * What must hold: an accepted token gives an owner JSON can carry; a
 * refusal has a reason and never quotes the token's signature.
 */
#include <jwt.h>

#include "server/auth.h"
#include "server/auth_int.h"

#include "fuzz.h"

#define KEYS_DIR "tests/fuzz/keys/"
#define SECRET   "fuzz-secret-0123456789abcdefghijklmnopqrstuvwxyz"

static auth_ctx *ctx;
static char *ec_key, *rsa_key;

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = calloc(1, 16384);

	if (f == NULL || buf == NULL || fread(buf, 1, 16383, f) == 0) {
		fprintf(stderr,
		    "jwt: cannot read %s (run from the top "
		    "directory)\n",
		    path);
		exit(1);
	}
	fclose(f);
	return buf;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	auth_config c;
	char err[256];

	(void)argc;
	(void)argv;
	ec_key = slurp(KEYS_DIR "ec.key");
	rsa_key = slurp(KEYS_DIR "rsa.key");
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
verify(const char *authorization)
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

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in in = { data, size };
	unsigned mode = fuzz_u8(&in) % 16;
	const uint8_t *h, *p;
	size_t hl, pl;
	char *hs, *ps, *tok, *auth;
	const char *key = NULL;
	jwt_alg_t alg = JWT_ALG_HS256;

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

		if (b == 0) {
			alg = JWT_ALG_RS256;
			key = rsa_key;
		} else if (b < 8) {
			alg = JWT_ALG_ES256;
			key = ec_key;
		}
	}
	hl = fuzz_field(&in, 0, &h);
	pl = fuzz_field(&in, 0, &p);
	hs = fuzz_str(h, hl);
	ps = fuzz_str(p, pl);
	tok = key ? auth_jwt_sign(hs, ps, alg, (const unsigned char *)key,
	                strlen(key))
	          : auth_jwt_sign(hs, ps, alg, (const unsigned char *)SECRET,
	                strlen(SECRET));
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
