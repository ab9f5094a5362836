/* The trace directory's summary: the streams in pt/ and info.json.
 *
 * info.json (version 1), written when recording starts ("complete": false) and
 * rewritten when the command has exited:
 *   version, tool, complete
 *   command        the command as given; exec: what was run (qemu and plugin)
 *   cwd, pid, exit {status | signal}, start_time / end_time (ISO 8601 UTC) and
 *                  start_time_ns / end_time_ns (CLOCK_REALTIME)
 *   backend        "emulated" | "perf"
 *   cpu            {vendor, family, model, stepping} (-1: unknown); libipt's
 *                  errata depend on them; under emulation, the host's
 *   pt             {tsc, mtc, cyc, noretcomp, psb_period,
 *                   filter {mode "codecache"|"all"|"range", ranges [[lo, hi]]}}
 *                  ranges: the filter in force ([] for "all", and for
 *                  "codecache" when the agent never reported it)
 *   time           {time_zero, time_mult, time_shift}: sideband time to TSC
 *                  as in perf_event_mmap_page (identity under emulation);
 *                  tsc_hz, tsc_hz_source: TSC ticks per second and whence
 *   aux_size, drain_rate  (0: not set, no loss model), keep_lossless
 *   jvm            {java_launcher, agent_added, agent, handshake "none"|"ok"|
 *                   "failed", pid, codecache [lo, hi]; index: in a later JVM's
 *                   own directory, its place in the process tree's JVMs}
 *   more_jvms      a process tree's later JVMs [{index, pid, dir}]
 *   streams        [{name, pt_bytes, lost_bytes, aux_records, truncated}]
 *   totals         {streams, pt_bytes, lost_bytes, truncated}
 *   The hardware backend adds cpu.cpuid_15h, pt.{enabled, pmu_type, config,
 *   branch, mtc_period, ip_filter, num_address_ranges}, time.valid, cpus,
 *   data_size and totals.{lost_records, lost_events} (docs/FORMAT.md).
 * Addresses are JSON numbers (user-space addresses fit in 53 bits). */
#include "collector/ptrec.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include <glib.h>

#include "common/auxidx.h"
#include "common/jerr.h"
#include "common/json.h"

#define INFO_FORMAT_VERSION 1
static pr_stream *stream_get(GArray *arr, GHashTable *by_name, const char *name)
{
    gpointer idx;
    if (g_hash_table_lookup_extended(by_name, name, NULL, &idx))
        return &g_array_index(arr, pr_stream, GPOINTER_TO_UINT(idx));
    pr_stream s = { .name = g_strdup(name) };
    g_array_append_val(arr, s);
    g_hash_table_insert(by_name, g_strdup(name), GUINT_TO_POINTER(arr->len - 1));
    return &g_array_index(arr, pr_stream, arr->len - 1);
}

static void scan_idx(const char *path, pr_stream *s)
{
    auxidx idx;
    char err[PATH_MAX + 160];
    int rc = auxidx_load(path, &idx, err, sizeof err);
    if (rc != 0)
        jerr_warn("%s", err);
    if (rc < 0)
        return;
    s->lost_bytes = idx.lost_bytes;
    s->aux_records = idx.n;
    s->truncated = idx.truncations;
    if (s->pt_bytes && idx.covered_end > s->pt_bytes)
        jerr_warn("%s: AUX records reach offset %llu but the .pt file has %llu bytes", path,
                  (unsigned long long)idx.covered_end, (unsigned long long)s->pt_bytes);
    auxidx_free(&idx);
}

/* "tid-9" before "tid-10": compare digit runs by value. */
static int natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (g_ascii_isdigit(*a) && g_ascii_isdigit(*b)) {
            char *ea, *eb;
            unsigned long long x = strtoull(a, &ea, 10), y = strtoull(b, &eb, 10);
            if (x != y) return x < y ? -1 : 1;
            a = ea;
            b = eb;
        } else {
            if (*a != *b) return (unsigned char)*a - (unsigned char)*b;
            a++;
            b++;
        }
    }
    return (unsigned char)*a - (unsigned char)*b;
}

static gint stream_cmp(gconstpointer a, gconstpointer b)
{
    return natural_cmp(((const pr_stream *)a)->name, ((const pr_stream *)b)->name);
}

void pr_scan_streams(const char *dir, pr_summary *sum)
{
    memset(sum, 0, sizeof *sum);
    char *ptdir = g_build_filename(dir, "pt", NULL);
    GDir *d = g_dir_open(ptdir, 0, NULL);
    GArray *arr = g_array_new(FALSE, TRUE, sizeof(pr_stream));
    GHashTable *by_name = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    GPtrArray *idx_names = g_ptr_array_new_with_free_func(g_free);
    const char *ent;
    while (d && (ent = g_dir_read_name(d))) {
        size_t n = strlen(ent);
        if (n > 3 && strcmp(ent + n - 3, ".pt") == 0) {
            char *name = g_strndup(ent, n - 3);
            char *path = g_build_filename(ptdir, ent, NULL);
            struct stat st;
            pr_stream *s = stream_get(arr, by_name, name);
            if (stat(path, &st) == 0) s->pt_bytes = (uint64_t)st.st_size;
            g_free(path);
            g_free(name);
        } else if (n > 4 && strcmp(ent + n - 4, ".idx") == 0) {
            g_ptr_array_add(idx_names, g_strndup(ent, n - 4));
        }
    }
    /* Indexes after sizes, so each can be checked against its .pt. */
    for (guint i = 0; i < idx_names->len; i++) {
        const char *name = g_ptr_array_index(idx_names, i);
        pr_stream *s = stream_get(arr, by_name, name);
        char *file = g_strconcat(name, ".idx", NULL);
        char *path = g_build_filename(ptdir, file, NULL);
        scan_idx(path, s);
        g_free(path);
        g_free(file);
    }
    g_array_sort(arr, stream_cmp);
    for (guint i = 0; i < arr->len; i++) {
        const pr_stream *s = &g_array_index(arr, pr_stream, i);
        sum->pt_bytes += s->pt_bytes;
        sum->lost_bytes += s->lost_bytes;
        sum->truncated += s->truncated;
    }
    sum->nstreams = arr->len;
    sum->streams = (pr_stream *)(void *)g_array_free(arr, FALSE);
    g_ptr_array_free(idx_names, TRUE);
    g_hash_table_destroy(by_name);
    if (d) g_dir_close(d);
    g_free(ptdir);
}

void pr_summary_free(pr_summary *sum)
{
    for (size_t i = 0; i < sum->nstreams; i++) g_free(sum->streams[i].name);
    g_free(sum->streams);
    memset(sum, 0, sizeof *sum);
}

static int digits(double mb)
{
    return mb == 0 ? 1 : mb < 1 ? 3 : mb < 10 ? 2 : 1;
}

void pr_format_summary(const pr_summary *sum, char *buf, size_t len)
{
    double mb = 1e6;
    double pt = (double)sum->pt_bytes / mb, lost = (double)sum->lost_bytes / mb;
    double total = (double)sum->pt_bytes + (double)sum->lost_bytes;
    double pct = total > 0 ? 100.0 * (double)sum->lost_bytes / total : 0.0;
    /* Streams are threads under emulation, CPUs on hardware (cpu-N). */
    bool per_cpu = sum->nstreams > 0 && strncmp(sum->streams[0].name, "cpu-", 4) == 0;
    const char *noun = per_cpu ? "CPU" : "thread";
    /* Small traces (a few KB under emulation) should not read as "0.0 MB". */
    snprintf(buf, len, "%zu %s%s, %.*f MB of PT, %.*f MB lost (%.1f%%)", sum->nstreams, noun,
             sum->nstreams == 1 ? "" : "s", digits(pt), pt, digits(lost), lost, pct);
}

static const char *filter_mode_name(pr_filter_mode m)
{
    switch (m) {
    case PR_FILTER_CODECACHE: return "codecache";
    case PR_FILTER_ALL: return "all";
    case PR_FILTER_RANGE: return "range";
    }
    return "?";
}

void pr_clock_now(pr_clock_pair *c)
{
#if defined(__x86_64__) || defined(__i386__)
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    c->tsc = __rdtsc();
    clock_gettime(CLOCK_MONOTONIC, &b);
    c->mono_ns = ((uint64_t)a.tv_sec * 1000000000u + (uint64_t)a.tv_nsec +
                  (uint64_t)b.tv_sec * 1000000000u + (uint64_t)b.tv_nsec) / 2;
#else
    c->tsc = 0;
    c->mono_ns = 0;
#endif
}

/* Shorter than this, the recording's two clock readings say too little. */
#define MIN_MEASURED_NS 50000000u

void pr_clock_end(const pr_clock_pair *start, pr_clock_pair *end)
{
    pr_clock_now(end);
    if (start->tsc && end->mono_ns < start->mono_ns + MIN_MEASURED_NS) {
        uint64_t wait = start->mono_ns + MIN_MEASURED_NS - end->mono_ns + 1000000u;
        struct timespec nap = { (time_t)(wait / 1000000000u), (long)(wait % 1000000000u) };
        while (nanosleep(&nap, &nap) != 0 && errno == EINTR) {
        }
        pr_clock_now(end);
    }
}

double pr_tsc_hz(const pr_session *s, const char **source)
{
    const pr_perf_info *hw = s->perf;
    *source = NULL;
    /* The kernel's conversion: ns = tsc * time_mult >> time_shift, from its
     * own calibration of the TSC. */
    if (hw && hw->time_valid && hw->time_mult && hw->time_shift < 64) {
        *source = "perf_mmap_page";
        return 1e9 * (double)(1ull << hw->time_shift) / (double)hw->time_mult;
    }
    if (hw && hw->has_cpuid_15h && hw->cpuid_15h_eax && hw->cpuid_15h_ebx &&
        hw->cpuid_15h_ecx) {
        *source = "cpuid_15h";
        return (double)hw->cpuid_15h_ecx * hw->cpuid_15h_ebx / hw->cpuid_15h_eax;
    }
    const pr_clock_pair *a = &s->clock_start, *b = &s->clock_end;
    if (a->tsc && b->tsc > a->tsc && b->mono_ns >= a->mono_ns + MIN_MEASURED_NS) {
        *source = "measured";
        return (double)(b->tsc - a->tsc) * 1e9 / (double)(b->mono_ns - a->mono_ns);
    }
    return 0;
}

/* Wall-clock times: exact nanoseconds, and ISO 8601 (UTC) for people. */
static void write_ts(json_w *j, const char *key, const struct timespec *ts)
{
    char iso[64], kns[64];
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    size_t n = strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(iso + n, sizeof iso - n, ".%03ldZ", ts->tv_nsec / 1000000);
    json_kstr(j, key, iso);
    snprintf(kns, sizeof kns, "%s_ns", key);
    json_ku64(j, kns, (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec);
}

/* The command, what ran, where, its exit and when. */
static void write_command(json_w *j, const pr_session *s)
{
    const pr_opts *o = s->opts;
    json_key(j, "command");
    json_arr(j);
    for (size_t i = 0; o->command[i]; i++) json_str(j, o->command[i]);
    json_end(j);
    json_key(j, "exec");
    json_arr(j);
    for (size_t i = 0; s->exec_argv && s->exec_argv[i]; i++) json_str(j, s->exec_argv[i]);
    json_end(j);
    char *cwd = g_get_current_dir();
    json_kstr(j, "cwd", cwd);
    g_free(cwd);
    json_ki64(j, "pid", s->pid);
    json_key(j, "exit");
    json_obj(j);
    if (s->no_exit_status) {
        /* not known */
    } else if (s->finished && WIFEXITED(s->wait_status)) {
        json_ki64(j, "status", WEXITSTATUS(s->wait_status));
    } else if (s->finished && WIFSIGNALED(s->wait_status)) {
        json_ki64(j, "signal", WTERMSIG(s->wait_status));
    }
    json_end(j);
    write_ts(j, "start_time", &s->start);
    if (s->finished) write_ts(j, "end_time", &s->end);
}

/* The CPU, with its TSC frequency leaf when perf read it. */
static void write_cpu(json_w *j, const pr_session *s)
{
    json_key(j, "cpu");
    json_obj(j);
    json_kstr(j, "vendor", s->cpu.vendor);
    json_ki64(j, "family", s->cpu.family);
    json_ki64(j, "model", s->cpu.model);
    json_ki64(j, "stepping", s->cpu.stepping);
    if (s->perf && s->perf->has_cpuid_15h) {
        /* TSC frequency = ecx * ebx / eax (ecx 0: not enumerated) */
        json_key(j, "cpuid_15h");
        json_obj(j);
        json_ku64(j, "eax", s->perf->cpuid_15h_eax);
        json_ku64(j, "ebx", s->perf->cpuid_15h_ebx);
        json_ku64(j, "ecx", s->perf->cpuid_15h_ecx);
        json_end(j);
    }
    json_end(j);
}

/* How PT was configured (by the hardware backend, or as the emulation
 * encodes), and the IP filter. */
static void write_pt(json_w *j, const pr_session *s)
{
    const pr_opts *o = s->opts;
    json_key(j, "pt");
    json_obj(j);
    const pr_perf_info *hw = s->perf;
    if (hw) {
        json_kbool(j, "enabled", hw->pt);
        json_kbool(j, "tsc", hw->tsc);
        json_kbool(j, "mtc", hw->mtc);
        json_kbool(j, "cyc", hw->cyc);
        json_kbool(j, "noretcomp", hw->noretcomp);
        json_ku64(j, "psb_period", hw->psb_period);
        json_kbool(j, "branch", hw->branch);
        json_ku64(j, "mtc_period", hw->mtc_period);
        json_ku64(j, "pmu_type", hw->pmu_type);
        json_ku64(j, "config", hw->config);
        json_ku64(j, "num_address_ranges", hw->num_address_ranges);
        json_kstr(j, "ip_filter", hw->ip_filter ? hw->ip_filter : "none");
    } else {
        json_kbool(j, "tsc", true);
        json_kbool(j, "mtc", false);
        json_kbool(j, "cyc", false);
        json_kbool(j, "noretcomp", true);
        json_ku64(j, "psb_period", o->psb_period);
    }
    json_key(j, "filter");
    json_obj(j);
    json_kstr(j, "mode", filter_mode_name(o->filter));
    json_key(j, "ranges");
    json_arr(j);
    if (s->range_set) {
        json_arr(j);
        json_u64(j, s->range_lo);
        json_u64(j, s->range_hi);
        json_end(j);
    }
    json_end(j);
    json_end(j);   /* filter */
    json_end(j);   /* pt */
}

/* Converting sideband times to TSC, and the TSC frequency. */
static void write_time(json_w *j, const pr_session *s)
{
    const pr_perf_info *hw = s->perf;
    json_key(j, "time");
    json_obj(j);
    if (hw) {
        /* perf clock -> TSC from the mmap page; valid false: the kernel
         * offered no conversion (cap_user_time_zero clear). */
        json_kbool(j, "valid", hw->time_valid);
        json_ku64(j, "time_zero", hw->time_zero);
        json_ku64(j, "time_mult", hw->time_mult);
        json_ku64(j, "time_shift", hw->time_shift);
    } else {
        /* Sideband times are TSC values in the emulated backend: identity. */
        json_ku64(j, "time_zero", 0);
        json_ku64(j, "time_mult", 1);
        json_ku64(j, "time_shift", 0);
    }
    const char *hz_source;
    double hz = pr_tsc_hz(s, &hz_source);
    if (hz > 0) {
        /* Whole ticks per second: more digits than any source has. */
        json_ku64(j, "tsc_hz", (uint64_t)(hz + 0.5));
        json_kstr(j, "tsc_hz_source", hz_source);
    }
    json_end(j);
}

/* The JVM traced, and in a process tree the others. */
static void write_jvm(json_w *j, const pr_session *s)
{
    const pr_opts *o = s->opts;
    json_key(j, "jvm");
    json_obj(j);
    json_kbool(j, "java_launcher", s->java);
    json_kbool(j, "agent_added", s->agent_added);
    if (s->agent_path) json_kstr(j, "agent", s->agent_path);
    json_kstr(j, "handshake", s->handshake);
    if (s->jvm_pid > 0) {
        json_ki64(j, "pid", s->jvm_pid);
        json_key(j, "codecache");
        json_arr(j);
        json_u64(j, s->cc_lo);
        json_u64(j, s->cc_hi);
        json_end(j);
    }
    if (s->jvm_index) json_ku64(j, "index", s->jvm_index);
    json_end(j);
    if (o->tree && !s->jvm_index) {
        json_key(j, "more_jvms");
        json_arr(j);
        for (size_t i = 0; i < s->n_more_jvms; i++) {
            const pr_tree_jvm *t = &s->more_jvms[i];
            json_obj(j);
            json_ku64(j, "index", t->index);
            json_ki64(j, "pid", t->pid);
            json_kstr(j, "dir", t->dir);
            json_end(j);
        }
        json_end(j);
    }
}

/* Each PT stream's bytes and losses, and their totals. */
static void write_streams(json_w *j, const pr_session *s)
{
    const pr_perf_info *hw = s->perf;
    json_key(j, "streams");
    json_arr(j);
    for (size_t i = 0; i < s->sum.nstreams; i++) {
        const pr_stream *st = &s->sum.streams[i];
        json_obj(j);
        json_kstr(j, "name", st->name);
        json_ku64(j, "pt_bytes", st->pt_bytes);
        json_ku64(j, "lost_bytes", st->lost_bytes);
        json_ku64(j, "aux_records", st->aux_records);
        json_ku64(j, "truncated", st->truncated);
        json_end(j);
    }
    json_end(j);
    json_key(j, "totals");
    json_obj(j);
    json_ku64(j, "streams", s->sum.nstreams);
    json_ku64(j, "pt_bytes", s->sum.pt_bytes);
    json_ku64(j, "lost_bytes", s->sum.lost_bytes);
    json_ku64(j, "truncated", s->sum.truncated);
    if (hw) {
        json_ku64(j, "lost_records", hw->lost_records);
        json_ku64(j, "lost_events", hw->lost_events);
    }
    json_end(j);
}

static void write_info(json_w *j, const pr_session *s)
{
    const pr_opts *o = s->opts;
    const pr_perf_info *hw = s->perf;
    json_obj(j);
    json_ku64(j, "version", INFO_FORMAT_VERSION);
    json_kstr(j, "tool", "ptrec " JPT_VERSION);
    json_kbool(j, "complete", s->finished);

    write_command(j, s);
    json_kstr(j, "backend", s->backend);
    write_cpu(j, s);
    write_pt(j, s);
    write_time(j, s);
    if (hw) {
        json_ku64(j, "cpus", hw->ncpus);
        json_ku64(j, "data_size", hw->data_size);
    }
    json_ku64(j, "aux_size", hw ? hw->aux_size : o->aux_size);
    json_ku64(j, "drain_rate", o->drain_rate);
    json_kbool(j, "keep_lossless", o->keep_lossless);

    write_jvm(j, s);
    write_streams(j, s);
    json_end(j);
}

int pr_write_info(const pr_session *s, char *err, size_t errlen)
{
    char *path = g_build_filename(s->dir ? s->dir : s->opts->out_dir, "info.json", NULL);
    char *tmp = g_strconcat(path, ".tmp", NULL);
    int rc = 0;
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        rc = -1;
        goto out;
    }
    json_w j;
    json_init(&j, f, true);
    write_info(&j, s);
    json_finish(&j);
    if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        fclose(f);
        unlink(tmp);
        rc = -1;
        goto out;
    }
    fclose(f);
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rename %s: %s", tmp, strerror(errno));
        unlink(tmp);
        rc = -1;
    }
out:
    g_free(tmp);
    g_free(path);
    return rc;
}
