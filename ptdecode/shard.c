/* `ptdecode shard` and `ptdecode merge`: one piece of a trace decoded into a
 * partial result, and partial results merged into the profile of the whole
 * run (profile/shard.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "common/jerr.h"
#include "common/json.h"
#include "profile/export.h"
#include "profile/shard.h"
#include "ptdecode/commands.h"
#include "ptdecode/hotprint.h"
#include "ptdecode/outfile.h"

enum { OPT_OF = 1000, OPT_INDEX, OPT_PLAN, OPT_WHOLE, OPT_SPLIT, OPT_CALL_SITES, OPT_INCLUDE,
       OPT_EXCLUDE, OPT_JOBS, OPT_FORMAT, OPT_BY, OPT_TITLE, OPT_JSON, OPT_HELP };

static bool parse_uint(const char *s, unsigned long max, unsigned long *v)
{
    char *end;
    if (!*s || *s == '-')
        return false;
    errno = 0;
    unsigned long x = strtoul(s, &end, 10);
    if (errno || *end || x > max)
        return false;
    *v = x;
    return true;
}

/* "recovered,guessed": include[origin] = value for each; false when a word
 * is not an origin. */
static bool parse_origins(const char *list, bool value, bool *include)
{
    static const char *names[FL_ORIGIN_COUNT] = { "decoded", "recovered", "guessed" };
    char **parts = g_strsplit(list, ",", -1);
    bool ok = parts[0] != NULL;
    for (char **p = parts; *p && ok; p++) {
        int o = -1;
        for (int i = 0; i < FL_ORIGIN_COUNT; i++)
            if (!strcmp(*p, names[i]))
                o = i;
        if (o < 0)
            ok = false;
        else
            include[o] = value;
    }
    g_strfreev(parts);
    return ok;
}

/* ---- shard ----------------------------------------------------------------- */

static void shard_usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode shard TRACE.DIR --of N --index K -o PART [OPTIONS]\n"
            "       ptdecode shard TRACE.DIR --of N --plan [--json]\n"
            "\n"
            "Decodes the K-th of N pieces of the trace (0 <= K < N) into a partial result\n"
            "that 'ptdecode merge' combines with the others: run the N shards anywhere\n"
            "(a Slurm job array: scale/README.md), then merge their parts. Pieces are\n"
            "whole threads balanced by bytes of PT; with --split, also PSB-aligned ranges\n"
            "of the larger threads' streams (docs/PROFILES.md, \"Sharded decoding\").\n"
            "\n"
            "  --of N             the number of shards (1..%u)\n"
            "  --index K          which one\n"
            "  -o, --output PART  the partial result file\n"
            "  --plan             print the plan instead: shard, thread, byte range, bytes\n"
            "  --json             the plan as JSON\n"
            "  --whole-threads    never split a thread's stream (the default): exactly the\n"
            "                     single-process profile, balanced as far as the threads allow\n"
            "  --split            split the larger threads' streams too, to balance a trace\n"
            "                     whose PT is mostly one thread's: calls per method are kept,\n"
            "                     but the calling contexts of a piece that starts inside a\n"
            "                     stream are approximate (docs/PROFILES.md)\n"
            "  --call-sites       distinguish calling contexts by the caller's bci too\n"
            "  --include ORIGINS, --exclude ORIGINS\n"
            "                     count events of these origins, or not (decoded, recovered,\n"
            "                     guessed; all by default); every shard must use the same\n"
            "  --jobs N           decoder threads for each piece (default 1)\n"
            "\n"
            "example:\n"
            "  for k in 0 1 2 3; do ptdecode shard app.trace --of 4 --index $k -o part-$k; done\n"
            "  ptdecode merge part-* -o app.cct.json\n", PF_SHARD_MAX);
}

static const struct option shard_opts[] = {
    { "of", required_argument, NULL, OPT_OF },
    { "index", required_argument, NULL, OPT_INDEX },
    { "output", required_argument, NULL, 'o' },
    { "plan", no_argument, NULL, OPT_PLAN },
    { "json", no_argument, NULL, OPT_JSON },
    { "whole-threads", no_argument, NULL, OPT_WHOLE },
    { "split", no_argument, NULL, OPT_SPLIT },
    { "call-sites", no_argument, NULL, OPT_CALL_SITES },
    { "include", required_argument, NULL, OPT_INCLUDE },
    { "exclude", required_argument, NULL, OPT_EXCLUDE },
    { "jobs", required_argument, NULL, OPT_JOBS },
    { "help", no_argument, NULL, OPT_HELP },
    { NULL, 0, NULL, 0 },
};

static void print_plan(const pf_shard_plan *plan, bool json)
{
    if (json) {
        json_w j;
        json_init(&j, stdout, true);
        json_obj(&j);
        json_ku64(&j, "shards", plan->shards);
        json_kbool(&j, "whole_threads", plan->whole_threads);
        json_key(&j, "pieces");
        json_arr(&j);
        for (size_t i = 0; i < plan->npieces; i++) {
            const pf_shard_piece *p = &plan->pieces[i];
            json_obj(&j);
            json_ku64(&j, "shard", p->shard);
            json_ku64(&j, "tid", p->tid);
            json_ku64(&j, "from", p->from);
            json_ku64(&j, "to", p->to);
            json_end(&j);
        }
        json_end(&j);
        json_key(&j, "bytes");
        json_arr(&j);
        for (uint32_t k = 0; k < plan->shards; k++)
            json_u64(&j, pf_shard_plan_bytes(plan, k));
        json_end(&j);
        json_end(&j);
        json_finish(&j);
        return;
    }
    printf("%6s %10s %14s %14s %14s\n", "shard", "thread", "from", "to", "bytes");
    for (size_t i = 0; i < plan->npieces; i++) {
        const pf_shard_piece *p = &plan->pieces[i];
        printf("%6u %10u %14" PRIu64 " %14" PRIu64 " %14" PRIu64 "\n", p->shard, p->tid, p->from,
               p->to, p->to - p->from);
    }
    uint64_t max = 0, total = 0;
    for (uint32_t k = 0; k < plan->shards; k++) {
        uint64_t b = pf_shard_plan_bytes(plan, k);
        total += b;
        if (b > max)
            max = b;
    }
    printf("(%u shards, %zu pieces, %" PRIu64 " bytes of PT; the largest shard %.3f of the "
           "mean)\n", plan->shards, plan->npieces, total,
           total ? (double)max * plan->shards / (double)total : 0.0);
}

int cmd_shard(int argc, char **argv)
{
    unsigned long of = 0, index = ULONG_MAX, jobs = 1;
    const char *output = NULL;
    bool plan_only = false, json = false, whole = true;
    pf_cct_opts opts = pf_cct_default_opts();
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "o:h", shard_opts, NULL)) != -1) {
        switch (c) {
        case OPT_OF:
            if (!parse_uint(optarg, PF_SHARD_MAX, &of) || of == 0) {
                jerr_error("--of: expected a shard count 1..%u, got '%s'", PF_SHARD_MAX, optarg);
                return 2;
            }
            break;
        case OPT_INDEX:
            if (!parse_uint(optarg, PF_SHARD_MAX, &index)) {
                jerr_error("--index: expected a shard index 0..%u, got '%s'", PF_SHARD_MAX - 1,
                           optarg);
                return 2;
            }
            break;
        case OPT_JOBS:
            if (!parse_uint(optarg, 256, &jobs) || jobs == 0) {
                jerr_error("--jobs: expected 1..256, got '%s'", optarg);
                return 2;
            }
            break;
        case 'o': output = optarg; break;
        case OPT_PLAN: plan_only = true; break;
        case OPT_JSON: json = true; break;
        case OPT_WHOLE: whole = true; break;
        case OPT_SPLIT: whole = false; break;
        case OPT_CALL_SITES: opts.call_sites = true; break;
        case OPT_INCLUDE:
        case OPT_EXCLUDE:
            if (!parse_origins(optarg, c == OPT_INCLUDE, opts.include)) {
                jerr_error("%s: expected origins (decoded, recovered, guessed), got '%s'",
                           c == OPT_INCLUDE ? "--include" : "--exclude", optarg);
                return 2;
            }
            break;
        case 'h':
        case OPT_HELP:
            shard_usage(stdout);
            return 0;
        default:
            jerr_error("unknown or incomplete option '%s' (try 'ptdecode shard --help')",
                       argv[optind - 1]);
            return 2;
        }
    }
    if (optind + 1 != argc) {
        jerr_error("shard: expected one TRACE.DIR (try 'ptdecode shard --help')");
        return 2;
    }
    if (!of) {
        jerr_error("shard: --of N is required");
        return 2;
    }
    if (!plan_only && (index == ULONG_MAX || !output)) {
        jerr_error("shard: %s is required", index == ULONG_MAX ? "--index K" : "-o PART");
        return 2;
    }
    if (!plan_only && index >= of) {
        jerr_error("--index: %lu is not below --of %lu (shards are numbered from 0)", index, of);
        return 2;
    }
    const char *dir = argv[optind];
    dc_check chk;
    if (ptd_check(dir, &chk) < 0)
        return 1;
    dc_check_free(&chk);
    pf_shard_plan plan;
    char err[1024];
    if (pf_shard_plan_make(dir, (uint32_t)of, whole, &plan, err, sizeof err) < 0) {
        jerr_error("%s", err);
        return 1;
    }
    if (plan_only) {
        print_plan(&plan, json);
        pf_shard_plan_free(&plan);
        return 0;
    }
    pf_part *part = pf_shard_run(dir, &plan, (uint32_t)index, &opts, (unsigned)jobs, dir, err,
                                 sizeof err);
    pf_shard_plan_free(&plan);
    if (!part) {
        jerr_error("%s", err);
        return 1;
    }
    ptd_out of_;
    int rc = 1;
    if (ptd_out_open(&of_, output) == 0) {
        int w = pf_part_write(part, of_.f);
        if (ptd_out_close(&of_, w == 0) == 0 && w == 0)
            rc = 0;
    }
    pf_part_free(part);
    return rc;
}

/* ---- merge ----------------------------------------------------------------- */

static void merge_usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode merge PART... -o OUT [--format cct-json|part|hot|folded] [OPTIONS]\n"
            "\n"
            "Merges the partial results of 'ptdecode shard' (any number, in any order and\n"
            "grouping) into the calling context tree of the whole run, as 'ptdecode export\n"
            "--format cct-json' writes it; or, with --format part, into one partial result\n"
            "that merges on with the rest. A line on standard error tells how the pieces\n"
            "joined inside threads. Parts of another trace, of another plan (--of,\n"
            "--split) or options, a shard given twice and, but for --format part, a\n"
            "shard missing are errors that name the file.\n"
            "\n"
            "  -o, --output OUT   where the result goes ('-': standard output)\n"
            "  --format FMT       cct-json (default), part, hot (the hottest methods, as\n"
            "                     'ptdecode hot' prints them), folded (stacks, as\n"
            "                     'ptdecode export --format folded')\n"
            "  -n N, --by METRIC, --json\n"
            "                     hot: how many methods, ranked by bytecodes (default), time\n"
            "                     or calls, as a table or JSON; folded: the value\n"
            "  --title TEXT       cct-json: the title (default: the trace, as given to shard)\n"
            "\n"
            "example:\n"
            "  ptdecode merge part-0 part-1 -o left.part --format part\n"
            "  ptdecode merge left.part part-2 part-3 -o app.cct.json\n"
            "  ptdecode merge part-* -o - --format hot -n 10\n");
}

static const struct option merge_opts[] = {
    { "output", required_argument, NULL, 'o' },
    { "format", required_argument, NULL, OPT_FORMAT },
    { "by", required_argument, NULL, OPT_BY },
    { "title", required_argument, NULL, OPT_TITLE },
    { "json", no_argument, NULL, OPT_JSON },
    { "help", no_argument, NULL, OPT_HELP },
    { NULL, 0, NULL, 0 },
};

/* One line on how the pieces joined: what the merged tree may owe to
 * pieces that started inside a thread. */
static void merge_report(const pf_part *p)
{
    const pf_part_stats *s = pf_part_get_stats(p);
    uint64_t calls = s->calls[0] + s->calls[1] + s->calls[2];
    fprintf(stderr, "%s: merged %u of %u shards: %" PRIu64 " MB of PT, %" PRIu64 " calls; %"
            PRIu64 " joins inside threads: %" PRIu64 " frames found after them, %" PRIu64
            " not the method before, %" PRIu64 " realigned; %" PRIu64 " joins after which a "
            "choice between call targets took %" PRIu64 " classes to have no objects that the "
            "flow before had shown%s%s\n",
            jerr_prog(), pf_part_shard_count(p), pf_part_shards(p), s->pt_bytes >> 20, calls,
            s->joins, s->found_checked, s->found_differ, s->realigned, s->assumed_joins,
            s->assumed_wrong,
            s->time_dips ? "; time ran backwards across some joins" : "",
            s->joins ? " (near joins the profile can differ from a single decode's: "
                       "docs/PROFILES.md, \"Sharded decoding\")" : "");
}

int cmd_merge(int argc, char **argv)
{
    const char *output = NULL, *format = "cct-json", *title = NULL;
    pf_metric by = PF_BY_BYTECODES;
    bool json = false;
    unsigned long top = 20;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "o:n:h", merge_opts, NULL)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case OPT_FORMAT: format = optarg; break;
        case OPT_TITLE: title = optarg; break;
        case OPT_JSON: json = true; break;
        case 'n':
            if (!parse_uint(optarg, 1000000000, &top) || top == 0) {
                jerr_error("-n: expected a positive count, got '%s'", optarg);
                return 2;
            }
            break;
        case OPT_BY: {
            int m = pf_metric_parse(optarg);
            if (m < 0) {
                jerr_error("--by: expected bytecodes, time or calls, got '%s'", optarg);
                return 2;
            }
            by = (pf_metric)m;
            break;
        }
        case 'h':
        case OPT_HELP:
            merge_usage(stdout);
            return 0;
        default:
            jerr_error("unknown or incomplete option '%s' (try 'ptdecode merge --help')",
                       argv[optind - 1]);
            return 2;
        }
    }
    enum { F_CCT_JSON, F_PART, F_HOT, F_FOLDED } fmt;
    if (!strcmp(format, "cct-json")) {
        fmt = F_CCT_JSON;
    } else if (!strcmp(format, "part")) {
        fmt = F_PART;
    } else if (!strcmp(format, "hot")) {
        fmt = F_HOT;
    } else if (!strcmp(format, "folded")) {
        fmt = F_FOLDED;
    } else {
        jerr_error("merge: --format must be cct-json, part, hot or folded, not %s", format);
        return 2;
    }
    if (optind >= argc) {
        jerr_error("merge: expected one or more PART files (try 'ptdecode merge --help')");
        return 2;
    }
    if (!output) {
        jerr_error("merge: -o OUT is required ('-' for standard output)");
        return 2;
    }
    char err[1024];
    pf_part *all = NULL;
    const char *first = NULL;
    for (int i = optind; i < argc; i++) {
        pf_part *p = pf_part_read(argv[i], err, sizeof err);
        if (!p || (all && pf_part_merge(all, p, first, argv[i], err, sizeof err) < 0)) {
            jerr_error("%s", err);
            pf_part_free(p);
            pf_part_free(all);
            return 1;
        }
        if (all) {
            pf_part_free(p);
        } else {
            all = p;
            first = argv[i];
        }
    }
    pf_cct *t = NULL;
    if (fmt != F_PART && !(t = pf_part_cct(all, err, sizeof err))) {
        jerr_error("%s", err);
        pf_part_free(all);
        return 1;
    }
    merge_report(all);
    ptd_out out;
    int rc = 1;
    if (ptd_out_open(&out, output) == 0) {
        int w;
        const pf_names *names = pf_part_names(all);
        switch (fmt) {
        case F_PART:
            w = pf_part_write(all, out.f);
            break;
        case F_CCT_JSON:
            w = pf_export_cct_json_hz(out.f, t, names, title ? title : pf_part_title(all),
                                      pf_part_timebase(all)->hz);
            break;
        case F_HOT:
            ptd_print_hot(out.f, t, names, pf_part_timebase(all), by, top, json);
            w = 0;
            break;
        default:
            w = pf_export_folded(out.f, t, names, by, false);
            break;
        }
        if (ptd_out_close(&out, w == 0) == 0 && w == 0)
            rc = 0;
    }
    pf_cct_free(t);
    pf_part_free(all);
    return rc;
}
