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
#include <time.h>
#include <unistd.h>

#include "gcs/gcs_multi.h"
#include "metrics.h"
#include "srv.h"
#include "util/clock.h"
#include "util/wipe.h"

/* How long shutdown waits for the storage thread's last transfer. */
#define STORAGE_STOP_WAIT_MS 1000

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

/* Seconds between two askings of a storage that has not answered the
 * referee's question: doubling from the first, up to the last. */
#define REFEREE_PAUSE_FIRST_S 1
#define REFEREE_PAUSE_LAST_S  30

/* Wait up to S seconds for a signal of STOP: 0 when none came, else the
 * signal (SIGHUP is taken and waited past: there are no keys to reload
 * yet). */
static int
pause_for_signal(const sigset_t *stop, int s)
{
	struct timespec left;
	int64_t end = util_mono_ms() + (int64_t)s * 1000, now;
	int sig;

	while ((now = util_mono_ms()) < end) {
		left.tv_sec = (time_t)((end - now) / 1000);
		left.tv_nsec = (long)((end - now) % 1000) * 1000000L;
		sig = sigtimedwait(stop, NULL, &left);
		if (sig > 0 && sig != SIGHUP)
			return sig;
	}
	return 0;
}

/*
 * Whether a gs:// store (as gcs_open made it: gcs_gs_endpoint reads it)
 * at an endpoint other than Cloud Storage's (an emulator,
 * LOCKGATE_GCS_ENDPOINT) referees locks as Cloud Storage does
 * (gcs/referee.c: refuses the writes its preconditions forbid, moves a
 * patched object's metageneration): on one that does not, two callers
 * could hold one lock, so lockgate will not run on it.  Cloud Storage
 * itself is not asked.  -1 to go on; else the exit status, said: 2 when
 * the store cannot referee; 0 when a signal in STOP ended the wait.
 *
 * Until the store answers (an emulator still starting, a bucket not yet
 * made), lockgate asks again, 1, 2, 4 ... 30 s apart, a warning each
 * time, and does not listen meanwhile: serving unasked would grant locks
 * on a storage that may not referee them, and an emulator slower to
 * start than lockgate is the usual case, not a rare one.  A signal
 * between two askings ends the wait; one during an asking, once its
 * calls end (the retry budget, --gcs-retry-total-ms).  With --check,
 * one asking and plain lines for a person; not answered is 1.
 */
static int
referee(const srv_config *cfg, gcs_store *store, const sigset_t *stop)
{
	gcs_err ge;
	const char *ep;
	int pause = REFEREE_PAUSE_FIRST_S, sig;

	if (strncmp(cfg->store, "gs://", 5) != 0)
		return -1;
	ep = gcs_gs_endpoint(store);
	if (strcmp(ep, GCS_DEFAULT_ENDPOINT) == 0)
		return -1;
	for (;;) {
		switch (gcs_referee_check(store, &ge)) {
		case GCS_REFEREE_OK:
			if (cfg->check_only)
				printf("lockgate: the storage at %s referees "
				       "locks as Cloud Storage does\n",
				    ep);
			else
				srv_log("INFO",
				    "the storage referees locks as Cloud "
				    "Storage does",
				    json_pack("{s:s}", "endpoint", ep));
			return -1;
		case GCS_REFEREE_CANNOT:
			refuse("the storage cannot referee locks",
			    gcs_err_detail(&ge));
			return 2;
		default:
			break;
		}
		if (cfg->check_only) {
			fprintf(stderr,
			    "lockgate: could not check that the storage at "
			    "%s referees locks: %s\n",
			    ep, gcs_err_detail(&ge));
			return 1;
		}
		srv_log("WARNING",
		    "could not check that the storage referees locks; "
		    "lockgate serves once it can, and asks again",
		    json_pack("{s:s, s:s, s:i}", "endpoint", ep, "error",
		        gcs_err_detail(&ge), "retry_in_s", pause));
		if ((sig = pause_for_signal(stop, pause)) != 0) {
			srv_log("INFO", "stopped before serving",
			    json_pack("{s:s}", "signal",
			        sig == SIGTERM ? "SIGTERM" : "SIGINT"));
			return 0;
		}
		pause = pause * 2 > REFEREE_PAUSE_LAST_S ? REFEREE_PAUSE_LAST_S
		                                         : pause * 2;
	}
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
		    cfg->store, gcs_err_detail(&ge));
		auth_free(auth);
		return 1;
	}
	if (referee(cfg, store, NULL) >= 0) {
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

/* What the process holds while it runs: freed by one path, proc_free,
 * whatever the exit. */
typedef struct proc {
	srv_config cfg;
	gcs_store *store;
	auth_ctx *auth;
	srv_server *srv;
	api_service *svc;
	char secret[80];         /* the development mode's, wiped */
	char *dev_token;         /* the development mode's, until announced */
	char dev_path[PATH_MAX]; /* its secret file, removed at exit */
	const char *self;        /* argv[0]: the banner names it */
} proc;

static void
proc_free(proc *p)
{
	srv_free(p->srv);
	api_free(p->svc);
	gcs_store_free(p->store);
	/* The storage thread, its transfers over (the drain bounded them). */
	(void)gcs_multi_stop(STORAGE_STOP_WAIT_MS);
	auth_free(p->auth);
	if (p->dev_path[0] != '\0')
		(void)unlink(p->dev_path);
	if (p->dev_token != NULL) {
		util_wipe(p->dev_token, strlen(p->dev_token));
		free(p->dev_token);
	}
	util_wipe(p->secret, sizeof(p->secret));
	srv_config_free(&p->cfg);
}

/* `lockgate token ...` and `lockgate --routes`: their exit status, or -1
 * when ARGV asks for neither. */
static int
subcommand(int argc, char **argv)
{
	int i;

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
	return -1;
}

/* The development mode's token, once the server listens: its secret
 * saved for `lockgate token --dev` while this runs, and the banner. */
static void
dev_announce(proc *p)
{
	char err[512];

	if (p->dev_token == NULL)
		return;
	if (srv_dev_secret_path(p->cfg.store, srv_port(p->srv), p->dev_path,
	        sizeof(p->dev_path)) == 0 &&
	    srv_dev_secret_save(p->dev_path, p->secret, err, sizeof(err)) !=
	        0) {
		srv_logf("WARNING", "development mode: no secret file: %s",
		    err);
		p->dev_path[0] = '\0';
	}
	srv_dev_banner(&p->cfg, p->self, p->dev_token, srv_port(p->srv),
	    p->dev_path[0] ? p->dev_path : NULL);
	util_wipe(p->dev_token, strlen(p->dev_token));
	free(p->dev_token);
	p->dev_token = NULL;
}

/* The keys and a server for P's configuration (the store open): 0 once
 * it listens, else the exit status, the refusal said. */
static int
serve(proc *p)
{
	char err[512];

	if ((p->auth = auth_new(&p->cfg.auth, err, sizeof(err))) == NULL) {
		refuse("bad configuration", err);
		return 2;
	}
	if (!auth_configured(p->auth)) {
		auth_free(p->auth);
		p->auth = srv_dev_mode(&p->cfg, p->secret, sizeof(p->secret),
		    &p->dev_token, err, sizeof(err));
		if (p->auth == NULL)
			die("bad configuration", err);
	}
	if ((p->srv = srv_new(&p->cfg)) == NULL ||
	    (p->svc = api_new(p->store, srv_on_event, p->srv)) == NULL)
		die("start-up", "out of memory");
	if (srv_start(p->srv, p->svc, p->auth, err, sizeof(err)) != 0) {
		refuse("cannot serve", err);
		return 2;
	}
	dev_announce(p);
	srv_log("INFO", "listening",
	    json_pack("{s:s, s:i, s:s, s:s, s:b}", "listen", p->cfg.listen,
	        "port", srv_port(p->srv), "store", p->cfg.store, "version",
	        LOCKGATE_VERSION, "dev_mode", p->cfg.dev_mode));
	return 0;
}

/* Start-up in order: the configuration, the store, then serving (or the
 * check of --check).  -1 once the server listens, else the exit status;
 * a signal in STOP ends a wait for the store. */
static int
start(proc *p, int argc, char **argv, const sigset_t *stop)
{
	char err[512];
	gcs_err ge;
	int rc = srv_config_load(&p->cfg, argc, argv, err, sizeof(err));

	p->self = argc > 0 && argv[0] != NULL ? argv[0] : "lockgate";
	if (rc != 0) {
		if (rc == 1)
			return 0; /* --help, --version */
		refuse("bad configuration", err);
		return 2;
	}
	if (p->cfg.threads != 0)
		srv_log("WARNING",
		    "--threads (LOCKGATE_THREADS) has no effect: no request "
		    "holds a thread; the setting can go",
		    NULL);
	gcs_configure(&p->cfg.gcs);
	if ((p->store = gcs_open(p->cfg.store, &ge)) == NULL) {
		refuse("cannot open the store (--store/LOCKGATE_STORE)",
		    gcs_err_detail(&ge));
		return 2;
	}
	if (p->cfg.check_only)
		return check(&p->cfg, p->store);
	if ((rc = referee(&p->cfg, p->store, stop)) >= 0)
		return rc;
	/* Every store call from now on counted and timed for /metrics. */
	if ((p->store = srv_store_instrument(p->store)) == NULL)
		die("start-up", "out of memory");
	rc = serve(p);
	return rc == 0 ? -1 : rc;
}

/* Until SIGTERM or SIGINT (in SET): SIGHUP reloads keys and policy. */
static void
run_until_stopped(proc *p, const sigset_t *set)
{
	char err[512];
	int sig;

	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		if (sig != SIGHUP)
			break;
		if (auth_reload(p->auth, err, sizeof(err)) != 0)
			srv_logf("ERROR",
			    "reload failed, keeping the "
			    "old keys and policy: %s",
			    err);
		else
			srv_log("INFO", "reloaded keys and policy", NULL);
	}
	srv_log("INFO", "shutting down",
	    json_pack("{s:s}", "signal",
	        sig == SIGTERM ? "SIGTERM" : "SIGINT"));
}

int
main(int argc, char **argv)
{
	proc p;
	sigset_t set;
	int rc = subcommand(argc, argv);

	if (rc >= 0)
		return rc;
	/* Before any thread starts, so all of them inherit the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	memset(&p, 0, sizeof(p));
	rc = start(&p, argc, argv, &set);
	if (rc < 0)
		run_until_stopped(&p, &set);
	proc_free(&p);
	if (rc >= 0)
		return rc;
	srv_log("INFO", "stopped", NULL);
	return 0;
}
