/* The difference of two profiles (ptdecode diff A B): their calling contexts
 * matched by the names of their methods (method ids are one run's own),
 * threads merged; per method and per context, each run's values. */
#ifndef JPT_PROFILE_DIFF_H
#define JPT_PROFILE_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "profile/cct.h"
#include "profile/hot.h"
#include "profile/names.h"

typedef struct pf_diff pf_diff;

/* The contexts of the finalized trees a and b (names from na, nb), times
 * scaled by ns_a and ns_b nanoseconds per tick when both are > 0 (then in
 * ns), else kept in ticks. NULL when out of memory. */
pf_diff *pf_diff_new(const pf_cct *a, const pf_names *na, double ns_a, const pf_cct *b,
                     const pf_names *nb, double ns_b);
void pf_diff_free(pf_diff *d);
/* Whether times are nanoseconds (both runs had a TSC frequency). */
bool pf_diff_time_ns(const pf_diff *d);

typedef struct pf_diff_row {
    uint32_t key;            /* a method (pf_diff_method_name) or a context (pf_diff_context) */
    uint64_t a, b;
} pf_diff_row;

/* Every method with its exclusive value of `by` in each run (calls for
 * calls), largest absolute change first (ties: larger value, then name). */
size_t pf_diff_methods(const pf_diff *d, pf_metric by, pf_diff_row **out);
/* Every context (a path of methods from the thread root) likewise. */
size_t pf_diff_contexts(const pf_diff *d, pf_metric by, pf_diff_row **out);
/* The totals of each run. */
void pf_diff_totals(const pf_diff *d, pf_metric by, uint64_t *a, uint64_t *b);

const char *pf_diff_method_name(const pf_diff *d, uint32_t method);
/* The methods of context `node`, outermost first; returns the depth and
 * fills up to max. */
uint32_t pf_diff_context(const pf_diff *d, uint32_t node, uint32_t *methods, uint32_t max);

/* A cct-json document of run b's values over the contexts of both, with
 * run a's as "baseline" (docs/PROFILES.md): the differential flame graph's
 * data. Returns 0, -1 on a write error. */
int pf_diff_export_json(FILE *out, const pf_diff *d, const char *title_a, const char *title_b);

#endif
