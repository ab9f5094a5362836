/* The ICFG fallback: a shortest path through the program's control flow
 * to the next segment's first bytecode where no fill rejoins. */
#include "recover/filter.h"

#include "common/jvm.h"

typedef struct gnode {
    uint64_t method_id;
    uint32_t insn;
    int32_t parent;
    int32_t frame;            /* own pushed frame on top (index in frames), -1 none */
    uint16_t popped;          /* frames of the known stack returned from */
    uint8_t via;              /* how it was reached: 0 step, 1 call, 2 return */
} gnode;

typedef struct gframe {
    uint64_t method_id;       /* the caller */
    uint32_t ret_insn;        /* where the caller goes on */
    int32_t parent;
    int32_t callsite;         /* bci of the call in the caller */
    uint32_t depth;
} gframe;

/* A successor in the search: (method, insn, frame, popped, via). A call's
 * new frame (newf) is only stored once the state proves unseen: an invoke
 * may have many targets, most of them reached before. */
typedef struct succ {
    uint64_t m;
    uint32_t i;
    int32_t fr;
    uint16_t pop;
    uint8_t via;
    uint8_t newf;
    gframe nf;
} succ;

/* The shortest ICFG path from (sim's top method, bci) to the target's first
 * bytecode that keeps the call stack consistent, as FL_GUESSED events
 * (without its two ends) into out. Returns 0 when none is found within the
 * search bound. */
int rv_icfg_path(rv_filter *f, uint64_t mid, int32_t bci, const GArray *sim,
                 const target *t, GArray *out)
{
    const rv_icfg *ic = f->o.icfg;
    if (!ic || !t->method_id || !sim->len)
        return 0;
    const rc_cfg *g0 = ic->cfg(ic->ctx, mid);
    if (!g0)
        return 0;
    int64_t i0 = rc_cfg_index(g0, (uint32_t)bci);
    if (i0 < 0)
        return 0;
    GArray *nodes = g_array_new(FALSE, FALSE, sizeof(gnode));
    GArray *frames = g_array_new(FALSE, FALSE, sizeof(gframe));
    GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
    gnode s0 = { mid, (uint32_t)i0, -1, -1, 0, 0 };
    g_array_append_val(nodes, s0);
    int found = -1;
    uint64_t tg[64];
    for (guint qi = 0; qi < nodes->len && found < 0; qi++) {
        gnode nd = g_array_index(nodes, gnode, qi);
        const rc_cfg *g = ic->cfg(ic->ctx, nd.method_id);
        if (!g || nd.insn >= g->ninsn)
            continue;
        int op = g->op[nd.insn];
        succ nx[330];
        unsigned nn = 0;
        if (jvm_is_return(op)) {
            if (nd.frame >= 0) {
                gframe *fr = &g_array_index(frames, gframe, nd.frame);
                nx[nn++] = (succ){ fr->method_id, fr->ret_insn, fr->parent, nd.popped, 2, 0,
                                   { 0 } };
            } else if (nd.popped + 1u < sim->len) {
                /* back into a frame of the known stack: where its call was */
                const frame *top = &g_array_index(sim, frame, sim->len - 1 - nd.popped);
                const frame *caller = &g_array_index(sim, frame, sim->len - 2 - nd.popped);
                const rc_cfg *cg = top->bci >= 0 ? ic->cfg(ic->ctx, caller->method_id) : NULL;
                int64_t ci = cg ? rc_cfg_index(cg, (uint32_t)top->bci) : -1;
                if (ci >= 0 && (uint32_t)ci + 1 < cg->ninsn)
                    nx[nn++] = (succ){ caller->method_id, (uint32_t)ci + 1, -1,
                                                (uint16_t)(nd.popped + 1), 2, 0, { 0 } };
            }
        } else {
            if (jvm_is_invoke(op)) {
                size_t nt = ic->targets(ic->ctx, nd.method_id, g->bci[nd.insn], tg, 64);
                uint32_t depth = nd.frame >= 0 ? g_array_index(frames, gframe, nd.frame).depth : 0;
                for (size_t k = 0; k < nt && depth < 16; k++) {
                    const rc_cfg *tgc = ic->cfg(ic->ctx, tg[k]);
                    if (!tgc || !tgc->ninsn || nd.insn + 1 >= g->ninsn)
                        continue;
                    gframe fr = { nd.method_id, nd.insn + 1, nd.frame, (int32_t)g->bci[nd.insn],
                                  depth + 1 };
                    nx[nn++] = (succ){ tg[k], 0, -1, nd.popped, 1, 1, fr };
                }
            }
            for (uint32_t k = g->first[nd.insn]; k < g->first[nd.insn + 1] && nn < 320; k++) {
                if (g->edge[k].kind == RC_EDGE_EXCEPTION)
                    continue;
                /* an invoke's own successor only when its target is unknown */
                if (jvm_is_invoke(op) && nn)
                    break;
                nx[nn++] = (succ){ nd.method_id, g->edge[k].to, nd.frame, nd.popped, 0, 0, { 0 } };
            }
        }
        for (unsigned k = 0; k < nn; k++) {
            const gframe *top = nx[k].newf ? &nx[k].nf
                                : nx[k].fr >= 0 ? &g_array_index(frames, gframe, nx[k].fr) : NULL;
            uint64_t key = mix64(nx[k].m ^ ((uint64_t)nx[k].i << 40) ^
                                 ((uint64_t)nx[k].pop << 28)) +
                           (top ? mix64(top->method_id + top->ret_insn + top->depth * 977u) : 0);
            key |= 1;
            if (g_hash_table_contains(seen, (gpointer)(uintptr_t)key))
                continue;
            g_hash_table_add(seen, (gpointer)(uintptr_t)key);
            if (nx[k].newf) {
                g_array_append_val(frames, nx[k].nf);
                nx[k].fr = (int32_t)frames->len - 1;
            }
            gnode c = { nx[k].m, nx[k].i, (int32_t)qi, nx[k].fr, nx[k].pop, nx[k].via };
            g_array_append_val(nodes, c);
            const rc_cfg *cg = ic->cfg(ic->ctx, c.method_id);
            if (c.method_id == t->method_id && cg && c.insn < cg->ninsn &&
                cg->bci[c.insn] == (uint32_t)t->bci) {
                /* the caller must be the one the next segment shows, where known */
                uint64_t caller = top ? top->method_id
                                  : c.popped + 1u < sim->len
                                      ? g_array_index(sim, frame, sim->len - 2 - c.popped).method_id
                                      : 0;
                uint64_t want = t->stk->len >= 2
                                    ? g_array_index(t->stk, frame, t->stk->len - 2).method_id : 0;
                if (!caller || !want || caller == want) {
                    found = (int)nodes->len - 1;
                    break;
                }
            }
            if (nodes->len >= f->o.max_nodes)
                break;
        }
        if (nodes->len >= f->o.max_nodes)
            break;
    }
    if (found >= 0) {
        /* the path, goal to start, then emitted start to goal */
        GArray *path = g_array_new(FALSE, FALSE, sizeof(int32_t));
        for (int32_t x = found; x > 0; x = g_array_index(nodes, gnode, x).parent)
            g_array_append_val(path, x);
        for (guint k = path->len; k-- > 0;) {
            int32_t x = g_array_index(path, int32_t, k);
            const gnode *nd = &g_array_index(nodes, gnode, x);
            const gnode *pa = &g_array_index(nodes, gnode, nd->parent);
            fl_event ev = { .origin = FL_GUESSED, .tid = f->tid, .bci = -1, .opcode = -1 };
            if (nd->via == 1) {
                const rc_cfg *pg = ic->cfg(ic->ctx, pa->method_id);
                ev.kind = FL_CALL;
                ev.method_id = nd->method_id;
                ev.bci = (int32_t)pg->bci[pa->insn];
                g_array_append_val(out, ev);
            } else if (nd->via == 2) {
                ev.kind = FL_RETURN;
                ev.method_id = pa->method_id;
                g_array_append_val(out, ev);
            }
            if (x == found)
                break;
            const rc_cfg *g = ic->cfg(ic->ctx, nd->method_id);
            fl_event b = { .kind = FL_BYTECODE, .origin = FL_GUESSED, .tid = f->tid,
                           .method_id = nd->method_id, .bci = (int32_t)g->bci[nd->insn],
                           .opcode = g->op[nd->insn], .count = 1 };
            g_array_append_val(out, b);
        }
        g_array_free(path, TRUE);
    }
    g_hash_table_destroy(seen);
    g_array_free(frames, TRUE);
    g_array_free(nodes, TRUE);
    return found >= 0;
}

/* ---- the program's ICFG ----------------------------------------------- */

static const rc_cfg *prog_cfg(void *ctx, uint64_t method_id)
{
    rc_program *p = ctx;
    const rc_method *m = p && method_id ? rc_method_by_id(p, method_id) : NULL;
    return m && m->code ? rc_cfg_get(p, m) : NULL;
}

static size_t prog_targets(void *ctx, uint64_t method_id, uint32_t bci, uint64_t *out,
                           size_t max)
{
    rc_program *p = ctx;
    const rc_method *m = p && method_id ? rc_method_by_id(p, method_id) : NULL;
    if (!m)
        return 0;
    const rc_method *const *tg;
    bool open;
    size_t n = rc_call_targets(p, m, bci, &tg, &open);
    size_t k = 0;
    for (size_t i = 0; i < n && k < max; i++)
        if (tg[i]->id)
            out[k++] = tg[i]->id;
    return k;
}

rv_icfg rv_program_icfg(rc_program *p)
{
    rv_icfg ic = { prog_cfg, prog_targets, p };
    return ic;
}
