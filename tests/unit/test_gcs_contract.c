/*
 * test_gcs_contract.c: the store contract suite (store_contract.c) over
 * gs:// against build/tools/fake_gcs, once plain and once with transient
 * faults queued on every operation, so that every contract holds through
 * retries too.
 */
#include <stdio.h>
#include <stdlib.h>

#include "fake_gcs_proc.h"
#include "gcs/gcs.h"
#include "gcs/gcs_client.h"
#include "store_contract.h"

static fake_gcs fake;

static gcs_store *
open_gs(void *ctx)
{
	gcs_retry_policy p = { 3000, 2, 20, 2000 };
	gcs_err err;
	gcs_store *s;

	(void)ctx;
	s = gcs_gs_new("contract-bkt", "ct/", &err);
	if (s == NULL) {
		fprintf(stderr, "gcs_gs_new: %s\n", err.msg);
		return NULL;
	}
	gcs_gs_set_retry(s, &p);
	return s;
}

static void
close_gs(gcs_store *s, void *ctx)
{
	(void)ctx;
	gcs_store_free(s);
}

int
main(void)
{
	gcs_stats st0, st1;
	int failed;

	if (fake_gcs_start_group(&fake, NULL) != 0)
		return 1;
	setenv("STORAGE_EMULATOR_HOST", fake.hostport, 1);
	failed = store_contract_run("gcs_contract", open_gs, close_gs, NULL);
	/* Again with transient faults queued on every operation: a 5xx,
	 * 429 or a reset before the request is applied never changes an
	 * outcome, only the number of tries. */
	if (fake_gcs_ctl(&fake, "/_fake/fault?op=get&kind=503&count=3", NULL) !=
	        200 ||
	    fake_gcs_ctl(&fake, "/_fake/fault?op=insert&kind=reset&count=3",
	        NULL) != 200 ||
	    fake_gcs_ctl(&fake, "/_fake/fault?op=list&kind=429&count=3",
	        NULL) != 200 ||
	    fake_gcs_ctl(&fake, "/_fake/fault?op=patch&kind=500&count=3",
	        NULL) != 200 ||
	    fake_gcs_ctl(&fake, "/_fake/fault?op=delete&kind=503&count=3",
	        NULL) != 200)
		failed++;
	gcs_stats_get(&st0);
	failed +=
	    store_contract_run("gcs_contract_faults", open_gs, close_gs, NULL);
	gcs_stats_get(&st1);
	/* The 5xx and 429 faults (3 each on get, list, patch, delete) were
	 * all met and retried. */
	if (st1.retries - st0.retries < 12) {
		fprintf(stderr, "only %llu retries under faults\n",
		    (unsigned long long)(st1.retries - st0.retries));
		failed++;
	}
	fake_gcs_stop(&fake);
	return failed;
}
