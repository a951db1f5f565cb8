/* jsonw.c: see jsonw.h. */
#include <string.h>

#include "api.h"
#include "jsonw.h"

void
api_jw_init(api_jw *jw, char *buf, size_t cap, size_t keep)
{
	memset(jw, 0, sizeof(*jw));
	jw->buf = buf;
	jw->cap = cap;
	jw->keep = keep;
	if (cap > 0)
		buf[0] = '\0';
}

/* Room for N more bytes (and the NUL after them): where they go, or NULL
 * when the buffer is out of room (the writer is then full and ignores
 * everything after). */
static char *
jw_reserve(api_jw *jw, size_t n)
{
	if (jw->full)
		return NULL;
	if (jw->len + n + jw->keep + 1 > jw->cap) {
		jw->full = true;
		return NULL;
	}
	return jw->buf + jw->len;
}

/* N bytes were written at what jw_reserve returned. */
static void
jw_commit(api_jw *jw, size_t n)
{
	jw->len += n;
	jw->buf[jw->len] = '\0';
}

void
api_jw_raw(api_jw *jw, const char *s, size_t n)
{
	char *d = jw_reserve(jw, n);

	if (d == NULL)
		return;
	memcpy(d, s, n);
	jw_commit(jw, n);
}

void
api_jw_lit(api_jw *jw, const char *s)
{
	api_jw_raw(jw, s, strlen(s));
}

/* Bytes a JSON string can hold as they are: ASCII but a control
 * character, DEL, a quote or a backslash.  The rest are looked at one by
 * one: UTF-8 goes through whole, and what is not UTF-8 (a message cut in
 * the middle of a character) becomes U+FFFD, so a line is always JSON. */
#define P1(c)  ((c) >= 0x20 && (c) < 0x7f && (c) != '"' && (c) != '\\')
#define P4(c)  P1(c), P1((c) + 1), P1((c) + 2), P1((c) + 3)
#define P16(c) P4(c), P4((c) + 4), P4((c) + 8), P4((c) + 12)
#define P64(c) P16(c), P16((c) + 16), P16((c) + 32), P16((c) + 48)
static const bool jw_plain[256] = {
	P64(0),
	P64(64),
	P64(128),
	P64(192),
};
#undef P64
#undef P16
#undef P4
#undef P1

/* How many leading bytes of P need no escaping. */
static size_t
plain_run(const unsigned char *p)
{
	const unsigned char *q = p;

	while (jw_plain[*q])
		q++;
	return (size_t)(q - p);
}

/* S, of which the first RUN bytes are plain, escaped, quotes included. */
static void
str_escaped(api_jw *jw, const unsigned char *p, size_t run)
{
	static const char hex[] = "0123456789abcdef";
	char esc[6];
	size_t k;

	api_jw_raw(jw, "\"", 1);
	for (;;) {
		api_jw_raw(jw, (const char *)p, run);
		p += run;
		if (*p == '\0')
			break;
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			api_jw_raw(jw, esc, 2);
		} else if (*p >= 0x80) {
			if ((k = api_utf8_len((const char *)p)) == 0)
				api_jw_raw(jw, "\\ufffd", 6);
			else
				api_jw_raw(jw, (const char *)p, k);
			p += k > 0 ? k : 1;
			run = plain_run(p);
			continue;
		} else {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 15];
			api_jw_raw(jw, esc, 6);
		}
		p++;
		run = plain_run(p);
	}
	api_jw_raw(jw, "\"", 1);
}

/* Nearly every string needs no escaping: it is then one reservation and
 * one copy. */
void
api_jw_str(api_jw *jw, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = plain_run(p);
	char *d;

	if (p[n] != '\0') {
		str_escaped(jw, p, n);
		return;
	}
	if ((d = jw_reserve(jw, n + 2)) == NULL)
		return;
	d[0] = '"';
	memcpy(d + 1, s, n);
	d[n + 1] = '"';
	jw_commit(jw, n + 2);
}

void
api_jw_int(api_jw *jw, int64_t v)
{
	char buf[24];
	size_t n = api_fmt_int(buf, sizeof(buf), v);

	api_jw_raw(jw, buf, n);
}
