/*
 * gcs_multi.h: the store client's transfers on a runtime loop (rt/rt.h).
 *
 * Each loop keeps, for the tasks that run on it, a libcurl multi handle
 * driven from the loop's epoll and timers, and the store client's HTTP
 * handles, so that no storage handle or connection moves between threads.
 * This is the only place where the runtime and libcurl meet.
 */
#ifndef LOCKGATE_GCS_MULTI_H
#define LOCKGATE_GCS_MULTI_H

#include <curl/curl.h>

/* Idle storage connections a loop keeps open.  libcurl's default keeps 4
 * per transfer in flight, so a lull closes connections that the next
 * burst must open again. */
#define GCS_MULTI_CONNS    256
/* Connections a loop opens to one host once that host answered over
 * HTTP/2 (see host_cap in gcs_multi.c): one carries every transfer, the
 * second covers a GOAWAY'd one that is still draining. */
#define GCS_MULTI_H2_CONNS 2

/* Run the transfer of H to its end and return its CURLcode: in a task, on
 * the task's loop's multi handle while the thread does other work;
 * elsewhere with curl_easy_perform. */
CURLcode gcs_multi_perform(CURL *h);

/* Objects a loop keeps for its own tasks (the store client's HTTP
 * handles).  A handle used by one loop only stays on one thread, so what
 * libcurl allocates during a transfer is freed by the thread, and the
 * malloc arena, that allocated it; a handle shared between threads made
 * their arenas' locks contend (0.65 futex calls per gs:// cycle at 64
 * clients).  Objects are told apart by the function that frees them.
 * gcs_multi_cache_put: keep OBJ (FREE_FN frees it when the loop is
 * freed); 0, or -1 when the caller is not in a task, GCS_MULTI_CACHE_MAX
 * are kept, or memory ran out, and the caller still owns OBJ.
 * gcs_multi_cache_take: the object put last with FREE_FN by a task of the
 * calling task's loop, now the caller's; NULL when there is none or the
 * caller is not in a task. */
#define GCS_MULTI_CACHE_MAX 64
int gcs_multi_cache_put(void *obj, void (*free_fn)(void *));
void *gcs_multi_cache_take(void (*free_fn)(void *));

#endif
