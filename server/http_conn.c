/*
 * http_conn.c: a loop's connections and their limits: the connection
 * limit (a 503 at once past it), slow request heads, and the request
 * target each connection sends, seen before libmicrohttpd decodes it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_int.h"
#include "events.h"
#include "format_env.h"
#include "metrics.h"
#include "util/clock.h"

/*
 * A connection past the limit: answered 503 with Retry-After at once and
 * closed, rather than left to wait in the kernel's backlog as
 * libmicrohttpd would (it stops accepting at its limit, which is set
 * SRV_CONN_OVERFLOW above ours for this).  The answer is a few fixed bytes
 * written straight to the new socket, whose send buffer is empty: no
 * request is read, so there is nothing to frame.  Counted.
 */
static void
refuse_over_limit(srv_target *t)
{
	static const char body[] =
	    "{\"error\":{\"code\":\"too_many_connections\",\"message\":"
	    "\"this instance has all the connections it takes; retry "
	    "shortly\"}}\n";
	char answer[512];
	int n;

	n = snprintf(answer, sizeof(answer),
	    "HTTP/1.1 503 Service Unavailable\r\n"
	    "Content-Type: application/json\r\n"
	    "Retry-After: 1\r\n"
	    "Connection: close\r\n"
	    "Content-Length: %zu\r\n\r\n%s",
	    sizeof(body) - 1, body);
	if (t->fd >= 0 && n > 0 && (size_t)n < sizeof(answer)) {
		(void)send(t->fd, answer, (size_t)n,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
		shutdown(t->fd, SHUT_RDWR);
	}
	t->head_by = 0;
	metrics_conns_refused(1);
}

/* A connection starts (its record joins the loop's list, its first head
 * due within the head timeout) or ends.  On the loop's thread. */
void
http_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode code)
{
	srv_loop *lp = cls;
	srv_target *t = *socket_context;
	const union MHD_ConnectionInfo *ci;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		if ((t = calloc(1, sizeof(*t))) == NULL)
			return;
		ci = MHD_get_connection_info(conn,
		    MHD_CONNECTION_INFO_CONNECTION_FD);
		t->fd = ci != NULL ? ci->connect_fd : -1;
		t->head_by = util_mono_ms() + lp->srv->cfg->head_timeout * 1000;
		if ((t->next = lp->conns) != NULL)
			t->next->prev = t;
		lp->conns = t;
		*socket_context = t;
		if (++lp->nconns > lp->max_conns)
			refuse_over_limit(t);
		return;
	}
	if (t == NULL)
		return;
	/* Its client left with a head pending (not one idle between two
	 * requests; head_by is 0 for one closed by a sweep or refused; at
	 * a stop, lockgate closes them). */
	if (t->head_by != 0 && (!t->served || t->head_begun) &&
	    !lp->srv->draining)
		srv_drop(SRV_DROP_HEAD, 1);
	lp->nconns--;
	if (t->prev != NULL)
		t->prev->next = t->next;
	else
		lp->conns = t->next;
	if (t->next != NULL)
		t->next->prev = t->prev;
	free(t);
	*socket_context = NULL;
}

/*
 * Close the connections of LP whose request head is overdue: a client
 * that opens connections and trickles a header byte now and then (each
 * byte restarts libmicrohttpd's idle timeout) would otherwise hold them
 * all, and nobody else, a lock's holder included, could connect.  The
 * socket is shut down; libmicrohttpd sees it end and closes it.  Counted,
 * and logged in aggregate (drops.c).  On the loop's thread.
 */
void
http_sweep_slow_heads(srv_loop *lp)
{
	int64_t now = util_mono_ms();
	unsigned n = 0;
	srv_target *t;

	if (now < lp->next_sweep)
		return;
	lp->next_sweep = now + SRV_SWEEP_MS;
	for (t = lp->conns; t != NULL; t = t->next)
		if (t->head_by != 0 && now >= t->head_by && t->fd >= 0) {
			shutdown(t->fd, SHUT_RDWR);
			t->head_by = 0;
			n++;
		}
	srv_drop(SRV_DROP_SLOW_HEAD, n);
}

/* CONN's srv_target; NULL when there was no memory for one. */
srv_target *
http_target_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci != NULL ? ci->socket_context : NULL;
}

/* Whether URI holds a space, a control byte or DEL. */
static bool
has_space_or_ctl(const char *uri)
{
	for (; *uri != '\0'; uri++)
		if ((unsigned char)*uri <= 0x20 || *uri == 0x7f)
			return true;
	return false;
}

/*
 * libmicrohttpd's URI callback: it sees the request target as received,
 * before the query is split into arguments and anything is decoded.  The
 * target is kept (srv_target) so that the request is routed on the raw
 * path: "/%6detrics" is no route, and what a proxy in front filtered by
 * its path is what is served.  What is wrong with it is noted for
 * http_access_handler to refuse:
 *
 * - "%00" anywhere: the decoded path or value would end at the NUL, and
 *   what follows would never be checked.
 * - A target that a parser in front could read otherwise (target_path).
 * - A space or a control byte (a bare CR, a tab, DEL): a target has none
 *   (RFC 9112, section 3.2), and libmicrohttpd 0.9.75 takes everything
 *   between the method and the last space of the line as the target, so
 *   "GET /healthz HTTP/1.1<CR>Host: x<CR><CR>GET /v1/whoami HTTP/1.1" was
 *   one request for a path holding both request lines.
 * - More than SRV_QUERY_ARGS_MAX arguments.  libmicrohttpd 0.9.75 stores
 *   each one in the connection's memory (SRV_CONN_MEMORY), and from about
 *   480 it runs out, and loses even its own 431: the client waited for the
 *   idle timeout.  So nothing more is read from that client: a head that
 *   is in already gets the 400, any other the connection closed at once.
 */
/* Whether AUTH (up to the first '/' or '?') is a host and an optional
 * port, one way only: a name or an IPv4 address, or an IPv6 address in
 * brackets, then ":DIGITS" or nothing. */
static bool
host_and_port(const char *auth)
{
	static const char name[] = "abcdefghijklmnopqrstuvwxyz"
	                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-";
	size_t h;

	if (auth[0] == '[') {
		h = 1 + strspn(auth + 1, "0123456789abcdefABCDEF:.");
		if (h == 1 || auth[h] != ']')
			return false;
		h++;
	} else if ((h = strspn(auth, name)) == 0) {
		return false;
	}
	if (auth[h] == ':')
		h += 1 + strspn(auth + h + 1, "0123456789");
	return auth[h] == '\0' || auth[h] == '/' || auth[h] == '?';
}

/* Where the path of target URI begins: URI, or past "http://AUTHORITY"
 * or "https://AUTHORITY" in the absolute form, which a server must
 * accept as it does the origin form (RFC 9112, section 3.2.2); an
 * absolute form's Host header is then ignored, as lockgate ignores Host
 * anyway.  NULL when a parser in front could read the target otherwise:
 * a '#' or '\\' anywhere (a request target has no fragment, and a URL
 * parser may take '\\' for '/'), or an authority that is not a host and
 * port (userinfo, say, none, or brackets that do not close). */
static const char *
target_path(const char *uri)
{
	const char *p;

	if (strpbrk(uri, "#\\") != NULL)
		return NULL;
	if (strncasecmp(uri, "http://", 7) == 0)
		p = uri + 7;
	else if (strncasecmp(uri, "https://", 8) == 0)
		p = uri + 8;
	else
		return uri;
	if (!host_and_port(p))
		return NULL;
	return p + strcspn(p, "/?");
}

void *
http_uri_seen(void *cls, const char *uri, struct MHD_Connection *conn)
{
	srv_target *t = http_target_of(conn);
	const char *path = target_path(uri);
	size_t plen;

	(void)cls;
	if (t == NULL)
		return NULL;
	t->odd_target = path == NULL;
	if (path == NULL)
		path = uri;
	plen = strcspn(path, "?");
	t->path[0] = '\0';
	t->encoded_nul = t->many_args = t->space_or_ctl = false;
	t->head_begun = true;
	t->len = strlen(uri);
	t->path_too_long = plen > SRV_PATH_MAX;
	if (!t->path_too_long && plen == 0 && path != uri) {
		strcpy(t->path, "/"); /* "http://host" is "/" */
	} else if (!t->path_too_long) {
		memcpy(t->path, path, plen);
		t->path[plen] = '\0';
	}
	t->encoded_nul = strstr(uri, "%00") != NULL;
	t->space_or_ctl = has_space_or_ctl(uri);
	if (http_query_args(uri) > SRV_QUERY_ARGS_MAX) {
		t->many_args = true;
		http_stop_reading(conn);
	}
	return NULL;
}
