/*
 * test_auth_policy.c: globs, policy parsing and validation, and
 * auth_allowed with and without a policy, including a reload while
 * other threads verify and ask.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth_testutil.h"

#define SECRET "an-hs256-secret-of-forty-bytes-or-so-123"
#define HDR_HS "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"

static void
test_glob_matches_segments(void **state)
{
	(void)state;
	assert_true(auth_glob_match("prod/*", "prod/deploy"));
	assert_false(auth_glob_match("prod/*", "prod/eu/deploy"));
	assert_false(auth_glob_match("prod/*", "prod"));
	assert_true(auth_glob_match("prod/*", "prod/"));
	assert_true(auth_glob_match("prod/**", "prod/eu/deploy"));
	assert_false(auth_glob_match("prod/**", "production/x"));
	assert_false(auth_glob_match("prod/**", "staging/prod/x"));
	assert_true(auth_glob_match("**", "a/b/c"));
	assert_true(auth_glob_match("**", ""));
	assert_true(auth_glob_match("*", ""));
	assert_false(auth_glob_match("*", "a/b"));
	assert_true(auth_glob_match("db-?", "db-1"));
	assert_false(auth_glob_match("db-?", "db-12"));
	assert_false(auth_glob_match("db-?", "db-/"));
	assert_true(auth_glob_match("*-lock", "deploy-lock"));
	assert_true(auth_glob_match("a*b*c", "aXbYbZc"));
	assert_false(auth_glob_match("a*b*c", "aXbYbZ"));
	assert_true(auth_glob_match("**/main", "refs/heads/main"));
	assert_true(auth_glob_match("refs/heads/*", "refs/heads/main"));
	assert_false(auth_glob_match("refs/heads/*", "refs/heads/feat/x"));
	assert_false(auth_glob_match("exact", "exact2"));
	assert_false(auth_glob_match("exact", "exac"));
	/* Many stars are no worse than a few: no backtracking. */
	assert_false(auth_glob_match("**a**a**a**a**a**a**a**a**a**a**b",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

static void
expect_bad(const char *json, const char *needle)
{
	char err[256] = "";
	auth_policy *p =
	    auth_policy_parse(json, strlen(json), err, sizeof(err));

	if (p != NULL || strstr(err, needle) == NULL)
		fprintf(stderr, "policy %s: err \"%s\", want \"%s\"\n", json,
		    err, needle);
	assert_null(p);
	assert_non_null(strstr(err, needle));
}

static void
test_policy_validation(void **state)
{
	(void)state;
	expect_bad("{", "line");
	expect_bad("{\"rule\":[]}", "unknown field \"rule\"");
	expect_bad("{\"rules\":{}}", "array");
	expect_bad("{\"rules\":[{\"locks\":[\"a\"],\"actions\":[\"write\"]}]}",
	    "actions[0]");
	expect_bad("{\"rules\":[{\"locks\":[],\"actions\":[\"read\"]}]}",
	    "locks must be");
	expect_bad("{\"rules\":[{\"actions\":[\"read\"]}]}", "locks must be");
	expect_bad("{\"rules\":[{\"locks\":[\"a\"]}]}", "actions must be");
	expect_bad("{\"rules\":[{\"name\":\"ci\",\"locks\":[\"a\"],"
	           "\"actions\":[\"read\"],\"macth\":{}}]}",
	    "policy ci: unknown field");
	expect_bad("{\"rules\":[{\"locks\":[\"a\"],\"actions\":[\"read\"],"
	           "\"match\":{\"sub\":{}}}]}",
	    "match.sub");
	expect_bad("{\"rules\":[{\"locks\":[\"a\"],\"actions\":[\"read\"],"
	           "\"match\":{\"sub\":[]}}]}",
	    "match.sub");
	expect_bad("{\"rules\":[{\"locks\":[\"a\"],\"actions\":[\"read\"],"
	           "\"match\":{\"sub\":\"\"}}]}",
	    "match.sub");
	expect_bad("{\"rules\":[{\"locks\":[\"a\"],\"actions\":[\"read\"],"
	           "\"match\":{\"sub\":\"x\",\"sub\":\"y\"}}]}",
	    "line");
	expect_bad("{\"rules\":[], \"rules\":[]}", "line");
	expect_bad("{\"rules\":[7]}", "rule 1 is not an object");
}

static const char policy_json[] =
    "{\"rules\": ["
    " {\"name\": \"acme main deploys prod\","
    "  \"match\": {\"repository_owner\": \"acme\","
    "             \"ref\": [\"refs/heads/main\", \"refs/tags/v*\"]},"
    "  \"locks\": [\"prod/**\"], \"actions\": [\"acquire\"]},"
    " {\"name\": \"acme reads all\", \"match\": {\"repository_owner\": "
    "\"acme\"},"
    "  \"locks\": [\"**\"], \"actions\": [\"read\"]},"
    " {\"name\": \"ops\", \"match\": {\"sub\": \"ops-*\", \"admin\": true},"
    "  \"locks\": [\"**\"], \"actions\": [\"admin\"]},"
    " {\"name\": \"run 42\", \"match\": {\"run_id\": 42},"
    "  \"locks\": [\"runs/*\"], \"actions\": [\"acquire\"]}"
    "]}";

static auth_ctx *
ctx_with_policy(const char *policy)
{
	char err[256] = "";
	char *path = authtest_file("policy.json", policy);
	auth_config c;
	auth_ctx *a;

	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	c.policy_file = path;
	c.leeway = -1;
	a = auth_new(&c, err, sizeof(err));
	if (a == NULL)
		fprintf(stderr, "auth_new: %s\n", err);
	free(path);
	return a;
}

/* An identity verified from a token with claims EXTRA. */
static void
identity(auth_ctx *a, const char *sub, const char *extra, auth_identity *id)
{
	char *p = authtest_payload(sub, 600, 0, extra);
	char *b = authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET);
	auth_refusal why;

	assert_int_equal(auth_verify(a, b, id, &why), 0);
	free(p);
	free(b);
}

static int
allowed(auth_ctx *a, const auth_identity *id, auth_action act, const char *name,
    char *why)
{
	why[0] = '\0';
	return auth_allowed(a, id, act, name, why, 200);
}

static void
test_no_policy(void **state)
{
	auth_ctx *a = ctx_with_policy("{\"rules\":[]}");
	char err[256], why[200];
	auth_config c;
	auth_identity id, adm;

	(void)state;
	auth_free(a);
	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	a = auth_new(&c, err, sizeof(err));
	assert_non_null(a);
	identity(a, "alice", "", &id);
	identity(a, "root", ",\"admin\":true", &adm);
	assert_true(allowed(a, &id, AUTH_READ, "any/lock", why));
	assert_true(allowed(a, &id, AUTH_ACQUIRE, "any/lock", why));
	assert_true(allowed(a, &id, AUTH_READ, NULL, why));
	assert_false(allowed(a, &id, AUTH_ADMIN, "any/lock", why));
	assert_non_null(strstr(why, "admin"));
	assert_true(allowed(a, &adm, AUTH_ADMIN, "any/lock", why));
	auth_identity_clear(&id);
	auth_identity_clear(&adm);
	auth_free(a);
}

static void
test_policy_decisions(void **state)
{
	auth_ctx *a = ctx_with_policy(policy_json);
	auth_identity main_, branch, other, ops, opsnot, run;
	char why[200];

	(void)state;
	assert_non_null(a);
	identity(a, "repo:acme/app:ref:refs/heads/main",
	    ",\"repository_owner\":\"acme\",\"ref\":\"refs/heads/main\"",
	    &main_);
	identity(a, "repo:acme/app:ref:refs/heads/feat",
	    ",\"repository_owner\":\"acme\",\"ref\":\"refs/heads/feat\"",
	    &branch);
	identity(a, "repo:evil/app",
	    ",\"repository_owner\":\"evil\","
	    "\"ref\":\"refs/heads/main\",\"admin\":true",
	    &other);
	identity(a, "ops-carol", ",\"admin\":true", &ops);
	identity(a, "ops-dave", "", &opsnot);
	identity(a, "x", ",\"run_id\":\"42\"", &run);

	/* Allowed. */
	assert_true(allowed(a, &main_, AUTH_ACQUIRE, "prod/deploy", why));
	assert_true(allowed(a, &main_, AUTH_ACQUIRE, "prod/eu/db", why));
	assert_true(allowed(a, &main_, AUTH_READ, "prod/deploy", why));
	assert_true(allowed(a, &branch, AUTH_READ, "prod/deploy", why));
	assert_true(allowed(a, &branch, AUTH_READ, NULL, why));
	/* Refused, with a sentence naming what was missing. */
	assert_false(allowed(a, &branch, AUTH_ACQUIRE, "prod/deploy", why));
	assert_non_null(strstr(why, "acquire"));
	assert_non_null(strstr(why, "prod/deploy"));
	assert_non_null(strstr(why, "repo:acme/app:ref:refs/heads/feat"));
	/* It names the glob that decided: the policy knows this caller. */
	assert_non_null(strstr(why, "\"prod/**\""));
	assert_false(allowed(a, &main_, AUTH_ACQUIRE, "production", why));
	assert_false(allowed(a, &main_, AUTH_ACQUIRE, "staging/prod/x", why));
	/* Another org, even claiming admin, gets nothing, and is not told
	 * which glob reserves the name. */
	assert_false(allowed(a, &other, AUTH_ACQUIRE, "prod/deploy", why));
	assert_non_null(strstr(why, "prod/deploy"));
	assert_null(strstr(why, "prod/**"));
	assert_false(allowed(a, &other, AUTH_READ, "prod/deploy", why));
	assert_false(allowed(a, &other, AUTH_READ, NULL, why));
	assert_false(allowed(a, &other, AUTH_ADMIN, "prod/deploy", why));
	/* Admin only for the ops rule, and acquire/read implied by it. */
	assert_false(allowed(a, &main_, AUTH_ADMIN, "prod/deploy", why));
	assert_non_null(strstr(why, "force-release"));
	assert_true(allowed(a, &ops, AUTH_ADMIN, "prod/deploy", why));
	assert_true(allowed(a, &ops, AUTH_ACQUIRE, "anything", why));
	assert_false(allowed(a, &opsnot, AUTH_ADMIN, "prod/deploy", why));
	assert_false(allowed(a, &opsnot, AUTH_READ, "prod/deploy", why));
	/* A numeric matcher matches the string a CI system sends. */
	assert_true(allowed(a, &run, AUTH_ACQUIRE, "runs/a", why));
	assert_false(allowed(a, &run, AUTH_ACQUIRE, "runs/a/b", why));
	/* An identity without claims (built by hand) matches no matcher. */
	{
		auth_identity bare;

		memset(&bare, 0, sizeof(bare));
		snprintf(bare.owner, sizeof(bare.owner), "ops-x");
		bare.admin = true;
		assert_false(allowed(a, &bare, AUTH_ADMIN, "x", why));
	}
	auth_identity_clear(&main_);
	auth_identity_clear(&branch);
	auth_identity_clear(&other);
	auth_identity_clear(&ops);
	auth_identity_clear(&opsnot);
	auth_identity_clear(&run);
	auth_free(a);
}

/* The most specific lock glob decides, per action, whoever its rules are
 * for: "main takes prod/" next to "acme takes everything" keeps prod/ for
 * main (issue 26: a feature branch took prod/deploy). */
static void
test_most_specific_decides(void **state)
{
	static const char pol[] =
	    "{\"rules\": ["
	    " {\"name\": \"main\", \"match\": {\"ref\": \"main\"},"
	    "  \"locks\": [\"prod/**\"], \"actions\": [\"acquire\"]},"
	    " {\"name\": \"acme\", \"match\": {\"org\": \"acme\"},"
	    "  \"locks\": [\"**\"], \"actions\": [\"acquire\"]},"
	    " {\"name\": \"dba\", \"match\": {\"team\": \"dba\"},"
	    "  \"locks\": [\"prod/db\"], \"actions\": [\"acquire\"]},"
	    " {\"name\": \"eu\", \"match\": {\"team\": \"eu\"},"
	    "  \"locks\": [\"*/eu/**\"], \"actions\": [\"acquire\"]},"
	    " {\"name\": \"rel\", \"match\": {\"team\": \"rel\"},"
	    "  \"locks\": [\"prod/**\", \"prod/web-?\"],"
	    "  \"actions\": [\"acquire\"]},"
	    " {\"name\": \"ops\", \"match\": {\"team\": \"ops\"},"
	    "  \"locks\": [\"**\"], \"actions\": [\"admin\"]}"
	    "]}";
	auth_ctx *a = ctx_with_policy(pol);
	auth_identity main_, feat, dba, eu, rel, ops;
	char why[200];

	(void)state;
	assert_non_null(a);
	identity(a, "main", ",\"org\":\"acme\",\"ref\":\"main\"", &main_);
	identity(a, "feat", ",\"org\":\"acme\",\"ref\":\"feat\"", &feat);
	identity(a, "dba", ",\"team\":\"dba\"", &dba);
	identity(a, "eu", ",\"team\":\"eu\"", &eu);
	identity(a, "rel", ",\"team\":\"rel\"", &rel);
	identity(a, "ops", ",\"team\":\"ops\"", &ops);

	/* prod/ belongs to main; the rest to all of acme. */
	assert_true(allowed(a, &main_, AUTH_ACQUIRE, "prod/deploy", why));
	assert_false(allowed(a, &feat, AUTH_ACQUIRE, "prod/deploy", why));
	assert_non_null(strstr(why, "\"prod/**\" decide"));
	assert_false(allowed(a, &feat, AUTH_ACQUIRE, "prod/eu/x", why));
	assert_true(allowed(a, &feat, AUTH_ACQUIRE, "staging/deploy", why));
	assert_true(allowed(a, &main_, AUTH_ACQUIRE, "staging/deploy", why));
	/* "prod" itself is not under prod/: the broad rule decides. */
	assert_true(allowed(a, &feat, AUTH_ACQUIRE, "prod", why));
	/* Acquire implies read, but only where the acquire rule decides. */
	assert_true(allowed(a, &main_, AUTH_READ, "prod/deploy", why));
	assert_false(allowed(a, &feat, AUTH_READ, "prod/deploy", why));
	assert_true(allowed(a, &feat, AUTH_READ, NULL, why));
	/* An exact name beats every glob: prod/db is the dba's alone. */
	assert_true(allowed(a, &dba, AUTH_ACQUIRE, "prod/db", why));
	assert_false(allowed(a, &main_, AUTH_ACQUIRE, "prod/db", why));
	assert_false(allowed(a, &dba, AUTH_ACQUIRE, "prod/dbx", why));
	/* Two rules with one glob decide together. */
	assert_true(allowed(a, &rel, AUTH_ACQUIRE, "prod/deploy", why));
	assert_true(allowed(a, &main_, AUTH_ACQUIRE, "prod/a/b", why));
	/* More literal bytes win: prod/web-1 is rel's alone. */
	assert_true(allowed(a, &rel, AUTH_ACQUIRE, "prod/web-1", why));
	assert_false(allowed(a, &main_, AUTH_ACQUIRE, "prod/web-1", why));
	/* A longer literal start wins over more literal bytes after a
	 * wildcard: prod/eu/x is main's (prod/...), not eu's (.../eu/...). */
	assert_false(allowed(a, &eu, AUTH_ACQUIRE, "prod/eu/x", why));
	/* Outside prod/, .../eu/... is more specific than everything. */
	assert_true(allowed(a, &eu, AUTH_ACQUIRE, "staging/eu/x", why));
	assert_false(allowed(a, &feat, AUTH_ACQUIRE, "staging/eu/x", why));
	/* Each action has its own table: admin on everything stays admin on
	 * prod/, and implies acquire and read there. */
	assert_true(allowed(a, &ops, AUTH_ADMIN, "prod/deploy", why));
	assert_true(allowed(a, &ops, AUTH_ACQUIRE, "prod/db", why));
	assert_true(allowed(a, &ops, AUTH_READ, "prod/eu/x", why));
	assert_false(allowed(a, &main_, AUTH_ADMIN, "prod/deploy", why));
	auth_identity_clear(&main_);
	auth_identity_clear(&feat);
	auth_identity_clear(&dba);
	auth_identity_clear(&eu);
	auth_identity_clear(&rel);
	auth_identity_clear(&ops);
	auth_free(a);
}

/* A narrower rule takes its names away from broader rules of the same
 * action, whoever those are for (documented in docs/identity.md). */
static void
test_narrower_rule_narrows(void **state)
{
	static const char pol[] =
	    "{\"rules\": ["
	    " {\"match\": {\"sub\": \"ops\"},"
	    "  \"locks\": [\"**\"], \"actions\": [\"read\"]},"
	    " {\"match\": {\"sub\": \"auditor\"},"
	    "  \"locks\": [\"audit/**\"], \"actions\": [\"read\"]},"
	    " {\"match\": {\"sub\": \"ops\"},"
	    "  \"locks\": [\"audit/**\"], \"actions\": [\"acquire\"]}"
	    "]}";
	auth_ctx *a = ctx_with_policy(pol);
	auth_identity ops, aud;
	char why[200];

	(void)state;
	assert_non_null(a);
	identity(a, "ops", "", &ops);
	identity(a, "auditor", "", &aud);
	assert_true(allowed(a, &aud, AUTH_READ, "audit/2026", why));
	assert_false(allowed(a, &aud, AUTH_READ, "prod/x", why));
	assert_true(allowed(a, &ops, AUTH_READ, "prod/x", why));
	/* ops reads audit/ only through its acquire rule there. */
	assert_true(allowed(a, &ops, AUTH_READ, "audit/2026", why));
	auth_identity_clear(&ops);
	auth_identity_clear(&aud);
	auth_free(a);
	a = ctx_with_policy("{\"rules\": ["
	                    " {\"match\": {\"sub\": \"ops\"},"
	                    "  \"locks\": [\"**\"], \"actions\": [\"read\"]},"
	                    " {\"match\": {\"sub\": \"auditor\"},"
	                    "  \"locks\": [\"audit/**\"],"
	                    "  \"actions\": [\"read\"]}]}");
	assert_non_null(a);
	identity(a, "ops", "", &ops);
	assert_false(allowed(a, &ops, AUTH_READ, "audit/2026", why));
	assert_non_null(strstr(why, "audit/**"));
	auth_identity_clear(&ops);
	auth_free(a);
	/* One segment is narrower than any depth. */
	a = ctx_with_policy(
	    "{\"rules\": ["
	    " {\"match\": {\"sub\": \"deep\"},"
	    "  \"locks\": [\"p/**\"], \"actions\": [\"read\"]},"
	    " {\"match\": {\"sub\": \"flat\"},"
	    "  \"locks\": [\"p/*\"], \"actions\": [\"read\"]}]}");
	assert_non_null(a);
	identity(a, "deep", "", &ops);
	identity(a, "flat", "", &aud);
	assert_false(allowed(a, &ops, AUTH_READ, "p/x", why));
	assert_true(allowed(a, &aud, AUTH_READ, "p/x", why));
	assert_true(allowed(a, &ops, AUTH_READ, "p/x/y", why));
	assert_false(allowed(a, &aud, AUTH_READ, "p/x/y", why));
	auth_identity_clear(&ops);
	auth_identity_clear(&aud);
	auth_free(a);
}

/* Whether a token with claims EXTRA (and sub "u") may take ACT on NAME. */
static int
allowed_with(auth_ctx *a, const char *extra, auth_action act, const char *name)
{
	auth_identity id;
	char why[200];
	int ok;

	identity(a, "u", extra, &id);
	ok = allowed(a, &id, act, name, why);
	auth_identity_clear(&id);
	return ok;
}

/* A claim matches with its JSON type (issue 20: "admin": true in a rule
 * matched the string "true", which force-released a lock). */
static void
test_claims_typed(void **state)
{
	static const char pol[] =
	    "{\"rules\": ["
	    " {\"match\": {\"admin\": true}, \"locks\": [\"**\"],"
	    "  \"actions\": [\"admin\"]},"
	    " {\"match\": {\"verified\": false}, \"locks\": [\"unv/*\"],"
	    "  \"actions\": [\"read\"]},"
	    " {\"match\": {\"run_id\": 42}, \"locks\": [\"runs/*\"],"
	    "  \"actions\": [\"acquire\"]},"
	    " {\"match\": {\"protected\": \"true\"}, \"locks\": [\"gl/*\"],"
	    "  \"actions\": [\"acquire\"]},"
	    " {\"match\": {\"project\": [\"4*\", 7]}, \"locks\": [\"p/*\"],"
	    "  \"actions\": [\"read\"]}"
	    "]}";
	auth_ctx *a = ctx_with_policy(pol);

	(void)state;
	assert_non_null(a);
	assert_true(allowed_with(a, ",\"admin\":true", AUTH_ADMIN, "x"));
	assert_false(allowed_with(a, ",\"admin\":\"true\"", AUTH_ADMIN, "x"));
	assert_false(allowed_with(a, ",\"admin\":1", AUTH_ADMIN, "x"));
	assert_false(allowed_with(a, ",\"admin\":[true]", AUTH_ADMIN, "x"));
	assert_true(allowed_with(a, ",\"verified\":false", AUTH_READ, "unv/a"));
	assert_false(
	    allowed_with(a, ",\"verified\":\"false\"", AUTH_READ, "unv/a"));
	assert_false(allowed_with(a, ",\"verified\":null", AUTH_READ, "unv/a"));
	assert_false(allowed_with(a, ",\"verified\":0", AUTH_READ, "unv/a"));
	assert_false(allowed_with(a, "", AUTH_READ, "unv/a"));
	/* A number also matches its decimal text, as CI systems send it. */
	assert_true(allowed_with(a, ",\"run_id\":42", AUTH_ACQUIRE, "runs/a"));
	assert_true(
	    allowed_with(a, ",\"run_id\":\"42\"", AUTH_ACQUIRE, "runs/a"));
	assert_false(
	    allowed_with(a, ",\"run_id\":\"042\"", AUTH_ACQUIRE, "runs/a"));
	assert_false(
	    allowed_with(a, ",\"run_id\":42.0", AUTH_ACQUIRE, "runs/a"));
	/* A string matches strings only. */
	assert_true(
	    allowed_with(a, ",\"protected\":\"true\"", AUTH_ACQUIRE, "gl/a"));
	assert_false(
	    allowed_with(a, ",\"protected\":true", AUTH_ACQUIRE, "gl/a"));
	assert_true(allowed_with(a, ",\"project\":\"42\"", AUTH_READ, "p/a"));
	assert_false(allowed_with(a, ",\"project\":42", AUTH_READ, "p/a"));
	assert_true(allowed_with(a, ",\"project\":7", AUTH_READ, "p/a"));
	assert_true(allowed_with(a, ",\"project\":\"7\"", AUTH_READ, "p/a"));
	auth_free(a);
	expect_bad("{\"rules\":[{\"locks\":[\"a\"],\"actions\":[\"read\"],"
	           "\"match\":{\"n\":4.5}}]}",
	    "match.n");
	expect_bad("{\"rules\":[{\"locks\":[\"a\"],\"actions\":[\"read\"],"
	           "\"match\":{\"n\":[\"a\",null]}}]}",
	    "match.n");
}

static void
test_bad_policy_file(void **state)
{
	char err[256] = "";
	auth_config c;
	char *path = authtest_file("broken.json", "{\"rules\":[{}]}");

	(void)state;
	memset(&c, 0, sizeof(c));
	c.jwt_secret = SECRET;
	c.policy_file = path;
	assert_null(auth_new(&c, err, sizeof(err)));
	assert_non_null(strstr(err, "broken.json"));
	assert_non_null(strstr(err, "rule 1"));
	c.policy_file = "/nonexistent/policy.json";
	assert_null(auth_new(&c, err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent/policy.json"));
	free(path);
}

#define RELOAD_THREADS 2
#define RELOAD_ROUNDS  200

typedef struct worker {
	auth_ctx *a;
	int answers; /* decisions that were one of the two policies' */
	int wrong;
} worker;

static void *
work(void *arg)
{
	worker *w = arg;
	char *p = authtest_payload("alice", 600, 0, ",\"team\":\"blue\"");
	char *b = authtest_bearer(HDR_HS, p, JWT_ALG_HS256, SECRET);
	int i;

	for (i = 0; i < RELOAD_ROUNDS; i++) {
		auth_identity id;
		auth_refusal why;
		char msg[200];

		if (auth_verify(w->a, b, &id, &why) != 0) {
			w->wrong++;
			continue;
		}
		/* Both policies let team blue read "x". */
		if (auth_allowed(w->a, &id, AUTH_READ, "x", msg, sizeof(msg)))
			w->answers++;
		else
			w->wrong++;
		auth_identity_clear(&id);
	}
	free(p);
	free(b);
	return NULL;
}

static void
test_reload_under_load(void **state)
{
	static const char p1[] = "{\"rules\":[{\"match\":{\"team\":\"blue\"},"
	                         "\"locks\":[\"x\"],\"actions\":[\"read\"]}]}";
	static const char p2[] =
	    "{\"rules\":[{\"match\":{\"team\":\"b*\"},"
	    "\"locks\":[\"*\"],\"actions\":[\"acquire\"]}]}";
	auth_ctx *a = ctx_with_policy(p1);
	pthread_t t[RELOAD_THREADS];
	worker w[RELOAD_THREADS];
	char err[256];
	auth_identity id;
	int i;

	(void)state;
	assert_non_null(a);
	for (i = 0; i < RELOAD_THREADS; i++) {
		w[i].a = a;
		w[i].answers = w[i].wrong = 0;
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (i = 0; i < RELOAD_ROUNDS / 4; i++) {
		free(authtest_file("policy.json", i % 2 ? p1 : p2));
		assert_int_equal(auth_reload(a, err, sizeof(err)), 0);
	}
	for (i = 0; i < RELOAD_THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].wrong, 0);
		assert_int_equal(w[i].answers, RELOAD_ROUNDS);
	}
	/* The last reload (i = 49: p1) decides now: read yes, acquire no. */
	identity(a, "alice", ",\"team\":\"blue\"", &id);
	{
		char why[200];

		assert_true(allowed(a, &id, AUTH_READ, "x", why));
		assert_false(allowed(a, &id, AUTH_ACQUIRE, "x", why));
		/* A broken policy on reload: refused, the old one stays. */
		free(authtest_file("policy.json",
		    "{\"rules\":[{\"locks\":1}]}"));
		assert_int_equal(auth_reload(a, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "locks"));
		assert_true(allowed(a, &id, AUTH_READ, "x", why));
	}
	auth_identity_clear(&id);
	auth_free(a);
}

static int
teardown(void **state)
{
	(void)state;
	authtest_cleanup();
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_glob_matches_segments),
		cmocka_unit_test(test_policy_validation),
		cmocka_unit_test(test_no_policy),
		cmocka_unit_test(test_policy_decisions),
		cmocka_unit_test(test_most_specific_decides),
		cmocka_unit_test(test_narrower_rule_narrows),
		cmocka_unit_test(test_claims_typed),
		cmocka_unit_test(test_bad_policy_file),
		cmocka_unit_test(test_reload_under_load),
	};

	return cmocka_run_group_tests(tests, NULL, teardown);
}
