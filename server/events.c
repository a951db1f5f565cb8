/*
 * events.c: the per-instance buffer of recent lock events (events.h).
 *
 * Each slot owns one allocation holding its strings back to back; the
 * slot's pointers point into it (NULL for an absent string).
 *
 * Every event is in two lists, oldest to newest: its lock's and its
 * owner's (an event without an owner is in the list of the owner "").
 * A list's group counts its events, and each index (by lock, by owner)
 * keeps its groups in buckets by count, so that the group with the most
 * events is found at once; counts move by one, so keeping that maximum
 * is constant work too.  A full buffer makes room fairly (events.h):
 * the oldest event of the lock with the most events goes, unless the
 * owner with the most has more than twice as many, and then that
 * owner's oldest goes.  An insert is two hash lookups and a few pointer
 * moves, however full the buffer.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/events.h"

#define EV_TIME_LEN  32 /* "2026-11-22T03:04:05.678Z" and NUL */
#define EV_TOKEN_LEN 24 /* an int64 in decimal and NUL */
#define EV_STRINGS   5  /* name, owner, holder, actor, reason */
#define EV_HASH      1024
#define EV_NONE      (-1) /* no slot */

enum { BY_LOCK, BY_OWNER, EV_KEYS };

/* The events of one lock, or of one owner. */
typedef struct ev_group {
	struct ev_group *hnext;         /* the same hash */
	struct ev_group *cprev, *cnext; /* the same count: a circle */
	int oldest, newest;             /* slots; EV_NONE when empty */
	size_t count;
	char key[];
} ev_group;

/* The groups of one kind: by key, and by count. */
typedef struct ev_index {
	ev_group *hash[EV_HASH];
	/* Groups with that many events, the first to get that many first. */
	ev_group *by_count[SRV_EVENTS_MAX + 1];
	size_t max; /* the most events of any group */
} ev_index;

typedef struct ev_slot {
	char *blob; /* owns the strings below; NULL = free slot */
	const char *name;
	const char *owner;
	const char *holder;
	const char *actor;
	const char *reason; /* a force release's, NULL otherwise */
	api_event_kind kind;
	int64_t fencing_token;
	int64_t at_ms;
	long count; /* refreshes folded into this entry */
	/* Its place in its lock's and its owner's lists: */
	ev_group *group[EV_KEYS];
	int prev[EV_KEYS], next[EV_KEYS];
} ev_slot;

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static ev_slot ev_slots[SRV_EVENTS_MAX];
static ev_index ev_idx[EV_KEYS];
static int ev_used;           /* slots ever taken since the last reset */
static int ev_free = EV_NONE; /* freed slots, through next[BY_LOCK] */

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

static void
slot_clear(ev_slot *s)
{
	free(s->blob);
	memset(s, 0, sizeof(*s));
}

static unsigned
hash_of(const char *key)
{
	unsigned h = 5381;

	for (; *key != '\0'; key++)
		h = h * 33 + (unsigned char)*key;
	return h % EV_HASH;
}

/* With ev_mu held: the group of KEY in X; made (empty) when CREATE, else
 * NULL when there is none; NULL when out of memory. */
static ev_group *
group_get(ev_index *x, const char *key, bool create)
{
	ev_group **p = &x->hash[hash_of(key)], *g;
	size_t len = strlen(key);

	for (g = *p; g != NULL; g = g->hnext)
		if (strcmp(g->key, key) == 0)
			return g;
	if (!create || (g = calloc(1, sizeof(*g) + len + 1)) == NULL)
		return NULL;
	memcpy(g->key, key, len + 1);
	g->oldest = g->newest = EV_NONE;
	g->hnext = *p;
	*p = g;
	return g;
}

/* With ev_mu held: G of X freed, when it has no events. */
static void
group_drop_empty(ev_index *x, ev_group *g)
{
	ev_group **p;

	if (g == NULL || g->count > 0)
		return;
	for (p = &x->hash[hash_of(g->key)]; *p != NULL; p = &(*p)->hnext)
		if (*p == g) {
			*p = g->hnext;
			break;
		}
	free(g);
}

/* G's count in X moves by DELTA (+1 or -1): it changes buckets, joining
 * the new one last. */
static void
group_count(ev_index *x, ev_group *g, int delta)
{
	ev_group **head = &x->by_count[g->count];

	if (g->count > 0) {
		if (g->cnext == g) {
			*head = NULL;
		} else {
			g->cprev->cnext = g->cnext;
			g->cnext->cprev = g->cprev;
			if (*head == g)
				*head = g->cnext;
		}
	}
	g->count = delta > 0 ? g->count + 1 : g->count - 1;
	if (g->count > 0) {
		head = &x->by_count[g->count];
		if (*head == NULL) {
			g->cprev = g->cnext = g;
			*head = g;
		} else {
			g->cprev = (*head)->cprev;
			g->cnext = *head;
			(*head)->cprev->cnext = g;
			(*head)->cprev = g;
		}
	}
	if (g->count > x->max)
		x->max = g->count;
	while (x->max > 0 && x->by_count[x->max] == NULL)
		x->max--;
}

/* Slot I joins G's list (kind K) as its newest. */
static void
slot_link(int i, int k, ev_group *g)
{
	ev_slot *s = &ev_slots[i];

	s->group[k] = g;
	s->prev[k] = g->newest;
	s->next[k] = EV_NONE;
	if (g->newest != EV_NONE)
		ev_slots[g->newest].next[k] = i;
	else
		g->oldest = i;
	g->newest = i;
	group_count(&ev_idx[k], g, +1);
}

/* Slot I leaves its list of kind K; a group left empty is freed. */
static void
slot_unlink(int i, int k)
{
	ev_slot *s = &ev_slots[i];
	ev_group *g = s->group[k];

	if (s->prev[k] != EV_NONE)
		ev_slots[s->prev[k]].next[k] = s->next[k];
	else
		g->oldest = s->next[k];
	if (s->next[k] != EV_NONE)
		ev_slots[s->next[k]].prev[k] = s->prev[k];
	else
		g->newest = s->prev[k];
	group_count(&ev_idx[k], g, -1);
	group_drop_empty(&ev_idx[k], g);
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

/* With ev_mu held: the newest slot of EV's lock when it is a refresh of
 * the same lease as EV, else NULL. */
static ev_slot *
foldable(const api_event *ev)
{
	ev_group *g = group_get(&ev_idx[BY_LOCK], ev->name, false);
	ev_slot *s;

	if (g == NULL)
		return NULL;
	s = &ev_slots[g->newest];
	if (s->kind == API_EV_REFRESHED &&
	    s->fencing_token == ev->fencing_token &&
	    same_str(s->owner, present(ev->owner)))
		return s;
	return NULL;
}

/* With ev_mu held, the buffer full: the event that makes room goes (see
 * the top of this file), and its slot is free. */
static void
evict(void)
{
	ev_group *lock = ev_idx[BY_LOCK].by_count[ev_idx[BY_LOCK].max];
	ev_group *owner = ev_idx[BY_OWNER].by_count[ev_idx[BY_OWNER].max];
	int i = owner->count > 2 * lock->count ? owner->oldest : lock->oldest;

	slot_unlink(i, BY_LOCK);
	slot_unlink(i, BY_OWNER);
	slot_clear(&ev_slots[i]);
	ev_slots[i].next[BY_LOCK] = ev_free;
	ev_free = i;
}

/* With ev_mu held: a free slot for FRESH (its strings taken), which joins
 * the lists of its lock and owner; -1 when out of memory (FRESH is then
 * the caller's still). */
static int
place(ev_slot *fresh)
{
	ev_group *lock, *owner;
	int i;

	if (ev_free == EV_NONE && ev_used == SRV_EVENTS_MAX)
		evict();
	lock = group_get(&ev_idx[BY_LOCK], fresh->name, true);
	owner = group_get(&ev_idx[BY_OWNER],
	    fresh->owner != NULL ? fresh->owner : "", true);
	if (lock == NULL || owner == NULL) {
		group_drop_empty(&ev_idx[BY_LOCK], lock);
		group_drop_empty(&ev_idx[BY_OWNER], owner);
		return -1;
	}
	if (ev_free != EV_NONE) {
		i = ev_free;
		ev_free = ev_slots[i].next[BY_LOCK];
	} else {
		i = ev_used++;
	}
	ev_slots[i] = *fresh;
	slot_link(i, BY_LOCK, lock);
	slot_link(i, BY_OWNER, owner);
	return 0;
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
	} else if (slot_fill(&fresh, ev) == 0 && place(&fresh) != 0) {
		slot_clear(&fresh); /* out of memory: dropped */
	}
	pthread_mutex_unlock(&ev_mu);
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

	api_time_str(s->at_ms, at, sizeof(at));
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
	size_t found = 0;
	ev_group *g;
	int i;

	if (max == 0 || max > SRV_EVENTS_ANSWER_MAX)
		max = SRV_EVENTS_ANSWER_MAX;
	if ((arr = json_array()) == NULL)
		return NULL;
	pthread_mutex_lock(&ev_mu);
	g = name != NULL ? group_get(&ev_idx[BY_LOCK], name, false) : NULL;
	for (i = g != NULL ? g->newest : EV_NONE; i != EV_NONE && found < max;
	     i = ev_slots[i].prev[BY_LOCK]) {
		if ((o = slot_json(&ev_slots[i])) == NULL ||
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
	ev_group *g;
	int i, k, h;

	pthread_mutex_lock(&ev_mu);
	for (i = 0; i < SRV_EVENTS_MAX; i++)
		slot_clear(&ev_slots[i]);
	for (k = 0; k < EV_KEYS; k++) {
		for (h = 0; h < EV_HASH; h++)
			while ((g = ev_idx[k].hash[h]) != NULL) {
				ev_idx[k].hash[h] = g->hnext;
				free(g);
			}
		memset(&ev_idx[k], 0, sizeof(ev_idx[k]));
	}
	ev_used = 0;
	ev_free = EV_NONE;
	pthread_mutex_unlock(&ev_mu);
}
