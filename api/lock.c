/*
 * lock.c: how a lease is written into an object's metadata and read back,
 * and how a lock is shown as JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "lease.h"

/* Two digits of V at P. */
static void
digits2(char *p, int v)
{
	p[0] = (char)('0' + v / 10);
	p[1] = (char)('0' + v % 10);
}

/*
 * On the hot path (every answer carries three times, every log line one):
 * formatted by hand.  The date comes from the day count by integer
 * arithmetic on the proleptic Gregorian calendar (400-year eras of
 * 146097 days, years counted from March so that the leap day comes last),
 * not from gmtime_r, which takes glibc's time zone lock.
 */
void
api_time_str(int64_t ms, char *buf, size_t len)
{
	int64_t sec, days, era, doe, yoe, doy, mp, year, month, day, sod;
	int frac;

	if (len < 25) {
		if (len > 0)
			buf[0] = '\0';
		return;
	}
	if (ms < 0)
		ms = 0;
	if (ms > API_TIME_MAX_MS)
		ms = API_TIME_MAX_MS;
	sec = ms / 1000;
	frac = (int)(ms % 1000);
	days = sec / 86400;
	sod = sec % 86400;
	/* Days since 0000-03-01, then era, day and year of era. */
	days += 719468;
	era = days / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153; /* March = 0 */
	day = doy - (153 * mp + 2) / 5 + 1;
	month = mp < 10 ? mp + 3 : mp - 9;
	year = yoe + era * 400 + (month <= 2);
	digits2(buf, (int)(year / 100));
	digits2(buf + 2, (int)(year % 100));
	buf[4] = '-';
	digits2(buf + 5, (int)month);
	buf[7] = '-';
	digits2(buf + 8, (int)day);
	buf[10] = 'T';
	digits2(buf + 11, (int)(sod / 3600));
	buf[13] = ':';
	digits2(buf + 14, (int)(sod / 60 % 60));
	buf[16] = ':';
	digits2(buf + 17, (int)(sod % 60));
	buf[19] = '.';
	buf[20] = (char)('0' + frac / 100);
	digits2(buf + 21, frac % 100);
	buf[23] = 'Z';
	buf[24] = '\0';
}

bool
api_acquire_is_group(const api_acquire_req *req)
{
	return req->mode == API_MODE_SHARED || req->limit > 1;
}

void
api_lock_clear(api_lock *lock)
{
	if (lock == NULL)
		return;
	json_decref(lock->labels);
	json_decref(lock->claims);
	json_decref(lock->holders);
	memset(lock, 0, sizeof(*lock));
}

static int
set_str(json_t *meta, const char *key, const char *val)
{
	return json_object_set_new(meta, key, json_string(val ? val : ""));
}

int
lease_meta_set_int(json_t *meta, const char *key, long long val)
{
	char buf[32];

	api_fmt_int(buf, sizeof(buf), val);
	return json_object_set_new(meta, key, json_string(buf));
}

/* JSON text of V, or "" for NULL; new reference, NULL on failure. */
static json_t *
encoded(const json_t *v)
{
	char *s;
	json_t *out;

	if (v == NULL || json_object_size(v) == 0)
		return json_string("");
	s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	if (s == NULL)
		return NULL;
	out = json_string(s);
	free(s);
	return out;
}

json_t *
lease_metadata(const api_acquire_req *req, const char *lease_id)
{
	json_t *m = json_object();

	if (m == NULL)
		return NULL;
	if (set_str(m, LEASE_KEY_ID, lease_id) ||
	    (req->key[0] != '\0' && set_str(m, LEASE_KEY_CLIENT, req->key)) ||
	    set_str(m, LEASE_KEY_OWNER, req->owner) ||
	    set_str(m, LEASE_KEY_HOLDER, req->holder) ||
	    set_str(m, LEASE_KEY_PURPOSE, req->purpose) ||
	    lease_meta_set_int(m, LEASE_KEY_TTL, req->ttl) ||
	    lease_meta_set_int(m, LEASE_KEY_EXPECTED, req->expected_duration) ||
	    json_object_set_new(m, LEASE_KEY_LABELS, encoded(req->labels)) ||
	    json_object_set_new(m, LEASE_KEY_CLAIMS, encoded(req->claims))) {
		json_decref(m);
		return NULL;
	}
	/* A group lease's keys; the head's generations at their widest
	 * until group.c writes the real ones, so that the size check
	 * counts them. */
	if (api_acquire_is_group(req) &&
	    (set_str(m, LEASE_KEY_MODE,
	         req->mode == API_MODE_SHARED ? "shared" : "exclusive") ||
	        lease_meta_set_int(m, LEASE_KEY_LIMIT,
	            req->mode == API_MODE_SHARED ? 1 : req->limit) ||
	        lease_meta_set_int(m, LEASE_KEY_HEAD_GEN, INT64_MAX) ||
	        lease_meta_set_int(m, LEASE_KEY_HEAD_METAGEN, INT64_MAX))) {
		json_decref(m);
		return NULL;
	}
	return m;
}

/* Bytes S takes as a JSON string where the stores write it (file_objects.c
 * put_str, gcs_client.c buf_jstr): quotes included, '"' and '\' in two
 * bytes, control characters in six (\u00XX), every other byte as it is. */
static size_t
stored_str_bytes(const char *s)
{
	const unsigned char *p;
	size_t n = 2;

	for (p = (const unsigned char *)s; *p != '\0'; p++)
		n += *p == '"' || *p == '\\' ? 2 : *p < 0x20 ? 6 : 1;
	return n;
}

/*
 * A refresh writes LEASE_KEY_REFRESH (the next metageneration, an int64),
 * a group lease's LEASE_KEY_PREV_END (an int64) and may widen
 * LEASE_KEY_TTL, and the stores count the metadata again
 * then: both are counted here at their widest, so that a lease that was
 * granted can always be refreshed.  So is what an exclusive lease (no
 * LEASE_KEY_MODE) carries when it is granted over a group's head:
 * LEASE_KEY_OVER_GROUP ("1") and LEASE_KEY_TOKEN (an int64).  Lease
 * values are all strings.
 */
size_t
lease_stored_bytes(const json_t *meta)
{
	char ttl_widest[24], seq_widest[24];
	const char *k, *v;
	json_t *jv;
	size_t n = 2; /* {} */

	api_fmt_int(ttl_widest, sizeof(ttl_widest), API_TTL_MAX);
	api_fmt_int(seq_widest, sizeof(seq_widest), INT64_MAX);
	json_object_foreach((json_t *)meta, k, jv)
	{
		if ((v = json_string_value(jv)) == NULL ||
		    strcmp(k, LEASE_KEY_REFRESH) == 0 ||
		    strcmp(k, LEASE_KEY_PREV_END) == 0 ||
		    strcmp(k, LEASE_KEY_OVER_GROUP) == 0 ||
		    strcmp(k, LEASE_KEY_TOKEN) == 0)
			continue;
		if (strcmp(k, LEASE_KEY_TTL) == 0 &&
		    strlen(v) < strlen(ttl_widest))
			v = ttl_widest;
		n += stored_str_bytes(k) + 1 + stored_str_bytes(v) + 1;
	}
	/* The refresh_seq and prev_end members; the comma of the first is
	 * the one counted for the last member above. */
	n += stored_str_bytes(LEASE_KEY_REFRESH) + 1 +
	    stored_str_bytes(seq_widest) + 1 +
	    stored_str_bytes(LEASE_KEY_PREV_END) + 1 +
	    stored_str_bytes(seq_widest);
	if (json_object_get(meta, LEASE_KEY_MODE) == NULL)
		n += 1 + stored_str_bytes(LEASE_KEY_OVER_GROUP) + 1 +
		    stored_str_bytes("1") + 1 +
		    stored_str_bytes(LEASE_KEY_TOKEN) + 1 +
		    stored_str_bytes(seq_widest);
	return n;
}

void
lease_ref_of(lease_ref *ref, const char *lease_id, const char *owner,
    const gcs_object *o)
{
	memset(ref, 0, sizeof(*ref));
	api_copy(ref->lease_id, sizeof(ref->lease_id), lease_id);
	api_copy(ref->owner, sizeof(ref->owner), owner);
	ref->generation = o->generation;
	ref->metageneration = o->metageneration;
	ref->updated_ms = o->updated_ms;
	ref->ttl = (int)lease_ttl_of(o);
}

static const char *
meta_str(const gcs_object *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o->metadata, key));

	return v ? v : "";
}

static long
meta_long(const gcs_object *o, const char *key, long min, long max, long def)
{
	const char *s = meta_str(o, key);
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
		return def;
	return v;
}

/*
 * The object of strings stored as JSON text under KEY (labels, claims),
 * as lockgate writes them; NULL when absent or of any other shape.
 * Someone else's object in the bucket could nest a thousand levels:
 * jansson parses its deepest (2048) within a loop task's stack (checked
 * on the ASan build), but printing it back overran the stack.
 */
static json_t *
meta_json(const gcs_object *o, const char *key)
{
	const char *s = meta_str(o, key), *k;
	json_t *v, *x;

	if (*s == '\0')
		return NULL;
	v = json_loads(s, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(v)) {
		json_decref(v);
		return NULL;
	}
	json_object_foreach(v, k, x)
	{
		if (!json_is_string(x)) {
			json_decref(v);
			return NULL;
		}
	}
	return v;
}

void
api_copy(char *dst, size_t len, const char *src)
{
	size_t n, i;

	if (len == 0)
		return;
	n = strnlen(src, len - 1);
	/* Cut short in the middle of a UTF-8 character (text another client
	 * of the bucket stored, longer than our field): drop the whole
	 * character, so the copy is still text JSON can carry.  At most
	 * three continuation bytes follow a lead byte. */
	if (src[n] != '\0')
		for (i = 0;
		     i < 4 && n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80;
		     i++)
			n--;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

size_t
api_fmt_int(char *buf, size_t len, int64_t v)
{
	char tmp[24];
	size_t i = sizeof(tmp), n;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	do {
		tmp[--i] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		tmp[--i] = '-';
	n = sizeof(tmp) - i;
	if (len == 0)
		return 0;
	if (n > len - 1)
		n = len - 1;
	memcpy(buf, tmp + i, n);
	buf[n] = '\0';
	return n;
}

/* A + B, held at INT64_MAX instead of overflowing (B >= 0). */
static int64_t
add_sat(int64_t a, int64_t b)
{
	int64_t r;

	return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

/* A - B, held at the int64 range instead of overflowing: times of an
 * object another writer stored may be anything. */
static int64_t
sub_sat(int64_t a, int64_t b)
{
	int64_t r;

	if (!__builtin_sub_overflow(a, b, &r))
		return r;
	return b < 0 ? INT64_MAX : INT64_MIN;
}

int64_t
lease_ends_ms(int64_t updated_ms, long ttl)
{
	return add_sat(updated_ms, (int64_t)ttl * 1000);
}

long
lease_ttl_of(const gcs_object *o)
{
	return meta_long(o, LEASE_KEY_TTL, API_TTL_MIN, API_TTL_MAX,
	    API_TTL_DEFAULT);
}

/* Without the store's time (now_ms 0) nothing is judged expired: a
 * gateway's own clock never decides a takeover. */
int
lease_expired(const gcs_object *o)
{
	if (o->now_ms <= 0)
		return 0;
	return add_sat(lease_ends_ms(o->updated_ms, lease_ttl_of(o)),
	           API_EXPIRY_MARGIN_MS) < o->now_ms;
}

int
lease_past_expiry(const gcs_object *o)
{
	return o->now_ms > 0 &&
	    o->now_ms > lease_ends_ms(o->updated_ms, lease_ttl_of(o));
}

int
lease_written_late(const gcs_object *o)
{
	long end = meta_long(o, LEASE_KEY_PREV_END, 1, LONG_MAX, 0);

	return end > 0 &&
	    meta_long(o, LEASE_KEY_REFRESH, 1, LONG_MAX, 0) ==
	    o->metageneration &&
	    o->updated_ms > end;
}

const char *
lease_id_of(const gcs_object *o)
{
	return meta_str(o, LEASE_KEY_ID);
}

const char *
lease_key_of(const gcs_object *o)
{
	const char *key = meta_str(o, LEASE_KEY_CLIENT);

	return key[0] != '\0' ? key : lease_id_of(o);
}

const char *
lease_owner_of(const gcs_object *o)
{
	return meta_str(o, LEASE_KEY_OWNER);
}

int
lease_is_ours(const gcs_object *o, const api_acquire_req *req)
{
	const char *key = req->key[0] != '\0' ? req->key : req->lease_id;

	return strcmp(lease_key_of(o), key) == 0 &&
	    strcmp(lease_owner_of(o), req->owner) == 0 && !lease_expired(o);
}

long
lease_meta_long(const gcs_object *o, const char *key, long min, long max,
    long def)
{
	return meta_long(o, key, min, max, def);
}

int
lease_is_head(const gcs_object *o)
{
	return strcmp(meta_str(o, LEASE_KEY_KIND), LEASE_KIND_GROUP) == 0;
}

int
lease_over_group(const gcs_object *o)
{
	return strcmp(meta_str(o, LEASE_KEY_OVER_GROUP), "1") == 0;
}

/* The token LEASE_KEY_TOKEN of O, or 0 when it has none. */
static int64_t
meta_token(const gcs_object *o)
{
	const char *s = meta_str(o, LEASE_KEY_TOKEN);
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || v <= 0)
		return 0;
	return (int64_t)v;
}

int64_t
lease_token_of(const gcs_object *o)
{
	if (!lease_over_group(o))
		return o->generation;
	return meta_token(o); /* 0 while pending: it has none yet */
}

int
lease_over_group_pending(const gcs_object *o)
{
	return lease_over_group(o) && meta_token(o) == 0;
}

void
lease_mode_of(const gcs_object *o, api_mode *mode, int *limit)
{
	*mode = strcmp(meta_str(o, LEASE_KEY_MODE), "shared") == 0
	    ? API_MODE_SHARED
	    : API_MODE_EXCLUSIVE;
	*limit = *mode == API_MODE_SHARED
	    ? 1
	    : (int)meta_long(o, LEASE_KEY_LIMIT, 1, API_LIMIT_MAX, 1);
}

void
lease_read(const char *name, const gcs_object *o, bool with_lease,
    api_lock *out)
{
	memset(out, 0, sizeof(*out));
	api_copy(out->name, sizeof(out->name), name);
	api_copy(out->owner, sizeof(out->owner), meta_str(o, LEASE_KEY_OWNER));
	api_copy(out->holder, sizeof(out->holder),
	    meta_str(o, LEASE_KEY_HOLDER));
	api_copy(out->purpose, sizeof(out->purpose),
	    meta_str(o, LEASE_KEY_PURPOSE));
	if (with_lease)
		api_copy(out->lease_id, sizeof(out->lease_id), lease_id_of(o));
	out->labels = meta_json(o, LEASE_KEY_LABELS);
	out->claims = meta_json(o, LEASE_KEY_CLAIMS);
	out->ttl = (int)lease_ttl_of(o);
	out->expected_duration =
	    (int)meta_long(o, LEASE_KEY_EXPECTED, 0, API_EXPECTED_MAX, 0);
	out->fencing_token = lease_token_of(o);
	out->object_generation = o->generation;
	out->object_metageneration = o->metageneration;
	lease_mode_of(o, &out->mode, &out->limit);
	out->acquired_at_ms = o->created_ms;
	out->refreshed_at_ms = o->updated_ms;
	out->expires_at_ms = lease_ends_ms(o->updated_ms, out->ttl);
	out->now_ms = o->now_ms;
	out->refresh_interval = out->ttl / API_REFRESH_DIVISOR;
	if (out->refresh_interval < 1)
		out->refresh_interval = 1;
	out->expires_in = out->ttl;
	if (o->now_ms > 0) {
		int64_t left = sub_sat(out->expires_at_ms, o->now_ms) / 1000;
		out->expires_in = left < 0 ? 0
		    : left > out->ttl      ? out->ttl
		                           : (int)left;
	}
	out->expired = lease_expired(o);
	out->overdue = out->expected_duration > 0 &&
	    sub_sat(o->now_ms, o->created_ms) >
	        (int64_t)out->expected_duration * 1000;
}

static int
add_time(json_t *j, const char *key, int64_t ms)
{
	char buf[40];

	api_time_str(ms, buf, sizeof(buf));
	return json_object_set_new(j, key, json_string(buf));
}

/* The fields of a lease L that a holder object and a lock share; 0 or -1
 * on allocation failure. */
static int
lease_fields_json(json_t *j, const api_lock *l)
{
	char tok[32];

	api_fmt_int(tok, sizeof(tok), l->fencing_token);
	if (json_object_set_new(j, "owner", json_string(l->owner)) ||
	    json_object_set_new(j, "holder", json_string(l->holder)) ||
	    json_object_set_new(j, "purpose", json_string(l->purpose)) ||
	    json_object_set_new(j, "labels",
	        l->labels ? json_deep_copy(l->labels) : json_object()) ||
	    json_object_set_new(j, "fencing_token", json_string(tok)) ||
	    add_time(j, "acquired_at", l->acquired_at_ms) ||
	    add_time(j, "refreshed_at", l->refreshed_at_ms) ||
	    add_time(j, "expires_at", l->expires_at_ms) ||
	    json_object_set_new(j, "ttl", json_integer(l->ttl)) ||
	    json_object_set_new(j, "expected_duration",
	        json_integer(l->expected_duration)) ||
	    json_object_set_new(j, "overdue", json_boolean(l->overdue)))
		return -1;
	return 0;
}

json_t *
lease_holder_json(const api_lock *l)
{
	json_t *j = json_object();

	if (j != NULL && lease_fields_json(j, l) != 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* The limit as shown: a number, or null for a shared lock. */
static json_t *
limit_json(const api_lock *l)
{
	if (l->mode == API_MODE_SHARED)
		return json_null();
	return json_integer(l->limit > 1 ? l->limit : 1);
}

/* The holders of L: its own array, or L's one lease. */
static json_t *
holders_json(const api_lock *l)
{
	json_t *a, *h;

	if (l->holders != NULL)
		return json_deep_copy(l->holders);
	if ((a = json_array()) == NULL)
		return NULL;
	if ((h = lease_holder_json(l)) == NULL ||
	    json_array_append_new(a, h) != 0) {
		json_decref(a);
		return NULL;
	}
	return a;
}

json_t *
api_lock_json(const api_lock *l, bool with_lease)
{
	json_t *j = json_object();
	char tok[32];

	if (j == NULL)
		return NULL;
	api_fmt_int(tok, sizeof(tok), l->fencing_token);
	if (json_object_set_new(j, "name", json_string(l->name)) ||
	    json_object_set_new(j, "owner", json_string(l->owner)) ||
	    json_object_set_new(j, "holder", json_string(l->holder)) ||
	    json_object_set_new(j, "purpose", json_string(l->purpose)) ||
	    json_object_set_new(j, "labels",
	        l->labels ? json_deep_copy(l->labels) : json_object()) ||
	    json_object_set_new(j, "claims",
	        l->claims ? json_deep_copy(l->claims) : json_object()) ||
	    json_object_set_new(j, "fencing_token", json_string(tok)) ||
	    add_time(j, "acquired_at", l->acquired_at_ms) ||
	    add_time(j, "refreshed_at", l->refreshed_at_ms) ||
	    add_time(j, "expires_at", l->expires_at_ms) ||
	    json_object_set_new(j, "ttl", json_integer(l->ttl)) ||
	    json_object_set_new(j, "expected_duration",
	        json_integer(l->expected_duration)) ||
	    json_object_set_new(j, "overdue", json_boolean(l->overdue)) ||
	    json_object_set_new(j, "state",
	        json_string(l->expired ? "expired" : "held")) ||
	    json_object_set_new(j, "mode",
	        json_string(
	            l->mode == API_MODE_SHARED ? "shared" : "exclusive")) ||
	    json_object_set_new(j, "limit", limit_json(l)) ||
	    json_object_set_new(j, "holders", holders_json(l)))
		goto fail;
	if (with_lease &&
	    (json_object_set_new(j, "lease_id", json_string(l->lease_id)) ||
	        json_object_set_new(j, "refresh_interval",
	            json_integer(l->refresh_interval)) ||
	        json_object_set_new(j, "expires_in",
	            json_integer(l->expires_in))))
		goto fail;
	return j;
fail:
	json_decref(j);
	return NULL;
}

int
api_code_status(api_code code)
{
	switch (code) {
	case API_OK:
		return 200;
	case API_BAD_REQUEST:
		return 400;
	case API_UNAUTHORIZED:
		return 401;
	case API_FORBIDDEN:
		return 403;
	case API_NOT_HELD:
		return 404;
	case API_LEASE_NOT_FOUND:
		return 404;
	case API_LOCKED:
		return 409;
	case API_LEASE_LOST:
		return 409;
	case API_TOO_LARGE:
		return 413;
	case API_NOT_FOUND:
		return 404;
	case API_METHOD:
		return 405;
	case API_TOO_MANY:
		return 429;
	case API_BUSY:
		return 503;
	case API_UNAVAILABLE:
		return 503;
	case API_SHUTTING_DOWN:
		return 503;
	case API_INTERNAL:
		return 500;
	}
	return 500;
}

const char *
api_code_reason(api_code code)
{
	switch (code) {
	case API_OK:
		return "ok";
	case API_BAD_REQUEST:
		return "bad_request";
	case API_UNAUTHORIZED:
		return "unauthorized";
	case API_FORBIDDEN:
		return "forbidden";
	case API_NOT_HELD:
		return "not_held";
	case API_LEASE_NOT_FOUND:
		return "lease_not_found";
	case API_LOCKED:
		return "locked";
	case API_LEASE_LOST:
		return "lease_lost";
	case API_TOO_LARGE:
		return "too_large";
	case API_NOT_FOUND:
		return "not_found";
	case API_METHOD:
		return "method_not_allowed";
	case API_TOO_MANY:
		return "too_many_requests";
	case API_BUSY:
		return "storage_busy";
	case API_UNAVAILABLE:
		return "storage_unavailable";
	case API_SHUTTING_DOWN:
		return "shutting_down";
	case API_INTERNAL:
		return "internal";
	}
	return "internal";
}

int
api_fail(api_err *err, api_code code, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL) {
		err->code = code;
		err->reason = NULL;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
		err->detail[0] = '\0';
		if ((code == API_BUSY || code == API_UNAVAILABLE ||
		        code == API_SHUTTING_DOWN || code == API_LOCKED) &&
		    err->retry_after <= 0)
			err->retry_after = 1;
	}
	return (int)code;
}

const char *
api_err_detail(const api_err *err)
{
	return err->detail[0] != '\0' ? err->detail : err->message;
}
