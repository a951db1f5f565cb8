/*
 * auth_testutil.h: keys, files and tokens for the identity tests.
 * Every string returned is new (free()); on failure the helpers abort the
 * test binary, since a test without its fixture proves nothing.
 */
#ifndef LOCKGATE_AUTH_TESTUTIL_H
#define LOCKGATE_AUTH_TESTUTIL_H

#include <stddef.h>

#include "server/auth_int.h"

/* A fresh key pair: TYPE "RSA" (2048 bits) or "EC" (P-256).  Returns the
 * private key PEM (PKCS#8); *PUB gets the public key PEM (SPKI). */
char *authtest_keygen(const char *type, char **pub);
/* The public JWK of the private key PEM PRIV, with KID, as JSON text. */
char *authtest_jwk(const char *priv, const char *kid);
/* A file holding CONTENT in this process's temp dir; returns its path. */
char *authtest_file(const char *name, const char *content);
/* Removes the temp dir and everything in it. */
void authtest_cleanup(void);
/* "Bearer " + the token signed with ALG over the two JSON texts. */
char *authtest_bearer(const char *header, const char *payload, jwt_alg_t alg,
    const char *key);
/* A payload with sub SUB, exp now+EXP_IN, iat now+IAT_IN, then EXTRA
 * (",\"k\":v..." or ""). */
char *
authtest_payload(const char *sub, long exp_in, long iat_in, const char *extra);

#endif
