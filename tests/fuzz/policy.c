/*
 * policy.c: policy files (server/auth_policy.c).  Input: a policy as
 * JSON text, checked by auth_policy_parse and, when it parses, asked
 * about a few identities, actions and lock names (auth_policy_allows);
 * or, when the first byte is NUL, "GLOB NUL NAME" for auth_glob_match,
 * compared with a plain backtracking matcher written from the documented
 * rules ('*' any run without '/', '**' any run, '?' one byte but '/').
 */
#include <jansson.h>

#include "server/auth_int.h"

#include "fuzz.h"

#define REF_MAX 64 /* the reference backtracks: keep it small */

static signed char memo[REF_MAX + 1][REF_MAX + 1];

static int
ref_match(const char *g0, const char *s0, size_t gi, size_t si)
{
	const char *g = g0 + gi, *s = s0 + si;
	size_t k;
	int r = 0;

	if (memo[gi][si] >= 0)
		return memo[gi][si];
	if (*g == '\0') {
		r = *s == '\0';
	} else if (g[0] == '*' && g[1] == '*') {
		for (k = 0; !r && k <= strlen(s); k++)
			r = ref_match(g0, s0, gi + 2, si + k);
	} else if (*g == '*') {
		for (k = 0; !r; k++) {
			r = ref_match(g0, s0, gi + 1, si + k);
			if (s[k] == '\0' || s[k] == '/')
				break;
		}
	} else if (*s != '\0' && (*g == '?' ? *s != '/' : *g == *s)) {
		r = ref_match(g0, s0, gi + 1, si + 1);
	}
	memo[gi][si] = (signed char)r;
	return r;
}

static void
glob_case(fuzz_in *in)
{
	const uint8_t *g, *s;
	size_t gl = fuzz_field(in, 0, &g), sl = fuzz_field(in, 0, &s);
	char *gs = fuzz_str(g, gl), *ss = fuzz_str(s, sl);
	bool got = auth_glob_match(gs, ss);

	if (strlen(gs) <= REF_MAX && strlen(ss) <= REF_MAX) {
		memset(memo, -1, sizeof(memo));
		FUZZ_CHECK(got == (bool)ref_match(gs, ss, 0, 0));
	}
	free(gs);
	free(ss);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "prod/deploy", "staging/db", "a",
		"prod/x/y/z", NULL };
	static const char *const ids[] = {
		"{\"sub\":\"ops-ann\",\"admin\":true}",
		"{\"sub\":\"repo:acme/app:ref:refs/heads/main\","
		"\"repository_owner\":\"acme\",\"ref\":\"refs/heads/main\","
		"\"run_id\":\"42\",\"ref_protected\":\"true\"}",
		"{\"sub\":\"x\",\"groups\":[\"a\",\"b\"],\"n\":7,\"f\":false}",
	};
	fuzz_in in = { data, size };
	char err[256], why[256];
	auth_policy *p;
	size_t i, j;
	int a, r;

	if (size > 0 && data[0] == 0) {
		fuzz_u8(&in);
		glob_case(&in);
		return 0;
	}
	err[0] = '\0';
	p = auth_policy_parse((const char *)data, size, err, sizeof(err));
	if (p == NULL) {
		FUZZ_CHECK(err[0] != '\0');
		return 0;
	}
	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		json_t *claims = json_loads(ids[i], 0, NULL);
		const char *owner =
		    json_string_value(json_object_get(claims, "sub"));

		FUZZ_CHECK(claims != NULL);
		for (a = AUTH_READ; a <= AUTH_ADMIN; a++) {
			for (j = 0; j < sizeof(names) / sizeof(names[0]); j++) {
				why[0] = '\0';
				r = auth_policy_allows(p, claims, owner,
				    (auth_action)a, names[j], why, sizeof(why));
				FUZZ_CHECK(r == 0 || r == 1);
				FUZZ_CHECK(r == 1 || why[0] != '\0');
			}
		}
		json_decref(claims);
	}
	auth_policy_free(p);
	return 0;
}
