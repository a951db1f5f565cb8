/*
 * tmpdir.h: the unit tests' temporary directories.
 */
#ifndef LOCKGATE_TMPDIR_H
#define LOCKGATE_TMPDIR_H

/* Remove PATH and everything below it, without following symlinks; a
 * missing PATH is fine.  For directories the tests made with mkdtemp. */
void tmpdir_remove(const char *path);

#endif
