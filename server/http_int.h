/*
 * http_int.h: internal to the HTTP layer (http.c, http_conn.c, http_read.c,
 * http_loop.c, routes.c, params.c).
 */
#ifndef LOCKGATE_HTTP_INT_H
#define LOCKGATE_HTTP_INT_H

#include <microhttpd.h>
#include <pthread.h>
#include <semaphore.h>

#include "rt/rt.h"

#include "params.h"
#include "srv.h"

/*
 * Storage workers (file:// and gs://, whose calls block): a request that
 * may call the storage is suspended by its polling thread and run by a
 * worker, so a polling thread never waits for the storage and no
 * connection waits behind another connection's storage call.  The
 * worker's answer is kept in the request and queued by the polling thread
 * after the resume (as a waiter's is).
 */
typedef struct srv_worker {
	struct srv_jobs *jobs;
	pthread_t thread;
	sem_t go;                /* posted with `req` set, or to stop */
	struct srv_req *req;     /* handed over while idle */
	struct srv_worker *idle; /* next idle worker */
} srv_worker;

typedef struct srv_jobs {
	pthread_mutex_t mu;
	struct srv_req *head, *tail; /* requests no worker was free for */
	srv_worker *idle;            /* LIFO: the warmest first */
	srv_worker *workers;
	int nworkers;
	bool stop;
} srv_jobs;

/*
 * An event loop: one thread with its own libmicrohttpd daemon (external
 * epoll mode, on its own SO_REUSEPORT listen socket, so the kernel spreads
 * new connections over the loops) and an rt_loop that runs the requests
 * of a network store (gs://) as tasks: a task waiting on the storage
 * holds neither this thread nor any other.
 */
typedef struct srv_loop {
	struct srv_server *srv;
	rt_loop *io;
	struct MHD_Daemon *daemon;
	int listen_fd; /* until the daemon has it */
	pthread_t thread;
	bool started;
	int stop;              /* atomic: srv_stop asks the thread to end */
	int quiesce;           /* atomic: srv_stop asks it to stop accepting */
	int quiesced;          /* atomic: it has */
	int64_t stop_by;       /* mono ms: leave even with tasks alive */
	int run_again;         /* atomic: the daemon has work (its fd fired, a
			    connection was resumed on any thread): run it
			    without waiting */
	struct srv_req *spare; /* finished requests for reuse (this loop's
				  thread only): a request is ~6 KiB, past
				  malloc's per-thread cache */
	int nspare;
	struct srv_target *conns; /* this loop's connections (its thread) */
	unsigned nconns;          /* in that list */
	unsigned max_conns;       /* its share of the connection limit */
	int64_t next_sweep;       /* mono ms: look for slow heads then */
} srv_loop;

struct srv_server {
	const srv_config *cfg;
	api_service *svc;
	auth_ctx *auth;
	srv_waits *waits;
	srv_jobs *jobs; /* file://: storage workers; NULL: none */
	bool tasks;     /* gs://: storage requests run as loop tasks */
	srv_loop *loops;
	int nloops;
	int port;
	volatile int draining;
	int active; /* requests between first call and completion */
};

/* Bytes of a request path kept for routing: the longest route is
 * "/v1/locks/" + a 256-byte name + ":forceRelease". */
#define SRV_PATH_MAX 512

/* One request, from the first call of the access handler to completion. */
typedef struct srv_req {
	srv_server *srv;
	srv_loop *loop; /* whose daemon has the connection */
	struct MHD_Connection *conn;
	/* The path as received, up to the '?', never decoded: requests are
	 * routed on it. */
	char path[SRV_PATH_MAX + 1];
	bool close; /* answer with Connection: close */
	const char *method;
	int64_t start_us;
	char *body; /* NUL-terminated */
	size_t len, cap;
	bool too_large;
	srv_params params; /* body and query parameters */
	/* For the log line and metrics: */
	const char *route;
	char lock[API_NAME_MAX + 1];
	char owner[API_OWNER_MAX + 1];
	int status;
	char trace[160];    /* logging.googleapis.com/trace */
	const char *reason; /* why a token was refused (static string) */
	char error[256];    /* the message of a 5xx answer */
	bool env_format;    /* answer as KEY='value' lines */
	/* Identity, when the route needed one. */
	auth_identity id;
	bool have_id;
	/* Waiting (acquire with wait > 0). */
	bool waiting;
	bool wait_done;
	api_acquire_req acq;
	srv_waiter waiter;
	/* Run by a storage worker (see srv_jobs) or as a loop task. */
	struct srv_req *job_next;
	bool in_job;   /* a worker or task runs it: answers are kept */
	bool job_done; /* the worker or task finished */
	enum MHD_Result job_rc;
	struct MHD_Response *job_resp; /* the kept answer */
	int job_status;
	/* Who must resume the suspended connection: the last of the worker
	 * and the waiter to finish. */
	int holds;
} srv_req;

/* --- http.c --- */
/* Queue a JSON answer (BODY stolen, may be NULL for no body). */
enum MHD_Result http_json(srv_req *r, int status, json_t *body);
/* Queue an API error; LOCK (may be NULL) is shown as the current holder. */
enum MHD_Result
http_error(srv_req *r, const api_err *err, const api_lock *lock);
/* Queue an error from a code, reason and message. */
enum MHD_Result http_fail(srv_req *r, api_code code, const char *reason,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Queue TEXT (LEN bytes, malloc'ed; stolen) as the body. */
enum MHD_Result
http_body(srv_req *r, int status, const char *ctype, char *text, size_t len);
enum MHD_Result http_text(srv_req *r, int status, const char *ctype,
    const void *data, size_t len, bool copy);
/* Queue RESP (consumed) as it is; kept for the polling thread when a
 * storage worker runs R. */
enum MHD_Result http_send(srv_req *r, int status, struct MHD_Response *resp);
/* One of the parties holding R's connection suspended is done; the last
 * resumes it.  R must not be touched after this. */
void http_release_hold(srv_req *r);

/* --- routes.c --- */
/* Route R on its raw path (r->path) and answer it. */
enum MHD_Result routes_dispatch(srv_req *r);
enum MHD_Result routes_finish_wait(srv_req *r);

/*
 * What http_uri_seen saw of the request target a connection sends, kept for
 * the access handler, which libmicrohttpd gives the decoded path only.
 * One per connection, from its start to its close, rather than one per
 * request: a request line that libmicrohttpd 0.9.75 fails to parse (too
 * many arguments) never reaches the handler, and a context made for it in
 * http_uri_seen never came back to be freed.
 */
typedef struct srv_target {
	struct srv_target *prev, *next; /* the loop's connections */
	int fd;                         /* the connection's socket */
	/* Mono ms by which the next request head must be in (0: none is
	 * pending, a request is being served): see http_sweep_slow_heads. */
	int64_t head_by;
	char path[SRV_PATH_MAX + 1]; /* up to the '?', not decoded */
	size_t len;                  /* of the target, up to a raw NUL */
	bool path_too_long;          /* path is empty then */
	bool encoded_nul;            /* "%00" in the target */
	bool many_args;              /* over SRV_QUERY_ARGS_MAX arguments */
	bool served;                 /* a request was answered on it */
	bool head_begun;             /* the next head's first line is in */
} srv_target;

/* http.c */
/* The loop whose thread the caller runs on (set by its loop_main). */
extern __thread srv_loop *http_tl_loop;
size_t http_query_args(const char *target);
void http_stop_reading(struct MHD_Connection *conn);
enum MHD_Result http_access_handler(void *cls, struct MHD_Connection *conn,
    const char *url, const char *method, const char *version,
    const char *upload_data, size_t *upload_data_size, void **con_cls);
void http_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe);
srv_jobs *http_jobs_new(int n);
void http_jobs_stop(srv_jobs *j);
void http_jobs_free(srv_jobs *j);

/* http_conn.c */
void http_conn_notify(void *cls, struct MHD_Connection *conn,
    void **socket_context, enum MHD_ConnectionNotificationCode code);
void http_sweep_slow_heads(srv_loop *lp);
srv_target *http_target_of(struct MHD_Connection *conn);
void *http_uri_seen(void *cls, const char *uri, struct MHD_Connection *conn);

/* http_read.c */
enum MHD_Result http_refuse(srv_req *r, const char *reason, const char *why);
enum MHD_Result http_req_begin(srv_req *r, const srv_target *t,
    const char *method, const char *url, const char *version);

#endif
