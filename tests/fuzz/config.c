/*
 * config.c: configuration parsing (server/config.c srv_config_load, with
 * srv_parse_listen and srv_host_is_loopback).  Input: NUL-separated
 * fields; a field "NAME=value" whose NAME is one of the LOCKGATE_* (or
 * PORT) variables sets it in the environment, every other field is a
 * command-line argument.  What must hold: 0 gives a configuration with a
 * listen address that parses and a store of a known scheme; -1 gives a
 * message; nothing set stays in the environment for the next input.
 */
#include "server/srv.h"

#include "fuzz.h"

#define ARGS_MAX 32

static const char *const vars[] = { "LOCKGATE_LISTEN", "LOCKGATE_STORE",
	"LOCKGATE_THREADS", "LOCKGATE_MAX_WAIT", "LOCKGATE_PUBLIC_READ",
	"LOCKGATE_JWT_SECRET", "LOCKGATE_JWT_SECRET_FILE", "LOCKGATE_JWKS_URL",
	"LOCKGATE_POLICY", "LOCKGATE_JWT_LEEWAY", "LOCKGATE_JWT_MAX_AGE",
	"LOCKGATE_CONNECTION_TIMEOUT", "PORT", NULL };

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	size_t i;

	(void)argc;
	(void)argv;
	for (i = 0; vars[i] != NULL; i++)
		unsetenv(vars[i]);
	/* --help and --version print: keep libFuzzer's output readable. */
	if (freopen("/dev/null", "w", stdout) == NULL)
		abort();
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in in = { data, size };
	char *args[ARGS_MAX + 1], *field, err[256], host[256];
	const uint8_t *f;
	srv_config cfg;
	int argc = 1, rc, port, i, v;

	args[0] = fuzz_str((const uint8_t *)"lockgate", 8);
	while (in.n > 0 && argc < ARGS_MAX) {
		size_t n = fuzz_field(&in, 0, &f);
		char *eq;

		field = fuzz_str(f, n);
		eq = strchr(field, '=');
		for (v = 0; eq != NULL && vars[v] != NULL; v++)
			if (strlen(vars[v]) == (size_t)(eq - field) &&
			    strncmp(field, vars[v], (size_t)(eq - field)) == 0)
				break;
		if (eq != NULL && vars[v] != NULL) {
			*eq = '\0';
			setenv(field, eq + 1, 1);
			free(field);
			continue;
		}
		args[argc++] = field;
	}
	args[argc] = NULL;
	err[0] = '\0';
	rc = srv_config_load(&cfg, argc, args, err, sizeof(err));
	FUZZ_CHECK(rc == -1 || rc == 0 || rc == 1);
	if (rc == -1)
		FUZZ_CHECK(err[0] != '\0');
	if (rc == 0) {
		FUZZ_CHECK(cfg.listen != NULL && cfg.store != NULL);
		FUZZ_CHECK(srv_parse_listen(cfg.listen, host, sizeof(host),
		               &port) == 0);
		FUZZ_CHECK(port >= 0 && port <= 65535);
		(void)srv_host_is_loopback(host);
		FUZZ_CHECK(strncmp(cfg.store, "file://", 7) == 0 ||
		    strncmp(cfg.store, "gs://", 5) == 0 ||
		    strcmp(cfg.store, "mem://") == 0);
		/* threads 0: unset (the option has no effect since 630a420) */
		FUZZ_CHECK(cfg.max_wait >= 0 && cfg.threads >= 0 &&
		    cfg.threads <= SRV_THREADS_MAX);
	}
	srv_config_free(&cfg);
	for (i = 0; i < argc; i++)
		free(args[i]);
	for (v = 0; vars[v] != NULL; v++)
		unsetenv(vars[v]);
	return 0;
}
