/*
 * gcs_multi.h: the store client's transfers, every one of the process on
 * one libcurl multi handle driven by the storage thread (its own runtime
 * loop, rt/rt.h), so that all callers share one cache of connections:
 * HTTP/1.1 keep-alive connections, at most as many as transfers were in
 * flight at once, or HTTP/2 ones carrying them all.  This is the only
 * place where the runtime and libcurl meet.
 */
#ifndef LOCKGATE_GCS_MULTI_H
#define LOCKGATE_GCS_MULTI_H

#include <stdint.h>

#include <curl/curl.h>

/* Idle storage connections kept open.  libcurl's default keeps 4 per
 * transfer in flight, so a lull closes connections that the next burst
 * must open again. */
#define GCS_MULTI_CONNS    256
/* Connections opened to one host once that host answered over HTTP/2
 * (see host_cap in gcs_multi.c): one carries every transfer, the second
 * covers a GOAWAY'd one that is still draining. */
#define GCS_MULTI_H2_CONNS 2
/* The storage thread's longest sleep when nothing is due. */
#define GCS_MULTI_IDLE_MS  1000

/* Run the transfer of H (its timeout set) on the storage thread, started
 * when it is not running, and return its CURLcode.  A task yields its
 * thread meanwhile; any other caller blocks. */
CURLcode gcs_multi_perform(CURL *h);

/* Stop the storage thread, once its transfers have ended, waiting for it
 * at most WAIT_MS: 0, or -1 when a transfer still runs (the thread ends
 * after it, on its own).  Its connections close.  No transfer may begin
 * during the call; one begun after it starts the thread again. */
int gcs_multi_stop(int64_t wait_ms);

/* For tests: socket events the storage thread has handled, and the
 * epoll_ctl calls of its loop (rt_loop_epoll_ctls), so far. */
unsigned long gcs_multi_events(void);
unsigned long gcs_multi_epoll_ctls(void);

#endif
