/* The second layer of a stream's decoding (chunk.h): the flow state between
 * blocks, replaying each chunk's ops in stream order into events. */
#include "decoder/chunk.h"

#include <stdlib.h>
#include <string.h>

#include "decoder/bytecodes.h"

static void deliver(ctx *x, dc_event *ev)
{
    if (x->stop || x->tail == TAIL_DONE)
        return;
    if ((unsigned)ev->kind < DC_KIND_COUNT)
        x->st->events[ev->kind]++;
    if (ev->kind != DC_GAP)
        ev->offset = x->off;
    if (x->sink(ev, x->sink_ctx))
        x->stop = true;
}

void dc_flush_pending(ctx *x)
{
    /* A conditional branch's template left by its dispatch (an indirect
     * jump): the dispatch's place says which way it went. */
    const dm_codelet *c = x->pending_in;
    if (c && c->not_taken && x->prev_xfer == X_JMP_INDIRECT)
        for (unsigned i = 0; i < x->npending; i++)
            if (x->pending[i].kind == DC_BYTECODE && x->pending[i].exit_ip >= c->begin &&
                x->pending[i].exit_ip < c->end)
                x->pending[i].flags |= x->pending[i].exit_ip >= c->not_taken ? DC_F_NOT_TAKEN
                                                                              : DC_F_TAKEN;
    for (unsigned i = 0; i < x->npending && !x->drop_pending; i++)
        deliver(x, &x->pending[i]);
    x->drop_pending = false;
    if (x->tail == TAIL_ON)
        x->tail = TAIL_DONE;
    x->npending = 0;
    x->pending_in = NULL;
    x->hold = false;
}

static void emit(ctx *x, dc_event *ev)
{
    if (!ev->tsc)
        ev->tsc = x->tsc;
    /* A stub the pending template calls (and returns from) is part of it:
     * queue the event behind the template's so the exit can still come. */
    if (x->hold && x->pending_in && x->npending < PENDING_MAX) {
        x->pending[x->npending++] = *ev;
        return;
    }
    dc_flush_pending(x);
    deliver(x, ev);
}

/* A return (or a jump, as HotSpot's interpreter returns) to target matches a
 * tracked call if it lands just after that call instruction. Pops it and
 * everything above it; the call's entry goes to *ent (may be NULL). */
static bool shadow_pop(ctx *x, uint64_t target, shadow_ent *ent)
{
    size_t lowest = x->nshadow > SHADOW_SEARCH ? x->nshadow - SHADOW_SEARCH : 0;
    for (size_t i = x->nshadow; i-- > lowest;) {
        uint64_t c = x->shadow[i].call_ip;
        if (target > c && target - c <= MAX_INSN_LEN) {
            if (ent)
                *ent = x->shadow[i];
            x->nshadow = i;
            return true;
        }
    }
    return false;
}

/* A call at call_ip; from compiled code, its inline stack is kept with it
 * (unless it is a no-scope stand-in, whose slot is reused). */
static void shadow_push(ctx *x, uint64_t call_ip)
{
    if (x->nshadow == SHADOW_MAX) {
        memmove(x->shadow, x->shadow + SHADOW_MAX / 2, (SHADOW_MAX / 2) * sizeof x->shadow[0]);
        x->nshadow = SHADOW_MAX / 2;
    }
    shadow_ent e = { .call_ip = call_ip };
    if (x->jit_frames && (x->jit_frames < x->noscope || x->jit_frames >= x->noscope + 2)) {
        e.jit_code = x->jit_code;
        e.jit_frames = x->jit_frames;
        e.jit_depth = x->jit_depth;
    }
    x->shadow[x->nshadow++] = e;
}

/* ---- events for one location ---------------------------------------------- */

static void codelet_event(ctx *x, const dm_codelet *c, uint64_t ip, uint32_t flags)
{
    dc_event ev = { .ip = ip, .flags = flags, .raw = c->bytecode, .opcode = -1, .bci = -1,
                    .desc = c->desc };
    if (c->kind == DM_CL_BYTECODE) {
        /* Entered by the wide template's dispatch: the wide entry of the
         * modified bytecode's template runs the rest of the same
         * instruction, so its exit is the instruction's (no event of its
         * own: the class file has one instruction there). */
        const dm_codelet *held = x->pending_in;
        if (held && held->nops == 1 && held->ops[0] == BC_WIDE && x->npending == 1 &&
            x->pending[0].kind == DC_BYTECODE && !x->hold && x->prev_xfer == X_JMP_INDIRECT) {
            x->pending_in = c;
            return;
        }
        dc_flush_pending(x);
        ev.kind = DC_BYTECODE;
        ev.tsc = x->tsc;
        for (unsigned i = 0; i < c->nops && i < 2; i++) {
            ev.opcode = c->ops[i];
            ev.flags = flags | (i ? DC_F_FUSED : 0);
            x->pending[x->npending++] = ev;
        }
        if (c->nops) {
            x->pending_in = c;
            return;
        }
        ev.kind = DC_INTERP_OTHER;  /* breakpoint and the like: still visible */
        emit(x, &ev);
        return;
    }
    static const dc_kind map[DM_CL_KIND_COUNT] = {
        [DM_CL_METHOD_ENTRY] = DC_METHOD_ENTRY, [DM_CL_RETURN] = DC_INTERP_RETURN,
        [DM_CL_EARLYRET] = DC_EARLYRET, [DM_CL_DEOPT] = DC_DEOPT,
        [DM_CL_EXCEPTION] = DC_EXCEPTION, [DM_CL_THROW] = DC_THROW,
        [DM_CL_SAFEPOINT] = DC_SAFEPOINT, [DM_CL_NATIVE] = DC_NATIVE,
        [DM_CL_OTHER] = DC_INTERP_OTHER,
    };
    ev.kind = map[c->kind] ? map[c->kind] : DC_INTERP_OTHER;
    emit(x, &ev);
}

/* Number of outer frames two inline stacks share (frames are innermost
 * first). A frame is shared while the method at that depth is the same and
 * every frame outside it stood at the same bci; a shared frame whose bci
 * moved is the last one shared (its inlined callees differ). */
static uint32_t common_outer(const dm_frame *a, uint32_t da, const dm_frame *b, uint32_t db)
{
    uint32_t k = 0;
    while (k < da && k < db) {
        const dm_frame *fa = &a[da - 1 - k], *fb = &b[db - 1 - k];
        if (fa->method_id != fb->method_id)
            break;
        k++;
        if (fa->bci != fb->bci)
            break;
    }
    return k;
}

/* The position moves to r->pc in version c (r: its inline-stack record,
 * looked up by the first layer). */
/* again: DC_F_BACKWARD (a jump back within the version) and DC_F_RESUMED
 * (the trace resumed in it, not after a call it made), which give an event
 * even where the record stays the same. */
static void jit_position(ctx *x, const dm_code *c, const run *r, bool fresh, uint32_t again)
{
    uint64_t pc = r->pc;
    bool same_record = !fresh && x->jit_code == c && x->jit_frames && pc >= x->jit_lo &&
                       pc < x->jit_hi;
    if (same_record && !again)
        return;                /* same record as before: nothing changes */
    if (same_record) {
        /* the record runs again after a jump back (a loop inside it), or
         * the trace resumed in it */
        dc_event ev = { .kind = DC_JIT, .ip = pc, .code = c, .opcode = -1, .raw = -1,
                        .call_bci = -1, .flags = again,
                        .method_id = x->jit_frames[0].method_id, .bci = x->jit_frames[0].bci,
                        .depth = x->jit_depth };
        emit(x, &ev);
        return;
    }
    const dm_frame *f = r->f;
    uint32_t d = r->d;
    x->jit_lo = c->vaddr + r->lo;
    x->jit_hi = c->vaddr + r->hi;
    if (!d) {
        /* Alternate slots: the previous position may be the other one. */
        x->noscope_slot ^= 1;
        dm_frame *ns = &x->noscope[x->noscope_slot];
        ns->method_id = c->method_id;
        ns->bci = -1;
        f = ns;
        d = 1;
    }
    dc_event ev = { .ip = pc, .code = c, .opcode = -1, .raw = -1, .call_bci = -1 };
    const dm_frame *o = x->jit_frames;
    uint32_t od = x->jit_depth;
    if (!fresh && x->jit_code == c && o) {
        uint32_t k = common_outer(o, od, f, d);
        for (uint32_t i = 0; i + k < od; i++) {     /* frames left, innermost first */
            ev.kind = DC_INLINE_RETURN;
            ev.method_id = o[i].method_id;
            ev.bci = o[i].bci;
            ev.depth = od - i - 1;
            emit(x, &ev);
        }
        for (uint32_t j = k; j < d; j++) {          /* frames entered, outermost first */
            ev.kind = DC_INLINE_CALL;
            ev.method_id = f[d - 1 - j].method_id;
            ev.bci = f[d - 1 - j].bci;
            ev.depth = j + 1;
            ev.call_bci = j ? f[d - j].bci : -1;
            emit(x, &ev);
        }
        ev.call_bci = -1;
        if (o[0].method_id == f[0].method_id && o[0].bci == f[0].bci && od == d && !again) {
            x->jit_frames = f;
            return;
        }
    }
    ev.kind = DC_JIT;
    ev.flags = again;
    ev.method_id = f[0].method_id;
    ev.bci = f[0].bci;
    ev.depth = d;
    emit(x, &ev);
    x->jit_code = c;
    x->jit_frames = f;
    x->jit_depth = d;
}

static uint32_t how_flags(xfer t)
{
    switch (t) {
    case X_CALL: return DC_F_BY_CALL;
    case X_RET: return DC_F_BY_RETURN;
    case X_JMP_DIRECT:
    case X_JMP_INDIRECT: return DC_F_BY_JUMP;
    default: return 0;
    }
}

/* How the block at o, in unit u, is reached from the block before: whether
 * u is entered (an event of its own) rather than continued, with the flags
 * of that transfer (*flags_out) and the call a return went back to
 * (*back_out). */
static bool entered_at(ctx *x, const op *o, unit u, uint32_t *flags_out, shadow_ent *back_out)
{
    bool entered;
    uint32_t flags = 0;
    bool is_bc = u.kind == U_CODELET && ((const dm_codelet *)u.p)->kind == DM_CL_BYTECODE;
    bool is_nm = u.kind == U_CODE && ((const dm_code *)u.p)->kind == DM_CODE_NMETHOD;
    bool same = same_unit(u, x->prev);
    shadow_ent back = { 0 };

    if (x->unknown_origin) {
        entered = false;
    } else if (x->resumed) {
        /* Back from untraced code (the VM): at the return address of a call
         * a codelet made, the codelet continues (getstatic resuming after the
         * VM ran a class initializer); anywhere else it is entered. */
        bool matched = shadow_pop(x, o->ip, NULL);
        /* A stub resumed elsewhere than after a call it made is entered
         * again, even if the thread left from it: the VM returns from the
         * call stub and calls Java through it again. */
        bool stub = u.kind == U_CODE && ((const dm_code *)u.p)->kind == DM_CODE_STUB;
        entered = (!same || (stub && !matched)) && !(matched && u.kind == U_CODELET);
        flags |= DC_F_RESUMED;
    } else {
        flags |= how_flags(x->prev_xfer);
        switch (x->prev_xfer) {
        case X_CALL:
            /* A call within a codelet is HotSpot's call_VM pattern (a local
             * subroutine); a compiled method calling itself is recursion. */
            entered = !same || is_nm;
            break;
        case X_RET: {
            bool matched = shadow_pop(x, o->ip, &back);
            /* a compiled method's recursive call returning to its caller
             * leaves one frame for another of the same version */
            entered = (!same || (is_nm && matched)) && !(matched && u.kind == U_CODELET);
            if (!matched)
                back.jit_frames = NULL;
            else
                flags |= DC_F_AFTER_CALL;
            break;
        }
        case X_JMP_INDIRECT: {
            /* The interpreter returns by jumping to the return address; its
             * dispatch may jump to the template that just ran. Into compiled
             * code, to the address after a call it made, that is the call's
             * return (an interpreted callee the c2i adapter entered). */
            bool matched = shadow_pop(x, o->ip, &back);
            entered = !same || is_bc;
            if (matched && is_nm && !same) {
                flags = (flags & ~DC_F_BY_JUMP) | DC_F_BY_RETURN | DC_F_AFTER_CALL;
            } else {
                back.jit_frames = NULL;
            }
            break;
        }
        default:
            entered = !same;
            break;
        }
    }
    *flags_out = flags;
    *back_out = back;
    return entered;
}

static void on_block(ctx *x, const op *o, unit exitu, const run *runs)
{
    unit u = { (ukind)o->ukind, o->u };
    uint32_t flags;
    shadow_ent back;           /* the call a return went back to */
    bool entered = entered_at(x, o, u, &flags, &back);
    bool same = same_unit(u, x->prev);

    switch (u.kind) {
    case U_CODELET: {
        const dm_codelet *c = u.p;
        if (entered)
            codelet_event(x, c, o->ip, flags);
        if (o->end_ip < c->begin || o->end_ip >= c->end) {
            /* Followed a direct jump into another codelet. */
            if (exitu.kind == U_CODELET) {
                const dm_codelet *d = exitu.p;
                codelet_event(x, d, d->begin, DC_F_BY_JUMP);
            }
        }
        x->jit_frames = NULL;
        break;
    }
    case U_CODE: {
        const dm_code *c = u.p;
        if (c->kind == DM_CODE_STUB) {
            if (entered) {
                dc_event ev = { .kind = DC_STUB, .ip = o->ip, .flags = flags, .code = c,
                                .desc = c->name, .opcode = -1, .raw = -1, .bci = -1 };
                emit(x, &ev);
            }
            break;
        }
        if (entered) {
            dc_event ev = { .kind = DC_JIT_ENTER, .ip = o->ip, .code = c,
                            .flags = flags | (o->nruns && !runs[0].d ? DC_F_NO_SCOPE : 0),
                            .method_id = c->method_id, .opcode = -1, .raw = -1, .bci = -1 };
            emit(x, &ev);
        }
        /* Back from a call this version made: the position continues from
         * the inline stack the call left (an inlined callee's code may
         * follow the call: Character.charCount(codePointAt(...))). */
        bool from_call = entered && back.jit_frames && back.jit_code == c && o->nruns;
        if (from_call) {
            x->jit_code = back.jit_code;
            x->jit_frames = back.jit_frames;
            x->jit_depth = back.jit_depth;
            x->jit_lo = x->jit_hi = 0;
        }
        /* a jump back within the version: the code may run a loop again */
        bool backward = !entered && !x->unknown_origin && same && o->ip <= x->prev_end_ip &&
                        (x->prev_xfer == X_COND || x->prev_xfer == X_JMP_DIRECT ||
                         x->prev_xfer == X_JMP_INDIRECT);
        uint32_t again = (backward ? DC_F_BACKWARD : 0) |
                         (x->resumed && !entered ? DC_F_RESUMED : 0);
        for (uint32_t i = 0; i < o->nruns; i++)
            jit_position(x, c, &runs[i],
                         i == 0 && ((entered && !from_call) || x->unknown_origin),
                         (i == 0 ? again : 0) | (runs[i].back ? DC_F_BACKWARD : 0));
        break;
    }
    case U_BLOB:
        if (entered) {
            dc_event ev = { .kind = DC_CODE_OTHER, .ip = o->ip, .flags = flags,
                            .desc = ((const dm_blob *)u.p)->name, .opcode = -1, .raw = -1,
                            .bci = -1 };
            emit(x, &ev);
        }
        break;
    default:
        break;
    }
    /* The template's exit so far: where control left its codelet last. */
    bool in_pending = x->pending_in && o->end_ip >= x->pending_in->begin &&
                      o->end_ip < x->pending_in->end;
    if (in_pending) {
        /* the itable scan: entered at its peeled test, one more entry per
         * block at its loop head */
        const dm_codelet *c = x->pending_in;
        bool scan_start = c->itable_first && o->end_ip == c->itable_first;
        bool scan_step = c->itable_loop && o->ip == c->itable_loop;
        for (unsigned i = 0; i < x->npending; i++)
            if (x->pending[i].kind == DC_BYTECODE) {
                x->pending[i].exit_ip = o->end_ip;
                if (scan_start && !x->pending[i].itable_pos)
                    x->pending[i].itable_pos = 1;
                else if (scan_step && x->pending[i].itable_pos)
                    x->pending[i].itable_pos++;
            }
    }
    xfer end = (xfer)o->xfer;
    x->hold = in_pending && end == X_CALL;
    if (end == X_CALL)
        shadow_push(x, o->end_ip);
    /* Where control leaves from decides the next transfer. */
    x->prev = exitu;
    x->prev_xfer = end;
    x->prev_end_ip = o->end_ip;
    x->resumed = false;
    x->unknown_origin = false;
}

void dc_forget_flow(ctx *x)
{
    dc_flush_pending(x);
    x->prev.kind = U_NONE;
    x->prev.p = NULL;
    x->prev_xfer = X_OTHER;
    x->nshadow = 0;
    x->jit_frames = NULL;
    x->jit_code = NULL;
    x->unknown_origin = true;
    x->resumed = false;
}

void dc_gap_open(ctx *x, dc_gap_reason reason, int error, uint64_t offset, uint64_t lost)
{
    pending_gap *g = &x->gap;
    if (g->on) {               /* merge: the first cause stays */
        g->ev.lost_bytes += lost;
        return;
    }
    memset(&g->ev, 0, sizeof g->ev);
    g->on = true;
    g->ev.kind = DC_GAP;
    g->ev.reason = reason;
    g->ev.error = error;
    g->ev.tsc = x->tsc;
    g->ev.offset = offset;
    g->ev.lost_bytes = lost;
    g->ev.opcode = -1;
    g->ev.raw = -1;
    g->ev.bci = -1;
    x->st->gaps[reason]++;
}

void dc_gap_close(ctx *x, uint64_t resume_offset, uint64_t resume_tsc)
{
    pending_gap *g = &x->gap;
    if (!g->on)
        return;
    g->on = false;
    g->ev.end_offset = resume_offset;
    g->ev.end_tsc = resume_tsc;
    if (resume_offset > g->ev.offset && g->ev.reason != DC_GAP_LOST)
        x->st->skipped_bytes += resume_offset - g->ev.offset;
    dc_event ev = g->ev;
    if (!ev.tsc)
        ev.tsc = resume_tsc ? resume_tsc : 1;  /* emit() must not replace it */
    emit(x, &ev);
}

/* Replays chunk k's ops. */
void dc_apply_chunk(ctx *x, const chunk *k, const dc_output *out)
{
    const op *ops = (const op *)(void *)k->ops->data;
    const run *runs = (const run *)(void *)k->runs->data;
    size_t nb = 0;
    for (guint i = 0; i < k->ops->len && !x->stop; i++) {
        const op *o = &ops[i];
        if (o->tsc)
            x->tsc = o->tsc;
        switch (o->type) {
        case OP_BLOCK:
            x->off = o->off;
            if (out->block && k->blocks && nb < k->blocks->len)
                out->block(&g_array_index(k->blocks, struct pt_block, nb), x->tsc, out->ctx);
            nb++;
            unit exitu = { (ukind)o->ukind, o->u };
            if (i + 1 < k->ops->len && ops[i + 1].type == OP_EXIT) {
                exitu = (unit){ (ukind)ops[i + 1].ukind, ops[i + 1].u };
                i++;
            }
            on_block(x, o, exitu, runs + o->run0);
            break;
        case OP_FORGET:
            dc_forget_flow(x);
            break;
        case OP_GAP_OPEN:
            dc_gap_open(x, (dc_gap_reason)o->ninsn, (int)(int64_t)o->end_ip, o->ip, 0);
            break;
        case OP_SYNC:
            dc_gap_close(x, o->ip, x->tsc);
            break;
        case OP_SEG_END:
            if (x->gap.on)
                x->gap.ev.end_offset = k->seg->end;
            break;
        case OP_OVERFLOW:
            dc_gap_open(x, DC_GAP_OVERFLOW, 0, o->ip, 0);
            dc_gap_close(x, o->ip, x->tsc);
            dc_forget_flow(x);
            break;
        case OP_ENABLE:
            x->resumed = true;
            x->unknown_origin = false;
            break;
        default:
            break;
        }
    }
}
