/* Compiled code at the bytecode level (compiled.h). */
#include "reconstruct/compiled.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "common/jvm.h"
#include "decoder/jitpath.h"

#define NONE UINT32_MAX
#define START (UINT32_MAX - 1)   /* before the first bytecode of the version's method */
#define WALK_MAX (1u << 16)      /* states one path search visits at most */
#define MEMO_MAX (1u << 14)      /* paths remembered per version */
#define PASS_RING 32             /* scopes remembered since the machine code last jumped back */
#define WINDOW 8                 /* approximate pins of C2 code aligned together */

enum step_kind {
    SK_BC,        /* an edge of the method's CFG */
    SK_ENTER,     /* into an inlined callee at its first bytecode */
    SK_RETURN,    /* out of an inlined callee, after its call site */
    SK_OVER,      /* over an invoke whose callee left no scope */
    SK_CALLED,    /* over an invoke the version called for real */
    SK_CATCH,     /* an exception to a handler of the same frame */
    SK_UNWIND,    /* an exception out of inlined frames to a handler of an outer one */
};

typedef struct step {
    uint32_t state;
    uint8_t kind;
    bool unsettled;          /* another path to the same pin avoids it (estimated) */
} step;

/* A frame of the inline tree: the version's method (node 0) or a callee
 * inlined at a call site of its parent. */
typedef struct tnode {
    uint64_t method_id;
    const rc_method *m;      /* NULL: not in the program */
    const rc_cfg *g;         /* NULL: no code (native, abstract, unknown) */
    int32_t parent;
    uint32_t site;           /* instruction index of the invoke in the parent */
    int32_t site_bci;
    uint32_t depth;          /* 1 for the root */
    uint32_t base;           /* its first state */
    int32_t first_child, next_sibling;
    /* a callee no record shows, the one method its invoke can call, where
     * the version makes no call: inlined with no instruction of its own
     * scope left (an empty constructor, an accessor, an intrinsic). Its
     * path is not pinned: its bytecodes are estimated. */
    bool implicit;
} tnode;

typedef struct tree {
    const dm_code *code;
    GArray *nodes;           /* tnode */
    uint32_t nstates;
    uint32_t *node_of;       /* state -> node */
    uint8_t *real_call;      /* state: an invoke the version calls for real */
    /* state: a pin was taken there. C1 keeps each bytecode's instructions in
     * its block, so a path of a C1 version crosses such a state only where
     * its record ran, and the record's scope would have been a pin. */
    uint8_t *pinned;
    bool in_order;           /* a C1 version (levels 1-3) */
    int32_t *rec_state;      /* the version's record k -> state, -1 none */
    GHashTable *memo;        /* key -> GArray of step, NULL when no path */
} tree;

typedef struct pin {
    uint32_t rec;            /* record index in the version */
    int32_t state;           /* -1: the record names no bytecode */
    bool backward;           /* the machine code jumped back since the last pin */
    uint64_t back_to;        /* ... to this address (0: none known) */
    bool resumed;            /* the trace resumed here after the version was left
                              * without a call (a fault, a safepoint) */
    dc_event ev;             /* the event, for times and offsets */
} pin;

typedef struct act {
    const dm_code *code;
    tree *t;
    uint32_t state;          /* NONE: unknown; START: not begun */
    bool called;             /* the invoke at state was called for real */
    bool calling;            /* a call out of it is in progress */
    bool has_pin;
    pin pending;             /* the latest pin, held until the next event says whether
                              * a call left from it */
    uint64_t last_ip;        /* the record of the latest pin */
    bool backward;           /* a jump back since the latest pin was held */
    bool loop_allowed;       /* one since the bytecode path last went round a loop */
    bool jumped_back;        /* at a pin left out since the last one taken */
    /* back from a call made where no bytecode is recorded: an out-of-line
     * slow path (a counter overflow, an allocation), whose jump back into
     * the method's code is no loop */
    bool slow_path;
    /* an exception was dispatched from the position: the next pin is
     * reached through a handler covering it, in its frame or an outer one */
    bool throwing;
    bool calls_interp;       /* its call out went on into interpreted code */
    uint32_t ring[PASS_RING];
    uint32_t nring;
    uint64_t back_to;        /* where the pending jump back went */
    /* unrolled loops: loops the path went round since the last jump back,
     * and the iterations a pass of the loop jumped to there runs (0: not
     * known) */
    uint32_t pass_loops, pass_iters;
    /* approximate pins of a C2 version not taken yet, oldest first (align) */
    pin win[WINDOW];
    uint32_t nwin;
} act;

struct rj_filter {
    rc_program *p;
    const dm_model *m;
    dc_sink next;
    void *next_ctx;
    int stop;
    int code_fd;
    GHashTable *trees;       /* dm_code * -> tree */
    GArray *acts;            /* act, innermost last */
    jp_cache *jp;            /* the machine code, for loop steps (NULL: not readable) */
    dc_kind last_kind;       /* of the previous event */
    bool last_stub_dispatches; /* the last stub dispatches exceptions */
    uint32_t last_flags;
    GArray *path;            /* step: the walk being emitted */
    GArray *succ;            /* next_step: where a path search goes next */
    struct align_node *align; /* WINDOW + 1 */
    /* path search, per state of the tree searched (grown to the largest) */
    uint32_t cap, gen;
    uint32_t *seen, *from, *queue, *dist;
    uint8_t *how, *cnt;
    uint64_t *fwd, *bwd;     /* paths from the start, to the goal (settle) */
    /* The entry of a version a call went into, held back until the next
     * event shows whether the version's inline-cache check failed there
     * (a jump to the miss handler): then it never ran. */
    dc_event held;
    bool has_held;
    rj_stats st;
};

void rj_stats_add(rj_stats *sum, const rj_stats *s)
{
    uint64_t *d = (uint64_t *)sum;
    const uint64_t *v = (const uint64_t *)s;
    for (size_t i = 0; i < sizeof *s / sizeof(uint64_t); i++)
        d[i] += v[i];
}

/* ---- the inline tree ------------------------------------------------------- */

static tnode *node_at(const tree *t, int32_t i) { return &g_array_index(t->nodes, tnode, i); }

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

static tree *tree_of(rj_filter *f, const dm_code *c)
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

static void tree_free(gpointer p)
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

static const tnode *state_node(const tree *t, uint32_t s)
{
    return node_at(t, (int32_t)t->node_of[s]);
}

static uint32_t state_insn(const tree *t, uint32_t s) { return s - state_node(t, s)->base; }

static int state_op(const tree *t, uint32_t s)
{
    const tnode *n = state_node(t, s);
    return n->g->op[s - n->base];
}

/* ---- paths ---------------------------------------------------------------- */

#define EXIT NONE                /* target: a return instruction of the version's method */

static bool is_goal(const tree *t, uint32_t s, uint32_t to)
{
    if (to != EXIT)
        return s == to;
    return t->node_of[s] == 0 && jvm_is_return(state_op(t, s));
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

typedef struct next_step {
    uint32_t x;              /* PAIR(state, top_value) */
    uint8_t kind;
} next_step;

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
    const tnode *n = state_node(t, s);
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
    } else if (called && jvm_is_invoke(state_op(t, from))) {
        const tnode *n = state_node(t, from);
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
static bool walk(rj_filter *f, tree *t, uint32_t from, bool called, uint32_t to, bool wrap,
                 bool throwing)
{
    path_query q = { .from = from, .to = to, .called = called, .wrap = wrap,
                     .throwing = throwing };
    path_query strict = q;
    strict.strict = true;
    return (t->in_order && walk_as(f, t, strict)) || walk_as(f, t, q);
}

/* Once round the innermost loop through s, from s back to s. */
static bool walk_round(rj_filter *f, tree *t, uint32_t s, bool called)
{
    path_query q = { .from = s, .to = s, .called = called, .wrap = true, .round = true };
    return walk_as(f, t, q);
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
    const tnode *n = state_node(a->t, a->state);
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
    const tnode *n = state_node(t, site_state);
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
static void emit_path(rj_filter *f, act *a, const dc_event *ev)
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
            const tnode *cn = state_node(t, st->state);
            if (cn->implicit)
                f->st.calls_inferred++;
            out_call(f, a, ev, cn, fl | (cn->implicit ? DC_F_INFERRED | DC_F_ESTIMATED : 0));
            break;
        }
        case SK_RETURN: {
            const tnode *cn = state_node(t, prev);
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
        const tnode *n = state_node(t, st->state);
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
static void jump_to(rj_filter *f, act *a, uint32_t s, const dc_event *ev, uint32_t flags)
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

static bool in_ring(const act *a, uint32_t s)
{
    for (uint32_t i = 0; i < a->nring && i < PASS_RING; i++)
        if (a->ring[i] == s)
            return true;
    return false;
}

enum { UNREACHED, STRAIGHT, ROUND_A_LOOP };

/* The path from a's position to state s through a handler (throwing), or
 * without a loop, or with one where the rules allow: how it got there. */
static int reach(rj_filter *f, act *a, uint32_t s, bool throwing, bool loop)
{
    if (walk(f, a->t, a->state, a->called, s, false, throwing))
        return STRAIGHT;
    if (loop && walk(f, a->t, a->state, a->called, s, true, throwing)) {
        a->loop_allowed = false;
        return ROUND_A_LOOP;
    }
    return UNREACHED;
}

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
    if (!walk_round(f, a->t, s, false))
        return 0;
    int32_t c = 0;
    for (guint k = 0; k < f->path->len; k++) {
        uint32_t x = g_array_index(f->path, step, k).state;
        const tnode *n = state_node(a->t, x);
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
            walk_round(f, a->t, a->state, a->called)) {
            for (guint j = 0; j < f->path->len; j++)
                g_array_index(f->path, step, j).unsettled = true;
            for (uint32_t i = a->pass_loops; i < k && !f->stop; i++)
                emit_path(f, a, ev);
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
    bool loop = exact || a->loop_allowed || (!a->t->in_order && s != a->state && in_ring(a, s));
    int how = UNREACHED;
    if (a->state == NONE) {
        jump_to(f, a, s, &p->ev, DC_F_CONTEXT);
    } else if (a->state == START && throwing) {
        f->st.resyncs++;
        jump_to(f, a, s, &p->ev, DC_F_ESTIMATED);
    } else if (throwing && reach(f, a, s, true, loop)) {
        emit_path(f, a, &p->ev);
    } else if (a->state == s && !back) {
        /* still there (a loop inside one record shows as a jump back); or
         * back where a trap left it with no handler on the way (a safepoint
         * poll, not an exception): the loop a jump back allows is kept */
    } else if ((how = reach(f, a, s, false, loop)) ||
               (p->resumed && a->state != START && (how = reach(f, a, s, true, loop)))) {
        emit_path(f, a, &p->ev);
    } else if (exact) {
        f->st.resyncs++;
        jump_to(f, a, s, &p->ev, DC_F_ESTIMATED);
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

typedef struct align_node {
    bool ok;
    uint32_t cost, len;       /* cost: pins left out, and loops only a scope met again explains */
    uint32_t state;
    bool called, allowed;
    uint32_t ring[PASS_RING], nring;
    int from;
} align_node;

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
                } else if (walk(f, a->t, x->state, x->called, s, false, false)) {
                    len = f->path->len;
                } else if (allowed && walk(f, a->t, x->state, x->called, s, true, false)) {
                    len = f->path->len;
                    used = true;
                } else if (s != x->state && !back && ring_has(x->ring, x->nring, s) &&
                           walk(f, a->t, x->state, x->called, s, true, false)) {
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

static void take_pending(rj_filter *f, act *a, bool exact)
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
static void flush_pins(rj_filter *f, act *a)
{
    take_pending(f, a, false);
    align(f, a, true);
}

/* a's activation returns out of the version: to a return of its method. */
static void finish(rj_filter *f, act *a, const dc_event *ev)
{
    flush_pins(f, a);
    if (a->pass_iters)
        close_pass(f, a, ev, 0);
    if (a->state == NONE || !a->t)
        return;
    if (a->state != START && state_node(a->t, a->state)->parent < 0 &&
        jvm_is_return(state_op(a->t, a->state)))
        return;                  /* at its return already */
    /* an exception dispatched to it and no scope since (a handler that
     * returns at once): the way out goes through a handler */
    bool throwing = a->throwing;
    a->throwing = false;
    if ((throwing && (walk(f, a->t, a->state, a->called, EXIT, false, true) ||
                      walk(f, a->t, a->state, a->called, EXIT, true, true))) ||
        walk(f, a->t, a->state, a->called, EXIT, false, false) ||
        walk(f, a->t, a->state, a->called, EXIT, true, false))
        emit_path(f, a, ev);
    else
        f->st.resyncs++;
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
    act a = { .code = c, .t = tree_of(f, c), .state = state };
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
    take_pending(f, a, true);
    a->calling = true;
    a->called = a->state != NONE && a->state != START && jvm_is_invoke(state_op(a->t, a->state));
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
        take_pending(f, a, true);
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
            finish(f, a, e);
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
    take_pending(f, a, false);
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
                finish(f, a, e);
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
    f->trees = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, tree_free);
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
        flush_pins(f, &g_array_index(f->acts, act, k));
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
