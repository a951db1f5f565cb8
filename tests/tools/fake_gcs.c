/*
 * fake_gcs.c: a fake Google Cloud Storage JSON API for tests, plus a fake
 * metadata server and a fake OAuth token endpoint, in one process.
 *
 *   fake_gcs [--port N] [--dialect gcs|emulator|firebase|fake-gcs-server]
 *            [--clock-offset-ms MS]
 *            [--rate-limit] [--token-expires S] [--require-auth]
 *            [--oauth-pubkey PEM]
 *
 * Listens on 127.0.0.1 only (port 0 = any free port), prints the bound port
 * on stdout as one line, and serves until SIGTERM or SIGINT.
 *
 * The GCS subset, the way GCS does it: objects.insert (multipart and media),
 * get, patch (metadata merge, null deletes a key), delete, list (prefix,
 * maxResults, pageToken, startOffset; no "items" when empty); generations
 * unique and
 * increasing across delete and re-create (microsecond clock), metageneration
 * per generation, timeCreated/updated, a Date header on every answer (on
 * the fake's clock, which --clock-offset-ms moves), ifGenerationMatch /
 * ifMetagenerationMatch (412) and ifGenerationNotMatch /
 * ifMetagenerationNotMatch (304), 404s, GCS's error JSON, and with
 * --rate-limit one mutation per second per object name (429), and partial
 * responses: "fields" cuts a 2xx answer down to the members it selects
 * (a,b  a/b  a(b,c)  *), a malformed selection is a 400.  Any bucket
 * exists except names starting with "missing-" (404).
 *
 * Dialects (--dialect, else FAKE_GCS_DIALECT, else gcs; config?dialect=
 * switches a running fake).  "gcs" is Cloud Storage as above.
 * "emulator" answers as Google's JSON API emulator does (facts §8,
 * measured): a delete is 200 with an empty body; an error is
 * {"error":{"code":N,"message":"<JSON text>"}}, the JSON text being
 * {"error": {"errors": [{"domain": "global", "message": M}]}}; a list
 * ignores maxResults and pageToken (every match in one page, no
 * nextPageToken) and always has "items", [] when empty; an uploaded
 * object's metadata gains x_emulator_upload and x_testbench_upload;
 * generations count milliseconds (13 digits); a patch answer carries
 * "acl" and "owner" whatever "fields" selects; and a bucket exists only
 * once made with POST /storage/v1/b?project=P {"name":"B"} (409 when it
 * exists; the buckets made outlive config?dialect= and reset).
 * "firebase" answers as the Cloud Storage emulator of firebase-tools
 * 15.34.2 does (run beside this fake by tests/interop/test_firebase.sh):
 * it reads no precondition, so every insert and delete is applied
 * whatever ifGenerationMatch and ifMetagenerationMatch say; a patch under
 * /storage/v1/ is 501 with the text "Not Implemented" (the emulator
 * routes patch only at /b/...); "fields" is ignored; generations count
 * milliseconds (13 digits).  A store that cannot referee locks, for
 * lockgate's check of its storage (gcs/referee.c).
 * "fake-gcs-server" answers as fsouza/fake-gcs-server does with its
 * memory backend (read from its source, at and after its pull request
 * 2343 of 2026-08-25, which made patch and delete read their
 * preconditions; not run here: it is Go, and there is no network):
 * preconditions are read, but an object's metageneration stays 1 and a
 * patch moves neither it, nor the generation, nor "updated" (the
 * filesystem backend, its default, mints a new generation instead); a
 * patch answer has no metageneration, timeCreated or kind; a metadata key
 * patched to null is kept, as ""; a delete is 200 with the body null;
 * "fields" is ignored; and a bucket exists only once made, as in the
 * emulator dialect.  Another store that cannot referee locks: its
 * refreshes would not move a lease's expiry.
 *
 * The control endpoint (GET or POST, parameters in the query string):
 *   /_fake/fault?op=OP&kind=KIND[&count=N][&ms=MS][&delay=MS]   queue a fault
 *       OP: insert get patch delete list write(any of the 3 writes)
 *           any(any GCS op) token metadata
 *       KIND: an HTTP status (503, 429, 500, 408, 401, ...) answered
 *           without applying (after DELAY ms when given: a slow error);
 *           reset (close the connection before applying); drop (apply,
 *           then close without an answer); latency (hold MS, then serve);
 *           noflavor (metadata: served without Metadata-Flavor: Google,
 *           the mark its answers carry); noprecond (served with its
 *           preconditions unread, as the firebase dialect serves all).
 *           COUNT requests (default 1; -1 = until cleared).  MS and DELAY
 *           are at most 60000.
 *   /_fake/clear-faults
 *   /_fake/config?rate_limit=0|1&clock_offset_ms=MS&token_expires=S
 *                &token_type=T (of the tokens issued; Bearer)
 *                &require_auth=0|1
 *                &date=0|1 (0: answers carry no Date header, as some
 *                proxies' do not; 1 by default)
 *                &dialect=gcs|emulator|firebase|fake-gcs-server
 *   /_fake/reset      objects, faults, counters, issued tokens and the
 *                     request log
 *   /_fake/revoke     every token issued so far stops working (401 with
 *                     --require-auth), as a revoked credential's do
 *   /_fake/stats      {"ops":{"insert":n,...},"writes":n,"reads":n,
 *                      "tokens_issued":n,"objects":n,"connections":n,
 *                      "latency_peak":n (most requests held at once by
 *                      latency faults),
 *                      "last_assertion":{claims}}
 *   /_fake/requests   the last requests: method, uri, op, status,
 *                     content_type, authorization, body
 * Token endpoints: GET /computeMetadata/v1/instance/service-accounts/
 * default/token (needs Metadata-Flavor: Google) and POST /token (form
 * grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT;
 * with --oauth-pubkey the RS256 signature is verified).  With
 * --require-auth every GCS request needs a Bearer token the fake issued
 * and that has not expired (401 otherwise).
 *
 * Threads: one libmicrohttpd epoll thread serves every connection.  With
 * a thread per connection, each request of a client holding many
 * keep-alive connections woke another fake thread, which preempted the
 * client on its own CPUs (a real bucket does not run there at all); now
 * one wake-up serves every connection that is ready.  A request held by a
 * latency or delay fault is suspended, never slept on: the hold thread
 * resumes it at its deadline and the request goes on where it stopped.
 * Held requests overlap, as a bucket's slow answers do, and never stall
 * the other connections; the control endpoint answers meanwhile.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <jwt.h>
#include <microhttpd.h>

#define BODY_MAX       (1 << 20) /* bytes of a request body */
#define LOG_MAX        512       /* requests kept in the log */
#define LOG_BODY_MAX   8192      /* bytes of a logged body */
#define FAULTS_MAX     64
#define TOKENS_MAX     4096
#define PAGE_MAX       1000
#define RATE_WINDOW_MS 1000 /* GCS: one mutation per second per object */
#define CONN_LIMIT     1000
#define CONN_TIMEOUT_S 60
#define LATENCY_MAX_MS 60000
#define PUBKEY_MAX     16384
/* Requests held at once: a connection holds at most one request, and
 * libmicrohttpd keeps at most CONN_LIMIT connections. */
#define HOLDS_MAX      CONN_LIMIT
#define BUCKETS_MAX    64 /* buckets made in the emulator dialect */
#define BUCKET_MAX     222

enum dialect {
	DIALECT_GCS,
	DIALECT_EMULATOR,
	DIALECT_FIREBASE,
	DIALECT_FAKE_GCS_SERVER
};

enum op {
	OP_INSERT,
	OP_GET,
	OP_PATCH,
	OP_DELETE,
	OP_LIST,
	OP_TOKEN,
	OP_METADATA,
	OP_BUCKET, /* buckets.insert */
	OP_OTHER,
	OP_N
};
static const char *op_names[OP_N] = { "insert", "get", "patch", "delete",
	"list", "token", "metadata", "bucket", "other" };

typedef struct obj {
	char *key; /* bucket "/" name */
	int64_t gen, metagen, created_ms, updated_ms;
	json_t *metadata; /* object of strings */
	char *cache_control;
	char *content_type;
} obj;

typedef struct rate_ent {
	char *key;
	int64_t last_ms;
} rate_ent;

typedef struct fault {
	char op[16];
	char kind[16];
	int count; /* -1: forever */
	int ms;    /* latency */
	int delay; /* before an error status */
} fault;

typedef struct logent {
	char *method, *uri, *ctype, *auth, *body;
	int op, status;
} logent;

typedef struct tokent {
	char tok[64];
	int64_t exp_ms;
} tokent;

static struct {
	pthread_mutex_t mu;
	obj *objs;
	size_t n, cap;
	rate_ent *rates;
	size_t nrates, caprates;
	int64_t last_gen;     /* gcs: microseconds */
	int64_t last_gen_ms;  /* emulator, firebase: milliseconds */
	enum dialect dialect; /* read by the libmicrohttpd thread only */
	char buckets[BUCKETS_MAX][BUCKET_MAX + 1]; /* made (emulator) */
	int nbuckets;
	int64_t clock_offset_ms;
	int no_date; /* answers without a Date header */
	int rate_limit;
	int64_t token_expires_s; /* expires_in of the tokens issued */
	char token_type[16];     /* and their token_type */
	int require_auth;
	fault faults[FAULTS_MAX];
	int nfaults;
	uint64_t ops[OP_N];
	uint64_t tokens_issued;
	uint64_t token_seq;
	uint64_t connections;        /* TCP connections accepted */
	int sleeping, sleeping_peak; /* requests held by a latency fault */
	json_t *last_assertion;
	logent log[LOG_MAX];
	size_t log_next;
	tokent tokens[TOKENS_MAX];
	size_t ntokens;
	char *pubkey;
	size_t pubkey_len;
} G = { .mu = PTHREAD_MUTEX_INITIALIZER,
	.token_expires_s = 3600,
	.token_type = "Bearer" };

/* Where a request is in a hold (a latency fault, a slow error). */
enum hold_state {
	HOLD_NONE,    /* not held: the fault, if any, is still to be taken */
	HOLD_WAITING, /* suspended until the hold thread resumes it */
	HOLD_DONE     /* resumed: serve it with the fault it took */
};

/* Per-request state, made by the URI log callback. */
typedef struct req {
	char *uri; /* raw request target, percent-encoding intact */
	char *body;
	size_t len;
	int too_big;
	int started;          /* the first (headers-only) call was seen */
	enum hold_state hold; /* counted in G.sleeping while HOLD_WAITING */
	int faulted;          /* flt was taken for this request */
	fault flt;
	json_t *sel; /* the "fields" selection of a GCS op, or NULL */
} req;

/* ---- time ---- */

static int64_t
real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t
fake_now_ms(void)
{
	return real_ms() + G.clock_offset_ms;
}

static void
rfc3339(int64_t ms, char *buf, size_t n)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char b[32];

	gmtime_r(&t, &tm);
	strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, n, "%s.%03dZ", b, (int)(ms % 1000));
}

static void
http_date(int64_t ms, char *buf, size_t n)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, n, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* ---- strings ---- */

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode S[0..n) into a new string; PLUS: '+' is a space. */
static char *
pct_decode(const char *s, size_t n, int plus)
{
	char *o = malloc(n + 1);
	size_t i, j = 0;

	if (o == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 &&
		    hexval(s[i + 2]) >= 0) {
			o[j++] =
			    (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else if (plus && s[i] == '+') {
			o[j++] = ' ';
		} else {
			o[j++] = s[i];
		}
	}
	o[j] = '\0';
	return o;
}

/* The decoded value of query parameter KEY in URI, or NULL (caller frees). */
static char *
qparam(const char *uri, const char *key)
{
	const char *q = strchr(uri, '?'), *p, *amp, *eq;
	size_t klen = strlen(key);

	if (q == NULL)
		return NULL;
	for (p = q + 1; *p; p = amp + 1) {
		amp = strchr(p, '&');
		if (amp == NULL)
			amp = p + strlen(p);
		eq = memchr(p, '=', (size_t)(amp - p));
		if (eq != NULL && (size_t)(eq - p) == klen &&
		    strncmp(p, key, klen) == 0)
			return pct_decode(eq + 1, (size_t)(amp - eq - 1), 1);
		if (eq == NULL && (size_t)(amp - p) == klen &&
		    strncmp(p, key, klen) == 0)
			return strdup("");
		if (*amp == '\0')
			break;
	}
	return NULL;
}

/* Query parameter KEY as a non-negative int64: 1 found, 0 absent, -1 bad. */
static int
qint(const char *uri, const char *key, int64_t *out)
{
	char *v = qparam(uri, key), *end;
	long long x;
	int rc = 1;

	if (v == NULL)
		return 0;
	errno = 0;
	x = strtoll(v, &end, 10);
	if (v[0] == '\0' || *end != '\0' || errno != 0 || x < 0)
		rc = -1;
	*out = x;
	free(v);
	return rc;
}

/* Form field KEY of an x-www-form-urlencoded BODY (caller frees). */
static char *
form_param(const char *body, const char *key)
{
	char *tmp, *v;
	size_t n = strlen(body);

	tmp = malloc(n + 2);
	if (tmp == NULL)
		return NULL;
	tmp[0] = '?';
	memcpy(tmp + 1, body, n + 1);
	v = qparam(tmp, key);
	free(tmp);
	return v;
}

/* ---- responses ---- */

/* Set while serving a request whose answer is to be dropped (the "drop"
 * fault): the operation is applied, nothing is queued, the connection is
 * closed.  Only the one libmicrohttpd thread reads or writes it, and only
 * serve() sets it, which clears it again on its way out: it covers one
 * call of serve(), never another request. */
static int drop_answer;

/* An answer with header HNAME: HVAL besides Date and Content-Type (none
 * when HNAME is NULL). */
static enum MHD_Result
send_raw_h(struct MHD_Connection *c, int status, const char *ctype,
    const char *body, const char *hname, const char *hval)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char date[64];

	if (drop_answer)
		return MHD_NO;

	r = MHD_create_response_from_buffer(body ? strlen(body) : 0,
	    (void *)(body ? body : ""), MHD_RESPMEM_MUST_COPY);
	if (r == NULL)
		return MHD_NO;
	if (!G.no_date) {
		http_date(fake_now_ms(), date, sizeof(date));
		MHD_add_response_header(r, MHD_HTTP_HEADER_DATE, date);
	}
	if (ctype != NULL)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (hname != NULL)
		MHD_add_response_header(r, hname, hval);
	ret = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
send_raw(struct MHD_Connection *c, int status, const char *ctype,
    const char *body)
{
	return send_raw_h(c, status, ctype, body, NULL, NULL);
}

static enum MHD_Result
send_json(struct MHD_Connection *c, int status, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	enum MHD_Result ret;

	json_decref(j);
	if (s == NULL)
		return MHD_NO;
	ret = send_raw(c, status, "application/json; charset=UTF-8", s);
	free(s);
	return ret;
}

/* The emulator's error: its message is JSON text of its own, with no
 * reason anywhere. */
static json_t *
emulator_err(int status, const char *domain, const char *msg)
{
	json_t *inner = json_pack("{s{s[{ssss}]}}", "error", "errors", "domain",
	    domain, "message", msg);
	char *text = inner ? json_dumps(inner, 0) : NULL;
	json_t *j = text
	    ? json_pack("{s{siss}}", "error", "code", status, "message", text)
	    : NULL;

	free(text);
	json_decref(inner);
	return j;
}

static enum MHD_Result
send_err(struct MHD_Connection *c, int status, const char *domain,
    const char *reason, const char *msg)
{
	if (G.dialect == DIALECT_EMULATOR)
		return send_json(c, status, emulator_err(status, domain, msg));
	return send_json(c, status,
	    json_pack("{s{sisss[{ssssss}]}}", "error", "code", status,
	        "message", msg, "errors", "domain", domain, "reason", reason,
	        "message", msg));
}

/* ---- partial responses: the "fields" parameter ----
 *
 * GCS answers a 2xx with only the members "fields" selects: a comma list
 * of names, "a/b" for member b of a, "a(b,c)" for several members of a,
 * "*" for every member; a selection under an array applies to each of its
 * elements.  A selection is kept as a JSON object: name -> true (the whole
 * member) or name -> object (a selection within it).  A malformed one is a
 * 400 before the request is applied. */

#define SEL_DEPTH_MAX 8

static int sel_list(const char **p, json_t *into, char close, int depth);

/* Merge selection SUB (stolen) for NAME into INTO: the whole member wins
 * over a part of it. */
static int
sel_put(json_t *into, const char *name, size_t n, json_t *sub)
{
	json_t *old = json_object_getn(into, name, n), *v;
	const char *k;

	if (old == NULL)
		return json_object_setn_new(into, name, n, sub);
	if (json_is_true(old) || json_is_true(sub)) {
		json_decref(sub);
		return json_object_setn_new(into, name, n, json_true());
	}
	json_object_foreach(sub, k, v)
	{
		if (sel_put(old, k, strlen(k), json_incref(v)) != 0) {
			json_decref(sub);
			return -1;
		}
	}
	json_decref(sub);
	return 0;
}

/* One path at *P: NAME, NAME/PATH or NAME(LIST). */
static int
sel_path(const char **p, json_t *into, int depth)
{
	const char *name = *p;
	size_t n = strcspn(name, ",/()");
	json_t *sub;

	if (n == 0 || depth > SEL_DEPTH_MAX)
		return -1;
	*p += n;
	if (**p != '/' && **p != '(')
		return sel_put(into, name, n, json_true());
	sub = json_object();
	if (sub == NULL)
		return -1;
	if (**p == '/') {
		(*p)++;
		if (sel_path(p, sub, depth + 1) != 0) {
			json_decref(sub);
			return -1;
		}
	} else {
		(*p)++;
		if (sel_list(p, sub, ')', depth + 1) != 0) {
			json_decref(sub);
			return -1;
		}
		(*p)++; /* the ')' */
	}
	return sel_put(into, name, n, sub);
}

/* Paths separated by commas up to CLOSE ('\0' or ')'), left at *P. */
static int
sel_list(const char **p, json_t *into, char close, int depth)
{
	for (;;) {
		if (sel_path(p, into, depth) != 0)
			return -1;
		if (**p == close)
			return 0;
		if (**p != ',')
			return -1;
		(*p)++;
	}
}

/* The selection of "fields" in URI: NULL with *bad = 0 when there is
 * none, NULL with *bad = 1 when it is malformed. */
static json_t *
sel_parse(const char *uri, int *bad)
{
	char *f = qparam(uri, "fields");
	const char *p = f;
	json_t *sel;

	*bad = 0;
	if (f == NULL)
		return NULL;
	sel = json_object();
	if (sel == NULL || sel_list(&p, sel, '\0', 0) != 0) {
		json_decref(sel);
		sel = NULL;
		*bad = 1;
	}
	free(f);
	return sel;
}

/* V (borrowed) cut down to selection SEL; new reference. */
static json_t *
sel_apply(json_t *v, const json_t *sel)
{
	json_t *out, *x, *s;
	const char *k;
	size_t i;

	if (json_is_true(sel))
		return json_incref(v);
	if (json_is_array(v)) {
		out = json_array();
		json_array_foreach(v, i, x)
		    json_array_append_new(out, sel_apply(x, sel));
		return out;
	}
	if (!json_is_object(v))
		return json_incref(v);
	out = json_object();
	json_object_foreach(v, k, x)
	{
		s = json_object_get(sel, k);
		if (s == NULL)
			s = json_object_get(sel, "*");
		if (s != NULL)
			json_object_set_new(out, k, sel_apply(x, s));
	}
	return out;
}

/* A 200 with J (stolen) cut down to the request's "fields", if any
 * (parsed once, by serve). */
static enum MHD_Result
send_selected(struct MHD_Connection *c, const req *rq, json_t *j)
{
	json_t *out;

	if (rq->sel == NULL || G.dialect == DIALECT_FAKE_GCS_SERVER ||
	    G.dialect == DIALECT_FIREBASE)
		return send_json(c, 200, j);
	out = sel_apply(j, rq->sel);
	json_decref(j);
	return send_json(c, 200, out);
}

/* ---- the log ---- */

static void
log_req(struct MHD_Connection *c, const char *method, const req *rq, int op,
    int status)
{
	const char *ct =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
	const char *au =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	logent *e;

	pthread_mutex_lock(&G.mu);
	e = &G.log[G.log_next % LOG_MAX];
	free(e->method);
	free(e->uri);
	free(e->ctype);
	free(e->auth);
	free(e->body);
	e->method = strdup(method);
	e->uri = strdup(rq->uri ? rq->uri : "");
	e->ctype = ct ? strdup(ct) : NULL;
	e->auth = au ? strdup(au) : NULL;
	e->body = rq->body ? strndup(rq->body, LOG_BODY_MAX) : NULL;
	e->op = op;
	e->status = status;
	G.log_next++;
	pthread_mutex_unlock(&G.mu);
}

/* ---- objects (G.mu held) ---- */

static long
find(const char *key)
{
	size_t lo = 0, hi = G.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(G.objs[mid].key, key);
		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -(long)lo - 1;
}

static void
obj_free(obj *o)
{
	free(o->key);
	json_decref(o->metadata);
	free(o->cache_control);
	free(o->content_type);
}

static json_t *
obj_json(const obj *o)
{
	char gen[32], mg[32], tc[40], up[40], id[64], *slash;
	json_t *j;

	snprintf(gen, sizeof(gen), "%lld", (long long)o->gen);
	snprintf(mg, sizeof(mg), "%lld", (long long)o->metagen);
	rfc3339(o->created_ms, tc, sizeof(tc));
	rfc3339(o->updated_ms, up, sizeof(up));
	snprintf(id, sizeof(id), "CAE=%lld", (long long)o->gen);
	slash = strchr(o->key, '/');
	j = json_pack("{ss ss ss# ss ss ss ss ss ss ss}", "kind",
	    "storage#object", "name", slash + 1, "bucket", o->key,
	    (int)(slash - o->key), "generation", gen, "metageneration", mg,
	    "size", "0", "timeCreated", tc, "updated", up, "etag", id,
	    "contentType",
	    o->content_type ? o->content_type : "application/octet-stream");
	if (j == NULL)
		return NULL;
	if (o->cache_control != NULL)
		json_object_set_new(j, "cacheControl",
		    json_string(o->cache_control));
	if (json_object_size(o->metadata) > 0)
		json_object_set_new(j, "metadata", json_deep_copy(o->metadata));
	return j;
}

/* 0 when the preconditions in RQ's URI hold for O (NULL: no live
 * object), else the HTTP status (412, 304, or 400 for a malformed
 * parameter).  Always 0 where they are not read: the firebase dialect, a
 * noprecond fault. */
static int
preconditions(const req *rq, const obj *o)
{
	const char *uri = rq->uri;
	int64_t v;
	int r;

	if (G.dialect == DIALECT_FIREBASE ||
	    (rq->faulted && strcmp(rq->flt.kind, "noprecond") == 0))
		return 0;
	if ((r = qint(uri, "ifGenerationMatch", &v)) < 0)
		return 400;
	if (r > 0 && (o ? o->gen : 0) != v)
		return 412;
	if ((r = qint(uri, "ifMetagenerationMatch", &v)) < 0)
		return 400;
	if (r > 0 && (o == NULL || o->metagen != v))
		return 412;
	if ((r = qint(uri, "ifGenerationNotMatch", &v)) < 0)
		return 400;
	if (r > 0 && (o == NULL || (v != 0 && o->gen == v)))
		return 304; /* 0 means "a live version exists" */
	if ((r = qint(uri, "ifMetagenerationNotMatch", &v)) < 0)
		return 400;
	if (r > 0 && (o == NULL || o->metagen == v))
		return 304;
	return 0;
}

/* A new generation: GCS's count microseconds (16 digits), the
 * emulator's milliseconds (13 digits); unique either way. */
static int64_t
new_generation(void)
{
	int64_t us;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	us = ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000) +
	    G.clock_offset_ms * 1000;
	if (G.dialect == DIALECT_EMULATOR || G.dialect == DIALECT_FIREBASE) {
		G.last_gen_ms =
		    us / 1000 > G.last_gen_ms ? us / 1000 : G.last_gen_ms + 1;
		return G.last_gen_ms;
	}
	G.last_gen = us > G.last_gen ? us : G.last_gen + 1;
	return G.last_gen;
}

/* 1 when KEY was mutated under RATE_WINDOW_MS ago (rate limit on). */
static int
rate_limited(const char *key, int64_t now)
{
	size_t i;

	if (!G.rate_limit)
		return 0;
	for (i = 0; i < G.nrates; i++)
		if (strcmp(G.rates[i].key, key) == 0)
			return now - G.rates[i].last_ms < RATE_WINDOW_MS;
	return 0;
}

static void
rate_note(const char *key, int64_t now)
{
	size_t i;
	rate_ent *nr;

	for (i = 0; i < G.nrates; i++)
		if (strcmp(G.rates[i].key, key) == 0) {
			G.rates[i].last_ms = now;
			return;
		}
	if (G.nrates == G.caprates) {
		size_t nc = G.caprates ? G.caprates * 2 : 64;
		nr = realloc(G.rates, nc * sizeof(*nr));
		if (nr == NULL)
			return;
		G.rates = nr;
		G.caprates = nc;
	}
	G.rates[G.nrates].key = strdup(key);
	if (G.rates[G.nrates].key != NULL)
		G.rates[G.nrates++].last_ms = now;
}

/* ---- faults ---- */

static int
op_matches(const char *pat, int op)
{
	if (strcmp(pat, op_names[op]) == 0)
		return 1;
	if (strcmp(pat, "write") == 0)
		return op == OP_INSERT || op == OP_PATCH || op == OP_DELETE;
	if (strcmp(pat, "any") == 0)
		return op <= OP_LIST;
	return 0;
}

/* Take the first fault queued for OP into *out; 0 when none. */
static int
take_fault(int op, fault *out)
{
	int i, got = 0;

	pthread_mutex_lock(&G.mu);
	for (i = 0; i < G.nfaults; i++) {
		if (!op_matches(G.faults[i].op, op))
			continue;
		*out = G.faults[i];
		got = 1;
		if (G.faults[i].count > 0 && --G.faults[i].count == 0) {
			memmove(&G.faults[i], &G.faults[i + 1],
			    (size_t)(G.nfaults - i - 1) * sizeof(fault));
			G.nfaults--;
		}
		break;
	}
	pthread_mutex_unlock(&G.mu);
	return got;
}

/* How long fault F holds its request before it goes on: the latency, or
 * the delay of a slow error; -1 when it does not hold. */
static int
fault_hold_ms(const fault *f)
{
	if (strcmp(f->kind, "latency") == 0)
		return f->ms;
	if (strcmp(f->kind, "reset") == 0 || strcmp(f->kind, "drop") == 0)
		return -1;
	return f->delay > 0 ? f->delay : -1;
}

/* ---- holds ---- */

/*
 * A held request is suspended (MHD_suspend_connection) by the handler and
 * queued here with its deadline; the hold thread resumes it then, and
 * libmicrohttpd calls the handler again.  The queue is a binary heap
 * ordered by deadline, then by arrival.  The hold thread calls into
 * libmicrohttpd with no lock held (neither H.mu nor G.mu); the
 * libmicrohttpd thread takes H.mu only to queue.
 */
typedef struct hold_ent {
	int64_t due_ns; /* CLOCK_MONOTONIC */
	uint64_t seq;
	struct MHD_Connection *c; /* suspended until popped and resumed */
} hold_ent;

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC: a new earliest, or stop */
	hold_ent heap[HOLDS_MAX];
	size_t n;
	struct MHD_Connection *due[HOLDS_MAX]; /* the hold thread's batch */
	uint64_t seq;
	int stopping; /* queue nothing more; resume everything queued */
	pthread_t thread;
} H = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int
hold_before(const hold_ent *a, const hold_ent *b)
{
	return a->due_ns < b->due_ns ||
	    (a->due_ns == b->due_ns && a->seq < b->seq);
}

static void
hold_swap(size_t i, size_t j)
{
	hold_ent t = H.heap[i];

	H.heap[i] = H.heap[j];
	H.heap[j] = t;
}

/* Queue C to be resumed in MS ms (H.mu held). */
static void
hold_push(struct MHD_Connection *c, int ms)
{
	size_t i = H.n++, up;

	H.heap[i].due_ns = mono_ns() + (int64_t)ms * 1000000;
	H.heap[i].seq = H.seq++;
	H.heap[i].c = c;
	for (; i > 0; i = up) {
		up = (i - 1) / 2;
		if (!hold_before(&H.heap[i], &H.heap[up]))
			break;
		hold_swap(i, up);
	}
}

/* Remove the earliest entry and return its connection (H.mu held, n>0). */
static struct MHD_Connection *
hold_pop(void)
{
	struct MHD_Connection *c = H.heap[0].c;
	size_t i = 0, l, m;

	H.heap[0] = H.heap[--H.n];
	for (;;) {
		l = 2 * i + 1;
		m = i;
		if (l < H.n && hold_before(&H.heap[l], &H.heap[m]))
			m = l;
		if (l + 1 < H.n && hold_before(&H.heap[l + 1], &H.heap[m]))
			m = l + 1;
		if (m == i)
			break;
		hold_swap(i, m);
		i = m;
	}
	return c;
}

/* The hold thread: resume the queued connections at their deadlines, all
 * those due at once in one batch (fewer wake-ups of the libmicrohttpd
 * thread); once stopping, resume what is left at once and return. */
static void *
hold_main(void *arg)
{
	struct MHD_Connection **due = H.due;
	struct timespec ts;
	int64_t now;
	size_t n, i;

	(void)arg;
	/* A hold ends when it was asked to, not up to the default 50 us of
	 * timer slack later: the slack is the fake's, not the client's. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	pthread_mutex_lock(&H.mu);
	for (;;) {
		now = mono_ns();
		for (n = 0; H.n > 0 && (H.stopping || H.heap[0].due_ns <= now);)
			due[n++] = hold_pop();
		if (n > 0) {
			pthread_mutex_unlock(&H.mu);
			for (i = 0; i < n; i++)
				MHD_resume_connection(due[i]);
			pthread_mutex_lock(&H.mu);
			continue;
		}
		if (H.stopping)
			break;
		if (H.n == 0) {
			pthread_cond_wait(&H.cv, &H.mu);
			continue;
		}
		ts.tv_sec = (time_t)(H.heap[0].due_ns / 1000000000);
		ts.tv_nsec = (long)(H.heap[0].due_ns % 1000000000);
		pthread_cond_timedwait(&H.cv, &H.mu, &ts);
	}
	pthread_mutex_unlock(&H.mu);
	return NULL;
}

/* Start the hold thread; 0 or -1. */
static int
hold_start(void)
{
	pthread_condattr_t ca;
	int rc;

	if (pthread_condattr_init(&ca) != 0)
		return -1;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
	        pthread_cond_init(&H.cv, &ca) == 0
	    ? 0
	    : -1;
	pthread_condattr_destroy(&ca);
	if (rc == 0 && pthread_create(&H.thread, NULL, hold_main, NULL) != 0) {
		pthread_cond_destroy(&H.cv);
		rc = -1;
	}
	return rc;
}

/* Resume every held request and join the hold thread.  Requests held
 * after this are resumed at once (hold_begin), so that libmicrohttpd is
 * never stopped with a suspended connection. */
static void
hold_stop(void)
{
	pthread_mutex_lock(&H.mu);
	H.stopping = 1;
	pthread_cond_signal(&H.cv);
	pthread_mutex_unlock(&H.mu);
	pthread_join(H.thread, NULL);
	pthread_cond_destroy(&H.cv);
}

/* Hold RQ on C for MS ms: count it, suspend C, queue its resumption.
 * The caller returns MHD_YES with no answer queued; when C is resumed,
 * libmicrohttpd calls the handler again and serve() goes on (rq->hold).
 * Resuming before the handler has returned is fine: libmicrohttpd's own
 * thread, the one in the handler, acts on it only afterwards. */
static enum MHD_Result
hold_begin(struct MHD_Connection *c, req *rq, int ms)
{
	int now;

	pthread_mutex_lock(&G.mu);
	if (++G.sleeping > G.sleeping_peak)
		G.sleeping_peak = G.sleeping;
	pthread_mutex_unlock(&G.mu);
	rq->hold = HOLD_WAITING;
	MHD_suspend_connection(c);
	pthread_mutex_lock(&H.mu);
	/* Full cannot happen (HOLDS_MAX); stopping: no hold thread to wait
	 * for.  Either way the request goes on at once. */
	now = H.stopping || H.n == HOLDS_MAX;
	if (!now) {
		hold_push(c, ms);
		if (H.heap[0].c == c)
			pthread_cond_signal(&H.cv);
	}
	pthread_mutex_unlock(&H.mu);
	if (now)
		MHD_resume_connection(c);
	return MHD_YES;
}

/* RQ's hold is over (it was resumed, or its connection is finished). */
static void
hold_end(req *rq)
{
	if (rq->hold != HOLD_WAITING)
		return;
	pthread_mutex_lock(&G.mu);
	G.sleeping--;
	pthread_mutex_unlock(&G.mu);
	rq->hold = HOLD_DONE;
}

/* ---- GCS operations ---- */

/* Find the multipart part after the delimiter at *P; sets the content
 * pointer/length and its Content-Type header (lowercased copy). */
static int
mp_part(const char *body, size_t len, const char *delim, size_t *pos,
    const char **content, size_t *clen, char *ctype, size_t ctsz)
{
	const char *p = body + *pos, *end = body + len, *hdr_end, *next, *h;
	size_t dlen = strlen(delim);

	if ((size_t)(end - p) < dlen + 2 || memcmp(p, delim, dlen) != 0)
		return -1;
	p += dlen;
	if (p[0] != '\r' || p[1] != '\n')
		return -1;
	p += 2;
	hdr_end = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
	if (hdr_end == NULL)
		return -1;
	ctype[0] = '\0';
	for (h = p; h < hdr_end;) {
		const char *eol = memmem(h, (size_t)(hdr_end - h), "\r\n", 2);
		size_t ln = eol ? (size_t)(eol - h) : (size_t)(hdr_end - h);
		if (ln > 13 && strncasecmp(h, "Content-Type:", 13) == 0) {
			const char *v = h + 13;
			while (*v == ' ')
				v++;
			snprintf(ctype, ctsz, "%.*s", (int)(h + ln - v), v);
		}
		h += ln + 2;
	}
	p = hdr_end + 4;
	/* The content ends at CRLF + delimiter. */
	for (next = p; next + 2 + dlen <= end; next++)
		if (next[0] == '\r' && next[1] == '\n' &&
		    memcmp(next + 2, delim, dlen) == 0)
			break;
	if (next + 2 + dlen > end)
		return -1;
	*content = p;
	*clen = (size_t)(next - p);
	*pos = (size_t)(next + 2 - body);
	return 0;
}

/* Parse a multipart/related upload: the metadata JSON into *meta. */
static int
parse_multipart(const char *ctype, const char *body, size_t len, json_t **meta)
{
	const char *b = ctype ? strcasestr(ctype, "boundary=") : NULL;
	char delim[128], pct[128];
	const char *content;
	size_t clen, pos = 0, bl;

	*meta = NULL;
	if (ctype == NULL || strncasecmp(ctype, "multipart/related", 17) != 0 ||
	    b == NULL || body == NULL)
		return -1;
	b += 9;
	if (*b == '"')
		b++;
	bl = strcspn(b, "\";");
	if (bl == 0 || bl > 70)
		return -1;
	snprintf(delim, sizeof(delim), "--%.*s", (int)bl, b);
	if (mp_part(body, len, delim, &pos, &content, &clen, pct,
	        sizeof(pct)) != 0 ||
	    strncasecmp(pct, "application/json", 16) != 0)
		return -1;
	*meta = json_loadb(content, clen, 0, NULL);
	if (!json_is_object(*meta))
		goto bad;
	if (mp_part(body, len, delim, &pos, &content, &clen, pct,
	        sizeof(pct)) != 0)
		goto bad;
	/* After the media part: the closing delimiter "--". */
	if (len - pos < strlen(delim) + 2 ||
	    memcmp(body + pos + strlen(delim), "--", 2) != 0)
		goto bad;
	return 0;
bad:
	json_decref(*meta);
	*meta = NULL;
	return -1;
}

static int
metadata_ok(const json_t *md, int allow_null)
{
	const char *k;
	json_t *v;

	if (md == NULL)
		return 1;
	if (!json_is_object(md))
		return 0;
	json_object_foreach((json_t *)md, k, v) if (!json_is_string(v) &&
	    !(allow_null && json_is_null(v))) return 0;
	return 1;
}

/* The metadata keys the emulator adds to an upload, which nobody wrote. */
static void
emulator_marks(json_t *md)
{
	json_t *marks = json_pack("{ssss}", "x_emulator_upload", "true",
	    "x_testbench_upload", "true");

	json_object_update(md, marks);
	json_decref(marks);
}

static enum MHD_Result
do_insert(struct MHD_Connection *c, const req *rq, const char *bucket,
    int *status)
{
	const char *ctype =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
	char *ut = qparam(rq->uri, "uploadType"),
	     *qname = qparam(rq->uri, "name");
	char *key = NULL;
	json_t *meta = NULL, *md, *out = NULL;
	const char *name = NULL, *cc = NULL, *ct = NULL;
	obj *o, no;
	long at;
	int pc;
	int64_t now;
	enum MHD_Result ret;

	memset(&no, 0, sizeof(no));
	if (ut != NULL && strcmp(ut, "multipart") == 0) {
		if (parse_multipart(ctype, rq->body, rq->len, &meta) != 0) {
			*status = 400;
			ret = send_err(c, 400, "global", "invalid",
			    "Malformed multipart body.");
			goto out;
		}
		name = json_string_value(json_object_get(meta, "name"));
		cc = json_string_value(json_object_get(meta, "cacheControl"));
		ct = json_string_value(json_object_get(meta, "contentType"));
		md = json_object_get(meta, "metadata");
		if (!metadata_ok(md, 0)) {
			*status = 400;
			ret = send_err(c, 400, "global", "invalid",
			    "Metadata values must be strings.");
			goto out;
		}
	} else if (ut != NULL && strcmp(ut, "media") == 0) {
		md = NULL;
		ct = ctype;
	} else {
		*status = 400;
		ret = send_err(c, 400, "global", "invalid",
		    "Upload requests must include an uploadType URL "
		    "parameter.");
		goto out;
	}
	if (name == NULL)
		name = qname;
	if (name == NULL || name[0] == '\0' || strlen(name) > 1024) {
		*status = 400;
		ret = send_err(c, 400, "global", "required",
		    "Required object name.");
		goto out;
	}
	if (asprintf(&key, "%s/%s", bucket, name) < 0) {
		key = NULL;
		ret = MHD_NO;
		goto out;
	}
	pthread_mutex_lock(&G.mu);
	now = fake_now_ms();
	at = find(key);
	if (rate_limited(key, real_ms())) {
		pthread_mutex_unlock(&G.mu);
		*status = 429;
		ret = send_err(c, 429, "usageLimits", "rateLimitExceeded",
		    "The object exceeded the rate limit for object mutation "
		    "operations (create, update, and delete). Please reduce "
		    "your request rate.");
		goto out;
	}
	pc = preconditions(rq, at >= 0 ? &G.objs[at] : NULL);
	if (pc != 0) {
		pthread_mutex_unlock(&G.mu);
		*status = pc;
		ret = pc == 304 ? send_raw(c, 304, NULL, NULL)
		    : pc == 400
		    ? send_err(c, 400, "global", "invalid", "Invalid argument.")
		    : send_err(c, 412, "global", "conditionNotMet",
		          "At least one "
		          "of the pre-conditions you specified did not hold.");
		goto out;
	}
	no.key = key;
	no.gen = new_generation();
	no.metagen = 1;
	no.created_ms = no.updated_ms = now;
	no.metadata = md ? json_deep_copy(md) : json_object();
	if (G.dialect == DIALECT_EMULATOR)
		emulator_marks(no.metadata);
	no.cache_control = cc ? strdup(cc) : NULL;
	no.content_type = ct ? strdup(ct) : NULL;
	key = NULL;
	if (at >= 0) {
		obj_free(&G.objs[at]);
		G.objs[at] = no;
		o = &G.objs[at];
	} else {
		size_t pos = (size_t)(-at - 1);
		if (G.n == G.cap) {
			size_t nc = G.cap ? G.cap * 2 : 64;
			obj *na = realloc(G.objs, nc * sizeof(*na));
			if (na == NULL) {
				pthread_mutex_unlock(&G.mu);
				obj_free(&no);
				ret = MHD_NO;
				goto out;
			}
			G.objs = na;
			G.cap = nc;
		}
		memmove(&G.objs[pos + 1], &G.objs[pos],
		    (G.n - pos) * sizeof(obj));
		G.objs[pos] = no;
		G.n++;
		o = &G.objs[pos];
	}
	rate_note(o->key, real_ms());
	out = obj_json(o);
	pthread_mutex_unlock(&G.mu);
	*status = 200;
	ret = send_selected(c, rq, out);
out:
	free(key);
	free(ut);
	free(qname);
	json_decref(meta);
	return ret;
}

/* The emulator's answer to a patch: object J (stolen) cut down to the
 * request's "fields", then with "acl" and "owner" whatever they select;
 * new reference. */
static json_t *
emulator_patched(const req *rq, json_t *j)
{
	json_t *out = rq->sel ? sel_apply(j, rq->sel) : json_incref(j);

	json_decref(j);
	if (out == NULL)
		return NULL;
	json_object_set_new(out, "acl",
	    json_pack("[{ssss}]", "entity", "projectOwner-test-project", "role",
	        "OWNER"));
	json_object_set_new(out, "owner",
	    json_pack("{ss}", "entity", "user-emulator@example.com"));
	return out;
}

/* Get, patch or delete one object. */
static enum MHD_Result
do_object(struct MHD_Connection *c, const req *rq, int op, const char *key,
    int *status)
{
	json_t *patch = NULL, *md, *out = NULL;
	const char *k;
	json_t *v;
	obj *o;
	long at;
	int pc;
	enum MHD_Result ret;

	if (op == OP_PATCH && G.dialect == DIALECT_FIREBASE) {
		*status = 501;
		return send_raw(c, 501, "text/plain; charset=utf-8",
		    "Not Implemented");
	}
	if (op == OP_PATCH) {
		patch =
		    rq->body ? json_loadb(rq->body, rq->len, 0, NULL) : NULL;
		md = json_object_get(patch, "metadata");
		if (!json_is_object(patch) || !metadata_ok(md, 1)) {
			json_decref(patch);
			*status = 400;
			return send_err(c, 400, "global", "invalid",
			    "Invalid patch body.");
		}
	}
	pthread_mutex_lock(&G.mu);
	at = find(key);
	if (at < 0) {
		pthread_mutex_unlock(&G.mu);
		json_decref(patch);
		*status = 404;
		return send_err(c, 404, "global", "notFound",
		    "No such object.");
	}
	if (op != OP_GET && rate_limited(key, real_ms())) {
		pthread_mutex_unlock(&G.mu);
		json_decref(patch);
		*status = 429;
		return send_err(c, 429, "usageLimits", "rateLimitExceeded",
		    "The object exceeded the rate limit for object mutation "
		    "operations (create, update, and delete). Please reduce "
		    "your request rate.");
	}
	o = &G.objs[at];
	pc = preconditions(rq, o);
	if (pc != 0) {
		pthread_mutex_unlock(&G.mu);
		json_decref(patch);
		*status = pc;
		return pc == 304 ? send_raw(c, 304, NULL, NULL)
		    : pc == 400
		    ? send_err(c, 400, "global", "invalid", "Invalid argument.")
		    : send_err(c, 412, "global", "conditionNotMet",
		          "At least one "
		          "of the pre-conditions you specified did not hold.");
	}
	if (op == OP_DELETE) {
		rate_note(key, real_ms());
		obj_free(o);
		memmove(&G.objs[at], &G.objs[at + 1],
		    (G.n - (size_t)at - 1) * sizeof(obj));
		G.n--;
		pthread_mutex_unlock(&G.mu);
		/* GCS: 204; the emulator: 200 with an empty body;
		 * fake-gcs-server: 200 with the JSON null */
		if (G.dialect == DIALECT_FAKE_GCS_SERVER) {
			*status = 200;
			return send_raw(c, 200, "application/json", "null");
		}
		*status = G.dialect == DIALECT_EMULATOR ? 200 : 204;
		return send_raw(c, *status, NULL, NULL);
	}
	if (op == OP_PATCH) {
		json_object_foreach(json_object_get(patch, "metadata"), k, v)
		{
			if (!json_is_null(v))
				json_object_set(o->metadata, k, v);
			else if (G.dialect == DIALECT_FAKE_GCS_SERVER)
				json_object_set_new(o->metadata, k,
				    json_string(""));
			else
				json_object_del(o->metadata, k);
		}
		if (json_is_string(json_object_get(patch, "cacheControl"))) {
			free(o->cache_control);
			o->cache_control = strdup(json_string_value(
			    json_object_get(patch, "cacheControl")));
		}
		if (G.dialect != DIALECT_FAKE_GCS_SERVER) {
			o->metagen++;
			o->updated_ms = fake_now_ms();
		}
		rate_note(key, real_ms());
	}
	out = obj_json(o);
	if (op == OP_PATCH && G.dialect == DIALECT_FAKE_GCS_SERVER) {
		json_object_del(out, "metageneration");
		json_object_del(out, "timeCreated");
		json_object_del(out, "kind");
	}
	pthread_mutex_unlock(&G.mu);
	json_decref(patch);
	*status = 200;
	if (op == OP_PATCH && G.dialect == DIALECT_EMULATOR)
		return send_json(c, 200, emulator_patched(rq, out));
	ret = send_selected(c, rq, out);
	return ret;
}

static enum MHD_Result
do_list(struct MHD_Connection *c, const req *rq, const char *bucket,
    int *status)
{
	char *prefix = qparam(rq->uri, "prefix"),
	     *tok = qparam(rq->uri, "pageToken"), *pk = NULL,
	     *from = qparam(rq->uri, "startOffset"), *fk = NULL;
	char *after = NULL;
	int64_t max = PAGE_MAX;
	json_t *res = NULL, *items = NULL;
	size_t i, plen;
	long at;
	int r, n = 0;
	enum MHD_Result ret;

	if (G.dialect == DIALECT_EMULATOR) {
		/* maxResults and pageToken are not read at all */
		free(tok);
		tok = NULL;
		r = 0;
		max = INT64_MAX;
	} else {
		r = qint(rq->uri, "maxResults", &max);
	}
	if (r < 0 || (r > 0 && max < 1)) {
		*status = 400;
		ret = send_err(c, 400, "global", "invalid",
		    "Invalid maxResults.");
		goto out;
	}
	if (max > PAGE_MAX && G.dialect != DIALECT_EMULATOR)
		max = PAGE_MAX;
	if (tok != NULL) {
		/* The token is "t" + hex of the last key of the last page. */
		size_t tl = strlen(tok);
		if (tok[0] != 't' || tl % 2 != 1) {
			*status = 400;
			ret = send_err(c, 400, "global", "invalid",
			    "Invalid pageToken.");
			goto out;
		}
		after = calloc(tl / 2 + 1, 1);
		for (i = 0; after && i < tl / 2; i++) {
			int hi = hexval(tok[1 + 2 * i]),
			    lo = hexval(tok[2 + 2 * i]);
			if (hi < 0 || lo < 0) {
				*status = 400;
				ret = send_err(c, 400, "global", "invalid",
				    "Invalid pageToken.");
				goto out;
			}
			after[i] = (char)(hi * 16 + lo);
		}
	}
	if (asprintf(&pk, "%s/%s", bucket, prefix ? prefix : "") < 0) {
		pk = NULL;
		ret = MHD_NO;
		goto out;
	}
	plen = strlen(pk);
	if (from != NULL && asprintf(&fk, "%s/%s", bucket, from) < 0) {
		fk = NULL;
		ret = MHD_NO;
		goto out;
	}
	res = json_pack("{ss}", "kind", "storage#objects");
	items = json_array();
	pthread_mutex_lock(&G.mu);
	at = find(after ? after : pk);
	i = at >= 0 ? (size_t)at + (after ? 1 : 0) : (size_t)(-at - 1);
	if (fk != NULL) { /* names >= startOffset */
		at = find(fk);
		if ((size_t)(at >= 0 ? at : -at - 1) > i)
			i = (size_t)(at >= 0 ? at : -at - 1);
	}
	for (; i < G.n; i++) {
		if (strncmp(G.objs[i].key, pk, plen) != 0)
			break;
		if (n == max) {
			char *t = malloc(2 * strlen(G.objs[i - 1].key) + 2);
			size_t j;
			if (t != NULL) {
				t[0] = 't';
				for (j = 0; G.objs[i - 1].key[j]; j++)
					snprintf(t + 1 + 2 * j, 3, "%02x",
					    (unsigned char)G.objs[i - 1]
					        .key[j]);
				t[1 + 2 * j] = '\0';
				json_object_set_new(res, "nextPageToken",
				    json_string(t));
				free(t);
			}
			break;
		}
		json_array_append_new(items, obj_json(&G.objs[i]));
		n++;
	}
	pthread_mutex_unlock(&G.mu);
	/* GCS omits "items" on an empty page; the emulator does not. */
	if (json_array_size(items) > 0 || G.dialect == DIALECT_EMULATOR)
		json_object_set(res, "items", items);
	*status = 200;
	ret = send_selected(c, rq, res);
	res = NULL;
out:
	json_decref(res);
	json_decref(items);
	free(prefix);
	free(tok);
	free(pk);
	free(from);
	free(fk);
	free(after);
	return ret;
}

/* ---- buckets ---- */

/* 1 when BUCKET exists: in the emulator's and fake-gcs-server's
 * dialects only those made, in the others every name but "missing-*"
 * (G.mu held). */
static int
bucket_exists(const char *bucket)
{
	int i;

	if (strncmp(bucket, "missing-", 8) == 0)
		return 0;
	if (G.dialect != DIALECT_EMULATOR &&
	    G.dialect != DIALECT_FAKE_GCS_SERVER)
		return 1;
	for (i = 0; i < G.nbuckets; i++)
		if (strcmp(G.buckets[i], bucket) == 0)
			return 1;
	return 0;
}

/* POST /storage/v1/b?project=P {"name":"B"}: make bucket B. */
static enum MHD_Result
do_bucket_insert(struct MHD_Connection *c, const req *rq, int *status)
{
	json_t *j = rq->body ? json_loadb(rq->body, rq->len, 0, NULL) : NULL;
	const char *name = json_string_value(json_object_get(j, "name"));
	char *project = qparam(rq->uri, "project");
	enum MHD_Result ret;
	int i, found = 0;

	*status = 400;
	if (project == NULL || project[0] == '\0' || name == NULL ||
	    name[0] == '\0' || strlen(name) > BUCKET_MAX ||
	    strchr(name, '/') != NULL) {
		ret = send_err(c, 400, "global", "invalid",
		    "A project and a bucket name are required.");
		goto out;
	}
	pthread_mutex_lock(&G.mu);
	for (i = 0; i < G.nbuckets; i++)
		found |= strcmp(G.buckets[i], name) == 0;
	if (!found && G.nbuckets < BUCKETS_MAX)
		snprintf(G.buckets[G.nbuckets++], BUCKET_MAX + 1, "%s", name);
	pthread_mutex_unlock(&G.mu);
	if (found) {
		*status = 409;
		ret = send_err(c, 409, "global", "conflict",
		    "Your previous request to create the named bucket "
		    "succeeded and you already own it.");
		goto out;
	}
	*status = 200;
	ret = send_json(c, 200,
	    json_pack("{ssssss}", "kind", "storage#bucket", "id", name, "name",
	        name));
out:
	free(project);
	json_decref(j);
	return ret;
}

/* ---- tokens ---- */

static json_t *
issue_token(void)
{
	char tok[64];
	tokent *t;

	pthread_mutex_lock(&G.mu);
	snprintf(tok, sizeof(tok), "ya29.fake-%llu",
	    (unsigned long long)++G.token_seq);
	if (G.ntokens == TOKENS_MAX) {
		memmove(&G.tokens[0], &G.tokens[1],
		    (TOKENS_MAX - 1) * sizeof(tokent));
		G.ntokens--;
	}
	t = &G.tokens[G.ntokens++];
	snprintf(t->tok, sizeof(t->tok), "%s", tok);
	/* a lifetime past a year is "for ever" here (and no overflow) */
	t->exp_ms = G.token_expires_s > 366 * 86400
	    ? INT64_MAX
	    : real_ms() + G.token_expires_s * 1000;
	G.tokens_issued++;
	pthread_mutex_unlock(&G.mu);
	return json_pack("{sssIss}", "access_token", tok, "expires_in",
	    (json_int_t)G.token_expires_s, "token_type", G.token_type);
}

static int
token_valid(const char *auth)
{
	size_t i;
	int ok = 0;

	if (auth == NULL || strncmp(auth, "Bearer ", 7) != 0)
		return 0;
	pthread_mutex_lock(&G.mu);
	for (i = 0; i < G.ntokens; i++)
		if (strcmp(G.tokens[i].tok, auth + 7) == 0)
			ok = G.tokens[i].exp_ms > real_ms();
	pthread_mutex_unlock(&G.mu);
	return ok;
}

static enum MHD_Result
do_oauth(struct MHD_Connection *c, const req *rq, int *status)
{
	char *gt = rq->body ? form_param(rq->body, "grant_type") : NULL;
	char *as = rq->body ? form_param(rq->body, "assertion") : NULL;
	jwt_t *jwt = NULL;
	json_t *claims = NULL;
	char *cj = NULL;
	const char *iss, *scope, *aud;
	long iat, exp;
	int rc;
	enum MHD_Result ret;

	*status = 400;
	if (gt == NULL ||
	    strcmp(gt, "urn:ietf:params:oauth:grant-type:jwt-bearer") != 0 ||
	    as == NULL) {
		ret = send_json(c, 400,
		    json_pack("{ssss}", "error", "unsupported_grant_type",
		        "error_description",
		        "grant_type must be jwt-bearer with an assertion"));
		goto out;
	}
	pthread_mutex_lock(&G.mu);
	rc = jwt_decode(&jwt, as, (const unsigned char *)G.pubkey,
	    (int)G.pubkey_len);
	pthread_mutex_unlock(&G.mu);
	if (rc != 0 ||
	    (G.pubkey != NULL && jwt_get_alg(jwt) != JWT_ALG_RS256)) {
		ret = send_json(c, 400,
		    json_pack("{ssss}", "error", "invalid_grant",
		        "error_description", "Invalid JWT Signature."));
		goto out;
	}
	iss = jwt_get_grant(jwt, "iss");
	scope = jwt_get_grant(jwt, "scope");
	aud = jwt_get_grant(jwt, "aud");
	iat = jwt_get_grant_int(jwt, "iat");
	exp = jwt_get_grant_int(jwt, "exp");
	if (iss == NULL || scope == NULL || aud == NULL ||
	    strstr(aud, "/token") == NULL || iat <= 0 || exp <= iat ||
	    exp - iat > 3600 || exp * 1000 < real_ms()) {
		ret = send_json(c, 400,
		    json_pack("{ssss}", "error", "invalid_grant",
		        "error_description",
		        "Invalid JWT: iss, scope, aud, iat or exp."));
		goto out;
	}
	cj = jwt_get_grants_json(jwt, NULL);
	claims = cj ? json_loads(cj, 0, NULL) : NULL;
	if (claims != NULL && jwt_get_header(jwt, "kid") != NULL)
		json_object_set_new(claims, "_kid",
		    json_string(jwt_get_header(jwt, "kid")));
	pthread_mutex_lock(&G.mu);
	json_decref(G.last_assertion);
	G.last_assertion = claims;
	claims = NULL;
	pthread_mutex_unlock(&G.mu);
	*status = 200;
	ret = send_json(c, 200, issue_token());
out:
	free(cj);
	json_decref(claims);
	jwt_free(jwt);
	free(gt);
	free(as);
	return ret;
}

/* ---- control ---- */

/* "gcs", "emulator", "firebase" or "fake-gcs-server" into *D; -1 for
 * anything else. */
static int
dialect_of(const char *v, enum dialect *d)
{
	if (v != NULL && strcmp(v, "gcs") == 0)
		*d = DIALECT_GCS;
	else if (v != NULL && strcmp(v, "emulator") == 0)
		*d = DIALECT_EMULATOR;
	else if (v != NULL && strcmp(v, "firebase") == 0)
		*d = DIALECT_FIREBASE;
	else if (v != NULL && strcmp(v, "fake-gcs-server") == 0)
		*d = DIALECT_FAKE_GCS_SERVER;
	else
		return -1;
	return 0;
}

static json_t *
stats_json(void)
{
	json_t *ops = json_object(), *j;
	int i;

	pthread_mutex_lock(&G.mu);
	for (i = 0; i < OP_N; i++)
		json_object_set_new(ops, op_names[i],
		    json_integer((json_int_t)G.ops[i]));
	j = json_pack("{sOsIsIsIsIsIsIsO}", "ops", ops, "writes",
	    (json_int_t)(G.ops[OP_INSERT] + G.ops[OP_PATCH] + G.ops[OP_DELETE]),
	    "reads", (json_int_t)(G.ops[OP_GET] + G.ops[OP_LIST]),
	    "tokens_issued", (json_int_t)G.tokens_issued, "objects",
	    (json_int_t)G.n, "connections", (json_int_t)G.connections,
	    "latency_peak", (json_int_t)G.sleeping_peak, "last_assertion",
	    G.last_assertion ? G.last_assertion : json_null());
	pthread_mutex_unlock(&G.mu);
	json_decref(ops);
	return j;
}

static json_t *
requests_json(void)
{
	json_t *a = json_array();
	size_t i, start;

	pthread_mutex_lock(&G.mu);
	start = G.log_next > LOG_MAX ? G.log_next - LOG_MAX : 0;
	for (i = start; i < G.log_next; i++) {
		logent *e = &G.log[i % LOG_MAX];
		json_t *r = json_pack("{sssssssi}", "method",
		    e->method ? e->method : "", "uri", e->uri ? e->uri : "",
		    "op", op_names[e->op], "status", e->status);
		if (r == NULL)
			continue;
		if (e->ctype)
			json_object_set_new(r, "content_type",
			    json_string(e->ctype));
		if (e->auth)
			json_object_set_new(r, "authorization",
			    json_string(e->auth));
		if (e->body)
			json_object_set_new(r, "body",
			    json_stringn_nocheck(e->body, strlen(e->body)));
		json_array_append_new(a, r);
	}
	pthread_mutex_unlock(&G.mu);
	return a;
}

static void
reset_all(void)
{
	size_t i;

	pthread_mutex_lock(&G.mu);
	for (i = 0; i < G.n; i++)
		obj_free(&G.objs[i]);
	G.n = 0;
	for (i = 0; i < G.nrates; i++)
		free(G.rates[i].key);
	G.nrates = 0;
	G.nfaults = 0;
	memset(G.ops, 0, sizeof(G.ops));
	G.tokens_issued = 0;
	G.token_seq = 0;
	G.ntokens = 0;
	G.connections = 0;
	G.sleeping_peak = G.sleeping;
	json_decref(G.last_assertion);
	G.last_assertion = NULL;
	for (i = 0; i < LOG_MAX; i++) {
		free(G.log[i].method);
		free(G.log[i].uri);
		free(G.log[i].ctype);
		free(G.log[i].auth);
		free(G.log[i].body);
	}
	memset(G.log, 0, sizeof(G.log));
	G.log_next = 0;
	pthread_mutex_unlock(&G.mu);
}

static enum MHD_Result
do_control(struct MHD_Connection *c, const req *rq, const char *path)
{
	char *op, *kind, *v;
	int64_t x;

	if (strcmp(path, "/_fake/stats") == 0)
		return send_json(c, 200, stats_json());
	if (strcmp(path, "/_fake/requests") == 0)
		return send_json(c, 200, requests_json());
	if (strcmp(path, "/_fake/reset") == 0) {
		reset_all();
		return send_raw(c, 200, "text/plain", "ok\n");
	}
	if (strcmp(path, "/_fake/revoke") == 0) {
		pthread_mutex_lock(&G.mu);
		G.ntokens = 0; /* tokens_issued still counts them */
		pthread_mutex_unlock(&G.mu);
		return send_raw(c, 200, "text/plain", "ok\n");
	}
	if (strcmp(path, "/_fake/clear-faults") == 0) {
		pthread_mutex_lock(&G.mu);
		G.nfaults = 0;
		pthread_mutex_unlock(&G.mu);
		return send_raw(c, 200, "text/plain", "ok\n");
	}
	if (strcmp(path, "/_fake/config") == 0) {
		pthread_mutex_lock(&G.mu);
		if (qint(rq->uri, "rate_limit", &x) > 0)
			G.rate_limit = x != 0;
		if (qint(rq->uri, "require_auth", &x) > 0)
			G.require_auth = x != 0;
		if (qint(rq->uri, "date", &x) > 0)
			G.no_date = x == 0;
		if (qint(rq->uri, "token_expires", &x) > 0 && x > 0)
			G.token_expires_s = x;
		v = qparam(rq->uri, "token_type");
		if (v != NULL && strlen(v) < sizeof(G.token_type))
			snprintf(G.token_type, sizeof(G.token_type), "%s", v);
		free(v);
		v = qparam(rq->uri, "clock_offset_ms");
		if (v != NULL)
			G.clock_offset_ms = strtoll(v, NULL, 10);
		free(v);
		v = qparam(rq->uri, "dialect");
		x = v != NULL && dialect_of(v, &G.dialect) != 0;
		free(v);
		pthread_mutex_unlock(&G.mu);
		if (x)
			return send_raw(c, 400, "text/plain", "bad dialect\n");
		return send_raw(c, 200, "text/plain", "ok\n");
	}
	if (strcmp(path, "/_fake/fault") == 0) {
		fault f;
		memset(&f, 0, sizeof(f));
		op = qparam(rq->uri, "op");
		kind = qparam(rq->uri, "kind");
		v = qparam(rq->uri, "count");
		f.count = v ? (int)strtol(v, NULL, 10) : 1;
		free(v);
		v = qparam(rq->uri, "ms");
		f.ms = v ? (int)strtol(v, NULL, 10) : 0;
		free(v);
		v = qparam(rq->uri, "delay");
		f.delay = v ? (int)strtol(v, NULL, 10) : 0;
		free(v);
		if (op == NULL || kind == NULL || strlen(op) >= sizeof(f.op) ||
		    strlen(kind) >= sizeof(f.kind) || f.count == 0 ||
		    f.count < -1 || f.ms < 0 || f.ms > LATENCY_MAX_MS ||
		    f.delay < 0 || f.delay > LATENCY_MAX_MS) {
			free(op);
			free(kind);
			return send_raw(c, 400, "text/plain", "bad fault\n");
		}
		snprintf(f.op, sizeof(f.op), "%s", op);
		snprintf(f.kind, sizeof(f.kind), "%s", kind);
		free(op);
		free(kind);
		pthread_mutex_lock(&G.mu);
		if (G.nfaults < FAULTS_MAX)
			G.faults[G.nfaults++] = f;
		pthread_mutex_unlock(&G.mu);
		return send_raw(c, 200, "text/plain", "ok\n");
	}
	return send_raw(c, 404, "text/plain", "no such control\n");
}

/* ---- routing ---- */

#define OBJ_PATH    "/storage/v1/b/"
#define UPLOAD_PATH "/upload/storage/v1/b/"
#define MD_PATH     "/computeMetadata/v1/instance/service-accounts/default/token"

static enum MHD_Result
serve(struct MHD_Connection *c, const char *method, req *rq)
{
	char path[2048], bucket[256], *key = NULL;
	const char *p, *slash;
	size_t plen = strcspn(rq->uri, "?");
	int op = OP_OTHER, status = 0, is_upload = 0, hold_ms, noflavor = 0;
	int missing;
	enum MHD_Result ret;
	const fault *f;

	if (plen >= sizeof(path))
		return send_err(c, 400, "global", "invalid", "URI too long.");
	memcpy(path, rq->uri, plen);
	path[plen] = '\0';
	if (strncmp(path, "/_fake/", 7) == 0)
		return do_control(c, rq, path);

	/* Classify. */
	if (strcmp(path, MD_PATH) == 0)
		op = OP_METADATA;
	else if (strcmp(path, "/token") == 0)
		op = OP_TOKEN;
	else if (strcmp(path, "/storage/v1/b") == 0 &&
	    strcmp(method, "POST") == 0)
		op = OP_BUCKET;
	else if (strncmp(path, UPLOAD_PATH, strlen(UPLOAD_PATH)) == 0 ||
	    strncmp(path, OBJ_PATH, strlen(OBJ_PATH)) == 0) {
		is_upload = path[1] == 'u';
		p = path + (is_upload ? strlen(UPLOAD_PATH) : strlen(OBJ_PATH));
		slash = strchr(p, '/');
		if (slash == NULL || (size_t)(slash - p) >= sizeof(bucket) ||
		    strncmp(slash, "/o", 2) != 0 ||
		    (slash[2] != '\0' && slash[2] != '/')) {
			status = 404;
			ret =
			    send_err(c, 404, "global", "notFound", "Not Found");
			goto done;
		}
		memcpy(bucket, p, (size_t)(slash - p));
		bucket[slash - p] = '\0';
		if (is_upload) {
			op = strcmp(method, "POST") == 0 && slash[2] == '\0'
			    ? OP_INSERT
			    : OP_OTHER;
		} else if (slash[2] == '\0') {
			op = strcmp(method, "GET") == 0 ? OP_LIST : OP_OTHER;
		} else {
			/* A raw '/' inside the object segment is a different
			 * path on GCS: names must come percent-encoded. */
			const char *seg = slash + 3;
			if (seg[0] == '\0' || strchr(seg, '/') != NULL) {
				status = 404;
				ret = send_err(c, 404, "global", "notFound",
				    "Not Found");
				goto done;
			}
			key = pct_decode(seg, strlen(seg), 0);
			if (key == NULL)
				return MHD_NO;
			if (strcmp(method, "GET") == 0)
				op = OP_GET;
			else if (strcmp(method, "PATCH") == 0)
				op = OP_PATCH;
			else if (strcmp(method, "DELETE") == 0)
				op = OP_DELETE;
		}
	}
	/* Faults.  A request a fault holds comes here twice: once to count
	 * it, take the fault and be suspended (the op is not applied yet),
	 * and once more when resumed, to go on with the fault it took. */
	if (rq->hold == HOLD_NONE) {
		pthread_mutex_lock(&G.mu);
		G.ops[op]++;
		pthread_mutex_unlock(&G.mu);
		if (op == OP_OTHER) {
			status = 404;
			ret =
			    send_err(c, 404, "global", "notFound", "Not Found");
			goto done;
		}
		rq->faulted = take_fault(op, &rq->flt);
		if (rq->faulted && (hold_ms = fault_hold_ms(&rq->flt)) >= 0) {
			free(key);
			return hold_begin(c, rq, hold_ms);
		}
	} else {
		hold_end(rq);
	}
	f = &rq->flt;
	if (!rq->faulted || strcmp(f->kind, "latency") == 0) {
		/* served as usual */
	} else if (strcmp(f->kind, "reset") == 0) {
		status = -1;
		ret = MHD_NO;
		goto done;
	} else if (strcmp(f->kind, "drop") == 0) {
		drop_answer = 1;
	} else if (strcmp(f->kind, "noflavor") == 0) {
		noflavor = 1; /* served, without the metadata server's mark */
	} else if (strcmp(f->kind, "noprecond") == 0) {
		/* served, its preconditions unread (preconditions()) */
	} else {
		status = (int)strtol(f->kind, NULL, 10);
		if (status < 300 || status > 599)
			status = 503;
		ret = send_err(c, status,
		    status == 429 ? "usageLimits" : "global",
		    status == 429       ? "rateLimitExceeded"
		        : status == 401 ? "required"
		                        : "backendError",
		    "Injected fault.");
		goto done;
	}
	if (op <= OP_LIST && G.require_auth &&
	    !token_valid(MHD_lookup_connection_value(c, MHD_HEADER_KIND,
	        "Authorization"))) {
		status = 401;
		ret = send_err(c, 401, "global", "required",
		    "Anonymous caller does not have storage.objects access.");
		goto done;
	}
	if (op <= OP_LIST) {
		int bad;

		/* Kept for send_selected; a held request comes here twice. */
		json_decref(rq->sel);
		rq->sel = sel_parse(rq->uri, &bad);
		if (bad) {
			status = 400;
			ret = send_err(c, 400, "global", "invalidParameter",
			    "Invalid field selection.");
			goto done;
		}
	}
	pthread_mutex_lock(&G.mu);
	missing = op <= OP_LIST && !bucket_exists(bucket);
	pthread_mutex_unlock(&G.mu);
	if (missing) {
		status = 404;
		ret = send_err(c, 404, "global", "notFound",
		    "The specified bucket does not exist.");
		goto done;
	}
	switch (op) {
	case OP_METADATA: {
		const char *fl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
		    "Metadata-Flavor");
		if (fl == NULL || strcmp(fl, "Google") != 0) {
			status = 403;
			ret = send_raw(c, 403, "text/plain",
			    "Missing Metadata-Flavor: Google header.\n");
		} else {
			/* The metadata server marks its answers, as it wants
			 * its requests marked. */
			json_t *jt = issue_token();
			char *tok = jt ? json_dumps(jt, JSON_COMPACT) : NULL;

			status = 200;
			ret = tok == NULL
			    ? MHD_NO
			    : send_raw_h(c, 200, "application/json", tok,
			          noflavor ? NULL : "Metadata-Flavor",
			          "Google");
			free(tok);
			json_decref(jt);
		}
		break;
	}
	case OP_TOKEN:
		ret = do_oauth(c, rq, &status);
		break;
	case OP_BUCKET:
		ret = do_bucket_insert(c, rq, &status);
		break;
	case OP_INSERT:
		ret = do_insert(c, rq, bucket, &status);
		break;
	case OP_LIST:
		ret = do_list(c, rq, bucket, &status);
		break;
	default: {
		char *full = NULL;
		if (asprintf(&full, "%s/%s", bucket, key) < 0) {
			ret = MHD_NO;
			break;
		}
		ret = do_object(c, rq, op, full, &status);
		free(full);
		break;
	}
	}
done:
	if (drop_answer) {
		drop_answer = 0;
		ret = MHD_NO;
	}
	log_req(c, method, rq, op, status);
	free(key);
	return ret;
}

/* ---- libmicrohttpd glue ---- */

static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	req *rq = calloc(1, sizeof(*rq));

	(void)cls;
	(void)c;
	if (rq != NULL)
		rq->uri = strdup(uri);
	return rq;
}

static void
on_done(void *cls, struct MHD_Connection *c, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	req *rq = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (rq == NULL)
		return;
	hold_end(rq); /* resumed at shutdown, then closed unserved */
	free(rq->uri);
	json_decref(rq->sel);
	free(rq->body);
	free(rq);
	*con_cls = NULL;
}

static void
on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
    enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	(void)c;
	(void)socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		pthread_mutex_lock(&G.mu);
		G.connections++;
		pthread_mutex_unlock(&G.mu);
	}
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	req *rq = *con_cls;
	char *nb;

	(void)cls;
	(void)url;
	(void)version;
	if (rq == NULL || rq->uri == NULL)
		return MHD_NO;
	if (!rq->started) {
		rq->started = 1;
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		if (rq->too_big || rq->len + *upload_data_size > BODY_MAX) {
			rq->too_big = 1;
		} else {
			nb = realloc(rq->body, rq->len + *upload_data_size + 1);
			if (nb == NULL)
				return MHD_NO;
			memcpy(nb + rq->len, upload_data, *upload_data_size);
			rq->body = nb;
			rq->len += *upload_data_size;
			rq->body[rq->len] = '\0';
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (rq->too_big)
		return send_err(c, 413, "global", "invalid", "Body too large.");
	return serve(c, method, rq);
}

static int
load_pubkey(const char *path)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	if (f == NULL)
		return -1;
	G.pubkey = malloc(PUBKEY_MAX + 1);
	if (G.pubkey == NULL) {
		fclose(f);
		return -1;
	}
	n = fread(G.pubkey, 1, PUBKEY_MAX, f);
	fclose(f);
	G.pubkey[n] = '\0';
	G.pubkey_len = n;
	return n > 0 ? 0 : -1;
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: fake_gcs [--port N] "
	    "[--dialect gcs|emulator|firebase|fake-gcs-server] "
	    "[--clock-offset-ms MS] "
	    "[--rate-limit] [--token-expires S] [--require-auth] "
	    "[--oauth-pubkey PEM]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct sockaddr_in sa;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	sigset_t set;
	long port = 0;
	const char *dialect = getenv("FAKE_GCS_DIALECT");
	int i, sig;
	char *end;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
			port = strtol(argv[++i], &end, 10);
			if (*end != '\0' || port < 0 || port > 65535)
				usage();
		} else if (strcmp(argv[i], "--clock-offset-ms") == 0 &&
		    i + 1 < argc) {
			G.clock_offset_ms = strtoll(argv[++i], &end, 10);
			if (*end != '\0')
				usage();
		} else if (strcmp(argv[i], "--dialect") == 0 && i + 1 < argc) {
			dialect = argv[++i];
		} else if (strcmp(argv[i], "--rate-limit") == 0) {
			G.rate_limit = 1;
		} else if (strcmp(argv[i], "--require-auth") == 0) {
			G.require_auth = 1;
		} else if (strcmp(argv[i], "--token-expires") == 0 &&
		    i + 1 < argc) {
			G.token_expires_s = strtoll(argv[++i], &end, 10);
			if (*end != '\0' || G.token_expires_s < 1)
				usage();
		} else if (strcmp(argv[i], "--oauth-pubkey") == 0 &&
		    i + 1 < argc) {
			if (load_pubkey(argv[++i]) != 0) {
				fprintf(stderr, "fake_gcs: cannot read %s\n",
				    argv[i]);
				return 1;
			}
		} else {
			usage();
		}
	}
	if (dialect != NULL && dialect[0] != '\0' &&
	    dialect_of(dialect, &G.dialect) != 0)
		usage();
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* threads inherit it */
	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (hold_start() != 0) {
		fprintf(stderr, "fake_gcs: cannot start the hold thread\n");
		return 1;
	}
	/* One epoll thread for every connection, no thread pool: see the
	 * comment at the top. */
	d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD |
	        MHD_ALLOW_SUSPEND_RESUME | MHD_USE_SUPPRESS_DATE_NO_CLOCK,
	    0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR,
	    (struct sockaddr *)&sa, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
	    MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONN_TIMEOUT_S,
	    MHD_OPTION_END);
	if (d == NULL) {
		fprintf(stderr, "fake_gcs: cannot listen on 127.0.0.1:%ld\n",
		    port);
		hold_stop();
		return 1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("%u\n", info ? (unsigned)info->port : 0u);
	fflush(stdout);
	do {
		if (sigwait(&set, &sig) != 0)
			break;
	} while (sig != SIGTERM && sig != SIGINT);
	/* libmicrohttpd must not be stopped with a suspended connection:
	 * resume every held request first (a request held from now on is
	 * resumed at once). */
	hold_stop();
	MHD_stop_daemon(d);
	reset_all();
	free(G.objs);
	free(G.rates);
	free(G.pubkey);
	return 0;
}
