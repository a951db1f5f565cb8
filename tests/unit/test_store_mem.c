/* test_store_mem.c: the store contract suite over mem://. */
#include <stddef.h>

#include "store_contract.h"

static gcs_store *
open_mem(void *ctx)
{
	(void)ctx;
	return gcs_mem_new(NULL, NULL);
}

static void
close_mem(gcs_store *s, void *ctx)
{
	(void)ctx;
	gcs_store_free(s);
}

int
main(void)
{
	return store_contract_run("store_mem", open_mem, close_mem, NULL);
}
