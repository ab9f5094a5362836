/* `ptdecode events`: the decoded event stream of each thread, one line per
 * event. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "common/jerr.h"
#include "decoder/bytecodes.h"
#include "decoder/decode.h"
#include "decoder/percpu.h"
#include "ptdecode/commands.h"

typedef struct printer {
    const dm_model *m;
    const char *from;        /* a per-CPU trace: its streams (NULL: the thread's own) */
    FILE *out;
    uint64_t limit;          /* 0: no limit */
    uint64_t printed;
    uint64_t base_tsc;
    bool summary_only;
    bool bar;                /* progress bar on stderr (a terminal) */
    const char *stream;
    uint32_t tid;
    char *pt;                /* the stream's path */
    int *status;             /* the command's exit status */
} printer;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode events TRACE.DIR [--thread TID] [--limit N] [--summary] [--jobs N]\n"
            "\n"
            "Decodes the PT stream of each thread (or of thread TID) and prints one line\n"
            "per event: time (TSC since the agent started), address, kind, detail.\n"
            "Kinds: bytecode (the standard opcode an interpreter template ran), method-entry,\n"
            "interp-return, deopt, exception, throw, safepoint, native, interp-other,\n"
            "jit-enter / jit / inline-call / inline-return (compiled code: method and bci),\n"
            "stub, code, gap (trace lost or undecodable).\n"
            "A per-CPU trace (pt/cpu-N.pt) is first split into threads by the context\n"
            "switches of sideband/cpu-N.sb; switches that cannot be placed are reported.\n"
            "\n"
            "  --thread TID   only this thread (its stream pt/tid-TID.pt, or its part of\n"
            "                 the per-CPU streams pt/cpu-N.pt)\n"
            "  --limit N      print at most N events per thread (decoding stops there)\n"
            "  --summary      print only each thread's counts\n"
            "  --jobs N       decode with N threads (default: the number of processors);\n"
            "                 the output is the same for any N\n"
            "  --chunk KIB    cut streams into pieces of at least KIB KiB of PT, decoded\n"
            "                 independently (default 1024; memory grows with it): each\n"
            "                 starts from the code as recorded at its time, so the size\n"
            "                 can change events next to a boundary, the thread count not\n");
}

static void print_event(printer *p, const dc_event *ev)
{
    char buf[1024];
    uint64_t t = ev->tsc >= p->base_tsc ? ev->tsc - p->base_tsc : 0;
    fprintf(p->out, "%12" PRIu64 " 0x%012" PRIx64 " %-13s ", t, ev->ip, dc_kind_name(ev->kind));
    switch (ev->kind) {
    case DC_BYTECODE: {
        const char *n = bc_name(ev->opcode);
        fprintf(p->out, "%s", n ? n : "?");
        if (ev->exit_ip >= ev->ip)
            fprintf(p->out, "  exit +0x%" PRIx64, ev->exit_ip - ev->ip);
        else if (ev->exit_ip)       /* wide: the modified bytecode's template */
            fprintf(p->out, "  exit 0x%012" PRIx64, ev->exit_ip);
        if (ev->flags & (DC_F_TAKEN | DC_F_NOT_TAKEN))
            fprintf(p->out, "  %s", (ev->flags & DC_F_TAKEN) ? "taken" : "not taken");
        if (ev->itable_pos)
            fprintf(p->out, "  itable %" PRIu32, ev->itable_pos - 1);
        if (ev->desc && n && strcmp(ev->desc, n))
            fprintf(p->out, "  (%s%s)", ev->desc, (ev->flags & DC_F_FUSED) ? ", fused" : "");
        break;
    }
    case DC_JIT_ENTER:
        fprintf(p->out, "%s%s", dm_method_str(p->m, ev->method_id, buf, sizeof buf),
                (ev->flags & DC_F_BY_RETURN) ? "  (return)" :
                (ev->flags & DC_F_BY_CALL) && (ev->flags & DC_F_NO_SCOPE) ? "  (call, no scope)" :
                (ev->flags & DC_F_BY_CALL) ? "  (call)" :
                (ev->flags & DC_F_RESUMED) ? "  (resumed)" : "");
        break;
    case DC_JIT:
    case DC_INLINE_CALL:
    case DC_INLINE_RETURN:
        fprintf(p->out, "%s bci %d depth %u", dm_method_str(p->m, ev->method_id, buf, sizeof buf),
                ev->bci, ev->depth);
        if (ev->kind == DC_INLINE_CALL && ev->call_bci >= 0)
            fprintf(p->out, "  (site %d)", ev->call_bci);
        if (ev->flags & DC_F_BACKWARD)
            fprintf(p->out, "  (jumped back)");
        break;
    case DC_GAP:
        fprintf(p->out, "%s, stream bytes %" PRIu64 "..%" PRIu64, dc_gap_reason_name(ev->reason),
                ev->offset, ev->end_offset);
        if (ev->lost_bytes)
            fprintf(p->out, ", %" PRIu64 " bytes lost", ev->lost_bytes);
        if (ev->end_tsc)
            fprintf(p->out, ", until %" PRIu64,
                    ev->end_tsc >= p->base_tsc ? ev->end_tsc - p->base_tsc : 0);
        if (ev->error)
            fprintf(p->out, ": %s", pt_errstr(pt_errcode(ev->error)));
        break;
    default:
        if (ev->desc)
            fprintf(p->out, "%s", ev->desc);
        break;
    }
    fputc('\n', p->out);
}

/* A one-line bar on the terminal, redrawn in place and erased at the end. */
static void on_progress(uint64_t done, uint64_t total, void *vp)
{
    const printer *p = vp;
    if (!p->bar)
        return;
    if (done >= total) {
        fprintf(stderr, "\r%60s\r", "");
        return;
    }
    int pct = total ? (int)(100 * done / total) : 100, w = pct * 30 / 100;
    fprintf(stderr, "\r%-14s [%.*s%*s] %3d%%", p->stream, w,
            "##############################", 30 - w, "", pct);
    fflush(stderr);
}

static int on_event(const dc_event *ev, void *vp)
{
    printer *p = vp;
    if (!p->summary_only)
        print_event(p, ev);
    p->printed++;
    return p->limit && p->printed >= p->limit;
}

static void print_summary(FILE *f, const dc_stats *st)
{
    fprintf(f, "# %" PRIu64 " bytes of PT in %" PRIu64 " segment%s, %" PRIu64 " blocks, %" PRIu64
            " instructions\n", st->pt_bytes, st->segments, st->segments == 1 ? "" : "s",
            st->blocks, st->insns);
    fprintf(f, "# events:");
    for (int k = 1; k < DC_KIND_COUNT; k++)
        if (st->events[k])
            fprintf(f, " %s %" PRIu64, dc_kind_name((dc_kind)k), st->events[k]);
    fputc('\n', f);
    fprintf(f, "# gaps: lost %" PRIu64 ", overflow %" PRIu64 ", decode-error %" PRIu64
            ", no-code %" PRIu64 "; %" PRIu64 " bytes lost by the collector, %" PRIu64
            " bytes skipped\n", st->gaps[DC_GAP_LOST], st->gaps[DC_GAP_OVERFLOW],
            st->gaps[DC_GAP_DECODE], st->gaps[DC_GAP_NOCODE], st->lost_bytes, st->skipped_bytes);
    if (st->missing_bytes || st->unindexed_bytes)
        fprintf(f, "# the file: %" PRIu64 " bytes its index covers are missing (lost, counted "
                "above), %" PRIu64 " bytes past its index not decoded\n", st->missing_bytes,
                st->unindexed_bytes);
    fprintf(f, "# tracing enabled %" PRIu64 " times, disabled %" PRIu64 " times; code image: %"
            PRIu64 " sections added, %" PRIu64 " rebuilds\n", st->enables, st->disables,
            st->image_sections, st->image_rebuilds);
    if (st->chunks > 1)
        fprintf(f, "# decoded in %" PRIu64 " chunks, each from the code as recorded at its "
                "start\n", st->chunks);
    if (st->patches_resolved)
        fprintf(f, "# %" PRIu64 " code patches applied ahead of their record time (call sites "
                "as the thread resolved them, retries)\n", st->patches_resolved);
    if (st->states_made_up)
        fprintf(f, "# %" PRIu64 " call sites resolved to the interpreter (through their static "
                "call stub or a c2i adapter), a state no code record held\n", st->states_made_up);
    if (st->retries)
        fprintf(f, "# %" PRIu64 " stretches decoded again with code recorded later than their "
                "time, %" PRIu64 " of them kept (the trace contradicted the older code)\n",
                st->retries, st->retries_kept);
    if (st->fixup_calls)
        fprintf(f, "# %" PRIu64 " of them a call through its static stub whose c2i adapter "
                "re-pointed it (the first after its callee was compiled)\n", st->fixup_calls);
    if (st->resumes)
        fprintf(f, "# decoding resumed %" PRIu64 " times at the next branch target after a "
                "failure (instead of at the next PSB)\n", st->resumes);
    if (st->jit_blocks_ends_only)
        fprintf(f, "# %" PRIu64 " compiled-code blocks had no unique inner path: positions at "
                "their ends only\n", st->jit_blocks_ends_only);
}

static void on_started(void *vp)
{
    const printer *p = vp;
    const dm_thread *th = dm_thread_get(p->m, p->tid);
    if (p->from)
        printf("# thread %u%s%s%s: from %s (split by context switches into %s)\n", p->tid,
               th ? " \"" : "", th ? th->name : "", th ? "\"" : "", p->from, p->pt);
    else
        printf("# thread %u%s%s%s: %s\n", p->tid, th ? " \"" : "", th ? th->name : "",
               th ? "\"" : "", p->pt);
}

static void on_finished(const dc_stats *st, int rc, const char *err, void *vp)
{
    const printer *p = vp;
    if (rc < 0) {
        jerr_error("%s", err);
        *p->status = 1;
        return;
    }
    if (rc == 1)
        printf("# stopped after %" PRIu64 " events (--limit)\n", p->printed);
    print_summary(stdout, st);
    if (rc == 0 && st->pt_bytes && !st->blocks)
        jerr_warn_kind("stream undecodable", "%s: none of its %" PRIu64 " bytes could be decoded "
                       "into instructions (its gaps say why)", p->pt, st->pt_bytes);
    if (st->problems) {
        jerr_warn_kind("decode problem", "%s", st->problem);
        if (st->problems > 1)
            jerr_warn("%s: %" PRIu64 " more problems", p->pt, st->problems - 1);
    }
}

/* The command line of `ptdecode events`. */
typedef struct events_args {
    const char *dir;
    long long tid;           /* --thread; -1: every thread */
    uint64_t limit;          /* 0: no limit */
    bool summary;
    dc_options dopt;
} events_args;

/* Returns -1 to go on, else the exit status (--help, a usage error). */
static int parse_args(int argc, char **argv, events_args *a)
{
    static const struct option opts[] = {
        { "thread", required_argument, NULL, 't' },
        { "limit", required_argument, NULL, 'n' },
        { "summary", no_argument, NULL, 's' },
        { "jobs", required_argument, NULL, 'j' },
        { "chunk", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    *a = (events_args){ .tid = -1 };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:n:sj:c:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 't':
            if (!ptd_parse_tid("events", optarg, &a->tid))
                return 2;
            break;
        case 'n':
            if (!ptd_parse_limit("events", optarg, &a->limit))
                return 2;
            break;
        case 's':
            a->summary = true;
            break;
        case 'j': {
            /* events' own wording of the error (the others: ptd_parse_jobs) */
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || *end || optarg[0] == '-' || v < 1 || v > 1024) {
                jerr_error("events: --jobs wants a thread count from 1 to 1024, not '%s'",
                           optarg);
                return 2;
            }
            a->dopt.threads = (unsigned)v;
            break;
        }
        case 'c': {
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || *end || optarg[0] == '-' || v < 4 || v > (1ull << 30)) {
                jerr_error("events: --chunk wants a size in KiB from 4 to 2^30, not '%s'",
                           optarg);
                return 2;
            }
            a->dopt.chunk_bytes = v << 10;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    a->dir = argv[optind];
    return -1;
}

/* Decodes and prints the chosen threads' streams. Returns the exit status. */
static int decode_threads(const events_args *a, const dm_model *m, di_cache *cache,
                          const dc_trace_info *info)
{
    const char *dir = a->dir;
    char err[1024];
    int status = 0;
    uint32_t *tids = NULL;
    size_t ncpu = 0;
    /* A per-CPU trace is split by thread first (decoder/percpu.h). */
    const char *sdir = dc_thread_stream_dir(dir, err, sizeof err);
    if (!sdir)
        sdir = dir;   /* dc_list_thread_streams reports why */
    size_t n = dc_list_thread_streams(dir, &tids, &ncpu);
    if (!n) {
        if (ncpu)
            jerr_error("%s/pt: %zu per-CPU streams and no thread's trace split from them", dir,
                       ncpu);
        else
            jerr_error("%s/pt: no PT streams (tid-<TID>.pt)", dir);
        status = 1;
    }
    /* All streams in one call: their chunks share the thread pool, the
     * output stays stream after stream. */
    bool found = a->tid < 0;
    char *cpu_label = g_strdup_printf("%s/pt/cpu-*.pt", dir);
    printer *ps = g_new0(printer, n ? n : 1);
    dc_stream *ss = g_new0(dc_stream, n ? n : 1);
    dc_stats *sts = g_new0(dc_stats, n ? n : 1);
    char (*names)[64] = g_malloc0(sizeof *names * (n ? n : 1));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (a->tid >= 0 && tids[i] != (uint32_t)a->tid)
            continue;
        found = true;
        snprintf(names[k], sizeof names[k], "tid-%u", tids[i]);
        ps[k] = (printer){ .m = m, .out = stdout, .limit = a->limit, .base_tsc = m->start_tsc,
                           .summary_only = a->summary, .stream = names[k], .tid = tids[i],
                           .from = strcmp(sdir, dir) ? cpu_label : NULL,
                           .pt = g_strdup_printf("%s/pt/%s.pt", sdir, names[k]),
                           .status = &status,
                           .bar = isatty(STDERR_FILENO) &&
                                  (a->summary || !isatty(STDOUT_FILENO)) };
        ss[k].pt_path = ps[k].pt;
        ss[k].idx_path = g_strdup_printf("%s/pt/%s.idx", sdir, names[k]);
        ss[k].st = &sts[k];
        ss[k].out = (dc_output){ .sink = on_event, .progress = on_progress,
                                 .started = on_started, .finished = on_finished,
                                 .ctx = &ps[k] };
        k++;
    }
    const dc_percpu_stats *pc = dc_percpu_stats_of(dir);
    if (pc)
        printf("# per-CPU trace: %" PRIu64 " CPUs, %" PRIu64 " stretches of %" PRIu64 " threads; "
               "%" PRIu64 " context switches, %" PRIu64 " attached, %" PRIu64 " not attachable, %"
               PRIu64 " inconsistent; %" PRIu64 " bytes with no thread\n", pc->cpus,
               pc->stretches, pc->threads, pc->switches, pc->attached, pc->unattached,
               pc->inconsistent, pc->orphan_bytes);
    dc_decode_streams(&(dc_trace){ m, cache, info }, ss, k, &a->dopt);
    for (size_t i = 0; i < k; i++) {
        g_free(ps[i].pt);
        g_free((char *)ss[i].idx_path);
    }
    g_free(ps);
    g_free(ss);
    g_free(sts);
    g_free(names);
    g_free(cpu_label);
    if (!found) {
        jerr_error("%s/pt: no stream for thread %lld", dir, a->tid);
        status = 1;
    }
    g_free(tids);
    return status;
}

int cmd_events(int argc, char **argv)
{
    events_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    const char *dir = a.dir;
    char err[1024];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0)
        return 1;
    dm_model *m = dm_load(dir, err, sizeof err);
    if (!m) {
        jerr_error("%s", err);
        dc_check_free(&chk);
        return 1;
    }
    for (size_t i = 0; i < m->nwarnings; i++)
        jerr_warn_grouped(m->warnings[i]);
    if (m->warnings_total > m->nwarnings)
        jerr_warn("%s: %zu more metadata problems not shown", dir,
                  m->warnings_total - m->nwarnings);

    dc_trace_info info;
    di_cache *cache = NULL;
    if (dc_read_info(dir, &info, err, sizeof err) < 0 ||
        !(cache = di_cache_new(m, err, sizeof err))) {
        jerr_error("%s", err);
        dm_free(m);
        dc_check_free(&chk);
        return 1;
    }
    if (dc_check_cut(&chk)) {
        char rec[512];
        printf("# recording %s\n", dc_check_recording(&chk, rec, sizeof rec));
    }
    int status = decode_threads(&a, m, cache, &info);
    di_cache_free(cache);
    dm_free(m);
    dc_check_free(&chk);
    return status;
}
