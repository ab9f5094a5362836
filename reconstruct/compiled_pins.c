/* Pins a compiled version leaves (compiled_int.h): passes of unrolled
 * loops, and C2's approximate pins aligned to paths. */
#include "reconstruct/compiled_int.h"

/* ---- unrolled loops -----------------------------------------------------------
 *
 * C2 unrolls a counted loop into copies of its body that may share PC
 * records, so the pins of a pass can show fewer iterations than it ran.
 * The machine code says how many: the loop step (jp_loop_step) over the
 * stride of the bytecode loop's iinc. Each jump back closes a pass; the
 * iterations its pins did not show go round the loop from the position. */
#define UNROLL_MAX 64            /* C2 unrolls by powers of two, vector loops the most */

/* The constant of the one iinc on the shortest way round from s back to s;
 * 0 when there is none or more than one. */
static int32_t loop_stride(rj_filter *f, act *a, uint32_t s)
{
    if (!jit_walk_round(f, a->t, s, false))
        return 0;
    int32_t c = 0;
    for (guint k = 0; k < f->path->len; k++) {
        uint32_t x = g_array_index(f->path, step, k).state;
        const tnode *n = jit_state_node(a->t, x);
        if (!n->m || !n->m->code)
            continue;
        uint32_t bci = n->g->bci[x - n->base];
        const uint8_t *code = n->m->code;
        int32_t v;
        if (bci + 2 < n->m->code_len && code[bci] == JVM_IINC)
            v = (int8_t)code[bci + 2];
        else if (bci + 5 < n->m->code_len && code[bci] == JVM_WIDE && code[bci + 1] == JVM_IINC)
            v = (int16_t)(code[bci + 4] << 8 | code[bci + 5]);
        else
            continue;
        if (c)
            return 0;
        c = v;
    }
    return c;
}

/* The iterations a pass of the loop that p's jump back went to runs; 0
 * when the code does not say. */
static uint32_t pass_iterations(rj_filter *f, act *a, const pin *p)
{
    if (a->t->in_order || !p->back_to || !f->jp || p->state < 0)
        return 0;
    int64_t machine = jp_loop_step(f->jp, a->code, p->back_to);
    if (!machine)
        return 0;
    int32_t c = loop_stride(f, a, (uint32_t)p->state);
    if (!c || machine % c)
        return 0;
    int64_t k = machine / c;
    return k >= 2 && k <= UNROLL_MAX && !(k & (k - 1)) ? (uint32_t)k : 0;
}

/* A jump back closed a pass: the iterations of the pass that its pins did
 * not show go round the loop at the position, estimated (no pin says which
 * way they went); the next pass runs `iters`. */
static void close_pass(rj_filter *f, act *a, const dc_event *ev, uint32_t iters)
{
    uint32_t k = a->pass_iters ? a->pass_iters : iters;
    if (k) {
        f->st.unrolled_passes++;
        if (a->pass_loops < k && a->state != NONE && a->state != START &&
            jit_walk_round(f, a->t, a->state, a->called)) {
            for (guint j = 0; j < f->path->len; j++)
                g_array_index(f->path, step, j).unsettled = true;
            for (uint32_t i = a->pass_loops; i < k && !f->stop; i++)
                jit_emit_path(f, a, ev);
            f->st.unrolled_iterations += k - a->pass_loops;
        }
    }
    a->pass_loops = 0;
    a->pass_iters = iters;
}

/* Takes pin p of a: exact pins are reached by some path or jumped to,
 * approximate ones are followed only where the rules allow (compiled.h).
 * A jump back in the machine code allows one loop in the bytecode path,
 * now or at a later pin: where the machine code tests a loop's condition at
 * its bottom and the bytecode at its top, the machine's jump back comes a
 * pin before the bytecode's. After an exception was dispatched from the
 * position (or the trace resumed after a fault), the path goes through a
 * handler covering it. */
static void take_pin(rj_filter *f, act *a, const pin *p, bool exact)
{
    if (p->state < 0)
        return;
    uint32_t s = (uint32_t)p->state;
    if (p->backward) {
        a->loop_allowed = true;
        a->nring = 0;
    }
    bool throwing = a->throwing;
    bool back = p->backward || a->jumped_back;
    a->throwing = false;
    /* (a scope met again in the pass: C2 code only, which unrolls) */
    bool loop = exact || a->loop_allowed || (!a->t->in_order && s != a->state && jit_in_ring(a, s));
    int how = UNREACHED;
    if (a->state == NONE) {
        jit_jump_to(f, a, s, &p->ev, DC_F_CONTEXT);
    } else if (a->state == START && throwing) {
        f->st.resyncs++;
        jit_jump_to(f, a, s, &p->ev, DC_F_ESTIMATED);
    } else if (throwing && jit_reach(f, a, s, true, loop)) {
        jit_emit_path(f, a, &p->ev);
    } else if (a->state == s && !back) {
        /* still there (a loop inside one record shows as a jump back); or
         * back where a trap left it with no handler on the way (a safepoint
         * poll, not an exception): the loop a jump back allows is kept */
    } else if ((how = jit_reach(f, a, s, false, loop)) ||
                   (p->resumed && a->state != START && (how = jit_reach(f, a, s, true, loop)))) {
        jit_emit_path(f, a, &p->ev);
    } else if (exact) {
        f->st.resyncs++;
        jit_jump_to(f, a, s, &p->ev, DC_F_ESTIMATED);
    } else {
        f->st.pins_skipped++;
        return;
    }
    a->jumped_back = false;
    /* (a jump back to the same scope emits no path: a loop inside one record) */
    a->pass_loops += how == ROUND_A_LOOP && f->path->len;
    if (p->backward)
        close_pass(f, a, &p->ev, pass_iterations(f, a, p));
    a->ring[a->nring++ % PASS_RING] = s;
    if (!a->t->pinned[s]) {
        a->t->pinned[s] = 1;
        g_hash_table_remove_all(a->t->memo);   /* strict paths change */
    }
}

/* A pin left out: its jump back still counts. */
static void skip_pin(rj_filter *f, act *a, const pin *p)
{
    if (p->state >= 0) {
        f->st.pins_skipped++;
        if (p->backward) {
            a->loop_allowed = true;
            a->nring = 0;
            a->jumped_back = true;
            close_pass(f, a, &p->ev, pass_iterations(f, a, p));
        }
    }
}

/* ---- aligning C2 pins --------------------------------------------------------
 *
 * C2 schedules instructions across bytecodes, so a pin can stand for code
 * out of bytecode order; taking each pin as it comes would spend the loop a
 * jump back allows on a pin that is early, and leave the next iteration's
 * pins unexplained. So the approximate pins of a C2 version are aligned a
 * window at a time: of the ways to take or leave out each pin under the
 * rules (compiled.h), the cheapest is taken (a shortest path over the
 * window's pins). A pin left out costs ALIGN_SKIP; a loop that no jump back
 * explains, only a scope met again, costs ALIGN_RING: more than one pin left
 * out, so that one stray scope is left out, where an unrolled copy (several
 * scopes again) is a loop; among equals, the fewest bytecodes. */
#define ALIGN_SKIP 2
#define ALIGN_RING 3

static bool ring_has(const uint32_t *ring, uint32_t n, uint32_t s)
{
    for (uint32_t i = 0; i < n && i < PASS_RING; i++)
        if (ring[i] == s)
            return true;
    return false;
}

/* Aligns a's window; with `all`, takes every pin of the best way, else only
 * up to its first taken one. A way's state after a pin is the pin's scope
 * and whether a loop is still allowed: both are kept apart. */
static void align(rj_filter *f, act *a, bool all)
{
    uint32_t n = a->nwin;
    if (!n)
        return;
    align_node *d = f->align;    /* (WINDOW + 1) x 2: by pin, then loop allowed */
#define NODE(j, al) (&d[(j) * 2 + (al)])
    for (uint32_t k = 0; k < (n + 1) * 2; k++)
        d[k].ok = false;
    align_node *d0 = NODE(0, a->loop_allowed);
    *d0 = (align_node){ .ok = true, .state = a->state, .called = a->called,
                        .allowed = a->loop_allowed, .nring = MIN(a->nring, PASS_RING),
                        .from = -1 };
    memcpy(d0->ring, a->ring, sizeof d0->ring);
    for (uint32_t j = 1; j <= n; j++) {
        const pin *p = &a->win[j - 1];
        if (p->state < 0)
            continue;
        uint32_t s = (uint32_t)p->state;
        bool back = false;
        for (uint32_t i = j; i-- > 0;) {
            back = back || a->win[i].backward;
            for (int al = 0; al < 2; al++) {
                const align_node *x = NODE(i, al);
                if (!x->ok)
                    continue;
                bool allowed = back || x->allowed;
                uint32_t cost = x->cost + ALIGN_SKIP * (j - i - 1), len;
                bool used = false;
                if (x->state == NONE || (x->state == s && !back)) {
                    len = 0;
                } else if (jit_walk(f, a->t, x->state, x->called, s, false, false)) {
                    len = f->path->len;
                } else if (allowed && jit_walk(f, a->t, x->state, x->called, s, true, false)) {
                    len = f->path->len;
                    used = true;
                } else if (s != x->state && !back && ring_has(x->ring, x->nring, s) &&
                           jit_walk(f, a->t, x->state, x->called, s, true, false)) {
                    len = f->path->len;
                    cost += ALIGN_RING;
                } else {
                    continue;
                }
                len += x->len;
                align_node *y = NODE(j, allowed && !used);
                if (y->ok && (cost > y->cost || (cost == y->cost && len >= y->len)))
                    continue;
                y->ok = true;
                y->cost = cost;
                y->len = len;
                y->state = s;
                y->called = false;
                y->allowed = allowed && !used;
                y->from = (int)(i * 2 + (uint32_t)al);
                if (back) {
                    y->nring = 0;
                } else {
                    memcpy(y->ring, x->ring, sizeof y->ring);
                    y->nring = x->nring;
                }
                y->ring[y->nring++ % PASS_RING] = s;
                y->nring = MIN(y->nring, PASS_RING);
            }
        }
    }
    int best = -1;
    uint32_t best_total = UINT32_MAX, best_len = 0;
    for (uint32_t k = 0; k < (n + 1) * 2; k++) {
        uint32_t total = d[k].cost + ALIGN_SKIP * (n - k / 2);
        if (d[k].ok && (total < best_total || (total == best_total && d[k].len < best_len))) {
            best = (int)k;
            best_total = total;
            best_len = d[k].len;
        }
    }
#undef NODE
    /* the pins taken, in order */
    uint32_t taken[WINDOW], nt = 0;
    for (int k = best; k >= 2; k = d[k].from)
        taken[nt++] = (uint32_t)k / 2;
    uint32_t upto = all ? n : (nt ? taken[nt - 1] : n);
    uint32_t k = nt;
    for (uint32_t j = 1; j <= upto; j++) {
        if (k > 0 && taken[k - 1] == j) {
            take_pin(f, a, &a->win[j - 1], false);
            k--;
        } else {
            skip_pin(f, a, &a->win[j - 1]);
        }
    }
    memmove(a->win, a->win + upto, (n - upto) * sizeof a->win[0]);
    a->nwin = n - upto;
}

void jit_take_pending(rj_filter *f, act *a, bool exact)
{
    if (!a->has_pin) {
        if (exact)
            align(f, a, true);
        return;
    }
    a->has_pin = false;
    if (a->t->in_order || a->throwing || a->state == NONE || a->state == START) {
        align(f, a, true);
        take_pin(f, a, &a->pending, exact);
        return;
    }
    if (exact) {
        align(f, a, true);
        take_pin(f, a, &a->pending, true);
        return;
    }
    a->win[a->nwin++] = a->pending;
    if (a->nwin == WINDOW)
        align(f, a, false);
}

/* Everything a holds goes out as approximate pins. */
void jit_flush_pins(rj_filter *f, act *a)
{
    jit_take_pending(f, a, false);
    align(f, a, true);
}

/* a's activation returns out of the version: to a return of its method. */
void jit_finish(rj_filter *f, act *a, const dc_event *ev)
{
    jit_flush_pins(f, a);
    if (a->pass_iters)
        close_pass(f, a, ev, 0);
    if (a->state == NONE || !a->t)
        return;
    if (a->state != START && jit_state_node(a->t, a->state)->parent < 0 &&
            jvm_is_return(jit_state_op(a->t, a->state)))
        return;                  /* at its return already */
    /* an exception dispatched to it and no scope since (a handler that
     * returns at once): the way out goes through a handler */
    bool throwing = a->throwing;
    a->throwing = false;
    if ((throwing && (jit_walk(f, a->t, a->state, a->called, EXIT, false, true) ||
                          jit_walk(f, a->t, a->state, a->called, EXIT, true, true))) ||
            jit_walk(f, a->t, a->state, a->called, EXIT, false, false) ||
            jit_walk(f, a->t, a->state, a->called, EXIT, true, false))
        jit_emit_path(f, a, ev);
    else
        f->st.resyncs++;
}
