/* Matching a gap's two sides: what the next segment starts with, the
 * segment's past and its ranked candidates in the history, and how far a
 * candidate continues. */
#include "recover/filter.h"

#include <stdlib.h>
#include <string.h>

/* What the next segment starts with: its first K placed bytecodes, or,
 * where it starts in compiled code (K calls and returns of inlined frames
 * before its first bytecode, if any), those calls and returns, as a past of
 * compiled code is anchored on them. A rejoin on the bytecodes would come
 * after those calls and returns, and the fill would hold them as well as
 * the segment; fewer than K are lead, which a fill that rejoins on the
 * bytecodes ends before (README.md, step 5). */
void rv_target_of(rv_filter *f, target *t)
{
    t->nwant = 0;
    t->nlead = 0;
    t->idx = &f->bc;
    t->method_id = 0;
    t->bci = -1;
    t->stk = g_array_new(FALSE, FALSE, sizeof(frame));
    unsigned ncalls = 0;      /* calls and returns before the first bytecode, in lead */
    GArray *cstk = g_array_new(FALSE, FALSE, sizeof(frame));
    for (guint i = 0; i < f->pending->len; i++) {
        const fl_event *ev = &g_array_index(f->pending, pev, i).ev;
        if (ev->kind == FL_SEGMENT) {
            for (uint32_t d = 0; ev->stack && d < ev->depth; d++) {
                frame fr = { ev->stack[d], -1 };
                g_array_append_val(t->stk, fr);
            }
            continue;
        }
        if (ev->kind != FL_BYTECODE) {
            if (rv_lead_symbol(ev) && !t->method_id && ncalls < f->o.k) {
                if (!ncalls)
                    g_array_append_vals(cstk, t->stk->data, t->stk->len);
                t->lead[ncalls++] = rv_key_of(ev, 1);
            }
            if (!t->method_id)
                rv_stack_apply(t->stk, ev);
            continue;
        }
        if (!placed(ev))
            break;
        if (!t->method_id) {
            t->method_id = ev->method_id;
            t->bci = ev->bci;
        }
        t->want[t->nwant++] = sym_of(ev->method_id, ev->bci);
        if (t->nwant >= f->o.k)
            break;
    }
    t->nlead = ncalls;
    if (ncalls >= f->o.k) {
        t->nlead = 0;
        memcpy(t->want, t->lead, ncalls * sizeof *t->lead);
        t->nwant = ncalls;
        t->idx = &f->cr;
        t->method_id = 0;
        t->bci = -1;
        g_array_set_size(t->stk, 0);
        g_array_append_vals(t->stk, cstk->data, cstk->len);
    }
    g_array_free(cstk, TRUE);
}

/* Frames of known context the next segment must start with for
 * stack_meets to take it as the bottom of a deeper stack. */
#define MEET_BELOW_MIN 4

/* Is a stack at the rejoin point the one the next segment starts in? The
 * frames both know, from the top, must agree (1). Or (2) the next segment
 * starts in a known context of MEET_BELOW_MIN frames or more that is the
 * bottom of the stack: the frames above it returned in the gap. A segment
 * that linked to the kept stack (reconstruct/) knows its context from the
 * thread's root, and the stack at a gap where the decoder could not follow
 * code holds what the segment before called and the gap returned from. */
static int stack_meets(const GArray *sim, const target *t)
{
    if (t->stk->len >= MEET_BELOW_MIN && sim->len > t->stk->len) {
        guint i = 0;
        while (i < t->stk->len && g_array_index(sim, frame, i).method_id ==
                                      g_array_index(t->stk, frame, i).method_id)
            i++;
        if (i == t->stk->len)
            return 2;
    }
    if (sim->len && t->method_id &&
        g_array_index(sim, frame, sim->len - 1).method_id != t->method_id)
        return 0;
    guint n = sim->len < t->stk->len ? sim->len : t->stk->len;
    for (guint i = 0; i < n; i++)
        if (g_array_index(sim, frame, sim->len - 1 - i).method_id !=
            g_array_index(t->stk, frame, t->stk->len - 1 - i).method_id)
            return 0;
    return 1;
}

/* Does the history's symbol run starting at event e begin with want[0..n)? */
int rv_rejoins_at(rv_filter *f, uint64_t e, const target *t)
{
    hev *x = ev_at(f, e);
    int64_t first = t->idx == &f->bc ? x->sym : x->csym;
    if (first < 0 || !t->nwant)
        return 0;
    uint64_t a = (uint64_t)first;
    for (unsigned i = 0; i < t->nwant; i++) {
        if (a + i >= si_end(t->idx))
            return 0;
        hsym *s = si_at(t->idx, a + i);
        if (s->s != t->want[i] || (i > 0 && s->run < si_at(t->idx, a)->run + i))
            return 0;
    }
    return 1;
}

/* A rejoin at event e on the next segment's bytecodes: how many of the
 * events before it, after p, are the calls and returns the segment starts
 * with before them (all of them, else 0). The fill ends before those: the
 * segment holds them. */
uint64_t rv_lead_before(rv_filter *f, uint64_t p, uint64_t e, const target *t)
{
    if (!t->nlead || e < p + 1 + t->nlead)
        return 0;
    for (unsigned i = 0; i < t->nlead; i++)
        if (ev_at(f, e - t->nlead + i)->key != t->lead[i])
            return 0;
    return t->nlead;
}

int rv_same_stack(const GArray *a, const GArray *b)
{
    if (a->len != b->len)
        return 0;
    for (guint i = 0; i < a->len; i++) {
        const frame *x = &g_array_index(a, frame, i), *y = &g_array_index(b, frame, i);
        if (x->method_id != y->method_id || x->bci != y->bci)
            return 0;
    }
    return 1;
}

/* ---- ranking ----------------------------------------------------------- */

/* The past's newest K symbols of idx's kind (placed bytecodes, or calls and
 * returns), before any wall (an unplaced bytecode): the anchor. 0: too few. */
int rv_past_anchor(rv_filter *f, past *ps, const symindex *idx)
{
    uint64_t s[64];
    unsigned ns = 0;
    for (uint32_t i = 0; i < ps->len && ns < f->o.k; i++) {
        const hev *x = ev_at(f, g_array_index(ps->a, uint64_t, i));
        if (x->kind == FL_BYTECODE && x->sym < 0)
            return 0;
        int64_t a = idx == &f->bc ? x->sym : x->csym;
        if (a < 0)
            continue;
        s[ns++] = si_at(idx, (uint64_t)a)->s;
        ps->span = i + 1;
    }
    if (ns < f->o.k)
        return 0;
    ps->kkey = rv_kgram_of(s, f->o.k);
    ps->idx = idx;
    return 1;
}

/* Prepares the past; 0 when it has no anchor: fewer than K placed bytecodes
 * and (where calls is nonzero) fewer than K calls and returns before a wall
 * or its start. The bytecodes are the anchor where there are enough of
 * them; compiled code shows only its calls and returns, and a thread that
 * has run nothing else for the past's length still has those (README.md,
 * step 1). */
int rv_past_prepare(rv_filter *f, past *ps, int calls)
{
    ps->len = ps->a->len < f->o.suffix_cap ? ps->a->len : f->o.suffix_cap;
    g_array_set_size(ps->t1, 0);
    g_array_set_size(ps->t2, 0);
    for (uint32_t i = 0; i < ps->len; i++) {
        hev *x = ev_at(f, g_array_index(ps->a, uint64_t, i));
        tsym t = { i, x->key };
        if (x->tier <= 1)
            g_array_append_val(ps->t1, t);
        if (x->tier <= 2)
            g_array_append_val(ps->t2, t);
    }
    ps->span = 0;
    return rv_past_anchor(f, ps, &f->bc) || (calls && rv_past_anchor(f, ps, &f->cr));
}

/* The nearest tier-t event of the history at or before q and not before
 * lo, or UINT64_MAX. */
static uint64_t nearest(rv_filter *f, uint64_t q, uint64_t lo, int t)
{
    const hev *x = ev_at(f, q);
    uint32_t d = t == 1 ? x->d1 : x->d2;
    return d == NONE || q < lo + d ? UINT64_MAX : q - d;
}

/* The common suffix of the past and the history ending at p, at tier t (1,
 * 2; 3: every event): how many events of the past precede the first place
 * where the two tier-t projections differ, in symbol or in position. Each
 * coarser tier only drops events, so its first difference comes no earlier:
 * tier 3 <= tier 2 <= tier 1. lenb: events of p's segment up to p. */
static uint32_t suffix(rv_filter *f, const past *ps, uint64_t p, uint64_t lenb, int t)
{
    uint32_t lim = ps->len;
    if (lenb < lim)
        lim = (uint32_t)lenb;
    if (t == 3) {
        uint32_t i = 0;
        while (i < lim) {
            uint64_t ka = ev_at(f, g_array_index(ps->a, uint64_t, i))->key;
            if (!ka || ka != ev_at(f, p - i)->key)
                break;
            i++;
        }
        return i;
    }
    const GArray *ta = t == 1 ? ps->t1 : ps->t2;
    uint64_t lo = p + 1 - lenb;
    uint64_t q = nearest(f, p, lo, t);
    for (guint k = 0;; k++) {
        uint64_t a = k < ta->len ? g_array_index(ta, tsym, k).pos : ps->len;
        uint64_t b = q != UINT64_MAX ? p - q : lenb;
        if (a >= lim && b >= lim)
            return lim;
        if (a != b || !g_array_index(ta, tsym, k).key ||
            g_array_index(ta, tsym, k).key != ev_at(f, q)->key)
            return (uint32_t)(a < b ? (a < lim ? a : lim) : (b < lim ? b : lim));
        q = q > lo ? nearest(f, q - 1, lo, t) : UINT64_MAX;
    }
}

/* Does (l, p) rank above candidate c (longer, then more recent)? */
static int beats(uint32_t l, uint64_t p, const cand *c)
{
    return l > c->l3 || (l == c->l3 && p > c->p);
}

static int by_l1(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->l1 != b->l1)
        return a->l1 > b->l1 ? -1 : 1;
    return a->p > b->p ? -1 : a->p < b->p;
}

/* The top N candidates for the past, best first, into top. */
void rv_rank(rv_filter *f, const past *ps, unsigned n, GArray *top)
{
    g_array_set_size(top, 0);
    GArray *all = g_array_new(FALSE, FALSE, sizeof(cand));
    uint64_t tail = 0;
    /* the tail: events after the anchor's newest symbol */
    for (uint32_t i = 0; i < ps->len; i++) {
        const hev *x = ev_at(f, g_array_index(ps->a, uint64_t, i));
        if ((ps->idx == &f->bc ? x->sym : x->csym) >= 0) {
            tail = i;
            break;
        }
    }
    rv_si_ready(ps->idx == &f->bc ? &f->bc : &f->cr, f->o.k);
    gpointer head = g_hash_table_lookup(ps->idx->head, (gpointer)(uintptr_t)ps->kkey);
    unsigned walked = 0;
    for (uint64_t c = (uint64_t)(uintptr_t)head;
         c && c - 1 >= ps->idx->sbase && walked < RV_RANK_WALK; walked++) {
        uint64_t j = c - 1;
        hsym *cs = si_at(ps->idx, j);
        c = cs->prev;
        uint64_t p = cs->ev + tail;
        if (p + 1 >= ev_end(f))
            continue;
        uint32_t seg = ev_at(f, cs->ev)->segno, next = ev_at(f, p + 1)->segno;
        if (ev_at(f, p)->segno != seg || (next != seg && !(next == seg + 1 && seg_joined(f, next))))
            continue;   /* the tail or the continuation would leave the segment */
        uint64_t lenb = p + 1 - rv_seg_begin(f, seg);
        cand cd = { .p = p };
        cd.l1 = suffix(f, ps, p, lenb, 1);
        if (cd.l1 < ps->span)
            continue;   /* cannot hold the anchor: a hash collision or another tail */
        g_array_append_val(all, cd);
    }
    f->st.candidates += all->len;
    if (all->len > 1)
        qsort(all->data, all->len, sizeof(cand), by_l1);
    for (guint i = 0; i < all->len; i++) {
        cand *cd = &g_array_index(all, cand, i);
        const cand *worst = top->len == n ? &g_array_index(top, cand, n - 1) : NULL;
        /* Theorem 5.5: the tier-1 suffix bounds the finer ones, and the
         * candidates come in decreasing tier-1 order: none of the rest can
         * enter the top N */
        if (worst && !f->o.no_prune && !beats(cd->l1, cd->p, worst)) {
            f->st.pruned_t1 += all->len - i;
            break;
        }
        uint32_t seg = ev_at(f, cd->p)->segno;
        uint64_t lenb = cd->p + 1 - rv_seg_begin(f, seg);
        cd->l2 = suffix(f, ps, cd->p, lenb, 2);
        if (worst && !f->o.no_prune && !beats(cd->l2, cd->p, worst)) {
            f->st.pruned_t2++;
            continue;
        }
        cd->l3 = suffix(f, ps, cd->p, lenb, 3);
        f->st.ranked_t3++;
        if (cd->l3 < ps->span || (worst && !beats(cd->l3, cd->p, worst)))
            continue;
        guint at = top->len;
        while (at > 0 && beats(cd->l3, cd->p, &g_array_index(top, cand, at - 1)))
            at--;
        g_array_insert_val(top, at, *cd);
        if (top->len > n)
            g_array_set_size(top, n);
    }
    g_array_free(all, TRUE);
    if (f->o.on_rank && n == f->o.candidates) {
        rv_ranked r[RV_MAX_CANDIDATES];
        unsigned m = top->len < RV_MAX_CANDIDATES ? top->len : RV_MAX_CANDIDATES;
        for (unsigned i = 0; i < m; i++) {
            cand *cd = &g_array_index(top, cand, i);
            r[i] = (rv_ranked){ cd->p, cd->l1, cd->l2, cd->l3 };
        }
        f->o.on_rank(f->o.rank_ctx, r, m);
    }
}

/* ---- continuations ------------------------------------------------------ */
/* The continuation of the history after p, as far as the stack allows and
 * the budget lasts: events (p, p + out->len]. sim is updated. A rejoin met
 * short of what the span holds (under EARLY_EIGHTHS eighths of it) where
 * the candidate's own segment then ends, or its stack then contradicts the
 * flow's, is not taken: the continuation ends at the segment (END_SEGMENT,
 * to chain on) or is passed over (END_STACK), and the rejoin goes to *er
 * (er->sim NULL when there was none). */
int rv_continuation(rv_filter *f, uint64_t p, const target *t, GArray *sim, const budget *bd,
                    reach *out, early *er)
{
    uint32_t seg = ev_at(f, p)->segno;
    uint64_t ref = ev_at(f, p)->tsc;
    uint64_t e = p + 1, n = 0, b = 0;
    /* how far the continuation has gone into the hole (m), and how far the
     * hole goes: in trace bytes where the fill is measured so, else in
     * bytecodes */
    const uint64_t from = ev_at(f, p)->offset;
    const int by_bytes = in_bytes(bd) && from;
    const uint64_t goal = by_bytes ? bd->bytes : bd->expect;
    uint64_t m = 0, r_m = 0;
    /* The rejoin symbols often recur (a loop head): of the places where the
     * continuation meets them, the one whose length is nearest to what the
     * gap's span holds at the thread's rate is taken (the first one when
     * that is unknown). */
    int rejoined = 0;
    uint64_t r_len = 0, r_nbc = 0, r_ticks = 0, r_diff = UINT64_MAX;
    GArray *r_sim = NULL;
    /* where the history last crossed into a segment that continues its
     * segment (seg_joined): a contradiction after it ends the continuation
     * there, as the segment's end would have */
    int crossed = 0;
    uint64_t x_len = 0, x_nbc = 0, x_ticks = 0;
    GArray *x_sim = NULL;
    int end;
    for (;; e++, n++) {
        out->len = n;
        out->nbc = b;
        m = !by_bytes ? b : ev_at(f, e - 1)->offset > from ? ev_at(f, e - 1)->offset - from : 0;
        if (e < ev_end(f) && ev_at(f, e)->segno == seg + 1 && seg_joined(f, seg + 1)) {
            seg++;
            crossed = 1;
            x_len = n;
            x_nbc = b;
            x_ticks = out->ticks;
            if (!x_sim)
                x_sim = g_array_new(FALSE, FALSE, sizeof(frame));
            g_array_set_size(x_sim, 0);
            g_array_append_vals(x_sim, sim->data, sim->len);
        }
        if (e >= ev_end(f) || ev_at(f, e)->segno != seg) {
            end = END_SEGMENT;
            break;
        }
        int meets = rv_rejoins_at(f, e, t) ? stack_meets(sim, t) : 0;
        if (meets) {
            uint64_t diff = dist(m, goal);
            if (diff < r_diff) {
                r_diff = diff;
                r_len = n - rv_lead_before(f, p, e, t);
                r_nbc = b;
                r_m = m;
                r_ticks = out->ticks;
                if (!r_sim)
                    r_sim = g_array_new(FALSE, FALSE, sizeof(frame));
                g_array_set_size(r_sim, 0);
                /* below a deeper stack: the stack there is the next segment's */
                g_array_append_vals(r_sim, sim->data, meets == 2 ? t->stk->len : sim->len);
            }
            rejoined = 1;
            if (!goal || m >= goal) {
                end = END_REJOIN;
                break;
            }
        }
        hev *x = ev_at(f, e);
        uint64_t dt = x->tsc > ref ? x->tsc - ref : 0;
        if (n >= bd->events || (by_bytes ? m >= 2 * goal : b >= bd->bytecodes) ||
            (bd->timed && !bd->expect && bd->ticks + dt > bd->span)) {
            end = END_BOUND;
            break;
        }
        out->ticks = dt;
        if (!stack_step(sim, x)) {
            end = END_STACK;
            if (crossed) {
                end = END_SEGMENT;
                out->len = x_len;
                out->nbc = x_nbc;
                out->ticks = x_ticks;
                g_array_set_size(sim, 0);
                g_array_append_vals(sim, x_sim->data, x_sim->len);
                if (rejoined && r_len > x_len) {
                    rejoined = 0;
                    r_diff = UINT64_MAX;
                }
            }
            break;
        }
        if (x->kind == FL_BYTECODE)
            b++;
    }
    if (x_sim)
        g_array_free(x_sim, TRUE);
    er->sim = NULL;
    if (rejoined && (end == END_SEGMENT || end == END_STACK) && goal &&
        8 * r_m < EARLY_EIGHTHS * goal) {
        *er = (early){ r_len, r_nbc, r_ticks, r_sim };
        return end;
    }
    if (rejoined) {
        out->len = r_len;
        out->nbc = r_nbc;
        out->ticks = r_ticks;
        g_array_set_size(sim, 0);
        g_array_append_vals(sim, r_sim->data, r_sim->len);
        g_array_free(r_sim, TRUE);
        end = END_REJOIN;
    } else if (r_sim) {
        g_array_free(r_sim, TRUE);
    }
    return end;
}
