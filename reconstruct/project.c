/* Projection of decoded events onto the program (see project.h). */
#include "reconstruct/project.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "common/jvm.h"
#include "decoder/classfile.h"
#include "reconstruct/compiled.h"

/* Live hypotheses at most; beyond, the first ones (deterministic order) are
 * kept and the cut is counted. */
#define MAX_HYP 16384
/* Events kept for a hypothesis set that does not narrow down to one before a
 * deterministic choice is made (choose_forced). A `new` or an invoke that
 * has the VM load and link a class can run hundreds of thousands of JDK
 * bytecodes with -Xint before the code after it tells two callers apart:
 * on lusearch, Lucene3x's and Lucene41's PostingsFormat.fieldsProducer,
 * whose `new ...; invokespecial <init>` differ only in the class. Memory
 * stays bounded by ARENA_CHOOSE. */
#define MAX_PENDING 2000000
/* Decoder events looked ahead (the opcodes that follow filter candidates). */
#define LOOKAHEAD 64
#define RETURN_FANOUT 64   /* see expand */
/* Events held for the lookahead: compiled code between two interpreted
 * bytecodes (an interpreted invoke's compiled callee) can be long. */
#define QUEUE 8192
/* Work bound of one lookahead walk through a CFG. */
#define WALK_BUDGET 2048
/* Frames a lookahead walk follows into callees. */
#define WALK_DEPTH 24
/* Frames and history live in an arena that is compacted when it outgrows
 * this and a single hypothesis is left. */
#define ARENA_BLOCK (1u << 20)
#define ARENA_COMPACT (32u << 20)
/* Memory a long ambiguity may take before the first hypothesis is chosen:
 * memory stays bounded whatever the trace. Most of a full arena can be
 * frames no path holds any more (a fresh one per bytecode). With FEW_PATHS
 * or fewer, those are dropped, and the choice waits until what the paths
 * hold takes half the bound. On lusearch with JDK 25, BooleanQuery.
 * createWeight's `new` has the VM load a class for 437,000 events: four
 * paths filled the arena, and the choice kept Query.createWeight's, which
 * the next bytecode ruled out. Many paths hold far more and seldom settle
 * later (choose_forced keeps the ones that parted lately): on xalan,
 * copying them too took 8-12% more time and changed no calling context. */
#define ARENA_CHOOSE ((size_t)256 << 20)
#define FEW_PATHS 16

/* Frames kept of the stack earlier segments ended with (before_save). */
#define BEFORE_MAX 4096

#define NONE UINT32_MAX
#define ANY (UINT32_MAX - 1)

enum frame_kind {
    FR_INTERP = 1,   /* an interpreted method at a known instruction (or ANY of its) */
    FR_UNKNOWN,      /* frames nobody has seen: the segment's unknown context */
    FR_COMPILED,     /* a compiled method's frame (inline frames have inline_depth > 1) */
    FR_OPAQUE,       /* a method that runs no bytecodes here: native or intrinsic */
    FR_VMCALL,       /* the VM called Java through the call stub */
};

typedef struct frame {
    const struct frame *caller;
    uint32_t depth;
    uint8_t kind;
    bool calling;          /* FR_INTERP: the invoke at `last` is in progress;
                            * FR_VMCALL: its callee has been entered;
                            * FR_COMPILED: it made a call (a method, a stub)
                            * that has not returned */
    bool throwing;         /* FR_INTERP: an exception is dispatched from `last` */
    bool after_return;     /* FR_UNKNOWN: reached by returning from `returned` */
    uint32_t method;       /* program index; NONE when unknown */
    uint32_t insn;         /* FR_INTERP: next instruction, or ANY */
    uint32_t last;         /* FR_INTERP: last instruction run here, or NONE */
    uint32_t returned;     /* FR_UNKNOWN after_return: program index or NONE */
    uint32_t inline_depth; /* FR_COMPILED */
    int32_t bci;           /* FR_COMPILED: current bci of the frame (compiled.h moves it) */
    uint64_t method_id;    /* the agent's id (0: unknown) */
    const void *code;      /* FR_COMPILED: the version */
    /* FR_INTERP or FR_COMPILED of an instance method: what its receiver's
     * class is known to be (program.h, receivers); NULL: unknown */
    const rc_class *recv;
    bool this_call;        /* FR_INTERP, FR_COMPILED: entered by a call on the
                            * caller's own receiver, which it shares */
    bool from_before;      /* taken from the stack earlier segments ended
                            * with (before_save), or derived from such a frame */
} frame;

typedef struct hist {
    const struct hist *prev;
    uint32_t len;          /* records in the chain up to this one, since the
                            * last it was emitted to */
    uint8_t kind;          /* fl_kind */
    uint32_t flags;
    int32_t bci, opcode;
    uint64_t method_id;
    uint64_t tsc;
    uint64_t offset;       /* fl_event.offset */
} hist;

typedef struct hyp {
    const frame *top;
    const hist *h;
    /* How many times this path took the VM to call a Java method that the
     * instruction it interrupted gives no reason for (not among
     * rc_vm_call_targets). Of hypotheses the trace cannot tell apart, the
     * one with the fewest is kept: a getstatic of class C that the VM
     * interrupts to run C.<clinit> explains that call, the same template
     * on another switch arm does not. */
    uint32_t doubt;
} hyp;

typedef struct arena {
    GPtrArray *blocks;
    GPtrArray *spare;      /* blocks of an arena compacted away, for reuse */
    size_t used;           /* in the last block */
    size_t total;
} arena;

/* Candidate positions by opcode, built once per program on first need. */
typedef struct pos {
    uint32_t method, insn;
} pos;

/* The same positions keyed by their first two opcodes. A lookahead walk
 * (walk) explains two opcodes from an instruction other than an invoke, a
 * return or athrow only if one of its successors (exception edges aside)
 * has the second: keyed by that pair, the candidates for a lookahead are a
 * few where all instructions of its first opcode would be all of the
 * program's (their number grows with the program, the work per unknown
 * context with it). Invokes, returns and athrow are kept by opcode alone. */
typedef struct pos_pairs {
    uint32_t *off;             /* 65536 + 1: positions of pair (a << 8 | b) in v */
    pos *v;
    GArray *special[256];      /* invokes, returns, athrow */
} pos_pairs;

typedef struct pos_index {
    GArray *any[256];          /* every instruction */
    GArray *start[256];        /* instruction 0 of every method */
    GArray *after_call[256];   /* instructions right after an invoke */
    pos_pairs any2, start2, after_call2;
} pos_index;

typedef enum entry_kind_t {
    EK_JAVA, EK_SYNC, EK_NATIVE, EK_NATIVE_SYNC, EK_ABSTRACT, EK_INTRINSIC, EK_NONE
} entry_kind_t;

struct rp_index {
    rc_program *p;
    GMutex lock;
    pos_index *x;              /* built on first use */
};

struct rp_projector {
    rc_program *p;
    rp_index *shared;
    uint32_t tid;
    fl_sink sink;
    void *ctx;
    GArray *cur, *next;        /* hyp */
    arena *a;
    dc_event q[QUEUE];
    size_t qhead, qlen;
    rp_stats st;
    GHashTable *entry_memo;    /* method index + 1 -> event number << 2 | entry_score */
    /* Classes (their interned name) whose constructor the emitted flow ran: an
     * object of a class, or of a subclass, exists (a subclass's constructor
     * runs its superclasses'). Rapid type analysis: a virtual call's targets
     * in such classes are entered first, so that when the trace cannot tell
     * two targets apart (the same bytecodes: Lucene's ClassicTokenizer and
     * StandardTokenizer.incrementToken), the hypothesis kept is one whose
     * receiver can exist. */
    GHashTable *instantiated;
    /* Classes (interned names) a choice between call targets took to have no
     * objects (rp_track_assumptions; NULL: not tracked) */
    GHashTable *assumed_absent;
    /* (frame, receiver bound) -> the frame's copy with that bound (rebind);
     * keys and copies live in the arena, emptied when it is compacted */
    GHashTable *rebound;
    /* expand's scored candidates for the event being processed: every
     * hypothesis whose context is unknown asks the same question */
    uint64_t fit_event;
    GPtrArray *fit_memo;       /* fit_entry */
    bool seg_open, seg_chosen;
    bool after_gap;            /* the next segment follows a gap in the trace */
    /* the gap (or gaps in a row) before the next segment: stream offsets
     * where it began and where decoding resumed, bytes the collector lost,
     * and whether each of them counted its loss */
    uint64_t gap_offset, resume_offset, lost_bytes;
    bool lost_counted;
    uint64_t seg_seq;
    uint64_t pending;          /* events since the set last narrowed to one */
    int stop;
    /* the event being processed and where its lookahead starts */
    const dc_event *ev;
    size_t ev_slot;
    /* the last bytecode's dc_event.itable_pos if it was an invokeinterface
     * (0: none): where the callee's entry comes next, it tells the
     * receiver's class apart (rc_itable_may_run) */
    uint32_t call_itable_pos;
    uint32_t doubt;            /* of the hypothesis being stepped (hyp.doubt) */
    /* A VM call that no ranked target explains is entered through any
     * method (enter_any): a product of callers and callees that can reach
     * MAX_HYP. Those doubtful entries are made in a second pass over the
     * hypotheses that have one (their indices in cur), after every other
     * hypothesis of the event: the cap then drops doubtful ones first. */
    bool defer_doubtful, doubtful_pass;
    GArray *deferred;          /* guint */
    guint stepping;            /* index in cur of the hypothesis being stepped */
    /* The stack the segments since the last loss of trace ended with
     * (frames by value, outermost first: before_save): the frames below the
     * point where the trace stopped being understood are still there when
     * the next segment starts (expand, step_jit_enter). before_chain[k] is
     * frame k's copy in the arena with its callers linked, made on first
     * use. */
    GArray *before;            /* frame */
    GPtrArray *before_chain;   /* const frame *, NULL until made */
    GPtrArray *save_chain;     /* before_save's scratch */
    GHashTable *calls_method;  /* uint64_t caller << 32 | callee -> 1 no, 2 yes */
    /* compiled code at the bytecode level, in front of the queue (NULL:
     * the decoder's scope events come as they are) */
    rj_filter *jit;
};

/* ------------------------------------------------------------------------ */

static arena *arena_new(void)
{
    arena *a = g_new0(arena, 1);
    a->blocks = g_ptr_array_new_with_free_func(g_free);
    a->spare = g_ptr_array_new_with_free_func(g_free);
    a->used = ARENA_BLOCK;
    return a;
}

static void arena_free(arena *a)
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
static void arena_recycle(arena *a, arena *old)
{
    GPtrArray *from[2] = { old->blocks, old->spare };
    for (int i = 0; i < 2; i++)
        while (from[i]->len && a->spare->len < ARENA_COMPACT / ARENA_BLOCK + 1)
            g_ptr_array_add(a->spare, g_ptr_array_steal_index_fast(from[i], from[i]->len - 1));
    arena_free(old);
}

static void *arena_alloc(arena *a, size_t n)
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

typedef struct pair_ent {
    uint32_t key;
    pos ps;
} pair_ent;

static int cmp_pair_ent(const void *a, const void *b)
{
    const pair_ent *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    if (x->ps.method != y->ps.method)
        return x->ps.method < y->ps.method ? -1 : 1;
    return x->ps.insn < y->ps.insn ? -1 : x->ps.insn > y->ps.insn;
}

static bool is_special(int op) { return jvm_is_invoke(op) || jvm_is_return(op) || op == JVM_ATHROW; }

/* Adds instruction i of method mi (cfg g) to pp: by opcode if special, else
 * under each distinct opcode among its successors. */
static void pairs_add(pos_pairs *pp, GArray *ents, const rc_cfg *g, uint32_t mi, uint32_t i)
{
    pos ps = { mi, i };
    int op = g->op[i];
    if (is_special(op)) {
        g_array_append_val(pp->special[op], ps);
        return;
    }
    bool seen[256] = { false };
    for (uint32_t e = g->first[i]; e < g->first[i + 1]; e++) {
        uint32_t to = g->edge[e].to;
        if (g->edge[e].kind == RC_EDGE_EXCEPTION || to >= g->ninsn || seen[g->op[to]])
            continue;
        seen[g->op[to]] = true;
        pair_ent pe = { (uint32_t)op << 8 | g->op[to], ps };
        g_array_append_val(ents, pe);
    }
}

static void pairs_finish(pos_pairs *pp, GArray *ents)
{
    if (ents->len > 1)
        qsort(ents->data, ents->len, sizeof(pair_ent), cmp_pair_ent);
    pp->off = g_new0(uint32_t, 65536 + 1);
    pp->v = g_new(pos, ents->len ? ents->len : 1);
    for (guint k = 0; k < ents->len; k++) {
        const pair_ent *pe = &g_array_index(ents, pair_ent, k);
        pp->v[k] = pe->ps;
        pp->off[pe->key + 1]++;
    }
    for (uint32_t key = 0; key < 65536; key++)
        pp->off[key + 1] += pp->off[key];
}

static void pairs_free(pos_pairs *pp)
{
    g_free(pp->off);
    g_free(pp->v);
    for (int o = 0; o < 256; o++)
        if (pp->special[o])
            g_array_free(pp->special[o], TRUE);
}

/* The candidates of pp for a lookahead of n opcodes sym (sym[0] an opcode),
 * in (method, insn) order as in the unkeyed lists; NULL when the lookahead
 * is too short to narrow them (the caller uses all of sym[0]'s). */
static GArray *pairs_narrow(const pos_pairs *pp, const uint16_t *sym, size_t n)
{
    if (!pp || n < 2 || sym[0] >= 0x100)
        return NULL;
    const GArray *sp = pp->special[sym[0]];
    const pos *a = NULL, *b = (const pos *)(const void *)sp->data;
    size_t na = 0, nb = sp->len;
    if (sym[1] < 0x100) {      /* (else no other instruction explains it) */
        uint32_t key = (uint32_t)sym[0] << 8 | sym[1];
        a = pp->v + pp->off[key];
        na = pp->off[key + 1] - pp->off[key];
    }
    GArray *out = g_array_sized_new(FALSE, FALSE, sizeof(pos), (guint)(na + nb));
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        bool take_a = j >= nb || (i < na && (a[i].method < b[j].method ||
                                             (a[i].method == b[j].method &&
                                              a[i].insn < b[j].insn)));
        pos v = take_a ? a[i++] : b[j++];
        g_array_append_val(out, v);
    }
    return out;
}

static pos_index *index_build(rc_program *p)
{
    pos_index *x = g_new0(pos_index, 1);
    GArray *ents[3];
    pos_pairs *pps[3] = { &x->any2, &x->start2, &x->after_call2 };
    for (int l = 0; l < 3; l++) {
        ents[l] = g_array_new(FALSE, FALSE, sizeof(pair_ent));
        for (int o = 0; o < 256; o++)
            pps[l]->special[o] = g_array_new(FALSE, FALSE, sizeof(pos));
    }
    for (int o = 0; o < 256; o++) {
        x->any[o] = g_array_new(FALSE, FALSE, sizeof(pos));
        x->start[o] = g_array_new(FALSE, FALSE, sizeof(pos));
        x->after_call[o] = g_array_new(FALSE, FALSE, sizeof(pos));
    }
    size_t n = rc_program_nmethods(p);
    for (uint32_t mi = 0; mi < n; mi++) {
        const rc_method *m = rc_method_at(p, mi);
        if (!m || !m->code || !rc_method_may_have_run(p, m))
            continue;
        const rc_cfg *g = rc_cfg_get(p, m);
        if (!g)
            continue;
        for (uint32_t i = 0; i < g->ninsn; i++) {
            pos ps = { mi, i };
            g_array_append_val(x->any[g->op[i]], ps);
            pairs_add(&x->any2, ents[0], g, mi, i);
            if (i == 0) {
                g_array_append_val(x->start[g->op[i]], ps);
                pairs_add(&x->start2, ents[1], g, mi, i);
            } else if (jvm_is_invoke(g->op[i - 1])) {
                g_array_append_val(x->after_call[g->op[i]], ps);
                pairs_add(&x->after_call2, ents[2], g, mi, i);
            }
        }
    }
    for (int l = 0; l < 3; l++) {
        pairs_finish(pps[l], ents[l]);
        g_array_free(ents[l], TRUE);
    }
    return x;
}

static void index_free(pos_index *x)
{
    if (!x)
        return;
    for (int o = 0; o < 256; o++) {
        g_array_free(x->any[o], TRUE);
        g_array_free(x->start[o], TRUE);
        g_array_free(x->after_call[o], TRUE);
    }
    pairs_free(&x->any2);
    pairs_free(&x->start2);
    pairs_free(&x->after_call2);
    g_free(x);
}

rp_index *rp_index_new(rc_program *p)
{
    rp_index *x = g_new0(rp_index, 1);
    x->p = p;
    g_mutex_init(&x->lock);
    return x;
}

void rp_index_free(rp_index *x)
{
    if (!x)
        return;
    index_free(x->x);
    g_mutex_clear(&x->lock);
    g_free(x);
}

/* The index is needed only where a context is unknown; most threads of a
 * lossless trace start at the call stub, so build it on first use. */
static pos_index *index_get(rp_projector *r);

/* ------------------------------------------------------------------------ */

static const dc_event *queued(const rp_projector *r, size_t k)
{
    return &r->q[(r->qhead + k) % QUEUE];
}

/* Lookahead symbols: the opcodes that follow, with the method entries and
 * interpreter returns between them, up to the first event the walk cannot
 * follow (compiled code, stubs, exceptions). */
enum { SYM_ENTRY = 0x100, SYM_IRET = 0x200, SYM_STOP = 0x300, SYM_COMPILED = 0x400 };

static entry_kind_t entry_kind_of(const char *desc);

/* How a conditional branch went, where the decoder could tell (br[]). */
enum { BR_UNKNOWN = 0, BR_TAKEN, BR_NOT_TAKEN };

static uint8_t branch_of(const dc_event *e)
{
    return (e->flags & DC_F_TAKEN) ? BR_TAKEN : (e->flags & DC_F_NOT_TAKEN) ? BR_NOT_TAKEN
                                                                             : BR_UNKNOWN;
}

static uint32_t index_of_id(const rp_projector *r, uint64_t id);

static bool is_adapter_stub(const dc_event *e)
{
    return e->desc && strstr(e->desc, "I2C") != NULL;   /* "I2C/C2I adapters" */
}

/* Skips a compiled callee's events after queue position k (its DC_JIT_ENTER)
 * to the interpreter's return into the caller: the position of that
 * DC_INTERP_RETURN, or the queue's length if it is not in the queue (or
 * something the walk cannot follow comes first). Interpreted methods the
 * compiled code calls meanwhile are counted in and out. */
static size_t skip_compiled(const rp_projector *r, size_t k)
{
    unsigned nest = 0;
    for (k++; k < r->qlen; k++) {
        const dc_event *e = queued(r, k);
        switch (e->kind) {
        case DC_METHOD_ENTRY: {
            /* a method without bytecodes (native, intrinsic) leaves without
             * a return bytecode: its end cannot be told here */
            entry_kind_t ek = entry_kind_of(e->desc);
            if (ek != EK_JAVA && ek != EK_SYNC)
                return r->qlen;
            nest++;
            break;
        }
        case DC_BYTECODE:
            if (nest && jvm_is_return(e->opcode))
                nest--;
            break;
        case DC_INTERP_RETURN:
            if (!nest)
                return k;
            break;
        case DC_GAP:
        case DC_EXCEPTION:
        case DC_THROW:
        case DC_DEOPT:
        case DC_EARLYRET:
        case DC_INTERP_OTHER:
            return r->qlen;
        default:
            break;
        }
    }
    return r->qlen;
}

static size_t lookahead(const rp_projector *r, size_t from, uint16_t *sym, uint8_t *br,
                        uint32_t *callee, size_t max)
{
    size_t n = 0;
    for (size_t k = from; k < r->qlen && n < max; k++) {
        const dc_event *e = queued(r, k);
        br[n] = BR_UNKNOWN;
        callee[n] = NONE;
        switch (e->kind) {
        case DC_BYTECODE:
            if (e->opcode < 0)
                return n;
            br[n] = branch_of(e);
            sym[n++] = (uint16_t)e->opcode;
            break;
        case DC_SAFEPOINT:
        case DC_NATIVE:
            break;
        case DC_INTERP_RETURN:
            sym[n++] = SYM_IRET;
            break;
        case DC_METHOD_ENTRY:
        case DC_INTERP_OTHER: {
            entry_kind_t ek = entry_kind_of(e->desc);
            if (ek == EK_NONE)
                return n;
            sym[n++] = (uint16_t)(SYM_ENTRY | ek);
            break;
        }
        case DC_STUB:
            if (!is_adapter_stub(e))
                return n;
            break;             /* i2c: the compiled callee follows */
        case DC_JIT_ENTER: {
            /* an interpreted invoke's compiled callee: one symbol naming
             * it, then the interpreter's return into the caller */
            if (!n || !jvm_is_invoke(sym[n - 1]) || (e->flags & DC_F_BY_RETURN))
                return n;
            callee[n] = index_of_id(r, e->method_id);
            sym[n++] = SYM_COMPILED;
            k = skip_compiled(r, k);
            if (k >= r->qlen)
                return n;
            k--;               /* the DC_INTERP_RETURN comes next */
            break;
        }
        default:
            return n;
        }
    }
    return n;
}

static bool entry_fits(entry_kind_t k, const rc_method *m);

typedef struct walker {
    rp_projector *r;
    const uint16_t *sym;
    const uint8_t *br;         /* per symbol: how a branch went (BR_*) */
    const uint32_t *callee;    /* per SYM_COMPILED: the compiled callee (NONE: unknown) */
    size_t n;
    int budget;
    struct { uint32_t method, insn; } stack[WALK_DEPTH];
} walker;

/* How well a walk explains the lookahead. */
enum { W_NO = 0, W_MAYBE = 1, W_YES = 2 };

static int best(int a, int b) { return a > b ? a : b; }

/* Whether a branch that went `how` can have followed an edge of this kind. */
static bool edge_fits(int kind, uint8_t how)
{
    return how == BR_UNKNOWN || (how == BR_TAKEN ? kind == RC_EDGE_TAKEN : kind == RC_EDGE_NEXT);
}

/* Can the program produce sym[k..n) from the frames stack[0..depth)
 * (stack[depth - 1] about to run its instruction)? W_YES when it does up to
 * where the lookahead ends, leaves what the walk can follow, or the walk's
 * budget or depth runs out; W_MAYBE when it cannot decide (a call site whose
 * targets are open, an event the walk does not model); W_NO when it cannot. */
static int walk(walker *w, size_t depth, size_t k)
{
    if (k >= w->n)
        return W_YES;
    if (--w->budget < 0)
        return W_YES;           /* consistent as far as it was followed */
    uint32_t mi = w->stack[depth - 1].method, i = w->stack[depth - 1].insn;
    const rc_method *m = rc_method_at(w->r->p, mi);
    const rc_cfg *g = m ? rc_cfg_get(w->r->p, m) : NULL;
    uint16_t s = w->sym[k];
    if (!g || s >= 0x100 || i >= g->ninsn || g->op[i] != s)
        return W_NO;
    if (s == JVM_ATHROW)
        return W_YES;
    if (jvm_is_return(s)) {
        if (depth == 1)
            return W_YES;       /* returns past what the walk knows */
        if (k + 1 < w->n && w->sym[k + 1] != SYM_IRET)
            return W_NO;
        return walk(w, depth - 1, k + 2);
    }
    if (jvm_is_invoke(s)) {
        uint32_t next = NONE;
        for (uint32_t e = g->first[i]; e < g->first[i + 1]; e++)
            if (g->edge[e].kind == RC_EDGE_NEXT)
                next = g->edge[e].to;
        if (k + 1 >= w->n)
            return W_YES;
        if (depth >= WALK_DEPTH)
            return W_YES;       /* consistent as far as it was followed */
        if (w->sym[k + 1] == SYM_COMPILED && next != NONE) {
            /* a compiled callee (i2c): it must be a target; the caller
             * goes on after the interpreter's return */
            const rc_method *const *t;
            bool open = false;
            size_t nt = rc_call_targets_at(w->r->p, m, i, &t, &open);
            uint32_t c = w->callee[k + 1];
            bool found = c == NONE || open;   /* (open: any method may be it) */
            for (size_t j = 0; j < nt && !found; j++)
                found = t[j]->index == c;
            if (!found)
                return W_NO;
            size_t q = k + 2;
            if (q < w->n && w->sym[q] == SYM_IRET)
                q++;
            w->stack[depth - 1].insn = next;
            int res = walk(w, depth, q);
            w->stack[depth - 1].insn = i;
            return res;
        }
        if ((w->sym[k + 1] & 0xff00) != SYM_ENTRY || next == NONE)
            return W_MAYBE;
        entry_kind_t ek = (entry_kind_t)(w->sym[k + 1] & 0xff);
        const rc_method *const *t;
        bool open = false;
        size_t nt = rc_call_targets_at(w->r->p, m, i, &t, &open);
        int res = W_NO;
        if (ek != EK_JAVA && ek != EK_SYNC) {
            /* runs no bytecodes: continues in this frame after the interpreter's return */
            bool fits = false;
            for (size_t j = 0; j < nt && !fits; j++)
                fits = entry_fits(ek, t[j]);
            if (!fits)
                return open ? W_MAYBE : W_NO;
            size_t q = k + 2;
            if (q < w->n && w->sym[q] == SYM_IRET)
                q++;
            else if (q < w->n && (w->sym[q] & 0xff00))
                return W_MAYBE; /* a call back into Java */
            w->stack[depth - 1].insn = next;
            res = walk(w, depth, q);
            w->stack[depth - 1].insn = i;
            return res;
        }
        for (size_t j = 0; j < nt && res < W_YES; j++) {
            if (!entry_fits(ek, t[j]) || !t[j]->code)
                continue;
            w->stack[depth - 1].insn = next;
            w->stack[depth].method = t[j]->index;
            w->stack[depth].insn = 0;
            res = best(res, walk(w, depth + 1, k + 2));
            w->stack[depth - 1].insn = i;
        }
        if (open && res == W_NO)
            res = W_MAYBE;
        return res;
    }
    int res = W_NO;
    uint8_t how = w->br[k];
    for (uint32_t e = g->first[i]; e < g->first[i + 1] && res < W_YES; e++) {
        if (g->edge[e].kind == RC_EDGE_EXCEPTION || !edge_fits(g->edge[e].kind, how))
            continue;
        w->stack[depth - 1].insn = g->edge[e].to;
        res = best(res, walk(w, depth, k + 1));
        w->stack[depth - 1].insn = i;
    }
    return res;
}

static int accepts(rp_projector *r, uint32_t method, uint32_t insn, const uint16_t *sym,
                   const uint8_t *br, const uint32_t *callee, size_t n)
{
    walker w = { .r = r, .sym = sym, .br = br, .callee = callee, .n = n,
                 .budget = WALK_BUDGET };
    w.stack[0].method = method;
    w.stack[0].insn = insn;
    return walk(&w, 1, 0);
}

/* ------------------------------------------------------------------------ */

static frame *frame_copy(rp_projector *r, const frame *f)
{
    frame *n = arena_alloc(r->a, sizeof *n);
    *n = *f;
    return n;
}

static const frame *push(rp_projector *r, const frame *caller, frame f)
{
    f.caller = caller;
    f.depth = caller ? caller->depth + 1 : 1;
    return frame_copy(r, &f);
}

static frame interp_frame(uint32_t method, uint32_t insn, uint64_t id)
{
    return (frame){ .kind = FR_INTERP, .method = method, .insn = insn, .last = NONE,
                    .returned = NONE, .method_id = id };
}

static frame unknown_frame(void)
{
    return (frame){ .kind = FR_UNKNOWN, .method = NONE, .insn = NONE, .last = NONE,
                    .returned = NONE };
}

static const hist *record(rp_projector *r, const hist *prev, fl_kind kind, uint64_t method_id,
                          int32_t bci, int32_t opcode, uint32_t flags)
{
    hist *h = arena_alloc(r->a, sizeof *h);
    *h = (hist){ .prev = prev, .len = prev ? prev->len + 1 : 1, .kind = (uint8_t)kind,
                 .flags = flags, .bci = bci, .opcode = opcode, .method_id = method_id,
                 .tsc = r->ev->tsc, .offset = r->ev->offset };
    return h;
}

static uint64_t method_id_of(const rp_projector *r, uint32_t method)
{
    const rc_method *m = method == NONE ? NULL : rc_method_at(r->p, method);
    return m ? m->id : 0;
}

static void add(rp_projector *r, const frame *top, const hist *h)
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
static const hist *infer_intrinsic_call(rp_projector *r, const frame *f, const hist *h)
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
    h = record(r, h, FL_CALL, t[0]->id, f->bci, -1, fl);
    return record(r, h, FL_RETURN, t[0]->id, -1, -1, fl);
}

/* Pops the top frame, recording the return of a method frame
 * (FL_F_EXCEPTION: it is unwound); returns its caller. */
static const frame *pop(rp_projector *r, const frame *f, const hist **h, uint32_t flags)
{
    if (f->kind == FR_INTERP || f->kind == FR_COMPILED || f->kind == FR_OPAQUE) {
        uint32_t fl = flags | (f->kind == FR_COMPILED ? FL_F_COMPILED : 0) |
                      (f->kind == FR_COMPILED && f->inline_depth > 1 ? FL_F_INLINED : 0);
        *h = record(r, *h, FL_RETURN, f->method_id, -1, -1, fl);
    }
    return f->caller;
}

/* After the frame of `method` returned: the new top learns it. */
static const frame *returned_to(rp_projector *r, const frame *caller, uint32_t method)
{
    if (!caller) {
        frame u = unknown_frame();
        u.after_return = true;
        u.returned = method;
        return push(r, NULL, u);
    }
    if (caller->kind == FR_INTERP && caller->calling) {
        frame c = *caller;
        c.calling = false;
        return frame_copy(r, &c);
    }
    /* The VM's call returns to the VM, inside the instruction that made it
     * call: that frame is as it was (an invoke in progress stays so). */
    if (caller->kind == FR_VMCALL && caller->calling) {
        const frame *below = caller->caller;
        if (below && below->kind == FR_INTERP)
            return below;
        /* (an unknown frame: at any instruction, not after an invoke) */
        return below && below->kind == FR_UNKNOWN ? below : returned_to(r, below, NONE);
    }
    if (caller->kind == FR_UNKNOWN) {
        frame u = *caller;
        u.after_return = true;
        u.returned = method;
        return frame_copy(r, &u);
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
static void before_save(rp_projector *r, const frame *top)
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

static void before_forget(rp_projector *r)
{
    g_array_set_size(r->before, 0);
    g_ptr_array_set_size(r->before_chain, 0);
}

/* Saved frame k in the arena, its saved callers linked below it. */
static const frame *before_frame(rp_projector *r, guint k)
{
    if (r->before_chain->len < r->before->len)
        g_ptr_array_set_size(r->before_chain, r->before->len);
    for (guint i = 0; i <= k; i++)
        if (!g_ptr_array_index(r->before_chain, i))
            r->before_chain->pdata[i] = (gpointer)push(
                r, i > 0 ? g_ptr_array_index(r->before_chain, i - 1) : NULL,
                g_array_index(r->before, frame, i));
    return g_ptr_array_index(r->before_chain, k);
}

/* The innermost saved frame that runs `method` interpreted, or with `code`
 * (not NULL) that compiled version; -1: none. */
static int before_find(const rp_projector *r, uint32_t method, const void *code)
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
static const hist *record_before(rp_projector *r, const hist *h, guint k)
{
    for (guint i = 0; i <= k; i++) {
        const frame *f = &g_array_index(r->before, frame, i);
        if (f->kind == FR_INTERP || f->kind == FR_COMPILED || f->kind == FR_OPAQUE)
            h = record(r, h, FL_CALL, f->method_id, -1, -1,
                       FL_F_CONTEXT | (f->kind == FR_COMPILED ? FL_F_COMPILED : 0) |
                           (f->kind == FR_COMPILED && f->inline_depth > 1 ? FL_F_INLINED : 0));
    }
    return h;
}

/* ------------------------------------------------------------------------ */
/* Bytecodes */

static void step_interp_bc(rp_projector *r, const frame *f, const hist *h, int op,
                           const dc_event *e)
{
    const rc_method *m = rc_method_at(r->p, f->method);
    const rc_cfg *g = m ? rc_cfg_get(r->p, m) : NULL;
    if (!g || f->insn >= g->ninsn || g->op[f->insn] != op)
        return;
    uint32_t i = f->insn;
    h = record(r, h, FL_BYTECODE, m->id, (int32_t)g->bci[i], op, 0);
    if (jvm_is_return(op)) {
        const hist *hh = h;
        const frame *c = pop(r, f, &hh, 0);
        add(r, returned_to(r, c, f->method), hh);
        return;
    }
    frame n = *f;
    n.last = i;
    n.throwing = false;
    if (op == JVM_ATHROW) {
        n.throwing = true;
        add(r, frame_copy(r, &n), h);
        return;
    }
    if (jvm_is_invoke(op)) {
        n.calling = true;
        n.insn = NONE;
        for (uint32_t k = g->first[i]; k < g->first[i + 1]; k++)
            if (g->edge[k].kind == RC_EDGE_NEXT)
                n.insn = g->edge[k].to;
        add(r, frame_copy(r, &n), h);
        return;
    }
    uint8_t how = e ? branch_of(e) : BR_UNKNOWN;
    for (uint32_t k = g->first[i]; k < g->first[i + 1]; k++) {
        if (g->edge[k].kind == RC_EDGE_EXCEPTION || !edge_fits(g->edge[k].kind, how))
            continue;
        /* switch targets may repeat, and a branch may jump to the next
         * instruction (`if_icmpne` over an empty block): a target is
         * entered once, through the first edge of the outcome seen */
        bool dup = false;
        for (uint32_t j = g->first[i]; j < k; j++)
            if (g->edge[j].kind != RC_EDGE_EXCEPTION && edge_fits(g->edge[j].kind, how) &&
                g->edge[j].to == g->edge[k].to)
                dup = true;
        if (dup)
            continue;
        n.insn = g->edge[k].to;
        add(r, frame_copy(r, &n), h);
    }
}

/* Which of a scores() list's candidates may follow the return of a given
 * method: a candidate at instruction 0, or after an open call site, may
 * follow any (`any`); one after a call site follows the return of each of
 * the site's targets (`by_callee`: method index -> candidate indices). Both
 * hold indices into the list in increasing order. Built once per list and
 * event, so that each of the event's hypotheses (one per method returned
 * from, hundreds at some events) is filtered without looking up every
 * candidate's call site again. */
typedef struct callee_index {
    GArray *any;               /* guint */
    GHashTable *by_callee;     /* GUINT_TO_POINTER(method index + 1) -> GArray of guint */
} callee_index;

typedef struct fit_entry {
    const void *cands;         /* expand: the index list; enter_any: NULL */
    uint32_t only_method, returned;
    int op;                    /* expand: the opcode; enter_any: -1 - entry kind */
    GArray *fit;               /* expand: pos; enter_any: method indices */
    callee_index *callees;     /* a scores() entry's, once scored() needed it */
} fit_entry;

static void index_list_free(gpointer p)
{
    g_array_free(p, TRUE);
}

static void fit_entry_free(gpointer p)
{
    fit_entry *f = p;
    g_array_free(f->fit, TRUE);
    if (f->callees) {
        g_array_free(f->callees->any, TRUE);
        g_hash_table_destroy(f->callees->by_callee);
        g_free(f->callees);
    }
    g_free(f);
}

/* Candidates from an index, filtered by the lookahead; each becomes a frame
 * on top of `below` (and is run through the current bytecode). */
/* The candidates that best explain the lookahead (expand); the same for
 * every hypothesis at this event, so computed once per event. */
typedef struct scored_pos {
    pos ps;
    int score;
} scored_pos;

#define RAW_SCORES (NONE - 1)  /* fit_entry.returned of a scores() entry */

static fit_entry *memo_find(rp_projector *r, const void *cands, uint32_t only_method,
                            uint32_t returned, int op)
{
    if (r->fit_event != r->st.events) {
        g_ptr_array_set_size(r->fit_memo, 0);
        r->fit_event = r->st.events;
    }
    for (guint k = 0; k < r->fit_memo->len; k++) {
        fit_entry *f = g_ptr_array_index(r->fit_memo, k);
        if (f->cands == cands && f->only_method == only_method && f->returned == returned &&
            f->op == op)
            return f;
    }
    return NULL;
}

static const GArray *memo_add(rp_projector *r, const void *cands, uint32_t only_method,
                              uint32_t returned, int op, GArray *fit)
{
    fit_entry *memo = g_new0(fit_entry, 1);
    memo->cands = cands;
    memo->only_method = only_method;
    memo->returned = returned;
    memo->op = op;
    memo->fit = fit;
    g_ptr_array_add(r->fit_memo, memo);
    return fit;
}

/* How well each candidate explains the lookahead (scored_pos, W_NO left
 * out); once per event for each candidate list. */
static const GArray *scores(rp_projector *r, GArray *cands, const pos_pairs *pp,
                            uint32_t only_method, int op, const dc_event *e)
{
    const fit_entry *f = memo_find(r, cands, only_method, RAW_SCORES, op);
    if (f)
        return f->fit;
    uint16_t ops[LOOKAHEAD];
    uint8_t br[LOOKAHEAD];
    uint32_t jm[LOOKAHEAD];
    size_t n = lookahead(r, r->ev_slot, ops, br, jm, LOOKAHEAD);
    if (n == 0 || ops[0] != op) {
        ops[0] = (uint16_t)op;
        br[0] = e ? branch_of(e) : BR_UNKNOWN;
        jm[0] = NONE;
        n = 1;
    }
    /* the positions that can explain more than the first opcode (the
     * others score W_NO: see pos_pairs) */
    GArray *list = only_method == NONE ? pairs_narrow(pp, ops, n) : NULL;
    if (only_method != NONE) {
        /* the method's own instructions of that opcode (in the order of the
         * program-wide list, without going through it) */
        const rc_method *om = rc_method_at(r->p, only_method);
        const rc_cfg *og = om ? rc_cfg_get(r->p, om) : NULL;
        list = g_array_new(FALSE, FALSE, sizeof(pos));
        for (uint32_t i = 0; og && i < og->ninsn; i++) {
            if (og->op[i] != op)
                continue;
            pos ps = { only_method, i };
            g_array_append_val(list, ps);
        }
    }
    const GArray *c = list ? list : cands;
    GArray *out = g_array_new(FALSE, FALSE, sizeof(scored_pos));
    for (guint k = 0; k < c->len; k++) {
        scored_pos sp = { g_array_index(c, pos, k), W_NO };
        if (only_method != NONE && sp.ps.method != only_method)
            continue;
        if (!rc_method_may_run(r->p, rc_method_at(r->p, sp.ps.method), r->ev->tsc))
            continue;
        sp.score = accepts(r, sp.ps.method, sp.ps.insn, ops, br, jm, n);
        if (sp.score > W_NO)
            g_array_append_val(out, sp);
    }
    if (list)
        g_array_free(list, TRUE);
    return memo_add(r, cands, only_method, RAW_SCORES, op, out);
}

static callee_index *callee_index_of(rp_projector *r, const GArray *all)
{
    callee_index *ci = g_new0(callee_index, 1);
    ci->any = g_array_new(FALSE, FALSE, sizeof(guint));
    ci->by_callee = g_hash_table_new_full(NULL, NULL, NULL, index_list_free);
    for (guint k = 0; k < all->len; k++) {
        const scored_pos *sp = &g_array_index(all, scored_pos, k);
        if (sp->ps.insn == 0) {
            g_array_append_val(ci->any, k);
            continue;
        }
        const rc_method *cm = rc_method_at(r->p, sp->ps.method);
        const rc_method *const *t;
        bool open = false;
        size_t nt = rc_call_targets_at(r->p, cm, sp->ps.insn - 1, &t, &open);
        if (open)
            g_array_append_val(ci->any, k);
        for (size_t j = 0; j < nt; j++) {
            gpointer key = GUINT_TO_POINTER(t[j]->index + 1);
            GArray *l = g_hash_table_lookup(ci->by_callee, key);
            if (!l) {
                l = g_array_new(FALSE, FALSE, sizeof(guint));
                g_hash_table_insert(ci->by_callee, key, l);
            }
            /* a target listed twice adds the candidate once */
            if (!l->len || g_array_index(l, guint, l->len - 1) != k)
                g_array_append_val(l, k);
        }
    }
    return ci;
}

/* Start candidates for a bytecode op in a frame whose place is unknown:
 * the positions of cands (keyed by opcode pair in pp; NULL: none), only
 * those of only_method (NONE: any), where the frame below returned from
 * `returned` (NONE: not known to). */
typedef struct cand_query {
    GArray *cands;
    const pos_pairs *pp;
    uint32_t only_method;
    uint32_t returned;
    int op;
} cand_query;

/* The candidates that best explain the lookahead (expand): the same for
 * every hypothesis at this event with that method. Where some explain the
 * whole lookahead, the ones that only might (open call sites, budget) are
 * dropped. */
static const GArray *scored(rp_projector *r, const cand_query *q, const dc_event *e)
{
    GArray *cands = q->cands;
    uint32_t only_method = q->only_method, returned = q->returned;
    int op = q->op;
    const fit_entry *f = memo_find(r, cands, only_method, returned, op);
    if (f)
        return f->fit;
    const GArray *all = scores(r, cands, q->pp, only_method, op, e);
    GArray *fit = g_array_new(FALSE, FALSE, sizeof(pos));
    int top = W_MAYBE;
    if (returned == NONE) {
        for (guint k = 0; k < all->len; k++) {
            scored_pos sp = g_array_index(all, scored_pos, k);
            if (sp.score < top)
                continue;
            if (sp.score > top) {
                g_array_set_size(fit, 0);
                top = sp.score;
            }
            g_array_append_val(fit, sp.ps);
        }
        return memo_add(r, cands, only_method, returned, op, fit);
    }
    /* The instruction before a candidate is the invoke that called
     * `returned`: its targets must include it, unless the site is open
     * (then the candidate only might fit). The two index lists are merged
     * in the list's order. */
    fit_entry *raw = memo_find(r, cands, only_method, RAW_SCORES, op);
    if (!raw->callees)
        raw->callees = callee_index_of(r, all);
    const GArray *any = raw->callees->any;
    const GArray *hit = g_hash_table_lookup(raw->callees->by_callee,
                                            GUINT_TO_POINTER(returned + 1));
    guint na = any->len, nh = hit ? hit->len : 0;
    for (guint a = 0, h = 0; a < na || h < nh;) {
        guint ka = a < na ? g_array_index(any, guint, a) : G_MAXUINT;
        guint kh = h < nh ? g_array_index(hit, guint, h) : G_MAXUINT;
        guint k = MIN(ka, kh);
        bool found = kh == k;
        a += ka == k;
        h += kh == k;
        scored_pos sp = g_array_index(all, scored_pos, k);
        if (!found && sp.ps.insn > 0 && sp.score == W_YES)
            sp.score = W_MAYBE;
        if (sp.score < top)
            continue;
        if (sp.score > top) {
            g_array_set_size(fit, 0);
            top = sp.score;
        }
        g_array_append_val(fit, sp.ps);
    }
    return memo_add(r, cands, only_method, returned, op, fit);
}

/* Frames for the candidates that best explain the lookahead, pushed on
 * below; context_call: below is an unknown context that called them. */
static void expand(rp_projector *r, const frame *below, const hist *h, const cand_query *q,
                   const dc_event *e, bool context_call)
{
    uint32_t returned = q->returned;
    int op = q->op;
    const GArray *fit = scored(r, q, e);
    /* A frame found at the bottom of a segment that follows an unresolved
     * one may be a frame that segment left running: then the frames it
     * had below that one are its callers. Both are tried, the linked one
     * first (kept among equals); a wrong link dies at its first return. */
    bool may_link = context_call && below && below->kind == FR_UNKNOWN && !below->from_before &&
                    r->before->len;
    /* A return in an unknown context fits every method that returns that
     * way, and one return after another (a segment that starts in the
     * middle of them) multiplies the hypotheses by each one's methods: the
     * bytecodes of a caller tell them apart only when one shows up. Beyond
     * RETURN_FANOUT candidates the frame stays unidentified: its bytecode
     * goes out without a method, and the frame below learns nothing of who
     * returned (a frame the segment before left running is still tried). */
    bool anonymous = jvm_is_return(op) && below && below->kind == FR_UNKNOWN &&
                     fit->len > RETURN_FANOUT;
    if (anonymous) {
        add(r, returned_to(r, below, NONE), record(r, h, FL_BYTECODE, 0, -1, op, 0));
        if (!may_link)
            return;
    }
    for (guint k = 0; k < fit->len; k++) {
        pos ps = g_array_index(fit, pos, k);
        if (r->next->len >= MAX_HYP) {
            r->st.capped++;
            break;
        }
        uint64_t id = method_id_of(r, ps.method);
        frame f = interp_frame(ps.method, ps.insn, id);
        if (returned != NONE || context_call) {
            /* a caller found after its callee returned: it was running all along */
            f.last = ps.insn > 0 ? ps.insn - 1 : NONE;
        }
        int j = may_link ? before_find(r, ps.method, NULL) : -1;
        if (j > 0) {
            const frame *saved = &g_array_index(r->before, frame, j);
            frame lf = f;
            lf.from_before = true;
            lf.recv = saved->recv;
            lf.this_call = saved->this_call;
            const hist *hl = record_before(r, h, (guint)j - 1);
            hl = record(r, hl, FL_CALL, id, -1, -1, FL_F_CONTEXT);
            step_interp_bc(r, push(r, before_frame(r, (guint)j - 1), lf), hl, op, e);
            if (r->next->len >= MAX_HYP) {
                r->st.capped++;
                break;
            }
        }
        if (anonymous)
            continue;
        const hist *hh = h;
        if (context_call)
            hh = record(r, hh, FL_CALL, id, -1, -1, FL_F_CONTEXT);
        step_interp_bc(r, push(r, below, f), hh, op, e);
    }
}

/* The exception thrown at `f` is caught by a handler of f or of a caller. */
static void step_throw(rp_projector *r, const frame *f, const hist *h, int op, const dc_event *e)
{
    for (int guard = 0; f && guard < 64; guard++) {
        if (f->kind == FR_INTERP && f->insn != ANY && f->last != NONE) {
            const rc_method *m = rc_method_at(r->p, f->method);
            const rc_cfg *g = m ? rc_cfg_get(r->p, m) : NULL;
            uint32_t bci = g && f->last < g->ninsn ? g->bci[f->last] : UINT32_MAX;
            for (uint32_t k = 0; g && k < m->nhandlers; k++) {
                const rc_handler *hd = &m->handlers[k];
                if (bci < hd->start_pc || bci >= hd->end_pc)
                    continue;
                int64_t at = rc_cfg_index(g, hd->handler_pc);
                if (at < 0)
                    continue;
                frame n = *f;
                n.insn = (uint32_t)at;
                n.calling = n.throwing = false;
                step_interp_bc(r, frame_copy(r, &n), h, op, e);
            }
        }
        if (f->kind == FR_UNKNOWN || f->kind == FR_VMCALL)
            return;
        uint32_t was = f->kind == FR_INTERP ? f->method : NONE;
        f = pop(r, f, &h, FL_F_EXCEPTION);
        if (!f) {
            frame u = unknown_frame();
            u.after_return = true;
            u.returned = was;
            f = push(r, NULL, u);
            (void)f;
            return;
        }
    }
}

/* The opcode of the instruction the frame ran last. */
static int last_op(rp_projector *r, const frame *f)
{
    const rc_method *m = rc_method_at(r->p, f->method);
    const rc_cfg *g = m ? rc_cfg_get(r->p, m) : NULL;
    return g && f->last < g->ninsn ? g->op[f->last] : -1;
}

static void step_bc(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    int op = e->opcode;
    if (op < 0)
        return;
    for (;;) {
        if (!f) {
            f = push(r, NULL, unknown_frame());
            continue;
        }
        switch (f->kind) {
        case FR_OPAQUE:
            /* a native method returned without the interpreter's return entry */
            f = returned_to(r, pop(r, f, &h, 0), NONE);
            continue;
        case FR_VMCALL:
            if (f->calling) {
                f = f->caller;
                continue;
            }
            return;
        case FR_COMPILED:
            return;             /* compiled code does not run templates */
        case FR_UNKNOWN: {
            pos_index *x = index_get(r);
            cand_query q = f->after_return
                               ? (cand_query){ x->after_call[op], &x->after_call2, NONE,
                                               f->returned, op }
                               : (cand_query){ x->any[op], &x->any2, NONE, NONE, op };
            expand(r, f, h, &q, e, true);
            return;
        }
        case FR_INTERP:
            if (f->throwing) {
                step_throw(r, f, h, op, e);
                return;
            }
            if (f->insn == ANY) {
                cand_query q = { index_get(r)->any[op], NULL, f->method, NONE, op };
                expand(r, f->caller, h, &q, e, false);
                return;
            }
            if (f->calling)
                return;         /* its callee has not been entered */
            if ((e->flags & DC_F_RESUMED) && f->last != NONE && last_op(r, f) == op)
                add(r, f, h);   /* the template resumes after a call into the VM */
            step_interp_bc(r, f, h, op, e);
            return;
        default:
            return;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Method entries */


static entry_kind_t entry_kind_of(const char *desc)
{
    const char *k = desc ? strstr(desc, "entry point (kind = ") : NULL;
    if (!k)
        return EK_NONE;
    k += strlen("entry point (kind = ");
    size_t n = strcspn(k, ")");
    if (n == 10 && !strncmp(k, "zerolocals", n))
        return EK_JAVA;
    if (!strncmp(k, "zerolocals_synchronized", n) && n == 23)
        return EK_SYNC;
    if (n == 6 && !strncmp(k, "native", n))
        return EK_NATIVE;
    if (!strncmp(k, "native_synchronized", n) && n == 19)
        return EK_NATIVE_SYNC;
    if (n == 8 && !strncmp(k, "abstract", n))
        return EK_ABSTRACT;
    return EK_INTRINSIC;
}

static bool entry_fits(entry_kind_t k, const rc_method *m)
{
    bool sync = m->access & JVM_ACC_SYNCHRONIZED, native = m->access & JVM_ACC_NATIVE;
    switch (k) {
    case EK_JAVA: return m->code && !sync && !native;
    case EK_SYNC: return m->code && sync && !native;
    case EK_NATIVE: return native && !sync;
    case EK_NATIVE_SYNC: return native && sync;
    case EK_ABSTRACT: return (m->access & JVM_ACC_ABSTRACT) != 0;
    default: return true;
    }
}

/* A method entered: m (NULL: unknown), its id, its receiver within recv
 * (this_call: the caller's own receiver). */
typedef struct callee_info {
    const rc_method *m;
    uint64_t id;
    const rc_class *recv;
    bool this_call;
} callee_info;

/* Enters c from caller, with entry kind k from the call at call_bci. */
static void enter_on(rp_projector *r, const frame *caller, const hist *h, callee_info c,
                     entry_kind_t k, int32_t call_bci)
{
    const rc_method *m = c.m;
    uint64_t id = c.id;
    bool runs_bytecode = (k == EK_JAVA || k == EK_SYNC) && m && m->code;
    uint32_t flags = (k == EK_NATIVE || k == EK_NATIVE_SYNC) ? FL_F_NATIVE : 0;
    h = record(r, h, FL_CALL, id, call_bci, -1, flags);
    frame f = runs_bytecode ? interp_frame(m->index, 0, id)
                            : (frame){ .kind = FR_OPAQUE, .method = m ? m->index : NONE,
                                       .insn = NONE, .last = NONE, .returned = NONE,
                                       .method_id = id };
    if (runs_bytecode) {
        f.recv = c.recv;
        f.this_call = c.this_call;
    }
    add(r, push(r, caller, f), h);
}

static void enter(rp_projector *r, const frame *caller, const hist *h, const rc_method *m,
                  uint64_t id, entry_kind_t k, int32_t call_bci)
{
    callee_info c = { .m = m, .id = id, .recv = m ? rc_receiver_bound(r->p, m) : NULL };
    enter_on(r, caller, h, c, k, call_bci);
}

/* public static void main(String[]) */
static bool is_launcher_main(const rc_method *m)
{
    const uint16_t public_static = CF_ACC_PUBLIC | CF_ACC_STATIC;
    return m && (m->access & public_static) == public_static && !strcmp(m->name, "main") &&
           !strcmp(m->sig, "([Ljava/lang/String;)V");
}

/* The class of the nearest frame from f down that is in the middle of an
 * invokedynamic (linking it, or running the call site's target); NULL when
 * none is within INDY_DEPTH frames. */
#define INDY_DEPTH 32
static const char *indy_class_below(rp_projector *r, const frame *f)
{
    for (int d = 0; f && d < INDY_DEPTH; f = f->caller, d++) {
        if (f->kind != FR_INTERP || !f->calling || f->last == NONE || f->method == NONE)
            continue;
        const rc_method *m = rc_method_at(r->p, f->method);
        const rc_cfg *g = rc_cfg_get(r->p, m);
        if (g && f->last < g->ninsn && g->op[f->last] == JVM_INVOKEDYNAMIC)
            return m->klass;
    }
    return NULL;
}

/* Whether klass is a lambda proxy of class c: a hidden class that
 * LambdaMetafactory names c$$Lambda... */
static bool lambda_proxy_of(const char *klass, const char *c)
{
    size_t n = strlen(c);
    return !strncmp(klass, c, n) && !strncmp(klass + n, "$$Lambda", 8);
}

/* A callee that nothing names: every method that fits the entry kind and
 * the bytecodes that follow. */
static void enter_any(rp_projector *r, const frame *caller, const hist *h, entry_kind_t k,
                      int32_t call_bci, const rc_method *const *ruled_out, size_t nruled_out)
{
    if (k != EK_JAVA && k != EK_SYNC) {
        enter(r, caller, h, NULL, 0, k, call_bci);
        return;
    }
    uint16_t ops[LOOKAHEAD];
    uint8_t br[LOOKAHEAD];
    uint32_t jm[LOOKAHEAD];
    size_t n = lookahead(r, r->ev_slot + 1, ops, br, jm, LOOKAHEAD);
    if (n == 0 || ops[0] >= 0x100) {
        enter(r, caller, h, NULL, 0, EK_INTRINSIC, call_bci);
        return;
    }
    /* the methods that best explain what follows: the same for every
     * hypothesis at this event (kept with expand's, keyed by the kind) */
    if (r->fit_event != r->st.events) {
        g_ptr_array_set_size(r->fit_memo, 0);
        r->fit_event = r->st.events;
    }
    const GArray *fit = NULL;
    for (guint j = 0; j < r->fit_memo->len && !fit; j++) {
        const fit_entry *f = g_ptr_array_index(r->fit_memo, j);
        if (f->cands == NULL && f->op == -1 - (int)k)
            fit = f->fit;
    }
    if (!fit) {
        pos_index *x = index_get(r);
        GArray *narrowed = pairs_narrow(&x->start2, ops, n);
        GArray *c = narrowed ? narrowed : x->start[ops[0]];
        GArray *v = g_array_new(FALSE, FALSE, sizeof(uint32_t));
        int top = W_MAYBE;
        for (guint j = 0; j < c->len; j++) {
            pos ps = g_array_index(c, pos, j);
            const rc_method *m = rc_method_at(r->p, ps.method);
            if (!entry_fits(k, m) || !rc_method_may_run(r->p, m, r->ev->tsc))
                continue;
            int score = accepts(r, ps.method, 0, ops, br, jm, n);
            if (score < top)
                continue;
            if (score > top) {
                g_array_set_size(v, 0);
                top = score;
            }
            g_array_append_val(v, ps.method);
        }
        if (narrowed)
            g_array_free(narrowed, TRUE);
        /* The launcher has the VM call the main class's `public static void
         * main(String[])`: of the methods the bytecodes cannot tell apart,
         * those go first (the first one is kept where a choice is made
         * before the trace decides it). On xalan with -Xint, main's first
         * `new` has the VM load classes for thousands of events; the paths
         * through the 1,165 methods that start with `new` outgrew their
         * memory (ARENA_CHOOSE) 1,537 events in, and the choice made then
         * put StringConcatFactory.argumentMismatch under main for the run. */
        guint front = 0;
        for (guint j = 0; j < v->len; j++) {
            uint32_t mi = g_array_index(v, uint32_t, j);
            if (!is_launcher_main(rc_method_at(r->p, mi)))
                continue;
            memmove(&g_array_index(v, uint32_t, front + 1), &g_array_index(v, uint32_t, front),
                    (j - front) * sizeof(uint32_t));
            g_array_index(v, uint32_t, front++) = mi;
        }
        fit_entry *memo = g_new0(fit_entry, 1);
        memo->op = -1 - (int)k;
        memo->fit = v;
        g_ptr_array_add(r->fit_memo, memo);
        fit = v;
    }
    /* While a frame below links or runs an invokedynamic of class C, the
     * VM or java.lang.invoke constructs C's lambda proxy (reflectively, or
     * through DirectMethodHandle's newInvokeSpecial): C's proxies go first.
     * Their constructors' bytecodes are those of any constructor storing the
     * same fields: on Dispatch, JDK 17's regex Pattern's proxy had been taken
     * for Dispatch$Rect.<init>(II)V, Dispatch's own for another ()V one. */
    const char *indy = fit->len > 1 ? indy_class_below(r, caller) : NULL;
    for (int pass = indy ? 0 : 1; pass < 2; pass++)
        for (guint j = 0; j < fit->len; j++) {
            if (r->next->len >= MAX_HYP) {
                r->st.capped++;
                return;
            }
            const rc_method *m = rc_method_at(r->p, g_array_index(fit, uint32_t, j));
            if (indy && lambda_proxy_of(m->klass, indy) != (pass == 0))
                continue;
            bool out = false;
            for (size_t i = 0; i < nruled_out && !out; i++)
                out = ruled_out[i] == m;
            if (!out)
                enter(r, caller, h, m, m->id, k, call_bci);
        }
}

/* How well callee t explains the bytecodes after this entry (once per
 * event and method: every hypothesis at this call asks the same). */
static int entry_score(rp_projector *r, const rc_method *t, entry_kind_t k)
{
    if (!entry_fits(k, t) || !rc_method_may_run(r->p, t, r->ev->tsc))
        return W_NO;
    if (k != EK_JAVA && k != EK_SYNC)
        return W_YES;
    /* entries are stamped with the event they were computed for, so the memo
     * never needs clearing on the per-event path */
    gsize v = GPOINTER_TO_SIZE(g_hash_table_lookup(r->entry_memo, GUINT_TO_POINTER(t->index + 1)));
    if (v && (v >> 2) == r->st.events)
        return (int)(v & 3);
    uint16_t ops[LOOKAHEAD];
    uint8_t br[LOOKAHEAD];
    uint32_t jm[LOOKAHEAD];
    size_t n = lookahead(r, r->ev_slot + 1, ops, br, jm, LOOKAHEAD);
    int score = n == 0 || ops[0] >= 0x100 ? W_MAYBE : accepts(r, t->index, 0, ops, br, jm, n);
    g_hash_table_insert(r->entry_memo, GUINT_TO_POINTER(t->index + 1),
                        GSIZE_TO_POINTER(((gsize)r->st.events << 2) | (gsize)score));
    return score;
}

/* Whether m's class has objects (see rp_projector.instantiated). */
static bool may_have_receiver(const rp_projector *r, const rc_method *m)
{
    bool has = g_hash_table_contains(r->instantiated, m->klass);
    if (!has && r->assumed_absent)
        g_hash_table_add(r->assumed_absent, (gpointer)m->klass);
    return has;
}

/* The invoke frame f is in the middle of (an interpreted frame's last
 * instruction, a compiled frame's position): its opcode, method and
 * instruction; 0 when there is none. */
static int call_site(rp_projector *r, const frame *f, const rc_method **m, uint32_t *insn)
{
    if (!f || f->method == NONE)
        return 0;
    const rc_method *fm = rc_method_at(r->p, f->method);
    const rc_cfg *g = fm ? rc_cfg_get(r->p, fm) : NULL;
    if (!g)
        return 0;
    int64_t i = f->kind == FR_INTERP && f->last != NONE ? (int64_t)f->last
                : f->kind == FR_COMPILED && f->bci >= 0 ? rc_cfg_index(g, (uint32_t)f->bci)
                                                        : -1;
    if (i < 0 || (uint64_t)i >= g->ninsn || !jvm_is_invoke(g->op[i]))
        return 0;
    *m = fm;
    *insn = (uint32_t)i;
    return g->op[i];
}

typedef struct rebind_key {
    const frame *f;
    const rc_class *recv;
} rebind_key;

static guint rebind_hash(gconstpointer p)
{
    const rebind_key *k = p;
    uint64_t h = ((uint64_t)(uintptr_t)k->f ^ (uint64_t)(uintptr_t)k->recv * 0x9e3779b97f4a7c15ull) *
                 0xbf58476d1ce4e5b9ull;
    return (guint)(h ^ (h >> 31));
}

static gboolean rebind_equal(gconstpointer a, gconstpointer b)
{
    const rebind_key *x = a, *y = b;
    return x->f == y->f && x->recv == y->recv;
}

/* f and the frames below it that share its receiver, with bound recv (at
 * most `depth` of them: deeper ones keep their looser bound). Hypotheses
 * that narrow the same frames get the same copies: dedup compares callers
 * by address. */
static const frame *rebind(rp_projector *r, const frame *f, const rc_class *recv, int depth)
{
    rebind_key k = { f, recv };
    const frame *done = g_hash_table_lookup(r->rebound, &k);
    if (done)
        return done;
    frame c = *f;
    c.recv = recv;
    if (f->this_call && f->caller &&
        (f->caller->kind == FR_INTERP || f->caller->kind == FR_COMPILED) && depth > 1)
        c.caller = rebind(r, f->caller, recv, depth - 1);
    frame *n = frame_copy(r, &c);
    rebind_key *key = arena_alloc(r->a, sizeof *key);
    *key = k;
    g_hash_table_insert(r->rebound, key, n);
    return n;
}

#define TARGETS_LOCAL 64

/* Whether a receiver within bound still selects frame f's own method, where
 * f was entered by a virtual call (its caller's invoke is in progress): a
 * frame of NodeTest.execute(XPathContext) has no StepPattern receiver,
 * since StepPattern overrides that method. xalan's XPath.getMatchScore
 * calls execute(XPathContext) on a StepPattern; NodeTest's and
 * StepPattern's have the same bytecodes, a call of execute(XPathContext,
 * int) on this, which only StepPattern's class tells. True where the way
 * in is not known. */
static bool still_selected(rp_projector *r, const frame *f, const rc_class *bound)
{
    const frame *c = f->caller;
    if (!bound || !c || c->kind != FR_INTERP || !c->calling || c->last == NONE)
        return true;
    const rc_method *cm = rc_method_at(r->p, c->method);
    const rc_cfg *g = cm ? rc_cfg_get(r->p, cm) : NULL;
    if (!g || c->last >= g->ninsn)
        return true;
    int op = g->op[c->last];
    if (op != JVM_INVOKEVIRTUAL && op != JVM_INVOKEINTERFACE)
        return true;
    const rc_class *narrowed;
    return rc_receiver_may_run(r->p, bound, op, rc_method_at(r->p, f->method), &narrowed);
}

/* Enters the call targets that best explain what follows; with open
 * targets, and none that explains it fully, any method may be the callee.
 * A call on the caller's own receiver enters only targets its class can
 * select (unless that leaves none), and what a target tells of the class
 * goes to the caller and the frames sharing the receiver. */
typedef struct call_targets {
    const rc_method *const *v;
    size_t n;
    bool open;             /* methods the analysis does not know may be called */
    uint32_t open_doubt;   /* added to the doubt of a path entering those */
} call_targets;

static void enter_targets(rp_projector *r, const frame *f, const hist *h,
                          const call_targets *ct, entry_kind_t k, int32_t bci)
{
    const rc_method *const *t = ct->v;
    size_t nt = ct->n;
    bool open = ct->open;
    uint32_t open_doubt = ct->open_doubt;
    bool on_this = false;
    int op = 0;
    const rc_method *m = NULL;
    uint32_t insn = NONE;
    if (nt && (op = call_site(r, f, &m, &insn)))
        on_this = rc_receiver_is_this(r->p, m, insn);
    typedef struct fit {
        bool itable;               /* the itable scan allows it */
        bool may;                  /* the receiver's class can select it */
        bool ruled_out;            /* the caller's own method would not have
                                    * been selected (still_selected) */
        const rc_class *bound;     /* the receiver's bound once it ran */
    } fit;
    fit local[TARGETS_LOCAL];
    fit *rf = nt <= TARGETS_LOCAL ? local : g_new(fit, nt);
    /* The itable position the interface call's scan found: targets no
     * receiver class at that position selects are out (unless that leaves
     * none: trust the trace). */
    bool by_itable = op == JVM_INVOKEINTERFACE && r->call_itable_pos && nt > 1;
    size_t in_itable = 0;
    for (size_t j = 0; j < nt; j++) {
        rf[j].itable = !by_itable ||
                       rc_itable_may_run(r->p, m, insn, r->call_itable_pos - 1, t[j]);
        in_itable += rf[j].itable;
    }
    if (by_itable && in_itable == 0)
        for (size_t j = 0; j < nt; j++)
            rf[j].itable = true;
    else if (by_itable && in_itable < nt)
        r->st.itable_filtered++;
    size_t may = 0, nruled_out = 0;
    for (size_t j = 0; j < nt; j++) {
        rf[j].may = on_this && rf[j].itable &&
                    rc_receiver_may_run(r->p, f->recv, op, t[j], &rf[j].bound);
        rf[j].ruled_out = rf[j].may && rf[j].bound != f->recv &&
                          !still_selected(r, f, rf[j].bound);
        if (rf[j].ruled_out) {
            rf[j].may = false;
            rf[j].itable = false;
            nruled_out++;
        }
        may += rf[j].may;
    }
    /* no receiver information (or none that any target fits: trust the
     * trace) */
    bool filter = on_this && may > 0;
    if (filter && may < nt)
        r->st.receiver_filtered++;
    int top = W_NO;
    for (size_t j = 0; j < nt; j++)
        if (rf[j].itable && (!filter || rf[j].may))
            top = best(top, entry_score(r, t[j], k));
    /* an invokespecial of a constructor (the one target of `new C; ...;
     * invokespecial C.<init>`) makes an object of C on every path through
     * that site: C's virtual methods rank first from now on, also while the
     * paths have not narrowed to one */
    if (nt == 1 && op == JVM_INVOKESPECIAL && !strcmp(t[0]->name, "<init>"))
        g_hash_table_add(r->instantiated, (gpointer)t[0]->klass);
    /* with several targets, those whose class has objects go first
     * (hypotheses keep their order, and of two that the trace cannot tell
     * apart the first is kept) */
    for (int pass = nt > 1 ? 0 : 1; top > W_NO && pass < 2 && !r->doubtful_pass; pass++)
        for (size_t j = 0; j < nt; j++) {
            if (!rf[j].itable || (filter && !rf[j].may) || entry_score(r, t[j], k) != top ||
                (nt > 1 && may_have_receiver(r, t[j]) != !pass))
                continue;
            if (!filter) {
                callee_info c = { .m = t[j], .id = t[j]->id,
                             .recv = rc_receiver_bound(r->p, t[j]), .this_call = on_this };
                enter_on(r, f, h, c, k, bci);
                continue;
            }
            const frame *caller = rf[j].bound != f->recv ? rebind(r, f, rf[j].bound, 64) : f;
            callee_info c = { .m = t[j], .id = t[j]->id, .recv = rf[j].bound, .this_call = true };
            enter_on(r, caller, h, c, k, bci);
        }
    /* an open site may call methods the analysis does not know, not those
     * it ruled out */
    const rc_method *ruled_out_local[TARGETS_LOCAL];
    const rc_method **ruled_out = nruled_out <= TARGETS_LOCAL
                                      ? ruled_out_local
                                      : g_new(const rc_method *, nruled_out);
    for (size_t j = 0, n = 0; j < nt; j++)
        if (rf[j].ruled_out)
            ruled_out[n++] = t[j];
    if (rf != local)
        g_free(rf);
    if (open && top < W_YES) {
        if (open_doubt && r->defer_doubtful) {
            g_array_append_val(r->deferred, r->stepping);
        } else {
            r->doubt += open_doubt;
            enter_any(r, f, h, k, bci, ruled_out, nruled_out);
            r->doubt -= open_doubt;
        }
    }
    if (ruled_out != ruled_out_local)
        g_free(ruled_out);
}

static void step_entry(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    entry_kind_t k = entry_kind_of(e->desc);
    if (!f)
        f = push(r, NULL, unknown_frame());
    if (f->kind == FR_INTERP && f->calling && f->last != NONE) {
        const rc_method *m = rc_method_at(r->p, f->method);
        const rc_cfg *g = rc_cfg_get(r->p, m);
        int32_t bci = (int32_t)g->bci[f->last];
        const rc_method *const *t;
        bool open = false;
        size_t nt = rc_call_targets(r->p, m, (uint32_t)bci, &t, &open);
        enter_targets(r, f, h, &(call_targets){ .v = t, .n = nt, .open = open }, k, bci);
        return;
    }
    if (f->kind == FR_COMPILED && f->bci >= 0 && f->method != NONE) {
        /* compiled code calling an interpreted method (c2i): the targets of
         * the invoke at the frame's bci rank first, but that bci is the last
         * one a PC record named before the call, not always the call's own
         * (records are sparse where DebugNonSafepoints was off, and code
         * HotSpot adds around calls has none): any method stays possible */
        const rc_method *m = rc_method_at(r->p, f->method);
        const rc_method *const *t;
        bool open = false;
        size_t nt = m && m->code ? rc_call_targets(r->p, m, (uint32_t)f->bci, &t, &open) : 0;
        enter_targets(r, f, h, &(call_targets){ .v = t, .n = nt, .open = true }, k, f->bci);
        return;
    }
    if (f->kind == FR_VMCALL && !f->calling) {
        frame v = *f;
        v.calling = true;
        f = frame_copy(r, &v);
        /* The VM calls Java in the middle of an interpreted instruction:
         * mostly the class initializers, class loading and linking that
         * instruction needs. Those rank first; any other method can still
         * be the one (open). */
        const frame *c = f->caller;
        if (c && c->kind == FR_INTERP && c->last != NONE) {
            const rc_method *m = rc_method_at(r->p, c->method);
            const rc_cfg *g = rc_cfg_get(r->p, m);
            const rc_method *const *t;
            size_t nt = g ? rc_vm_call_targets(r->p, m, g->bci[c->last], &t) : 0;
            call_targets ct = { .v = t, .n = nt, .open = true, .open_doubt = 1 };
            enter_targets(r, f, h, &ct, k, -1);
            return;
        }
    }
    enter_any(r, f, h, k, -1, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* Compiled code */

static uint32_t index_of_id(const rp_projector *r, uint64_t id)
{
    const rc_method *m = id ? rc_method_by_id(r->p, id) : NULL;
    return m ? m->index : NONE;
}

/* Compiled frame f's callee `callee` (program index) gets the receiver
 * bound of the call: where the call is on f's own receiver, the bound f has
 * as narrowed by the callee (the trace names it), and f and the frames
 * sharing that receiver learn the narrowing (in *caller). */
static void compiled_receiver(rp_projector *r, const frame **caller, frame *n)
{
    const frame *f = *caller;
    const rc_method *t = n->method == NONE ? NULL : rc_method_at(r->p, n->method);
    n->recv = t ? rc_receiver_bound(r->p, t) : NULL;
    n->this_call = false;
    const rc_method *m;
    uint32_t insn;
    int op = f && t ? call_site(r, f, &m, &insn) : 0;
    if (!op || !rc_receiver_is_this(r->p, m, insn))
        return;
    const rc_class *narrowed;
    if (!rc_receiver_may_run(r->p, f->recv, op, t, &narrowed))
        return;                /* the trace names the callee: it wins */
    n->recv = narrowed;
    n->this_call = true;
    if (narrowed != f->recv)
        *caller = rebind(r, f, narrowed, 64);
}

static frame compiled_frame(const rp_projector *r, const dc_event *e, uint64_t id, uint32_t depth)
{
    return (frame){ .kind = FR_COMPILED, .method = index_of_id(r, id), .insn = NONE,
                    .last = NONE, .returned = NONE, .inline_depth = depth, .bci = -1,
                    .method_id = id, .code = e->code };
}

/* The bci of the call a frame waits on; -1 when not known. */
static int32_t calling_bci(const rp_projector *r, const frame *f)
{
    if (f->kind == FR_COMPILED)
        return f->bci;
    if (f->kind == FR_INTERP && f->last != NONE) {
        const rc_cfg *g = rc_cfg_get(r->p, rc_method_at(r->p, f->method));
        return g ? (int32_t)g->bci[f->last] : -1;
    }
    return -1;
}

/* A return into compiled version e->code that no frame waits for, where the
 * frame below the activation that returned waits on a call of its own: the
 * version ran unseen between the two (its entry was in code the decoder
 * could not follow, or recorded only later), called by that frame. Its
 * frame is put there as an inferred call, so the known callers stay (a
 * return past them all would leave the rest of the segment rooted at the
 * thread). False where the rule does not apply. */
static bool unseen_caller(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    if (f && f->kind == FR_COMPILED && !f->calling) {
        const void *code = f->code;
        while (f && f->kind == FR_COMPILED && f->code == code && !f->calling &&
               f->inline_depth > 1)
            f = pop(r, f, &h, 0);
        if (f && f->kind == FR_COMPILED && f->code == code && !f->calling)
            f = pop(r, f, &h, 0);
    }
    if (!f || !f->calling || (f->kind != FR_COMPILED && f->kind != FR_INTERP))
        return false;
    h = record(r, h, FL_CALL, e->method_id, calling_bci(r, f), -1,
               FL_F_COMPILED | FL_F_INFERRED);
    frame n = compiled_frame(r, e, e->method_id, 1);
    add(r, push(r, f, n), h);
    return true;
}

static void step_jit_enter(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    if (e->flags & DC_F_OSR) {
        /* on-stack replacement: the interpreted frame goes on compiled, so
         * it runs the version's method (other hypotheses end here) */
        if (f && f->kind == FR_INTERP) {
            if (f->method_id == e->method_id) {
                frame n = compiled_frame(r, e, e->method_id, 1);
                n.recv = f->recv;
                n.this_call = f->this_call;
                add(r, push(r, f->caller, n), h);
            }
            return;
        }
        if (!f || f->kind == FR_UNKNOWN) {
            h = record(r, h, FL_CALL, e->method_id, -1, -1, FL_F_CONTEXT | FL_F_COMPILED);
            add(r, push(r, f, compiled_frame(r, e, e->method_id, 1)), h);
            return;
        }
    }
    bool by_return = e->flags & (DC_F_BY_RETURN | DC_F_THROWN);
    if (by_return) {
        /* back in a compiled caller: pop to its frame, the one of that
         * version waiting for a call (a recursive call's callee is another
         * frame of the same version) */
        const frame *g = f;
        const hist *hh = h;
        bool fresh = true;     /* no frame of the kept stack (before_save) */
        bool any_calling = false;
        bool thrown = e->flags & DC_F_THROWN;   /* to a handler: frames above unwound */
        for (const frame *k = f; k && k->kind != FR_UNKNOWN && !any_calling && !thrown;
             k = k->caller)
            any_calling = k->kind == FR_COMPILED && k->code == e->code && k->calling;
        while (g && !(g->kind == FR_COMPILED && g->code == e->code &&
                      (g->calling || !any_calling))) {
            fresh = fresh && !g->from_before;
            if (g->kind == FR_UNKNOWN) {
                g = NULL;
                break;
            }
            g = pop(r, g, &hh, thrown ? FL_F_EXCEPTION : 0);
        }
        if (g) {
            if (g->calling) {
                frame c = *g;
                c.calling = false;
                g = frame_copy(r, &c);
            }
            add(r, g, hh);
            return;
        }
        if (!thrown && unseen_caller(r, f, h, e))
            return;
        /* a compiled frame the segment before left running (see
         * expand), tried first */
        int j = fresh ? before_find(r, NONE, e->code) : -1;
        if (j >= 0)
            add(r, before_frame(r, (guint)j), record_before(r, hh, (guint)j));
        /* its frame was never seen: it was running before the segment (the
         * frames above it returned) */
        hh = record(r, hh, FL_CALL, e->method_id, -1, -1, FL_F_CONTEXT | FL_F_COMPILED);
        add(r, push(r, NULL, compiled_frame(r, e, e->method_id, 1)), hh);
        return;
    }
    /* A jump inside it; a call is recursion, unless it lands where the
     * version has no scope: its static call stub, on the way to an
     * interpreted callee (the c2i adapter and method entry follow) */
    if (f && f->kind == FR_COMPILED && f->code == e->code &&
        ((e->flags & DC_F_NO_SCOPE) || (!f->calling && !(e->flags & DC_F_BY_CALL))))
        return add(r, f, h);
    int32_t call_bci = -1;
    if (f && f->kind == FR_INTERP && f->calling && f->last != NONE) {
        /* i2c: the compiled callee must be a target of the invoke */
        const rc_method *m = rc_method_at(r->p, f->method);
        const rc_cfg *g = rc_cfg_get(r->p, m);
        call_bci = (int32_t)g->bci[f->last];
        const rc_method *const *t;
        bool open = false;
        size_t nt = rc_call_targets(r->p, m, (uint32_t)call_bci, &t, &open);
        uint32_t callee = index_of_id(r, e->method_id);
        bool found = open || callee == NONE;
        for (size_t j = 0; j < nt && !found; j++)
            found = t[j]->index == callee;
        if (!found)
            return;
    } else if (f && f->kind == FR_COMPILED) {
        call_bci = f->bci;
    } else if (f && f->kind == FR_VMCALL && !f->calling) {
        frame v = *f;
        v.calling = true;
        f = frame_copy(r, &v);
    }
    h = record(r, h, FL_CALL, e->method_id, call_bci, -1, FL_F_COMPILED);
    frame n = compiled_frame(r, e, e->method_id, 1);
    compiled_receiver(r, &f, &n);
    add(r, push(r, f, n), h);
}

/* Compiled code as reconstruct/compiled.h gives it: inlined calls and
 * returns along the bytecode path, the path's bytecodes, the position. */
static void step_jit(rp_projector *r, const frame *f, const hist *h, const dc_event *e)
{
    if (!f || f->kind != FR_COMPILED || f->code != e->code)
        return add(r, f, h);
    /* frames of the version deeper than the event's place left unseen
     * (taken from the stack an earlier segment ended with, say) */
    uint32_t depth = e->kind == DC_INLINE_CALL ? e->depth - 1
                     : e->kind == DC_INLINE_RETURN ? e->depth + 1 : e->depth;
    while (depth >= 1 && f->inline_depth > depth && f->caller &&
           f->caller->kind == FR_COMPILED && f->caller->code == e->code)
        f = pop(r, f, &h, 0);
    switch (e->kind) {
    case DC_INLINE_CALL: {
        bool context = e->flags & DC_F_CONTEXT;
        uint32_t fl = FL_F_COMPILED | FL_F_INLINED |
                      (e->flags & DC_F_INFERRED ? FL_F_INFERRED : 0) |
                      (e->flags & DC_F_ESTIMATED ? FL_F_ESTIMATED : 0) |
                      (context ? FL_F_CONTEXT : 0);
        h = record(r, h, FL_CALL, e->method_id, context ? -1 : e->call_bci, -1, fl);
        frame n = compiled_frame(r, e, e->method_id, e->depth);
        n.bci = e->bci;
        if (!context)
            compiled_receiver(r, &f, &n);
        add(r, push(r, f, n), h);
        return;
    }
    case DC_INLINE_RETURN:
        if (f->inline_depth > 1)
            f = pop(r, f, &h,
                    (e->flags & DC_F_INFERRED ? FL_F_INFERRED : 0) |
                        (e->flags & DC_F_ESTIMATED ? FL_F_ESTIMATED : 0) |
                        (e->flags & DC_F_THROWN ? FL_F_EXCEPTION : 0));
        add(r, f, h);
        return;
    case DC_JIT_BYTECODE: {
        h = record(r, h, FL_BYTECODE, e->method_id, e->bci, e->opcode,
                   FL_F_COMPILED | (e->flags & DC_F_ESTIMATED ? FL_F_ESTIMATED : 0));
        if (f->bci != e->bci) {
            frame n = *f;
            n.bci = e->bci;
            f = frame_copy(r, &n);
        }
        add(r, f, h);
        return;
    }
    default:
        /* code with no scope (bci -1: stubs HotSpot adds around calls, a
         * return address) keeps the last bci a PC record named: the site of
         * the call made from there (see step_entry) */
        if (e->bci >= 0 && f->bci != e->bci && f->method_id == e->method_id) {
            frame n = *f;
            n.bci = e->bci;
            f = frame_copy(r, &n);
        }
        add(r, f, h);
        return;
    }
}

/* A compiled frame (with its inlined frames) continues in the interpreter. */
static void step_deopt(rp_projector *r, const frame *f, const hist *h)
{
    if (!f || f->kind != FR_COMPILED)
        return add(r, f, h);
    const void *code = f->code;
    const frame *chain[64];
    size_t n = 0;
    while (f && f->kind == FR_COMPILED && f->code == code && n < 64) {
        chain[n++] = f;
        f = f->caller;
    }
    for (size_t k = n; k-- > 0;) {
        uint32_t mi = chain[k]->method;
        const rc_method *m = mi == NONE ? NULL : rc_method_at(r->p, mi);
        frame x = m && m->code ? interp_frame(mi, ANY, m->id) : unknown_frame();
        if (k > 0)
            x.calling = true;   /* outer frames are mid-call to the inner ones */
        f = push(r, f, x);
    }
    add(r, f, h);
}

/* ------------------------------------------------------------------------ */

static void step(rp_projector *r, const hyp *x, const dc_event *e)
{
    const frame *f = x->top;
    const hist *h = x->h;
    r->doubt = x->doubt;
    if ((e->flags & DC_F_BY_CALL) && f && f->kind == FR_COMPILED && !f->calling) {
        /* a call out of compiled code: its frame waits for the return */
        frame c = *f;
        c.calling = true;
        f = frame_copy(r, &c);
    }
    switch (e->kind) {
    case DC_BYTECODE:
        step_bc(r, f, h, e);
        return;
    case DC_METHOD_ENTRY:
        step_entry(r, f, h, e);
        return;
    case DC_INTERP_OTHER:
        if (entry_kind_of(e->desc) != EK_NONE)
            step_entry(r, f, h, e);
        else
            add(r, f, h);
        return;
    case DC_INTERP_RETURN:
        /* back in an interpreted frame: compiled or native callees are done */
        while (f && !f->throwing && (f->kind == FR_COMPILED || f->kind == FR_OPAQUE))
            f = returned_to(r, pop(r, f, &h, 0), NONE);
        add(r, f, h);
        return;
    case DC_THROW:
    case DC_EXCEPTION: {
        while (f && (f->kind == FR_COMPILED || f->kind == FR_OPAQUE))
            f = pop(r, f, &h, FL_F_EXCEPTION);
        if (f && f->kind == FR_INTERP && f->insn != ANY && !f->throwing) {
            frame n = *f;
            n.throwing = true;
            n.calling = false;
            f = frame_copy(r, &n);
        }
        add(r, f, h);
        return;
    }
    case DC_STUB:
        if (f && f->kind == FR_COMPILED && (e->flags & DC_F_BY_CALL) && e->desc &&
            strstr(e->desc, "arraycopy"))
            h = infer_intrinsic_call(r, f, h);
        /* The VM calls Java through the call stub: the stub is entered from
         * outside the traced code (or called); a jump or return into it is
         * the Java method returning to it. */
        if (e->desc && !strcmp(e->desc, "call_stub") &&
            (e->flags & (DC_F_RESUMED | DC_F_BY_CALL)) &&
            !(f && f->kind == FR_VMCALL && !f->calling)) {
            frame v = { .kind = FR_VMCALL, .method = NONE, .insn = NONE, .last = NONE,
                        .returned = NONE };
            f = push(r, f, v);
        } else if (e->desc && !strcmp(e->desc, "call_stub") && (e->flags & DC_F_BY_RETURN) &&
                   f && (f->kind == FR_COMPILED || f->kind == FR_OPAQUE)) {
            /* A compiled method the VM called returned to it: its frames go,
             * and the VM goes back to the instruction that called it. */
            while (f && (f->kind == FR_COMPILED || f->kind == FR_OPAQUE))
                f = pop(r, f, &h, 0);
            if (f && f->kind == FR_VMCALL && f->calling)
                f = returned_to(r, f, NONE);
        } else if (e->desc && !strcmp(e->desc, "call_stub") && f && f->kind == FR_UNKNOWN &&
                   f->after_return) {
            /* A method the VM called returned to it, and the VM goes back to
             * the instruction that called it (a new, a getstatic, ...), not
             * to an invoke: the next bytecode may follow any instruction. */
            frame u = *f;
            u.after_return = false;
            u.returned = NONE;
            f = frame_copy(r, &u);
        }
        add(r, f, h);
        return;
    case DC_JIT_ENTER:
        step_jit_enter(r, f, h, e);
        return;
    case DC_JIT:
    case DC_INLINE_CALL:
    case DC_INLINE_RETURN:
    case DC_JIT_BYTECODE:
        step_jit(r, f, h, e);
        return;
    case DC_DEOPT:
        step_deopt(r, f, h);
        return;
    case DC_UNWOUND: {
        /* an exception unwound the compiled activation on top: its frames
         * (with anything it had called and the trace did not show return) */
        const frame *g = f;
        while (g && g->kind != FR_UNKNOWN && !(g->kind == FR_COMPILED && g->code == e->code))
            g = g->caller;
        if (g && g->kind == FR_COMPILED) {
            while (f != g)
                f = pop(r, f, &h, FL_F_EXCEPTION);
            while (f && f->kind == FR_COMPILED && f->code == e->code && f->inline_depth > 1)
                f = pop(r, f, &h, FL_F_EXCEPTION);
            if (f && f->kind == FR_COMPILED && f->code == e->code)
                f = pop(r, f, &h, FL_F_EXCEPTION);
        }
        add(r, f, h);
        return;
    }
    default:
        add(r, f, h);
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
    hyp x = { push(r, NULL, unknown_frame()), NULL, 0 };
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
        before_save(r, g_array_index(r->cur, hyp, 0).top);
    else
        before_forget(r);
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
        frame *o = g_ptr_array_index(scratch, k), *n = frame_copy(r, o);
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
        hist *o = g_ptr_array_index(scratch, k), *n = arena_alloc(r->a, sizeof *n);
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
    r->a = arena_new();
    g_hash_table_remove_all(r->rebound);
    g_ptr_array_set_size(r->before_chain, 0);
    GPtrArray *scratch = g_ptr_array_new();
    for (guint i = 0; i < r->cur->len; i++) {
        hyp *x = &g_array_index(r->cur, hyp, i);
        x->top = copy_frames(r, x->top, scratch);
        x->h = copy_history(r, x->h, cut, scratch);
    }
    g_ptr_array_free(scratch, TRUE);
    arena_recycle(r->a, old);
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

static pos_index *index_get(rp_projector *r)
{
    rp_index *x = r->shared;
    g_mutex_lock(&x->lock);
    if (!x->x)
        x->x = index_build(x->p);
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
    r->a = arena_new();
    r->entry_memo = g_hash_table_new(g_direct_hash, g_direct_equal);
    r->instantiated = g_hash_table_new(g_direct_hash, g_direct_equal);
    r->rebound = g_hash_table_new(rebind_hash, rebind_equal);
    r->fit_memo = g_ptr_array_new_with_free_func(fit_entry_free);
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
    dc_event e = *queued(r, 0);
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
    arena_free(r->a);
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
