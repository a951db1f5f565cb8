/*
 * gs_error.c: gs:// error answers: any status but the success one, with
 * an error body (gcs_client.c reason_of, classify), for each operation
 * (delete and the readiness check too).  See gs_common.h for the input.
 * What must hold: the status classifies as the contract says (gcs.h)
 * and the message stays one NUL-terminated line.
 */
#include "gs_common.h"

static int
expected(long status, int op)
{
	int no_object = op == 4 || op == 5; /* insert, list */
	int guarded = op == 1 || op == 2;   /* patch, delete (and insert) */

	switch (status) {
	case 404:
		return no_object ? GCS_UNAVAILABLE : GCS_NOT_FOUND;
	case 409:
	case 412:
		return guarded || op == 4 ? GCS_PRECONDITION : GCS_UNAVAILABLE;
	case 429:
		return GCS_BUSY;
	case 401:
	case 403:
		return GCS_DENIED;
	case 400:
		return GCS_INVALID;
	default:
		return GCS_UNAVAILABLE;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in in = { data, size };
	int op = gs_take(&in) % 6, rc;
	json_t *meta = json_pack("{s:s}", "owner", "fuzz");
	gcs_object o;
	gcs_page page;
	gcs_err err;

	if (gs_answer.status >= 200 && gs_answer.status < 300) {
		/* Design section 1: any 2xx to a delete is success (Google's
		 * emulator answers 200; regressions/gs_error). */
		if (op == 2) {
			rc = gcs_remove(gs_store, "a", 7, 1, &err);
			FUZZ_CHECK(rc == GCS_OK);
			json_decref(meta);
			return 0;
		}
		gs_answer.status = 500 + gs_answer.status % 100;
	}
	if (gs_answer.later >= 200 && gs_answer.later < 300)
		gs_answer.later = 400; /* errors only, retried or not */
	memset(&o, 0, sizeof(o));
	memset(&page, 0, sizeof(page));
	memset(&err, 0, sizeof(err));
	switch (op) {
	case 0:
		rc = gcs_get(gs_store, "a", &o, &err);
		break;
	case 1:
		rc = gcs_patch(gs_store, "a", 7, 1, meta, &o, &err);
		break;
	case 2:
		rc = gcs_remove(gs_store, "a", 7, 1, &err);
		break;
	case 3:
		rc = gcs_check(gs_store, &err);
		break;
	case 4:
		rc = gcs_insert(gs_store, "a", meta, &o, &err);
		break;
	default:
		rc = gcs_list(gs_store, "", 10, NULL, &page, &err);
		break;
	}
	gs_err_ok(rc, &err);
	if (gs_answer.calls == 1 && gs_answer.status != 0 && op != 3)
		FUZZ_CHECK(rc == expected(gs_answer.status, op));
	FUZZ_CHECK(strchr(err.msg, '\n') == NULL);
	gcs_object_clear(&o);
	gcs_page_clear(&page);
	json_decref(meta);
	return 0;
}
