/*
 * list.c: listing the held locks (GET /v1/locks), a page at a time: the
 * store's pages read until the caller's page is full, the locks its
 * caller may not see left out, a semaphore's or shared lock's head read
 * with its leases (group.c), and next_page_token naming the last lock
 * of the page the caller may see.
 */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "lease.h"

void
api_list_res_clear(api_list_res *res)
{
	size_t i;

	if (res == NULL)
		return;
	for (i = 0; i < res->n; i++)
		api_lock_clear(&res->locks[i]);
	free(res->locks);
	free(res->next_page_token);
	memset(res, 0, sizeof(*res));
}

/* Append the store's entry E to OUT unless it is expired and REQ did not
 * ask for those.  A group head is read with its leases (a group with no
 * valid lease is not held, and left out); API_OK or a store failure. */
static int
list_take(api_service *svc, const api_list_req *req, const gcs_entry *e,
    api_list_res *out, api_err *err)
{
	api_lock *l = &out->locks[out->n];
	int rc;

	if (lease_is_head(&e->obj)) {
		rc = group_inspect(svc, e->name, l, err);
		if (rc == API_OK)
			out->n++;
		if (rc == API_NOT_HELD) {
			memset(err, 0, sizeof(*err));
			rc = API_OK;
		}
		return rc;
	}
	lease_read(e->name, &e->obj, false, l);
	if (l->expired && !req->include_expired) {
		api_lock_clear(l);
		return API_OK;
	}
	out->n++;
	return API_OK;
}

/* Take the entries of the store's PAGE into OUT until it is full (*MORE
 * set when a lock the caller may see follows a full page: one it may
 * not see is no sign of more, nor a sign that it is there); SEEN
 * (API_NAME_MAX + 1 bytes) is the last name taken.  API_OK or a store
 * failure. */
static int
list_page(api_service *svc, const api_list_req *req, const gcs_page *page,
    api_list_res *out, char *seen, int *more, api_err *err)
{
	size_t i;
	int rc = API_OK;

	for (i = 0; i < page->n && !*more && rc == API_OK; i++) {
		const gcs_entry *e = &page->items[i];

		/* A lease of a semaphore or shared lock: read with its
		 * head. */
		if (strchr(e->name, '#') != NULL)
			continue;
		if (req->visible != NULL &&
		    !req->visible(req->visible_ctx, e->name))
			continue;
		if (out->n == (size_t)req->page_size)
			*more = 1; /* E follows a full page */
		else {
			api_copy(seen, API_NAME_MAX + 1, e->name);
			rc = list_take(svc, req, e, out, err);
		}
	}
	return rc;
}

/*
 * A page of up to page_size locks the caller may see, read from as many
 * store pages as that takes (at most API_LIST_SCAN_PAGES).  The page token
 * handed out is the name of the last lock scanned that the caller may see,
 * so it never names one it may not; the store's own tokens stay inside
 * one request (a gs:// token encodes the object name it stopped at).
 */
int
api_list(api_service *svc, const api_list_req *req, api_list_res *out,
    api_err *err)
{
	char seen[API_NAME_MAX + 1], *token = NULL;
	gcs_page page;
	gcs_err ge;
	int rc, pages, more = 0;

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	api_copy(seen, sizeof(seen), req->page_token);
	out->locks = calloc((size_t)req->page_size, sizeof(*out->locks));
	if (out->locks == NULL)
		return api_fail(err, API_INTERNAL, "out of memory");
	for (pages = 0;; pages++) {
		if (pages == API_LIST_SCAN_PAGES) {
			more = 1;
			break;
		}
		/* The first store page is the page asked for and one more
		 * lock, which tells whether another page follows (and makes
		 * up for a store that counts the name it starts after, as
		 * gs:// does); later ones, only needed when the caller may
		 * not see some locks or some expired, are as large as the
		 * store allows. */
		if (token != NULL)
			rc = gcs_list(svc->store, req->prefix,
			    GCS_LIST_PAGE_MAX, token, &page, &ge);
		else
			rc = gcs_list_after(svc->store, req->prefix,
			    req->page_size < GCS_LIST_PAGE_MAX
			        ? req->page_size + 1
			        : GCS_LIST_PAGE_MAX,
			    seen[0] ? seen : NULL, &page, &ge);
		free(token);
		token = NULL;
		if (rc != GCS_OK) {
			api_list_res_clear(out);
			return svc_store_fail(err, &ge);
		}
		out->now_ms = page.now_ms;
		rc = list_page(svc, req, &page, out, seen, &more, err);
		token = page.next_token;
		page.next_token = NULL;
		gcs_page_clear(&page);
		if (rc != API_OK) {
			free(token);
			api_list_res_clear(out);
			return rc;
		}
		if (more || token == NULL)
			break;
		/* Full, and the store has more.  With no name hidden from
		 * the caller, a next page is offered without reading on (it
		 * may turn out empty); otherwise only once a lock it may see
		 * is found, for a hidden one must leave no trace. */
		if (out->n == (size_t)req->page_size && req->visible == NULL) {
			more = 1;
			break;
		}
	}
	free(token);
	if (!more)
		return API_OK;
	if (seen[0] == '\0' || strcmp(seen, req->page_token) == 0) {
		api_list_res_clear(out);
		api_fail(err, API_BAD_REQUEST,
		    "more than %d store pages in a row hold only locks this "
		    "token may not read; list a prefix it may read",
		    API_LIST_SCAN_PAGES);
		err->reason = "list_too_sparse";
		return API_BAD_REQUEST;
	}
	out->next_page_token = strdup(seen);
	if (out->next_page_token == NULL) {
		api_list_res_clear(out);
		return api_fail(err, API_INTERNAL, "out of memory");
	}
	return API_OK;
}
