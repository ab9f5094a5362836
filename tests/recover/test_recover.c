/* Units of the recovery filter (recover/recover.h) on hand-made flows. */
#include <stdio.h>

#include <criterion/criterion.h>

#include <glib.h>

#include "reconstruct/cfg.h"
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
    uint64_t off;    /* the trace stream's offset after the newest bytecode */
    uint64_t step;   /* nonzero: the trace bytes each bytecode takes (else no offsets) */
} feeder;

/* A segment after a gap in the trace (the first one starts the thread). */
static void seg(feeder *fd)
{
    fl_event e = { .kind = FL_SEGMENT, .tid = 1, .tsc = fd->tsc, .seq = fd->seq,
                   .flags = fd->seq ? FL_F_AFTER_GAP : 0 };
    fd->seq++;
    rv_event(&e, fd->f);
}

static void bcs_in(feeder *fd, uint64_t method, const int *bci, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fd->off += fd->step;
        fl_event e = { .kind = FL_BYTECODE, .tid = 1, .tsc = fd->coarse ? fd->tsc : fd->tsc++,
                       .method_id = method, .bci = bci[i], .opcode = 0, .count = 1,
                       .offset = fd->step ? fd->off : 0 };
        rv_event(&e, fd->f);
    }
}

static void bcs(feeder *fd, const int *bci, size_t n)
{
    bcs_in(fd, M, bci, n);
}

static void callret(feeder *fd, fl_kind k, uint64_t method)
{
    fl_event e = { .kind = k, .tid = 1, .tsc = fd->tsc++, .method_id = method, .bci = -1 };
    rv_event(&e, fd->f);
}

#define BCS(fd, ...) do { const int a_[] = { __VA_ARGS__ }; \
        bcs(fd, a_, sizeof a_ / sizeof a_[0]); } while (0)
#define BCS_IN(fd, m, ...) do { const int a_[] = { __VA_ARGS__ }; \
        bcs_in(fd, m, a_, sizeof a_ / sizeof a_[0]); } while (0)

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
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
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
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
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
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 5);
    callret(&fd, FL_CALL, 9);
    BCS_IN(&fd, 9, 50, 51);
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
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
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
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
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

/* A segment after a gap whose size in trace bytes the collector counted:
 * the trace stream's offsets where the gap began and decoding resumed, and
 * the bytes lost in it. */
static void seg_counted(feeder *fd, uint64_t gap_offset, uint64_t resume_offset, uint64_t lost)
{
    fl_event e = { .kind = FL_SEGMENT, .tid = 1, .tsc = fd->tsc, .seq = fd->seq++,
                   .flags = FL_F_AFTER_GAP | FL_F_LOST_COUNTED, .gap_offset = gap_offset,
                   .resume_offset = resume_offset, .lost_bytes = lost };
    rv_event(&e, fd->f);
}

/* Where the collector counted what it lost, a hole holds the bytecodes its
 * bytes do at the thread's bytecodes per trace byte (here 24 in 240 bytes:
 * 30 lost bytes and 2 skipped are 3); its time (10 ticks at one bytecode a
 * tick) would say 10, and does when the bytes are not to be used. */
Test(recover, a_counted_hole_is_sized_by_its_bytes)
{
    for (int time_only = 0; time_only < 2; time_only++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = opts();
        op.no_time = 0;
        op.no_lost_bytes = time_only;
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20);
        seg_counted(&fd, 200, 200, 0);
        BCS(&fd, 1, 2, 3, 4);
        fd.tsc += 9;
        seg_counted(&fd, 238, 240, 30);
        BCS(&fd, 90, 91, 92, 93);
        rv_finish(fd.f, NULL);
        GArray *r = recovered(&o);
        if (time_only) {
            const int want[] = { 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 };
            expect(r, want, 10);
        } else {
            const int want[] = { 5, 6, 7 };
            expect(r, want, 3);
        }
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* A fill that does not rejoin ends where the trace bytes its events took
 * where they were decoded reach the hole's: the stretch it copies ran one
 * bytecode per byte, so the hole's 8 bytes hold 8 of its bytecodes, where
 * the thread's rate (24 bytecodes in 96 bytes) would say 2. Events without
 * stream offsets are cut at that rate. */
Test(recover, an_unconfirmed_fill_ends_at_the_bytes_its_hole_lost)
{
    for (int with_offsets = 0; with_offsets < 2; with_offsets++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = opts();
        op.no_time = 0;
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        fd.step = with_offsets ? 10 : 0;
        BCS(&fd, 1, 2, 3, 4);
        fd.step = with_offsets ? 1 : 0;
        BCS(&fd, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20);
        seg_counted(&fd, 56, 56, 0);
        fd.off = 56;
        fd.step = with_offsets ? 10 : 0;
        BCS(&fd, 1, 2, 3, 4);
        fd.tsc += 20;
        seg_counted(&fd, 96, 96, 8);
        BCS(&fd, 90, 91, 92, 93);
        rv_stats st;
        rv_finish(fd.f, &st);
        GArray *r = recovered(&o);
        if (with_offsets) {
            const int want[] = { 5, 6, 7, 8, 9, 10, 11, 12 };
            expect(r, want, 8);
        } else {
            const int want[] = { 5, 6 };
            expect(r, want, 2);
        }
        cr_assert_eq(st.rejoined, 0);
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* Of the places where a continuation rejoins (a loop's head, 5 6 7 8, at
 * every iteration), the one whose trace bytes are nearest to the hole's is
 * taken: two iterations of 40 bytes in a hole of 80, where the thread's
 * rate (25 bytecodes in 370 bytes) would say 5 bytecodes, one iteration.
 * Events without stream offsets are measured at that rate. */
Test(recover, a_rejoin_is_taken_where_the_bytes_of_the_fill_reach_the_holes)
{
    for (int with_offsets = 0; with_offsets < 2; with_offsets++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = opts();
        op.no_time = 0;
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        fd.step = with_offsets ? 10 : 0;
        BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8, 9);
        seg_counted(&fd, 210, 210, 0);
        fd.off = 210;
        fd.step = with_offsets ? 40 : 0;
        BCS(&fd, 1, 2, 3, 4);
        fd.tsc += 20;
        seg_counted(&fd, 370, 370, 80);
        BCS(&fd, 5, 6, 7, 8, 9);
        rv_stats st;
        rv_finish(fd.f, &st);
        GArray *r = recovered(&o);
        if (with_offsets) {
            const int want[] = { 5, 6, 7, 8, 5, 6, 7, 8 };
            expect(r, want, 8);
        } else {
            const int want[] = { 5, 6, 7, 8 };
            expect(r, want, 4);
        }
        cr_assert_eq(st.rejoined, 1);
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* Compiled code's flow: calls and returns of methods 10, 11 and 12 (inlined
 * frames), no bytecode. */
static void compiled_calls(feeder *fd)
{
    for (uint64_t m = 10; m < 13; m++) {
        callret(fd, FL_CALL, m);
        callret(fd, FL_RETURN, m);
    }
}

/* A past of compiled code only (calls and returns of inlined frames, no
 * bytecode) is anchored on its newest K calls and returns: its continuation
 * is the history after the same calls and returns. Not where the hole holds
 * no bytecodes (its bytes, counted by the collector, hold none: a decode
 * error's skip), since nothing but the events would bound such a fill. */
Test(recover, compiled_past_anchored_on_calls_and_returns)
{
    for (int lost = 0; lost < 2; lost++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = opts();
        op.no_time = 0;
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        BCS(&fd, 1, 2);
        compiled_calls(&fd);
        BCS(&fd, 20, 21, 22, 30, 31, 32, 33);
        /* the same bytecodes after other calls: a bytecode anchor would not
         * tell the two apart */
        callret(&fd, FL_CALL, 14);
        callret(&fd, FL_RETURN, 14);
        BCS(&fd, 1, 2, 40, 41, 30, 31, 32, 33, 50);
        /* the incomplete segment, compiled code only; 22 bytecodes in 220
         * bytes before it */
        seg_counted(&fd, 220, 220, 0);
        compiled_calls(&fd);
        fd.tsc += 3;
        seg_counted(&fd, 240, 240, lost ? 30 : 0);   /* 3 bytecodes' worth, or none */
        BCS(&fd, 30, 31, 32, 33, 34);
        rv_stats st;
        rv_finish(fd.f, &st);
        GArray *r = recovered(&o);
        if (lost) {
            const int want[] = { 20, 21, 22 };
            expect(r, want, 3);
            cr_assert_eq(st.call_anchored, 1);
            cr_assert_eq(st.rejoined, 1);
        } else {
            cr_assert_eq(r->len, 0);
            cr_assert_eq(st.call_anchored, 0);
        }
        cr_assert_eq(st.no_anchor, (uint64_t)!lost);
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* A past whose newest bytecodes never ran before (no stretch of history
 * continues them) but whose calls and returns since did is anchored on
 * those, as a past of compiled code alone is. */
Test(recover, a_past_whose_bytecodes_never_ran_before_is_anchored_on_its_calls)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    op.no_time = 0;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 5);
    compiled_calls(&fd);
    BCS(&fd, 20, 21, 22, 30, 31, 32, 33);
    /* the incomplete segment: bytecodes the history never ran, then the
     * same compiled code; 22 bytecodes in 220 bytes before it */
    seg_counted(&fd, 220, 220, 0);
    BCS(&fd, 90, 91, 92, 93);
    compiled_calls(&fd);
    fd.tsc += 3;
    seg_counted(&fd, 240, 240, 30);      /* 3 bytecodes' worth */
    BCS(&fd, 30, 31, 32, 33, 34);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 20, 21, 22 };
    expect(r, want, 3);
    cr_assert_eq(st.call_anchored, 1);
    cr_assert_eq(st.rejoined, 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* A ranking looks at the anchor's newest RV_RANK_WALK runs only: a loop's
 * K-gram recurs at every iteration. */
Test(recover, a_ranking_looks_at_the_newest_runs_of_its_anchor)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    feeder fd = { rv_new(&(rv_options){ .k = 4, .no_time = 1 }, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    for (unsigned i = 0; i < 3 * RV_RANK_WALK; i++)
        BCS(&fd, 1, 2, 3, 4);
    BCS(&fd, 50);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    seg(&fd);
    BCS(&fd, 50, 51);
    rv_stats st;
    rv_finish(fd.f, &st);
    cr_assert_eq(st.boundaries, 2);
    cr_assert_gt(st.candidates, 0);
    cr_assert_leq(st.candidates, RV_RANK_WALK, "%llu candidates",
                  (unsigned long long)st.candidates);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* The next segment starts in compiled code (calls and returns of inlined
 * frames, no bytecode): it is met on those calls and returns. Of the two
 * stretches that continue the anchor, the one that reaches them is the
 * fill, up to them; without that target neither would be confirmed. */
Test(recover, a_next_segment_of_compiled_code_is_met_on_its_calls_and_returns)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 200, 1, 2, 3, 4, 5, 6, 40, 41, 42, 43, 44, 45, 46, 47);
    seg(&fd);
    BCS(&fd, 100, 1, 2, 3, 4, 5, 6, 20, 21, 22);
    compiled_calls(&fd);
    BCS(&fd, 60, 61);
    seg(&fd);                      /* the incomplete segment */
    BCS(&fd, 1, 2, 3, 4, 5, 6);
    fd.tsc += 100;
    seg(&fd);                      /* after the gap: compiled code */
    compiled_calls(&fd);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 20, 21, 22 };
    expect(r, want, 3);
    cr_assert_eq(st.rejoin_on_calls, 1);
    cr_assert_eq(st.rejoined, 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* The next segment starts with a call (fewer than K calls and returns
 * before its first bytecode): the fill rejoins on its bytecodes and ends
 * before the call, which the segment holds. */
Test(recover, a_rejoin_leaves_the_calls_the_next_segment_starts_with_to_it)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 100, 1, 2, 3, 4, 5, 6, 20, 21);
    callret(&fd, FL_CALL, 9);
    BCS_IN(&fd, 9, 50, 51, 52, 53, 54);
    seg(&fd);                      /* the incomplete segment */
    BCS(&fd, 1, 2, 3, 4, 5, 6);
    fd.tsc += 100;
    seg(&fd);                      /* after the gap */
    callret(&fd, FL_CALL, 9);
    BCS_IN(&fd, 9, 50, 51, 52, 53);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 20, 21 };
    expect(r, want, 2);
    cr_assert_eq(st.rejoined, 1);
    cr_assert_eq(st.rejoin_on_calls, 0);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* A fill anchored on calls and returns that runs no bytecode for long is
 * bounded by the events the hole's bytes hold: 100 bytes at 1,412 events
 * in 2,006 bytes hold 70, so the search runs at most 2 * 70 + K events, not
 * the history's 1,000 calls and returns before its next bytecode, and a
 * fill that never rejoins keeps 70 of them. */
Test(recover, a_fill_on_calls_holds_the_events_its_bytes_do)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    op.no_time = 0;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    for (int b = 1000; b < 1400; b++)
        bcs(&fd, &b, 1);
    compiled_calls(&fd);
    for (int i = 0; i < 500; i++) {
        callret(&fd, FL_CALL, 20);
        callret(&fd, FL_RETURN, 20);
    }
    BCS(&fd, 30, 31, 32, 33);
    seg_counted(&fd, 2000, 2000, 0);
    compiled_calls(&fd);
    fd.tsc += 3;
    seg_counted(&fd, 2006, 2006, 100);
    BCS(&fd, 90, 91, 92, 93);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    cr_assert_eq(st.call_anchored, 1);
    cr_assert_eq(st.rejoined, 0);
    cr_assert(r->len > 0 && r->len <= 70, "%u events recovered", r->len);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* The only run of M's 1 2 3 4 in the history returned to method 40; the
 * flow's M was called from 30. The continuation is kept up to the return,
 * where it contradicts the stack, rather than dropped: what M ran before
 * returning does not depend on its caller. */
Test(recover, a_continuation_every_candidate_contradicts_is_kept_up_to_the_contradiction)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS_IN(&fd, 40, 70);
    callret(&fd, FL_CALL, M);
    BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 8);
    callret(&fd, FL_RETURN, M);
    BCS_IN(&fd, 40, 71, 72, 73, 74);
    seg(&fd);                      /* the incomplete segment */
    BCS_IN(&fd, 30, 50, 51);
    callret(&fd, FL_CALL, M);
    BCS(&fd, 1, 2, 3, 4);
    fd.tsc += 100;
    seg(&fd);                      /* after the gap */
    BCS_IN(&fd, 30, 60, 61, 62, 63);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 5, 6, 7, 8, -200 - M };
    expect(r, want, 5);
    cr_assert_eq(st.cut_at_stack, 1);
    cr_assert(st.inconsistent >= 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* Bytecodes of M, each followed by a call of method 9 and its return, as
 * compiled code shows them: events without bytecodes. */
static void bcs_calling(feeder *fd, int from, int n)
{
    for (int b = from; b < from + n; b++) {
        bcs(fd, &b, 1);
        callret(fd, FL_CALL, 9);
        callret(fd, FL_RETURN, 9);
    }
}

/* The events a fill may hold follow the bytecodes the hole holds: here 8
 * (80 bytes at 24 bytecodes in 240), each with a call and a return, where
 * max_fill is 12 events. The fill, unconfirmed, ends with the 8th bytecode;
 * a bound of 12 events would stop it after the 4th. */
Test(recover, a_fill_holds_the_events_its_bytecodes_come_with)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    op.no_time = 0;
    op.max_fill = 12;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    bcs_calling(&fd, 1, 20);
    seg_counted(&fd, 200, 200, 0);
    bcs_calling(&fd, 1, 4);
    fd.tsc += 9;
    seg_counted(&fd, 238, 240, 78);
    BCS(&fd, 90, 91, 92, 93);
    rv_finish(fd.f, NULL);
    GArray *r = recovered(&o);
    int want[24];
    for (int i = 0; i < 8; i++) {
        want[3 * i] = 5 + i;
        want[3 * i + 1] = -100 - 9;
        want[3 * i + 2] = -200 - 9;
    }
    expect(r, want, 22);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* The bytecodes per trace byte are those of the newest 16 KiB of decoded
 * trace, also where one stretch between two gaps spans several times that:
 * here 1000 bytecodes in a first 16 KiB, 8000 in the next 32 KiB. The
 * newest 16 KiB hold 4000 (at the second stretch's rate), so 4 KiB lost
 * hold 1000; the whole history's average (3000 per 16 KiB) would say 750. */
Test(recover, a_long_stretch_keeps_the_byte_window_to_its_size)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    op.no_time = 0;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    const uint64_t window = 16u << 10;
    seg(&fd);
    for (int i = 0; i < 1000; i++)
        BCS(&fd, 1 + i % 8);
    seg_counted(&fd, window, window, 0);   /* a break where nothing was lost */
    for (int i = 1000; i < 9000; i++)
        BCS(&fd, 1 + i % 8);
    fd.tsc += 100;
    seg_counted(&fd, 3 * window, 3 * window, window / 4);
    BCS(&fd, 90, 91, 92, 93);
    rv_stats st;
    rv_finish(fd.f, &st);
    cr_assert(st.bytecodes >= 1000 - 8 && st.bytecodes <= 1000 + 8,
              "%llu bytecodes recovered where 4 KiB at 4000 per 16 KiB hold 1000",
              (unsigned long long)st.bytecodes);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* A segment break where nothing is missing: the best candidate rejoins at
 * once and nothing is filled. */
Test(recover, nothing_missing)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
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
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
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
 * per tick does. A rejoin is looked for up to twice what the gap's span
 * holds at that rate, plus K; a fill that never rejoins is kept to what the
 * span holds. */
Test(recover, bounded_by_rate)
{
    for (int rejoin = 0; rejoin < 2; rejoin++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = { .k = 4 };
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
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
        /* a span of 2 ticks at the rate of 22 bytecodes in 22 ticks (19 + 3:
         * the last bytecodes of a segment and the coarse one count no time,
         * so their bytecodes do not count either): 2 bytecodes expected, a
         * rejoin looked for within 2 * 2 + 4 = 8 */
        fd.tsc += 1;
        seg(&fd);
        if (rejoin)
            BCS(&fd, 606, 607, 608, 609);
        else
            BCS(&fd, 900, 901, 902, 903);
        rv_finish(fd.f, NULL);
        GArray *r = recovered(&o);
        const int want[] = { 600, 601, 602, 603, 604, 605 };
        expect(r, want, rejoin ? 6 : 2);
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* A thread whose start-up ran few bytecodes in a long time (class loading is
 * native code), then, after a first hole, a steady loop: the second hole is
 * filled at the loop's rate, not at the average of the thread's history
 * (which would allow 2 * 0.05 * 100 + 4 = 14 bytecodes here). Also with
 * coarse times, as in a trace (one time per PSB): a time here comes after
 * 4096 bytecodes, 4 of the rate's checkpoints at once. */
Test(recover, bounded_by_the_recent_rate)
{
    for (int coarse = 0; coarse < 2; coarse++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = { .k = 4 };
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        for (int i = 0; i < 10; i++) {   /* start-up: 10 bytecodes in a million ticks */
            BCS(&fd, 1000 + i);
            fd.tsc += 100000;
        }
        fd.tsc += 100000;
        seg(&fd);
        fd.coarse = coarse;
        for (int t = 0; t < 12; t++) {   /* the loop: one bytecode per tick */
            for (int i = 0; i < 512; i++)
                BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 8);
            if (coarse)
                fd.tsc += 4096;
        }
        BCS(&fd, 1, 2, 3, 4);
        fd.tsc += 100;                   /* a hole of 100 ticks */
        seg(&fd);
        fd.coarse = 0;
        BCS(&fd, 900, 901, 902, 903);
        rv_stats st;
        rv_finish(fd.f, &st);
        cr_assert(st.bytecodes >= 90 && st.bytecodes <= 2 * 100 + 4,
                  "%llu bytecodes recovered in a hole of 100 ticks at 1 per tick (coarse %d)",
                  (unsigned long long)st.bytecodes, coarse);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
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

/* ---- the three tiers, pruning, top N ---------------------------------- */

typedef struct ranks {
    GArray *calls;   /* GArray* of rv_ranked, one per ranking */
} ranks;

static void on_rank(void *ctx, const rv_ranked *top, unsigned n)
{
    ranks *r = ctx;
    GArray *a = g_array_new(FALSE, FALSE, sizeof(rv_ranked));
    g_array_append_vals(a, top, n);
    g_array_append_val(r->calls, a);
}

static void ranks_free(ranks *r)
{
    for (guint i = 0; i < r->calls->len; i++)
        g_array_free(g_array_index(r->calls, GArray *, i), TRUE);
    g_array_free(r->calls, TRUE);
}

static void op_at(feeder *fd, uint64_t method, int bci, int opcode)
{
    fl_event e = { .kind = FL_BYTECODE, .tid = 1, .tsc = fd->tsc++, .method_id = method,
                   .bci = bci, .opcode = opcode, .count = 1 };
    rv_event(&e, fd->f);
}

/* Each tier's common suffix, counted in events of the ending segment back
 * from its end. Ending segment, newest first: 4 3 2 1 (0-3), 11 (4), goto 10
 * (5), 21 (6), ifeq 30 (7), call 2 (8), 22 (9); the candidate: 4 3 2 1, 13,
 * goto 10, 21, goto 31, call 2, call 4. Tier 3 agrees up to 11 / 13 (4),
 * tier 2 up to ifeq 30 / goto 31 at 7, tier 1 up to where the candidate has
 * a second call (9). */
Test(recover, tiers_bound_each_other)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    ranks rk = { g_array_new(FALSE, FALSE, sizeof(GArray *)) };
    rv_options op = opts();
    op.on_rank = on_rank;
    op.rank_ctx = &rk;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    callret(&fd, FL_CALL, 4);              /* 0 */
    callret(&fd, FL_CALL, 2);              /* 1 */
    op_at(&fd, 2, 31, 0xa7);               /* 2: goto */
    op_at(&fd, 2, 21, 0);                  /* 3 */
    op_at(&fd, 2, 10, 0xa7);               /* 4: goto */
    op_at(&fd, 2, 13, 0);                  /* 5 */
    BCS_IN(&fd, 2, 1, 2, 3, 4);            /* 6 .. 9 */
    BCS_IN(&fd, 2, 60, 61, 62, 63, 64);    /* the continuation */
    seg(&fd);
    op_at(&fd, 9, 22, 0);
    callret(&fd, FL_CALL, 2);
    op_at(&fd, 2, 30, 0x99);               /* ifeq */
    op_at(&fd, 2, 21, 0);
    op_at(&fd, 2, 10, 0xa7);
    op_at(&fd, 2, 11, 0);
    BCS_IN(&fd, 2, 1, 2, 3, 4);
    seg(&fd);
    BCS_IN(&fd, 2, 61, 62, 63, 64);
    rv_finish(fd.f, NULL);
    /* the ranking at the last boundary (the first segment's end had none) */
    cr_assert_eq(rk.calls->len, 2, "%u rankings", rk.calls->len);
    GArray *a = g_array_index(rk.calls, GArray *, 1);
    cr_assert_eq(a->len, 1);
    rv_ranked r = g_array_index(a, rv_ranked, 0);
    cr_assert_eq(r.pos, 9);
    cr_assert_eq(r.l3, 4, "tier 3: %u", r.l3);
    cr_assert_eq(r.l2, 7, "tier 2: %u", r.l2);
    cr_assert_eq(r.l1, 9, "tier 1: %u", r.l1);
    GArray *rec = recovered(&o);
    const int want[] = { 60 };
    expect(rec, want, 1);
    g_array_free(rec, TRUE);
    ranks_free(&rk);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* A flow for the property test: segments of random events over a small
 * alphabet, so that anchors recur often and suffixes differ at every tier. */
typedef struct rev {
    fl_kind kind;
    uint64_t m;
    int bci, op;
    int seg;
} rev;

static int rnd_op(int bci) { return bci % 3 == 0 ? 0xa7 : bci % 3 == 1 ? 0x99 : 0; }

/* The brute force: every earlier position, its tier-3 common suffix with the
 * ending segment computed directly, the top n by (suffix, position). */
static GArray *brute_top(const rev *h, size_t nh, size_t seg_begin, size_t seg_end, unsigned k,
                         unsigned n)
{
    GArray *top = g_array_new(FALSE, FALSE, sizeof(rv_ranked));
    /* the anchor: the tail and the last k bytecodes of the ending segment */
    size_t lena = seg_end - seg_begin, span = 0;
    unsigned nb = 0;
    for (size_t i = 0; i < lena && nb < k; i++)
        if (h[seg_end - 1 - i].kind == FL_BYTECODE && ++nb == k)
            span = i + 1;
    if (nb < k)
        return NULL;
    if (lena > 4096)
        lena = 4096;
    for (size_t p = 0; p + 1 < nh && p + 1 < seg_end; p++) {
        if (h[p + 1].seg != h[p].seg)
            continue;
        size_t sb = p;
        while (sb > 0 && h[sb - 1].seg == h[p].seg)
            sb--;
        size_t lenb = p - sb + 1, l = 0;
        while (l < lena && l < lenb) {
            const rev *a = &h[seg_end - 1 - l], *b = &h[p - l];
            if (a->kind != b->kind || a->m != b->m || a->bci != b->bci)
                break;
            l++;
        }
        if (l < span)
            continue;
        rv_ranked r = { .pos = p, .l3 = (uint32_t)l };
        guint at = top->len;
        while (at > 0 && (l > g_array_index(top, rv_ranked, at - 1).l3 ||
                          (l == g_array_index(top, rv_ranked, at - 1).l3 &&
                           p > g_array_index(top, rv_ranked, at - 1).pos)))
            at--;
        g_array_insert_val(top, at, r);
        if (top->len > n)
            g_array_set_size(top, n);
    }
    return top;
}

/* Pruning on the tier-1 and tier-2 bounds never drops a candidate that
 * belongs in the top N: on random flows the pruned ranking on bytecodes is
 * the brute force's, and every reported candidate has tier 3 <= tier 2 <=
 * tier 1. */
Test(recover, pruning_keeps_the_true_top_n)
{
    GRand *rng = g_rand_new_with_seed(20211);
    uint64_t pruned = 0, compared = 0;
    for (int round = 0; round < 60; round++) {
        GArray *h = g_array_new(FALSE, FALSE, sizeof(rev));
        GArray *segends = g_array_new(FALSE, FALSE, sizeof(size_t));
        int nseg = 4 + g_rand_int_range(rng, 0, 6);
        for (int s = 0; s < nseg; s++) {
            int len = 6 + g_rand_int_range(rng, 0, 60);
            for (int i = 0; i < len; i++) {
                int r = g_rand_int_range(rng, 0, 10);
                rev e = { .seg = s };
                if (r == 0) {
                    e.kind = FL_CALL;
                    e.m = (uint64_t)g_rand_int_range(rng, 1, 3);
                    e.bci = -1;
                } else if (r == 1) {
                    e.kind = FL_RETURN;
                    e.m = (uint64_t)g_rand_int_range(rng, 1, 3);
                    e.bci = -1;
                } else {
                    e.kind = FL_BYTECODE;
                    e.m = 7;
                    e.bci = g_rand_int_range(rng, 0, 4);
                    e.op = rnd_op(e.bci);
                }
                g_array_append_val(h, e);
            }
            size_t end = h->len;
            g_array_append_val(segends, end);
        }
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        ranks rk = { g_array_new(FALSE, FALSE, sizeof(GArray *)) };
        rv_options op = { .k = 2, .no_time = 1, .candidates = 3, .max_links = 1,
                          .on_rank = on_rank, .rank_ctx = &rk };
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        size_t at = 0;
        for (int s = 0; s < nseg; s++) {
            seg(&fd);
            for (; at < g_array_index(segends, size_t, s); at++) {
                const rev *e = &g_array_index(h, rev, at);
                if (e->kind == FL_BYTECODE)
                    op_at(&fd, e->m, e->bci, e->op);
                else
                    callret(&fd, e->kind, e->m);
            }
        }
        rv_stats st;
        rv_finish(fd.f, &st);
        pruned += st.pruned_t1 + st.pruned_t2;
        /* one ranking per boundary with an anchor, in order */
        guint call = 0;
        for (int s = 0; s + 1 < nseg; s++) {
            size_t b = s ? g_array_index(segends, size_t, s - 1) : 0;
            GArray *want = brute_top((const rev *)h->data, h->len, b,
                                     g_array_index(segends, size_t, s), 2, 3);
            if (!want)
                continue;
            cr_assert(call < rk.calls->len, "round %d: no ranking at boundary %d", round, s);
            GArray *got = g_array_index(rk.calls, GArray *, call++);
            if (got->len != want->len) {
                for (guint i = 0; i < got->len; i++)
                    fprintf(stderr, "got %llu %u\n",
                            (unsigned long long)g_array_index(got, rv_ranked, i).pos,
                            g_array_index(got, rv_ranked, i).l3);
                for (guint i = 0; i < h->len; i++)
                    fprintf(stderr, "%u:%d/%llu/%d ", i, g_array_index(h, rev, i).kind,
                            (unsigned long long)g_array_index(h, rev, i).m,
                            g_array_index(h, rev, i).bci);
                fprintf(stderr, "\n");
            }
            cr_assert_eq(got->len, want->len, "round %d boundary %d: %u ranked, brute force %u",
                         round, s, got->len, want->len);
            for (guint i = 0; i < got->len; i++) {
                rv_ranked g = g_array_index(got, rv_ranked, i);
                rv_ranked w = g_array_index(want, rv_ranked, i);
                cr_assert(g.pos == w.pos && g.l3 == w.l3,
                          "round %d boundary %d rank %u: (%llu, %u), brute force (%llu, %u)",
                          round, s, i, (unsigned long long)g.pos, g.l3,
                          (unsigned long long)w.pos, w.l3);
                cr_assert(g.l3 <= g.l2 && g.l2 <= g.l1, "bounds %u %u %u", g.l1, g.l2, g.l3);
                compared++;
            }
            /* no candidate on bytecodes: the filter ranks again on the
             * past's calls and returns, where it has K of them (that
             * ranking is not the brute force's) */
            if (!want->len) {
                unsigned ncalls = 0;
                for (size_t i = b; i < g_array_index(segends, size_t, s); i++)
                    ncalls += g_array_index(h, rev, i).kind != FL_BYTECODE;
                if (ncalls >= 2)
                    call++;
            }
            g_array_free(want, TRUE);
        }
        cr_assert_eq(call, rk.calls->len);
        ranks_free(&rk);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
        g_array_free(h, TRUE);
        g_array_free(segends, TRUE);
    }
    /* the property is only tested if pruning happened */
    cr_assert(pruned > 0 && compared > 100, "pruned %llu, compared %llu",
              (unsigned long long)pruned, (unsigned long long)compared);
    g_rand_free(rng);
}

/* The top N come best first: longer suffix, then more recent. */
Test(recover, top_n_order)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    ranks rk = { g_array_new(FALSE, FALSE, sizeof(GArray *)) };
    rv_options op = opts();
    op.candidates = 3;
    op.on_rank = on_rank;
    op.rank_ctx = &rk;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 90, 1, 2, 3, 4, 50);          /* suffix 4, position 4 */
    BCS(&fd, 91, 92, 1, 2, 3, 4, 51);      /* suffix 6, position 11 */
    BCS(&fd, 92, 1, 2, 3, 4, 52);          /* suffix 5, position 17 */
    BCS(&fd, 93, 1, 2, 3, 4, 53);          /* suffix 4, position 23 */
    seg(&fd);
    BCS(&fd, 91, 92, 1, 2, 3, 4);
    seg(&fd);
    BCS(&fd, 70, 71, 72, 73);
    rv_finish(fd.f, NULL);
    /* the first segment's end, then the hole (and links chained after it) */
    cr_assert_geq(rk.calls->len, 2);
    GArray *a = g_array_index(rk.calls, GArray *, 1);
    cr_assert_eq(a->len, 3);
    const uint64_t pos[] = { 11, 17, 23 };
    const uint32_t l3[] = { 6, 5, 4 };
    for (unsigned i = 0; i < 3; i++) {
        rv_ranked r = g_array_index(a, rv_ranked, i);
        cr_assert(r.pos == pos[i] && r.l3 == l3[i], "rank %u: (%llu, %u)", i,
                  (unsigned long long)r.pos, r.l3);
    }
    ranks_free(&rk);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* ---- stack consistency, chaining ---------------------------------- */

/* Two stretches agree equally with the ending segment (method 5 called from
 * method 7); the more recent one ranks first, but it returns from 5 into
 * method 8, not the caller the segment shows: it is passed over for the
 * other one, which returns into 7. */
/* Two earlier calls of method 5 continue the anchor 1 2 3 4 5: the more
 * recent one from method 8, whose continuation returns into method 8 and so
 * contradicts the stack of the segment with the hole (called from M). */
static void stack_conflict_flows(feeder *fd)
{
    seg(fd);
    BCS(fd, 30);
    callret(fd, FL_CALL, 5);
    BCS_IN(fd, 5, 1, 2, 3, 4, 5, 40, 41);
    callret(fd, FL_RETURN, 5);
    BCS(fd, 31, 32, 33, 34);
    seg(fd);
    BCS_IN(fd, 8, 30);
    callret(fd, FL_CALL, 5);
    BCS_IN(fd, 5, 1, 2, 3, 4, 5, 42, 43);
    callret(fd, FL_RETURN, 5);
    BCS_IN(fd, 8, 50, 51, 52, 53);
    seg(fd);
    BCS(fd, 99);
    callret(fd, FL_CALL, 5);
    BCS_IN(fd, 5, 1, 2, 3, 4, 5);
    fd->tsc += 50;
    seg(fd);
    BCS(fd, 31, 32, 33, 34);
}

Test(recover, stack_inconsistent_candidate_passed_over)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    stack_conflict_flows(&fd);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 40, 41, -205 };
    expect(r, want, 3);
    cr_assert(st.inconsistent >= 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* The same flows with N = 1: the one candidate ranked (the most recent)
 * contradicts the stack, so a wider ranking is tried and the next one fills
 * the hole. */
Test(recover, wider_ranking_when_the_top_contradicts_the_stack)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    op.candidates = 1;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    stack_conflict_flows(&fd);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 40, 41, -205 };
    expect(r, want, 3);
    cr_assert_eq(st.inconsistent, 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* A hole longer than any one earlier stretch: the first candidate runs to
 * its segment's end, the search starts again from there (5 6 as the newest
 * part of the anchor) and the second stretch reaches the rejoin point. */
Test(recover, chaining_across_a_long_hole)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 100, 101, 1, 2, 3, 4, 5, 6);
    seg(&fd);
    BCS(&fd, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    seg(&fd);
    BCS(&fd, 9, 10, 11, 12);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 5, 6, 7, 8 };
    expect(r, want, 4);
    cr_assert_eq(st.links, 2);
    cr_assert_eq(st.rejoined, 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* ---- the length the gap's span holds ------------------------------------ */

/* A history at one bytecode per tick, with the gap's span: */
static void hole_of(feeder *fd, uint64_t ticks)
{
    fd->tsc += ticks - 1;    /* the last event before it took one */
    seg(fd);
}

/* The recovered events of the last hole only (recovered(), from the
 * segment before the last one). */
static GArray *recovered_last(out *o)
{
    guint from = 0, segs = 0;
    for (guint i = o->ev->len; i-- > 0;)
        if (g_array_index(o->ev, fl_event, i).kind == FL_SEGMENT && ++segs == 2) {
            from = i;
            break;
        }
    out tail = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    g_array_append_vals(tail.ev, &g_array_index(o->ev, fl_event, from), o->ev->len - from);
    GArray *r = recovered(&tail);
    g_array_free(tail.ev, TRUE);
    return r;
}

/* The first candidate meets the next segment's first symbols after 2
 * bytecodes, where the span holds about 20, and its segment ends further
 * on: that rejoin is too early to be the hole's end. The chain goes on
 * from that segment's end (20 21 22 23) and rejoins after 20 bytecodes. */
Test(recover, early_rejoin_passed_for_one_near_the_span)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = { .k = 4 };
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 10, 11, 30, 31, 32, 33, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23);
    seg(&fd);
    BCS(&fd, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 30, 31, 32, 33, 40);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    hole_of(&fd, 21);
    BCS(&fd, 30, 31, 32, 33);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 10, 11, 30, 31, 32, 33, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                         22, 23, 24, 25 };
    expect(r, want, 20);
    cr_assert_eq(st.rejoined, 1);
    cr_assert_eq(st.links, 2);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* The candidate meets the next segment's first symbols after 12 bytecodes,
 * where the span holds about 20, and its segment ends 8 further on: a
 * rejoin under 7/8 of the span is passed for the chain, which goes on from
 * that segment's end (40 41 42 43) and rejoins there: 20 bytecodes. */
Test(recover, a_rejoin_at_three_fifths_of_the_span_is_passed)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = { .k = 4 };
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 30, 31, 32, 33, 40, 41,
        42, 43);
    seg(&fd);
    BCS(&fd, 40, 41, 42, 43, 30, 31, 32, 33, 99);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    hole_of(&fd, 21);
    BCS(&fd, 30, 31, 32, 33);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered_last(&o);
    const int want[] = { 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 30, 31, 32, 33, 40, 41,
                         42, 43 };
    expect(r, want, 20);
    cr_assert_eq(st.rejoined, 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* Two candidates rejoin: the more recent one ranks first but rejoins after
 * 5 bytecodes, the other after 9, about what the span holds: that one. */
Test(recover, rejoin_nearest_to_the_span)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = { .k = 4 };
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 60, 61, 62, 63, 64, 65, 66, 67, 68, 30, 31, 32, 33);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 50, 51, 52, 53, 54, 30, 31, 32, 33);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    hole_of(&fd, 10);
    BCS(&fd, 30, 31, 32, 33);
    rv_finish(fd.f, NULL);
    GArray *r = recovered(&o);
    const int want[] = { 60, 61, 62, 63, 64, 65, 66, 67, 68 };
    expect(r, want, 9);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* The history's only stretch of a loop ends inside it (its segment ends
 * there): the candidate after the loop's last iteration is that iteration
 * again, so the loop is repeated for as many bytecodes as the span holds,
 * without a ranking per iteration; with no rejoin in sight the fill stops
 * there. */
Test(recover, loop_repeated_for_the_span)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = { .k = 4 };
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3);
    for (int i = 0; i < 20; i++)
        BCS(&fd, 5, 6, 7, 8);
    seg(&fd);
    BCS(&fd, 9, 1, 2, 3, 5, 6, 7, 8);
    hole_of(&fd, 400);
    BCS(&fd, 70, 71, 72, 73);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered_last(&o);
    cr_assert(r->len >= 380 && r->len <= 420, "%u bytecodes for a span of about 400",
              r->len);
    for (guint i = 0; i < r->len; i++)
        cr_assert_eq(g_array_index(r, int, i), 5 + (int)(i % 4), "event %u: %d", i, g_array_index(r, int, i));
    cr_assert(st.links >= 90, "%llu links", (unsigned long long)st.links);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* A loop repeated for the hole is repeated for as many copies as the
 * bytes of its piece go into the hole's: 100 iterations of 16 bytes in a
 * hole of 1600, where the thread's rate (91 bytecodes in 652 bytes) would
 * say 223 bytecodes. */
Test(recover, loop_repeated_for_the_bytes_of_the_hole)
{
    for (int with_offsets = 0; with_offsets < 2; with_offsets++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = { .k = 4 };
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        fd.step = with_offsets ? 4 : 0;
        BCS(&fd, 1, 2, 3);
        for (int i = 0; i < 20; i++)
            BCS(&fd, 5, 6, 7, 8);
        seg_counted(&fd, 332, 332, 0);
        fd.off = 332;
        fd.step = with_offsets ? 40 : 0;
        BCS(&fd, 9, 1, 2, 3, 5, 6, 7, 8);
        fd.tsc += 10;
        seg_counted(&fd, 652, 652, 1600);
        BCS(&fd, 70, 71, 72, 73);
        rv_finish(fd.f, NULL);
        GArray *r = recovered_last(&o);
        if (with_offsets)
            cr_assert_eq(r->len, 400, "%u bytecodes for 1600 bytes", r->len);
        else
            cr_assert(r->len >= 210 && r->len <= 230, "%u bytecodes for about 223", r->len);
        for (guint i = 0; i < r->len; i++)
            cr_assert_eq(g_array_index(r, int, i), 5 + (int)(i % 4), "event %u", i);
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* A segment break where no time passed (a decode error resumed within one
 * timing period) does not end the history there: the continuation reads on
 * into the next segment, whose announcement of the running frame
 * (FL_F_CONTEXT) is no call, and rejoins. A break where time passed (the
 * same flow, one tick later) ends it. */
Test(recover, continuation_reads_across_a_break_without_time)
{
    for (int timed = 0; timed < 2; timed++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = opts();
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        callret(&fd, FL_CALL, M);
        BCS(&fd, 1, 2, 3, 4, 10, 11, 12);
        fd.tsc -= !timed;         /* the break takes the last event's time */
        seg(&fd);
        fl_event ctx = { .kind = FL_CALL, .tid = 1, .tsc = fd.tsc++, .method_id = M, .bci = -1,
                         .flags = FL_F_CONTEXT };
        rv_event(&ctx, fd.f);
        BCS(&fd, 13, 20, 21, 22, 23);
        seg(&fd);
        callret(&fd, FL_CALL, M);
        BCS(&fd, 1, 2, 3, 4);
        hole_of(&fd, 5);
        BCS(&fd, 20, 21, 22, 23);
        rv_stats st;
        rv_finish(fd.f, &st);
        GArray *r = recovered(&o);
        const int want[] = { 10, 11, 12, 13 };
        expect(r, want, timed ? 3 : 4);
        cr_assert_eq(st.rejoined, !timed);
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* ---- the ICFG fallback --------------------------------------------- */

typedef struct prog {
    rc_cfg *cfg[3];  /* methods 1, 2 */
} prog;

static const rc_cfg *t_cfg(void *ctx, uint64_t m)
{
    prog *p = ctx;
    return m >= 1 && m <= 2 ? p->cfg[m] : NULL;
}

/* Every invoke calls method 2. */
static size_t t_targets(void *ctx, uint64_t m, uint32_t bci, uint64_t *res, size_t max)
{
    (void)ctx;
    (void)m;
    (void)bci;
    if (!max)
        return 0;
    res[0] = 2;
    return 1;
}

/* No earlier flow fits: the shortest path through the ICFG from the last
 * bytecode before the gap to the first after it is guessed, calls and
 * returns included; no path at all (a target the ICFG cannot reach): nothing. */
Test(recover, icfg_fallback)
{
    /* method 1: 0 iconst_0; 1 ifeq -> 9; 4 nop; 5 invokestatic #1; 8 nop; 9 nop;
     *           10 invokestatic #1; 13 nop; 14 return
     * method 2: 0 nop; 1 return */
    static const uint8_t c1[] = { 0x03, 0x99, 0x00, 0x08, 0x00, 0xb8, 0x00, 0x01, 0x00, 0x00,
                                  0xb8, 0x00, 0x01, 0x00, 0xb1 };
    static const uint8_t c2[] = { 0x00, 0xb1 };
    char err[256];
    prog pg = { { NULL, rc_cfg_build(c1, sizeof c1, NULL, 0, err, sizeof err),
                  rc_cfg_build(c2, sizeof c2, NULL, 0, err, sizeof err) } };
    cr_assert(pg.cfg[1] && pg.cfg[2], "%s", err);
    rv_icfg ic = { t_cfg, t_targets, &pg };
    for (int reachable = 0; reachable < 2; reachable++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = opts();
        op.icfg = &ic;
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        op_at(&fd, 1, 0, 0x03);
        fd.tsc += 10;
        seg(&fd);
        op_at(&fd, 1, reachable ? 13 : 7, 0);   /* 7 is inside an instruction */
        rv_stats st;
        rv_finish(fd.f, &st);
        GArray *r = g_array_new(FALSE, FALSE, sizeof(int));
        for (guint i = 0; i < o.ev->len; i++) {
            fl_event *e = &g_array_index(o.ev, fl_event, i);
            cr_assert_neq(e->origin, FL_RECOVERED);
            if (e->origin != FL_GUESSED)
                continue;
            int v = e->kind == FL_BYTECODE ? (int)e->method_id * 100 + e->bci
                    : e->kind == FL_CALL ? -100 - (int)e->method_id : -200 - (int)e->method_id;
            g_array_append_val(r, v);
        }
        if (reachable) {
            /* 1:1 ifeq taken to 1:9, 1:10 calls 2, 2:0, 2:1 returns, then 1:13 */
            const int want[] = { 101, 109, 110, -102, 200, 201, -202 };
            expect(r, want, 7);
            cr_assert_eq(st.guessed_gaps, 1);
            cr_assert_eq(st.guessed_bytecodes, 5);
        } else {
            cr_assert_eq(r->len, 0);
            cr_assert_eq(st.guessed_gaps, 0);
        }
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
    rc_cfg_free(pg.cfg[1]);
    rc_cfg_free(pg.cfg[2]);
}

/* A fill that never rejoins is the most recent candidate's whole
 * continuation; with cut_disputed it is kept only as far as the top
 * candidates agree: three earlier stretches continue the anchor with 10 11,
 * then each its own way, so the fill stops after 10 11. */
Test(recover, unconfirmed_fill_cut_where_candidates_split)
{
    for (int keep = 0; keep < 2; keep++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = opts();
        op.cut_disputed = !keep;
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4, 10, 11, 20, 21, 90);
        BCS(&fd, 1, 2, 3, 4, 10, 11, 30, 31, 91);
        BCS(&fd, 1, 2, 3, 4, 10, 11, 40, 41, 92);
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4);
        seg(&fd);
        BCS(&fd, 70, 71, 72, 73);
        rv_finish(fd.f, NULL);
        GArray *r = recovered(&o);
        if (keep) {
            const int want[] = { 10, 11, 40, 41, 92 };
            expect(r, want, 5);
        } else {
            const int want[] = { 10, 11 };
            expect(r, want, 2);
        }
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* ---- bounds --------------------------------------------------------- */

typedef struct tally {
    uint64_t decoded, recovered, last_tsc;
    int out_of_order;
    int recovered_late;   /* a recovered event after the held-back segment began */
} tally;

static int count_ev(const fl_event *ev, void *ctx)
{
    tally *t = ctx;
    if (ev->origin == FL_RECOVERED) {
        t->recovered++;
        t->recovered_late |= t->decoded > 1 + 10 + 1 + 4;
        return 0;
    }
    t->out_of_order |= ev->tsc < t->last_tsc;
    t->last_tsc = ev->tsc;
    t->decoded++;
    return 0;
}

/* A segment after a gap that holds only calls and returns (compiled code)
 * never shows K symbols: it is held back no further than the cap, and all
 * of it comes out, in order, after the fill. */
Test(recover, held_back_calls_bounded)
{
    tally t = { 0 };
    rv_options op = opts();
    op.window = 4096;
    feeder fd = { rv_new(&op, count_ev, &t), 1000, 0, 0, 0, 0 };
    uint64_t fed = 0;
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    fd.tsc += 10;
    seg(&fd);
    fed = 1 + 10 + 1 + 4 + 1;
    const uint64_t cap = 4 * op.k + RV_HOLD_EXTRA;
    uint64_t lag = 0;
    for (int i = 0; i < 1000000; i++) {
        callret(&fd, i % 2 ? FL_RETURN : FL_CALL, 9);
        fed++;
        if (fed - t.decoded > lag)
            lag = fed - t.decoded;
    }
    cr_assert_leq(lag, cap, "%llu events held back", (unsigned long long)lag);
    BCS(&fd, 30, 31, 32, 33);
    fed += 4;
    rv_stats st;
    rv_finish(fd.f, &st);
    cr_assert_eq(t.decoded, fed);
    cr_assert(!t.out_of_order);
    cr_assert(!t.recovered_late);
    cr_assert_eq(t.recovered, 6);   /* 5 .. 10: no rejoin point to stop at */
    cr_assert_eq(st.filled, 1);
    rv_free(fd.f);
}

/* More candidates than RV_MAX_CANDIDATES asked for: at most that many are
 * ranked, and the fill is still the best one's. */
Test(recover, candidates_clamped)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    ranks rk = { g_array_new(FALSE, FALSE, sizeof(GArray *)) };
    rv_options op = opts();
    op.candidates = 100000;
    op.on_rank = on_rank;
    op.rank_ctx = &rk;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    for (int i = 0; i < 400; i++)
        BCS(&fd, 1, 2, 3, 4, 1000 + i);
    BCS(&fd, 1, 2, 3, 4, 50, 51);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    seg(&fd);
    BCS(&fd, 70, 71, 72, 73);
    rv_finish(fd.f, NULL);
    cr_assert_geq(rk.calls->len, 1);
    guint most = 0;
    for (guint i = 0; i < rk.calls->len; i++)
        if (g_array_index(rk.calls, GArray *, i)->len > most)
            most = g_array_index(rk.calls, GArray *, i)->len;
    cr_assert_eq(most, RV_MAX_CANDIDATES, "%u", most);
    GArray *r = recovered(&o);
    const int want[] = { 50, 51 };
    expect(r, want, 2);
    g_array_free(r, TRUE);
    ranks_free(&rk);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* Many short segments through a small window: the segments' starts are
 * forgotten with their events, and recent ones still anchor a fill. */
Test(recover, many_segments_small_window)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    op.window = 64;
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    for (int i = 0; i < 20000; i++) {
        /* a new segment without a gap, some of them empty */
        fl_event e = { .kind = FL_SEGMENT, .tid = 1, .tsc = fd.tsc, .seq = fd.seq++ };
        rv_event(&e, fd.f);
        if (i % 3)
            BCS(&fd, 2000 + i % 7, 3000 + i % 11);
    }
    fl_event e = { .kind = FL_SEGMENT, .tid = 1, .tsc = fd.tsc, .seq = fd.seq++ };
    rv_event(&e, fd.f);
    BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 8, 9);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    seg(&fd);
    BCS(&fd, 6, 7, 8, 9);
    rv_stats st;
    rv_finish(fd.f, &st);
    cr_assert_eq(st.filled, 1);
    cr_assert_eq(st.rejoined, 1);
    GArray *r = recovered(&o);
    const int want[] = { 5 };
    expect(r, want, 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* ---- a next segment in a known context below the stack ---------------- */

/* The frames 10 11 12 13 found running (FL_F_CONTEXT), as a segment that
 * linked to the stack kept from the one before announces them. */
static void context_10_to_13(feeder *fd)
{
    for (uint64_t m = 10; m <= 13; m++) {
        fl_event e = { .kind = FL_CALL, .tid = 1, .tsc = fd->tsc, .method_id = m, .bci = -1,
                       .flags = FL_F_CONTEXT };
        rv_event(&e, fd->f);
    }
}

/* Method 13 calls 5, which runs 3 4 5 6 7 8; 5's return is not in the
 * flow (a segment that found its context again starts in 13 with 30 31 32
 * 33). Later the same code has a hole after 3 4 5 6, and the next segment
 * starts in 13 again, in a context it knows (10 11 12 13). */
static void known_context_below_flows(feeder *fd)
{
    seg(fd);
    context_10_to_13(fd);
    BCS_IN(fd, 13, 1, 2);
    callret(fd, FL_CALL, 5);
    BCS_IN(fd, 5, 3, 4, 5, 6, 7, 8);
    fl_event s = { .kind = FL_SEGMENT, .tid = 1, .tsc = fd->tsc, .seq = fd->seq++ };
    rv_event(&s, fd->f);     /* no gap: a new calling context only */
    BCS_IN(fd, 13, 30, 31, 32, 33, 34);
    seg(fd);
    context_10_to_13(fd);
    BCS_IN(fd, 13, 1, 2);
    callret(fd, FL_CALL, 5);
    BCS_IN(fd, 5, 3, 4, 5, 6);
    fd->tsc += 50;
    seg(fd);
    context_10_to_13(fd);
    BCS_IN(fd, 13, 30, 31, 32, 33);
}

Test(recover, rejoins_a_known_context_below_the_stack)
{
    /* 5 is on the stack at the hole and not in the next segment's context:
     * it returned in the gap, after 7 8. Compared from the top, the stacks
     * disagree (5 against 13), and nothing would rejoin. */
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = opts();
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    known_context_below_flows(&fd);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered(&o);
    const int want[] = { 7, 8 };
    expect(r, want, 2);
    cr_assert_eq(st.rejoined, 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* ---- the tail of a long hole -------------------------------------------- */

/* bcis from..from+n-1 in method m (stretch: in M), one per tick */
static void stretch_in(feeder *fd, uint64_t m, int from, int n)
{
    for (int i = 0; i < n; i++)
        BCS_IN(fd, m, from + i);
}

static void stretch(feeder *fd, int from, int n)
{
    stretch_in(fd, M, from, n);
}

/* The index of the first recovered event equal to v, or -1. */
static int find(GArray *r, int v)
{
    for (guint i = 0; i < r->len; i++)
        if (g_array_index(r, int, i) == v)
            return (int)i;
    return -1;
}

/* One segment of history, one bytecode a tick: after 1 2 3 4 the thread ran
 * A (3000), the junction symbols J, then C (3000); later, after D (5000),
 * J again, then E (3000), then the symbols 90-93. The hole after 1 2 3 4
 * lasts as long as 3000 + 6 + 3000 bytecodes take, and the next segment
 * starts with 90-93: the continuation from 1 2 3 4 never reaches them
 * within twice that, so without a tail the fill is A J C, cut to what the
 * span holds. With the tail, its first half comes from the anchor before
 * the hole, its second from the history that led to the next segment's
 * start:
 *   - joined at J where both run it: A J E;
 *   - with other symbols in place of the second J, cut at halfway: the
 *     first half of A J C, then the end of the history before 90-93;
 *   - when the next segment starts with symbols the history never ran
 *     (95-98), there is no tail: A J C. */
Test(recover, a_long_hole_ends_with_the_history_before_the_next_segment)
{
    for (int variant = 0; variant < 3; variant++) {
        int joint = variant == 0, unseen = variant == 2;
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = { .k = 4 };
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4);
        stretch(&fd, 10000, 3000);                 /* A */
        BCS(&fd, 7, 8, 9, 10, 11, 12);             /* J */
        stretch(&fd, 20000, 3000);                 /* C */
        stretch(&fd, 30000, 5000);                 /* D */
        if (joint)
            BCS(&fd, 7, 8, 9, 10, 11, 12);
        else
            BCS(&fd, 70, 80, 90, 100, 110, 120);
        stretch(&fd, 40000, 3000);                 /* E */
        BCS(&fd, 90, 91, 92, 93, 94);
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4);
        hole_of(&fd, 6007);
        if (unseen)
            BCS(&fd, 95, 96, 97, 98);
        else
            BCS(&fd, 90, 91, 92, 93);
        rv_stats st;
        rv_finish(fd.f, &st);
        GArray *r = recovered_last(&o);
        cr_assert_eq(st.spliced, (uint64_t)!unseen, "variant %d", variant);
        cr_assert(r->len >= 5990 && r->len <= 6012, "variant %d: %u recovered", variant, r->len);
        cr_assert_eq(g_array_index(r, int, 0), 10000);
        if (joint) {
            cr_assert_eq(g_array_index(r, int, 3000), 7);
            cr_assert_eq(g_array_index(r, int, 3005), 12);
            cr_assert_eq(g_array_index(r, int, 3006), 40000);
        } else if (!unseen) {
            /* A, the start of J, then the end of the history before 90 */
            int e = find(r, 40000);
            cr_assert(e >= 2990 && e <= 3010, "E starts at %d", e);
            cr_assert_eq(find(r, 20000), -1);
            cr_assert_eq(g_array_index(r, int, 2999), 12999);
        } else {
            cr_assert_eq(g_array_index(r, int, 3006), 20000);
            cr_assert_eq(find(r, 40000), -1);
        }
        if (!unseen)
            cr_assert_eq(g_array_index(r, int, r->len - 1), 42999);
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* The tail runs in other frames than the fill where they meet: the history
 * before the next segment's start ran in method 8, called from M. The
 * fill's frame returns there and method 8 is found running (a context
 * call: no call is counted), so calls and returns in the fill nest. */
Test(recover, a_tail_in_other_frames_is_found_running)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = { .k = 4 };
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    stretch(&fd, 10000, 3000);
    stretch(&fd, 20000, 3000);
    stretch(&fd, 30000, 5000);
    callret(&fd, FL_CALL, 8);
    stretch_in(&fd, 8, 40000, 6000);
    BCS_IN(&fd, 8, 90, 91, 92, 93, 94);
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    hole_of(&fd, 6007);
    BCS_IN(&fd, 8, 90, 91, 92, 93);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered_last(&o);
    cr_assert_eq(st.spliced, 1);
    int ret = find(r, -200 - M), call = find(r, -100 - 8);
    cr_assert(ret > 2900 && call == ret + 1, "return at %d, call at %d", ret, call);
    cr_assert_eq(g_array_index(r, int, ret - 1) / 1000, 20);      /* the fill: A, then C */
    cr_assert_eq(g_array_index(r, int, call + 1) / 1000, 42);     /* the tail's end */
    cr_assert_eq(g_array_index(r, int, r->len - 1), 45999);
    /* the call is a frame found running */
    guint seen = 0;
    for (guint i = 0; i < o.ev->len; i++) {
        const fl_event *e = &g_array_index(o.ev, fl_event, i);
        if (e->origin == FL_RECOVERED && e->kind == FL_CALL && e->method_id == 8) {
            cr_assert(e->flags & FL_F_CONTEXT);
            seen++;
        }
    }
    cr_assert_eq(seen, 1);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}

/* As above (A J C, D J E), with a break in E 1000 bytecodes before 90-93:
 * a decode error's (the collector lost nothing, the decoder resumed 100
 * bytes on) is read back across, so the tail joins at J; a loss of trace is
 * not, and a tail of 1000 bytecodes is too short to end the fill with. */
Test(recover, a_tail_reads_back_across_a_decode_error_only)
{
    for (int loss = 0; loss < 2; loss++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = { .k = 4 };
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4);
        stretch(&fd, 10000, 3000);
        BCS(&fd, 7, 8, 9, 10, 11, 12);
        stretch(&fd, 20000, 3000);
        stretch(&fd, 30000, 5000);
        BCS(&fd, 7, 8, 9, 10, 11, 12);
        stretch(&fd, 40000, 2000);
        fd.tsc += 5;
        seg_counted(&fd, 100000, loss ? 100000 : 100100, loss ? 5000 : 0);
        stretch(&fd, 42000, 1000);
        BCS(&fd, 90, 91, 92, 93, 94);
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4);
        hole_of(&fd, 6007);
        BCS(&fd, 90, 91, 92, 93);
        rv_stats st;
        rv_finish(fd.f, &st);
        GArray *r = recovered_last(&o);
        if (loss) {
            cr_assert_eq(st.spliced, 0);
            cr_assert_eq(g_array_index(r, int, 3006), 20000);
        } else {
            cr_assert_eq(st.spliced, 1);
            cr_assert_eq(g_array_index(r, int, 3006), 40000);
            cr_assert_eq(g_array_index(r, int, r->len - 1), 42999);
        }
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* The segment before the hole ran 50-53, which the history never ran, so no
 * candidate continues it; the next segment starts with 90-93, which the
 * history ran after A (3000). The hole (2000 ticks at one bytecode a tick)
 * is filled with the history before 90-93 alone: the end of A, rejoining
 * at 90. When the next segment's start is unseen too (95-98), there is
 * nothing to fill with. */
Test(recover, a_hole_no_candidate_continues_is_filled_from_its_other_end)
{
    for (int unseen = 0; unseen < 2; unseen++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = { .k = 4 };
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4);
        stretch(&fd, 10000, 3000);                 /* A */
        BCS(&fd, 90, 91, 92, 93, 94);
        seg(&fd);
        BCS(&fd, 50, 51, 52, 53);
        hole_of(&fd, 2000);
        if (unseen)
            BCS(&fd, 95, 96, 97, 98);
        else
            BCS(&fd, 90, 91, 92, 93);
        rv_stats st;
        rv_finish(fd.f, &st);
        GArray *r = recovered_last(&o);
        if (unseen) {
            cr_assert_eq(r->len, 0);
            cr_assert_eq(st.spliced, 0);
            cr_assert_eq(st.no_candidate, 2);
        } else {
            cr_assert_eq(st.spliced, 1);
            cr_assert(r->len >= 1990 && r->len <= 2000, "%u recovered", r->len);
            cr_assert_eq(g_array_index(r, int, 0), 13000 - (int)r->len);
            cr_assert_eq(g_array_index(r, int, r->len - 1), 12999);
            cr_assert_eq(g_array_index(r, int, r->len - 2), 12998);
            cr_assert_eq(find(r, 90), -1);
        }
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* The only candidate for the anchor 1 2 3 4 meets the next segment's
 * 90-93 after 3 bytecodes, then runs a bytecode of method 9, which the
 * flow's stack (M) contradicts. The hole holds 3000 bytecodes: such a
 * rejoin, far short of it, is only a fallback, and one under half the hole
 * comes after the tail. With a later run of 90-93 after X (4000), the fill
 * is the end of X; without one, it is 5 6 7. */
Test(recover, an_early_rejoin_whose_stack_then_contradicts_is_a_fallback)
{
    for (int tail = 0; tail < 2; tail++) {
        out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
        rv_options op = { .k = 4 };
        feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
        seg(&fd);
        stretch(&fd, 30000, 500);
        BCS(&fd, 1, 2, 3, 4, 5, 6, 7, 90, 91, 92, 93);
        BCS_IN(&fd, 9, 50);
        seg(&fd);
        stretch(&fd, 40000, 500);
        if (tail) {
            stretch(&fd, 20000, 4000);                 /* X */
            BCS(&fd, 90, 91, 92, 93, 94);
        }
        seg(&fd);
        BCS(&fd, 1, 2, 3, 4);
        hole_of(&fd, 3000);
        BCS(&fd, 90, 91, 92, 93);
        rv_stats st;
        rv_finish(fd.f, &st);
        GArray *r = recovered_last(&o);
        if (tail) {
            cr_assert_eq(st.spliced, 1);
            cr_assert(r->len >= 2900 && r->len <= 3000, "%u recovered", r->len);
            cr_assert_eq(g_array_index(r, int, r->len - 1), 23999);
            cr_assert_eq(find(r, 5), -1);
        } else {
            int want[] = { 5, 6, 7 };
            expect(r, want, 3);
            cr_assert_eq(st.spliced, 0);
        }
        g_array_free(r, TRUE);
        rv_free(fd.f);
        g_array_free(o.ev, TRUE);
    }
}

/* As above, with two earlier runs of 90-93, each after a segment's start:
 * the newer after B (300), the older after A (1500). Neither reads back
 * the whole hole (2000); the longer tail, A's, fills it. */
Test(recover, the_longest_tail_fills_a_hole_no_candidate_continues)
{
    out o = { g_array_new(FALSE, FALSE, sizeof(fl_event)) };
    rv_options op = { .k = 4 };
    feeder fd = { rv_new(&op, collect, &o), 1000, 0, 0, 0, 0 };
    seg(&fd);
    BCS(&fd, 1, 2, 3, 4);
    seg(&fd);
    stretch(&fd, 10000, 1500);                     /* A */
    BCS(&fd, 90, 91, 92, 93, 94);
    seg(&fd);
    stretch(&fd, 60000, 300);                      /* B */
    BCS(&fd, 90, 91, 92, 93, 94);
    seg(&fd);
    BCS(&fd, 50, 51, 52, 53);
    hole_of(&fd, 2000);
    BCS(&fd, 90, 91, 92, 93);
    rv_stats st;
    rv_finish(fd.f, &st);
    GArray *r = recovered_last(&o);
    cr_assert_eq(st.spliced, 1);
    cr_assert_eq(r->len, 1500);
    cr_assert_eq(g_array_index(r, int, 0), 10000);
    cr_assert_eq(g_array_index(r, int, 1499), 11499);
    g_array_free(r, TRUE);
    rv_free(fd.f);
    g_array_free(o.ev, TRUE);
}
