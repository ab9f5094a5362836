/* Compiled code at the bytecode level: the path each compiled activation
 * took through its method and the methods inlined into it.
 *
 * The decoder reports compiled code by the PC records (scopes: inline stacks
 * of (method, bci)) of the instructions that ran. Those are exact at calls,
 * approximate elsewhere (DebugNonSafepoints: C2 schedules a callee's
 * instructions among its caller's and unrolls loops into copies that share
 * scopes) and sparse (C1 records little besides calls and branches; an
 * inlined callee reduced to nothing, such as an empty constructor or an
 * intrinsic, has no record at all). The scopes alone therefore miss calls
 * and invent others.
 *
 * This stage sits between the decoder and the projector (a dc_sink that
 * feeds the projector's) and replaces each compiled activation's scope
 * events by the bytecode path that explains them. The version's inline tree
 * (its method, and below each call site the callees its records show
 * inlined there) is an ICFG; each scope is a pin on it; between two pins the
 * path is a shortest path of that ICFG. Out come, in order: the inlined
 * calls and returns along the path (DC_INLINE_CALL, DC_INLINE_RETURN), a
 * call and return for each invoke crossed whose callee left no scope
 * (DC_F_INFERRED: the bytecode made that call), every bytecode
 * (DC_JIT_BYTECODE), and a DC_JIT with the position reached. Other events
 * pass unchanged, DC_JIT_ENTER with DC_F_OSR where the interpreter jumped
 * into an on-stack-replacement version.
 *
 * Rules, each counted in rj_stats:
 *   exact pins     An activation entered by a call starts before bci 0 of its
 *                  method; the scope a call leaves from is the invoke (or the
 *                  instruction the runtime call serves) and is where the
 *                  activation resumes on return; a return out of the version
 *                  ends at a return instruction of its method. A path must
 *                  reach them: where none does, the position is taken as the
 *                  pin says (resyncs).
 *   real calls     An invoke that the version calls for real (a record of it
 *                  follows a call instruction) is crossed only by that call,
 *                  never by a path between pins.
 *   loops          A path round a loop (an edge back to an earlier or the same
 *                  bci) needs a reason in the trace since the last pin: the
 *                  machine code jumped back (DC_F_BACKWARD), or the pin's
 *                  scope was met before since the last such jump (another
 *                  copy of an unrolled body). An approximate pin that needs
 *                  an unexplained loop is skipped: its instruction was
 *                  scheduled out of bytecode order.
 *   unrolled loops C2 unrolls a counted loop into copies whose records
 *                  may be shared, so a pass's pins can show fewer
 *                  iterations than it ran. The machine code says how many:
 *                  the constant its jump back's compare register advances
 *                  by (jp_loop_step) over the bytecode loop's iinc stride.
 *                  Each jump back closes a pass; iterations its pins did
 *                  not show go round the loop at the position, estimated
 *                  (unrolled_passes, unrolled_iterations).
 *   skipped pins   Approximate pins no path reaches are skipped.
 *   known values   A constant a path pushes (iconst, aconst_null) and only
 *                  goto or an inlined callee's return carry on decides the
 *                  ifeq/ifne/ifnull/ifnonnull that tests it: an inlined
 *                  boolean method's arm and its caller's test agree.
 *   unsettled      Where another path (forward, or as short round a loop)
 *                  reaches the same pin, the bytecodes of the one taken
 *                  that not every such path crosses are DC_F_ESTIMATED
 *                  (estimated_bytecodes): only pins settle a path, and
 *                  branch outcomes in compiled code are not read.
 *   exceptions     Control that comes into a version past its entries from a
 *                  stub that dispatches exceptions (dm_code), or back into it
 *                  not after a call, went to a handler of its innermost
 *                  activation whose position a handler covers (or of the last
 *                  one); the activations above it were unwound (DC_UNWOUND,
 *                  unwound). The path from the throw goes through a handler
 *                  covering it, at the next pin or on the way out.
 *   unknown start  Where an activation's start is not known (after a gap, an
 *                  OSR entry, an exception handler), its first pin is its
 *                  position; the inlined frames above its method found
 *                  running there are announced with DC_F_CONTEXT. */
#ifndef JPT_RECONSTRUCT_COMPILED_H
#define JPT_RECONSTRUCT_COMPILED_H

#include <stdint.h>

#include "decoder/events.h"
#include "decoder/model.h"
#include "reconstruct/program.h"

typedef struct rj_stats {
    uint64_t activations;        /* compiled activations followed */
    uint64_t osr_entries;        /* ... entered by an on-stack replacement */
    uint64_t pins;               /* scope events of compiled code */
    uint64_t pins_skipped;       /* approximate pins left out (no path, or an unexplained loop) */
    uint64_t resyncs;            /* exact pins no path reached: position taken as given */
    uint64_t inlined_calls;      /* inlined frames entered along paths */
    uint64_t calls_inferred;     /* invokes crossed whose one callee left no scope */
    uint64_t calls_unknown;      /* ... whose callee could not be told (not emitted) */
    uint64_t bytecodes;          /* compiled bytecodes emitted */
    uint64_t estimated_bytecodes;/* ... on paths the trace does not settle (DC_F_ESTIMATED) */
    uint64_t estimated_calls;    /* inlined and inferred calls on such paths */
    uint64_t walk_limit;         /* path searches that gave up at their bound */
    uint64_t exceptions;         /* paths that begin at a handler (an exception caught) */
    uint64_t unwound;            /* activations an exception left without a handler */
    uint64_t unrolled_passes;    /* jumps back that closed a pass of an unrolled loop */
    uint64_t unrolled_iterations;/* iterations such passes ran that their pins did not show */
    uint64_t ic_misses;          /* calls whose callee's inline-cache check failed at its
                                    entry: the version never ran, the miss handler goes on */
} rj_stats;

void rj_stats_add(rj_stats *sum, const rj_stats *s);

typedef struct rj_filter rj_filter;

/* A filter for one thread's events, feeding next. */
rj_filter *rj_new(rc_program *p, const dm_model *m, dc_sink next, void *next_ctx);
/* dc_sink: returns what next returned (nonzero: stop). */
int rj_event(const dc_event *ev, void *filter);
/* The end of the stream: what is still held goes out. */
int rj_finish(rj_filter *f);
void rj_free(rj_filter *f, rj_stats *st);

#endif
