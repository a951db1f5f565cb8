/*
 * main.c: start-up, the development mode, signals, shutdown.
 *
 * Signals are blocked in every thread and taken synchronously here with
 * sigwait: SIGTERM/SIGINT drain and exit 0, SIGHUP reloads keys and policy.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "metrics.h"
#include "srv.h"

/* A refusal to start: one JSON line on stdout (the log stream Cloud
 * Logging reads) and a plain one on stderr for people. */
static void
refuse(const char *what, const char *why)
{
	char msg[700];

	snprintf(msg, sizeof(msg), "%s: %s", what, why);
	srv_log("CRITICAL", msg, json_pack("{s:s}", "event", "refused"));
	fprintf(stderr, "lockgate: %s\n", msg);
}

static void
die(const char *what, const char *why)
{
	refuse(what, why);
	exit(2);
}

/* Development mode (design section 4): no key configured, so make a random
 * secret and an admin token, and stay on loopback.  Still closed.  *TOKEN
 * is the token to print once serving (free it). */
static auth_ctx *
dev_mode(srv_config *cfg, char *secret, size_t len, char **token)
{
	unsigned char raw[32];
	char host[256], err[256];
	auth_ctx *auth;
	int port;
	size_t i;

	if (srv_parse_listen(cfg->listen, host, sizeof(host), &port) != 0 ||
	    !srv_host_is_loopback(host))
		die("no JWT key is configured",
		    "set LOCKGATE_JWT_SECRET (or public keys / a JWKS URL), or "
		    "listen on a loopback address for the development mode");
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		die("development mode", "no randomness for a secret");
	for (i = 0; i < sizeof(raw) && 2 * i + 2 < len; i++)
		snprintf(secret + 2 * i, 3, "%02x", raw[i]);
	explicit_bzero(raw, sizeof(raw));
	cfg->auth.jwt_secret = secret;
	cfg->dev_mode = true;
	if ((auth = auth_new(&cfg->auth, err, sizeof(err))) == NULL)
		die("development mode", err);
	*token = auth_mint_hs256(secret, strlen(secret), "dev",
	    SRV_DEV_TOKEN_TTL, true);
	if (*token == NULL)
		die("development mode", "cannot mint a token");
	return auth;
}

static void
dev_banner(const srv_config *cfg, const char *token, int port)
{
	char host[256], url[300];
	int unused;

	if (srv_parse_listen(cfg->listen, host, sizeof(host), &unused) != 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	snprintf(url, sizeof(url),
	    strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host, port);
	fprintf(stderr,
	    "\nlockgate: development mode: no JWT key configured, so a random "
	    "secret was made\nfor this run and only loopback is served.  An "
	    "admin token for 12 hours:\n\n  export LOCKGATE_TOKEN=%s\n\n"
	    "Try:\n  curl -sS -X POST -H \"Authorization: Bearer "
	    "$LOCKGATE_TOKEN\" \\\n    '%s/v1/locks/demo:"
	    "acquire?ttl=60&holder=me&purpose=try'\n\n"
	    "The dashboard is at %s/ (paste the token).\n\n",
	    token, url, url);
}

static int
check(srv_config *cfg, gcs_store *store)
{
	char err[256], sum[256];
	gcs_err ge;
	auth_ctx *auth;

	if ((auth = auth_new(&cfg->auth, err, sizeof(err))) == NULL) {
		refuse("bad configuration", err);
		return 2;
	}
	if (auth_describe(auth, sum, sizeof(sum)) != 0) {
		refuse("bad configuration", sum);
		auth_free(auth);
		return 1;
	}
	if (gcs_check(store, &ge) != GCS_OK) {
		fprintf(stderr, "lockgate: the store %s does not answer: %s\n",
		    cfg->store, ge.msg);
		auth_free(auth);
		return 1;
	}
	printf("lockgate: keys: %s\n", sum);
	printf("lockgate: configuration OK (store %s, %s)\n", cfg->store,
	    auth_configured(auth)
	        ? "JWT keys configured"
	        : "no JWT key: development mode on loopback only");
	auth_free(auth);
	return 0;
}

int
main(int argc, char **argv)
{
	char err[512], secret[80], *dev_token = NULL;
	srv_config cfg;
	gcs_store *store;
	gcs_err ge;
	auth_ctx *auth;
	srv_server *srv;
	api_service *svc;
	sigset_t set;
	int sig, rc;

	if (argc > 1 && strcmp(argv[1], "token") == 0)
		return auth_token_main(argc - 1, argv + 1);
	if (argc == 2 && strcmp(argv[1], "--routes") == 0) {
		srv_routes_print();
		return 0;
	}

	/* Before any thread starts, so all of them inherit the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = srv_config_load(&cfg, argc, argv, err, sizeof(err));
	if (rc != 0) {
		srv_config_free(&cfg);
		if (rc == 1)
			return 0; /* --help, --version */
		refuse("bad configuration", err);
		return 2;
	}
	if ((store = gcs_open(cfg.store, &ge)) == NULL) {
		refuse("cannot open the store (--store/LOCKGATE_STORE)",
		    ge.msg);
		srv_config_free(&cfg);
		return 2;
	}
	/* Every store call counted and timed for /metrics. */
	if ((store = srv_store_instrument(store)) == NULL)
		die("start-up", "out of memory");
	if (cfg.check_only) {
		rc = check(&cfg, store);
		gcs_store_free(store);
		srv_config_free(&cfg);
		return rc;
	}
	if ((auth = auth_new(&cfg.auth, err, sizeof(err))) == NULL) {
		refuse("bad configuration", err);
		gcs_store_free(store);
		srv_config_free(&cfg);
		return 2;
	}
	if (!auth_configured(auth)) {
		auth_free(auth);
		auth = dev_mode(&cfg, secret, sizeof(secret), &dev_token);
	}
	if ((srv = srv_new(&cfg)) == NULL ||
	    (svc = api_new(store, srv_on_event, srv)) == NULL)
		die("start-up", "out of memory");
	if (srv_start(srv, svc, auth, err, sizeof(err)) != 0) {
		refuse("cannot serve", err);
		srv_free(srv);
		api_free(svc);
		gcs_store_free(store);
		auth_free(auth);
		srv_config_free(&cfg);
		return 2;
	}
	if (dev_token != NULL) {
		dev_banner(&cfg, dev_token, srv_port(srv));
		explicit_bzero(dev_token, strlen(dev_token));
		free(dev_token);
		dev_token = NULL;
	}
	srv_log("INFO", "listening",
	    json_pack("{s:s, s:i, s:s, s:s, s:b}", "listen", cfg.listen, "port",
	        srv_port(srv), "store", cfg.store, "version", LOCKGATE_VERSION,
	        "dev_mode", cfg.dev_mode));

	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig == SIGHUP) {
			if (auth_reload(auth, err, sizeof(err)) != 0)
				srv_logf("ERROR",
				    "reload failed, keeping the "
				    "old keys and policy: %s",
				    err);
			else
				srv_log("INFO", "reloaded keys and policy",
				    NULL);
			continue;
		}
		break;
	}
	srv_log("INFO", "shutting down",
	    json_pack("{s:s}", "signal",
	        sig == SIGTERM ? "SIGTERM" : "SIGINT"));
	srv_free(srv);
	api_free(svc);
	gcs_store_free(store);
	auth_free(auth);
	explicit_bzero(secret, sizeof(secret));
	srv_config_free(&cfg);
	srv_log("INFO", "stopped", NULL);
	return 0;
}
