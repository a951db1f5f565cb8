/*
 * gcs_list.c: list pages of the gs:// store (gcs_client.c), of a store
 * that honours maxResults and pageToken (Cloud Storage) and of one that
 * answers every match at once (Google's emulator).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gcs_client_int.h"

int
gs_list_url(const gs_store *g, char *url, size_t urlsz, const char *prefix,
    int max, const char *token, const char *after, const char *fields)
{
	gs_buf u;

	if (g->plen + strlen(prefix) > GCS_PREFIX_MAX + GCS_NAME_MAX ||
	    (token != NULL && strlen(token) > GCS_PAGE_TOKEN_MAX))
		return -1;
	gs_buf_fixed(&u, url, urlsz);
	gs_buf_str(&u, g->objs_url);
	gs_buf_str(&u, "?prefix=");
	gs_buf_enc(&u, g->prefix);
	gs_buf_enc(&u, prefix);
	gs_buf_str(&u, "&maxResults=");
	gs_buf_u64(&u, max > 0 ? (uint64_t)max : 0);
	if (token != NULL) {
		gs_buf_str(&u, "&pageToken=");
		gs_buf_enc(&u, token);
	} else if (after != NULL) {
		/* From the object named AFTER on (startOffset includes it:
		 * gs_list drops it). */
		gs_buf_str(&u, "&startOffset=");
		gs_buf_enc(&u, g->prefix);
		gs_buf_enc(&u, after);
	}
	gs_buf_str(&u, "&fields=");
	gs_buf_str(&u, fields);
	return u.failed ? -1 : 0;
}

/*
 * One list page of up to MAX objects.  An object's entry takes up to about
 * twice its 8 KiB of metadata (each '"' or '\' escaped) and its other
 * fields, so a full page of large leases can pass GCS_RESP_MAX.  Such an
 * answer is asked for again with at most LIST_PAGE_SAFE objects, which
 * always fits, and that shorter page is the answer (with its token, as
 * any page that is not the last).
 */
#define LIST_ENTRY_MAX (2 * GCS_META_BYTES_MAX + 1024)
#define LIST_PAGE_SAFE (GCS_RESP_MAX / LIST_ENTRY_MAX)

/*
 * A store may ignore maxResults and pageToken (Google's emulator answers
 * every match in one page).  Such a page is cut to MAX here, and its
 * token is one of ours: OWN_TOKEN + the name of its last object, which
 * the next call turns into startOffset.  Cloud Storage's tokens are
 * base64, which never holds ':'.
 */
#define OWN_TOKEN     "lg:"
#define OWN_TOKEN_LEN 3

/* OUT's next_token: OWN_TOKEN after its last entry when the answer J
 * held more than was kept (CUT), else J's nextPageToken, if any.  GCS_OK,
 * GCS_NOMEM, or GCS_UNAVAILABLE for a token over GCS_PAGE_TOKEN_MAX. */
static int
next_token_of(gcs_page *out, const json_t *j, int cut, gcs_err *err)
{
	const char *tok =
	    json_string_value(json_object_get(j, "nextPageToken"));
	const char *last;

	if (cut) {
		last = out->items[out->n - 1].name;
		out->next_token = malloc(OWN_TOKEN_LEN + strlen(last) + 1);
		if (out->next_token != NULL) {
			memcpy(out->next_token, OWN_TOKEN, OWN_TOKEN_LEN);
			memcpy(out->next_token + OWN_TOKEN_LEN, last,
			    strlen(last) + 1);
		}
	} else if (tok != NULL && tok[0] != '\0') {
		if (strlen(tok) > GCS_PAGE_TOKEN_MAX)
			return gcs_fail(err, GCS_UNAVAILABLE,
			    "Cloud Storage list: malformed answer");
		out->next_token = strdup(tok);
	} else {
		return GCS_OK;
	}
	return out->next_token ? GCS_OK
	                       : gcs_fail(err, GCS_NOMEM, "out of memory");
}

/* The page's malformed answer, in ERR. */
static int
malformed(gcs_err *err)
{
	return gcs_fail(err, GCS_UNAVAILABLE,
	    "Cloud Storage list: malformed answer");
}

/* One page of up to *MAX objects into R (gs_call's contract).  An answer
 * over GCS_RESP_MAX is asked for again with at most LIST_PAGE_SAFE
 * objects, and *MAX then says so. */
static int
page_fetch(gs_store *g, const char *prefix, int *max, const char *page_token,
    const char *after, gcs_resp *r, gcs_err *err)
{
	char url[GCS_URL_MAX];
	gs_req req;
	int rc, too_big = 0;

	for (;;) {
		if (gs_list_url(g, url, sizeof(url), prefix, *max, page_token,
		        after, LIST_FIELDS) != 0)
			return gcs_fail(err, GCS_INVALID, "URL too long");
		req = (gs_req){ .op = "list",
			.no_object = 1,
			.large_answer = 1,
			.method = "GET",
			.url = url,
			.too_big = &too_big };
		rc = gs_call(g, &req, r, err);
		if (rc == GCS_OK || !too_big || *max <= LIST_PAGE_SAFE)
			return rc;
		*max = LIST_PAGE_SAFE;
	}
}

/* The entries of ITEMS (an array, or NULL) into OUT->items (room for
 * them all), at most MAX; *CUT says whether ITEMS held more.  GCS_OK, or
 * the failure with ERR filled (OUT then holds what was read). */
static int
page_entries(const gs_store *g, const json_t *items, int max,
    const char *page_token, const char *after, gcs_page *out, int *cut,
    gcs_err *err)
{
	const char *nm;
	json_t *it;
	size_t i;

	json_array_foreach(items, i, it)
	{
		gcs_entry *e = &out->items[out->n];
		if (out->n == (size_t)max)
			break; /* maxResults ignored: OWN_TOKEN follows */
		nm = json_string_value(json_object_get(it, "name"));
		if (nm == NULL)
			return malformed(err);
		if (strncmp(nm, g->prefix, g->plen) != 0)
			continue; /* not ours: cannot happen with prefix= */
		if (page_token == NULL && after != NULL &&
		    strcmp(nm + g->plen, after) == 0)
			continue; /* startOffset's own object: seen already */
		if (gs_parse_object(it, out->now_ms, &e->obj) != 0)
			return malformed(err);
		e->name = strdup(nm + g->plen);
		if (e->name == NULL) {
			gcs_object_clear(&e->obj);
			return gcs_fail(err, GCS_NOMEM, "out of memory");
		}
		out->n++;
	}
	*cut = i < json_array_size(items);
	return GCS_OK;
}

int
gs_list(gcs_store *s, const char *prefix, int max, const char *page_token,
    const char *after, gcs_page *out, gcs_err *err)
{
	gs_store *g = (gs_store *)s;
	json_t *j = NULL, *items;
	gcs_resp r;
	int rc, cut = 0;

	if (page_token != NULL &&
	    strncmp(page_token, OWN_TOKEN, OWN_TOKEN_LEN) == 0) {
		after = page_token + OWN_TOKEN_LEN;
		page_token = NULL;
	}
	rc = page_fetch(g, prefix, &max, page_token, after, &r, err);
	if (rc != GCS_OK)
		return rc;
	out->now_ms = gs_now_of(&r);
	j = r.body ? json_loadb(r.body, r.len, 0, NULL) : NULL;
	/* An error object is no page, though a 200 carried it. */
	if (!json_is_object(j) || json_object_get(j, "error") != NULL)
		goto bad;
	items = json_object_get(j, "items"); /* absent on an empty page */
	if (items != NULL && !json_is_array(items))
		goto bad;
	if (json_array_size(items) > 0) {
		out->items =
		    calloc(json_array_size(items), sizeof(*out->items));
		if (out->items == NULL) {
			rc = gcs_fail(err, GCS_NOMEM, "out of memory");
			goto out;
		}
	}
	rc = page_entries(g, items, max, page_token, after, out, &cut, err);
	if (rc == GCS_OK)
		rc = next_token_of(out, j, cut, err);
	if (rc != GCS_OK)
		goto fail;
	goto out;
bad:
	rc = malformed(err);
fail:
	gcs_page_clear(out);
out:
	json_decref(j);
	gcs_resp_clear(&r);
	return rc;
}
