/*
 * json_pick.c: gcs_json_pick (gcs/gcs_http.c), the scanner that reads an
 * insert's answer without building it, against jansson.  What must hold:
 * a text it calls malformed (-1) jansson refuses too (else a write that
 * succeeded would be reported as failed; texts holding a NUL byte
 * aside), a text it accepts (0) is one
 * object for jansson (numbers out of jansson's range aside), and every
 * picked member is the one jansson sees: same type, same string.
 */
#include <jansson.h>

#include "gcs/gcs_http.h"

#include "fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gcs_jpick f[4] = { { .key = "generation" }, { .key = "metageneration" },
		{ .key = "timeCreated" }, { .key = "updated" } };
	json_error_t je;
	json_t *j, *v;
	size_t i;
	int rc;

	rc = gcs_json_pick((const char *)data, size, f, 4);
	FUZZ_CHECK(rc == -1 || rc == 0 || rc == 1);
	/* "\u0000" is valid JSON (RFC 8259), which jansson refuses unless
	 * asked: regressions/json_pick */
	j = json_loadb((const char *)data, size, JSON_ALLOW_NUL, &je);
	if (rc == -1) {
		/* jansson takes a NUL byte for the end of the text: no JSON
		 * text holds one, so there the two may disagree */
		FUZZ_CHECK(j == NULL || !json_is_object(j) ||
		    memchr(data, '\0', size) != NULL);
	} else if (rc == 0) {
		if (j == NULL) {
			/* jansson keeps integers to int64 and reals finite */
			FUZZ_CHECK(strstr(je.text, "too big") != NULL ||
			    strstr(je.text, "overflow") != NULL);
			return 0;
		}
		FUZZ_CHECK(json_is_object(j));
		for (i = 0; i < 4; i++) {
			v = json_object_get(j, f[i].key);
			if (f[i].val == NULL) {
				FUZZ_CHECK(v == NULL ||
				    (!json_is_string(v) && !json_is_number(v)));
				continue;
			}
			FUZZ_CHECK(f[i].val >= (const char *)data &&
			    f[i].val + f[i].len <= (const char *)data + size);
			if (f[i].is_str) {
				FUZZ_CHECK(json_is_string(v));
				FUZZ_CHECK(json_string_length(v) == f[i].len);
				FUZZ_CHECK(memcmp(json_string_value(v),
				               f[i].val, f[i].len) == 0);
			} else {
				FUZZ_CHECK(json_is_number(v));
			}
		}
	}
	json_decref(j);
	return 0;
}
