/* The recovery filter: holds back the segment after a gap until it can be
 * matched, fills the gap, passes every event on (see recover.h, README.md). */
#include "recover/filter.h"

#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Resolves the gap before the held-back segment, then passes it on. */
static int release(rv_filter *f)
{
    if (!f->holding)
        return f->stopped;
    f->holding = 0;
    if (!f->stopped) {
        uint64_t t0 = now_ns();
        rv_fill_gap(f);
        f->st.ns += now_ns() - t0;
    }
    for (guint i = 0; i < f->pending->len; i++) {
        pev *p = &g_array_index(f->pending, pev, i);
        if (p->ev.kind == FL_SEGMENT) {
            rv_segment_start(f, &p->ev);
        } else {
            rv_history_add(f, &p->ev);
        }
        rv_track(f, &p->ev);
        rv_deliver(f, &p->ev);
        g_free(p->stack);
    }
    g_array_set_size(f->pending, 0);
    f->pending_syms = 0;
    f->pending_calls = 0;
    return f->stopped;
}

/* Events held back at most after a gap (see rv_event). */
static size_t hold_cap(const rv_filter *f)
{
    return 4 * (size_t)f->o.k + RV_HOLD_EXTRA;
}

static void hold(rv_filter *f, const fl_event *ev)
{
    pev p = { .ev = *ev, .stack = NULL };
    if (ev->kind == FL_SEGMENT && ev->depth && ev->stack) {
        p.stack = g_memdup2(ev->stack, ev->depth * sizeof *ev->stack);
        p.ev.stack = p.stack;
    } else if (ev->kind == FL_SEGMENT) {
        p.ev.stack = NULL;
        p.ev.depth = 0;
    }
    g_array_append_val(f->pending, p);
    if (ev->kind == FL_BYTECODE)
        f->pending_syms++;
    else if (!f->pending_syms && rv_lead_symbol(ev))
        f->pending_calls++;
}

/* ---- the filter ------------------------------------------------------- */

rv_filter *rv_new(const rv_options *opt, fl_sink sink, void *ctx)
{
    rv_filter *f = g_new0(rv_filter, 1);
    if (opt)
        f->o = *opt;
    if (!f->o.k)
        f->o.k = 8;
    if (f->o.k > 64)
        f->o.k = 64;
    if (!f->o.window)
        f->o.window = 1u << 20;
    if (!f->o.max_fill)
        f->o.max_fill = 1u << 20;
    if (!f->o.candidates)
        f->o.candidates = 16;
    if (f->o.candidates > RV_MAX_CANDIDATES)
        f->o.candidates = RV_MAX_CANDIDATES;
    if (!f->o.suffix_cap)
        f->o.suffix_cap = 4096;
    if (f->o.suffix_cap < f->o.k + 1)
        f->o.suffix_cap = f->o.k + 1;
    if (!f->o.max_links)
        f->o.max_links = 32;
    if (!f->o.max_nodes)
        f->o.max_nodes = 20000;
    f->sink = sink;
    f->ctx = ctx;
    f->h = g_array_new(FALSE, FALSE, sizeof(hev));
    f->bc.syms = g_array_new(FALSE, FALSE, sizeof(hsym));
    f->bc.head = g_hash_table_new(g_direct_hash, g_direct_equal);
    f->cr.syms = g_array_new(FALSE, FALSE, sizeof(hsym));
    f->cr.head = g_hash_table_new(g_direct_hash, g_direct_equal);
    f->pending = g_array_new(FALSE, FALSE, sizeof(pev));
    f->segfirst = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    f->segjoin = g_array_new(FALSE, FALSE, sizeof(uint8_t));
    f->stk = g_array_new(FALSE, FALSE, sizeof(frame));
    uint64_t zero = 0;
    g_array_append_val(f->segfirst, zero);
    uint8_t no = 0;
    g_array_append_val(f->segjoin, no);
    return f;
}

int rv_event(const fl_event *ev, void *vf)
{
    rv_filter *f = vf;
    if (f->stopped)
        return 1;
    f->tid = ev->tid;
    if (ev->kind == FL_SEGMENT) {
        if (release(f))
            return 1;
        if (!f->seen_segment || !(ev->flags & FL_F_AFTER_GAP)) {
            /* nothing is missing before it: no hole to fill */
            f->seen_segment = 1;
            rv_segment_start(f, ev);
            rv_track(f, ev);
            return rv_deliver(f, ev);
        }
        f->holding = 1;
        hold(f, ev);
        return 0;
    }
    if (f->holding) {
        hold(f, ev);
        /* Its first K bytecodes, or K calls and returns before any (it
         * starts in compiled code: target_of), are what it is met on. Calls
         * and returns after a bytecode never complete them: past a few per
         * symbol, the next segment's start is taken as it is, so the
         * lookahead stays short. */
        if (f->pending_syms >= f->o.k || f->pending_calls >= f->o.k ||
            f->pending->len >= hold_cap(f))
            return release(f);
        return 0;
    }
    f->seen_segment = 1;
    rv_history_add(f, ev);
    rv_track(f, ev);
    return rv_deliver(f, ev);
}

int rv_finish(rv_filter *f, rv_stats *st)
{
    release(f);
    if (st)
        *st = f->st;
    return f->stopped;
}

void rv_free(rv_filter *f)
{
    if (!f)
        return;
    for (guint i = 0; i < f->pending->len; i++)
        g_free(g_array_index(f->pending, pev, i).stack);
    g_array_free(f->pending, TRUE);
    g_array_free(f->h, TRUE);
    g_array_free(f->bc.syms, TRUE);
    g_array_free(f->cr.syms, TRUE);
    g_array_free(f->segfirst, TRUE);
    g_array_free(f->segjoin, TRUE);
    g_array_free(f->stk, TRUE);
    g_hash_table_destroy(f->bc.head);
    g_hash_table_destroy(f->cr.head);
    g_free(f);
}

void rv_stats_add(rv_stats *sum, const rv_stats *s)
{
    sum->boundaries += s->boundaries;
    sum->no_anchor += s->no_anchor;
    sum->call_anchored += s->call_anchored;
    sum->rejoin_on_calls += s->rejoin_on_calls;
    sum->cut_at_stack += s->cut_at_stack;
    sum->no_candidate += s->no_candidate;
    sum->filled += s->filled;
    sum->rejoined += s->rejoined;
    sum->spliced += s->spliced;
    sum->empty_rejoin += s->empty_rejoin;
    sum->guessed_gaps += s->guessed_gaps;
    sum->events += s->events;
    sum->bytecodes += s->bytecodes;
    sum->guessed_events += s->guessed_events;
    sum->guessed_bytecodes += s->guessed_bytecodes;
    sum->links += s->links;
    sum->candidates += s->candidates;
    sum->pruned_t1 += s->pruned_t1;
    sum->pruned_t2 += s->pruned_t2;
    sum->ranked_t3 += s->ranked_t3;
    sum->inconsistent += s->inconsistent;
    sum->ns += s->ns;
}
