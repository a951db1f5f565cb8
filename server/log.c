/*
 * log.c: structured logs, one JSON object per line on stdout, in the shape
 * Cloud Logging reads (severity, message, time).  A line is written with a
 * single write(2) so concurrent lines never interleave.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdbool.h>
#include <unistd.h>

#include "srv.h"

void
srv_log(const char *severity, const char *message, json_t *fields)
{
	json_t *line = json_object();
	struct timespec ts;
	char when[40];
	char *text;
	size_t len;

	if (line == NULL) {
		json_decref(fields);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	api_time_str((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, when,
	    sizeof(when));
	json_object_set_new(line, "severity", json_string(severity));
	json_object_set_new(line, "message", json_string(message));
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
	if (write(STDOUT_FILENO, text, len + 1) < 0) {
		/* Nowhere left to report it. */
	}
	free(text);
}

/*
 * The hot path: the request line and lock events are written straight into
 * a buffer, without building JSON objects (a third of a lock operation's
 * CPU went to logging when they were).  Strings are escaped for JSON; the
 * line is cut short, still valid, if it would not fit.
 */
typedef struct line {
	char buf[4096];
	size_t len;
	bool full;
} line;

static void
put(line *l, const char *s, size_t n)
{
	if (l->full || l->len + n >= sizeof(l->buf) - 8) {
		l->full = true;
		return;
	}
	memcpy(l->buf + l->len, s, n);
	l->len += n;
}

static void
put_str(line *l, const char *s)
{
	put(l, s, strlen(s));
}

/* S as a JSON string. */
static void
put_json(line *l, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	const unsigned char *run;
	char esc[8];

	put(l, "\"", 1);
	while (*p) {
		for (run = p; *p >= 0x20 && *p != '"' && *p != '\\' &&
		    *p != 0x7f; p++)
			;
		put(l, (const char *)run, (size_t)(p - run));
		if (*p == '\0')
			break;
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			put(l, esc, 2);
		} else {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 15];
			put(l, esc, 6);
		}
		p++;
	}
	put(l, "\"", 1);
}

static void
put_field(line *l, const char *key, const char *val)
{
	if (val == NULL || val[0] == '\0')
		return;
	put(l, ",", 1);
	put_json(l, key);
	put(l, ":", 1);
	put_json(l, val);
}

static void
put_num(line *l, const char *key, const char *fmt, double v)
{
	char num[48];
	int n;

	put(l, ",", 1);
	put_json(l, key);
	put(l, ":", 1);
	n = snprintf(num, sizeof(num), fmt, v);
	if (n > 0 && (size_t)n < sizeof(num))
		put(l, num, (size_t)n);
	else
		put(l, "0", 1);
}

static void
line_start(line *l, const char *severity, const char *message)
{
	struct timespec ts;
	char when[40];

	l->len = 0;
	l->full = false;
	clock_gettime(CLOCK_REALTIME, &ts);
	api_time_str((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, when,
	    sizeof(when));
	put_str(l, "{\"severity\":");
	put_json(l, severity);
	put_str(l, ",\"message\":");
	put_json(l, message);
	put_str(l, ",\"time\":");
	put_json(l, when);
}

static void
line_end(line *l)
{
	/* put() keeps 8 bytes in reserve, so this always fits. */
	l->buf[l->len++] = '}';
	l->buf[l->len++] = '\n';
	if (write(STDOUT_FILENO, l->buf, l->len) < 0) {
		/* Nowhere left to report it. */
	}
}

void
srv_log_request(const char *severity, const char *method, const char *route,
    int status, double latency_ms, const char *lock, const char *owner,
    const char *reason, const char *trace)
{
	line l;

	line_start(&l, severity, "request");
	put_field(&l, "method", method);
	put_field(&l, "route", route);
	put_num(&l, "status", "%.0f", (double)status);
	put_num(&l, "latency_ms", "%.3f", latency_ms);
	put_field(&l, "lock", lock);
	put_field(&l, "owner", owner);
	put_field(&l, "reason", reason);
	put_field(&l, "logging.googleapis.com/trace", trace);
	line_end(&l);
}

void
srv_log_event(const char *severity, const char *event, const char *lock,
    const char *owner, const char *holder, const char *actor, int64_t token)
{
	line l;

	line_start(&l, severity, "lock event");
	put_field(&l, "event", event);
	put_field(&l, "lock", lock);
	put_field(&l, "owner", owner);
	put_field(&l, "holder", holder);
	put_field(&l, "actor", actor);
	if (token > 0)
		put_num(&l, "fencing_token", "%.0f", (double)token);
	line_end(&l);
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
