/*
 * auth_policy.c: which identities may do what to which locks.
 *
 *   {"rules": [
 *     {"name": "acme main deploys",
 *      "match": {"repository_owner": "acme", "ref": "refs/heads/main"},
 *      "locks": ["deploy", "prod-*"],
 *      "actions": ["acquire"]}
 *   ]}
 *
 * A rule applies when every matcher matches the token's claim of that name
 * (a value, or an array of values of which one must match), each compared
 * with its JSON type (match_value).  Globs: "*" any run of bytes but "/",
 * two stars any run at all, "?" one byte but "/".
 *
 * How rules combine: one routing table per action.  A rule is an entry
 * under each of its lock globs in the table of each action it lists.  For
 * a name, the most specific globs of that action's table that match it
 * decide (rank_cmp), whoever their rules are for; broader globs do not
 * count for that name.  So "main may acquire prod/ and below" next to
 * "acme may acquire everything" keeps prod/ for main, as a route for
 * 10.1.0.0/16 wins over the default route, and as the most specific path
 * does in Vault's and Consul's ACLs.
 * The caller gets the action when a deciding rule applies to it, or when
 * it gets a stronger one: "admin" implies "acquire", which implies
 * "read".  What nothing grants is refused.  The file is validated whole:
 * unknown fields are errors, so a typo cannot silently open or close a
 * door.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/auth_int.h"

#define MATCHERS_MAX     16 /* claim matchers in a rule */
#define MATCH_VALUES_MAX 32 /* values in one matcher */
#define LOCK_GLOBS_MAX   64 /* lock globs in a rule */
#define RULE_NAME_MAX    128
#define ACTIONS          (AUTH_ADMIN + 1)

/* A value a claim may have, with its JSON type: a string is a glob that
 * matches string claims only; an integer matches that integer, or its
 * decimal text as a string (GitHub and GitLab send numbers as strings);
 * true and false match only that JSON boolean, never "true". */
typedef struct match_value {
	json_type type; /* JSON_STRING, JSON_INTEGER, JSON_TRUE, JSON_FALSE */
	char *text;     /* the glob, or the integer in decimal; NULL for a
			   boolean */
} match_value;

typedef struct matcher {
	char *claim;
	size_t n;
	match_value values[MATCH_VALUES_MAX];
} matcher;

/* How narrowly a glob names locks (rank_cmp compares two). */
typedef struct glob_rank {
	unsigned prefix;   /* literal bytes before the first wildcard */
	unsigned literals; /* literal bytes in all */
	unsigned dstars;   /* "**" */
	unsigned stars;    /* "*" alone */
} glob_rank;

typedef struct lock_glob {
	char *glob;
	glob_rank rank;
} lock_glob;

typedef struct rule {
	char name[RULE_NAME_MAX + 1];
	size_t nmatch;
	matcher match[MATCHERS_MAX];
	size_t nlocks;
	lock_glob locks[LOCK_GLOBS_MAX];
	unsigned actions; /* bit per auth_action it lists, as listed: the
			     tables it is in (implications come after) */
} rule;

/* One action's table as far as one name goes: the most specific glob
 * that matches the name, and whether a rule listing it applies. */
typedef struct verdict {
	const lock_glob *by; /* NULL: no glob of the table matches */
	bool granted;
} verdict;

struct auth_policy {
	size_t n;
	rule *rules;
};

bool
auth_glob_match(const char *glob, const char *s)
{
	bool a[AUTH_CLAIM_MAX + 1], b[AUTH_CLAIM_MAX + 1];
	bool *dp = a, *nd = b, *t;
	size_t n = strlen(s), j;
	const char *g = glob;

	if (n > AUTH_CLAIM_MAX)
		return false;
	/* dp[j]: the glob so far matches s[0..j).  O(glob * s), no
	 * backtracking, whatever the stars. */
	memset(dp, 0, (n + 1) * sizeof(bool));
	dp[0] = true;
	while (*g != '\0') {
		if (g[0] == '*' && g[1] == '*') {
			nd[0] = dp[0];
			for (j = 1; j <= n; j++)
				nd[j] = dp[j] || nd[j - 1];
			g += 2;
		} else if (*g == '*') {
			nd[0] = dp[0];
			for (j = 1; j <= n; j++)
				nd[j] = dp[j] || (nd[j - 1] && s[j - 1] != '/');
			g++;
		} else {
			nd[0] = false;
			for (j = 1; j <= n; j++)
				nd[j] = dp[j - 1] &&
				    (*g == '?' ? s[j - 1] != '/'
				               : s[j - 1] == *g);
			g++;
		}
		t = dp;
		dp = nd;
		nd = t;
	}
	return dp[n];
}

static glob_rank
rank_of(const char *g)
{
	glob_rank r = { 0, 0, 0, 0 };
	bool start = true; /* no wildcard yet */

	while (*g != '\0') {
		if (g[0] == '*' && g[1] == '*') {
			r.dstars++;
			start = false;
			g += 2;
			continue;
		}
		if (*g == '*' || *g == '?') {
			r.stars += *g == '*';
			start = false;
		} else {
			r.literals++;
			r.prefix += start;
		}
		g++;
	}
	return r;
}

/*
 * >0 when A names locks more narrowly than B, <0 when less, 0 when as
 * narrowly: the longer literal start wins (the longest prefix of a
 * routing table), then more literal bytes, then fewer "**", then fewer
 * "*".  Among globs that match one name, the name itself spelled exactly
 * ranks first.
 */
static int
rank_cmp(const glob_rank *a, const glob_rank *b)
{
	if (a->prefix != b->prefix)
		return a->prefix > b->prefix ? 1 : -1;
	if (a->literals != b->literals)
		return a->literals > b->literals ? 1 : -1;
	if (a->dstars != b->dstars)
		return a->dstars < b->dstars ? 1 : -1;
	if (a->stars != b->stars)
		return a->stars < b->stars ? 1 : -1;
	return 0;
}

static void
rule_clear(rule *r)
{
	size_t i, k;

	for (i = 0; i < r->nmatch; i++) {
		free(r->match[i].claim);
		for (k = 0; k < r->match[i].n; k++)
			free(r->match[i].values[k].text);
	}
	for (i = 0; i < r->nlocks; i++)
		free(r->locks[i].glob);
}

void
auth_policy_free(auth_policy *p)
{
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->n; i++)
		rule_clear(&p->rules[i]);
	free(p->rules);
	free(p);
}

size_t
auth_policy_rules(const auth_policy *p)
{
	return p->n;
}

/* OUT from the policy's V: a non-empty string, an integer or a boolean.
 * 0, or -1 for any other value (or no memory). */
static int
value_of(const json_t *v, match_value *out)
{
	char buf[AUTH_GLOB_MAX + 1];

	out->type = json_typeof(v);
	if (json_is_boolean(v))
		return 0;
	if ((!json_is_string(v) && !json_is_integer(v)) ||
	    auth_claim_string(v, buf, sizeof(buf)) != 0 || buf[0] == '\0')
		return -1;
	out->text = strdup(buf);
	return out->text != NULL ? 0 : -1;
}

/* Rule JR's name into R (default "rule IDX+1"), and no field but name,
 * match, locks, actions.  0, or -1 with ERR. */
static int
rule_name(const json_t *jr, rule *r, size_t idx, char *err, size_t errlen)
{
	const char *key;
	const json_t *v;

	snprintf(r->name, sizeof(r->name), "rule %zu", idx + 1);
	if (!json_is_object(jr)) {
		snprintf(err, errlen, "policy rule %zu is not an object",
		    idx + 1);
		return -1;
	}
	v = json_object_get(jr, "name");
	if (v != NULL) {
		if (!json_is_string(v) ||
		    json_string_length(v) > RULE_NAME_MAX) {
			snprintf(err, errlen,
			    "policy %s: name must be a string "
			    "of at most %d bytes",
			    r->name, RULE_NAME_MAX);
			return -1;
		}
		snprintf(r->name, sizeof(r->name), "%s", json_string_value(v));
	}
	json_object_foreach((json_t *)jr, key, v)
	{
		if (strcmp(key, "name") != 0 && strcmp(key, "match") != 0 &&
		    strcmp(key, "locks") != 0 && strcmp(key, "actions") != 0) {
			snprintf(err, errlen,
			    "policy %s: unknown field \"%.40s\" "
			    "(name, match, locks, actions)",
			    r->name, key);
			return -1;
		}
	}
	return 0;
}

/* One matcher of R: claim KEY against value or values E.  0, or -1 with
 * ERR. */
static int
rule_matcher(rule *r, const char *key, const json_t *e, char *err,
    size_t errlen)
{
	matcher *m;
	size_t i;

	if (r->nmatch >= MATCHERS_MAX) {
		snprintf(err, errlen, "policy %s: over %d matchers", r->name,
		    MATCHERS_MAX);
		return -1;
	}
	m = &r->match[r->nmatch++];
	m->claim = strdup(key);
	if (m->claim == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (json_is_array(e)) {
		if (json_array_size(e) == 0 ||
		    json_array_size(e) > MATCH_VALUES_MAX) {
			snprintf(err, errlen,
			    "policy %s: match.%.40s "
			    "needs 1..%d values",
			    r->name, key, MATCH_VALUES_MAX);
			return -1;
		}
		for (i = 0; i < json_array_size(e); i++) {
			if (value_of(json_array_get(e, i), &m->values[m->n]) !=
			    0)
				goto badval;
			m->n++;
		}
		return 0;
	}
	if (value_of(e, &m->values[0]) != 0)
		goto badval;
	m->n = 1;
	return 0;
badval:
	snprintf(err, errlen,
	    "policy %s: match.%.40s must be a "
	    "non-empty string (glob), an integer, true, false or an "
	    "array of them",
	    r->name, key);
	return -1;
}

/* Rule R's lock globs, from V.  0, or -1 with ERR. */
static int
rule_locks(const json_t *v, rule *r, char *err, size_t errlen)
{
	const json_t *e;
	size_t i;

	if (!json_is_array(v) || json_array_size(v) == 0 ||
	    json_array_size(v) > LOCK_GLOBS_MAX) {
		snprintf(err, errlen,
		    "policy %s: locks must be an array of 1..%d "
		    "lock-name globs (\"**\" for all)",
		    r->name, LOCK_GLOBS_MAX);
		return -1;
	}
	for (i = 0; i < json_array_size(v); i++) {
		e = json_array_get(v, i);
		if (!json_is_string(e) || json_string_length(e) == 0 ||
		    json_string_length(e) > AUTH_GLOB_MAX) {
			snprintf(err, errlen,
			    "policy %s: locks[%zu] is not a "
			    "glob string",
			    r->name, i);
			return -1;
		}
		r->locks[r->nlocks].glob = strdup(json_string_value(e));
		if (r->locks[r->nlocks].glob == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		r->locks[r->nlocks].rank = rank_of(json_string_value(e));
		r->nlocks++;
	}
	return 0;
}

/* Rule R's actions, from V.  0, or -1 with ERR. */
static int
rule_actions(const json_t *v, rule *r, char *err, size_t errlen)
{
	size_t i;

	if (!json_is_array(v) || json_array_size(v) == 0) {
		snprintf(err, errlen,
		    "policy %s: actions must be a non-empty "
		    "array of \"read\", \"acquire\", \"admin\"",
		    r->name);
		return -1;
	}
	for (i = 0; i < json_array_size(v); i++) {
		const char *s = json_string_value(json_array_get(v, i));

		if (s != NULL && strcmp(s, "read") == 0) {
			r->actions |= 1u << AUTH_READ;
		} else if (s != NULL && strcmp(s, "acquire") == 0) {
			r->actions |= 1u << AUTH_ACQUIRE;
		} else if (s != NULL && strcmp(s, "admin") == 0) {
			r->actions |= 1u << AUTH_ADMIN;
		} else {
			snprintf(err, errlen,
			    "policy %s: actions[%zu] is not "
			    "\"read\", \"acquire\" or \"admin\"",
			    r->name, i);
			return -1;
		}
	}
	return 0;
}

/* Rule IDX of the policy, JR, into R: one step per key.  0, or -1 with
 * ERR. */
static int
parse_rule(const json_t *jr, rule *r, size_t idx, char *err, size_t errlen)
{
	const char *key;
	const json_t *v, *e;

	if (rule_name(jr, r, idx, err, errlen) != 0)
		return -1;
	v = json_object_get(jr, "match");
	if (v != NULL && !json_is_object(v)) {
		snprintf(err, errlen,
		    "policy %s: match must be an object of "
		    "claim: glob",
		    r->name);
		return -1;
	}
	json_object_foreach((json_t *)v, key, e)
	{
		if (rule_matcher(r, key, e, err, errlen) != 0)
			return -1;
	}
	if (rule_locks(json_object_get(jr, "locks"), r, err, errlen) != 0)
		return -1;
	return rule_actions(json_object_get(jr, "actions"), r, err, errlen);
}

auth_policy *
auth_policy_parse(const char *json, size_t len, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	const json_t *rules = json_object_get(doc, "rules");
	const char *key;
	json_t *v;
	auth_policy *p = NULL;
	size_t i;

	if (doc == NULL) {
		snprintf(err, errlen, "policy: line %d: %s", jerr.line,
		    jerr.text);
		return NULL;
	}
	json_object_foreach(doc, key, v)
	{
		if (strcmp(key, "rules") != 0) {
			snprintf(err, errlen,
			    "policy: unknown field \"%.40s\" "
			    "(only \"rules\")",
			    key);
			goto fail;
		}
	}
	if (!json_is_array(rules) ||
	    json_array_size(rules) > AUTH_POLICY_RULES_MAX) {
		snprintf(err, errlen,
		    "policy: \"rules\" must be an array of at "
		    "most %d rules",
		    AUTH_POLICY_RULES_MAX);
		goto fail;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL ||
	    (p->rules = calloc(json_array_size(rules) + 1, sizeof(rule))) ==
	        NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (i = 0; i < json_array_size(rules); i++) {
		p->n++;
		if (parse_rule(json_array_get(rules, i), &p->rules[i], i, err,
		        errlen) != 0)
			goto fail;
	}
	json_decref(doc);
	return p;
fail:
	auth_policy_free(p);
	json_decref(doc);
	return NULL;
}

auth_policy *
auth_policy_load(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n;
	auth_policy *p = NULL;
	char why[200];

	if (f == NULL) {
		snprintf(err, errlen,
		    "LOCKGATE_POLICY: cannot open the policy "
		    "%s: %s",
		    path, strerror(errno));
		return NULL;
	}
	buf = malloc(AUTH_POLICY_MAX + 1);
	if (buf == NULL)
		goto out;
	n = fread(buf, 1, AUTH_POLICY_MAX + 1, f);
	if (ferror(f) || n > AUTH_POLICY_MAX) {
		snprintf(err, errlen,
		    "the policy %s is unreadable or over %d "
		    "bytes",
		    path, AUTH_POLICY_MAX);
		goto out;
	}
	p = auth_policy_parse(buf, n, why, sizeof(why));
	if (p == NULL)
		snprintf(err, errlen, "%s: %s", path, why);
out:
	free(buf);
	fclose(f);
	return p;
}

/* Whether the claim C has the value V.  TEXT: C as text when C is a
 * string or an integer that fits, else NULL. */
static bool
value_matches(const match_value *v, const json_t *c, const char *text)
{
	switch (v->type) {
	case JSON_STRING:
		return json_is_string(c) && text != NULL &&
		    auth_glob_match(v->text, text);
	case JSON_INTEGER:
		return text != NULL && strcmp(v->text, text) == 0;
	case JSON_TRUE:
		return json_is_true(c);
	default:
		return json_is_false(c);
	}
}

/* Whether the claim C (NULL when absent) has one of M's values. */
static bool
matcher_matches(const matcher *m, const json_t *c)
{
	char buf[AUTH_CLAIM_MAX];
	const char *text = NULL;
	size_t k;

	if ((json_is_string(c) || json_is_integer(c)) &&
	    auth_claim_string(c, buf, sizeof(buf)) == 0)
		text = buf;
	for (k = 0; k < m->n; k++)
		if (value_matches(&m->values[k], c, text))
			return true;
	return false;
}

static bool
rule_applies(const rule *r, const json_t *claims)
{
	size_t i;

	for (i = 0; i < r->nmatch; i++)
		if (!matcher_matches(&r->match[i],
		        json_object_get(claims, r->match[i].claim)))
			return false;
	return true;
}

/* The most specific of R's globs that matches NAME, or NULL. */
static const lock_glob *
rule_glob_for(const rule *r, const char *name)
{
	const lock_glob *best = NULL;
	size_t k;

	for (k = 0; k < r->nlocks; k++)
		if (auth_glob_match(r->locks[k].glob, name) &&
		    (best == NULL ||
		        rank_cmp(&r->locks[k].rank, &best->rank) > 0))
			best = &r->locks[k];
	return best;
}

/* V[x], for every action x: which globs of x's table decide NAME, and
 * whether one of their rules applies to CLAIMS. */
static void
decide(const auth_policy *p, const json_t *claims, const char *name,
    verdict v[ACTIONS])
{
	size_t i;
	int x, c, applies;

	memset(v, 0, ACTIONS * sizeof(*v));
	for (i = 0; i < p->n; i++) {
		const rule *r = &p->rules[i];
		const lock_glob *g = rule_glob_for(r, name);

		applies = -1; /* not asked yet: claims are dearer than ranks */
		for (x = 0; g != NULL && x < ACTIONS; x++) {
			if (!(r->actions & (1u << x)))
				continue;
			c = v[x].by == NULL
			    ? 1
			    : rank_cmp(&g->rank, &v[x].by->rank);
			if (c < 0 || (c == 0 && v[x].granted))
				continue;
			if (applies < 0)
				applies = rule_applies(r, claims);
			v[x].by = g;
			v[x].granted = applies;
		}
	}
}

/* Whether some rule that lists ACTION or a stronger one applies to
 * CLAIMS: "on some lock", before a list is filtered name by name. */
static bool
grants_somewhere(const auth_policy *p, const json_t *claims, auth_action action)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if ((p->rules[i].actions >> action) != 0 &&
		    rule_applies(&p->rules[i], claims))
			return true;
	return false;
}

int
auth_policy_allows(const auth_policy *p, const json_t *claims,
    const char *owner, auth_action action, const char *name, char *why,
    size_t whylen)
{
	static const char *const words[] = { "read", "acquire",
		"force-release (admin)" };
	verdict v[ACTIONS];
	int x;

	if (name == NULL) {
		if (grants_somewhere(p, claims, action))
			return 1;
		snprintf(why, whylen,
		    "No policy rule lets \"%.100s\" %s any lock.", owner,
		    words[action]);
		return 0;
	}
	decide(p, claims, name, v);
	for (x = (int)action; x < ACTIONS; x++)
		if (v[x].granted)
			return 1;
	/* The deciding glob helps a caller the policy knows; to anyone
	 * else (an issuer signs for every repository that asks) it would
	 * map which names are reserved, one probe at a time. */
	if (v[action].by != NULL && grants_somewhere(p, claims, AUTH_READ))
		snprintf(why, whylen,
		    "No policy rule lets \"%.100s\" %s the lock \"%.100s\" "
		    "(the rules for \"%.60s\" decide it).",
		    owner, words[action], name, v[action].by->glob);
	else
		snprintf(why, whylen,
		    "No policy rule lets \"%.100s\" %s the lock \"%.100s\".",
		    owner, words[action], name);
	return 0;
}
