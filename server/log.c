/*
 * log.c: structured logs, one JSON object per line on stdout, in the shape
 * Cloud Logging reads (severity, message, time).  A line is written with a
 * single write(2) so concurrent lines never interleave.
 *
 * An HTTP loop thread batches its lines: they collect in a buffer that the
 * loop writes out before it waits for events again (srv_log_flush), so a
 * busy loop makes one write(2) per round instead of one or two per
 * request.  A batch is at most PIPE_BUF bytes, so that it, too, reaches a
 * pipe in one piece.  Lines are never held longer than the round that
 * made them (microseconds); a crash can lose that round's lines.
 *
 * (Holding lines for up to 1 ms across rounds, to save the write of a
 * 1-client round, was tried: no gain measured on mem://, and on gs:// a
 * loop woken every ms cost 50 % more CPU per serial cycle.)
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdbool.h>
#include <unistd.h>

#include "api/jsonw.h"
#include "srv.h"

#define LOG_BATCH_MAX 4096 /* PIPE_BUF on Linux: a write this big is atomic */

static __thread char *tl_batch; /* NULL: this thread writes each line */
static __thread size_t tl_batch_len;

void
srv_log_flush(void)
{
	if (tl_batch != NULL && tl_batch_len > 0 &&
	    write(STDOUT_FILENO, tl_batch, tl_batch_len) < 0) {
		/* Nowhere left to report it. */
	}
	tl_batch_len = 0;
}

void
srv_log_batch_begin(void)
{
	if (tl_batch == NULL)
		tl_batch = malloc(LOG_BATCH_MAX);
	tl_batch_len = 0;
}

void
srv_log_batch_end(void)
{
	srv_log_flush();
	free(tl_batch);
	tl_batch = NULL;
}

/* One whole line (newline included): into this thread's batch, or out. */
static void
emit(const char *line, size_t n)
{
	if (tl_batch != NULL) {
		if (tl_batch_len + n > LOG_BATCH_MAX)
			srv_log_flush();
		if (n <= LOG_BATCH_MAX) {
			memcpy(tl_batch + tl_batch_len, line, n);
			tl_batch_len += n;
			return;
		}
	}
	if (write(STDOUT_FILENO, line, n) < 0) {
		/* Nowhere left to report it. */
	}
}

void
srv_log(const char *severity, const char *message, json_t *fields)
{
	json_t *line = json_object(), *msg = json_string(message);
	struct timespec ts;
	char when[40];
	char *text, *scrubbed;
	size_t len;

	if (msg == NULL && message != NULL &&
	    (scrubbed = strdup(message)) != NULL) {
		/* Not UTF-8: a message cut to its buffer in the middle of a
		 * character (jansson takes only UTF-8). */
		api_utf8_scrub(scrubbed);
		msg = json_string(scrubbed);
		free(scrubbed);
	}
	if (line == NULL) {
		json_decref(msg);
		json_decref(fields);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	api_time_str((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, when,
	    sizeof(when));
	json_object_set_new(line, "severity", json_string(severity));
	json_object_set_new(line, "message", msg);
	json_object_set_new(line, "time", json_string(when));
	if (json_is_object(fields))
		json_object_update_missing(line, fields);
	json_decref(fields);
	text = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(6));
	json_decref(line);
	if (text == NULL)
		return;
	len = strlen(text);
	text[len] = '\n'; /* replaces the NUL: write len + 1 bytes */
	emit(text, len + 1);
	free(text);
}

/*
 * The hot path: the request line and lock events are written straight into
 * a stack buffer (api/jsonw.c), without building JSON objects.  A line that
 * would not fit is cut short but stays valid JSON.
 */
#define LOG_LINE_MAX 4096

/* ,"KEY": as one literal: the keys are ours, nothing in them to escape. */
#define MEMBER(key) ",\"" key "\":"
#define LIT(jw, s)  api_jw_raw((jw), (s), sizeof(s) - 1)

static void
line_start(api_jw *jw, char *buf, const char *severity, const char *message)
{
	struct timespec ts;
	char t[32];

	/* Two bytes kept for "}\n". */
	api_jw_init(jw, buf, LOG_LINE_MAX, 2);
	clock_gettime(CLOCK_REALTIME, &ts);
	api_time_str((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, t,
	    sizeof(t));
	LIT(jw, "{\"severity\":");
	api_jw_str(jw, severity);
	LIT(jw, MEMBER("message"));
	api_jw_str(jw, message);
	LIT(jw, MEMBER("time"));
	api_jw_str(jw, t);
}

#define put_field(jw, key, val) \
	put_member((jw), MEMBER(key), sizeof(MEMBER(key)) - 1, (val))

/* MEMBER (",\"key\":", LEN bytes) and VAL as a string, when VAL is not
 * empty. */
static void
put_member(api_jw *jw, const char *member, size_t len, const char *val)
{
	size_t mark = jw->len;

	if (val == NULL || val[0] == '\0')
		return;
	api_jw_raw(jw, member, len);
	api_jw_str(jw, val);
	if (jw->full) {
		/* Drop the partial member: the line stays valid JSON. */
		jw->len = mark;
		jw->full = false;
		jw->keep = LOG_LINE_MAX; /* nothing more fits */
	}
}

static void
line_end(api_jw *jw)
{
	jw->buf[jw->len++] = '}';
	jw->buf[jw->len++] = '\n';
	emit(jw->buf, jw->len);
}

void
srv_log_request(const char *severity, const char *method, const char *route,
    int status, double latency_ms, const char *lock, const char *owner,
    const char *reason, const char *error, const char *trace)
{
	char buf[LOG_LINE_MAX], ms[32];
	int64_t us = (int64_t)(latency_ms * 1000.0);
	api_jw jw, num;

	line_start(&jw, buf, severity, "request");
	put_field(&jw, "method", method);
	put_field(&jw, "route", route);
	LIT(&jw, MEMBER("status"));
	api_jw_int(&jw, status);
	/* Milliseconds with three decimals, without printf. */
	api_jw_init(&num, ms, sizeof(ms), 0);
	api_jw_int(&num, us / 1000);
	api_jw_lit(&num,
	    us % 1000 < 100 ? (us % 1000 < 10 ? ".00" : ".0") : ".");
	api_jw_int(&num, us % 1000);
	LIT(&jw, MEMBER("latency_ms"));
	api_jw_raw(&jw, num.buf, num.len);
	put_field(&jw, "lock", lock);
	put_field(&jw, "owner", owner);
	put_field(&jw, "reason", reason);
	put_field(&jw, "logging.googleapis.com/trace", trace);
	put_field(&jw, "error", error);
	line_end(&jw);
}

void
srv_log_event(const char *severity, const char *event, const char *lock,
    const char *owner, const char *holder, const char *actor,
    const char *reason, int64_t token)
{
	char buf[LOG_LINE_MAX];
	api_jw jw;

	line_start(&jw, buf, severity, "lock event");
	put_field(&jw, "event", event);
	put_field(&jw, "lock", lock);
	put_field(&jw, "owner", owner);
	put_field(&jw, "holder", holder);
	put_field(&jw, "actor", actor);
	put_field(&jw, "reason", reason);
	if (token > 0) {
		LIT(&jw, MEMBER("fencing_token"));
		api_jw_int(&jw, token);
	}
	line_end(&jw);
}

void
srv_logf(const char *severity, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	srv_log(severity, msg, NULL);
}
