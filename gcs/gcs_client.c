/* gcs_client.c: placeholder until the Cloud Storage client lands. */
#include "gcs.h"

gcs_store *
gcs_gs_new(const char *bucket, const char *prefix, gcs_err *err)
{
	(void)bucket;
	(void)prefix;
	gcs_fail(err, GCS_INVALID, "the gs:// store is not built yet");
	return NULL;
}
