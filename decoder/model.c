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
#include "decoder/callsites.h"
#include "decoder/bytecodes.h"
#include "decoder/classfile.h"
#include "decoder/x86.h"

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

void dm_warn(dm_model *m, const char *fmt, ...)
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
    dm_warn(L->m, "%s: offset %" PRIu64 ": %s record: %s (vaddr 0x%" PRIx64 ", size %" PRIu64
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
        dm_warn(L->m, "%s: offset %" PRIu64 ": NMETHOD_LOAD pc table is malformed; the "
             "records before the bad one are kept", L->path, rec->offset);
    if (deep)
        dm_warn(L->m, "%s: offset %" PRIu64 ": inline stack deeper than %d frames; outer "
             "frames dropped", L->path, rec->offset, DM_MAX_FRAMES);
    if (outside)
        dm_warn(L->m, "%s: offset %" PRIu64 ": pc records outside the method's code "
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
        dm_warn(m, "%s: %s (%s record ignored)", L->path, err, jm_type_name(rec->type));
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
            dm_warn(m, "%s: offset %" PRIu64 ": CODELET range [0x%" PRIx64 ", 0x%" PRIx64
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
            dm_warn(m, "%s: offset %" PRIu64 ": NMETHOD_UNLOAD of 0x%" PRIx64 " matches no "
                 "load of that method before it; ending the latest version there",
                 L->path, u[k].offset, u[k].vaddr);
            best = fallback;
        }
        if (best < 0) {
            dm_warn(m, "%s: offset %" PRIu64 ": NMETHOD_UNLOAD of 0x%" PRIx64 " names no "
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
        dm_warn(L->m, "%s: %zu code records overlap code that was still loaded; the older "
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

int dm_cmp_patch(const void *a, const void *b)
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


/* Whether patch p's bytes (base: the snapshot's under it) lie in the rel32
 * of a direct call or jump the snapshot holds, one going to known code:
 * zeros there are a live target's high bytes, executed all along (a 1-byte
 * re-pointing of a C1 site from its stub to compiled code, dated back to
 * the caller's start, sent every earlier call into code that was not there
 * yet: 325 gaps in a Branchy run on JDK 25), not space reserved for code. */
static bool in_live_rel32(const dm_model *m, const dm_patch *p, const uint8_t *base)
{
    const dm_code *owner = p->owner >= 0 ? &m->codes[p->owner] : NULL;
    const uint64_t lo = owner ? owner->vaddr : 0;
    for (uint64_t k = 1; k <= 4 && owner && p->vaddr - k >= lo; k++) {
        const uint8_t op = base[-(int64_t)k];
        if ((op != 0xe8 && op != 0xe9) || p->vaddr + p->size > p->vaddr - k + 5)
            continue;
        int32_t rel;
        memcpy(&rel, base - k + 1, 4);
        const uint64_t to = p->vaddr - k + 5 + (uint64_t)(int64_t)rel;
        if (dm_code_at(m, to, p->tsc) || dm_blob_at(m, to))
            return true;
    }
    return false;
}

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
        if (!base || !all_zero(base, p->size) || in_live_rel32(m, p, base))
            continue;
        /* An earlier patch over the same bytes changed them first. */
        bool earlier = false;
        for (size_t j = 0; j < i && !earlier; j++)
            earlier = m->patches[j].vaddr < p->vaddr + p->size &&
                      p->vaddr < m->patches[j].vaddr + m->patches[j].size;
        if (!earlier)
            p->start_tsc = p->owner >= 0 ? m->codes[p->owner].start_tsc : 0;
    }
    sort_n(m->patches, m->npatches, sizeof(dm_patch), dm_cmp_patch);
    dm_find_call_sites(m, code);
    dm_start_at_stub_fill(m);
    dm_start_at_new_version(m, code);
    dm_start_at_callee_code(m);
    dm_make_up_site_states(m, code, class_files);
    find_branch_exits(m, code);
    munmap(map, m->code_size);
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
            dm_warn(m, "%s: codelet '%s' at 0x%" PRIx64 " overlaps the one before it; ignored",
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
    sort_n(L->patches->data, m->npatches, sizeof(dm_patch), dm_cmp_patch);
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
        dm_warn(m, "%s: cannot read; no code bytes available", m->code_path);
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
        dm_warn(m, "%s", jm_reader_error(r));
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
