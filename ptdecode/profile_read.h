#ifndef JPT_PTDECODE_PROFILE_READ_H
#define JPT_PTDECODE_PROFILE_READ_H

#include "profile/cct.h"
#include "profile/hcct.h"
#include "profile/names.h"
#include "profile/source.h"
#include "profile/timebase.h"
#include "ptdecode/profile_opts.h"

/* Reads the flow of the trace in dir into sink, with o's --thread and
 * --from / --to (o may be NULL: every event) and a progress line on a
 * terminal. Returns 0; or -1 after printing the error, with *events (may be
 * NULL) telling how many events came before it; with fs, the pipeline's
 * counts are filled. */
int prof_read_flow_counted(const char *dir, const prof_opts *o, fl_sink sink, void *ctx,
                           uint64_t *events, pf_flow_stats *fs);
int prof_read_flow(const char *dir, const prof_opts *o, fl_sink sink, void *ctx);

/* A calling context tree being built from the flow: sequentially, or by
 * ParCCT with --threads. */
typedef struct prof_cct_build {
    pf_par *par;
    pf_seq *seq;
} prof_cct_build;

void prof_cct_build_init(prof_cct_build *b, const prof_opts *o);
int prof_cct_build_sink(const fl_event *ev, void *vb);
/* The finalized tree with --include / --exclude patterns applied, or NULL
 * (error printed). With nothing read (none), no tree. */
pf_cct *prof_cct_build_finish(prof_cct_build *b, const char *dir, const prof_opts *o,
                              bool none);

/* The finalized CCT of the trace, or NULL (error printed). When the flow
 * breaks off after some events, the tree of what came before is returned
 * and *partial set (the commands report it and exit with 1). With tap,
 * every event goes to it too; with fs, the pipeline's counts are filled. */
pf_cct *prof_build_cct_tapped(const char *dir, const prof_opts *o, bool *partial, fl_sink tap,
                              void *tap_ctx, pf_flow_stats *fs);
pf_cct *prof_build_cct(const char *dir, const prof_opts *o, bool *partial);

/* The trace's names (NULL after printing why), which --thread reads too:
 * kept in o->names. */
pf_names *prof_load_names(const char *dir, prof_opts *o);
/* The trace's TSC frequency (or --tsc-hz's). A damaged info.json costs the
 * real units only: times stay in ticks, with a warning. */
pf_timebase prof_load_timebase(const char *dir, const prof_opts *o);

#endif
