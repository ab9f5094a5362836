#include "decoder/model.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <capstone/capstone.h>
#include <glib.h>

#include "common/jmrec.h"
#include "decoder/bytecodes.h"
#include "decoder/classfile.h"
#include "decoder/x86.h"

/* qsort, which must not be given a NULL array even when it is empty. */
static void sort_n(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

#define JVM_ACC_STATIC 0x0008     /* a method's access flag (JVMS 4.6) */
#define MAX_WARNINGS 50
#define MAX_CODE_SIZE (1ull << 30)    /* one code record above 1 GiB is corrupt */
#define MAX_DESC 512

static const char *const kind_names[DM_CL_KIND_COUNT] = {
    "bytecode", "method-entry", "return", "earlyret", "deopt", "exception", "throw",
    "safepoint", "native", "other",
};

const char *dm_codelet_kind_name(dm_codelet_kind k)
{
    return (unsigned)k < DM_CL_KIND_COUNT ? kind_names[k] : "?";
}

static void warn(dm_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(dm_model *m, const char *fmt, ...)
{
    m->warnings_total++;
    if (m->nwarnings >= MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    m->warnings[m->nwarnings++] = g_strdup_vprintf(fmt, ap);
    va_end(ap);
}

/* Descriptions come from JVM memory: keep them printable and short. */
static char *clean_str(jm_slice s)
{
    size_t n = s.len < MAX_DESC ? s.len : MAX_DESC;
    char *out = g_malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s.p[i];
        out[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    out[n] = '\0';
    return out;
}

static dm_codelet_kind classify(const char *desc, int32_t bytecode, int nops)
{
    if (nops > 0 || bytecode >= 0)
        return DM_CL_BYTECODE;
    static const struct { const char *prefix; dm_codelet_kind kind; } table[] = {
        { "method entry point", DM_CL_METHOD_ENTRY },
        { "invoke return entry points", DM_CL_RETURN },
        { "return entry points", DM_CL_RETURN },
        { "earlyret entry points", DM_CL_EARLYRET },
        { "deoptimization entry points", DM_CL_DEOPT },
        { "exception handling", DM_CL_EXCEPTION },
        { "throw exception entrypoints", DM_CL_THROW },
        { "safepoint entry points", DM_CL_SAFEPOINT },
        { "result handlers for native calls", DM_CL_NATIVE },
        { "slow signature handler", DM_CL_NATIVE },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strncmp(desc, table[i].prefix, strlen(table[i].prefix)))
            return table[i].kind;
    return DM_CL_OTHER;
}

/* ---- loading ---------------------------------------------------------------- */

typedef struct unload_rec {
    uint64_t tsc, seq, method_id, vaddr, offset;
} unload_rec;

typedef struct loader {
    dm_model *m;
    const char *path;          /* meta.jpt, for messages */
    GArray *codelets, *codes, *blobs, *patches, *methods, *threads, *unloads;
    GArray *pcs, *frames;
    GArray *code_seq;          /* per code: record sequence number, for stable order */
    GHashTable *class_files;   /* class id -> jm_slice *: its class file, in the metadata */
    uint64_t seq;
} loader;

static bool code_ok(loader *L, const jm_record *rec, const jm_code *k)
{
    const char *what = NULL;
    if (k->size == 0)
        what = "empty code range";
    else if (k->size > MAX_CODE_SIZE)
        what = "code size above 1 GiB";
    else if (k->vaddr + k->size < k->vaddr)
        what = "code range wraps the address space";
    else if (k->code_offset > L->m->code_size || k->size > L->m->code_size - k->code_offset)
        what = "code bytes lie beyond the end of code.bin";
    if (!what)
        return true;
    warn(L->m, "%s: offset %" PRIu64 ": %s record: %s (vaddr 0x%" PRIx64 ", size %" PRIu64
         ", code offset %" PRIu64 ", code.bin has %" PRIu64 " bytes); record ignored",
         L->path, rec->offset, jm_type_name(rec->type), what, k->vaddr, k->size,
         k->code_offset, L->m->code_size);
    return false;
}

static int cmp_pcrec(const void *a, const void *b)
{
    const dm_pcrec *x = a, *y = b;
    if (x->pc != y->pc)
        return x->pc < y->pc ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

static void add_nmethod(loader *L, const jm_record *rec, const jm_rec *r)
{
    const jm_code *k = &r->u.nmethod_load.code;
    if (!code_ok(L, rec, k))
        return;
    dm_code c = { .kind = DM_CODE_NMETHOD, .vaddr = k->vaddr, .size = k->size,
                  .code_offset = k->code_offset, .load_tsc = rec->tsc,
                  .end_tsc = DM_TSC_NEVER, .method_id = r->u.nmethod_load.method_id,
                  .level = r->u.nmethod_load.level, .first_pc = L->pcs->len };
    jm_pcs it = r->u.nmethod_load.pcs;
    dm_frame frames[DM_MAX_FRAMES];
    jm_frame raw[DM_MAX_FRAMES];
    uint64_t pc;
    uint32_t depth;
    int rc;
    bool deep = false, outside = false;
    while ((rc = jm_pcs_next(&it, &pc, &depth, raw, DM_MAX_FRAMES)) == 1) {
        uint32_t keep = depth < DM_MAX_FRAMES ? depth : DM_MAX_FRAMES;
        deep |= depth > DM_MAX_FRAMES;
        /* A record's pc is the end of the code it describes: it may equal
         * the version's end, never lie outside it. */
        if (pc <= k->vaddr || pc > k->vaddr + k->size) {
            outside = true;
            continue;
        }
        for (uint32_t i = 0; i < keep; i++) {
            frames[i].method_id = raw[i].method_id;
            frames[i].bci = raw[i].bci;
        }
        dm_pcrec p = { .pc = pc, .first = L->frames->len, .depth = keep };
        g_array_append_vals(L->frames, frames, keep);
        g_array_append_val(L->pcs, p);
    }
    if (rc < 0)
        warn(L->m, "%s: offset %" PRIu64 ": NMETHOD_LOAD pc table is malformed; the "
             "records before the bad one are kept", L->path, rec->offset);
    if (deep)
        warn(L->m, "%s: offset %" PRIu64 ": inline stack deeper than %d frames; outer "
             "frames dropped", L->path, rec->offset, DM_MAX_FRAMES);
    if (outside)
        warn(L->m, "%s: offset %" PRIu64 ": pc records outside the method's code "
             "[0x%" PRIx64 ", 0x%" PRIx64 "] ignored", L->path, rec->offset, k->vaddr,
             k->vaddr + k->size);
    c.npcs = L->pcs->len - c.first_pc;
    dm_pcrec *mine = &g_array_index(L->pcs, dm_pcrec, c.first_pc);
    sort_n(mine, c.npcs, sizeof *mine, cmp_pcrec);
    /* HotSpot's pcs strictly increase; keep the first of equal ones. */
    uint32_t w = 0;
    for (uint32_t i = 0; i < c.npcs; i++)
        if (w == 0 || mine[w - 1].pc != mine[i].pc)
            mine[w++] = mine[i];
    g_array_set_size(L->pcs, c.first_pc + w);
    c.npcs = w;
    g_array_append_val(L->codes, c);
    g_array_append_val(L->code_seq, L->seq);
}

static void add_record(loader *L, const jm_record *rec)
{
    dm_model *m = L->m;
    jm_rec r;
    char err[256];
    if (jm_parse(rec, &r, err, sizeof err) < 0) {
        warn(m, "%s: %s (%s record ignored)", L->path, err, jm_type_name(rec->type));
        return;
    }
    if (rec->type != JM_END && rec->type < JM_TYPE_LIMIT) {
        if (!m->first_tsc || rec->tsc < m->first_tsc)
            m->first_tsc = rec->tsc;
        if (rec->tsc > m->last_tsc)
            m->last_tsc = rec->tsc;
    }
    switch (rec->type) {
    case JM_STATS: {
        jm_cur c = r.u.stats.items;
        uint32_t left = r.u.stats.n;
        jm_slice name;
        uint64_t v;
        while (jm_stats_next(&c, &left, &name, &v) == 1)
            if (name.len == 17 && !memcmp(name.p, "patch_close_scans", 17))
                m->close_scans = v;
        break;
    }
    case JM_CODE_CACHE:
        m->cc_low = r.u.code_cache.low;
        m->cc_high = r.u.code_cache.high;
        break;
    case JM_CODELET: {
        dm_codelet c = { .begin = r.u.codelet.begin, .end = r.u.codelet.end,
                         .bytecode = r.u.codelet.bytecode };
        if (c.end <= c.begin || c.end - c.begin > MAX_CODE_SIZE) {
            warn(m, "%s: offset %" PRIu64 ": CODELET range [0x%" PRIx64 ", 0x%" PRIx64
                 ") is empty or implausible; ignored", L->path, rec->offset, c.begin, c.end);
            break;
        }
        c.desc = clean_str(r.u.codelet.description);
        c.nops = (uint8_t)bc_std_ops(c.desc, c.bytecode, c.ops);
        c.kind = classify(c.desc, c.bytecode, c.nops);
        g_array_append_val(L->codelets, c);
        break;
    }
    case JM_CODE_BLOB: {
        const jm_code *k = &r.u.blob.code;
        if (!code_ok(L, rec, k))
            break;
        dm_blob b = { .vaddr = k->vaddr, .size = k->size, .code_offset = k->code_offset,
                      .tsc = rec->tsc, .kind = r.u.blob.kind,
                      .name = clean_str(r.u.blob.name) };
        g_array_append_val(L->blobs, b);
        break;
    }
    case JM_NMETHOD_LOAD:
        add_nmethod(L, rec, &r);
        break;
    case JM_NMETHOD_UNLOAD: {
        unload_rec u = { .tsc = rec->tsc, .seq = L->seq, .method_id = r.u.nmethod_unload.method_id,
                         .vaddr = r.u.nmethod_unload.vaddr, .offset = rec->offset };
        g_array_append_val(L->unloads, u);
        break;
    }
    case JM_DYNAMIC_CODE: {
        const jm_code *k = &r.u.dynamic_code.code;
        if (!code_ok(L, rec, k))
            break;
        dm_code c = { .kind = DM_CODE_STUB, .vaddr = k->vaddr, .size = k->size,
                      .code_offset = k->code_offset, .load_tsc = rec->tsc,
                      .end_tsc = DM_TSC_NEVER, .level = -1,
                      .name = clean_str(r.u.dynamic_code.name) };
        g_array_append_val(L->codes, c);
        g_array_append_val(L->code_seq, L->seq);
        break;
    }
    case JM_CODE_PATCH: {
        const jm_code *k = &r.u.patch.code;
        if (!code_ok(L, rec, k))
            break;
        dm_patch p = { .vaddr = k->vaddr, .size = k->size, .code_offset = k->code_offset,
                       .tsc = rec->tsc, .start_tsc = rec->tsc, .owner = -1 };
        g_array_append_val(L->patches, p);
        break;
    }
    case JM_METHOD: {
        dm_method mt = { .id = r.u.method.method_id, .class_id = r.u.method.class_id,
                         .class_sig = clean_str(r.u.method.class_sig),
                         .name = clean_str(r.u.method.name), .sig = clean_str(r.u.method.sig),
                         .is_static = (r.u.method.modifiers & JVM_ACC_STATIC) != 0 };
        g_array_append_val(L->methods, mt);
        break;
    }
    case JM_CLASS_FILE: {
        /* the last one wins, as for methods: a redefinition */
        jm_slice *b = g_new(jm_slice, 1);
        *b = r.u.class_file.bytes;
        g_hash_table_insert(L->class_files, g_memdup2(&r.u.class_file.class_id, sizeof(uint64_t)),
                            b);
        break;
    }
    case JM_THREAD_START: {
        dm_thread t = { .tid = r.u.thread.native_tid, .java_tid = r.u.thread.java_tid,
                        .name = clean_str(r.u.thread.name), .start_tsc = rec->tsc,
                        .end_tsc = DM_TSC_NEVER };
        g_array_append_val(L->threads, t);
        break;
    }
    case JM_THREAD_END:
        for (guint i = L->threads->len; i-- > 0;) {
            dm_thread *t = &g_array_index(L->threads, dm_thread, i);
            if (t->tid == r.u.thread.native_tid && t->end_tsc == DM_TSC_NEVER) {
                t->end_tsc = rec->tsc;
                break;
            }
        }
        break;
    default:
        break;
    }
}

/* Code versions in record-time order (ties: file order). */
typedef struct order_ent {
    uint64_t tsc, seq;
    uint32_t idx;
} order_ent;

static int cmp_order(const void *a, const void *b)
{
    const order_ent *x = a, *y = b;
    if (x->tsc != y->tsc)
        return x->tsc < y->tsc ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_unload(const void *a, const void *b)
{
    const unload_rec *x = a, *y = b;
    if (x->tsc != y->tsc)
        return x->tsc < y->tsc ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Rank of each code in load order. */
static uint32_t *load_rank(loader *L)
{
    size_t n = L->codes->len;
    order_ent *o = g_new(order_ent, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        o[i].tsc = g_array_index(L->codes, dm_code, i).load_tsc;
        o[i].seq = g_array_index(L->code_seq, uint64_t, i);
        o[i].idx = (uint32_t)i;
    }
    sort_n(o, n, sizeof *o, cmp_order);
    uint32_t *rank = g_new(uint32_t, n ? n : 1);
    for (size_t i = 0; i < n; i++)
        rank[o[i].idx] = (uint32_t)i;
    g_free(o);
    return rank;
}

/* Matches each NMETHOD_UNLOAD with the version it ends. */
static void apply_unloads(loader *L, const uint32_t *rank)
{
    dm_model *m = L->m;
    dm_code *codes = (dm_code *)(void *)L->codes->data;
    GHashTable *by_vaddr = g_hash_table_new(g_int64_hash, g_int64_equal);
    /* vaddr -> list of nmethod indices (in load order: prepend then reverse) */
    GPtrArray *lists = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint i = 0; i < L->codes->len; i++) {
        if (codes[i].kind != DM_CODE_NMETHOD)
            continue;
        GArray *list = g_hash_table_lookup(by_vaddr, &codes[i].vaddr);
        if (!list) {
            list = g_array_new(FALSE, FALSE, sizeof(uint32_t));
            g_ptr_array_add(lists, list);
            g_hash_table_insert(by_vaddr, &codes[i].vaddr, list);
        }
        uint32_t idx = i;
        g_array_append_val(list, idx);
    }
    unload_rec *u = (unload_rec *)(void *)L->unloads->data;
    sort_n(u, L->unloads->len, sizeof *u, cmp_unload);
    for (guint k = 0; k < L->unloads->len; k++) {
        GArray *list = g_hash_table_lookup(by_vaddr, &u[k].vaddr);
        int64_t best = -1, fallback = -1;
        for (guint j = 0; list && j < list->len; j++) {
            uint32_t i = g_array_index(list, uint32_t, j);
            dm_code *c = &codes[i];
            if (c->end_tsc != DM_TSC_NEVER)
                continue;
            if (c->method_id == u[k].method_id && c->load_tsc <= u[k].tsc) {
                if (best < 0 || rank[i] > rank[best])
                    best = i;
            } else if (fallback < 0 || rank[i] > rank[fallback]) {
                fallback = i;
            }
        }
        if (best < 0 && fallback >= 0) {
            warn(m, "%s: offset %" PRIu64 ": NMETHOD_UNLOAD of 0x%" PRIx64 " matches no "
                 "load of that method before it; ending the latest version there",
                 L->path, u[k].offset, u[k].vaddr);
            best = fallback;
        }
        if (best < 0) {
            warn(m, "%s: offset %" PRIu64 ": NMETHOD_UNLOAD of 0x%" PRIx64 " names no "
                 "loaded code; ignored", L->path, u[k].offset, u[k].vaddr);
            continue;
        }
        codes[best].end_tsc = u[k].tsc > codes[best].load_tsc ? u[k].tsc : codes[best].load_tsc;
    }
    g_hash_table_destroy(by_vaddr);
    g_ptr_array_free(lists, TRUE);
}

static int cmp_code_vaddr(const void *a, const void *b)
{
    const dm_code *x = a, *y = b;
    if (x->vaddr != y->vaddr)
        return x->vaddr < y->vaddr ? -1 : 1;
    if (x->start_tsc != y->start_tsc)
        return x->start_tsc < y->start_tsc ? -1 : 1;
    return x->load_tsc < y->load_tsc ? -1 : x->load_tsc > y->load_tsc;
}

/* Effective start of every version: see model.h. Processes versions in load
 * order, looking at the earlier-loaded versions that share a byte. */
static void effective_starts(loader *L, const uint32_t *rank)
{
    size_t n = L->codes->len;
    dm_code *codes = (dm_code *)(void *)L->codes->data;
    if (!n)
        return;
    /* Indices sorted by vaddr, with a running max of the end address so the
     * backward scan for overlaps stops early. */
    uint32_t *byaddr = g_new(uint32_t, n);
    order_ent *o = g_new(order_ent, n);
    for (size_t i = 0; i < n; i++) {
        o[i].tsc = codes[i].vaddr;
        o[i].seq = rank[i];
        o[i].idx = (uint32_t)i;
    }
    sort_n(o, n, sizeof *o, cmp_order);
    uint64_t *maxend = g_new(uint64_t, n);
    for (size_t i = 0; i < n; i++) {
        byaddr[i] = o[i].idx;
        uint64_t end = codes[byaddr[i]].vaddr + codes[byaddr[i]].size;
        maxend[i] = i && maxend[i - 1] > end ? maxend[i - 1] : end;
    }
    uint32_t *inorder = g_new(uint32_t, n);
    for (size_t i = 0; i < n; i++)
        inorder[rank[i]] = (uint32_t)i;
    size_t conflicts = 0;
    for (size_t r = 0; r < n; r++) {
        dm_code *v = &codes[inorder[r]];
        uint64_t vend = v->vaddr + v->size, start = 0;
        /* last position with vaddr < vend */
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (codes[byaddr[mid]].vaddr < vend)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t p = lo; p-- > 0 && maxend[p] > v->vaddr;) {
            uint32_t j = byaddr[p];
            dm_code *e = &codes[j];
            if (rank[j] >= r || e->vaddr + e->size <= v->vaddr)
                continue;
            if (e->end_tsc <= v->load_tsc) {
                if (e->end_tsc > start)
                    start = e->end_tsc;
            } else {
                /* Still valid when v arrived: its unload went unrecorded (or
                 * the same code was reported twice). v replaces it from v's
                 * own record on. */
                e->end_tsc = v->load_tsc;
                if (v->load_tsc > start)
                    start = v->load_tsc;
                conflicts++;
            }
        }
        v->start_tsc = start;
    }
    if (conflicts)
        warn(L->m, "%s: %zu code records overlap code that was still loaded; the older "
             "versions end where the newer ones were recorded", L->path, conflicts);
    g_free(inorder);
    g_free(maxend);
    g_free(o);
    g_free(byaddr);
}

static int cmp_codelet(const void *a, const void *b)
{
    const dm_codelet *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int cmp_blob(const void *a, const void *b)
{
    const dm_blob *x = a, *y = b;
    return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

static int cmp_patch(const void *a, const void *b)
{
    const dm_patch *x = a, *y = b;
    if (x->start_tsc != y->start_tsc)
        return x->start_tsc < y->start_tsc ? -1 : 1;
    return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

static bool all_zero(const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* The bytes a patch replaced, as first recorded (the version's or the
 * blob's snapshot), or NULL if they are not all known. */
static const uint8_t *base_bytes(const dm_model *m, const dm_patch *p, const uint8_t *code)
{
    uint64_t vaddr, size, off;
    if (p->owner >= 0) {
        const dm_code *c = &m->codes[p->owner];
        vaddr = c->vaddr, size = c->size, off = c->code_offset;
    } else {
        const dm_blob *b = dm_blob_at(m, p->vaddr);
        if (!b)
            return NULL;
        vaddr = b->vaddr, size = b->size, off = b->code_offset;
    }
    if (p->vaddr < vaddr || p->size > size || p->vaddr - vaddr > size - p->size)
        return NULL;
    return code + off + (p->vaddr - vaddr);
}

static void find_call_sites(dm_model *m, const uint8_t *code);
static void make_up_site_states(dm_model *m, const uint8_t *code, GHashTable *class_files);

static bool is_cond_branch_opcode(int op)
{
    return (op >= 0x99 && op <= 0xa6) || op == 0xc6 || op == 0xc7;  /* if*, ifnull, ifnonnull */
}

enum { OP_INVOKEINTERFACE = 0xb9 };

/* See dm_codelet.itable_loop: the first direct jne of the template that
 * jumps back within it is the scan loop's; the instruction just before its
 * head must be the peeled jcc (HotSpot's lookup_interface_method). */
static void find_itable_scan(csh cs, cs_insn *insn, dm_codelet *c, const uint8_t *code)
{
    const uint8_t *p = code;
    size_t avail = c->end - c->begin;
    uint64_t addr = c->begin, head = 0;
    while (!head && avail && cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
        int64_t disp = 0;
        int direct = 0;
        bool jne = insn->bytes[0] == 0x75 || (insn->size >= 2 && insn->bytes[0] == 0x0f &&
                                              insn->bytes[1] == 0x85);
        if (jne && x86_classify(insn->bytes, insn->size, &disp, &direct) == X_COND && direct &&
            disp < 0 && addr + (uint64_t)disp >= c->begin)
            head = addr + (uint64_t)disp;   /* addr: after the instruction */
    }
    if (!head)
        return;
    p = code;
    avail = c->end - c->begin;
    addr = c->begin;
    while (avail && cs_disasm_iter(cs, &p, &avail, &addr, insn) && addr <= head) {
        int64_t disp = 0;
        int direct = 0;
        if (addr == head && x86_classify(insn->bytes, insn->size, &disp, &direct) == X_COND &&
            direct) {
            c->itable_first = insn->address;
            c->itable_loop = head;
        }
    }
}

/* See dm_codelet.not_taken (the target of the first conditional jump of
 * the template that goes forward within it) and dm_codelet.itable_loop.
 * The codelet's bytes are those of the blob snapshot that holds it (the
 * interpreter is generated at start-up and never changes). */
static void find_branch_exits(dm_model *m, const uint8_t *code)
{
    csh cs;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
        return;
    cs_insn *insn = cs_malloc(cs);
    for (size_t i = 0; i < m->ncodelets; i++) {
        dm_codelet *c = &m->codelets[i];
        if (c->kind != DM_CL_BYTECODE || c->nops != 1 ||
            !(is_cond_branch_opcode(c->ops[0]) || c->ops[0] == OP_INVOKEINTERFACE))
            continue;
        const dm_blob *b = dm_blob_at(m, c->begin);
        if (!b || c->end > b->vaddr + b->size || c->end <= c->begin ||
            b->code_offset + b->size > m->code_size)
            continue;
        const uint8_t *p = code + b->code_offset + (c->begin - b->vaddr);
        if (c->ops[0] == OP_INVOKEINTERFACE) {
            find_itable_scan(cs, insn, c, p);
            continue;
        }
        size_t avail = c->end - c->begin;
        uint64_t addr = c->begin;
        while (avail && cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
            int64_t disp = 0;
            int direct = 0;
            if (x86_classify(insn->bytes, insn->size, &disp, &direct) != X_COND || !direct)
                continue;
            uint64_t target = addr + (uint64_t)disp;   /* addr: after the instruction */
            if (disp > 0 && target < c->end)
                c->not_taken = target;
            break;
        }
    }
    cs_free(insn, 1);
    cs_close(&cs);
}

static void start_at_stub_fill(dm_model *m);
static void start_at_new_version(dm_model *m, const uint8_t *code);
static void start_at_callee_code(dm_model *m);

/* See model.h: patches over zeros apply from the start of their owner;
 * call-site resolutions are marked. */
static void classify_patches(dm_model *m, GHashTable *class_files)
{
    if ((!m->npatches && !m->ncodelets) || !m->code_size)
        return;
    int fd = open(m->code_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    void *map = mmap(NULL, m->code_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return;
    const uint8_t *code = map;
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        const uint8_t *base = base_bytes(m, p, code);
        if (!base || !all_zero(base, p->size))
            continue;
        /* An earlier patch over the same bytes changed them first. */
        bool earlier = false;
        for (size_t j = 0; j < i && !earlier; j++)
            earlier = m->patches[j].vaddr < p->vaddr + p->size &&
                      p->vaddr < m->patches[j].vaddr + m->patches[j].size;
        if (!earlier)
            p->start_tsc = p->owner >= 0 ? m->codes[p->owner].start_tsc : 0;
    }
    sort_n(m->patches, m->npatches, sizeof(dm_patch), cmp_patch);
    find_call_sites(m, code);
    start_at_stub_fill(m);
    start_at_new_version(m, code);
    start_at_callee_code(m);
    make_up_site_states(m, code, class_files);
    find_branch_exits(m, code);
    munmap(map, m->code_size);
}

/* Whether a call to addr at time tsc went to one of HotSpot's call
 * resolution stubs: their runtime call always patches the calling site
 * before it returns. Other stubs a call may reach do not say when the site
 * changes: inline-cache stubs are retired at a safepoint, and a c2i adapter
 * fixes its caller only once the callee has compiled code. JDK 17 names
 * them "resolve_static_call" and so on, JDK 25 "Shared Runtime
 * resolve_static_call_blob". */
static bool is_resolve_stub_at(const dm_model *m, uint64_t addr, uint64_t tsc)
{
    static const char *const names[] = {
        "resolve_static_call", "resolve_virtual_call", "resolve_opt_virtual_call",
    };
    const dm_code *c = dm_code_at(m, addr, tsc);
    if (!c || c->kind != DM_CODE_STUB || !c->name)
        return false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strstr(c->name, names[i]))
            return true;
    return false;
}

/* The same for the resolvers of calls that have a static call stub (static
 * and opt-virtual calls; a virtual call's site holds an inline cache). */
static bool is_stub_call_resolver_at(const dm_model *m, uint64_t addr, uint64_t tsc)
{
    const dm_code *c = dm_code_at(m, addr, tsc);
    return c && c->kind == DM_CODE_STUB && c->name &&
           (strstr(c->name, "resolve_static_call") || strstr(c->name, "resolve_opt_virtual_call"));
}

/* The resolver of inline-cache (virtual) call sites. */
static bool is_virtual_call_resolver_at(const dm_model *m, uint64_t addr, uint64_t tsc)
{
    const dm_code *c = dm_code_at(m, addr, tsc);
    return c && c->kind == DM_CODE_STUB && c->name && strstr(c->name, "resolve_virtual_call");
}

/* See model.h: patches that resolve call sites. The bytes a patch replaced
 * are its owner's snapshot with the earlier patches of the same owner laid
 * over it (a site may be patched more than once: resolve stub, then c2i
 * adapter, then the compiled callee). An inline-cache site is `movabs rax,
 * imm64; call`: its resolution rewrites the cached value and the call
 * together, so the changed bytes may also cover the immediate.
 *
 * The watcher records, per scan, one patch per run of nearby changed bytes,
 * so a patch may hold several sites resolved between two scans, or a site
 * and some other change. Such a patch is cut into pieces: one per resolved
 * site (its call's rel32, with the immediate before it for an inline-cache
 * site), each applied when the thread goes through that site's resolver,
 * and the other runs of changed bytes, applied at the record time (or
 * ahead of it like any patch: a static call stub's fill with the call
 * resolved to it, a retry, image.c and decode.c). A call re-pointed from
 * one callee to another is a piece of its own too where the patch holds
 * another call: two neighbouring sites re-pointed at a new version of their
 * callees are re-pointed when each callee's version comes, which may be far
 * apart, and one scan records both (measured: a site of a C1 caller applied
 * 4.8M ticks early with its neighbour's re-pointing, luindex on JDK 25). */
#define SITE_BEFORE 10       /* a movabs whose immediate a patch starts in */
#define SITE_AFTER 4         /* a call whose rel32 a patch ends in */
#define MAX_SITES 64         /* resolved sites looked for in one patch (more: left in the rest) */
#define MAX_SITE_PATCH 65536 /* bigger patches are not searched (a refilled blob area) */

typedef struct site_change {
    uint64_t call, from, to;     /* the call instruction, its old and new target */
    uint64_t lo, hi;             /* the bytes that resolve it: [lo, hi) */
    bool resolves;               /* from a resolve stub; else re-pointed (call_to) */
} site_change;

/* Patch indices by owner, in time order within an owner: the patches of
 * patch i's owner before it are seq[first[i] .. pos[i]). */
typedef struct owner_order {
    uint32_t *seq, *first, *pos;
} owner_order;

typedef struct owned_patch {
    int64_t owner;
    uint32_t idx;
} owned_patch;

static int cmp_owned_patch(const void *a, const void *b)
{
    const owned_patch *x = a, *y = b;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static owner_order order_by_owner(const dm_model *m)
{
    owner_order o = { g_new(uint32_t, m->npatches + 1), g_new(uint32_t, m->npatches + 1),
                      g_new(uint32_t, m->npatches + 1) };
    owned_patch *op = g_new(owned_patch, m->npatches + 1);
    for (size_t i = 0; i < m->npatches; i++)
        op[i] = (owned_patch){ m->patches[i].owner, (uint32_t)i };
    sort_n(op, m->npatches, sizeof *op, cmp_owned_patch);
    for (size_t k = 0, start = 0; k < m->npatches; k++) {
        if (k && op[k].owner != op[k - 1].owner)
            start = k;
        o.seq[k] = op[k].idx;
        o.first[op[k].idx] = (uint32_t)start;
        o.pos[op[k].idx] = (uint32_t)k;
    }
    g_free(op);
    return o;
}

/* The bytes [lo, lo + n) of patch i's owner before patch i (see above). */
static void bytes_before(const dm_model *m, const owner_order *o, const uint8_t *code, size_t i,
                         uint64_t lo, uint64_t n, uint8_t *out)
{
    const dm_patch *p = &m->patches[i];
    const dm_code *c = &m->codes[p->owner];
    memcpy(out, code + c->code_offset + (lo - c->vaddr), n);
    for (uint32_t k = o->first[i]; k < o->pos[i]; k++) {
        const dm_patch *q = &m->patches[o->seq[k]];
        if (q->vaddr >= lo + n || lo >= q->vaddr + q->size)
            continue;
        uint64_t a = q->vaddr > lo ? q->vaddr : lo;
        uint64_t b = q->vaddr + q->size < lo + n ? q->vaddr + q->size : lo + n;
        memcpy(out + (a - lo), code + q->code_offset + (a - q->vaddr), b - a);
    }
}

/* The calls patch i changes, in address order, into out[0..max): the sites
 * it resolves and the calls it re-points; *other: whether it changes bytes
 * outside them. */
static size_t patch_sites(const dm_model *m, const owner_order *o, const uint8_t *code, size_t i,
                          site_change *out, size_t max, bool *other)
{
    const dm_patch *p = &m->patches[i];
    const dm_code *c = &m->codes[p->owner];
    uint64_t lo = p->vaddr - c->vaddr >= SITE_BEFORE ? p->vaddr - SITE_BEFORE : c->vaddr;
    uint64_t pend = p->vaddr + p->size, cend = c->vaddr + c->size;
    uint64_t hi = cend - pend > SITE_AFTER ? pend + SITE_AFTER : cend;
    uint64_t n = hi - lo;
    uint8_t *old = g_malloc(2 * n), *now = old + n;
    bytes_before(m, o, code, i, lo, n, old);
    memcpy(now, old, n);
    memcpy(now + (p->vaddr - lo), code + p->code_offset, p->size);
    size_t k = 0;
    for (uint64_t a = lo; a + 5 <= hi && k < max; a++) {
        uint64_t at = a - lo;
        if (old[at] != 0xe8 || now[at] != 0xe8)
            continue;
        int32_t rel_old, rel_new;
        memcpy(&rel_old, old + at + 1, 4);
        memcpy(&rel_new, now + at + 1, 4);
        if (rel_old == rel_new)
            continue;
        uint64_t from = a + 5 + (uint64_t)(int64_t)rel_old;
        site_change *s = &out[k++];
        *s = (site_change){ .call = a, .from = from, .to = a + 5 + (uint64_t)(int64_t)rel_new,
                            .lo = a + 1, .hi = a + 5,
                            .resolves = is_resolve_stub_at(m, from, p->tsc) };
        /* An inline-cache site's cached value, if it changed too. */
        if (at >= 10 && old[at - 10] == 0x48 && old[at - 9] == 0xb8 &&
            memcmp(old + at - 8, now + at - 8, 8) != 0)
            s->lo = a - 8;
        a += 4;
    }
    *other = false;
    size_t s = 0;
    for (uint64_t a = p->vaddr; a < p->vaddr + p->size && !*other; a++) {
        while (s < k && out[s].hi <= a)
            s++;
        bool in_site = s < k && out[s].lo <= a;
        *other = !in_site && old[a - lo] != now[a - lo];
    }
    g_free(old);
    return k;
}

/* Appends the part [lo, hi) of patch p to out as one piece. */
static void append_piece(GArray *out, const dm_patch *p, uint64_t lo, uint64_t hi)
{
    if (lo == hi)
        return;
    dm_patch q = *p;
    q.vaddr = lo;
    q.size = hi - lo;
    q.code_offset = p->code_offset + (lo - p->vaddr);
    g_array_append_val(out, q);
}

/* Appends the bytes of [lo, hi) that patch p changes (old: the bytes before
 * p, from p->vaddr on), a piece per run of changes; runs closer than a
 * static call stub's size stay together (the resolution of a site pulls in
 * the piece over its stub, image.c, and nothing else). */
#define PIECE_JOIN 16
static void append_changes(GArray *out, const dm_patch *p, const uint8_t *old,
                           const uint8_t *now, uint64_t lo, uint64_t hi)
{
    uint64_t run = 0, last = 0;      /* the open piece [run, last + 1) */
    bool open = false;
    for (uint64_t a = lo; a < hi; a++) {
        if (old[a - p->vaddr] == now[a - p->vaddr])
            continue;
        if (open && a - last > PIECE_JOIN) {
            append_piece(out, p, run, last + 1);
            open = false;
        }
        if (!open)
            run = a;
        open = true;
        last = a;
    }
    if (open)
        append_piece(out, p, run, last + 1);
}

/* Patch p (or a piece of it) changes the call s. */
static void set_call_change(dm_patch *p, const site_change *s)
{
    if (s->resolves) {
        p->site = s->call;
        p->old_target = s->from;
        p->new_target = s->to;
    } else {
        p->call_at = s->call;
        p->call_from = s->from;
        p->call_to = s->to;
    }
}

static void find_call_sites(dm_model *m, const uint8_t *code)
{
    GArray *out = NULL;          /* the patches with pieces, once one is cut */
    site_change sites[MAX_SITES];
    owner_order ord = order_by_owner(m);
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        size_t k = 0;
        bool other = false;
        const dm_code *c = p->owner >= 0 ? &m->codes[p->owner] : NULL;
        if (c && p->vaddr >= c->vaddr && p->vaddr + p->size <= c->vaddr + c->size &&
            p->size <= MAX_SITE_PATCH)
            k = patch_sites(m, &ord, code, i, sites, MAX_SITES, &other);
        /* One call re-pointed (with whatever else changed) stays whole, as
         * does one site resolved alone. */
        if (k == 1 && (!sites[0].resolves || !other)) {
            set_call_change(p, &sites[0]);
            k = 0;
        }
        if (k == 0) {
            if (out)
                g_array_append_val(out, *p);
            continue;
        }
        if (!out) {
            out = g_array_sized_new(FALSE, FALSE, sizeof(dm_patch), m->npatches + 2 * k);
            g_array_append_vals(out, m->patches, i);
        }
        uint8_t *old = g_malloc(p->size);
        bytes_before(m, &ord, code, i, p->vaddr, p->size, old);
        const uint8_t *now = code + p->code_offset;
        uint64_t at = p->vaddr, end = p->vaddr + p->size;
        for (size_t s = 0; s < k; s++) {
            uint64_t lo = sites[s].lo > at ? sites[s].lo : at;
            uint64_t hi = sites[s].hi < end ? sites[s].hi : end;
            append_changes(out, p, old, now, at, lo);
            size_t before = out->len;
            append_piece(out, p, lo, hi);
            if (out->len > before)
                set_call_change(&g_array_index(out, dm_patch, out->len - 1), &sites[s]);
            at = hi > at ? hi : at;
        }
        append_changes(out, p, old, now, at, end);
        g_free(old);
        m->patches_cut++;
    }
    g_free(ord.seq);
    g_free(ord.first);
    g_free(ord.pos);
    if (out) {
        g_free(m->patches);
        m->npatches = out->len;
        m->patches = (dm_patch *)(void *)g_array_free(out, FALSE);
    }
    for (size_t i = 0; i < m->npatches; i++)
        if (m->patches[i].site)
            m->call_site_patches++;
}

/* A site re-pointed at an inline-cache transition stub: HotSpot fills the
 * stub and re-points the site in one moment, so the re-pointing applies from
 * the stub's last recorded fill before its own record (no earlier than the
 * site's previous change). Only where the agent's close scans timed the fills
 * (to within about 10 ms): fills timed by full scans are too stale to date a
 * site by (measured: fewer instructions in place on such a recording). */
#define IC_FILL_SPAN 400000000ull    /* TSC ticks: how far back a fill may be */

/* The record time of the last change to patch p's site recorded before p (its
 * call, or the cached value before it), or since if that is later. Record
 * times, not start times: the rules here move start times, and a site's
 * floor must not depend on the order they visit its records in. */
static uint64_t site_changed_last(const dm_model *m, const dm_patch *p, uint64_t since)
{
    uint64_t site_lo = p->vaddr > SITE_BEFORE + 1 ? p->vaddr - SITE_BEFORE - 1 : 0;
    for (size_t j = 0; j < m->npatches; j++) {
        const dm_patch *q = &m->patches[j];
        if (q->tsc < p->tsc && q->tsc > since && q->vaddr < p->vaddr + p->size &&
            site_lo < q->vaddr + q->size)
            since = q->tsc;
    }
    return since;
}

static void start_at_stub_fill(dm_model *m)
{
    bool moved = false;
    if (!m->close_scans)
        return;
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        if (!p->call_to || p->site || p->made_up)
            continue;
        const dm_code *c = dm_code_at(m, p->call_to, p->tsc);
        if (!c || c->kind != DM_CODE_STUB || !c->name || strcmp(c->name, "InlineCacheBuffer"))
            continue;
        uint64_t fill = 0;
        uint64_t floor = site_changed_last(m, p, p->tsc > IC_FILL_SPAN ? p->tsc - IC_FILL_SPAN : 0);
        for (size_t j = 0; j < m->npatches; j++) {
            const dm_patch *q = &m->patches[j];
            if (q->tsc < p->tsc && q->tsc >= floor && q->vaddr <= p->call_to &&
                p->call_to < q->vaddr + q->size && q->tsc > fill)
                fill = q->tsc;
        }
        if (fill && fill >= floor && fill < p->start_tsc) {
            p->start_tsc = fill;
            moved = true;
            m->patches_from_fill++;
        }
    }
    if (moved)
        sort_n(m->patches, m->npatches, sizeof(dm_patch), cmp_patch);
}

/* A compiled method's new version replaces the one before (HotSpot's
 * register_method): the old version is made not entrant, a jump to
 * wrong_method_stub over its entry, before the new one is installed, and
 * every call site still calling the old version is re-pointed at the new
 * one the next time it runs (the wrong-method stub cleans the site, its
 * resolver then points it at the new version). The new version's load
 * record comes within milliseconds of its install, the watcher's records
 * of those patches up to a scan later. So the not-entrant patch applies
 * from the new version's load record, and so does a site's re-pointing from
 * the old version to the new one (no earlier than the site's previous
 * change): by then a site is at most two calls (through the wrong-method
 * stub, then its resolver) from it. Only where the old version's
 * not-entrant patch was recorded (a version still entrant keeps its
 * callers) and the new version is of a higher tier: a lower one follows a
 * deoptimization, which made the old version not entrant long before (on
 * xalan, dating such sites by the recompiled version let a retry send
 * them to a version recorded 5 s later). */
#define NEW_VERSION_SPAN 400000000ull   /* TSC ticks: load record to patch record, at most */
#define ENTRY_SPAN DM_ENTRY_SPAN
#define ENTRY_JMP_SEARCH 8              /* where in a patch a not-entrant jump may start */

/* Whether patch p writes a jump to wrong_method_stub (HotSpot's not-entrant
 * mark; JDK 25 names it "Shared Runtime wrong_method_blob"). */
static bool writes_not_entrant(const dm_model *m, const dm_patch *p, const uint8_t *code)
{
    if (p->owner < 0 || m->codes[p->owner].kind != DM_CODE_NMETHOD || p->made_up ||
        p->own_bytes || p->size < 5)
        return false;
    const uint8_t *b = code + p->code_offset;
    for (uint64_t at = 0; at + 5 <= p->size && at < ENTRY_JMP_SEARCH; at++) {
        if (b[at] != 0xe9)
            continue;
        int32_t rel;
        memcpy(&rel, b + at + 1, 4);
        const dm_code *t = dm_code_at(m, p->vaddr + at + 5 + (uint64_t)(int64_t)rel, p->tsc);
        if (t && t->kind == DM_CODE_STUB && t->name && strstr(t->name, "wrong_method_") &&
            !strstr(t->name, "abstract"))
            return true;
    }
    return false;
}

/* The last version of old's method of a higher tier loaded after old, at
 * or before t (or just after it, NEW_VERSION_LAG) and within
 * NEW_VERSION_SPAN of it; NULL if none. The last, not the first: an OSR
 * version (compiled for a loop and entered from the interpreter at its back
 * edge) is loaded too but replaces nothing, and the records do not tell it
 * apart (luindex JDK 17: `StringCoding.hasNegatives` got a C2 OSR version
 * 302M ticks and its C2 version 13M ticks before its C1 version's
 * not-entrant record; the thread entered the C1 version all that time, and
 * dated to the first, 256,837 instructions were not in place). Just after:
 * HotSpot marks the old version while it installs the new one, whose load
 * event the agent may get after the watcher's scan saw the mark; then the
 * replacement is that version, and the mark is not moved back to an OSR
 * version before it (another luindex JDK 17 recording: the C2 version's load
 * record 0.19M ticks after the mark's, the OSR version's 305M before; moved
 * there, 342,833 instructions in 45 runs were not in place). */
#define NEW_VERSION_LAG 5000000ull      /* TSC ticks: a load record after the mark's */
static const dm_code *replacing_version(const dm_model *m, const dm_code *old, uint64_t t)
{
    const dm_code *best = NULL;
    uint64_t floor = t > NEW_VERSION_SPAN ? t - NEW_VERSION_SPAN : 0;
    for (size_t i = 0; i < m->ncodes; i++) {
        const dm_code *c = &m->codes[i];
        if (c->kind != DM_CODE_NMETHOD || c == old || c->method_id != old->method_id ||
            c->level <= old->level ||
            c->load_tsc <= old->load_tsc || c->load_tsc > t + NEW_VERSION_LAG ||
            c->load_tsc < floor)
            continue;
        if (!best || c->load_tsc > best->load_tsc)
            best = c;
    }
    return best;
}

static void start_at_new_version(dm_model *m, const uint8_t *code)
{
    /* replaced_by[i]: 1 + the version that replaced codes[i], if its
     * not-entrant patch was found */
    uint32_t *replaced_by = NULL;
    bool moved = false;
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        if (!writes_not_entrant(m, p, code))
            continue;
        const dm_code *old = &m->codes[p->owner];
        const dm_code *nv = replacing_version(m, old, p->tsc);
        if (!nv)
            continue;
        if (!replaced_by)
            replaced_by = g_new0(uint32_t, m->ncodes);
        replaced_by[old->index] = nv->index + 1;
        if (nv->load_tsc < p->start_tsc && nv->load_tsc >= old->start_tsc) {
            p->start_tsc = nv->load_tsc;
            p->after_new_version = true;
            moved = true;
            m->patches_at_new_version++;
        }
    }
    for (size_t i = 0; replaced_by && i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        if (!p->call_to || p->site || p->made_up)
            continue;
        const dm_code *from = dm_code_at(m, p->call_from, p->tsc);
        const dm_code *to = dm_code_at(m, p->call_to, p->tsc);
        if (!from || !to || replaced_by[from->index] != to->index + 1 ||
            to->load_tsc >= p->start_tsc || p->tsc - to->load_tsc > NEW_VERSION_SPAN)
            continue;
        uint64_t floor = site_changed_last(m, p, to->load_tsc);
        if (floor < p->start_tsc) {
            p->start_tsc = floor;
            p->after_new_version = true;
            moved = true;
            m->patches_at_new_version++;
        }
    }
    g_free(replaced_by);
    if (moved)
        sort_n(m->patches, m->npatches, sizeof(dm_patch), cmp_patch);
}

/* A site resolved to an interpreted callee calls its static call stub,
 * whose fill goes on to the callee's c2i adapter. Once the callee has
 * compiled code, the adapter re-points the site at it the next time the
 * site is called (HotSpot's fixup_callers_callsite), and the watcher
 * records that up to a scan later, often much later. So a re-pointing from
 * the site's own stub (the only code of its own method a call goes to) to
 * the entry of a compiled version applies from that version's load record
 * (no earlier than the site's previous change): a site called in a loop is
 * re-pointed at its first call after the install. Within a chunk that
 * holds the load, the decoder saw the fixup itself (di_image_stub_fixup)
 * and loses the one call that made it; a chunk that starts later began
 * with the stub and followed it into the adapter, which the trace need not
 * contradict (its branches took the compiled callee's packets): on a xalan
 * JDK 17 recording, `NormalizerBase.next` calling
 * `AbstractStringBuilder.codePointAt` (113K instructions not in place) and
 * `scanStartElement` calling `scanAttribute` (100K). However late the
 * record: the site can run no other state after the install, since its
 * first call through the stub re-points it. (A bound of NEW_VERSION_SPAN
 * left a xalan JDK 25 site of `XStringForFSB.toDouble`, recorded 2.36
 * billion ticks after `FloatingDecimal.readJavaFormatString` was loaded,
 * calling the stub all that time: 167K instructions.) */
static void start_at_callee_code(dm_model *m)
{
    bool moved = false;
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        if (!p->call_to || p->site || p->made_up || p->owner < 0)
            continue;
        const dm_code *owner = &m->codes[p->owner];
        if (owner->kind != DM_CODE_NMETHOD || p->call_from < owner->vaddr ||
            p->call_from >= owner->vaddr + owner->size)
            continue;
        const dm_code *to = dm_code_at(m, p->call_to, p->tsc);
        if (!to || to->kind != DM_CODE_NMETHOD || p->call_to - to->vaddr >= ENTRY_SPAN ||
            to->load_tsc >= p->start_tsc)
            continue;
        uint64_t floor = site_changed_last(m, p, to->load_tsc);
        if (floor < p->start_tsc) {
            p->start_tsc = floor;
            p->at_callee_code = true;
            moved = true;
            m->patches_at_callee_code++;
        }
    }
    if (moved)
        sort_n(m->patches, m->npatches, sizeof(dm_patch), cmp_patch);
}

/* ---- call sites through their static call stub (model.h) ------------------- */

#define STUB_LEN 15              /* mov rbx, imm64; jmp rel32 */
#define MAX_STUB_EXITS 16        /* made-up states of one resolution (one per stub exit,
                                    older version or named callee's version) */
#define SCAN_SPREAD 5000000ull   /* TSC ticks: the records of one watcher scan lie closer */

typedef struct stub_fill {
    int64_t owner;
    uint64_t at, to, tsc;        /* the stub, where its jump goes, the fill's record time */
} stub_fill;

static int cmp_stub_fill(const void *a, const void *b)
{
    const stub_fill *x = a, *y = b;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

/* Whether patch p lies within its owner, small enough to be searched. */
static bool searchable(const dm_model *m, const dm_patch *p)
{
    const dm_code *c = p->owner >= 0 ? &m->codes[p->owner] : NULL;
    return c && p->vaddr >= c->vaddr && p->vaddr + p->size <= c->vaddr + c->size &&
           p->size <= MAX_SITE_PATCH;
}

/* Whether the STUB_LEN bytes s, at address a, are a static call stub, and
 * where its jump goes (*to). */
static bool static_stub_at(const uint8_t *s, uint64_t a, uint64_t *to)
{
    if (s[0] != 0x48 || s[1] != 0xbb || s[10] != 0xe9)
        return false;
    int32_t rel;
    memcpy(&rel, s + 11, 4);
    *to = a + STUB_LEN + (uint64_t)(int64_t)rel;
    return true;
}

/* Appends to out the static call stubs patch i fills: `mov rbx, imm64; jmp
 * rel32` in its owner after it, overlapping it, whose jump it re-points out
 * of the owner (HotSpot emits the stub jumping to itself). */
static void find_stub_fills(const dm_model *m, const owner_order *o, const uint8_t *code, size_t i,
                            GArray *out)
{
    const dm_patch *p = &m->patches[i];
    const dm_code *c = &m->codes[p->owner];
    uint64_t cend = c->vaddr + c->size, pend = p->vaddr + p->size;
    uint64_t lo = p->vaddr - c->vaddr >= STUB_LEN ? p->vaddr - (STUB_LEN - 1) : c->vaddr;
    uint64_t hi = cend - pend >= STUB_LEN ? pend + (STUB_LEN - 1) : cend;
    uint64_t n = hi - lo;
    if (n < STUB_LEN)
        return;
    uint8_t *old = g_malloc(2 * n), *now = old + n;
    bytes_before(m, o, code, i, lo, n, old);
    memcpy(now, old, n);
    memcpy(now + (p->vaddr - lo), code + p->code_offset, p->size);
    for (uint64_t a = lo; a + STUB_LEN <= hi; a++) {
        uint64_t to;
        if (a + STUB_LEN <= p->vaddr || a >= pend || !static_stub_at(now + (a - lo), a, &to) ||
            !memcmp(old + (a - lo) + 11, now + (a - lo) + 11, 4) ||
            (to >= c->vaddr && to < cend))
            continue;
        stub_fill f = { p->owner, a, to, p->tsc };
        g_array_append_val(out, f);
        a += STUB_LEN - 1;
    }
    g_free(old);
}

/* Appends to out the static call stubs code version c was recorded with
 * already filled (HotSpot resolved a call through one before the version's
 * load record was written). */
static void find_filled_stubs(const dm_model *m, const uint8_t *code, const dm_code *c, GArray *out)
{
    if (c->code_offset > m->code_size || m->code_size - c->code_offset < c->size)
        return;
    const uint8_t *b = code + c->code_offset;
    uint64_t cend = c->vaddr + c->size;
    for (uint64_t at = 0; at + STUB_LEN <= c->size; at++) {
        uint64_t a = c->vaddr + at, to;
        if (!static_stub_at(b + at, a, &to) || (to >= c->vaddr && to < cend))
            continue;
        stub_fill f = { c->index, a, to, 0 };
        g_array_append_val(out, f);
        at += STUB_LEN - 1;
    }
}

/* A state a resolved call site may have had that no record holds: the site
 * calls `call`, from where the thread goes on to `then` (a static call
 * stub and the place its jump goes; or, direct, an entry of compiled code,
 * both the same). */
typedef struct site_state {
    uint64_t call, then;
    bool direct;
} site_state;

static bool state_known(const site_state *out, size_t n, uint64_t then)
{
    for (size_t j = 0; j < n; j++)
        if (out[j].then == then)
            return true;
    return false;
}

/* Whether p resolves one static or opt-virtual call site (its bytes lie in
 * the call's rel32), and whether to code within the site's own method (its
 * static call stub). */
static bool resolves_stub_call(const dm_model *m, const dm_patch *p)
{
    return p->site && p->vaddr >= p->site + 1 && p->vaddr + p->size <= p->site + 5 &&
           searchable(m, p) && is_stub_call_resolver_at(m, p->old_target, p->tsc);
}

/* The same for an inline-cache site: its resolver points it at the
 * callee's unverified entry (the receiver's class check) but jumps on to
 * the verified one, the check being done. Its record may hold the cached
 * value too (the 8-byte immediate of the `movabs rax` before the call). */
#define IC_VALUE_LEN 8
static bool resolves_virtual_call(const dm_model *m, const dm_patch *p)
{
    return p->site && p->vaddr + IC_VALUE_LEN >= p->site && p->vaddr + p->size <= p->site + 5 &&
           searchable(m, p) && is_virtual_call_resolver_at(m, p->old_target, p->tsc);
}

static bool resolves_to_own_code(const dm_model *m, const dm_patch *p)
{
    const dm_code *c = &m->codes[p->owner];
    return p->new_target >= c->vaddr && p->new_target < c->vaddr + c->size;
}

/* Whether p resolves a site that may have gone through other states (made
 * up below) since its last record: a static or opt-virtual call whose
 * resolver patched it to code outside its own method. */
static bool may_have_states(const dm_model *m, const dm_patch *p)
{
    return resolves_stub_call(m, p) && !resolves_to_own_code(m, p);
}

/* The made-up states resolution p may have gone through: the fills of its
 * owner's static call stubs recorded up to p's watcher scan (a fill comes
 * before the site is pointed at its stub), one per place they go on to
 * other than p's own target, appended to out[*n..MAX_STUB_EXITS). */
static void stub_states(const dm_patch *p, const stub_fill *fills,
                        size_t nfills, site_state *out, size_t *n)
{
    size_t lo = 0, hi = nfills;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (fills[mid].owner < p->owner)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t f = lo; f < nfills && fills[f].owner == p->owner &&
                        fills[f].tsc <= p->tsc + SCAN_SPREAD &&
                        *n < MAX_STUB_EXITS; f++)
        if (fills[f].to != p->new_target && !state_known(out, *n, fills[f].to))
            out[(*n)++] = (site_state){ fills[f].at, fills[f].to, false };
}

/* ---- call sites resolved to a version replaced before the next scan ------
 *
 * A static or opt-virtual resolver points the site at the callee's
 * verified entry and jumps there. When a newer version of the callee
 * replaced that one before the watcher's next scan, the
 * record shows the site calling the newer version only, and a decoder
 * that takes the record sends every call of the meantime into code that
 * never ran (luindex JDK 25: comparePivot's C1 code called setBytesRef's
 * C1 version for 64M ticks, and the record names the C2 one). So each
 * other version of the callee's method that was there before the record
 * gives a made-up state: the site calling that version's verified entry,
 * applied only where the thread's resolver went on to exactly that
 * address. The agent records no entry points: a version's verified entry
 * is at the offset the records show for its tier (C1, C2). */
#define TIER_C1 0
#define TIER_C2 1
#define ENTRY_GUESSES 2          /* verified-entry offsets tried per tier, most seen first */

typedef struct entry_offsets {
    uint64_t off[2][ENTRY_GUESSES];
    size_t n[2];
} entry_offsets;

/* A compiled version, in the array of them ordered by method. */
typedef struct method_version {
    uint64_t method_id;
    uint32_t code;               /* index in the model's codes */
} method_version;

static int cmp_method_version(const void *a, const void *b)
{
    const method_version *x = a, *y = b;
    if (x->method_id != y->method_id)
        return x->method_id < y->method_id ? -1 : 1;
    return x->code < y->code ? -1 : x->code > y->code;
}

static method_version *versions_by_method(const dm_model *m, size_t *n)
{
    method_version *v = g_new(method_version, m->ncodes ? m->ncodes : 1);
    *n = 0;
    for (size_t i = 0; i < m->ncodes; i++)
        if (m->codes[i].kind == DM_CODE_NMETHOD)
            v[(*n)++] = (method_version){ m->codes[i].method_id, (uint32_t)i };
    sort_n(v, *n, sizeof *v, cmp_method_version);
    return v;
}

static int tier_of(const dm_code *c)
{
    return c->level >= 1 && c->level <= 3 ? TIER_C1 : c->level == 4 ? TIER_C2 : -1;
}

/* The entry offsets of each tier, from the targets of the resolutions
 * `of` accepts: the verified entries (static and opt-virtual calls,
 * may_have_states), or the unverified ones (resolves_virtual_call). */
static entry_offsets entries_from(const dm_model *m,
                                  bool (*of)(const dm_model *, const dm_patch *))
{
    uint32_t seen[2][ENTRY_SPAN] = { { 0 } };
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (!of(m, p))
            continue;
        const dm_code *c = dm_code_at(m, p->new_target, p->tsc);
        int t = c && c->kind == DM_CODE_NMETHOD ? tier_of(c) : -1;
        if (t >= 0 && p->new_target - c->vaddr < ENTRY_SPAN)
            seen[t][p->new_target - c->vaddr]++;
    }
    /* a tier no resolution went to takes the other's */
    for (int t = 0; t < 2; t++) {
        bool any = false;
        for (uint64_t o = 0; o < ENTRY_SPAN && !any; o++)
            any = seen[t][o];
        for (uint64_t o = 0; o < ENTRY_SPAN && !any; o++)
            seen[t][o] = seen[1 - t][o];
    }
    entry_offsets e = { 0 };
    for (int t = 0; t < 2; t++)
        while (e.n[t] < ENTRY_GUESSES) {
            uint64_t best = ENTRY_SPAN;
            for (uint64_t o = 0; o < ENTRY_SPAN; o++)
                if (seen[t][o] && (best == ENTRY_SPAN || seen[t][o] > seen[t][best]))
                    best = o;
            if (best == ENTRY_SPAN)
                break;
            e.off[t][e.n[t]++] = best;
            seen[t][best] = 0;
        }
    return e;
}

/* The made-up states of compiled version c for resolution p of a site in
 * code version owner, if c was there between owner's start and p's record:
 * the site calling c at its entry of offsets `call` (the j-th guess of c's
 * tier), its resolver going on to the one of offsets `then`; appended to
 * out[*n..MAX_STUB_EXITS). */
static void version_states(const dm_code *c, const dm_code *owner, const dm_patch *p,
                           const entry_offsets *call, const entry_offsets *then,
                           site_state *out, size_t *n)
{
    int t = tier_of(c);
    if (t < 0 || c->load_tsc > p->tsc || c->end_tsc <= owner->start_tsc)
        return;
    for (size_t j = 0; j < call->n[t] && j < then->n[t] && *n < MAX_STUB_EXITS; j++) {
        uint64_t entry = c->vaddr + call->off[t][j], goes = c->vaddr + then->off[t][j];
        if (entry < c->vaddr + c->size && goes < c->vaddr + c->size &&
            !state_known(out, *n, goes))
            out[(*n)++] = (site_state){ entry, goes, true };
    }
}

/* The made-up states resolution p may have gone through: the versions of
 * its callee's method other than `to` (the compiled code it calls) that
 * were there before p's record, after its owner's load, appended to
 * out[*n..MAX_STUB_EXITS). The site calls a version at its entry of
 * offsets `call` (the j-th guess), its resolver went on to the one of
 * offsets `then`: the same entry but for inline-cache sites. */
static void older_version_states(const dm_model *m, const dm_patch *p, const dm_code *to,
                                 const entry_offsets *call, const entry_offsets *then,
                                 const method_version *v, size_t nv, site_state *out, size_t *n)
{
    size_t lo = 0, hi = nv;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].method_id < to->method_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < nv && v[i].method_id == to->method_id; i++)
        if (&m->codes[v[i].code] != to)
            version_states(&m->codes[v[i].code], &m->codes[p->owner], p, call, then, out, n);
}

/* A patch that only re-points a call (its rel32, not from a resolver) away
 * from an entry of compiled code that was made not entrant before the
 * patch's watcher scan (not_entrant: per code version, the first record
 * that made it so, UINT64_MAX if none): that code. A site calling one
 * version of a method may then have called others before the scan (the
 * site re-resolved to a newer version, then gone megamorphic): they give
 * made-up states as for resolutions, tried only by retries (decode.c,
 * with_made_up_states). Other re-pointings (an inline cache going
 * megamorphic, a transition stub) got none: on JDK 17 they cost retries
 * and gained nothing. */
static const dm_code *repointed_from_version(const dm_model *m, const dm_patch *p,
                                             const uint64_t *not_entrant)
{
    if (!p->call_to || p->site || p->made_up || p->vaddr < p->call_at + 1 ||
        p->vaddr + p->size > p->call_at + 5)
        return NULL;
    const dm_code *c = dm_code_at(m, p->call_from, p->tsc);
    return c && c->kind == DM_CODE_NMETHOD && p->call_from - c->vaddr < ENTRY_SPAN &&
                   not_entrant[c->index] <= p->tsc + SCAN_SPREAD
               ? c
               : NULL;
}

/* Whether addr is at one of the entry offsets e of code c's tier. */
static bool at_entry(const entry_offsets *e, const dm_code *c, uint64_t addr)
{
    int t = tier_of(c);
    for (size_t j = 0; t >= 0 && j < e->n[t]; j++)
        if (addr == c->vaddr + e->off[t][j])
            return true;
    return false;
}

/* The compiled code resolution p calls, if it calls an entry of some. */
static const dm_code *entry_called(const dm_model *m, const dm_patch *p)
{
    const dm_code *to = dm_code_at(m, p->new_target, p->tsc);
    return to && to->kind == DM_CODE_NMETHOD && p->new_target - to->vaddr < ENTRY_SPAN ? to
                                                                                       : NULL;
}

/* ---- sites resolved to compiled code that was gone by the next scan --------
 *
 * The reverse of the above: the resolver pointed the site at the callee's
 * compiled code, which was made not entrant before the watcher's next
 * scan; HotSpot re-resolved the site to its static call stub (the callee
 * interpreted), and that is the first record (xalan JDK 25: a site of
 * Normalizer2WithImpl.getDecomposition called NormalizerImpl's C1 code
 * 1,036 times, and the decoder went through the stub into the interpreter
 * instead). The stub names no method the model knows, but the site's next
 * record re-points it from the stub to the callee's newer version: the
 * versions of that method give the made-up states, as above. */

/* A patch that re-points a call from one place to another (call_to), by
 * where it went before. */
typedef struct repoint {
    int64_t owner;
    uint64_t from, tsc;
    uint32_t idx;
} repoint;

static int cmp_repoint(const void *a, const void *b)
{
    const repoint *x = a, *y = b;
    if (x->owner != y->owner)
        return x->owner < y->owner ? -1 : 1;
    if (x->from != y->from)
        return x->from < y->from ? -1 : 1;
    return x->tsc < y->tsc ? -1 : x->tsc > y->tsc;
}

static repoint *repoints_by_origin(const dm_model *m, size_t *n)
{
    repoint *r = g_new(repoint, m->npatches ? m->npatches : 1);
    *n = 0;
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (p->call_to && !p->site && !p->made_up)
            r[(*n)++] = (repoint){ p->owner, p->call_from, p->tsc, (uint32_t)i };
    }
    sort_n(r, *n, sizeof *r, cmp_repoint);
    return r;
}

/* The first patch of r (repoints_by_origin) recorded after time `after`
 * that re-points a call of code version owner away from `from`; NULL if
 * none. */
static const dm_patch *next_repoint_from(const dm_model *m, const repoint *r, size_t nr,
                                         int64_t owner, uint64_t from, uint64_t after)
{
    size_t lo = 0, hi = nr;
    repoint key = { owner, from, after, 0 };
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp_repoint(&r[mid], &key) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nr && r[lo].owner == owner && r[lo].from == from ? &m->patches[r[lo].idx]
                                                                : NULL;
}

/* The compiled code that resolution p's site calls next, where p resolved
 * it to its own static call stub and a later record re-points it from
 * there to an entry of compiled code. */
static const dm_code *callee_after_own_stub(const dm_model *m, const dm_patch *p,
                                            const repoint *r, size_t nr)
{
    if (!resolves_stub_call(m, p) || !resolves_to_own_code(m, p))
        return NULL;
    const dm_patch *q = next_repoint_from(m, r, nr, p->owner, p->new_target, p->tsc);
    if (!q)
        return NULL;
    const dm_code *to = dm_code_at(m, q->call_to, q->tsc);
    return to && to->kind == DM_CODE_NMETHOD && q->call_to - to->vaddr < ENTRY_SPAN ? to : NULL;
}

/* ---- inline-cache sites resolved to an interpreted callee ---------------
 *
 * resolve_virtual_call points an inline-cache site whose callee has no
 * compiled code at the callee's c2i adapter: at its unverified entry (the
 * receiver's class check), jumping on to its c2i entry itself. Once the
 * callee has compiled code the site is pointed at that, and when both
 * happened between two watcher scans only the second was recorded (luindex
 * JDK 25: `AttributeSource.clearAttributes` calling an interpreted `clear`
 * through an adapter 132 times, each call decoded through a later state of
 * the site). HotSpot shares one adapter among the methods of one calling
 * convention (its AdapterFingerPrint: the receiver and the parameters as
 * basic types, boolean, byte, char and short as int, references as long),
 * and the model learns which adapter serves a convention from the records:
 * a static call stub's fill jumps to the c2i entry of the adapter of the
 * method its site is re-pointed to later, and a site re-pointed from an
 * adapter's unverified entry to compiled code had called that method's
 * adapter. A resolution to compiled code then gets a made-up state for its
 * callee's adapter: the site calling the unverified entry, applied only
 * where its resolver went on to the c2i entry. The two entries are a fixed
 * distance apart in every adapter (the same class check code): measured
 * where one adapter shows both, and from the code before a c2i entry (the
 * unverified entry follows the i2c part's last instruction). */

static bool is_adapter(const dm_code *c)
{
    return c && c->kind == DM_CODE_STUB && c->name && strstr(c->name, "adapters");
}

/* A method's calling convention as a key (see above), NULL if its
 * signature does not parse. */
static char *convention_of(const dm_method *mt)
{
    const char *s = mt ? mt->sig : NULL;
    if (!s || *s != '(')
        return NULL;
    GString *k = g_string_new(mt->is_static ? "" : "J");
    for (s++; *s && *s != ')'; s++) {
        bool reference = *s == '[';
        while (*s == '[')
            s++;
        if (*s == 'L') {
            s = strchr(s, ';');
            reference = true;
        } else if (!*s || !strchr("ZBCSIJFD", *s)) {
            s = NULL;
        }
        if (!s)
            break;
        if (reference)
            g_string_append_c(k, 'J');
        else if (*s == 'J' || *s == 'D')
            g_string_append(k, *s == 'J' ? "JV" : "DV");
        else
            g_string_append_c(k, *s == 'F' ? 'F' : 'I');
    }
    if (!s || *s != ')') {
        g_string_free(k, TRUE);
        return NULL;
    }
    return g_string_free(k, FALSE);
}

/* What the records show of one adapter's entries (0: not seen). */
typedef struct adapter_seen {
    uint32_t code;
    uint64_t unverified, c2i;
    struct adapter_seen *also;   /* another adapter read from code with the same key */
} adapter_seen;

static void adapter_seen_free(gpointer v)
{
    for (adapter_seen *e = v, *next; e; e = next) {
        next = e->also;
        g_free(e);
    }
}

/* Notes in by (convention key -> adapter_seen) that the method of the
 * compiled code at `to` (at time t) uses the adapter holding `at`, at its
 * c2i entry or its unverified one. */
static void note_adapter(const dm_model *m, GHashTable *by, uint64_t to, uint64_t t, uint64_t at,
                         bool c2i)
{
    const dm_code *callee = dm_code_at(m, to, t), *a = dm_code_at(m, at, t);
    if (!callee || callee->kind != DM_CODE_NMETHOD || to - callee->vaddr >= ENTRY_SPAN ||
        !is_adapter(a))
        return;
    char *key = convention_of(dm_method_get(m, callee->method_id));
    if (!key)
        return;
    adapter_seen *e = g_hash_table_lookup(by, key);
    if (!e) {
        e = g_new0(adapter_seen, 1);
        e->code = a->index;
        g_hash_table_insert(by, key, e);
    } else {
        g_free(key);
        if (e->code != a->index)
            return;              /* another adapter: the key is coarser than HotSpot's */
    }
    if (c2i)
        e->c2i = at;
    else
        e->unverified = at;
}

#define I2C_SPAN 512              /* bytes from an adapter's start to its `jmp *%r11` */

/* One load of an i2c part: "REG, SIZE ptr [rax + OFF]" (capstone's Intel
 * syntax) into an argument register (j_rarg0-5: rsi, rdx, rcx, r8, r9,
 * rdi; j_farg0-7: xmm0-7). false for anything else. */
static bool i2c_load(const cs_insn *insn, bool *xmm, bool *wide, uint64_t *off)
{
    static const char *const gpr[] = { "rsi", "rdx", "rcx", "r8", "r9", "rdi",
                                       "esi", "edx", "ecx", "r8d", "r9d", "edi" };
    const char *mn = insn->mnemonic, *ops = insn->op_str;
    bool mov = !strcmp(mn, "mov"), fmov = !strcmp(mn, "movss") || !strcmp(mn, "movsd") ||
                                          !strcmp(mn, "vmovss") || !strcmp(mn, "vmovsd");
    const char *comma = strchr(ops, ',');
    if ((!mov && !fmov) || !comma)
        return false;
    size_t rl = (size_t)(comma - ops);
    bool known = false;
    if (fmov)
        known = rl == 4 && !strncmp(ops, "xmm", 3) && ops[3] >= '0' && ops[3] <= '7';
    for (size_t i = 0; mov && i < sizeof gpr / sizeof gpr[0] && !known; i++)
        known = strlen(gpr[i]) == rl && !strncmp(ops, gpr[i], rl);
    char size[8];
    long long o;
    int used = 0;
    if (!known || sscanf(comma, ", %7s ptr [rax + %lli]%n", size, &o, &used) != 2 || !used ||
        comma[used] || o <= 0)
        return false;
    *xmm = fmov;
    *wide = !strcmp(size, "qword");
    *off = (uint64_t)o;
    return *wide || !strcmp(size, "dword");
}

/* The calling convention (convention_of's key) of the adapter a, read from
 * its i2c part (HotSpot's gen_i2c_adapter), which loads the arguments from
 * the interpreter's stack in order into their registers: of `slots` stack
 * slots, argument slot i from (slots - i) * 8, a long or double (two slots,
 * the second void) from the slot below, with a 64-bit move for references
 * and longs, a 32-bit one for ints, into an xmm register for floats and
 * doubles. The part ends with `jmp *%r11`, and the unverified entry
 * follows it (*unverified). The first argument is taken as one slot (a
 * receiver, for every inline-cache call), which a static method whose first
 * argument is a long misreads (adapters_from_code keeps each adapter of a
 * key as a candidate). NULL where the part is not found or loads something
 * else (an argument passed on the stack). */
static char *key_from_i2c(csh cs, cs_insn *insn, const dm_model *m, const uint8_t *code,
                          const dm_code *a, uint64_t *unverified)
{
    if (a->code_offset > m->code_size || m->code_size - a->code_offset < a->size)
        return NULL;
    const uint8_t *p = code + a->code_offset;
    size_t avail = a->size < I2C_SPAN ? a->size : I2C_SPAN;
    uint64_t addr = a->vaddr, slots = 0, i = 0;
    GString *k = g_string_new(NULL);
    bool ok = false, bad = false;
    while (!ok && !bad && avail && cs_disasm_iter(cs, &p, &avail, &addr, insn)) {
        bool xmm, wide;
        uint64_t off;
        if (!strcmp(insn->mnemonic, "jmp") && !strcmp(insn->op_str, "r11")) {
            ok = slots == i;
            *unverified = addr;        /* after the instruction */
            break;
        }
        if (!i2c_load(insn, &xmm, &wide, &off))
            continue;
        if (!slots)                  /* the first argument, one slot (above) */
            slots = off / 8 + (xmm && wide);
        if (off % 8 || i >= slots)
            bad = true;
        else if (off == (slots - i) * 8 && !(xmm && wide)) {
            g_string_append_c(k, xmm ? 'F' : wide ? 'J' : 'I');
            i++;
        } else if (off == (slots - i - 1) * 8 && wide && i + 1 < slots) {
            g_string_append(k, xmm ? "DV" : "JV");
            i += 2;
        } else {
            bad = true;
        }
    }
    if (!ok) {
        g_string_free(k, TRUE);
        return NULL;
    }
    return g_string_free(k, FALSE);
}

#define ADAPTERS_PER_KEY 4       /* adapters read from code with one key, kept as candidates */

/* Adds to by (learn_adapters) the conventions of the adapters no record
 * named, read from their i2c parts (key_from_i2c), with the c2i entry gap
 * bytes after the unverified one. Where several adapters give one key (a
 * static method whose first argument is a long, misread; HotSpot's own
 * duplicates), each is a candidate (adapter_seen.also), up to
 * ADAPTERS_PER_KEY: a made-up state applies only where the resolver went on
 * to its c2i entry, so a wrong candidate is never taken. */
static void adapters_from_code(dm_model *m, const uint8_t *code, GHashTable *by, uint64_t gap)
{
    csh cs;
    if (!gap || cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK)
        return;
    cs_insn *insn = cs_malloc(cs);
    GHashTable *read = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, adapter_seen_free);
    for (size_t c = 0; c < m->ncodes; c++) {
        uint64_t unverified = 0;
        char *key = is_adapter(&m->codes[c])
                        ? key_from_i2c(cs, insn, m, code, &m->codes[c], &unverified)
                        : NULL;
        if (!key)
            continue;
        if (g_hash_table_contains(by, key)) {
            g_free(key);
            continue;
        }
        adapter_seen *first = g_hash_table_lookup(read, key), **end = &first;
        size_t n = 0;
        bool known = false;
        for (; *end; end = &(*end)->also, n++)
            known = known || (*end)->unverified == unverified;
        if (!known && n < ADAPTERS_PER_KEY) {
            *end = g_new0(adapter_seen, 1);
            **end = (adapter_seen){ (uint32_t)c, unverified, unverified + gap, NULL };
            m->adapters_from_code++;
        }
        if (n)
            g_free(key);
        else
            g_hash_table_insert(read, key, first);
    }
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, read);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        g_hash_table_iter_steal(&it);
        g_hash_table_insert(by, k, v);
    }
    g_hash_table_destroy(read);
    cs_free(insn, 1);
    cs_close(&cs);
}

/* The adapters of calling conventions, from the records (see above) and
 * then from the adapters' code: a key -> adapter_seen table, each entry
 * with both entries filled in. */
static GHashTable *learn_adapters(dm_model *m, const uint8_t *code, const stub_fill *fills,
                                  size_t nfills, const repoint *r, size_t nr)
{
    GHashTable *by = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, adapter_seen_free);
    for (size_t f = 0; f < nfills; f++) {
        /* the stub's site re-pointed from the stub after the fill */
        const dm_patch *q =
            next_repoint_from(m, r, nr, fills[f].owner, fills[f].at, fills[f].tsc);
        if (q)
            note_adapter(m, by, q->call_to, q->tsc, fills[f].to, true);
    }
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *q = &m->patches[i];
        if (q->call_to && !q->site && !q->made_up)
            note_adapter(m, by, q->call_to, q->tsc, q->call_from, false);
    }
    /* the distance from the unverified entry to the c2i one, the most
     * common of: where an adapter shows both; where the c2i entry is
     * known, from the end of the i2c part's last instruction (`jmp *%r11`)
     * before it, where the unverified entry begins */
    GHashTableIter it;
    gpointer k, v;
    uint32_t seen[ENTRY_SPAN] = { 0 };
    g_hash_table_iter_init(&it, by);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const adapter_seen *e = v;
        const dm_code *a = &m->codes[e->code];
        if (e->unverified && e->c2i > e->unverified && e->c2i - e->unverified < ENTRY_SPAN)
            seen[e->c2i - e->unverified]++;
        if (!e->c2i || e->c2i - a->vaddr < 3 || a->code_offset > m->code_size ||
            m->code_size - a->code_offset < e->c2i - a->vaddr)
            continue;
        const uint8_t *c2i = code + a->code_offset + (e->c2i - a->vaddr);
        for (uint64_t back = 3; back < ENTRY_SPAN + 3 && back <= e->c2i - a->vaddr; back++)
            if (!memcmp(c2i - back, "\x41\xff\xe3", 3)) {
                seen[back - 3] += back > 3;
                break;
            }
    }
    uint64_t gap = 0;
    for (uint64_t g = 1; g < ENTRY_SPAN; g++)
        if (seen[g] > seen[gap])
            gap = g;
    g_hash_table_iter_init(&it, by);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        adapter_seen *e = v;
        if (!e->c2i && e->unverified && gap)
            e->c2i = e->unverified + gap;
        else if (!e->unverified && e->c2i && gap)
            e->unverified = e->c2i - gap;
        if (!e->c2i || !e->unverified)
            g_hash_table_iter_remove(&it);
    }
    m->adapters_from_records = g_hash_table_size(by);
    adapters_from_code(m, code, by, gap);
    return by;
}

/* The made-up state of inline-cache resolution p to the compiled code
 * `to` where its callee was still interpreted: its adapter's (above),
 * appended to out[*n..MAX_STUB_EXITS). */
static void adapter_state(const dm_model *m, const dm_patch *p, const dm_method *callee,
                          GHashTable *adapters, site_state *out, size_t *n)
{
    char *key = convention_of(callee);
    const adapter_seen *e = key ? g_hash_table_lookup(adapters, key) : NULL;
    g_free(key);
    for (; e && *n < MAX_STUB_EXITS; e = e->also)
        if (m->codes[e->code].load_tsc <= p->tsc && !state_known(out, *n, e->c2i))
            out[(*n)++] = (site_state){ e->unverified, e->c2i, true };
}

/* ---- inline-cache sites resolved to a callee no record shows --------------
 *
 * An inline-cache site that went megamorphic (a vtable or itable stub, or
 * an InlineCacheBuffer transition stub on the way there) before the
 * watcher's next scan shows only that state in its record: the callee it
 * was resolved to first, and called directly until then, is named nowhere
 * in the records (luindex JDK 17: a site of BytesRefHash$1.compare(II)
 * called UTF8SortedAsUnicodeComparator.compare(Object,Object) for 104M
 * ticks, and each call was decoded through the transition stub: 728K
 * instructions not in place). The caller's bytecode names it: the invoke
 * at the site's bci (in its PC record, at the return address) gives the
 * callee's name and descriptor, and each compiled version of a method with
 * both that was there gives made-up states (version_states), applied only
 * where the thread's resolver went on to its verified entry; so does the
 * adapter of the callee's calling convention (adapter_state), where it was
 * still interpreted.
 * Which classes' methods can be the receiver's is not known here (no class
 * hierarchy): a name shared by many classes fills the states with the
 * first versions found. */

typedef struct callee_names {
    GHashTable *class_files;     /* class id -> jm_slice * (the loader's) */
    GHashTable *classes;         /* class id -> cf_class *, NULL where it does not parse */
    GHashTable *versions;        /* "name sig" -> GArray of code indices, non-static nmethods */
} callee_names;

static void free_class(gpointer v)
{
    if (v)
        cf_free(v);
    g_free(v);
}

static void free_versions(gpointer v) { g_array_free(v, TRUE); }

static gint by_load_time(gconstpointer a, gconstpointer b, gpointer codes)
{
    const dm_code *c = codes;
    uint64_t x = c[*(const uint32_t *)a].load_tsc, y = c[*(const uint32_t *)b].load_tsc;
    return x < y ? -1 : x > y;
}

static void sort_by_load_time(gpointer key, gpointer versions, gpointer codes)
{
    (void)key;
    g_array_sort_with_data(versions, by_load_time, codes);
}

/* The versions of each name and descriptor, oldest first. */
static callee_names callee_names_new(const dm_model *m, GHashTable *class_files)
{
    callee_names cn = {
        .class_files = class_files,
        .classes = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, free_class),
        .versions = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, free_versions),
    };
    for (size_t i = 0; i < m->ncodes; i++) {
        const dm_code *c = &m->codes[i];
        const dm_method *mt = c->kind == DM_CODE_NMETHOD ? dm_method_get(m, c->method_id) : NULL;
        if (!mt || mt->is_static)
            continue;
        char *key = g_strconcat(mt->name, " ", mt->sig, NULL);
        GArray *v = g_hash_table_lookup(cn.versions, key);
        if (!v) {
            v = g_array_new(FALSE, FALSE, sizeof(uint32_t));
            g_hash_table_insert(cn.versions, key, v);
        } else {
            g_free(key);
        }
        uint32_t idx = (uint32_t)i;
        g_array_append_val(v, idx);
    }
    g_hash_table_foreach(cn.versions, sort_by_load_time, m->codes);
    return cn;
}

static void callee_names_free(callee_names *cn)
{
    g_hash_table_destroy(cn->classes);
    g_hash_table_destroy(cn->versions);
}

/* The parsed class file of class_id, or NULL (none recorded, or it does not
 * parse: then the site is simply not named). */
static const cf_class *class_of(callee_names *cn, uint64_t class_id)
{
    gpointer v;
    if (g_hash_table_lookup_extended(cn->classes, &class_id, NULL, &v))
        return v;
    const jm_slice *b = g_hash_table_lookup(cn->class_files, &class_id);
    cf_class *c = NULL;
    if (b) {
        char err[256];
        c = g_new0(cf_class, 1);
        if (cf_parse((const uint8_t *)b->p, b->len, c, err, sizeof err) < 0) {
            cf_free(c);
            g_free(c);
            c = NULL;
        }
    }
    g_hash_table_insert(cn->classes, g_memdup2(&class_id, sizeof class_id), c);
    return c;
}

#define OP_INVOKEVIRTUAL 182
#define OP_INVOKEINTERFACE 185

/* The method the invoke at site names (owner: the site's code version), as
 * the caller sees it: its name and descriptor, with a receiver. false if
 * there is no scope at the site or no class file, or the bytecode there is
 * no invokevirtual or invokeinterface. */
static bool named_callee(const dm_model *m, callee_names *cn, const dm_code *owner,
                         uint64_t site, dm_method *out)
{
    const dm_frame *f;   /* the call's record: at its return address, the first past site */
    if (!dm_inline_at(m, owner, site, &f) || f[0].bci < 0)
        return false;
    const dm_method *caller = dm_method_get(m, f[0].method_id);
    const cf_class *k = caller ? class_of(cn, caller->class_id) : NULL;
    const cf_method *cm = NULL;
    for (uint16_t i = 0; k && i < k->nmethods && !cm; i++)
        if (k->methods[i].code && !strcmp(k->methods[i].name, caller->name) &&
            !strcmp(k->methods[i].sig, caller->sig))
            cm = &k->methods[i];
    uint32_t bci = (uint32_t)f[0].bci;
    if (!cm || cm->code_len < 3 || bci > cm->code_len - 3 ||
        (cm->code[bci] != OP_INVOKEVIRTUAL && cm->code[bci] != OP_INVOKEINTERFACE))
        return false;
    uint8_t tag;
    const char *klass, *name, *sig;
    if (cf_member_ref(k, (uint32_t)cm->code[bci + 1] << 8 | cm->code[bci + 2], &tag, &klass,
                      &name, &sig) < 0)
        return false;
    *out = (dm_method){ .name = (char *)name, .sig = (char *)sig, .is_static = false };
    return true;
}

/* The compiled versions of methods with mt's name and descriptor, or NULL. */
static const GArray *versions_named(callee_names *cn, const dm_method *mt)
{
    char *key = g_strconcat(mt->name, " ", mt->sig, NULL);
    const GArray *v = g_hash_table_lookup(cn->versions, key);
    g_free(key);
    return v;
}

/* The made-up states of inline-cache resolution p to no compiled code: the
 * versions in `named` there between its owner's start and p's record,
 * called at their unverified entry, the resolver going on to the verified
 * one; appended to out[*n..MAX_STUB_EXITS). A common name (hashCode,
 * equals) has more versions than there are states: the newest come first,
 * and none that was marked not entrant before its owner's load record (a
 * resolution no longer goes there). */
static void named_callee_states(const dm_model *m, const dm_patch *p, const GArray *named,
                                const uint64_t *not_entrant, const entry_offsets *unverified,
                                const entry_offsets *verified, site_state *out, size_t *n)
{
    const dm_code *owner = &m->codes[p->owner];
    for (guint i = named->len; i-- > 0;) {
        uint32_t v = g_array_index(named, uint32_t, i);
        if (not_entrant[v] > owner->load_tsc)
            version_states(&m->codes[v], owner, p, unverified, verified, out, n);
    }
}

/* The made-up bytes into a memory file of the model's own: libipt reads
 * code from files. false if it cannot be made. */
static bool write_made_up(dm_model *m, const GByteArray *bytes)
{
    int fd = memfd_create("jpt-made-up-code", MFD_CLOEXEC);
    if (fd < 0)
        return false;
    size_t done = 0;
    while (done < bytes->len) {
        ssize_t n = write(fd, bytes->data + done, bytes->len - done);
        if (n <= 0) {
            int e = n < 0 ? errno : ENOSPC;
            close(fd);
            errno = e;
            return false;
        }
        done += (size_t)n;
    }
    m->made_up_fd = fd;
    m->made_up_path = g_strdup_printf("/proc/self/fd/%d", fd);
    m->made_up_size = bytes->len;
    m->made_up_bytes = g_memdup2(bytes->data, bytes->len);
    return true;
}

/* Of the stub states st[0..n) of static or opt-virtual resolution p
 * (stub_states), those through a stub that jumps to the c2i entry of the
 * adapter of p's callee's calling convention, where at least one does: each
 * site has a stub of its own, and a caller's stubs for callees of other
 * conventions jump to other adapters. Two stubs whose adapters branch
 * alike decode alike, and a retry keeps the first one tried (xalan JDK 25:
 * two sites of NormalizerBase.next's C1 code each went through its own
 * stub into the interpreter; each call decoded through the other stub's
 * adapter lost 3,000 instructions). The count kept is returned. */
static size_t stubs_to_callee_adapter(const dm_model *m, const dm_patch *p,
                                      GHashTable *adapters, site_state *st, size_t n)
{
    const dm_code *callee = entry_called(m, p);
    char *key = callee ? convention_of(dm_method_get(m, callee->method_id)) : NULL;
    const adapter_seen *e = key ? g_hash_table_lookup(adapters, key) : NULL;
    g_free(key);
    bool to_callee[MAX_STUB_EXITS] = { false }, any = false;
    for (size_t j = 0; j < n; j++) {
        for (const adapter_seen *a = e; a && !to_callee[j]; a = a->also)
            to_callee[j] = !st[j].direct && st[j].then == a->c2i;
        any = any || to_callee[j];
    }
    if (!any)
        return n;    /* no stub goes to the callee's adapter, or it is not known */
    size_t kept = 0;
    for (size_t j = 0; j < n; j++)
        if (to_callee[j] || st[j].direct)
            st[kept++] = st[j];
    return kept;
}

/* A made-up state of the call of patch i (p): the call at `call` going to
 * `to`, appended to made with its rel32 in bytes. */
static dm_patch *made_up_call(const dm_patch *p, uint32_t i, uint64_t call, uint64_t to,
                              GArray *made, GByteArray *bytes)
{
    int32_t rel = (int32_t)(int64_t)(to - (call + 5));
    dm_patch q = *p;
    q.vaddr = call + 1;
    q.size = 4;
    q.code_offset = bytes->len;
    q.own_bytes = true;
    g_byte_array_append(bytes, (const guint8 *)&rel, 4);
    q.start_tsc = q.tsc;         /* held only until the record applies */
    q.new_target = to;
    q.call_to = 0;
    q.made_up = true;
    q.direct = false;
    q.stub_to = 0;               /* the stub's own jump, wherever it goes */
    q.site = 0;
    q.first_state = q.nstates = 0;
    q.state_of = i;
    q.at_callee_code = false;
    q.before_fixup = true;
    q.fixup_states = q.then_state = 0;
    q.at_resolver = false;
    g_array_append_val(made, q);
    return &g_array_index(made, dm_patch, made->len - 1);
}

/* The made-up states of a call that re-pointed its site from its static
 * stub after the callee's install (model.h, fixup_states), appended to made
 * from patch index `first`: the site at its stub (the fixup applies p), the
 * site at its stub again (the fixup leaves it at the resolver its code was
 * installed with) and the site at that resolver. How many were made. */
static size_t fixup_states(dm_model *m, const uint8_t *code, dm_patch *p, uint32_t i,
                           uint32_t first, GArray *made, GByteArray *bytes)
{
    if (!p->at_callee_code || p->owner < 0 || !p->call_at || !p->call_from)
        return 0;
    const dm_code *owner = &m->codes[p->owner];
    const uint64_t call = p->call_at;
    made_up_call(p, i, call, p->call_from, made, bytes);
    size_t n = 1;
    /* the site's bytes as installed: a call of a resolver stub */
    uint64_t off = owner->code_offset + (call - owner->vaddr);
    if (code && call >= owner->vaddr && call + 5 <= owner->vaddr + owner->size &&
        off + 5 <= m->code_size && code[off] == 0xe8) {
        int32_t rel;
        memcpy(&rel, code + off + 1, 4);
        uint64_t resolver = call + 5 + (uint64_t)(int64_t)rel;
        const dm_code *r = dm_code_at(m, resolver, p->tsc);
        if (r && r->kind == DM_CODE_STUB && r->name && strstr(r->name, "resolve") &&
            resolver != p->call_from) {
            dm_patch *cleaning = made_up_call(p, i, call, p->call_from, made, bytes);
            cleaning->then_state = first + 2 + 1;
            made_up_call(p, i, call, resolver, made, bytes)->at_resolver = true;
            n += 2;
        }
    }
    p->fixup_states = first + 1;
    return n;
}

/* See model.h: the made-up states of call sites resolved to compiled code,
 * appended to the patches. */
static void make_up_site_states(dm_model *m, const uint8_t *code, GHashTable *class_files)
{
    owner_order ord = order_by_owner(m);
    GArray *fills = g_array_new(FALSE, FALSE, sizeof(stub_fill));
    uint8_t *seen = g_new0(uint8_t, m->ncodes + 1);
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (!p->site && searchable(m, p))
            find_stub_fills(m, &ord, code, i, fills);
        if (p->site && searchable(m, p) && !seen[p->owner]) {
            seen[p->owner] = 1;
            find_filled_stubs(m, code, &m->codes[p->owner], fills);
        }
    }
    g_free(seen);
    g_free(ord.seq);
    g_free(ord.first);
    g_free(ord.pos);
    sort_n(fills->data, fills->len, sizeof(stub_fill), cmp_stub_fill);
    const stub_fill *all = (const stub_fill *)(void *)fills->data;
    const entry_offsets entries = entries_from(m, may_have_states);
    const entry_offsets unverified = entries_from(m, resolves_virtual_call);
    uint64_t *not_entrant = g_new(uint64_t, m->ncodes + 1);
    for (size_t i = 0; i <= m->ncodes; i++)
        not_entrant[i] = UINT64_MAX;
    for (size_t i = 0; i < m->npatches; i++) {
        const dm_patch *p = &m->patches[i];
        if (writes_not_entrant(m, p, code) && p->tsc < not_entrant[p->owner])
            not_entrant[p->owner] = p->tsc;
    }
    size_t nversions;
    method_version *versions = versions_by_method(m, &nversions);
    size_t nrepoints;
    repoint *repoints = repoints_by_origin(m, &nrepoints);
    GHashTable *adapters = learn_adapters(m, code, all, fills->len, repoints, nrepoints);
    callee_names names = callee_names_new(m, class_files);
    site_state st[MAX_STUB_EXITS];
    GArray *made = g_array_new(FALSE, FALSE, sizeof(dm_patch));
    GByteArray *bytes = g_byte_array_new();
    dm_patch *before = g_memdup2(m->patches, m->npatches * sizeof(dm_patch));
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        size_t n = 0;
        const dm_code *callee;
        const entry_offsets *call_at = &entries;
        if (may_have_states(m, p)) {
            stub_states(p, all, fills->len, st, &n);
            n = stubs_to_callee_adapter(m, p, adapters, st, n);
            callee = entry_called(m, p);
        } else if (resolves_virtual_call(m, p)) {
            callee = entry_called(m, p);
            call_at = &unverified;
            dm_method named;
            if (callee) {
                adapter_state(m, p, dm_method_get(m, callee->method_id), adapters, st, &n);
            } else if (named_callee(m, &names, &m->codes[p->owner], p->site, &named)) {
                adapter_state(m, p, &named, adapters, st, &n);
                const GArray *v = versions_named(&names, &named);
                if (v)
                    named_callee_states(m, p, v, not_entrant, &unverified, &entries, st, &n);
                m->callees_named += n > 0;
            }
        } else if ((callee = repointed_from_version(m, p, not_entrant))) {
            if (at_entry(&unverified, callee, p->call_from))
                call_at = &unverified;
        } else {
            callee = callee_after_own_stub(m, p, repoints, nrepoints);
        }
        if (callee)
            older_version_states(m, p, callee, call_at, &entries, versions, nversions, st, &n);
        const uint64_t call = p->site ? p->site : p->call_at;
        for (size_t j = 0; j < n; j++) {
            int32_t rel = (int32_t)(int64_t)(st[j].call - (call + 5));
            dm_patch q = *p;
            q.vaddr = call + 1;      /* the whole rel32 (a record holds the bytes that changed) */
            q.size = 4;
            q.code_offset = bytes->len;
            q.own_bytes = true;
            g_byte_array_append(bytes, (const guint8 *)&rel, 4);
            q.new_target = st[j].call;
            q.call_to = 0;
            q.made_up = true;
            q.direct = st[j].direct;
            q.stub_to = st[j].then;
            q.site = 0;          /* not a resolution of its own (image.c's site table) */
            q.first_state = q.nstates = 0;
            q.state_of = (uint32_t)i;
            if (!p->nstates)
                p->first_state = (uint32_t)(m->npatches + made->len);
            p->nstates++;
            g_array_append_val(made, q);
        }
        size_t nfix = fixup_states(m, code, p, (uint32_t)i, (uint32_t)(m->npatches + made->len),
                                   made, bytes);
        m->fixup_states_made_up += nfix;
        if ((n || nfix) && (p->vaddr != call + 1 || p->size != 4)) {
            /* over a made-up state, the recorded one must set all of the rel32 */
            uint64_t to = p->site ? p->new_target : p->call_to;
            int32_t rel = (int32_t)(int64_t)(to - (call + 5));
            p->vaddr = call + 1;
            p->size = 4;
            p->code_offset = bytes->len;
            p->own_bytes = true;
            g_byte_array_append(bytes, (const guint8 *)&rel, 4);
        }
    }
    if (made->len && !write_made_up(m, bytes)) {
        memcpy(m->patches, before, m->npatches * sizeof(dm_patch));
        g_array_set_size(made, 0);
        m->fixup_states_made_up = 0;
        warn(m, "cannot make a memory file for made-up call-site states: %s", g_strerror(errno));
    }
    g_free(before);
    g_free(not_entrant);
    g_free(versions);
    g_free(repoints);
    g_hash_table_destroy(adapters);
    callee_names_free(&names);
    g_byte_array_free(bytes, TRUE);
    g_array_free(fills, TRUE);
    if (made->len) {
        m->patches = g_renew(dm_patch, m->patches, m->npatches + made->len);
        memcpy(m->patches + m->npatches, made->data, made->len * sizeof(dm_patch));
        m->npatches += made->len;
        m->states_made_up = made->len;
    }
    g_array_free(made, TRUE);
}

static int cmp_method(const void *a, const void *b)
{
    const dm_method *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}
/* Whether a stub takes part in dispatching an exception to a handler in
 * compiled code. JDK 17 / 25 name them "unwind_exception Runtime1 stub" /
 * "C1 Runtime unwind_exception_blob" (and handle_exception*, forward_exception,
 * throw_*), "_rethrow_Java" / "C2 Runtime rethrow", "ExceptionBlob",
 * "forward exception" / "forward_exception", "... throw_exception" /
 * "Shared Runtime throw_..._blob". */
static bool dispatches_exceptions(const char *name)
{
    return name && (strstr(name, "xception") || strstr(name, "rethrow") ||
                    strstr(name, "unwind") || strstr(name, "throw_"));
}


static void free_codelet(dm_codelet *c) { g_free(c->desc); }

static void finish(loader *L)
{
    dm_model *m = L->m;

    /* Codelets: sorted, overlaps dropped. */
    sort_n(L->codelets->data, L->codelets->len, sizeof(dm_codelet), cmp_codelet);
    guint w = 0;
    for (guint i = 0; i < L->codelets->len; i++) {
        dm_codelet *c = &g_array_index(L->codelets, dm_codelet, i);
        if (w && g_array_index(L->codelets, dm_codelet, w - 1).end > c->begin) {
            warn(m, "%s: codelet '%s' at 0x%" PRIx64 " overlaps the one before it; ignored",
                 L->path, c->desc, c->begin);
            free_codelet(c);
            continue;
        }
        g_array_index(L->codelets, dm_codelet, w++) = *c;
    }
    g_array_set_size(L->codelets, w);
    m->ncodelets = w;
    m->codelets = (dm_codelet *)(void *)g_array_free(L->codelets, FALSE);
    if (m->ncodelets) {
        m->interp_low = m->codelets[0].begin;
        m->interp_high = m->codelets[m->ncodelets - 1].end;
    }

    uint32_t *rank = load_rank(L);
    apply_unloads(L, rank);
    effective_starts(L, rank);
    g_free(rank);
    g_array_free(L->code_seq, TRUE);
    m->ncodes = L->codes->len;
    sort_n(L->codes->data, m->ncodes, sizeof(dm_code), cmp_code_vaddr);
    m->codes = (dm_code *)(void *)g_array_free(L->codes, FALSE);
    m->codes_max_end = g_new(uint64_t, m->ncodes ? m->ncodes : 1);
    for (size_t i = 0; i < m->ncodes; i++) {
        uint64_t end = m->codes[i].vaddr + m->codes[i].size;
        m->codes[i].index = (uint32_t)i;
        m->codes[i].ic_miss = m->codes[i].kind == DM_CODE_STUB && m->codes[i].name &&
                              strstr(m->codes[i].name, "ic_miss");
        m->codes[i].dispatches_exceptions = m->codes[i].kind == DM_CODE_STUB &&
                                            dispatches_exceptions(m->codes[i].name);
        m->codes_max_end[i] = i && m->codes_max_end[i - 1] > end ? m->codes_max_end[i - 1] : end;
    }
    m->npcs = L->pcs->len;
    m->pcs = (dm_pcrec *)(void *)g_array_free(L->pcs, FALSE);
    m->nframes = L->frames->len;
    m->frames = (dm_frame *)(void *)g_array_free(L->frames, FALSE);

    m->nblobs = L->blobs->len;
    sort_n(L->blobs->data, m->nblobs, sizeof(dm_blob), cmp_blob);
    m->blobs = (dm_blob *)(void *)g_array_free(L->blobs, FALSE);

    m->npatches = L->patches->len;
    sort_n(L->patches->data, m->npatches, sizeof(dm_patch), cmp_patch);
    m->patches = (dm_patch *)(void *)g_array_free(L->patches, FALSE);
    for (size_t i = 0; i < m->npatches; i++) {
        dm_patch *p = &m->patches[i];
        const dm_code *c = dm_code_at(m, p->vaddr, p->tsc);
        p->owner = c ? (int64_t)c->index : -1;
    }
    /* Methods: by id; a later record of the same id wins (the first is
     * dropped) so names reflect the latest redefinition. */
    sort_n(L->methods->data, L->methods->len, sizeof(dm_method), cmp_method);
    w = 0;
    for (guint i = 0; i < L->methods->len; i++) {
        dm_method *mt = &g_array_index(L->methods, dm_method, i);
        if (w && g_array_index(L->methods, dm_method, w - 1).id == mt->id) {
            dm_method *prev = &g_array_index(L->methods, dm_method, w - 1);
            g_free(prev->class_sig);
            g_free(prev->name);
            g_free(prev->sig);
            *prev = *mt;
            continue;
        }
        g_array_index(L->methods, dm_method, w++) = *mt;
    }
    g_array_set_size(L->methods, w);
    m->nmethods = w;
    m->methods = (dm_method *)(void *)g_array_free(L->methods, FALSE);
    classify_patches(m, L->class_files);

    m->nthreads = L->threads->len;
    m->threads = (dm_thread *)(void *)g_array_free(L->threads, FALSE);
    g_array_free(L->unloads, TRUE);
}

static dm_model *load_from(jm_reader *r, const char *code_path, char *err, size_t errlen)
{
    dm_model *m = g_new0(dm_model, 1);
    m->warnings = g_new0(char *, MAX_WARNINGS);
    char *abs = realpath(code_path, NULL);
    m->code_path = g_strdup(abs ? abs : code_path);
    free(abs);
    struct stat st;
    if (stat(m->code_path, &st) == 0 && S_ISREG(st.st_mode))
        m->code_size = (uint64_t)st.st_size;
    else
        warn(m, "%s: cannot read; no code bytes available", m->code_path);
    m->start_tsc = jm_reader_header(r)->start_tsc;

    loader L = { .m = m, .path = jm_reader_path(r) };
    L.codelets = g_array_new(FALSE, FALSE, sizeof(dm_codelet));
    L.codes = g_array_new(FALSE, FALSE, sizeof(dm_code));
    L.code_seq = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    L.blobs = g_array_new(FALSE, FALSE, sizeof(dm_blob));
    L.patches = g_array_new(FALSE, FALSE, sizeof(dm_patch));
    L.methods = g_array_new(FALSE, FALSE, sizeof(dm_method));
    L.threads = g_array_new(FALSE, FALSE, sizeof(dm_thread));
    L.unloads = g_array_new(FALSE, FALSE, sizeof(unload_rec));
    L.pcs = g_array_new(FALSE, FALSE, sizeof(dm_pcrec));
    L.frames = g_array_new(FALSE, FALSE, sizeof(dm_frame));
    L.class_files = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);

    jm_record rec;
    int rc;
    while ((rc = jm_reader_next(r, &rec)) == 1) {
        add_record(&L, &rec);
        L.seq++;
    }
    if (rc < 0) {
        m->truncated = true;
        warn(m, "%s", jm_reader_error(r));
    }
    finish(&L);
    g_hash_table_destroy(L.class_files);
    (void)err;
    (void)errlen;
    return m;
}

/* The metadata lives in DIR/jvm; a jvm/ folder itself is accepted too. */
dm_model *dm_load(const char *dir, char *err, size_t errlen)
{
    char *use = jm_meta_dir(dir);
    jm_reader *r = use ? jm_reader_open(use, err, errlen) : NULL;
    dm_model *m = NULL;
    if (r) {
        char *code = g_build_filename(use, JM_CODE_FILE, NULL);
        m = load_from(r, code, err, errlen);
        g_free(code);
        jm_reader_close(r);
    } else if (!use) {
        snprintf(err, errlen, "out of memory");
    }
    free(use);
    return m;
}

dm_model *dm_load_mem(const void *meta, size_t meta_len, const char *code_path, char *err,
                      size_t errlen)
{
    jm_reader *r = jm_reader_open_mem(meta, meta_len, NULL, 0, "(memory)", err, errlen);
    if (!r)
        return NULL;
    dm_model *m = load_from(r, code_path, err, errlen);
    jm_reader_close(r);
    return m;
}

void dm_free(dm_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->ncodelets; i++)
        free_codelet(&m->codelets[i]);
    for (size_t i = 0; i < m->ncodes; i++)
        g_free(m->codes[i].name);
    for (size_t i = 0; i < m->nblobs; i++)
        g_free(m->blobs[i].name);
    for (size_t i = 0; i < m->nmethods; i++) {
        g_free(m->methods[i].class_sig);
        g_free(m->methods[i].name);
        g_free(m->methods[i].sig);
    }
    for (size_t i = 0; i < m->nthreads; i++)
        g_free(m->threads[i].name);
    for (size_t i = 0; i < m->nwarnings; i++)
        g_free(m->warnings[i]);
    g_free(m->warnings);
    g_free(m->codelets);
    g_free(m->codes);
    g_free(m->codes_max_end);
    g_free(m->pcs);
    g_free(m->frames);
    g_free(m->blobs);
    g_free(m->patches);
    g_free(m->methods);
    g_free(m->threads);
    g_free(m->code_path);
    if (m->made_up_path)
        close(m->made_up_fd);
    g_free(m->made_up_bytes);
    g_free(m->made_up_path);
    g_free(m);
}

/* ---- lookups ---------------------------------------------------------------- */

const dm_codelet *dm_codelet_at(const dm_model *m, uint64_t addr)
{
    if (addr < m->interp_low || addr >= m->interp_high)
        return NULL;
    size_t lo = 0, hi = m->ncodelets;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->codelets[mid].begin <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo)
        return NULL;
    const dm_codelet *c = &m->codelets[lo - 1];
    return addr < c->end ? c : NULL;
}

const dm_code *dm_code_at(const dm_model *m, uint64_t addr, uint64_t tsc)
{
    size_t lo = 0, hi = m->ncodes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->codes[mid].vaddr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    const dm_code *best = NULL;
    for (size_t p = lo; p-- > 0 && m->codes_max_end[p] > addr;) {
        const dm_code *c = &m->codes[p];
        if (addr >= c->vaddr + c->size || tsc < c->start_tsc || tsc >= c->end_tsc)
            continue;
        /* Several valid versions only after a conflict: the latest wins, as
         * in the image. */
        if (!best || c->start_tsc > best->start_tsc ||
            (c->start_tsc == best->start_tsc && c->load_tsc > best->load_tsc))
            best = c;
    }
    return best;
}

const dm_blob *dm_blob_at(const dm_model *m, uint64_t addr)
{
    for (size_t i = m->nblobs; i-- > 0;)
        if (addr >= m->blobs[i].vaddr && addr - m->blobs[i].vaddr < m->blobs[i].size)
            return &m->blobs[i];
    return NULL;
}

uint32_t dm_inline_range(const dm_model *m, const dm_code *c, uint64_t addr,
                         const dm_frame **frames, uint64_t *rlo, uint64_t *rhi)
{
    *frames = NULL;
    *rlo = c ? c->vaddr : 0;
    *rhi = c ? c->vaddr + c->size : 0;
    if (!c || c->kind != DM_CODE_NMETHOD || !c->npcs)
        return 0;
    const dm_pcrec *p = &m->pcs[c->first_pc];
    size_t lo = 0, hi = c->npcs;
    while (lo < hi) {          /* first record with pc > addr */
        size_t mid = (lo + hi) / 2;
        if (p[mid].pc <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo)
        *rlo = p[lo - 1].pc;
    if (lo == c->npcs)
        return 0;
    *rhi = p[lo].pc;
    *frames = &m->frames[p[lo].first];
    return p[lo].depth;
}

uint32_t dm_inline_at(const dm_model *m, const dm_code *c, uint64_t addr,
                      const dm_frame **frames)
{
    uint64_t lo, hi;
    return dm_inline_range(m, c, addr, frames, &lo, &hi);
}

dm_where dm_lookup(const dm_model *m, uint64_t addr, uint64_t tsc)
{
    dm_where w = { DM_AT_NOTHING, NULL, NULL, NULL };
    if ((w.codelet = dm_codelet_at(m, addr)))
        w.kind = DM_AT_CODELET;
    else if ((w.code = dm_code_at(m, addr, tsc)))
        w.kind = DM_AT_CODE;
    else if ((w.blob = dm_blob_at(m, addr)))
        w.kind = DM_AT_BLOB;
    return w;
}

const dm_method *dm_method_get(const dm_model *m, uint64_t id)
{
    size_t lo = 0, hi = m->nmethods;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->methods[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->nmethods && m->methods[lo].id == id ? &m->methods[lo] : NULL;
}

const char *dm_method_str(const dm_model *m, uint64_t id, char *buf, size_t len)
{
    const dm_method *mt = dm_method_get(m, id);
    if (!mt) {
        snprintf(buf, len, "0x%" PRIx64, id);
        return buf;
    }
    const char *cls = mt->class_sig;
    size_t clen = strlen(cls);
    if (clen >= 2 && cls[0] == 'L' && cls[clen - 1] == ';')
        snprintf(buf, len, "%.*s.%s%s", (int)(clen - 2), cls + 1, mt->name, mt->sig);
    else
        snprintf(buf, len, "%s.%s%s", cls, mt->name, mt->sig);
    return buf;
}

const dm_thread *dm_thread_get(const dm_model *m, uint32_t tid)
{
    for (size_t i = 0; i < m->nthreads; i++)
        if (m->threads[i].tid == tid)
            return &m->threads[i];
    return NULL;
}
