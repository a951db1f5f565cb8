/*
 * fuzz.h: shared by the libFuzzer harnesses of tests/fuzz/ (issue 24).
 *
 * Each harness is one input surface of lockgate, linked with the
 * project's own objects built by clang under the same sanitizers
 * (Makefile: build/fuzz/).  A harness states what must hold for every
 * input with FUZZ_CHECK, which aborts: libFuzzer then keeps the input as
 * a crash, exactly as for a memory error.
 */
#ifndef LOCKGATE_FUZZ_H
#define LOCKGATE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(c) \
	do { \
		if (!(c)) { \
			fprintf(stderr, "fuzz: check failed: %s (%s:%d)\n", \
			    #c, __FILE__, __LINE__); \
			abort(); \
		} \
	} while (0)

/* The N bytes at P as a new NUL-terminated string (free()). */
static inline char *
fuzz_str(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s == NULL)
		abort();
	if (n > 0)
		memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* A cursor over the input, for harnesses that take a few numbers first
 * and the rest as text.  Reading past the end gives zeros. */
typedef struct fuzz_in {
	const uint8_t *p;
	size_t n;
} fuzz_in;

static inline uint8_t
fuzz_u8(fuzz_in *in)
{
	uint8_t v = 0;

	if (in->n > 0) {
		v = in->p[0];
		in->p++;
		in->n--;
	}
	return v;
}

static inline uint64_t
fuzz_u64(fuzz_in *in)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | fuzz_u8(in);
	return v;
}

/* The input up to the next byte SEP (dropped), or to the end. */
static inline size_t
fuzz_field(fuzz_in *in, uint8_t sep, const uint8_t **start)
{
	const uint8_t *e = memchr(in->p, sep, in->n);
	size_t len = e ? (size_t)(e - in->p) : in->n;

	*start = in->p;
	in->p += len + (e != NULL);
	in->n -= len + (e != NULL);
	return len;
}

#endif
