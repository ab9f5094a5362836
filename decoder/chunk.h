/* The layers of a stream's decoding (decode.c), internal to decoder/.
 *
 * A stream is decoded in two layers. The first (chunk.c, with retry.c) takes
 * one chunk of the stream at a time on any thread: libipt, code lookups, the
 * instructions of compiled blocks and their inline-stack records, how each
 * block ends. It depends only on the trace bytes and the time, and records
 * what it found as a list of ops. The second (replay.c) is a small state
 * machine (shadow stack, pending bytecodes, inline stack position, gaps)
 * that replays the ops of every chunk in stream order on the calling thread
 * and makes the events. decode.c cuts streams into chunks and runs both. */
#ifndef JPT_DECODER_CHUNK_H
#define JPT_DECODER_CHUNK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <glib.h>
#include <intel-pt.h>

#include "decoder/decode.h"
#include "decoder/image.h"
#include "decoder/jitpath.h"
#include "decoder/model.h"
#include "decoder/x86.h"

#define SHADOW_MAX 1024     /* call depth tracked; deeper calls drop the oldest */
#define SHADOW_SEARCH 16    /* frames a return may skip (unwinding, lost returns) */
#define MAX_INSN_LEN 15
#define PENDING_MAX 8

/* ---- where an address is -------------------------------------------------- */

typedef enum ukind { U_NONE = 0, U_CODELET, U_CODE, U_BLOB, U_UNKNOWN } ukind;

typedef struct unit {
    ukind kind;
    const void *p;
} unit;

static inline bool same_unit(unit a, unit b)
{
    return a.kind == b.kind && a.p == b.p;
}

/* ---- what a chunk's decoder hands on (the first layer's ops) ------------- */

enum {
    OP_BLOCK = 1,     /* a block; its runs are nruns from run0 in the chunk's run array */
    OP_FORGET,        /* control flow unknown from here (resync) */
    OP_GAP_OPEN,      /* a = reason, b = error, ip = offset */
    OP_SYNC,          /* synchronized at offset ip: an open gap ends */
    OP_SEG_END,       /* end of segment reached while not synchronized */
    OP_OVERFLOW,      /* ip = offset */
    OP_ENABLE,        /* tracing (re)enabled */
    OP_EXIT,          /* follows a block that left its codelet: the unit at its end */
};

typedef struct op {
    uint64_t ip, end_ip;       /* OP_GAP_OPEN: end_ip is the libipt error */
    uint64_t tsc;              /* the decoder's time here (0: none yet) */
    uint64_t off;              /* OP_BLOCK: the stream offset the decoder stood at after it */
    const void *u;             /* the unit at ip (OP_EXIT: where control left from) */
    uint32_t ninsn;            /* OP_GAP_OPEN: the reason */
    uint32_t run0;
    uint16_t nruns;
    uint8_t type;
    uint8_t ukind;
    uint8_t xfer;
} op;

/* One stretch of a compiled block's instructions with the same inline-stack
 * record: the first instruction's address and the record's answer (its
 * address range as offsets in the version). */
typedef struct run {
    uint64_t pc;
    const dm_frame *f;
    uint32_t lo, hi;
    uint32_t d;
    bool back;                 /* entered by a jump back inside the block (libipt
                                * follows direct jumps within a block) */
} run;

typedef struct segment {
    uint64_t begin, end;
    uint64_t lost_before;      /* bytes the collector lost before this segment */
    bool loss_before;
} segment;

/* A call-site resolution under way (decoder/image.h): call, the site whose
 * call the last block ended with (the next block tells whether it went
 * into that site's resolver); site and resolver, a resolution that waits
 * for where the resolver goes on to (its made-up states); in_resolver,
 * whether the last block was the resolver's own, with no trace-off since
 * (the next block elsewhere is where it went: the VM's calls of other
 * stubs while it resolves come after a trace-on). A c2i fixup under way:
 * stub_exit, 1 + the patch that re-points a site whose static call stub's
 * jump the last block ended with (the state a made-up state stands for,
 * or the site's next recorded change), with exit_to where that jump goes
 * (0: the stub's own jump, wherever it goes); fixup, 1 + that patch while
 * the thread runs the c2i adapter there (at adapter), or the resolver a
 * fixup that cleaned the site left it at (dm_patch.at_resolver): if it
 * leaves for the VM by a call (at_call), it re-points the site. last_end:
 * the end of the last block. */
typedef struct resolution {
    uint64_t call;
    uint64_t site, resolver;
    bool in_resolver;
    uint32_t stub_exit, fixup;
    bool at_call;
    uint64_t exit_to, adapter, last_end;
    uint64_t last_site;          /* the last call site the thread went through */
} resolution;

struct strm;

typedef struct chunk {
    struct strm *strm;
    const segment *seg;
    const uint8_t *buf;        /* the stream */
    const atomic_bool *cancel; /* the stream's sink stopped */
    bool want_blocks;
    bool first, last;          /* in its segment */
    uint64_t begin;            /* where decoding starts (a PSB unless first) */
    uint64_t stop;             /* the next chunk's PSB (seg->end if last) */
    uint64_t end;              /* bytes given to libipt: the next chunk's PSB+ too */
    bool pooled;               /* handed to the pool (else decoded by the replay) */
    GArray *ops, *runs, *blocks;
    dc_stats st;               /* the first layer's counters */
    bool done;
} chunk;

/* The first layer's state: one per thread. */
#define XCACHE_SIZE 4096u
typedef struct xcache_ent {
    uint64_t ip;
    int isid;
    uint8_t x;
} xcache_ent;

/* The inline-record runs of a compiled block depend only on the version and
 * the block (jp_path and dm_inline_range are pure). A chunk's run array
 * holds them once per block the cache below remembers, and every op of
 * that block in the chunk points there: a hot loop's blocks are looked up
 * once, and their runs are neither copied again nor written to memory
 * for each pass (they were more than half of a chunk's bytes). The array
 * only grows while a chunk is decoded, so the indices stay valid across
 * retries that drop ops. */
#define RCACHE_SIZE 2048u
typedef struct rcache_ent {
    const dm_code *c;
    uint64_t ip, end_ip;
    uint32_t ninsn;
    uint32_t gen;              /* the wctx's chunk whose run array holds them */
    uint32_t run0;
    uint16_t nruns;
    bool ends_only;
} rcache_ent;

/* Where an address is at a time (dm_lookup is pure in both): the same
 * blocks come back many times between two time updates. */
#define UCACHE_SIZE 4096u
typedef struct ucache_ent {
    uint64_t ip, tsc;
    unit u;
} ucache_ent;

typedef struct wctx {
    const dm_model *m;
    di_cache *cache;
    const dc_trace_info *info;
    struct pt_image_section_cache *iscache;
    di_image *im;              /* the running pass's (for blocks of isid 0) */
    jp_cache *jp;
    const atomic_bool *cancel;
    uint64_t tsc;
    uint64_t off;              /* the stream offset after the newest block */
    resolution res;
    uint64_t retries, retries_kept;   /* this chunk's (see retry) */
    uint64_t fixup_calls;             /* ... of the kept, a call's c2i fixup */
    GHashTable *failed;               /* this chunk's retries that did not help */
    xcache_ent xc[XCACHE_SIZE];
    rcache_ent rc[RCACHE_SIZE];
    uint32_t gen;              /* chunks decoded (rcache_ent.gen) */
    ucache_ent uc[UCACHE_SIZE];
} wctx;


static inline op *push_op(chunk *k, uint8_t type, uint64_t tsc)
{
    guint n = k->ops->len;
    g_array_set_size(k->ops, n + 1);   /* amortized: the array doubles */
    op *o = &g_array_index(k->ops, op, n);
    memset(o, 0, sizeof *o);
    o->type = type;
    o->tsc = tsc;
    return o;
}

/* ---- a decoding run and its retries (retry.c) ------------------------------ */

#define RETRY_BUDGET 256      /* decoding attempts per chunk */
#define SPEC_MAX 64           /* patches (pieces of records, model.h) one attempt applies */
#define RETRY_STAGES 8        /* kept retries from one checkpoint whose patches add up */


/* A point a fresh decoder synchronized at the PSB at `psb` continues from
 * exactly as the running one does (a chunk boundary could be here). */
typedef struct ckpt {
    uint64_t psb;             /* offset in the decoder's bytes */
    uint64_t sync_off;        /* in the segment's: where a retry from it synchronizes */
    uint64_t tsc;
    guint nops, nblocks;
    guint ndis;               /* trace-offs seen before it (pass.dis) */
    size_t nearly;            /* image's early log length */
    resolution res;
    dc_stats st;
} ckpt;

/* Patches an attempt applies once `after` trace-offs have been decoded. */
typedef struct spec {
    uint32_t idx[SPEC_MAX];
    size_t n;
    uint64_t after;
    bool done;
    int family;               /* nonzero: alternatives of one another (with_made_up_states) */
    bool fixup;               /* a call's state before its c2i fixup (with_fixup_states) */
} spec;

/* One decoder's run over a chunk. A decoder reads the segment's bytes, or
 * a resumption's (see resume_at_branch): a made-up PSB+ followed by a
 * stretch of the segment, whose offsets are the segment's minus `shift`. */
typedef struct pass {
    struct pt_block_decoder *dec;
    di_image *im;
    const uint8_t *base, *base_end; /* the bytes the decoder reads */
    int64_t shift;            /* segment offset = decoder offset + shift */
    int status;
    bool boundary;            /* the next chunk's PSB+ has been read */
    uint64_t err_off;         /* where it failed (offset in the segment) */
    uint64_t disables;        /* trace-offs decoded in this run */
    GArray *dis;              /* guint: ops->len at each trace-off */
    ckpt ck[2];               /* the last two checkpoints, newest last */
    int nck;
    /* A retry's patches (retry): each stage applies once its trace-offs
     * have been decoded. A pass that is a kept retry holds them, with the
     * checkpoint it started from, so that a retry from the same checkpoint
     * for a later error keeps them and adds its own. */
    spec stages[RETRY_STAGES];
    int nstages;
    uint64_t stages_psb;
} pass;

/* ---- the second layer's state (replay.c) ---------------------------------- */

typedef struct shadow_ent {
    uint64_t call_ip;
    /* The inline stack compiled code called from (NULL: not from compiled
     * code): a return to it compares the stack at the return address with
     * this one, so the inlined frames the call ended in and those the code
     * after it belongs to become inline returns and calls. */
    const dm_code *jit_code;
    const dm_frame *jit_frames;
    uint32_t jit_depth;
} shadow_ent;

typedef struct pending_gap {
    bool on;
    dc_event ev;
} pending_gap;

typedef struct ctx {
    dc_sink sink;
    void *sink_ctx;
    dc_stats *st;
    bool stop;
    /* A range's end inside a stream (strm.tail): the instruction in flight
     * there is delivered once the stretch after the cut finishes it, and
     * nothing after it (TAIL_ON, then TAIL_DONE). The range after it drops
     * that instruction from what its warm-up left pending (drop_pending). */
    uint8_t tail;
    bool drop_pending;
    uint64_t tsc;
    uint64_t off;          /* the stream offset after the block being replayed */

    /* control-flow state between blocks */
    unit prev;
    xfer prev_xfer;
    uint64_t prev_end_ip;  /* the last instruction of the block before */
    bool resumed;          /* tracing was re-enabled since the last block */
    bool unknown_origin;   /* first block after a (re)synchronization */
    shadow_ent shadow[SHADOW_MAX];
    size_t nshadow;

    /* bytecode events held until their template is left (exit_ip), with the
     * events of code the template called meanwhile */
    dc_event pending[PENDING_MAX];
    unsigned npending;
    const dm_codelet *pending_in;
    bool hold;             /* the next event comes from a call by that template */

    /* compiled-code position */
    uint64_t jit_lo, jit_hi;   /* addresses with the current position's answer */
    const dm_code *jit_code;
    const dm_frame *jit_frames;
    uint32_t jit_depth;
    dm_frame noscope[2];   /* stand for "method, no bci" where a pc has no record */
    unsigned noscope_slot;

    pending_gap gap;
} ctx;

enum { TAIL_OFF, TAIL_ON, TAIL_DONE };

/* chunk.c */
void dc_problem(dc_stats *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dc_pass_free(pass *ps);
/* Remembers where a decoder synchronized at psb could start again (ps->ck). */
void dc_checkpoint(wctx *w, chunk *k, pass *ps, uint64_t psb);
/* Decodes from where ps->dec stands until an error, the end of the trace or
 * the next chunk's PSB+ (ps->boundary). */
void dc_decode_run(wctx *w, chunk *k, pass *ps, uint64_t stop);
void dc_decode_chunk(wctx *w, chunk *k);

/* retry.c */
/* Decodes the stretch before ps's error again with later code for as long as
 * that gets further. A kept retry replaces ps's image. */
void dc_retry_while_it_helps(wctx *w, chunk *k, pass *ps, uint64_t stop,
                             const struct pt_config *cfg, di_store *store, int *budget);

/* replay.c */
void dc_apply_chunk(ctx *x, const chunk *k, const dc_output *out);
void dc_forget_flow(ctx *x);
void dc_flush_pending(ctx *x);
void dc_gap_open(ctx *x, dc_gap_reason reason, int error, uint64_t offset, uint64_t lost);
void dc_gap_close(ctx *x, uint64_t resume_offset, uint64_t resume_tsc);

/* decode.c */
/* The end of the PSB+ header at off (0 if it is none). */
uint64_t dc_psb_header_end(const uint8_t *buf, uint64_t begin, uint64_t end, uint64_t off);

#endif
