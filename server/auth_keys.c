/*
 * auth_keys.c: key sets.  A key set is immutable once published and shared
 * by reference count, so a reload or a JWKS refresh swaps a pointer while
 * requests in flight finish with the keys they started with.  Each key is
 * bound to one algorithm here, from configuration or the key's own type,
 * never from a token.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#include "server/auth_int.h"
#include "util/wipe.h"

#define RSA_BITS_MIN   2048
/* An RSA public exponent must be odd and at least 3 (e = 1 makes every
 * padded hash its own signature: anyone could sign) and at most 32 bits
 * (65537 is the norm; a huge e only makes each verification slow). */
#define RSA_E_BITS_MAX 32
#define EC_COORD_BYTES 32   /* P-256 */
#define JWK_FIELD_MAX  1024 /* bytes of a decoded n, e, x or y */

auth_keyset *
auth_keyset_new(void)
{
	auth_keyset *ks = calloc(1, sizeof(*ks));

	if (ks != NULL)
		ks->refs = 1;
	return ks;
}

auth_keyset *
auth_keyset_ref(auth_keyset *ks)
{
	if (ks != NULL)
		__atomic_add_fetch(&ks->refs, 1, __ATOMIC_SEQ_CST);
	return ks;
}

void
auth_keyset_unref(auth_keyset *ks)
{
	size_t i;

	if (ks == NULL ||
	    __atomic_sub_fetch(&ks->refs, 1, __ATOMIC_SEQ_CST) > 0)
		return;
	for (i = 0; i < ks->n; i++) {
		util_wipe(ks->keys[i].material, ks->keys[i].len);
		free(ks->keys[i].material);
		EVP_PKEY_free(ks->keys[i].pkey);
		free(ks->keys[i].kid);
	}
	free(ks);
}

int
auth_keyset_add(auth_keyset *ks, jwt_alg_t alg, const char *kid,
    const unsigned char *material, size_t len, auth_source source, char *err,
    size_t errlen)
{
	auth_key *k;

	if (ks->n >= AUTH_KEYS_MAX) {
		snprintf(err, errlen, "more than %d keys", AUTH_KEYS_MAX);
		return -1;
	}
	if (kid != NULL && strlen(kid) > AUTH_KID_MAX) {
		snprintf(err, errlen, "a kid is longer than %d bytes",
		    AUTH_KID_MAX);
		return -1;
	}
	k = &ks->keys[ks->n];
	memset(k, 0, sizeof(*k));
	k->material = malloc(len + 1);
	k->kid = kid != NULL ? strdup(kid) : NULL;
	if (k->material == NULL || (kid != NULL && k->kid == NULL)) {
		free(k->material);
		free(k->kid);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	{
		static unsigned long next_id;

		k->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_SEQ_CST);
	}
	memcpy(k->material, material, len);
	k->material[len] = '\0';
	if (EVP_Digest(material, len, k->fp, NULL, EVP_sha256(), NULL) != 1) {
		free(k->material);
		free(k->kid);
		snprintf(err, errlen, "cannot hash a key");
		return -1;
	}
	if (alg != JWT_ALG_HS256) {
		BIO *bio = BIO_new_mem_buf(k->material, (int)len);

		k->pkey = bio != NULL
		    ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL)
		    : NULL;
		BIO_free(bio);
		if (k->pkey == NULL) {
			free(k->material);
			free(k->kid);
			snprintf(err, errlen, "a public key is not a PEM");
			return -1;
		}
	}
	k->len = len;
	k->alg = alg;
	k->source = source;
	ks->n++;
	return 0;
}

/* The algorithm a public key may verify, by its type.  JWT_ALG_INVAL and
 * ERR for anything else. */
static jwt_alg_t
pkey_alg(EVP_PKEY *pkey, char *err, size_t errlen)
{
	char group[64];
	size_t glen = 0;

	switch (EVP_PKEY_get_base_id(pkey)) {
	case EVP_PKEY_RSA: {
		BIGNUM *e = NULL;
		bool e_ok;

		if (EVP_PKEY_get_bits(pkey) < RSA_BITS_MIN) {
			snprintf(err, errlen, "RSA keys need at least %d bits",
			    RSA_BITS_MIN);
			return JWT_ALG_INVAL;
		}
		e_ok = EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_E, &e) ==
		        1 &&
		    BN_is_odd(e) && !BN_is_one(e) &&
		    BN_num_bits(e) <= RSA_E_BITS_MAX;
		BN_free(e);
		if (!e_ok) {
			snprintf(err, errlen,
			    "an RSA key's public exponent must be odd, at "
			    "least 3 and at most %d bits",
			    RSA_E_BITS_MAX);
			return JWT_ALG_INVAL;
		}
		return JWT_ALG_RS256;
	}
	case EVP_PKEY_EC:
		if (EVP_PKEY_get_utf8_string_param(pkey,
		        OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
		        &glen) != 1 ||
		    strcmp(group, "prime256v1") != 0) {
			snprintf(err, errlen,
			    "EC keys must be on P-256 (ES256)");
			return JWT_ALG_INVAL;
		}
		return JWT_ALG_ES256;
	default:
		snprintf(err, errlen,
		    "only RSA and EC P-256 keys are supported");
		return JWT_ALG_INVAL;
	}
}

/* PKEY as a SubjectPublicKeyInfo PEM, added to KS. */
static int
add_pkey(auth_keyset *ks, EVP_PKEY *pkey, const char *kid, char *err,
    size_t errlen)
{
	BIO *bio = NULL;
	char *pem = NULL;
	long len;
	jwt_alg_t alg = pkey_alg(pkey, err, errlen);
	int rc = -1;

	if (alg == JWT_ALG_INVAL)
		return -1;
	bio = BIO_new(BIO_s_mem());
	if (bio == NULL || PEM_write_bio_PUBKEY(bio, pkey) != 1) {
		snprintf(err, errlen, "cannot encode a public key");
		goto out;
	}
	len = BIO_get_mem_data(bio, &pem);
	if (len <= 0)
		goto out;
	rc = auth_keyset_add(ks, alg, kid, (const unsigned char *)pem,
	    (size_t)len, AUTH_SRC_PUBLIC, err, errlen);
out:
	BIO_free(bio);
	return rc;
}

int
auth_keyset_add_pem_file(auth_keyset *ks, const char *path, const char *kid,
    char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	EVP_PKEY *pkey = NULL;
	char why[160];
	int rc = -1;

	if (f == NULL) {
		snprintf(err, errlen,
		    "LOCKGATE_JWT_PUBLIC_KEYS: cannot open "
		    "public key %s: %s",
		    path, strerror(errno));
		return -1;
	}
	pkey = PEM_read_PUBKEY(f, NULL, NULL, NULL);
	if (pkey == NULL) {
		snprintf(err, errlen,
		    "%s is not a PEM public key (BEGIN PUBLIC KEY)", path);
		goto out;
	}
	if (add_pkey(ks, pkey, kid, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		goto out;
	}
	rc = 0;
out:
	EVP_PKEY_free(pkey);
	fclose(f);
	return rc;
}

/* The base64url field NAME of JWK as a new BIGNUM, or NULL. */
static BIGNUM *
jwk_bn(const json_t *jwk, const char *name, size_t *len)
{
	const json_t *v = json_object_get(jwk, name);
	unsigned char *raw;
	size_t rawlen = 0;
	BIGNUM *bn;

	if (!json_is_string(v))
		return NULL;
	raw = auth_b64url_decode(json_string_value(v), json_string_length(v),
	    &rawlen);
	if (raw == NULL || rawlen == 0 || rawlen > JWK_FIELD_MAX) {
		free(raw);
		return NULL;
	}
	bn = BN_bin2bn(raw, (int)rawlen, NULL);
	if (len != NULL)
		*len = rawlen;
	free(raw);
	return bn;
}

static EVP_PKEY *
pkey_from_params(const char *type, OSSL_PARAM_BLD *bld)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
	EVP_PKEY *pkey = NULL;

	if (params == NULL || ctx == NULL || EVP_PKEY_fromdata_init(ctx) != 1 ||
	    EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
		pkey = NULL;
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	return pkey;
}

static EVP_PKEY *
jwk_rsa(const json_t *jwk)
{
	BIGNUM *n = jwk_bn(jwk, "n", NULL), *e = jwk_bn(jwk, "e", NULL);
	OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
	EVP_PKEY *pkey = NULL;

	if (n == NULL || e == NULL || bld == NULL ||
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) != 1 ||
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e) != 1)
		goto out;
	pkey = pkey_from_params("RSA", bld);
out:
	OSSL_PARAM_BLD_free(bld);
	BN_free(n);
	BN_free(e);
	return pkey;
}

static EVP_PKEY *
jwk_ec(const json_t *jwk)
{
	unsigned char point[1 + 2 * EC_COORD_BYTES];
	const json_t *crv = json_object_get(jwk, "crv");
	BIGNUM *x = NULL, *y = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *pkey = NULL;
	size_t xl = 0, yl = 0;

	if (!json_is_string(crv) ||
	    strcmp(json_string_value(crv), "P-256") != 0)
		return NULL;
	x = jwk_bn(jwk, "x", &xl);
	y = jwk_bn(jwk, "y", &yl);
	/* RFC 7518 6.2.1.2: the coordinates are full-length. */
	if (x == NULL || y == NULL || xl != EC_COORD_BYTES ||
	    yl != EC_COORD_BYTES)
		goto out;
	point[0] = 0x04; /* uncompressed */
	if (BN_bn2binpad(x, point + 1, EC_COORD_BYTES) != EC_COORD_BYTES ||
	    BN_bn2binpad(y, point + 1 + EC_COORD_BYTES, EC_COORD_BYTES) !=
	        EC_COORD_BYTES)
		goto out;
	bld = OSSL_PARAM_BLD_new();
	if (bld == NULL ||
	    OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME,
	        "prime256v1", 0) != 1 ||
	    OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY,
	        point, sizeof(point)) != 1)
		goto out;
	pkey = pkey_from_params("EC", bld);
out:
	OSSL_PARAM_BLD_free(bld);
	BN_free(x);
	BN_free(y);
	return pkey;
}

/* The string member NAME of JWK in *OUT (NULL when absent).  -1 when it
 * is there but not a string: such a key is not used (a "use": 1 or a
 * "kid": 7 must not read as a key with no use or no kid). */
static int
jwk_text(const json_t *jwk, const char *name, const char **out)
{
	const json_t *v = json_object_get(jwk, name);

	*out = json_string_value(v);
	return v != NULL && *out == NULL ? -1 : 0;
}

/* Whether JWK's key_ops (RFC 7517 4.3), when there, allow "verify". */
static bool
jwk_verifies(const json_t *jwk)
{
	const json_t *ops = json_object_get(jwk, "key_ops"), *op;
	size_t i;

	if (ops == NULL)
		return true;
	if (!json_is_array(ops))
		return false;
	json_array_foreach(ops, i, op)
	{
		if (json_is_string(op) &&
		    strcmp(json_string_value(op), "verify") == 0)
			return true;
	}
	return false;
}

/* The key of JWK when it is one to verify RS256 or ES256 tokens with
 * (its kid into *KID, borrowed from JWK), else NULL.  A key published
 * for another algorithm, or another use, stays unused. */
static EVP_PKEY *
jwk_key(const json_t *jwk, const char **kid)
{
	const char *kty, *use, *alg, *want;
	EVP_PKEY *pkey;

	if (!json_is_object(jwk) || jwk_text(jwk, "kty", &kty) != 0 ||
	    jwk_text(jwk, "use", &use) != 0 ||
	    jwk_text(jwk, "alg", &alg) != 0 || jwk_text(jwk, "kid", kid) != 0 ||
	    kty == NULL || (use != NULL && strcmp(use, "sig") != 0) ||
	    !jwk_verifies(jwk))
		return NULL;
	if (strcmp(kty, "RSA") == 0) {
		want = "RS256";
		pkey = jwk_rsa(jwk);
	} else if (strcmp(kty, "EC") == 0) {
		want = "ES256";
		pkey = jwk_ec(jwk);
	} else
		return NULL;
	if (pkey != NULL && alg != NULL && strcmp(alg, want) != 0) {
		EVP_PKEY_free(pkey);
		return NULL;
	}
	return pkey;
}

auth_keyset *
auth_jwks_parse(const char *json, size_t len, char *note, size_t notelen)
{
	json_error_t jerr;
	json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	const json_t *keys = json_object_get(doc, "keys");
	auth_keyset *ks = NULL;
	size_t i, dropped = 0;
	char why[160];

	note[0] = '\0';
	if (!json_is_array(keys)) {
		snprintf(note, notelen,
		    "the JWKS is not an object with \"keys\"");
		goto fail;
	}
	ks = auth_keyset_new();
	if (ks == NULL) {
		snprintf(note, notelen, "out of memory");
		goto fail;
	}
	for (i = 0; i < json_array_size(keys); i++) {
		const char *kid;
		EVP_PKEY *pkey = jwk_key(json_array_get(keys, i), &kid);

		if (pkey == NULL)
			continue;
		if (ks->n < AUTH_KEYS_MAX)
			(void)add_pkey(ks, pkey, kid, why, sizeof(why));
		else
			dropped++;
		EVP_PKEY_free(pkey);
	}
	if (ks->n == 0)
		snprintf(note, notelen,
		    "the JWKS holds no usable RS256 or ES256 key");
	else if (dropped > 0)
		snprintf(note, notelen,
		    "the JWKS holds %zu usable keys past the first %d, "
		    "which are not used",
		    dropped, AUTH_KEYS_MAX);
	json_decref(doc);
	return ks;
fail:
	auth_keyset_unref(ks);
	json_decref(doc);
	return NULL;
}
