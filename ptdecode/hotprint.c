/* The hot-method table (see hotprint.h). */
#include "ptdecode/hotprint.h"

#include <inttypes.h>

#include <glib.h>

#include "common/json.h"

void ptd_print_hot(FILE *out, const pf_cct *t, const pf_names *names, const pf_timebase *tb,
                   pf_metric by, size_t top, bool json)
{
    pf_hot_method *hot;
    size_t count = pf_hot_methods(t, by, &hot);
    size_t shown = count < top ? count : top;
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += pf_hot_value(&hot[i], by);
    char buf[32], tself[32], tincl[32], about[256];
    if (json) {
        json_w j;
        json_init(&j, out, true);
        json_arr(&j);
        for (size_t i = 0; i < shown; i++) {
            json_obj(&j);
            json_kstr(&j, "method", pf_names_readable(names, hot[i].method, buf, sizeof buf));
            json_ku64(&j, "calls", hot[i].calls);
            json_ku64(&j, "self_bytecodes", hot[i].self_bytecodes);
            json_ku64(&j, "bytecodes", hot[i].bytecodes);
            json_ku64(&j, "self_time", hot[i].self_time);
            json_ku64(&j, "time", hot[i].time);
            if (tb->hz > 0) {
                json_ku64(&j, "self_time_ns", (uint64_t)(pf_time_ns(tb, hot[i].self_time) + 0.5));
                json_ku64(&j, "time_ns", (uint64_t)(pf_time_ns(tb, hot[i].time) + 0.5));
            }
            json_end(&j);
        }
        json_end(&j);
        json_finish(&j);
    } else {
        fprintf(out, "%4s %6s %12s %14s %14s %18s %18s  %s\n", "rank", "%", "calls",
                "self bytecodes", "bytecodes", "self time", "time", "method");
        for (size_t i = 0; i < shown; i++) {
            double share = total ? 100.0 * (double)pf_hot_value(&hot[i], by) / (double)total : 0;
            fprintf(out, "%4zu %6.2f %12" PRIu64 " %14" PRIu64 " %14" PRIu64 " %18s %18s  %s\n",
                    i + 1, share, hot[i].calls, hot[i].self_bytecodes, hot[i].bytecodes,
                    pf_time_str(tb, hot[i].self_time, tself, sizeof tself),
                    pf_time_str(tb, hot[i].time, tincl, sizeof tincl),
                    pf_names_readable(names, hot[i].method, buf, sizeof buf));
        }
        fprintf(out, "(%zu methods, ranked by %s%s; %s)\n", count,
                by == PF_BY_CALLS ? "" : "exclusive ", pf_metric_name(by),
                pf_timebase_describe(tb, about, sizeof about));
    }
    g_free(hot);
}
