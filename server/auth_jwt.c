/*
 * auth_jwt.c: the JWT wire format done by hand and strictly: base64url
 * without padding or stray bits, and signing (HS256, RS256, ES256 with the
 * raw R||S signature JWS wants) for minted tokens and for tests.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "server/auth_int.h"

#define ES256_HALF 32 /* bytes of R and of S in an ES256 signature */

static const char b64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int
b64url_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

unsigned char *
auth_b64url_decode(const char *src, size_t len, size_t *outlen)
{
	unsigned char *out = NULL;
	size_t o = 0, i;
	uint32_t acc = 0;
	int bits = 0;

	/* One leftover character carries 6 bits: never a whole byte. */
	if (len % 4 == 1)
		return NULL;
	out = malloc(len / 4 * 3 + 3 + 1);
	if (out == NULL)
		return NULL;
	for (i = 0; i < len; i++) {
		int v = b64url_value((unsigned char)src[i]);

		if (v < 0)
			goto fail;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	/* The bits left over must be zero, or two encodings mean one value. */
	if (acc != 0)
		goto fail;
	out[o] = '\0';
	*outlen = o;
	return out;
fail:
	free(out);
	return NULL;
}

char *
auth_b64url_encode(const unsigned char *src, size_t len)
{
	char *out = malloc(len / 3 * 4 + 4 + 1);
	size_t o = 0, i;
	uint32_t acc = 0;
	int bits = 0;

	if (out == NULL)
		return NULL;
	for (i = 0; i < len; i++) {
		acc = (acc << 8) | src[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[o++] = b64url_alphabet[(acc >> bits) & 63];
		}
		acc &= (1u << bits) - 1;
	}
	if (bits > 0)
		out[o++] = b64url_alphabet[(acc << (6 - bits)) & 63];
	out[o] = '\0';
	return out;
}

/* An ECDSA DER signature into the fixed-size R||S of JWS (RFC 7518 3.4). */
static int
es256_der_to_raw(const unsigned char *der, size_t derlen,
    unsigned char raw[2 * ES256_HALF])
{
	const unsigned char *p = der;
	ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)derlen);
	const BIGNUM *r, *s;
	int rc = -1;

	if (sig == NULL)
		return -1;
	ECDSA_SIG_get0(sig, &r, &s);
	if (BN_bn2binpad(r, raw, ES256_HALF) != ES256_HALF ||
	    BN_bn2binpad(s, raw + ES256_HALF, ES256_HALF) != ES256_HALF)
		goto out;
	rc = 0;
out:
	ECDSA_SIG_free(sig);
	return rc;
}

static int
sign_pem(const unsigned char *pem, size_t pemlen, jwt_alg_t alg,
    const char *input, unsigned char **sig, size_t *siglen)
{
	BIO *bio = BIO_new_mem_buf(pem, (int)pemlen);
	EVP_PKEY *pkey = NULL;
	EVP_MD_CTX *md = NULL;
	unsigned char *der = NULL;
	size_t derlen = 0;
	int rc = -1;

	if (bio == NULL)
		goto out;
	pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	if (pkey == NULL)
		goto out;
	if ((alg == JWT_ALG_RS256 &&
	        EVP_PKEY_get_base_id(pkey) != EVP_PKEY_RSA) ||
	    (alg == JWT_ALG_ES256 && EVP_PKEY_get_base_id(pkey) != EVP_PKEY_EC))
		goto out;
	md = EVP_MD_CTX_new();
	if (md == NULL ||
	    EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pkey) != 1 ||
	    EVP_DigestSign(md, NULL, &derlen, (const unsigned char *)input,
	        strlen(input)) != 1)
		goto out;
	der = malloc(derlen);
	if (der == NULL ||
	    EVP_DigestSign(md, der, &derlen, (const unsigned char *)input,
	        strlen(input)) != 1)
		goto out;
	if (alg == JWT_ALG_ES256) {
		*sig = malloc(2 * ES256_HALF);
		if (*sig == NULL)
			goto out;
		if (es256_der_to_raw(der, derlen, *sig) != 0) {
			free(*sig);
			*sig = NULL;
			goto out;
		}
		*siglen = 2 * ES256_HALF;
	} else {
		*sig = der;
		*siglen = derlen;
		der = NULL;
	}
	rc = 0;
out:
	free(der);
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(pkey);
	BIO_free(bio);
	return rc;
}

char *
auth_jwt_sign(const char *header, const char *payload, jwt_alg_t alg,
    const unsigned char *key, size_t keylen)
{
	char *h = NULL, *p = NULL, *input = NULL, *s = NULL, *token = NULL;
	unsigned char *sig = NULL;
	size_t siglen = 0, inlen, toklen;

	h = auth_b64url_encode((const unsigned char *)header, strlen(header));
	p = auth_b64url_encode((const unsigned char *)payload, strlen(payload));
	if (h == NULL || p == NULL)
		goto out;
	inlen = strlen(h) + 1 + strlen(p);
	input = malloc(inlen + 1);
	if (input == NULL)
		goto out;
	snprintf(input, inlen + 1, "%s.%s", h, p);
	if (alg == JWT_ALG_HS256) {
		unsigned int mlen = EVP_MAX_MD_SIZE;

		sig = malloc(EVP_MAX_MD_SIZE);
		if (sig == NULL ||
		    HMAC(EVP_sha256(), key, (int)keylen,
		        (const unsigned char *)input, inlen, sig,
		        &mlen) == NULL)
			goto out;
		siglen = mlen;
	} else if (alg == JWT_ALG_RS256 || alg == JWT_ALG_ES256) {
		if (sign_pem(key, keylen, alg, input, &sig, &siglen) != 0)
			goto out;
	} else {
		goto out;
	}
	s = auth_b64url_encode(sig, siglen);
	if (s == NULL)
		goto out;
	toklen = inlen + 1 + strlen(s);
	token = malloc(toklen + 1);
	if (token != NULL)
		snprintf(token, toklen + 1, "%s.%s", input, s);
out:
	free(h);
	free(p);
	free(input);
	free(sig);
	free(s);
	return token;
}

int
auth_sig_ok(EVP_PKEY *pkey, jwt_alg_t alg, const unsigned char *input,
    size_t len, const unsigned char *sig, size_t siglen)
{
	EVP_MD_CTX *md = NULL;
	ECDSA_SIG *es = NULL;
	BIGNUM *r = NULL, *s = NULL;
	unsigned char *der = NULL;
	int derlen, ok = 0;

	if (pkey == NULL)
		return 0;
	if (alg == JWT_ALG_ES256) {
		if (siglen != 2 * ES256_HALF)
			return 0;
		es = ECDSA_SIG_new();
		r = BN_bin2bn(sig, ES256_HALF, NULL);
		s = BN_bin2bn(sig + ES256_HALF, ES256_HALF, NULL);
		if (es == NULL || r == NULL || s == NULL ||
		    ECDSA_SIG_set0(es, r, s) != 1)
			goto out;
		r = s = NULL; /* owned by es now */
		derlen = i2d_ECDSA_SIG(es, &der);
		if (derlen <= 0)
			goto out;
		sig = der;
		siglen = (size_t)derlen;
	} else if (alg != JWT_ALG_RS256) {
		return 0;
	}
	md = EVP_MD_CTX_new();
	ok = md != NULL &&
	    EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pkey) == 1 &&
	    EVP_DigestVerify(md, sig, siglen, input, len) == 1;
out:
	EVP_MD_CTX_free(md);
	ECDSA_SIG_free(es);
	BN_free(r);
	BN_free(s);
	OPENSSL_free(der);
	return ok;
}

int
auth_claim_string(const json_t *v, char *buf, size_t buflen)
{
	int n;

	if (buflen == 0)
		return -1;
	if (json_is_string(v)) {
		size_t len = json_string_length(v);

		/* A NUL inside cannot be, jansson refuses it without
		 * JSON_ALLOW_NUL; still, do not let one truncate silently. */
		if (len >= buflen || strlen(json_string_value(v)) != len)
			return -1;
		memcpy(buf, json_string_value(v), len + 1);
		return 0;
	}
	if (json_is_integer(v))
		n = snprintf(buf, buflen, "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
	else if (json_is_true(v))
		n = snprintf(buf, buflen, "true");
	else if (json_is_false(v))
		n = snprintf(buf, buflen, "false");
	else
		return -1;
	return n < 0 || (size_t)n >= buflen ? -1 : 0;
}
