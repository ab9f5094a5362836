/* `ptdecode flow`: the reconstructed flow of each thread, one line (or one
 * JSON object) per call, return and bytecode. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "common/jerr.h"
#include "common/json.h"
#include "decoder/bytecodes.h"
#include "decoder/percpu.h"
#include "profile/cct.h"
#include "profile/names.h"
#include "profile/source.h"
#include "ptdecode/commands.h"
#include "reconstruct/trace.h"
#include "recover/recover.h"

typedef struct flow_printer {
    rt_trace *t;
    FILE *out;
    bool json;
    bool summary;               /* print nothing but the per-thread counts */
    pf_method_pattern *method_glob;  /* NULL: all */
    GHashTable *glob_hits;      /* method id -> 1 matches, 2 does not (the pattern's answer) */
    GHashTable *java_names;     /* method id -> its name in the text output (Java style) */
    bool simple;                /* ... without parameters */
    uint64_t base_tsc;
    uint64_t limit, printed;
    bool stopped;               /* --limit ended this thread's flow */
    int depth;                  /* indentation: calls minus returns in this segment */
    /* --context-ids: the encoding tree of `ptdecode context` and the node of
     * the current context in it (its id), moved exactly as the profile's
     * builder moves its cursor (profile/cct.h); -1 when the context is not
     * in the tree (cannot happen for the flow the tree was built from). */
    const pf_cct *ctx_tree;
    int32_t ctx_node;
} flow_printer;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode flow TRACE.DIR [--thread TID] [--method GLOB] [--json] [--limit N]\n"
            "                             [--recover] [--summary] [--context-ids] [--jobs N]\n"
            "                             [--no-cache]\n"
            "\n"
            "Decodes each thread's PT stream and projects its interpreted bytecodes onto the\n"
            "program's classes, then prints the flow: every call, return and bytecode with the\n"
            "method, bci, opcode and source line. Compiled code contributes its calls and\n"
            "returns (inlined ones too); a constructor call that compiled code leaves no\n"
            "trace of (an empty one inlined, Object's above all) is [inferred] from the\n"
            "bytecode of the compiled constructor that makes it.\n"
            "A 'segment' line starts each stretch whose calling\n"
            "context had to be found again (thread start, after a gap in the trace).\n"
            "At the end of each thread: how many bytecodes got a place and how segments were\n"
            "resolved (unique, chosen among equally fitting paths, unresolved).\n"
            "\n"
            "  --thread TID    only this thread\n"
            "  --method GLOB   print only bytecodes of methods matching GLOB, e.g. 'Hello.*'\n"
            "                  (* and ? match anything; a method matches as\n"
            "                  pkg.Cls.name(Type, ...), pkg.Cls.name or pkg/Cls.name(descriptor))\n"
            "  --json          one JSON object per line instead of text (methods named\n"
            "                  pkg/Cls.name(descriptor); the text names them pkg.Cls.name(Type, ...))\n"
            "  --simple        text: method names without their parameter types\n"
            "  --limit N       stop each thread after printing N lines (and print no counts\n"
            "                  for it)\n"
            "  --recover       fill the holes left by gaps from matching earlier flow of the\n"
            "                  thread (recover/README.md); their lines are marked +\n"
            "                  after the time (JSON: \"origin\":\"recovered\"); where\n"
            "                  nothing rejoins, an ICFG path is guessed: marked ?\n"
            "                  (\"origin\":\"guessed\")\n"
            "  --summary       print only each thread's counts (the whole flow is still\n"
            "                  reconstructed: --limit would stop it early)\n"
            "  --jobs N        decode and reconstruct with N threads (default: the number of\n"
            "                  processors; the flow is the same)\n"
            "  --no-cache      neither read nor write the decoded-flow cache (TRACE.DIR/cache/)\n"
            "  --context-ids   end each line with ctx=ID, the calling-context id of the\n"
            "                  event (of the callee for a call, of the frame left for a\n"
            "                  return); 'ptdecode context TRACE.DIR ID' prints that stack.\n"
            "                  Implies --recover: the ids number the profile's flow\n"
            "                  (JSON: \"ctx\":ID, and segments carry their \"stack\")\n"
            "\n"
            "examples:\n"
            "  ptdecode flow hello.trace --method 'Hello.*'\n"
            "  ptdecode flow hello.trace --context-ids --limit 50\n"
            "  ptdecode context hello.trace 17\n");
}

static const char *kind_name(fl_kind k)
{
    switch (k) {
    case FL_SEGMENT: return "segment";
    case FL_CALL: return "call";
    case FL_RETURN: return "return";
    case FL_BYTECODE: return "bytecode";
    default: return "?";
    }
}

/* The method's name in the text output: Java style, as the reports name
 * methods ("java.lang.String.indexOf(java.lang.String, int)"; --simple
 * without the parameters), made once per method. The JSON keeps the JVM
 * name (jvm_name), descriptor and all. */
static const char *java_name(flow_printer *p, uint64_t method_id, const char *jvm_name)
{
    const char *known = g_hash_table_lookup(p->java_names, &method_id);
    if (known)
        return known;
    const rc_method *m = method_id ? rc_method_by_id(rt_program(p->t), method_id) : NULL;
    char *name;
    if (m) {
        char *cls = g_strdup(m->klass);
        for (char *c = cls; *c; c++)
            if (*c == '/')
                *c = '.';
        char *params = p->simple ? g_strdup("") : pf_readable_params(m->sig);
        name = g_strdup_printf("%s.%s%s", cls, m->name, params);
        g_free(params);
        g_free(cls);
    } else {
        name = g_strdup(jvm_name);
    }
    uint64_t *key = g_new(uint64_t, 1);
    *key = method_id;
    g_hash_table_insert(p->java_names, key, name);
    return name;
}

/* Whether --method matches the method (named in JVM style), once per method. */
static bool glob_matches(flow_printer *p, uint64_t method_id, const char *name)
{
    gpointer known = g_hash_table_lookup(p->glob_hits, &method_id);
    if (known)
        return GPOINTER_TO_INT(known) == 1;
    bool hit = pf_method_pattern_match_jvm(p->method_glob, name);
    uint64_t *key = g_new(uint64_t, 1);
    *key = method_id;
    g_hash_table_insert(p->glob_hits, key, GINT_TO_POINTER(hit ? 1 : 2));
    return hit;
}

static int on_flow(const fl_event *ev, void *vp)
{
    flow_printer *p = vp;
    if (p->summary)
        return 0;
    char name[1024] = "";
    if (ev->kind != FL_SEGMENT)
        rt_method_name(p->t, ev->method_id, name, sizeof name);
    if (ev->kind == FL_SEGMENT)
        p->depth = 0;
    int indent = p->depth;
    int64_t ctx = -1;
    if (p->ctx_tree) {
        const pf_cct *e = p->ctx_tree;
        if (ev->kind == FL_SEGMENT) {
            p->ctx_node = 0;
            for (uint32_t i = 0; i < ev->depth && p->ctx_node >= 0; i++)
                p->ctx_node = pf_cct_find(e, p->ctx_node, ev->stack[i], -1);
        } else if (ev->kind == FL_CALL && p->ctx_node >= 0) {
            p->ctx_node = pf_cct_find(e, p->ctx_node, ev->method_id, -1);
        }
        ctx = p->ctx_node;
        /* A return at the thread root leaves a frame never seen entered:
         * the context stays, as in the profile. */
        if (ev->kind == FL_RETURN && p->ctx_node > 0)
            p->ctx_node = e->nodes[p->ctx_node].parent;
    }
    if (ev->kind == FL_CALL)
        p->depth++;
    else if (ev->kind == FL_RETURN && p->depth > 0)
        p->depth--;
    if (p->method_glob && (ev->kind != FL_BYTECODE || !glob_matches(p, ev->method_id, name)))
        return 0;
    if (p->limit && p->printed >= p->limit) {
        p->stopped = true;
        return 1;
    }
    p->printed++;
    uint64_t t = ev->tsc >= p->base_tsc ? ev->tsc - p->base_tsc : 0;
    uint32_t line = 0;
    const rc_method *m = ev->method_id ? rc_method_by_id(rt_program(p->t), ev->method_id) : NULL;
    if (m && ev->kind == FL_BYTECODE && ev->bci >= 0)
        line = rc_line_of(m, (uint32_t)ev->bci);
    const char *op = ev->kind == FL_BYTECODE ? bc_name(ev->opcode) : NULL;
    if (p->json) {
        fprintf(p->out, "{\"tid\":%u,\"tsc\":%" PRIu64 ",\"kind\":\"%s\"", ev->tid, ev->tsc,
                kind_name(ev->kind));
        if (ev->kind == FL_SEGMENT) {
            fprintf(p->out, ",\"seq\":%" PRIu64, ev->seq);
            if (p->ctx_tree) {
                fprintf(p->out, ",\"ctx\":%" PRId64 ",\"stack\":[", ctx);
                for (uint32_t i = 0; i < ev->depth; i++) {
                    rt_method_name(p->t, ev->stack[i], name, sizeof name);
                    if (i)
                        fputc(',', p->out);
                    json_put_str(p->out, name);
                }
                fputc(']', p->out);
            }
            fprintf(p->out, "}\n");
            return 0;
        }
        fprintf(p->out, ",\"method\":");
        json_put_str(p->out, name);
        if (ev->bci >= 0)
            fprintf(p->out, ",\"bci\":%d", ev->bci);
        if (op)
            fprintf(p->out, ",\"op\":\"%s\"", op);
        if (line)
            fprintf(p->out, ",\"line\":%u", line);
        if (ev->flags & FL_F_COMPILED)
            fprintf(p->out, ",\"compiled\":true");
        if (ev->flags & FL_F_INLINED)
            fprintf(p->out, ",\"inlined\":true");
        if (ev->flags & FL_F_INFERRED)
            fprintf(p->out, ",\"inferred\":true");
        if (ev->flags & FL_F_EXCEPTION)
            fprintf(p->out, ",\"exception\":true");
        if (ev->flags & FL_F_CONTEXT)
            fprintf(p->out, ",\"context\":true");
        if (ev->origin == FL_RECOVERED)
            fprintf(p->out, ",\"origin\":\"recovered\"");
        else if (ev->origin == FL_GUESSED)
            fprintf(p->out, ",\"origin\":\"guessed\"");
        if (p->ctx_tree)
            fprintf(p->out, ",\"ctx\":%" PRId64, ctx);
        fprintf(p->out, "}\n");
        return 0;
    }
    const char *shown = ev->kind == FL_SEGMENT ? "" : java_name(p, ev->method_id, name);
    char ctxs[32] = "";
    if (p->ctx_tree) {
        if (ctx >= 0)
            snprintf(ctxs, sizeof ctxs, " ctx=%" PRId64, ctx);
        else
            snprintf(ctxs, sizeof ctxs, " ctx=?");
    }
    if (ev->kind == FL_SEGMENT) {
        fprintf(p->out, "%12" PRIu64 " segment %" PRIu64 "%s\n", t, ev->seq, ctxs);
        return 0;
    }
    if (indent > 40)
        indent = 40;
    fprintf(p->out, "%12" PRIu64 "%c%*s", t, ev->origin == FL_RECOVERED ? '+' : ev->origin == FL_GUESSED ? '?' : ' ',
            indent * 2, "");
    switch (ev->kind) {
    case FL_CALL:
        fprintf(p->out, "call %s%s%s%s%s%s\n", shown,
                ev->flags & FL_F_COMPILED ? " [compiled]" : "",
                ev->flags & FL_F_INLINED ? " [inlined]" : "",
                ev->flags & FL_F_INFERRED ? " [inferred]" : "",
                ev->flags & FL_F_CONTEXT ? " [already running]" : "", ctxs);
        break;
    case FL_RETURN:
        fprintf(p->out, "return %s%s%s\n", shown, ev->flags & FL_F_EXCEPTION ? " [exception]" : "",
                ctxs);
        break;
    default:
        fprintf(p->out, "%s bci %d %s", shown, ev->bci, op ? op : "?");
        if (line)
            fprintf(p->out, " line %u", line);
        fprintf(p->out, "%s\n", ctxs);
        break;
    }
    return 0;
}

static void print_stats(FILE *f, uint32_t tid, const rp_stats *s);

/* The flow of each thread in turn (profile/source.h). */
typedef struct flow_run {
    flow_printer *p;
    bool json, recover;
    bool failed;               /* a thread's stream could not be read */
    bool limited;              /* --limit stopped a thread's flow */
    rp_stats total;
} flow_run;

static int flow_event(const fl_event *ev, void *vr)
{
    return on_flow(ev, ((flow_run *)vr)->p);
}

static void flow_begin(uint32_t tid, void *vr)
{
    flow_run *r = vr;
    if (!r->json)
        fprintf(stdout, "# thread %u\n", tid);
    r->p->printed = 0;
    r->p->stopped = false;
    r->p->depth = 0;
    r->p->ctx_node = 0;
}

static void flow_end(const fc_thread *th, void *vr)
{
    flow_run *r = vr;
    FILE *f = r->json ? stderr : stdout;
    if (r->recover && th->rc >= 0 && !r->p->stopped)
        fprintf(f, "# thread %u: recovery filled %" PRIu64 " of %" PRIu64 " segment boundaries (%"
                PRIu64 " rejoined the next segment) with %" PRIu64 " events, %" PRIu64
                " bytecodes (lines marked +); %" PRIu64 " bytecodes guessed (marked ?)\n",
                th->tid, th->rv.filled, th->rv.boundaries, th->rv.rejoined, th->rv.events,
                th->rv.bytecodes, th->rv.guessed_bytecodes);
    if (th->rc < 0) {
        jerr_error("%s", th->err);
        r->failed = true;
        return;
    }
    if (r->p->stopped) {
        /* the counts of a flow cut short would depend on where decoding was */
        fprintf(f, "# thread %u: stopped after %" PRIu64 " lines (--limit)\n", th->tid,
                r->p->printed);
        r->limited = true;
        return;
    }
    print_stats(f, th->tid, &th->rp);
    rp_stats_add(&r->total, &th->rp);
}

static void print_stats(FILE *f, uint32_t tid, const rp_stats *s)
{
    fprintf(f, "# thread %u: %" PRIu64 " bytecodes, %" PRIu64 " placed (%.2f%%), %" PRIu64
            " unplaced; segments %" PRIu64 ": %" PRIu64 " unique, %" PRIu64 " chosen, %" PRIu64
            " unresolved; %" PRIu64 " choices, at most %" PRIu64 " paths at once\n",
            tid, s->bytecodes, s->placed,
            s->bytecodes ? 100.0 * (double)s->placed / (double)s->bytecodes : 100.0,
            s->unplaced, s->segments, s->segments_unique, s->segments_chosen,
            s->segments_unresolved, s->choices, s->max_hypotheses);
    const rj_stats *j = &s->jit;
    if (j->activations)
        fprintf(f, "# thread %u: compiled code: %" PRIu64 " activations (%" PRIu64 " by OSR), %"
                PRIu64 " bytecodes (%" PRIu64 " estimated), %" PRIu64 " inlined calls, %" PRIu64
                " calls inferred (%" PRIu64 " not told apart), %" PRIu64 " calls estimated; %"
                PRIu64 " scope pins, %" PRIu64 " skipped, %" PRIu64 " resyncs, %" PRIu64
                " exceptions caught, %" PRIu64 " activations unwound, %" PRIu64
                " passes of unrolled loops (%" PRIu64 " iterations no scope showed)\n",
                tid, j->activations, j->osr_entries, j->bytecodes, j->estimated_bytecodes,
                j->inlined_calls, j->calls_inferred, j->calls_unknown, j->estimated_calls, j->pins,
                j->pins_skipped, j->resyncs, j->exceptions, j->unwound, j->unrolled_passes,
                j->unrolled_iterations);
}

/* The command line of `ptdecode flow`. */
typedef struct flow_args {
    const char *dir;
    long long tid;              /* --thread; -1: every thread */
    uint64_t limit;             /* 0: no limit */
    const char *glob;           /* --method; NULL: all */
    bool json, recover, summary, context_ids, simple;
} flow_args;

/* Returns -1 to go on, else the exit status (--help, a usage error). */
static int parse_args(int argc, char **argv, flow_args *a)
{
    static const struct option opts[] = {
        { "thread", required_argument, NULL, 't' },
        { "method", required_argument, NULL, 'm' },
        { "json", no_argument, NULL, 'j' },
        { "limit", required_argument, NULL, 'n' },
        { "recover", no_argument, NULL, 'r' },
        { "summary", no_argument, NULL, 's' },
        { "context-ids", no_argument, NULL, 'c' },
        { "simple", no_argument, NULL, 'S' },
        { "jobs", required_argument, NULL, 'J' },
        { "no-cache", no_argument, NULL, 'C' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    *a = (flow_args){ .tid = -1 };
    pf_source_opts so = *pf_source_options();
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:m:jn:sh", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (!ptd_parse_tid("flow", optarg, &a->tid))
                return 2;
            break;
        case 'n':
            if (!ptd_parse_limit("flow", optarg, &a->limit))
                return 2;
            break;
        case 'm':
            a->glob = optarg;
            break;
        case 'j':
            a->json = true;
            break;
        case 'r':
            a->recover = true;
            break;
        case 'c':
            a->context_ids = true;
            a->recover = true;
            break;
        case 's':
            a->summary = true;
            break;
        case 'S':
            a->simple = true;
            break;
        case 'J':
            if (!ptd_parse_jobs(optarg, &so.jobs))
                return 2;
            break;
        case 'C':
            so.no_cache = true;
            break;
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
    pf_source_set_options(&so);
    a->dir = argv[optind];
    return -1;
}

/* The threads of the trace; none: an error printed (why the per-CPU
 * streams gave none, when they are what the trace has). */
static size_t list_threads(rt_trace *t, const char *dir)
{
    const uint32_t *tids;
    size_t ncpu;
    size_t n = rt_threads(t, &tids, &ncpu);
    if (!n) {
        /* No threads from per-CPU streams: the split failed (its reason),
         * or it worked and found no thread's trace. */
        char serr[768];
        if (ncpu && !dc_thread_stream_dir(dir, serr, sizeof serr))
            jerr_error("%s/pt: splitting the per-CPU streams into threads failed: %s", dir,
                       serr);
        else
            jerr_error("%s/pt: no per-thread PT streams (tid-<TID>.pt)%s", dir,
                       ncpu ? "; the per-CPU streams hold no thread's trace" : "");
    }
    return n;
}

/* Prints the flow of the chosen threads of the opened trace, then the
 * counts of all. Returns the exit status. */
static int print_flow(const flow_args *a, rt_trace *t, pf_cct *ctx_tree)
{
    const char *dir = a->dir;
    char err[1024];
    int status = 0;
    const char *const *warn;
    size_t nw = rt_warnings(t, &warn);
    for (size_t i = 0; i < nw; i++)
        jerr_warn_grouped(warn[i]);
    size_t n = list_threads(t, dir);
    if (!n)
        status = 1;
    flow_printer p = { .t = t, .out = stdout, .json = a->json, .summary = a->summary,
                       .limit = a->limit, .base_tsc = rt_model(t)->start_tsc,
                       .method_glob = a->glob ? pf_method_pattern_new(a->glob) : NULL,
                       .glob_hits = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                                          NULL),
                       .java_names = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                                           g_free),
                       .simple = a->simple,
                       .ctx_tree = ctx_tree };
    flow_run run = { .p = &p, .json = a->json, .recover = a->recover };
    pf_flow_request rq = { .sink = flow_event, .ctx = &run, .decoded_only = !a->recover,
                           .tid = a->tid, .begin = flow_begin, .end = flow_end,
                           .stop_thread_only = true, .keep_going = true, .trace = t };
    if (n && pf_flow_read(dir, &rq, NULL, err, sizeof err) < 0) {
        if (!run.failed)    /* else each thread said why */
            jerr_error("%s", err);
        status = 1;
    }
    if (run.failed)
        status = 1;
    rp_stats total = run.total;
    if (n > 1 && a->tid < 0 && !run.limited)
        fprintf(a->json ? stderr : stdout,
                "# all threads: %" PRIu64 " bytecodes, %" PRIu64 " placed (%.2f%%); segments %"
                PRIu64 ": %" PRIu64 " unique, %" PRIu64 " chosen, %" PRIu64 " unresolved\n",
                total.bytecodes, total.placed,
                total.bytecodes ? 100.0 * (double)total.placed / (double)total.bytecodes : 100.0,
                total.segments, total.segments_unique, total.segments_chosen,
                total.segments_unresolved);
    if (p.method_glob && !pf_method_pattern_matched(p.method_glob) && status == 0)
        jerr_warn("flow: no method that ran matches --method '%s' (%s)", a->glob,
                  PF_PATTERN_STYLES);
    pf_method_pattern_free(p.method_glob);
    g_hash_table_destroy(p.glob_hits);
    g_hash_table_destroy(p.java_names);
    return status;
}

int cmd_flow(int argc, char **argv)
{
    flow_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    const char *dir = a.dir;
    char err[1024];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0)
        return 1;
    bool cut = dc_check_cut(&chk);
    char rec[512];
    dc_check_recording(&chk, rec, sizeof rec);
    dc_check_free(&chk);
    rt_trace *t = rt_open(dir, err, sizeof err);
    if (!t) {
        jerr_error("%s", err);
        return 1;
    }
    if (cut)
        fprintf(a.json ? stderr : stdout, "# recording %s\n", rec);
    /* The ids are those of the profile of the whole flow (every thread,
     * the recovered events included), built in a pass of its own. */
    pf_cct *ctx_tree = NULL;
    if (a.context_ids && !(ctx_tree = ptd_context_tree(dir))) {
        rt_close(t);
        return 1;
    }
    int status = print_flow(&a, t, ctx_tree);
    pf_cct_free(ctx_tree);
    rt_close(t);
    return status;
}
