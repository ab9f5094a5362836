/* ptdecode compare: a traced run against the reference (profile/compare.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "common/jerr.h"
#include "profile/compare.h"
#include "ptdecode/commands.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode compare TRACED.DIR REFERENCE.DIR [--class NAME]... [--all]\n"
            "                        [--worst N] [--json]\n"
            "\n"
            "How far a traced run agrees with the ground truth: the agent's reference mode\n"
            "on the same deterministic program (every method entry and exit; with -Xint\n"
            "and single steps, every bytecode). Record the traced run as users run, with\n"
            "the JIT on; a deterministic program runs the same bytecodes either way.\n"
            "\n"
            "Compared, as the sum of the smaller count over the sum of the larger:\n"
            "  calls per context   a context is the path of the selected methods from the\n"
            "                      thread's root (JDK frames between them left out), over\n"
            "                      all threads and per thread (matched by name)\n"
            "  calls per method\n"
            "  bytecodes per bci   and the aligned sequence of the busiest thread, when the\n"
            "                      reference has bytecodes\n"
            "and the share of the selected bytecodes that ran compiled. Methods are matched\n"
            "by name, hidden classes' addresses and lambda numbers left out.\n"
            "\n"
            "  --class NAME   select class NAME and its nested classes (pkg.Cls or pkg/Cls;\n"
            "                 a package prefix with a trailing / or .); repeatable. Default:\n"
            "                 every class outside the JDK (the program's own)\n"
            "  --all          select every method, the JDK's too\n"
            "  --worst N      print the N keys that differ most per measure (default 10)\n"
            "  --json         one JSON object instead of text\n"
            "\n"
            "example:\n"
            "  ptrec --emulate -o t.trace -- java -cp samples/classes Branchy 60\n"
            "  java -agentpath:build/jvm-agent/libjpt.so=mode=reference,out=r.trace \\\n"
            "       -Xint -cp samples/classes Branchy 60\n"
            "  ptdecode compare t.trace r.trace --class Branchy\n");
}

enum { OPT_CLASS = 256, OPT_ALL, OPT_WORST, OPT_JSON, OPT_HELP };

int cmd_compare(int argc, char **argv)
{
    static const struct option opts[] = {
        { "class", required_argument, NULL, OPT_CLASS },
        { "all", no_argument, NULL, OPT_ALL },
        { "worst", required_argument, NULL, OPT_WORST },
        { "json", no_argument, NULL, OPT_JSON },
        { "help", no_argument, NULL, OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    GPtrArray *classes = g_ptr_array_new_with_free_func(g_free);
    bool all = false, json = false;
    int worst = 10, rc = 0;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_CLASS: {
            char *k = g_strdup(optarg);
            if (!*k) {
                jerr_error("--class: expected a class name");
                g_free(k);
                g_ptr_array_free(classes, TRUE);
                return 2;
            }
            g_ptr_array_add(classes, k);
            break;
        }
        case OPT_ALL: all = true; break;
        case OPT_JSON: json = true; break;
        case OPT_WORST: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 0 || v > 100000) {
                jerr_error("--worst: expected a count from 0 to 100000, got '%s'", optarg);
                g_ptr_array_free(classes, TRUE);
                return 2;
            }
            worst = (int)v;
            break;
        }
        case 'h':
        case OPT_HELP:
            usage(stdout);
            g_ptr_array_free(classes, TRUE);
            return 0;
        default:
            jerr_error("unknown or incomplete option '%s' (try 'ptdecode compare --help')",
                       argv[optind - 1]);
            g_ptr_array_free(classes, TRUE);
            return 2;
        }
    }
    if (argc - optind != 2) {
        jerr_error("compare: expected TRACED.DIR and REFERENCE.DIR (try 'ptdecode compare "
                   "--help')");
        g_ptr_array_free(classes, TRUE);
        return 2;
    }
    const char *dir[2] = { argv[optind], argv[optind + 1] };
    for (int run = 0; run < 2; run++) {
        dc_check chk;
        if (ptd_check(dir[run], &chk) < 0) {
            g_ptr_array_free(classes, TRUE);
            return 1;
        }
        dc_check_free(&chk);
    }
    g_ptr_array_add(classes, NULL);
    pf_compare *cmp = pf_compare_new((const char *const *)classes->pdata, all);
    /* the reference first: whether it has bytecodes decides what the
     * traced run keeps */
    for (int run = 1; run >= 0; run--) {
        char err[1024] = "";
        int r = pf_compare_read(cmp, run, dir[run], err, sizeof err);
        if (r < 0) {
            jerr_error("%s", err[0] ? err : "out of memory");
            pf_compare_free(cmp);
            g_ptr_array_free(classes, TRUE);
            return 1;
        }
        if (r > 0) {
            jerr_warn("%s: the flow broke off part way (%s): what came before is compared",
                      dir[run], err);
            rc = 1;
        }
    }
    pf_compare_result res;
    pf_compare_result_get(cmp, &res);
    if (res.reference_is_traced)
        jerr_warn("%s is a traced run, not a reference-mode trace: this compares two traces",
                  dir[1]);
    if (res.traced_is_reference)
        jerr_warn("%s is a reference-mode trace: this compares two references", dir[0]);
    if (!res.methods.total[0] && !res.methods.total[1])
        jerr_warn("no calls of the selected methods in either run%s",
                  classes->len > 1 ? " (check --class)" : "");
    pf_compare_print(cmp, stdout, json, worst);
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        jerr_error("standard output: cannot write: %s", strerror(errno ? errno : EIO));
        rc = 1;
    }
    pf_compare_free(cmp);
    g_ptr_array_free(classes, TRUE);
    return rc;
}
