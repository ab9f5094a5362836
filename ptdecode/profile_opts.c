/* The options the profile commands (hot, export, diff, context, summary)
 * share, and their parsing. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "common/jerr.h"
#include "profile/source.h"
#include "ptdecode/commands.h"
#include "ptdecode/profile_opts.h"

enum {
    OPT_INCLUDE = 1000, OPT_EXCLUDE, OPT_CALL_SITES, OPT_THREADS, OPT_BY, OPT_JSON,
    OPT_FORMAT, OPT_TITLE, OPT_PER_THREAD, OPT_PHI, OPT_EPSILON, OPT_TSC_HZ, OPT_LIST,
    OPT_CLASSES, OPT_SIMPLE, OPT_THREAD, OPT_FROM, OPT_TO, OPT_HELP, OPT_JOBS, OPT_NO_CACHE,
};

/* "1.5s", "200ms", "30us", "1000ns", "25%" -> value and kind ('t': ns,
 * '%'); false when it is none of these. */
static bool parse_when(const char *s, double *value, char *kind)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v))
        return false;
    static const struct { const char *unit; double ns; } units[] = {
        { "s", 1e9 }, { "ms", 1e6 }, { "us", 1e3 }, { "ns", 1 },
    };
    if (!strcmp(end, "%")) {
        if (v > 100)
            return false;
        *value = v;
        *kind = '%';
        return true;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!strcmp(end, units[i].unit)) {
            *value = v * units[i].ns;
            *kind = 't';
            return true;
        }
    }
    return false;
}

void prof_opts_free(prof_opts *o)
{
    pf_focus_free(o->focus);
    if (o->thread_sel)
        g_ptr_array_free(o->thread_sel, TRUE);
    if (o->formats)
        g_ptr_array_free(o->formats, TRUE);
    if (o->outputs)
        g_ptr_array_free(o->outputs, TRUE);
    o->focus = NULL;
    o->thread_sel = NULL;
    o->formats = o->outputs = NULL;
}

static const char *origin_names[FL_ORIGIN_COUNT] = { "decoded", "recovered", "guessed" };

/* "recovered,guessed" -> set include[origin] = value for each; false (and
 * nothing set) when a word is not an origin: the value is a pattern. */
static bool parse_origins(const char *list, bool value, bool *include)
{
    char **parts = g_strsplit(list, ",", -1);
    bool all = parts[0] != NULL;
    for (char **p = parts; *p && all; p++) {
        bool known = false;
        for (int o = 0; o < FL_ORIGIN_COUNT; o++)
            known |= !strcmp(*p, origin_names[o]);
        all = known;
    }
    for (char **p = parts; *p && all; p++)
        for (int o = 0; o < FL_ORIGIN_COUNT; o++)
            if (!strcmp(*p, origin_names[o]))
                include[o] = value;
    g_strfreev(parts);
    return all;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return false;
    *out = v;
    return true;
}

static const struct option long_opts[] = {
    { "include", required_argument, NULL, OPT_INCLUDE },
    { "exclude", required_argument, NULL, OPT_EXCLUDE },
    { "call-sites", no_argument, NULL, OPT_CALL_SITES },
    { "threads", required_argument, NULL, OPT_THREADS },
    { "by", required_argument, NULL, OPT_BY },
    { "json", no_argument, NULL, OPT_JSON },
    { "format", required_argument, NULL, OPT_FORMAT },
    { "output", required_argument, NULL, 'o' },
    { "title", required_argument, NULL, OPT_TITLE },
    { "per-thread", no_argument, NULL, OPT_PER_THREAD },
    { "phi", required_argument, NULL, OPT_PHI },
    { "epsilon", required_argument, NULL, OPT_EPSILON },
    { "tsc-hz", required_argument, NULL, OPT_TSC_HZ },
    { "list", no_argument, NULL, OPT_LIST },
    { "classes", required_argument, NULL, OPT_CLASSES },
    { "simple", no_argument, NULL, OPT_SIMPLE },
    { "thread", required_argument, NULL, OPT_THREAD },
    { "from", required_argument, NULL, OPT_FROM },
    { "to", required_argument, NULL, OPT_TO },
    { "jobs", required_argument, NULL, OPT_JOBS },
    { "no-cache", no_argument, NULL, OPT_NO_CACHE },
    { "help", no_argument, NULL, OPT_HELP },
    { NULL, 0, NULL, 0 },
};

/* Returns 0 to go on, 1 when --help was printed, 2 on a usage error. */
int prof_parse_opts(int argc, char **argv, prof_opts *o, void (*usage)(FILE *))
{
    memset(o, 0, sizeof *o);
    o->cct = pf_cct_default_opts();
    /* Recovered and guessed events are the profile's by default: they are
     * marked, and --exclude drops them. */
    /* Sequential by default: reading the flow is serial, and the pool only
     * pays off when tree updates dominate (large trees, idle cores). */
    o->threads = 1;
    o->by = PF_BY_BYTECODES;
    o->phi = 1e-3;
    o->epsilon = 1e-4;
    o->top = 20;
    o->from_kind = o->to_kind = 'n';
    o->formats = g_ptr_array_new();
    o->outputs = g_ptr_array_new();
    pf_source_opts so = *pf_source_options();
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "n:o:h", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_INCLUDE:
        case OPT_EXCLUDE:
            if (!*optarg) {
                jerr_error("%s: expected origins or a pattern", argv[optind - 1]);
                return 2;
            }
            if (!parse_origins(optarg, c == OPT_INCLUDE, o->cct.include)) {
                if (!o->focus)
                    o->focus = pf_focus_new();
                pf_focus_add(o->focus, optarg, c == OPT_INCLUDE);
            }
            break;
        case OPT_FROM:
        case OPT_TO:
            if (!parse_when(optarg, c == OPT_FROM ? &o->from : &o->to,
                            c == OPT_FROM ? &o->from_kind : &o->to_kind)) {
                jerr_error("%s: expected a time since the start (1.5s, 200ms, 30us, 1000ns) or "
                           "a share of the run (25%%), got '%s'", c == OPT_FROM ? "--from" : "--to",
                           optarg);
                return 2;
            }
            break;
        case OPT_THREAD:
            if (!o->thread_sel)
                o->thread_sel = g_ptr_array_new_with_free_func(g_free);
            g_ptr_array_add(o->thread_sel, g_strdup(optarg));
            break;
        case OPT_CALL_SITES: o->cct.call_sites = true; break;
        case OPT_THREADS: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 256) {
                jerr_error("--threads: expected 1..256, got '%s'", optarg);
                return 2;
            }
            o->threads = (unsigned)v;
            break;
        }
        case OPT_BY: {
            int m = pf_metric_parse(optarg);
            if (m < 0) {
                jerr_error("--by: expected bytecodes, time or calls, got '%s'", optarg);
                return 2;
            }
            o->by = (pf_metric)m;
            o->by_set = true;
            break;
        }
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1) {
                jerr_error("-n: expected a positive count, got '%s'", optarg);
                return 2;
            }
            o->top = v;
            o->top_set = true;
            break;
        }
        case OPT_JSON: o->json = true; break;
        case OPT_FORMAT: g_ptr_array_add(o->formats, optarg); break;
        case 'o':
            o->output = optarg;
            g_ptr_array_add(o->outputs, optarg);
            break;
        case OPT_JOBS:
            if (!ptd_parse_jobs(optarg, &so.jobs))
                return 2;
            break;
        case OPT_NO_CACHE: so.no_cache = true; break;
        case OPT_TITLE: o->title = optarg; break;
        case OPT_PER_THREAD: o->per_thread = true; break;
        case OPT_LIST: o->list = true; break;
        case OPT_CLASSES: o->classes = optarg; break;
        case OPT_SIMPLE: o->simple = true; break;
        case OPT_PHI:
        case OPT_EPSILON:
        case OPT_TSC_HZ: {
            double v;
            if (!parse_double(optarg, &v) || !(v > 0)) {
                jerr_error("%s: expected a positive number, got '%s'",
                           c == OPT_PHI ? "--phi" : c == OPT_EPSILON ? "--epsilon" : "--tsc-hz",
                           optarg);
                return 2;
            }
            *(c == OPT_PHI ? &o->phi : c == OPT_EPSILON ? &o->epsilon : &o->tsc_hz) = v;
            break;
        }
        case 'h':
        case OPT_HELP:
            usage(stdout);
            return 1;
        default:
            jerr_error("unknown or incomplete option '%s' (try --help)", argv[optind - 1]);
            return 2;
        }
    }
    pf_source_set_options(&so);
    return 0;
}

const char *const prof_shared_options =
    "  --include ORIGINS  count events of these origins (comma-separated: decoded,\n"
    "                     recovered, guessed; all are counted by default)\n"
    "  --exclude ORIGINS  do not count events of these origins (the stack still follows them)\n"
    "  --include PATTERN  only the stacks with a frame of a matching class or method\n"
    "                     ('java.util.*', 'Branchy', 'Branchy.fib*'; either naming style)\n"
    "  --exclude PATTERN  without the stacks with such a frame (both repeat)\n"
    "  --thread NAME|TID  only these threads (a tid, or a glob over names; repeats)\n"
    "  --from T, --to T   count only what ran from / to T: a time since the first event\n"
    "                     (1.5s, 200ms, 30us, 1000ns) or a share of the run (25%)\n"
    "  --call-sites       distinguish calling contexts by the caller's bci too\n"
    "  --threads N        build the tree with N worker threads (ParCCT; default 1:\n"
    "                     sequential; the result is the same)\n"
    "  --jobs N           decode and reconstruct with N threads (default: the number of\n"
    "                     processors; the flow is the same)\n"
    "  --no-cache         neither read nor write the decoded-flow cache (TRACE.DIR/cache/:\n"
    "                     the first command decodes, the next ones read it)\n"
    "  --simple           method names without their parameter types\n"
    "  --tsc-hz HZ        TSC ticks per second for times (default: info.json's\n"
    "                     time.tsc_hz; without it, times are in TSC ticks)\n";
