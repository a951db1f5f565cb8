/*
 * auth_ctx.h: internal to auth.c (configuration, key state, permissions)
 * and auth_verify.c (bearer tokens, the cache of verified ones): the
 * context they share and the state a reload swaps.
 */
#ifndef LOCKGATE_AUTH_CTX_H
#define LOCKGATE_AUTH_CTX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "server/auth.h"
#include "server/auth_int.h"

#define BEARER           "Bearer"
#define CANDIDATES_MAX   (2 * AUTH_KEYS_MAX)
#define DISPLAY_LIST_MAX 32 /* display claims */

typedef struct auth_state {
	int refs;            /* atomic */
	auth_keyset *keys;   /* the HS256 secret and the PEM keys */
	auth_policy *policy; /* or NULL */
} auth_state;

/* A token whose signature a key verified.  The token is named by its
 * exact bytes (a keyed hash picks the slot), the key by its id: an
 * entry counts only while that key is among the current candidates, so a
 * reload or a JWKS rotation retires it.  Claims are checked every time. */
/* A token's time claims, read once: for each, 1 present, 0 absent, -1
 * not a whole number of seconds in 0..AUTH_TIME_MAX. */
typedef struct claim_times {
	json_int_t exp, nbf, iat;
	signed char has_exp, has_nbf, has_iat;
} claim_times;

typedef struct verified {
	char *tok; /* owned: the token's exact bytes; NULL: empty */
	size_t toklen;
	uint64_t tag; /* token_tag() of TOK */
	unsigned long key_id;
	/* What the token said, so that a token seen again is not decoded
	 * and parsed again (the hot path of every request): */
	jwt_alg_t alg;
	char kid[AUTH_KID_MAX + 1];
	json_t *claims;    /* owned, never modified once stored */
	claim_times times; /* read from CLAIMS once, checked on every use */
} verified;

/* A token as the cache knows it: its bytes and their keyed hash. */
typedef struct token_ref {
	const char *p;
	size_t n;
	uint64_t tag;
} token_ref;

typedef struct candidates {
	size_t n;
	bool alg_seen; /* some key of this alg exists, whatever its kid */
	const auth_key *k[CANDIDATES_MAX];
} candidates;

typedef struct auth_strlist {
	size_t n;
	char *v[AUTH_ISSUERS_MAX];
} auth_strlist;

struct auth_ctx {
	/* configuration, copied */
	char *secret; /* wiped on free */
	char *secret_file;
	char *public_keys;
	char *jwks_url;
	char *policy_file;
	char *owner_claim;
	char *display[DISPLAY_LIST_MAX];
	size_t ndisplay;
	auth_strlist issuers[AUTH_SRC_COUNT];
	auth_strlist audiences[AUTH_SRC_COUNT];
	int leeway;
	int max_age;

	pthread_mutex_t mu; /* guards the state pointer, nothing else */
	auth_state *state;
	auth_jwks *jwks; /* or NULL */

	pthread_mutex_t cache_mu; /* guards cache */
	verified *cache;          /* AUTH_VERIFIED_SLOTS, direct-mapped */
	uint64_t tag_key;         /* random: which slot a token takes cannot
				     be chosen from outside */
	unsigned long sigchecks;  /* atomic */
};

/* auth.c */
/* A refusal: REASON and the sentence MSG, which never quotes the token. */
void auth_refuse(auth_refusal *why, const char *reason, const char *msg);
/* The current state, a reference (auth_state_unref). */
auth_state *auth_state_get(auth_ctx *a);
/* Drops a reference; the last one frees the state. */
void auth_state_unref(auth_state *s);

#endif
