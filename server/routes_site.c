/*
 * routes_site.c: the routes that are not about one lock: whoami, the
 * health and readiness checks, /metrics, the dashboard's assets, and the
 * choice between JSON and KEY='value' answers every /v1 route makes.
 */
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "metrics.h"
#include "routes_int.h"
#include "web.h"

/* The configured link hosts as a JSON array (new reference; NULL when out
 * of memory), lower-cased, at most SRV_LINK_HOSTS_MAX. */
static json_t *
link_hosts_json(const char *list)
{
	json_t *a = json_array();
	char host[256];
	size_t n, i;

	while (a != NULL && *list != '\0' &&
	    json_array_size(a) < SRV_LINK_HOSTS_MAX) {
		n = strcspn(list, ",");
		if (n > 0 && n < sizeof(host)) {
			for (i = 0; i < n; i++)
				host[i] =
				    (char)(list[i] >= 'A' && list[i] <= 'Z'
				            ? list[i] - 'A' + 'a'
				            : list[i]);
			host[n] = '\0';
			json_array_append_new(a, json_string(host));
		}
		list += n + (list[n] == ',');
	}
	return a;
}

enum MHD_Result
routes_whoami(srv_req *r)
{
	char why[200];
	enum MHD_Result mr;
	const char *h, *owner = NULL;
	bool admin = false;

	if (routes_prepare(r, routes_plain_params, &mr) != 0)
		return mr;
	h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_AUTHORIZATION);
	if (h != NULL || !r->srv->cfg->public_read) {
		if (routes_authenticate(r, AUTH_READ, NULL, &mr) != 0)
			return mr;
		owner = r->id.owner;
		/* admin: may force-release some lock (with a policy, the
		 * policy's admin action; the claim alone is not). */
		admin = auth_allowed(r->srv->auth, &r->id, AUTH_ADMIN, NULL,
		    why, sizeof(why));
	}
	/* link_hosts: whose URLs the dashboard may show as links. */
	return http_json(r, 200,
	    json_pack("{s:s?, s:b, s:b, s:o*}", "owner", owner, "admin", admin,
	        "public_read", r->srv->cfg->public_read, "link_hosts",
	        link_hosts_json(r->srv->cfg->link_hosts)));
}

enum MHD_Result
routes_readyz(srv_req *r)
{
	gcs_err ge;
	api_err err;

	if (srv_draining(r->srv))
		return http_fail(r, API_SHUTTING_DOWN, NULL,
		    "this instance is shutting down");
	if (gcs_check(api_store(r->srv->svc), &ge) != GCS_OK) {
		memset(&err, 0, sizeof(err));
		api_fail(&err, API_UNAVAILABLE,
		    "the lock storage does not answer: %s", ge.msg);
		api_copy(err.detail, sizeof(err.detail), ge.detail);
		return http_error(r, &err, NULL);
	}
	return http_json(r, 200, json_pack("{s:s}", "status", "ready"));
}

enum MHD_Result
routes_metrics(srv_req *r)
{
	enum MHD_Result mr;
	char *text;
	size_t len;

	if (!r->srv->cfg->metrics_public && !r->srv->cfg->public_read &&
	    routes_authenticate(r, AUTH_READ, NULL, &mr) != 0)
		return mr;
	if ((text = metrics_render(&len)) == NULL)
		return MHD_NO;
	mr = http_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text,
	    len, true);
	free(text);
	return mr;
}

enum MHD_Result
routes_asset(srv_req *r, const char *url)
{
	const srv_asset *a;
	const char *ctype;
	struct MHD_Response *resp;
	size_t i;

	r->route = "asset";
	if ((a = srv_web_find(url, &ctype)) == NULL)
		return http_fail(r, API_NOT_FOUND, NULL, "no such page");
	if (!routes_is_get(r))
		return routes_bad_method(r, "GET");
	resp = MHD_create_response_from_buffer(a->len, (void *)a->data,
	    MHD_RESPMEM_PERSISTENT);
	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", ctype);
	for (i = 0; srv_web_headers[i][0] != NULL; i++)
		MHD_add_response_header(resp, srv_web_headers[i][0],
		    srv_web_headers[i][1]);
	return http_send(r, 200, resp);
}

/*
 * Shell clients without jq ask for KEY='value' lines: Accept: text/plain,
 * or format=env.  -1 when the format parameter is bad (answered).
 */
int
routes_negotiate(srv_req *r, enum MHD_Result *mr)
{
	const char *f, *accept;

	f = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND,
	    "format");
	if (f != NULL)
		return routes_format_pick(r, f, mr);
	accept = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_ACCEPT);
	r->env_format = accept != NULL && strstr(accept, "text/plain") &&
	    !strstr(accept, "application/json");
	return 0;
}

enum MHD_Result
routes_healthz(srv_req *r)
{
	return http_json(r, 200, json_pack("{s:s}", "status", "ok"));
}
