/* ptdecode: the decoding side of jpt. Each subcommand is one view of a
 * trace directory. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <glib.h>

#include "common/jerr.h"
#include "ptdecode/commands.h"

#ifndef JPT_VERSION
#define JPT_VERSION "unknown"
#endif

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    { "info", cmd_info, "validate and summarize a trace's JVM metadata" },
    { "dump", cmd_dump, "print the JVM metadata records, one line each" },
    { "events", cmd_events, "decode the PT streams into per-thread events" },
    { "hot", cmd_hot, "the hottest methods by bytecodes, time or calls" },
    { "export", cmd_export, "write a profile: flamegraph, cct-json, folded, chrome-trace, speedscope, pprof, hcct-json, ringchart, lcov" },
    { "diff", cmd_diff, "how one run's profile differs from another's, per method and context" },
    { "context", cmd_context, "decode a calling-context id to its stack" },
    { "flow", cmd_flow, "reconstruct each thread's calls, returns and bytecodes (method, bci)" },
    { "summary", cmd_summary, "threads, shares decoded/recovered/guessed, losses, hot methods" },
    { "stats", cmd_stats, "data missing, captured, decoded, recovered; accuracy against eval/" },
    { "compare", cmd_compare, "agreement of a traced run with the reference: calls, bytecodes" },
    { "shard", cmd_shard, "decode one of N pieces of a trace into a partial result" },
    { "merge", cmd_merge, "merge partial results into the profile of the whole run" },
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptdecode COMMAND TRACE.DIR [OPTIONS]\n"
            "       ptdecode TRACE.DIR           (the summary)\n"
            "\n"
            "Decodes a trace recorded by ptrec (Intel PT plus the jpt JVM agent's metadata).\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "Run 'ptdecode COMMAND --help' for a command's options. With --verbose, every\n"
            "warning is printed; else the first of each kind and, at the end, how many more.\n"
            "Exit status: 0, also when data was lost (warned about and counted in the\n"
            "output); 1 when the trace cannot be read (one line: file, offset, reason);\n"
            "2 on a usage error.\n"
            "\n"
            "examples:\n"
            "  ptrec --emulate -o hello.trace -- java -cp samples/classes Hello\n"
            "  ptdecode hello.trace\n"
            "  ptdecode info hello.trace\n"
            "  ptdecode info hello.trace --json | python3 -m json.tool\n"
            "  ptdecode dump hello.trace --type NMETHOD_LOAD --pcs\n"
            "  ptdecode events hello.trace --summary\n");
}

int ptd_check(const char *dir, dc_check *c)
{
    char err[1024];
    if (dc_check_trace(dir, c, err, sizeof err) < 0) {
        jerr_error("%s", err);
        return -1;
    }
    for (guint i = 0; i < c->warnings->len; i++)
        jerr_warn_kind(g_ptr_array_index(c->kinds, i), "%s",
                       (const char *)g_ptr_array_index(c->warnings, i));
    return 0;
}

int main(int argc, char **argv)
{
    jerr_set_prog("ptdecode");
    /* --verbose is the same for every command: every warning of a kind
     * that comes in bulk, not the first and a count. */
    int kept = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--verbose"))
            jerr_set_verbose(true);
        else
            argv[kept++] = argv[i];
    }
    argc = kept;
    argv[argc] = NULL;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ptdecode %s\n", JPT_VERSION);
        return 0;
    }
    int rc = -1;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0] && rc < 0; i++)
        if (!strcmp(argv[1], commands[i].name))
            rc = commands[i].run(argc - 1, argv + 1);
    /* A trace directory alone: its summary. */
    struct stat st;
    if (rc < 0 && stat(argv[1], &st) == 0 && S_ISDIR(st.st_mode))
        rc = cmd_summary(argc, argv);
    if (rc < 0) {
        jerr_error("unknown command '%s' (try 'ptdecode --help')", argv[1]);
        return 2;
    }
    /* What went to standard output must have got there. */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        jerr_error("standard output: cannot write: %s", strerror(errno ? errno : EIO));
        return rc ? rc : 1;
    }
    return rc;
}
