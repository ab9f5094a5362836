#ifndef JPT_PTDECODE_PROFILE_OPTS_H
#define JPT_PTDECODE_PROFILE_OPTS_H

#include <stdbool.h>
#include <stdio.h>

#include <glib.h>

#include "profile/cct.h"
#include "profile/focus.h"
#include "profile/hot.h"
#include "profile/names.h"

/* The profile commands' options (profile_opts.c). */
typedef struct prof_opts {
    pf_cct_opts cct;
    unsigned threads;        /* builder workers; 1: sequential */
    pf_metric by;
    bool json, per_thread, list;
    bool simple;             /* method names without parameters */
    const char *output, *title, *classes;
    GPtrArray *formats, *outputs;   /* export: --format and -o, in order */
    double phi, epsilon, tsc_hz;
    long top;
    bool by_set, top_set;    /* given on the command line */
    pf_focus *focus;         /* --include / --exclude PATTERN */
    GPtrArray *thread_sel;   /* --thread NAME|TID values; NULL: every thread */
    const pf_names *names;   /* of the trace being read: thread names for --thread */
    /* --from / --to: a time since the flow's first event (ns), or a share of
     * the run (percent); 'n' unset, 't' time, '%' share */
    char from_kind, to_kind;
    double from, to;
} prof_opts;

/* Parses argv into *o (defaults first; --jobs and --no-cache go to
 * pf_source_set_options). Returns 0 to go on, 1 when --help was printed
 * (by usage), 2 on a usage error (printed). prof_opts_free frees it. */
int prof_parse_opts(int argc, char **argv, prof_opts *o, void (*usage)(FILE *));
void prof_opts_free(prof_opts *o);

/* The usage lines of the shared options, for each command's usage. */
extern const char *const prof_shared_options;

#endif
