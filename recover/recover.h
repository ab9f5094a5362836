/* Recovery of the flow lost in trace gaps (JPortal, PLDI'21 section 5),
 * first version: tier 3 (concrete (method, bci) symbols) only.
 *
 * A flow filter: it takes one thread's fl_events (reconstruct/flow.h) in
 * order and passes them on to a sink, adding FL_RECOVERED events where a
 * segment ends. For every segment boundary it
 *   - anchors on the last K placed bytecodes of the segment that ends
 *     (its (method, bci) symbols);
 *   - looks the anchor up in an index of the thread's earlier flow (a hash
 *     of every K symbols -> the positions where they end; a bounded window
 *     of history, no scan);
 *   - ranks the candidates by the length of their common suffix with the
 *     segment (how far back the symbols keep agreeing, up to a cap), the
 *     most recent first among equals, and keeps the top few;
 *   - replays the continuation of the best one after its anchor, preferring
 *     among the kept candidates one whose continuation reaches the next
 *     segment's first symbols (the rejoin point), as FL_RECOVERED events,
 *     until the rejoin point, the end of the candidate's own segment, the
 *     gap's time span or the event bound;
 *   - emits nothing when no candidate fits (the gap stays).
 * The next segment is held back until its first K symbols are known (or it
 * ends), so memory is the history window plus that short lookahead. */
#ifndef JPT_RECOVER_RECOVER_H
#define JPT_RECOVER_RECOVER_H

#include <stddef.h>
#include <stdint.h>

#include "reconstruct/flow.h"

typedef struct rv_options {
    unsigned k;               /* anchor length in symbols (0: 8) */
    size_t window;            /* history events kept (0: 1 << 20) */
    size_t max_fill;          /* events replayed into one gap at most (0: 1 << 16) */
    unsigned candidates;      /* candidates kept after ranking (0: 16) */
    unsigned suffix_cap;      /* common suffix compared at most (0: 4096) */
    int no_time;              /* nonzero: do not bound a fill by the gap's time span */
} rv_options;

typedef struct rv_stats {
    uint64_t boundaries;      /* segment boundaries seen (gaps to consider) */
    uint64_t no_anchor;       /* ... the segment ending there had fewer than K symbols */
    uint64_t no_candidate;    /* ... the anchor occurs nowhere earlier */
    uint64_t filled;          /* ... some events recovered */
    uint64_t rejoined;        /* ... the fill ended at the next segment's first symbols */
    uint64_t empty_rejoin;    /* ... the rejoin came at once: nothing was missing */
    uint64_t events;          /* FL_RECOVERED events emitted */
    uint64_t bytecodes;       /* ... of them bytecodes */
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
