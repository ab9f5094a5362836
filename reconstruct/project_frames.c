/* The projector's frames and history (project_int.h): the arena they live
 * in, pushes and pops, and the stack earlier segments ended with. */
#include "reconstruct/project_int.h"

arena *pj_arena_new(void)
{
    arena *a = g_new0(arena, 1);
    a->blocks = g_ptr_array_new_with_free_func(g_free);
    a->spare = g_ptr_array_new_with_free_func(g_free);
    a->used = ARENA_BLOCK;
    return a;
}

void pj_arena_free(arena *a)
{
    if (!a)
        return;
    g_ptr_array_free(a->blocks, TRUE);
    g_ptr_array_free(a->spare, TRUE);
    g_free(a);
}

/* Frees old, whose contents are no longer needed, keeping up to a
 * compaction's worth of its blocks in a for reuse: a long projection
 * compacts every ARENA_COMPACT bytes, and blocks handed back to the system
 * and taken again cost a page fault per page each time. */
void pj_arena_recycle(arena *a, arena *old)
{
    GPtrArray *from[2] = { old->blocks, old->spare };
    for (int i = 0; i < 2; i++)
        while (from[i]->len && a->spare->len < ARENA_COMPACT / ARENA_BLOCK + 1)
            g_ptr_array_add(a->spare, g_ptr_array_steal_index_fast(from[i], from[i]->len - 1));
    pj_arena_free(old);
}

void *pj_arena_alloc(arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (a->used + n > ARENA_BLOCK) {
        g_ptr_array_add(a->blocks, a->spare->len
                                       ? g_ptr_array_steal_index_fast(a->spare, a->spare->len - 1)
                                       : g_malloc(ARENA_BLOCK));
        a->used = 0;
    }
    void *p = (char *)g_ptr_array_index(a->blocks, a->blocks->len - 1) + a->used;
    a->used += n;
    a->total += n;
    return p;
}

/* ------------------------------------------------------------------------ */

frame *pj_frame_copy(rp_projector *r, const frame *f)
{
    frame *n = pj_arena_alloc(r->a, sizeof *n);
    *n = *f;
    return n;
}

const frame *pj_push(rp_projector *r, const frame *caller, frame f)
{
    f.caller = caller;
    f.depth = caller ? caller->depth + 1 : 1;
    return pj_frame_copy(r, &f);
}

frame pj_interp_frame(uint32_t method, uint32_t insn, uint64_t id)
{
    return (frame){ .kind = FR_INTERP, .method = method, .insn = insn, .last = NONE,
                    .returned = NONE, .method_id = id };
}

frame pj_unknown_frame(void)
{
    return (frame){ .kind = FR_UNKNOWN, .method = NONE, .insn = NONE, .last = NONE,
                    .returned = NONE };
}

const hist *pj_record(rp_projector *r, const hist *prev, fl_kind kind, uint64_t method_id,
                      int32_t bci, int32_t opcode, uint32_t flags)
{
    hist *h = pj_arena_alloc(r->a, sizeof *h);
    *h = (hist){ .prev = prev, .len = prev ? prev->len + 1 : 1, .kind = (uint8_t)kind,
                 .flags = flags, .bci = bci, .opcode = opcode, .method_id = method_id,
                 .tsc = r->ev->tsc, .offset = r->ev->offset };
    return h;
}

uint64_t pj_method_id_of(const rp_projector *r, uint32_t method)
{
    const rc_method *m = method == NONE ? NULL : rc_method_at(r->p, method);
    return m ? m->id : 0;
}

void pj_add(rp_projector *r, const frame *top, const hist *h)
{
    hyp x = { top, h, r->doubt };
    g_array_append_val(r->next, x);
}

/* Compiled frame f calls an arraycopy stub. C2 and C1 compile
 * System.arraycopy (and Unsafe's copies) into such a call, or into a copy
 * of their own, with no frame or scope for the method: the scope at the
 * call is the caller's, at its invoke. Where that invoke names a native
 * method, the stub call is that method's call (FL_F_INFERRED). A stub that
 * jumps on into another (jbyte_arraycopy into jbyte_disjoint_arraycopy) is
 * one call. Copies compiled without a stub call are not seen. */
const hist *pj_infer_intrinsic_call(rp_projector *r, const frame *f, const hist *h)
{
    const rc_method *m = f->method == NONE ? NULL : rc_method_at(r->p, f->method);
    if (!m || !m->code || f->bci < 0)
        return h;
    const rc_method *const *t;
    bool open = false;
    if (rc_call_targets(r->p, m, (uint32_t)f->bci, &t, &open) != 1 ||
        !(t[0]->access & JVM_ACC_NATIVE))
        return h;
    const uint32_t fl = FL_F_COMPILED | FL_F_INLINED | FL_F_INFERRED;
    h = pj_record(r, h, FL_CALL, t[0]->id, f->bci, -1, fl);
    return pj_record(r, h, FL_RETURN, t[0]->id, -1, -1, fl);
}

/* Pops the top frame, recording the return of a method frame
 * (FL_F_EXCEPTION: it is unwound); returns its caller. */
const frame *pj_pop(rp_projector *r, const frame *f, const hist **h, uint32_t flags)
{
    if (f->kind == FR_INTERP || f->kind == FR_COMPILED || f->kind == FR_OPAQUE) {
        uint32_t fl = flags | (f->kind == FR_COMPILED ? FL_F_COMPILED : 0) |
                      (f->kind == FR_COMPILED && f->inline_depth > 1 ? FL_F_INLINED : 0);
        *h = pj_record(r, *h, FL_RETURN, f->method_id, -1, -1, fl);
    }
    return f->caller;
}

/* After the frame of `method` returned: the new top learns it. */
const frame *pj_returned_to(rp_projector *r, const frame *caller, uint32_t method)
{
    if (!caller) {
        frame u = pj_unknown_frame();
        u.after_return = true;
        u.returned = method;
        return pj_push(r, NULL, u);
    }
    if (caller->kind == FR_INTERP && caller->calling) {
        frame c = *caller;
        c.calling = false;
        return pj_frame_copy(r, &c);
    }
    /* The VM's call returns to the VM, inside the instruction that made it
     * call: that frame is as it was (an invoke in progress stays so). */
    if (caller->kind == FR_VMCALL && caller->calling) {
        const frame *below = caller->caller;
        if (below && below->kind == FR_INTERP)
            return below;
        /* (an unknown frame: at any instruction, not after an invoke) */
        return below && below->kind == FR_UNKNOWN ? below : pj_returned_to(r, below, NONE);
    }
    if (caller->kind == FR_UNKNOWN) {
        frame u = *caller;
        u.after_return = true;
        u.returned = method;
        return pj_frame_copy(r, &u);
    }
    return caller;
}

/* ------------------------------------------------------------------------ */
/* The stack a segment ended with */

/* Whether frame f may call method `callee` (program index) by one of its
 * invoke instructions (an open target set may call anything). Cached per
 * pair. */
static bool calls_method(rp_projector *r, const frame *f, uint32_t callee)
{
    if ((f->kind != FR_INTERP && f->kind != FR_COMPILED) || f->method == NONE)
        return false;
    uint64_t key = (uint64_t)f->method << 32 | callee;
    gpointer v = g_hash_table_lookup(r->calls_method, &key);
    if (v)
        return GPOINTER_TO_INT(v) == 2;
    const rc_method *m = rc_method_at(r->p, f->method);
    const rc_cfg *g = m ? rc_cfg_get(r->p, m) : NULL;
    bool yes = false;
    for (uint32_t i = 0; g && i < g->ninsn && !yes; i++) {
        if (!jvm_is_invoke(g->op[i]))
            continue;
        const rc_method *const *t;
        bool open = false;
        size_t nt = rc_call_targets_at(r->p, m, i, &t, &open);
        yes = open;
        for (size_t j = 0; j < nt && !yes; j++)
            yes = t[j]->index == callee;
    }
    g_hash_table_insert(r->calls_method, g_memdup2(&key, sizeof key), GINT_TO_POINTER(yes ? 2 : 1));
    return yes;
}

/* Keeps the stack of the hypothesis the segment ended with (top): its
 * frames below the point where the trace stopped being understood are still
 * running when the next segment starts. One stack is kept per thread.
 * - A segment linked to it (a frame at its bottom was found in it, so the
 *   kept frames below that one are its callers) replaces it, if a kept frame
 *   is still under it (the VM's call of the thread's first method counts):
 *   a segment that returned out of all of them (an exception unwound past
 *   every handler the kept frames have, where the trace was misread) did
 *   not link.
 * - A segment never linked ran over some part of it that nothing showed.
 *   Its frames go on top of the innermost kept frame that may call the
 *   outermost of them (calls_method; the kept frames above returned
 *   unseen), or of the whole stack when none may, so that later segments
 *   still find the frames below. A thread's outer frames (its main method)
 *   thus stay known across the thousands of segments of a JIT trace. */
void pj_before_save(rp_projector *r, const frame *top)
{
    g_ptr_array_set_size(r->before_chain, 0);
    GPtrArray *v = r->save_chain;       /* the segment's frames, innermost first */
    g_ptr_array_set_size(v, 0);
    for (const frame *f = top; f; f = f->caller)
        g_ptr_array_add(v, (gpointer)f);
    guint n = v->len;
    /* its bottom frames that are kept ones or unknown */
    guint nb = 0;
    bool linked = false;
    for (; nb < n; nb++) {
        const frame *f = g_ptr_array_index(v, n - 1 - nb);
        if (!f->from_before && f->kind != FR_UNKNOWN)
            break;
        linked = linked || (f->from_before && f->kind != FR_UNKNOWN);
    }
    guint at = linked ? 0 : r->before->len, skip = 0;
    if (!linked && at > 0) {
        skip = nb;
        const frame *outer = skip < n ? g_ptr_array_index(v, n - 1 - skip) : NULL;
        guint a = at;
        while (outer && outer->method != NONE && a > 0 &&
               !calls_method(r, &g_array_index(r->before, frame, a - 1), outer->method))
            a--;
        if (a > 0)
            at = a;
    }
    if (at + n - skip > BEFORE_MAX) {
        at = 0;                 /* the kept frames go */
        skip = 0;
    }
    g_array_set_size(r->before, at + n - skip);
    for (guint i = 0; i < n - skip; i++) {
        frame c = *(const frame *)g_ptr_array_index(v, i);
        c.caller = NULL;
        c.from_before = true;
        g_array_index(r->before, frame, at + n - skip - 1 - i) = c;
    }
}

void pj_before_forget(rp_projector *r)
{
    g_array_set_size(r->before, 0);
    g_ptr_array_set_size(r->before_chain, 0);
}

/* Saved frame k in the arena, its saved callers linked below it. */
const frame *pj_before_frame(rp_projector *r, guint k)
{
    if (r->before_chain->len < r->before->len)
        g_ptr_array_set_size(r->before_chain, r->before->len);
    for (guint i = 0; i <= k; i++)
        if (!g_ptr_array_index(r->before_chain, i))
            r->before_chain->pdata[i] = (gpointer)pj_push(
                   r, i > 0 ? g_ptr_array_index(r->before_chain, i - 1) : NULL,
                   g_array_index(r->before, frame, i));
    return g_ptr_array_index(r->before_chain, k);
}

/* The innermost saved frame that runs `method` interpreted, or with `code`
 * (not NULL) that compiled version; -1: none. */
int pj_before_find(const rp_projector *r, uint32_t method, const void *code)
{
    for (guint i = r->before->len; i-- > 0;) {
        const frame *f = &g_array_index(r->before, frame, i);
        if (code ? f->kind == FR_COMPILED && f->code == code
                 : f->kind == FR_INTERP && f->method == method)
            return (int)i;
    }
    return -1;
}

/* Saved frame k and its callers put under the segment: frames found
 * running, announced as the segment's other context frames are
 * (FL_F_CONTEXT), outermost first. */
const hist *pj_record_before(rp_projector *r, const hist *h, guint k)
{
    for (guint i = 0; i <= k; i++) {
        const frame *f = &g_array_index(r->before, frame, i);
        if (f->kind == FR_INTERP || f->kind == FR_COMPILED || f->kind == FR_OPAQUE)
            h = pj_record(r, h, FL_CALL, f->method_id, -1, -1,
                          FL_F_CONTEXT | (f->kind == FR_COMPILED ? FL_F_COMPILED : 0) |
                              (f->kind == FR_COMPILED && f->inline_depth > 1 ? FL_F_INLINED : 0));
    }
    return h;
}
