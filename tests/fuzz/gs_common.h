/*
 * gs_common.h: the gs:// client (gcs/gcs_client.c) talking to the
 * fuzzer instead of Cloud Storage.  The harness binaries are linked with
 * -Wl,--wrap=gcs_http_perform, so every request the real client makes is
 * answered here with the status, Date and body the input chose; the
 * client's own retry, classification and parsing code runs unchanged.
 * They are linked with -Wl,--wrap=rt_sleep too: a retry's pause (up to
 * the policy's 1 ms) is checked, not slept; sleeping it held gs_error
 * near 3,000 inputs/s, most of them idle.
 *
 * Input: byte 0 picks the operation (harness-specific), byte 1 the
 * status (and the status of a retry, which is never retried again: the
 * retry policy is shortened to a few ms), bytes 2..9 the Date (ms since the epoch, any int64), the rest
 * is the body.
 */
#ifndef LOCKGATE_FUZZ_GS_COMMON_H
#define LOCKGATE_FUZZ_GS_COMMON_H

#include <jansson.h>

#include "api/api.h"
#include "api/lease.h"
#include "gcs/gcs.h"
#include "gcs/gcs_client.h"
#include "gcs/gcs_http.h"

#include "fuzz.h"

int __wrap_gcs_http_perform(gcs_http *c, const char *method, const char *url,
    struct curl_slist *hdrs, const char *body, size_t body_len, long timeout_ms,
    gcs_resp *resp, char *errbuf, size_t errlen);
void __wrap_rt_sleep(int64_t ms);

#define GS_PAUSE_MAX_MS 1 /* the policy's backoff cap, LLVMFuzzerInitialize */

static struct {
	long status;
	long later; /* the status of every retry: never a retryable one */
	int64_t date_ms;
	const uint8_t *body;
	size_t len;
	int calls;
} gs_answer;

int
__wrap_gcs_http_perform(gcs_http *c, const char *method, const char *url,
    struct curl_slist *hdrs, const char *body, size_t body_len, long timeout_ms,
    gcs_resp *resp, char *errbuf, size_t errlen)
{
	(void)c;
	(void)method;
	(void)url;
	(void)hdrs;
	(void)body;
	(void)body_len;
	(void)timeout_ms;
	memset(resp, 0, sizeof(*resp));
	gs_answer.calls++;
	if (gs_answer.calls == 1 && gs_answer.status == 0) {
		snprintf(errbuf, errlen, "connection reset (fuzz)");
		return -1;
	}
	resp->status = gs_answer.calls > 1 ? gs_answer.later : gs_answer.status;
	resp->date_ms = gs_answer.date_ms;
	resp->sends = 1;
	if (gs_answer.len > 0) {
		resp->body = fuzz_str(gs_answer.body, gs_answer.len);
		resp->len = gs_answer.len;
	}
	return 0;
}

/* A retry's pause: within the policy, and not slept. */
void
__wrap_rt_sleep(int64_t ms)
{
	FUZZ_CHECK(ms >= 0 && ms <= GS_PAUSE_MAX_MS);
}

static gcs_store *gs_store;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	gcs_retry_policy fast = { 4, 1, GS_PAUSE_MAX_MS, 1 };
	gcs_err err;

	(void)argc;
	(void)argv;
	setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:9", 1);
	gs_store = gcs_gs_new("fuzz-bucket", "locks/", &err);
	if (gs_store == NULL) {
		fprintf(stderr, "gs: %s\n", err.msg);
		exit(1);
	}
	gcs_gs_set_retry(gs_store, &fast); /* a 503 costs no sleep */
	return 0;
}

/* Take the status, Date and body from IN; returns the op byte. */
static inline uint8_t
gs_take(fuzz_in *in)
{
	static const long statuses[] = { 200, 200, 200, 200, 204, 201, 400, 401,
		403, 404, 409, 412, 302, 304, 206, 429, 500, 503, 0 };
	uint8_t op = fuzz_u8(in), st = fuzz_u8(in);

	gs_answer.status =
	    statuses[st % (sizeof(statuses) / sizeof(statuses[0]))];
	/* A retry (after 429, 5xx or no answer) gets one of the first 15. */
	gs_answer.later = statuses[(st >> 4) % 15];
	gs_answer.date_ms = (int64_t)fuzz_u64(in);
	gs_answer.body = in->p;
	gs_answer.len = in->n;
	gs_answer.calls = 0;
	return op;
}

/* What the service does with an object it got from the store: it must be
 * a lease any caller can be shown. */
static inline void
gs_object_ok(const char *name, const gcs_object *o)
{
	api_lock l;
	json_t *j;

	FUZZ_CHECK(o->generation >= 1 && o->generation <= GCS_GEN_MAX);
	FUZZ_CHECK(o->metageneration >= 1 && o->metageneration <= GCS_GEN_MAX);
	FUZZ_CHECK(json_is_object(o->metadata));
	(void)lease_expired(o);
	lease_read(name, o, true, &l);
	j = api_lock_json(&l, true);
	FUZZ_CHECK(j != NULL);
	json_decref(j);
	api_lock_clear(&l);
}

/* A failed call says why, as a NUL-terminated printable message. */
static inline void
gs_err_ok(int rc, const gcs_err *err)
{
	FUZZ_CHECK(rc != GCS_OK && rc == (int)err->status);
	FUZZ_CHECK(memchr(err->msg, '\0', sizeof(err->msg)) != NULL);
}

#endif
