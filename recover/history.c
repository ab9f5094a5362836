/* The history window: every event of the thread's flow kept for matching,
 * its symbols indexed by K-gram, its segments, the thread's recent rates
 * (bytecodes per tick, per trace byte) and the call stack the flow shows. */
#include "recover/filter.h"

#include <string.h>

#include "common/jvm.h"
/* The control structure of a method (tier 2): branches, jumps, switches,
 * invokes, returns, throws. */
static int control_op(int op)
{
    return (op >= JVM_IFEQ && op <= JVM_RETURN) || jvm_is_invoke(op) || op == JVM_ATHROW ||
           (op >= JVM_IFNULL && op <= JVM_JSR_W);
}

/* The coarsest tier an event belongs to: 1 calls and returns, 2 control
 * bytecodes (and unplaced ones, which stop every comparison), 3 the rest. */
static uint8_t tier_of(const fl_event *ev)
{
    if (ev->kind == FL_CALL || ev->kind == FL_RETURN)
        return 1;
    if (ev->kind == FL_BYTECODE && (!placed(ev) || control_op(ev->opcode)))
        return 2;
    return 3;
}

/* The identity two events must share to count as the same in a suffix; the
 * tier is part of it, so events in different tiers always differ. */
uint64_t rv_key_of(const fl_event *ev, uint8_t tier)
{
    if (ev->kind == FL_BYTECODE && !placed(ev))
        return 0;
    uint64_t x = mix64(ev->method_id ^ ((uint64_t)ev->kind << 56) ^ ((uint64_t)tier << 52));
    return mix64(x + (uint64_t)(uint32_t)ev->bci) | 1;
}

/* The K-gram hash of K symbols, newest first (the index and the anchor agree). */
uint64_t rv_kgram_of(const uint64_t *s, unsigned k)
{
    uint64_t x = 0x84222325cbf29ce4ull;
    for (unsigned i = 0; i < k; i++)
        x = mix64(x ^ s[i]) + i;
    return x | 1;
}

/* The K-gram ending at symbol abs of x (its run must be >= k). */
static uint64_t si_kgram(const symindex *x, unsigned k, uint64_t abs)
{
    uint64_t s[64];
    for (unsigned i = 0; i < k; i++)
        s[i] = si_at(x, abs - i)->s;
    return rv_kgram_of(s, k);
}

uint64_t rv_kgram_key(rv_filter *f, uint64_t abs)
{
    return si_kgram(&f->bc, f->o.k, abs);
}

static void si_index(symindex *x, unsigned k, uint64_t abs)
{
    hsym *s = si_at(x, abs);
    s->prev = 0;
    if (s->run < k)
        return;
    gpointer key = (gpointer)(uintptr_t)si_kgram(x, k, abs);
    gpointer old = g_hash_table_lookup(x->head, key);
    if (old)
        s->prev = (uint64_t)(uintptr_t)old;
    g_hash_table_insert(x->head, key, (gpointer)(uintptr_t)(abs + 1));
}

/* Appends the symbol s of history event ev; returns its absolute index. */
static int64_t si_add(symindex *x, uint64_t s, uint64_t ev)
{
    if (x->run < UINT32_MAX)
        x->run++;
    hsym hs = { .s = s, .ev = ev, .run = x->run };
    uint64_t abs = si_end(x);
    g_array_append_val(x->syms, hs);
    return (int64_t)abs;
}

/* Indexes the symbols added since the last time, in order: head and prev
 * are then what indexing each symbol as it came would have made. */
void rv_si_ready(symindex *x, unsigned k)
{
    for (uint64_t a = x->indexed > x->sbase ? x->indexed : x->sbase; a < si_end(x); a++)
        si_index(x, k, a);
    x->indexed = si_end(x);
}

/* Drops the symbols of events before hbase; the index is made again over
 * what remains when it is next asked. */
static void si_compact(symindex *x, uint64_t hbase)
{
    size_t sdrop = 0;
    while (sdrop < x->syms->len && g_array_index(x->syms, hsym, sdrop).ev < hbase)
        sdrop++;
    g_array_remove_range(x->syms, 0, (guint)sdrop);
    x->sbase += sdrop;
    g_hash_table_remove_all(x->head);
    x->indexed = x->sbase;
    for (uint64_t a = x->sbase; a < si_end(x); a++) {
        hsym *s = si_at(x, a);
        /* runs that began before the window are cut at its start */
        if (s->run > a - x->sbase + 1)
            s->run = (uint32_t)(a - x->sbase + 1);
    }
    if (x->run > x->syms->len)
        x->run = x->syms->len;
}

/* Keeps the history within its window: drops the oldest half and rebuilds
 * the index over what remains (amortized O(1) per event). */
static void compact(rv_filter *f)
{
    if (f->h->len <= 2 * f->o.window)
        return;
    size_t drop = f->h->len - f->o.window;
    g_array_remove_range(f->h, 0, (guint)drop);
    f->hbase += drop;
    si_compact(&f->bc, f->hbase);
    si_compact(&f->cr, f->hbase);
    /* segments whose events all left the window are never asked about again */
    guint sd = 0;
    while (sd + 1 < f->segfirst->len && g_array_index(f->segfirst, uint64_t, sd + 1) <= f->hbase)
        sd++;
    g_array_remove_range(f->segfirst, 0, sd);
    g_array_remove_range(f->segjoin, 0, sd);
    f->segbase += sd;
}

/* A ring of checkpoints (x, y) at every multiple of step along x: a stretch
 * from (x0, y0) to (x1, y1) checkpoints each multiple it crosses, with y
 * taken at the stretch's own rate there (nothing finer is known). A stretch
 * can cross several, and each must be checkpointed: a ring slot left from
 * an earlier turn would make the window reach back far beyond its size
 * (a stretch of trace between two losses often spans megabytes). */
static void ring_cross(uint64_t ring[][2], unsigned slots, uint64_t step, uint64_t x0, uint64_t y0,
                       uint64_t x1, uint64_t y1)
{
    uint64_t last = x1 / step, first = x0 / step + 1;
    if (x1 <= x0 || last < first)
        return;
    if (last - first >= slots)
        first = last - slots + 1;
    for (uint64_t j = first; j <= last; j++) {
        uint64_t x = j * step;
        ring[j % slots][0] = x;
        ring[j % slots][1] = y0 + (uint64_t)((double)(y1 - y0) * (double)(x - x0) /
                                             (double)(x1 - x0));
    }
}

/* Counts a history event into the thread's rate. Times are coarse (one per
 * PSB): the bytecodes seen at one time ran until the next time of the same
 * segment, so they count when that time comes, with the ticks between; the
 * last ones of a segment have no known duration and do not count, and
 * neither does a gap's time (what the rate is used to fill). */
static void rate_add(rv_filter *f, const fl_event *ev)
{
    if (f->rate_segno != f->segno || !f->rate_started) {
        f->rate_started = 1;
        f->rate_segno = f->segno;
        f->rate_tsc = ev->tsc;
        f->rate_pending = 0;
    } else if (ev->tsc > f->rate_tsc) {
        uint64_t bc0 = f->rate_bytecodes, ticks0 = f->rate_ticks;
        f->rate_ticks += ev->tsc - f->rate_tsc;
        f->rate_bytecodes += f->rate_pending;
        f->rate_tsc = ev->tsc;
        f->rate_pending = 0;
        ring_cross(f->rate_ring, RATE_SLOTS, RATE_STEP, bc0, ticks0, f->rate_bytecodes,
                   f->rate_ticks);
    }
    if (ev->kind == FL_BYTECODE)
        f->rate_pending++;
}

/* Bytecodes and ticks of the newest stretch of history the ring covers
 * (the whole history while it is shorter). */
void rv_recent_rate(const rv_filter *f, uint64_t *bytecodes, uint64_t *ticks)
{
    uint64_t n = f->rate_bytecodes / RATE_STEP;
    *bytecodes = f->rate_bytecodes;
    *ticks = f->rate_ticks;
    if (n < RATE_SLOTS)
        return;
    /* the oldest checkpoint still in the ring */
    const uint64_t *slot = f->rate_ring[(n + 1) % RATE_SLOTS];
    *bytecodes -= slot[0];
    *ticks -= slot[1];
}

/* A gap closes the open stretch of decoded trace at ev->gap_offset, when
 * the count was now; the next one opens where decoding resumed. */
static void per_byte_gap(per_byte *pb, uint64_t now, const fl_event *ev)
{
    if (ev->gap_offset > pb->from) {
        uint64_t total0 = pb->total, count0 = pb->count;
        pb->count += now - pb->from_count;
        pb->total += ev->gap_offset - pb->from;
        ring_cross(pb->ring, BYTE_SLOTS, BYTE_STEP, total0, count0, pb->total, pb->count);
    }
    pb->from = ev->resume_offset;
    pb->from_count = now;
}

static void bytes_add(rv_filter *f, const fl_event *ev)
{
    if (!(ev->flags & FL_F_AFTER_GAP) || ev->resume_offset < ev->gap_offset)
        return;
    per_byte_gap(&f->bc_bytes, f->bytecodes, ev);
    per_byte_gap(&f->ev_bytes, f->events, ev);
}

/* The count (now so far) and trace bytes of the newest decoded trace the
 * ring covers (all of it while it is shorter), the open stretch included:
 * it ends at gap_offset, and counts as if it closed there. */
void rv_recent_bytes(const per_byte *pb, uint64_t now, uint64_t gap_offset, uint64_t *count,
                     uint64_t *bytes)
{
    uint64_t ring[BYTE_SLOTS][2];
    memcpy(ring, pb->ring, sizeof ring);
    uint64_t c = pb->count, by = pb->total;
    if (gap_offset > pb->from) {
        c += now - pb->from_count;
        by += gap_offset - pb->from;
        ring_cross(ring, BYTE_SLOTS, BYTE_STEP, pb->total, pb->count, by, c);
    }
    *count = c;
    *bytes = by;
    uint64_t n = by / BYTE_STEP;
    if (n < BYTE_SLOTS)
        return;
    /* the oldest checkpoint still in the ring */
    const uint64_t *slot = ring[(n + 1) % BYTE_SLOTS];
    *bytes -= slot[0];
    *count -= slot[1];
}

/* A segment starts (its FL_SEGMENT event ev). It continues the one before
 * when nothing is missing between them (a new calling context only), or when
 * no time passed over the gap: the trace lost no timing packet, so what is
 * missing is a few instructions within one timing period (a decode error
 * resumed at the next branch target; a loss of bytes that never reaches a
 * PSB). The history reads across such breaks (rv_continuation()): decode errors
 * that recur at one place (stale code at a call site) would otherwise cut
 * every stretch of history there. */
void rv_segment_start(rv_filter *f, const fl_event *ev)
{
    f->bc.run = f->cr.run = 0;
    bytes_add(f, ev);
    uint64_t first = ev_end(f);
    uint8_t joined = first > f->hbase &&
                     (!(ev->flags & FL_F_AFTER_GAP) || ev_at(f, first - 1)->tsc == ev->tsc);
    /* a decode error's skip: the collector lost nothing there, and the
     * decoder resumed a short way on */
    uint8_t minor = first > f->hbase && (ev->flags & FL_F_AFTER_GAP) &&
                    (ev->flags & FL_F_LOST_COUNTED) && !ev->lost_bytes &&
                    ev->resume_offset >= ev->gap_offset &&
                    ev->resume_offset - ev->gap_offset <= MINOR_SKIP;
    joined = (uint8_t)(joined ? SEG_JOINED | SEG_CROSSABLE : minor ? SEG_CROSSABLE : 0);
    /* A segment without events keeps no entry: the next one takes its
     * number (no event tells them apart), so segfirst only grows with the
     * history, which compact() bounds. Its last entry is segment segno. */
    if (g_array_index(f->segfirst, uint64_t, f->segfirst->len - 1) == first) {
        uint8_t *j = &g_array_index(f->segjoin, uint8_t, f->segjoin->len - 1);
        *j &= joined;
        return;
    }
    f->segno++;
    g_array_append_val(f->segfirst, first);
    g_array_append_val(f->segjoin, joined);
}

/* Does segment s continue segment s - 1 with at most a decode error's skip
 * between them? */
int rv_seg_crossable(const rv_filter *f, uint32_t s)
{
    return s > f->segbase && s - f->segbase < f->segjoin->len &&
           (g_array_index(f->segjoin, uint8_t, s - f->segbase) & SEG_CROSSABLE);
}

/* The first history event of segment s still in the window. */
uint64_t rv_seg_begin(rv_filter *f, uint32_t s)
{
    uint64_t a = 0;
    if (s >= f->segbase && s - f->segbase < f->segfirst->len)
        a = g_array_index(f->segfirst, uint64_t, s - f->segbase);
    return a < f->hbase ? f->hbase : a;
}

/* The call stack as the flow shows it (frames below what is known are
 * unknown, not absent). */
void rv_stack_apply(GArray *stk, const fl_event *ev)
{
    if (ev->kind == FL_CALL) {
        frame fr = { ev->method_id, ev->bci };
        g_array_append_val(stk, fr);
    } else if (ev->kind == FL_RETURN) {
        if (stk->len)
            g_array_set_size(stk, stk->len - 1);
    } else if (ev->kind == FL_BYTECODE && placed(ev) && !stk->len) {
        frame fr = { ev->method_id, -1 };
        g_array_append_val(stk, fr);
    }
}

void rv_track(rv_filter *f, const fl_event *ev)
{
    if (ev->kind == FL_SEGMENT) {
        g_array_set_size(f->stk, 0);
        for (uint32_t i = 0; ev->stack && i < ev->depth; i++) {
            frame fr = { ev->stack[i], -1 };
            g_array_append_val(f->stk, fr);
        }
        return;
    }
    rv_stack_apply(f->stk, ev);
}

void rv_history_add(rv_filter *f, const fl_event *ev)
{
    rate_add(f, ev);
    f->bytecodes += ev->kind == FL_BYTECODE;
    f->events++;
    uint64_t abs = ev_end(f);
    uint8_t tier = tier_of(ev);
    hev e = { .kind = (uint8_t)ev->kind, .flags = (uint8_t)ev->flags, .tsc = ev->tsc,
              .method_id = ev->method_id, .bci = ev->bci, .opcode = (int16_t)ev->opcode,
              .count = ev->count, .offset = ev->offset, .segno = f->segno, .sym = -1,
              .csym = -1, .tier = tier, .key = rv_key_of(ev, tier) };
    if (tier <= 1)
        f->last1 = abs + 1;
    if (tier <= 2)
        f->last2 = abs + 1;
    e.d1 = f->last1 && abs + 1 - f->last1 < NONE ? (uint32_t)(abs + 1 - f->last1) : NONE;
    e.d2 = f->last2 && abs + 1 - f->last2 < NONE ? (uint32_t)(abs + 1 - f->last2) : NONE;
    if (ev->kind == FL_BYTECODE && placed(ev))
        e.sym = si_add(&f->bc, sym_of(ev->method_id, ev->bci), abs);
    else if (ev->kind == FL_BYTECODE)
        f->bc.run = f->cr.run = 0;   /* an unplaced bytecode breaks the symbols' runs */
    else if (tier == 1)
        e.csym = si_add(&f->cr, e.key, abs);
    g_array_append_val(f->h, e);
    compact(f);
}

int rv_deliver(rv_filter *f, const fl_event *ev)
{
    if (f->stopped)
        return 1;
    if (f->sink(ev, f->ctx))
        f->stopped = 1;
    return f->stopped;
}

/* ---- what the next segment starts with ------------------------------- */

/* A call or return the next segment may be met on (target_of): a frame
 * found already running (FL_F_CONTEXT) is no call. */
int rv_lead_symbol(const fl_event *ev)
{
    return tier_of(ev) == 1 && !(ev->flags & FL_F_CONTEXT);
}
