/* Units of the recovery filter (recover/recover.h) on hand-made flows. */
#include <criterion/criterion.h>

#include <glib.h>

#include "recover/recover.h"

#define M 7          /* the one method of most flows */

typedef struct out {
    GArray *ev;      /* fl_event */
} out;

static int collect(const fl_event *ev, void *ctx)
{
    out *o = ctx;
    fl_event e = *ev;
    e.stack = NULL;
    g_array_append_val(o->ev, e);
    return 0;
}

typedef struct feeder {
    rv_filter *f;
    uint64_t tsc, seq;
    int coarse;      /* nonzero: bytecodes share one time (one per PSB in a trace) */
} feeder;

/* A segment after a gap in the trace (the first one starts the thread). */
static void seg(feeder *fd)
{
    fl_event e = { .kind = FL_SEGMENT, .tid = 1, .tsc = fd->tsc, .seq = fd->seq,
                   .flags = fd->seq ? FL_F_AFTER_GAP : 0 };
    fd->seq++;
    rv_event(&e, fd->f);
}

static void bcs(feeder *fd, const int *bci, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fl_event e = { .kind = FL_BYTECODE, .tid = 1, .tsc = fd->coarse ? fd->tsc : fd->tsc++,
                       .method_id = M,
                       .bci = bci[i], .opcode = 0, .count = 1 };
        rv_event(&e, fd->f);
    }
}

static void callret(feeder *fd, fl_kind k, uint64_t method)
{
    fl_event e = { .kind = k, .tid = 1, .tsc = fd->tsc++, .method_id = method, .bci = -1 };
    rv_event(&e, fd->f);
}

#define BCS(fd, ...) do { const int a_[] = { __VA_ARGS__ }; \
        bcs(fd, a_, sizeof a_ / sizeof a_[0]); } while (0)

/* The recovered events, in order, as bcis (calls: -100 - method). */
static GArray *recovered(out *o)
{
    GArray *r = g_array_new(FALSE, FALSE, sizeof(int));
    for (guint i = 0; i < o->ev->len; i++) {
        fl_event *e = &g_array_index(o->ev, fl_event, i);
        if (e->origin != FL_RECOVERED)
            continue;
        int v = e->kind == FL_BYTECODE ? e->bci : e->kind == FL_CALL ? -100 - (int)e->method_id
                                                                   : -200 - (int)e->method_id;
        g_array_append_val(r, v);
    }
    return r;
}

static void expect(GArray *r, const int *want, size_t n)
{
    cr_assert_eq(r->len, n, "recovered %u events, expected %zu", r->len, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(g_array_index(r, int, i), want[i], "event %zu: %d, expected %d", i,
                     g_array_index(r, int, i), want[i]);
}

static rv_options opts(void)
{
    rv_options o = { .k = 4, .no_time = 1 };
    return o;
}

/* Two earlier stretches share the anchor 1 2 3 4 5 6; the one whose longer
 * suffix agrees with the incomplete segment (100 101 before it) wins, and
 * its continuation 20 21 22 is replayed up to the next segment's 30 31. */
Test(recover, longest_suffix_wins_and_stops_at_rejoin)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0 };
    seg(&fd);
    BCS(&fd, 100, 101, 1, 2, 3, 4, 5, 6, 20, 21, 22, 30, 31, 32, 33);
    BCS(&fd, 200, 201, 1, 2, 3, 4, 5, 6, 40, 41, 42, 30, 31, 32, 33);
    BCS(&fd, 300);
    seg(&fd);                      /* the incomplete segment */
    BCS(&fd, 7, 100, 101, 1, 2, 3, 4, 5, 6);
    fd.tsc += 100;
    seg(&fd);                      /* after the gap */
    BCS(&fd, 30, 31, 32, 33, 34);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 20, 21, 22 };
    expect(r, want, 3);
    cr_assert_eq(st.filled, 1);
    cr_assert_eq(st.rejoined, 1);
    cr_assert_eq(st.bytecodes, 3);
    /* the fill sits before the next segment's FL_SEGMENT, in order */
    guint i = 0;
    while (g_array_index(o.ev, fl_event, i).origin != FL_RECOVERED)
        i++;
    cr_assert_eq(g_array_index(o.ev, fl_event, i + 3).kind, FL_SEGMENT);
    cr_assert_eq(g_array_index(o.ev, fl_event, i + 4).bci, 30);
    /* every input event is passed on, unchanged and once */
    cr_assert_eq(o.ev->len, 3 + 3 + 31 + 9 + 5);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* The same history, the other stretch's suffix: the other one wins. */
Test(recover, other_suffix_other_candidate)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0 };
    seg(&fd);
    BCS(&fd, 100, 101, 1, 2, 3, 4, 5, 6, 20, 21, 22, 30, 31, 32, 33);
    BCS(&fd, 200, 201, 1, 2, 3, 4, 5, 6, 40, 41, 42, 30, 31, 32, 33, 300);
    seg(&fd);
    BCS(&fd, 201, 1, 2, 3, 4, 5, 6);
    seg(&fd);
    BCS(&fd, 30, 31, 32, 33);
    rv_finish(fd.f, NULL);
    GArray *r = recovered(&o);
    const int want[] = { 40, 41, 42 };
    expect(r, want, 3);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* Calls and returns of the continuation are replayed with the bytecodes;
 * events the incomplete segment already has after its last bytecode are
 * not repeated. */
Test(recover, calls_replayed_tail_not_repeated)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 5);
    callret(&fd, FL_CALL, 9);
    BCS(&fd, 50, 51);
    callret(&fd, FL_RETURN, 9);
    BCS(&fd, 6, 7, 8, 9, 10);
    seg(&fd);
    BCS(&fd, 0, 1, 2, 3, 4, 5);
    callret(&fd, FL_CALL, 9);
    seg(&fd);
    BCS(&fd, 6, 7, 8, 9);
    rv_finish(fd.f, NULL);
    GArray *r = recovered(&o);
    const int want[] = { 50, 51, -209 };
    expect(r, want, 3);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* An anchor seen nowhere before: no fill, the flow passes unchanged. */
Test(recover, no_candidate_no_fill)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    seg(&fd);
    BCS(&fd, 60, 61, 62, 63, 64);
    seg(&fd);
    BCS(&fd, 70, 71, 72, 73);
    seg(&fd);                      /* too short an anchor: 3 symbols */
    BCS(&fd, 2, 3, 4);
    seg(&fd);
    BCS(&fd, 5, 6);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    cr_assert_eq(r->len, 0);
    cr_assert_eq(st.boundaries, 4);
    cr_assert_eq(st.filled, 0);
    cr_assert_eq(st.no_candidate, 3);
    cr_assert_eq(st.no_anchor, 1);
    cr_assert_eq(o.ev->len, 5 + 10 + 5 + 4 + 3 + 2);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* No rejoin in sight: the continuation ends where its own segment ends, or
 * where the gap's time span is used up. */
Test(recover, bounded_without_rejoin)
{
    for (int timed = 0; timed < 2; timed++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = opts();
        op.no_time = !timed;
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0 };
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4);
        fd.tsc += 2;               /* the gap lasts 3 ticks: 5 6 7 */
        seg(&fd);
        BCS(&fd, 90, 91, 92, 93);
        rv_finish(fd.f, NULL);
        GArray *r = recovered(&o);
        if (timed) {
            const int want[] = { 5, 6, 7 };
            expect(r, want, 3);
        } else {
            const int want[] = { 5, 6, 7, 8, 9, 10 };
            expect(r, want, 6);
        }
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* A segment break where nothing is missing: the best candidate rejoins at
 * once and nothing is filled. */
Test(recover, nothing_missing)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 8);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    seg(&fd);
    BCS(&fd, 5, 6, 7, 8);
    rv_stats st;
    rv_finish(fd.f, &st);
    cr_assert_eq(st.filled, 0);
    cr_assert_eq(st.empty_rejoin, 1);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* A history longer than the window: old stretches are forgotten, recent
 * ones still found, and memory stays bounded. */
Test(recover, bounded_window)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    op.window = 64;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0 };
    seg(&fd);
    BCS(&fd, 500, 501, 502, 503, 504, 505);
    for (int i = 0; i < 1000; i++)
        BCS(&fd, 1000 + i % 50);
    BCS(&fd, 1, 2, 3, 4, 5, 6);
    seg(&fd);
    BCS(&fd, 500, 501, 502, 503);  /* only in the forgotten past */
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);          /* recent */
    seg(&fd);
    BCS(&fd, 6);
    rv_stats st;
    rv_finish(fd.f, &st);
    cr_assert_eq(st.no_candidate, 2, "%llu", (unsigned long long)st.no_candidate);
    cr_assert_eq(st.filled, 1);
    GArray *r = recovered(&o);
    const int want[] = { 5 };
    expect(r, want, 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* Coarse times do not bound a continuation: the thread's rate of bytecodes
 * per tick does (twice what the gap's span allows, plus K). */
Test(recover, bounded_by_rate)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = { .k = 4 };
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0 };
    seg(&fd);
    for (int i = 0; i < 20; i++)   /* 20 bytecodes in 19 ticks */
        BCS(&fd, 1000 + i);
    seg(&fd);
    fd.coarse = 1;
    BCS(&fd, 500, 501, 502, 503);
    for (int i = 0; i < 50; i++)
        BCS(&fd, 600 + i);
    fd.tsc++;
    seg(&fd);
    fd.coarse = 0;
    BCS(&fd, 500, 501, 502, 503);
    fd.tsc += 1;                   /* a span of 2 ticks: 2 * 2 * 20 / 19 + 4 = 8 */
    seg(&fd);
    BCS(&fd, 900, 901, 902, 903);
    rv_finish(fd.f, NULL);
    GArray *r = recovered(&o);
    const int want[] = { 600, 601, 602, 603, 604, 605, 606, 607 };
    expect(r, want, 8);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* A new segment without a gap before it (the projector had to find the
 * context again): nothing is missing, so nothing is filled even where a
 * candidate would continue. */
Test(recover, no_gap_no_fill)
{
    out o = { .ev = g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_filter *f = rv_new(NULL, collect, &o);
    feeder fd = { .f = f, .tsc = 100 };
    static const int a[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
    seg(&fd);
    bcs(&fd, a, 16);
    bcs(&fd, a, 8);
    fl_event e = { .kind = FL_SEGMENT, .tid = 1, .tsc = fd.tsc, .seq = fd.seq++ };
    rv_event(&e, f);
    static const int b[] = { 40, 41, 42, 43, 44, 45, 46, 47, 48 };
    bcs(&fd, b, 9);
    rv_stats st;
    rv_finish(f, &st);
    for (guint i = 0; i < o.ev->len; i++)
        cr_assert_eq(g_array_index(o.ev, fl_event, i).origin, FL_DECODED);
    cr_assert_eq(o.ev->len, 1 + 16 + 8 + 1 + 9);
    rv_free(f);
    g_array_free(o.ev, TRUE);
}
