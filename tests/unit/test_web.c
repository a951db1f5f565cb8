/* test_web.c: asset lookup and security headers (server/web.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "server/web.h"

static const char *
header(const char *name)
{
	size_t i;

	for (i = 0; srv_web_headers[i][0] != NULL; i++)
		if (strcmp(srv_web_headers[i][0], name) == 0)
			return srv_web_headers[i][1];
	return NULL;
}

static void
test_assets_served_with_types(void **state)
{
	const srv_asset *a, *b;
	const char *type = NULL;

	(void)state;
	a = srv_web_find("/", &type);
	assert_non_null(a);
	assert_string_equal(a->path, "/index.html");
	assert_string_equal(type, "text/html; charset=utf-8");
	assert_true(a->len > 0);
	assert_int_equal(strlen((const char *)a->data), a->len);
	assert_non_null(strstr((const char *)a->data, "app.js"));
	b = srv_web_find("/index.html", NULL);
	assert_ptr_equal(a, b);
}

static void
test_content_types_by_extension_lockctl_as_text(void **state)
{
	const char *type = NULL;

	(void)state;
	assert_non_null(srv_web_find("/app.js", &type));
	assert_string_equal(type, "text/javascript; charset=utf-8");
	assert_non_null(srv_web_find("/app.css", &type));
	assert_string_equal(type, "text/css; charset=utf-8");
	assert_non_null(srv_web_find("/favicon.svg", &type));
	assert_string_equal(type, "image/svg+xml");
	/* the shell client is shown as text, never as something to run */
	assert_non_null(srv_web_find("/lockctl", &type));
	assert_string_equal(type, "text/plain; charset=utf-8");
}

static void
test_unknown_paths_not_found(void **state)
{
	const char *type = "stale";
	char big[SRV_WEB_PATH_MAX + 10];

	(void)state;
	assert_null(srv_web_find("/nope.js", &type));
	assert_null(type);
	assert_null(srv_web_find("", NULL));
	assert_null(srv_web_find(NULL, NULL));
	assert_null(srv_web_find("index.html", NULL));
	assert_null(srv_web_find("/../index.html", NULL));
	assert_null(srv_web_find("/index.html?x=1", NULL));
	assert_null(srv_web_find("//index.html", NULL));
	memset(big, 'a', sizeof(big) - 1);
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	assert_null(srv_web_find(big, NULL));
}

static void
test_security_headers_strict(void **state)
{
	const char *csp;

	(void)state;
	csp = header("Content-Security-Policy");
	assert_non_null(csp);
	assert_non_null(strstr(csp, "script-src 'self'"));
	assert_non_null(strstr(csp, "frame-ancestors 'none'"));
	assert_non_null(strstr(csp, "default-src 'none'"));
	assert_null(strstr(csp, "unsafe-inline"));
	assert_null(strstr(csp, "unsafe-eval"));
	assert_null(strstr(csp, "*"));
	assert_string_equal(header("X-Content-Type-Options"), "nosniff");
	assert_string_equal(header("Referrer-Policy"), "no-referrer");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_assets_served_with_types),
		cmocka_unit_test(
		    test_content_types_by_extension_lockctl_as_text),
		cmocka_unit_test(test_unknown_paths_not_found),
		cmocka_unit_test(test_security_headers_strict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
