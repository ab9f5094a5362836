/* Projection of decoded events onto the program (see project.h): the
 * hypothesis set, each event stepping it, and the flow it emits. */
#include "reconstruct/project_int.h"

static void step(rp_projector *r, const hyp *x, const dc_event *e)
{
    const frame *f = x->top;
    const hist *h = x->h;
    r->doubt = x->doubt;
    if ((e->flags & DC_F_BY_CALL) && f && f->kind == FR_COMPILED && !f->calling) {
        /* a call out of compiled code: its frame waits for the return */
        frame c = *f;
        c.calling = true;
        f = pj_frame_copy(r, &c);
    }
    switch (e->kind) {
    case DC_BYTECODE:
        pj_step_bc(r, f, h, e);
        return;
    case DC_METHOD_ENTRY:
        pj_step_entry(r, f, h, e);
        return;
    case DC_INTERP_OTHER:
        if (pj_entry_kind_of(e->desc) != EK_NONE)
            pj_step_entry(r, f, h, e);
        else
            pj_add(r, f, h);
        return;
    case DC_INTERP_RETURN:
        /* back in an interpreted frame: compiled or native callees are done */
        while (f && !f->throwing && (f->kind == FR_COMPILED || f->kind == FR_OPAQUE))
            f = pj_returned_to(r, pj_pop(r, f, &h, 0), NONE);
        pj_add(r, f, h);
        return;
    case DC_THROW:
    case DC_EXCEPTION: {
        while (f && (f->kind == FR_COMPILED || f->kind == FR_OPAQUE))
            f = pj_pop(r, f, &h, FL_F_EXCEPTION);
        if (f && f->kind == FR_INTERP && f->insn != ANY && !f->throwing) {
            frame n = *f;
            n.throwing = true;
            n.calling = false;
            f = pj_frame_copy(r, &n);
        }
        pj_add(r, f, h);
        return;
    }
    case DC_STUB:
        if (f && f->kind == FR_COMPILED && (e->flags & DC_F_BY_CALL) && e->desc &&
            strstr(e->desc, "arraycopy"))
            h = pj_infer_intrinsic_call(r, f, h);
        /* The VM calls Java through the call stub: the stub is entered from
         * outside the traced code (or called); a jump or return into it is
         * the Java method returning to it. */
        if (e->desc && !strcmp(e->desc, "call_stub") &&
            (e->flags & (DC_F_RESUMED | DC_F_BY_CALL)) &&
            !(f && f->kind == FR_VMCALL && !f->calling)) {
            frame v = { .kind = FR_VMCALL, .method = NONE, .insn = NONE, .last = NONE,
                        .returned = NONE };
            f = pj_push(r, f, v);
        } else if (e->desc && !strcmp(e->desc, "call_stub") && (e->flags & DC_F_BY_RETURN) &&
                   f && (f->kind == FR_COMPILED || f->kind == FR_OPAQUE)) {
            /* A compiled method the VM called returned to it: its frames go,
             * and the VM goes back to the instruction that called it. */
            while (f && (f->kind == FR_COMPILED || f->kind == FR_OPAQUE))
                f = pj_pop(r, f, &h, 0);
            if (f && f->kind == FR_VMCALL && f->calling)
                f = pj_returned_to(r, f, NONE);
        } else if (e->desc && !strcmp(e->desc, "call_stub") && f && f->kind == FR_UNKNOWN &&
                   f->after_return) {
            /* A method the VM called returned to it, and the VM goes back to
             * the instruction that called it (a new, a getstatic, ...), not
             * to an invoke: the next bytecode may follow any instruction. */
            frame u = *f;
            u.after_return = false;
            u.returned = NONE;
            f = pj_frame_copy(r, &u);
        }
        pj_add(r, f, h);
        return;
    case DC_JIT_ENTER:
        pj_step_jit_enter(r, f, h, e);
        return;
    case DC_JIT:
    case DC_INLINE_CALL:
    case DC_INLINE_RETURN:
    case DC_JIT_BYTECODE:
        pj_step_jit(r, f, h, e);
        return;
    case DC_DEOPT:
        pj_step_deopt(r, f, h);
        return;
    case DC_UNWOUND: {
        /* an exception unwound the compiled activation on top: its frames
         * (with anything it had called and the trace did not show return) */
        const frame *g = f;
        while (g && g->kind != FR_UNKNOWN && !(g->kind == FR_COMPILED && g->code == e->code))
            g = g->caller;
        if (g && g->kind == FR_COMPILED) {
            while (f != g)
                f = pj_pop(r, f, &h, FL_F_EXCEPTION);
            while (f && f->kind == FR_COMPILED && f->code == e->code && f->inline_depth > 1)
                f = pj_pop(r, f, &h, FL_F_EXCEPTION);
            if (f && f->kind == FR_COMPILED && f->code == e->code)
                f = pj_pop(r, f, &h, FL_F_EXCEPTION);
        }
        pj_add(r, f, h);
        return;
    }
    default:
        pj_add(r, f, h);
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* Output */

static int emit(rp_projector *r, const fl_event *ev)
{
    if (r->stop)
        return r->stop;
    r->stop = r->sink(ev, r->ctx);
    return r->stop;
}

static void emit_history(rp_projector *r, const hist *h)
{
    GPtrArray *v = g_ptr_array_new();
    for (; h; h = h->prev)
        g_ptr_array_add(v, (gpointer)h);
    for (guint k = v->len; k-- > 0;) {
        const hist *x = g_ptr_array_index(v, k);
        fl_event ev = { .kind = x->kind, .origin = FL_DECODED, .flags = x->flags, .tid = r->tid,
                        .tsc = x->tsc, .method_id = x->method_id, .bci = x->bci,
                        .opcode = x->opcode, .count = x->kind == FL_BYTECODE ? 1 : 0,
                        .offset = x->offset };
        if (x->kind == FL_BYTECODE && (x->flags & FL_F_COMPILED)) {
            /* compiled bytecodes: counted by reconstruct/compiled.h */
        } else if (x->kind == FL_BYTECODE) {
            if (x->method_id)
                r->st.placed++;
            else
                r->st.unplaced++;
        } else if (x->kind == FL_CALL && x->method_id) {
            r->st.calls_inferred += (x->flags & FL_F_INFERRED) != 0;
            const rc_method *m = rc_method_by_id(r->p, x->method_id);
            if (m && !strcmp(m->name, "<init>"))
                g_hash_table_add(r->instantiated, (gpointer)m->klass);
        }
        emit(r, &ev);
    }
    g_ptr_array_free(v, TRUE);
    r->pending = 0;
}

static void segment_begin(rp_projector *r, uint64_t tsc)
{
    fl_event ev = { .kind = FL_SEGMENT, .origin = FL_DECODED, .tid = r->tid, .tsc = tsc,
                    .seq = r->seg_seq++, .bci = -1, .opcode = -1,
                    .flags = r->after_gap ? FL_F_AFTER_GAP : 0 };
    if (r->after_gap) {
        ev.gap_offset = r->gap_offset;
        ev.resume_offset = r->resume_offset;
        ev.lost_bytes = r->lost_bytes;
        if (r->lost_counted)
            ev.flags |= FL_F_LOST_COUNTED;
    }
    r->after_gap = false;
    emit(r, &ev);
    r->st.segments++;
    r->seg_open = true;
    r->seg_chosen = false;
    g_array_set_size(r->cur, 0);
    hyp x = { pj_push(r, NULL, pj_unknown_frame()), NULL, 0 };
    g_array_append_val(r->cur, x);
}

/* The least doubtful hypothesis (the first among equals). */
static guint least_doubtful(const rp_projector *r)
{
    guint best = 0;
    for (guint i = 1; i < r->cur->len; i++)
        if (g_array_index(r->cur, hyp, i).doubt < g_array_index(r->cur, hyp, best).doubt)
            best = i;
    return best;
}

/* Emits the history of the least doubtful hypothesis; the set becomes that
 * one. */
static void choose(rp_projector *r)
{
    if (!r->cur->len)
        return;
    if (r->cur->len > 1) {
        r->st.choices++;
        r->seg_chosen = true;
        g_array_index(r->cur, hyp, 0) = g_array_index(r->cur, hyp, least_doubtful(r));
        g_array_set_size(r->cur, 1);
    }
    hyp *x = &g_array_index(r->cur, hyp, 0);
    if (x->h)
        emit_history(r, x->h);
    x->h = NULL;
}

/* Ends the segment; `keep`: its stack goes on under the next one. */
static void segment_end(rp_projector *r, bool unresolved, bool keep)
{
    if (!r->seg_open)
        return;
    choose(r);
    if (keep && r->cur->len)
        pj_before_save(r, g_array_index(r->cur, hyp, 0).top);
    else
        pj_before_forget(r);
    if (unresolved)
        r->st.segments_unresolved++;
    else if (r->seg_chosen)
        r->st.segments_chosen++;
    else
        r->st.segments_unique++;
    r->seg_open = false;
}

/* Copies of the chain from f (callers) or h (earlier records), made once
 * each: a copied original, in the arena about to be dropped, is overwritten
 * with the address of its copy (depth or len MOVED, caller or prev the
 * copy), so that shared frames and records stay shared without a table. A
 * history keeps its records after the first `cut`, renumbered from 1.
 * Iterative: chains are long. */
#define MOVED UINT32_MAX

static const frame *copy_frames(rp_projector *r, const frame *f, GPtrArray *scratch)
{
    g_ptr_array_set_size(scratch, 0);
    const frame *below = NULL;
    for (; f; f = f->caller) {
        if (f->depth == MOVED) {
            below = f->caller;
            break;
        }
        g_ptr_array_add(scratch, (gpointer)f);
    }
    for (guint k = scratch->len; k-- > 0;) {
        frame *o = g_ptr_array_index(scratch, k), *n = pj_frame_copy(r, o);
        n->caller = below;
        o->depth = MOVED;
        o->caller = n;
        below = n;
    }
    return below;
}

static const hist *copy_history(rp_projector *r, const hist *h, uint32_t cut, GPtrArray *scratch)
{
    g_ptr_array_set_size(scratch, 0);
    const hist *before = NULL;
    for (; h; h = h->prev) {
        if (h->len == MOVED) {
            before = h->prev;
            break;
        }
        if (h->len <= cut)
            break;
        g_ptr_array_add(scratch, (gpointer)h);
    }
    for (guint k = scratch->len; k-- > 0;) {
        hist *o = g_ptr_array_index(scratch, k), *n = pj_arena_alloc(r->a, sizeof *n);
        *n = *o;
        n->prev = before;
        n->len = o->len - cut;
        o->len = MOVED;
        o->prev = n;
        before = n;
    }
    return before;
}

/* Copies what the live hypotheses still need (their stacks, and their
 * history after its first `cut` records, which were emitted) into a fresh
 * arena. Shared frames and records stay shared. */
static void rebuild_arena(rp_projector *r, uint32_t cut)
{
    arena *old = r->a;
    r->a = pj_arena_new();
    g_hash_table_remove_all(r->rebound);
    g_ptr_array_set_size(r->before_chain, 0);
    GPtrArray *scratch = g_ptr_array_new();
    for (guint i = 0; i < r->cur->len; i++) {
        hyp *x = &g_array_index(r->cur, hyp, i);
        x->top = copy_frames(r, x->top, scratch);
        x->h = copy_history(r, x->h, cut, scratch);
    }
    g_ptr_array_free(scratch, TRUE);
    pj_arena_recycle(r->a, old);
}

/* Copies the single live stack into a fresh arena. */
static void compact(rp_projector *r)
{
    if (r->cur->len != 1 || r->a->total < ARENA_COMPACT || g_array_index(r->cur, hyp, 0).h)
        return;
    rebuild_arena(r, 0);
}

/* A long ambiguity (in xalan, a frame near the bottom of the stack that
 * only returns at the end) has outgrown its bounds (MAX_PENDING,
 * ARENA_CHOOSE): the least doubtful path is chosen. The paths that parted
 * from it in the later half of the events held are kept with it: they are
 * ambiguities on top of the same choice that the trace is likely to settle
 * soon (XNodeSet.str and xstr run the same bytecodes up to a call, and
 * differ once it returns). The records all kept paths share are emitted.
 * When what is left would still take half the bound, the chosen path
 * alone is kept. */
static void choose_forced(rp_projector *r)
{
    guint best_i = least_doubtful(r), best_out = 0;
    const hist *b = g_array_index(r->cur, hyp, best_i).h;
    uint32_t now = b ? b->len : 0, horizon = now / 2;
    if (now < 2) {
        choose(r);
        return;
    }
    /* the chosen path's records after the horizon, by position */
    const hist **at = g_new(const hist *, now - horizon);
    for (const hist *x = b; x && x->len > horizon; x = x->prev)
        at[x->len - horizon - 1] = x;
    uint32_t common = now;     /* the records every kept path shares */
    guint out = 0;
    for (guint i = 0; i < r->cur->len; i++) {
        hyp x = g_array_index(r->cur, hyp, i);
        uint32_t met = 0;
        for (const hist *y = x.h; y && y->len > horizon && !met; y = y->prev)
            if (y->len <= now && at[y->len - horizon - 1] == y)
                met = y->len;
        if (i != best_i && !met)
            continue;
        if (i == best_i)
            best_out = out;
        else if (met < common)
            common = met;
        g_array_index(r->cur, hyp, out++) = x;
    }
    g_free((gpointer)at);
    r->st.choices++;
    r->seg_chosen = true;
    if (out == 1 || (now - common) * out * sizeof(hist) > ARENA_CHOOSE / 2) {
        g_array_index(r->cur, hyp, 0) = g_array_index(r->cur, hyp, best_out);
        g_array_set_size(r->cur, 1);
        choose(r);
        return;
    }
    g_array_set_size(r->cur, out);
    const hist *shared = b;
    while (shared->len > common)
        shared = shared->prev;
    emit_history(r, shared);
    r->pending = now - common;
    rebuild_arena(r, common);
}

static bool same_state(const frame *a, const frame *b)
{
    return a == b ||
           (a && b && a->caller == b->caller && a->kind == b->kind && a->method == b->method &&
            a->insn == b->insn && a->last == b->last && a->calling == b->calling &&
            a->throwing == b->throwing && a->code == b->code && a->bci == b->bci &&
            a->inline_depth == b->inline_depth && a->method_id == b->method_id &&
            a->after_return == b->after_return && a->returned == b->returned &&
            a->recv == b->recv && a->this_call == b->this_call &&
            a->from_before == b->from_before);
}

static guint frame_hash(gconstpointer p)
{
    /* every field same_state compares, each mixed in by a multiply-xorshift
     * step, so that hypotheses differing in one small field do not collide */
    const frame *f = p;
    const uint64_t fields[] = {
        (uint64_t)(uintptr_t)f->caller,
        (uint64_t)f->kind | (uint64_t)f->calling << 8 | (uint64_t)f->throwing << 9 |
            (uint64_t)f->after_return << 10 | (uint64_t)f->inline_depth << 32,
        (uint64_t)f->method << 32 | f->insn,
        (uint64_t)f->last << 32 | f->returned,
        (uint64_t)(uint32_t)f->bci,
        f->method_id,
        (uint64_t)(uintptr_t)f->code,
        (uint64_t)(uintptr_t)f->recv | f->this_call | (uint64_t)f->from_before << 1,
    };
    uint64_t h = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        h = (h ^ fields[i]) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return (guint)(h ^ (h >> 32));
}

static gboolean frame_equal(gconstpointer a, gconstpointer b)
{
    return same_state(a, b);
}

/* Of two hypotheses in the same state, the one kept: the less doubtful,
 * else the first (deterministic order). */
static void keep_better(hyp *kept, const hyp *x)
{
    if (x->doubt < kept->doubt)
        *kept = *x;
}

/* Hypotheses with the same stack behave the same from now on: keep one
 * (keep_better). Returns how many that got there by another path were
 * dropped: each is a choice the trace could not make (e.g. switch arms with
 * the same bytecodes that join again). */
static size_t dedup(GArray *v)
{
    if (v->len < 2)
        return 0;
    guint out = 0;
    size_t merged = 0;
    if (v->len <= 8) {
        for (guint i = 0; i < v->len; i++) {
            hyp x = g_array_index(v, hyp, i);
            bool seen = false;
            for (guint j = 0; j < out && !seen; j++) {
                hyp *y = &g_array_index(v, hyp, j);
                seen = same_state(y->top, x.top);
                if (seen && y->h != x.h)
                    merged++;
                if (seen)
                    keep_better(y, &x);
            }
            if (!seen)
                g_array_index(v, hyp, out++) = x;
        }
    } else {
        /* frame -> index + 1 of the hypothesis kept for that state */
        GHashTable *seen = g_hash_table_new(frame_hash, frame_equal);
        for (guint i = 0; i < v->len; i++) {
            hyp x = g_array_index(v, hyp, i);
            guint at = GPOINTER_TO_UINT(g_hash_table_lookup(seen, x.top));
            if (at) {
                merged++;
                keep_better(&g_array_index(v, hyp, at - 1), &x);
                continue;
            }
            g_hash_table_insert(seen, (gpointer)x.top, GUINT_TO_POINTER(out + 1));
            g_array_index(v, hyp, out++) = x;
        }
        g_hash_table_destroy(seen);
    }
    g_array_set_size(v, out);
    return merged;
}

static void process(rp_projector *r, const dc_event *e)
{
    r->st.events++;
    if (e->kind == DC_BYTECODE) {
        r->st.bytecodes++;
        r->call_itable_pos = e->opcode == JVM_INVOKEINTERFACE ? e->itable_pos : 0;
    }
    if (e->kind == DC_GAP) {
        /* Where the decoder could not follow code, it resumed at the next
         * branch target: a few instructions are missing, and the frames
         * below them still run. Where trace was lost, anything may have
         * happened: recovery fills the hole (recover/). */
        segment_end(r, false, e->reason == DC_GAP_DECODE || e->reason == DC_GAP_NOCODE);
        if (!r->after_gap) {
            r->gap_offset = e->offset;
            r->lost_bytes = 0;
            r->lost_counted = true;
        }
        r->resume_offset = e->end_offset;
        r->lost_bytes += e->lost_bytes;
        /* an OVF, or a TRUNCATED record that says nothing of its size */
        if (e->reason == DC_GAP_OVERFLOW || (e->reason == DC_GAP_LOST && !e->lost_bytes))
            r->lost_counted = false;
        r->after_gap = true;
        return;
    }
    if (!r->seg_open)
        segment_begin(r, e->tsc);
    r->ev = e;
    g_array_set_size(r->next, 0);
    g_array_set_size(r->deferred, 0);
    r->defer_doubtful = true;
    for (guint i = 0; i < r->cur->len; i++) {
        r->stepping = i;
        step(r, &g_array_index(r->cur, hyp, i), e);
    }
    r->defer_doubtful = false;
    r->doubtful_pass = true;
    for (guint i = 0; i < r->deferred->len; i++)
        step(r, &g_array_index(r->cur, hyp, g_array_index(r->deferred, guint, i)), e);
    r->doubtful_pass = false;
    size_t merged = dedup(r->next);
    if (merged) {
        r->st.choices += merged;
        r->seg_chosen = true;
    }
    if (r->next->len > MAX_HYP) {
        r->st.capped++;
        g_array_set_size(r->next, MAX_HYP);
    }
    if (!r->next->len) {
        /* nothing explains this event: end the segment where the trace was
         * still understood and start afresh from this event */
        segment_end(r, true, true);
        segment_begin(r, e->tsc);
        g_array_set_size(r->next, 0);
        step(r, &g_array_index(r->cur, hyp, 0), e);
        dedup(r->next);
        if (r->next->len > MAX_HYP)
            g_array_set_size(r->next, MAX_HYP);
        if (!r->next->len) {
            if (e->kind == DC_BYTECODE) {
                fl_event ev = { .kind = FL_BYTECODE, .origin = FL_DECODED, .tid = r->tid,
                                .tsc = e->tsc, .bci = -1, .opcode = e->opcode, .count = 1,
                                .offset = e->offset };
                r->st.unplaced++;
                emit(r, &ev);
            }
            return;     /* the fresh unknown context stays */
        }
    }
    GArray *t = r->cur;
    r->cur = r->next;
    r->next = t;
    if (r->cur->len > r->st.max_hypotheses)
        r->st.max_hypotheses = r->cur->len;
    r->pending++;
    if (r->cur->len == 1)
        choose(r);
    else if (r->pending > MAX_PENDING)
        choose_forced(r);
    else if (r->a->total > ARENA_CHOOSE) {
        if (r->cur->len <= FEW_PATHS)
            rebuild_arena(r, 0);
        if (r->a->total > ARENA_CHOOSE / 2)
            choose_forced(r);
    }
    compact(r);
}

/* ------------------------------------------------------------------------ */

/* The index is needed only where a context is unknown; most threads of a
 * lossless trace start at the call stub, so build it on first use. */
pos_index *pj_index_get(rp_projector *r)
{
    rp_index *x = r->shared;
    g_mutex_lock(&x->lock);
    if (!x->x)
        x->x = pj_index_build(x->p);
    g_mutex_unlock(&x->lock);
    return x->x;
}

static int enqueue(const dc_event *ev, void *vp);

rp_projector *rp_new(rc_program *p, const dm_model *m, rp_index *idx, uint32_t tid, fl_sink sink,
                     void *ctx)
{
    rp_projector *r = g_new0(rp_projector, 1);
    r->p = p;
    r->shared = idx;
    r->tid = tid;
    r->sink = sink;
    r->ctx = ctx;
    r->cur = g_array_new(FALSE, FALSE, sizeof(hyp));
    r->next = g_array_new(FALSE, FALSE, sizeof(hyp));
    r->deferred = g_array_new(FALSE, FALSE, sizeof(guint));
    r->a = pj_arena_new();
    r->entry_memo = g_hash_table_new(g_direct_hash, g_direct_equal);
    r->instantiated = g_hash_table_new(g_direct_hash, g_direct_equal);
    r->rebound = g_hash_table_new(pj_rebind_hash, pj_rebind_equal);
    r->fit_memo = g_ptr_array_new_with_free_func(pj_fit_entry_free);
    r->fit_event = UINT64_MAX;
    r->before = g_array_new(FALSE, FALSE, sizeof(frame));
    r->before_chain = g_ptr_array_new();
    r->save_chain = g_ptr_array_new();
    r->calls_method = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    r->jit = m ? rj_new(p, m, enqueue, r) : NULL;
    return r;
}

static void process_oldest(rp_projector *r)
{
    dc_event e = *pj_queued(r, 0);
    r->ev_slot = 0;
    process(r, &e);
    r->qhead = (r->qhead + 1) % QUEUE;
    r->qlen--;
}

static int enqueue(const dc_event *ev, void *vp)
{
    rp_projector *r = vp;
    if (r->qlen == QUEUE)
        process_oldest(r);
    r->q[(r->qhead + r->qlen) % QUEUE] = *ev;
    r->qlen++;
    return r->stop;
}

int rp_event(const dc_event *ev, void *vp)
{
    rp_projector *r = vp;
    return r->jit ? rj_event(ev, r->jit) : enqueue(ev, r);
}

int rp_finish(rp_projector *r, rp_stats *st)
{
    if (r->jit)
        rj_finish(r->jit);
    while (r->qlen && !r->stop)
        process_oldest(r);
    segment_end(r, false, false);
    if (r->jit) {
        rj_free(r->jit, &r->st.jit);
        r->jit = NULL;
    }
    if (st)
        *st = r->st;
    return r->stop;
}

void rp_free(rp_projector *r)
{
    if (!r)
        return;
    g_array_free(r->cur, TRUE);
    g_array_free(r->next, TRUE);
    g_array_free(r->deferred, TRUE);
    g_hash_table_destroy(r->entry_memo);
    g_hash_table_destroy(r->instantiated);
    if (r->assumed_absent)
        g_hash_table_destroy(r->assumed_absent);
    g_hash_table_destroy(r->rebound);
    g_ptr_array_free(r->fit_memo, TRUE);
    g_array_free(r->before, TRUE);
    g_ptr_array_free(r->before_chain, TRUE);
    g_ptr_array_free(r->save_chain, TRUE);
    g_hash_table_destroy(r->calls_method);
    rj_free(r->jit, NULL);
    pj_arena_free(r->a);
    g_free(r);
}

void rp_stats_add(rp_stats *sum, const rp_stats *s)
{
    sum->events += s->events;
    sum->bytecodes += s->bytecodes;
    sum->placed += s->placed;
    sum->unplaced += s->unplaced;
    sum->segments += s->segments;
    sum->segments_unique += s->segments_unique;
    sum->segments_chosen += s->segments_chosen;
    sum->segments_unresolved += s->segments_unresolved;
    sum->choices += s->choices;
    if (s->max_hypotheses > sum->max_hypotheses)
        sum->max_hypotheses = s->max_hypotheses;
    sum->capped += s->capped;
    sum->receiver_filtered += s->receiver_filtered;
    sum->itable_filtered += s->itable_filtered;
    sum->calls_inferred += s->calls_inferred;
    rj_stats_add(&sum->jit, &s->jit);
}

void rp_track_assumptions(rp_projector *r)
{
    if (!r->assumed_absent)
        r->assumed_absent = g_hash_table_new(g_direct_hash, g_direct_equal);
}

void rp_classes(const rp_projector *r, bool assumed_absent, rp_class_cb cb, void *ctx)
{
    GHashTable *set = assumed_absent ? r->assumed_absent : r->instantiated;
    if (!set)
        return;
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, set);
    while (g_hash_table_iter_next(&it, &key, NULL))
        cb(key, ctx);
}
