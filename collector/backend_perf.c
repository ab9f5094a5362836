/* The hardware backend: perf_event_open on the intel_pt PMU.
 *
 * Per online CPU, events for the child with inherit (the kernel refuses to
 * mmap a per-task event with inherit unless it is bound to a CPU):
 *   - intel_pt, created disabled, AUX area in linear (read-write) mode;
 *     enabled once the agent has reported the code cache and the IP filter
 *     is set (--filter all or a fixed range: on exec);
 *   - a software dummy event, enabled on exec, for the sideband: context
 *     switches, comm, mmap2, fork/exit. With PT its records go to the PT
 *     event's ring (PERF_EVENT_IOC_SET_OUTPUT), so one ring per CPU holds
 *     all sideband in time order. With --sideband-only it is the only event
 *     and owns the ring; this half works on any Linux and is tested for real.
 * A reader thread drains the rings into pt/cpu-N.pt, pt/cpu-N.idx and
 * sideband/cpu-N.sb (docs/FORMAT.md). Every check that can refuse runs in
 * prepare, before the trace directory exists and the child is forked. */
#include "collector/ptrec.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include <glib.h>

#include "collector/perf_pmu.h"
#include "collector/perf_records.h"
#include "collector/perf_ring.h"
#include "common/auxidx.h"
#include "common/jerr.h"

#define MAX_CPUS 1024
#define DEFAULT_AUX_SIZE (4u << 20)
#define DATA_SIZE (512u << 10)           /* sideband ring per CPU */
#define READER_POLL_MS 100               /* drain at least this often */
#define CAP_IPC_LOCK_BIT 14
#define CAP_SYS_ADMIN_BIT 21
#define CAP_PERFMON_BIT 38

typedef struct cpu_ring {
    int cpu;
    int pt_fd, dummy_fd;       /* -1 when absent */
    int ring_fd;               /* the event whose mmap holds the ring */
    bool hung_up;              /* the event's task is gone: POLLHUP forever */
    struct perf_event_mmap_page *page;
    size_t map_len;
    uint8_t *data, *aux;
    uint64_t data_tail, aux_tail;
    uint8_t *pending;          /* data-area bytes not yet framed into records */
    size_t pending_len;
    bool warned;
    char *name;                /* "cpu-N" */
    perf_stream out;
} cpu_ring;

typedef struct perf_be {
    const pr_opts *opts;
    char *root;
    perf_pmu pmu;
    int cpus[MAX_CPUS];
    int ncpus;
    long page_size;
    cpu_ring *rings;
    pthread_t reader;
    bool reader_running;
    atomic_bool stop;
    atomic_bool pt_on;         /* tracing should be on: re-enable after TRUNCATED */
    int wake[2];
    pr_perf_info info;
} perf_be;

static int sys_perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group,
                               unsigned long flags)
{
    return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

/* ---- prepare: everything that can refuse -------------------------------- */

static long read_long_file(const char *path, long fallback)
{
    char *text = NULL;
    long v = fallback;
    if (g_file_get_contents(path, &text, NULL, NULL)) {
        char *end;
        errno = 0;
        long x = strtol(text, &end, 10);
        if (errno == 0 && end != text) v = x;
    }
    g_free(text);
    return v;
}

/* Effective capability bit from /proc/self/status (no libcap needed). */
static bool has_capability(int bit)
{
    char *text = NULL;
    bool yes = false;
    if (g_file_get_contents("/proc/self/status", &text, NULL, NULL)) {
        const char *p = strstr(text, "\nCapEff:");
        if (p) {
            unsigned long long caps = strtoull(p + 8, NULL, 16);
            yes = (caps >> bit) & 1;
        }
    }
    g_free(text);
    return yes;
}

static void permission_message(const char *what, int err_no, char *err, size_t errlen)
{
    long paranoid = read_long_file("/proc/sys/kernel/perf_event_paranoid", LONG_MIN);
    char level[32];
    if (paranoid == LONG_MIN) snprintf(level, sizeof level, "unknown");
    else snprintf(level, sizeof level, "%ld", paranoid);
    snprintf(err, errlen, "the kernel refused %s (%s): kernel.perf_event_paranoid is %s and "
             "ptrec has no CAP_PERFMON; run as root, grant CAP_PERFMON (setcap cap_perfmon+ep "
             "ptrec) or lower it (sysctl kernel.perf_event_paranoid=2 or less); or use --emulate",
             what, strerror(err_no), level);
}

static void pt_attr(const perf_be *be, struct perf_event_attr *a)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = be->pmu.type;
    a->config = be->info.config;
    a->disabled = 1;
    a->exclude_kernel = 1;
    a->exclude_hv = 1;
    a->inherit = 1;
    a->sample_id_all = 1;
    a->sample_type = PERF_JPT_SAMPLE_TYPE;
    a->aux_watermark = (uint32_t)(be->info.aux_size / 4);
    a->watermark = 1;
    a->wakeup_watermark = DATA_SIZE / 4;
    /* Without the handshake to wait for, tracing starts with the command. */
    a->enable_on_exec = be->opts->filter != PR_FILTER_CODECACHE;
}

static void dummy_attr(struct perf_event_attr *a)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_DUMMY;
    a->disabled = 1;
    a->enable_on_exec = 1;
    a->exclude_kernel = 1;
    a->exclude_hv = 1;
    a->inherit = 1;
    a->sample_id_all = 1;
    a->sample_type = PERF_JPT_SAMPLE_TYPE;
    a->comm = 1;
    a->comm_exec = 1;
    a->mmap = 1;
    a->mmap2 = 1;
    a->task = 1;
    a->context_switch = 1;
    a->watermark = 1;
    a->wakeup_watermark = DATA_SIZE / 4;
}

/* Opens the event on ptrec itself and maps its buffers once, so permission,
 * an unknown PMU type and the locked-memory limit are found before anything
 * runs. */
static int probe(perf_be *be, char *err, size_t errlen)
{
    struct perf_event_attr a;
    bool pt = !be->opts->sideband_only;
    if (pt) pt_attr(be, &a);
    else dummy_attr(&a);
    a.enable_on_exec = 0;
    int fd = sys_perf_event_open(&a, 0, be->cpus[0], -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        const char *what = pt ? "an intel_pt event" : "a software dummy event";
        if (e == EACCES || e == EPERM) {
            permission_message(what, e, err, errlen);
        } else if (e == ENOSYS) {
            snprintf(err, errlen, "this kernel has no perf_event_open (ENOSYS: built without "
                     "CONFIG_PERF_EVENTS or blocked by seccomp); use --emulate");
        } else if (pt && (e == ENOENT || e == EINVAL || e == EOPNOTSUPP)) {
            snprintf(err, errlen, "the kernel refused an intel_pt event (PMU type %" PRIu32
                     ", config 0x%" PRIx64 "): %s; check %s/%s, or use --emulate",
                     be->pmu.type, be->info.config, strerror(e), be->root, PERF_PMU_DIR);
        } else {
            snprintf(err, errlen, "the kernel refused %s: %s; use --emulate", what, strerror(e));
        }
        return PR_EXIT_USAGE;
    }
    int rc = 0;
    size_t data_len = (size_t)be->page_size + DATA_SIZE;
    void *m = mmap(NULL, data_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void *aux = MAP_FAILED;
    int e = errno;
    if (m != MAP_FAILED && pt) {
        struct perf_event_mmap_page *pg = m;
        pg->aux_offset = data_len;
        pg->aux_size = be->info.aux_size;
        aux = mmap(NULL, be->info.aux_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   (off_t)data_len);
        e = errno;
    }
    if (m == MAP_FAILED || (pt && aux == MAP_FAILED)) {
        if (e == EPERM || e == ENOMEM)
            snprintf(err, errlen, "cannot map the trace buffers (%s): locked memory is limited "
                     "by /proc/sys/kernel/perf_event_mlock_kb (%ld KiB per CPU) and ulimit -l; "
                     "use a smaller --aux-size, raise them, or run as root; or use --emulate",
                     strerror(e), read_long_file("/proc/sys/kernel/perf_event_mlock_kb", -1));
        else
            snprintf(err, errlen, "cannot map the perf buffers: %s; use --emulate", strerror(e));
        rc = PR_EXIT_USAGE;
    }
    if (aux != MAP_FAILED) munmap(aux, be->info.aux_size);
    if (m != MAP_FAILED) munmap(m, data_len);
    close(fd);
    return rc;
}

static void read_cpuid_15h(pr_perf_info *info)
{
    unsigned eax, ebx, ecx, edx;
    if (__get_cpuid_max(0, NULL) >= 0x15 && __get_cpuid_count(0x15, 0, &eax, &ebx, &ecx, &edx)) {
        info->has_cpuid_15h = true;
        info->cpuid_15h_eax = eax;
        info->cpuid_15h_ebx = ebx;
        info->cpuid_15h_ecx = ecx;
    }
}

static int perf_prepare(pr_backend *b, const pr_opts *o, char ***exec_argv,
                        char *err, size_t errlen)
{
    perf_be *be = g_new0(perf_be, 1);
    b->priv = be;
    b->perf = &be->info;
    be->opts = o;
    be->wake[0] = be->wake[1] = -1;
    be->page_size = sysconf(_SC_PAGESIZE);
    const char *root = getenv("JPT_SYSFS_ROOT");
    be->root = g_strdup(root && *root ? root : "/");
    be->info.pt = !o->sideband_only;
    be->info.ip_filter = "none";

    if (!o->sideband_only) {
        char why[PATH_MAX + 200];
        int rc = perf_pmu_load(be->root, &be->pmu, why, sizeof why);
        if (rc == -1) {
            char *dir = g_build_filename(be->root, PERF_PMU_DIR, NULL);
            snprintf(err, errlen, "this machine has no Intel PT (no %s: not an Intel CPU with "
                     "PT, or a virtual machine that does not expose it); use --emulate to record "
                     "under emulation", dir);
            g_free(dir);
            return PR_EXIT_USAGE;
        }
        if (rc < 0) {
            snprintf(err, errlen, "cannot use the intel_pt PMU: %s; use --emulate", why);
            return PR_EXIT_USAGE;
        }
        /* As the emulated backend configures PT: TSC, no return
         * compression (the decoder needs no call stack), branches; no MTC
         * or CYC (they only refine timing). */
        perf_pt_request req = {
            .tsc = true, .noretcomp = true, .branch = true,
            .psb_period_bytes = o->psb_period,
        };
        uint64_t psb;
        if (!perf_pmu_config(&be->pmu, &req, &be->info.config, &psb, why, sizeof why)) {
            snprintf(err, errlen, "cannot configure Intel PT: %s; use --emulate", why);
            return PR_EXIT_USAGE;
        }
        be->info.pmu_type = be->pmu.type;
        be->info.tsc = be->pmu.tsc.present;
        be->info.noretcomp = be->pmu.noretcomp.present;
        be->info.branch = be->pmu.branch.present;
        be->info.psb_period = psb;
        be->info.num_address_ranges = be->pmu.ip_filtering ? be->pmu.num_address_ranges : 0;
    }

    be->ncpus = perf_online_cpus(be->root, be->cpus, MAX_CPUS, err, errlen);
    if (be->ncpus <= 0) {
        if (be->ncpus == 0) snprintf(err, errlen, "no online CPU listed");
        return PR_EXIT_USAGE;
    }
    be->info.ncpus = (unsigned)be->ncpus;
    be->info.data_size = DATA_SIZE;
    if (!o->sideband_only) {
        uint64_t aux = o->aux_size ? o->aux_size : DEFAULT_AUX_SIZE;
        if ((aux & (aux - 1)) != 0 || aux < 2 * (uint64_t)be->page_size) {
            snprintf(err, errlen, "--aux-size %" PRIu64 " is not a power of two of at least "
                     "%ld bytes, as the kernel requires for the AUX area", aux,
                     2 * be->page_size);
            return PR_EXIT_USAGE;
        }
        be->info.aux_size = aux;
    }

    struct rlimit rl;
    uint64_t memlock = getrlimit(RLIMIT_MEMLOCK, &rl) != 0 ? 0
                     : rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
    long mlock_kb = read_long_file("/proc/sys/kernel/perf_event_mlock_kb", 516);
    uint64_t per_cpu = DATA_SIZE + (uint64_t)be->page_size + be->info.aux_size;
    if (!perf_mlock_fits((unsigned)be->ncpus, per_cpu, mlock_kb < 0 ? 0 : (uint64_t)mlock_kb,
                         memlock, has_capability(CAP_IPC_LOCK_BIT), err, errlen))
        return PR_EXIT_USAGE;

    int rc = probe(be, err, errlen);
    if (rc) return rc;
    read_cpuid_15h(&be->info);

    GPtrArray *av = g_ptr_array_new();
    g_ptr_array_add(av, g_strdup(o->resolved));
    for (size_t i = 1; o->command[i]; i++) g_ptr_array_add(av, g_strdup(o->command[i]));
    g_ptr_array_add(av, NULL);
    *exec_argv = (char **)g_ptr_array_free(av, FALSE);
    return 0;
}

/* ---- draining ------------------------------------------------------------ */

typedef struct pending_sink {
    cpu_ring *r;
    size_t cap;
} pending_sink;

static int to_pt(void *ctx, const uint8_t *p, size_t n)
{
    cpu_ring *r = ctx;
    char err[256];
    if (perf_stream_pt(&r->out, p, n, err, sizeof err) != 0) {
        if (!r->warned) jerr_warn("pt/%s.pt: %s", r->name, err);
        r->warned = true;
        return -1;
    }
    return 0;
}

static int to_pending(void *ctx, const uint8_t *p, size_t n)
{
    pending_sink *ps = ctx;
    cpu_ring *r = ps->r;
    if (r->pending_len + n > ps->cap) return -1;   /* cannot happen: cap = ring + one record */
    memcpy(r->pending + r->pending_len, p, n);
    r->pending_len += n;
    return 0;
}

static void drain_ring(perf_be *be, cpu_ring *r)
{
    char err[512];
    if (r->aux) {
        uint64_t head = perf_load_head(&r->page->aux_head);
        int rc = perf_ring_drain(r->aux, be->info.aux_size, r->aux_tail, head, to_pt, r, err,
                                 sizeof err);
        if (rc == -2 && !r->warned) {
            jerr_warn("%s AUX area: %s", r->name, err);
            r->warned = true;
        }
        /* Free the space even after an error: a stuck tail stops tracing. */
        r->aux_tail = head;
        perf_store_tail(&r->page->aux_tail, head);
    }
    uint64_t head = perf_load_head(&r->page->data_head);
    pending_sink ps = { .r = r, .cap = DATA_SIZE + 65536 };
    int rc = perf_ring_drain(r->data, DATA_SIZE, r->data_tail, head, to_pending, &ps, err,
                             sizeof err);
    if (rc == -2 && !r->warned) {
        jerr_warn("%s data area: %s", r->name, err);
        r->warned = true;
    }
    r->data_tail = head;
    perf_store_tail(&r->page->data_tail, head);
    size_t used = 0;
    if (perf_stream_sideband(&r->out, r->pending, r->pending_len, &used, err, sizeof err) != 0) {
        if (!r->warned) jerr_warn("sideband/%s.sb: %s", r->name, err);
        r->warned = true;
    }
    memmove(r->pending, r->pending + used, r->pending_len - used);
    r->pending_len -= used;
    if (r->out.reenable) {
        /* The kernel disabled the event when the AUX area filled up; the
         * space is free again now. ENABLE on the parent reaches the
         * inherited events of every thread. */
        r->out.reenable = false;
        if (r->pt_fd >= 0 && atomic_load(&be->pt_on))
            ioctl(r->pt_fd, PERF_EVENT_IOC_ENABLE, 0);
    }
}

static void *reader_main(void *arg)
{
    perf_be *be = arg;
    struct pollfd *pfd = g_new0(struct pollfd, (size_t)be->ncpus + 1);
    int *which = g_new0(int, (size_t)be->ncpus);
    while (!atomic_load(&be->stop)) {
        nfds_t n = 0;
        pfd[n++] = (struct pollfd){ .fd = be->wake[0], .events = POLLIN };
        for (int i = 0; i < be->ncpus; i++) {
            if (be->rings[i].hung_up) continue;
            which[n - 1] = i;
            pfd[n++] = (struct pollfd){ .fd = be->rings[i].ring_fd, .events = POLLIN };
        }
        int got = poll(pfd, n, READER_POLL_MS);
        if (got < 0 && errno != EINTR) break;
        for (nfds_t k = 1; got > 0 && k < n; k++)
            if (pfd[k].revents & (POLLHUP | POLLERR)) be->rings[which[k - 1]].hung_up = true;
        for (int i = 0; i < be->ncpus; i++) drain_ring(be, &be->rings[i]);
    }
    g_free(which);
    g_free(pfd);
    return NULL;
}

/* ---- attach: the events, on the waiting child -------------------------- */

static int open_stream_file(const char *dir, const char *sub, const char *name, const char *ext,
                            char *err, size_t errlen)
{
    char *file = g_strconcat(name, ext, NULL);
    char *path = g_build_filename(dir, sub, file, NULL);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
    g_free(path);
    g_free(file);
    return fd;
}

static int set_filters(perf_be *be, uint64_t lo, uint64_t hi)
{
    if (!be->pmu.ip_filtering || be->pmu.num_address_ranges < 1) {
        jerr_warn("this CPU's Intel PT has no IP filtering (caps/num_address_ranges is 0): "
                  "tracing all user-space code without a filter");
        be->info.ip_filter = "refused";
        return 0;
    }
    char filter[96];
    perf_filter_string(lo, hi, filter, sizeof filter);
    for (int i = 0; i < be->ncpus; i++) {
        if (ioctl(be->rings[i].pt_fd, PERF_EVENT_IOC_SET_FILTER, filter) != 0) {
            int e = errno;
            /* Kernels before anonymous-memory address filters refuse a range
             * without a file: trace all of user space rather than nothing. */
            for (int k = 0; k < i; k++)
                ioctl(be->rings[k].pt_fd, PERF_EVENT_IOC_SET_FILTER, "");
            jerr_warn("the kernel refused the IP filter '%s' (%s): tracing all user-space code "
                      "without a filter", filter, strerror(e));
            be->info.ip_filter = "refused";
            return 0;
        }
    }
    be->info.ip_filter = "set";
    return 0;
}

static int perf_attach(pr_backend *b, pid_t child, char *err, size_t errlen)
{
    perf_be *be = b->priv;
    const pr_opts *o = be->opts;
    bool pt = !o->sideband_only;
    be->rings = g_new0(cpu_ring, (size_t)be->ncpus);
    for (int i = 0; i < be->ncpus; i++) {
        cpu_ring *r = &be->rings[i];
        r->pt_fd = r->dummy_fd = r->ring_fd = -1;
        r->out.pt_fd = r->out.idx_fd = r->out.sb_fd = -1;
    }
    size_t data_len = (size_t)be->page_size + DATA_SIZE;
    for (int i = 0; i < be->ncpus; i++) {
        cpu_ring *r = &be->rings[i];
        r->cpu = be->cpus[i];
        r->name = g_strdup_printf("cpu-%d", r->cpu);
        struct perf_event_attr a;
        if (pt) {
            pt_attr(be, &a);
            r->pt_fd = sys_perf_event_open(&a, child, r->cpu, -1, PERF_FLAG_FD_CLOEXEC);
            if (r->pt_fd < 0) {
                snprintf(err, errlen, "perf_event_open(intel_pt, cpu %d): %s", r->cpu,
                         strerror(errno));
                return -1;
            }
        }
        dummy_attr(&a);
        r->dummy_fd = sys_perf_event_open(&a, child, r->cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (r->dummy_fd < 0) {
            snprintf(err, errlen, "perf_event_open(dummy, cpu %d): %s", r->cpu, strerror(errno));
            return -1;
        }
        r->ring_fd = pt ? r->pt_fd : r->dummy_fd;
        void *m = mmap(NULL, data_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->ring_fd, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "cannot map the perf ring of cpu %d: %s", r->cpu,
                     strerror(errno));
            return -1;
        }
        r->page = m;
        r->map_len = data_len;
        r->data = (uint8_t *)m + be->page_size;
        if (pt) {
            r->page->aux_offset = data_len;
            r->page->aux_size = be->info.aux_size;
            void *aux = mmap(NULL, be->info.aux_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                             r->ring_fd, (off_t)data_len);
            if (aux == MAP_FAILED) {
                snprintf(err, errlen, "cannot map the AUX area of cpu %d: %s", r->cpu,
                         strerror(errno));
                return -1;
            }
            r->aux = aux;
            if (ioctl(r->dummy_fd, PERF_EVENT_IOC_SET_OUTPUT, r->pt_fd) != 0) {
                snprintf(err, errlen, "cannot send cpu %d's sideband to its PT ring: %s",
                         r->cpu, strerror(errno));
                return -1;
            }
        }
        r->pending = g_malloc(DATA_SIZE + 65536);
        r->out.sample_type = PERF_JPT_SAMPLE_TYPE;
        if ((r->out.sb_fd = open_stream_file(o->out_dir, "sideband", r->name, ".sb", err,
                                             errlen)) < 0)
            return -1;
        if (pt) {
            if ((r->out.pt_fd = open_stream_file(o->out_dir, "pt", r->name, ".pt", err,
                                                 errlen)) < 0 ||
                (r->out.idx_fd = open_stream_file(o->out_dir, "pt", r->name, ".idx", err,
                                                  errlen)) < 0)
                return -1;
            int rc = auxidx_write_header(r->out.idx_fd);
            if (rc != 0) {
                snprintf(err, errlen, "cannot write pt/%s.idx: %s", r->name, strerror(-rc));
                return -1;
            }
        }
    }
    perf_time_conv tc;
    perf_read_time_conv(be->rings[0].page, &tc);
    be->info.time_valid = tc.valid;
    be->info.time_zero = tc.time_zero;
    be->info.time_mult = tc.time_mult;
    be->info.time_shift = tc.time_shift;
    for (int i = 0; i < be->ncpus; i++) be->rings[i].out.time = tc;

    if (pt && o->filter == PR_FILTER_RANGE) set_filters(be, o->range_lo, o->range_hi);
    if (pt && o->filter != PR_FILTER_CODECACHE) atomic_store(&be->pt_on, true);

    if (pipe2(be->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    int rc = pthread_create(&be->reader, NULL, reader_main, be);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the reader thread: %s", strerror(rc));
        return -1;
    }
    be->reader_running = true;
    return 0;
}

static size_t perf_child_fds(pr_backend *b, int *fds, size_t max)
{
    (void)b; (void)fds; (void)max;
    return 0;
}

static int perf_start(pr_backend *b, pid_t child, char *err, size_t errlen)
{
    (void)b; (void)child; (void)err; (void)errlen;
    return 0;
}

static int perf_on_filter(pr_backend *b, pr_ctl *ctl, uint64_t lo, uint64_t hi, char *err,
                          size_t errlen)
{
    (void)ctl;   /* one filter for every process */
    perf_be *be = b->priv;
    if (be->opts->sideband_only) return 0;   /* no PT to filter */
    set_filters(be, lo, hi);
    atomic_store(&be->pt_on, true);
    for (int i = 0; i < be->ncpus; i++) {
        if (ioctl(be->rings[i].pt_fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
            snprintf(err, errlen, "cannot enable intel_pt on cpu %d: %s", be->rings[i].cpu,
                     strerror(errno));
            return -1;
        }
    }
    return 0;
}

static void human(uint64_t bytes, char *buf, size_t len)
{
    if (bytes >= 10u << 20) snprintf(buf, len, "%.1f MB", (double)bytes / 1e6);
    else if (bytes >= 10u << 10) snprintf(buf, len, "%.1f KB", (double)bytes / 1e3);
    else snprintf(buf, len, "%" PRIu64 " bytes", bytes);
}

static int perf_finish(pr_backend *b, pr_summary *sum)
{
    perf_be *be = b->priv;
    if (be->reader_running) {
        atomic_store(&be->stop, true);
        ssize_t w = write(be->wake[1], "x", 1);
        (void)w;
        pthread_join(be->reader, NULL);
        be->reader_running = false;
    }
    for (int i = 0; be->rings && i < be->ncpus; i++) {
        cpu_ring *r = &be->rings[i];
        if (!r->page) continue;
        drain_ring(be, r);
        if (r->pending_len)
            jerr_warn("sideband/%s.sb: %zu bytes of an incomplete record at the end dropped",
                      r->name, r->pending_len);
        const perf_stream_stats *st = &r->out.st;
        be->info.lost_records += st->lost_records;
        be->info.lost_events += st->lost_events;
        if (be->opts->quiet) continue;
        char ptb[32], sbb[32];
        human(st->pt_bytes, ptb, sizeof ptb);
        human(st->sb_bytes, sbb, sizeof sbb);
        if (be->info.pt)
            fprintf(stderr, "ptrec: %s: %s of PT in %" PRIu64 " AUX records, lost: %" PRIu64
                    " truncations (bytes unknown), %" PRIu64 " partial, %" PRIu64 " collisions; "
                    "sideband %s, %" PRIu64 " switches, %" PRIu64 " events lost\n", r->name, ptb,
                    st->aux_records, st->truncated, st->partial, st->collision, sbb,
                    st->switches, st->lost_events);
        else
            fprintf(stderr, "ptrec: %s: sideband %s, %" PRIu64 " records (%" PRIu64
                    " switches, %" PRIu64 " comm, %" PRIu64 " mmap2), %" PRIu64
                    " events lost\n", r->name, sbb, st->records, st->switches, st->comms,
                    st->mmaps, st->lost_events);
    }
    pr_scan_streams(b->opts->out_dir, sum);
    return 0;
}

/* A later JVM of a process tree: the per-CPU streams of the trace directory
 * hold the PT; its own directory holds its metadata only. */
static void perf_finish_dir(pr_backend *b, const char *dir, pr_summary *sum)
{
    (void)b;
    pr_scan_streams(dir, sum);
}

static void perf_destroy(pr_backend *b)
{
    perf_be *be = b->priv;
    if (!be) return;
    if (be->reader_running) {
        atomic_store(&be->stop, true);
        pthread_join(be->reader, NULL);
    }
    for (int i = 0; be->rings && i < be->ncpus; i++) {
        cpu_ring *r = &be->rings[i];
        if (r->aux) munmap(r->aux, be->info.aux_size);
        if (r->page) munmap(r->page, r->map_len);
        if (r->dummy_fd >= 0) close(r->dummy_fd);
        if (r->pt_fd >= 0) close(r->pt_fd);
        if (r->out.pt_fd >= 0) close(r->out.pt_fd);
        if (r->out.idx_fd >= 0) close(r->out.idx_fd);
        if (r->out.sb_fd >= 0) close(r->out.sb_fd);
        g_free(r->pending);
        g_free(r->name);
    }
    g_free(be->rings);
    if (be->wake[0] >= 0) close(be->wake[0]);
    if (be->wake[1] >= 0) close(be->wake[1]);
    g_free(be->root);
    g_free(be);
    b->priv = NULL;
    b->perf = NULL;
}

const pr_backend_ops pr_perf_ops = {
    .name = "perf",
    .prepare = perf_prepare,
    .attach = perf_attach,
    .child_fds = perf_child_fds,
    .start = perf_start,
    .on_filter = perf_on_filter,
    .finish = perf_finish,
    .finish_dir = perf_finish_dir,
    .destroy = perf_destroy,
};
