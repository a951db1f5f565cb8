/*
 * capture.h: stdout into a temporary file, for the unit tests of what
 * lockgate writes there (its log lines).
 */
#ifndef LOCKGATE_CAPTURE_H
#define LOCKGATE_CAPTURE_H

/* Send stdout to a fresh temporary file; 0, or -1 with stdout as it was. */
int capture_start(void);
/* That file's path, until capture_end. */
const char *capture_path(void);
/* Flush stdout, give it back, and remove the file. */
void capture_end(void);

#endif
