/*
 * format_env.c: JSON answers as eval-safe KEY='value' lines (format_env.h).
 *
 * Safety rests on two rules only: keys are built from [A-Z0-9_] here, never
 * copied, and every value is single-quoted with ' written as '\'' .  No
 * other escaping exists in single quotes, so none is needed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format_env.h"

#define ENV_BUF_INITIAL 512

typedef struct env_buf {
	char *p;
	size_t len, cap;
	int oom; /* first failure sticks; later appends do nothing */
} env_buf;

static void
buf_add(env_buf *b, const char *s, size_t n)
{
	size_t need;
	char *np;

	if (b->oom)
		return;
	need = b->len + n + 1;
	if (need > b->cap) {
		size_t cap = b->cap ? b->cap : ENV_BUF_INITIAL;
		while (cap < need)
			cap *= 2;
		np = realloc(b->p, cap);
		if (np == NULL) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
buf_str(env_buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

/* PREFIX + NAME upper-cased, other bytes as '_', into KEY (always
 * SRV_ENV_KEY_MAX + 1 bytes).  "name" is the lock: LOCKGATE_LOCK. */
static void
make_key(char *key, const char *prefix, const char *name)
{
	size_t n = 0, i;

	if (strcmp(name, "name") == 0)
		name = "lock";
	for (i = 0; prefix[i] != '\0' && n < SRV_ENV_KEY_MAX; i++)
		key[n++] = prefix[i];
	for (i = 0; name[i] != '\0' && n < SRV_ENV_KEY_MAX; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c >= 'a' && c <= 'z')
			c = (unsigned char)(c - 'a' + 'A');
		else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			c = '_';
		key[n++] = (char)c;
	}
	key[n] = '\0';
}

/* 'VALUE' with ' as '\'' and NUL bytes dropped. */
static void
add_quoted(env_buf *b, const char *s, size_t n)
{
	size_t i, start = 0;

	buf_add(b, "'", 1);
	for (i = 0; i < n; i++) {
		if (s[i] != '\'' && s[i] != '\0')
			continue;
		buf_add(b, s + start, i - start);
		if (s[i] == '\'')
			buf_add(b, "'\\''", 4);
		start = i + 1;
	}
	buf_add(b, s + start, n - start);
	buf_add(b, "'", 1);
}

static void
add_line(env_buf *b, const char *key, const char *val, size_t n)
{
	buf_str(b, key);
	buf_add(b, "=", 1);
	add_quoted(b, val, n);
	buf_add(b, "\n", 1);
}

/* One member: scalars as text, objects and arrays as compact JSON. */
static void
add_value(env_buf *b, const char *key, const json_t *v)
{
	char num[64];
	char *js;

	switch (json_typeof(v)) {
	case JSON_STRING:
		add_line(b, key, json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT,
		    json_integer_value(v));
		add_line(b, key, num, strlen(num));
		break;
	case JSON_REAL:
		snprintf(num, sizeof num, "%.17g", json_real_value(v));
		add_line(b, key, num, strlen(num));
		break;
	case JSON_TRUE:
		add_line(b, key, "true", 4);
		break;
	case JSON_FALSE:
		add_line(b, key, "false", 5);
		break;
	case JSON_NULL:
		add_line(b, key, "", 0);
		break;
	case JSON_OBJECT:
	case JSON_ARRAY:
		js = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		if (js == NULL) {
			b->oom = 1;
			return;
		}
		add_line(b, key, js, strlen(js));
		free(js);
		break;
	}
}

/* A lock's holders, HOLDERS an array: PREFIX HOLDERS, their number, then
 * the members of holder i (from 0, as a list numbers its locks) under
 * PREFIX HOLDER_i_ , e.g. LOCKGATE_HOLDER_0_OWNER.  A holder's own fencing
 * token is LOCKGATE_HOLDER_i_FENCING_TOKEN, never a script's own key.
 * Flat: a member of a holder is never expanded further. */
static void
add_holders(env_buf *b, const char *prefix, const json_t *holders)
{
	char key[SRV_ENV_KEY_MAX + 1], hprefix[SRV_ENV_KEY_MAX + 1], num[32];
	const char *name;
	json_t *h, *v;
	size_t i;

	snprintf(num, sizeof num, "%zu", json_array_size(holders));
	make_key(key, prefix, "holders");
	add_line(b, key, num, strlen(num));
	json_array_foreach(holders, i, h)
	{
		snprintf(hprefix, sizeof hprefix, "%sHOLDER_%zu_", prefix, i);
		if (!json_is_object(h)) {
			make_key(key, hprefix, "value");
			add_value(b, key, h);
			continue;
		}
		json_object_foreach(h, name, v)
		{
			make_key(key, hprefix, name);
			add_value(b, key, v);
		}
	}
}

/* A lock or lease: every member under PREFIX, then, when WITH_STATE, its
 * state if the object did not carry one.  A lock in an error (OF_ERROR)
 * is someone else's: its fencing token is written as
 * LOCKGATE_HOLDER_FENCING_TOKEN, never where a script keeps its own.
 * An array of holders comes as add_holders writes it.  Returns 1 when
 * a state line was written. */
static int
add_lock(env_buf *b, const char *prefix, const json_t *lock, int with_state,
    int of_error)
{
	char key[SRV_ENV_KEY_MAX + 1];
	const char *name;
	json_t *v;

	json_object_foreach((json_t *)lock, name, v)
	{
		if (strcmp(name, "holders") == 0 && json_is_array(v)) {
			add_holders(b, prefix, v);
			continue;
		}
		if (of_error && strcmp(name, "fencing_token") == 0)
			make_key(key, prefix, "holder_fencing_token");
		else
			make_key(key, prefix, name);
		add_value(b, key, v);
	}
	if (json_object_get(lock, "state") != NULL)
		return 1;
	if (!with_state || json_object_get(lock, "fencing_token") == NULL)
		return 0;
	make_key(key, prefix, "state");
	if (json_is_true(json_object_get(lock, "expired")))
		add_line(b, key, "expired", 7);
	else
		add_line(b, key, "held", 4);
	return 1;
}

static void
add_error(env_buf *b, const json_t *err)
{
	char key[SRV_ENV_KEY_MAX + 1];
	const char *name, *code;
	int has_state = 0;
	json_t *v;

	json_object_foreach((json_t *)err, name, v)
	{
		if (strcmp(name, "code") == 0)
			add_value(b, SRV_ENV_PREFIX "ERROR", v);
		else if (json_is_object(v))
			has_state |= add_lock(b, SRV_ENV_PREFIX, v, 0, 1);
		else {
			make_key(key, SRV_ENV_PREFIX "ERROR_", name);
			add_value(b, key, v);
		}
	}
	code = json_string_value(json_object_get(err, "code"));
	if (!has_state && code != NULL) {
		if (strcmp(code, "not_held") == 0)
			add_line(b, SRV_ENV_PREFIX "STATE", "free", 4);
		else if (strcmp(code, "locked") == 0)
			add_line(b, SRV_ENV_PREFIX "STATE", "held", 4);
	}
	/* The last command: eval of an error fails, so `set -e` or
	 * `eval ... || exit` stops a script that did not get its lease. */
	buf_str(b, SRV_ENV_ERROR_END);
}

static void
add_list(env_buf *b, const json_t *answer, const json_t *locks)
{
	char key[SRV_ENV_KEY_MAX + 1], prefix[64], num[32];
	const char *name;
	json_t *v;
	size_t i;

	snprintf(num, sizeof num, "%zu", json_array_size(locks));
	add_line(b, SRV_ENV_PREFIX "COUNT", num, strlen(num));
	json_array_foreach(locks, i, v)
	{
		snprintf(prefix, sizeof prefix, SRV_ENV_PREFIX "%zu_", i);
		if (json_is_object(v))
			(void)add_lock(b, prefix, v, 1, 0);
		else {
			make_key(key, prefix, "value");
			add_value(b, key, v);
		}
	}
	json_object_foreach((json_t *)answer, name, v)
	{
		if (strcmp(name, "locks") == 0)
			continue;
		make_key(key, SRV_ENV_PREFIX, name);
		add_value(b, key, v);
	}
}

char *
srv_env_format(const json_t *answer)
{
	env_buf b = { 0 };
	const json_t *err, *locks;

	buf_add(&b, "", 0); /* "" even when nothing follows */
	if (answer == NULL)
		goto done;
	if (!json_is_object(answer)) {
		add_value(&b, SRV_ENV_PREFIX "VALUE", answer);
		goto done;
	}
	err = json_object_get(answer, "error");
	locks = json_object_get(answer, "locks");
	if (json_is_object(err))
		add_error(&b, err);
	else if (json_is_array(locks))
		add_list(&b, answer, locks);
	else
		(void)add_lock(&b, SRV_ENV_PREFIX, answer, 1, 0);
done:
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}
