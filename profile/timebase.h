/* Time in real units: the TSC frequency a trace was recorded with
 * (info.json time.tsc_hz, docs/FORMAT.md), or one given on the command line,
 * and the formatting of TSC intervals with it. Traces without one keep
 * their times in TSC ticks, and the reports say so. */
#ifndef JPT_PROFILE_TIMEBASE_H
#define JPT_PROFILE_TIMEBASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pf_timebase {
    double hz;              /* TSC ticks per second; 0: unknown (times in ticks) */
    char source[48];        /* "info.json (perf_mmap_page)", "--tsc-hz", "" */
    /* Recorded under emulation: the host's TSC while the program ran
     * emulated, so times are those of the emulated run. */
    bool emulated;
} pf_timebase;

/* The timebase of the trace in dir: override_hz when > 0 (--tsc-hz), else
 * info.json's time.tsc_hz. No info.json, or one without the key, gives an
 * unknown frequency and 0. Returns -1 with "FILE: offset N: what" in err
 * when info.json cannot be read, is malformed, or gives a frequency out of
 * 1 MHz .. 100 GHz (*tb is then unknown, apart from override_hz). */
int pf_timebase_read(const char *dir, double override_hz, pf_timebase *tb, char *err,
                     size_t errlen);

/* The same over a JSON text (tests); name stands for the file in messages. */
int pf_timebase_parse(const char *text, size_t len, const char *name, pf_timebase *tb,
                      char *err, size_t errlen);

/* An interval of ticks: "12.345 ms", "3.2 s", "870 ns" with a known
 * frequency, "1234567 ticks" without. Returns buf. */
const char *pf_time_str(const pf_timebase *tb, uint64_t ticks, char *buf, size_t len);
/* Nanoseconds of an interval of ticks (the frequency must be known). */
double pf_time_ns(const pf_timebase *tb, uint64_t ticks);

/* One clause for reports: "TSC at 2.400 GHz (info.json, perf_mmap_page)",
 * "TSC ticks: the trace records no TSC frequency (--tsc-hz HZ gives one)";
 * for an emulated run it adds what time means there. Returns buf. */
const char *pf_timebase_describe(const pf_timebase *tb, char *buf, size_t len);

#endif
