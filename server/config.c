/*
 * config.c: every option is a flag and a LOCKGATE_* variable (flags win),
 * described once in the table below, which also writes --help.  Numbers
 * are parsed whole and bounded; a bad value names the option and why.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"
#include "util/wipe.h"

enum opt_type { T_STR, T_INT, T_BOOL, T_FLAG };

/* An option.  Its default in --help is DEF when given (a text: a string's
 * constant, or how the default is derived), else the number DFLT (a
 * T_INT's constant, a T_BOOL's 0 or 1), else "none": each written once,
 * as the constant the code uses. */
typedef struct opt {
	const char *flag; /* without the leading "--" */
	const char *env;  /* NULL: flag only */
	enum opt_type type;
	size_t off;      /* into srv_config */
	long min, max;   /* T_INT bounds */
	long dflt;       /* T_INT, T_BOOL: the default, unless DEF */
	const char *def; /* the default as text, or NULL */
	const char *help;
	bool empty_unset; /* an empty variable counts as unset */
} opt;

#define OFF(f) offsetof(srv_config, f)

static const opt opts[] = {
	{ "listen", "LOCKGATE_LISTEN", T_STR, OFF(listen), 0, 0, 0,
	    SRV_LISTEN_DEFAULT " (0.0.0.0:$PORT when PORT is set)",
	    "address and port to serve HTTP on", false },
	{ "store", "LOCKGATE_STORE", T_STR, OFF(store), 0, 0, 0,
	    SRV_STORE_DEFAULT,
	    "where leases live: file://DIR, gs://BUCKET/PREFIX/, mem://",
	    false },
	{ "threads", "LOCKGATE_THREADS", T_INT, OFF(threads), 1,
	    SRV_THREADS_MAX, 0, "none",
	    "no effect, accepted so that existing settings still start: "
	    "no request holds a thread (a file:// write waits for its "
	    "commit as a task)",
	    false },
	{ "max-wait", "LOCKGATE_MAX_WAIT", T_INT, OFF(max_wait), 0, 3300,
	    API_WAIT_MAX_DEFAULT, NULL,
	    "longest wait= a request may ask for, in seconds; keep it "
	    "under the platform's request timeout",
	    false },
	{ "max-connections", "LOCKGATE_MAX_CONNECTIONS", T_INT,
	    OFF(max_connections), 16, 100000, SRV_CONN_LIMIT_DEFAULT, NULL,
	    "open connections, waiters included", false },
	{ "max-waiters", "LOCKGATE_MAX_WAITERS", T_INT, OFF(max_waiters), 1,
	    100000, 0, "max-connections / " SRV_XSTR(SRV_WAITERS_DIVISOR),
	    "acquire requests that may wait at once; past it an acquire "
	    "that would wait is answered 429 too_many_waiters",
	    false },
	{ "max-owner-waiters", "LOCKGATE_MAX_OWNER_WAITERS", T_INT,
	    OFF(max_owner_waiters), 1, 100000, 0,
	    "max-waiters / " SRV_XSTR(SRV_OWNER_WAITERS_DIVISOR),
	    "of those, how many one owner may have", false },
	{ "head-timeout", "LOCKGATE_HEAD_TIMEOUT", T_INT, OFF(head_timeout), 1,
	    3600, SRV_HEAD_TIMEOUT_DEFAULT, NULL,
	    "seconds a new connection may take to send its request head (a "
	    "kept one: the idle timeout plus this); then it is closed, so "
	    "that clients trickling bytes cannot hold every connection",
	    false },
	{ "connection-timeout", "LOCKGATE_CONNECTION_TIMEOUT", T_INT,
	    OFF(connection_timeout), 1, 3600, SRV_CONN_TIMEOUT_DEFAULT, NULL,
	    "seconds an idle keep-alive connection is kept", false },
	{ "public-read", "LOCKGATE_PUBLIC_READ", T_BOOL, OFF(public_read), 0, 0,
	    0, NULL, "anyone may read lock state (never a lease_id)", false },
	{ "metrics-public", "LOCKGATE_METRICS_PUBLIC", T_BOOL,
	    OFF(metrics_public), 0, 0, 0, NULL, "anyone may read /metrics",
	    false },
	{ "link-hosts", "LOCKGATE_LINK_HOSTS", T_STR, OFF(link_hosts), 0, 0, 0,
	    SRV_LINK_HOSTS_DEFAULT,
	    "comma-separated hosts (host or host:port) whose http(s) URLs "
	    "the dashboard shows as links, as a CI job's URL given as the "
	    "holder; \"\" for none.  Any other URL is plain text: a "
	    "holder's text must not send readers anywhere",
	    false },
	{ "gcs-endpoint", "LOCKGATE_GCS_ENDPOINT", T_STR, OFF(gcs.endpoint), 0,
	    0, 0, GCS_DEFAULT_ENDPOINT,
	    "gs://: another Cloud Storage JSON API endpoint (credentials "
	    "kept)",
	    true },
	{ "gcs-ca-file", "LOCKGATE_GCS_CA_FILE", T_STR, OFF(gcs.ca_file), 0, 0,
	    0, "the system's",
	    "gs://: certificates to trust for the storage and token "
	    "endpoints (a private endpoint)",
	    true },
	{ "gcs-retry-total-ms", "LOCKGATE_GCS_RETRY_TOTAL_MS", T_INT,
	    OFF(gcs.retry_total_ms), GCS_RETRY_TOTAL_MIN_MS,
	    GCS_RETRY_TOTAL_MAX_MS, GCS_RETRY_TOTAL_MS, NULL,
	    "gs://: milliseconds all tries of one storage call may take",
	    true },
	{ "file-no-prealloc", "LOCKGATE_FILE_NO_PREALLOC", T_BOOL,
	    OFF(gcs.file_no_prealloc), 0, 0, 0, NULL,
	    "file://: no log space written ahead and no spare files made "
	    "for new names (for a tmpfs: there they save no time and cost "
	    "memory)",
	    false },
	{ "jwt-secret", "LOCKGATE_JWT_SECRET", T_STR, OFF(auth.jwt_secret), 0,
	    0, 0, NULL,
	    "HS256 secret (prefer the variable or a file: flags "
	    "show in process lists)",
	    false },
	{ "jwt-secret-file", "LOCKGATE_JWT_SECRET_FILE", T_STR,
	    OFF(auth.jwt_secret_file), 0, 0, 0, NULL,
	    "file holding the HS256 secret", false },
	{ "jwt-public-keys", "LOCKGATE_JWT_PUBLIC_KEYS", T_STR,
	    OFF(auth.public_keys), 0, 0, 0, NULL,
	    "comma-separated [kid=]path PEM public keys (RS256/ES256)", false },
	{ "jwks-url", "LOCKGATE_JWKS_URL", T_STR, OFF(auth.jwks_url), 0, 0, 0,
	    NULL, "JWKS URL of an OIDC issuer (GitHub, GitLab, Google)",
	    false },
	{ "jwt-issuer", "LOCKGATE_JWT_ISSUER", T_STR, OFF(auth.issuer), 0, 0, 0,
	    NULL, "required iss of PEM/JWKS tokens (comma-separated spellings)",
	    false },
	{ "jwt-audience", "LOCKGATE_JWT_AUDIENCE", T_STR, OFF(auth.audience), 0,
	    0, 0, NULL, "required aud of PEM/JWKS tokens (comma-separated)",
	    false },
	{ "jwt-secret-issuer", "LOCKGATE_JWT_SECRET_ISSUER", T_STR,
	    OFF(auth.secret_issuer), 0, 0, 0, NULL,
	    "required iss of HS256 tokens", false },
	{ "jwt-secret-audience", "LOCKGATE_JWT_SECRET_AUDIENCE", T_STR,
	    OFF(auth.secret_audience), 0, 0, 0, NULL,
	    "required aud of HS256 tokens", false },
	{ "jwks-min-interval", "LOCKGATE_JWKS_MIN_INTERVAL", T_INT,
	    OFF(auth.jwks_min_interval), 1, 86400, AUTH_JWKS_MIN_INTERVAL, NULL,
	    "seconds between JWKS re-fetches caused by unknown kids", false },
	{ "policy", "LOCKGATE_POLICY", T_STR, OFF(auth.policy_file), 0, 0, 0,
	    NULL, "JSON policy file: who may read, acquire, administer",
	    false },
	{ "owner-claim", "LOCKGATE_OWNER_CLAIM", T_STR, OFF(auth.owner_claim),
	    0, 0, 0, AUTH_OWNER_CLAIM_DEFAULT,
	    "claim that names a lease's owner (HS256 tokens without it: sub)",
	    false },
	{ "display-claims", "LOCKGATE_DISPLAY_CLAIMS", T_STR,
	    OFF(auth.display_claims), 0, 0, 0, NULL,
	    "comma-separated claims stored on a lease for the dashboard",
	    false },
	{ "jwt-leeway", "LOCKGATE_JWT_LEEWAY", T_INT, OFF(auth.leeway), 0, 3600,
	    AUTH_LEEWAY_DEFAULT, NULL,
	    "seconds of clock leeway on exp, nbf, iat", false },
	{ "jwt-max-age", "LOCKGATE_JWT_MAX_AGE", T_INT, OFF(auth.max_token_age),
	    0, 31536000, 0, NULL,
	    "refuse tokens issued longer ago (0: no limit)", false },
	{ "check", NULL, T_FLAG, OFF(check_only), 0, 0, 0, NULL,
	    "validate the configuration (and reach the store), then exit",
	    false },
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static void
usage(void)
{
	size_t i;

	printf("usage: lockgate [options]\n"
	       "       lockgate token --secret-file F --sub NAME [--ttl 1h] "
	       "[--claim k=v] [--admin]\n"
	       "                      [--iss ISS] [--aud AUD]    an HS256 "
	       "token (token --help)\n"
	       "       lockgate token --dev [--port N]            a fresh "
	       "admin token of a running\n"
	       "                                                  "
	       "development-mode server\n\n"
	       "lockgate %s: named locks over HTTP, leases in an object "
	       "store.\n"
	       "Every option is also an environment variable; flags win.\n\n",
	    LOCKGATE_VERSION);
	for (i = 0; i < NOPTS; i++) {
		printf("  --%-20s %s\n", opts[i].flag, opts[i].help);
		if (opts[i].env == NULL)
			continue;
		if (opts[i].def != NULL)
			printf("  %-22s $%s, default %s\n", "", opts[i].env,
			    opts[i].def);
		else if (opts[i].type == T_INT)
			printf("  %-22s $%s, default %ld\n", "", opts[i].env,
			    opts[i].dflt);
		else if (opts[i].type == T_BOOL)
			printf("  %-22s $%s, default %s\n", "", opts[i].env,
			    opts[i].dflt ? "true" : "false");
		else
			printf("  %-22s $%s, default none\n", "", opts[i].env);
	}
	printf("  --%-20s this text\n  --%-20s print the version\n", "help",
	    "version");
	printf("\nFrom the environment only:\n"
	       "  PORT                         Cloud Run's port: the default "
	       "listen becomes 0.0.0.0:$PORT\n"
	       "  GOOGLE_CLOUD_PROJECT         log lines name traces "
	       "projects/ID/traces/TRACE\n"
	       "  GOOGLE_APPLICATION_CREDENTIALS, GCE_METADATA_HOST   gs:// "
	       "credentials, as Google's\n"
	       "                               libraries read them\n"
	       "  STORAGE_EMULATOR_HOST        gs:// against an emulator "
	       "(no credentials)\n"
	       "  XDG_RUNTIME_DIR              development mode: where the "
	       "secret file is kept\n"
	       "                               (else a file:// store's "
	       "directory)\n");
}

static char *
keep(srv_config *cfg, const char *s)
{
	char *d;

	if (cfg->nowned >= (int)(sizeof(cfg->owned) / sizeof(cfg->owned[0])))
		return NULL;
	if ((d = strdup(s)) == NULL)
		return NULL;
	cfg->owned[cfg->nowned++] = d;
	return d;
}

static int
parse_bool(const char *v, bool *out)
{
	if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes") ||
	    !strcmp(v, "on")) {
		*out = true;
		return 0;
	}
	if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no") ||
	    !strcmp(v, "off")) {
		*out = false;
		return 0;
	}
	return -1;
}

/* Whether VALUE looks like a setting with a comment pasted after it
 * ("repository   # or job_workflow_ref"): whitespace, then '#'.  No
 * setting of lockgate holds that; a shell, an env file or systemd's
 * Environment= would keep it as part of the value. */
static bool
pasted_comment(const char *value)
{
	const char *h;

	for (h = strchr(value, '#'); h != NULL; h = strchr(h + 1, '#'))
		if (h > value && (h[-1] == ' ' || h[-1] == '\t'))
			return true;
	return false;
}

/* Set option O from VALUE; WHERE names the source for messages. */
static int
set(srv_config *cfg, const opt *o, const char *value, const char *where,
    char *err, size_t errlen)
{
	char *base = (char *)cfg, *end;
	long v;

	switch (o->type) {
	case T_STR:
		if (value[0] == '\0') {
			snprintf(err, errlen, "%s is empty", where);
			return -1;
		}
		/* A secret may hold anything, and is never quoted back. */
		if (o->off != OFF(auth.jwt_secret) && pasted_comment(value)) {
			snprintf(err, errlen,
			    "%s holds a pasted comment ('%.60s'): keep only "
			    "the value, without the ' #' and what follows",
			    where, value);
			return -1;
		}
		if ((*(char **)(base + o->off) = keep(cfg, value)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		return 0;
	case T_INT:
		errno = 0;
		v = strtol(value, &end, 10);
		if (value[0] == '\0' || *end != '\0' || errno != 0 ||
		    v < o->min || v > o->max) {
			snprintf(err, errlen,
			    "%s must be a whole number from %ld to %ld, not "
			    "'%.40s'",
			    where, o->min, o->max, value);
			return -1;
		}
		*(int *)(base + o->off) = (int)v;
		return 0;
	case T_BOOL:
	case T_FLAG:
		if (parse_bool(value, (bool *)(base + o->off)) != 0) {
			snprintf(err, errlen,
			    "%s must be true or false, not '%.40s'", where,
			    value);
			return -1;
		}
		return 0;
	}
	return -1;
}

static void
defaults(srv_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->threads = 0; /* unset: --threads has no effect */
	cfg->max_wait = API_WAIT_MAX_DEFAULT;
	cfg->max_connections = SRV_CONN_LIMIT_DEFAULT;
	cfg->connection_timeout = SRV_CONN_TIMEOUT_DEFAULT;
	cfg->head_timeout = SRV_HEAD_TIMEOUT_DEFAULT;
	cfg->auth.leeway = -1;
}

/* Every option set in the environment.  0, or -1 with ERR. */
static int
load_env(srv_config *cfg, char *err, size_t errlen)
{
	const char *v;
	size_t i;

	for (i = 0; i < NOPTS; i++) {
		if (opts[i].env == NULL || (v = getenv(opts[i].env)) == NULL ||
		    (v[0] == '\0' && opts[i].empty_unset))
			continue;
		if (set(cfg, &opts[i], v, opts[i].env, err, errlen) != 0)
			return -1;
	}
	return 0;
}

/* The option named by ARG (after its "--", up to a '=' or its end), or
 * NULL. */
static const opt *
opt_named(const char *arg)
{
	const char *eq = strchr(arg, '=');
	size_t i, nlen = eq ? (size_t)(eq - arg) : strlen(arg);

	for (i = 0; i < NOPTS; i++)
		if (strlen(opts[i].flag) == nlen &&
		    !strncmp(opts[i].flag, arg, nlen))
			return &opts[i];
	return NULL;
}

/* Every flag of ARGV, over the environment's.  0; 1 after --help or
 * --version (said); -1 with ERR. */
static int
load_flags(srv_config *cfg, int argc, char **argv, char *err, size_t errlen)
{
	char where[96];
	const char *arg, *eq, *v;
	const opt *o;
	int a;

	for (a = 1; a < argc; a++) {
		arg = argv[a];
		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			usage();
			return 1;
		}
		if (!strcmp(arg, "--version")) {
			printf("lockgate %s\n", LOCKGATE_VERSION);
			return 1;
		}
		if (strncmp(arg, "--", 2) != 0) {
			snprintf(err, errlen,
			    "unexpected argument '%.60s' (see --help)", arg);
			return -1;
		}
		arg += 2;
		eq = strchr(arg, '=');
		if ((o = opt_named(arg)) == NULL) {
			snprintf(err, errlen,
			    "unknown option '--%.*s' (see --help)",
			    (int)(eq ? (size_t)(eq - arg) : strlen(arg)), arg);
			return -1;
		}
		snprintf(where, sizeof(where), "--%s", o->flag);
		if (eq)
			v = eq + 1;
		else if (o->type == T_FLAG || o->type == T_BOOL)
			v = "true";
		else if (a + 1 < argc)
			v = argv[++a];
		else {
			snprintf(err, errlen, "%s needs a value", where);
			return -1;
		}
		if (set(cfg, o, v, where, err, errlen) != 0)
			return -1;
	}
	return 0;
}

/* The listen address: the default when unset (0.0.0.0:$PORT on Cloud
 * Run), and host:port in any case.  0, or -1 with ERR. */
static int
settle_listen(srv_config *cfg, char *err, size_t errlen)
{
	char host[256], lbuf[300];
	const char *port;
	int p;

	if (cfg->listen == NULL) {
		port = getenv("PORT");
		if (port != NULL && port[0] != '\0')
			snprintf(lbuf, sizeof(lbuf), "0.0.0.0:%s", port);
		else
			snprintf(lbuf, sizeof(lbuf), "%s", SRV_LISTEN_DEFAULT);
		if ((cfg->listen = keep(cfg, lbuf)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	if (srv_parse_listen(cfg->listen, host, sizeof(host), &p) != 0) {
		snprintf(err, errlen,
		    "--listen/LOCKGATE_LISTEN (or PORT) must be host:port with "
		    "a port from 0 to 65535, not '%.60s'",
		    cfg->listen);
		return -1;
	}
	return 0;
}

/* The link hosts and the store: their defaults when unset, and their
 * form.  0, or -1 with ERR. */
static int
settle_hosts_store(srv_config *cfg, char *err, size_t errlen)
{
	if (cfg->link_hosts == NULL &&
	    (cfg->link_hosts = keep(cfg, SRV_LINK_HOSTS_DEFAULT)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (strspn(cfg->link_hosts,
	        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	        "0123456789.-:,") != strlen(cfg->link_hosts)) {
		snprintf(err, errlen,
		    "--link-hosts/LOCKGATE_LINK_HOSTS must be host names "
		    "(letters, digits, '.', '-', ':port') separated by commas, "
		    "not '%.60s'",
		    cfg->link_hosts);
		return -1;
	}
	if (cfg->store == NULL &&
	    (cfg->store = keep(cfg, SRV_STORE_DEFAULT)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (strncmp(cfg->store, "file://", 7) != 0 &&
	    strncmp(cfg->store, "gs://", 5) != 0 &&
	    strcmp(cfg->store, "mem://") != 0) {
		snprintf(err, errlen,
		    "--store/LOCKGATE_STORE must start with file://, gs:// or "
		    "be mem://, not '%.60s'",
		    cfg->store);
		return -1;
	}
	return 0;
}

/* What no option set, derived from those that are, and the rules that
 * tie options together.  0, or -1 with ERR. */
static int
settle(srv_config *cfg, char *err, size_t errlen)
{
	if (settle_listen(cfg, err, errlen) != 0)
		return -1;
	if (cfg->max_waiters == 0)
		cfg->max_waiters = cfg->max_connections / SRV_WAITERS_DIVISOR;
	if (cfg->max_owner_waiters == 0)
		cfg->max_owner_waiters =
		    cfg->max_waiters / SRV_OWNER_WAITERS_DIVISOR > 0
		    ? cfg->max_waiters / SRV_OWNER_WAITERS_DIVISOR
		    : 1;
	if (settle_hosts_store(cfg, err, errlen) != 0)
		return -1;
	if (cfg->auth.jwks_url != NULL && cfg->auth.policy_file == NULL) {
		/* GitHub, GitLab and Google sign a token with any audience
		 * for anyone who asks: without a policy every repository or
		 * account in the world could take and read every lock. */
		snprintf(err, errlen,
		    "--jwks-url/LOCKGATE_JWKS_URL needs --policy/"
		    "LOCKGATE_POLICY: an OIDC issuer signs tokens for anyone "
		    "who asks, with any audience, and the policy says whose "
		    "count (docs/identity.md)");
		return -1;
	}
	if (cfg->auth.jwks_url != NULL &&
	    (cfg->auth.issuer == NULL || cfg->auth.audience == NULL)) {
		/* Every service a job asks its issuer for a token can
		 * replay that token: only the audience tells a token meant
		 * for lockgate from one meant for AWS, Vault or anyone. */
		snprintf(err, errlen,
		    "--jwks-url/LOCKGATE_JWKS_URL needs --jwt-issuer/"
		    "LOCKGATE_JWT_ISSUER and --jwt-audience/"
		    "LOCKGATE_JWT_AUDIENCE: without an audience, a token the "
		    "job asked for another service would work here too "
		    "(docs/identity.md)");
		return -1;
	}
	if (cfg->auth.jwt_secret != NULL && cfg->auth.jwt_secret_file != NULL) {
		snprintf(err, errlen,
		    "set LOCKGATE_JWT_SECRET or LOCKGATE_JWT_SECRET_FILE, not "
		    "both");
		return -1;
	}
	return 0;
}

/* Defaults, environment, then flags, in the documented order of
 * precedence, then what follows from them. */
int
srv_config_load(srv_config *cfg, int argc, char **argv, char *err,
    size_t errlen)
{
	int rc;

	defaults(cfg);
	if (load_env(cfg, err, errlen) != 0)
		return -1;
	if ((rc = load_flags(cfg, argc, argv, err, errlen)) != 0)
		return rc;
	return settle(cfg, err, errlen);
}

void
srv_config_free(srv_config *cfg)
{
	int i;

	for (i = 0; i < cfg->nowned; i++) {
		/* Secrets among them: wipe before freeing. */
		util_wipe(cfg->owned[i], strlen(cfg->owned[i]));
		free(cfg->owned[i]);
	}
	memset(cfg, 0, sizeof(*cfg));
}

int
srv_parse_listen(const char *listen, char *host, size_t hostlen, int *port)
{
	const char *colon, *h = listen, *end;
	size_t n;
	char *pe;
	long p;

	if (listen[0] == '[') {
		end = strchr(listen, ']');
		if (end == NULL || end[1] != ':')
			return -1;
		h = listen + 1;
		n = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(listen, ':');
		if (colon == NULL)
			return -1;
		n = (size_t)(colon - listen);
	}
	if (n == 0 || n >= hostlen)
		return -1;
	memcpy(host, h, n);
	host[n] = '\0';
	errno = 0;
	p = strtol(colon + 1, &pe, 10);
	if (colon[1] == '\0' || *pe != '\0' || errno || p < 0 || p > 65535)
		return -1;
	*port = (int)p;
	return 0;
}

int
srv_host_is_loopback(const char *host)
{
	struct in_addr v4;
	struct in6_addr v6;

	/* An address, not a name that starts like one: 127.evil.example is
	 * wherever its DNS says. */
	if (inet_pton(AF_INET, host, &v4) == 1)
		return (ntohl(v4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &v6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&v6);
	return strcmp(host, "localhost") == 0;
}
