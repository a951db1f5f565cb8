/*
 * gcs.h: the object-store contract that every lock store implements.
 *
 * A lock is one object.  It exists only while the lock is held; its body is
 * empty and its custom metadata (a flat string->string map) holds the lease.
 * Every write carries a precondition, so every write is safe to retry and no
 * write can clobber another caller's lease.  The contract is the subset of
 * the Google Cloud Storage JSON API that the lock algorithm needs:
 *
 *   insert  create NAME only if no live object exists (ifGenerationMatch=0)
 *   get     read NAME's metadata, with the store's current time
 *   patch   merge metadata into NAME if generation AND metageneration match
 *   remove  delete NAME if generation AND metageneration match
 *   list    page through the objects whose names start with a prefix
 *
 * Names given to a store are lock names already validated by the caller
 * (api_name_valid), or a lock name, '#' and a lease_id (a lease of a
 * semaphore or shared lock: '#' is no lock-name character and sorts below
 * all of them, so a lock's objects are contiguous in a listing); a store
 * adds its own prefix.  The store knows nothing of
 * callers, JWTs or HTTP.
 *
 * Ownership: a gcs_object filled by a store owns its metadata reference;
 * release it with gcs_object_clear().  The metadata object may be shared
 * with the store (mem:// and file:// hand out references to the states
 * they keep): treat it as read-only.  Metadata passed *to* a store is
 * borrowed.  A gcs_page owns its entries; release it with gcs_page_clear().
 */
#ifndef LOCKGATE_GCS_H
#define LOCKGATE_GCS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Limits of the store layer. */
/* Bytes of an object name (without the store's prefix): a lock name
 * (256), or a group lease's "NAME#LEASE_ID" (256 + 1 + 64). */
#define GCS_NAME_MAX       321
#define GCS_PREFIX_MAX     512  /* bytes of a store's own prefix */
#define GCS_META_BYTES_MAX 8192 /* GCS caps custom metadata at 8 KiB */
#define GCS_LIST_PAGE_MAX  1000 /* GCS caps a list page at 1000 */
#define GCS_PAGE_TOKEN_MAX 1024 /* bytes of an opaque page token */
#define GCS_ERRMSG_MAX     256
#define GCS_DETAIL_MAX     512 /* an error's detail: a message, why, where */
/* The largest generation or metageneration taken from an answer: far
 * above any real one, and one more is still an int64. */
#define GCS_GEN_MAX        (INT64_MAX / 2)

/* Outcome of a store call.  Classified by HTTP status for GCS, never by
 * message text. */
typedef enum gcs_status {
	GCS_OK = 0,
	GCS_NOT_FOUND,    /* 404: no live object */
	GCS_PRECONDITION, /* 412: a precondition did not hold */
	GCS_BUSY,         /* 429 that outlived the retries: try later */
	GCS_UNAVAILABLE,  /* 5xx, transport error, token source down */
	GCS_DENIED,       /* 401/403: credentials refused */
	GCS_INVALID,      /* 400 or a bad argument: a bug on our side */
	GCS_NOMEM,        /* allocation failed */
} gcs_status;

/* Error detail, written by the store into a caller-owned struct.  MSG
 * reaches the 503 answers of every caller of a lock: it never contains a
 * credential, a lease_id (gcs_name_shown), a host path or the system's
 * error text.  DETAIL, when a store has more to say than a caller may
 * learn (file:// names its directory and errno's text), is the whole
 * account for the operator's log; "" when MSG is the whole story.  Read
 * the operator's version with gcs_err_detail(). */
typedef struct gcs_err {
	gcs_status status;
	int http_status; /* last HTTP status seen, 0 when none */
	int attempts;    /* times the request may have reached the store,
			    retries and libcurl's silent resends included
			    (0 when it never left): >1 means an answer may
			    be the echo of an earlier send */
	char msg[GCS_ERRMSG_MAX];
	char detail[GCS_DETAIL_MAX];
} gcs_err;

/*
 * now_ms when the store cannot tell its own time (a gs:// answer that
 * carried no usable Date).  Expiry is judged on the store's clock only,
 * never the caller's (design §1), so with GCS_NOW_UNKNOWN the caller
 * must not judge expiry at all: it treats every lease it reads as live
 * (never takes one over, never reports one expired or overdue) and
 * computes no time from now_ms (no Retry-After, no "expires in").
 * Negative, so that "updated + ttl < now_ms" is never true.  mem:// and
 * file:// always know their time.
 */
#define GCS_NOW_UNKNOWN (-1)

/* One object as the store sees it.  Times are milliseconds since the epoch
 * on the STORE's clock, never the caller's. */
typedef struct gcs_object {
	int64_t generation;     /* unique per created object; fencing token */
	int64_t metageneration; /* 1 at creation, +1 per patch */
	int64_t created_ms;     /* timeCreated */
	int64_t updated_ms;     /* time of the last write (create or patch) */
	int64_t now_ms;         /* the store's current time for this answer,
				   or GCS_NOW_UNKNOWN */
	json_t *metadata;       /* owned: object of string values, never NULL
				   after a successful call */
} gcs_object;

typedef struct gcs_entry {
	char *name;     /* owned: lock name, without the store prefix */
	gcs_object obj; /* obj.now_ms is the page's now_ms */
} gcs_entry;

typedef struct gcs_page {
	gcs_entry *items; /* owned array of n entries */
	size_t n;
	char *next_token; /* owned; NULL on the last page */
	int64_t now_ms;   /* the store's time, or GCS_NOW_UNKNOWN */
} gcs_page;

typedef struct gcs_store gcs_store;

/* The contract as a table of functions.  Every slot returns a gcs_status
 * (0 = GCS_OK) and, on failure, fills *err.  `out` is only filled on
 * GCS_OK; the caller clears it. */
typedef struct gcs_store_ops {
	const char *scheme; /* "mem", "file", "gs" */
	/* Create NAME with METADATA if no live object exists.  Fills out with
	 * the new object (metageneration 1).  GCS_PRECONDITION when it exists. */
	int (*insert)(gcs_store *s, const char *name, const json_t *metadata,
	    gcs_object *out, gcs_err *err);
	/* Read NAME.  out->now_ms is the store's clock (GCS_NOW_UNKNOWN
	 * when it could not tell).  GCS_NOT_FOUND when absent. */
	int (*get)(gcs_store *s, const char *name, gcs_object *out,
	    gcs_err *err);
	/* Merge METADATA into NAME (a JSON null value deletes a key) if the
	 * live object has generation GEN and metageneration METAGEN; bumps
	 * metageneration and updated.  GCS_PRECONDITION or GCS_NOT_FOUND. */
	int (*patch)(gcs_store *s, const char *name, int64_t gen,
	    int64_t metagen, const json_t *metadata, gcs_object *out,
	    gcs_err *err);
	/* Delete NAME if it has generation GEN and metageneration METAGEN.
	 * GCS_PRECONDITION or GCS_NOT_FOUND (see err->attempts: a 404 after
	 * a retried delete usually means the first attempt succeeded). */
	int (*remove)(gcs_store *s, const char *name, int64_t gen,
	    int64_t metagen, gcs_err *err);
	/* List up to MAX (1..GCS_LIST_PAGE_MAX) objects whose names start
	 * with PREFIX, in name order, continuing after PAGE_TOKEN (a token
	 * an earlier page handed out) or else after the name AFTER (both
	 * NULL for the first page).  A page may be shorter than MAX while
	 * more follow; next_token says so. */
	int (*list)(gcs_store *s, const char *prefix, int max,
	    const char *page_token, const char *after, gcs_page *out,
	    gcs_err *err);
	/* Readiness: the store answers with the configured credentials. */
	int (*check)(gcs_store *s, gcs_err *err);
	/* Free the store and everything it owns. */
	void (*free)(gcs_store *s);
} gcs_store_ops;

/* Every store embeds this as its first member. */
struct gcs_store {
	const gcs_store_ops *ops;
};

/* Dispatchers: validate arguments, zero `out` and `err`, call the slot. */
int gcs_insert(gcs_store *s, const char *name, const json_t *metadata,
    gcs_object *out, gcs_err *err);
int gcs_get(gcs_store *s, const char *name, gcs_object *out, gcs_err *err);
int gcs_patch(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    const json_t *metadata, gcs_object *out, gcs_err *err);
int gcs_remove(gcs_store *s, const char *name, int64_t gen, int64_t metagen,
    gcs_err *err);
int gcs_list(gcs_store *s, const char *prefix, int max, const char *page_token,
    gcs_page *out, gcs_err *err);
/* The same, starting after the object named AFTER (which need not exist):
 * where a caller who saw a name goes on from, without a store's token. */
int gcs_list_after(gcs_store *s, const char *prefix, int max, const char *after,
    gcs_page *out, gcs_err *err);
int gcs_check(gcs_store *s, gcs_err *err);
/* Whether S referees locks as Cloud Storage does (refuses the writes
 * whose preconditions fail, keeps a patched object's generation and moves
 * its metageneration by one), asked on an object of its own (referee.c):
 * GCS_REFEREE_OK; GCS_REFEREE_CANNOT, *err saying which write went
 * wrong and how; GCS_REFEREE_UNKNOWN when a call failed otherwise, *err
 * saying which and why. */
typedef enum gcs_referee {
	GCS_REFEREE_OK,
	GCS_REFEREE_CANNOT,
	GCS_REFEREE_UNKNOWN,
} gcs_referee;
gcs_referee gcs_referee_check(gcs_store *s, gcs_err *err);
void gcs_store_free(gcs_store *s);

void gcs_object_clear(gcs_object *o);
void gcs_page_clear(gcs_page *p);
/* Copy SRC into DST, taking a new reference to the metadata. */
void gcs_object_copy(gcs_object *dst, const gcs_object *src);

/* Metadata the way GCS applies it.  gcs_meta_new: a copy of META without
 * its null values (a new object's metadata); new reference, NULL on
 * allocation failure.  gcs_meta_patched: BASE with PATCH merged in (a null
 * value deletes a key); new reference, NULL on allocation failure.  The
 * result is a new object, but its string values are shared with META,
 * BASE and PATCH: a json string is never changed once made. */
json_t *gcs_meta_new(const json_t *meta);
json_t *gcs_meta_patched(const json_t *base, const json_t *patch);

/* Set err (if not NULL; its detail emptied) and return STATUS.
 * printf-style message. */
int gcs_fail(gcs_err *err, gcs_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* What the operator's log says of ERR: its detail, else its msg
 * (borrowed from ERR). */
const char *gcs_err_detail(const gcs_err *err);
/* The object NAME as a message may show it, in BUF (BUFSZ bytes, cut to
 * fit; GCS_NAME_SHOWN_BUF holds any name); returns BUF.  A group lease's
 * object "LOCK#LEASE_ID" is shown as "LOCK#…": a store's messages reach
 * the log and the 503 answers of every caller of the lock, and a lease_id
 * reaches no one but its holder (design §2).  Every message that names
 * an object names it through this. */
#define GCS_NAME_SHOWN_BUF (GCS_NAME_MAX + sizeof("…"))
const char *gcs_name_shown(const char *name, char *buf, size_t bufsz);
const char *gcs_status_str(gcs_status st);

/* The store's clock: milliseconds since the epoch.  Tests replace it. */
typedef int64_t (*gcs_clock_fn)(void *ctx);
int64_t gcs_clock_real(void *ctx);

/* Process-wide counters of the store layer, read by the metrics module.
 * Stores bump them with gcs_stat_*(); all are atomic. */
typedef struct gcs_stats {
	uint64_t retries;        /* store requests retried */
	uint64_t token_fetches;  /* access tokens fetched successfully */
	uint64_t token_failures; /* token fetches that failed */
} gcs_stats;
void gcs_stats_get(gcs_stats *out);
void gcs_stat_retry(void);
void gcs_stat_token_fetch(int ok);

/* Shutdown: from now on every store call stops retrying by MONO_MS
 * (CLOCK_MONOTONIC, milliseconds), a try in flight is cut off then, and a
 * call begun after it fails at once with GCS_UNAVAILABLE.  0 lifts it.
 * Process-wide, like the counters.  Stores that wait on a network (gs://)
 * honour it; the local stores' calls are bounded by the disk. */
void gcs_give_up_at(int64_t mono_ms);
/* The time set by gcs_give_up_at, 0 when none. */
int64_t gcs_give_up_time(void);
/* A task with a deadline of its own (a waiter's poll) bounds what it asks
 * of the storage with rt_task_deadline_set (rt/rt.h): gs:// calls honour
 * it like the time above. */

/* Open a store from a URL: "mem://", "file:///abs/dir", "file://rel/dir",
 * "gs://bucket/optional/prefix/".  NULL with *err filled on failure.
 * Free with gcs_store_free(). */
gcs_store *gcs_open(const char *url, gcs_err *err);

/* mem://: an in-memory store for tests and benchmarks.  CLOCK may be NULL
 * (real time).  Generations strictly increase per store. */
gcs_store *gcs_mem_new(gcs_clock_fn clock, void *clock_ctx);

/* file://DIR: the durable local store (store_file.c, file_*.c). */
gcs_store *gcs_file_new(const char *dir, gcs_err *err);

/* gs://BUCKET/PREFIX: the Cloud Storage JSON API client (gcs_client.c). */
gcs_store *gcs_gs_new(const char *bucket, const char *prefix, gcs_err *err);

#endif
