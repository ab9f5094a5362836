/* The flow source of the profile commands (see source.h). */
#include "profile/source.h"

#include <stdio.h>

#include <inttypes.h>

#include "common/jerr.h"
#include "common/jmeta.h"
#include "reconstruct/reference.h"
#include "reconstruct/trace.h"
#include "recover/recover.h"

/* A traced run: every thread's stream decoded and projected, and the holes
 * its gaps left filled by recovery (events marked FL_RECOVERED, which the
 * profiles count or leave out by origin). */
static int traced_flow(const char *dir, fl_sink sink, void *ctx, char *err, size_t errlen)
{
    rt_trace *t = rt_open(dir, err, errlen);
    if (!t)
        return -1;
    const char *const *warn;
    size_t nw = rt_warnings(t, &warn);
    for (size_t i = 0; i < nw; i++)
        jerr_warn("%s", warn[i]);
    const uint32_t *tids;
    size_t ncpu;
    size_t n = rt_threads(t, &tids, &ncpu);
    if (!n) {
        snprintf(err, errlen, "%s/pt: no per-thread PT streams (tid-<TID>.pt)%s", dir,
                 ncpu ? "; per-CPU streams are not supported yet" : "");
        rt_close(t);
        return -1;
    }
    int rc = 0;
    rp_stats total = { 0 };
    for (size_t i = 0; i < n && rc == 0; i++) {
        rp_stats st = { 0 };
        char msg[1024];
        rv_filter *rv = rv_new(NULL, sink, ctx);
        int r = rt_thread_flow(t, tids[i], rv_event, rv, &st, NULL, msg, sizeof msg);
        if (rv_finish(rv, NULL) && r == 0)
            r = 1;
        rv_free(rv);
        if (r < 0)
            jerr_warn("%s", msg);    /* one unreadable stream: the others still count */
        else if (r > 0)
            rc = 1;
        rp_stats_add(&total, &st);
    }
    if (total.bytecodes && total.placed < total.bytecodes)
        jerr_warn("%s: %" PRIu64 " of %" PRIu64 " interpreted bytecodes could not be placed "
                  "in a method", dir, total.bytecodes - total.placed, total.bytecodes);
    if (total.segments_unresolved)
        jerr_warn("%s: %" PRIu64 " of %" PRIu64 " flow segments end unresolved (their calling "
                  "context had to be found again)", dir, total.segments_unresolved,
                  total.segments);
    rt_close(t);
    return rc;
}

int pf_flow_source(const char *dir, fl_sink sink, void *ctx, char *err, size_t errlen)
{
    int mode = ref_trace_mode(dir, err, errlen);
    if (mode < 0)
        return -1;
    if (mode == JM_MODE_REFERENCE)
        return ref_flow_read(dir, sink, ctx, NULL, err, errlen);
    return traced_flow(dir, sink, ctx, err, errlen);
}
