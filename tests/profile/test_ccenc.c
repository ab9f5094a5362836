/* Calling-context encoding: every context of a random CCT encodes to an id
 * that decodes back to it; ids are dense and edge values add up. */
#include <criterion/criterion.h>
#include <glib.h>

#include "profile/ccenc.h"

Test(ccenc, round_trip)
{
    GRand *r = g_rand_new_with_seed(3);
    pf_cct_opts o = pf_cct_default_opts();
    o.call_sites = true;     /* dropped by the encoding tree */
    pf_cct *t = pf_cct_new(&o);
    for (int tid = 1; tid <= 3; tid++) {
        int32_t root = pf_cct_thread_root(t, (uint32_t)tid);
        for (int k = 0; k < 400; k++) {
            int32_t n = root;
            int depth = g_rand_int_range(r, 1, 12);
            for (int d = 0; d < depth; d++) {
                /* recursion included: the same method at several depths */
                n = pf_cct_child(t, n, (uint64_t)g_rand_int_range(r, 1, 5), g_rand_int_range(r, 0, 3));
                t->nodes[n].calls++;
            }
        }
    }
    pf_cct *e = pf_ccenc_tree(t);
    cr_assert_not_null(e);
    uint64_t stack[64];
    for (uint32_t id = 0; id < e->count; id++) {
        int64_t depth = pf_ccenc_decode(e, id, stack, 64);
        cr_assert_geq(depth, 0);
        cr_assert_eq(pf_ccenc_encode(e, stack, (uint32_t)depth), (int64_t)id);
        /* The id is the sum of the edge values along the path. */
        int64_t sum = 0;
        for (int32_t n = (int32_t)id; n > 0; n = e->nodes[n].parent)
            sum += pf_ccenc_edge(e, n);
        cr_assert_eq(sum, (int64_t)id);
    }
    cr_assert_eq(pf_ccenc_decode(e, e->count, stack, 64), -1);
    cr_assert_eq(pf_ccenc_decode(e, -5, stack, 64), -1);
    uint64_t never[] = { 99 };
    cr_assert_eq(pf_ccenc_encode(e, never, 1), -1);
    cr_assert_eq(pf_ccenc_encode(e, NULL, 0), 0);
    pf_cct_free(e);
    pf_cct_free(t);
    g_rand_free(r);
}
