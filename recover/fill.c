/* The fill's pieces: how much of the hole they hold (events, bytecodes,
 * trace bytes), cutting them to size, and emitting them as FL_RECOVERED
 * events. */
#include "recover/filter.h"

void rv_pieces_free(GArray *pieces)
{
    for (guint k = 0; k < pieces->len; k++) {
        GArray *sm = g_array_index(pieces, piece, k).seam;
        if (sm)
            g_array_free(sm, TRUE);
    }
    g_array_free(pieces, TRUE);
}

/* How far the other stack-consistent candidates' continuations (starts s[],
 * lengths l[]) agree with the picked one's, event by event: up to the first
 * event that fewer than half of those still running share. Where the
 * candidates split, the history went both ways there (a data-dependent
 * branch): the picked continuation is a guess from that point on. */
uint64_t rv_agreement(rv_filter *f, const uint64_t *s, const uint64_t *l, unsigned n,
                      unsigned pick)
{
    uint64_t i = 0;
    for (; i < l[pick]; i++) {
        uint64_t key = ev_at(f, s[pick] + i)->key;
        unsigned voters = 0, same = 0;
        for (unsigned c = 0; c < n; c++) {
            if (c == pick || l[c] <= i)
                continue;
            voters++;
            same += ev_at(f, s[c] + i)->key == key;
        }
        if (voters && 2 * (same + 1) < voters + 1)
            break;
    }
    return i;
}

/* Where a tail joins the fill (splice_tail): the frames the fill runs in
 * (sim) become those the tail runs in (stk, bottom first, method 0 where
 * unknown), compared from the top: the fill's frames down to the deepest
 * one that differs return, and the tail's frames there are found running
 * (FL_F_CONTEXT calls: no call is counted). Frames of either below what the
 * other knows are taken as the same. Nonzero when the sink stopped. */
static int seam_stack(rv_filter *f, GArray *sim, const GArray *stk, uint64_t tsc)
{
    guint n = sim->len < stk->len ? sim->len : stk->len, d = 0;
    for (guint i = 0; i < n; i++) {
        uint64_t want = g_array_index(stk, frame, stk->len - 1 - i).method_id;
        if (want && want != g_array_index(sim, frame, sim->len - 1 - i).method_id)
            d = i + 1;
    }
    frame left[64];
    if (d > G_N_ELEMENTS(left))
        d = G_N_ELEMENTS(left);
    for (guint i = 0; i < d; i++) {
        left[i] = g_array_index(sim, frame, sim->len - 1);
        g_array_set_size(sim, sim->len - 1);
        fl_event ev = { .kind = FL_RETURN, .origin = FL_RECOVERED, .tid = f->tid, .tsc = tsc,
                        .method_id = left[i].method_id, .bci = -1 };
        f->st.events++;
        if (rv_deliver(f, &ev))
            return 1;
    }
    for (guint i = d; i-- > 0;) {
        frame fr = g_array_index(stk, frame, stk->len - 1 - i);
        if (!fr.method_id)
            fr.method_id = left[i].method_id;
        g_array_append_val(sim, fr);
        fl_event ev = { .kind = FL_CALL, .origin = FL_RECOVERED, .flags = FL_F_CONTEXT,
                        .tid = f->tid, .tsc = tsc, .method_id = fr.method_id, .bci = -1 };
        f->st.events++;
        if (rv_deliver(f, &ev))
            return 1;
    }
    return 0;
}

int rv_emit_fill(rv_filter *f, const GArray *pieces, uint64_t gap_start, uint64_t gap_end)
{
    /* the stack the fill runs on, to leave out the frames the history
     * announced as found running that the flow knows are (context_known) */
    GArray *sim = g_array_new(FALSE, FALSE, sizeof(frame));
    g_array_append_vals(sim, f->stk->data, f->stk->len);
    int stop = 0;
    for (guint k = 0; k < pieces->len && !stop; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        if (!pc->len)
            continue;
        if (pc->seam)
            stop = seam_stack(f, sim, pc->seam, gap_start + pc->ticks);
        uint64_t ref = ev_at(f, pc->start - 1)->tsc;
        for (uint64_t e = pc->start; e < pc->start + pc->len && !stop; e++) {
            hev *x = ev_at(f, e);
            if (context_known(sim, x))
                continue;
            stack_step(sim, x);
            uint64_t dt = x->tsc > ref ? x->tsc - ref : 0;
            uint64_t tsc = gap_start + pc->ticks + dt;
            if (gap_end > gap_start && tsc > gap_end)
                tsc = gap_end;
            fl_event ev = { .kind = x->kind, .origin = FL_RECOVERED, .flags = x->flags,
                            .tid = f->tid, .tsc = tsc, .method_id = x->method_id,
                            .bci = x->bci, .opcode = x->opcode, .count = x->count };
            f->st.events++;
            if (x->kind == FL_BYTECODE)
                f->st.bytecodes++;
            stop = rv_deliver(f, &ev);
        }
    }
    g_array_free(sim, TRUE);
    return stop;
}

/* The bytecodes in the fill's first n pieces. */
uint64_t rv_bytecodes_in(rv_filter *f, const GArray *pieces, guint n)
{
    uint64_t nbc = 0;
    for (guint k = 0; k < n && k < pieces->len; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        for (uint64_t i = 0; i < pc->len; i++)
            nbc += ev_at(f, pc->start + i)->kind == FL_BYTECODE;
    }
    return nbc;
}

/* The fill becomes its first n events (all of it when shorter). */
void rv_keep_events(GArray *pieces, uint64_t n)
{
    for (guint k = 0; k < pieces->len; k++) {
        piece *pc = &g_array_index(pieces, piece, k);
        if (pc->len < n) {
            n -= pc->len;
            continue;
        }
        pc->len = n;
        if (pc->agreed > pc->len)
            pc->agreed = pc->len;
        g_array_set_size(pieces, pc->len ? k + 1 : k);
        return;
    }
}

/* Cuts the fill after its nbc-th bytecode (keeps all of it when shorter);
 * returns the bytecodes kept. */
uint64_t rv_keep_bytecodes(rv_filter *f, GArray *pieces, uint64_t nbc)
{
    uint64_t n = 0, b = 0;
    if (!nbc) {
        rv_keep_events(pieces, 0);
        return 0;
    }
    for (guint k = 0; k < pieces->len; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        for (uint64_t i = 0; i < pc->len; i++) {
            n++;
            if (ev_at(f, pc->start + i)->kind == FL_BYTECODE && ++b == nbc) {
                rv_keep_events(pieces, n);
                return b;
            }
        }
    }
    return b;
}

/* Trace bytes the first len events of piece pc took where they were
 * decoded: from the event before it to its last (from its first, whose own
 * bytes are then left out, where that one began its segment).
 * UNKNOWN_BYTES where events have no stream offsets. */
uint64_t rv_piece_bytes(rv_filter *f, const piece *pc, uint64_t len)
{
    if (!len)
        return 0;
    const hev *first = ev_at(f, pc->start), *last = ev_at(f, pc->start + len - 1);
    const hev *from = first;
    if (pc->start > f->hbase && ev_at(f, pc->start - 1)->segno == first->segno)
        from = ev_at(f, pc->start - 1);
    if (!from->offset || last->offset < from->offset)
        return UNKNOWN_BYTES;
    return last->offset - from->offset;
}

/* The trace bytes of the fill's first n pieces (UNKNOWN_BYTES: unknown). */
static uint64_t fill_bytes(rv_filter *f, const GArray *pieces, guint n)
{
    uint64_t sum = 0;
    for (guint k = 0; k < n && k < pieces->len; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        const uint64_t b = rv_piece_bytes(f, pc, pc->len);
        if (b == UNKNOWN_BYTES)
            return UNKNOWN_BYTES;
        sum += b;
    }
    return sum;
}

/* How far a continuation of len events (nbc bytecodes) after p goes into
 * the hole, as goal_of(bd) measures the hole: in trace bytes (at the
 * hole's bytes per bytecode where the stretch's are unknown), else in
 * bytecodes. */
uint64_t rv_measure(rv_filter *f, const budget *bd, uint64_t p, uint64_t len, uint64_t nbc)
{
    if (!in_bytes(bd))
        return nbc;
    const piece pc = { p + 1, len, 0, 0, NULL };
    const uint64_t b = rv_piece_bytes(f, &pc, len);
    if (b != UNKNOWN_BYTES)
        return b;
    return (uint64_t)((double)nbc * (double)bd->bytes / (double)(bd->expect ? bd->expect : 1));
}

/* How much of the hole a fallback rejoin's fill holds: its first n pieces
 * and the piece fb (nbc bytecodes) that ends at the rejoin, in trace bytes
 * where the fill is measured so (UNKNOWN_BYTES: unknown), else in
 * bytecodes. */
uint64_t rv_fallback_measure(rv_filter *f, const budget *bd, const GArray *pieces, guint n,
                             const piece *fb, uint64_t nbc)
{
    if (!bd->by_bytes)
        return rv_bytecodes_in(f, pieces, n) + nbc;
    const uint64_t a = fill_bytes(f, pieces, n), b = rv_piece_bytes(f, fb, fb->len);
    return a == UNKNOWN_BYTES || b == UNKNOWN_BYTES ? UNKNOWN_BYTES : a + b;
}

/* Cuts the fill where the trace bytes its events took where they were
 * decoded reach nbytes (keeps all of it when it took fewer). 0 when a
 * piece's bytes are unknown: the fill is left as it is. */
int rv_keep_bytes(rv_filter *f, GArray *pieces, uint64_t nbytes)
{
    if (fill_bytes(f, pieces, pieces->len) == UNKNOWN_BYTES)
        return 0;
    uint64_t n = 0;
    for (guint k = 0; k < pieces->len; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        const uint64_t b = rv_piece_bytes(f, pc, pc->len);
        if (b <= nbytes) {
            nbytes -= b;
            n += pc->len;
            continue;
        }
        /* the last event of the piece within the bytes left */
        uint64_t lo = 0, hi = pc->len;
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (rv_piece_bytes(f, pc, mid) <= nbytes)
                lo = mid;
            else
                hi = mid;
        }
        rv_keep_events(pieces, n + lo);
        return 1;
    }
    return 1;
}
