/* metrics.c: placeholder until the metrics module lands (issue 6). */
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

void metrics_http(const char *route, int status, double seconds)
{ (void)route; (void)status; (void)seconds; }
void metrics_lock_outcome(const char *outcome) { (void)outcome; }
void metrics_wait_observe(double seconds) { (void)seconds; }
void metrics_waiters_add(int delta) { (void)delta; }
void metrics_store_call(const char *op, const char *status, double seconds)
{ (void)op; (void)status; (void)seconds; }

char *
metrics_render(size_t *len)
{
	char *s = strdup("# lockgate metrics are not built yet\n");

	*len = s ? strlen(s) : 0;
	return s;
}
