/* auth.c: placeholder until the identity module lands (issue 4). */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "auth.h"

struct auth_ctx {
	int unused;
};

auth_ctx *
auth_new(const auth_config *cfg, char *err, size_t errlen)
{
	(void)cfg;
	(void)err;
	(void)errlen;
	return calloc(1, sizeof(auth_ctx));
}

void auth_free(auth_ctx *a) { free(a); }
int auth_configured(const auth_ctx *a) { (void)a; return 0; }
int auth_reload(auth_ctx *a, char *err, size_t errlen)
{ (void)a; (void)err; (void)errlen; return 0; }

int
auth_verify(auth_ctx *a, const char *authorization, auth_identity *id,
    auth_refusal *why)
{
	(void)a;
	(void)authorization;
	memset(id, 0, sizeof(*id));
	why->reason = "not_implemented";
	snprintf(why->message, sizeof(why->message), "auth is not built yet");
	return -1;
}

void auth_identity_clear(auth_identity *id)
{ json_decref(id->display); memset(id, 0, sizeof(*id)); }

int
auth_allowed(auth_ctx *a, const auth_identity *id, auth_action action,
    const char *name, char *why, size_t whylen)
{
	(void)a; (void)id; (void)action; (void)name; (void)why; (void)whylen;
	return 0;
}

char *
auth_mint_hs256(const char *secret, size_t secret_len, const char *sub,
    long ttl, bool admin)
{
	(void)secret; (void)secret_len; (void)sub; (void)ttl; (void)admin;
	return NULL;
}

int auth_token_main(int argc, char **argv) { (void)argc; (void)argv; return 2; }
