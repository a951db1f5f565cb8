/*
 * referee.c: does a store referee locks as Cloud Storage does?
 *
 * The lock algorithm rests on two things (gcs.h): every write carries a
 * precondition, and a store answers 412 when it does not hold; and a
 * patch that is applied keeps the object's generation and moves its
 * metageneration on by one (a lease's refresh is such a patch, and the
 * next one is conditioned on the metageneration it left).  Cloud Storage
 * does both, and so does Google's JSON API emulator; an endpoint that
 * only looks like Cloud Storage may not.  The Cloud Storage emulator of
 * firebase-tools reads no precondition at all (15.34.2, run by
 * tests/interop): there a second acquire of a held lock creates the
 * object again, and two callers hold one lock.  fsouza/fake-gcs-server reads
 * them (since its pull request 2343 of 2026-08-25; before, patch and
 * delete did not), but keeps every object at metageneration 1 and moves
 * neither it nor "updated" on a patch (its memory backend; its
 * filesystem backend mints a new generation instead): there a patch
 * conditioned on what a read saw still applies after another patch (the
 * refreshes of a lease and the changes of a group's head rest on it not
 * doing so), and a refresh does not move a lease's expiry.  Nothing in a
 * single answer tells, so the store is asked, on an object of its own:
 *
 *   insert (ifGenerationMatch=0)                         applied: G, M
 *   insert again, other metadata (ifGenerationMatch=0)   must be 412
 *   patch  ifGenerationMatch=G&ifMetagenerationMatch=M+1 must be 412
 *   patch  ifGenerationMatch=G&ifMetagenerationMatch=M   must give G, M+1
 *   delete ifGenerationMatch=G+1&ifMetagenerationMatch=M+1  must be 412
 *   delete ifGenerationMatch=G&ifMetagenerationMatch=M+1    applied
 *
 * The writes' metadata all differ, so that a 412 to a resend of one is
 * not read back as its own write (gs_insert, gs_patch).  The object's
 * name, ".lockgate-referee#" and 32 random hex digits under the store's
 * prefix, is no lock's: '.' starts no lock name, and a name with '#' is a
 * group's lease, which no listing shows on its own.  Whatever the
 * outcome, the object is deleted as it is then read (after a first
 * insert that was sent and never answered too: it may have been
 * applied).
 */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "gcs.h"

#define REFEREE_PREFIX ".lockgate-referee#"

/* Delete NAME as it is now, if it is there (best effort). */
static void
remove_live(gcs_store *s, const char *name)
{
	gcs_object o;
	gcs_err e;

	if (gcs_get(s, name, &o, &e) != GCS_OK)
		return;
	(void)gcs_remove(s, name, o.generation, o.metageneration, &e);
	gcs_object_clear(&o);
}

/* A call that had to be answered failed: GCS_REFEREE_CANNOT when the
 * storage says it does not do such a call at all (405, 501: the Cloud
 * Storage emulator of firebase-tools answers a patch under /storage/v1/
 * 501), else GCS_REFEREE_UNKNOWN, to be asked again; ERR, its message
 * prefixed with WHAT. */
static gcs_referee
unknown(const char *what, gcs_err *err)
{
	char m[GCS_ERRMSG_MAX];

	memcpy(m, err->msg, sizeof(m));
	if (err->http_status == 405 || err->http_status == 501) {
		gcs_fail(err, GCS_INVALID,
		    "the storage does not implement %s (HTTP %d), which "
		    "lockgate needs to take, refresh and release leases: %s",
		    what, err->http_status, m);
		return GCS_REFEREE_CANNOT;
	}
	gcs_fail(err, err->status, "%s: %s", what, m);
	return GCS_REFEREE_UNKNOWN;
}

/* RC of WHAT, a write that had to be refused: GCS_REFEREE_OK when it was
 * (412), GCS_REFEREE_CANNOT when it was applied, else
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
	return GCS_REFEREE_CANNOT;
}

/* RC of a patch whose preconditions held, of O (generation and
 * metageneration as they were), into X: GCS_REFEREE_OK when it was
 * applied as Cloud Storage applies it, else as refused() says. */
static gcs_referee
patched(int rc, const gcs_object *o, const gcs_object *x, gcs_err *err)
{
	if (rc == GCS_PRECONDITION) {
		/* A 412, or a read-back that found another generation
		 * (gs_patch). */
		gcs_fail(err, GCS_INVALID,
		    "the storage refused a patch whose preconditions held, or "
		    "moved the object to another generation (Cloud Storage "
		    "keeps it): a lease could not be refreshed");
		return GCS_REFEREE_CANNOT;
	}
	if (rc != GCS_OK)
		return unknown("a patch with the right preconditions", err);
	if (x->generation == o->generation &&
	    x->metageneration == o->metageneration + 1) {
		memset(err, 0, sizeof(*err));
		return GCS_REFEREE_OK;
	}
	gcs_fail(err, GCS_INVALID,
	    "a patch whose preconditions held gave metageneration %lld, not "
	    "%lld, %s generation: a second patch made from the same read "
	    "would be applied too, so two callers could hold one lock",
	    (long long)x->metageneration, (long long)o->metageneration + 1,
	    x->generation == o->generation ? "and kept the" : "and another");
	return GCS_REFEREE_CANNOT;
}

gcs_referee
gcs_referee_check(gcs_store *s, gcs_err *err)
{
	unsigned char rnd[16];
	char name[sizeof(REFEREE_PREFIX) + 2 * sizeof(rnd)];
	gcs_object o, x;
	gcs_referee v;
	json_t *m1, *m2, *m3;
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
	m3 = json_pack("{s:s}", "referee", "3");
	v = GCS_REFEREE_UNKNOWN;
	if (m1 == NULL || m2 == NULL || m3 == NULL) {
		gcs_fail(err, GCS_NOMEM, "out of memory");
		goto out;
	}
	if (gcs_insert(s, name, m1, &o, err) != GCS_OK) {
		v = unknown("the first insert", err);
		/* Sent and never answered: it may have been applied. */
		if (err->http_status == 0 && err->attempts > 0)
			goto tidy;
		goto out;
	}
	rc = gcs_insert(s, name, m2, &x, err);
	gcs_object_clear(&x);
	v = refused(rc, "a second insert with ifGenerationMatch=0", err);
	if (v != GCS_REFEREE_OK)
		goto tidy;
	rc =
	    gcs_patch(s, name, o.generation, o.metageneration + 1, m2, &x, err);
	gcs_object_clear(&x);
	v = refused(rc, "a patch with a wrong ifMetagenerationMatch", err);
	if (v != GCS_REFEREE_OK)
		goto tidy;
	rc = gcs_patch(s, name, o.generation, o.metageneration, m3, &x, err);
	v = patched(rc, &o, &x, err);
	if (v != GCS_REFEREE_OK)
		goto tidy;
	rc = gcs_remove(s, name, x.generation + 1, x.metageneration, err);
	v = refused(rc, "a delete with a wrong ifGenerationMatch", err);
	if (v != GCS_REFEREE_OK)
		goto tidy;
	if (gcs_remove(s, name, x.generation, x.metageneration, err) != GCS_OK)
		v = unknown("the last delete", err);
	goto out;
tidy:
	remove_live(s, name);
out:
	gcs_object_clear(&o);
	gcs_object_clear(&x);
	json_decref(m1);
	json_decref(m2);
	json_decref(m3);
	return v;
}
