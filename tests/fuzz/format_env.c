/*
 * format_env.c: format=env answers (server/format_env.c) over any JSON
 * value.  What must hold, for every input, checked by reading the output
 * back the way a POSIX shell does (a cheap in-process re-parse): every
 * line is KEY='...' with KEY = LOCKGATE_[A-Z0-9_]* of at most
 * SRV_ENV_KEY_MAX bytes and single-quoted parts joined by \' only, or the
 * closing "false" of an error; and for a lock answer every top-level
 * string member comes back byte for byte (NULs dropped) under its key,
 * but for one whose key a holders array may write too.
 *
 * With LOCKGATE_FUZZ_DASH set (tests/fuzz/run.sh sets it when it replays
 * the corpus), the output is also eval'ed by dash with set -a and the
 * exported values compared with the re-parse: the quoting as the shell
 * itself reads it, for a sample of inputs.
 */
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "server/format_env.h"

#include "fuzz.h"

#define VARS_MAX 4096

typedef struct var {
	char key[SRV_ENV_KEY_MAX + 1];
	char *val;
	size_t len;
} var;

static var vars[VARS_MAX];
static size_t nvars;

static void
vars_clear(void)
{
	while (nvars > 0)
		free(vars[--nvars].val);
}

/* The last value assigned to KEY, or NULL. */
static var *
var_get(const char *key)
{
	size_t i = nvars;

	while (i-- > 0)
		if (strcmp(vars[i].key, key) == 0)
			return &vars[i];
	return NULL;
}

/* Read OUT back; abort on anything a shell would read otherwise. */
static void
reparse(const char *out)
{
	const char *p = out, *q;
	size_t k;
	var *v;

	while (*p != '\0') {
		if (strcmp(p, SRV_ENV_ERROR_END) == 0)
			return;
		FUZZ_CHECK(
		    strncmp(p, SRV_ENV_PREFIX, strlen(SRV_ENV_PREFIX)) == 0);
		FUZZ_CHECK(nvars < VARS_MAX);
		v = &vars[nvars++];
		v->val = malloc(strlen(p) + 1);
		v->len = 0;
		FUZZ_CHECK(v->val != NULL);
		for (k = 0; p[k] != '='; k++) {
			FUZZ_CHECK((p[k] >= 'A' && p[k] <= 'Z') ||
			    (p[k] >= '0' && p[k] <= '9') || p[k] == '_');
			FUZZ_CHECK(k < SRV_ENV_KEY_MAX);
			v->key[k] = p[k];
		}
		v->key[k] = '\0';
		p += k + 1;
		for (;;) {
			FUZZ_CHECK(*p == '\'');
			q = strchr(p + 1, '\'');
			FUZZ_CHECK(q != NULL);
			memcpy(v->val + v->len, p + 1, (size_t)(q - p - 1));
			v->len += (size_t)(q - p - 1);
			p = q + 1;
			if (strncmp(p, "\\'", 2) != 0)
				break;
			v->val[v->len++] = '\'';
			p += 2;
		}
		v->val[v->len] = '\0';
		FUZZ_CHECK(*p == '\n');
		p++;
	}
}

/* Whether member NAME's key (upper-cased, other bytes '_') is also
 * another member's: then the later one wins, as in the shell. */
static int
key_shared(const json_t *answer, const char *name)
{
	const char *other;
	json_t *m;
	size_t i;
	int n = 0;

	json_object_foreach((json_t *)answer, other, m)
	{
		if (strlen(other) != strlen(name))
			continue;
		for (i = 0; name[i] != '\0'; i++) {
			unsigned char c = (unsigned char)other[i];
			if (c >= 'A' && c <= 'Z')
				c = (unsigned char)(c - 'A' + 'a');
			else if (!((c >= 'a' && c <= 'z') ||
			             (c >= '0' && c <= '9')))
				c = '_';
			if (c != (unsigned char)name[i])
				break;
		}
		n += name[i] == '\0';
	}
	return n > 1;
}

/* Whether member NAME's key is one a holders array of ANSWER is written
 * under (LOCKGATE_HOLDERS, LOCKGATE_HOLDER_<digits>_...): then whichever
 * comes later wins, as in the shell. */
static int
key_of_holders(const json_t *answer, const char *name)
{
	size_t d;

	if (!json_is_array(json_object_get(answer, "holders")))
		return 0;
	if (strcmp(name, "holders") == 0)
		return 1;
	if (strncmp(name, "holder_", 7) != 0)
		return 0;
	d = strspn(name + 7, "0123456789");
	return d > 0 && name[7 + d] == '_';
}

/* A lock answer's string members come back under their keys. */
static void
members_back(const json_t *answer)
{
	char key[SRV_ENV_KEY_MAX + 1], want[4096];
	const char *name, *s;
	json_t *m;
	size_t i, n, w;
	var *v;

	if (!json_is_object(answer) || json_object_get(answer, "error") ||
	    json_is_array(json_object_get(answer, "locks")))
		return;
	json_object_foreach((json_t *)answer, name, m)
	{
		n = strlen(name);
		if (!json_is_string(m) || n == 0 || n > 64 ||
		    strcmp(name, "name") == 0 || strcmp(name, "lock") == 0 ||
		    strcmp(name, "state") == 0 ||
		    strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") !=
		        n ||
		    key_shared(answer, name) || key_of_holders(answer, name))
			continue;
		snprintf(key, sizeof(key), SRV_ENV_PREFIX "%s", name);
		for (i = strlen(SRV_ENV_PREFIX); key[i]; i++)
			if (key[i] >= 'a' && key[i] <= 'z')
				key[i] = (char)(key[i] - 'a' + 'A');
		s = json_string_value(m);
		if (json_string_length(m) >= sizeof(want))
			continue;
		for (i = w = 0; i < json_string_length(m); i++)
			if (s[i] != '\0')
				want[w++] = s[i];
		v = var_get(key);
		FUZZ_CHECK(v != NULL);
		FUZZ_CHECK(v->len == w && memcmp(v->val, want, w) == 0);
	}
}

/* eval OUT in dash with set -a; compare what it exports. */
static void
dash_check(const char *out)
{
	char path[] = "/tmp/lockgate-fuzz-env-XXXXXX", *buf = NULL, *e;
	char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
	int fd, pfd[2], st;
	size_t len = 0, cap = 0, i;
	ssize_t r;
	pid_t pid;
	var *v;

	fd = mkstemp(path);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, out, strlen(out)) == (ssize_t)strlen(out));
	close(fd);
	FUZZ_CHECK(pipe(pfd) == 0);
	pid = fork();
	FUZZ_CHECK(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		execle("/bin/dash", "dash", "-c",
		    "set -a; eval \"$(cat \"$1\")\"; env -0", "dash", path,
		    (char *)NULL, envp);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? 2 * cap : 65536;
			buf = realloc(buf, cap);
			FUZZ_CHECK(buf != NULL);
		}
		r = read(pfd[0], buf + len, cap - len - 1);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	close(pfd[0]);
	FUZZ_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0);
	unlink(path);
	/* every variable the re-parse saw, with its last value */
	for (i = 0; i < nvars; i++) {
		size_t kl = strlen(vars[i].key);
		int found = 0;

		v = var_get(vars[i].key);
		for (e = buf; e < buf + len; e += strlen(e) + 1) {
			if (strncmp(e, v->key, kl) == 0 && e[kl] == '=') {
				/* dash keeps up to the first NUL: none here */
				FUZZ_CHECK(strcmp(e + kl + 1, v->val) == 0);
				found = 1;
			}
		}
		FUZZ_CHECK(found);
	}
	free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size,
	    JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	char *out;

	out = srv_env_format(j);
	FUZZ_CHECK(out != NULL);
	reparse(out);
	members_back(j);
	if (getenv("LOCKGATE_FUZZ_DASH") != NULL)
		dash_check(out);
	vars_clear();
	free(out);
	json_decref(j);
	return 0;
}
