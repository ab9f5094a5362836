/* The program of a trace: every class and method the agent captured, with
 * bytecode, per-method control-flow graphs and resolved call targets.
 *
 * Loaded from jvm/meta.jpt: CLASS_FILE records (parsed class files),
 * CLASS_PREPARE (which methods each class has, by the agent's method ids),
 * METHOD (names), and for classes that never reached the load hook (hidden
 * classes) METHOD_BYTECODE + CONSTANT_POOL. CFGs and call targets are built
 * lazily, on first use, and cached; lookups may be called from several
 * threads at once. */
#ifndef JPT_RECONSTRUCT_PROGRAM_H
#define JPT_RECONSTRUCT_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/classfile.h"

typedef struct rc_program rc_program;

/* An exception handler, and a LineNumberTable entry: as the class file has them. */
typedef cf_handler rc_handler;
typedef cf_line rc_line;

typedef struct rc_method {
    uint32_t index;            /* dense, 0 .. rc_program_nmethods() - 1 */
    uint64_t id;               /* the agent's method id; 0 when the agent named none */
    const char *klass;         /* internal form: java/lang/String */
    const char *name;          /* hashCode */
    const char *sig;           /* ()I */
    const char *source;        /* SourceFile attribute, or NULL */
    uint16_t access;           /* ACC_* of the method */
    const uint8_t *code;       /* NULL when abstract or native */
    uint32_t code_len;
    uint16_t max_stack, max_locals;
    uint32_t nhandlers;
    const rc_handler *handlers;
    uint32_t nlines;
    const rc_line *lines;      /* sorted by start_pc */
} rc_method;

/* Edge kinds of the per-method CFG. */
typedef enum rc_edge_kind {
    RC_EDGE_NEXT = 1,          /* falls through (incl. the not-taken side of an if) */
    RC_EDGE_TAKEN,             /* a conditional branch taken, goto, jsr, ret */
    RC_EDGE_SWITCH,            /* a tableswitch / lookupswitch case or default */
    RC_EDGE_EXCEPTION,         /* to an exception handler covering the instruction */
} rc_edge_kind;

typedef struct rc_edge {
    uint32_t to;               /* instruction index */
    uint8_t kind;              /* rc_edge_kind */
} rc_edge;

/* A method's instructions and their successors, at instruction granularity.
 * Instruction i is at bci[i] with opcode op[i] (the standard opcode, from the
 * class file); its successors are edge[first[i] .. first[i + 1]). Returns,
 * athrow (unless a handler covers it) and calls have only their intraprocedural
 * successors (a call's successor is the instruction after it). */
typedef struct rc_cfg {
    uint32_t ninsn;
    const uint32_t *bci;
    const uint8_t *op;
    const uint32_t *first;     /* ninsn + 1 */
    const rc_edge *edge;
    /* 1 where the instruction lies on a cycle of the graph (exception edges
     * included): it may run more than once in one activation of the method */
    const uint8_t *cyclic;
} rc_cfg;

/* Loads the program of trace.dir. Returns NULL with a one-line message in
 * err only when nothing can be read; damaged classes are skipped and
 * counted (rc_program_warnings). */
rc_program *rc_program_load(const char *trace_dir, char *err, size_t errlen);
void rc_program_free(rc_program *p);

size_t rc_program_nmethods(const rc_program *p);
const rc_method *rc_method_at(const rc_program *p, uint32_t index);
const rc_method *rc_method_by_id(const rc_program *p, uint64_t id);
const rc_method *rc_method_find(const rc_program *p, const char *klass, const char *name,
                                const char *sig);
/* False when m belongs to a class the trace shows loaded but never
 * prepared (linked): none of its code ran. */
bool rc_method_may_have_run(const rc_program *p, const rc_method *m);
/* False when m cannot run at time tsc: it is the static initializer of a
 * class that the agent found initialized before (CLASSES_INITIALIZED: a class
 * is initialized once, so a call at tsc is another method's), or its class
 * was loaded (the load hook's record; a hidden class's preparation) more than
 * RC_SINCE_SLACK ticks after tsc. The slack covers the time a decoded event
 * lags behind: the thread's last timing packet (PSB+, or the TSC before a
 * TIP.PGE, as when it comes back from the VM) may precede the load that
 * another thread made. */
bool rc_method_may_run(const rc_program *p, const rc_method *m, uint64_t tsc);
#define RC_SINCE_SLACK 100000000ull   /* TSC ticks: tens of milliseconds */

/* Problems met while loading (damaged class files, methods without code),
 * one line each; valid until rc_program_free. */
size_t rc_program_warnings(const rc_program *p, const char *const **lines);

/* The CFG of a method with code (NULL for abstract/native). Built once. */
const rc_cfg *rc_cfg_get(rc_program *p, const rc_method *m);
/* Instruction index of bci in the CFG, or -1. */
int64_t rc_cfg_index(const rc_cfg *g, uint32_t bci);

/* The methods an invoke instruction at bci of m may call: invokestatic and
 * invokespecial exactly; invokevirtual and invokeinterface by class-hierarchy
 * analysis over the captured classes (every non-abstract override reachable
 * from the resolved method's class); invokedynamic through the bootstrap's
 * implementation method handle when the bootstrap is LambdaMetafactory.
 * *open is set when the set may be incomplete (unknown classes, other
 * bootstraps, method handles). Built once per call site. */
size_t rc_call_targets(rc_program *p, const rc_method *m, uint32_t bci,
                       const rc_method *const **targets, bool *open);
/* The same for the instruction at index insn of m's CFG (no bci lookup). */
size_t rc_call_targets_at(rc_program *p, const rc_method *m, uint32_t insn,
                          const rc_method *const **targets, bool *open);

/* Whether the invokeinterface at instruction insn of m's CFG may run t on
 * a receiver whose class has the interface the call names at position pos
 * of its itable (dc_event.itable_pos - 1; HotSpot's order: the class file
 * parser's transitive interfaces, without those that have no itable
 * method and no superinterface). True where that is unknown: another
 * opcode, a target not from the class-hierarchy analysis, or a receiver
 * class with an unknown supertype. */
bool rc_itable_may_run(rc_program *p, const rc_method *m, uint32_t insn, uint32_t pos,
                       const rc_method *t);

/* Methods the VM itself may call, through the call stub, while the
 * instruction at bci of m runs: the class initializers it may trigger (new,
 * getstatic, putstatic, invokestatic: the class named and its supertypes),
 * a class loader's loadClass(String) where it resolves a class, and
 * MethodHandleNatives' linking up-calls for invokedynamic, method handle
 * calls and constants. Never complete (the VM makes other calls, JNI code
 * any): a ranking hint, not a limit. Built once per instruction. */
size_t rc_vm_call_targets(rc_program *p, const rc_method *m, uint32_t bci,
                          const rc_method *const **targets);

/* ---- receivers ------------------------------------------------------------
 *
 * What the trace shows of a virtual call is the callee's bytecodes; where two
 * overrides have the same (two anonymous sorters of one class), the call
 * alone cannot choose. But the receiver of a method's frame is one object:
 * calls on `this` from that frame dispatch on its class, so once one such
 * call tells the class (a compare() whose bytecodes differ), the others
 * (a swap() whose bytecodes do not) follow it. A receiver bound is a class
 * the object is known to be of, or of a subclass of. */
typedef struct rc_class rc_class;

/* The bound a call to instance method t gives its receiver: t's class (a
 * class selecting t is it or a subclass); NULL (unknown) for static
 * methods, methods of interfaces and of classes without a class file. */
const rc_class *rc_receiver_bound(rc_program *p, const rc_method *t);

/* Whether a call made with opcode op (invokevirtual, invokeinterface,
 * invokespecial) on a receiver within bound (NULL: unknown) may run t;
 * *narrowed gets the bound the receiver has once it did. Virtual calls
 * select t only where no class between bound and t's class overrides it;
 * a bound unrelated to t's class rules t out only when both superclass
 * chains are captured up to java/lang/Object (otherwise: may). */
bool rc_receiver_may_run(rc_program *p, const rc_class *bound, int op, const rc_method *t,
                         const rc_class **narrowed);

/* Whether the receiver of the invoke at instruction insn of m's CFG is m's
 * own `this`: m is an instance method that never stores into local 0, and
 * the value the invoke takes as receiver was pushed by aload_0 within the
 * invoke's basic block (a value count back over the arguments; any
 * instruction whose effect depends on value categories, such as dup, gives
 * up: false). */
bool rc_receiver_is_this(rc_program *p, const rc_method *m, uint32_t insn);

/* The constructor that constructor m calls on its own object (the
 * superclass's, or its own class's for this(...)), and in *insn the
 * instruction index of that invokespecial. NULL where m is no constructor,
 * is java/lang/Object's, or the call is not certain: an invokespecial on
 * this that could not be resolved, or more than one <init> call on this. */
const rc_method *rc_this_call(rc_program *p, const rc_method *m, uint32_t *insn);

/* The source line of bci, or 0. */
uint32_t rc_line_of(const rc_method *m, uint32_t bci);

#endif
