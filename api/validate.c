/*
 * validate.c: the shape of every caller-supplied value the lock service
 * accepts: lock names, lease ids, labels.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api.h"

static int
name_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
	    c == '/';
}

static int
alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9');
}

/* The length (1..4) of the well-formed UTF-8 sequence at P (before END),
 * its code point in *CP; 0 when there is none (a stray or missing
 * continuation byte, an overlong form, a surrogate, past U+10FFFF). */
static size_t
utf8_seq(const unsigned char *p, const unsigned char *end, uint32_t *cp)
{
	uint32_t c;
	size_t k, i;

	if (*p < 0x80) {
		*cp = *p;
		return 1;
	}
	if (*p >= 0xc2 && *p <= 0xdf) /* 0xc0, 0xc1: overlong */
		k = 1, c = *p & 0x1fu;
	else if ((*p & 0xf0) == 0xe0)
		k = 2, c = *p & 0x0fu;
	else if (*p >= 0xf0 && *p <= 0xf4)
		k = 3, c = *p & 0x07u;
	else
		return 0;
	if ((size_t)(end - p) <= k)
		return 0;
	for (i = 1; i <= k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3fu);
	}
	if ((k == 2 && c < 0x800) || (k == 3 && c < 0x10000) || c > 0x10ffff ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return k + 1;
}

int
api_text_clean(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	uint32_t c;
	size_t k;

	while (p < end) {
		if ((k = utf8_seq(p, end, &c)) == 0)
			return 0;
		if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
			return 0; /* C0, DEL, C1 */
		p += k;
	}
	return 1;
}

size_t
api_utf8_len(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t c;

	/* A sequence is at most 4 bytes, and stops at the NUL (no
	 * continuation byte). */
	return utf8_seq(p, p + 4, &c);
}

void
api_utf8_scrub(char *s)
{
	unsigned char *p = (unsigned char *)s, *end = p + strlen(s);
	uint32_t c;
	size_t k;

	while (p < end) {
		if ((k = utf8_seq(p, end, &c)) == 0)
			*p++ = '?';
		else
			p += k;
	}
}

static int
why_set(char *why, size_t whylen, const char *msg)
{
	if (why != NULL && whylen > 0)
		snprintf(why, whylen, "%s", msg);
	return 0;
}

int
api_name_valid(const char *name, char *why, size_t whylen)
{
	size_t n, i;
	const char *seg;

	if (name == NULL || name[0] == '\0')
		return why_set(why, whylen, "the lock name is empty");
	n = strlen(name);
	if (n > API_NAME_MAX)
		return why_set(why, whylen,
		    "the lock name is longer than 256 bytes");
	if (!alnum((unsigned char)name[0]))
		return why_set(why, whylen,
		    "a lock name must start with a letter or a digit");
	for (i = 0; i < n; i++)
		if (!name_char((unsigned char)name[i]))
			return why_set(why, whylen,
			    "a lock name may only hold A-Z a-z 0-9 . _ - /");
	if (name[n - 1] == '/')
		return why_set(why, whylen, "a lock name may not end with '/'");
	if (strstr(name, "//") != NULL)
		return why_set(why, whylen, "a lock name may not contain '//'");
	for (seg = name; seg != NULL; seg = strchr(seg, '/')) {
		if (*seg == '/')
			seg++;
		if (strncmp(seg, "..", 2) == 0 &&
		    (seg[2] == '/' || seg[2] == '\0'))
			return why_set(why, whylen,
			    "a lock name may not contain a '..' segment");
		if (seg[0] == '.' && (seg[1] == '/' || seg[1] == '\0'))
			return why_set(why, whylen,
			    "a lock name may not contain a '.' segment");
	}
	return 1;
}

int
api_lease_id_valid(const char *id)
{
	size_t n, i;

	if (id == NULL)
		return 0;
	n = strlen(id);
	if (n < API_LEASE_ID_MIN || n > API_LEASE_ID_MAX)
		return 0;
	for (i = 0; i < n; i++) {
		int c = (unsigned char)id[i];
		if (!alnum(c) && c != '-' && c != '_')
			return 0;
	}
	return 1;
}

int
api_labels_valid(const json_t *labels, char *why, size_t whylen)
{
	const char *k;
	json_t *v;
	size_t i, bytes = 2;

	if (!json_is_object(labels))
		return why_set(why, whylen, "labels must be a JSON object");
	if (json_object_size(labels) > API_LABELS_MAX)
		return why_set(why, whylen, "at most 16 labels are allowed");
	json_object_foreach((json_t *)labels, k, v)
	{
		size_t klen = strlen(k);
		if (klen == 0 || klen > API_LABEL_KEY_MAX)
			return why_set(why, whylen,
			    "a label key must be 1 to 63 characters");
		for (i = 0; i < klen; i++) {
			int c = (unsigned char)k[i];
			if (!alnum(c) && c != '-' && c != '_' && c != '.')
				return why_set(why, whylen,
				    "a label key may only hold A-Z a-z 0-9 . _ "
				    "-");
		}
		if (!json_is_string(v))
			return why_set(why, whylen,
			    "label values must be strings");
		if (json_string_length(v) > API_LABEL_VALUE_MAX)
			return why_set(why, whylen,
			    "a label value must be at most 128 bytes");
		if (!api_text_clean(json_string_value(v),
		        json_string_length(v)))
			return why_set(why, whylen,
			    "a label value must be text without control "
			    "characters");
		bytes += klen + json_string_length(v) * 6 + 6;
	}
	if (bytes > API_LABELS_BYTES_MAX * 3)
		return why_set(why, whylen, "the labels are too large");
	return 1;
}
