/* Start candidates and the lookahead (project_int.h): the index of
 * positions by opcode, and walks that tell how well a place explains the
 * decoder events that follow. */
#include "reconstruct/project_int.h"

typedef struct pair_ent {
    uint32_t key;
    pos ps;
} pair_ent;

static int cmp_pair_ent(const void *a, const void *b)
{
    const pair_ent *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->ps.method != y->ps.method)
        return x->ps.method < y->ps.method ? -1 : 1;
    return x->ps.insn < y->ps.insn ? -1 : x->ps.insn > y->ps.insn;
}

static bool is_special(int op)
{
    return jvm_is_invoke(op) || jvm_is_return(op) || op == JVM_ATHROW;
}

/* Adds instruction i of method mi (cfg g) to pp: by opcode if special, else
 * under each distinct opcode among its successors. */
static void pairs_add(pos_pairs *pp, GArray *ents, const rc_cfg *g, uint32_t mi, uint32_t i)
{
    pos ps = { mi, i };
    int op = g->op[i];
    if (is_special(op)) {
        g_array_append_val(pp->special[op], ps);
        return;
    }
    bool seen[256] = { false };
    for (uint32_t e = g->first[i]; e < g->first[i + 1]; e++) {
        uint32_t to = g->edge[e].to;
        if (g->edge[e].kind == RC_EDGE_EXCEPTION || to >= g->ninsn || seen[g->op[to]])
            continue;
        seen[g->op[to]] = true;
        pair_ent pe = { (uint32_t)op << 8 | g->op[to], ps };
        g_array_append_val(ents, pe);
    }
}

static void pairs_finish(pos_pairs *pp, GArray *ents)
{
    if (ents->len > 1)
        qsort(ents->data, ents->len, sizeof(pair_ent), cmp_pair_ent);
    pp->off = g_new0(uint32_t, 65536 + 1);
    pp->v = g_new(pos, ents->len ? ents->len : 1);
    for (guint k = 0; k < ents->len; k++) {
        const pair_ent *pe = &g_array_index(ents, pair_ent, k);
        pp->v[k] = pe->ps;
        pp->off[pe->key + 1]++;
    }
    for (uint32_t key = 0; key < 65536; key++)
        pp->off[key + 1] += pp->off[key];
}

static void pairs_free(pos_pairs *pp)
{
    g_free(pp->off);
    g_free(pp->v);
    for (int o = 0; o < 256; o++)
        if (pp->special[o])
            g_array_free(pp->special[o], TRUE);
}

/* The candidates of pp for a lookahead of n opcodes sym (sym[0] an opcode),
 * in (method, insn) order as in the unkeyed lists; NULL when the lookahead
 * is too short to narrow them (the caller uses all of sym[0]'s). */
GArray *pj_pairs_narrow(const pos_pairs *pp, const uint16_t *sym, size_t n)
{
    if (!pp || n < 2 || sym[0] >= 0x100)
        return NULL;
    const GArray *sp = pp->special[sym[0]];
    const pos *a = NULL, *b = (const pos *)(const void *)sp->data;
    size_t na = 0, nb = sp->len;
    if (sym[1] < 0x100) {      /* (else no other instruction explains it) */
        uint32_t key = (uint32_t)sym[0] << 8 | sym[1];
        a = pp->v + pp->off[key];
        na = pp->off[key + 1] - pp->off[key];
    }
    GArray *out = g_array_sized_new(FALSE, FALSE, sizeof(pos), (guint)(na + nb));
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        bool take_a = j >= nb || (i < na && (a[i].method < b[j].method ||
                                             (a[i].method == b[j].method &&
                                              a[i].insn < b[j].insn)));
        pos v = take_a ? a[i++] : b[j++];
        g_array_append_val(out, v);
    }
    return out;
}

pos_index *pj_index_build(rc_program *p)
{
    pos_index *x = g_new0(pos_index, 1);
    GArray *ents[3];
    pos_pairs *pps[3] = { &x->any2, &x->start2, &x->after_call2 };
    for (int l = 0; l < 3; l++) {
        ents[l] = g_array_new(FALSE, FALSE, sizeof(pair_ent));
        for (int o = 0; o < 256; o++)
            pps[l]->special[o] = g_array_new(FALSE, FALSE, sizeof(pos));
    }
    for (int o = 0; o < 256; o++) {
        x->any[o] = g_array_new(FALSE, FALSE, sizeof(pos));
        x->start[o] = g_array_new(FALSE, FALSE, sizeof(pos));
        x->after_call[o] = g_array_new(FALSE, FALSE, sizeof(pos));
    }
    size_t n = rc_program_nmethods(p);
    for (uint32_t mi = 0; mi < n; mi++) {
        const rc_method *m = rc_method_at(p, mi);
        if (!m || !m->code || !rc_method_may_have_run(p, m))
            continue;
        const rc_cfg *g = rc_cfg_get(p, m);
        if (!g)
            continue;
        for (uint32_t i = 0; i < g->ninsn; i++) {
            pos ps = { mi, i };
            g_array_append_val(x->any[g->op[i]], ps);
            pairs_add(&x->any2, ents[0], g, mi, i);
            if (i == 0) {
                g_array_append_val(x->start[g->op[i]], ps);
                pairs_add(&x->start2, ents[1], g, mi, i);
            } else if (jvm_is_invoke(g->op[i - 1])) {
                g_array_append_val(x->after_call[g->op[i]], ps);
                pairs_add(&x->after_call2, ents[2], g, mi, i);
            }
        }
    }
    for (int l = 0; l < 3; l++) {
        pairs_finish(pps[l], ents[l]);
        g_array_free(ents[l], TRUE);
    }
    return x;
}

static void index_free(pos_index *x)
{
    if (!x)
        return;
    for (int o = 0; o < 256; o++) {
        g_array_free(x->any[o], TRUE);
        g_array_free(x->start[o], TRUE);
        g_array_free(x->after_call[o], TRUE);
    }
    pairs_free(&x->any2);
    pairs_free(&x->start2);
    pairs_free(&x->after_call2);
    g_free(x);
}

rp_index *rp_index_new(rc_program *p)
{
    rp_index *x = g_new0(rp_index, 1);
    x->p = p;
    g_mutex_init(&x->lock);
    return x;
}

void rp_index_free(rp_index *x)
{
    if (!x)
        return;
    index_free(x->x);
    g_mutex_clear(&x->lock);
    g_free(x);
}

/* ------------------------------------------------------------------------ */

const dc_event *pj_queued(const rp_projector *r, size_t k)
{
    return &r->q[(r->qhead + k) % QUEUE];
}

uint8_t pj_branch_of(const dc_event *e)
{
    return (e->flags & DC_F_TAKEN) ? BR_TAKEN : (e->flags & DC_F_NOT_TAKEN) ? BR_NOT_TAKEN
                                                                             : BR_UNKNOWN;
}

static bool is_adapter_stub(const dc_event *e)
{
    return e->desc && strstr(e->desc, "I2C") != NULL;   /* "I2C/C2I adapters" */
}

/* Skips a compiled callee's events after queue position k (its DC_JIT_ENTER)
 * to the interpreter's return into the caller: the position of that
 * DC_INTERP_RETURN, or the queue's length if it is not in the queue (or
 * something the walk cannot follow comes first). Interpreted methods the
 * compiled code calls meanwhile are counted in and out. */
static size_t skip_compiled(const rp_projector *r, size_t k)
{
    unsigned nest = 0;
    for (k++; k < r->qlen; k++) {
        const dc_event *e = pj_queued(r, k);
        switch (e->kind) {
        case DC_METHOD_ENTRY: {
            /* a method without bytecodes (native, intrinsic) leaves without
             * a return bytecode: its end cannot be told here */
            entry_kind_t ek = pj_entry_kind_of(e->desc);
            if (ek != EK_JAVA && ek != EK_SYNC)
                return r->qlen;
            nest++;
            break;
        }
        case DC_BYTECODE:
            if (nest && jvm_is_return(e->opcode))
                nest--;
            break;
        case DC_INTERP_RETURN:
            if (!nest)
                return k;
            break;
        case DC_GAP:
        case DC_EXCEPTION:
        case DC_THROW:
        case DC_DEOPT:
        case DC_EARLYRET:
        case DC_INTERP_OTHER:
            return r->qlen;
        default:
            break;
        }
    }
    return r->qlen;
}

size_t pj_lookahead(const rp_projector *r, size_t from, uint16_t *sym, uint8_t *br,
                    uint32_t *callee, size_t max)
{
    size_t n = 0;
    for (size_t k = from; k < r->qlen && n < max; k++) {
        const dc_event *e = pj_queued(r, k);
        br[n] = BR_UNKNOWN;
        callee[n] = NONE;
        switch (e->kind) {
        case DC_BYTECODE:
            if (e->opcode < 0)
                return n;
            br[n] = pj_branch_of(e);
            sym[n++] = (uint16_t)e->opcode;
            break;
        case DC_SAFEPOINT:
        case DC_NATIVE:
            break;
        case DC_INTERP_RETURN:
            sym[n++] = SYM_IRET;
            break;
        case DC_METHOD_ENTRY:
        case DC_INTERP_OTHER: {
            entry_kind_t ek = pj_entry_kind_of(e->desc);
            if (ek == EK_NONE)
                return n;
            sym[n++] = (uint16_t)(SYM_ENTRY | ek);
            break;
        }
        case DC_STUB:
            if (!is_adapter_stub(e))
                return n;
            break;             /* i2c: the compiled callee follows */
        case DC_JIT_ENTER: {
            /* an interpreted invoke's compiled callee: one symbol naming
             * it, then the interpreter's return into the caller */
            if (!n || !jvm_is_invoke(sym[n - 1]) || (e->flags & DC_F_BY_RETURN))
                return n;
            callee[n] = pj_index_of_id(r, e->method_id);
            sym[n++] = SYM_COMPILED;
            k = skip_compiled(r, k);
            if (k >= r->qlen)
                return n;
            k--;               /* the DC_INTERP_RETURN comes next */
            break;
        }
        default:
            return n;
        }
    }
    return n;
}

typedef struct walker {
    rp_projector *r;
    const uint16_t *sym;
    const uint8_t *br;         /* per symbol: how a branch went (BR_*) */
    const uint32_t *callee;    /* per SYM_COMPILED: the compiled callee (NONE: unknown) */
    size_t n;
    int budget;
    struct { uint32_t method, insn; } stack[WALK_DEPTH];
} walker;

/* Whether a branch that went `how` can have followed an edge of this kind. */
bool pj_edge_fits(int kind, uint8_t how)
{
    return how == BR_UNKNOWN || (how == BR_TAKEN ? kind == RC_EDGE_TAKEN : kind == RC_EDGE_NEXT);
}

/* Can the program produce sym[k..n) from the frames stack[0..depth)
 * (stack[depth - 1] about to run its instruction)? W_YES when it does up to
 * where the lookahead ends, leaves what the walk can follow, or the walk's
 * budget or depth runs out; W_MAYBE when it cannot decide (a call site whose
 * targets are open, an event the walk does not model); W_NO when it cannot. */
static int walk(walker *w, size_t depth, size_t k)
{
    if (k >= w->n)
        return W_YES;
    if (--w->budget < 0)
        return W_YES;           /* consistent as far as it was followed */
    uint32_t mi = w->stack[depth - 1].method, i = w->stack[depth - 1].insn;
    const rc_method *m = rc_method_at(w->r->p, mi);
    const rc_cfg *g = m ? rc_cfg_get(w->r->p, m) : NULL;
    uint16_t s = w->sym[k];
    if (!g || s >= 0x100 || i >= g->ninsn || g->op[i] != s)
        return W_NO;
    if (s == JVM_ATHROW)
        return W_YES;
    if (jvm_is_return(s)) {
        if (depth == 1)
            return W_YES;       /* returns past what the walk knows */
        if (k + 1 < w->n && w->sym[k + 1] != SYM_IRET)
            return W_NO;
        return walk(w, depth - 1, k + 2);
    }
    if (jvm_is_invoke(s)) {
        uint32_t next = NONE;
        for (uint32_t e = g->first[i]; e < g->first[i + 1]; e++)
            if (g->edge[e].kind == RC_EDGE_NEXT)
                next = g->edge[e].to;
        if (k + 1 >= w->n)
            return W_YES;
        if (depth >= WALK_DEPTH)
            return W_YES;       /* consistent as far as it was followed */
        if (w->sym[k + 1] == SYM_COMPILED && next != NONE) {
            /* a compiled callee (i2c): it must be a target; the caller
             * goes on after the interpreter's return */
            const rc_method *const *t;
            bool open = false;
            size_t nt = rc_call_targets_at(w->r->p, m, i, &t, &open);
            uint32_t c = w->callee[k + 1];
            bool found = c == NONE || open;   /* (open: any method may be it) */
            for (size_t j = 0; j < nt && !found; j++)
                found = t[j]->index == c;
            if (!found)
                return W_NO;
            size_t q = k + 2;
            if (q < w->n && w->sym[q] == SYM_IRET)
                q++;
            w->stack[depth - 1].insn = next;
            int res = walk(w, depth, q);
            w->stack[depth - 1].insn = i;
            return res;
        }
        if ((w->sym[k + 1] & 0xff00) != SYM_ENTRY || next == NONE)
            return W_MAYBE;
        entry_kind_t ek = (entry_kind_t)(w->sym[k + 1] & 0xff);
        const rc_method *const *t;
        bool open = false;
        size_t nt = rc_call_targets_at(w->r->p, m, i, &t, &open);
        int res = W_NO;
        if (ek != EK_JAVA && ek != EK_SYNC) {
            /* runs no bytecodes: continues in this frame after the interpreter's return */
            bool fits = false;
            for (size_t j = 0; j < nt && !fits; j++)
                fits = pj_entry_fits(ek, t[j]);
            if (!fits)
                return open ? W_MAYBE : W_NO;
            size_t q = k + 2;
            if (q < w->n && w->sym[q] == SYM_IRET)
                q++;
            else if (q < w->n && (w->sym[q] & 0xff00))
                return W_MAYBE; /* a call back into Java */
            w->stack[depth - 1].insn = next;
            res = walk(w, depth, q);
            w->stack[depth - 1].insn = i;
            return res;
        }
        for (size_t j = 0; j < nt && res < W_YES; j++) {
            if (!pj_entry_fits(ek, t[j]) || !t[j]->code)
                continue;
            w->stack[depth - 1].insn = next;
            w->stack[depth].method = t[j]->index;
            w->stack[depth].insn = 0;
            res = best(res, walk(w, depth + 1, k + 2));
            w->stack[depth - 1].insn = i;
        }
        if (open && res == W_NO)
            res = W_MAYBE;
        return res;
    }
    int res = W_NO;
    uint8_t how = w->br[k];
    for (uint32_t e = g->first[i]; e < g->first[i + 1] && res < W_YES; e++) {
        if (g->edge[e].kind == RC_EDGE_EXCEPTION || !pj_edge_fits(g->edge[e].kind, how))
            continue;
        w->stack[depth - 1].insn = g->edge[e].to;
        res = best(res, walk(w, depth, k + 1));
        w->stack[depth - 1].insn = i;
    }
    return res;
}

int pj_accepts(rp_projector *r, uint32_t method, uint32_t insn, const uint16_t *sym,
               const uint8_t *br, const uint32_t *callee, size_t n)
{
    walker w = { .r = r, .sym = sym, .br = br, .callee = callee, .n = n,
                 .budget = WALK_BUDGET };
    w.stack[0].method = method;
    w.stack[0].insn = insn;
    return walk(&w, 1, 0);
}
