/* The code timeline of one trace: what machine code was where, and when.
 *
 * Built from trace.dir/jvm (meta.jpt + code.bin) by dm_load. Answers "what
 * is at address A at time T": an interpreter codelet (with the standard
 * bytecodes it runs), a stub, or a compiled-method version with its
 * PC -> inline-stack table. Everything is read-only after loading, so
 * decoders of different threads can share one model.
 *
 * Time rules (all times are TSC values as in the records):
 *
 * - Interpreter codelets and the code blobs snapshotted at VMInit exist for
 *   the whole trace: code in them ran before their records were written.
 * - A stub or compiled-method version ("code version") becomes valid at its
 *   *effective* start: the unload time of the previous version that
 *   occupied any of its bytes, or the start of the trace if there was none.
 *   HotSpot installs code before JVMTI reports it (CompiledMethodLoad and
 *   DynamicCodeGenerated are often posted later from the service thread),
 *   so the record's own TSC is too late; the previous occupant's unload is
 *   the earliest moment the bytes can have changed. A version stays valid
 *   until its NMETHOD_UNLOAD, or until a later version overlapping it
 *   starts (its unload was not recorded).
 * - A code patch (CODE_PATCH) holds the bytes of its range from its TSC on,
 *   for as long as the version it patched is valid (patches of blob areas
 *   never expire). A patch that only fills bytes that were all zero before
 *   (code generated into space reserved earlier, like HotSpot's signature
 *   handlers) applies from the start of what it patched: zeros were never
 *   executed, so whenever that code ran, it was the patch's bytes. Zeros in
 *   the rel32 of a direct call or jump to known code are no such space: a
 *   near target's high bytes, executed all along.
 * - A patch that only retargets one direct call (all its changed bytes lie
 *   in the call's rel32, or for an inline-cache site `movabs rax, imm64;
 *   call` also in the cached value) away from one of HotSpot's
 *   resolve_*_call stubs is a call-site resolution: unresolved calls go to these stubs, whose
 *   runtime call patches the site before the stub goes on to the real
 *   target. The patch watcher sees the change only at its
 *   next scan, often after the site has run the new way many times; the
 *   decoder therefore applies such a patch (dm_patch.site) as soon as the
 *   thread it decodes passes the call into that very stub (image.h).
 *   The watcher records one patch per run of nearby changed bytes per
 *   scan, so one record may resolve several sites, or a site and change
 *   other bytes: it is cut into one patch per resolved site and patches
 *   for the other runs of changed bytes (which apply at the record time).
 * - A static or opt-virtual site resolved to compiled code in another
 *   version may have gone through its static call stub first (HotSpot
 *   resolves to the interpreter when the callee has no compiled code yet,
 *   and its c2i adapter re-points the site once it has): for each place
 *   the method's filled static call stubs jump to, a made-up patch holds
 *   the site calling such a stub (dm_patch.made_up); only the stubs that
 *   jump to the adapter of the callee's calling convention, where one
 *   does (each site has a stub of its own). Its four bytes are the
 *   model's own, in a memory file (libipt reads sections from files); the
 *   resolution's record is widened there to the whole rel32, so that it
 *   overwrites them.
 * - Such a site may also have been resolved to another compiled version of
 *   the callee's method that a newer one replaced before the watcher's next
 *   scan: each version there before the record gives a made-up state too
 *   (dm_patch.direct), the site calling that version's verified entry (at
 *   the offset the recorded resolutions show for its tier). An inline-cache
 *   site resolved through resolve_virtual_call gets the same states, but
 *   calling the version's unverified entry (the offset of the recorded
 *   inline-cache resolutions), where its resolver jumps to the verified one.
 * - A record that re-points a call (no resolver: dm_patch.call_to) away from
 *   an entry of one compiled version, made not entrant before the record's
 *   scan, gets a made-up state per other version of that method there
 *   before the record, at the same kind of entry: the site may have called
 *   them in between (re-resolved to a newer version, then gone
 *   megamorphic). Such states apply only where a retry tries them
 *   (retry.c).
 * - A site resolved to its own static call stub may have called a version
 *   of its callee that was made not entrant before the watcher's next scan:
 *   where the site's next record re-points it from the stub to compiled
 *   code, the other versions of that code's method there before the
 *   resolution's record give the same made-up states.
 * - An inline-cache site whose resolution is recorded at a state that calls
 *   no compiled code (a vtable, itable or transition stub: the site went
 *   megamorphic before the scan) gets a made-up state per compiled version
 *   of a method with the name and descriptor its invoke names (the caller's
 *   class file, at the bci of the call's PC record) there before the
 *   record, and the adapter states of that callee's calling convention.
 *   The resolution's record may hold the site's cached value too (the
 *   `movabs` before the call).
 *
 * Inline stacks: HotSpot's PcDesc pc of a record is the end of the code it
 * describes: for a call site the return address (the instruction after the
 * call), for DebugNonSafepoints records the end of the last instruction of a
 * run with the same scope (C2's NonSafepointEmitter records the offset after
 * emitting the instruction). HotSpot itself resolves an arbitrary pc with
 * nmethod::pc_desc_near, which takes the first PcDesc whose pc is above the
 * query's. So the instruction starting at address A belongs to the first
 * record with pc > A; addresses past the last record (the nmethod's stub and
 * handler sections) have no scope. */
#ifndef JPT_DECODER_MODEL_H
#define JPT_DECODER_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DM_TSC_NEVER UINT64_MAX
#define DM_MAX_FRAMES 256          /* deeper inline stacks keep their innermost frames */
/* Bytes from a compiled method's start that hold its entries (unverified,
 * verified, OSR): a call or a jump to a method lands there, a handler
 * elsewhere. */
#define DM_ENTRY_SPAN 64

/* Time windows, in TSC ticks (the trace's time stamps: about 2.1 GHz on the
 * machines measured, so 1M ticks is about half a millisecond). They bound
 * how far apart two records that HotSpot ties together may lie, given how
 * the agent records: its patch watcher rescans the code every 50 ms by
 * default (recently patched sites and transition stubs every 10 ms), and
 * JVMTI posts a method's load late. Each is used by the rule named. */
/* The records of one watcher scan lie within this of each other (a scan
 * takes well under a millisecond, scans are 10 ms and more apart): about
 * 2 ms. Groups a retry's patches and a resolution's stub fill by scan. */
#define DM_SCAN_SPREAD 5000000ull
/* A new version's load record may come this much after the record of the
 * not-entrant mark its install made (one scan's spread; start_at_new_version). */
#define DM_NEW_VERSION_LAG 5000000ull
/* The record of a patch a new version's install made comes at most this
 * long after that version's load record (a few full scans, about 190 ms;
 * start_at_new_version). */
#define DM_NEW_VERSION_SPAN 400000000ull
/* The fill of an inline-cache transition stub that dates a site re-pointed
 * at it lies at most this long before the site's record (a few full scans;
 * start_at_stub_fill). */
#define DM_IC_FILL_SPAN 400000000ull
/* A retry points no call at compiled code whose load record comes more than
 * this after the retry's start (about 24 ms): a load is posted up to tens of
 * millions of ticks after the code first ran (38M measured), and before its
 * code was there the address held other code (callee_loaded_long_after in
 * retry.c). */
#define DM_LOAD_LAG 50000000ull

/* What an interpreter codelet is, from its description (HotSpot's
 * TemplateInterpreterGenerator names them). */
typedef enum dm_codelet_kind {
    DM_CL_BYTECODE = 0,      /* a bytecode template */
    DM_CL_METHOD_ENTRY,      /* "method entry point (kind = ...)" */
    DM_CL_RETURN,            /* "return entry points", "invoke return entry points":
                                back in an interpreted caller after a call */
    DM_CL_EARLYRET,          /* "earlyret entry points" (JVMTI ForceEarlyReturn) */
    DM_CL_DEOPT,             /* "deoptimization entry points" */
    DM_CL_EXCEPTION,         /* "exception handling": rethrow/unwind into a handler */
    DM_CL_THROW,             /* "throw exception entrypoints": NPE, AIOOBE, ... raised */
    DM_CL_SAFEPOINT,         /* "safepoint entry points" */
    DM_CL_NATIVE,            /* "result handlers for native calls", signature handler */
    DM_CL_OTHER,             /* error exits, continuation entries, anything else */
    DM_CL_KIND_COUNT
} dm_codelet_kind;

const char *dm_codelet_kind_name(dm_codelet_kind k);

typedef struct dm_codelet {
    uint64_t begin, end;     /* [begin, end) */
    int32_t bytecode;        /* the JVM's number, including JVM-internal ones; -1 none */
    dm_codelet_kind kind;
    uint8_t nops;            /* standard opcodes run by the template (0..2) */
    uint8_t ops[2];
    /* Conditional-branch templates (if*): the address of their not-taken
     * path. HotSpot's template tests the condition with one jcc to a label
     * after the whole taken path (which dispatches to the branch target
     * itself), so a dispatch before this address is the branch taken, at or
     * after it not taken. 0 for other codelets, or when the code does not
     * have that shape. */
    uint64_t not_taken;
    /* invokeinterface: HotSpot's template finds the resolved interface in
     * the receiver class's itable with a linear scan, peeled once: a jcc
     * (itable_first) leaves when the first entry matches, else the loop
     * (head itable_loop) steps to the next entry. The number of times a
     * block begins at the head is the interface's position in the itable,
     * which depends on the receiver's class. The first such scan of the
     * template is the one for the interface the call names. 0 when the
     * code does not have that shape. */
    uint64_t itable_first, itable_loop;
    char *desc;
} dm_codelet;

typedef enum dm_code_kind { DM_CODE_STUB = 1, DM_CODE_NMETHOD = 2 } dm_code_kind;

typedef struct dm_frame {
    uint64_t method_id;
    int32_t bci;
} dm_frame;

/* One PC record of a compiled-method version: frames[first .. first+depth)
 * of the model's frame array, innermost first. */
typedef struct dm_pcrec {
    uint64_t pc;
    uint32_t first, depth;
} dm_pcrec;

/* A stub or a compiled-method version. */
typedef struct dm_code {
    dm_code_kind kind;
    uint32_t index;              /* position in the model's code array */
    uint64_t vaddr, size, code_offset;
    uint64_t load_tsc;           /* the record's TSC */
    uint64_t start_tsc;          /* effective start (see above) */
    uint64_t end_tsc;            /* unload, replacement, or DM_TSC_NEVER */
    uint64_t method_id;          /* nmethods */
    int32_t level;               /* nmethods: compilation level, -1 unknown */
    uint32_t first_pc, npcs;     /* nmethods: pc records, sorted by pc */
    char *name;                  /* stubs */
    bool ic_miss;                /* HotSpot's inline-cache miss handler (JDK 17 "ic_miss_stub",
                                    JDK 25 "Shared Runtime ic_miss_blob") */
    bool dispatches_exceptions;  /* a stub on the way of an exception to a compiled handler
                                    (unwind, rethrow, exception blobs) */
} dm_code;

typedef struct dm_blob {
    uint64_t vaddr, size, code_offset, tsc;
    uint32_t kind;               /* enum jm_blob_kind */
    char *name;
} dm_blob;

typedef struct dm_patch {
    uint64_t vaddr, size, code_offset, tsc;
    uint64_t start_tsc;          /* when the bytes apply: tsc, or earlier (below) */
    /* start_tsc was moved back to the load record of a version that
     * replaced the one this patch marks not entrant or re-points a call
     * away from (for a call, no earlier than the site's previous change;
     * callsites.c, start_at_new_version): the change follows that install, so
     * the bytes are not true before it. */
    bool after_new_version;
    int64_t owner;               /* index of the patched code version, -1 blob area */
    /* Call-site resolutions (above): the address of the call instruction,
     * the stub it called before the patch and what it calls after; all 0
     * for other patches. */
    uint64_t site, old_target, new_target;
    /* Another patch that re-points a direct call (from one callee to
     * another, not from a resolver): where the call goes now (0: none).
     * HotSpot points inline caches at transition stubs it fills in the same
     * moment; a decoder that applies this patch ahead of its time wants the
     * stub's fill of the same scan too (retry.c). */
    uint64_t call_to;
    uint64_t call_from;          /* with call_to: where the call went before */
    uint64_t call_at;            /* with call_to: the call instruction */
    /* A state of a call site that no record holds, made up at load: the
     * site calling a static call stub of its method (new_target), whose
     * recorded fill jumps on to stub_to (a c2i adapter). HotSpot resolves a
     * call to an interpreted callee that way and re-points the site at the
     * callee's compiled code once it has some; when both happened between
     * two watcher scans, only the second state was recorded: the resolution
     * patch whose alternatives these are (first_state, nstates below;
     * state_of). A made-up state never applies by its time, only when the
     * decoded thread's resolver went on to stub_to (image.h), and only
     * until the resolution it precedes applies. */
    bool made_up;
    bool direct;                 /* made up: the site calls compiled code (stub_to itself) */
    bool own_bytes;              /* code_offset is into made_up_bytes, not the code file */
    uint64_t stub_to;
    uint32_t state_of;           /* made up: the resolution it precedes */
    /* A call-site resolution's made-up states: patches[first_state ..
     * first_state + nstates). */
    uint32_t first_state, nstates;
    /* A call re-pointed from its static call stub to compiled code, whose
     * start moved back to the callee's load (start_at_callee_code). The call
     * that made the change still went through the stub into the c2i
     * adapter, whose runtime call re-points the site (JDK 17) or cleans it,
     * the next call resolving it (JDK 25). fixup_states: 1 + the first of
     * the made-up states a retry tries for that call (retry.c): the site at
     * its stub, the fixup applying this record; the site at its stub, the
     * fixup leaving the site at its resolver (then_state), whose runtime
     * call applies this record. 0: none. */
    bool at_callee_code;
    uint32_t fixup_states;
    bool before_fixup;           /* made up: one of those states */
    uint32_t then_state;         /* made up: 1 + the state the fixup leaves (0: state_of) */
    bool at_resolver;            /* made up: the site calling its resolver */
} dm_patch;

typedef struct dm_method {
    uint64_t id;
    uint64_t class_id;           /* the agent's id of its class */
    char *class_sig, *name, *sig;
    bool is_static;              /* no receiver */
} dm_method;

typedef struct dm_thread {
    uint32_t tid;
    uint64_t java_tid;
    char *name;
    uint64_t start_tsc, end_tsc;
} dm_thread;

typedef struct dm_model {
    char *code_path;             /* jvm/code.bin: the sections' file */
    uint64_t code_size;
    uint64_t start_tsc, first_tsc, last_tsc;
    uint64_t cc_low, cc_high;    /* code cache bounds (0 if unknown) */

    dm_codelet *codelets;        /* sorted by begin, non-overlapping */
    size_t ncodelets;
    uint64_t interp_low, interp_high;

    dm_code *codes;              /* stubs and nmethod versions, sorted by vaddr */
    size_t ncodes;
    uint64_t *codes_max_end;     /* running max of vaddr+size over codes[0..i] */
    dm_pcrec *pcs;
    size_t npcs;
    dm_frame *frames;
    size_t nframes;

    dm_blob *blobs;              /* sorted by tsc */
    size_t nblobs;
    dm_patch *patches;           /* sorted by start_tsc, made-up states last */
    size_t npatches;
    size_t states_made_up;       /* of those, made up (dm_patch.made_up) */
    size_t fixup_states_made_up; /* of those, for a call that made a c2i fixup (fixup_states) */
    /* The bytes of patches with own_bytes (made-up states, and the whole
     * rel32 of the resolutions they precede: a record holds only the bytes
     * that changed), in a memory file of the model's own at made_up_path
     * for libipt. */
    uint8_t *made_up_bytes;
    size_t made_up_size;
    char *made_up_path;
    int made_up_fd;
    size_t call_site_patches;    /* patches with a site (call-site resolutions) */
    size_t patches_at_new_version; /* not-entrant marks and re-pointed sites started at the new
                                    * version's load (callsites.c) */
    size_t patches_from_fill;    /* site re-pointings to a transition stub started at its fill */
    size_t patches_at_callee_code; /* sites re-pointed from their static call stub to compiled
                                      code, started at its load */
    size_t adapters_from_records;  /* calling conventions whose c2i adapter records showed */
    size_t adapters_from_code;     /* adapters of other conventions, read from their i2c
                                    * parts (sitestates.c) */
    size_t callees_named;        /* inline-cache resolutions whose callee of the meantime
                                    is named by the caller's invoke (sitestates.c) */
    uint64_t close_scans;        /* the agent's close scans (STATS patch_close_scans) */
    size_t patches_cut;          /* recorded patches cut into changed calls and the rest
                                    (the counts above are of pieces) */

    dm_method *methods;          /* sorted by id */
    size_t nmethods;
    dm_thread *threads;          /* in start order */
    size_t nthreads;

    /* Problems met while loading ("FILE: offset N: what"), first ones kept. */
    char **warnings;
    size_t nwarnings;            /* kept */
    size_t warnings_total;       /* including dropped */
    bool truncated;              /* meta.jpt ended in a bad or partial record */
} dm_model;

/* Loads DIR/jvm (or DIR itself if it holds meta.jpt). Returns NULL with a
 * one-line message in err if nothing usable could be read; otherwise the
 * model, with recoverable problems in its warnings. */
dm_model *dm_load(const char *dir, char *err, size_t errlen);
/* The same from a meta.jpt image in memory whose code bytes are in the file
 * code_path (tests). */
dm_model *dm_load_mem(const void *meta, size_t meta_len, const char *code_path, char *err,
                      size_t errlen);
void dm_free(dm_model *m);

/* The codelet containing addr, or NULL. */
const dm_codelet *dm_codelet_at(const dm_model *m, uint64_t addr);
/* The code version containing addr that is valid at tsc, or NULL. */
const dm_code *dm_code_at(const dm_model *m, uint64_t addr, uint64_t tsc);
/* The blob containing addr (the latest snapshot), or NULL. */
const dm_blob *dm_blob_at(const dm_model *m, uint64_t addr);

/* The inline stack of the instruction at addr in nmethod version c: frames
 * innermost first, or depth 0 when addr has no scope (then the version's
 * method is all that is known). */
uint32_t dm_inline_at(const dm_model *m, const dm_code *c, uint64_t addr,
                      const dm_frame **frames);
/* The same, also giving [*lo, *hi): the addresses with this same answer. */
uint32_t dm_inline_range(const dm_model *m, const dm_code *c, uint64_t addr,
                         const dm_frame **frames, uint64_t *lo, uint64_t *hi);

/* What is at addr at time tsc, most specific first: an interpreter codelet,
 * else a valid stub or compiled-method version, else a blob snapshot. */
typedef enum dm_where_kind { DM_AT_NOTHING = 0, DM_AT_CODELET, DM_AT_CODE, DM_AT_BLOB } dm_where_kind;
typedef struct dm_where {
    dm_where_kind kind;
    const dm_codelet *codelet;
    const dm_code *code;
    const dm_blob *blob;
} dm_where;
dm_where dm_lookup(const dm_model *m, uint64_t addr, uint64_t tsc);

const dm_method *dm_method_get(const dm_model *m, uint64_t id);
/* "pkg/Cls.name(sig)" into buf (or "0x<id>" for an unknown method). */
const char *dm_method_str(const dm_model *m, uint64_t id, char *buf, size_t len);
const dm_thread *dm_thread_get(const dm_model *m, uint32_t tid);

#endif
