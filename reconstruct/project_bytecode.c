/* Interpreted bytecodes (project_int.h): a frame stepped by the opcode the
 * decoder saw, frames started where the context is unknown, exceptions. */
#include "reconstruct/project_int.h"

static void step_interp_bc(rp_projector *r, const frame *f, const hist *h, int op,
                           const dc_event *e)
{
    const rc_method *m = rc_method_at(r->p, f->method);
    const rc_cfg *g = m ? rc_cfg_get(r->p, m) : NULL;
    if (!g || f->insn >= g->ninsn || g->op[f->insn] != op)
        return;
    uint32_t i = f->insn;
    h = pj_record(r, h, FL_BYTECODE, m->id, (int32_t)g->bci[i], op, 0);
    if (jvm_is_return(op)) {
        const hist *hh = h;
        const frame *c = pj_pop(r, f, &hh, 0);
        pj_add(r, pj_returned_to(r, c, f->method), hh);
        return;
    }
    frame n = *f;
    n.last = i;
    n.throwing = false;
    if (op == JVM_ATHROW) {
        n.throwing = true;
        pj_add(r, pj_frame_copy(r, &n), h);
        return;
    }
    if (jvm_is_invoke(op)) {
        n.calling = true;
        n.insn = NONE;
        for (uint32_t k = g->first[i]; k < g->first[i + 1]; k++)
            if (g->edge[k].kind == RC_EDGE_NEXT)
                n.insn = g->edge[k].to;
        pj_add(r, pj_frame_copy(r, &n), h);
        return;
    }
    uint8_t how = e ? pj_branch_of(e) : BR_UNKNOWN;
    for (uint32_t k = g->first[i]; k < g->first[i + 1]; k++) {
        if (g->edge[k].kind == RC_EDGE_EXCEPTION || !pj_edge_fits(g->edge[k].kind, how))
            continue;
        /* switch targets may repeat, and a branch may jump to the next
         * instruction (`if_icmpne` over an empty block): a target is
         * entered once, through the first edge of the outcome seen */
        bool dup = false;
        for (uint32_t j = g->first[i]; j < k; j++)
            if (g->edge[j].kind != RC_EDGE_EXCEPTION && pj_edge_fits(g->edge[j].kind, how) &&
                   g->edge[j].to == g->edge[k].to)
                dup = true;
        if (dup)
            continue;
        n.insn = g->edge[k].to;
        pj_add(r, pj_frame_copy(r, &n), h);
    }
}

static void index_list_free(gpointer p)
{
    g_array_free(p, TRUE);
}

void pj_fit_entry_free(gpointer p)
{
    fit_entry *f = p;
    g_array_free(f->fit, TRUE);
    if (f->callees) {
        g_array_free(f->callees->any, TRUE);
        g_hash_table_destroy(f->callees->by_callee);
        g_free(f->callees);
    }
    g_free(f);
}

/* Candidates from an index, filtered by the lookahead; each becomes a frame
 * on top of `below` (and is run through the current bytecode). */
/* The candidates that best explain the lookahead (expand); the same for
 * every hypothesis at this event, so computed once per event. */
typedef struct scored_pos {
    pos ps;
    int score;
} scored_pos;

#define RAW_SCORES (NONE - 1)  /* fit_entry.returned of a scores() entry */

static fit_entry *memo_find(rp_projector *r, const void *cands, uint32_t only_method,
                            uint32_t returned, int op)
{
    if (r->fit_event != r->st.events) {
        g_ptr_array_set_size(r->fit_memo, 0);
        r->fit_event = r->st.events;
    }
    for (guint k = 0; k < r->fit_memo->len; k++) {
        fit_entry *f = g_ptr_array_index(r->fit_memo, k);
        if (f->cands == cands && f->only_method == only_method && f->returned == returned &&
            f->op == op)
            return f;
    }
    return NULL;
}

static const GArray *memo_add(rp_projector *r, const void *cands, uint32_t only_method,
                              uint32_t returned, int op, GArray *fit)
{
    fit_entry *memo = g_new0(fit_entry, 1);
    memo->cands = cands;
    memo->only_method = only_method;
    memo->returned = returned;
    memo->op = op;
    memo->fit = fit;
    g_ptr_array_add(r->fit_memo, memo);
    return fit;
}

/* How well each candidate explains the lookahead (scored_pos, W_NO left
 * out); once per event for each candidate list. */
static const GArray *scores(rp_projector *r, GArray *cands, const pos_pairs *pp,
                            uint32_t only_method, int op, const dc_event *e)
{
    const fit_entry *f = memo_find(r, cands, only_method, RAW_SCORES, op);
    if (f)
        return f->fit;
    uint16_t ops[LOOKAHEAD];
    uint8_t br[LOOKAHEAD];
    uint32_t jm[LOOKAHEAD];
    size_t n = pj_lookahead(r, r->ev_slot, ops, br, jm, LOOKAHEAD);
    if (n == 0 || ops[0] != op) {
        ops[0] = (uint16_t)op;
        br[0] = e ? pj_branch_of(e) : BR_UNKNOWN;
        jm[0] = NONE;
        n = 1;
    }
    /* the positions that can explain more than the first opcode (the
     * others score W_NO: see pos_pairs) */
    GArray *list = only_method == NONE ? pj_pairs_narrow(pp, ops, n) : NULL;
    if (only_method != NONE) {
        /* the method's own instructions of that opcode (in the order of the
         * program-wide list, without going through it) */
        const rc_method *om = rc_method_at(r->p, only_method);
        const rc_cfg *og = om ? rc_cfg_get(r->p, om) : NULL;
        list = g_array_new(FALSE, FALSE, sizeof(pos));
        for (uint32_t i = 0; og && i < og->ninsn; i++) {
            if (og->op[i] != op)
                continue;
            pos ps = { only_method, i };
            g_array_append_val(list, ps);
        }
    }
    const GArray *c = list ? list : cands;
    GArray *out = g_array_new(FALSE, FALSE, sizeof(scored_pos));
    for (guint k = 0; k < c->len; k++) {
        scored_pos sp = { g_array_index(c, pos, k), W_NO };
        if (only_method != NONE && sp.ps.method != only_method)
            continue;
        if (!rc_method_may_run(r->p, rc_method_at(r->p, sp.ps.method), r->ev->tsc))
            continue;
        sp.score = pj_accepts(r, sp.ps.method, sp.ps.insn, ops, br, jm, n);
        if (sp.score > W_NO)
            g_array_append_val(out, sp);
    }
    if (list)
        g_array_free(list, TRUE);
    return memo_add(r, cands, only_method, RAW_SCORES, op, out);
}

static callee_index *callee_index_of(rp_projector *r, const GArray *all)
{
    callee_index *ci = g_new0(callee_index, 1);
    ci->any = g_array_new(FALSE, FALSE, sizeof(guint));
    ci->by_callee = g_hash_table_new_full(NULL, NULL, NULL, index_list_free);
    for (guint k = 0; k < all->len; k++) {
        const scored_pos *sp = &g_array_index(all, scored_pos, k);
        if (sp->ps.insn == 0) {
            g_array_append_val(ci->any, k);
            continue;
        }
        const rc_method *cm = rc_method_at(r->p, sp->ps.method);
        const rc_method *const *t;
        bool open = false;
        size_t nt = rc_call_targets_at(r->p, cm, sp->ps.insn - 1, &t, &open);
        if (open)
            g_array_append_val(ci->any, k);
        for (size_t j = 0; j < nt; j++) {
            gpointer key = GUINT_TO_POINTER(t[j]->index + 1);
            GArray *l = g_hash_table_lookup(ci->by_callee, key);
            if (!l) {
                l = g_array_new(FALSE, FALSE, sizeof(guint));
                g_hash_table_insert(ci->by_callee, key, l);
            }
            /* a target listed twice adds the candidate once */
            if (!l->len || g_array_index(l, guint, l->len - 1) != k)
                g_array_append_val(l, k);
        }
    }
    return ci;
}

/* Start candidates for a bytecode op in a frame whose place is unknown:
 * the positions of cands (keyed by opcode pair in pp; NULL: none), only
 * those of only_method (NONE: any), where the frame below returned from
 * `returned` (NONE: not known to). */
typedef struct cand_query {
    GArray *cands;
    const pos_pairs *pp;
    uint32_t only_method;
    uint32_t returned;
    int op;
} cand_query;

/* The candidates that best explain the lookahead (expand): the same for
 * every hypothesis at this event with that method. Where some explain the
 * whole lookahead, the ones that only might (open call sites, budget) are
 * dropped. */
static const GArray *scored(rp_projector *r, const cand_query *q, const dc_event *e)
{
    GArray *cands = q->cands;
    uint32_t only_method = q->only_method, returned = q->returned;
    int op = q->op;
    const fit_entry *f = memo_find(r, cands, only_method, returned, op);
    if (f)
        return f->fit;
    const GArray *all = scores(r, cands, q->pp, only_method, op, e);
    GArray *fit = g_array_new(FALSE, FALSE, sizeof(pos));
    int top = W_MAYBE;
    if (returned == NONE) {
        for (guint k = 0; k < all->len; k++) {
            scored_pos sp = g_array_index(all, scored_pos, k);
            if (sp.score < top)
                continue;
            if (sp.score > top) {
                g_array_set_size(fit, 0);
                top = sp.score;
            }
            g_array_append_val(fit, sp.ps);
        }
        return memo_add(r, cands, only_method, returned, op, fit);
    }
    /* The instruction before a candidate is the invoke that called
     * `returned`: its targets must include it, unless the site is open
     * (then the candidate only might fit). The two index lists are merged
     * in the list's order. */
    fit_entry *raw = memo_find(r, cands, only_method, RAW_SCORES, op);
    if (!raw->callees)
        raw->callees = callee_index_of(r, all);
    const GArray *any = raw->callees->any;
    const GArray *hit = g_hash_table_lookup(raw->callees->by_callee,
                                            GUINT_TO_POINTER(returned + 1));
    guint na = any->len, nh = hit ? hit->len : 0;
    for (guint a = 0, h = 0; a < na || h < nh;) {
        guint ka = a < na ? g_array_index(any, guint, a) : G_MAXUINT;
        guint kh = h < nh ? g_array_index(hit, guint, h) : G_MAXUINT;
        guint k = MIN(ka, kh);
        bool found = kh == k;
        a += ka == k;
        h += kh == k;
        scored_pos sp = g_array_index(all, scored_pos, k);
        if (!found && sp.ps.insn > 0 && sp.score == W_YES)
            sp.score = W_MAYBE;
        if (sp.score < top)
            continue;
        if (sp.score > top) {
            g_array_set_size(fit, 0);
            top = sp.score;
        }
        g_array_append_val(fit, sp.ps);
    }
    return memo_add(r, cands, only_method, returned, op, fit);
}

/* Frames for the candidates that best explain the lookahead, pushed on
 * below; context_call: below is an unknown context that called them. */
static void expand(rp_projector *r, const frame *below, const hist *h, const cand_query *q,
                   const dc_event *e, bool context_call)
{
    uint32_t returned = q->returned;
    int op = q->op;
    const GArray *fit = scored(r, q, e);
    /* A frame found at the bottom of a segment that follows an unresolved
     * one may be a frame that segment left running: then the frames it
     * had below that one are its callers. Both are tried, the linked one
     * first (kept among equals); a wrong link dies at its first return. */
    bool may_link = context_call && below && below->kind == FR_UNKNOWN && !below->from_before &&
                    r->before->len;
    /* A return in an unknown context fits every method that returns that
     * way, and one return after another (a segment that starts in the
     * middle of them) multiplies the hypotheses by each one's methods: the
     * bytecodes of a caller tell them apart only when one shows up. Beyond
     * RETURN_FANOUT candidates the frame stays unidentified: its bytecode
     * goes out without a method, and the frame below learns nothing of who
     * returned (a frame the segment before left running is still tried). */
    bool anonymous = jvm_is_return(op) && below && below->kind == FR_UNKNOWN &&
                     fit->len > RETURN_FANOUT;
    if (anonymous) {
        pj_add(r, pj_returned_to(r, below, NONE), pj_record(r, h, FL_BYTECODE, 0, -1, op, 0));
        if (!may_link)
            return;
    }
    for (guint k = 0; k < fit->len; k++) {
        pos ps = g_array_index(fit, pos, k);
        if (r->next->len >= MAX_HYP) {
            r->st.capped++;
            break;
        }
        uint64_t id = pj_method_id_of(r, ps.method);
        frame f = pj_interp_frame(ps.method, ps.insn, id);
        if (returned != NONE || context_call) {
            /* a caller found after its callee returned: it was running all along */
            f.last = ps.insn > 0 ? ps.insn - 1 : NONE;
        }
        int j = may_link ? pj_before_find(r, ps.method, NULL) : -1;
        if (j > 0) {
            const frame *saved = &g_array_index(r->before, frame, j);
            frame lf = f;
            lf.from_before = true;
            lf.recv = saved->recv;
            lf.this_call = saved->this_call;
            const hist *hl = pj_record_before(r, h, (guint)j - 1);
            hl = pj_record(r, hl, FL_CALL, id, -1, -1, FL_F_CONTEXT);
            step_interp_bc(r, pj_push(r, pj_before_frame(r, (guint)j - 1), lf), hl, op, e);
            if (r->next->len >= MAX_HYP) {
                r->st.capped++;
                break;
            }
        }
        if (anonymous)
            continue;
        const hist *hh = h;
        if (context_call)
            hh = pj_record(r, hh, FL_CALL, id, -1, -1, FL_F_CONTEXT);
        step_interp_bc(r, pj_push(r, below, f), hh, op, e);
    }
}

/* The exception thrown at `f` is caught by a handler of f or of a caller. */
static void step_throw(rp_projector *r, const frame *f, const hist *h, int op, const dc_event *e)
{
    for (int guard = 0; f && guard < 64; guard++) {
        if (f->kind == FR_INTERP && f->insn != ANY && f->last != NONE) {
            const rc_method *m = rc_method_at(r->p, f->method);
            const rc_cfg *g = m ? rc_cfg_get(r->p, m) : NULL;
            uint32_t bci = g && f->last < g->ninsn ? g->bci[f->last] : UINT32_MAX;
            for (uint32_t k = 0; g && k < m->nhandlers; k++) {
                const rc_handler *hd = &m->handlers[k];
                if (bci < hd->start_pc || bci >= hd->end_pc)
                    continue;
                int64_t at = rc_cfg_index(g, hd->handler_pc);
                if (at < 0)
                    continue;
                frame n = *f;
                n.insn = (uint32_t)at;
                n.calling = n.throwing = false;
                step_interp_bc(r, pj_frame_copy(r, &n), h, op, e);
            }
        }
        if (f->kind == FR_UNKNOWN || f->kind == FR_VMCALL)
            return;
        uint32_t was = f->kind == FR_INTERP ? f->method : NONE;
        f = pj_pop(r, f, &h, FL_F_EXCEPTION);
        if (!f) {
            frame u = pj_unknown_frame();
            u.after_return = true;
            u.returned = was;
            f = pj_push(r, NULL, u);
            (void)f;
            return;
        }
    }
}

/* The opcode of the instruction the frame ran last. */
static int last_op(rp_projector *r, const frame *f)
{
    const rc_method *m = rc_method_at(r->p, f->method);
    const rc_cfg *g = m ? rc_cfg_get(r->p, m) : NULL;
    return g && f->last < g->ninsn ? g->op[f->last] : -1;
}

void pj_step_bc(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    int op = e->opcode;
    if (op < 0)
        return;
    for (;;) {
        if (!f) {
            f = pj_push(r, NULL, pj_unknown_frame());
            continue;
        }
        switch (f->kind) {
        case FR_OPAQUE:
            /* a native method returned without the interpreter's return entry */
            f = pj_returned_to(r, pj_pop(r, f, &h, 0), NONE);
            continue;
        case FR_VMCALL:
            if (f->calling) {
                f = f->caller;
                continue;
            }
            return;
        case FR_COMPILED:
            return;             /* compiled code does not run templates */
        case FR_UNKNOWN: {
            pos_index *x = pj_index_get(r);
            cand_query q = f->after_return
                               ? (cand_query){ x->after_call[op], &x->after_call2, NONE,
                                               f->returned, op }
                               : (cand_query){ x->any[op], &x->any2, NONE, NONE, op };
            expand(r, f, h, &q, e, true);
            return;
        }
        case FR_INTERP:
            if (f->throwing) {
                step_throw(r, f, h, op, e);
                return;
            }
            if (f->insn == ANY) {
                cand_query q = { pj_index_get(r)->any[op], NULL, f->method, NONE, op };
                expand(r, f->caller, h, &q, e, false);
                return;
            }
            if (f->calling)
                return;         /* its callee has not been entered */
            if ((e->flags & DC_F_RESUMED) && f->last != NONE && last_op(r, f) == op)
                pj_add(r, f, h);   /* the template resumes after a call into the VM */
            step_interp_bc(r, f, h, op, e);
            return;
        default:
            return;
        }
    }
}
