/* The decoder's output: one stream of events per thread, in execution order.
 *
 * Consumed by the later stages (reconstruction matches interpreted opcode
 * runs against the ICFG; compiled-code events pin method identity). Events
 * are delivered to a callback (dc_sink) one at a time; the pointer is valid
 * only during the call, so memory stays bounded whatever the trace length.
 * A DC_BYTECODE is delivered once its template has been left (so that its
 * exit is known), i.e. just before the event that follows it.
 *
 * Interpreted code carries no method identity: HotSpot's templates are
 * shared by all methods, so a DC_BYTECODE says which standard opcode ran,
 * not where. Method identity comes from compiled code (DC_JIT_*), from
 * later reconstruction, or from the reference-mode records.
 *
 * Every event has tsc (the time of the last timing packet before it: with
 * TSC packets only in PSB+, a lower bound within one PSB period), ip (the
 * address that produced it) and offset (where in the stream: see below).
 * Fields not listed for a kind are zero, except opcode, raw and bci, which
 * are -1. */
#ifndef JPT_DECODER_EVENTS_H
#define JPT_DECODER_EVENTS_H

#include <stdint.h>

typedef enum dc_kind {
    /* A bytecode template ran: opcode is the standard opcode (HotSpot's
     * fast_* forms mapped back; a fused template gives two events, the
     * second with DC_F_FUSED). raw is the codelet's own bytecode number. */
    DC_BYTECODE = 1,
    /* Interpreter codelets that are not bytecodes. desc names the codelet
     * (for DC_METHOD_ENTRY: "method entry point (kind = zerolocals)" etc.). */
    DC_METHOD_ENTRY,     /* an interpreted method begins */
    DC_INTERP_RETURN,    /* back in an interpreted caller ("invoke return entry") */
    DC_EARLYRET,
    DC_DEOPT,            /* deoptimized frame resumes in the interpreter */
    DC_EXCEPTION,        /* exception dispatch/unwinding in the interpreter */
    DC_THROW,            /* the interpreter raises NPE/AIOOBE/ArithmeticException/... */
    DC_SAFEPOINT,
    DC_NATIVE,           /* native method call plumbing */
    DC_INTERP_OTHER,
    /* Compiled code. method_id/bci/depth describe the innermost frame of the
     * inline stack at ip (bci -1, depth 1: no scope is recorded for ip, the
     * method is the compiled one).
     * DC_JIT_ENTER: control came into compiled-method version `code` from
     * elsewhere (a call, a jump from an adapter or the interpreter, a return
     * into it: flags say which). DC_JIT: the innermost (method, bci) changed
     * within the version. DC_INLINE_CALL / DC_INLINE_RETURN: the inline
     * stack grew / shrank by one frame (method_id is the frame entered /
     * left; depth the stack depth after the change). */
    DC_JIT_ENTER,
    DC_JIT,
    DC_INLINE_CALL,
    DC_INLINE_RETURN,
    /* A stub or adapter was entered (desc: its name). */
    DC_STUB,
    /* Code the model does not name (a blob area without a record). */
    DC_CODE_OTHER,
    /* Trace lost or undecodable: see the gap fields. */
    DC_GAP,
    /* Made by reconstruct/compiled.h: compiled code ran opcode at (method_id,
     * bci), depth the inline depth of that frame. */
    DC_JIT_BYTECODE,
    /* Made by reconstruct/compiled.h: an exception unwound the compiled
     * activation on top (code: its version) without a handler of its own. */
    DC_UNWOUND,
    DC_KIND_COUNT
} dc_kind;

/* flags */
#define DC_F_FUSED     0x01  /* second opcode of a fused template */
#define DC_F_RESUMED   0x02  /* first location after tracing resumed (TIP.PGE) */
#define DC_F_BY_CALL   0x04  /* DC_JIT_ENTER/DC_STUB: entered by a call */
#define DC_F_BY_RETURN 0x08  /* entered by a return */
#define DC_F_BY_JUMP   0x10  /* entered by a jump */
/* DC_BYTECODE of a conditional branch (if*, ifnull, ifnonnull) whose
 * template dispatched: which way it went (dm_codelet.not_taken). Neither
 * when the template was left otherwise (a gap, an exception). */
#define DC_F_TAKEN     0x20
#define DC_F_NOT_TAKEN 0x40
/* DC_JIT_ENTER: ip has no scope: the version's stub or handler sections, as
 * where a call goes through the static call stub that leads to the
 * interpreter (c2i), not into the method */
#define DC_F_NO_SCOPE  0x80
/* DC_JIT: control jumped back (to an address at or before the jump) within
 * the version since its last compiled-code event: the machine code may be
 * running a loop again. A record that runs again this way gives a DC_JIT
 * of its own even though the scope did not change. */
#define DC_F_BACKWARD  0x100
/* With DC_F_BY_RETURN: the return went to the instruction after a call the
 * thread was seen to make. Without it, the return went elsewhere (where
 * HotSpot dispatches an exception to its handler, say), or the call was
 * not seen (before the trace or a gap). */
#define DC_F_AFTER_CALL 0x2000
/* Made by reconstruct/compiled.h from the scopes, not by the decoder:
 * DC_JIT_ENTER: the interpreter jumped into an on-stack-replacement
 * version: its interpreted frame goes on compiled, no call. */
#define DC_F_OSR       0x200
/* DC_INLINE_CALL / DC_INLINE_RETURN of a callee that left no scope, whose
 * call the bytecode path crossed. */
#define DC_F_INFERRED  0x400
/* DC_INLINE_CALL of an inlined frame found running where the activation's
 * start was not known. */
#define DC_F_CONTEXT   0x800
/* Compiled code's events on a bytecode path that another path of the same
 * length would explain as well, or on a jump to a scope no path reached. */
#define DC_F_ESTIMATED 0x1000
/* DC_JIT_ENTER by a return that follows no call of the version (an
 * exception dispatched to one of its handlers); DC_INLINE_RETURN of a frame
 * an exception unwound. */
#define DC_F_THROWN    0x4000

typedef enum dc_gap_reason {
    DC_GAP_NONE = 0,
    DC_GAP_LOST,         /* the collector lost trace (AUX TRUNCATED) */
    DC_GAP_OVERFLOW,     /* the CPU dropped packets (OVF) */
    DC_GAP_DECODE,       /* libipt could not follow the trace (error below) */
    DC_GAP_NOCODE,       /* execution reached code the metadata does not have */
} dc_gap_reason;

typedef struct dc_event {
    dc_kind kind;
    uint32_t flags;
    uint64_t tsc;
    uint64_t ip;
    /* DC_BYTECODE */
    int32_t opcode;
    int32_t raw;
    /* DC_BYTECODE: address of the last instruction of the template that was
     * decoded: normally its dispatch jump, where control left it. HotSpot's
     * conditional branch templates dispatch from one place when the branch
     * is taken and from another when it is not, so this tells the outcomes
     * apart. When a gap follows, it is the last instruction decoded before
     * the gap. For wide, the template of the bytecode it modifies (the wide
     * template jumps into that one's wide entry: one instruction, one event). */
    uint64_t exit_ip;
    /* DC_BYTECODE of invokeinterface: 1 + the position, in the receiver
     * class's itable, of the interface the call names, as the template's
     * scan found it (dm_codelet.itable_loop); 0 when the scan was not seen
     * (calls of Object's and of private methods do not scan; a gap). */
    uint32_t itable_pos;
    /* compiled code */
    uint64_t method_id;
    int32_t bci;
    uint32_t depth;
    /* DC_INLINE_CALL: the bci of the call site, in the frame outside the
     * one entered (-1 when that frame has no scope) */
    int32_t call_bci;
    const void *code;         /* const dm_code *: the version (owned by the model) */
    const char *desc;         /* codelet or stub name (owned by the model); NULL otherwise */
    /* DC_GAP */
    dc_gap_reason reason;
    int error;                /* libipt error code (negative) for DC_GAP_DECODE/NOCODE */
    uint64_t end_tsc;         /* time decoding resumed (0: did not) */
    /* DC_GAP: the stream offset where the gap begins. Any other kind: where
     * the decoder stood in the thread's stream when the event was made (after
     * the block that made it or the one after), so the difference between
     * two events' offsets is the trace bytes the code between them took,
     * to within a block's packets. Next to a chunk boundary (DC_CHUNK_BYTES)
     * it may read a few bytes otherwise than in one piece, as tsc may: the
     * decoder that starts at the chunk's PSB has read ahead by other
     * packets. */
    uint64_t offset;
    uint64_t end_offset;      /* stream offset where decoding resumed */
    uint64_t lost_bytes;      /* DC_GAP_LOST: bytes the collector dropped (0 unknown) */
} dc_event;

/* Returns 0 to go on, nonzero to stop decoding. */
typedef int (*dc_sink)(const dc_event *ev, void *ctx);

const char *dc_kind_name(dc_kind k);
const char *dc_gap_reason_name(dc_gap_reason r);

#endif
