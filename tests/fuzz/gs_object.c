/*
 * gs_object.c: every gs:// answer that carries one object: get, patch
 * and insert.  See gs_common.h for the input.  What must hold: an object
 * accepted has generations in range and metadata the service turns into
 * a lock it can show, and an insert's holds every key it wrote (the lease
 * granted is the one asked for); anything else is an error with a
 * message, never a crash.
 */
#include "gs_common.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in in = { data, size };
	uint8_t op = gs_take(&in);
	json_t *meta = json_pack("{s:s, s:s, s:s}", "lease_id",
	    "0123456789abcdef0123456789abcdef", "owner", "fuzz", "ttl", "60");
	gcs_object o;
	gcs_err err;
	int rc;

	memset(&o, 0, sizeof(o));
	memset(&err, 0, sizeof(err));
	FUZZ_CHECK(meta != NULL);
	switch (op % 3) {
	case 0:
		rc = gcs_get(gs_store, "a/b", &o, &err);
		break;
	case 1:
		rc = gcs_patch(gs_store, "a/b", 1234, 5, meta, &o, &err);
		break;
	default:
		rc = gcs_insert(gs_store, "a/b", meta, &o, &err);
		break;
	}
	/* Not sent at all only when its few ms ran out first (a loaded
	 * machine): then it must say unavailable. */
	FUZZ_CHECK(gs_answer.calls >= 1 || rc == GCS_UNAVAILABLE);
	if (rc == GCS_OK && op % 3 == 2) {
		const char *k;
		json_t *v;

		json_object_foreach(meta, k, v)
		{
			FUZZ_CHECK(
			    json_equal(json_object_get(o.metadata, k), v));
		}
	}
	if (rc == GCS_OK)
		gs_object_ok("a/b", &o);
	else
		gs_err_ok(rc, &err);
	gcs_object_clear(&o);
	json_decref(meta);
	return 0;
}
