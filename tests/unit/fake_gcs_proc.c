/* fake_gcs_proc.c: start, stop and query build/tools/fake_gcs for tests. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "fake_gcs_proc.h"

int
fake_gcs_start(fake_gcs *f, const char *const *args)
{
	const char *argv[FAKE_GCS_ARGS_MAX + 4];
	char line[32];
	struct pollfd pfd;
	size_t got = 0;
	int fds[2], i, n = 0;
	ssize_t r;
	long port;
	char *end;

	memset(f, 0, sizeof(*f));
	f->pid = -1;
	argv[n++] = FAKE_GCS_BIN;
	argv[n++] = "--port";
	argv[n++] = "0";
	for (i = 0; args != NULL && args[i] != NULL && i < FAKE_GCS_ARGS_MAX;
	     i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if (pipe(fds) != 0)
		return -1;
	f->pid = fork();
	if (f->pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (f->pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execv(FAKE_GCS_BIN, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	while (got < sizeof(line) - 1 && memchr(line, '\n', got) == NULL) {
		if (poll(&pfd, 1, FAKE_GCS_START_MS) <= 0)
			break;
		r = read(fds[0], line + got, sizeof(line) - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fds[0]);
	line[got] = '\0';
	errno = 0;
	port = strtol(line, &end, 10);
	if (errno != 0 || end == line || (*end != '\n' && *end != '\0') ||
	    port <= 0 || port > 65535) {
		fake_gcs_stop(f);
		return -1;
	}
	f->port = (int)port;
	snprintf(f->hostport, sizeof(f->hostport), "127.0.0.1:%d", f->port);
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d", f->port);
	return 0;
}

void
fake_gcs_stop(fake_gcs *f)
{
	struct timespec ts = { 0, 10 * 1000000 };
	int st, waited = 0;

	if (f->pid <= 0)
		return;
	kill(f->pid, SIGTERM);
	while (waitpid(f->pid, &st, WNOHANG) == 0) {
		if (waited >= FAKE_GCS_STOP_MS) {
			kill(f->pid, SIGKILL);
			waitpid(f->pid, &st, 0);
			break;
		}
		nanosleep(&ts, NULL);
		waited += 10;
	}
	f->pid = -1;
}

typedef struct body_buf {
	char *p;
	size_t n;
} body_buf;

static size_t
on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
	body_buf *b = ud;
	size_t n = size * nmemb;
	char *np = realloc(b->p, b->n + n + 1);

	if (np == NULL)
		return 0;
	memcpy(np + b->n, ptr, n);
	b->p = np;
	b->n += n;
	b->p[b->n] = '\0';
	return n;
}

static size_t
on_hdr(char *buf, size_t size, size_t n, void *ud)
{
	int *date = ud;

	if (size * n >= 5 && strncasecmp(buf, "Date:", 5) == 0)
		*date = 1;
	return size * n;
}

int
fake_gcs_http(const fake_gcs *f, const char *method, const char *pathq,
    const char *hdr, const char *body, char **out, int *date)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hl = NULL;
	body_buf b = { NULL, 0 };
	char url[2048];
	long status = -1;
	int got_date = 0;

	if (out != NULL)
		*out = NULL;
	if (h == NULL)
		return -1;
	snprintf(url, sizeof(url), "%s%s", f->url, pathq);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_hdr);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &got_date);
	if (strcmp(method, "GET") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	if (hdr != NULL) {
		hl = curl_slist_append(NULL, hdr);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	}
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	curl_slist_free_all(hl);
	if (out != NULL)
		*out = b.p;
	else
		free(b.p);
	if (date != NULL)
		*date = got_date;
	return (int)status;
}

int
fake_gcs_ctl(const fake_gcs *f, const char *pathq, char **out)
{
	return fake_gcs_http(f, "GET", pathq, NULL, NULL, out, NULL);
}

json_t *
fake_gcs_json(const fake_gcs *f, const char *path)
{
	char *body = NULL;
	json_t *j = NULL;

	if (fake_gcs_ctl(f, path, &body) == 200 && body != NULL)
		j = json_loads(body, 0, NULL);
	free(body);
	return j;
}

long
fake_gcs_count(const fake_gcs *f, const char *op)
{
	json_t *j = fake_gcs_json(f, "/_fake/stats"), *v;
	long n = -1;

	v = json_object_get(json_object_get(j, "ops"), op);
	if (v == NULL)
		v = json_object_get(j, op);
	if (json_is_integer(v))
		n = (long)json_integer_value(v);
	json_decref(j);
	return n;
}

int
fake_gcs_start_group(fake_gcs *f, const char *const *args)
{
	if (fake_gcs_start(f, args) == 0)
		return 0;
	fprintf(stderr, "cannot start %s (run make first)\n", FAKE_GCS_BIN);
	return -1;
}

gcs_store *
fake_gcs_store(const fake_gcs *f, const char *bucket, const char *prefix,
    const gcs_retry_policy *p)
{
	gcs_err err;
	gcs_store *s;

	setenv("STORAGE_EMULATOR_HOST", f->hostport, 1);
	gcs_configure(&(gcs_settings){ 0 }); /* the default endpoint */
	s = gcs_gs_new(bucket, prefix, &err);
	if (s != NULL && p != NULL)
		gcs_gs_set_retry(s, p);
	return s;
}
