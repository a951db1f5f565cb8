/* store_file.c: placeholder until the durable local store lands. */
#include "gcs.h"

gcs_store *
gcs_file_new(const char *dir, gcs_err *err)
{
	(void)dir;
	gcs_fail(err, GCS_INVALID, "the file store is not built yet");
	return NULL;
}
