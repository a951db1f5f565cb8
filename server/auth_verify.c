/*
 * auth_verify.c: verifying bearer JWTs (auth.h), step by step in
 * auth_verify, and the cache of tokens whose signature a key verified.
 *
 * libjwt 1.10 takes the algorithm from the token and checks no claim (its
 * jwt_decode verifies with whatever alg the header names, and claim checks
 * came only in later releases), so the token is split, decoded and checked
 * here first: strict base64url, strict JSON (duplicate keys refused), the
 * header's alg one we pinned by configuration.  Only then does jwt_decode
 * run, once per candidate key of that alg (and kid), and its answer counts
 * only when jwt_get_alg() agrees.  Claims are checked here on our own
 * parse.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "server/auth_ctx.h"
#include "util/wipe.h"

static claim_times times_of(const json_t *claims);

unsigned long
auth_sigchecks(auth_ctx *a)
{
	return __atomic_load_n(&a->sigchecks, __ATOMIC_SEQ_CST);
}

/* One step of the token hash: a 64-bit mix (xor-shift, multiply). */
static uint64_t
tag_mix(uint64_t x)
{
	x ^= x >> 32;
	x *= UINT64_C(0xd6e8feb86659fd93);
	x ^= x >> 32;
	return x;
}

/*
 * The cache slot of a token comes from a hash keyed with a secret, eight
 * bytes a step (a SHA-256 per request was 1/10 of lockgate's user time).
 * It only picks the slot: a token is recognised by its exact bytes.
 */
static token_ref
token_of(const auth_ctx *a, const char *p, size_t n)
{
	token_ref t = { p, n, 0 };
	uint64_t h = a->tag_key ^ ((uint64_t)n * UINT64_C(0x9e3779b97f4a7c15));
	uint64_t w;

	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h = tag_mix(h ^ w);
	}
	w = 0;
	memcpy(&w, p, n);
	t.tag = tag_mix(tag_mix(h ^ w) ^ a->tag_key);
	return t;
}

static verified *
slot_of(auth_ctx *a, const token_ref *t)
{
	return &a->cache[t->tag & (AUTH_VERIFIED_SLOTS - 1)];
}

/* Whether N bytes at A and B are equal, in time that depends on N only
 * (eight bytes a step; CRYPTO_memcmp goes a byte at a time). */
static bool
same_bytes(const char *a, const char *b, size_t n)
{
	uint64_t x, y, diff = 0;

	for (; n >= 8; a += 8, b += 8, n -= 8) {
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		diff |= x ^ y;
	}
	for (; n > 0; a++, b++, n--)
		diff |= (uint64_t)((unsigned char)*a ^ (unsigned char)*b);
	return diff == 0;
}

/* V holds T (cache_mu held). */
static bool
holds(const verified *v, const token_ref *t)
{
	return v->tok != NULL && v->key_id != 0 && v->tag == t->tag &&
	    v->toklen == t->n && same_bytes(v->tok, t->p, t->n);
}

/* The candidate whose key has ID, or NULL. */
static const auth_key *
candidate_with_id(const candidates *c, unsigned long id)
{
	size_t i;

	for (i = 0; id != 0 && i < c->n; i++)
		if (c->k[i]->id == id)
			return c->k[i];
	return NULL;
}

/* The candidate a remembered signature names, or NULL. */
static const auth_key *
cache_find(auth_ctx *a, const token_ref *t, const candidates *c)
{
	verified *v = slot_of(a, t);
	unsigned long id = 0;

	pthread_mutex_lock(&a->cache_mu);
	if (holds(v, t))
		id = v->key_id;
	pthread_mutex_unlock(&a->cache_mu);
	return candidate_with_id(c, id);
}

static void
cache_put(auth_ctx *a, const token_ref *t, const auth_key *k, jwt_alg_t alg,
    const char *kid, json_t *claims)
{
	verified *v = slot_of(a, t);
	char *copy, *old_tok;
	json_t *old;

	if (t->n > AUTH_CACHED_TOKEN_MAX || (copy = malloc(t->n)) == NULL)
		return; /* not remembered: verified again next time */
	memcpy(copy, t->p, t->n);
	pthread_mutex_lock(&a->cache_mu);
	old_tok = v->tok;
	v->tok = copy;
	v->toklen = t->n;
	v->tag = t->tag;
	v->key_id = k->id;
	v->alg = alg;
	snprintf(v->kid, sizeof(v->kid), "%s", kid ? kid : "");
	v->times = times_of(claims);
	old = v->claims;
	v->claims = json_incref(claims);
	pthread_mutex_unlock(&a->cache_mu);
	json_decref(old);
	free(old_tok);
}

/* Strict JSON object of a base64url segment, or NULL. */
static json_t *
segment_json(const char *seg, size_t len)
{
	size_t rawlen = 0;
	unsigned char *raw = auth_b64url_decode(seg, len, &rawlen);
	json_error_t jerr;
	json_t *v;

	if (raw == NULL)
		return NULL;
	v = json_loadb((const char *)raw, rawlen, JSON_REJECT_DUPLICATES,
	    &jerr);
	free(raw);
	if (v != NULL && !json_is_object(v)) {
		json_decref(v);
		v = NULL;
	}
	return v;
}

/* The pinned algorithms, spelled exactly as RFC 7518 spells them. */
static jwt_alg_t
header_alg(const char *alg)
{
	if (strcmp(alg, "HS256") == 0)
		return JWT_ALG_HS256;
	if (strcmp(alg, "RS256") == 0)
		return JWT_ALG_RS256;
	if (strcmp(alg, "ES256") == 0)
		return JWT_ALG_ES256;
	return JWT_ALG_INVAL;
}

static void
collect(candidates *c, const auth_keyset *ks, jwt_alg_t alg, const char *kid)
{
	size_t i;

	if (ks == NULL)
		return;
	for (i = 0; i < ks->n && c->n < CANDIDATES_MAX; i++) {
		const auth_key *k = &ks->keys[i];

		if (k->alg != alg)
			continue;
		c->alg_seen = true;
		if (kid == NULL || k->kid == NULL || strcmp(kid, k->kid) == 0)
			c->k[c->n++] = k;
	}
}

/* A NumericDate claim: 1 present and a whole number of seconds in
 * 0..AUTH_TIME_MAX (an integer, or a real such as 1700000000.0), 0 absent,
 * -1 anything else: 1e30 would be a token that never expires. */
static int
numeric_date(const json_t *claims, const char *name, json_int_t *out)
{
	const json_t *v = json_object_get(claims, name);
	double d;

	if (v == NULL)
		return 0;
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
	} else if (json_is_real(v)) {
		d = json_real_value(v);
		if (!(d >= 0 && d <= (double)AUTH_TIME_MAX))
			return -1;
		*out = (json_int_t)d;
		if ((double)*out != d)
			return -1;
	} else {
		return -1;
	}
	return *out >= 0 && *out <= AUTH_TIME_MAX ? 1 : -1;
}

static bool
in_list(const auth_strlist *l, const char *s)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

static claim_times
times_of(const json_t *claims)
{
	claim_times t = { 0, 0, 0, 0, 0, 0 };

	t.has_exp = (signed char)numeric_date(claims, "exp", &t.exp);
	t.has_nbf = (signed char)numeric_date(claims, "nbf", &t.nbf);
	t.has_iat = (signed char)numeric_date(claims, "iat", &t.iat);
	return t;
}

static int
check_times(const auth_ctx *a, const claim_times *t, auth_refusal *why)
{
	json_int_t now = (json_int_t)time(NULL);

	if (t->has_exp == 0) {
		auth_refuse(why, "missing_claim",
		    "The token has no exp claim; "
		    "tokens must expire.");
		return -1;
	}
	if (t->has_exp < 0 || t->has_nbf < 0 || t->has_iat < 0) {
		auth_refuse(why, "malformed_token",
		    "The token's exp, nbf or iat is not a whole number of "
		    "seconds from 0 to 2^40.");
		return -1;
	}
	if (now > t->exp + a->leeway) {
		auth_refuse(why, "token_expired",
		    "The token has expired; get a new "
		    "one.");
		return -1;
	}
	if (t->has_nbf > 0 && t->nbf > now + a->leeway) {
		auth_refuse(why, "token_not_yet_valid",
		    "The token is not valid yet "
		    "(nbf is in the future); check the clocks.");
		return -1;
	}
	if (t->has_iat > 0 && t->iat > now + a->leeway) {
		auth_refuse(why, "token_issued_in_future",
		    "The token was issued in "
		    "the future (iat); check the clocks.");
		return -1;
	}
	if (a->max_age > 0) {
		if (t->has_iat == 0) {
			auth_refuse(why, "missing_claim",
			    "The token has no iat claim, "
			    "which a maximum token age needs.");
			return -1;
		}
		if (now - t->iat > (json_int_t)a->max_age + a->leeway) {
			auth_refuse(why, "token_too_old",
			    "The token is older than the "
			    "maximum token age; get a new one.");
			return -1;
		}
	}
	return 0;
}

/* Refuses with REASON and a sentence naming the EXPECTED values of WHAT:
 * they are no secret (any issuer's tokens name them), and they say what
 * to fix. */
static void
refuse_expected(auth_refusal *why, const char *reason, const char *what,
    const auth_strlist *expected)
{
	size_t i, off;
	int n;

	why->reason = reason;
	n = snprintf(why->message, sizeof(why->message),
	    "The token's %s is not %s this service expects:", what,
	    expected->n > 1 ? "one" : "the one");
	off = n > 0 ? (size_t)n : 0;
	for (i = 0; i < expected->n && off < sizeof(why->message); i++) {
		n = snprintf(why->message + off, sizeof(why->message) - off,
		    "%s \"%.80s\"%s", i > 0 ? "," : "", expected->v[i],
		    i + 1 == expected->n ? "." : "");
		off += n > 0 ? (size_t)n : 0;
	}
}

static int
check_iss_aud(const auth_ctx *a, auth_source src, const json_t *claims,
    auth_refusal *why)
{
	const auth_strlist *iss = &a->issuers[src], *aud = &a->audiences[src];
	const json_t *v;
	size_t i;
	bool ok = false;

	if (iss->n > 0) {
		v = json_object_get(claims, "iss");
		if (!json_is_string(v) || !in_list(iss, json_string_value(v))) {
			refuse_expected(why, "wrong_issuer", "issuer (iss)",
			    iss);
			return -1;
		}
	}
	if (aud->n > 0) {
		v = json_object_get(claims, "aud");
		if (json_is_string(v)) {
			ok = in_list(aud, json_string_value(v));
		} else if (json_is_array(v)) {
			for (i = 0; i < json_array_size(v) && !ok; i++) {
				const json_t *e = json_array_get(v, i);

				ok = json_is_string(e) &&
				    in_list(aud, json_string_value(e));
			}
		}
		if (!ok) {
			refuse_expected(why, "wrong_audience", "audience (aud)",
			    aud);
			return -1;
		}
	}
	return 0;
}

/*
 * The claim that names the owner of CLAIMS, verified by a key of SRC: the
 * configured owner claim; for a token of the HS256 secret that lacks it,
 * "sub".  So people's tokens from `lockgate token --sub NAME` work next to
 * CI tokens owned by, say, "repository".  No power is added: whoever holds
 * the secret can mint any claim anyway.  Tokens of PEM keys and the JWKS
 * never fall back: an issuer's token without the claim is refused.
 */
static const char *
owner_claim_of(const auth_ctx *a, auth_source src, const json_t *claims)
{
	if (src == AUTH_SRC_SECRET &&
	    json_object_get(claims, a->owner_claim) == NULL)
		return "sub";
	return a->owner_claim;
}

static int
fill_identity(const auth_ctx *a, const auth_key *key, json_t *claims,
    auth_identity *id, auth_refusal *why)
{
	const char *owner_claim = owner_claim_of(a, key->source, claims);
	const json_t *owner = json_object_get(claims, owner_claim);
	char buf[AUTH_CLAIM_MAX];
	size_t i;

	/* Text or a number (identity.md), never a boolean: true and false
	 * would be two owners every such token shares.  auth_claim_string
	 * writes booleans as text for the display claims. */
	if (json_is_boolean(owner) ||
	    auth_claim_string(owner, id->owner, sizeof(id->owner)) != 0 ||
	    id->owner[0] == '\0' ||
	    !api_text_clean(id->owner, strlen(id->owner))) {
		why->reason = "missing_claim";
		snprintf(why->message, sizeof(why->message),
		    "The token has no usable owner claim \"%.64s\" (text "
		    "without control characters, or a number).",
		    owner_claim);
		return -1;
	}
	id->admin = json_is_true(json_object_get(claims, "admin"));
	memcpy(id->key_fp, key->fp, sizeof(id->key_fp));
	if (a->ndisplay > 0) {
		id->display = json_object();
		if (id->display == NULL)
			goto oom;
	}
	for (i = 0; i < a->ndisplay; i++) {
		json_t *v;

		if (auth_claim_string(json_object_get(claims, a->display[i]),
		        buf, sizeof(buf)) != 0 ||
		    !api_text_clean(buf, strlen(buf)))
			continue;
		v = json_string(buf);
		if (v == NULL ||
		    json_object_set_new(id->display, a->display[i], v) != 0)
			goto oom;
		/* Keep the whole object within what a lease can carry. */
		if (json_dumpb(id->display, NULL, 0, JSON_COMPACT) >
		    API_CLAIMS_BYTES_MAX)
			json_object_del(id->display, a->display[i]);
	}
	id->claims = json_incref(claims);
	return 0;
oom:
	auth_refuse(why, "internal", "Out of memory while reading the token.");
	return -1;
}

/*
 * A token seen before: the same bytes, verified by a key that
 * is still among the current candidates for its algorithm and kid.  Its
 * claims are checked again (times, issuer, audience), never trusted from
 * the earlier answer.  1 when answered (*RC set), 0 when not cached.
 */
static int
verify_cached(auth_ctx *a, const token_ref *t, auth_identity *id,
    auth_refusal *why, int *rc)
{
	verified *v = slot_of(a, t);
	char kid[AUTH_KID_MAX + 1];
	json_t *claims = NULL;
	auth_keyset *jk = NULL;
	auth_state *st;
	const auth_key *good;
	candidates c;
	jwt_alg_t alg = JWT_ALG_NONE;
	unsigned long key_id = 0;
	size_t kl;
	claim_times times;

	pthread_mutex_lock(&a->cache_mu);
	if (holds(v, t) && v->claims != NULL) {
		claims = json_incref(v->claims);
		key_id = v->key_id;
		times = v->times;
		alg = v->alg;
		kl = strnlen(v->kid, AUTH_KID_MAX);
		memcpy(kid, v->kid, kl);
		kid[kl] = '\0';
	}
	pthread_mutex_unlock(&a->cache_mu);
	if (claims == NULL)
		return 0;
	memset(&c, 0, sizeof(c));
	st = auth_state_get(a);
	collect(&c, st->keys, alg, kid[0] ? kid : NULL);
	if (a->jwks != NULL && alg != JWT_ALG_HS256) {
		jk = auth_jwks_keys(a->jwks);
		collect(&c, jk, alg, kid[0] ? kid : NULL);
	}
	/* The key that verified it must still be a candidate. */
	good = candidate_with_id(&c, key_id);
	if (good != NULL)
		*rc = check_times(a, &times, why) != 0 ||
		        check_iss_aud(a, good->source, claims, why) != 0 ||
		        fill_identity(a, good, claims, id, why) != 0
		    ? -1
		    : 0;
	auth_keyset_unref(jk);
	auth_state_unref(st);
	json_decref(claims);
	return good != NULL;
}

/* A token as auth_verify takes it apart: TOK (borrowed, LEN bytes, not
 * terminated) and its dots; then the decoded header, claims and signature
 * (owned: parts_clear); then the pinned algorithm and the kid (borrowed
 * from the header, or NULL). */
typedef struct jwt_parts {
	const char *tok, *dot1, *dot2;
	size_t len;
	json_t *header, *claims;
	unsigned char *sig;
	size_t siglen;
	jwt_alg_t alg;
	const char *kid;
} jwt_parts;

static void
parts_clear(jwt_parts *p)
{
	free(p->sig);
	json_decref(p->header);
	json_decref(p->claims);
	memset(p, 0, sizeof(*p));
}

/* The token of an Authorization header: "Bearer", spaces, the token,
 * optional trailing spaces.  0 with P's tok and len set, or -1 refused. */
static int
bearer_token(const char *authorization, jwt_parts *p, auth_refusal *why)
{
	const char *tok;
	size_t toklen;

	if (authorization == NULL || *authorization == '\0') {
		auth_refuse(why, "missing_token",
		    "Send Authorization: Bearer "
		    "<token>.");
		return -1;
	}
	if (strncasecmp(authorization, BEARER, strlen(BEARER)) != 0 ||
	    (authorization[strlen(BEARER)] != ' ' &&
	        authorization[strlen(BEARER)] != '\0')) {
		auth_refuse(why, "bad_scheme",
		    "The Authorization header must use the "
		    "Bearer scheme.");
		return -1;
	}
	tok = authorization + strlen(BEARER);
	while (*tok == ' ')
		tok++;
	toklen = strnlen(tok, AUTH_TOKEN_MAX + 1);
	while (toklen > 0 && toklen <= AUTH_TOKEN_MAX && tok[toklen - 1] == ' ')
		toklen--;
	if (toklen == 0) {
		auth_refuse(why, "missing_token",
		    "The Authorization header holds no "
		    "token.");
		return -1;
	}
	if (toklen > AUTH_TOKEN_MAX) {
		why->reason = "token_too_large";
		snprintf(why->message, sizeof(why->message),
		    "The token is over "
		    "%d bytes.",
		    AUTH_TOKEN_MAX);
		return -1;
	}
	p->tok = tok;
	p->len = toklen;
	return 0;
}

/* Exactly two dots, no empty header or claims.  0, or -1 refused. */
static int
split_token(jwt_parts *p, auth_refusal *why)
{
	const char *tok = p->tok;
	size_t toklen = p->len;

	p->dot1 = memchr(tok, '.', toklen);
	p->dot2 = p->dot1 != NULL
	    ? memchr(p->dot1 + 1, '.', toklen - (size_t)(p->dot1 + 1 - tok))
	    : NULL;
	if (p->dot1 == NULL || p->dot2 == NULL ||
	    memchr(p->dot2 + 1, '.', toklen - (size_t)(p->dot2 + 1 - tok)) !=
	        NULL ||
	    p->dot1 == tok || p->dot2 == p->dot1 + 1) {
		auth_refuse(why, "malformed_token",
		    "The token is not three base64url "
		    "parts joined by dots.");
		return -1;
	}
	return 0;
}

/* Decode the three parts (strict base64url, strict JSON) and pin the
 * header: an alg we accept, a signature, typ JWT if any, no crit, a short
 * kid if any.  0, or -1 refused. */
static int
decode_header(jwt_parts *p, auth_refusal *why)
{
	const json_t *v;
	const char *alg_s;

	p->header = segment_json(p->tok, (size_t)(p->dot1 - p->tok));
	p->claims = segment_json(p->dot1 + 1, (size_t)(p->dot2 - p->dot1 - 1));
	p->sig = auth_b64url_decode(p->dot2 + 1,
	    p->len - (size_t)(p->dot2 + 1 - p->tok), &p->siglen);
	if (p->header == NULL || p->claims == NULL || p->sig == NULL) {
		auth_refuse(why, "malformed_token",
		    "The token is not strict "
		    "base64url of JSON objects without repeated keys.");
		return -1;
	}
	alg_s = json_string_value(json_object_get(p->header, "alg"));
	if (alg_s == NULL || (p->alg = header_alg(alg_s)) == JWT_ALG_INVAL) {
		auth_refuse(why, "alg_not_allowed",
		    "The token's algorithm is not "
		    "one this service accepts (HS256, RS256, ES256 as "
		    "configured).");
		return -1;
	}
	if (p->siglen == 0) {
		auth_refuse(why, "malformed_token",
		    "The token has no signature.");
		return -1;
	}
	v = json_object_get(p->header, "typ");
	if ((v != NULL &&
	        (!json_is_string(v) ||
	            strcasecmp(json_string_value(v), "JWT") != 0)) ||
	    json_object_get(p->header, "crit") != NULL) {
		auth_refuse(why, "malformed_token",
		    "The token's header has a typ "
		    "other than JWT or critical extensions.");
		return -1;
	}
	v = json_object_get(p->header, "kid");
	if (v != NULL) {
		p->kid = json_string_value(v);
		if (p->kid == NULL || strlen(p->kid) > AUTH_KID_MAX) {
			auth_refuse(why, "malformed_token",
			    "The token's kid is not a "
			    "short string.");
			return -1;
		}
	}
	return 0;
}

/* The keys that may have signed P: of its alg (and kid), configured or from
 * the JWKS, which is fetched again once when the kid is unknown (perhaps
 * the issuer rotated its keys).  *JK gets the JWKS keys held (the caller
 * unrefs it, also on failure).  0, or -1 refused when no key fits. */
static int
candidates_of(auth_ctx *a, const auth_state *st, const jwt_parts *p,
    candidates *c, auth_keyset **jk, auth_refusal *why)
{
	memset(c, 0, sizeof(*c));
	collect(c, st->keys, p->alg, p->kid);
	if (a->jwks != NULL &&
	    (p->alg == JWT_ALG_RS256 || p->alg == JWT_ALG_ES256)) {
		*jk = auth_jwks_keys(a->jwks);
		collect(c, *jk, p->alg, p->kid);
		if (c->n == 0 && p->kid != NULL) {
			auth_keyset_unref(*jk);
			*jk = auth_jwks_refetch(a->jwks);
			c->n = 0;
			collect(c, st->keys, p->alg, p->kid);
			collect(c, *jk, p->alg, p->kid);
			c->alg_seen = true;
		}
	}
	if (c->n > 0)
		return 0;
	if (c->alg_seen)
		auth_refuse(why, "unknown_key",
		    "No key of this service has the "
		    "token's kid.");
	else
		auth_refuse(why, "alg_not_allowed",
		    "No key of this service is "
		    "configured for the token's algorithm.");
	return -1;
}

/* The candidate whose signature verifies P (remembered for the next use of
 * the same token T), or NULL refused. */
static const auth_key *
signed_by(auth_ctx *a, const token_ref *t, const jwt_parts *p,
    const candidates *c, auth_refusal *why)
{
	const auth_key *good;
	char *copy;
	size_t i;

	if ((good = cache_find(a, t, c)) != NULL)
		return good;
	if ((copy = strndup(p->tok, p->len)) == NULL) {
		auth_refuse(why, "internal", "Out of memory.");
		return NULL;
	}
	for (i = 0; i < c->n && good == NULL; i++) {
		jwt_t *j = NULL;

		/* Forged RS256/ES256 tokens stop here, for ~50 us instead of
		 * the ~1.5 ms libjwt's PEM decode costs. */
		if (c->k[i]->alg != JWT_ALG_HS256 &&
		    !auth_sig_ok(c->k[i]->pkey, p->alg,
		        (const unsigned char *)p->tok,
		        (size_t)(p->dot2 - p->tok), p->sig, p->siglen))
			continue;
		__atomic_add_fetch(&a->sigchecks, 1, __ATOMIC_SEQ_CST);
		if (jwt_decode(&j, copy, c->k[i]->material,
		        (int)c->k[i]->len) == 0 &&
		    jwt_get_alg(j) == p->alg) {
			good = c->k[i];
			/* The signature, and what the token says, are
			 * remembered; the claims are checked on every use. */
			cache_put(a, t, good, p->alg, p->kid, p->claims);
		}
		jwt_free(j);
	}
	util_wipe(copy, p->len);
	free(copy);
	if (good == NULL)
		auth_refuse(why, "bad_signature",
		    "The token's signature does not "
		    "verify with any key of this service.");
	return good;
}

int
auth_verify(auth_ctx *a, const char *authorization, auth_identity *id,
    auth_refusal *why)
{
	jwt_parts p;
	auth_state *st = NULL;
	auth_keyset *jk = NULL;
	const auth_key *good;
	candidates c;
	token_ref t;
	claim_times times;
	int rc = -1;

	memset(id, 0, sizeof(*id));
	memset(why, 0, sizeof(*why));
	memset(&p, 0, sizeof(p));
	if (bearer_token(authorization, &p, why) != 0)
		return -1;
	if (split_token(&p, why) != 0)
		goto out;
	t = token_of(a, p.tok, p.len);
	if (verify_cached(a, &t, id, why, &rc))
		goto out;
	if (decode_header(&p, why) != 0)
		goto out;
	st = auth_state_get(a);
	if (candidates_of(a, st, &p, &c, &jk, why) != 0 ||
	    (good = signed_by(a, &t, &p, &c, why)) == NULL)
		goto out;
	times = times_of(p.claims);
	if (check_times(a, &times, why) != 0 ||
	    check_iss_aud(a, good->source, p.claims, why) != 0 ||
	    fill_identity(a, good, p.claims, id, why) != 0)
		goto out;
	rc = 0;
out:
	if (rc != 0)
		auth_identity_clear(id);
	auth_keyset_unref(jk);
	auth_state_unref(st);
	parts_clear(&p);
	return rc;
}

void
auth_identity_clear(auth_identity *id)
{
	if (id == NULL)
		return;
	json_decref(id->display);
	json_decref(id->claims);
	memset(id, 0, sizeof(*id));
}

/* Whether KS holds a key of fingerprint FP. */
static bool
holds_key(const auth_keyset *ks, const unsigned char *fp)
{
	size_t i;

	for (i = 0; ks != NULL && i < ks->n; i++)
		if (CRYPTO_memcmp(ks->keys[i].fp, fp, AUTH_KEY_FP_LEN) == 0)
			return true;
	return false;
}

/* Whether the key of fingerprint FP is still one the service trusts:
 * configured, or in the JWKS it holds (never fetched for this). */
static bool
key_still_trusted(auth_ctx *a, const unsigned char *fp)
{
	auth_state *st = auth_state_get(a);
	auth_keyset *jk = a->jwks != NULL ? auth_jwks_keys(a->jwks) : NULL;
	bool yes = holds_key(st->keys, fp) || holds_key(jk, fp);

	auth_keyset_unref(jk);
	auth_state_unref(st);
	return yes;
}

int
auth_still_allowed(auth_ctx *a, const auth_identity *id, auth_action action,
    const char *name, api_err *err)
{
	claim_times t = times_of(id->claims);
	auth_refusal why;
	char msg[200];

	memset(&why, 0, sizeof(why));
	memset(err, 0, sizeof(*err));
	if (!key_still_trusted(a, id->key_fp)) {
		api_fail(err, API_UNAUTHORIZED,
		    "The key that signed the token is no longer one this "
		    "service trusts (keys were reloaded or rotated during the "
		    "wait).");
		err->reason = "unknown_key";
		return API_UNAUTHORIZED;
	}
	if (check_times(a, &t, &why) != 0) {
		api_fail(err, API_UNAUTHORIZED, "%s", why.message);
		err->reason = why.reason;
		return API_UNAUTHORIZED;
	}
	msg[0] = '\0';
	if (!auth_allowed(a, id, action, name, msg, sizeof(msg))) {
		api_fail(err, API_FORBIDDEN, "%s",
		    msg[0] ? msg : "this token may not do that");
		err->reason = "forbidden";
		return API_FORBIDDEN;
	}
	return API_OK;
}
