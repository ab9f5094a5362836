/* Where profiles get their flow from: the one function the profile commands
 * call for events. */
#ifndef JPT_PROFILE_SOURCE_H
#define JPT_PROFILE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decoder/decode.h"
#include "profile/flowcache.h"
#include "reconstruct/flow.h"
#include "reconstruct/project.h"
#include "recover/recover.h"

/* How a traced run's flow is made, for the whole process (the commands set
 * it from --jobs and --no-cache). */
typedef struct pf_source_opts {
    /* Threads that decode and reconstruct: 0 the number of processors; 1
     * everything on the calling thread. With more, PT chunks are decoded
     * on a pool (decoder/decode.h), and decoding with projection runs on a
     * thread of its own while recovery and the sink run on the caller's.
     * The flow is the same whatever the count. */
    unsigned jobs;
    /* Neither read nor write the decoded-flow cache (flowcache.h). */
    bool no_cache;
} pf_source_opts;

void pf_source_set_options(const pf_source_opts *o);
const pf_source_opts *pf_source_options(void);

/* What the pipeline reports besides the events: of a traced run, the
 * decoder's, the projector's and recovery's counts summed over threads. */
typedef struct pf_flow_stats {
    bool traced;             /* false: a reference-mode trace (nothing lost, no PT) */
    bool cached;             /* the flow came from the decoded-flow cache */
    bool cache_written;      /* ... was decoded and written to it */
    uint32_t streams;        /* per-thread PT streams read */
    dc_stats dc;             /* pt_bytes, lost_bytes, missing_bytes, unindexed_bytes,
                                skipped_bytes, insns, gaps, problems summed */
    rp_stats rp;
    rv_stats rv;
} pf_flow_stats;

/* A read of the flow. A traced run's flow is that of its threads one after
 * the other (by tid), each thread's events between begin and end. */
typedef struct pf_flow_request {
    fl_sink sink;
    void *ctx;               /* for every callback */
    /* The projector's flow, without recovery's events (FL_RECOVERED,
     * FL_GUESSED); otherwise recovery fills the holes (its defaults). */
    bool decoded_only;
    int64_t tid;             /* -1 every thread; else this thread only */
    /* Warn about what the counts show: streams with decode problems or none
     * of their bytes decoded, bytecodes not placed, segments unresolved
     * (the profiles do; `ptdecode flow` prints the counts instead). */
    bool warn_counts;
    /* Optional, a traced run's threads: begin before a thread's first
     * event; end after its last, with its result and counts (rv only when
     * recovery ran). */
    void (*begin)(uint32_t tid, void *ctx);
    void (*end)(const fc_thread *t, void *ctx);
    /* A sink's nonzero return ends its thread's flow only: the next
     * thread's follows. */
    bool stop_thread_only;
    /* After a thread whose stream cannot be read (end tells), go on with the
     * next one (the result is -1 at the end). */
    bool keep_going;
    /* Optional: the trace opened by the caller, to decode with when the
     * flow is not cached (its warnings are the caller's to print). */
    struct rt_trace *trace;
} pf_flow_request;

/* Delivers the reconstructed flow of the trace in dir: for a
 * reference-mode trace (JVM_INFO mode 1) the agent's records
 * (reconstruct/reference.h); for a traced run, the decoded and
 * reconstructed flow, from the decoded-flow cache when it holds the trace's
 * (when the whole flow is read, and the cache is not off, a missing or stale
 * cache is made on the way). Returns 0 when the whole flow was delivered,
 * 1 when the sink stopped it, -1 with a one-line message in err (a stream
 * that cannot be read: the flow delivered so far is that of the streams
 * before). st (may be NULL) is zeroed and filled. Callers run the trace
 * check (decoder/tracecheck.h) first. */
int pf_flow_read(const char *dir, const pf_flow_request *rq, pf_flow_stats *st, char *err,
                 size_t errlen);

/* The whole flow with recovery, the profile commands' warnings on. */
int pf_flow_source(const char *dir, fl_sink sink, void *ctx, char *err, size_t errlen);
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
