/* Agreement of two runs of the same deterministic program: a traced run
 * against the agent's reference mode (exact calls; with -Xint and single
 * steps, exact bytecodes). `ptdecode compare` prints it.
 *
 * Both flows go through pf_flow_source, so the traced one is what every
 * profile sees. Methods are matched by name (the agent's ids differ between
 * runs), with hidden classes' addresses and lambda numbers normalized. Only
 * the selected methods count (by default every class outside the JDK: the
 * program's own), and a calling context is the path of selected methods
 * from the thread's root: JDK frames between them are left out, so the
 * context of the program's code does not depend on how the JDK reached it.
 *
 * Measures, each the sum over keys of the smaller count over the sum of the
 * larger (100% when both runs agree exactly):
 *   - calls per calling context, over all threads and per thread (threads
 *     matched by name, then by order of their thread ids);
 *   - calls per method;
 *   - where the reference has bytecodes (single steps): bytecodes per
 *     (method, bci), and the aligned sequence agreement of the thread that
 *     ran most selected bytecodes in each run (seq_aligned, over the longer
 *     sequence).
 * The share of the selected bytecodes that ran compiled is the traced run's
 * interpreted bytecodes (exact: every template is traced) against the
 * reference's, or, without reference bytecodes, the traced run's own
 * compiled and interpreted counts. */
#ifndef JPT_PROFILE_COMPARE_H
#define JPT_PROFILE_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "reconstruct/flow.h"

typedef struct pf_compare pf_compare;

/* classes: NULL-terminated class-name prefixes (internal "pkg/Cls" or
 * dotted form; a name matches the class and its nested classes), or NULL
 * for every class outside the JDK; all selects every method. */
pf_compare *pf_compare_new(const char *const *classes, bool all);
void pf_compare_free(pf_compare *c);

/* Reads run `run` (0 traced, 1 reference) from trace directory dir, the
 * reference first: the traced run's bytecode sequences are kept only when
 * the reference has bytecodes to align them with. Returns 0, 1 when the
 * flow broke off part way (what came before is kept), -1 with a message in
 * err. */
int pf_compare_read(pf_compare *c, int run, const char *dir, char *err, size_t errlen);

typedef struct pf_agreement {
    uint64_t min_sum, max_sum;   /* agreement = min_sum / max_sum */
    uint64_t total[2];           /* counts per run */
    uint32_t keys[2];            /* keys with a nonzero count per run */
} pf_agreement;

double pf_agreement_pct(const pf_agreement *a);

typedef struct pf_compare_result {
    pf_agreement contexts, methods, bytecodes;
    bool have_bytecodes;         /* the reference has bytecodes */
    /* the traced run's selected bytecodes, interpreted and compiled */
    uint64_t interpreted, compiled;
    /* aligned sequences (have_bytecodes): matched over the longer one */
    uint64_t seq_matched, seq_len[2];
    bool traced_is_reference;    /* run 0 is a reference-mode trace too */
    bool reference_is_traced;    /* run 1 is no reference-mode trace */
} pf_compare_result;

/* Computes the measures (after both reads). */
void pf_compare_result_get(pf_compare *c, pf_compare_result *r);

/* The report: text, or one JSON object; the worst keys of each measure. */
void pf_compare_print(pf_compare *c, FILE *out, bool json, int worst);

#endif
