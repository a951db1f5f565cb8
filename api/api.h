/*
 * api.h: the lock service over typed, validated requests.
 *
 * Nothing here knows HTTP.  The server turns each request into one of the
 * structs below (names validated with api_name_valid, numbers bounded) and
 * calls the matching function; the answer is an api_lock, or an api_err
 * whose code maps to one HTTP status and one API error code.
 *
 * The algorithm is design.md section 1: insert-if-absent, expiry judged on
 * the store's clock, both preconditions on every conditional write, bounded
 * loops.  Waiting is not done here: api_acquire makes one attempt and the
 * server's waiter queue (server/wait.c) calls it again.
 */
#ifndef LOCKGATE_API_H
#define LOCKGATE_API_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "gcs/gcs.h"

/* Every limit of the API, in one place. */
#define API_NAME_MAX          256
#define API_OWNER_MAX         256
#define API_HOLDER_MAX        512
#define API_PURPOSE_MAX       1024
#define API_REASON_MAX        256 /* a force release's reason */
#define API_LEASE_ID_MIN      8
#define API_LEASE_ID_MAX      64
#define API_LEASE_ID_NEW      32  /* hex digits of a lease_id made here */
#define API_RANDOM_BATCH      256 /* bytes per getrandom: never cut short */
#define API_LABELS_MAX        16
#define API_LABEL_KEY_MAX     63
#define API_LABEL_VALUE_MAX   128
#define API_LABELS_BYTES_MAX  2048 /* labels as stored JSON */
/* A lease as stored metadata (api_acquire_check): the store's cap. */
#define API_META_BYTES_MAX    GCS_META_BYTES_MAX
#define API_CLAIMS_BYTES_MAX  1024 /* display claims stored on a lease */
#define API_TTL_MIN           2
#define API_TTL_MAX           86400
#define API_TTL_DEFAULT       300
#define API_WAIT_MAX_DEFAULT  290 /* under Cloud Run's 300 s timeout */
#define API_EXPECTED_MAX      (30 * 86400)
#define API_PAGE_SIZE_DEFAULT 100
#define API_PAGE_SIZE_MAX     1000
/* Store pages one list request reads at most, looking for locks its caller
 * may see (only a policy hides any): past that, the request ends early
 * with the page it has, or fails when it has seen none at all. */
#define API_LIST_SCAN_PAGES   20
#define API_ACQUIRE_LOOPS     6     /* insert/read/takeover rounds */
#define API_WRITE_LOOPS       4     /* refresh/release re-read rounds */
#define API_EXPIRY_MARGIN_MS  1000  /* store time resolution */
#define API_REFRESH_DIVISOR   8     /* refresh_interval = ttl / 8, >= 1 s */
#define API_LEASE_CACHE_MAX   65536 /* leases remembered by this instance */
#define API_LIMIT_MAX         1000  /* leases a counted semaphore allows */
/* A group's objects read at most per listing (leases of one name): past
 * that the lock is treated as full (API_LOCKED), never as free. */
#define API_GROUP_SCAN_PAGES  4

/* How a lease shares its lock (design section 2): an exclusive lease
 * (limit 1: today's lock; limit > 1: one of a counted semaphore's
 * leases), or a shared (read) lease, any number of which may hold the
 * lock together but none alongside an exclusive lease. */
typedef enum api_mode {
	API_MODE_EXCLUSIVE = 0,
	API_MODE_SHARED,
} api_mode;

typedef enum api_code {
	API_OK = 0,
	API_BAD_REQUEST,     /* 400 bad_request (or a more precise code) */
	API_UNAUTHORIZED,    /* 401 */
	API_FORBIDDEN,       /* 403 */
	API_NOT_HELD,        /* 404 not_held */
	API_LEASE_NOT_FOUND, /* 404 lease_not_found */
	API_LOCKED,          /* 409 locked (Retry-After) */
	API_LEASE_LOST,      /* 409 lease_lost */
	API_TOO_LARGE,       /* 413 */
	API_NOT_FOUND,       /* 404 not_found: no such route */
	API_METHOD,          /* 405 method_not_allowed */
	API_TOO_MANY,        /* 429 too_many_requests (Retry-After) */
	API_BUSY,            /* 503 storage_busy (Retry-After): store 429 */
	API_UNAVAILABLE,     /* 503 storage_unavailable (Retry-After) */
	API_SHUTTING_DOWN,   /* 503 shutting_down (Retry-After) */
	API_INTERNAL,        /* 500: a bug or out of memory, never input */
} api_code;

typedef struct api_err {
	api_code code;
	const char *reason; /* snake_case API code; NULL = default of code */
	int retry_after;    /* seconds, for 409 and 503 */
	char message[256];  /* a sentence a person can act on */
	/* For the operator's log only, in place of MESSAGE: the store's whole
	 * account of its failure (gcs_err's detail: a host path, the
	 * system's error), which no caller may read; "" when MESSAGE says
	 * it all.  Read it with api_err_detail(). */
	char detail[GCS_DETAIL_MAX];
} api_err;

/* A lock as the service sees it.  Owns labels and claims (may be NULL). */
typedef struct api_lock {
	char name[API_NAME_MAX + 1];
	char owner[API_OWNER_MAX + 1];
	char holder[API_HOLDER_MAX + 1];
	char purpose[API_PURPOSE_MAX + 1];
	char lease_id[API_LEASE_ID_MAX + 1]; /* only for the lease holder */
	json_t *labels;                      /* object of strings, or NULL */
	json_t *claims;         /* display claims of the owner, or NULL */
	int64_t fencing_token;  /* the object's generation */
	int64_t acquired_at_ms; /* store clock */
	int64_t refreshed_at_ms;
	int64_t expires_at_ms;
	int64_t now_ms; /* the store's time of this answer */
	int ttl;
	int expected_duration; /* 0 = not given */
	int refresh_interval;
	/* Whole seconds the lease has left at the store's time of this
	 * answer (the ttl when the answer carried no store time): what a
	 * holder may count on from when it sent its request. */
	int expires_in;
	bool overdue;
	bool expired; /* past its TTL, awaiting takeover */
	api_mode mode;
	int limit; /* leases the lock allows at once; 1 for exclusive and
		      for shared (where it is shown as null) */
	/* Every valid lease of the lock as JSON holder objects (never a
	 * lease_id), owned; NULL: the one lease above is the only one. */
	json_t *holders;
	/* The store's version of the object this was read from (0: not
	 * known).  Never shown: what a give-back of a grant nobody was told
	 * of is conditioned on (api_lease_req). */
	int64_t object_generation, object_metageneration;
} api_lock;

typedef struct api_acquire_req {
	char name[API_NAME_MAX + 1];
	char owner[API_OWNER_MAX + 1];
	char holder[API_HOLDER_MAX + 1];
	char purpose[API_PURPOSE_MAX + 1];
	/* The client's idempotency key (its "lease_id" parameter), or "":
	 * a request with the key of a live lease of the same owner gets
	 * that lease back, renewed, instead of a second one. */
	char key[API_LEASE_ID_MAX + 1];
	/* The lease_id a grant of this request gets: made here, never by
	 * the client, by api_acquire_prepare, so that every attempt of one
	 * request writes the same one and no two grants ever share one. */
	char lease_id[API_LEASE_ID_MAX + 1];
	json_t *labels; /* borrowed, validated; NULL for none */
	json_t *claims; /* borrowed; NULL for none */
	int ttl;
	int wait; /* the server's business; api ignores it */
	int expected_duration;
	/* API_MODE_EXCLUSIVE with limit 1 is today's lock (one object, the
	 * default path); limit 2..API_LIMIT_MAX is a counted semaphore;
	 * API_MODE_SHARED takes limit 1.  Zero-initialised = exclusive,
	 * limit 0, which is read as 1. */
	api_mode mode;
	int limit;
} api_acquire_req;

typedef struct api_lease_req {
	char name[API_NAME_MAX + 1];
	char owner[API_OWNER_MAX + 1];
	char lease_id[API_LEASE_ID_MAX + 1];
	int ttl;    /* refresh: 0 = keep */
	bool admin; /* may act on another owner's lease */
	/* Release: when not 0, only the lease's object at this generation
	 * and metageneration, an exclusive lease's (a grant nobody was told
	 * of, given back: not once another request with the client's key
	 * renewed it to hand it out). */
	int64_t generation, metageneration;
} api_lease_req;

typedef struct api_list_req {
	char prefix[API_NAME_MAX + 1];
	/* The last name of the previous page (next_page_token), or "". */
	char page_token[API_NAME_MAX + 1];
	int page_size;
	bool include_expired;
	/* Whether the caller may see the lock NAME; NULL: every lock.  Locks
	 * it may not see are left out, and next_page_token never names one
	 * (it names the last lock of the page the caller may see). */
	bool (*visible)(void *ctx, const char *name);
	void *visible_ctx;
} api_list_req;

typedef struct api_list_res {
	api_lock *locks; /* owned array */
	size_t n;
	char *next_page_token; /* owned, NULL at the end */
	int64_t now_ms;        /* the store's time of this answer */
} api_list_res;

/* What happened, for the server's logs, metrics and event timeline. */
typedef enum api_event_kind {
	API_EV_GRANTED,
	API_EV_TAKEOVER, /* an expired lease was removed to grant */
	API_EV_REFRESHED,
	API_EV_RELEASED,
	API_EV_FORCED,
	API_EV_LOST, /* a refresh or release found the lease gone */
} api_event_kind;

typedef struct api_event {
	api_event_kind kind;
	const char *name;
	const char *owner; /* who the lease belongs (or belonged) to */
	const char *holder;
	const char *actor;  /* who asked */
	const char *reason; /* why an admin force-released; NULL otherwise */
	int64_t fencing_token;
	int64_t at_ms; /* store time; 0 when the answer carried none (a
	                * delete): the recorder's clock then */
} api_event;

typedef void (*api_event_fn)(void *ctx, const api_event *ev);

typedef struct api_service api_service;

/* A new service over STORE (borrowed; outlives the service).  ON_EVENT may
 * be NULL; it is called after each state change, from the calling thread,
 * with no lock of the service held.  Free with api_free(). */
api_service *api_new(gcs_store *store, api_event_fn on_event, void *ctx);
void api_free(api_service *svc);
gcs_store *api_store(api_service *svc);

/* 1 when NAME is a valid lock name (design section 2), else 0 with a
 * reason in WHY. */
int api_name_valid(const char *name, char *why, size_t whylen);
/* 1 when the N bytes at S are well-formed UTF-8 (RFC 3629: no overlong
 * form, no surrogate, nothing above U+10FFFF) holding no control character
 * (C0, DEL or C1; NUL included): the text of holder, purpose, label values
 * and owners. */
int api_text_clean(const char *s, size_t n);
/* Every byte of S that starts no well-formed UTF-8 sequence replaced by
 * '?', in place: a message that quotes a caller's text, cut to fit a
 * buffer in the middle of a character, is still text JSON can carry. */
void api_utf8_scrub(char *s);
/* The length (1..4) of the well-formed UTF-8 sequence S starts with (S
 * NUL-terminated), 0 when it starts none. */
size_t api_utf8_len(const char *s);
/* 1 when ID is a valid client lease_id / idempotency key. */
int api_lease_id_valid(const char *id);
/* 1 when LABELS is an object of at most API_LABELS_MAX short strings of
 * text without control characters (as holder and purpose). */
int api_labels_valid(const json_t *labels, char *why, size_t whylen);

/* The lease REQ would write, at the size its refreshes can grow it to,
 * must fit the store's metadata cap (API_META_BYTES_MAX, counted as the
 * stores count it).  API_OK, or API_BAD_REQUEST with reason
 * "metadata_too_large" in ERR: the caller's input, never the store's
 * fault, and the same answer on every store.  api_acquire checks this
 * itself before any store call; call it for a request that is to wait
 * before its first attempt. */
int api_acquire_check(const api_acquire_req *req, api_err *err);
/* Make REQ ready for its attempts, once, when it is parsed: give it a
 * new lease_id (a second call keeps it).  Every attempt of the request
 * (every waiter poll too) then writes that lease_id and looks for its
 * own lease by it (or by its client key), so an attempt whose insert was
 * applied but whose answer was lost is recognised by the next as its own
 * instead of waited behind until its TTL.  A lease_id is one grant: a
 * later request with the same client key that finds the lock free gets
 * a new one, so a refresh or release naming the old grant is refused
 * (API_LEASE_LOST) instead of acting on the new one. */
void api_acquire_prepare(api_acquire_req *req);
/* REQ asks for a lease of a semaphore or shared lock (api/group.c), not
 * today's exclusive lock. */
bool api_acquire_is_group(const api_acquire_req *req);
/* One attempt to take the lock for REQ, prepared by api_acquire_prepare
 * (an empty lease_id is API_INTERNAL).  API_OK fills OUT with the lease
 * (and its lease_id); a lease that was already REQ's own (same owner,
 * same client key or lease_id) is renewed first, with one conditional
 * write, so the answer never carries a lease about to expire.
 * API_LOCKED fills OUT with the current holder (no lease_id) and
 * err->retry_after.  OUT must be cleared with api_lock_clear(). */
int api_acquire(api_service *svc, const api_acquire_req *req, api_lock *out,
    api_err *err);
/* One read and no write, for a waiter deciding whether to attempt: the
 * lock is held by another live lease (API_LOCKED, OUT and ERR as
 * api_acquire), or an attempt is worth making (API_OK: the lock is free,
 * expired, or held by REQ's own lease, which api_acquire renews and
 * returns; OUT is left empty).  OUT must be cleared with
 * api_lock_clear(). */
int api_acquire_peek(api_service *svc, const api_acquire_req *req,
    api_lock *out, api_err *err);
/* Reads and no write, for a keyed REQ about to wait behind other
 * requests (the server's queue, or a writer it holds readers back for):
 * 1 when a live lease of REQ's own (its client key and owner, as
 * api_acquire recognises it) holds the lock, for api_acquire to renew
 * and return at once; 0 when none does, when REQ has no client key, or
 * when the store failed (the caller then goes on as without the look). */
int api_acquire_finds_own(api_service *svc, const api_acquire_req *req);
/* Extend a lease; req->ttl 0 keeps the ttl. */
int api_refresh(api_service *svc, const api_lease_req *req, api_lock *out,
    api_err *err);
/* End a lease.  API_OK means the lock is free of this lease. */
int api_release(api_service *svc, const api_lease_req *req, api_err *err);
/* Read the holder.  API_NOT_HELD when free or expired; an expired lock is
 * still returned in OUT (expired = true) for callers that want it. */
int
api_inspect(api_service *svc, const char *name, api_lock *out, api_err *err);
int api_list(api_service *svc, const api_list_req *req, api_list_res *out,
    api_err *err);
void api_list_res_clear(api_list_res *res);
/* Remove the lease that holds NAME: any lease when EXPECT_TOKEN is 0, else
 * only the one with that fencing token (API_LEASE_LOST, reason
 * "fencing_token_mismatch", when another holds it now: an admin acting
 * on a stale view never removes the next holder's lease).  ACTOR and
 * REASON (NULL or "" for none; borrowed) are recorded in the event. */
int api_force_release(api_service *svc, const char *name, const char *actor,
    const char *reason, int64_t expect_token, api_err *err);

void api_lock_clear(api_lock *lock);

/* The lock as JSON (design section 2); with_lease adds lease_id and
 * refresh_interval.  New reference, NULL on allocation failure. */
json_t *api_lock_json(const api_lock *lock, bool with_lease);

/* Milliseconds since the epoch as RFC 3339 UTC with milliseconds, into
 * BUF of at least 25 bytes; clamped to 1970 .. API_TIME_MAX_MS. */
#define API_TIME_MAX_MS INT64_C(253402300799999) /* 9999-12-31T23:59:59.999Z */
void api_time_str(int64_t ms, char *buf, size_t len);

/* SRC into DST of LEN bytes, cut short to fit (at a UTF-8 character
 * boundary: a character that does not fit whole is left out), always
 * NUL-terminated (the hot paths' snprintf "%s", without printf's cost). */
void api_copy(char *dst, size_t len, const char *src);
/* V in decimal into BUF of LEN bytes (at least 21); the length written. */
size_t api_fmt_int(char *buf, size_t len, int64_t v);

/* The HTTP status and default reason of a code. */
int api_code_status(api_code code);
const char *api_code_reason(api_code code);
/* Fill ERR (its detail emptied) and return CODE.  printf-style
 * message. */
int api_fail(api_err *err, api_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* What the server's log says of ERR: its detail, else its message
 * (borrowed from ERR).  An answer carries the message alone. */
const char *api_err_detail(const api_err *err);

#endif
