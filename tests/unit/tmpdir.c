/*
 * tmpdir.c: see tmpdir.h.
 */
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

#include "tmpdir.h"

#define TMPDIR_FDS 16 /* descriptors nftw may hold open */

static int
remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void
tmpdir_remove(const char *path)
{
	nftw(path, remove_one, TMPDIR_FDS, FTW_DEPTH | FTW_PHYS);
}
