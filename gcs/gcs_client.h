/*
 * gcs_client.h: knobs of the gs:// store beyond the contract in gcs.h.
 *
 * lockgate's own settings of the store come from the configuration
 * (gcs_configure).  Google's conventions are read from the environment,
 * as Google's client libraries read them, by gcs_gs_new():
 *   STORAGE_EMULATOR_HOST  "host:port" or a URL: use it, without auth.
 *   GOOGLE_APPLICATION_CREDENTIALS, GCE_METADATA_HOST: see gcs_token.h.
 */
#ifndef LOCKGATE_GCS_CLIENT_H
#define LOCKGATE_GCS_CLIENT_H

#include <stdbool.h>

#include "gcs.h"

#define GCS_DEFAULT_ENDPOINT "https://storage.googleapis.com"
#define GCS_ENDPOINT_MAX     512
#define GCS_BUCKET_NAME_MAX  222 /* with dots; 63 without */
#define GCS_BUCKET_LABEL_MAX 63
#define GCS_POOL_MAX         128 /* idle request handles kept */
#define GCS_URL_MAX          4096

/* Retry policy (Cloud Storage's retry strategy): 408, 429, 5xx and
 * transport errors are retried
 * with capped exponential backoff and full jitter inside a total deadline;
 * only reads and requests that carry a precondition. */
#define GCS_RETRY_TOTAL_MS     10000 /* all tries of one call */
#define GCS_RETRY_TOTAL_MIN_MS 100   /* gcs_settings.retry_total_ms range */
#define GCS_RETRY_TOTAL_MAX_MS 120000
#define GCS_BACKOFF_INITIAL_MS 100  /* first backoff cap */
#define GCS_BACKOFF_MAX_MS     2000 /* largest backoff cap */
#define GCS_TRY_TIMEOUT_MS     5000 /* one try */
#define GCS_TRY_MIN_MS         200  /* no retry with less time left */

typedef struct gcs_retry_policy {
	int total_ms;
	int initial_ms;
	int max_ms;
	int try_timeout_ms;
} gcs_retry_policy;

/* The settings of the gs:// store that the configuration gives
 * (server/config.c: --gcs-endpoint, --gcs-ca-file, --gcs-retry-total-ms
 * and their LOCKGATE_GCS_* variables), and the file:// store's one.  gcs_configure: for the whole
 * process, before the first gs:// store or HTTP handle is made; the
 * strings are borrowed and must outlive every store.  Unset, each takes
 * its default. */
typedef struct gcs_settings {
	const char *endpoint; /* JSON API endpoint, auth kept; NULL:
				 GCS_DEFAULT_ENDPOINT */
	const char *ca_file;  /* certificates to trust for https; NULL: the
				 system's */
	int retry_total_ms;   /* all tries of one call,
				 GCS_RETRY_TOTAL_MIN_MS..MAX_MS; 0:
				 GCS_RETRY_TOTAL_MS */
	/* file:// (--file-no-prealloc): a new log is its header alone, not
	 * FILE_WAL_PREZERO bytes of zeros, and no spare files are made for
	 * new names (store_file.c).  For a tmpfs, where neither saves any
	 * time; also the fuzz harness's, which opens a store per input. */
	bool file_no_prealloc;
} gcs_settings;
void gcs_configure(const gcs_settings *s);
/* The settings gcs_configure last set (all unset before). */
const gcs_settings *gcs_settings_get(void);

/* Replace the retry policy of a gs:// store S (tests shorten it).  S must
 * come from gcs_gs_new; values < 1 keep the current one. */
void gcs_gs_set_retry(gcs_store *s, const gcs_retry_policy *p);

/* The endpoint a gs:// store talks to (borrowed), and whether it sends
 * credentials (0 for STORAGE_EMULATOR_HOST). */
const char *gcs_gs_endpoint(const gcs_store *s);
int gcs_gs_authenticated(const gcs_store *s);

#endif
