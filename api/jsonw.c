/* jsonw.c: see jsonw.h. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "jsonw.h"

#define JW_INITIAL 1024

void
api_jw_init(api_jw *jw)
{
	memset(jw, 0, sizeof(*jw));
}

void
api_jw_init_fixed(api_jw *jw, char *buf, size_t cap, size_t keep)
{
	memset(jw, 0, sizeof(*jw));
	jw->buf = buf;
	jw->cap = cap;
	jw->fixed = true;
	jw->keep = keep;
}

void
api_jw_raw(api_jw *jw, const char *s, size_t n)
{
	size_t ncap;
	char *nb;

	if (jw->full)
		return;
	if (jw->len + n + jw->keep + 1 > jw->cap) {
		if (jw->fixed) {
			jw->full = true;
			return;
		}
		ncap = jw->cap ? jw->cap : JW_INITIAL;
		while (ncap < jw->len + n + 1)
			ncap *= 2;
		if ((nb = realloc(jw->buf, ncap)) == NULL) {
			jw->full = true;
			return;
		}
		jw->buf = nb;
		jw->cap = ncap;
	}
	memcpy(jw->buf + jw->len, s, n);
	jw->len += n;
	jw->buf[jw->len] = '\0';
}

void
api_jw_lit(api_jw *jw, const char *s)
{
	api_jw_raw(jw, s, strlen(s));
}

void
api_jw_str(api_jw *jw, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *run;
	char esc[6];

	api_jw_raw(jw, "\"", 1);
	while (*p) {
		for (run = p;
		     *p >= 0x20 && *p != '"' && *p != '\\' && *p != 0x7f; p++)
			;
		api_jw_raw(jw, (const char *)run, (size_t)(p - run));
		if (*p == '\0')
			break;
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			api_jw_raw(jw, esc, 2);
		} else {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 15];
			api_jw_raw(jw, esc, 6);
		}
		p++;
	}
	api_jw_raw(jw, "\"", 1);
}

void
api_jw_int(api_jw *jw, int64_t v)
{
	char buf[24];
	size_t i = sizeof(buf);
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	do {
		buf[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		buf[--i] = '-';
	api_jw_raw(jw, buf + i, sizeof(buf) - i);
}

void
api_jw_key(api_jw *jw, const char *key, bool first)
{
	if (!first)
		api_jw_raw(jw, ",", 1);
	api_jw_str(jw, key);
	api_jw_raw(jw, ":", 1);
}

void
api_jw_kstr(api_jw *jw, const char *key, const char *val, bool first)
{
	api_jw_key(jw, key, first);
	api_jw_str(jw, val);
}

void
api_jw_kint(api_jw *jw, const char *key, int64_t v)
{
	api_jw_key(jw, key, false);
	api_jw_int(jw, v);
}

void
api_jw_kbool(api_jw *jw, const char *key, bool v)
{
	api_jw_key(jw, key, false);
	api_jw_lit(jw, v ? "true" : "false");
}

void
api_jw_ktime(api_jw *jw, const char *key, int64_t ms)
{
	char t[40];

	api_time_str(ms, t, sizeof(t));
	api_jw_key(jw, key, false);
	api_jw_str(jw, t);
}
