/* Decoding one per-thread PT stream into events (decoder/events.h).
 *
 * The stream pt/<name>.pt is cut into segments at the collector's losses
 * (AUX records with TRUNCATED in pt/<name>.idx); each segment is decoded by
 * its own libipt block decoder, so bytes after a loss never confuse the
 * state before it. Within a segment, a decode error or an OVF ends the
 * current stretch and a DC_GAP event records where and for how long.
 * After an OVF decoding resumes at the next PSB (libipt 2.0.5 has no resync
 * call); after a decode error, at the next branch target the packets give
 * in full (a TIP or TIP.PGE whose address follows from the IP packets since
 * the last PSB), else at the next PSB.
 *
 * Blocks are mapped to events by where they start and how control got
 * there (the previous block's last instruction):
 *   - Interpreter: entering a codelet from another piece of code, or by an
 *     indirect jump (HotSpot's dispatch, which may jump to the same template
 *     again: iload_0 after iload_0), is one execution of that codelet. A
 *     return into a codelet that called out (stub call, VM call) continues
 *     it. Blocks follow direct jumps, so a block that ends in another
 *     codelet also entered that one.
 *   - Compiled code: the inline stack at every instruction of the block
 *     (its path through conditional branches is recovered from the code,
 *     decoder/jitpath.h; where that is ambiguous, at its first and last
 *     instruction only); changes become inline call/return events.
 *   - Calls are tracked on a small shadow stack (libipt is configured to
 *     end blocks at calls) to tell returns into a caller from entries. */
#ifndef JPT_DECODER_DECODE_H
#define JPT_DECODER_DECODE_H

#include <stdint.h>

#include "decoder/events.h"
#include "decoder/image.h"
#include "decoder/model.h"
#include "decoder/trinfo.h"

typedef struct dc_stats {
    uint64_t pt_bytes;          /* bytes of the stream decoded: the file, up to the end
                                   of its index (docs/FORMAT.md, "Damage and loss") */
    uint64_t segments;          /* pieces between collector losses */
    uint64_t blocks, insns;
    uint64_t events[DC_KIND_COUNT];
    uint64_t gaps[5];           /* by dc_gap_reason */
    uint64_t skipped_bytes;     /* stream bytes not decoded (after errors, before a PSB) */
    uint64_t lost_bytes;        /* the collector's losses, as recorded, and missing_bytes */
    uint64_t missing_bytes;     /* the index covers them, the file ends before: cut */
    uint64_t unindexed_bytes;   /* of the file, past the index's last record: not decoded */
    uint64_t enables, disables; /* TIP.PGE / TIP.PGD seen */
    uint64_t image_rebuilds, image_sections;
    uint64_t patches_resolved;  /* patches applied ahead of their record time (call sites
                                   as the thread resolved them, their stub fills, retries) */
    uint64_t states_made_up;    /* of those, call-site states no record held: the site
                                   calling its static stub (decoder/model.h) */
    uint64_t jit_blocks_ends_only;  /* compiled-code blocks whose inner path was not unique */
    uint64_t first_tsc, last_tsc;
    uint64_t chunks;            /* pieces decoded independently (see dc_options) */
    uint64_t retries;           /* stretches decoded again with code recorded later */
    uint64_t retries_kept;      /* ... that got further, and replaced the first attempt */
    uint64_t fixup_calls;       /* ... of them, a call that went through its static stub and
                                   the c2i adapter's fixup (decoder/model.h, fixup_states) */
    uint64_t resumes;           /* decoding resumed at a branch target after a failure,
                                 * before the next PSB (chunk.c, resume_at_branch) */
    /* Problems with the inputs around the stream (a damaged index, a code
     * image libipt refused): how many, and the first one's message. */
    uint64_t problems;
    char problem[512];
} dc_stats;

/* Where the results go. */
typedef struct dc_output {
    dc_sink sink;             /* every event */
    /* Optional: every block libipt returns, before its events (tools and
     * tests that check the decoded control flow itself). */
    void (*block)(const struct pt_block *b, uint64_t tsc, void *ctx);
    /* Optional: bytes of the stream done so far, now and then (progress
     * displays); a last call has done == total. */
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    /* Optional, for dc_decode_streams: before the stream's first event, and
     * after its last (its stats and result as dc_decode_stream returns it,
     * err the message when rc is -1). */
    void (*started)(void *ctx);
    void (*finished)(const dc_stats *st, int rc, const char *err, void *ctx);
    void *ctx;                /* passed to all */
} dc_output;

/* Parallel decoding. Each segment is cut at PSBs into chunks of at least
 * chunk_bytes; the chunks' PT is decoded independently (libipt, code and
 * inline-stack lookups, the instructions of compiled blocks) on up to
 * `threads` threads, at most threads + 1 chunks in flight, and the results
 * are replayed in stream order on the calling thread, which keeps the flow
 * state (shadow stack, pending bytecodes, inline position, gaps) across
 * chunks and makes the events there. A chunk's decoder reads on through the
 * next chunk's PSB+ and stops at its FUP address. Each chunk starts from the
 * code as recorded at its first PSB's time: what a chunk applied ahead of
 * its record time (call-site resolutions the thread went through, retries)
 * ends with it, and the next chunk finds it again where the trace needs it
 * (retry.c). So the chunk size can change the events next to a
 * boundary, and the thread count cannot: sink, block and progress
 * callbacks all run on the calling thread. */
typedef struct dc_options {
    unsigned threads;          /* 0: the number of processors */
    uint64_t chunk_bytes;      /* 0: DC_CHUNK_BYTES */
    /* Only the chunks that begin in [from, to) of each stream (to 0: its
     * end), and the loss gaps of the segments that begin there; the chunks
     * are cut as for the whole stream. A range that starts inside a segment
     * first replays the stretch from the PSB before it (at most 64 KiB back)
     * for the flow state there, and one that ends inside a segment finishes
     * the instruction in flight at its end with the first bytes after it.
     * Ranges that partition a stream partition its chunks and give its
     * events (sharded decoding, profile/shard.h), apart from a call into
     * untraced code made before a range that returns inside it: without
     * the call, the return is taken for the instruction starting again. */
    uint64_t from, to;
} dc_options;
#define DC_CHUNK_BYTES (1ull << 20)

/* What the streams of one trace are decoded against: its code timeline,
 * the image cache over that code's snapshots, and the CPU the trace was
 * recorded on (info NULL: not known, no errata applied). */
typedef struct dc_trace {
    const dm_model *m;
    di_cache *cache;
    const dc_trace_info *info;
} dc_trace;

/* Decodes the stream at pt_path (its index at idx_path, NULL or missing:
 * no losses known, the whole file decoded), on the calling thread. Returns
 * 0 when the stream was decoded to its end, 1 if the sink stopped it, -1 if
 * the stream could not be read at all (message in err). Decode problems
 * inside the stream are gaps, not failures. */
int dc_decode_stream(const dc_trace *tr, const char *pt_path, const char *idx_path,
                     const dc_output *out, dc_stats *st, char *err, size_t errlen);
/* The same with options (NULL: one thread, as dc_decode_stream). */
int dc_decode_stream_opts(const dc_trace *tr, const char *pt_path, const char *idx_path,
                          const dc_output *out, const dc_options *opt, dc_stats *st, char *err,
                          size_t errlen);

/* Several streams, one after the other as far as their outputs can tell
 * (all of a stream's callbacks, in order, before the next stream's), their
 * chunks decoded together on the thread pool: small streams behind a large
 * one are decoded while it is replayed. Fills each dc_stream's st, rc and
 * err; returns -1 if a stream could not be read, else 0. */
typedef struct dc_stream {
    const char *pt_path, *idx_path;
    dc_output out;
    dc_stats *st;
    int rc;
    char err[512];
} dc_stream;
int dc_decode_streams(const dc_trace *tr, dc_stream *streams, size_t n, const dc_options *opt);

/* The per-thread streams of DIR/pt ("tid-<TID>"), sorted by tid. Returns the
 * count; *tids is g_free'd by the caller. Per-CPU streams are not listed
 * (*ncpu counts them). */
size_t dc_list_thread_streams(const char *dir, uint32_t **tids, size_t *ncpu);

/* Calls fn(arg) on a thread whose stack holds libipt's deepest block (its
 * block decoder recurses once per cached decision point of a block), and
 * waits for it; on the caller's stack if no thread can be made. Anything
 * that runs pt_blk_next should run this way. */
void dc_call_on_deep_stack(void (*fn)(void *), void *arg);

/* libipt ends a block after 65535 instructions. Full blocks that read no
 * packet (at most one TNT packet's branches) are a cycle that needs no
 * trace, a jump to itself for one: code the thread cannot have been
 * running, since its trace goes on (a wrong image, HotSpot's unfilled call
 * stub jumping to itself). libipt would follow it forever. A guard is fed
 * every block pt_blk_next returned and says when decoding is stuck so (a
 * decode error to the caller); zero-initialize it, and again after a
 * resynchronization. */
typedef struct dc_cycle_guard {
    unsigned full;             /* full blocks in a row at the same trace offset */
    uint64_t off;
} dc_cycle_guard;
bool dc_cycle_stuck(dc_cycle_guard *g, struct pt_block_decoder *dec, const struct pt_block *b);

#endif
