/*
 * group_contract.h: semaphores and shared locks (api/group.c) over any
 * store, with its writes counted; store_contract_run runs it after the
 * store's own contract, with the same callbacks (store_contract.h).
 */
#ifndef LOCKGATE_GROUP_CONTRACT_H
#define LOCKGATE_GROUP_CONTRACT_H

#include "store_contract.h"

/* The number of failed tests (0 = all passed). */
int group_contract_run(const char *suite_name, store_contract_open_fn open,
    store_contract_close_fn close, void *ctx);

#endif
