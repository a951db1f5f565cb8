/*
 * jwks.c: JWKS documents as an issuer's URL serves them
 * (server/auth_keys.c auth_jwks_parse).  What must hold: a document
 * gives a key set or NULL with a note, never more than AUTH_KEYS_MAX
 * keys, each bound to RS256 or ES256 with a parsed public key; and a
 * token signed by the fixed test keys is checked against every key
 * without a memory error (auth_sig_ok).
 * What bounds its rate is the code under test: every usable key is made
 * with OpenSSL 3's fromdata, written as PEM and read back (auth_keys.c:
 * libjwt 1.10 takes PEM), ~1.4 ms a key under the sanitizers.
 */
#include <jwt.h>

#include "server/auth_int.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned char input[] = "e30.e30";
	unsigned char sig[256];
	char note[256];
	auth_keyset *ks;
	size_t i;

	memset(sig, 0x5a, sizeof(sig));
	note[0] = '\0';
	ks = auth_jwks_parse((const char *)data, size, note, sizeof(note));
	FUZZ_CHECK(memchr(note, '\0', sizeof(note)) != NULL);
	if (ks == NULL) {
		FUZZ_CHECK(note[0] != '\0');
		return 0;
	}
	FUZZ_CHECK(ks->n <= AUTH_KEYS_MAX);
	for (i = 0; i < ks->n; i++) {
		const auth_key *k = &ks->keys[i];
		FUZZ_CHECK(k->alg == JWT_ALG_RS256 || k->alg == JWT_ALG_ES256);
		FUZZ_CHECK(k->pkey != NULL);
		FUZZ_CHECK(k->source == AUTH_SRC_PUBLIC);
		FUZZ_CHECK(
		    auth_sig_ok(k->pkey, k->alg, input, sizeof(input) - 1, sig,
		        k->alg == JWT_ALG_ES256 ? 64 : 256) == 0);
	}
	auth_keyset_unref(ks);
	return 0;
}
