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
    const char *qemu, *plugin, *agent;   /* explicit paths or NULL */
    pr_filter_mode filter;
    uint64_t range_lo, range_hi;          /* PR_FILTER_RANGE */
    uint64_t psb_period;
    uint64_t aux_size, drain_rate;        /* 0: not set (no loss model) */
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

typedef struct pr_backend_ops {
    const char *name;           /* info.json "backend" */
    /* Checks the tools and builds the argv to exec (it may wrap the command).
     * Runs before the trace directory is created so a failure leaves nothing
     * behind. Returns 0, or an exit code with a one-line message in err. */
    int (*prepare)(pr_backend *b, const pr_opts *o, char ***exec_argv,
                   char *err, size_t errlen);
    /* Descriptors the child must inherit (CLOEXEC is cleared after fork). */
    size_t (*child_fds)(pr_backend *b, int *fds, size_t max);
    /* The child has been exec'ed. */
    int (*start)(pr_backend *b, pid_t child, char *err, size_t errlen);
    /* The agent reported its code cache: trace [lo, hi) from now on. Must
     * answer within a few seconds (the agent waits 5 s for its reply). */
    int (*on_filter)(pr_backend *b, uint64_t lo, uint64_t hi, char *err, size_t errlen);
    /* The child has exited: fill in the streams of the trace directory. */
    int (*finish)(pr_backend *b, pr_summary *sum);
    void (*destroy)(pr_backend *b);
} pr_backend_ops;

struct pr_backend {
    const pr_backend_ops *ops;
    const pr_opts *opts;
    void *priv;
};

extern const pr_backend_ops pr_emulated_ops;
extern const pr_backend_ops pr_perf_ops;

/* Everything info.json records. */
typedef struct pr_session {
    const pr_opts *opts;
    const char *backend;
    char **exec_argv;
    pid_t pid;
    bool finished;              /* the child has exited */
    int wait_status;
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
    pr_summary sum;
} pr_session;

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
