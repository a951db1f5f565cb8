/*
 * store_file.c: the file:// store's recovery (gcs/file_log.c file_recover,
 * wal_read_record, record_apply, obj_read_once) over a damaged
 * directory.  At start a real store acknowledges a fixed sequence of
 * writes, one per log record, and the state after each is kept.  Each
 * input then builds a directory and opens a store on it:
 *   mode 0 (most inputs): that log, cut at any byte and with up to eight
 *          bytes overwritten, optionally followed by bytes of the input;
 *   mode 1: a log of the input's own records (JSON texts separated by
 *          NUL, framed with their length and a correct CRC) after a
 *          header whose counter floor the input gives;
 *   mode 2: an empty log and one object file "x" of the input's JSON
 *          (with a correct header), as another process may have left it.
 * What must hold: no crash; a log whose header is intact opens, and
 * replays exactly the acknowledged writes whose records are intact
 * (a prefix of what was acknowledged: never a torn one, never a later
 * one); after any open, a new object gets a fencing token above every
 * token the directory holds, and a patch of an object a metageneration
 * one higher (or the write is refused: never a token out of order).
 *
 * The store runs with gcs_settings.file_no_prealloc (--file-no-prealloc):
 * a new log without 5 MiB of zeros ahead and no spare maker, which cost
 * ~90% of an input's time (about 100 inputs/s) and are no part of what is
 * checked here: the logs replayed are the input's, never prealloc'ed
 * (test_store_file.c covers both settings).
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "gcs/gcs.h"
#include "gcs/gcs_client.h"

#include "fuzz.h"

#define WAL_HDR  16
#define REC_HDR  8
#define OPS      10
#define TAIL_MAX 4096

static char base[256], golden_dir[300], run_dir[300];
static unsigned char *golden;               /* header + the OPS records */
static size_t golden_len, rec_end[OPS + 1]; /* rec_end[k]: end of k records */
static json_t *snap[OPS + 1];               /* name -> [gen, metagen, meta] */
static uint32_t crc_table[256];

static uint32_t
crc32(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n-- > 0)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static void
rm_tree(const char *dir)
{
	char path[600];
	struct dirent *de;
	struct stat st;
	DIR *d = opendir(dir);

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
			rm_tree(path);
		else
			unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/* The live objects of S as name -> [generation, metageneration, meta]. */
static json_t *
state_of(gcs_store *s)
{
	json_t *st = json_object();
	gcs_page page;
	gcs_err err;
	size_t i;

	memset(&page, 0, sizeof(page));
	FUZZ_CHECK(gcs_list(s, "", 1000, NULL, &page, &err) == GCS_OK);
	FUZZ_CHECK(page.next_token == NULL);
	for (i = 0; i < page.n; i++) {
		gcs_object *o = &page.items[i].obj;
		json_object_set_new(st, page.items[i].name,
		    json_pack("[I,I,O]", (json_int_t)o->generation,
		        (json_int_t)o->metageneration, o->metadata));
	}
	gcs_page_clear(&page);
	return st;
}

static void
write_file(const char *dir, const char *name, const void *p, size_t n)
{
	char path[600];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(n == 0 || write(fd, p, n) == (ssize_t)n);
	close(fd);
}

/* One acknowledged write of the fixed sequence. */
static void
golden_op(gcs_store *s, int i)
{
	static const char *const names[] = { "a", "b", "c/d" };
	const char *name = names[i % 3];
	json_t *meta = json_pack("{s:s, s:s}", "owner", "fuzz", "n",
	    i % 2 ? "\xc3\xa9t\xc3\xa9 'x'" : "plain");
	gcs_object o;
	gcs_err err;
	int rc;

	memset(&o, 0, sizeof(o));
	rc = gcs_get(s, name, &o, &err);
	if (rc == GCS_NOT_FOUND) {
		FUZZ_CHECK(gcs_insert(s, name, meta, &o, &err) == GCS_OK);
	} else {
		FUZZ_CHECK(rc == GCS_OK);
		if (i % 4 == 3) {
			FUZZ_CHECK(gcs_remove(s, name, o.generation,
			               o.metageneration, &err) == GCS_OK);
		} else {
			gcs_object p;
			memset(&p, 0, sizeof(p));
			FUZZ_CHECK(
			    gcs_patch(s, name, o.generation, o.metageneration,
			        meta, &p, &err) == GCS_OK);
			gcs_object_clear(&p);
		}
	}
	gcs_object_clear(&o);
	json_decref(meta);
}

/* At exit: the harness's directory goes (one was left per run). */
static void
base_remove(void)
{
	rm_tree(base);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	char path[600];
	struct stat st;
	gcs_store *s;
	gcs_err err;
	uint32_t i, k, v, len;
	size_t off;
	FILE *f;
	int n;

	(void)argc;
	(void)argv;
	for (i = 0; i < 256; i++) {
		v = i;
		for (k = 0; k < 8; k++)
			v = (v & 1) ? 0xedb88320u ^ (v >> 1) : v >> 1;
		crc_table[i] = v;
	}
	snprintf(base, sizeof(base), "%s/lockgate-fuzz-%d", tmp, (int)getpid());
	snprintf(golden_dir, sizeof(golden_dir), "%s/golden", base);
	snprintf(run_dir, sizeof(run_dir), "%s/run", base);
	rm_tree(base);
	FUZZ_CHECK(mkdir(base, 0700) == 0);
	atexit(base_remove);
	gcs_configure(&(gcs_settings){ .file_no_prealloc = true });
	s = gcs_file_new(golden_dir, &err);
	FUZZ_CHECK(s != NULL);
	snap[0] = state_of(s);
	for (n = 0; n < OPS; n++) {
		golden_op(s, n);
		snap[n + 1] = state_of(s);
	}
	gcs_store_free(s);
	/* The log: header, then one record per write (checked), and no
	 * zeros after them (no prealloc). */
	snprintf(path, sizeof(path), "%s/.wal", golden_dir);
	FUZZ_CHECK(stat(path, &st) == 0);
	golden = malloc((size_t)st.st_size);
	f = fopen(path, "rb");
	FUZZ_CHECK(golden != NULL && f != NULL &&
	    fread(golden, 1, (size_t)st.st_size, f) == (size_t)st.st_size);
	fclose(f);
	off = WAL_HDR;
	for (n = 0; n <= OPS; n++) {
		rec_end[n] = off;
		if (n == OPS)
			break;
		memcpy(&len, golden + off, 4);
		FUZZ_CHECK(
		    len > 0 && off + REC_HDR + len <= (size_t)st.st_size);
		off += REC_HDR + len;
	}
	FUZZ_CHECK(off == (size_t)st.st_size); /* one record per write */
	golden_len = off;
	rm_tree(golden_dir);
	return 0;
}

/* Mode 0: the golden log, cut and damaged.  Returns the number of
 * records that must replay, or -1 when the header was damaged. */
static int
damaged_log(fuzz_in *in, unsigned char *buf, size_t *len)
{
	size_t cut = (size_t)(fuzz_u64(in) % (golden_len + 1)), first;
	int edits = fuzz_u8(in) % 9, i, k;

	memcpy(buf, golden, cut);
	for (i = 0; i < edits && cut > 0; i++) {
		size_t pos = (size_t)(fuzz_u64(in) % cut);

		buf[pos] = fuzz_u8(in);
	}
	*len = cut;
	if (fuzz_u8(in) & 1) { /* what follows the cut: the input's bytes */
		size_t n = in->n < TAIL_MAX ? in->n : TAIL_MAX;
		memcpy(buf + cut, in->p, n);
		*len += n;
	}
	/* Where the log first differs from the golden one, once it is
	 * made: a later edit may put back what an earlier one changed, and
	 * the bytes after the cut may be the very ones cut. */
	for (first = 0;
	     first < *len && first < golden_len && buf[first] == golden[first];
	     first++)
		;
	if (first < WAL_HDR)
		return -1;
	for (k = 0; k < OPS && rec_end[k + 1] <= first; k++)
		;
	return k;
}

/* Mode 1: the input's records after a header with the input's floor. */
static size_t
own_log(fuzz_in *in, unsigned char *buf, size_t cap)
{
	int64_t floor = (int64_t)fuzz_u64(in);
	size_t len = WAL_HDR;
	const uint8_t *r;
	uint32_t rl, crc;

	memcpy(buf, golden, 8); /* the magic */
	memcpy(buf + 8, &floor, 8);
	while (in->n > 0) {
		rl = (uint32_t)fuzz_field(in, 0, &r);
		if (rl == 0 || len + REC_HDR + rl > cap)
			break;
		crc = crc32(r, rl);
		memcpy(buf + len, &rl, 4);
		memcpy(buf + len + 4, &crc, 4);
		memcpy(buf + len + REC_HDR, r, rl);
		len += REC_HDR + rl;
	}
	return len;
}

/* After any open: new tokens stay above every token of the directory. */
static void
tokens_ordered(gcs_store *s, const json_t *st)
{
	json_t *meta = json_pack("{s:s}", "owner", "fuzz"), *v;
	int64_t top = 0, g;
	const char *k;
	gcs_object o, p;
	gcs_err err;
	int rc;

	json_object_foreach((json_t *)st, k, v)
	{
		g = (int64_t)json_integer_value(json_array_get(v, 0));
		if (g > top)
			top = g;
	}
	memset(&o, 0, sizeof(o));
	memset(&p, 0, sizeof(p));
	rc = gcs_insert(s, "zz-new", meta, &o, &err);
	if (rc == GCS_OK) {
		FUZZ_CHECK(o.generation > top && o.generation <= GCS_GEN_MAX);
		FUZZ_CHECK(o.metageneration == 1);
	} else {
		FUZZ_CHECK(rc == GCS_UNAVAILABLE || rc == GCS_PRECONDITION);
	}
	json_object_foreach((json_t *)st, k, v)
	{
		int64_t mg = (int64_t)json_integer_value(json_array_get(v, 1));

		g = (int64_t)json_integer_value(json_array_get(v, 0));
		rc = gcs_patch(s, k, g, mg, meta, &p, &err);
		if (rc == GCS_OK)
			FUZZ_CHECK(p.generation == g &&
			    p.metageneration == mg + 1 &&
			    p.metageneration <= GCS_GEN_MAX);
		gcs_object_clear(&p);
		break; /* one is enough */
	}
	gcs_object_clear(&o);
	json_decref(meta);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char buf[1 << 20];
	fuzz_in in = { data, size };
	int mode = fuzz_u8(&in) % 8, want = -2;
	size_t len = 0;
	gcs_store *s;
	gcs_err err;
	json_t *st;

	FUZZ_CHECK(mkdir(run_dir, 0700) == 0);
	if (mode < 6) {
		want = damaged_log(&in, buf, &len);
		write_file(run_dir, ".wal", buf, len);
	} else if (mode == 6) {
		len = own_log(&in, buf, sizeof(buf));
		write_file(run_dir, ".wal", buf, len);
	} else {
		char hdr[32];
		size_t n = in.n < sizeof(buf) - 32 ? in.n : sizeof(buf) - 32;

		snprintf(hdr, sizeof(hdr), "%08x %08x ",
		    (unsigned)crc32(in.p, n), (unsigned)n);
		memcpy(buf, hdr, 18);
		memcpy(buf + 18, in.p, n);
		write_file(run_dir, "x", buf, 18 + n);
	}
	s = gcs_file_new(run_dir, &err);
	if (want >= 0)
		FUZZ_CHECK(s != NULL); /* only a torn tail: it must open */
	if (s != NULL) {
		st = state_of(s);
		if (want >= 0)
			FUZZ_CHECK(json_equal(st, snap[want]));
		tokens_ordered(s, st);
		json_decref(st);
		gcs_store_free(s);
	}
	rm_tree(run_dir);
	return 0;
}
