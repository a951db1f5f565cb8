/*
 * store_contract.h: a reusable cmocka suite that checks any gcs_store
 * against the contract of gcs/gcs.h (insert-if-absent, get with the store's
 * clock, conditional patch, conditional delete, paged list by prefix,
 * concurrent writers on one name).
 *
 * Usage, from a test_*.c main():
 *
 *   static gcs_store *open_mem(void *ctx) { return gcs_mem_new(NULL, NULL); }
 *   static void close_mem(gcs_store *s, void *ctx) { gcs_store_free(s); }
 *   ...
 *   return store_contract_run("mem", open_mem, close_mem, NULL);
 *
 * The suite calls OPEN once before each test and CLOSE once after it (also
 * when the test failed), with the CTX given.  Every test puts its objects
 * under a prefix of its own ("ct<pid>x<seq>/..."), so OPEN may hand out a
 * fresh empty store or the same shared one (a bucket on a fake server).
 * The store must be safe to call from several threads at once (one test
 * runs 8 threads on one store).
 */
#ifndef LOCKGATE_STORE_CONTRACT_H
#define LOCKGATE_STORE_CONTRACT_H

#include "gcs/gcs.h"

/* Make a store for one test; NULL fails that test.  The suite owns the
 * returned store until it hands it back to the close callback. */
typedef gcs_store *(*store_contract_open_fn)(void *ctx);
/* Take back a store made by the open callback (free it, wipe its files). */
typedef void (*store_contract_close_fn)(gcs_store *s, void *ctx);

/* Run the contract tests as one cmocka group named SUITE_NAME.  Returns the
 * number of failed tests (0 = all passed), as cmocka_run_group_tests does.
 * Not reentrant: run one suite at a time per process. */
int store_contract_run(const char *suite_name, store_contract_open_fn open,
    store_contract_close_fn close, void *ctx);

#endif
