/*
 * auth_token.c: `lockgate token`, the CLI that mints an HS256 token with the
 * configured secret (LOCKGATE_JWT_SECRET_FILE), for scripts and for the
 * first admin.  The server's verification is in auth.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/auth.h"
#include "server/auth_int.h"
#include "util/wipe.h"

/* An HS256 token over the claims object CLAIMS (borrowed). */
static char *
mint(const unsigned char *secret, size_t len, const json_t *claims)
{
	char *payload = json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS);
	char *tok;

	if (payload == NULL)
		return NULL;
	tok = auth_jwt_sign("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", payload,
	    JWT_ALG_HS256, secret, len);
	free(payload);
	return tok;
}

static json_t *
base_claims(const char *sub, long ttl, bool admin)
{
	json_t *c = json_object();
	long now = (long)time(NULL);

	if (c == NULL || json_object_set_new(c, "sub", json_string(sub)) != 0 ||
	    json_object_set_new(c, "iat", json_integer(now)) != 0 ||
	    json_object_set_new(c, "exp", json_integer(now + ttl)) != 0 ||
	    (admin && json_object_set_new(c, "admin", json_true()) != 0)) {
		json_decref(c);
		return NULL;
	}
	return c;
}

char *
auth_mint_hs256(const char *secret, size_t secret_len, const char *sub,
    long ttl, bool admin)
{
	json_t *c;
	char *tok;

	if (secret == NULL || sub == NULL || *sub == '\0' || ttl <= 0 ||
	    ttl > AUTH_TTL_MAX)
		return NULL;
	c = base_claims(sub, ttl, admin);
	if (c == NULL)
		return NULL;
	tok = mint((const unsigned char *)secret, secret_len, c);
	json_decref(c);
	return tok;
}

/* "90", "90s", "15m", "1h", "7d" into seconds, bounded; -1 if bad. */
static long
parse_duration(const char *s)
{
	char *end;
	long v, mul = 1;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || v <= 0)
		return -1;
	if (*end != '\0') {
		if (end[1] != '\0')
			return -1;
		switch (*end) {
		case 's':
			mul = 1;
			break;
		case 'm':
			mul = 60;
			break;
		case 'h':
			mul = 3600;
			break;
		case 'd':
			mul = 86400;
			break;
		default:
			return -1;
		}
	}
	if (v > AUTH_TTL_MAX / mul)
		return -1;
	return v * mul;
}

static int
token_usage(FILE *f)
{
	fprintf(f,
	    "usage: lockgate token --secret-file FILE --sub NAME [--ttl 1h]\n"
	    "           [--claim key=value]... [--admin] [--iss ISS] "
	    "[--aud AUD]\n"
	    "Prints an HS256 token on stdout.  FILE holds the secret the "
	    "server\nhas in --jwt-secret-file (LOCKGATE_JWT_SECRET_FILE); "
	    "without\n--secret-file, LOCKGATE_JWT_SECRET_FILE is used.  TTL "
	    "takes s, m, h or d.\n"
	    "--iss and --aud set the iss and aud claims, for a server with "
	    "\nLOCKGATE_JWT_SECRET_ISSUER / LOCKGATE_JWT_SECRET_AUDIENCE.\n"
	    "lockgate token --dev [--port N]: an admin token of a running "
	    "development-\nmode server (lockgate token --dev --help).\n");
	return 2;
}

static bool
reserved_claim(const char *k)
{
	static const char *const r[] = { "sub", "exp", "iat", "nbf", "admin",
		"iss", "aud" };
	size_t i;

	for (i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		if (strcmp(k, r[i]) == 0)
			return true;
	return false;
}

/* What `lockgate token` was asked for. */
typedef struct token_args {
	const char *file, *sub, *iss, *aud;
	long ttl;
	bool admin;
	json_t *extra; /* --claim key=value pairs */
} token_args;

/* --claim VAL (key=value) into A->extra.  0, or -1 (said). */
static int
token_claim(token_args *a, const char *val)
{
	const char *eq = strchr(val, '=');
	char key[AUTH_CLAIM_MAX];

	if (eq == NULL || eq == val || (size_t)(eq - val) >= sizeof(key)) {
		fprintf(stderr, "lockgate token: --claim wants key=value\n");
		return -1;
	}
	memcpy(key, val, (size_t)(eq - val));
	key[eq - val] = '\0';
	if (reserved_claim(key)) {
		fprintf(stderr,
		    "lockgate token: use --sub, --ttl, "
		    "--admin, --iss, --aud for \"%s\"\n",
		    key);
		return -1;
	}
	return json_object_set_new(a->extra, key, json_string(eq + 1)) == 0
	    ? 0
	    : -1;
}

/* Option O with its value VAL into A.  0, or -1 (said). */
static int
token_option(token_args *a, const char *o, const char *val)
{
	if (strcmp(o, "--secret-file") == 0)
		a->file = val;
	else if (strcmp(o, "--sub") == 0)
		a->sub = val;
	else if (strcmp(o, "--iss") == 0)
		a->iss = val;
	else if (strcmp(o, "--aud") == 0)
		a->aud = val;
	else if (strcmp(o, "--ttl") == 0) {
		a->ttl = parse_duration(val);
		if (a->ttl < 0) {
			fprintf(stderr,
			    "lockgate token: --ttl wants 1..%ld "
			    "s, e.g. 3600, 90m, 1h, 7d\n",
			    AUTH_TTL_MAX);
			return -1;
		}
	} else if (strcmp(o, "--claim") == 0)
		return token_claim(a, val);
	else {
		fprintf(stderr, "lockgate token: unknown option %s\n", o);
		return -1;
	}
	return 0;
}

/* ARGV's options into A, then the ones needed.  0; 1 after --help (the
 * usage said); -1 for a usage error (said). */
static int
token_args_parse(token_args *a, int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *o = argv[i],
		           *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(o, "--admin") == 0) {
			a->admin = true;
			continue;
		}
		if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
			token_usage(stdout);
			return 1;
		}
		if (val == NULL) {
			fprintf(stderr, "lockgate token: %s needs a value\n",
			    o);
			return -1;
		}
		i++;
		if (token_option(a, o, val) != 0)
			return -1;
	}
	if (a->file == NULL || *a->file == '\0' || a->sub == NULL ||
	    *a->sub == '\0') {
		fprintf(stderr,
		    "lockgate token: --secret-file and --sub are "
		    "needed\n");
		return -1;
	}
	if (strlen(a->sub) > API_OWNER_MAX ||
	    !api_text_clean(a->sub, strlen(a->sub))) {
		fprintf(stderr,
		    "lockgate token: --sub is at most %d bytes of UTF-8 "
		    "text without control characters\n",
		    API_OWNER_MAX);
		return -1;
	}
	return 0;
}

/* Read A's secret, mint the token and print it; the secret and the token
 * are wiped.  0, or 1 (said). */
static int
token_print(const token_args *a)
{
	unsigned char *secret = NULL;
	json_t *c = NULL;
	size_t slen = 0;
	char err[256], *tok = NULL;
	int rc = 1;

	secret = auth_read_secret_file(a->file, &slen, err, sizeof(err));
	if (secret == NULL) {
		fprintf(stderr, "lockgate token: %s\n", err);
		return 1;
	}
	if (slen < AUTH_SECRET_MIN) {
		fprintf(stderr,
		    "lockgate token: the secret must be at least %d "
		    "bytes\n",
		    AUTH_SECRET_MIN);
		goto out;
	}
	c = base_claims(a->sub, a->ttl, a->admin);
	if (c == NULL || json_object_update(c, a->extra) != 0 ||
	    (a->iss != NULL &&
	        json_object_set_new(c, "iss", json_string(a->iss))) ||
	    (a->aud != NULL &&
	        json_object_set_new(c, "aud", json_string(a->aud))))
		goto out;
	tok = mint(secret, slen, c);
	if (tok == NULL) {
		fprintf(stderr, "lockgate token: cannot sign the token\n");
		goto out;
	}
	printf("%s\n", tok);
	rc = fflush(stdout) == 0 ? 0 : 1;
	util_wipe(tok, strlen(tok));
	free(tok);
out:
	util_wipe(secret, slen);
	free(secret);
	json_decref(c);
	return rc;
}

int
auth_token_main(int argc, char **argv)
{
	token_args a = { .file = getenv("LOCKGATE_JWT_SECRET_FILE"),
		.ttl = AUTH_TTL_DEFAULT,
		.extra = json_object() };
	int rc;

	if (a.extra == NULL)
		return 1;
	rc = token_args_parse(&a, argc, argv);
	if (rc == 0)
		rc = token_print(&a);
	else if (rc == 1)
		rc = 0; /* --help */
	else {
		token_usage(stderr);
		rc = 2;
	}
	json_decref(a.extra);
	return rc;
}
