/*
 * fake_jwks: a JWKS issuer on loopback for the end-to-end tests.
 *
 *   fake_jwks keygen DIR KID rsa|ec   DIR/KID.key (private PEM) and
 *                                     DIR/KID.jwk (its public JWK)
 *   fake_jwks sign DIR KID PAYLOAD    a token signed by DIR/KID.key, header
 *                                     {"alg":RS256|ES256,"typ":"JWT","kid"}
 *   fake_jwks raw ALG KEYFILE HEADER PAYLOAD
 *                                     a token over the JSON texts as given,
 *                                     ALG HS256 (KEYFILE's bytes are the
 *                                     secret), RS256 or ES256 (a private PEM)
 *   fake_jwks serve DIR PORTFILE      serves GET /jwks on 127.0.0.1 and a
 *                                     free port (written to PORTFILE):
 *                                     every DIR/\*.jwk, re-read per request,
 *                                     so rotating = adding/removing files;
 *                                     503 while DIR/fail exists.  Each
 *                                     request appends a line to
 *                                     DIR/requests.  Stops on SIGTERM.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "server/auth_int.h"

#define PATH_MAX_ 1024
#define FILE_MAX  65536
#define DOC_MAX   262144
#define EC_COORD  32

static volatile sig_atomic_t stop;
static const char *dir;

static void
on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (f == NULL)
		return NULL;
	buf = malloc(FILE_MAX + 1);
	if (buf == NULL) {
		fclose(f);
		return NULL;
	}
	n = fread(buf, 1, FILE_MAX, f);
	fclose(f);
	buf[n] = '\0';
	if (len != NULL)
		*len = n;
	return buf;
}

static int
spit(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -1;
	fputs(s, f);
	return fclose(f);
}

static char *
bn_b64(const BIGNUM *bn, int pad)
{
	unsigned char buf[1024];
	int n = pad > 0 ? BN_bn2binpad(bn, buf, pad) : BN_bn2bin(bn, buf);

	return n <= 0 ? NULL : auth_b64url_encode(buf, (size_t)n);
}

static int
keygen(const char *d, const char *kid, const char *type)
{
	int rsa = strcmp(type, "rsa") == 0;
	EVP_PKEY *k = rsa ? EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048)
	                  : EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	BIO *b = BIO_new(BIO_s_mem());
	BIGNUM *x = NULL, *y = NULL;
	char path[PATH_MAX_], jwk[4096], *pem = NULL, *sx, *sy;
	long len;

	if (k == NULL || b == NULL ||
	    PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) != 1)
		return 1;
	len = BIO_get_mem_data(b, &pem);
	snprintf(path, sizeof(path), "%s/%s.key", d, kid);
	{
		FILE *f = fopen(path, "w");

		if (f == NULL ||
		    fwrite(pem, 1, (size_t)len, f) != (size_t)len ||
		    fclose(f) != 0)
			return 1;
	}
	if (rsa ? EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_N, &x) != 1 ||
	            EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_E, &y) != 1
	        : EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_X, &x) != 1 ||
	            EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_Y, &y) != 1)
		return 1;
	sx = bn_b64(x, rsa ? 0 : EC_COORD);
	sy = bn_b64(y, rsa ? 0 : EC_COORD);
	if (sx == NULL || sy == NULL)
		return 1;
	if (rsa)
		snprintf(jwk, sizeof(jwk),
		    "{\"kty\":\"RSA\",\"use\":\"sig\","
		    "\"alg\":\"RS256\",\"kid\":\"%s\",\"n\":\"%s\",\"e\":\"%"
		    "s\"}",
		    kid, sx, sy);
	else
		snprintf(jwk, sizeof(jwk),
		    "{\"kty\":\"EC\",\"use\":\"sig\","
		    "\"alg\":\"ES256\",\"kid\":\"%s\",\"crv\":\"P-256\",\"x\":"
		    "\"%s\",\"y\":\"%s\"}",
		    kid, sx, sy);
	snprintf(path, sizeof(path), "%s/%s.jwk", d, kid);
	free(sx);
	free(sy);
	BN_free(x);
	BN_free(y);
	BIO_free(b);
	EVP_PKEY_free(k);
	return spit(path, jwk) == 0 ? 0 : 1;
}

static int
emit(const char *alg, const char *keyfile, const char *header,
    const char *payload)
{
	jwt_alg_t a = strcmp(alg, "HS256") == 0 ? JWT_ALG_HS256
	    : strcmp(alg, "RS256") == 0         ? JWT_ALG_RS256
	    : strcmp(alg, "ES256") == 0         ? JWT_ALG_ES256
	                                        : JWT_ALG_INVAL;
	size_t klen = 0;
	char *key = slurp(keyfile, &klen), *tok;

	if (a == JWT_ALG_INVAL || key == NULL) {
		fprintf(stderr, "fake_jwks: bad alg or key file\n");
		free(key);
		return 1;
	}
	tok = auth_jwt_sign(header, payload, a, (unsigned char *)key, klen);
	free(key);
	if (tok == NULL) {
		fprintf(stderr, "fake_jwks: cannot sign\n");
		return 1;
	}
	printf("%s\n", tok);
	free(tok);
	return 0;
}

static int
sign(const char *d, const char *kid, const char *payload)
{
	char path[PATH_MAX_], header[512], *key = NULL;
	const char *alg;

	snprintf(path, sizeof(path), "%s/%s.key", d, kid);
	key = slurp(path, NULL);
	if (key == NULL)
		return 1;
	{
		BIO *b = BIO_new_mem_buf(key, -1);
		EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);

		alg = k != NULL && EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA
		    ? "RS256"
		    : "ES256";
		EVP_PKEY_free(k);
		BIO_free(b);
	}
	free(key);
	snprintf(header, sizeof(header),
	    "{\"alg\":\"%s\",\"typ\":\"JWT\","
	    "\"kid\":\"%s\"}",
	    alg, kid);
	return emit(alg, path, header, payload);
}

static char *
jwks_doc(int *status)
{
	char *doc = malloc(DOC_MAX), path[PATH_MAX_];
	size_t off = 0;
	DIR *dd;
	struct dirent *e;
	int first = 1;

	if (doc == NULL)
		return NULL;
	snprintf(path, sizeof(path), "%s/fail", dir);
	*status = access(path, F_OK) == 0 ? 503 : 200;
	off += (size_t)snprintf(doc, DOC_MAX, "{\"keys\":[");
	dd = opendir(dir);
	while (dd != NULL && (e = readdir(dd)) != NULL) {
		size_t n = strlen(e->d_name);
		char *jwk;

		if (n < 5 || strcmp(e->d_name + n - 4, ".jwk") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		jwk = slurp(path, NULL);
		if (jwk != NULL && off + strlen(jwk) + 8 < DOC_MAX)
			off += (size_t)snprintf(doc + off, DOC_MAX - off,
			    "%s%s", first ? "" : ",", jwk);
		first = 0;
		free(jwk);
	}
	if (dd != NULL)
		closedir(dd);
	snprintf(doc + off, DOC_MAX - off, "]}");
	return doc;
}

static enum MHD_Result
answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **con)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char path[PATH_MAX_], *doc;
	int status;
	FILE *log;

	(void)cls;
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con;
	snprintf(path, sizeof(path), "%s/requests", dir);
	log = fopen(path, "a");
	if (log != NULL) {
		fprintf(log, "%s %s\n", method, url);
		fclose(log);
	}
	if (strcmp(url, "/jwks") != 0 || strcmp(method, "GET") != 0) {
		r = MHD_create_response_from_buffer(0, (void *)"",
		    MHD_RESPMEM_PERSISTENT);
		ret = MHD_queue_response(c, 404, r);
		MHD_destroy_response(r);
		return ret;
	}
	doc = jwks_doc(&status);
	if (doc == NULL)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(doc), doc,
	    MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Cache-Control", "public, max-age=300");
	ret = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

static int
serve(const char *portfile)
{
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sin;
	char buf[32];

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = 0;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL,
	    answer, NULL, MHD_OPTION_SOCK_ADDR, &sin, MHD_OPTION_END);
	if (d == NULL) {
		fprintf(stderr, "fake_jwks: cannot listen\n");
		return 1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(buf, sizeof(buf), "%u\n", info->port);
	if (spit(portfile, buf) != 0) {
		MHD_stop_daemon(d);
		return 1;
	}
	while (!stop)
		pause();
	MHD_stop_daemon(d);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "keygen") == 0)
		return keygen(argv[2], argv[3], argv[4]);
	if (argc == 5 && strcmp(argv[1], "sign") == 0)
		return sign(argv[2], argv[3], argv[4]);
	if (argc == 6 && strcmp(argv[1], "raw") == 0)
		return emit(argv[2], argv[3], argv[4], argv[5]);
	if (argc == 4 && strcmp(argv[1], "serve") == 0) {
		dir = argv[2];
		return serve(argv[3]);
	}
	fprintf(stderr,
	    "usage: fake_jwks keygen DIR KID rsa|ec\n"
	    "       fake_jwks sign DIR KID PAYLOAD_JSON\n"
	    "       fake_jwks raw HS256|RS256|ES256 KEYFILE HEADER PAYLOAD\n"
	    "       fake_jwks serve DIR PORTFILE\n");
	return 2;
}
