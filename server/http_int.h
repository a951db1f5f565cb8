/*
 * http_int.h: internal to the HTTP layer (http.c, http_conn.c, http_read.c,
 * http_loop.c, routes.c, params.c).
 */
#ifndef LOCKGATE_HTTP_INT_H
#define LOCKGATE_HTTP_INT_H

#include <microhttpd.h>
#include <pthread.h>

#include "rt/rt.h"

#include "params.h"
#include "srv.h"

/*
 * An event loop: one thread with its own libmicrohttpd daemon (external
 * epoll mode, on its own SO_REUSEPORT listen socket, so the kernel spreads
 * new connections over the loops) and an rt_loop that runs every request
 * as a task: a task waiting on the storage (a gs:// answer, a file://
 * commit, an rt_waiter its committer wakes) holds neither this thread
 * nor any other.
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
	char error[GCS_DETAIL_MAX]; /* a 5xx answer's api_err_detail */
	bool env_format;            /* answer as KEY='value' lines */
	/* Identity, when the route needed one. */
	auth_identity id;
	bool have_id;
	/*
	 * Its task, and who resumes the connection.  The task runs the
	 * request; when it first waits, the connection is suspended and its
	 * answers are kept (KEPT) until its end resumes the connection and
	 * the handler queues them.  A wait for a lock (start_wait, the
	 * task's last step) hands the connection to the waiter instead: it
	 * is suspended (if the task has not done so) and the waiter's end
	 * resumes it (WAITING).  So exactly one party resumes it.
	 */
	bool kept;    /* the task waited: answers are kept */
	bool ended;   /* the task ended after a wait: queue what it kept */
	bool waiting; /* a waiter has the connection (routes_finish_wait) */
	api_acquire_req acq;
	srv_waiter waiter;
	struct srv_req *spare_next; /* the loop's spare requests */
	enum MHD_Result task_rc;
	struct MHD_Response *kept_resp; /* the kept answer */
	int kept_status;
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
/* Queue RESP (consumed) as it is; kept while R's task has the connection
 * suspended (see srv_req). */
enum MHD_Result http_send(srv_req *r, int status, struct MHD_Response *resp);
/* Resume R's suspended connection: by its one owner (see srv_req), from
 * any thread.  R must not be touched after this. */
void http_resume(srv_req *r);

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
	bool space_or_ctl;           /* a raw space or control byte in it */
	bool odd_target; /* one a parser in front may read otherwise */
	bool many_args;  /* over SRV_QUERY_ARGS_MAX arguments */
	bool served;     /* a request was answered on it */
	bool head_begun; /* the next head's first line is in */
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
