/* HCCT units: synthetic context streams with known heavy hitters. */
#include <criterion/criterion.h>
#include <glib.h>
#include <math.h>

#include "profile/hcct.h"

/* A stream over a tree of contexts: each step enters a random path of
 * depth 1..4 below the root, drawn so that a few hot paths take most of the
 * calls. Exact counts are kept alongside, per context, as a CCT. */
static void stream(pf_hcct *h, pf_cct *exact, GRand *r, uint32_t steps)
{
    static const uint64_t hot_paths[3][3] = { { 1, 2, 3 }, { 1, 4, 0 }, { 5, 6, 7 } };
    for (uint32_t s = 0; s < steps; s++) {
        uint64_t p[4];
        int depth;
        if (g_rand_double(r) < 0.3) {
            int k = g_rand_int_range(r, 0, 3);
            depth = hot_paths[k][2] ? 3 : 2;
            for (int d = 0; d < depth; d++)
                p[d] = hot_paths[k][d];
        } else {
            depth = g_rand_int_range(r, 1, 5);
            for (int d = 0; d < depth; d++)
                p[d] = (uint64_t)g_rand_int_range(r, 10, 60);
        }
        /* Enter the whole path (each prefix is a context occurrence), then
         * leave it. */
        int32_t nodes[4];
        int32_t parent = 0;
        int32_t tnode = pf_cct_thread_root(exact, 1);
        for (int d = 0; d < depth; d++) {
            nodes[d] = parent = pf_hcct_enter(h, parent, p[d]);
            tnode = pf_cct_child(exact, tnode, p[d], -1);
            exact->nodes[tnode].calls++;
        }
        for (int d = depth - 1; d >= 0; d--)
            pf_hcct_release(h, nodes[d]);
    }
}

Test(hcct, heavy_hitters_found_with_bounded_error)
{
    GRand *r = g_rand_new_with_seed(42);
    double phi = 0.02, eps = 0.002;
    pf_hcct *h = pf_hcct_new(phi, eps, NULL);
    cr_assert_not_null(h);
    pf_cct_opts o = pf_cct_default_opts();
    pf_cct *exact = pf_cct_new(&o);
    stream(h, exact, r, 50000);
    uint64_t n = pf_hcct_stream_length(h);
    pf_hcct_accuracy acc;
    cr_assert_eq(pf_hcct_accuracy_of(h, exact, &acc), 0);
    cr_assert_gt(acc.exact_hot, 5);
    cr_assert_eq(acc.false_negatives, 0, "every phi-heavy context is reported");
    cr_assert_float_eq(acc.hot_edge_coverage, 1.0, 1e-9);
    /* Counter error <= eps * N: relative to a hot context's true count
     * (>= phi * N) that is <= eps / phi. */
    cr_assert_leq(acc.max_counter_error, eps / phi * (1 + 1e-9) + 1.0 / (phi * (double)n));
    cr_assert_leq(acc.avg_counter_error, acc.max_counter_error);
    cr_assert_gt(acc.degree_of_overlap, 0.3);
    /* The known hot contexts are there. */
    bool *hot;
    pf_cct *t = pf_hcct_tree(h, &hot);
    int32_t a = pf_cct_find(t, 0, 1, -1);
    int32_t b = a >= 0 ? pf_cct_find(t, a, 2, -1) : -1;
    int32_t c = b >= 0 ? pf_cct_find(t, b, 3, -1) : -1;
    cr_assert(c > 0 && hot[c]);
    /* Memory ~ 1/eps counters plus their ancestors, not the stream's contexts. */
    cr_assert_leq(pf_hcct_peak_nodes(h), 4 * pf_hcct_capacity(h) + 8);
    cr_assert_lt(t->count, acc.cct_nodes);
    g_free(hot);
    pf_cct_free(t);
    pf_cct_free(exact);
    pf_hcct_free(h);
    g_rand_free(r);
}

Test(hcct, exact_when_counters_suffice)
{
    /* Fewer distinct contexts than counters: every counter is exact. */
    pf_hcct *h = pf_hcct_new(0.1, 0.01, NULL);
    pf_cct_opts o = pf_cct_default_opts();
    pf_cct *exact = pf_cct_new(&o);
    GRand *r = g_rand_new_with_seed(1);
    for (int s = 0; s < 1000; s++) {
        uint64_t m = (uint64_t)g_rand_int_range(r, 1, 6);
        int32_t n = pf_hcct_enter(h, 0, m);
        int32_t e = pf_cct_child(exact, pf_cct_thread_root(exact, 1), m, -1);
        exact->nodes[e].calls++;
        pf_hcct_release(h, n);
    }
    pf_hcct_accuracy acc;
    pf_hcct_accuracy_of(h, exact, &acc);
    cr_assert_eq(acc.max_counter_error, 0);
    cr_assert_eq(acc.false_positives, 0);
    cr_assert_eq(acc.reported_hot, acc.exact_hot);
    pf_cct_free(exact);
    pf_hcct_free(h);
    g_rand_free(r);
}

Test(hcct, bad_parameters)
{
    cr_assert_null(pf_hcct_new(0.01, 0.1, NULL));
    cr_assert_null(pf_hcct_new(1.5, 0.1, NULL));
    cr_assert_null(pf_hcct_new(0.1, 0, NULL));
}

Test(hcct, flow_sink_follows_stacks)
{
    pf_hcct *h = pf_hcct_new(0.1, 0.05, NULL);
    fl_event e = { .tid = 1 };
    e.kind = FL_SEGMENT;
    uint64_t st[] = { 9 };
    e.stack = st;
    e.depth = 1;
    pf_hcct_sink(&e, h);
    for (int k = 0; k < 100; k++) {
        e.kind = FL_CALL;
        e.method_id = 3;
        pf_hcct_sink(&e, h);
        e.kind = FL_RETURN;
        pf_hcct_sink(&e, h);
    }
    e.kind = FL_RETURN;      /* leaves 9 */
    pf_hcct_sink(&e, h);
    e.kind = FL_RETURN;      /* nothing left: ignored */
    pf_hcct_sink(&e, h);
    cr_assert_eq(pf_hcct_stream_length(h), 100);
    bool *hot;
    pf_cct *t = pf_hcct_tree(h, &hot);
    int32_t nine = pf_cct_find(t, 0, 9, -1);
    cr_assert_gt(nine, 0);
    int32_t three = pf_cct_find(t, nine, 3, -1);
    cr_assert(three > 0 && hot[three] && !hot[nine]);
    cr_assert_eq(t->nodes[three].calls, 100);
    g_free(hot);
    pf_cct_free(t);
    pf_hcct_free(h);
}
