/* The reconstructed flow: what each thread executed, with method identity.
 *
 * Produced by reconstruct/ (interpreted segments projected onto the ICFG,
 * compiled code from its inline maps), completed by recover/ (holes left by
 * lost trace), and equally by the agent's reference mode (METHOD_ENTRY /
 * METHOD_EXIT / SINGLE_STEP records), so that profiles built from a trace and
 * from the reference are built by one code path and compared.
 *
 * A thread's flow is a sequence of segments. A segment starts with one
 * FL_SEGMENT event that gives the calling context it starts in (the shadow
 * stack at its start, outermost frame first; depth 0 when unknown), then
 * calls, returns and bytecodes nest within it: a FL_RETURN that finds the
 * segment's own frames exhausted leaves a frame of the starting stack.
 * A segment ends at the next FL_SEGMENT of the same thread (after a gap in
 * the trace, or where reconstruction could not carry the stack across).
 * Segments are independent: a consumer may process them in any order, on
 * any thread (ParCCT's partial trees merge associatively).
 *
 * Events are delivered to a callback one at a time; pointers inside an event
 * are valid only during the call. */
#ifndef JPT_RECONSTRUCT_FLOW_H
#define JPT_RECONSTRUCT_FLOW_H

#include <stdint.h>

typedef enum fl_kind {
    /* A segment begins: stack[0 .. depth) is the calling context it starts
     * in (method ids, outermost first; stack[depth - 1] is executing). seq
     * numbers the thread's segments in execution order from 0. */
    FL_SEGMENT = 1,
    /* method_id is entered; bci is the call site in the caller (-1 unknown). */
    FL_CALL,
    /* method_id is left (FL_F_EXCEPTION: by an exception). */
    FL_RETURN,
    /* count executions of opcode at (method_id, bci); count is 1 for a
     * single event, more for a summarized run (reference mode without
     * single-stepping gives none). */
    FL_BYTECODE,
    FL_KIND_COUNT
} fl_kind;

/* Where an event comes from (profiles can include or exclude by origin). */
typedef enum fl_origin {
    FL_DECODED = 0,      /* decoded from the trace (or recorded by the reference) */
    FL_RECOVERED,        /* filled in a hole from a matching complete segment */
    FL_GUESSED,          /* filled in a hole along an ICFG path */
    FL_ORIGIN_COUNT
} fl_origin;

/* flags */
#define FL_F_COMPILED  0x01  /* ran in compiled code */
#define FL_F_INLINED   0x02  /* FL_CALL / FL_RETURN of an inlined frame */
#define FL_F_EXCEPTION 0x04  /* FL_RETURN: the frame was unwound by an exception */
#define FL_F_NATIVE    0x08  /* FL_CALL: a native method */
/* FL_CALL of a frame that was already active where the segment starts, found
 * only by what followed (reconstruction without a known starting context):
 * not a real call; the frame's caller is unknown. */
#define FL_F_CONTEXT   0x10
/* FL_SEGMENT: the trace has a gap before this segment (data lost, or code
 * it could not follow), so some execution is missing between the previous
 * segment and this one. Without it, a new segment only means the calling
 * context had to be found again: nothing is missing. */
#define FL_F_AFTER_GAP 0x20
/* FL_CALL / FL_RETURN that the bytecode implies and the trace cannot show:
 * the constructor a compiled constructor calls on its own object, where no
 * call of it was seen (an empty one, java/lang/Object's above all, is
 * inlined with no code and no scope of its own). */
#define FL_F_INFERRED  0x40
/* FL_SEGMENT after a gap: lost_bytes is what the collector counted as lost
 * in it (the emulated backend's buffer model counts; a hardware TRUNCATED
 * record does not, nor does an OVF), so the gap's size in trace bytes is
 * known: lost_bytes plus the bytes the decoder skipped. */
#define FL_F_LOST_COUNTED 0x80
/* FL_CALL / FL_RETURN / FL_BYTECODE of compiled code whose bytecode path
 * the trace does not settle: another path of the same length fits its scopes
 * as well (reconstruct/compiled.h). */
#define FL_F_ESTIMATED 0x100

typedef struct fl_event {
    fl_kind kind;
    fl_origin origin;
    uint32_t flags;
    uint32_t tid;            /* native thread id */
    uint64_t tsc;            /* time (TSC); a lower bound where the trace has no finer timing */
    uint64_t method_id;      /* the agent's method id (METHOD records name it); 0: unknown */
    int32_t bci;
    int32_t opcode;          /* FL_BYTECODE: the standard opcode (-1 unknown) */
    uint64_t count;          /* FL_BYTECODE */
    /* FL_SEGMENT */
    uint64_t seq;
    uint32_t depth;
    const uint64_t *stack;
    /* FL_SEGMENT after a gap (FL_F_AFTER_GAP; 0 in any other event): where
     * in the thread's trace stream the gap began and where decoding resumed
     * (the bytes between were skipped), and the bytes the collector lost
     * there (FL_F_LOST_COUNTED). Recovery sizes the hole with them. */
    uint64_t gap_offset, resume_offset, lost_bytes;
    /* An event decoded from the trace (not FL_SEGMENT): where the decoder
     * stood in the thread's trace stream when it was made (dc_event.offset),
     * so that two events' difference is the trace bytes the code between
     * them took. 0 in events that were not decoded. */
    uint64_t offset;
} fl_event;

/* Returns 0 to go on, nonzero to stop. */
typedef int (*fl_sink)(const fl_event *ev, void *ctx);

#endif
