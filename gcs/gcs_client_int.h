/*
 * gcs_client_int.h: internal to the gs:// store (gcs_client.c: the
 * operations and the store; gcs_call.c: one request with its retries, and
 * the strings and answers it is made of; gcs_list.c: list pages).
 */
#ifndef LOCKGATE_GCS_CLIENT_INT_H
#define LOCKGATE_GCS_CLIENT_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gcs.h"
#include "gcs_client.h"
#include "gcs_http.h"
#include "gcs_token.h"

#define OBJ_FIELDS    "name,generation,metageneration,timeCreated,updated,metadata"
#define LIST_FIELDS   "items(" OBJ_FIELDS "),nextPageToken"
/* An insert answer is read for these only (answer_inserted). */
#define INSERT_FIELDS "generation,metageneration,timeCreated,updated"
#define BOUNDARY_HEX  16 /* random bytes of a multipart boundary */
#define AUTH_HDR_MAX  (GCS_TOKEN_MAX + 32)
#define GCS_OBJ_HEAD_MAX \
	(GCS_ENDPOINT_MAX + GCS_BUCKET_NAME_MAX + 3 * GCS_PREFIX_MAX + 160)

typedef struct gs_store {
	gcs_store base;
	char bucket[GCS_BUCKET_NAME_MAX + 1];
	char prefix[GCS_PREFIX_MAX + 1];
	size_t plen;
	char endpoint[GCS_ENDPOINT_MAX];
	/* The constant heads of the requests' URLs, made once (url_heads):
	 * ENDPOINT/storage/v1/b/BUCKET/o, that and /ENC(prefix), and the
	 * whole insert URL. */
	char objs_url[GCS_OBJ_HEAD_MAX];
	char obj_head[GCS_OBJ_HEAD_MAX];
	char insert_url[GCS_OBJ_HEAD_MAX];
	gcs_token_src *tok; /* NULL: no auth (emulator) */
	gcs_retry_policy policy;
	pthread_mutex_t pool_mu;
	gcs_http *pool[GCS_POOL_MAX]; /* idle handles, most recent last */
	int npool;
} gs_store;

/* One request, before retries. */
typedef struct gs_req {
	const char *op; /* for messages: "insert", "get", ... */
	const char *method;
	const char *url;
	const char *ctype; /* Content-Type of BODY, or NULL */
	const char *body;
	size_t body_len;
	const char *name; /* lock name for messages, or NULL */
	/* A 404 names no object (insert, list): only the bucket can be
	 * missing. */
	int no_object;
	int large_answer; /* a list page: GCS_HTTP_BUF_LARGE */
	int *too_big;     /* set to 1 when a 2xx answer passed GCS_RESP_MAX */
} gs_req;

/* A string being built: in a buffer of the caller's (FIXED: an append that
 * does not fit fails) or in one that grows.  Appends never fail loudly:
 * FAILED is remembered (too long, or out of memory) and the string stays
 * as it was. */
typedef struct gs_buf {
	char *p;
	size_t len, cap;
	int failed;
	int fixed;
} gs_buf;

/* gcs_call.c */
/* Any 2xx: see its comment. */
int gs_success(long status);
/* A fast per-thread pseudo-random number (multipart boundaries, jitter). */
uint64_t gs_rand64(void);
/* Strings built without printf (see gs_buf). */
void gs_buf_fixed(gs_buf *b, char *p, size_t cap);
int gs_buf_room(gs_buf *b, size_t n);
void gs_buf_add(gs_buf *b, const char *s, size_t n);
void gs_buf_str(gs_buf *b, const char *s);
void gs_buf_u64(gs_buf *b, uint64_t v);
void gs_buf_enc(gs_buf *b, const char *s);
/* DST = A + B when it fits DSTSZ: 0, else -1. */
int gs_str_join(char *dst, size_t dstsz, const char *a, const char *b);
/* The URL of object NAME, and its generation preconditions. */
void gs_object_url(const gs_store *g, gs_buf *u, const char *name);
void gs_buf_match(gs_buf *u, int64_t gen, int64_t metagen);
/* Generations and objects read from an answer. */
int gs_gen_of_text(const char *s, int64_t *out);
int gs_parse_gen(const json_t *v, int64_t *out);
int gs_parse_object(const json_t *j, int64_t now_ms, gcs_object *out);
/* Run REQ with retries inside the store's policy (see its comment). */
int gs_call(gs_store *g, const gs_req *req, gcs_resp *resp, gcs_err *err);
/* The storage's clock from R's Date header, and an object answer. */
int64_t gs_now_of(const gcs_resp *r);
int gs_answer_object(const gcs_resp *r, const char *op, gcs_object *out,
    gcs_err *err);

/* gcs_list.c */
int gs_list_url(const gs_store *g, char *url, size_t urlsz, const char *prefix,
    int max, const char *token, const char *after, const char *fields);
int gs_list(gcs_store *s, const char *prefix, int max, const char *page_token,
    const char *after, gcs_page *out, gcs_err *err);

#endif
