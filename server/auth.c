/*
 * auth.c: the authentication context (auth.h): its configuration, the
 * keys and policy it verifies and judges with, and who may do what.
 * Verifying a bearer token is auth_verify.c's.
 *
 * Keys and policy live in one reference-counted state: a reload builds a
 * new one and swaps a pointer under a mutex held for a few instructions.
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

/* A refusal: REASON and the sentence MSG, which never quotes the token. */
void
auth_refuse(auth_refusal *why, const char *reason, const char *msg)
{
	why->reason = reason;
	snprintf(why->message, sizeof(why->message), "%s", msg);
}

void
auth_state_unref(auth_state *s)
{
	if (s == NULL || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_SEQ_CST) > 0)
		return;
	auth_keyset_unref(s->keys);
	auth_policy_free(s->policy);
	free(s);
}

auth_state *
auth_state_get(auth_ctx *a)
{
	auth_state *s;

	pthread_mutex_lock(&a->mu);
	s = a->state;
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&a->mu);
	return s;
}

/* Reads a secret file into a new buffer (wipe and free), trailing newlines
 * and carriage returns dropped. */
unsigned char *
auth_read_secret_file(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t n;

	if (f == NULL) {
		snprintf(err, errlen, "cannot open the secret file %s: %s",
		    path, strerror(errno));
		return NULL;
	}
	buf = malloc(AUTH_SECRET_MAX + 1);
	if (buf == NULL)
		goto fail;
	n = fread(buf, 1, AUTH_SECRET_MAX + 1, f);
	if (ferror(f) || n > AUTH_SECRET_MAX) {
		snprintf(err, errlen,
		    "the secret file %s is unreadable or over "
		    "%d bytes",
		    path, AUTH_SECRET_MAX);
		goto fail;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = '\0';
	*len = n;
	fclose(f);
	return buf;
fail:
	if (buf != NULL) {
		util_wipe(buf, AUTH_SECRET_MAX + 1);
		free(buf);
	}
	fclose(f);
	return NULL;
}

/* WHAT names the setting in messages. */
static int
add_secret(auth_keyset *ks, const unsigned char *secret, size_t len,
    const char *what, char *err, size_t errlen)
{
	if (len < AUTH_SECRET_MIN) {
		snprintf(err, errlen,
		    "%s: the HS256 secret must be at least "
		    "%d bytes (try: openssl rand -base64 48)",
		    what, AUTH_SECRET_MIN);
		return -1;
	}
	return auth_keyset_add(ks, JWT_ALG_HS256, NULL, secret, len,
	    AUTH_SRC_SECRET, err, errlen);
}

/* Adds every "[kid=]path" of the comma-separated LIST. */
static int
add_public_keys(auth_keyset *ks, const char *list, char *err, size_t errlen)
{
	char *copy = strdup(list), *p, *next, *eq;
	int rc = -1;

	if (copy == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (p = copy; p != NULL; p = next) {
		next = strchr(p, ',');
		if (next != NULL)
			*next++ = '\0';
		while (*p == ' ')
			p++;
		if (*p == '\0')
			continue;
		eq = strchr(p, '=');
		if (eq != NULL)
			*eq = '\0';
		if (auth_keyset_add_pem_file(ks, eq != NULL ? eq + 1 : p,
		        eq != NULL ? p : NULL, err, errlen) != 0)
			goto out;
	}
	rc = 0;
out:
	free(copy);
	return rc;
}

/* A new state from the configuration files, or NULL and ERR. */
static auth_state *
state_load(const auth_ctx *a, char *err, size_t errlen)
{
	auth_state *s = calloc(1, sizeof(*s));
	unsigned char *secret = NULL;
	size_t slen = 0;

	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->refs = 1;
	s->keys = auth_keyset_new();
	if (s->keys == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (a->secret != NULL &&
	    add_secret(s->keys, (const unsigned char *)a->secret,
	        strlen(a->secret), "LOCKGATE_JWT_SECRET", err, errlen) != 0)
		goto fail;
	if (a->secret_file != NULL) {
		secret =
		    auth_read_secret_file(a->secret_file, &slen, err, errlen);
		if (secret == NULL ||
		    add_secret(s->keys, secret, slen,
		        "LOCKGATE_JWT_SECRET_FILE", err, errlen) != 0)
			goto fail;
	}
	if (a->public_keys != NULL &&
	    add_public_keys(s->keys, a->public_keys, err, errlen) != 0)
		goto fail;
	if (a->policy_file != NULL) {
		s->policy = auth_policy_load(a->policy_file, err, errlen);
		if (s->policy == NULL)
			goto fail;
	}
	if (secret != NULL) {
		util_wipe(secret, slen);
		free(secret);
	}
	return s;
fail:
	if (secret != NULL) {
		util_wipe(secret, slen);
		free(secret);
	}
	auth_state_unref(s);
	return NULL;
}

/* Splits the comma-separated LIST into L (at most MAX entries). */
static int
split_list(const char *list, char **v, size_t max, size_t *n)
{
	const char *p = list, *end;

	*n = 0;
	while (p != NULL && *p != '\0') {
		size_t len;

		end = strchr(p, ',');
		len = end != NULL ? (size_t)(end - p) : strlen(p);
		while (len > 0 && *p == ' ') {
			p++;
			len--;
		}
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (len > 0) {
			if (*n >= max)
				return -1;
			v[*n] = strndup(p, len);
			if (v[*n] == NULL)
				return -1;
			(*n)++;
		}
		p = end != NULL ? end + 1 : NULL;
	}
	return 0;
}

/* The accepted values of an issuer or audience SETTING (its variable, for
 * messages; WHAT: "issuer" or "audience") from the comma-separated LIST
 * into L.  A LIST that is set but names no value (",", " , ") is refused:
 * an empty L means "not checked", and a setting that is there must not
 * turn its check off.  0, or -1 with ERR. */
static int
expected_list(const char *list, auth_strlist *l, const char *setting,
    const char *what, char *err, size_t errlen)
{
	if (split_list(list, l->v, AUTH_ISSUERS_MAX, &l->n) != 0) {
		snprintf(err, errlen, "%s: at most %d values, or out of memory",
		    setting, AUTH_ISSUERS_MAX);
		return -1;
	}
	if (list != NULL && *list != '\0' && l->n == 0) {
		snprintf(err, errlen,
		    "%s names no %s (only commas and spaces): give the "
		    "value(s) to accept, or leave it unset",
		    setting, what);
		return -1;
	}
	return 0;
}

static char *
dup_or_null(const char *s, int *oom)
{
	char *d;

	if (s == NULL || *s == '\0')
		return NULL;
	d = strdup(s);
	if (d == NULL)
		*oom = 1;
	return d;
}

/* CFG's settings copied into A: the secrets, paths and URL, the owner
 * claim, and the claim, issuer and audience lists.  0, or -1 with ERR. */
static int
copy_settings(auth_ctx *a, const auth_config *cfg, char *err, size_t errlen)
{
	int oom = 0;

	a->secret = dup_or_null(cfg->jwt_secret, &oom);
	a->secret_file = dup_or_null(cfg->jwt_secret_file, &oom);
	a->public_keys = dup_or_null(cfg->public_keys, &oom);
	a->jwks_url = dup_or_null(cfg->jwks_url, &oom);
	a->policy_file = dup_or_null(cfg->policy_file, &oom);
	a->owner_claim =
	    strdup(cfg->owner_claim != NULL && *cfg->owner_claim != '\0'
	            ? cfg->owner_claim
	            : AUTH_OWNER_CLAIM_DEFAULT);
	if (oom || a->owner_claim == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (split_list(cfg->display_claims, a->display, DISPLAY_LIST_MAX,
	        &a->ndisplay) != 0) {
		snprintf(err, errlen, "at most %d display claims",
		    DISPLAY_LIST_MAX);
		return -1;
	}
	if (expected_list(cfg->issuer, &a->issuers[AUTH_SRC_PUBLIC],
	        "--jwt-issuer/LOCKGATE_JWT_ISSUER", "issuer", err,
	        errlen) != 0 ||
	    expected_list(cfg->audience, &a->audiences[AUTH_SRC_PUBLIC],
	        "--jwt-audience/LOCKGATE_JWT_AUDIENCE", "audience", err,
	        errlen) != 0 ||
	    expected_list(cfg->secret_issuer, &a->issuers[AUTH_SRC_SECRET],
	        "--jwt-secret-issuer/LOCKGATE_JWT_SECRET_ISSUER", "issuer", err,
	        errlen) != 0 ||
	    expected_list(cfg->secret_audience, &a->audiences[AUTH_SRC_SECRET],
	        "--jwt-secret-audience/LOCKGATE_JWT_SECRET_AUDIENCE",
	        "audience", err, errlen) != 0)
		return -1;
	return 0;
}

/* A's JWKS source, when a URL is configured.  A first fetch that fails
 * is not fatal: the keys may come later, and --check reports it from
 * ERR.  0, or -1 with ERR. */
static int
jwks_start(auth_ctx *a, const auth_config *cfg, char *err, size_t errlen)
{
	char why[200];

	if (a->jwks_url == NULL)
		return 0;
	a->jwks = auth_jwks_new(a->jwks_url,
	    cfg->jwks_min_interval == 0      ? AUTH_JWKS_MIN_INTERVAL
	        : cfg->jwks_min_interval < 0 ? 0
	                                     : cfg->jwks_min_interval,
	    why, sizeof(why));
	if (a->jwks == NULL) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	return 0;
}

auth_ctx *
auth_new(const auth_config *cfg, char *err, size_t errlen)
{
	auth_ctx *a = calloc(1, sizeof(*a));

	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_mutex_init(&a->cache_mu, NULL);
	a->cache = calloc(AUTH_VERIFIED_SLOTS, sizeof(verified));
	if (a->cache == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (RAND_bytes((unsigned char *)&a->tag_key, sizeof(a->tag_key)) != 1) {
		snprintf(err, errlen, "no randomness for the token cache");
		goto fail;
	}
	if (cfg->jwt_secret != NULL && *cfg->jwt_secret != '\0' &&
	    cfg->jwt_secret_file != NULL && *cfg->jwt_secret_file != '\0') {
		snprintf(err, errlen,
		    "give the HS256 secret or a secret file, "
		    "not both");
		goto fail;
	}
	if (copy_settings(a, cfg, err, errlen) != 0)
		goto fail;
	if (cfg->max_token_age < 0) {
		snprintf(err, errlen,
		    "the maximum token age cannot be negative");
		goto fail;
	}
	a->leeway = cfg->leeway < 0 ? AUTH_LEEWAY_DEFAULT : cfg->leeway;
	a->max_age = cfg->max_token_age;
	a->state = state_load(a, err, errlen);
	if (a->state == NULL || jwks_start(a, cfg, err, errlen) != 0)
		goto fail;
	return a;
fail:
	auth_free(a);
	return NULL;
}

void
auth_free(auth_ctx *a)
{
	size_t i, s;

	if (a == NULL)
		return;
	auth_jwks_free(a->jwks);
	auth_state_unref(a->state);
	if (a->secret != NULL) {
		util_wipe(a->secret, strlen(a->secret));
		free(a->secret);
	}
	free(a->secret_file);
	free(a->public_keys);
	free(a->jwks_url);
	free(a->policy_file);
	free(a->owner_claim);
	for (i = 0; i < a->ndisplay; i++)
		free(a->display[i]);
	for (s = 0; s < AUTH_SRC_COUNT; s++) {
		for (i = 0; i < a->issuers[s].n; i++)
			free(a->issuers[s].v[i]);
		for (i = 0; i < a->audiences[s].n; i++)
			free(a->audiences[s].v[i]);
	}
	pthread_mutex_destroy(&a->mu);
	pthread_mutex_destroy(&a->cache_mu);
	for (i = 0; a->cache != NULL && i < AUTH_VERIFIED_SLOTS; i++) {
		json_decref(a->cache[i].claims);
		free(a->cache[i].tok);
	}
	free(a->cache);
	free(a);
}

int
auth_configured(const auth_ctx *a)
{
	auth_state *st;
	int yes;

	if (a == NULL)
		return 0;
	st = auth_state_get(
	    (auth_ctx *)a); /* the mutex, not the keys, changes */
	yes = st->keys->n > 0 || a->jwks != NULL;
	auth_state_unref(st);
	return yes;
}

int
auth_describe(auth_ctx *a, char *buf, size_t len)
{
	auth_state *st = auth_state_get(a);
	size_t i, secrets = 0, pems = 0, off = 0;
	char why[200] = "";
	int rc = 0, n;

	for (i = 0; i < st->keys->n; i++) {
		if (st->keys->keys[i].source == AUTH_SRC_SECRET)
			secrets++;
		else
			pems++;
	}
	buf[0] = '\0';
#define ADD(...) \
	do { \
		n = snprintf(buf + off, len - off, __VA_ARGS__); \
		if (n > 0 && (size_t)n < len - off) \
			off += (size_t)n; \
	} while (0)
	if (secrets > 0)
		ADD("HS256 secret");
	if (pems > 0)
		ADD("%s%zu PEM key%s", off ? "; " : "", pems,
		    pems == 1 ? "" : "s");
	if (a->jwks != NULL) {
		size_t k = auth_jwks_status(a->jwks, why, sizeof(why));

		if (k > 0) {
			ADD("%sJWKS %zu key%s", off ? "; " : "", k,
			    k == 1 ? "" : "s");
		} else {
			ADD("%sJWKS: no key yet (%s)", off ? "; " : "", why);
			rc = -1;
		}
	}
	if (off == 0)
		ADD("no key source");
	if (st->policy != NULL)
		ADD("; policy %zu rule%s", auth_policy_rules(st->policy),
		    auth_policy_rules(st->policy) == 1 ? "" : "s");
	else
		ADD("; no policy (any valid token reads and acquires)");
#undef ADD
	auth_state_unref(st);
	return rc;
}

int
auth_reload(auth_ctx *a, char *err, size_t errlen)
{
	auth_state *s = state_load(a, err, errlen), *old;

	if (s == NULL)
		return -1;
	pthread_mutex_lock(&a->mu);
	old = a->state;
	a->state = s;
	pthread_mutex_unlock(&a->mu);
	auth_state_unref(old); /* requests in flight keep their reference */
	return 0;
}

static const char *
action_word(auth_action action)
{
	switch (action) {
	case AUTH_READ:
		return "read";
	case AUTH_ACQUIRE:
		return "acquire";
	case AUTH_ADMIN:
		return "admin";
	}
	return "?";
}

int
auth_allowed(auth_ctx *a, const auth_identity *id, auth_action action,
    const char *name, char *why, size_t whylen)
{
	auth_state *st = auth_state_get(a);
	json_t *empty = NULL;
	int ok;

	if (st->policy == NULL) {
		ok = action != AUTH_ADMIN || id->admin;
		if (!ok)
			snprintf(why, whylen,
			    "Only a token with \"admin\": true "
			    "may %s locks.",
			    action_word(action));
	} else {
		const json_t *claims = id->claims;

		if (claims == NULL)
			claims = empty = json_object();
		ok = auth_policy_allows(st->policy, claims, id->owner, action,
		    name, why, whylen);
	}
	json_decref(empty);
	auth_state_unref(st);
	return ok;
}
