/* Hot calling context tree (HCCT): the (phi, epsilon)-heavy-hitter calling
 * contexts of a flow in space ~ 1/epsilon, after D'Elia, Demetrescu and
 * Finocchi, "Mining hot calling contexts in small space" (Algorithm 2).
 *
 * The stream is the sequence of contexts entered (one per FL_CALL, all
 * threads together, call sites not distinguished). Space Saving keeps at
 * most ceil(1/epsilon) monitored contexts with counters; an unmonitored
 * context that arrives replaces the one with the smallest counter and
 * inherits that counter + 1. The minimum comes from a lazy min-priority
 * queue: counters grow without touching the heap, and a popped entry whose
 * key is stale is pushed back with its current counter until the top is
 * exact. The tree kept (the MCCT) holds the monitored contexts, their
 * ancestors, and the frames on the threads' stacks; a node that is none of
 * these is freed at once. At the end the contexts with counter >=
 * phi * N (N the stream length) are hot; the HCCT is them and their
 * ancestors. Guarantees: every context with true frequency >= phi * N is
 * hot (no false negatives, given epsilon < phi), and each counter
 * overestimates its context's frequency by at most epsilon * N. */
#ifndef JPT_PROFILE_HCCT_H
#define JPT_PROFILE_HCCT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "profile/cct.h"
#include "profile/names.h"
#include "reconstruct/flow.h"

typedef struct pf_hcct pf_hcct;

/* 0 < epsilon < phi < 1. NULL on bad parameters. include: origins counted
 * (NULL: all). */
pf_hcct *pf_hcct_new(double phi, double epsilon, const bool *include);
void pf_hcct_free(pf_hcct *h);
int pf_hcct_sink(const fl_event *ev, void *hcct);   /* fl_sink */

/* Enters a context directly: the child `method` of the context `parent`
 * (0 the empty context) and counts it; returns its node. For synthetic
 * streams; pf_hcct_release drops the reference the caller holds. */
int32_t pf_hcct_enter(pf_hcct *h, int32_t parent, uint64_t method);
void pf_hcct_release(pf_hcct *h, int32_t node);

uint64_t pf_hcct_stream_length(const pf_hcct *h);
uint32_t pf_hcct_capacity(const pf_hcct *h);       /* counters: ceil(1/epsilon) */
uint32_t pf_hcct_peak_nodes(const pf_hcct *h);     /* most MCCT nodes at once */

/* The HCCT as a finalized tree (no thread roots: node 0 is the empty
 * context): hot contexts and their ancestors, calls = the counter of a
 * monitored context (0 for an ancestor that is not monitored). hot[i] (g_free)
 * tells the hot ones. */
pf_cct *pf_hcct_tree(const pf_hcct *h, bool **hot);

typedef struct pf_hcct_accuracy {
    uint32_t exact_hot;        /* contexts with true calls >= phi * N */
    uint32_t reported_hot;     /* contexts the HCCT reports hot */
    uint32_t false_positives;  /* reported hot with true calls < phi * N */
    uint32_t false_negatives;  /* exact hot not reported (0 by the guarantee) */
    double degree_of_overlap;  /* share of N in contexts present in the HCCT */
    double hot_edge_coverage;  /* share of exact hot contexts reported hot */
    double max_counter_error;  /* max over reported of (counter - true) / true */
    double avg_counter_error;  /* their mean */
    uint32_t hcct_nodes, cct_nodes;
} pf_hcct_accuracy;

/* Compares with the exact CCT (any tree: its threads are merged and call
 * sites dropped). */
int pf_hcct_accuracy_of(const pf_hcct *h, const pf_cct *exact, pf_hcct_accuracy *acc);

/* "jpt-hcct" version 1 JSON (docs/PROFILES.md); acc may be NULL. */
int pf_hcct_export_json(FILE *out, const pf_hcct *h, const pf_names *names,
                        const pf_hcct_accuracy *acc);

#endif
