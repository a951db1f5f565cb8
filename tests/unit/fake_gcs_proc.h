/*
 * fake_gcs_proc.h: start and drive build/tools/fake_gcs from a unit test.
 * The fake runs on 127.0.0.1 and a free port; it is stopped by PID.
 */
#ifndef LOCKGATE_FAKE_GCS_PROC_H
#define LOCKGATE_FAKE_GCS_PROC_H

#include <sys/types.h>

#include <jansson.h>

#include "gcs/gcs.h"
#include "gcs/gcs_client.h"

#define FAKE_GCS_BIN      "build/tools/fake_gcs"
#define FAKE_GCS_START_MS 5000 /* wait for the port line at most this long */
#define FAKE_GCS_STOP_MS  3000 /* then SIGKILL */
#define FAKE_GCS_ARGS_MAX 16

typedef struct fake_gcs {
	pid_t pid;
	int port;
	char hostport[32]; /* "127.0.0.1:PORT" */
	char url[48];      /* "http://127.0.0.1:PORT" */
} fake_gcs;

/* Start the fake with extra ARGS (NULL-terminated, may be NULL).  0 on
 * success with *f filled; -1 (and nothing left running) on failure. */
int fake_gcs_start(fake_gcs *f, const char *const *args);
/* SIGTERM by PID, bounded wait, SIGKILL if needed.  Safe twice. */
void fake_gcs_stop(fake_gcs *f);
/* GET PATHQ ("/_fake/...?...") on the fake; the HTTP status, or -1.  With
 * OUT, *OUT is the body (caller frees). */
int fake_gcs_ctl(const fake_gcs *f, const char *pathq, char **out);
/* METHOD PATHQ on the fake with an optional extra header line HDR and BODY
 * (may be NULL).  The HTTP status (-1 on a transport error); with OUT,
 * *OUT is the body (caller frees); with DATE, *DATE is 1 when the answer
 * had a Date header. */
int fake_gcs_http(const fake_gcs *f, const char *method, const char *pathq,
    const char *hdr, const char *body, char **out, int *date);
/* GET PATH and parse it as JSON (new reference, NULL on failure). */
json_t *fake_gcs_json(const fake_gcs *f, const char *path);
/* Request count of operation OP ("insert", "get", ...) from /_fake/stats,
 * or a top-level counter ("writes", "connections", ...); -1 on failure. */
long fake_gcs_count(const fake_gcs *f, const char *op);
/* fake_gcs_start for a test group: on failure it also says on stderr
 * how to get the fake (make builds it).  0 or -1. */
int fake_gcs_start_group(fake_gcs *f, const char *const *args);
/* A gs:// store on F in emulator mode (STORAGE_EMULATOR_HOST set to F,
 * the gs:// settings unset) with retry policy P (NULL: the default).
 * NULL on failure; free with gcs_store_free. */
gcs_store *fake_gcs_store(const fake_gcs *f, const char *bucket,
    const char *prefix, const gcs_retry_policy *p);

#endif
