/* The hardware backend (perf_event_open on the intel_pt PMU). For now it only
 * tells whether this machine could use it; recording goes through --emulate. */
#include "collector/ptrec.h"

#include <stdio.h>
#include <sys/stat.h>

#define INTEL_PT_SYSFS "/sys/bus/event_source/devices/intel_pt"

static int perf_prepare(pr_backend *b, const pr_opts *o, char ***exec_argv,
                        char *err, size_t errlen)
{
    (void)b; (void)o; (void)exec_argv;
    struct stat st;
    if (stat(INTEL_PT_SYSFS "/type", &st) != 0) {
        snprintf(err, errlen, "this machine has no Intel PT (no %s); use --emulate to record "
                 "under emulation", INTEL_PT_SYSFS);
        return PR_EXIT_USAGE;
    }
    snprintf(err, errlen, "this machine has Intel PT, but the hardware backend is not built "
             "yet; use --emulate to record under emulation");
    return PR_EXIT_USAGE;
}

static size_t perf_child_fds(pr_backend *b, int *fds, size_t max)
{
    (void)b; (void)fds; (void)max;
    return 0;
}

static int perf_start(pr_backend *b, pid_t child, char *err, size_t errlen)
{
    (void)b; (void)child;
    snprintf(err, errlen, "the hardware backend is not built yet");
    return -1;
}

static int perf_on_filter(pr_backend *b, uint64_t lo, uint64_t hi, char *err, size_t errlen)
{
    (void)b; (void)lo; (void)hi;
    snprintf(err, errlen, "the hardware backend is not built yet");
    return -1;
}

static int perf_finish(pr_backend *b, pr_summary *sum)
{
    pr_scan_streams(b->opts->out_dir, sum);
    return 0;
}

static void perf_destroy(pr_backend *b) { (void)b; }

const pr_backend_ops pr_perf_ops = {
    .name = "perf",
    .prepare = perf_prepare,
    .child_fds = perf_child_fds,
    .start = perf_start,
    .on_filter = perf_on_filter,
    .finish = perf_finish,
    .destroy = perf_destroy,
};
