/*
 * gcs_token.h: OAuth access tokens for the Cloud Storage client.  The only
 * place in lockgate that holds Google credentials.  Internal to gcs/.
 *
 * Sources, in the usual order of the Google client libraries (the caller
 * has already handled STORAGE_EMULATOR_HOST, which means no auth at all):
 *   1. GOOGLE_APPLICATION_CREDENTIALS: a service-account JSON key; an RS256
 *      assertion signed with its private_key is exchanged at its token_uri.
 *   2. the metadata server (Cloud Run, GCE), host from GCE_METADATA_HOST or
 *      metadata.google.internal, with the header Metadata-Flavor: Google.
 * A token is cached and refreshed ahead of its expires_in by one thread at
 * a time; callers never wait past their own deadline.
 */
#ifndef LOCKGATE_GCS_TOKEN_H
#define LOCKGATE_GCS_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "gcs.h"

#define GCS_TOKEN_MAX              4096   /* bytes of an access token */
#define GCS_TOKEN_EARLY_MS         300000 /* refresh this long before expiry... */
#define GCS_TOKEN_EARLY_DIV        5 /* ...or 1/5 of the lifetime if shorter */
#define GCS_TOKEN_FETCH_TIMEOUT_MS 5000 /* one token request */
#define GCS_TOKEN_FAIL_HOLD_MS     1000 /* after a failed fetch, fail fast */
/* While the token in hand is still valid (the early-refresh window), a
 * refresh waits at most this long for the token source, the request that
 * makes it then going on with the old token, and after a failed one the
 * next try comes this much later: a failing or hanging token endpoint
 * neither delays requests nor is asked on every one. */
#define GCS_TOKEN_EARLY_FETCH_MS   1000
#define GCS_TOKEN_EARLY_RETRY_MS   10000
#define GCS_TOKEN_LIFE_MAX_S       86400 /* expires_in past this is cut to it */
#define GCS_SA_KEY_FILE_MAX        65536 /* bytes of a service-account key file */
#define GCS_SA_ASSERTION_TTL_S     3600 /* exp - iat of the assertion (max 1 h) */
#define GCS_TOKEN_SCOPE            "https://www.googleapis.com/auth/devstorage.read_write"
#define GCS_DEFAULT_TOKEN_URI      "https://oauth2.googleapis.com/token"
#define GCS_DEFAULT_METADATA_HOST  "metadata.google.internal"

typedef struct gcs_token_src gcs_token_src;

/* A token source chosen from the environment.  The service-account key is
 * read and checked now (then wiped) and again at each refresh.  NULL with
 * *err filled (GCS_INVALID for a bad key file).  Free with
 * gcs_token_src_free(). */
gcs_token_src *gcs_token_src_new(gcs_err *err);

/* Copy a valid access token into OUT (OUTSZ bytes; the caller wipes it after
 * use) and its serial number into *SERIAL.  Fetches one when none is cached
 * or it is due for refresh, waiting for another thread's fetch at most until
 * DEADLINE_MS (util_mono_ms clock).  GCS_OK, or GCS_UNAVAILABLE with a
 * message naming the source. */
int gcs_token_get(gcs_token_src *t, int64_t deadline_ms, char *out,
    size_t outsz, uint64_t *serial, gcs_err *err);

/* The storage refused the token numbered SERIAL (a 401: revoked, or expired
 * early): forget it, so the next call fetches anew.  A newer token, which
 * another thread fetched after its own 401, is kept. */
void gcs_token_invalidate(gcs_token_src *t, uint64_t serial);

/* "service_account" or "metadata_server"; borrowed. */
const char *gcs_token_src_kind(const gcs_token_src *t);

/* Wipe and free everything.  NULL is fine. */
void gcs_token_src_free(gcs_token_src *t);

#endif
