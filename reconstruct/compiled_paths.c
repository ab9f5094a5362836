/* The inline tree of a compiled version and the paths through it
 * (compiled_int.h): what a version runs between two places it pins. */
#include "reconstruct/compiled_int.h"

static uint32_t next_insn(const rc_cfg *g, uint32_t i)
{
    for (uint32_t e = g->first[i]; e < g->first[i + 1]; e++)
        if (g->edge[e].kind == RC_EDGE_NEXT)
            return g->edge[e].to;
    return NONE;
}

static int32_t child(rj_filter *f, tree *t, int32_t parent, int32_t site_bci, uint64_t id)
{
    tnode *pn = node_at(t, parent);
    if (!pn->g || site_bci < 0)
        return -1;
    int64_t site = rc_cfg_index(pn->g, (uint32_t)site_bci);
    if (site < 0 || !jvm_is_invoke(pn->g->op[site]))
        return -1;
    for (int32_t c = pn->first_child; c >= 0; c = node_at(t, c)->next_sibling)
        if (node_at(t, c)->site == (uint32_t)site && node_at(t, c)->method_id == id)
            return c;
    tnode n = { .method_id = id, .m = rc_method_by_id(f->p, id), .parent = parent,
                .site = (uint32_t)site, .site_bci = site_bci, .depth = pn->depth + 1,
                .first_child = -1, .next_sibling = pn->first_child };
    n.g = n.m && n.m->code ? rc_cfg_get(f->p, n.m) : NULL;
    g_array_append_val(t->nodes, n);
    int32_t idx = (int32_t)t->nodes->len - 1;
    node_at(t, parent)->first_child = idx;
    return idx;
}

/* Whether the instruction ending at pc in version c is a call (HotSpot
 * records a call at its return address): call rel32, or call *%reg. */
static bool call_ends_at(rj_filter *f, const dm_code *c, uint64_t pc)
{
    if (f->code_fd < 0 || pc < c->vaddr + 5 || pc > c->vaddr + c->size)
        return false;
    uint8_t b[5];
    if (pread(f->code_fd, b, 5, (off_t)(c->code_offset + (pc - c->vaddr) - 5)) != 5)
        return false;
    return b[0] == 0xe8 || (b[3] == 0xff && (b[4] & 0xf8) == 0xd0) ||
           (b[2] == 0x41 && b[3] == 0xff && (b[4] & 0xf8) == 0xd0);
}

static void memo_free(gpointer p) { g_free(p); }

tree *jit_tree_of(rj_filter *f, const dm_code *c)
{
    tree *t = g_hash_table_lookup(f->trees, c);
    if (t)
        return t;
    t = g_new0(tree, 1);
    t->code = c;
    t->nodes = g_array_new(FALSE, FALSE, sizeof(tnode));
    tnode root = { .method_id = c->method_id, .m = rc_method_by_id(f->p, c->method_id),
                   .parent = -1, .site_bci = -1, .depth = 1, .first_child = -1,
                   .next_sibling = -1 };
    root.g = root.m && root.m->code ? rc_cfg_get(f->p, root.m) : NULL;
    g_array_append_val(t->nodes, root);
    uint32_t n = c->kind == DM_CODE_NMETHOD ? c->npcs : 0;
    int32_t *rec_node = g_new(int32_t, n + 1);
    int32_t *rec_bci = g_new(int32_t, n + 1);
    for (uint32_t k = 0; k < n; k++) {
        const dm_pcrec *r = &f->m->pcs[c->first_pc + k];
        const dm_frame *fr = &f->m->frames[r->first];
        rec_node[k] = -1;
        rec_bci[k] = -1;
        if (!r->depth || fr[r->depth - 1].method_id != c->method_id)
            continue;
        int32_t nd = 0;
        for (int32_t j = (int32_t)r->depth - 2; j >= 0 && nd >= 0; j--)
            nd = child(f, t, nd, fr[j + 1].bci, fr[j].method_id);
        rec_node[k] = nd;
        rec_bci[k] = nd >= 0 ? fr[0].bci : -1;
    }
    /* the invokes the version calls for real: a record of theirs follows a
     * call instruction */
    GHashTable *calls = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    for (uint32_t k = 0; k < n; k++) {
        const tnode *nd = rec_node[k] >= 0 ? node_at(t, rec_node[k]) : NULL;
        int64_t i = nd && nd->g && rec_bci[k] >= 0 ? rc_cfg_index(nd->g, (uint32_t)rec_bci[k])
                                                 : -1;
        if (i >= 0 && jvm_is_invoke(nd->g->op[i]) &&
            call_ends_at(f, c, f->m->pcs[c->first_pc + k].pc)) {
            uint64_t key = (uint64_t)rec_node[k] << 32 | (uint64_t)i;
            g_hash_table_add(calls, g_memdup2(&key, sizeof key));
        }
    }
    /* the implicit callees of the frames the records show */
    guint recorded = t->nodes->len;
    for (guint ni = 0; ni < recorded; ni++) {
        const rc_cfg *g = node_at(t, (int32_t)ni)->g;
        const rc_method *m = node_at(t, (int32_t)ni)->m;
        if (!g || !m)
            continue;
        for (uint32_t i = 0; i < g->ninsn; i++) {
            if (!jvm_is_invoke(g->op[i]))
                continue;
            const tnode *nd = node_at(t, (int32_t)ni);   /* (child() may move the array) */
            bool has = false;
            for (int32_t k = nd->first_child; k >= 0 && !has; k = node_at(t, k)->next_sibling)
                has = node_at(t, k)->site == i;
            uint64_t key = (uint64_t)ni << 32 | i;
            if (has || g_hash_table_contains(calls, &key))
                continue;
            const rc_method *const *tg;
            bool open = false;
            if (rc_call_targets_at(f->p, m, i, &tg, &open) != 1 || open || !tg[0]->code ||
                !tg[0]->id)
                continue;
            int32_t cn = child(f, t, (int32_t)ni, (int32_t)g->bci[i], tg[0]->id);
            if (cn >= 0)
                node_at(t, cn)->implicit = true;
        }
    }
    for (guint i = 0; i < t->nodes->len; i++) {
        tnode *nd = node_at(t, (int32_t)i);
        nd->base = t->nstates;
        t->nstates += nd->g ? nd->g->ninsn : 0;
    }
    t->node_of = g_new(uint32_t, t->nstates + 1);
    for (guint i = 0; i < t->nodes->len; i++) {
        const tnode *nd = node_at(t, (int32_t)i);
        for (uint32_t s = 0; nd->g && s < nd->g->ninsn; s++)
            t->node_of[nd->base + s] = i;
    }
    t->real_call = g_new0(uint8_t, t->nstates + 1);
    t->pinned = g_new0(uint8_t, t->nstates + 1);
    t->in_order = c->level >= 1 && c->level <= 3;
    t->rec_state = g_new(int32_t, n + 1);
    for (uint32_t k = 0; k < n; k++) {
        t->rec_state[k] = -1;
        const tnode *nd = rec_node[k] >= 0 ? node_at(t, rec_node[k]) : NULL;
        int64_t i = nd && nd->g && rec_bci[k] >= 0 ? rc_cfg_index(nd->g, (uint32_t)rec_bci[k])
                                                 : -1;
        if (i < 0)
            continue;
        t->rec_state[k] = (int32_t)(nd->base + (uint32_t)i);
        uint64_t key = (uint64_t)rec_node[k] << 32 | (uint64_t)i;
        if (g_hash_table_contains(calls, &key))
            t->real_call[t->rec_state[k]] = 1;
    }
    g_hash_table_destroy(calls);
    g_free(rec_node);
    g_free(rec_bci);
    t->memo = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, memo_free);
    g_hash_table_insert(f->trees, (gpointer)c, t);
    return t;
}

void jit_tree_free(gpointer p)
{
    tree *t = p;
    g_array_free(t->nodes, TRUE);
    g_free(t->node_of);
    g_free(t->real_call);
    g_free(t->pinned);
    g_free(t->rec_state);
    g_hash_table_destroy(t->memo);
    g_free(t);
}

const tnode *jit_state_node(const tree *t, uint32_t s)
{
    return node_at(t, (int32_t)t->node_of[s]);
}

int jit_state_op(const tree *t, uint32_t s)
{
    const tnode *n = jit_state_node(t, s);
    return n->g->op[s - n->base];
}

/* ---- paths ---------------------------------------------------------------- */

static bool is_goal(const tree *t, uint32_t s, uint32_t to)
{
    if (to != EXIT)
        return s == to;
    return t->node_of[s] == 0 && jvm_is_return(jit_state_op(t, s));
}

/* What a path knows of the value on top of the operand stack: a constant
 * pushed on the path (iconst, aconst_null) that only goto and returns out of
 * inlined callees have passed since. The if that tests it goes one way
 * only: an inlined `return a < b` ends in iconst_1 or iconst_0, and the
 * caller's ifeq then settles which arm ran where C2 left no record in
 * either (it computes the flag without a branch). The path search runs over
 * (state, known value) pairs. */
enum top_value { TOP_UNKNOWN, TOP_ZERO, TOP_NONZERO, NTOP };

#define PAIR(s_, v_) ((s_) * NTOP + (v_))   /* a (state, top_value) pair of the search */

/* The value on top after op, given v before it. */
static uint8_t top_after(int op, uint8_t v)
{
    if (op == JVM_ACONST_NULL || op == JVM_ICONST_0)
        return TOP_ZERO;
    if (op >= JVM_ICONST_M1 && op <= JVM_ICONST_5)
        return TOP_NONZERO;
    if (op == JVM_NOP || op == JVM_GOTO || op == JVM_GOTO_W)
        return v;
    return TOP_UNKNOWN;
}

/* Whether an if that tests a known top value takes its branch (-1: it
 * tests something else, or the value is unknown). */
static int branch_taken(int op, uint8_t v)
{
    if (v == TOP_UNKNOWN)
        return -1;
    bool zero = v == TOP_ZERO;
    switch (op) {
    case JVM_IFEQ: case JVM_IFNULL:
        return zero;
    case JVM_IFNE: case JVM_IFNONNULL:
        return !zero;
    default:
        return -1;
    }
}

/* Appends (s_, v_) reached by a step of kind k_ to w->succ. */
#define NEXT(s_, v_, k_)                                                                    \
    do {                                                                                    \
        next_step ns_ = { PAIR((uint32_t)(s_), (v_)), (uint8_t)(k_) };                      \
        if ((uint32_t)(s_) < t->nstates)                                                    \
            g_array_append_val(w->succ, ns_);                                               \
    } while (0)

/* Sets w->succ to where one step of a path leads from x = PAIR(s, v): an edge
 * of the method's CFG (with `wrap`, one back to an earlier or the same bci
 * too; an if on a known value, its one way), into a callee inlined at an
 * invoke, over an invoke whose callee left no scope (never one the version
 * calls for real), out of an inlined callee after its call site (an
 * ireturn's or areturn's known value goes with it). */
static void next_states(rj_filter *w, const tree *t, uint32_t x, bool wrap)
{
    g_array_set_size(w->succ, 0);
    uint32_t s = x / NTOP;
    uint8_t v = (uint8_t)(x % NTOP);
    const tnode *n = jit_state_node(t, s);
    uint32_t i = s - n->base;
    int op = n->g->op[i];
    if (jvm_is_invoke(op)) {
        bool inlined = false;
        for (int32_t k = n->first_child; k >= 0; k = node_at(t, k)->next_sibling) {
            const tnode *cn = node_at(t, k);
            if (cn->site != i)
                continue;
            inlined = true;
            if (cn->g)
                NEXT(cn->base, TOP_UNKNOWN, SK_ENTER);
        }
        /* a callee inlined without code of its own, or one that left
         * no scope */
        bool leaf = !inlined;
        for (int32_t k = n->first_child; k >= 0 && !leaf; k = node_at(t, k)->next_sibling)
            leaf = node_at(t, k)->site == i && !node_at(t, k)->g;
        uint32_t nx = next_insn(n->g, i);
        if (leaf && !t->real_call[s] && nx != NONE)
            NEXT(n->base + nx, TOP_UNKNOWN, SK_OVER);
    } else if (jvm_is_return(op)) {
        if (n->parent >= 0) {
            const tnode *pn = node_at(t, n->parent);
            uint32_t nx = next_insn(pn->g, n->site);
            bool value = op == JVM_IRETURN || op == JVM_ARETURN;
            if (nx != NONE)
                NEXT(pn->base + nx, value ? v : TOP_UNKNOWN, SK_RETURN);
        }
    } else {
        const rc_cfg *g = n->g;
        int taken = branch_taken(op, v);
        uint8_t after = top_after(op, v);
        for (uint32_t e = g->first[i]; e < g->first[i + 1]; e++) {
            const rc_edge *ed = &g->edge[e];
            if (ed->kind == RC_EDGE_EXCEPTION)
                continue;
            if (!wrap && g->bci[ed->to] <= g->bci[i])
                continue;
            if (taken >= 0 && (ed->kind == RC_EDGE_TAKEN) != taken &&
                g->first[i + 1] - g->first[i] > 1)
                continue;
            NEXT(n->base + ed->to, after, SK_BC);
        }
    }
}

/* Sets w->succ to the first steps of a path from `from` (START, or a state
 * whose invoke was called for real when `called`, or one an exception is
 * thrown from when `throwing`), nothing known of the stack; false when there
 * are none. */
static bool first_states(rj_filter *w, const tree *t, uint32_t from, bool called,
                         bool throwing, bool wrap)
{
    g_array_set_size(w->succ, 0);
    if (from == START) {
        const tnode *root = node_at(t, 0);
        if (root->g)
            NEXT(root->base, TOP_UNKNOWN, SK_BC);
    } else if (throwing) {
        /* the handlers covering the position, in its frame, then in the
         * frames it is inlined into at their call sites */
        uint32_t k = t->node_of[from], i = state_insn(t, from);
        for (;;) {
            const tnode *n = node_at(t, (int32_t)k);
            for (uint32_t e = n->g->first[i]; e < n->g->first[i + 1]; e++)
                if (n->g->edge[e].kind == RC_EDGE_EXCEPTION)
                    NEXT(n->base + n->g->edge[e].to, TOP_UNKNOWN,
                         k == t->node_of[from] ? SK_CATCH : SK_UNWIND);
            if (n->parent < 0)
                break;
            i = n->site;
            k = (uint32_t)n->parent;
        }
    } else if (called && jvm_is_invoke(jit_state_op(t, from))) {
        const tnode *n = jit_state_node(t, from);
        uint32_t nx = next_insn(n->g, state_insn(t, from));
        if (nx != NONE)
            NEXT(n->base + nx, TOP_UNKNOWN, SK_CALLED);
    } else {
        next_states(w, t, PAIR(from, TOP_UNKNOWN), wrap);
    }
    return w->succ->len > 0;
#undef NEXT
}

static void next_generation(rj_filter *w)
{
    if (++w->gen == 0) {
        memset(w->seen, 0, w->cap * sizeof *w->seen);
        w->gen = 1;
    }
}

static uint64_t add_sat(uint64_t x, uint64_t y) { return x > UINT64_MAX - y ? UINT64_MAX : x + y; }

static bool goal_x(const tree *t, uint32_t x, uint32_t to) { return is_goal(t, x / NTOP, to); }

/* A path asked of the inline tree's ICFG: from `from` (START, or a state;
 * called: its call has been made) to `to` (a state or EXIT); with `wrap`,
 * edges back to an earlier or the same bci are taken; with `strict`, no path
 * goes through a pinned state; `throwing`: from `from` through a handler;
 * with `round`, the way back to `from` is the path. */
typedef struct path_query {
    uint32_t from, to;
    bool called, wrap, strict, throwing, round;
} path_query;

/* Marks the steps of out, the shortest forward path (no edge back) from
 * `from` to the goal, that some other forward path avoids: only pins and
 * known values settle a path, so where several reach the next pin the
 * walk's choice (the shortest) is an estimate for the states not on all of
 * them. Forward paths form no cycle: they are counted over the (state,
 * value) pairs reachable, in topological order, and a state s is on all
 * paths when the sum over its pairs p of paths(start, p) * paths(p, goal)
 * is paths(start, goal) (a count too large, a cycle, or more than WALK_MAX
 * pairs leave every step unsettled). */
static void settle(rj_filter *w, const tree *t, const path_query *q, GArray *out)
{
    uint32_t from = q->from, to = q->to;
    bool called = q->called, strict = q->strict, throwing = q->throwing;
    next_generation(w);
    uint32_t tail = 0;
    uint32_t *indeg = w->dist;
    uint64_t *fwd = w->fwd, *bwd = w->bwd;
    bool all = false;
    first_states(w, t, from, called, throwing, false);
    GArray *first = g_array_copy(w->succ);
    for (guint k = 0; k < first->len; k++) {
        uint32_t x = g_array_index(first, next_step, k).x;
        if (w->seen[x] != w->gen) {
            w->seen[x] = w->gen;
            indeg[x] = 0;
            fwd[x] = 0;
            w->queue[tail++] = x;
        }
        fwd[x] = add_sat(fwd[x], 1);
    }
    g_array_free(first, true);
    /* the pairs reachable, and the edges into each from those expanded */
    for (uint32_t head = 0; head < tail && !all; head++) {
        uint32_t x = w->queue[head];
        if (goal_x(t, x, to) || (strict && t->pinned[x / NTOP]))
            continue;
        next_states(w, t, x, false);
        for (guint k = 0; k < w->succ->len; k++) {
            uint32_t y = g_array_index(w->succ, next_step, k).x;
            if (w->seen[y] != w->gen) {
                if (tail >= WALK_MAX) {
                    all = true;
                    break;
                }
                w->seen[y] = w->gen;
                indeg[y] = 0;
                fwd[y] = 0;
                w->queue[tail++] = y;
            }
            indeg[y]++;
        }
    }
    /* paths from the start, each pair once the counts of all its edges are
     * in; w->from holds the order */
    uint32_t reached = tail, n = 0;
    uint64_t total = 0;
    for (uint32_t k = 0; k < reached && !all; k++)
        if (indeg[w->queue[k]] == 0)
            w->from[n++] = w->queue[k];
    for (uint32_t head = 0; head < n && !all; head++) {
        uint32_t x = w->from[head];
        bwd[x] = 0;
        if (goal_x(t, x, to)) {
            total = add_sat(total, fwd[x]);
            bwd[x] = 1;
            continue;
        }
        if (strict && t->pinned[x / NTOP])
            continue;
        next_states(w, t, x, false);
        for (guint k = 0; k < w->succ->len; k++) {
            uint32_t y = g_array_index(w->succ, next_step, k).x;
            fwd[y] = add_sat(fwd[y], fwd[x]);
            if (--indeg[y] == 0)
                w->from[n++] = y;
        }
    }
    all = all || n < reached || total == UINT64_MAX;
    /* paths to the goal, in the reverse order */
    for (uint32_t k = n; k-- > 0 && !all;) {
        uint32_t x = w->from[k];
        if (goal_x(t, x, to) || (strict && t->pinned[x / NTOP]))
            continue;
        next_states(w, t, x, false);
        for (guint j = 0; j < w->succ->len; j++)
            bwd[x] = add_sat(bwd[x], bwd[g_array_index(w->succ, next_step, j).x]);
    }
    for (guint k = 0; k < out->len; k++) {
        step *st = &g_array_index(out, step, k);
        uint64_t through = 0;
        bool known = !all;
        for (uint8_t v = 0; v < NTOP && known; v++) {
            uint32_t x = PAIR(st->state, v);
            if (w->seen[x] != w->gen || bwd[x] == 0)
                continue;
            /* each path from the start to x goes on by each from x to the
             * goal: their product is at most total */
            if (fwd[x] == UINT64_MAX || bwd[x] == UINT64_MAX)
                known = false;
            else
                through += fwd[x] * bwd[x];
        }
        st->unsettled = !known || through != total;
    }
}

/* Breadth-first over the inline tree's ICFG, as (state, known value) pairs,
 * for the path q asks (first_states from q->from). The steps after `from`
 * go to out, each marked unsettled where another path reaches the goal
 * without it (going round loops, another path as short marks them all).
 * false when no path is found within WALK_MAX pairs (*limit set when the
 * bound cut it). */
static bool search(rj_filter *w, const tree *t, const path_query *q, GArray *out, bool *limit)
{
    uint32_t from = q->from, to = q->to;
    bool called = q->called, wrap = q->wrap, strict = q->strict, throwing = q->throwing;
    bool round = q->round;
    uint32_t need = (t->nstates + 1) * NTOP;
    if (need > w->cap) {
        w->seen = g_renew(uint32_t, w->seen, need);
        memset(w->seen + w->cap, 0, (need - w->cap) * sizeof *w->seen);
        w->from = g_renew(uint32_t, w->from, need);
        w->queue = g_renew(uint32_t, w->queue, need);
        w->dist = g_renew(uint32_t, w->dist, need);
        w->how = g_renew(uint8_t, w->how, need);
        w->cnt = g_renew(uint8_t, w->cnt, need);
        w->fwd = g_renew(uint64_t, w->fwd, need);
        w->bwd = g_renew(uint64_t, w->bwd, need);
        w->cap = need;
    }
    next_generation(w);
    uint32_t head = 0, tail = 0, goal = NONE, goal_dist = 0;
    /* successor x_ of a pair at distance d_ reached by c_ paths */
#define VISIT(x_, k_, f_, d_, c_)                                                           \
    do {                                                                                    \
        uint32_t x__ = (x_);                                                                \
        if (w->seen[x__] != w->gen) {                                                       \
            w->seen[x__] = w->gen;                                                          \
            w->from[x__] = (f_);                                                            \
            w->how[x__] = (uint8_t)(k_);                                                    \
            w->dist[x__] = (d_) + 1;                                                        \
            w->cnt[x__] = (c_);                                                             \
            if (goal_x(t, x__, to)) {                                                       \
                if (goal == NONE) {                                                         \
                    goal = x__;                                                             \
                    goal_dist = w->dist[x__];                                               \
                }                                                                           \
            } else if (!strict || !t->pinned[x__ / NTOP]) {                                 \
                w->queue[tail++] = x__;                                                     \
            }                                                                               \
        } else if (w->dist[x__] == (d_) + 1 && w->cnt[x__] < 2) {                           \
            w->cnt[x__] = (uint8_t)MIN(2, w->cnt[x__] + (c_));                              \
        }                                                                                   \
    } while (0)
    if (!first_states(w, t, from, called, throwing, wrap))
        return false;
    for (guint k = 0; k < w->succ->len; k++) {
        const next_step *ns = &g_array_index(w->succ, next_step, k);
        VISIT(ns->x, ns->kind, NONE, 0, 1);
    }
    while (head < tail) {
        if (tail >= WALK_MAX) {
            *limit = true;
            return false;
        }
        uint32_t x = w->queue[head++];
        uint32_t d = w->dist[x];
        if (goal != NONE && d + 1 > goal_dist)
            break;             /* every path as short as the goal's is counted */
        uint8_t c = w->cnt[x];
        next_states(w, t, x, wrap);
        for (guint k = 0; k < w->succ->len; k++) {
            const next_step *ns = &g_array_index(w->succ, next_step, k);
            VISIT(ns->x, ns->kind, x, d, c);
        }
    }
#undef VISIT
    if (goal == NONE)
        return false;
    bool as_short = w->cnt[goal] > 1;
    g_array_set_size(out, 0);
    /* a path that comes back to `from` (round a loop) starts there; with
     * `round`, the way back to `from` is the path */
    for (uint32_t x = goal; x != NONE && (from == START || x / NTOP != from || (round && x == goal));
         x = w->from[x]) {
        step st = { x / NTOP, w->how[x], as_short };
        g_array_prepend_val(out, st);
    }
    if (!wrap)
        settle(w, t, q, out);
    return true;
}

/* A remembered path. */
typedef struct mpath {
    guint n;
    step s[];
} mpath;

/* search, remembered per query. The result is in f->path. */
static bool walk_as(rj_filter *f, tree *t, path_query q)
{
    uint64_t fe = q.from == START ? t->nstates : q.from;
    uint64_t te = q.to == EXIT ? t->nstates : q.to;
    uint64_t key = fe << 37 | te << 5 | (uint64_t)q.round << 4 | (uint64_t)q.throwing << 3 |
                   (uint64_t)q.strict << 2 | (uint64_t)q.called << 1 | (uint64_t)q.wrap;
    gpointer v;
    if (g_hash_table_lookup_extended(t->memo, &key, NULL, &v)) {
        const mpath *mp = v;
        if (!mp)
            return false;
        g_array_set_size(f->path, 0);
        g_array_append_vals(f->path, mp->s, mp->n);
        return true;
    }
    bool limit = false;
    bool ok = search(f, t, &q, f->path, &limit);
    if (limit)
        f->st.walk_limit++;
    if (g_hash_table_size(t->memo) >= MEMO_MAX)
        g_hash_table_remove_all(t->memo);
    mpath *mp = NULL;
    if (ok) {
        mp = g_malloc(sizeof *mp + f->path->len * sizeof(step));
        mp->n = f->path->len;
        memcpy(mp->s, f->path->data, f->path->len * sizeof(step));
    }
    g_hash_table_insert(t->memo, g_memdup2(&key, sizeof key), mp);
    return ok;
}

/* A path of a C1 version avoids the states pinned before (tree.pinned);
 * where none does, or in C2 code, any path. */
bool jit_walk(rj_filter *f, tree *t, uint32_t from, bool called, uint32_t to, bool wrap,
              bool throwing)
{
    path_query q = { .from = from, .to = to, .called = called, .wrap = wrap,
                     .throwing = throwing };
    path_query strict = q;
    strict.strict = true;
    return (t->in_order && walk_as(f, t, strict)) || walk_as(f, t, q);
}

/* Once round the innermost loop through s, from s back to s. */
bool jit_walk_round(rj_filter *f, tree *t, uint32_t s, bool called)
{
    path_query q = { .from = s, .to = s, .called = called, .wrap = true, .round = true };
    return walk_as(f, t, q);
}
