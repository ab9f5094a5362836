/* Decoding one per-thread PT stream into events (decoder/events.h).
 *
 * The stream pt/<name>.pt is cut into segments at the collector's losses
 * (AUX records with TRUNCATED in pt/<name>.idx); each segment is decoded by
 * its own libipt block decoder, so bytes after a loss never confuse the
 * state before it. Within a segment, a decode error or an OVF ends the
 * current stretch: decoding resumes at the next PSB (libipt 2.0.5 has no
 * resync call) and a DC_GAP event records where and for how long.
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
    uint64_t pt_bytes;          /* size of the stream */
    uint64_t segments;          /* pieces between collector losses */
    uint64_t blocks, insns;
    uint64_t events[DC_KIND_COUNT];
    uint64_t gaps[5];           /* by dc_gap_reason */
    uint64_t skipped_bytes;     /* stream bytes not decoded (after errors, before a PSB) */
    uint64_t lost_bytes;        /* the collector's losses, as recorded */
    uint64_t enables, disables; /* TIP.PGE / TIP.PGD seen */
    uint64_t image_rebuilds, image_sections;
    uint64_t patches_resolved;  /* call-site patches applied when the thread resolved them */
    uint64_t jit_blocks_ends_only;  /* compiled-code blocks whose inner path was not unique */
    uint64_t first_tsc, last_tsc;
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
    void *ctx;                /* passed to all */
} dc_output;

/* Decodes the stream at pt_path (its index at idx_path, NULL or missing:
 * no losses known). Returns 0 when the stream was decoded to its end, 1 if
 * the sink stopped it, -1 if the stream could not be read at all (message
 * in err). Decode problems inside the stream are gaps, not failures. */
int dc_decode_stream(const dm_model *m, di_cache *cache, const dc_trace_info *info,
                     const char *pt_path, const char *idx_path, const dc_output *out,
                     dc_stats *st, char *err, size_t errlen);

/* The per-thread streams of DIR/pt ("tid-<TID>"), sorted by tid. Returns the
 * count; *tids is g_free'd by the caller. Per-CPU streams are not listed
 * (*ncpu counts them). */
size_t dc_list_thread_streams(const char *dir, uint32_t **tids, size_t *ncpu);

#endif
