/* The partial-result file: writing it, and reading it back with every
 * field checked (docs/FORMAT.md, "Partial results"). */
#include "profile/part.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "common/fileio.h"

/* ---- the file -------------------------------------------------------------- */

static const char part_magic[8] = { 'J', 'P', 'T', 'P', 'A', 'R', 'T', '\0' };

enum {
    SEC_SHARDS = 1, SEC_TITLE, SEC_PLAN, SEC_METHODS, SEC_THREADS, SEC_PIECE, SEC_STATS,
    SEC_TIMEBASE, SEC_END = 0xffff,
};

#define NODE_BYTES 56u          /* parent, method, site, 4 self metrics, kinds */
#define LEVEL_BYTES 17u         /* claim, flags, bci, run_outer */
#define PIECE_HEAD_BYTES 64u

static void put_u8(GByteArray *b, uint8_t v) { g_byte_array_append(b, &v, 1); }

static void put_u32(GByteArray *b, uint32_t v)
{
    uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    g_byte_array_append(b, x, 4);
}

static void put_u64(GByteArray *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(GByteArray *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    put_u32(b, (uint32_t)n);
    if (n)
        g_byte_array_append(b, (const guint8 *)s, (guint)n);
}

/* Starts a section; returns where its size goes. */
static guint sec_begin(GByteArray *b, uint32_t kind)
{
    put_u32(b, kind);
    put_u32(b, 0);
    guint at = b->len;
    put_u64(b, 0);
    return at;
}

static void sec_end(GByteArray *b, guint at)
{
    uint64_t size = b->len - at - 8;
    for (int i = 0; i < 8; i++)
        b->data[at + i] = (uint8_t)(size >> (8 * i));
}

static uint32_t include_mask(const pf_cct_opts *o)
{
    uint32_t m = 0;
    for (int i = 0; i < FL_ORIGIN_COUNT; i++)
        if (o->include[i])
            m |= 1u << i;
    return m;
}

static int cmp_u64p(const void *a, const void *b)
{
    uint64_t x = **(uint64_t *const *)a, y = **(uint64_t *const *)b;
    return x < y ? -1 : x > y;
}

static gint cmp_u32(gconstpointer a, gconstpointer b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A class set, names sorted: equal sets give equal bytes. */
static void put_class_set(GByteArray *b, GHashTable *set)
{
    guint n = 0;
    gpointer *names = g_hash_table_get_keys_as_array(set, &n);
    qsort(names, n, sizeof *names, cmp_str);
    put_u32(b, n);
    for (guint i = 0; i < n; i++)
        put_str(b, names[i]);
    g_free(names);
}

static void put_piece(GByteArray *b, const pf_piece *p)
{
    guint at = sec_begin(b, SEC_PIECE);
    put_u32(b, p->tid);
    put_u32(b, (p->relative ? 1u : 0) | (p->started ? 2u : 0) | (p->join ? 4u : 0) |
               (p->join_counted ? 8u : 0) | (p->has_start_tsc ? 16u : 0) |
               (p->timed ? 32u : 0) | (p->made ? 64u : 0) | (p->assumed ? 128u : 0));
    put_u64(b, p->from);
    put_u64(b, p->to);
    put_u64(b, p->join_tsc);
    put_u64(b, p->start_tsc);
    put_u64(b, p->last_tsc);
    put_u32(b, p->started ? (uint32_t)p->final : 0);
    put_u32(b, p->tree->count);
    put_u32(b, p->nlevels);
    put_u32(b, 0);
    for (uint32_t i = 1; i < p->tree->count; i++) {
        const pf_node *n = &p->tree->nodes[i];
        put_u32(b, (uint32_t)n->parent);
        put_u64(b, n->method);
        put_u64(b, (uint64_t)n->site);
        put_u64(b, n->calls);
        put_u64(b, n->self_bytecodes);
        put_u64(b, n->self_bc_events);
        put_u64(b, n->self_time);
        put_u32(b, n->kinds);
    }
    for (uint32_t i = 0; i < p->nlevels; i++) {
        const pf_level *l = &p->levels[i];
        put_u64(b, l->claim);
        put_u32(b, l->claim_flags);
        put_u32(b, (uint32_t)l->claim_bci);
        put_u8(b, l->run_outer);
    }
    if (p->made)
        put_class_set(b, p->made);
    if (p->assumed)
        put_class_set(b, p->assumed);
    sec_end(b, at);
}

int pf_part_write(const pf_part *p, FILE *out)
{
    GByteArray *b = g_byte_array_new();
    g_byte_array_append(b, (const guint8 *)part_magic, sizeof part_magic);
    put_u32(b, PF_PART_VERSION);
    put_u32(b, p->shards);
    put_u32(b, (p->whole_threads ? 1u : 0) | (p->opts.call_sites ? 2u : 0));
    put_u32(b, include_mask(&p->opts));
    uint64_t hz;
    memcpy(&hz, &p->tb.hz, sizeof hz);
    put_u64(b, hz);
    g_byte_array_append(b, p->trace_id, sizeof p->trace_id);
    g_byte_array_append(b, p->plan_id, sizeof p->plan_id);

    guint at = sec_begin(b, SEC_SHARDS);
    g_byte_array_append(b, p->have, (p->shards + 7) / 8);
    sec_end(b, at);
    at = sec_begin(b, SEC_TITLE);
    put_str(b, p->title);
    sec_end(b, at);
    at = sec_begin(b, SEC_TIMEBASE);
    put_u32(b, p->tb.emulated);
    put_str(b, p->tb.source);
    sec_end(b, at);
    at = sec_begin(b, SEC_PLAN);
    put_u32(b, (uint32_t)p->nplan);
    for (size_t i = 0; i < p->nplan; i++) {
        put_u32(b, p->plan[i].shard);
        put_u32(b, p->plan[i].tid);
        put_u64(b, p->plan[i].from);
        put_u64(b, p->plan[i].to);
    }
    sec_end(b, at);
    /* methods by id, threads by tid: equal results give equal files */
    at = sec_begin(b, SEC_METHODS);
    guint nids = 0;
    gpointer *ids = g_hash_table_get_keys_as_array(p->methods, &nids);
    qsort(ids, nids, sizeof *ids, cmp_u64p);
    put_u32(b, nids);
    for (guint i = 0; i < nids; i++) {
        const part_method *m = g_hash_table_lookup(p->methods, ids[i]);
        put_u64(b, *(uint64_t *)ids[i]);
        put_u32(b, m->modifiers);
        put_str(b, m->klass);
        put_str(b, m->name);
        put_str(b, m->sig);
    }
    g_free(ids);
    sec_end(b, at);
    at = sec_begin(b, SEC_THREADS);
    GArray *tv = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, p->threads);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        uint32_t tid = GPOINTER_TO_UINT(key);
        g_array_append_val(tv, tid);
    }
    g_array_sort(tv, cmp_u32);
    put_u32(b, tv->len);
    for (guint i = 0; i < tv->len; i++) {
        uint32_t tid = g_array_index(tv, uint32_t, i);
        put_u32(b, tid);
        put_str(b, g_hash_table_lookup(p->threads, GUINT_TO_POINTER(tid)));
    }
    g_array_free(tv, TRUE);
    sec_end(b, at);
    for (guint i = 0; i < p->pieces->len; i++)
        put_piece(b, p->pieces->pdata[i]);
    at = sec_begin(b, SEC_STATS);
    const uint64_t *sv = (const uint64_t *)&p->st;
    put_u32(b, (uint32_t)(sizeof p->st / sizeof *sv));
    for (size_t i = 0; i < sizeof p->st / sizeof *sv; i++)
        put_u64(b, sv[i]);
    sec_end(b, at);
    uint32_t crc = (uint32_t)crc32(0L, b->data, b->len);
    at = sec_begin(b, SEC_END);
    put_u32(b, crc);
    sec_end(b, at);

    int rc = fwrite(b->data, 1, b->len, out) == b->len ? 0 : -1;
    g_byte_array_free(b, TRUE);
    return rc;
}

/* ---- reading the file ------------------------------------------------------ */

typedef struct rd {
    const uint8_t *d;
    size_t len, pos;
    const char *path;
    char *err;
    size_t errlen;
    bool failed;
} rd;

static void rd_fail(rd *r, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rd_fail(rd *r, size_t at, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = true;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "%s: offset %zu: %s", r->path, at, what);
}

static bool rd_need(rd *r, size_t n, size_t end, const char *what)
{
    if (r->failed)
        return false;
    if (n > end - r->pos) {
        rd_fail(r, r->pos, "%s runs past the end of its record", what);
        return false;
    }
    return true;
}

static uint32_t rd_u32(rd *r, size_t end, const char *what)
{
    if (!rd_need(r, 4, end, what))
        return 0;
    const uint8_t *p = r->d + r->pos;
    r->pos += 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd_u64(rd *r, size_t end, const char *what)
{
    uint64_t lo = rd_u32(r, end, what);
    return lo | (uint64_t)rd_u32(r, end, what) << 32;
}

/* A length-prefixed string (at most 64 KiB, no NUL); NULL on failure. */
static char *rd_str(rd *r, size_t end, const char *what)
{
    size_t at = r->pos;
    uint32_t n = rd_u32(r, end, what);
    if (r->failed)
        return NULL;
    if (n > 65536 || !rd_need(r, n, end, what)) {
        rd_fail(r, at, "%s: implausible length %u", what, n);
        return NULL;
    }
    if (memchr(r->d + r->pos, 0, n)) {
        rd_fail(r, at, "%s holds a NUL byte", what);
        return NULL;
    }
    char *s = g_strndup((const char *)r->d + r->pos, n);
    r->pos += n;
    return s;
}

/* Whether the plan's pieces are a plan: sorted, each thread's from 0 on
 * without holes, shards in range. */
static bool plan_valid(rd *r, size_t at, const pf_part *p)
{
    for (size_t i = 0; i < p->nplan; i++) {
        const pf_shard_piece *x = &p->plan[i];
        const pf_shard_piece *prev = i ? &p->plan[i - 1] : NULL;
        bool first = !prev || prev->tid != x->tid;
        if (x->shard >= p->shards || x->to < x->from || (prev && prev->tid > x->tid) ||
            (first ? x->from != 0 : x->from != prev->to) ||
            (!first && x->to == x->from)) {
            rd_fail(r, at, "plan piece %zu (thread %u, bytes %" PRIu64 "..%" PRIu64 ", shard %u) "
                    "does not fit the plan", i, x->tid, x->from, x->to, x->shard);
            return false;
        }
    }
    pf_shard_plan pl = { .shards = p->shards, .whole_threads = p->whole_threads,
                         .pieces = p->plan, .npieces = p->nplan };
    memcpy(pl.trace_id, p->trace_id, sizeof pl.trace_id);
    pf_plan_identity(&pl);
    if (memcmp(pl.plan_id, p->plan_id, sizeof pl.plan_id)) {
        rd_fail(r, at, "the plan does not match its id");
        return false;
    }
    return true;
}

/* A class set: names strictly ascending (as written), none empty. */
static GHashTable *rd_class_set(rd *r, size_t end, uint32_t tid)
{
    size_t at = r->pos;
    uint32_t n = rd_u32(r, end, "class set");
    GHashTable *set = pf_class_set_new();
    char *prev = NULL;
    for (uint32_t i = 0; i < n && !r->failed; i++) {
        char *k = rd_str(r, end, "class name");
        if (!r->failed && (!*k || (prev && strcmp(prev, k) >= 0)))
            rd_fail(r, at, "piece of thread %u: its class set is not in order", tid);
        if (!r->failed)
            pf_class_set_add(set, k);
        g_free(prev);
        prev = k;
    }
    g_free(prev);
    return set;
}

static pf_piece *rd_piece(rd *r, size_t end, const pf_part *part)
{
    size_t at = r->pos;
    uint32_t tid = rd_u32(r, end, "piece");
    uint32_t flags = rd_u32(r, end, "piece");
    uint64_t from = rd_u64(r, end, "piece"), to = rd_u64(r, end, "piece");
    uint64_t join_tsc = rd_u64(r, end, "piece"), start_tsc = rd_u64(r, end, "piece");
    uint64_t last_tsc = rd_u64(r, end, "piece");
    uint32_t final = rd_u32(r, end, "piece"), count = rd_u32(r, end, "piece");
    uint32_t nlevels = rd_u32(r, end, "piece");
    uint32_t reserved = rd_u32(r, end, "piece");
    if (r->failed)
        return NULL;
    if (flags & ~255u || reserved) {
        rd_fail(r, at, "piece of thread %u: unknown flags 0x%x", tid, flags);
        return NULL;
    }
    bool relative = flags & 1, started = flags & 2;
    if (relative != (from > 0) || to < from) {
        rd_fail(r, at, "piece of thread %u: bytes %" PRIu64 "..%" PRIu64 " and its start do "
                "not agree", tid, from, to);
        return NULL;
    }
    bool sets = flags & (64 | 128);
    uint64_t fixed = (uint64_t)(count - 1) * NODE_BYTES + (uint64_t)nlevels * LEVEL_BYTES;
    if (count < 1 || nlevels > MAX_LEVELS || (!relative && nlevels) ||
        ((flags & 128) && !relative) || ((flags & 128) && !(flags & 64)) ||
        (sets ? fixed > end - r->pos : fixed != end - r->pos)) {
        rd_fail(r, at, "piece of thread %u: %u nodes and %u levels do not fill its %zu bytes",
                tid, count, nlevels, end - r->pos);
        return NULL;
    }
    if (started ? final == 0 || final >= count : count != 1 || nlevels) {
        rd_fail(r, at, "piece of thread %u: it ends at node %u of %u", tid, final, count);
        return NULL;
    }
    pf_piece *p = pf_piece_new(&part->opts, tid, from, to);
    if (!p) {
        rd_fail(r, at, "out of memory");
        return NULL;
    }
    p->started = started;
    p->join = flags & 4;
    p->join_counted = flags & 8;
    p->has_start_tsc = flags & 16;
    p->timed = flags & 32;
    p->join_tsc = join_tsc;
    p->start_tsc = start_tsc;
    p->last_tsc = last_tsc;
    p->final = (int32_t)final;
    if (nlevels) {
        p->levels = g_new0(pf_level, nlevels);
        p->nlevels = nlevels;
    }
    bool thread_root = false;
    for (uint32_t i = 1; i < count && !r->failed; i++) {
        size_t nat = r->pos;
        uint32_t parent = rd_u32(r, end, "node");
        uint64_t method = rd_u64(r, end, "node");
        int64_t site = (int64_t)rd_u64(r, end, "node");
        pf_node v = { .calls = rd_u64(r, end, "node"), .self_bytecodes = rd_u64(r, end, "node"),
                      .self_bc_events = rd_u64(r, end, "node"),
                      .self_time = rd_u64(r, end, "node") };
        v.kinds = rd_u32(r, end, "node");
        if (r->failed)
            break;
        bool ok = parent < i && v.kinds <= 0x1f;
        if (ok && parent == 0) {
            if (method == PF_NO_METHOD) {
                ok = !thread_root && site == (int64_t)tid;
                thread_root = true;
            } else {
                ok = method == PF_LEVEL_ROOT && site >= 0 && site < (int64_t)nlevels;
            }
        } else if (ok) {
            ok = method < PF_LEVEL_ROOT && site >= -1 && site <= INT32_MAX;
        }
        int32_t n = ok ? pf_cct_child(p->tree, (int32_t)parent, method, site) : -1;
        if (n != (int32_t)i) {
            rd_fail(r, nat, "piece of thread %u: node %u (parent %u, method 0x%" PRIx64
                    ", site %" PRId64 ") is not a node of a calling context tree", tid, i, parent,
                    method, site);
            break;
        }
        pf_node *d = &p->tree->nodes[n];
        d->calls = v.calls;
        d->self_bytecodes = v.self_bytecodes;
        d->self_bc_events = v.self_bc_events;
        d->self_time = v.self_time;
        d->kinds = v.kinds;
    }
    for (uint32_t l = 0; l < nlevels && !r->failed; l++) {
        size_t lat = r->pos;
        pf_level *lv = &p->levels[l];
        lv->claim = rd_u64(r, end, "level");
        lv->claim_flags = rd_u32(r, end, "level");
        lv->claim_bci = (int32_t)rd_u32(r, end, "level");
        if (!rd_need(r, 1, end, "level"))
            break;
        uint8_t outer = r->d[r->pos++];
        lv->run_outer = outer;
        if (outer > 1 || lv->claim == PF_LEVEL_ROOT) {
            rd_fail(r, lat, "piece of thread %u: level %u is malformed", tid, l);
            break;
        }
    }
    if (!r->failed && (flags & 64))
        p->made = rd_class_set(r, end, tid);
    if (!r->failed && (flags & 128))
        p->assumed = rd_class_set(r, end, tid);
    if (r->failed) {
        pf_piece_free(p);
        return NULL;
    }
    return p;
}

/* Whether the pieces tile exactly the plan's pieces of the shards held,
 * each piece a run of whole plan pieces of one thread. */
static bool pieces_valid(rd *r, const pf_part *p)
{
    guint next = 0;
    for (size_t i = 0; i < p->nplan;) {
        const pf_shard_piece *x = &p->plan[i];
        if (!pf_part_has_shard(p, x->shard)) {
            i++;
            continue;
        }
        size_t j = i;      /* the run of held plan pieces of this thread */
        while (j + 1 < p->nplan && p->plan[j + 1].tid == x->tid &&
               pf_part_has_shard(p, p->plan[j + 1].shard))
            j++;
        uint64_t at = x->from;
        size_t k = i;      /* plan piece where the next part piece starts */
        while (at < p->plan[j].to || (at == x->from && k == i)) {
            const pf_piece *c = next < p->pieces->len ? p->pieces->pdata[next] : NULL;
            size_t e = k;
            while (c && e <= j && p->plan[e].to < c->to)
                e++;
            if (!c || c->tid != x->tid || c->from != at || e > j || p->plan[e].to != c->to) {
                rd_fail(r, r->pos, "the pieces do not match its shards: thread %u from byte %"
                        PRIu64 " %s", x->tid, at, c ? "is not where its next piece starts"
                                                      : "has no piece");
                return false;
            }
            next++;
            at = c->to;
            k = e + 1;
            if (k > j)
                break;
        }
        i = j + 1;
    }
    if (next != p->pieces->len) {
        rd_fail(r, r->pos, "it holds %u pieces, its shards %u", p->pieces->len, next);
        return false;
    }
    return true;
}

/* The sections up to the end record, and its checksum over all before:
 * where the end record starts (0 when r failed). */
static size_t find_end(rd *r, size_t head)
{
    const size_t len = r->len;
    size_t s = head;
    while (!r->failed) {
        if (len - s < 16) {
            rd_fail(r, s, "cut short: no end record (the file is incomplete)");
            break;
        }
        r->pos = s;
        uint32_t kind = rd_u32(r, len, "section");
        rd_u32(r, len, "section");
        uint64_t size = rd_u64(r, len, "section");
        if (size > len - r->pos) {
            rd_fail(r, s, "section of %" PRIu64 " bytes runs past the end of the file "
                    "(%zu bytes): cut short", size, len);
            break;
        }
        if (kind == SEC_END) {
            if (size != 4 || r->pos + 4 != len) {
                rd_fail(r, s, "malformed end record");
                break;
            }
            uint32_t want = rd_u32(r, len, "end");
            if ((uint32_t)crc32(0L, (const Bytef *)r->d, (uInt)s) != want) {
                rd_fail(r, s, "checksum mismatch: the file is damaged");
                break;
            }
            return s;
        }
        s = r->pos + (size_t)size;
    }
    return 0;
}

/* The fixed header after the magic and the version: shards, flags, the
 * included origins, the TSC frequency and the trace's and plan's ids. */
static void rd_header(rd *r, pf_part *p, size_t head)
{
    r->pos = 12;
    p->shards = rd_u32(r, head, "header");
    uint32_t flags = rd_u32(r, head, "header"), inc = rd_u32(r, head, "header");
    uint64_t hz = rd_u64(r, head, "header");
    memcpy(&p->tb.hz, &hz, sizeof hz);
    memcpy(p->trace_id, r->d + r->pos, 32);
    memcpy(p->plan_id, r->d + r->pos + 32, 32);
    if (p->shards < 1 || p->shards > PF_SHARD_MAX || flags & ~3u || inc & ~7u ||
        !(p->tb.hz >= 0 && p->tb.hz < 1e12))
        rd_fail(r, 12, "malformed header (shards %u, flags 0x%x, origins 0x%x)", p->shards,
                flags, inc);
    p->whole_threads = flags & 1;
    p->opts.call_sites = flags & 2;
    for (int i = 0; i < FL_ORIGIN_COUNT; i++)
        p->opts.include[i] = inc & (1u << i);
}

static void rd_shards(rd *r, pf_part *p, size_t s, size_t body, size_t size)
{
    size_t n = (p->shards + 7) / 8;
    if (size != n) {
        rd_fail(r, s, "shard set of %zu bytes for %u shards", size, p->shards);
        return;
    }
    p->have = g_memdup2(r->d + body, n);
    r->pos += n;
    if (p->shards % 8 && p->have[n - 1] >> (p->shards % 8))
        rd_fail(r, body, "shard set names shards past %u", p->shards - 1);
    else if (!pf_part_shard_count(p))
        rd_fail(r, body, "it holds no shard");
}

static void rd_timebase(rd *r, pf_part *p, size_t body, size_t send)
{
    uint32_t emulated = rd_u32(r, send, "timebase");
    char *src = rd_str(r, send, "timebase source");
    if (!r->failed && (emulated > 1 || strlen(src) >= sizeof p->tb.source))
        rd_fail(r, body, "malformed timebase");
    else if (!r->failed)
        snprintf(p->tb.source, sizeof p->tb.source, "%s", src);
    p->tb.emulated = emulated;
    g_free(src);
}

static void rd_plan(rd *r, pf_part *p, size_t body, size_t size, size_t send)
{
    uint32_t n = rd_u32(r, send, "plan");
    if (!r->failed && (uint64_t)n * 24 != send - r->pos) {
        rd_fail(r, body, "plan of %u pieces in %zu bytes", n, size);
        return;
    }
    p->nplan = n;
    p->plan = g_new0(pf_shard_piece, n ? n : 1);
    for (uint32_t i = 0; i < n; i++) {
        p->plan[i].shard = rd_u32(r, send, "plan");
        p->plan[i].tid = rd_u32(r, send, "plan");
        p->plan[i].from = rd_u64(r, send, "plan");
        p->plan[i].to = rd_u64(r, send, "plan");
    }
    if (!r->failed)
        plan_valid(r, body, p);
}

static void rd_methods(rd *r, pf_part *p, size_t send)
{
    uint32_t n = rd_u32(r, send, "methods");
    for (uint32_t i = 0; i < n && !r->failed; i++) {
        size_t mat = r->pos;
        uint64_t id = rd_u64(r, send, "method");
        uint32_t mod = rd_u32(r, send, "method");
        char *k = rd_str(r, send, "method class"), *nm = rd_str(r, send, "method name");
        char *sig = rd_str(r, send, "method signature");
        if (!r->failed && (id >= PF_LEVEL_ROOT || g_hash_table_contains(p->methods, &id)))
            rd_fail(r, mat, "method 0x%" PRIx64 " is named twice", id);
        if (!r->failed)
            pf_part_add_method(p, id, mod, k, nm, sig);
        g_free(k);
        g_free(nm);
        g_free(sig);
    }
}

static void rd_threads(rd *r, pf_part *p, size_t send)
{
    uint32_t n = rd_u32(r, send, "threads");
    for (uint32_t i = 0; i < n && !r->failed; i++) {
        uint32_t tid = rd_u32(r, send, "thread");
        char *name = rd_str(r, send, "thread name");
        if (!r->failed)
            g_hash_table_insert(p->threads, GUINT_TO_POINTER(tid), name);
        else
            g_free(name);
    }
}

/* A piece, after the one before it (by thread, then bytes). */
static void rd_next_piece(rd *r, pf_part *p, size_t s, size_t send)
{
    pf_piece *c = rd_piece(r, send, p);
    if (!c)
        return;
    const pf_piece *prev = p->pieces->len ? p->pieces->pdata[p->pieces->len - 1] : NULL;
    if (prev && (prev->tid > c->tid || (prev->tid == c->tid && prev->to > c->from)))
        rd_fail(r, s, "pieces out of order (thread %u at byte %" PRIu64 ")", c->tid, c->from);
    g_ptr_array_add(p->pieces, c);
}

static void rd_stats(rd *r, pf_part *p, size_t body, size_t send)
{
    uint32_t n = rd_u32(r, send, "stats");
    uint64_t *sv = (uint64_t *)&p->st;
    if (!r->failed && n != sizeof p->st / sizeof *sv) {
        rd_fail(r, body, "%u counts, version %u has %zu", n, PF_PART_VERSION,
                sizeof p->st / sizeof *sv);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        sv[i] = rd_u64(r, send, "stats");
}

/* The sections from head to the end record at end_at, each once (pieces
 * aside), the shards first; those every file has must be there. */
static void rd_sections(rd *r, pf_part *p, size_t head, size_t end_at)
{
    unsigned seen = 0;
    for (size_t s = head; !r->failed && s < end_at;) {
        r->pos = s;
        uint32_t kind = rd_u32(r, end_at, "section");
        rd_u32(r, end_at, "section");
        size_t size = (size_t)rd_u64(r, end_at, "section");
        size_t body = r->pos, send = body + size;
        if (kind != SEC_PIECE && kind < 32 && (seen & (1u << kind))) {
            rd_fail(r, s, "section %u appears twice", kind);
            break;
        }
        if (kind < 32)
            seen |= 1u << kind;
        if (kind != SEC_SHARDS && kind != SEC_TITLE && !(seen & (1u << SEC_SHARDS))) {
            rd_fail(r, s, "section %u before the shards it holds", kind);
            break;
        }
        switch (kind) {
        case SEC_SHARDS: rd_shards(r, p, s, body, size); break;
        case SEC_TITLE: p->title = rd_str(r, send, "title"); break;
        case SEC_TIMEBASE: rd_timebase(r, p, body, send); break;
        case SEC_PLAN: rd_plan(r, p, body, size, send); break;
        case SEC_METHODS: rd_methods(r, p, send); break;
        case SEC_THREADS: rd_threads(r, p, send); break;
        case SEC_PIECE: rd_next_piece(r, p, s, send); break;
        case SEC_STATS: rd_stats(r, p, body, send); break;
        default: rd_fail(r, s, "unknown section kind %u", kind); break;
        }
        if (!r->failed && r->pos != send)
            rd_fail(r, r->pos, "section %u has %zu bytes left over", kind, send - r->pos);
        s = send;
    }
    const unsigned need = 1u << SEC_SHARDS | 1u << SEC_TITLE | 1u << SEC_PLAN | 1u << SEC_TIMEBASE |
                          1u << SEC_METHODS | 1u << SEC_THREADS | 1u << SEC_STATS;
    if (!r->failed && (seen & need) != need)
        rd_fail(r, end_at, "sections missing (it has 0x%x of 0x%x)", seen & need, need);
}

pf_part *pf_part_read(const char *path, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t len = 0;
    if (jpt_read_small_file(path, (size_t)1 << 40, &buf, &len, err, errlen) < 0)
        return NULL;
    rd r = { (const uint8_t *)buf, len, 0, path, err, errlen, false };
    const size_t head = 8 + 4 * 4 + 8 + 64;
    if (len < 8 || memcmp(buf, part_magic, 8)) {
        rd_fail(&r, 0, "not a jpt partial result ('ptdecode shard' writes them)");
        free(buf);
        return NULL;
    }
    r.pos = 8;
    uint32_t version = rd_u32(&r, len, "header");
    if (!r.failed && version != PF_PART_VERSION) {
        rd_fail(&r, 8, "partial-result format version %u; this ptdecode reads version %u",
                version, PF_PART_VERSION);
        free(buf);
        return NULL;
    }
    if (len < head) {
        rd_fail(&r, len, "the header is cut short (%zu of %zu bytes)", len, head);
        free(buf);
        return NULL;
    }
    size_t end_at = find_end(&r, head);
    if (r.failed) {
        free(buf);
        return NULL;
    }
    pf_part *p = pf_part_new();
    rd_header(&r, p, head);
    rd_sections(&r, p, head, end_at);
    if (!r.failed)
        pieces_valid(&r, p);
    free(buf);
    if (r.failed) {
        pf_part_free(p);
        return NULL;
    }
    return p;
}
