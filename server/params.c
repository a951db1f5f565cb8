/*
 * params.c: request parameters, from a JSON body or the query string
 * (design section 2: every parameter may come either way), turned into
 * bounded, typed values.  Unknown or repeated parameters are refused, so
 * a typo ("tll=600") is an error rather than a silent default.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdint.h>

#include "params.h"
#include "srv.h"

typedef struct scan {
	srv_params *p;
	const char *const *allowed;
	api_err *err;
	int bad;
	const char *seen[32];
	int nseen;
} scan;

static int
allowed_key(const char *const *allowed, const char *key)
{
	for (; *allowed != NULL; allowed++)
		if (strcmp(*allowed, key) == 0)
			return 1;
	return 0;
}

static int
scan_arg(void *cls, const char *key, const char *value)
{
	scan *s = cls;
	int i;

	if (s->bad)
		return 1;
	if (!allowed_key(s->allowed, key)) {
		api_fail(s->err, API_BAD_REQUEST,
		    "unknown parameter '%.40s' for this request", key);
		s->err->reason = "unknown_parameter";
		s->bad = 1;
		return 1;
	}
	for (i = 0; i < s->nseen; i++)
		if (strcmp(s->seen[i], key) == 0) {
			api_fail(s->err, API_BAD_REQUEST,
			    "parameter '%.40s' is given more than once", key);
			s->bad = 1;
			return 1;
		}
	if (s->nseen < (int)(sizeof(s->seen) / sizeof(s->seen[0])))
		s->seen[s->nseen++] = key;
	if (value != NULL && strlen(value) > SRV_QUERY_VALUE_MAX) {
		api_fail(s->err, API_BAD_REQUEST,
		    "parameter '%.40s' is too long", key);
		s->bad = 1;
		return 1;
	}
	if (s->p->body != NULL && json_object_get(s->p->body, key)) {
		api_fail(s->err, API_BAD_REQUEST,
		    "parameter '%.40s' is given both in the body and the query",
		    key);
		s->bad = 1;
		return 1;
	}
	return 0;
}

void
params_clear(srv_params *p)
{
	json_decref(p->body);
	p->body = NULL;
}

int
params_prepare(srv_params *p, const char *body, size_t len,
    const char *const *allowed, api_err *err)
{
	json_error_t je;
	const char *k;
	json_t *v;
	scan s;

	if (len > 0) {
		p->body = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
		if (p->body == NULL) {
			api_fail(err, API_BAD_REQUEST,
			    "the body is not valid JSON: %.80s (line %d)",
			    je.text, je.line);
			err->reason = "bad_json";
			return -1;
		}
		if (!json_is_object(p->body)) {
			api_fail(err, API_BAD_REQUEST,
			    "the body must be a JSON object");
			err->reason = "bad_json";
			return -1;
		}
		json_object_foreach(p->body, k, v)
		{
			if (!allowed_key(allowed, k)) {
				api_fail(err, API_BAD_REQUEST,
				    "unknown parameter '%.40s' for this "
				    "request",
				    k);
				err->reason = "unknown_parameter";
				return -1;
			}
		}
	}
	memset(&s, 0, sizeof(s));
	s.p = p;
	s.allowed = allowed;
	s.err = err;
	p->each(p->ctx, scan_arg, &s);
	return s.bad ? -1 : 0;
}

static const char *
query(srv_params *p, const char *key)
{
	return p->query(p->ctx, key);
}

int
params_str(srv_params *p, const char *key, char *out, size_t outlen,
    api_err *err)
{
	json_t *j = p->body ? json_object_get(p->body, key) : NULL;
	const char *v;
	size_t len;

	out[0] = '\0';
	if (j != NULL) {
		if (!json_is_string(j)) {
			api_fail(err, API_BAD_REQUEST,
			    "parameter '%s' must be a string", key);
			return -1;
		}
		v = json_string_value(j);
		if (strlen(v) != json_string_length(j)) {
			api_fail(err, API_BAD_REQUEST,
			    "parameter '%s' contains a NUL byte", key);
			return -1;
		}
	} else if ((v = query(p, key)) == NULL) {
		return 0;
	}
	len = strlen(v);
	if (len >= outlen) {
		api_fail(err, API_BAD_REQUEST,
		    "parameter '%s' is longer than %zu bytes", key, outlen - 1);
		return -1;
	}
	if (!api_text_clean(v, len)) {
		api_fail(err, API_BAD_REQUEST,
		    "parameter '%s' must be UTF-8 text without control "
		    "characters",
		    key);
		return -1;
	}
	memcpy(out, v, len + 1);
	return 1;
}

/* The query value V as a whole number into *OUT: an optional '-', then
 * decimal digits, nothing else.  0, or -1 (also past long long).  Never
 * strtoll alone: it skips leading blanks and takes a '+', so "%0930",
 * "%0A30" or "+30" would read as 30. */
static int
query_number(const char *v, long long *out)
{
	const char *d = v[0] == '-' ? v + 1 : v;
	char *end;

	if (*d < '0' || *d > '9')
		return -1;
	errno = 0;
	*out = strtoll(v, &end, 10);
	return *end != '\0' || errno != 0 ? -1 : 0;
}

int
params_int(srv_params *p, const char *key, long min, long max, long def,
    long *out, api_err *err)
{
	json_t *j = p->body ? json_object_get(p->body, key) : NULL;
	const char *v;
	long long n;

	*out = def;
	if (j != NULL) {
		if (!json_is_integer(j)) {
			api_fail(err, API_BAD_REQUEST,
			    "parameter '%s' must be a whole number from %ld to "
			    "%ld",
			    key, min, max);
			return -1;
		}
		n = json_integer_value(j);
	} else if ((v = query(p, key)) != NULL) {
		if (query_number(v, &n) != 0) {
			api_fail(err, API_BAD_REQUEST,
			    "parameter '%s' must be a whole number from %ld to "
			    "%ld",
			    key, min, max);
			return -1;
		}
	} else {
		return 0;
	}
	if (n < min || n > max) {
		api_fail(err, API_BAD_REQUEST,
		    "parameter '%s' must be from %ld to %ld", key, min, max);
		return -1;
	}
	*out = (long)n;
	return 0;
}

int
params_bool(srv_params *p, const char *key, bool def, bool *out, api_err *err)
{
	json_t *j = p->body ? json_object_get(p->body, key) : NULL;
	const char *v;

	*out = def;
	if (j != NULL) {
		if (!json_is_boolean(j)) {
			api_fail(err, API_BAD_REQUEST,
			    "parameter '%s' must be true or false", key);
			return -1;
		}
		*out = json_is_true(j);
		return 0;
	}
	if ((v = query(p, key)) == NULL)
		return 0;
	if (!strcmp(v, "true") || !strcmp(v, "1") || v[0] == '\0')
		*out = true;
	else if (!strcmp(v, "false") || !strcmp(v, "0"))
		*out = false;
	else {
		api_fail(err, API_BAD_REQUEST,
		    "parameter '%s' must be true or false", key);
		return -1;
	}
	return 0;
}

int
params_labels(srv_params *p, json_t **out, api_err *err)
{
	json_t *j = p->body ? json_object_get(p->body, "labels") : NULL;
	const char *v;
	char why[128];

	*out = NULL;
	if (j != NULL) {
		json_incref(j);
	} else if ((v = query(p, "labels")) != NULL) {
		/* In a query string, labels are JSON text:
		 * labels={"env":"prod"} (URL-encoded). */
		j = json_loads(v, JSON_REJECT_DUPLICATES, NULL);
		if (j == NULL) {
			api_fail(err, API_BAD_REQUEST,
			    "parameter 'labels' must be a JSON object of "
			    "strings, e.g. {\"env\":\"prod\"}");
			return -1;
		}
	} else {
		return 0;
	}
	if (!api_labels_valid(j, why, sizeof(why))) {
		json_decref(j);
		api_fail(err, API_BAD_REQUEST, "%s", why);
		return -1;
	}
	*out = j;
	return 0;
}
