/* Projection of a thread's decoded events onto the program: which method and
 * bci every interpreted bytecode belongs to (JPortal, PLDI'21 section 4).
 *
 * HotSpot's interpreter runs every method through the same templates, so a
 * decoded DC_BYTECODE names an opcode, not a place. The projector simulates
 * the program's ICFG as a nondeterministic automaton over those opcodes,
 * with a call stack: a hypothesis is one full shadow stack (persistent
 * frames shared between hypotheses), and each decoded event maps the set of
 * live hypotheses to its successors:
 *   - a bytecode must be the opcode at the top frame's next instruction;
 *     branches and switches fork, the following opcodes prune;
 *   - an invoke's callee comes from its resolved call targets (class-
 *     hierarchy analysis), checked against what the trace pins: the entry
 *     kind (native, synchronized), the compiled method entered (i2c), the
 *     method returned from;
 *   - returns pop, exceptions go to the handlers covering the throwing
 *     instruction in this frame or a caller;
 *   - compiled code carries its own identity (the decoder's inline stacks).
 * Where the context is unknown (thread start, after a gap or a call from the
 * VM), start candidates come from an opcode index over all instructions and
 * are filtered by the opcodes that follow (a lookahead of this frame's next
 * bytecodes), so matching never enumerates the ICFG.
 *
 * While several hypotheses live, their histories are kept; once one is
 * left its history is emitted as flow events (reconstruct/flow.h). When the
 * ambiguity lasts too long or the set grows too big, the first hypothesis
 * (deterministic order) is chosen and counted; when none survives, the
 * segment ends as unresolved and a new one starts with unknown context. */
#ifndef JPT_RECONSTRUCT_PROJECT_H
#define JPT_RECONSTRUCT_PROJECT_H

#include <stdbool.h>
#include <stdint.h>

#include "decoder/events.h"
#include "decoder/model.h"
#include "reconstruct/compiled.h"
#include "reconstruct/flow.h"
#include "reconstruct/program.h"

typedef struct rp_stats {
    uint64_t events;             /* decoder events seen */
    uint64_t bytecodes;          /* interpreted bytecode events */
    uint64_t placed;             /* ... given a (method, bci) */
    uint64_t unplaced;           /* ... emitted without identity (unresolved stretches) */
    uint64_t segments;           /* flow segments emitted */
    uint64_t segments_unique;    /* every choice in it forced by the trace */
    uint64_t segments_chosen;    /* some choice made deterministically among survivors */
    uint64_t segments_unresolved;/* ended because no hypothesis survived */
    uint64_t choices;            /* deterministic choices made */
    uint64_t max_hypotheses;
    uint64_t capped;             /* times the hypothesis set hit its cap */
    uint64_t receiver_filtered;  /* calls on this whose receiver's class ruled out targets */
    uint64_t itable_filtered;    /* interface calls whose itable scan ruled out targets */
    uint64_t calls_inferred;     /* calls emitted that compiled code made with no trace
                                  * of them (FL_F_INFERRED) */
    rj_stats jit;                /* compiled code at the bytecode level (compiled.h) */
} rp_stats;

typedef struct rp_projector rp_projector;

/* The start-candidate index of a program, shared by the projectors of all
 * threads (built on first use, thread-safe). */
typedef struct rp_index rp_index;
rp_index *rp_index_new(rc_program *p);
void rp_index_free(rp_index *x);

/* One projector per thread stream; program p, model m and index idx are
 * shared (read-only apart from their lazily built, thread-safe caches).
 * With m, compiled code's scope events go through reconstruct/compiled.h
 * first; without, they are taken as they come. */
rp_projector *rp_new(rc_program *p, const dm_model *m, rp_index *idx, uint32_t tid,
                     fl_sink sink, void *ctx);
/* Feeds one decoder event (signature of a dc_sink). Returns nonzero when
 * the flow sink asked to stop. */
int rp_event(const dc_event *ev, void *projector);
/* Ends the stream: the last hypotheses are resolved and emitted. */
int rp_finish(rp_projector *r, rp_stats *st);
void rp_free(rp_projector *r);

void rp_stats_add(rp_stats *sum, const rp_stats *s);

/* Which classes have objects steers the choice between call targets the
 * trace cannot tell apart, and a thread's flow learns it as it goes: a
 * projector that starts inside a thread's stream (profile/shard.h) lacks
 * what the flow before taught. With tracking on, it keeps the classes it
 * took to have none when it asked. rp_classes calls cb with each class
 * (internal form) the flow showed objects of, or, with assumed_absent, each
 * of those it took to have none (nothing when not tracked). */
typedef void (*rp_class_cb)(const char *klass, void *ctx);
void rp_track_assumptions(rp_projector *r);
void rp_classes(const rp_projector *r, bool assumed_absent, rp_class_cb cb, void *ctx);

#endif
