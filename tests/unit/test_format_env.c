/*
 * test_format_env.c: srv_env_format gives lines that dash evaluates back to
 * the very same bytes, whatever the values hold, and never runs anything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/format_env.h"

#define OUT_MAX (1024 * 1024)

static char tmpdir[64];

static int
setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/test_format_env.XXXXXX");
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
remove_dir(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Structure check independent of any shell: every line is
 * LOCKGATE_[A-Z0-9_]*='...' with ' only as '\'' inside.  Returns the number
 * of assignments, or -1. */
static int
count_assignments(const char *s)
{
	int n = 0;

	while (*s != '\0') {
		if (strncmp(s, "LOCKGATE_", 9) != 0)
			return -1;
		s += 9;
		while ((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		    *s == '_')
			s++;
		if (s[0] != '=' || s[1] != '\'')
			return -1;
		s += 2;
		for (;;) {
			const char *q = strchr(s, '\'');
			if (q == NULL)
				return -1;
			if (strncmp(q, "'\\''", 4) == 0) {
				s = q + 4;
				continue;
			}
			if (q[1] != '\n')
				return -1;
			s = q + 2;
			break;
		}
		n++;
	}
	return n;
}

/* Evaluate ENV with dash and print $VAR; the bytes land in OUT (malloc'd,
 * *outlen set).  Fails the test unless the eval's status is WANT_STATUS
 * (0 for an answer, 1 for an error, whose last line is `false`). */
static char *
dash_eval(const char *env, const char *var, int want_status, size_t *outlen)
{
	char path[128], cmd[512];
	FILE *f, *p;
	char *out;
	size_t n = 0, r;
	int st;

	snprintf(path, sizeof path, "%s/env", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(env, 1, strlen(env), f), strlen(env));
	assert_int_equal(fclose(f), 0);
	/* The way lockctl and users do it: eval "$(...)" under set -eu. */
	snprintf(cmd, sizeof cmd,
	    "cd '%s' && dash -euc 'st=0; eval \"$(cat env)\" || st=$?; "
	    "printf %%s \"$%s\"; exit $st'",
	    tmpdir, var);
	p = popen(cmd, "r");
	assert_non_null(p);
	out = malloc(OUT_MAX);
	assert_non_null(out);
	while ((r = fread(out + n, 1, OUT_MAX - n, p)) > 0)
		n += r;
	st = pclose(p);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), want_status);
	*outlen = n;
	return out;
}

static char *
dash_get(const char *env, const char *var, size_t *outlen)
{
	return dash_eval(env, var, 0, outlen);
}

static int
canary_exists(void)
{
	char path[128];
	struct stat sb;

	snprintf(path, sizeof path, "%s/pwned", tmpdir);
	return stat(path, &sb) == 0;
}

/* None holds a NUL (test_nul_byte_dropped covers that), so strlen works. */
static const char *const hostile[] = {
	"",
	"plain",
	"'",
	"''",
	"it's",
	"'\\''",
	"x'; touch pwned; echo '",
	"$(touch pwned)",
	"`touch pwned`",
	"${HOME}$HOME$$ $0 $1 $*",
	"\\",
	"\\'",
	"\"double\" \"quotes\"",
	"line1\nline2\n",
	"\n'\ntouch pwned\n'\n",
	"a\nLOCKGATE_LEASE_ID='stolen'\n",
	"\r\t\v\f tabs and returns",
	"-n",
	"-e \\n",
	"%s%n%d",
	"; touch pwned; #",
	"| touch pwned",
	"&& touch pwned",
	"unicode: h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x94\x92",
	"\xff\xfe raw bytes \x80",
	"\n\n\n",
	"'''''''''",
	"!history !! ^x^y",
	"*?[a-z] ~ ~root",
	"\x01\x02\x1b[31mred\x1b[0m",
};

static void
test_hostile_values_roundtrip(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
		json_t *lock = json_pack("{s:s, s:s, s:o, s:o}", "name", "ci/x",
		    "fencing_token", "7", "holder",
		    json_stringn_nocheck(hostile[i], strlen(hostile[i])),
		    "purpose",
		    json_stringn_nocheck(hostile[i], strlen(hostile[i])));
		char *env, *got;
		size_t n;

		assert_non_null(lock);
		env = srv_env_format(lock);
		assert_non_null(env);
		/* 4 members and LOCKGATE_STATE */
		assert_int_equal(count_assignments(env), 5);
		got = dash_get(env, "LOCKGATE_HOLDER", &n);
		assert_int_equal(n, strlen(hostile[i]));
		assert_memory_equal(got, hostile[i], n);
		free(got);
		got = dash_get(env, "LOCKGATE_PURPOSE", &n);
		assert_int_equal(n, strlen(hostile[i]));
		assert_memory_equal(got, hostile[i], n);
		free(got);
		/* A value never overrides another key. */
		got = dash_get(env, "LOCKGATE_FENCING_TOKEN", &n);
		assert_int_equal(n, 1);
		assert_memory_equal(got, "7", 1);
		free(got);
		free(env);
		json_decref(lock);
	}
	assert_false(canary_exists());
}

static void
test_big_value_roundtrip(void **state)
{
	size_t len = 200000, i, n;
	char *val = malloc(len), *env, *got;
	json_t *lock;

	(void)state;
	assert_non_null(val);
	for (i = 0; i < len; i++)
		val[i] = "'\n$`\\a"[i % 6];
	lock = json_object();
	json_object_set_new(lock, "holder", json_stringn(val, len));
	env = srv_env_format(lock);
	assert_non_null(env);
	assert_int_equal(count_assignments(env), 1);
	got = dash_get(env, "LOCKGATE_HOLDER", &n);
	assert_int_equal(n, len);
	assert_memory_equal(got, val, len);
	free(got);
	free(env);
	free(val);
	json_decref(lock);
}

static void
test_nul_byte_dropped(void **state)
{
	json_t *lock = json_object();
	char *env;

	(void)state;
	json_object_set_new(lock, "holder", json_stringn("a\0b'", 4));
	env = srv_env_format(lock);
	assert_string_equal(env, "LOCKGATE_HOLDER='ab'\\'''\n");
	free(env);
	json_decref(lock);
}

static void
test_lease_exact(void **state)
{
	const char *want =
	    "LOCKGATE_LOCK='prod/deploy'\n"
	    "LOCKGATE_OWNER='repo:o/r:ref:refs/heads/main'\n"
	    "LOCKGATE_HOLDER='https://github.com/o/r/actions/runs/1'\n"
	    "LOCKGATE_LABELS='{\"env\":\"it'\\''s\"}'\n"
	    "LOCKGATE_FENCING_TOKEN='1700000000000001'\n"
	    "LOCKGATE_EXPIRES_AT='2026-11-22T03:00:00.000Z'\n"
	    "LOCKGATE_TTL='300'\n"
	    "LOCKGATE_EXPECTED_DURATION=''\n"
	    "LOCKGATE_OVERDUE='false'\n"
	    "LOCKGATE_LEASE_ID='0123456789abcdef'\n"
	    "LOCKGATE_REFRESH_INTERVAL='37'\n"
	    "LOCKGATE_RATIO='0.5'\n"
	    "LOCKGATE_STATE='held'\n";
	json_t *lease;
	char *env;

	(void)state;
	lease = json_pack("{s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:i, s:n, s:b,"
	                  " s:s, s:i, s:f}",
	    "name", "prod/deploy", "owner", "repo:o/r:ref:refs/heads/main",
	    "holder", "https://github.com/o/r/actions/runs/1", "labels", "env",
	    "it's", "fencing_token", "1700000000000001", "expires_at",
	    "2026-11-22T03:00:00.000Z", "ttl", 300, "expected_duration",
	    "overdue", 0, "lease_id", "0123456789abcdef", "refresh_interval",
	    37, "ratio", 0.5);
	assert_non_null(lease);
	env = srv_env_format(lease);
	assert_non_null(env);
	assert_string_equal(env, want);
	free(env);
	json_decref(lease);
}

static void
test_expired_state(void **state)
{
	json_t *lock = json_pack("{s:s, s:s, s:b}", "name", "a",
	    "fencing_token", "3", "expired", 1);
	char *env;

	(void)state;
	env = srv_env_format(lock);
	assert_non_null(strstr(env, "LOCKGATE_STATE='expired'\n"));
	assert_null(strstr(env, "'held'"));
	free(env);
	json_decref(lock);
}

static void
test_error_locked(void **state)
{
	const char *want =
	    "LOCKGATE_ERROR='locked'\n"
	    "LOCKGATE_ERROR_MESSAGE='held by '\\''bob'\\''; retry later'\n"
	    "LOCKGATE_ERROR_RETRY_AFTER='3'\n"
	    "LOCKGATE_LOCK='db'\n"
	    "LOCKGATE_HOLDER='bob $(x)'\n"
	    "LOCKGATE_HOLDER_FENCING_TOKEN='9'\n"
	    "LOCKGATE_STATE='held'\n"
	    "false\n";
	json_t *e = json_pack("{s:{s:s, s:s, s:i, s:{s:s, s:s, s:s}}}", "error",
	    "code", "locked", "message", "held by 'bob'; retry later",
	    "retry_after", 3, "lock", "name", "db", "holder", "bob $(x)",
	    "fencing_token", "9");
	char *env;
	char *got;
	size_t n;

	(void)state;
	env = srv_env_format(e);
	assert_non_null(env);
	assert_string_equal(env, want);
	/* eval fails (under set -e the script stops), and sets no token a
	 * script could take for its own. */
	got = dash_eval(env, "LOCKGATE_ERROR_MESSAGE", 1, &n);
	assert_int_equal(n, strlen("held by 'bob'; retry later"));
	assert_memory_equal(got, "held by 'bob'; retry later", n);
	free(got);
	got = dash_eval(env, "{LOCKGATE_FENCING_TOKEN:-}", 1, &n);
	assert_int_equal(n, 0);
	free(got);
	free(env);
	json_decref(e);
}

/* The server's own "state" member wins: one LOCKGATE_STATE line only. */
static void
test_state_member_not_doubled(void **state)
{
	json_t *lock = json_pack("{s:s, s:s, s:s}", "name", "a",
	    "fencing_token", "3", "state", "expired");
	json_t *e = json_pack("{s:{s:s, s:s, s:O}}", "error", "code", "locked",
	    "message", "m", "lock", lock);
	char *env;

	(void)state;
	env = srv_env_format(lock);
	assert_string_equal(env,
	    "LOCKGATE_LOCK='a'\n"
	    "LOCKGATE_FENCING_TOKEN='3'\n"
	    "LOCKGATE_STATE='expired'\n");
	free(env);
	env = srv_env_format(e);
	assert_string_equal(env,
	    "LOCKGATE_ERROR='locked'\n"
	    "LOCKGATE_ERROR_MESSAGE='m'\n"
	    "LOCKGATE_LOCK='a'\n"
	    "LOCKGATE_HOLDER_FENCING_TOKEN='3'\n"
	    "LOCKGATE_STATE='expired'\n"
	    "false\n");
	free(env);
	json_decref(e);
	json_decref(lock);
}

static void
test_error_not_held(void **state)
{
	json_t *e = json_pack("{s:{s:s, s:s}}", "error", "code", "not_held",
	    "message", "nobody holds it");
	char *env;

	(void)state;
	env = srv_env_format(e);
	assert_string_equal(env,
	    "LOCKGATE_ERROR='not_held'\n"
	    "LOCKGATE_ERROR_MESSAGE='nobody holds it'\n"
	    "LOCKGATE_STATE='free'\n"
	    "false\n");
	free(env);
	json_decref(e);
}

static void
test_list_numbers_locks_and_ends_with_page_token(void **state)
{
	const char *want = "LOCKGATE_COUNT='2'\n"
	                   "LOCKGATE_0_LOCK='a'\n"
	                   "LOCKGATE_0_FENCING_TOKEN='1'\n"
	                   "LOCKGATE_0_STATE='held'\n"
	                   "LOCKGATE_1_LOCK='b/c'\n"
	                   "LOCKGATE_1_HOLDER='x\ny'\n"
	                   "LOCKGATE_NEXT_PAGE_TOKEN=''\n";
	json_t *l = json_pack("{s:[{s:s, s:s}, {s:s, s:s}], s:n}", "locks",
	    "name", "a", "fencing_token", "1", "name", "b/c", "holder", "x\ny",
	    "next_page_token");
	char *env, *got;
	size_t n;

	(void)state;
	env = srv_env_format(l);
	assert_string_equal(env, want);
	assert_int_equal(count_assignments(env), 7);
	got = dash_get(env, "LOCKGATE_1_HOLDER", &n);
	assert_int_equal(n, 3);
	assert_memory_equal(got, "x\ny", 3);
	free(got);
	free(env);
	json_decref(l);
}

/* A semaphore's holders: their number, then each holder's members under
 * LOCKGATE_HOLDER_<i>_ (from 0); in an error too, where no holder's token
 * lands in LOCKGATE_FENCING_TOKEN.  A hostile purpose comes back as is. */
static void
test_holders_numbered(void **state)
{
	const char *want =
	    "LOCKGATE_LOCK='stage'\n"
	    "LOCKGATE_FENCING_TOKEN='5'\n"
	    "LOCKGATE_MODE='exclusive'\n"
	    "LOCKGATE_LIMIT='3'\n"
	    "LOCKGATE_HOLDERS='2'\n"
	    "LOCKGATE_HOLDER_0_OWNER='alice'\n"
	    "LOCKGATE_HOLDER_0_PURPOSE='it'\\''s $(x)'\n"
	    "LOCKGATE_HOLDER_0_FENCING_TOKEN='5'\n"
	    "LOCKGATE_HOLDER_0_LABELS='{\"a\":\"b\"}'\n"
	    "LOCKGATE_HOLDER_1_OWNER='bob'\n"
	    "LOCKGATE_HOLDER_1_EXPIRES_AT='2026-11-22T03:00:00.000Z'\n"
	    "LOCKGATE_HOLDER_1_FENCING_TOKEN='6'\n"
	    "LOCKGATE_STATE='held'\n";
	json_t *lock = json_pack("{s:s, s:s, s:s, s:i, s:[{s:s, s:s, s:s, "
	                         "s:{s:s}}, {s:s, s:s, s:s}]}",
	    "name", "stage", "fencing_token", "5", "mode", "exclusive", "limit",
	    3, "holders", "owner", "alice", "purpose", "it's $(x)",
	    "fencing_token", "5", "labels", "a", "b", "owner", "bob",
	    "expires_at", "2026-11-22T03:00:00.000Z", "fencing_token", "6");
	json_t *e = json_pack("{s:{s:s, s:s, s:O}}", "error", "code", "locked",
	    "message", "m", "lock", lock);
	char *env, *got;
	size_t n;

	(void)state;
	env = srv_env_format(lock);
	assert_non_null(env);
	assert_string_equal(env, want);
	got = dash_get(env, "LOCKGATE_HOLDER_0_PURPOSE", &n);
	assert_int_equal(n, strlen("it's $(x)"));
	assert_memory_equal(got, "it's $(x)", n);
	free(got);
	free(env);
	env = srv_env_format(e);
	assert_non_null(env);
	assert_non_null(strstr(env, "LOCKGATE_HOLDER_FENCING_TOKEN='5'\n"));
	assert_non_null(strstr(env, "LOCKGATE_HOLDERS='2'\n"));
	assert_non_null(strstr(env, "LOCKGATE_HOLDER_1_FENCING_TOKEN='6'\n"));
	got = dash_eval(env, "{LOCKGATE_FENCING_TOKEN:-}", 1, &n);
	assert_int_equal(n, 0);
	free(got);
	free(env);
	json_decref(e);
	json_decref(lock);
}

/* In a list, lock J's holders are LOCKGATE_J_HOLDERS and
 * LOCKGATE_J_HOLDER_<i>_...; holders that are not objects, or not an
 * array, come as values. */
static void
test_holders_in_list_and_odd_shapes(void **state)
{
	json_t *l = json_pack("{s:[{s:s, s:[{s:s}]}]}", "locks", "name", "a",
	    "holders", "owner", "x");
	json_t *odd = json_pack("{s:[s, i]}", "holders", "it's", 2);
	json_t *scalar = json_pack("{s:s}", "holders", "none");
	char *env;

	(void)state;
	env = srv_env_format(l);
	assert_string_equal(env,
	    "LOCKGATE_COUNT='1'\n"
	    "LOCKGATE_0_LOCK='a'\n"
	    "LOCKGATE_0_HOLDERS='1'\n"
	    "LOCKGATE_0_HOLDER_0_OWNER='x'\n");
	free(env);
	env = srv_env_format(odd);
	assert_string_equal(env,
	    "LOCKGATE_HOLDERS='2'\n"
	    "LOCKGATE_HOLDER_0_VALUE='it'\\''s'\n"
	    "LOCKGATE_HOLDER_1_VALUE='2'\n");
	free(env);
	env = srv_env_format(scalar);
	assert_string_equal(env, "LOCKGATE_HOLDERS='none'\n");
	free(env);
	json_decref(scalar);
	json_decref(odd);
	json_decref(l);
}

static void
test_hostile_keys(void **state)
{
	json_t *o = json_object();
	char *env, *got;
	size_t n;
	char longkey[400];

	(void)state;
	memset(longkey, 'k', sizeof longkey - 1);
	longkey[sizeof longkey - 1] = '\0';
	json_object_set_new(o, "a-b c'$(touch pwned)", json_string("v"));
	json_object_set_new(o, "\xc3\xa9=\n", json_string("w"));
	json_object_set_new(o, longkey, json_string("long"));
	env = srv_env_format(o);
	assert_non_null(env);
	assert_int_equal(count_assignments(env), 3);
	assert_non_null(strstr(env, "LOCKGATE_A_B_C___TOUCH_PWNED_='v'\n"));
	assert_non_null(strstr(env, "LOCKGATE_____='w'\n"));
	got = dash_get(env, "LOCKGATE_A_B_C___TOUCH_PWNED_", &n);
	assert_int_equal(n, 1);
	free(got);
	/* Keys are capped. */
	assert_null(strstr(env, longkey));
	assert_false(canary_exists());
	free(env);
	json_decref(o);
}

static void
test_null_and_non_object(void **state)
{
	json_t *a = json_pack("[s, i]", "it's", 1);
	char *env;

	(void)state;
	env = srv_env_format(NULL);
	assert_non_null(env);
	assert_string_equal(env, "");
	free(env);
	env = srv_env_format(a);
	assert_string_equal(env, "LOCKGATE_VALUE='[\"it'\\''s\",1]'\n");
	free(env);
	json_decref(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_values_roundtrip),
		cmocka_unit_test(test_big_value_roundtrip),
		cmocka_unit_test(test_nul_byte_dropped),
		cmocka_unit_test(test_lease_exact),
		cmocka_unit_test(test_expired_state),
		cmocka_unit_test(test_error_locked),
		cmocka_unit_test(test_error_not_held),
		cmocka_unit_test(test_state_member_not_doubled),
		cmocka_unit_test(
		    test_list_numbers_locks_and_ends_with_page_token),
		cmocka_unit_test(test_holders_numbered),
		cmocka_unit_test(test_holders_in_list_and_odd_shapes),
		cmocka_unit_test(test_hostile_keys),
		cmocka_unit_test(test_null_and_non_object),
	};

	return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
