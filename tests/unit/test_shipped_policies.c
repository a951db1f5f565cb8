/*
 * test_shipped_policies.c: every policy the docs and docker/ ship says
 * what its prose says.  Each `{"rules"` in README.md, docs/ *.md and
 * docker/ * is read as JSON where it stands (a ```json block, a heredoc, an
 * inline example), loaded with auth_policy_parse, and asked who can and
 * cannot do what.  A policy found here without cases below fails, and so
 * does a case list whose policy is gone: a new example needs its cases.
 * Run from the repository's top directory, as tests/run.sh does.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/auth_int.h"

#define SCAN_FILES_MAX 64
#define FILE_MAX       (1024 * 1024)

/* Identities, as the claims their tokens carry. */
#define GH_MAIN \
	"{\"sub\":\"repo:acme/app:ref:refs/heads/main\"," \
	"\"repository\":\"acme/app\",\"repository_owner\":\"acme\"," \
	"\"ref\":\"refs/heads/main\",\"event_name\":\"push\"}"
#define GH_MAIN_BY_HAND \
	"{\"sub\":\"repo:acme/app:ref:refs/heads/main\"," \
	"\"repository\":\"acme/app\",\"repository_owner\":\"acme\"," \
	"\"ref\":\"refs/heads/main\",\"event_name\":\"workflow_dispatch\"}"
#define GH_FEAT \
	"{\"sub\":\"repo:acme/app:ref:refs/heads/feat\"," \
	"\"repository\":\"acme/app\",\"repository_owner\":\"acme\"," \
	"\"ref\":\"refs/heads/feat\",\"event_name\":\"push\"}"
/* A pull_request_target workflow a fork's pull request started: the base
 * repository's claims and main's ref, running code main did not review;
 * an issue_comment workflow is the same with another event. */
#define GH_PR_TARGET \
	"{\"sub\":\"repo:acme/app:pull_request\"," \
	"\"repository\":\"acme/app\",\"repository_owner\":\"acme\"," \
	"\"ref\":\"refs/heads/main\",\"event_name\":\"pull_request_target\"}"
#define GH_COMMENT \
	"{\"sub\":\"repo:acme/app:ref:refs/heads/main\"," \
	"\"repository\":\"acme/app\",\"repository_owner\":\"acme\"," \
	"\"ref\":\"refs/heads/main\",\"event_name\":\"issue_comment\"}"
#define GH_EVIL_MAIN \
	"{\"sub\":\"repo:evil/app:ref:refs/heads/main\"," \
	"\"repository\":\"evil/app\",\"repository_owner\":\"evil\"," \
	"\"ref\":\"refs/heads/main\"}"
#define OPS_ADMIN  "{\"sub\":\"ops-anna\",\"admin\":true}"
#define SRE_ADMIN  "{\"sub\":\"sre-bob\",\"admin\":true}"
#define OPS_PLAIN  "{\"sub\":\"ops-anna\"}"
#define OPS_STRING "{\"sub\":\"ops-anna\",\"admin\":\"true\"}"
#define DEV_ADMIN  "{\"sub\":\"dev-eve\",\"admin\":true}"
#define ANY_TOKEN  "{\"sub\":\"whoever\"}"

typedef struct policy_case {
	const char *claims; /* JSON text */
	auth_action action;
	const char *lock;
	bool allowed;
} policy_case;

/* What the identity.md example and deploy.md's policy (the same rules)
 * say: only acme's main branch, pushed to or run by hand, takes prod/ (not
 * a pull_request_target or issue_comment workflow, whose ref is main's); all of acme takes and reads
 * the rest and reads prod/; on-call admins force-release anything; other
 * organisations get nothing. */
static const policy_case acme_cases[] = {
	{ GH_MAIN, AUTH_ACQUIRE, "prod/deploy", true },
	{ GH_MAIN, AUTH_ACQUIRE, "prod/eu/db", true },
	{ GH_MAIN, AUTH_ACQUIRE, "staging/web", true },
	{ GH_MAIN, AUTH_ADMIN, "prod/deploy", false },
	{ GH_MAIN_BY_HAND, AUTH_ACQUIRE, "prod/deploy", true },
	{ GH_PR_TARGET, AUTH_ACQUIRE, "prod/deploy", false },
	{ GH_PR_TARGET, AUTH_READ, "prod/deploy", true },
	{ GH_PR_TARGET, AUTH_ACQUIRE, "staging/web", true },
	{ GH_COMMENT, AUTH_ACQUIRE, "prod/eu/db", false },
	{ GH_FEAT, AUTH_ACQUIRE, "prod/deploy", false },
	{ GH_FEAT, AUTH_ACQUIRE, "prod/eu/db", false },
	{ GH_FEAT, AUTH_READ, "prod/deploy", true },
	{ GH_FEAT, AUTH_ACQUIRE, "staging/web", true },
	{ GH_FEAT, AUTH_ACQUIRE, "production", true },
	{ GH_FEAT, AUTH_READ, NULL, true },
	{ GH_FEAT, AUTH_ADMIN, "staging/web", false },
	{ GH_EVIL_MAIN, AUTH_READ, NULL, false },
	{ GH_EVIL_MAIN, AUTH_READ, "staging/web", false },
	{ GH_EVIL_MAIN, AUTH_ACQUIRE, "prod/deploy", false },
	{ OPS_ADMIN, AUTH_ADMIN, "prod/deploy", true },
	{ OPS_ADMIN, AUTH_ACQUIRE, "prod/deploy", true },
	{ OPS_ADMIN, AUTH_READ, "staging/web", true },
	{ SRE_ADMIN, AUTH_ADMIN, "staging/web", true },
	{ OPS_PLAIN, AUTH_ADMIN, "prod/deploy", false },
	{ OPS_PLAIN, AUTH_READ, "prod/deploy", false },
	{ OPS_STRING, AUTH_ADMIN, "prod/deploy", false },
	{ DEV_ADMIN, AUTH_ADMIN, "prod/deploy", false },
	{ NULL, AUTH_READ, NULL, false },
};

/* identity.md's "let every token of your own private issuer in". */
static const policy_case anyone_cases[] = {
	{ ANY_TOKEN, AUTH_ACQUIRE, "prod/deploy", true },
	{ ANY_TOKEN, AUTH_READ, NULL, true },
	{ ANY_TOKEN, AUTH_ADMIN, "prod/deploy", false },
	{ NULL, AUTH_READ, NULL, false },
};

typedef struct shipped {
	const char *file;
	int nth; /* the Nth policy in FILE, from 1 */
	const policy_case *cases;
} shipped;

static const shipped expected[] = {
	{ "docs/identity.md", 1, anyone_cases },
	{ "docs/identity.md", 2, acme_cases },
	{ "docs/deploy.md", 1, acme_cases },
};
#define NEXPECTED (sizeof(expected) / sizeof(expected[0]))

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (f == NULL)
		return NULL;
	buf = malloc(FILE_MAX + 1);
	assert_non_null(buf);
	n = fread(buf, 1, FILE_MAX, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* The files that may ship a policy: README.md, docs/ *.md, docker/ *. */
static size_t
scan_list(char paths[][256])
{
	static const struct {
		const char *dir, *suffix;
	} dirs[] = { { "docs", ".md" }, { "docker", "" } };
	size_t n = 0, i;

	snprintf(paths[n++], 256, "README.md");
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		DIR *d = opendir(dirs[i].dir);
		struct dirent *e;

		assert_non_null(d); /* run from the repository's top */
		while ((e = readdir(d)) != NULL) {
			size_t len = strlen(e->d_name),
			       sl = strlen(dirs[i].suffix);

			if (e->d_name[0] == '.' || len < sl ||
			    strcmp(e->d_name + len - sl, dirs[i].suffix) != 0)
				continue;
			assert_true(n < SCAN_FILES_MAX);
			snprintf(paths[n++], 256, "%s/%s", dirs[i].dir,
			    e->d_name);
		}
		closedir(d);
	}
	return n;
}

static const policy_case *
cases_for(const char *file, int nth)
{
	size_t i;

	for (i = 0; i < NEXPECTED; i++)
		if (strcmp(expected[i].file, file) == 0 &&
		    expected[i].nth == nth)
			return expected[i].cases;
	return NULL;
}

static void
check_case(const auth_policy *p, const char *where, const policy_case *c)
{
	static const char *const words[] = { "read", "acquire", "admin" };
	json_error_t jerr;
	json_t *claims = json_loads(c->claims, 0, &jerr);
	char why[300] = "";
	int got;

	assert_non_null(claims);
	got = auth_policy_allows(p, claims, "them", c->action, c->lock, why,
	    sizeof(why));
	if (got != (int)c->allowed)
		fprintf(stderr, "%s: %s %s %s: got %s, want %s (%s)\n", where,
		    c->claims, words[c->action], c->lock ? c->lock : "(any)",
		    got ? "allowed" : "refused",
		    c->allowed ? "allowed" : "refused", why);
	assert_int_equal(got, (int)c->allowed);
	json_decref(claims);
}

/* Checks every policy in TEXT (from FILE); returns how many it found. */
static int
check_file(const char *file, const char *text)
{
	const char *at = text;
	int nth = 0;

	while ((at = strstr(at, "{\"rules\"")) != NULL) {
		char where[300], err[256] = "";
		json_error_t jerr;
		json_t *doc;
		auth_policy *p;
		const policy_case *c;

		nth++;
		snprintf(where, sizeof(where), "%s policy %d", file, nth);
		doc = json_loadb(at, strlen(at), JSON_DISABLE_EOF_CHECK, &jerr);
		if (doc == NULL)
			fprintf(stderr, "%s is not JSON: %s\n", where,
			    jerr.text);
		assert_non_null(doc);
		json_decref(doc);
		p = auth_policy_parse(at, (size_t)jerr.position, err,
		    sizeof(err));
		if (p == NULL)
			fprintf(stderr, "%s: %s\n", where, err);
		assert_non_null(p);
		c = cases_for(file, nth);
		if (c == NULL)
			fprintf(stderr,
			    "%s has no cases in "
			    "tests/unit/test_shipped_policies.c\n",
			    where);
		assert_non_null(c);
		for (; c->claims != NULL; c++)
			check_case(p, where, c);
		auth_policy_free(p);
		at += jerr.position;
	}
	return nth;
}

static void
test_every_shipped_policy(void **state)
{
	char paths[SCAN_FILES_MAX][256];
	size_t n = scan_list(paths), i, k;
	int found[NEXPECTED] = { 0 };

	(void)state;
	for (i = 0; i < n; i++) {
		char *text = slurp(paths[i]);
		int count;

		assert_non_null(text);
		count = check_file(paths[i], text);
		for (k = 0; k < NEXPECTED; k++)
			if (strcmp(expected[k].file, paths[i]) == 0)
				found[k] = expected[k].nth <= count;
		free(text);
	}
	for (k = 0; k < NEXPECTED; k++) {
		if (!found[k])
			fprintf(stderr, "%s has no policy %d any more\n",
			    expected[k].file, expected[k].nth);
		assert_true(found[k]);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_shipped_policy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
