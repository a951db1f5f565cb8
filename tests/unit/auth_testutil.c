/* auth_testutil.c: fixtures for the identity tests (see the header). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "auth_testutil.h"

#define TESTUTIL_PATH_MAX 512
#define EC_COORD          32

static char tmpdir[TESTUTIL_PATH_MAX];

static void
die(const char *what)
{
	fprintf(stderr, "auth_testutil: %s\n", what);
	abort();
}

static char *
bio_string(BIO *bio)
{
	char *data = NULL, *s = NULL;
	long len = BIO_get_mem_data(bio, &data);

	if (len <= 0 || (s = strndup(data, (size_t)len)) == NULL)
		die("bio");
	return s;
}

char *
authtest_keygen(const char *type, char **pub)
{
	EVP_PKEY *k = strcmp(type, "RSA") == 0
	    ? EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048)
	    : EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	BIO *b1 = BIO_new(BIO_s_mem()), *b2 = BIO_new(BIO_s_mem());
	char *priv;

	if (k == NULL || b1 == NULL || b2 == NULL ||
	    PEM_write_bio_PrivateKey(b1, k, NULL, NULL, 0, NULL, NULL) != 1 ||
	    PEM_write_bio_PUBKEY(b2, k) != 1)
		die("keygen");
	priv = bio_string(b1);
	if (pub != NULL)
		*pub = bio_string(b2);
	BIO_free(b1);
	BIO_free(b2);
	EVP_PKEY_free(k);
	return priv;
}

static char *
bn_b64(const BIGNUM *bn, int pad)
{
	unsigned char buf[1024];
	int n = pad > 0 ? BN_bn2binpad(bn, buf, pad) : BN_bn2bin(bn, buf);

	if (n <= 0)
		die("bn");
	return auth_b64url_encode(buf, (size_t)n);
}

char *
authtest_jwk(const char *priv, const char *kid)
{
	BIO *bio = BIO_new_mem_buf(priv, -1);
	EVP_PKEY *k = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	BIGNUM *a = NULL, *b = NULL;
	char *sa, *sb, *out = malloc(2048);
	int rsa;

	if (k == NULL || out == NULL)
		die("jwk");
	rsa = EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA;
	if (rsa ? EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_N, &a) != 1 ||
	            EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_E, &b) != 1
	        : EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_X, &a) != 1 ||
	            EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_Y, &b) != 1)
		die("jwk params");
	sa = bn_b64(a, rsa ? 0 : EC_COORD);
	sb = bn_b64(b, rsa ? 0 : EC_COORD);
	if (rsa)
		snprintf(out, 2048,
		    "{\"kty\":\"RSA\",\"use\":\"sig\",\"alg\":"
		    "\"RS256\",\"kid\":\"%s\",\"n\":\"%s\",\"e\":\"%s\"}",
		    kid, sa, sb);
	else
		snprintf(out, 2048,
		    "{\"kty\":\"EC\",\"use\":\"sig\",\"alg\":"
		    "\"ES256\",\"kid\":\"%s\",\"crv\":\"P-256\",\"x\":\"%s\","
		    "\"y\":\"%s\"}",
		    kid, sa, sb);
	free(sa);
	free(sb);
	BN_free(a);
	BN_free(b);
	EVP_PKEY_free(k);
	BIO_free(bio);
	return out;
}

char *
authtest_file(const char *name, const char *content)
{
	char path[2 * TESTUTIL_PATH_MAX];
	FILE *f;

	if (tmpdir[0] == '\0') {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/lgauthtest.XXXXXX");
		if (mkdtemp(tmpdir) == NULL)
			die("mkdtemp");
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", tmpdir, name) >=
	    sizeof(path))
		die("path too long");
	f = fopen(path, "w");
	if (f == NULL || fputs(content, f) < 0 || fclose(f) != 0)
		die("write file");
	return strdup(path);
}

void
authtest_cleanup(void)
{
	char path[TESTUTIL_PATH_MAX + 256];
	DIR *d;
	struct dirent *e;

	if (tmpdir[0] == '\0')
		return;
	d = opendir(tmpdir);
	while (d != NULL && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		unlink(path);
	}
	if (d != NULL)
		closedir(d);
	rmdir(tmpdir);
	tmpdir[0] = '\0';
}

char *
authtest_bearer(const char *header, const char *payload, jwt_alg_t alg,
    const char *key)
{
	char *tok = auth_jwt_sign(header, payload, alg,
	    (const unsigned char *)key, strlen(key));
	char *out;
	size_t len;

	if (tok == NULL)
		die("sign");
	len = strlen(tok) + sizeof("Bearer ");
	out = malloc(len);
	if (out == NULL)
		die("oom");
	snprintf(out, len, "Bearer %s", tok);
	free(tok);
	return out;
}

char *
authtest_payload(const char *sub, long exp_in, long iat_in, const char *extra)
{
	long now = (long)time(NULL);
	char *out = malloc(4096);

	if (out == NULL)
		die("oom");
	snprintf(out, 4096, "{\"sub\":\"%s\",\"exp\":%ld,\"iat\":%ld%s}", sub,
	    now + exp_in, now + iat_in, extra);
	return out;
}
