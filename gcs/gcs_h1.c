/*
 * gcs_h1.c: writing an HTTP/1.1 request and reading its answer (RFC 9112)
 * for the storage client's own connections; see gcs_h1.h.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gcs_h1.h"

enum {
	S_STATUS,     /* the status line */
	S_HEADER,     /* header lines, up to the empty one */
	S_BODY,       /* LEFT bytes of a Content-Length body */
	S_BODY_CLOSE, /* a body that ends when the connection does */
	S_CHUNK_SIZE, /* a chunk-size line */
	S_CHUNK_DATA, /* LEFT bytes of a chunk */
	S_CHUNK_END,  /* the CRLF after a chunk's data */
	S_TRAILER,    /* trailer lines after the last chunk */
	S_DONE
};

void
gcs_h1_init(gcs_h1 *p, gcs_resp *resp)
{
	memset(resp, 0, sizeof(*resp));
	p->resp = resp;
	p->state = S_STATUS;
	p->keep_alive = 1;
	p->seen = 0;
	p->interim = 0;
	p->chunked = 0;
	p->clen = -1;
	p->left = 0;
	p->head = 0;
	p->llen = 0;
}

/* Move bytes of BUF (N) into P->line up to a line end.  1: a whole line
 * is in P->line (NUL-terminated, without its CRLF or LF), *TOOK bytes
 * taken; 0: all N taken, the line goes on; -1: the line is too long or
 * holds a CR that does not end it, or a NUL. */
static int
take_line(gcs_h1 *p, const char *buf, size_t n, size_t *took)
{
	const char *lf = memchr(buf, '\n', n);
	size_t k = lf ? (size_t)(lf - buf) : n, i;

	*took = 0;
	if (p->llen + k >= sizeof(p->line))
		return -1;
	memcpy(p->line + p->llen, buf, k);
	p->llen += k;
	*took = lf ? k + 1 : n;
	if (lf == NULL)
		return 0;
	if (p->llen > 0 && p->line[p->llen - 1] == '\r')
		p->llen--;
	p->line[p->llen] = '\0';
	for (i = 0; i < p->llen; i++)
		if (p->line[i] == '\r' || p->line[i] == '\0')
			return -1;
	return 1;
}

/* "HTTP/1.x NNN[ reason]". */
static int
status_line(gcs_h1 *p)
{
	const char *s = p->line;
	int st;

	if (p->llen < 12 || strncmp(s, "HTTP/1.", 7) != 0 ||
	    (s[7] != '0' && s[7] != '1') || s[8] != ' ' || s[9] < '1' ||
	    s[9] > '5' || s[10] < '0' || s[10] > '9' || s[11] < '0' ||
	    s[11] > '9' || (p->llen > 12 && s[12] != ' '))
		return -1;
	st = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
	if (st == 101)
		return -1; /* we never ask to switch protocols */
	p->resp->status = st;
	if (s[7] == '0')
		p->keep_alive = 0; /* HTTP/1.0: one answer per connection */
	return 0;
}

/* A field name's characters (RFC 9110 5.6.2 tchar). */
static int
tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

/* Whether the comma-separated list V holds TOKEN (any case). */
static int
has_token(const char *v, const char *token)
{
	size_t k = strlen(token);

	while (*v != '\0') {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		if (strncasecmp(v, token, k) == 0) {
			const char *e = v + k;

			while (*e == ' ' || *e == '\t')
				e++;
			if (*e == ',' || *e == '\0')
				return 1;
		}
		while (*v != '\0' && *v != ',')
			v++;
	}
	return 0;
}

/* One header line of the answer. */
static int
header_line(gcs_h1 *p)
{
	char *colon = strchr(p->line, ':'), *v, *e, *name = p->line;
	gcs_resp *r = p->resp;
	int64_t n;
	size_t i;

	if (name[0] == ' ' || name[0] == '\t')
		return -1; /* obsolete line folding */
	if (colon == NULL || colon == name)
		return -1;
	for (i = 0; name + i < colon; i++)
		if (!tchar((unsigned char)name[i]))
			return -1; /* also no space before the colon */
	*colon = '\0';
	for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
		;
	for (e = v + strlen(v); e > v && (e[-1] == ' ' || e[-1] == '\t'); e--)
		;
	*e = '\0';
	if (strcasecmp(name, "Content-Length") == 0) {
		if (*v == '\0' || strlen(v) > 18)
			return -1;
		for (n = 0; *v != '\0'; v++) {
			if (*v < '0' || *v > '9')
				return -1;
			n = n * 10 + (*v - '0');
		}
		if (p->clen >= 0 && p->clen != n)
			return -1;
		p->clen = n;
	} else if (strcasecmp(name, "Transfer-Encoding") == 0) {
		if (strcasecmp(v, "chunked") != 0 || p->chunked)
			return -1;
		p->chunked = 1;
	} else if (strcasecmp(name, "Connection") == 0) {
		if (has_token(v, "close"))
			p->keep_alive = 0;
	} else if (strcasecmp(name, "Date") == 0) {
		int64_t t = gcs_parse_http_date(v, strlen(v));

		if (t > 0)
			r->date_ms = t;
	} else if (strcasecmp(name, "Metadata-Flavor") == 0)
		r->metadata_flavor = strcmp(v, "Google") == 0;
	return 0;
}

/* The header block ended: how the body is framed (RFC 9112 6.3). */
static int
head_done(gcs_h1 *p)
{
	gcs_resp *r = p->resp;
	int st = (int)r->status;

	if (st >= 100 && st < 200) {
		/* An interim answer: the real one follows. */
		if (++p->interim > GCS_H1_INTERIM)
			return -1;
		r->status = 0;
		r->date_ms = 0;
		r->metadata_flavor = 0;
		p->chunked = 0;
		p->clen = -1;
		p->state = S_STATUS;
		return 0;
	}
	if (p->chunked && p->clen >= 0 && st != 204 && st != 304)
		return -1; /* two framings: one of them is a lie */
	if (st == 204 && (p->chunked || p->clen > 0))
		return -1; /* a 204 has no body (RFC 9110 15.3.5) */
	if (st == 204 || st == 304) {
		/* No body, whatever the header says (a 304's Content-Length
		 * is that of the body it did not send). */
		p->state = S_DONE;
	} else if (p->chunked)
		p->state = S_CHUNK_SIZE;
	else if (p->clen >= 0) {
		p->left = (uint64_t)p->clen;
		p->state = p->left == 0 ? S_DONE : S_BODY;
	} else {
		p->keep_alive = 0;
		p->state = S_BODY_CLOSE;
	}
	return 0;
}

/* Keep N body bytes at B: past GCS_RESP_MAX they are counted out (the
 * answer is then too big, which its reader refuses), not kept. */
static int
body_add(gcs_h1 *p, const char *b, size_t n)
{
	gcs_resp *r = p->resp;
	char *nb;

	if (n == 0)
		return 0;
	if (r->too_big || r->len + n > GCS_RESP_MAX) {
		r->too_big = 1;
		return 0;
	}
	nb = realloc(r->body, r->len + n + 1);
	if (nb == NULL)
		return -1;
	memcpy(nb + r->len, b, n);
	r->body = nb;
	r->len += n;
	r->body[r->len] = '\0';
	return 0;
}

/* "HEX[;extensions]" */
static int
chunk_size_line(gcs_h1 *p)
{
	const char *s = p->line;
	uint64_t n = 0;
	int digits = 0;

	for (; *s != '\0'; s++, digits++) {
		int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if ((*s | 0x20) >= 'a' && (*s | 0x20) <= 'f')
			d = (*s | 0x20) - 'a' + 10;
		else
			break;
		if (digits == 15)
			return -1; /* no chunk is that large */
		n = n * 16 + (uint64_t)d;
	}
	while (*s == ' ' || *s == '\t')
		s++;
	if (digits == 0 || (*s != '\0' && *s != ';'))
		return -1;
	p->left = n;
	p->state = n == 0 ? S_TRAILER : S_CHUNK_DATA;
	return 0;
}

int
gcs_h1_feed(gcs_h1 *p, const char *buf, size_t n, size_t *used)
{
	size_t at = 0, took, k;
	int rc;

	if (n > 0)
		p->seen = 1;
	while (at < n && p->state != S_DONE) {
		switch (p->state) {
		case S_STATUS:
		case S_HEADER:
		case S_CHUNK_SIZE:
		case S_CHUNK_END:
		case S_TRAILER:
			rc = take_line(p, buf + at, n - at, &took);
			at += took;
			if (p->state == S_STATUS || p->state == S_HEADER ||
			    p->state == S_TRAILER) {
				p->head += took;
				if (p->head > GCS_H1_HEAD_MAX)
					goto bad;
			}
			if (rc < 0)
				goto bad;
			if (rc == 0)
				break;
			if (p->state == S_STATUS) {
				if (status_line(p) != 0)
					goto bad;
				p->state = S_HEADER;
			} else if (p->state == S_HEADER) {
				if (p->line[0] == '\0') {
					if (head_done(p) != 0)
						goto bad;
				} else if (header_line(p) != 0)
					goto bad;
			} else if (p->state == S_CHUNK_SIZE) {
				if (chunk_size_line(p) != 0)
					goto bad;
			} else if (p->state == S_CHUNK_END) {
				if (p->line[0] != '\0')
					goto bad;
				p->state = S_CHUNK_SIZE;
			} else if (p->line[0] == '\0')
				p->state = S_DONE; /* end of the trailers */
			p->llen = 0;
			break;
		case S_BODY:
		case S_CHUNK_DATA:
			k = n - at;
			if ((uint64_t)k > p->left)
				k = (size_t)p->left;
			if (body_add(p, buf + at, k) != 0)
				goto bad;
			at += k;
			p->left -= k;
			if (p->left == 0)
				p->state =
				    p->state == S_BODY ? S_DONE : S_CHUNK_END;
			break;
		case S_BODY_CLOSE:
			if (body_add(p, buf + at, n - at) != 0)
				goto bad;
			at = n;
			break;
		default:
			goto bad;
		}
	}
	*used = at;
	return p->state == S_DONE ? GCS_H1_DONE : GCS_H1_MORE;
bad:
	*used = at;
	p->keep_alive = 0;
	return GCS_H1_BAD;
}

int
gcs_h1_eof(gcs_h1 *p)
{
	p->keep_alive = 0;
	if (p->state == S_DONE || p->state == S_BODY_CLOSE) {
		p->state = S_DONE;
		return GCS_H1_DONE;
	}
	return GCS_H1_BAD;
}

/* ---- the request ---- */

/* Append N bytes at S to *OUT. */
static int
put(char **out, size_t *cap, size_t *len, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t nc = *cap ? *cap : 1024;
		char *nb;

		while (nc < *len + n + 1)
			nc *= 2;
		if ((nb = realloc(*out, nc)) == NULL)
			return -1;
		*out = nb;
		*cap = nc;
	}
	memcpy(*out + *len, s, n);
	*len += n;
	(*out)[*len] = '\0';
	return 0;
}

#define PUTS(s) put(out, cap, len, (s), strlen(s))

int
gcs_h1_request(char **out, size_t *cap, size_t *len, const char *method,
    const char *target, const char *host, const struct curl_slist *hdrs,
    const char *body, size_t body_len)
{
	char num[24], *q = num + sizeof(num);
	const struct curl_slist *h;
	size_t v = body_len;
	int sized = body != NULL || strcmp(method, "POST") == 0 ||
	    strcmp(method, "PATCH") == 0 || strcmp(method, "PUT") == 0;

	*len = 0;
	if (PUTS(method) || PUTS(" ") || PUTS(target) ||
	    PUTS(" HTTP/1.1\r\nHost: ") || PUTS(host) ||
	    PUTS("\r\nAccept: */*\r\n"))
		return -1;
	for (h = hdrs; h != NULL; h = h->next) {
		const char *c = strchr(h->data, ':'), *e;

		if (c == NULL || strpbrk(h->data, "\r\n") != NULL)
			return -1;
		for (e = c + 1; *e == ' ' || *e == '\t'; e++)
			;
		if (*e == '\0')
			continue; /* "Name:": libcurl's removal of a header */
		if (PUTS(h->data) || PUTS("\r\n"))
			return -1;
	}
	if (sized) {
		*--q = '\0';
		do
			*--q = (char)('0' + v % 10);
		while ((v /= 10) > 0);
		if (PUTS("Content-Length: ") || PUTS(q) || PUTS("\r\n"))
			return -1;
	}
	if (PUTS("\r\n"))
		return -1;
	if (body != NULL && body_len > 0 && put(out, cap, len, body, body_len))
		return -1;
	return 0;
}
