/* pprof: the calling context tree as a gzipped profile.proto (the format
 * of github.com/google/pprof's profile.proto, read by `go tool pprof`,
 * speedscope and others). docs/PROFILES.md has the mapping. */
#ifndef JPT_PROFILE_PPROF_H
#define JPT_PROFILE_PPROF_H

#include <stdio.h>

#include "profile/cct.h"
#include "profile/names.h"
#include "reconstruct/program.h"

/* Writes the finalized tree t: one sample per node with a value, its stack
 * of functions innermost first, values calls, bytecodes and time (ns with
 * tsc_hz > 0, else ticks), a "thread" label; functions named as the reports
 * name methods, with the JVM name as system name, and, when prog is given,
 * their source file and first line. Returns 0, -1 on a write or memory
 * error. */
int pf_export_pprof(FILE *out, const pf_cct *t, const pf_names *names, const rc_program *prog,
                    double tsc_hz);

#endif
