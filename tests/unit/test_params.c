/*
 * test_params.c: request parsing: parameters from a JSON body or a query
 * string become bounded, typed values, and everything else is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/params.h"

/* A fake query string: pairs of key, value (value NULL for "?key"). */
typedef struct fake_query {
	const char *kv[16][2];
	int n;
} fake_query;

static const char *
fq_get(void *ctx, const char *key)
{
	fake_query *q = ctx;
	int i;

	for (i = 0; i < q->n; i++)
		if (strcmp(q->kv[i][0], key) == 0)
			return q->kv[i][1] ? q->kv[i][1] : "";
	return NULL;
}

static void
fq_each(void *ctx, params_visit_fn fn, void *arg)
{
	fake_query *q = ctx;
	int i;

	for (i = 0; i < q->n; i++)
		if (fn(arg, q->kv[i][0], q->kv[i][1]))
			return;
}

static const char *const acquire[] = { "ttl", "wait", "holder", "purpose",
	"labels", "lease_id", "include_expired", NULL };

/* Prepare P over query Q and BODY; returns params_prepare's result. */
static int
prep(srv_params *p, fake_query *q, const char *body, api_err *err)
{
	memset(p, 0, sizeof(*p));
	memset(err, 0, sizeof(*err));
	p->query = fq_get;
	p->each = fq_each;
	p->ctx = q;
	return params_prepare(p, body, body ? strlen(body) : 0, acquire, err);
}

static void
test_query_values_parsed(void **state)
{
	fake_query q = { { { "ttl", "600" }, { "holder", "ci job 7" },
		             { "include_expired", NULL } },
		3 };
	srv_params p;
	api_err e;
	char holder[64], purpose[64];
	long ttl, wait;
	bool inc;

	(void)state;
	assert_int_equal(prep(&p, &q, NULL, &e), 0);
	assert_int_equal(params_int(&p, "ttl", 2, 86400, 300, &ttl, &e), 0);
	assert_int_equal(ttl, 600);
	assert_int_equal(params_int(&p, "wait", 0, 290, 0, &wait, &e), 0);
	assert_int_equal(wait, 0); /* default */
	assert_int_equal(params_str(&p, "holder", holder, sizeof(holder), &e),
	    1);
	assert_string_equal(holder, "ci job 7");
	assert_int_equal(params_str(&p, "purpose", purpose, sizeof(purpose),
	                     &e),
	    0);
	assert_string_equal(purpose, "");
	assert_int_equal(params_bool(&p, "include_expired", false, &inc, &e),
	    0);
	assert_true(inc); /* a bare ?key is true */
	params_clear(&p);
}

static void
test_body_values_parsed(void **state)
{
	fake_query q = { { { NULL, NULL } }, 0 };
	srv_params p;
	api_err e;
	json_t *labels;
	long ttl;
	char holder[8];

	(void)state;
	assert_int_equal(prep(&p, &q,
	                     "{\"ttl\": 30, \"labels\": {\"env\": \"prod\"}, "
	                     "\"holder\": \"x\"}",
	                     &e),
	    0);
	assert_int_equal(params_int(&p, "ttl", 2, 86400, 300, &ttl, &e), 0);
	assert_int_equal(ttl, 30);
	assert_int_equal(params_labels(&p, &labels, &e), 0);
	assert_string_equal(json_string_value(json_object_get(labels, "env")),
	    "prod");
	json_decref(labels);
	assert_int_equal(params_str(&p, "holder", holder, sizeof(holder), &e),
	    1);
	params_clear(&p);
}

static void
test_bad_bodies_refused(void **state)
{
	static const char *bodies[] = {
		"{\"ttl\": 30",             /* truncated */
		"[1, 2]",                   /* not an object */
		"{\"ttl\": 1, \"ttl\": 2}", /* duplicate key */
		"{\"tll\": 30}",            /* unknown key */
		"\"ttl\"",                  /* a string */
		NULL,
	};
	fake_query unknown = { { { "tll", "30" } }, 1 };
	fake_query twice = { { { "ttl", "30" }, { "ttl", "40" } }, 2 };
	fake_query both = { { { "ttl", "30" } }, 1 };
	fake_query none = { { { NULL, NULL } }, 0 };
	srv_params p;
	api_err e;
	int i;

	(void)state;
	for (i = 0; bodies[i]; i++) {
		assert_int_equal(prep(&p, &none, bodies[i], &e), -1);
		assert_int_equal(api_code_status(e.code), 400);
		assert_true(e.message[0] != '\0');
		params_clear(&p);
	}
	assert_int_equal(prep(&p, &unknown, NULL, &e), -1);
	assert_string_equal(e.reason, "unknown_parameter");
	params_clear(&p);
	assert_int_equal(prep(&p, &twice, NULL, &e), -1);
	params_clear(&p);
	assert_int_equal(prep(&p, &both, "{\"ttl\": 30}", &e), -1);
	assert_non_null(strstr(e.message, "both"));
	params_clear(&p);
}

static void
test_bad_numbers_and_text_refused(void **state)
{
	static const char *bad_ints[] = { "", "abc", "1.5", "-5", "+5", " 5",
		"5 ", "99999999999999999999", "0x10", "1", "86401",
		/* %09 %0A %0B %0C %0D: blanks strtoll would skip */
		"\t30", "\n30", "\v30", "\f30", "\r30", "30\t", "-", "--30",
		"- 30", "-+30", "-\t30", NULL };
	static const char *bad_text[] = { "a\nb", "tab\there", "\x7f",
		"\xff\xfe", "\xc0\xaf", "\xe2\x82",
		"\xed\xa0\x80",     /* a surrogate: jansson refuses it later */
		"\xf4\x90\x80\x80", /* above U+10FFFF, as well */
		"\xe0\x80\xaf",     /* overlong */
		"\xc2\x80",         /* C1 */
		NULL };
	fake_query q = { { { "ttl", NULL } }, 1 };
	srv_params p;
	api_err e;
	char out[16];
	long v;
	int i;

	(void)state;
	for (i = 0; bad_ints[i]; i++) {
		q.kv[0][0] = "ttl";
		q.kv[0][1] = bad_ints[i];
		assert_int_equal(prep(&p, &q, NULL, &e), 0);
		assert_int_equal(params_int(&p, "ttl", 2, 86400, 300, &v, &e),
		    -1);
		assert_int_equal(e.code, API_BAD_REQUEST);
		assert_int_equal(v, 300);
		params_clear(&p);
	}
	/* An optional '-' then digits: a negative number is read as one
	 * (the range judges it), leading zeros are digits. */
	{
		static const struct {
			const char *in;
			long want;
		} good[] = { { "-5", -5 }, { "-0", 0 }, { "0030", 30 },
			{ "-007", -7 } };
		size_t k;

		for (k = 0; k < sizeof(good) / sizeof(good[0]); k++) {
			q.kv[0][0] = "ttl";
			q.kv[0][1] = good[k].in;
			assert_int_equal(prep(&p, &q, NULL, &e), 0);
			assert_int_equal(params_int(&p, "ttl", -10, 100, 1, &v,
			                     &e),
			    0);
			assert_int_equal(v, good[k].want);
			params_clear(&p);
		}
	}
	for (i = 0; bad_text[i]; i++) {
		q.kv[0][0] = "holder";
		q.kv[0][1] = bad_text[i];
		assert_int_equal(prep(&p, &q, NULL, &e), 0);
		assert_int_equal(params_str(&p, "holder", out, sizeof(out), &e),
		    -1);
		params_clear(&p);
	}
	/* UTF-8 text is fine; too long is not. */
	q.kv[0][1] = "caf\xc3\xa9 \xe2\x82\xac";
	assert_int_equal(prep(&p, &q, NULL, &e), 0);
	assert_int_equal(params_str(&p, "holder", out, sizeof(out), &e), 1);
	params_clear(&p);
	q.kv[0][1] = "0123456789abcdef";
	assert_int_equal(prep(&p, &q, NULL, &e), 0);
	assert_int_equal(params_str(&p, "holder", out, sizeof(out), &e), -1);
	params_clear(&p);
	/* Wrong JSON types. */
	assert_int_equal(
	    prep(&p, &(fake_query){ { { NULL, NULL } }, 0 },
	        "{\"ttl\": \"30\", \"holder\": 5, \"include_expired\": 1}", &e),
	    0);
	assert_int_equal(params_int(&p, "ttl", 2, 86400, 300, &v, &e), -1);
	assert_int_equal(params_str(&p, "holder", out, sizeof(out), &e), -1);
	{
		bool b;
		assert_int_equal(params_bool(&p, "include_expired", false, &b,
		                     &e),
		    -1);
	}
	params_clear(&p);
}

static void
test_labels_parsed_and_bounded(void **state)
{
	fake_query q = {
		{ { "labels", "{\"env\":\"prod\",\"team\":\"web\"}" } }, 1
	};
	srv_params p;
	api_err e;
	json_t *l;

	(void)state;
	assert_int_equal(prep(&p, &q, NULL, &e), 0);
	assert_int_equal(params_labels(&p, &l, &e), 0);
	assert_int_equal(json_object_size(l), 2);
	json_decref(l);
	params_clear(&p);
	q.kv[0][1] = "env=prod";
	assert_int_equal(prep(&p, &q, NULL, &e), 0);
	assert_int_equal(params_labels(&p, &l, &e), -1);
	assert_null(l);
	params_clear(&p);
	q.kv[0][1] = "{\"n\": 1}";
	assert_int_equal(prep(&p, &q, NULL, &e), 0);
	assert_int_equal(params_labels(&p, &l, &e), -1);
	params_clear(&p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_values_parsed),
		cmocka_unit_test(test_body_values_parsed),
		cmocka_unit_test(test_bad_bodies_refused),
		cmocka_unit_test(test_bad_numbers_and_text_refused),
		cmocka_unit_test(test_labels_parsed_and_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
