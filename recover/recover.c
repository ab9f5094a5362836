/* Flow recovery: three-tier suffix matching, chaining and the ICFG fallback
 * (see recover.h and README.md). */
#include "recover/recover.h"

#include <string.h>
#include <time.h>

#include <glib.h>

#define NONE UINT32_MAX

/* One event of the history window (FL_SEGMENT markers are not stored: the
 * segment number says where a segment changes). */
typedef struct hev {
    uint64_t tsc;
    uint64_t method_id;
    uint64_t count;
    uint64_t offset;          /* fl_event.offset: where in the trace stream (0: unknown) */
    uint64_t key;             /* identity for suffix comparison; 0: a wall (unplaced bytecode) */
    int64_t sym;              /* absolute index in bc's symbols, -1: not a placed bytecode */
    int64_t csym;             /* absolute index in cr's symbols, -1: not a call or return */
    uint32_t segno;
    uint32_t d1, d2;          /* distance back to the nearest tier-1 / tier-<=2 event at or
                               * before this one (NONE: none known) */
    int32_t bci;
    int16_t opcode;
    uint8_t kind, flags, tier;
} hev;

/* One anchor symbol of the history: a placed bytecode, or a call or return. */
typedef struct hsym {
    uint64_t s;               /* hash of (method, bci), or the call's or return's key */
    uint64_t ev;              /* absolute index of its event */
    uint64_t prev;            /* earlier symbol ending the same K-gram, absolute + 1; 0 none */
    uint32_t run;             /* symbols in a row ending here, same segment, no wall between */
} hsym;

/* The history's symbols of one kind, indexed by the K-gram each one ends.
 * Anchors are placed bytecodes; where a segment's past holds too few of them
 * (compiled code runs without bytecodes: only its calls and returns of
 * inlined frames show), its calls and returns are. */
typedef struct symindex {
    GArray *syms;             /* hsym */
    uint64_t sbase;           /* absolute index of syms[0] */
    GHashTable *head;         /* K-gram hash (| 1) -> absolute symbol index + 1 */
    uint32_t run;             /* symbols in a row at the history's end */
    /* Symbols before it are in head. The index is brought up to date when a
     * gap asks it (si_ready): a trace without gaps never pays for it. */
    uint64_t indexed;
} symindex;

/* A held-back event (the segment after a boundary, until its first K
 * symbols are known). */
typedef struct pev {
    fl_event ev;
    uint64_t *stack;
} pev;

/* A frame of a call stack: the method and the call site in its caller. */
typedef struct frame {
    uint64_t method_id;
    int32_t bci;
} frame;

/* A symbol of a tier projection of the segment's past: position and key. */
typedef struct tsym {
    uint32_t pos;
    uint64_t key;
} tsym;

typedef struct cand {
    uint64_t p;               /* history event aligned with the past's newest event */
    uint32_t l1, l2, l3;
} cand;

/* The rate a gap's time span is turned into bytecodes with is that of the
 * newest 4K bytecodes or so. Trace is lost where it is produced fastest, so
 * a hole comes where the thread runs more bytecodes per tick than on
 * average: the newest 32K bytecodes' rate gave holes about half of what
 * they held, a whole history's average (start-up included: class loading
 * is native code) a tenth (README.md). */
#define RATE_STEP 1024u
#define RATE_SLOTS 4u

/* Where the collector counted the trace bytes it lost (the emulated
 * backend), a hole is sized in bytes instead: bytecodes per trace byte
 * follow the code that runs (the interpreter writes a packet or two per
 * bytecode, compiled code a few bits), where time also counts what ran
 * untraced (the VM, a safepoint) and how fast the emulation went. The rate
 * is that of the newest 16 KiB of decoded trace (a ring of checkpoints
 * every BYTE_STEP bytes, as for the rate per tick). The ring is fed at
 * gaps, where a stretch of decoded trace closes, so that is the newest
 * stretch's own rate, or the newest few's where they are shorter. The code
 * that ran just before the loss is the best guide to what ran in it: on
 * xalan at 22% loss, windows of 4 MiB, 1 MiB, 256 KiB, 64 KiB and 16 KiB
 * put its 1,729 holes at 0.78, 0.85, 0.90, 0.92 and 0.95 of the bytecodes
 * they held in all (4 KiB: as 16 KiB), and overall accuracy went from 84.6
 * to 89.3 (README.md). That size bounds the search for a fill; the fill
 * itself is measured in the bytes of the code it copies where it can be
 * (in_bytes(), below). */
#define BYTE_STEP (4u << 10)
#define BYTE_SLOTS 4u

/* Events one fill may hold (rv_options.max_fill): where the hole's size is
 * known, its bound in bytecodes at the history's events per bytecode, if
 * that is more, up to FILL_SCALE_MAX times as many. Compiled code's calls
 * and returns are events without bytecodes: on rhino (PMD 42%) the fixed
 * bound of 1M events cut the fills of 22 holes, 96% of whose bytecodes
 * matched, to 40% of what the holes held (README.md). */
#define FILL_SCALE_MAX 16u

/* What the decoded trace held per byte, of one count (bytecodes, events):
 * the closed decoded stretches' count and bytes, with a ring of checkpoints
 * (bytes, count) at every multiple of BYTE_STEP bytes; where the open
 * stretch began (stream offset, the count so far there). */
typedef struct per_byte {
    uint64_t count, total, from, from_count;
    uint64_t ring[BYTE_SLOTS][2];
} per_byte;

struct rv_filter {
    rv_options o;
    fl_sink sink;
    void *ctx;
    int stopped;
    GArray *h;                /* hev */
    uint64_t hbase;           /* absolute index of h[0] */
    symindex bc;              /* placed bytecodes */
    symindex cr;              /* calls and returns */
    /* uint8, parallel to segfirst: the segment continues the one before it
     * (seg_joined) */
    GArray *segjoin;
    GArray *segfirst;         /* uint64: absolute index of each segment's first event,
                               * from segment segbase on (older ones left the window) */
    uint32_t segbase;
    uint32_t segno;
    uint64_t last1, last2;    /* absolute index + 1 of the newest tier-1 / tier-<=2 event */
    uint32_t tid;
    int seen_segment;
    int holding;
    /* The thread's recent rate of bytecodes per tick: bytecodes and ticks
     * (counted within segments) since the start, and a ring of checkpoints
     * every RATE_STEP bytecodes, so the rate is taken over the newest
     * RATE_SLOTS * RATE_STEP bytecodes. */
    uint64_t rate_bytecodes, rate_ticks, rate_tsc, rate_pending;
    uint32_t rate_segno;
    int rate_started;
    uint64_t rate_ring[RATE_SLOTS][2];
    /* Bytecodes and events per trace byte: all of them so far */
    uint64_t bytecodes, events;
    per_byte bc_bytes, ev_bytes;
    GArray *stk;              /* frame: the current segment's call stack as far as known */
    GArray *pending;          /* pev */
    unsigned pending_syms;    /* its bytecodes */
    unsigned pending_calls;   /* its calls and returns before its first bytecode */
    rv_stats st;
};

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static uint64_t sym_of(uint64_t method_id, int32_t bci)
{
    return mix64(method_id * 0x9e3779b97f4a7c15ull + (uint64_t)(uint32_t)bci);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The control structure of a method (tier 2): branches, jumps, switches,
 * invokes, returns, throws. */
static int control_op(int op)
{
    return (op >= 0x99 && op <= 0xb1) || (op >= 0xb6 && op <= 0xba) || op == 0xbf ||
           (op >= 0xc6 && op <= 0xc9);
}

static int placed(const fl_event *ev)
{
    return ev->method_id && ev->bci >= 0;
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
static uint64_t key_of(const fl_event *ev, uint8_t tier)
{
    if (ev->kind == FL_BYTECODE && !placed(ev))
        return 0;
    uint64_t x = mix64(ev->method_id ^ ((uint64_t)ev->kind << 56) ^ ((uint64_t)tier << 52));
    return mix64(x + (uint64_t)(uint32_t)ev->bci) | 1;
}

static hsym *si_at(const symindex *x, uint64_t abs)
{
    return &g_array_index(x->syms, hsym, abs - x->sbase);
}

static uint64_t si_end(const symindex *x) { return x->sbase + x->syms->len; }

static hsym *sym_at(rv_filter *f, uint64_t abs) { return si_at(&f->bc, abs); }

static hev *ev_at(rv_filter *f, uint64_t abs)
{
    return &g_array_index(f->h, hev, abs - f->hbase);
}

static uint64_t sym_end(const rv_filter *f) { return si_end(&f->bc); }
static uint64_t ev_end(const rv_filter *f) { return f->hbase + f->h->len; }

/* The K-gram hash of K symbols, newest first (the index and the anchor agree). */
static uint64_t kgram_of(const uint64_t *s, unsigned k)
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
    return kgram_of(s, k);
}

static uint64_t kgram_key(rv_filter *f, uint64_t abs) { return si_kgram(&f->bc, f->o.k, abs); }

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
static void si_ready(symindex *x, unsigned k)
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
static void recent_rate(const rv_filter *f, uint64_t *bytecodes, uint64_t *ticks)
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
static void recent_bytes(const per_byte *pb, uint64_t now, uint64_t gap_offset, uint64_t *count,
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

/* segjoin's bits: the segment continues the one before it where no time
 * passed (SEG_JOINED), or with little missing (SEG_CROSSABLE: also where a
 * decode error skipped at most MINOR_SKIP bytes of trace and the collector
 * lost none: the tail of a long hole reads back across those) */
#define SEG_JOINED 1u
#define SEG_CROSSABLE 2u
#define MINOR_SKIP (16u << 10)

/* A segment starts (its FL_SEGMENT event ev). It continues the one before
 * when nothing is missing between them (a new calling context only), or when
 * no time passed over the gap: the trace lost no timing packet, so what is
 * missing is a few instructions within one timing period (a decode error
 * resumed at the next branch target; a loss of bytes that never reaches a
 * PSB). The history reads across such breaks (continuation()): decode errors
 * that recur at one place (stale code at a call site) would otherwise cut
 * every stretch of history there. */
static void segment_start(rv_filter *f, const fl_event *ev)
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

/* Does segment s continue segment s - 1 (segment_start)? */
static int seg_joined(const rv_filter *f, uint32_t s)
{
    return s > f->segbase && s - f->segbase < f->segjoin->len &&
           (g_array_index(f->segjoin, uint8_t, s - f->segbase) & SEG_JOINED);
}

/* Does segment s continue segment s - 1 with at most a decode error's skip
 * between them? */
static int seg_crossable(const rv_filter *f, uint32_t s)
{
    return s > f->segbase && s - f->segbase < f->segjoin->len &&
           (g_array_index(f->segjoin, uint8_t, s - f->segbase) & SEG_CROSSABLE);
}

/* The first history event of segment s still in the window. */
static uint64_t seg_begin(rv_filter *f, uint32_t s)
{
    uint64_t a = 0;
    if (s >= f->segbase && s - f->segbase < f->segfirst->len)
        a = g_array_index(f->segfirst, uint64_t, s - f->segbase);
    return a < f->hbase ? f->hbase : a;
}

/* The call stack as the flow shows it (frames below what is known are
 * unknown, not absent). */
static void stack_apply(GArray *stk, const fl_event *ev)
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

static void track(rv_filter *f, const fl_event *ev)
{
    if (ev->kind == FL_SEGMENT) {
        g_array_set_size(f->stk, 0);
        for (uint32_t i = 0; ev->stack && i < ev->depth; i++) {
            frame fr = { ev->stack[i], -1 };
            g_array_append_val(f->stk, fr);
        }
        return;
    }
    stack_apply(f->stk, ev);
}

static void history_add(rv_filter *f, const fl_event *ev)
{
    rate_add(f, ev);
    f->bytecodes += ev->kind == FL_BYTECODE;
    f->events++;
    uint64_t abs = ev_end(f);
    uint8_t tier = tier_of(ev);
    hev e = { .kind = (uint8_t)ev->kind, .flags = (uint8_t)ev->flags, .tsc = ev->tsc,
              .method_id = ev->method_id, .bci = ev->bci, .opcode = (int16_t)ev->opcode,
              .count = ev->count, .offset = ev->offset, .segno = f->segno, .sym = -1,
              .csym = -1, .tier = tier, .key = key_of(ev, tier) };
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

static int deliver(rv_filter *f, const fl_event *ev)
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
static int lead_symbol(const fl_event *ev)
{
    return tier_of(ev) == 1 && !(ev->flags & FL_F_CONTEXT);
}

typedef struct target {
    uint64_t want[64];        /* its first (up to K) symbols */
    unsigned nwant;
    const symindex *idx;      /* the index want's symbols are in */
    uint64_t lead[64];        /* the calls and returns it starts with before its first
                               * bytecode (fewer than K: want is on bytecodes) */
    unsigned nlead;
    uint64_t method_id;       /* its first placed bytecode, 0 none */
    int32_t bci;
    GArray *stk;              /* frame: its stack at its first symbol, as far as known */
} target;

/* What the next segment starts with: its first K placed bytecodes, or,
 * where it starts in compiled code (K calls and returns of inlined frames
 * before its first bytecode, if any), those calls and returns, as a past of
 * compiled code is anchored on them. A rejoin on the bytecodes would come
 * after those calls and returns, and the fill would hold them as well as
 * the segment; fewer than K are lead, which a fill that rejoins on the
 * bytecodes ends before (README.md, step 5). */
static void target_of(rv_filter *f, target *t)
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
            if (lead_symbol(ev) && !t->method_id && ncalls < f->o.k) {
                if (!ncalls)
                    g_array_append_vals(cstk, t->stk->data, t->stk->len);
                t->lead[ncalls++] = key_of(ev, 1);
            }
            if (!t->method_id)
                stack_apply(t->stk, ev);
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
static int rejoins_at(rv_filter *f, uint64_t e, const target *t)
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
static uint64_t lead_before(rv_filter *f, uint64_t p, uint64_t e, const target *t)
{
    if (!t->nlead || e < p + 1 + t->nlead)
        return 0;
    for (unsigned i = 0; i < t->nlead; i++)
        if (ev_at(f, e - t->nlead + i)->key != t->lead[i])
            return 0;
    return t->nlead;
}

static uint64_t dist(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

static int same_stack(const GArray *a, const GArray *b)
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

/* A frame found already running (FL_F_CONTEXT) that the stack has on top:
 * nothing happens (the call was announced only because the flow the event
 * comes from did not know that frame, at the start of its segment). */
static int context_known(const GArray *sim, const hev *x)
{
    return x->kind == FL_CALL && (x->flags & FL_F_CONTEXT) && sim->len &&
           g_array_index(sim, frame, sim->len - 1).method_id == x->method_id;
}

/* Applies a history event to a simulated stack; 0 when it contradicts it
 * (a return from, or a bytecode in, another method than the one on top). */
static int stack_step(GArray *sim, const hev *x)
{
    if (context_known(sim, x))
        return 1;
    if (x->kind == FL_CALL) {
        frame fr = { x->method_id, x->bci };
        g_array_append_val(sim, fr);
        return 1;
    }
    if (x->kind == FL_RETURN) {
        if (sim->len) {
            if (x->method_id && g_array_index(sim, frame, sim->len - 1).method_id != x->method_id)
                return 0;
            g_array_set_size(sim, sim->len - 1);
        }
        return 1;
    }
    if (x->kind == FL_BYTECODE && x->method_id && x->bci >= 0) {
        if (!sim->len) {
            frame fr = { x->method_id, -1 };
            g_array_append_val(sim, fr);
        } else if (g_array_index(sim, frame, sim->len - 1).method_id != x->method_id) {
            return 0;
        }
    }
    return 1;
}

/* ---- ranking ----------------------------------------------------------- */

/* The segment's past as the matching sees it: history events, newest first
 * (the fill so far, then the segment), with its tier projections. */
typedef struct past {
    GArray *a;                /* uint64: absolute history indices */
    uint32_t len;             /* compared at most (<= suffix cap) */
    GArray *t1, *t2;          /* tsym */
    uint32_t span;            /* positions [0, span) hold the tail and the K anchor symbols */
    uint64_t kkey;            /* the anchor's K-gram */
    const symindex *idx;      /* the index its symbols are in */
} past;

/* The past's newest K symbols of idx's kind (placed bytecodes, or calls and
 * returns), before any wall (an unplaced bytecode): the anchor. 0: too few. */
static int past_anchor(rv_filter *f, past *ps, const symindex *idx)
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
    ps->kkey = kgram_of(s, f->o.k);
    ps->idx = idx;
    return 1;
}

/* Prepares the past; 0 when it has no anchor: fewer than K placed bytecodes
 * and (where calls is nonzero) fewer than K calls and returns before a wall
 * or its start. The bytecodes are the anchor where there are enough of
 * them; compiled code shows only its calls and returns, and a thread that
 * has run nothing else for the past's length still has those (README.md,
 * step 1). */
static int past_prepare(rv_filter *f, past *ps, int calls)
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
    return past_anchor(f, ps, &f->bc) || (calls && past_anchor(f, ps, &f->cr));
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
static void rank(rv_filter *f, const past *ps, unsigned n, GArray *top)
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
    si_ready(ps->idx == &f->bc ? &f->bc : &f->cr, f->o.k);
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
        uint64_t lenb = p + 1 - seg_begin(f, seg);
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
        uint64_t lenb = cd->p + 1 - seg_begin(f, seg);
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

enum { END_REJOIN, END_SEGMENT, END_BOUND, END_STACK };

typedef struct budget {
    uint64_t events, bytecodes;   /* still allowed */
    uint64_t ticks;               /* elapsed so far */
    uint64_t span;                /* the gap's time span */
    uint64_t expect;              /* bytecodes the span holds at the thread's rate (0: unknown) */
    uint64_t bytes;               /* trace bytes of the hole still to fill (0: unknown) */
    int by_bytes;                 /* the fill is measured in trace bytes (in_bytes()) */
    int timed;
} budget;

/* Where the hole's bytes are known and so are the stream offsets of the
 * history's events, a fill is measured by the trace bytes the code it
 * copies took where it was decoded, against the bytes the hole lost: where
 * a continuation rejoins, how long it may run (twice the hole), when a loop
 * stops repeating, where a fill that never rejoins ends. The bytecodes the
 * hole's bytes hold at the rate of the trace before it (above) are right
 * only where the hole ran the same code: on xalan at `256K/6` (PMD 22.7)
 * six of the 60 largest holes were sized under 0.8 of what they held, and
 * fills right for 95% or more stopped 208 K bytecodes short. Measured in
 * bytes, overall went from 89.82 to 90.70 there, and from 90.95 to 92.08
 * at `16K/8` (README.md, step 5). */
static int in_bytes(const budget *bd) { return bd->by_bytes && bd->bytes; }
static uint64_t goal_of(const budget *bd) { return in_bytes(bd) ? bd->bytes : bd->expect; }

/* A rejoin met before its continuation had run the bytecodes the gap's span
 * holds: where the fill could end if nothing longer rejoins. Below 7/8 of
 * them such a rejoin is only a fallback. Holes sized by their bytes are
 * sized well (0.95 of what they hold on xalan at 22% loss), and there a
 * limit of one half took rejoins at 0.4 to 0.9 of their holes, where the
 * hole held more of the loop: at 7/8, PR 87.5 -> 90.5, RA 79.0 -> 78.5,
 * overall 89.3 -> 89.9 (README.md). */
#define EARLY_EIGHTHS 7u
typedef struct early {
    uint64_t len, nbc, ticks;
    GArray *sim;              /* frame: the stack there; NULL: none met */
} early;

/* The continuation of the history after p, as far as the stack allows and
 * the budget lasts: events (p, p + *len]. sim is updated. A rejoin met
 * short of what the span holds (under EARLY_EIGHTHS eighths of it) where
 * the candidate's own segment then ends, or its stack then contradicts the
 * flow's, is not taken: the continuation ends at the segment (END_SEGMENT,
 * to chain on) or is passed over (END_STACK), and the rejoin goes to *er
 * (er->sim NULL when there was none). */
static int continuation(rv_filter *f, uint64_t p, const target *t, GArray *sim,
                        const budget *bd, uint64_t *len, uint64_t *nbc, uint64_t *ticks,
                        early *er)
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
        *len = n;
        *nbc = b;
        m = !by_bytes ? b : ev_at(f, e - 1)->offset > from ? ev_at(f, e - 1)->offset - from : 0;
        if (e < ev_end(f) && ev_at(f, e)->segno == seg + 1 && seg_joined(f, seg + 1)) {
            seg++;
            crossed = 1;
            x_len = n;
            x_nbc = b;
            x_ticks = *ticks;
            if (!x_sim)
                x_sim = g_array_new(FALSE, FALSE, sizeof(frame));
            g_array_set_size(x_sim, 0);
            g_array_append_vals(x_sim, sim->data, sim->len);
        }
        if (e >= ev_end(f) || ev_at(f, e)->segno != seg) {
            end = END_SEGMENT;
            break;
        }
        int meets = rejoins_at(f, e, t) ? stack_meets(sim, t) : 0;
        if (meets) {
            uint64_t diff = dist(m, goal);
            if (diff < r_diff) {
                r_diff = diff;
                r_len = n - lead_before(f, p, e, t);
                r_nbc = b;
                r_m = m;
                r_ticks = *ticks;
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
        *ticks = dt;
        if (!stack_step(sim, x)) {
            end = END_STACK;
            if (crossed) {
                end = END_SEGMENT;
                *len = x_len;
                *nbc = x_nbc;
                *ticks = x_ticks;
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
        *len = r_len;
        *nbc = r_nbc;
        *ticks = r_ticks;
        g_array_set_size(sim, 0);
        g_array_append_vals(sim, r_sim->data, r_sim->len);
        g_array_free(r_sim, TRUE);
        end = END_REJOIN;
    } else if (r_sim) {
        g_array_free(r_sim, TRUE);
    }
    return end;
}

/* ---- the ICFG fallback ---------------------------------------------- */

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

static int is_invoke(int op) { return op >= 0xb6 && op <= 0xba; }
static int is_return(int op) { return op >= 0xac && op <= 0xb1; }

/* The shortest ICFG path from (sim's top method, bci) to the target's first
 * bytecode that keeps the call stack consistent, as FL_GUESSED events
 * (without its two ends) into out. Returns 0 when none is found within the
 * search bound. */
static int icfg_path(rv_filter *f, uint64_t mid, int32_t bci, const GArray *sim,
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
        if (is_return(op)) {
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
            if (is_invoke(op)) {
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
                if (is_invoke(op) && nn)
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

/* ---- one hole ------------------------------------------------------------ */

/* A piece of the fill: history events [start, start + len). */
typedef struct piece {
    uint64_t start, len;
    uint64_t ticks;           /* time offset of the piece's start within the gap */
    uint64_t agreed;          /* events from start the other candidates mostly agree on */
    GArray *seam;             /* frame: a tail's frames, found running where it starts
                               * (splice_tail); NULL: the piece goes on from the one before */
} piece;

static void pieces_free(GArray *pieces)
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
static uint64_t agreement(rv_filter *f, const uint64_t *s, const uint64_t *l, unsigned n,
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
        if (deliver(f, &ev))
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
        if (deliver(f, &ev))
            return 1;
    }
    return 0;
}

static int emit_fill(rv_filter *f, const GArray *pieces, uint64_t gap_start, uint64_t gap_end)
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
            stop = deliver(f, &ev);
        }
    }
    g_array_free(sim, TRUE);
    return stop;
}

/* ---- the tail of a long hole ------------------------------------------ */

/* A continuation is surest near the place it was anchored: on luindex at
 * ~25% loss, a fill's first tenth matched the hole at 84%, its last at 14%
 * (README.md). The end of a hole is anchored too: the next segment starts
 * with known symbols, and the history before an earlier run of the same
 * symbols is a continuation backwards from there. A long fill that never
 * rejoined is spliced: it keeps its first half and ends with the history
 * that led up to the next segment's first symbols. The seam is where both
 * run the same K symbols, the nearer to halfway the better (the same caller
 * preferred); where they share none, at halfway. The tail's frames are
 * taken there as found running (seam_stack). A hole of any size that no
 * candidate continues from its start (the segment before it ran code the
 * history never ran, or every candidate contradicts the stack) is filled
 * with the tail alone. */
#define SPLICE_MIN 4096u          /* bytecodes a hole must hold */
#define SPLICE_TAILS 4u           /* earlier runs of the rejoin symbols tried */
#define SPLICE_NEAR 8u            /* joints tried per place of a tail */

/* A bytecode of the fill where a tail may join it. */
typedef struct joint {
    uint64_t key;             /* the K-gram ending there */
    uint64_t nbc;             /* the fill's bytecodes up to and with it */
    uint64_t caller;          /* the frame below its own on the stack, 0 unknown */
} joint;

static int by_key_nbc(const void *pa, const void *pb)
{
    const joint *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->nbc < b->nbc ? -1 : a->nbc > b->nbc;
}

/* The frame below the top one, 0 when unknown. */
static uint64_t caller_of(const GArray *stk)
{
    return stk->len >= 2 ? g_array_index(stk, frame, stk->len - 2).method_id : 0;
}

/* The bytecodes in the fill's first n pieces. */
static uint64_t bytecodes_in(rv_filter *f, const GArray *pieces, guint n)
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
static void keep_events(GArray *pieces, uint64_t n)
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
static uint64_t keep_bytecodes(rv_filter *f, GArray *pieces, uint64_t nbc)
{
    uint64_t n = 0, b = 0;
    if (!nbc) {
        keep_events(pieces, 0);
        return 0;
    }
    for (guint k = 0; k < pieces->len; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        for (uint64_t i = 0; i < pc->len; i++) {
            n++;
            if (ev_at(f, pc->start + i)->kind == FL_BYTECODE && ++b == nbc) {
                keep_events(pieces, n);
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
#define UNKNOWN_BYTES UINT64_MAX
static uint64_t piece_bytes(rv_filter *f, const piece *pc, uint64_t len)
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
        const uint64_t b = piece_bytes(f, pc, pc->len);
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
static uint64_t measure(rv_filter *f, const budget *bd, uint64_t p, uint64_t len, uint64_t nbc)
{
    if (!in_bytes(bd))
        return nbc;
    const piece pc = { p + 1, len, 0, 0, NULL };
    const uint64_t b = piece_bytes(f, &pc, len);
    if (b != UNKNOWN_BYTES)
        return b;
    return (uint64_t)((double)nbc * (double)bd->bytes / (double)(bd->expect ? bd->expect : 1));
}

/* How much of the hole a fallback rejoin's fill holds: its first n pieces
 * and the piece fb (nbc bytecodes) that ends at the rejoin, in trace bytes
 * where the fill is measured so (UNKNOWN_BYTES: unknown), else in
 * bytecodes. */
static uint64_t fallback_measure(rv_filter *f, const budget *bd, const GArray *pieces, guint n,
                                 const piece *fb, uint64_t nbc)
{
    if (!bd->by_bytes)
        return bytecodes_in(f, pieces, n) + nbc;
    const uint64_t a = fill_bytes(f, pieces, n), b = piece_bytes(f, fb, fb->len);
    return a == UNKNOWN_BYTES || b == UNKNOWN_BYTES ? UNKNOWN_BYTES : a + b;
}

/* Cuts the fill where the trace bytes its events took where they were
 * decoded reach nbytes (keeps all of it when it took fewer). 0 when a
 * piece's bytes are unknown: the fill is left as it is. */
static int keep_bytes(rv_filter *f, GArray *pieces, uint64_t nbytes)
{
    if (fill_bytes(f, pieces, pieces->len) == UNKNOWN_BYTES)
        return 0;
    uint64_t n = 0;
    for (guint k = 0; k < pieces->len; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        const uint64_t b = piece_bytes(f, pc, pc->len);
        if (b <= nbytes) {
            nbytes -= b;
            n += pc->len;
            continue;
        }
        /* the last event of the piece within the bytes left */
        uint64_t lo = 0, hi = pc->len;
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (piece_bytes(f, pc, mid) <= nbytes)
                lo = mid;
            else
                hi = mid;
        }
        keep_events(pieces, n + lo);
        return 1;
    }
    return 1;
}

/* A way for the fill to end: after its fwd-th bytecode, the history's
 * events (x, r), run in the frames stk (bottom first, as far as known). */
typedef struct seam {
    uint64_t fwd, x, r, score;
    GArray *stk;
} seam;

static void seam_take(seam *sm, uint64_t fwd, uint64_t x, uint64_t r, uint64_t score,
                      const GArray *stk)
{
    *sm = (seam){ fwd, x, r, score, sm->stk };
    g_array_set_size(sm->stk, 0);
    g_array_append_vals(sm->stk, stk->data, stk->len);
}

/* Replaces the part of the fill beyond about half of what the hole holds
 * (expect bytecodes) by the history that led to an earlier run of the next
 * segment's first symbols, so that the fill holds about expect bytecodes;
 * an empty fill becomes that history alone, as much of it as reads back.
 * The tail reads back across breaks of the history where nothing or only a
 * decode error's skip is missing (seg_crossable), as long as the frames it
 * runs in agree. 1 when done (the fill then ends at the rejoin point). */
static int splice_tail(rv_filter *f, GArray *pieces, const target *t, uint64_t expect,
                       uint64_t span)
{
    const int alone = !pieces->len;
    if (expect < (alone ? f->o.k : SPLICE_MIN) || t->nwant < f->o.k || t->idx != &f->bc)
        return 0;
    /* the earlier runs of the rejoin symbols, newest first */
    uint64_t want[64];
    for (unsigned i = 0; i < f->o.k; i++)
        want[i] = t->want[f->o.k - 1 - i];
    si_ready(&f->bc, f->o.k);
    gpointer hit = g_hash_table_lookup(f->bc.head, (gpointer)(uintptr_t)kgram_of(want, f->o.k));
    if (!hit)
        return 0;
    uint64_t a = (uint64_t)(uintptr_t)hit;   /* absolute symbol + 1 */
    /* the seam goes where the fill and the tail share K symbols, the nearer
     * to halfway (or to the fill's end, when shorter) the better, else at
     * that place */
    const uint64_t fwd = bytecodes_in(f, pieces, pieces->len);
    const uint64_t mid = fwd < expect / 2 ? fwd : expect / 2, tol = expect / 8;
    const uint64_t tail_want = expect - mid;
    GArray *joints = g_array_new(FALSE, FALSE, sizeof(joint));
    GArray *sim = g_array_new(FALSE, FALSE, sizeof(frame));
    g_array_append_vals(sim, f->stk->data, f->stk->len);
    uint64_t nbc = 0;
    for (guint k = 0; k < pieces->len && nbc < expect; k++) {
        const piece *pc = &g_array_index(pieces, piece, k);
        for (uint64_t i = 0; i < pc->len && nbc < expect; i++) {
            const hev *x = ev_at(f, pc->start + i);
            if (!context_known(sim, x))
                stack_step(sim, x);
            if (x->kind != FL_BYTECODE)
                continue;
            nbc++;
            if (x->sym < 0 || sym_at(f, (uint64_t)x->sym)->run < f->o.k)
                continue;
            joint j = { kgram_key(f, (uint64_t)x->sym), nbc, caller_of(sim) };
            g_array_append_val(joints, j);
        }
    }
    if (joints->len > 1)
        qsort(joints->data, joints->len, sizeof(joint), by_key_nbc);
    GHashTable *first = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = joints->len; i-- > 0;)
        g_hash_table_insert(first, (gpointer)(uintptr_t)g_array_index(joints, joint, i).key,
                            GUINT_TO_POINTER(i + 1));
    seam joined = { .score = UINT64_MAX, .stk = g_array_new(FALSE, FALSE, sizeof(frame)) };
    seam cut = { .score = UINT64_MAX, .stk = g_array_new(FALSE, FALSE, sizeof(frame)) };
    seam part = { .score = UINT64_MAX, .stk = g_array_new(FALSE, FALSE, sizeof(frame)) };
    uint64_t part_tb = 0;     /* the bytecodes of part's tail */
    GArray *back = g_array_new(FALSE, FALSE, sizeof(frame));
    for (unsigned tried = 0; a && tried < SPLICE_TAILS;) {
        uint64_t s = a - 1;
        a = sym_at(f, s)->prev;
        if (s + 1 < f->bc.sbase + f->o.k)
            break;
        uint64_t r = sym_at(f, s + 1 - f->o.k)->ev;   /* the run's first event */
        if (r < f->hbase || !rejoins_at(f, r, t))
            continue;
        tried++;
        /* back from r: the frames each event ran in, from those the next
         * segment starts with (method 0: unknown) */
        g_array_set_size(back, 0);
        g_array_append_vals(back, t->stk->data, t->stk->len);
        uint32_t seg = ev_at(f, r)->segno;
        uint64_t tb = 0;     /* bytecodes after e, before r */
        uint64_t e = r;
        for (; e > f->hbase && tb < expect;) {
            const hev *x = ev_at(f, e - 1);
            if (x->segno != seg) {
                if (x->segno + 1 != seg || !seg_crossable(f, seg))
                    break;
                seg = x->segno;
            }
            if (x->kind == FL_BYTECODE && x->sym >= 0) {
                frame *top = back->len ? &g_array_index(back, frame, back->len - 1) : NULL;
                if (top && top->method_id && top->method_id != x->method_id)
                    break;
                if (!top) {
                    frame fr = { x->method_id, -1 };
                    g_array_append_val(back, fr);
                } else {
                    top->method_id = x->method_id;
                }
            } else if (x->kind == FL_RETURN) {
                frame fr = { x->method_id, -1 };
                g_array_append_val(back, fr);
            } else if (x->kind == FL_CALL && back->len) {
                uint64_t top = g_array_index(back, frame, back->len - 1).method_id;
                if (top && top != x->method_id)
                    break;
            }
            e--;
            /* back: the frames x ran in, also after it (a call's callee is
             * popped below, once x is passed) */
            if (x->kind == FL_BYTECODE && x->sym >= 0 && tb + 1 < expect &&
                sym_at(f, (uint64_t)x->sym)->run >= f->o.k) {
                uint64_t key = kgram_key(f, (uint64_t)x->sym), goal = expect - tb;
                gpointer fj = g_hash_table_lookup(first, (gpointer)(uintptr_t)key);
                guint lo = fj ? GPOINTER_TO_UINT(fj) - 1 : joints->len, l = lo, h = joints->len;
                while (l < h) {      /* the first joint of key with nbc >= goal */
                    guint m = l + (h - l) / 2;
                    const joint *j = &g_array_index(joints, joint, m);
                    if (j->key == key && j->nbc < goal)
                        l = m + 1;
                    else
                        h = m;
                }
                uint64_t below = caller_of(back);
                for (guint q = l > lo + SPLICE_NEAR ? l - SPLICE_NEAR : lo;
                     q < joints->len && q < l + SPLICE_NEAR; q++) {
                    const joint *j = &g_array_index(joints, joint, q);
                    if (j->key != key || dist(j->nbc + tb, expect) > tol)
                        continue;
                    uint64_t score = dist(j->nbc, mid) + dist(j->nbc + tb, expect) +
                                     (below && j->caller && below != j->caller ? tol : 0);
                    if (score < joined.score)
                        seam_take(&joined, j->nbc, e, r, score, back);
                }
            }
            if (x->kind == FL_CALL && back->len)
                g_array_set_size(back, back->len - 1);
            if (x->kind == FL_BYTECODE && ++tb == tail_want && cut.score == UINT64_MAX &&
                e > f->hbase)
                seam_take(&cut, expect - tb, e - 1, r, 0, back);
        }
        /* a tail shorter than half the hole: the fill's part makes up the
         * rest; without a fill, the longest tail is more than nothing */
        if (cut.score == UINT64_MAX && tb >= SPLICE_MIN / 2 && e > f->hbase)
            seam_take(&cut, expect - tb, e - 1, r, 0, back);
        else if (alone && tb > part_tb && e > f->hbase) {
            seam_take(&part, 0, e - 1, r, 0, back);
            part_tb = tb;
        }
    }
    seam *sm = joined.score != UINT64_MAX ? &joined : cut.score != UINT64_MAX ? &cut
             : part.score != UINT64_MAX   ? &part : NULL;
    if (sm) {
        keep_bytecodes(f, pieces, sm->fwd);
        uint64_t t0 = ev_at(f, sm->x)->tsc, t1 = ev_at(f, sm->r - 1)->tsc;
        uint64_t took = t1 > t0 ? t1 - t0 : 0;
        uint64_t len = sm->r - (sm->x + 1) - lead_before(f, sm->x, sm->r, t);
        piece tail = { sm->x + 1, len, span > took ? span - took : 0, 0, NULL };
        tail.agreed = tail.len;
        tail.seam = g_array_new(FALSE, FALSE, sizeof(frame));
        g_array_append_vals(tail.seam, sm->stk->data, sm->stk->len);
        g_array_append_val(pieces, tail);
    }
    g_array_free(joined.stk, TRUE);
    g_array_free(cut.stk, TRUE);
    g_array_free(part.stk, TRUE);
    g_array_free(back, TRUE);
    g_array_free(sim, TRUE);
    g_array_free(joints, TRUE);
    g_hash_table_destroy(first);
    return sm != NULL;
}

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
static void fill_gap(rv_filter *f)
{
    f->st.boundaries++;
    uint64_t end = ev_end(f);
    uint64_t begin = seg_begin(f, f->segno);
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
        recent_bytes(&f->bc_bytes, f->bytecodes, next->gap_offset, &rate_bc, &rate_den);
        if (rate_den && rate_bc)
            holds = bytes * (double)rate_bc / (double)rate_den;
        uint64_t rate_ev;
        recent_bytes(&f->ev_bytes, f->events, next->gap_offset, &rate_ev, &rate_den);
        if (rate_den)
            holds_events = bytes * (double)rate_ev / (double)rate_den;
    }
    if (holds < 0 && bd.timed) {
        recent_rate(f, &rate_bc, &rate_den);
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
    target_of(f, &t);
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
    int anchored = past_prepare(f, &ps, calls);
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
    /* The latest early rejoin of a chained piece (continuation()): the fill
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
            rank(f, &ps, n, top);
            /* Anchored on bytecodes that no earlier stretch of history
             * continues (the K-gram never ran before, or only where the
             * events after it, compiled code's calls and returns, run past
             * that stretch's end): its calls and returns may still match.
             * On luindex at 24% loss a hole of 246 K bytecodes got no fill
             * without this, and 60 K right with it (README.md, step 1). */
            if (!top->len && !tried && ps.idx == &f->bc && calls) {
                const uint32_t span = ps.span;
                ps.span = 0;
                if (past_anchor(f, &ps, &f->cr)) {
                    if (!link)
                        f->st.call_anchored++;
                    rank(f, &ps, n, top);
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
                int r = continuation(f, cd->p, &t, s, &bd, &len, &nbc, &ticks, &er);
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
                              dist(measure(f, &bd, cd->p, len, nbc), goal_of(&bd)) <
                                  dist(measure(f, &bd, pk.p, pk.len, pk.nbc), goal_of(&bd)));
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
            pc.agreed = agreement(f, cs, cl, nc, pick_c);
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
        const uint64_t pc_bytes = piece_bytes(f, &pc, pc.len);
        uint64_t reps = 1;
        if (prev && prev->start == pc.start && prev->len == pc.len && pk.end == END_SEGMENT &&
            pk.nbc && bd.expect > pk.nbc && same_stack(sim, pk.sim)) {
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
        if (!past_prepare(f, &ps, calls))
            break;
    }
    if (rejoined == 2)
        goto done;
    /* The chain never rejoined: it ends at the latest early rejoin. One
     * short of half the hole comes after the tail (below). */
    const int short_fb = !rejoined && fb.sim &&
                         fallback_measure(f, &bd, pieces, fb_pieces, &fb_piece, fb.nbc) <
                             ((bd.by_bytes ? hole_bytes : expect) + 1) / 2;
    if (!rejoined && fb.sim && !short_fb) {
        end_at_early(pieces, fb_pieces, &fb_piece);
        rejoined = 1;
    }
    /* a long fill that never rejoined, or none at all: its second half (or
     * all of it) from the other end */
    if (!rejoined && splice_tail(f, pieces, &t, expect, bd.span)) {
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
        if ((!hole_bytes || !keep_bytes(f, pieces, hole_bytes)) && expect) {
            if (keep_bytecodes(f, pieces, expect) < expect && holds_events >= 1)
                keep_events(pieces, (uint64_t)holds_events);
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
                have = icfg_path(f, x->method_id, x->bci, sim, &t, guess);
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
    if (emit_fill(f, pieces, gap_start, gap_end))
        goto done;
    for (guint k = 0; k < guess->len; k++) {
        fl_event *ev = &g_array_index(guess, fl_event, k);
        uint64_t off = gap_end > gap_start ? (gap_end - gap_start) * (k + 1) / (guess->len + 1) : 0;
        ev->tsc = gap_start + off;
        f->st.guessed_events++;
        if (ev->kind == FL_BYTECODE)
            f->st.guessed_bytecodes++;
        if (deliver(f, ev))
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
    pieces_free(pieces);
    g_array_free(sim, TRUE);
    g_array_free(pk.sim, TRUE);
    g_array_free(far.sim, TRUE);
    g_array_free(guess, TRUE);
}

/* Resolves the gap before the held-back segment, then passes it on. */
static int release(rv_filter *f)
{
    if (!f->holding)
        return f->stopped;
    f->holding = 0;
    if (!f->stopped) {
        uint64_t t0 = now_ns();
        fill_gap(f);
        f->st.ns += now_ns() - t0;
    }
    for (guint i = 0; i < f->pending->len; i++) {
        pev *p = &g_array_index(f->pending, pev, i);
        if (p->ev.kind == FL_SEGMENT) {
            segment_start(f, &p->ev);
        } else {
            history_add(f, &p->ev);
        }
        track(f, &p->ev);
        deliver(f, &p->ev);
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
    else if (!f->pending_syms && lead_symbol(ev))
        f->pending_calls++;
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
            segment_start(f, ev);
            track(f, ev);
            return deliver(f, ev);
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
    history_add(f, ev);
    track(f, ev);
    return deliver(f, ev);
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
