/*
 * auth.h: who is calling, and may they do this.
 *
 * Verifies the bearer JWT of a request against the configured key sources
 * (HS256 secret, RS256/ES256 PEM keys, a JWKS URL), each key pinned to one
 * algorithm by configuration: the token's header never chooses it.  Checks
 * exp, nbf, iat, iss, aud itself (libjwt 1.10 checks no claims).  Then the
 * policy says which actions an identity may take on which lock names.
 *
 * Secrets live only inside this module and are wiped when freed; no token,
 * key or secret ever reaches a log line or an error message.
 */
#ifndef LOCKGATE_AUTH_H
#define LOCKGATE_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "api/api.h"

#define AUTH_TOKEN_MAX           16384 /* bytes of a bearer token */
#define AUTH_LEEWAY_DEFAULT      60    /* s of clock leeway on exp/nbf/iat */
#define AUTH_OWNER_CLAIM_DEFAULT "sub" /* the claim naming an owner */
#define AUTH_JWKS_MIN_INTERVAL   60 /* s between re-fetches on unknown kids */

typedef struct auth_config {
	const char *jwt_secret;      /* HS256 secret, or NULL */
	const char *jwt_secret_file; /* file holding it, or NULL */
	const char *public_keys;     /* comma-separated PEM paths, or NULL */
	const char *jwks_url;        /* or NULL */
	const char *issuer;          /* required iss of PEM/JWKS tokens:
					comma-separated spellings, or NULL */
	const char *audience;        /* required aud of PEM/JWKS tokens:
					comma-separated, any one, or NULL */
	const char *secret_issuer;   /* the same for HS256 tokens, or NULL */
	const char *secret_audience; /* the same for HS256 tokens, or NULL */
	const char *policy_file;     /* or NULL */
	const char *owner_claim;     /* NULL = "sub"; a token of the HS256
					secret without it: "sub" */
	const char *display_claims;  /* comma-separated claim names, or NULL */
	int leeway;                  /* s; <0 = default */
	int max_token_age;           /* s; 0 = no limit */
	int jwks_min_interval;       /* s between re-fetches on unknown kids;
					0 = default (60), <0 = none (tests) */
} auth_config;

typedef enum auth_action {
	AUTH_READ,    /* inspect, list, the dashboard's data */
	AUTH_ACQUIRE, /* acquire, refresh, release */
	AUTH_ADMIN,   /* forceRelease */
} auth_action;

#define AUTH_KEY_FP_LEN 32 /* a key's fingerprint: SHA-256 */

typedef struct auth_identity {
	char owner[API_OWNER_MAX + 1]; /* the lease owner (sub or the
					  configured claim) */
	bool admin;                    /* claim "admin": true */
	json_t *display;               /* owned: display claims, or NULL */
	json_t *claims;                /* owned: every verified claim (for
					  the policy), or NULL */
	/* The fingerprint of the key that verified the token: a wait
	 * ends refused once no key of the service has it (a leaked secret
	 * replaced, a key rotated out). */
	unsigned char key_fp[AUTH_KEY_FP_LEN];
} auth_identity;

/* Why a token was refused: reason is a short snake_case code for the JSON
 * error (e.g. "token_expired", "bad_signature"); message a sentence that
 * never quotes the token. */
typedef struct auth_refusal {
	const char *reason;
	char message[200];
} auth_refusal;

typedef struct auth_ctx auth_ctx;

/* A verifier for CFG.  Strings in CFG are copied.  NULL with a message in
 * ERR when the configuration is wrong.  auth_free() wipes the secrets. */
auth_ctx *auth_new(const auth_config *cfg, char *err, size_t errlen);
void auth_free(auth_ctx *a);
/* 1 when at least one key source is configured. */
int auth_configured(const auth_ctx *a);
/* A one-line summary of the key sources and policy for --check and the
 * start log, e.g. "HS256 secret; 2 PEM keys; JWKS 3 keys; policy 4 rules";
 * never a secret.  0, or -1 when the JWKS URL has given no key yet (BUF
 * then says why). */
int auth_describe(auth_ctx *a, char *buf, size_t len);
/* Re-read keys and policy (SIGHUP).  On failure the old ones stay. */
int auth_reload(auth_ctx *a, char *err, size_t errlen);

/* Check the value of an Authorization header (NULL when absent).  0 and
 * ID filled (clear with auth_identity_clear), or -1 and WHY filled. */
int auth_verify(auth_ctx *a, const char *authorization, auth_identity *id,
    auth_refusal *why);
void auth_identity_clear(auth_identity *id);
/* Whether this thread may block up to a couple of seconds in auth_verify
 * for a JWKS re-fetch that a token's unknown kid asked for (default: no).
 * Storage workers say yes; an event loop's thread, which serves many
 * connections, never should. */
void auth_thread_may_wait(bool may);

/* 1 when ID may take ACTION on lock NAME, else 0 and a sentence in WHY.
 * NAME NULL asks "on some lock": use it before a list, then filter the
 * listed locks one by one with their names (a policy may allow reading
 * prod/ and not staging/).  Without a policy, any valid token may READ and
 * ACQUIRE, and ADMIN needs "admin": true.  With a policy, only its rules
 * count. */
int auth_allowed(auth_ctx *a, const auth_identity *id, auth_action action,
    const char *name, char *why, size_t whylen);

/* Whether ID, verified when its request arrived, may still take ACTION on
 * NAME now (a waiting acquire, before it is granted): its token has not
 * expired or grown too old since, and the policy, as reloaded since,
 * still allows it.  API_OK, or API_UNAUTHORIZED / API_FORBIDDEN with ERR
 * filled as the request's answer. */
int auth_still_allowed(auth_ctx *a, const auth_identity *id, auth_action action,
    const char *name, api_err *err);

/* An HS256 token for SUB valid TTL seconds, with "admin": true when ADMIN.
 * New string (free()), NULL on failure. */
char *auth_mint_hs256(const char *secret, size_t secret_len, const char *sub,
    long ttl, bool admin);

/* `lockgate token ...`: mint tokens for humans and CI without OIDC.
 * Returns the process exit status. */
int auth_token_main(int argc, char **argv);

#endif
