/*
 * web.c: finds the dashboard's embedded files and says how to serve them.
 *
 * Lookup is an exact match against the table the build generated, so no
 * path from a request can name anything else (no "..", no file system).
 */
#include <string.h>

#include "server/web.h"

/* The Content-Security-Policy: scripts, styles, images and fetches only
 * from this origin; no inline script or style, no eval, no plugins, no
 * framing, no <base> and no form posts elsewhere. */
#define WEB_CSP \
	"default-src 'none'; script-src 'self'; style-src 'self'; " \
	"img-src 'self'; connect-src 'self'; manifest-src 'self'; " \
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

const char *const srv_web_headers[][2] = {
	{ "Content-Security-Policy", WEB_CSP },
	{ "X-Content-Type-Options", "nosniff" },
	{ "Referrer-Policy", "no-referrer" },
	{ "X-Frame-Options", "DENY" }, /* older browsers */
	{ "Cross-Origin-Opener-Policy", "same-origin" },
	{ "Cache-Control", "no-cache" }, /* revalidate: new builds */
	{ NULL, NULL },
};

static const struct {
	const char *ext;
	const char *type;
} web_types[] = {
	{ ".html", "text/html; charset=utf-8" },
	{ ".js", "text/javascript; charset=utf-8" },
	{ ".css", "text/css; charset=utf-8" },
	{ ".svg", "image/svg+xml" },
	{ ".ico", "image/x-icon" },
};

static const char *
type_of(const char *path)
{
	const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
	size_t i;

	if (dot != NULL && (slash == NULL || dot > slash))
		for (i = 0; i < sizeof(web_types) / sizeof(web_types[0]); i++)
			if (strcmp(dot, web_types[i].ext) == 0)
				return web_types[i].type;
	/* lockctl and anything without a known extension: show, never run */
	return "text/plain; charset=utf-8";
}

const srv_asset *
srv_web_find(const char *url_path, const char **content_type)
{
	const srv_asset *a;

	if (content_type != NULL)
		*content_type = NULL;
	if (url_path == NULL ||
	    strnlen(url_path, SRV_WEB_PATH_MAX + 1) > SRV_WEB_PATH_MAX)
		return NULL;
	if (strcmp(url_path, "/") == 0)
		url_path = "/index.html";
	for (a = srv_assets; a->path != NULL; a++) {
		if (strcmp(a->path, url_path) != 0)
			continue;
		if (content_type != NULL)
			*content_type = type_of(a->path);
		return a;
	}
	return NULL;
}
