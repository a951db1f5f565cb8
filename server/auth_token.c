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

/* long: a CLI: one branch per flag, then read the secret and mint, with
 * one cleanup path that wipes the secret and the token */
int
auth_token_main(int argc, char **argv)
{
	const char *file = getenv("LOCKGATE_JWT_SECRET_FILE"), *sub = NULL;
	const char *iss = NULL, *aud = NULL;
	long ttl = AUTH_TTL_DEFAULT;
	bool admin = false;
	json_t *extra = json_object(), *c = NULL;
	unsigned char *secret = NULL;
	size_t slen = 0;
	char err[256], *tok = NULL;
	int i, rc = 2;

	if (extra == NULL)
		return 1;
	for (i = 1; i < argc; i++) {
		const char *o = argv[i],
		           *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(o, "--admin") == 0) {
			admin = true;
			continue;
		}
		if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
			token_usage(stdout);
			rc = 0;
			goto out;
		}
		if (val == NULL) {
			fprintf(stderr, "lockgate token: %s needs a value\n",
			    o);
			goto usage;
		}
		i++;
		if (strcmp(o, "--secret-file") == 0) {
			file = val;
		} else if (strcmp(o, "--sub") == 0) {
			sub = val;
		} else if (strcmp(o, "--iss") == 0) {
			iss = val;
		} else if (strcmp(o, "--aud") == 0) {
			aud = val;
		} else if (strcmp(o, "--ttl") == 0) {
			ttl = parse_duration(val);
			if (ttl < 0) {
				fprintf(stderr,
				    "lockgate token: --ttl wants 1..%ld "
				    "s, e.g. 3600, 90m, 1h, 7d\n",
				    AUTH_TTL_MAX);
				goto usage;
			}
		} else if (strcmp(o, "--claim") == 0) {
			const char *eq = strchr(val, '=');
			char key[AUTH_CLAIM_MAX];

			if (eq == NULL || eq == val ||
			    (size_t)(eq - val) >= sizeof(key)) {
				fprintf(stderr,
				    "lockgate token: --claim wants "
				    "key=value\n");
				goto usage;
			}
			memcpy(key, val, (size_t)(eq - val));
			key[eq - val] = '\0';
			if (reserved_claim(key)) {
				fprintf(stderr,
				    "lockgate token: use --sub, --ttl, "
				    "--admin, --iss, --aud for \"%s\"\n",
				    key);
				goto usage;
			}
			if (json_object_set_new(extra, key,
			        json_string(eq + 1)))
				goto usage;
		} else {
			fprintf(stderr, "lockgate token: unknown option %s\n",
			    o);
			goto usage;
		}
	}
	if (file == NULL || *file == '\0' || sub == NULL || *sub == '\0') {
		fprintf(stderr,
		    "lockgate token: --secret-file and --sub are "
		    "needed\n");
		goto usage;
	}
	if (strlen(sub) > API_OWNER_MAX || !api_text_clean(sub, strlen(sub))) {
		fprintf(stderr,
		    "lockgate token: --sub is at most %d bytes of UTF-8 "
		    "text without control characters\n",
		    API_OWNER_MAX);
		goto usage;
	}
	secret = auth_read_secret_file(file, &slen, err, sizeof(err));
	if (secret == NULL) {
		fprintf(stderr, "lockgate token: %s\n", err);
		rc = 1;
		goto out;
	}
	if (slen < AUTH_SECRET_MIN) {
		fprintf(stderr,
		    "lockgate token: the secret must be at least %d "
		    "bytes\n",
		    AUTH_SECRET_MIN);
		rc = 1;
		goto out;
	}
	c = base_claims(sub, ttl, admin);
	if (c == NULL || json_object_update(c, extra) != 0 ||
	    (iss != NULL && json_object_set_new(c, "iss", json_string(iss))) ||
	    (aud != NULL && json_object_set_new(c, "aud", json_string(aud)))) {
		rc = 1;
		goto out;
	}
	tok = mint(secret, slen, c);
	if (tok == NULL) {
		fprintf(stderr, "lockgate token: cannot sign the token\n");
		rc = 1;
		goto out;
	}
	printf("%s\n", tok);
	rc = fflush(stdout) == 0 ? 0 : 1;
	goto out;
usage:
	token_usage(stderr);
	rc = 2;
out:
	if (secret != NULL) {
		util_wipe(secret, slen);
		free(secret);
	}
	if (tok != NULL) {
		util_wipe(tok, strlen(tok));
		free(tok);
	}
	json_decref(c);
	json_decref(extra);
	return rc;
}
