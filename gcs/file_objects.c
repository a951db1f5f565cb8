/*
 * file_objects.c: the file:// store's object files: names encoded as file
 * names, entries (an object's state as JSON), reading a file with its CRC
 * and rewriting it in place (see the layout at the top of store_file.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "store_file_int.h"

/* ---- names ---- */

static int
raw_ok(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* Encode NAME into OUT (FILE_FNAME_BUF bytes).  0, or -1 for an empty
 * name or a hashing failure. */
int
file_name_encode(const char *name, char *out)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)name;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	size_t o = 0;

	if (*p == '\0')
		return -1;
	for (; *p != '\0'; p++) {
		if (o + 3 > FILE_FNAME_MAX)
			goto hash;
		if (raw_ok(*p) && !(o == 0 && *p == '.')) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
	return 0;
hash:
	if (EVP_Digest(name, strlen(name), md, &mdlen, EVP_sha256(), NULL) != 1)
		return -1;
	out[0] = '~';
	for (i = 0; i < mdlen; i++) {
		out[1 + 2 * i] = hex[md[i] >> 4];
		out[2 + 2 * i] = hex[md[i] & 15];
	}
	out[1 + 2 * mdlen] = '\0';
	return 0;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode an object file name into OUT (GCS_NAME_MAX + 1 bytes).
 * 0 decoded, 1 a hashed name (read the file for the name), -1 not an
 * object file. */
int
file_name_decode(const char *fname, char *out)
{
	size_t o = 0;

	if (fname[0] == '.' || fname[0] == '\0')
		return -1;
	if (fname[0] == '~')
		return 1;
	for (; *fname != '\0'; fname++) {
		int c = (unsigned char)*fname;
		if (o >= GCS_NAME_MAX)
			return -1;
		if (c == '%') {
			int hi = hexval(fname[1]), lo;
			if (hi < 0 || (lo = hexval(fname[2])) < 0)
				return -1;
			c = hi * 16 + lo;
			fname += 2;
		} else if (!raw_ok((unsigned char)c)) {
			return -1;
		}
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 0;
}

/* ---- object files ---- */

/* An entry is the JSON of one object's state: {"name", "generation",
 * "metageneration", "created_ms", "updated_ms", "metadata"}, or
 * {"name", "deleted": true} in a log record. */
int
file_entry_exists(const json_t *e)
{
	return json_object_get(e, "deleted") == NULL;
}

int64_t
file_entry_int(const json_t *e, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(e, key));
}

/* A generation or metageneration as this store issues them: 1 ..
 * GCS_GEN_MAX, so that the next one (+1) cannot overflow.  Anything else
 * in a file or a log record was not written by a lockgate store: the
 * entry is corrupt. */
static int
gen_valid(int64_t g)
{
	return g > 0 && g <= GCS_GEN_MAX;
}

int
file_entry_valid(const json_t *e)
{
	if (!json_is_object(e) || !json_is_string(json_object_get(e, "name")))
		return 0;
	if (!file_entry_exists(e))
		return 1;
	return gen_valid(file_entry_int(e, "generation")) &&
	    gen_valid(file_entry_int(e, "metageneration")) &&
	    json_is_integer(json_object_get(e, "created_ms")) &&
	    json_is_integer(json_object_get(e, "updated_ms")) &&
	    json_is_object(json_object_get(e, "metadata"));
}

void
file_entry_to_object(const json_t *e, int64_t now_ms, gcs_object *out)
{
	out->generation = file_entry_int(e, "generation");
	out->metageneration = file_entry_int(e, "metageneration");
	out->created_ms = file_entry_int(e, "created_ms");
	out->updated_ms = file_entry_int(e, "updated_ms");
	out->now_ms = now_ms;
	out->metadata = json_incref(json_object_get(e, "metadata"));
}

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void
crc_init(void)
{
	uint32_t i, k, v;

	for (i = 0; i < 256; i++) {
		v = i;
		for (k = 0; k < 8; k++)
			v = (v & 1) ? 0xedb88320u ^ (v >> 1) : v >> 1;
		crc_table[i] = v;
	}
}

/* CRC-32 (IEEE): catches torn object files and torn log records. */
uint32_t
file_crc32_buf(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	pthread_once(&crc_once, crc_init);
	while (n-- > 0)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

/* Read object file FNAME once.  0 with *ENTRY (a live object or a
 * tombstone), ENOENT, EAGAIN when torn or corrupt, or another errno. */
int
file_obj_read_once(file_store *fs, const char *fname, char *buf, json_t **entry)
{
	size_t len = 0;
	ssize_t r;
	json_error_t je;
	unsigned long crc, jlen;
	char *end;
	int fd, rc = EAGAIN;

	*entry = NULL;
	fd = openat(fs->dirfd, fname, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	while (len < FILE_OBJ_BYTES_MAX) {
		r = read(fd, buf + len, FILE_OBJ_BYTES_MAX - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = errno;
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	if (len < FILE_OBJ_HDR || buf[8] != ' ' || buf[17] != ' ')
		goto out;
	buf[8] = buf[17] = '\0';
	crc = strtoul(buf, &end, 16);
	if (end != buf + 8)
		goto out;
	jlen = strtoul(buf + 9, &end, 16);
	if (end != buf + 17 || jlen == 0 || jlen > len - FILE_OBJ_HDR ||
	    crc != file_crc32_buf((unsigned char *)buf + FILE_OBJ_HDR, jlen))
		goto out;
	*entry = json_loadb(buf + FILE_OBJ_HDR, jlen, 0, &je);
	if (*entry == NULL || !file_entry_valid(*entry)) {
		json_decref(*entry);
		*entry = NULL;
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Read object file FNAME, of the object NAME: GCS_OK with *ENTRY (new
 * reference, a live object), GCS_NOT_FOUND (no file, or a tombstone), or
 * GCS_UNAVAILABLE.  Files are rewritten in place under the flock while
 * readers take no lock, so a read that overlaps a write fails its CRC and
 * is retried.  Messages name the object, never the file: a file name holds
 * a group lease's lease_id (the data directory, the host's, is for the
 * operator's log alone: file_fail). */
int
file_obj_read(file_store *fs, const char *name, const char *fname,
    json_t **entry, gcs_err *err)
{
	char *buf = malloc(FILE_OBJ_BYTES_MAX), shown[GCS_NAME_SHOWN_BUF];
	int rc = EAGAIN, i;

	*entry = NULL;
	if (buf == NULL)
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	for (i = 0; i < FILE_TORN_RETRIES && rc == EAGAIN; i++) {
		if (i > 0)
			sched_yield();
		rc = file_obj_read_once(fs, fname, buf, entry);
	}
	free(buf);
	if (rc == 0 && !file_entry_exists(*entry)) {
		json_decref(*entry);
		*entry = NULL;
		rc = ENOENT;
	}
	if (rc == 0)
		return GCS_OK;
	if (rc == ENOENT)
		return gcs_fail(err, GCS_NOT_FOUND, "no such object");
	if (name == NULL) /* a listing's read, which wants no message */
		return gcs_fail(err, GCS_UNAVAILABLE, "an object file is bad");
	gcs_name_shown(name, shown, sizeof(shown));
	if (rc == EAGAIN)
		return gcs_fail(err, GCS_UNAVAILABLE,
		    "the file of object %s is corrupt", shown);
	return file_fail(fs, err, NULL, strerror(rc), "read object %s", shown);
}

int
file_pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

static struct file_fd *
fd_slot(file_store *fs, const char *fname)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *fname != '\0'; fname++)
		h = (h ^ (unsigned char)*fname) * 16777619u;
	return &fs->fds[h % FILE_FD_SLOTS];
}

/* Close FNAME's cached file, if any. */
void
file_fd_forget(file_store *fs, const char *fname)
{
	struct file_fd *f = fd_slot(fs, fname);

	if (f->fd >= 0 && strcmp(f->fname, fname) == 0) {
		close(f->fd);
		f->fd = -1;
	}
}

/* Forget every state and open file the committer knows. */
void
file_cache_forget_all(file_store *fs)
{
	size_t i;

	json_object_clear(fs->cache);
	for (i = 0; i < FILE_FD_SLOTS; i++)
		if (fs->fds[i].fd >= 0) {
			close(fs->fds[i].fd);
			fs->fds[i].fd = -1;
		}
}

/* Write TEXT (the JSON of an object or a tombstone) over object file
 * FNAME, in place: no new inode per write (ext4 makes creating files right
 * after deleting others slow) and no truncation (the header gives the
 * length; bytes after it are ignored).  Not durable by itself: the log
 * record is.  With TORN, write only the first half (the crash hook).
 * NAME, the object's, is for messages (as in file_obj_read). */
int
file_obj_write(file_store *fs, const char *name, const char *fname,
    const char *text, size_t tlen, int torn, gcs_err *err)
{
	char hdr[FILE_OBJ_HDR + 1], shown[GCS_NAME_SHOWN_BUF];
	struct iovec iov[2];
	struct file_fd *slot;
	size_t n = FILE_OBJ_HDR + tlen;
	ssize_t w;
	int fd, rc = GCS_OK;

	if (n > FILE_OBJ_BYTES_MAX)
		return gcs_fail(err, GCS_INVALID, "object of %zu bytes", n);
	snprintf(hdr, sizeof(hdr), "%08x %08x ",
	    (unsigned)file_crc32_buf((const unsigned char *)text, tlen),
	    (unsigned)tlen);
	iov[0].iov_base = hdr;
	iov[0].iov_len = FILE_OBJ_HDR;
	iov[1].iov_base = (void *)text;
	iov[1].iov_len = torn ? tlen / 2 : tlen;
	slot = fd_slot(fs, fname);
	if (slot->fd >= 0 && strcmp(slot->fname, fname) == 0) {
		fd = slot->fd;
	} else {
		fd =
		    openat(fs->dirfd, fname, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 && errno == ENOENT)
			fd = file_spare_take(fs, fname);
		if (fd < 0) {
			fd = openat(fs->dirfd, fname,
			    O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
			    FILE_MODE);
			if (fd >= 0)
				stat_add(&fs->n_created, 1);
		}
		if (fd < 0)
			return file_fail(fs, err, NULL, strerror(errno),
			    "open the file of object %s",
			    gcs_name_shown(name, shown, sizeof(shown)));
		if (slot->fd >= 0)
			close(slot->fd);
		snprintf(slot->fname, sizeof(slot->fname), "%s", fname);
		slot->fd = fd;
	}
	do
		w = pwritev(fd, iov, 2, 0);
	while (w < 0 && errno == EINTR);
	/* A short write of a few hundred bytes is an error (disk full). */
	if (w != (ssize_t)(iov[0].iov_len + iov[1].iov_len)) {
		rc = file_fail(fs, err, NULL,
		    w < 0 ? strerror(errno) : "short write", "write object %s",
		    gcs_name_shown(name, shown, sizeof(shown)));
		file_fd_forget(fs, fname);
	}
	return rc;
}

int
file_buf_add(file_buf *b, const char *s, size_t n)
{
	char *np;
	size_t ncap;

	if (b->n + n + 1 > b->cap) {
		ncap = b->cap ? b->cap : 4096;
		while (ncap < b->n + n + 1)
			ncap *= 2;
		np = realloc(b->p, ncap);
		if (np == NULL)
			return -1;
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return 0;
}

/*
 * Object and tombstone texts are written here directly, not built as
 * jansson values and dumped: the committer writes one per op, and the
 * dump's allocations were a tenth of its time.  They are read back with
 * jansson (file_obj_read, replay).
 */

/* Append S as a JSON string: UTF-8 as it is (names and metadata are
 * valid UTF-8), '"', '\\' and control characters escaped.  B NULL: only
 * count.  Returns the bytes it takes, or SIZE_MAX when out of memory. */
static size_t
put_str(file_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *run;
	size_t n = 2;
	char esc[6];
	int bad = 0;

	if (b != NULL)
		bad |= file_buf_add(b, "\"", 1);
	for (;;) {
		for (run = p; *p >= 0x20 && *p != '"' && *p != '\\'; p++)
			;
		n += (size_t)(p - run);
		if (b != NULL && p > run)
			bad |= file_buf_add(b, (const char *)run,
			    (size_t)(p - run));
		if (*p == '\0')
			break;
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			n += 2;
			if (b != NULL)
				bad |= file_buf_add(b, esc, 2);
		} else {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 15];
			n += 6;
			if (b != NULL)
				bad |= file_buf_add(b, esc, 6);
		}
		p++;
	}
	if (b != NULL)
		bad |= file_buf_add(b, "\"", 1);
	return bad ? SIZE_MAX : n;
}

/* Append (B NULL: count) V, not a string, as JSON (jansson's dump). */
static size_t
put_other(file_buf *b, const json_t *v)
{
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	size_t n = text ? strlen(text) : SIZE_MAX;

	if (text != NULL && b != NULL && file_buf_add(b, text, n) != 0)
		n = SIZE_MAX;
	free(text);
	return n;
}

/* Append (B NULL: count) metadata META as JSON.  SIZE_MAX when out of
 * memory. */
static size_t
put_meta(file_buf *b, const json_t *meta)
{
	const char *k;
	json_t *v;
	size_t n = 1, kn, vn;
	int first = 1;

	if (b != NULL && file_buf_add(b, "{", 1) != 0)
		return SIZE_MAX;
	json_object_foreach((json_t *)meta, k, v)
	{
		if (!first && b != NULL && file_buf_add(b, ",", 1) != 0)
			return SIZE_MAX;
		n += !first;
		first = 0;
		kn = put_str(b, k);
		if (kn == SIZE_MAX ||
		    (b != NULL && file_buf_add(b, ":", 1) != 0))
			return SIZE_MAX;
		vn = json_is_string(v) ? put_str(b, json_string_value(v))
		                       : put_other(b, v);
		if (vn == SIZE_MAX)
			return SIZE_MAX;
		n += kn + 1 + vn;
	}
	if (b != NULL && file_buf_add(b, "}", 1) != 0)
		return SIZE_MAX;
	return n + 1;
}

/* Append the text of state ENTRY, or of a tombstone of NAME deleted at
 * DELETED_MS when ENTRY is NULL.  0 or -1 (out of memory). */
int
file_put_entry(file_buf *b, const char *name, const json_t *entry,
    int64_t deleted_ms)
{
	char num[160];

	if (file_buf_add(b, "{\"name\":", 8) != 0 ||
	    put_str(b, name) == SIZE_MAX)
		return -1;
	if (entry == NULL) {
		snprintf(num, sizeof(num),
		    ",\"deleted\":true,\"deleted_ms\":%lld}",
		    (long long)deleted_ms);
		return file_buf_add(b, num, strlen(num));
	}
	snprintf(num, sizeof(num),
	    ",\"generation\":%lld,\"metageneration\":%lld,\"created_ms\":"
	    "%lld,\"updated_ms\":%lld,\"metadata\":",
	    (long long)file_entry_int(entry, "generation"),
	    (long long)file_entry_int(entry, "metageneration"),
	    (long long)file_entry_int(entry, "created_ms"),
	    (long long)file_entry_int(entry, "updated_ms"));
	if (file_buf_add(b, num, strlen(num)) != 0 ||
	    put_meta(b, json_object_get(entry, "metadata")) == SIZE_MAX)
		return -1;
	return file_buf_add(b, "}", 1);
}

/* Whether META's text is over the metadata limit. */
int
file_meta_too_big(const json_t *meta)
{
	size_t n = put_meta(NULL, meta);

	return n == SIZE_MAX || n > GCS_META_BYTES_MAX;
}

/* file_obj_write of ENTRY (a state or a tombstone from the log), in the same
 * text the committer writes. */
static int
obj_write_entry(file_store *fs, const char *fname, const json_t *entry,
    gcs_err *err)
{
	const char *name = json_string_value(json_object_get(entry, "name"));
	file_buf b = { 0 };
	int rc;

	if (file_put_entry(&b, name, file_entry_exists(entry) ? entry : NULL,
	        file_entry_int(entry, "deleted_ms")) != 0) {
		free(b.p);
		return gcs_fail(err, GCS_NOMEM, "out of memory");
	}
	rc = file_obj_write(fs, name, fname, b.p, b.n, 0, err);
	free(b.p);
	return rc;
}

/* Make the object named in ENTRY match ENTRY, unless it already does.
 * Used to replay the log; not durable by itself. */
int
file_entry_apply(file_store *fs, const json_t *entry, gcs_err *err)
{
	const char *name = json_string_value(json_object_get(entry, "name"));
	char fname[FILE_FNAME_BUF], shown[GCS_NAME_SHOWN_BUF];
	json_t *cur = NULL;
	int rc, same;

	if (file_name_encode(name, fname) != 0)
		return gcs_fail(err, GCS_UNAVAILABLE, "bad name in the log");
	rc = file_obj_read(fs, name, fname, &cur, NULL);
	if (rc != GCS_OK)
		cur = NULL; /* absent, a tombstone, or torn: rewrite */
	if (cur != NULL &&
	    strcmp(json_string_value(json_object_get(cur, "name")), name) !=
	        0) {
		/* Another name's inode under this name (only a crash of the
		 * machine mid-recycling can do that): never write into it. */
		json_decref(cur);
		cur = NULL;
		rc = GCS_NOT_FOUND;
		file_fd_forget(fs, fname);
		if (unlinkat(fs->dirfd, fname, 0) != 0 && errno != ENOENT)
			return file_fail(fs, err, NULL, strerror(errno),
			    "unlink the file of object %s",
			    gcs_name_shown(name, shown, sizeof(shown)));
	}
	if (!file_entry_exists(entry))
		same = rc == GCS_NOT_FOUND;
	else
		same = cur != NULL &&
		    file_entry_int(cur, "generation") ==
		        file_entry_int(entry, "generation") &&
		    file_entry_int(cur, "metageneration") ==
		        file_entry_int(entry, "metageneration");
	json_decref(cur);
	if (same)
		return GCS_OK;
	return obj_write_entry(fs, fname, entry, err);
}
