/*
 * main.c: start-up, the development mode, signals, shutdown.
 *
 * Signals are blocked in every thread and taken synchronously here with
 * sigwait: SIGTERM/SIGINT drain and exit 0, SIGHUP reloads keys and policy.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"
#include "srv.h"
#include "util/wipe.h"

/* A refusal to start, said once: a plain line on stderr for a person at
 * a terminal, else one JSON line on stdout (the log stream Cloud Logging
 * and journald read, where a second, plain copy would only repeat it). */
static void
refuse(const char *what, const char *why)
{
	char msg[700];

	snprintf(msg, sizeof(msg), "%s: %s", what, why);
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "lockgate: %s\n", msg);
	else
		srv_log("CRITICAL", msg,
		    json_pack("{s:s}", "event", "refused"));
}

static void
die(const char *what, const char *why)
{
	refuse(what, why);
	exit(2);
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

/* long: process start-up and shutdown in order; split pending (issue 21
 * section 3) */
int
main(int argc, char **argv)
{
	char err[512], secret[80], *dev_token = NULL, dev_path[PATH_MAX];
	srv_config cfg;
	gcs_store *store;
	gcs_err ge;
	auth_ctx *auth;
	srv_server *srv;
	api_service *svc = NULL;
	sigset_t set;
	int sig, rc, i;

	if (argc > 1 && strcmp(argv[1], "token") == 0) {
		for (i = 2; i < argc; i++)
			if (strcmp(argv[i], "--dev") == 0)
				return srv_dev_token_main(argc - 1, argv + 1);
		return auth_token_main(argc - 1, argv + 1);
	}
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
		auth = srv_dev_mode(&cfg, secret, sizeof(secret), &dev_token,
		    err, sizeof(err));
		if (auth == NULL)
			die("bad configuration", err);
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
	dev_path[0] = '\0';
	if (dev_token != NULL) {
		/* For `lockgate token --dev` while this runs. */
		if (srv_dev_secret_path(cfg.store, srv_port(srv), dev_path,
		        sizeof(dev_path)) == 0 &&
		    srv_dev_secret_save(dev_path, secret, err, sizeof(err)) !=
		        0) {
			srv_logf("WARNING",
			    "development mode: no secret file: %s", err);
			dev_path[0] = '\0';
		}
		srv_dev_banner(&cfg, dev_token, srv_port(srv),
		    dev_path[0] ? dev_path : NULL);
		util_wipe(dev_token, strlen(dev_token));
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
	if (dev_path[0] != '\0')
		(void)unlink(dev_path);
	util_wipe(secret, sizeof(secret));
	srv_config_free(&cfg);
	srv_log("INFO", "stopped", NULL);
	return 0;
}
