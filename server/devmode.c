/*
 * devmode.c: the development mode (design section 4): no key configured,
 * so a random HS256 secret for this run, an admin token printed once, and
 * loopback only.  Still closed.
 *
 * While it serves, the secret is also kept in a file only its user can
 * read, so that `lockgate token --dev` mints a fresh admin token without a
 * restart (the banner's scrolls away; it expires after 12 hours):
 *     $XDG_RUNTIME_DIR/.lockgate-dev-PORT.secret   when XDG_RUNTIME_DIR is
 *                                                  set (a per-user tmpfs),
 *     DIR/.lockgate-dev-PORT.secret                else, for a file://DIR
 *                                                  store (the file store
 *                                                  ignores dot files),
 * and none for mem:// without XDG_RUNTIME_DIR.  PORT is the port served,
 * so two dev servers of one user never share a file.  The file is made
 * 0600 under a temporary name and renamed into place (a stale one of a
 * killed run is replaced), and removed at exit.  It holds what the server
 * holds in memory anyway: anyone who can read it can also read the
 * process's memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv.h"
#include "util/wipe.h"

#define DEV_SECRET_BYTES 32 /* random bytes of the secret (hex: twice) */

auth_ctx *
srv_dev_mode(srv_config *cfg, char *secret, size_t len, char **token, char *err,
    size_t errlen)
{
	unsigned char raw[DEV_SECRET_BYTES];
	char host[256];
	auth_ctx *auth;
	int port;
	size_t i;

	*token = NULL;
	if (srv_parse_listen(cfg->listen, host, sizeof(host), &port) != 0 ||
	    !srv_host_is_loopback(host)) {
		snprintf(err, errlen,
		    "no JWT key is configured: set LOCKGATE_JWT_SECRET (or "
		    "public keys / a JWKS URL), or listen on a loopback "
		    "address for the development mode");
		return NULL;
	}
	if (len < 2 * sizeof(raw) + 1 ||
	    getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		snprintf(err, errlen,
		    "development mode: no randomness for a "
		    "secret");
		return NULL;
	}
	for (i = 0; i < sizeof(raw); i++)
		snprintf(secret + 2 * i, 3, "%02x", raw[i]);
	util_wipe(raw, sizeof(raw));
	cfg->auth.jwt_secret = secret;
	cfg->dev_mode = true;
	if ((auth = auth_new(&cfg->auth, err, errlen)) == NULL)
		return NULL;
	*token = auth_mint_hs256(secret, strlen(secret), "dev",
	    SRV_DEV_TOKEN_TTL, true);
	if (*token == NULL) {
		snprintf(err, errlen, "development mode: cannot mint a token");
		auth_free(auth);
		return NULL;
	}
	return auth;
}

int
srv_dev_secret_path(const char *store, int port, char *out, size_t len)
{
	const char *dir = getenv("XDG_RUNTIME_DIR");
	int n;

	if (dir == NULL || dir[0] != '/') {
		if (store == NULL || strncmp(store, "file://", 7) != 0 ||
		    store[7] == '\0')
			return -1;
		dir = store + 7;
	}
	n = snprintf(out, len, "%s/.lockgate-dev-%d.secret", dir, port);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int
srv_dev_secret_save(const char *path, const char *secret, char *err,
    size_t errlen)
{
	char tmp[PATH_MAX];
	size_t n = strlen(secret);
	int fd;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path,
	        (long)getpid()) >= sizeof(tmp)) {
		snprintf(err, errlen, "the path %s is too long", path);
		return -1;
	}
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", tmp,
		    strerror(errno));
		return -1;
	}
	if (write(fd, secret, n) != (ssize_t)n || close(fd) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", tmp,
		    strerror(errno));
		(void)unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path,
		    strerror(errno));
		(void)unlink(tmp);
		return -1;
	}
	return 0;
}

void
srv_dev_banner(const srv_config *cfg, const char *self, const char *token,
    int port, const char *secret_path)
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
	    "The dashboard is at %s/ (paste the token).\n",
	    token, url, url);
	if (secret_path != NULL)
		fprintf(stderr,
		    "A fresh token, while this runs: %s token --dev "
		    "--port %d\n(the secret is in %s until exit).\n\n",
		    self, port, secret_path);
	else
		fprintf(stderr,
		    "No secret file (mem:// store, no XDG_RUNTIME_DIR): "
		    "`lockgate token --dev` cannot\nmint tokens for this "
		    "run; keep the one above.\n\n");
}

/* The port of "host:port" S, or -1. */
static int
port_of(const char *s)
{
	char host[256];
	int port;

	if (s == NULL || srv_parse_listen(s, host, sizeof(host), &port) != 0)
		return -1;
	return port;
}

/* A port number 1..65535 in S, or -1. */
static int
parse_port(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < 1 || v > 65535)
		return -1;
	return (int)v;
}

static int
dev_usage(FILE *f, int rc)
{
	fprintf(f,
	    "usage: lockgate token --dev [--port N | --listen HOST:PORT] "
	    "[--store URL]\n"
	    "           [--sub NAME] [--ttl 1h] [--claim key=value]... "
	    "[--iss ISS] [--aud AUD]\n"
	    "Prints a fresh admin token of the development-mode lockgate "
	    "running on\nPORT (default: the port of LOCKGATE_LISTEN, else "
	    "$PORT, else " SRV_XSTR(
	        SRV_PORT_DEFAULT) ") with\nstore URL "
	                          "(default: LOCKGATE_STORE, "
	                          "else " SRV_STORE_DEFAULT "), read\n"
	                          "from the secret file it "
	                          "keeps while it runs.  --sub defaults to "
	                          "\"dev\".\n");
	return rc;
}

/* What `lockgate token --dev` was asked for. */
typedef struct dev_args {
	const char *store;
	int port;
	bool sub;    /* --sub given: no default one */
	char **args; /* for auth_token_main: room for argc + 6 */
	int n;
} dev_args;

/* ARGV's options into D: --port, --listen and --store are --dev's, the
 * others go on to auth_token_main.  -1 to go on, else the exit status
 * (said). */
static int
dev_args_parse(dev_args *d, int argc, char **argv)
{
	int i;

	d->args[d->n++] = argv[0];
	for (i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(o, "--dev") == 0)
			continue;
		if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0)
			return dev_usage(stdout, 0);
		if (strcmp(o, "--secret-file") == 0) {
			fprintf(stderr,
			    "lockgate token: --dev reads the dev "
			    "server's secret: no --secret-file\n");
			return dev_usage(stderr, 2);
		}
		if (strcmp(o, "--port") == 0 || strcmp(o, "--listen") == 0 ||
		    strcmp(o, "--store") == 0) {
			if (v == NULL) {
				fprintf(stderr,
				    "lockgate token: %s needs a value\n", o);
				return dev_usage(stderr, 2);
			}
			i++;
			if (strcmp(o, "--store") == 0)
				d->store = v;
			else if (strcmp(o, "--listen") == 0)
				d->port = port_of(v);
			else
				d->port = parse_port(v);
			continue;
		}
		if (strcmp(o, "--sub") == 0)
			d->sub = true;
		d->args[d->n++] = argv[i];
	}
	return -1;
}

/* The secret file of the dev server D names into PATH (PATHLEN bytes).
 * -1 when there is one, else the exit status (said). */
static int
dev_secret_file(dev_args *d, char *path, size_t pathlen)
{
	struct stat st;

	if (d->port < 1) {
		fprintf(stderr,
		    "lockgate token: --dev needs the port the dev "
		    "server listens on (--port N)\n");
		return 2;
	}
	if (d->store == NULL || *d->store == '\0')
		d->store = SRV_STORE_DEFAULT;
	if (srv_dev_secret_path(d->store, d->port, path, pathlen) != 0) {
		fprintf(stderr,
		    "lockgate token: a dev server on store %s keeps no "
		    "secret file (set XDG_RUNTIME_DIR, or use a file:// "
		    "store)\n",
		    d->store);
		return 2;
	}
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr,
		    "lockgate token: no development-mode lockgate is "
		    "running on port %d with this store (no file %s); "
		    "start one with `make run`, or give the --port and "
		    "--store it was started with\n",
		    d->port, path);
		return 1;
	}
	return -1;
}

int
srv_dev_token_main(int argc, char **argv)
{
	dev_args d = { .store = getenv("LOCKGATE_STORE") };
	char path[PATH_MAX];
	const char *p;
	int rc;

	/* The port the server would have chosen from the environment. */
	if ((p = getenv("LOCKGATE_LISTEN")) != NULL && *p != '\0')
		d.port = port_of(p);
	else if ((p = getenv("PORT")) != NULL && *p != '\0')
		d.port = parse_port(p);
	else
		d.port = SRV_PORT_DEFAULT;
	if ((d.args = calloc((size_t)argc + 6, sizeof(*d.args))) == NULL)
		return 1;
	if ((rc = dev_args_parse(&d, argc, argv)) < 0 &&
	    (rc = dev_secret_file(&d, path, sizeof(path))) < 0) {
		d.args[d.n++] = "--secret-file";
		d.args[d.n++] = path;
		d.args[d.n++] = "--admin";
		if (!d.sub) {
			d.args[d.n++] = "--sub";
			d.args[d.n++] = "dev";
		}
		rc = auth_token_main(d.n, d.args);
	}
	free(d.args);
	return rc;
}
