/* One gap: sizing the hole, chaining candidates' continuations until one
 * rejoins the next segment, and what is done when none does. */
#include "recover/filter.h"

/* A candidate's continuation as the search takes it: the history after p,
 * how it ended (END_*), its events, bytecodes and ticks, and the stack
 * where it ends. */
typedef struct taken {
    uint64_t p, len, nbc, ticks;
    int end;
    GArray *sim;
} taken;

static void take(taken *t, uint64_t p, int end, const reach *rc, const GArray *sim)
{
    *t = (taken){ p, rc->len, rc->nbc, rc->ticks, end, t->sim };
    g_array_set_size(t->sim, 0);
    g_array_append_vals(t->sim, sim->data, sim->len);
}

/* One gap as it is filled: the hole's size, what both sides are matched
 * on, and the fill so far. */
typedef struct gap {
    uint64_t end;             /* the history's end: its last segment ends at end - 1 */
    uint64_t gap_start, gap_end;
    budget bd;                /* what the fill may still hold */
    /* the bytecodes and events the hole holds at the thread's recent rate
     * (-1: unknown), and its bytecodes and trace bytes before any was filled */
    double holds, holds_events;
    uint64_t expect, hole_bytes;
    int calls;                /* the past may be anchored on calls and returns */
    target t;
    past ps;
    GArray *top;              /* cand: the latest ranking */
    GArray *pieces;           /* piece: the fill */
    GArray *sim;              /* frame: the stack where the fill so far ends */
    GArray *guess;            /* fl_event: the ICFG path, if any */
    /* the candidate picked, and the one that ran furthest before its stack
     * contradicted the flow's (pick_link) */
    taken pk, far;
    /* The latest early rejoin of a chained piece (continuation()): the fill
     * ends there if the chain never rejoins. fb_pieces pieces come before
     * fb_piece. */
    early fb;
    guint fb_pieces;
    piece fb_piece;
} gap;

/* The fill becomes its first n pieces and the piece up to an early rejoin. */
static void end_at_early(GArray *pieces, guint n, const piece *last)
{
    g_array_set_size(pieces, n);
    if (last->len)
        g_array_append_val(pieces, *last);
}

/* The early rejoin er of a continuation from start becomes the one the
 * fill ends at if the chain never rejoins. */
static void fallback_at(gap *g, early er, uint64_t start)
{
    if (g->fb.sim)
        g_array_free(g->fb.sim, TRUE);
    g->fb = er;
    g->fb_pieces = g->pieces->len;
    g->fb_piece = (piece){ start, er.len, g->bd.ticks, er.len, NULL };
}

/* Sizes the hole before next (the held-back segment's first event, NULL
 * none): its time span, and the bytecodes its trace bytes hold at the
 * thread's recent rate where the collector counted them, else those its
 * time allows; the fill may hold twice as many (the trace's times are
 * coarse). */
static void size_hole(rv_filter *f, gap *g, const fl_event *next)
{
    budget *bd = &g->bd;
    *bd = (budget){ .events = f->o.max_fill, .bytecodes = UINT64_MAX,
                    .timed = !f->o.no_time && g->gap_end >= g->gap_start };
    bd->span = g->gap_end >= g->gap_start ? g->gap_end - g->gap_start : 0;
    g->holds = g->holds_events = -1.0;
    uint64_t rate_bc, rate_den;
    if (bd->timed && !f->o.no_lost_bytes && next && next->kind == FL_SEGMENT &&
        (next->flags & FL_F_LOST_COUNTED) && next->resume_offset >= next->gap_offset) {
        bd->bytes = next->lost_bytes + next->resume_offset - next->gap_offset;
        const double bytes = (double)bd->bytes;
        rv_recent_bytes(&f->bc_bytes, f->bytecodes, next->gap_offset, &rate_bc, &rate_den);
        if (rate_den && rate_bc)
            g->holds = bytes * (double)rate_bc / (double)rate_den;
        uint64_t rate_ev;
        rv_recent_bytes(&f->ev_bytes, f->events, next->gap_offset, &rate_ev, &rate_den);
        if (rate_den)
            g->holds_events = bytes * (double)rate_ev / (double)rate_den;
    }
    if (g->holds < 0 && bd->timed) {
        rv_recent_rate(f, &rate_bc, &rate_den);
        if (rate_den && rate_bc)
            g->holds = (double)bd->span * (double)rate_bc / (double)rate_den;
    }
    if (g->holds >= 0 && 2.0 * g->holds + f->o.k < 1e18) {
        bd->bytecodes = (uint64_t)(2.0 * g->holds + f->o.k);
        bd->expect = (uint64_t)g->holds;
        /* Compiled code's calls and returns are events without bytecodes:
         * the events allowed follow the history's events per bytecode. */
        uint64_t nev = ev_end(f) - f->hbase, nbc = sym_end(f) - f->bc.sbase;
        double scaled = nbc ? (double)bd->bytecodes * (double)nev / (double)nbc : 0.0;
        if (scaled > (double)bd->events)
            bd->events = scaled < (double)bd->events * FILL_SCALE_MAX
                             ? (uint64_t)scaled
                             : bd->events * FILL_SCALE_MAX;
    }
    g->expect = bd->expect;
    g->hole_bytes = bd->bytes;
    bd->by_bytes = g->hole_bytes && g->expect && ev_at(f, g->end - 1)->offset;
}

/* The segment before the gap as the past (history events begin..end,
 * newest first) and its anchor; 0 when it has none. */
static int anchor_past(rv_filter *f, gap *g, uint64_t begin)
{
    g->ps = (past){ g_array_new(FALSE, FALSE, sizeof(uint64_t)), 0,
                    g_array_new(FALSE, FALSE, sizeof(tsym)),
                    g_array_new(FALSE, FALSE, sizeof(tsym)), 0, 0, NULL };
    for (uint64_t e = g->end; e > begin && g->ps.a->len < f->o.suffix_cap; e--) {
        uint64_t x = e - 1;
        g_array_append_val(g->ps.a, x);
    }
    /* A fill is bounded by the bytecodes its hole holds; one anchored on
     * calls and returns runs compiled code, where only the events bound it.
     * In a hole sized at no bytecodes (a decode error's skip: nothing was
     * lost) that bound is far too long: on xalan with a 4 MiB buffer, 2,660
     * such fills held 14.5 M events, and took 68 s (README.md). */
    g->calls = g->holds < 0 || g->expect > 0;
    int anchored = rv_past_prepare(f, &g->ps, g->calls);
    if (!anchored)
        f->st.no_anchor++;
    else if (g->ps.idx == &f->cr)
        f->st.call_anchored++;
    /* A fill anchored on compiled code's calls and returns may run no
     * bytecode for long: the events the gap's bytes hold at the thread's
     * recent events per byte bound it, twice over as its bytecodes are.
     * The events bound alone let fills of holes sized at 50 bytecodes run
     * to 1 M events (README.md, step 1). */
    if (anchored && g->ps.idx == &f->cr && g->holds_events >= 0 &&
        2.0 * g->holds_events + f->o.k < (double)g->bd.events)
        g->bd.events = (uint64_t)(2.0 * g->holds_events) + f->o.k;
    return anchored;
}

/* One link's choice among the ranked candidates (pick_link). */
typedef struct choice {
    int pick;                 /* index in top of the one picked, -1 none */
    early pick_er;            /* its early rejoin, if any */
    /* every stack-consistent candidate's start and length (top holds at
     * most RV_MAX_CANDIDATES, so each one has its slot), the picked one's
     * slot */
    uint64_t cs[RV_MAX_CANDIDATES], cl[RV_MAX_CANDIDATES];
    unsigned nc, pick_c;
    /* the first early rejoin of a candidate whose stack then contradicts
     * the flow's: a fallback when the one picked has none */
    early stack_er;
    uint64_t stack_er_start;
} choice;

/* Tries the continuation of ranked candidate cd into ch and g->pk / g->far.
 * 1 when the search can stop: it rejoined and the hole's size is unknown
 * (the first that rejoins in rank order is taken). */
static int try_candidate(rv_filter *f, gap *g, choice *ch, guint i, const cand *cd)
{
    const budget *bd = &g->bd;
    GArray *s = g_array_new(FALSE, FALSE, sizeof(frame));
    g_array_append_vals(s, g->sim->data, g->sim->len);
    reach rc = { 0, 0, 0 };
    early er;
    int r = rv_continuation(f, cd->p, &g->t, s, bd, &rc, &er);
    if (r == END_STACK) {
        f->st.inconsistent++;
        if (!er.sim && rc.nbc > g->far.nbc)
            take(&g->far, cd->p, END_SEGMENT, &rc, s);
        if (er.sim && !ch->stack_er.sim) {
            ch->stack_er = er;
            ch->stack_er_start = cd->p + 1;
        } else if (er.sim) {
            g_array_free(er.sim, TRUE);
        }
        g_array_free(s, TRUE);
        return 0;
    }
    /* of the candidates that rejoin, the one whose fill is nearest to what
     * the span holds (the first among equals) */
    const taken *pk = &g->pk;
    int better = ch->pick < 0 || r < pk->end ||
                 (r == END_REJOIN && pk->end == END_REJOIN &&
                  dist(rv_measure(f, bd, cd->p, rc.len, rc.nbc), goal_of(bd)) <
                      dist(rv_measure(f, bd, pk->p, pk->len, pk->nbc), goal_of(bd)));
    unsigned c = ch->nc++;
    ch->cs[c] = cd->p + 1;
    ch->cl[c] = rc.len;
    if (better) {
        ch->pick_c = c;
        ch->pick = (int)i;
        take(&g->pk, cd->p, r, &rc, s);
        if (ch->pick_er.sim)
            g_array_free(ch->pick_er.sim, TRUE);
        ch->pick_er = er;
    } else if (er.sim) {
        g_array_free(er.sim, TRUE);
    }
    g_array_free(s, TRUE);
    return r == END_REJOIN && !bd->expect;
}

/* Picks the next link of the chain: the candidate that rejoins nearest to
 * what the span holds (in rank order the first that rejoins when that is
 * unknown), else the first that ran to its segment's end (to chain on),
 * else the first bounded one, into g->pk. The candidate that ran the most
 * bytecodes before its stack contradicted the flow's, without meeting the
 * next segment's start on the way (that is stack_er), goes to g->far:
 * where every one contradicts, its continuation up to the contradiction is
 * the piece, and the chain goes on from there (the history never saw this
 * method return to the caller the flow shows). */
static void pick_link(rv_filter *f, gap *g, unsigned link, choice *ch)
{
    *ch = (choice){ .pick = -1 };
    g->pk.end = -1;
    g->pk.len = g->pk.nbc = g->pk.ticks = 0;
    g->far.nbc = 0;
    /* when every one of the top N contradicts the stack, the next ones
     * are tried: the ranking again with 4 times as many */
    for (unsigned n = f->o.candidates, tried = 0;;) {
        rv_rank(f, &g->ps, n, g->top);
        /* Anchored on bytecodes that no earlier stretch of history
         * continues (the K-gram never ran before, or only where the
         * events after it, compiled code's calls and returns, run past
         * that stretch's end): its calls and returns may still match.
         * On luindex at 24% loss a hole of 246 K bytecodes got no fill
         * without this, and 60 K right with it (README.md, step 1). */
        if (!g->top->len && !tried && g->ps.idx == &f->bc && g->calls) {
            const uint32_t span = g->ps.span;
            g->ps.span = 0;
            if (rv_past_anchor(f, &g->ps, &f->cr)) {
                if (!link)
                    f->st.call_anchored++;
                rv_rank(f, &g->ps, n, g->top);
            } else {
                g->ps.span = span;
            }
        }
        for (guint i = tried; i < g->top->len; i++)
            if (try_candidate(f, g, ch, i, &g_array_index(g->top, cand, i)))
                break;
        if (ch->pick >= 0 || g->top->len < n || n >= RV_MAX_CANDIDATES)
            break;
        tried = g->top->len;
        n = n * 4 < RV_MAX_CANDIDATES ? n * 4 : RV_MAX_CANDIDATES;
    }
    if (ch->stack_er.sim &&
        (ch->pick < 0 || (g->pk.end != END_REJOIN && !ch->pick_er.sim)))
        fallback_at(g, ch->stack_er, ch->stack_er_start);
    else if (ch->stack_er.sim)
        g_array_free(ch->stack_er.sim, TRUE);
}

/* Appends the picked continuation pc to the fill and takes it from the
 * budget. A piece that repeats the one before and leaves the stack as it
 * found it is a loop's iteration that the history never saw end (its
 * segment ends inside the loop): the loop goes on for as many iterations
 * as the span holds, without ranking each again. */
static void add_piece(rv_filter *f, gap *g, piece pc)
{
    budget *bd = &g->bd;
    const taken *pk = &g->pk;
    const piece *prev =
        g->pieces->len ? &g_array_index(g->pieces, piece, g->pieces->len - 1) : NULL;
    const uint64_t pc_bytes = rv_piece_bytes(f, &pc, pc.len);
    uint64_t reps = 1;
    if (prev && prev->start == pc.start && prev->len == pc.len && pk->end == END_SEGMENT &&
        pk->nbc && bd->expect > pk->nbc && rv_same_stack(g->sim, pk->sim)) {
        reps = bd->expect / pk->nbc;
        if (in_bytes(bd) && pc_bytes && pc_bytes != UNKNOWN_BYTES)
            reps = bd->bytes / pc_bytes;
        if (reps > bd->events / pk->len)
            reps = bd->events / pk->len;
        if (reps > bd->bytecodes / pk->nbc)
            reps = bd->bytecodes / pk->nbc;
        if (!reps)
            reps = 1;
    }
    for (uint64_t r = 0; r < reps; r++) {
        pc.ticks = bd->ticks;
        g_array_append_val(g->pieces, pc);
        f->st.links++;
        bd->events -= pk->len < bd->events ? pk->len : bd->events;
        bd->bytecodes -= pk->nbc < bd->bytecodes ? pk->nbc : bd->bytecodes;
        if (bd->expect)
            bd->expect = pk->nbc < bd->expect ? bd->expect - pk->nbc : 1;
        if (bd->bytes)
            bd->bytes = pc_bytes == UNKNOWN_BYTES ? 0
                        : pc_bytes < bd->bytes    ? bd->bytes - pc_bytes
                                                  : 1;
        bd->ticks += pk->ticks;
    }
    g_array_set_size(g->sim, 0);
    g_array_append_vals(g->sim, pk->sim->data, pk->sim->len);
}

/* Chaining: the piece pc becomes the newest part of the past; 0 when the
 * past then has no anchor. */
static int chain_on(rv_filter *f, gap *g, const piece *pc)
{
    GArray *na = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    for (uint64_t e = pc->start + pc->len; e > pc->start && na->len < f->o.suffix_cap; e--) {
        uint64_t x = e - 1;
        g_array_append_val(na, x);
    }
    for (guint i = 0; i < g->ps.a->len && na->len < f->o.suffix_cap; i++)
        g_array_append_val(na, g_array_index(g->ps.a, uint64_t, i));
    g_array_free(g->ps.a, TRUE);
    g->ps.a = na;
    return rv_past_prepare(f, &g->ps, g->calls);
}

/* Chains candidates' continuations from the segment before the gap until
 * one rejoins the next segment. 1 when one did, 2 when the rejoin came at
 * once (nothing was missing), 0 when none did. */
static int chain(rv_filter *f, gap *g)
{
    choice ch;
    for (unsigned link = 0; link < f->o.max_links; link++) {
        pick_link(f, g, link, &ch);
        if (ch.pick < 0 && g->far.nbc < f->o.k)
            break;
        if (ch.pick < 0) {
            f->st.cut_at_stack++;
            taken x = g->pk;
            g->pk = g->far;
            g->far = x;
        }
        const taken *pk = &g->pk;
        if (pk->end == END_REJOIN && !pk->len && !g->pieces->len) {
            f->st.rejoined++;
            f->st.empty_rejoin++;
            return 2;
        }
        piece pc = { pk->p + 1, pk->len, g->bd.ticks, pk->len, NULL };
        /* Without a rejoin the search ran every candidate: cs/cl hold all
         * the stack-consistent continuations the agreement needs (none:
         * the piece up to a contradiction is not disputed by another). */
        if (pk->end != END_REJOIN && ch.pick >= 0)
            pc.agreed = rv_agreement(f, ch.cs, ch.cl, ch.nc, ch.pick_c);
        if (ch.pick_er.sim)
            fallback_at(g, ch.pick_er, pc.start);
        add_piece(f, g, pc);
        if (pk->end == END_REJOIN)
            return 1;
        if (pk->end != END_SEGMENT || !pk->len)
            break;
        if (!chain_on(f, g, &pc))
            break;
    }
    return 0;
}

/* A chain that never rejoined ends at its latest early rejoin, or with a
 * tail from the other end (a long fill, or none at all: its second half,
 * or all of it, from there); one short of half the hole comes after the
 * tail. 1 when the fill now ends at the rejoin point. */
static int close_fill(rv_filter *f, gap *g)
{
    const int short_fb =
        g->fb.sim && rv_fallback_measure(f, &g->bd, g->pieces, g->fb_pieces, &g->fb_piece,
                                         g->fb.nbc) <
                         ((g->bd.by_bytes ? g->hole_bytes : g->expect) + 1) / 2;
    if (g->fb.sim && !short_fb) {
        end_at_early(g->pieces, g->fb_pieces, &g->fb_piece);
        return 1;
    }
    if (rv_splice_tail(f, g->pieces, &g->t, g->expect, g->bd.span)) {
        f->st.spliced++;
        return 1;
    }
    if (g->fb.sim) {
        end_at_early(g->pieces, g->fb_pieces, &g->fb_piece);
        return 1;
    }
    return 0;
}

/* A fill unconfirmed by a rejoin: cut to what the hole holds, and followed
 * by an ICFG path to the next segment where one is found. */
static void keep_unconfirmed(rv_filter *f, gap *g)
{
    GArray *pieces = g->pieces;
    if (f->o.cut_disputed) {
        /* keep the fill only as far as the candidates agree */
        for (guint k = 0; k < pieces->len; k++) {
            piece *pc = &g_array_index(pieces, piece, k);
            if (pc->agreed < pc->len) {
                pc->len = pc->agreed;
                g_array_set_size(pieces, k + 1);
                break;
            }
        }
    }
    /* Unconfirmed, it is kept as long as the span holds at the thread's
     * rate: the bound above allows twice as much for a rejoin to be found
     * in. One with fewer bytecodes than that (compiled code runs few)
     * is kept to the events the hole's bytes hold, where they are
     * known. */
    if ((!g->hole_bytes || !rv_keep_bytes(f, pieces, g->hole_bytes)) && g->expect) {
        if (rv_keep_bytecodes(f, pieces, g->expect) < g->expect && g->holds_events >= 1)
            rv_keep_events(pieces, (uint64_t)g->holds_events);
    }
    /* the stack where what is kept ends */
    g_array_set_size(g->sim, 0);
    g_array_append_vals(g->sim, f->stk->data, f->stk->len);
    uint64_t from = g->end - 1;
    for (guint k = 0; k < pieces->len; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        for (uint64_t e = pc->start; e < pc->start + pc->len; e++) {
            stack_step(g->sim, ev_at(f, e));
            from = e;
        }
    }
    /* no rejoin: an ICFG path from the last placed bytecode (of the fill,
     * else of the segment) to the next segment's first one */
    int have = 0;
    if (f->o.icfg) {
        hev *x = ev_at(f, from);
        if (x->kind == FL_BYTECODE && x->sym >= 0)
            have = rv_icfg_path(f, x->method_id, x->bci, g->sim, &g->t, g->guess);
    }
    if (!have && f->o.no_unjoined)
        g_array_set_size(pieces, 0);
    if (have)
        f->st.guessed_gaps++;
}

/* Emits the fill, then the guessed path spread over the gap's span. */
static void emit_gap(rv_filter *f, gap *g, int anchored)
{
    uint64_t nfill = 0;
    for (guint k = 0; k < g->pieces->len; k++)
        nfill += g_array_index(g->pieces, piece, k).len;
    if (!nfill && !g->guess->len) {
        if (anchored)
            f->st.no_candidate++;
        return;
    }
    f->st.filled++;
    if (rv_emit_fill(f, g->pieces, g->gap_start, g->gap_end))
        return;
    const uint64_t gap_start = g->gap_start, gap_end = g->gap_end;
    for (guint k = 0; k < g->guess->len; k++) {
        fl_event *ev = &g_array_index(g->guess, fl_event, k);
        uint64_t off =
            gap_end > gap_start ? (gap_end - gap_start) * (k + 1) / (g->guess->len + 1) : 0;
        ev->tsc = gap_start + off;
        f->st.guessed_events++;
        if (ev->kind == FL_BYTECODE)
            f->st.guessed_bytecodes++;
        if (rv_deliver(f, ev))
            break;
    }
}

static void gap_free(gap *g)
{
    if (g->fb.sim)
        g_array_free(g->fb.sim, TRUE);
    g_array_free(g->t.stk, TRUE);
    g_array_free(g->ps.a, TRUE);
    g_array_free(g->ps.t1, TRUE);
    g_array_free(g->ps.t2, TRUE);
    g_array_free(g->top, TRUE);
    rv_pieces_free(g->pieces);
    g_array_free(g->sim, TRUE);
    g_array_free(g->pk.sim, TRUE);
    g_array_free(g->far.sim, TRUE);
    g_array_free(g->guess, TRUE);
}

/* Fills the gap between the history's last segment and the held-back one. */
void rv_fill_gap(rv_filter *f)
{
    f->st.boundaries++;
    gap g = { .end = ev_end(f) };
    uint64_t begin = rv_seg_begin(f, f->segno);
    if (g.end == begin || begin < f->hbase) {
        f->st.no_anchor++;
        return;
    }
    g.gap_start = g.gap_end = ev_at(f, g.end - 1)->tsc;
    const fl_event *next = f->pending->len ? &g_array_index(f->pending, pev, 0).ev : NULL;
    if (next)
        g.gap_end = next->tsc;
    size_hole(f, &g, next);
    rv_target_of(f, &g.t);
    if (g.t.idx == &f->cr)
        f->st.rejoin_on_calls++;
    g.top = g_array_new(FALSE, FALSE, sizeof(cand));
    g.pieces = g_array_new(FALSE, FALSE, sizeof(piece));
    g.sim = g_array_new(FALSE, FALSE, sizeof(frame));
    g.pk.sim = g_array_new(FALSE, FALSE, sizeof(frame));
    g.far.sim = g_array_new(FALSE, FALSE, sizeof(frame));
    g.guess = g_array_new(FALSE, FALSE, sizeof(fl_event));
    int anchored = anchor_past(f, &g, begin);
    /* the stack as the flow shows it where the gap begins */
    g_array_append_vals(g.sim, f->stk->data, f->stk->len);
    int rejoined = anchored ? chain(f, &g) : 0;
    if (rejoined != 2) {
        if (!rejoined)
            rejoined = close_fill(f, &g);
        if (rejoined)
            f->st.rejoined++;
        else
            keep_unconfirmed(f, &g);
        emit_gap(f, &g, anchored);
    }
    gap_free(&g);
}
