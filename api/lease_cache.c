/*
 * lease_cache.c: name -> (lease_id, generation, metageneration) of the
 * leases this instance wrote last.  A hint only: every write still carries
 * both preconditions, so a stale entry costs one 412 and a re-read, never a
 * wrong answer.  Bounded: when full it is emptied (rare; costs reads only).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"

#define CACHE_BUCKETS 4096

typedef struct entry {
	struct entry *next;
	lease_ref ref;
	char name[];
} entry;

struct lease_cache {
	pthread_mutex_t mu;
	entry *buckets[CACHE_BUCKETS];
	size_t n;
};

static unsigned
hash(const char *s)
{
	unsigned h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h % CACHE_BUCKETS;
}

lease_cache *
lease_cache_new(void)
{
	lease_cache *c = calloc(1, sizeof(*c));

	if (c != NULL)
		pthread_mutex_init(&c->mu, NULL);
	return c;
}

static void
clear_all(lease_cache *c)
{
	size_t i;
	entry *e, *next;

	for (i = 0; i < CACHE_BUCKETS; i++) {
		for (e = c->buckets[i]; e != NULL; e = next) {
			next = e->next;
			free(e);
		}
		c->buckets[i] = NULL;
	}
	c->n = 0;
}

void
lease_cache_free(lease_cache *c)
{
	if (c == NULL)
		return;
	clear_all(c);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static entry **
slot(lease_cache *c, const char *name)
{
	entry **p = &c->buckets[hash(name)];

	while (*p != NULL && strcmp((*p)->name, name) != 0)
		p = &(*p)->next;
	return p;
}

void
lease_cache_put(lease_cache *c, const char *name, const lease_ref *ref)
{
	entry **p, *e;
	size_t len = strlen(name);

	pthread_mutex_lock(&c->mu);
	p = slot(c, name);
	if (*p != NULL) {
		(*p)->ref = *ref;
		goto out;
	}
	if (c->n >= API_LEASE_CACHE_MAX) {
		clear_all(c);
		p = slot(c, name);
	}
	e = malloc(sizeof(*e) + len + 1);
	if (e == NULL)
		goto out; /* a hint only */
	e->next = NULL;
	e->ref = *ref;
	memcpy(e->name, name, len + 1);
	*p = e;
	c->n++;
out:
	pthread_mutex_unlock(&c->mu);
}

int
lease_cache_get(lease_cache *c, const char *name, const char *lease_id,
    lease_ref *out)
{
	entry **p;
	int found = 0;

	pthread_mutex_lock(&c->mu);
	p = slot(c, name);
	if (*p != NULL && strcmp((*p)->ref.lease_id, lease_id) == 0) {
		*out = (*p)->ref;
		found = 1;
	}
	pthread_mutex_unlock(&c->mu);
	return found;
}

void
lease_cache_del(lease_cache *c, const char *name)
{
	entry **p, *e;

	pthread_mutex_lock(&c->mu);
	p = slot(c, name);
	if (*p != NULL) {
		e = *p;
		*p = e->next;
		free(e);
		c->n--;
	}
	pthread_mutex_unlock(&c->mu);
}
