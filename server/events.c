/*
 * events.c: the per-instance ring buffer of recent lock events (events.h).
 *
 * Each slot owns one allocation holding its strings back to back; the
 * slot's pointers point into it (NULL for an absent string).  Writing into
 * a full ring frees the oldest slot's allocation.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/events.h"

#define EV_TIME_LEN  32 /* "2026-11-22T03:04:05.678Z" and NUL */
#define EV_TOKEN_LEN 24 /* an int64 in decimal and NUL */
#define EV_STRINGS   5  /* name, owner, holder, actor, reason */

typedef struct ev_slot {
	char *blob; /* owns the strings below; NULL = empty slot */
	const char *name;
	const char *owner;
	const char *holder;
	const char *actor;
	const char *reason; /* a force release's, NULL otherwise */
	api_event_kind kind;
	int64_t fencing_token;
	int64_t at_ms;
	long count; /* refreshes folded into this entry */
} ev_slot;

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static ev_slot ev_ring[SRV_EVENTS_MAX];
static size_t ev_head; /* the slot the next event goes into */
static size_t ev_len;  /* slots in use */

static const char *
kind_str(api_event_kind kind)
{
	switch (kind) {
	case API_EV_GRANTED:
		return "acquired";
	case API_EV_TAKEOVER:
		return "takeover";
	case API_EV_REFRESHED:
		return "refreshed";
	case API_EV_RELEASED:
		return "released";
	case API_EV_FORCED:
		return "force_released";
	case API_EV_LOST:
		return "lost";
	}
	return "unknown";
}

static int
same_str(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/* "" and NULL both mean absent. */
static const char *
present(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : NULL;
}

/* Index of the I-th newest slot (0 = newest); I < ev_len. */
static size_t
newest(size_t i)
{
	return (ev_head + SRV_EVENTS_MAX - 1 - i) % SRV_EVENTS_MAX;
}

static void
slot_clear(ev_slot *s)
{
	free(s->blob);
	memset(s, 0, sizeof(*s));
}

/* Fill S with copies of EV's strings: 0, or -1 when out of memory. */
static int
slot_fill(ev_slot *s, const api_event *ev)
{
	const char *src[EV_STRINGS];
	const char **dst[EV_STRINGS];
	size_t total = 0, off = 0, n;
	int i;

	src[0] = present(ev->name);
	src[1] = present(ev->owner);
	src[2] = present(ev->holder);
	src[3] = present(ev->actor);
	src[4] = present(ev->reason);
	dst[0] = &s->name;
	dst[1] = &s->owner;
	dst[2] = &s->holder;
	dst[3] = &s->actor;
	dst[4] = &s->reason;
	for (i = 0; i < EV_STRINGS; i++)
		if (src[i] != NULL)
			total += strlen(src[i]) + 1;
	if ((s->blob = malloc(total > 0 ? total : 1)) == NULL)
		return -1;
	for (i = 0; i < EV_STRINGS; i++) {
		if (src[i] == NULL) {
			*dst[i] = NULL;
			continue;
		}
		n = strlen(src[i]) + 1;
		memcpy(s->blob + off, src[i], n);
		*dst[i] = s->blob + off;
		off += n;
	}
	s->kind = ev->kind;
	s->fencing_token = ev->fencing_token;
	/* No time from the store (a delete): this machine's clock. */
	s->at_ms = ev->at_ms > 0 ? ev->at_ms : gcs_clock_real(NULL);
	s->count = 1;
	return 0;
}

/* With ev_mu held: the newest slot of NAME when it is a refresh of the
 * same lease as EV, else NULL.  Stops at the first slot of NAME. */
static ev_slot *
foldable(const api_event *ev)
{
	size_t i;
	ev_slot *s;

	for (i = 0; i < ev_len; i++) {
		s = &ev_ring[newest(i)];
		if (!same_str(s->name, present(ev->name)))
			continue;
		if (s->kind == API_EV_REFRESHED &&
		    s->fencing_token == ev->fencing_token &&
		    same_str(s->owner, present(ev->owner)))
			return s;
		return NULL;
	}
	return NULL;
}

void
srv_events_record(const api_event *ev)
{
	ev_slot fresh, *s;

	if (ev == NULL || present(ev->name) == NULL)
		return;
	memset(&fresh, 0, sizeof(fresh));
	pthread_mutex_lock(&ev_mu);
	if (ev->kind == API_EV_REFRESHED && (s = foldable(ev)) != NULL) {
		if (ev->at_ms > s->at_ms)
			s->at_ms = ev->at_ms;
		s->count++;
		goto done;
	}
	if (slot_fill(&fresh, ev) == -1)
		goto done;
	slot_clear(&ev_ring[ev_head]);
	ev_ring[ev_head] = fresh;
	ev_head = (ev_head + 1) % SRV_EVENTS_MAX;
	if (ev_len < SRV_EVENTS_MAX)
		ev_len++;
done:
	pthread_mutex_unlock(&ev_mu);
}

/* MS since the epoch as RFC 3339 UTC with milliseconds, into BUF of
 * EV_TIME_LEN bytes. */
static void
fmt_time(int64_t ms, char buf[EV_TIME_LEN])
{
	int64_t sec = ms / 1000, frac = ms % 1000;
	time_t t;
	struct tm tm;
	size_t n;

	if (frac < 0) {
		frac += 1000;
		sec--;
	}
	t = (time_t)sec;
	if (gmtime_r(&t, &tm) == NULL ||
	    (n = strftime(buf, EV_TIME_LEN - 6, "%Y-%m-%dT%H:%M:%S", &tm)) ==
	        0) {
		snprintf(buf, EV_TIME_LEN, "1970-01-01T00:00:00.000Z");
		return;
	}
	/* ".mmmZ" and NUL fit in the 6 bytes kept back */
	buf[n++] = '.';
	buf[n++] = (char)('0' + frac / 100);
	buf[n++] = (char)('0' + frac / 10 % 10);
	buf[n++] = (char)('0' + frac % 10);
	buf[n++] = 'Z';
	buf[n] = '\0';
}

static json_t *
str_or_null(const char *s)
{
	return s != NULL ? json_string(s) : json_null();
}

static json_t *
slot_json(const ev_slot *s)
{
	char at[EV_TIME_LEN], tok[EV_TOKEN_LEN];
	json_t *o;

	fmt_time(s->at_ms, at);
	snprintf(tok, sizeof(tok), "%lld", (long long)s->fencing_token);
	o = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:I}", "kind",
	    kind_str(s->kind), "at", at, "owner", str_or_null(s->owner),
	    "holder", str_or_null(s->holder), "actor", str_or_null(s->actor),
	    "reason", str_or_null(s->reason), "fencing_token", tok, "count",
	    (json_int_t)s->count);
	return o;
}

json_t *
srv_events_json(const char *name, size_t max)
{
	json_t *root = NULL, *arr, *o;
	size_t i, found = 0;
	const ev_slot *s;

	if (max == 0 || max > SRV_EVENTS_ANSWER_MAX)
		max = SRV_EVENTS_ANSWER_MAX;
	if ((arr = json_array()) == NULL)
		return NULL;
	pthread_mutex_lock(&ev_mu);
	for (i = 0; i < ev_len && found < max; i++) {
		s = &ev_ring[newest(i)];
		if (name == NULL || !same_str(s->name, name))
			continue;
		if ((o = slot_json(s)) == NULL ||
		    json_array_append_new(arr, o) == -1) {
			pthread_mutex_unlock(&ev_mu);
			goto fail;
		}
		found++;
	}
	pthread_mutex_unlock(&ev_mu);
	if ((root = json_object()) == NULL)
		goto fail;
	/* set_new steals ARR even when it fails */
	if (json_object_set_new(root, "events", arr) == -1) {
		arr = NULL;
		goto fail;
	}
	return root;
fail:
	json_decref(arr);
	json_decref(root);
	return NULL;
}

void
srv_events_reset(void)
{
	size_t i;

	pthread_mutex_lock(&ev_mu);
	for (i = 0; i < SRV_EVENTS_MAX; i++)
		slot_clear(&ev_ring[i]);
	ev_head = 0;
	ev_len = 0;
	pthread_mutex_unlock(&ev_mu);
}
