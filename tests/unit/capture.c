/*
 * capture.c: see capture.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "capture.h"

static int saved_stdout = -1;
static char path[64];

int
capture_start(void)
{
	int fd;

	snprintf(path, sizeof(path), "/tmp/lockgate-test-out.XXXXXX");
	if ((fd = mkstemp(path)) < 0)
		return -1;
	fflush(stdout);
	saved_stdout = dup(STDOUT_FILENO);
	if (saved_stdout < 0 || dup2(fd, STDOUT_FILENO) < 0) {
		if (saved_stdout >= 0)
			close(saved_stdout);
		saved_stdout = -1;
		close(fd);
		unlink(path);
		return -1;
	}
	close(fd);
	return 0;
}

const char *
capture_path(void)
{
	return path;
}

void
capture_end(void)
{
	fflush(stdout);
	if (saved_stdout >= 0) {
		dup2(saved_stdout, STDOUT_FILENO);
		close(saved_stdout);
		saved_stdout = -1;
	}
	unlink(path);
}
