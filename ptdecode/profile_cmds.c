/* The profile commands, `ptdecode hot`, `export`, `diff`, `context` and the
 * summary: profiles of a trace's reconstructed flow (profile/). Events come
 * only from pf_flow_source (profile_read.c). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>

#include "common/jerr.h"
#include "common/json.h"
#include "profile/ccenc.h"
#include "profile/cct.h"
#include "profile/coverage.h"
#include "profile/diff.h"
#include "profile/export.h"
#include "profile/flamegraph.h"
#include "profile/focus.h"
#include "profile/hcct.h"
#include "profile/hot.h"
#include "profile/names.h"
#include "profile/pprof.h"
#include "profile/ringchart.h"
#include "profile/source.h"
#include "profile/timebase.h"
#include "ptdecode/commands.h"
#include "ptdecode/hotprint.h"
#include "ptdecode/outfile.h"
#include "ptdecode/profile_opts.h"
#include "ptdecode/profile_read.h"

/* ---- hot ----------------------------------------------------------------- */

static void hot_usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode hot TRACE.DIR [-n N] [--by bytecodes|time|calls] [--json]\n"
            "\n"
            "The hottest methods over all calling contexts and threads: exclusive\n"
            "bytecodes executed, exclusive time, calls, and the inclusive values (each\n"
            "recursive activation counted once). Times are in s/ms/us with the TSC frequency\n"
            "the trace recorded (or --tsc-hz), in TSC ticks without one.\n"
            "\n"
            "  -n N               how many methods (default 20)\n"
            "  --by METRIC        rank by bytecodes (default), time or calls\n"
            "  --json             a JSON array instead of a table\n"
            "%s"
            "\n"
            "example:\n"
            "  java -agentpath:libjpt.so=mode=reference,out=hello.trace -Xint -cp samples/classes Hello\n"
            "  ptdecode hot hello.trace -n 10 --by calls\n",
            prof_shared_options);
}

int cmd_hot(int argc, char **argv)
{
    prof_opts o;
    int rc = prof_parse_opts(argc, argv, &o, hot_usage);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (optind + 1 != argc) {
        jerr_error("hot: expected one TRACE.DIR (try 'ptdecode hot --help')");
        return 2;
    }
    const char *dir = argv[optind];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0)
        return 1;
    dc_check_free(&chk);
    pf_names *names = prof_load_names(dir, &o);
    if (!names)
        return 1;
    bool partial;
    pf_cct *t = prof_build_cct(dir, &o, &partial);
    if (!t) {
        pf_names_free(names);
        return 1;
    }
    pf_timebase tb = prof_load_timebase(dir, &o);
    ptd_print_hot(stdout, t, names, &tb, o.by, (size_t)o.top, o.json);
    pf_cct_free(t);
    pf_names_free(names);
    prof_opts_free(&o);
    return partial ? 1 : 0;
}

/* ---- export -------------------------------------------------------------- */

static void export_usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode export TRACE.DIR --format FMT -o FILE [--format FMT -o FILE...]\n"
            "                       [OPTIONS]\n"
            "\n"
            "Writes profiles of the trace, as many formats as given from one reading of its\n"
            "flow (docs/PROFILES.md describes each format):\n"
            "  flamegraph    a flame graph, one self-contained HTML page: search, zoom,\n"
            "                callers (reversed), threads, frame kinds, metric picker\n"
            "  cct-json      the calling context tree, for the ring chart and other tools\n"
            "  folded        flame-graph stacks, 'a;b;c value' per line (--by picks the value)\n"
            "  chrome-trace  per-thread method spans as Chrome trace events (chrome://tracing,\n"
            "                Perfetto, speedscope)\n"
            "  speedscope    the same timeline in speedscope's evented format, a profile per\n"
            "                thread\n"
            "  pprof         gzipped profile.proto: calls, bytecodes and time per calling\n"
            "                context, functions with file and line (go tool pprof)\n"
            "  hcct-json     the hot calling context tree (--phi, --epsilon) and its accuracy\n"
            "                against the full tree\n"
            "  ringchart     the calling context ring chart, one self-contained HTML page\n"
            "  lcov          line and branch coverage of the executed bytecodes, an lcov\n"
            "                tracefile (genhtml makes HTML of it); sources as package/File.java\n"
            "\n"
            "  -o, --output FILE  where to write ('-': standard output); a file is replaced\n"
            "                     only by a whole profile (a failed export leaves it as it was);\n"
            "                     the first -o is the first --format's file, and so on\n"
            "  --by METRIC        folded: bytecodes (default), time or calls\n"
            "  --per-thread       folded: start each stack with its thread\n"
            "  --title TEXT       cct-json, ringchart, flamegraph: the title (default: the trace\n"
            "                     directory);\n"
            "                     lcov: the test name (TN:)\n"
            "  --classes GLOB     lcov: the classes to report ('Branchy*', 'com.example.?*' or\n"
            "                     'com/example/?*', '*' all; default: every class outside\n"
            "                     the JDK that ran)\n"
            "  --phi X            hcct-json: hot threshold, a share of all calls (default 1e-3)\n"
            "  --epsilon X        hcct-json: counter error bound, < phi (default 1e-4)\n"

            "%s"
            "\n"
            "examples:\n"
            "  ptdecode export hello.trace --format flamegraph -o hello.html\n"
            "  ptdecode export hello.trace --format cct-json -o hello.json --format pprof -o hello.pb.gz\n"
            "  ptdecode export hello.trace --format folded --by calls -o hello.folded\n"
            "  ptdecode export hello.trace --format chrome-trace -o hello.json\n"
            "  ptdecode export hello.trace --format ringchart -o hello.html\n"
            "  ptdecode export hello.trace --format lcov -o hello.info\n"
            "  cd samples/java && genhtml --branch-coverage ../../hello.info -o ../../hello-coverage\n",
            prof_shared_options);
}

typedef struct min_tsc {
    uint64_t min;
    bool any;
} min_tsc;

static int min_tsc_sink(const fl_event *ev, void *ctx)
{
    min_tsc *m = ctx;
    if (!m->any || ev->tsc < m->min)
        m->min = ev->tsc;
    m->any = true;
    return 0;
}

enum { F_CCT_JSON, F_FOLDED, F_CHROME, F_HCCT, F_RINGCHART, F_LCOV, F_FLAMEGRAPH, F_PPROF,
       F_SPEEDSCOPE, F_COUNT };
static const char *const export_formats[F_COUNT] = {
    "cct-json", "folded", "chrome-trace", "hcct-json", "ringchart", "lcov", "flamegraph",
    "pprof", "speedscope",
};

/* One --format with its -o. result: 0 written, -1 failed, -2 a usage
 * error, -3 written from the part of a damaged flow that could be read. */
typedef struct export_out {
    int format;
    ptd_out of;
    pf_chrome *chrome;
    int result;
} export_out;

/* Every sink of one reading of the flow. */
typedef struct fanout {
    fl_sink sink[F_COUNT + 2];
    void *ctx[F_COUNT + 2];
    int n;
} fanout;

static void fanout_add(fanout *f, fl_sink sink, void *ctx)
{
    f->sink[f->n] = sink;
    f->ctx[f->n++] = ctx;
}

static int fanout_sink(const fl_event *ev, void *vf)
{
    fanout *f = vf;
    for (int i = 0; i < f->n; i++)
        if (f->sink[i](ev, f->ctx[i]))
            return 1;
    return 0;
}

static int export_lcov(const char *dir, const prof_opts *o, pf_cov *c, FILE *out, bool partial)
{
    /* the trace directory's own name: "b" of "runs/b.trace/" */
    char *base = g_path_get_basename(dir);
    char *dot = strrchr(base, '.');
    if (dot && dot != base)
        *dot = 0;
    pf_cov_totals t;
    int result = pf_cov_write_lcov(out, c, o->title ? o->title : base, o->classes, &t);
    g_free(base);
    if (result == 0 && t.files == 0)
        jerr_warn("lcov: no class %s%s%s", o->classes ? "matches --classes '"
                                             : "outside the JDK ran (--classes '*' takes them all)",
                  o->classes ? o->classes : "",
                  o->classes ? "' (class names match as pkg.Class or pkg/Class)" : "");
    if (t.unknown_events)
        jerr_warn("lcov: %" PRIu64 " bytecode events of methods or bcis the program does not "
                  "have were left out", t.unknown_events);
    return result == 0 && partial ? -3 : result;
}

/* A format written from the calling context tree t. */
static int export_from_tree(const char *dir, const prof_opts *o, const pf_names *names,
                            int format, pf_cct *t, rc_program *prog, FILE *out)
{
    const char *title = o->title ? o->title : dir;
    pf_timebase tb = prof_load_timebase(dir, o);
    if (format == F_CCT_JSON)
        return pf_export_cct_json_hz(out, t, names, title, tb.hz);
    if (format == F_FOLDED)
        return pf_export_folded(out, t, names, o->by, o->per_thread);
    if (format == F_PPROF)
        return pf_export_pprof(out, t, names, prog, tb.hz);
    /* the pages embed the cct-json document */
    char *json = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&json, &len);
    int result = mem ? pf_export_cct_json_hz(mem, t, names, title, tb.hz) : -1;
    if (mem)
        fclose(mem);
    char err[1024] = "";
    int (*write_page)(FILE *, const char *, size_t, const char *, char *, size_t) =
        format == F_RINGCHART ? pf_ringchart_write : pf_flamegraph_write;
    if (result == 0 && write_page(out, json, len, title, err, sizeof err) != 0) {
        if (!ferror(out))    /* else closing the file says why */
            jerr_error("%s: %s", export_formats[format], err[0] ? err : "cannot write the page");
        result = -1;
    }
    free(json);
    return result;
}

/* Reads the flow once for every format of outs. */
static void export_all(const char *dir, const prof_opts *o, const pf_names *names,
                       export_out *outs, guint n)
{
    bool want[F_COUNT] = { false };
    for (guint i = 0; i < n; i++)
        want[outs[i].format] = true;
    bool want_tree = want[F_CCT_JSON] || want[F_FOLDED] || want[F_PPROF] || want[F_RINGCHART] ||
                     want[F_FLAMEGRAPH] || want[F_HCCT];
    bool want_chrome = want[F_CHROME] || want[F_SPEEDSCOPE];
    char err[1024];
    rc_program *prog = NULL;
    if (want[F_LCOV] || want[F_PPROF]) {
        /* the program's class files: lcov's lines, pprof's files and lines */
        prog = rc_program_load(dir, err, sizeof err);
        if (!prog && want[F_PPROF])
            jerr_warn("pprof: %s; functions without source files and lines", err);
        if (!prog && want[F_LCOV]) {
            jerr_error("%s", err);
            for (guint i = 0; i < n; i++)
                if (outs[i].format == F_LCOV)
                    outs[i].result = -1;
            want[F_LCOV] = false;
        }
    }
    /* Records of different threads are not in TSC order: a timeline's start
     * is the first event's time, found in a pass of its own. */
    min_tsc m = { 0 };
    if (want_chrome && prof_read_flow(dir, o, min_tsc_sink, &m) < 0) {
        for (guint i = 0; i < n; i++)
            outs[i].result = -1;
        rc_program_free(prog);
        return;
    }
    fanout fan = { .n = 0 };
    prof_cct_build b = { 0 };
    if (want_tree) {
        prof_cct_build_init(&b, o);
        fanout_add(&fan, prof_cct_build_sink, &b);
    }
    pf_hcct *h = NULL;
    if (want[F_HCCT]) {
        h = pf_hcct_new(o->phi, o->epsilon, o->cct.include);
        fanout_add(&fan, pf_hcct_sink, h);
    }
    pf_cov *cov = NULL;
    if (want[F_LCOV]) {
        cov = pf_cov_new(prog, o->cct.include);
        fanout_add(&fan, pf_cov_sink, cov);
    }
    if (want_chrome) {
        pf_timebase tb = prof_load_timebase(dir, o);
        double hz = tb.hz;
        if (!(hz > 0)) {
            hz = pf_tsc_hz_measure();
            jerr_warn("%s records no TSC frequency: times use this machine's, measured (%.3f "
                      "GHz; --tsc-hz HZ gives another)", dir, hz / 1e9);
        }
        for (guint i = 0; i < n; i++) {
            if (outs[i].format != F_CHROME && outs[i].format != F_SPEEDSCOPE)
                continue;
            outs[i].chrome = outs[i].format == F_SPEEDSCOPE
                             ? pf_speedscope_new(outs[i].of.f, names, m.min, hz,
                                                 o->title ? o->title : dir)
                             : pf_chrome_new(outs[i].of.f, names, m.min, hz);
            fanout_add(&fan, pf_chrome_sink, outs[i].chrome);
        }
    }
    uint64_t events = 0;
    int rc = prof_read_flow_counted(dir, o, fanout_sink, &fan, &events, NULL);
    bool partial = rc < 0, none = rc < 0 && events == 0;
    pf_cct *t = want_tree ? prof_cct_build_finish(&b, dir, o, none) : NULL;
    for (guint i = 0; i < n; i++) {
        export_out *x = &outs[i];
        FILE *out = x->of.f;
        if (x->result)
            continue;
        switch (x->format) {
        case F_CHROME:
        case F_SPEEDSCOPE:
            /* A write error is reported with the file's name when it is closed. */
            x->result = pf_chrome_finish(x->chrome) < 0 || partial ? -1 : 0;
            x->chrome = NULL;
            break;
        case F_HCCT: {
            if (partial) {
                x->result = -1;
                break;
            }
            pf_hcct_accuracy acc;
            bool have_acc = t && pf_hcct_accuracy_of(h, t, &acc) == 0;
            x->result = pf_hcct_export_json(out, h, names, have_acc ? &acc : NULL);
            break;
        }
        case F_LCOV:
            x->result = none ? -1 : export_lcov(dir, o, cov, out, partial);
            break;
        default:
            if (!t) {
                x->result = -1;
                break;
            }
            x->result = export_from_tree(dir, o, names, x->format, t, prog, out);
            if (partial && x->result == 0)
                x->result = -3;    /* written, but from part of the flow */
            break;
        }
    }
    pf_cct_free(t);
    pf_hcct_free(h);
    pf_cov_free(cov);
    rc_program_free(prog);
}

int cmd_export(int argc, char **argv)
{
    prof_opts o;
    int rc = prof_parse_opts(argc, argv, &o, export_usage);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (optind + 1 != argc) {
        jerr_error("export: expected one TRACE.DIR (try 'ptdecode export --help')");
        prof_opts_free(&o);
        return 2;
    }
    guint n = o.formats->len;
    export_out *outs = g_new0(export_out, n ? n : 1);
    int status = 0;
    for (guint i = 0; i < n && !status; i++) {
        const char *f = o.formats->pdata[i];
        outs[i].format = -1;
        for (int k = 0; k < F_COUNT; k++)
            if (!strcmp(f, export_formats[k]))
                outs[i].format = k;
        if (outs[i].format < 0) {
            jerr_error("export: --format must be flamegraph, cct-json, folded, chrome-trace, "
                       "speedscope, pprof, hcct-json, ringchart or lcov, not %s", f);
            status = 2;
        }
    }
    if (!status && !n) {
        jerr_error("export: --format must be flamegraph, cct-json, folded, chrome-trace, "
                   "speedscope, pprof, hcct-json, ringchart or lcov");
        status = 2;
    }
    if (!status && o.outputs->len != n) {
        jerr_error("export: -o FILE is required%s ('-' for standard output)",
                   n > 1 ? ", one for each --format" : "");
        status = 2;
    }
    for (guint i = 0; i < n && !status; i++) {
        for (guint k = 0; k < i && !status; k++)
            if (!strcmp(o.outputs->pdata[i], o.outputs->pdata[k])) {
                jerr_error("export: -o %s is given twice", (const char *)o.outputs->pdata[i]);
                status = 2;
            }
        int f = outs[i].format;
        if (!status && (f == F_CHROME || f == F_SPEEDSCOPE) &&
            (o.from_kind != 'n' || o.to_kind != 'n')) {
            jerr_error("export: --from / --to do not apply to %s (a timeline shows every time)",
                       export_formats[f]);
            status = 2;
        }
        if (!status && f == F_HCCT && !(o.epsilon < o.phi && o.phi < 1)) {
            jerr_error("hcct-json: need 0 < epsilon < phi < 1 (got phi %g, epsilon %g)", o.phi,
                       o.epsilon);
            status = 2;
        }
    }
    if (status) {
        g_free(outs);
        prof_opts_free(&o);
        return status;
    }
    const char *dir = argv[optind];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0) {
        g_free(outs);
        prof_opts_free(&o);
        return 1;
    }
    dc_check_free(&chk);
    pf_names *names = prof_load_names(dir, &o);
    guint opened = 0;
    while (names && opened < n && ptd_out_open(&outs[opened].of, o.outputs->pdata[opened]) == 0)
        opened++;
    bool ran = names && opened == n;
    if (ran)
        export_all(dir, &o, names, outs, n);
    else
        status = 1;
    /* Nothing half-written is left behind, except a profile of the part of
     * a damaged flow that could be read (-3); each format's file is kept or
     * dropped on its own result. */
    for (guint i = 0; i < opened; i++) {
        export_out *x = &outs[i];
        bool keep = ran && (x->result == 0 || x->result == -3);
        if (ptd_out_close(&x->of, keep) < 0 && x->result != -2)
            x->result = -1;
        if (x->result == -2)
            status = 2;
        else if (x->result < 0 && status != 2)
            status = 1;
    }
    g_free(outs);
    pf_names_free(names);
    prof_opts_free(&o);
    return status;
}

/* ---- diff ---------------------------------------------------------------- */

static void diff_usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode diff A.DIR B.DIR [-n N] [--by bytecodes|time|calls] [--json]\n"
            "                     [-o DIFF.html] [OPTIONS]\n"
            "\n"
            "How run B's profile differs from run A's: the methods and the calling contexts\n"
            "whose exclusive value changed most (B - A), with both values and B / A.\n"
            "Contexts are matched by the names of their methods, threads merged, so two\n"
            "recordings of a program compare whatever ids their JVMs gave the methods. Times\n"
            "are compared in ns when both traces record their TSC frequency, else in ticks.\n"
            "\n"
            "  -n N               rows of each table (default 20)\n"
            "  --by METRIC        bytecodes (default; calls when neither run has any),\n"
            "                     time or calls\n"
            "  --json             one JSON object instead of the tables\n"
            "  -o, --output FILE  also write a differential flame graph page: B's frames\n"
            "                     coloured by their change from A (red grew, blue shrank)\n"
            "%s"
            "\n"
            "example:\n"
            "  ptdecode diff branchy60.trace branchy120.trace -n 10 --by calls -o diff.html\n",
            prof_shared_options);
}

/* A value of the diff's metric: time with its unit, counts as they are. */
static const char *diff_value(const pf_diff *d, pf_metric by, uint64_t v, char *buf, size_t len)
{
    if (by != PF_BY_TIME) {
        snprintf(buf, len, "%" PRIu64, v);
        return buf;
    }
    if (!pf_diff_time_ns(d)) {
        snprintf(buf, len, "%" PRIu64 " ticks", v);
        return buf;
    }
    pf_timebase ns = { .hz = 1e9 };
    return pf_time_str(&ns, v, buf, len);
}

static const char *diff_ratio(uint64_t a, uint64_t b, char *buf, size_t len)
{
    if (!a)
        snprintf(buf, len, b ? "new" : "-");
    else if (!b)
        snprintf(buf, len, "gone");
    else
        snprintf(buf, len, "%.3f", (double)b / (double)a);
    return buf;
}

static const char *diff_change(const pf_diff *d, pf_metric by, uint64_t a, uint64_t b,
                               char *buf, size_t len)
{
    char v[48];
    diff_value(d, by, b >= a ? b - a : a - b, v, sizeof v);
    snprintf(buf, len, "%c%s", b >= a ? '+' : '-', v);
    return buf;
}

#define DIFF_PATH_MAX 4096

/* The differential flame graph page of d in o->output. */
static int diff_page(const pf_diff *d, const prof_opts *o, const char *a, const char *b)
{
    bool to_stdout = !strcmp(o->output, "-");
    FILE *out = to_stdout ? stdout : fopen(o->output, "w");
    if (!out) {
        jerr_error("%s: %s", o->output, strerror(errno));
        return -1;
    }
    char *json = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&json, &len);
    int rc = mem ? pf_diff_export_json(mem, d, a, b) : -1;
    if (mem)
        fclose(mem);
    char err[1024] = "";
    if (rc == 0 && pf_flamegraph_write(out, json, len, NULL, err, sizeof err) != 0)
        rc = -1;
    if (!to_stdout && fclose(out) != 0)
        rc = -1;
    if (rc < 0) {
        jerr_error("%s: %s", o->output, err[0] ? err : "cannot write the page");
        if (!to_stdout)
            unlink(o->output);
    }
    free(json);
    return rc;
}

static void diff_print(const pf_diff *d, const prof_opts *o, const char *const dirs[2])
{
    uint64_t ta, tb;
    pf_diff_totals(d, o->by, &ta, &tb);
    pf_diff_row *methods, *contexts;
    size_t nm = pf_diff_methods(d, o->by, &methods);
    size_t nc = pf_diff_contexts(d, o->by, &contexts);
    size_t sm = nm < (size_t)o->top ? nm : (size_t)o->top;
    size_t sc = nc < (size_t)o->top ? nc : (size_t)o->top;
    /* The tables list changes only: rows come largest change first. */
    size_t changed_m = 0, changed_c = 0;
    while (changed_m < nm && methods[changed_m].a != methods[changed_m].b)
        changed_m++;
    while (changed_c < nc && contexts[changed_c].a != contexts[changed_c].b)
        changed_c++;
    uint32_t *path = g_new(uint32_t, DIFF_PATH_MAX);
    char va[48], vb[48], ch[64], ra[16];
    if (o->json) {
        json_w j;
        json_init(&j, stdout, true);
        json_obj(&j);
        json_kstr(&j, "a", dirs[0]);
        json_kstr(&j, "b", dirs[1]);
        json_kstr(&j, "by", pf_metric_name(o->by));
        if (o->by == PF_BY_TIME)
            json_kstr(&j, "time_unit", pf_diff_time_ns(d) ? "ns" : "ticks");
        json_key(&j, "totals");
        json_obj(&j);
        json_ku64(&j, "a", ta);
        json_ku64(&j, "b", tb);
        json_end(&j);
        json_key(&j, "methods");
        json_arr(&j);
        for (size_t i = 0; i < sm; i++) {
            json_obj(&j);
            json_kstr(&j, "method", pf_diff_method_name(d, methods[i].key));
            json_ku64(&j, "a", methods[i].a);
            json_ku64(&j, "b", methods[i].b);
            json_end(&j);
        }
        json_end(&j);
        json_key(&j, "contexts");
        json_arr(&j);
        for (size_t i = 0; i < sc; i++) {
            uint32_t depth = pf_diff_context(d, contexts[i].key, path, DIFF_PATH_MAX);
            json_obj(&j);
            json_key(&j, "context");
            json_arr(&j);
            for (uint32_t k = 0; k < depth && k < DIFF_PATH_MAX; k++)
                json_str(&j, pf_diff_method_name(d, path[k]));
            json_end(&j);
            json_ku64(&j, "a", contexts[i].a);
            json_ku64(&j, "b", contexts[i].b);
            json_end(&j);
        }
        json_end(&j);
        json_end(&j);
        json_finish(&j);
    } else {
        const char *what = o->by == PF_BY_CALLS ? "calls" : o->by == PF_BY_TIME
                           ? "exclusive time" : "exclusive bytecodes";
        printf("A %s\nB %s\n%s: A %s, B %s, change %s (B / A %s)\n", dirs[0], dirs[1], what,
               diff_value(d, o->by, ta, va, sizeof va), diff_value(d, o->by, tb, vb, sizeof vb),
               diff_change(d, o->by, ta, tb, ch, sizeof ch), diff_ratio(ta, tb, ra, sizeof ra));
        if (sm > changed_m)
            sm = changed_m;
        if (sc > changed_c)
            sc = changed_c;
        printf("\nmethods, largest changes first (%zu of %zu changed, of %zu):\n", sm, changed_m,
               nm);
        if (sm)
            printf("%16s %16s %16s %8s  %s\n", "A", "B", "change", "B / A", "method");
        for (size_t i = 0; i < sm; i++)
            printf("%16s %16s %16s %8s  %s\n",
                   diff_value(d, o->by, methods[i].a, va, sizeof va),
                   diff_value(d, o->by, methods[i].b, vb, sizeof vb),
                   diff_change(d, o->by, methods[i].a, methods[i].b, ch, sizeof ch),
                   diff_ratio(methods[i].a, methods[i].b, ra, sizeof ra),
                   pf_diff_method_name(d, methods[i].key));
        printf("\ncontexts, largest changes first (%zu of %zu changed, of %zu; innermost frames "
               "last):\n", sc, changed_c, nc);
        if (sc)
            printf("%16s %16s %16s %8s  %s\n", "A", "B", "change", "B / A", "context");
        for (size_t i = 0; i < sc; i++) {
            uint32_t depth = pf_diff_context(d, contexts[i].key, path, DIFF_PATH_MAX);
            printf("%16s %16s %16s %8s  ", diff_value(d, o->by, contexts[i].a, va, sizeof va),
                   diff_value(d, o->by, contexts[i].b, vb, sizeof vb),
                   diff_change(d, o->by, contexts[i].a, contexts[i].b, ch, sizeof ch),
                   diff_ratio(contexts[i].a, contexts[i].b, ra, sizeof ra));
            uint32_t from = depth > 3 ? depth - 3 : 0;
            if (from)
                printf("(%u more) > ", from);
            for (uint32_t k = from; k < depth && k < DIFF_PATH_MAX; k++)
                printf("%s%s", k > from ? " > " : "", pf_diff_method_name(d, path[k]));
            printf("\n");
        }
    }
    g_free(path);
    g_free(methods);
    g_free(contexts);
}

int cmd_diff(int argc, char **argv)
{
    prof_opts o;
    int rc = prof_parse_opts(argc, argv, &o, diff_usage);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (optind + 2 != argc) {
        jerr_error("diff: expected two trace directories, A and B (try 'ptdecode diff --help')");
        return 2;
    }
    const char *const dirs[2] = { argv[optind], argv[optind + 1] };
    pf_names *names[2] = { NULL, NULL };
    pf_cct *trees[2] = { NULL, NULL };
    double ns_per_tick[2] = { 0, 0 };
    bool partial = false;
    int status = 0;
    for (int r = 0; r < 2 && status == 0; r++) {
        names[r] = prof_load_names(dirs[r], &o);
        bool part = false;
        trees[r] = names[r] ? prof_build_cct(dirs[r], &o, &part) : NULL;
        partial |= part;
        if (!trees[r]) {
            status = 1;
            break;
        }
        pf_timebase tb = prof_load_timebase(dirs[r], &o);
        ns_per_tick[r] = tb.hz > 0 ? 1e9 / tb.hz : 0;
    }
    pf_diff *d = status ? NULL : pf_diff_new(trees[0], names[0], ns_per_tick[0], trees[1],
                                             names[1], ns_per_tick[1]);
    if (!status && !d) {
        jerr_error("diff: out of memory");
        status = 1;
    }
    if (d) {
        uint64_t ta, tb;
        pf_diff_totals(d, PF_BY_BYTECODES, &ta, &tb);
        if (!o.by_set && !ta && !tb)
            o.by = PF_BY_CALLS;
        diff_print(d, &o, dirs);
        if (o.output && diff_page(d, &o, dirs[0], dirs[1]) < 0)
            status = 1;
        pf_diff_free(d);
    }
    for (int r = 0; r < 2; r++) {
        pf_cct_free(trees[r]);
        pf_names_free(names[r]);
    }
    prof_opts_free(&o);
    return status ? status : partial ? 1 : 0;
}

/* ---- context ------------------------------------------------------------- */

static void context_usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode context TRACE.DIR ID [ID...]\n"
            "       ptdecode context TRACE.DIR --list [-n N]\n"
            "\n"
            "Decodes a calling-context id of the trace's profile to its stack (outermost frame\n"
            "first). Ids number the contexts of all threads together (docs/PROFILES.md, context\n"
            "encoding; 'ptdecode flow --context-ids' tags every event with its id); with several\n"
            "ids, each stack follows a '# ID' line. --list prints the N most called contexts\n"
            "with their ids.\n"
            "%s"
            "\n"
            "example:\n"
            "  ptdecode context hello.trace --list -n 5\n"
            "  ptdecode context hello.trace 42\n"
            "  ptdecode flow hello.trace --context-ids --limit 20   # every event's id\n",
            prof_shared_options);
}

int cmd_context(int argc, char **argv)
{
    prof_opts o;
    int rc = prof_parse_opts(argc, argv, &o, context_usage);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (o.list ? optind + 1 != argc : optind + 2 > argc) {
        jerr_error("context: expected TRACE.DIR and an ID or --list (try 'ptdecode context --help')");
        return 2;
    }
    int nids = o.list ? 0 : argc - optind - 1;
    int64_t *ids = g_new(int64_t, nids ? nids : 1);
    for (int i = 0; i < nids; i++) {
        char *end;
        errno = 0;
        long long v = strtoll(argv[optind + 1 + i], &end, 0);
        if (errno || *end || v < 0) {
            jerr_error("context: '%s' is not a context id", argv[optind + 1 + i]);
            g_free(ids);
            return 2;
        }
        ids[i] = v;
    }
    const char *dir = argv[optind];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0) {
        g_free(ids);
        return 1;
    }
    dc_check_free(&chk);
    pf_names *names = prof_load_names(dir, &o);
    if (!names) {
        g_free(ids);
        return 1;
    }
    bool partial;
    pf_cct *t = prof_build_cct(dir, &o, &partial);
    pf_cct *e = t ? pf_ccenc_tree(t) : NULL;
    pf_cct_free(t);
    if (!e) {
        pf_names_free(names);
        g_free(ids);
        return 1;
    }
    char buf[32];
    int status = 0;
    if (o.list) {
        /* The most called contexts: a partial sort of node indices. */
        uint32_t *order = g_new(uint32_t, e->count);
        uint32_t n = 0;
        for (uint32_t i = 1; i < e->count; i++)
            order[n++] = i;
        for (uint32_t i = 0; i < n && i < (uint32_t)o.top; i++) {
            uint32_t best = i;
            for (uint32_t k = i + 1; k < n; k++)
                if (e->nodes[order[k]].calls > e->nodes[order[best]].calls)
                    best = k;
            uint32_t tmp = order[i];
            order[i] = order[best];
            order[best] = tmp;
            const pf_node *node = &e->nodes[order[i]];
            printf("%" PRIu32 " calls=%" PRIu64 " %s\n", order[i], node->calls,
                   pf_names_readable(names, node->method, buf, sizeof buf));
        }
        g_free(order);
    } else {
        uint64_t stack[4096];
        for (int k = 0; k < nids; k++) {
            int64_t depth = pf_ccenc_decode(e, ids[k], stack, 4096);
            if (nids > 1)
                printf("# %" PRId64 "\n", ids[k]);
            if (depth < 0) {
                jerr_error("context: no context %" PRId64 " in this profile (ids 0..%" PRIu32 ")",
                           ids[k], e->count - 1);
                status = 1;
                continue;
            }
            if (depth == 0)
                printf("(empty context)\n");
            for (int64_t i = 0; i < depth && i < 4096; i++)
                printf("%s\n", pf_names_readable(names, stack[i], buf, sizeof buf));
            if (depth > 4096)
                printf("(%" PRId64 " inner frames not shown)\n", depth - 4096);
        }
    }
    g_free(ids);
    pf_cct_free(e);
    pf_names_free(names);
    prof_opts_free(&o);
    return partial ? 1 : status;
}

/* ---- summary ------------------------------------------------------------- */

static void summary_usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode TRACE.DIR [-n N] [--by bytecodes|time|calls] [OPTIONS]\n"
            "       ptdecode summary TRACE.DIR [...]\n"
            "\n"
            "A trace at a glance: whether the recording finished; its threads; the\n"
            "bytecodes of the flow and the shares decoded from the trace, recovered from\n"
            "matching earlier flow and guessed along the control-flow graph; what was lost\n"
            "(bytes the collector dropped or the files lack, gaps in the trace, with PMD and\n"
            "PD as 'ptdecode stats' defines them); and the hottest methods. A reference-mode\n"
            "trace (the agent's own records) has no losses.\n"
            "\n"
            "  -n N               how many hot methods (default 10)\n"
            "  --by METRIC        rank them by bytecodes (default; calls when the flow has\n"
            "                     no bytecodes), time or calls\n"
            "%s"
            "\n"
            "example:\n"
            "  ptrec --emulate -o b.trace -- java -Xint -cp samples/classes Branchy 60\n"
            "  ptdecode b.trace\n",
            prof_shared_options);
}

typedef struct summary_counts {
    uint64_t bytecodes[FL_ORIGIN_COUNT], calls;
    uint64_t segments, after_gap;
    uint64_t compiled, compiled_estimated;   /* bytecodes of compiled code */
    uint64_t calls_inferred, calls_estimated;
    GHashTable *tids;
} summary_counts;

static int summary_tap(const fl_event *ev, void *vc)
{
    summary_counts *c = vc;
    g_hash_table_add(c->tids, GUINT_TO_POINTER(ev->tid));
    unsigned o = (unsigned)ev->origin < FL_ORIGIN_COUNT ? (unsigned)ev->origin : FL_GUESSED;
    if (ev->kind == FL_BYTECODE) {
        c->bytecodes[o] += ev->count;
        if (ev->flags & FL_F_COMPILED) {
            c->compiled += ev->count;
            c->compiled_estimated += (ev->flags & FL_F_ESTIMATED) ? ev->count : 0;
        }
    } else if (ev->kind == FL_CALL && !(ev->flags & FL_F_CONTEXT)) {
        c->calls++;
        c->calls_inferred += (ev->flags & FL_F_INFERRED) != 0;
        c->calls_estimated += (ev->flags & FL_F_ESTIMATED) != 0;
    }
    else if (ev->kind == FL_SEGMENT) {
        c->segments++;
        c->after_gap += (ev->flags & FL_F_AFTER_GAP) != 0;
    }
    return 0;
}

static int tid_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int cmd_summary(int argc, char **argv)
{
    prof_opts o;
    int rc = prof_parse_opts(argc, argv, &o, summary_usage);
    if (rc)
        return rc == 1 ? 0 : 2;
    if (!o.top_set)
        o.top = 10;    /* hot shows 20; a summary is shorter */
    if (optind + 1 != argc) {
        jerr_error("expected one TRACE.DIR (try 'ptdecode summary --help')");
        return 2;
    }
    const char *dir = argv[optind];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0)
        return 1;
    pf_names *names = prof_load_names(dir, &o);
    if (!names) {
        dc_check_free(&chk);
        return 1;
    }
    summary_counts c = { .tids = g_hash_table_new(g_direct_hash, g_direct_equal) };
    pf_flow_stats fs;
    bool partial;
    pf_cct *t = prof_build_cct_tapped(dir, &o, &partial, summary_tap, &c, &fs);
    if (!t) {
        g_hash_table_destroy(c.tids);
        pf_names_free(names);
        dc_check_free(&chk);
        return 1;
    }
    uint64_t total = c.bytecodes[FL_DECODED] + c.bytecodes[FL_RECOVERED] + c.bytecodes[FL_GUESSED];
    if (!o.by_set && total == 0)
        o.by = PF_BY_CALLS;

    printf("trace      %s (%s)\n", dir, fs.traced ? "traced run" : "reference mode");
    char rec[512];
    printf("recording  %s\n", dc_check_recording(&chk, rec, sizeof rec));
    if (fs.traced)
        printf("flow       %s\n", fs.cached ? "read from the decoded-flow cache (cache/flow.jfc)"
                                 : fs.cache_written ? "decoded, and kept in cache/flow.jfc for the "
                                                      "next commands"
                                                    : "decoded");
    guint ntids = 0;
    uint32_t *tids = (uint32_t *)g_hash_table_get_keys_as_array(c.tids, &ntids);
    /* keys are stored as pointers: copy them out as integers */
    uint32_t *sorted = g_new(uint32_t, ntids ? ntids : 1);
    for (guint i = 0; i < ntids; i++)
        sorted[i] = GPOINTER_TO_UINT(((gpointer *)tids)[i]);
    g_free(tids);
    qsort(sorted, ntids, sizeof *sorted, tid_cmp);
    printf("threads    %u with events", ntids);
    if (fs.traced)
        /* After a per-CPU trace is split, these are the split's streams. */
        printf(" (%u per-thread PT streams)", fs.streams);
    printf(":");
    for (guint i = 0; i < ntids && i < 8; i++) {
        const char *name = pf_names_thread(names, sorted[i]);
        printf("%s %s (tid %u)", i ? "," : "", name ? name : "?", sorted[i]);
    }
    printf("%s\n", ntids > 8 ? ", ..." : "");
    g_free(sorted);
    printf("bytecodes  %" PRIu64 ": %.2f%% decoded, %.2f%% recovered, %.2f%% guessed\n", total,
           total ? 100.0 * (double)c.bytecodes[FL_DECODED] / (double)total : 0.0,
           total ? 100.0 * (double)c.bytecodes[FL_RECOVERED] / (double)total : 0.0,
           total ? 100.0 * (double)c.bytecodes[FL_GUESSED] / (double)total : 0.0);
    printf("calls      %" PRIu64 "; %" PRIu64 " flow segments, %" PRIu64 " after a gap in the "
           "trace\n", c.calls, c.segments, c.after_gap);
    if (fs.traced && c.compiled)
        printf("compiled   %" PRIu64 " bytecodes (%.2f%% of all), %.2f%% of them on paths the "
               "trace does not settle (estimated); %" PRIu64 " calls made where no code "
               "showed them (inferred), %" PRIu64 " estimated\n", c.compiled,
               total ? 100.0 * (double)c.compiled / (double)total : 0.0,
               100.0 * (double)c.compiled_estimated / (double)c.compiled, c.calls_inferred,
               c.calls_estimated);
    if (fs.traced) {
        char more[512];
        /* Lost bytes the decoder did not see (absent streams, ...) count too. */
        dc_stats dc = fs.dc;
        dc.lost_bytes += chk.lost_outside;
        printf("losses     %" PRIu64 " bytes lost of %" PRIu64 " (PMD %.2f%%), %" PRIu64
               " gaps, %" PRIu64 " bytes not decodable%s; PD %.2f%%\n", dc.lost_bytes,
               dc.pt_bytes + dc.lost_bytes, pf_share_missing(&dc), pf_dc_gaps(&dc),
               dc.skipped_bytes, dc_check_losses(&chk, more, sizeof more),
               pf_share_decoded(&dc, &fs.rp));
        printf("recovery   %" PRIu64 " of %" PRIu64 " holes filled (%" PRIu64 " up to the next "
               "segment), %" PRIu64 " bytecodes recovered, %" PRIu64 " guessed; %" PRIu64
               " of %" PRIu64 " segments unresolved\n", fs.rv.filled, fs.rv.boundaries,
               fs.rv.rejoined, fs.rv.bytecodes, fs.rv.guessed_bytecodes,
               fs.rp.segments_unresolved, fs.rp.segments);
    } else {
        printf("losses     none (the agent's records)\n");
    }

    pf_hot_method *hot;
    size_t count = pf_hot_methods(t, o.by, &hot);
    size_t shown = count < (size_t)o.top ? count : (size_t)o.top;
    uint64_t sum = 0;
    for (size_t i = 0; i < count; i++)
        sum += pf_hot_value(&hot[i], o.by);
    printf("\nhot methods (top %zu of %zu, by %s%s):\n", shown, count,
           o.by == PF_BY_CALLS ? "" : "exclusive ", pf_metric_name(o.by));
    printf("%4s %6s %12s %14s  %s\n", "rank", "%", "calls", "self bytecodes", "method");
    char buf[32];
    for (size_t i = 0; i < shown; i++) {
        double share = sum ? 100.0 * (double)pf_hot_value(&hot[i], o.by) / (double)sum : 0;
        printf("%4zu %6.2f %12" PRIu64 " %14" PRIu64 "  %s\n", i + 1, share, hot[i].calls,
               hot[i].self_bytecodes, pf_names_readable(names, hot[i].method, buf, sizeof buf));
    }
    g_free(hot);
    pf_cct_free(t);
    g_hash_table_destroy(c.tids);
    pf_names_free(names);
    dc_check_free(&chk);
    prof_opts_free(&o);
    return partial ? 1 : 0;
}
