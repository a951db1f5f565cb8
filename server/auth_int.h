/*
 * auth_int.h: the insides of the identity module, shared by its files and
 * its tests.  Nothing outside server/auth*.c and tests/ should include it.
 *
 * Grouped by file, as the prototypes of OpenBSD httpd's httpd.h are.
 */
#ifndef LOCKGATE_AUTH_INT_H
#define LOCKGATE_AUTH_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <jwt.h>

#include "server/auth.h"

#define AUTH_SECRET_MIN       32    /* bytes: RFC 7518 3.2, HS256 >= 256 bits */
#define AUTH_SECRET_MAX       4096  /* bytes of a secret file */
#define AUTH_PEM_MAX          16384 /* bytes of a PEM public key file */
#define AUTH_KEYS_MAX         64    /* keys in one key set */
#define AUTH_KID_MAX          256   /* bytes of a kid */
#define AUTH_CLAIM_MAX        1024  /* bytes of a claim read as a string */
#define AUTH_ISSUERS_MAX      4     /* accepted spellings of one issuer */
#define AUTH_POLICY_MAX       262144         /* bytes of a policy file */
#define AUTH_POLICY_RULES_MAX 256            /* rules in a policy */
#define AUTH_GLOB_MAX         512            /* bytes of one glob */
#define AUTH_TTL_MAX          (366L * 86400) /* s: the longest token `token` mints */
/* s since 1970: the latest exp, nbf or iat accepted (2^40, about the year
 * 36800); beyond it, or not a whole number of seconds, the token is
 * malformed */
#define AUTH_TIME_MAX         (1LL << 40)
#define AUTH_TTL_DEFAULT      3600   /* s: `lockgate token` without --ttl */
#define AUTH_JWKS_BODY_MAX    262144 /* bytes of a JWKS document */
#define AUTH_JWKS_TIMEOUT_MS  5000   /* one JWKS fetch, all included */
#define AUTH_JWKS_WAIT_MS \
	2000 /* a request waits this long for a re-fetch on an unknown kid */
#define AUTH_JWKS_THREAD_WAITERS \
	4 /* threads (not tasks) waiting for that fetch at once, at most */
#define AUTH_JWKS_AGE_DEFAULT 300   /* s to cache without Cache-Control */
#define AUTH_JWKS_AGE_MIN     60    /* s: clamp of max-age */
#define AUTH_JWKS_AGE_MAX     86400 /* s */
#define AUTH_JWKS_RETRY       30    /* s between tries after a failure */
#define AUTH_VERIFIED_SLOTS \
	4096 /* remembered good signatures (a power
				     of 2): OpenSSL 3 takes ~1.5 ms to read
				     the PEM libjwt wants, per call */
/* The longest token the cache keeps (it keeps the token's bytes): at most
 * AUTH_VERIFIED_SLOTS x this much memory.  Longer ones are verified on
 * every request; real OIDC tokens are 1-2 KiB. */
#define AUTH_CACHED_TOKEN_MAX 8192

/* Which configured source a key came from: each has its own iss/aud. */
typedef enum auth_source {
	AUTH_SRC_SECRET, /* the HS256 secret */
	AUTH_SRC_PUBLIC, /* PEM files and the JWKS URL */
	AUTH_SRC_COUNT,
} auth_source;

/* One verification key, bound to one algorithm. */
typedef struct auth_key {
	unsigned long id;        /* unique in the process, never reused */
	jwt_alg_t alg;           /* HS256, RS256 or ES256 */
	char *kid;               /* NULL: the key matches any kid */
	unsigned char *material; /* HS256: the secret; else a PEM */
	size_t len;
	struct evp_pkey_st *pkey; /* RS256/ES256: MATERIAL parsed once, for
				     a cheap check before libjwt's costly
				     one; NULL for HS256 */
	auth_source source;
	/* SHA-256 of MATERIAL: the same key across reloads and JWKS
	 * fetches, which give it a new id (auth_still_allowed). */
	unsigned char fp[AUTH_KEY_FP_LEN];
} auth_key;

/* An immutable, reference-counted set of keys.  Requests take a reference
 * under a short lock and verify without holding it. */
typedef struct auth_keyset {
	int refs; /* atomic */
	size_t n;
	auth_key keys[AUTH_KEYS_MAX];
} auth_keyset;

/* auth_jwt.c */

/* Strict base64url (RFC 4648 5, no padding, no stray bits) of SRC[0..LEN)
 * into a new buffer (free()) of *OUTLEN bytes plus a NUL; NULL when SRC is
 * not strict base64url or on allocation failure. */
unsigned char *auth_b64url_decode(const char *src, size_t len, size_t *outlen);
/* base64url without padding of SRC[0..LEN): a new string (free()). */
char *auth_b64url_encode(const unsigned char *src, size_t len);

/* A signed token "b64(HEADER).b64(PAYLOAD).b64(sig)" over the JSON texts
 * HEADER and PAYLOAD taken byte for byte (so tests can sign odd headers),
 * signed with ALG (HS256: KEY is the secret; RS256/ES256: KEY is a private
 * key PEM).  New string (free()), NULL on failure. */
char *auth_jwt_sign(const char *header, const char *payload, jwt_alg_t alg,
    const unsigned char *key, size_t keylen);

/* 1 when SIG[0..SIGLEN) is PKEY's RS256 or ES256 (raw R||S) signature of
 * INPUT[0..LEN), else 0.  A filter that spares libjwt's ~1.5 ms PEM decode
 * for forged tokens; libjwt still decides. */
int
auth_sig_ok(struct evp_pkey_st *pkey, jwt_alg_t alg, const unsigned char *input,
    size_t len, const unsigned char *sig, size_t siglen);

/* A claim as a string, the way CI systems mean it: strings as they are,
 * integers in decimal, booleans as true/false.  0 and BUF filled, -1 for
 * other types or when it does not fit. */
int auth_claim_string(const json_t *v, char *buf, size_t buflen);

/* auth.c */
/* Reads a secret file into a new buffer (the caller wipes and frees it),
 * trailing newlines and carriage returns dropped; NULL with ERR set. */
unsigned char *
auth_read_secret_file(const char *path, size_t *len, char *err, size_t errlen);

/* Signatures checked with jwt_decode so far (tests: the cache works). */
unsigned long auth_sigchecks(auth_ctx *a);

/* auth_keys.c */

auth_keyset *auth_keyset_new(void);
auth_keyset *auth_keyset_ref(auth_keyset *ks);
/* Drops a reference; the last one wipes and frees every key. */
void auth_keyset_unref(auth_keyset *ks);
/* Appends a key (copies KID and MATERIAL).  0, or -1 with ERR. */
int auth_keyset_add(auth_keyset *ks, jwt_alg_t alg, const char *kid,
    const unsigned char *material, size_t len, auth_source source, char *err,
    size_t errlen);
/* Reads a public key PEM file and adds it with the algorithm its type
 * allows: RSA (>= 2048 bits) -> RS256, EC P-256 -> ES256.  0 or -1, ERR. */
int auth_keyset_add_pem_file(auth_keyset *ks, const char *path, const char *kid,
    char *err, size_t errlen);
/* A JWKS document (JSON text) into a new key set of AUTH_SRC_PUBLIC keys:
 * RSA keys (n, e) as RS256, EC P-256 keys (x, y) as ES256.  Skipped: keys
 * with "use" other than "sig", key_ops without "verify", an "alg" that
 * disagrees, a member of the wrong type, and usable keys past
 * AUTH_KEYS_MAX.  A well-formed document is the issuer's whole key list,
 * so one with no usable key gives an empty set (every key it once had is
 * gone).  NOTE says what to report ("" when nothing): no usable key, keys
 * dropped.  NULL, and NOTE why, when the document is not a JWKS. */
auth_keyset *
auth_jwks_parse(const char *json, size_t len, char *note, size_t notelen);

/* auth_jwks.c */

typedef struct auth_jwks auth_jwks;
/* A JWKS cache for URL, fetched now (a failure is not fatal: ERR says
 * why) and refreshed by a background thread.  MIN_INTERVAL: s between
 * re-fetches asked for by unknown kids (<0: AUTH_JWKS_MIN_INTERVAL). */
auth_jwks *
auth_jwks_new(const char *url, int min_interval, char *err, size_t errlen);
void auth_jwks_free(auth_jwks *j);
/* The current keys (a reference: auth_keyset_unref), or NULL when none
 * were ever fetched. */
auth_keyset *auth_jwks_keys(auth_jwks *j);
/* A token named a kid we do not have: ask for a re-fetch (at most once per
 * min_interval) and wait up to AUTH_JWKS_WAIT_MS for it.  Who waits: an
 * event-loop task (an rt_waiter: its thread serves on); a thread that said
 * it may (auth_thread_may_wait), while fewer than AUTH_JWKS_THREAD_WAITERS
 * threads wait.  Any other caller (an event loop's own thread) takes the
 * keys at hand: a forged token must not hold a thread that serves others.
 * Returns the keys then current (a reference, or NULL). */
auth_keyset *auth_jwks_refetch(auth_jwks *j);
/* The number of keys now cached; when none, ERR says why (the last
 * fetch's error). */
size_t auth_jwks_status(auth_jwks *j, char *err, size_t errlen);
/* Seconds until the cached keys are fetched again (tests). */
long auth_jwks_ttl(auth_jwks *j);
/* Completed fetches (successful or not), requests that waited for one
 * in auth_jwks_refetch, and the most threads ever waiting at once
 * (tests). */
typedef struct auth_jwks_counters {
	unsigned long fetches, waits;
	int thread_waiters_max;
} auth_jwks_counters;
void auth_jwks_counts(auth_jwks *j, auth_jwks_counters *out);

/* auth_policy.c */

typedef struct auth_policy auth_policy;
/* Parses a policy (JSON text).  NULL with a message naming the rule and
 * field in ERR when it is wrong. */
auth_policy *
auth_policy_parse(const char *json, size_t len, char *err, size_t errlen);
/* Reads and parses a policy file. */
auth_policy *auth_policy_load(const char *path, char *err, size_t errlen);
void auth_policy_free(auth_policy *p);
/* Number of rules. */
size_t auth_policy_rules(const auth_policy *p);
/* 1 when the policy lets CLAIMS take ACTION on NAME, else 0 with a
 * sentence in WHY naming OWNER.  For each action the most specific lock
 * globs matching NAME decide, whoever their rules are for; a stronger
 * action granted implies ACTION.  NAME NULL: on some lock, that is, some
 * rule listing ACTION or a stronger one applies. */
int auth_policy_allows(const auth_policy *p, const json_t *claims,
    const char *owner, auth_action action, const char *name, char *why,
    size_t whylen);
/* Glob: '*' any run without '/', '**' any run, '?' one byte but '/'. */
bool auth_glob_match(const char *glob, const char *s);

#endif
