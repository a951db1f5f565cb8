/*
 * srv.h: the daemon: configuration, HTTP, waiting, logs.  The only module
 * that knows libmicrohttpd.  Shared structs, limits and prototypes, grouped
 * by the file that defines them.
 */
#ifndef LOCKGATE_SRV_H
#define LOCKGATE_SRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "api/api.h"
#include "gcs/gcs_client.h"
#include "rt/rt.h"
#include "auth.h"

#define LOCKGATE_VERSION "0.1.0"

/* Limits of the HTTP layer. */
#define SRV_BODY_MAX              (64 * 1024) /* bytes of a request body */
#define SRV_QUERY_VALUE_MAX       4096        /* bytes of one query value */
/* Query arguments a request may carry (the API takes at most eight): more
 * gets a 400 before libmicrohttpd stores them.  0.9.75 keeps ~64 bytes per
 * argument in the connection's memory below; from about 450 it runs out
 * and cannot even queue its own error, so the client waited for the idle
 * timeout and got an empty reply. */
#define SRV_QUERY_ARGS_MAX        64
/* MHD's memory per connection.  It holds a header of up to about 28 KB, so
 * a 20 KB token gets our JSON 401 (a bigger header gets MHD's 431); MHD
 * clears it between requests, so more costs CPU on every request. */
#define SRV_CONN_MEMORY           (32 * 1024)
#define SRV_CONN_LIMIT_DEFAULT    4000
#define SRV_CONN_TIMEOUT_DEFAULT  60 /* s an idle connection lives */
/* Waiters hold connections: by default they may take half of them, and
 * one owner a quarter of that, so that a flood of waiters never leaves a
 * holder without a connection to refresh or release on. */
#define SRV_WAITERS_DIVISOR       2
#define SRV_OWNER_WAITERS_DIVISOR 4
#define SRV_WAITERS_RETRY_AFTER   5    /* s, with 429 too_many_waiters */
#define SRV_HEAD_TIMEOUT_DEFAULT  10   /* s for a request head to arrive */
#define SRV_SWEEP_MS              1000 /* how often slow heads are looked for */
/* Connections a loop accepts past its share of the limit only to answer
 * them 503 at once (past these, new ones wait in the kernel's backlog). */
#define SRV_CONN_OVERFLOW         256
#define SRV_LOG_INTERVAL_MS       1000 /* libmicrohttpd's warnings: one a second */
#define SRV_THREADS_MAX           256
#define SRV_LOOPS_MAX             8 /* HTTP event loops: one per CPU up to this */
#define SRV_LOOP_IDLE_MS          1000 /* a loop with nothing due looks around */
#define SRV_REQ_SPARE             64 /* finished requests a loop keeps for reuse */
#define SRV_LISTEN_BACKLOG        1024
#define SRV_DRAIN_MAX_MS          7000 /* SIGTERM: exit within 8 s */
#define SRV_STORE_GIVE_UP_MARGIN_MS \
	1000                               /* store calls end this long before
					    the drain budget does */
#define SRV_DEV_TOKEN_TTL      (12 * 3600) /* s, the dev mode's token */
/* Hosts whose URLs the dashboard makes links of: where lockctl's default
 * holders (a CI job's URL) point. */
#define SRV_LINK_HOSTS_DEFAULT "github.com,gitlab.com"
#define SRV_LINK_HOSTS_MAX     32
/* Where lockgate serves and keeps its leases when nothing says. */
#define SRV_XSTR(x)            SRV_STR(x)
#define SRV_STR(x)             #x
#define SRV_PORT_DEFAULT       8080
#define SRV_LISTEN_DEFAULT     "127.0.0.1:" SRV_XSTR(SRV_PORT_DEFAULT)
#define SRV_STORE_DEFAULT      "file://./lockgate-data"

/* Limits of waiting (design section 3). */
#define SRV_POLL_MIN_MS       100  /* first re-poll after a refusal */
#define SRV_POLL_MAX_MS       1000 /* cap: the cross-instance bound */
#define SRV_HANGUP_CHECK_MS   250  /* how often hang-ups are noticed */
/* srv_waits_free: how long it waits for the lock tasks to end. */
#define SRV_WAIT_TASKS_END_MS 2000

/* --- config.c --- */

typedef struct srv_config {
	char *listen; /* "host:port" */
	char *store;  /* store URL */
	int threads;
	int max_wait;
	int max_connections;
	int max_waiters;       /* 0: max_connections / SRV_WAITERS_DIVISOR */
	int max_owner_waiters; /* 0: max_waiters / SRV_OWNER_WAITERS_DIVISOR */
	int connection_timeout;
	int head_timeout; /* s a connection's request head may take */
	bool public_read;
	bool metrics_public;
	char *link_hosts; /* comma-separated hosts (host or host:port) */
	bool check_only;  /* --check */
	bool dev_mode;    /* set by main when no key is configured */
	auth_config auth; /* strings point into this struct's storage */
	gcs_settings gcs; /* gs://: given to gcs_configure; the same */
	char *owned[64];  /* strings to free */
	int nowned;
} srv_config;

/* Parse ARGV and the LOCKGATE_* environment into CFG (flags win).  0 on
 * success; -1 with a message naming the option and why in ERR; 1 when
 * --help or --version printed and the process should exit 0. */
int srv_config_load(srv_config *cfg, int argc, char **argv, char *err,
    size_t errlen);
void srv_config_free(srv_config *cfg);
/* Split "host:port" ("[v6]:port" too).  0 or -1. */
int srv_parse_listen(const char *listen, char *host, size_t hostlen, int *port);
int srv_host_is_loopback(const char *host);

/* --- devmode.c --- */

/* The development mode for CFG (no key configured): a random secret
 * written into SECRET (LEN >= 65 bytes, the caller wipes it), which
 * CFG->auth now points at, and an admin token in *TOKEN (free it).  The
 * verifier, or NULL with ERR (off loopback, say). */
auth_ctx *srv_dev_mode(srv_config *cfg, char *secret, size_t len, char **token,
    char *err, size_t errlen);
/* Where a dev server on PORT with STORE keeps its secret
 * ($XDG_RUNTIME_DIR, else a file:// store's directory).  0, or -1 when
 * there is no such place (mem:// without XDG_RUNTIME_DIR). */
int srv_dev_secret_path(const char *store, int port, char *out, size_t len);
/* Write SECRET to PATH, mode 0600, replacing a stale file.  0 or -1 with
 * ERR.  The caller unlinks PATH at exit. */
int srv_dev_secret_save(const char *path, const char *secret, char *err,
    size_t errlen);
/* The banner on stderr: token, curl line, dashboard, and how to get a
 * fresh token with SELF, the program as it was started (`make run`:
 * ./build/lockgate); SECRET_PATH NULL: there is no secret file. */
void srv_dev_banner(const srv_config *cfg, const char *self, const char *token,
    int port, const char *secret_path);
/* `lockgate token --dev ...`: an admin token from a running dev server's
 * secret file.  The process's exit status. */
int srv_dev_token_main(int argc, char **argv);

/* --- log.c --- */

/* One JSON object per line on stdout: severity, message, time, then
 * FIELDS (stolen, may be NULL).  Never pass a token or a lease_id. */
void srv_log(const char *severity, const char *message, json_t *fields);
void srv_logf(const char *severity, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same shape, for the hot path: the request line and lock events.
 * NULL or "" fields are left out.  ERROR is the message of a 5xx answer,
 * so that the line says why. */
void
srv_log_request(const char *severity, const char *method, const char *route,
    int status, double latency_ms, const char *lock, const char *owner,
    const char *reason, const char *error, const char *trace);
/* REASON: a force release's, given by the admin (NULL otherwise). */
void srv_log_event(const char *severity, const char *event, const char *lock,
    const char *owner, const char *holder, const char *actor,
    const char *reason, int64_t token);
/* From begin to end, this thread's lines are batched (an HTTP loop); the
 * thread calls flush before it blocks. */
void srv_log_batch_begin(void);
void srv_log_flush(void);
void srv_log_batch_end(void);

/* --- drops.c --- */

/* Clients that went away, as counted in /metrics and logged in
 * aggregate (at most one line every SRV_LOG_INTERVAL_MS for them all). */
typedef enum srv_drop_kind {
	SRV_DROP_WAITER,    /* a waiting acquire whose client left */
	SRV_DROP_HEAD,      /* a connection its client closed with a request
			       head pending */
	SRV_DROP_SLOW_HEAD, /* a connection closed for a slow request head */
	SRV_DROP_KINDS
} srv_drop_kind;
/* N of KIND went away: counted now, logged with the next line. */
void srv_drop(srv_drop_kind kind, unsigned n);
/* Log one line for what went away since the last, if any, and if the
 * last was SRV_LOG_INTERVAL_MS ago or NOW (shutdown).  Thread-safe. */
void srv_drops_report(bool now);

/* --- http_loop.c --- */

typedef struct srv_server srv_server;

/* A server for CFG (borrowed, outlives it); not serving yet.  Create it
 * first so that it can be the api's event context. */
srv_server *srv_new(const srv_config *cfg);
/* Serve with SVC and AUTH (both borrowed).  0, or -1 with ERR. */
int srv_start(srv_server *s, api_service *svc, auth_ctx *auth, char *err,
    size_t errlen);
/* The port actually bound (useful with port 0). */
int srv_port(const srv_server *s);
/* Graceful stop: refuse new work, answer every waiter 503, let in-flight
 * requests finish, stop.  Bounded by SRV_DRAIN_MAX_MS. */
void srv_stop(srv_server *s);
void srv_free(srv_server *s);
/* The api event hook: logs, metrics, timeline, waking waiters. */
void srv_on_event(void *ctx, const api_event *ev);
bool srv_draining(const srv_server *s);

/* --- routes.c --- */

/* Print every route served, "METHOD /path" a line (lockgate --routes). */
void srv_routes_print(void);

/* --- wait.c --- */

typedef struct srv_waits srv_waits;
typedef struct srv_waiter srv_waiter;

/* What a waiter is told when its wait ends. */
typedef void (*srv_wait_done_fn)(srv_waiter *w, void *ctx);

struct srv_waiter {
	srv_waiter *next;           /* queue of its lock, FIFO */
	const api_acquire_req *req; /* borrowed from the request */
	srv_wait_done_fn done;      /* called once, no lock held */
	/* Asked before each try to take the lock: API_OK, or the code (and
	 * ERR) to end the wait with, the caller no longer being allowed. */
	int (*allowed)(srv_waiter *w, api_err *err);
	void *ctx;
	/* Where its lock's task runs if it is the lock's first waiter here
	 * (the loop of its connection). */
	rt_loop *loop;
	int fd;              /* the client's socket, for hang-ups */
	int64_t start_ms;    /* monotonic */
	int64_t deadline_ms; /* monotonic */
	/* The outcome, set before done(): */
	int rc;        /* api_code */
	api_lock lock; /* lease (API_OK) or holder */
	api_err err;
	bool hung_up;   /* the client went away */
	bool cancelled; /* removed without an answer */
	/* An attempt failed on the storage after its insert may have been
	 * applied: a wait that ends without a grant gives back whatever
	 * lease req->lease_id may hold. */
	bool maybe_granted;
};

/* Waiters for SVC; at most MAX_TOTAL at once, MAX_OWNER of one owner. */
srv_waits *srv_waits_new(api_service *svc, size_t max_total, size_t max_owner);
/* Every remaining waiter is answered 503; once the lock tasks have ended
 * (bounded: SRV_WAIT_TASKS_END_MS), W is freed. */
void srv_waits_free(srv_waits *w);
/* What srv_waits_add answers. */
enum {
	SRV_WAITS_QUEUED = 0,
	SRV_WAITS_STOPPING = -1,  /* shutting down (or out of memory) */
	SRV_WAITS_FULL = -2,      /* the waiter cap is reached */
	SRV_WAITS_OWNER_FULL = -3 /* this owner's waiter cap is reached */
};
/* Queue W behind the earlier waiters of its lock: SRV_WAITS_QUEUED, or
 * why not (W untouched). */
int srv_waits_add(srv_waits *ws, srv_waiter *w);
/* 1 when this instance has waiters queued for NAME. */
int srv_waits_has(srv_waits *ws, const char *name);
/* 1 when an exclusive acquire (limit 1) waits for NAME here: new shared
 * leases wait behind it, so that writers do not starve (per instance). */
int srv_waits_has_writer(srv_waits *ws, const char *name);
/* A lease on NAME ended on this instance: poll it now. */
void srv_waits_wake(srv_waits *ws, const char *name);
/* The pace of one lock's polls for its head waiter. */
typedef struct srv_poll_pace {
	int backoff; /* ms */
	unsigned seed;
} srv_poll_pace;
void srv_poll_pace_init(srv_poll_pace *p, unsigned seed);
/* After a poll, how long until the next (ms).  While the head is REFUSED
 * (the lock still held) the backoff doubles from SRV_POLL_MIN_MS up to
 * SRV_POLL_MAX_MS; once the head's wait ended it starts again at the
 * minimum.  The answer is uniform in [backoff/2, backoff], and no later
 * than HINT_MS, the ms until the lease seen may be taken over (below 0:
 * none). */
int srv_poll_next(srv_poll_pace *p, bool refused, int64_t hint_ms);
/* Answer every waiter 503 shutting_down and refuse new ones. */
void srv_waits_shutdown(srv_waits *ws);
size_t srv_waits_count(srv_waits *ws);

#endif
