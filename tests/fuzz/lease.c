/*
 * lease.c: the lease metadata codec (api/lock.c lease_read,
 * lease_expired and lease_past_expiry, then api_lock_json and format=env)
 * over an object as any client of the bucket may have written it.  Input:
 * generation, metageneration, created, updated and now (5 x int64), then
 * the metadata as JSON text (an object of strings on GCS; anything
 * jansson parses here).  What must hold: every lock read can be shown
 * (JSON and env answers never fail on stored data: a lock that cannot be
 * shown vanishes from lists and from 409 answers), its strings are cut
 * at a character boundary.
 */
#include <jansson.h>

#include "api/api.h"
#include "api/lease.h"
#include "server/format_env.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_in in = { data, size };
	gcs_object o;
	api_lock l;
	json_t *j;
	char *env;

	memset(&o, 0, sizeof(o));
	o.generation = (int64_t)fuzz_u64(&in);
	o.metageneration = (int64_t)fuzz_u64(&in);
	o.created_ms = (int64_t)fuzz_u64(&in);
	o.updated_ms = (int64_t)fuzz_u64(&in);
	o.now_ms = (int64_t)fuzz_u64(&in);
	o.metadata = json_loadb((const char *)in.p, in.n, 0, NULL);
	if (!json_is_object(o.metadata)) {
		json_decref(o.metadata);
		return 0;
	}
	/* The margin only delays: expired implies past its end. */
	FUZZ_CHECK(!lease_expired(&o) || lease_past_expiry(&o));
	(void)lease_key_of(&o);
	(void)lease_owner_of(&o);
	lease_read("fuzz/lock", &o, true, &l);
	FUZZ_CHECK(api_text_clean(l.owner, strlen(l.owner)) ||
	    !api_text_clean(lease_owner_of(&o), strlen(lease_owner_of(&o))));
	j = api_lock_json(&l, true);
	FUZZ_CHECK(j != NULL);
	env = srv_env_format(j);
	FUZZ_CHECK(env != NULL);
	free(env);
	json_decref(j);
	api_lock_clear(&l);
	json_decref(o.metadata);
	return 0;
}
