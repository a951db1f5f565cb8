/*
 * lock.c: how a lease is written into an object's metadata and read back,
 * and how a lock is shown as JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "lease.h"

void
api_time_str(int64_t ms, char *buf, size_t len)
{
	time_t sec = (time_t)(ms / 1000);
	struct tm tm;

	if (ms < 0)
		sec = 0, ms = 0;
	gmtime_r(&sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

void
api_lock_clear(api_lock *lock)
{
	if (lock == NULL)
		return;
	json_decref(lock->labels);
	json_decref(lock->claims);
	memset(lock, 0, sizeof(*lock));
}

static int
set_str(json_t *meta, const char *key, const char *val)
{
	return json_object_set_new(meta, key, json_string(val ? val : ""));
}

static int
set_int(json_t *meta, const char *key, long long val)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", val);
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
	    set_str(m, LEASE_KEY_OWNER, req->owner) ||
	    set_str(m, LEASE_KEY_HOLDER, req->holder) ||
	    set_str(m, LEASE_KEY_PURPOSE, req->purpose) ||
	    set_int(m, LEASE_KEY_TTL, req->ttl) ||
	    set_int(m, LEASE_KEY_EXPECTED, req->expected_duration) ||
	    json_object_set_new(m, LEASE_KEY_LABELS, encoded(req->labels)) ||
	    json_object_set_new(m, LEASE_KEY_CLAIMS, encoded(req->claims))) {
		json_decref(m);
		return NULL;
	}
	return m;
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

static json_t *
meta_json(const gcs_object *o, const char *key)
{
	const char *s = meta_str(o, key);
	json_t *v;

	if (*s == '\0')
		return NULL;
	v = json_loads(s, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(v)) {
		json_decref(v);
		return NULL;
	}
	return v;
}

static void
copy(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src);
}

int
lease_expired(const gcs_object *o)
{
	long ttl = meta_long(o, LEASE_KEY_TTL, API_TTL_MIN, API_TTL_MAX,
	    API_TTL_DEFAULT);

	return o->updated_ms + ttl * 1000 + API_EXPIRY_MARGIN_MS < o->now_ms;
}

const char *
lease_id_of(const gcs_object *o)
{
	return meta_str(o, LEASE_KEY_ID);
}

const char *
lease_owner_of(const gcs_object *o)
{
	return meta_str(o, LEASE_KEY_OWNER);
}

void
lease_read(const char *name, const gcs_object *o, bool with_lease,
    api_lock *out)
{
	memset(out, 0, sizeof(*out));
	copy(out->name, sizeof(out->name), name);
	copy(out->owner, sizeof(out->owner), meta_str(o, LEASE_KEY_OWNER));
	copy(out->holder, sizeof(out->holder), meta_str(o, LEASE_KEY_HOLDER));
	copy(out->purpose, sizeof(out->purpose),
	    meta_str(o, LEASE_KEY_PURPOSE));
	if (with_lease)
		copy(out->lease_id, sizeof(out->lease_id), lease_id_of(o));
	out->labels = meta_json(o, LEASE_KEY_LABELS);
	out->claims = meta_json(o, LEASE_KEY_CLAIMS);
	out->ttl = (int)meta_long(o, LEASE_KEY_TTL, API_TTL_MIN, API_TTL_MAX,
	    API_TTL_DEFAULT);
	out->expected_duration = (int)meta_long(o, LEASE_KEY_EXPECTED, 0,
	    API_EXPECTED_MAX, 0);
	out->fencing_token = o->generation;
	out->acquired_at_ms = o->created_ms;
	out->refreshed_at_ms = o->updated_ms;
	out->expires_at_ms = o->updated_ms + (int64_t)out->ttl * 1000;
	out->now_ms = o->now_ms;
	out->refresh_interval = out->ttl / API_REFRESH_DIVISOR;
	if (out->refresh_interval < 1)
		out->refresh_interval = 1;
	out->expired = lease_expired(o);
	out->overdue = out->expected_duration > 0 &&
	    o->now_ms - o->created_ms > (int64_t)out->expected_duration * 1000;
}

static int
add_time(json_t *j, const char *key, int64_t ms)
{
	char buf[40];

	api_time_str(ms, buf, sizeof(buf));
	return json_object_set_new(j, key, json_string(buf));
}

json_t *
api_lock_json(const api_lock *l, bool with_lease)
{
	json_t *j = json_object();
	char tok[32];

	if (j == NULL)
		return NULL;
	snprintf(tok, sizeof(tok), "%" PRId64, l->fencing_token);
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
		json_string(l->expired ? "expired" : "held")))
		goto fail;
	if (with_lease &&
	    (json_object_set_new(j, "lease_id", json_string(l->lease_id)) ||
	    json_object_set_new(j, "refresh_interval",
		json_integer(l->refresh_interval))))
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
	case API_OK: return 200;
	case API_BAD_REQUEST: return 400;
	case API_UNAUTHORIZED: return 401;
	case API_FORBIDDEN: return 403;
	case API_NOT_HELD: return 404;
	case API_LEASE_NOT_FOUND: return 404;
	case API_LOCKED: return 409;
	case API_LEASE_LOST: return 409;
	case API_TOO_LARGE: return 413;
	case API_NOT_FOUND: return 404;
	case API_METHOD: return 405;
	case API_BUSY: return 503;
	case API_UNAVAILABLE: return 503;
	case API_SHUTTING_DOWN: return 503;
	case API_INTERNAL: return 500;
	}
	return 500;
}

const char *
api_code_reason(api_code code)
{
	switch (code) {
	case API_OK: return "ok";
	case API_BAD_REQUEST: return "bad_request";
	case API_UNAUTHORIZED: return "unauthorized";
	case API_FORBIDDEN: return "forbidden";
	case API_NOT_HELD: return "not_held";
	case API_LEASE_NOT_FOUND: return "lease_not_found";
	case API_LOCKED: return "locked";
	case API_LEASE_LOST: return "lease_lost";
	case API_TOO_LARGE: return "too_large";
	case API_NOT_FOUND: return "not_found";
	case API_METHOD: return "method_not_allowed";
	case API_BUSY: return "storage_busy";
	case API_UNAVAILABLE: return "storage_unavailable";
	case API_SHUTTING_DOWN: return "shutting_down";
	case API_INTERNAL: return "internal";
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
		if ((code == API_BUSY || code == API_UNAVAILABLE ||
		    code == API_SHUTTING_DOWN || code == API_LOCKED) &&
		    err->retry_after <= 0)
			err->retry_after = 1;
	}
	return (int)code;
}
