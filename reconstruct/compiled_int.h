/* Internals of compiled code at the bytecode level (compiled.h), shared by
 * compiled.c (events in and out, activations), compiled_paths.c (the inline
 * tree and paths through it) and compiled_pins.c (unrolled loops, C2 pins). */
#ifndef JPT_RECONSTRUCT_COMPILED_INT_H
#define JPT_RECONSTRUCT_COMPILED_INT_H

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

#define EXIT NONE                /* target: a return instruction of the version's method */

/* A step of a path search (compiled_paths.c): to a (state, top value) pair,
 * by a step_kind. */
typedef struct next_step {
    uint32_t x;              /* PAIR(state, top_value) */
    uint8_t kind;
} next_step;

/* A node of align's search (compiled_pins.c): the cheapest way to a pin of
 * the window, one per pin and whether a loop is still allowed there. */
typedef struct align_node {
    bool ok;
    uint32_t cost, len;       /* cost: pins left out, and loops only a scope met again explains */
    uint32_t state;
    bool called, allowed;
    uint32_t ring[PASS_RING], nring;
    int from;
} align_node;

/* jit_reach: how a state was reached. */
enum { UNREACHED, STRAIGHT, ROUND_A_LOOP };

static inline tnode *node_at(const tree *t, int32_t i)
{
    return &g_array_index(t->nodes, tnode, i);
}

/* compiled.c */
void jit_emit_path(rj_filter *f, act *a, const dc_event *ev);
void jit_jump_to(rj_filter *f, act *a, uint32_t s, const dc_event *ev, uint32_t flags);
bool jit_in_ring(const act *a, uint32_t s);
int jit_reach(rj_filter *f, act *a, uint32_t s, bool throwing, bool loop);

/* compiled_paths.c */
tree *jit_tree_of(rj_filter *f, const dm_code *c);
const tnode *jit_state_node(const tree *t, uint32_t s);
int jit_state_op(const tree *t, uint32_t s);
bool jit_walk(rj_filter *f, tree *t, uint32_t from, bool called, uint32_t to, bool wrap,
              bool throwing);
bool jit_walk_round(rj_filter *f, tree *t, uint32_t s, bool called);
void jit_tree_free(gpointer p);

static inline uint32_t state_insn(const tree *t, uint32_t s)
{
    return s - jit_state_node(t, s)->base;
}

/* compiled_pins.c */
void jit_take_pending(rj_filter *f, act *a, bool exact);
void jit_flush_pins(rj_filter *f, act *a);
void jit_finish(rj_filter *f, act *a, const dc_event *ev);

#endif
