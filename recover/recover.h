/* Recovery of the flow lost in trace gaps (JPortal, PLDI'21 section 5).
 *
 * A flow filter: it takes one thread's fl_events (reconstruct/flow.h) in
 * order and passes them on to a sink, adding FL_RECOVERED (and, failing
 * that, FL_GUESSED) events where a segment ends before a gap. For every such
 * boundary it
 *   - anchors on the last K placed bytecodes of the segment that ends (or,
 *     where it has fewer, as compiled code does, on its last K calls and
 *     returns) and looks them up in an index of the thread's earlier flow (a
 *     hash of every K symbols -> the positions where they end; a bounded
 *     window, no scan);
 *   - ranks the candidates by their common suffix with the segment at three
 *     tiers: tier 1 the calls and returns, tier 2 the control structure
 *     (calls, returns, branches, switches, invokes, returns, throws), tier 3
 *     every event. A tier's common suffix is measured in events of the
 *     segment, up to the first place where the two projections differ
 *     (symbol or position), so tier 3 <= tier 2 <= tier 1 (Theorem 5.5):
 *     candidates are visited by tier 1 and one whose bound cannot beat the
 *     current N-th best is pruned before the finer tiers are computed. The
 *     final rank is tier 3, the most recent first among equals;
 *   - of the top N whose continuation keeps the call stack consistent
 *     (returns leave the frames the flow shows, every bytecode runs in the
 *     frame on top; where every one contradicts it, the one that went
 *     furthest is kept up to its contradiction and chained on from) and
 *     reaches the next segment's first symbols (its first K placed
 *     bytecodes, or its first K calls and returns where it starts with K of
 *     them: compiled code) with the stack that segment starts in (the
 *     rejoin point; the fill ends before the calls and returns the segment
 *     starts with), takes the one whose
 *     fill is nearest to what the gap's time span holds at the thread's
 *     recent rate (the best ranked among equals; where the rejoin symbols
 *     recur along one continuation, its rejoin nearest to that length);
 *     continuations read across breaks of the history where no time passed;
 *   - when none rejoins, or only far short of what the span holds, takes the
 *     best one that ran to the end of its own segment and starts the search
 *     again from where it ended (chaining; a piece that repeats the one
 *     before is a loop's iteration, repeated for the span), all of it
 *     bounded by twice the bytecodes the span holds and an event budget;
 *   - ends a long fill that never rejoins (the hole holds 4096 bytecodes or
 *     more) with the history that led up to an earlier run of the next
 *     segment's first symbols, from about halfway, joined where both run
 *     the same symbols if they do (the tail's frames found running there);
 *   - keeps a fill that never rejoins as far as the span holds (one of
 *     compiled code that runs fewer bytecodes: the events the hole's bytes
 *     hold; with cut_disputed, only as far as the top candidates'
 *     continuations mostly agree: beyond, the history went several ways);
 *   - when the fill does not rejoin, looks for a shortest ICFG path from the
 *     last placed bytecode to the next segment's first one and adds it as
 *     FL_GUESSED events (needs rv_options.icfg);
 *   - emits nothing when nothing fits (the gap stays).
 * The next segment is held back until its first K symbols are known, it
 * ends, or 4 * K + RV_HOLD_EXTRA of its events are held (calls and returns
 * complete them only before its first bytecode), so memory is the history
 * window plus that short lookahead. */
#ifndef JPT_RECOVER_RECOVER_H
#define JPT_RECOVER_RECOVER_H

#include <stddef.h>
#include <stdint.h>

#include "reconstruct/flow.h"
#include "reconstruct/program.h"

/* The program's ICFG as recovery sees it: per-method CFGs by the agent's
 * method id and the targets of a call site. rv_program_icfg adapts an
 * rc_program; tests supply hand-made graphs. */
typedef struct rv_icfg {
    /* The CFG of method_id, or NULL (unknown, native, abstract). */
    const rc_cfg *(*cfg)(void *ctx, uint64_t method_id);
    /* Up to max method ids the invoke at bci of method_id may call. */
    size_t (*targets)(void *ctx, uint64_t method_id, uint32_t bci, uint64_t *out, size_t max);
    void *ctx;
} rv_icfg;

rv_icfg rv_program_icfg(rc_program *p);

/* One ranked candidate (for tests and diagnostics): pos is the absolute
 * index of the history event aligned with the segment's last event (the
 * thread's non-FL_SEGMENT events counted from 0); l1 <= ... bounds. */
typedef struct rv_ranked {
    uint64_t pos;
    uint32_t l1, l2, l3;
} rv_ranked;

/* Candidates kept after ranking at most (rv_options.candidates is clamped). */
#define RV_MAX_CANDIDATES 256u
/* The anchor's newest runs a ranking looks at, at most. A loop's K-gram
 * recurs at each iteration, and each run costs a tier-1 suffix walk: on
 * rhino at 50% loss (`16K/6`: 8,063 boundaries, 157 K links) the newest
 * 4096 took recovery 287 s of CPU, more than decoding's 197, and the newest
 * 512 took 190 s (README.md, step 2). */
#define RV_RANK_WALK 512u
/* Events held back after a gap at most: 4 * K plus this many. */
#define RV_HOLD_EXTRA 64u

typedef struct rv_options {
    unsigned k;               /* anchor length in symbols (0: 8) */
    size_t window;            /* history events kept (0: 1 << 20) */
    size_t max_fill;          /* events filled into one gap at most (0: 1 << 20); where
                               * the gap's size is known, its bytecodes at the history's
                               * events per bytecode if that is more, up to 16 times
                               * as many */
    unsigned candidates;      /* N: candidates kept after ranking (0: 16; at most
                               * RV_MAX_CANDIDATES) */
    unsigned suffix_cap;      /* common suffix compared at most, events (0: 4096) */
    unsigned max_links;       /* candidates chained across one gap at most (0: 32) */
    unsigned max_nodes;       /* ICFG search states per gap at most (0: 20000) */
    int no_time;              /* nonzero: do not bound a fill by the gap's time span
                               * (nor by its size in trace bytes) */
    int no_lost_bytes;        /* nonzero: size a gap by its time span only, as where the
                               * collector does not count the bytes it lost (hardware) */
    int no_prune;             /* nonzero: compute every tier of every candidate */
    int no_unjoined;          /* nonzero: drop a fill that does not rejoin (and has no
                               * ICFG path to the rejoin point) */
    int cut_disputed;         /* nonzero: keep a fill that does not rejoin only as far
                               * as the top candidates agree */
    const rv_icfg *icfg;      /* NULL: no ICFG fallback */
    /* Called with the top N of every ranking, best first (may be NULL); not
     * with the wider rankings tried when all of the top N contradict the
     * call stack. */
    void (*on_rank)(void *ctx, const rv_ranked *top, unsigned n);
    void *rank_ctx;
} rv_options;

typedef struct rv_stats {
    uint64_t boundaries;      /* segment boundaries after a gap (holes to consider) */
    uint64_t no_anchor;       /* ... the segment ending there had fewer than K symbols */
    uint64_t call_anchored;   /* ... anchored on calls and returns (too few bytecodes, or
                               * none that earlier history continues) */
    uint64_t rejoin_on_calls; /* ... whose next segment is met on its calls and returns */
    uint64_t cut_at_stack;    /* links whose every candidate contradicted the stack,
                               * continued up to the contradiction */
    uint64_t no_candidate;    /* ... nothing fitted: no fill, no path */
    uint64_t filled;          /* ... some events recovered or guessed */
    uint64_t rejoined;        /* ... the recovered fill reached the next segment's start */
    uint64_t spliced;         /* ... by a tail from the history before the next segment's start */
    uint64_t empty_rejoin;    /* ... the rejoin came at once: nothing was missing */
    uint64_t guessed_gaps;    /* ... an ICFG path was added */
    uint64_t events;          /* FL_RECOVERED events emitted */
    uint64_t bytecodes;       /* ... of them bytecodes */
    uint64_t guessed_events;  /* FL_GUESSED events emitted */
    uint64_t guessed_bytecodes;
    uint64_t links;           /* candidates' continuations used (chaining: > filled) */
    uint64_t candidates;      /* candidates found through the index */
    uint64_t pruned_t1;       /* ... pruned on their tier-1 bound */
    uint64_t pruned_t2;       /* ... pruned on their tier-2 bound */
    uint64_t ranked_t3;       /* ... whose tier 3 was computed */
    uint64_t inconsistent;    /* continuations rejected for their call stack */
    uint64_t ns;              /* CPU time spent matching and filling, nanoseconds */
} rv_stats;

typedef struct rv_filter rv_filter;

/* One filter per thread; opt NULL or zero fields: the defaults. Events go on to sink(ctx). */
rv_filter *rv_new(const rv_options *opt, fl_sink sink, void *ctx);
/* Feeds one event (signature of an fl_sink). Returns nonzero when the sink
 * asked to stop. */
int rv_event(const fl_event *ev, void *filter);
/* Ends the thread's flow: what is held back is delivered. Returns nonzero
 * when the sink asked to stop. st (may be NULL) gets the counts. */
int rv_finish(rv_filter *f, rv_stats *st);
void rv_free(rv_filter *f);

void rv_stats_add(rv_stats *sum, const rv_stats *s);

#endif
