/* The projector's internals (project.h), shared by its files: project.c
 * (the hypothesis set, stepping it, output), project_frames.c,
 * project_lookahead.c, project_bytecode.c and project_calls.c. */
#ifndef JPT_RECONSTRUCT_PROJECT_INT_H
#define JPT_RECONSTRUCT_PROJECT_INT_H

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

/* Lookahead symbols: the opcodes that follow, with the method entries and
 * interpreter returns between them, up to the first event the walk cannot
 * follow (compiled code, stubs, exceptions). */
enum { SYM_ENTRY = 0x100, SYM_IRET = 0x200, SYM_STOP = 0x300, SYM_COMPILED = 0x400 };

/* How a conditional branch went, where the decoder could tell (br[]). */
enum { BR_UNKNOWN = 0, BR_TAKEN, BR_NOT_TAKEN };

/* How well a walk explains the lookahead. */
enum { W_NO = 0, W_MAYBE = 1, W_YES = 2 };

static inline int best(int a, int b) { return a > b ? a : b; }

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

/* project_frames.c */
arena *pj_arena_new(void);
void pj_arena_free(arena *a);
void pj_arena_recycle(arena *a, arena *old);
void *pj_arena_alloc(arena *a, size_t n);
frame *pj_frame_copy(rp_projector *r, const frame *f);
const frame *pj_push(rp_projector *r, const frame *caller, frame f);
frame pj_interp_frame(uint32_t method, uint32_t insn, uint64_t id);
frame pj_unknown_frame(void);
const hist *pj_record(rp_projector *r, const hist *prev, fl_kind kind, uint64_t method_id,
                      int32_t bci, int32_t opcode, uint32_t flags);
uint64_t pj_method_id_of(const rp_projector *r, uint32_t method);
void pj_add(rp_projector *r, const frame *top, const hist *h);
const hist *pj_infer_intrinsic_call(rp_projector *r, const frame *f, const hist *h);
const frame *pj_pop(rp_projector *r, const frame *f, const hist **h, uint32_t flags);
const frame *pj_returned_to(rp_projector *r, const frame *caller, uint32_t method);
void pj_before_save(rp_projector *r, const frame *top);
void pj_before_forget(rp_projector *r);
const frame *pj_before_frame(rp_projector *r, guint k);
int pj_before_find(const rp_projector *r, uint32_t method, const void *code);
const hist *pj_record_before(rp_projector *r, const hist *h, guint k);

/* project_lookahead.c */
GArray *pj_pairs_narrow(const pos_pairs *pp, const uint16_t *sym, size_t n);
pos_index *pj_index_build(rc_program *p);
const dc_event *pj_queued(const rp_projector *r, size_t k);
uint8_t pj_branch_of(const dc_event *e);
size_t pj_lookahead(const rp_projector *r, size_t from, uint16_t *sym, uint8_t *br,
                    uint32_t *callee, size_t max);
bool pj_edge_fits(int kind, uint8_t how);
int pj_accepts(rp_projector *r, uint32_t method, uint32_t insn, const uint16_t *sym,
               const uint8_t *br, const uint32_t *callee, size_t n);

/* project_bytecode.c */
void pj_step_bc(rp_projector *r, const frame *f, const hist *h, const dc_event *e);
void pj_fit_entry_free(gpointer p);

/* project_calls.c */
entry_kind_t pj_entry_kind_of(const char *desc);
bool pj_entry_fits(entry_kind_t k, const rc_method *m);
void pj_step_entry(rp_projector *r, const frame *f, const hist *h, const dc_event *e);
uint32_t pj_index_of_id(const rp_projector *r, uint64_t id);
void pj_step_jit_enter(rp_projector *r, const frame *f, const hist *h, const dc_event *e);
void pj_step_jit(rp_projector *r, const frame *f, const hist *h, const dc_event *e);
void pj_step_deopt(rp_projector *r, const frame *f, const hist *h);
/* rp_projector.rebound */
guint pj_rebind_hash(gconstpointer p);
gboolean pj_rebind_equal(gconstpointer a, gconstpointer b);

/* project.c */
pos_index *pj_index_get(rp_projector *r);

#endif
