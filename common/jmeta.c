/* The JVM metadata stream: payload encoding, writer and reader.
 * libc only: the JVM agent links this file. */
#include "common/jmeta.h"

#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const type_names[JM_TYPE_LIMIT] = {
    [JM_JVM_INFO] = "JVM_INFO",
    [JM_CODE_CACHE] = "CODE_CACHE",
    [JM_CODELET] = "CODELET",
    [JM_CODE_BLOB] = "CODE_BLOB",
    [JM_METHOD] = "METHOD",
    [JM_CLASS_FILE] = "CLASS_FILE",
    [JM_CLASS_PREPARE] = "CLASS_PREPARE",
    [JM_METHOD_BYTECODE] = "METHOD_BYTECODE",
    [JM_CONSTANT_POOL] = "CONSTANT_POOL",
    [JM_NMETHOD_LOAD] = "NMETHOD_LOAD",
    [JM_NMETHOD_UNLOAD] = "NMETHOD_UNLOAD",
    [JM_DYNAMIC_CODE] = "DYNAMIC_CODE",
    [JM_CODE_PATCH] = "CODE_PATCH",
    [JM_THREAD_START] = "THREAD_START",
    [JM_THREAD_END] = "THREAD_END",
    [JM_METHOD_ENTRY] = "METHOD_ENTRY",
    [JM_METHOD_EXIT] = "METHOD_EXIT",
    [JM_SINGLE_STEP] = "SINGLE_STEP",
    [JM_WARNING] = "WARNING",
    [JM_STATS] = "STATS",
    [JM_END] = "END",
    [JM_CLASSES_INITIALIZED] = "CLASSES_INITIALIZED",
};

const char *jm_type_name(uint16_t type)
{
    if (type < JM_TYPE_LIMIT && type_names[type])
        return type_names[type];
    return "UNKNOWN";
}

bool jm_type_has_code(uint16_t type)
{
    return type == JM_CODE_BLOB || type == JM_NMETHOD_LOAD || type == JM_DYNAMIC_CODE ||
           type == JM_CODE_PATCH;
}

/* ---- little-endian helpers ---------------------------------------------- */

static void store_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t load_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- jm_buf ------------------------------------------------------------- */

void jm_buf_init(jm_buf *b)
{
    memset(b, 0, sizeof *b);
}

void jm_buf_free(jm_buf *b)
{
    free(b->data);
    jm_buf_init(b);
}

static uint8_t *buf_grow(jm_buf *b, size_t n)
{
    if (b->failed)
        return NULL;
    if (n > SIZE_MAX - b->len) {
        b->failed = true;
        return NULL;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n) {
            if (cap > SIZE_MAX / 2) {
                b->failed = true;
                return NULL;
            }
            cap *= 2;
        }
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return NULL;
        }
        b->data = d;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}

static void put_le(jm_buf *b, uint64_t v, int n)
{
    uint8_t *p = buf_grow(b, (size_t)n);
    if (p)
        store_le(p, v, n);
}

void jm_put_u8(jm_buf *b, uint8_t v) { put_le(b, v, 1); }
void jm_put_u16(jm_buf *b, uint16_t v) { put_le(b, v, 2); }
void jm_put_u32(jm_buf *b, uint32_t v) { put_le(b, v, 4); }
void jm_put_u64(jm_buf *b, uint64_t v) { put_le(b, v, 8); }
void jm_put_i32(jm_buf *b, int32_t v) { put_le(b, (uint32_t)v, 4); }

void jm_put_raw(jm_buf *b, const void *p, size_t n)
{
    uint8_t *d = buf_grow(b, n);
    if (d && n)
        memcpy(d, p, n);
}

void jm_put_bytes(jm_buf *b, const void *p, uint32_t n)
{
    jm_put_u32(b, n);
    jm_put_raw(b, p, n);
}

void jm_put_str(jm_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n > UINT32_MAX) {
        b->failed = true;
        return;
    }
    jm_put_bytes(b, s, (uint32_t)n);
}

/* ---- jm_cur ------------------------------------------------------------- */

void jm_cur_init(jm_cur *c, const void *p, size_t len)
{
    c->p = p;
    c->len = len;
    c->pos = 0;
    c->error = NULL;
    c->error_pos = 0;
}

static const uint8_t *cur_take(jm_cur *c, size_t n, const char *what)
{
    if (c->error)
        return NULL;
    if (n > c->len - c->pos) {
        c->error = what;
        c->error_pos = c->pos;
        return NULL;
    }
    const uint8_t *p = c->p + c->pos;
    c->pos += n;
    return p;
}

static uint64_t get_le(jm_cur *c, int n)
{
    const uint8_t *p = cur_take(c, (size_t)n, "field runs past the end of the payload");
    return p ? load_le(p, n) : 0;
}

uint8_t jm_get_u8(jm_cur *c) { return (uint8_t)get_le(c, 1); }
uint16_t jm_get_u16(jm_cur *c) { return (uint16_t)get_le(c, 2); }
uint32_t jm_get_u32(jm_cur *c) { return (uint32_t)get_le(c, 4); }
uint64_t jm_get_u64(jm_cur *c) { return get_le(c, 8); }
int32_t jm_get_i32(jm_cur *c) { return (int32_t)(uint32_t)get_le(c, 4); }

jm_slice jm_get_bytes(jm_cur *c)
{
    jm_slice s = { NULL, 0 };
    size_t at = c->pos;
    uint32_t n = jm_get_u32(c);
    const uint8_t *p = cur_take(c, n, "string or byte array runs past the end of the payload");
    if (!p) {
        if (c->error_pos > at)
            c->error_pos = at;
        return s;
    }
    s.p = p;
    s.len = n;
    return s;
}

char *jm_get_strdup(jm_cur *c)
{
    jm_slice s = jm_get_bytes(c);
    if (!jm_cur_ok(c))
        return NULL;
    char *r = malloc((size_t)s.len + 1);
    if (!r)
        return NULL;
    if (s.len)
        memcpy(r, s.p, s.len);
    r[s.len] = '\0';
    return r;
}

/* ---- writer ------------------------------------------------------------- */

/* Records and code bytes are staged in memory and written in large chunks:
 * two write() calls per record were most of the agent's writer-thread time.
 * Code bytes always reach the file before the records naming them. */
#define JM_WRITER_CHUNK (1u << 20)

struct jm_writer {
    int meta_fd, code_fd;
    uint64_t meta_bytes, code_bytes; /* logical sizes, staged bytes included */
    jm_buf meta_stage, code_stage;
};

static void errfmt(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void errfmt(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}


jm_writer *jm_writer_open(const char *dir, uint64_t start_tsc, uint32_t pid,
                          char *err, size_t errlen)
{
    char path[PATH_MAX];
    jm_writer *w = calloc(1, sizeof *w);
    if (!w) {
        errfmt(err, errlen, "out of memory");
        return NULL;
    }
    w->meta_fd = w->code_fd = -1;
    snprintf(path, sizeof path, "%s/%s", dir, JM_META_FILE);
    w->meta_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->meta_fd < 0) {
        errfmt(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        goto fail;
    }
    snprintf(path, sizeof path, "%s/%s", dir, JM_CODE_FILE);
    w->code_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->code_fd < 0) {
        errfmt(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        goto fail;
    }
    uint8_t h[JM_HEADER_SIZE] = { 0 };
    memcpy(h, JM_MAGIC, 8);
    store_le(h + 8, JM_VERSION_MAJOR, 2);
    store_le(h + 10, JM_VERSION_MINOR, 2);
    store_le(h + 12, JM_HEADER_SIZE, 4);
    store_le(h + 16, start_tsc, 8);
    store_le(h + 24, pid, 4);
    int rc = jpt_write_all(w->meta_fd, h, sizeof h);
    if (rc < 0) {
        errfmt(err, errlen, "%s/%s: cannot write: %s", dir, JM_META_FILE, strerror(-rc));
        goto fail;
    }
    w->meta_bytes = sizeof h;
    jm_buf_init(&w->meta_stage);
    jm_buf_init(&w->code_stage);
    return w;
fail:
    if (w->meta_fd >= 0)
        close(w->meta_fd);
    if (w->code_fd >= 0)
        close(w->code_fd);
    free(w);
    return NULL;
}

/* Writes the staged bytes: code first, so a crash between the two writes
 * leaves unreferenced code bytes, never a record without its bytes. */
static int flush_stage(jm_writer *w)
{
    int rc = 0;
    if (w->code_stage.len) {
        rc = jpt_write_all(w->code_fd, w->code_stage.data, w->code_stage.len);
        w->code_stage.len = 0;
        if (rc < 0) {
            w->meta_stage.len = 0; /* those records would name missing bytes */
            return rc;
        }
    }
    if (w->meta_stage.len) {
        rc = jpt_write_all(w->meta_fd, w->meta_stage.data, w->meta_stage.len);
        w->meta_stage.len = 0;
    }
    return rc;
}

int jm_write(jm_writer *w, uint16_t type, uint64_t tsc, const void *payload,
             uint32_t payload_len, const void *code, uint64_t code_len)
{
    if (payload_len > JM_MAX_RECORD_SIZE)
        return -EMSGSIZE;
    bool has_code = jm_type_has_code(type);
    if (has_code) {
        /* The code triple: vaddr, size, code_offset. */
        if (payload_len < 24 || load_le((const uint8_t *)payload + 8, 8) != code_len ||
            (code_len && !code) || code_len > SIZE_MAX / 2)
            return -EINVAL;
    }
    jm_buf *m = &w->meta_stage, *c = &w->code_stage;
    size_t at = m->len;
    jm_put_u16(m, type);
    jm_put_u16(m, 0);
    jm_put_u32(m, payload_len);
    jm_put_u64(m, tsc);
    jm_put_raw(m, payload, payload_len);
    if (has_code && !m->failed) {
        store_le(m->data + at + JM_RECORD_HEADER_SIZE + 16, w->code_bytes, 8);
        if (code_len >= JM_WRITER_CHUNK) {
            /* Big snapshots go straight to the file, after what is staged. */
            int rc = jpt_write_all(w->code_fd, c->data, c->len);
            c->len = 0;
            if (rc == 0)
                rc = jpt_write_all(w->code_fd, code, (size_t)code_len);
            if (rc < 0) {
                m->len = 0;
                return rc;
            }
        } else {
            jm_put_raw(c, code, (size_t)code_len);
        }
    }
    if (m->failed || c->failed) {
        /* Out of memory: drop this record, keep the ones before it. */
        m->failed = c->failed = false;
        m->len = at;
        return -ENOMEM;
    }
    if (has_code)
        w->code_bytes += code_len;
    w->meta_bytes += JM_RECORD_HEADER_SIZE + (uint64_t)payload_len;
    if (m->len >= JM_WRITER_CHUNK || c->len >= JM_WRITER_CHUNK)
        return flush_stage(w);
    return 0;
}

int jm_writer_flush(jm_writer *w)
{
    return flush_stage(w);
}

uint64_t jm_writer_bytes(const jm_writer *w)
{
    return w->meta_bytes + w->code_bytes;
}

int jm_writer_close(jm_writer *w)
{
    if (!w)
        return 0;
    int rc = flush_stage(w);
    if (close(w->code_fd) < 0 && !rc)
        rc = -errno;
    if (close(w->meta_fd) < 0 && !rc)
        rc = -errno;
    jm_buf_free(&w->meta_stage);
    jm_buf_free(&w->code_stage);
    free(w);
    return rc;
}

/* ---- reader ------------------------------------------------------------- */

struct jm_reader {
    char path[PATH_MAX];
    char code_path[PATH_MAX];
    const uint8_t *map;
    size_t size;
    const uint8_t *code_map;
    size_t code_size;
    bool code_tried;
    int code_error;      /* map_file's result: 0, -errno or JPT_ENOTREG */
    bool owns_maps; /* mapped by us (not jm_reader_open_mem) */
    uint64_t pos;
    uint64_t dropped;    /* the map's pages before it were given back (jm_reader_next) */
    jm_header header;
    char error[PATH_MAX + 200];
    bool cut;           /* the error is a record running past the end of the file */
};

/* Maps a whole file read-only. Empty files map to a NULL pointer with size 0. */
static int map_file(const char *path, const uint8_t **map, size_t *size)
{
    uint64_t len;
    int fd = jpt_open_regular(path, &len);
    if (fd < 0)
        return fd;
    *size = (size_t)len;
    *map = NULL;
    if (len > 0) {
        void *m = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return -e;
        }
        *map = m;
    }
    close(fd);
    return 0;
}

/* Validates the header of r->map; on failure fills err and returns false. */
static bool read_header(jm_reader *r, char *err, size_t errlen)
{
    const uint8_t *h = r->map;
    if (r->size < 16 || memcmp(h, JM_MAGIC, 8) != 0) {
        errfmt(err, errlen, "%s: offset 0: not a jpt metadata file (%s)", r->path,
               r->size < 16 ? "too short for a header" : "bad magic");
        return false;
    }
    r->header.major = (uint16_t)load_le(h + 8, 2);
    r->header.minor = (uint16_t)load_le(h + 10, 2);
    r->header.header_size = (uint32_t)load_le(h + 12, 4);
    if (r->header.major != JM_VERSION_MAJOR) {
        errfmt(err, errlen, "%s: offset 8: format version %u.%u, this reader reads %u.x",
               r->path, r->header.major, r->header.minor, JM_VERSION_MAJOR);
        return false;
    }
    if (r->header.header_size < JM_HEADER_SIZE || r->header.header_size > r->size) {
        errfmt(err, errlen, "%s: offset 12: header size %u is %s", r->path,
               r->header.header_size,
               r->header.header_size < JM_HEADER_SIZE ? "too small" : "past the end of the file");
        return false;
    }
    r->header.start_tsc = load_le(h + 16, 8);
    r->header.pid = (uint32_t)load_le(h + 24, 4);
    r->pos = r->header.header_size;
    return true;
}

char *jm_meta_dir(const char *dir)
{
    size_t n = strlen(dir);
    char *p = malloc(n + sizeof "/jvm/" JM_META_FILE);
    if (!p)
        return NULL;
    struct stat st;
    sprintf(p, "%s/%s", dir, JM_META_FILE);
    if (lstat(p, &st) == 0) {
        p[n] = '\0';
        return p;
    }
    sprintf(p, "%s/jvm", dir);
    return p;
}

jm_reader *jm_reader_open(const char *dir, char *err, size_t errlen)
{
    jm_reader *r = calloc(1, sizeof *r);
    if (!r) {
        errfmt(err, errlen, "out of memory");
        return NULL;
    }
    r->owns_maps = true;
    snprintf(r->path, sizeof r->path, "%s/%s", dir, JM_META_FILE);
    snprintf(r->code_path, sizeof r->code_path, "%s/%s", dir, JM_CODE_FILE);
    int rc = map_file(r->path, &r->map, &r->size);
    if (rc < 0) {
        errfmt(err, errlen, "%s: cannot read: %s", r->path, jpt_open_error(rc));
        free(r);
        return NULL;
    }
    if (!read_header(r, err, errlen)) {
        jm_reader_close(r);
        return NULL;
    }
    return r;
}

jm_reader *jm_reader_open_mem(const void *meta, size_t meta_len, const void *code,
                              size_t code_len, const char *name, char *err, size_t errlen)
{
    jm_reader *r = calloc(1, sizeof *r);
    if (!r) {
        errfmt(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(r->path, sizeof r->path, "%s/%s", name, JM_META_FILE);
    snprintf(r->code_path, sizeof r->code_path, "%s/%s", name, JM_CODE_FILE);
    r->map = meta;
    r->size = meta_len;
    r->code_map = code;
    r->code_size = code_len;
    r->code_tried = true;
    if (!read_header(r, err, errlen)) {
        jm_reader_close(r);
        return NULL;
    }
    return r;
}

const jm_header *jm_reader_header(const jm_reader *r) { return &r->header; }
const char *jm_reader_error(const jm_reader *r) { return r->error; }
bool jm_reader_cut(const jm_reader *r) { return r->error[0] && r->cut; }
uint64_t jm_reader_offset(const jm_reader *r) { return r->pos; }
const char *jm_reader_path(const jm_reader *r) { return r->path; }
const char *jm_reader_code_path(const jm_reader *r) { return r->code_path; }

/* Pages of the map this far behind the reader are given back: a metadata
 * stream of many GB (reference mode) is read front to back, and pages once
 * touched would otherwise stay in the process's memory. An unwritten
 * private file mapping reads them from the file again if they are used. */
#define JM_DROP_BEHIND ((uint64_t)32 << 20)

int jm_reader_next(jm_reader *r, jm_record *rec)
{
    if (r->error[0])
        return -1;
    if (r->pos == r->size)
        return 0;
    if (r->owns_maps && r->pos - r->dropped >= 2 * JM_DROP_BEHIND) {
        uint64_t upto = (r->pos - JM_DROP_BEHIND) & ~(uint64_t)(sysconf(_SC_PAGESIZE) - 1);
        madvise((void *)(r->map + r->dropped), (size_t)(upto - r->dropped), MADV_DONTNEED);
        r->dropped = upto;
    }
    uint64_t left = r->size - r->pos;
    const uint8_t *p = r->map + r->pos;
    if (left < JM_RECORD_HEADER_SIZE) {
        r->cut = true;
        snprintf(r->error, sizeof r->error,
                 "%s: offset %llu: truncated record header (%llu of %u bytes)", r->path,
                 (unsigned long long)r->pos, (unsigned long long)left, JM_RECORD_HEADER_SIZE);
        return -1;
    }
    rec->type = (uint16_t)load_le(p, 2);
    rec->flags = (uint16_t)load_le(p + 2, 2);
    rec->size = (uint32_t)load_le(p + 4, 4);
    rec->tsc = load_le(p + 8, 8);
    rec->offset = r->pos;
    if (rec->type == 0) {
        snprintf(r->error, sizeof r->error, "%s: offset %llu: record type 0 (corrupt data)",
                 r->path, (unsigned long long)r->pos);
        return -1;
    }
    if (rec->size > JM_MAX_RECORD_SIZE) {
        snprintf(r->error, sizeof r->error,
                 "%s: offset %llu: record size %u exceeds the %u-byte limit (corrupt data)",
                 r->path, (unsigned long long)r->pos, rec->size, JM_MAX_RECORD_SIZE);
        return -1;
    }
    if (rec->size > left - JM_RECORD_HEADER_SIZE) {
        /* A writer cut off leaves a known record short; an unknown type
         * here is damage. */
        r->cut = rec->type < JM_TYPE_LIMIT && strcmp(jm_type_name(rec->type), "UNKNOWN");
        snprintf(r->error, sizeof r->error,
                 "%s: offset %llu: truncated %s record (%llu of %u payload bytes)", r->path,
                 (unsigned long long)r->pos, jm_type_name(rec->type),
                 (unsigned long long)(left - JM_RECORD_HEADER_SIZE), rec->size);
        return -1;
    }
    rec->payload = p + JM_RECORD_HEADER_SIZE;
    r->pos += JM_RECORD_HEADER_SIZE + (uint64_t)rec->size;
    return 1;
}

static bool load_code(jm_reader *r)
{
    if (!r->code_tried) {
        r->code_tried = true;
        r->code_error = map_file(r->code_path, &r->code_map, &r->code_size);
        if (r->code_error) {
            r->code_map = NULL;
            r->code_size = 0;
        }
    }
    return r->code_error == 0;
}

uint64_t jm_reader_code_size(const jm_reader *r)
{
    return load_code((jm_reader *)r) ? r->code_size : 0;
}

const uint8_t *jm_reader_code(jm_reader *r, uint64_t off, uint64_t len, char *err,
                              size_t errlen)
{
    if (!load_code(r)) {
        errfmt(err, errlen, "%s: cannot read: %s", r->code_path, jpt_open_error(r->code_error));
        return NULL;
    }
    if (off > r->code_size || len > r->code_size - off) {
        errfmt(err, errlen, "%s: offset %llu: %llu code bytes run past the end (%zu bytes)",
               r->code_path, (unsigned long long)off, (unsigned long long)len, r->code_size);
        return NULL;
    }
    static const uint8_t empty[1];
    return len ? r->code_map + off : empty;
}

void jm_reader_close(jm_reader *r)
{
    if (!r)
        return;
    if (r->owns_maps && r->map)
        munmap((void *)r->map, r->size);
    if (r->owns_maps && r->code_map)
        munmap((void *)r->code_map, r->code_size);
    free(r);
}
