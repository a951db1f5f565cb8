/*
 * name.c: the lock name and the short texts of the request edge.
 * Calls api_name_valid, api_lease_id_valid, api_text_clean and
 * api_utf8_scrub (api/validate.c) and srv_web_find (server/web.c, the
 * dashboard's URL paths), and checks the name rules of design.md
 * section 2 against what api_name_valid accepts.
 */
#include <jansson.h>

#include "api/api.h"
#include "server/web.h"

#include "fuzz.h"

/* Design section 2, written again independently. */
static int
name_rule(const char *s, size_t n)
{
	size_t i;

	if (n < 1 || n > API_NAME_MAX)
		return 0;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
	        (s[0] >= '0' && s[0] <= '9')))
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		        c == '-' || c == '/'))
			return 0;
	}
	if (s[n - 1] == '/' || strstr(s, "//") != NULL)
		return 0;
	return 1;
}

/* Whether the name holds a ".." segment (design) or a "." segment
 * (api/validate.c refuses it too: it would alias the name without it on
 * a file system). */
static int
has_dotdot(const char *s)
{
	const char *p = s;

	while ((p = strchr(p, '.')) != NULL) {
		if ((p == s || p[-1] == '/') &&
		    (p[1] == '\0' || p[1] == '/' ||
		        (p[1] == '.' && (p[2] == '\0' || p[2] == '/'))))
			return 1;
		p++;
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_str(data, size), why[128];
	const char *ctype = NULL;
	json_t *j;
	size_t n = strlen(s); /* the name is a C string in the server */
	int ok;

	ok = api_name_valid(s, why, sizeof(why));
	FUZZ_CHECK(ok == 0 || ok == 1);
	if (ok) {
		FUZZ_CHECK(name_rule(s, n));
		FUZZ_CHECK(!has_dotdot(s));
	} else {
		FUZZ_CHECK(memchr(why, '\0', sizeof(why)) != NULL);
		/* and nothing the rules allow is refused */
		FUZZ_CHECK(!name_rule(s, n) || has_dotdot(s));
	}
	if (api_lease_id_valid(s))
		FUZZ_CHECK(n >= API_LEASE_ID_MIN && n <= API_LEASE_ID_MAX);
	if (api_text_clean((const char *)data, size)) {
		/* Clean text is valid UTF-8 without NUL: JSON can carry it. */
		j = json_stringn((const char *)data, size);
		FUZZ_CHECK(j != NULL);
		json_decref(j);
	}
	/* Scrubbed text is valid UTF-8, whatever came in. */
	api_utf8_scrub(s);
	j = json_string(s);
	FUZZ_CHECK(j != NULL);
	json_decref(j);
	(void)srv_web_find(s, &ctype);
	free(s);
	return 0;
}
