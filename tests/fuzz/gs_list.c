/*
 * gs_list.c: a gs:// list page (gcs_client.c gs_list).  See gs_common.h
 * for the input; byte 0 picks a first page, a page after a token or one
 * after a name.  What must hold: every entry of an accepted page has a
 * name under the asked prefix (without the store's) and an object the
 * service can show; a next_token fits GCS_PAGE_TOKEN_MAX.
 */
#include "gs_common.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in in = { data, size };
	uint8_t op = gs_take(&in);
	gcs_page page;
	gcs_err err;
	size_t i;
	int rc;

	memset(&page, 0, sizeof(page));
	memset(&err, 0, sizeof(err));
	if (op % 3 == 0)
		rc = gcs_list(gs_store, "", 100, NULL, &page, &err);
	else if (op % 3 == 1)
		rc = gcs_list(gs_store, "", 100, "tok", &page, &err);
	else
		rc = gcs_list_after(gs_store, "", 100, "a", &page, &err);
	if (rc != GCS_OK) {
		gs_err_ok(rc, &err);
		return 0;
	}
	FUZZ_CHECK(page.n == 0 || page.items != NULL);
	for (i = 0; i < page.n; i++) {
		FUZZ_CHECK(page.items[i].name != NULL);
		gs_object_ok(page.items[i].name, &page.items[i].obj);
	}
	FUZZ_CHECK(page.next_token == NULL ||
	    strlen(page.next_token) <= GCS_PAGE_TOKEN_MAX);
	gcs_page_clear(&page);
	return 0;
}
