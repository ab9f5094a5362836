/* The decoded-flow cache file (flowcache.h; the format is in docs/FORMAT.md,
 * "cache/"). */
#include "profile/flowcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <capstone/capstone.h>
#include <glib.h>
#include <intel-pt.h>

#include "common/fileio.h"
#include "common/hash.h"
#include "flow_source_id.h"

#define FC_MAGIC "JPTFLOWC"
#define FC_HEADER_BYTES 64u
#define FC_RECORD_HEADER 16u
/* Events are written in records of about this many bytes; no record may be
 * larger than FC_MAX_RECORD (a reader refuses it before allocating). */
#define FC_EVENTS_BYTES (256u << 10)
#define FC_MAX_RECORD (64u << 20)
/* Warnings kept from one file at most (each up to FC_MAX_WARNING bytes). */
#define FC_MAX_WARNINGS 4096u
#define FC_MAX_WARNING 4096u

enum {
    REC_WARNING = 1,           /* a warning opening the trace printed */
    REC_TRACE_WARNING,         /* a line of rt_warnings() */
    REC_THREAD,                /* u32 tid: a thread's flow begins */
    REC_EVENTS,                /* u32 count, then the events */
    REC_THREAD_END,            /* the thread's end (fc_thread) */
    REC_END,                   /* u64 records before it, u64 events: the file is whole */
};

/* ---- identity ------------------------------------------------------------ */

uint64_t fc_producer(void)
{
    /* libipt and capstone decode: another version may decode otherwise */
    struct pt_version v = pt_library_version();
    uint64_t parts[] = { FC_SOURCE_ID, FC_VERSION, v.major, v.minor, v.patch, v.build,
                         cs_version(NULL, NULL), sizeof(fl_event), sizeof(dc_stats),
                         sizeof(rp_stats), sizeof(rv_stats) };
    return jhash_bytes(parts, sizeof parts, 0);
}

char *fc_path(const char *dir)
{
    return g_build_filename(dir, "cache", "flow.jfc", NULL);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* name, size and contents of one input (or that it is absent) into h. */
static int hash_file(jhash *h, const char *dir, const char *name, char *err, size_t errlen)
{
    char *path = g_build_filename(dir, name, NULL);
    uint64_t size = 0;
    int fd = jpt_open_regular(path, &size);
    jhash_update(h, name, strlen(name) + 1);
    if (fd == -ENOENT || fd == JPT_ENOTREG) {
        uint64_t absent = UINT64_MAX;
        jhash_update(h, &absent, sizeof absent);
        g_free(path);
        return 0;
    }
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path, jpt_open_error(fd));
        g_free(path);
        return -1;
    }
    jhash_update(h, &size, sizeof size);
    enum { BUF = 1 << 20 };
    uint8_t *buf = g_malloc(BUF);
    uint64_t done = 0;
    int rc = 0;
    while (done < size) {
        ssize_t n = read(fd, buf, BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(err, errlen, "%s: offset %" PRIu64 ": cannot read: %s", path, done,
                     n < 0 ? strerror(errno) : "the file ends early");
            rc = -1;
            break;
        }
        jhash_update(h, buf, (size_t)n);
        done += (uint64_t)n;
    }
    g_free(buf);
    close(fd);
    g_free(path);
    return rc;
}

/* The regular files of dir/sub, sorted, into h. */
static int hash_folder(jhash *h, const char *dir, const char *sub, char *err, size_t errlen)
{
    char *path = g_build_filename(dir, sub, NULL);
    DIR *d = opendir(path);
    g_free(path);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            g_ptr_array_add(names, g_build_filename(sub, e->d_name, NULL));
    if (d)
        closedir(d);
    qsort(names->pdata, names->len, sizeof(char *), cmp_str);
    int rc = 0;
    for (guint i = 0; i < names->len && rc == 0; i++)
        rc = hash_file(h, dir, names->pdata[i], err, errlen);
    g_ptr_array_free(names, TRUE);
    return rc;
}

int fc_trace_inputs(const char *dir, fc_key *key, char *err, size_t errlen)
{
    jhash h;
    jhash_init(&h, FC_VERSION);
    if (hash_file(&h, dir, "info.json", err, errlen) < 0)
        return -1;
    key->trace = jhash_final(&h);
    if (hash_file(&h, dir, "jvm/meta.jpt", err, errlen) < 0 ||
        hash_file(&h, dir, "jvm/code.bin", err, errlen) < 0 ||
        hash_folder(&h, dir, "pt", err, errlen) < 0 ||
        hash_folder(&h, dir, "sideband", err, errlen) < 0)
        return -1;
    key->inputs = jhash_final(&h);
    return 0;
}

/* ---- little-endian fields and varints ------------------------------------ */

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static inline uint8_t *put_var(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* The difference b - a as a small unsigned number (zigzag). */
static inline uint64_t zz(uint64_t a, uint64_t b)
{
    int64_t d = (int64_t)(b - a);
    return ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
}

static inline uint64_t unzz(uint64_t a, uint64_t z)
{
    return a + ((z >> 1) ^ (uint64_t)-(int64_t)(z & 1));
}

/* 0 and the value, or -1 when the bytes end or run past 64 bits. */
static int get_var_long(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p == end)
            return -1;
        uint8_t b = *p++;
        if (shift == 63 && b > 1)
            return -1;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* Most varints of the flow are one byte. */
static inline int get_var(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    if (__builtin_expect(p < end && *p < 0x80, 1)) {
        *v = *p;
        *pp = p + 1;
        return 0;
    }
    return get_var_long(pp, end, v);
}

/* ---- events --------------------------------------------------------------
 *
 * Each event is a header byte and varints, most of them differences from
 * the event before in the same record (a record decodes on its own):
 *   header  bits 0-1 kind - 1, bits 2-3 origin, bit 4 flags follow, bit 5
 *           method_id as before, bit 6 count is 1 (FL_BYTECODE) or 0
 *           (other kinds), bit 7 a mask of rarer fields follows
 *   then    tsc, offset and bci as zigzag differences, opcode + 1; flags;
 *           method_id (zigzag difference) unless as before; count unless
 *           implied; the mask and its fields: tid (when not the thread's),
 *           seq, depth with the stack (zigzag differences), gap_offset,
 *           resume_offset, lost_bytes. */

#define H_FLAGS 0x10
#define H_SAME_METHOD 0x20
#define H_COUNT_IMPLIED 0x40
#define H_MORE 0x80
enum { M_TID = 1, M_SEQ = 2, M_STACK = 4, M_GAP = 8, M_RESUME = 16, M_LOST = 32 };

typedef struct estate {
    uint64_t tsc, offset, method;
    int32_t bci;
} estate;

static uint64_t implied_count(fl_kind k)
{
    return k == FL_BYTECODE ? 1 : 0;
}

/* Bytes one event may take at most, stack aside. */
#define EVENT_MAX (1 + 16 * 10)

static uint8_t *encode(uint8_t *p, estate *s, uint32_t tid, const fl_event *ev)
{
    uint8_t *h = p++;
    uint8_t head = (uint8_t)((ev->kind - 1) | (ev->origin << 2));
    p = put_var(p, zz(s->tsc, ev->tsc));
    p = put_var(p, zz(s->offset, ev->offset));
    p = put_var(p, zz((uint64_t)(int64_t)s->bci, (uint64_t)(int64_t)ev->bci));
    p = put_var(p, (uint32_t)ev->opcode + 1u);
    if (ev->flags) {
        head |= H_FLAGS;
        p = put_var(p, ev->flags);
    }
    if (ev->method_id == s->method)
        head |= H_SAME_METHOD;
    else
        p = put_var(p, zz(s->method, ev->method_id));
    if (ev->count == implied_count(ev->kind))
        head |= H_COUNT_IMPLIED;
    else
        p = put_var(p, ev->count);
    unsigned mask = (ev->tid != tid ? M_TID : 0) | (ev->seq ? M_SEQ : 0) |
                    (ev->depth ? M_STACK : 0) | (ev->gap_offset ? M_GAP : 0) |
                    (ev->resume_offset ? M_RESUME : 0) | (ev->lost_bytes ? M_LOST : 0);
    if (mask) {
        head |= H_MORE;
        p = put_var(p, mask);
        if (mask & M_TID)
            p = put_var(p, ev->tid);
        if (mask & M_SEQ)
            p = put_var(p, ev->seq);
        if (mask & M_STACK) {
            p = put_var(p, ev->depth);
            uint64_t prev = 0;
            for (uint32_t i = 0; i < ev->depth; i++) {
                p = put_var(p, zz(prev, ev->stack[i]));
                prev = ev->stack[i];
            }
        }
        if (mask & M_GAP)
            p = put_var(p, ev->gap_offset);
        if (mask & M_RESUME)
            p = put_var(p, ev->resume_offset);
        if (mask & M_LOST)
            p = put_var(p, ev->lost_bytes);
    }
    *h = head;
    s->tsc = ev->tsc;
    s->offset = ev->offset;
    s->bci = ev->bci;
    s->method = ev->method_id;
    return p;
}

/* A stack buffer that grows (decoded SEGMENT stacks point into it). */
typedef struct stackbuf {
    uint64_t *v;
    size_t cap;
} stackbuf;

/* Decodes one event; 0, or -1 when the bytes are not a valid event. */
static int decode(const uint8_t **pp, const uint8_t *end, estate *s, uint32_t tid,
                  stackbuf *sb, fl_event *ev)
{
    const uint8_t *p = *pp;
    if (p == end)
        return -1;
    uint8_t head = *p++;
    uint64_t v;
    ev->kind = (fl_kind)((head & 3) + 1);
    ev->origin = (fl_origin)((head >> 2) & 3);
    if (ev->origin >= FL_ORIGIN_COUNT)
        return -1;
    ev->tid = tid;
    ev->flags = 0;
    ev->seq = 0;
    ev->depth = 0;
    ev->stack = NULL;
    ev->gap_offset = ev->resume_offset = ev->lost_bytes = 0;
    if (get_var(&p, end, &v) < 0)
        return -1;
    ev->tsc = unzz(s->tsc, v);
    if (get_var(&p, end, &v) < 0)
        return -1;
    ev->offset = unzz(s->offset, v);
    if (get_var(&p, end, &v) < 0)
        return -1;
    uint64_t bci = unzz((uint64_t)(int64_t)s->bci, v);
    if ((int64_t)bci < INT32_MIN || (int64_t)bci > INT32_MAX)
        return -1;
    ev->bci = (int32_t)(int64_t)bci;
    if (get_var(&p, end, &v) < 0 || v > UINT32_MAX)
        return -1;
    ev->opcode = (int32_t)(uint32_t)(v - 1);
    if (head & H_FLAGS) {
        if (get_var(&p, end, &v) < 0 || v > UINT32_MAX || !v)
            return -1;
        ev->flags = (uint32_t)v;
    }
    if (head & H_SAME_METHOD) {
        ev->method_id = s->method;
    } else {
        if (get_var(&p, end, &v) < 0)
            return -1;
        ev->method_id = unzz(s->method, v);
    }
    if (head & H_COUNT_IMPLIED) {
        ev->count = implied_count(ev->kind);
    } else if (get_var(&p, end, &ev->count) < 0) {
        return -1;
    }
    if (head & H_MORE) {
        if (get_var(&p, end, &v) < 0 || !v || v > (M_LOST << 1) - 1)
            return -1;
        unsigned mask = (unsigned)v;
        if (mask & M_TID) {
            if (get_var(&p, end, &v) < 0 || v > UINT32_MAX)
                return -1;
            ev->tid = (uint32_t)v;
        }
        if ((mask & M_SEQ) && get_var(&p, end, &ev->seq) < 0)
            return -1;
        if (mask & M_STACK) {
            /* each frame takes a byte at least: the record bounds the depth */
            if (get_var(&p, end, &v) < 0 || !v || v > (uint64_t)(end - p))
                return -1;
            if (v > sb->cap) {
                sb->cap = v > 2 * sb->cap ? v : 2 * sb->cap;
                sb->v = g_realloc_n(sb->v, sb->cap, sizeof *sb->v);
            }
            ev->depth = (uint32_t)v;
            uint64_t prev = 0;
            for (uint32_t i = 0; i < ev->depth; i++) {
                if (get_var(&p, end, &v) < 0)
                    return -1;
                prev = sb->v[i] = unzz(prev, v);
            }
            ev->stack = sb->v;
        }
        if ((mask & M_GAP) && get_var(&p, end, &ev->gap_offset) < 0)
            return -1;
        if ((mask & M_RESUME) && get_var(&p, end, &ev->resume_offset) < 0)
            return -1;
        if ((mask & M_LOST) && get_var(&p, end, &ev->lost_bytes) < 0)
            return -1;
    }
    s->tsc = ev->tsc;
    s->offset = ev->offset;
    s->bci = ev->bci;
    s->method = ev->method_id;
    *pp = p;
    return 0;
}

/* ---- writing ------------------------------------------------------------- */

struct fc_writer {
    int fd;
    char *path, *tmp;
    int error;                 /* the first errno of a write, or EINVAL for an event the
                                * format cannot hold */
    uint64_t records, events;
    /* the records of the current thread's events */
    bool in_thread;
    uint32_t tid;
    uint8_t *ev;
    size_t nev, evcap;
    uint32_t evcount;
    estate es;
};

static void write_record(fc_writer *w, uint32_t type, const void *payload, size_t len)
{
    if (w->error)
        return;
    uint8_t head[FC_RECORD_HEADER];
    put32(head, type);
    put32(head + 4, (uint32_t)len);
    put64(head + 8, jhash_bytes(payload, len, type | (uint64_t)len << 32));
    int rc = jpt_write_all(w->fd, head, sizeof head);
    if (rc == 0 && len)
        rc = jpt_write_all(w->fd, payload, len);
    if (rc < 0)
        w->error = -rc;
    w->records++;
}

fc_writer *fc_writer_new(const char *path, const fc_key *key, char *err, size_t errlen)
{
    char *dir = g_path_get_dirname(path);
    if (g_mkdir_with_parents(dir, 0777) < 0) {
        snprintf(err, errlen, "%s: cannot make the directory: %s", dir, strerror(errno));
        g_free(dir);
        return NULL;
    }
    g_free(dir);
    fc_writer *w = g_new0(fc_writer, 1);
    w->path = g_strdup(path);
    w->tmp = g_strdup_printf("%s.tmp-%ld-XXXXXX", path, (long)getpid());
    w->fd = g_mkstemp_full(w->tmp, O_RDWR | O_CLOEXEC, 0600);
    if (w->fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", w->tmp, strerror(errno));
        g_free(w->tmp);
        g_free(w->path);
        g_free(w);
        return NULL;
    }
    /* mkstemp makes the file private; a cache is as readable as its trace */
    mode_t um = umask(0);
    umask(um);
    fchmod(w->fd, 0666 & ~um);
    uint8_t h[FC_HEADER_BYTES] = { 0 };
    memcpy(h, FC_MAGIC, 8);
    put32(h + 8, FC_VERSION);
    put32(h + 12, FC_HEADER_BYTES);
    put64(h + 16, key->producer);
    put64(h + 24, key->inputs);
    put64(h + 32, key->options);
    put64(h + 40, key->trace);
    put64(h + 56, jhash_bytes(h, 56, 0));
    int rc = jpt_write_all(w->fd, h, sizeof h);
    if (rc < 0)
        w->error = -rc;
    w->evcap = FC_EVENTS_BYTES + EVENT_MAX;
    w->ev = g_malloc(w->evcap);
    return w;
}

void fc_write_warning(fc_writer *w, const char *msg)
{
    write_record(w, REC_WARNING, msg, strnlen(msg, FC_MAX_WARNING));
}

void fc_write_trace_warning(fc_writer *w, const char *line)
{
    write_record(w, REC_TRACE_WARNING, line, strnlen(line, FC_MAX_WARNING));
}

static void flush_events(fc_writer *w)
{
    if (!w->evcount)
        return;
    put32(w->ev, w->evcount);
    write_record(w, REC_EVENTS, w->ev, w->nev);
    w->nev = 4;
    w->evcount = 0;
    memset(&w->es, 0, sizeof w->es);
}

void fc_write_thread_begin(fc_writer *w, uint32_t tid)
{
    uint8_t p[4];
    put32(p, tid);
    write_record(w, REC_THREAD, p, sizeof p);
    w->in_thread = true;
    w->tid = tid;
    w->nev = 4;
    w->evcount = 0;
    memset(&w->es, 0, sizeof w->es);
}

int fc_write_event(const fl_event *ev, void *vw)
{
    fc_writer *w = vw;
    if (w->error)
        return 0;
    if (!w->in_thread || ev->kind < FL_SEGMENT || ev->kind >= FL_KIND_COUNT ||
        (unsigned)ev->origin >= FL_ORIGIN_COUNT || (ev->depth && !ev->stack)) {
        w->error = EINVAL;
        return 0;
    }
    size_t need = EVENT_MAX + (size_t)ev->depth * 10;
    if (w->nev + need > w->evcap && w->evcount)
        flush_events(w);
    if (w->nev + need > w->evcap) {
        if (need + 4 > FC_MAX_RECORD) {
            w->error = EINVAL;
            return 0;
        }
        w->evcap = w->nev + need;
        w->ev = g_realloc(w->ev, w->evcap);
    }
    w->nev = (size_t)(encode(w->ev + w->nev, &w->es, w->tid, ev) - w->ev);
    w->evcount++;
    w->events++;
    if (w->nev >= FC_EVENTS_BYTES)
        flush_events(w);
    return 0;
}

void fc_write_thread_end(fc_writer *w, const fc_thread *t)
{
    flush_events(w);
    size_t elen = strnlen(t->err, sizeof t->err);
    size_t len = 4 + 4 + 8 + 3 * 4 + sizeof t->dc + sizeof t->rp + sizeof t->rv + elen;
    uint8_t *p = g_malloc(len), *q = p;
    put32(q, t->tid);
    put32(q + 4, (uint32_t)t->rc);
    put64(q + 8, t->cpu_ns);
    put32(q + 16, sizeof t->dc);
    put32(q + 20, sizeof t->rp);
    put32(q + 24, sizeof t->rv);
    q += 28;
    /* The counts as this build lays them out: the cache is this build's own
     * (fc_producer covers the sources and the sizes). */
    memcpy(q, &t->dc, sizeof t->dc);
    q += sizeof t->dc;
    memcpy(q, &t->rp, sizeof t->rp);
    q += sizeof t->rp;
    memcpy(q, &t->rv, sizeof t->rv);
    q += sizeof t->rv;
    memcpy(q, t->err, elen);
    write_record(w, REC_THREAD_END, p, len);
    g_free(p);
    w->in_thread = false;
}

/* Temporary files of writers that are gone (killed before they renamed). */
static void remove_orphans(const char *path)
{
    char *dir = g_path_get_dirname(path), *base = g_path_get_basename(path);
    char *prefix = g_strdup_printf("%s.tmp-", base);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)))
            continue;
        long pid = strtol(e->d_name + strlen(prefix), NULL, 10);
        if (pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
            char *p = g_build_filename(dir, e->d_name, NULL);
            unlink(p);
            g_free(p);
        }
    }
    if (d)
        closedir(d);
    g_free(prefix);
    g_free(base);
    g_free(dir);
}

static void writer_free(fc_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    g_free(w->ev);
    g_free(w->path);
    g_free(w->tmp);
    g_free(w);
}

int fc_writer_commit(fc_writer *w, char *err, size_t errlen)
{
    if (w->in_thread)
        w->error = w->error ? w->error : EINVAL;
    uint8_t end[16];
    put64(end, w->records);
    put64(end + 8, w->events);
    write_record(w, REC_END, end, sizeof end);
    int rc = 0;
    if (w->error) {
        snprintf(err, errlen, "%s: cannot write: %s", w->tmp, strerror(w->error));
        rc = -1;
    } else if (close(w->fd) < 0) {
        snprintf(err, errlen, "%s: cannot write: %s", w->tmp, strerror(errno));
        rc = -1;
    } else if (rename(w->tmp, w->path) < 0) {
        snprintf(err, errlen, "%s: cannot rename to %s: %s", w->tmp, w->path, strerror(errno));
        rc = -1;
    }
    if (!w->error)
        w->fd = -1;
    if (rc < 0)
        unlink(w->tmp);
    remove_orphans(w->path);
    writer_free(w);
    return rc;
}

void fc_writer_abort(fc_writer *w)
{
    if (!w)
        return;
    unlink(w->tmp);
    writer_free(w);
}

/* ---- reading ------------------------------------------------------------- */

struct fc_reader {
    int fd;
    char *path;
    uint64_t size;
    GPtrArray *warnings, *trace_warnings;
    GArray *threads;           /* fc_thread */
    uint8_t *buf;              /* a record's payload */
    size_t bufcap;
    stackbuf sb;
};

/* Reads the record at *off: 1 with its type and payload, 0 at the end of
 * the file, -1 with why. */
static int read_record(fc_reader *r, uint64_t *off, uint32_t *type, uint32_t *len, char *why,
                       size_t whylen)
{
    if (*off == r->size)
        return 0;
    uint8_t h[FC_RECORD_HEADER];
    if (r->size - *off < sizeof h ||
        pread(r->fd, h, sizeof h, (off_t)*off) != (ssize_t)sizeof h) {
        snprintf(why, whylen, "%s: offset %" PRIu64 ": a record cut short", r->path, *off);
        return -1;
    }
    *type = get32(h);
    *len = get32(h + 4);
    if (*len > FC_MAX_RECORD || *len > r->size - *off - sizeof h) {
        snprintf(why, whylen, "%s: offset %" PRIu64 ": a record of %" PRIu32 " bytes %s",
                 r->path, *off, *len, *len > FC_MAX_RECORD ? "(more than any writer makes)"
                                                            : "runs past the end of the file");
        return -1;
    }
    if (*len > r->bufcap) {
        r->bufcap = *len;
        g_free(r->buf);
        r->buf = g_malloc(r->bufcap);
    }
    if (*len && pread(r->fd, r->buf, *len, (off_t)(*off + sizeof h)) != (ssize_t)*len) {
        snprintf(why, whylen, "%s: offset %" PRIu64 ": cannot read: %s", r->path, *off,
                 strerror(errno ? errno : EIO));
        return -1;
    }
    if (jhash_bytes(r->buf, *len, *type | (uint64_t)*len << 32) != get64(h + 8)) {
        snprintf(why, whylen, "%s: offset %" PRIu64 ": record checksum mismatch", r->path,
                 *off);
        return -1;
    }
    *off += sizeof h + *len;
    return 1;
}

static int parse_thread_end(fc_reader *r, uint32_t len, fc_thread *t)
{
    const uint8_t *p = r->buf;
    size_t fixed = 28 + sizeof t->dc + sizeof t->rp + sizeof t->rv;
    if (len < fixed || get32(p + 16) != sizeof t->dc || get32(p + 20) != sizeof t->rp ||
        get32(p + 24) != sizeof t->rv)
        return -1;
    memset(t, 0, sizeof *t);
    t->tid = get32(p);
    t->rc = (int32_t)get32(p + 4);
    t->cpu_ns = get64(p + 8);
    p += 28;
    memcpy(&t->dc, p, sizeof t->dc);
    p += sizeof t->dc;
    memcpy(&t->rp, p, sizeof t->rp);
    p += sizeof t->rp;
    memcpy(&t->rv, p, sizeof t->rv);
    p += sizeof t->rv;
    t->dc.problem[sizeof t->dc.problem - 1] = 0;
    size_t elen = len - fixed < sizeof t->err - 1 ? len - fixed : sizeof t->err - 1;
    memcpy(t->err, p, elen);
    t->err[elen] = 0;
    return 0;
}

/* Decodes a REC_EVENTS payload into sink (NULL: only checks it). Returns 0,
 * 1 when the sink stopped, -1 when the payload is not valid. */
static int events_of(fc_reader *r, uint32_t len, uint32_t tid, fl_sink sink, void *ctx,
                     bool decoded_only, uint64_t *count)
{
    if (len < 4)
        return -1;
    const uint8_t *p = r->buf + 4, *end = r->buf + len;
    uint32_t n = get32(r->buf);
    estate s = { 0 };
    fl_event ev;
    for (uint32_t i = 0; i < n; i++) {
        if (decode(&p, end, &s, tid, &r->sb, &ev) < 0)
            return -1;
        if (sink && !(decoded_only && ev.origin != FL_DECODED) && sink(&ev, ctx))
            return 1;
    }
    if (p != end || !n)
        return -1;
    *count += n;
    return 0;
}

void fc_close(fc_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    g_free(r->path);
    g_ptr_array_free(r->warnings, TRUE);
    g_ptr_array_free(r->trace_warnings, TRUE);
    g_array_free(r->threads, TRUE);
    g_free(r->buf);
    g_free(r->sb.v);
    g_free(r);
}

int fc_open(const char *path, const fc_key *key, fc_reader **out, char *why, size_t whylen)
{
    *out = NULL;
    uint64_t size;
    int fd = jpt_open_regular(path, &size);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0) {
        snprintf(why, whylen, "%s: cannot read: %s", path, jpt_open_error(fd));
        return -1;
    }
    fc_reader *r = g_new0(fc_reader, 1);
    r->fd = fd;
    r->path = g_strdup(path);
    r->size = size;
    r->warnings = g_ptr_array_new_with_free_func(g_free);
    r->trace_warnings = g_ptr_array_new_with_free_func(g_free);
    r->threads = g_array_new(FALSE, FALSE, sizeof(fc_thread));
    uint8_t h[FC_HEADER_BYTES];
    if (size < sizeof h || pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h ||
        memcmp(h, FC_MAGIC, 8)) {
        snprintf(why, whylen, "%s: offset 0: not a flow cache", path);
        fc_close(r);
        return -1;
    }
    if (get32(h + 8) != FC_VERSION) {
        fc_close(r);
        return 0;              /* another version's: stale */
    }
    if (get32(h + 12) != FC_HEADER_BYTES || get64(h + 56) != jhash_bytes(h, 56, 0)) {
        snprintf(why, whylen, "%s: offset 0: header checksum mismatch", path);
        fc_close(r);
        return -1;
    }
    if (get64(h + 16) != key->producer || get64(h + 32) != key->options) {
        fc_close(r);
        return 0;              /* another build's or other options': stale */
    }
    if (get64(h + 40) != key->trace) {
        /* copied from another trace's directory */
        snprintf(why, whylen, "%s: offset 40: the cache of another recording (its info.json "
                 "differs)", path);
        fc_close(r);
        return -1;
    }
    if (get64(h + 24) != key->inputs) {
        fc_close(r);
        return 0;              /* the trace's files changed since: stale */
    }
    /* The whole file is checked before any of it is used. */
    uint64_t off = FC_HEADER_BYTES, records = 0, events = 0;
    bool in_thread = false, ended = false;
    uint32_t tid = 0;
    int rc;
    uint32_t type, len;
    while (!ended && (rc = read_record(r, &off, &type, &len, why, whylen)) == 1) {
        uint64_t at = off - FC_RECORD_HEADER - len;
        const char *bad = NULL;
        switch (type) {
        case REC_WARNING:
        case REC_TRACE_WARNING: {
            GPtrArray *to = type == REC_WARNING ? r->warnings : r->trace_warnings;
            if (in_thread || len > FC_MAX_WARNING || r->warnings->len +
                                                     r->trace_warnings->len >= FC_MAX_WARNINGS)
                bad = "a warning out of place";
            else
                g_ptr_array_add(to, g_strndup((const char *)r->buf, len));
            break;
        }
        case REC_THREAD:
            if (in_thread || len != 4)
                bad = "a thread that begins inside another";
            in_thread = true;
            tid = len == 4 ? get32(r->buf) : 0;
            break;
        case REC_EVENTS:
            if (!in_thread)
                bad = "events outside a thread";
            else if (events_of(r, len, tid, NULL, NULL, false, &events) < 0)
                bad = "events that do not decode";
            break;
        case REC_THREAD_END: {
            fc_thread t;
            if (!in_thread || parse_thread_end(r, len, &t) < 0 || t.tid != tid)
                bad = "a thread's end that does not match its beginning";
            else
                g_array_append_val(r->threads, t);
            in_thread = false;
            break;
        }
        case REC_END:
            if (in_thread || len != 16 || get64(r->buf) != records || get64(r->buf + 8) != events)
                bad = "an END record that does not match the file";
            else if (off != size)
                bad = "bytes after the END record";
            ended = true;
            break;
        default:
            bad = "an unknown record type";
            break;
        }
        if (bad) {
            snprintf(why, whylen, "%s: offset %" PRIu64 ": %s", path, at, bad);
            fc_close(r);
            return -1;
        }
        records++;
    }
    if (rc < 0) {
        fc_close(r);
        return -1;
    }
    if (!ended) {
        snprintf(why, whylen, "%s: offset %" PRIu64 ": ends without its END record", path, off);
        fc_close(r);
        return -1;
    }
    *out = r;
    return 1;
}

size_t fc_warnings(const fc_reader *r, const char *const **lines)
{
    *lines = (const char *const *)r->warnings->pdata;
    return r->warnings->len;
}

size_t fc_trace_warnings(const fc_reader *r, const char *const **lines)
{
    *lines = (const char *const *)r->trace_warnings->pdata;
    return r->trace_warnings->len;
}

size_t fc_threads(const fc_reader *r, const fc_thread **threads)
{
    *threads = (const fc_thread *)(void *)r->threads->data;
    return r->threads->len;
}

int fc_replay_flow(fc_reader *r, const fc_replay *how, char *err, size_t errlen)
{
    uint64_t off = FC_HEADER_BYTES, events = 0;
    uint32_t type, len, tid = 0;
    bool want = false;
    int rc;
    while ((rc = read_record(r, &off, &type, &len, err, errlen)) == 1) {
        switch (type) {
        case REC_THREAD:
            tid = get32(r->buf);
            want = !how->want || how->want(tid, how->ctx);
            if (want && how->begin)
                how->begin(tid, how->ctx);
            break;
        case REC_EVENTS:
            if (!want || !how->sink)
                break;
            rc = events_of(r, len, tid, how->sink, how->ctx, how->decoded_only, &events);
            if (rc == 1)
                return 1;
            if (rc < 0) {
                snprintf(err, errlen, "%s: offset %" PRIu64 ": events that do not decode",
                         r->path, off - FC_RECORD_HEADER - len);
                return -1;
            }
            break;
        case REC_THREAD_END:
            if (want && how->end) {
                fc_thread t;
                if (parse_thread_end(r, len, &t) == 0)
                    how->end(&t, how->ctx);
            }
            want = false;
            break;
        case REC_END:
            return 0;
        default:
            break;
        }
    }
    return rc < 0 ? -1 : 0;
}
