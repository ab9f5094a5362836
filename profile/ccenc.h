/* Calling-context encoding: a context (the stack of method ids, outermost
 * first) as one integer that decodes back to the stack.
 *
 * Scheme (PCCE's numCC applied to the CCT of all threads' contexts, call
 * sites not distinguished): number the contexts by a preorder walk of the
 * finalized tree, children in (method, site) order. numCC(n) is the size of
 * n's subtree, and the id of a child is its parent's id plus 1 plus the
 * numCC of its earlier siblings: an additive value per call edge, so the id
 * can be kept up to date at each call and return by adding and subtracting
 * the edge's value, as PCCE does. The empty context (no frames) is 0.
 * Decoding descends from the root into the child whose id range
 * [id, id + numCC) holds the id: depth x fanout steps, no parent table.
 *
 * Limits: ids exist only for contexts the profile observed, and belong to
 * that profile (another run numbers differently). Recursion is no problem
 * (each depth of a recursion is its own CCT node) but deep recursion makes
 * many contexts. Ids fit 32 bits because the CCT's node count does. */
#ifndef JPT_PROFILE_CCENC_H
#define JPT_PROFILE_CCENC_H

#include <stdint.h>

#include "profile/cct.h"

/* The tree the ids refer to: t's contexts over all threads, finalized, call
 * sites dropped. NULL when memory runs out. */
pf_cct *pf_ccenc_tree(const pf_cct *t);

/* Id of stack[0 .. depth) in the encoding tree e, or -1 when e never saw
 * that context. */
int64_t pf_ccenc_encode(const pf_cct *e, const uint64_t *stack, uint32_t depth);
/* The value a call edge parent -> child adds to the id. */
int64_t pf_ccenc_edge(const pf_cct *e, int32_t child);
/* Fills stack (up to max frames, outermost first) and returns the depth,
 * or -1 when id is not a context of e. */
int64_t pf_ccenc_decode(const pf_cct *e, int64_t id, uint64_t *stack, uint32_t max);

#endif
