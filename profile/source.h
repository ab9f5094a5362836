/* Where profiles get their flow from: the one function the profile commands
 * call for events. */
#ifndef JPT_PROFILE_SOURCE_H
#define JPT_PROFILE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/decode.h"
#include "reconstruct/flow.h"
#include "reconstruct/project.h"
#include "recover/recover.h"

/* Delivers the reconstructed flow of the trace in dir to sink: for a
 * reference-mode trace (JVM_INFO mode 1) the agent's records
 * (reconstruct/reference.h); for a traced run, the decoded and
 * reconstructed flow. Returns 0 when the whole flow was delivered, 1 when
 * the sink stopped it, -1 with a one-line message in err (a stream that
 * cannot be read: the flow delivered so far is that of the streams
 * before). Callers run the trace check (decoder/tracecheck.h) first. */
int pf_flow_source(const char *dir, fl_sink sink, void *ctx, char *err, size_t errlen);

/* What the pipeline reports besides the events: of a traced run, the
 * decoder's, the projector's and recovery's counts summed over threads. */
typedef struct pf_flow_stats {
    bool traced;             /* false: a reference-mode trace (nothing lost, no PT) */
    uint32_t streams;        /* per-thread PT streams read */
    dc_stats dc;             /* pt_bytes, lost_bytes, missing_bytes, unindexed_bytes,
                                skipped_bytes, insns, gaps, problems summed */
    rp_stats rp;
    rv_stats rv;
} pf_flow_stats;

/* pf_flow_source that also fills *st (zeroed first). */
int pf_flow_source_stats(const char *dir, fl_sink sink, void *ctx, pf_flow_stats *st,
                         char *err, size_t errlen);

/* Number of gaps the decoder reported (every reason). */
uint64_t pf_dc_gaps(const dc_stats *dc);
/* PMD, data missing: the bytes the collector lost over the bytes recorded
 * plus lost, in percent (0 when there is no data at all). */
double pf_share_missing(const dc_stats *dc);
/* PD, decoded: the share of interpreted bytecode events given a (method,
 * bci), times the share of recorded bytes the decoder did not skip, in
 * percent. `ptdecode stats` and the summary print these two. */
double pf_share_decoded(const dc_stats *dc, const rp_stats *rp);

#endif
