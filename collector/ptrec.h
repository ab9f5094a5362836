/* ptrec internals shared by the front end (ptrec.c), the backends and the
 * trace-directory summary (ptrec_info.c).
 *
 * A backend is the part that actually produces PT: the emulated one runs the
 * command under qemu-x86_64 with the libptemu.so plugin; the hardware one
 * (perf_event_open on intel_pt) will plug into the same few calls. The front
 * end owns everything else: the command line, the trace directory, the
 * agent's handshake, signals and the child's exit status. */
#ifndef JPT_COLLECTOR_PTREC_H
#define JPT_COLLECTOR_PTREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "collector/ptrec_lib.h"

#define PR_DEFAULT_OUT "ptrec.trace"
#define PR_DEFAULT_PSB_PERIOD 4096u

/* Exit codes of ptrec's own failures (the child's status is passed through). */
#define PR_EXIT_USAGE 2      /* bad options, missing tools, output exists */
#define PR_EXIT_NOEXEC 126   /* the command exists but cannot be run */
#define PR_EXIT_NOTFOUND 127 /* the command does not exist */

typedef enum pr_filter_mode {
    PR_FILTER_CODECACHE,  /* trace nothing until the agent reports the code cache */
    PR_FILTER_ALL,        /* trace all user code from the start */
    PR_FILTER_RANGE,      /* a fixed range from the command line */
} pr_filter_mode;

typedef struct pr_opts {
    const char *out_dir;        /* absolute after option processing */
    bool emulate, force, quiet, keep_lossless, test_log;
    bool sideband_only;                   /* hardware backend without PT */
    /* The command is not a java launcher: it runs natively with libjptexec.so
     * preloaded, and each java launcher exec'd in its process tree is traced
     * (collector/README.md, "Scripts"). */
    bool tree;
    const char *qemu, *plugin, *agent;   /* explicit paths or NULL */
    pr_filter_mode filter;
    uint64_t range_lo, range_hi;          /* PR_FILTER_RANGE */
    uint64_t psb_period;
    uint64_t aux_size, drain_rate;        /* 0: not set (no loss model) */
    unsigned cpus;                        /* --cpus: emulated per-CPU mode (0: per thread) */
    char **command;                       /* NULL-terminated, as given */
    char *resolved;                       /* command[0] found on PATH */
} pr_opts;

typedef struct pr_stream {
    char *name;                 /* "tid-1234" */
    uint64_t pt_bytes, lost_bytes, aux_records, truncated;
} pr_stream;

typedef struct pr_summary {
    pr_stream *streams;
    size_t nstreams;
    uint64_t pt_bytes, lost_bytes, truncated;
} pr_summary;

typedef struct pr_backend pr_backend;

/* The plugin's control connection of one emulated process: ptrec sends
 * `filter 0xLO 0xHI`, the plugin answers `ok` or `no ...`. */
typedef struct pr_ctl {
    int fd;
    char linebuf[256];
    size_t linelen;
} pr_ctl;

typedef struct pr_backend_ops {
    const char *name;           /* info.json "backend" */
    /* Checks the tools and builds the argv to exec (it may wrap the command).
     * Runs before the trace directory is created so a failure leaves nothing
     * behind. Returns 0, or an exit code with a one-line message in err. */
    int (*prepare)(pr_backend *b, const pr_opts *o, char ***exec_argv,
                   char *err, size_t errlen);
    /* Optional: the child has been forked and waits before its exec until
     * this returns; perf events attached now see the exec (enable_on_exec)
     * and everything after it. Returns 0, or -1 with a one-line message in
     * err (the child is then killed before it runs the command). */
    int (*attach)(pr_backend *b, pid_t child, char *err, size_t errlen);
    /* Descriptors the child must inherit (CLOEXEC is cleared after fork). */
    size_t (*child_fds)(pr_backend *b, int *fds, size_t max);
    /* The child has been exec'ed. */
    int (*start)(pr_backend *b, pid_t child, char *err, size_t errlen);
    /* The agent reported its code cache: trace [lo, hi) from now on. Must
     * answer within a few seconds (the agent waits 5 s for its reply). ctl:
     * the emulated JVM's control connection in a process tree, NULL for the
     * command itself. */
    int (*on_filter)(pr_backend *b, pr_ctl *ctl, uint64_t lo, uint64_t hi, char *err,
                     size_t errlen);
    /* The child has exited: fill in the streams of the trace directory. */
    int (*finish)(pr_backend *b, pr_summary *sum);
    /* A JVM of the process tree traced into a directory of its own (not
     * the trace directory) has ended: fill in its streams. */
    void (*finish_dir)(pr_backend *b, const char *dir, pr_summary *sum);
    void (*destroy)(pr_backend *b);
} pr_backend_ops;

/* What the hardware backend adds to info.json (docs/FORMAT.md). */
typedef struct pr_perf_info {
    bool pt;                    /* false: --sideband-only (no PT event) */
    uint32_t pmu_type;
    uint64_t config;            /* attr.config of the intel_pt events */
    bool tsc, mtc, cyc, noretcomp, branch;
    unsigned mtc_period;
    uint64_t psb_period;        /* bytes, as configured (0: hardware default) */
    bool time_valid;            /* cap_user_time_zero: time_* below are valid */
    uint64_t time_zero;
    uint32_t time_mult;
    uint16_t time_shift;
    bool has_cpuid_15h;         /* CPUID leaf 0x15: TSC / core crystal clock ratio */
    uint32_t cpuid_15h_eax, cpuid_15h_ebx, cpuid_15h_ecx;
    unsigned ncpus;
    uint64_t aux_size, data_size;   /* bytes per CPU */
    uint32_t num_address_ranges;
    const char *ip_filter;      /* "none", "set", or "refused" (fell back to no filter) */
    uint64_t lost_records;      /* sideband: PERF_RECORD_LOST records, and events lost */
    uint64_t lost_events;
} pr_perf_info;

struct pr_backend {
    const pr_backend_ops *ops;
    const pr_opts *opts;
    void *priv;
    const pr_perf_info *perf;   /* the hardware backend's parameters, else NULL */
    /* Emulated, process tree: what libjptexec.so runs each JVM with (qemu,
     * and the -plugin argument less out= and ctl=). */
    const char *tree_qemu, *tree_plugin;
};

extern const pr_backend_ops pr_emulated_ops;
extern const pr_backend_ops pr_perf_ops;

/* A TSC reading and CLOCK_MONOTONIC (ns) taken together; tsc 0: not taken. */
typedef struct pr_clock_pair {
    uint64_t tsc, mono_ns;
} pr_clock_pair;

/* Reads both clocks, the TSC between two readings of the monotonic one. */
void pr_clock_now(pr_clock_pair *c);
/* The end of a recording that began at start: both clocks now, after
 * waiting until enough time has passed to measure the TSC's frequency
 * (50 ms: recordings of real programs take longer). */
void pr_clock_end(const pr_clock_pair *start, pr_clock_pair *end);

/* A JVM of the process tree traced into a directory of its own. */
typedef struct pr_tree_jvm {
    unsigned long index;        /* 2, 3, ...: the order the JVMs were exec'd */
    long pid;                   /* from its handshake; 0: none came */
    const char *dir;            /* "java-<index>", in the trace directory */
} pr_tree_jvm;

/* Everything info.json records. */
typedef struct pr_session {
    const pr_opts *opts;
    const char *dir;            /* where info.json goes; NULL: opts->out_dir */
    unsigned long jvm_index;    /* a JVM's own directory: its index (else 0) */
    const pr_tree_jvm *more_jvms;   /* the trace directory: the tree's later JVMs */
    size_t n_more_jvms;
    const char *backend;
    char **exec_argv;
    pid_t pid;
    bool finished;              /* the child has exited */
    int wait_status;
    bool no_exit_status;        /* a later JVM of a process tree: not ptrec's child */
    pr_cpu cpu;
    bool java, agent_added;
    const char *agent_path;
    /* the handshake: "none" (none came), "ok", "failed" (filter not set) */
    const char *handshake;
    long jvm_pid;
    uint64_t cc_lo, cc_hi;      /* code cache reported by the agent */
    bool range_set;             /* a filter range is in force */
    uint64_t range_lo, range_hi;
    struct timespec start, end; /* CLOCK_REALTIME */
    /* The TSC against CLOCK_MONOTONIC at the start and the end of the
     * recording: its frequency where the kernel and the CPU do not say. */
    pr_clock_pair clock_start, clock_end;
    pr_summary sum;
    const pr_perf_info *perf;   /* NULL under emulation */
} pr_session;

/* TSC ticks per second for info.json, and where the figure comes from:
 * "perf_mmap_page" (the kernel's time_mult / time_shift), "cpuid_15h", or
 * "measured" (the TSC against CLOCK_MONOTONIC over the recording); 0 and
 * NULL when none applies yet (the recording has not ended). */
double pr_tsc_hz(const pr_session *s, const char **source);

/* ptrec_info.c */
/* Lists DIR/pt/: one stream per <name>.pt (and <name>.idx), sorted by name.
 * Damaged .idx files produce warnings naming file and offset. */
void pr_scan_streams(const char *dir, pr_summary *sum);
void pr_summary_free(pr_summary *sum);
/* Writes DIR/info.json atomically (temporary file + rename). */
int pr_write_info(const pr_session *s, char *err, size_t errlen);
/* "N threads, X MB of PT, Y MB lost (Z%)" */
void pr_format_summary(const pr_summary *sum, char *buf, size_t len);

/* Utilities of ptrec.c the backends use */
/* Directory holding the running ptrec binary (for files built next to it). */
const char *pr_self_dir(void);
/* Finds an executable named `name` on PATH; returns a new string or NULL. */
char *pr_find_in_path(const char *name);

#endif
