/* Line and branch coverage of a flow, written as an lcov tracefile.
 *
 * Every FL_BYTECODE event counts an execution of its instruction (method,
 * bci). A conditional branch (if*, ifnull, ifnonnull) or switch (tableswitch,
 * lookupswitch) learns where it went from the next bytecode of the same
 * thread: when that is in the same method with no call, return or segment in
 * between, the successor edge leading to its bci is counted (otherwise the
 * outcome is unknown and nothing is counted for it).
 *
 * Per source file (package/File.java, from the class's SourceFile attribute,
 * else from the outer class's name), for the methods with code of every
 * class with at least one executed method (or only the classes a glob
 * selects):
 *   - a line's hits are the most executions of any instruction on it
 *     (the LineNumberTable maps instructions to lines), so a loop's line
 *     counts iterations and a line entered once counts one;
 *   - a function's hits are its calls (FL_CALL events), or 1 when it ran
 *     but was already running where the flow starts;
 *   - a branch instruction gives one lcov branch per distinct successor:
 *     for an if, branch 0 is the jump taken and branch 1 the fall-through;
 *     for a switch, its cases' targets in order (duplicates merged), the
 *     default among them; "-" when the instruction never ran.
 * Only interpreted code has bytecode events: JIT-compiled code adds calls
 * but no lines (record with -Xint for full line coverage). */
#ifndef JPT_PROFILE_COVERAGE_H
#define JPT_PROFILE_COVERAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "reconstruct/flow.h"
#include "reconstruct/program.h"

typedef struct pf_cov pf_cov;

/* Counts events of the origins include[] selects (all when NULL). */
pf_cov *pf_cov_new(rc_program *prog, const bool *include);
void pf_cov_free(pf_cov *c);
int pf_cov_sink(const fl_event *ev, void *cov);   /* fl_sink */

typedef struct pf_cov_totals {
    uint64_t files, functions, functions_hit, lines, lines_hit, branches, branches_hit;
    uint64_t unknown_events;   /* bytecodes of methods or bcis the program does not have */
} pf_cov_totals;

/* Writes the tracefile: test_name on TN: (letters, digits, '_' kept; others
 * become '_'), classes selected by class_glob on the class name in internal
 * or Java form ("Branchy*", "com/example/?*", "com.example.?*"; "*" every
 * class; NULL: every class outside the JDK that ran). Returns 0, -1 on a write
 * error; totals (may be NULL) tell what was written. */
int pf_cov_write_lcov(FILE *out, pf_cov *c, const char *test_name, const char *class_glob,
                      pf_cov_totals *totals);

/* Whether the class (internal name) is in a package of the JDK's own
 * modules (java/, javax/, jdk/, sun/, com/sun/, ...). */
bool pf_cov_jdk_class(const char *klass);

/* The source file of m's class as lcov names it ("java/lang/String.java",
 * from the SourceFile attribute, else the outer class's name), made safe
 * from hostile class files; g_free it. */
char *pf_cov_source_path(const rc_method *m);

#endif
