/* Hot methods: per-method totals over all calling contexts of a CCT. */
#ifndef JPT_PROFILE_HOT_H
#define JPT_PROFILE_HOT_H

#include <stddef.h>
#include <stdint.h>

#include "profile/cct.h"

typedef enum pf_metric { PF_BY_BYTECODES, PF_BY_TIME, PF_BY_CALLS } pf_metric;

/* "bytecodes" / "time" / "calls" -> metric; -1 when unknown. */
int pf_metric_parse(const char *s);
const char *pf_metric_name(pf_metric m);

typedef struct pf_hot_method {
    uint64_t method;
    uint64_t calls;
    uint64_t self_bytecodes, self_time;
    /* Inclusive, counting each activation once: a recursive method's inner
     * activations are inside the outermost one. */
    uint64_t bytecodes, time;
} pf_hot_method;

/* Every method of the finalized tree t, hottest first by `by` (exclusive
 * bytecodes, exclusive time, or calls; ties by method id). Returns the
 * count; *out is g_free'd by the caller. */
size_t pf_hot_methods(const pf_cct *t, pf_metric by, pf_hot_method **out);
uint64_t pf_hot_value(const pf_hot_method *h, pf_metric by);

/* The self value of a node for a metric. */
uint64_t pf_node_self(const pf_node *n, pf_metric by);

#endif
