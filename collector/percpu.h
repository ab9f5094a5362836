/* Emulated per-CPU mode: turns the per-thread streams the emulation plugin
 * wrote (pt/tid-N.pt, .idx, sideband/tid-N.sb) into what the hardware
 * backend writes for N CPUs (pt/cpu-K.pt, .idx, sideband/cpu-K.sb with
 * PERF_RECORD_SWITCH records), so the per-CPU decoding path can be exercised
 * without PT hardware. docs/FORMAT.md, "Emulated per-CPU mode", describes
 * the scheduling policy and what is re-encoded. */
#ifndef JPT_COLLECTOR_PERCPU_H
#define JPT_COLLECTOR_PERCPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/perf_records.h"

/* Time a context switch takes on a virtual CPU, in TSC ticks: the next
 * thread's first packet comes at least this long after the previous
 * thread's last one, and the switch records lie inside that pause. */
#define PC_SWITCH_TICKS 2000u

typedef struct pc_params {
    unsigned ncpus;             /* >= 1 */
    /* Keep the per-thread input under eval/per-thread/ (pt/, sideband/)
     * instead of deleting it. */
    bool keep_threads;
    /* TSC -> perf time as the kernel converts (the inverse of
     * perf_time_to_tsc); the sideband's times are perf times. */
    perf_time_conv time;
    /* Optional: input bytes done so far of total, now and then (a progress
     * display; a last call has done == total). */
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    void *ctx;
} pc_params;

typedef struct pc_result {
    uint64_t threads, stretches;
    uint64_t switches;          /* SWITCH records written (in and out) */
    uint64_t migrations;        /* stretches on another CPU than the thread's previous one */
    uint64_t delayed;           /* stretches that waited for a CPU */
    uint64_t max_delay;         /* the largest shift of a thread's time, in TSC ticks */
    uint64_t reencoded_ips;     /* first IP packets of a stretch made uncompressed */
    uint64_t psbs_added;        /* PSB+ put before a stretch after a loss */
    uint64_t skipped_bytes;     /* undecodable input bytes left out */
    uint64_t lost_bytes, truncated;
} pc_result;

/* TSC -> perf time, exactly as the kernel computes it for
 * perf_event_mmap_page users (time_zero + tsc * mult >> shift, split). */
uint64_t pc_tsc_to_perf_time(const perf_time_conv *tc, uint64_t tsc);

/* A conversion like the kernel's for this machine: mult/shift from the
 * TSC frequency measured against CLOCK_MONOTONIC, time_zero so perf times
 * read as CLOCK_MONOTONIC nanoseconds. */
void pc_host_time_conv(perf_time_conv *tc);

/* Converts DIR's per-thread streams. Returns 0, or -1 with a one-line
 * message naming the file (and offset) in err; on failure the per-thread
 * streams are left in place. */
int pc_convert(const char *dir, const pc_params *p, pc_result *res, char *err, size_t errlen);

#endif
