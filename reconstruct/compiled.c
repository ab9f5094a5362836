/* Compiled code at the bytecode level (compiled.h): the activations of
 * compiled versions, the decoder's events in, bytecode-level events out. */
#include "reconstruct/compiled_int.h"

void rj_stats_add(rj_stats *sum, const rj_stats *s)
{
    uint64_t *d = (uint64_t *)sum;
    const uint64_t *v = (const uint64_t *)s;
    for (size_t i = 0; i < sizeof *s / sizeof(uint64_t); i++)
        d[i] += v[i];
}

/* ---- events out -------------------------------------------------------------- */

static void out(rj_filter *f, const dc_event *e)
{
    if (f->has_held) {
        f->has_held = false;
        if (!f->stop)
            f->stop = f->next(&f->held, f->next_ctx);
    }
    if (e && !f->stop)
        f->stop = f->next(e, f->next_ctx);
}

/* An event of kind k of act a, with the time and place of ev. */
static dc_event made(const act *a, const dc_event *ev, dc_kind k, uint64_t id, int32_t bci,
                     uint32_t depth)
{
    return (dc_event){ .kind = k, .tsc = ev->tsc, .ip = ev->ip, .offset = ev->offset,
                       .code = a->code, .method_id = id, .bci = bci, .depth = depth,
                       .opcode = -1, .raw = -1, .call_bci = -1 };
}

static void out_call(rj_filter *f, const act *a, const dc_event *ev, const tnode *n,
                     uint32_t flags)
{
    dc_event e = made(a, ev, DC_INLINE_CALL, n->method_id, 0, n->depth);
    e.call_bci = n->site_bci;
    e.flags = flags;
    f->st.inlined_calls += !(flags & DC_F_CONTEXT);
    f->st.estimated_calls += (flags & DC_F_ESTIMATED) != 0;
    out(f, &e);
}

static void out_return(rj_filter *f, const act *a, const dc_event *ev, const tnode *n,
                       uint32_t flags)
{
    dc_event e = made(a, ev, DC_INLINE_RETURN, n->method_id, -1, n->depth - 1);
    e.flags = flags;
    out(f, &e);
}

static void out_position(rj_filter *f, const act *a, const dc_event *ev)
{
    if (a->state == NONE || a->state == START)
        return;
    const tnode *n = jit_state_node(a->t, a->state);
    dc_event e = made(a, ev, DC_JIT, n->method_id,
                      (int32_t)n->g->bci[a->state - n->base], n->depth);
    out(f, &e);
}

/* The call an invoke crossed without a scope made: the callee inlined there
 * without code, or the one method the site can call. */
static void out_inferred(rj_filter *f, const act *a, const dc_event *ev, uint32_t site_state,
                         uint32_t flags)
{
    const tree *t = a->t;
    const tnode *n = jit_state_node(t, site_state);
    uint32_t i = site_state - n->base;
    uint64_t id = 0;
    for (int32_t c = n->first_child; c >= 0 && !id; c = node_at(t, c)->next_sibling)
        if (node_at(t, c)->site == i)
            id = node_at(t, c)->method_id;
    if (!id && n->m) {
        const rc_method *const *tg;
        bool open = false;
        size_t nt = rc_call_targets_at(f->p, n->m, i, &tg, &open);
        if (nt == 1 && !open)
            id = tg[0]->id;
    }
    if (!id) {
        f->st.calls_unknown++;
        return;
    }
    f->st.calls_inferred++;
    f->st.estimated_calls += (flags & DC_F_ESTIMATED) != 0;
    dc_event e = made(a, ev, DC_INLINE_CALL, id, 0, n->depth + 1);
    e.call_bci = (int32_t)n->g->bci[i];
    e.flags = DC_F_INFERRED | flags;
    out(f, &e);
    e.kind = DC_INLINE_RETURN;
    e.bci = -1;
    e.depth = n->depth;
    out(f, &e);
}

/* Emits the walk in f->path from a's position, and moves it to the end. */
void jit_emit_path(rj_filter *f, act *a, const dc_event *ev)
{
    const tree *t = a->t;
    uint32_t prev = a->state;
    if (f->path->len) {
        uint8_t k0 = g_array_index(f->path, step, 0).kind;
        f->st.exceptions += k0 == SK_CATCH || k0 == SK_UNWIND;
    }
    for (guint k = 0; k < f->path->len && !f->stop; k++) {
        const step *st = &g_array_index(f->path, step, k);
        uint32_t fl = st->unsettled ? DC_F_ESTIMATED : 0;
        switch (st->kind) {
        case SK_ENTER: {
            const tnode *cn = jit_state_node(t, st->state);
            if (cn->implicit)
                f->st.calls_inferred++;
            out_call(f, a, ev, cn, fl | (cn->implicit ? DC_F_INFERRED | DC_F_ESTIMATED : 0));
            break;
        }
        case SK_RETURN: {
            const tnode *cn = jit_state_node(t, prev);
            out_return(f, a, ev, cn, fl | (cn->implicit ? DC_F_INFERRED | DC_F_ESTIMATED : 0));
            break;
        }
        case SK_OVER:
            out_inferred(f, a, ev, prev, fl);
            break;
        case SK_CATCH:
            break;
        case SK_UNWIND: {
            /* the frames between the throw and the handler's are unwound */
            uint32_t to = t->node_of[st->state];
            for (int32_t u = (int32_t)t->node_of[prev]; u >= 0 && (uint32_t)u != to;
                 u = node_at(t, u)->parent)
                out_return(f, a, ev, node_at(t, u), fl | DC_F_THROWN);
            break;
        }
        default:
            break;
        }
        const tnode *n = jit_state_node(t, st->state);
        uint32_t i = st->state - n->base;
        dc_event e = made(a, ev, DC_JIT_BYTECODE, n->method_id, (int32_t)n->g->bci[i],
                          n->depth);
        e.opcode = n->g->op[i];
        e.flags = fl | (n->implicit ? DC_F_ESTIMATED : 0);
        out(f, &e);
        f->st.bytecodes++;
        f->st.estimated_bytecodes += e.flags != 0;
        prev = st->state;
    }
    if (f->path->len) {
        a->state = prev;
        a->called = false;
    }
    out_position(f, a, ev);
}

/* The chain of nodes from the root to n (outermost first) into v. */
static size_t chain(const tree *t, int32_t n, int32_t *v, size_t cap)
{
    size_t len = 0;
    for (int32_t k = n; k >= 0 && len < cap; k = node_at(t, k)->parent)
        len++;
    size_t i = len;
    for (int32_t k = n; k >= 0 && i > 0; k = node_at(t, k)->parent)
        v[--i] = k;
    return len;
}

#define CHAIN_MAX 256

/* Moves a to state s without a path: the frames it leaves return, those it
 * enters are announced (flags: DC_F_CONTEXT where they were running before
 * anything was known). */
void jit_jump_to(rj_filter *f, act *a, uint32_t s, const dc_event *ev, uint32_t flags)
{
    const tree *t = a->t;
    int32_t to[CHAIN_MAX], at[CHAIN_MAX];
    size_t nt = chain(t, (int32_t)t->node_of[s], to, CHAIN_MAX);
    size_t na = a->state == NONE || a->state == START
                    ? 1
                    : chain(t, (int32_t)t->node_of[a->state], at, CHAIN_MAX);
    if (na == 1)
        at[0] = 0;
    size_t common = 0;
    while (common < na && common < nt && at[common] == to[common])
        common++;
    for (size_t k = na; k-- > common;)
        out_return(f, a, ev, node_at(t, at[k]), flags & DC_F_CONTEXT ? 0 : DC_F_ESTIMATED);
    for (size_t k = common; k < nt; k++)
        out_call(f, a, ev, node_at(t, to[k]), flags);
    a->state = s;
    a->called = false;
    out_position(f, a, ev);
}

bool jit_in_ring(const act *a, uint32_t s)
{
    for (uint32_t i = 0; i < a->nring && i < PASS_RING; i++)
        if (a->ring[i] == s)
            return true;
    return false;
}

/* The path from a's position to state s through a handler (throwing), or
 * without a loop, or with one where the rules allow: how it got there. */
int jit_reach(rj_filter *f, act *a, uint32_t s, bool throwing, bool loop)
{
    if (jit_walk(f, a->t, a->state, a->called, s, false, throwing))
        return STRAIGHT;
    if (loop && jit_walk(f, a->t, a->state, a->called, s, true, throwing)) {
        a->loop_allowed = false;
        return ROUND_A_LOOP;
    }
    return UNREACHED;
}

/* ---- activations ----------------------------------------------------------- */

/* The record of the instruction at ip in version c: the first with pc > ip
 * (c->npcs when none has). */
static uint32_t record_at(const rj_filter *f, const dm_code *c, uint64_t ip)
{
    const dm_pcrec *r = &f->m->pcs[c->first_pc];
    uint32_t lo = 0, hi = c->npcs;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (r[mid].pc <= ip)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}


static act *top(rj_filter *f)
{
    return f->acts->len ? &g_array_index(f->acts, act, f->acts->len - 1) : NULL;
}

static act *push_act(rj_filter *f, const dm_code *c, uint32_t state)
{
    act a = { .code = c, .t = jit_tree_of(f, c), .state = state };
    if (a.state == START && !node_at(a.t, 0)->g)
        a.state = NONE;
    g_array_append_val(f->acts, a);
    f->st.activations++;
    return top(f);
}

static void pop_act(rj_filter *f) { g_array_set_size(f->acts, f->acts->len - 1); }

/* The top activation makes a call: the pin it leaves from is exact. */
static void call_out(rj_filter *f, act *a)
{
    jit_take_pending(f, a, true);
    a->calling = true;
    a->called = a->state != NONE && a->state != START && jvm_is_invoke(jit_state_op(a->t, a->state));
}

static bool is_nmethod(const dc_event *e)
{
    return e->code && ((const dm_code *)e->code)->kind == DM_CODE_NMETHOD;
}

/* Whether a handler covers state s: in its frame or, at their call sites,
 * in the frames it is inlined into. */
static bool covered(const tree *t, uint32_t s)
{
    uint32_t k = t->node_of[s], i = state_insn(t, s);
    for (;;) {
        const tnode *n = node_at(t, (int32_t)k);
        for (uint32_t e = n->g->first[i]; e < n->g->first[i + 1]; e++)
            if (n->g->edge[e].kind == RC_EDGE_EXCEPTION)
                return true;
        if (n->parent < 0)
            return false;
        i = n->site;
        k = (uint32_t)n->parent;
    }
}

/* An exception dispatched into version c: the activations of other versions
 * above its innermost one were unwound (a handler of c is where it went);
 * of the innermost ones of c (a recursion), one with no handler covering
 * its position is unwound too, unless it is the last of c. DC_UNWOUND tells
 * the projector. false when no activation of c is known. */
static bool catch_in(rj_filter *f, const dm_code *c, dc_event *fwd)
{
    guint k = f->acts->len;
    while (k > 0 && g_array_index(f->acts, act, k - 1).code != c)
        k--;
    if (!k)
        return false;
    while (f->acts->len) {
        act *a = top(f);
        jit_take_pending(f, a, true);
        bool known = a->state != NONE && a->state != START;
        bool below = f->acts->len >= 2 &&
                     g_array_index(f->acts, act, f->acts->len - 2).code == c;
        if (a->code == c && (!known || covered(a->t, a->state) || !below)) {
            a->calling = false;
            a->calls_interp = false;
            a->throwing = known;
            a->backward = false;
            fwd->flags |= DC_F_THROWN;
            return true;
        }
        dc_event u = { .kind = DC_UNWOUND, .tsc = fwd->tsc, .ip = fwd->ip, .offset = fwd->offset,
                       .code = a->code, .opcode = -1, .raw = -1, .bci = -1, .call_bci = -1 };
        out(f, &u);
        f->st.unwound++;
        pop_act(f);
    }
    return false;
}

static void on_enter(rj_filter *f, const dc_event *e)
{
    act *a = top(f);
    const dm_code *c = e->code;
    dc_event fwd = *e;
    if (e->flags & DC_F_BY_RETURN) {
        if (!(e->flags & DC_F_AFTER_CALL) && catch_in(f, c, &fwd)) {
            /* not after the call it made: an exception dispatched to a
             * handler of the version */
            out(f, &fwd);
            return;
        }
        /* back in a caller: the activation on top returned, and any above
         * the caller's that is still there went unseen */
        if (a && !a->calling) {
            jit_finish(f, a, e);
            pop_act(f);
        }
        guint k = f->acts->len;
        while (k > 0 && !(g_array_index(f->acts, act, k - 1).code == c &&
                          g_array_index(f->acts, act, k - 1).calling))
            k--;
        if (k > 0) {
            g_array_set_size(f->acts, k);
            a = top(f);
            a->calling = false;
            a->calls_interp = false;
            a->has_pin = false;
            a->backward = false;
            uint32_t rec = record_at(f, c, e->ip);
            a->slow_path = rec >= c->npcs || a->t->rec_state[rec] < 0;
        } else {
            push_act(f, c, NONE);
        }
        out(f, &fwd);
        return;
    }
    bool at_entry = e->ip - c->vaddr < DM_ENTRY_SPAN;
    /* from a stub dispatching an exception, past the entries: to a handler */
    bool to_handler = !(e->flags & DC_F_BY_CALL) && !at_entry && f->last_kind == DC_STUB &&
                      f->last_stub_dispatches;
    if (a && a->code == c && !a->calling && !to_handler &&
        (!(e->flags & DC_F_BY_CALL) || (e->flags & DC_F_NO_SCOPE))) {
        /* its own static call stub (on the way to an interpreted callee),
         * or back from a stub by a jump */
        if (e->flags & DC_F_BY_CALL)
            call_out(f, a);
        out(f, &fwd);
        return;
    }
    if (a && !a->calling && (e->flags & DC_F_BY_CALL))
        call_out(f, a);
    uint32_t state = START;
    if (!(e->flags & DC_F_BY_CALL) && f->last_kind == DC_BYTECODE) {
        /* the interpreter jumps into an on-stack-replacement version at a
         * loop: the interpreted frame goes on compiled */
        fwd.flags |= DC_F_OSR;
        f->st.osr_entries++;
        state = NONE;
    } else if (!(e->flags & DC_F_BY_CALL) && !at_entry) {
        /* a jump past the entries: to a handler of an activation of the
         * version (an exception), or into code whose activation is not
         * known */
        if (catch_in(f, c, &fwd)) {
            out(f, &fwd);
            return;
        }
        state = NONE;
    } else if (!(e->flags & DC_F_BY_CALL) && f->last_kind != DC_STUB) {
        state = NONE;            /* after the trace resumed, say */
    }
    push_act(f, c, state);
    if ((e->flags & DC_F_BY_CALL) && at_entry) {
        out(f, NULL);
        f->held = fwd;
        f->has_held = true;
        return;
    }
    out(f, &fwd);
}

/* A jump to HotSpot's inline-cache miss handler right after a call entered
 * a version: the check at its unverified entry failed (the receiver's class
 * is not the one the call site cached), so the version never ran. Its
 * activation goes, and the handler is the call's way on (to the receiver's
 * own method, compiled or through the c2i adapter). */
static bool ic_missed(rj_filter *f, dc_event *e)
{
    const dm_code *s = e->code;
    if (!f->has_held || e->kind != DC_STUB || !s || !s->ic_miss || (e->flags & DC_F_BY_CALL))
        return false;
    act *a = top(f);
    if (a && a->code == f->held.code) {
        pop_act(f);
        f->st.activations--;
    }
    f->has_held = false;
    f->st.ic_misses++;
    e->flags = (e->flags & ~(uint32_t)DC_F_BY_JUMP) | DC_F_BY_CALL;
    return true;
}

static void on_scope(rj_filter *f, const dc_event *e)
{
    act *a = top(f);
    const dm_code *c = e->code;
    if (!a || a->code != c || a->calling || c->kind != DM_CODE_NMETHOD)
        return;
    bool backward = (e->flags & DC_F_BACKWARD) != 0;
    if (e->ip == a->last_ip && a->has_pin) {
        /* the same run's other events (inline returns and calls, then the
         * position): one pin */
        if (backward && !a->pending.backward)
            a->pending.back_to = e->ip;
        a->pending.backward = a->pending.backward || backward;
        a->pending.resumed = a->pending.resumed || (e->flags & DC_F_RESUMED);
        return;
    }
    f->st.pins++;
    uint32_t lo = record_at(f, c, e->ip);
    jit_take_pending(f, a, false);
    if (backward)
        a->back_to = e->ip;
    a->backward = a->backward || backward;
    a->last_ip = e->ip;
    if (lo >= c->npcs)
        return;                  /* no scope: the version's stubs */
    int32_t state = a->t->rec_state[lo];
    if (state >= 0 && a->slow_path) {
        a->backward = false;     /* the slow path's way back */
        a->slow_path = false;
    }
    a->pending = (pin){ .rec = lo, .state = state, .backward = a->backward,
                        .back_to = a->backward ? a->back_to : 0, .resumed = (e->flags & DC_F_RESUMED) != 0, .ev = *e };
    a->backward = false;
    a->has_pin = true;
}

int rj_event(const dc_event *ev, void *vp)
{
    rj_filter *f = vp;
    dc_event fwd = *ev;
    const dc_event *e = ic_missed(f, &fwd) ? &fwd : ev;
    act *a = top(f);
    switch (e->kind) {
    case DC_JIT_ENTER:
        if (is_nmethod(e))
            on_enter(f, e);
        else
            out(f, e);
        break;
    case DC_JIT:
    case DC_INLINE_CALL:
    case DC_INLINE_RETURN:
        on_scope(f, e);
        break;
    case DC_GAP:
        g_array_set_size(f->acts, 0);
        out(f, e);
        break;
    case DC_DEOPT: {
        /* the activation that trapped (it called the VM) goes on
         * interpreted, with any above it */
        guint k = f->acts->len;
        while (k > 0 && !g_array_index(f->acts, act, k - 1).calling)
            k--;
        g_array_set_size(f->acts, k > 0 ? k - 1 : (f->acts->len ? f->acts->len - 1 : 0));
        out(f, e);
        break;
    }
    case DC_EXCEPTION:
    case DC_THROW: {
        /* an interpreted frame handles or raises an exception: compiled
         * activations above it were unwound */
        guint k = f->acts->len;
        while (k > 0 && !g_array_index(f->acts, act, k - 1).calls_interp)
            k--;
        g_array_set_size(f->acts, k);
        out(f, e);
        break;
    }
    case DC_METHOD_ENTRY:
    case DC_BYTECODE:
        if (a && a->calling)
            a->calls_interp = true;
        out(f, e);
        break;
    default:
        if (a && !a->calling) {
            if (e->flags & DC_F_BY_CALL) {
                call_out(f, a);
            } else if (e->flags & DC_F_BY_RETURN) {
                jit_finish(f, a, e);
                pop_act(f);
            }
        }
        out(f, e);
        break;
    }
    if (e->kind == DC_STUB)
        f->last_stub_dispatches = e->code && ((const dm_code *)e->code)->dispatches_exceptions;
    f->last_kind = e->kind;
    f->last_flags = e->flags;
    return f->stop;
}

rj_filter *rj_new(rc_program *p, const dm_model *m, dc_sink next, void *next_ctx)
{
    rj_filter *f = g_new0(rj_filter, 1);
    f->p = p;
    f->m = m;
    f->next = next;
    f->next_ctx = next_ctx;
    f->code_fd = m->code_path ? open(m->code_path, O_RDONLY | O_CLOEXEC) : -1;
    f->trees = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, jit_tree_free);
    f->acts = g_array_new(FALSE, FALSE, sizeof(act));
    f->path = g_array_new(FALSE, FALSE, sizeof(step));
    f->succ = g_array_new(FALSE, FALSE, sizeof(next_step));
    f->align = g_new(align_node, (WINDOW + 1) * 2);
    f->jp = jp_new(m);
    return f;
}

int rj_finish(rj_filter *f)
{
    out(f, NULL);
    for (guint k = 0; k < f->acts->len; k++)
        jit_flush_pins(f, &g_array_index(f->acts, act, k));
    return f->stop;
}

void rj_free(rj_filter *f, rj_stats *st)
{
    if (!f)
        return;
    if (st)
        *st = f->st;
    if (f->code_fd >= 0)
        close(f->code_fd);
    jp_free(f->jp);
    g_hash_table_destroy(f->trees);
    g_array_free(f->acts, TRUE);
    g_array_free(f->path, TRUE);
    g_array_free(f->succ, TRUE);
    g_free(f->align);
    g_free(f->seen);
    g_free(f->from);
    g_free(f->queue);
    g_free(f->how);
    g_free(f->dist);
    g_free(f->cnt);
    g_free(f->fwd);
    g_free(f->bwd);
    g_free(f);
}
