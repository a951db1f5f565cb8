/*
 * routes_int.h: what the lock routes (routes.c) and the other routes
 * (routes_site.c) share.  Private to server/.
 */
#ifndef LOCKGATE_ROUTES_INT_H
#define LOCKGATE_ROUTES_INT_H

#include <stdbool.h>

#include "auth.h"
#include "http_int.h"

/* The parameters of a route that takes none but format. */
extern const char *const routes_plain_params[];

/* Whether R is a GET (a HEAD counts as one). */
bool routes_is_get(const srv_req *r);
/* The 405 for R, naming the method ALLOWED. */
enum MHD_Result routes_bad_method(srv_req *r, const char *allowed);
/* Authenticate R for ACTION on NAME (NULL: no lock).  0 when the
 * request may go on; -1 when an answer was queued, its result in *MR. */
int routes_authenticate(srv_req *r, auth_action action, const char *name,
    enum MHD_Result *mr);
/* Set R's answer format from F ("env" or "json"); -1 when F is neither
 * (answered, result in *MR). */
int routes_format_pick(srv_req *r, const char *f, enum MHD_Result *mr);
/* Parse R's parameters against ALLOWED (a format in the body counts);
 * -1 when an answer was queued, its result in *MR. */
int routes_prepare(srv_req *r, const char *const *allowed, enum MHD_Result *mr);
/* Pick R's answer format from its query or Accept header; -1 when the
 * format parameter is bad (answered, result in *MR). */
int routes_negotiate(srv_req *r, enum MHD_Result *mr);

/* routes_site.c: GET /v1/whoami, /readyz, /metrics, /healthz. */
enum MHD_Result routes_whoami(srv_req *r);
enum MHD_Result routes_readyz(srv_req *r);
enum MHD_Result routes_metrics(srv_req *r);
enum MHD_Result routes_healthz(srv_req *r);
/* GET URL: a dashboard asset, or 404. */
enum MHD_Result routes_asset(srv_req *r, const char *url);

#endif
