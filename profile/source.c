/* The flow source of the profile commands (see source.h). */
#include "profile/source.h"

#include <stdio.h>
#include <string.h>

#include <inttypes.h>

#include "common/jerr.h"
#include "common/jmeta.h"
#include "decoder/percpu.h"
#include "reconstruct/reference.h"
#include "reconstruct/trace.h"
#include "recover/recover.h"

/* The decoder's counts the summary reports, summed over streams. */
static void dc_sum(dc_stats *a, const dc_stats *b)
{
    a->pt_bytes += b->pt_bytes;
    a->lost_bytes += b->lost_bytes;
    a->missing_bytes += b->missing_bytes;
    a->unindexed_bytes += b->unindexed_bytes;
    a->problems += b->problems;
    if (!a->problem[0])
        memcpy(a->problem, b->problem, sizeof a->problem);
    a->skipped_bytes += b->skipped_bytes;
    a->insns += b->insns;
    for (int i = 0; i < 5; i++)
        a->gaps[i] += b->gaps[i];
}

/* A traced run: every thread's stream decoded and projected, and the holes
 * its gaps left filled by recovery (events marked FL_RECOVERED, which the
 * profiles count or leave out by origin). */
static int traced_flow(const char *dir, fl_sink sink, void *ctx, pf_flow_stats *fs, char *err,
                       size_t errlen)
{
    rt_trace *t = rt_open(dir, err, errlen);
    if (!t)
        return -1;
    const char *const *warn;
    size_t nw = rt_warnings(t, &warn);
    for (size_t i = 0; i < nw; i++)
        jerr_warn_grouped(warn[i]);
    const uint32_t *tids;
    size_t ncpu;
    size_t n = rt_threads(t, &tids, &ncpu);
    if (!n) {
        /* No threads from per-CPU streams: the split failed (its reason),
         * or it worked and found no thread's trace. */
        char serr[768];
        if (ncpu && !dc_thread_stream_dir(dir, serr, sizeof serr))
            snprintf(err, errlen, "%s/pt: splitting the per-CPU streams into threads failed: %s",
                     dir, serr);
        else
            snprintf(err, errlen, "%s/pt: no per-thread PT streams (tid-<TID>.pt)%s", dir,
                     ncpu ? "; the per-CPU streams hold no thread's trace" : "");
        rt_close(t);
        return -1;
    }
    int rc = 0;
    rp_stats total = { 0 };
    for (size_t i = 0; i < n && rc == 0; i++) {
        rp_stats st = { 0 };
        dc_stats dc = { 0 };
        rv_stats rs = { 0 };
        char msg[1024];
        rv_icfg ic = rv_program_icfg(rt_program(t));
        rv_options ro = { .icfg = &ic };
        rv_filter *rv = rv_new(&ro, sink, ctx);
        int r = rt_thread_flow(t, tids[i], rv_event, rv, &st, &dc, msg, sizeof msg);
        if (rv_finish(rv, &rs) && r == 0)
            r = 1;
        rv_free(rv);
        if (r < 0) {
            snprintf(err, errlen, "%s", msg);
            rc = -1;
        } else if (r > 0) {
            rc = 1;
        }
        if (dc.problems)
            jerr_warn_kind("decode problem", "%s", dc.problem);
        if (r == 0 && dc.pt_bytes && !dc.blocks)
            jerr_warn_kind("stream undecodable", "%s: thread %u: none of its %" PRIu64 " bytes "
                           "of PT could be decoded into instructions", dir, tids[i],
                           dc.pt_bytes);
        rp_stats_add(&total, &st);
        if (fs) {
            fs->streams++;
            dc_sum(&fs->dc, &dc);
            rv_stats_add(&fs->rv, &rs);
        }
    }
    if (total.bytecodes && total.placed < total.bytecodes)
        jerr_warn("%s: %" PRIu64 " of %" PRIu64 " interpreted bytecodes could not be placed "
                  "in a method", dir, total.bytecodes - total.placed, total.bytecodes);
    if (total.segments_unresolved)
        jerr_warn("%s: %" PRIu64 " of %" PRIu64 " flow segments end unresolved (their calling "
                  "context had to be found again)", dir, total.segments_unresolved,
                  total.segments);
    if (fs)
        fs->rp = total;
    rt_close(t);
    return rc;
}

int pf_flow_source_stats(const char *dir, fl_sink sink, void *ctx, pf_flow_stats *st,
                         char *err, size_t errlen)
{
    if (st)
        memset(st, 0, sizeof *st);
    int mode = ref_trace_mode(dir, err, errlen);
    if (mode < 0)
        return -1;
    if (mode == JM_MODE_REFERENCE)
        return ref_flow_read(dir, sink, ctx, NULL, err, errlen);
    if (st)
        st->traced = true;
    return traced_flow(dir, sink, ctx, st, err, errlen);
}

int pf_flow_source(const char *dir, fl_sink sink, void *ctx, char *err, size_t errlen)
{
    return pf_flow_source_stats(dir, sink, ctx, NULL, err, errlen);
}

uint64_t pf_dc_gaps(const dc_stats *dc)
{
    /* gaps[0] is no gap (DC_GAP_NONE) */
    return dc->gaps[1] + dc->gaps[2] + dc->gaps[3] + dc->gaps[4];
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 100.0;
}

double pf_share_missing(const dc_stats *dc)
{
    if (!dc->pt_bytes && !dc->lost_bytes)
        return 0;
    return pct(dc->lost_bytes, dc->pt_bytes + dc->lost_bytes);
}

double pf_share_decoded(const dc_stats *dc, const rp_stats *rp)
{
    uint64_t skipped = dc->skipped_bytes < dc->pt_bytes ? dc->skipped_bytes : dc->pt_bytes;
    return pct(rp->placed, rp->bytecodes) * pct(dc->pt_bytes - skipped, dc->pt_bytes) / 100.0;
}
