/* Sharded decoding: a trace cut into N pieces decoded by separate processes
 * (or machines), each writing a partial result, and a merge of partial
 * results, in any order and grouping, into the calling context tree of the
 * whole run.
 *
 * The plan. The threads' PT streams, in tid order, make one line of bytes;
 * shard K of N takes the K-th N-th of it. A stream of fewer than
 * PF_SHARD_SPLIT_MIN bytes is never split; a larger one is cut where the
 * line is, and the decoder gives each piece the chunks that begin inside it
 * (decoder/decode.h, dc_options.from / to), so the pieces of a stream
 * partition its chunks. With whole_threads, threads go whole to the least
 * loaded shard, largest first.
 *
 * A piece's partial CCT. A piece that starts inside its thread's stream
 * does not know the frames its thread was in: its tree is relative to that
 * unknown stack. It keeps
 *   - levels: level 0 is the frame running at its start, level j the one j
 *     frames below; what ran in a frame the piece returned into (bytecodes,
 *     time, the calls it made) hangs below that level's root node;
 *   - per level, the method the reconstruction found running there (the
 *     FL_F_CONTEXT calls after it returned beyond what it knew);
 *   - below its thread root, what came after a segment that gave its own
 *     stack (after a gap);
 *   - where it ended, and its last time.
 * A piece that starts at its stream's start is absolute. Merging appends
 * pieces to the absolute piece of their thread, left to right: a piece's
 * levels go onto the frames the one before ended in, aligned by the
 * methods found (the thread root past its outermost frame, where the found
 * frames become the chains a single decode makes there), and its nodes are
 * added below them. Relative pieces wait in the partial result until the
 * pieces before them arrive, so every grouping of merges gives the tree of
 * the one left-to-right fold.
 *
 * Exactness. A thread decoded in one piece gives exactly what `ptdecode
 * export` gives for it. A piece that starts inside a stream starts its
 * reconstruction without the stack and the history a single decode has
 * there: where the projector settles an ambiguity with the frames below
 * (identical methods, the receiver of a call, a return into a frame it
 * did not see entered) or recovery fills a hole from flow before the piece,
 * its flow can differ, and so can the merged tree. Which classes have
 * objects steers choices between call targets the trace cannot tell apart
 * (reconstruct/project.h): a relative piece keeps the classes it took to
 * have none, every piece of a split thread those its flow showed objects
 * of, and a join counts the classes taken to have none that the flow before
 * had shown. pf_part_stats counts those joins, the found frames that differ
 * from the frames before and the realigned joins. */
#ifndef JPT_PROFILE_SHARD_H
#define JPT_PROFILE_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile/cct.h"
#include "profile/names.h"
#include "profile/timebase.h"

#define PF_PART_VERSION 2u
/* Streams smaller than this are not split (a piece gets whole decoder
 * chunks, DC_CHUNK_BYTES each). */
#define PF_SHARD_SPLIT_MIN (4ull << 20)
#define PF_SHARD_MAX 65536u

/* ---- the plan -------------------------------------------------------------- */

typedef struct pf_shard_piece {
    uint32_t shard, tid;
    uint64_t from, to;       /* byte range of the thread's stream */
} pf_shard_piece;

typedef struct pf_shard_plan {
    uint32_t shards;
    bool whole_threads;
    pf_shard_piece *pieces;  /* by tid, then from; a thread's pieces cover [0, size) */
    size_t npieces;
    uint8_t trace_id[32];    /* SHA-256 over info.json and the streams' names and sizes */
    uint8_t plan_id[32];     /* SHA-256 over trace_id and the pieces */
} pf_shard_plan;

/* The plan of N shards for the trace in dir. Returns 0, or -1 with a
 * one-line message (a reference-mode trace, no PT streams). */
int pf_shard_plan_make(const char *dir, uint32_t shards, bool whole_threads,
                       pf_shard_plan *plan, char *err, size_t errlen);
void pf_shard_plan_free(pf_shard_plan *plan);
/* Bytes of PT of shard k in the plan. */
uint64_t pf_shard_plan_bytes(const pf_shard_plan *plan, uint32_t k);

/* ---- partial results ------------------------------------------------------- */

/* Counts of one or more pieces, summed when they merge. */
typedef struct pf_part_stats {
    uint64_t pt_bytes;           /* of the pieces' ranges */
    uint64_t events[3];          /* flow events applied, by origin (fl_origin) */
    uint64_t calls[3];           /* FL_CALL events that counted a call, by origin */
    uint64_t bytecodes, placed;  /* interpreted bytecodes, and given a method (rp_stats) */
    uint64_t lost_bytes, skipped_bytes;
    uint64_t joins;              /* adjacent pieces joined inside a thread */
    uint64_t found_checked;      /* frames found after a join, compared with those before */
    uint64_t found_differ;       /* ... of them another method than the one before */
    uint64_t realigned;          /* joins whose levels were not all on the frames by position */
    uint64_t time_dips;          /* joins where time ran backwards across the join */
    uint64_t assumed_joins;      /* joins after which a choice between call targets took a
                                  * class to have no objects the flow before had shown */
    uint64_t assumed_wrong;      /* ... such classes, summed over those joins */
    uint64_t cpu_ns;             /* CPU time of the shards that made it */
} pf_part_stats;

typedef struct pf_part pf_part;

/* Decodes shard k of the plan from the trace in dir into a new partial
 * result (recovery on, as in `ptdecode export`). jobs: decoder threads per
 * piece (0: 1). Returns NULL with a one-line message when a stream cannot
 * be read or memory runs out. */
pf_part *pf_shard_run(const char *dir, const pf_shard_plan *plan, uint32_t k,
                      const pf_cct_opts *opts, unsigned jobs, const char *title,
                      char *err, size_t errlen);
void pf_part_free(pf_part *p);

/* Writes p to out. Returns 0, -1 on a write error. */
int pf_part_write(const pf_part *p, FILE *out);
/* Reads a partial result; NULL with "FILE: offset N: what" on anything
 * malformed, damaged or of another version. */
pf_part *pf_part_read(const char *path, char *err, size_t errlen);

/* Adds src to dst (both left valid; src may be freed after). They must be
 * of the same trace, plan and options and cover disjoint shards, else -1
 * with a message naming src_name (and dst_name). */
int pf_part_merge(pf_part *dst, const pf_part *src, const char *dst_name, const char *src_name,
                  char *err, size_t errlen);

/* Whether every shard of the plan is in p; missing gets the first missing
 * shards ("3, 5 and 9 more"). */
bool pf_part_complete(const pf_part *p, char *missing, size_t len);
/* The finalized CCT of a complete partial result, NULL (message) if it is
 * not complete or memory ran out. */
pf_cct *pf_part_cct(const pf_part *p, char *err, size_t errlen);

/* What a partial result says about itself. */
const pf_part_stats *pf_part_get_stats(const pf_part *p);
const pf_names *pf_part_names(const pf_part *p);
const char *pf_part_title(const pf_part *p);
const pf_timebase *pf_part_timebase(const pf_part *p);
uint32_t pf_part_shards(const pf_part *p);
/* The shards it holds, count. */
uint32_t pf_part_shard_count(const pf_part *p);

#endif
