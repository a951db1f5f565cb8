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
