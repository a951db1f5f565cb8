/*
 * util/wipe.h: the one way to wipe a secret (a key, a token, a password
 * read from a file) from memory before it is freed or goes out of scope.
 * explicit_bzero, which the compiler may not drop as a dead store.
 */
#ifndef LOCKGATE_UTIL_WIPE_H
#define LOCKGATE_UTIL_WIPE_H

#include <stddef.h>
#include <string.h>

/* Zero N bytes at P; P may be NULL. */
static inline void
util_wipe(void *p, size_t n)
{
	if (p != NULL && n > 0)
		explicit_bzero(p, n);
}

#endif
