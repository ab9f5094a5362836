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

static void take(taken *t, uint64_t p, int end, uint64_t len, uint64_t nbc, uint64_t ticks,
                 const GArray *sim)
{
    *t = (taken){ p, len, nbc, ticks, end, t->sim };
    g_array_set_size(t->sim, 0);
    g_array_append_vals(t->sim, sim->data, sim->len);
}

/* The fill becomes its first n pieces and the piece up to an early rejoin. */
static void end_at_early(GArray *pieces, guint n, const piece *last)
{
    g_array_set_size(pieces, n);
    if (last->len)
        g_array_append_val(pieces, *last);
}

/* Fills the gap between the history's last segment and the held-back one. */
void rv_fill_gap(rv_filter *f)
{
    f->st.boundaries++;
    uint64_t end = ev_end(f);
    uint64_t begin = rv_seg_begin(f, f->segno);
    if (end == begin || begin < f->hbase) {
        f->st.no_anchor++;
        return;
    }
    uint64_t gap_start = ev_at(f, end - 1)->tsc, gap_end = gap_start;
    const fl_event *next = f->pending->len ? &g_array_index(f->pending, pev, 0).ev : NULL;
    if (next)
        gap_end = next->tsc;
    budget bd = { .events = f->o.max_fill, .bytecodes = UINT64_MAX,
                  .timed = !f->o.no_time && gap_end >= gap_start };
    bd.span = gap_end >= gap_start ? gap_end - gap_start : 0;
    /* the bytecodes the gap's trace bytes hold at the thread's recent rate
     * where the collector counted them, else those its time allows; twice
     * over (the trace's times are coarse) */
    double holds = -1.0, holds_events = -1.0;
    uint64_t rate_bc, rate_den;
    if (bd.timed && !f->o.no_lost_bytes && next && next->kind == FL_SEGMENT &&
        (next->flags & FL_F_LOST_COUNTED) && next->resume_offset >= next->gap_offset) {
        bd.bytes = next->lost_bytes + next->resume_offset - next->gap_offset;
        const double bytes = (double)bd.bytes;
        rv_recent_bytes(&f->bc_bytes, f->bytecodes, next->gap_offset, &rate_bc, &rate_den);
        if (rate_den && rate_bc)
            holds = bytes * (double)rate_bc / (double)rate_den;
        uint64_t rate_ev;
        rv_recent_bytes(&f->ev_bytes, f->events, next->gap_offset, &rate_ev, &rate_den);
        if (rate_den)
            holds_events = bytes * (double)rate_ev / (double)rate_den;
    }
    if (holds < 0 && bd.timed) {
        rv_recent_rate(f, &rate_bc, &rate_den);
        if (rate_den && rate_bc)
            holds = (double)bd.span * (double)rate_bc / (double)rate_den;
    }
    if (holds >= 0 && 2.0 * holds + f->o.k < 1e18) {
        bd.bytecodes = (uint64_t)(2.0 * holds + f->o.k);
        bd.expect = (uint64_t)holds;
        /* Compiled code's calls and returns are events without bytecodes:
         * the events allowed follow the history's events per bytecode. */
        uint64_t nev = ev_end(f) - f->hbase, nbc = sym_end(f) - f->bc.sbase;
        double scaled = nbc ? (double)bd.bytecodes * (double)nev / (double)nbc : 0.0;
        if (scaled > (double)bd.events)
            bd.events = scaled < (double)bd.events * FILL_SCALE_MAX ? (uint64_t)scaled
                                                                    : bd.events * FILL_SCALE_MAX;
    }
    const uint64_t expect = bd.expect, hole_bytes = bd.bytes;
    bd.by_bytes = hole_bytes && expect && ev_at(f, end - 1)->offset;

    target t;
    rv_target_of(f, &t);
    if (t.idx == &f->cr)
        f->st.rejoin_on_calls++;
    past ps = { g_array_new(FALSE, FALSE, sizeof(uint64_t)), 0,
                g_array_new(FALSE, FALSE, sizeof(tsym)), g_array_new(FALSE, FALSE, sizeof(tsym)),
                0, 0, NULL };
    for (uint64_t e = end; e > begin && ps.a->len < f->o.suffix_cap; e--) {
        uint64_t x = e - 1;
        g_array_append_val(ps.a, x);
    }
    GArray *top = g_array_new(FALSE, FALSE, sizeof(cand));
    GArray *pieces = g_array_new(FALSE, FALSE, sizeof(piece));
    GArray *sim = g_array_new(FALSE, FALSE, sizeof(frame));
    /* the candidate picked, and the one that ran furthest before its stack
     * contradicted the flow's (below) */
    taken pk = { .sim = g_array_new(FALSE, FALSE, sizeof(frame)) };
    taken far = { .sim = g_array_new(FALSE, FALSE, sizeof(frame)) };
    GArray *guess = g_array_new(FALSE, FALSE, sizeof(fl_event));
    /* A fill is bounded by the bytecodes its hole holds; one anchored on
     * calls and returns runs compiled code, where only the events bound it.
     * In a hole sized at no bytecodes (a decode error's skip: nothing was
     * lost) that bound is far too long: on xalan with a 4 MiB buffer, 2,660
     * such fills held 14.5 M events, and took 68 s (README.md). */
    const int calls = holds < 0 || expect > 0;
    int anchored = rv_past_prepare(f, &ps, calls);
    if (!anchored)
        f->st.no_anchor++;
    else if (ps.idx == &f->cr)
        f->st.call_anchored++;
    /* A fill anchored on compiled code's calls and returns may run no
     * bytecode for long: the events the gap's bytes hold at the thread's
     * recent events per byte bound it, twice over as its bytecodes are.
     * The events bound alone let fills of holes sized at 50 bytecodes run
     * to 1 M events (README.md, step 1). */
    if (anchored && ps.idx == &f->cr && holds_events >= 0 &&
        2.0 * holds_events + f->o.k < (double)bd.events)
        bd.events = (uint64_t)(2.0 * holds_events) + f->o.k;
    int rejoined = 0;
    /* The latest early rejoin of a chained piece (rv_continuation()): the fill
     * ends there if the chain never rejoins. fb_pieces pieces come before
     * fb_piece. */
    early fb = { 0 };
    guint fb_pieces = 0;
    piece fb_piece = { 0 };
    /* the stack as the flow shows it where the gap begins */
    g_array_set_size(sim, 0);
    g_array_append_vals(sim, f->stk->data, f->stk->len);
    for (unsigned link = 0; anchored && link < f->o.max_links && !rejoined; link++) {
        /* the one that rejoins nearest to what the span holds (in rank order
         * the first that rejoins when that is unknown), else the first that
         * ran to its segment's end (to chain on), else the first bounded one */
        int pick = -1;
        pk.end = -1;
        pk.len = pk.nbc = pk.ticks = 0;
        early pick_er = { 0 };
        /* every stack-consistent candidate's start and length (top holds at
         * most RV_MAX_CANDIDATES, so each one has its slot) */
        uint64_t cs[RV_MAX_CANDIDATES], cl[RV_MAX_CANDIDATES];
        unsigned nc = 0, pick_c = 0;
        /* the candidate that ran the most bytecodes before its stack
         * contradicted the flow's, without meeting the next segment's start
         * on the way (that is stack_er): where every one contradicts, its
         * continuation up to the contradiction is the piece, and the chain
         * goes on from there (the history never saw this method return to
         * the caller the flow shows) */
        far.nbc = 0;
        /* the first early rejoin of a candidate whose stack then contradicts
         * the flow's: a fallback when the one picked has none */
        early stack_er = { 0 };
        uint64_t stack_er_start = 0;
        /* when every one of the top N contradicts the stack, the next ones
         * are tried: the ranking again with 4 times as many */
        for (unsigned n = f->o.candidates, tried = 0;;) {
            rv_rank(f, &ps, n, top);
            /* Anchored on bytecodes that no earlier stretch of history
             * continues (the K-gram never ran before, or only where the
             * events after it, compiled code's calls and returns, run past
             * that stretch's end): its calls and returns may still match.
             * On luindex at 24% loss a hole of 246 K bytecodes got no fill
             * without this, and 60 K right with it (README.md, step 1). */
            if (!top->len && !tried && ps.idx == &f->bc && calls) {
                const uint32_t span = ps.span;
                ps.span = 0;
                if (rv_past_anchor(f, &ps, &f->cr)) {
                    if (!link)
                        f->st.call_anchored++;
                    rv_rank(f, &ps, n, top);
                } else {
                    ps.span = span;
                }
            }
            for (guint i = tried; i < top->len; i++) {
                const cand *cd = &g_array_index(top, cand, i);
                GArray *s = g_array_new(FALSE, FALSE, sizeof(frame));
                g_array_append_vals(s, sim->data, sim->len);
                uint64_t len, nbc, ticks = 0;
                early er;
                int r = rv_continuation(f, cd->p, &t, s, &bd, &len, &nbc, &ticks, &er);
                if (r == END_STACK) {
                    f->st.inconsistent++;
                    if (!er.sim && nbc > far.nbc)
                        take(&far, cd->p, END_SEGMENT, len, nbc, ticks, s);
                    if (er.sim && !stack_er.sim) {
                        stack_er = er;
                        stack_er_start = cd->p + 1;
                    } else if (er.sim) {
                        g_array_free(er.sim, TRUE);
                    }
                    g_array_free(s, TRUE);
                    continue;
                }
                /* of the candidates that rejoin, the one whose fill is
                 * nearest to what the span holds (the first among equals) */
                int better = pick < 0 || r < pk.end ||
                             (r == END_REJOIN && pk.end == END_REJOIN &&
                              dist(rv_measure(f, &bd, cd->p, len, nbc), goal_of(&bd)) <
                                  dist(rv_measure(f, &bd, pk.p, pk.len, pk.nbc), goal_of(&bd)));
                unsigned c = nc++;
                cs[c] = cd->p + 1;
                cl[c] = len;
                if (better) {
                    pick_c = c;
                    pick = (int)i;
                    take(&pk, cd->p, r, len, nbc, ticks, s);
                    if (pick_er.sim)
                        g_array_free(pick_er.sim, TRUE);
                    pick_er = er;
                } else if (er.sim) {
                    g_array_free(er.sim, TRUE);
                }
                g_array_free(s, TRUE);
                if (r == END_REJOIN && !bd.expect)
                    break;
            }
            if (pick >= 0 || top->len < n || n >= RV_MAX_CANDIDATES)
                break;
            tried = top->len;
            n = n * 4 < RV_MAX_CANDIDATES ? n * 4 : RV_MAX_CANDIDATES;
        }
        if (stack_er.sim && (pick < 0 || (pk.end != END_REJOIN && !pick_er.sim))) {
            if (fb.sim)
                g_array_free(fb.sim, TRUE);
            fb = stack_er;
            fb_pieces = pieces->len;
            fb_piece = (piece){ stack_er_start, fb.len, bd.ticks, fb.len, NULL };
        } else if (stack_er.sim) {
            g_array_free(stack_er.sim, TRUE);
        }
        if (pick < 0 && far.nbc < f->o.k)
            break;
        if (pick < 0) {
            f->st.cut_at_stack++;
            taken x = pk;
            pk = far;
            far = x;
        }
        if (pk.end == END_REJOIN && !pk.len && !pieces->len) {
            f->st.rejoined++;
            f->st.empty_rejoin++;
            rejoined = 2;
            break;
        }
        piece pc = { pk.p + 1, pk.len, bd.ticks, pk.len, NULL };
        /* Without a rejoin the loop above ran every candidate: cs/cl hold
         * all the stack-consistent continuations the agreement needs (none:
         * the piece up to a contradiction is not disputed by another). */
        if (pk.end != END_REJOIN && pick >= 0)
            pc.agreed = rv_agreement(f, cs, cl, nc, pick_c);
        if (pick_er.sim) {
            if (fb.sim)
                g_array_free(fb.sim, TRUE);
            fb = pick_er;
            fb_pieces = pieces->len;
            fb_piece = (piece){ pc.start, fb.len, bd.ticks, fb.len, NULL };
        }
        /* A piece that repeats the one before and leaves the stack as it
         * found it is a loop's iteration that the history never saw end (its
         * segment ends inside the loop): the loop goes on for as many
         * iterations as the span holds, without ranking each again. */
        const piece *prev = pieces->len ? &g_array_index(pieces, piece, pieces->len - 1) : NULL;
        const uint64_t pc_bytes = rv_piece_bytes(f, &pc, pc.len);
        uint64_t reps = 1;
        if (prev && prev->start == pc.start && prev->len == pc.len && pk.end == END_SEGMENT &&
            pk.nbc && bd.expect > pk.nbc && rv_same_stack(sim, pk.sim)) {
            reps = bd.expect / pk.nbc;
            if (in_bytes(&bd) && pc_bytes && pc_bytes != UNKNOWN_BYTES)
                reps = bd.bytes / pc_bytes;
            if (reps > bd.events / pk.len)
                reps = bd.events / pk.len;
            if (reps > bd.bytecodes / pk.nbc)
                reps = bd.bytecodes / pk.nbc;
            if (!reps)
                reps = 1;
        }
        for (uint64_t r = 0; r < reps; r++) {
            pc.ticks = bd.ticks;
            g_array_append_val(pieces, pc);
            f->st.links++;
            bd.events -= pk.len < bd.events ? pk.len : bd.events;
            bd.bytecodes -= pk.nbc < bd.bytecodes ? pk.nbc : bd.bytecodes;
            if (bd.expect)
                bd.expect = pk.nbc < bd.expect ? bd.expect - pk.nbc : 1;
            if (bd.bytes)
                bd.bytes = pc_bytes == UNKNOWN_BYTES ? 0
                           : pc_bytes < bd.bytes     ? bd.bytes - pc_bytes
                                                     : 1;
            bd.ticks += pk.ticks;
        }
        g_array_set_size(sim, 0);
        g_array_append_vals(sim, pk.sim->data, pk.sim->len);
        if (pk.end == END_REJOIN) {
            rejoined = 1;
            break;
        }
        if (pk.end != END_SEGMENT || !pk.len)
            break;
        /* chaining: the piece becomes the newest part of the past */
        GArray *na = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        for (uint64_t e = pc.start + pc.len; e > pc.start && na->len < f->o.suffix_cap; e--) {
            uint64_t x = e - 1;
            g_array_append_val(na, x);
        }
        for (guint i = 0; i < ps.a->len && na->len < f->o.suffix_cap; i++)
            g_array_append_val(na, g_array_index(ps.a, uint64_t, i));
        g_array_free(ps.a, TRUE);
        ps.a = na;
        if (!rv_past_prepare(f, &ps, calls))
            break;
    }
    if (rejoined == 2)
        goto done;
    /* The chain never rejoined: it ends at the latest early rejoin. One
     * short of half the hole comes after the tail (below). */
    const int short_fb = !rejoined && fb.sim &&
                         rv_fallback_measure(f, &bd, pieces, fb_pieces, &fb_piece, fb.nbc) <
                             ((bd.by_bytes ? hole_bytes : expect) + 1) / 2;
    if (!rejoined && fb.sim && !short_fb) {
        end_at_early(pieces, fb_pieces, &fb_piece);
        rejoined = 1;
    }
    /* a long fill that never rejoined, or none at all: its second half (or
     * all of it) from the other end */
    if (!rejoined && rv_splice_tail(f, pieces, &t, expect, bd.span)) {
        f->st.spliced++;
        rejoined = 1;
    }
    if (!rejoined && fb.sim) {
        end_at_early(pieces, fb_pieces, &fb_piece);
        rejoined = 1;
    }
    if (rejoined) {
        f->st.rejoined++;
    } else {
        if (f->o.cut_disputed) {
            /* unconfirmed by a rejoin: keep the fill only as far as the
             * candidates agree */
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
        if ((!hole_bytes || !rv_keep_bytes(f, pieces, hole_bytes)) && expect) {
            if (rv_keep_bytecodes(f, pieces, expect) < expect && holds_events >= 1)
                rv_keep_events(pieces, (uint64_t)holds_events);
        }
        /* the stack where what is kept ends */
        g_array_set_size(sim, 0);
        g_array_append_vals(sim, f->stk->data, f->stk->len);
        uint64_t from = end - 1;
        for (guint k = 0; k < pieces->len; k++) {
            const piece *pc = &g_array_index(pieces, piece, k);
            for (uint64_t e = pc->start; e < pc->start + pc->len; e++) {
                stack_step(sim, ev_at(f, e));
                from = e;
            }
        }
        /* no rejoin: an ICFG path from the last placed bytecode (of the fill,
         * else of the segment) to the next segment's first one */
        int have = 0;
        if (f->o.icfg) {
            hev *x = ev_at(f, from);
            if (x->kind == FL_BYTECODE && x->sym >= 0)
                have = rv_icfg_path(f, x->method_id, x->bci, sim, &t, guess);
        }
        if (!have && f->o.no_unjoined)
            g_array_set_size(pieces, 0);
        if (have)
            f->st.guessed_gaps++;
    }
    uint64_t nfill = 0;
    for (guint k = 0; k < pieces->len; k++)
        nfill += g_array_index(pieces, piece, k).len;
    if (!nfill && !guess->len) {
        if (anchored)
            f->st.no_candidate++;
        goto done;
    }
    f->st.filled++;
    if (rv_emit_fill(f, pieces, gap_start, gap_end))
        goto done;
    for (guint k = 0; k < guess->len; k++) {
        fl_event *ev = &g_array_index(guess, fl_event, k);
        uint64_t off = gap_end > gap_start ? (gap_end - gap_start) * (k + 1) / (guess->len + 1) : 0;
        ev->tsc = gap_start + off;
        f->st.guessed_events++;
        if (ev->kind == FL_BYTECODE)
            f->st.guessed_bytecodes++;
        if (rv_deliver(f, ev))
            break;
    }
done:
    if (fb.sim)
        g_array_free(fb.sim, TRUE);
    g_array_free(t.stk, TRUE);
    g_array_free(ps.a, TRUE);
    g_array_free(ps.t1, TRUE);
    g_array_free(ps.t2, TRUE);
    g_array_free(top, TRUE);
    rv_pieces_free(pieces);
    g_array_free(sim, TRUE);
    g_array_free(pk.sim, TRUE);
    g_array_free(far.sim, TRUE);
    g_array_free(guess, TRUE);
}
