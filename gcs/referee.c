/*
 * referee.c: does a store refuse the writes whose preconditions fail?
 *
 * The lock algorithm rests on it (gcs.h: every write carries a
 * precondition, and a store answers 412 when it does not hold).  Cloud
 * Storage does, and so does Google's JSON API emulator; an endpoint that
 * only looks like Cloud Storage may not.  The Cloud Storage emulator of
 * firebase-tools reads no precondition at all (15.34.2, from its source):
 * there a second acquire of a held lock creates the object again, and
 * two callers hold one lock.  Nothing in a single answer tells, so the
 * store is asked, on an object of its own:
 *
 *   insert (ifGenerationMatch=0)                         applied: G, M
 *   insert again, other metadata (ifGenerationMatch=0)   must be 412
 *   patch  ifGenerationMatch=G&ifMetagenerationMatch=M+1 must be 412
 *   delete ifGenerationMatch=G+1&ifMetagenerationMatch=M must be 412
 *   delete ifGenerationMatch=G&ifMetagenerationMatch=M   applied
 *
 * The second insert's metadata differs from the first's so that a 412 to
 * a resend of it is not read back as its own write (gs_insert).  The
 * object's name, ".lockgate-referee#" and 32 random hex digits under the
 * store's prefix, is no lock's: '.' starts no lock name, and a name with
 * '#' is a group's lease, which no listing shows on its own.  Whatever
 * the outcome, the object is deleted when its generation is known.
 */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "gcs.h"

#define REFEREE_PREFIX ".lockgate-referee#"

/* Delete NAME as O saw it (best effort). */
static void
remove_seen(gcs_store *s, const char *name, const gcs_object *o)
{
	gcs_err e;

	if (o->generation > 0)
		(void)gcs_remove(s, name, o->generation, o->metageneration, &e);
}

/* A call that had to be applied failed: ERR, its message prefixed with
 * WHAT. */
static gcs_referee
unknown(const char *what, gcs_err *err)
{
	char m[GCS_ERRMSG_MAX];

	memcpy(m, err->msg, sizeof(m));
	gcs_fail(err, err->status, "%s: %s", what, m);
	return GCS_REFEREE_UNKNOWN;
}

/* RC of WHAT, a write that had to be refused: GCS_REFEREE_OK when it was
 * (412), GCS_REFEREE_IGNORES when it was applied, else
 * GCS_REFEREE_UNKNOWN; ERR says which. */
static gcs_referee
refused(int rc, const char *what, gcs_err *err)
{
	if (rc == GCS_PRECONDITION) {
		memset(err, 0, sizeof(*err));
		return GCS_REFEREE_OK;
	}
	if (rc != GCS_OK)
		return unknown(what, err);
	gcs_fail(err, GCS_INVALID,
	    "the storage applied %s (it answered 2xx where Cloud Storage "
	    "answers 412): it ignores preconditions, so two callers could "
	    "hold one lock",
	    what);
	return GCS_REFEREE_IGNORES;
}

gcs_referee
gcs_referee_check(gcs_store *s, gcs_err *err)
{
	unsigned char rnd[16];
	char name[sizeof(REFEREE_PREFIX) + 2 * sizeof(rnd)];
	gcs_object o, x;
	gcs_referee v;
	json_t *m1, *m2;
	size_t i;
	int rc;

	memset(err, 0, sizeof(*err));
	memset(&o, 0, sizeof(o));
	memset(&x, 0, sizeof(x));
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		gcs_fail(err, GCS_UNAVAILABLE, "no randomness for a name");
		return GCS_REFEREE_UNKNOWN;
	}
	memcpy(name, REFEREE_PREFIX, sizeof(REFEREE_PREFIX) - 1);
	for (i = 0; i < sizeof(rnd); i++)
		snprintf(name + sizeof(REFEREE_PREFIX) - 1 + 2 * i, 3, "%02x",
		    rnd[i]);
	m1 = json_pack("{s:s}", "referee", "1");
	m2 = json_pack("{s:s}", "referee", "2");
	v = GCS_REFEREE_UNKNOWN;
	if (m1 == NULL || m2 == NULL) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		goto out;
	}
	if (gcs_insert(s, name, m1, &o, err) != GCS_OK) {
		v = unknown("the first insert", err);
		goto out;
	}
	rc = gcs_insert(s, name, m2, &x, err);
	v = refused(rc, "a second insert with ifGenerationMatch=0", err);
	if (v != GCS_REFEREE_OK)
		goto tidy;
	rc =
	    gcs_patch(s, name, o.generation, o.metageneration + 1, m2, &x, err);
	v = refused(rc, "a patch with a wrong ifMetagenerationMatch", err);
	if (v != GCS_REFEREE_OK)
		goto tidy;
	rc = gcs_remove(s, name, o.generation + 1, o.metageneration, err);
	v = refused(rc, "a delete with a wrong ifGenerationMatch", err);
	if (v != GCS_REFEREE_OK)
		goto tidy;
	if (gcs_remove(s, name, o.generation, o.metageneration, err) != GCS_OK)
		v = unknown("the last delete", err);
	goto out;
tidy:
	/* The object as the last write left it: X when that write was
	 * applied (after a delete, X is empty: nothing is left), else O. */
	remove_seen(s, name, rc == GCS_OK ? &x : &o);
out:
	gcs_object_clear(&o);
	gcs_object_clear(&x);
	json_decref(m1);
	json_decref(m2);
	return v;
}
