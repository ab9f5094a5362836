/* The intel_pt PMU as sysfs describes it, and the perf_event_attr.config
 * ptrec builds from it. Pure functions over a sysfs tree (the real one under
 * "/", or a copy under another root for tests): no bit position is
 * hard-coded, every field comes from format/<name> ("config:10",
 * "config:14-17") and every limit from caps/<name>. */
#ifndef JPT_COLLECTOR_PERF_PMU_H
#define JPT_COLLECTOR_PERF_PMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Relative to the sysfs root (JPT_SYSFS_ROOT, default "/"). */
#define PERF_PMU_DIR "sys/bus/event_source/devices/intel_pt"
#define PERF_CPU_ONLINE "sys/devices/system/cpu/online"

/* One format field: bits [lo, hi] of attr.config. */
typedef struct perf_field {
    bool present;
    unsigned lo, hi;
} perf_field;

typedef struct perf_pmu {
    uint32_t type;                 /* attr.type */
    perf_field pt, tsc, mtc, mtc_period, cyc, cyc_thresh, noretcomp, branch, psb_period;
    /* caps/: absent files read as 0 (the feature is not there) */
    bool ip_filtering;
    uint32_t num_address_ranges;
    uint32_t psb_periods;          /* bitmap: bit n allows psb_period encoding n */
    uint32_t mtc_periods;          /* bitmap: bit n allows mtc_period encoding n */
    uint32_t cycle_thresholds;     /* bitmap */
    bool psb_cyc, mtc_cap;         /* caps/psb_cyc, caps/mtc */
} perf_pmu;

/* Parses a format string such as "config:10" or "config:14-17" (a trailing
 * newline allowed). Only attr.config is accepted: config1/config2 fields are
 * not needed by ptrec and are refused rather than silently misplaced. */
bool perf_parse_format(const char *text, perf_field *f, const char **why);

/* Parses a caps value: decimal for counts (ip_filtering, num_address_ranges),
 * hex for bitmaps (psb_periods "003f", mtc_periods "249"). */
bool perf_parse_cap(const char *text, bool hex, uint32_t *out, const char **why);

/* Reads ROOT/PERF_PMU_DIR. Returns 0; -1 (ENOENT) when there is no such PMU;
 * -2 on a damaged file, with "FILE: problem" in err. */
int perf_pmu_load(const char *root, perf_pmu *pmu, char *err, size_t errlen);

/* What ptrec asks of PT. */
typedef struct perf_pt_request {
    bool tsc, noretcomp, branch, cyc;
    unsigned mtc_period;           /* 0: no MTC; else the encoding */
    uint64_t psb_period_bytes;     /* rounded to the nearest allowed period */
} perf_pt_request;

/* Builds attr.config. Fields the PMU does not describe are refused when
 * asked for (a request for TSC on a PMU without a tsc field) and left out
 * otherwise. *psb_actual receives the PSB period used (a power of two from
 * 2K on, the nearest one at or above the request that caps/psb_periods
 * allows). Returns false with a one-line reason in err. */
bool perf_pmu_config(const perf_pmu *pmu, const perf_pt_request *req, uint64_t *config,
                     uint64_t *psb_actual, char *err, size_t errlen);

/* Sets bits [f.lo, f.hi] of *config to value; false when it does not fit. */
bool perf_field_set(const perf_field *f, uint64_t value, uint64_t *config);

/* Parses a CPU list such as "0-3,5,8-9\n" (sysfs cpu/online). Fills at most
 * max entries of cpus (ascending) and returns their count, or -1 with the
 * reason in *why (garbage, descending ranges, more than max CPUs). */
int perf_parse_cpulist(const char *text, int *cpus, int max, const char **why);

/* Reads ROOT/PERF_CPU_ONLINE. Returns the count, or -1 with err set. */
int perf_online_cpus(const char *root, int *cpus, int max, char *err, size_t errlen);

/* The IP filter string for PERF_EVENT_IOC_SET_FILTER: "filter 0xLO/SIZE". */
void perf_filter_string(uint64_t lo, uint64_t hi, char *buf, size_t len);

/* Can ncpus buffers of bytes_per_cpu each be locked? The kernel allows
 * perf_event_mlock_kb per CPU plus RLIMIT_MEMLOCK (bytes; RLIM_INFINITY is
 * UINT64_MAX) unless the caller has CAP_IPC_LOCK. False with a one-line
 * reason (naming perf_event_mlock_kb and the fix) in err. */
bool perf_mlock_fits(unsigned ncpus, uint64_t bytes_per_cpu, uint64_t mlock_kb,
                     uint64_t rlimit_memlock, bool ipc_lock, char *err, size_t errlen);

#endif
