/* The recovery filter's state and the steps its files share: the history
 * window and its symbol indexes (history.c), what a gap's two sides are
 * matched on and how candidates continue (match.c), the fill's pieces
 * (fill.c), the tail of a long hole (tail.c), the ICFG fallback (icfg.c),
 * one gap from start to end (gap.c). Internal to recover/. */
#ifndef JPT_RECOVER_FILTER_H
#define JPT_RECOVER_FILTER_H

#include "recover/recover.h"

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

/* segjoin's bits: the segment continues the one before it where no time
 * passed (SEG_JOINED), or with little missing (SEG_CROSSABLE: also where a
 * decode error skipped at most MINOR_SKIP bytes of trace and the collector
 * lost none: the tail of a long hole reads back across those) */
#define SEG_JOINED 1u
#define SEG_CROSSABLE 2u
#define MINOR_SKIP (16u << 10)

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline uint64_t sym_of(uint64_t method_id, int32_t bci)
{
    return mix64(method_id * 0x9e3779b97f4a7c15ull + (uint64_t)(uint32_t)bci);
}

static inline int placed(const fl_event *ev)
{
    return ev->method_id && ev->bci >= 0;
}

static inline hsym *si_at(const symindex *x, uint64_t abs)
{
    return &g_array_index(x->syms, hsym, abs - x->sbase);
}

static inline uint64_t si_end(const symindex *x) { return x->sbase + x->syms->len; }

static inline hsym *sym_at(rv_filter *f, uint64_t abs) { return si_at(&f->bc, abs); }

static inline hev *ev_at(rv_filter *f, uint64_t abs)
{
    return &g_array_index(f->h, hev, abs - f->hbase);
}

static inline uint64_t sym_end(const rv_filter *f) { return si_end(&f->bc); }
static inline uint64_t ev_end(const rv_filter *f) { return f->hbase + f->h->len; }

static inline uint64_t dist(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

/* Does segment s continue segment s - 1 (segment_start)? */
static inline int seg_joined(const rv_filter *f, uint32_t s)
{
    return s > f->segbase && s - f->segbase < f->segjoin->len &&
           (g_array_index(f->segjoin, uint8_t, s - f->segbase) & SEG_JOINED);
}

/* A frame found already running (FL_F_CONTEXT) that the stack has on top:
 * nothing happens (the call was announced only because the flow the event
 * comes from did not know that frame, at the start of its segment). */
static inline int context_known(const GArray *sim, const hev *x)
{
    return x->kind == FL_CALL && (x->flags & FL_F_CONTEXT) && sim->len &&
           g_array_index(sim, frame, sim->len - 1).method_id == x->method_id;
}

/* Applies a history event to a simulated stack; 0 when it contradicts it
 * (a return from, or a bytecode in, another method than the one on top). */
static inline int stack_step(GArray *sim, const hev *x)
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

/* What the next segment starts with (rv_target_of). */
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
static inline int in_bytes(const budget *bd) { return bd->by_bytes && bd->bytes; }
static inline uint64_t goal_of(const budget *bd) { return in_bytes(bd) ? bd->bytes : bd->expect; }

/* How far a continuation ran: its events, bytecodes, and the ticks from its
 * start to its last event. */
typedef struct reach {
    uint64_t len, nbc, ticks;
} reach;

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

/* A piece of the fill: history events [start, start + len). */
typedef struct piece {
    uint64_t start, len;
    uint64_t ticks;           /* time offset of the piece's start within the gap */
    uint64_t agreed;          /* events from start the other candidates mostly agree on */
    GArray *seam;             /* frame: a tail's frames, found running where it starts
                               * (splice_tail); NULL: the piece goes on from the one before */
} piece;

/* Trace bytes not known: events without stream offsets. */
#define UNKNOWN_BYTES UINT64_MAX

/* history.c: the history window */
uint64_t rv_key_of(const fl_event *ev, uint8_t tier);
uint64_t rv_kgram_of(const uint64_t *s, unsigned k);
uint64_t rv_kgram_key(rv_filter *f, uint64_t abs);
void rv_si_ready(symindex *x, unsigned k);
void rv_recent_rate(const rv_filter *f, uint64_t *bytecodes, uint64_t *ticks);
void rv_recent_bytes(const per_byte *pb, uint64_t now, uint64_t gap_offset, uint64_t *count,
                     uint64_t *bytes);
void rv_segment_start(rv_filter *f, const fl_event *ev);
int rv_seg_crossable(const rv_filter *f, uint32_t s);
uint64_t rv_seg_begin(rv_filter *f, uint32_t s);
void rv_stack_apply(GArray *stk, const fl_event *ev);
void rv_track(rv_filter *f, const fl_event *ev);
void rv_history_add(rv_filter *f, const fl_event *ev);
int rv_deliver(rv_filter *f, const fl_event *ev);
int rv_lead_symbol(const fl_event *ev);
/* match.c: matching */
void rv_target_of(rv_filter *f, target *t);
int rv_rejoins_at(rv_filter *f, uint64_t e, const target *t);
uint64_t rv_lead_before(rv_filter *f, uint64_t p, uint64_t e, const target *t);
int rv_same_stack(const GArray *a, const GArray *b);
int rv_past_anchor(rv_filter *f, past *ps, const symindex *idx);
int rv_past_prepare(rv_filter *f, past *ps, int calls);
void rv_rank(rv_filter *f, const past *ps, unsigned n, GArray *top);
int rv_continuation(rv_filter *f, uint64_t p, const target *t, GArray *sim, const budget *bd,
                    reach *out, early *er);
/* icfg.c: the ICFG fallback */
int rv_icfg_path(rv_filter *f, uint64_t mid, int32_t bci, const GArray *sim,
                 const target *t, GArray *out);
/* fill.c: the fill's pieces */
void rv_pieces_free(GArray *pieces);
uint64_t rv_agreement(rv_filter *f, const uint64_t *s, const uint64_t *l, unsigned n,
                      unsigned pick);
int rv_emit_fill(rv_filter *f, const GArray *pieces, uint64_t gap_start, uint64_t gap_end);
uint64_t rv_bytecodes_in(rv_filter *f, const GArray *pieces, guint n);
void rv_keep_events(GArray *pieces, uint64_t n);
uint64_t rv_keep_bytecodes(rv_filter *f, GArray *pieces, uint64_t nbc);
uint64_t rv_piece_bytes(rv_filter *f, const piece *pc, uint64_t len);
uint64_t rv_measure(rv_filter *f, const budget *bd, uint64_t p, uint64_t len, uint64_t nbc);
uint64_t rv_fallback_measure(rv_filter *f, const budget *bd, const GArray *pieces, guint n,
                             const piece *fb, uint64_t nbc);
int rv_keep_bytes(rv_filter *f, GArray *pieces, uint64_t nbytes);
/* tail.c: the tail of a long hole */
int rv_splice_tail(rv_filter *f, GArray *pieces, const target *t, uint64_t expect,
                   uint64_t span);
/* gap.c: one gap */
void rv_fill_gap(rv_filter *f);

#endif
